/* CPU attention: softmax(q k^T scale + mask) v per query head, GQA, optional per-head gate.
 * Scores, softmax and the weighted sum in float64 over the visible keys in ascending order; one
 * rounding per output, then the gate as a float32 product. Work is spread over (head, row
 * block) pairs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "op_cpu.h"
#include "ops.h"

#define ROW_BLOCK 64

typedef struct {
    vdn_tensor *o;
    cpu_fmat q, k, v;
    const vdn_tensor *gate;
    const vdn_attn_mask *mask;
    int hd, group; /* query heads per kv head */
    int64_t rows, keys, n_blocks;
    double scale;
} attn_job;

/* The keys row r sees, as up to 3 ascending disjoint ranges [b[i], e[i]) (visiting them in order
 * sums exactly like a masked sweep over every key). Returns the count. */
static int visible_ranges(const vdn_attn_mask *m, int r, int keys, int *b, int *e) {
    if (m->kind == VDN_MASK_DENSE) return b[0] = 0, e[0] = keys, 1;
    if (m->kind == VDN_MASK_CAUSAL) return b[0] = 0, e[0] = r + 1 < keys ? r + 1 : keys, 1;
    int cand_b[3] = {0, m->lo[r], m->tail_start}, cand_e[3] = {m->head_end, m->hi[r], keys};
    for (int i = 1; i < 3; i++) /* by start (a window may begin past the tail's start) */
        for (int k = i; k > 0 && cand_b[k] < cand_b[k - 1]; k--) {
            int tb = cand_b[k], te = cand_e[k];
            cand_b[k] = cand_b[k - 1], cand_e[k] = cand_e[k - 1];
            cand_b[k - 1] = tb, cand_e[k - 1] = te;
        }
    int n = 0;
    for (int i = 0; i < 3; i++) { /* ascending starts; merge overlaps */
        int lo = cand_b[i], hi = cand_e[i] < keys ? cand_e[i] : keys;
        if (lo >= hi) continue;
        if (n && lo <= e[n - 1]) {
            if (hi > e[n - 1]) e[n - 1] = hi;
        } else {
            b[n] = lo, e[n] = hi, n++;
        }
    }
    return n;
}

static void attn_block(void *ctx, int job) {
    const attn_job *j = ctx;
    const int h = (int)(job / j->n_blocks), hk = h / j->group;
    const int64_t r0 = (job % j->n_blocks) * ROW_BLOCK;
    const int64_t r1 = r0 + ROW_BLOCK < j->rows ? r0 + ROW_BLOCK : j->rows;
    double *s = vdn_xmalloc(sizeof(double) * (size_t)j->keys);
    double *acc = vdn_xmalloc(sizeof(double) * (size_t)j->hd);
    int rb[3], re[3];
    for (int64_t r = r0; r < r1; r++) {
        const float *qr = cpu_frow(&j->q, r) + (size_t)h * j->hd;
        const int nr = visible_ranges(j->mask, (int)r, (int)j->keys, rb, re);
        double mx = -INFINITY;
        for (int g = 0; g < nr; g++)
            for (int64_t k = rb[g]; k < re[g]; k++) {
                const float *kk = cpu_frow(&j->k, k) + (size_t)hk * j->hd;
                double dot = 0.0;
                for (int c = 0; c < j->hd; c++)
                    dot += (double)qr[c] * kk[c];
                s[k] = dot * j->scale;
                if (s[k] > mx) mx = s[k];
            }
        double den = 0.0;
        memset(acc, 0, sizeof(double) * (size_t)j->hd);
        for (int g = 0; g < nr; g++)
            for (int64_t k = rb[g]; k < re[g]; k++) {
                double p = exp(s[k] - mx);
                den += p;
                const float *vk = cpu_frow(&j->v, k) + (size_t)hk * j->hd;
                for (int c = 0; c < j->hd; c++)
                    acc[c] += p * vk[c];
            }
        float g = j->gate ? (float)cpu_at(j->gate, r, h) : 1.0f;
        for (int c = 0; c < j->hd; c++) {
            float out = den > 0 ? (float)(acc[c] / den) : 0.0f; /* no visible key: zeros */
            cpu_put(j->o, r, (int64_t)h * j->hd + c, j->gate ? out * g : out);
        }
    }
    free(s);
    free(acc);
}

int vdn_cpu_attention(vdn_tensor *o, const vdn_tensor *q, const vdn_tensor *k, const vdn_tensor *v,
                      int head_dim, double scale, const vdn_attn_mask *mask,
                      const vdn_tensor *gate) {
    const int hq = (int)(vdn_tensor_cols(q) / head_dim), hkv = (int)(vdn_tensor_cols(k) / head_dim);
    attn_job j = {.o = o,
                  .q = cpu_fmat_of(q),
                  .k = cpu_fmat_of(k),
                  .v = cpu_fmat_of(v),
                  .gate = gate,
                  .mask = mask,
                  .hd = head_dim,
                  .group = hq / hkv,
                  .rows = vdn_tensor_rows(q),
                  .keys = vdn_tensor_rows(k),
                  .scale = scale};
    j.n_blocks = (j.rows + ROW_BLOCK - 1) / ROW_BLOCK;
    /* o may alias q (in place): the outputs of a block are written after its own reads only, so
     * read from a copy when they share memory */
    cpu_fmat qcopy = {0};
    if (o->data == q->data && q->dtype == VDN_DT_F32) {
        qcopy.copy = vdn_xmalloc(sizeof(float) * (size_t)(j.rows * vdn_tensor_cols(q)));
        for (int64_t r = 0; r < j.rows; r++)
            memcpy(qcopy.copy + r * vdn_tensor_cols(q), cpu_frow(&j.q, r),
                   sizeof(float) * (size_t)vdn_tensor_cols(q));
        qcopy.p = qcopy.copy;
        qcopy.ld = vdn_tensor_cols(q);
        j.q = qcopy;
    }
    vdn_parallel_for((int)(hq * j.n_blocks), attn_block, &j);
    cpu_fmat_done(&j.q);
    cpu_fmat_done(&j.k);
    cpu_fmat_done(&j.v);
    return 0;
}
