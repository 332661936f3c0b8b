"""ops/device/ckpt_repeat.py (the farm's H3-shaped checkpoint, docs/PERF.md): a tiny VDN
checkpoint of 1 block stretched to 3 against `vdn ckpt init --layers 3` itself: the same tensor
names, dtypes and shapes in both safetensors files, the same config.json and model_spec.json
(config_hash included); every block's bytes equal block 0's of the 1-block file; the rest of the
file unchanged; `vdn inspect` reads it and counts 3 layers. And its refusals: a checkpoint with
2 blocks, a bad N."""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from harness import check, log, main


def tensors(path):
    """name -> (dtype, shape, bytes) of a safetensors file (read here, not by our code)"""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
        data = f.read()
    h.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in h.items()}


def test(args):
    script = os.path.join(os.path.abspath(args.source), "ops", "device", "ckpt_repeat.py")
    d = tempfile.mkdtemp(prefix="vdn-ckpt-repeat-")
    try:
        def init(name, layers):
            out = os.path.join(d, name)
            r = subprocess.run([args.vdn, "ckpt", "init", "--preset", "tiny", "--vdn", "--adapters",
                                "none", "--layers", str(layers), "--out", out],
                               capture_output=True, text=True, timeout=60)
            check(r.returncode == 0, "vdn ckpt init --layers %d: %s" % (layers, r.stderr))
            return out

        one, three, two = init("one", 1), init("three", 3), init("two", 2)
        rep = os.path.join(d, "rep")
        shutil.copytree(one, rep)
        r = subprocess.run([sys.executable, script, rep, "3"], capture_output=True, text=True,
                           timeout=60)
        check(r.returncode == 0 and "3 blocks" in r.stdout, "ckpt_repeat.py: %s %s"
              % (r.stdout, r.stderr))
        for f in ("base/transformer/diffusion_pytorch_model.safetensors",
                  "linear_branch/model.safetensors"):
            a, b, o = (tensors(os.path.join(x, f)) for x in (rep, three, one))
            check(sorted(a) == sorted(b), "%s: tensor names differ from --layers 3's: %s" %
                  (f, sorted(set(a) ^ set(b))))
            for k in a:
                check(a[k][:2] == b[k][:2], "%s %s: %s, --layers 3 has %s" % (f, k, a[k][:2],
                                                                             b[k][:2]))
                src = k
                if k.startswith("transformer_blocks."):
                    src = "transformer_blocks.0." + k.split(".", 2)[2]
                check(a[k][2] == o[src][2], "%s %s: not the bytes of %s in the 1-block file"
                      % (f, k, src))
        for f in ("base/transformer/config.json", "model_spec.json",
                  "linear_branch/config.json"):
            ja, jb = (json.load(open(os.path.join(x, f))) for x in (rep, three))
            check(ja == jb, "%s differs from --layers 3's:\n%s\n%s" % (f, ja, jb))
        meta = json.load(open(os.path.join(rep, "metadata.json")))
        check("repeated_blocks" in meta.get("metadata", {}), "metadata.json: %s" % meta)
        r = subprocess.run([args.vdn, "inspect", rep], capture_output=True, text=True, timeout=60)
        check(r.returncode == 0 and "layers 3" in r.stdout, "vdn inspect: %s %s"
              % (r.stdout, r.stderr))
        for bad, n, msg in ((two, "4", "blocks other than 0"), (one, "0", "expected 1..4096")):
            r = subprocess.run([sys.executable, script, bad, n], capture_output=True, text=True,
                               timeout=60)
            check(r.returncode != 0 and msg in r.stderr, "%s %s: %s" % (bad, n, r.stderr))
        log("1 block -> 3: the same names, shapes, configs as --layers 3; block 0's bytes")
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main(test)
