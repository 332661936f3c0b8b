#!/usr/bin/env bash
# Build every libFuzzer target (VDN_FUZZ=ON, clang, CPU only) and run each one for a while.
#
#   ops/fuzz.sh [SECONDS_PER_TARGET]      (default 15)
#   FUZZ_ONLY=envelope ops/fuzz.sh 300     only the targets whose name matches this regex
#
# The whole build dir (BUILD_FUZZ, default build-fuzz) is compiled with sanitizer coverage,
# ASan and UBSan, so libFuzzer sees the branches of the parsers themselves, not only those of
# the small fuzz entry points. Each target is seeded from its committed corpus; what libFuzzer
# finds goes to a temporary directory, never into the repository. Targets run one at a time,
# one process each (the build machine is small and shared).
#
# Exit status: 0 when every target ran clean (or when clang/libFuzzer is missing: then it says
# so and skips), 1 when a target crashed, leaked, timed out or ran out of memory (the input and
# a command to reproduce it are printed), 2 on a usage or build error.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

SECONDS_PER_TARGET=${1:-15}
if ! [[ $SECONDS_PER_TARGET =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: ops/fuzz.sh [SECONDS_PER_TARGET]  (a positive whole number, got '$1')" >&2
    exit 2
fi
BUILD=$(realpath -m "${BUILD_FUZZ:-build-fuzz}")
CLANG=${FUZZ_CC:-clang}
JOBS=${FUZZ_BUILD_JOBS:-2}

# Every fuzz target the CMake files define, with the committed corpus it starts from (paths
# relative to the repository root). A target that is built but missing here still runs,
# unseeded, with a warning; one listed here but not built is an error (a renamed target would
# otherwise silently stop being fuzzed).
declare -A CORPUS=(
    [fuzz_envelope]=proto/test/corpus_envelope
    [fuzz_jsonl]=coordinator/test/corpus_jsonl
    [fuzz_client_files]=coordinator/test/corpus_client_files
    [fuzz_keys]=coordinator/test/corpus_keys
    [fuzz_http_range]=coordinator/test/corpus_http_range
    [ckpt_fuzz]=engine/test/ckpt_corpus
    [fuzz_engine_noise]=@noise # derived below from the safetensors entries of ckpt_corpus
    [fuzz_worker_conf]=worker/test/corpus_conf
    [fuzz_worker_snapshot]=worker/test/corpus_snapshot
    [fuzz_worker_relay]=worker/test/corpus_relay
    [fuzz_s3_xml]=store/test/corpus_s3_xml
    [fuzz_eval_suite]=eval/test/corpus_suite
    [fuzz_eval_configs]=eval/test/corpus_configs
    [fuzz_tokenizer]=engine/text/test/corpus_tokenizer
    [fuzz_vision_config]=engine/text/test/corpus_vision_config
    [fuzz_vae_config]=engine/vae/test/corpus_vae_config
    [fuzz_image]=media/test/corpus_image
    [fuzz_bench_peer]=engine/bench/test/corpus_bench_peer
    [fuzz_bench_args]=@bench # a few command lines written below
)

skip() {
    echo "ops/fuzz.sh: SKIPPED, $1"
    exit 0
}

# ---- is there a clang with the libFuzzer runtime? ----
command -v "$CLANG" >/dev/null 2>&1 || skip "no '$CLANG' on PATH (set FUZZ_CC to another clang)"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/vdn-fuzz.XXXXXX")
cleanup() {
    # crash inputs and logs are copied to $BUILD/fuzz-crashes first; KEEP_TMP=1 keeps the rest
    # (the new inputs libFuzzer found, every log)
    if [[ ${KEEP_TMP:-0} == 0 ]]; then rm -rf "$TMP"; fi
}
trap cleanup EXIT
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' \
    >"$TMP/probe.c"
if ! "$CLANG" -fsanitize=fuzzer,address,undefined "$TMP/probe.c" -o "$TMP/probe" 2>"$TMP/probe.log"; then
    skip "'$CLANG' cannot link a libFuzzer target (is the libFuzzer runtime installed?): $(head -c 300 "$TMP/probe.log")"
fi

# ---- configure and build only the fuzz targets ----
SAN="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
echo "ops/fuzz.sh: configuring $BUILD (clang, VDN_FUZZ=ON, CPU only, ASan+UBSan+coverage)"
if ! CC=$CLANG cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVDN_FUZZ=ON -DVDN_CUDA=OFF \
    -DVDN_WERROR=ON "-DCMAKE_C_FLAGS=$SAN" >"$TMP/configure.log" 2>&1; then
    cat "$TMP/configure.log" >&2
    echo "ops/fuzz.sh: configuring $BUILD failed" >&2
    exit 2
fi
# The fuzz targets are whatever executables the build defines under these names.
mapfile -t TARGETS < <(cmake --build "$BUILD" --target help | sed -n -e 's/^\.\.\. \([A-Za-z0-9_]*\).*/\1/p' -e 's/^\([A-Za-z0-9_]*\): .*/\1/p' |
    grep -E '^(fuzz_[A-Za-z0-9_]+|[A-Za-z0-9_]+_fuzz)$' | sort)
if ((${#TARGETS[@]} == 0)); then
    echo "ops/fuzz.sh: the build defines no fuzz targets (is VDN_FUZZ honoured with clang?)" >&2
    exit 2
fi
for t in "${!CORPUS[@]}"; do
    if ! printf '%s\n' "${TARGETS[@]}" | grep -qx "$t"; then
        echo "ops/fuzz.sh: target $t (listed in ops/fuzz.sh) is not defined by the build" >&2
        exit 2
    fi
done
if [[ -n ${FUZZ_ONLY:-} ]]; then
    mapfile -t TARGETS < <(printf '%s\n' "${TARGETS[@]}" | grep -E -- "$FUZZ_ONLY" || true)
    if ((${#TARGETS[@]} == 0)); then
        echo "ops/fuzz.sh: FUZZ_ONLY='$FUZZ_ONLY' matches no fuzz target" >&2
        exit 2
    fi
fi
echo "ops/fuzz.sh: building ${#TARGETS[@]} targets: ${TARGETS[*]}"
if ! cmake --build "$BUILD" -j"$JOBS" --target "${TARGETS[@]}" >"$TMP/build.log" 2>&1; then
    tail -n 60 "$TMP/build.log" >&2
    echo "ops/fuzz.sh: building the fuzz targets failed (log above)" >&2
    exit 2
fi

# ---- run each target ----
# A noise file is a safetensors file: seed that target with the safetensors entries of the
# checkpoint corpus, whose first byte only selects the parser in ckpt_fuzz.
mkdir -p "$TMP/seed_noise"
for f in "$ROOT"/engine/test/ckpt_corpus/st_*; do
    if [[ -e $f ]]; then tail -c +2 "$f" >"$TMP/seed_noise/$(basename "$f")"; fi
done

# vdn bench arguments: the target splits its input at NUL bytes into argv.
mkdir -p "$TMP/seed_bench"
printf -- '--frames\0102\0--grid\024x42\0--reps\03' >"$TMP/seed_bench/frames_grid"
printf -- '--text\0512\0--audio\0140\0--attn-reps\02\0--json' >"$TMP/seed_bench/text_audio"
printf -- '--help' >"$TMP/seed_bench/help"

declare -A EXECS RESULT
FAILED=0
for t in "${TARGETS[@]}"; do
    exe=$(find "$BUILD" -type f -name "$t" -perm -u+x | head -n 1)
    if [[ -z $exe ]]; then
        RESULT[$t]="NOT BUILT"
        FAILED=1
        continue
    fi
    seeds=()
    case ${CORPUS[$t]:-} in
    "") echo "ops/fuzz.sh: warning: no corpus known for $t, it starts from nothing (add it to ops/fuzz.sh)" ;;
    @noise) seeds=("$TMP/seed_noise") ;;
    @bench) seeds=("$TMP/seed_bench") ;;
    *) seeds=("$ROOT/${CORPUS[$t]}") ;;
    esac
    new="$TMP/new/$t" art="$TMP/artifacts/$t"
    mkdir -p "$new" "$art"
    log="$TMP/$t.log"
    echo "ops/fuzz.sh: fuzzing $t for ${SECONDS_PER_TARGET}s"
    rc=0
    # First corpus dir = where new inputs go (temporary); the committed ones are only read.
    # Parsers warn about what they skip; at millions of inputs that is gigabytes of log: a
    # VDN_FUZZ build logs errors only (CMakeLists.txt).
    ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0} \
        UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
        "$exe" -max_total_time="$SECONDS_PER_TARGET" -timeout=5 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$art/" "$new" "${seeds[@]}" >"$log" 2>&1 || rc=$?
    EXECS[$t]=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)
    crash=$(find "$art" -type f | head -n 1)
    if ((rc == 0)) && [[ -z $crash ]]; then
        RESULT[$t]=ok
        continue
    fi
    FAILED=1
    kind=$(grep -m1 -oE 'ERROR: (libFuzzer|AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer)[^ ]*( [a-z-]+)?' "$log" ||
        grep -m1 -oE 'runtime error: .*' "$log" || echo "exit status $rc")
    RESULT[$t]="FAILED ($kind)"
    mkdir -p "$BUILD/fuzz-crashes"
    cp "$log" "$BUILD/fuzz-crashes/$t.log"
    echo "---- $t: the report (whole log: $BUILD/fuzz-crashes/$t.log) ----" >&2
    if grep -qE 'ERROR: |runtime error:' "$log"; then
        sed -n '/ERROR: \|runtime error:/,/^SUMMARY/p' "$log" | head -n 60 >&2
    else
        tail -n 40 "$log" >&2
    fi
    if [[ -n $crash ]]; then
        keep="$BUILD/fuzz-crashes/$t-$(basename "$crash")"
        cp "$crash" "$keep"
        echo "ops/fuzz.sh: $t: crash input saved as $keep" >&2
        echo "ops/fuzz.sh: reproduce with: $exe $keep" >&2
    fi
done

# ---- report ----
echo
printf '%-22s %12s  %s\n' target execs result
for t in "${TARGETS[@]}"; do
    printf '%-22s %12s  %s\n' "$t" "${EXECS[$t]:-?}" "${RESULT[$t]}"
done
echo
if ((FAILED)); then
    echo "ops/fuzz.sh: FAILED: at least one fuzz target crashed (details above)"
    exit 1
fi
echo "ops/fuzz.sh: fuzzing ran: ${#TARGETS[@]} targets, ${SECONDS_PER_TARGET}s each, no crashes"
