/* Render requests as JSONL: parsing with per-line, per-field errors, validation shared with the
 * coordinator (which re-validates what arrives over the wire), and the spec <-> JSON / proto
 * conversions. The coordinator stores each job's request as the normalized JSON this file writes
 * and parses it back with the same parser, so there is one definition of a valid request. */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "engine.h"
#include "seq.h"
#include "spec.h"
#include "vdn_util.h"

void vdn_errlist_add(vdn_errlist *e, const char *fmt, ...) {
    char buf[VDN_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char **grown = realloc(e->lines, sizeof(char *) * (size_t)(e->n + 1));
    VDN_ASSERT(grown);
    e->lines = grown;
    e->lines[e->n++] = vdn_xstrdup(buf);
}

void vdn_errlist_free(vdn_errlist *e) {
    for (int i = 0; i < e->n; i++)
        free(e->lines[i]);
    free(e->lines);
    e->lines = NULL;
    e->n = 0;
}

void vdn_job_spec_free(vdn_job_spec *s) {
    free(s->prompt_cache);
    free(s->prompt);
    free(s->variant);
    free(s->checkpoint);
    free(s->precision);
    free(s->output_prefix);
    free(s->noise_file);
    free(s->first_frame);
    free(s->last_frame);
    free(s->kind);
    free(s->score);
    free(s->tag);
    free(s->latents_root);
    free(s->source_line);
    memset(s, 0, sizeof *s);
}

void vdn_jobs_free(vdn_job_spec *jobs, int n) {
    if (!jobs) return;
    for (int i = 0; i < n; i++)
        vdn_job_spec_free(&jobs[i]);
    free(jobs);
}

/* The fewest sequence rows this request makes on any released checkpoint (2 x 2 latent patches,
 * one text row, no keyframes): above the engine's limit (engine/seq.h) it can never render, so
 * it is refused at submission instead of failing on a worker. 0 when a size is left out. */
long long vdn_job_min_rows(const vdn_job_spec *s) {
    if (s->frames <= 0 || s->height <= 0 || s->width <= 0) return 0;
    long long per_frame = (long long)(s->height / 32) * (s->width / 32);
    return 1 + (long long)vdn_latent_frames(s->frames) * per_frame +
           2LL * vdn_audio_latents(s->frames);
}

static const char *const variants[] = {"vdn", "dense", "vdn-no-anchors", "window-only",
                                       "vdn-additive"};

/* Where a message about one line starts: "FILE:LINE: ". */
typedef struct {
    vdn_errlist *errs;
    const char *fname;
    int line;
    int bad;
} line_ctx;

static void bad(line_ctx *c, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void bad(line_ctx *c, const char *field, const char *fmt, ...) {
    char what[VDN_ERR_LEN / 2];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (field)
        vdn_errlist_add(c->errs, "%s:%d: field '%s': %s", c->fname, c->line, field, what);
    else
        vdn_errlist_add(c->errs, "%s:%d: %s", c->fname, c->line, what);
    c->bad++;
}

/* A short printable rendering of a JSON value for messages. */
static void show(const cJSON *v, char *out, size_t n) {
    char *s = cJSON_PrintUnformatted(v);
    if (!s) {
        snprintf(out, n, "?");
        return;
    }
    if (strlen(s) > 60) strcpy(s + 57, "...");
    snprintf(out, n, "%s", s);
    free(s);
}

static int get_int(line_ctx *c, const cJSON *v, const char *field, long long lo, long long hi,
                   long long *out) {
    char shown[80];
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) ||
        v->valuedouble != floor(v->valuedouble) || v->valuedouble < (double)lo ||
        v->valuedouble > (double)hi) {
        show(v, shown, sizeof shown);
        bad(c, field, "expected an integer in %lld..%lld, got %s", lo, hi, shown);
        return -1;
    }
    *out = (long long)v->valuedouble;
    return 0;
}

static int get_str(line_ctx *c, const cJSON *v, const char *field, char **out) {
    char shown[80];
    if (!cJSON_IsString(v) || !v->valuestring[0]) {
        show(v, shown, sizeof shown);
        bad(c, field, "expected a non-empty string, got %s", shown);
        return -1;
    }
    for (const char *p = v->valuestring; *p; p++)
        if ((unsigned char)*p < 0x20) {
            bad(c, field, "control character in string");
            return -1;
        }
    free(*out);
    *out = vdn_xstrdup(v->valuestring);
    return 0;
}

static int get_bool(line_ctx *c, const cJSON *v, const char *field, int *out) {
    char shown[80];
    if (!cJSON_IsBool(v)) {
        show(v, shown, sizeof shown);
        bad(c, field, "expected true or false, got %s", shown);
        return -1;
    }
    *out = cJSON_IsTrue(v);
    return 0;
}

static int get_shift(line_ctx *c, const cJSON *v, const char *field, float *out) {
    char shown[80];
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble <= 0 ||
        v->valuedouble > 1000) {
        show(v, shown, sizeof shown);
        bad(c, field, "expected a number in (0, 1000], got %s", shown);
        return -1;
    }
    *out = (float)v->valuedouble;
    return 0;
}

/* Seeds are 64-bit; JSON numbers are exact only to 2^53, so larger seeds come as strings. */
static int get_seed(line_ctx *c, const cJSON *v, uint64_t *out) {
    char shown[80];
    if (cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble >= 0 &&
        v->valuedouble <= 9007199254740992.0 && v->valuedouble == floor(v->valuedouble)) {
        *out = (uint64_t)v->valuedouble;
        return 0;
    }
    if (cJSON_IsString(v) && v->valuestring[0] && strlen(v->valuestring) <= 20) {
        uint64_t x = 0;
        const char *p = v->valuestring;
        for (; *p; p++) {
            if (!isdigit((unsigned char)*p)) break;
            uint64_t d = (uint64_t)(*p - '0');
            if (x > (UINT64_MAX - d) / 10) break;
            x = x * 10 + d;
        }
        if (!*p) {
            *out = x;
            return 0;
        }
    }
    show(v, shown, sizeof shown);
    bad(c, "seed",
        "expected a non-negative integer (or a decimal string for seeds >= 2^53), got %s", shown);
    return -1;
}

static int variant_ok(const char *v) {
    for (size_t i = 0; i < sizeof variants / sizeof *variants; i++)
        if (!strcmp(v, variants[i])) return 1;
    return 0;
}

static int precision_ok(const char *p) {
    vdn_precision v;
    return vdn_precision_parse(p, &v) == 0;
}

static int prefix_ok(const char *p) {
    if (!p[0] || p[0] == '/' || strstr(p, "..") || strstr(p, "//") || p[strlen(p) - 1] == '/')
        return 0;
    for (; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == '\\') return 0;
    return 1;
}

/* Range checks shared by the parser and the coordinator's check of wire requests. */
int vdn_job_spec_validate(const vdn_job_spec *s, vdn_errlist *errs, const char *where) {
    int n0 = errs->n;
    const int scoring = s->kind && !strcmp(s->kind, "score");
    if (s->kind && !scoring && strcmp(s->kind, "render"))
        vdn_errlist_add(errs, "%s: field 'kind': expected \"render\" or \"score\", got \"%.40s\"",
                        where, s->kind);
    if (scoring && (!s->score || !s->score[0]))
        vdn_errlist_add(errs, "%s: field 'score': required with kind \"score\" (the work, JSON)",
                        where);
    if (scoring && s->score && s->score[0]) {
        cJSON *sc = cJSON_Parse(s->score);
        if (!cJSON_IsObject(sc))
            vdn_errlist_add(errs, "%s: field 'score': expected a JSON object", where);
        cJSON_Delete(sc);
    }
    if (!scoring && s->score)
        vdn_errlist_add(errs, "%s: field 'score': only with kind \"score\"", where);
    if (!scoring && (!s->prompt_cache || !s->prompt_cache[0]) && (!s->prompt || !s->prompt[0]))
        vdn_errlist_add(errs,
                        "%s: field 'prompt' (text) or 'prompt_cache' (or 'prompt_file'): required",
                        where);
    if ((s->first_frame || s->last_frame) && s->prompt_cache && s->prompt_cache[0])
        vdn_errlist_add(errs,
                        "%s: field '%s': keyframe pictures go with a text 'prompt', not with a "
                        "prompt cache (which carries its keyframes already)",
                        where, s->first_frame ? "first_frame" : "last_frame");
    if (s->frames < 0 || s->frames > VDN_JOB_MAX_FRAMES)
        vdn_errlist_add(errs, "%s: field 'frames': expected 1..%d, got %d", where,
                        VDN_JOB_MAX_FRAMES, s->frames);
    if (s->height < 0 || s->height % 32 || s->height > VDN_JOB_MAX_SIDE)
        vdn_errlist_add(errs, "%s: field 'height': expected a multiple of 32 in 32..%d, got %d",
                        where, VDN_JOB_MAX_SIDE, s->height);
    if (s->width < 0 || s->width % 32 || s->width > VDN_JOB_MAX_SIDE)
        vdn_errlist_add(errs, "%s: field 'width': expected a multiple of 32 in 32..%d, got %d",
                        where, VDN_JOB_MAX_SIDE, s->width);
    if (s->steps < 0 || s->steps > 1000)
        vdn_errlist_add(errs, "%s: field 'steps': expected 1..1000, got %d", where, s->steps);
    if (s->gpus < 0 || s->gpus > 64)
        vdn_errlist_add(errs, "%s: field 'gpus': expected 1..64, got %d", where, s->gpus);
    if (s->timeout < 0 || s->timeout > VDN_JOB_MAX_TIMEOUT)
        vdn_errlist_add(errs, "%s: field 'timeout': expected seconds in 1..%d, got %d", where,
                        VDN_JOB_MAX_TIMEOUT, s->timeout);
    if (s->priority < -1000000 || s->priority > 1000000)
        vdn_errlist_add(errs, "%s: field 'priority': expected -1000000..1000000, got %d", where,
                        s->priority);
    if (!(s->video_shift >= 0 && s->video_shift <= 1000))
        vdn_errlist_add(errs, "%s: field 'video_shift': expected a number in (0, 1000]", where);
    if (!(s->audio_shift >= 0 && s->audio_shift <= 1000))
        vdn_errlist_add(errs, "%s: field 'audio_shift': expected a number in (0, 1000]", where);
    if (s->variant && !variant_ok(s->variant))
        vdn_errlist_add(errs,
                        "%s: field 'variant': expected one of vdn, dense, vdn-no-anchors, "
                        "window-only, vdn-additive, got \"%.60s\"",
                        where, s->variant);
    if (s->precision && !precision_ok(s->precision))
        vdn_errlist_add(errs, "%s: field 'precision': expected \"bf16\" or \"fp8\", got \"%.40s\"",
                        where, s->precision);
    long long rows = vdn_job_min_rows(s);
    if (rows > VDN_SEQ_MAX_ROWS)
        vdn_errlist_add(errs,
                        "%s: frames x height x width = %d x %d x %d make at least %lld sequence "
                        "rows, above the engine's limit of %d: render fewer frames or a smaller "
                        "size",
                        where, s->frames, s->height, s->width, rows, VDN_SEQ_MAX_ROWS);
    if (s->output_prefix && !prefix_ok(s->output_prefix))
        vdn_errlist_add(errs,
                        "%s: field 'out': expected a relative key prefix (no leading '/', no "
                        "'..', no '//'), got \"%.80s\"",
                        where, s->output_prefix);
    return errs->n == n0 ? 0 : -1;
}

static int is_uri(const char *s) {
    return strstr(s, "://") != NULL;
}

/* Parses one JSON object line into spec. Reports into c; returns -1 when the line is bad. */
static int parse_line(line_ctx *c, const char *text, size_t len, const char *base_dir,
                      int check_files, vdn_job_spec *s) {
    memset(s, 0, sizeof *s);
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!o) {
        size_t at = end ? (size_t)(end - text) : 0;
        bad(c, NULL, "not valid JSON (error near column %zu): expected one JSON object per line",
            at + 1);
        return -1;
    }
    while (end && (size_t)(end - text) < len && isspace((unsigned char)*end))
        end++;
    if (end && (size_t)(end - text) < len) {
        bad(c, NULL, "trailing text after the JSON object at column %zu", (size_t)(end - text) + 1);
        cJSON_Delete(o);
        return -1;
    }
    if (!cJSON_IsObject(o)) {
        bad(c, NULL, "expected a JSON object {...}, got %s",
            cJSON_IsArray(o) ? "an array" : "a scalar");
        cJSON_Delete(o);
        return -1;
    }
    int before = c->bad;
    int seen_prompt = 0, seen_frames = 0, seen_steps = 0, seen_out = 0;
    const char *prompt_key = "prompt_cache"; /* messages name the field as the user wrote it */
    for (const cJSON *v = o->child; v; v = v->next) {
        const char *k = v->string;
        for (const cJSON *w = o->child; w != v; w = w->next)
            if (!strcmp(w->string, k)) bad(c, k, "given twice");
        long long x;
        if (!strcmp(k, "prompt_cache") || !strcmp(k, "prompt_file")) {
            if (seen_prompt++) bad(c, k, "prompt_cache and prompt_file both given; use one");
            prompt_key = !strcmp(k, "prompt_file") ? "prompt_file" : "prompt_cache";
            get_str(c, v, k, &s->prompt_cache);
        } else if (!strcmp(k, "frames") || !strcmp(k, "num_frames")) {
            if (seen_frames++) bad(c, k, "frames and num_frames both given; use one");
            if (!get_int(c, v, k, 1, VDN_JOB_MAX_FRAMES, &x)) s->frames = (int)x;
        } else if (!strcmp(k, "height") || !strcmp(k, "width")) {
            if (!get_int(c, v, k, 32, VDN_JOB_MAX_SIDE, &x)) {
                if (x % 32) bad(c, k, "expected a multiple of 32, got %lld", x);
                *(!strcmp(k, "height") ? &s->height : &s->width) = (int)x;
            }
        } else if (!strcmp(k, "steps") || !strcmp(k, "num_steps")) {
            if (seen_steps++) bad(c, k, "steps and num_steps both given; use one");
            if (!get_int(c, v, k, 1, 1000, &x)) s->steps = (int)x;
        } else if (!strcmp(k, "seed")) {
            if (!get_seed(c, v, &s->seed)) s->has_seed = 1;
        } else if (!strcmp(k, "variant")) {
            get_str(c, v, k, &s->variant);
        } else if (!strcmp(k, "checkpoint")) {
            get_str(c, v, k, &s->checkpoint);
        } else if (!strcmp(k, "precision")) {
            if (!cJSON_IsString(v) || !precision_ok(v->valuestring)) {
                char shown[64];
                show(v, shown, sizeof shown);
                bad(c, k, "expected \"bf16\" or \"fp8\" (the DiT's precision), got %s", shown);
            } else {
                free(s->precision);
                s->precision = vdn_xstrdup(v->valuestring);
            }
        } else if (!strcmp(k, "priority")) {
            if (!get_int(c, v, k, -1000000, 1000000, &x)) s->priority = (int)x, s->has_priority = 1;
        } else if (!strcmp(k, "tag")) {
            get_str(c, v, k, &s->tag);
        } else if (!strcmp(k, "out") || !strcmp(k, "output_prefix")) {
            if (seen_out++) bad(c, k, "out and output_prefix both given; use one");
            get_str(c, v, k, &s->output_prefix);
        } else if (!strcmp(k, "video_shift")) {
            get_shift(c, v, k, &s->video_shift);
        } else if (!strcmp(k, "audio_shift")) {
            get_shift(c, v, k, &s->audio_shift);
        } else if (!strcmp(k, "noise_file")) {
            get_str(c, v, k, &s->noise_file);
        } else if (!strcmp(k, "kind")) {
            get_str(c, v, k, &s->kind);
        } else if (!strcmp(k, "score")) {
            if (cJSON_IsObject(v)) {
                free(s->score); /* a second "score" (refused above as given twice) */
                s->score = cJSON_PrintUnformatted(v);
            } else
                bad(c, k, "expected a JSON object (the scoring job's work)");
        } else if (!strcmp(k, "first_frame") || !strcmp(k, "last_frame")) {
            get_str(c, v, k, !strcmp(k, "first_frame") ? &s->first_frame : &s->last_frame);
        } else if (!strcmp(k, "gpus")) {
            if (!get_int(c, v, k, 1, 64, &x)) s->gpus = (int)x;
        } else if (!strcmp(k, "min_gpu_memory")) {
            if (!get_int(c, v, k, 0, 1LL << 50, &x)) s->min_gpu_memory = (uint64_t)x;
        } else if (!strcmp(k, "timeout")) {
            if (!get_int(c, v, k, 1, VDN_JOB_MAX_TIMEOUT, &x)) s->timeout = (int)x;
        } else if (!strcmp(k, "save_latents")) {
            get_bool(c, v, k, &s->save_latents);
        } else if (!strcmp(k, "record")) {
            get_bool(c, v, k, &s->record);
        } else if (!strcmp(k, "latents_root")) {
            get_str(c, v, k, &s->latents_root);
        } else if (!strcmp(k, "prompt")) {
            /* text: the worker encodes it unless a prompt cache is given too (official lines
             * carry both, the text then only informational) */
            if (!cJSON_IsString(v) || !v->valuestring[0]) {
                bad(c, k, "expected the prompt's text (a non-empty string)");
            } else {
                free(s->prompt); /* newlines and tabs are prompt text, unlike in paths */
                s->prompt = vdn_xstrdup(v->valuestring);
            }
        } else if (!strcmp(k, "id") || !strcmp(k, "comment")) {
            /* informational, kept in source_line */
        } else {
            bad(c, k,
                "unknown field (expected prompt_cache|prompt_file, frames|num_frames, height, "
                "width, steps|num_steps, seed, variant, checkpoint, priority, tag, "
                "out|output_prefix, video_shift, audio_shift, noise_file, gpus, min_gpu_memory, "
                "timeout, save_latents, latents_root, record, precision, first_frame, "
                "last_frame, kind, score)");
        }
    }
    cJSON_Delete(o);
    const int scoring = s->kind && !strcmp(s->kind, "score"); /* renders nothing */
    if (s->kind && !scoring && strcmp(s->kind, "render"))
        bad(c, "kind", "expected \"render\" or \"score\", got \"%.40s\"", s->kind);
    if (scoring && !s->score)
        bad(c, "score", "required with kind \"score\" (the work, a JSON object)");
    if (!scoring && s->score) bad(c, "score", "only with kind \"score\"");
    if (!seen_prompt && !s->prompt && !scoring)
        bad(c, "prompt_cache",
            "required: a text 'prompt', or 'prompt_cache' (or the official "
            "'prompt_file')");
    if (c->bad == before && s->variant && !variant_ok(s->variant))
        bad(c, "variant",
            "expected one of vdn, dense, vdn-no-anchors, window-only, vdn-additive, got \"%.60s\"",
            s->variant);
    if (c->bad == before && s->output_prefix && !prefix_ok(s->output_prefix))
        bad(c, "out",
            "expected a relative key prefix like \"runs/cat/out\" (no leading '/', no '..', "
            "no '//', no trailing '/'), got \"%.80s\"",
            s->output_prefix);
    long long rows = c->bad == before ? vdn_job_min_rows(s) : 0;
    if (rows > VDN_SEQ_MAX_ROWS)
        bad(c, "frames",
            "%d frames of %d x %d make at least %lld sequence rows, above the engine's limit of "
            "%d: render fewer frames or a smaller size",
            s->frames, s->height, s->width, rows, VDN_SEQ_MAX_ROWS);
    /* Local prompt caches and noise files resolve against the JSONL file's folder and must exist
     * now: a missing file is this line's error, not a worker failure an hour later. */
    if (c->bad == before && (s->first_frame || s->last_frame) && seen_prompt)
        bad(c, s->first_frame ? "first_frame" : "last_frame",
            "keyframe pictures are encoded with a text 'prompt'; a prompt cache carries its "
            "keyframes already (give 'prompt' instead of '%s')",
            prompt_key);
    char **files[4] = {&s->prompt_cache, &s->noise_file, &s->first_frame, &s->last_frame};
    const char *fields[4] = {prompt_key, "noise_file", "first_frame", "last_frame"};
    for (int i = 0; i < 4 && c->bad == before; i++) {
        char **pp = files[i];
        if (!*pp || is_uri(*pp)) continue;
        if ((*pp)[0] != '/' && base_dir) {
            char abs[4096];
            snprintf(abs, sizeof abs, "%s/%s", base_dir, *pp);
            free(*pp);
            *pp = vdn_xstrdup(abs);
        }
        if (check_files && access(*pp, R_OK) != 0)
            bad(c, fields[i], "file %s does not exist or is not readable", *pp);
    }
    s->source_line = vdn_xstrdup(text);
    s->line_no = c->line;
    if (c->bad != before) {
        vdn_job_spec_free(s);
        return -1;
    }
    return 0;
}

int vdn_jsonl_parse(const char *text, size_t len, const char *fname, const char *base_dir,
                    int check_files, vdn_job_spec **jobs, int *n_jobs, vdn_errlist *errs) {
    *jobs = NULL;
    *n_jobs = 0;
    int n = 0, cap = 0, nerr0 = errs->n;
    vdn_job_spec *out = NULL;
    line_ctx c = {errs, fname ? fname : "<input>", 0, 0};
    size_t pos = 0;
    while (pos < len) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - text) : len;
        c.line++;
        size_t a = pos, b = end;
        while (a < b && isspace((unsigned char)text[a]))
            a++;
        while (b > a && isspace((unsigned char)text[b - 1]))
            b--;
        pos = end + 1;
        if (a == b || text[a] == '#') continue;
        if (b - a > VDN_JSONL_MAX_LINE_BYTES) {
            bad(&c, NULL, "line of %zu bytes, above the limit of %u (one request per line)", b - a,
                VDN_JSONL_MAX_LINE_BYTES);
            continue;
        }
        if (memchr(text + a, 0, b - a)) {
            bad(&c, NULL, "NUL byte in line: expected UTF-8 JSON text");
            continue;
        }
        char *line = vdn_xmalloc(b - a + 1);
        memcpy(line, text + a, b - a);
        line[b - a] = 0;
        vdn_job_spec s;
        if (parse_line(&c, line, b - a, base_dir, check_files, &s) == 0) {
            if (n == cap) {
                cap = cap ? 2 * cap : 16;
                vdn_job_spec *g = realloc(out, sizeof *out * (size_t)cap);
                VDN_ASSERT(g);
                out = g;
            }
            out[n++] = s;
        }
        free(line);
    }
    /* Two jobs writing the same output prefix would overwrite each other's results. */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i && out[i].output_prefix; j++)
            if (out[j].output_prefix && !strcmp(out[i].output_prefix, out[j].output_prefix))
                vdn_errlist_add(errs, "%s:%d: field 'out': \"%s\" is also the output of line %d",
                                c.fname, out[i].line_no, out[i].output_prefix, out[j].line_no);
    if (n == 0 && errs->n == nerr0) vdn_errlist_add(errs, "%s: no requests (empty file)", c.fname);
    if (errs->n != nerr0) {
        vdn_jobs_free(out, n);
        return -1;
    }
    *jobs = out;
    *n_jobs = n;
    return 0;
}

int vdn_jsonl_parse_file(const char *path, int check_files, vdn_job_spec **jobs, int *n_jobs,
                         vdn_errlist *errs) {
    char err[VDN_ERR_LEN];
    size_t len;
    char *text = vdn_read_file(path, &len, err, sizeof err);
    *jobs = NULL;
    *n_jobs = 0;
    if (!text) {
        vdn_errlist_add(errs, "%s", err);
        return -1;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    else
        snprintf(dir, sizeof dir, ".");
    char absdir[4096];
    if (!realpath(dir, absdir)) snprintf(absdir, sizeof absdir, "%s", dir);
    int rc = vdn_jsonl_parse(text, len, path, absdir, check_files, jobs, n_jobs, errs);
    free(text);
    return rc;
}

/* ------------------------------------------------------------------ conversions */

char *vdn_job_spec_to_json(const vdn_job_spec *s) {
    cJSON *o = cJSON_CreateObject();
    if (s->prompt_cache || (!s->prompt && !s->score)) /* a scoring job has neither */
        cJSON_AddStringToObject(o, "prompt_cache", s->prompt_cache ? s->prompt_cache : "");
    if (s->prompt) cJSON_AddStringToObject(o, "prompt", s->prompt);
    if (s->frames) cJSON_AddNumberToObject(o, "frames", s->frames);
    if (s->height) cJSON_AddNumberToObject(o, "height", s->height);
    if (s->width) cJSON_AddNumberToObject(o, "width", s->width);
    if (s->steps) cJSON_AddNumberToObject(o, "steps", s->steps);
    if (s->has_seed) {
        char seed[32];
        snprintf(seed, sizeof seed, "%llu", (unsigned long long)s->seed);
        cJSON_AddStringToObject(o, "seed", seed);
    }
    if (s->variant) cJSON_AddStringToObject(o, "variant", s->variant);
    if (s->checkpoint) cJSON_AddStringToObject(o, "checkpoint", s->checkpoint);
    if (s->precision) cJSON_AddStringToObject(o, "precision", s->precision);
    if (s->video_shift > 0) cJSON_AddNumberToObject(o, "video_shift", s->video_shift);
    if (s->audio_shift > 0) cJSON_AddNumberToObject(o, "audio_shift", s->audio_shift);
    if (s->output_prefix) cJSON_AddStringToObject(o, "out", s->output_prefix);
    if (s->noise_file) cJSON_AddStringToObject(o, "noise_file", s->noise_file);
    if (s->first_frame) cJSON_AddStringToObject(o, "first_frame", s->first_frame);
    if (s->last_frame) cJSON_AddStringToObject(o, "last_frame", s->last_frame);
    if (s->kind) cJSON_AddStringToObject(o, "kind", s->kind);
    if (s->score) {
        cJSON *sc = cJSON_Parse(s->score);
        if (sc)
            cJSON_AddItemToObject(o, "score", sc);
        else
            cJSON_AddStringToObject(o, "score", s->score);
    }
    if (s->gpus) cJSON_AddNumberToObject(o, "gpus", s->gpus);
    if (s->timeout) cJSON_AddNumberToObject(o, "timeout", s->timeout);
    if (s->min_gpu_memory) cJSON_AddNumberToObject(o, "min_gpu_memory", (double)s->min_gpu_memory);
    if (s->has_priority) cJSON_AddNumberToObject(o, "priority", s->priority);
    if (s->tag) cJSON_AddStringToObject(o, "tag", s->tag);
    if (s->save_latents) cJSON_AddTrueToObject(o, "save_latents");
    if (s->record) cJSON_AddTrueToObject(o, "record");
    if (s->latents_root) cJSON_AddStringToObject(o, "latents_root", s->latents_root);
    char *txt = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return txt;
}

void vdn_job_spec_to_proto(const vdn_job_spec *s, Vdn__RenderRequest *r) {
    vdn__render_request__init(r);
    r->prompt_cache = s->prompt_cache;
    r->prompt = s->prompt;
#define SETI(f)                                                                                    \
    if (s->f) r->has_##f = 1, r->f = s->f
    SETI(frames);
    SETI(height);
    SETI(width);
    SETI(steps);
    SETI(gpus);
    SETI(timeout);
    SETI(min_gpu_memory);
#undef SETI
    if (s->has_seed) r->has_seed = 1, r->seed = s->seed;
    if (s->video_shift > 0) r->has_video_shift = 1, r->video_shift = s->video_shift;
    if (s->audio_shift > 0) r->has_audio_shift = 1, r->audio_shift = s->audio_shift;
    if (s->save_latents) r->has_save_latents = 1, r->save_latents = 1;
    if (s->record) r->has_record = 1, r->record = 1;
    r->variant = s->variant;
    r->checkpoint = s->checkpoint;
    r->precision = s->precision;
    r->output_prefix = s->output_prefix;
    r->noise_file = s->noise_file;
    r->first_frame = s->first_frame;
    r->last_frame = s->last_frame;
    r->kind = s->kind;
    r->score = s->score;
    r->latents_root = s->latents_root;
    r->source_line = s->source_line;
}

/* Copies (caller frees with vdn_job_spec_free); priority/tag are not in RenderRequest. */
void vdn_job_spec_from_proto(const Vdn__RenderRequest *r, vdn_job_spec *s) {
    memset(s, 0, sizeof *s);
#define DUP(f) s->f = r->f && r->f[0] ? vdn_xstrdup(r->f) : NULL
    DUP(prompt_cache);
    DUP(prompt);
    DUP(variant);
    DUP(checkpoint);
    DUP(precision);
    DUP(output_prefix);
    DUP(noise_file);
    DUP(first_frame);
    DUP(last_frame);
    DUP(kind);
    DUP(score);
    DUP(latents_root);
    DUP(source_line);
#undef DUP
    /* out-of-range values are kept (clamped to int) so validation reports them */
#define GETI(f)                                                                                    \
    if (r->has_##f) s->f = r->f
    GETI(frames);
    GETI(height);
    GETI(width);
    GETI(steps);
    GETI(gpus);
    GETI(timeout);
    GETI(min_gpu_memory);
#undef GETI
    if (r->has_frames && r->frames <= 0) s->frames = -1;
    if (r->has_height && r->height <= 0) s->height = -1;
    if (r->has_width && r->width <= 0) s->width = -1;
    if (r->has_steps && r->steps <= 0) s->steps = -1;
    if (r->has_gpus && r->gpus <= 0) s->gpus = -1;
    if (r->has_timeout && r->timeout <= 0) s->timeout = -1;
    if (r->has_seed) s->has_seed = 1, s->seed = r->seed;
    if (r->has_video_shift) s->video_shift = r->video_shift > 0 ? r->video_shift : NAN;
    if (r->has_audio_shift) s->audio_shift = r->audio_shift > 0 ? r->audio_shift : NAN;
    s->save_latents = r->has_save_latents && r->save_latents;
    s->record = r->has_record && r->record;
}
