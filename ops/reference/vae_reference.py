#!/usr/bin/env python3
"""Expected values for vae/test from the PUBLIC diffusers VAE code.

Builds diffusers' `AutoencoderKLMiniMaxH3` (src/diffusers/models/autoencoders/autoencoder_kl_minimax_h3.py)
and `AutoencoderKLMiniMaxH3Audio` (autoencoder_kl_minimax_h3_audio.py) from the config.json files
`vdn ckpt init --vae` wrote, loads their safetensors with strict=True (so every released tensor name and
shape is checked), and decodes seeded latents the way the diffusers pipeline's decode steps do
(modular_pipelines/minimax_h3/decoders.py: latents * latents_std + latents_mean; vae.decode; video *
ImageNet std + mean, clamp to [0, 1]; audio decoded per stereo channel as a batch of 2), in float32 on
the CPU (TF32 off). Also records intermediate activations of the first tile / first channel (forward
hooks) so a disagreement can be located without another run, the float32-vs-float64 spread of the
audio decoder, the float16-autocast GPU decode of one clip against float32 (the official recipe), and
the difference between the filter buffers in the file and those the module computes itself.

The diffusers files are NOT part of vdn (see docs/reference-check.md); this script only provides the
framework stand-ins of ops/reference/official_reference.py.
usage: vae_reference.py --ref .ref --checkpoint CKPT_ROOT --out expected.safetensors
"""
import argparse
import json
import os
import sys
import time
import traceback
import types

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import official_reference as ofr  # noqa: E402  (the stand-ins, shared with the DiT check)


def _weight_norm_shim():
    """torch.nn.utils.weight_norm (the weight_g/weight_v spelling) if this torch lacks it."""
    if hasattr(torch.nn.utils, "weight_norm"):
        return

    def weight_norm(module, name="weight", dim=0):
        w = getattr(module, name)
        del module._parameters[name]
        g = torch.linalg.vector_norm(w.detach(), dim=[d for d in range(w.ndim) if d != dim], keepdim=True)
        module.register_parameter(name + "_g", nn.Parameter(g))
        module.register_parameter(name + "_v", nn.Parameter(w.detach().clone()))

        def hook(mod, _inp):
            v = getattr(mod, name + "_v")
            gg = getattr(mod, name + "_g")
            nrm = torch.linalg.vector_norm(v, dim=[d for d in range(v.ndim) if d != dim], keepdim=True)
            setattr(mod, name, v * (gg / nrm))

        hook(module, None)
        module.register_forward_pre_hook(hook)
        return module

    torch.nn.utils.weight_norm = weight_norm


def install(src):
    p = lambda rel: os.path.join(src, rel)  # noqa: E731
    _weight_norm_shim()
    pkg = ofr._pkg
    pkg("diffusers")
    pkg("diffusers.configuration_utils", ConfigMixin=ofr._mixin("ConfigMixin"),
        register_to_config=ofr._noop_decorator, FrozenDict=dict)
    pkg("diffusers.utils", BaseOutput=object, logging=ofr._logging_module(),
        deprecate=lambda *a, **k: None)
    pkg("diffusers.utils.accelerate_utils", apply_forward_hook=ofr._noop_decorator)
    pkg("diffusers.utils.torch_utils", randn_tensor=None, maybe_allow_in_graph=ofr._noop_decorator)
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
    pkg("diffusers.models.autoencoders")
    pkg("diffusers.models.autoencoders.vae", AutoencoderMixin=ofr._mixin("AutoencoderMixin"),
        DecoderOutput=ofr._Empty, DiagonalGaussianDistribution=ofr._Empty)
    vm = ofr._load_file_as("diffusers.models.autoencoders.autoencoder_kl_minimax_h3",
                           p("models/autoencoders/autoencoder_kl_minimax_h3.py"))
    am = ofr._load_file_as("diffusers.models.autoencoders.autoencoder_kl_minimax_h3_audio",
                           p("models/autoencoders/autoencoder_kl_minimax_h3_audio.py"))
    return vm, am


def build(cls, folder):
    with open(os.path.join(folder, "config.json")) as f:
        cfg = {k: v for k, v in json.load(f).items() if not k.startswith("_")}
    model = cls(**cfg)
    model.config = types.SimpleNamespace(**cfg)  # register_to_config is a stand-in
    own = {k: v.clone() for k, v in model.state_dict().items() if k.endswith(".filter")}
    sd = load_file(os.path.join(folder, "diffusion_pytorch_model.safetensors"))
    missing, unexpected = model.load_state_dict(sd, strict=False)
    if missing or unexpected:
        raise SystemExit(f"{folder}: state dict mismatch: missing {missing[:8]} unexpected {unexpected[:8]}")
    model.load_state_dict(sd, strict=True)
    filt = max([(own[k] - sd[k]).abs().max().item() for k in own] or [0.0])
    return model.eval(), cfg, filt


def pool4(x):  # (3, T, H, W) -> 4x4 means
    return F.avg_pool2d(x, 4)


PIX_MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, -1, 1, 1, 1)
PIX_STD = torch.tensor([0.229, 0.224, 0.225]).view(1, -1, 1, 1, 1)

# name: (latent frames, latent height, latent width, full-resolution frames to store (None: all))
VIDEO_CASES = {
    "small": (3, 2, 3, None),       # one chunk, one tile, padded tail
    "long": (13, 2, 3, None),       # three chunks: two cross-fades
    "tiles": (8, 4, 20, [0, 12, 19, 25]),  # two chunks x two horizontal tiles (256 px, overlap 240)
    "grid": (3, 17, 17, [4]),       # 2 x 2 tiles
}
AUDIO_CASES = {"short": 5, "long": 24}


def decode_video(vae, cfg, z):
    mean = torch.tensor(cfg["latents_mean"], device=z.device).view(1, -1, 1, 1, 1)
    std = torch.tensor(cfg["latents_std"], device=z.device).view(1, -1, 1, 1, 1)
    latents = z[None] * std + mean
    video = vae.decode(latents, return_dict=False)[0]
    return (video.float() * PIX_STD.to(video.device) + PIX_MEAN.to(video.device)).clamp(0, 1)[0]


def decode_audio(avae, cfg, z, dtype=torch.float32):
    mean = torch.tensor(cfg["latents_mean"], dtype=dtype).view(1, -1, 1)
    std = torch.tensor(cfg["latents_std"], dtype=dtype).view(1, -1, 1)
    return avae.decode(z.to(dtype) * std + mean, return_dict=False)[0][:, 0]  # (2, samples)


def hooks(model, names, store, prefix):
    """Record the output of each named module on its first call."""
    handles = []
    for n in names:
        mod = model.get_submodule(n)

        def h(_m, _i, out, n=n):
            key = f"{prefix}.{n}"
            if key not in store:
                store[key] = out.detach().float().contiguous().clone()
        handles.append(mod.register_forward_hook(h))
    return handles


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ref", required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=5)
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    vm, am = install(os.path.join(a.ref, "diffusers_src"))
    out, meta = {}, {"torch": torch.__version__, "seed": str(a.seed)}
    commit = os.path.join(a.ref, "diffusers_src", "COMMIT")
    if os.path.exists(commit):
        meta["diffusers_commit"] = open(commit).read().strip()
    for sub in ("vae", "audio_vae"):
        for f in ("config.json", "diffusion_pytorch_model.safetensors"):
            meta[f"sha256.{sub}/{f}"] = ofr.sha256_file(os.path.join(a.checkpoint, sub, f))
    errors = []
    g = torch.Generator().manual_seed(a.seed)

    vae, vcfg, _ = build(vm.AutoencoderKLMiniMaxH3, os.path.join(a.checkpoint, "vae"))
    meta["video.tokens_chunk_size"] = str(vae.tokens_chunk_size)
    meta["video.frame_overlap"] = str(vae.frame_overlap)
    for name, (T, h, w, keep) in VIDEO_CASES.items():
        z = torch.randn(vcfg["latent_channels"], T, h, w, generator=g)
        out[f"video.{name}.latents"] = z.clone()
        try:
            t0 = time.time()
            handles = []
            if name == "small":
                handles = hooks(vae, ["post_quant_conv", "decoder.proj_in", "decoder.transformer_blocks.0",
                                      "decoder.transformer_blocks.1", "decoder.norm_out", "decoder"],
                                out, "video.small.first_tile")
            with torch.no_grad():
                frames = decode_video(vae, vcfg, z)
            for hd in handles:
                hd.remove()
            meta[f"video.{name}.shape"] = json.dumps(list(frames.shape))
            meta[f"video.{name}.seconds"] = f"{time.time() - t0:.2f}"
            if keep is None:
                out[f"video.{name}.frames"] = frames.contiguous()
            else:
                out[f"video.{name}.frames_pool4"] = pool4(frames).contiguous()
                out[f"video.{name}.frames_at"] = frames[:, keep].contiguous()
                meta[f"video.{name}.frames_at"] = json.dumps(keep)
            print(f"video {name}: latents {tuple(z.shape)} -> frames {tuple(frames.shape)} "
                  f"in {time.time() - t0:.1f} s", flush=True)
        except Exception:
            errors.append(f"video {name}: {traceback.format_exc()}")
            print(errors[-1], flush=True)
    # the official GPU recipe: float16 autocast over float32 weights, on the tiles clip
    if torch.cuda.is_available():
        try:
            vae_gpu = vae.to("cuda")
            z = out["video.tiles.latents"].to("cuda")
            with torch.no_grad(), torch.autocast("cuda", dtype=torch.float16):
                fr16 = decode_video(vae_gpu, vcfg, z).float().cpu()
            keep = VIDEO_CASES["tiles"][3]
            d = (fr16[:, keep] - out["video.tiles.frames_at"]).abs()
            meta["video.tiles.fp16_autocast_vs_fp32.max_abs"] = f"{d.max().item():.3e}"
            meta["video.tiles.fp16_autocast_vs_fp32.mean_abs"] = f"{d.mean().item():.3e}"
            vae.to("cpu")
        except Exception:
            errors.append(f"video fp16: {traceback.format_exc()}")
            print(errors[-1], flush=True)

    avae, acfg, filt = build(am.AutoencoderKLMiniMaxH3Audio, os.path.join(a.checkpoint, "audio_vae"))
    meta["audio.filter_file_vs_module.max_abs"] = f"{filt:.3e}"
    for name, La in AUDIO_CASES.items():
        z = torch.randn(2, acfg["latent_channels"], La, generator=g)
        out[f"audio.{name}.latents"] = z.clone()
        try:
            handles = []
            if name == "short":
                handles = hooks(avae, ["dec_in_proj", "decoder.conv_pre", "decoder.ups.0.0",
                                       "decoder.resblocks.0.activations.0", "decoder.resblocks.0",
                                       "decoder.resblocks.2", "decoder.ups.1.0", "decoder.activation_post"],
                                out, "audio.short.first")
            with torch.no_grad():
                wav = decode_audio(avae, acfg, z)
            for hd in handles:
                hd.remove()
            out[f"audio.{name}.wave"] = wav.contiguous()
            with torch.no_grad():
                w64 = decode_audio(avae.double(), acfg, z, torch.float64)
            avae.float()
            meta[f"audio.{name}.f32_vs_f64.max_abs"] = f"{(w64 - wav.double()).abs().max().item():.3e}"
            print(f"audio {name}: latents {tuple(z.shape)} -> {tuple(wav.shape)}; f32 vs f64 "
                  f"{meta[f'audio.{name}.f32_vs_f64.max_abs']}", flush=True)
        except Exception:
            errors.append(f"audio {name}: {traceback.format_exc()}")
            print(errors[-1], flush=True)
    meta["errors"] = json.dumps(errors)
    save_file({k: v.float().contiguous() for k, v in out.items()}, a.out, metadata=meta)
    print(json.dumps(meta, indent=1))
    print(f"wrote {len(out)} tensors to {a.out}; {len(errors)} error(s)")


if __name__ == "__main__":
    main()
