#!/usr/bin/env bash
# The whole CPU test suite under AddressSanitizer + UndefinedBehaviorSanitizer (LeakSanitizer
# included), in its own build dir. Not part of CI (it takes several times as long as ops/test.sh);
# run it before a release or after touching a parser or an allocator-heavy path.
#
#   ops/sanitize.sh [ctest arguments...]     e.g. ops/sanitize.sh -R store_
#
# BUILD_SAN picks the build dir (default build-asan), CC the compiler (default clang when it is
# installed: its UBSan checks a little more and it doubles as the clang -Werror build; else cc).
# Any sanitizer report makes the test that triggered it fail (halt_on_error, nonzero exit).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD_SAN:-build-asan}
if [[ -z ${CC:-} ]]; then
    if command -v clang >/dev/null 2>&1; then CC=clang; else CC=cc; fi
fi
JOBS=${SAN_JOBS:-$(nproc)}
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"

echo "ops/sanitize.sh: $BUILD with $CC, $SAN, CPU only"
CC=$CC cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVDN_WERROR=ON -DVDN_CUDA=OFF \
    "-DCMAKE_C_FLAGS=$SAN" >/dev/null
cmake --build "$BUILD" -j"$JOBS"

# Every process writes its report to a file under REPORTS (asan.PID / ubsan.PID), including
# the coordinator and worker processes that the Python drivers start and whose exit status
# they do not always look at; the reports are printed, and fail the run, at the end.
REPORTS=$(realpath -m "$BUILD/sanitizer-reports")
rm -rf "$REPORTS" && mkdir -p "$REPORTS"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1:check_initialization_order=1:log_path=$REPORTS/asan}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/ops/lsan.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:log_path=$REPORTS/ubsan}
cd "$BUILD"
# Sanitized binaries are 2-5x slower; a test with its own short TIMEOUT that times out here
# (and passes alone: ops/sanitize.sh -R NAME) is slow, not wrong.
rc=0
ctest --output-on-failure -j"$JOBS" --timeout 3000 "$@" || rc=$?
mapfile -t found < <(find "$REPORTS" -type f | sort)
for f in "${found[@]}"; do
    echo "==== $f"
    head -n 40 "$f"
done
if ((${#found[@]})); then
    echo "ops/sanitize.sh: FAILED: ${#found[@]} sanitizer report(s), above and in $REPORTS"
    exit 1
fi
if ((rc)); then
    echo "ops/sanitize.sh: FAILED: no sanitizer report, but ctest failed (above)"
    exit "$rc"
fi
echo "ops/sanitize.sh: every test passed under ASan+UBSan, no sanitizer report from any process"
