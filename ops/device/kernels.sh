#!/usr/bin/env bash
# One device run: build the kernels, their GPU tests and `vdn bench` with nvcc/gcc directly (the
# device machine lacks the render system's Debian -dev libraries), check every kernel against its
# CPU twin, benchmark the H3 workload, run the PyTorch peers in the same run, print a summary.
#   OUT=dir bash ops/device/kernels.sh [peers.py]        (run from the repository root)
# switches: BENCH=0, SANITIZE=0, SANITIZE_ONLY=prep, PROFILE=1, H3RENDER=1, BENCH_ARGS="--reps 5",
#           WHOLE=1 WHOLE_ARGS="--variants vdn,dense --nfe 3" (vdn bench --whole; WHOLE_RUNS="A;B"
#           for several; a run's leading NAME=value words are its environment, e.g.
#           WHOLE_RUNS="--nfe 1;CUDA_LAUNCH_BLOCKING=1 --nfe 1"), TESTS=0, FP8ACC=1 (fp8 vs bf16 vs the
#           CPU oracle on small renders),
#           SANITIZE_RENDER=0, SANITIZE_OPS=0, TESTS=ops (only the backend-ops test),
#           FP8ACC_H3=1 (the same at the real widths: a 2-block H3-shaped checkpoint, a short clip),
#           TESTS=backend (the backend-ops test and the CUDA-vs-CPU render test, not the kernels'),
#           ATTN_VAE=1 (vdn bench attn-vae: the video VAE decoder's attention on both kernels)
set -uo pipefail
OUT=${OUT:-/tmp/vdn-out}
PEERS=${1:-.devcarry/h3_peers.py}
mkdir -p "$OUT"
B=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"

CFLAGS="-O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Ikernels -Iengine -Iops/cli -Itext -Ivae"
NVFLAGS="-gencode=arch=compute_90a,code=sm_90a -O3 --use_fast_math -std=c++17 -lineinfo -Ikernels -Iengine -Iops/cli"
t0=$(date +%s)
{
  for f in engine/vdn_util.c kernels/twin_norm.c kernels/twin_attn.c kernels/twin_vda.c engine/attn_tiles.c; do
    gcc $CFLAGS -c "$f" -o "$B/$(basename "$f" .c).o" &
  done
  gcc $CFLAGS -DVDN_HAVE_CUDA=1 -c kernels/cmd_bench.c -o "$B/cmd_bench.o" &
  gcc $CFLAGS -c kernels/bench_whole.c -o "$B/bench_whole.o" &
  gcc $CFLAGS -c ops/bench/bench_main.c -o "$B/bench_main.o" &
  for f in kernels/*.cu kernels/test/test_gpu.cu; do
    nvcc $NVFLAGS -Xptxas=-v -c "$f" -o "$B/$(basename "$f" .cu).cu.o" &
  done
  wait
} > "$OUT/build.log" 2>&1
# the engine (for the CUDA-vs-CPU backend test) needs cJSON: carried as Debian packages
PFX="$B/deps"
for d in .devcarry/*.deb; do [ -f "$d" ] && dpkg -x "$d" "$PFX"; done
CJ="-I$PFX/usr/include"
LJ="-L$PFX/usr/lib/x86_64-linux-gnu -lcjson"
export LD_LIBRARY_PATH="$PFX/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
mkdir -p "$B/eng"
{
  for f in engine/*.c text/encoder_init.c text/encoder_config.c vae/vae_init.c vae/vae_config.c vae/vae_weights.c; do
    case "$f" in engine/vdn_util.c) continue ;; esac
    gcc $CFLAGS $CJ -c "$f" -o "$B/eng/$(basename "$f" .c).o" &
  done
  gcc $CFLAGS $CJ -c kernels/test/test_backend_gpu.c -o "$B/test_backend_gpu.o" &
  gcc $CFLAGS $CJ -c kernels/test/test_backend_ops.c -o "$B/test_backend_ops.o" &
  gcc $CFLAGS $CJ -c kernels/bench_compare.c -o "$B/bench_compare.o" &
  gcc $CFLAGS $CJ -c kernels/bench_group.c -o "$B/bench_group.o" &
  wait
} >> "$OUT/build.log" 2>&1
LIBOBJ=$(ls $B/*.o | grep -v -e test_gpu -e bench_main -e cmd_bench -e bench_whole -e bench_group -e test_backend_gpu -e test_backend_ops)
ar rcs "$B/libk.a" $LIBOBJ $B/eng/*.o
nvcc -o "$B/test_gpu" "$B/test_gpu.cu.o" "$B/libk.a" -lcublasLt -lcublas >> "$OUT/build.log" 2>&1
nvcc -o "$B/vdn_bench" "$B/cmd_bench.o" "$B/bench_whole.o" "$B/bench_group.o" "$B/bench_main.o" "$B/libk.a" $LJ -lcublasLt -lcublas -lpthread -lm \
  -Xlinker --undefined=vdn_cuda_dev_backend >> "$OUT/build.log" 2>&1
nvcc -o "$B/test_backend" "$B/test_backend_gpu.o" "$B/libk.a" $LJ -lcublasLt -lcublas -lpthread -lm \
  -Xlinker --undefined=vdn_cuda_dev_backend >> "$OUT/build.log" 2>&1
nvcc -o "$B/test_backend_ops" "$B/test_backend_ops.o" "$B/libk.a" $LJ -lcublasLt -lcublas -lpthread -lm \
  -Xlinker --undefined=vdn_cuda_dev_backend >> "$OUT/build.log" 2>&1
gcc $CFLAGS -c ops/bench/mini_main.c -o "$B/mini_main.o" >> "$OUT/build.log" 2>&1
nvcc -o "$B/vdnmini" "$B/mini_main.o" "$B/cmd_bench.o" "$B/bench_whole.o" "$B/bench_group.o" "$B/libk.a" $LJ -lcublasLt -lcublas -lpthread -lm \
  -Xlinker --undefined=vdn_cuda_dev_backend >> "$OUT/build.log" 2>&1
gcc $CFLAGS kernels/test/test_twins.c kernels/twin_*.c engine/attn_tiles.c engine/vdn_util.c -lm -o "$B/test_twins" >> "$OUT/build.log" 2>&1
echo "build: $(( $(date +%s) - t0 )) s"
grep -E "error|registers|spill" "$OUT/build.log" | grep -E "error|attn_k|solve_k|scan_k|act_k|prep_k|spill stores [1-9]" | head -20
command -v cuobjdump > /dev/null && for o in attn attn_pingpong; do
  echo "$o: $(cuobjdump --dump-sass "$B/$o.cu.o" | grep -c -E 'HGMMA') HGMMA, $(cuobjdump --dump-sass "$B/$o.cu.o" | grep -c -E 'HMMA') HMMA instructions"
done
if [ ! -x "$B/test_gpu" ] || [ ! -x "$B/vdn_bench" ]; then
  echo "BUILD FAILED"; tail -40 "$OUT/build.log"; exit 1
fi

tw=skip tg=skip tbo=skip tbk=skip
if [ "${TESTS:-1}" = ops ] || [ "${TESTS:-1}" = backend ]; then
  # only every op of the op layer, CUDA against the CPU oracle (the fp8 products included)
  timeout 200 "$B/test_backend_ops" > "$OUT/backend_ops.log" 2>&1; tbo=$?
  grep -E "FAIL|NON-FINITE|passed|failed|lanes" "$OUT/backend_ops.log" | head -20
fi
if [ "${TESTS:-1}" = backend ]; then
  # and whole small renders over the op layer, CUDA against CPU (and lane 1 against one lane)
  timeout ${GPU_TEST_TIMEOUT:-300} "$B/test_backend" > "$OUT/test.log" 2>&1; tbk=$?
  cat "$OUT/test.log"
fi
if [ "${TESTS:-1}" = 1 ]; then
  "$B/test_twins" > "$OUT/test.log" 2>&1; tw=$?
  timeout ${GPU_TEST_TIMEOUT:-240} "$B/test_gpu" >> "$OUT/test.log" 2>&1; tg=$?
  if [ -x "$B/test_backend_ops" ]; then timeout 200 "$B/test_backend_ops" > "$OUT/backend_ops.log" 2>&1; tbo=$?; else tbo=nobuild; fi
  grep -E "FAIL|NON-FINITE|passed|failed" "$OUT/backend_ops.log" | head -20
  if [ -x "$B/test_backend" ]; then timeout ${GPU_TEST_TIMEOUT:-300} "$B/test_backend" >> "$OUT/test.log" 2>&1; tbk=$?; else tbk=nobuild; fi
  cat "$OUT/test.log"
fi

# fp8 against bf16 and the CPU oracle on whole renders from one noise: CUDA bf16 / fp8 and CPU
# fp32 / fp8 renders of checkpoint CK for each variant, compared in NAME.txt (relative RMS)
#   fp8acc_renders NAME CK "VARIANTS" "RENDER ARGS"
fp8acc_renders() {
  local name=$1 ck=$2 variants=$3 args=$4 A v run cpu
  A=$(dirname "$ck")
  for v in $variants; do
    for run in "cuda bf16" "cuda fp8" "cpu bf16" "cpu fp8"; do
      set -- $run
      cpu=""; [ "$1" = cpu ] && cpu=--cpu
      timeout 300 "$B/vdnmini" render --checkpoint "$ck" --prompt-cache "$ck/prompt.safetensors" \
        $args --seed 5 --variant "$v" --precision "$2" $cpu --out "$A/$v-$1-$2" --save-latents \
        >> "$OUT/$name.log" 2>&1 || echo "$name: render $v $run failed"
    done
    python3 ops/device/compare_latents.py "$A/$v-cpu-bf16.safetensors" "$A/$v-cuda-bf16.safetensors" \
      "$A/$v-cuda-fp8.safetensors" "$A/$v-cpu-fp8.safetensors" 2>&1 | tee -a "$OUT/$name.txt"
    python3 ops/device/compare_latents.py "$A/$v-cpu-fp8.safetensors" "$A/$v-cuda-fp8.safetensors" \
      2>&1 | tee -a "$OUT/$name.txt"
    python3 ops/device/compare_latents.py "$A/$v-cuda-bf16.safetensors" "$A/$v-cuda-fp8.safetensors" \
      2>&1 | tee -a "$OUT/$name.txt"
  done
}
if [ "${FP8ACC:-0}" = 1 ] && [ -x "$B/vdnmini" ]; then
  # the small preset: H3's head geometry, tiny widths
  A=/tmp/vdn-fp8acc; rm -rf "$A"; mkdir -p "$A"
  "$B/vdnmini" ckpt init --preset small --vdn --out "$A/ck" > "$OUT/fp8acc.log" 2>&1
  fp8acc_renders fp8acc "$A/ck" "vdn dense" "--frames 56 --height 128 --width 128 --steps 3"
  grep -E "fp8|no fp8 algorithm" "$OUT/fp8acc.log" | grep -v "^$" | sort | uniq -c | head -5
fi
if [ "${FP8ACC_H3:-0}" = 1 ] && [ -x "$B/vdnmini" ]; then
  # the real widths (issue 13 item 3): a 2-block H3-shaped random checkpoint (hidden 5376, 56
  # heads x 128, FFN 14336, the VDN branch), 22 frames at 128 x 128 and one NFE so that the CPU
  # oracle takes about 100 s a render on 16 cores (FP8ACC_H3_VARIANTS="vdn dense" for both)
  A=/tmp/vdn-fp8acc-h3; rm -rf "$A"; mkdir -p "$A"
  t1=$(date +%s)
  "$B/vdnmini" ckpt init --preset h3 --layers 2 --vdn --prompt-tokens 64 --out "$A/ck" > "$OUT/fp8acc_h3.log" 2>&1
  echo "fp8acc h3: checkpoint in $(( $(date +%s) - t1 )) s" | tee -a "$OUT/fp8acc_h3.log"
  fp8acc_renders fp8acc_h3 "$A/ck" "${FP8ACC_H3_VARIANTS:-vdn}" "--frames 22 --height 128 --width 128 --steps 1"
  echo "fp8acc h3: done in $(( $(date +%s) - t1 )) s"
fi
if [ "${PROFILE:-0}" = 1 ] && command -v ncu > /dev/null; then
  # hardware counters of the first default (ping-pong) attention launch (dense) at a smaller clip
  timeout 240 ncu --clock-control none --kernel-name regex:attn_pp --launch-count 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section Occupancy "$B/vdn_bench" --frames 22 --reps 1 --attn-reps 1 \
    > "$OUT/ncu_attn.txt" 2>&1
  echo "ncu: exit $?"
  grep -E "Throughput|Pipe|Stall|Warp Cycles|Achieved|Issue Slots|L2 Hit|Bandwidth|Busy" "$OUT/ncu_attn.txt" | head -60
fi
if [ "${H3RENDER:-0}" = 1 ] && [ -x "$B/vdnmini" ]; then
  # whole renders through the engine on an H3-shaped random checkpoint with 2 DiT blocks (the
  # refiner, embeddings, heads, sampler and host<->device copies included), dense and VDN
  # H3_REUSE=1 keeps a checkpoint an earlier run on this machine made (ab.sh: both trees render
  # the same files; making them takes ~100 s)
  H3=/tmp/vdn-h3
  t1=$(date +%s)
  if [ "${H3_REUSE:-0}" = 1 ] && [ -f "$H3/prompt.safetensors" ]; then
    echo "h3 checkpoint reused" > "$OUT/h3render.log"
  else
    rm -rf "$H3"
    "$B/vdnmini" ckpt init --preset h3 --layers 2 --vdn --out "$H3" > "$OUT/h3render.log" 2>&1
    echo "h3 ckpt init (2 layers): exit $? in $(( $(date +%s) - t1 )) s" | tee -a "$OUT/h3render.log"
  fi
  echo "h3 checkpoint: $(du -sh --apparent-size "$H3" | cut -f1) on disk ($(du -sh --apparent-size "$H3/base" 2>/dev/null | cut -f1) base)" | tee -a "$OUT/h3render.log"
  for v in dense vdn; do
    t1=$(date +%s)
    rm -rf "/tmp/h3-$v" "/tmp/h3-$v.json"
    timeout 240 "$B/vdnmini" render --checkpoint "$H3" --prompt-cache "$H3/prompt.safetensors" \
      --frames 345 --height 768 --width 1344 --steps 3 --seed 1 --variant $v --out "/tmp/h3-$v" \
      >> "$OUT/h3render.log" 2>&1
    echo "h3 render $v: exit $? in $(( $(date +%s) - t1 )) s" | tee -a "$OUT/h3render.log"
    grep -E "host memory|DiT weights on the device" "$OUT/h3render.log" | tail -2
    /usr/bin/env python3 -c "import json,sys; r=json.load(open('/tmp/h3-$v.json')); print('$v', json.dumps(r.get('timing', r))[:400])" 2>&1 | tee -a "$OUT/h3render.log"
  done
fi
tw_=skip
if [ "${WHOLE:-0}" = 1 ]; then
  # whole model evaluations at the H3 workload, 50 blocks, random weights (vdn bench --whole)
  # SM clock and power once a second beside it (a long run may not hold the clocks a short op
  # bench sees); WHOLE_RUNS: several configurations, ';'-separated argument lists
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,memory.used --format=csv -l 1 > "$OUT/whole_clocks.csv" 2>&1 &
  smi=$!
  IFS=';' read -ra runs <<< "${WHOLE_RUNS:-${WHOLE_ARGS:-}}"
  tw_=0; i=0
  for args in "${runs[@]}"; do
    i=$((i + 1))
    envs=(); rest=() # leading NAME=value words: this run's environment
    for a in $args; do
      if [ ${#rest[@]} = 0 ] && [[ $a =~ ^[A-Za-z_][A-Za-z0-9_]*= ]]; then envs+=("$a"); else rest+=("$a"); fi
    done
    echo "== whole run $i: $args" | tee -a "$OUT/whole.log"
    timeout ${WHOLE_TIMEOUT:-420} env ${envs[@]+"${envs[@]}"} "$B/vdn_bench" --whole ${rest[@]+"${rest[@]}"} --json "$OUT/whole$i.json" 2>&1 | tee -a "$OUT/whole.log"
    [ "${PIPESTATUS[0]}" = 0 ] || tw_=${PIPESTATUS[0]}
  done
  kill $smi 2>/dev/null
fi
ta=skip
if [ "${ATTN_VAE:-0}" = 1 ]; then
  timeout 120 "$B/vdn_bench" attn-vae --reps ${ATTN_VAE_REPS:-10} 2>&1 | tee "$OUT/attn_vae.log"; ta=${PIPESTATUS[0]}
fi
tb=skip
if [ "${BENCH:-1}" = 1 ]; then
  timeout 400 "$B/vdn_bench" ${BENCH_ARGS:-} --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log"; tb=${PIPESTATUS[0]}
fi

tp=skip
if [ -f "$PEERS" ]; then
  PYTHONUNBUFFERED=1 PEERS_JSON="$OUT/peers.json" timeout 300 python3 "$PEERS" 2>&1 | tee "$OUT/peers.log"; tp=${PIPESTATUS[0]}
fi
# the issue's target table: this run's numbers beside this run's peers
if [ -f "$OUT/bench.json" ] && [ -f "$OUT/peers.json" ]; then
  "$B/vdn_bench" compare "$OUT/bench.json" "$OUT/peers.json" | tee "$OUT/targets.txt"
fi

if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer > /dev/null; then
  # SANITIZE_ONLY=prep (a VDN_TEST_ONLY group) checks just that group's kernels, to save time
  VDN_TEST_ONLY=${SANITIZE_ONLY:-} timeout 200 compute-sanitizer --tool memcheck --print-limit 20 "$B/test_gpu" > "$OUT/sanitizer.log" 2>&1
  echo "memcheck: exit $? ($(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/sanitizer.log") clean summaries)"
  grep -E "ERROR SUMMARY|Invalid" "$OUT/sanitizer.log" | head -5
  # a small whole render (every op the DiT uses, on the device) under memcheck
  if [ -x "$B/vdnmini" ] && [ "${SANITIZE_RENDER:-1}" = 1 ]; then
    SM=/tmp/vdn-small-mc; rm -rf "$SM"
    "$B/vdnmini" ckpt init --preset small --vdn --out "$SM" > "$OUT/sanitizer_render.log" 2>&1
    timeout 300 compute-sanitizer --tool memcheck --print-limit 20 "$B/vdnmini" render --checkpoint "$SM" \
      --prompt-cache "$SM/prompt.safetensors" --frames 39 --height 128 --width 128 --steps 2 --seed 1 \
      --variant vdn --out /tmp/vdn-small-mc-out >> "$OUT/sanitizer_render.log" 2>&1
    echo "memcheck small render: exit $? ($(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/sanitizer_render.log") clean summaries)"
    grep -E "ERROR SUMMARY|Invalid|error" "$OUT/sanitizer_render.log" | head -5
  fi
  # every op of the op layer's CUDA backend under memcheck (strided views, odd shapes)
  if [ "${SANITIZE_OPS:-1}" = 1 ]; then
    timeout 300 compute-sanitizer --tool memcheck --print-limit 20 "$B/test_backend_ops" > "$OUT/sanitizer_ops.log" 2>&1
    echo "memcheck backend-ops: exit $? ($(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/sanitizer_ops.log") clean summaries)"
    grep -E "ERROR SUMMARY|Invalid" "$OUT/sanitizer_ops.log" | head -5
  fi
fi
echo "== summary: twins rc=$tw  gpu tests rc=$tg  backend-ops rc=$tbo  backend test rc=$tbk  attn-vae rc=$ta  bench rc=$tb  whole rc=$tw_  peers rc=$tp =="
grep -E "s/NFE|whole model" "$OUT/whole.log" 2>/dev/null
grep -E "FAIL|NON-FINITE" "$OUT/test.log" | head
grep -E "^(gemm|block|attention|stats|solve|scans|gather|readout|prep|dense|VDN|text|alpha)" "$OUT/bench.log"
grep -E "ms " "$OUT/peers.log" 2>/dev/null
