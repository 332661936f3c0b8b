/* The farm's cache of encoded prompts (prompt_text.h) under concurrency, on the tiny random text
 * encoder and CPU devices standing in for a worker's GPUs:
 *
 *  1. single flight: 8 jobs on 8 devices, 2 prompts, all at once: exactly 2 encodes, each on the
 *     device of the job that led it; the other 6 take its result (hits), the bytes equal
 *     `vdn encode`'s; the two prompts' encodes overlap in time (no worker-wide lock);
 *  2. memory policy: by default the encoder is loaded for a miss and released after it (nothing
 *     resident); with the keep policy at 0 GiB (VDN_TEXT_ENCODER_KEEP_FREE_GIB=0) it stays on its
 * device and the next miss there does not load it again; with an amount no device has free it is
 * released;
 *  3. the run record's text_prompt fields (encoded_on, waited);
 *  4. a failing store is named as such (info.store_failed): an unreachable S3 endpoint is a
 *     download failure, a cache folder that cannot be made an upload failure, an encode that
 *     works neither (the worker turns these into vdn_store_errors_total's op);
 *  5. precision: one prompt at bf16 and at fp8 is two keys and two entries, never one shared
 *     entry; the bf16 key is the pre-fp8 one; files and records name the precision;
 *  6. cancel: a miss whose encode takes 2.5 s (the tests' delay, spread over the layers) cancelled
 *     after 0.3 s returns "cancelled" within a second, stores nothing, keeps no encoder and
 *     frees the device's memory; the same call without a cancel encodes.
 *
 *   test_prompt_cache CKPT WORKDIR */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../ops/test/check.h"
#include "op.h"
#include "prompt_text.h"
#include "safetensors.h"
#include "store.h"
#include "tokenizer.h"
#include "vdn_util.h"

#define JOBS 8

static const char *ckpt, *work;
static const char *prompts[2] = {"A cat walks slowly across a wet rooftop at night.",
                                 "一只猫在屋顶上奔跑，镜头缓慢推进。"};

typedef struct {
    vdn_text_prompts *p;
    vdn_dev *dev;
    int gpu;
    const char *text;
    char store_uri[4200];
    char path[4200];
    pthread_barrier_t *go;
    vdn_text_cache_info info;
    int rc;
    char err[VDN_ERR_LEN];
    double t0, t1;
} job;

/* One job: its own store handle (as each worker slot has), then the cache call. */
static void *run_job(void *arg) {
    job *j = arg;
    vdn_store *st = vdn_store_open(j->store_uri, NULL, j->err, sizeof j->err);
    pthread_barrier_wait(j->go);
    j->t0 = vdn_now();
    vdn_text_place at = {.dev = j->dev, .gpu = j->gpu};
    j->rc = st ? vdn_text_prompts_cached(j->p, &at, st, &(vdn_prompt_input){.text = j->text}, NULL,
                                         j->path, &j->info, j->err, sizeof j->err)
               : -1;
    j->t1 = vdn_now();
    if (st) vdn_store_close(st);
    return NULL;
}

static int same_file(const char *a, const char *b) {
    char err[VDN_ERR_LEN];
    size_t na, nb;
    char *da = vdn_read_file(a, &na, err, sizeof err), *db = vdn_read_file(b, &nb, err, sizeof err);
    int same = da && db && na == nb && !memcmp(da, db, na);
    free(da);
    free(db);
    return same;
}

/* keep_gib < 0: the default policy (release after each encode) */
static vdn_text_prompts *open_delayed(double keep_gib, int delay_ms) {
    char err[VDN_ERR_LEN];
    const vdn_text_prompts_opts o = {.backend = "cpu",
                                     .keep = keep_gib >= 0,
                                     .keep_free_gib = keep_gib,
                                     .test_encode_delay_ms = delay_ms};
    vdn_text_prompts *p = vdn_text_prompts_open(ckpt, &o, err, sizeof err);
    CHECK(p != NULL, "open %s: %s", ckpt, err);
    return p;
}

static vdn_text_prompts *open_prompts(double keep_gib) {
    return open_delayed(keep_gib, 0);
}

static void single_flight(vdn_dev **devs, const char *store_uri) {
    /* every leader holds its encode open 400 ms, so the others surely miss while it runs */
    vdn_text_prompts *p = open_delayed(-1, 400);
    if (!p) return;
    static job jobs[JOBS];
    pthread_t th[JOBS];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, JOBS);
    for (int i = 0; i < JOBS; i++) {
        jobs[i] = (job){.p = p, .dev = devs[i], .gpu = i, .text = prompts[i % 2], .go = &go};
        snprintf(jobs[i].store_uri, sizeof jobs[i].store_uri, "%s", store_uri);
        snprintf(jobs[i].path, sizeof jobs[i].path, "%s/job%d.safetensors", work, i);
        pthread_create(&th[i], NULL, run_job, &jobs[i]);
    }
    for (int i = 0; i < JOBS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&go);

    int misses = 0, waited = 0, leader[2] = {-1, -1};
    for (int i = 0; i < JOBS; i++) {
        job *j = &jobs[i];
        CHECK(j->rc == 0, "job %d: %s", i, j->err);
        if (j->rc) continue;
        waited += j->info.waited;
        CHECK(!strcmp(j->info.key, jobs[i % 2].info.key), "job %d: key %s vs %s", i, j->info.key,
              jobs[i % 2].info.key);
        if (!j->info.hit) {
            misses++;
            leader[i % 2] = i;
            /* the encode ran where the job was placed, loaded for it and released after */
            CHECK(j->info.gpu == i && !strcmp(j->info.device, "cpu"), "job %d: encoded on %d %s", i,
                  j->info.gpu, j->info.device);
            CHECK(j->info.loaded == 1 && j->info.kept == 0, "job %d: loaded %d kept %d", i,
                  j->info.loaded, j->info.kept);
        }
    }
    CHECK(misses == 2, "%d of %d jobs encoded (2 prompts): expected 2", misses, JOBS);
    CHECK(vdn_text_prompts_encodes(p) == 2, "%ld encodes, expected 2", vdn_text_prompts_encodes(p));
    CHECK(vdn_text_prompts_loads(p) == 2, "%ld loads, expected one per miss",
          vdn_text_prompts_loads(p));
    CHECK(vdn_text_prompts_resident(p) == 0, "an encoder stayed resident by default");
    CHECK(waited >= 1, "no job waited for another's encode (the leaders held theirs 400 ms)");
    /* a job that took another's result has its bytes, which are `vdn encode`'s */
    for (int k = 0; k < 2 && leader[0] >= 0 && leader[1] >= 0; k++) {
        char mine[4300], err[VDN_ERR_LEN];
        snprintf(mine, sizeof mine, "%s/encode%d.safetensors", work, k);
        CHECK(vdn_text_prompts_write(p, &(vdn_prompt_input){.text = prompts[k]}, NULL, mine, err,
                                     sizeof err) == 0,
              "%s", err);
        for (int i = k; i < JOBS; i += 2)
            CHECK(same_file(jobs[i].path, mine), "job %d's cache file differs from vdn encode's",
                  i);
        /* different prompts encode at once, each on its own device */
        job *a = &jobs[leader[0]], *b = &jobs[leader[1]];
        CHECK(a->t0 < b->t1 && b->t0 < a->t1, "the two prompts' encodes did not overlap");
    }
    printf("single flight: %d jobs, 2 prompts: %d encodes, %d waited for a leader\n", JOBS, misses,
           waited);
    vdn_text_prompts_close(p);
}

/* One job on devs[d] with text, alone. */
static vdn_text_cache_info one(vdn_text_prompts *p, vdn_store *st, vdn_dev *dev, int gpu,
                               const char *text) {
    vdn_text_cache_info info;
    char err[VDN_ERR_LEN], path[4300];
    snprintf(path, sizeof path, "%s/one.safetensors", work);
    vdn_text_place at = {.dev = dev, .gpu = gpu};
    int rc = vdn_text_prompts_cached(p, &at, st, &(vdn_prompt_input){.text = text}, NULL, path,
                                     &info, err, sizeof err);
    CHECK(rc == 0, "%s: %s", text, err);
    return info;
}

static void keep_policy(vdn_dev **devs, vdn_store *st) {
    vdn_text_prompts *p = open_prompts(0); /* any free memory will do */
    if (!p) return;
    vdn_text_cache_info a = one(p, st, devs[0], 0, "kept one");
    CHECK(!a.hit && a.loaded && a.kept, "first miss on GPU 0: hit %d loaded %d kept %d", a.hit,
          a.loaded, a.kept);
    vdn_text_cache_info b = one(p, st, devs[0], 0, "kept two");
    CHECK(!b.hit && !b.loaded && b.kept, "second miss on GPU 0: loaded %d kept %d", b.loaded,
          b.kept);
    vdn_text_cache_info c = one(p, st, devs[1], 1, "kept three");
    CHECK(!c.hit && c.loaded && c.gpu == 1, "a miss on GPU 1: loaded %d gpu %d", c.loaded, c.gpu);
    CHECK(vdn_text_prompts_loads(p) == 2 && vdn_text_prompts_resident(p) == 2,
          "%ld loads, %d resident: expected 2 and 2", vdn_text_prompts_loads(p),
          vdn_text_prompts_resident(p));
    vdn_text_prompts_release(p, devs[0]);
    CHECK(vdn_text_prompts_resident(p) == 1, "release of GPU 0's encoder");
    vdn_text_prompts_close(p); /* frees GPU 1's */

    p = open_prompts(1e12); /* more than any device has free: released */
    if (!p) return;
    vdn_text_cache_info d = one(p, st, devs[2], 2, "released one");
    CHECK(!d.hit && d.loaded && !d.kept && vdn_text_prompts_resident(p) == 0,
          "keep threshold above the free memory: kept %d resident %d", d.kept,
          vdn_text_prompts_resident(p));
    vdn_text_cache_info e = one(p, st, devs[2], 2, "released one");
    CHECK(e.hit && !e.waited, "the same prompt again: a plain hit");

    /* the run record says where a miss encoded, and a hit says no more than that it hit */
    char rec[4300], err[VDN_ERR_LEN];
    snprintf(rec, sizeof rec, "%s/record.json", work);
    CHECK(vdn_write_file_atomic(rec, "{\"seed\": 1}", 11, err, sizeof err) == 0, "%s", err);
    CHECK(vdn_text_cache_info_to_record(rec, &d, "ID", err, sizeof err) == 0, "%s", err);
    size_t len;
    char *txt = vdn_read_file(rec, &len, err, sizeof err);
    cJSON *r = txt ? cJSON_Parse(txt) : NULL;
    cJSON *tp = cJSON_GetObjectItem(r, "text_prompt");
    cJSON *on = cJSON_GetObjectItem(tp, "encoded_on");
    CHECK(on && cJSON_GetObjectItem(on, "gpu")->valuedouble == 2 &&
              !strcmp(cJSON_GetObjectItem(on, "device")->valuestring, "cpu") &&
              cJSON_IsTrue(cJSON_GetObjectItem(on, "loaded")) &&
              cJSON_IsFalse(cJSON_GetObjectItem(on, "kept")) &&
              cJSON_IsFalse(cJSON_GetObjectItem(tp, "waited")) &&
              !strcmp(cJSON_GetObjectItem(tp, "cache")->valuestring, "miss"),
          "record: %s", txt ? txt : "(none)");
    cJSON_Delete(r);
    free(txt);
    CHECK(vdn_text_cache_info_to_record(rec, &e, "ID", err, sizeof err) == 0, "%s", err);
    txt = vdn_read_file(rec, &len, err, sizeof err);
    r = txt ? cJSON_Parse(txt) : NULL;
    tp = cJSON_GetObjectItem(r, "text_prompt");
    CHECK(tp && !cJSON_GetObjectItem(tp, "encoded_on") &&
              !strcmp(cJSON_GetObjectItem(tp, "cache")->valuestring, "hit"),
          "hit record: %s", txt ? txt : "(none)");
    cJSON_Delete(r);
    free(txt);
    vdn_text_prompts_close(p);
    printf("keep policy: resident with room, released without; records say where\n");
}

static void store_failures(vdn_dev *dev) {
    char err[VDN_ERR_LEN], root[4200], uri[4300], blocker[4400], path[4300];
    vdn_text_place at = {.dev = dev, .gpu = 0};
    vdn_text_cache_info info;
    vdn_text_prompts *p = open_prompts(-1);
    if (!p) return;
    /* upload: the folder the cache entries go in is taken by a file */
    snprintf(root, sizeof root, "%s/store-blocked", work);
    snprintf(uri, sizeof uri, "file://%s", root);
    snprintf(blocker, sizeof blocker, "%s/%s", root, VDN_PROMPT_CACHE_PREFIX);
    blocker[strlen(blocker) - 1] = 0; /* the prefix's folder, without its '/' */
    snprintf(path, sizeof path, "%s/blocked.safetensors", work);
    CHECK(vdn_mkdir_p(root, err, sizeof err) == 0, "%s", err);
    CHECK(vdn_write_file_atomic(blocker, "x", 1, err, sizeof err) == 0, "%s", err);
    vdn_store *st = vdn_store_open(uri, NULL, err, sizeof err);
    CHECK(st != NULL, "%s", err);
    int rc = st ? vdn_text_prompts_cached(p, &at, st, &(vdn_prompt_input){.text = prompts[0]}, NULL,
                                          path, &info, err, sizeof err)
                : 0;
    CHECK(rc == -1 && info.store_failed == 2, "blocked upload: rc %d store_failed %d (%s)", rc,
          info.store_failed, err);
    vdn_store_close(st);
    /* download: nothing answers at the S3 endpoint (one try, no backoff to speak of) */
    vdn_store_opts o = {.endpoint = "http://127.0.0.1:9",
                        .access_key = "k",
                        .secret_key = "s",
                        .max_retries = 1,
                        .retry_max_seconds = 0.2};
    st = vdn_store_open("s3://vdn-test/prefix", &o, err, sizeof err);
    CHECK(st != NULL, "%s", err);
    rc = st ? vdn_text_prompts_cached(p, &at, st, &(vdn_prompt_input){.text = prompts[0]}, NULL,
                                      path, &info, err, sizeof err)
            : 0;
    CHECK(rc == -1 && info.store_failed == 1, "dead endpoint: rc %d store_failed %d (%s)", rc,
          info.store_failed, err);
    vdn_store_close(st);
    vdn_text_prompts_close(p);
    printf("store failures: upload and download named\n");
}

/* The number of files in DIR (a file store's prompt-cache/ folder), 0 when there is none. */
static int count_files(const char *dir) {
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "ls -1 '%s' 2>/dev/null | wc -l", dir);
    FILE *f = popen(cmd, "r");
    int n = 0;
    if (f) {
        if (fscanf(f, "%d", &n) != 1) n = -1;
        pclose(f);
    }
    return n;
}

/* A cache file's metadata value (NULL if absent), copied into out. */
static const char *meta_of(const char *path, const char *key, char *out, size_t len) {
    char err[VDN_ERR_LEN];
    vdn_st_file *f = vdn_st_open(path, err, sizeof err);
    const char *v = f ? vdn_st_meta(f, key) : NULL;
    if (v) snprintf(out, len, "%s", v);
    vdn_st_close(f);
    return v ? out : NULL;
}

/* Precision in the cache: the same prompt through a bf16 and an fp8 encoder of one checkpoint
 * is two keys, two store entries, two encodes, each a hit for its own precision afterwards;
 * the entries and the run records name their precision. The bf16 key is the one written before
 * fp8 existed (its hash material, spelled out here), so stores filled then stay valid. */
static void precisions(vdn_dev *dev) {
    char err[VDN_ERR_LEN], uri[4300], dir[4300], path[2][4300], rec[4300];
    snprintf(dir, sizeof dir, "%s/store-prec/%s", work, VDN_PROMPT_CACHE_PREFIX);
    snprintf(uri, sizeof uri, "file://%s/store-prec", work);
    vdn_store *st = vdn_store_open(uri, NULL, err, sizeof err);
    CHECK(st != NULL, "%s", err);
    vdn_text_prompts *p[2] = {
        vdn_text_prompts_open(ckpt, &(vdn_text_prompts_opts){.backend = "cpu"}, err, sizeof err),
        vdn_text_prompts_open(
            ckpt, &(vdn_text_prompts_opts){.backend = "cpu", .precision = VDN_PRECISION_FP8}, err,
            sizeof err)};
    CHECK(p[0] && p[1], "%s", err);
    if (!st || !p[0] || !p[1]) goto done;
    CHECK(vdn_text_prompts_precision(p[1]) == VDN_PRECISION_FP8, "fp8 prompts say %s",
          vdn_precision_name(vdn_text_prompts_precision(p[1])));
    vdn_text_place at = {.dev = dev, .gpu = 0};
    vdn_text_cache_info info[2], again[2];
    for (int k = 0; k < 2; k++) {
        snprintf(path[k], sizeof path[k], "%s/prec%d.safetensors", work, k);
        CHECK(vdn_text_prompts_cached(p[k], &at, st, &(vdn_prompt_input){.text = prompts[0]}, NULL,
                                      path[k], &info[k], err, sizeof err) == 0,
              "%s", err);
        CHECK(!info[k].hit, "precision %d: the first look is a miss (got a hit: shared entry?)", k);
        CHECK(count_files(dir) == k + 1, "%d cache entries after %d precisions", count_files(dir),
              k + 1);
    }
    CHECK(strcmp(info[0].key, info[1].key), "bf16 and fp8 share the key %s", info[0].key);
    CHECK(!strcmp(info[0].precision, "bf16") && !strcmp(info[1].precision, "fp8"),
          "info precision %s / %s", info[0].precision, info[1].precision);
    for (int k = 0; k < 2; k++) {
        char other[4300];
        snprintf(other, sizeof other, "%s/prec%d_again.safetensors", work, k);
        CHECK(vdn_text_prompts_cached(p[k], &at, st, &(vdn_prompt_input){.text = prompts[0]}, NULL,
                                      other, &again[k], err, sizeof err) == 0,
              "%s", err);
        CHECK(again[k].hit && !strcmp(again[k].key, info[k].key) && same_file(other, path[k]),
              "precision %d again: hit %d, key %s (was %s)", k, again[k].hit, again[k].key,
              info[k].key);
    }
    CHECK(count_files(dir) == 2 && vdn_text_prompts_encodes(p[0]) == 1 &&
              vdn_text_prompts_encodes(p[1]) == 1,
          "%d entries, %ld + %ld encodes: expected 2 and 1 + 1", count_files(dir),
          vdn_text_prompts_encodes(p[0]), vdn_text_prompts_encodes(p[1]));
    CHECK(!same_file(path[0], path[1]), "the fp8 entry has the bf16 entry's bytes");
    char m[2][32];
    CHECK(meta_of(path[0], "text_encoder_precision", m[0], sizeof m[0]) &&
              meta_of(path[1], "text_encoder_precision", m[1], sizeof m[1]) &&
              !strcmp(m[0], "bf16") && !strcmp(m[1], "fp8"),
          "cache file metadata text_encoder_precision");
    /* the bf16 key as it was before fp8 */
    {
        char tdir[4300], material[8192], hex[65], want[160];
        snprintf(tdir, sizeof tdir, "%s/base/tokenizer", ckpt);
        vdn_tokenizer *t = vdn_tokenizer_load(tdir, err, sizeof err);
        if (!t) {
            snprintf(tdir, sizeof tdir, "%s/tokenizer", ckpt);
            t = vdn_tokenizer_load(tdir, err, sizeof err);
        }
        int32_t *ids = NULL;
        size_t n = 0;
        CHECK(t && !vdn_tokenize(t, prompts[0], strlen(prompts[0]), &ids, &n, err, sizeof err),
              "%s", err);
        int used = snprintf(material, sizeof material, "vdn prompt cache v1\nencoder %s\nids",
                            vdn_text_prompts_identity(p[0]));
        for (size_t i = 0; i < n; i++)
            used += snprintf(material + used, sizeof material - (size_t)used, " %d", ids[i]);
        vdn_sha256_hex(material, (size_t)used, hex);
        snprintf(want, sizeof want, "%s%s.safetensors", VDN_PROMPT_CACHE_PREFIX, hex);
        CHECK(!strcmp(info[0].key, want), "bf16 key %s, the pre-fp8 key is %s", info[0].key, want);
        free(ids);
        vdn_tokenizer_free(t);
    }
    /* the run record's text_prompt says the precision */
    snprintf(rec, sizeof rec, "%s/record-prec.json", work);
    CHECK(vdn_write_file_atomic(rec, "{\"seed\": 1}", 11, err, sizeof err) == 0, "%s", err);
    CHECK(vdn_text_cache_info_to_record(rec, &info[1], "ID", err, sizeof err) == 0, "%s", err);
    size_t len;
    char *txt = vdn_read_file(rec, &len, err, sizeof err);
    cJSON *r = txt ? cJSON_Parse(txt) : NULL;
    cJSON *pr = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "text_prompt"), "precision");
    CHECK(cJSON_IsString(pr) && !strcmp(pr->valuestring, "fp8"), "record: %s",
          txt ? txt : "(none)");
    cJSON_Delete(r);
    free(txt);
    printf("precisions: bf16 and fp8 of one prompt: 2 keys, 2 entries, each a hit again\n");
done:
    vdn_text_prompts_close(p[0]);
    vdn_text_prompts_close(p[1]);
    vdn_store_close(st);
}

/* A hit is checked before use: an entry whose embeddings were changed (one byte), and another
 * prompt's entry copied under this key, each fail the check, are encoded again and stored over,
 * and the result equals the honest entry byte for byte. */
static void tampered(vdn_dev *dev) {
    char err[VDN_ERR_LEN], uri[4300], entry[4400], path[4300], again[4300], other[4300];
    snprintf(uri, sizeof uri, "file://%s/store-tamper", work);
    vdn_store *st = vdn_store_open(uri, NULL, err, sizeof err);
    vdn_text_prompts *p =
        vdn_text_prompts_open(ckpt, &(vdn_text_prompts_opts){.backend = "cpu"}, err, sizeof err);
    CHECK(st && p, "%s", err);
    if (!st || !p) goto done;
    vdn_text_place at = {.dev = dev, .gpu = 0};
    vdn_text_cache_info a, b, c;
    snprintf(path, sizeof path, "%s/tamper-a.safetensors", work);
    snprintf(other, sizeof other, "%s/tamper-b.safetensors", work);
    snprintf(again, sizeof again, "%s/tamper-again.safetensors", work);
    CHECK(vdn_text_prompts_cached(p, &at, st, &(vdn_prompt_input){.text = prompts[0]}, NULL, path,
                                  &a, err, sizeof err) == 0 &&
              vdn_text_prompts_cached(p, &at, st, &(vdn_prompt_input){.text = prompts[1]}, NULL,
                                      other, &b, err, sizeof err) == 0,
          "%s", err);
    char m[200];
    CHECK(meta_of(path, "cache_key", m, sizeof m) && !strcmp(m, a.key), "cache_key %s", m);
    CHECK(meta_of(path, "content_sha256", m, sizeof m) && strlen(m) == 64, "content_sha256 %s", m);
    snprintf(entry, sizeof entry, "%s/store-tamper/%s", work, a.key);
    for (int k = 0; k < 2; k++) {
        if (k == 0) { /* one byte of the embeddings: the last byte of the file */
            FILE *f = fopen(entry, "r+b");
            CHECK(f != NULL, "%s", entry);
            if (!f) break;
            fseek(f, -1, SEEK_END);
            int ch = fgetc(f);
            fseek(f, -1, SEEK_END);
            fputc(ch ^ 0x40, f);
            fclose(f);
        } else { /* prompt 1's entry under prompt 0's key */
            size_t len;
            char *bytes = vdn_read_file(other, &len, err, sizeof err);
            CHECK(bytes && vdn_write_file_atomic(entry, bytes, len, err, sizeof err) == 0, "%s",
                  err);
            free(bytes);
        }
        long before = vdn_text_prompts_encodes(p);
        CHECK(vdn_text_prompts_cached(p, &at, st, &(vdn_prompt_input){.text = prompts[0]}, NULL,
                                      again, &c, err, sizeof err) == 0,
              "%s", err);
        CHECK(!c.hit && vdn_text_prompts_encodes(p) == before + 1,
              "tamper %d: hit %d, %ld encodes (was %ld): the bad entry was used", k, c.hit,
              vdn_text_prompts_encodes(p), before);
        CHECK(same_file(again, path) && same_file(entry, path),
              "tamper %d: the entry was not encoded again to the honest bytes", k);
    }
    printf("tampered cache entries: both refused by the check, encoded again, stored over\n");
done:
    vdn_text_prompts_close(p);
    vdn_store_close(st);
}

static void *cancel_later(void *arg) {
    struct timespec ts = {0, 300 * 1000000L};
    nanosleep(&ts, NULL);
    atomic_store((atomic_int *)arg, 1);
    return NULL;
}

static void cancel_encode(vdn_dev *dev, const char *store_uri) {
    char err[VDN_ERR_LEN] = "", path[4300], key[200];
    vdn_text_prompts *p = open_delayed(-1, 2500);
    vdn_store *st = vdn_store_open(store_uri, NULL, err, sizeof err);
    CHECK(p && st, "%s", err);
    if (!p || !st) return;
    const vdn_prompt_input in = {.text = "A heron stands in the reeds; the camera does not move."};
    snprintf(path, sizeof path, "%s/cancelled.safetensors", work);
    size_t used0, peak;
    vdn_dev_memory(dev, &used0, &peak);
    atomic_int cancel;
    atomic_init(&cancel, 0);
    vdn_text_place at = {.dev = dev, .gpu = 3, .cancel = &cancel};
    vdn_text_cache_info info;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, cancel_later, &cancel) == 0);
    double t0 = vdn_now();
    int rc = vdn_text_prompts_cached(p, &at, st, &in, NULL, path, &info, err, sizeof err);
    double took = vdn_now() - t0;
    pthread_join(t, NULL);
    size_t used;
    vdn_dev_memory(dev, &used, &peak);
    CHECK(rc != 0 && strstr(err, "text encoder on cpu") && strstr(err, "cancelled before layer"),
          "rc %d: %s", rc, err);
    CHECK(took < 1.3, "the cancelled encode returned after %.2f s (cancelled at 0.3 s)", took);
    CHECK(used == used0, "the device holds %zu bytes after the cancel, %zu before", used, used0);
    CHECK(vdn_text_prompts_resident(p) == 0 && vdn_text_prompts_encodes(p) == 0,
          "an encoder kept or an encode counted");
    CHECK(vdn_text_prompts_key(p, &in, NULL, key, sizeof key, NULL, err, sizeof err) == 0 &&
              vdn_store_exists(st, key, NULL, err, sizeof err) == 0,
          "the cancelled encode stored %s", key);
    /* not cancelled: the same call takes the delay and encodes */
    at.cancel = NULL;
    t0 = vdn_now();
    rc = vdn_text_prompts_cached(p, &at, st, &in, NULL, path, &info, err, sizeof err);
    CHECK(rc == 0 && !info.hit && vdn_now() - t0 >= 2.5, "rc %d after %.2f s: %s", rc,
          vdn_now() - t0, err);
    vdn_store_close(st);
    vdn_text_prompts_close(p);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: test_prompt_cache CKPT WORKDIR\n");
        return 2;
    }
    ckpt = argv[1];
    work = argv[2];
    char err[VDN_ERR_LEN], store_uri[4200];
    snprintf(store_uri, sizeof store_uri, "file://%s/store", work);
    vdn_dev *devs[JOBS];
    for (int i = 0; i < JOBS; i++) {
        devs[i] = vdn_dev_open("cpu", 0, 1, err, sizeof err);
        CHECK(devs[i] != NULL, "%s", err);
        if (!devs[i]) return check_report("test_prompt_cache");
    }
    single_flight(devs, store_uri);
    vdn_store *st = vdn_store_open(store_uri, NULL, err, sizeof err);
    CHECK(st != NULL, "%s", err);
    if (st) keep_policy(devs, st);
    vdn_store_close(st);
    store_failures(devs[0]);
    precisions(devs[1]);
    tampered(devs[2]);
    cancel_encode(devs[3], store_uri);
    {
        /* a prompt over the byte limit is refused before the tokenizer sees it */
        vdn_text_prompts *p = vdn_text_prompts_open(
            ckpt, &(vdn_text_prompts_opts){.backend = "cpu"}, err, sizeof err);
        char *big = malloc(VDN_TEXT_MAX_PROMPT_BYTES + 2), key[200];
        memset(big, 'a', VDN_TEXT_MAX_PROMPT_BYTES + 1);
        big[VDN_TEXT_MAX_PROMPT_BYTES + 1] = 0;
        CHECK(p &&
                  vdn_text_prompts_key(p, &(vdn_prompt_input){.text = big}, NULL, key, sizeof key,
                                       NULL, err, sizeof err) != 0 &&
                  strstr(err, "refused before tokenizing"),
              "a 64 KiB + 1 prompt: %s", err);
        free(big);
        vdn_text_prompts_close(p);
    }
    for (int i = 0; i < JOBS; i++)
        vdn_dev_close(devs[i]);
    return check_report("test_prompt_cache");
}
