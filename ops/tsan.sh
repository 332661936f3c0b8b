#!/usr/bin/env bash
# ThreadSanitizer over the tests of the code that runs threads: the ranks of a k-GPU render and
# their communicator, the group decode, the text-prompt single flight, the coordinator's media
# cache. Builds build-tsan/ with clang -fsanitize=thread (CPU only) and runs those tests; the
# first race a process reports stops it (halt_on_error), so its test fails. ops/test.sh runs it
# after fuzzing where clang is installed (VDN_TSAN=0 leaves it out).
#   ops/tsan.sh [ctest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD_TSAN:-build-tsan}
if ! command -v clang >/dev/null 2>&1; then
    echo "ops/tsan.sh: SKIPPED: no clang on PATH"
    exit 0
fi
TESTS='^(engine_comm|engine_api|engine_dit_shard_cpu|engine_dit_shard_gpus_cpu|engine_render_ranks|vae_group_decode|text_prompt_cache|coordinator_http_media)$'
TARGETS="vdn test_engine_comm test_engine_api engine_dit_shard_compare test_vae_group test_prompt_cache test_http_media"
CC=clang cmake -S . -B "$BUILD" -DVDN_CUDA=OFF -DVDN_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" >/dev/null
# shellcheck disable=SC2086  # a list of targets
cmake --build "$BUILD" -j"$(nproc)" --target $TARGETS
cd "$BUILD"
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
echo "ops/tsan.sh: ThreadSanitizer over the threaded tests"
ctest --output-on-failure --timeout 900 -R "$TESTS" "$@"
