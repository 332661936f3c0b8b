"""CURVE end to end, and the cluster config file: a coordinator with --keys and a keys file made by
`vdn keygen --keys-file`, a worker that takes its endpoint, checkpoint, store and keys from
`--config cluster.conf`, a client with its own key. The authorized worker renders the batch into
the client's folder (users/alice/); a worker with an unlisted key never gets in; a listed worker
key used with another worker id is refused; no log holds a secret key."""
import os
import re
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import Farm, check, log, main


def test(args):
    with Farm(args.vdn, "curve", keep=args.keep) as farm:
        k = os.path.join(farm.dir, "keys")       # the coordinator's --keys
        wk = os.path.join(farm.dir, "wkeys")     # a worker host's keys dir
        xk = os.path.join(farm.dir, "xkeys")     # an intruder's
        ck = os.path.join(farm.dir, "ckeys")     # a user's
        for d in (k, wk, xk, ck):
            os.makedirs(d, exist_ok=True)
        ak = os.path.join(k, "authorized_keys")
        farm.run(["keygen", "--out", os.path.join(k, "coordinator")])
        farm.run(["keygen", "--out", os.path.join(wk, "worker"), "--keys-file", ak, "--role",
                  "worker", "--name", "cw"])
        farm.run(["keygen", "--out", os.path.join(xk, "worker")])
        farm.run(["keygen", "--out", os.path.join(ck, "alice"), "--keys-file", ak, "--role",
                  "submit"])
        for d in (wk, xk):
            shutil.copy(os.path.join(k, "coordinator.pub"), d)

        farm.spawn("coordinator", [
            "coordinator", "--db", farm.db, "--bind", farm.worker_ep, "--client-bind",
            farm.client_ep, "--store", farm.store, "--keys", k, "--heartbeat-seconds", "0.5",
            "--lease-seconds", "3"])
        conf = os.path.join(farm.dir, "cluster.conf")
        with open(conf, "w") as f:
            f.write("# test cluster\nworker_endpoint = %s\nclient_endpoint = %s\n"
                    "checkpoint = %s\nstore = %s\nkeys = %s\nscratch = %s\ndata_root = %s\n" % (
                        farm.worker_ep, farm.client_ep, farm.ckpt, farm.store, wk,
                        os.path.join(farm.dir, "scratch"), farm.dir))
        common = ["--cpu", "--heartbeat-seconds", "0.5", "--threads", "1"]
        farm.spawn("cw", ["worker", "--config", conf, "--id", "cw"] + common)
        farm.spawn("intruder", ["worker", "--connect", farm.worker_ep, "--checkpoint", farm.ckpt,
                                "--store", farm.store, "--keys", xk, "--id", "intruder"] + common)
        # cw's own key under another worker id: the key pins the id, so READY is refused
        farm.spawn("impostor", ["worker", "--connect", farm.worker_ep, "--checkpoint", farm.ckpt,
                                "--store", farm.store, "--keys", wk, "--id", "impostor"] + common)

        path = farm.write_requests(3)
        r = farm.run(["submit", path, "--coordinator", farm.client_ep, "--key",
                      os.path.join(ck, "alice.key"), "--coordinator-key",
                      os.path.join(k, "coordinator.pub"), "--json"])
        batch = int(re.search(r'"batch_id"\s*:\s*(\d+)', r.stdout).group(1))
        farm.wait_batch(batch, 3, timeout=60)
        farm.check_exactly_once(batch, 3)
        farm.check_store_matches(batch)
        prefixes = farm.q("SELECT output_prefix FROM jobs WHERE batch_id=%d" % batch)
        check(all(p.startswith("users/alice/") for (p,) in prefixes),
              "outputs outside alice's folder: %s" % prefixes)
        check(not farm.q("SELECT id FROM workers WHERE id='impostor'"),
              "a worker key registered under another worker id")
        text = open(farm.logs["coordinator"], errors="replace").read()
        check("READY: worker id 'impostor' refused: this connection's key belongs to worker 'cw'"
              in text, "the coordinator did not say why it refused the impostor")
        # the impostor stops, saying why, instead of knocking at every heartbeat
        t0 = time.time()
        while farm.procs["impostor"].poll() is None and time.time() - t0 < 20:
            time.sleep(0.2)
        check(farm.procs["impostor"].poll() not in (None, 0), "the refused worker kept running")
        itext = open(farm.logs["impostor"], errors="replace").read()
        check("the coordinator refuses this worker" in itext and "start it with --id cw" in itext,
              "the refused worker did not say why it stopped")
        who = farm.q("SELECT DISTINCT worker_id FROM attempts")
        check(who == [("cw",)], "attempts went to %s, expected only the authorized worker" % who)
        check(not farm.q("SELECT id FROM workers WHERE id='intruder'"),
              "the worker with an unlisted key registered")
        check(farm.procs["intruder"].poll() is None, "the refused worker should keep retrying")
        # Without a client key the client endpoint refuses to talk (CURVE handshake fails).
        r = farm.run(["status", "--coordinator", farm.client_ep, "--coordinator-key",
                      os.path.join(k, "coordinator.pub")], check_rc=False, timeout=60)
        log("status without a client key: exit %d" % r.returncode)
        check(r.returncode != 0, "a client without a key was served")
        time.sleep(0.5)
        secrets = []
        for d in (k, wk, xk, ck):
            for fn in os.listdir(d):
                if fn.endswith(".key"):
                    secrets.append(open(os.path.join(d, fn)).read().strip())
        for name, p in farm.logs.items():
            text = open(p, errors="replace").read()
            for sec in secrets:
                check(sec not in text, "log of %s contains a secret key" % name)
        log("CURVE: authorized worker rendered, intruder kept out, no secrets in logs")


if __name__ == "__main__":
    main(test)
