"""`vdn render --precision fp8` on the CPU backend (the quantised oracle) against the default
(bf16; on the cpu backend the fp32 oracle) on the tiny VDN checkpoint, one NFE from a given noise
so the output is noise + velocity and the difference of two outputs is the difference of the two
velocities. Checks: the run record names the precision; fp8 renders are deterministic; the fp8
velocity differs from the unquantised one by a nonzero amount (the quantisation really runs) that
stays within a bound (below); a bad --precision is a usage error.

The bound. Each quantised Linear sees both operands rounded to e4m3: at most half a step, 2^-4
relative, per element; engine_fp8 measures 3.5e-2..7e-2 relative L2 for one Linear's product.
In the DiT the quantised Linears (context_embedder, the refiner's and both blocks' q/k/v, to_out,
FFN, to_out_linear: 19 on the tiny model) feed branches that add into a residual stream which
starts from the unquantised fp32 patch embedding and ends in the fp32 heads, so the velocity's
relative error must stay below one Linear's worst (7e-2; measured 7.2e-3). A lost or swapped
scale gives O(1), and a path that skipped quantisation gives exactly 0; the lower bound 1e-3 is
far above the fp32 oracle's run-to-run difference (0: it is deterministic).

argv: VDN_BINARY WORKDIR"""
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "ops", "test"))
import st  # noqa: E402

VDN, WORK = sys.argv[1], sys.argv[2]
fails = []


def check(cond, what):
    print("ok  " if cond else "FAIL", what, flush=True)
    if not cond:
        fails.append(what)


def run(*args):
    return subprocess.run([VDN, *args], capture_output=True, text=True, timeout=300)


def read_st(path):
    return st.read_arrays(path)[1]


def write_st(path, tensors):
    hdr, off, blobs = {}, 0, []
    for name, a in tensors.items():
        a = np.ascontiguousarray(a, np.float32)
        hdr[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
        blobs.append(a.tobytes())
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
ck = os.path.join(WORK, "ckpt")
p = run("ckpt", "init", "--preset", "tiny", "--vdn", "--out", ck)
check(p.returncode == 0, "vdn ckpt init --preset tiny --vdn")

H, W, FR = 64, 96, 56  # 17 latent frames: the VDN linear branch runs
rng = np.random.default_rng(5)
noise = rng.standard_normal((24, 17, H // 16, W // 16)).astype(np.float32)
nf = os.path.join(WORK, "noise.safetensors")
write_st(nf, {"noise_video": noise, "noise_audio": rng.standard_normal((2 * 93, 32))})


def render(name, *extra):
    out = os.path.join(WORK, name)
    p = run("render", "--checkpoint", ck, "--prompt-cache", os.path.join(ck, "prompt.safetensors"),
            "--frames", str(FR), "--height", str(H), "--width", str(W), "--steps", "1", "--seed",
            "3", "--noise", nf, "--cpu", "--threads", "2", "--quiet", "--out", out, *extra)
    if p.returncode != 0:
        print(p.stderr, flush=True)
        return None, None
    return read_st(out + ".safetensors"), json.load(open(out + ".json"))


ref, rec_ref = render("default")
b16, rec_b16 = render("bf16", "--precision", "bf16")
f8, rec_f8 = render("fp8", "--precision", "fp8")
f8b, _ = render("fp8_again", "--precision", "fp8")
check(ref is not None and b16 is not None and f8 is not None and f8b is not None, "renders ran")
if f8 is not None and ref is not None:
    check(rec_ref.get("precision") == "bf16", "default record says bf16")
    check(rec_b16.get("precision") == "bf16", "--precision bf16 record says bf16")
    check(rec_f8.get("precision") == "fp8", "--precision fp8 record says fp8")
    check(np.array_equal(ref["video"], b16["video"]), "--precision bf16 is the default")
    check(np.array_equal(f8["video"], f8b["video"]) and np.array_equal(f8["audio"], f8b["audio"]),
          "fp8 renders are deterministic")
    # one NFE from sigma 1 to 0: output = noise + velocity
    v_ref = ref["video"].astype(np.float64) - noise
    v_f8 = f8["video"].astype(np.float64) - noise
    e = np.linalg.norm(v_f8 - v_ref) / np.linalg.norm(v_ref)
    ea = np.linalg.norm(f8["audio"] - ref["audio"].astype(np.float64)) / np.linalg.norm(ref["audio"])
    print(f"fp8 vs unquantised: video velocity {e:.3e} relative L2, audio output {ea:.3e}")
    check(1e-3 < e < 7e-2, f"fp8 video velocity differs by {e:.3e} (expected 1e-3..7e-2)")
    check(ea > 0 and np.isfinite(f8["audio"]).all(), "fp8 audio differs and is finite")

p = run("render", "--precision", "fp16")
check(p.returncode == 2 and "expected bf16 or fp8" in p.stderr, "--precision fp16 refused")

if fails:
    print(f"{len(fails)} check(s) failed")
    sys.exit(1)
print("engine_render_fp8: ok")
