"""The coordinator's status page and metrics (issue 11): `vdn coordinator --http` on loopback
with a token; /metrics read by the Prometheus project's own text parser (python3-prometheus-
client) while jobs run and after, checked against the database; the page loaded in headless
Chromium, its live tables checked in the DOM and a screenshot kept (e2e_http_screenshot.png in
the test's working folder); beyond loopback only with TLS and a token (a self-signed pair from
openssl), served over HTTPS."""
import hashlib
import hmac
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from harness import Farm, SkipTest, check, free_port, log, main

TOKEN = "e2e-status-token-0123456789"


def get(url, token=None, ctx=None):
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def metrics(base):
    from prometheus_client.parser import text_string_to_metric_families
    st, body = get(base + "/metrics", TOKEN)
    check(st == 200, "/metrics: HTTP %d %s" % (st, body[:200]))
    fams = {f.name: f for f in text_string_to_metric_families(body)}
    return fams, body


def samples(fams, name, suffix=""):
    return {tuple(sorted(s.labels.items())): s.value for s in fams[name].samples
            if s.name == name + suffix}


def check_histogram(fams, name, count):
    f = fams.get(name)
    check(f is not None and f.type == "histogram", "%s missing or not a histogram" % name)
    buckets = [(s.labels["le"], s.value) for s in f.samples if s.name == name + "_bucket"]
    vals = [v for _, v in buckets]
    check(vals == sorted(vals), "%s buckets not cumulative: %s" % (name, buckets))
    check(buckets[-1][0] == "+Inf" and buckets[-1][1] == count, "%s +Inf bucket %s, expected %d"
          % (name, buckets[-1], count))
    n = [s.value for s in f.samples if s.name == name + "_count"]
    check(n == [count], "%s_count %s, expected %d" % (name, n, count))


def signed_media(body, job, token):
    """The page's poster and mp4 links of a done job carry ?exp=&sig=, an HMAC-SHA256 of
    "vdn media jJOB EXP" under the token (checked here with Python's hmac, not our code), good
    for an hour or more; never the token itself. True when both links are there and right."""
    ok = 0
    for what, attr in (("poster.png", "src"), ("video.mp4", "href")):
        m = re.search(r'%s="media/j%d/%s\?exp=(\d+)&amp;sig=([0-9a-f]{64})"'
                      % (attr, job, re.escape(what)), body)
        if not m:
            continue
        exp, sig = int(m.group(1)), m.group(2)
        want = hmac.new(token.encode(), ("vdn media j%d %d" % (job, exp)).encode(),
                        hashlib.sha256).hexdigest()
        ok += sig == want and exp > time.time() + 3000
    return ok == 2 and token not in body


def chromium_page(url, shot):
    chrome = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chrome:
        raise SkipTest("chromium not installed")
    prof = tempfile.mkdtemp(prefix="vdn-e2e-chrome-")
    flags = [chrome, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--user-data-dir=" + prof, "--virtual-time-budget=6000", "--run-all-compositor-"
             "stages-before-draw"]
    try:
        subprocess.run(flags + ["--screenshot=" + shot, "--window-size=1400,1000", url],
                       capture_output=True, timeout=120)
        dom = subprocess.run(flags + ["--dump-dom", url], capture_output=True, text=True,
                             timeout=120).stdout
    finally:
        shutil.rmtree(prof, ignore_errors=True)
    return dom


def stand_in_gpus(farm, n):
    """The stand-in nvidia-smi of the farm tests (e2e_gpus, e2e_multigpu): n H200s."""
    smi = os.path.join(farm.dir, "nvidia-smi")
    with open(smi, "w") as f:
        f.write("#!/bin/sh\ncase \"$*\" in *--query-gpu=index,name,memory.total*) ;; "
                "*) exit 9;; esac\nfor i in $(seq 0 %d); do echo \"$i, NVIDIA H200, 143771\"; "
                "done\n" % (n - 1))
    os.chmod(smi, 0o755)
    return smi


def gpu_samples(fams, name, worker):
    """{gpu index: (labels, value)} of one per-GPU family for one worker."""
    return {int(s.labels["gpu"]): (s.labels, s.value) for s in fams[name].samples
            if s.labels.get("worker") == worker}


def multi_gpu_worker(farm, base):
    """A 4-GPU worker on stand-in GPUs runs a job per GPU; GPU 3 faults (VDN_TEST_GPU_FAULT) and
    goes out of service. /metrics must say so per GPU (state, memory in use, job) and the page
    must list the worker's GPUs with their jobs, progress and memory, and all its jobs."""
    farm.kill("w")  # idle: every job of this part goes to the 4-GPU worker
    t0 = time.time()
    while farm.q("SELECT state FROM workers WHERE id='w'") != [("gone",)]:
        check(time.time() - t0 < 15, "the killed worker w is not gone")
        time.sleep(0.1)
    env = dict(farm.env, VDN_NVIDIA_SMI=stand_in_gpus(farm, 4), VDN_TEST_NFE_DELAY_MS="600",
               VDN_TEST_GPU_FAULT="3")
    # a checkpoint with the video and audio VAEs: these jobs store out.mp4 and out.png
    ckpt = os.path.join(farm.dir, "ckptv")
    farm.run(["ckpt", "init", "--preset", "tiny", "--vdn", "--vae", "--out", ckpt], timeout=120)
    farm.spawn("g4", ["worker", "--connect", farm.worker_ep, "--checkpoint", ckpt,
                      "--store", farm.store, "--id", "g4", "--scratch",
                      os.path.join(farm.dir, "scratch"), "--heartbeat-seconds",
                      str(farm.heartbeat), "--threads", "1", "--data-root", farm.dir], env=env)
    path = os.path.join(farm.dir, "gpus.jsonl")
    with open(path, "w") as f:
        for seed in range(4):  # ~16 x 0.6 s each: long enough for Chromium to see them run
            f.write(json.dumps({"prompt_cache": farm.prompt, "frames": 56, "height": 32,
                                "width": 32, "steps": 16, "seed": 50 + seed}) + "\n")
    r = farm.run(["submit", path, "--coordinator", farm.client_ep, "--json"])
    batch = int(re.search(r'"batch_id"\s*:\s*(\d+)', r.stdout).group(1))
    t0 = time.time()
    while True:
        fams, body = metrics(base)
        on = [s.labels for s in fams["vdn_gpu_state"].samples
              if s.labels["worker"] == "g4" and s.value == 1]
        state = {int(l["gpu"]): l["state"] for l in on}
        busy = sorted(g for g, s in state.items() if s == "busy")
        if state.get(3) == "out_of_service" and len(busy) >= 2:
            break
        check(time.time() - t0 < 40, "never saw GPU 3 out of service beside 2 busy GPUs:\n"
              + "\n".join(l for l in body.splitlines() if "g4" in l))
        time.sleep(0.2)
    check(len(on) == 4 and sorted(state) == [0, 1, 2, 3],
          "vdn_gpu_state: one state per GPU expected: %s" % on)
    totals = {l["state"]: v for l, v in ((s.labels, s.value) for s in fams["vdn_gpus"].samples)}
    check(totals["out_of_service"] == 1 and totals["busy"] == len(busy) and
          sum(totals.values()) == 4, "vdn_gpus %s vs per-GPU %s" % (totals, state))
    used = gpu_samples(fams, "vdn_gpu_memory_used_bytes", "g4")
    check(all(used[g][1] > 0 for g in busy), "memory in use of busy GPUs: %s" % used)
    mem = gpu_samples(fams, "vdn_gpu_memory_bytes", "g4")
    check(all(v == 143771 * 1024 * 1024 for _, v in mem.values()), "GPU memory: %s" % mem)
    jobs = gpu_samples(fams, "vdn_gpu_job_info", "g4")
    running = {(a, j) for a, j in farm.q("SELECT id, job_id FROM attempts WHERE "
                                         "worker_id='g4' AND state='running'")}
    on_gpus = {(int(jobs[g][0]["attempt"]), int(jobs[g][0]["job"][1:])) for g in busy if g in jobs}
    check(len(on_gpus) == len(busy) and on_gpus <= running,
          "vdn_gpu_job_info %s vs running attempts %s" % (jobs, running))
    info = gpu_samples(fams, "vdn_gpu_info", "g4")
    check(info[3][0]["state"] == "out_of_service", "vdn_gpu_info of GPU 3: %s" % (info[3],))
    nrun = samples(fams, "vdn_worker_running_jobs")[(("worker", "g4"),)]
    check(nrun >= len(busy), "vdn_worker_running_jobs %s with %d busy GPUs" % (nrun, len(busy)))
    log("4-GPU worker: GPU states %s, memory in use %s, jobs %s"
        % (state, {g: used[g][1] for g in busy}, {g: jobs[g][0]["job"] for g in busy}))

    dom = chromium_page(base + "/#token=" + TOKEN, os.path.abspath("e2e_http_gpus_screenshot.png"))
    with open(os.path.abspath("e2e_http_gpus_dom.html"), "w") as f:
        f.write(dom)
    body = dom.split("<script")[0]  # the tables, not the script that draws them
    gpu_rows = re.findall(r'<tr class="gpu">(.*?)</tr>', body)
    check(len(gpu_rows) == 4, "the page shows %d GPU rows, expected 4:\n%s"
          % (len(gpu_rows), dom[:3000]))
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", r) for r in gpu_rows]
    check([c[0] for c in cells] == ["0", "1", "2", "3"] and
          all(c[1] == "NVIDIA H200" for c in cells), "GPU rows: %s" % cells)
    check("out_of_service" in cells[3][2] and "VDN_TEST_GPU_FAULT" in cells[3][6],
          "GPU 3's row does not say it is out of service: %s" % cells[3])
    shown = [c for c in cells if re.fullmatch(r"j\d+", c[3])]
    check(shown, "no GPU row names a running job: %s" % cells)
    for c in shown:
        check(re.search(r"\d+/16", c[4]) and re.search(r"[\d.]+ [MG]iB / 140 GiB", c[5]),
              "a busy GPU row without progress or memory in use: %s" % c)
    row = re.search(r'<tr class="worker"><td>g4</td>(.*?)</tr>', body)
    check(row, "no worker row for g4")
    listed = set(re.findall(r"j(\d+)", re.findall(r"<td>(.*?)</td>", row.group(1))[1]))
    check({c[3][1:] for c in shown} <= listed and len(listed) >= 2,
          "the worker row lists jobs %s, the GPU rows %s" % (listed, [c[3] for c in shown]))
    log("the page lists g4's 4 GPUs (jobs %s, GPU 3 out of service) and its jobs %s"
        % ([c[3] for c in shown], sorted(listed)))
    return batch


def raw_get(base, path, token=TOKEN):
    """GET with the path sent exactly as written (urllib would not fold '..', but be sure)."""
    import http.client
    host, port = base[len("http://"):].split(":")
    c = http.client.HTTPConnection(host, int(port), timeout=10)
    c.request("GET", path, headers={"Authorization": "Bearer " + token} if token else {})
    r = c.getresponse()
    return r.status, r.read()


def product(farm, base, batch):
    """The done jobs' posters and mp4s through the coordinator's HTTP server, byte for byte as
    the store holds them, and on the page; refusals for what is not a done job's output."""
    farm.wait_batch(batch, 4, timeout=90)
    root = farm.store_dir()
    jobs = farm.q("SELECT id, object_keys FROM jobs WHERE batch_id=? AND state='done'", batch)
    check(len(jobs) == 4, "jobs of batch %d done: %s" % (batch, jobs))
    import cv2
    import numpy as np
    for job, keys in jobs:
        keys, served = json.loads(keys), {}
        for kind, ext, ctype in (("poster.png", ".png", "image/png"),
                                 ("video.mp4", ".mp4", "video/mp4")):
            key = [k for k in keys if k.endswith(ext)]
            check(len(key) == 1, "job %d stored %s" % (job, keys))
            req = urllib.request.Request("%s/media/j%d/%s" % (base, job, kind))
            req.add_header("Authorization", "Bearer " + TOKEN)
            with urllib.request.urlopen(req, timeout=10) as r:
                body, got_type = r.read(), r.headers["Content-Type"]
            want = open(os.path.join(root, key[0]), "rb").read()
            check(got_type == ctype and body == want, "j%d %s: %s, %d bytes, store has %d"
                  % (job, kind, got_type, len(body), len(want)))
            served[kind] = body
        img = cv2.imdecode(np.frombuffer(served["poster.png"], np.uint8), cv2.IMREAD_COLOR)
        check(img is not None and img.shape[:2] == (32, 96),
              "j%d poster is not 3 frames of 32x32: %s" % (job, None if img is None else img.shape))
    failed = farm.q("SELECT id FROM jobs WHERE state='failed'")[0][0]
    job = jobs[0][0]
    for path in ("/media/j%d/poster.png" % failed, "/media/j999/poster.png",
                 "/media/j%d/../../vdn.db" % job, "/media/../vdn.db",
                 "/media/j%d/..%%2f..%%2fvdn.db" % job, "/media/j%d/out.png" % job):
        st, body = raw_get(base, path)
        check(st == 404 and not body.startswith(b"SQLite") and b"\x89PNG" not in body[:8],
              "%s: HTTP %d" % (path, st))
    check(get(base + "/media/j%d/poster.png" % job)[0] == 401, "a poster served without the token")
    dom = chromium_page(base + "/#token=" + TOKEN, os.path.abspath("e2e_http_media_screenshot.png"))
    body = dom.split("<script")[0]
    for j, _ in jobs:
        check(signed_media(body, j, TOKEN),
              "the page shows no signed poster and mp4 link for j%d" % j)
    m = re.search(r'src="(media/j%d/poster.png\?[^"]*)"' % job, body)
    check(m and raw_get(base, "/" + m.group(1).replace("&amp;", "&"), token=None)[0] == 200,
          "the page's signed poster link does not open it without the token")
    log("posters and mp4s of %d done jobs served byte for byte and shown on the page; a job "
        "that is not done, a missing job and traversal attempts get 404" % len(jobs))
    # the jobs table links each job to its own page (issue 27)
    check('href="job#j=%d"' % job in body, "no link to j%d's page" % job)
    job_page(farm, base, job)


def job_page(farm, base, job):
    """One job's page (/job#j=N): prompt and parameters, poster, an inline player for the mp4,
    every attempt with its worker, blame and timings, the log tail; its data /api/job/N."""
    st, js = get(base + "/api/job/%d" % job, TOKEN)
    d = json.loads(js)
    atts = farm.q("SELECT id, worker_id, state FROM attempts WHERE job_id=? ORDER BY id", job)
    check(st == 200 and d["job"]["job_id"] == job and d["job"]["state"] == "done" and
          [(a["attempt_id"], a["worker_id"], a["state"]) for a in d["attempts"]] == atts and
          any(e["kind"] == "done" for e in d["events"]) and d.get("media_link"),
          "/api/job/%d: %s" % (job, js[:400]))
    check(get(base + "/api/job/%d" % job)[0] == 401, "/api/job without the token")
    check(get(base + "/api/job/999999", TOKEN)[0] == 404, "/api/job of a missing job")
    dom = chromium_page(base + "/job#j=%d&token=%s" % (job, TOKEN),
                        os.path.abspath("e2e_http_job_screenshot.png"))
    body = dom.split("<script")[0]
    check(TOKEN not in body, "the job page shows the token")
    prompt = d["job"]["request"]["prompt_cache"]
    for want in ("job j%d (batch b%d): done" % (job, d["job"]["batch_id"]), esc_html(prompt),
                 "<video controls", 'alt="poster of j%d"' % job, "media/j%d/video.mp4?" % job):
        check(want in body, "the job page lacks %r" % want)
    for att, w, state in atts:
        check(re.search(r"<td>%d</td><td>%s</td><td>%s</td>" % (att, re.escape(w), state), body),
              "the job page lacks attempt %d on %s (%s)" % (att, w, state))
    check(re.search(r'<pre id="log">[^<]*assigned[^<]*done', body),
          "the job page's log lacks the assigned .. done events")
    m = re.search(r'src="(media/j%d/video.mp4\?[^"]*)"' % job, body)
    check(m and raw_get(base, "/" + m.group(1).replace("&amp;", "&"), token=None)[0] == 200,
          "the job page's player link does not open the mp4 without the token")
    log("job page of j%d: request, poster, player, %d attempt(s), log (screenshot "
        "e2e_http_job_screenshot.png)" % (job, len(atts)))


def esc_html(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def test(args):
    port = free_port()
    base = "http://127.0.0.1:%d" % port
    with Farm(args.vdn, "http", steps=8, max_attempts=2, keep=args.keep) as farm:
        tokf = os.path.join(farm.dir, "http.token")
        with open(tokf, "w") as f:
            f.write(TOKEN + "\n")
        farm.start_coordinator(["--http", "127.0.0.1:%d" % port, "--http-token-file", tokf])
        t0 = time.time()
        while True:
            try:
                if get(base + "/metrics", TOKEN)[0] == 200:
                    break
            except (urllib.error.URLError, ConnectionError):
                pass
            check(time.time() - t0 < 15, "no /metrics after 15 s")
            time.sleep(0.1)
        st, _ = get(base + "/metrics")
        check(st == 401, "/metrics without the token: HTTP %d, expected 401" % st)
        check(get(base + "/metrics", "wrong-token-0123456789")[0] == 401, "a wrong token passed")
        check(get(base + "/nothing", TOKEN)[0] == 404, "unknown path not 404")
        # the token only from the header; the page from loopback names only (DNS rebinding)
        check(get(base + "/metrics?token=" + TOKEN)[0] == 401, "a token in the URL was taken")
        req = urllib.request.Request(base + "/api/status", headers={
            "Host": "rebound.example:%d" % port, "Authorization": "Bearer " + TOKEN})
        try:
            st = urllib.request.urlopen(req, timeout=10).status
        except urllib.error.HTTPError as e:
            st = e.code
        check(st == 403, "a request for Host rebound.example was answered %d" % st)

        farm.start_worker("w", nfe_delay_ms=250)
        bad = os.path.join(farm.dir, "garbage.safetensors")
        with open(bad, "wb") as f:
            f.write(os.urandom(200))
        good, farm.prompt = farm.prompt, bad
        b_bad = farm.submit(1, fname="bad.jsonl")
        farm.wait_batch(b_bad, 1, timeout=30)
        farm.prompt = good
        b = farm.submit(3)
        # a job no worker can take (2 GPUs on a CPU worker), queued with --allow-wait: the JSON
        # API and the page say why it waits
        req = os.path.join(farm.dir, "two_gpus.jsonl")
        with open(req, "w") as f:
            f.write(json.dumps({"prompt_cache": farm.prompt, "frames": 56, "height": 32,
                                "width": 32, "steps": 2, "gpus": 2}) + "\n")
        r = farm.run(["submit", req, "--coordinator", farm.client_ep, "--allow-wait", "--json"])
        stuck = int(re.search(r'"job": "j(\d+)"', r.stdout).group(1))
        want_wait = "no worker with 2 GPUs (the most any has in service: 1)"
        t0 = time.time()
        while True:
            js = json.loads(get(base + "/api/status", TOKEN)[1])
            row = [j for j in js["jobs"] if j["job_id"] == stuck]
            if row and want_wait in row[0].get("waiting", ""):
                break
            check(time.time() - t0 < 10, "/api/status: j%d never said why it waits: %s"
                  % (stuck, row))
            time.sleep(0.2)

        # while a job renders: a busy worker, NFEs per second, a running job
        t0 = time.time()
        while True:
            fams, body = metrics(base)
            jobs = samples(fams, "vdn_jobs")
            rate = samples(fams, "vdn_model_evaluations_per_second")[()]
            if jobs[(("state", "running"),)] == 1 and rate > 0:
                break
            check(time.time() - t0 < 30, "never saw a running job with NFE/s > 0:\n" + body)
            time.sleep(0.2)
        workers = samples(fams, "vdn_workers")
        check(workers[(("state", "busy"),)] == 1, "workers by state while rendering: %s" % workers)
        log("while rendering: jobs %s, %.2f NFE/s" % (
            {k[0][1]: v for k, v in jobs.items()}, rate))

        # the page, live: Chromium runs its script against /api/status
        shot = os.path.abspath("e2e_http_screenshot.png")
        dom = chromium_page(base + "/#token=" + TOKEN, shot)
        problem = re.search(r'id="problem">([^<]*)<', dom)
        check(problem and not problem.group(1), "the page could not load its data: %s"
              % (problem.group(1) if problem else "no problem line in the DOM"))
        for want in ("vdn farm", ">w<", "b%d" % b, "running", "job fault", "updated",
                     "waiting: " + want_wait):
            check(want in dom, "the page's DOM lacks %r" % want)
        farm.run(["cancel", "j%d" % stuck, "--coordinator", farm.client_ep])
        check(os.path.getsize(shot) > 10000, "screenshot %s missing or tiny" % shot)
        import cv2
        img = cv2.imread(shot)
        colours = len({tuple(p) for p in img[::4, ::4].reshape(-1, 3)})
        check(colours > 20, "screenshot looks blank (%d colours)" % colours)
        log("page rendered in Chromium: screenshot %s (%dx%d, %d colours)"
            % (shot, img.shape[1], img.shape[0], colours))

        farm.wait_batch(b, 3, timeout=60)
        fams, body = metrics(base)
        jobs = {k[0][1]: v for k, v in samples(fams, "vdn_jobs").items()}
        db = dict(farm.q("SELECT state, count(*) FROM jobs GROUP BY state"))
        check(jobs == {s: db.get(s, 0) for s in jobs} and jobs["done"] == 3 and
              jobs["failed"] == 1, "vdn_jobs %s vs database %s" % (jobs, db))
        check_histogram(fams, "vdn_job_queue_wait_seconds", 4)
        check_histogram(fams, "vdn_job_render_seconds", 3)
        # the parser names a counter's family without "_total" (OpenMetrics), its sample with it
        total = samples(fams, "vdn_model_evaluations", "_total")[()]
        check(total == 3 * farm.steps, "NFEs evaluated %s, expected %d" % (total, 3 * farm.steps))
        faults = {k[0][1]: v for k, v in samples(fams, "vdn_attempt_failures", "_total").items()}
        check(faults == {"job": 1, "worker": 0, "transient": 0, "crash": 0},
              "failures by fault %s" % faults)
        check(samples(fams, "vdn_workers")[(("state", "idle"),)] == 1, "worker not idle after")
        check(samples(fams, "vdn_gpus")[(("state", "busy"),)] == 0, "a CPU worker has no GPUs")
        info = samples(fams, "vdn_worker_info")
        check(list(info) == [(("state", "idle"), ("worker", "w"))], "vdn_worker_info %s" % info)
        st, js = get(base + "/api/status", TOKEN)
        status = json.loads(js)
        check(st == 200 and len(status["jobs"]) == 5 and status["workers"][0]["worker_id"] == "w",
              "/api/status: %s" % js[:300])
        log("after: jobs %s, queue-wait and render histograms consistent, %d NFEs" % (jobs, total))

        product(farm, base, multi_gpu_worker(farm, base))

        # beyond loopback: refused without TLS and a token; served over HTTPS with both
        r = farm.run(["coordinator", "--db", os.path.join(farm.dir, "o.db"), "--bind",
                      "tcp://127.0.0.1:%d" % free_port(), "--client-bind",
                      "tcp://127.0.0.1:%d" % free_port(), "--http", "0.0.0.0:%d" % free_port()],
                     check_rc=False, timeout=20)
        check(r.returncode == 2 and "TLS with a token" in r.stderr,
              "non-loopback --http without TLS: rc %d %s" % (r.returncode, r.stderr))
        check(not os.path.exists(os.path.join(farm.dir, "o.db")),
              "the refused coordinator created its database anyway")
        if not shutil.which("openssl"):
            log("openssl missing: HTTPS part left out")
            return
        cert, key = os.path.join(farm.dir, "c.pem"), os.path.join(farm.dir, "k.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                        key, "-out", cert, "-days", "1", "-subj", "/CN=localhost"],
                       capture_output=True, check=True, timeout=60)
        p2 = free_port()
        farm.spawn("coordinator2", [
            "coordinator", "--db", os.path.join(farm.dir, "o.db"), "--bind",
            "tcp://127.0.0.1:%d" % free_port(), "--client-bind", "tcp://127.0.0.1:%d" % free_port(),
            "--http", "0.0.0.0:%d" % p2, "--http-token-file", tokf, "--http-cert", cert,
            "--http-key", key])
        ctx = ssl.create_default_context(cafile=cert)
        ctx.check_hostname = False
        t0 = time.time()
        while True:
            try:
                st, body = get("https://127.0.0.1:%d/metrics" % p2, TOKEN, ctx)
                break
            except (urllib.error.URLError, ConnectionError):
                check(time.time() - t0 < 15, "HTTPS coordinator never answered")
                time.sleep(0.2)
        check(st == 200 and "vdn_jobs" in body, "HTTPS /metrics: %d" % st)
        check(get("https://127.0.0.1:%d/metrics" % p2, None, ctx)[0] == 401,
              "HTTPS without the token was served")
        log("beyond loopback: refused without TLS; HTTPS with the token served, without it 401")


if __name__ == "__main__":
    main(test)
