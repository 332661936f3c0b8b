#!/usr/bin/env bash
# Render a small batch end to end on one machine: build vdn, start a farm in ./quickstart
# (coordinator + one CPU worker + SQLite + file store + a tiny random checkpoint), submit four
# tiny renders, watch them finish, list what landed in the store, stop the farm.
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
VDN=$ROOT/$BUILD/ops/vdn

if [ -f "$DIR/vdn.conf" ]; then "$VDN" up "$DIR" --stop >/dev/null 2>&1 || true; fi
stop() { "$VDN" up "$DIR" --stop || true; }
trap stop EXIT

echo "== start the farm in $DIR"
"$VDN" up "$DIR" --detach --cpu --workers 1

# Four renders at the tiny size: 56 pixel frames = 17 latent frames, so the VDN branch runs.
PROMPT=$(sed -n 's/^checkpoint = //p' "$DIR/vdn.conf")/prompt.safetensors
REQ=$DIR/requests.jsonl
: >"$REQ"
for seed in 1 2 3 4; do
  printf '{"prompt_cache": "%s", "frames": 56, "height": 32, "width": 32, "steps": 4, "seed": %d}\n' \
    "$PROMPT" "$seed" >>"$REQ"
done

echo "== submit $REQ"
OUT=$("$VDN" submit "$REQ" --dir "$DIR")
echo "$OUT"
BATCH=$(echo "$OUT" | grep -oE '\bb[0-9]+\b' | head -n1)
[ -n "$BATCH" ] || BATCH=b$(echo "$OUT" | grep -oE '[0-9]+' | head -n1)

echo "== watch $BATCH"
"$VDN" watch "$BATCH" --dir "$DIR"

echo "== objects in the store"
"$VDN" store ls "$(sed -n 's/^store = //p' "$DIR/vdn.conf")"

echo "== stop"
trap - EXIT
stop
cat <<MSG

Done. Where things are:
  $DIR/vdn.conf      endpoints and paths of this farm
  $DIR/vdn.db        the job database (try: $VDN status --db $DIR/vdn.db)
  $DIR/store/        rendered latents (.safetensors) and run records (.json)
  $DIR/logs/         coordinator and worker logs
  $DIR/ckpt/         the tiny random checkpoint
Start it again with: $VDN up $DIR   (Ctrl-C stops it)
MSG
