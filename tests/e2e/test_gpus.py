"""GPU inventory in READY, without a GPU: a stand-in nvidia-smi (VDN_NVIDIA_SMI) lists GPUs; the
worker reports the ones --gpus selects, with their memory, and the coordinator records them. A
--gpus naming a GPU that is not there is a clear start-up error, and so are a bad --gpus spec,
a missing checkpoint, a typo in the cluster config and a malformed S3 env file (without echoing
it). `vdn up --workers N` spreads its workers over the GPUs."""
import json
import os
import stat
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import Farm, check, log, main


def test(args):
    with Farm(args.vdn, "gpus", keep=args.keep) as farm:
        smi = os.path.join(farm.dir, "nvidia-smi")
        with open(smi, "w") as f:
            f.write("#!/bin/sh\n# stand-in: the query the worker makes, four H200s\n"
                    "case \"$*\" in *--query-gpu=index,name,memory.total*) ;; *) exit 9;; esac\n"
                    "for i in 0 1 2 3; do echo \"$i, NVIDIA H200, 143771\"; done\n")
        os.chmod(smi, os.stat(smi).st_mode | stat.S_IXUSR)
        env = {"VDN_NVIDIA_SMI": smi}
        farm.start_coordinator()
        # no --cpu: the worker asks nvidia-smi
        args_ = ["worker", "--connect", farm.worker_ep, "--checkpoint", farm.ckpt, "--store",
                 farm.store, "--id", "g", "--gpus", "1,3", "--scratch",
                 os.path.join(farm.dir, "scratch"), "--heartbeat-seconds", "0.5",
                 "--data-root", farm.dir]
        farm.spawn("g", args_, env=dict(farm.env, **env))
        t0 = time.time()
        rows = []
        while not rows:
            check(time.time() - t0 < 20, "worker g never registered")
            rows = farm.q("SELECT gpus, backend FROM workers WHERE id='g'")
            time.sleep(0.1)
        gpus = json.loads(rows[0][0])
        log("READY reported %s, backend %s" % (gpus, rows[0][1]))
        check([g["index"] for g in gpus] == [1, 3], "GPUs %s, expected indices 1 and 3" % gpus)
        check(all(g["memory"] == 143771 * 1024 * 1024 for g in gpus), "memory %s" % gpus)
        check(all(g["name"] == "NVIDIA H200" for g in gpus), "names %s" % gpus)

        # READY names the checkpoint by its directory's name: a job asking for "ckpt" runs here;
        # one asking for another checkpoint is refused at submit (no registered worker has it),
        # and with --allow-wait waits for a worker that has it, saying so.
        req = os.path.join(farm.dir, "ck.jsonl")
        with open(req, "w") as f:
            for name, seed in (("ckpt", 1), ("some-other-model", 2)):
                f.write(json.dumps({"prompt_cache": farm.prompt, "frames": 56, "height": 32,
                                    "width": 32, "steps": 1, "seed": seed,
                                    "checkpoint": name}) + "\n")
        r = farm.run(["submit", req, "--coordinator", farm.client_ep], check_rc=False)
        check(r.returncode != 0 and "ck.jsonl:2: field 'checkpoint': no worker has checkpoint "
              "some-other-model" in r.stderr, "not refused: %d %s" % (r.returncode, r.stderr))
        farm.run(["submit", req, "--coordinator", farm.client_ep, "--allow-wait"])
        t0 = time.time()
        while farm.q("SELECT state FROM jobs WHERE json_extract(request, '$.seed') IN (1, '1')")[0][0] != "done":
            check(time.time() - t0 < 30, "the job naming checkpoint 'ckpt' did not run")
            time.sleep(0.1)
        time.sleep(2)
        other = farm.q("SELECT state FROM jobs WHERE json_extract(request, '$.seed') IN (2, '2')")
        check(other == [("queued",)], "the job naming another checkpoint is %s" % other)
        jid = farm.q("SELECT id FROM jobs WHERE json_extract(request, '$.seed') IN (2, '2')")[0][0]
        st = farm.run(["status", "j%d" % jid, "--coordinator", farm.client_ep]).stdout
        check("waiting    no worker has checkpoint some-other-model" in st, "vdn status: %s" % st)
        log("checkpoint matching: 'ckpt' ran, 'some-other-model' waits")

        # A GPU that is not on the machine: refuse to start, naming it.
        r = farm.run(["worker", "--connect", farm.worker_ep, "--checkpoint", farm.ckpt,
                      "--gpus", "2-5", "--id", "bad"], check_rc=False, timeout=30,
                     env=dict(farm.env, **env))
        log("--gpus 2-5: exit %d: %s" % (r.returncode, r.stderr.strip().splitlines()[-1:]))
        check(r.returncode != 0 and "GPU 4 is not on this machine" in r.stderr,
              "expected a clear error for GPU 4: %d %s" % (r.returncode, r.stderr))
        # vdn up spreads several workers over the GPUs it finds, one each, round-robin.
        up = os.path.join(farm.dir, "up")
        r = farm.run(["up", up, "--detach", "--workers", "3", "--checkpoint", farm.ckpt],
                     env=dict(farm.env, **env), timeout=60)
        try:
            t0 = time.time()
            rows = []
            while len(rows) < 3:
                check(time.time() - t0 < 30, "vdn up workers did not all register: %s" % rows)
                time.sleep(0.2)
                try:
                    rows = farm.q_db(os.path.join(up, "vdn.db"),
                                     "SELECT id, gpus FROM workers ORDER BY id")
                except Exception:
                    rows = []
            got = {wid: [g["index"] for g in json.loads(gj)] for wid, gj in rows}
            log("vdn up --workers 3 over 4 GPUs: %s" % got)
            check(got == {"up-1": [0], "up-2": [1], "up-3": [2]}, "GPU spread %s" % got)
        finally:
            farm.run(["up", up, "--stop"], check_rc=False, timeout=90)

        r = farm.run(["worker", "--connect", farm.worker_ep, "--checkpoint", farm.ckpt,
                      "--gpus", "0-x"], check_rc=False, timeout=30)
        check(r.returncode == 2 and "--gpus '0-x'" in r.stderr, "bad spec: %s" % r.stderr)
        # A cluster config with a typo, and an S3 env file with a line that is not AWS_X=...:
        # errors name the file and line, and never echo the line (it may be a secret).
        conf = os.path.join(farm.dir, "bad.conf")
        with open(conf, "w") as f:
            f.write("worker_endpoint = %s\ncheckpont = %s\n" % (farm.worker_ep, farm.ckpt))
        r = farm.run(["worker", "--config", conf], check_rc=False, timeout=30)
        check(r.returncode == 2 and "bad.conf:2: unknown key 'checkpont'" in r.stderr,
              "typo in config: %d %s" % (r.returncode, r.stderr))
        envf = os.path.join(farm.dir, "s3.env")
        with open(envf, "w") as f:
            f.write("AWS_ACCESS_KEY_ID=abc\nsecret-hunter2-value\n")
        with open(conf, "w") as f:
            f.write("worker_endpoint = %s\ncheckpoint = %s\ns3_env_file = %s\n"
                    % (farm.worker_ep, farm.ckpt, envf))
        r = farm.run(["worker", "--config", conf, "--cpu"], check_rc=False, timeout=30)
        check(r.returncode == 2 and "s3.env:2: expected AWS_NAME=VALUE" in r.stderr,
              "bad env file: %d %s" % (r.returncode, r.stderr))
        check("hunter2" not in r.stderr, "the error echoed a secret line")
        r = farm.run(["worker", "--connect", farm.worker_ep, "--checkpoint",
                      os.path.join(farm.dir, "no-such-ckpt"), "--cpu"], check_rc=False, timeout=30)
        check(r.returncode == 1 and "no-such-ckpt" in r.stderr,
              "missing checkpoint: %d %s" % (r.returncode, r.stderr))


if __name__ == "__main__":
    main(test)
