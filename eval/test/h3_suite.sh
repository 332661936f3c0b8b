#!/bin/bash
# The shipped h3-103 suite: it parses, and `suite check` names its missing keyframe pictures; a
# tiny sweep of its keyframe lines from their text alone (--for-keyframes, on a CPU farm with a
# tiny text encoder, 22 frames at 32x32, one step) gives the pictures: `suite keyframes --from`
# writes the end frames as PNGs (compared here with the frames the ffmpeg CLI decodes from the
# stored mp4s) and a suite naming them, which `suite check` passes; `--pictures` makes the same
# suite from a folder. usage: h3_suite.sh VDN WORKDIR PYTHON SRCDIR
set -euo pipefail
vdn=$1 work=$2 py=$3 src=$4
suite=$src/suites/h3-103/suite.jsonl
rm -rf "$work"
mkdir -p "$work"
cd "$work"
cleanup() { "$vdn" up "$work/farm" --stop >/dev/null 2>&1 || true; }
trap cleanup EXIT
# the committed suite is what make_suite.py writes
"$py" "$src/suites/h3-103/make_suite.py" "$work/regen.jsonl"
cmp "$work/regen.jsonl" "$suite" || { echo "FAIL: suite.jsonl differs from make_suite.py's output"; exit 1; }
if "$vdn" eval suite check "$suite" > check0.log 2>&1; then
  echo "FAIL: the suite without its pictures passed check"; exit 1
fi
grep -q "103 prompts (t2va 62, i2va 14, l2va 14, fl2va 13), 103 rendered from text" check0.log
grep -q "suite.jsonl:3: first_frame 'keyframes/p002_first.png': no such file" check0.log
# a CPU farm with a tiny checkpoint that has a text encoder (the audio VAE removed: the CPU
# BigVGAN would dominate)
"$vdn" ckpt init --preset tiny --vdn --vae --text-encoder --out "$work/ckpt" >/dev/null
rm -rf "$work/ckpt/base/audio_vae"
"$vdn" up "$work/farm" --cpu --detach --checkpoint "$work/ckpt" --data-root "$work" >/dev/null
mkdir -p tiny
"$py" - "$suite" tiny/suite.jsonl <<'PY'
import json, sys
out = []
for l in open(sys.argv[1]):
    if l.startswith("{"):
        it = json.loads(l)
        it.update(frames=22, height=32, width=32)
        out.append(json.dumps(it))
open(sys.argv[2], "w").write("\n".join(out) + "\n")
PY
"$vdn" eval sweep tiny/suite.jsonl --for-keyframes --variants vdn@8 --dir "$work/farm" \
  --steps-override 1 --tag kf --wait --timeout 500 | tee sweep.log
grep -q "batch b[0-9]*: 41 jobs" sweep.log
"$vdn" eval suite keyframes "$suite" --from tiny/sweeps/kf.json --out h3 | tee kf.log
grep -q "41 keyframe lines" kf.log
"$vdn" eval suite check h3/suite.jsonl | tee check1.log
grep -q "103 prompts (t2va 62, i2va 14, l2va 14, fl2va 13), 103 rendered from text, 54 pictures decoded, every file present" check1.log
"$py" - "$work/farm/store" h3 "$suite" <<'PY'
import json, subprocess, sys
import numpy as np
from PIL import Image
store, out, src = sys.argv[1:]
orig = {json.loads(l)["id"]: json.loads(l) for l in open(src) if l.startswith("{")}
new = [json.loads(l) for l in open(f"{out}/suite.jsonl") if l.startswith("{")]
n = 0
for it in new:
    o = orig[it["id"]]
    assert it["prompt"] == o["prompt"] and it["mode"] == o["mode"] and it["seed"] == o["seed"], it["id"]
    assert it.get("first_frame") == o.get("first_frame") and it.get("last_frame") == o.get("last_frame")
    if it["mode"] == "t2va":
        continue
    r = subprocess.run(["ffmpeg", "-v", "error", "-i", f"{store}/eval/kf/{it['id']}/vdn_8/out.mp4",
                        "-f", "rawvideo", "-pix_fmt", "rgb24", "-"], capture_output=True, check=True)
    fr = np.frombuffer(r.stdout, np.uint8).reshape(-1, 32, 32, 3)
    for k, t in (("first_frame", 0), ("last_frame", len(fr) - 1)):
        if k in it:
            png = np.asarray(Image.open(f"{out}/{it[k]}").convert("RGB"))
            assert np.array_equal(png, fr[t]), (it["id"], k)
            n += 1
assert n == 54, n
print(f"ok: {n} pictures are the sweep's end frames as ffmpeg decodes them")
PY
# the same suite from a folder of pictures
"$vdn" eval suite keyframes "$suite" --pictures h3/keyframes --out h3b > kfb.log
"$vdn" eval suite check h3b/suite.jsonl | grep -q "54 pictures decoded, every file present"
diff <(tail -n +2 h3/suite.jsonl) <(tail -n +2 h3b/suite.jsonl) # the same lines
echo "h3 suite: ok"
