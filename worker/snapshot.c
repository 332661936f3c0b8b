#include "snapshot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"
#include "vdn_util.h"

void vdn_snapshot_fingerprint(const vdn_assignment *s, const char *identity, const char *backend,
                              char *buf, size_t len) {
    snprintf(buf, len,
             "vdn-snapshot-1 ckpt=%s backend=%s prompt=%s frames=%d height=%d width=%d steps=%d "
             "seed=%llu variant=%s video_shift=%.9g audio_shift=%.9g noise=%s",
             identity ? identity : "", backend ? backend : "",
             s->prompt_cache ? s->prompt_cache : "", s->frames, s->height, s->width, s->steps,
             (unsigned long long)s->seed, s->variant ? s->variant : "", (double)s->video_shift,
             (double)s->audio_shift, s->noise_file ? s->noise_file : "");
    /* keyframe pictures only where there are any, so older snapshots keep their fingerprint */
    size_t used = strlen(buf);
    if (s->first_frame || s->last_frame)
        snprintf(buf + used, used < len ? len - used : 0, " first_frame=%s last_frame=%s",
                 s->first_frame ? s->first_frame : "", s->last_frame ? s->last_frame : "");
}

int vdn_snapshot_write(const char *path, const vdn_render_state *st, const char *fingerprint,
                       char *err, size_t errlen) {
    char step[32], steps[32];
    snprintf(step, sizeof step, "%d", st->step);
    snprintf(steps, sizeof steps, "%d", st->steps);
    vdn_st_tensor t[2] = {{"video_rows", VDN_DT_F32, 1, {(int64_t)st->n_video}, st->video},
                          {"audio_rows", VDN_DT_F32, 1, {(int64_t)st->n_audio}, st->audio}};
    vdn_st_kv meta[3] = {{"vdn_snapshot", fingerprint}, {"step", step}, {"steps", steps}};
    return vdn_st_write(path, t, 2, meta, 3, err, errlen);
}

static int read_int(const vdn_st_file *f, const char *key, int *out) {
    const char *v = vdn_st_meta(f, key);
    char *end;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || end == v || *end || x < 0 || x > 1000000) return -1;
    *out = (int)x;
    return 0;
}

static float *read_rows(vdn_st_file *f, const char *name, size_t *n, char *err, size_t errlen) {
    const vdn_st_entry *e = vdn_st_find(f, name);
    if (!e || e->ndim != 1 || e->dtype != VDN_DT_F32 || e->shape[0] < 1)
        return vdn_fail(err, errlen, "%s: tensor '%s': expected F32 [n], n >= 1", vdn_st_path(f),
                        name),
               NULL;
    *n = (size_t)e->shape[0];
    float *x = vdn_xmalloc(sizeof(float) * *n);
    if (vdn_st_to_f32(f, e, x, err, errlen)) {
        free(x);
        return NULL;
    }
    return x;
}

static int read_from(vdn_st_file *f, const char *path, const char *fingerprint,
                     vdn_render_state *st, char *err, size_t errlen) {
    int rc = -1;
    const char *fp = vdn_st_meta(f, "vdn_snapshot");
    if (!fp) {
        vdn_fail(err, errlen, "%s: not a vdn snapshot (no 'vdn_snapshot' metadata)", path);
    } else if (strcmp(fp, fingerprint)) {
        vdn_fail(err, errlen, "%s: a snapshot of another render (%s), this one is %s", path, fp,
                 fingerprint);
    } else if (read_int(f, "step", &st->step) || read_int(f, "steps", &st->steps) || st->step < 1 ||
               st->step >= st->steps) {
        vdn_fail(err, errlen, "%s: metadata 'step'/'steps': expected 1 <= step < steps", path);
    } else if ((st->video = read_rows(f, "video_rows", &st->n_video, err, errlen)) &&
               (st->audio = read_rows(f, "audio_rows", &st->n_audio, err, errlen))) {
        rc = 0;
    }
    vdn_st_close(f);
    if (rc) vdn_snapshot_free(st);
    return rc;
}

int vdn_snapshot_read(const char *path, const char *fingerprint, vdn_render_state *st, char *err,
                      size_t errlen) {
    memset(st, 0, sizeof *st);
    vdn_st_file *f = vdn_st_open(path, err, errlen);
    return f ? read_from(f, path, fingerprint, st, err, errlen) : -1;
}

int vdn_snapshot_read_mem(const void *buf, size_t len, const char *label, const char *fingerprint,
                          vdn_render_state *st, char *err, size_t errlen) {
    memset(st, 0, sizeof *st);
    vdn_st_file *f = vdn_st_open_mem(buf, len, label, err, errlen);
    return f ? read_from(f, label, fingerprint, st, err, errlen) : -1;
}

void vdn_snapshot_free(vdn_render_state *st) {
    free(st->video);
    free(st->audio);
    memset(st, 0, sizeof *st);
}

typedef struct {
    vdn_store *st;
    int deleted;
} deleting;

static int delete_key(void *user, const char *key, uint64_t size) {
    (void)size;
    deleting *d = user;
    char err[VDN_ERR_LEN];
    if (vdn_store_delete(d->st, key, err, sizeof err))
        VDN_WARN("snapshot %s not deleted: %s", key, err);
    else
        d->deleted++;
    return 0;
}

void vdn_snapshots_delete(const char *uri, const vdn_store_opts *opts, const char *prefix,
                          unsigned long long job) {
    char err[VDN_ERR_LEN];
    vdn_store *st = vdn_store_open(uri, opts, err, sizeof err);
    if (!st) {
        VDN_WARN("job %llu: snapshots under %s not deleted: %s", job, prefix, err);
        return;
    }
    deleting d = {st, 0};
    if (vdn_store_list(st, prefix, delete_key, &d, err, sizeof err))
        VDN_WARN("job %llu: snapshots under %s not listed for deletion: %s", job, prefix, err);
    VDN_INFO("job %llu: %d snapshot(s) under %s deleted (the coordinator accepted the result)", job,
             d.deleted, prefix);
    vdn_store_close(st);
}
