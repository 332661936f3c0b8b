"""Crash blame end to end (issue 24 item 3; docs/cluster.md "Crash blame"): real workers whose
renderers run in processes of their own, a poison job that aborts every renderer it lands on
(the workers' test hook VDN_TEST_POISON_SEED), a coordinator with --max-attempts 1.
- The poison job crashes the renderer of one worker, is requeued charged to no budget, goes to
  the other worker, crashes it too, and is quarantined: failed, "crashed the renderer twice
  (workers A, B)", each attempt's fault crash; `vdn status` and `vdn logs` say quarantined.
- Neither worker is charged (no fault count, not blocklisted): good jobs submitted next run at
  once, each done on its first attempt, on renderers the workers started again.
- `vdn retry` leaves the quarantined job alone and says so.
"""
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import Farm, check, log, main, wait_for

POISON = 4242




def test(args):
    with Farm(args.vdn, "quarantine", steps=2, max_attempts=1, keep=args.keep) as farm:
        farm.start_coordinator()  # --blocklist-failures 3, --max-crashes 3 (defaults)
        poison_env = {"VDN_TEST_POISON_SEED": str(POISON)}
        for w in ("a", "b"):
            farm.start_worker(w, extra_env=poison_env)
        wait_for("both workers registered", lambda: len(farm.q(
            "SELECT 1 FROM workers WHERE state='idle'")) == 2, 60)

        b_poison = farm.submit(1, seed0=POISON)
        job = farm.q("SELECT id FROM jobs WHERE batch_id=?", b_poison)[0][0]
        farm.wait_batch(b_poison, 1, timeout=90)
        st, q, err = farm.q("SELECT state, quarantined, last_error FROM jobs WHERE id=?", job)[0]
        rows = farm.q("SELECT worker_id, state, fault, reason FROM attempts WHERE job_id=? "
                      "ORDER BY id", job)
        log("poison job j%d: %s, quarantined %d, attempts %s" % (job, st, q, rows))
        check(st == "failed" and q == 1, "the poison job: %s, quarantined %d" % (st, q))
        workers = [r[0] for r in rows]
        check(sorted(workers) == ["a", "b"],
              "the poison job's attempts ran on %s, expected one on each worker" % workers)
        for w, ast, fault, reason in rows:
            check(ast == "failed" and fault == "crash" and "renderer crashed" in (reason or ""),
                  "attempt on %s: %s, fault %s, %r" % (w, ast, fault, reason))
        last = err.splitlines()[-1]
        check(last == "crashed the renderer twice (workers %s, %s)" % tuple(workers),
              "the reason: %r" % last)

        t = "j%d" % job
        r = farm.run(["status", t, "--coordinator", farm.client_ep])
        check("failed, quarantined" in r.stdout, "vdn status:\n" + r.stdout)
        r = farm.run(["logs", t, "--coordinator", farm.client_ep])
        check("quarantined" in r.stdout and "(crash fault) renderer crashed" in r.stdout,
              "vdn logs:\n" + r.stdout)
        r = farm.run(["retry", t, "--coordinator", farm.client_ep], check_rc=False)
        check(r.returncode == 1 and "requeued 0 job(s)" in r.stdout and
              "left 1 quarantined job(s)" in r.stdout,
              "vdn retry (exit %d):\n%s" % (r.returncode, r.stdout))
        check(farm.q("SELECT state FROM jobs WHERE id=?", job)[0][0] == "failed",
              "vdn retry requeued the quarantined job")

        # neither worker charged: good jobs run at once, each on its first attempt
        charged = farm.q("SELECT id, failures, blocked_until FROM workers WHERE failures > 0 OR "
                         "blocked_until > 0")
        check(not charged, "workers charged for the poison job: %s" % charged)
        t0 = time.time()
        b_good = farm.submit(4, seed0=10)
        farm.wait_batch(b_good, 4, timeout=90)
        farm.check_exactly_once(b_good, 4)
        tries = farm.q("SELECT max(attempts) FROM jobs WHERE batch_id=?", b_good)[0][0]
        ran_on = {w for (w,) in farm.q("SELECT DISTINCT a.worker_id FROM attempts a JOIN jobs j "
                                      "ON a.job_id=j.id WHERE j.batch_id=?", b_good)}
        log("good jobs done in %.1f s on %s, at most %d attempt(s)" % (time.time() - t0,
                                                                        sorted(ran_on), tries))
        check(tries == 1, "a good job needed %d attempts" % tries)
        r = farm.run(["workers", "--coordinator", farm.client_ep])
        check(" blocked" not in r.stdout, "vdn workers says blocked:\n%s" % r.stdout)
        for w in ("a", "b"):
            check(farm.procs[w].poll() is None, "worker %s exited" % w)
            with open(farm.logs[w], errors="replace") as f:
                text = f.read()
            check(re.search(r"renderer slot \d+ .*started: restarted after signal", text),
                  "worker %s did not start a new renderer after the crash" % w)


if __name__ == "__main__":
    main(test)
