/* vdn_engine_*: a checkpoint and the DiT's weights on one op-layer device, opened once,
 * rendering many requests (engine.h). Also the official frame arithmetic. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "ckpt.h"
#include "engine.h"
#include "engine_internal.h"
#include "comm.h"
#include "op_backend.h"
#include "ops.h"
#include "vdn_util.h"

/* ---- engine ---- */

vdn_precision vdn_engine_precision(const vdn_engine *eng) {
    return eng->precision;
}
/* ranks 1..P-1 of --ranks P: devices of the same backend on the same memory */
static int open_ranks(vdn_engine *eng, const char *name, int index, int ranks, char *err,
                      size_t errlen) {
    eng->ranks = ranks < 1 ? 1 : ranks;
    eng->rank_dev[0] = eng->dev;
    for (int r = 1; r < eng->ranks; r++)
        if (!(eng->rank_dev[r] = vdn_dev_open(name, index, 1, err, errlen))) return -1;
    if (eng->ranks > 1)
        VDN_INFO("%s: the forward sharded over %d in-process ranks", vdn_dev_name(eng->dev),
                 eng->ranks);
    return 0;
}

static int open_op_layer(vdn_engine *eng, const char *name, const vdn_engine_opts *o,
                         const vdn_weight_source *src, char *err, size_t errlen) {
    /* device: the GPU (an ordinal among the visible ones); the CPU has one */
    const int index = strcmp(name, "cpu") && o->device > 0 ? o->device : 0;
    eng->dev = vdn_dev_open(name, index, o->threads > 0 ? o->threads : 2, err, errlen);
    if (!eng->dev) return -1;
    eng->precision = o->precision;
    eng->dit = o->dit;
    if (vdn_dit_weights_load_as(&eng->w, eng->dev, &eng->cfg, src,
                                eng->precision == VDN_PRECISION_FP8, err, errlen) != 0) {
        vdn_dev_close(eng->dev);
        eng->dev = NULL;
        return -1;
    }
    if (eng->precision == VDN_PRECISION_FP8) {
        VDN_INFO("%s: fp8 precision: %d Linears quantised to e4m3 with row scales",
                 vdn_dev_name(eng->dev), eng->w.n_fp8);
    }
    if (open_ranks(eng, name, index, o->ranks, err, errlen) != 0) {
        for (int r = 1; r < eng->ranks; r++)
            vdn_dev_close(eng->rank_dev[r]);
        vdn_dit_weights_free(&eng->w);
        vdn_dev_close(eng->dev);
        eng->dev = NULL;
        return -1;
    }
    size_t bytes;
    vdn_dev_memory(eng->dev, &bytes, NULL);
    VDN_INFO("%s: DiT weights on the device (%.1f MB)", vdn_dev_name(eng->dev), bytes / 1e6);
    return 0;
}

/* Which device renders: "cuda" when its backend is linked in (kernels/op_cuda*.cu, through op.c's
 * weak symbol, or a test's stand-in registered under the name) and available, else "cpu". */
static const char *pick_device(vdn_backend_kind backend, char *err, size_t errlen) {
    char why[VDN_ERR_LEN] = "";
    if (backend == VDN_BACKEND_CUDA || backend == VDN_BACKEND_AUTO) {
        const vdn_dev_backend *db = vdn_dev_backend_find("cuda");
        if (db && (!db->available || db->available(why, sizeof why))) return "cuda";
        if (backend == VDN_BACKEND_CUDA) {
            vdn_fail(err, errlen, "backend cuda: %s",
                     why[0] ? why : "not built into this binary (no CUDA toolkit at build time)");
            return NULL;
        }
        if (why[0]) VDN_INFO("cuda backend unavailable (%s); using cpu", why);
    }
    return "cpu";
}

/* host work (noise, Euler on the CPU): the cores a GPU leaves idle */
static void set_host_threads(const char *dev_name, int threads) {
    if (threads > 0)
        vdn_ops_set_threads(threads);
    else if (strcmp(dev_name, "cpu") != 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        vdn_ops_set_threads(cores < 1 ? 1 : cores > 8 ? 8 : (int)cores);
    }
}

/* NULL = the defaults; ranks and precision checked here, so every caller gets the same words */
static int check_opts(const vdn_engine_opts *in, vdn_engine_opts *o, char *err, size_t errlen) {
    static const vdn_engine_opts defaults = {0};
    *o = in ? *in : defaults;
    if (o->ranks < 0 || o->ranks > 64)
        return vdn_fail(err, errlen, "engine: ranks %d: expected 1..64", o->ranks);
    if (o->threads < 0 || o->threads > 64)
        return vdn_fail(err, errlen, "engine: threads %d: expected 0 (default) or 1..64",
                        o->threads);
    if (o->precision != VDN_PRECISION_BF16 && o->precision != VDN_PRECISION_FP8)
        return vdn_fail(err, errlen, "engine: precision %d: expected bf16 or fp8",
                        (int)o->precision);
    if (o->dit.chunk_rows < 0 || o->dit.vda_heads < 0)
        return vdn_fail(err, errlen,
                        "engine: dit.chunk_rows %d, dit.vda_heads %d: expected 0 (default) or a "
                        "positive count",
                        o->dit.chunk_rows, o->dit.vda_heads);
    if (o->dit.vda_one_lane != 0 && o->dit.vda_one_lane != 1)
        return vdn_fail(err, errlen, "engine: dit.vda_one_lane %d: expected 0 or 1",
                        o->dit.vda_one_lane);
    return 0;
}

vdn_engine *vdn_engine_open(const char *checkpoint_dir, const char *const *extra_adapters,
                            int n_extra, const vdn_engine_opts *opts, char *err, size_t errlen) {
    vdn_engine_opts o;
    if (check_opts(opts, &o, err, errlen)) return NULL;
    const char *dev_name = pick_device(o.backend, err, errlen);
    if (!dev_name) return NULL;
    vdn_ckpt *ck = vdn_ckpt_open(checkpoint_dir, extra_adapters, n_extra, o.base_dir, err, errlen);
    if (!ck) return NULL;
    vdn_engine *eng = vdn_xcalloc(1, sizeof *eng);
    eng->ck = ck;
    eng->cfg = *vdn_ckpt_config(ck);
    set_host_threads(dev_name, o.threads);
    vdn_weight_source src = vdn_weight_source_ckpt(ck);
    if (open_op_layer(eng, dev_name, &o, &src, err, errlen) != 0) {
        vdn_ckpt_close(ck);
        free(eng);
        return NULL;
    }
    return eng;
}

vdn_engine *vdn_engine_open_source(const vdn_config *cfg, const vdn_weight_source *src,
                                   const char *label, const vdn_engine_opts *opts, char *err,
                                   size_t errlen) {
    vdn_engine_opts o;
    if (check_opts(opts, &o, err, errlen)) return NULL;
    const char *dev_name = pick_device(o.backend, err, errlen);
    if (!dev_name) return NULL;
    vdn_engine *eng = vdn_xcalloc(1, sizeof *eng);
    eng->cfg = *cfg;
    snprintf(eng->label, sizeof eng->label, "%s", label ? label : "weights");
    set_host_threads(dev_name, o.threads);
    if (open_op_layer(eng, dev_name, &o, src, err, errlen) != 0) {
        free(eng);
        return NULL;
    }
    return eng;
}

void vdn_engine_close(vdn_engine *eng) {
    if (!eng) return;
    vdn_dit_weights_free(&eng->w);
    for (int r = 1; r < eng->ranks; r++)
        vdn_dev_close(eng->rank_dev[r]);
    vdn_dev_close(eng->dev);
    vdn_ckpt_close(eng->ck);
    free(eng->faulty); /* after the devices: their close went through it */
    free(eng->times);
    free(eng);
}

struct vdn_dev *vdn_engine_device(vdn_engine *eng) {
    return eng->dev;
}

/* ---- one clip over several engines ---- */

const char *vdn_engine_group_check(vdn_engine *const *engs, int n, char *why, size_t len) {
    if (n == 1) return "none";
    if (n < 1 || n > 64) return vdn_fail(why, len, "%d ranks, expected 1..64", n), NULL;
    const char *be = engs[0]->dev->be->name;
    for (int r = 0; r < n; r++) {
        const vdn_engine *e = engs[r];
        if (!e) return vdn_fail(why, len, "rank %d has no engine", r), NULL;
        if (e->ranks > 1)
            return vdn_fail(why, len, "rank %d's engine already shards over %d virtual ranks", r,
                            e->ranks),
                   NULL;
        if (strcmp(e->dev->be->name, be) != 0 ||
            strcmp(vdn_engine_identity(e), vdn_engine_identity(engs[0])) != 0)
            return vdn_fail(why, len,
                            "rank %d's engine (%s, %.16s) differs from rank 0's (%s, %.16s)", r,
                            e->dev->be->name, vdn_engine_identity(e), be,
                            vdn_engine_identity(engs[0])),
                   NULL;
        for (int q = 0; q < r; q++)
            if (engs[q] == e)
                return vdn_fail(why, len, "ranks %d and %d share one engine", q, r), NULL;
    }
    if (!strcmp(be, "cpu")) return "inproc"; /* host memory: every rank reads its peers' */
    if (vdn_dev_comm_name(engs[0]->dev)) return vdn_dev_comm_name(engs[0]->dev); /* "nccl" */
    return vdn_fail(why, len,
                    "backend %s without a communicator in this build (the in-process one cannot "
                    "move data between GPUs; build with nccl.h: kernels/CMakeLists.txt)",
                    be),
           NULL;
}

/* ---- failures ---- */

vdn_engine_fault vdn_engine_last_fault(const vdn_engine *eng) {
    int worst = vdn_dev_faulted(eng->dev);
    for (int r = 1; r < eng->ranks; r++)
        if ((int)vdn_dev_faulted(eng->rank_dev[r]) > worst)
            worst = vdn_dev_faulted(eng->rank_dev[r]);
    return worst == VDN_DEV_FAULT_DEVICE   ? VDN_ENGINE_FAULT_DEVICE
           : worst == VDN_DEV_FAULT_MEMORY ? VDN_ENGINE_FAULT_MEMORY
                                           : VDN_ENGINE_FAULT_NONE;
}

/* what vdn_engine_render does first: a fault belongs to the render it happened in */
void vdn_engine_clear_faults(vdn_engine *eng) {
    vdn_dev_clear_fault(eng->dev);
    for (int r = 1; r < eng->ranks; r++)
        vdn_dev_clear_fault(eng->rank_dev[r]);
}

/* The words of kernels/op_cuda.h's OPC for a kernel that hit an illegal address, typed as the
 * CUDA backend types it, so the injected fault takes the path a real one takes. */
static int faulty_linear(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w,
                         const vdn_tensor *b, vdn_act act, int accumulate) {
    (void)x, (void)w, (void)b, (void)act, (void)accumulate;
    return vdn_dev_fault(y->dev, VDN_DEV_FAULT_DEVICE,
                         "op linear (%s): cudaGetLastError(): an illegal memory access was "
                         "encountered (injected by VDN_TEST_GPU_FAULT)",
                         vdn_dev_name(y->dev));
}

void vdn_engine_inject_device_fault(vdn_engine *eng) {
    if (eng->faulty) return;
    eng->faulty = vdn_xmalloc(sizeof *eng->faulty);
    *eng->faulty = *eng->dev->be;
    eng->faulty->linear = faulty_linear;
    for (int r = 0; r < eng->ranks; r++)
        eng->rank_dev[r]->be = eng->faulty;
    eng->dev->be = eng->faulty;
}

const vdn_config *vdn_engine_config(const vdn_engine *eng) {
    return &eng->cfg;
}
const char *vdn_engine_identity(const vdn_engine *eng) {
    return eng->ck ? vdn_ckpt_identity(eng->ck) : eng->label;
}
const char *vdn_engine_backend_name(const vdn_engine *eng) {
    return eng->dev->be->name;
}

uint64_t vdn_engine_memory_used(const vdn_engine *eng) {
    size_t in_use = 0;
    vdn_dev_memory(eng->dev, &in_use, NULL);
    return in_use;
}

void vdn_engine_memory_reset_peak(vdn_engine *eng) {
    vdn_dev_memory_reset_peak(eng->dev);
}

int vdn_engine_nfe_times(const vdn_engine *eng, vdn_nfe_time *out, int max) {
    const int n = eng->n_times < max ? eng->n_times : max;
    for (int k = 0; k < n; k++)
        out[k] = eng->times[k];
    return n < 0 ? 0 : n;
}

uint64_t vdn_engine_memory_peak(const vdn_engine *eng) {
    size_t peak = 0;
    vdn_dev_memory(eng->dev, NULL, &peak);
    return peak;
}
