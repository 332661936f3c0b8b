/* `vdn bench --whole --gpus K[,K...]` and `--independent K` (issue 14): the whole model over
 * several engines, one per device (CUDA: GPUs 0..K-1, each with its own random weights made on
 * it from the same seed, so every copy is the same; --cpu: K CPU engines), opened at once on K
 * threads (the H3's weights take about a minute to make on each device).
 *
 * --gpus: for each variant and each K of the list (in its order: 8,4,2,1 puts the largest first,
 * for a run that may be cut short), one clip rendered by vdn_engine_render_group over engines
 * 0..K-1 with the communicator vdn_engine_group_check picks (NCCL between GPUs, in-process on the
 * CPU). Reported: rank 0's median s/NFE after the warm-up, speed-up and efficiency against the
 * K = 1 row (once every K of the variant ran), each device's peak memory in that render, the
 * latents' relative RMS against the K = 1 render of the same request (0 on the CPU: bit for bit),
 * clips per hour for a clip of --steps N evaluations, and per rank its evaluation time, collectives
 * and bytes received. --comm-profile appends one more evaluation to every render of the list, in
 * which (K >= 2) each collective is profiled (comm.h: a device sync and a barrier before it, a sync
 * after), and splits that evaluation per rank into wait (for the slowest rank), collective (data
 * movement) and compute (the rest). It is not among the timed ones; K = 1 runs it too (nothing to
 * profile there) so that every K renders the same request.
 *
 * --independent K: K one-engine renders at once, engine i on its own thread (a worker's K
 * one-GPU jobs on one machine): each render's median s/NFE, the batch's wall time and clips per
 * hour for the --steps N clip, to set beside one K-GPU render at a time (the --gpus row). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_whole.h"
#include "comm.h"
#include "dit.h"
#include "engine.h"
#include "safetensors.h"
#include "vdn_util.h"

#define GIB (1024.0 * 1024 * 1024)

typedef struct {
    const vdn_bench_whole_opts *o;
    const char *dir, *prompt;
    vdn_engine *eng[VDN_BENCH_MAX_ENGINES];
    int n_eng;
    cJSON *json; /* the report */
} group_ctx;

/* ---- engines, one per device, made at once ---- */

typedef struct {
    const vdn_bench_whole_opts *o;
    const vdn_config *cfg;
    vdn_engine **eng;
    double *load_s;
    char (*err)[VDN_ERR_LEN];
} open_job;

static int open_one(int i, void *arg) {
    open_job *j = arg;
    vdn_weight_source src = vdn_weight_source_random(j->o->seed); /* its own pool per device */
    const double t0 = vdn_now();
    const vdn_engine_opts eo = whole_engine_opts(j->o, i);
    j->eng[i] = vdn_engine_open_source(j->cfg, &src, WHOLE_LABEL, &eo, j->err[i], VDN_ERR_LEN);
    j->load_s[i] = vdn_now() - t0;
    vdn_weight_source_random_free(&src);
    return j->eng[i] ? 0 : -1;
}

static int open_engines(group_ctx *g, const vdn_config *cfg) {
    const int n = g->n_eng;
    double load_s[VDN_BENCH_MAX_ENGINES] = {0};
    char(*err)[VDN_ERR_LEN] = vdn_xcalloc((size_t)n, sizeof *err);
    open_job j = {g->o, cfg, g->eng, load_s, err};
    int failed = vdn_comm_run_ranks(n, open_one, &j);
    for (int i = 0; i < n; i++)
        if (!g->eng[i])
            fprintf(stderr, "vdn bench --whole: engine %d (%s %d): %s\n", i,
                    g->o->cpu ? "CPU engine" : "GPU", i, err[i]);
    free(err);
    if (failed) return -1;
    double slowest = 0;
    for (int i = 0; i < n; i++)
        slowest = load_s[i] > slowest ? load_s[i] : slowest;
    const double weights_gib = (double)vdn_engine_memory_used(g->eng[0]) / GIB;
    printf("-- whole model: %s, %d blocks, %s backend, %s, %d engines (weights %.2f GiB each, made "
           "at once in %.1f s) --\n",
           g->o->preset, cfg->layers, vdn_engine_backend_name(g->eng[0]), g->o->precision, n,
           weights_gib, slowest);
    cJSON_AddNumberToObject(g->json, "load_seconds", slowest);
    cJSON_AddNumberToObject(g->json, "weights_gib", weights_gib);
    cJSON_AddNumberToObject(g->json, "engines", n);
    return 0;
}

/* ---- one row: per-rank times of the render just made ---- */

/* relative RMS of b against a over float32 tensor `name` of two safetensors files (-1: unreadable
 * or different shapes, with a message) */
static double rel_rms(const char *a, const char *b, const char *name) {
    char err[VDN_ERR_LEN];
    vdn_st_file *fa = vdn_st_open(a, err, sizeof err),
                *fb = fa ? vdn_st_open(b, err, sizeof err) : NULL;
    const vdn_st_entry *ea = fa ? vdn_st_find(fa, name) : NULL,
                       *eb = fb ? vdn_st_find(fb, name) : NULL;
    double r = -1;
    if (ea && eb && ea->numel == eb->numel && ea->dtype == VDN_DT_F32 && eb->dtype == VDN_DT_F32) {
        const float *x = ea->data, *y = eb->data;
        double num = 0, den = 0;
        for (int64_t i = 0; i < ea->numel; i++) {
            const double d = (double)y[i] - x[i];
            num += d * d, den += (double)x[i] * x[i];
        }
        r = den > 0 ? sqrt(num / den) : sqrt(num);
    } else {
        fprintf(stderr, "vdn bench --whole: cannot compare %s of %s and %s%s%s\n", name, a, b,
                fa && fb ? "" : ": ", fa && fb ? "" : err);
    }
    vdn_st_close(fb);
    vdn_st_close(fa);
    return r;
}

/* the request's times on engine e: mean per timed NFE and per profiled NFE, into a JSON row */
static cJSON *rank_json(const vdn_bench_whole_opts *o, vdn_engine *e, int rank, int steps,
                        double *prof_parts) {
    vdn_nfe_time *t = vdn_xcalloc((size_t)steps, sizeof *t);
    const int n = vdn_engine_nfe_times(e, t, steps);
    double nfe = 0, calls = 0, bytes = 0, pn = 0, pw = 0, pc = 0;
    int timed = 0, prof = 0;
    for (int k = o->warmup; k < n; k++) {
        if (t[k].profiled) {
            pn += t[k].nfe_s, pw += t[k].wait_s, pc += t[k].collective_s, prof++;
        } else if (k < o->warmup + o->nfe) {
            nfe += t[k].nfe_s, calls += (double)t[k].collectives, bytes += (double)t[k].bytes;
            timed++;
        }
    }
    free(t);
    cJSON *r = cJSON_CreateObject();
    cJSON_AddNumberToObject(r, "rank", rank);
    cJSON_AddStringToObject(r, "device", vdn_dev_name(vdn_engine_device(e)));
    cJSON_AddNumberToObject(r, "nfe_s", timed ? nfe / timed : 0);
    cJSON_AddNumberToObject(r, "collectives_per_nfe", timed ? calls / timed : 0);
    cJSON_AddNumberToObject(r, "mb_received_per_nfe", timed ? bytes / timed / 1e6 : 0);
    cJSON_AddNumberToObject(r, "peak_gib", (double)vdn_engine_memory_peak(e) / GIB);
    cJSON_AddNumberToObject(r, "profiled_nfe", prof);
    if (prof) { /* compute is what the evaluation spent outside the collectives and their waits */
        prof_parts[0] = pn / prof, prof_parts[1] = pw / prof, prof_parts[2] = pc / prof;
        cJSON *p = cJSON_AddObjectToObject(r, "profile");
        cJSON_AddNumberToObject(p, "nfe_s", prof_parts[0]);
        cJSON_AddNumberToObject(p, "compute_s", prof_parts[0] - prof_parts[1] - prof_parts[2]);
        cJSON_AddNumberToObject(p, "collective_s", prof_parts[2]);
        cJSON_AddNumberToObject(p, "wait_s", prof_parts[1]);
    }
    return r;
}

static double clips_per_hour(double fixed_s, int steps, double s_per_nfe) {
    const double clip = fixed_s + steps * s_per_nfe;
    return clip > 0 ? 3600.0 / clip : 0;
}

/* ---- --gpus: one clip over K engines ---- */

/* one K of a variant, for the comparisons against K = 1 once every K ran (in any order) */
typedef struct {
    int k, ok;
    double median_s;
    cJSON *row;
} group_done;

static int render_group(group_ctx *g, const char *variant, int k, group_done *d, cJSON *rows) {
    const vdn_bench_whole_opts *o = g->o;
    char prefix[4200], err[VDN_ERR_LEN], why[VDN_ERR_LEN];
    snprintf(prefix, sizeof prefix, "%s/%s-g%d", g->dir, variant, k);
    vdn_render_request req;
    whole_request(o, variant, g->prompt, prefix, &req);
    /* the extra evaluation goes into every render of the list, K = 1 too (where there is nothing
     * to profile), so every K renders the same request and the latents compare */
    const int extra = o->comm_profile;
    req.steps += extra, req.comm_profile_last = extra;
    const char *via = vdn_engine_group_check(g->eng, k, why, sizeof why);
    cJSON *row = cJSON_CreateObject();
    cJSON_AddItemToArray(rows, row);
    cJSON_AddStringToObject(row, "variant", variant);
    cJSON_AddNumberToObject(row, "gpus", k);
    cJSON_AddStringToObject(row, "communicator", via ? via : "none");
    *d = (group_done){.k = k, .row = row};
    fprintf(stderr, "vdn bench --whole: %s over %d engine%s (%s), %d + %d%s evaluations\n", variant,
            k, k > 1 ? "s" : "", via ? via : why, o->warmup, o->nfe,
            !extra  ? ""
            : k > 1 ? " + 1 profiled"
                    : " + 1 (as the profiled renders)");
    for (int r = 0; r < k; r++)
        vdn_engine_memory_reset_peak(g->eng[r]);
    whole_nfe_times t = {.s = vdn_xcalloc((size_t)req.steps, sizeof(double)), .n = req.steps};
    const double t0 = vdn_now();
    int rc = via ? vdn_engine_render_group(g->eng, k, &req, whole_on_nfe, &t, err, sizeof err)
                 : vdn_fail(err, sizeof err, "%s", why);
    const double wall = vdn_now() - t0;
    if (rc != 0) {
        fprintf(stderr, "vdn bench --whole: %s over %d: %s\n", variant, k, err);
        printf("%-14s %4d  FAILED: %s\n", variant, k, err);
        cJSON_AddStringToObject(row, "error", err);
        free(t.s);
        return -1;
    }
    double all = 0, med, lo, hi;
    for (int i = 0; i < req.steps; i++)
        all += t.s[i];
    const double fixed = wall - all; /* setup and output: the render's time outside the NFEs */
    whole_stats(t.s + o->warmup, o->nfe, &med, &lo, &hi);
    free(t.s);
    cJSON_AddNumberToObject(row, "median_s_per_nfe", med);
    cJSON_AddNumberToObject(row, "min_s", lo);
    cJSON_AddNumberToObject(row, "max_s", hi);
    cJSON_AddNumberToObject(row, "wall_s", wall);
    cJSON_AddNumberToObject(row, "fixed_s", fixed);
    cJSON_AddNumberToObject(row, "clips_per_hour", clips_per_hour(fixed, o->clip_steps, med));
    double peak = 0;
    cJSON *ranks = cJSON_AddArrayToObject(row, "ranks");
    double parts[VDN_BENCH_MAX_ENGINES][3] = {{0}};
    for (int r = 0; r < k; r++) {
        cJSON_AddItemToArray(ranks, rank_json(o, g->eng[r], r, req.steps, parts[r]));
        const double p = (double)vdn_engine_memory_peak(g->eng[r]) / GIB;
        peak = p > peak ? p : peak;
    }
    cJSON_AddNumberToObject(row, "peak_gib_max", peak);
    d->ok = 1, d->median_s = med;
    printf("%-14s %4d %9.3f s/NFE (min %.3f, max %.3f)  %6.1f clips/h  peak %6.2f GiB\n", variant,
           k, med, lo, hi, clips_per_hour(fixed, o->clip_steps, med), peak);
    for (int r = 0; r < k && extra && k > 1; r++)
        printf("    rank %d: %.3f s = compute %.3f + collective %.3f + wait %.3f (profiled)\n", r,
               parts[r][0], parts[r][0] - parts[r][1] - parts[r][2], parts[r][2], parts[r][1]);
    return 0;
}

/* speed-up, efficiency and the latents of every K against the K = 1 render of the variant */
static void compare_to_one(group_ctx *g, const char *variant, const group_done *d, int n) {
    int one = -1;
    for (int i = 0; i < n; i++)
        if (d[i].ok && d[i].k == 1) one = i;
    if (one < 0) return;
    char ref[4300], mine[4300];
    snprintf(ref, sizeof ref, "%s/%s-g1.safetensors", g->dir, variant);
    for (int i = 0; i < n; i++) {
        if (i == one || !d[i].ok) continue;
        snprintf(mine, sizeof mine, "%s/%s-g%d.safetensors", g->dir, variant, d[i].k);
        const double rv = rel_rms(ref, mine, "video"), ra = rel_rms(ref, mine, "audio");
        const double speedup = d[one].median_s / d[i].median_s;
        cJSON_AddNumberToObject(d[i].row, "speedup", speedup);
        cJSON_AddNumberToObject(d[i].row, "efficiency", speedup / d[i].k);
        cJSON_AddNumberToObject(d[i].row, "rel_err_video_vs_1", rv);
        cJSON_AddNumberToObject(d[i].row, "rel_err_audio_vs_1", ra);
        printf("%-14s %4d  %5.2fx of 1 GPU, %3.0f%% efficiency; latents vs 1 GPU: video %.1e, "
               "audio %.1e\n",
               variant, d[i].k, speedup, 100 * speedup / d[i].k, rv, ra);
    }
}

/* ---- --independent: K one-engine renders at once ---- */

typedef struct {
    group_ctx *g;
    const char *variant;
    double total_s[VDN_BENCH_MAX_ENGINES], median_s[VDN_BENCH_MAX_ENGINES], fixed_s[VDN_BENCH_MAX_ENGINES];
    char (*err)[VDN_ERR_LEN];
} indep_job;

static int indep_one(int i, void *arg) {
    indep_job *j = arg;
    const vdn_bench_whole_opts *o = j->g->o;
    char prefix[4200];
    snprintf(prefix, sizeof prefix, "%s/%s-i%d", j->g->dir, j->variant, i);
    vdn_render_request req;
    whole_request(o, j->variant, j->g->prompt, prefix, &req);
    whole_nfe_times t = {
        .s = vdn_xcalloc((size_t)req.steps, sizeof(double)), .n = req.steps, .quiet = 1};
    vdn_engine_memory_reset_peak(j->g->eng[i]);
    const double t0 = vdn_now();
    int rc = vdn_engine_render(j->g->eng[i], &req, whole_on_nfe, &t, j->err[i], VDN_ERR_LEN);
    j->total_s[i] = vdn_now() - t0;
    if (rc == 0) {
        double all = 0, lo, hi;
        for (int s = 0; s < req.steps; s++)
            all += t.s[s];
        j->fixed_s[i] = j->total_s[i] - all;
        whole_stats(t.s + o->warmup, o->nfe, &j->median_s[i], &lo, &hi);
    }
    free(t.s);
    return rc;
}

static int render_independent(group_ctx *g, const char *variant, cJSON *rows) {
    const vdn_bench_whole_opts *o = g->o;
    const int k = o->independent;
    indep_job j = {.g = g, .variant = variant};
    j.err = vdn_xcalloc((size_t)k, sizeof *j.err);
    fprintf(stderr, "vdn bench --whole: %d one-engine renders of %s at once, %d + %d evaluations\n",
            k, variant, o->warmup, o->nfe);
    const double t0 = vdn_now();
    const int failed = vdn_comm_run_ranks(k, indep_one, &j);
    const double wall = vdn_now() - t0;
    cJSON *row = cJSON_CreateObject();
    cJSON_AddItemToArray(rows, row);
    cJSON_AddStringToObject(row, "variant", variant);
    cJSON_AddNumberToObject(row, "renders", k);
    cJSON_AddNumberToObject(row, "wall_s", wall);
    cJSON *each = cJSON_AddArrayToObject(row, "each");
    double per_hour = 0, meds[VDN_BENCH_MAX_ENGINES], med = 0, lo = 0, hi = 0;
    for (int i = 0; i < k; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddItemToArray(each, e);
        cJSON_AddStringToObject(e, "device", vdn_dev_name(vdn_engine_device(g->eng[i])));
        if (j.err[i][0]) {
            fprintf(stderr, "vdn bench --whole: %s on engine %d: %s\n", variant, i, j.err[i]);
            cJSON_AddStringToObject(e, "error", j.err[i]);
            continue;
        }
        cJSON_AddNumberToObject(e, "median_s_per_nfe", j.median_s[i]);
        cJSON_AddNumberToObject(e, "total_s", j.total_s[i]);
        cJSON_AddNumberToObject(e, "fixed_s", j.fixed_s[i]);
        cJSON_AddNumberToObject(e, "peak_gib", (double)vdn_engine_memory_peak(g->eng[i]) / GIB);
        per_hour += clips_per_hour(j.fixed_s[i], o->clip_steps, j.median_s[i]);
        meds[i] = j.median_s[i];
    }
    free(j.err);
    if (failed) {
        printf("%-14s %d at once: %d of %d renders FAILED\n", variant, k, failed, k);
        cJSON_AddNumberToObject(row, "failed", failed);
        return -1;
    }
    whole_stats(meds, k, &med, &lo, &hi);
    cJSON_AddNumberToObject(row, "median_s_per_nfe", med);
    cJSON_AddNumberToObject(row, "min_s", lo);
    cJSON_AddNumberToObject(row, "max_s", hi);
    cJSON_AddNumberToObject(row, "clips_per_hour", per_hour);
    printf("%-14s %d at once: %.3f s/NFE each (median of renders; min %.3f, max %.3f), "
           "wall %.1f s, %.1f clips/h of %d steps\n",
           variant, k, med, lo, hi, wall, per_hour, o->clip_steps);
    return 0;
}

/* ---- the run ---- */

static int write_report(const vdn_bench_whole_opts *o, cJSON *json) {
    char *text = cJSON_Print(json);
    FILE *f = fopen(o->json, "w");
    int rc = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF ? 0 : -1;
    if (f && fclose(f) != 0) rc = -1;
    if (rc) fprintf(stderr, "vdn bench --whole: %s: cannot write (%s)\n", o->json, strerror(errno));
    free(text);
    return rc;
}

/* the table's lines and the report so far, written out after every render */
static void progress_out(const vdn_bench_whole_opts *o, cJSON *json) {
    fflush(stdout);
    if (o->json) write_report(o, json);
}

int whole_run_group(const vdn_bench_whole_opts *o, const vdn_config *cfg, const char *dir,
                    const char *prompt) {
    group_ctx g = {.o = o, .dir = dir, .prompt = prompt, .n_eng = whole_engines(o)};
    g.json = cJSON_CreateObject();
    cJSON *j = g.json;
    cJSON_AddStringToObject(j, "preset", o->preset);
    cJSON_AddNumberToObject(j, "layers", cfg->layers);
    cJSON_AddNumberToObject(j, "latent_frames", o->frames);
    cJSON_AddNumberToObject(j, "height", o->height);
    cJSON_AddNumberToObject(j, "width", o->width);
    cJSON_AddNumberToObject(j, "text_rows", o->text);
    cJSON_AddNumberToObject(j, "nfe", o->nfe);
    cJSON_AddNumberToObject(j, "warmup", o->warmup);
    cJSON_AddStringToObject(j, "backend", o->cpu ? "cpu" : "cuda");
    cJSON_AddStringToObject(j, "precision", o->precision);
    cJSON_AddNumberToObject(j, "clip_steps", o->clip_steps);
    cJSON_AddBoolToObject(j, "comm_profile", o->comm_profile);
    cJSON *gl = cJSON_AddArrayToObject(j, "gpus");
    for (int i = 0; i < o->n_gpus; i++)
        cJSON_AddItemToArray(gl, cJSON_CreateNumber(o->gpus[i]));
    cJSON_AddNumberToObject(j, "independent", o->independent);
    int rc = open_engines(&g, cfg);
    if (rc) cJSON_AddStringToObject(j, "error", "an engine did not open (see the messages)");
    cJSON *groups = cJSON_AddArrayToObject(j, "groups");
    cJSON *indep = cJSON_AddArrayToObject(j, "independent_runs");
    char list[256];
    snprintf(list, sizeof list, "%s", o->variants);
    int failed = 0; /* reported; every K and variant still runs (a K = 1 out of memory says
                       nothing of K = 8) */
    for (char *save = NULL, *v = strtok_r(list, ",", &save); v && rc == 0;
         v = strtok_r(NULL, ",", &save)) {
        if (o->n_gpus) printf("%-14s %4s %9s\n", "variant", "GPUs", "s/NFE");
        group_done done[VDN_BENCH_MAX_GPU_LIST];
        for (int i = 0; i < o->n_gpus; i++) {
            failed |= render_group(&g, v, o->gpus[i], &done[i], groups) != 0;
            progress_out(o, j); /* a run stopped by a time limit keeps what it measured */
        }
        compare_to_one(&g, v, done, o->n_gpus);
        progress_out(o, j);
        if (o->independent) {
            failed |= render_independent(&g, v, indep) != 0;
            progress_out(o, j);
        }
    }
    if (failed) rc = -1;
    for (int i = 0; i < g.n_eng; i++)
        vdn_engine_close(g.eng[i]);
    if (o->json && write_report(o, j) != 0) rc = -1;
    cJSON_Delete(j);
    return rc;
}
