/* Snapshots and resume (vdn_render_request.snapshot / .resume): a render stopped after any NFE
 * and continued from its snapshot writes the same video and audio, bit for bit, as one render
 * that ran through; the continuation evaluates only the steps that were left; snapshots come at
 * the requested cadence and never after the last NFE; a state that does not fit the request is
 * refused with a reason. The reference is the uninterrupted render on the same backend. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ckpt_init.h"
#include "engine.h"
#include "safetensors.h"
#include "vdn_util.h"

#define STEPS 6
#define MAX_SNAPS 8

typedef struct {
    int n;
    vdn_render_state s[MAX_SNAPS]; /* deep copies */
} snaps;

static int keep_snapshot(void *user, const vdn_render_state *st) {
    snaps *k = user;
    if (k->n >= MAX_SNAPS) return 1;
    vdn_render_state *c = &k->s[k->n++];
    *c = *st;
    c->video = vdn_xmalloc(sizeof(float) * st->n_video);
    c->audio = vdn_xmalloc(sizeof(float) * st->n_audio);
    memcpy(c->video, st->video, sizeof(float) * st->n_video);
    memcpy(c->audio, st->audio, sizeof(float) * st->n_audio);
    return 0;
}

typedef struct {
    int calls, first, cancel_at;
} progress;

static int on_progress(void *user, int done, int total, double secs) {
    (void)total, (void)secs;
    progress *p = user;
    if (!p->calls) p->first = done;
    p->calls++;
    return p->cancel_at && done >= p->cancel_at;
}

/* The tensor's raw bytes (malloc'd), or NULL. */
static unsigned char *tensor_bytes(const char *path, const char *name, size_t *len) {
    char err[VDN_ERR_LEN];
    vdn_st_file *f = vdn_st_open(path, err, sizeof err);
    if (!f) return NULL;
    const vdn_st_entry *e = vdn_st_find(f, name);
    unsigned char *out = NULL;
    if (e) {
        size_t n = 1;
        for (int i = 0; i < e->ndim; i++)
            n *= (size_t)e->shape[i];
        out = vdn_xmalloc(n * sizeof(float));
        if (vdn_st_to_f32(f, e, (float *)out, err, sizeof err)) free(out), out = NULL;
        *len = n * sizeof(float);
    }
    vdn_st_close(f);
    return out;
}

static int same_outputs(const char *a, const char *b) {
    char pa[700], pb[700];
    snprintf(pa, sizeof pa, "%s.safetensors", a);
    snprintf(pb, sizeof pb, "%s.safetensors", b);
    int same = 1;
    const char *names[2] = {"video", "audio"};
    for (int i = 0; i < 2; i++) {
        size_t la = 0, lb = 0;
        unsigned char *x = tensor_bytes(pa, names[i], &la), *y = tensor_bytes(pb, names[i], &lb);
        same &= x && y && la == lb && !memcmp(x, y, la);
        free(x);
        free(y);
    }
    return same;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "/tmp/vdn_test_resume";
    char ck[512], prompt[600], ref[600], out[600], err[VDN_ERR_LEN];
    snprintf(ck, sizeof ck, "%s/ckpt", dir);
    snprintf(prompt, sizeof prompt, "%s/prompt.safetensors", ck);
    vdn_ckpt_init_opts o = {.preset = "tiny", .out = ck, .seed = 5, .vdn = 1};
    if (vdn_ckpt_init(&o, err, sizeof err) != 0) {
        fprintf(stderr, "ckpt init: %s\n", err);
        return 1;
    }
    vdn_engine *eng = vdn_engine_open(ck, NULL, 0, &(vdn_engine_opts){.backend = VDN_BACKEND_CPU},
                                      err, sizeof err);
    CHECK(eng != NULL, "open: %s", err);
    if (!eng) return test_done("test_resume");

    /* the reference: one render straight through */
    snprintf(ref, sizeof ref, "%s/ref", dir);
    vdn_render_request rq = {.prompt_cache = prompt,
                             .frames = 56,
                             .height = 64,
                             .width = 64,
                             .steps = STEPS,
                             .seed = 21,
                             .out_prefix = ref};
    CHECK(vdn_engine_render(eng, &rq, NULL, NULL, err, sizeof err) == 0, "reference: %s", err);

    /* snapshots every 2 NFEs, stopped after NFE 5: snapshots after 2 and 4 only */
    snaps k = {0};
    progress p = {.cancel_at = 5};
    snprintf(out, sizeof out, "%s/stopped", dir);
    rq.out_prefix = out;
    rq.snapshot = keep_snapshot;
    rq.snapshot_user = &k;
    rq.snapshot_every_nfe = 2;
    CHECK(vdn_engine_render(eng, &rq, on_progress, &p, err, sizeof err) != 0,
          "the cancelled render succeeded");
    CHECK(k.n == 2 && k.s[0].step == 2 && k.s[1].step == 4 && k.s[0].steps == STEPS,
          "snapshots: %d, steps %d %d", k.n, k.n > 0 ? k.s[0].step : -1,
          k.n > 1 ? k.s[1].step : -1);

    /* each snapshot continued to the end equals the reference bit for bit, and runs only the
     * NFEs that were left */
    for (int i = 0; i < k.n; i++) {
        snprintf(out, sizeof out, "%s/resumed%d", dir, i);
        vdn_render_request r2 = rq;
        r2.out_prefix = out;
        r2.snapshot = NULL;
        r2.resume = &k.s[i];
        progress p2 = {0};
        CHECK(vdn_engine_render(eng, &r2, on_progress, &p2, err, sizeof err) == 0,
              "resume from step %d: %s", k.s[i].step, err);
        CHECK(p2.calls == STEPS - k.s[i].step && p2.first == k.s[i].step + 1,
              "resume from step %d evaluated %d NFEs starting with %d", k.s[i].step, p2.calls,
              p2.first);
        CHECK(same_outputs(ref, out), "resumed from step %d: outputs differ from the reference",
              k.s[i].step);
    }

    /* a resumed render snapshots on, counted from where it resumed; never after the last NFE */
    if (k.n) {
        snaps k2 = {0};
        vdn_render_request r3 = rq;
        r3.resume = &k.s[0];
        r3.snapshot_user = &k2;
        r3.snapshot_every_nfe = 1;
        snprintf(out, sizeof out, "%s/resnap", dir);
        r3.out_prefix = out;
        CHECK(vdn_engine_render(eng, &r3, NULL, NULL, err, sizeof err) == 0, "resnap: %s", err);
        CHECK(k2.n == STEPS - 3 && k2.s[0].step == 3 && k2.s[k2.n - 1].step == STEPS - 1,
              "snapshots after resuming at 2: %d", k2.n);
        for (int i = 0; i < k2.n; i++)
            free(k2.s[i].video), free(k2.s[i].audio);
        /* by time: a cadence of 0 s snapshots after every NFE but the last */
        snaps k3 = {0};
        vdn_render_request r4 = rq;
        r4.snapshot_user = &k3;
        r4.snapshot_every_nfe = 0;
        r4.snapshot_every_seconds = 1e-9;
        CHECK(vdn_engine_render(eng, &r4, NULL, NULL, err, sizeof err) == 0, "timed: %s", err);
        CHECK(k3.n == STEPS - 1, "timed snapshots: %d, expected %d", k3.n, STEPS - 1);
        for (int i = 0; i < k3.n; i++)
            free(k3.s[i].video), free(k3.s[i].audio);

        /* refusals: another step count, a state of another size, a step past the end */
        vdn_render_request bad = rq;
        bad.snapshot = NULL;
        vdn_render_state st = k.s[0];
        bad.resume = &st;
        bad.steps = STEPS + 1;
        CHECK(vdn_engine_render(eng, &bad, NULL, NULL, err, sizeof err) != 0 &&
                  strstr(err, "resume") && strstr(err, "steps"),
              "other steps: %s", err);
        bad.steps = STEPS;
        st.n_video--;
        CHECK(vdn_engine_render(eng, &bad, NULL, NULL, err, sizeof err) != 0 &&
                  strstr(err, "another request"),
              "other size: %s", err);
        st = k.s[0];
        st.step = STEPS;
        CHECK(vdn_engine_render(eng, &bad, NULL, NULL, err, sizeof err) != 0, "step past end");
        /* the engine is fine after refusals */
        bad.resume = &k.s[1];
        snprintf(out, sizeof out, "%s/after", dir);
        bad.out_prefix = out;
        CHECK(vdn_engine_render(eng, &bad, NULL, NULL, err, sizeof err) == 0 &&
                  same_outputs(ref, out),
              "resume after refusals: %s", err);
    }
    for (int i = 0; i < k.n; i++)
        free(k.s[i].video), free(k.s[i].audio);
    vdn_engine_close(eng);
    return test_done("test_resume");
}
