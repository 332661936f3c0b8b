/* `vdn eval suite keyframes` (suite_keyframes.h). */
#include "suite_keyframes.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frames.h"
#include "png_write.h"
#include "store.h"
#include "strbuf.h"
#include "suite.h"
#include "sweep.h"
#include "vdn_util.h"

/* frame (3, H, W) in [0, 1] -> interleaved 8-bit RGB. The mp4 reader's floats are bytes / 255,
 * so this gives the decoded bytes back exactly. */
static void to_rgb(const float *px, int H, int W, uint8_t *rgb) {
    size_t n = (size_t)H * W;
    for (size_t i = 0; i < n; i++)
        for (int c = 0; c < 3; c++) {
            float v = px[c * n + i];
            rgb[3 * i + c] = (uint8_t)lrintf((v < 0 ? 0 : v > 1 ? 1 : v) * 255.0f);
        }
}

/* The first and last frames of an mp4 as PNGs (either path may be NULL). */
static int end_frames(const char *mp4, const char *first_png, const char *last_png, char *err,
                      size_t errlen) {
    vdn_frames *f = vdn_frames_open_mp4(mp4, err, errlen);
    if (!f) return -1;
    int T, H, W, t = 0, got, rc = 0;
    vdn_frames_info(f, &T, &H, &W);
    size_t n = (size_t)3 * H * W;
    float *cur = vdn_xmalloc(n * sizeof *cur), *last = vdn_xmalloc(n * sizeof *last);
    uint8_t *rgb = vdn_xmalloc(n);
    while ((got = vdn_frames_next(f, cur, err, errlen)) == 1) {
        if (t++ == 0 && first_png) {
            to_rgb(cur, H, W, rgb);
            rc = vdn_png_write_file(first_png, rgb, W, H, err, errlen);
            if (rc) break;
        }
        float *s = last;
        last = cur, cur = s;
    }
    if (got < 0) rc = -1;
    if (!rc && !t) rc = vdn_fail(err, errlen, "%s: no video frame", mp4);
    if (!rc && last_png) {
        to_rgb(last, H, W, rgb);
        rc = vdn_png_write_file(last_png, rgb, W, H, err, errlen);
    }
    free(cur);
    free(last);
    free(rgb);
    vdn_frames_close(f);
    return rc;
}

/* PICDIR/ID_WHICH.EXT for the first EXT that exists, copied to OUT/keyframes/ID_WHICH.EXT; rel
 * gets "keyframes/ID_WHICH.EXT". */
static int copy_picture(const char *picdir, const char *out_dir, const char *id, const char *which,
                        char *rel, size_t rellen, char *err, size_t errlen) {
    static const char *exts[] = {"png", "jpg", "jpeg", "webp", "PNG", "JPG", "JPEG", "WEBP"};
    char src[PATH_MAX], dst[PATH_MAX + 300];
    for (size_t e = 0; e < sizeof exts / sizeof *exts; e++) {
        snprintf(src, sizeof src, "%s/%s_%s.%s", picdir, id, which, exts[e]);
        if (access(src, F_OK) != 0) continue;
        snprintf(rel, rellen, "keyframes/%s_%s.%s", id, which, exts[e]);
        snprintf(dst, sizeof dst, "%s/%s", out_dir, rel);
        size_t len;
        char *bytes = vdn_read_file(src, &len, err, errlen);
        if (!bytes) return -1;
        int rc = vdn_write_file_atomic(dst, bytes, len, err, errlen);
        free(bytes);
        return rc;
    }
    return vdn_fail(err, errlen, "no picture %s/%s_%s.{png,jpg,jpeg,webp}", picdir, id, which);
}

/* A relative path of the source suite, absolute for the suite written elsewhere. */
static void absolute(const vdn_suite *s, char **p) {
    if (!*p || (*p)[0] == '/' || strstr(*p, "://")) return;
    char *r = vdn_suite_resolve(s, *p), abs[PATH_MAX];
    if (access(r, F_OK) != 0 || !realpath(r, abs)) { /* a store key stays as it is */
        free(r);
        return;
    }
    free(r);
    free(*p);
    *p = vdn_xstrdup(abs);
}

int vdn_suite_keyframes(const vdn_suite_keyframes_opts *o, int *n_lines, char *err, size_t errlen) {
    *n_lines = 0;
    if (!o->from == !o->pictures)
        return vdn_fail(err, errlen, "give --from SWEEP.json or --pictures DIR (one of them)");
    vdn_suite s;
    vdn_sweep sw;
    vdn_store *st = NULL;
    int have_sweep = 0, rc = -1;
    if (vdn_suite_load(o->suite, &s, err, errlen)) return -1;
    char dir[PATH_MAX + 20], rel[2][400], tmp[PATH_MAX + 40];
    snprintf(dir, sizeof dir, "%s/keyframes", o->out_dir);
    if (vdn_mkdir_p(dir, err, errlen)) goto out;
    if (o->from) {
        if (vdn_sweep_load(o->from, &sw, err, errlen)) goto out;
        have_sweep = 1;
        st = vdn_store_open(sw.store, NULL, err, errlen);
        if (!st) goto out;
    }
    const char *variant = o->from ? (o->variant ? o->variant : sw.baseline) : NULL;
    snprintf(tmp, sizeof tmp, "%s/keyframes/.source.mp4", o->out_dir);
    vdn_sb text = {0};
    vdn_sb_printf(&text, "# %s with keyframe pictures from %s%s%s\n", s.path,
                  o->from ? o->from : o->pictures, variant ? ", variant " : "",
                  variant ? variant : "");
    for (int i = 0; i < s.n; i++) {
        vdn_suite_item *it = &s.items[i];
        absolute(&s, &it->prompt_cache);
        absolute(&s, &it->keyframes);
        absolute(&s, &it->first_frame);
        absolute(&s, &it->last_frame);
        if (it->mode != VDN_MODE_T2VA) {
            if (!it->prompt[0]) {
                vdn_fail(err, errlen, "%s:%d: %s has no text to render with pictures", s.path,
                         it->line, it->id);
                goto fail_text;
            }
            int want[2] = {vdn_suite_mode_first(it->mode), vdn_suite_mode_last(it->mode)};
            const char *which[2] = {"first", "last"};
            if (o->from) {
                const vdn_sweep_pair *q = vdn_sweep_find(&sw, it->id, variant);
                char key[1100];
                size_t n = q ? strlen(q->video_key) : 0, m = strlen(".safetensors");
                if (!q) {
                    vdn_fail(err, errlen, "%s:%d: the sweep %s has no output of '%s' by %s", s.path,
                             it->line, o->from, it->id, variant);
                    goto fail_text;
                }
                if (n >= m && !strcmp(q->video_key + n - m, ".safetensors")) n -= m;
                snprintf(key, sizeof key, "%.*s.mp4", (int)n, q->video_key);
                char png[2][PATH_MAX + 500];
                for (int k = 0; k < 2; k++) {
                    snprintf(rel[k], sizeof rel[k], "keyframes/%s_%s.png", it->id, which[k]);
                    snprintf(png[k], sizeof png[k], "%s/%s", o->out_dir, rel[k]);
                }
                char e2[VDN_ERR_LEN];
                if (vdn_store_get_file(st, key, tmp, e2, sizeof e2) ||
                    end_frames(tmp, want[0] ? png[0] : NULL, want[1] ? png[1] : NULL, e2,
                               sizeof e2)) {
                    vdn_fail(err, errlen, "%s:%d: %s: the output %s of %s: %s", s.path, it->line,
                             it->id, key, variant, e2);
                    goto fail_text;
                }
            } else {
                for (int k = 0; k < 2; k++)
                    if (want[k] && copy_picture(o->pictures, o->out_dir, it->id, which[k], rel[k],
                                                sizeof rel[k], err, errlen)) {
                        char e2[VDN_ERR_LEN];
                        snprintf(e2, sizeof e2, "%s", err);
                        vdn_fail(err, errlen, "%s:%d: %s: %s", s.path, it->line, it->id, e2);
                        goto fail_text;
                    }
            }
            free(it->prompt_cache);
            free(it->keyframes);
            free(it->first_frame);
            free(it->last_frame);
            it->prompt_cache = it->keyframes = NULL;
            it->first_frame = want[0] ? vdn_xstrdup(rel[0]) : NULL;
            it->last_frame = want[1] ? vdn_xstrdup(rel[1]) : NULL;
            (*n_lines)++;
        }
        char *line = vdn_suite_item_json(it);
        vdn_sb_printf(&text, "%s\n", line);
        free(line);
    }
    char path[PATH_MAX + 20];
    snprintf(path, sizeof path, "%s/suite.jsonl", o->out_dir);
    rc = vdn_write_file_atomic(path, text.s, text.len, err, errlen);
fail_text:
    vdn_sb_free(&text);
    remove(tmp);
out:
    if (st) vdn_store_close(st);
    if (have_sweep) vdn_sweep_free(&sw);
    vdn_suite_free(&s);
    return rc;
}
