"""Suites of text and keyframe pictures, and the paper's FL2VA fidelity, without an engine.

A suite of text prompts (no prompt caches) with i2va / l2va / fl2va lines naming pictures (a path
relative to the suite, an absolute path, a key in the sweep's store), the mp4s of two variants
written into a file:// store by the ffmpeg CLI from synthetic frames, and a hand-written sweep
manifest. Checks:
- `vdn eval suite check` decodes the pictures (and refuses a missing one, a truncated one, one that
  is not a picture, a store key without --store), naming the line and field;
- `vdn eval report`'s keyframe_psnr / keyframe_ssim equal scikit-image's PSNR and SSIM of the
  frames the ffmpeg CLI decodes against the pictures Pillow reads (frame 0 against first_frame,
  frame T-1 against last_frame, mean over the mode's pictures), for the baseline and the variant;
- pictures of other sizes are put on the canvas as the release does (keyframe 0 stretched, the
  second cover-cropped, LANCZOS), here with Pillow.
usage: check_keyframes.py VDN WORKDIR"""
import json, os, shutil, subprocess, sys
import numpy as np
from PIL import Image
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

vdn, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
suite_dir, store = os.path.join(work, "suite"), os.path.join(work, "store")
os.makedirs(os.path.join(suite_dir, "pics"))
os.makedirs(store)
rng = np.random.default_rng(11)
T, H, W = 48, 64, 96  # 2 s at 24 fps: long enough to watch the players sync

def frames(phase, speed):
    y, x = np.mgrid[0:H, 0:W].astype(np.float64)
    out = np.empty((3, T, H, W))
    for t in range(T):
        lum = 0.5 + 0.3 * np.sin(2 * np.pi * (x - speed * t) / 23 + phase) * np.cos(2 * np.pi * y / 31)
        for c in range(3):
            out[c, t] = lum + 0.1 * np.cos(2 * np.pi * (x + y) / 90 + phase + 2 * c)
    return out

def encode_mp4(fr, path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    raw = np.clip(np.rint(fr.transpose(1, 2, 3, 0) * 255), 0, 255).astype(np.uint8).tobytes()
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s",
                    f"{W}x{H}", "-r", "24", "-i", "-", "-vf",
                    "scale=out_color_matrix=bt709:out_range=tv", "-c:v", "libx264", "-crf", "18",
                    "-pix_fmt", "yuv420p", "-colorspace", "bt709", "-color_primaries", "bt709",
                    "-color_trc", "bt709", "-color_range", "tv", path], input=raw, check=True)

def decode_mp4(path):
    r = subprocess.run(["ffmpeg", "-v", "error", "-i", path, "-f", "rawvideo", "-pix_fmt", "rgb24",
                        "-"], capture_output=True, check=True)
    return np.frombuffer(r.stdout, np.uint8).reshape(-1, H, W, 3).transpose(3, 0, 1, 2) / 255.0

def picture(fr, t, path, size=(W, H)):
    """frame t plus a smooth offset and noise, as 8-bit RGB PNG (what a keyframe could be)."""
    a = fr[:, t].transpose(1, 2, 0) + 0.05 * rng.normal(0, 1, (H, W, 3))
    img = Image.fromarray(np.clip(np.rint(a * 255), 0, 255).astype(np.uint8))
    if size != (W, H):
        img = img.resize(size)
    img.save(path)

base = {"prompt": "x", "seed": 1, "frames": T, "height": H, "width": W}
items = [dict(base, id="t1", mode="t2va", prompt="A lighthouse in fog."),
         dict(base, id="i1", mode="i2va", first_frame="pics/i1_first.png"),
         dict(base, id="l1", mode="l2va", last_frame=os.path.join(suite_dir, "pics", "l1_last.png")),
         dict(base, id="f1", mode="fl2va", first_frame="pics/f1_first.png",
              last_frame="eval/t/inputs/f1_last.png"),  # a key in the sweep's store
         dict(base, id="f2", mode="fl2va", first_frame="pics/f2_first.png",
              last_frame="pics/f2_last.png")]
variants, keys = ["dense@50", "vdn@8"], {"dense@50": "dense_50", "vdn@8": "vdn_8"}
src, pairs = {}, []
for it in items:
    phase = rng.uniform(0, 2 * np.pi)
    for v, speed in zip(variants, [1.0, 1.3]):
        prefix = f"eval/t/{it['id']}/{keys[v]}/out"
        pairs.append({"prompt": it["id"], "variant": v, "video_key": prefix + ".safetensors",
                      "record_key": prefix + ".json"})
        fr = frames(phase, speed)
        if v == "dense@50":
            src[it["id"]] = fr
        encode_mp4(fr, os.path.join(store, prefix + ".mp4"))
        json.dump({"timing": {"nfe_seconds": [1.0], "total_seconds": 2.0}},
                  open(os.path.join(store, prefix + ".json"), "w"))
picture(src["i1"], 0, os.path.join(suite_dir, "pics/i1_first.png"), size=(150, 80))  # stretched
picture(src["l1"], T - 1, os.path.join(suite_dir, "pics/l1_last.png"), size=(48, 40))  # stretched
picture(src["f1"], 0, os.path.join(suite_dir, "pics/f1_first.png"))
os.makedirs(os.path.join(store, "eval/t/inputs"))
picture(src["f1"], T - 1, os.path.join(store, "eval/t/inputs/f1_last.png"))
picture(src["f2"], 0, os.path.join(suite_dir, "pics/f2_first.png"))
picture(src["f2"], T - 1, os.path.join(suite_dir, "pics/f2_last.png"), size=(130, 50))  # cover-cropped
suite_path = os.path.join(suite_dir, "suite.jsonl")
open(suite_path, "w").write("".join(json.dumps(it) + "\n" for it in items))
fails = []

def run(*args):
    r = subprocess.run([vdn, *args], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr

# suite check: the store key needs --store; with it every picture decodes
rc, out = run("eval", "suite", "check", suite_path)
if rc == 0 or "suite.jsonl:4: last_frame 'eval/t/inputs/f1_last.png'" not in out or "--store" not in out:
    fails.append(f"check without --store should name the store key: {out}")
rc, out = run("eval", "suite", "check", suite_path, "--store", "file://" + store)
if rc != 0 or "5 rendered from text, 5 pictures decoded, every file present" not in out:
    fails.append(f"check with --store: rc {rc}: {out}")
# bad pictures: missing, truncated, not a picture
bad_dir = os.path.join(work, "bad")
os.makedirs(os.path.join(bad_dir, "pics"))
good = open(os.path.join(suite_dir, "pics/i1_first.png"), "rb").read()
open(os.path.join(bad_dir, "pics/trunc.png"), "wb").write(good[:len(good) // 3])
open(os.path.join(bad_dir, "pics/text.png"), "w").write("not a picture\n")
bad = [dict(base, id="a", mode="i2va", first_frame="pics/none.png"),
       dict(base, id="b", mode="i2va", first_frame="pics/trunc.png"),
       dict(base, id="c", mode="l2va", last_frame="pics/text.png")]
open(os.path.join(bad_dir, "suite.jsonl"), "w").write("".join(json.dumps(b) + "\n" for b in bad))
rc, out = run("eval", "suite", "check", os.path.join(bad_dir, "suite.jsonl"))
for want in ["suite.jsonl:1: first_frame 'pics/none.png': no such file",
             "suite.jsonl:2: first_frame 'pics/trunc.png'", "suite.jsonl:3: last_frame 'pics/text.png'"]:
    if rc == 0 or want not in out:
        fails.append(f"bad pictures: '{want}' not in: {out}")

sweep = {"version": 1, "suite": suite_path, "store": "file://" + store, "tag": "t",
         "baseline": "dense@50", "steps_override": None, "variants": variants, "batches": [],
         "pairs": pairs}
json.dump(sweep, open(os.path.join(work, "sweep.json"), "w"))
rep_dir = os.path.join(work, "report")
rc, out = run("eval", "report", os.path.join(work, "sweep.json"), "--out", rep_dir, "--resamples", "500")
if rc != 0:
    sys.exit(f"FAIL: eval report: {out}")
rep = json.load(open(os.path.join(rep_dir, "report.json")))
vals = {m["name"]: m for m in rep["metrics"]}
for n in ["keyframe_psnr", "keyframe_ssim"]:
    if n not in vals or vals[n]["kind"] != "paired":
        sys.exit(f"FAIL: metric {n} missing or not paired: {sorted(vals)}")
def canvas(path, anchor):
    """The release's canvas with Pillow: keyframe 0 stretched, a later one cover-cropped."""
    img = Image.open(path).convert("RGB")
    w, h = img.size
    if (w, h) != (W, H):
        if anchor == 0:
            img = img.resize((W, H), Image.LANCZOS)
        else:
            s = max(W / w, H / h)
            nw, nh = round(w * s), round(h * s)
            img = img.resize((nw, nh), Image.LANCZOS)
            x0, y0 = (nw - W) // 2, (nh - H) // 2
            img = img.crop((x0, y0, x0 + W, y0 + H))
    return np.asarray(img, np.float64).transpose(2, 0, 1) / 255.0
pic_path = {("i1", 0): "pics/i1_first.png", ("l1", 1): "pics/l1_last.png",
            ("f1", 0): "pics/f1_first.png", ("f1", 1): store + "/eval/t/inputs/f1_last.png",
            ("f2", 0): "pics/f2_first.png", ("f2", 1): "pics/f2_last.png"}
n_checked = 0
for p, it in enumerate(items):
    for v in variants:
        got = (vals["keyframe_psnr"]["values"][v][p], vals["keyframe_ssim"]["values"][v][p])
        if it["id"] == "t1":
            if got != (None, None):
                fails.append(f"{it['id']}/{v}: keyframe metrics {got}, expected none")
            continue
        fr = decode_mp4(os.path.join(store, f"eval/t/{it['id']}/{keys[v]}/out.mp4"))
        ps, ss = [], []
        for k, t in ((0, 0), (1, fr.shape[1] - 1)):
            if (it["id"], k) not in pic_path:
                continue
            # keyframe 0 is the first picture the line has (the last one for l2va)
            ref = canvas(os.path.join(suite_dir, pic_path[(it["id"], k)]),
                         0 if k == 0 or it["mode"] == "l2va" else 1)
            ps.append(peak_signal_noise_ratio(ref, fr[:, t], data_range=1.0))
            ss.append(structural_similarity(ref, fr[:, t], data_range=1.0, gaussian_weights=True,
                                            sigma=1.5, use_sample_covariance=False, channel_axis=0))
        for name, g, w in (("psnr", got[0], np.mean(ps)), ("ssim", got[1], np.mean(ss))):
            if g is None or abs(g - w) > 1e-6 * max(1, abs(w)):
                fails.append(f"{it['id']}/{v} keyframe_{name}: got {g}, skimage {w}")
        n_checked += 1
if rep["errors"]:
    fails.append(f"unexpected errors: {rep['errors']}")
if n_checked != 8:
    fails.append(f"{n_checked} outputs checked, expected 8")
if fails:
    print("FAIL\n" + "\n".join(fails))
    sys.exit(1)
print(f"ok: suite check decodes pictures and names bad ones; keyframe PSNR/SSIM of {n_checked} "
      "outputs (pictures stretched and cover-cropped onto the canvas) equal scikit-image's")
