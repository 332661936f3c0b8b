/* The sampling loop of a render over the op layer (engine_internal.h): the noise (or a resumed
 * state) is uploaded once, the DiT (dit.h) and the Euler steps (vdn_op_euler) run on the device,
 * and per model evaluation only the per-row timestep indices that changed and the unique
 * timestep values go to it; the latents come back at the end, and for each snapshot. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "engine_internal.h"
#include "vdn_util.h"

/* the sampler state on the device: what a snapshot reads back (with the step) */
typedef struct {
    vdn_tensor *video; /* F32 [n_video, patch features] */
    vdn_tensor *audio; /* F32 [n_audio, audio_channels] */
    int step;          /* model evaluations done */
} device_state;

/* the device tensors of one render */
typedef struct {
    vdn_tensor *embeds, *text, *cond, *vv, *av;
    device_state st;
    vdn_dit_seq seq;
    int seq_ready;
    vdn_dit_buffers *buf; /* the forward's (this rank's of a sharded one: lp->comm) */
} loop_tensors;

static vdn_tensor *upload(vdn_dev *d, const float *host, int64_t rows, int64_t cols) {
    vdn_tensor *t = vdn_tensor_new2(d, VDN_DT_F32, rows, cols);
    if (t && host && vdn_tensor_set(t, host, VDN_DT_F32) != 0) {
        vdn_tensor_free(t);
        return NULL;
    }
    return t;
}

static void release(loop_tensors *t) {
    vdn_dit_buffers_free(t->buf);
    if (t->seq_ready) vdn_dit_seq_free(&t->seq);
    vdn_tensor *all[] = {t->embeds, t->text, t->cond, t->vv, t->av, t->st.video, t->st.audio};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        vdn_tensor_free(all[i]);
}

/* everything on the device before the first NFE: text rows (the refiner, once), positions and
 * masks, latents, keyframes, scratch */
static int setup(vdn_engine *eng, vdn_render_loop *lp, loop_tensors *t) {
    vdn_dev *d = eng->dev;
    const vdn_config *c = &eng->cfg;
    const vdn_layout *L = &lp->seq->lay;
    const int pf = c->in_channels * c->patch_t * c->patch_h * c->patch_w;
    if (!(t->embeds = upload(d, lp->embeds, L->n_text, c->text_dim))) return -1;
    if (!(t->text = vdn_tensor_new2(d, vdn_dev_act_dtype(d), L->n_text, c->hidden))) return -1;
    if (vdn_dit_refine_text(&eng->w, t->embeds, t->text) != 0) return -1;
    if (vdn_dit_seq_init(&t->seq, d, c, L, &lp->plan, lp->seq->pos) != 0) return -1;
    t->seq_ready = 1;
    if (!(t->st.video = upload(d, lp->video_rows, L->n_video, pf))) return -1;
    if (!(t->st.audio = upload(d, lp->audio_rows, L->n_audio, c->audio_channels))) return -1;
    t->st.step = lp->k0;
    if (L->n_cond && !(t->cond = upload(d, lp->cond_rows, L->n_cond, pf))) return -1;
    if (!(t->vv = upload(d, NULL, L->n_video, pf))) return -1;
    if (!(t->av = upload(d, NULL, L->n_audio, c->audio_channels))) return -1;
    /* activations for the forward this render runs, once: a rank's rows and heads only when
     * sharded (the whole sequence's would not fit beside the weights on many GPUs); virtual
     * ranks make their own per evaluation (a checking tool, not a production path) */
    vdn_dit_opts own = eng->dit; /* the engine's (vdn_engine_opts.dit), this render's cancel */
    own.cancel = lp->req->cancel;
    const vdn_dit_opts *opts = &own;
    if (!lp->comm && eng->ranks > 1)
        t->buf = vdn_dit_buffers_virtual(&eng->w, eng->rank_dev, eng->ranks, opts);
    else
        t->buf = vdn_dit_buffers_new(&eng->w, &t->seq, lp->comm, opts);
    return t->buf ? 0 : -1;
}

/* one model evaluation and the Euler steps of video and audio */
static int nfe(vdn_engine *eng, vdn_render_loop *lp, loop_tensors *t, int k) {
    const float tv = 1.0f - lp->sigma_v[k], ta = 1.0f - lp->sigma_a[k];
    vdn_seq *s = lp->seq;
    vdn_seq_timesteps(s, tv, ta);
    if (vdn_dit_seq_timesteps(&t->seq, s->tags, s->t_index, s->t_values, s->n_t) != 0) return -1;
    if (vdn_dit_forward(&eng->w, &t->seq, t->buf, t->text, t->st.video, t->cond, t->st.audio, t->vv,
                        t->av) != 0)
        return -1;
    if (vdn_op_euler(t->st.video, t->vv, lp->sigma_v[k], lp->sigma_v[k + 1]) != 0) return -1;
    if (vdn_op_euler(t->st.audio, t->av, lp->sigma_a[k], lp->sigma_a[k + 1]) != 0) return -1;
    return vdn_dev_sync(eng->dev); /* the NFE's time is its device time */
}

/* the latents back into the host rows (a snapshot, or the end) */
static int download(const device_state *st, vdn_render_loop *lp) {
    if (vdn_tensor_get(st->video, lp->video_rows) != 0) return -1;
    return vdn_tensor_get(st->audio, lp->audio_rows);
}

static void snapshot(vdn_engine *eng, vdn_render_loop *lp, const loop_tensors *t) {
    const vdn_render_request *req = lp->req;
    const vdn_layout *L = &lp->seq->lay;
    const vdn_config *c = &eng->cfg;
    if (download(&t->st, lp) != 0) {
        VDN_WARN("render: snapshot after NFE %d not read back (%s); rendering on", t->st.step,
                 vdn_dev_error(eng->dev));
        return;
    }
    const size_t pf = (size_t)c->in_channels * c->patch_t * c->patch_h * c->patch_w;
    vdn_render_state snap = {t->st.step,
                             req->steps,
                             (size_t)L->n_video * pf,
                             (size_t)L->n_audio * c->audio_channels,
                             lp->video_rows,
                             lp->audio_rows};
    if (req->snapshot(req->snapshot_user, &snap) != 0)
        VDN_WARN("render: snapshot after NFE %d failed; rendering on", t->st.step);
}

/* whether NFE k's collectives are profiled (the request's comm_profile_last) */
static int profiled(const vdn_render_loop *lp, int k) {
    const int last = lp->req->comm_profile_last;
    return last > 0 && k >= lp->req->steps - last;
}

/* the engine's per-NFE record for this render (vdn_engine_nfe_times), zeroed */
static void times_reset(vdn_engine *eng, int steps, int k0) {
    if (eng->cap_times < steps) {
        free(eng->times);
        eng->times = vdn_xmalloc(sizeof *eng->times * (size_t)steps);
        eng->cap_times = steps;
    }
    memset(eng->times, 0, sizeof *eng->times * (size_t)eng->cap_times);
    eng->n_times = k0;
}

int vdn_render_loop_ops(vdn_engine *eng, vdn_render_loop *lp, char *err, size_t errlen) {
    const int steps = lp->req->steps;
    vdn_comm *cm = lp->comm;
    const int lead = !cm || cm->rank == 0; /* reports, snapshots, reads back */
    times_reset(eng, steps, lp->k0);
    /* every rank switches profiling at the same NFE boundary: its barrier counts match */
    if (cm) cm->profile = profiled(lp, lp->k0);
    loop_tensors t = {0};
    int rc = setup(eng, lp, &t);
    double last_snapshot = vdn_now();
    for (int k = lp->k0; k < steps && rc == 0; k++) {
        if (vdn_cancelled(lp->req->cancel)) {
            if (cm) vdn_comm_abort(cm);
            release(&t);
            return vdn_fail(err, errlen, "cancelled after %d of %d model evaluations", k, steps);
        }
        vdn_nfe_time *tk = &eng->times[k];
        const vdn_comm before = cm ? *cm : (vdn_comm){0};
        double t0 = vdn_now();
        rc = nfe(eng, lp, &t, k);
        tk->nfe_s = vdn_now() - t0;
        if (cm) {
            tk->profiled = cm->profile;
            tk->wait_s = cm->wait_s - before.wait_s;
            tk->collective_s = cm->collective_s - before.collective_s;
            tk->collectives = cm->calls - before.calls;
            tk->bytes = cm->bytes - before.bytes;
            cm->profile = profiled(lp, k + 1);
        }
        if (rc != 0) break;
        eng->n_times = k + 1;
        t.st.step = lp->done = k + 1;
        lp->nfe_s[k] = tk->nfe_s;
        if (lead && vdn_render_snapshot_due(lp->req, k + 1, lp->k0, last_snapshot)) {
            snapshot(eng, lp, &t);
            last_snapshot = vdn_now();
        }
        if (lead && lp->progress && lp->progress(lp->user, k + 1, steps, lp->nfe_s[k]) != 0) {
            if (cm) vdn_comm_abort(cm); /* the peers' next collective fails */
            release(&t);
            return vdn_fail(err, errlen, "cancelled after %d of %d model evaluations", k + 1,
                            steps);
        }
    }
    if (rc == 0 && lead) rc = download(&t.st, lp);
    if (rc != 0) {
        /* a failure outside a collective (setup, Euler) must not leave the peers waiting */
        if (cm) vdn_comm_abort(cm);
        vdn_fail(err, errlen, "%s: %s", vdn_dev_name(eng->dev), vdn_dev_error(eng->dev));
    }
    release(&t);
    return rc;
}

/* ---- one clip over several engines ---- */

typedef struct {
    vdn_engine *const *engs;
    int n;
    vdn_render_loop *lp;        /* rank 0's */
    vdn_comm_group *g;          /* in-process, or NULL: NCCL with id */
    char id[VDN_COMM_ID_BYTES]; /* the device communicator's group id (NCCL's unique id) */
    char (*err)[VDN_ERR_LEN];   /* per rank */
    vdn_seq *seqs;              /* ranks 1..n-1: own copies of rank 0's sequence (below) */
} group_job;

/* Every NFE writes the step's timesteps into the sequence (vdn_seq_timesteps: t_values, n_t,
 * t_index), so ranks must not share one: each rank after the first gets a copy whose per-step
 * state is its own (tags and positions stay shared: read only). Made before the ranks start,
 * while nobody writes rank 0's. */
static vdn_seq *seq_copies(const vdn_seq *s, int n) {
    vdn_seq *c = vdn_xcalloc((size_t)(n > 1 ? n - 1 : 1), sizeof *c);
    const size_t rows = (size_t)s->lay.n_rows;
    for (int r = 0; r < n - 1; r++) {
        c[r] = *s;
        c[r].t_index = vdn_xmalloc(rows * sizeof *c[r].t_index);
        memcpy(c[r].t_index, s->t_index, rows * sizeof *c[r].t_index);
    }
    return c;
}

static void seq_copies_free(vdn_seq *c, int n) {
    for (int r = 0; r < n - 1; r++)
        free(c[r].t_index);
    free(c);
}

static int group_rank(int rank, void *arg) {
    group_job *j = arg;
    vdn_engine *eng = j->engs[rank];
    vdn_render_loop lp = *j->lp;
    double *nfe_s = NULL;
    if (rank > 0) { /* same inputs (read only); own timings, no reports */
        nfe_s = vdn_xcalloc((size_t)lp.req->steps, sizeof *nfe_s);
        lp.nfe_s = nfe_s, lp.progress = NULL, lp.user = NULL;
        lp.seq = &j->seqs[rank - 1];
    }
    lp.comm = j->g ? vdn_comm_inproc(j->g, rank, eng->dev)
                   : vdn_dev_comm_open(eng->dev, rank, j->n, j->id, j->err[rank], VDN_ERR_LEN);
    int rc = -1;
    if (lp.comm) rc = vdn_render_loop_ops(eng, &lp, j->err[rank], VDN_ERR_LEN);
    if (rank == 0) j->lp->done = lp.done;
    vdn_comm_free(lp.comm);
    free(nfe_s);
    return rc;
}

int vdn_render_loop_group(vdn_engine *const *engs, int n, vdn_render_loop *lp, char *err,
                          size_t errlen) {
    char why[VDN_ERR_LEN];
    const char *via = vdn_engine_group_check(engs, n, why, sizeof why);
    if (!via) return vdn_fail(err, errlen, "a render over %d GPUs: %s", n, why);
    group_job j = {.engs = engs, .n = n, .lp = lp};
    if (!strcmp(via, "inproc") && !(j.g = vdn_comm_group_new(n, err, errlen))) return -1;
    if (strcmp(via, "inproc") != 0 && vdn_dev_comm_unique_id(engs[0]->dev, j.id, err, errlen) != 0)
        return -1;
    j.err = vdn_xcalloc((size_t)n, sizeof *j.err);
    j.seqs = seq_copies(lp->seq, n);
    int failed = vdn_comm_run_ranks(n, group_rank, &j);
    seq_copies_free(j.seqs, n);
    if (failed) { /* the rank that failed first, not one that only saw "another rank failed" */
        int pick = 0;
        for (int r = 0; r < n; r++)
            if (j.err[r][0] && !strstr(j.err[r], "another rank")) {
                pick = r;
                break;
            }
        if (pick) /* name the rank: its device is not rank 0's */
            vdn_fail(err, errlen, "rank %d of %d: %s", pick, n, j.err[pick]);
        else
            vdn_fail(err, errlen, "%s", j.err[0]);
    }
    free(j.err);
    vdn_comm_group_free(j.g);
    return failed ? -1 : 0;
}
