/* Paired statistics of one metric: variant against baseline, prompt by prompt.
 * Written to agree with scipy.stats (ttest_rel, wilcoxon with its defaults) so a reader can
 * re-check any number of the report with scipy. */
#ifndef VDN_EVAL_STATS_H
#define VDN_EVAL_STATS_H

#include <stddef.h>
#include <stdint.h>

/* Regularized incomplete beta I_x(a, b), a, b > 0, 0 <= x <= 1. */
double vdn_betainc(double a, double b, double x);
/* Student t CDF with df degrees of freedom. */
double vdn_t_cdf(double t, double df);
/* Standard normal survival function P(Z > z). */
double vdn_norm_sf(double z);

typedef struct {
    double t; /* statistic; NAN when undefined (n < 2 or all differences equal zero) */
    double df;
    double p; /* two-sided; NAN when undefined */
} vdn_ttest;
/* scipy.stats.ttest_rel(a, b): d = a - b. */
vdn_ttest vdn_ttest_rel(const double *a, const double *b, size_t n);

typedef struct {
    double statistic; /* min(R+, R-) like scipy's two-sided statistic */
    double p;         /* two-sided; NAN when every difference is zero or n = 0 */
    double z;         /* normal-approximation z (NAN when the exact method was used) */
    int exact;        /* 1 when the exact null distribution was used */
    size_t n_used;    /* differences left after dropping zeros */
} vdn_wilcoxon;
/* scipy.stats.wilcoxon(a, b) with zero_method='wilcox', correction=False, two-sided.
 * Method: exact when n <= 50 with no zero and no tied |difference| (scipy 'auto' without the
 * ties case), otherwise the normal approximation with the tie-corrected variance, zeros
 * dropped first. */
vdn_wilcoxon vdn_wilcoxon_signed_rank(const double *a, const double *b, size_t n);

typedef struct {
    double lo, hi;
} vdn_ci;
/* Percentile bootstrap CI of mean(a - b): `resamples` resamples with replacement drawn from a
 * seeded splitmix64 stream; quantiles interpolate linearly like numpy.percentile. */
vdn_ci vdn_bootstrap_mean_ci(const double *a, const double *b, size_t n, int resamples,
                             double level, uint64_t seed);

/* numpy.percentile(x, q) with linear interpolation; sorts a copy. */
double vdn_percentile(const double *x, size_t n, double q);

/* Everything the report prints for one (metric, variant) against the baseline. */
typedef struct {
    size_t n;
    double mean_variant, mean_baseline, mean_diff, sd_diff;
    vdn_ttest ttest;
    vdn_wilcoxon wilcoxon;
    vdn_ci ci;
    int significant; /* paired t-test p < alpha (and defined) */
} vdn_paired;
vdn_paired vdn_paired_compare(const double *variant, const double *baseline, size_t n, double alpha,
                              int resamples, uint64_t seed);

#endif
