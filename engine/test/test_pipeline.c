/* vdn_pipeline_render (pipeline.h) as its callers see it, on a tiny VDN checkpoint without VAEs:
 * refusals typed as the request's before any work (keyframe pictures, no prompt, text without a
 * text encoder, a prompt cache that does not load) that write nothing; the stage callback hears
 * the stages that run, in order, and stops the pipeline where it says so; a latents-only render
 * reports its outputs and reads its prompt cache once; a cancel from the progress callback is a
 * render failure; the engine renders from a prompt its caller loaded, checking its width. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ckpt_init.h"
#include "pipeline.h"
#include "vdn_util.h"

typedef struct {
    int stages[8], n;
    int stop_at; /* a stage to stop at, or -1 */
    int cancel_at_nfe;
    const char *hide; /* a file moved to FILE.away as the render stage starts */
} listener;

static void move_away(const char *path, int back) {
    char a[800];
    snprintf(a, sizeof a, "%s.away", path);
    CHECK(rename(back ? a : path, back ? path : a) == 0, "cannot move %s", path);
}

static int on_stage(void *user, vdn_pipeline_stage s) {
    listener *l = user;
    if (l->n < 8) l->stages[l->n++] = (int)s;
    if (s == VDN_PIPELINE_RENDER && l->hide) move_away(l->hide, 0);
    return (int)s == l->stop_at;
}

static int on_progress(void *user, int done, int total, double secs) {
    (void)total, (void)secs;
    const listener *l = user;
    return l->cancel_at_nfe && done >= l->cancel_at_nfe;
}

static int exists(const char *path) {
    return access(path, F_OK) == 0;
}

/* A request that must be refused as the request's, writing nothing. */
static void refused(const vdn_pipeline *p, vdn_pipeline_request rq, const char *words,
                    const char *what) {
    vdn_pipeline_result res;
    char err[VDN_ERR_LEN], path[700];
    listener l = {.stop_at = -1};
    rq.user = &l;
    rq.stage = on_stage;
    int rc = vdn_pipeline_render(p, &rq, &res, err, sizeof err);
    CHECK(rc != 0 && res.error == VDN_PIPELINE_ERR_REQUEST && strstr(err, words),
          "%s: rc %d, error %d, '%s' (expected the request's, naming '%s')", what, rc,
          (int)res.error, err, words);
    snprintf(path, sizeof path, "%s.safetensors", rq.render.out_prefix);
    CHECK(!exists(path) && l.n <= 1, "%s: wrote %s or ran %d stages", what, path, l.n);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "/tmp/vdn_test_pipeline";
    char ck[512], prompt[600], out[600], path[700], err[VDN_ERR_LEN];
    snprintf(ck, sizeof ck, "%s/ckpt", dir);
    snprintf(prompt, sizeof prompt, "%s/prompt.safetensors", ck);
    snprintf(out, sizeof out, "%s/out", dir);
    vdn_ckpt_init_opts o = {.preset = "tiny", .out = ck, .seed = 5, .vdn = 1};
    if (vdn_ckpt_init(&o, err, sizeof err) != 0) {
        fprintf(stderr, "ckpt init: %s\n", err);
        return 1;
    }
    const char *leftovers[] = {".safetensors", ".json", ".mp4"}; /* of an earlier run */
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s%s", out, leftovers[i]);
        unlink(path);
    }
    const vdn_engine_opts eo = {.backend = VDN_BACKEND_CPU};
    vdn_engine *eng = vdn_engine_open(ck, NULL, 0, &eo, err, sizeof err);
    CHECK(eng != NULL, "open: %s", err);
    if (!eng) return test_done("test_pipeline");
    vdn_pipeline p = {.engines = &eng, .n_engines = 1, .text_gpu = -1};
    vdn_pipeline_request base = {.render = {.prompt_cache = prompt,
                                            .frames = 22,
                                            .height = 64,
                                            .width = 64,
                                            .steps = 2,
                                            .seed = 1,
                                            .out_prefix = out},
                                 .crf = -1,
                                 .quiet = 1,
                                 .progress = on_progress};

    vdn_pipeline_request rq = base; /* pictures go with text, never with a prompt cache */
    rq.first_frame = "first.png";
    refused(&p, rq, "a prompt cache carries its keyframes", "pictures with a prompt cache");
    rq.render.prompt_cache = NULL;
    rq.first_frame = NULL;
    rq.last_frame = "last.png";
    refused(&p, rq, "no text prompt was given", "pictures without text");
    rq = base;
    rq.render.prompt_cache = NULL;
    refused(&p, rq, "neither a prompt cache nor a text prompt", "no prompt");
    rq.prompt_text = "a cat";
    refused(&p, rq, "no text encoder", "text without a text encoder");
    rq = base;
    snprintf(path, sizeof path, "%s/missing.safetensors", dir);
    rq.render.prompt_cache = path;
    refused(&p, rq, "bad prompt cache", "a prompt cache that is not there");

    /* stopped before the render: nothing rendered */
    vdn_pipeline_result res;
    listener l = {.stop_at = VDN_PIPELINE_RENDER};
    rq = base;
    rq.user = &l;
    rq.stage = on_stage;
    snprintf(path, sizeof path, "%s.safetensors", out);
    CHECK(vdn_pipeline_render(&p, &rq, &res, err, sizeof err) != 0 &&
              res.error == VDN_PIPELINE_ERR_STOPPED && res.stage == VDN_PIPELINE_RENDER &&
              !exists(path),
          "stop at the render: error %d stage %d exists %d", (int)res.error, (int)res.stage,
          exists(path));

    /* a latents-only render: the render stage alone (no text prompt, no decoders); the prompt
     * cache is read once, before the render stage (moved away as it starts, it is not missed) */
    l = (listener){.stop_at = -1, .hide = prompt};
    CHECK(vdn_pipeline_render(&p, &rq, &res, err, sizeof err) == 0, "render: %s", err);
    move_away(prompt, 1);
    CHECK(l.n == 1 && l.stages[0] == VDN_PIPELINE_RENDER, "stages: %d, first %d", l.n, l.stages[0]);
    CHECK(res.error == VDN_PIPELINE_OK && res.have_latents && !res.have_mp4 && !res.text_used &&
              exists(path),
          "outputs: latents %d mp4 %d text %d", res.have_latents, res.have_mp4, res.text_used);
    snprintf(path, sizeof path, "%s.json", out);
    CHECK(exists(path), "no run record %s", path);

    /* a cancel from progress is the render's failure */
    l = (listener){.stop_at = -1, .cancel_at_nfe = 1};
    CHECK(vdn_pipeline_render(&p, &rq, &res, err, sizeof err) != 0 &&
              res.error == VDN_PIPELINE_ERR_RENDER && strstr(err, "cancelled"),
          "cancel: error %d '%s'", (int)res.error, err);

    /* the engine takes a prompt its caller loaded (vdn_render_request.prompt) and opens no file:
     * none is named; one of another width is refused, naming both */
    vdn_prompt pr;
    CHECK(vdn_prompt_load(prompt, 0, &pr, err, sizeof err) == 0, "load: %s", err);
    vdn_render_request r = base.render;
    r.prompt_cache = NULL;
    r.prompt = &pr;
    CHECK(vdn_engine_render(eng, &r, NULL, NULL, err, sizeof err) == 0, "preloaded: %s", err);
    pr.text_dim++;
    CHECK(vdn_engine_render(eng, &r, NULL, NULL, err, sizeof err) != 0 &&
              strstr(err, "prompt rows of"),
          "a prompt of another width: '%s'", err);
    pr.text_dim--;
    vdn_prompt_free(&pr);
    vdn_engine_close(eng);
    return test_done("test_pipeline");
}
