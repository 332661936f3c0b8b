/* Request validation like the official pipeline (spec 1.1, diffusers MiniMaxH3 layout step):
 * sides that are not multiples of 32 are errors naming the sides and 32; frames not 17n+5, a
 * duration outside 5-15 s at 24 fps (of the rounded count), an area above 768 x 1344 and an
 * aspect ratio outside 1:4..4:1 are warnings, listed in the run record's "warnings" (the null
 * backend makes official-size requests instant). The expected warnings are derived here from
 * the rules, not from the engine's arithmetic. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "ckpt_init.h"
#include "engine.h"
#include "null_device.h"
#include "vdn_util.h"

/* What the rules say for a request, independently: n warnings and a word each must contain. */
typedef struct {
    int frames, height, width;
    int n;              /* expected warning count */
    const char *has[3]; /* a substring of each expected warning, in order */
} req_case;

static int snap(int f) { /* smallest 17n+5 >= f (5 at least) */
    int s = 5;
    while (s < f)
        s += 17;
    return s;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "/tmp/vdn_test_request";
    char ck[512], prompt[600], out[600], path[700], err[VDN_ERR_LEN];
    snprintf(ck, sizeof ck, "%s/ckpt", dir);
    snprintf(prompt, sizeof prompt, "%s/prompt.safetensors", ck);
    snprintf(out, sizeof out, "%s/out", dir);
    vdn_ckpt_init_opts o = {.preset = "tiny", .out = ck, .seed = 5, .vdn = 1};
    if (vdn_ckpt_init(&o, err, sizeof err) != 0) {
        fprintf(stderr, "ckpt init: %s\n", err);
        return 1;
    }
    CHECK(vdn_dev_backend_register(null_device()) == 0, "register");
    vdn_engine *eng = vdn_engine_open(ck, NULL, 0, &(vdn_engine_opts){.backend = VDN_BACKEND_CUDA},
                                      err, sizeof err);
    CHECK(eng != NULL, "open: %s", err);
    if (!eng) return test_done("engine_request");

    /* the rule's own boundaries: 17n+5 counts of 120..360 frames are 124 .. 345 */
    CHECK(snap(120) == 124 && snap(345) == 345 && snap(346) == 362, "snap helper");
    const req_case cases[] = {
        {124, 64, 96, 0, {NULL}},                        /* 5.17 s, small canvas: official */
        {345, 64, 96, 0, {NULL}},                        /* 14.4 s: the H3 workload's length */
        {124, 768, 1344, 0, {NULL}},                     /* exactly the area cap */
        {120, 64, 96, 1, {"17n+5"}},                     /* rounded up to 124: in range */
        {56, 64, 96, 1, {"2.33 s"}},                     /* too short */
        {362, 64, 96, 1, {"15.08 s"}},                   /* 17n+5 but above 15 s */
        {346, 64, 96, 2, {"17n+5", "15.08 s"}},          /* the official example: 346 -> 362 */
        {124, 800, 1344, 1, {"area"}},                   /* 1,075,200 pixels */
        {124, 32, 160, 1, {"aspect"}},                   /* 1:5 */
        {50, 800, 1344, 3, {"17n+5", "2.33 s", "area"}}, /* several at once, in this order */
    };
    const int n_cases = (int)(sizeof cases / sizeof *cases);
    for (int i = 0; i < n_cases; i++) {
        const req_case *q = &cases[i];
        /* independent count from the rules */
        int px = snap(q->frames), want = (px != q->frames) + (px < 120 || px > 360) +
                                         ((long)q->height * q->width > 768L * 1344L) +
                                         (q->width > 4 * q->height || q->height > 4 * q->width);
        CHECK(want == q->n, "case %d: table says %d warnings, the rules %d", i, q->n, want);
        vdn_render_request rq = {.prompt_cache = prompt,
                                 .frames = q->frames,
                                 .height = q->height,
                                 .width = q->width,
                                 .steps = 1,
                                 .seed = 1,
                                 .out_prefix = out};
        char msgs[4][VDN_REQ_WARN_LEN];
        int n = vdn_request_warnings(&rq, msgs, 4);
        CHECK(n == q->n, "case %d (%d frames %dx%d): %d warnings, expected %d", i, q->frames,
              q->height, q->width, n, q->n);
        CHECK(vdn_engine_render(eng, &rq, NULL, NULL, err, sizeof err) == 0, "case %d: %s", i, err);
        snprintf(path, sizeof path, "%s.json", out);
        char *js = vdn_read_file(path, NULL, err, sizeof err);
        cJSON *rec = js ? cJSON_Parse(js) : NULL;
        cJSON *w = rec ? cJSON_GetObjectItemCaseSensitive(rec, "warnings") : NULL;
        CHECK(cJSON_IsArray(w) && cJSON_GetArraySize(w) == q->n, "case %d: record warnings %d", i,
              w ? cJSON_GetArraySize(w) : -1);
        for (int k = 0; k < q->n && k < n && w; k++) {
            cJSON *e = cJSON_GetArrayItem(w, k);
            CHECK(cJSON_IsString(e) && strstr(e->valuestring, q->has[k]) &&
                      !strcmp(e->valuestring, msgs[k]),
                  "case %d warning %d: '%s', expected '%s' in it", i, k,
                  cJSON_IsString(e) ? e->valuestring : "?", q->has[k]);
        }
        cJSON_Delete(rec);
        free(js);
    }
    /* a short buffer: the count is capped, nothing written past it */
    {
        vdn_render_request rq = {.frames = 50, .height = 800, .width = 1344};
        char msgs[2][VDN_REQ_WARN_LEN];
        CHECK(vdn_request_warnings(&rq, msgs, 1) == 1 && strstr(msgs[0], "17n+5"), "capped at max");
    }
    /* sides off the multiple of 32 are errors that name the sides and 32 (not warnings) */
    const int bad[][2] = {{100, 64}, {64, 100}, {16, 64}, {48, 1344}};
    for (int i = 0; i < 4; i++) {
        vdn_render_request rq = {.prompt_cache = prompt,
                                 .frames = 124,
                                 .height = bad[i][0],
                                 .width = bad[i][1],
                                 .steps = 1,
                                 .seed = 1,
                                 .out_prefix = out};
        char num[16];
        snprintf(num, sizeof num, "%d", bad[i][0] % 32 ? bad[i][0] : bad[i][1]);
        CHECK(vdn_engine_render(eng, &rq, NULL, NULL, err, sizeof err) != 0 &&
                  strstr(err, "multiples of 32") && strstr(err, num),
              "%d x %d: '%s'", bad[i][0], bad[i][1], err);
    }
    vdn_engine_close(eng);
    return test_done("engine_request");
}
