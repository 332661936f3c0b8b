#include "attempt.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "decode.h"
#include "pipeline.h"
#include "prompt_text.h"
#include "snapshot.h"

void vdn_assignment_free(vdn_assignment *s) {
    free(s->prompt_cache);
    free(s->prompt);
    free(s->variant);
    free(s->noise_file);
    free(s->first_frame);
    free(s->last_frame);
    free(s->kind);
    free(s->score);
    free(s->store_uri);
    free(s->output_prefix);
    free(s->resume_key);
    for (int i = 0; i < s->nkeys; i++)
        free(s->keys[i]);
    free(s->keys);
    memset(s, 0, sizeof *s);
}

void vdn_worker_stores_close(vdn_worker_stores *c) {
    if (c->dflt) vdn_store_close(c->dflt);
    if (c->other) vdn_store_close(c->other);
    free(c->default_uri);
    free(c->other_uri);
    memset(c, 0, sizeof *c);
}

void vdn_worker_text_init(vdn_worker_text *t, const char *checkpoint, vdn_precision precision,
                          const vdn_text_prompts_opts *opts) {
    memset(t, 0, sizeof *t);
    pthread_mutex_init(&t->mu, NULL);
    t->checkpoint = checkpoint;
    t->opts = *opts;
    t->opts.precision = precision;
}

vdn_text_prompts *vdn_worker_text_get(vdn_worker_text *t, char *err, size_t errlen) {
    pthread_mutex_lock(&t->mu);
    if (!t->p)
        t->p = vdn_text_prompts_open(t->checkpoint ? t->checkpoint : "", &t->opts, err, errlen);
    vdn_text_prompts *p = t->p;
    pthread_mutex_unlock(&t->mu);
    return p;
}

void vdn_worker_text_close(vdn_worker_text *t) {
    vdn_text_prompts_close(t->p);
    pthread_mutex_destroy(&t->mu);
    memset(t, 0, sizeof *t);
}

/* The store for uri (NULL/"" = the worker's default), opened on first use. */
static vdn_store *store_for(vdn_worker_stores *c, const char *uri, char *err, size_t errlen) {
    if (!uri || !*uri) {
        if (!c->default_uri)
            return vdn_fail(err, errlen, "the job names no store and the worker has no --store"),
                   NULL;
        if (!c->dflt) c->dflt = vdn_store_open(c->default_uri, &c->opts, err, errlen);
        return c->dflt;
    }
    if (c->default_uri && !strcmp(uri, c->default_uri)) return store_for(c, NULL, err, errlen);
    if (c->other_uri && !strcmp(uri, c->other_uri) && c->other) return c->other;
    if (c->other) vdn_store_close(c->other);
    free(c->other_uri);
    c->other_uri = vdn_xstrdup(uri);
    c->other = vdn_store_open(uri, &c->opts, err, errlen);
    return c->other;
}

static void wake(vdn_attempt *j) {
    uint64_t one = 1;
    while (write(j->efd, &one, sizeof one) < 0 && errno == EINTR) {
    }
}

/* Test hook VDN_TEST_POISON_SEED: the renderer dies at the job's first NFE, before its snapshot
 * or its progress goes out (as a crash in the forward would). */
static void poison_abort(const vdn_attempt *j, int nfe) {
    VDN_ERROR("job %llu attempt %llu: test hook VDN_TEST_POISON_SEED: aborting the renderer at NFE "
              "%d",
              (unsigned long long)j->spec.job_id, (unsigned long long)j->spec.attempt_id, nfe);
    abort();
}

static int on_progress(void *user, int nfe_done, int nfe_total, double nfe_seconds) {
    vdn_attempt *j = user;
    if (j->nfe_delay_ms > 0) {
        struct timespec ts = {j->nfe_delay_ms / 1000, (long)(j->nfe_delay_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
        }
    }
    if (j->poison && nfe_done >= 1) poison_abort(j, nfe_done);
    /* the next op fails inside the backend, typed as a device fault, as a real one would */
    if (j->inject_fault && nfe_done >= 1) vdn_engine_inject_device_fault(j->eng);
    pthread_mutex_lock(&j->mu);
    if (nfe_done > j->nfe_cap) {
        int cap = nfe_total > nfe_done ? nfe_total : nfe_done;
        double *p = realloc(j->nfe_seconds, (size_t)cap * sizeof *p);
        VDN_ASSERT(p);
        for (int i = j->nfe_cap; i < cap; i++)
            p[i] = 0;
        j->nfe_seconds = p;
        j->nfe_cap = cap;
    }
    if (nfe_done >= 1) j->nfe_seconds[nfe_done - 1] = nfe_seconds;
    j->nfe_done = nfe_done;
    j->nfe_total = nfe_total;
    pthread_mutex_unlock(&j->mu);
    wake(j);
    return atomic_load(&j->cancel);
}

/* Where this attempt's snapshots go: next to the outputs, one key per attempt (the fence: no
 * two attempts ever write the same key), replaced by each newer snapshot. */
static void snapshot_prefix(const char *latents_key, char *buf, size_t len) {
    size_t n = strlen(latents_key), sfx = strlen(".safetensors");
    if (n > sfx && !strcmp(latents_key + n - sfx, ".safetensors")) n -= sfx;
    snprintf(buf, len, "%.*s.snapshots/", (int)n, latents_key);
}

static int on_snapshot(void *user, const vdn_render_state *state) {
    vdn_attempt *j = user;
    if (j->poison) poison_abort(j, state->step);
    char path[2200], key[1200], err[VDN_ERR_LEN];
    double t0 = vdn_now();
    snprintf(path, sizeof path, "%s/snapshot.safetensors", j->scratch);
    snprintf(key, sizeof key, "%sa%llu.safetensors", j->snap_prefix,
             (unsigned long long)j->spec.attempt_id);
    vdn_store *st = NULL;
    if (vdn_snapshot_write(path, state, j->fingerprint, err, sizeof err) ||
        !(st = store_for(j->stores, j->spec.store_uri, err, sizeof err)) ||
        vdn_store_put_file(st, key, path, err, sizeof err)) {
        VDN_WARN("job %llu attempt %llu: snapshot after NFE %d not stored: %s",
                 (unsigned long long)j->spec.job_id, (unsigned long long)j->spec.attempt_id,
                 state->step, err);
        return -1;
    }
    pthread_mutex_lock(&j->mu);
    snprintf(j->snap_key, sizeof j->snap_key, "%s", key);
    j->snap_step = state->step;
    pthread_mutex_unlock(&j->mu);
    wake(j);
    VDN_INFO("job %llu attempt %llu: snapshot after NFE %d/%d stored as %s (%.2f s)",
             (unsigned long long)j->spec.job_id, (unsigned long long)j->spec.attempt_id,
             state->step, state->steps, key, vdn_now() - t0);
    return 0;
}

/* The newest snapshot of the job, when the coordinator names one and it fits this render; any
 * problem only means starting from the noise. 1 = resume from *state. */
static int load_resume(vdn_attempt *j, vdn_render_state *state) {
    const char *key = j->spec.resume_key;
    if (!key || !*key) return 0;
    char path[2200], err[VDN_ERR_LEN];
    snprintf(path, sizeof path, "%s/resume.safetensors", j->scratch);
    vdn_store *st = store_for(j->stores, j->spec.store_uri, err, sizeof err);
    if (!st || vdn_store_get_file(st, key, path, err, sizeof err) ||
        vdn_snapshot_read(path, j->fingerprint, state, err, sizeof err) ||
        state->steps != j->spec.steps) {
        VDN_WARN("job %llu attempt %llu: not resuming from %s (%s); starting from the noise",
                 (unsigned long long)j->spec.job_id, (unsigned long long)j->spec.attempt_id, key,
                 err);
        vdn_snapshot_free(state);
        return 0;
    }
    VDN_INFO("job %llu attempt %llu: resuming after NFE %d/%d from %s",
             (unsigned long long)j->spec.job_id, (unsigned long long)j->spec.attempt_id,
             state->step, state->steps, key);
    return 1;
}

/* bytes of files rm_entry removed on this thread (nftw takes no user pointer) */
static _Thread_local uint64_t rm_bytes;

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)flag;
    (void)ftw;
    if (S_ISREG(sb->st_mode)) rm_bytes += (uint64_t)sb->st_size;
    remove(path);
    return 0;
}

static void finish_gpu(vdn_attempt *j, int ok, vdn_fault fault, int gpu_fault, const char *reason) {
    pthread_mutex_lock(&j->mu);
    j->ok = ok;
    j->fault = ok ? 0 : fault;
    j->gpu_fault = !ok && gpu_fault;
    j->retryable = !ok && fault != VDN_FAULT_JOB;
    snprintf(j->reason, sizeof j->reason, "%s", reason ? reason : "");
    j->phase = VDN_ATTEMPT_FINISHED;
    pthread_mutex_unlock(&j->mu);
    wake(j);
}

static void finish(vdn_attempt *j, int ok, vdn_fault fault, const char *reason) {
    finish_gpu(j, ok, fault, 0, reason);
}

/* The worst fault the job's devices recorded in its last render, and which GPUs had a device
 * fault (gpu_fault_mask; none typed but the words name one: every GPU of the job). */
static vdn_engine_fault job_fault(vdn_attempt *j) {
    vdn_engine_fault worst = VDN_ENGINE_FAULT_NONE;
    j->gpu_fault_mask = 0;
    for (int r = 0; r < j->gpus.n; r++) {
        vdn_engine_fault f = vdn_engine_last_fault(j->gpus.eng[r]);
        if (f == VDN_ENGINE_FAULT_DEVICE) j->gpu_fault_mask |= 1ull << r;
        if (f > worst) worst = f;
    }
    if (!j->gpu_fault_mask) j->gpu_fault_mask = ~0ull;
    return worst;
}

/* How many GPUs render the clip: all of the job's when their engines can shard one forward
 * (engine.h vdn_engine_group_check), else the first alone, said in the log and the record. */
static int render_ranks(vdn_attempt *j, const char **via, char *why, size_t len) {
    why[0] = 0;
    *via = "none";
    if (j->gpus.n <= 1) return 1;
    const char *c = vdn_engine_group_check(j->gpus.eng, j->gpus.n, why, len);
    if (!c) {
        VDN_WARN("job %llu attempt %llu: holds %d GPUs but renders on GPU %d alone: %s",
                 (unsigned long long)j->spec.job_id, (unsigned long long)j->spec.attempt_id,
                 j->gpus.n, j->gpus.index[0], why);
        return 1;
    }
    *via = c;
    char gl[256] = "";
    for (int r = 0; r < j->gpus.n; r++)
        snprintf(gl + strlen(gl), sizeof gl - strlen(gl), "%s%d", r ? "," : "", j->gpus.index[r]);
    VDN_INFO("job %llu attempt %llu: one clip sharded over %d ranks on GPUs %s (%s communicator)",
             (unsigned long long)j->spec.job_id, (unsigned long long)j->spec.attempt_id, j->gpus.n,
             gl, c);
    return j->gpus.n;
}

/* The decoders a job decodes with: those of its GPUs whose VAEs loaded, in rank order (dec[0]
 * always), and what each decoded. */
typedef struct {
    int n;
    int rank[VDN_MAX_GPUS]; /* member i is the job's GPU rank[i] */
    vdn_decoder *dec[VDN_MAX_GPUS];
    vdn_decode_share share;
    vdn_precision precision; /* the video decoder's (every decoder of a worker has the same) */
} decode_group;

/* The job's decoders (call with gpus.dec[0] loaded): a GPU whose VAEs did not load sits out. */
static void decoders_of(vdn_attempt *j, decode_group *g) {
    g->n = 0;
    for (int r = 0; r < j->gpus.n; r++) {
        if (!j->gpus.dec[r]) {
            VDN_WARN("job %llu attempt %llu: GPU %d has no VAEs (they did not load at start): the "
                     "clip decodes without it",
                     (unsigned long long)j->spec.job_id, (unsigned long long)j->spec.attempt_id,
                     j->gpus.index[r]);
            continue;
        }
        g->dec[g->n] = j->gpus.dec[r];
        g->rank[g->n++] = r;
    }
    if (g->n) g->precision = vdn_decoder_precision(g->dec[0]);
}

/* Before each stage of the pipeline. The test hook VDN_TEST_DECODE_FAULT (worker/loop.c) lives
 * here, not in the pipeline: the chosen GPUs' next op fails inside the backend, typed as a
 * device fault, as a real one would. */
static int on_stage(void *user, vdn_pipeline_stage s) {
    vdn_attempt *j = user;
    for (int r = 0; s == VDN_PIPELINE_DECODE && r < j->gpus.n; r++)
        if (j->gpus.dec[r] && (j->gpus.decode_fault >> r & 1))
            vdn_engine_inject_device_fault(j->gpus.eng[r]);
    return atomic_load(&j->cancel); /* cancelled: no next stage */
}

/* Where the clip decoded (decode.h vdn_decoder_decode_group: the tiles of the clip's chunks and
 * the audio channels dealt over the job's decoders). */
static void log_decode(const vdn_attempt *j, const decode_group *g, double seconds) {
    const vdn_vae_share *v = &g->share.video, *a = &g->share.audio;
    if (g->n == 1) {
        VDN_INFO("job %llu attempt %llu: decoded on GPU %d (%s) in %.2f s",
                 (unsigned long long)j->spec.job_id, (unsigned long long)j->spec.attempt_id,
                 j->gpus.index[0], vdn_dev_name(vdn_engine_device(j->eng)), seconds);
        return;
    }
    char gl[256] = "", dl[512] = "", vt[256] = "", ac[256] = "";
    for (int i = 0; i < g->n; i++) {
        const int r = g->rank[i];
        snprintf(gl + strlen(gl), sizeof gl - strlen(gl), "%s%d", i ? "," : "", j->gpus.index[r]);
        snprintf(dl + strlen(dl), sizeof dl - strlen(dl), "%s%s", i ? ", " : "",
                 vdn_dev_name(vdn_engine_device(j->gpus.eng[r])));
        snprintf(vt + strlen(vt), sizeof vt - strlen(vt), "%s%d", i ? "+" : "", v->units[i]);
        snprintf(ac + strlen(ac), sizeof ac - strlen(ac), "%s%d", i ? "+" : "", a->units[i]);
    }
    VDN_INFO("job %llu attempt %llu: decoded on GPUs %s (%s) in %.2f s: video tiles %s, audio "
             "channels %s",
             (unsigned long long)j->spec.job_id, (unsigned long long)j->spec.attempt_id, gl, dl,
             seconds, vt, ac);
}

/* After a failed decode: the worst fault its devices recorded (the decode cleared them first),
 * and which GPUs had a device fault (gpu_fault_mask): those typed so, else (the words name one)
 * the members whose share failed, else every member. */
static vdn_engine_fault decode_fault(vdn_attempt *j, const decode_group *g) {
    vdn_engine_fault worst = VDN_ENGINE_FAULT_NONE;
    uint64_t typed = 0, failed = 0, all = 0;
    const uint64_t shares = g->share.video.failed | g->share.audio.failed;
    for (int i = 0; i < g->n; i++) {
        const int r = g->rank[i];
        vdn_engine_fault f = vdn_engine_last_fault(j->gpus.eng[r]);
        if (f == VDN_ENGINE_FAULT_DEVICE) typed |= 1ull << r;
        if (f > worst) worst = f;
        if (shares >> i & 1) failed |= 1ull << r;
        all |= 1ull << r;
    }
    j->gpu_fault_mask = typed ? typed : failed ? failed : all;
    return worst;
}

/* Sets (replaces) the run record's member `key` to o (taken over, freed on every path). */
static int record_set(const char *path, const char *key, cJSON *o, char *err, size_t errlen) {
    size_t len;
    char *text = vdn_read_file(path, &len, err, errlen);
    if (!text) {
        cJSON_Delete(o);
        return -1;
    }
    cJSON *r = cJSON_ParseWithLength(text, len);
    free(text);
    if (!cJSON_IsObject(r)) {
        cJSON_Delete(r);
        cJSON_Delete(o);
        return vdn_fail(err, errlen, "%s: not a JSON object (a run record)", path);
    }
    cJSON_DeleteItemFromObjectCaseSensitive(r, key);
    cJSON_AddItemToObject(r, key, o);
    char *out = cJSON_Print(r);
    cJSON_Delete(r);
    int rc = vdn_write_file_atomic(path, out, strlen(out), err, errlen);
    cJSON_free(out);
    return rc;
}

/* The run record's "gpus": what the job held, what rendered it and (dg: NULL when it stored
 * latents only) which GPUs decoded how much of it. */
static int record_gpus(const char *path, const vdn_attempt *j, int ranks, const char *via,
                       const char *why, const decode_group *dg, char *err, size_t errlen) {
    cJSON *o = cJSON_CreateObject(), *held = cJSON_CreateArray(), *used = cJSON_CreateArray();
    for (int i = 0; i < j->gpus.n; i++) {
        cJSON_AddItemToArray(held, cJSON_CreateNumber(j->gpus.index[i]));
        if (i < ranks) cJSON_AddItemToArray(used, cJSON_CreateNumber(j->gpus.index[i]));
    }
    cJSON_AddItemToObject(o, "held", held);
    cJSON_AddItemToObject(o, "rendered_on", used);
    cJSON_AddNumberToObject(o, "ranks", ranks);
    cJSON_AddStringToObject(o, "communicator", via);
    if (why && why[0]) cJSON_AddStringToObject(o, "not_sharded", why);
    if (dg) { /* the GPUs that decoded a share, and their shares */
        cJSON *on = cJSON_CreateArray(), *vt = cJSON_CreateArray(), *ac = cJSON_CreateArray();
        for (int i = 0; i < dg->n; i++) {
            const int v = dg->share.video.units[i], a = dg->share.audio.units[i];
            if (!v && !a) continue;
            cJSON_AddItemToArray(on, cJSON_CreateNumber(j->gpus.index[dg->rank[i]]));
            cJSON_AddItemToArray(vt, cJSON_CreateNumber(v));
            cJSON_AddItemToArray(ac, cJSON_CreateNumber(a));
        }
        cJSON_AddItemToObject(o, "decoded_on", on);
        cJSON_AddItemToObject(o, "decode_video_tiles", vt);
        cJSON_AddItemToObject(o, "decode_audio_channels", ac);
        cJSON_AddStringToObject(o, "decode_precision", vdn_precision_name(dg->precision));
    }
    return record_set(path, "gpus", o, err, errlen);
}

/* The run record's "cleaned": what was cleaned for this attempt, as far as known when the record
 * is written. The attempt's scratch goes when the attempt ends and the snapshots once the
 * coordinator has accepted the result, both after the record: it names them, the log says when
 * they went. */
static int record_cleaned(const char *path, const vdn_attempt *j, char *err, size_t errlen) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "stale_scratch_folders", j->spec.stale_scratch_folders);
    cJSON_AddNumberToObject(o, "stale_scratch_bytes", (double)j->spec.stale_scratch_bytes);
    const char *name = strrchr(j->scratch, '/');
    cJSON_AddStringToObject(o, "attempt_scratch", name ? name + 1 : j->scratch);
    cJSON_AddBoolToObject(o, "attempt_scratch_leftover", j->scratch_leftover);
    cJSON_AddStringToObject(o, "attempt_scratch_removed", "when the attempt ends");
    cJSON_AddNumberToObject(o, "store_temp_files", (double)vdn_store_temps_swept());
    if (j->snap_prefix[0]) {
        cJSON_AddStringToObject(o, "snapshots", j->snap_prefix);
        cJSON_AddStringToObject(o, "snapshots_deleted", "once the coordinator accepts the result");
    }
    return record_set(path, "cleaned", o, err, errlen);
}

/* The file extension of a key or path (".png"), or "" (kept on downloads: image decoders look at
 * it). */
static const char *ext_of(const char *name) {
    const char *slash = strrchr(name, '/'), *dot = strrchr(name, '.');
    return dot && (!slash || dot > slash) && strlen(dot) <= 8 ? dot : "";
}

/* Where an input file of the request (field `what`: its prompt cache, a keyframe picture) is on
 * this machine; downloads it into the scratch dir as `local` (+ the key's extension when local
 * has none) when it lives in a store.
 * *fault: the job's (a file that is not there, a bad URI) unless the store failed (transient:
 * another try may succeed). */
static int resolve_input(vdn_attempt *j, const char *what, const char *value, const char *local,
                         char *path, size_t pathlen, vdn_fault *fault, char *err, size_t errlen) {
    const char *pc = value;
    *fault = VDN_FAULT_JOB;
    if (!pc || !*pc) return vdn_fail(err, errlen, "ASSIGN request.%s: empty", what);
    if (!strncmp(pc, "file://", 7)) pc += 7;
    int is_s3 = !strncmp(pc, "s3://", 5);
    /* a local file (an absolute path, or a name that exists here): only under --data-root,
     * and read from a private copy */
    if (!is_s3 && (pc[0] == '/' || access(pc, F_OK) == 0)) {
        snprintf(path, pathlen, "%s/%s%s", j->scratch, local, strchr(local, '.') ? "" : ext_of(pc));
        return vdn_root_copy(pc, j->spec.data_roots, j->spec.n_data_roots, path, err, errlen);
    }
    /* s3://bucket/dir/key -> store s3://bucket, key dir/key; a bare key -> the job's store. */
    char uri[1024] = "", key[1024];
    const char *store_uri = j->spec.store_uri;
    if (is_s3) {
        const char *slash = strchr(pc + 5, '/');
        if (!slash || !slash[1])
            return vdn_fail(err, errlen, "%s '%s': expected s3://BUCKET/KEY", what, pc);
        snprintf(uri, sizeof uri, "%.*s", (int)(slash - pc), pc);
        snprintf(key, sizeof key, "%s", slash + 1);
        store_uri = uri;
    } else if (!j->stores->default_uri && !(store_uri && *store_uri)) {
        return vdn_fail(err, errlen, "%s '%s': no such file on this worker (%s)", what, pc,
                        strerror(errno));
    } else {
        snprintf(key, sizeof key, "%s", pc);
    }
    char serr[VDN_ERR_LEN];
    vdn_store *st = store_for(j->stores, store_uri, serr, sizeof serr);
    if (!st) {
        *fault = VDN_FAULT_TRANSIENT;
        j->store_op = VDN_STORE_OP_OPEN;
        return vdn_fail(err, errlen, "%s '%s': %s", what, pc, serr);
    }
    int have = vdn_store_exists(st, key, NULL, serr, sizeof serr);
    if (have < 0) {
        *fault = VDN_FAULT_TRANSIENT;
        j->store_op = VDN_STORE_OP_DOWNLOAD; /* the HEAD before the GET */
        return vdn_fail(err, errlen, "%s '%s': %s", what, pc, serr);
    }
    if (have == 0)
        return vdn_fail(err, errlen, "%s '%s': not a local file and no key '%s' in %s", what, pc,
                        key, vdn_store_uri(st));
    snprintf(path, pathlen, "%s/%s%s", j->scratch, local, strchr(local, '.') ? "" : ext_of(key));
    if (vdn_store_get_file(st, key, path, serr, sizeof serr)) {
        *fault = VDN_FAULT_TRANSIENT;
        j->store_op = VDN_STORE_OP_DOWNLOAD;
        return vdn_fail(err, errlen, "%s '%s': download failed: %s", what, pc, serr);
    }
    return 0;
}

/* What the pipeline did with a text prompt, in the log. */
static void log_text_prompt(const vdn_attempt *j, const vdn_text_cache_info *info) {
    if (info->hit)
        VDN_INFO("job %llu: text prompt, %d tokens: cache hit%s (%s, %.2f s)",
                 (unsigned long long)j->spec.job_id, info->tokens,
                 info->waited ? " after waiting for another job's encode" : "", info->key,
                 info->seconds);
    else
        VDN_INFO("job %llu: text prompt, %d tokens: cache miss, encoded on GPU %d (%s; encoder "
                 "%s) (%s, %.2f s)",
                 (unsigned long long)j->spec.job_id, info->tokens, info->gpu, info->device,
                 info->loaded ? (info->kept ? "loaded, kept" : "loaded, released")
                              : (info->kept ? "resident, kept" : "resident, released"),
                 info->key, info->seconds);
}

/* Whose fault a failed pipeline was (blame.h), from the kind of failure and the devices' own
 * records, and the attempt's end. A text prompt the tokenizer refuses, one longer than the
 * encoder takes or a prompt cache that does not load fail alike everywhere: the job's. The
 * store's (or an encode's) trouble is transient, unless the GPU itself failed under the encoder
 * (the encode runs on the first GPU). A render failure is the request's unless the devices
 * recorded a fault of their own; a decode failure is this worker's, and a GPU's own also takes
 * that GPU out of service, and only it. */
static void finish_pipeline(vdn_attempt *j, const vdn_pipeline_result *res, decode_group *dg,
                            const char *err) {
    char msg[VDN_ERR_LEN + 256];
    int gpu = 0;
    switch (res->error) {
    case VDN_PIPELINE_ERR_TEXT: {
        gpu = vdn_engine_last_fault(j->eng) == VDN_ENGINE_FAULT_DEVICE;
        j->gpu_fault_mask = 1;
        if (res->text.store_failed) /* typed for vdn_store_errors_total */
            j->store_op = res->text.store_failed == 2 ? VDN_STORE_OP_UPLOAD : VDN_STORE_OP_DOWNLOAD;
        finish_gpu(j, 0, gpu ? VDN_FAULT_WORKER : VDN_FAULT_TRANSIENT, gpu, err);
        return;
    }
    case VDN_PIPELINE_ERR_RENDER: {
        int cancelled = atomic_load(&j->cancel);
        vdn_fault f = vdn_blame_render(job_fault(j), err, &gpu);
        snprintf(msg, sizeof msg, "%s%s",
                 cancelled && !gpu ? "cancelled: " : "render failed: ", err);
        finish_gpu(j, 0, cancelled && !gpu ? VDN_FAULT_TRANSIENT : f, gpu, msg);
        return;
    }
    case VDN_PIPELINE_ERR_DECODE:
        dg->share = res->share;
        vdn_blame_render(decode_fault(j, dg), err, &gpu);
        snprintf(msg, sizeof msg, "decoding the latents into an mp4: %s", err);
        finish_gpu(j, 0, VDN_FAULT_WORKER, gpu, msg);
        return;
    case VDN_PIPELINE_ERR_OUTPUT:
        finish(j, 0, VDN_FAULT_WORKER, err);
        return;
    case VDN_PIPELINE_ERR_STOPPED:
        finish(j, 0, VDN_FAULT_TRANSIENT, err);
        return;
    default:
        finish(j, 0, VDN_FAULT_JOB, err);
        return;
    }
}

/* Whole uploads that failed and then went through when the worker tried again (upload()). */
static atomic_ullong uploads_retried_ok;

uint64_t vdn_worker_store_retries(void) {
    return vdn_store_retried_ok() + atomic_load(&uploads_retried_ok);
}

/* Uploads local as key, trying the whole upload again (on top of the store's own retries of
 * each request) up to upload_attempts times. A failure left is the store's: store_op UPLOAD. */
static int upload(vdn_attempt *j, vdn_store *st, const char *key, const char *local, char *err,
                  size_t errlen) {
    double delay = 1.0;
    for (int attempt = 1;; attempt++) {
        if (vdn_store_put_file(st, key, local, err, errlen) == 0) {
            if (attempt > 1) atomic_fetch_add(&uploads_retried_ok, 1);
            return 0;
        }
        if (attempt >= j->upload_attempts || atomic_load(&j->cancel)) {
            j->store_op = VDN_STORE_OP_UPLOAD;
            return -1;
        }
        VDN_WARN("job %llu attempt %llu: upload of %s failed (%s); whole-upload retry %d/%d in "
                 "%.0f s",
                 (unsigned long long)j->spec.job_id, (unsigned long long)j->spec.attempt_id, key,
                 err, attempt, j->upload_attempts - 1, delay);
        for (double t = 0; t < delay && !atomic_load(&j->cancel); t += 0.1)
            usleep(100000);
        delay = delay * 2 > 30 ? 30 : delay * 2;
    }
}

/* KEY with its ".safetensors" suffix replaced by ext (".mp4", ".png") */
static void sibling_key(const char *key, const char *ext, char *out, size_t len) {
    size_t n = strlen(key), m = strlen(".safetensors");
    if (n >= m && !strcmp(key + n - m, ".safetensors")) n -= m;
    snprintf(out, len, "%.*s%s", (int)n, key, ext);
}

/* The gate: asks the main loop whether this attempt is still ours before writing to the store.
 * 1 = go. */
static int wait_gate(vdn_attempt *j) {
    pthread_mutex_lock(&j->mu);
    j->phase = VDN_ATTEMPT_UPLOAD_WAIT;
    pthread_mutex_unlock(&j->mu);
    wake(j);
    pthread_mutex_lock(&j->mu);
    while (j->gate == 0 && !atomic_load(&j->cancel)) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 100000000L;
        if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&j->gate_cv, &j->mu, &until);
    }
    int go = j->gate > 0 && !atomic_load(&j->cancel);
    if (go) j->phase = VDN_ATTEMPT_UPLOADING;
    pthread_mutex_unlock(&j->mu);
    if (go) wake(j);
    return go;
}

/* What a rendered job hands the store: where its files are and under which keys. */
typedef struct {
    const char *prefix; /* the pipeline's output prefix in the scratch dir */
    const char *latents_key, *record_key;
    const vdn_pipeline_result *res;
    const decode_group *dg;
    int ranks;
    const char *via, *why; /* render_ranks' */
} job_outputs;

/* Uploads what the pipeline wrote (mp4 and poster; the latents only when the request asked for
 * them or they are the only output: at 768p they are ~40 MB a clip that nobody watches, and eval
 * scores the mp4, docs/eval.md), then the run record last, and finishes the attempt. */
static void store_outputs(vdn_attempt *j, const job_outputs *o) {
    char err[VDN_ERR_LEN], msg[VDN_ERR_LEN + 256], local[4300], mp4_key[2200], png_key[2200];
    char mp4_local[4300], png_local[4300];
    const int have_mp4 = o->res->have_mp4, keep_latents = o->res->have_latents;
    vdn_store *st = store_for(j->stores, j->spec.store_uri, err, sizeof err);
    if (!st) {
        snprintf(msg, sizeof msg, "output store: %s", err);
        j->store_op = VDN_STORE_OP_OPEN;
        finish(j, 0, VDN_FAULT_TRANSIENT, msg);
        return;
    }
    snprintf(local, sizeof local, "%s.safetensors", o->prefix);
    if (keep_latents && upload(j, st, o->latents_key, local, err, sizeof err)) {
        snprintf(msg, sizeof msg, "upload of %s to %s failed: %s", o->latents_key,
                 vdn_store_uri(st), err);
        finish(j, 0, VDN_FAULT_TRANSIENT, msg);
        return;
    }
    snprintf(mp4_local, sizeof mp4_local, "%s.mp4", o->prefix);
    snprintf(png_local, sizeof png_local, "%s.png", o->prefix);
    sibling_key(o->latents_key, ".mp4", mp4_key, sizeof mp4_key);
    sibling_key(o->latents_key, ".png", png_key, sizeof png_key);
    const char *extra_key[2] = {mp4_key, png_key}, *extra_local[2] = {mp4_local, png_local};
    for (int e = 0; have_mp4 && e < 2; e++)
        if (upload(j, st, extra_key[e], extra_local[e], err, sizeof err)) {
            snprintf(msg, sizeof msg, "upload of %.400s to %.200s failed: %.500s", extra_key[e],
                     vdn_store_uri(st), err);
            finish(j, 0, VDN_FAULT_TRANSIENT, msg);
            return;
        }
    snprintf(local, sizeof local, "%s.json", o->prefix);
    if (record_gpus(local, j, o->ranks, o->via, o->why, have_mp4 ? o->dg : NULL, err, sizeof err) ||
        record_cleaned(local, j, err, sizeof err)) {
        snprintf(msg, sizeof msg, "run record: %s", err);
        finish(j, 0, VDN_FAULT_WORKER, msg);
        return;
    }
    size_t rlen = 0;
    char *record = vdn_read_file(local, &rlen, err, sizeof err);
    if (!record) {
        snprintf(msg, sizeof msg, "engine wrote no run record: %s", err);
        finish(j, 0, VDN_FAULT_WORKER, msg);
        return;
    }
    if (upload(j, st, o->record_key, local, err, sizeof err)) {
        free(record);
        snprintf(msg, sizeof msg, "upload of %s to %s failed: %s", o->record_key, vdn_store_uri(st),
                 err);
        finish(j, 0, VDN_FAULT_TRANSIENT, msg);
        return;
    }
    pthread_mutex_lock(&j->mu);
    /* the snapshots go once the coordinator ACKs the RESULT (worker/loop.c), not now: a worker
     * that dies before that leaves them for the next attempt to resume from */
    j->outputs_store = vdn_xstrdup(vdn_store_uri(st));
    j->record_json = record;
    /* the mp4 first: `vdn status` shows a done job's first object */
    j->object_keys = vdn_xcalloc(4, sizeof *j->object_keys);
    int nk = 0;
    if (have_mp4) {
        j->object_keys[nk++] = vdn_xstrdup(mp4_key);
        j->object_keys[nk++] = vdn_xstrdup(png_key);
    }
    if (keep_latents) j->object_keys[nk++] = vdn_xstrdup(o->latents_key);
    j->object_keys[nk++] = vdn_xstrdup(o->record_key);
    j->n_object_keys = nk;
    pthread_mutex_unlock(&j->mu);
    finish(j, 1, 0, NULL);
}

/* The job's local inputs: its prompt cache, or its keyframe pictures ("" = none). */
typedef struct {
    char cache[4096];
    char first[4096], last[4096];
} job_files;

/* The job's prompt for the pipeline: a text prompt goes to the worker's text prompts (their
 * cache in the job's store st) with its keyframe pictures fetched to local files, a prompt cache
 * is fetched to a local file. */
static int job_prompt(vdn_attempt *j, vdn_store *st, vdn_pipeline *pl, job_files *in,
                      vdn_fault *fault, char *err, size_t errlen) {
    char terr[VDN_ERR_LEN];
    memset(in, 0, sizeof *in);
    if (j->spec.prompt_cache && j->spec.prompt_cache[0])
        return resolve_input(j, "prompt cache", j->spec.prompt_cache, "prompt.safetensors",
                             in->cache, sizeof in->cache, fault, err, errlen);
    *fault = VDN_FAULT_JOB;
    if (!j->spec.prompt) return vdn_fail(err, errlen, "ASSIGN request.prompt_cache: empty");
    if (j->spec.first_frame && resolve_input(j, "first_frame", j->spec.first_frame, "first_frame",
                                             in->first, sizeof in->first, fault, err, errlen))
        return -1;
    if (j->spec.last_frame && resolve_input(j, "last_frame", j->spec.last_frame, "last_frame",
                                            in->last, sizeof in->last, fault, err, errlen))
        return -1;
    /* a checkpoint without a text encoder is this worker's */
    *fault = VDN_FAULT_WORKER;
    if (!(pl->text = vdn_worker_text_get(j->stores->text, terr, sizeof terr)))
        return vdn_fail(err, errlen, "text prompt: %s", terr);
    pl->prompt_store = st;
    pl->text_gpu = j->gpus.index[0];
    return 0;
}

/* A failure names the file the request named, not the attempt's private copy of it (a local file
 * under --data-root is read from a copy in scratch, roots.c; a store object from its download). */
static void name_originals(const vdn_attempt *j, const job_files *in, const char *noise_copy,
                           char *text, size_t len) {
    const char *copy[4] = {in->cache, in->first, in->last, noise_copy};
    const char *orig[4] = {j->spec.prompt_cache, j->spec.first_frame, j->spec.last_frame,
                           j->spec.noise_file};
    for (int k = 0; k < 4; k++) {
        char *at;
        size_t cl = copy[k] ? strlen(copy[k]) : 0;
        if (!cl || !orig[k] || !(at = strstr(text, copy[k]))) continue;
        size_t ol = strlen(orig[k]), tail = strlen(at + cl);
        if ((size_t)(at - text) + ol + tail + 1 > len) continue;
        memmove(at + ol, at + cl, tail + 1);
        memcpy(at, orig[k], ol);
    }
}

/* A scoring job: the worker's score function does the work into scratch/score.json, which is
 * uploaded as the job's record once the main loop lets the attempt upload. */
static void score_job(vdn_attempt *j, vdn_store *st, const char *record_key) {
    char err[VDN_ERR_LEN], msg[VDN_ERR_LEN + 64], out[4200];
    if (!j->spec.score_fn) {
        finish(j, 0, VDN_FAULT_WORKER, "a scoring job, and this worker has no scorer");
        return;
    }
    snprintf(out, sizeof out, "%s/score.json", j->scratch);
    int rc = j->spec.score_fn(j->spec.score, st, j->scratch, out, err, sizeof err);
    if (rc) {
        snprintf(msg, sizeof msg, "scoring: %s", err);
        if (rc == -2) j->store_op = VDN_STORE_OP_DOWNLOAD;
        finish(j, 0, rc == -2 ? VDN_FAULT_TRANSIENT : VDN_FAULT_JOB, msg);
        return;
    }
    if (!wait_gate(j)) {
        finish(j, 0, VDN_FAULT_TRANSIENT, "cancelled before upload: the attempt is no longer ours");
        return;
    }
    size_t len;
    char *result = vdn_read_file(out, &len, err, sizeof err);
    if (!result || upload(j, st, record_key, out, err, sizeof err)) {
        free(result);
        snprintf(msg, sizeof msg, "uploading the scores: %s", err);
        finish(j, 0, VDN_FAULT_TRANSIENT, msg);
        return;
    }
    pthread_mutex_lock(&j->mu);
    j->record_json = result; /* the job's record: its result */
    j->object_keys = vdn_xcalloc(1, sizeof *j->object_keys);
    j->object_keys[0] = vdn_xstrdup(record_key);
    j->n_object_keys = 1;
    pthread_mutex_unlock(&j->mu);
    finish(j, 1, 0, NULL);
}

static void *job_main(void *arg) {
    vdn_attempt *j = arg;
    char err[VDN_ERR_LEN], msg[VDN_ERR_LEN + 256];
    vdn_fault fault = VDN_FAULT_JOB;
    char prefix[4200], keybuf[2200];
    job_files in;
    const char *latents_key, *record_key;

    if (vdn_attempt_output_keys(&j->spec, &latents_key, &record_key, keybuf, sizeof keybuf, err,
                                sizeof err)) {
        finish(j, 0, VDN_FAULT_JOB, err);
        return NULL;
    }
    /* The output store first: a worker that cannot open it should not spend a render. (The
     * handle is fetched again before the upload: the prompt cache's store may take its slot.) */
    vdn_store *st = store_for(j->stores, j->spec.store_uri, err, sizeof err);
    if (!st) {
        /* no store at all is this worker's set-up; one that does not open, the store's */
        snprintf(msg, sizeof msg, "output store: %s", err);
        int mine = !(j->spec.store_uri && *j->spec.store_uri) && !j->stores->default_uri;
        if (!mine) j->store_op = VDN_STORE_OP_OPEN;
        finish(j, 0, mine ? VDN_FAULT_WORKER : VDN_FAULT_TRANSIENT, msg);
        return NULL;
    }
    if (j->spec.kind && !strcmp(j->spec.kind, "score")) {
        score_job(j, st, record_key);
        return NULL;
    }
    /* VAEs that did not load at start: this worker's, and no render is spent on the job */
    if (!j->gpus.dec[0] && j->gpus.dec_err && j->gpus.dec_err[0]) {
        snprintf(msg, sizeof msg, "decoding the latents into an mp4: %s", j->gpus.dec_err);
        finish(j, 0, VDN_FAULT_WORKER, msg);
        return NULL;
    }
    vdn_pipeline pl = {.engines = j->gpus.eng, .n_engines = 1};
    if (job_prompt(j, st, &pl, &in, &fault, err, sizeof err)) {
        finish(j, 0, fault, err);
        return NULL;
    }
    const char *noise = j->spec.noise_file;
    char noise_path[4096];
    if (noise && *noise) {
        snprintf(noise_path, sizeof noise_path, "%s/noise.safetensors", j->scratch);
        if (vdn_root_copy(noise, j->spec.data_roots, j->spec.n_data_roots, noise_path, err,
                          sizeof err)) {
            snprintf(msg, sizeof msg, "noise_file: %s", err);
            finish(j, 0, VDN_FAULT_JOB, msg);
            return NULL;
        }
        noise = noise_path;
    }

    snapshot_prefix(latents_key, j->snap_prefix, sizeof j->snap_prefix);
    vdn_snapshot_fingerprint(&j->spec, vdn_engine_identity(j->eng), vdn_engine_backend_name(j->eng),
                             j->fingerprint, sizeof j->fingerprint);
    vdn_render_state resume;
    int resuming = load_resume(j, &resume);
    pthread_mutex_lock(&j->mu);
    j->resumed_from = resuming ? resume.step : 0;
    pthread_mutex_unlock(&j->mu);

    /* The product a person opens: out.mp4 and its poster out.png, decoded with the VAEs the
     * slots of the job's GPUs loaded at start, over all of them; a checkpoint without them
     * yields the latents only. */
    decode_group dg = {0};
    if (j->gpus.dec[0]) decoders_of(j, &dg);
    pl.decoders = dg.dec;
    pl.n_decoders = dg.n;
    const char *via;
    char why[VDN_ERR_LEN];
    pl.n_engines = render_ranks(j, &via, why, sizeof why);

    snprintf(prefix, sizeof prefix, "%s/out", j->scratch);
    vdn_pipeline_request preq = {
        .render =
            {
                .prompt_cache = in.cache[0] ? in.cache : NULL,
                .frames = j->spec.frames,
                .height = j->spec.height,
                .width = j->spec.width,
                .steps = j->spec.steps,
                .seed = j->spec.seed,
                .variant = j->spec.variant,
                .video_shift = j->spec.video_shift,
                .audio_shift = j->spec.audio_shift,
                .noise_file = noise,
                .out_prefix = prefix,
                .resume = resuming ? &resume : NULL,
                .snapshot =
                    j->spec.snapshot_seconds > 0 || j->spec.snapshot_every > 0 ? on_snapshot : NULL,
                .snapshot_user = j,
                .snapshot_every_nfe = j->spec.snapshot_every,
                .snapshot_every_seconds = j->spec.snapshot_seconds,
                /* a CANCEL or a lost lease stops the DiT between blocks and the decoders
                 * between tiles, not only at the next NFE */
                .cancel = &j->cancel,
            },
        .prompt_text = in.cache[0] ? NULL : j->spec.prompt,
        .first_frame = in.first[0] ? in.first : NULL,
        .last_frame = in.last[0] ? in.last : NULL,
        .save_latents = j->spec.save_latents,
        .poster = 1,
        .crf = -1,
        .quiet = 1,
        .progress = on_progress,
        .user = j,
        .stage = on_stage,
    };
    vdn_pipeline_result res;
    int rc = vdn_pipeline_render(&pl, &preq, &res, err, sizeof err);
    if (resuming) vdn_snapshot_free(&resume);
    if (res.text_used) log_text_prompt(j, &res.text);
    if (rc) {
        name_originals(j, &in, noise == noise_path ? noise_path : NULL, err, sizeof err);
        finish_pipeline(j, &res, &dg, err);
        return NULL;
    }
    if (res.have_mp4) {
        dg.share = res.share;
        log_decode(j, &dg, res.decode_seconds);
    }
    if (!wait_gate(j)) {
        finish(j, 0, VDN_FAULT_TRANSIENT, "cancelled before upload: the attempt is no longer ours");
        return NULL;
    }
    job_outputs o = {prefix, latents_key, record_key, &res, &dg, pl.n_engines, via, why};
    store_outputs(j, &o);
    return NULL;
}

vdn_attempt *vdn_attempt_start(vdn_assignment *spec, const vdn_attempt_gpus *gpus,
                               vdn_worker_stores *stores, const char *scratch_root,
                               int upload_attempts, char *err, size_t errlen) {
    vdn_attempt *j = vdn_xcalloc(1, sizeof *j);
    j->spec = *spec;
    memset(spec, 0, sizeof *spec);
    j->gpus = *gpus;
    j->eng = gpus->eng[0];
    j->stores = stores;
    j->upload_attempts = upload_attempts > 0 ? upload_attempts : 1;
    const char *delay = getenv("VDN_TEST_NFE_DELAY_MS");
    j->nfe_delay_ms = delay ? atoi(delay) : 0;
    j->started = vdn_now();
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->gate_cv, NULL);
    atomic_init(&j->cancel, 0);
    j->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    snprintf(j->scratch, sizeof j->scratch, "%s/a%llu", scratch_root,
             (unsigned long long)j->spec.attempt_id);
    if (j->efd < 0) {
        vdn_fail(err, errlen, "eventfd: %s", strerror(errno));
        goto fail;
    }
    /* A leftover dir from a killed earlier run of this attempt is stale: start clean. */
    struct stat sb;
    j->scratch_leftover = lstat(j->scratch, &sb) == 0;
    nftw(j->scratch, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    if (vdn_mkdir_p(j->scratch, err, errlen)) goto fail;
    if (pthread_create(&j->thread, NULL, job_main, j)) {
        vdn_fail(err, errlen, "cannot start the render thread");
        goto fail;
    }
    return j;
fail:
    if (j->efd >= 0) close(j->efd);
    vdn_assignment_free(&j->spec);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->gate_cv);
    free(j);
    return NULL;
}

void vdn_attempt_gate(vdn_attempt *j, int go) {
    pthread_mutex_lock(&j->mu);
    if (j->gate == 0) j->gate = go ? 1 : -1;
    pthread_cond_signal(&j->gate_cv);
    pthread_mutex_unlock(&j->mu);
}

void vdn_attempt_free(vdn_attempt *j) {
    if (!j) return;
    pthread_join(j->thread, NULL);
    rm_bytes = 0;
    nftw(j->scratch, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    VDN_INFO("job %llu attempt %llu: scratch %s removed (%.1f MB)",
             (unsigned long long)j->spec.job_id, (unsigned long long)j->spec.attempt_id, j->scratch,
             (double)rm_bytes / 1e6);
    close(j->efd);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->gate_cv);
    vdn_assignment_free(&j->spec);
    free(j->nfe_seconds);
    free(j->record_json);
    free(j->outputs_store);
    for (int i = 0; i < j->n_object_keys; i++)
        free(j->object_keys[i]);
    free(j->object_keys);
    free(j);
}
