"""`vdn bench --whole` on the CPU backend (tiny preset): the whole-model benchmark renders each
variant through the engine over random weights and reports what it measured.

Checks: exit status, the JSON report (every variant, warm-up and timed counts, min <= median <=
max, positive times, peak memory at least the weights), the printed table, and clear errors for
bad options (latent frames not 5k + 2, an unknown variant, an unknown preset).

Several engines (issue 14; CPU engines stand in for GPUs): --gpus 1,2,3 renders one clip over
1, 2 and 3 engines, whose latents (read back here from --out-dir) equal the one-engine render's
byte for byte; every rank of a K-engine render reports the same collectives per evaluation (none
for K = 1; per block 4 for dense, 11 for vdn with its gate and linear branch, counted from the
spec's layout in docs/engine.md, plus the residual's all-gather); the
--comm-profile breakdown is non-negative and sums to the profiled evaluation, which fits in the
render's wall time; --independent K renders K clips at once, equal to each other and to the
one-engine render of the same request; bad --gpus values are refused naming the value."""
import filecmp
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
check(rc == 0 and "--whole" in so and "--gpus" in so and "--independent" in so,
      f"--help: exit {rc}")

# ---- several engines: one clip over K engines, and K clips at once. 17 latent frames: more than
# the window covers, so vdn runs the linear branch (its all-to-alls and all-gathers)
multi = ["--preset", "tiny", "--cpu", "--frames", "17", "--height", "64", "--width", "64",
         "--text", "8"]
keep = os.path.join(work, "multi")
outm = os.path.join(work, "multi.json")
rc, so, se = bench(*multi, "--nfe", "2", "--warmup", "1", "--variants", "vdn,dense", "--gpus",
                   "1,2,3", "--comm-profile", "--independent", "3", "--steps", "20",
                   "--out-dir", keep, "--json", outm)
check(rc == 0, f"--gpus 1,2,3 run: exit {rc}: {se[-3000:]}")
if rc == 0:
    r = json.load(open(outm))
    check(r["gpus"] == [1, 2, 3] and r["independent"] == 3 and r["engines"] == 3
          and r["comm_profile"] is True and r["clip_steps"] == 20, f"header: {r}")
    rows = r["groups"]
    check([(g["variant"], g["gpus"]) for g in rows]
          == [(v, k) for v in ("vdn", "dense") for k in (1, 2, 3)], f"rows {rows}")
    calls = {}
    for g in rows:
        v, k = g["variant"], g["gpus"]
        tag = f"{v} over {k}"
        check("error" not in g, f"{tag}: {g.get('error')}")
        check(g["communicator"] == ("none" if k == 1 else "inproc"), f"{tag}: {g['communicator']}")
        check(0 < g["min_s"] <= g["median_s_per_nfe"] <= g["max_s"], f"{tag} times {g}")
        # warm-up + 2 timed + 1 profiled evaluations, and setup, inside the wall time
        check(g["wall_s"] >= 3 * g["min_s"] and g["fixed_s"] >= 0, f"{tag} wall {g}")
        check(abs(g["clips_per_hour"] - 3600 / (g["fixed_s"] + 20 * g["median_s_per_nfe"]))
              < 1e-6 * g["clips_per_hour"], f"{tag} clips/h {g}")
        ranks = g["ranks"]
        check([x["rank"] for x in ranks] == list(range(k)), f"{tag} ranks {ranks}")
        check(ranks[0]["nfe_s"] > 0 and g["peak_gib_max"] >= r["weights_gib"], f"{tag} {ranks[0]}")
        n = {x["collectives_per_nfe"] for x in ranks}
        check(len(n) == 1 and (n == {0} if k == 1 else min(n) > 0),
              f"{tag}: collectives per evaluation {n}")
        calls[v, k] = min(n)
        check(all((x["mb_received_per_nfe"] > 0) == (k > 1) for x in ranks), f"{tag} bytes")
        for x in ranks:
            check(x["profiled_nfe"] == (1 if k > 1 else 0), f"{tag} rank {x['rank']} profiled")
            if k > 1 and "profile" in x:
                p = x["profile"]
                parts = (p["compute_s"], p["collective_s"], p["wait_s"])
                check(all(q >= 0 for q in parts), f"{tag} rank {x['rank']}: negative part {p}")
                check(abs(sum(parts) - p["nfe_s"]) < 1e-9 and p["nfe_s"] <= g["wall_s"],
                      f"{tag} rank {x['rank']}: parts {parts} vs {p['nfe_s']} (wall {g['wall_s']})")
            check(k == 1 or "profile" in x, f"{tag} rank {x['rank']}: no profile")
        if k > 1:
            check(g["rel_err_video_vs_1"] == 0 and g["rel_err_audio_vs_1"] == 0,
                  f"{tag}: latents vs 1 engine {g['rel_err_video_vs_1']} {g['rel_err_audio_vs_1']}")
            check(abs(g["efficiency"] * k - g["speedup"]) < 1e-9 and g["speedup"] > 0,
                  f"{tag} speed-up {g}")
            # the bench's own comparison aside: the files themselves
            check(filecmp.cmp(os.path.join(keep, f"{v}-g1.safetensors"),
                              os.path.join(keep, f"{v}-g{k}.safetensors"), shallow=False),
                  f"{tag}: latents differ from the one-engine render's")
    # 2 blocks: dense has one all-to-all in (q, k, v) and one out per block and the residual's
    # all-gather; vdn adds the frame means' all-reduce and the branch output's all-to-all per block
    # (and the cut frames' all-gather where a rank boundary cuts a frame of the branch: not in
    # this layout) (docs/engine.md "Sequence parallelism")
    for k in (2, 3):
        check(calls["dense", k] == 2 * 2 + 1 and calls["vdn", k] == 2 * (2 + 2) + 1,
              f"collectives per evaluation over {k}: vdn {calls['vdn', k]}, "
              f"dense {calls['dense', k]}")
    ind = r["independent_runs"]
    check([x["variant"] for x in ind] == ["vdn", "dense"], f"independent {ind}")
    for x in ind:
        check(x["renders"] == 3 and len(x["each"]) == 3 and x["wall_s"] > 0, f"independent {x}")
        check(all(e["median_s_per_nfe"] > 0 and e["total_s"] <= x["wall_s"] for e in x["each"]),
              f"independent renders {x}")
        want = sum(3600 / (e["fixed_s"] + 20 * e["median_s_per_nfe"]) for e in x["each"])
        check(abs(x["clips_per_hour"] - want) < 1e-6 * want, f"independent clips/h {x}")
        for i in (1, 2):
            check(filecmp.cmp(os.path.join(keep, f"{x['variant']}-i0.safetensors"),
                              os.path.join(keep, f"{x['variant']}-i{i}.safetensors"),
                              shallow=False), f"independent render {i} differs from render 0")
    for v in ("vdn", "dense"):
        check(any(line.startswith(v) and " 3 " in line and "s/NFE" in line and "clips/h" in line
                  for line in so.splitlines()), f"no table line for {v} over 3: {so}")
        check(any(line.startswith(v) and "3 at once" in line for line in so.splitlines()),
              f"no independent line for {v}: {so}")
    check(so.count("(profiled)") == 2 * (2 + 3), f"profile lines: {so}")

# without --comm-profile, an independent render and a sharded one render the same request; the
# largest K first (as ops/device/multi.sh asks), compared with K = 1 once that ran
keep2 = os.path.join(work, "multi2")
out2 = os.path.join(work, "multi2.json")
rc, so, se = bench(*multi, "--nfe", "1", "--warmup", "0", "--variants", "vdn", "--gpus", "2,1",
                   "--independent", "2", "--out-dir", keep2, "--json", out2)
check(rc == 0, f"--gpus 2,1 --independent 2: exit {rc}: {se[-2000:]}")
if rc == 0:
    check(filecmp.cmp(os.path.join(keep2, "vdn-g2.safetensors"),
                      os.path.join(keep2, "vdn-i1.safetensors"), shallow=False),
          "2 engines' latents differ from a one-engine render's")
    g2 = json.load(open(out2))["groups"][0]
    check(g2["gpus"] == 2 and g2.get("rel_err_video_vs_1") == 0 and g2.get("speedup", 0) > 0,
          f"--gpus 2,1: the 2-engine row compared with the later 1-engine row: {g2}")

for bad in ("0", "abc", "2,,3", "65", "2,2", "1,2,3,4,5,6,7,8,9", "3x", ""):
    rc, so, se = bench(*small, "--gpus", bad)
    check(rc == 2 and f"--gpus '{bad}'" in se if bad else rc == 2 and "--gpus expects" in se,
          f"--gpus '{bad}': exit {rc}, {se[:300]}")
rc, so, se = bench(*small, "--independent", "0")
check(rc == 2 and "--independent" in se, f"--independent 0: exit {rc}, {se[:300]}")
rc, so, se = bench(*small, "--comm-profile")
check(rc == 2 and "--comm-profile" in se and "--gpus" in se, f"--comm-profile alone: {rc}, {se}")

print("kernels_bench_whole_cpu:", "FAILED" if fails else "all checks passed")
sys.exit(1 if fails else 0)
