/* Front end of the video decoder's pixel ops (op_pixels.h): shape and dtype checks, then the
 * device's table. */
#include "op_pixels.h"
#include "op_check.h"
#include "op_profile.h"

#define PIXEL_TABLE(d, op)                                                                         \
    const struct vdn_pixel_backend *pt_ = (d)->be->pixels;                                         \
    if (vdn_chk_family(d, op, pt_)) return -1

static int chk_f32(vdn_dev *d, const char *op, const char *name, const vdn_tensor *t, int64_t rows,
                   int64_t cols) {
    return vdn_chk_dtype(d, op, name, t, VDN_DT_F32) || vdn_chk_2d(d, op, name, t, rows, cols) ? -1
                                                                                               : 0;
}

int vdn_op_unpatchify(vdn_tensor *y, const vdn_tensor *x, int tiles, int64_t stride, int T, int Hl,
                      int Wl, int C, int pt, int p) {
    if (!y || !x) return -1;
    vdn_dev *d = y->dev;
    const char *op = "unpatchify";
    PIXEL_TABLE(d, op);
    const int64_t N = (int64_t)T * Hl * Wl;
    if (tiles < 1 || T < 1 || Hl < 1 || Wl < 1 || C < 1 || pt < 1 || p < 1 || stride < N)
        return vdn_dev_fail(d,
                            "op unpatchify: %d tiles of %dx%dx%d tokens, %d channels, patch "
                            "%dx%dx%d, tile stride %lld rows (expected all >= 1 and the stride "
                            ">= the %lld tokens of a tile)",
                            tiles, T, Hl, Wl, C, pt, p, p, (long long)stride, (long long)N);
    const int64_t need = (tiles - 1) * stride + N;
    if (vdn_chk_float(d, op, "x", x)) return -1;
    if (vdn_tensor_rows(x) < need || vdn_tensor_cols(x) != (int64_t)C * pt * p * p)
        return vdn_dev_fail(d,
                            "op unpatchify: x is [%lld, %lld], expected at least %lld rows of "
                            "%lld columns",
                            (long long)vdn_tensor_rows(x), (long long)vdn_tensor_cols(x),
                            (long long)need, (long long)C * pt * p * p);
    if (chk_f32(d, op, "y", y, (int64_t)tiles * C * T * pt, (int64_t)Hl * p * Wl * p)) return -1;
    return VDN_PROF(d, "unpatchify", x, y, 0,
                    pt_->unpatchify(y, x, tiles, stride, T, Hl, Wl, C, pt, p));
}

int vdn_op_tile_stitch(vdn_tensor *y, const vdn_tensor *tiles, const vdn_tile_grid *g) {
    if (!y || !tiles || !g) return -1;
    vdn_dev *d = y->dev;
    const char *op = "tile_stitch";
    PIXEL_TABLE(d, op);
    if (g->ny < 1 || g->nx < 1 || g->ny > VDN_TILE_GRID_MAX || g->nx > VDN_TILE_GRID_MAX ||
        g->th < 1 || g->tw < 1)
        return vdn_dev_fail(d,
                            "op tile_stitch: a grid of %dx%d tiles of %dx%d (expected 1..%d "
                            "tiles a side, sizes >= 1)",
                            g->nx, g->ny, g->tw, g->th, VDN_TILE_GRID_MAX);
    /* each tile starts inside the frame, after the previous one, and overlaps the next by what
     * the grid says, never by more than a tile */
    for (int a = 0; a < 2; a++) {
        const int n = a ? g->nx : g->ny, len = a ? g->tw : g->th;
        const int *s = a ? g->x0 : g->y0, *o = a ? g->ox : g->oy;
        for (int i = 0; i < n; i++)
            if ((i == 0 && s[0] != 0) ||
                (i > 0 && (o[i - 1] < 0 || o[i - 1] > len || s[i] != s[i - 1] + len - o[i - 1])))
                return vdn_dev_fail(d,
                                    "op tile_stitch: %s tile %d starts at %d with overlap %d "
                                    "(expected 0 for the first, else the previous start + %d - "
                                    "the overlap, 0 <= overlap <= %d)",
                                    a ? "column" : "row", i, s[i], i > 0 ? o[i - 1] : 0, len, len);
    }
    const int64_t n_tiles = (int64_t)g->ny * g->nx, rows = vdn_tensor_rows(tiles);
    if (rows < n_tiles || rows % n_tiles)
        return vdn_dev_fail(d,
                            "op tile_stitch: tiles has %lld rows, expected %lld tiles x the "
                            "planes of each",
                            (long long)rows, (long long)n_tiles);
    const int64_t P = rows / n_tiles;
    const int64_t H = g->y0[g->ny - 1] + g->th, W = g->x0[g->nx - 1] + g->tw;
    if (chk_f32(d, op, "tiles", tiles, rows, (int64_t)g->th * g->tw) ||
        chk_f32(d, op, "y", y, P, H * W))
        return -1;
    return VDN_PROF(d, "tile_stitch", tiles, y, 0, pt_->tile_stitch(y, tiles, g));
}

int vdn_op_crossfade(vdn_tensor *x, const vdn_tensor *y) {
    if (!x || !y) return -1;
    vdn_dev *d = x->dev;
    const char *op = "crossfade";
    PIXEL_TABLE(d, op);
    if (chk_f32(d, op, "x", x, vdn_tensor_rows(x), vdn_tensor_cols(x)) ||
        chk_f32(d, op, "y", y, vdn_tensor_rows(x), vdn_tensor_cols(x)))
        return -1;
    return VDN_PROF(d, "crossfade", x, y, 0, pt_->crossfade(x, y));
}

int vdn_op_scale_shift_clamp(vdn_tensor *y, const vdn_tensor *x, double scale, double shift,
                             double lo, double hi) {
    if (!y || !x) return -1;
    vdn_dev *d = y->dev;
    const char *op = "scale_shift_clamp";
    PIXEL_TABLE(d, op);
    if (!(lo <= hi))
        return vdn_dev_fail(d, "op scale_shift_clamp: clamp to [%g, %g] (expected lo <= hi)", lo,
                            hi);
    if (chk_f32(d, op, "x", x, vdn_tensor_rows(x), vdn_tensor_cols(x)) ||
        chk_f32(d, op, "y", y, vdn_tensor_rows(x), vdn_tensor_cols(x)))
        return -1;
    return VDN_PROF(d, "scale_shift_clamp", x, NULL, 0,
                    pt_->scale_shift_clamp(y, x, scale, shift, lo, hi));
}
