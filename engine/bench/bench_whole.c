/* `vdn bench --whole`: the complete model evaluation as a user's render runs it, timed end to end.
 *
 * Builds the DiT at a preset's real shapes (the 50-block H3 by default) with random weights made
 * as the loader asks for them (no checkpoint file: dit.h's vdn_weight_source_random), opens an
 * engine over them and runs ordinary renders (engine.h: the same sequence building, noise,
 * sampler loop, host work and device syncs as `vdn render`) at the H3 workload: 102 latent
 * frames (345 pixel frames), 768 x 1344, 512 text rows, 575 audio rows. Each variant renders
 * warm-up + N model evaluations; the median of the N is the number quoted in docs/PERF.md. Also
 * reports the op layer's peak device memory (weights, activations, scratch). With --gpus or
 * --independent, several engines (one per device) render instead: bench_group.c. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_programs.h"
#include "bench_whole.h"
#include "ckpt_init.h"
#include "dit.h"
#include "engine.h"
#include "op_profile.h"
#include "safetensors.h"
#include "vdn_util.h"

int whole_engines(const vdn_bench_whole_opts *o) {
    int n = o->independent > 1 ? o->independent : 1;
    for (int i = 0; i < o->n_gpus; i++)
        n = o->gpus[i] > n ? o->gpus[i] : n;
    return n;
}

/* prompt cache of `rows` text rows (all tags 1) with N(0, 1)-like values */
static int write_prompt(const char *path, int rows, int dim, uint64_t seed, char *err,
                        size_t errlen) {
    float *emb = vdn_xmalloc(sizeof(float) * (size_t)rows * dim);
    int64_t *tags = vdn_xmalloc(sizeof(int64_t) * (size_t)rows);
    const int64_t shape[2] = {rows, dim};
    for (int64_t i = 0; i < (int64_t)rows * dim; i++)
        emb[i] = vdn_ckpt_init_value(seed, "bench.prompt_embeds", 2, shape, i);
    for (int i = 0; i < rows; i++)
        tags[i] = 1;
    vdn_st_tensor t[2] = {{"prompt_embeds", VDN_DT_F32, 2, {rows, dim}, emb},
                          {"text_token_tags", VDN_DT_I64, 1, {rows}, tags}};
    int rc = vdn_st_write(path, t, 2, NULL, 0, err, errlen);
    free(emb);
    free(tags);
    return rc;
}

int whole_on_nfe(void *user, int done, int total, double seconds) {
    whole_nfe_times *t = user;
    if (done >= 1 && done <= t->n) t->s[done - 1] = seconds;
    if (!t->quiet) fprintf(stderr, "  nfe %d/%d: %.3f s\n", done, total, seconds);
    if (t->prof && done == t->prof_at && vdn_prof_start(t->prof) != 0)
        fprintf(stderr, "  no profile: %s\n", vdn_dev_error(t->prof));
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void whole_stats(double *v, int n, double *median, double *min, double *max) {
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    *median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    *min = v[0];
    *max = v[n - 1];
}

vdn_engine_opts whole_engine_opts(const vdn_bench_whole_opts *o, int device) {
    vdn_engine_opts e = {.backend = o->cpu ? VDN_BACKEND_CPU : VDN_BACKEND_CUDA, .device = device};
    vdn_precision_parse(o->precision, &e.precision); /* checked by parse() */
    return e;
}

void whole_request(const vdn_bench_whole_opts *o, const char *variant, const char *prompt,
                   const char *prefix, vdn_render_request *req) {
    *req = (vdn_render_request){.prompt_cache = prompt,
                                .frames = (o->frames - 2) / 5 * 17 + 5,
                                .height = o->height,
                                .width = o->width,
                                .steps = o->warmup + o->nfe + o->profile,
                                .seed = o->seed,
                                .variant = variant,
                                .out_prefix = prefix};
}

typedef struct {
    char variant[32];
    double median_s, min_s, max_s;
    double peak_gib; /* op-layer peak since the engine opened, after this variant's render */
} whole_result;

static int run_variant(vdn_engine *eng, const vdn_bench_whole_opts *o, const char *variant,
                       const char *dir, const char *prompt, whole_result *r) {
    char prefix[4200], err[VDN_ERR_LEN];
    snprintf(prefix, sizeof prefix, "%s/%s", dir, variant);
    const int steps = o->warmup + o->nfe;
    whole_nfe_times t = {vdn_xcalloc((size_t)steps, sizeof(double)), steps, 0,
                         o->profile ? vdn_engine_device(eng) : NULL, steps};
    vdn_render_request req;
    whole_request(o, variant, prompt, prefix, &req);
    fprintf(stderr, "vdn bench --whole: %s, %d pixel frames %d x %d, %d + %d evaluations%s\n",
            variant, req.frames, o->height, o->width, o->warmup, o->nfe,
            o->profile ? " + 1 profiled" : "");
    int rc = vdn_engine_render(eng, &req, whole_on_nfe, &t, err, sizeof err);
    if (t.prof && t.prof->prof) {
        char title[160];
        snprintf(title, sizeof title, "%s, %s, one evaluation and the render's end", variant,
                 o->precision);
        vdn_prof_stop(t.prof, rc == 0 ? stdout : NULL, title);
    }
    if (rc != 0) {
        fprintf(stderr, "vdn bench --whole: %s: %s\n", variant, err);
        free(t.s);
        return -1;
    }
    snprintf(r->variant, sizeof r->variant, "%s", variant);
    whole_stats(t.s + o->warmup, o->nfe, &r->median_s, &r->min_s, &r->max_s);
    r->peak_gib = (double)vdn_engine_memory_peak(eng) / (1024.0 * 1024 * 1024);
    free(t.s);
    return 0;
}

static int write_json(const vdn_bench_whole_opts *o, const vdn_config *c, double load_s,
                      double weights_gib, const whole_result *r, int n) {
    FILE *f = fopen(o->json, "w");
    if (!f) {
        fprintf(stderr, "vdn bench --whole: %s: cannot write (%s)\n", o->json, strerror(errno));
        return -1;
    }
    fprintf(f,
            "{\"preset\": \"%s\", \"layers\": %d, \"latent_frames\": %d, \"height\": %d, "
            "\"width\": %d, \"text_rows\": %d, \"nfe\": %d, \"warmup\": %d, \"backend\": \"%s\", "
            "\"precision\": \"%s\", "
            "\"load_seconds\": %.3f, \"weights_gib\": %.3f, \"variants\": [",
            o->preset, c->layers, o->frames, o->height, o->width, o->text, o->nfe, o->warmup,
            o->cpu ? "cpu" : "cuda", o->precision, load_s, weights_gib);
    for (int i = 0; i < n; i++)
        fprintf(f,
                "%s{\"variant\": \"%s\", \"median_s_per_nfe\": %.4f, \"min_s\": %.4f, "
                "\"max_s\": %.4f, \"peak_gib\": %.3f}",
                i ? ", " : "", r[i].variant, r[i].median_s, r[i].min_s, r[i].max_s, r[i].peak_gib);
    fprintf(f, "]}\n");
    return fclose(f) == 0 ? 0 : -1;
}

/* the temporary folder and what the run wrote there (the prompt, latents, run records) */
static void remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    char path[4400];
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d) closedir(d);
    if (rmdir(dir) != 0) fprintf(stderr, "vdn bench --whole: could not remove %s\n", dir);
}

/* one engine, every variant (the run before --gpus; its output unchanged) */
static int run_one(const vdn_bench_whole_opts *o, vdn_config *cfg, const char *dir,
                   const char *prompt) {
    char err[VDN_ERR_LEN];
    vdn_weight_source src = vdn_weight_source_random(o->seed);
    const double t0 = vdn_now();
    const vdn_engine_opts eo = whole_engine_opts(o, -1);
    vdn_engine *eng = vdn_engine_open_source(cfg, &src, WHOLE_LABEL, &eo, err, sizeof err);
    const double load_s = vdn_now() - t0;
    vdn_weight_source_random_free(&src);
    if (!eng) {
        fprintf(stderr, "vdn bench --whole: %s\n", err);
        return -1;
    }
    whole_result res[8];
    int n = 0, rc = 0;
    const double weights_gib = (double)vdn_engine_memory_used(eng) / (1024.0 * 1024 * 1024);
    printf("-- whole model: %s, %d blocks, %s backend, %s, weights %.2f GiB (made in %.1f s) --\n",
           o->preset, cfg->layers, vdn_engine_backend_name(eng), o->precision, weights_gib, load_s);
    char list[256];
    snprintf(list, sizeof list, "%s", o->variants);
    for (char *save = NULL, *v = strtok_r(list, ",", &save); v && !rc && n < 8;
         v = strtok_r(NULL, ",", &save)) {
        if ((rc = run_variant(eng, o, v, dir, prompt, &res[n])) == 0) {
            printf("%-16s %9.3f s/NFE (median of %d; min %.3f, max %.3f)  peak %.2f GiB\n", v,
                   res[n].median_s, o->nfe, res[n].min_s, res[n].max_s, res[n].peak_gib);
            n++;
        }
    }
    vdn_engine_close(eng);
    if (!rc && o->json) rc = write_json(o, cfg, load_s, weights_gib, res, n);
    return rc;
}

static int run(const vdn_bench_whole_opts *o) {
    char err[VDN_ERR_LEN], tmp[] = "/tmp/vdn-bench-whole-XXXXXX", prompt[4200];
    vdn_config cfg;
    if (vdn_ckpt_preset(o->preset, o->layers, &cfg, err, sizeof err) != 0) {
        fprintf(stderr, "vdn bench --whole: %s\n", err);
        return -1;
    }
    cfg.has_vdn = 1; /* the VDN-H3 weights: serve every variant, dense included */
    const char *dir = o->out_dir;
    if (dir && vdn_mkdir_p(dir, err, sizeof err) != 0) {
        fprintf(stderr, "vdn bench --whole: --out-dir: %s\n", err);
        return -1;
    }
    if (!dir && !(dir = mkdtemp(tmp))) {
        fprintf(stderr, "vdn bench --whole: cannot make a folder in /tmp (%s)\n", strerror(errno));
        return -1;
    }
    snprintf(prompt, sizeof prompt, "%s/prompt.safetensors", dir);
    int rc = write_prompt(prompt, o->text, cfg.text_dim, o->seed, err, sizeof err);
    if (rc) fprintf(stderr, "vdn bench --whole: %s\n", err);
    if (!rc)
        rc = o->n_gpus || o->independent ? whole_run_group(o, &cfg, dir, prompt)
                                         : run_one(o, &cfg, dir, prompt);
    if (!o->out_dir) remove_dir(dir);
    return rc;
}

int vdn_bench_whole_run(const vdn_bench_whole_opts *o) {
    return run(o) == 0 ? 0 : 1;
}
