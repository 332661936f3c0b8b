"""Relative RMS differences between vdn latents files (video and audio tensors), for the device
runs' precision checks: compare_latents.py REF.safetensors OTHER.safetensors [...] prints one
line per other file: ||other - ref|| / ||ref|| for video and audio, and whether all values are
finite. Reads with the safetensors library, computes in float64 with numpy."""
import sys

import numpy as np
from safetensors.numpy import load_file


def rel(ref, out):
    ref = ref.astype(np.float64)
    out = out.astype(np.float64)
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-300))


ref = load_file(sys.argv[1])
for path in sys.argv[2:]:
    o = load_file(path)
    finite = all(np.isfinite(o[k]).all() for k in ("video", "audio"))
    print(f"{path} vs {sys.argv[1]}: video {rel(ref['video'], o['video']):.3e}  "
          f"audio {rel(ref['audio'], o['audio']):.3e}  finite {finite}")
