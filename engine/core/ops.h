/* CPU reference ops of the H3 forward (the oracle every GPU kernel is compared with).
 * float32 storage; sums, norms and softmax accumulate in float64, so the only float32 rounding
 * is at each op's output. The contract's bf16 activations are NOT emulated here (see
 * docs/engine.md: the oracle is the exact-arithmetic limit the bf16 stack approximates). */
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

/* y[n][o] = sum_i x[n][i] * w[o][i] + (b ? b[o] : 0); w is (out, in) like torch.nn.Linear. */
void vdn_linear(float *y, const float *x, const float *w, const float *b, int n, int in, int out);

/* y = x / sqrt(mean(x^2) + eps) * w over each row of width d (w may be NULL = ones). In place ok.
 */
void vdn_rmsnorm(float *y, const float *x, const float *w, int n, int d, float eps);

/* x = x * (1 + scale) + shift over one row of width d. */
void vdn_modulate(float *x, const float *shift, const float *scale, int d);

static inline float vdn_silu(float x) {
    return (float)((double)x / (1.0 + exp(-(double)x)));
}
static inline float vdn_sigmoid(float x) {
    return (float)(1.0 / (1.0 + exp(-(double)x)));
}
static inline double vdn_softplus(double x) {
    return x > 20.0 ? x : log1p(exp(x));
}

/* SwiGLU, diffusers layout: u (n, 2*f) = [value; gate] per row -> out (n, f) = value*silu(gate). */
void vdn_swiglu(float *out, const float *u, int n, int f);

/* Sinusoidal timestep features, cos first: e = [cos(t f_j), sin(t f_j)], f_j = exp(-ln(1e4)
 * j/half), j < half = dim/2 (spec 2.3). t unscaled in [0, 1]. */
void vdn_time_features(float *e, float t, int dim);

/* RoPE inverse frequencies inv[k] = 1 / theta^(2k / (2*nf)), k < nf (spec 3: 10000^(-2k/32)),
 * as the float32 values of the reference's inv_freq buffer (held in doubles). */
void vdn_rope_inv_freq(double *inv, int nf, double theta);
/* Partial half-split (NeoX) rotary on one head vector x of width head_dim: the first 6*nf channels
 * rotate with angles concat(t*inv, h*inv, w*inv) repeated twice; channel i pairs with i + 3*nf;
 * the rest pass through. pos = (t, h, w), float64 as built; like the reference
 * (MiniMaxH3RotaryPosEmbed) the angle is the float32 product float32(pos) * inv_freq, so large
 * positions (text length + media clock) round as they do there; cos/sin of that float32 angle are
 * evaluated in float64. */
void vdn_rope_apply(float *x, const double *pos, const double *inv, int nf, int head_dim);

/* L2-normalize: x / max(||x||, eps) (torch F.normalize). */
void vdn_l2norm(float *x, int d, float eps);

/* Scaled-dot-product attention for one head over packed rows. q,k,v,o: row stride `stride`
 * floats, head vectors at offset 0 of each row (caller offsets the pointers). keep(user, i, j)
 * decides whether query row i sees key row j (NULL = dense). Rows [q0, q1) are computed. */
typedef int (*vdn_keep_fn)(const void *user, int qi, int kj);
void vdn_sdpa_head(float *o, const float *q, const float *k, const float *v, int n_keys, int q0,
                   int q1, int stride, int d, double scale, vdn_keep_fn keep, const void *user);

#endif
