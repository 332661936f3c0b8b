/* The sharded DiT forward (dit_shard.c) with P in-process ranks against the unsharded forward on
 * the same backend: every attention variant the checkpoint has, t2va and (prompts with
 * keyframes) fl2va rows, relative RMS error of the video and audio velocities on every rank.
 * Exit 77 (ctest skip) when the backend is not linked in or not available here.
 *
 *   dit_shard_compare CKPT_DIR PROMPT [PROMPT...] [--backend NAME] [--ranks 2,3,4] [--tol X]
 *                     [--frames F] [--height H --width W] [--time N] [--nccl] [--modes vdn,dense]
 *                     [--gpus 2,4,8] [--lanes]
 *
 * --time N: also N timed forwards (after a warm-up) of the plain forward and of the sharded one
 * with P = 1 (the in-process communicator), on device-resident inputs: the sharded path's
 * overhead; with --lanes / --pieces also the plain forward so switched (--lanes: the overlap of
 * the linear branch on lane 1). --nccl (builds with VDN_HAVE_NCCL): also the sharded forward over a
 * one-rank NCCL communicator against the plain one.
 *
 * --gpus LIST (issue 14): one device per rank instead, rank r on device r of the backend with its
 * own copy of the weights (device 0 also runs the plain forward), the ranks as threads over the
 * communicator a k-GPU render uses (engine.c vdn_engine_group_check): NCCL on CUDA (builds with
 * VDN_HAVE_NCCL; else skip), in-process on the CPU. Every rank's velocities against the one-device
 * forward. Replaces --ranks.
 *
 * --lanes: also the plain forward and every sharded run again with vdn_dit_opts.vda_one_lane (the
 * linear branch after the softmax on one lane, instead of forked to lane 1 of the device beside
 * it): the outputs must be the same bits. On the CPU that shows the branch and the softmax touch
 * nothing of each other's (issued in the opposite orders); on a GPU, also that the fork and the
 * join order the streams.
 *
 * --pieces: also every run again with the feed-forward and the output heads in pieces of 5 rows
 * (vdn_dit_opts.chunk_rows), and with the linear branch one head per pass (.vda_heads; the plain
 * forward's): the same bits on the CPU.
 *
 * --bytes: every rank's received bytes of the evaluation (vdn_comm.bytes) printed, and checked
 * against expected_bytes below: the count of what sequence parallelism must move, written from
 * the layout, so a change that gathers or moves more than that fails here.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "ckpt.h"
#include "dit.h"
#include "op_backend.h"
#include "prompt.h"
#include "sampler.h"
#include "seq.h"
#include "comm.h"
#include "vdn_util.h"
#include "backends.h"
#include "op_backend.h"

/* --gpus: rank r on device r over the communicator of the backend */
typedef struct {
    vdn_dit_weights *const *w;
    int P;
    const float *text;
    const vdn_step_inputs *in;
    float *const *sv, *const *sa;
    const vdn_dit_opts *opts;
    vdn_comm_group *g; /* in-process, or NULL: the backend's (NCCL) over id */
    char id[VDN_COMM_ID_BYTES];
    char (*err)[VDN_ERR_LEN];
    uint64_t *bytes; /* [P] received by each rank, or NULL */
} gpus_job;

static int gpus_rank(int r, void *arg) {
    gpus_job *j = arg;
    vdn_dev *d = j->w[r]->dev;
    vdn_comm *cm = NULL;
    if (j->g)
        cm = vdn_comm_inproc(j->g, r, d);
    else
        cm = vdn_dev_comm_open(d, r, j->P, j->id, j->err[r], VDN_ERR_LEN);
    if (!cm) return -1;
    char e[VDN_ERR_LEN - 16]; /* room for the rank */
    int rc = vdn_dit_forward_host(j->w[r], cm, j->opts, j->text, j->in, j->sv[r], j->sa[r], 0, NULL,
                                  e, sizeof e);
    if (rc) snprintf(j->err[r], VDN_ERR_LEN, "rank %d %s", r, e);
    if (j->bytes) j->bytes[r] = cm->bytes;
    vdn_comm_free(cm);
    return rc;
}

/* P ranks as threads, rank r with w[r], over the in-process communicator or (inproc 0) the
 * backend's; 0, or -1 with the first rank's own message (not "another rank failed") in err */
static int forward_ranks(vdn_dit_weights *const *w, int P, int inproc, const vdn_dit_opts *opts,
                         const float *text, const vdn_step_inputs *in, float *const *sv,
                         float *const *sa, uint64_t *bytes, char *err, size_t errlen) {
    gpus_job j = {
        .w = w, .P = P, .text = text, .in = in, .sv = sv, .sa = sa, .opts = opts, .bytes = bytes};
    if (inproc) {
        if (!(j.g = vdn_comm_group_new(P, err, errlen))) return -1;
    } else if (vdn_dev_comm_unique_id(w[0]->dev, j.id, err, errlen) != 0) {
        return -1;
    }
    j.err = vdn_xcalloc((size_t)P, sizeof *j.err);
    int failed = vdn_comm_run_ranks(P, gpus_rank, &j);
    if (failed) {
        int pick = 0;
        for (int r = P - 1; r >= 0; r--)
            if (j.err[r][0] && (!j.err[pick][0] || !strstr(j.err[r], "another rank"))) pick = r;
        snprintf(err, errlen, "%s", j.err[pick][0] ? j.err[pick] : "a rank failed");
    }
    free(j.err);
    vdn_comm_group_free(j.g);
    return failed ? -1 : 0;
}

/* switches that must not change the CPU's bits (--lanes, --pieces) */
typedef struct {
    const char *name;
    vdn_dit_opts opts;
} alt_opts;

/* the same bits, or a line saying where they first differ */
static int same_bits(const char *what, const char *alt, const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0) {
            printf("%s: element %zu differs with %s: %.9g vs %.9g FAIL\n", what, i, alt, a[i],
                   b[i]);
            return 0;
        }
    return 1;
}

static double rel(const float *ref, const float *out, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)ref[i] - out[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

enum { MAX_P = 16 };

/* What rank `me` of P must receive in one evaluation (activations of `a` bytes): per block, the
 * one all-to-all of own heads' raw q, k, v (C wide, split by heads), the softmax gate's logits
 * (gated), beta's logits and the output gate's hidden (linear: heads split; gate_rank, whole)
 * from every other rank's rows; the linear branch's frame means (F32 [F', hidden]) from each
 * other rank (the in-process all-reduce reads every peer's tensor) and the other ranks' rows of
 * the frames a rank boundary cuts; the attention output of own rows
 * and the branch output of own branch rows from the other ranks' heads; and once the residual of
 * every other rank's rows for the final layer. Rows: ceil(n/P) each, the rest on the last; heads
 * balanced (comm.h). */
static uint64_t expected_bytes(const vdn_config *c, const vdn_layout *L, const vdn_attn_plan *pl,
                               int P, int me, uint64_t a) {
    const int64_t N = L->n_rows, per = (N + P - 1) / P, hd = c->head_dim, C = c->heads * hd;
    const int64_t r0 = me * per < N ? me * per : N, r1 = (me + 1) * per < N ? (me + 1) * per : N;
    const int64_t nr = r1 - r0, nh = c->heads / P + (me < c->heads % P), nc = nh * hd;
    const int f0 = pl->skip_ends ? 1 : 0, Fp = L->frames - 2 * f0;
    const int64_t row0 = L->video_start + (int64_t)f0 * L->tokens_per_frame,
                  nl = (int64_t)Fp * L->tokens_per_frame;
    const int linear = c->has_vdn && pl->linear && Fp > 0, gated = c->has_vdn && pl->softmax_gate;
    const int64_t b0 = r0 > row0 ? r0 : row0, b1 = r1 < row0 + nl ? r1 : row0 + nl;
    const uint64_t nb = b1 > b0 ? (uint64_t)(b1 - b0) : 0;
    uint64_t block = (uint64_t)(N - nr) * a * (uint64_t)(3 * nc + (gated ? nh : 0));
    if (linear) {
        const int64_t T = L->tokens_per_frame;
        int64_t cut = 0, last = -1, mine = 0; /* frames a rank boundary cuts, own rows of them */
        for (int r = 1; r < P; r++) {
            const int64_t at = (r * per < N ? r * per : N) - row0;
            if (at <= 0 || at >= nl || at % T == 0 || at / T == last) continue;
            last = at / T, cut++;
            const int64_t f0 = row0 + last * T, x0 = f0 > r0 ? f0 : r0,
                          x1 = f0 + T < r1 ? f0 + T : r1;
            mine += x1 > x0 ? x1 - x0 : 0;
        }
        block += (uint64_t)(N - nr) * a * (uint64_t)(nh + c->gate_rank);
        block += (uint64_t)(P - 1) * (uint64_t)Fp * (uint64_t)c->hidden * 4;
        block += (uint64_t)(cut * T - mine) * (uint64_t)c->hidden * a;
        block += nb * (uint64_t)(C - nc) * a;
    }
    block += (uint64_t)nr * (uint64_t)(C - nc) * a;
    return (uint64_t)c->layers * block + (uint64_t)(N - nr) * (uint64_t)c->hidden * a;
}

int main(int argc, char **argv) {
    const char *name = "cpu", *ckdir = NULL, *prompts[8], *ranks_arg = "2,3,4,7,8";
    int np = 0, F = 17, reps = 0, nccl = 0, ph = 0, pw = 0, gpus = 0, n_alt = 0, check_bytes = 0;
    alt_opts alts[3];
    const char *modes = NULL;
    double tol = 1e-6;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--backend") && i + 1 < argc)
            name = argv[++i];
        else if (!strcmp(argv[i], "--tol") && i + 1 < argc)
            tol = atof(argv[++i]);
        else if (!strcmp(argv[i], "--ranks") && i + 1 < argc)
            ranks_arg = argv[++i];
        else if (!strcmp(argv[i], "--frames") && i + 1 < argc)
            F = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--height") && i + 1 < argc)
            ph = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--width") && i + 1 < argc)
            pw = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--time") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--modes") && i + 1 < argc)
            modes = argv[++i];
        else if (!strcmp(argv[i], "--nccl"))
            nccl = 1;
        else if (!strcmp(argv[i], "--bytes"))
            check_bytes = 1;
        else if (!strcmp(argv[i], "--lanes"))
            alts[n_alt++] = (alt_opts){"one lane", {.vda_one_lane = 1}};
        else if (!strcmp(argv[i], "--pieces")) {
            alts[n_alt++] = (alt_opts){"5-row pieces", {.chunk_rows = 5}};
            alts[n_alt++] = (alt_opts){"one head per pass", {.vda_heads = 1}};
        } else if (!strcmp(argv[i], "--gpus") && i + 1 < argc)
            ranks_arg = argv[++i], gpus = 1;
        else if (!ckdir)
            ckdir = argv[i];
        else if (np < 8)
            prompts[np++] = argv[i];
    }
    int plist[16], nplist = 0;
    for (const char *p = ranks_arg; *p && nplist < 16;) {
        plist[nplist++] = atoi(p);
        const char *comma = strchr(p, ',');
        if (!comma) break;
        p = comma + 1;
    }
    if (!ckdir || np == 0 || nplist == 0) {
        fprintf(stderr, "usage: dit_shard_compare CKPT_DIR PROMPT... [--backend NAME] "
                        "[--ranks 2,3 | --gpus 2,4,8] [--tol X] [--frames F] [--lanes] "
                        "[--pieces] [--bytes]\n");
        return 2;
    }
    for (int i = 0; i < nplist; i++)
        if (plist[i] < 1 || plist[i] > MAX_P) {
            fprintf(stderr, "--ranks: %d is not in 1..%d\n", plist[i], MAX_P);
            return 2;
        }
    char err[VDN_ERR_LEN] = "";
    vdn_backends_register();
    const vdn_dev_backend *be = vdn_dev_backend_find(name);
    if (!be) {
        printf("skip: backend '%s' is not linked into this binary\n", name);
        return 77;
    }
    if (be->available && !be->available(err, sizeof err)) {
        printf("skip: backend '%s' not available here: %s\n", name, err);
        return 77;
    }
    if (gpus && strcmp(name, "cpu") != 0 && !be->comm_open) {
        printf("skip: --gpus on %s: this build has no NCCL communicator\n", name);
        return 77;
    }
    vdn_ckpt *ck = vdn_ckpt_open(ckdir, NULL, 0, NULL, err, sizeof err);
    if (!ck) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    const vdn_config *c = vdn_ckpt_config(ck);
    /* one device and one copy of the weights per rank (rank 0's also run the unsharded forward) */
    vdn_dev *dev[MAX_P] = {0};
    vdn_dit_weights wts[MAX_P], *wp[MAX_P];
    int maxp = 1;
    for (int i = 0; i < nplist; i++)
        maxp = plist[i] > maxp ? plist[i] : maxp;
    vdn_weight_source src = vdn_weight_source_ckpt(ck);
    for (int r = 0; r < maxp; r++) {
        dev[r] = vdn_dev_open(name, gpus ? r : 0, 1, err, sizeof err); /* --gpus: device r */
        if (!dev[r] || vdn_dit_weights_load(&wts[r], dev[r], c, &src, err, sizeof err) != 0) {
            fprintf(stderr, "rank %d: %s\n", r, err);
            return 1;
        }
        wp[r] = &wts[r];
    }
    int fails = 0, runs = 0;
    /* --ranks: in-process ranks on one device; --gpus: the backend's communicator (CPU: none) */
    const int inproc = !gpus || !strcmp(name, "cpu");
    for (int p = 0; p < np; p++) {
        vdn_prompt pr;
        if (vdn_prompt_load(prompts[p], c->text_dim, &pr, err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        int lh = pr.n_keyframes ? pr.kf_h : 4, lw = pr.n_keyframes ? pr.kf_w : 6, La = 21;
        if (ph > 0 && !pr.n_keyframes) lh = ph / 16, lw = pw / 16; /* latent grid of the pixels */
        int8_t *tags = vdn_xmalloc(pr.n_text);
        for (int i = 0; i < pr.n_text; i++)
            tags[i] = (int8_t)pr.tags[i];
        int anchors[2] = {pr.anchor_last[0], pr.anchor_last[1]};
        vdn_seq s;
        if (vdn_seq_build(&s, c, tags, pr.n_text, F, lh, lw, La, pr.n_keyframes, anchors, err,
                          sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        const vdn_layout *L = &s.lay;
        const size_t pf = (size_t)c->in_channels * c->patch_h * c->patch_w,
                     ac = (size_t)c->audio_channels, nv = L->n_video * pf, na = L->n_audio * ac;
        float *vx = vdn_xmalloc(sizeof(float) * nv), *ax = vdn_xmalloc(sizeof(float) * (na + 1));
        float *cx = vdn_xmalloc(sizeof(float) * (L->n_cond + 1) * pf);
        vdn_rng rng;
        vdn_rng_seed(&rng, 99 + p);
        vdn_rng_normal(&rng, vx, nv);
        vdn_rng_normal(&rng, ax, na);
        vdn_rng_normal(&rng, cx, (size_t)L->n_cond * pf);
        float *rv = vdn_xmalloc(sizeof(float) * nv), *ra = vdn_xmalloc(sizeof(float) * (na + 1));
        float *sv[MAX_P], *sa[MAX_P], *ov[MAX_P], *oa[MAX_P]; /* o: --lanes, one lane */
        for (int r = 0; r < maxp; r++) {
            sv[r] = vdn_xmalloc(sizeof(float) * nv), sa[r] = vdn_xmalloc(sizeof(float) * (na + 1));
            ov[r] = vdn_xmalloc(sizeof(float) * nv), oa[r] = vdn_xmalloc(sizeof(float) * (na + 1));
        }
        float *text = vdn_xmalloc(sizeof(float) * pr.n_text * c->hidden);
        if (vdn_dit_refine_text_host(wp[0], pr.embeds, pr.n_text, text, err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        vdn_seq_timesteps(&s, 0.37f, 0.81f);
        for (int m = 0; m < 5; m++) {
            vdn_attn_mode mode = (vdn_attn_mode)m;
            if (mode != VDN_ATTN_DENSE && !c->has_vdn) continue;
            if (modes && !strstr(modes, vdn_attn_mode_name(mode))) continue;
            vdn_step_inputs in = {
                L,          vx,    L->n_cond ? cx : NULL,         ax, s.tags, s.pos, s.t_index,
                s.t_values, s.n_t, vdn_attn_plan_make(c, mode, F)};
            if (vdn_dit_forward_host(wp[0], NULL, NULL, text, &in, rv, ra, 0, NULL, err,
                                     sizeof err)) {
                fprintf(stderr, "forward: %s\n", err);
                return 1;
            }
            for (int a = 0; a < n_alt; a++) { /* the plain forward switched: the same bits */
                int rc = vdn_dit_forward_host(wp[0], NULL, &alts[a].opts, text, &in, sv[0], sa[0],
                                              0, NULL, err, sizeof err);
                int ok = rc == 0 && same_bits("plain video", alts[a].name, rv, sv[0], nv) &&
                         same_bits("plain audio", alts[a].name, ra, sa[0], na);
                fails += !ok, runs++;
                printf("%-28s %-15s plain, default vs %s: %s%s\n", prompts[p],
                       vdn_attn_mode_name(mode), alts[a].name, ok ? "same bits ok" : "FAIL ",
                       rc ? err : "");
            }
            for (int k = 0; k < nplist; k++) {
                const int P = plist[k];
                runs++;
                uint64_t got[MAX_P];
                const int rc =
                    forward_ranks(wp, P, inproc, NULL, text, &in, sv, sa, got, err, sizeof err);
                if (rc) {
                    printf("%-28s %-15s P=%d%s: %s FAIL\n", prompts[p], vdn_attn_mode_name(mode), P,
                           gpus ? " devices" : "", err);
                    fails++;
                    continue;
                }
                double worst_v = 0, worst_a = 0;
                for (int r = 0; r < P; r++) {
                    double ev = rel(rv, sv[r], nv), ea = na ? rel(ra, sa[r], na) : 0;
                    if (!(ev <= worst_v)) worst_v = ev; /* NaN sticks */
                    if (!(ea <= worst_a)) worst_a = ea;
                }
                int ok = worst_v <= tol && worst_a <= tol;
                fails += !ok;
                printf("%-28s %-15s P=%d%s (%d rows): video %.2e audio %.2e %s\n", prompts[p],
                       vdn_attn_mode_name(mode), P, gpus ? " devices" : "", L->n_rows, worst_v,
                       worst_a, ok ? "ok" : "FAIL");
                for (int r = 0; r < P && check_bytes; r++) {
                    const uint64_t want = expected_bytes(c, L, &in.plan, P, r,
                                                         vdn_dtype_size(vdn_dev_act_dtype(dev[0])));
                    fails += got[r] != want, runs++;
                    printf("%-28s %-15s P=%d rank %d received %llu bytes, expected %llu %s\n",
                           prompts[p], vdn_attn_mode_name(mode), P, r, (unsigned long long)got[r],
                           (unsigned long long)want, got[r] == want ? "ok" : "FAIL");
                }
                for (int a = 0; a < n_alt; a++) { /* every rank again switched: the same bits */
                    const char *an = alts[a].name;
                    int rc2 = forward_ranks(wp, P, inproc, &alts[a].opts, text, &in, ov, oa, NULL,
                                            err, sizeof err);
                    int same = rc2 == 0;
                    for (int r = 0; r < P && same; r++)
                        same = same_bits("sharded video", an, sv[r], ov[r], nv) &&
                               same_bits("sharded audio", an, sa[r], oa[r], na);
                    fails += !same, runs++;
                    printf("%-28s %-15s P=%d, default vs %s: %s%s\n", prompts[p],
                           vdn_attn_mode_name(mode), P, an, same ? "same bits ok" : "FAIL ",
                           rc2 ? err : "");
                }
            }
            if (nccl) {
                if (!be->comm_open) {
                    printf("skip: --nccl: this build has no NCCL communicator\n");
                    return 77;
                }
                char id[VDN_COMM_ID_BYTES];
                vdn_comm *cm = be->comm_unique_id(id, err, sizeof err) == 0
                                   ? be->comm_open(dev[0], 0, 1, id, err, sizeof err)
                                   : NULL;
                int rc = cm ? vdn_dit_forward_host(wp[0], cm, NULL, text, &in, sv[0], sa[0], 0,
                                                   NULL, err, sizeof err)
                            : -1;
                double ev = rc ? INFINITY : rel(rv, sv[0], nv),
                       ea = rc || !na ? 0 : rel(ra, sa[0], na);
                int ok = rc == 0 && ev <= tol && ea <= tol;
                fails += !ok, runs++;
                printf("%-28s %-15s nccl P=1: video %.2e audio %.2e %s %s\n", prompts[p],
                       vdn_attn_mode_name(mode), ev, ea, ok ? "ok" : "FAIL", rc ? err : "");
                vdn_comm_free(cm);
            }
            if (reps > 0) { /* the plain forward and the sharded one at P = 1, device-resident */
                char ge[VDN_ERR_LEN];
                vdn_comm_group *g = vdn_comm_group_new(1, ge, sizeof ge);
                vdn_comm *cm = vdn_comm_inproc(g, 0, dev[0]);
                double t_plain = 0, t_shard = 0;
                int rc = vdn_dit_forward_host(wp[0], NULL, NULL, text, &in, NULL, NULL, reps,
                                              &t_plain, err, sizeof err) ||
                         vdn_dit_forward_host(wp[0], cm, NULL, text, &in, NULL, NULL, reps,
                                              &t_shard, err, sizeof err);
                printf("time %-15s %d rows: plain %.3f ms, sharded P=1 %.3f ms (%+.1f%%)%s%s\n",
                       vdn_attn_mode_name(mode), L->n_rows, t_plain * 1e3, t_shard * 1e3,
                       100.0 * (t_shard - t_plain) / t_plain, rc ? " FAILED: " : "", rc ? err : "");
                fails += rc != 0;
                for (int a = 0; a < n_alt && rc == 0; a++) { /* the plain forward switched */
                    double t_alt = 0;
                    rc = vdn_dit_forward_host(wp[0], NULL, &alts[a].opts, text, &in, NULL, NULL,
                                              reps, &t_alt, err, sizeof err);
                    printf("time %-15s %d rows: plain %.3f ms, %s %.3f ms (%+.1f%%)%s%s\n",
                           vdn_attn_mode_name(mode), L->n_rows, t_plain * 1e3, alts[a].name,
                           t_alt * 1e3, 100.0 * (t_alt - t_plain) / t_plain, rc ? " FAILED: " : "",
                           rc ? err : "");
                    fails += rc != 0;
                }
                vdn_comm_free(cm);
                vdn_comm_group_free(g);
            }
        }
        for (int r = 0; r < maxp; r++)
            free(sv[r]), free(sa[r]), free(ov[r]), free(oa[r]);
        free(vx), free(ax), free(cx), free(rv), free(ra), free(tags), free(text);
        vdn_seq_free(&s);
        vdn_prompt_free(&pr);
    }
    for (int r = 0; r < maxp; r++) {
        vdn_dit_weights_free(&wts[r]);
        vdn_dev_close(dev[r]);
    }
    vdn_ckpt_close(ck);
    printf("dit_shard_compare %s, %d runs: %s\n", name, runs, fails ? "FAILED" : "ok");
    return fails ? 1 : 0;
}
