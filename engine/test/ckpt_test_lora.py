#!/usr/bin/python3
"""LoRA folding against an independent numpy reference.

Builds a tiny VDN checkpoint with the `default` (attn.orig names, alpha = r) and `turbo`
(mixed ranks via rank_pattern, alpha_pattern, alpha != r, adaLN / FF / norm_out targets)
adapters with `vdn ckpt init`, writes an external ORIGINAL-layout adapter (fused qkv_proj,
mlp.fc1, out_proj, final_layer.adaln_proj.linear; alpha in the file metadata) here, lets the
engine assemble everything (ckpt_dump), and recomputes every tensor from the raw files:

    W <- bf16(W + bf16(scale * B @ A)),  scale = alpha / r,  adapters in order default, turbo, ext

Also checks the native layout rules (per-head interleaved qkv, fc1 [gate; up]) on the raw files.
Usage: ckpt_test_lora.py VDN_BINARY CKPT_DUMP_BINARY TMPDIR
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "ops",
                                "test"))
from st import check, failures, read_header, tensor_bytes, write_f32  # noqa: E402

DT = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32, "U8": np.uint8}


def read_st(path):
    """Minimal safetensors reader: {name: float32/int array}, metadata."""
    header, meta, raw, start = read_header(path)
    out = {}
    for name, e in header.items():
        buf = tensor_bytes(raw, start, e)
        if e["dtype"] == "BF16":
            u = np.frombuffer(buf, dtype=np.uint16).astype(np.uint32) << 16
            arr = u.view(np.float32)
        else:
            arr = np.frombuffer(buf, dtype=DT[e["dtype"]]).astype(
                np.float32 if e["dtype"] in ("F32", "F16") else DT[e["dtype"]])
        out[name] = arr.reshape(e["shape"])
    return out, meta


def bf16(x):
    """Round float32 to bfloat16 (round to nearest even), back as float32."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return u.view(np.float32)


def pattern(pat, module):
    for k, v in (pat or {}).items():
        if module == k or module.endswith("." + k):
            return v
    return None


def main():
    vdn, dump, tmp = sys.argv[1:4]
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    ck = os.path.join(tmp, "vdn")
    subprocess.run([vdn, "ckpt", "init", "--preset", "tiny", "--vdn", "--adapters",
                    "default,turbo", "--seed", "5", "--out", ck], check=True)
    rng = np.random.default_rng(11)
    r_ext, alpha_ext = 2, 3.0
    hidden, inner, ffn, temb = 64, 64, 128, 32
    ext = {
        "blocks.0.attn.qkv_proj": (rng.standard_normal((r_ext, hidden)),
                                   rng.standard_normal((3 * inner, r_ext)) * 0.1),
        "blocks.1.mlp.fc1": (rng.standard_normal((r_ext, hidden)),
                             rng.standard_normal((2 * ffn, r_ext)) * 0.1),
        "token_refiner.blocks.0.attn.out_proj": (rng.standard_normal((r_ext, inner)),
                                                 rng.standard_normal((hidden, r_ext)) * 0.1),
        "final_layer.adaln_proj.linear": (rng.standard_normal((r_ext, temb)),
                                          rng.standard_normal((2 * hidden, r_ext)) * 0.1),
    }
    ext_path = os.path.join(tmp, "ext_original.safetensors")
    tensors = {}
    for m, (a, b) in ext.items():
        tensors[m + ".lora_A.weight"] = a.astype(np.float32)
        tensors[m + ".lora_B.weight"] = b.astype(np.float32)
    write_f32(ext_path, tensors, {"alpha": str(alpha_ext)})

    out = os.path.join(tmp, "merged.safetensors")
    subprocess.run([dump, ck, out, "--adapter", ext_path], check=True)
    merged, _ = read_st(out)
    base, _ = read_st(os.path.join(ck, "base/transformer/diffusion_pytorch_model.safetensors"))
    branch, _ = read_st(os.path.join(ck, "linear_branch/model.safetensors"))

    # the reference: (target, A, B, scale) in folding order
    folds = []
    for name in ("default", "turbo"):
        ad_dir = os.path.join(ck, "adapters", name)
        spec = json.load(open(os.path.join(ad_dir, "adapter_spec.json")))["config"]
        ad, _ = read_st(os.path.join(ad_dir, "adapter_model.safetensors"))
        for key in sorted(k for k in ad if ".lora_A." in k):
            module = key.split(".lora_A.")[0]
            a, b = ad[key], ad[key.replace(".lora_A.", ".lora_B.")]
            r = a.shape[0]
            want_r = pattern(spec.get("rank_pattern"), module) or spec["rank"]
            check(want_r == r, f"{name} {module}: rank {r} vs config {want_r}")
            alpha = pattern(spec.get("alpha_pattern"), module) or spec["alpha"]
            target = module.replace(".attn.orig.", ".attn.")
            folds.append((target, a, b, alpha / r))
    # external, original layout, translated here by the spec's rules
    for m, (a, b) in ext.items():
        a, b = a.astype(np.float32), b.astype(np.float32)
        scale = alpha_ext / r_ext
        t = m.replace("token_refiner.blocks.", "token_refiner.refiner_blocks.")
        if t.startswith("blocks."):
            t = "transformer_blocks." + t[len("blocks."):]
        t = t.replace("final_layer.adaln_proj.linear", "norm_out.linear")
        t = t.replace(".attn.out_proj", ".attn.to_out.0").replace(".mlp.fc1", ".ff.net.0.proj")
        if ".attn.qkv_proj" in t:
            for p, chunk in zip(("to_q", "to_k", "to_v"), np.split(b, 3, axis=0)):
                folds.append((t.replace("qkv_proj", p), a, chunk, scale))
        elif ".ff.net.0.proj" in t:
            gate, up = np.split(b, 2, axis=0)
            folds.append((t, a, np.concatenate([up, gate], axis=0), scale))
        else:
            folds.append((t, a, b, scale))

    expect = {k: v.copy() for k, v in base.items()}
    expect.update({k: v.copy() for k, v in branch.items()})
    kinds = set()
    for target, a, b, scale in folds:
        w = expect[target + ".weight"]
        delta = (b.astype(np.float64) @ a.astype(np.float64) * scale).astype(np.float32)
        kinds.add(round(scale, 3))
        if w.dtype == np.float32 and target.startswith(("proj_in", "proj_out", "time_embedder")):
            expect[target + ".weight"] = w + delta
        else:
            expect[target + ".weight"] = bf16(w + bf16(delta))
    check({1.0, 2.0, 0.5, 1.5} <= kinds, f"scales exercised: {sorted(kinds)}")
    check(len(folds) == 16 + 13 + 6, f"{len(folds)} folds")

    check(set(merged) == set(expect), "tensor names differ: "
          f"{sorted(set(merged) ^ set(expect))[:5]}")
    targets = {t + ".weight" for t, *_ in folds}
    worst = 0
    for name in sorted(set(merged) & set(expect)):
        got, want = merged[name], expect[name]
        check(got.shape == want.shape, f"{name}: shape {got.shape} vs {want.shape}")
        if got.shape != want.shape:
            continue
        if name not in targets:
            check(np.array_equal(got, want), f"{name}: untargeted tensor changed")
            continue
        check(not np.array_equal(got, base.get(name, branch.get(name))), f"{name}: not folded")
        # fp32 summation order may flip a rounding tie: allow 1 bf16 ulp on a few elements
        diff = got != want
        ulp = np.abs(got.view(np.int32).astype(np.int64) - want.view(np.int32).astype(np.int64))
        bad = diff & (ulp > (1 << 16))
        check(not bad.any(), f"{name}: {int(bad.sum())} elements off by more than 1 bf16 ulp")
        check(diff.mean() < 0.01, f"{name}: {diff.mean():.4f} of elements differ")
        worst = max(worst, float(diff.mean()))

    # native layout rules on the raw files (same seed, other layout)
    nat = os.path.join(tmp, "native")
    dif = os.path.join(tmp, "diffusers")
    for d, lay in ((nat, "native"), (dif, "diffusers")):
        subprocess.run([vdn, "ckpt", "init", "--preset", "tiny", "--seed", "9", "--layout", lay,
                        "--out", d], check=True, stdout=subprocess.DEVNULL)
    n, _ = read_st(os.path.join(nat, "transformer/model.safetensors"))
    f, _ = read_st(os.path.join(dif, "transformer/diffusion_pytorch_model.safetensors"))
    heads, hd = 2, 32
    for i in range(2):
        qkv = n[f"blocks.{i}.attn.qkv_proj.weight"].reshape(heads, 3, hd, hidden)
        for p, nm in enumerate(("to_q", "to_k", "to_v")):
            check(np.array_equal(qkv[:, p].reshape(heads * hd, hidden),
                                 f[f"transformer_blocks.{i}.attn.{nm}.weight"]),
                  f"block {i} {nm}: per-head interleave")
        gate, up = np.split(n[f"blocks.{i}.mlp.fc1.weight"], 2, axis=0)
        check(np.array_equal(np.concatenate([up, gate]),
                             f[f"transformer_blocks.{i}.ff.net.0.proj.weight"]), f"block {i} fc1")
    check(np.array_equal(n["final_layer.adaln_proj.linear.weight"], f["norm_out.linear.weight"]),
          "final adaLN")
    check(n["final_layer.video_out.weight"].dtype == np.float32, "fp32 head")
    check(len(n) == 55 and len(f) == 62, f"tensor counts {len(n)} / {len(f)}")

    print(f"{len(folds)} folds checked, worst tie fraction {worst:.5f}; "
          f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
