#!/usr/bin/env python3
"""The PyTorch peer of `vdn bench text-encoder`: the public transformers Qwen3-VL text model with
the Qwen3-VL-32B text shapes, random bf16 weights on the GPU, encoding one prompt of TOKENS ids
up to hidden_states[LAYER] (the model truncated to LAYER decoder layers, the work the conditioning
needs; the full 64-layer model is timed too). Run in the same session as ours (docs/PERF.md).

    python3 peer_text_encoder.py [TOKENS=512] [LAYER=50] [REPS=5]
"""
import json
import sys
import time

import torch
import transformers
from transformers.models.qwen3_vl import modeling_qwen3_vl as m

tokens = int(sys.argv[1]) if len(sys.argv) > 1 else 512
layer = int(sys.argv[2]) if len(sys.argv) > 2 else 50
reps = int(sys.argv[3]) if len(sys.argv) > 3 else 5


def config(layers, attn):
    c = m.Qwen3VLTextConfig(vocab_size=151936, hidden_size=5120, intermediate_size=25600,
                            num_hidden_layers=layers, num_attention_heads=64,
                            num_key_value_heads=8, head_dim=128, rms_norm_eps=1e-6,
                            max_position_embeddings=262144,
                            rope_scaling={"rope_type": "default", "mrope_section": [24, 20, 20],
                                          "mrope_interleaved": True, "rope_theta": 5000000.0})
    c._attn_implementation = attn
    return c


def bench(layers, attn):
    torch.manual_seed(0)
    with torch.device("cuda"):
        torch.set_default_dtype(torch.bfloat16)
        model = m.Qwen3VLTextModel(config(layers, attn)).eval()
        torch.set_default_dtype(torch.float32)
    ids = (torch.arange(tokens, device="cuda") * 7919) % 151000
    ids = ids[None]
    out = {}
    with torch.no_grad():
        for _ in range(2):
            model(input_ids=ids, output_hidden_states=True, use_cache=False)
        torch.cuda.synchronize()
        sec = []
        for _ in range(reps):
            t = time.perf_counter()
            o = model(input_ids=ids, output_hidden_states=True, use_cache=False)
            h = o.hidden_states[min(layer, layers)].float().cpu()  # as our run copies it back
            torch.cuda.synchronize()
            sec.append(time.perf_counter() - t)
    sec.sort()
    out = {"layers": layers, "attn": attn, "median_ms": 1e3 * sec[len(sec) // 2],
           "best_ms": 1e3 * sec[0], "finite": bool(torch.isfinite(h).all()),
           "peak_bytes": torch.cuda.max_memory_allocated()}
    del model
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    return out


res = {"torch": torch.__version__, "transformers": transformers.__version__,
       "gpu": torch.cuda.get_device_name(), "tokens": tokens, "runs": []}
for layers, attn in ((layer, "sdpa"), (64, "sdpa")):
    r = bench(layers, attn)
    res["runs"].append(r)
    print("transformers Qwen3-VL text, %d layers (%s), %d tokens: median %.1f ms, best %.1f ms, "
          "peak %.1f GB" % (layers, attn, tokens, r["median_ms"], r["best_ms"], r["peak_bytes"] / 1e9),
          flush=True)
print(json.dumps(res))
