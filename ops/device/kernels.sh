#!/usr/bin/env bash
# One device run for the kernels and the DiT: ops/device/build.sh (CMake, VDN_FARM=OFF), the GPU
# tests (`ctest -L gpu`: every kernel against its CPU twin, every op of the op layer CUDA against
# the CPU oracle, whole small renders CUDA against CPU, the decoders and the text encoder on
# CUDA), `vdn bench` at the H3 workload, the PyTorch peers in the same run, a summary.
#   bash ops/device/kernels.sh [peers.py]      (from the repository root; peers.py default
#                                              .devcarry/deb/h3_peers.py, skipped where absent)
# The lead's call: run(carry=[".devcarry/deb"], command="OUT=$OUT bash ops/device/kernels.sh")
# Switches (environment):
#   TESTS=1 (ctest -L gpu), TESTS=ops (kernels_backend_ops only), TESTS=backend (it and
#     engine_cuda_backend), TESTS=0
#   BENCH=1 `vdn bench` (the op table; BENCH_ARGS="--reps 5" more options)
#   WHOLE=1 `vdn bench --whole $WHOLE_ARGS` (e.g. WHOLE_ARGS="--variants vdn,dense --nfe 3");
#     WHOLE_RUNS="A;B" several runs, a run's leading NAME=value words its environment
#   ATTN_VAE=1 `vdn bench attn-vae --reps ${ATTN_VAE_REPS:-10}`
#   FP8ACC=1 / FP8ACC_H3=1: fp8 against bf16 and the CPU oracle on whole renders (`vdn render`),
#     small preset / a 2-block H3-shaped checkpoint
#   H3RENDER=1: whole `vdn render`s of a 2-block H3-shaped checkpoint, dense and vdn (H3_REUSE=1
#     keeps the checkpoint of an earlier run on a warm machine)
#   PROFILE=1: ncu on the first ping-pong attention launch of `vdn bench`
#   SANITIZE=1 (default): compute-sanitizer memcheck over test_kernels_gpu (SANITIZE_ONLY=group:
#     VDN_TEST_ONLY), a small whole render (SANITIZE_RENDER=0 skips) and test_backend_ops
#     (SANITIZE_OPS=0 skips)
set -uo pipefail
OUT=${OUT:-/tmp/vdn-out}
PEERS=${1:-.devcarry/deb/h3_peers.py}
mkdir -p "$OUT"
bash ops/device/build.sh 2>&1 | tee "$OUT/build.txt"
[ "${PIPESTATUS[0]}" = 0 ] || exit 1
B=${BUILD:-$(pwd)/build-dev}
. "$B/env.sh"
VDN=$B/cli/vdn
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
command -v cuobjdump > /dev/null && for o in attn attn_pingpong; do
  f=$(find "$B/kernels" -name "$o.cu.o" | head -1)
  [ -n "$f" ] && echo "$o: $(cuobjdump --dump-sass "$f" | grep -c HGMMA) HGMMA, $(cuobjdump --dump-sass "$f" | grep -c HMMA) HMMA instructions"
done

tt=skip
case "${TESTS:-1}" in
  1) (cd "$B" && timeout ${GPU_TEST_TIMEOUT:-500} ctest -L gpu --output-on-failure) > "$OUT/test.log" 2>&1; tt=$? ;;
  ops) (cd "$B" && timeout 300 ctest -R '^kernels_backend_ops$' --output-on-failure) > "$OUT/test.log" 2>&1; tt=$? ;;
  backend) (cd "$B" && timeout 500 ctest -R '^(kernels_backend_ops|engine_cuda_backend)$' --output-on-failure) > "$OUT/test.log" 2>&1; tt=$? ;;
esac
[ "$tt" = skip ] || grep -E "tests passed|Passed|Failed|Skipped|FAIL|NON-FINITE" "$OUT/test.log" | head -30

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
      timeout 300 "$VDN" render --checkpoint "$ck" --prompt-cache "$ck/prompt.safetensors" \
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
if [ "${FP8ACC:-0}" = 1 ]; then # the small preset: H3's head geometry, tiny widths
  A=/tmp/vdn-fp8acc; rm -rf "$A"; mkdir -p "$A"
  "$VDN" ckpt init --preset small --vdn --out "$A/ck" > "$OUT/fp8acc.log" 2>&1
  fp8acc_renders fp8acc "$A/ck" "vdn dense" "--frames 56 --height 128 --width 128 --steps 3"
fi
if [ "${FP8ACC_H3:-0}" = 1 ]; then
  # the real widths: a 2-block H3-shaped random checkpoint, 22 frames at 128 x 128, one NFE
  A=/tmp/vdn-fp8acc-h3; rm -rf "$A"; mkdir -p "$A"
  "$VDN" ckpt init --preset h3 --layers 2 --vdn --prompt-tokens 64 --out "$A/ck" > "$OUT/fp8acc_h3.log" 2>&1
  fp8acc_renders fp8acc_h3 "$A/ck" "${FP8ACC_H3_VARIANTS:-vdn}" "--frames 22 --height 128 --width 128 --steps 1"
fi
if [ "${PROFILE:-0}" = 1 ] && command -v ncu > /dev/null; then
  timeout 240 ncu --clock-control none --kernel-name regex:attn_pp --launch-count 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section Occupancy "$VDN" bench --frames 22 --reps 1 --attn-reps 1 \
    > "$OUT/ncu_attn.txt" 2>&1
  echo "ncu: exit $?"
  grep -E "Throughput|Pipe|Stall|Warp Cycles|Achieved|Issue Slots|L2 Hit|Bandwidth|Busy" "$OUT/ncu_attn.txt" | head -60
fi
if [ "${H3RENDER:-0}" = 1 ]; then
  # whole renders of an H3-shaped random checkpoint with 2 DiT blocks, dense and VDN
  H3=/tmp/vdn-h3
  if [ "${H3_REUSE:-0}" = 1 ] && [ -f "$H3/prompt.safetensors" ]; then
    echo "h3 checkpoint reused" > "$OUT/h3render.log"
  else
    rm -rf "$H3"
    "$VDN" ckpt init --preset h3 --layers 2 --vdn --out "$H3" > "$OUT/h3render.log" 2>&1
  fi
  for v in dense vdn; do
    t1=$(date +%s)
    rm -rf "/tmp/h3-$v" "/tmp/h3-$v.json"
    timeout 240 "$VDN" render --checkpoint "$H3" --prompt-cache "$H3/prompt.safetensors" \
      --frames 345 --height 768 --width 1344 --steps 3 --seed 1 --variant $v --out "/tmp/h3-$v" \
      >> "$OUT/h3render.log" 2>&1
    echo "h3 render $v: exit $? in $(( $(date +%s) - t1 )) s" | tee -a "$OUT/h3render.log"
    python3 -c "import json; r=json.load(open('/tmp/h3-$v.json')); print('$v', json.dumps(r.get('timing', r))[:400])" 2>&1 | tee -a "$OUT/h3render.log"
  done
fi
tw=skip
if [ "${WHOLE:-0}" = 1 ]; then
  # whole model evaluations at the H3 workload, 50 blocks, random weights; SM clock and power
  # once a second beside it
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,memory.used --format=csv -l 1 > "$OUT/whole_clocks.csv" 2>&1 &
  smi=$!
  IFS=';' read -ra runs <<< "${WHOLE_RUNS:-${WHOLE_ARGS:-}}"
  [ ${#runs[@]} -gt 0 ] || runs=("")
  tw=0; i=0
  for args in "${runs[@]}"; do
    i=$((i + 1))
    envs=(); rest=() # leading NAME=value words: this run's environment
    for a in $args; do
      if [ ${#rest[@]} = 0 ] && [[ $a =~ ^[A-Za-z_][A-Za-z0-9_]*= ]]; then envs+=("$a"); else rest+=("$a"); fi
    done
    echo "== whole run $i: $args" | tee -a "$OUT/whole.log"
    timeout ${WHOLE_TIMEOUT:-420} env ${envs[@]+"${envs[@]}"} "$VDN" bench --whole ${rest[@]+"${rest[@]}"} --json "$OUT/whole$i.json" 2>&1 | tee -a "$OUT/whole.log"
    [ "${PIPESTATUS[0]}" = 0 ] || tw=${PIPESTATUS[0]}
  done
  kill $smi 2> /dev/null
fi
ta=skip
if [ "${ATTN_VAE:-0}" = 1 ]; then
  timeout 120 "$VDN" bench attn-vae --reps ${ATTN_VAE_REPS:-10} 2>&1 | tee "$OUT/attn_vae.log"; ta=${PIPESTATUS[0]}
fi
tb=skip
if [ "${BENCH:-1}" = 1 ]; then
  timeout 400 "$VDN" bench ${BENCH_ARGS:-} --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log"; tb=${PIPESTATUS[0]}
fi
tp=skip
if [ -f "$PEERS" ]; then # the machine's own libraries for PyTorch
  env -u LD_LIBRARY_PATH PYTHONUNBUFFERED=1 PEERS_JSON="$OUT/peers.json" timeout 300 python3 "$PEERS" 2>&1 | tee "$OUT/peers.log"; tp=${PIPESTATUS[0]}
fi
if [ -f "$OUT/bench.json" ] && [ -f "$OUT/peers.json" ]; then
  "$VDN" bench compare "$OUT/bench.json" "$OUT/peers.json" | tee "$OUT/targets.txt"
fi
if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer > /dev/null; then
  VDN_TEST_ONLY=${SANITIZE_ONLY:-} timeout 200 compute-sanitizer --tool memcheck --print-limit 20 "$B/kernels/test_kernels_gpu" > "$OUT/sanitizer.log" 2>&1
  echo "memcheck kernels: exit $? ($(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/sanitizer.log") clean summaries)"
  if [ "${SANITIZE_RENDER:-1}" = 1 ]; then # a small whole render: every op the DiT uses
    SM=/tmp/vdn-small-mc; rm -rf "$SM"
    "$VDN" ckpt init --preset small --vdn --out "$SM" > "$OUT/sanitizer_render.log" 2>&1
    timeout 300 compute-sanitizer --tool memcheck --print-limit 20 "$VDN" render --checkpoint "$SM" \
      --prompt-cache "$SM/prompt.safetensors" --frames 39 --height 128 --width 128 --steps 2 --seed 1 \
      --variant vdn --out /tmp/vdn-small-mc-out >> "$OUT/sanitizer_render.log" 2>&1
    echo "memcheck small render: exit $? ($(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/sanitizer_render.log") clean summaries)"
  fi
  if [ "${SANITIZE_OPS:-1}" = 1 ]; then # every op of the CUDA backend (strided views, odd shapes)
    timeout 300 compute-sanitizer --tool memcheck --print-limit 20 "$B/kernels/test_backend_ops" > "$OUT/sanitizer_ops.log" 2>&1
    echo "memcheck backend-ops: exit $? ($(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/sanitizer_ops.log") clean summaries)"
  fi
  grep -hE "Invalid|ERROR SUMMARY: [1-9]" "$OUT"/sanitizer*.log | head -5
fi
echo "== summary: gpu tests rc=$tt  attn-vae rc=$ta  bench rc=$tb  whole rc=$tw  peers rc=$tp =="
grep -E "s/NFE|whole model" "$OUT/whole.log" 2> /dev/null
grep -E "^(gemm|block|attention|stats|solve|scans|gather|readout|prep|dense|VDN|text|alpha)" "$OUT/bench.log" 2> /dev/null
