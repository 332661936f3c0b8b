/* `vdn eval sweep`: submit every (prompt, variant) pair of a suite through the coordinator as one
 * tagged batch, resumable. See sweep.h for the layout in the store. */
#include "sweep.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "store.h"
#include "suite.h"
#include "vdn_util.h"

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: vdn eval sweep SUITE --variants dense@50,vdn@8,... [--checkpoint CKPT]\n"
        "                      [--dir UPDIR | --coordinator ENDPOINT] [--store URI]\n"
        "                      [--baseline NAME] [--tag TAG] [--out SWEEP.json]\n"
        "                      [--steps-override K] [--require-checkpoint NAME]\n"
        "                      [--upload-caches] [--priority P] [--wait] [--timeout SECONDS]\n"
        "                      [--no-latents] [--for-keyframes]\n"
        "Submits every (prompt, variant) pair of SUITE (a suite.jsonl) as one tagged batch and\n"
        "writes the sweep manifest (default SUITE_DIR/sweeps/TAG.json). Re-running submits only\n"
        "pairs with no output in the store and no job still queued or running.\n"
        "--steps-override K renders every variant with K model evaluations (CI speed).\n"
        "--upload-caches puts local prompt caches and pictures into the store so remote workers\n"
        "can read them.\n"
        "--wait polls until every pair is done or failed (exit 1 if any failed).\n"
        "Jobs store their mp4 and, for the report's latent metrics, their latents (save_latents);\n"
        "--no-latents stores the mp4 only (pixel metrics only; latents still where the\n"
        "checkpoint has no video VAE).\n"
        "--for-keyframes renders only the keyframe-mode lines, from their text alone (no\n"
        "pictures, no cache): the source of `vdn eval suite keyframes --from`.\n");
}

/* FNV-1a over the things that define a sweep's outputs: the default tag stays the same when the
 * same sweep is run again, and changes when variants, steps or the suite change. */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001B3ull;
    return h;
}

typedef struct {
    char *prompt_cache; /* what the job carries */
} pair_input;

/* A pair is done when its run record is in the store (the worker uploads it last) beside its
 * latents or its mp4 (a job stores the latents only when asked: --no-latents). 1, 0, or -1 with
 * a message. */
static int pair_stored(vdn_store *st, const vdn_sweep_pair *q, char *err, size_t errlen) {
    int have = vdn_store_exists(st, q->record_key, NULL, err, errlen);
    if (have <= 0) return have;
    have = vdn_store_exists(st, q->video_key, NULL, err, errlen);
    if (have != 0) return have;
    char mp4[1100];
    size_t n = strlen(q->video_key), m = strlen(".safetensors");
    if (n >= m && !strcmp(q->video_key + n - m, ".safetensors")) n -= m;
    snprintf(mp4, sizeof mp4, "%.*s.mp4", (int)n, q->video_key);
    return vdn_store_exists(st, mp4, NULL, err, errlen);
}

/* A local input file (a prompt cache, a picture) into the store under eval/TAG/inputs/ID_WHAT
 * + the file's extension, once; *path becomes that key. */
static int upload_input(vdn_store *st, const char *tag, const char *id, const char *what,
                        const char *ext, char **path, char *err, size_t errlen) {
    char key[600];
    if (!strcmp(what, "cache"))
        snprintf(key, sizeof key, "eval/%s/caches/%s%s", tag, id, ext);
    else
        snprintf(key, sizeof key, "eval/%s/inputs/%s_%s%s", tag, id, what, ext);
    int have = vdn_store_exists(st, key, NULL, err, errlen);
    if (have < 0) return -1;
    if (!have && vdn_store_put_file(st, key, *path, err, errlen)) return -1;
    free(*path);
    *path = vdn_xstrdup(key);
    return 0;
}

/* What a job carries for a keyframe picture of the suite: a local file as its absolute path
 * (workers on this machine read it; --upload-caches puts it into the store and carries the key
 * instead), a URI or store key as written. */
int vdn_sweep_picture_input(const vdn_suite *suite, vdn_store *st, const char *tag, const char *id,
                            const char *which, const char *name, int upload, char **out, char *err,
                            size_t errlen) {
    char *p = vdn_suite_resolve(suite, name);
    const char *local = !strncmp(p, "file://", 7) ? p + 7 : p;
    if (strstr(local, "://") || access(local, F_OK) != 0) { /* a URI or a store key */
        int missing = local != p || name[0] == '/'; /* file:// or an absolute path: no key */
        free(p);
        if (missing) return vdn_fail(err, errlen, "'%s': no such file", name);
        *out = vdn_xstrdup(name);
        return 0;
    }
    char abs[PATH_MAX];
    if (!realpath(local, abs)) {
        free(p);
        return vdn_fail(err, errlen, "'%s': cannot resolve its path", name);
    }
    free(p);
    *out = vdn_xstrdup(abs);
    if (!upload) return 0;
    const char *dot = strrchr(abs, '.'), *slash = strrchr(abs, '/');
    return upload_input(st, tag, id, which, dot && dot > slash ? dot : "", out, err, errlen);
}

char **vdn_sweep_inflight_tags(vdn_client *c, const char *tag, int *n, char *err, size_t errlen) {
    *n = 0;
    Vdn__ListReply *l = vdn_client_list(c, tag, 1000, err, errlen);
    if (!l) return NULL;
    char **out = NULL;
    int cap = 0;
    for (size_t b = 0; b < l->n_batches; b++) {
        char target[32];
        snprintf(target, sizeof target, "b%llu", (unsigned long long)l->batches[b]->batch_id);
        Vdn__StatusReply *s = vdn_client_status(c, target, err, errlen);
        if (!s) {
            vdn_client_free(l);
            for (int i = 0; i < *n; i++)
                free(out[i]);
            free(out);
            *n = 0;
            return NULL;
        }
        for (size_t j = 0; j < s->n_jobs; j++) {
            const Vdn__JobInfo *ji = s->jobs[j];
            if (!ji->state || !ji->tag) continue;
            if (strcmp(ji->state, "queued") && strcmp(ji->state, "running")) continue;
            if (*n == cap) {
                cap = cap ? 2 * cap : 64;
                char **g = vdn_xmalloc((size_t)cap * sizeof *g);
                if (*n) memcpy(g, out, (size_t)*n * sizeof *g);
                free(out);
                out = g;
            }
            out[(*n)++] = vdn_xstrdup(ji->tag);
        }
        vdn_client_free(s);
    }
    vdn_client_free(l);
    if (!out) out = vdn_xcalloc(1, sizeof *out);
    return out;
}

/* Polls the coordinator (cheap: one status per batch) until no job of the sweep's batches is
 * queued or running, then checks the store once for every pair: 0 when every output is there. */
static int wait_for(vdn_client *c, vdn_store *st, vdn_sweep *sw, double timeout_s) {
    double t0 = vdn_now(), last_print = -10;
    char err[VDN_ERR_LEN];
    for (;;) {
        long queued = 0, running = 0, done = 0, failed = 0, total = 0;
        int unreachable = 0;
        for (int b = 0; b < sw->n_batches; b++) {
            char target[32];
            snprintf(target, sizeof target, "b%llu", (unsigned long long)sw->batches[b]);
            Vdn__StatusReply *s = vdn_client_status(c, target, err, sizeof err);
            if (!s) {
                unreachable = 1;
                break;
            }
            for (size_t k = 0; k < s->n_batches; k++) {
                const Vdn__BatchInfo *bi = s->batches[k];
                queued += bi->n_queued;
                running += bi->n_running;
                done += bi->n_done;
                failed += bi->n_failed + bi->n_cancelled;
                total += bi->n_queued + bi->n_running + bi->n_done + bi->n_failed + bi->n_cancelled;
            }
            vdn_client_free(s);
        }
        if (unreachable) {
            fprintf(stderr, "eval sweep: coordinator: %s (still waiting)\n", err);
        } else if (vdn_now() - last_print > 5 || queued + running == 0) {
            fprintf(stderr,
                    "eval sweep: %ld/%ld jobs done, %ld failed, %ld running, %ld queued (%.0f s)\n",
                    done, total, failed, running, queued, vdn_now() - t0);
            last_print = vdn_now();
        }
        if (!unreachable && queued + running == 0) break;
        if (timeout_s > 0 && vdn_now() - t0 > timeout_s) {
            fprintf(stderr, "eval sweep: --timeout %.0f s reached\n", timeout_s);
            break;
        }
        usleep(300 * 1000);
    }
    int missing = 0;
    for (int i = 0; i < sw->n_pairs; i++) {
        const vdn_sweep_pair *q = &sw->pairs[i];
        int have = pair_stored(st, q, err, sizeof err);
        if (have > 0) continue;
        if (++missing <= 10) {
            char target[32] = "";
            const char *why = have < 0 ? err : "no output in the store", *state = "";
            Vdn__StatusReply *s = NULL;
            if (q->job_id) {
                snprintf(target, sizeof target, "j%llu", (unsigned long long)q->job_id);
                s = vdn_client_status(c, target, err, sizeof err);
                if (s && s->n_jobs && s->jobs[0]->state) state = s->jobs[0]->state;
                if (s && s->n_jobs && s->jobs[0]->last_error && s->jobs[0]->last_error[0])
                    why = s->jobs[0]->last_error;
            }
            fprintf(stderr, "eval sweep: %s/%s%s%s%s%s: %s\n", q->prompt, q->variant,
                    target[0] ? " job " : "", target, state[0] ? " " : "", state, why);
            vdn_client_free(s);
        }
    }
    if (missing)
        fprintf(stderr,
                "eval sweep: %d of %d pairs have no output; the same command again resubmits "
                "those not queued or running\n",
                missing, sw->n_pairs);
    else
        fprintf(stderr, "eval sweep: all %d pairs have their outputs\n", sw->n_pairs);
    return missing ? 1 : 0;
}

int vdn_eval_sweep_main(int argc, char **argv, const vdn_client_env *env) {
    const char *suite_path = NULL, *variants_arg = NULL, *ckpt = NULL, *dir = NULL, *coord = NULL,
               *store_arg = NULL, *baseline = NULL, *tag_arg = NULL, *out = NULL,
               *require_ckpt = NULL;
    int steps_override = 0, upload = 0, wait = 0, priority = 0, no_latents = 0, for_kf = 0;
    double timeout_s = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--upload-caches")) {
            upload = 1;
        } else if (!strcmp(a, "--wait")) {
            wait = 1;
        } else if (!strcmp(a, "--no-latents")) {
            no_latents = 1;
        } else if (!strcmp(a, "--for-keyframes")) {
            for_kf = 1;
        } else if (a[0] == '-' && a[1] == '-') {
            if (!v) {
                fprintf(stderr, "vdn eval sweep: %s needs a value\n", a);
                return 2;
            }
            i++;
            if (!strcmp(a, "--variants"))
                variants_arg = v;
            else if (!strcmp(a, "--checkpoint"))
                ckpt = v;
            else if (!strcmp(a, "--dir"))
                dir = v;
            else if (!strcmp(a, "--coordinator"))
                coord = v;
            else if (!strcmp(a, "--store"))
                store_arg = v;
            else if (!strcmp(a, "--baseline"))
                baseline = v;
            else if (!strcmp(a, "--tag"))
                tag_arg = v;
            else if (!strcmp(a, "--out"))
                out = v;
            else if (!strcmp(a, "--require-checkpoint"))
                require_ckpt = v;
            else if (!strcmp(a, "--priority"))
                priority = atoi(v);
            else if (!strcmp(a, "--timeout"))
                timeout_s = atof(v);
            else if (!strcmp(a, "--steps-override")) {
                char *end;
                long k = strtol(v, &end, 10);
                if (*end || k < 1 || k > 1000) {
                    fprintf(
                        stderr,
                        "vdn eval sweep: --steps-override '%s': expected an integer in 1..1000\n",
                        v);
                    return 2;
                }
                steps_override = (int)k;
            } else {
                fprintf(stderr, "vdn eval sweep: unknown option %s\n", a);
                usage(stderr);
                return 2;
            }
        } else if (!suite_path) {
            suite_path = a;
        } else {
            fprintf(stderr, "vdn eval sweep: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (!suite_path || !variants_arg) {
        usage(stderr);
        return 2;
    }
    if (dir && coord) {
        fprintf(stderr, "vdn eval sweep: give --dir or --coordinator, not both\n");
        return 2;
    }
    char err[VDN_ERR_LEN];
    vdn_suite suite;
    char abs_suite[PATH_MAX];
    if (!realpath(suite_path, abs_suite)) {
        fprintf(stderr, "vdn eval sweep: %s: no such suite manifest\n", suite_path);
        return 1;
    }
    if (vdn_suite_load(abs_suite, &suite, err, sizeof err)) {
        fprintf(stderr, "vdn eval sweep: %s\n", err);
        return 1;
    }
    if (for_kf && vdn_suite_keyframe_texts(&suite) == 0) {
        fprintf(stderr, "vdn eval sweep: --for-keyframes: %s has no keyframe-mode line with text\n",
                abs_suite);
        vdn_suite_free(&suite);
        return 1;
    }
    vdn_variant *vars;
    int nv;
    if (vdn_variant_list_parse(variants_arg, &vars, &nv, err, sizeof err)) {
        fprintf(stderr, "vdn eval sweep: %s\n", err);
        vdn_suite_free(&suite);
        return 2;
    }
    int base_idx = 0;
    if (baseline) {
        vdn_variant bv;
        base_idx = -1;
        if (vdn_variant_parse(baseline, &bv, err, sizeof err) == 0)
            for (int i = 0; i < nv; i++)
                if (!strcmp(vars[i].name, bv.name)) base_idx = i;
        if (base_idx < 0) {
            fprintf(stderr, "vdn eval sweep: --baseline '%s' is not one of --variants\n", baseline);
            free(vars);
            vdn_suite_free(&suite);
            return 2;
        }
    }
    vdn_client_conf conf;
    vdn_client_opts copts;
    if (vdn_client_resolve(coord, dir, NULL, NULL, env, &conf, &copts, err, sizeof err)) {
        fprintf(stderr, "vdn eval sweep: %s\n", err);
        free(vars);
        vdn_suite_free(&suite);
        return 1;
    }
    const char *store_uri = store_arg ? store_arg : conf.store[0] ? conf.store : NULL;
    if (!store_uri) {
        fprintf(
            stderr,
            "vdn eval sweep: no object store: give --store URI (or --dir of a `vdn up` farm)\n");
        free(vars);
        vdn_suite_free(&suite);
        return 2;
    }
    /* default tag: suite folder name + hash of suite text, variants, steps override */
    char tag[128];
    if (tag_arg) {
        snprintf(tag, sizeof tag, "%s", tag_arg);
    } else {
        size_t len;
        char *text = vdn_read_file(abs_suite, &len, err, sizeof err);
        uint64_t h = fnv(0xcbf29ce484222325ull, text ? text : "", text ? len : 0);
        free(text);
        for (int i = 0; i < nv; i++)
            h = fnv(h, vars[i].name, strlen(vars[i].name) + 1);
        h = fnv(h, &steps_override, sizeof steps_override);
        if (for_kf) h = fnv(h, "for-keyframes", 13);
        const char *base = strrchr(suite.base_dir, '/');
        char dname[64] = "suite";
        if (suite.base_dir[0]) {
            char tmp[PATH_MAX];
            snprintf(tmp, sizeof tmp, "%s", suite.base_dir);
            size_t n = strlen(tmp);
            if (n && tmp[n - 1] == '/') tmp[--n] = 0;
            base = strrchr(tmp, '/');
            snprintf(dname, sizeof dname, "%.40s", base ? base + 1 : tmp);
        }
        for (char *p = dname; *p; p++)
            if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                  (*p >= '0' && *p <= '9') || *p == '-' || *p == '_'))
                *p = '_';
        snprintf(tag, sizeof tag, "eval-%s-%08llx", dname, (unsigned long long)(h & 0xffffffffull));
    }
    for (const char *p = tag; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '-' || *p == '_' || *p == '.')) {
            fprintf(stderr,
                    "vdn eval sweep: --tag '%s': expected [A-Za-z0-9._-] only (it is part of store "
                    "keys)\n",
                    tag);
            free(vars);
            vdn_suite_free(&suite);
            return 2;
        }
    char sweep_path[PATH_MAX + 200];
    if (out)
        snprintf(sweep_path, sizeof sweep_path, "%s", out);
    else {
        snprintf(sweep_path, sizeof sweep_path, "%ssweeps", suite.base_dir);
        if (vdn_mkdir_p(sweep_path, err, sizeof err)) {
            fprintf(stderr, "vdn eval sweep: %s\n", err);
            free(vars);
            vdn_suite_free(&suite);
            return 1;
        }
        snprintf(sweep_path, sizeof sweep_path, "%ssweeps/%s.json", suite.base_dir, tag);
    }

    /* the manifest: every pair, keys derived from the tag (so a re-run finds the same keys) */
    vdn_sweep sw;
    memset(&sw, 0, sizeof sw);
    vdn_sweep old;
    int have_old = access(sweep_path, F_OK) == 0;
    if (have_old && vdn_sweep_load(sweep_path, &old, err, sizeof err)) {
        fprintf(stderr, "vdn eval sweep: existing manifest: %s\n", err);
        free(vars);
        vdn_suite_free(&suite);
        return 1;
    }
    sw.path = vdn_xstrdup(sweep_path);
    sw.suite = vdn_xstrdup(abs_suite);
    sw.checkpoint = ckpt ? vdn_xstrdup(ckpt) : NULL;
    sw.store = vdn_xstrdup(store_uri);
    sw.tag = vdn_xstrdup(tag);
    sw.baseline = vdn_xstrdup(vars[base_idx].name);
    sw.steps_override = steps_override;
    sw.variants = vars;
    sw.n_variants = nv;
    sw.n_batches = have_old ? old.n_batches : 0;
    sw.batches = vdn_xcalloc((size_t)sw.n_batches + 2, sizeof *sw.batches);
    for (int i = 0; i < sw.n_batches; i++)
        sw.batches[i] = old.batches[i];
    sw.n_pairs = suite.n * nv;
    sw.pairs = vdn_xcalloc((size_t)sw.n_pairs + 1, sizeof *sw.pairs);
    for (int p = 0; p < suite.n; p++)
        for (int v = 0; v < nv; v++) {
            vdn_sweep_pair *q = &sw.pairs[p * nv + v];
            char key[512];
            q->prompt = vdn_xstrdup(suite.items[p].id);
            q->variant = vdn_xstrdup(vars[v].name);
            snprintf(key, sizeof key, "eval/%s/%s/%s/out.safetensors", tag, suite.items[p].id,
                     vars[v].key);
            q->video_key = vdn_xstrdup(key);
            snprintf(key, sizeof key, "eval/%s/%s/%s/out.json", tag, suite.items[p].id,
                     vars[v].key);
            q->record_key = vdn_xstrdup(key);
            const vdn_sweep_pair *o = have_old ? vdn_sweep_find(&old, q->prompt, q->variant) : NULL;
            if (o) {
                q->batch_id = o->batch_id;
                q->job_id = o->job_id;
            }
        }
    if (have_old) vdn_sweep_free(&old);

    int rc = 1;
    vdn_store *st = vdn_store_open(store_uri, NULL, err, sizeof err);
    vdn_client *c = NULL;
    char **busy = NULL;
    int n_busy = 0;
    vdn_job_spec *jobs = NULL;
    int *job_pair = NULL, n_jobs = 0;
    if (!st) {
        fprintf(stderr, "vdn eval sweep: store %s: %s\n", store_uri, err);
        goto done;
    }
    c = vdn_client_open(&copts, err, sizeof err);
    if (!c) {
        fprintf(stderr, "vdn eval sweep: coordinator %s: %s\n", copts.endpoint, err);
        goto done;
    }
    busy = vdn_sweep_inflight_tags(c, tag, &n_busy, err, sizeof err);
    if (!busy) {
        fprintf(stderr, "vdn eval sweep: coordinator %s: %s\n", copts.endpoint, err);
        goto done;
    }
    jobs = vdn_xcalloc((size_t)sw.n_pairs + 1, sizeof *jobs);
    job_pair = vdn_xcalloc((size_t)sw.n_pairs + 1, sizeof *job_pair);
    int n_done = 0, n_flight = 0;
    for (int i = 0; i < sw.n_pairs; i++) {
        vdn_sweep_pair *q = &sw.pairs[i];
        int have = pair_stored(st, q, err, sizeof err);
        if (have < 0) {
            fprintf(stderr, "vdn eval sweep: store: %s\n", err);
            goto done;
        }
        if (have) {
            n_done++;
            continue;
        }
        char jtag[200];
        snprintf(jtag, sizeof jtag, "%s/%s", q->prompt, q->variant);
        int flying = 0;
        for (int k = 0; k < n_busy; k++)
            flying |= !strcmp(busy[k], jtag);
        if (flying) {
            n_flight++;
            continue;
        }
        const vdn_suite_item *it = &suite.items[i / nv];
        const vdn_variant *va = &vars[i % nv];
        vdn_job_spec *j = &jobs[n_jobs];
        char *cache = vdn_suite_resolve(&suite, it->prompt_cache);
        if (!cache) /* a text prompt: the worker encodes it through the store's cache */
            j->prompt = vdn_xstrdup(it->prompt);
        else if (upload && !strstr(cache, "://") &&
                 upload_input(st, tag, it->id, "cache", ".safetensors", &cache, err, sizeof err)) {
            fprintf(stderr, "vdn eval sweep: uploading %s: %s\n", cache, err);
            free(cache);
            goto done;
        }
        j->prompt_cache = cache;
        const char *pics[2] = {it->first_frame, it->last_frame};
        char **dst[2] = {&j->first_frame, &j->last_frame};
        for (int k = 0; k < 2; k++) {
            if (!pics[k]) continue;
            if (vdn_sweep_picture_input(&suite, st, tag, it->id, k ? "last" : "first", pics[k],
                                        upload, dst[k], err, sizeof err)) {
                fprintf(stderr, "vdn eval sweep: %s:%d: %s: %s\n", suite.path, it->line,
                        k ? "last_frame" : "first_frame", err);
                goto done;
            }
        }
        j->frames = it->frames;
        j->height = it->height;
        j->width = it->width;
        j->steps = steps_override ? steps_override : va->steps;
        j->seed = it->seed; /* same seed, hence the same noise, for every variant of a prompt */
        j->has_seed = 1;
        j->save_latents = !no_latents; /* the report's latent metrics need them */
        j->variant = vdn_xstrdup(va->engine);
        if (strcmp(va->precision, "bf16")) j->precision = vdn_xstrdup(va->precision);
        j->checkpoint = require_ckpt ? vdn_xstrdup(require_ckpt) : NULL;
        char prefix[512];
        snprintf(prefix, sizeof prefix, "eval/%s/%s/%s/out", tag, it->id, va->key);
        j->output_prefix = vdn_xstrdup(prefix);
        j->tag = vdn_xstrdup(jtag);
        job_pair[n_jobs++] = i;
    }
    fprintf(stderr, "eval sweep %s: %d pairs: %d done, %d queued or running, %d to submit\n", tag,
            sw.n_pairs, n_done, n_flight, n_jobs);
    if (n_jobs) {
        uint64_t batch = 0, *ids = vdn_xcalloc((size_t)n_jobs, sizeof *ids);
        char source[PATH_MAX + 32];
        snprintf(source, sizeof source, "vdn eval sweep %s", abs_suite);
        if (vdn_client_submit(c, jobs, n_jobs, tag, priority, source, &batch, ids, err,
                              sizeof err)) {
            fprintf(stderr, "vdn eval sweep: submit: %s\n", err);
            free(ids);
            goto done;
        }
        for (int k = 0; k < n_jobs; k++) {
            sw.pairs[job_pair[k]].batch_id = batch;
            sw.pairs[job_pair[k]].job_id = ids[k];
        }
        sw.batches[sw.n_batches++] = batch;
        free(ids);
        printf("batch b%llu: %d jobs (tag %s)\n", (unsigned long long)batch, n_jobs, tag);
    }
    if (vdn_sweep_save(&sw, err, sizeof err)) {
        fprintf(stderr, "vdn eval sweep: %s\n", err);
        goto done;
    }
    printf("sweep manifest: %s\n", sw.path);
    fflush(stdout);
    rc = wait ? wait_for(c, st, &sw, timeout_s) : 0;
done:
    for (int k = 0; k < n_jobs; k++)
        vdn_job_spec_free(&jobs[k]);
    free(jobs);
    free(job_pair);
    for (int k = 0; k < n_busy; k++)
        free(busy[k]);
    free(busy);
    if (c) vdn_client_close(c);
    if (st) vdn_store_close(st);
    vdn_sweep_free(&sw);
    vdn_suite_free(&suite);
    return rc;
}
