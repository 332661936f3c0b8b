#!/usr/bin/env bash
# One device run for sequence parallelism on one GPU: ops/device/build.sh (CMake, VDN_FARM=OFF,
# the NCCL communicator from the nvidia-nccl wheel), a small random checkpoint (`vdn ckpt init
# --preset small --vdn`: head_dim 128, the CUDA kernels' geometry), then engine_dit_shard_compare:
#  1. P virtual ranks (1..4) through the in-process communicator = the one-GPU CUDA forward,
#     every variant, t2va + fl2va;
#  2. the sharded forward over a one-rank NCCL communicator = the plain one (--nccl);
#  3. the P = 1 overhead of the sharded path against the plain one (--time).
#   bash ops/device/shard.sh          (from the repository root)
# The lead's call: run(carry=[".devcarry/deb"], command="OUT=$OUT bash ops/device/shard.sh")
# (several GPUs: ops/device/multi.sh)
set -uo pipefail
OUT=${OUT:-/tmp/vdn-out}
mkdir -p "$OUT"
bash ops/device/build.sh 2>&1 | tee "$OUT/build.txt"
[ "${PIPESTATUS[0]}" = 0 ] || exit 1
B=${BUILD:-$(pwd)/build-dev}
. "$B/env.sh"
CMP=$B/engine/engine_dit_shard_compare
CKPT=/tmp/vdn-shard-ck
rm -rf "$CKPT" && "$B/cli/vdn" ckpt init --preset small --vdn --out "$CKPT" > "$OUT/ckpt.log" 2>&1 ||
  { echo "shard.sh: vdn ckpt init failed"; tail -5 "$OUT/ckpt.log"; exit 1; }
P="$CKPT/prompt.safetensors"; K="$CKPT/prompt_fl2va.safetensors"
nccl=""; grep -q "NCCL communicator" "$B/configure.log" && nccl=--nccl
echo "== 1+2: virtual ranks ${nccl:+and NCCL P=1 }vs the one-GPU forward"
timeout 90 "$CMP" "$CKPT" "$P" "$K" --backend cuda --ranks 1,2,3,4 --tol 1e-2 $nccl 2>&1 | tee "$OUT/equal.log"
echo "exit ${PIPESTATUS[0]}"
echo "== 3: P=1 overhead, 480x832, 17 latent frames"
timeout 60 "$CMP" "$CKPT" "$P" --backend cuda --ranks 1 --tol 1e-2 --modes vdn,dense \
  --height 480 --width 832 --time 5 2>&1 | tee "$OUT/time.log"
echo "exit ${PIPESTATUS[0]}"
