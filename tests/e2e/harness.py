"""Process-level test harness: a real coordinator and real workers (our `vdn` binary) on loopback,
a file:// or s3:// store, and the coordinator's SQLite database read back read-only.

Every process a test starts is recorded here and killed by its pid at the end (never by name).
Each wait has a deadline, so a hung farm fails the test instead of hanging CI.
"""
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time

SKIP = 77

# Tiny renders: 56 pixel frames = 17 latent frames, so the VDN branch runs (F > 10).
FRAMES = 56
LATENT_FRAMES = 17


def log(*a):
    print("[e2e %s]" % time.strftime("%H:%M:%S"), *a, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class TestFailure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise TestFailure(msg)


def wait_for(what, cond, timeout):
    """cond()'s first true value, polled every 0.1 s; fails naming `what` after timeout s."""
    t0 = time.time()
    while True:
        v = cond()
        if v:
            return v
        check(time.time() - t0 < timeout, "timed out after %d s waiting for %s" % (timeout, what))
        time.sleep(0.1)


class Farm:
    """One coordinator + workers in a temp dir. Use as a context manager."""

    def __init__(self, vdn, name, store=None, lease=3.0, heartbeat=0.5, max_attempts=20,
                 steps=2, size=32, keep=False):
        self.vdn = os.path.abspath(vdn)
        self.dir = tempfile.mkdtemp(prefix="vdn-e2e-%s-" % name)
        self.name = name
        self.store = store or "file://%s/store" % self.dir
        self.lease, self.heartbeat, self.max_attempts = lease, heartbeat, max_attempts
        self.steps, self.size = steps, size
        self.keep = keep
        self.procs = {}  # name -> Popen
        self.logs = {}
        self.env = dict(os.environ)
        self.env.setdefault("VDN_LOG_LEVEL", "info")
        self.worker_ep = "tcp://127.0.0.1:%d" % free_port()
        self.client_ep = "tcp://127.0.0.1:%d" % free_port()
        self.db = os.path.join(self.dir, "vdn.db")
        self.ckpt = os.path.join(self.dir, "ckpt")
        self.failed = False

    # ------------------------------------------------------------------ set-up
    def __enter__(self):
        os.makedirs(os.path.join(self.dir, "logs"), exist_ok=True)
        t = time.time()
        self.run(["ckpt", "init", "--preset", "tiny", "--vdn", "--out", self.ckpt], timeout=120)
        log("tiny checkpoint in %.1f s: %s" % (time.time() - t, self.ckpt))
        self.prompt = os.path.join(self.ckpt, "prompt.safetensors")
        check(os.path.exists(self.prompt), "vdn ckpt init wrote no prompt.safetensors")
        return self

    def __exit__(self, et, ev, tb):
        failed = et is not None or self.failed
        for name in list(self.procs):
            self.kill(name, signal.SIGKILL, quiet=True)
        # Under ops/sanitize.sh a report in any process's log fails the test, even one from a
        # process whose exit status the test did not look at.
        reports = sanitizer_reports(self.logs.values())
        if reports and et is None:
            log("sanitizer reports:\n  " + "\n  ".join(reports[:10]))
            self._report(True)
            raise TestFailure("sanitizer report in a process log (see above)")
        self._report(failed)
        return False

    def _report(self, failed):
        if failed:
            for name, path in self.logs.items():
                try:
                    with open(path, errors="replace") as f:
                        lines = f.readlines()
                    sys.stdout.write("----- last lines of %s log -----\n" % name)
                    sys.stdout.writelines(lines[-40:])
                except OSError:
                    pass
        if not failed and not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)
        else:
            log("left %s for inspection" % self.dir)

    def run(self, args, timeout=60, check_rc=True, env=None):
        r = subprocess.run([self.vdn] + args, capture_output=True, text=True, timeout=timeout,
                           env=env or self.env)
        if check_rc and r.returncode != 0:
            raise TestFailure("vdn %s exited %d:\n%s%s" % (" ".join(args), r.returncode,
                                                          r.stdout, r.stderr))
        return r

    def spawn(self, name, args, env=None):
        path = os.path.join(self.dir, "logs", "%s.log" % name)
        f = open(path, "ab")
        p = subprocess.Popen([self.vdn] + args, stdout=f, stderr=subprocess.STDOUT,
                             env=env or self.env)
        f.close()
        self.procs[name] = p
        self.logs[name] = path
        return p

    def start_coordinator(self, extra_args=()):
        return self.spawn("coordinator", [
            "coordinator", "--db", self.db, "--bind", self.worker_ep,
            "--client-bind", self.client_ep, "--store", self.store,
            "--lease-seconds", str(self.lease), "--heartbeat-seconds", str(self.heartbeat),
            "--max-attempts", str(self.max_attempts)] + list(extra_args))

    def start_worker(self, wid, nfe_delay_ms=0, extra_env=None, extra_args=()):
        env = dict(self.env)
        if nfe_delay_ms:
            env["VDN_TEST_NFE_DELAY_MS"] = str(nfe_delay_ms)
        env.update(extra_env or {})
        return self.spawn(wid, [
            "worker", "--connect", self.worker_ep, "--checkpoint", self.ckpt, "--store", self.store,
            "--id", wid, "--cpu", "--scratch", os.path.join(self.dir, "scratch"),
            "--heartbeat-seconds", str(self.heartbeat), "--threads", "1",
            "--data-root", self.dir] + list(extra_args),
            env=env)

    def kill(self, name, sig=signal.SIGKILL, quiet=False):
        p = self.procs.get(name)
        if p is None or p.poll() is not None:
            self.procs.pop(name, None)
            return
        if not quiet:
            log("signal %s -> %s (pid %d)" % (signal.Signals(sig).name, name, p.pid))
        os.kill(p.pid, sig)  # SIGKILL also ends a stopped process
        if sig == signal.SIGKILL:
            p.wait(timeout=10)
            self.procs.pop(name, None)

    def wait_exit(self, name, timeout):
        """Exit status of a process we started, or a failure after timeout seconds."""
        try:
            rc = self.procs[name].wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.failed = True
            raise TestFailure("%s still running after %d s" % (name, timeout))
        self.procs.pop(name, None)
        return rc

    # ------------------------------------------------------------------ requests
    def write_requests(self, n, seed0=1, fname="requests.jsonl"):
        path = os.path.join(self.dir, fname)
        with open(path, "w") as f:
            for i in range(n):
                f.write(json.dumps({"prompt_cache": self.prompt, "frames": FRAMES,
                                    "height": self.size, "width": self.size,
                                    "steps": self.steps, "seed": seed0 + i}) + "\n")
        return path

    def submit(self, n, **kw):
        path = self.write_requests(n, **kw)
        r = self.run(["submit", path, "--coordinator", self.client_ep, "--json"], timeout=60)
        m = re.search(r'"batch_id"\s*:\s*(\d+)', r.stdout) or re.search(r"\bb(\d+)\b", r.stdout)
        check(m, "vdn submit printed no batch id: %r" % r.stdout)
        batch = int(m.group(1))
        log("submitted %d jobs as batch %d" % (n, batch))
        return batch

    # ------------------------------------------------------------------ database (read-only)
    def q(self, sql, *args):
        return self.q_db(self.db, sql, *args)

    def q_db(self, db, sql, *args):
        for _ in range(50):
            try:
                con = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=5)
                try:
                    return con.execute(sql, args).fetchall()
                finally:
                    con.close()
            except sqlite3.OperationalError as e:  # busy or not created yet
                last = e
                time.sleep(0.1)
        raise TestFailure("database %s: %s" % (db, last))

    def counts(self, batch):
        rows = self.q("SELECT state, count(*) FROM jobs WHERE batch_id=? GROUP BY state", batch)
        return dict(rows)

    def wait_batch(self, batch, n, timeout, on_tick=None):
        t0 = time.time()
        last = None
        while time.time() - t0 < timeout:
            c = self.counts(batch)
            if c != last:
                log("batch %d: %s" % (batch, c))
                last = c
            if c.get("done", 0) + c.get("failed", 0) + c.get("cancelled", 0) == n:
                return c
            if on_tick:
                on_tick()
            time.sleep(0.2)
        self.failed = True
        raise TestFailure("batch %d not finished after %d s: %s" % (batch, timeout, last))

    def running_attempts(self):
        return self.q("SELECT id, job_id, worker_id FROM attempts WHERE state='running'")

    # ------------------------------------------------------------------ invariants
    def check_exactly_once(self, batch, n):
        """Every job done once: one 'done' attempt, one 'done' event, keys recorded, and its
        progress reads every NFE done (even when PROGRESS messages were lost to a coordinator
        outage: the RESULT's run record completes it)."""
        c = self.counts(batch)
        check(c == {"done": n}, "batch %d: expected %d done jobs, got %s" % (batch, n, c))
        per_job = self.q(
            "SELECT j.id, (SELECT count(*) FROM attempts a WHERE a.job_id=j.id AND a.state='done'),"
            " (SELECT count(*) FROM events e WHERE e.job_id=j.id AND e.kind='done'),"
            " j.current_attempt, (SELECT a.id FROM attempts a WHERE a.job_id=j.id AND "
            " a.state='done') FROM jobs j WHERE j.batch_id=?", batch)
        check(len(per_job) == n, "batch %d has %d jobs, expected %d" % (batch, len(per_job), n))
        # a done job shows all its NFEs done (vdn status/watch read these columns)
        nfe = self.q("SELECT id, nfe_done, nfe_total, json_extract(request, '$.steps') FROM jobs "
                     "WHERE batch_id=?", batch)
        for job, d, t, steps in nfe:
            check(d == t == int(steps), "job %d: progress %s/%s, expected %s/%s NFEs"
                  % (job, d, t, steps, steps))
        for job, n_done_att, n_done_ev, cur, done_att in per_job:
            check(n_done_att == 1, "job %d: %d attempts accepted (expected 1)" % (job, n_done_att))
            check(n_done_ev == 1, "job %d: %d 'done' events (expected 1)" % (job, n_done_ev))
            check(cur == done_att, "job %d: current attempt %s but the done one is %s"
                  % (job, cur, done_att))

    def job_keys(self, batch):
        keys = {}
        for job, ok in self.q("SELECT id, object_keys FROM jobs WHERE batch_id=?", batch):
            check(ok, "job %d: no object_keys recorded" % job)
            ks = json.loads(ok) if ok.startswith("[") else ok.split("\n")
            keys[job] = ks
        return keys

    def store_dir(self):
        check(self.store.startswith("file://"), "not a file store")
        return self.store[len("file://"):]

    def check_store_matches(self, batch, listing=None):
        """The objects in the store are exactly the keys the DB names, each a well-formed
        safetensors file or run record. listing: {key: bytes-or-path} for non-file stores."""
        keys = self.job_keys(batch)
        want = sorted(k for ks in keys.values() for k in ks)
        check(len(want) == len(set(want)), "two jobs name the same object key")
        if listing is None:
            root = self.store_dir()
            have = []
            for d, _, files in os.walk(root):
                for fn in files:
                    rel = os.path.relpath(os.path.join(d, fn), root)
                    # the file store's temp folder is not a key (docs/storage.md): a worker
                    # SIGKILLed mid-put leaves its put-XXXXXX there, never under a key
                    if rel.startswith(".vdn-tmp" + os.sep):
                        check(os.path.dirname(rel) == ".vdn-tmp" and fn.startswith("put-"),
                              "unexpected file in the store's temp folder: %s" % rel)
                        continue
                    have.append(rel)
            have.sort()
            check(have == want, "store holds %d objects, DB names %d; extra %s, missing %s" % (
                len(have), len(want), sorted(set(have) - set(want))[:5],
                sorted(set(want) - set(have))[:5]))
            get = lambda k: open(os.path.join(root, k), "rb").read()
        else:
            have = sorted(listing)
            check(have == want, "store holds %s, DB names %s" % (have[:5], want[:5]))
            get = lambda k: listing[k]
        seeds = dict(self.q("SELECT id, json_extract(request, '$.seed') FROM jobs "
                            "WHERE batch_id=?", batch))
        records = dict(self.q("SELECT id, run_record FROM jobs WHERE batch_id=?", batch))
        for job, ks in keys.items():
            for k in ks:
                data = get(k)
                if k.endswith(".json"):
                    rec = json.loads(data)
                    # the object is the accepted attempt's record, not a stale worker's
                    check(rec == json.loads(records[job]), "%s: the stored run record is not "
                          "the one the accepted RESULT carried" % k)
                    # the render this job asked for, with the VDN branch on (17 latent frames)
                    check(str(rec["request"]["seed"]) == str(seeds[job]),
                          "%s: record seed %s, job %d asked for %s" % (
                              k, rec["request"]["seed"], job, seeds[job]))
                    check(rec["resolved"]["latent_frames"] == LATENT_FRAMES,
                          "%s: %s latent frames" % (k, rec["resolved"]["latent_frames"]))
                else:
                    hdr = check_safetensors(data, k)
                    shape = hdr["video"]["shape"]
                    check(shape[1] == LATENT_FRAMES, "%s: video latents %s" % (k, shape))


def sanitizer_reports(paths):
    """Lines of ASan/UBSan/LSan reports in the given log files."""
    out = []
    for path in paths:
        try:
            with open(path, errors="replace") as f:
                out += ["%s: %s" % (os.path.basename(path), line.strip()) for line in f
                        if ("Sanitizer" in line and "ERROR" in line) or "runtime error:" in line]
        except OSError:
            pass
    return out


def check_safetensors(data, what):
    """Independent reader: 8-byte little-endian header length, JSON header, offsets in range."""
    check(len(data) >= 8, "%s: %d bytes, too short for safetensors" % (what, len(data)))
    (hl,) = struct.unpack("<Q", data[:8])
    check(8 + hl <= len(data), "%s: header length %d past the end" % (what, hl))
    hdr = json.loads(data[8:8 + hl])
    body = len(data) - 8 - hl
    tensors = [k for k in hdr if k != "__metadata__"]
    check(tensors, "%s: no tensors" % what)
    for k in tensors:
        a, b = hdr[k]["data_offsets"]
        check(0 <= a <= b <= body, "%s: tensor %s offsets %d..%d outside %d" % (what, k, a, b, body))
    return hdr


def main(test_fn):
    """Runs test_fn(vdn_path, args) with the skip/exit-code convention ctest expects."""
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--vdn", required=True)
    ap.add_argument("--source", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    t0 = time.time()
    try:
        test_fn(args)
    except TestFailure as e:
        log("FAIL after %.1f s: %s" % (time.time() - t0, e))
        sys.exit(1)
    except SkipTest as e:
        log("SKIP: %s" % e)
        sys.exit(SKIP)
    log("PASS in %.1f s" % (time.time() - t0))


class SkipTest(Exception):
    pass
