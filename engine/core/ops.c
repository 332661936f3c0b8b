/* Host helpers of the CPU backend and the models (ops.h). */
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

void vdn_rope_inv_freq(double *inv, int nf, double theta) {
    for (int k = 0; k < nf; k++) {
        float expo = (float)(2 * k) / (float)(2 * nf);
        float p = (float)pow(theta, (double)expo);
        inv[k] = (double)(1.0f / p);
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
