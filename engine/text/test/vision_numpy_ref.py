#!/usr/bin/env python3
"""The text encoder with pictures in, against an independent float64 numpy model of Qwen3-VL's
vision path (written from transformers' Qwen3VLVisionModel / Qwen3VLModel and the image processor,
not from our C): the processor's pixel rows, the presentation's vision blocks and tags, and
hidden_states[layer] with one and two pictures in (and none).

    vision_numpy_ref.py VDN TEST_VISION TOKENIZER_JSON WORKDIR [BACKEND TOL]

BACKEND cuda: the same on the GPU (bf16 weights and activations) within TOL of max |h| (exit 77
without a GPU).

Makes the tiny checkpoint with `vdn ckpt init --preset tiny --text-encoder`, two pictures, runs
`test_vision dump` (our CPU backend, float32) and compares. Tokenization is the tokenizer's own
test's business: here the label and prompt ids are taken from our output and only their layout is
checked (the same prompt's ids end every case; the same label starts every picture case).
"""
import json
import math
import os
import shutil
import struct
import subprocess
import sys

import numpy as np

VISION_START, IMAGE_PAD, VISION_END = 151652, 151655, 151653
TOL = 1e-4


def read_st(path):
    """{name: np.ndarray} of a safetensors file (F32, BF16 widened to float32, I32, I64, U8)."""
    raw = open(path, "rb").read()
    (hl,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + hl])
    base, out = 8 + hl, {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        buf = raw[base + a:base + b]
        if t["dtype"] == "BF16":
            v = (np.frombuffer(buf, np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            v = np.frombuffer(buf, {"F32": np.float32, "I32": np.int32, "I64": np.int64,
                                    "U8": np.uint8}[t["dtype"]])
        out[name] = v.reshape(t["shape"])
    return out, header.get("__metadata__", {})


def write_st(path, tensors, meta):
    header, blobs, off = {"__metadata__": meta}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": {np.uint8: "U8"}[a.dtype.type], "shape": list(a.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def load_weights(te):
    index = json.load(open(os.path.join(te, "model.safetensors.index.json")))
    w = {}
    for shard in sorted(set(index["weight_map"].values())):
        w.update({k: v.astype(np.float64) for k, v in read_st(os.path.join(te, shard))[0].items()})
    return w


# ---- the processor (transformers' Qwen2VLImageProcessor, PIL backend) ----

def smart_resize(h, w, factor=32, lo=65536, hi=16777216):
    hb, wb = round(h / factor) * factor, round(w / factor) * factor
    if hb * wb > hi:
        beta = math.sqrt(h * w / hi)
        hb, wb = max(factor, math.floor(h / beta / factor) * factor), max(factor, math.floor(w / beta / factor) * factor)
    elif hb * wb < lo:
        beta = math.sqrt(lo / (h * w))
        hb, wb = math.ceil(h * beta / factor) * factor, math.ceil(w * beta / factor) * factor
    return hb, wb


def processor(img, proc):
    patch, tp, merge = proc["patch_size"], proc["temporal_patch_size"], proc["merge_size"]
    h, w = smart_resize(*img.shape[:2], factor=patch * merge, lo=proc["size"]["shortest_edge"],
                        hi=proc["size"]["longest_edge"])
    if (h, w) != img.shape[:2]:
        from PIL import Image
        img = np.asarray(Image.fromarray(img).resize((w, h), Image.Resampling.BICUBIC))
    mean, std = np.array(proc["image_mean"]), np.array(proc["image_std"])
    x = (img.astype(np.float64) / 255.0 - mean) / std          # [H, W, 3]
    x = x.transpose(2, 0, 1)[None].repeat(tp, axis=0)          # [tp, 3, H, W]
    gh, gw = x.shape[2] // patch, x.shape[3] // patch
    x = x.reshape(1, tp, 3, gh // merge, merge, patch, gw // merge, merge, patch)
    x = x.transpose(0, 3, 6, 4, 7, 2, 1, 5, 8)
    return x.reshape(gh * gw, 3 * tp * patch * patch), (1, gh, gw)


# ---- the vision tower ----

def layernorm(x, w, b, eps=1e-6):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * w + b


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


try:
    from scipy.special import erf
except ImportError:  # numpy alone: the standard library's, one value at a time
    erf = np.vectorize(math.erf)


def gelu(x):
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], -1)


def vision_tower(W, vc, pixels, grid):
    H, heads, m = vc["hidden_size"], vc["num_heads"], vc["spatial_merge_size"]
    hd = H // heads
    P = "model.visual."
    x = pixels @ W[P + "patch_embed.proj.weight"].reshape(H, -1).T + W[P + "patch_embed.proj.bias"]
    t, gh, gw = grid
    # position table: bilinear on linspace over the side x side grid, then into merge order
    side = int(round(math.sqrt(vc["num_position_embeddings"])))
    table = W[P + "pos_embed.weight"].reshape(side, side, H)
    ys, xs = np.linspace(0, side - 1, gh), np.linspace(0, side - 1, gw)
    pe = np.zeros((gh, gw, H))
    for i, fy in enumerate(ys):
        for j, fx in enumerate(xs):
            y0, x0 = int(fy), int(fx)
            y1, x1 = min(y0 + 1, side - 1), min(x0 + 1, side - 1)
            dy, dx = fy - y0, fx - x0
            pe[i, j] = ((1 - dy) * (1 - dx) * table[y0, x0] + (1 - dy) * dx * table[y0, x1]
                        + dy * (1 - dx) * table[y1, x0] + dy * dx * table[y1, x1])
    order = lambda a: a.reshape(gh // m, m, gw // m, m, -1).transpose(0, 2, 1, 3, 4).reshape(gh * gw, -1)
    x = x + order(pe)
    # 2-D rope: (row, column) of every patch in merge order
    rows = order(np.repeat(np.arange(gh)[:, None], gw, 1)[..., None].astype(np.float64))[:, 0]
    cols = order(np.repeat(np.arange(gw)[None, :], gh, 0)[..., None].astype(np.float64))[:, 0]
    dim = hd // 2
    inv = 1.0 / 10000 ** (np.arange(0, dim, 2) / dim)
    theta = np.concatenate([np.outer(rows, inv), np.outer(cols, inv)], -1)
    emb = np.concatenate([theta, theta], -1)
    cos, sin = np.cos(emb)[:, None, :], np.sin(emb)[:, None, :]
    ds_feats = []
    for b in range(vc["depth"]):
        B = f"{P}blocks.{b}."
        h = layernorm(x, W[B + "norm1.weight"], W[B + "norm1.bias"])
        qkv = (h @ W[B + "attn.qkv.weight"].T + W[B + "attn.qkv.bias"]).reshape(-1, 3, heads, hd)
        q, k, v = qkv[:, 0], qkv[:, 1], qkv[:, 2]
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        s = np.einsum("qhd,khd->hqk", q, k) / math.sqrt(hd)
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        o = np.einsum("hqk,khd->qhd", s, v).reshape(-1, H)
        x = x + o @ W[B + "attn.proj.weight"].T + W[B + "attn.proj.bias"]
        h = layernorm(x, W[B + "norm2.weight"], W[B + "norm2.bias"])
        h = gelu_tanh(h @ W[B + "mlp.linear_fc1.weight"].T + W[B + "mlp.linear_fc1.bias"])
        x = x + h @ W[B + "mlp.linear_fc2.weight"].T + W[B + "mlp.linear_fc2.bias"]
        if b in vc["deepstack_visual_indexes"]:
            j = vc["deepstack_visual_indexes"].index(b)
            ds_feats.append(merger(W, f"{P}deepstack_merger_list.{j}.", x, m, True))
    return merger(W, P + "merger.", x, m, False), ds_feats


def merger(W, M, x, m, post_shuffle):
    rows = x.reshape(-1, x.shape[-1] * m * m)
    if post_shuffle:
        h = layernorm(rows, W[M + "norm.weight"], W[M + "norm.bias"])
    else:
        h = layernorm(x, W[M + "norm.weight"], W[M + "norm.bias"]).reshape(rows.shape)
    h = gelu(h @ W[M + "linear_fc1.weight"].T + W[M + "linear_fc1.bias"])
    return h @ W[M + "linear_fc2.weight"].T + W[M + "linear_fc2.bias"]


# ---- the text decoder with pictures ----

def rope_index(ids, grids, m):
    """Qwen3-VL's get_rope_index for images: (3, L) positions."""
    pos, st, nxt = np.zeros((3, len(ids))), 0, 0
    for g in grids:
        ed = ids.index(IMAGE_PAD, st)
        pos[:, st:ed] = nxt + np.arange(ed - st)
        nxt += ed - st
        t, h, w = g[0], g[1] // m, g[2] // m
        n = t * h * w
        pos[0, ed:ed + n] = nxt + np.repeat(np.arange(t), h * w)
        pos[1, ed:ed + n] = nxt + np.tile(np.repeat(np.arange(h), w), t)
        pos[2, ed:ed + n] = nxt + np.tile(np.arange(w), t * h)
        nxt = pos[:, ed:ed + n].max() + 1
        st = ed + n
    pos[:, st:] = nxt + np.arange(len(ids) - st)
    return pos


def rmsnorm(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def run_decoder(W, tc, ids, pos, vis_mask, feat, ds_feats, layers):
    L = "model.language_model."
    hd, nh, nkv, eps = tc["head_dim"], tc["num_attention_heads"], tc["num_key_value_heads"], tc["rms_norm_eps"]
    sec = tc["rope_scaling"]["mrope_section"]
    theta = tc["rope_theta"]
    x = W[L + "embed_tokens.weight"][ids].copy()
    if feat is not None:
        x[vis_mask] = feat
    inv = 1.0 / theta ** (np.arange(0, hd, 2) / hd)
    freqs = pos[:, :, None] * inv[None, None, :]                 # (3, L, hd/2)
    f = freqs[0].copy()
    f[:, 1:3 * sec[1]:3] = freqs[1][:, 1:3 * sec[1]:3]
    f[:, 2:3 * sec[2]:3] = freqs[2][:, 2:3 * sec[2]:3]
    emb = np.concatenate([f, f], -1)
    cos, sin = np.cos(emb)[:, None, :], np.sin(emb)[:, None, :]
    n = len(ids)
    causal = np.triu(np.full((n, n), -np.inf), 1)
    for l in range(layers):
        A = f"{L}layers.{l}."
        h = rmsnorm(x, W[A + "input_layernorm.weight"], eps)
        q = (h @ W[A + "self_attn.q_proj.weight"].T).reshape(n, nh, hd)
        k = (h @ W[A + "self_attn.k_proj.weight"].T).reshape(n, nkv, hd)
        v = (h @ W[A + "self_attn.v_proj.weight"].T).reshape(n, nkv, hd)
        q = rmsnorm(q, W[A + "self_attn.q_norm.weight"], eps)
        k = rmsnorm(k, W[A + "self_attn.k_norm.weight"], eps)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        rep = nh // nkv
        k, v = np.repeat(k, rep, 1), np.repeat(v, rep, 1)
        s = np.einsum("qhd,khd->hqk", q, k) / math.sqrt(hd) + causal
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        o = np.einsum("hqk,khd->qhd", s, v).reshape(n, nh * hd)
        x = x + o @ W[A + "self_attn.o_proj.weight"].T
        h = rmsnorm(x, W[A + "post_attention_layernorm.weight"], eps)
        g, u = h @ W[A + "mlp.gate_proj.weight"].T, h @ W[A + "mlp.up_proj.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ W[A + "mlp.down_proj.weight"].T
        if feat is not None and l < len(ds_feats):
            x[vis_mask] += ds_feats[l]
    return x


def main():
    vdn, test_vision, tok_json, work = sys.argv[1:5]
    backend = sys.argv[5] if len(sys.argv) > 5 else "cpu"
    tol = float(sys.argv[6]) if len(sys.argv) > 6 else TOL
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    ckpt = os.path.join(work, "ckpt")
    subprocess.run([vdn, "ckpt", "init", "--preset", "tiny", "--text-encoder", "--tokenizer-json",
                    tok_json, "--out", ckpt], check=True, stdout=subprocess.DEVNULL)
    rng = np.random.default_rng(20261128)
    yy, xx = np.mgrid[0:256, 0:320]
    smooth = (127 + 100 * np.sin(yy / 17.0)[..., None] * np.cos(xx[..., None] / 23.0 + np.arange(3)))
    images = [rng.integers(0, 256, (256, 256, 3), dtype=np.uint8),
              np.clip(smooth + rng.normal(0, 20, smooth.shape), 0, 255).astype(np.uint8),
              np.clip(smooth[:250, :333 - 13] + rng.normal(0, 20, (250, 320, 3)), 0, 255).astype(np.uint8)]
    prompt = "A cat walks slowly across a wet rooftop at night, neon lights reflecting."
    # picture 2 (320x250) is resized by the processor to 320x256
    cases = [{"prompt": prompt, "pictures": [0]}, {"prompt": prompt, "pictures": [0, 1]},
             {"prompt": prompt, "pictures": [2]}, {"prompt": prompt, "pictures": []}]
    inp, out = os.path.join(work, "in.safetensors"), os.path.join(work, "out.safetensors")
    write_st(inp, {f"image_{i}": im for i, im in enumerate(images)}, {"cases": json.dumps(cases)})
    r = subprocess.run([test_vision, "dump", ckpt, inp, out, backend])
    if r.returncode == 77:
        print(f"SKIP: no {backend} device here")
        return 77
    if r.returncode:
        print(f"test_vision dump failed ({r.returncode})")
        return 1
    got, _ = read_st(out)

    te = os.path.join(ckpt, "text_encoder")
    cfg = json.load(open(os.path.join(te, "config.json")))
    tc, vc = cfg["text_config"], cfg["vision_config"]
    W = load_weights(te)
    layers = tc["num_hidden_layers"] - 1  # the encoder's default layer for a small checkpoint
    fails = []

    proc = json.load(open(os.path.join(ckpt, "processor", "preprocessor_config.json")))
    pix, grids = [], []
    for i, im in enumerate(images):
        p, g = processor(im, proc)
        pix.append(p), grids.append(g)
        d = np.abs(got[f"pixels_{i}"] - p).max()
        print(f"picture {i} {im.shape[1]}x{im.shape[0]}: grid {g}, processor rows max diff {d:.2e}")
        if tuple(got[f"grid_{i}"]) != g or d > 1e-6:
            fails.append(f"picture {i}: processor")
    feats = [vision_tower(W, vc, pix[i], grids[i]) for i in range(len(images))]

    text_ids = list(got[f"ids_{len(cases) - 1}"])
    label_ids = None
    for k, c in enumerate(cases):
        ids, tags = list(got[f"ids_{k}"]), got[f"tags_{k}"]
        # layout: per picture label (text), <|vision_start|> pads <|vision_end|> (vision), prompt
        at, ok = 0, True
        for p in c["pictures"]:
            vs = ids.index(VISION_START, at)
            label = ids[at:vs]
            label_ids = label_ids or (label if p == 0 else None)
            n = grids[p][1] * grids[p][2] // 4
            block = ids[vs:vs + n + 2]
            ok &= block == [VISION_START] + [IMAGE_PAD] * n + [VISION_END]
            ok &= bool((tags[at:vs] == 1).all() and (tags[vs:vs + n + 2] == 0).all()) and len(label) > 0
            at = vs + n + 2
        ok &= ids[at:] == text_ids and bool((tags[at:] == 1).all())
        if not ok:
            fails.append(f"case {k}: presentation layout")
        gr = [grids[p] for p in c["pictures"]]
        pos = rope_index(ids, gr, vc["spatial_merge_size"]) if gr else np.tile(np.arange(len(ids)), (3, 1)).astype(np.float64)
        mask = np.array(ids) == IMAGE_PAD
        feat = np.concatenate([feats[p][0] for p in c["pictures"]]) if gr else None
        ds = [np.concatenate([feats[p][1][j] for p in c["pictures"]]) for j in range(len(vc["deepstack_visual_indexes"]))] if gr else []
        want = run_decoder(W, tc, np.array(ids), pos, mask, feat, ds, layers)
        e = np.abs(got[f"hidden_{k}"] - want).max() / np.abs(want).max()
        print(f"case {k}: {len(c['pictures'])} pictures, {len(ids)} rows ({int(mask.sum())} picture rows): "
              f"hidden_states[{layers}] max error {e:.2e} of max |h|")
        if not e <= tol:
            fails.append(f"case {k}: hidden error {e:.3e} > {tol}")
    if fails:
        print("FAILED:", "; ".join(fails))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
