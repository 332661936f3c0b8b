"""SIGTERM on a busy worker: it finishes its job, reports it, takes no new one, and exits 0.
A second SIGTERM hands the job back at once (retryable), and another worker completes it."""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import Farm, check, log, main


def busy_attempt(farm, w, timeout=60):
    t0 = time.time()
    while time.time() - t0 < timeout:
        rows = farm.q("SELECT a.id FROM attempts a JOIN jobs j ON j.current_attempt=a.id "
                      "WHERE a.state='running' AND a.worker_id=? AND j.nfe_done>=1", w)
        if rows:
            return rows[0][0]
        time.sleep(0.1)
    raise AssertionError("%s never got busy" % w)


def test(args):
    with Farm(args.vdn, "sigterm", steps=6, lease=5, keep=args.keep) as farm:
        farm.start_coordinator()
        farm.start_worker("a", nfe_delay_ms=250)
        batch = farm.submit(3)
        att = busy_attempt(farm, "a")
        farm.kill("a", signal.SIGTERM)
        rc = farm.wait_exit("a", timeout=30)
        check(rc == 0, "worker exited %d after SIGTERM, expected 0" % rc)
        st = farm.q("SELECT state FROM attempts WHERE id=?", att)[0][0]
        check(st == "done", "attempt %d in flight at SIGTERM ended %r, expected done" % (att, st))
        # Its heartbeat said "draining" at once, so the coordinator hands it nothing after the
        # ACK (not even one attempt it would have to give back).
        later = farm.q("SELECT id, state, reason FROM attempts WHERE worker_id='a' AND id != ?",
                       att)
        check(not later, "worker a was given attempts after SIGTERM: %s" % later)
        log("first SIGTERM: attempt %d finished, worker exited 0" % att)

        # Second SIGTERM: hand the job back now.
        farm.start_worker("b", nfe_delay_ms=400)
        att = busy_attempt(farm, "b")
        farm.kill("b", signal.SIGTERM)
        time.sleep(0.3)
        farm.kill("b", signal.SIGTERM)
        t0 = time.time()
        rc = farm.wait_exit("b", timeout=15)
        check(rc == 0, "worker exited %d after two SIGTERMs" % rc)
        check(time.time() - t0 < 5, "two SIGTERMs took %.1f s; the job should be handed back at "
              "once" % (time.time() - t0))
        st, reason = farm.q("SELECT state, reason FROM attempts WHERE id=?", att)[0]
        check(st == "failed", "handed-back attempt %d is %r, expected failed" % (att, st))
        log("second SIGTERM: attempt %d handed back (%s)" % (att, reason))
        farm.start_worker("c")
        farm.wait_batch(batch, 3, timeout=60)
        farm.check_exactly_once(batch, 3)
        farm.check_store_matches(batch)


if __name__ == "__main__":
    main(test)
