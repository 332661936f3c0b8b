#!/bin/bash
# Scoring a whole suite at small size: the single `vdn eval report` process against scoring jobs
# on a CPU farm of N workers (`vdn eval score`) plus the report gathering their results. Not a
# ctest (minutes); docs/eval.md "Scoring on the farm" has its numbers.
# usage: bench_scoring.sh VDN WORKDIR SUITE.jsonl [WORKERS=3] [FRAMES=39] [SIZE=64] [VARIANTS]
# SUITE: a complete suite (e.g. h3-103 after `vdn eval suite keyframes`); its lines are rendered
# at FRAMES frames, SIZE x SIZE, one step.
set -euo pipefail
vdn=$1 work=$2 suite=$3 workers=${4:-3} frames=${5:-39} size=${6:-64}
variants=${7:-dense@50,vdn@8,vdn@8:fp8}
rm -rf "$work"
mkdir -p "$work/suite"
cd "$work"
cleanup() { "$vdn" up "$work/farm" --stop >/dev/null 2>&1 || true; }
trap cleanup EXIT
"$vdn" ckpt init --preset tiny --vdn --vae --text-encoder --out ckpt >/dev/null
rm -rf ckpt/base/audio_vae
"$vdn" up farm --cpu --workers "$workers" --precision bf16,fp8 --detach --checkpoint "$work/ckpt" \
  --data-root "$(dirname "$(readlink -f "$suite")")" >/dev/null
python3 - "$suite" suite/suite.jsonl "$frames" "$size" <<'PY'
import json, os, sys
src, dst, frames, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
base = os.path.dirname(os.path.abspath(src))
out = []
for l in open(src):
    if not l.startswith("{"):
        continue
    it = json.loads(l)
    for k in ("first_frame", "last_frame"):
        if k in it and not it[k].startswith("/"):
            it[k] = os.path.join(base, it[k])
    it.update(frames=frames, height=size, width=size)
    out.append(json.dumps(it))
open(dst, "w").write("\n".join(out) + "\n")
PY
"$vdn" eval sweep suite/suite.jsonl --variants "$variants" --dir farm --steps-override 1 --tag b \
  --wait >/dev/null
now() { date +%s.%N; }
t0=$(now)
"$vdn" eval report suite/sweeps/b.json --out report_local --resamples 1000 >/dev/null 2>&1
t1=$(now)
"$vdn" eval score suite/sweeps/b.json --dir farm --wait >/dev/null 2>&1
t2=$(now)
"$vdn" eval report suite/sweeps/b.json --out report_farm --resamples 1000 >/dev/null 2>&1
t3=$(now)
python3 - "$t0" "$t1" "$t2" "$t3" "$workers" report_farm/report.json farm/store/eval/b/scores <<'PY'
import glob, json, sys
t0, t1, t2, t3 = map(float, sys.argv[1:5])
res = [json.load(open(p)) for p in glob.glob(sys.argv[7] + "/*/*.json")]
busy = sum(r["seconds"] for r in res)
print(f"outputs {len(res)}; single process {t1 - t0:.1f} s; farm ({sys.argv[5]} workers) scoring "
      f"{t2 - t1:.1f} s (job seconds summed {busy:.1f}) + gather {t3 - t2:.1f} s = {t3 - t1:.1f} s")
PY
