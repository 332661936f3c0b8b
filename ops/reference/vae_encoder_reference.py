#!/usr/bin/env python3
"""Expected values for the video VAE's keyframe encoder (engine/vae/video_encoder.c, ctest
vae_encoder_vs_official_reference) from the PUBLIC diffusers code.

Builds diffusers' AutoencoderKLMiniMaxH3 (src/diffusers/models/autoencoders/autoencoder_kl_minimax_h3.py)
from the config.json `vdn ckpt init --vae` wrote, loads its safetensors with strict=True, and encodes
seeded uint8 canvases with the pipeline's own function, encode_vae_condition
(src/diffusers/modular_pipelines/minimax_h3/encoders.py, executed by name; what the release's
src/inference/encode_keyframes.py calls), in float32 on the CPU, with diffusers'
DiagonalGaussianDistribution and randn_tensor (models/autoencoders/vae.py, utils/torch_utils.py, by
name). Per case it records the canvas, the posterior's parameters (the moments: mean then logvar,
before the clamp), the noise the posterior drew (generator seeded 42), the sampled latents (float32,
before the float16 rounding) and the normalised latents encode_vae_condition returns, plus the float64
encoder's moments (the reference's own float32 spread, in the metadata) and the ATen CPU capability
that drew the noise (which of torch's normal kernels ran: engine/core/torch_rng.h).

Runs on torch 1.13 (Debian's python3-torch, no safetensors package: ops/reference/st_numpy.py stands
in; nn.RMSNorm, which only the ViT decoder uses, gets a stand-in) and on torch 2.x.
usage: vae_encoder_reference.py --ref .ref --checkpoint CKPT_ROOT --out expected_vae_encoder.safetensors
       [--cases one,tiles]
"""
import argparse
import json
import os
import sys
import types

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_numpy  # noqa: E402

st_numpy.install()
from safetensors.torch import load_file, save_file  # noqa: E402

import official_reference as ofr  # noqa: E402  (the framework stand-ins)
import torch_randn_reference as trr  # noqa: E402  (capability())

# name: (canvas height, width); "one" is one tile, "tiles" 2 x 2 tiles of 256 px (overlaps widened
# to 224 and 192 px)
CASES = {"one": (64, 96), "tiles": (288, 320)}
PIX_MEAN, PIX_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)  # modular_pipeline.py pixel_mean/std


class _RMSNorm(nn.Module):  # torch < 2.4 (only the decoder builds one; never called here)
    def __init__(self, dim, eps=None, elementwise_affine=True):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim)) if elementwise_affine else None


def _defs_lazy_annotations(path, names, namespace):
    """ofr._defs_from for a file written under `from __future__ import annotations` (its
    annotations, such as list["torch.Generator"] | None, are not evaluated)"""
    import __future__
    import ast
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    keep = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    if len(keep) != len(names):
        raise SystemExit(f"{path}: definitions {names} not all found")
    code = compile(ast.Module(body=keep, type_ignores=[]), path, "exec",
                   flags=__future__.annotations.compiler_flag, dont_inherit=True)
    exec(code, namespace)


def install(src):
    p = lambda rel: os.path.join(src, rel)  # noqa: E731
    if not hasattr(nn, "RMSNorm"):
        nn.RMSNorm = _RMSNorm
    pkg = ofr._pkg
    pkg("diffusers")
    pkg("diffusers.configuration_utils", ConfigMixin=ofr._mixin("ConfigMixin"),
        register_to_config=ofr._noop_decorator, FrozenDict=dict)
    pkg("diffusers.utils", BaseOutput=object, logging=ofr._logging_module(),
        deprecate=lambda *a, **k: None)
    tu = {"torch": torch, "logger": ofr._logging_module().get_logger("randn_tensor")}
    _defs_lazy_annotations(p("utils/torch_utils.py"), ["randn_tensor"], tu)
    pkg("diffusers.utils.accelerate_utils", apply_forward_hook=ofr._noop_decorator)
    pkg("diffusers.utils.torch_utils", randn_tensor=tu["randn_tensor"],
        maybe_allow_in_graph=ofr._noop_decorator)
    pkg("diffusers.models")
    pkg("diffusers.models.attention_dispatch", dispatch_attention_fn=ofr._sdpa_dispatch)
    pkg("diffusers.models.modeling_outputs", AutoencoderKLOutput=ofr._Empty)
    pkg("diffusers.models.modeling_utils", ModelMixin=nn.Module,
        get_parameter_dtype=ofr._get_parameter_dtype)
    ns = {"torch": torch, "nn": nn, "F": F, "math": __import__("math")}
    ofr._defs_from(p("models/activations.py"), ["ACT2CLS", "get_activation", "SwiGLU"], ns)
    ns["deprecate"] = lambda *a, **k: None
    ofr._defs_from(p("models/attention.py"), ["FeedForward"], ns)
    pkg("diffusers.models.attention", AttentionMixin=ofr._mixin("AttentionMixin"),
        AttentionModuleMixin=ofr._AttentionModuleMixin, FeedForward=ns["FeedForward"])
    vae_ns = {"torch": torch, "np": np, "randn_tensor": tu["randn_tensor"]}
    ofr._defs_from(p("models/autoencoders/vae.py"), ["DiagonalGaussianDistribution"], vae_ns)
    pkg("diffusers.models.autoencoders")
    pkg("diffusers.models.autoencoders.vae", AutoencoderMixin=ofr._mixin("AutoencoderMixin"),
        DecoderOutput=ofr._Empty, DiagonalGaussianDistribution=vae_ns["DiagonalGaussianDistribution"])
    vm = ofr._load_file_as("diffusers.models.autoencoders.autoencoder_kl_minimax_h3",
                           p("models/autoencoders/autoencoder_kl_minimax_h3.py"))
    enc_ns = {"torch": torch}
    ofr._defs_from(p("modular_pipelines/minimax_h3/encoders.py"), ["encode_vae_condition"], enc_ns)
    return vm, enc_ns["encode_vae_condition"], vae_ns["DiagonalGaussianDistribution"]


def build(cls, folder):
    with open(os.path.join(folder, "config.json")) as f:
        cfg = {k: v for k, v in json.load(f).items() if not k.startswith("_")}
    model = cls(**cfg)
    model.config = types.SimpleNamespace(**cfg)  # register_to_config is a stand-in
    model.load_state_dict(load_file(os.path.join(folder, "diffusion_pytorch_model.safetensors")), strict=True)
    return model.eval(), cfg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ref", required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--cases", default=",".join(CASES), help="which of " + ", ".join(CASES))
    a = ap.parse_args()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    src = os.path.join(a.ref, "diffusers_src")
    vm, encode_vae_condition, DGD = install(src)
    meta = {"torch": torch.__version__, "seed": str(a.seed), "randn_capability": trr.capability()}
    meta["randn_path"] = trr.path_of(meta["randn_capability"])
    commit = os.path.join(src, "COMMIT")
    if os.path.exists(commit):
        meta["diffusers_commit"] = open(commit).read().strip()
    for f in ("config.json", "diffusion_pytorch_model.safetensors"):
        meta[f"sha256.vae/{f}"] = ofr.sha256_file(os.path.join(a.checkpoint, "vae", f))
    vae, cfg = build(vm.AutoencoderKLMiniMaxH3, os.path.join(a.checkpoint, "vae"))
    vae64, _ = build(vm.AutoencoderKLMiniMaxH3, os.path.join(a.checkpoint, "vae"))
    vae64 = vae64.double()
    meta["tile"] = json.dumps([vae.tile_sample_min_height, vae.tile_sample_min_width,
                               vae.tile_sample_min_overlap_height, vae.tile_sample_min_overlap_width])
    g = torch.Generator().manual_seed(a.seed)
    out = {}
    for name, (H, W) in CASES.items():
        if name not in a.cases.split(","):
            continue
        canvas = torch.randint(0, 256, (H, W, 3), generator=g, dtype=torch.int64).to(torch.uint8)
        pixels = canvas.permute(2, 0, 1)[None, :, None]
        mean = torch.tensor(PIX_MEAN).view(1, -1, 1, 1, 1)
        std = torch.tensor(PIX_STD).view(1, -1, 1, 1, 1)
        with torch.no_grad():
            x = (pixels.to(torch.float32).div(255.0) - mean) / std  # encode_vae_condition's line
            posterior = vae.encode(x, return_dict=False)[0]
            moments = posterior.parameters
            m64 = vae64.encode(x.double(), return_dict=False)[0].parameters
            noise = torch.randn(posterior.mean.shape, generator=torch.Generator().manual_seed(42),
                                dtype=torch.float32)
            sampled = posterior.sample(generator=torch.Generator().manual_seed(42))
            latents = encode_vae_condition(vae, pixels, PIX_MEAN, PIX_STD, 42)
        if not torch.equal(sampled, posterior.mean + posterior.std * noise):
            raise SystemExit(f"{name}: DiagonalGaussianDistribution.sample did not draw torch.randn(mean.shape)")
        out[f"{name}.canvas"] = canvas.contiguous()
        out[f"{name}.moments"] = moments[0, :, 0].contiguous()
        out[f"{name}.noise"] = noise[0, :, 0].contiguous()
        out[f"{name}.sampled"] = sampled[0, :, 0].contiguous()
        out[f"{name}.latents"] = latents[0, :, 0].contiguous()
        rel = ((m64 - moments.double()).norm() / m64.norm()).item()
        meta[f"{name}.f32_vs_f64.rel_rms"] = f"{rel:.3e}"
        meta[f"{name}.f32_vs_f64.max_abs"] = f"{(m64 - moments.double()).abs().max().item():.3e}"
        print(f"{name}: canvas {H}x{W} -> latents {tuple(latents.shape)}; moments f32 vs f64 "
              f"rel {rel:.2e}", flush=True)
    save_file(out, a.out, metadata=meta)
    print(json.dumps(meta, indent=1))


if __name__ == "__main__":
    main()
