/* Small host helpers of the CPU backend and the models: the worker threads of the CPU backend
 * (vdn_parallel_for), SiLU / softplus / L2 norm in float64 arithmetic, and RoPE's inverse
 * frequencies. The ops themselves are the op layer's (op.h; its CPU backend op_cpu_*.c is the
 * oracle every CUDA kernel is compared with). */
#ifndef VDN_OPS_H
#define VDN_OPS_H

#include <math.h>
#include <stdint.h>

/* Worker threads for the big matrix products (1 = run on the calling thread).
 *
 * Process-wide on purpose, for now (issue 21 item 5 looked at making it the opened device's):
 * every caller that chooses a count does so through what it opens (vdn_dev_open's threads for
 * the CPU device, op_cpu.c; vdn_engine_opts.threads for the render's host work, engine.c; the
 * video VAE on a GPU raises a count of 1 to the cores for its host joins, video_vae.c), and
 * only those and the thread-invariance tests call this setter. It stays one value because
 * vdn_parallel_for is also the pool of host work that has no device at hand (sampler.c's Euler
 * step and noise, weights_random.c, the reference ops below such as vdn_linear), and because
 * the tests that prove results do not depend on the count (test_ops, test_op_cpu, test_dit,
 * test_model, test_hostwork) flip it between two runs. Moving it onto vdn_dev would mean a
 * thread count argument through those host paths and a device per count in those tests, for a
 * case no caller has: two CPU engines with different counts in one process (a worker opens all
 * of its engines with one --threads). Results never depend on it (every split sums in a fixed
 * order): it decides speed only. */
void vdn_ops_set_threads(int n);
int vdn_ops_threads(void);

/* Run fn(ctx, i) for i in [0, n) on up to vdn_ops_threads() threads (contiguous ranges); the
 * calls must be independent. Results do not depend on the thread count. */
void vdn_parallel_for(int n, void (*fn)(void *ctx, int i), void *ctx);

static inline float vdn_silu(float x) {
    return (float)((double)x / (1.0 + exp(-(double)x)));
}
static inline double vdn_softplus(double x) {
    return x > 20.0 ? x : log1p(exp(x));
}

/* RoPE inverse frequencies inv[k] = 1 / theta^(2k / (2*nf)), k < nf (spec 3: 10000^(-2k/32)),
 * as the float32 values of the reference's inv_freq buffer (held in doubles). */
void vdn_rope_inv_freq(double *inv, int nf, double theta);
/* L2-normalize: x / max(||x||, eps) (torch F.normalize). */
void vdn_l2norm(float *x, int d, float eps);

#endif
