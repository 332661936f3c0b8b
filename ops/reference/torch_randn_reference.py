#!/usr/bin/env python3
"""torch.randn on the CPU, dumped for engine/core/torch_rng.c's test (ctest engine_torch_rng).

The keyframe recipe (diffusers modular_pipelines/minimax_h3/encoders.py, encode_vae_condition)
samples the VAE posterior with randn_tensor(mean.shape, generator=torch.Generator().manual_seed(42),
dtype=float32): a float32 CPU draw of 24 * (H/16) * (W/16) values, moved to the VAE's device after.
This script draws such tensors under each ATen CPU kernel (ATEN_CPU_CAPABILITY=default, avx2,
avx512, and whatever torch picks by itself), each in a child process, and writes one safetensors:

  <cap>.s<seed>_n<n>          float32 [n]  the draw, for the small sizes
  metadata sha256.<cap>.s<seed>_n<n>       sha256 of the float32 bytes, for the large sizes
  metadata capability.<cap>  the capability the child reported (a request the CPU cannot run falls
                             back); path.<cap>: "avx2" for AVX2 and AVX512 (normal_stub has no
                             AVX512 kernel: DistributionKernels.cpp's REGISTER_NO_AVX512_DISPATCH),
                             else "scalar"
  metadata torch             torch.__version__

usage: torch_randn_reference.py --out engine/test/reference/torch_randn_<version>.safetensors
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile

SMALL = [(42, 16), (42, 17), (42, 1000), (7, 40), (0, 33), (42, 1152), (123456789, 4096)]
LARGE = [(42, 24 * 48 * 84), (42, 24 * 48 * 80), (1, 24 * 16 * 16 + 8)]
CAPS = ["native", "default", "avx2", "avx512"]


def cpu_has(*flags):
    """whether /proc/cpuinfo lists every flag (ATen falls back quietly from a capability the CPU
    lacks but still reports the one asked for, so such a child would be mislabelled)"""
    try:
        with open("/proc/cpuinfo") as f:
            have = set(next(l for l in f if l.startswith("flags")).split(":", 1)[1].split())
    except (OSError, StopIteration):
        return False
    return all(x in have for x in flags)


def path_of(capability):
    """which Box-Muller torch's normal kernel runs under an ATen capability (torch_rng.h)"""
    return "avx2" if capability.upper() in ("AVX2", "AVX512") else "scalar"


def capability():
    import torch
    b = getattr(torch.backends, "cpu", None)
    if b is not None and hasattr(b, "get_cpu_capability"):
        return b.get_cpu_capability()
    for line in torch.__config__.show().splitlines():  # torch < 2.0
        if "CPU capability usage" in line:
            return line.split(":", 1)[1].strip()
    return "unknown"


def child(out):
    import torch
    res = {"capability": capability(), "torch": torch.__version__, "draws": {}}
    for seed, n in SMALL + LARGE:
        x = torch.randn(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float32)
        raw = x.numpy().tobytes()
        res["draws"][f"s{seed}_n{n}"] = raw.hex() if (seed, n) in SMALL else hashlib.sha256(raw).hexdigest()
    with open(out, "w") as f:
        json.dump(res, f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--child")
    a = ap.parse_args()
    if a.child:
        return child(a.child)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import numpy as np
    import torch
    import st_numpy
    st_numpy.install()
    from safetensors.torch import save_file
    tensors, meta = {}, {"torch": torch.__version__}
    with tempfile.TemporaryDirectory() as tmp:
        for cap in CAPS:
            if cap == "avx2" and not cpu_has("avx2", "fma") or \
                    cap == "avx512" and not cpu_has("avx512f", "avx512bw", "avx512vl", "avx512dq"):
                print(f"{cap}: this CPU cannot run that kernel; skipped", flush=True)
                continue
            env = dict(os.environ)
            env.pop("ATEN_CPU_CAPABILITY", None)
            if cap != "native":
                env["ATEN_CPU_CAPABILITY"] = cap
            path = os.path.join(tmp, cap + ".json")
            subprocess.run([sys.executable, os.path.abspath(__file__), "--child", path], env=env, check=True)
            with open(path) as f:
                res = json.load(f)
            got = res["capability"]
            meta[f"capability.{cap}"] = got
            meta[f"path.{cap}"] = path_of(got)
            for key, v in res["draws"].items():
                if len(v) == 64:
                    meta[f"sha256.{cap}.{key}"] = v
                else:
                    tensors[f"{cap}.{key}"] = torch.from_numpy(np.frombuffer(bytes.fromhex(v), dtype=np.float32).copy())
            print(f"{cap}: torch {res['torch']} ran the {got} kernel", flush=True)
    save_file(tensors, a.out, metadata=meta)
    print(json.dumps(meta, indent=1))


if __name__ == "__main__":
    main()
