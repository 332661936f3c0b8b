#!/usr/bin/env bash
# The one build of the GPU machine: CMake with -DVDN_FARM=OFF -DVDN_WERROR=ON (the engine, the
# CUDA kernels, the NCCL communicator where the nvidia-nccl wheel is found, the decoders, the text
# encoder, `vdn` with the engine's commands, every test binary), against the -dev libraries that
# ops/device/carry.sh put into .devcarry/deb/ here (the machine has gcc, cmake, the CUDA toolkit
# and python3, no Debian -dev packages). The other ops/device scripts source it; alone:
#   bash ops/device/build.sh                       (from the repository root)
# Afterwards: build-dev/cli/vdn, the test binaries under build-dev/, `ctest --test-dir build-dev
# -L gpu`; build-dev/env.sh sets LD_LIBRARY_PATH for running them by hand.
# Environment: BUILD (build-dev), JOBS (nproc), NCCL_ROOT (else the nvidia-nccl wheel's folder),
# CMAKE_ARGS (more configure arguments), DEV_BARE=1 (pkg-config sees the carried prefix only: how
# a bare machine is simulated on a machine that has the -dev packages), DEV_CUDA=OFF (no CUDA),
# TARGETS (build only these, e.g. "vdn test_backend_ops": the tests of other binaries then fail).
# A warm machine keeps build-dev/: a second call rebuilds only what changed.
set -uo pipefail
ROOT=$(pwd)
BUILD=${BUILD:-$ROOT/build-dev}
JOBS=${JOBS:-$(nproc)}
DEBS=$ROOT/.devcarry/deb
PFX=$BUILD/prefix
LIB=$PFX/usr/lib/x86_64-linux-gnu
die() { echo "build.sh: FAILED: $*" >&2; exit 1; }

# ---- what this machine has (printed first, so a failure says what was missing) ----
[ -f CMakeLists.txt ] && [ -d engine/core ] || die "run it from the repository root (here: $ROOT)"
echo "build.sh: $(date -u +%FT%TZ) on $(hostname), $(nproc) cores; build in $BUILD"
command -v cmake > /dev/null || die "no cmake on PATH"
command -v gcc > /dev/null || die "no gcc on PATH"
echo "  cmake: $(cmake --version | head -1); gcc: $(gcc -dumpfullversion)"
NVCC=
if [ "${DEV_CUDA:-ON}" != OFF ]; then
  for n in "${CUDACXX:-}" /usr/local/cuda/bin/nvcc "$(command -v nvcc 2> /dev/null)"; do
    if [ -n "$n" ] && [ -x "$n" ]; then NVCC=$n; break; fi
  done
  [ -n "$NVCC" ] || die "no nvcc (/usr/local/cuda/bin/nvcc, CUDACXX, PATH); DEV_CUDA=OFF builds without CUDA"
  echo "  nvcc: $NVCC ($("$NVCC" --version | grep -o 'release [0-9.]*'))"
else
  echo "  nvcc: not used (DEV_CUDA=OFF)"
fi
if command -v nvidia-smi > /dev/null; then
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader 2>&1 |
    sed 's/^/  gpu: /'
else
  echo "  gpu: none (no nvidia-smi): the gpu tests will skip"
fi
NCCL=${NCCL_ROOT:-}
if [ -z "$NCCL" ]; then
  for py in python3 /usr/bin/python3; do
    NCCL=$("$py" -c "import nvidia.nccl as m; print(list(m.__path__)[0])" 2> /dev/null) && break
  done
fi
if [ -n "$NCCL" ] && [ -f "$NCCL/include/nccl.h" ]; then
  echo "  nccl: $NCCL ($(ls "$NCCL"/lib/libnccl.so* 2> /dev/null | head -1))"
else
  echo "  nccl: none (no nvidia-nccl wheel, NCCL_ROOT unset): no NCCL communicator, one GPU per process"
  NCCL=
fi
ls "$DEBS"/*.deb > /dev/null 2>&1 ||
  die "no $DEBS/*.deb: run 'bash ops/device/carry.sh' in the checkout first and name .devcarry in carry"
echo "  carried: $(ls "$DEBS"/*.deb | wc -l) .deb files ($(du -sh "$DEBS" | cut -f1)) -> $PFX"

# ---- the carried -dev packages, unpacked into the prefix once per set of .deb files ----
stamp=$(ls -l "$DEBS" | md5sum | cut -c1-16)
if [ "$(cat "$PFX/.stamp" 2> /dev/null)" != "$stamp" ]; then
  rm -rf "$PFX" && mkdir -p "$PFX"
  for d in "$DEBS"/*.deb; do
    if command -v dpkg-deb > /dev/null; then
      dpkg-deb -x "$d" "$PFX" || die "dpkg-deb -x $d"
    else # ar member data.tar.*
      (cd "$PFX" && ar p "$d" "$(ar t "$d" | grep '^data.tar')" | tar -xaf - 2> /dev/null ||
        ar p "$d" "$(ar t "$d" | grep '^data.tar')" | tar -xJf -) || die "unpacking $d"
    fi
  done
  # .pc files name /usr: point them at the prefix
  for pc in "$LIB"/pkgconfig/*.pc "$PFX"/usr/share/pkgconfig/*.pc; do
    [ -f "$pc" ] && sed -i "s|=/usr\b|=$PFX/usr|; s|-I/usr/|-I$PFX/usr/|g; s|-L/usr/|-L$PFX/usr/|g" "$pc"
  done
  # run-time libraries this machine has already (its own, newer ones) are dropped from the prefix:
  # the prefix only fills gaps. The -dev packages' own libraries stay.
  have=$(/sbin/ldconfig -p 2> /dev/null || ldconfig -p 2> /dev/null)
  dropped=0
  for f in "$LIB"/lib*.so.*; do
    b=$(basename "$f")
    case "$b" in libcjson.* | libcurl.* | libpcre2-8.* | libutf8proc.* | libpkgconf.*) continue ;; esac
    if grep -q "^[[:space:]]*$b " <<< "$have"; then rm -f "$f"; dropped=$((dropped + 1)); fi
  done
  echo "$stamp" > "$PFX/.stamp"
  echo "  prefix: unpacked; $dropped run-time libraries the machine has left to it"
fi
export PKG_CONFIG_PATH="$LIB/pkgconfig:$PFX/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
[ "${DEV_BARE:-0}" = 1 ] && export PKG_CONFIG_LIBDIR="$LIB/pkgconfig:$PFX/usr/share/pkgconfig"
export LD_LIBRARY_PATH="$LIB${NCCL:+:$NCCL/lib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if ! command -v pkg-config > /dev/null; then
  [ -x "$PFX/usr/bin/pkgconf" ] || die "no pkg-config on PATH and none carried (pkgconf)"
  mkdir -p "$PFX/bin" && ln -sf "$PFX/usr/bin/pkgconf" "$PFX/bin/pkg-config"
  export PATH="$PFX/bin:$PATH"
  echo "  pkg-config: the carried pkgconf"
fi
for m in libcjson libcurl libpcre2-8 libutf8proc; do
  pkg-config --exists "$m" || die "pkg-config does not find $m in the prefix ($LIB/pkgconfig)"
done
{
  echo "export LD_LIBRARY_PATH=\"$LD_LIBRARY_PATH\""
  echo "export VDN_NCCL_ROOT=\"$NCCL\""
  echo "export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1"
} > "$PFX/env.sh"

TOKARG=
if [ -f "$DEBS/qwen3-tokenizer.json.gz" ]; then # the text encoder's tests (carry.sh)
  [ -f "$PFX/qwen3-tokenizer.json" ] || gzip -dc "$DEBS/qwen3-tokenizer.json.gz" > "$PFX/qwen3-tokenizer.json"
  TOKARG=-DVDN_QWEN3_TOKENIZER=$PFX/qwen3-tokenizer.json
  echo "  tokenizer: $PFX/qwen3-tokenizer.json"
fi

# ---- configure and build ----
t0=$(date +%s)
PY=$(command -v python3 || echo /usr/bin/python3)
mkdir -p "$BUILD"
# shellcheck disable=SC2086 # CMAKE_ARGS: several words
cmake -S "$ROOT" -B "$BUILD" -DVDN_FARM=OFF -DVDN_WERROR=ON -DVDN_PYTHON="$PY" \
  ${NVCC:+-DCMAKE_CUDA_COMPILER="$NVCC"} -DVDN_CUDA="${DEV_CUDA:-ON}" \
  ${NCCL:+-DNCCL_ROOT="$NCCL"} $TOKARG ${CMAKE_ARGS:-} > "$BUILD/configure.log" 2>&1 ||
  { tail -30 "$BUILD/configure.log"; die "cmake configure (log: $BUILD/configure.log)"; }
grep -E "^-- (vdn|NCCL)" "$BUILD/configure.log" | sed 's/^-- /  cmake: /'
if [ -n "$NVCC" ] && ! grep -q "CUDA backend ON" "$BUILD/configure.log"; then
  die "cmake did not enable the CUDA backend (see $BUILD/configure.log)"
fi
# shellcheck disable=SC2086 # TARGETS: several words
cmake --build "$BUILD" -j "$JOBS" ${TARGETS:+--target $TARGETS} > "$BUILD/build.log" 2>&1 ||
  { grep -E "error|Error|undefined reference" "$BUILD/build.log" | head -30; die "cmake --build (log: $BUILD/build.log)"; }
cp "$PFX/env.sh" "$BUILD/env.sh"
echo "build.sh: built in $(($(date +%s) - t0)) s: $BUILD/cli/vdn, $(ctest --test-dir "$BUILD" -N | grep -c 'Test *#') tests ($(ctest --test-dir "$BUILD" -N -L gpu | grep -c 'Test *#') labelled gpu)"
