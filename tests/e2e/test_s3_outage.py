"""The S3 endpoint goes down for a while during a batch: workers keep rendering, their uploads
retry, and every job succeeds on its first attempt once the endpoint is back. The store is a real
S3 server (s3rver) on loopback; the objects are read back independently with awscli."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import Farm, SkipTest, check, free_port, log, main

N = 10
BUCKET = "vdn-e2e"


class S3rver:
    def __init__(self, exe, port, data):
        self.exe, self.port, self.data, self.p = exe, port, data, None

    def start(self):
        self.log = open(os.path.join(self.data, "..", "s3rver.log"), "ab")
        self.p = subprocess.Popen([self.exe, "-d", self.data, "-a", "127.0.0.1", "-p",
                                   str(self.port), "--configure-bucket", BUCKET],
                                  stdout=self.log, stderr=subprocess.STDOUT)
        t0 = time.time()
        while time.time() - t0 < 20:
            try:
                import socket
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                time.sleep(0.1)
        raise SkipTest("s3rver did not come up on port %d" % self.port)

    def stop(self):
        if self.p and self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.p = None


def aws(endpoint, env, *args):
    r = subprocess.run(["/usr/bin/aws", "--endpoint-url", endpoint, "s3api"] + list(args),
                       capture_output=True, env=env, timeout=60)
    check(r.returncode == 0, "aws s3api %s: %s" % (args[0], r.stderr.decode(errors="replace")))
    return r.stdout


def test(args):
    exe = os.path.join(os.path.abspath(args.source), "ops", "node", "node_modules", ".bin",
                       "s3rver")
    if not os.access(exe, os.X_OK):
        raise SkipTest("s3rver not installed (ops/install-deps.sh puts it in ops/node)")
    if not os.access("/usr/bin/aws", os.X_OK):
        raise SkipTest("awscli not installed")
    port = free_port()
    endpoint = "http://127.0.0.1:%d" % port
    s3env = {"AWS_ACCESS_KEY_ID": "S3RVER", "AWS_SECRET_ACCESS_KEY": "S3RVER",
             "AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
             "VDN_S3_ENDPOINT": endpoint}
    with Farm(args.vdn, "s3outage", store="s3://%s/e2e" % BUCKET, steps=3,
              keep=args.keep) as farm:
        farm.env.update(s3env)
        data = os.path.join(farm.dir, "s3data")
        os.makedirs(data)
        s3 = S3rver(exe, port, data)
        s3.start()
        try:
            farm.start_coordinator()
            for w in ("w0", "w1"):
                farm.start_worker(w, nfe_delay_ms=120)
            # Half the jobs name their prompt cache by s3:// URI: the worker downloads it.
            env = dict(os.environ, **s3env)
            r = subprocess.run(["/usr/bin/aws", "--endpoint-url", endpoint, "s3", "cp",
                                "--only-show-errors", farm.prompt,
                                "s3://%s/prompts/p.safetensors" % BUCKET],
                               capture_output=True, env=env, timeout=60)
            check(r.returncode == 0, "aws s3 cp prompt: %s" % r.stderr.decode(errors="replace"))
            path = farm.write_requests(N)
            lines = open(path).read().splitlines()
            with open(path, "w") as f:
                for i, line in enumerate(lines):
                    if i % 2:
                        line = line.replace(farm.prompt, "s3://%s/prompts/p.safetensors" % BUCKET)
                    f.write(line + "\n")
            r = farm.run(["submit", path, "--coordinator", farm.client_ep, "--json"])
            import re
            batch = int(re.search(r'"batch_id"\s*:\s*(\d+)', r.stdout).group(1))
            n_s3 = farm.q("SELECT count(*) FROM jobs WHERE request LIKE '%s3://%'")[0][0]
            check(n_s3 == N // 2, "%d jobs name an s3:// prompt cache, expected %d" % (n_s3, N // 2))
            t0 = time.time()
            while farm.counts(batch).get("done", 0) < 2:
                check(time.time() - t0 < 60, "no job finished with S3 up")
                time.sleep(0.1)
            t_stop = time.time()
            s3.stop()
            log("S3 endpoint stopped")
            time.sleep(5)
            s3.start()
            t_back = time.time()
            log("S3 endpoint back after %.1f s" % (t_back - t_stop))
            farm.wait_batch(batch, N, timeout=90)
            farm.check_exactly_once(batch, N)
            bad = farm.q("SELECT id, state, reason FROM attempts WHERE state != 'done'")
            check(not bad, "attempts that did not succeed: %s" % bad)
            # Jobs that were uploading while the endpoint was down finished on the same attempt.
            spanning = farm.q("SELECT count(*) FROM attempts WHERE state='done' AND "
                              "started_at < ? AND finished_at > ?", t_stop + 1, t_back)[0][0]
            log("attempts that lived through the outage: %d" % spanning)
            check(spanning >= 1, "no attempt lived through the outage; the test proved nothing")
            listing = json.loads(aws(endpoint, env, "list-objects-v2", "--bucket", BUCKET,
                                     "--prefix", "e2e/") or b"{}")
            got = os.path.join(farm.dir, "got")
            r = subprocess.run(["/usr/bin/aws", "--endpoint-url", endpoint, "s3", "cp",
                                "--recursive", "--only-show-errors", "s3://%s/e2e/" % BUCKET, got],
                               capture_output=True, env=env, timeout=120)
            check(r.returncode == 0, "aws s3 cp: %s" % r.stderr.decode(errors="replace"))
            objs = {}
            for o in listing.get("Contents", []):
                key = o["Key"][len("e2e/"):]
                data = open(os.path.join(got, key), "rb").read()
                check(len(data) == o["Size"], "%s: listed %d bytes, got %d" % (key, o["Size"],
                                                                             len(data)))
                objs[key] = data
            farm.check_store_matches(batch, listing=objs)
        finally:
            s3.stop()


if __name__ == "__main__":
    main(test)
