#!/usr/bin/env python3
"""Expected hidden states of the tiny random Qwen3-VL text encoder (`vdn ckpt init --text-encoder`)
from the public transformers model, in float32 (run on the GPU machine, where transformers is
installed; nothing of transformers is committed, only what it computed).

    python3 make_expected_hidden.py CKPT OUT.safetensors

For each prompt k: ids_k (the public tokenizers' ids, I64 [L]) and hidden_k (F32 [L, hidden]) =
outputs.hidden_states[3] (the encoder's default layer for a 4-layer checkpoint), and for prompt 0
also hidden_states[1] (layer1_0) to test the layer choice. Prompts are in the file's metadata.
"""
import json
import os
import sys

import torch
import tokenizers
import transformers
from safetensors.torch import load_file, save_file
from transformers.models.qwen3_vl import modeling_qwen3_vl as m

PROMPTS = [
    "A cat walks slowly across a wet rooftop at night, neon lights reflecting in the puddles.",
    "一只猫在屋顶上奔跑，镜头缓慢推进。",
    "x",
    "Line one\nLine two\n\n  indented, with   spaces and numbers 1234567.",
    "<|im_start|>user\nA drone shot over mountains 🏔️ at sunset<|im_end|>",
    " ".join(["a slow cinematic dolly shot of waves crashing on black volcanic rocks"] * 12),
]

ckpt, out = sys.argv[1], sys.argv[2]
te = os.path.join(ckpt, "text_encoder")
cfg = json.load(open(os.path.join(te, "config.json")))
try:
    full = transformers.AutoConfig.from_pretrained(te)
    tcfg = full.text_config
    how = "AutoConfig(text_encoder).text_config"
except Exception as e:  # noqa: BLE001 - report and fall back to the text config alone
    print("AutoConfig failed:", repr(e)[:300])
    tcfg = m.Qwen3VLTextConfig(**cfg["text_config"])
    how = "Qwen3VLTextConfig(text_config)"
tcfg._attn_implementation = "eager"
print("config via", how, "| rope:", getattr(tcfg, "rope_parameters", None) or getattr(tcfg, "rope_scaling", None))
model = m.Qwen3VLTextModel(tcfg).eval().float()
index = json.load(open(os.path.join(te, "model.safetensors.index.json")))
sd = {}
for shard in sorted(set(index["weight_map"].values())):
    for k, v in load_file(os.path.join(te, shard)).items():
        if k.startswith("model.visual."):  # the vision tower: qwen3vl_vision_reference.py
            continue
        assert k.startswith("model.language_model."), k
        sd[k[len("model.language_model."):]] = v.float()
missing, unexpected = model.load_state_dict(sd, strict=False)
print("missing", missing, "unexpected", unexpected)
assert not missing and not unexpected
tok = tokenizers.Tokenizer.from_file(os.path.join(ckpt, "tokenizer", "tokenizer.json"))
tensors = {}
with torch.no_grad():
    for k, p in enumerate(PROMPTS):
        ids = tok.encode(p, add_special_tokens=False).ids
        x = torch.tensor([ids], dtype=torch.long)
        o = model(input_ids=x, output_hidden_states=True, use_cache=False)
        hs = o.hidden_states
        assert len(hs) == tcfg.num_hidden_layers + 1, len(hs)
        tensors[f"ids_{k}"] = x[0].clone()
        tensors[f"hidden_{k}"] = hs[3][0].float().contiguous()
        if k == 0:
            tensors["layer1_0"] = hs[1][0].float().contiguous()
            tensors["embed_0"] = hs[0][0].float().contiguous()
        print(k, len(ids), "ids, |h3| mean", hs[3].abs().mean().item())
save_file(tensors, out, metadata={"prompts": json.dumps(PROMPTS), "transformers": transformers.__version__,
                                  "torch": torch.__version__, "layer": "3"})
print("transformers", transformers.__version__, "torch", torch.__version__, "->", out)
