"""A random VDN checkpoint of N blocks from one of 1 block, by writing block 0's tensors N times
(ops/device/multi_farm.sh: the H3-shaped farm job).

    ckpt_repeat.py DIR N

DIR is what `vdn ckpt init --preset P --vdn --adapters none --layers 1` wrote. Why: that command
draws every weight on one CPU thread (~20 s a GB here), and the H3 preset's 50 blocks are ~66 GB
of bf16, half an hour or more; its 1-block checkpoint is ~3 GB. Repeating block 0 gives the
model's real shapes, so its time per evaluation, while writing only copies (page-cache speed).
The blocks are then equal to each other, which only matters for numbers nobody checks here.

Rewrites in place: base/transformer/diffusion_pytorch_model.safetensors and
linear_branch/model.safetensors (every `transformer_blocks.0.*` tensor also as
`transformer_blocks.1..N-1.*`, the same bytes), base/transformer/config.json
(`num_layers`; linear_branch/config.json has no count), model_spec.json (`resolved_config.num_layers`; its
`config_hash` recomputed over Python's compact JSON, not cJSON's bytes: the loader does not read
it) and metadata.json (`metadata.repeated_blocks`: says the blocks are copies)."""
import hashlib
import json
import os
import struct
import sys

BLOCK0 = "transformer_blocks.0."


def read_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n)), 8 + n


def repeat_safetensors(path, n):
    header, data_at = read_header(path)
    meta = header.pop("__metadata__", None)
    names = sorted(header, key=lambda k: header[k]["data_offsets"][0])
    if not any(k.startswith(BLOCK0) for k in names):
        sys.exit("ckpt_repeat.py: %s has no %s* tensors" % (path, BLOCK0))
    if any(k.startswith("transformer_blocks.") and not k.startswith(BLOCK0) for k in names):
        sys.exit("ckpt_repeat.py: %s has blocks other than 0 (make it with --layers 1)" % path)
    with open(path, "rb") as f:
        f.seek(data_at)
        data = f.read()
    rest = [k for k in names if not k.startswith(BLOCK0)]
    block = [k for k in names if k.startswith(BLOCK0)]
    out, at, pieces = {}, 0, []
    for k in rest:
        b, e = header[k]["data_offsets"]
        out[k] = dict(header[k], data_offsets=[at, at + e - b])
        pieces.append(data[b:e])
        at += e - b
    one = b"".join(data[header[k]["data_offsets"][0]:header[k]["data_offsets"][1]] for k in block)
    for i in range(n):
        off = 0
        for k in block:
            b, e = header[k]["data_offsets"]
            out["transformer_blocks.%d.%s" % (i, k[len(BLOCK0):])] = dict(
                header[k], data_offsets=[at + off, at + off + e - b])
            off += e - b
        at += len(one)
    if meta is not None:
        out["__metadata__"] = meta
    text = json.dumps(out, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for p in pieces:
            f.write(p)
        for _ in range(n):
            f.write(one)
    os.replace(tmp, path)
    return len(one)


def set_layers(path, n, where=()):
    with open(path) as f:
        j = json.load(f)
    o = j
    for k in where:
        o = o[k]
    o["num_layers"] = n
    return j


def write_json(path, j):
    with open(path, "w") as f:
        json.dump(j, f, indent="\t")
        f.write("\n")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    d, n = sys.argv[1], int(sys.argv[2])
    if not 1 <= n <= 4096:
        sys.exit("ckpt_repeat.py: N %d: expected 1..4096" % n)
    base = os.path.join(d, "base", "transformer")
    for p in ("model_spec.json", "base/transformer/config.json", "linear_branch/model.safetensors"):
        if not os.path.exists(os.path.join(d, p)):
            sys.exit("ckpt_repeat.py: %s: no %s (expected `vdn ckpt init --vdn --layers 1`)" % (d, p))
    spec = set_layers(os.path.join(d, "model_spec.json"), n, ("base", "resolved_config"))
    if spec.get("adapters"):
        sys.exit("ckpt_repeat.py: %s has adapters (make it with --adapters none)" % d)
    canon = json.dumps(spec["base"]["resolved_config"], separators=(",", ":")).encode()
    spec["base"]["config_hash"] = hashlib.sha256(canon).hexdigest()
    one = repeat_safetensors(os.path.join(base, "diffusion_pytorch_model.safetensors"), n)
    one += repeat_safetensors(os.path.join(d, "linear_branch", "model.safetensors"), n)
    write_json(os.path.join(base, "config.json"), set_layers(os.path.join(base, "config.json"), n))
    write_json(os.path.join(d, "model_spec.json"), spec)
    meta_path = os.path.join(d, "metadata.json")
    if os.path.exists(meta_path):
        meta = json.load(open(meta_path))
        meta.setdefault("metadata", {})["repeated_blocks"] = "block 0 written %d times" % n
        write_json(meta_path, meta)
    print("ckpt_repeat.py: %s: %d blocks, each %.1f MB (block 0's bytes)" % (d, n, one / 1e6))


main()
