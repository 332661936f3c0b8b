/* CPU twin of the block-sparse flash-attention kernel: the exact softmax over the keys each row
 * sees (attn_tiles.h), in fp32, one row and head at a time. */
#include <math.h>
#include <stdlib.h>

#include "twin.h"
#include "vdn_util.h"

void twin_attention(const float *q, const float *k, const float *v, int ld_qkv, int rows, int heads,
                    int hd, const vdn_attn_rows *ar, float scale, const float *gate, float *out,
                    int ld_o) {
    float *s = vdn_xmalloc(sizeof(float) * (size_t)rows);
    float *acc = vdn_xmalloc(sizeof(float) * (size_t)hd);
    for (int h = 0; h < heads; h++)
        for (int r = 0; r < rows; r++) {
            const float *qr = q + (size_t)r * ld_qkv + (size_t)h * hd;
            float m = -INFINITY;
            for (int j = 0; j < rows; j++) {
                if (!vdn_attn_rows_visible(ar, r, j)) continue;
                const float *kj = k + (size_t)j * ld_qkv + (size_t)h * hd;
                float d = 0.f;
                for (int c = 0; c < hd; c++)
                    d += qr[c] * kj[c];
                s[j] = d * scale;
                if (s[j] > m) m = s[j];
            }
            float l = 0.f;
            for (int c = 0; c < hd; c++)
                acc[c] = 0.f;
            for (int j = 0; j < rows; j++) {
                if (!vdn_attn_rows_visible(ar, r, j)) continue;
                float p = expf(s[j] - m);
                l += p;
                const float *vj = v + (size_t)j * ld_qkv + (size_t)h * hd;
                for (int c = 0; c < hd; c++)
                    acc[c] += p * vj[c];
            }
            float g = gate ? gate[(size_t)r * heads + h] : 1.f;
            float *o = out + (size_t)r * ld_o + (size_t)h * hd;
            for (int c = 0; c < hd; c++)
                o[c] = vdn_round_bf16(acc[c] / l * g);
        }
    free(s);
    free(acc);
}
