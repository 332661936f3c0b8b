"""SIGKILL workers mid-render, again and again: each lost attempt is requeued and completes;
no job is lost or completed twice. Nothing is left behind (issue 27): a restarted worker removes
the scratch folders of the killed processes, so at the end the scratch root holds exactly one
folder per live worker, and the store no temp file."""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import Farm, check, log, main

N = 24
KILLS = 4


def test(args):
    with Farm(args.vdn, "killworker", steps=4, lease=3, keep=args.keep) as farm:
        farm.start_coordinator()
        workers = ["w0", "w1", "w2"]
        started_at = {}
        for w in workers:
            started_at[w] = time.time()
            farm.start_worker(w, nfe_delay_ms=150)
        batch = farm.submit(N)
        kills = []
        restart_at = {}

        def tick():
            now = time.time()
            for w, t in list(restart_at.items()):
                if now >= t:
                    started_at[w] = time.time()
                    farm.start_worker(w, nfe_delay_ms=150)
                    del restart_at[w]
            if len(kills) >= KILLS or restart_at:
                return
            # a worker with a running attempt that has reported at least one NFE: mid-render.
            # Only attempts begun after that worker's (re)start: the attempt of a worker killed
            # earlier stays 'running' until the coordinator notices.
            rows = farm.q("SELECT a.id, a.worker_id, a.started_at FROM attempts a JOIN jobs j "
                          "ON j.current_attempt=a.id WHERE a.state='running' AND j.nfe_done>=1")
            for att, w, started in rows:
                if (w in farm.procs and w not in restart_at and started > started_at[w]
                        and att not in [k[1] for k in kills]):
                    farm.kill(w, signal.SIGKILL)
                    kills.append((w, att))
                    restart_at[w] = time.time() + 1.0
                    return

        farm.wait_batch(batch, N, timeout=100, on_tick=tick)
        log("killed mid-render (worker, attempt): %s" % kills)
        check(len(set(k[1] for k in kills)) == len(kills), "an attempt was counted twice")
        check(len(kills) == KILLS, "only %d kills landed mid-render" % len(kills))
        for w, att in kills:
            st = farm.q("SELECT state FROM attempts WHERE id=?", att)[0][0]
            check(st == "expired", "attempt %d of killed %s ended as %r, expected expired"
                  % (att, w, st))
        farm.check_exactly_once(batch, N)
        farm.check_store_matches(batch)
        scratch = os.path.join(farm.dir, "scratch")
        left = sorted(os.listdir(scratch))
        log("scratch after %d kills: %s" % (len(kills), left))
        check(len(left) == len(workers) and all(
            any(d.startswith("vdn-worker-%s-" % w) for d in left) for w in workers),
            "stale scratch left behind: %s" % left)
        tmp = os.path.join(farm.dir, "store", ".vdn-tmp")
        check(not os.path.isdir(tmp) or not os.listdir(tmp),
              "temp files left in the store: %s" % (os.listdir(tmp),))


if __name__ == "__main__":
    main(test)
