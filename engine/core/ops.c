/* CPU reference ops; see ops.h. Plain loops, float64 accumulation. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "vdn_util.h"

/* process-wide; atomic because devices may be opened from several threads at once (the ranks
 * of a k-GPU render, vdn bench --gpus) */
static atomic_int g_threads = 1;

void vdn_ops_set_threads(int n) {
    atomic_store_explicit(&g_threads, n < 1 ? 1 : (n > 64 ? 64 : n), memory_order_relaxed);
}
int vdn_ops_threads(void) {
    return atomic_load_explicit(&g_threads, memory_order_relaxed);
}

typedef struct {
    void (*fn)(void *, int);
    void *ctx;
    int i0, i1;
} pfor_job;

static void *pfor_thread(void *arg) {
    pfor_job *j = arg;
    for (int i = j->i0; i < j->i1; i++)
        j->fn(j->ctx, i);
    return NULL;
}

void vdn_parallel_for(int n, void (*fn)(void *ctx, int i), void *ctx) {
    const int threads = vdn_ops_threads(), nt = threads < n ? threads : n;
    if (nt <= 1) {
        for (int i = 0; i < n; i++)
            fn(ctx, i);
        return;
    }
    pthread_t th[64];
    pfor_job jobs[64];
    int started[64] = {0};
    for (int t = 0; t < nt; t++) {
        jobs[t] = (pfor_job){fn, ctx, (int)((long)n * t / nt), (int)((long)n * (t + 1) / nt)};
        if (t > 0) started[t] = pthread_create(&th[t], NULL, pfor_thread, &jobs[t]) == 0;
        if (t > 0 && !started[t]) pfor_thread(&jobs[t]);
    }
    pfor_thread(&jobs[0]);
    for (int t = 1; t < nt; t++)
        if (started[t]) pthread_join(th[t], NULL);
}

typedef struct {
    float *y;
    const float *x, *w, *b;
    int r0, r1, in, out;
} linear_job;

static void linear_rows(const linear_job *j) {
    for (int r = j->r0; r < j->r1; r++) {
        const float *xr = j->x + (size_t)r * j->in;
        float *yr = j->y + (size_t)r * j->out;
        for (int o = 0; o < j->out; o++) {
            const float *wo = j->w + (size_t)o * j->in;
            double acc = j->b ? j->b[o] : 0.0;
            for (int i = 0; i < j->in; i++)
                acc += (double)xr[i] * wo[i];
            yr[o] = (float)acc;
        }
    }
}

static void *linear_thread(void *arg) {
    linear_rows((const linear_job *)arg);
    return NULL;
}

void vdn_linear(float *y, const float *x, const float *w, const float *b, int n, int in, int out) {
    int nt = vdn_ops_threads();
    double work = (double)n * in * out;
    if (nt > n) nt = n;
    if (nt <= 1 || work < 1e6) {
        linear_job j = {y, x, w, b, 0, n, in, out};
        linear_rows(&j);
        return;
    }
    pthread_t th[64];
    linear_job jobs[64];
    for (int t = 0; t < nt; t++) {
        jobs[t] = (linear_job){y,  x,  w, b, (int)((long)n * t / nt), (int)((long)n * (t + 1) / nt),
                               in, out};
        if (t > 0 && pthread_create(&th[t], NULL, linear_thread, &jobs[t]) != 0)
            linear_rows(&jobs[t]), th[t] = 0;
    }
    linear_rows(&jobs[0]);
    for (int t = 1; t < nt; t++)
        if (th[t]) pthread_join(th[t], NULL);
}

void vdn_rmsnorm(float *y, const float *x, const float *w, int n, int d, float eps) {
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * d;
        float *yr = y + (size_t)r * d;
        double ss = 0.0;
        for (int i = 0; i < d; i++)
            ss += (double)xr[i] * xr[i];
        double inv = 1.0 / sqrt(ss / d + (double)eps);
        for (int i = 0; i < d; i++)
            yr[i] = (float)(xr[i] * inv * (w ? (double)w[i] : 1.0));
    }
}

void vdn_modulate(float *x, const float *shift, const float *scale, int d) {
    for (int i = 0; i < d; i++)
        x[i] = (float)((double)x[i] * (1.0 + scale[i]) + shift[i]);
}

void vdn_swiglu(float *out, const float *u, int n, int f) {
    for (int r = 0; r < n; r++) {
        const float *val = u + (size_t)r * 2 * f, *gate = val + f;
        for (int i = 0; i < f; i++) {
            double g = gate[i];
            out[(size_t)r * f + i] = (float)(val[i] * (g / (1.0 + exp(-g))));
        }
    }
}

void vdn_time_features(float *e, float t, int dim) {
    int half = dim / 2;
    const float neg_log_period = (float)-log(10000.0);
    for (int j = 0; j < half; j++) {
        float expo = neg_log_period * (float)j / (float)half; /* float32, as the reference */
        float f = (float)exp((double)expo);
        float arg = t * f;
        e[j] = (float)cos((double)arg);
        e[half + j] = (float)sin((double)arg);
    }
}

void vdn_rope_inv_freq(double *inv, int nf, double theta) {
    for (int k = 0; k < nf; k++) {
        float expo = (float)(2 * k) / (float)(2 * nf);
        float p = (float)pow(theta, (double)expo);
        inv[k] = (double)(1.0f / p);
    }
}

void vdn_rope_apply(float *x, const double *pos, const double *inv, int nf, int head_dim) {
    int half = 3 * nf; /* 48 of the 96 rotated channels */
    VDN_ASSERT(2 * half <= head_dim);
    float tmp[512];
    VDN_ASSERT(2 * half <= 512);
    for (int i = 0; i < 2 * half; i++)
        tmp[i] = x[i];
    for (int i = 0; i < half; i++) {
        float ang32 = (float)pos[i / nf] * (float)inv[i % nf]; /* float32, as the reference */
        double ang = ang32;
        double c = cos(ang), s = sin(ang);
        /* x' = x cos + rotate_half(x) sin, rotate_half = concat(-x[half:], x[:half]) */
        x[i] = (float)(tmp[i] * c - tmp[i + half] * s);
        x[i + half] = (float)(tmp[i + half] * c + tmp[i] * s);
    }
}

void vdn_l2norm(float *x, int d, float eps) {
    double ss = 0.0;
    for (int i = 0; i < d; i++)
        ss += (double)x[i] * x[i];
    double n = sqrt(ss);
    if (n < eps) n = eps;
    for (int i = 0; i < d; i++)
        x[i] = (float)(x[i] / n);
}

void vdn_sdpa_head(float *o, const float *q, const float *k, const float *v, int n_keys, int q0,
                   int q1, int stride, int d, double scale, vdn_keep_fn keep, const void *user) {
    double *s = vdn_xmalloc(sizeof(double) * (size_t)n_keys);
    double *acc = vdn_xmalloc(sizeof(double) * (size_t)d);
    for (int i = q0; i < q1; i++) {
        const float *qi = q + (size_t)i * stride;
        double mx = -INFINITY;
        for (int j = 0; j < n_keys; j++) {
            if (keep && !keep(user, i, j)) {
                s[j] = -INFINITY;
                continue;
            }
            const float *kj = k + (size_t)j * stride;
            double dot = 0.0;
            for (int c = 0; c < d; c++)
                dot += (double)qi[c] * kj[c];
            s[j] = dot * scale;
            if (s[j] > mx) mx = s[j];
        }
        double den = 0.0;
        memset(acc, 0, sizeof(double) * (size_t)d);
        for (int j = 0; j < n_keys; j++) {
            if (s[j] == -INFINITY) continue;
            double p = exp(s[j] - mx);
            den += p;
            const float *vj = v + (size_t)j * stride;
            for (int c = 0; c < d; c++)
                acc[c] += p * vj[c];
        }
        float *oi = o + (size_t)i * stride;
        for (int c = 0; c < d; c++)
            oi[c] = den > 0 ? (float)(acc[c] / den) : 0.0f;
    }
    free(s);
    free(acc);
}
