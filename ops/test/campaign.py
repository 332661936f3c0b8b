#!/usr/bin/env python3
"""The fault campaign (issues 24 and 27): a CPU farm (one coordinator, W workers of S slots each:
a stand-in nvidia-smi lists S GPUs and the worker opens one CPU engine per GPU; --snapshot-every
1; a file store) renders N good jobs in B batches while workers are SIGKILLed mid-render and
restarted, the coordinator is killed with -9 and restarted, bad inputs are submitted, the
renderer of one slot is sent SIGSEGV or SIGABRT mid-render, and a poison job (a seed the
workers' VDN_TEST_POISON_SEED names: it aborts its renderer at its first NFE) is submitted. At
the end it checks, and prints as JSON:

  - every good job done exactly once, none lost (one accepted attempt, one done event);
  - no job failed for a worker's fault (only the bad jobs failed, each as the job's fault);
  - no innocent job charged an attempt: every attempt that ended by a renderer crash is the
    attempt whose renderer the campaign killed, or the poison job's; every other attempt of a
    good job ended done or with a worker the campaign SIGKILLed, and none of those counted
    against the job's --max-attempts;
  - the poison job quarantined after crashing renderers on two workers, not retried forever;
  - no worker blocklisted (for bad input, for the poison job, for anything: see --help);
  - nothing left behind: one scratch folder per live worker, no temp file in the store, no
    snapshot of a done job, no renderer process outliving its worker;
  - every requeued job resumed from its latest snapshot (the run record's resumed_from_step is
    the newest step stored under the key it resumed from, per the workers' logs, and no earlier
    than the coordinator had heard of);
  - every mp4 read by ffprobe with the frames asked for.

Each fault is off when its count is 0 (--kills, --restarts, --stalls, --bad, --crashes,
--no-poison); each check can be left out with --skip-check NAME. The renderer faults need
workers that render each slot in a process of its own (the daemon logs `renderer slot S (gpu G)
pid P started`): with workers that do not, they are skipped with a message saying so.

Extending it: a fault is a function tick(camp) in FAULTS (called every TICK seconds, it decides
itself whether to act; count what it did in camp.stats); an end check is a function
check(camp) in CHECKS that raises TestFailure (harness.check) or records numbers in camp.stats.

  ops/test/campaign.py --vdn build/cli/vdn --jobs 1000 --batches 10 --kills 100 --restarts 10 \\
      --bad 50 --crashes 20 [--workers 3] [--slots 2] [--steps 6] [--json out.json] [--keep]

CI runs a small one (ctest ops_campaign)."""
import argparse
import json
import os
import random
import re
import signal
import stat
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "e2e"))
from harness import Farm, TestFailure, check, log  # noqa: E402

TICK = 0.2
POISON_SEED = 424242  # no good or bad job uses it
# the fault names an attempt ended by a renderer crash may carry in the coordinator's database
CRASH_FAULTS = ("crash",)
# `renderer slot S (gpu G) pid P started` (`(cpu)` for a CPU slot): keyed by G, else S
PAT_RENDERER = re.compile(r"renderer slot (\d+) \((?:gpu (\d+)|cpu)\) pid (\d+)")
PAT_START = re.compile(r"job (\d+) attempt (\d+): start on GPU ([\d,]+)")


class WorkerLog:
    """What a worker's log (appended over its restarts) has said so far, read incrementally:
    its renderers' pids by GPU (the current process's only) and each attempt's GPUs."""

    def __init__(self, path):
        self.path, self.off, self.rest = path, 0, ""
        self.renderers = {}  # GPU index -> pid, this process's
        self.all_renderers = set()  # every renderer pid ever logged
        self.gpus = {}  # attempt -> [gpu]

    def read(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.off)
                data = f.read()
        except OSError:
            return
        self.off += len(data)
        lines = (self.rest + data.decode("utf-8", "replace")).split("\n")
        self.rest = lines.pop()
        for line in lines:
            m = PAT_RENDERER.search(line)
            if m:
                pid = int(m.group(3))
                self.renderers[int(m.group(2) or m.group(1))] = pid
                self.all_renderers.add(pid)
            m = PAT_START.search(line)
            if m:
                self.gpus[int(m.group(2))] = [int(g) for g in m.group(3).split(",")]

    def restarted(self):
        """The old process is gone: what it logged is read, its renderers forgotten."""
        self.read()
        self.renderers = {}


def parent_of(pid, exe):
    """The parent pid of a live process running the program exe (a renderer runs the vdn binary
    as /proc/self/exe), or None (gone, or a reused pid of something else)."""
    try:
        if os.path.realpath("/proc/%d/exe" % pid) != exe:
            return None
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


class Campaign:
    def __init__(self, farm, a):
        self.farm, self.a = farm, a
        self.exe = os.path.realpath(a.vdn)
        self.rng = random.Random(a.seed)
        self.workers = ["w%d" % i for i in range(a.workers)]
        self.wlog = {}  # worker -> WorkerLog
        self.started_at = {}  # worker -> time of its (re)start
        self.restart_at = {}  # worker or "coordinator" -> when to start it again
        self.killed_at = {w: [] for w in self.workers}  # worker -> times it was SIGKILLed
        self.killed_attempts = set()
        self.crashed = {}  # attempt -> (job, worker, slot, signal) of each renderer crash
        self.crashed_at = {}  # worker -> when the campaign last crashed one of its renderers
        self.good_batches = []  # (batch id, jobs)
        self.bad_jobs = []  # job ids that must fail as the job's fault
        self.poison_job = None
        self.renderers = False  # whether the workers render each slot in a process of its own
        self.skipped = []
        self.stats = {"worker_kills": 0, "coordinator_restarts": 0, "coordinator_stalls": 0,
                      "renderer_crashes": 0,
                      "bad_refused_at_submit": 0, "bad_failed": 0}
        self.t0 = time.time()
        self.jitter = {}
        self.smi = None
        if a.slots:
            self.smi = os.path.join(farm.dir, "nvidia-smi")
            with open(self.smi, "w") as f:
                f.write("#!/bin/sh\n# stand-in: %d GPUs, one CPU engine each\n" % a.slots +
                        "case \"$*\" in *--query-gpu=index,name,memory.total*) ;; *) exit 9;; "
                        "esac\nfor i in %s; do echo \"$i, stand-in GPU, 81559\"; done\n"
                        % " ".join(str(i) for i in range(a.slots)))
            os.chmod(self.smi, os.stat(self.smi).st_mode | stat.S_IXUSR)

    def start_coordinator(self):
        """With --coordinator-nice, the coordinator at that niceness (the workers keep the
        campaign's): on a real farm it has a machine of its own; on a loaded shared machine a
        niced coordinator starves behind others' builds and misses heartbeats by seconds."""
        p = self.farm.start_coordinator(self.coord_args)
        if self.a.coordinator_nice is not None:
            try:
                os.setpriority(os.PRIO_PROCESS, p.pid, self.a.coordinator_nice)
            except OSError as e:
                log("coordinator niceness %d not set: %s" % (self.a.coordinator_nice, e))

    def start_worker(self, w):
        if w in self.wlog:
            self.wlog[w].restarted()
        self.started_at[w] = time.time()
        env = dict(self.farm.env, VDN_TEST_NFE_DELAY_MS=str(self.a.nfe_delay_ms))
        if self.a.poison:
            env["VDN_TEST_POISON_SEED"] = str(POISON_SEED)
        if self.smi:  # the stand-in GPUs: one CPU engine (slot) per listed GPU
            env["VDN_NVIDIA_SMI"] = self.smi
        f = self.farm
        f.spawn(w, ["worker", "--connect", f.worker_ep, "--checkpoint", f.ckpt, "--store", f.store,
                    "--id", w, "--scratch", os.path.join(f.dir, "scratch"),
                    "--heartbeat-seconds", str(f.heartbeat), "--threads", "1",
                    "--data-root", f.dir, "--snapshot-every", "1"]
                + ([] if self.smi else ["--cpu"]), env=env)
        if w not in self.wlog:
            self.wlog[w] = WorkerLog(f.logs[w])

    def submit_lines(self, lines, name, extra=()):
        path = os.path.join(self.farm.dir, name + ".jsonl")
        with open(path, "w") as f:
            for x in lines:
                f.write(json.dumps(x) + "\n")
        for _ in range(100):  # the coordinator may be restarting
            r = self.farm.run(["submit", path, "--coordinator", self.farm.client_ep, "--json"]
                              + list(extra), check_rc=False, timeout=60)
            if r.returncode != 3:  # 3: unreachable
                return r
            time.sleep(0.5)
        raise TestFailure("the coordinator never took %s" % name)

    def good_line(self, seed):
        return {"prompt_cache": self.farm.prompt, "frames": self.a.frames, "height": 32, "width": 32,
                "steps": self.a.steps, "seed": seed}

    def good_jobs(self):
        return sum(n for _, n in self.good_batches)

    def due(self, what, count, started=False):
        """Whether fault `what`'s next one is due: `count` of them spread evenly over the good
        jobs' progress (the k-th once a jittered 0.8 k/count of them are done, or with started,
        have started, whatever the machine's speed); one that found nothing to act on comes due
        again at the next tick."""
        k = self.stats[what]
        if k >= count:
            return False
        # within the first 80 % of the jobs: the last ones leave little running to kill
        at = 0.8 * (k + self.jitter.setdefault((what, k), self.rng.uniform(0.2, 0.8))) / count
        total = self.good_jobs()
        done = self.farm.q("SELECT count(*) FROM jobs WHERE state='done'")[0][0] if not started \
            else self.farm.q("SELECT count(*) FROM jobs WHERE attempts > 0 AND batch_id IN (%s)"
                             % ",".join(str(b) for b, _ in self.good_batches))[0][0]
        return total > 0 and done >= at * total

    def wait_renderers(self):
        """Once every worker has registered: whether each logged a renderer per slot."""
        t0 = time.time()
        while time.time() - t0 < 60:
            n = self.farm.q("SELECT count(*) FROM workers")[0][0]
            if n >= len(self.workers):
                break
            time.sleep(0.2)
        time.sleep(0.5)
        for w in self.workers:
            self.wlog[w].read()
        have = {w: sorted(self.wlog[w].renderers) for w in self.workers}
        self.renderers = all(len(v) == max(1, self.a.slots) for v in have.values())
        return have


# ---------------------------------------------------------------- faults
def kill_worker(c):
    """SIGKILL a worker mid-render (an attempt of its current process with an NFE done), restart
    it a moment later. Every attempt it held (one per busy slot) is lost with it. A worker is
    killed again only once it has finished a job since its restart: a worker that dies again
    and again without finishing anything is rightly blocklisted (--blocklist-failures worker
    faults in a row), which is not what this campaign tests."""
    now = time.time()
    for w, t in list(c.restart_at.items()):
        if w in c.workers and now >= t:
            c.start_worker(w)
            del c.restart_at[w]
    if not c.due("worker_kills", c.a.kills):
        return
    rows = c.farm.q("SELECT a.id, a.worker_id, a.started_at FROM attempts a JOIN jobs j ON "
                    "j.current_attempt=a.id WHERE a.state='running' AND j.nfe_done>=1")
    c.rng.shuffle(rows)
    for att, w, started in rows:
        if w in c.farm.procs and w not in c.restart_at and started > c.started_at[w] and \
                att not in c.killed_attempts and c.farm.q(
                    "SELECT count(*) FROM attempts WHERE worker_id=? AND state='done' AND "
                    "finished_at > ?", w, c.started_at[w])[0][0]:
            c.farm.kill(w, signal.SIGKILL, quiet=True)
            c.killed_at[w].append(time.time())
            c.killed_attempts.add(att)
            c.stats["worker_kills"] += 1
            c.restart_at[w] = now + c.rng.uniform(0.3, 1.5)
            return


def restart_coordinator(c):
    """kill -9 the coordinator, start it again after a second."""
    if "coordinator" in c.restart_at:
        if time.time() >= c.restart_at["coordinator"]:
            c.start_coordinator()
            del c.restart_at["coordinator"]
        return
    if "stall" in c.restart_at or not c.due("coordinator_restarts", c.a.restarts):
        return
    c.farm.kill("coordinator", signal.SIGKILL, quiet=True)
    c.stats["coordinator_restarts"] += 1
    c.restart_at["coordinator"] = time.time() + 1.0


def stall_coordinator(c):
    """SIGSTOP the coordinator for --stall-seconds, then SIGCONT (a long GC-like pause, a VM
    migration, a disk that hangs: on a loaded machine it happens by itself): the workers find it
    silent and connect again, it finds their old connections gone. No job may pay for it."""
    if "stall" in c.restart_at:
        if time.time() >= c.restart_at["stall"]:
            p = c.farm.procs.get("coordinator")
            if p is not None and p.poll() is None:
                os.kill(p.pid, signal.SIGCONT)
            del c.restart_at["stall"]
        return
    if "coordinator" in c.restart_at or not c.due("coordinator_stalls", c.a.stalls):
        return
    p = c.farm.procs.get("coordinator")
    if p is None or p.poll() is not None:
        return
    os.kill(p.pid, signal.SIGSTOP)
    c.stats["coordinator_stalls"] += 1
    c.restart_at["stall"] = time.time() + c.a.stall_seconds


def crash_renderer(c):
    """SIGSEGV or SIGABRT (in turn) to the renderer of one slot in the middle of a render (NFE 1
    to steps-2 done): only that slot's attempt may end, by CRASH, charged to its job. Each crash
    hits a different good job (a job crashed on two workers is quarantined: that is the poison
    job's check, not this one's), on a worker whose renderers the campaign has not crashed in the
    last --crash-window seconds (crashes of different jobs within it blocklist the worker, rightly:
    not what this campaign tests)."""
    # due by the jobs started: a crash needs a render in its first NFEs, which a small run's
    # last jobs may all be past once that many are done
    if not c.renderers or not c.due("renderer_crashes", c.a.crashes, started=True):
        return
    rows = c.farm.q("SELECT a.id, a.job_id, a.worker_id, a.started_at FROM attempts a JOIN jobs j "
                    "ON j.current_attempt=a.id WHERE a.state='running' AND j.nfe_done BETWEEN 1 "
                    "AND ?", c.a.steps - 2)
    c.rng.shuffle(rows)
    crashed_jobs = {j for j, _, _, _ in c.crashed.values()}
    for att, job, w, started in rows:
        p = c.farm.procs.get(w)
        if job in crashed_jobs or job == c.poison_job or p is None or w in c.restart_at or \
                started <= c.started_at[w] or att in c.killed_attempts or \
                time.time() - c.crashed_at.get(w, 0) < c.a.crash_window:
            continue
        wl = c.wlog[w]
        wl.read()
        gpus = wl.gpus.get(att)
        if not gpus or len(gpus) != 1 or gpus[0] not in wl.renderers:
            continue
        pid = wl.renderers[gpus[0]]
        if parent_of(pid, c.exe) != p.pid:  # not (or no longer) this worker's renderer
            continue
        sig = (signal.SIGSEGV, signal.SIGABRT)[c.stats["renderer_crashes"] % 2]
        os.kill(pid, sig)
        c.crashed[att] = (job, w, gpus[0], sig.name)
        c.crashed_at[w] = time.time()
        c.stats["renderer_crashes"] += 1
        return


FAULTS = [kill_worker, restart_coordinator, stall_coordinator, crash_renderer]


def submit_bad(c, i):
    """Bad input i (cycling through the kinds): refused at submit, or failed as the job's fault.
    """
    kind = i % 4
    line = c.good_line(10_000 + i)
    if kind == 0:  # not a prompt cache
        bad = os.path.join(c.farm.dir, "garbage%d.safetensors" % i)
        with open(bad, "wb") as f:
            f.write(os.urandom(300))
        line["prompt_cache"] = bad
    elif kind == 1:  # a file that is not there
        line["prompt_cache"] = os.path.join(c.farm.dir, "missing%d.safetensors" % i)
    elif kind == 2:  # more GPUs than any worker has: refused at submit
        line["gpus"] = max(2, c.a.slots + 1)
    else:  # an absurd size: refused by the parser or at submit
        line["frames"], line["height"], line["width"] = 100000, 32, 32
    r = c.submit_lines([line], "bad%d" % i)
    if r.returncode != 0:
        c.stats["bad_refused_at_submit"] += 1
        return
    job = json.loads(r.stdout)["jobs"][0]["job"]
    c.bad_jobs.append(int(job[1:]))


def submit_poison(c):
    r = c.submit_lines([c.good_line(POISON_SEED)], "poison")
    check(r.returncode == 0, "the poison job was refused at submit: %s" % r.stderr)
    c.poison_job = int(json.loads(r.stdout)["jobs"][0]["job"][1:])


# ---------------------------------------------------------------- end checks
def check_faults_landed(c):
    want = {"worker_kills": c.a.kills, "coordinator_restarts": c.a.restarts,
            "coordinator_stalls": c.a.stalls,
            "renderer_crashes": c.a.crashes if c.renderers else 0}
    short = ["%d of %d %s" % (c.stats[k], n, k) for k, n in want.items() if c.stats[k] != n]
    check(not short, "only " + ", ".join(short) + " landed")


def check_good_done_once(c):
    for b, n in c.good_batches:
        c.farm.check_exactly_once(b, n)
    c.stats["good_done"] = c.good_jobs()


def check_failures_are_bad_jobs(c):
    failed = [j for (j,) in c.farm.q("SELECT id FROM jobs WHERE state='failed'")
              if j != c.poison_job]
    check(sorted(failed) == sorted(c.bad_jobs),
          "failed jobs %s, expected exactly the bad ones %s" % (failed, c.bad_jobs))
    for j in failed:
        faults = [f for (f,) in c.farm.q("SELECT fault FROM attempts WHERE job_id=? ORDER BY id "
                                         "DESC LIMIT 1", j)]
        check(faults == ["job"], "bad job j%d failed as %s" % (j, faults))
    lost = c.farm.q("SELECT count(*) FROM attempts WHERE fault='worker'")[0][0]
    c.stats["bad_failed"] = len(failed)
    c.stats["attempts_lost_with_worker"] = lost


def check_no_innocent_charged(c):
    """Every attempt of a good job ended done, or lost with its worker (not counted against the
    job's --max-attempts; most with a worker the campaign SIGKILLed while the attempt was on it,
    the others are counted apart, by reason), or by the renderer crash the campaign caused in
    that very attempt; and each good job was charged exactly one attempt, the one that rendered
    it (a job with crash blame counts its crashes apart; without it, one more per crash)."""
    crash_att = {att for att in c.crashed}
    rows = c.farm.q("SELECT a.id, a.job_id, a.worker_id, a.state, coalesce(a.fault,''), "
                    "a.started_at, coalesce(a.finished_at, 0), coalesce(a.reason,'') FROM attempts "
                    "a JOIN jobs j ON j.id=a.job_id WHERE j.batch_id IN (%s) ORDER BY a.id"
                    % ",".join(str(b) for b, _ in c.good_batches))
    n_crash = n_kill = 0
    other = {}  # reason -> attempts lost with a worker the campaign did not kill
    for att, job, w, state, fault, started, finished, reason in rows:
        if state == "done":
            continue
        if fault in CRASH_FAULTS:
            check(att in crash_att, "attempt %d of j%d on %s ended by a renderer crash (%s), but "
                  "the campaign crashed no renderer of it: an innocent job charged" % (
                      att, job, w, reason))
            n_crash += 1
            continue
        check(att not in crash_att, "attempt %d of j%d: the campaign crashed its renderer (%s), "
              "but it ended %s as a %s fault: %s" % (att, job, c.crashed.get(att), state,
                                                     fault or "no", reason))
        kills = [t for t in c.killed_at.get(w, []) if started - 0.5 <= t <= finished + 0.5]
        check(fault in ("worker", "transient"),
              "attempt %d of j%d on %s ended %s (%s fault: %s)" % (
                  att, job, w, state, fault or "no", reason))
        if kills:
            n_kill += 1
        else:  # whether it was charged, the per-job count below says
            key = "%s %s fault: %s" % (state, fault, re.sub(r"\d+", "N", reason))
            other[key] = other.get(key, 0) + 1
    for att, (job, w, slot, sig) in c.crashed.items():
        got = c.farm.q("SELECT state, coalesce(fault,''), coalesce(reason,'') FROM attempts "
                       "WHERE id=?", att)[0]
        check(got[1] in CRASH_FAULTS, "the campaign sent %s to the renderer of %s slot %d in "
              "attempt %d of j%d; the attempt ended %s" % (sig, w, slot, att, job, got))
    crashes = {}
    for job, _, _, _ in c.crashed.values():
        crashes[job] = crashes.get(job, 0) + 1
    # a coordinator with crash blame counts a job's crashes apart (jobs.crashes), charged to no
    # budget; before it, a crash was the job's own attempt
    cols = [r[1] for r in c.farm.q("PRAGMA table_info(jobs)")]
    own = "crashes" if "crashes" in cols else "0"
    for job, claimed, lost, crashed in c.farm.q(
            "SELECT id, attempts, worker_faults, %s FROM jobs WHERE batch_id IN (%s)"
            % (own, ",".join(str(b) for b, _ in c.good_batches))):
        want = crashes.get(job, 0)
        charged = claimed - lost - crashed
        check(crashed == (want if own != "0" else 0) and charged == 1 + (0 if own != "0" else want),
              "j%d charged %d attempts (%d claimed, %d lost with a worker, %d crashes counted; "
              "the campaign crashed it %d times)" % (job, charged, claimed, lost, crashed, want))
    c.stats["attempts_ended_by_worker_kill"] = n_kill
    c.stats["attempts_ended_otherwise"] = other
    c.stats["attempts_ended_by_injected_crash"] = n_crash


def check_poison_quarantined(c):
    """The poison job was quarantined at the crash that made its record name two different
    workers or reach --max-crashes (3) (a busy farm's free slot is often the one its crash
    freed: w0, w0, w2 is quarantined at the third), not before and not after: failed for good,
    each of its attempts ended by a crash, and `vdn retry` without --force leaves it alone (exit
    status 1)."""
    if c.poison_job is None:
        return
    j = c.poison_job
    state, err = c.farm.q("SELECT state, coalesce(last_error,'') FROM jobs WHERE id=?", j)[0]
    atts = c.farm.q("SELECT worker_id, state, coalesce(fault,'') FROM attempts WHERE job_id=? "
                    "ORDER BY id", j)
    crashes = [w for w, _, f in atts if f in CRASH_FAULTS]
    ev = [k for (k,) in c.farm.q("SELECT kind FROM events WHERE job_id=? ORDER BY id", j)]
    cols = [r[1] for r in c.farm.q("PRAGMA table_info(jobs)")]
    flag = c.farm.q("SELECT quarantined FROM jobs WHERE id=?", j)[0][0] \
        if "quarantined" in cols else None
    quarantined = flag == 1 or (flag is None and ("quarantin" in err.lower() or
                                                  any("quarantin" in k for k in ev)))
    check(state not in ("queued", "running") and quarantined,
          "poison job j%d: %s, not quarantined (attempts %s; events %s)" % (j, state, atts, ev))
    def quarantines(seq):
        return len(set(seq)) >= 2 or len(seq) >= 3
    check(len(crashes) == len(atts) and quarantines(crashes) and
          not any(quarantines(crashes[:i]) for i in range(1, len(crashes))),
          "poison job j%d crashed renderers on %s (expected quarantine at the crash that names "
          "two different workers, or the third); attempts %s" % (j, crashes, atts))
    r = c.farm.run(["retry", "j%d" % j, "--coordinator", c.farm.client_ep], check_rc=False)
    check(r.returncode != 0, "vdn retry j%d (quarantined) without --force was accepted: %s"
          % (j, r.stdout))
    c.stats["poison_quarantined"] = True
    c.stats["poison_crashed_on"] = crashes


def check_no_blocklist(c):
    """No worker was blocklisted, at any time of the run (the coordinator's events) or now (`vdn
    workers --json`): bad input is the job's fault and one poison job is one job (the campaign's
    own kills and crashes keep below --blocklist-failures: see kill_worker, crash_renderer)."""
    ev = c.farm.q("SELECT worker_id, kind, detail FROM events WHERE kind LIKE 'blocklist%'")
    check(not ev, "workers blocklisted during the run: %s" % ev[:5])
    r = c.farm.run(["workers", "--json", "--coordinator", c.farm.client_ep])
    ws = json.loads(r.stdout).get("workers", [])
    bad = [(w.get("worker_id"), w.get("state"), w.get("blocked_classes")) for w in ws
           if w.get("state") == "blocked" or w.get("blocked_classes") or
           w.get("blocked_until", 0) > time.time()]
    check(len(ws) == len(c.workers), "vdn workers --json lists %d workers" % len(ws))
    check(not bad, "workers blocklisted at the end: %s" % bad)
    c.stats["workers_blocklisted"] = 0


def check_nothing_left(c):
    scratch = os.path.join(c.farm.dir, "scratch")
    left = sorted(os.listdir(scratch))
    check(len(left) == len(c.workers), "stale scratch folders: %s" % left)
    for d in left:
        # the lock, and the file of the live renderers' pids
        inside = [x for x in os.listdir(os.path.join(scratch, d))
                  if x != ".lock" and "renderer" not in x]
        check(not inside, "scratch %s still holds %s" % (d, inside))
    tmp = os.path.join(c.farm.store_dir(), ".vdn-tmp")
    check(not os.path.isdir(tmp) or not os.listdir(tmp), "store temp files: %s" % (
        os.listdir(tmp) if os.path.isdir(tmp) else []))
    def done_snaps():
        """Snapshots (PREFIX.snapshots/aATTEMPT.safetensors) of done jobs; a failed job keeps
        its own (vdn retry resumes from them): the poison job's."""
        out = []
        for d, _, fs in os.walk(c.farm.store_dir()):
            for f in fs if ".snapshots" in d else []:
                m = re.match(r"a(\d+)\.safetensors$", f)
                st = c.farm.q("SELECT j.state FROM attempts a JOIN jobs j ON j.id=a.job_id WHERE "
                              "a.id=?", int(m.group(1))) if m else []
                if not st or st[0][0] != "failed":
                    out.append(os.path.relpath(os.path.join(d, f), c.farm.store_dir()))
        return out
    # a done job's snapshots go once its RESULT is ACKed (a thread of their own: a moment)
    snaps = done_snaps()
    t0 = time.time()
    while snaps and time.time() - t0 < 10:
        time.sleep(0.5)
        snaps = done_snaps()
    check(not snaps, "snapshots of done jobs left: %s" % snaps[:5])
    # a renderer dies with its worker (SIGKILLed daemons included)
    live = {p.pid for w, p in c.farm.procs.items() if w in c.workers}
    pids = set()
    for w in c.workers:
        c.wlog[w].read()
        pids |= c.wlog[w].all_renderers
    orphans = []
    t0 = time.time()
    while True:
        orphans = [(pid, parent_of(pid, c.exe)) for pid in sorted(pids)
                   if parent_of(pid, c.exe) not in live | {None}]
        if not orphans or time.time() - t0 > 5:
            break
        time.sleep(0.5)
    check(not orphans, "renderer processes outlived their worker (pid, parent): %s" % orphans)
    c.stats["renderer_pids_seen"] = len(pids)


def check_resumed_from_latest(c):
    """A requeued job whose earlier attempts evaluated NFEs resumed, from the newest snapshot
    stored under the key it resumed from (the workers' logs say what they stored and what they
    resumed from), and from no earlier step than the coordinator had heard of."""
    stored, resumed_from = {}, {}
    pat_s = re.compile(r"job (\d+) attempt (\d+): snapshot after NFE (\d+)/\d+ stored as (\S+)")
    pat_r = re.compile(r"job (\d+) attempt (\d+): resuming after NFE (\d+)/\d+ from (\S+)")
    for w in c.workers:
        for line in open(c.farm.logs[w], errors="replace"):
            m = pat_s.search(line)
            if m:
                stored[m.group(4)] = int(m.group(3))
            m = pat_r.search(line)
            if m:
                resumed_from[int(m.group(2))] = (int(m.group(3)), m.group(4))
    rows = c.farm.q("SELECT j.id, j.run_record, json_extract(j.request,'$.steps'), "
                    "(SELECT id FROM attempts WHERE job_id=j.id AND state='done') FROM jobs j "
                    "WHERE j.state='done' AND j.attempts > 1")
    n = resumed = 0
    for job, rec, steps, final in rows:
        got = json.loads(rec).get("sampler", {}).get("resumed_from_step", 0) or 0
        before = c.farm.q("SELECT coalesce(sum(nfe_evaluated),0) FROM attempts WHERE job_id=? "
                          "AND id < ?", job, final)[0][0]
        heard = min(before, int(steps) - 1)
        n += 1
        if got == 0:
            check(heard == 0, "j%d rendered from the noise, but the coordinator had heard of a "
                  "snapshot after NFE %d" % (job, heard))
            continue
        k, key = resumed_from.get(final, (None, None))
        check(k == got and stored.get(key) == got and got >= heard,
              "j%d resumed from step %d (log: %s from %s, whose newest stored step is %s); the "
              "coordinator had heard of %d" % (job, got, k, key, stored.get(key), heard))
        resumed += 1
    c.stats["requeued_done"] = n
    c.stats["requeued_resumed_from_snapshot"] = resumed


def check_mp4s(c):
    n = 0
    for b, _ in c.good_batches:
        for job, keys in c.farm.job_keys(b).items():
            mp4 = [k for k in keys if k.endswith(".mp4")]
            check(mp4, "j%d stored no mp4: %s" % (job, keys))
            p = subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v",
                                "-show_entries", "stream=nb_read_frames", "-of", "json",
                                os.path.join(c.farm.store_dir(), mp4[0])],
                               capture_output=True, text=True)
            s = json.loads(p.stdout or "{}").get("streams", [{}])[0]
            check(p.returncode == 0 and int(s.get("nb_read_frames", 0)) == c.a.frames,
                  "j%d: ffprobe on %s: %s %s" % (job, mp4[0], s, p.stderr[-300:]))
            n += 1
    c.stats["mp4_ffprobed"] = n


CHECKS = [check_faults_landed, check_good_done_once, check_failures_are_bad_jobs,
          check_no_innocent_charged, check_poison_quarantined, check_no_blocklist,
          check_nothing_left, check_resumed_from_latest, check_mp4s]
CHECK_NAMES = [f.__name__[len("check_"):] for f in CHECKS]


def run(a):
    with Farm(a.vdn, "campaign", steps=a.steps, lease=a.lease, heartbeat=0.5,
              max_attempts=3, keep=a.keep) as farm:
        ck = os.path.join(farm.dir, "ckv")  # with the VAEs: every job stores an mp4
        farm.run(["ckpt", "init", "--preset", "tiny", "--vdn", "--vae", "--out", ck], timeout=120)
        farm.ckpt, farm.prompt = ck, os.path.join(ck, "prompt.safetensors")
        c = Campaign(farm, a)
        c.coord_args = ["--max-worker-faults", "50",
                        "--blocklist-failures", str(a.blocklist_failures)]
        if "--crash-window" in farm.run(["coordinator", "--help"], check_rc=False).stdout:
            c.coord_args += ["--crash-window", str(a.crash_window)]
        c.start_coordinator()
        for w in c.workers:
            c.start_worker(w)
        have = c.wait_renderers()
        if not c.renderers and (a.crashes or a.poison):
            why = ("SKIP renderer crashes and poison job: the workers logged no renderer per "
                   "slot ('renderer slot S (gpu G) pid P started'; got %s): this build renders "
                   "in the worker daemon itself" % have)
            log(why)
            c.skipped.append(why)
            a.poison = False
        if a.crashes and c.renderers:
            log("renderers: %s" % {w: c.wlog[w].renderers for w in c.workers})
        per = [a.jobs // a.batches + (1 if i < a.jobs % a.batches else 0)
               for i in range(a.batches)]
        seed = 1
        for i, n in enumerate(per):
            r = c.submit_lines([c.good_line(seed + k) for k in range(n)], "good%d" % i)
            check(r.returncode == 0, "good batch %d refused: %s" % (i, r.stderr))
            c.good_batches.append((json.loads(r.stdout)["batch_id"], n))
            seed += n
            if i == 0 and a.poison:
                submit_poison(c)
        for i in range(a.bad):
            submit_bad(c, i)
        log("submitted %d good jobs in %d batches, %d bad inputs (%d refused at submit)%s"
            % (a.jobs, a.batches, a.bad, c.stats["bad_refused_at_submit"],
               ", the poison job j%d" % c.poison_job if c.poison_job else ""))
        deadline = time.time() + a.timeout
        while True:
            for f in FAULTS:
                f(c)
            states = dict(farm.q("SELECT state, count(*) FROM jobs GROUP BY state"))
            if not states.get("queued") and not states.get("running") and not c.restart_at:
                break
            check(time.time() < deadline, "not finished after %d s: %s" % (a.timeout, states))
            time.sleep(TICK)
        c.stats["seconds"] = round(time.time() - c.t0, 1)
        c.stats["checks_skipped"] = sorted(a.skip_check)
        failed = {}
        for chk in CHECKS:  # every check runs, so a failing run says all that is wrong
            name = chk.__name__[len("check_"):]
            if name not in a.skip_check:
                try:
                    chk(c)
                except TestFailure as e:
                    failed[name] = str(e)
                    log("check %s FAILED: %s" % (name, e))
        c.stats["checks_failed"] = failed
        if c.skipped:
            c.stats["skipped"] = c.skipped
        c.stats["crashed"] = ["j%d attempt %d on %s slot %d: %s" % (j, att, w, s, sig)
                              for att, (j, w, s, sig) in sorted(c.crashed.items())]
        log("campaign: %s" % json.dumps(c.stats))
        if a.json:
            with open(a.json, "w") as f:
                json.dump(dict(c.stats, jobs=a.jobs, batches=a.batches, workers=a.workers,
                               slots=a.slots, steps=a.steps, frames=a.frames,
                               nfe_delay_ms=a.nfe_delay_ms, seed=a.seed,
                               command=" ".join(sys.argv)), f, indent=1)
        if failed:
            farm.failed = True
            raise TestFailure("%d check(s) failed: %s" % (len(failed), ", ".join(failed)))
        return c.stats


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vdn", required=True)
    ap.add_argument("--source", default=None)  # ctest passes it; unused
    ap.add_argument("--jobs", type=int, default=9)
    ap.add_argument("--frames", type=int, default=22, help="17n+5 pixel frames a job")
    ap.add_argument("--batches", type=int, default=2)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--slots", type=int, default=2,
                    help="stand-in GPUs per worker, one CPU engine each (0: one --cpu engine)")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--kills", type=int, default=2, help="worker SIGKILLs")
    ap.add_argument("--restarts", type=int, default=1, help="coordinator kill -9 restarts")
    ap.add_argument("--stalls", type=int, default=0,
                    help="coordinator stalls (SIGSTOP for --stall-seconds, then SIGCONT)")
    ap.add_argument("--stall-seconds", type=float, default=4.0)
    ap.add_argument("--bad", type=int, default=4, help="bad inputs")
    ap.add_argument("--crashes", type=int, default=1,
                    help="renderer crashes (SIGSEGV/SIGABRT to one slot's renderer)")
    ap.add_argument("--no-poison", dest="poison", action="store_false",
                    help="no poison job (VDN_TEST_POISON_SEED)")
    ap.add_argument("--skip-check", action="append", default=[], choices=CHECK_NAMES,
                    help="leave out an end check (repeatable)")
    ap.add_argument("--blocklist-failures", type=int, default=3,
                    help="the coordinator's: worker faults in a row, or crashes of different "
                    "jobs within --crash-window, that blocklist a worker")
    ap.add_argument("--crash-window", type=float, default=60,
                    help="the coordinator's; the campaign crashes one worker's renderers at most "
                    "once in it")
    ap.add_argument("--coordinator-nice", type=int, default=None,
                    help="the coordinator's niceness (default: the campaign's)")
    ap.add_argument("--nfe-delay-ms", type=int, default=300)
    ap.add_argument("--lease", type=float, default=4.0)
    ap.add_argument("--timeout", type=int, default=240)
    ap.add_argument("--seed", type=int, default=27)
    ap.add_argument("--json", default=None)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    t0 = time.time()
    try:
        run(a)
    except TestFailure as e:
        log("FAIL after %.1f s: %s" % (time.time() - t0, e))
        sys.exit(1)
    log("PASS in %.1f s" % (time.time() - t0))


if __name__ == "__main__":
    main()
