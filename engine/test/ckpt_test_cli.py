#!/usr/bin/python3
"""`vdn ckpt init` and `vdn inspect` from the command line: argument errors, inspect on good and
bad checkpoints, the file tree of the released layouts, and an end-to-end check that a render
of the same seed is bit-identical on the diffusers and the native layout (the loader's native
conversion, seen through the whole forward). Usage: ckpt_test_cli.py VDN_BINARY TMPDIR
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "ops",
                                "test"))
from st import check, failures, read_header, tensor_bytes  # noqa: E402


def read_st(path):
    h, _, raw, start = read_header(path)
    return {k: np.frombuffer(tensor_bytes(raw, start, v), dtype=np.float32)
            for k, v in h.items() if v["dtype"] == "F32"}


def main():
    vdn, tmp = sys.argv[1:3]
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)

    def run(*args):
        return subprocess.run([vdn, *args], capture_output=True, text=True)

    # argument errors: usage (2) or a message naming the option (1/2), never a crash
    for args, code, needle in [
        (["ckpt"], 2, "usage"),
        (["ckpt", "init", "--out", tmp + "/x"], 2, "usage"),
        (["ckpt", "init", "--preset", "huge", "--out", tmp + "/x"], 1, "--preset"),
        (["ckpt", "init", "--preset", "tiny", "--out", tmp + "/x", "--layers", "0"], 2,
         "--layers"),
        (["ckpt", "init", "--preset", "tiny", "--out", tmp + "/x", "--seed", "-3"], 2, "--seed"),
        (["ckpt", "init", "--preset", "tiny", "--out", tmp + "/x", "--layout", "gguf"], 2,
         "--layout"),
        (["ckpt", "init", "--preset", "tiny", "--out", tmp + "/x", "--adapters", "default"], 2,
         "--vdn"),
        (["ckpt", "init", "--preset", "tiny", "--out", tmp + "/x", "--vdn", "--adapters",
          "default,fancy"], 1, "fancy"),
        (["ckpt", "init", "--preset", "tiny", "--out", tmp + "/x", "--bogus", "1"], 2, "--bogus"),
        (["inspect"], 2, "usage"),
        (["inspect", tmp + "/does-not-exist"], 1, "does-not-exist"),
        (["inspect", tmp], 1, "not a checkpoint"),
    ]:
        r = run(*args)
        check(r.returncode == code, f"{args}: exit {r.returncode}, want {code}: {r.stderr}")
        check(needle in r.stderr + r.stdout, f"{args}: output lacks {needle!r}: {r.stderr}")
        check("Segmentation" not in r.stderr, f"{args}: crashed")

    # the released file tree
    ck = os.path.join(tmp, "vdn")
    r = run("ckpt", "init", "--preset", "tiny", "--vdn", "--adapters", "default,turbo",
            "--seed", "4", "--out", ck)
    check(r.returncode == 0, f"init: {r.stderr}")
    for f in ["model_spec.json", "metadata.json", "linear_branch/config.json",
              "linear_branch/model.safetensors", "adapters/default/adapter_spec.json",
              "adapters/default/adapter_model.safetensors", "adapters/turbo/adapter_spec.json",
              "adapters/turbo/adapter_model.safetensors", "base/transformer/config.json",
              "base/transformer/diffusion_pytorch_model.safetensors", "prompt.safetensors",
              "prompt_fl2va.safetensors"]:
        check(os.path.isfile(os.path.join(ck, f)), f"missing {f}")
    spec = json.load(open(os.path.join(ck, "model_spec.json")))
    check(spec["format_version"] == 2 and spec["transforms"][0]["type"] == "hybrid_attention" and
          spec["transforms"][0]["version"] == 2 and len(spec["adapters"]) == 2 and
          spec["base"]["class_name"] == "MiniMaxH3Transformer3DModel",
          "model_spec.json structure")
    meta = json.load(open(os.path.join(ck, "metadata.json")))
    check(meta["kind"] == "weights" and meta["checkpoint_format_version"] == 2, "metadata.json")
    turbo = json.load(open(os.path.join(ck, "adapters/turbo/adapter_spec.json")))["config"]
    check(turbo["rank_pattern"] and turbo["alpha"] != turbo["rank"], "turbo has mixed ranks")

    r = run("inspect", ck, "--json")
    check(r.returncode == 0, f"inspect: {r.stderr}")
    if r.returncode == 0:
        j = json.loads(r.stdout)
        check(j["layout"] == "diffusers" and j["vdn"] and j["tensors"] == 62 + 32 and
              len(j["identity"]) == 64 and [a["name"] for a in j["adapters"]] ==
              ["default", "turbo"] and j["adapters"][0]["targets"] == 16 and
              j["config"]["alpha_rank"] == 8, f"inspect json {j}")
        # bytes by dtype from the files themselves (F32 base modules; BF16 everything else)
        check(j["bytes_by_dtype"]["F32"] == 4 * (64 * 96 + 64 + 64 * 32 + 64 + 64 * 32 + 64 +
                                                 32 * 64 + 32 + 96 * 64 + 96 + 32 * 64 + 32),
              f"F32 bytes {j['bytes_by_dtype']}")
    r = run("inspect", ck)
    check(r.returncode == 0 and "adapter     turbo" in r.stdout, f"inspect text: {r.stdout}")

    # a broken checkpoint: clear message, exit 1
    bad = os.path.join(tmp, "bad")
    shutil.copytree(ck, bad)
    with open(os.path.join(bad, "linear_branch/model.safetensors"), "r+b") as f:
        f.truncate(200)
    r = run("inspect", bad)
    check(r.returncode == 1 and "linear_branch/model.safetensors" in r.stderr,
          f"truncated branch: {r.returncode} {r.stderr}")

    # a second init into the same directory replaces the first: no stale shards, index,
    # adapters or model_spec.json survive
    re = os.path.join(tmp, "reinit")
    r1 = run("ckpt", "init", "--preset", "tiny", "--vdn", "--adapters", "default,turbo",
             "--shard-mb", "0.05", "--out", re)
    r2 = run("ckpt", "init", "--preset", "tiny", "--out", re, "--seed", "2")
    check(r1.returncode == 0 and r2.returncode == 0, f"reinit: {r1.stderr} {r2.stderr}")
    check(sorted(os.listdir(re)) == ["prompt.safetensors", "prompt_fl2va.safetensors",
                                     "transformer"], f"after reinit: {sorted(os.listdir(re))}")
    r = run("inspect", re, "--json")
    check(r.returncode == 0 and not json.loads(r.stdout)["vdn"], f"reinit inspect: {r.stderr}")

    # end to end: same seed, diffusers vs native layout, identical render
    nat = os.path.join(tmp, "vdn_native")
    r = run("ckpt", "init", "--preset", "tiny", "--vdn", "--adapters", "default,turbo",
            "--seed", "4", "--layout", "native", "--out", nat)
    check(r.returncode == 0, f"init native: {r.stderr}")
    outs = []
    for d in (ck, nat):
        prefix = os.path.join(d, "render")
        r = run("render", "--checkpoint", d, "--prompt-cache", os.path.join(ck, "prompt.safetensors"),
                "--frames", "22", "--height", "64", "--width", "64", "--steps", "2", "--seed", "9",
                "--out", prefix, "--cpu", "--threads", "1", "--quiet")
        check(r.returncode == 0, f"render on {d}: {r.stderr}")
        outs.append(read_st(prefix + ".safetensors") if r.returncode == 0 else {})
    if outs[0] and outs[1]:
        check(set(outs[0]) == {"video", "audio"}, f"render tensors {set(outs[0])}")
        for k in outs[0]:
            check(np.array_equal(outs[0][k], outs[1][k]), f"{k} differs between layouts")
            check(np.isfinite(outs[0][k]).all() and 0.1 < outs[0][k].std() < 10,
                  f"{k}: activations not O(1) (std {outs[0][k].std()})")
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
