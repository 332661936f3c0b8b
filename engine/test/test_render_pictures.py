"""engine_render_pictures: keyframe pictures in, through `vdn encode` and `vdn render` (CPU).

A tiny checkpoint with VAEs (their encoder too) and a text encoder with its vision tower. Checks:
  - `vdn encode TEXT --first-frame A --last-frame B --height 64 --width 96` (FL2VA) writes the
    release's keyframe cache: keyframe_first / keyframe_last (1, 24, 1, 4, 6), height / width 64 x 96,
    keyframe_anchors "first,last", the pictures' SHA-256 (hashlib's) in keyframe_sha256; the rows of
    the two vision blocks tagged 0 (64 x 96 / (16 x 16 x 4) = 6 each: 12), every other row 1, and
    more rows than the text alone has;
  - the canvas is the release's (Pillow, independently): the first keyframe stretched with LANCZOS,
    so a picture pre-drawn on the canvas by Pillow encodes to latents within the VAE's
    sensitivity to one level of 255 of the file's; a last keyframe of another aspect is
    cover-cropped, as Pillow's cover-crop of it;
  - I2VA (--first-frame only) and L2VA (--last-frame only) caches carry one keyframe with its
    anchor; without --height/--width the canvas is the release's of the first keyframe (a 3:2
    picture: 768 x 1152);
  - `vdn render --prompt --first-frame --last-frame` renders an mp4 (ffprobe: 96 x 64, 22 frames)
    whose latents equal, bit for bit, those rendered from `vdn encode`'s cache; the record names
    the pictures' hashes; a second render is a cache hit; an entry whose keyframe latents were
    changed in the store fails its check and is encoded again; another picture is another key;
  - bad pictures fail with the file named, before any model is loaded: a truncated PNG, a text
    file, a missing file, a first keyframe of 5:1 (outside the release's 1:4 .. 4:1); pictures with
    --prompt-cache are refused.
usage: test_render_pictures.py VDN TOKENIZER_JSON WORKDIR
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "ops", "test"))
import st  # noqa: E402

vdn, tok_json, work = sys.argv[1], sys.argv[2], sys.argv[3]
run = st.vdn_in(vdn, work)
TEXT = "The lighthouse beam sweeps over a stormy sea."
H, W = 64, 96


def arrays(path):
    return st.read_arrays(path)[1]


def meta(path):
    return st.read_arrays(path)[0]


def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def fails(args, *words):
    r = run(*args, ok=False)
    st.check(r.returncode != 0 and all(w in r.stderr for w in words),
             f"vdn {' '.join(args[:2])}: expected a failure naming {words}, got rc {r.returncode}: "
             f"{r.stderr[-400:]!r}")


run("ckpt", "init", "--preset", "tiny", "--vdn", "--vae", "--text-encoder", "--tokenizer-json", tok_json,
    "--out", "ck")

# pictures: a 3:2 gradient (the first keyframe) and a square one of another aspect (the last)
y, x = np.mgrid[0:80, 0:120]
first = np.stack([x * 2, y * 3, (x + y) % 256], -1).astype(np.uint8)
Image.fromarray(first).save("first.png")
y, x = np.mgrid[0:90, 0:90]
last = np.stack([255 - x * 2, (x * y) % 256, y * 2], -1).astype(np.uint8)
Image.fromarray(last).save("last.png")

# FL2VA on a 64 x 96 canvas
run("encode", TEXT, "--checkpoint", "ck", "--cpu", "--first-frame", "first.png", "--last-frame", "last.png",
    "--height", str(H), "--width", str(W), "-o", "fl.safetensors")
run("encode", TEXT, "--checkpoint", "ck", "--cpu", "-o", "text.safetensors")
fl, m = arrays("fl.safetensors"), meta("fl.safetensors")
st.check(set(fl) == {"prompt_embeds", "text_token_tags", "keyframe_first", "keyframe_last"},
         f"FL2VA cache tensors: {sorted(fl)}")
for k in ("keyframe_first", "keyframe_last"):
    st.check(fl[k].shape == (1, 24, 1, H // 16, W // 16) and np.isfinite(fl[k]).all(),
             f"{k}: shape {fl[k].shape}")
st.check(m.get("height") == str(H) and m.get("width") == str(W) and m.get("keyframe_anchors") == "first,last",
         f"FL2VA metadata {m}")
st.check(json.loads(m.get("keyframe_sha256", "[]")) == [sha("first.png"), sha("last.png")],
         f"keyframe_sha256 {m.get('keyframe_sha256')}")
tags = fl["text_token_tags"]
n_text = arrays("text.safetensors")["text_token_tags"].shape[0]
per = H * W // (16 * 16 * 4)
# a vision block: <|vision_start|>, the merged patches, <|vision_end|>, every row tagged 0
st.check(int((tags == 0).sum()) == 2 * (per + 2),
         f"{int((tags == 0).sum())} vision rows tagged 0, expected {2 * (per + 2)}")
st.check(set(np.unique(tags)) <= {0, 1} and tags.shape[0] > n_text + 2 * (per + 2),
         f"{tags.shape[0]} rows for {n_text} text tokens and {2 * (per + 2)} vision rows")

# the canvas against Pillow: the pictures pre-drawn on the canvas encode (almost) alike
Image.fromarray(first).resize((W, H), Image.LANCZOS).save("first_canvas.png")
s = max(W / 90, H / 90)
cw, ch = round(90 * s), round(90 * s)
big = Image.fromarray(last).resize((cw, ch), Image.LANCZOS)
left, top = (cw - W) // 2, (ch - H) // 2
big.crop((left, top, left + W, top + H)).save("last_canvas.png")
run("encode", TEXT, "--checkpoint", "ck", "--cpu", "--first-frame", "first_canvas.png", "--last-frame",
    "last_canvas.png", "--height", str(H), "--width", str(W), "-o", "pil.safetensors")
pil = arrays("pil.safetensors")
for k in ("keyframe_first", "keyframe_last"):
    d = np.abs(fl[k] - pil[k]).max() / (np.abs(pil[k]).max() + 1e-12)
    st.check(d < 2e-2, f"{k}: our canvas vs Pillow's differ by {d:.2e} of the latents' range")
# and a different picture is different latents (the check can fail)
d = np.abs(fl["keyframe_first"] - fl["keyframe_last"]).max()
st.check(d > 1e-3, f"first and last keyframe latents differ ({d:.2e})")

# I2VA and L2VA. Without --height/--width the canvas is the release's of the first keyframe: for
# the 3:2 picture 768 x 1152, whose vision block alone (768 x 1152 / 32^2 = 864 merged patches + 2)
# is more than the tiny encoder's 512 positions: refused, naming the count
r = run("encode", TEXT, "--checkpoint", "ck", "--cpu", "--first-frame", "first.png", "-o", "big.safetensors",
        ok=False)
import re  # noqa: E402
m_tok = re.search(r"the prompt is (\d+) tokens; the limit is 512", r.stderr)
st.check(r.returncode != 0 and m_tok and int(m_tok.group(1)) == n_text + 866 + (tags.shape[0] - n_text - 2 * (per + 2)) // 2,
         f"I2VA on the release canvas (768 x 1152): {r.stderr[-300:]!r}")
run("encode", TEXT, "--checkpoint", "ck", "--cpu", "--first-frame", "first.png", "--height", str(H), "--width",
    str(W), "-o", "i2.safetensors")
i2, mi = arrays("i2.safetensors"), meta("i2.safetensors")
st.check(set(i2) == {"prompt_embeds", "text_token_tags", "keyframe_first"} and mi.get("keyframe_anchors") == "first",
         f"I2VA cache {sorted(i2)} {mi.get('keyframe_anchors')}")
st.check(np.array_equal(i2["keyframe_first"], fl["keyframe_first"]), "I2VA's first keyframe latents equal FL2VA's")
run("encode", TEXT, "--checkpoint", "ck", "--cpu", "--last-frame", "last.png", "--height", str(H), "--width", str(W),
    "-o", "l2.safetensors")
l2, ml = arrays("l2.safetensors"), meta("l2.safetensors")
st.check(set(l2) == {"prompt_embeds", "text_token_tags", "keyframe_last"} and ml.get("keyframe_anchors") == "last",
         f"L2VA cache {sorted(l2)} {ml.get('keyframe_anchors')}")

# vdn render from text and pictures
common = ["--checkpoint", "ck", "--frames", "22", "--height", str(H), "--width", str(W), "--steps", "2", "--seed", "3",
          "--cpu", "--save-latents"]
os.makedirs("r")
r = run("render", *common, "--prompt", TEXT, "--first-frame", "first.png", "--last-frame", "last.png",
        "--out", "r/clip")
info = json.loads(subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-show_streams", "-of", "json",
                                  "r/clip.mp4"], capture_output=True, text=True, check=True).stdout)
v = [s for s in info["streams"] if s["codec_type"] == "video"]
st.check(len(v) == 1 and (v[0]["width"], v[0]["height"]) == (W, H) and int(v[0]["nb_read_frames"]) == 22,
         f"mp4 video stream {v}")
rec = json.load(open("r/clip.json"))
tp = rec.get("text_prompt", {})
kf = tp.get("keyframes", [])
st.check(tp.get("cache") == "miss" and [k.get("sha256") for k in kf] == [sha("first.png"), sha("last.png")]
         and [k.get("anchor") for k in kf] == ["first", "last"], f"record text_prompt {tp}")
run("render", *common, "--prompt-cache", "fl.safetensors", "--out", "two")
a, b = arrays("r/clip.safetensors"), arrays("two.safetensors")
for k in ("video", "audio"):
    st.check(np.array_equal(a[k].view(np.uint32), b[k].view(np.uint32)),
             f"latents {k}: --prompt + pictures equal encode + --prompt-cache bit for bit")
run("render", *common, "--prompt", TEXT, "--first-frame", "first.png", "--last-frame", "last.png",
    "--out", "r/again")
tp2 = json.load(open("r/again.json")).get("text_prompt", {})
st.check(tp2.get("cache") == "hit" and tp2.get("key") == tp.get("key"), f"second render: {tp2}")
# an entry whose keyframe latents were changed in the store fails its check and is encoded again
entry = os.path.join("r", tp.get("key", "?"))
header, _, raw, start = st.read_header(entry)
b, _ = header["keyframe_last"]["data_offsets"]
raw = bytearray(raw)
raw[start + b] ^= 0x40
open(entry, "wb").write(bytes(raw))
r = run("render", *common, "--prompt", TEXT, "--first-frame", "first.png", "--last-frame", "last.png",
        "--out", "r/tampered")
tp4 = json.load(open("r/tampered.json")).get("text_prompt", {})
st.check(tp4.get("cache") == "miss" and "failed its check" in r.stderr,
         f"a changed keyframe in the cache entry: {tp4.get('cache')} {r.stderr[-300:]!r}")
shutil.copy("first_canvas.png", "other.png")
run("render", *common, "--prompt", TEXT, "--first-frame", "other.png", "--last-frame", "last.png",
    "--out", "r/other")
tp3 = json.load(open("r/other.json")).get("text_prompt", {})
st.check(tp3.get("cache") == "miss" and tp3.get("key") != tp.get("key"), f"another picture, another key: {tp3}")

# bad pictures
data = open("first.png", "rb").read()
open("cut.png", "wb").write(data[: len(data) // 2])
open("note.png", "w").write("not a picture\n")
enc = ["encode", TEXT, "--checkpoint", "ck", "--cpu", "-o", "bad.safetensors", "--first-frame"]
fails(enc + ["cut.png"], "cut.png")
fails(enc + ["note.png"], "note.png")
fails(enc + ["missing.png"], "missing.png")
Image.fromarray(np.zeros((20, 100, 3), np.uint8)).save("wide.png")  # 5:1, outside 1:4 .. 4:1
fails(enc + ["wide.png"], "keyframe pictures", "wide.png")
fails(["render", *common, "--prompt-cache", "fl.safetensors", "--first-frame", "first.png", "--out", "x"],
      "--first-frame")
if st.failures:
    raise SystemExit(f"engine_render_pictures: {len(st.failures)} check(s) failed")
print("engine_render_pictures: all checks passed")
