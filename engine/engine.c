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
    if (strcmp(name, "cpu") == 0) return vdn_cpu_backend_ops();
    if (strcmp(name, "cuda") == 0 && &vdn_cuda_backend_ops) return &vdn_cuda_backend_ops;
    return NULL;
}

/* ---- engine ---- */

static int g_threads = 0;
void vdn_engine_set_threads(int threads) {
    g_threads = threads;
}

vdn_engine *vdn_engine_open(const char *checkpoint_dir, const char *const *extra_adapters,
                            int n_extra, vdn_backend_kind backend, char *err, size_t errlen) {
    const vdn_backend_ops *ops = NULL;
    char why[VDN_ERR_LEN] = "";
    if (backend == VDN_BACKEND_CUDA || backend == VDN_BACKEND_AUTO) {
        ops = vdn_backend_find("cuda");
        if (ops && !ops->available(why, sizeof why)) ops = NULL;
        if (!ops && backend == VDN_BACKEND_CUDA) {
            vdn_fail(err, errlen, "backend cuda: %s",
                     why[0] ? why : "not built into this binary (no CUDA toolkit at build time)");
            return NULL;
        }
        if (!ops && why[0]) VDN_INFO("cuda backend unavailable (%s); using cpu", why);
    }
    if (!ops) ops = vdn_cpu_backend_ops();
    vdn_ckpt *ck = vdn_ckpt_open(checkpoint_dir, extra_adapters, n_extra, err, errlen);
    if (!ck) return NULL;
    vdn_engine *eng = vdn_xcalloc(1, sizeof *eng);
    eng->ck = ck;
    eng->cfg = *vdn_ckpt_config(ck);
    eng->ops = ops;
    if (g_threads > 0)
        vdn_ops_set_threads(g_threads);
    else if (ops != vdn_cpu_backend_ops()) { /* the render's host work (noise, Euler) */
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        vdn_ops_set_threads(cores < 1 ? 1 : cores > 8 ? 8 : (int)cores);
    }
    eng->be = ops->create(ck, &eng->cfg, g_threads, err, errlen);
    if (!eng->be) {
        vdn_ckpt_close(ck);
        free(eng);
        return NULL;
    }
    return eng;
}

void vdn_engine_close(vdn_engine *eng) {
    if (!eng) return;
    eng->ops->destroy(eng->be);
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
    return eng->ops->name;
}
