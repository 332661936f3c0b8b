#!/usr/bin/env bash
# One device run for the VAE decoders: build test_vae_reference with the CUDA op backend (nvcc/gcc
# directly, cJSON from the carried .deb files, as kernels.sh does) and run it on the GPU and on
# the CPU against vae/test/reference/expected_vae.safetensors, and the backend-ops test (every op,
# CUDA against the CPU oracle).
#   OUT=dir bash ops/device/vae.sh CKPT_ROOT      (CKPT_ROOT: `vdn ckpt init --preset tiny --vae`,
#                                                   carried; the test checks its sha256)
# BENCH=1 also times both decoders at the release's size against the PyTorch decode in the same
# run (ops/reference/vae_bench.py writes the random full-size weights both load; needs .ref/ with
# the diffusers files, as docs/reference-check.md describes). BENCH_ARGS: e.g. "--h 48 --w 84".
# PROFILE=1: one more decode of each, timed op by op (engine/op_profile.h).
# AUDIO_BENCH=1 times the audio decode alone without PyTorch: bench_vae writes random weights at
# the release's size itself (`random:DIR`), 2 x AUDIO_LA latents (default 200: 5 s stereo), 5 reps,
# with the default float32-accurate convolutions (op by op too with PROFILE=1) and again with
# VDN_CONV_TF32=1 (AUDIO_ENV="NAME=value ...": a third run, profiled, with that environment).
# VIDEO_ENV="NAME=value ...": with BENCH=1, both video benches again with that environment.
# VAE_FP8=1: the video decoder at fp8 too (vae.h vdn_video_vae_load_precision): the fp8 reference
# test on CUDA (CUDA fp8 against the CPU's fp8 oracle and the reference), and with BENCH=1 a
# second bench_vae run with --precision fp8 on the same weights and latents (op by op too
# with PROFILE=1).
# DEVICES="4,2,1": with BENCH=1, the decodes over groups of that many GPUs (`--devices`: each
# size timed, its frames and waveform compared with the largest group's). TESTS=0 skips the
# reference tests and test_backend_ops (a run that only times).
set -uo pipefail
OUT=${OUT:-/tmp/vdn-out}
CK=${1:?usage: vae.sh CKPT_ROOT}
mkdir -p "$OUT"
B=${VAE_BUILD:-$(mktemp -d)} # VAE_BUILD=DIR: build there, or reuse what an earlier run built
mkdir -p "$B"
PFX="$B/deps"
for d in .devcarry/*.deb; do [ -f "$d" ] && dpkg -x "$d" "$PFX"; done
CFLAGS="-O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Ikernels -Iengine -Iops/cli -Itext -Ivae -Imedia -I$PFX/usr/include"
NVFLAGS="-gencode=arch=compute_90a,code=sm_90a -O3 --use_fast_math -std=c++17 -Ikernels -Iengine -Iops/cli"
export LD_LIBRARY_PATH="$PFX/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
t0=$(date +%s)
if [ ! -x "$B/bench_vae" ]; then
{
  for f in engine/*.c text/encoder_init.c text/encoder_config.c vae/vae_config.c vae/vae_init.c \
           vae/vae_weights.c vae/vae_group.c vae/video_vae.c vae/audio_vae.c vae/bench_decode.c vae/bench_peer.c vae/test/test_vae_reference.c \
           vae/test/bench_vae.c kernels/test/test_backend_ops.c; do
    gcc $CFLAGS -c "$f" -o "$B/$(basename "$f" .c).o" &
  done
  for f in kernels/*.cu; do nvcc $NVFLAGS -c "$f" -o "$B/$(basename "$f" .cu).cu.o" & done
  wait
} > "$OUT/vae_build.log" 2>&1
ar rcs "$B/libv.a" $(ls $B/*.o | grep -v -e test_vae_reference -e bench_vae -e test_backend_ops)
nvcc -o "$B/test_vae_reference" "$B/test_vae_reference.o" "$B/libv.a" -L"$PFX/usr/lib/x86_64-linux-gnu" \
  -lcjson -lcublasLt -lcublas -lpthread -lm -Xlinker --undefined=vdn_cuda_dev_backend >> "$OUT/vae_build.log" 2>&1
nvcc -o "$B/bench_vae" "$B/bench_vae.o" "$B/libv.a" -L"$PFX/usr/lib/x86_64-linux-gnu" \
  -lcjson -lcublasLt -lcublas -lpthread -lm -Xlinker --undefined=vdn_cuda_dev_backend >> "$OUT/vae_build.log" 2>&1
nvcc -o "$B/test_backend_ops" "$B/test_backend_ops.o" "$B/libv.a" -L"$PFX/usr/lib/x86_64-linux-gnu" \
  -lcjson -lcublasLt -lcublas -lpthread -lm -Xlinker --undefined=vdn_cuda_dev_backend >> "$OUT/vae_build.log" 2>&1
fi
echo "build: $(( $(date +%s) - t0 )) s"
if [ ! -x "$B/test_vae_reference" ]; then echo "BUILD FAILED"; grep -E "error" "$OUT/vae_build.log" | head -20; exit 1; fi
nvidia-smi -L
E=vae/test/reference/expected_vae.safetensors
if [ "${TESTS:-1}" = 1 ]; then
timeout 200 "$B/test_vae_reference" "$CK" "$E" all cuda 2>&1 | tee "$OUT/vae_cuda.log"; rc_gpu=${PIPESTATUS[0]}
timeout 200 "$B/test_vae_reference" "$CK" "$E" all cpu > "$OUT/vae_cpu.log" 2>&1; rc_cpu=$?
tail -3 "$OUT/vae_cpu.log"
# every op of the op layer (the convolutions included), CUDA against the CPU oracle
timeout 120 "$B/test_backend_ops" > "$OUT/backend_ops.log" 2>&1; echo "backend_ops rc $?"
tail -3 "$OUT/backend_ops.log"
echo "vae.sh: cuda rc $rc_gpu, cpu rc $rc_cpu"
if [ "${VAE_FP8:-0}" = 1 ]; then
  timeout 200 "$B/test_vae_reference" "$CK" "$E" video cuda fp8 2>&1 | tee "$OUT/vae_cuda_fp8.log"
  echo "vae.sh: cuda fp8 rc ${PIPESTATUS[0]}"
fi
fi
if [ "${BENCH:-0}" = 1 ]; then
  W=$(mktemp -d)
  python3 ops/reference/vae_bench.py --ref .ref --out "$W" ${BENCH_ARGS:-} 2>"$OUT/vae_bench_torch.err" | tee "$OUT/vae_bench_torch.json"
  read -r T h w La < <(python3 -c "import json,sys; d=json.load(open('$OUT/vae_bench_torch.json')); print(*d['latents'][1:], d['audio_latents'])")
  BA="--vae $W/vae --audio-vae $W/audio_vae --backend cuda --T $T --h $h --w $w --La $La --reps ${REPS:-3} --peer $OUT/vae_bench_torch.json ${PROFILE:+--profile} ${DEVICES:+--devices $DEVICES}"
  timeout 400 "$B/bench_vae" decode $BA 2>&1 | tee "$OUT/vae_bench_vdn.json"
  if [ "${VAE_FP8:-0}" = 1 ]; then
    timeout 400 "$B/bench_vae" decode $BA --precision fp8 2>&1 | tee "$OUT/vae_bench_vdn_fp8.json"
  fi
  # VIDEO_ENV="NAME=value ...": both precisions once more with that environment, same weights
  if [ -n "${VIDEO_ENV:-}" ]; then
    echo "== $VIDEO_ENV"
    env $VIDEO_ENV timeout 400 "$B/bench_vae" decode $BA 2>&1 | tee "$OUT/vae_bench_env.json"
    env $VIDEO_ENV timeout 400 "$B/bench_vae" decode $BA --precision fp8 2>&1 | tee "$OUT/vae_bench_env_fp8.json"
  fi
  rm -rf "$W"
fi
if [ "${AUDIO_BENCH:-0}" = 1 ]; then
  W=$(mktemp -d)
  AA="--backend cuda --La ${AUDIO_LA:-200} --reps 5"
  timeout 300 "$B/bench_vae" decode --random-audio "$W/audio_vae" $AA ${PROFILE:+--profile} 2>&1 | tee "$OUT/audio_bench_f32.log"
  VDN_CONV_TF32=1 timeout 120 "$B/bench_vae" decode --audio-vae "$W/audio_vae" $AA 2>&1 | tee "$OUT/audio_bench_tf32.log"
  # AUDIO_ENV="NAME=value ...": once more, profiled, with that environment (e.g. VDN_CONV_STRIP=0)
  if [ -n "${AUDIO_ENV:-}" ]; then
    echo "== $AUDIO_ENV"
    env $AUDIO_ENV timeout 120 "$B/bench_vae" decode --audio-vae "$W/audio_vae" $AA ${PROFILE:+--profile} 2>&1 | tee "$OUT/audio_bench_env.log"
  fi
  rm -rf "$W"
fi
