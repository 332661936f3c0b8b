#!/usr/bin/env python3
"""The fault campaign (issue 27): a CPU farm (one coordinator, W workers with --snapshot-every 1,
a file store) renders N good jobs in B batches while workers are SIGKILLed mid-render and
restarted, the coordinator is killed with -9 and restarted, and bad inputs are submitted. At the
end it checks, and prints as JSON:

  - every good job done exactly once, none lost (one accepted attempt, one done event);
  - no job failed for a worker's fault (only the bad jobs failed, each as the job's fault);
  - nothing left behind: one scratch folder per live worker, no temp file in the store, no
    snapshot of a done job;
  - every requeued job resumed from its latest snapshot (the run record's resumed_from_step is
    the newest step stored under the key it resumed from, per the workers' logs, and no earlier
    than the coordinator had heard of);
  - every mp4 read by ffprobe with the frames asked for.

Extending it: a fault is a function tick(camp) in FAULTS (called every TICK seconds, it decides
itself whether to act; count what it did in camp.stats); an end check is a function
check(camp) in CHECKS that raises TestFailure (harness.check) or records numbers in camp.stats.

  ops/test/campaign.py --vdn build/cli/vdn --jobs 200 --batches 10 --kills 40 --restarts 4 \\
      --bad 12 [--workers 3] [--steps 6] [--json out.json] [--keep]

CI runs a small one (ctest ops_campaign)."""
import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "e2e"))
from harness import Farm, TestFailure, check, log  # noqa: E402

TICK = 0.2


class Campaign:
    def __init__(self, farm, a):
        self.farm, self.a = farm, a
        self.rng = random.Random(a.seed)
        self.workers = ["w%d" % i for i in range(a.workers)]
        self.started_at = {}  # worker -> time of its (re)start
        self.restart_at = {}  # worker or "coordinator" -> when to start it again
        self.killed_attempts = set()
        self.good_batches = []  # (batch id, jobs)
        self.bad_jobs = []  # job ids that must fail as the job's fault
        self.stats = {"worker_kills": 0, "coordinator_restarts": 0, "bad_refused_at_submit": 0,
                      "bad_failed": 0}
        self.t0 = time.time()
        self.jitter = {}

    def start_worker(self, w):
        self.started_at[w] = time.time()
        self.farm.start_worker(w, nfe_delay_ms=self.a.nfe_delay_ms,
                               extra_args=["--snapshot-every", "1"])

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

    def due(self, what, count):
        """Whether fault `what`'s next one is due: `count` of them spread evenly over the good
        jobs' progress (the k-th once a jittered 0.8 k/count of them are done, whatever the
        machine's speed); one that found nothing to act on comes due again at the next tick."""
        k = self.stats[what]
        if k >= count:
            return False
        # within the first 80 % of the jobs: the last ones leave little running to kill
        at = 0.8 * (k + self.jitter.setdefault((what, k), self.rng.uniform(0.2, 0.8))) / count
        total = sum(n for _, n in self.good_batches)
        done = self.farm.q("SELECT count(*) FROM jobs WHERE state='done'")[0][0]
        return total > 0 and done >= at * total


# ---------------------------------------------------------------- faults
def kill_worker(c):
    """SIGKILL a worker mid-render (an attempt of its current process with an NFE done), restart
    it a moment later."""
    now = time.time()
    for w, t in list(c.restart_at.items()):
        if w != "coordinator" and now >= t:
            c.start_worker(w)
            del c.restart_at[w]
    if not c.due("worker_kills", c.a.kills):
        return
    rows = c.farm.q("SELECT a.id, a.worker_id, a.started_at FROM attempts a JOIN jobs j ON "
                    "j.current_attempt=a.id WHERE a.state='running' AND j.nfe_done>=1")
    c.rng.shuffle(rows)
    for att, w, started in rows:
        if w in c.farm.procs and w not in c.restart_at and started > c.started_at[w] and \
                att not in c.killed_attempts:
            c.farm.kill(w, signal.SIGKILL, quiet=True)
            c.killed_attempts.add(att)
            c.stats["worker_kills"] += 1
            c.restart_at[w] = now + c.rng.uniform(0.3, 1.5)
            return


def restart_coordinator(c):
    """kill -9 the coordinator, start it again after a second."""
    if "coordinator" in c.restart_at:
        if time.time() >= c.restart_at["coordinator"]:
            c.farm.start_coordinator(c.coord_args)
            del c.restart_at["coordinator"]
        return
    if not c.due("coordinator_restarts", c.a.restarts):
        return
    c.farm.kill("coordinator", signal.SIGKILL, quiet=True)
    c.stats["coordinator_restarts"] += 1
    c.restart_at["coordinator"] = time.time() + 1.0


FAULTS = [kill_worker, restart_coordinator]


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
        line["gpus"] = 2
    else:  # an absurd size: refused by the parser or at submit
        line["frames"], line["height"], line["width"] = 100000, 32, 32
    r = c.submit_lines([line], "bad%d" % i)
    if r.returncode != 0:
        c.stats["bad_refused_at_submit"] += 1
        return
    job = json.loads(r.stdout)["jobs"][0]["job"]
    c.bad_jobs.append(int(job[1:]))


# ---------------------------------------------------------------- end checks
def check_faults_landed(c):
    check(c.stats["worker_kills"] == c.a.kills and
          c.stats["coordinator_restarts"] == c.a.restarts,
          "only %d of %d worker kills and %d of %d coordinator restarts landed" % (
              c.stats["worker_kills"], c.a.kills, c.stats["coordinator_restarts"], c.a.restarts))


def check_good_done_once(c):
    for b, n in c.good_batches:
        c.farm.check_exactly_once(b, n)
    c.stats["good_done"] = sum(n for _, n in c.good_batches)


def check_failures_are_bad_jobs(c):
    failed = [j for (j,) in c.farm.q("SELECT id FROM jobs WHERE state='failed'")]
    check(sorted(failed) == sorted(c.bad_jobs),
          "failed jobs %s, expected exactly the bad ones %s" % (failed, c.bad_jobs))
    for j in failed:
        faults = [f for (f,) in c.farm.q("SELECT fault FROM attempts WHERE job_id=? ORDER BY id "
                                         "DESC LIMIT 1", j)]
        check(faults == ["job"], "bad job j%d failed as %s" % (j, faults))
    lost = c.farm.q("SELECT count(*) FROM attempts WHERE fault='worker'")[0][0]
    c.stats["bad_failed"] = len(failed)
    c.stats["attempts_lost_with_worker"] = lost


def check_nothing_left(c):
    scratch = os.path.join(c.farm.dir, "scratch")
    left = sorted(os.listdir(scratch))
    check(len(left) == len(c.workers), "stale scratch folders: %s" % left)
    for d in left:
        inside = [x for x in os.listdir(os.path.join(scratch, d)) if x != ".lock"]
        check(not inside, "scratch %s still holds %s" % (d, inside))
    tmp = os.path.join(c.farm.store_dir(), ".vdn-tmp")
    check(not os.path.isdir(tmp) or not os.listdir(tmp), "store temp files: %s" % (
        os.listdir(tmp) if os.path.isdir(tmp) else []))
    snaps = []
    for d, _, files in os.walk(c.farm.store_dir()):
        if ".snapshots" in d:
            snaps += files
    # a done job's snapshots go once its RESULT is ACKed (a thread of their own: a moment)
    t0 = time.time()
    while snaps and time.time() - t0 < 10:
        time.sleep(0.5)
        snaps = [f for d, _, fs in os.walk(c.farm.store_dir()) if ".snapshots" in d for f in fs]
    check(not snaps, "snapshots of done jobs left: %s" % snaps[:5])


def check_resumed_from_latest(c):
    """A requeued job whose earlier attempts evaluated NFEs resumed, from the newest snapshot
    stored under the key it resumed from (the workers' logs say what they stored and what they
    resumed from), and from no earlier step than the coordinator had heard of."""
    import re
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


CHECKS = [check_faults_landed, check_good_done_once, check_failures_are_bad_jobs, check_nothing_left,
          check_resumed_from_latest, check_mp4s]


def run(a):
    with Farm(a.vdn, "campaign", steps=a.steps, lease=a.lease, heartbeat=0.5,
              max_attempts=3, keep=a.keep) as farm:
        ck = os.path.join(farm.dir, "ckv")  # with the VAEs: every job stores an mp4
        farm.run(["ckpt", "init", "--preset", "tiny", "--vdn", "--vae", "--out", ck], timeout=120)
        farm.ckpt, farm.prompt = ck, os.path.join(ck, "prompt.safetensors")
        c = Campaign(farm, a)
        c.coord_args = ["--max-worker-faults", "50"]
        farm.start_coordinator(c.coord_args)
        for w in c.workers:
            c.start_worker(w)
        per = [a.jobs // a.batches + (1 if i < a.jobs % a.batches else 0)
               for i in range(a.batches)]
        seed = 1
        for i, n in enumerate(per):
            r = c.submit_lines([c.good_line(seed + k) for k in range(n)], "good%d" % i)
            check(r.returncode == 0, "good batch %d refused: %s" % (i, r.stderr))
            c.good_batches.append((json.loads(r.stdout)["batch_id"], n))
            seed += n
        for i in range(a.bad):
            submit_bad(c, i)
        log("submitted %d good jobs in %d batches, %d bad inputs (%d refused at submit)"
            % (a.jobs, a.batches, a.bad, c.stats["bad_refused_at_submit"]))
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
        for chk in CHECKS:
            chk(c)
        log("campaign: %s" % json.dumps(c.stats))
        if a.json:
            with open(a.json, "w") as f:
                json.dump(dict(c.stats, jobs=a.jobs, batches=a.batches, workers=a.workers,
                               steps=a.steps), f, indent=1)
        return c.stats


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vdn", required=True)
    ap.add_argument("--source", default=None)  # ctest passes it; unused
    ap.add_argument("--jobs", type=int, default=9)
    ap.add_argument("--frames", type=int, default=22, help="17n+5 pixel frames a job")
    ap.add_argument("--batches", type=int, default=2)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--kills", type=int, default=2)
    ap.add_argument("--restarts", type=int, default=1)
    ap.add_argument("--bad", type=int, default=4)
    ap.add_argument("--nfe-delay-ms", type=int, default=300)
    ap.add_argument("--lease", type=float, default=4.0)
    ap.add_argument("--timeout", type=int, default=150)
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
