"""200 tiny jobs over 3 workers: each completes exactly once, and the batch as the database
records it is exactly what the object store holds."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import Farm, check, log, main

N = 200


def test(args):
    with Farm(args.vdn, "batch200", steps=1, keep=args.keep) as farm:
        farm.start_coordinator()
        for i in range(3):
            farm.start_worker("w%d" % i)
        batch = farm.submit(N)
        farm.wait_batch(batch, N, timeout=100)
        farm.check_exactly_once(batch, N)
        farm.check_store_matches(batch)
        per_worker = dict(farm.q("SELECT worker_id, count(*) FROM attempts WHERE state='done' "
                                 "GROUP BY worker_id"))
        log("done per worker: %s" % per_worker)
        check(sum(per_worker.values()) == N, "attempts done: %s" % per_worker)
        check(len(per_worker) == 3, "not all 3 workers rendered: %s" % per_worker)


if __name__ == "__main__":
    main(test)
