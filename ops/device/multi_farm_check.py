"""The checks of ops/device/multi_farm.sh over the file store and the run records.

    multi_farm_check.py batch STORE STATUS.json N COMM NJOBS LOGS ENCODER
        part 1: NJOBS jobs from text prompts (N one-GPU, one N-GPU, one 2-GPU when N >= 4)
    multi_farm_check.py h3 STORE OUT.json N COMM LAYERS LOGS PRESET
        part 2: the one H3-shaped N-GPU job; writes its seconds per evaluation to OUT.json

Prints one line per check; exit 1 when any failed (then the tails of the farm's logs)."""
import glob
import json
import os
import re
import sys

fails = 0


def check(ok, msg):
    global fails
    fails += not ok
    print(("  ok    " if ok else "  FAIL  ") + msg)


def records(store):
    """(path, record) of every run record in the store (a JSON object with "gpus")"""
    out = []
    for p in glob.glob(os.path.join(store, "**", "*.json"), recursive=True):
        try:
            r = json.load(open(p))
        except (OSError, ValueError):
            continue
        if isinstance(r, dict) and "gpus" in r:
            out.append((p, r))
    return out


def mp4s(store):
    return sorted(glob.glob(os.path.join(store, "**", "*.mp4"), recursive=True))


def nfe(r):
    return r.get("timing", {}).get("nfe_seconds", [])


def names_gpus(r, comm):
    """the record names its ranks and GPUs: held, rendered_on (one per rank), decoded_on"""
    g = r["gpus"]
    k = g.get("ranks", 0)
    ok = (k >= 1 and len(g.get("rendered_on", [])) == k and len(g.get("held", [])) >= k
          and g.get("decoded_on") and (k == 1 or g.get("communicator") == comm))
    return ok, ("ranks %d, communicator %s, held %s, rendered on %s, decoded on %s" %
                (k, g.get("communicator"), g.get("held"), g.get("rendered_on"),
                 g.get("decoded_on")))


def batch(store, status, n, comm, njobs, encoder):
    mp4 = mp4s(store)
    recs = records(store)
    try:
        st = json.load(open(status))
    except (OSError, ValueError) as e:
        st = {}
        print("  (status report unreadable: %s)" % e)
    check(len(mp4) == njobs, "%d mp4 files in the store for %d jobs" % (len(mp4), njobs))
    for p in mp4[:3]:
        print("        %s (%d bytes)" % (os.path.relpath(p, store), os.path.getsize(p)))
    check(len(recs) == njobs, "%d run records with a gpus field" % len(recs))
    ranks = sorted(r["gpus"].get("ranks", 0) for _, r in recs)
    want = sorted([1] * n + [n] + ([2] if n >= 4 else []))
    check(ranks == want, "ranks per job %s (want %s)" % (ranks, want))
    for _, r in sorted(recs, key=lambda x: -x[1]["gpus"].get("ranks", 0)):
        ok, what = names_gpus(r, comm)
        s = nfe(r)
        check(ok, "%s; %.3f s per NFE" % (what, sum(s) / max(1, len(s))))
        tp = r.get("text_prompt", {})
        on = tp.get("encoded_on", {})
        held = r["gpus"].get("held", [None])
        check(tp.get("cache") == "miss" and on.get("gpu") == held[0]
              and str(on.get("device", "")).startswith(encoder),
              "its own prompt (%s tokens) encoded once, on GPU %s (%s; the job's first GPU: %s)"
              % (tp.get("tokens"), on.get("gpu"), on.get("device"), held[0]))
    one = [tuple(r["gpus"].get("rendered_on", [])) for _, r in recs
           if r["gpus"].get("ranks", 1) == 1]
    check(len(set(one)) == n, "the %d one-GPU jobs rendered on %d different GPUs: %s" %
          (n, len(set(one)), sorted(set(one))))
    done = len(re.findall(r'"state":\s*"done"', json.dumps(st)))
    check(done >= njobs, "status: %d jobs done" % done)


def h3(store, out, n, comm, layers, preset):
    recs = records(store)
    mp4 = mp4s(store)
    check(len(recs) == 1 and len(mp4) == 1,
          "the H3-shaped job: %d run record(s), %d mp4 file(s) (want 1 and 1)"
          % (len(recs), len(mp4)))
    rep = {"preset": preset, "layers": layers, "gpus": n}
    if recs:
        r = recs[0][1]
        ok, what = names_gpus(r, comm)
        check(ok and r["gpus"].get("ranks") == n, "%d-GPU job: %s" % (n, what))
        s = nfe(r)
        srt = sorted(s)
        med = srt[len(srt) // 2] if srt else 0.0
        tm = r.get("timing", {})
        rep.update({"nfe_seconds": s, "median_s_per_nfe": med,
                    "after_first_s_per_nfe": sum(s[1:]) / len(s[1:]) if len(s) > 1 else None,
                    "setup_seconds": tm.get("setup_seconds"),
                    "output_seconds": tm.get("output_seconds"),
                    "total_seconds": tm.get("total_seconds"),
                    "precision": r.get("precision"), "ranks": r["gpus"].get("ranks"),
                    "communicator": r["gpus"].get("communicator"),
                    "rendered_on": r["gpus"].get("rendered_on"),
                    "decoded_on": r["gpus"].get("decoded_on"),
                    "mp4_bytes": os.path.getsize(mp4[0]) if mp4 else 0})
        rep["resolved"] = rv = r.get("resolved") or {}
        shape = (rv.get("latent_frames"), rv.get("latent_height"), rv.get("latent_width"),
                 rv.get("text_rows"))
        want = (102, 48, 84, 512) if preset == "h3" else shape[:3] + (512,)
        check(shape == want, "the workload: latent frames, height, width, text rows %s (want %s)"
              % (shape, want))
        after = rep["after_first_s_per_nfe"]
        check(len(s) >= 1, "H3-shaped (%s, %d blocks), %s, %d GPUs: s/NFE %s (after the first: "
              "%s; the render %.1f s in all)"
              % (preset, layers, r.get("precision"), n, ["%.3f" % x for x in s],
                 "%.3f" % after if after is not None else "-", tm.get("total_seconds") or 0))
    rep["checks_failed"] = fails
    with open(out, "w") as f:
        json.dump(rep, f, indent=1)


def main():
    what, store, path, n, comm = sys.argv[1:6]
    n = int(n)
    logs = sys.argv[7]
    if what == "batch":
        batch(store, path, n, comm, int(sys.argv[6]), sys.argv[8])
    else:
        h3(store, path, n, comm, int(sys.argv[6]), sys.argv[8])
    if fails:
        for lg in sorted(glob.glob(os.path.join(logs, "*.log"))):
            print("---- tail of " + os.path.basename(lg))
            print("".join(open(lg, errors="replace").readlines()[-15:]))
    print("farm %s: %s" % (what, "all checks passed" if not fails else "%d checks FAILED" % fails))
    sys.exit(1 if fails else 0)


main()
