"""Keyframe pictures through the farm on the embedded default (`vdn up`: tiny random VAEs with
their encoder, tiny text encoder with its vision tower, real tokenizer):

  - one FL2VA job (first_frame + last_frame, local paths under the farm's data root) and one I2VA
    job (first_frame as an object of the farm's store, by its URI) render to mp4s in the store; their run records
    name the pictures' SHA-256 (hashlib's) and anchors;
  - the same FL2VA request again is a cache hit (the pictures are part of the key);
  - a truncated picture fails once, as the job's fault, naming the field and the file; the worker
    is not blocklisted and the next good job renders.
"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(__file__))
from harness import check, log, main, sanitizer_reports


def records(store):
    out = []
    for root, _, files in os.walk(store):
        for f in files:
            p = os.path.join(root, f)
            if f.endswith(".json") and "prompt-cache" not in p and "/eval/" not in p:
                out.append(json.load(open(p)))
    return out


def submit_and_wait(vdn, d, lines, name, expect_ok=True):
    req = os.path.join(d, name + ".jsonl")
    with open(req, "w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    r = subprocess.run([vdn, "submit", req, "--dir", d], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, "vdn submit %s: %s%s" % (name, r.stdout, r.stderr))
    m = re.search(r"\bb?(\d+)\b", r.stdout)
    check(m, "no batch id in %r" % r.stdout)
    w = subprocess.run([vdn, "watch", "b" + m.group(1), "--dir", d], capture_output=True,
                       text=True, timeout=400)
    check((w.returncode == 0) == expect_ok, "vdn watch %s: %d %s%s" %
          (name, w.returncode, w.stdout[-2000:], w.stderr[-2000:]))
    return "b" + m.group(1)


def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def test(args):
    vdn = os.path.abspath(args.vdn)
    d = tempfile.mkdtemp(prefix="vdn-e2e-pictures-")
    ok = False
    try:
        r = subprocess.run([vdn, "up", d, "--detach", "--cpu"], capture_output=True, text=True,
                           timeout=120)
        check(r.returncode == 0, "vdn up: %s%s" % (r.stdout, r.stderr))
        conf = dict(l.split("=", 1) for l in open(os.path.join(d, "vdn.conf")).read().split("\n")
                    if "=" in l and not l.startswith("#"))
        conf = {k.strip(): v.strip() for k, v in conf.items()}
        store = conf["store"][len("file://"):]

        pics = os.path.join(d, "pictures")
        os.makedirs(pics)
        y, x = np.mgrid[0:64, 0:96]
        Image.fromarray(np.stack([x * 2, y * 3, (x * y) % 256], -1).astype(np.uint8)).save(
            os.path.join(pics, "first.png"))
        Image.fromarray(np.stack([255 - y * 3, x * 2, (x + y) % 256], -1).astype(np.uint8)).save(
            os.path.join(pics, "last.jpg"), quality=90)
        # the I2VA picture lives in the store, named by its URI
        os.makedirs(os.path.join(store, "inputs"), exist_ok=True)
        shutil.copy(os.path.join(pics, "first.png"), os.path.join(store, "inputs", "start.png"))
        data = open(os.path.join(pics, "first.png"), "rb").read()
        open(os.path.join(pics, "cut.png"), "wb").write(data[: len(data) // 2])

        job = {"frames": 22, "height": 64, "width": 96, "steps": 1,
               "prompt": "A paper boat drifts down a rain gutter."}
        fl = dict(job, first_frame=os.path.join(pics, "first.png"),
                  last_frame=os.path.join(pics, "last.jpg"), seed=1, out="pics/fl2va")
        i2 = dict(job, first_frame=conf["store"] + "/inputs/start.png", seed=2, out="pics/i2va")
        submit_and_wait(vdn, d, [fl, i2], "pictures")
        for name, want in (("fl2va", [("first", "first.png"), ("last", "last.jpg")]),
                           ("i2va", [("first", "first.png")])):
            mp4 = os.path.join(store, "pics", name + ".mp4")
            check(os.path.exists(mp4), "no %s in the store" % mp4)
            p = subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v",
                                "-show_entries", "stream=width,height,nb_read_frames", "-of", "json",
                                mp4], capture_output=True, text=True)
            s = json.loads(p.stdout or "{}").get("streams", [{}])[0]
            check((s.get("width"), s.get("height"), s.get("nb_read_frames")) == (96, 64, "22"),
                  "%s: ffprobe says %s" % (name, s))
            rec = json.load(open(os.path.join(store, "pics", name + ".json")))
            kf = rec.get("text_prompt", {}).get("keyframes", [])
            got = [(k.get("anchor"), k.get("sha256")) for k in kf]
            check(got == [(a, sha(os.path.join(pics, f))) for a, f in want],
                  "%s record keyframes %s" % (name, kf))
        log("FL2VA (local pictures) and I2VA (a store key): mp4s in the store, records name the "
            "pictures' hashes")

        again = dict(fl, seed=3, out="pics/again")
        submit_and_wait(vdn, d, [again], "again")
        rec = json.load(open(os.path.join(store, "pics", "again.json")))
        check(rec.get("text_prompt", {}).get("cache") == "hit",
              "the same pictures and prompt again: %s" % rec.get("text_prompt"))

        bad = dict(job, first_frame=os.path.join(pics, "cut.png"), seed=4, out="pics/bad")
        b = submit_and_wait(vdn, d, [bad], "bad", expect_ok=False)
        r = subprocess.run([vdn, "status", b, "--dir", d, "--json"], capture_output=True,
                           text=True, timeout=60)
        j = json.loads(r.stdout)["jobs"][0]
        text = json.dumps(j)
        check(j.get("state") == "failed" and "first_frame" in text and "cut.png" in text,
              "the truncated picture's failure: %s" % {k: v for k, v in j.items()
                                                       if k not in ("request", "source_line")})
        check(j.get("attempts") == 1, "the truncated picture was tried %s times" % j.get("attempts"))
        submit_and_wait(vdn, d, [dict(fl, seed=5, out="pics/after")], "after")
        check(os.path.exists(os.path.join(store, "pics", "after.mp4")),
              "a good job after the bad picture did not render (worker blocklisted?)")
        log("a truncated picture: failed once as the job's, naming first_frame and the file; "
            "the worker renders on")

        r = subprocess.run([vdn, "up", d, "--stop"], capture_output=True, text=True, timeout=90)
        check(r.returncode == 0, "vdn up --stop: %s%s" % (r.stdout, r.stderr))
        logs = [os.path.join(d, "logs", f) for f in os.listdir(os.path.join(d, "logs"))]
        reports = sanitizer_reports(logs)
        check(not reports, "sanitizer reports: %s" % reports[:5])
        ok = True
    finally:
        subprocess.run([vdn, "up", d, "--stop"], capture_output=True, timeout=90)
        if ok and not args.keep:
            shutil.rmtree(d, ignore_errors=True)
        else:
            log("left %s" % d)


if __name__ == "__main__":
    main(test)
