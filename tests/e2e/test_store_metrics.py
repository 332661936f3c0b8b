"""vdn_store_errors_total and vdn_store_retries_total count what the worker typed, not words.

A farm on loopback whose store is a real S3 server (s3rver) behind the store tests' S3 proxy
(store/test/test_s3.py: it checks every SigV4 signature and injects faults). Four jobs on one
worker (--upload-attempts 1, so one refused upload ends its attempt):
  * the first upload of an output is refused (403 AccessDenied): one attempt fails, op upload;
  * the job whose prompt cache is an s3:// object gets its GET refused once: op download;
  * one run-record upload gets a 503 SlowDown, which the S3 client's own retry cures: no failed
    attempt, one store retry on w0;
  * a job whose prompt cache is not a safetensors file fails on the job's fault, its file named
    so that its reason reads "store", "upload" and "download": not a store error.
/metrics, read with prometheus_client's parser, must equal those counts exactly, and the
attempts table must say which attempt failed on what."""
import contextlib
import json
import os
import re
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from harness import Farm, SkipTest, check, free_port, log, main


def load_s3_tools(source):
    sys.path.insert(0, os.path.join(os.path.abspath(source), "store", "test"))
    import test_s3
    try:
        botocore = test_s3.load_botocore()
    except ImportError as e:
        raise SkipTest("botocore from awscli (the S3 proxy checks signatures with it): %s" % e)
    return test_s3, botocore


@contextlib.contextmanager
def s3_store(farm, test_s3, botocore, exe):
    """s3rver (its files under farm.dir) behind the store tests' signature-checking proxy, the
    farm's processes pointed at the proxy with s3rver's credentials; yields (server, proxy) and
    stops both at the end. s3rver that does not start skips the test."""
    data = os.path.join(farm.dir, "s3data")
    os.makedirs(data)
    server = test_s3.S3rver(exe, data)
    proxy = None
    try:
        try:
            server.start()
        except RuntimeError as e:
            raise SkipTest("s3rver did not start: %s" % str(e)[:300])
        proxy = test_s3.Proxy(server.port, botocore, data)
        farm.env.update({"AWS_ACCESS_KEY_ID": "S3RVER", "AWS_SECRET_ACCESS_KEY": test_s3.SECRET,
                         "AWS_REGION": "us-east-1",
                         "VDN_S3_ENDPOINT": "http://127.0.0.1:%d" % proxy.port})
        farm.env.pop("AWS_SESSION_TOKEN", None)
        yield server, proxy
    finally:
        if proxy:
            proxy.stop()
        server.stop()


def metrics(base):
    from prometheus_client.parser import text_string_to_metric_families
    with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
        body = r.read().decode()
    fams = {f.name: f for f in text_string_to_metric_families(body)}
    return fams, body


def values(fams, family, sample, label):
    f = fams.get(family)
    check(f is not None and f.type == "counter", "%s missing or not a counter" % family)
    return {s.labels.get(label): s.value for s in f.samples if s.name == sample}


def test(args):
    exe = os.path.join(os.path.abspath(args.source), "ops", "node", "node_modules", ".bin",
                       "s3rver")
    if not os.access(exe, os.X_OK):
        raise SkipTest("s3rver not installed (ops/install-deps.sh puts it in ops/node)")
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        raise SkipTest("python3-prometheus-client not installed")
    test_s3, botocore = load_s3_tools(args.source)
    bucket = test_s3.BUCKET
    with Farm(args.vdn, "storemetrics", store="s3://%s/e2e" % bucket, steps=2,
              keep=args.keep) as farm:
        with s3_store(farm, test_s3, botocore, exe) as (server, proxy):
            prompt_uri = "s3://%s/e2e/prompts/p.safetensors" % bucket
            farm.run(["store", "put", "s3://%s/e2e" % bucket, "prompts/p.safetensors",
                      farm.prompt])
            bad = os.path.join(farm.dir, "store-upload-download-failed.safetensors")
            with open(bad, "wb") as f:
                f.write(b"not a safetensors file, whatever its name says")
            proxy.reset()  # the faults below are the test's only ones
            proxy.faults.append([lambda m, p: m == "PUT" and p.endswith("/out.safetensors"),
                                 403, "AccessDenied", 1])
            proxy.faults.append([lambda m, p: m == "GET" and "prompts/p.safetensors" in p,
                                 403, "AccessDenied", 1])
            proxy.faults.append([lambda m, p: m == "PUT" and p.endswith("/out.json"),
                                 503, "SlowDown", 1])

            port = free_port()
            base = "http://127.0.0.1:%d" % port
            farm.start_coordinator(["--http", "127.0.0.1:%d" % port])
            farm.start_worker("w0", extra_args=["--upload-attempts", "1"])
            path = os.path.join(farm.dir, "requests.jsonl")
            with open(path, "w") as f:
                for i, pc in enumerate([farm.prompt, prompt_uri, farm.prompt, bad]):
                    f.write(json.dumps({"prompt_cache": pc, "frames": 56, "height": 32,
                                        "width": 32, "steps": 2, "seed": i + 1}) + "\n")
            r = farm.run(["submit", path, "--coordinator", farm.client_ep, "--json"])
            batch = int(re.search(r'"batch_id"\s*:\s*(\d+)', r.stdout).group(1))
            t0 = time.time()
            while True:
                c = farm.counts(batch)
                if c.get("done", 0) + c.get("failed", 0) == 4:
                    break
                check(time.time() - t0 < 120, "batch not finished after 120 s: %s" % c)
                time.sleep(0.2)
            check(c == {"done": 3, "failed": 1}, "jobs by state %s, expected 3 done, 1 failed" % c)
            left = [f for f in proxy.faults if f[3] > 0]
            check(not left, "faults never hit: %s" % [(f[1], f[2]) for f in left])
            check(not proxy.bad_signatures, "bad signatures: %s" % proxy.bad_signatures[:3])

            # the attempts table says which attempt failed on what
            rows = farm.q("SELECT a.id, a.fault, a.store_op, a.reason FROM attempts a "
                          "WHERE a.state != 'done' ORDER BY a.id")
            log("failed attempts: %s" % [(a, f, o, r[:90]) for a, f, o, r in rows])
            ops = sorted(o for _, _, o, _ in rows if o)
            check(ops == ["download", "upload"], "attempts.store_op %s" % ops)
            for _, fault, op, reason in rows:
                if op == "upload":
                    check(fault == "transient" and "AccessDenied" in reason, reason)
                if op == "download":
                    check(fault == "transient" and "prompt cache" in reason, reason)
                if op is None:
                    check(fault == "job" and "bad prompt cache" in reason
                          and "store-upload-download" in reason,
                          "the non-store failure: %s %s" % (fault, reason))
            check(len(rows) == 3, "%d failed attempts, expected 3" % len(rows))

            # /metrics equals the failures; the 503's retry shows once the next heartbeat lands
            t0 = time.time()
            while True:
                fams, body = metrics(base)
                errs = values(fams, "vdn_store_errors", "vdn_store_errors_total", "op")
                retries = values(fams, "vdn_store_retries", "vdn_store_retries_total", "worker")
                fails = values(fams, "vdn_attempt_failures", "vdn_attempt_failures_total", "fault")
                if retries.get("w0") == 1 or time.time() - t0 > 10:
                    break
                time.sleep(0.3)
            log("vdn_store_errors_total %s, vdn_store_retries_total %s, failures %s"
                % (errs, retries, fails))
            check(errs == {"download": 1, "upload": 1, "open": 0},
                  "vdn_store_errors_total %s, expected download 1, upload 1, open 0" % errs)
            check(retries == {"w0": 1}, "vdn_store_retries_total %s, expected w0 1" % retries)
            check(fails == {"job": 1, "worker": 0, "transient": 2, "crash": 0},
                  "vdn_attempt_failures_total %s" % fails)
            # the 503 was answered once and retried: the proxy saw the same PUT twice
            json_puts = [s for m, p, s in proxy.log if m == "PUT" and p.endswith("/out.json")]
            check(json_puts == [503, 0, 0, 0],
                  "out.json PUTs %s: expected 503, its retry, then the other two jobs'" % json_puts)


if __name__ == "__main__":
    main(test)
