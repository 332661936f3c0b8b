"""RoPE positions of the packed sequence against numpy (the reference builds them with numpy and
torch float64): frame times (cumsum), the pairwise-summed span of the last keyframe, and the
np.linspace spatial grids, compared bit for bit. argv[1]: the vdn_positions_dump helper."""
import subprocess
import sys

import numpy as np

helper = sys.argv[1]
fails = 0
for frames in list(range(1, 40)) + [64, 101, 102, 103, 130, 257, 300]:
    spans = np.ones(frames, dtype=np.float64) * (5.0 / 3.0)
    for i, p in enumerate((1, 4, 4, 4, 4)):
        spans[i::5] *= p
    span = float(spans.sum())
    times = np.concatenate([[0.0], np.cumsum(spans[:-1])]) if frames > 1 else np.zeros(1)
    out = subprocess.run([helper, "span", str(frames)], capture_output=True, text=True, check=True)
    vals = [float.fromhex(v) for v in out.stdout.split()]
    if vals[0] != span:
        print(f"span({frames}): C {vals[0]!r} numpy {span!r}")
        fails += 1
    for k in range(frames):
        if vals[1 + k] != times[k]:
            print(f"frame time {k} of {frames}: C {vals[1 + k]!r} numpy {times[k]!r}")
            fails += 1
for lh, lw in [(48, 84), (84, 48), (4, 4), (6, 10), (26, 30), (48, 48)]:
    sq = np.sqrt(lh * lw)
    for D in (lh, lw):
        ratio = D / sq
        left = (1.0 - ratio) / 2.0
        ref = np.linspace(left, left + ratio, D // 2, endpoint=False) * 32
        out = subprocess.run([helper, "grid", str(D), str(lh), str(lw)], capture_output=True, text=True, check=True)
        got = np.array([float.fromhex(v) for v in out.stdout.split()])
        if got.shape != ref.shape or not np.array_equal(got, ref):
            print(f"grid D={D} ({lh}x{lw}): max diff {np.max(np.abs(got - ref)) if got.shape == ref.shape else 'shape'}")
            fails += 1
print("test_positions:", "ok" if fails == 0 else f"{fails} failures")
sys.exit(1 if fails else 0)
