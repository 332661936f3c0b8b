"""ops/cluster.sh --dry-run on the shipped example: the coordinator on worker_endpoint's host,
one vdn-worker@SPEC per worker line, workers stopped before the coordinator and started after;
malformed config lines are refused with FILE:LINE."""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from harness import check, log, main


def test(args):
    src = os.path.abspath(args.source)
    sh = os.path.join(src, "ops", "cluster.sh")
    example = os.path.join(src, "ops", "cluster.example.conf")

    def run(*a):
        return subprocess.run(["bash", sh] + list(a), capture_output=True, text=True, timeout=30)

    r = run("stop", example, "--dry-run")
    check(r.returncode == 0, "stop: %s" % r.stderr)
    want = ["ssh gpu-node-01 sudo systemctl stop vdn-worker@0-7",
            "ssh gpu-node-02 sudo systemctl stop vdn-worker@0-7",
            "ssh gpu-node-03 sudo systemctl stop vdn-worker@0-3",
            "ssh render-coord.internal sudo systemctl stop vdn-coordinator"]
    check(r.stdout.splitlines() == want, "stop plan:\n%s" % r.stdout)
    r = run("start", example, "--dry-run")
    lines = r.stdout.splitlines()
    check(r.returncode == 0 and lines[0].endswith("start vdn-coordinator") and len(lines) == 4,
          "start plan:\n%s" % r.stdout)
    d = tempfile.mkdtemp(prefix="vdn-cluster-sh-")
    bad = {
        "noeq.conf": ("worker_endpoint = tcp://h:5555\nworker gpu01\n", "noeq.conf:2: expected"),
        "ep.conf": ("worker_endpoint = h:5555\n", "expected tcp://HOST:PORT"),
        "gpus.conf": ("worker_endpoint = tcp://h:1\nworker = g1 gpus=all;rm\n", "not a GPU list"),
        "opt.conf": ("worker_endpoint = tcp://h:1\nworker = g1 cpus=3\n", "unknown setting"),
        "nocoord.conf": ("worker = g1\n", "no worker_endpoint"),
    }
    for name, (text, msg) in bad.items():
        p = os.path.join(d, name)
        with open(p, "w") as f:
            f.write(text)
        r = run("start", p, "--dry-run")
        check(r.returncode == 2 and msg in r.stderr and not r.stdout,
              "%s: exit %d, stderr %r, stdout %r" % (name, r.returncode, r.stderr, r.stdout))
    r = run("explode", example)
    check(r.returncode == 2 and "usage" in r.stderr, "bad action accepted")
    log("cluster.sh plans and refusals as expected")


if __name__ == "__main__":
    main(test)
