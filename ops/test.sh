#!/usr/bin/env bash
# Build everything (CUDA too where nvcc exists) and run all tests. GPU tests (ctest label
# `gpu`) skip themselves, saying so, on a machine without a GPU. Then, where clang is
# installed, every libFuzzer target runs briefly (ops/fuzz.sh; VDN_FUZZ_SECONDS per target,
# default 10; VDN_FUZZ_SECONDS=0 leaves fuzzing out), and the threaded tests run again under
# ThreadSanitizer (ops/tsan.sh; VDN_TSAN=0 leaves it out).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD:-build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVDN_WERROR=ON ${CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD" -j"$(nproc)"
cd "$BUILD"
ctest --output-on-failure -j"$(nproc)" --timeout 1500 "$@" 2>&1 | tee ctest-summary.log
ctest_rc=${PIPESTATUS[0]}
# ctest's own summary line, kept to repeat as the run's last line (fuzzing prints after it)
summary=$(sed -n 's/^[0-9]*% tests passed, \([0-9]*\) tests* failed out of \([0-9]*\)$/\1 \2/p' ctest-summary.log | tail -n1)
skipped=$(grep -c '(Skipped)$' ctest-summary.log || true)
cd "$ROOT"
if [[ $ctest_rc != 0 ]]; then exit "$ctest_rc"; fi

FUZZ_SECONDS=${VDN_FUZZ_SECONDS:-10}
if [[ $FUZZ_SECONDS == 0 ]]; then
    echo "ops/test.sh: fuzzing left out (VDN_FUZZ_SECONDS=0)"
elif ! command -v clang >/dev/null 2>&1; then
    echo "ops/test.sh: fuzzing SKIPPED: no clang on PATH"
else
    echo "ops/test.sh: fuzzing every libFuzzer target for ${FUZZ_SECONDS}s (ops/fuzz.sh)"
    ops/fuzz.sh "$FUZZ_SECONDS"
fi
if [[ ${VDN_TSAN:-1} == 0 ]]; then
    echo "ops/test.sh: ThreadSanitizer run left out (VDN_TSAN=0)"
else
    ops/tsan.sh
fi
if [[ -n $summary ]]; then
    read -r failed total <<<"$summary"
    echo "ctest: $((total - failed - skipped)) passed, $failed failed, $skipped skipped"
fi

