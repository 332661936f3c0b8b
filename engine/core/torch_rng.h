/* torch.randn on the CPU, bit for bit: what `torch.randn(shape, generator=torch.Generator()
 * .manual_seed(seed), dtype=torch.float32)` returns. The video VAE's keyframe recipe samples its
 * posterior this way (diffusers' encode_vae_condition: randn_tensor with a fresh CPU generator
 * seeded 42, drawn on the CPU, then moved to the VAE's device), so reproducing the conditioning
 * latents means reproducing this draw.
 *
 * What torch does (ATen: CPUGeneratorImpl, core/MT19937RNGEngine.h, core/DistributionsHelper.h,
 * native/cpu/DistributionTemplates.h, native/cpu/avx_mathfun.h):
 *  - manual_seed(s) seeds the standard 32-bit MT19937 with s mod 2^32 (Knuth's initialisation);
 *  - a float32 tensor of n >= 16 contiguous elements is first filled with n uniforms
 *    (r & 0xffffff) * 2^-24, one 32-bit draw each, then Box-Muller turns each block of 16 in
 *    place: for j < 8, u1 = 1 - d[j], u2 = d[j + 8], radius = sqrt(-2 log u1),
 *    theta = 2 pi u2, d[j] = radius cos theta, d[j + 8] = radius sin theta; when 16 does not
 *    divide n, 16 fresh uniforms overwrite the last 16 values and that block is transformed again;
 *  - how log, sin and cos are evaluated depends on the kernel torch dispatched to (ATen's CPU
 *    capability, torch.backends.cpu.get_cpu_capability()): the AVX2 kernel uses avx_mathfun's
 *    Cephes polynomials (log256_ps, sincos256_ps) as GCC compiles them, with mul+add pairs fused,
 *    and it also runs on AVX-512 hosts (DistributionKernels.cpp registers normal_stub with
 *    REGISTER_NO_AVX512_DISPATCH, so the dispatcher takes the AVX2 kernel there): every x86-64
 *    GPU server; the DEFAULT kernel (no AVX2, or ATEN_CPU_CAPABILITY=default) calls the C
 *    library's logf/cosf/sinf, theta formed in double and rounded to float.
 * n < 16 takes another path (a double-precision Box-Muller with a cached second sample) that no
 * vdn draw needs: refused. */
#ifndef VDN_TORCH_RNG_H
#define VDN_TORCH_RNG_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    VDN_TORCH_RANDN_AVX2 = 0, /* AVX2 and AVX512 capability: avx_mathfun's polynomials, fused */
    VDN_TORCH_RANDN_SCALAR,   /* DEFAULT capability: libm logf, cosf, sinf */
} vdn_torch_randn_path;

/* The 32-bit Mersenne twister as at::mt19937 runs it. */
typedef struct {
    uint32_t state[624];
    int next;
} vdn_mt19937;

void vdn_mt19937_seed(vdn_mt19937 *g, uint64_t seed);
uint32_t vdn_mt19937_next(vdn_mt19937 *g);

/* out[n] = torch.randn(n) from a generator freshly seeded with seed (the same values for any
 * shape of n elements: torch fills the contiguous buffer in order). 0, or -1 with a message
 * when n < 16. */
int vdn_torch_randn(float *out, int64_t n, uint64_t seed, vdn_torch_randn_path path, char *err,
                    size_t errlen);

/* "scalar" / "avx2" <-> the path; -1 for another name. */
const char *vdn_torch_randn_path_name(vdn_torch_randn_path path);
int vdn_torch_randn_path_parse(const char *name, vdn_torch_randn_path *path);

#endif
