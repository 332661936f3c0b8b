#!/usr/bin/env bash
# Render a small batch end to end on one machine: build vdn, start a farm in ./quickstart
# (coordinator + one CPU worker + SQLite + file store + a tiny random checkpoint), submit four
# tiny renders (two from text prompts, two from a prompt cache), watch them finish, list what
# landed in the store (an mp4 with sound, a poster, the latents and the run record per job), check
# the mp4 files with ffprobe, stop the farm.
# Run after `sudo ops/install-deps.sh`. Takes a minute or two on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${BUILD:-build}
DIR=${QUICKSTART_DIR:-$ROOT/quickstart}
JOBS=${JOBS:-$(nproc)}

echo "== build ($BUILD)"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j"$JOBS" --target vdn >/dev/null
VDN=$ROOT/$BUILD/cli/vdn

if [ -f "$DIR/vdn.conf" ]; then "$VDN" up "$DIR" --stop >/dev/null 2>&1 || true; fi
stop() { "$VDN" up "$DIR" --stop || true; }
trap stop EXIT

echo "== start the farm in $DIR"
"$VDN" up "$DIR" --detach --cpu --workers 1

# Four renders at the tiny size: 56 pixel frames = 17 latent frames, so the VDN branch runs. Two
# take text (tokenized with the real Qwen3 tokenizer, encoded once by the tiny random encoder and
# kept in the store's prompt cache), two a prompt cache made beforehand.
PROMPT=$(sed -n 's/^checkpoint = //p' "$DIR/vdn.conf")/prompt.safetensors
REQ=$DIR/requests.jsonl
: >"$REQ"
for seed in 1 2; do
  printf '{"prompt": "A red fox trots through fresh snow at dawn, its breath misting.", "frames": 56, "height": 32, "width": 32, "steps": 4, "seed": %d}\n' \
    "$seed" >>"$REQ"
done
for seed in 3 4; do
  printf '{"prompt_cache": "%s", "frames": 56, "height": 32, "width": 32, "steps": 4, "seed": %d}\n' \
    "$PROMPT" "$seed" >>"$REQ"
done

# One first-and-last-frame job (FL2VA) from two pictures made here: the worker encodes them
# with the prompt (the video VAE's encoder and the text encoder's vision tower) on a 64 x 96
# canvas (a real render leaves height/width out and takes the first picture's canvas).
PICS=$DIR/pictures
mkdir -p "$PICS"
ffmpeg -v error -y -f lavfi -i "testsrc2=size=192x128:rate=1" -frames:v 1 "$PICS/first.png"
ffmpeg -v error -y -f lavfi -i "mandelbrot=size=192x128:rate=1" -frames:v 1 "$PICS/last.png"
printf '{"prompt": "The test card dissolves into a fractal.", "first_frame": "%s", "last_frame": "%s", "frames": 56, "height": 64, "width": 96, "steps": 4, "seed": 5}\n' \
  "$PICS/first.png" "$PICS/last.png" >>"$REQ"

echo "== submit $REQ"
OUT=$("$VDN" submit "$REQ" --dir "$DIR")
echo "$OUT"
BATCH=$(echo "$OUT" | grep -oE '\bb[0-9]+\b' | head -n1)
[ -n "$BATCH" ] || BATCH=b$(echo "$OUT" | grep -oE '[0-9]+' | head -n1)

echo "== watch $BATCH"
"$VDN" watch "$BATCH" --dir "$DIR"

echo "== objects in the store"
"$VDN" store ls "$(sed -n 's/^store = //p' "$DIR/vdn.conf")"

STORE=$(sed -n 's/^store = //p' "$DIR/vdn.conf")
STORE=${STORE#file://}
if command -v ffprobe >/dev/null 2>&1 && [ -d "$STORE" ]; then
  echo "== the mp4 files, as ffprobe reads them"
  find "$STORE" -name '*.mp4' | sort | while read -r f; do
    printf '%s: ' "${f#"$STORE"/}"
    ffprobe -v error -show_entries stream=codec_name,width,height,nb_frames,channels,sample_rate \
      -of compact=p=0 "$f" | paste -sd';' -
  done
fi

echo "== stop"
trap - EXIT
stop
cat <<MSG

Done. Where things are:
  $DIR/vdn.conf      endpoints and paths of this farm
  $DIR/vdn.db        the job database (try: $VDN status --db $DIR/vdn.db)
  $DIR/store/        per job: out.mp4 (H.264 + AAC), out.png (poster), out.json (run record); latents only for save_latents jobs
  $DIR/logs/         coordinator and worker logs
  $DIR/ckpt/         the tiny random checkpoint
Start it again with: $VDN up $DIR   (Ctrl-C stops it)
MSG
