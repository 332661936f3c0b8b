"""Check eval's paired statistics against scipy (Debian python3-scipy) on fixed and random
vectors: betainc, t CDF, ttest_rel, wilcoxon (exact and normal approximation, zeros, ties),
and the bootstrap CI against scipy.stats.bootstrap (percentile) within Monte-Carlo error (0.12 SE: about 4 sigma of the two quantile estimates)."""
import json, subprocess, sys, warnings
import numpy as np
from scipy import special, stats

tool = sys.argv[1]
fails = []

def close(name, got, want, rtol, atol=0.0):
    if got is None or want is None or not np.isfinite(want):
        ok = (got is None and (want is None or not np.isfinite(want)))
    else:
        ok = abs(got - want) <= atol + rtol * abs(want)
    if not ok:
        fails.append(f"{name}: got {got} want {want}")

rng = np.random.default_rng(7)
# --- special functions ---
triples = [(0.5, 0.5, 0.3), (2.0, 3.0, 0.4), (50.0, 0.5, 0.99), (0.5, 50.0, 1e-3),
           (100.0, 0.5, 0.9), (1.5, 1.5, 0.5), (10.0, 0.5, 1e-6)]
triples += [(float(a), float(b), float(x)) for a, b, x in
            zip(rng.uniform(0.2, 60, 40), rng.uniform(0.2, 60, 40), rng.uniform(0, 1, 40))]
out = subprocess.run([tool, "betainc"], input="\n".join("%r %r %r" % t for t in triples),
                     capture_output=True, text=True, check=True).stdout.split()
for (a, b, x), got in zip(triples, out):
    close(f"betainc({a},{b},{x})", float(got), special.betainc(a, b, x), 1e-9, 1e-300)
pairs = [(0.0, 5), (2.1, 3), (-4.0, 10), (12.0, 102), (-0.3, 1), (40.0, 7)]
out = subprocess.run([tool, "tcdf"], input="\n".join("%r %r" % p for p in pairs),
                     capture_output=True, text=True, check=True).stdout.split()
for (t, df), got in zip(pairs, out):
    close(f"t_cdf({t},{df})", float(got), stats.t.cdf(t, df), 1e-9, 1e-300)

# --- paired tests ---
cases = [
    ([1.0, 2, 3, 4, 5, 6, 7], [1.5, 1.0, 3.2, 3.0, 5.5, 5.9, 6.0]),   # exact, n = 7
    (list(range(1, 21)), [x + 0.1 * ((-1) ** x) * x for x in range(1, 21)]),  # exact, n = 20
    ([1.0, 2, 3, 4, 5, 6], [1.0, 1, 3, 3.5, 4, 6]),                  # zeros -> approx
    ([1.0, 2, 3, 4, 5, 6, 7, 8], [0.0, 1, 2, 3, 6, 7, 8, 9]),        # ties (|d| = 1) -> approx
]
for n in (5, 12, 30, 50, 51, 103):
    a = rng.normal(30, 2, n)
    cases.append((a, a + rng.normal(0.2, 0.5, n)))
a = np.round(rng.normal(0, 3, 103))  # integers: zeros and many ties, large n
cases.append((a, np.round(rng.normal(0.5, 3, 103))))
a = rng.normal(0, 1, 40)
cases.append((a, a - 1e-9))  # near-constant differences: huge t, tiny p
text = "".join(f"{len(a)} {' '.join(repr(float(x)) for x in a)} {' '.join(repr(float(x)) for x in b)}\n"
               for a, b in cases)
lines = subprocess.run([tool, "stats"], input=text, capture_output=True, text=True,
                       check=True).stdout.strip().split("\n")
assert len(lines) == len(cases), lines
for k, ((a, b), line) in enumerate(zip(cases, lines)):
    got = json.loads(line)
    a, b = np.asarray(a, float), np.asarray(b, float)
    d = a - b
    close(f"case{k} mean_diff", got["mean_diff"], d.mean(), 1e-12, 1e-14)
    tt = stats.ttest_rel(a, b)
    close(f"case{k} t", got["t"], tt.statistic, 1e-9)
    close(f"case{k} t_p", got["t_p"], tt.pvalue, 1e-6, 1e-300)
    nz = d[d != 0]
    ties = len(np.unique(np.abs(nz))) < len(nz)
    exact = len(d) <= 50 and len(nz) == len(d) and not ties
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        w = stats.wilcoxon(a, b, zero_method="wilcox", correction=False,
                           method="exact" if exact else "approx")
    if got["w_exact"] != int(exact):
        fails.append(f"case{k}: w_exact {got['w_exact']} want {int(exact)}")
    close(f"case{k} w_stat", got["w_stat"], w.statistic, 1e-12)
    close(f"case{k} w_p", got["w_p"], w.pvalue, 1e-6, 1e-300)
    if exact and len(d) <= 50:  # the default 'auto' agrees when there are no ties or zeros
        close(f"case{k} w_p(auto)", got["w_p"], stats.wilcoxon(a, b).pvalue, 1e-6, 1e-300)
    if got["significant"] != int(tt.pvalue < 0.05):
        fails.append(f"case{k}: significant {got['significant']}")
    # percentile bootstrap: same estimator, different random stream -> compare within a
    # tolerance set by the Monte-Carlo error of 20000 resamples (a few % of the SE)
    if d.std() > 0:
        res = stats.bootstrap((d,), np.mean, n_resamples=20000, confidence_level=0.95,
                              method="percentile", random_state=1)
        se = d.std(ddof=1) / np.sqrt(len(d))
        close(f"case{k} ci_lo", got["ci_lo"], res.confidence_interval.low, 0, 0.12 * se)
        close(f"case{k} ci_hi", got["ci_hi"], res.confidence_interval.high, 0, 0.12 * se)
        if not (got["ci_lo"] <= d.mean() <= got["ci_hi"]):
            fails.append(f"case{k}: CI does not contain the mean")

# determinism: same seed, same interval
again = subprocess.run([tool, "stats"], input=text, capture_output=True, text=True,
                       check=True).stdout.strip().split("\n")
if again != lines:
    fails.append("bootstrap is not deterministic for a fixed seed")

if fails:
    print("FAIL\n" + "\n".join(fails))
    sys.exit(1)
print(f"ok: {len(triples)} betainc, {len(pairs)} t-cdf, {len(cases)} paired cases agree with scipy")
