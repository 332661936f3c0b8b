"""The DiT's precision in the farm: `vdn up --precision bf16,fp8` starts workers with an engine
per precision; one batch holds the same request at bf16 and at fp8 ("precision" field). Each run
record names the precision its job asked for, and the two outputs differ (on the CPU backend fp8
runs the quantised oracle, engine/test/test_render_fp8.py: its velocity differs from the
unquantised one by 1e-3..7e-2 relative, so latents after two steps cannot be equal). Then a
bf16-only farm gets an fp8 job: `vdn submit` refuses it, naming the field and the reason (no
worker renders precision fp8); with --allow-wait it is queued, not placed, and `vdn status` and
`vdn logs` say why instead of leaving it queued in silence; likewise an fp8-only farm for a job
that names no precision (bf16)."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import FRAMES, check, log, main


def conf(path):
    out = {}
    for line in open(path):
        line = line.strip()
        if line and not line.startswith("#"):
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def run(vdn, *args, timeout=120):
    return subprocess.run([vdn, *args], capture_output=True, text=True, timeout=timeout)


def up(vdn, d, *extra):
    r = run(vdn, "up", d, "--detach", "--cpu", *extra, timeout=180)
    check(r.returncode == 0, "vdn up %s: %d %s%s" % (" ".join(extra), r.returncode, r.stdout,
                                                     r.stderr))
    return conf(os.path.join(d, "vdn.conf"))


def submit(vdn, d, lines, *extra):
    req = os.path.join(d, "requests.jsonl")
    with open(req, "w") as f:
        for x in lines:
            f.write(json.dumps(x) + "\n")
    r = run(vdn, "submit", req, "--dir", d, *extra)
    check(r.returncode == 0, "vdn submit: %s%s" % (r.stdout, r.stderr))
    m = re.search(r"\bb?(\d+)\b", r.stdout)
    check(m, "no batch id in %r" % r.stdout)
    return m.group(1)


def store_files(store, prefix):
    """The objects whose key starts with prefix, by their ending (".json", ".safetensors")."""
    out = {}
    for root, _, files in os.walk(store):
        for f in files:
            p = os.path.join(root, f)
            key = os.path.relpath(p, store)
            if key.startswith(prefix):
                out[key[len(prefix):]] = p
    return out


def both_precisions(vdn, d):
    c = up(vdn, d, "--precision", "bf16,fp8")
    prompt = os.path.join(c["checkpoint"], "prompt.safetensors")
    base = {"prompt_cache": prompt, "frames": FRAMES, "height": 32, "width": 32, "steps": 2,
            "seed": 7, "save_latents": True}
    batch = submit(vdn, d, [dict(base, out="prec/bf16/out"),
                            dict(base, out="prec/fp8/out", precision="fp8")])
    w = run(vdn, "watch", "b" + batch, "--dir", d, timeout=140)
    check(w.returncode == 0, "vdn watch: %d %s%s" % (w.returncode, w.stdout[-2000:], w.stderr))
    store = c["store"][len("file://"):]
    latents = {}
    for prec in ("bf16", "fp8"):
        objs = store_files(store, "prec/%s/" % prec)
        recs = [p for k, p in objs.items() if k.endswith(".json")]
        check(len(recs) == 1, "%s job: expected one run record, found %s" % (prec, sorted(objs)))
        rec = json.load(open(recs[0]))
        check(rec.get("precision") == prec,
              "%s job: run record says precision %r" % (prec, rec.get("precision")))
        lat = [p for k, p in objs.items() if k.endswith(".safetensors")]
        check(len(lat) == 1, "%s job: expected its latents, found %s" % (prec, sorted(objs)))
        latents[prec] = open(lat[0], "rb").read()
    check(latents["bf16"] != latents["fp8"],
          "the bf16 and fp8 jobs wrote identical latents: the fp8 engine did not render")
    # the worker says what it loaded
    ws = run(vdn, "workers", "--dir", d)
    check(ws.returncode == 0 and "precision bf16,fp8" in ws.stdout,
          "vdn workers does not list precision bf16,fp8: %s%s" % (ws.stdout, ws.stderr))
    r = run(vdn, "up", d, "--stop", timeout=90)
    check(r.returncode == 0, "vdn up --stop: %s%s" % (r.stdout, r.stderr))
    log("bf16,fp8 farm: each job's record names its precision, the outputs differ")
    return c["checkpoint"]


def waits_with_reason(vdn, d, ckpt, farm, job, missing):
    """A farm started with `farm` (vdn up options) gets a job with `job` (extra request fields)
    whose precision `missing` none of its workers loaded."""
    up(vdn, d, "--checkpoint", ckpt, *farm)
    prompt = os.path.join(ckpt, "prompt.safetensors")
    line = dict({"prompt_cache": prompt, "frames": FRAMES, "height": 32, "width": 32, "steps": 2,
                 "seed": 7}, **job)
    want = "no worker renders precision %s" % missing
    t0 = time.time()
    while "idle" not in run(vdn, "workers", "--dir", d).stdout:
        check(time.time() - t0 < 60, "no worker registered")
        time.sleep(0.3)
    req = os.path.join(d, "refused.jsonl")
    with open(req, "w") as f:
        f.write(json.dumps(line) + "\n")
    r = run(vdn, "submit", req, "--dir", d)
    check(r.returncode != 0 and "refused.jsonl:1: field 'precision': " + want in r.stderr and
          "--allow-wait" in r.stderr, "vdn submit did not refuse it: %d %s%s"
          % (r.returncode, r.stdout, r.stderr))
    batch = submit(vdn, d, [line], "--allow-wait")
    t0 = time.time()
    while True:
        st = run(vdn, "status", "b" + batch, "--dir", d)
        if want in st.stdout:
            break
        check(time.time() - t0 < 60, "vdn status never said %r: %s%s" % (want, st.stdout,
                                                                          st.stderr))
        time.sleep(0.5)
    check("queued" in st.stdout, "the fp8 job is not queued: %s" % st.stdout)
    m = re.search(r"\bj(\d+)\b", st.stdout)
    check(m, "no job id in %r" % st.stdout)
    lg = run(vdn, "logs", "j" + m.group(1), "--dir", d)
    check(lg.returncode == 0 and "unplaceable" in lg.stdout and want in lg.stdout,
          "vdn logs lacks the reason: %s%s" % (lg.stdout, lg.stderr))
    # said once, however many times the placement ran since
    time.sleep(2)
    lg = run(vdn, "logs", "j" + m.group(1), "--dir", d)
    check(lg.stdout.count("unplaceable") == 1,
          "the reason was repeated: %s" % lg.stdout)
    coord_log = open(os.path.join(d, "logs", "coordinator.log"), errors="replace").read()
    check(want in coord_log, "the coordinator's log lacks %r" % want)
    r = run(vdn, "up", d, "--stop", timeout=90)
    check(r.returncode == 0, "vdn up --stop: %s%s" % (r.stdout, r.stderr))
    log("%s farm: the %s job waits with a clear reason" % (" ".join(farm) or "bf16-only", missing))


def test(args):
    vdn = os.path.abspath(args.vdn)
    d = tempfile.mkdtemp(prefix="vdn-e2e-precision-")
    ok = False
    try:
        bad = run(vdn, "up", os.path.join(d, "bad"), "--cpu", "--precision", "fp8,fp8", timeout=60)
        check(bad.returncode != 0 and "--precision 'fp8,fp8'" in bad.stderr,
              "vdn up --precision fp8,fp8: %d %s" % (bad.returncode, bad.stderr))
        # vdn worker refuses a bad list before loading anything, naming the option and value
        for v in ("fp4", "bf16,", "bf16,bf16", "fp8;bf16"):
            bad = run(vdn, "worker", "--connect", "tcp://127.0.0.1:1", "--checkpoint", d,
                      "--cpu", "--precision", v, timeout=60)
            check(bad.returncode != 0 and
                  "--precision (or precision in the config) '%s': expected bf16, fp8 or "
                  "bf16,fp8" % v in bad.stderr,
                  "vdn worker --precision %s: %d %s" % (v, bad.returncode, bad.stderr))
        # ... and so does a cluster config's precision key
        cf = os.path.join(d, "cluster.conf")
        with open(cf, "w") as f:
            f.write("worker_endpoint = tcp://127.0.0.1:1\ncheckpoint = %s\nprecision = fp9\n" % d)
        bad = run(vdn, "worker", "--config", cf, "--cpu", timeout=60)
        check(bad.returncode != 0 and "precision in the config) 'fp9'" in bad.stderr,
              "vdn worker --config with precision = fp9: %d %s" % (bad.returncode, bad.stderr))
        ckpt = both_precisions(vdn, os.path.join(d, "both"))
        # --precision left out: bf16 only
        waits_with_reason(vdn, os.path.join(d, "bf16"), ckpt, [], {"precision": "fp8"}, "fp8")
        # an fp8-only farm and a job that names no precision (bf16)
        waits_with_reason(vdn, os.path.join(d, "fp8"), ckpt, ["--precision", "fp8"], {}, "bf16")
        ok = True
    finally:
        for sub in ("both", "bf16", "fp8"):
            if os.path.exists(os.path.join(d, sub, "vdn.conf")):
                run(vdn, "up", os.path.join(d, sub), "--stop", timeout=90)
        if ok and not args.keep:
            shutil.rmtree(d, ignore_errors=True)
        else:
            log("left %s" % d)


if __name__ == "__main__":
    main(test)
