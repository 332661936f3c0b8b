/* Visible-key rules and per-tile key ranges of the softmax branch (see attn_tiles.h). */
#include "attn_tiles.h"

#include <stdlib.h>
#include <string.h>

int vdn_attn_rows_make(vdn_attn_rows *ar, int n_global, int frames, int S, int window, int anchors,
                       int chunk, int radius) {
    memset(ar, 0, sizeof *ar);
    if (n_global < 0 || frames < 0 || S <= 0 || chunk <= 0 || radius < 0) return -1;
    int n = n_global + frames * S;
    ar->rows = n;
    ar->lo = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    ar->hi = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (!ar->lo || !ar->hi) {
        vdn_attn_rows_free(ar);
        return -1;
    }
    if (!window) { /* dense: every row sees [0, n) through its own window */
        ar->head_end = 0;
        ar->tail_start = n;
        for (int r = 0; r < n; r++)
            ar->lo[r] = 0, ar->hi[r] = n;
        return 0;
    }
    ar->head_end = n_global + (anchors && frames > 0 ? S : 0);
    ar->tail_start = anchors && frames > 0 ? n_global + (frames - 1) * S : n;
    for (int r = 0; r < n_global; r++)
        ar->lo[r] = 0, ar->hi[r] = n;
    for (int f = 0; f < frames; f++) {
        int lo = 0, hi = n;
        if (!(anchors && (f == 0 || f == frames - 1))) {
            int c = f / chunk;
            int flo = (c - radius) * chunk, fhi = (c + radius + 1) * chunk - 1;
            if (flo < 0) flo = 0;
            if (fhi > frames - 1) fhi = frames - 1;
            lo = n_global + flo * S;
            hi = n_global + (fhi + 1) * S;
        }
        for (int s = 0; s < S; s++)
            ar->lo[n_global + f * S + s] = lo, ar->hi[n_global + f * S + s] = hi;
    }
    return 0;
}

void vdn_attn_rows_free(vdn_attn_rows *ar) {
    free(ar->lo);
    free(ar->hi);
    ar->lo = ar->hi = NULL;
}

int *vdn_attn_tiles_make(const vdn_attn_rows *ar, int bm, int *n_tiles) {
    int nt = (ar->rows + bm - 1) / bm;
    int *t = calloc((size_t)(nt > 0 ? nt : 1) * VDN_TILE_INTS, sizeof(int));
    if (!t) return NULL;
    for (int i = 0; i < nt; i++) {
        int r0 = i * bm, r1 = r0 + bm < ar->rows ? r0 + bm : ar->rows;
        int lo = ar->lo[r0], hi = ar->hi[r0], mixed = 0;
        for (int r = r0; r < r1; r++) {
            if (ar->lo[r] != ar->lo[r0] || ar->hi[r] != ar->hi[r0]) mixed = 1;
            if (ar->lo[r] < lo) lo = ar->lo[r];
            if (ar->hi[r] > hi) hi = ar->hi[r];
        }
        /* Windows of consecutive rows overlap or touch, so their union is [lo, hi). */
        int cand[3][2] = {{0, ar->head_end}, {lo, hi}, {ar->tail_start, ar->rows}};
        int *o = t + (size_t)i * VDN_TILE_INTS;
        int n = 0;
        for (int c = 0; c < 3; c++) {
            int s = cand[c][0], e = cand[c][1];
            if (e <= s) continue;
            if (n > 0 && s <= o[2 + 2 * (n - 1) + 1]) { /* sorted by start: merge */
                if (e > o[2 + 2 * (n - 1) + 1]) o[2 + 2 * (n - 1) + 1] = e;
                continue;
            }
            o[2 + 2 * n] = s;
            o[2 + 2 * n + 1] = e;
            n++;
        }
        o[0] = n;
        o[1] = mixed;
    }
    *n_tiles = nt;
    return t;
}

double vdn_attn_rows_pairs(const vdn_attn_rows *ar) {
    double pairs = 0;
    int n = ar->rows;
    for (int q = 0; q < n; q++) {
        int lo = ar->lo[q], hi = ar->hi[q];
        /* |[0,he) u [lo,hi) u [ts,n)| */
        int a = ar->head_end, b = ar->tail_start;
        long cnt = a + (n - b);
        int l = lo > a ? lo : a, h = hi < b ? hi : b;
        if (h > l) cnt += h - l;
        if (a > b) cnt = n; /* overlapping head and tail cover everything */
        pairs += (double)cnt;
    }
    return pairs;
}
