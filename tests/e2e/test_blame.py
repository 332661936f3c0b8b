"""Failure blame on a one-worker farm (issue 11): ten jobs whose prompt cache is garbage each
fail at once as the job's fault and leave the worker's standing alone, so good jobs submitted
right after run at once (before, three such jobs blocklisted the only worker for 300 s). Local
paths outside the worker's --data-root (also through a symlink) are refused the same way."""
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import Farm, check, log, main


def test(args):
    with Farm(args.vdn, "blame", steps=2, max_attempts=3, keep=args.keep) as farm:
        farm.start_coordinator()  # --blocklist-failures 3, --blocklist-seconds 300 (defaults)
        farm.start_worker("w")
        bad = os.path.join(farm.dir, "garbage.safetensors")
        with open(bad, "wb") as f:
            f.write(os.urandom(300))
        good = farm.prompt
        farm.prompt = bad
        b_bad = farm.submit(10)
        farm.wait_batch(b_bad, 10, timeout=60)
        rows = farm.q("SELECT state, attempts, last_error FROM jobs WHERE batch_id=?", b_bad)
        for st, attempts, err in rows:
            check(st == "failed" and attempts == 1, "bad job: %s after %d attempts" % (st, attempts))
            check("job fault" in err and bad in err, "reason lacks the blame or file: %r" % err)
        faults = farm.q("SELECT fault, count(*) FROM attempts a JOIN jobs j ON a.job_id=j.id "
                        "WHERE j.batch_id=? GROUP BY fault", b_bad)
        check(faults == [("job", 10)], "attempts' faults: %s" % faults)
        first_bad = farm.q("SELECT min(id) FROM jobs WHERE batch_id=?", b_bad)[0][0]
        r = farm.run(["logs", "j%d" % first_bad, "--coordinator", farm.client_ep])
        check("(job fault) bad prompt cache" in r.stdout, "vdn logs lacks the blame:\n" + r.stdout)
        failures, blocked = farm.q("SELECT failures, blocked_until FROM workers WHERE id='w'")[0]
        check(failures == 0 and blocked == 0, "the worker's standing changed: %d failures, "
              "blocked until %s" % (failures, blocked))
        check(farm.q("SELECT count(*) FROM events WHERE kind LIKE 'blocklisted%'")[0][0] == 0,
              "a blocklisted event was written")

        # paths a client may name: outside the worker's --data-root (the farm dir), directly or
        # through a symlink inside it, is refused as the job's fault; the worker stays clean
        outside = tempfile.mkdtemp(prefix="vdn-e2e-outside-")
        try:
            shutil.copy(good, os.path.join(outside, "prompt.safetensors"))
            link = os.path.join(farm.dir, "link.safetensors")
            os.symlink(os.path.join(outside, "prompt.safetensors"), link)
            for path in (os.path.join(outside, "prompt.safetensors"), link):
                farm.prompt = path
                b = farm.submit(1, fname="outside.jsonl")
                farm.wait_batch(b, 1, timeout=30)
                st, attempts, err = farm.q("SELECT state, attempts, last_error FROM jobs WHERE "
                                           "batch_id=?", b)[0]
                log("%s: %s after %d attempt(s): %s" % (path, st, attempts, err))
                check(st == "failed" and attempts == 1 and "job fault" in err and
                      "outside this worker's --data-root" in err and path in err,
                      "a path outside the data root: %s, %r" % (st, err))
        finally:
            shutil.rmtree(outside, ignore_errors=True)
        check(farm.q("SELECT failures FROM workers WHERE id='w'")[0][0] == 0,
              "refused paths counted against the worker")

        farm.prompt = good
        t0 = time.time()
        b_good = farm.submit(3, seed0=40)
        farm.wait_batch(b_good, 3, timeout=60)
        farm.check_exactly_once(b_good, 3)
        first = farm.q("SELECT min(a.started_at) FROM attempts a JOIN jobs j ON a.job_id=j.id "
                       "WHERE j.batch_id=?", b_good)[0][0]
        log("good jobs: first started %.2f s after submit, all done in %.1f s"
            % (first - t0, time.time() - t0))
        check(first - t0 < 5, "the first good job waited %.1f s" % (first - t0))
        # `vdn workers` shows it as a healthy worker
        r = farm.run(["workers", "--coordinator", farm.client_ep])
        check(" blocked" not in r.stdout, "vdn workers says blocked:\n%s" % r.stdout)


if __name__ == "__main__":
    main(test)
