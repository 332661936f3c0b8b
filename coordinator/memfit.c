#include "memfit.h"

#include <cjson/cJSON.h>
#include <string.h>

#include "ckpt_init.h"
#include "db.h"
#include "precision.h"
#include "spec.h"
#include "vdn_util.h"

#define GIB 1073741824.0
#define BF16 2.0
#define FFN_PIECE_ROWS 16384 /* engine/dit.c: the feed-forward runs in pieces of this many rows */

void coord_mem_need_of(const vdn_job_spec *s, coord_mem_need *n) {
    vdn_config c;
    char err[VDN_ERR_LEN];
    VDN_ASSERT(vdn_ckpt_preset("h3", 0, &c, err, sizeof err) == 0);
    const double hid = c.hidden, C = (double)c.heads * c.head_dim, ffn = c.ffn;
    memset(n, 0, sizeof *n);
    n->rows = vdn_job_min_rows(s);
    n->gpus = s->gpus > 1 ? s->gpus : 1;
    /* every row: the residual stream, the modulated input and the block output (3 x hidden);
     * q/k/v out of their fused GEMM, q and k after norm and RoPE, the attention output
     * (6 x heads x head_dim). The VDN branch's features, attention workspaces, the sampler's
     * latents and cuBLAS workspaces come on top and are left out: a lower bound. */
    n->per_row = BF16 * (3 * hid + 6 * C);
    double rows = (double)n->rows / n->gpus;
    n->activations = rows * n->per_row;
    /* gate/up (2 x ffn) and the activation (ffn) of one piece of rows */
    n->ffn = BF16 * (rows < FFN_PIECE_ROWS ? rows : FFN_PIECE_ROWS) * 3 * ffn;
    /* per block q, k, v, out (4 x hidden x C) and gate, up, down (3 x hidden x ffn): 38.5 GB
     * for H3's 50 blocks in bf16; embeddings, the refiner, adaLN and the VDN branch left out.
     * fp8 (e4m3, docs/engine.md "Precision") keeps one byte a weight and a float scale per
     * output row: 19.3 GB. Activations stay bf16 at both. */
    vdn_precision p = VDN_PRECISION_BF16;
    if (s->precision) vdn_precision_parse(s->precision, &p);
    n->precision = vdn_precision_name(p);
    const double weights = c.layers * (4 * hid * C + 3 * hid * ffn);
    const double out_rows = c.layers * (3 * C + hid + 2 * ffn + hid); /* q k v, o, gate up, down */
    n->weights = p == VDN_PRECISION_FP8 ? weights + 4 * out_rows : BF16 * weights;
}

double coord_mem_room(sqlite3 *db, uint64_t *gpu_bytes, char *worker) {
    double best = -1;
    *gpu_bytes = 0;
    worker[0] = 0;
    sqlite3_stmt *st = cdb_prep(db, "SELECT id, gpus FROM workers ORDER BY id", "");
    while (st && sqlite3_step(st) == SQLITE_ROW) {
        cJSON *arr = cJSON_Parse((const char *)sqlite3_column_text(st, 1));
        const cJSON *g;
        cJSON_ArrayForEach(g, arr) {
            const cJSON *m = cJSON_GetObjectItem(g, "memory"),
                        *r = cJSON_GetObjectItem(g, "resident");
            if (!cJSON_IsNumber(m) || m->valuedouble <= 0) continue;
            double room = m->valuedouble - (cJSON_IsNumber(r) ? r->valuedouble : 0);
            if (room > best) {
                best = room;
                *gpu_bytes = (uint64_t)m->valuedouble;
                snprintf(worker, 128, "%s", (const char *)sqlite3_column_text(st, 0));
            }
        }
        cJSON_Delete(arr);
    }
    sqlite3_finalize(st);
    return best < 0 ? 0 : best;
}

void coord_mem_check(sqlite3 *db, const vdn_job_spec *s, uint64_t limit, vdn_errlist *errs,
                     const char *where) {
    coord_mem_need n;
    coord_mem_need_of(s, &n);
    uint64_t gpu;
    char worker[128], against[400], weights[64] = "", gpus[48] = "";
    double room = coord_mem_room(db, &gpu, worker), need = n.activations + n.ffn;
    if (gpu) {
        snprintf(against, sizeof against,
                 "the most any registered worker's GPU has free beside its loaded model: %.1f "
                 "GiB of %.1f GiB on %s",
                 room / GIB, gpu / GIB, worker);
    } else if (limit) { /* no worker measured its loaded model: count H3's weights */
        room = (double)limit;
        need += n.weights;
        snprintf(weights, sizeof weights, "the H3 DiT's %s weights %.1f GiB + ", n.precision,
                 n.weights / GIB);
        snprintf(against, sizeof against,
                 "the configured --gpu-memory-limit of %.1f GiB (no registered worker advertises "
                 "GPU memory)",
                 limit / GIB);
    } else {
        return;
    }
    if (need <= room) return;
    if (n.gpus > 1) snprintf(gpus, sizeof gpus, " / %d GPUs", n.gpus);
    vdn_errlist_add(errs,
                    "%s: frames x height x width = %d x %d x %d need at least %.1f GiB of GPU "
                    "memory%s (%s%lld sequence rows%s x %.1f KiB of activations = %.1f GiB + %.1f "
                    "GiB for a feed-forward piece), above %s: render fewer frames or a smaller "
                    "size (docs/cluster.md \"Memory check at submit\")",
                    where, s->frames, s->height, s->width, need / GIB,
                    gpu ? " beside the loaded model" : "", weights, n.rows, gpus, n.per_row / 1024,
                    n.activations / GIB, n.ffn / GIB, against);
}
