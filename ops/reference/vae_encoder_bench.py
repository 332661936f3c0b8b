#!/usr/bin/env python3
"""The PyTorch peer of the keyframe encoder at the release's size, and the weights both use.

Builds diffusers' AutoencoderKLMiniMaxH3 with its default (released) config and torch's random init,
writes it in the released layout (config.json + diffusion_pytorch_model.safetensors, float32) to
OUT_DIR/vae for vdn to load (engine/vae/video_encoder.h), and times the release's keyframe encode on
the GPU: encode_vae_condition (modular_pipelines/minimax_h3/encoders.py, by name) on KEYFRAMES
uint8 canvases of HEIGHT x WIDTH (an FL2VA request: 2 keyframes on the 768 x 1344 canvas), the
float32 VAE with torch's default cuDNN settings (TF32 convolutions), as encode_keyframes.py runs
it. CUDA-synchronised wall clock, one warm-up, REPS timed. Prints one JSON line.
usage: vae_encoder_bench.py --ref .ref --out DIR [--keyframes 2 --height 768 --width 1344 --reps 3]
"""
import argparse
import inspect
import json
import os
import sys
import time
import types

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vae_encoder_reference as ver  # noqa: E402  (stand-ins; installs st_numpy where needed)
from safetensors.torch import save_file  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ref", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--keyframes", type=int, default=2)
    ap.add_argument("--height", type=int, default=768)
    ap.add_argument("--width", type=int, default=1344)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    vm, encode_vae_condition, _ = ver.install(os.path.join(a.ref, "diffusers_src"))
    torch.manual_seed(0)
    cfg = {"latents_mean": [0.0] * 24, "latents_std": [1.0] * 24}
    vae = vm.AutoencoderKLMiniMaxH3(**cfg).eval()
    folder = os.path.join(a.out, "vae")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"_class_name": "AutoencoderKLMiniMaxH3", **cfg}, f)
    save_file({k: v.detach().float().contiguous() for k, v in vae.state_dict().items()},
              os.path.join(folder, "diffusion_pytorch_model.safetensors"))
    # register_to_config is a stand-in: the config is the constructor's defaults (the released
    # config: clip_length, token_drop, tiling...) with cfg over them
    defaults = {k: p.default for k, p in inspect.signature(vm.AutoencoderKLMiniMaxH3.__init__).parameters.items()
                if p.default is not inspect.Parameter.empty}
    vae.config = types.SimpleNamespace(**{**defaults, **cfg})
    vae = vae.to("cuda")
    g = torch.Generator().manual_seed(1)
    frames = [torch.randint(0, 256, (a.height, a.width, 3), generator=g, dtype=torch.int64)
              .to(torch.uint8).to("cuda").permute(2, 0, 1)[None, :, None] for _ in range(a.keyframes)]

    def encode():
        with torch.no_grad():
            return [encode_vae_condition(vae, f, ver.PIX_MEAN, ver.PIX_STD, 42) for f in frames]

    encode()
    torch.cuda.synchronize()
    t = time.time()
    for _ in range(a.reps):
        encode()
    torch.cuda.synchronize()
    secs = (time.time() - t) / a.reps
    print(json.dumps({"peer": "diffusers encode_vae_condition", "torch": torch.__version__,
                      "gpu": torch.cuda.get_device_name(),
                      "keyframes": a.keyframes, "height": a.height, "width": a.width,
                      "reps": a.reps, "seconds": secs,
                      "peak_bytes": torch.cuda.max_memory_allocated()}))


if __name__ == "__main__":
    main()
