#!/usr/bin/env bash
# One device run of `vdn bench --clip` (issue 26 item 3: the time a user feels): ops/device/build.sh
# (CMake, VDN_FARM=OFF), the random full-size VAEs of ops/reference/vae_bench.py (written to a
# temporary folder; its own PyTorch decode is the tiny default one, to keep the call short), then
# one whole clip at the H3 workload (102 latent frames, 768 x 1344, 575 audio rows; a 500-token
# prompt through the random Qwen3-VL-32B text path to hidden_states[50]; 8 evaluations of random
# H3 weights; the video and audio decoders), stage by stage, with the parts measured apart.
# The device's build has no FFmpeg: the mux is reported as not measured there; time it where
# `vdn render` writes mp4 files with `vdn bench --clip --mux-only --json mux.json` (docs/PERF.md
# "A whole clip").
#   bash ops/device/clip.sh       (from the repository root; needs .ref/ with the diffusers files
#                                  of docs/reference-check.md for vae_bench.py)
# The lead's call (one H200; the clip peaks at the DiT's render memory, the text encoder's
# 48.8 GB being freed before it):
#   run(carry=[".devcarry/deb", ".ref"], command="OUT=$OUT bash ops/device/clip.sh")
# Switches (environment):
#   PRECISION (fp8): the DiT's (fp8 is the official figures' precision); PRECISIONS="fp8 bf16" runs
#     one clip each (about 2.5 and 3 minutes on one H200)
#   TESTS=0: not the ctests bench_encode_cuda and bench_clip_cuda first (tiny shapes, seconds)
#   T_CLIP (480): seconds for each clip's command (the call has 600 in all: on a fresh machine make
#     the build a call of its own first; the JSON is written after the clip, before the parts)
#   GPUS (1): engines of the clip (--gpus; NCCL over GPUs 0..GPUS-1 of an -x2/-x4/-x8 machine)
#   CLIP_ARGS: more options of `vdn bench --clip` (e.g. "--steps 8 --parts-nfe 2 --vae-precision fp8",
#     or "--mux-json mux.json": the mux timed apart by `vdn bench --clip --mux-only --json mux.json`
#     on a host with FFmpeg, an untracked file of the tree, for the clip with its mux)
# Files in $OUT: build.txt, vae_bench_torch.json (the peer's tiny decode, for the record),
# clip_<precision>.json and clip_<precision>.log.
set -uo pipefail
OUT=${OUT:-/tmp/vdn-out}
mkdir -p "$OUT"
bash ops/device/build.sh 2>&1 | tee "$OUT/build.txt"
[ "${PIPESTATUS[0]}" = 0 ] || exit 1
B=${BUILD:-$(pwd)/build-dev}
. "$B/env.sh"
VDN=$B/cli/vdn
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv
if [ "${TESTS:-1}" = 1 ]; then # the benches' CUDA paths at tiny shapes first (seconds)
  (cd "$B" && timeout 180 ctest -R '^bench_(encode|clip)_cuda$' --output-on-failure) 2>&1 | tail -25
fi
W=$(mktemp -d)
t0=$(date +%s)
env -u LD_LIBRARY_PATH python3 ops/reference/vae_bench.py --ref .ref --out "$W" --reps 1 \
  2> "$W/vae_bench.err" > "$OUT/vae_bench_torch.json" || { tail -20 "$W/vae_bench.err"; rm -rf "$W"; exit 1; }
echo "clip.sh: the random full-size VAEs written in $(( $(date +%s) - t0 )) s"
summary=""
for P in ${PRECISIONS:-${PRECISION:-fp8}}; do
  timeout "${T_CLIP:-480}" "$VDN" bench --clip --vae "$W/vae" --audio-vae "$W/audio_vae" --precision "$P" \
    --gpus "${GPUS:-1}" ${CLIP_ARGS:-} --json "$OUT/clip_$P.json" 2>&1 | tee "$OUT/clip_$P.log"
  summary="$summary $P: rc=${PIPESTATUS[0]};"
done
rm -rf "$W"
echo "== clip.sh summary:$summary =="
