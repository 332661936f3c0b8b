/* MiniMaxH3Scheduler (spec 4): rectified-flow Euler, eta 0, data-ward velocity, float32, and the
 * seeded initial-noise generator. */
#ifndef VDN_SAMPLER_H
#define VDN_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

/* torch.linspace(start, end, n, dtype=float32): step in float32, the first half counted from
 * start and the second half from end, as ATen's CPU kernel does. */
void vdn_linspace_f32(float *out, float start, float end, int n);

/* Sigma grid of n_points (= NFE + 1) points: base = linspace(1, 0, n) (float32),
 * sigma = s*base / (1 + (s-1)*base), then unique_consecutive. Returns the number of points kept. */
int vdn_sigma_grid(float *sigma, int n_points, float shift);

/* One Euler step on n values: x0 = x + (1 - t) v with t = 1 - sigma the timestep the model saw,
 * then x <- r x + (1 - r) x0 with r = sigma_next / sigma from the grid; all float32. x and v
 * must not overlap. Large n is split over vdn_parallel_for's threads (same bits). */
void vdn_euler_step(float *x, const float *v, size_t n, float t, float sigma, float sigma_next);

/* Initial noise: standard normal values from a seeded xoshiro256** stream (splitmix64 seeding),
 * Box-Muller in float64, rounded to float32. It does NOT match torch's generator; pass
 * --noise FILE to compare bit-for-bit with another implementation. Draw order per request:
 * each keyframe (24*1*h*w) first, then video (24*F*H*W, C-order), then audio (2La*32 rows).
 * Values are drawn pair by pair (cos half, then sin half, which may carry into the next call);
 * the transform of large blocks runs on vdn_parallel_for's threads with the same result. */
typedef struct {
    uint64_t s[4];
    int has_spare;
    double spare;
} vdn_rng;
void vdn_rng_seed(vdn_rng *r, uint64_t seed);
void vdn_rng_normal(vdn_rng *r, float *out, size_t n);

/* Noise from a safetensors file (vdn render --noise): noise_video (C, F, h, w) and noise_audio
 * (2*La, ach) are required, noise_keyframes (nk, C, 1, h, w) optional (when absent, kf is left as
 * it is: the seeded draw). Any float dtype; shapes must match exactly. -1 with a message naming
 * the file, the tensor and the expected shape. *have_kf (optional) says whether keyframe noise was
 * read. */
struct vdn_st_file;
int vdn_noise_read(const struct vdn_st_file *f, int C, int F, int h, int w, int La, int ach, int nk,
                   float *video, float *audio, float *kf, int *have_kf, char *err, size_t errlen);

#endif
