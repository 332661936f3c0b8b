#!/usr/bin/env bash
# Build everything (CUDA too where nvcc exists) and run all tests. GPU tests (ctest label
# `gpu`) skip themselves, saying so, on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVDN_WERROR=ON ${CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD" -j"$(nproc)"
cd "$BUILD"
ctest --output-on-failure -j"$(nproc)" --timeout 1500 "$@"
