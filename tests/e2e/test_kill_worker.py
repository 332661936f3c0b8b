"""SIGKILL workers mid-render, again and again: each lost attempt is requeued and completes;
no job is lost or completed twice. Nothing is left behind (issue 27): a restarted worker removes
the scratch folders of the killed processes, so at the end the scratch root holds exactly one
folder per live worker, and the store no temp file. Every run record says what was cleaned
("cleaned", docs/formats.md): a job rendered by a restarted worker names the 1 stale scratch
folder (its killed predecessor's) that worker removed at its start, one rendered by a worker of
the first start 0; each names its own attempt's scratch folder and the snapshots' prefix."""
import json
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
        starts = {w: [] for w in workers}  # every start of each worker, in order
        for w in workers:
            started_at[w] = time.time()
            starts[w].append((started_at[w], False))
            farm.start_worker(w, nfe_delay_ms=150)
        batch = farm.submit(N)
        kills = []
        restart_at = {}

        def tick():
            now = time.time()
            for w, t in list(restart_at.items()):
                if now >= t:
                    started_at[w] = time.time()
                    starts[w].append((started_at[w], True))
                    farm.start_worker(w, nfe_delay_ms=150)
                    del restart_at[w]
            if len(kills) >= KILLS or restart_at:
                return
            # every restarted worker has swept the stale scratch (it does so before its READY)
            # before the next kill, so each restart removes exactly its predecessor's folder
            for w in workers:
                with open(farm.logs[w]) as f:
                    if f.read().count("READY sent") < len(starts[w]):
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
        # the run records: what was cleaned for each done attempt
        restarted_jobs = 0
        for job, keys in farm.job_keys(batch).items():
            rec_key = [k for k in keys if k.endswith(".json")][0]
            with open(os.path.join(farm.store_dir(), rec_key)) as f:
                cleaned = json.load(f).get("cleaned")
            att, w, t = farm.q("SELECT a.id, a.worker_id, a.started_at FROM attempts a JOIN jobs j "
                               "ON j.current_attempt=a.id WHERE j.id=?", job)[0]
            # the worker process that ran it: its last start before the attempt began
            restart = [r for (st, r) in starts[w] if st < t][-1]
            restarted_jobs += restart
            check(cleaned is not None, "job %d: the run record has no \"cleaned\"" % job)
            check(cleaned["stale_scratch_folders"] == (1 if restart else 0),
                  "job %d (attempt %d on %s, %s): the record says %s stale scratch folder(s) "
                  "removed at the worker's start" % (job, att, w, "restarted" if restart
                                                     else "first start",
                                                     cleaned["stale_scratch_folders"]))
            check(cleaned["attempt_scratch"] == "a%d" % att
                  and cleaned["attempt_scratch_leftover"] is False
                  and cleaned["snapshots"] == rec_key[:-len(".json")] + ".snapshots/"
                  and cleaned["store_temp_files"] >= 0, "job %d: cleaned %s" % (job, cleaned))
        log("%d of %d jobs rendered by a restarted worker, each naming the folder it removed"
            % (restarted_jobs, N))
        check(restarted_jobs >= 1, "no job was rendered by a restarted worker")
        tmp = os.path.join(farm.dir, "store", ".vdn-tmp")
        check(not os.path.isdir(tmp) or not os.listdir(tmp),
              "temp files left in the store: %s" % (os.listdir(tmp),))


if __name__ == "__main__":
    main(test)
