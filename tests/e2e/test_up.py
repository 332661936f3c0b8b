"""`vdn up DIR --detach`: one directory holds a whole farm; the client commands find it through
DIR/vdn.conf; `vdn up DIR --stop` stops every process it started."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from harness import FRAMES, check, check_safetensors, free_port, log, main, sanitizer_reports


def conf(path):
    out = {}
    for line in open(path):
        line = line.strip()
        if line and not line.startswith("#"):
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is not alive; /proc says so
    try:
        return open("/proc/%d/stat" % pid).read().split(")")[1].split()[0] != "Z"
    except OSError:
        return False


def children_of(pid):
    kids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                st = open("/proc/%s/stat" % d).read()
                if int(st.split(")")[1].split()[1]) == pid:
                    kids.append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    return kids


def foreground(vdn, d):
    """`vdn up DIR` in the foreground: prefixed logs, a crashed child restarted, Ctrl-C (SIGINT)
    stops everything and exits 0."""
    import signal
    errlog = open(d + ".stderr", "wb")
    p = subprocess.Popen([vdn, "up", d, "--cpu"], stdout=subprocess.DEVNULL, stderr=errlog)
    try:
        t0 = time.time()
        while True:
            check(p.poll() is None, "vdn up exited early: %s" % open(d + ".stderr").read()[-2000:])
            check(time.time() - t0 < 60, "foreground vdn up never wrote vdn.conf with its pid")
            try:
                if int(conf(os.path.join(d, "vdn.conf")).get("pid", 0)) == p.pid:
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.1)
        kids = children_of(p.pid)
        check(len(kids) == 2, "expected coordinator + 1 worker, got %s" % kids)
        # the worker's own lines come prefixed; wait for one (a loaded machine may take a while
        # to run it) before killing it, so the log has one to show
        t0 = time.time()
        while "[worker-1] " not in open(d + ".stderr", errors="replace").read():
            check(time.time() - t0 < 60, "no '[worker-1] ' line in the foreground log")
            time.sleep(0.1)
        worker = max(kids)  # started after the coordinator
        os.kill(worker, signal.SIGKILL)
        t0 = time.time()
        while True:
            now = children_of(p.pid)
            if len(now) == 2 and worker not in now and all(alive(k) for k in now):
                break
            check(time.time() - t0 < 15, "the killed worker was not restarted: %s" % now)
            time.sleep(0.1)
        kids = children_of(p.pid)
        p.send_signal(signal.SIGINT)
        rc = p.wait(timeout=60)
        check(rc == 0, "vdn up exited %d on SIGINT" % rc)
        for k in kids:
            check(not alive(k), "child %d outlived vdn up" % k)
        text = open(d + ".stderr", errors="replace").read()
        for want in ("[coordinator] ", "[worker-1] ", "restarting in", "up: stopped"):
            check(want in text, "foreground log lacks %r" % want)
        c = conf(os.path.join(d, "vdn.conf"))
        check("pid" not in c, "vdn.conf still names a pid after a clean stop")
        log("foreground: prefixed logs, worker restarted after SIGKILL, SIGINT stopped all")
    finally:
        if p.poll() is None:
            for k in children_of(p.pid):
                os.kill(k, 9)
            p.kill()
            p.wait()


def test(args):
    vdn = os.path.abspath(args.vdn)
    d = tempfile.mkdtemp(prefix="vdn-e2e-up-")
    ok = False
    pid = None
    try:
        http_port = free_port()
        # a precision that does not exist is refused before anything starts, naming the option
        bad = subprocess.run([vdn, "up", d + "-bad", "--cpu", "--vae-precision", "fp9"],
                             capture_output=True, text=True, timeout=60)
        check(bad.returncode != 0 and "--vae-precision 'fp9': expected bf16 or fp8" in bad.stderr,
              "vdn up --vae-precision fp9: %d %s" % (bad.returncode, bad.stderr))
        check(not os.path.exists(os.path.join(d + "-bad", "vdn.conf")),
              "a refused vdn up wrote a vdn.conf")
        bad = subprocess.run([vdn, "up", d + "-bad", "--cpu", "--max-job-seconds", "0.5"],
                             capture_output=True, text=True, timeout=60)
        check(bad.returncode != 0 and "--max-job-seconds '0.5': expected a number in 1.." in
              bad.stderr, "vdn up --max-job-seconds 0.5: %d %s" % (bad.returncode, bad.stderr))
        r = subprocess.run([vdn, "up", d, "--detach", "--cpu", "--workers", "2", "--http",
                            "127.0.0.1:%d" % http_port, "--vae-precision", "fp8",
                            "--max-job-seconds", "86400", "--max-job-memory", "120"],
                           capture_output=True, text=True, timeout=120)
        check(r.returncode == 0, "vdn up --detach exited %d: %s%s" % (r.returncode, r.stdout,
                                                                      r.stderr))
        c = conf(os.path.join(d, "vdn.conf"))
        pid = int(c["pid"])
        check(alive(pid), "supervisor pid %d not running" % pid)
        kids = children_of(pid)
        check(len(kids) == 3, "expected coordinator + 2 workers under pid %d, got %s" % (pid, kids))
        # --vae-precision reached both workers' command lines
        for k in kids:
            with open("/proc/%d/cmdline" % k, "rb") as f:
                argv = f.read().split(b"\0")
            if b"worker" in argv[1:2]:
                check(b"--vae-precision" in argv and
                      argv[argv.index(b"--vae-precision") + 1] == b"fp8",
                      "worker %d argv lacks --vae-precision fp8: %s" % (k, argv))
            else:  # the coordinator: the caps
                check(argv[argv.index(b"--max-job-seconds") + 1] == b"86400" and
                      argv[argv.index(b"--max-job-memory") + 1] == b"120"
                      if b"--max-job-seconds" in argv and b"--max-job-memory" in argv else False,
                      "the coordinator's argv lacks the caps: %s" % argv)
        check(sum(1 for k in kids if b"worker" in open("/proc/%d/cmdline" % k, "rb").read()
                  .split(b"\0")[1:2]) == 2, "two worker children expected")
        for k in ("client_endpoint", "worker_endpoint", "db", "store", "checkpoint"):
            check(k in c, "vdn.conf lacks %s: %s" % (k, c))
        # --http reached its coordinator: the status page's metrics list both workers
        t0 = time.time()
        while True:
            try:
                body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % http_port,
                                              timeout=5).read().decode()
                if body.count("vdn_worker_info{") == 2:
                    break
            except OSError:
                pass
            check(time.time() - t0 < 30, "vdn up --http: no metrics with 2 workers in 30 s")
            time.sleep(0.2)
        r2 = subprocess.run([vdn, "up", d, "--detach", "--cpu"], capture_output=True, text=True,
                            timeout=60)
        check(r2.returncode != 0 and "already runs" in r2.stderr,
              "a second vdn up on the same dir must refuse: %d %s" % (r2.returncode, r2.stderr))
        if c["client_endpoint"] == "tcp://127.0.0.1:5556":
            # it took the default ports: the client commands find it with no flags at all
            env = {k: v for k, v in os.environ.items() if not k.startswith("VDN_")}
            r = subprocess.run([vdn, "ls"], capture_output=True, text=True, timeout=60, env=env)
            check(r.returncode == 0, "vdn ls without flags: %s%s" % (r.stdout, r.stderr))
        prompt = os.path.join(c["checkpoint"], "prompt.safetensors")
        req = os.path.join(d, "requests.jsonl")
        with open(req, "w") as f:
            for i in range(4):  # the last one also keeps its latents (save_latents)
                f.write(json.dumps(dict({"prompt_cache": prompt, "frames": FRAMES, "height": 32,
                                         "width": 32, "steps": 2, "seed": 10 + i},
                                        **({"save_latents": True} if i == 3 else {}))) + "\n")
        r = subprocess.run([vdn, "submit", req, "--dir", d], capture_output=True, text=True,
                           timeout=60)
        check(r.returncode == 0, "vdn submit --dir: %s%s" % (r.stdout, r.stderr))
        import re
        m = re.search(r"\bb?(\d+)\b", r.stdout)
        check(m, "no batch id in %r" % r.stdout)
        w = subprocess.run([vdn, "watch", "b" + m.group(1), "--dir", d], capture_output=True,
                           text=True, timeout=120)
        check(w.returncode == 0, "vdn watch: %d %s%s" % (w.returncode, w.stdout[-2000:], w.stderr))
        store = c["store"][len("file://"):]
        objs = []
        for root, _, files in os.walk(store):
            objs += [os.path.join(root, f) for f in files]
        # the embedded default checkpoint has the tiny VAEs: each job stores its mp4 and poster,
        # and its latents only when asked
        check(len(objs) == 13, "expected 13 objects (4 records + 4 mp4 + 4 posters + the latents "
              "of the one job with save_latents), found %d" % len(objs))
        check(sum(o.endswith(".safetensors") for o in objs) == 1,
              "expected the latents of one job: %s" % sorted(objs))
        for o in objs:
            data = open(o, "rb").read()
            if o.endswith(".json"):
                json.loads(data)
            elif o.endswith(".mp4"):
                p = subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-show_streams",
                                    "-of", "json", o], capture_output=True, text=True)
                st = json.loads(p.stdout).get("streams", []) if p.returncode == 0 else []
                kinds = sorted((x["codec_type"], x["codec_name"]) for x in st)
                check(kinds == [("audio", "aac"), ("video", "h264")],
                      "%s: streams %s (%s)" % (o, kinds, p.stderr))
                check(any(x.get("nb_read_frames") == str(FRAMES) for x in st),
                      "%s: not %d frames: %s" % (o, FRAMES, st))
            elif o.endswith(".png"):
                check(data[:8] == b"\x89PNG\r\n\x1a\n", "%s: not a PNG" % o)
            else:
                check_safetensors(data, o)
        r = subprocess.run([vdn, "up", d, "--stop"], capture_output=True, text=True, timeout=90)
        check(r.returncode == 0, "vdn up --stop: %s%s" % (r.stdout, r.stderr))
        check(not alive(pid), "supervisor still alive after --stop")
        for k in kids:
            check(not alive(k), "child %d still alive after --stop" % k)
        for name in ("coordinator", "worker-1", "worker-2"):
            check(os.path.getsize(os.path.join(d, "logs", name + ".log")) > 0,
                  "empty log for %s" % name)
        foreground(vdn, os.path.join(d, "fg"))
        logs = [os.path.join(d, "logs", f) for f in os.listdir(os.path.join(d, "logs"))]
        logs += [os.path.join(d, "fg", "logs", f) for f in os.listdir(os.path.join(d, "fg", "logs"))]
        reports = sanitizer_reports(logs + [os.path.join(d, "fg.stderr")])
        check(not reports, "sanitizer reports: %s" % reports[:5])
        ok = True
    finally:
        if pid and alive(pid):
            for k in children_of(pid):
                os.kill(k, 9)
            os.kill(pid, 9)
        if ok and not args.keep:
            shutil.rmtree(d, ignore_errors=True)
        else:
            log("left %s" % d)


if __name__ == "__main__":
    main(test)
