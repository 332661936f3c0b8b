/* vdn_engine_*: checkpoint + backend, opened once, rendering many requests (engine.h). Also the
 * backend registry (backend.h) and the official frame arithmetic. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "ckpt.h"
#include "engine.h"
#include "engine_internal.h"
#include "op_backend.h"
#include "ops.h"
#include "vdn_util.h"

/* ---- backend registry ---- */

#define MAX_BACKENDS 8
static const vdn_backend_ops *g_backends[MAX_BACKENDS];
static int g_n_backends;

/* A CUDA object may define this (see backend.h); absent, its address is NULL. */
extern const vdn_backend_ops vdn_cuda_backend_ops __attribute__((weak));

int vdn_backend_register(const vdn_backend_ops *ops) {
    for (int i = 0; i < g_n_backends; i++)
        if (strcmp(g_backends[i]->name, ops->name) == 0) {
            g_backends[i] = ops;
            return 0;
        }
    if (g_n_backends == MAX_BACKENDS) return -1;
    g_backends[g_n_backends++] = ops;
    return 0;
}

const vdn_backend_ops *vdn_backend_find(const char *name) {
    for (int i = 0; i < g_n_backends; i++)
        if (strcmp(g_backends[i]->name, name) == 0) return g_backends[i];
    if (strcmp(name, "cuda") == 0 && &vdn_cuda_backend_ops) return &vdn_cuda_backend_ops;
    return NULL;
}

/* ---- engine ---- */

static int g_threads = 0;
void vdn_engine_set_threads(int threads) {
    g_threads = threads;
}

static int open_op_layer(vdn_engine *eng, const char *name, char *err, size_t errlen) {
    eng->dev = vdn_dev_open(name, 0, g_threads > 0 ? g_threads : 2, err, errlen);
    if (!eng->dev) return -1;
    vdn_weight_source src = vdn_weight_source_ckpt(eng->ck);
    if (vdn_dit_weights_load(&eng->w, eng->dev, &eng->cfg, &src, err, errlen) != 0) {
        vdn_dev_close(eng->dev);
        eng->dev = NULL;
        return -1;
    }
    size_t bytes;
    vdn_dev_memory(eng->dev, &bytes, NULL);
    VDN_INFO("%s: DiT weights on the device (%.1f MB)", vdn_dev_name(eng->dev), bytes / 1e6);
    return 0;
}

/* Which backend renders: "cuda" when one is present and available, else "cpu". A model-level
 * "cuda" (backend.h: kernels/cuda_backend.cu until it retires) takes precedence over the op
 * layer's "cuda" device (kernels/op_cuda*.cu, or a test's stand-in registered under the name);
 * every other choice renders over the op layer. Sets *ops (model-level) or *dev_name. */
static int pick_backend(vdn_backend_kind backend, const vdn_backend_ops **ops,
                        const char **dev_name, char *err, size_t errlen) {
    char why[VDN_ERR_LEN] = "";
    *ops = NULL, *dev_name = NULL;
    if (backend == VDN_BACKEND_CUDA || backend == VDN_BACKEND_AUTO) {
        *ops = vdn_backend_find("cuda");
        if (*ops && !(*ops)->available(why, sizeof why)) *ops = NULL;
        const vdn_dev_backend *db = *ops ? NULL : vdn_dev_backend_find("cuda");
        if (db && (!db->available || db->available(why, sizeof why))) *dev_name = "cuda";
        if (*ops || *dev_name) return 0;
        if (backend == VDN_BACKEND_CUDA)
            return vdn_fail(err, errlen, "backend cuda: %s",
                            why[0] ? why
                                   : "not built into this binary (no CUDA toolkit at build time)");
        if (why[0]) VDN_INFO("cuda backend unavailable (%s); using cpu", why);
    }
    *dev_name = "cpu";
    return 0;
}

vdn_engine *vdn_engine_open(const char *checkpoint_dir, const char *const *extra_adapters,
                            int n_extra, vdn_backend_kind backend, char *err, size_t errlen) {
    const vdn_backend_ops *ops;
    const char *dev_name;
    if (pick_backend(backend, &ops, &dev_name, err, errlen) != 0) return NULL;
    vdn_ckpt *ck = vdn_ckpt_open(checkpoint_dir, extra_adapters, n_extra, err, errlen);
    if (!ck) return NULL;
    vdn_engine *eng = vdn_xcalloc(1, sizeof *eng);
    eng->ck = ck;
    eng->cfg = *vdn_ckpt_config(ck);
    eng->ops = ops;
    const int on_cpu = dev_name && strcmp(dev_name, "cpu") == 0;
    if (g_threads > 0)
        vdn_ops_set_threads(g_threads);
    else if (!on_cpu) { /* the render's host work (noise) uses the cores the GPU leaves idle */
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        vdn_ops_set_threads(cores < 1 ? 1 : cores > 8 ? 8 : (int)cores);
    }
    int rc = dev_name ? open_op_layer(eng, dev_name, err, errlen)
                      : ((eng->be = ops->create(ck, &eng->cfg, g_threads, err, errlen)) ? 0 : -1);
    if (rc != 0) {
        vdn_ckpt_close(ck);
        free(eng);
        return NULL;
    }
    return eng;
}

void vdn_engine_close(vdn_engine *eng) {
    if (!eng) return;
    if (eng->dev) {
        vdn_dit_weights_free(&eng->w);
        vdn_dev_close(eng->dev);
    } else {
        eng->ops->destroy(eng->be);
    }
    vdn_ckpt_close(eng->ck);
    free(eng);
}

const vdn_config *vdn_engine_config(const vdn_engine *eng) {
    return &eng->cfg;
}
const char *vdn_engine_identity(const vdn_engine *eng) {
    return vdn_ckpt_identity(eng->ck);
}
const char *vdn_engine_backend_name(const vdn_engine *eng) {
    return eng->dev ? eng->dev->be->name : eng->ops->name;
}
