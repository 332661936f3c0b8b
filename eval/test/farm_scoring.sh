#!/bin/bash
# Evaluation as the paper runs it, on a CPU farm of 3 workers: a suite of text prompts and
# keyframe pictures (no prompt caches) sweeps dense@50, vdn@8 and vdn@8:fp8 (the workers encode
# text and pictures), `vdn eval score` scores every output as farm jobs (with an external scorer
# run on the workers), and `vdn eval report` gathers their results: every number equals the
# single-process report's, the FL2VA metrics are there for the keyframe lines, the note says the
# farm scored them, and the players of the gathered report pass the Chromium check.
# usage: farm_scoring.sh VDN WORKDIR PYTHON SRCDIR
set -euo pipefail
vdn=$1 work=$2 py=$3 src=$4
rm -rf "$work"
mkdir -p "$work/suite/pics"
cd "$work"
cleanup() { "$vdn" up "$work/farm" --stop >/dev/null 2>&1 || true; }
trap cleanup EXIT
"$vdn" ckpt init --preset tiny --vdn --vae --text-encoder --out "$work/ckpt" >/dev/null
rm -rf "$work/ckpt/base/audio_vae"
port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$vdn" up "$work/farm" --cpu --workers 3 --precision bf16,fp8 --detach --checkpoint "$work/ckpt" \
  --http 127.0.0.1:$port --data-root "$work/suite" >/dev/null
"$py" - "$work/suite" <<'PY'
import json, sys
import numpy as np
from PIL import Image
d = sys.argv[1]
rng = np.random.default_rng(3)
def pic(name, w, h):
    y, x = np.mgrid[0:h, 0:w] / max(w, h)
    a = np.stack([0.5 + 0.4 * np.sin(6 * x + c + rng.uniform(0, 6)) * np.cos(5 * y) for c in range(3)], -1)
    Image.fromarray(np.uint8(np.clip(a, 0, 1) * 255)).save(f"{d}/pics/{name}")
base = {"seed": 7, "frames": 39, "height": 32, "width": 32}
items = [dict(base, id="t1", mode="t2va", prompt="A lighthouse in fog at dawn."),
         dict(base, id="t2", mode="t2va", prompt="A red kite over a windy beach."),
         dict(base, id="i1", mode="i2va", prompt="A cat wakes on a windowsill.", first_frame="pics/i1_first.png"),
         dict(base, id="l1", mode="l2va", prompt="A boat reaches the harbour.", last_frame="pics/l1_last.jpg"),
         dict(base, id="f1", mode="fl2va", prompt="A dancer turns on a rooftop.",
              first_frame="pics/f1_first.png", last_frame="pics/f1_last.png"),
         dict(base, id="f2", mode="fl2va", prompt="Snow falls on a cabin.",
              first_frame="pics/f2_first.png", last_frame="pics/f2_last.webp")]
pic("i1_first.png", 48, 40); pic("l1_last.jpg", 32, 32); pic("f1_first.png", 32, 32)
pic("f1_last.png", 64, 40); pic("f2_first.png", 40, 40); pic("f2_last.webp", 32, 48)
open(f"{d}/suite.jsonl", "w").write("".join(json.dumps(i) + "\n" for i in items))
open(f"{d}/../scorer.py", "w").write(
    "import os, sys, json\nprint(json.dumps({'kib': os.path.getsize(sys.argv[1]) / 1024.0}))\n")
json.dump({"scorers": [{"name": "size", "command": f"{sys.executable} {d}/../scorer.py {{video}}",
                        "higher_is_better": False}]}, open(f"{d}/../scorers.json", "w"))
PY
"$vdn" eval suite check suite/suite.jsonl
"$vdn" eval sweep suite/suite.jsonl --variants dense@50,vdn@8,vdn@8:fp8 --dir "$work/farm" \
  --steps-override 1 --tag fs --wait --timeout 500 | tee sweep.log
sweep=suite/sweeps/fs.json
# the sweep's progress per variant in `vdn watch` (plain output: not a terminal)
"$vdn" watch b1 --dir "$work/farm" | tee watch.log
grep -q "by variant: dense@50 6/6, vdn@8 6/6, vdn@8:fp8 6/6" watch.log
# and on the status page (headless Chromium; skipped without it)
if chrome=$(command -v chromium || command -v chromium-browser); then
  prof=$(mktemp -d)
  timeout 120 "$chrome" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$prof" \
    --virtual-time-budget=6000 --dump-dom "http://127.0.0.1:$port/" > page.html 2>/dev/null || true
  rm -rf "$prof"
  grep -q "by variant: dense@50 6/6, vdn@8 6/6, vdn@8:fp8 6/6" page.html ||
    { echo "FAIL: the status page shows no per-variant progress"; exit 1; }
fi
t0=$(date +%s.%N)
"$vdn" eval report $sweep --out report_local --resamples 500 --scorers scorers.json > local.log
t1=$(date +%s.%N)
"$vdn" eval score $sweep --dir "$work/farm" --scorers scorers.json --wait --timeout 300 | tee score.log
"$vdn" eval report $sweep --out report_farm --resamples 500 > farm.log
t2=$(date +%s.%N)
grep -q "batch b2: 18 scoring jobs (tag fs-score)" score.log
"$vdn" watch b2 --dir "$work/farm" | grep -q "by variant: dense@50/score 6/6, vdn@8/score 6/6"
# again: nothing left to score
"$vdn" eval score $sweep --dir "$work/farm" 2>&1 | grep -q "18 outputs scored already, 0 without an mp4, 0 in flight, 0 to submit"
echo "single process: $(echo "$t1 - $t0" | bc) s; farm (3 workers) + gather: $(echo "$t2 - $t1" | bc) s"
"$py" - report_local/report.json report_farm/report.json suite/suite.jsonl <<'PY'
import json, math, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
suite = [json.loads(l) for l in open(sys.argv[3])]
fails = []
ma = {m["name"]: m for m in a["metrics"]}
mb = {m["name"]: m for m in b["metrics"]}
if set(ma) != set(mb):
    fails.append(f"metrics differ: {set(ma) ^ set(mb)}")
for n in ma:
    for v, vals in ma[n]["values"].items():
        for p, (x, y) in enumerate(zip(vals, mb.get(n, {"values": {v: [None] * 6}})["values"][v])):
            if (x is None) != (y is None) or (x is not None and abs(x - y) > 1e-9 * max(1, abs(x))):
                fails.append(f"{n}/{v}/{suite[p]['id']}: local {x}, farm {y}")
kf = [it["mode"] != "t2va" for it in suite]
for n in ["keyframe_psnr", "keyframe_ssim"]:
    for v in ["dense@50", "vdn@8", "vdn@8:fp8"]:
        got = [x is not None for x in mb[n]["values"][v]]
        if got != kf:
            fails.append(f"{n}/{v}: values for {got}, keyframe lines {kf}")
if not all(x is not None for x in mb["size.kib"]["values"]["vdn@8"]):
    fails.append("the farm's scorer values are missing")
if "6 output(s) scored" in b.get("note", "") or "18 output(s) scored by farm jobs" not in b.get("note", ""):
    fails.append(f"note: {b.get('note')}")
if a["errors"] or b["errors"]:
    fails.append(f"errors: {a['errors'][:2]} {b['errors'][:2]}")
if fails:
    print("FAIL\n" + "\n".join(fails[:40])); sys.exit(1)
print(f"ok: the farm's scores equal the single process's for {len(ma)} metrics; FL2VA metrics on "
      f"{sum(kf)} keyframe lines x 3 variants")
PY
rc=0
"$py" "$src/test/check_players.py" "$work/report_farm" || rc=$?
[ $rc -eq 0 ] || [ $rc -eq 77 ] || exit $rc
echo "farm scoring: ok"
