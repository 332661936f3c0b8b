"""Crash blame, the worker's side (issue 24 item 3; docs/cluster.md "Crash blame"): each GPU slot
renders in a renderer process of its own, so a renderer that crashes costs only the job in it.

A 2-GPU worker without a GPU (a stand-in nvidia-smi: one CPU engine per listed GPU) renders two
jobs at once, one per GPU. Mid-render, the renderer of job A's GPU gets SIGSEGV (its pid from
the worker's SCRATCH/renderers.json, the documented test hook):
- job B finishes on its first attempt, untouched (its renderer's pid never changes);
- job A's first attempt ends failed with the worker's fault CRASH ("renderer crashed: signal 11
  (Segmentation fault) at NFE k/n" in the coordinator's attempts and in `vdn logs`), and the job
  is done on a retry;
- the worker starts a new renderer on that GPU (a new pid in renderers.json and the log line
  "renderer slot S (gpu G) pid P started: restarted after signal 11 ...").
Then a poison job (VDN_TEST_POISON_SEED: the renderer aborts at the job's first NFE) crashes the
renderer it lands on (signal 6, fault crash) each time it is placed, until the coordinator gives
up on it, while the other GPU's job goes on untouched. Then SIGTERM stops the idle worker: exit
0, its renderers stopped, its scratch folder removed. Last, a worker is SIGKILLed: its renderers
die with it (PR_SET_PDEATHSIG), no orphan left.
"""
import glob
import json
import os
import re
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import FRAMES, Farm, check, log, main, wait_for
from test_gpu_jobs import stand_in_gpus, submit

POISON = 666


def renderers(farm):
    """{gpu index: pid} from the worker's renderers.json."""
    paths = glob.glob(os.path.join(farm.dir, "scratch", "vdn-worker-w2-*", "renderers.json"))
    check(len(paths) == 1, "expected one renderers.json, found %s" % paths)
    with open(paths[0]) as f:
        doc = json.load(f)
    check(doc["worker"] == "w2", "renderers.json names worker %r" % doc["worker"])
    return {s["gpu"]: s["pid"] for s in doc["slots"]}


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead too (its parent, the worker we SIGKILLed, is gone: init reaps it)
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False




def start_gpus(wlog):
    """{job id: GPU index} from the worker's 'job J attempt A: start on GPU G' lines."""
    text = open(wlog).read()
    return {int(j): int(g) for j, g in re.findall(r"job (\d+) attempt \d+: start on GPU (\d+) ",
                                                  text)}


def test(args):
    with Farm(args.vdn, "renderer_crash", lease=6.0, max_attempts=3, keep=args.keep) as farm:
        env = dict(farm.env, VDN_NVIDIA_SMI=stand_in_gpus(farm, 2), VDN_TEST_NFE_DELAY_MS="300",
                   VDN_TEST_POISON_SEED=str(POISON))
        farm.start_coordinator()
        farm.spawn("w2", ["worker", "--connect", farm.worker_ep, "--checkpoint", farm.ckpt,
                          "--store", farm.store, "--id", "w2", "--scratch",
                          os.path.join(farm.dir, "scratch"), "--heartbeat-seconds",
                          str(farm.heartbeat), "--threads", "1", "--data-root", farm.dir],
                   env=env)
        wlog = farm.logs["w2"]
        req = {"prompt_cache": farm.prompt, "frames": FRAMES, "height": 32, "width": 32,
               "steps": 6}
        pids0 = wait_for("renderers.json with both GPUs", lambda: (
            glob.glob(os.path.join(farm.dir, "scratch", "vdn-worker-w2-*", "renderers.json"))
            and len(renderers(farm)) == 2 and all(renderers(farm).values())
            and renderers(farm)), 30)
        log("renderers at start: %s" % pids0)
        check(len(set(pids0.values())) == 2 and all(p > 0 for p in pids0.values()),
              "each GPU should have a renderer of its own: %s" % pids0)
        for g, pid in pids0.items():
            check(re.search(r"renderer slot \d+ \(gpu %d\) pid %d started" % (g, pid),
                            open(wlog).read()), "no start line for GPU %d's renderer" % g)

        # ---- 1. SIGSEGV into job A's renderer mid-render; job B goes on
        b = submit(farm, [dict(req, seed=1), dict(req, seed=2)], "two")
        jobs = [j for (j,) in farm.q("SELECT id FROM jobs WHERE batch_id=? ORDER BY id", b)]
        wait_for("both jobs rendering", lambda: farm.q(
            "SELECT count(*) FROM jobs WHERE batch_id=? AND state='running' AND nfe_done>=1",
            b)[0][0] == 2, 60)
        on = start_gpus(wlog)
        check(set(on) >= set(jobs) and on[jobs[0]] != on[jobs[1]],
              "the two jobs should run on different GPUs: %s" % on)
        job_a, job_b = jobs
        victim = pids0[on[job_a]]
        nfe_at_kill = farm.q("SELECT nfe_done FROM jobs WHERE id=?", job_a)[0][0]
        log("SIGSEGV -> renderer pid %d (GPU %d, job %d at NFE %d); job %d renders on GPU %d"
            % (victim, on[job_a], job_a, nfe_at_kill, job_b, on[job_b]))
        os.kill(victim, signal.SIGSEGV)
        farm.wait_batch(b, 2, 90)
        farm.check_exactly_once(b, 2)
        farm.check_store_matches(b)
        atts = {j: farm.q("SELECT id, state, fault, reason FROM attempts WHERE job_id=? "
                          "ORDER BY id", j) for j in jobs}
        log("attempts: %s" % atts)
        check(len(atts[job_b]) == 1 and atts[job_b][0][1] == "done",
              "job %d (its renderer untouched) should be done on its one attempt: %s"
              % (job_b, atts[job_b]))
        first = atts[job_a][0]
        check(len(atts[job_a]) == 2 and first[1] == "failed" and atts[job_a][1][1] == "done",
              "job %d: expected a failed attempt, then a done one: %s" % (job_a, atts[job_a]))
        check(re.fullmatch(r"renderer crashed: signal 11 \(Segmentation fault\) at NFE \d+/\d+",
                           first[3] or ""), "the crashed attempt's reason: %r" % (first[3],))
        # the wire's Fail.Fault CRASH (4), as the coordinator records it
        check(first[2] == "crash", "the crashed attempt's fault: %r" % (first[2],))
        check(re.search(r"job %d attempt %d: failed after [\d.]+ s \(crash fault\): renderer "
                        r"crashed: signal 11" % (job_a, first[0]), open(wlog).read()),
              "the worker's log does not say it sent the fault CRASH")
        logs = farm.run(["logs", "j%d" % job_a, "--coordinator", farm.client_ep],
                        check_rc=False).stdout
        check("renderer crashed: signal 11 (Segmentation fault)" in logs,
              "`vdn logs j%d` does not show the crash:\n%s" % (job_a, logs))
        pids1 = renderers(farm)
        check(pids1[on[job_b]] == pids0[on[job_b]],
              "GPU %d's renderer changed (%s -> %s)" % (on[job_b], pids0, pids1))
        check(pids1[on[job_a]] not in (0, victim),
              "GPU %d has no new renderer: %s" % (on[job_a], pids1))
        check(re.search(r"renderer slot \d+ \(gpu %d\) pid %d started: restarted after signal 11 "
                        r"\(Segmentation fault\)" % (on[job_a], pids1[on[job_a]]),
                        open(wlog).read()), "no restart line in the worker's log")
        check(not alive(victim), "the crashed renderer %d is still there" % victim)
        w = farm.q("SELECT state FROM workers WHERE id='w2'")[0][0]
        check(w not in ("blocked", "blocklisted"), "worker w2 is %s after one crash" % w)

        # ---- 2. a poison job aborts the renderer it lands on; a neighbour goes on
        b2 = submit(farm, [dict(req, seed=3, steps=12), dict(req, seed=POISON)], "poison")
        good, bad = [j for (j,) in farm.q("SELECT id FROM jobs WHERE batch_id=? ORDER BY id",
                                          b2)]
        wait_for("the poison job's first crash", lambda: farm.q(
            "SELECT count(*) FROM attempts WHERE job_id=? AND state='failed'", bad)[0][0] >= 1,
            60)
        farm.wait_batch(b2, 2, 120)
        states = dict(farm.q("SELECT id, state FROM jobs WHERE batch_id=?", b2))
        g_atts = farm.q("SELECT state FROM attempts WHERE job_id=?", good)
        check(states[good] == "done" and g_atts == [("done",)],
              "the job beside the poison one: %s, attempts %s" % (states[good], g_atts))
        p_atts = farm.q("SELECT state, fault, reason FROM attempts WHERE job_id=? ORDER BY id",
                        bad)
        log("poison job %d: %s, attempts %s" % (bad, states[bad], p_atts))
        check(states[bad] == "failed" and p_atts and all(
            s == "failed" and f == "crash" and re.match(r"renderer crashed: signal 6 \(Aborted\) (at NFE 1/\d+|"
                                       r"before any NFE was reported)$", r)
            for s, f, r in p_atts), "poison job attempts: %s" % p_atts)

        # ---- 3. SIGTERM to the idle worker: it stops its renderers and leaves no scratch
        pids = [p for p in renderers(farm).values() if p > 0]
        scratch = glob.glob(os.path.join(farm.dir, "scratch", "vdn-worker-w2-*"))
        farm.kill("w2", signal.SIGTERM)
        rc = farm.wait_exit("w2", 30)
        check(rc == 0, "the worker exited %d on SIGTERM" % rc)
        check(not any(alive(p) for p in pids), "renderers %s outlived a SIGTERMed worker" % pids)
        check(not any(os.path.exists(d) for d in scratch), "scratch left: %s" % scratch)
        log("worker SIGTERMed: exit 0, its renderers %s stopped, its scratch removed" % pids)

        # ---- 4. a worker SIGKILLed: no renderer outlives it (PR_SET_PDEATHSIG)
        farm.spawn("w2", ["worker", "--connect", farm.worker_ep, "--checkpoint", farm.ckpt,
                          "--store", farm.store, "--id", "w2", "--scratch",
                          os.path.join(farm.dir, "scratch"), "--threads", "1"], env=env)
        pids = wait_for("the new worker's renderers", lambda: (
            glob.glob(os.path.join(farm.dir, "scratch", "vdn-worker-w2-*", "renderers.json"))
            and all(renderers(farm).values()) and list(renderers(farm).values())), 30)
        farm.kill("w2", signal.SIGKILL)
        wait_for("renderers %s gone with the worker" % pids,
                 lambda: not any(alive(p) for p in pids), 10)
        log("worker SIGKILLed: its renderers %s are gone too" % pids)


if __name__ == "__main__":
    main(test)
