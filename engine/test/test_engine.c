/* vdn_engine_* as a library user (the worker) drives it: one engine, several renders of different
 * sizes and variants, progress callbacks, cancellation, request errors that leave the engine
 * usable, and frame arithmetic. Uses a tiny VDN checkpoint written by vdn_ckpt_init. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "ckpt_init.h"
#include "engine.h"
#include "safetensors.h"
#include "vdn_util.h"

typedef struct {
    int calls, last_done, total, cancel_at;
} progress;

static int on_progress(void *user, int done, int total, double secs) {
    progress *p = user;
    p->calls++;
    CHECK(done == p->last_done + 1 && secs >= 0, "progress out of order: %d after %d", done,
          p->last_done);
    p->last_done = done;
    p->total = total;
    return p->cancel_at && done >= p->cancel_at;
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static int render_bytes(vdn_engine *const *engs, int n, vdn_render_request *rq, progress *p,
                        char *out, size_t outlen, char **bytes, size_t *len, char *err) {
    int rc = vdn_engine_render_group(engs, n, rq, on_progress, p, err, VDN_ERR_LEN);
    snprintf(out, outlen, "%s.safetensors", rq->out_prefix);
    *bytes = rc ? NULL : vdn_read_file(out, len, err, VDN_ERR_LEN);
    return rc;
}

/* One clip over several engines (the worker's k-GPU jobs): 3 CPU engines, one rank each, give
 * the one-engine latents byte for byte; a cancel on rank 0 stops every rank (no hang); engines
 * that cannot group are refused by name. */
static void test_group(const char *ck, const char *prompt, const char *dir) {
    char err[VDN_ERR_LEN], out[600], path[700];
    vdn_engine *e[3];
    for (int i = 0; i < 3; i++) {
        e[i] = vdn_engine_open(ck, NULL, 0, &(vdn_engine_opts){.backend = VDN_BACKEND_CPU}, err,
                               sizeof err);
        CHECK(e[i] != NULL, "open %d: %s", i, err);
        if (!e[i]) return;
    }
    CHECK(vdn_engine_group_check(e, 3, err, sizeof err) &&
              !strcmp(vdn_engine_group_check(e, 3, err, sizeof err), "inproc"),
          "3 cpu engines: %s", err);
    vdn_engine *same[2] = {e[0], e[0]};
    CHECK(!vdn_engine_group_check(same, 2, err, sizeof err) && strstr(err, "share one engine"),
          "one engine twice: '%s'", err);
    char *b1 = NULL, *b3 = NULL;
    size_t n1 = 0, n3 = 0;
    snprintf(out, sizeof out, "%s/g1", dir);
    vdn_render_request rq = {.prompt_cache = prompt,
                             .frames = 56,
                             .height = 64,
                             .width = 32,
                             .steps = 2,
                             .seed = 5,
                             .out_prefix = out};
    progress p = {0};
    CHECK(render_bytes(e, 1, &rq, &p, path, sizeof path, &b1, &n1, err) == 0, "1 rank: %s", err);
    snprintf(out, sizeof out, "%s/g3", dir);
    progress p3 = {0};
    CHECK(render_bytes(e, 3, &rq, &p3, path, sizeof path, &b3, &n3, err) == 0, "3 ranks: %s", err);
    CHECK(p3.calls == 2 && p3.total == 2, "3 ranks: %d progress calls", p3.calls);
    CHECK(b1 && b3 && n1 == n3 && !memcmp(b1, b3, n1), "3 ranks' latents differ from 1 rank's");
    free(b1), free(b3);
    rq.steps = 4;
    snprintf(out, sizeof out, "%s/g3c", dir);
    progress pc = {.cancel_at = 1};
    CHECK(vdn_engine_render_group(e, 3, &rq, on_progress, &pc, err, sizeof err) != 0 &&
              strstr(err, "cancelled") && pc.calls == 1,
          "cancel over 3 ranks: '%s' after %d calls", err, pc.calls);
    for (int i = 0; i < 3; i++)
        vdn_engine_close(e[i]);
}

/* A rank of a sharded render holds activations for its own rows and heads only, made once per
 * render: each of 3 ranks peaks below one engine's unsharded render (measured on fresh engines:
 * the peak counts from the open; the weights are what is in use right after it). */
#define RANK_SHARE 0.75
static void test_group_memory(const char *ck, const char *prompt, const char *dir) {
    char err[VDN_ERR_LEN], out[600];
    vdn_engine *e[4];
    uint64_t weights[4];
    for (int i = 0; i < 4; i++) {
        e[i] = vdn_engine_open(ck, NULL, 0, &(vdn_engine_opts){.backend = VDN_BACKEND_CPU}, err,
                               sizeof err);
        CHECK(e[i] != NULL, "open %d: %s", i, err);
        if (!e[i]) return;
        weights[i] = vdn_engine_memory_used(e[i]);
    }
    vdn_render_request rq = {.prompt_cache = prompt,
                             .frames = 56,
                             .height = 128,
                             .width = 96,
                             .steps = 2,
                             .seed = 5,
                             .out_prefix = out};
    snprintf(out, sizeof out, "%s/m1", dir);
    CHECK(vdn_engine_render_group(&e[3], 1, &rq, NULL, NULL, err, sizeof err) == 0, "1 rank: %s",
          err);
    snprintf(out, sizeof out, "%s/m3", dir);
    CHECK(vdn_engine_render_group(e, 3, &rq, NULL, NULL, err, sizeof err) == 0, "3 ranks: %s", err);
    const double plain = (double)(vdn_engine_memory_peak(e[3]) - weights[3]);
    for (int r = 0; r < 3; r++) {
        const double rank = (double)(vdn_engine_memory_peak(e[r]) - weights[r]);
        printf("group memory: rank %d of 3 peaks at %.0f KiB of activations, one engine at %.0f\n",
               r, rank / 1024, plain / 1024);
        CHECK(rank > 0 && rank < RANK_SHARE * plain,
              "rank %d of 3: %.0f bytes of activations, not under %.2f x one engine's %.0f", r,
              rank, RANK_SHARE, plain);
    }
    for (int i = 0; i < 4; i++)
        vdn_engine_close(e[i]);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "/tmp/vdn_test_engine";
    char ck[512], prompt[600], out[600], path[700], err[VDN_ERR_LEN];
    snprintf(ck, sizeof ck, "%s/ckpt", dir);
    snprintf(prompt, sizeof prompt, "%s/prompt.safetensors", ck);
    vdn_ckpt_init_opts o = {.preset = "tiny", .out = ck, .seed = 3, .vdn = 1};
    if (vdn_ckpt_init(&o, err, sizeof err) != 0) {
        fprintf(stderr, "ckpt init: %s\n", err);
        return 1;
    }
    vdn_engine *eng = vdn_engine_open(ck, NULL, 0, &(vdn_engine_opts){.backend = VDN_BACKEND_CPU},
                                      err, sizeof err);
    CHECK(eng != NULL, "open: %s", err);
    if (!eng) return test_done("test_engine");
    CHECK(!strcmp(vdn_engine_backend_name(eng), "cpu"), "backend name");
    CHECK(strlen(vdn_engine_identity(eng)) > 0 && vdn_engine_config(eng)->has_vdn,
          "identity/config");

    /* two renders of different sizes on one engine */
    const int sizes[2][3] = {{56, 64, 96}, {22, 96, 64}};
    for (int i = 0; i < 2; i++) {
        snprintf(out, sizeof out, "%s/r%d", dir, i);
        vdn_render_request rq = {.prompt_cache = prompt,
                                 .frames = sizes[i][0],
                                 .height = sizes[i][1],
                                 .width = sizes[i][2],
                                 .steps = 3,
                                 .seed = 11,
                                 .out_prefix = out};
        progress p = {0};
        CHECK(vdn_engine_render(eng, &rq, on_progress, &p, err, sizeof err) == 0, "render %d: %s",
              i, err);
        CHECK(p.calls == 3 && p.total == 3, "progress calls %d", p.calls);
        snprintf(path, sizeof path, "%s.safetensors", out);
        vdn_st_file *f = vdn_st_open(path, err, sizeof err);
        CHECK(f != NULL, "output: %s", err);
        if (f) {
            const vdn_st_entry *v = vdn_st_find(f, "video"), *a = vdn_st_find(f, "audio");
            int F = vdn_latent_frames(sizes[i][0]);
            CHECK(v && v->ndim == 4 && v->shape[1] == F && v->shape[2] == sizes[i][1] / 16 &&
                      v->shape[3] == sizes[i][2] / 16,
                  "video shape");
            CHECK(a && a->shape[0] == 2 && a->shape[2] == vdn_audio_latents(sizes[i][0]),
                  "audio shape");
            vdn_st_close(f);
        }
    }
    /* cancellation after the first NFE: an error saying so, no output */
    snprintf(out, sizeof out, "%s/cancelled", dir);
    vdn_render_request rq = {.prompt_cache = prompt,
                             .frames = 56,
                             .height = 64,
                             .width = 64,
                             .steps = 4,
                             .seed = 1,
                             .out_prefix = out};
    progress p = {.cancel_at = 1};
    CHECK(vdn_engine_render(eng, &rq, on_progress, &p, err, sizeof err) != 0 &&
              strstr(err, "cancelled"),
          "cancel: '%s'", err);
    snprintf(path, sizeof path, "%s.safetensors", out);
    CHECK(!exists(path) && p.calls == 1, "cancelled render wrote output or kept going");
    /* request errors leave the engine usable */
    rq.variant = "bogus";
    CHECK(vdn_engine_render(eng, &rq, NULL, NULL, err, sizeof err) != 0 && strstr(err, "bogus"),
          "bad variant: '%s'", err);
    rq.variant = NULL, rq.prompt_cache = "/nonexistent/prompt.safetensors";
    CHECK(vdn_engine_render(eng, &rq, NULL, NULL, err, sizeof err) != 0 &&
              strstr(err, "/nonexistent/prompt.safetensors"),
          "missing prompt: '%s'", err);
    rq.prompt_cache = prompt, rq.width = 80;
    CHECK(vdn_engine_render(eng, &rq, NULL, NULL, err, sizeof err) != 0 && strstr(err, "32"),
          "bad width: '%s'", err);
    CHECK(vdn_engine_last_fault(eng) == VDN_ENGINE_FAULT_NONE, "a refused request is no device "
                                                               "fault");
    rq.width = 64, rq.steps = 1;
    snprintf(out, sizeof out, "%s/after", dir);
    CHECK(vdn_engine_render(eng, &rq, NULL, NULL, err, sizeof err) == 0, "render after errors: %s",
          err);
    CHECK(vdn_engine_last_fault(eng) == VDN_ENGINE_FAULT_NONE, "a good render records no fault");
    /* a device that faults (the worker's VDN_TEST_GPU_FAULT): the failure is typed DEVICE by the
     * backend's own failure path, with the CUDA backend's words, and it stays with the render */
    vdn_engine_inject_device_fault(eng);
    snprintf(out, sizeof out, "%s/faulted", dir);
    CHECK(vdn_engine_render(eng, &rq, NULL, NULL, err, sizeof err) != 0 &&
              strstr(err, "op linear (cpu): cudaGetLastError(): an illegal memory access"),
          "faulted device: '%s'", err);
    CHECK(vdn_engine_last_fault(eng) == VDN_ENGINE_FAULT_DEVICE, "fault %d, expected DEVICE",
          (int)vdn_engine_last_fault(eng));
    rq.variant = "bogus"; /* the next render clears the record: this one fails before a device op */
    CHECK(vdn_engine_render(eng, &rq, NULL, NULL, err, sizeof err) != 0 &&
              vdn_engine_last_fault(eng) == VDN_ENGINE_FAULT_NONE,
          "the record outlived its render: %d", (int)vdn_engine_last_fault(eng));
    vdn_engine_close(eng);
    test_group(ck, prompt, dir);
    test_group_memory(ck, prompt, dir);
    /* a base checkpoint (no branch) refuses hybrid variants by name, renders dense */
    snprintf(ck, sizeof ck, "%s/base", dir);
    vdn_ckpt_init_opts ob = {.preset = "tiny", .out = ck, .seed = 3};
    CHECK(vdn_ckpt_init(&ob, err, sizeof err) == 0, "base init: %s", err);
    eng = vdn_engine_open(ck, NULL, 0, &(vdn_engine_opts){.backend = VDN_BACKEND_AUTO}, err,
                          sizeof err);
    CHECK(eng != NULL, "open base: %s", err);
    if (eng) {
        snprintf(prompt, sizeof prompt, "%s/prompt.safetensors", ck);
        rq.prompt_cache = prompt, rq.variant = "vdn";
        CHECK(vdn_engine_render(eng, &rq, NULL, NULL, err, sizeof err) != 0 &&
                  strstr(err, "linear branch"),
              "vdn on a base checkpoint: '%s'", err);
        rq.variant = NULL;
        CHECK(vdn_engine_render(eng, &rq, NULL, NULL, err, sizeof err) == 0, "dense on base: %s",
              err);
        vdn_engine_close(eng);
    }
    CHECK(vdn_engine_open("/nonexistent/ckpt", NULL, 0,
                          &(vdn_engine_opts){.backend = VDN_BACKEND_CPU}, err,
                          sizeof err) == NULL &&
              strstr(err, "/nonexistent/ckpt"),
          "missing checkpoint: '%s'", err);
    /* options out of range are refused before anything loads, naming the option and value */
    const struct {
        vdn_engine_opts o;
        const char *want;
    } bad[] = {{{.backend = VDN_BACKEND_CPU, .ranks = 65}, "ranks 65: expected 1..64"},
               {{.backend = VDN_BACKEND_CPU, .threads = -1}, "threads -1"},
               {{.backend = VDN_BACKEND_CPU, .precision = (vdn_precision)7}, "precision 7"},
               {{.backend = VDN_BACKEND_CPU, .dit = {.chunk_rows = -5}}, "dit.chunk_rows -5"},
               {{.backend = VDN_BACKEND_CPU, .dit = {.vda_one_lane = 2}}, "dit.vda_one_lane 2"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        CHECK(vdn_engine_open(ck, NULL, 0, &bad[i].o, err, sizeof err) == NULL &&
                  strstr(err, bad[i].want),
              "bad option %zu: '%s', expected '%s'", i, err, bad[i].want);
    }
    /* the precision asked for is the engine's */
    vdn_engine *fe = vdn_engine_open(
        ck, NULL, 0, &(vdn_engine_opts){.backend = VDN_BACKEND_CPU, .precision = VDN_PRECISION_FP8},
        err, sizeof err);
    CHECK(fe && vdn_engine_precision(fe) == VDN_PRECISION_FP8, "fp8 engine: %s", err);
    vdn_engine_close(fe);
    vdn_engine *de = vdn_engine_open(ck, NULL, 0, NULL, err, sizeof err);
    CHECK(de && vdn_engine_precision(de) == VDN_PRECISION_BF16, "default engine: %s", err);
    vdn_engine_close(de);
    /* asking for cuda explicitly: works where a GPU backend is linked in, else says why */
    vdn_engine *ge = vdn_engine_open(ck, NULL, 0, &(vdn_engine_opts){.backend = VDN_BACKEND_CUDA},
                                     err, sizeof err);
    if (ge) {
        CHECK(!strcmp(vdn_engine_backend_name(ge), "cuda"), "cuda engine named cuda");
        vdn_engine_close(ge);
    } else {
        CHECK(strstr(err, "cuda") != NULL, "cuda refusal names the backend: '%s'", err);
    }
    return test_done("test_engine");
}
