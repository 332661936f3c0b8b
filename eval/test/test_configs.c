/* Scorer config, scorer output, sweep manifest and variant names: valid inputs parse to the
 * expected values; malformed ones fail with a message naming the file, the field and what was
 * expected. Also runs a real scorer command through the shell with hostile placeholder values. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "record_timing.h"
#include "scorer.h"
#include "sweep.h"
#include "variants.h"
#include "vdn_util.h"
#include "../../ops/test/check.h"

static void expect_err(int rc, const char *err, const char *a, const char *b, int line) {
    if (rc == 0) {
        fprintf(stderr, "line %d: malformed input accepted\n", line);
        failures++;
        return;
    }
    if ((a && !strstr(err, a)) || (b && !strstr(err, b))) {
        fprintf(stderr, "line %d: error \"%s\" lacks \"%s\" / \"%s\"\n", line, err, a ? a : "",
                b ? b : "");
        failures++;
    }
}

static int scorers_bad(const char *text, vdn_scorer_set *s, char *err) {
    int rc = vdn_scorers_parse(text, strlen(text), "sc.json", s, err, VDN_ERR_LEN);
    if (rc == 0) vdn_scorers_free(s);
    return rc;
}

static int sweep_bad(const char *text, char *err) {
    vdn_sweep s;
    int rc = vdn_sweep_parse(text, strlen(text), "sw.json", &s, err, VDN_ERR_LEN);
    if (rc == 0) vdn_sweep_free(&s);
    return rc;
}

#define SW_HEAD                                                                                    \
    "{\"version\":1,\"suite\":\"/s/suite.jsonl\",\"store\":\"file:///st\",\"tag\":\"t\","

int main(void) {
    char err[VDN_ERR_LEN];
    /* ---- variants ---- */
    vdn_variant v;
    CHECK(vdn_variant_parse("vdn@8", &v, err, sizeof err) == 0 && v.steps == 8 &&
          !strcmp(v.engine, "vdn") && !strcmp(v.key, "vdn_8"));
    CHECK(vdn_variant_parse("window-only", &v, err, sizeof err) == 0 && v.steps == 50 &&
          !strcmp(v.name, "window-only@50"));
    expect_err(vdn_variant_parse("vdn@0", &v, err, sizeof err), err, "vdn@0", "1..1000", __LINE__);
    expect_err(vdn_variant_parse("vdn@8x", &v, err, sizeof err), err, "@STEPS", NULL, __LINE__);
    expect_err(vdn_variant_parse("radial@50", &v, err, sizeof err), err, "radial@50",
               "expected dense", __LINE__);
    /* :PRECISION: fp8 names and keys say so; bf16 (default or written) keeps the old ones */
    CHECK(vdn_variant_parse("vdn@8:fp8", &v, err, sizeof err) == 0 && v.steps == 8 &&
          !strcmp(v.engine, "vdn") && !strcmp(v.precision, "fp8") && !strcmp(v.name, "vdn@8:fp8") &&
          !strcmp(v.key, "vdn_8_fp8"));
    CHECK(vdn_variant_parse("dense:fp8", &v, err, sizeof err) == 0 && v.steps == 50 &&
          !strcmp(v.name, "dense@50:fp8") && !strcmp(v.precision, "fp8"));
    CHECK(vdn_variant_parse("dense@50:bf16", &v, err, sizeof err) == 0 &&
          !strcmp(v.name, "dense@50") && !strcmp(v.key, "dense_50") &&
          !strcmp(v.precision, "bf16"));
    CHECK(vdn_variant_parse("vdn@8", &v, err, sizeof err) == 0 && !strcmp(v.precision, "bf16"));
    expect_err(vdn_variant_parse("vdn@8:fp16", &v, err, sizeof err), err, "vdn@8:fp16",
               "bf16 or fp8", __LINE__);
    expect_err(vdn_variant_parse("vdn@8:", &v, err, sizeof err), err, ":PRECISION", NULL, __LINE__);
    expect_err(vdn_variant_parse("vdn@:fp8", &v, err, sizeof err), err, "@STEPS", NULL, __LINE__);
    expect_err(vdn_variant_parse("vdn@8:fp8:fp8", &v, err, sizeof err), err, ":PRECISION", NULL,
               __LINE__);
    vdn_variant *list;
    int n;
    CHECK(vdn_variant_list_parse("vdn@8,vdn@8:fp8", &list, &n, err, sizeof err) == 0 && n == 2 &&
          strcmp(list[0].key, list[1].key) != 0);
    if (n == 2) free(list);
    expect_err(vdn_variant_list_parse("vdn@8,vdn@8:bf16", &list, &n, err, sizeof err), err,
               "listed twice", NULL, __LINE__);
    CHECK(vdn_variant_list_parse("dense@50,vdn@8, vdn@4", &list, &n, err, sizeof err) == 0 &&
          n == 3 && list[2].steps == 4);
    if (n == 3) free(list);
    expect_err(vdn_variant_list_parse("vdn,vdn@50", &list, &n, err, sizeof err), err,
               "listed twice", NULL, __LINE__);
    expect_err(vdn_variant_list_parse(",,", &list, &n, err, sizeof err), err, "--variants", NULL,
               __LINE__);

    /* ---- scorer config ---- */
    vdn_scorer_set s;
    const char *good =
        "{\"scorers\":[{\"name\":\"dover\",\"command\":\"x {video}\"},"
        "{\"name\":\"lpips\",\"command\":\"y\",\"higher_is_better\":false,\"timeout_s\":30}]}";
    CHECK(vdn_scorers_parse(good, strlen(good), "sc.json", &s, err, sizeof err) == 0);
    if (s.n == 2) {
        CHECK(s.s[0].higher_is_better == 1 && s.s[0].timeout_s == 600);
        CHECK(s.s[1].higher_is_better == 0 && s.s[1].timeout_s == 30 &&
              !strcmp(s.s[1].name, "lpips"));
        vdn_scorers_free(&s);
    }
    expect_err(scorers_bad("[", &s, err), err, "sc.json", "not valid JSON", __LINE__);
    expect_err(scorers_bad("{\"scorer\":[]}", &s, err), err, "sc.json", "\"scorers\"", __LINE__);
    expect_err(scorers_bad("{\"scorers\":[{\"name\":\"a b\",\"command\":\"x\"}]}", &s, err), err,
               "scorers[0]", "'name'", __LINE__);
    expect_err(scorers_bad("{\"scorers\":[{\"name\":\"a\"}]}", &s, err), err, "'command'", NULL,
               __LINE__);
    expect_err(scorers_bad("{\"scorers\":[{\"name\":\"a\",\"command\":\"x\",\"cmd\":1}]}", &s, err),
               err, "unknown field 'cmd'", NULL, __LINE__);
    expect_err(
        scorers_bad("{\"scorers\":[{\"name\":\"a\",\"command\":\"x\",\"timeout_s\":0}]}", &s, err),
        err, "'timeout_s'", NULL, __LINE__);
    expect_err(
        scorers_bad("{\"scorers\":[{\"name\":\"a\",\"command\":\"x\",\"higher_is_better\":1}]}", &s,
                    err),
        err, "'higher_is_better'", NULL, __LINE__);
    expect_err(
        scorers_bad(
            "{\"scorers\":[{\"name\":\"a\",\"command\":\"x\"},{\"name\":\"a\",\"command\":\"y\"}]}",
            &s, err),
        err, "used twice", NULL, __LINE__);

    /* ---- scorer stdout ---- */
    char **k;
    double *vals;
    CHECK(vdn_scores_parse("{\"a\": 1.5, \"b_2\": -3}\n", 21, "sc", &k, &vals, &n, err,
                           sizeof err) == 0 &&
          n == 2 && vals[1] == -3 && !strcmp(k[0], "a"));
    if (n == 2) vdn_scores_free(k, vals, n);
    expect_err(vdn_scores_parse("score: 3", 8, "scorer q", &k, &vals, &n, err, sizeof err), err,
               "scorer q", "JSON object", __LINE__);
    expect_err(vdn_scores_parse("{\"a\":\"3\"}", 9, "scorer q", &k, &vals, &n, err, sizeof err),
               err, "score 'a'", "finite number", __LINE__);
    expect_err(vdn_scores_parse("{}", 2, "scorer q", &k, &vals, &n, err, sizeof err), err, "1..256",
               NULL, __LINE__);

    /* ---- running a scorer: placeholders reach the command verbatim, quotes and all ---- */
    vdn_scorer sc = {"echo", "printf '{\"len\": %d}' \"$(printf %s {prompt} | wc -c)\"", 1, 20};
    vdn_scorer_args a = {"/v.mp4", "/v.st", "/r.json", "it's $(rm -rf /) \"quoted\" `x`",
                         "p1",     "vdn@8"};
    int rc = vdn_scorer_run(&sc, &a, &k, &vals, &n, err, sizeof err);
    CHECK(rc == 0);
    if (rc == 0) {
        CHECK(n == 1 && vals[0] == (double)strlen(a.prompt));
        vdn_scores_free(k, vals, n);
    } else {
        fprintf(stderr, "scorer run: %s\n", err);
    }
    /* {video} (the mp4) and {latents} are two different files */
    vdn_scorer paths = {"paths",
                        "printf '{\"v\": %d, \"l\": %d}' \"$(printf %s {video} | wc -c)\" "
                        "\"$(printf %s {latents} | wc -c)\"",
                        1, 20};
    rc = vdn_scorer_run(&paths, &a, &k, &vals, &n, err, sizeof err);
    CHECK(rc == 0);
    if (rc == 0) {
        CHECK(n == 2 && !strcmp(k[0], "v") && vals[0] == (double)strlen(a.video) &&
              vals[1] == (double)strlen(a.latents));
        vdn_scores_free(k, vals, n);
    }
    vdn_scorer bad_exit = {"boom", "echo oops; exit 4", 1, 20};
    expect_err(vdn_scorer_run(&bad_exit, &a, &k, &vals, &n, err, sizeof err), err, "scorer boom",
               "exit status 4", __LINE__);
    vdn_scorer slow = {"slow", "sleep 5", 1, 1};
    expect_err(vdn_scorer_run(&slow, &a, &k, &vals, &n, err, sizeof err), err, "scorer slow",
               "timed out", __LINE__);

    /* ---- sweep manifest ---- */
    const char *sw = SW_HEAD
        "\"baseline\":\"dense@50\",\"steps_override\":1,\"variants\":[\"dense@50\",\"vdn@8\"],"
        "\"batches\":[3],\"pairs\":[{\"prompt\":\"p1\",\"variant\":\"vdn@8\",\"video_key\":\"a."
        "safetensors\","
        "\"record_key\":\"a.json\",\"batch_id\":3,\"job_id\":17}]}";
    vdn_sweep swp;
    CHECK(vdn_sweep_parse(sw, strlen(sw), "sw.json", &swp, err, sizeof err) == 0);
    if (swp.n_pairs == 1) {
        CHECK(swp.steps_override == 1 && swp.n_variants == 2 && swp.variants[1].steps == 8);
        CHECK(swp.pairs[0].job_id == 17 && swp.batches[0] == 3);
        CHECK(vdn_sweep_find(&swp, "p1", "vdn@8") == &swp.pairs[0] &&
              !vdn_sweep_find(&swp, "p1", "dense@50"));
        /* save -> load round trip */
        free(swp.path);
        swp.path = vdn_xstrdup("/tmp/vdn_eval_test_sweep.json");
        CHECK(vdn_sweep_save(&swp, err, sizeof err) == 0);
        vdn_sweep back;
        CHECK(vdn_sweep_load("/tmp/vdn_eval_test_sweep.json", &back, err, sizeof err) == 0);
        if (back.n_pairs == 1) {
            CHECK(!strcmp(back.pairs[0].record_key, "a.json") && back.pairs[0].job_id == 17 &&
                  back.steps_override == 1);
            vdn_sweep_free(&back);
        }
        remove("/tmp/vdn_eval_test_sweep.json");
        vdn_sweep_free(&swp);
    } else {
        fprintf(stderr, "good sweep refused: %s\n", err);
        failures++;
    }
    expect_err(sweep_bad("{\"version\":2}", err), err, "sw.json", "'version'", __LINE__);
    expect_err(
        sweep_bad(SW_HEAD "\"baseline\":\"vdn@4\",\"variants\":[\"vdn@8\"],\"pairs\":[]}", err),
        err, "'baseline'", "not one of", __LINE__);
    expect_err(sweep_bad(SW_HEAD "\"baseline\":\"vdn@8\",\"variants\":[\"vdn@8\"],\"pairs\":[{"
                                 "\"prompt\":\"p\",\"variant\":\"dense@50\","
                                 "\"video_key\":\"a\",\"record_key\":\"b\"}]}",
                         err),
               err, "pairs[0]", "not in 'variants'", __LINE__);
    expect_err(sweep_bad(SW_HEAD "\"baseline\":\"vdn@8\",\"variants\":[\"vdn@8\"],\"pairs\":[{"
                                 "\"prompt\":\"p\",\"variant\":\"vdn@8\","
                                 "\"video_key\":\"../x\",\"record_key\":\"b\"}]}",
                         err),
               err, "pairs[0]", "'..'", __LINE__);
    expect_err(sweep_bad(SW_HEAD "\"baseline\":\"vdn@8\",\"variants\":[\"vdn@8\"],\"pairs\":[{"
                                 "\"prompt\":\"p\",\"variant\":\"vdn@8\","
                                 "\"video_key\":\"a\",\"record_key\":\"b\",\"job_id\":-1}]}",
                         err),
               err, "'job_id'", NULL, __LINE__);
    expect_err(
        sweep_bad(
            SW_HEAD
            "\"baseline\":\"vdn@8\",\"variants\":[\"vdn@8\"],\"steps_override\":0,\"pairs\":[]}",
            err),
        err, "'steps_override'", NULL, __LINE__);
    expect_err(sweep_bad(SW_HEAD "\"baseline\":\"vdn@8\",\"variants\":[],\"pairs\":[]}", err), err,
               "'variants'", NULL, __LINE__);
    expect_err(sweep_bad("{\"version\":1,\"store\":\"x\"}", err), err, "missing field 'suite'",
               NULL, __LINE__);
    /* ---- run-record timing ---- */
    double spn, tot;
    const char *rec =
        "{\"engine\":\"vdn\",\"timing\":{\"nfe_seconds\":[1.0,2.0,4.5],\"total_seconds\":9.25}}";
    CHECK(vdn_record_timing_parse(rec, strlen(rec), "r.json", &spn, &tot, err, sizeof err) == 0 &&
          spn == 2.5 && tot == 9.25);
#define REC_BAD(text, a, b)                                                                        \
    expect_err(vdn_record_timing_parse(text, strlen(text), "r.json", &spn, &tot, err, sizeof err), \
               err, a, b, __LINE__)
    REC_BAD("[]", "r.json", "not a JSON object");
    REC_BAD("{\"timing\":3}", "r.json", "'timing'");
    REC_BAD("{\"timing\":{\"nfe_seconds\":[],\"total_seconds\":1}}", "'timing.nfe_seconds'",
            "non-empty");
    REC_BAD("{\"timing\":{\"nfe_seconds\":[1,\"x\"],\"total_seconds\":1}}",
            "'timing.nfe_seconds[1]'", NULL);
    REC_BAD("{\"timing\":{\"nfe_seconds\":[1]}}", "'timing.total_seconds'", NULL);
    REC_BAD("{\"timing\":{\"nfe_seconds\":[1],\"total_seconds\":-2}}", "'timing.total_seconds'",
            ">= 0");
    if (failures) return 1;
    printf("eval configs: ok\n");
    return 0;
}
