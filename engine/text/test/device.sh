#!/usr/bin/env bash
# One device run for the text encoder: ops/device/build.sh (CMake, VDN_FARM=OFF), then for each
# precision of PRECISIONS (default "bf16 fp8"):
#   1. the text encoder's GPU tests (ctest text_encoder_cuda, text_encoder_cuda_fp8: the tiny
#      checkpoint on CUDA against the transformers values and against the CPU backend) and
#      test_encoder under compute-sanitizer memcheck;
#   2. `vdn bench text-encoder --precision P` at the Qwen3-VL-32B text shapes, 512 tokens,
#      hidden_states[50];
# and 3. the PyTorch peer (engine/text/bench/peer_text_encoder.py, bf16) in the same run.
#   bash engine/text/test/device.sh     (from the repository root; BENCH_ARGS: more options of
#                                        `vdn bench text-encoder`, e.g. --profile)
# The lead's call: run(carry=[".devcarry/deb"], command="OUT=$OUT bash engine/text/test/device.sh")
set -uo pipefail
OUT=${OUT:-/tmp/vdn-out}
mkdir -p "$OUT"
bash ops/device/build.sh 2>&1 | tee "$OUT/build.txt"
[ "${PIPESTATUS[0]}" = 0 ] || exit 1
B=${BUILD:-$(pwd)/build-dev}
. "$B/env.sh"
VDN=$B/cli/vdn
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
(cd "$B" && timeout 300 ctest -R '^text_encoder_cuda' --output-on-failure) 2>&1 | tee "$OUT/test_cuda.log"
tt=${PIPESTATUS[0]}
# the tests' checkpoint, for the sanitizer (the CUDA-vs-CPU tolerance of each precision:
# engine/text/test/text_tests.cmake says why)
CK=$B/engine/text/te_ckpt_cuda
declare -A TOL=([bf16]=3e-2 [fp8]=5e-2)
summary="ctest rc=$tt;"
for P in ${PRECISIONS:-bf16 fp8}; do
  sfx=$([ "$P" = bf16 ] && echo "" || echo "_$P")
  if command -v compute-sanitizer > /dev/null && [ -d "$CK" ]; then
    timeout 200 compute-sanitizer --tool memcheck --print-limit 10 "$B/engine/text/test_encoder" "$CK" \
      engine/text/test/expected_hidden.safetensors cuda "${TOL[$P]}" "$P" > "$OUT/memcheck$sfx.log" 2>&1
    echo "memcheck $P: exit $? $(grep -E 'ERROR SUMMARY' "$OUT/memcheck$sfx.log" | tail -1)"
  fi
  timeout 200 "$VDN" bench text-encoder --tokens 512 --layer 50 --reps 5 --precision "$P" ${BENCH_ARGS:-} \
    --json "$OUT/bench_text$sfx.json" 2>&1 | tee "$OUT/bench$sfx.log"
  summary="$summary $P: bench rc=${PIPESTATUS[0]};"
done
env -u LD_LIBRARY_PATH PYTHONUNBUFFERED=1 timeout 300 python3 engine/text/bench/peer_text_encoder.py 512 50 5 2>&1 | tee "$OUT/peer.log"
echo "== summary: $summary peer rc=${PIPESTATUS[0]} =="
