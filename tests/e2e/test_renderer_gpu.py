"""Renderer processes on real GPUs (label gpu; skips without nvidia-smi or a CUDA build): the CPU
test e2e_renderer_crash with CUDA contexts in the renderers, which a stand-in inventory cannot
show (CUDA does not survive a fork: each renderer is exec'd, and must open its GPU as device N of
the worker's CUDA_VISIBLE_DEVICES).

On the first one or two GPUs of the machine, a worker with the small checkpoint (head_dim 128,
a width the CUDA attention takes):
- one job per GPU; SIGSEGV to one renderer mid-render: the other job is done on its one
  attempt, the crashed one fails with fault crash ("renderer crashed: signal 11 ...") and is done
  on a retry by a restarted renderer (a new pid, its engines on the same GPU again);
- with two GPUs, a 2-GPU job regroups both slots into one renderer (the log line) and renders
  sharded over both (run record gpus.ranks 2 with NCCL; a build without NCCL says why not);
- SIGTERM: exit 0, no renderer left.
"""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import FRAMES, Farm, SkipTest, check, log, main
from test_gpu_jobs import record_of, submit
from test_renderer_crash import alive, start_gpus, wait_for


def gpu_count():
    smi = shutil.which("nvidia-smi")
    if not smi:
        return 0
    r = subprocess.run([smi, "--query-gpu=index", "--format=csv,noheader"], capture_output=True,
                       text=True)
    return len(r.stdout.split()) if r.returncode == 0 else 0


def renderers(farm):
    paths = glob.glob(os.path.join(farm.dir, "scratch", "vdn-worker-g-*", "renderers.json"))
    check(len(paths) == 1, "expected one renderers.json, found %s" % paths)
    with open(paths[0]) as f:
        return {s["gpu"]: s["pid"] for s in json.load(f)["slots"]}


def test(args):
    n = min(gpu_count(), 2)
    if n == 0:
        raise SkipTest("no GPU (nvidia-smi lists none)")
    with Farm(args.vdn, "renderer_gpu", lease=10.0, keep=args.keep) as farm:
        ckpt = os.path.join(farm.dir, "cks")
        farm.run(["ckpt", "init", "--preset", "small", "--vdn", "--out", ckpt], timeout=300)
        prompt = os.path.join(ckpt, "prompt.safetensors")
        env = dict(farm.env, VDN_TEST_NFE_DELAY_MS="400")
        env.pop("VDN_NVIDIA_SMI", None)
        farm.start_coordinator()
        gpus = ",".join(str(i) for i in range(n))
        farm.spawn("g", ["worker", "--connect", farm.worker_ep, "--checkpoint", ckpt, "--store",
                         farm.store, "--id", "g", "--gpus", gpus, "--scratch",
                         os.path.join(farm.dir, "scratch"), "--heartbeat-seconds",
                         str(farm.heartbeat), "--data-root", farm.dir], env=env)
        wlog = farm.logs["g"]
        rows = wait_for("worker g registered", lambda: farm.q(
            "SELECT backend FROM workers WHERE id='g'"), 300)
        if rows[0][0] != "cuda":
            raise SkipTest("the worker's backend is %s (a build without CUDA)" % rows[0][0])
        pids0 = renderers(farm)
        log("%d GPU(s), renderers %s" % (n, pids0))
        check(len(pids0) == n and len(set(pids0.values())) == n and all(pids0.values()),
              "a renderer per GPU: %s" % pids0)

        # ---- 1. a job per GPU, SIGSEGV to the first job's renderer mid-render
        req = {"prompt_cache": prompt, "frames": FRAMES, "height": 64, "width": 64, "steps": 8}
        b = submit(farm, [dict(req, seed=s) for s in range(1, n + 1)], "per_gpu")
        jobs = [j for (j,) in farm.q("SELECT id FROM jobs WHERE batch_id=? ORDER BY id", b)]
        wait_for("jobs rendering", lambda: farm.q(
            "SELECT count(*) FROM jobs WHERE batch_id=? AND state='running' AND nfe_done>=1",
            b)[0][0] == n, 300)
        on = start_gpus(wlog)
        victim = pids0[on[jobs[0]]]
        log("SIGSEGV -> renderer %d (GPU %d, job %d)" % (victim, on[jobs[0]], jobs[0]))
        os.kill(victim, signal.SIGSEGV)
        farm.wait_batch(b, n, 300)
        farm.check_exactly_once(b, n)
        atts = {j: farm.q("SELECT state, fault, reason FROM attempts WHERE job_id=? ORDER BY id",
                          j) for j in jobs}
        log("attempts: %s" % atts)
        first = atts[jobs[0]][0]
        check(first[0] == "failed" and first[1] == "crash" and (first[2] or "").startswith(
            "renderer crashed: signal 11 (Segmentation fault)"), "crashed attempt: %s" % (first,))
        for j in jobs[1:]:
            check(len(atts[j]) == 1, "job %d beside the crash: attempts %s" % (j, atts[j]))
        pids1 = renderers(farm)
        check(pids1[on[jobs[0]]] not in (0, victim), "no new renderer: %s" % pids1)
        check(not alive(victim), "the crashed renderer %d is still there" % victim)

        # ---- 2. two GPUs: a 2-GPU job regroups both slots into one renderer
        if n == 2:
            b2 = submit(farm, [dict(req, seed=9, gpus=2, steps=2)], "two_gpu")
            farm.wait_batch(b2, 1, 600)
            farm.check_exactly_once(b2, 1)
            check(re.search(r"slots regrouped, one renderer over GPU\(s\) 0,1", open(wlog).read()),
                  "no regrouping line")
            g = record_of(farm, list(farm.job_keys(b2).values())[0])["gpus"]
            log("2-GPU job: %s" % g)
            check(g["held"] == [0, 1] and (g["ranks"] == 2 or g.get("not_sharded")),
                  "2-GPU record: %s" % g)

        pids = [p for p in renderers(farm).values() if p > 0]
        farm.kill("g", signal.SIGTERM)
        check(farm.wait_exit("g", 120) == 0, "the worker did not exit 0 on SIGTERM")
        check(not any(alive(p) for p in pids), "renderers %s outlived the worker" % pids)


if __name__ == "__main__":
    main(test)
