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
