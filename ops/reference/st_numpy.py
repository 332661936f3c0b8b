"""A stand-in for `safetensors.torch` (load_file, save_file) written with numpy, for machines whose
torch has no safetensors package beside it (Debian's python3-torch). Same file format: an 8-byte
little-endian header length, the JSON header, the packed data. F32, F64, F16, BF16, I32, I64, U8.

install() puts it in sys.modules as `safetensors.torch` when the real package is missing."""
import json
import struct
import sys
import types

import numpy as np
import torch

_NP = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I32": np.int32, "I64": np.int64,
       "U8": np.uint8}
_NAME = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.bfloat16: "BF16",
         torch.int32: "I32", torch.int64: "I64", torch.uint8: "U8"}


def load_file(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    base, out = 8 + n, {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        buf = raw[base + a:base + b]
        if e["dtype"] == "BF16":
            u = np.frombuffer(buf, dtype=np.uint16).astype(np.uint32) << 16
            t = torch.from_numpy(u.view(np.float32).copy()).to(torch.bfloat16)
        else:
            t = torch.from_numpy(np.frombuffer(buf, dtype=_NP[e["dtype"]]).copy())
        out[name] = t.reshape(e["shape"])
    return out


def save_file(tensors, path, metadata=None):
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        if t.dtype == torch.bfloat16:
            data = (t.float().numpy().view(np.uint32) >> 16).astype(np.uint16).tobytes()
        else:
            data = t.numpy().tobytes()
        header[name] = {"dtype": _NAME[t.dtype], "shape": list(t.shape),
                        "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def install():
    try:
        import safetensors.torch  # noqa: F401
    except ImportError:
        pkg = types.ModuleType("safetensors")
        mod = types.ModuleType("safetensors.torch")
        mod.load_file, mod.save_file = load_file, save_file
        pkg.torch = mod
        sys.modules["safetensors"], sys.modules["safetensors.torch"] = pkg, mod
