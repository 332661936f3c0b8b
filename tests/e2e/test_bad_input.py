"""Bad input and cancellation through the whole farm: a prompt cache that is not a prompt cache,
or that is missing on the worker, fails the job at once with a reason naming the file and is not
retried; `vdn cancel` stops a running render at its next NFE and frees the worker; a store that
stays down fails each attempt as retryable until the job runs out of attempts."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import Farm, check, free_port, log, main


def job_of(farm, batch):
    return farm.q("SELECT id FROM jobs WHERE batch_id=?", batch)[0][0]


def test(args):
    with Farm(args.vdn, "badinput", steps=8, max_attempts=3, keep=args.keep) as farm:
        farm.start_coordinator()
        farm.start_worker("w", nfe_delay_ms=300)

        # 1. A file that exists (so submit takes it) but is no safetensors file.
        bad = os.path.join(farm.dir, "garbage.safetensors")
        with open(bad, "wb") as f:
            f.write(os.urandom(300))
        farm.prompt, good = bad, farm.prompt
        b1 = farm.submit(1)
        farm.wait_batch(b1, 1, timeout=30)
        st, attempts, err = farm.q("SELECT state, attempts, last_error FROM jobs WHERE "
                                   "batch_id=?", b1)[0]
        log("garbage prompt cache: %s after %d attempt(s): %s" % (st, attempts, err))
        check(st == "failed" and attempts == 1, "garbage prompt cache: %s after %d attempts, "
              "expected failed after 1 (not retryable)" % (st, attempts))
        check("prompt cache" in err and bad in err, "reason does not name the file: %r" % err)

        # 2. A prompt cache that is not on the worker (submitted without the local check).
        farm.prompt = os.path.join(farm.dir, "nowhere", "prompt.safetensors")
        path = farm.write_requests(1, fname="missing.jsonl")
        r = farm.run(["submit", path, "--coordinator", farm.client_ep, "--no-check-files"])
        b2 = b1 + 1
        farm.wait_batch(b2, 1, timeout=30)
        st, attempts, err = farm.q("SELECT state, attempts, last_error FROM jobs WHERE "
                                   "batch_id=?", b2)[0]
        log("missing prompt cache: %s after %d attempt(s): %s" % (st, attempts, err))
        check(st == "failed" and attempts == 1, "missing prompt cache: %s after %d attempts"
              % (st, attempts))
        check(farm.prompt in err, "reason does not name the file: %r" % err)

        # 3. Cancel a running render: it stops at the next NFE, long before its 20 x 0.3 s.
        farm.prompt = good
        farm.steps = 20
        b3 = farm.submit(1)
        job = job_of(farm, b3)
        t0 = time.time()
        while farm.q("SELECT nfe_done FROM jobs WHERE id=?", job)[0][0] < 1:
            check(time.time() - t0 < 30, "job %d never started" % job)
            time.sleep(0.05)
        t_cancel = time.time()
        farm.run(["cancel", "j%d" % job, "--coordinator", farm.client_ep])
        while farm.q("SELECT count(*) FROM attempts WHERE job_id=? AND state='running'",
                     job)[0][0]:
            check(time.time() - t_cancel < 10, "attempt of cancelled job %d still running" % job)
            time.sleep(0.05)
        nfe = farm.q("SELECT nfe_done, state FROM jobs WHERE id=?", job)[0]
        log("cancelled job %d at NFE %d/20 in %.2f s" % (job, nfe[0], time.time() - t_cancel))
        check(nfe[1] == "cancelled", "job %d is %r after cancel" % (job, nfe[1]))
        check(nfe[0] < 20, "the render ran to the end despite the cancel")
        # The worker stops rendering (the coordinator marks the job at once; the worker must
        # follow): the next job starts long before the cancelled render would have ended.
        farm.steps = 2
        b4 = farm.submit(1, seed0=7)
        farm.wait_batch(b4, 1, timeout=30)
        farm.check_exactly_once(b4, 1)
        started = farm.q("SELECT a.started_at FROM attempts a JOIN jobs j ON a.job_id=j.id "
                         "WHERE j.batch_id=?", b4)[0][0]
        log("next job started %.2f s after the cancel" % (started - t_cancel))
        check(started - t_cancel < 3.0, "the worker took %.1f s to take the next job; the "
              "cancelled render (6 s) was not stopped" % (started - t_cancel))
        wlog = open(farm.logs["w"]).read()
        check("cancelling" in wlog, "the worker never logged the cancel")
        check(farm.procs["w"].poll() is None, "the worker died along the way")

    # 4. The store is down for good: each attempt's upload fails after its retries, the FAIL is
    #    retryable, so the job is tried again, up to max attempts, and the reason names the
    #    endpoint (never the secret).
    port = free_port()
    secret = "not-a-real-secret-4d1e"
    with Farm(args.vdn, "storedown", store="s3://nobucket/p", steps=1, max_attempts=2,
              keep=args.keep) as farm:
        farm.env.update({"AWS_ACCESS_KEY_ID": "AKIDTEST", "AWS_SECRET_ACCESS_KEY": secret,
                         "AWS_REGION": "us-east-1",
                         "VDN_S3_ENDPOINT": "http://127.0.0.1:%d" % port})
        farm.start_coordinator()
        farm.start_worker("w", extra_args=["--store-retry-seconds", "1", "--upload-attempts", "1"])
        b = farm.submit(1)
        farm.wait_batch(b, 1, timeout=60)
        st, attempts, err = farm.q("SELECT state, attempts, last_error FROM jobs WHERE "
                                   "batch_id=?", b)[0]
        log("store down: %s after %d attempt(s): %s" % (st, attempts, err))
        check(st == "failed" and attempts == 2, "store down: %s after %d attempts, expected "
              "failed after 2 (retryable, max attempts 2)" % (st, attempts))
        check("127.0.0.1:%d" % port in err, "reason does not name the endpoint: %r" % err)
        for path in farm.logs.values():
            check(secret not in open(path).read(), "a log holds the S3 secret")
        check(secret not in err, "the reason holds the S3 secret")


if __name__ == "__main__":
    main(test)
