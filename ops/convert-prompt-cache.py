#!/usr/bin/python3
"""Convert an official VDN / MiniMax-H3 prompt cache (torch.save .pt) to vdn's safetensors format.

    /usr/bin/python3 ops/convert-prompt-cache.py IN.pt OUT.safetensors

No torch needed: the .pt zip archive is read with zipfile and its pickle with a restricted
Unpickler that knows exactly the globals a tensor dict uses (torch._utils._rebuild_tensor_v2,
the typed storage classes, collections.OrderedDict) and refuses every other one, so a cache
file cannot run code. Tensors come back as numpy arrays (bf16 kept as raw 16-bit words).

Input dict (VDN encode_prompt.py / encode_keyframes.py):
    prompt (str), prompt_embeds (L, D) bf16, text_token_tags (L,) int64 (1 text, 0 vision block),
    optional keyframe_anchors (["first"], ["last"] or both), keyframe_files, condition_latents
    (list of (1, 24, 1, H/16, W/16) fp32, one per anchor), height, width.
Output (docs/formats.md): prompt_embeds, text_token_tags, keyframe_first / keyframe_last, and
__metadata__ prompt, height, width, keyframe_anchors, keyframe_files (JSON list).
"""
import io
import json
import os
import pickle
import struct
import sys
import zipfile

import numpy as np


class ConvertError(Exception):
    pass


# torch storage class -> (numpy dtype of one element, safetensors dtype)
STORAGES = {
    "FloatStorage": (np.float32, "F32"),
    "HalfStorage": (np.uint16, "F16"),
    "BFloat16Storage": (np.uint16, "BF16"),
    "LongStorage": (np.int64, "I64"),
    "IntStorage": (np.int32, "I32"),
    "ByteStorage": (np.uint8, "U8"),
    "DoubleStorage": (np.float64, "F64"),
    "BoolStorage": (np.uint8, "U8"),
}


class StorageType:
    def __init__(self, name):
        self.name = name


class Storage:
    def __init__(self, stype, data, numel):
        self.np_dtype, self.st_dtype = STORAGES[stype.name]
        self.data = data
        self.numel = numel


class Tensor:
    """A numpy array plus the safetensors dtype it came as (BF16/F16 arrays hold uint16)."""

    def __init__(self, array, st_dtype):
        self.array = array
        self.st_dtype = st_dtype


def _rebuild_tensor(storage, offset, size, stride, *rest):
    if not isinstance(storage, Storage):
        raise ConvertError("tensor without a storage")
    size, stride = tuple(size), tuple(stride)
    if len(size) != len(stride) or any(s < 0 for s in size) or any(s < 0 for s in stride):
        raise ConvertError(f"bad tensor geometry size={size} stride={stride}")
    item = np.dtype(storage.np_dtype).itemsize
    if len(storage.data) < storage.numel * item:
        raise ConvertError(f"storage holds {len(storage.data)} bytes, {storage.numel} elements "
                           f"of {item} bytes declared (truncated file?)")
    flat = np.frombuffer(storage.data, dtype=storage.np_dtype, count=storage.numel)
    if 0 in size:
        return Tensor(np.zeros(size, dtype=storage.np_dtype), storage.st_dtype)
    last = offset + sum((n - 1) * s for n, s in zip(size, stride))
    if offset < 0 or last >= storage.numel:
        raise ConvertError(f"tensor view (offset {offset}, size {size}, stride {stride}) "
                           f"exceeds its storage of {storage.numel} elements")
    view = np.lib.stride_tricks.as_strided(flat[offset:], shape=size,
                                           strides=tuple(s * item for s in stride))
    return Tensor(np.ascontiguousarray(view), storage.st_dtype)


class _OrderedDict(dict):
    pass


class RestrictedUnpickler(pickle.Unpickler):
    def __init__(self, data, archive, prefix, path):
        super().__init__(io.BytesIO(data))
        self.archive, self.prefix, self.path = archive, prefix, path

    def find_class(self, module, name):
        if module == "torch._utils" and name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
            return _rebuild_tensor
        if module == "torch" and name in STORAGES:
            return StorageType(name)
        if module == "collections" and name == "OrderedDict":
            return _OrderedDict
        raise ConvertError(f"{self.path}: the pickle refers to {module}.{name}, which a prompt "
                           f"cache never holds (refused: a .pt file can run code)")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise ConvertError(f"{self.path}: unexpected persistent id {pid!r}")
        _, stype, key, _location, numel = pid
        if not isinstance(stype, StorageType) or not isinstance(numel, int) or numel < 0:
            raise ConvertError(f"{self.path}: bad storage reference {pid!r}")
        member = f"{self.prefix}data/{key}"
        try:
            data = self.archive.read(member)
        except KeyError:
            raise ConvertError(f"{self.path}: storage {member} missing from the archive") from None
        return Storage(stype, data, numel)


def load_pt(path):
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as e:
        raise ConvertError(f"{path}: not a torch.save zip archive ({e}); re-save with a torch "
                           f"newer than 1.6 (legacy pickle files are not supported)") from None
    with archive:
        pkls = [n for n in archive.namelist() if n.endswith("data.pkl") and n.count("/") == 1]
        if len(pkls) != 1:
            raise ConvertError(f"{path}: expected one <name>/data.pkl in the archive, found "
                               f"{len(pkls)}")
        prefix = pkls[0][: -len("data.pkl")]
        try:
            obj = RestrictedUnpickler(archive.read(pkls[0]), archive, prefix, path).load()
        except ConvertError as e:
            msg = str(e)
            raise ConvertError(msg if msg.startswith(path) else f"{path}: {msg}") from None
        except Exception as e:  # a malformed pickle: name the file
            raise ConvertError(f"{path}: cannot read the pickle ({type(e).__name__}: {e})") from None
    if not isinstance(obj, dict):
        raise ConvertError(f"{path}: expected a dict, got {type(obj).__name__}")
    return obj


def need_tensor(path, d, key, ndim):
    t = d.get(key)
    if t is None:
        raise ConvertError(f"{path}: missing key '{key}'")
    if not isinstance(t, Tensor):
        raise ConvertError(f"{path}: '{key}' is a {type(t).__name__}, expected a tensor")
    if t.array.ndim == ndim + 1 and t.array.shape[0] == 1:  # a batch of one
        t = Tensor(t.array[0], t.st_dtype)
    if t.array.ndim != ndim:
        raise ConvertError(f"{path}: '{key}' has shape {list(t.array.shape)}, expected {ndim} dims")
    return t


def convert(src, dst):
    d = load_pt(src)
    emb = need_tensor(src, d, "prompt_embeds", 2)
    if emb.st_dtype not in ("BF16", "F16", "F32") or emb.array.shape[0] < 1:
        raise ConvertError(f"{src}: 'prompt_embeds' must be (L, D) bf16/f16/f32 with L >= 1, "
                           f"got {emb.st_dtype} {list(emb.array.shape)}")
    tags = need_tensor(src, d, "text_token_tags", 1)
    if tags.st_dtype not in ("I64", "I32") or tags.array.shape[0] != emb.array.shape[0]:
        raise ConvertError(f"{src}: 'text_token_tags' must be int64 of shape "
                           f"({emb.array.shape[0]},), got {tags.st_dtype} {list(tags.array.shape)}")
    bad = np.nonzero((tags.array != 0) & (tags.array != 1))[0]
    if len(bad):
        raise ConvertError(f"{src}: 'text_token_tags'[{bad[0]}] = {tags.array[bad[0]]}, "
                           f"expected 0 or 1")
    out = [("prompt_embeds", emb.st_dtype, emb.array),
           ("text_token_tags", "I64", tags.array.astype(np.int64))]
    meta = {}
    prompt = d.get("prompt")
    if prompt is not None:
        if not isinstance(prompt, str):
            raise ConvertError(f"{src}: 'prompt' must be a string")
        meta["prompt"] = prompt
    anchors = d.get("keyframe_anchors")
    latents = d.get("condition_latents")
    if anchors is not None or latents is not None:
        if not isinstance(anchors, (list, tuple)) or not isinstance(latents, (list, tuple)):
            raise ConvertError(f"{src}: 'keyframe_anchors' and 'condition_latents' must both be "
                               f"lists")
        if len(anchors) != len(latents) or not 1 <= len(anchors) <= 2:
            raise ConvertError(f"{src}: {len(anchors)} keyframe_anchors but {len(latents)} "
                               f"condition_latents (expected one latent per anchor, at most 2)")
        if any(a not in ("first", "last") for a in anchors) or len(set(anchors)) != len(anchors):
            raise ConvertError(f"{src}: 'keyframe_anchors' = {list(anchors)}, expected 'first' "
                               f"and/or 'last'")
        for key in ("height", "width"):
            v = d.get(key)
            if not isinstance(v, int) or v <= 0 or v % 16:
                raise ConvertError(f"{src}: '{key}' = {v!r}, expected a positive multiple of 16")
            meta[key] = str(v)
        for anchor, lat in sorted(zip(anchors, latents), key=lambda p: p[0] != "first"):
            if not isinstance(lat, Tensor) or lat.st_dtype != "F32":
                raise ConvertError(f"{src}: condition_latents for '{anchor}' must be a float32 "
                                   f"tensor")
            want = [1, 24, 1, d["height"] // 16, d["width"] // 16]
            if list(lat.array.shape) != want:
                raise ConvertError(f"{src}: condition_latents for '{anchor}' has shape "
                                   f"{list(lat.array.shape)}, expected {want}")
            out.append((f"keyframe_{anchor}", "F32", lat.array))
        meta["keyframe_anchors"] = ",".join(a for a in ("first", "last") if a in anchors)
        files = d.get("keyframe_files")
        if isinstance(files, (list, tuple)) and all(isinstance(f, str) for f in files):
            meta["keyframe_files"] = json.dumps(list(files))
    write_safetensors(dst, out, meta)
    return out, meta


def write_safetensors(path, tensors, meta):
    header, blobs, off = {}, [], 0
    if meta:
        header["__metadata__"] = meta
    for name, st_dtype, arr in tensors:
        raw = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": st_dtype, "shape": list(arr.shape),
                        "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def main(argv):
    if len(argv) != 3:
        print("usage: convert-prompt-cache.py IN.pt OUT.safetensors", file=sys.stderr)
        return 2
    try:
        tensors, meta = convert(argv[1], argv[2])
    except ConvertError as e:
        print(f"convert-prompt-cache: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"convert-prompt-cache: {e}", file=sys.stderr)
        return 1
    shapes = ", ".join(f"{n} {list(a.shape)}" for n, _, a in tensors)
    print(f"wrote {argv[2]}: {shapes}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
