"""`vdn bench --whole` on the CPU backend (tiny preset): the whole-model benchmark renders each
variant through the engine over random weights and reports what it measured.

Checks: exit status, the JSON report (every variant, warm-up and timed counts, min <= median <=
max, positive times, peak memory at least the weights), the printed table, and clear errors for
bad options (latent frames not 5k + 2, an unknown variant, an unknown preset)."""
import json
import os
import subprocess
import sys

vdn, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
fails = 0


def check(cond, msg):
    global fails
    if not cond:
        fails += 1
        print("FAIL:", msg)


def bench(*args):
    p = subprocess.run([vdn, "bench", "--whole", *args], capture_output=True, text=True,
                       timeout=600)
    return p.returncode, p.stdout, p.stderr


small = ["--preset", "tiny", "--cpu", "--frames", "7", "--height", "64", "--width", "64",
         "--text", "8"]
out = os.path.join(work, "whole.json")
rc, so, se = bench(*small, "--nfe", "3", "--warmup", "1", "--variants",
                   "vdn,dense,window-only", "--json", out)
check(rc == 0, f"tiny cpu run exit {rc}: {se[-2000:]}")
if rc == 0:
    r = json.load(open(out))
    check(r["backend"] == "cpu" and r["preset"] == "tiny" and r["nfe"] == 3 and r["warmup"] == 1
          and r["precision"] == "bf16",
          f"header fields: {r}")
    check(r["latent_frames"] == 7 and r["height"] == 64 and r["text_rows"] == 8, f"workload: {r}")
    names = [v["variant"] for v in r["variants"]]
    check(names == ["vdn", "dense", "window-only"], f"variants {names}")
    for v in r["variants"]:
        check(0 < v["min_s"] <= v["median_s_per_nfe"] <= v["max_s"], f"times {v}")
        check(v["peak_gib"] >= r["weights_gib"] > 0, f"peak {v['peak_gib']} vs weights {r['weights_gib']}")
    # one evaluation per progress line: warm-up + timed, per variant
    check(se.count("nfe ") == 3 * 4, f"progress lines: {se.count('nfe ')}")
    for n in names:
        check(any(line.startswith(n) and "s/NFE" in line for line in so.splitlines()),
              f"no table line for {n}: {so}")

out8 = os.path.join(work, "whole_fp8.json")
rc, so, se = bench(*small, "--nfe", "1", "--warmup", "0", "--variants", "vdn", "--precision",
                   "fp8", "--json", out8)
check(rc == 0 and json.load(open(out8))["precision"] == "fp8" and ", fp8," in so,
      f"fp8 run: exit {rc}: {se[-1500:]}")
rc, so, se = bench(*small, "--precision", "fp4")
check(rc == 2 and "fp4" in se, f"--precision fp4: exit {rc}, {se}")
rc, so, se = bench(*small, "--frames", "8")
check(rc == 2 and "--frames 8" in se and "5k + 2" in se, f"--frames 8: exit {rc}, {se}")
rc, so, se = bench(*small, "--variants", "vdn,sparkly", "--nfe", "1", "--warmup", "0")
check(rc == 1 and "sparkly" in se, f"unknown variant: exit {rc}, {se}")
rc, so, se = bench("--preset", "huge", "--cpu")
check(rc == 1 and "huge" in se, f"unknown preset: exit {rc}, {se}")
rc, so, se = bench("--help")
check(rc == 0 and "--whole" in so, f"--help: exit {rc}")

print("kernels_bench_whole_cpu:", "FAILED" if fails else "all checks passed")
sys.exit(1 if fails else 0)
