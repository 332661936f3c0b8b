#!/bin/bash
# Sweep resumability against a real coordinator with no workers (nothing renders, so the state
# is exact): a second run submits nothing while the jobs are queued; outputs that appear in the
# store count as done; after the batch is cancelled, a third run submits exactly the pairs that
# still have no output, as a second batch in the same manifest.
# usage: sweep_resume.sh VDN WORKDIR PYTHON
set -euo pipefail
vdn=$1 work=$2 py=$3
rm -rf "$work"
mkdir -p "$work/store"
cd "$work"
read -r p1 p2 < <("$py" -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1", 0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
ep=tcp://127.0.0.1:$p2
"$vdn" coordinator --db "$work/vdn.db" --bind tcp://127.0.0.1:$p1 --client-bind $ep \
  --store "file://$work/store" > coordinator.log 2>&1 &
coord=$!
trap 'kill $coord 2>/dev/null || true; wait $coord 2>/dev/null || true' EXIT
"$vdn" eval suite init "$work/suite" --text-dim 8 --prompts 4 > /dev/null
sweep() { "$vdn" eval sweep "$work/suite/suite.jsonl" --variants dense@50,vdn@8 --coordinator $ep \
  --store "file://$work/store" --tag resume 2>&1; }
for i in $(seq 50); do sweep > run1.log && break; sleep 0.2; done # the coordinator may still be starting
grep -q "8 pairs: 0 done, 0 queued or running, 8 to submit" run1.log
sweep > run2.log
grep -q "8 pairs: 0 done, 8 queued or running, 0 to submit" run2.log
for p in p001 p003; do # two outputs appear (as if rendered elsewhere)
  mkdir -p "$work/store/eval/resume/$p/vdn_8"
  echo x > "$work/store/eval/resume/$p/vdn_8/out.safetensors"
  echo {} > "$work/store/eval/resume/$p/vdn_8/out.json"
done
sweep > run3.log
grep -q "8 pairs: 2 done, 6 queued or running, 0 to submit" run3.log
batch=$(grep -o "batch b[0-9]*" run1.log | head -1 | cut -d' ' -f2)
"$vdn" cancel "$batch" --coordinator $ep > /dev/null
sweep > run4.log
grep -q "8 pairs: 2 done, 0 queued or running, 6 to submit" run4.log
"$py" - "$work/suite/sweeps/resume.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
assert len(m["batches"]) == 2, m["batches"]
done = {(q["prompt"], q["variant"]) for q in m["pairs"] if q.get("batch_id") == m["batches"][0]}
again = {(q["prompt"], q["variant"]) for q in m["pairs"] if q.get("batch_id") == m["batches"][1]}
assert len(again) == 6 and ("p001", "vdn@8") not in again and ("p003", "vdn@8") not in again, again
assert len(m["pairs"]) == 8 and m["baseline"] == "dense@50"
print("ok: resumed sweep submitted exactly the 6 pairs without output")
PY
# Keyframe pictures travel with the text: a local picture as its absolute path, or (with
# --upload-caches) as its key in the store, where it is uploaded once; a store key as written.
mkdir -p "$work/pics/kf"
"$py" - "$work/pics" <<'PY'
import json, sys
d = sys.argv[1]
for n in ["a_first", "b_first", "b_last"]:
    open(f"{d}/kf/{n}.png", "wb").write(b"\x89PNG not decoded by the sweep " + n.encode())
base = {"seed": 1, "frames": 22, "height": 32, "width": 32}
items = [dict(base, id="a", mode="i2va", prompt="a kite", first_frame="kf/a_first.png"),
         dict(base, id="b", mode="fl2va", prompt="a gull", first_frame="kf/b_first.png",
              last_frame="kf/b_last.png"),
         dict(base, id="c", mode="l2va", prompt="a dune", last_frame="shared/c_last.png")]
open(f"{d}/suite.jsonl", "w").write("".join(json.dumps(i) + "\n" for i in items))
PY
for up in "" --upload-caches; do
  "$vdn" eval sweep "$work/pics/suite.jsonl" --variants vdn@8 --coordinator $ep \
    --store "file://$work/store" --tag "pics$up" $up > pics$up.log 2>&1
done
"$py" - "$work/vdn.db" "$work/pics" "$work/store" <<'PY'
import json, os, sqlite3, sys
db, pics, store = sys.argv[1:]
rows = sqlite3.connect(db).execute("SELECT tag, request FROM jobs WHERE tag LIKE '_/vdn@8'").fetchall()
got = {}
for tag, req in rows:
    r = json.loads(req)
    got.setdefault(tag, []).append((r.get("prompt"), r.get("prompt_cache"), r.get("first_frame"), r.get("last_frame")))
want_local = {"a/vdn@8": ("a kite", None, f"{pics}/kf/a_first.png", None),
              "b/vdn@8": ("a gull", None, f"{pics}/kf/b_first.png", f"{pics}/kf/b_last.png"),
              "c/vdn@8": ("a dune", None, None, "shared/c_last.png")}
up = lambda i, w: f"eval/pics--upload-caches/inputs/{i}_{w}.png"
want_up = {"a/vdn@8": ("a kite", None, up("a", "first"), None),
           "b/vdn@8": ("a gull", None, up("b", "first"), up("b", "last")),
           "c/vdn@8": ("a dune", None, None, "shared/c_last.png")}
for tag in want_local:
    assert sorted(got.get(tag, [])) == sorted([want_local[tag], want_up[tag]]), (tag, got.get(tag))
for k in [up("a", "first"), up("b", "first"), up("b", "last")]:
    w = k.split("/")[-1].replace(".png", "")
    assert open(f"{store}/{k}", "rb").read() == open(f"{pics}/kf/{w}.png", "rb").read(), k
print("ok: sweep jobs carry the pictures (absolute paths; store keys uploaded with --upload-caches)")
PY
