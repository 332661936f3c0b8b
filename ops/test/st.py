"""Helpers shared by the Python tests: safetensors files read and written with numpy only, a
list of failed checks, and a fresh work folder with a runner of the vdn CLI. A test imports it from its own location:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), <up to root>,
                                    "ops", "test"))
"""
import json
import os
import shutil
import struct
import subprocess

import numpy as np


def read_header(path):
    """A safetensors file split into (header without __metadata__, metadata, the file's bytes,
    offset of the data section); a file too short for its header stops the test, naming it."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise SystemExit(f"{path}: shorter than the 8-byte safetensors header length")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise SystemExit(f"{path}: header length {n} runs past the end of the file")
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    return header, meta, raw, 8 + n


def tensor_bytes(raw, start, entry):
    """The bytes of one tensor: its header entry's data_offsets, from the data section."""
    b, e = entry["data_offsets"]
    return raw[start + b:start + e]


_NUMPY = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64,
          "I32": np.int32, "U8": np.uint8}


def read_arrays(path):
    """(metadata, {name: array}) of a safetensors file: BF16 widened to float32 exactly, the
    other dtypes as numpy reads them; an unknown dtype stops the test, naming the tensor."""
    header, meta, raw, start = read_header(path)
    out = {}
    for name, e in header.items():
        b = tensor_bytes(raw, start, e)
        if e["dtype"] == "BF16":
            a = (np.frombuffer(b, np.uint16).astype(np.uint32) << 16).view(np.float32)
        elif e["dtype"] in _NUMPY:
            a = np.frombuffer(b, _NUMPY[e["dtype"]])
        else:
            raise SystemExit(f"{path}: tensor {name}: dtype {e['dtype']} not read by st.py")
        out[name] = a.reshape(e["shape"])
    return meta, out


def write_f32(path, tensors, meta=None):
    """{name: array} as float32 tensors, with optional string metadata; header padded to 8."""
    header, blobs, off = {}, [], 0
    if meta:
        header["__metadata__"] = meta
    for name, arr in tensors.items():
        a = np.ascontiguousarray(arr, dtype=np.float32)
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [off, off + a.nbytes]}
        blobs.append(a.tobytes())
        off += a.nbytes
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


failures = []  # messages of the checks that failed; a test exits 1 when any did


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)


def vdn_in(vdn, work):
    """Empty `work`, make it the current folder and return run(*args, ok=True): `vdn args` with
    its output captured, raising SystemExit with the command and its stderr when ok and it
    failed."""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    os.chdir(work)

    def run(*args, ok=True):
        r = subprocess.run([vdn, *args], capture_output=True, text=True)
        if ok and r.returncode != 0:
            raise SystemExit(f"vdn {' '.join(args)} failed ({r.returncode}): {r.stderr}")
        return r

    return run
