#!/usr/bin/env python3
"""The PyTorch peer of `bench_vae` at the release's size, and the weights both use.

Builds diffusers' AutoencoderKLMiniMaxH3 and AutoencoderKLMiniMaxH3Audio with their default
(released) configs and torch's random init (scale1/scale2 set to 0.1 so the blocks do work),
writes them in the released layout (config.json + diffusion_pytorch_model.safetensors, float32)
to OUT_DIR/vae and OUT_DIR/audio_vae for `bench_vae` to load, and times the pipeline's decodes on
the GPU: video under float16 autocast over float32 weights (the official recipe), audio in
float32, the stereo channels as a batch of 2; CUDA-synchronised wall clock, one warm-up, REPS
timed. Prints one JSON line. usage: vae_bench.py --ref .ref --out DIR [--T 3 --h 16 --w 16 --La 40]
"""
import argparse
import json
import os
import sys
import time

import torch
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vae_reference as vr  # noqa: E402


def save(model, cfg, cls, folder):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"_class_name": cls, **cfg}, f)
    sd = {k: v.detach().float().contiguous() for k, v in model.state_dict().items()}
    save_file(sd, os.path.join(folder, "diffusion_pytorch_model.safetensors"))


def timed(fn, reps):
    fn()
    torch.cuda.synchronize()
    t = time.time()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    return (time.time() - t) / reps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ref", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--T", type=int, default=3)
    ap.add_argument("--h", type=int, default=16)
    ap.add_argument("--w", type=int, default=16)
    ap.add_argument("--La", type=int, default=40)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    vm, am = vr.install(os.path.join(a.ref, "diffusers_src"))
    torch.manual_seed(0)
    vcfg = {"latents_mean": [0.0] * 24, "latents_std": [1.0] * 24}
    vae = vm.AutoencoderKLMiniMaxH3(**vcfg)
    with torch.no_grad():
        for blk in vae.decoder.transformer_blocks:
            blk.scale1.fill_(0.1)
            blk.scale2.fill_(0.1)
    vae.config = vr.types.SimpleNamespace(clip_length=17, token_drop=3, **vcfg)
    t = time.time()
    save(vae, vcfg, "AutoencoderKLMiniMaxH3", os.path.join(a.out, "vae"))
    acfg = {"latents_mean": [0.0] * 32, "latents_std": [1.0] * 32}
    avae = am.AutoencoderKLMiniMaxH3Audio(**acfg)
    save(avae, acfg, "AutoencoderKLMiniMaxH3Audio", os.path.join(a.out, "audio_vae"))
    save_s = time.time() - t
    vae = vae.cuda().eval()
    avae = avae.cuda().eval()
    z = torch.randn(1, 24, a.T, a.h, a.w, device="cuda")
    za = torch.randn(2, 32, a.La, device="cuda")

    def video():
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.float16):
            return vae.decode(z, return_dict=False)[0]

    def audio():
        with torch.no_grad():
            return avae.decode(za, return_dict=False)[0]

    frames = video().shape
    tv, ta = timed(video, a.reps), timed(audio, a.reps)
    print(json.dumps({"peer": "diffusers (torch %s)" % torch.__version__, "gpu": torch.cuda.get_device_name(),
                      "latents": [24, a.T, a.h, a.w], "frames": list(frames), "audio_latents": a.La,
                      "video_s": round(tv, 4), "audio_s": round(ta, 4), "reps": a.reps,
                      "save_s": round(save_s, 1),
                      "decoder_params": sum(p.numel() for p in vae.decoder.parameters())}))


if __name__ == "__main__":
    main()
