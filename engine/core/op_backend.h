/* What a backend of the op layer implements (engine/op.h is what models call).
 *
 * engine/op.c is the front end: it checks shapes, dtypes and views with the same messages for
 * every backend, then calls the table below. A backend sees only checked calls; it reports its
 * own failures (a CUDA error, out of memory) with vdn_dev_fault, typed, so that the worker can
 * tell a failing GPU from a bad request (refusals of calls it cannot take stay vdn_dev_fail).
 * The CPU table is engine/op_cpu*.c; the CUDA table is kernels/op_cuda*.cu, registered like the
 * old "cuda" model backend (a weak symbol, so engine/ never depends on CUDA).
 *
 * Adding an op: its declaration in op.h (or a model family's op_*.h), its check in op.c, a
 * member here, the CPU implementation, the CUDA implementation, and its case in
 * kernels/test/test_backend_ops.c (docs/engine.md, "Adding an op"). */
#ifndef VDN_OP_BACKEND_H
#define VDN_OP_BACKEND_H

#include <stdarg.h>

#include "op.h"

#ifdef __cplusplus
extern "C" {
#endif

struct vdn_attn_mask {
    vdn_dev *dev;
    int kind; /* VDN_MASK_DENSE, CAUSAL, ROWS */
    int rows, keys, head_end, tail_start;
    int *lo, *hi;  /* host copies (ROWS) */
    void *be_data; /* the backend's own form (device lo/hi, tile lists) */
};
enum { VDN_MASK_DENSE = 0, VDN_MASK_CAUSAL, VDN_MASK_ROWS };

struct vdn_dev_backend {
    const char *name; /* "cpu", "cuda" */
    int (*available)(char *err, size_t errlen);
    /* opens the backend's state into d->be_state */
    int (*open)(vdn_dev *d, int index, int threads);
    void (*close)(vdn_dev *d);
    int (*sync)(vdn_dev *d);

    void *(*alloc)(vdn_dev *d, size_t bytes);
    void (*free)(vdn_dev *d, void *p);
    int (*set)(vdn_tensor *t, const void *host, vdn_dtype host_dt);
    int (*get)(const vdn_tensor *t, void *host, vdn_dtype host_dt); /* F32, F64, I32 or raw */
    int (*copy)(vdn_tensor *dst, const vdn_tensor *src);
    int (*fill)(vdn_tensor *t, double value);

    int (*mask_init)(vdn_attn_mask *m); /* fill be_data from the host fields */
    void (*mask_free)(vdn_attn_mask *m);

    int (*linear)(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                  vdn_act act, int accumulate);
    int (*matmul_bt)(vdn_tensor *y, const vdn_tensor *a, const vdn_tensor *b, int accumulate);
    int (*act)(vdn_tensor *y, const vdn_tensor *x, vdn_act act);
    int (*swiglu)(vdn_tensor *y, const vdn_tensor *value, const vdn_tensor *gate);
    int (*add)(vdn_tensor *x, const vdn_tensor *y);
    int (*scale)(vdn_tensor *x, double s);
    int (*gate_residual)(vdn_tensor *x, const vdn_tensor *y, const vdn_tensor *gate,
                         const vdn_tensor *idx);
    int (*mul_groups)(vdn_tensor *x, const vdn_tensor *s, int group);
    int (*rmsnorm)(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, double eps,
                   const vdn_tensor *shift, const vdn_tensor *scale, const vdn_tensor *idx);
    int (*layernorm)(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                     double eps);
    int (*qk_norm_rope)(vdn_tensor *q_out, vdn_tensor *k_out, const vdn_tensor *q_in,
                        const vdn_tensor *k_in, const vdn_tensor *wq, const vdn_tensor *wk,
                        int head_dim, double eps, const vdn_rope *rope);
    int (*attention)(vdn_tensor *o, const vdn_tensor *q, const vdn_tensor *k, const vdn_tensor *v,
                     int head_dim, double scale, const vdn_attn_mask *mask, const vdn_tensor *gate);
    int (*time_features)(vdn_tensor *e, const vdn_tensor *t);
    int (*euler)(vdn_tensor *x, const vdn_tensor *v, double sigma, double sigma_next);

    /* Model-family ops live in tables of their own, declared beside their ops (op_vda.h: the
     * VDN linear branch; op_conv.h: the decoders' convolutions; op_comm.h: collectives). NULL: the
     * backend has none of that family, and the front end fails with "op X: not implemented on
     * backend Y". */
    const struct vdn_vda_backend *vda;
    const struct vdn_conv_backend *conv;

    /* The dtype the backend keeps activations and the models' big matrices in (CPU: F32, the
     * zero default; CUDA: BF16). Models allocate with vdn_dev_act_dtype. */
    vdn_dtype act_dtype;

    /* op.h's vdn_op_quantize_rows (after act_dtype so positional tables keep their order; NULL:
     * "not implemented on backend Y") */
    int (*quantize_rows)(vdn_tensor *q, vdn_tensor *scale, const vdn_tensor *x);

    /* op.h's vdn_dev_mem_info (NULL: the backend cannot say) */
    int (*mem_info)(vdn_dev *d, size_t *free_bytes, size_t *total_bytes);

    /* op_profile.c's timers (all NULL: no profiles on this backend). A timer marks a point in
     * d's work order (timer_mark); timer_ms is the time between two marks, valid once d was
     * synchronised after both. */
    void *(*timer_new)(vdn_dev *d);
    int (*timer_mark)(vdn_dev *d, void *timer);
    double (*timer_ms)(vdn_dev *d, const void *from, const void *to);
    void (*timer_free)(vdn_dev *d, void *timer);

    /* op.h's lanes, after the front end's checks; the front end keeps d->lane (where ops go,
     * which the backend reads) and sets it after these return 0. fork: lane 1 waits for lane 0's
     * queued work; join: lane 0 waits for lane 1's. NULL: every op completes before it returns
     * (the CPU), so there is nothing to wait for. */
    int (*lane_fork)(vdn_dev *d);
    int (*lane_join)(vdn_dev *d);

    /* op_pixels.h: the video decoder's pixel ops (last, so positional tables keep their order;
     * NULL: "not implemented on backend Y") */
    const struct vdn_pixel_backend *pixels;

    /* op.h's fused fp8 producers (last, so positional tables keep their order; NULL: "not
     * implemented on backend Y") */
    int (*rmsnorm_quant)(vdn_tensor *q, vdn_tensor *scale, const vdn_tensor *x, const vdn_tensor *w,
                         double eps);
    int (*linear_swiglu_quant)(vdn_tensor *q, vdn_tensor *scale, const vdn_tensor *x,
                               const vdn_tensor *w, const vdn_tensor *b);

    /* comm.h: the communicator that moves data between this backend's devices when one clip
     * runs over several (NCCL for cuda, where the build found it). NULL: none, so a group of
     * these devices cannot render one clip together (the CPU's ranks use the in-process one).
     * comm_unique_id fills VDN_COMM_ID_BYTES that every rank's comm_open then joins; comm_name
     * is what run records call it ("nccl"). */
    const char *comm_name;
    int (*comm_unique_id)(void *id, char *err, size_t errlen);
    struct vdn_comm *(*comm_open)(vdn_dev *dev, int rank, int size, const void *id, char *err,
                                  size_t errlen);
};

typedef struct vdn_prof vdn_prof;

struct vdn_dev {
    const vdn_dev_backend *be;
    void *be_state;
    int index;
    char name[32];
    char err[512];
    size_t mem_in_use, mem_peak;
    int fault;             /* vdn_dev_fault_kind: the worst backend failure since the last clear */
    struct vdn_prof *prof; /* op_profile.h: the profile being recorded, or NULL */
    int lane;              /* where ops go now (op.h's lanes) */
    int forked;            /* between a vdn_dev_fork and its vdn_dev_join */
};

/* Registry: the CPU table is built in; other backends (kernels/: "cuda") are registered by the
 * program before its first vdn_dev_open (kernels/backends.h: vdn_backends_register), so the
 * core never names them. */
int vdn_dev_backend_register(const vdn_dev_backend *be);
const vdn_dev_backend *vdn_dev_backend_find(const char *name);
extern const vdn_dev_backend vdn_cpu_dev_backend;

#ifdef __cplusplus
}
#endif
#endif
