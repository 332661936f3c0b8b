/* Paired tests and intervals. The special functions are written out here (continued fraction
 * for the incomplete beta, as in Numerical Recipes / Cephes) because no Debian C library we
 * already use provides them. */
#include "stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "vdn_util.h"

/* Continued fraction for I_x(a, b), modified Lentz; converges fast for x < (a+1)/(a+b+2). */
static double betacf(double a, double b, double x) {
    const double tiny = 1e-300, eps = 1e-16;
    double qab = a + b, qap = a + 1.0, qam = a - 1.0;
    double c = 1.0, d = 1.0 - qab * x / qap;
    if (fabs(d) < tiny) d = tiny;
    d = 1.0 / d;
    double h = d;
    for (int m = 1; m <= 10000; m++) {
        int m2 = 2 * m;
        double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        if (fabs(d) < tiny) d = tiny;
        c = 1.0 + aa / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1.0 / d;
        h *= d * c;
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        if (fabs(d) < tiny) d = tiny;
        c = 1.0 + aa / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1.0 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1.0) < eps) break;
    }
    return h;
}

double vdn_betainc(double a, double b, double x) {
    if (isnan(x) || a <= 0 || b <= 0) return NAN;
    if (x <= 0) return 0.0;
    if (x >= 1) return 1.0;
    double lbt = lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x);
    if (x < (a + 1.0) / (a + b + 2.0)) return exp(lbt) * betacf(a, b, x) / a;
    return 1.0 - exp(lbt) * betacf(b, a, 1.0 - x) / b;
}

double vdn_t_cdf(double t, double df) {
    if (isnan(t) || df <= 0) return NAN;
    if (isinf(t)) return t > 0 ? 1.0 : 0.0;
    double tail = 0.5 * vdn_betainc(0.5 * df, 0.5, df / (df + t * t));
    return t > 0 ? 1.0 - tail : tail;
}

double vdn_norm_sf(double z) {
    return 0.5 * erfc(z / sqrt(2.0));
}

vdn_ttest vdn_ttest_rel(const double *a, const double *b, size_t n) {
    vdn_ttest r = {NAN, n >= 1 ? (double)n - 1 : NAN, NAN};
    if (n < 2) return r;
    double mean = 0;
    for (size_t i = 0; i < n; i++)
        mean += a[i] - b[i];
    mean /= (double)n;
    double ss = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (a[i] - b[i]) - mean;
        ss += e * e;
    }
    double se = sqrt(ss / (double)(n - 1) / (double)n);
    r.t = mean / se; /* inf when every difference is the same nonzero value, NAN when all zero */
    if (isnan(r.t)) return r;
    /* Two-sided p straight from I_x(df/2, 1/2): keeps relative precision for tiny p. */
    r.p = isinf(r.t) ? 0.0 : vdn_betainc(0.5 * r.df, 0.5, r.df / (r.df + r.t * r.t));
    return r;
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

typedef struct {
    double absd;
    int sign;
} signed_abs;

static int cmp_abs(const void *x, const void *y) {
    return cmp_double(&((const signed_abs *)x)->absd, &((const signed_abs *)y)->absd);
}

vdn_wilcoxon vdn_wilcoxon_signed_rank(const double *a, const double *b, size_t n) {
    vdn_wilcoxon r = {NAN, NAN, NAN, 0, 0};
    signed_abs *v = vdn_xmalloc((n ? n : 1) * sizeof *v);
    size_t m = 0, zeros = 0;
    for (size_t i = 0; i < n; i++) {
        double d = a[i] - b[i];
        if (d == 0) {
            zeros++;
            continue;
        }
        v[m].absd = fabs(d);
        v[m].sign = d > 0 ? 1 : -1;
        m++;
    }
    r.n_used = m;
    if (m == 0) {
        free(v);
        return r;
    }
    qsort(v, m, sizeof *v, cmp_abs);
    /* Average ranks over ties; the tie term sum t(t^2-1) corrects the variance. */
    double r_plus = 0, r_minus = 0, tie_term = 0;
    int ties = 0;
    for (size_t i = 0; i < m;) {
        size_t j = i;
        while (j + 1 < m && v[j + 1].absd == v[i].absd)
            j++;
        double rank = 0.5 * (double)(i + 1 + j + 1), t = (double)(j - i + 1);
        if (t > 1) {
            ties = 1;
            tie_term += t * (t * t - 1);
        }
        for (size_t k = i; k <= j; k++)
            (v[k].sign > 0 ? &r_plus : &r_minus)[0] += rank;
        i = j + 1;
    }
    free(v);
    r.statistic = r_plus < r_minus ? r_plus : r_minus;
    double cnt = (double)m;
    if (n <= 50 && zeros == 0 && !ties) {
        /* Exact null distribution of R+: each rank enters with probability 1/2. */
        size_t top = m * (m + 1) / 2;
        double *pmf = vdn_xcalloc(top + 1, sizeof *pmf), *next = vdn_xcalloc(top + 1, sizeof *next);
        pmf[0] = 1.0;
        size_t len = 1;
        for (size_t k = 1; k <= m; k++) {
            size_t nlen = k * (k + 1) / 2 + 1;
            memset(next, 0, nlen * sizeof *next);
            for (size_t s = 0; s < len; s++) {
                next[s] += 0.5 * pmf[s];
                next[s + k] += 0.5 * pmf[s];
            }
            memcpy(pmf, next, nlen * sizeof *pmf);
            len = nlen;
        }
        size_t rp = (size_t)r_plus;
        if (rp == top / 2) { /* the centre, as scipy decides it */
            r.p = 1.0;
        } else {
            double lo = 0, hi = 0;
            for (size_t s = 0; s <= rp; s++)
                lo += pmf[s];
            for (size_t s = rp; s <= top; s++)
                hi += pmf[s];
            r.p = 2 * (lo < hi ? lo : hi);
            if (r.p > 1) r.p = 1;
        }
        r.exact = 1;
        free(pmf);
        free(next);
        return r;
    }
    double mn = cnt * (cnt + 1) * 0.25;
    double se = sqrt((cnt * (cnt + 1) * (2 * cnt + 1) - 0.5 * tie_term) / 24.0);
    r.z = (r.statistic - mn) / se;
    r.p = 2.0 * vdn_norm_sf(fabs(r.z));
    return r;
}

double vdn_percentile(const double *x, size_t n, double q) {
    if (n == 0) return NAN;
    double *s = vdn_xmalloc(n * sizeof *s);
    memcpy(s, x, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_double);
    double pos = q / 100.0 * (double)(n - 1);
    size_t i = (size_t)floor(pos);
    double frac = pos - (double)i, v = s[i];
    if (i + 1 < n) v = s[i] + (s[i + 1] - s[i]) * frac;
    free(s);
    return v;
}

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

vdn_ci vdn_bootstrap_mean_ci(const double *a, const double *b, size_t n, int resamples,
                             double level, uint64_t seed) {
    vdn_ci ci = {NAN, NAN};
    if (n == 0 || resamples < 1) return ci;
    double *means = vdn_xmalloc((size_t)resamples * sizeof *means);
    uint64_t state = seed;
    for (int r = 0; r < resamples; r++) {
        double s = 0;
        for (size_t i = 0; i < n; i++) {
            /* top 53 bits -> [0,1) -> index; the bias is below 2^-40 for any n we see */
            size_t k = (size_t)((double)(splitmix64(&state) >> 11) * 0x1p-53 * (double)n);
            s += a[k] - b[k];
        }
        means[r] = s / (double)n;
    }
    double tail = (1.0 - level) / 2.0 * 100.0;
    ci.lo = vdn_percentile(means, (size_t)resamples, tail);
    ci.hi = vdn_percentile(means, (size_t)resamples, 100.0 - tail);
    free(means);
    return ci;
}

vdn_paired vdn_paired_compare(const double *variant, const double *baseline, size_t n, double alpha,
                              int resamples, uint64_t seed) {
    vdn_paired p;
    memset(&p, 0, sizeof p);
    p.n = n;
    double sv = 0, sb = 0;
    for (size_t i = 0; i < n; i++) {
        sv += variant[i];
        sb += baseline[i];
    }
    p.mean_variant = n ? sv / (double)n : NAN;
    p.mean_baseline = n ? sb / (double)n : NAN;
    p.mean_diff = p.mean_variant - p.mean_baseline;
    double ss = 0;
    for (size_t i = 0; i < n; i++) {
        double e = variant[i] - baseline[i] - p.mean_diff;
        ss += e * e;
    }
    p.sd_diff = n > 1 ? sqrt(ss / (double)(n - 1)) : NAN;
    p.ttest = vdn_ttest_rel(variant, baseline, n);
    p.wilcoxon = vdn_wilcoxon_signed_rank(variant, baseline, n);
    p.ci = vdn_bootstrap_mean_ci(variant, baseline, n, resamples, 0.95, seed);
    p.significant = !isnan(p.ttest.p) && p.ttest.p < alpha;
    return p;
}
