#!/usr/bin/env bash
# One device run for the text encoder's vision path (issue 22): ops/device/build.sh, then
#   1. the tiny checkpoint with its vision tower (`vdn ckpt init --preset tiny --text-encoder`,
#      the seed's default) and ops/reference/qwen3vl_vision_reference.py on it: the public
#      transformers model's expected values -> $OUT/expected_vision.safetensors (commit it as
#      engine/text/test/expected_vision.safetensors) and $OUT/reference.log;
#   2. with that file in place: ctest text_vision_vs_transformers (CPU fp32 within 1e-4),
#      text_vision_cuda (CUDA bf16 vs the bf16 model and vs CPU within 3e-2),
#      text_vision_numpy_cuda (CUDA vs the float64 numpy model), text_encoder_cuda, and
#      test_backend_ops (the interleaved rope and exact GELU cases among the rest);
#   3. `vdn bench text-encoder --pictures 2` at the real shapes (random weights: two 768 x 1344
#      keyframes through the 27-block vision tower, 2540 rows to hidden_states[50]).
#   bash engine/text/test/vision_device.sh     (from the repository root)
# The lead's call: run(carry=[".devcarry/deb"], command="OUT=$OUT bash engine/text/test/vision_device.sh")
set -uo pipefail
OUT=${OUT:-/tmp/vdn-out}
mkdir -p "$OUT"
bash ops/device/build.sh > "$OUT/build.txt" 2>&1 || { tail -40 "$OUT/build.txt"; exit 1; }
B=${BUILD:-$(pwd)/build-dev}
. "$B/env.sh"
TOK=$B/prefix/qwen3-tokenizer.json
CK=$(mktemp -d)/tv
"$B/cli/vdn" ckpt init --preset tiny --text-encoder --tokenizer-json "$TOK" --out "$CK" > /dev/null || exit 1
env -u LD_LIBRARY_PATH PYTHONUNBUFFERED=1 timeout 300 python3 ops/reference/qwen3vl_vision_reference.py \
  "$CK" "$OUT/expected_vision.safetensors" 2>&1 | tee "$OUT/reference.log"
ref=${PIPESTATUS[0]}
if [ "$ref" = 0 ]; then
  cp "$OUT/expected_vision.safetensors" engine/text/test/expected_vision.safetensors
  bash ops/device/build.sh > "$OUT/build2.txt" 2>&1 # configures the tests that need the file
fi
(cd "$B" && timeout 400 ctest -R '^text_vision|^text_encoder_cuda$' --output-on-failure) 2>&1 | tee "$OUT/ctest.log"
tt=${PIPESTATUS[0]}
timeout 200 "$B/cli/vdn" bench text-encoder --tokens 512 --layer 50 --reps 3 --pictures 2 \
  --json "$OUT/bench_text_pictures.json" 2>&1 | tee "$OUT/bench_pictures.log"
bp=${PIPESTATUS[0]}
timeout 200 "$B/kernels/test_backend_ops" > "$OUT/backend_ops.log" 2>&1
bo=$?
grep -iE "interleaved|fail" "$OUT/backend_ops.log" | head -8; tail -3 "$OUT/backend_ops.log"
echo "== summary: reference rc=$ref; ctest rc=$tt; bench --pictures 2 rc=$bp; test_backend_ops rc=$bo =="
