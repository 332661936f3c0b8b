"""Resumable renders (issue 11): a worker SIGKILLed mid-render, three times, at different
points; each requeued attempt continues from the job's newest sampler snapshot. The job ends
with fewer model evaluations than restarting from zero would have needed, its output equals the
same request rendered straight through (another job, never interrupted) bit for bit, and no
snapshot is left in the store."""
import json
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import Farm, check, log, main

STEPS = 12


def tensors(path):
    """{name: raw bytes} of a safetensors file, read independently of our C reader."""
    data = open(path, "rb").read()
    (hl,) = struct.unpack("<Q", data[:8])
    hdr = json.loads(data[8:8 + hl])
    body = data[8 + hl:]
    return {k: (v["dtype"], v["shape"], body[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in hdr.items() if k != "__metadata__"}


def test(args):
    with Farm(args.vdn, "resume", steps=STEPS, max_attempts=10, keep=args.keep) as farm:
        # three SIGKILLs are three worker faults: keep the only worker out of the blocklist
        farm.start_coordinator(["--blocklist-failures", "10"])
        worker_args = ["--snapshot-every", "2", "--snapshot-seconds", "0"]
        farm.start_worker("w", nfe_delay_ms=150, extra_args=worker_args)
        # the reference: the same request, straight through
        ref = farm.submit(1, seed0=77)
        farm.wait_batch(ref, 1, timeout=60)
        farm.check_exactly_once(ref, 1)
        check(farm.q("SELECT nfe_evaluated FROM jobs WHERE batch_id=?", ref)[0][0] == STEPS,
              "the uninterrupted job did not evaluate exactly %d NFEs" % STEPS)

        b = farm.submit(1, seed0=77)
        job = farm.q("SELECT id FROM jobs WHERE batch_id=?", b)[0][0]
        kills = []
        for at_least in (2, 5, 8):
            t0 = time.time()
            while True:
                step, att = farm.q("SELECT snapshot_step, current_attempt FROM jobs WHERE id=?",
                                   job)[0]
                if step >= at_least and att:
                    break
                check(time.time() - t0 < 60, "no snapshot at step >= %d after 60 s (at %d)"
                      % (at_least, step))
                time.sleep(0.05)
            nfe = farm.q("SELECT nfe_done FROM jobs WHERE id=?", job)[0][0]
            log("attempt %d: snapshot at step %d, %d NFEs done: SIGKILL" % (att, step, nfe))
            farm.kill("w")
            kills.append(att)
            farm.start_worker("w", nfe_delay_ms=150, extra_args=worker_args)
        farm.wait_batch(b, 1, timeout=90)
        farm.check_exactly_once(b, 1)
        # the worker deletes them once the RESULT is ACKed, after the job reads done: a moment
        t0 = time.time()
        while True:
            left = [os.path.join(d, f) for d, _, fs in os.walk(farm.store_dir()) for f in fs
                    if ".snapshots" in d]
            if not left or time.time() - t0 > 10:
                break
            time.sleep(0.2)
        check(not left, "snapshots left in the store after the job was done: %s" % left)

        per_attempt = farm.q("SELECT id, state, nfe_evaluated FROM attempts WHERE job_id=? "
                             "ORDER BY id", job)
        log("attempts (id, state, NFEs evaluated): %s" % per_attempt)
        check(len(per_attempt) == 4, "expected 3 killed attempts and 1 done, got %s"
              % per_attempt)
        killed = sum(n for _, st, n in per_attempt if st != "done")
        last = per_attempt[-1][2]
        total = farm.q("SELECT nfe_evaluated FROM jobs WHERE id=?", job)[0][0]
        from_zero = killed + STEPS
        log("NFEs evaluated: %d (killed attempts %d + last %d); restarts from zero: %d"
            % (total, killed, last, from_zero))
        check(total == killed + last, "job total %d != sum of attempts" % total)
        check(total < from_zero, "no NFEs saved: %d vs %d from zero" % (total, from_zero))
        check(last <= STEPS - 8, "the last attempt evaluated %d NFEs; resumed from step >= 8 it "
              "needed at most %d" % (last, STEPS - 8))
        rec = json.loads(farm.q("SELECT run_record FROM jobs WHERE id=?", job)[0][0])
        check(rec["sampler"]["resumed_from_step"] >= 8, "record: resumed_from_step %s"
              % rec["sampler"]["resumed_from_step"])

        # bit for bit: the resumed job's latents equal the reference job's
        keys = farm.job_keys(ref)
        ref_job = list(keys)[0]
        ref_key = [k for k in keys[ref_job] if k.endswith(".safetensors")][0]
        got_key = [k for k in farm.job_keys(b)[job] if k.endswith(".safetensors")][0]
        root = farm.store_dir()
        want, got = tensors(os.path.join(root, ref_key)), tensors(os.path.join(root, got_key))
        check(sorted(want) == sorted(got) == ["audio", "video"], "tensors %s vs %s"
              % (sorted(want), sorted(got)))
        for name in want:
            check(want[name] == got[name], "%s differs from the uninterrupted render" % name)
        log("output equals the uninterrupted render bit for bit (%s)"
            % ", ".join("%s %s" % (k, want[k][1]) for k in sorted(want)))
        wlog = open(farm.logs["w"]).read()
        check("resuming after NFE" in wlog, "the worker never logged a resume")


if __name__ == "__main__":
    main(test)
