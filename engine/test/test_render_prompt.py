"""engine_render_prompt: `vdn render --prompt TEXT`, a one-off render from text in one command.

A tiny checkpoint with a text encoder (the real Qwen3 tokenizer) and VAEs renders from text on the
CPU. Checks:
  - the mp4, read by Debian's ffprobe: H.264 96x64 with the asked 22 frames at 24 fps, and an AAC
    stereo track as long as the audio latents say (La * 800 / 32000 s);
  - the latents equal, bit for bit, those of the two-command path on the same prompt and seed:
    `vdn encode` then `vdn render --prompt-cache`;
  - the encoding is cached by content in --prompt-store (default: the output's folder,
    prompt-cache/<sha256>.safetensors): the first render's record says "miss", a second render of
    the same text says "hit" with the same key and renders the same latents; the entry is a
    prompt cache whose embeddings equal `vdn encode`'s file; another text is another key and clip;
  - refusals, each naming the problem: --prompt with --prompt-cache; a checkpoint without
    text_encoder/; one without tokenizer/.
usage: test_render_prompt.py VDN TOKENIZER_JSON WORKDIR
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "ops", "test"))
import st  # noqa: E402

vdn, tok_json, work = sys.argv[1], sys.argv[2], sys.argv[3]
run = st.vdn_in(vdn, work)
TEXT = "A cat walks on a roof at night, lanterns swaying in the wind."
FRAMES, H, W = 22, 64, 96
common = ["--checkpoint", "ck", "--frames", str(FRAMES), "--height", str(H), "--width", str(W), "--steps", "2",
          "--seed", "11", "--cpu", "--save-latents"]


def arrays(path):
    return st.read_arrays(path)[1]


run("ckpt", "init", "--preset", "tiny", "--vdn", "--vae", "--text-encoder", "--tokenizer-json", tok_json,
    "--out", "ck")

# one command from text to mp4
os.makedirs("a")
r = run("render", *common, "--prompt", TEXT, "--out", "a/clip")
st.check("cache miss" in r.stderr, f"first render: a cache miss on stderr: {r.stderr!r}")
info = json.loads(subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-show_streams", "-of", "json",
                                  "a/clip.mp4"], capture_output=True, text=True, check=True).stdout)
v = [s for s in info["streams"] if s["codec_type"] == "video"]
a = [s for s in info["streams"] if s["codec_type"] == "audio"]
st.check(len(v) == 1 and len(a) == 1, f"streams: {[s['codec_type'] for s in info['streams']]}")
lat = arrays("a/clip.safetensors")
La = lat["audio"].shape[2]
if v and a:
    v, a = v[0], a[0]
    st.check(v["codec_name"] == "h264" and (v["width"], v["height"]) == (W, H),
             f"video {v['codec_name']} {v['width']}x{v['height']}")
    st.check(int(v["nb_read_frames"]) == FRAMES and v["r_frame_rate"] == "24/1",
             f"{v['nb_read_frames']} frames at {v['r_frame_rate']}, expected {FRAMES} at 24/1")
    st.check(abs(float(v["duration"]) - FRAMES / 24) < 1e-3, f"video duration {v['duration']}")
    st.check(a["codec_name"] == "aac" and int(a["channels"]) == 2, f"audio {a['codec_name']} {a['channels']} ch")
    st.check(abs(float(a["duration"]) - La * 800 / 32000) < 1e-3,
             f"audio duration {a['duration']}, expected {La * 800 / 32000}")
rec = json.load(open("a/clip.json"))
tp = rec.get("text_prompt", {})
st.check(tp.get("cache") == "miss" and tp.get("tokens", 0) > 5, f"record: text_prompt {tp}")
entry = os.path.join("a", "prompt-cache", os.path.basename(tp.get("key", "?")))
st.check(tp.get("key", "").startswith("prompt-cache/") and os.path.exists(entry),
         f"the cache entry {tp.get('key')} is in the output's folder")
st.check(not os.path.exists("a/clip.prompt.safetensors"), "the pipeline's local copy of the entry is removed")

# the two-command path: vdn encode, then render from the prompt cache
run("encode", TEXT, "--checkpoint", "ck", "--cpu", "-o", "enc.safetensors")
run("render", *common, "--prompt-cache", "enc.safetensors", "--out", "two")
ref = arrays("two.safetensors")
for k in ("video", "audio"):
    st.check(np.array_equal(lat[k].view(np.uint32), ref[k].view(np.uint32)),
             f"--prompt latents {k} equal encode + --prompt-cache's bit for bit")
if os.path.exists(entry):
    st.check(np.array_equal(arrays(entry)["prompt_embeds"].view(np.uint16),
                            arrays("enc.safetensors")["prompt_embeds"].view(np.uint16)),
             "the cache entry's prompt_embeds equal vdn encode's")

# the second render of that text reuses the entry
r = run("render", *common, "--prompt", TEXT, "--out", "a/again", "--json")
done = [json.loads(ln) for ln in r.stdout.splitlines() if ln.startswith("{")]
st.check(done and done[-1].get("event") == "done" and done[-1].get("prompt_cache") == tp.get("key"),
         f"--json done names the cache entry: {done[-1:]}")
rec2 = json.load(open("a/again.json"))
tp2 = rec2.get("text_prompt", {})
st.check(tp2.get("cache") == "hit" and tp2.get("key") == tp.get("key"), f"second render: text_prompt {tp2}")
again = arrays("a/again.safetensors")
st.check(np.array_equal(again["video"], lat["video"]), "the cached prompt renders the same latents")

# --prompt-store elsewhere: a fresh cache there (a miss), the same key
r = run("render", *common, "--prompt", TEXT, "--out", "b", "--prompt-store", "store")
tp3 = json.load(open("b.json")).get("text_prompt", {})
st.check(tp3.get("cache") == "miss" and os.path.exists(os.path.join("store", tp.get("key", "?"))),
         f"--prompt-store store: {tp3}")

# another text is another key and another clip (the text reaches the DiT)
run("render", *common, "--prompt", "A dog runs on a beach at noon.", "--out", "a/dog")
tp4 = json.load(open("a/dog.json")).get("text_prompt", {})
st.check(tp4.get("cache") == "miss" and tp4.get("key") != tp.get("key"), f"another text: {tp4}")
st.check(not np.array_equal(arrays("a/dog.safetensors")["video"], lat["video"]), "another text renders other latents")

# refusals
r = run("render", *common, "--prompt", TEXT, "--prompt-cache", "enc.safetensors", "--out", "x", ok=False)
st.check(r.returncode == 2 and "--prompt and --prompt-cache" in r.stderr, f"both: {r.returncode} {r.stderr!r}")
run("ckpt", "init", "--preset", "tiny", "--vae", "--out", "bare")
r = run("render", *common[2:], "--checkpoint", "bare", "--prompt", TEXT, "--out", "x", ok=False)
st.check(r.returncode == 1 and "text_encoder/" in r.stderr and not os.path.exists("x.mp4"),
         f"no text encoder: {r.stderr!r}")
shutil.copytree("ck", "notok")
shutil.rmtree("notok/base/tokenizer" if os.path.isdir("notok/base/tokenizer") else "notok/tokenizer")
r = run("render", *common[2:], "--checkpoint", "notok", "--prompt", TEXT, "--out", "x", ok=False)
st.check(r.returncode == 1 and "tokenizer/" in r.stderr, f"no tokenizer: {r.stderr!r}")

if st.failures:
    raise SystemExit(f"engine_render_prompt: {len(st.failures)} check(s) failed")
print("engine_render_prompt: all checks passed")
