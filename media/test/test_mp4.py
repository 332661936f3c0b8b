"""media_mp4: the mp4 writer read back by Debian's ffprobe/ffmpeg (an independent decoder).

A smooth moving test clip (49 frames, 160x96) with a stereo tone pair (440 Hz left, 660 Hz right,
32 kHz) goes through media_mp4_write_tool; then:
  - ffprobe: H.264 yuv420p, 160x96, 49 frames at 24/1 fps, duration 49/24 s; AAC, 2 channels, 32 kHz;
    the moov atom before mdat (+faststart); no .partial file left;
  - ffmpeg decodes the frames to RGB24: PSNR against the input (8-bit rounded) >= 35 dB at the
    default quality, and lower at --crf 45 (the option works);
  - ffmpeg decodes the audio to float: the same length up to the last AAC frame's padding, each channel within 25 dB SNR of its tone,
    and the channels not swapped;
  - bad input (a folder under a file, odd width, crf 60, no frames) fails naming the problem and
    leaves no file.
usage: test_mp4.py TOOL WORKDIR
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "ops", "test"))
import st  # noqa: E402

tool, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
for prog in ("ffprobe", "ffmpeg"):
    if not shutil.which(prog):
        raise SystemExit(f"{prog} missing: install Debian's ffmpeg (ops/install-deps.sh)")

T, H, W, RATE = 49, 96, 160, 32000
t = np.arange(T)[None, :, None, None] / T
y = np.arange(H)[None, None, :, None] / H
x = np.arange(W)[None, None, None, :] / W
c = np.arange(3)[:, None, None, None]
frames = 0.5 + 0.4 * np.sin(2 * np.pi * (x * (1 + c) + 0.7 * y + t + 0.3 * c))
frames = frames * (0.8 + 0.2 * np.cos(2 * np.pi * (y - t)))
frames = np.clip(frames, 0, 1).astype(np.float32)  # (3, T, H, W)
n = T * RATE // 24
s = np.arange(n) / RATE
audio = np.stack([0.5 * np.sin(2 * np.pi * 440 * s), 0.4 * np.sin(2 * np.pi * 660 * s)]).astype(np.float32)
src = os.path.join(work, "clip.safetensors")
st.write_f32(src, {"frames": frames, "audio": audio})


def run_tool(out, *opts):
    return subprocess.run([tool, src, out, *opts], capture_output=True, text=True)


def probe(path):
    r = subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-show_streams", "-show_format",
                        "-of", "json", path], capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def decode_rgb(path):
    r = subprocess.run(["ffmpeg", "-v", "error", "-i", path, "-f", "rawvideo", "-pix_fmt", "rgb24", "-"],
                       capture_output=True, check=True)
    return np.frombuffer(r.stdout, np.uint8).reshape(-1, H, W, 3)


def psnr(dec):
    ref = np.rint(frames * 255).transpose(1, 2, 3, 0)  # (T, H, W, 3)
    mse = np.mean((dec.astype(np.float64) - ref) ** 2)
    return 10 * np.log10(255.0 ** 2 / mse)


out = os.path.join(work, "clip.mp4")
r = run_tool(out)
st.check(r.returncode == 0, f"write failed: {r.stderr}")
st.check(os.path.exists(out) and not os.path.exists(out + ".partial"), "final file present, no .partial")
info = probe(out)
v = [s_ for s_ in info["streams"] if s_["codec_type"] == "video"][0]
a = [s_ for s_ in info["streams"] if s_["codec_type"] == "audio"][0]
st.check(v["codec_name"] == "h264" and v["pix_fmt"] == "yuv420p", f"video codec {v['codec_name']} {v['pix_fmt']}")
st.check((v["width"], v["height"]) == (W, H), f"size {v['width']}x{v['height']}")
st.check(int(v["nb_read_frames"]) == T, f"frames {v['nb_read_frames']} != {T}")
st.check(v["r_frame_rate"] == "24/1" and v["avg_frame_rate"] == "24/1", f"fps {v['r_frame_rate']} {v['avg_frame_rate']}")
st.check(abs(float(v["duration"]) - T / 24) < 1e-3, f"video duration {v['duration']} != {T / 24}")
st.check(a["codec_name"] == "aac" and int(a["channels"]) == 2 and int(a["sample_rate"]) == RATE,
         f"audio {a['codec_name']} {a['channels']} ch {a['sample_rate']} Hz")
st.check(abs(float(a["duration"]) - n / RATE) < 1e-3, f"audio duration {a['duration']} != {n / RATE}")
raw = open(out, "rb").read()
st.check(0 <= raw.find(b"moov") < raw.find(b"mdat"), "moov before mdat (+faststart)")

p = psnr(decode_rgb(out))
print(f"PSNR at the default crf: {p:.2f} dB")
st.check(p >= 35.0, f"PSNR {p:.2f} dB < 35 at the default quality")
out45 = os.path.join(work, "clip45.mp4")
r = run_tool(out45, "--crf", "45")
st.check(r.returncode == 0, f"--crf 45 failed: {r.stderr}")
if r.returncode == 0:
    p45 = psnr(decode_rgb(out45))
    print(f"PSNR at crf 45: {p45:.2f} dB")
    st.check(p45 < p - 3, f"crf 45 ({p45:.2f} dB) is not visibly worse than the default ({p:.2f} dB)")

r = subprocess.run(["ffmpeg", "-v", "error", "-i", out, "-vn", "-f", "f32le", "-acodec", "pcm_f32le", "-"],
                   capture_output=True, check=True)
dec = np.frombuffer(r.stdout, np.float32).reshape(-1, 2).T
# The container's duration is exact (checked above); ffmpeg's decode keeps the zero padding of
# the last AAC frame (it trims the encoder delay at the start, not the padding at the end).
st.check(n <= dec.shape[1] < n + 1024, f"decoded {dec.shape[1]} audio samples, wrote {n}")
m = min(n, dec.shape[1])
for ch, name in ((0, "left"), (1, "right")):
    ref = audio[ch, :m].astype(np.float64)
    snr = 10 * np.log10(np.sum(ref ** 2) / np.sum((dec[ch, :m] - ref) ** 2))
    swapped = 10 * np.log10(np.sum(ref ** 2) / np.sum((dec[1 - ch, :m] - ref) ** 2))
    print(f"audio {name}: SNR {snr:.1f} dB (other channel {swapped:.1f} dB)")
    st.check(snr >= 25.0, f"audio {name} SNR {snr:.1f} dB < 25")
    st.check(swapped < 3.0, f"audio {name} also matches the other channel")

# bad input: clear error, nothing left
blocker = os.path.join(work, "afile")
open(blocker, "w").close()
cases = [
    (os.path.join(blocker, "out.mp4"), [], "cannot create"),
    (os.path.join(work, "bad_crf.mp4"), ["--crf", "60"], "crf 60"),
]
for path, opts, words in cases:
    r = run_tool(path, *opts)
    st.check(r.returncode != 0 and words in r.stderr, f"{path} {opts}: rc {r.returncode}, stderr {r.stderr!r}")
    st.check(not os.path.exists(path) and not os.path.exists(path + ".partial"), f"{path}: file left behind")
odd = os.path.join(work, "odd.safetensors")
st.write_f32(odd, {"frames": frames[:, :, :, :W - 1]})
r = subprocess.run([tool, odd, os.path.join(work, "odd.mp4")], capture_output=True, text=True)
st.check(r.returncode != 0 and "expected positive even" in r.stderr, f"odd width: {r.stderr!r}")
empty = os.path.join(work, "empty.safetensors")
st.write_f32(empty, {"frames": frames[:, :0]})
r = subprocess.run([tool, empty, os.path.join(work, "empty.mp4")], capture_output=True, text=True)
st.check(r.returncode != 0 and "no frames" in r.stderr, f"no frames: {r.stderr!r}")
left = [f for f in os.listdir(work) if f.startswith(("odd.mp4", "empty.mp4"))]
st.check(not left, f"files left behind: {left}")

if st.failures:
    raise SystemExit(f"media_mp4: {len(st.failures)} check(s) failed")
print("media_mp4: all checks passed")
