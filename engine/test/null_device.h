/* A test-only op-layer device without a model's cost: the CPU backend's memory, transfers, fill
 * and Euler step, every other op a no-op. Activations are BF16 as on a GPU; the float32 products
 * (the output heads, the time MLP, the alpha projections) write zeros, so the DiT's velocities
 * are zero.
 * Registered under the name "cuda" (as kernels/ provides its device) and opened with
 * VDN_BACKEND_CUDA, it lets a render run at any size in the time of its host work, and it counts
 * what crosses between host and device per NFE (the loop syncs once per NFE), so a test can
 * assert that only the per-row timestep indices that changed and the timestep values go over.
 * Include once per test program. */
#ifndef VDN_TEST_NULL_DEVICE_H
#define VDN_TEST_NULL_DEVICE_H

#include <string.h>

#include "op_backend.h"
#include "op_vda.h"

typedef struct {
    size_t set_bytes, get_bytes; /* since the last sync */
    int syncs;                   /* = NFEs done by the op-layer loop */
    size_t max_nfe_set_bytes;    /* most bytes sent during one NFE (after the first sync) */
    size_t nfe_get_bytes;        /* bytes read back between the first and the last sync */
    size_t setup_set_bytes;      /* sent before the first NFE's sync */
} null_counts;
static null_counts g_null;

static int null_dev_set(vdn_tensor *t, const void *host, vdn_dtype dt) {
    g_null.set_bytes += (size_t)vdn_tensor_numel(t) * vdn_dtype_size(dt);
    return vdn_cpu_dev_backend.set(t, host, dt);
}
static int null_dev_get(const vdn_tensor *t, void *host, vdn_dtype dt) {
    g_null.get_bytes += (size_t)vdn_tensor_numel(t) * vdn_dtype_size(dt);
    return vdn_cpu_dev_backend.get(t, host, dt);
}
static int null_dev_sync(vdn_dev *d) {
    (void)d;
    if (g_null.syncs == 0)
        g_null.setup_set_bytes = g_null.set_bytes;
    else {
        if (g_null.set_bytes > g_null.max_nfe_set_bytes)
            g_null.max_nfe_set_bytes = g_null.set_bytes;
        g_null.nfe_get_bytes += g_null.get_bytes;
    }
    g_null.set_bytes = g_null.get_bytes = 0;
    g_null.syncs++;
    return 0;
}
static int null_dev_open(vdn_dev *d, int index, int threads) {
    (void)d, (void)index, (void)threads;
    memset(&g_null, 0, sizeof g_null);
    return 0;
}

static int null_linear(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                       vdn_act act, int accumulate) {
    (void)b, (void)act;
    int f32 = y->dtype == VDN_DT_F32 && x->dtype == VDN_DT_F32 && w->dtype == VDN_DT_F32;
    return accumulate || !f32 ? 0 : vdn_cpu_dev_backend.fill(y, 0.0);
}
static int null_matmul(vdn_tensor *y, const vdn_tensor *a, const vdn_tensor *b, int acc) {
    (void)a, (void)b, (void)acc;
    return vdn_cpu_dev_backend.fill(y, 0.0);
}
/* the no-ops, one per signature */
static int null_copy(vdn_tensor *dst, const vdn_tensor *src) {
    (void)dst, (void)src;
    return 0;
}
static int null_2(vdn_tensor *a, const vdn_tensor *b) {
    (void)a, (void)b;
    return 0;
}
static int null_act(vdn_tensor *y, const vdn_tensor *x, vdn_act a) {
    (void)y, (void)x, (void)a;
    return 0;
}
static int null_3(vdn_tensor *a, const vdn_tensor *b, const vdn_tensor *c) {
    (void)a, (void)b, (void)c;
    return 0;
}
static int null_scale(vdn_tensor *x, double s) {
    (void)x, (void)s;
    return 0;
}
static int null_gres(vdn_tensor *x, const vdn_tensor *y, const vdn_tensor *g, const vdn_tensor *i) {
    (void)x, (void)y, (void)g, (void)i;
    return 0;
}
static int null_mulg(vdn_tensor *x, const vdn_tensor *s, int g) {
    (void)x, (void)s, (void)g;
    return 0;
}
static int null_rms(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, double e,
                    const vdn_tensor *sh, const vdn_tensor *sc, const vdn_tensor *i) {
    (void)y, (void)x, (void)w, (void)e, (void)sh, (void)sc, (void)i;
    return 0;
}
static int null_ln(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                   double e) {
    (void)y, (void)x, (void)w, (void)b, (void)e;
    return 0;
}
static int null_qk(vdn_tensor *qo, vdn_tensor *ko, const vdn_tensor *qi, const vdn_tensor *ki,
                   const vdn_tensor *wq, const vdn_tensor *wk, int hd, double e,
                   const vdn_rope *r) {
    (void)qo, (void)ko, (void)qi, (void)ki, (void)wq, (void)wk, (void)hd, (void)e, (void)r;
    return 0;
}
static int null_attn(vdn_tensor *o, const vdn_tensor *q, const vdn_tensor *k, const vdn_tensor *v,
                     int hd, double s, const vdn_attn_mask *m, const vdn_tensor *g) {
    (void)o, (void)q, (void)k, (void)v, (void)hd, (void)s, (void)m, (void)g;
    return 0;
}
static int null_tf(vdn_tensor *e, const vdn_tensor *t) {
    (void)e, (void)t;
    return 0;
}

/* the VDA family as no-ops */
static int null_prep(const vdn_vda_feats *o, const vdn_tensor *k, const vdn_tensor *v,
                     const vdn_tensor *q, const vdn_vda_conv *c, const vdn_tensor *b, int f, int gh,
                     int gw, int h) {
    (void)o, (void)k, (void)v, (void)q, (void)c, (void)b, (void)f, (void)gh, (void)gw, (void)h;
    return 0;
}
static int null_stats(vdn_tensor *A, vdn_tensor *B, const vdn_tensor *ks, const vdn_tensor *kb,
                      const vdn_tensor *vt, int n) {
    (void)A, (void)B, (void)ks, (void)kb, (void)vt, (void)n;
    return 0;
}
static int null_solve(vdn_tensor *T, vdn_tensor *J, const vdn_tensor *A, const vdn_tensor *B,
                      const vdn_tensor *al, int s) {
    (void)T, (void)J, (void)A, (void)B, (void)al, (void)s;
    return 0;
}
static int null_scans(vdn_tensor *P, vdn_tensor *R, const vdn_tensor *T, const vdn_tensor *J,
                      const vdn_tensor *S0, int f) {
    (void)P, (void)R, (void)T, (void)J, (void)S0, (void)f;
    return 0;
}
static int null_gather(vdn_tensor *S, const vdn_tensor *P, const vdn_tensor *R,
                       const vdn_tensor *S0, const vdn_tensor *al, const vdn_tensor *w, int f) {
    (void)S, (void)P, (void)R, (void)S0, (void)al, (void)w, (void)f;
    return 0;
}
static int null_readout(vdn_tensor *r, const vdn_tensor *S, const vdn_tensor *q, int n) {
    (void)r, (void)S, (void)q, (void)n;
    return 0;
}
static int null_epi(vdn_tensor *o, const vdn_tensor *r, const vdn_tensor *w, double e,
                    const vdn_tensor *g, int f, int h) {
    (void)o, (void)r, (void)w, (void)e, (void)g, (void)f, (void)h;
    return 0;
}
static int null_means(vdn_tensor *m, const vdn_tensor *x, int f) {
    (void)m, (void)x, (void)f;
    return 0;
}
static int null_alpha(vdn_tensor *a, const vdn_tensor *u, const vdn_tensor *d,
                      const vdn_tensor *l) {
    (void)a, (void)u, (void)d, (void)l;
    return 0;
}
static const struct vdn_vda_backend null_vda = {VDN_DT_F32, VDN_DT_F32, null_prep,   null_stats,
                                                null_solve, null_scans, null_gather, null_readout,
                                                null_epi,   null_means, null_alpha};

/* the "cuda" stand-in: call once before vdn_engine_open */
static inline const vdn_dev_backend *null_device(void) {
    static vdn_dev_backend be;
    be = vdn_cpu_dev_backend;
    be.name = "cuda";
    be.open = null_dev_open;
    be.sync = null_dev_sync;
    be.set = null_dev_set;
    be.get = null_dev_get;
    be.copy = null_copy;
    be.act_dtype = VDN_DT_BF16;
    be.linear = null_linear;
    be.matmul_bt = null_matmul;
    be.act = null_act;
    be.swiglu = null_3;
    be.add = null_2;
    be.scale = null_scale;
    be.gate_residual = null_gres;
    be.mul_groups = null_mulg;
    be.rmsnorm = null_rms;
    be.layernorm = null_ln;
    be.qk_norm_rope = null_qk;
    be.attention = null_attn;
    be.time_features = null_tf;
    be.vda = &null_vda; /* euler stays the CPU's: the loop's float32 update runs for real */
    return &be;
}

#endif
