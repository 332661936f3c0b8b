"""Re-derive every statistic of a report.json from its own per-prompt values with scipy, and
check the HTML and PNG pieces: usage check_report.py REPORT_DIR."""
import base64, json, os, re, sys, warnings
import numpy as np
from scipy import stats
import cv2

d = sys.argv[1]
rep = json.load(open(os.path.join(d, "report.json")))
html = open(os.path.join(d, "report.html"), encoding="utf-8").read()
fails = []
base = rep["baseline"]
checked = 0
for m in rep["metrics"]:
    vals = {v: np.array([np.nan if x is None else x for x in m["values"][v]]) for v in rep["variants"]}
    for v in rep["variants"]:
        s = m["per_variant"][v]
        x = vals[v][np.isfinite(vals[v])]
        if s["n"] != len(x):
            fails.append(f"{m['name']}/{v}: n {s['n']} != {len(x)}")
        if len(x) and abs(s["mean"] - x.mean()) > 1e-9 * max(1, abs(x.mean())):
            fails.append(f"{m['name']}/{v}: mean {s['mean']} != {x.mean()}")
        if m["kind"] == "reference" or v == base:
            if "vs_baseline" in s:
                fails.append(f"{m['name']}/{v}: unexpected test")
            continue
        t = s["vs_baseline"]
        ok = np.isfinite(vals[v]) & np.isfinite(vals[base])
        a, b = vals[v][ok], vals[base][ok]
        tt = stats.ttest_rel(a, b)
        diff = a - b
        nz = diff[diff != 0]
        exact = len(diff) <= 50 and len(nz) == len(diff) and len(np.unique(np.abs(nz))) == len(nz)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            w = stats.wilcoxon(a, b, method="exact" if exact else "approx")
        for key, want, tol in [("n", len(a), 0), ("mean_diff", diff.mean(), 1e-9),
                               ("t", tt.statistic, 1e-8), ("t_p", tt.pvalue, 1e-6),
                               ("wilcoxon_statistic", w.statistic, 1e-9),
                               ("wilcoxon_p", w.pvalue, 1e-6)]:
            got = t[key]
            if got is None or abs(got - want) > tol * max(1, abs(want)):
                fails.append(f"{m['name']}/{v}: {key} {got} != {want}")
        if t["significant"] != bool(tt.pvalue < rep["alpha"]):
            fails.append(f"{m['name']}/{v}: significance flag")
        lo, hi = t["ci_diff"]
        if not lo <= diff.mean() <= hi:
            fails.append(f"{m['name']}/{v}: CI [{lo}, {hi}] misses the mean diff")
        checked += 1

# the synthetic effects: vdn@8 clearly worse on quality, window-only not
q = next(m for m in rep["metrics"] if m["name"] == "quality")
if not q["per_variant"]["vdn@8"]["vs_baseline"]["significant"]:
    fails.append("quality/vdn@8: a 2-point drop over 14 prompts must be significant")
if q["per_variant"]["window-only@8"]["vs_baseline"]["n"] != 13:
    fails.append("window-only@8: the failed prompt must be left out of the pairs")
if len(rep["errors"]) != 1 or "not found" not in rep["errors"][0]["error"]:
    fails.append(f"errors: {rep['errors']}")
# HTML: escaped title, the tables, SVG charts, one significance mark in the stats table row
for needle in ["synthetic &lt;report&gt; &amp; test", 'id="stats"', 'id="timing"', "<svg",
               "data:image/png;base64,", "not found", "Per-prompt breakdown"]:
    if needle not in html:
        fails.append(f"html lacks {needle!r}")
if html.count("<svg") != len(rep["metrics"]) + 2:
    fails.append(f"html has {html.count('<svg')} charts, expected {len(rep['metrics']) + 2}")
# every embedded PNG decodes; the standalone one matches its raw pixels exactly
for b64 in re.findall(r'data:image/png;base64,([A-Za-z0-9+/=]+)', html):
    img = cv2.imdecode(np.frombuffer(base64.b64decode(b64), np.uint8), cv2.IMREAD_COLOR)
    if img is None or img.shape != (16, 48, 3):
        fails.append("an embedded PNG does not decode to 16x48")
img = cv2.imread(os.path.join(d, "strip.png"), cv2.IMREAD_COLOR)[:, :, ::-1]
raw = np.fromfile(os.path.join(d, "strip.rgb"), np.uint8).reshape(16, 48, 3)
if not np.array_equal(img, raw):
    fails.append("strip.png does not decode to the pixels written")
if fails:
    print("FAIL\n" + "\n".join(fails))
    sys.exit(1)
print(f"ok: {checked} paired comparisons re-derived with scipy; html and png check out")
