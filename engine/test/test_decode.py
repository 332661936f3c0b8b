"""vae_decode_e2e: `vdn decode` as a user runs it, read back by Debian's ffprobe/ffmpeg and scipy.

A tiny checkpoint with VAEs (`vdn ckpt init --vae`) renders a 22-frame t2va clip's latents; then:
  - `vdn decode --checkpoint` writes the mp4, the lossless frames, a float32 WAV and a poster;
    ffprobe: H.264 yuv420p 96x64, as many frames as --frames-out holds, 24/1 fps, AAC 2 ch 32 kHz,
    audio duration = La * 800 / 32000; ffmpeg's frames of the mp4 are the decoder's frames
    (PSNR above the noise floor, and far above frames of another clip: noise in, noise out, so the
    35 dB check on real content is media_mp4's); the WAV (scipy) has the right rate, length and
    channels and the mp4's AAC track follows it; the poster is 3 frames wide;
  - the official latents layout (latents (1, C, T, h, w), audio_latents (2, C, La)) decodes to the
    same frames and waveform, bit for bit;
  - `--devices 3` (three CPU devices, each with its own copy of the VAEs) decodes to the same
    frames and waveform, bit for bit; `--devices 0` is refused;
  - latents without audio give an mp4 without an audio stream;
  - bad input fails naming the problem and leaves no file: latents with 16 channels, 2 latent
    frames (too few for one chunk), an output folder under a file, a VAE missing a tensor, a VAE
    with a mis-shaped tensor;
  - `vdn inspect` lists both VAEs (tensor count, channels, rate), and names the missing tensor of a
    broken one.
usage: test_decode.py VDN WORKDIR
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
from scipy.io import wavfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "ops", "test"))
import st  # noqa: E402

vdn, work = sys.argv[1], sys.argv[2]
run = st.vdn_in(vdn, work)


def read(path):
    h, _, raw, off = st.read_header(path)
    return {k: np.frombuffer(st.tensor_bytes(raw, off, e), np.float32).reshape(e["shape"]) for k, e in h.items()}


run("ckpt", "init", "--preset", "tiny", "--vae", "--out", "ck")
run("render", "--checkpoint", "ck", "--prompt-cache", "ck/prompt.safetensors", "--frames", "22", "--height", "64",
    "--width", "96", "--steps", "2", "--seed", "3", "--out", "clip", "--quiet", "--save-latents")
lat = read("clip.safetensors")
C, T, h, w = lat["video"].shape
La = lat["audio"].shape[2]

r = run("decode", "clip.safetensors", "-o", "clip.mp4", "--checkpoint", "ck", "--frames-out", "frames.safetensors",
        "--wav", "clip.wav", "--poster", "poster.png")
st.check("video tile 1/1" in r.stderr and "audio channel 2/2" in r.stderr, f"progress lines: {r.stderr!r}")
frames = read("frames.safetensors")["frames"]
F, H, W = frames.shape[1], frames.shape[2], frames.shape[3]
st.check(frames.shape[0] == 3 and (H, W) == (16 * h, 16 * w), f"frames shape {frames.shape}")
st.check(F == 22, f"{F} frames decoded from {T} latent frames, the render asked for 22")
st.check(frames.min() >= 0 and frames.max() <= 1, "frames in [0, 1]")

info = json.loads(subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-show_streams", "-of", "json",
                                  "clip.mp4"], capture_output=True, text=True, check=True).stdout)
v = [s for s in info["streams"] if s["codec_type"] == "video"][0]
a = [s for s in info["streams"] if s["codec_type"] == "audio"][0]
st.check(v["codec_name"] == "h264" and v["pix_fmt"] == "yuv420p" and (v["width"], v["height"]) == (W, H),
         f"video stream {v['codec_name']} {v['pix_fmt']} {v['width']}x{v['height']}")
st.check(int(v["nb_read_frames"]) == F and v["r_frame_rate"] == "24/1", f"{v['nb_read_frames']} frames at {v['r_frame_rate']}")
st.check(a["codec_name"] == "aac" and int(a["channels"]) == 2 and int(a["sample_rate"]) == 32000,
         f"audio stream {a['codec_name']} {a['channels']} ch {a['sample_rate']} Hz")
st.check(abs(float(a["duration"]) - La * 800 / 32000) < 1e-3, f"audio duration {a['duration']}, expected {La * 800 / 32000}")

dec = np.frombuffer(subprocess.run(["ffmpeg", "-v", "error", "-i", "clip.mp4", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"],
                                   capture_output=True, check=True).stdout, np.uint8).reshape(F, H, W, 3).astype(np.float64)
ref = np.rint(frames * 255).transpose(1, 2, 3, 0)


def psnr(x, y):
    return 10 * np.log10(255.0 ** 2 / np.mean((x - y) ** 2))


p_same, p_other = psnr(dec, ref), psnr(dec, ref[::-1])
print(f"mp4 vs decoded frames: PSNR {p_same:.1f} dB (vs the frames reversed: {p_other:.1f} dB)")
st.check(p_same > p_other + 3, f"the mp4's frames are not the decoder's: {p_same:.1f} vs {p_other:.1f} dB")

rate, wav = wavfile.read("clip.wav")
st.check(rate == 32000 and wav.dtype == np.float32 and wav.shape == (La * 800, 2), f"WAV {rate} Hz {wav.dtype} {wav.shape}")
aac = np.frombuffer(subprocess.run(["ffmpeg", "-v", "error", "-i", "clip.mp4", "-vn", "-f", "f32le", "-acodec", "pcm_f32le", "-"],
                                   capture_output=True, check=True).stdout, np.float32).reshape(-1, 2)
n = wav.shape[0]
for ch in range(2):
    snr = 10 * np.log10(np.sum(wav[:, ch].astype(np.float64) ** 2) / np.sum((aac[:n, ch] - wav[:, ch]) ** 2))
    print(f"AAC channel {ch} vs the WAV: SNR {snr:.1f} dB")
    st.check(snr > 6, f"AAC channel {ch} does not follow the decoded waveform (SNR {snr:.1f} dB)")
png = subprocess.run(["ffprobe", "-v", "error", "-show_streams", "-of", "json", "poster.png"], capture_output=True, text=True)
ps = json.loads(png.stdout)["streams"][0] if png.returncode == 0 else {}
st.check(ps.get("width") == 3 * W and ps.get("height") == H, f"poster {ps.get('width')}x{ps.get('height')}")

# the official layout decodes to the same frames and waveform
st.write_f32("official.safetensors", {"latents": lat["video"][None], "audio_latents": lat["audio"]})
run("decode", "official.safetensors", "--vae", "ck/vae", "--audio-vae", "ck/audio_vae", "--frames-out", "f2.safetensors",
    "--wav", "w2.wav", "--quiet")
st.check(np.array_equal(read("f2.safetensors")["frames"], frames), "official layout: other frames")
st.check(np.array_equal(wavfile.read("w2.wav")[1], wav), "official layout: other waveform")

# over three devices (vae.h "one clip over several devices"): the same frames and waveform
r = run("decode", "clip.safetensors", "--checkpoint", "ck", "--backend", "cpu", "--devices", "3", "--frames-out",
        "f3.safetensors", "--wav", "w3.wav")
st.check("decoding on cpu, cpu, cpu (3 devices)" in r.stderr, f"--devices 3: {r.stderr!r}")
st.check(np.array_equal(read("f3.safetensors")["frames"], frames), "--devices 3: other frames")
st.check(np.array_equal(wavfile.read("w3.wav")[1], wav), "--devices 3: other waveform")
r = run("decode", "clip.safetensors", "--checkpoint", "ck", "--devices", "0", "--wav", "w0.wav", ok=False)
st.check(r.returncode == 2 and "--devices \"0\": expected an integer 1..64" in r.stderr, f"--devices 0: {r.stderr!r}")

# --precision fp8 (vae.h vdn_video_vae_load_precision): the ViT's Linears in e4m3, so other frames
# than bf16's, off by e4m3's error relative to the frames' spread (test_vae_reference.c argues
# FP8_LO..FP8_HI for the tiny checkpoint's 2 blocks: 3e-3..1.02e-1); the waveform is unchanged
r = run("decode", "clip.safetensors", "--checkpoint", "ck", "--backend", "cpu", "--precision", "fp8", "--frames-out",
        "f8.safetensors", "--wav", "w8.wav")
st.check("video decoder at fp8" in r.stderr, f"--precision fp8: {r.stderr!r}")
f8 = read("f8.safetensors")["frames"]
spread = np.linalg.norm(frames - frames.mean(axis=(1, 2, 3), keepdims=True))
rel8 = float(np.linalg.norm(f8.astype(np.float64) - frames) / spread)
st.check(3e-3 < rel8 < 1.02e-1, f"--precision fp8: {rel8:.3e} of the frames' spread from bf16, outside 3e-3..1.02e-1")
st.check(np.array_equal(wavfile.read("w8.wav")[1], wav), "--precision fp8: other waveform")
r = run("decode", "clip.safetensors", "--checkpoint", "ck", "--precision", "fp16", "--wav", "w9.wav", ok=False)
st.check(r.returncode == 2 and "--precision \"fp16\": expected bf16 or fp8" in r.stderr, f"--precision fp16: {r.stderr!r}")

# no audio latents: an mp4 without sound
st.write_f32("mute.safetensors", {"video": lat["video"]})
run("decode", "mute.safetensors", "-o", "mute.mp4", "--checkpoint", "ck", "--quiet")
info = json.loads(subprocess.run(["ffprobe", "-v", "error", "-show_streams", "-of", "json", "mute.mp4"],
                                 capture_output=True, text=True, check=True).stdout)
st.check([s["codec_type"] for s in info["streams"]] == ["video"], "no audio latents: one video stream")

# bad input: a clear error, no file left
os.makedirs("bad", exist_ok=True)
st.write_f32("bad/c16.safetensors", {"video": lat["video"][:16], "audio": lat["audio"]})
st.write_f32("bad/t2.safetensors", {"video": lat["video"][:, :2], "audio": lat["audio"]})
open("bad/afile", "w").close()
shutil.copytree("ck/vae", "bad/vae_missing")
shutil.copytree("ck/vae", "bad/vae_shape")
vw = read("ck/vae/diffusion_pytorch_model.safetensors")
st.write_f32("bad/vae_missing/diffusion_pytorch_model.safetensors", {k: x for k, x in vw.items() if k != "decoder.proj_in.bias"})
st.write_f32("bad/vae_shape/diffusion_pytorch_model.safetensors",
             {k: (x[:-1] if k == "decoder.transformer_blocks.1.scale2" else x) for k, x in vw.items()})
cases = [
    (["bad/c16.safetensors", "--checkpoint", "ck"], "bad/out1.mp4", "16 latent channels, the video VAE"),
    (["bad/t2.safetensors", "--checkpoint", "ck"], "bad/out2.mp4", "2 latent frames: too few for one decoder chunk"),
    (["clip.safetensors", "--checkpoint", "ck"], "bad/afile/out3.mp4", "cannot create"),
    (["clip.safetensors", "--vae", "bad/vae_missing"], "bad/out4.mp4", "tensor decoder.proj_in.bias is missing"),
    (["clip.safetensors", "--vae", "bad/vae_shape"], "bad/out5.mp4", "decoder.transformer_blocks.1.scale2"),
]
for args, out, words in cases:
    r = run("decode", *args, "-o", out, "--frames-out", out + ".frames", ok=False)
    st.check(r.returncode != 0 and words in r.stderr, f"{args}: rc {r.returncode}, expected {words!r} in {r.stderr!r}")
    left = [p for p in (out, out + ".partial", out + ".frames") if os.path.exists(p)]
    st.check(not left, f"{args}: files left behind: {left}")

# vdn inspect shows the VAEs beside transformer/, and says when one is unusable
ins = json.loads(run("inspect", "ck", "--json").stdout)
st.check(ins["vae"].get("ok") and ins["vae"]["tensors"] == len(vw) and ins["vae"]["latent_channels"] == C,
         f"inspect vae: {ins['vae']}")
st.check(ins["audio_vae"].get("ok") and ins["audio_vae"]["sampling_rate"] == 32000, f"inspect audio_vae: {ins['audio_vae']}")
shutil.copytree("ck", "ck_bad")
shutil.rmtree("ck_bad/vae")
shutil.copytree("bad/vae_missing", "ck_bad/vae")
shutil.rmtree("ck_bad/audio_vae")
r = run("inspect", "ck_bad")
st.check("UNUSABLE" in r.stdout and "decoder.proj_in.bias is missing" in r.stdout, f"inspect, bad vae: {r.stdout!r}")
st.check("audio_vae   none" in r.stdout, f"inspect, no audio vae: {r.stdout!r}")

if st.failures:
    raise SystemExit(f"vae_decode_e2e: {len(st.failures)} check(s) failed")
print("vae_decode_e2e: all checks passed")
