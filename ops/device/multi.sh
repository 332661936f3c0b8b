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
#        bash ops/device/multi_carry.sh     # .devcarry/multi: cJSON .debs + the farm's sysroot
#      (~3 min; it prints what would travel: ~60 of the 64 MiB a call carries)
#   2. Four device calls, back to back (a machine stays warm 30 s after a call; one call <= 600 s;
#      at most 8 files come back from $OUT per call), each exactly
#        run(kind="nvidia-h200-x8", needs_h200=true, carry=[".devcarry"], timeout_s=600,
#            command="bash ops/device/multi.sh PHASES")
#      (needs_h200: bf16 on one GPU peaks at ~98 GiB, over an H100's 78), PHASES in turn:
#      a. build equal       ~3 min: build, NCCL equality (forward and whole renders)
#      b. thru scale-fp8    ~7 min: throughput, fp8 latency and scaling
#      c. scale-bf16        ~7 min: bf16 latency and scaling
#      d. farm              ~4 min: the render system end to end
#      ~21 min + the machine's start, of the 30 min of device time. If H200s do not come, the
#      H100 kinds without needs_h200: bf16 on 1 (and maybe 2) GPUs then reports out of memory
#      and the rest runs.
#   Every phase builds first when this machine has no build yet (a fresh machine: ~2 min), runs
#   under its own `timeout` (cut so that the whole call ends within BUDGET = 570 s), writes its
#   log (and JSON, rewritten after every render, so a phase cut short keeps what it measured)
#   under $OUT and prints a summary.
#
# Phases: build, equal, scale-fp8, scale-bf16, thru, farm. Switches: NFE (timed evaluations, 1),
# WARMUP (1), JOBS (parallel compiles), T_EQUAL/T_SCALE/T_THRU/T_FARM (seconds), BUDGET (570),
# FARM_CPU=1 (the farm phase on CPU workers: how it is checked without a GPU).
set -uo pipefail
OUT=${OUT:-/tmp/vdn-out}
mkdir -p "$OUT"
ROOT=$(pwd)
B=$ROOT/build-multi # ignored (/build*/): kept between calls on a warm machine
CARRY=$ROOT/.devcarry/multi
JOBS=${JOBS:-$(nproc)}
NFE=${NFE:-1}
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

# ---- build: the engine, CUDA backend, NCCL communicator, `vdn bench`, vdnmini, the shard check,
# with nvcc/gcc directly (the machine lacks the render system's -dev libraries) ----
NCCL=${NCCL_HOME:-$(python3 -c "import nvidia.nccl as m; print(list(m.__path__)[0])" 2>/dev/null)}
for d in "$NCCL" /usr/local/cuda /usr; do
  if [ -n "$d" ] && [ -f "$d/include/nccl.h" ]; then NCCL=$d; break; fi
done
PFX=$B/deps
export LD_LIBRARY_PATH="$PFX/usr/lib/x86_64-linux-gnu:$NCCL/lib:${LD_LIBRARY_PATH:-}"
CFLAGS=(-O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra ${WERROR:+-Werror} -Ikernels -Iengine -Iops/cli -Itext -Ivae
  -I"$PFX/usr/include")
NVFLAGS=("-gencode=arch=compute_90a,code=sm_90a" -O3 --use_fast_math -std=c++17 -Ikernels -Iengine -Iops/cli
  -I"$NCCL/include" ${WERROR:+-Werror all-warnings})
LINK=(-L"$PFX/usr/lib/x86_64-linux-gnu" -lcjson -L"$NCCL/lib" -l:libnccl.so.2 -lcublasLt -lcublas
  -lpthread -lm -Xlinker --undefined=vdn_cuda_dev_backend -Xlinker --undefined=vdn_comm_nccl_open
  -Xlinker --undefined=vdn_comm_nccl_unique_id)
C_SRC=(engine/*.c kernels/twin_norm.c kernels/twin_attn.c kernels/twin_vda.c text/encoder_init.c
  text/encoder_config.c vae/vae_init.c vae/vae_config.c vae/vae_weights.c kernels/bench_whole.c
  kernels/bench_group.c kernels/bench_compare.c)
CU_SRC=(kernels/*.cu)
stamp() { cat "${C_SRC[@]}" "${CU_SRC[@]}" engine/*.h kernels/*.h kernels/*.cuh kernels/cmd_bench.c \
  ops/bench/*.c engine/test/dit_shard_compare.c ops/device/multi.sh | md5sum | cut -c1-16; }

build() {
  if [ -f "$B/stamp" ] && [ "$(cat "$B/stamp")" = "$(stamp)" ] && [ -x "$B/vdn_bench" ]; then
    say "build: up to date ($B)"; return 0
  fi
  local t0; t0=$(date +%s)
  rm -rf "$B"; mkdir -p "$B/o" "$PFX"
  if ! [ -f "$NCCL/include/nccl.h" ]; then say "build: FAILED: no nccl.h (nvidia-nccl wheel, NCCL_HOME)"; return 1; fi
  # cJSON: the engine's run records; the machine has no libcjson-dev, so its .debs travel
  for d in "$CARRY"/deb/*.deb; do [ -f "$d" ] && dpkg -x "$d" "$PFX"; done
  {
    echo "nccl: $NCCL"
    mkdir -p "$B/o/engine" "$B/o/kernels" "$B/o/text" "$B/o/vae"
    printf '%s\n' "${C_SRC[@]}" | xargs -P "$JOBS" -I{} gcc "${CFLAGS[@]}" -c {} -o "$B/o/{}.o"
    printf '%s\n' "${CU_SRC[@]}" | xargs -P "$JOBS" -I{} nvcc "${NVFLAGS[@]}" -c {} -o "$B/o/{}.o"
    gcc "${CFLAGS[@]}" -DVDN_HAVE_CUDA=1 -c kernels/cmd_bench.c -o "$B/o/kernels/cmd_bench.c.o"
    gcc "${CFLAGS[@]}" -c ops/bench/bench_main.c -o "$B/bench_main.o"
    gcc "${CFLAGS[@]}" -c ops/bench/mini_main.c -o "$B/mini_main.o"
    gcc "${CFLAGS[@]}" -DVDN_HAVE_NCCL=1 -c engine/test/dit_shard_compare.c -o "$B/shard_cmp.o"
    find "$B/o" -name '*.o' -print0 | xargs -0 ar rcs "$B/libk.a"
    nvcc -o "$B/vdn_bench" "$B/bench_main.o" "$B/libk.a" "${LINK[@]}"
    nvcc -o "$B/vdnmini" "$B/mini_main.o" "$B/libk.a" "${LINK[@]}"
    nvcc -o "$B/shard_cmp" "$B/shard_cmp.o" "$B/libk.a" "${LINK[@]}"
  } > "$OUT/build.log" 2>&1
  if [ -x "$B/vdn_bench" ] && [ -x "$B/vdnmini" ] && [ -x "$B/shard_cmp" ]; then
    stamp > "$B/stamp"
    say "build: ok in $(( $(date +%s) - t0 )) s (nvcc sm_90a, NCCL $NCCL)"
  else
    say "build: FAILED after $(( $(date +%s) - t0 )) s; the first errors:"
    grep -E "error|undefined reference" "$OUT/build.log" | head -15 | tee -a "$SUMMARY"
    return 1
  fi
}

# the small checkpoint (head_dim 128: the CUDA kernels' geometry) and its t2va / fl2va prompts
small_ckpt() {
  [ -f "$B/smallck/prompt_fl2va.safetensors" ] && return 0
  "$B/vdnmini" ckpt init --preset small --vdn --out "$B/smallck" > "$B/smallck.log" 2>&1
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
  small_ckpt || { say "equal: FAILED: vdnmini ckpt init (see build-multi/smallck.log)"; return 1; }
  local P=$B/smallck/prompt.safetensors K=$B/smallck/prompt_fl2va.safetensors r1 r2
  run_logged equal "${T_EQUAL:-120}" "$B/shard_cmp" "$B/smallck" "$P" "$K" --backend cuda \
    --gpus "$PLIST" --tol 1e-2 --modes vdn,dense
  r1=$?
  grep -E "P=[0-9]+ devices|runs:|FAIL|skip" "$OUT/equal.log" | sed 's/^.*safetensors //' | tee -a "$SUMMARY"
  run_logged equal-render "${T_EQUAL:-120}" "$B/vdn_bench" --whole --preset small --frames 17 \
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
  run_logged "scale-$prec" "${T_SCALE:-560}" "$B/vdn_bench" --whole --variants vdn,dense \
    --precision "$prec" --nfe "$NFE" --warmup "$WARMUP" --gpus "$DESC" --comm-profile --steps 50 \
    --json "$OUT/scale-$prec.json"
  kill "$smi" 2>/dev/null
  grep -E "whole model|s/NFE|FAILED|rank [0-9]+:|of 1 GPU" "$OUT/scale-$prec.log" | tee -a "$SUMMARY"
  python3 ops/device/multi_summary.py scale "$OUT/scale-$prec.json" | tee -a "$SUMMARY"
}

# ---- thru: item 4. N one-GPU VDN renders at once (fp8), clips per hour of a 50-step clip; beside
# the N-GPU row of scale-fp8 at the end of a call that ran both (b) ----
phase_thru() {
  run_logged thru "${T_THRU:-200}" "$B/vdn_bench" --whole --variants vdn --precision "${THRU_PRECISION:-fp8}" \
    --nfe 2 --warmup 1 --independent "$NGPU" --steps 50 --json "$OUT/thru.json"
  grep -E "whole model|at once|FAILED" "$OUT/thru.log" | tee -a "$SUMMARY"
}

# ---- farm: item 5. The render system built with CMake against the carried sysroot (headers, .so
# files and .pc files of libzmq, protobuf-c, sqlite, libcurl, libav*, libmicrohttpd, libpng,
# pcre2, utf8proc, cJSON; protoc-c and pkg-config), then `vdn up` with one worker on every GPU,
# a batch of N one-GPU jobs, one N-GPU job and one 2-GPU job, mp4s in the file store ----
phase_farm() {
  local tarball=$CARRY/farm-sysroot.tar.xz
  if [ ! -f "$tarball" ]; then
    say "farm: SKIPPED: $tarball is absent (run ops/device/multi_carry.sh here first; it holds the"
    say "      render system's libraries: libzmq5, libprotobuf-c1, libsqlite3-0, libcurl4, libav*,"
    say "      libmicrohttpd12, libpng16-16, libpcre2-8-0, libutf8proc2, libcjson1 and their -dev files)"
    return 0
  fi
  local S=$B/sysroot FB=$B/farm-build
  local t0; t0=$(date +%s)
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
  local farm_ld="$lib:$LD_LIBRARY_PATH" cxx
  # Debian 12's libstdc++ (GCC 12) only where the machine's is older
  cxx=$(awk '/libstdc\+\+\.so\.6 .*x86-64/ {print $NF; exit}' <<< "$have")
  if [ -z "$cxx" ] || ! grep -q GLIBCXX_3.4.30 "$cxx"; then farm_ld="$S/usr/lib/compat:$farm_ld"; fi
  env PATH="$S/usr/bin:$PATH" LD_LIBRARY_PATH="$farm_ld" PKG_CONFIG_SYSROOT_DIR="$S" \
    PKG_CONFIG_LIBDIR="$lib/pkgconfig:$S/usr/share/pkgconfig" \
    cmake -S . -B "$FB" -DCMAKE_BUILD_TYPE=Release -DVDN_CUDA=$cuda -DNCCL_ROOT="$NCCL" \
    -DVDN_PYTHON="$(command -v python3)" > "$OUT/farm-build.log" 2>&1 &&
    env PATH="$S/usr/bin:$PATH" LD_LIBRARY_PATH="$farm_ld" \
      timeout $(( DEADLINE - $(date +%s) - 60 )) cmake --build "$FB" --target vdn -j "$JOBS" \
      >> "$OUT/farm-build.log" 2>&1
  if [ ! -x "$FB/ops/vdn" ]; then
    say "farm: BUILD FAILED after $(( $(date +%s) - t0 )) s; the first errors:"
    grep -E "error|Error|not found|undefined" "$OUT/farm-build.log" | head -15 | tee -a "$SUMMARY"
    return 1
  fi
  say "farm: vdn built in $(( $(date +%s) - t0 )) s ($(grep -c 'NCCL communicator' "$OUT/farm-build.log") NCCL line)"
  LD_LIBRARY_PATH="$farm_ld" run_logged farm "${T_FARM:-420}" \
    bash ops/device/multi_farm.sh "$FB/ops/vdn" "$B/farm" "$NGPU" "$OUT/farm.json"
  tail -25 "$OUT/farm.log" | tee -a "$SUMMARY"
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
