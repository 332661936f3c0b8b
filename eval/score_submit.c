/* `vdn eval score SWEEP.json`: a scoring job (score_job.h) per stored output of a sweep, submitted
 * through the coordinator as one batch; `vdn eval report` then reads their results from the
 * store instead of scoring in its own process. */
#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "score_job.h"
#include "scorer.h"
#include "store.h"
#include "suite.h"
#include "sweep.h"
#include "vdn_util.h"

void vdn_eval_pick_strips(const vdn_suite *suite, int n_strips, int *strip_of) {
    int chosen = 0, np = suite->n;
    for (int p = 0; p < np; p++)
        strip_of[p] = 0;
    for (int mode = 0; mode < 4 && chosen < n_strips; mode++)
        for (int p = 0; p < np; p++)
            if ((int)suite->items[p].mode == mode) {
                strip_of[p] = 1;
                chosen++;
                break;
            }
    for (int p = 0; p < np && chosen < n_strips; p++)
        if (!strip_of[p]) strip_of[p] = 1, chosen++;
}

static void usage(FILE *f) {
    fprintf(
        f, "usage: vdn eval score SWEEP.json [--dir UPDIR | --coordinator ENDPOINT]\n"
           "                      [--scorers CONF.json] [--strips N] [--priority P]\n"
           "                      [--wait] [--timeout SECONDS]\n"
           "Submits a scoring job per stored output of the sweep that has no result yet (decode,\n"
           "flow, PSNR/SSIM to the baseline and to the keyframe pictures, its frame strip, the\n"
           "external scorers of CONF run on the worker) as one batch tagged TAG-score. Results go\n"
           "to eval/TAG/scores/PROMPT/VARIANT.json in the sweep's store, where `vdn eval report`\n"
           "finds them. --wait polls until the batch is finished.\n");
}

/* The mp4 of a pair: its latents key with .mp4 */
static void mp4_of(const vdn_sweep_pair *q, char *out, size_t len) {
    size_t n = strlen(q->video_key), m = strlen(".safetensors");
    if (n >= m && !strcmp(q->video_key + n - m, ".safetensors")) n -= m;
    snprintf(out, len, "%.*s.mp4", (int)n, q->video_key);
}

/* The work of one output (score_job.h), as JSON text. */
static char *work_of(const vdn_sweep *sw, const vdn_suite_item *it, const vdn_sweep_pair *q,
                     const vdn_sweep_pair *bq, char *const pics[2], int strip, const cJSON *scorers,
                     vdn_store *st) {
    char key[1200], err[VDN_ERR_LEN];
    cJSON *w = cJSON_CreateObject();
    cJSON_AddNumberToObject(w, "v", 1);
    cJSON_AddStringToObject(w, "id", it->id);
    cJSON_AddStringToObject(w, "variant", q->variant);
    cJSON_AddStringToObject(w, "prompt", it->prompt);
    mp4_of(q, key, sizeof key);
    cJSON_AddStringToObject(w, "mp4", key);
    if (bq && bq != q) {
        mp4_of(bq, key, sizeof key);
        if (vdn_store_exists(st, key, NULL, err, sizeof err) == 1)
            cJSON_AddStringToObject(w, "baseline_mp4", key);
    }
    cJSON_AddStringToObject(w, "record", q->record_key);
    if (vdn_store_exists(st, q->video_key, NULL, err, sizeof err) == 1)
        cJSON_AddStringToObject(w, "latents", q->video_key);
    if (pics[0]) cJSON_AddStringToObject(w, "first", pics[0]);
    if (pics[1]) cJSON_AddStringToObject(w, "last", pics[1]);
    cJSON_AddNumberToObject(w, "height", it->height);
    cJSON_AddNumberToObject(w, "width", it->width);
    cJSON *e = cJSON_AddArrayToObject(w, "endpoints");
    cJSON_AddItemToArray(e, cJSON_CreateBool(vdn_suite_mode_first(it->mode)));
    cJSON_AddItemToArray(e, cJSON_CreateBool(vdn_suite_mode_last(it->mode)));
    if (strip) { /* as the report's decoded strips: at most 96 pixels tall */
        int th = it->height < 96 ? it->height : 96;
        int tw = (int)lround((double)it->width * th / it->height);
        cJSON *s = cJSON_AddObjectToObject(w, "strip");
        cJSON_AddNumberToObject(s, "cols", 6);
        cJSON_AddNumberToObject(s, "tile_w", tw < 1 ? 1 : tw);
        cJSON_AddNumberToObject(s, "tile_h", th);
    }
    if (scorers) cJSON_AddItemToObject(w, "scorers", cJSON_Duplicate(scorers, 1));
    (void)sw;
    char *text = cJSON_PrintUnformatted(w);
    cJSON_Delete(w);
    return text;
}

/* eval/TAG/scores/PROMPT/VARIANT_KEY */
static void score_prefix(const vdn_sweep *sw, const char *id, const char *vkey, char *out,
                         size_t len) {
    snprintf(out, len, "eval/%s/scores/%s/%s", sw->tag, id, vkey);
}

static int wait_batch(vdn_client *c, uint64_t batch, double timeout_s) {
    char target[32], err[VDN_ERR_LEN];
    snprintf(target, sizeof target, "b%llu", (unsigned long long)batch);
    double t0 = vdn_now(), last = -10;
    for (;;) {
        Vdn__StatusReply *s = vdn_client_status(c, target, err, sizeof err);
        long open = 1, done = 0, failed = 0, total = 0;
        if (s && s->n_batches) {
            const Vdn__BatchInfo *b = s->batches[0];
            open = b->n_queued + b->n_running;
            done = b->n_done;
            failed = b->n_failed + b->n_cancelled;
            total = open + done + failed;
        }
        vdn_client_free(s);
        if (vdn_now() - last > 5 || !open) {
            fprintf(stderr, "eval score: %ld/%ld scoring jobs done, %ld failed (%.0f s)\n", done,
                    total, failed, vdn_now() - t0);
            last = vdn_now();
        }
        if (!open) return failed ? 1 : 0;
        if (timeout_s > 0 && vdn_now() - t0 > timeout_s) {
            fprintf(stderr, "eval score: --timeout %.0f s reached\n", timeout_s);
            return 1;
        }
        usleep(300 * 1000);
    }
}

int vdn_eval_score_main(int argc, char **argv, const vdn_client_env *env) {
    const char *sweep_path = NULL, *dir = NULL, *coord = NULL, *scorers_path = NULL;
    int n_strips = 4, wait = 0, priority = 0;
    double timeout_s = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--wait")) {
            wait = 1;
        } else if (a[0] == '-' && a[1] == '-' && v) {
            i++;
            if (!strcmp(a, "--dir"))
                dir = v;
            else if (!strcmp(a, "--coordinator"))
                coord = v;
            else if (!strcmp(a, "--scorers"))
                scorers_path = v;
            else if (!strcmp(a, "--strips"))
                n_strips = atoi(v);
            else if (!strcmp(a, "--priority"))
                priority = atoi(v);
            else if (!strcmp(a, "--timeout"))
                timeout_s = atof(v);
            else {
                fprintf(stderr, "vdn eval score: unknown option %s\n", a);
                return 2;
            }
        } else if (a[0] != '-' && !sweep_path) {
            sweep_path = a;
        } else {
            fprintf(stderr, "vdn eval score: unexpected argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!sweep_path || n_strips < 0 || n_strips > 1000) {
        usage(stderr);
        return 2;
    }
    char err[VDN_ERR_LEN];
    vdn_sweep sw;
    vdn_suite suite;
    if (vdn_sweep_load(sweep_path, &sw, err, sizeof err)) {
        fprintf(stderr, "vdn eval score: %s\n", err);
        return 1;
    }
    if (vdn_suite_load(sw.suite, &suite, err, sizeof err)) {
        fprintf(stderr, "vdn eval score: %s\n", err);
        vdn_sweep_free(&sw);
        return 1;
    }
    int rc = 1, n_jobs = 0, n_busy = 0, have = 0, missing = 0;
    cJSON *scorers = NULL;
    vdn_store *st = NULL;
    vdn_client *c = NULL;
    char **busy = NULL;
    vdn_job_spec *jobs = vdn_xcalloc((size_t)sw.n_pairs + 1, sizeof *jobs);
    int *strip_of = vdn_xcalloc((size_t)suite.n + 1, sizeof *strip_of);
    vdn_eval_pick_strips(&suite, n_strips, strip_of);
    if (scorers_path) {
        size_t len;
        vdn_scorer_set set;
        char *text = vdn_read_file(scorers_path, &len, err, sizeof err);
        if (!text || vdn_scorers_parse(text, len, scorers_path, &set, err, sizeof err)) {
            fprintf(stderr, "vdn eval score: %s\n", err);
            free(text);
            goto done;
        }
        vdn_scorers_free(&set);
        scorers = cJSON_Parse(text);
        free(text);
    }
    vdn_client_conf conf;
    vdn_client_opts copts;
    if (vdn_client_resolve(coord, dir, NULL, NULL, env, &conf, &copts, err, sizeof err)) {
        fprintf(stderr, "vdn eval score: %s\n", err);
        goto done;
    }
    if (!(st = vdn_store_open(sw.store, NULL, err, sizeof err))) {
        fprintf(stderr, "vdn eval score: store %s: %s\n", sw.store, err);
        goto done;
    }
    if (!(c = vdn_client_open(&copts, err, sizeof err))) {
        fprintf(stderr, "vdn eval score: coordinator %s: %s\n", copts.endpoint, err);
        goto done;
    }
    char btag[200];
    snprintf(btag, sizeof btag, "%s-score", sw.tag);
    if (!(busy = vdn_sweep_inflight_tags(c, btag, &n_busy, err, sizeof err))) {
        fprintf(stderr, "vdn eval score: coordinator: %s\n", err);
        goto done;
    }
    for (int p = 0; p < suite.n; p++) {
        const vdn_suite_item *it = &suite.items[p];
        char *pics[2] = {NULL, NULL};
        const char *names[2] = {it->first_frame, it->last_frame};
        for (int k = 0; k < 2; k++)
            if (names[k] &&
                vdn_sweep_picture_input(&suite, st, sw.tag, it->id, k ? "last" : "first", names[k],
                                        1, &pics[k], err, sizeof err)) {
                fprintf(stderr, "vdn eval score: %s:%d: %s\n", suite.path, it->line, err);
                free(pics[0]);
                goto done;
            }
        const vdn_sweep_pair *bq = vdn_sweep_find(&sw, it->id, sw.baseline);
        for (int v = 0; v < sw.n_variants; v++) {
            const vdn_sweep_pair *q = vdn_sweep_find(&sw, it->id, sw.variants[v].name);
            char prefix[1200], key[1300], jtag[300];
            if (!q) continue;
            score_prefix(&sw, it->id, sw.variants[v].key, prefix, sizeof prefix);
            snprintf(key, sizeof key, "%s.json", prefix);
            if (vdn_store_exists(st, key, NULL, err, sizeof err) == 1) {
                have++;
                continue;
            }
            mp4_of(q, key, sizeof key);
            if (vdn_store_exists(st, key, NULL, err, sizeof err) != 1) {
                missing++;
                continue;
            }
            snprintf(jtag, sizeof jtag, "%s/%s/score", it->id, q->variant);
            int flying = 0;
            for (int k = 0; k < n_busy; k++)
                flying |= !strcmp(busy[k], jtag);
            if (flying) continue;
            vdn_job_spec *j = &jobs[n_jobs++];
            j->kind = vdn_xstrdup("score");
            j->score = work_of(&sw, it, q, bq, pics, strip_of[p], scorers, st);
            j->output_prefix = vdn_xstrdup(prefix);
            j->tag = vdn_xstrdup(jtag);
        }
        free(pics[0]);
        free(pics[1]);
    }
    fprintf(stderr,
            "eval score %s: %d outputs scored already, %d without an mp4, %d in flight, %d to "
            "submit\n",
            sw.tag, have, missing, n_busy, n_jobs);
    rc = 0;
    if (n_jobs) {
        uint64_t batch = 0;
        char source[PATH_MAX + 32];
        snprintf(source, sizeof source, "vdn eval score %s", sweep_path);
        if (vdn_client_submit(c, jobs, n_jobs, btag, priority, source, &batch, NULL, err,
                              sizeof err)) {
            fprintf(stderr, "vdn eval score: submit: %s\n", err);
            rc = 1;
            goto done;
        }
        printf("batch b%llu: %d scoring jobs (tag %s)\n", (unsigned long long)batch, n_jobs, btag);
        fflush(stdout);
        if (wait) rc = wait_batch(c, batch, timeout_s);
    }
done:
    for (int k = 0; k < n_jobs; k++)
        vdn_job_spec_free(&jobs[k]);
    free(jobs);
    for (int k = 0; k < n_busy; k++)
        free(busy[k]);
    free(busy);
    free(strip_of);
    cJSON_Delete(scorers);
    if (c) vdn_client_close(c);
    if (st) vdn_store_close(st);
    vdn_suite_free(&suite);
    vdn_sweep_free(&sw);
    return rc;
}
