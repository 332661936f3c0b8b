#!/usr/bin/env python3
"""The PyTorch peer of `vdn bench text-encoder --pictures N`: the public transformers Qwen3-VL model
(vision tower + text model) with Qwen3-VL-32B's shapes, random bf16 weights on the GPU, encoding the
release's keyframe presentation of N 768 x 1344 pictures (a 4-token label, <|vision_start|>, 1008
<|image_pad|>, <|vision_end|> each; grid 1 x 48 x 84) and TOKENS prompt tokens up to
hidden_states[LAYER] (the text model truncated to LAYER layers, the work the conditioning needs), the
same ids and input sizes as bench_text.c's make_input. Timed from pixel_values on the GPU, as ours is
timed from pixel rows in host memory (the image processor's patching is not timed on either side).

    python3 peer_text_pictures.py [PICTURES=2] [TOKENS=500] [LAYER=50] [REPS=5]
"""
import json
import sys
import time

import torch
import transformers
from transformers.models.qwen3_vl import modeling_qwen3_vl as m
from transformers.models.qwen3_vl import configuration_qwen3_vl as cm

pictures = int(sys.argv[1]) if len(sys.argv) > 1 else 2
tokens = int(sys.argv[2]) if len(sys.argv) > 2 else 500
layer = int(sys.argv[3]) if len(sys.argv) > 3 else 50
reps = int(sys.argv[4]) if len(sys.argv) > 4 else 5
IMAGE, START, END = 151655, 151652, 151653
GH, GW = 48, 84


def config(layers):
    text = dict(vocab_size=151936, hidden_size=5120, intermediate_size=25600, num_hidden_layers=layers,
                num_attention_heads=64, num_key_value_heads=8, head_dim=128, rms_norm_eps=1e-6,
                max_position_embeddings=262144,
                rope_scaling={"rope_type": "default", "mrope_section": [24, 20, 20], "mrope_interleaved": True,
                              "rope_theta": 5000000.0})
    vision = dict(depth=27, hidden_size=1152, intermediate_size=4304, num_heads=16, in_channels=3, patch_size=16,
                  spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=5120, num_position_embeddings=2304,
                  deepstack_visual_indexes=[8, 16, 24], hidden_act="gelu_pytorch_tanh")
    c = cm.Qwen3VLConfig(text_config=text, vision_config=vision, image_token_id=IMAGE, vision_start_token_id=START,
                         vision_end_token_id=END)
    c._attn_implementation = "sdpa"
    c.text_config._attn_implementation = "sdpa"
    c.vision_config._attn_implementation = "sdpa"
    return c


def inputs():
    ids = []
    per = GH * GW // 4
    for p in range(pictures):
        ids += [27 + 100 * p + k for k in range(4)] + [START] + [IMAGE] * per + [END]
    ids += [(i * 7919) % 151000 for i in range(tokens)]
    n = pictures * GH * GW
    i = torch.arange(n * 1536, dtype=torch.float64)
    px = ((i * 2654435761) % 1000003) / 500001.5 - 1.0
    return (torch.tensor([ids], device="cuda"), px.reshape(n, 1536).to("cuda", torch.bfloat16),
            torch.tensor([[1, GH, GW]] * pictures, device="cuda"))


def main():
    torch.manual_seed(0)
    with torch.device("cuda"):
        torch.set_default_dtype(torch.bfloat16)
        model = m.Qwen3VLModel(config(layer)).eval()
        torch.set_default_dtype(torch.float32)
    ids, px, grid = inputs()
    mm = (ids == IMAGE).long()  # what the processor returns beside input_ids: 1 image, 0 text
    sec = []
    with torch.no_grad():
        for r in range(2 + reps):
            torch.cuda.synchronize()
            t = time.perf_counter()
            o = model(input_ids=ids, pixel_values=px, image_grid_thw=grid, mm_token_type_ids=mm,
                      output_hidden_states=True, use_cache=False)
            h = o.hidden_states[layer].float().cpu()  # as our run copies it back
            torch.cuda.synchronize()
            if r >= 2:
                sec.append(time.perf_counter() - t)
    sec.sort()
    res = {"torch": torch.__version__, "transformers": transformers.__version__,
           "gpu": torch.cuda.get_device_name(), "pictures": pictures, "tokens": tokens, "rows": ids.shape[1],
           "layer": layer, "median_ms": 1e3 * sec[len(sec) // 2], "best_ms": 1e3 * sec[0], "reps": reps,
           "finite": bool(torch.isfinite(h).all()), "peak_bytes": torch.cuda.max_memory_allocated()}
    print("transformers Qwen3-VL, %d pictures + %d tokens (%d rows) -> hidden_states[%d]: median %.1f ms, "
          "best %.1f ms, peak %.1f GB" % (pictures, tokens, res["rows"], layer, res["median_ms"], res["best_ms"],
                                          res["peak_bytes"] / 1e9), flush=True)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
