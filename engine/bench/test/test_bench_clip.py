"""bench_clip_cpu: `vdn bench --clip` on the CPU backend at tiny shapes (the tiny DiT preset, a tiny
checkpoint's VAEs, a tiny random text encoder whose config.json this test writes with the DiT's
text width). Not a timing test: the GPU numbers come from the device runs.

  - the clip runs and reports every stage: text (with its encode inside), render, decode, and mux
    where the build writes mp4 (else null, and said); the total is at least the stages' sum, which
    is their sum; the render's median evaluation times the steps fits in the render;
  - the parts apart are there (text, DiT = steps x its median, decode, mux as the clip's) and add
    up to their sum, which the clip's total is not far below (half, as slack for the CPU's noise);
  - no published figure for a CPU run; the JSON names the workload asked;
  - --gpus 2: one clip over 2 CPU engines (the DiT sharded, the decode over both) reports the same;
  - without --vae the clip stops at the latents and says so;
  - --mux-json takes the mux timed apart (a --mux-only JSON of the clip's size) in place of this
    build's: the clip's own mux is null, the total with it is the clip's plus its seconds; a file
    of another size or not a mux's is refused naming the field;
  - --mux-only times the mux of a synthetic clip of the workload's size and of --frames-in's frames
    (where the build has FFmpeg; else it refuses, saying why), after one untimed mux or none;
  - refusals: a text encoder of another width than the DiT's text_dim (naming both), latent frames
    not 5k + 2, --audio-vae without --vae, --frames-in without --mux-only, an unknown option.
With a third argument `cuda` (ctest bench_clip_cuda, label gpu): the one-engine clip and its
parts on the GPU at the small preset's shapes (head_dim 128, which the CUDA attention takes; exit 77 without a GPU), so a device's `ctest -L gpu`
runs the bench's CUDA path before the full-size run.
usage: test_bench_clip.py VDN WORKDIR [cuda]
"""
import json
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "ops", "test"))
import st  # noqa: E402

vdn, work = sys.argv[1], sys.argv[2]
cuda = len(sys.argv) > 3 and sys.argv[3] == "cuda"
run = st.vdn_in(vdn, work)


def refused(why, args, *words):
    r = run(*args, ok=False)
    st.check(r.returncode not in (0, None), f"{why}: vdn {' '.join(args)} succeeded")
    for w in words:
        st.check(w in r.stderr, f"{why}: stderr does not name '{w}': {r.stderr!r}")


def text_config(folder, hidden):  # head_dim 64: a width the CUDA attention takes (encoder_init.c)
    os.makedirs(folder, exist_ok=True)
    tc = {"vocab_size": 1000, "hidden_size": hidden, "intermediate_size": 2 * hidden,
          "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
          "head_dim": 64, "rms_norm_eps": 1e-6, "rope_theta": 1e6, "max_position_embeddings": 4096}
    json.dump({"model_type": "qwen3_vl", "text_config": tc}, open(os.path.join(folder, "config.json"), "w"))


# the CUDA attention takes head_dim 64 or 128: the small preset (2 heads x 128) on a GPU
preset = "small" if cuda else "tiny"
run("ckpt", "init", "--preset", preset, "--vae", "--out", "ck")
tcfg = json.load(open("ck/transformer/config.json"))
text_dim = tcfg["text_dim"]
text_config("te", text_dim)
steps = 2
shape = [] if cuda else ["--cpu"]
shape += ["--preset", preset, "--frames", "7", "--height", "64", "--width", "64",
         "--steps", str(steps), "--tokens", "16", "--text-layer", "2", "--text-config", "te"]
vaes = ["--vae", "ck/vae", "--audio-vae", "ck/audio_vae"]


def clip(*extra, json_name="clip.json"):
    r = run("bench", "--clip", *shape, *extra, "--json", json_name)
    return r, json.load(open(json_name))


def check_clip(name, r, c, gpus, decoded):
    st.check(c["op"] == "clip" and c["gpus"] == gpus and c["steps"] == steps and c["latent_frames"] == 7
             and c["pixel_frames"] == 22 and c["tokens"] == 16 and c["text_hidden"] == text_dim
             and c["backend"] == ("cuda" if cuda else "cpu") and "error" not in c, f"{name}: header {c}")
    s = c["stages"]
    st.check(s["text_s"] > 0 and 0 < s["text_encode_s"] <= s["text_s"] and s["render_s"] > 0,
             f"{name}: stages {s}")
    if decoded:
        st.check(c["decoded"] is True and s["decode_s"] > 0, f"{name}: decode {s}")
        if c["mp4"]:
            st.check(s["mux_s"] > 0, f"{name}: mux {s}")
        else:
            st.check(s["mux_s"] is None and "not measured" in r.stdout, f"{name}: mux {s} {r.stdout!r}")
    else:
        st.check(c["decoded"] is False and s["decode_s"] is None and s["mux_s"] is None
                 and "the clip stops at latents" in r.stdout, f"{name}: no decoders {s} {r.stdout!r}")
    parts = sum(v for k, v in s.items() if k != "text_encode_s" and v is not None)
    st.check(abs(c["stages_sum_s"] - parts) <= 1e-6 * max(1, parts), f"{name}: stages sum {c['stages_sum_s']} vs {parts}")
    st.check(c["total_s"] >= c["stages_sum_s"] - 1e-9, f"{name}: total {c['total_s']} < stages {c['stages_sum_s']}")
    rd = c["render"]
    st.check(0 < steps * rd["median_s_per_nfe"] <= s["render_s"] and rd["fixed_s"] >= 0 and rd["peak_gib"] > 0,
             f"{name}: render {rd} in {s['render_s']}")
    st.check(c["peak_gib"] >= rd["peak_gib"] >= c["dit_weights_gib"] > 0, f"{name}: peaks {c['peak_gib']} {rd}")
    st.check(c["published"] == [] and "published: none" in r.stdout, f"{name}: published {c['published']}")
    for stage in ("text", "render", "decode", "mux", "clip"):
        st.check(re.search(rf"^{stage}\s", r.stdout, re.M) is not None, f"{name}: no line for {stage}: {r.stdout!r}")


if cuda:
    r = run("bench", "--clip", *shape, *vaes, "--json", "clip.json", ok=False)
    if r.returncode != 0 and any(w in r.stderr for w in ("no CUDA GPU", "backend 'cuda' unknown",
                                                        "not built into this binary")):
        print("bench_clip_cuda: SKIP (no GPU):", r.stderr.strip()[-200:])
        raise SystemExit(77)
    st.check(r.returncode == 0, f"the clip on CUDA: exit {r.returncode}: {r.stderr[-2000:]}")
    c = json.load(open("clip.json"))
else:
    r, c = clip(*vaes)
check_clip("one engine", r, c, 1, True)
have_mp4 = c["mp4"]
p = c.get("parts")
st.check(p is not None, "no parts")
if p:
    st.check(p["text_s"] > 0 and p["s_per_nfe"] > 0 and p["nfe"] == 2 and p["decode_s"] > 0, f"parts {p}")
    st.check(abs(p["dit_s"] - steps * p["s_per_nfe"]) <= 1e-9 * p["dit_s"] + 1e-12, f"parts: DiT {p}")
    st.check((p["mux_s"] is None) == (c["stages"]["mux_s"] is None), f"parts: mux {p}")
    want = p["text_s"] + p["dit_s"] + p["decode_s"] + (p["mux_s"] or 0)
    st.check(abs(p["sum_s"] - want) <= 1e-6 * want, f"parts sum {p['sum_s']} vs {want}")
    st.check(c["total_s"] >= 0.5 * p["sum_s"], f"the clip {c['total_s']} s is far below its parts' {p['sum_s']} s")
    st.check(re.search(r"^the parts apart: .* = [\d.]+ s; the clip [\d.]+ s is [\d.]+x their sum$", r.stdout, re.M)
             is not None, f"no parts line: {r.stdout!r}")

if cuda:  # the clip and its parts on one GPU; the rest is the CPU test's
    if st.failures:
        raise SystemExit(f"bench_clip_cuda: {len(st.failures)} check(s) failed")
    print("bench_clip_cuda: all checks passed")
    raise SystemExit(0)

r, c = clip(*vaes, "--gpus", "2", "--warmup", "0", "--parts", "0", json_name="clip2.json")
check_clip("2 engines", r, c, 2, True)
st.check("parts" not in c, "--parts 0 measured the parts")

r, c = clip("--warmup", "0", "--parts", "0", json_name="latents.json")
check_clip("no decoders", r, c, 1, False)

# the mux timed apart (a --mux-only JSON of this clip's size) in place of this build's
mux_apart = {"op": "mux", "source": "synthetic", "pixel_frames": 22, "height": 64, "width": 64,
             "mux_s": 1.5, "mux_best_s": 1.4, "cores": 16}
json.dump(mux_apart, open("mux_apart.json", "w"))
r, c = clip(*vaes, "--warmup", "0", "--parts", "0", "--mux-json", "mux_apart.json", json_name="apart.json")
st.check(c["stages"]["mux_s"] is None and c["stages"]["decode_s"] > 0, f"--mux-json: the clip muxed: {c['stages']}")
ma = c.get("mux_apart", {})
st.check(ma.get("mux_s") == 1.5 and ma.get("cores") == 16 and ma.get("source") == "synthetic"
         and ma.get("file") == "mux_apart.json", f"--mux-json: {ma}")
st.check(abs(c.get("total_with_mux_s", 0) - (c["total_s"] + 1.5)) < 1e-9, f"--mux-json: total {c}")
st.check(re.search(r"^clip\+mux\s+[\d.]+ s", r.stdout, re.M) is not None, f"no clip+mux line: {r.stdout!r}")
for bad, field in (({**mux_apart, "width": 96}, "width"), ({**mux_apart, "pixel_frames": 345}, "pixel_frames"),
                   ({**mux_apart, "mux_s": 0}, "mux_s"), ({**mux_apart, "op": "clip"}, "op")):
    json.dump(bad, open("mux_bad.json", "w"))
    refused(f"--mux-json {field}", ["bench", "--clip", *shape, *vaes, "--mux-json", "mux_bad.json"],
            "mux_bad.json", field)
refused("--mux-json without --vae", ["bench", "--clip", *shape, "--mux-json", "mux_apart.json"], "--vae")

# the mux alone
r = run("bench", "--clip", "--mux-only", "--frames", "7", "--height", "64", "--width", "96", "--reps", "1",
        "--json", "mux.json", ok=False)
st.check((r.returncode == 0) == have_mp4, f"--mux-only: exit {r.returncode}, mp4 {have_mp4}: {r.stderr!r}")
if have_mp4 and r.returncode == 0:
    m = json.load(open("mux.json"))
    st.check(m["op"] == "mux" and m["source"] == "synthetic" and m["pixel_frames"] == 22 and m["height"] == 64
             and m["width"] == 96 and m["sample_rate"] == 32000 and m["audio_samples"] == 37 * 800, f"mux {m}")
    st.check(0 < m["mux_best_s"] <= m["mux_s"] and m["bytes"] > 0 and m["cores"] >= 1, f"mux {m}")
    frames = np.random.default_rng(0).random((3, 5, 32, 48), dtype=np.float32)
    st.write_f32("frames.safetensors", {"frames": frames})
    r2 = run("bench", "--clip", "--mux-only", "--frames-in", "frames.safetensors", "--warmup", "0", "--reps", "1",
             "--json", "mux2.json")
    st.check("0 + 1 muxes" in r2.stderr and "1 + 1 muxes" in r.stderr, f"muxes: {r.stderr!r} {r2.stderr!r}")
    m2 = json.load(open("mux2.json"))
    st.check(m2["source"] == "frames.safetensors" and m2["pixel_frames"] == 5 and m2["height"] == 32
             and m2["width"] == 48, f"--frames-in: {m2}")
    st.write_f32("odd.safetensors", {"frames": frames[:, :, :31]})
    refused("odd frames", ["bench", "--clip", "--mux-only", "--frames-in", "odd.safetensors"], "odd.safetensors", "even")
else:
    st.check("without FFmpeg" in r.stderr, f"--mux-only without FFmpeg: {r.stderr!r}")

# refusals
text_config("te40", text_dim + 8)
refused("text width", ["bench", "--clip", *shape[:-2], "--text-config", "te40"], str(text_dim + 8), "text_dim")
refused("latent frames", ["bench", "--clip", "--cpu", "--frames", "8"], "--frames 8", "5k + 2")
refused("audio without video", ["bench", "--clip", "--cpu", "--audio-vae", "ck/audio_vae"], "--audio-vae")
refused("--frames-in alone", ["bench", "--clip", "--cpu", "--frames-in", "f.safetensors"], "--mux-only")
refused("unknown option", ["bench", "--clip", "--cpu", "--frobnicate", "1"], "--frobnicate")
refused("bad precision", ["bench", "--clip", "--cpu", "--precision", "fp4"], "fp4")
r = run("bench", "--clip", "--help")
st.check("--mux-only" in r.stdout and "--gpus" in r.stdout, "help does not describe --mux-only and --gpus")
if st.failures:
    raise SystemExit(f"bench_clip_cpu: {len(st.failures)} check(s) failed")
print("bench_clip_cpu: all checks passed")
