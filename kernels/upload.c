/* vdn_upload: one checkpoint tensor to the device in the dtype the kernels want (upload.h). */
#include "upload.h"

#include "vdn_util.h"

const char *vdn_upload_dtype_name(vdn_dtype d) {
    static const char *names[VDN_DT_COUNT] = {"F32", "BF16", "F16", "I64", "I32", "U8",  "F64",
                                              "I16", "I8",   "U16", "U32", "U64", "BOOL"};
    return (int)d >= 0 && d < VDN_DT_COUNT ? names[d] : "?";
}

static size_t float_size(vdn_dtype d) {
    return d == VDN_DT_F32 ? 4 : (d == VDN_DT_BF16 || d == VDN_DT_F16) ? 2 : 0;
}

int vdn_upload(vdn_uploader *u, vdn_ckpt *ck, const char *name, int ndim, const int64_t *shape,
               vdn_dtype want, void *dst, char *err, size_t errlen) {
    if (want != VDN_DT_F32 && want != VDN_DT_BF16)
        return vdn_fail(err, errlen, "upload of %s: target dtype %s, expected F32 or BF16", name,
                        vdn_upload_dtype_name(want));
    vdn_dtype have = VDN_DT_COUNT;
    const void *src = vdn_ckpt_stored(ck, name, ndim, shape, &have, err, errlen);
    if (!src) return -1; /* err names the checkpoint and tensor */
    size_t hs = float_size(have);
    if (!hs) {
        vdn_ckpt_release(ck, name);
        return vdn_fail(err, errlen, "tensor \"%s\" is stored as %s, expected F32, BF16 or F16",
                        name, vdn_upload_dtype_name(have));
    }
    size_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= (size_t)shape[i];
    int rc = 0;
    if (n == 0) {
        /* nothing to send */
    } else if (have == want) {
        rc = u->to_device(u->ctx, dst, src, n * hs);
    } else {
        void *stage = u->staging(u->ctx, n * hs);
        rc = !stage || u->to_device(u->ctx, stage, src, n * hs) ||
             u->convert(u->ctx, dst, want, stage, have, n);
        u->n_converted += rc == 0;
    }
    vdn_ckpt_release(ck, name); /* the device holds it now: drop any host copy */
    if (rc)
        return vdn_fail(err, errlen, "upload of tensor \"%s\" (%zu x %s -> %s) failed", name, n,
                        vdn_upload_dtype_name(have), vdn_upload_dtype_name(want));
    u->bytes_sent += n * hs;
    u->n_tensors++;
    if (n * hs > u->max_tensor_b) u->max_tensor_b = n * hs;
    return 0;
}
