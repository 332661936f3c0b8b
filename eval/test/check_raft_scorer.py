"""The worked scorer example eval/scorers/raft_flow.py with its numpy stand-in model (no torch
in CI): on an mp4 (made by the ffmpeg CLI) whose smooth pattern moves by a known (dy, dx) per
frame, the mean flow it prints is the true shift's length; a missing or undecodable video makes
it fail with a message and print nothing; `vdn eval report --scorers` on a store with that mp4
runs it through the scorer contract (value `raft.mean_flow`). usage: check_raft_scorer.py VDN WORK"""
import json, os, shutil, subprocess, sys

import numpy as np

vdn, work = sys.argv[1], sys.argv[2]
here = os.path.dirname(os.path.abspath(__file__))
scorer = os.path.join(here, "..", "scorers", "raft_flow.py")
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
T, H, W, dy, dx = 12, 64, 96, 1.5, -2.0
y, x = np.mgrid[0:H, 0:W].astype(np.float64)
fr = []
for t in range(T):
    yy, xx = y - dy * t, x - dx * t
    lum = 0.5 + 0.25 * np.sin(2 * np.pi * xx / 17) * np.cos(2 * np.pi * yy / 23) + \
        0.15 * np.sin(2 * np.pi * (xx + 2 * yy) / 41)
    fr.append(np.repeat(lum[..., None], 3, -1))
raw = np.uint8(np.clip(np.rint(np.stack(fr) * 255), 0, 255)).tobytes()
mp4 = os.path.join(work, "store", "eval", "t", "p1", "dense_50", "out.mp4")
os.makedirs(os.path.dirname(mp4))
subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s",
                f"{W}x{H}", "-r", "24", "-i", "-", "-c:v", "libx264", "-crf", "12", "-pix_fmt",
                "yuv444p", mp4], input=raw, check=True)
fails = []
r = subprocess.run([sys.executable, scorer, "--video", mp4, "--model", "stand-in"],
                   capture_output=True, text=True)
out = json.loads(r.stdout) if r.returncode == 0 else {}
want = float(np.hypot(dy, dx))
if r.returncode or out.get("pairs") != T - 1 or abs(out.get("mean_flow", 0) - want) > 0.1:
    fails.append(f"stand-in on a {dy},{dx} shift: {r.returncode} {r.stdout} {r.stderr}")
for bad in [os.path.join(work, "none.mp4"), scorer]:
    r = subprocess.run([sys.executable, scorer, "--video", bad, "--model", "stand-in"],
                       capture_output=True, text=True)
    if r.returncode != 1 or r.stdout or "raft_flow:" not in r.stderr:
        fails.append(f"{bad}: expected a failure with a message, got {r.returncode} {r.stdout!r}")
# through the scorer contract of `vdn eval report`
suite = os.path.join(work, "suite.jsonl")
open(suite, "w").write(json.dumps({"id": "p1", "mode": "t2va", "prompt": "a pattern moves",
                                   "seed": 1, "frames": T, "height": H, "width": W}) + "\n")
json.dump({"timing": {"nfe_seconds": [1.0], "total_seconds": 1.0}},
          open(os.path.join(os.path.dirname(mp4), "out.json"), "w"))
json.dump({"version": 1, "suite": suite, "store": "file://" + os.path.join(work, "store"),
           "tag": "t", "baseline": "dense@50", "steps_override": None, "variants": ["dense@50"],
           "batches": [], "pairs": [{"prompt": "p1", "variant": "dense@50",
                                     "video_key": "eval/t/p1/dense_50/out.safetensors",
                                     "record_key": "eval/t/p1/dense_50/out.json"}]},
          open(os.path.join(work, "sweep.json"), "w"))
json.dump({"scorers": [{"name": "raft", "higher_is_better": False, "command":
                        f"{sys.executable} {scorer} --video {{video}} --model stand-in"}]},
          open(os.path.join(work, "scorers.json"), "w"))
subprocess.run([vdn, "eval", "report", os.path.join(work, "sweep.json"), "--out",
                os.path.join(work, "report"), "--scorers", os.path.join(work, "scorers.json"),
                "--resamples", "200"], check=True, capture_output=True)
rep = json.load(open(os.path.join(work, "report", "report.json")))
m = {x["name"]: x for x in rep["metrics"]}
got = m.get("raft.mean_flow", {}).get("values", {}).get("dense@50", [None])[0]
if got is None or abs(got - out.get("mean_flow", -1)) > 1e-9:
    fails.append(f"report: raft.mean_flow {got}, the scorer printed {out}; errors {rep['errors']}")
if fails:
    print("FAIL\n" + "\n".join(fails))
    sys.exit(1)
print(f"ok: stand-in mean flow {out['mean_flow']:.4f} px for a {want:.4f} px shift, through the "
      "scorer contract into the report")
