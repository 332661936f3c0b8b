/* JSONL request parsing: each kind of bad line is reported with its line number and field and
 * nothing is returned when any line is bad; official requests.jsonl fields are accepted; the
 * normalized JSON the coordinator stores parses back to the same request. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "spec.h"
#include "vdn_util.h"
#include "../../ops/test/check.h"

static char dir[64];
static char cache[128];

static int has(const vdn_errlist *e, const char *a, const char *b) {
    for (int i = 0; i < e->n; i++)
        if (strstr(e->lines[i], a) && (!b || strstr(e->lines[i], b))) return 1;
    return 0;
}

/* Each bad line alone in a file after a good one: the message names "f.jsonl:2" and the field. */
static void bad_line(const char *line, const char *field, const char *what) {
    char text[2048];
    snprintf(text, sizeof text, "{\"prompt_cache\": \"%s\"}\n%s\n", cache, line);
    vdn_job_spec *jobs = (vdn_job_spec *)1;
    int n = -1;
    vdn_errlist errs = {0};
    int rc = vdn_jsonl_parse(text, strlen(text), "f.jsonl", dir, 1, &jobs, &n, &errs);
    char where[64];
    snprintf(where, sizeof where, "f.jsonl:2: %s%s%s", field ? "field '" : "", field ? field : "",
             field ? "'" : "");
    int ok = rc == -1 && jobs == NULL && n == 0 && errs.n >= 1 && has(&errs, where, what);
    if (!ok) {
        fprintf(stderr, "line %s: expected '%s' ... '%s', got:\n", line, where, what);
        for (int i = 0; i < errs.n; i++)
            fprintf(stderr, "  %s\n", errs.lines[i]);
    }
    CHECK(ok);
    vdn_errlist_free(&errs);
}

static void test_bad_lines(void) {
    bad_line("{\"prompt_cache\": \"p.safetensors\"", NULL, "not valid JSON");
    bad_line("[1, 2]", NULL, "expected a JSON object");
    bad_line("42", NULL, "expected a JSON object");
    bad_line("{\"prompt_cache\": \"p.safetensors\"} trailing", NULL, "trailing text");
    bad_line("{\"steps\": 4}", "prompt_cache", "required");
    bad_line("{\"prompt_cache\": 5}", "prompt_cache", "non-empty string");
    bad_line("{\"prompt_cache\": \"\"}", "prompt_cache", "non-empty string");
    bad_line("{\"prompt_cache\": \"nope.safetensors\"}", "prompt_cache", "does not exist");
    bad_line("{\"prompt_cache\": \"p.safetensors\", \"prompt_file\": \"p.safetensors\"}",
             "prompt_file", "both given");
    bad_line("{\"prompt_cache\": \"p.safetensors\", \"steps\": -3}", "steps", "got -3");
    bad_line("{\"prompt_cache\": \"p.safetensors\", \"steps\": 2.5}", "steps", "integer");
    bad_line("{\"prompt_cache\": \"p.safetensors\", \"num_steps\": \"30\"}", "num_steps",
             "integer");
    bad_line("{\"prompt_cache\": \"p.safetensors\", \"frames\": 0}", "frames", "integer");
    bad_line("{\"prompt_cache\": \"p.safetensors\", \"num_frames\": 1e9}", "num_frames", "integer");
    bad_line("{\"prompt_cache\": \"p.safetensors\", \"height\": 100}", "height", "multiple of 32");
    bad_line("{\"prompt_cache\": \"p.safetensors\", \"width\": 16}", "width", "32..4096");
    /* absurd sizes the engine would spend minutes on before its first evaluation (issue 27) */
    bad_line("{\"prompt_cache\": \"p.safetensors\", \"frames\": 100000, \"height\": 32, "
             "\"width\": 32}",
             "frames", "1..2880");
    bad_line("{\"prompt_cache\": \"p.safetensors\", \"frames\": 22, \"height\": 8192, "
             "\"width\": 8192}",
             "height", "32..4096");
    /* 1000 frames (snapped to 1008) at 4096 x 4096: 1 text row + 297 latent frames x 128 x 128
     * patches + 2 x 1680 audio rows = 4869409 > 2^21 */
    bad_line("{\"prompt_cache\": \"p.safetensors\", \"frames\": 1000, \"height\": 4096, "
             "\"width\": 4096}",
             "frames", "4869409 sequence rows, above the engine's limit of 2097152");
    bad_line("{\"prompt_cache\": \"p.safetensors\", \"seed\": -1}", "seed", "non-negative");
    bad_line("{\"prompt_cache\": \"p.safetensors\", \"seed\": \"12x\"}", "seed", "non-negative");
    bad_line("{\"prompt_cache\": \"p.safetensors\", \"seed\": \"99999999999999999999999\"}", "seed",
             "non-negative");
    bad_line("{\"prompt_cache\": \"p.safetensors\", \"variant\": \"sparse\"}", "variant",
             "one of vdn, dense");
    bad_line("{\"prompt_cache\": \"p.safetensors\", \"video_shift\": 0}", "video_shift",
             "(0, 1000]");
    bad_line("{\"prompt_cache\": \"p.safetensors\", \"audio_shift\": \"3\"}", "audio_shift",
             "number");
    bad_line("{\"prompt_cache\": \"p.safetensors\", \"save_latents\": 1}", "save_latents",
             "true or false");
    bad_line("{\"prompt_cache\": \"p.safetensors\", \"out\": \"/abs/out\"}", "out", "relative");
    /* the DiT's precision: a name the engine knows, as a string */
    bad_line("{\"prompt_cache\": \"p.safetensors\", \"precision\": \"fp16\"}", "precision",
             "expected \"bf16\" or \"fp8\" (the DiT's precision), got \"fp16\"");
    bad_line("{\"prompt_cache\": \"p.safetensors\", \"precision\": \"FP8\"}", "precision",
             "got \"FP8\"");
    bad_line("{\"prompt_cache\": \"p.safetensors\", \"precision\": \"\"}", "precision",
             "expected \"bf16\" or \"fp8\"");
    bad_line("{\"prompt_cache\": \"p.safetensors\", \"precision\": 8}", "precision", "got 8");
    bad_line("{\"prompt_cache\": \"p.safetensors\", \"precision\": \"fp8\", \"precision\": "
             "\"fp8\"}",
             "precision", "given twice");
    bad_line("{\"prompt_cache\": \"p.safetensors\", \"out\": \"a/../../b\"}", "out", "relative");
    bad_line("{\"prompt_cache\": \"p.safetensors\", \"out\": \"a\", \"output_prefix\": \"b\"}",
             "output_prefix", "both given");
    bad_line("{\"prompt_cache\": \"p.safetensors\", \"gpus\": 0}", "gpus", "1..64");
    bad_line("{\"prompt_cache\": \"p.safetensors\", \"priority\": true}", "priority", "integer");
    bad_line("{\"prompt_cache\": \"p.safetensors\", \"stpes\": 4}", "stpes", "unknown field");
    bad_line("{\"prompt_cache\": \"p.safetensors\", \"steps\": 4, \"steps\": 5}", "steps", "twice");
    bad_line("{\"prompt_cache\": \"p.safetensors\", \"noise_file\": \"missing.st\"}", "noise_file",
             "does not exist");
    bad_line("{\"prompt\": \"x\", \"timeout\": 0}", "timeout", "1..604800");
    bad_line("{\"prompt\": \"x\", \"timeout\": \"1h\"}", "timeout", NULL);
}

/* Scoring jobs (eval's, request kind "score"): their work is a JSON object, they need no prompt,
 * and they survive the database's round trip (the request stored as JSON, parsed again). */
static void test_score_jobs(void) {
    bad_line("{\"kind\": \"score\"}", "score", "required with kind");
    bad_line("{\"kind\": \"score\", \"score\": \"x\"}", "score", "expected a JSON object");
    bad_line("{\"kind\": \"paint\", \"score\": {}}", "kind", "\"render\" or \"score\"");
    bad_line("{\"prompt_cache\": \"p.safetensors\", \"score\": {\"v\": 1}}", "score",
             "only with kind");
    const char *line = "{\"kind\": \"score\", \"score\": {\"v\": 1, \"mp4\": \"a/out.mp4\"}, "
                       "\"out\": \"eval/t/scores/p1/vdn_8\"}";
    vdn_job_spec *jobs, *again;
    int n, m;
    vdn_errlist errs = {0};
    CHECK(vdn_jsonl_parse(line, strlen(line), "s.jsonl", dir, 1, &jobs, &n, &errs) == 0 && n == 1);
    if (n != 1) return;
    CHECK(!strcmp(jobs[0].kind, "score") && !jobs[0].prompt && !jobs[0].prompt_cache);
    CHECK(strstr(jobs[0].score, "\"mp4\":\"a/out.mp4\"") != NULL, "%s", jobs[0].score);
    char *json = vdn_job_spec_to_json(&jobs[0]);
    CHECK(vdn_jsonl_parse(json, strlen(json), "jobs.request", NULL, 0, &again, &m, &errs) == 0 &&
              m == 1,
          "%s: %s", json, errs.n ? errs.lines[0] : "");
    if (m == 1) {
        CHECK(!strcmp(again[0].kind, "score") && !strcmp(again[0].score, jobs[0].score));
        CHECK(!again[0].prompt_cache, "a scoring job stored with a prompt_cache: %s", json);
        vdn_jobs_free(again, m);
    }
    free(json);
    vdn_jobs_free(jobs, n);
    vdn_errlist_free(&errs);
}

static void test_many_bad_lines_all_reported(void) {
    char text[2048];
    snprintf(text, sizeof text,
             "# comment line\n"
             "{\"prompt_cache\": \"%s\", \"steps\": 4}\n"
             "\n"
             "{\"prompt_cache\": \"%s\", \"steps\": 0}\n"
             "{\"prompt_file\": \"missing.safetensors\"}\n"
             "not json\n"
             "{\"prompt_cache\": \"%s\", \"out\": \"o\"}\r\n"
             "{\"prompt_cache\": \"%s\", \"out\": \"o\"}\n",
             cache, cache, cache, cache);
    vdn_job_spec *jobs;
    int n;
    vdn_errlist errs = {0};
    CHECK(vdn_jsonl_parse(text, strlen(text), "g.jsonl", dir, 1, &jobs, &n, &errs) == -1);
    CHECK(jobs == NULL && n == 0);
    CHECK(errs.n == 4);
    CHECK(has(&errs, "g.jsonl:4: field 'steps'", NULL));
    CHECK(has(&errs, "g.jsonl:5: field 'prompt_file'", "missing.safetensors"));
    CHECK(has(&errs, "g.jsonl:6:", "not valid JSON"));
    CHECK(has(&errs, "g.jsonl:8: field 'out'", "line 7"));
    vdn_errlist_free(&errs);
    CHECK(vdn_jsonl_parse("", 0, "e.jsonl", dir, 1, &jobs, &n, &errs) == -1 &&
          has(&errs, "e.jsonl", "no requests"));
    vdn_errlist_free(&errs);
    CHECK(vdn_jsonl_parse("{\"prompt_cache\":\"x\"}\n\0\n", 23, "z.jsonl", dir, 0, &jobs, &n,
                          &errs) == -1 &&
          has(&errs, "z.jsonl:2", "NUL"));
    vdn_errlist_free(&errs);
    /* a line over the limit is refused by its size, before it is parsed; the next still is */
    {
        size_t big = VDN_JSONL_MAX_LINE_BYTES + 1, len = 0;
        char *t = malloc(big + 64);
        len += (size_t)sprintf(t, "{\"prompt\": \"");
        memset(t + len, 'a', big);
        len += big;
        len += (size_t)sprintf(t + len, "\"}\n{\"steps\": 0, \"prompt\": \"x\"}\n");
        CHECK(vdn_jsonl_parse(t, len, "big.jsonl", dir, 0, &jobs, &n, &errs) == -1 &&
              has(&errs, "big.jsonl:1:", "above the limit of 1048576") &&
              has(&errs, "big.jsonl:2: field 'steps'", NULL));
        vdn_errlist_free(&errs);
        free(t);
    }
    CHECK(vdn_jsonl_parse_file("/nonexistent/r.jsonl", 1, &jobs, &n, &errs) == -1 &&
          has(&errs, "/nonexistent/r.jsonl", NULL));
    vdn_errlist_free(&errs);
}

static void test_official_fields(void) {
    char path[160], text[1024];
    snprintf(path, sizeof path, "%s/requests.jsonl", dir);
    snprintf(text, sizeof text,
             "{\"prompt_file\": \"p.safetensors\", \"out\": \"runs/cat\", \"num_frames\": 121, "
             "\"num_steps\": 30, \"seed\": 42, \"video_shift\": 12.0, \"audio_shift\": 3.0, "
             "\"save_latents\": true, \"latents_root\": \"lat\", \"record\": false}\n"
             "{\"prompt_cache\": \"s3://bucket/p.safetensors\", \"frames\": 22, \"height\": 64, "
             "\"width\": 96, \"steps\": 4, \"seed\": \"18446744073709551615\", \"variant\": "
             "\"dense\", \"checkpoint\": \"tiny\", \"priority\": -2, \"tag\": \"t\", \"gpus\": 2, "
             "\"min_gpu_memory\": 1000, \"precision\": \"fp8\"}\n"
             "{\"prompt_cache\": \"s3://b/q.safetensors\", \"precision\": \"bf16\"}\n");
    char err[VDN_ERR_LEN];
    CHECK(vdn_write_file_atomic(path, text, strlen(text), err, sizeof err) == 0);
    vdn_job_spec *jobs;
    int n;
    vdn_errlist errs = {0};
    int rc = vdn_jsonl_parse_file(path, 1, &jobs, &n, &errs);
    for (int i = 0; i < errs.n; i++)
        fprintf(stderr, "%s\n", errs.lines[i]);
    CHECK(rc == 0 && n == 3);
    if (rc) return;
    CHECK(jobs[0].precision == NULL && !strcmp(jobs[1].precision, "fp8") &&
          !strcmp(jobs[2].precision, "bf16"));
    CHECK(!strcmp(jobs[0].prompt_cache, cache)); /* resolved against the file's folder */
    CHECK(jobs[0].frames == 121 && jobs[0].steps == 30 && jobs[0].seed == 42 && jobs[0].has_seed);
    CHECK(jobs[0].video_shift == 12.0f && jobs[0].audio_shift == 3.0f && jobs[0].save_latents &&
          !jobs[0].record && !strcmp(jobs[0].latents_root, "lat") &&
          !strcmp(jobs[0].output_prefix, "runs/cat") && jobs[0].line_no == 1);
    CHECK(!strcmp(jobs[1].prompt_cache, "s3://bucket/p.safetensors")); /* URIs are not checked */
    CHECK(jobs[1].seed == UINT64_MAX && !strcmp(jobs[1].variant, "dense") &&
          jobs[1].priority == -2 && jobs[1].has_priority && jobs[1].gpus == 2 &&
          jobs[1].min_gpu_memory == 1000 && jobs[1].height == 64 && jobs[1].width == 96);
    /* normalized JSON -> parse -> same spec; spec -> proto -> spec the same */
    for (int i = 0; i < n; i++) {
        char *json = vdn_job_spec_to_json(&jobs[i]);
        vdn_job_spec *back;
        int m;
        CHECK(vdn_jsonl_parse(json, strlen(json), "stored", NULL, 0, &back, &m, &errs) == 0 &&
              m == 1);
        if (m == 1) {
            CHECK(!strcmp(back[0].prompt_cache, jobs[i].prompt_cache) &&
                  back[0].frames == jobs[i].frames && back[0].steps == jobs[i].steps &&
                  back[0].seed == jobs[i].seed && back[0].has_seed == jobs[i].has_seed &&
                  back[0].gpus == jobs[i].gpus && back[0].priority == jobs[i].priority &&
                  back[0].video_shift == jobs[i].video_shift &&
                  back[0].save_latents == jobs[i].save_latents &&
                  (back[0].precision == NULL) == (jobs[i].precision == NULL) &&
                  (!back[0].precision || !strcmp(back[0].precision, jobs[i].precision)));
            vdn_jobs_free(back, m);
        }
        free(json);
        Vdn__RenderRequest r;
        vdn_job_spec_to_proto(&jobs[i], &r);
        vdn_job_spec s2;
        vdn_job_spec_from_proto(&r, &s2);
        CHECK(s2.seed == jobs[i].seed && s2.frames == jobs[i].frames &&
              (!jobs[i].prompt_cache || !strcmp(s2.prompt_cache, jobs[i].prompt_cache)) &&
              (jobs[i].variant == NULL) == (s2.variant == NULL));
        /* the precision crosses the wire as written (RenderRequest.precision) */
        CHECK((s2.precision == NULL) == (jobs[i].precision == NULL) &&
              (!s2.precision || !strcmp(s2.precision, jobs[i].precision)));
        vdn_errlist v = {0};
        CHECK(vdn_job_spec_validate(&s2, &v, "x") == 0);
        vdn_errlist_free(&v);
        vdn_job_spec_free(&s2);
    }
    vdn_jobs_free(jobs, n);
}

static void test_wire_validation(void) {
    /* what arrives over the wire is checked again: negative/NaN values and bad variants */
    Vdn__RenderRequest r = VDN__RENDER_REQUEST__INIT;
    r.prompt_cache = "/p";
    r.has_steps = r.has_height = r.has_video_shift = 1;
    r.steps = -4;
    r.height = 33;
    r.video_shift = NAN;
    r.variant = "nope";
    r.precision = "int4";
    vdn_job_spec s;
    vdn_job_spec_from_proto(&r, &s);
    vdn_errlist e = {0};
    CHECK(vdn_job_spec_validate(&s, &e, "job 3") == -1);
    CHECK(has(&e, "job 3: field 'steps'", NULL) && has(&e, "job 3: field 'height'", "got 33") &&
          has(&e, "field 'video_shift'", NULL) && has(&e, "field 'variant'", "nope") &&
          has(&e, "job 3: field 'precision'", "expected \"bf16\" or \"fp8\", got \"int4\""));
    vdn_errlist_free(&e);
    vdn_job_spec_free(&s);
    char kind;
    uint64_t id;
    char err[VDN_ERR_LEN];
    CHECK(vdn_parse_target("b12", &kind, &id, err, sizeof err) == 0 && kind == 'b' && id == 12);
    CHECK(vdn_parse_target("J7", &kind, &id, err, sizeof err) == 0 && kind == 'j' && id == 7);
    CHECK(vdn_parse_target("12", &kind, &id, err, sizeof err) == -1 && strstr(err, "ambiguous"));
    CHECK(vdn_parse_target("b", &kind, &id, err, sizeof err) == -1);
    CHECK(vdn_parse_target("b0", &kind, &id, err, sizeof err) == -1);
    CHECK(vdn_parse_target("x5", &kind, &id, err, sizeof err) == -1);
    CHECK(vdn_parse_target("b99999999999999999999999", &kind, &id, err, sizeof err) == -1);
}

static void test_conf(void) {
    char path[160], text[512], err[VDN_ERR_LEN];
    snprintf(path, sizeof path, "%s/vdn.conf", dir);
    snprintf(text, sizeof text,
             "# written by vdn up\nclient_endpoint = tcp://127.0.0.1:7001\n"
             "worker_endpoint=tcp://127.0.0.1:7000\n db = state/vdn.db \nstore = file:///x\n"
             "other_key = ignored\n");
    CHECK(vdn_write_file_atomic(path, text, strlen(text), err, sizeof err) == 0);
    vdn_client_conf conf;
    vdn_client_opts o;
    CHECK(vdn_client_conf_read(path, &conf, err, sizeof err) == 0);
    char expect_db[200];
    snprintf(expect_db, sizeof expect_db, "%s/state/vdn.db", dir);
    CHECK(!strcmp(conf.client_endpoint, "tcp://127.0.0.1:7001") && !strcmp(conf.db, expect_db) &&
          !strcmp(conf.store, "file:///x"));
    CHECK(vdn_client_resolve(NULL, dir, NULL, NULL, NULL, &conf, &o, err, sizeof err) == 0 &&
          !strcmp(o.endpoint, "tcp://127.0.0.1:7001"));
    CHECK(vdn_client_resolve("tcp://127.0.0.1:9", dir, NULL, NULL, NULL, &conf, &o, err,
                             sizeof err) == 0 &&
          !strcmp(o.endpoint, "tcp://127.0.0.1:9"));
    const vdn_client_env env = {.coordinator = "tcp://127.0.0.1:8"}; /* $VDN_COORDINATOR */
    CHECK(vdn_client_resolve(NULL, NULL, NULL, NULL, &env, &conf, &o, err, sizeof err) == 0 &&
          !strcmp(o.endpoint, "tcp://127.0.0.1:8") &&
          !strcmp(o.endpoint_source, "$VDN_COORDINATOR"));
    const vdn_client_env env_dir = {.coordinator = "tcp://127.0.0.1:8", .dir = dir};
    CHECK(vdn_client_resolve(NULL, NULL, NULL, NULL, &env_dir, &conf, &o, err, sizeof err) == 0 &&
          !strcmp(o.endpoint, "tcp://127.0.0.1:8"));
    const vdn_client_env only_dir = {.dir = dir}; /* $VDN_DIR */
    CHECK(vdn_client_resolve(NULL, NULL, NULL, NULL, &only_dir, &conf, &o, err, sizeof err) == 0 &&
          !strcmp(o.endpoint, "tcp://127.0.0.1:7001"));
    CHECK(vdn_client_resolve(NULL, NULL, NULL, NULL, NULL, &conf, &o, err, sizeof err) == 0 &&
          !strcmp(o.endpoint, "tcp://127.0.0.1:5556"));
    CHECK(vdn_client_resolve(NULL, NULL, "me.key", NULL, NULL, &conf, &o, err, sizeof err) == -1 &&
          strstr(err, "coordinator-key"));
    const vdn_client_env keys = {.key = "me.key"}; /* $VDN_KEY without $VDN_COORDINATOR_KEY */
    CHECK(vdn_client_resolve(NULL, NULL, NULL, NULL, &keys, &conf, &o, err, sizeof err) == -1 &&
          strstr(err, "me.key"));
    snprintf(text, sizeof text, "client_endpoint tcp://x\n");
    CHECK(vdn_write_file_atomic(path, text, strlen(text), err, sizeof err) == 0);
    CHECK(vdn_client_conf_read(path, &conf, err, sizeof err) == -1 && strstr(err, "vdn.conf:1") &&
          strstr(err, "key = value"));
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/vdn_jsonl_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    snprintf(cache, sizeof cache, "%s/p.safetensors", dir);
    char err[VDN_ERR_LEN];
    if (vdn_write_file_atomic(cache, "x", 1, err, sizeof err)) return 1;
    test_bad_lines();
    test_score_jobs();
    test_many_bad_lines_all_reported();
    test_official_fields();
    test_wire_validation();
    test_conf();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) {
    }
    return check_report("jsonl");
}
