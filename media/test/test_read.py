"""media_read: media/'s mp4 reader (frames.h) and PNG writer (png_write.h) against Debian's ffmpeg.

  - a clip written by media_mp4_write_tool is read back through vdn_frames: the container's frame
    count and size, every frame, and the pixels equal `ffmpeg -i F -pix_fmt rgb24` / 255 (the
    reader converts with the matrix and range the file is tagged with, as ffmpeg does);
  - a file that is not an mp4 is refused naming it;
  - a PNG of a fixed pattern decodes (ffmpeg) to that pattern exactly; the base64 of the encoded
    bytes (for the report's data: URIs) is Python's base64 of the file.
usage: test_read.py WRITE_TOOL READ_TOOL WORKDIR
"""
import base64
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "ops", "test"))
import st  # noqa: E402

write_tool, read_tool, work = sys.argv[1], sys.argv[2], sys.argv[3]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
os.chdir(work)

T, H, W = 13, 64, 96
t = np.arange(T)[None, :, None, None] / T
y = np.arange(H)[None, None, :, None] / H
x = np.arange(W)[None, None, None, :] / W
c = np.arange(3)[:, None, None, None]
frames = np.clip(0.5 + 0.4 * np.sin(2 * np.pi * (x * (1 + c) + 0.7 * y + t)), 0, 1).astype(np.float32)
st.write_f32("in.safetensors", {"frames": frames})
subprocess.run([write_tool, "in.safetensors", "clip.mp4"], check=True)

r = subprocess.run([read_tool, "frames", "clip.mp4", "got.f32"], capture_output=True, text=True)
st.check(r.returncode == 0, f"read: {r.stderr}")
info = [int(v) for v in r.stdout.split()] if r.returncode == 0 else [0, 0, 0, 0]
st.check(info == [T, H, W, T], f"container T H W and frames read: {info}, expected {[T, H, W, T]}")
ref = np.frombuffer(subprocess.run(["ffmpeg", "-v", "error", "-i", "clip.mp4", "-f", "rawvideo", "-pix_fmt", "rgb24",
                                    "-"], capture_output=True, check=True).stdout, np.uint8)
ref = ref.reshape(T, H, W, 3).transpose(0, 3, 1, 2).astype(np.float32) / 255
if r.returncode == 0:
    got = np.fromfile("got.f32", np.float32)
    st.check(got.size == ref.size, f"{got.size} floats read, ffmpeg gives {ref.size}")
    if got.size == ref.size:
        d = np.abs(got.reshape(ref.shape) - ref).max()
        st.check(d < 1e-6, f"frames differ from ffmpeg's rgb24 / 255 by up to {d}")

open("not.mp4", "w").write("not a video")
r = subprocess.run([read_tool, "frames", "not.mp4", "x.f32"], capture_output=True, text=True)
st.check(r.returncode == 1 and "not.mp4" in r.stderr, f"not an mp4: {r.returncode} {r.stderr!r}")

PW, PH = 200, 40
r = subprocess.run([read_tool, "png", "p.png", str(PW), str(PH)], capture_output=True, text=True)
st.check(r.returncode == 0, f"png: {r.stderr}")
if r.returncode == 0:
    dec = np.frombuffer(subprocess.run(["ffmpeg", "-v", "error", "-i", "p.png", "-f", "rawvideo", "-pix_fmt", "rgb24",
                                        "-"], capture_output=True, check=True).stdout, np.uint8).reshape(PH, PW, 3)
    px, py = np.meshgrid(np.arange(PW), np.arange(PH))
    want = np.stack([px % 256, py % 256, (px ^ py) % 256], -1).astype(np.uint8)
    st.check(np.array_equal(dec, want), "the PNG decodes to the pattern")
    raw = open("p.png", "rb").read()
    st.check(open("p.png.b64").read() == base64.b64encode(raw).decode(), "vdn_base64 of the encoding = the file's")

if st.failures:
    raise SystemExit(f"media_read: {len(st.failures)} check(s) failed")
print("media_read: all checks passed")
