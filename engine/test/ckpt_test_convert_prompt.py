#!/usr/bin/python3
"""ops/convert-prompt-cache.py against .pt files built here in torch's zip format, without torch.

The pickle is written by the stdlib pickler against stand-in `torch` modules, so it carries the
same globals and persistent ids torch.save writes (GLOBAL torch._utils._rebuild_tensor_v2,
BINPERSID ('storage', torch.BFloat16Storage, key, 'cpu', numel), collections.OrderedDict).
Checks values, strided/offset views, the fl2va keyframe fields, that the engine's prompt reader
accepts the output, and every malformed input (each must fail with a message naming the file).
Usage: ckpt_test_convert_prompt.py CONVERTER PROMPT_INFO_BINARY TMPDIR
"""
import collections
import json
import os
import pickle
import shutil
import subprocess
import sys
import types
import zipfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "ops",
                                "test"))
from st import check, failures, read_header, tensor_bytes  # noqa: E402

# ---- stand-in torch, only so that pickle can name the globals ----
torch = types.ModuleType("torch")
torch_utils = types.ModuleType("torch._utils")


def _rebuild_tensor_v2(*args):  # never called here: the converter must not use it
    raise AssertionError


_rebuild_tensor_v2.__module__ = "torch._utils"
torch_utils._rebuild_tensor_v2 = _rebuild_tensor_v2
for name in ("BFloat16Storage", "FloatStorage", "LongStorage", "HalfStorage"):
    cls = type(name, (), {"__module__": "torch"})
    setattr(torch, name, cls)
torch._utils = torch_utils
sys.modules["torch"] = torch
sys.modules["torch._utils"] = torch_utils


class FakeStorage:
    def __init__(self, kind, raw, numel):
        self.kind, self.raw, self.numel = kind, raw, numel


class FakeTensor:
    def __init__(self, storage, offset, size, stride):
        self.args = (storage, offset, tuple(size), tuple(stride), False,
                     collections.OrderedDict())

    def __reduce__(self):
        return (_rebuild_tensor_v2, self.args)


def bf16_words(x):
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF).astype(np.uint16)


def tensor(arr, kind, offset=0, transpose=False, pad=0):
    """A FakeTensor over a storage of `arr` (flattened, padded), optionally a transposed view."""
    flat = arr.T.reshape(-1) if transpose else arr.reshape(-1)
    if kind == "BFloat16Storage":
        raw_el = bf16_words(flat)
    else:
        raw_el = flat
    raw_el = np.concatenate([np.zeros(offset, raw_el.dtype), raw_el, np.zeros(pad, raw_el.dtype)])
    st = FakeStorage(getattr(torch, kind), raw_el.tobytes(), len(raw_el))
    if arr.ndim == 2 and transpose:
        stride = (1, arr.shape[0])
    else:
        stride = tuple(int(np.prod(arr.shape[i + 1:])) for i in range(arr.ndim))
    return FakeTensor(st, offset, arr.shape, stride)


def save_pt(path, obj, prefix="archive", drop_storage=None, truncate=None, extra_pkl=None):
    storages = []

    class P(pickle.Pickler):
        def persistent_id(self, o):
            if isinstance(o, FakeStorage):
                key = str(len(storages))
                storages.append(o)
                return ("storage", o.kind, key, "cpu", o.numel)
            return None

    buf = __import__("io").BytesIO()
    P(buf, protocol=2).dump(obj)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr(f"{prefix}/data.pkl", extra_pkl if extra_pkl is not None else buf.getvalue())
        z.writestr(f"{prefix}/byteorder", "little")
        for i, s in enumerate(storages):
            if drop_storage == i:
                continue
            raw = s.raw[:truncate] if truncate is not None and i == 0 else s.raw
            z.writestr(f"{prefix}/data/{i}", raw)
        z.writestr(f"{prefix}/version", "3\n")


def read_st(path):
    header, meta, raw, start = read_header(path)
    out = {}
    for name, e in header.items():
        dt = {"BF16": np.uint16, "F32": np.float32, "I64": np.int64}[e["dtype"]]
        out[name] = (e["dtype"], np.frombuffer(tensor_bytes(raw, start, e), dtype=dt)
                     .reshape(e["shape"]))
    return out, meta


def main():
    conv, info, tmp = sys.argv[1:4]
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    rng = np.random.default_rng(3)

    def run(src, dst):
        return subprocess.run(["/usr/bin/python3", conv, src, dst], capture_output=True,
                              text=True)

    # t2va: bf16 embeds as a transposed view with a storage offset; tags int64
    L, D = 7, 48
    emb = rng.standard_normal((L, D)).astype(np.float32)
    tags = np.ones(L, dtype=np.int64)
    t2va = os.path.join(tmp, "t2va.pt")
    save_pt(t2va, {"prompt": "a ronin in a black void",
                   "prompt_embeds": tensor(emb, "BFloat16Storage", offset=5, transpose=True,
                                           pad=3),
                   "text_token_tags": tensor(tags, "LongStorage")})
    out = os.path.join(tmp, "t2va.safetensors")
    r = run(t2va, out)
    check(r.returncode == 0, f"t2va failed: {r.stderr}")
    if r.returncode == 0:
        st, meta = read_st(out)
        check(st["prompt_embeds"][0] == "BF16", "embeds dtype")
        check(np.array_equal(st["prompt_embeds"][1], bf16_words(emb)), "embeds values/strides")
        check(st["text_token_tags"][0] == "I64" and np.array_equal(st["text_token_tags"][1],
                                                                  tags), "tags")
        check(meta.get("prompt") == "a ronin in a black void", f"prompt meta {meta}")
        check(not any(k.startswith("keyframe") for k in st), "keyframes in a t2va cache")
        r = subprocess.run([info, out, str(D)], capture_output=True, text=True)
        check(r.returncode == 0, f"engine reader refused the output: {r.stderr}")
        if r.returncode == 0:
            got = json.loads(r.stdout)
            want = float((bf16_words(emb).astype(np.uint32) << 16).view(np.float32)
                         .astype(np.float64).sum())
            check(got["n_text"] == L and got["text_dim"] == D and got["tag_sum"] == L and
                  abs(got["embed_sum"] - want) < 1e-3 and got["n_keyframes"] == 0,
                  f"engine reader view {got}")

    # fl2va: both anchors (given last-first to check the ordering), vision rows tagged 0
    H, W = 64, 96
    lat_first = rng.standard_normal((1, 24, 1, H // 16, W // 16)).astype(np.float32)
    lat_last = rng.standard_normal((1, 24, 1, H // 16, W // 16)).astype(np.float32)
    tags2 = np.array([1, 1, 0, 0, 0, 1, 1, 0, 0, 1, 1], dtype=np.int64)
    emb2 = rng.standard_normal((len(tags2), D)).astype(np.float32)
    fl2va = os.path.join(tmp, "fl2va.pt")
    good = {"prompt": "x", "prompt_embeds": tensor(emb2, "BFloat16Storage"),
            "text_token_tags": tensor(tags2, "LongStorage"),
            "keyframe_anchors": ["last", "first"], "keyframe_files": ["last.png", "first.png"],
            "condition_latents": [tensor(lat_last, "FloatStorage"),
                                  tensor(lat_first, "FloatStorage")],
            "height": H, "width": W}
    save_pt(fl2va, good, prefix="fl2va")
    out2 = os.path.join(tmp, "fl2va.safetensors")
    r = run(fl2va, out2)
    check(r.returncode == 0, f"fl2va failed: {r.stderr}")
    if r.returncode == 0:
        st, meta = read_st(out2)
        check(np.array_equal(st["keyframe_first"][1], lat_first) and
              np.array_equal(st["keyframe_last"][1], lat_last), "keyframe latents by anchor")
        check(meta.get("keyframe_anchors") == "first,last" and meta.get("height") == "64" and
              meta.get("width") == "96", f"fl2va meta {meta}")
        check(json.loads(meta.get("keyframe_files", "[]")) == ["last.png", "first.png"],
              "keyframe files")
        r = subprocess.run([info, out2], capture_output=True, text=True)
        check(r.returncode == 0, f"engine reader refused fl2va: {r.stderr}")
        if r.returncode == 0:
            got = json.loads(r.stdout)
            check(got["n_keyframes"] == 2 and got["first_is_last"] == 0 and got["kf_h"] == 4 and
                  got["kf_w"] == 6 and got["tag_sum"] == int(tags2.sum()) and
                  abs(got["keyframe_sum"] - float(lat_first.sum() + lat_last.sum())) < 1e-3,
                  f"engine reader fl2va {got}")

    # a batch dimension of one is accepted
    b1 = os.path.join(tmp, "batch1.pt")
    save_pt(b1, {"prompt_embeds": tensor(emb[None], "BFloat16Storage"),
                 "text_token_tags": tensor(tags[None], "LongStorage")})
    r = run(b1, os.path.join(tmp, "batch1.safetensors"))
    check(r.returncode == 0, f"batch of one: {r.stderr}")
    if r.returncode == 0:
        st, _ = read_st(os.path.join(tmp, "batch1.safetensors"))
        check(list(st["prompt_embeds"][1].shape) == [L, D], "batch dim squeezed")

    # malformed inputs: each fails, names the file, says what was expected
    cases = []

    def bad(name, obj=None, needle="", **kw):
        path = os.path.join(tmp, name + ".pt")
        if obj is not None or kw:
            save_pt(path, obj if obj is not None else {}, **kw)
        cases.append((name, path, needle))
        return path

    with open(os.path.join(tmp, "notzip.pt"), "wb") as f:
        f.write(b"\x80\x02}q\x00.")  # a legacy (non-zip) pickle
    cases.append(("notzip", os.path.join(tmp, "notzip.pt"), "zip"))
    cases.append(("missing", os.path.join(tmp, "nope.pt"), "nope.pt"))
    evil = b"\x80\x02cposix\nsystem\nq\x00X\x04\x00\x00\x00trueq\x01\x85q\x02Rq\x03."
    bad("evil", {}, "posix.system", extra_pkl=evil)
    bad("garbage_pkl", {}, "cannot read the pickle", extra_pkl=b"\x80\x02(((")
    bad("no_embeds", {"text_token_tags": tensor(tags, "LongStorage")}, "'prompt_embeds'")
    bad("embeds_1d", {"prompt_embeds": tensor(emb[0], "BFloat16Storage"),
                      "text_token_tags": tensor(tags, "LongStorage")}, "'prompt_embeds'")
    bad("tags_len", {"prompt_embeds": tensor(emb, "BFloat16Storage"),
                     "text_token_tags": tensor(tags[:3], "LongStorage")}, "'text_token_tags'")
    bad("tag_value", {"prompt_embeds": tensor(emb, "BFloat16Storage"),
                      "text_token_tags": tensor(np.array([1, 1, 2, 1, 1, 1, 1]),
                                                "LongStorage")}, "[2] = 2")
    bad("storage_missing", {"prompt_embeds": tensor(emb, "BFloat16Storage"),
                            "text_token_tags": tensor(tags, "LongStorage")}, "data/0",
        drop_storage=0)
    bad("storage_short", {"prompt_embeds": tensor(emb, "BFloat16Storage"),
                          "text_token_tags": tensor(tags, "LongStorage")}, "truncated",
        truncate=10)
    anchors_mismatch = dict(good, keyframe_anchors=["first"])
    bad("anchors", anchors_mismatch, "keyframe_anchors")
    bad("anchor_name", dict(good, keyframe_anchors=["first", "middle"]), "'first'")
    bad("latent_shape", dict(good, condition_latents=[tensor(lat_last[:, :12], "FloatStorage"),
                                                      tensor(lat_first, "FloatStorage")]),
        "expected [1, 24, 1, 4, 6]")
    bad("height", dict(good, height=65), "'height'")
    bad("not_dict", [1, 2], "expected a dict")
    for name, path, needle in cases:
        r = run(path, os.path.join(tmp, name + ".safetensors"))
        check(r.returncode == 1, f"{name}: exit {r.returncode}, stderr {r.stderr!r}")
        check(os.path.basename(path) in r.stderr and needle in r.stderr,
              f"{name}: error lacks {needle!r}: {r.stderr!r}")
        check(not os.path.exists(os.path.join(tmp, name + ".safetensors")),
              f"{name}: wrote an output")
        check("Traceback" not in r.stderr, f"{name}: crashed: {r.stderr}")
    print(f"{len(cases)} malformed cases; {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
