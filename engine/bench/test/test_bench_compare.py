"""`vdn bench compare`: the target table is built from the two JSON files of one run.

Checks, against the recorded files themselves (measured data, read here independently with the
json module): every row's peer and vdn numbers, the met/MISSED verdict against the issue's targets,
and clear errors for malformed inputs."""
import json
import os
import re
import subprocess
import sys

vdn, results, work = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(work, exist_ok=True)
fails = 0


def check(cond, msg):
    global fails
    if not cond:
        fails += 1
        print("FAIL:", msg)


def run(*args):
    p = subprocess.run([vdn, "bench", "compare", *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


ours_path = os.path.join(results, "h200-2026-11-20-run27-vdn-bench.json")
peers_path = os.path.join(results, "h200-2026-11-20-run27-peers.json")
ours, peers = json.load(open(ours_path)), json.load(open(peers_path))
rc, out, err = run(ours_path, peers_path)
check(rc == 0, "compare failed: %s" % err)
lines = {l[:36].strip(): l for l in out.splitlines()}


def best(prefix):
    return min(v["ms"] for k, v in ours["ops"].items() if k.startswith(prefix))


rows = [
    ("block GEMMs", "block GEMMs", "block GEMMs (qkv,o,ffn13,ffn2) bf16", 120),
    ("dense attention, one layer", "attention dense", "dense SDPA CUDNN_ATTENTION", 555),
    ("window+anchor attention, one layer", "attention window+anchors",
     "flex window+anchors (density 19.5%)", 110),
    ("VDA stats", "stats A (fp32", "VDA stats A,B (fp32 einsum)", 3),
    ("VDA inverse", "solve (I+A)^-1", "VDA (I+A)^-1 Cholesky", 2),
    ("VDA scans", "scans forward + reverse", "VDA two scans (baddbmm loop)", 2),
]
met = 0
for what, prefix, peer, target in rows:
    line = lines.get(what)
    check(line is not None, "no row %r in:\n%s" % (what, out))
    if not line:
        continue
    nums = [float(x) for x in re.findall(r"(\d+\.\d+) ms", line)]
    want_ours, want_peer = best(prefix), peers["rows"][peer]["ms"]
    check(len(nums) == 3, "row %r: %s" % (what, line))
    if len(nums) == 3:
        check(abs(nums[0] - want_peer) < 0.006, "%s peer %s vs %s" % (what, nums[0], want_peer))
        check(abs(nums[1] - target) < 0.06, "%s target %s" % (what, nums[1]))
        check(abs(nums[2] - want_ours) < 0.006, "%s vdn %s vs %s" % (what, nums[2], want_ours))
    ok = want_ours <= target
    met += ok
    check(("met" if ok else "MISSED") in line, "%s verdict: %s" % (what, line))
for what, key, target in (("dense H3, s/NFE (sum of ops)", "dense_s_per_nfe", 32),
                          ("VDN-H3, s/NFE (sum of ops)", "vdn_s_per_nfe", 11.2)):
    line = lines.get(what, "")
    v = ours["summed"][key]
    nums = [float(x) for x in re.findall(r"(\d+\.\d+) s\b", line)]
    check(len(nums) == 3 and abs(nums[2] - v) < 0.006, "%s: %s vs %s" % (what, line, v))
    ok = v <= target
    met += ok
    check(("met" if ok else "MISSED") in line, "%s verdict: %s" % (what, line))
check("%d of 8 targets met" % met in out, "count line: %s" % out)

# malformed inputs: clear errors naming the file, nothing printed as a table
bad_json = os.path.join(work, "bad.json")
open(bad_json, "w").write("{not json")
wrong_kind = os.path.join(work, "wrong.json")
json.dump({"rows": {}}, open(wrong_kind, "w"))
other_frames = os.path.join(work, "frames.json")
p2 = dict(peers)
p2["frames"] = peers["frames"] + 1
json.dump(p2, open(other_frames, "w"))
for args, want in (((bad_json, peers_path), "bad.json: not valid JSON"),
                   ((ours_path, bad_json), "bad.json: not valid JSON"),
                   ((wrong_kind, peers_path), "wrong.json: expected a `vdn bench --json` file"),
                   ((ours_path, ours_path), "expected an h3_peers.py PEERS_JSON file"),
                   ((ours_path, other_frames), "not the same workload"),
                   ((os.path.join(work, "missing.json"), peers_path), "missing.json: cannot open")):
    rc, out, err = run(*args)
    check(rc == 1 and want in err and "targets met" not in out, "%s: rc %d, %r" % (args, rc, err))
rc, out, err = run(ours_path)
check(rc == 2 and "usage" in err, "one argument: rc %d" % rc)

print("%d failure(s)" % fails)
sys.exit(1 if fails else 0)
