/* The video decoder's pixel ops, a model family with its own table (struct vdn_pixel_backend,
 * pointed to by vdn_dev_backend.pixels): the ViT's proj_out rows become pixels of tiles
 * (unpatchify), the tiles of a chunk become its frames (the linear blends of the reference's
 * _stitch_tiles), chunks cross-fade, and the frames are de-normalised and clamped, all on the
 * device, so that a decode reads only its final frames back (vae/video_vae.c). The CPU
 * implementation is engine/op_cpu_pixels.c (the float32 operations of the host code they replace,
 * in its order: the same bits); engine/op_pixels.c checks every call.
 *
 * Frames are float32 planes: a (C, F, H, W) block is the 2-D tensor [C*F, H*W] (row ch*F + f). */
#ifndef VDN_OP_PIXELS_H
#define VDN_OP_PIXELS_H

#include "op.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Unpatchify `tiles` tiles of T x Hl x Wl tokens: tile b's token (t, y, x) is row
 * b*stride + (t*Hl + y)*Wl + x of x, and its column ((ch*pt + dt)*p + dy)*p + dx is pixel
 * (ch, t*pt + dt, y*p + dy, x*p + dx) of the tile. x [rows, C*pt*p*p] of a float dtype with
 * rows >= (tiles - 1)*stride + T*Hl*Wl; y float32 [tiles*C*T*pt, Hl*p*Wl*p] (tile b's plane
 * (ch, f) is row (b*C + ch)*T*pt + f). */
int vdn_op_unpatchify(vdn_tensor *y, const vdn_tensor *x, int tiles, int64_t stride, int T, int Hl,
                      int Wl, int C, int pt, int p);

/* A grid of equal tiles over one frame (all sizes in pixels): tile (i, j) starts at (y0[i],
 * x0[j]) and is th x tw; oy[i] (ox[j]) is its overlap with the tile below (to its right). */
#define VDN_TILE_GRID_MAX 64
typedef struct {
    int ny, nx, th, tw;
    int y0[VDN_TILE_GRID_MAX], x0[VDN_TILE_GRID_MAX];
    int oy[VDN_TILE_GRID_MAX], ox[VDN_TILE_GRID_MAX];
} vdn_tile_grid;

/* Stitch tiles into frames as the reference's _stitch_tiles: in tile (i, j)'s kept rows
 * [0, th - oy[i]) and columns [0, tw - ox[j]) (the last row / column of tiles keeps all), a
 * pixel is first blended with the tile above over its first e = oy[i-1] rows
 * (a (1 - y/e) + b (y/e), a the tile above, float32), then with the tile to its left (the raw
 * tile, not its blend) over its first ox[j-1] columns, and lands at (y0[i] + y, x0[j] + x).
 * tiles float32 [ny*nx*P, th*tw] (tile i*nx + j's plane q is row (i*nx + j)*P + q); y float32
 * [P, H*W] with H = y0[ny-1] + th, W = x0[nx-1] + tw. */
int vdn_op_tile_stitch(vdn_tensor *y, const vdn_tensor *tiles, const vdn_tile_grid *g);

/* A linear cross-fade over rows: x[t, :] = x[t, :] (1 - t/e) + y[t, :] (t/e), e = x's rows
 * (float32, the reference's _blend order). x, y float32 [e, n]. */
int vdn_op_crossfade(vdn_tensor *x, const vdn_tensor *y);

/* y = min(max(x*scale + shift, lo), hi) in float32 (the product rounded, then the sum). x, y
 * float32 of one shape; in place ok. */
int vdn_op_scale_shift_clamp(vdn_tensor *y, const vdn_tensor *x, double scale, double shift,
                             double lo, double hi);

/* ---- the table a backend implements (calls already checked) ---- */
struct vdn_pixel_backend {
    int (*unpatchify)(vdn_tensor *y, const vdn_tensor *x, int tiles, int64_t stride, int T, int Hl,
                      int Wl, int C, int pt, int p);
    int (*tile_stitch)(vdn_tensor *y, const vdn_tensor *tiles, const vdn_tile_grid *g);
    int (*crossfade)(vdn_tensor *x, const vdn_tensor *y);
    int (*scale_shift_clamp)(vdn_tensor *y, const vdn_tensor *x, double scale, double shift,
                             double lo, double hi);
};

#ifdef __cplusplus
}
#endif
#endif
