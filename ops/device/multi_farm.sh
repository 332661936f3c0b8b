#!/usr/bin/env bash
# The farm end to end on one machine (issue 23 item 4; ops/device/multi.sh phase farm), two parts:
#  1. `vdn up` with one worker on all N GPUs and a small random checkpoint with VAEs, a text
#     encoder and a real tokenizer; one batch from TEXT PROMPTS (each job its own prompt) of N
#     one-GPU jobs, one N-GPU job and (N >= 4) one 2-GPU job, watched to the end; then the checks:
#     every job done once, an mp4 per job in the store, every run record naming its ranks and GPUs
#     (the k-GPU jobs k ranks over NCCL, over the in-process communicator on CPU engines; the N
#     one-GPU jobs on N different GPUs), every prompt encoded once, on the first GPU its job held.
#  2. One H3-shaped N-GPU job (102 latent frames = 345 pixel frames at 768 x 1344, 512 text rows,
#     H3_LAYERS blocks of H3's shapes (50), fp8, H3_STEPS steps (2)) through a second `vdn up` on
#     all N GPUs: its record's seconds per evaluation. The checkpoint: `vdn ckpt init --preset h3
#     --layers 1` (~3 GB, drawn on one CPU thread) made while part 1 runs, then
#     ops/device/ckpt_repeat.py writes block 0 H3_LAYERS times (66 GB of bf16 would take the
#     ckpt init half an hour and more).
#   multi_farm.sh VDN WORKDIR N REPORT.json TOKENIZER.json
# H3_TMPFS=0: that checkpoint on disk instead of a tmpfs of H3_TMPFS_GB (110) GB (1: a tmpfs
# with FARM_CPU=1 too).
# FARM_CPU=1: N CPU engines behind a stand-in nvidia-smi (how it is checked without a GPU; tiny
# preset, and part 2 on the tiny preset's shapes). FARM_DEADLINE (epoch seconds): the watches end
# by then. Prints what it checked; exit 0 when every check passed.
set -uo pipefail
VDN=$1 W=$2 N=$3 REPORT=$4 TOK=$5
HERE=$(cd "$(dirname "$0")" && pwd)
PRESET=small SIZE=128 COMM=nccl ENCODER=cuda
H3_PRESET=h3 H3_LAYERS=${H3_LAYERS:-50} H3_FRAMES=345 H3_H=768 H3_W=1344 H3_STEPS=${H3_STEPS:-2}
DEADLINE=${FARM_DEADLINE:-$(( $(date +%s) + 560 ))}
umount -l "$W/h3mem" 2> /dev/null # a run cut short
rm -rf "$W" && mkdir -p "$W"
if [ "${FARM_CPU:-0}" = 1 ]; then
  PRESET=tiny SIZE=32 COMM=inproc ENCODER=cpu
  H3_PRESET=tiny H3_LAYERS=${H3_LAYERS_CPU:-3} H3_FRAMES=56 H3_H=64 H3_W=64
  printf '#!/bin/sh\ncase "$*" in *--query-gpu=index,name,memory.total*) ;; *) exit 9;; esac\n' > "$W/nvidia-smi"
  for i in $(seq 0 $((N - 1))); do echo "echo \"$i, stand-in GPU, 81559\"" >> "$W/nvidia-smi"; done
  chmod +x "$W/nvidia-smi"
  export VDN_NVIDIA_SMI=$W/nvidia-smi
fi
left() { echo $(( DEADLINE - $(date +%s) )); }
t0=$(date +%s)
"$VDN" ckpt init --preset $PRESET --vdn --vae --text-encoder --tokenizer-json "$TOK" \
  --out "$W/ck" > "$W/ckpt.log" 2>&1 ||
  { echo "farm: vdn ckpt init failed:"; tail -5 "$W/ckpt.log"; exit 1; }
# part 2's checkpoint, made while part 1 runs (one CPU thread; the rest of the machine is idle),
# in memory where a tmpfs can be mounted (root on the GPU machine: ~70 GB written at memory
# speed, not the disk's), else on disk
H3=$W/h3
H3_MNT=""
if [ "${H3_TMPFS:-$([ "${FARM_CPU:-0}" = 1 ] && echo 0 || echo 1)}" = 1 ] && mkdir -p "$W/h3mem" &&
  mount -t tmpfs -o "size=${H3_TMPFS_GB:-110}g" tmpfs "$W/h3mem" 2> "$W/h3mem.err"; then
  H3_MNT=$W/h3mem H3=$W/h3mem/h3
fi
echo "farm: the H3-shaped checkpoint goes to $H3 ($([ -n "$H3_MNT" ] && echo tmpfs || echo "disk: $(cat "$W/h3mem.err" 2>/dev/null)"))"
( "$VDN" ckpt init --preset $H3_PRESET --vdn --vae --adapters none --layers 1 \
    --prompt-tokens 512 --out "$H3" && python3 "$HERE/ckpt_repeat.py" "$H3" "$H3_LAYERS" ) \
  > "$W/h3-ckpt.log" 2>&1 &
H3_INIT=$!
F=$W/farm
FARM_UP=$F
"$VDN" up "$F" --detach --workers 1 --gpus all --checkpoint "$W/ck" > "$W/up.log" 2>&1 ||
  { echo "farm: vdn up failed:"; tail -20 "$W/up.log"; exit 1; }
# shellcheck disable=SC2317 # called by the EXIT trap
stop() {
  [ -n "$FARM_UP" ] && "$VDN" up "$FARM_UP" --stop > "$W/stop.log" 2>&1
  kill "$H3_INIT" 2> /dev/null
  wait "$H3_INIT" 2> /dev/null
  [ -z "$H3_MNT" ] || umount -l "$H3_MNT"
}
trap stop EXIT
echo "farm: up in $(( $(date +%s) - t0 )) s: $(grep -E 'worker|coordinator' "$W/up.log" | head -3 | tr '\n' ' ')"

# ---- part 1: N one-GPU jobs, one N-GPU job, one 2-GPU job, each from its own text prompt (56
# pixel frames = 17 latent: the VDN branch runs)
REQ=$W/requests.jsonl
: > "$REQ"
job() { # seed gpus
  printf '{"prompt": "farm job %d: a red kite over a grey sea, %d GPU(s), seen from a cliff", "frames": 56, "height": %d, "width": %d, "steps": 4, "seed": %d, "variant": "vdn"%s}\n' \
    "$1" "$2" "$SIZE" "$SIZE" "$1" "$([ "$2" = 1 ] || echo ", \"gpus\": $2")" >> "$REQ"
}
for s in $(seq 1 "$N"); do job "$s" 1; done
job 100 "$N"
[ "$N" -ge 4 ] && job 200 2
NJOBS=$(wc -l < "$REQ")
SUB=$("$VDN" submit "$REQ" --dir "$F" --json 2> "$W/submit.err")
BATCH=$(echo "$SUB" | python3 -c 'import json,sys; print(json.load(sys.stdin)["batch"])' 2>/dev/null)
[ -n "$BATCH" ] || { echo "farm: submit failed: $SUB $(cat "$W/submit.err")"; exit 1; }
echo "farm: submitted $NJOBS jobs from text prompts as $BATCH"
t1=$(date +%s)
tw=$(( $(left) - 200 )); [ "$tw" -le "${T_WATCH:-300}" ] || tw=${T_WATCH:-300}; [ "$tw" -ge 30 ] || tw=30
timeout "$tw" "$VDN" watch "$BATCH" --dir "$F" --interval 2 > "$W/watch.log" 2>&1
wrc=$?
echo "farm: vdn watch exit $wrc after $(( $(date +%s) - t1 )) s"
"$VDN" status "$BATCH" --dir "$F" --json > "$REPORT" 2> "$W/status.err"
"$VDN" workers --dir "$F" 2>&1 | head -20
STORE=$(sed -n 's/^store = file:\/\///p' "$F/vdn.conf")
python3 "$HERE/multi_farm_check.py" batch "$STORE" "$REPORT" "$N" "$COMM" "$NJOBS" "$F/logs" "$ENCODER"
crc=$?
[ $wrc = 0 ] || echo "farm: vdn watch did not see the batch finish (exit $wrc): $(tail -3 "$W/watch.log")"
"$VDN" up "$F" --stop > "$W/stop.log" 2>&1
FARM_UP=""

# ---- part 2: the H3-shaped job on all N GPUs through a second farm (the worker loads the
# 50-block checkpoint in fp8 on every GPU)
t2=$(date +%s)
wait "$H3_INIT"
hrc=$?
echo "farm: H3-shaped checkpoint ($H3_PRESET, $H3_LAYERS blocks): exit $hrc, ready $(( $(date +%s) - t0 )) s after the start, $(du -sh "$H3" 2>/dev/null | cut -f1); $(tail -1 "$W/h3-ckpt.log")"
H3_JSON=${REPORT%.json}-h3.json
if [ $hrc != 0 ]; then
  tail -5 "$W/h3-ckpt.log"
  echo "{\"error\": \"checkpoint: exit $hrc\"}" > "$H3_JSON"
  exit 1
fi
F2=$W/farm-h3
FARM_UP=$F2
"$VDN" up "$F2" --detach --workers 1 --gpus all --checkpoint "$H3" --precision fp8 \
  > "$W/up-h3.log" 2>&1 || { echo "farm: vdn up (H3-shaped) failed:"; tail -20 "$W/up-h3.log"; exit 1; }
printf '{"prompt_cache": "%s", "frames": %d, "height": %d, "width": %d, "steps": %d, "seed": 7, "variant": "vdn", "precision": "fp8", "gpus": %d}\n' \
  "$H3/prompt.safetensors" "$H3_FRAMES" "$H3_H" "$H3_W" "$H3_STEPS" "$N" > "$W/h3.jsonl"
SUB=$("$VDN" submit "$W/h3.jsonl" --dir "$F2" --json 2> "$W/submit-h3.err")
B2=$(echo "$SUB" | python3 -c 'import json,sys; print(json.load(sys.stdin)["batch"])' 2>/dev/null)
[ -n "$B2" ] || { echo "farm: submit (H3-shaped) failed: $SUB $(cat "$W/submit-h3.err")"; exit 1; }
tw=$(( $(left) - 15 )); [ "$tw" -ge 20 ] || tw=20
echo "farm: H3-shaped job submitted as $B2 (${H3_FRAMES} frames ${H3_H}x${H3_W}, $H3_STEPS steps, fp8, $N GPUs); watching up to $tw s"
timeout "$tw" "$VDN" watch "$B2" --dir "$F2" --interval 2 > "$W/watch-h3.log" 2>&1
w2=$?
echo "farm: vdn watch (H3-shaped) exit $w2 after $(( $(date +%s) - t2 )) s"
"$VDN" status "$B2" --dir "$F2" --json > "$W/status-h3.json" 2> /dev/null
STORE2=$(sed -n 's/^store = file:\/\///p' "$F2/vdn.conf")
python3 "$HERE/multi_farm_check.py" h3 "$STORE2" "$H3_JSON" "$N" "$COMM" "$H3_LAYERS" "$F2/logs" \
  "$H3_PRESET"
h3rc=$?
exit $(( crc || wrc || w2 || h3rc ))
