"""Summaries of ops/device/multi.sh's `vdn bench --whole` reports (issue 14), against the bars.

    multi_summary.py equal EQUAL.json          # whole renders on K GPUs vs 1 GPU (bar 1e-2)
    multi_summary.py scale SCALE.json          # s/NFE, speed-up, efficiency, where the time goes
    multi_summary.py thru THRU.json [SCALE.json]   # N one-GPU renders at once vs one N-GPU render

Reads only what the bench wrote; a missing or partial file says so instead of failing."""
import json
import sys

EQUAL_BAR = 1e-2
OFFICIAL_8X_H200_FP8 = 2.29  # VDN-H3 FP8 Distributed, 8 x H200, s/NFE (spec section 7)
PAPER_8X = 1.56
TARGET_8X = 1.3  # issue 14: VDN on 8 H200s


def load(path):
    try:
        return json.load(open(path))
    except (OSError, ValueError) as e:
        print(f"  ({path}: {e})")
        return None


def mean(xs):
    return sum(xs) / len(xs) if xs else 0.0


def equal(r):
    worst = 0.0
    bad = 0
    for g in r.get("groups", []):
        tag = f"{g['variant']:6s} on {g['gpus']} GPUs"
        if "error" in g:
            print(f"  {tag}: FAILED: {g['error']}")
            bad += 1
        elif g["gpus"] > 1:
            ev, ea = g.get("rel_err_video_vs_1", -1), g.get("rel_err_audio_vs_1", -1)
            ok = 0 <= ev <= EQUAL_BAR and 0 <= ea <= EQUAL_BAR
            worst = max(worst, ev, ea)
            bad += not ok
            print(f"  {tag}: whole render vs 1 GPU: video {ev:.2e}, audio {ea:.2e} "
                  f"{'ok' if ok else 'OVER the 1e-2 bar'}")
    print(f"  equality (whole renders): {'all within' if not bad else f'{bad} NOT within'} "
          f"1e-2 (worst {worst:.2e})")


def scale(r):
    prec = r.get("precision", "?")
    print(f"  {r.get('preset')} {r.get('layers')} blocks, {r.get('latent_frames')} latent frames "
          f"{r.get('height')}x{r.get('width')}, {prec}, weights made in "
          f"{r.get('load_seconds', 0):.0f} s")
    print("  variant GPUs   s/NFE  speed-up  eff.  peak GiB  clips/h(50)  vs 1 GPU"
          "      compute  collective  wait (mean of ranks, profiled evaluation)")
    top = {}
    rows = sorted(r.get("groups", []), key=lambda g: (g["variant"] != "vdn", g["variant"], g["gpus"]))
    one = {g["variant"]: g["median_s_per_nfe"] for g in rows if g["gpus"] == 1 and "error" not in g}
    for g in rows:
        v, k = g["variant"], g["gpus"]
        if "speedup" not in g and v in one and k > 1 and "error" not in g:  # a run cut short
            g["speedup"] = one[v] / g["median_s_per_nfe"]
            g["efficiency"] = g["speedup"] / k
        if "error" in g:
            print(f"  {v:7s} {k:4d}  FAILED: {g['error'][:100]}")
            continue
        top[v] = (k, g["median_s_per_nfe"])
        sp = g.get("speedup")
        rel = g.get("rel_err_video_vs_1")
        prof = [x["profile"] for x in g["ranks"] if "profile" in x]
        parts = ""
        if prof and k > 1:
            c = mean([p["compute_s"] for p in prof])
            a = mean([p["collective_s"] for p in prof])
            w = mean([p["wait_s"] for p in prof])
            n = mean([p["nfe_s"] for p in prof])
            parts = (f"  {c:6.3f} s  {a:6.3f} s  {w:6.3f} s  (of {n:.3f} s: "
                     f"{100 * a / n:.0f}% collectives, {100 * w / n:.0f}% waiting)")
        sp_s = "%5.2fx" % sp if sp else "-"
        eff_s = "%4.0f%%" % (100 * g["efficiency"]) if sp else "-"
        rel_s = "%.1e" % rel if rel is not None else "-"
        print(f"  {v:7s} {k:4d} {g['median_s_per_nfe']:7.3f}  {sp_s:>7s} {eff_s:>5s}"
              f"  {g['peak_gib_max']:8.2f}  {g['clips_per_hour']:11.1f}  {rel_s:>8s}{parts}")
    if "vdn" in top:
        k, s = top["vdn"]
        verdict = ("meets" if s <= TARGET_8X else "misses") + f" the <= {TARGET_8X} s target"
        print(f"  VDN on {k} GPUs, {prec}: {s:.3f} s/NFE; official {OFFICIAL_8X_H200_FP8} s "
              f"(8 x H200, fp8), paper {PAPER_8X} s; {verdict}"
              + ("" if k == 8 else f" (that target is for 8 GPUs; this machine has {k})"))


def thru(r, sc):
    for x in r.get("independent_runs", []):
        if "median_s_per_nfe" not in x:
            print(f"  {x['variant']}: {x.get('failed', '?')} of {x['renders']} renders FAILED")
            continue
        line = (f"  {x['renders']} one-GPU {x['variant']} renders at once ({r.get('precision')}): "
                f"{x['median_s_per_nfe']:.3f} s/NFE each, {x['clips_per_hour']:.2f} clips/h "
                f"of {r.get('clip_steps')} steps")
        rows = [g for g in (sc or {}).get("groups", [])
                if g["variant"] == x["variant"] and g["gpus"] == x["renders"] and "error" not in g]
        if rows:
            one = rows[0]["clips_per_hour"]
            line += (f"; one {x['renders']}-GPU render at a time: {one:.2f} clips/h "
                     f"(independent / sharded = {x['clips_per_hour'] / one:.2f})")
        print(line)


def main():
    what, path = sys.argv[1], sys.argv[2]
    r = load(path)
    if r is None:
        return
    if what == "equal":
        equal(r)
    elif what == "scale":
        scale(r)
    elif what == "thru":
        thru(r, load(sys.argv[3]) if len(sys.argv) > 3 else None)
    else:
        print(f"multi_summary.py: unknown summary '{what}'")


main()
