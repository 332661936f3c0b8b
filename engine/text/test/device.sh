#!/usr/bin/env bash
# One device run for the text encoder: build the op layer (engine/, kernels/op_cuda*) and text/
# with nvcc/gcc directly (the device machine lacks the Debian -dev libraries: cJSON, PCRE2 and
# utf8proc travel as .deb files), then, for each precision of PRECISIONS (default "bf16 fp8"),
#   1. test_encoder on the CUDA backend: the tiny checkpoint against the transformers values and
#      against the CPU backend (fp8: within the fp8 bounds, and against the CPU's fp8 oracle), and
#      under compute-sanitizer memcheck;
#   2. `vdn bench text-encoder --precision P` at the Qwen3-VL-32B text shapes, 512 tokens,
#      hidden_states[50];
# and 3. the PyTorch peer (text/bench/peer_text_encoder.py, bf16) in the same run.
#   OUT=dir [PRECISIONS="bf16 fp8"] [BENCH_ARGS=--profile] bash text/test/device.sh CKPT DEBS_DIR
#   (from the repo root; BENCH_ARGS: more `vdn bench text-encoder` options)
set -uo pipefail
OUT=${OUT:-/tmp/vdn-out}
CKPT=$1
DEBS=$2
mkdir -p "$OUT"
B=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
PFX="$B/deps"
for d in "$DEBS"/*.deb; do dpkg -x "$d" "$PFX"; done
INC="-I$PFX/usr/include -I$PFX/usr/include/x86_64-linux-gnu"
LIBS="-L$PFX/usr/lib/x86_64-linux-gnu -lcjson -lpcre2-8 -lutf8proc"
export LD_LIBRARY_PATH="$PFX/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
CFLAGS="-O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Ikernels -Iengine -Iops/cli -Itext $INC"
NVFLAGS="-gencode=arch=compute_90a,code=sm_90a -O3 --use_fast_math -std=c++17 -lineinfo -Ikernels -Iengine -Iops/cli"
t0=$(date +%s)
mkdir -p "$B/o"
{
  for f in engine/*.c kernels/upload.c kernels/twin_*.c text/tokenizer_load.c text/tokenizer.c \
    text/encoder_config.c text/encoder_init.c text/encoder.c text/bench_text.c; do
    gcc $CFLAGS -c "$f" -o "$B/o/$(basename "$f" .c).o" &
  done
  gcc $CFLAGS -c text/test/test_encoder.c -o "$B/test_encoder.o" &
  for f in kernels/*.cu; do nvcc $NVFLAGS -c "$f" -o "$B/o/$(basename "$f" .cu).cu.o" & done
  wait
} > "$OUT/build.log" 2>&1
ar rcs "$B/lib.a" "$B"/o/*.o
printf '#include <stdio.h>\nint vdn_text_bench(int, char **);\nint main(int c, char **v) { return vdn_text_bench(c, v); }\n' > "$B/bm.c"
gcc -c "$B/bm.c" -o "$B/bm.o"
L="$B/lib.a $LIBS -lcublasLt -lcublas -lpthread -lm -Xlinker --undefined=vdn_cuda_dev_backend"
nvcc -o "$B/test_encoder" "$B/test_encoder.o" $L >> "$OUT/build.log" 2>&1
nvcc -o "$B/bench" "$B/bm.o" $L >> "$OUT/build.log" 2>&1
echo "build: $(( $(date +%s) - t0 )) s"
if [ ! -x "$B/test_encoder" ] || [ ! -x "$B/bench" ]; then
  echo "BUILD FAILED"; grep -E "error" "$OUT/build.log" | head -30; tail -20 "$OUT/build.log"; exit 1
fi
# the CUDA-vs-CPU tolerance of each precision (text/test/text_tests.cmake says why)
declare -A TOL=([bf16]=3e-2 [fp8]=5e-2)
summary=""
for P in ${PRECISIONS:-bf16 fp8}; do
  sfx=$([ "$P" = bf16 ] && echo "" || echo "_$P")
  timeout 120 "$B/test_encoder" "$CKPT" text/test/expected_hidden.safetensors cuda "${TOL[$P]}" "$P" 2>&1 | tee "$OUT/test_cuda$sfx.log"; tt=${PIPESTATUS[0]}
  if command -v compute-sanitizer > /dev/null; then
    timeout 200 compute-sanitizer --tool memcheck --print-limit 10 "$B/test_encoder" "$CKPT" \
      text/test/expected_hidden.safetensors cuda "${TOL[$P]}" "$P" > "$OUT/memcheck$sfx.log" 2>&1
    echo "memcheck $P: exit $? $(grep -E 'ERROR SUMMARY' "$OUT/memcheck$sfx.log" | tail -1)"
  fi
  timeout 200 "$B/bench" --tokens 512 --layer 50 --reps 5 --precision "$P" ${BENCH_ARGS:-} --json "$OUT/bench_text$sfx.json" 2>&1 | tee "$OUT/bench$sfx.log"; tb=${PIPESTATUS[0]}
  summary="$summary $P: cuda test rc=$tt bench rc=$tb;"
done
PYTHONUNBUFFERED=1 timeout 300 python3 text/bench/peer_text_encoder.py 512 50 5 2>&1 | tee "$OUT/peer.log"; tp=${PIPESTATUS[0]}
echo "== summary:$summary peer rc=$tp =="
