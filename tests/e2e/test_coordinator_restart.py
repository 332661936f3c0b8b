"""kill -9 the coordinator mid-batch and restart it on the same database: the batch completes
with no job lost and none accepted twice (counted in attempts and in the events table)."""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import Farm, check, log, main

N = 30
DOWN = [1.5, 4.0]


def test(args):
    with Farm(args.vdn, "coordrestart", steps=3, lease=6, keep=args.keep) as farm:
        farm.start_coordinator()
        for w in ("w0", "w1"):
            farm.start_worker(w, nfe_delay_ms=100)
        batch = farm.submit(N)
        restarts = 0
        t_end = time.time() + 100
        while time.time() < t_end:
            c = farm.counts(batch)
            done = c.get("done", 0)
            if restarts < 2 and done >= 6 * (restarts + 1) and farm.running_attempts():
                farm.kill("coordinator", signal.SIGKILL)
                # first a short outage (the workers' sockets reconnect by themselves), then one
                # past the workers' liveness limit (they drop the socket and back off)
                time.sleep(DOWN[restarts])
                farm.start_coordinator()
                restarts += 1
                log("coordinator restarted (%d), %d done before" % (restarts, done))
            if done == N:
                break
            time.sleep(0.2)
        check(restarts == 2, "only %d restarts happened" % restarts)
        farm.wait_batch(batch, N, timeout=max(5, t_end - time.time()))
        farm.check_exactly_once(batch, N)
        farm.check_store_matches(batch)
        # No worker died, so none may re-register without the attempt it holds: a READY must
        # re-announce an attempt still rendering or rendered but not yet ACKed.
        dropped = farm.q("SELECT id, job_id, worker_id FROM attempts WHERE reason LIKE "
                         "'worker restarted without it%'")
        check(not dropped, "attempts a reconnecting worker did not re-announce: %s" % dropped)
        resumed = farm.q("SELECT count(*) FROM events WHERE kind='resumed'")[0][0]
        log("attempts resumed by reconnecting workers: %d" % resumed)
        logs = "".join(open(farm.logs[w]).read() for w in ("w0", "w1"))
        check("reconnecting to" in logs, "no worker noticed the long outage and reconnected")


if __name__ == "__main__":
    main(test)
