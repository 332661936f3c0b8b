"""Sizes by cost through the whole farm (issue 27 item 3): a coordinator with --max-job-seconds
and a registered CPU worker refuses, at `vdn submit`, a request estimated to take longer than the
cap on the fastest kind it has ("cpu bf16"), naming the line, the field, the estimate and the cap,
and submits nothing; `vdn submit --dry-run` prints the estimate on that kind; a request under the
cap is accepted and renders. The CPU figures are the rate table's defaults (docs/cluster.md):
845 s a model evaluation at the H3 workload's 103,903 sequence rows, 10,560 s for its decode."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import FRAMES, Farm, check, log, main


def test(args):
    with Farm(args.vdn, "cost", steps=2, keep=args.keep) as farm:
        farm.start_coordinator(["--max-job-seconds", "600"])
        farm.start_worker("w")
        t0 = time.time()
        while not farm.q("SELECT 1 FROM workers WHERE id='w'"):
            check(time.time() - t0 < 60, "the worker never registered")
            time.sleep(0.1)
        good = {"prompt_cache": farm.prompt, "frames": FRAMES, "height": 32, "width": 32,
                "steps": 2, "seed": 1}
        big = dict(good, frames=1000, height=512, width=512, steps=4)
        path = os.path.join(farm.dir, "over.jsonl")
        with open(path, "w") as f:
            f.write(json.dumps(good) + "\n" + json.dumps(big) + "\n")
        r = farm.run(["submit", path, "--coordinator", farm.client_ep], check_rc=False)
        log("over the cap: rc %d\n%s" % (r.returncode, r.stderr))
        check(r.returncode == 5, "vdn submit exited %d, expected 5" % r.returncode)
        check("over.jsonl:2: field 'frames': 1000 x 512 x 512 x 4 steps is an estimated" in r.stderr
              and "on cpu bf16 (the fastest registered worker kind" in r.stderr
              and "over this coordinator's --max-job-seconds 600" in r.stderr
              and "over.jsonl:1:" not in r.stderr, "refusal: %r" % r.stderr)
        check(not farm.q("SELECT 1 FROM jobs"), "a job was submitted")
        r = farm.run(["submit", path, "--coordinator", farm.client_ep, "--dry-run"])
        log("dry run:\n%s" % r.stdout)
        check("estimates on the 1 worker(s) registered with the coordinator" in r.stdout
              and r.stdout.count("  cpu bf16, 1 worker(s): estimated ") == 2, r.stdout)
        b = farm.submit(1)
        farm.wait_batch(b, 1, timeout=60)
        st = farm.q("SELECT state FROM jobs WHERE batch_id=?", b)[0][0]
        check(st == "done", "the job under the cap is %s" % st)


if __name__ == "__main__":
    main(test)
