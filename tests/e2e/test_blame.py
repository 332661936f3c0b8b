"""Failure blame on a one-worker farm (issue 11): ten jobs whose prompt cache is garbage each
fail at once as the job's fault and leave the worker's standing alone, so good jobs submitted
right after run at once (before, three such jobs blocklisted the only worker for 300 s). Local
paths outside the worker's --data-root (also through a symlink) are refused the same way.
Worker deaths never fail a job (issue 27): with --max-attempts 1, a job whose worker is SIGKILLed
twice mid-render is requeued each time (worker faults have their own budget) and goes to the
other worker while the killed one, restarted, is idle beside it."""
import os
import shutil
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import Farm, check, log, main, wait_for


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

        # paths a client may name: outside the worker's --data-root (the farm dir), or through a
        # symlink inside it (never followed), is refused as the job's fault; the worker stays
        # clean
        outside = tempfile.mkdtemp(prefix="vdn-e2e-outside-")
        try:
            shutil.copy(good, os.path.join(outside, "prompt.safetensors"))
            link = os.path.join(farm.dir, "link.safetensors")
            os.symlink(os.path.join(outside, "prompt.safetensors"), link)
            for path, why in ((os.path.join(outside, "prompt.safetensors"),
                               "outside this worker's --data-root"),
                              (link, "a symlink on the way")):
                farm.prompt = path
                b = farm.submit(1, fname="outside.jsonl")
                farm.wait_batch(b, 1, timeout=30)
                st, attempts, err = farm.q("SELECT state, attempts, last_error FROM jobs WHERE "
                                           "batch_id=?", b)[0]
                log("%s: %s after %d attempt(s): %s" % (path, st, attempts, err))
                check(st == "failed" and attempts == 1 and "job fault" in err and
                      why in err and path in err,
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

    test_worker_deaths(args)




def test_worker_deaths(args):
    # a long heartbeat: the killed worker is back (READY) before the coordinator would notice its
    # silence, so when the job is requeued both workers are free and only "avoid the worker that
    # just lost it" keeps it from going straight back
    with Farm(args.vdn, "lost", steps=8, max_attempts=1, lease=20, heartbeat=2,
              keep=args.keep) as farm:
        farm.start_coordinator()
        farm.start_worker("a", nfe_delay_ms=250)
        wait_for("a registered", lambda: farm.q("SELECT 1 FROM workers WHERE id='a'"), 30)
        b = farm.submit(1)
        job = farm.q("SELECT id FROM jobs WHERE batch_id=?", b)[0][0]
        farm.start_worker("b", nfe_delay_ms=250)
        wait_for("b registered", lambda: farm.q("SELECT 1 FROM workers WHERE id='b'"), 30)
        kills = []
        for _ in range(2):
            # mid-render on some worker: kill it, restart it at once
            att, w = wait_for("a running attempt with an NFE done", lambda: farm.q(
                "SELECT a.id, a.worker_id FROM attempts a JOIN jobs j ON j.current_attempt=a.id "
                "WHERE a.state='running' AND j.nfe_done>=1 AND a.id NOT IN (%s)"
                % ",".join(str(k[0]) for k in kills or [(0, 0)])), 60)[0]
            farm.kill(w, signal.SIGKILL)
            kills.append((att, w, time.time()))
            farm.start_worker(w, nfe_delay_ms=250)
        farm.wait_batch(b, 1, timeout=90)
        st, attempts, wf = farm.q("SELECT state, attempts, worker_faults FROM jobs WHERE id=?",
                                  job)[0]
        log("job j%d: %s after %d attempts, %d worker faults; kills %s" % (job, st, attempts, wf,
                                                                           kills))
        check(st == "done", "a job failed because its worker died (--max-attempts 1): %s" % st)
        check(wf == 2 and attempts == 3, "worker_faults %d, attempts %d" % (wf, attempts))
        rows = farm.q("SELECT id, worker_id, state, fault, started_at FROM attempts WHERE job_id=? "
                      "ORDER BY id", job)
        for (att, w, _), nxt in zip(kills, rows[1:]):
            prev = [r for r in rows if r[0] == att][0]
            check(prev[2] == "expired" and prev[3] == "worker", "killed attempt: %s" % (prev,))
            # the killed worker was back (READY after the kill) when the next attempt started
            back = farm.q("SELECT min(at) FROM events WHERE kind='worker_ready' AND worker_id=? "
                          "AND at > (SELECT started_at FROM attempts WHERE id=?)", w, att)[0][0]
            check(back is not None and back <= nxt[4] + 0.5,
                  "%s was not back before the requeue (ready %s, next start %s)"
                  % (w, back, nxt[4]))
            check(nxt[1] != w, "attempt %d went back to %s, which had just lost it" % (nxt[0], w))
        ev = farm.q("SELECT detail FROM events WHERE job_id=? AND kind='requeued'", job)
        check(all("worker faults" in d[0] for d in ev), "requeued events: %s" % ev)
        farm.check_exactly_once(b, 1)


if __name__ == "__main__":
    main(test)
