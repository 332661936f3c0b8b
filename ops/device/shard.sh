#!/usr/bin/env bash
# One device run for sequence parallelism (issue 10): build the engine, the CUDA backend and the
# NCCL communicator with nvcc/gcc directly (as kernels.sh), then on one GPU:
#  1. P virtual ranks (1..4) through the in-process communicator = the one-GPU CUDA forward,
#     every variant, t2va + fl2va (dit_shard_compare --backend cuda);
#  2. the sharded forward over a one-rank NCCL communicator = the plain one (--nccl);
#  3. the P = 1 overhead of the sharded path against the plain one (--time).
#   OUT=dir CKPT=dir bash ops/device/shard.sh      (run from the repository root)
set -uo pipefail
OUT=${OUT:-/tmp/vdn-out}
CKPT=${CKPT:-.devcarry/shard/smallck}
mkdir -p "$OUT"
B=$(mktemp -d); mkdir -p "$B/m"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
NCCL=$(python3 -c "import nvidia.nccl as m; print(list(m.__path__)[0])" 2>/dev/null)
echo "nccl: $NCCL"; ls "$NCCL/include" "$NCCL/lib" 2>&1 | head
CFLAGS="-O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Ikernels -Iengine -Iops/cli -Itext -Ivae"
NVFLAGS="-gencode=arch=compute_90a,code=sm_90a -O3 --use_fast_math -std=c++17 -Ikernels -Iengine -Iops/cli -I$NCCL/include"
PFX="$B/deps"
for d in .devcarry/shard/*.deb .devcarry/*.deb; do [ -f "$d" ] && dpkg -x "$d" "$PFX"; done
CJ="-I$PFX/usr/include"
LJ="-L$PFX/usr/lib/x86_64-linux-gnu -lcjson"
export LD_LIBRARY_PATH="$PFX/usr/lib/x86_64-linux-gnu:$NCCL/lib:${LD_LIBRARY_PATH:-}"
t0=$(date +%s)
{
  for f in engine/*.c kernels/twin_norm.c kernels/twin_attn.c kernels/twin_vda.c text/encoder_init.c text/encoder_config.c vae/vae_init.c vae/vae_config.c vae/vae_weights.c; do
    gcc $CFLAGS $CJ -c "$f" -o "$B/$(basename "$f" .c).o" &
  done
  gcc $CFLAGS $CJ -DVDN_HAVE_NCCL=1 -c engine/test/dit_shard_compare.c -o "$B/m/main_cmp.o" &
  for f in kernels/*.cu; do # every kernel file, as kernels.sh (a fixed list went stale)
    nvcc $NVFLAGS -DVDN_HAVE_NCCL=1 -c "$f" -o "$B/$(basename "$f" .cu).cu.o" &
  done
  wait
} > "$OUT/build.log" 2>&1
ar rcs "$B/libk.a" $B/*.o
nvcc -o "$B/shard_cmp" "$B/m/main_cmp.o" "$B/libk.a" $LJ -L"$NCCL/lib" -l:libnccl.so.2 -lcublasLt -lcublas \
  -lpthread -lm -Xlinker --undefined=vdn_cuda_dev_backend >> "$OUT/build.log" 2>&1
echo "build: $(( $(date +%s) - t0 )) s"
grep -E "error" "$OUT/build.log" | head -20
[ -x "$B/shard_cmp" ] || { echo "BUILD FAILED"; tail -30 "$OUT/build.log"; exit 1; }
P="$CKPT/prompt.safetensors"; K="$CKPT/prompt_fl2va.safetensors"
echo "== 1+2: virtual ranks and NCCL P=1 vs the one-GPU forward"
timeout 90 "$B/shard_cmp" "$CKPT" "$P" "$K" --backend cuda --ranks 1,2,3,4 --tol 1e-2 --nccl 2>&1 | tee "$OUT/equal.log"
echo "exit ${PIPESTATUS[0]}"
echo "== 3: P=1 overhead, 480x832, 17 latent frames"
timeout 60 "$B/shard_cmp" "$CKPT" "$P" --backend cuda --ranks 1 --tol 1e-2 --modes vdn,dense \
  --height 480 --width 832 --time 5 2>&1 | tee "$OUT/time.log"
echo "exit ${PIPESTATUS[0]}"
