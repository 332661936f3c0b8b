/* The video decoder's pixel ops on the CPU (op_pixels.h), written for clarity: the float32
 * operations, in the order, of the host code vae/video_vae.c ran before they became ops (and of
 * the reference), so a decode gives the same bits either way. Planes run in parallel
 * (vdn_parallel_for); no plane's value depends on another's. */
#include <string.h>

#include "op_cpu.h"
#include "op_pixels.h"
#include "ops.h" /* vdn_parallel_for */

static inline float *row_f32(const vdn_tensor *t, int64_t r) {
    return (float *)t->data + r * t->ld;
}

/* the reference's _blend weights: position q of e: a (1 - q/e) + b (q/e), float32 */
static inline float blend1(float a, float b, int q, int e) {
    const float f = (float)q / (float)e;
    const float wa = 1.0f - f;
    const float u = a * wa, v = b * f;
    return u + v;
}

typedef struct {
    vdn_tensor *y;
    const vdn_tensor *x;
    int64_t stride;
    int T, Hl, Wl, C, pt, p;
} unpatch_job;

/* output plane (tile b, channel ch, frame f) */
static void unpatch_plane(void *ctx, int plane) {
    const unpatch_job *j = ctx;
    const int F = j->T * j->pt, p = j->p, W = j->Wl * p;
    const int f = plane % F, ch = plane / F % j->C, b = plane / F / j->C;
    const int t = f / j->pt, dt = f % j->pt;
    float *out = row_f32(j->y, plane);
    for (int y = 0; y < j->Hl; y++)
        for (int x = 0; x < j->Wl; x++) {
            const int64_t r = b * j->stride + ((int64_t)t * j->Hl + y) * j->Wl + x;
            for (int dy = 0; dy < p; dy++)
                for (int dx = 0; dx < p; dx++)
                    out[(int64_t)(y * p + dy) * W + x * p + dx] =
                        (float)cpu_at(j->x, r, ((ch * j->pt + dt) * p + dy) * p + dx);
        }
}

static int cpu_unpatchify(vdn_tensor *y, const vdn_tensor *x, int tiles, int64_t stride, int T,
                          int Hl, int Wl, int C, int pt, int p) {
    unpatch_job j = {y, x, stride, T, Hl, Wl, C, pt, p};
    vdn_parallel_for(tiles * C * T * pt, unpatch_plane, &j);
    return 0;
}

typedef struct {
    vdn_tensor *y;
    const vdn_tensor *tiles;
    const vdn_tile_grid *g;
    int64_t P;
} stitch_job;

/* plane q of every tile: the tiles' kept regions are disjoint, so each pixel is written once */
static void stitch_plane(void *ctx, int q) {
    const stitch_job *s = ctx;
    const vdn_tile_grid *g = s->g;
    const int th = g->th, tw = g->tw, W = g->x0[g->nx - 1] + tw;
    float *out = row_f32(s->y, q);
    for (int i = 0; i < g->ny; i++)
        for (int j = 0; j < g->nx; j++) {
            const float *src = row_f32(s->tiles, (int64_t)(i * g->nx + j) * s->P + q);
            const float *up =
                i > 0 ? row_f32(s->tiles, (int64_t)((i - 1) * g->nx + j) * s->P + q) : NULL;
            const float *left =
                j > 0 ? row_f32(s->tiles, (int64_t)(i * g->nx + j - 1) * s->P + q) : NULL;
            const int keep_h = th - (i < g->ny - 1 ? g->oy[i] : 0);
            const int keep_w = tw - (j < g->nx - 1 ? g->ox[j] : 0);
            const int eh = up ? g->oy[i - 1] : 0, ew = left ? g->ox[j - 1] : 0;
            for (int y = 0; y < keep_h; y++)
                for (int x = 0; x < keep_w; x++) {
                    float v = src[y * tw + x];
                    if (y < eh) v = blend1(up[(th - eh + y) * tw + x], v, y, eh);
                    if (x < ew) v = blend1(left[y * tw + tw - ew + x], v, x, ew);
                    out[(int64_t)(g->y0[i] + y) * W + g->x0[j] + x] = v;
                }
        }
}

static int cpu_tile_stitch(vdn_tensor *y, const vdn_tensor *tiles, const vdn_tile_grid *g) {
    stitch_job s = {y, tiles, g, vdn_tensor_rows(tiles) / ((int64_t)g->ny * g->nx)};
    vdn_parallel_for((int)s.P, stitch_plane, &s);
    return 0;
}

static int cpu_crossfade(vdn_tensor *x, const vdn_tensor *y) {
    const int64_t e = vdn_tensor_rows(x), n = vdn_tensor_cols(x);
    for (int64_t t = 0; t < e; t++) {
        float *a = row_f32(x, t);
        const float *b = row_f32(y, t);
        for (int64_t c = 0; c < n; c++)
            a[c] = blend1(a[c], b[c], (int)t, (int)e);
    }
    return 0;
}

typedef struct {
    vdn_tensor *y;
    const vdn_tensor *x;
    float scale, shift, lo, hi;
} ssc_job;

static void ssc_row(void *ctx, int r) {
    const ssc_job *j = ctx;
    const float *src = row_f32(j->x, r);
    float *dst = row_f32(j->y, r);
    for (int64_t c = 0; c < vdn_tensor_cols(j->x); c++) {
        const float s = src[c] * j->scale;
        const float v = s + j->shift;
        dst[c] = v < j->lo ? j->lo : v > j->hi ? j->hi : v;
    }
}

static int cpu_scale_shift_clamp(vdn_tensor *y, const vdn_tensor *x, double scale, double shift,
                                 double lo, double hi) {
    ssc_job j = {y, x, (float)scale, (float)shift, (float)lo, (float)hi};
    vdn_parallel_for((int)vdn_tensor_rows(x), ssc_row, &j);
    return 0;
}

const struct vdn_pixel_backend vdn_cpu_pixel_backend = {cpu_unpatchify, cpu_tile_stitch,
                                                        cpu_crossfade, cpu_scale_shift_clamp};
