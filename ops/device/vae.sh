#!/usr/bin/env bash
# One device run for the VAE decoders: ops/device/build.sh (CMake, VDN_FARM=OFF), then the
# decoders' GPU tests (ctest: vae_cuda_vs_official_reference, vae_cuda_fp8_vs_official_reference:
# both decoders on CUDA against vae/test/reference/expected_vae.safetensors, fp8 against the
# CPU's fp8 oracle) and the backend-ops test (every op, the convolutions included, CUDA against
# the CPU oracle), and `vdn bench decode`.
#   bash ops/device/vae.sh         (from the repository root; the tests make their own tiny
#                                   checkpoints with `vdn ckpt init --preset tiny --vae`)
# The lead's call: run(carry=[".devcarry/deb"], command="OUT=$OUT BENCH=1 bash ops/device/vae.sh")
# Switches (environment):
#   TESTS=0: no tests (a run that only times)
#   BENCH=1: both decoders at the release's size against the PyTorch decode in the same run
#     (ops/reference/vae_bench.py writes the random full-size weights both load; needs .ref/ with
#     the diffusers files, docs/reference-check.md); BENCH_ARGS e.g. "--h 48 --w 84"; REPS (3)
#   VAE_FP8=1: with BENCH=1, the video decoder at fp8 too
#   DEVICES="4,2,1": with BENCH=1, the decodes over groups of that many GPUs (`--devices`)
#   PROFILE=1: one more decode of each, op by op
#   AUDIO_BENCH=1: the audio decoder alone without PyTorch, random weights at the release's size
#     (`--random-audio`), 2 x AUDIO_LA latents (200: 5 s stereo), 5 reps
#   VIDEO_ENV / AUDIO_ENV="NAME=value ...": the benches once more with that environment
#   RANDN=1 (default): torch.randn on this machine's CPU for engine/core/torch_rng.c's test
#     (ops/reference/torch_randn_reference.py -> $OUT/torch_randn_<torch version>.safetensors, to be
#     committed under engine/test/reference/; ctest engine_torch_rng then compares it)
#   ENC_BENCH=1: the keyframe encode at the release's size, PyTorch and vdn in the same run: the
#     peer (ops/reference/vae_encoder_bench.py: an FL2VA request's 2 keyframes on the 768 x 1344
#     canvas; needs .ref/ with the diffusers files of docs/reference-check.md "The keyframe
#     encoder") -> $OUT/vae_encoder_bench_torch.json, then `vdn bench encode` on the random
#     full-size weights it wrote (a temporary folder) with --peer -> $OUT/vae_encoder_bench_vdn.log
#     (its JSON line there and in $OUT/vae_encoder_bench_vdn.json); ENC_REPS (5), PROFILE=1
# The tests include the keyframe encoder on CUDA (vae_encoder_cuda_vs_official_reference) and its
# ops (conv2d, group_norm) in kernels_backend_ops.
# ENC_BENCH=1 without BENCH=1 or AUDIO_BENCH=1 is the keyframe encoder's run alone: the build makes
# only vdn and the encoder's test binaries (build.sh TARGETS), TESTS=1 runs the encoder's GPU
# tests only (`test_backend_ops encoder`: conv2d and group_norm against the CPU oracle, and
# vae_encoder_cuda_vs_official_reference), RANDN defaults to 0, and a summary ends the output:
#   run(carry=[".devcarry/deb", ".ref"], command="OUT=$OUT ENC_BENCH=1 bash ops/device/vae.sh")
set -uo pipefail
OUT=${OUT:-/tmp/vdn-out}
mkdir -p "$OUT"
ENC_ONLY=0
if [ "${ENC_BENCH:-0}" = 1 ] && [ "${BENCH:-0}" != 1 ] && [ "${AUDIO_BENCH:-0}" != 1 ]; then
  ENC_ONLY=1
  export TARGETS=${TARGETS:-vdn test_backend_ops test_vae_encoder}
  RANDN=${RANDN:-0}
fi
bash ops/device/build.sh 2>&1 | tee "$OUT/build.txt"
[ "${PIPESTATUS[0]}" = 0 ] || exit 1
B=${BUILD:-$(pwd)/build-dev}
. "$B/env.sh"
VDN=$B/cli/vdn
nvidia-smi -L
if [ "${TESTS:-1}" = 1 ] && [ "$ENC_ONLY" = 1 ]; then
  timeout 120 "$B/kernels/test_backend_ops" encoder 2>&1 | tee "$OUT/enc_ops.log"
  echo "vae.sh: encoder ops rc ${PIPESTATUS[0]}"
  (cd "$B" && timeout 120 ctest -R '^vae_encoder_cuda_vs_official_reference$' --output-on-failure -V) 2>&1 | tee "$OUT/vae_tests.log"
  echo "vae.sh: tests rc ${PIPESTATUS[0]}"
elif [ "${TESTS:-1}" = 1 ]; then
  (cd "$B" && timeout 400 ctest -R '^(vae_.*|kernels_backend_ops)$' --output-on-failure) 2>&1 | tee "$OUT/vae_tests.log"
  echo "vae.sh: tests rc ${PIPESTATUS[0]}"
fi
if [ "${RANDN:-1}" = 1 ]; then
  TV=$(env -u LD_LIBRARY_PATH python3 -c "import torch; print(torch.__version__.split('+')[0])")
  env -u LD_LIBRARY_PATH python3 ops/reference/torch_randn_reference.py \
    --out "$OUT/torch_randn_${TV}.safetensors" 2>&1 | tee "$OUT/torch_randn.log"
  (cd "$B" && ctest -R '^engine_torch_rng$' --output-on-failure) 2>&1 | tee -a "$OUT/torch_randn.log"
  "$B/engine/test_engine_torch_rng" "$OUT" 2>&1 | tee -a "$OUT/torch_randn.log"
fi
if [ "${ENC_BENCH:-0}" = 1 ]; then
  W=$(mktemp -d)
  env -u LD_LIBRARY_PATH python3 ops/reference/vae_encoder_bench.py --ref .ref --out "$W" \
    2> "$OUT/vae_encoder_bench_torch.err" | tee "$OUT/vae_encoder_bench_torch.json"
  timeout 300 "$VDN" bench encode --vae "$W/vae" --keyframes 2 --height 768 --width 1344 \
    --reps "${ENC_REPS:-5}" --peer "$OUT/vae_encoder_bench_torch.json" --json "$OUT/vae_encoder_bench_vdn.json" \
    ${PROFILE:+--profile} 2>&1 | tee "$OUT/vae_encoder_bench_vdn.log"
  echo "vae.sh: bench encode rc ${PIPESTATUS[0]}"
  rm -rf "$W"
fi
if [ "${BENCH:-0}" = 1 ]; then
  W=$(mktemp -d)
  env -u LD_LIBRARY_PATH python3 ops/reference/vae_bench.py --ref .ref --out "$W" ${BENCH_ARGS:-} \
    2> "$OUT/vae_bench_torch.err" | tee "$OUT/vae_bench_torch.json"
  read -r T h w La < <(python3 -c "import json; d=json.load(open('$OUT/vae_bench_torch.json')); print(*d['latents'][1:], d['audio_latents'])")
  BA="--vae $W/vae --audio-vae $W/audio_vae --backend cuda --T $T --h $h --w $w --La $La --reps ${REPS:-3} --peer $OUT/vae_bench_torch.json ${PROFILE:+--profile} ${DEVICES:+--devices $DEVICES}"
  timeout 400 "$VDN" bench decode $BA 2>&1 | tee "$OUT/vae_bench_vdn.json"
  if [ "${VAE_FP8:-0}" = 1 ]; then
    timeout 400 "$VDN" bench decode $BA --precision fp8 2>&1 | tee "$OUT/vae_bench_vdn_fp8.json"
  fi
  if [ -n "${VIDEO_ENV:-}" ]; then
    echo "== $VIDEO_ENV"
    env $VIDEO_ENV timeout 400 "$VDN" bench decode $BA 2>&1 | tee "$OUT/vae_bench_env.json"
  fi
  rm -rf "$W"
fi
if [ "${AUDIO_BENCH:-0}" = 1 ]; then
  W=$(mktemp -d)
  AA="--backend cuda --La ${AUDIO_LA:-200} --reps 5"
  timeout 300 "$VDN" bench decode --random-audio "$W/audio_vae" $AA ${PROFILE:+--profile} 2>&1 | tee "$OUT/audio_bench.log"
  if [ -n "${AUDIO_ENV:-}" ]; then
    echo "== $AUDIO_ENV"
    env $AUDIO_ENV timeout 120 "$VDN" bench decode --audio-vae "$W/audio_vae" $AA ${PROFILE:+--profile} 2>&1 | tee "$OUT/audio_bench_env.log"
  fi
  rm -rf "$W"
fi
if [ "$ENC_ONLY" = 1 ]; then
  echo "== vae.sh: keyframe encoder summary"
  if [ -f "$OUT/enc_ops.log" ]; then
    echo "encoder ops: $(grep -cE ' ok$' "$OUT/enc_ops.log") ok, $(grep -cE ' FAIL$' "$OUT/enc_ops.log") failed"
    grep -E ' FAIL$' "$OUT/enc_ops.log"
    grep -E 'moments max|one by one|FAIL|[0-9]+% tests passed' "$OUT/vae_tests.log"
  fi
  grep -E '^(pixels|moments|sample|encode_u8|peak|encode PyTorch)' "$OUT/vae_encoder_bench_vdn.log" 2> /dev/null
fi
