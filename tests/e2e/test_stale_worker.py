"""A stale worker cannot complete a reassigned job: SIGSTOP a worker mid-render until its lease
passes, let another worker finish the job, then SIGCONT the first. Its attempt stays expired,
the job keeps the second worker's result, and exactly one result is accepted."""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import Farm, TestFailure, check, log, main


def test(args):
    with Farm(args.vdn, "stale", steps=6, lease=2, keep=args.keep) as farm:
        farm.start_coordinator()
        farm.start_worker("slow", nfe_delay_ms=300)
        batch = farm.submit(1)
        t0 = time.time()
        while True:
            # stop it one NFE before the end: on SIGCONT it finishes within 0.3 s and would
            # upload at once, racing the coordinator's refusal
            rows = farm.q("SELECT a.id FROM attempts a JOIN jobs j ON j.current_attempt=a.id "
                          "WHERE a.state='running' AND a.worker_id='slow' AND j.nfe_done>=5")
            if rows:
                stale_attempt = rows[0][0]
                break
            check(time.time() - t0 < 60, "the slow worker never started rendering")
            time.sleep(0.1)
        farm.kill("slow", signal.SIGSTOP)
        # Past the lease and the heartbeat timeout, the job goes back to the queue.
        t0 = time.time()
        while farm.q("SELECT state FROM attempts WHERE id=?", stale_attempt)[0][0] == "running":
            check(time.time() - t0 < 30, "attempt %d still running 30 s after SIGSTOP"
                  % stale_attempt)
            time.sleep(0.2)
        farm.start_worker("fresh")
        farm.wait_batch(batch, 1, timeout=60)
        farm.kill("slow", signal.SIGCONT)
        # Give the stale worker time to finish its render and try to report it.
        time.sleep(8)
        st = farm.q("SELECT state FROM attempts WHERE id=?", stale_attempt)[0][0]
        check(st == "expired", "stale attempt %d is %r, expected expired" % (stale_attempt, st))
        done = farm.q("SELECT worker_id FROM attempts WHERE state='done'")
        check(done == [("fresh",)], "accepted attempts: %s, expected only fresh's" % (done,))
        farm.check_exactly_once(batch, 1)
        farm.check_store_matches(batch)
        refused = farm.q("SELECT count(*) FROM events WHERE kind='stale_refused' AND "
                         "attempt_id=?", stale_attempt)[0][0]
        log("messages of the stale attempt refused: %d" % refused)
        check(farm.procs["slow"].poll() is None, "the stale worker died instead of carrying on")


if __name__ == "__main__":
    main(test)
