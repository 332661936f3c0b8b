/* Which keys each query row of the softmax branch sees, as plain integers a kernel can test, and
 * per query tile the list of key ranges to visit. Keys visible to query row q:
 *
 *   k < head_end  ||  k >= tail_start  ||  lo[q] <= k < hi[q]
 *
 * head_end covers the global rows (text, conditioning, audio) plus anchor frame 0; tail_start the
 * anchor frame F-1; [lo, hi) the row's own chunk window. Dense rows (globals, anchor frames, or
 * every row of dense attention) have [lo, hi) = [0, rows). No mask is ever materialised. */
#ifndef VDN_ATTN_TILES_H
#define VDN_ATTN_TILES_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int rows;       /* N */
    int head_end;   /* keys [0, head_end) seen by all */
    int tail_start; /* keys [tail_start, N) seen by all */
    int *lo, *hi;   /* per query row [lo, hi) */
} vdn_attn_rows;

/* The plan of a packed sequence: n_global rows first, then frames*S video rows. window = 0 gives
 * dense attention. Allocates lo/hi (free with vdn_attn_rows_free). */
int vdn_attn_rows_make(vdn_attn_rows *ar, int n_global, int frames, int S, int window, int anchors,
                       int chunk, int radius);
void vdn_attn_rows_free(vdn_attn_rows *ar);
static inline int vdn_attn_rows_visible(const vdn_attn_rows *ar, int q, int k) {
    return k < ar->head_end || k >= ar->tail_start || (k >= ar->lo[q] && k < ar->hi[q]);
}

/* Per query tile of `bm` rows: VDN_TILE_INTS ints {n_ranges, mixed, s0, e0, s1, e1, s2, e2}:
 * the merged union of the visible keys of the tile's rows, and mixed = 1 when its rows do not all
 * see the same keys (then the kernel tests each element). tiles = ceil(rows / bm). */
#define VDN_TILE_INTS 8
int *vdn_attn_tiles_make(const vdn_attn_rows *ar, int bm, int *n_tiles);
/* Number of (query, key) pairs kept, for FLOP counts and density. */
double vdn_attn_rows_pairs(const vdn_attn_rows *ar);

#ifdef __cplusplus
}
#endif
#endif
