/* Weight upload from the checkpoint's stored dtype (ckpt.h vdn_ckpt_stored), so that a backend
 * never holds a float32 copy of the model on the host: real H3 is ~66 GB of bf16, which float32
 * staging would double to ~132 GB of host RAM. Each tensor goes to the device as it is stored
 * (zero-copy from the mapping when it needs no conversion or fold), is converted there when the
 * kernels want another dtype, and its host copies are dropped (vdn_ckpt_release) right after.
 *
 * The device side is two callbacks, so the dtype handling is tested on the CPU with a fake device
 * (kernels/test/test_upload.c) and the CUDA backend plugs in cudaMemcpy and a conversion kernel. */
#ifndef VDN_UPLOAD_H
#define VDN_UPLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"

typedef struct {
    void *ctx;
    /* bytes from host src (possibly unaligned: a safetensors mapping) to device dst */
    int (*to_device)(void *ctx, void *dst, const void *src, size_t bytes);
    /* n values: device src in dtype `have` -> device dst in dtype `want` (F32/BF16/F16 in,
     * F32/BF16 out), rounding to nearest even like vdn_f32_to_bf16 */
    int (*convert)(void *ctx, void *dst, vdn_dtype want, const void *src, vdn_dtype have, size_t n);
    /* a device buffer of at least `bytes` for a tensor that needs converting (kept by the
     * caller between uploads, grown on demand) */
    void *(*staging)(void *ctx, size_t bytes);
    /* statistics, for logs and tests */
    uint64_t bytes_sent;   /* host -> device bytes */
    uint64_t n_converted;  /* tensors converted on the device */
    uint64_t n_tensors;    /* tensors uploaded */
    uint64_t max_tensor_b; /* largest stored tensor, bytes */
} vdn_uploader;

/* Upload checkpoint tensor `name` (shape-checked like vdn_ckpt_f32: ndim/shape must match) to
 * device memory dst as `want` (VDN_DT_F32 or VDN_DT_BF16), then release its host copies.
 * Returns 0, or -1 with an error naming the checkpoint, the tensor and what was expected. */
int vdn_upload(vdn_uploader *u, vdn_ckpt *ck, const char *name, int ndim, const int64_t *shape,
               vdn_dtype want, void *dst, char *err, size_t errlen);

/* Name of a dtype as safetensors writes it ("F32", "BF16", ...), for messages. */
const char *vdn_upload_dtype_name(vdn_dtype d);

#endif
