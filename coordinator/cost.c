/* Estimated seconds of a request per worker kind, and the submit checks (cost.h). */
#include "cost.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "memfit.h"
#include "precision.h"
#include "seq.h"
#include "spec.h"
#include "vdn_util.h"

#define GIB 1073741824.0
/* the H3 workload the table's figures were measured at (docs/PERF.md, `vdn bench --whole`) */
#define REF_ROWS 103903.0
#define REF_PIXEL_FRAMES (345.0 * 768 * 1344)
#define REF_TEXT_TOKENS 512.0
/* a k-GPU render: the measured 2-GPU efficiency (VDN fp8, 7.001 s/NFE on 2 H200s against 11.251
 * on one: 80%, docs/PERF.md), assumed for any k */
#define SHARD_EFFICIENCY 0.8

void cost_caps_default(cost_caps *c) {
    memset(c, 0, sizeof *c);
    /* one H200, 2026-11-28 (docs/PERF.md): VDN 13.82 / 11.55 s/NFE, dense 33.36 / 31.50 (bf16 /
     * fp8); the 14.4 s clip's video decode 10.05 s + audio 0.05 s (bf16); 512 tokens to
     * hidden_states[50] 47.1 ms (bf16) */
    c->rates[0] = (cost_rate){"H200", {13.82, 11.55}, {33.36, 31.50},
                              10.1,   0.047,          "measured on one H200 (docs/PERF.md)"};
    /* the CPU backend with the tiny checkpoint CPU farms run (quickstart, tests: `vdn ckpt init
     * --preset tiny`), 2 shared cores: 56 frames at 512 x 512 (4,550 rows) 37 s/NFE, its decode
     * 436 s; extrapolated linearly to the H3 workload's rows and pixels. A CPU worker with a real
     * checkpoint is far slower: set --job-rate cpu=S. */
    c->rates[1] =
        (cost_rate){"cpu", {845, 845}, {845, 845},
                    10560, 1.0,        "the tiny checkpoint on 2 CPU cores (docs/cluster.md)"};
    c->nrates = 2;
}

int cost_rate_parse(cost_caps *c, const char *spec, char *err, size_t errlen) {
    const char *eq = strchr(spec, '=');
    char match[48], *end;
    int prec = -1;
    size_t ml = eq ? (size_t)(eq - spec) : 0;
    const char *slash = eq ? memchr(spec, '/', ml) : NULL;
    if (slash) {
        char p[8];
        size_t pl = (size_t)(eq - slash - 1);
        snprintf(p, sizeof p, "%.*s", (int)(pl < 7 ? pl : 7), slash + 1);
        vdn_precision pp;
        if (pl > 6 || vdn_precision_parse(p, &pp))
            return vdn_fail(err, errlen, "--job-rate '%s': expected MATCH[/bf16|/fp8]=SECONDS",
                            spec);
        prec = (int)pp;
        ml = (size_t)(slash - spec);
    }
    double s = eq ? strtod(eq + 1, &end) : 0;
    if (!eq || ml == 0 || ml >= sizeof match || !eq[1] || *end || !(s > 0) || s > 1e7)
        return vdn_fail(err, errlen,
                        "--job-rate '%s': expected MATCH[/PRECISION]=SECONDS, the seconds per "
                        "model evaluation at the H3 workload on GPUs whose name contains MATCH "
                        "(or cpu), e.g. H100/fp8=14.2",
                        spec);
    snprintf(match, sizeof match, "%.*s", (int)ml, spec);
    cost_rate *r = NULL;
    for (int i = 0; i < c->nrates && !r; i++)
        if (!strcmp(c->rates[i].match, match)) r = &c->rates[i];
    if (!r) {
        if (c->nrates == COST_MAX_RATES)
            return vdn_fail(err, errlen, "--job-rate: at most %d rows", COST_MAX_RATES);
        r = &c->rates[c->nrates++];
        *r = c->rates[0];
        snprintf(r->match, sizeof r->match, "%s", match);
    }
    for (int p = 0; p < 2; p++) {
        if (prec >= 0 && p != prec) continue;
        const double f = s / r->vdn[p];
        r->vdn[p] = s, r->dense[p] *= f;
        if (prec < 0 && p == 0) r->decode *= f, r->text *= f; /* at both: bf16's factor */
    }
    snprintf(r->source, sizeof r->source, "--job-rate %.80s", spec);
    return 0;
}

void cost_kind_name(const cost_kind *k, char *buf, size_t len) {
    snprintf(buf, len, "%s %s", k->cpu ? "cpu" : k->gpu,
             vdn_precision_name((vdn_precision)k->precision));
}

static const cost_rate *rate_for(const cost_caps *c, int cpu, const char *gpu, int *assumed) {
    *assumed = 0;
    for (int i = 0; i < c->nrates; i++) {
        const int is_cpu = !strcmp(c->rates[i].match, "cpu");
        if (cpu ? is_cpu : !is_cpu && strstr(gpu, c->rates[i].match)) return &c->rates[i];
    }
    *assumed = 1;
    for (int i = 0; i < c->nrates; i++)
        if (cpu == !strcmp(c->rates[i].match, "cpu")) return &c->rates[i];
    return &c->rates[0];
}

int cost_kind_add(const cost_caps *c, cost_kind *k, int n, const char *backend,
                  const char *gpu_name, int precision) {
    const int cpu = !gpu_name || !gpu_name[0] || (backend && !strcmp(backend, "cpu"));
    const char *g = cpu ? "" : gpu_name;
    for (int i = 0; i < n; i++)
        if (k[i].cpu == cpu && k[i].precision == precision && !strcmp(k[i].gpu, g)) {
            k[i].workers++;
            return n;
        }
    if (n == COST_MAX_KINDS) return n;
    memset(&k[n], 0, sizeof k[n]);
    snprintf(k[n].gpu, sizeof k[n].gpu, "%s", g);
    k[n].cpu = cpu;
    k[n].precision = precision;
    k[n].workers = 1;
    k[n].rate = rate_for(c, cpu, g, &k[n].assumed_rate);
    return n + 1;
}

int cost_kinds_of_db(const cost_caps *c, sqlite3 *db, cost_kind *k, int max) {
    int n = 0;
    sqlite3_stmt *st =
        cdb_prep(db, "SELECT backend, gpus, precisions FROM workers ORDER BY id", "");
    while (st && sqlite3_step(st) == SQLITE_ROW) {
        const char *backend = (const char *)sqlite3_column_text(st, 0);
        cJSON *g = cJSON_Parse((const char *)sqlite3_column_text(st, 1));
        const cJSON *name = cJSON_GetObjectItem(cJSON_GetArrayItem(g, 0), "name");
        const char *precs = (const char *)sqlite3_column_text(st, 2);
        unsigned m = 0;
        if (!precs || vdn_precision_parse_list(precs, &m)) m = 1u << VDN_PRECISION_BF16;
        for (int p = 0; p < VDN_PRECISION_COUNT; p++)
            if (m >> p & 1 && n < max)
                n = cost_kind_add(c, k, n, backend, cJSON_IsString(name) ? name->valuestring : "",
                                  p);
        cJSON_Delete(g);
    }
    sqlite3_finalize(st);
    return n;
}

void cost_time_of(const vdn_job_spec *s, const cost_kind *k, cost_time *t) {
    memset(t, 0, sizeof *t);
    t->seconds = -1;
    t->text_tokens = s->prompt ? (int)((strlen(s->prompt) + 3) / 4) : 1;
    if (t->text_tokens < 1) t->text_tokens = 1;
    long long min_rows = vdn_job_min_rows(s); /* 0: a size left out */
    if (min_rows <= 0 || s->steps <= 0) return;
    t->rows = min_rows - 1 + t->text_tokens;
    const int p = k->precision == VDN_PRECISION_FP8 ? 1 : 0;
    const double x = (double)t->rows / REF_ROWS, vdn = k->rate->vdn[p];
    const int dense = s->variant && !strcmp(s->variant, "dense");
    /* VDN attends within windows plus a linear branch: linear in the rows. Dense attention's
     * extra time over VDN grows with the square of the rows. */
    t->nfe_seconds = vdn * x + (dense ? (k->rate->dense[p] - vdn) * x * x : 0);
    const int gpus = s->gpus > 1 ? s->gpus : 1;
    t->render = s->steps * t->nfe_seconds / (gpus > 1 ? gpus * SHARD_EFFICIENCY : 1);
    t->decode =
        k->rate->decode * ((double)s->frames * s->height * s->width / REF_PIXEL_FRAMES) / gpus;
    t->text = s->prompt ? k->rate->text * t->text_tokens / REF_TEXT_TOKENS : 0;
    t->seconds = t->render + t->decode + t->text;
}

void cost_duration(double s, char *buf, size_t len) {
    if (s < 120)
        snprintf(buf, len, "%.1f s", s);
    else if (s < 7200)
        snprintf(buf, len, "%.1f min", s / 60);
    else
        snprintf(buf, len, "%.1f h", s / 3600);
}

/* --max-job-memory: the request's least GPU memory (memfit.h) against the cap */
static void check_memory(const vdn_job_spec *s, const cost_caps *c, vdn_errlist *errs,
                         const char *where) {
    coord_mem_need m;
    coord_mem_need_of(s, &m);
    const double need = m.weights + m.activations + m.ffn;
    if (c->max_job_memory <= 0 || m.rows <= 0 || need <= c->max_job_memory) return;
    vdn_errlist_add(errs,
                    "%s: field 'frames': %d frames x %d x %d need at least %.1f GiB of GPU "
                    "memory (the H3 DiT's %s weights %.1f GiB + %lld sequence rows%s of "
                    "activations %.1f GiB + a feed-forward piece %.1f GiB), over this "
                    "coordinator's --max-job-memory %.1f GiB: render fewer frames or a smaller "
                    "size",
                    where, s->frames, s->height, s->width, need / GIB, m.precision, m.weights / GIB,
                    m.rows, m.gpus > 1 ? " over its GPUs" : "", m.activations / GIB, m.ffn / GIB,
                    c->max_job_memory / GIB);
}

/* --max-job-seconds: on the fastest registered kind that renders the request's precision */
static void check_seconds(sqlite3 *db, const vdn_job_spec *s, const cost_caps *c, vdn_errlist *errs,
                          const char *where) {
    if (c->max_job_seconds <= 0) return;
    vdn_precision p = VDN_PRECISION_BF16;
    if (s->precision) vdn_precision_parse(s->precision, &p);
    cost_kind k[COST_MAX_KINDS];
    int n = cost_kinds_of_db(c, db, k, COST_MAX_KINDS);
    if (n == 0) { /* no worker yet: the table's GPU stands in */
        n = cost_kind_add(c, k, 0, "cuda", c->rates[0].match, (int)p);
        k[0].workers = 0;
    }
    const cost_kind *best = NULL;
    cost_time t, bt = {0};
    for (int i = 0; i < n; i++) {
        if (k[i].precision != (int)p) continue;
        cost_time_of(s, &k[i], &t);
        if (t.seconds >= 0 && (!best || t.seconds < bt.seconds)) best = &k[i], bt = t;
    }
    /* no kind renders it (refused as unplaceable, waiting.h) or a size left to the engine */
    if (!best || bt.seconds <= c->max_job_seconds) return;
    char kind[100], dur[32], nfe[32], dec[32], txt[32];
    cost_kind_name(best, kind, sizeof kind);
    cost_duration(bt.seconds, dur, sizeof dur);
    cost_duration(bt.nfe_seconds, nfe, sizeof nfe);
    cost_duration(bt.decode, dec, sizeof dec);
    cost_duration(bt.text, txt, sizeof txt);
    vdn_errlist_add(errs,
                    "%s: field 'frames': %d x %d x %d x %d steps is an estimated %s on %s (%s; "
                    "%s a model evaluation at %lld sequence rows, + decode %s + text %s%s), "
                    "over this coordinator's --max-job-seconds %.0f: render fewer frames, "
                    "a smaller size or fewer steps",
                    where, s->frames, s->height, s->width, s->steps, dur, kind,
                    best->workers ? "the fastest registered worker kind"
                                  : "no worker registered yet; an H200 assumed",
                    nfe, bt.rows, dec, txt,
                    best->assumed_rate ? "; no rate for this GPU, the table's first assumed" : "",
                    c->max_job_seconds);
}

void cost_check(sqlite3 *db, const vdn_job_spec *s, const cost_caps *c, vdn_errlist *errs,
                const char *where) {
    coord_mem_check(db, s, c->gpu_memory_limit, errs, where);
    check_memory(s, c, errs, where);
    check_seconds(db, s, c, errs, where);
}
