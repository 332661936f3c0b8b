"""The text encoder's precision at the command line, on the tiny random checkpoint (CPU):

  vdn encode --precision bf16|fp8: bf16 is the default (the same bytes); fp8 writes
      text_encoder_precision "fp8" into the file's metadata and says so on stdout, and its
      prompt_embeds differ from bf16's by the quantisation's error (within the bounds
      test_encoder.c argues from e4m3's precision: 1e-2 .. 7.2e-2 x sqrt(layers));
  vdn bench text-encoder --precision fp8: runs (finite output) and holds less than bf16;
  bad values refused with a message naming the option and the choices: vdn encode, vdn bench
      text-encoder, vdn worker --text-precision and text_precision in its config file.

argv: VDN_BINARY TOKENIZER_JSON WORKDIR"""
import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "ops", "test"))
import st  # noqa: E402

VDN, TOK, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
PROMPT = "A cat walks slowly across a wet rooftop at night, rain on the tiles."
check = st.check


def run(*args):
    return subprocess.run([VDN, *args], capture_output=True, text=True, timeout=300)


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
ck = os.path.join(WORK, "ckpt")
p = run("ckpt", "init", "--preset", "tiny", "--text-encoder", "--tokenizer-json", TOK, "--out", ck)
check(p.returncode == 0, "vdn ckpt init --preset tiny --text-encoder: " + p.stderr[-500:])
layers = json.load(open(os.path.join(ck, "text_encoder", "config.json")))
layers = layers.get("text_config", layers)["num_hidden_layers"] - 1  # the default hidden_states

files = {}
for name, extra in (("default", []), ("bf16", ["--precision", "bf16"]),
                    ("fp8", ["--precision", "fp8"])):
    out = os.path.join(WORK, name + ".safetensors")
    p = run("encode", PROMPT, "--checkpoint", ck, "-o", out, "--cpu", *extra)
    check(p.returncode == 0, "vdn encode %s: %s" % (name, p.stderr[-500:]))
    files[name] = (out, p.stdout)

if all(os.path.exists(f) for f, _ in files.values()):
    check(open(files["default"][0], "rb").read() == open(files["bf16"][0], "rb").read(),
          "--precision bf16 writes the default's bytes")
    m16, t16 = st.read_arrays(files["bf16"][0])
    m8, t8 = st.read_arrays(files["fp8"][0])
    check(m16.get("text_encoder_precision") == "bf16", "bf16 file metadata: %s" % m16)
    check(m8.get("text_encoder_precision") == "fp8", "fp8 file metadata: %s" % m8)
    check(m8.get("text_encoder") == m16.get("text_encoder"),
          "the encoder identity names the checkpoint alike at both precisions")
    check("fp8" in files["fp8"][1] and "bf16" in files["bf16"][1],
          "vdn encode says the precision: %r / %r" % (files["fp8"][1], files["bf16"][1]))
    a, b = t16["prompt_embeds"].astype(np.float64), t8["prompt_embeds"].astype(np.float64)
    check(a.shape == b.shape and np.isfinite(b).all(), "fp8 prompt_embeds shape and finite")
    e = np.linalg.norm(b - a) / np.linalg.norm(a)
    hi = 7.2e-2 * math.sqrt(layers)
    print("fp8 vs bf16 prompt_embeds: %.3e relative L2 (bounds 1e-2 .. %.3e)" % (e, hi))
    check(1e-2 < e < hi, "fp8 prompt_embeds differ by %.3e, expected 1e-2 .. %.3e" % (e, hi))

# the bench at both precisions on the tiny shapes
peaks = {}
for prec in ("bf16", "fp8"):
    js = os.path.join(WORK, "bench_%s.json" % prec)
    p = run("bench", "text-encoder", "--cpu", "--config", os.path.join(ck, "text_encoder"),
            "--tokens", "16", "--reps", "1", "--precision", prec, "--json", js)
    check(p.returncode == 0, "vdn bench text-encoder --precision %s: %s" % (prec, p.stderr[-500:]))
    if p.returncode == 0:
        r = json.load(open(js))
        check(r.get("precision") == prec and r.get("finite") is True,
              "bench json %s: %s" % (prec, r))
        peaks[prec] = r.get("peak_bytes", 0)
if len(peaks) == 2:
    check(0 < peaks["fp8"] < peaks["bf16"], "fp8 bench peak %d below bf16's %d" %
          (peaks["fp8"], peaks["bf16"]))

# bad values, each a usage error naming the option and the choices
out = os.path.join(WORK, "bad.safetensors")
for what, args, needle in (
        ("vdn encode", ["encode", PROMPT, "--checkpoint", ck, "-o", out, "--cpu", "--precision",
                        "fp16"], "--precision 'fp16': expected bf16 or fp8"),
        ("vdn bench text-encoder", ["bench", "text-encoder", "--cpu", "--precision", "FP8"],
         "--precision 'FP8': expected bf16 or fp8"),
        ("vdn worker", ["worker", "--connect", "tcp://127.0.0.1:9", "--checkpoint", ck,
                        "--text-precision", "int8"], "--text-precision")):
    p = run(*args)
    check(p.returncode == 2 and needle in p.stderr and "expected bf16 or fp8" in p.stderr,
          "%s refuses a bad precision: rc %d, %r" % (what, p.returncode, p.stderr[-300:]))
check(not os.path.exists(out), "a refused vdn encode wrote nothing")
conf = os.path.join(WORK, "bad.conf")
with open(conf, "w") as f:
    f.write("worker_endpoint = tcp://127.0.0.1:9\ncheckpoint = %s\ntext_precision = e5m2\n" % ck)
p = run("worker", "--config", conf)
check(p.returncode == 2 and "text_precision" in p.stderr and "'e5m2'" in p.stderr and
      "expected bf16 or fp8" in p.stderr,
      "text_precision = e5m2 in the config refused: rc %d, %r" % (p.returncode, p.stderr[-300:]))

if st.failures:
    print("%d check(s) failed" % len(st.failures))
    sys.exit(1)
print("text_precision_cli: ok")
