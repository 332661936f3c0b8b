#!/usr/bin/env python3
"""engine_vs_official_reference: our engine against values computed by the PUBLIC PyTorch code.

Each expected_*.safetensors here was written by ops/reference/official_reference.py
(docs/reference-check.md), which ran the diffusers MiniMax-H3 transformer, packer, row-timestep
plan and schedulers, and the VDN hybrid of the torch-only ComfyUI-VDN-H3 port (window softmax +
linear branch), for a t2va request (56 frames, 64x96) and an fl2va request (first + last keyframe,
the prompt cache's canvas), for 1 and/or 2 model evaluations from the noise stored in the same
file: dense in float64, the VDN variants in float32 (the port does not take float64).

  expected_init.safetensors    checkpoint `vdn ckpt init --preset tiny --vdn --adapters none
                               --seed 11`, as written (its softmax gate is the release's init:
                               bias 4.6, weights ~1e-3, i.e. nearly the constant 0.99)
  expected_stress.safetensors  the same checkpoint with every softmax_gate.up.weight times 512
                               and its bias 0 (stress_softmax_gate below), so the gate varies per
                               row and head and a wrong gate cannot hide; vdn, window-only,
                               vdn-no-anchors and vdn-additive at 1 NFE

Here: regenerate the checkpoint (sha256s must equal the recorded ones, else the generator changed
and the reference must be re-run), `vdn render` with --noise from the file, and compare
  * the update d = output - noise (with 1 NFE, d is exactly the model's velocity: t = 0,
    x0 = x + v) by relative RMS error ||d - d_ref|| / ||d_ref||;
  * both sigma grids of the run record with the reference scheduler's, bit for bit.
And checks that keep the comparison able to fail: dense and vdn references differ by far more than
the bound, and so do our window-only variant (no linear branch) and the vdn reference.

usage: test_official_reference.py VDN_BINARY WORKDIR [EXPECTED.safetensors ...]
"""
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "ops",
                                "test"))
from st import read_header, tensor_bytes, write_f32  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
# Bounds on ||d - d_ref|| / ||d_ref|| for our CPU oracle (float32 storage, float64 sums) against
# a float64 (dense) or float32 (vdn) reference. Measured: ~1e-7 dense, ~3e-7 vdn.
# The other VDN variants (vdn-no-anchors, vdn-additive, window-only) use the vdn bound.
TOL = {"dense": 1e-5, "vdn": 5e-5}
DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "BF16": np.uint16}


def read_st(path):
    """Minimal safetensors reader (8-byte little-endian header length, JSON header, raw data).
    Returns ({name: array}, metadata, header, header_size); BF16 comes back as raw uint16."""
    header, meta, raw, start = read_header(path)
    out = {}
    for name, e in header.items():
        if e["dtype"] not in DTYPES:
            raise SystemExit(f"{path}: tensor {name}: dtype {e['dtype']} not handled here")
        out[name] = np.frombuffer(tensor_bytes(raw, start, e),
                                  dtype=DTYPES[e["dtype"]]).reshape(e["shape"])
    return out, meta, header, start


def stress_softmax_gate(ckpt):
    """In place: every softmax_gate.up.weight (BF16) times 512 (an exponent shift: exact) and
    every softmax_gate.up.bias set to 0, in ckpt/linear_branch/model.safetensors."""
    path = os.path.join(ckpt, "linear_branch", "model.safetensors")
    _, _, header, start = read_st(path)
    with open(path, "rb") as f:
        raw = bytearray(f.read())
    changed = 0
    for name, e in header.items():
        if name == "__metadata__" or ".softmax_gate.up." not in name:
            continue
        if e["dtype"] != "BF16":
            raise SystemExit(f"{path}: {name} is {e['dtype']}, expected BF16")
        a, b = e["data_offsets"]
        u = np.frombuffer(bytes(raw[start + a:start + b]), dtype=np.uint16)
        if name.endswith(".weight"):
            f32 = (u.astype(np.uint32) << 16).view(np.float32) * np.float32(512)
            u = (f32.view(np.uint32) >> 16).astype(np.uint16)
        else:
            u = np.zeros_like(u)
        raw[start + a:start + b] = u.tobytes()
        changed += 1
    if changed == 0:
        raise SystemExit(f"{path}: no softmax_gate tensors to stress")
    with open(path, "wb") as f:
        f.write(raw)


TRANSFORMS = {"init": None, "stress": stress_softmax_gate}


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(cmd)}\nexit {p.returncode}\n{p.stdout}{p.stderr}")
    return p


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def make_checkpoint(vdn, meta, ckpt):
    ck_meta = json.loads(meta["ckpt_metadata"])["metadata"]
    run([vdn, "ckpt", "init", "--preset", ck_meta["preset"], "--vdn", "--adapters", "none",
         "--seed", str(ck_meta["seed"]), "--out", ckpt])
    label = meta.get("label", "")
    if label not in TRANSFORMS:
        raise SystemExit(f"metadata label {label!r}: expected one of {sorted(TRANSFORMS)}")
    if TRANSFORMS[label]:
        TRANSFORMS[label](ckpt)
    for rel_path, want in json.loads(meta["checkpoint_sha256"]).items():
        got = sha256(os.path.join(ckpt, rel_path))
        if got != want:
            raise SystemExit(
                f"FAIL: {rel_path} of `vdn ckpt init` ({label}) has sha256 {got}, the reference was "
                f"computed on {want}: the generator changed; re-run ops/reference "
                "(docs/reference-check.md)")


def check_file(vdn, expected, work, failures):
    ref, meta, _, _ = read_st(expected)
    label = meta.get("label", "")
    os.makedirs(work)
    ckpt = os.path.join(work, "ckpt")
    make_checkpoint(vdn, meta, ckpt)
    # keys: CASE_VARIANT_NNFE_PART (variant names use '-', never '_')
    runs = sorted({(k.split("_")[1], int(k.split("_")[2][:-3])) for k in ref
                   if k.endswith("nfe_video") and not k.split("_")[1] == "sigmas"})
    variants = sorted({v for v, _ in runs})
    for case, prompt in (("t2va", "prompt.safetensors"), ("fl2va", "prompt_fl2va.safetensors")):
        req = json.loads(meta[f"{case}_request"])
        noise_v = ref[f"{case}_noise_video"].astype(np.float64)
        La = req["audio_latents"]
        # noise_audio is in row layout (2*La, 32), channel-major; outputs are (2, 32, La)
        noise_a = ref[f"{case}_noise_audio"].astype(np.float64).reshape(2, La, 32).transpose(0, 2, 1)
        noise = {"video": noise_v, "audio": noise_a}
        noise_file = os.path.join(work, f"{case}_noise.safetensors")
        write_f32(noise_file, {k[len(case) + 1:]: v for k, v in ref.items()
                              if k.startswith(f"{case}_noise_")})
        common = ["--checkpoint", ckpt, "--prompt-cache", os.path.join(ckpt, prompt),
                  "--frames", str(req["frames"]), "--height", str(req["height"]),
                  "--width", str(req["width"]), "--seed", "0", "--noise", noise_file,
                  "--cpu", "--quiet"]
        name = f"{label} {case}"

        def render(variant, nfe):
            prefix = os.path.join(work, f"{case}_{variant}_{nfe}nfe")
            run([vdn, "render", *common, "--steps", str(nfe), "--out", prefix, "--variant", variant])
            with open(prefix + ".json") as f:
                return read_st(prefix + ".safetensors")[0], json.load(f)

        for variant, nfe in runs:
            out, rec = render(variant, nfe)
            for part in ("video", "audio"):
                want = ref[f"{case}_{variant}_{nfe}nfe_{part}"]
                if out[part].shape != want.shape:
                    failures.append(f"{name} {variant} {nfe} NFE {part}: engine shape "
                                    f"{out[part].shape}, reference {want.shape}")
                    continue
                e = rel(out[part] - noise[part], want - noise[part])
                tol = TOL["dense" if variant == "dense" else "vdn"]
                ok = e < tol
                print(f"{name} {variant} {nfe} NFE {part}: engine vs reference {e:.2e} "
                      f"(bound {tol:.0e}) {'ok' if ok else 'FAIL'}")
                if not ok:
                    failures.append(f"{name} {variant} {nfe} NFE {part}: relative error "
                                    f"{e:.2e} > {tol:.0e}")
            if nfe == 2 and f"{case}_sigmas_video_2nfe" in ref:
                for which in ("video", "audio"):
                    want = ref[f"{case}_sigmas_{which}_2nfe"].astype(np.float32)
                    got = rec.get("sampler", {}).get(f"sigma_{which}")
                    got = np.asarray(got if got is not None else [], np.float32)
                    if got.shape != want.shape or not np.array_equal(got, want):
                        failures.append(f"{name}: run record sampler.sigma_{which} "
                                        f"{got.tolist()} != reference {want.tolist()}")
        if "vdn" in variants:
            # the comparison must be able to see the VDN attention and the linear branch
            for other, out in (("dense reference", {p: ref[f"{case}_dense_1nfe_{p}"] for p in noise}
                                if "dense" in variants else None),
                               ("engine window-only", render("window-only", 1)[0])):
                if out is None:
                    continue
                e = rel(out["video"] - noise_v, ref[f"{case}_vdn_1nfe_video"] - noise_v)
                print(f"{name}: {other} vs vdn reference, 1 NFE video: {e:.2e}")
                if not e > 20 * TOL["vdn"]:
                    failures.append(f"{name}: {other} is within {e:.2e} of the vdn reference: "
                                    "the comparison does not see the VDN branch")


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    vdn, work = sys.argv[1], sys.argv[2]
    files = sys.argv[3:] or sorted(glob.glob(os.path.join(HERE, "expected_*.safetensors")))
    if not files:
        raise SystemExit(f"FAIL: no expected_*.safetensors in {HERE}")
    shutil.rmtree(work, ignore_errors=True)
    failures = []
    for i, path in enumerate(files):
        check_file(vdn, path, os.path.join(work, str(i)), failures)
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print(f"engine_vs_official_reference: all checks passed ({len(files)} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
