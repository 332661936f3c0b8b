#!/usr/bin/env python3
"""RAFT mean flow as a vdn eval scorer (the paper's motion diagnostic), from torchvision's public
RAFT: an example of the external scorer contract (eval/scorer.h, docs/eval.md "Learned metrics").

    {"scorers": [{"name": "raft", "higher_is_better": false, "timeout_s": 1800,
      "command": "python3 eval/scorers/raft_flow.py --video {video} --model raft_large --device cuda"}]}

It decodes the mp4 with the ffmpeg CLI (rgb24, as `vdn eval` decodes it), takes frame pairs
(t, t + stride), resizes them to at most --max-side pixels on the long side (both sides multiples
of 8, as RAFT needs), runs the model, and prints one JSON object: {"mean_flow": mean over pairs
of the mean flow magnitude in pixels of the original size, "pairs": n}. Exit status 1 and a
message on stderr on any failure: vdn lists it as that output's error.

--model raft_large / raft_small: torchvision.models.optical_flow with their released weights
(Raft_Large_Weights.DEFAULT: downloaded once into torch's cache, or put there beforehand on a farm
without internet). --model stand-in: a global-translation flow by phase correlation in numpy, no
torch: what the test runs (CI has no torch), and a plumbing check on any machine."""
import argparse, json, subprocess, sys

import numpy as np


def frames_of(path):
    probe = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
                            "stream=width,height", "-of", "json", path],
                           capture_output=True, text=True)
    if probe.returncode:
        raise RuntimeError(f"{path}: ffprobe: {probe.stderr.strip()}")
    st = json.loads(probe.stdout)["streams"]
    if not st:
        raise RuntimeError(f"{path}: no video stream")
    w, h = st[0]["width"], st[0]["height"]
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", path, "-f", "rawvideo", "-pix_fmt",
                          "rgb24", "-"], capture_output=True)
    if raw.returncode:
        raise RuntimeError(f"{path}: ffmpeg: {raw.stderr.decode(errors='replace').strip()}")
    return np.frombuffer(raw.stdout, np.uint8).reshape(-1, h, w, 3)


def stand_in(a, b):
    """(dy, dx) of the global shift taking a to b, by phase correlation on the luminance, with a
    parabolic sub-pixel peak: the flow field of a pure translation, without torch."""
    ga, gb = a.astype(np.float64).mean(-1), b.astype(np.float64).mean(-1)
    win = np.outer(np.hanning(ga.shape[0]), np.hanning(ga.shape[1]))
    fa, fb = np.fft.fft2(ga * win), np.fft.fft2(gb * win)
    r = np.fft.ifft2(fb * np.conj(fa) / (np.abs(fb * np.conj(fa)) + 1e-12)).real
    py, px = np.unravel_index(np.argmax(r), r.shape)
    def sub(c, n, axis):
        m, p = r[(py - 1) % r.shape[0], px] if axis == 0 else r[py, (px - 1) % r.shape[1]], \
            r[(py + 1) % r.shape[0], px] if axis == 0 else r[py, (px + 1) % r.shape[1]]
        d = m - 2 * r[py, px] + p
        off = 0.5 * (m - p) / d if d else 0.0
        v = c + off
        return v - n if v > n / 2 else v
    return sub(py, r.shape[0], 0), sub(px, r.shape[1], 1)


def torch_model(name, device):
    import torch
    from torchvision.models import optical_flow as of
    weights = {"raft_large": of.Raft_Large_Weights.DEFAULT,
               "raft_small": of.Raft_Small_Weights.DEFAULT}[name]
    model = getattr(of, name)(weights=weights).eval().to(device)
    tf = weights.transforms()

    def flow(a, b, size):
        ta = torch.from_numpy(np.ascontiguousarray(a)).permute(2, 0, 1)[None]
        tb = torch.from_numpy(np.ascontiguousarray(b)).permute(2, 0, 1)[None]
        ta = torch.nn.functional.interpolate(ta.float(), size=size, mode="bilinear", antialias=True)
        tb = torch.nn.functional.interpolate(tb.float(), size=size, mode="bilinear", antialias=True)
        x, y = tf(ta / 255.0, tb / 255.0)
        with torch.no_grad():
            f = model(x.to(device), y.to(device))[-1][0].cpu().numpy()  # (2, h, w): dx, dy
        return f
    return flow


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--video", required=True)
    ap.add_argument("--model", default="raft_large", choices=["raft_large", "raft_small", "stand-in"])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--stride", type=int, default=1)
    ap.add_argument("--max-side", type=int, default=960)
    a = ap.parse_args()
    fr = frames_of(a.video)
    if len(fr) <= a.stride:
        raise RuntimeError(f"{a.video}: {len(fr)} frames, need more than --stride {a.stride}")
    H, W = fr.shape[1:3]
    s = min(1.0, a.max_side / max(H, W))
    h, w = max(8, int(round(H * s / 8)) * 8), max(8, int(round(W * s / 8)) * 8)
    mags = []
    if a.model == "stand-in":
        for t in range(0, len(fr) - a.stride, a.stride):
            dy, dx = stand_in(fr[t], fr[t + a.stride])
            mags.append(float(np.hypot(dy, dx)))
    else:
        flow = torch_model(a.model, a.device)
        for t in range(0, len(fr) - a.stride, a.stride):
            f = flow(fr[t], fr[t + a.stride], (h, w))
            # back to pixels of the original frame: x components by W / w, y by H / h
            mags.append(float(np.hypot(f[0] * W / w, f[1] * H / h).mean()))
    print(json.dumps({"mean_flow": float(np.mean(mags)), "pairs": len(mags)}))


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # the contract: a message, a failing status, nothing on stdout
        print(f"raft_flow: {e}", file=sys.stderr)
        sys.exit(1)
