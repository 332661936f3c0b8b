"""cli_env: the environment variables the docs name still work, now that only the vdn command
reads them (cli/env.h) and hands them to the libraries as options:
  - VDN_TOKENIZER_JSON: `vdn ckpt init --text-encoder` copies that file (byte for byte), and a
    missing one fails naming it;
  - VDN_LOG_LEVEL=error: no info lines (a text encode logs its encoder's load at info);
  - VDN_TEXT_ENCODER_KEEP_FREE_GIB=abc: the warning that it is ignored;
  - VDN_BASE_DIR: a VDN checkpoint whose base moved opens with it, and fails naming it without;
  - VDN_COORDINATOR (farm builds): a client command's "no reply" names it as the endpoint's source.
usage: test_env.py VDN TOKENIZER_JSON WORKDIR [farm]
"""
import os
import shutil
import subprocess
import sys

vdn, tok_json, work = sys.argv[1], sys.argv[2], sys.argv[3]
farm = len(sys.argv) > 4 and sys.argv[4] == "farm"
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
os.chdir(work)
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAILED: " + what)


def run(*args, **env):
    e = {k: v for k, v in os.environ.items() if not k.startswith("VDN_")}
    e.update(env)
    return subprocess.run([vdn, *args], env=e, capture_output=True, text=True, timeout=300)


r = run("ckpt", "init", "--preset", "tiny", "--text-encoder", "--out", "ck", VDN_TOKENIZER_JSON=tok_json)
check(r.returncode == 0, f"ckpt init with VDN_TOKENIZER_JSON: {r.stderr[-400:]}")
check(os.path.exists("ck/tokenizer/tokenizer.json") and
      open("ck/tokenizer/tokenizer.json", "rb").read() == open(tok_json, "rb").read(),
      "the tokenizer copied is not VDN_TOKENIZER_JSON's")
r = run("ckpt", "init", "--preset", "tiny", "--text-encoder", "--out", "ck2",
        VDN_TOKENIZER_JSON=os.path.abspath("no-such-tokenizer.json"))
check(r.returncode != 0 and "no-such-tokenizer.json" in r.stderr,
      f"a missing VDN_TOKENIZER_JSON: rc {r.returncode} {r.stderr[-300:]!r}")

enc = ["encode", "A cat on a roof.", "--checkpoint", "ck", "--cpu", "-o", "p.safetensors"]
r = run(*enc)
check(r.returncode == 0 and " info " in r.stderr, f"encode logs its load at info: {r.stderr[-300:]!r}")
r = run(*enc, VDN_LOG_LEVEL="error")
check(r.returncode == 0 and " info " not in r.stderr and " warn " not in r.stderr,
      f"VDN_LOG_LEVEL=error still logs: {r.stderr[-300:]!r}")
r = run(*enc, VDN_TEXT_ENCODER_KEEP_FREE_GIB="abc")
check(r.returncode == 0 and "VDN_TEXT_ENCODER_KEEP_FREE_GIB='abc' is not a number" in r.stderr,
      f"a bad VDN_TEXT_ENCODER_KEEP_FREE_GIB is not named: {r.stderr[-300:]!r}")

r = run("ckpt", "init", "--preset", "tiny", "--vdn", "--out", "v")
check(r.returncode == 0, f"ckpt init --vdn: {r.stderr[-300:]}")
os.rename("v/base", "moved-base")
r = run("inspect", "v")
check(r.returncode != 0 and "base checkpoint not found" in r.stderr,
      f"a moved base without VDN_BASE_DIR: rc {r.returncode} {r.stderr[-300:]!r}")
r = run("inspect", "v", VDN_BASE_DIR=os.path.abspath("moved-base"))
check(r.returncode == 0, f"VDN_BASE_DIR not honoured: {r.stderr[-300:]!r}")

if farm:
    r = run("ls", "--timeout", "1", VDN_COORDINATOR="tcp://127.0.0.1:1")
    check(r.returncode == 3 and "tcp://127.0.0.1:1 (endpoint from $VDN_COORDINATOR)" in r.stderr,
          f"VDN_COORDINATOR: rc {r.returncode} {r.stderr[-300:]!r}")

print("cli_env: " + ("ok" if not failures else f"{failures} check(s) failed"))
sys.exit(1 if failures else 0)
