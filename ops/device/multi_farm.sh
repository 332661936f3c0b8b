#!/usr/bin/env bash
# The farm end to end on one machine (issue 14 item 5; ops/device/multi.sh phase farm): `vdn up`
# with one worker on all N GPUs, a small random checkpoint with VAEs, one batch of N one-GPU jobs,
# one N-GPU job and (N >= 4) one 2-GPU job, watched to the end; then the checks: every job done
# once, an mp4 per job in the store, the k-GPU jobs' run records saying k ranks over NCCL (over
# the in-process communicator on CPU engines), the N one-GPU jobs on N different GPUs.
#   multi_farm.sh VDN WORKDIR N REPORT.json
# FARM_CPU=1: N CPU engines behind a stand-in nvidia-smi (how it is checked without a GPU; tiny
# preset). Prints what it checked; exit 0 when every check passed.
set -uo pipefail
VDN=$1 W=$2 N=$3 REPORT=$4
PRESET=small SIZE=128 COMM=nccl
rm -rf "$W" && mkdir -p "$W"
if [ "${FARM_CPU:-0}" = 1 ]; then
  PRESET=tiny SIZE=32 COMM=inproc
  printf '#!/bin/sh\ncase "$*" in *--query-gpu=index,name,memory.total*) ;; *) exit 9;; esac\n' > "$W/nvidia-smi"
  for i in $(seq 0 $((N - 1))); do echo "echo \"$i, stand-in GPU, 81559\"" >> "$W/nvidia-smi"; done
  chmod +x "$W/nvidia-smi"
  export VDN_NVIDIA_SMI=$W/nvidia-smi
fi
t0=$(date +%s)
"$VDN" ckpt init --preset $PRESET --vdn --vae --out "$W/ck" > "$W/ckpt.log" 2>&1 ||
  { echo "farm: vdn ckpt init failed:"; tail -5 "$W/ckpt.log"; exit 1; }
F=$W/farm
"$VDN" up "$F" --detach --workers 1 --gpus all --checkpoint "$W/ck" > "$W/up.log" 2>&1 ||
  { echo "farm: vdn up failed:"; tail -20 "$W/up.log"; exit 1; }
# shellcheck disable=SC2317 # called by the EXIT trap
stop() { "$VDN" up "$F" --stop > "$W/stop.log" 2>&1; }
trap stop EXIT
echo "farm: up in $(( $(date +%s) - t0 )) s: $(grep -E 'worker|coordinator' "$W/up.log" | head -3 | tr '\n' ' ')"

# the batch: N one-GPU jobs, one N-GPU job, one 2-GPU job (56 pixel frames = 17 latent: the VDN
# branch runs)
REQ=$W/requests.jsonl
: > "$REQ"
job() { # seed gpus
  printf '{"prompt_cache": "%s", "frames": 56, "height": %d, "width": %d, "steps": 4, "seed": %d, "variant": "vdn"%s}\n' \
    "$W/ck/prompt.safetensors" "$SIZE" "$SIZE" "$1" "$([ "$2" = 1 ] || echo ", \"gpus\": $2")" >> "$REQ"
}
for s in $(seq 1 "$N"); do job "$s" 1; done
job 100 "$N"
[ "$N" -ge 4 ] && job 200 2
NJOBS=$(wc -l < "$REQ")
SUB=$("$VDN" submit "$REQ" --dir "$F" --json 2> "$W/submit.err")
BATCH=$(echo "$SUB" | python3 -c 'import json,sys; print(json.load(sys.stdin)["batch"])' 2>/dev/null)
[ -n "$BATCH" ] || { echo "farm: submit failed: $SUB $(cat "$W/submit.err")"; exit 1; }
echo "farm: submitted $NJOBS jobs as $BATCH"
t1=$(date +%s)
timeout "${T_WATCH:-300}" "$VDN" watch "$BATCH" --dir "$F" --interval 2 > "$W/watch.log" 2>&1
wrc=$?
echo "farm: vdn watch exit $wrc after $(( $(date +%s) - t1 )) s"
"$VDN" status "$BATCH" --dir "$F" --json > "$REPORT" 2> "$W/status.err"
"$VDN" workers --dir "$F" 2>&1 | head -20
STORE=$(sed -n 's/^store = file:\/\///p' "$F/vdn.conf")
python3 - "$STORE" "$REPORT" "$N" "$COMM" "$NJOBS" "$F/logs" <<'EOF'
import glob, json, os, re, sys
store, report, n, comm, njobs, logs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), sys.argv[6]
fails = 0
def check(ok, msg):
    global fails
    fails += not ok
    print(("  ok    " if ok else "  FAIL  ") + msg)
mp4 = sorted(glob.glob(os.path.join(store, "**", "*.mp4"), recursive=True))
recs = []
for p in glob.glob(os.path.join(store, "**", "*.json"), recursive=True):
    try:
        r = json.load(open(p))
    except ValueError:
        continue
    if isinstance(r, dict) and "gpus" in r:
        recs.append((p, r))
try:
    st = json.load(open(report))
except (OSError, ValueError) as e:
    st = {}
    print("  (status report unreadable: %s)" % e)
text = json.dumps(st)
check(len(mp4) == njobs, "%d mp4 files in the store for %d jobs" % (len(mp4), njobs))
for p in mp4[:3]:
    print("        %s (%d bytes)" % (os.path.relpath(p, store), os.path.getsize(p)))
check(len(recs) == njobs, "%d run records with a gpus field" % len(recs))
ranks = sorted(r["gpus"].get("ranks", 0) for _, r in recs)
want = sorted([1] * n + [n] + ([2] if n >= 4 else []))
check(ranks == want, "ranks per job %s (want %s)" % (ranks, want))
for p, r in recs:
    g = r["gpus"]
    if g.get("ranks", 1) > 1:
        check(g.get("communicator") == comm and len(g.get("rendered_on", [])) == g["ranks"],
              "%d-GPU job: communicator %s, rendered on %s, decoded on %s, %.2f s per NFE" %
              (g["ranks"], g.get("communicator"), g.get("rendered_on"), g.get("decoded_on"),
               sum(r.get("timing", {}).get("nfe_seconds", [0])) /
               max(1, len(r.get("timing", {}).get("nfe_seconds", [0])))))
one = [tuple(r["gpus"].get("rendered_on", [])) for _, r in recs if r["gpus"].get("ranks", 1) == 1]
check(len(set(one)) == n, "the %d one-GPU jobs rendered on %d different GPUs: %s" %
      (n, len(set(one)), sorted(set(one))))
done = len(re.findall(r'"state":\s*"done"', text))
check(done >= njobs, "status: %d jobs done" % done)
if fails:
    for lg in sorted(glob.glob(os.path.join(logs, "*.log"))):
        print("---- tail of " + os.path.basename(lg))
        print("".join(open(lg, errors="replace").readlines()[-15:]))
print("farm: %s" % ("all checks passed" if not fails else "%d checks FAILED" % fails))
sys.exit(1 if fails else 0)
EOF
crc=$?
[ $wrc = 0 ] || echo "farm: vdn watch did not see the batch finish (exit $wrc): $(tail -3 "$W/watch.log")"
exit $(( crc || wrc ))
