#!/usr/bin/env bash
# Speed before/after in ONE device run: ops/device/kernels.sh (ops/device/build.sh, `vdn bench`,
# 2-block H3-shaped whole renders; no tests, no sanitizer unless TESTS / SANITIZE say so) on an
# older tree and on this one, then the per-op table of both bench JSONs side by side and the
# renders' s/NFE.
#   OUT=dir bash ops/device/ab.sh OLD_TREE   (OLD_TREE: `git archive <commit>` unpacked, from a
#                                             commit that has ops/device/build.sh; it uses this
#                                             tree's .devcarry/)
# The lead's call: run(carry=[".devcarry/deb", "old"], command="OUT=$OUT bash ops/device/ab.sh old")
# (old/ an ignored folder here). BENCH_ARGS and the other kernels.sh switches pass through.
# At most 8 files come back from the device: old/new bench.json, summaries, the render logs.
set -uo pipefail
OUT=${OUT:-/tmp/vdn-ab}
OLD=${1:?usage: ab.sh OLD_TREE}
[ -f "$OLD/ops/device/build.sh" ] || { echo "ab.sh: $OLD has no ops/device/build.sh (too old a commit)"; exit 1; }
W=$(mktemp -d)
mkdir -p "$OUT"
[ -e "$OLD/.devcarry" ] || ln -s "$(pwd)/.devcarry" "$OLD/.devcarry"
run_tree() { # name dir extra-env...
  local name=$1 dir=$2
  shift 2
  (cd "$dir" && env "$@" OUT="$W/$name" H3RENDER=1 TESTS=${TESTS:-0} SANITIZE=${SANITIZE:-0} \
    timeout ${TREE_TIMEOUT:-280} bash ops/device/kernels.sh /nonexistent) > "$W/$name.summary" 2>&1
  echo "$name: kernels.sh exit $?"
}
t0=$(date +%s)
run_tree old "$OLD"
run_tree new . H3_REUSE=1 # the same checkpoint files as the old tree's renders
echo "both trees: $(( $(date +%s) - t0 )) s"
for n in old new; do
  cp "$W/$n/bench.json" "$OUT/$n-bench.json" 2>/dev/null
  { cat "$W/$n.summary"; echo "--- h3render.log"; cat "$W/$n/h3render.log" 2>/dev/null; } > "$OUT/$n-summary.txt"
done
cat "$W/new/test.log" > "$OUT/new-tests.txt" 2>/dev/null
python3 - "$OUT/old-bench.json" "$OUT/new-bench.json" <<'EOF' | tee "$OUT/ab-table.txt"
import json, sys
def load(p):
    try:
        return json.load(open(p))
    except Exception as e:
        print(f"{p}: {e}")
        return {"ops": {}, "summed": {}}
old, new = load(sys.argv[1]), load(sys.argv[2])
print(f"{'op (ms, median)':58s} {'old':>10s} {'new':>10s} {'new/old':>8s}")
for sect in ("ops", "summed"):
    for k, v in new.get(sect, {}).items():
        o = old.get(sect, {}).get(k)
        nm, om = v.get("ms") if isinstance(v, dict) else v, (o.get("ms") if isinstance(o, dict) else o)
        if nm is None: continue
        r = f"{nm / om:8.3f}" if om else "       -"
        print(f"{k[:58]:58s} {om if om is not None else float('nan'):10.3f} {nm:10.3f} {r}")
EOF
for n in old new; do
  echo "$n renders:"; grep -E "h3 render|s/NFE|nfe|timing" "$W/$n/h3render.log" 2>/dev/null | head -8
done
