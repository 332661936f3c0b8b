#!/usr/bin/env python3
"""Expected values of the text encoder's vision path (ctest text_vision_vs_transformers and
text_vision_cuda) from the public transformers Qwen3-VL model, loaded fresh from disk in the dtype
compared (float32, and bfloat16 for the CUDA test). Run on the GPU machine (torch, transformers,
Pillow; no internet); nothing of transformers is committed, only what it computed.

    python3 ops/reference/qwen3vl_vision_reference.py CKPT OUT.safetensors

CKPT: `vdn ckpt init --preset tiny --text-encoder --tokenizer-json TOKENIZER --out CKPT` (the tiny
Qwen3-VL with its vision tower in the release's layout, processor/preprocessor_config.json and
tokenizer/tokenizer.json). The test rebuilds CKPT from the same seed and checks the shards' SHA-256
recorded here (metadata ckpt_sha256).

OUT holds, as test_vision.c reads it:
  image_P (U8 [H, W, 3]), pixel_values_P (F32) and grid_P (I64 [3]): the image processor the
      release loads (AutoImageProcessor from processor/, as Qwen3VLProcessor.from_pretrained does)
      on each picture alone, given as a PIL image as the release gives keyframes;
  ids_K, tags_K (I64 [L]), position_ids_K (I64 [3, L]): the release's presentation of case K
      (diffusers MiniMaxH3FL2VATextEncoderStep / encode_keyframes.py build_presentation) and the
      model's multimodal positions (captured at the rotary embedding);
  hidden_K (F32 [L, hidden]) = hidden_states[layer] of Qwen3VLModel in float32 with the case's
      pixel_values, hidden_bf16_K the same in bfloat16 (widened), hidden1_K = hidden_states[1];
  resize_in / resize_out (I64 [m, 2]): smart_resize's (h, w) for a table of sizes (-1: refused);
  resized_image_0 / resized_pixel_values_0 / resized_grid_0: a picture the processor resizes,
      and resized_alt_pixel_values_0 from the other backend where this transformers has one
      (torchvision / PIL; metadata image_processor names them, the default first).
Metadata: cases (JSON: prompt, pictures), layer, versions, image_processor, ckpt_sha256.
"""
import hashlib
import inspect
import json
import os
import sys

import numpy as np
import torch
import transformers
from PIL import Image
from safetensors.torch import load_file, save_file

PROMPT = "A cat walks slowly across a wet rooftop at night, neon lights reflecting."
CASES = [{"prompt": PROMPT, "pictures": [0]}, {"prompt": PROMPT, "pictures": [0, 1]},
         {"prompt": "Line one\n两只猫 🐈", "pictures": [1, 0]}]
VIDEO_TAG, TEXT_TAG = 0, 1


def pictures():
    rng = np.random.default_rng(20261128)
    yy, xx = np.mgrid[0:256, 0:320]
    smooth = 127 + 100 * np.sin(yy / 17.0)[..., None] * np.cos(xx[..., None] / 23.0 + np.arange(3))
    return [rng.integers(0, 256, (256, 256, 3), dtype=np.uint8),
            np.clip(smooth + rng.normal(0, 20, smooth.shape), 0, 255).astype(np.uint8)]


def presentation(tok, prompt, grids, merge):
    """build_presentation of the release: label + vision block per picture, then the prompt."""
    ids, tags = [], []
    for i, g in enumerate(grids):
        label = tok(f"<Picture {i + 1}>: ", add_special_tokens=False)["input_ids"]
        n = int(np.prod(g)) // merge ** 2
        block = ([tok.convert_tokens_to_ids("<|vision_start|>")]
                 + [tok.convert_tokens_to_ids("<|image_pad|>")] * n
                 + [tok.convert_tokens_to_ids("<|vision_end|>")])
        ids += label + block
        tags += [TEXT_TAG] * len(label) + [VIDEO_TAG] * len(block)
    p = tok(prompt, add_special_tokens=False)["input_ids"]
    return ids + p, tags + [TEXT_TAG] * len(p)


def load_model(te, dtype):
    m = transformers.models.qwen3_vl.modeling_qwen3_vl
    cfg = transformers.AutoConfig.from_pretrained(te)
    for c in (cfg, cfg.text_config, cfg.vision_config):
        try:
            c._attn_implementation = "eager"
        except Exception as e:  # noqa: BLE001 - sdpa is as exact here; say so and go on
            print("attention implementation left as is:", repr(e)[:200])
    model = m.Qwen3VLModel(cfg).eval()
    index = json.load(open(os.path.join(te, "model.safetensors.index.json")))
    sd = {}
    for shard in sorted(set(index["weight_map"].values())):
        for k, v in load_file(os.path.join(te, shard)).items():
            assert k.startswith("model."), k
            sd[k[len("model."):]] = v
    missing, unexpected = model.load_state_dict(sd, strict=False)
    print("missing", missing, "unexpected", unexpected)
    assert not missing and not unexpected
    return model.to(dtype), cfg


def smart_resize_table(proc_cfg):
    try:
        from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize
    except ImportError:
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize
    size = proc_cfg["size"]
    factor = proc_cfg["patch_size"] * proc_cfg["merge_size"]
    sizes = [(256, 256), (256, 320), (768, 1344), (1344, 768), (250, 333), (300, 250), (100, 100),
             (20, 500), (31, 4000), (4096, 4096), (5000, 3000), (17, 17), (48, 80), (80, 48),
             (1080, 1920), (720, 1280), (16, 3000), (720, 720), (513, 1023)]
    out = []
    for h, w in sizes:
        try:
            out.append(smart_resize(h, w, factor=factor, min_pixels=size["shortest_edge"],
                                    max_pixels=size["longest_edge"]))
        except ValueError:
            out.append((-1, -1))
    return torch.tensor(sizes, dtype=torch.int64), torch.tensor(out, dtype=torch.int64)


def main():
    ckpt, out = sys.argv[1], sys.argv[2]
    te = os.path.join(ckpt, "text_encoder")
    proc_dir = os.path.join(ckpt, "processor")
    proc_cfg = json.load(open(os.path.join(proc_dir, "preprocessor_config.json")))
    try:  # what Qwen3VLProcessor.from_pretrained(processor/) loads
        image_processor = transformers.AutoImageProcessor.from_pretrained(proc_dir)
    except Exception as e:  # noqa: BLE001 - e.g. the fast class without torchvision
        print("AutoImageProcessor failed:", repr(e)[:300], "- trying use_fast=False")
        image_processor = transformers.AutoImageProcessor.from_pretrained(proc_dir, use_fast=False)
    print("image processor:", type(image_processor).__name__)
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_file=os.path.join(ckpt, "tokenizer", "tokenizer.json"))
    merge = proc_cfg["merge_size"]
    tensors = {}
    imgs = pictures()
    pix, grids = [], []
    for i, im in enumerate(imgs):
        v = image_processor(images=[Image.fromarray(im)], return_tensors="pt")
        pix.append(v["pixel_values"].float()), grids.append(v["image_grid_thw"][0].long())
        tensors[f"image_{i}"] = torch.from_numpy(im)
        tensors[f"pixel_values_{i}"] = pix[-1].contiguous()
        tensors[f"grid_{i}"] = grids[-1].contiguous()
        print(f"picture {i}: {im.shape}, grid {grids[-1].tolist()}, rows {tuple(pix[-1].shape)}")
    # a picture the processor resizes, with the default backend and (when there is one) PIL's
    odd = np.random.default_rng(5).integers(0, 256, (250, 333, 3), dtype=np.uint8)
    v = image_processor(images=[Image.fromarray(odd)], return_tensors="pt")
    tensors["resized_image_0"] = torch.from_numpy(odd)
    tensors["resized_pixel_values_0"] = v["pixel_values"].float().contiguous()
    tensors["resized_grid_0"] = v["image_grid_thw"][0].long().contiguous()
    backends = [f"{type(image_processor).__module__}.{type(image_processor).__name__}"]
    for how in ({"backend": "pil"}, {"use_fast": False}):
        try:
            other = transformers.AutoImageProcessor.from_pretrained(proc_dir, **how)
        except Exception as e:  # noqa: BLE001 - this transformers has no such option
            print("no processor with", how, repr(e)[:200])
            continue
        if type(other) is type(image_processor):
            continue
        vo = other(images=[Image.fromarray(odd)], return_tensors="pt")
        tensors["resized_alt_pixel_values_0"] = vo["pixel_values"].float().contiguous()
        backends.append(f"{type(other).__module__}.{type(other).__name__}")
        print(backends[-1], "max |default - it|", (vo["pixel_values"] - v["pixel_values"]).abs().max().item())
        break
    tensors["resize_in"], tensors["resize_out"] = smart_resize_table(proc_cfg)

    layer = None
    for dtype, key in ((torch.float32, "hidden"), (torch.bfloat16, "hidden_bf16")):
        model, cfg = load_model(te, dtype)
        layer = cfg.text_config.num_hidden_layers - 1  # the encoder's default for a small checkpoint
        captured = {}
        def grab(mod, args, kwargs, output):
            pos = args[1] if len(args) > 1 else kwargs["position_ids"]
            captured["pos"] = pos.detach().clone()

        hook = model.language_model.rotary_emb.register_forward_hook(grab, with_kwargs=True)
        fwd = inspect.signature(model.forward).parameters
        for k, case in enumerate(CASES):
            g = [grids[p] for p in case["pictures"]]
            ids, tags = presentation(tok, case["prompt"], [x.tolist() for x in g], merge)
            x = torch.tensor([ids], dtype=torch.long)
            kw = {"input_ids": x, "attention_mask": torch.ones_like(x), "use_cache": False,
                  "output_hidden_states": True}
            if "mm_token_type_ids" in fwd:
                kw["mm_token_type_ids"] = (x == cfg.image_token_id).long()
            if g:
                kw["pixel_values"] = torch.cat([pix[p] for p in case["pictures"]]).to(dtype)
                kw["image_grid_thw"] = torch.stack(g)
            with torch.no_grad():
                o = model(**kw)
            tensors[f"{key}_{k}"] = o.hidden_states[layer][0].float().contiguous()
            if dtype == torch.float32:
                tensors[f"ids_{k}"] = x[0].clone()
                tensors[f"tags_{k}"] = torch.tensor(tags, dtype=torch.int64)
                tensors[f"hidden1_{k}"] = o.hidden_states[1][0].float().contiguous()
                pos = captured["pos"]
                tensors[f"position_ids_{k}"] = pos.reshape(-1, pos.shape[-1])[-3:].long().contiguous()
            print(f"{key} case {k}: {len(ids)} rows, |h| mean {tensors[f'{key}_{k}'].abs().mean():.4f}")
        hook.remove()
        del model
    sha = {}
    for f in sorted(os.listdir(te)):
        if f.endswith(".safetensors"):
            sha[f] = hashlib.sha256(open(os.path.join(te, f), "rb").read()).hexdigest()
    meta = {"cases": json.dumps(CASES), "layer": str(layer), "transformers": transformers.__version__,
            "torch": torch.__version__, "image_processor": json.dumps(backends),
            "ckpt_sha256": json.dumps(sha)}
    save_file(tensors, out, metadata=meta)
    print("->", out, meta)


if __name__ == "__main__":
    main()
