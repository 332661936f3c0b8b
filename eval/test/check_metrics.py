"""Check eval's image/latent metrics against independent references: PSNR and SSIM against
scikit-image, ILK optical flow against skimage.registration.optical_flow_ilk, the latent
preview, relative L2, latent PSNR and temporal difference against numpy written from the
definitions in eval/metrics.h."""
import json, os, subprocess, sys, tempfile
import numpy as np
from skimage.metrics import peak_signal_noise_ratio, structural_similarity
from skimage.registration import optical_flow_ilk
from scipy import ndimage as ndi

tool = sys.argv[1]
tmp = tempfile.mkdtemp()
fails = []
rng = np.random.default_rng(3)

def check(name, got, want, tol):
    if not abs(got - want) <= tol:
        fails.append(f"{name}: got {got!r} want {want!r} (tol {tol})")

def smooth_image(h, w, seed):
    r = np.random.default_rng(seed)
    return np.clip(ndi.gaussian_filter(r.uniform(0, 1, (h, w)), 2.0) * 2 - 0.5, 0, 1)

# --- PSNR / SSIM ---
for k, (h, w) in enumerate([(11, 11), (16, 16), (24, 40), (64, 48), (97, 33)]):
    a = smooth_image(h, w, k)
    b = np.clip(a + rng.normal(0, 0.05 * (k + 1), a.shape), 0, 1)
    path = os.path.join(tmp, "img.bin")
    with open(path, "wb") as f:
        f.write(np.array([h, w], np.int32).tobytes() + a.tobytes() + b.tobytes())
    got = json.loads(subprocess.run([tool, "image", path, "1.0"], capture_output=True,
                                    text=True, check=True).stdout)
    check(f"psnr {h}x{w}", got["psnr"], peak_signal_noise_ratio(a, b, data_range=1.0), 1e-9)
    ref = structural_similarity(a, b, data_range=1.0, gaussian_weights=True, sigma=1.5,
                                use_sample_covariance=False)
    check(f"ssim {h}x{w}", got["ssim"], ref, 1e-10)

# --- optical flow ---
# Single level (min side <= 32): the same algorithm step for step, 1e-8. Multi-level: the
# pyramid (Gaussian sigma 2/3 + bilinear reduce, nearest-neighbour flow upsampling) is written
# from skimage's documented behaviour; it agrees to ~1e-6 here, checked at 1e-4.
def flow_case(h, w, shift, seed):
    base = smooth_image(h + 16, w + 16, seed)
    a = base[8:8 + h, 8:8 + w]
    b = ndi.shift(base, shift, order=3, mode="nearest")[8:8 + h, 8:8 + w]
    path, out = os.path.join(tmp, "flow.bin"), os.path.join(tmp, "flow.out")
    with open(path, "wb") as f:
        f.write(np.array([h, w], np.int32).tobytes() + a.tobytes() + b.tobytes())
    subprocess.run([tool, "flow", path, out], check=True)
    got = np.fromfile(out, np.float64).reshape(2, h, w)
    ref = optical_flow_ilk(a, b, radius=7, num_warp=10, gaussian=False, prefilter=False,
                           dtype=np.float64)
    return got, ref

for h, w, shift, seed in [(32, 32, (0.7, -0.4), 11), (16, 24, (0.3, 0.5), 12), (24, 32, (-1.2, 0.8), 13)]:
    got, ref = flow_case(h, w, shift, seed)
    err = np.max(np.abs(got - ref))
    if err > 1e-8:
        fails.append(f"flow single-level {h}x{w}: max |diff| {err}")
for h, w, shift, seed in [(64, 64, (1.5, -2.0), 21), (80, 48, (-2.5, 1.0), 22), (48, 84, (0.5, 0.5), 23)]:
    got, ref = flow_case(h, w, shift, seed)
    err = np.max(np.abs(got - ref))
    if err > 1e-4:
        fails.append(f"flow multi-level {h}x{w}: max |diff| {err}")
    mg, mr = np.hypot(*got).mean(), np.hypot(*ref).mean()
    check(f"flow multi-level {h}x{w} mean magnitude", mg, mr, 1e-6 * mr)

# --- latent preview and latent metrics ---
C, F, H, W = 24, 5, 3, 4
a = rng.normal(0, 1, (C, F, H, W)).astype(np.float32)
b = (a + rng.normal(0, 0.1, a.shape)).astype(np.float32)
path, out = os.path.join(tmp, "lat.bin"), os.path.join(tmp, "lat.out")
with open(path, "wb") as f:
    f.write(np.array([C, F, H, W], np.int32).tobytes() + a.tobytes() + b.tobytes())
got = json.loads(subprocess.run([tool, "latent", path, out], capture_output=True, text=True,
                                check=True).stdout)
s = max(1, -(-16 // min(H, W)))  # vdn_preview_scale
raw = np.fromfile(out, np.uint8)
ph, pw = H * s, W * s
step = ph * pw * 8 + ph * pw * 3
A, D = a.astype(np.float64), b.astype(np.float64)
groups = [np.array([c for c in range(C) if 3 * c // C == k]) for k in range(3)]
for t in range(F):
    chunk = raw[t * step:(t + 1) * step]
    gray = np.frombuffer(chunk[:ph * pw * 8].tobytes(), np.float64).reshape(ph, pw)
    rgb = chunk[ph * pw * 8:].reshape(ph, pw, 3)
    p = np.stack([A[g, t].sum(0) / np.sqrt(len(g)) for g in groups], -1)  # (H, W, 3)
    v = np.clip(0.5 + p / 6, 0, 1)
    want_gray = np.kron(v.mean(-1), np.ones((s, s)))
    want_rgb = np.round(np.kron(v, np.ones((s, s, 1))) * 255)
    check(f"preview gray frame {t}", np.max(np.abs(gray - want_gray)), 0, 1e-12)
    check(f"preview rgb frame {t}", np.max(np.abs(rgb.astype(float) - want_rgb)), 0, 0)
check("rel_l2", got["rel_l2"], np.linalg.norm(D - A) / np.linalg.norm(A), 1e-9)
check("latent_psnr", got["latent_psnr"],
      peak_signal_noise_ratio(A, D, data_range=A.max() - A.min()), 1e-9)
diffs = np.sqrt(((A[:, 1:] - A[:, :-1]) ** 2).mean(axis=(0, 2, 3)))
check("tdiff_mean", got["tdiff_mean"], diffs.mean(), 1e-9)
check("tdiff_var", got["tdiff_var"], diffs.var(), 1e-9)
# motion: mean ILK magnitude over consecutive gray previews (here single level: 24x32)
mags = []
for t in range(F - 1):
    g0 = np.kron(np.clip(0.5 + np.stack([A[g, t].sum(0) / np.sqrt(len(g)) for g in groups], -1) / 6, 0, 1).mean(-1), np.ones((s, s)))
    g1 = np.kron(np.clip(0.5 + np.stack([A[g, t + 1].sum(0) / np.sqrt(len(g)) for g in groups], -1) / 6, 0, 1).mean(-1), np.ones((s, s)))
    fl = optical_flow_ilk(g0, g1, radius=7, num_warp=10, dtype=np.float64)
    mags.append(np.hypot(*fl).mean())
check("motion", got["motion"], np.mean(mags) / s, 1e-7)

if fails:
    print("FAIL\n" + "\n".join(fails))
    sys.exit(1)
print("ok: PSNR/SSIM match skimage, ILK flow matches skimage, latent metrics match numpy")
