#include "relay.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vdn_util.h"

/* ---- framing ---- */

int vdn_relay_send(int fd, const cJSON *msg) {
    char *text = cJSON_PrintUnformatted(msg);
    if (!text) return -1;
    size_t n = strlen(text);
    if (n > VDN_RELAY_MAX_FRAME) {
        free(text);
        return -1;
    }
    uint8_t hdr[4] = {(uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n};
    const uint8_t *parts[2] = {hdr, (const uint8_t *)text};
    size_t lens[2] = {4, n};
    int rc = 0;
    for (int p = 0; p < 2 && rc == 0; p++) {
        size_t off = 0;
        while (off < lens[p]) {
            /* MSG_NOSIGNAL: a dead peer is an error here, not a SIGPIPE */
            ssize_t w = send(fd, parts[p] + off, lens[p] - off, MSG_NOSIGNAL);
            if (w < 0 && errno == EINTR) continue;
            if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                struct timespec ts = {0, 1000000}; /* a full socket: the reader catches up */
                nanosleep(&ts, NULL);
                continue;
            }
            if (w <= 0) {
                rc = -1;
                break;
            }
            off += (size_t)w;
        }
    }
    free(text);
    return rc;
}

int vdn_relay_fill(int fd, vdn_relay_buf *rb) {
    for (;;) {
        if (rb->cap - rb->len < 65536) {
            rb->cap = rb->cap ? rb->cap * 2 : 131072;
            rb->buf = realloc(rb->buf, rb->cap);
            VDN_ASSERT(rb->buf);
        }
        ssize_t r = read(fd, rb->buf + rb->len, rb->cap - rb->len);
        if (r > 0) {
            rb->len += (size_t)r;
            if (rb->len > VDN_RELAY_MAX_FRAME + 4) return 1; /* vdn_relay_next refuses it */
            continue;
        }
        if (r == 0) return 0;
        if (errno == EINTR) continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? 1 : -1;
    }
}

cJSON *vdn_relay_next(vdn_relay_buf *rb, char *err, size_t errlen) {
    err[0] = 0;
    if (rb->len < 4) return NULL;
    const uint8_t *b = rb->buf;
    size_t n = (size_t)b[0] << 24 | (size_t)b[1] << 16 | (size_t)b[2] << 8 | b[3];
    if (n > VDN_RELAY_MAX_FRAME) {
        vdn_fail(err, errlen, "relay frame of %zu bytes (at most %u)", n, VDN_RELAY_MAX_FRAME);
        return NULL;
    }
    if (rb->len < 4 + n) return NULL;
    cJSON *m = cJSON_ParseWithLength((const char *)b + 4, n);
    memmove(rb->buf, rb->buf + 4 + n, rb->len - 4 - n);
    rb->len -= 4 + n;
    if (!cJSON_IsObject(m) || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(m, "t"))) {
        cJSON_Delete(m);
        vdn_fail(err, errlen,
                 "relay frame of %zu bytes is not a message (a JSON object with "
                 "a string \"t\")",
                 n);
        return NULL;
    }
    return m;
}

void vdn_relay_buf_free(vdn_relay_buf *rb) {
    free(rb->buf);
    memset(rb, 0, sizeof *rb);
}

const char *vdn_relay_type(const cJSON *msg) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(msg, "t");
    return cJSON_IsString(t) ? t->valuestring : "";
}

/* ---- fields ---- */

static const cJSON *field(const cJSON *o, const char *name) {
    return cJSON_GetObjectItemCaseSensitive(o, name);
}

/* A number field: def when absent; -1 with err when present and not a number in [lo, hi]. */
static int num(const cJSON *o, const char *name, double lo, double hi, double def, double *out,
               char *err, size_t errlen) {
    const cJSON *v = field(o, name);
    if (!v) {
        *out = def;
        return 0;
    }
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi))
        return vdn_fail(err, errlen, "relay \"%s\": field '%s': expected a number in [%g, %g]",
                        vdn_relay_type(o), name, lo, hi);
    *out = v->valuedouble;
    return 0;
}

static int inum(const cJSON *o, const char *name, int lo, int hi, int *out, char *err,
                size_t errlen) {
    double d;
    if (num(o, name, lo, hi, 0, &d, err, errlen)) return -1;
    *out = (int)d;
    return 0;
}

/* u64 as a decimal string: a double does not hold every id or seed */
static void add_u64(cJSON *o, const char *name, uint64_t v) {
    char b[32];
    snprintf(b, sizeof b, "%llu", (unsigned long long)v);
    cJSON_AddStringToObject(o, name, b);
}

static int u64(const cJSON *o, const char *name, uint64_t *out, char *err, size_t errlen) {
    const cJSON *v = field(o, name);
    *out = 0;
    if (!v) return 0;
    char *end;
    if (!cJSON_IsString(v) || !v->valuestring[0] || v->valuestring[0] == '-' ||
        (errno = 0, *out = strtoull(v->valuestring, &end, 10), *end || errno))
        return vdn_fail(err, errlen,
                        "relay \"%s\": field '%s': expected an unsigned decimal "
                        "string",
                        vdn_relay_type(o), name);
    return 0;
}

/* A string field (NULL when absent or null); -1 when present and not a string. */
static int str(const cJSON *o, const char *name, const char **out, char *err, size_t errlen) {
    const cJSON *v = field(o, name);
    *out = NULL;
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsString(v))
        return vdn_fail(err, errlen, "relay \"%s\": field '%s': expected a string",
                        vdn_relay_type(o), name);
    *out = v->valuestring;
    return 0;
}

static int dup_str(const cJSON *o, const char *name, char **out, char *err, size_t errlen) {
    const char *s;
    if (str(o, name, &s, err, errlen)) return -1;
    *out = s ? vdn_xstrdup(s) : NULL;
    return 0;
}

static int copy_str(const cJSON *o, const char *name, char *out, size_t cap, char *err,
                    size_t errlen) {
    const char *s;
    if (str(o, name, &s, err, errlen)) return -1;
    snprintf(out, cap, "%s", s ? s : "");
    return 0;
}

static void add_str(cJSON *o, const char *name, const char *s) {
    if (s) cJSON_AddStringToObject(o, name, s);
}

/* An array of strings, at most cap; the strings point into o. */
static int str_array(const cJSON *o, const char *name, const char **out, int cap, int *n, char *err,
                     size_t errlen) {
    const cJSON *a = field(o, name), *e;
    *n = 0;
    if (!a) return 0;
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > cap)
        return vdn_fail(err, errlen, "relay \"%s\": field '%s': expected at most %d strings",
                        vdn_relay_type(o), name, cap);
    cJSON_ArrayForEach(e, a) {
        if (!cJSON_IsString(e))
            return vdn_fail(err, errlen, "relay \"%s\": field '%s': expected strings",
                            vdn_relay_type(o), name);
        out[(*n)++] = e->valuestring;
    }
    return 0;
}

static int int_array(const cJSON *o, const char *name, int lo, int hi, int *out, int cap, int *n,
                     char *err, size_t errlen) {
    const cJSON *a = field(o, name), *e;
    *n = 0;
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > cap)
        return vdn_fail(err, errlen, "relay \"%s\": field '%s': expected at most %d numbers",
                        vdn_relay_type(o), name, cap);
    cJSON_ArrayForEach(e, a) {
        if (!cJSON_IsNumber(e) || !(e->valuedouble >= lo && e->valuedouble <= hi))
            return vdn_fail(err, errlen, "relay \"%s\": field '%s': expected numbers in [%d, %d]",
                            vdn_relay_type(o), name, lo, hi);
        out[(*n)++] = (int)e->valuedouble;
    }
    return 0;
}

static cJSON *msg_of(const char *type) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "t", type);
    return m;
}

static int is_type(const cJSON *msg, const char *type, char *err, size_t errlen) {
    if (strcmp(vdn_relay_type(msg), type))
        return vdn_fail(err, errlen, "relay: expected a \"%s\" message, got \"%.40s\"", type,
                        vdn_relay_type(msg));
    return 0;
}

/* ---- config ---- */

cJSON *vdn_relay_config_json(const vdn_relay_config *c) {
    cJSON *m = msg_of("config"), *a = cJSON_AddArrayToObject(m, "adapters");
    add_str(m, "checkpoint", c->checkpoint);
    for (int i = 0; i < c->n_adapters; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(c->adapters[i]));
    add_str(m, "store", c->store);
    cJSON_AddNumberToObject(m, "store_retry_s", c->store_retry_s);
    add_str(m, "scratch", c->scratch);
    cJSON_AddNumberToObject(m, "cpu", c->cpu);
    cJSON_AddNumberToObject(m, "text_precision", c->text_precision);
    cJSON_AddNumberToObject(m, "vae_precision", c->vae_precision);
    cJSON_AddNumberToObject(m, "text_keep", c->text_keep);
    cJSON_AddNumberToObject(m, "text_keep_free_gib", c->text_keep_free_gib);
    cJSON_AddNumberToObject(m, "text_encode_delay_ms", c->text_encode_delay_ms);
    add_str(m, "base_dir", c->base_dir);
    cJSON_AddNumberToObject(m, "precisions", c->precisions);
    cJSON_AddNumberToObject(m, "threads", c->threads);
    cJSON_AddNumberToObject(m, "upload_attempts", c->upload_attempts);
    cJSON_AddNumberToObject(m, "snapshot_seconds", c->snapshot_seconds);
    cJSON_AddNumberToObject(m, "snapshot_every", c->snapshot_every);
    a = cJSON_AddArrayToObject(m, "data_roots");
    for (int i = 0; i < c->n_data_roots; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(c->data_roots[i]));
    cJSON *g = cJSON_AddArrayToObject(m, "gpus");
    for (int i = 0; i < c->n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "pos", c->pos[i]);
        cJSON_AddNumberToObject(o, "index", c->gpu[i].index);
        cJSON_AddStringToObject(o, "name", c->gpu[i].name);
        add_u64(o, "memory_mib", c->gpu[i].memory_mib);
        cJSON_AddItemToArray(g, o);
    }
    cJSON_AddNumberToObject(m, "fault_index", c->fault_index);
    cJSON_AddNumberToObject(m, "decode_fault_index", c->decode_fault_index);
    if (c->has_poison) add_u64(m, "poison_seed", c->poison_seed);
    cJSON_AddNumberToObject(m, "stale_scratch_folders", c->stale_scratch_folders);
    add_u64(m, "stale_scratch_bytes", c->stale_scratch_bytes);
    return m;
}

int vdn_relay_config_parse(const cJSON *m, vdn_relay_config *c, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    double d;
    int np = 0;
    if (is_type(m, "config", err, errlen) || str(m, "checkpoint", &c->checkpoint, err, errlen) ||
        str_array(m, "adapters", c->adapters, 16, &c->n_adapters, err, errlen) ||
        str(m, "store", &c->store, err, errlen) ||
        num(m, "store_retry_s", 0, 1e9, 0, &c->store_retry_s, err, errlen) ||
        str(m, "scratch", &c->scratch, err, errlen) || inum(m, "cpu", 0, 1, &c->cpu, err, errlen) ||
        inum(m, "text_precision", 0, VDN_PRECISION_COUNT - 1, &c->text_precision, err, errlen) ||
        inum(m, "vae_precision", 0, VDN_PRECISION_COUNT - 1, &c->vae_precision, err, errlen) ||
        inum(m, "text_keep", 0, 1, &c->text_keep, err, errlen) ||
        num(m, "text_keep_free_gib", 0, 1e9, 0, &c->text_keep_free_gib, err, errlen) ||
        inum(m, "text_encode_delay_ms", 0, 1 << 30, &c->text_encode_delay_ms, err, errlen) ||
        str(m, "base_dir", &c->base_dir, err, errlen) ||
        num(m, "precisions", 0, (1u << VDN_PRECISION_COUNT) - 1, 0, &d, err, errlen) ||
        inum(m, "threads", 0, 4096, &c->threads, err, errlen) ||
        inum(m, "upload_attempts", 0, 1000, &c->upload_attempts, err, errlen) ||
        num(m, "snapshot_seconds", 0, 1e9, 0, &c->snapshot_seconds, err, errlen) ||
        inum(m, "snapshot_every", 0, 1 << 30, &c->snapshot_every, err, errlen) ||
        str_array(m, "data_roots", c->data_roots, 16, &c->n_data_roots, err, errlen) ||
        inum(m, "fault_index", -2, 1 << 20, &c->fault_index, err, errlen) ||
        inum(m, "decode_fault_index", -2, 1 << 20, &c->decode_fault_index, err, errlen) ||
        u64(m, "poison_seed", &c->poison_seed, err, errlen) ||
        inum(m, "stale_scratch_folders", 0, 1 << 30, &c->stale_scratch_folders, err, errlen) ||
        u64(m, "stale_scratch_bytes", &c->stale_scratch_bytes, err, errlen))
        return -1;
    c->precisions = (unsigned)d;
    c->has_poison = field(m, "poison_seed") != NULL;
    if (!c->scratch || !c->scratch[0])
        return vdn_fail(err, errlen, "relay \"config\": no scratch folder");
    const cJSON *g = field(m, "gpus"), *e;
    if (!cJSON_IsArray(g) || cJSON_GetArraySize(g) > VDN_MAX_GPUS)
        return vdn_fail(err, errlen, "relay \"config\": field 'gpus': expected at most %d GPUs",
                        VDN_MAX_GPUS);
    cJSON_ArrayForEach(e, g) {
        const char *name;
        if (inum(e, "pos", 0, VDN_MAX_GPUS - 1, &c->pos[np], err, errlen) ||
            inum(e, "index", 0, 1 << 20, &c->gpu[np].index, err, errlen) ||
            str(e, "name", &name, err, errlen) ||
            u64(e, "memory_mib", &c->gpu[np].memory_mib, err, errlen))
            return -1;
        snprintf(c->gpu[np].name, sizeof c->gpu[np].name, "%s", name ? name : "");
        np++;
    }
    c->n = np;
    if (c->cpu != (c->n == 0))
        return vdn_fail(err, errlen, "relay \"config\": expected the CPU slot or GPUs");
    return 0;
}

/* ---- start ---- */

static const char *const spec_strings[] = {
    "prompt_cache", "prompt", "variant",   "noise_file",    "first_frame", "last_frame",
    "kind",         "score",  "store_uri", "output_prefix", "resume_key"};

static char **spec_string(vdn_assignment *s, int i) {
    char **p[] = {&s->prompt_cache, &s->prompt,        &s->variant,   &s->noise_file,
                  &s->first_frame,  &s->last_frame,    &s->kind,      &s->score,
                  &s->store_uri,    &s->output_prefix, &s->resume_key};
    return p[i];
}

cJSON *vdn_relay_start_json(const vdn_assignment *s, const int *pos, int npos, int precision) {
    cJSON *m = msg_of("start"), *a;
    vdn_assignment *w = (vdn_assignment *)s; /* spec_string only reads through it here */
    add_u64(m, "job_id", s->job_id);
    add_u64(m, "attempt_id", s->attempt_id);
    add_u64(m, "batch_id", s->batch_id);
    add_u64(m, "seed", s->seed);
    for (size_t i = 0; i < sizeof spec_strings / sizeof *spec_strings; i++)
        add_str(m, spec_strings[i], *spec_string(w, (int)i));
    a = cJSON_AddArrayToObject(m, "keys");
    for (int i = 0; i < s->nkeys; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(s->keys[i]));
    cJSON_AddNumberToObject(m, "save_latents", s->save_latents);
    cJSON_AddNumberToObject(m, "frames", s->frames);
    cJSON_AddNumberToObject(m, "height", s->height);
    cJSON_AddNumberToObject(m, "width", s->width);
    cJSON_AddNumberToObject(m, "steps", s->steps);
    cJSON_AddNumberToObject(m, "video_shift", s->video_shift);
    cJSON_AddNumberToObject(m, "audio_shift", s->audio_shift);
    cJSON_AddNumberToObject(m, "precision", precision);
    a = cJSON_AddArrayToObject(m, "pos");
    for (int i = 0; i < npos; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(pos[i]));
    return m;
}

int vdn_relay_start_parse(const cJSON *m, vdn_assignment *s, int *pos, int *npos, int *precision,
                          char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    double vs, as;
    const char *keys[64];
    int nk = 0;
    if (is_type(m, "start", err, errlen) || u64(m, "job_id", &s->job_id, err, errlen) ||
        u64(m, "attempt_id", &s->attempt_id, err, errlen) ||
        u64(m, "batch_id", &s->batch_id, err, errlen) || u64(m, "seed", &s->seed, err, errlen) ||
        str_array(m, "keys", keys, 64, &nk, err, errlen) ||
        inum(m, "save_latents", 0, 1, &s->save_latents, err, errlen) ||
        inum(m, "frames", 0, 1 << 30, &s->frames, err, errlen) ||
        inum(m, "height", 0, 1 << 30, &s->height, err, errlen) ||
        inum(m, "width", 0, 1 << 30, &s->width, err, errlen) ||
        inum(m, "steps", 0, 1 << 30, &s->steps, err, errlen) ||
        num(m, "video_shift", -1e30, 1e30, 0, &vs, err, errlen) ||
        num(m, "audio_shift", -1e30, 1e30, 0, &as, err, errlen) ||
        inum(m, "precision", 0, VDN_PRECISION_COUNT - 1, precision, err, errlen) ||
        int_array(m, "pos", 0, VDN_MAX_GPUS - 1, pos, VDN_MAX_GPUS, npos, err, errlen))
        return -1;
    if (*npos == 0) return vdn_fail(err, errlen, "relay \"start\": no slots");
    s->video_shift = (float)vs;
    s->audio_shift = (float)as;
    for (size_t i = 0; i < sizeof spec_strings / sizeof *spec_strings; i++)
        if (dup_str(m, spec_strings[i], spec_string(s, (int)i), err, errlen)) {
            vdn_assignment_free(s);
            return -1;
        }
    s->nkeys = nk;
    s->keys = vdn_xcalloc((size_t)nk + 1, sizeof *s->keys);
    for (int i = 0; i < nk; i++)
        s->keys[i] = vdn_xstrdup(keys[i]);
    return 0;
}

/* ---- gate, cancel ---- */

cJSON *vdn_relay_gate_json(uint64_t attempt, int go) {
    cJSON *m = msg_of("gate");
    add_u64(m, "attempt_id", attempt);
    cJSON_AddNumberToObject(m, "go", go ? 1 : 0);
    return m;
}

cJSON *vdn_relay_cancel_json(uint64_t attempt) {
    cJSON *m = msg_of("cancel");
    add_u64(m, "attempt_id", attempt);
    return m;
}

int vdn_relay_attempt_parse(const cJSON *m, uint64_t *attempt, int *go, char *err, size_t errlen) {
    *go = 0;
    if (u64(m, "attempt_id", attempt, err, errlen) || inum(m, "go", 0, 1, go, err, errlen))
        return -1;
    if (!*attempt) return vdn_fail(err, errlen, "relay \"%s\": no attempt_id", vdn_relay_type(m));
    return 0;
}

/* ---- hello ---- */

cJSON *vdn_relay_hello_json(const vdn_relay_hello *h) {
    cJSON *m = msg_of("hello"), *a;
    if (h->error[0]) cJSON_AddStringToObject(m, "error", h->error);
    cJSON_AddStringToObject(m, "identity", h->identity);
    cJSON_AddStringToObject(m, "backend", h->backend);
    cJSON_AddNumberToObject(m, "precisions", h->precisions);
    a = cJSON_AddArrayToObject(m, "slots");
    for (int i = 0; i < h->n; i++) {
        cJSON *o = cJSON_CreateObject();
        add_u64(o, "memory_used", h->slot[i].memory_used);
        cJSON_AddNumberToObject(o, "out_of_service", h->slot[i].out_of_service);
        cJSON_AddStringToObject(o, "fault", h->slot[i].fault);
        cJSON_AddStringToObject(o, "dec_err", h->slot[i].dec_err);
        cJSON_AddItemToArray(a, o);
    }
    return m;
}

int vdn_relay_hello_parse(const cJSON *m, vdn_relay_hello *h, char *err, size_t errlen) {
    memset(h, 0, sizeof *h);
    double d;
    if (is_type(m, "hello", err, errlen) ||
        copy_str(m, "error", h->error, sizeof h->error, err, errlen) ||
        copy_str(m, "identity", h->identity, sizeof h->identity, err, errlen) ||
        copy_str(m, "backend", h->backend, sizeof h->backend, err, errlen) ||
        num(m, "precisions", 0, (1u << VDN_PRECISION_COUNT) - 1, 0, &d, err, errlen))
        return -1;
    h->precisions = (unsigned)d;
    const cJSON *a = field(m, "slots"), *e;
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > VDN_MAX_GPUS)
        return vdn_fail(err, errlen, "relay \"hello\": field 'slots': expected at most %d",
                        VDN_MAX_GPUS);
    cJSON_ArrayForEach(e, a) {
        int i = h->n;
        if (u64(e, "memory_used", &h->slot[i].memory_used, err, errlen) ||
            inum(e, "out_of_service", 0, 1, &h->slot[i].out_of_service, err, errlen) ||
            copy_str(e, "fault", h->slot[i].fault, sizeof h->slot[i].fault, err, errlen) ||
            copy_str(e, "dec_err", h->slot[i].dec_err, sizeof h->slot[i].dec_err, err, errlen))
            return -1;
        h->n++;
    }
    return 0;
}

/* ---- state ---- */

cJSON *vdn_relay_state_json(const vdn_relay_state *s) {
    cJSON *m = msg_of("state"), *a;
    add_u64(m, "attempt_id", s->attempt_id);
    cJSON_AddNumberToObject(m, "phase", s->phase);
    cJSON_AddNumberToObject(m, "nfe_done", s->nfe_done);
    cJSON_AddNumberToObject(m, "nfe_total", s->nfe_total);
    cJSON_AddNumberToObject(m, "resumed_from", s->resumed_from);
    cJSON_AddNumberToObject(m, "nfe_from", s->nfe_from);
    a = cJSON_AddArrayToObject(m, "nfe_seconds");
    for (int i = 0; i < s->n_nfe; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(s->nfe_seconds[i]));
    add_str(m, "snap_key", s->snap_key);
    cJSON_AddNumberToObject(m, "snap_step", s->snap_step);
    add_u64(m, "store_retries", s->store_retries);
    if (s->phase != VDN_ATTEMPT_FINISHED) return m;
    cJSON_AddNumberToObject(m, "ok", s->ok);
    cJSON_AddNumberToObject(m, "retryable", s->retryable);
    cJSON_AddNumberToObject(m, "fault", s->fault);
    cJSON_AddNumberToObject(m, "store_op", s->store_op);
    cJSON_AddNumberToObject(m, "gpu_fault", s->gpu_fault);
    add_u64(m, "gpu_fault_mask", s->gpu_fault_mask);
    add_str(m, "reason", s->reason);
    add_str(m, "record_json", s->record_json);
    add_str(m, "outputs_store", s->outputs_store);
    add_str(m, "snap_prefix", s->snap_prefix);
    a = cJSON_AddArrayToObject(m, "object_keys");
    for (int i = 0; i < s->n_object_keys; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(s->object_keys[i]));
    return m;
}

int vdn_relay_state_parse(const cJSON *m, vdn_relay_state *s, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    const cJSON *a, *e;
    if (is_type(m, "state", err, errlen) || u64(m, "attempt_id", &s->attempt_id, err, errlen) ||
        inum(m, "phase", 0, VDN_ATTEMPT_FINISHED, &s->phase, err, errlen) ||
        inum(m, "nfe_done", 0, 1 << 24, &s->nfe_done, err, errlen) ||
        inum(m, "nfe_total", 0, 1 << 24, &s->nfe_total, err, errlen) ||
        inum(m, "resumed_from", 0, 1 << 24, &s->resumed_from, err, errlen) ||
        inum(m, "nfe_from", 0, 1 << 24, &s->nfe_from, err, errlen) ||
        copy_str(m, "snap_key", s->snap_key, sizeof s->snap_key, err, errlen) ||
        inum(m, "snap_step", 0, 1 << 24, &s->snap_step, err, errlen) ||
        u64(m, "store_retries", &s->store_retries, err, errlen))
        return -1;
    a = field(m, "nfe_seconds");
    if (a && (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > 64))
        return vdn_fail(err, errlen, "relay \"state\": field 'nfe_seconds': at most 64 numbers");
    cJSON_ArrayForEach(e, a) {
        if (!cJSON_IsNumber(e))
            return vdn_fail(err, errlen, "relay \"state\": field 'nfe_seconds': numbers");
        s->nfe_seconds[s->n_nfe++] = e->valuedouble;
    }
    if (s->nfe_from + s->n_nfe > s->nfe_done)
        return vdn_fail(err, errlen, "relay \"state\": NFE seconds past nfe_done");
    if (!s->attempt_id) return vdn_fail(err, errlen, "relay \"state\": no attempt_id");
    if (s->phase != VDN_ATTEMPT_FINISHED) return 0;
    const char *keys[16];
    int nk = 0;
    if (inum(m, "ok", 0, 1, &s->ok, err, errlen) ||
        inum(m, "retryable", 0, 1, &s->retryable, err, errlen) ||
        inum(m, "fault", 0, 4, &s->fault, err, errlen) ||
        inum(m, "store_op", 0, 3, &s->store_op, err, errlen) ||
        inum(m, "gpu_fault", 0, 1, &s->gpu_fault, err, errlen) ||
        u64(m, "gpu_fault_mask", &s->gpu_fault_mask, err, errlen) ||
        copy_str(m, "reason", s->reason, sizeof s->reason, err, errlen) ||
        str_array(m, "object_keys", keys, 16, &nk, err, errlen) ||
        dup_str(m, "record_json", &s->record_json, err, errlen) ||
        dup_str(m, "outputs_store", &s->outputs_store, err, errlen) ||
        dup_str(m, "snap_prefix", &s->snap_prefix, err, errlen)) {
        vdn_relay_state_free(s);
        return -1;
    }
    s->object_keys = vdn_xcalloc((size_t)nk + 1, sizeof *s->object_keys);
    for (int i = 0; i < nk; i++)
        s->object_keys[i] = vdn_xstrdup(keys[i]);
    s->n_object_keys = nk;
    return 0;
}

void vdn_relay_state_free(vdn_relay_state *s) {
    free(s->record_json);
    free(s->outputs_store);
    free(s->snap_prefix);
    for (int i = 0; i < s->n_object_keys; i++)
        free(s->object_keys[i]);
    free(s->object_keys);
    s->record_json = s->outputs_store = s->snap_prefix = NULL;
    s->object_keys = NULL;
    s->n_object_keys = 0;
}
