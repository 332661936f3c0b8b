/* Sizes by cost (coordinator/cost.h): a request's estimated seconds on a worker kind against the
 * figures docs/PERF.md measured on the H200 (worked out here from those figures, not from the
 * code), the memory estimate at each DiT precision, the --job-rate parser, and the submit checks
 * on a database with one registered worker: an over-cap request refused with the field, the
 * estimate and the cap; one under the caps accepted. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../ops/test/check.h"
#include "cost.h"
#include "db.h"
#include "memfit.h"
#include "precision.h"
#include "seq.h"
#include "vdn_util.h"

static const double gib = 1073741824.0;

static vdn_job_spec spec(int frames, int h, int w, int steps, const char *prec) {
    vdn_job_spec s;
    memset(&s, 0, sizeof s);
    s.prompt_cache = "s3://b/p.safetensors";
    s.frames = frames, s.height = h, s.width = w, s.steps = steps;
    s.precision = (char *)prec;
    return s;
}

/* the fewest rows: 2 x 2 patches of 16 x 16 latents, one text row, both audio channels */
static double rows_of(int frames, int h, int w) {
    return 1.0 + (double)vdn_latent_frames(frames) * (h / 32) * (w / 32) +
           2.0 * vdn_audio_latents(frames);
}

static void test_times(void) {
    cost_caps c;
    cost_caps_default(&c);
    cost_kind k[4];
    int n = cost_kind_add(&c, k, 0, "cuda", "NVIDIA H200", VDN_PRECISION_BF16);
    n = cost_kind_add(&c, k, n, "cuda", "NVIDIA H200", VDN_PRECISION_FP8);
    n = cost_kind_add(&c, k, n, "cuda", "NVIDIA H200", VDN_PRECISION_FP8); /* a second worker */
    n = cost_kind_add(&c, k, n, "cpu", "NVIDIA H200", VDN_PRECISION_BF16); /* stand-in GPUs */
    CHECK(n == 3 && k[1].workers == 2 && k[2].cpu && !k[0].assumed_rate, "%d kinds", n);
    char name[100];
    cost_kind_name(&k[1], name, sizeof name);
    CHECK(!strcmp(name, "NVIDIA H200 fp8"), "%s", name);
    /* the H3 workload, 50 steps: 50 x 13.82 s (bf16) or 11.55 s (fp8) a model evaluation at
     * 103,903 rows, scaled by this request's rows, + the 14.4 s clip's decode, 10.1 s */
    vdn_job_spec s = spec(345, 768, 1344, 50, NULL);
    const double R = rows_of(345, 768, 1344);
    cost_time t;
    cost_time_of(&s, &k[0], &t);
    double want = 50 * 13.82 * R / 103903 + 10.1;
    CHECK(fabs(t.seconds - want) < 1e-6 * want && t.rows == (long long)R, "%g s, want %g",
          t.seconds, want);
    cost_time_of(&s, &k[1], &t);
    want = 50 * 11.55 * R / 103903 + 10.1;
    CHECK(fabs(t.seconds - want) < 1e-6 * want, "fp8: %g s, want %g", t.seconds, want);
    /* dense: the VDN time plus dense's extra (33.36 - 13.82 s at the workload) x rows^2 */
    s.variant = "dense";
    s.frames = 2000;
    const double R2 = rows_of(2000, 768, 1344), x = R2 / 103903;
    cost_time_of(&s, &k[0], &t);
    want = 50 * (13.82 * x + (33.36 - 13.82) * x * x) + 10.1 * 2000 / 345;
    CHECK(fabs(t.seconds - want) < 1e-6 * want, "dense: %g s, want %g", t.seconds, want);
    /* two GPUs: the render at 80% of twice the speed, the decode split */
    s.variant = NULL, s.gpus = 2;
    cost_time_of(&s, &k[0], &t);
    want = 50 * 13.82 * x / 1.6 + 10.1 * 2000 / 345 / 2;
    CHECK(fabs(t.seconds - want) < 1e-6 * want, "2 GPUs: %g s, want %g", t.seconds, want);
    /* a text prompt: bytes / 4 tokens replace the one text row, and its encode is counted */
    s = spec(345, 768, 1344, 8, NULL);
    s.prompt_cache = NULL, s.prompt = "0123456789abcdef0123456789abcdef0123456789"; /* 42 bytes */
    cost_time_of(&s, &k[0], &t);
    CHECK(t.text_tokens == 11 && t.rows == (long long)R - 1 + 11 &&
              fabs(t.text - 0.047 * 11 / 512) < 1e-9,
          "%d tokens, %lld rows, text %g s", t.text_tokens, t.rows, t.text);
    /* no steps: no estimate */
    s.steps = 0;
    cost_time_of(&s, &k[0], &t);
    CHECK(t.seconds < 0);
    char d[32];
    cost_duration(32760, d, sizeof d);
    CHECK(!strcmp(d, "9.1 h"), "%s", d);
}

/* fp8 keeps a byte a weight and a 4-byte scale an output row: the H3 blocks' weights at fp8
 * are about half of bf16's, and so is the memory estimate's weight term */
static void test_memory_precision(void) {
    const double hid = 5376, C = 56 * 128, ffn = 14336, L = 50;
    const double w = L * (4 * hid * C + 3 * hid * ffn), rows = L * (3 * C + 2 * hid + 2 * ffn);
    vdn_job_spec s = spec(345, 768, 1344, 8, NULL);
    coord_mem_need b, f;
    coord_mem_need_of(&s, &b);
    s.precision = "fp8";
    coord_mem_need_of(&s, &f);
    CHECK(b.weights == 2 * w && !strcmp(b.precision, "bf16"), "bf16 weights %g", b.weights);
    CHECK(f.weights == w + 4 * rows && !strcmp(f.precision, "fp8"), "fp8 weights %g", f.weights);
    CHECK(f.activations == b.activations && f.ffn == b.ffn, "activations stay bf16");
    CHECK(fabs(b.weights / gib - 35.9) < 0.05 && fabs(f.weights / gib - 18.0) < 0.05,
          "%.2f / %.2f GiB", b.weights / gib, f.weights / gib);
}

static void test_rate_parse(void) {
    cost_caps c;
    cost_caps_default(&c);
    char err[VDN_ERR_LEN];
    CHECK(cost_rate_parse(&c, "H100/fp8=23.1", err, sizeof err) == 0, "%s", err);
    CHECK(c.nrates == 3 && !strcmp(c.rates[2].match, "H100") && c.rates[2].vdn[1] == 23.1 &&
              c.rates[2].vdn[0] == 13.82 && fabs(c.rates[2].dense[1] - 31.50 * 23.1 / 11.55) < 1e-9,
          "%d rows", c.nrates);
    CHECK(cost_rate_parse(&c, "cpu=100", err, sizeof err) == 0 && c.rates[1].vdn[0] == 100 &&
          c.rates[1].vdn[1] == 100);
    const char *bad[] = {"H100", "=3", "H100=", "H100=-1", "H100/fp4=3", "H100=3x"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(cost_rate_parse(&c, bad[i], err, sizeof err) != 0 && strstr(err, "--job-rate"),
              "'%s' accepted", bad[i]);
    cost_kind k[1];
    cost_kind_add(&c, k, 0, "cuda", "NVIDIA H100 80GB HBM3", VDN_PRECISION_FP8);
    CHECK(k[0].rate == &c.rates[2] && !k[0].assumed_rate);
    cost_kind_add(&c, k, 0, "cuda", "NVIDIA B200", VDN_PRECISION_FP8);
    CHECK(k[0].rate == &c.rates[0] && k[0].assumed_rate);
}

/* The checks at submit, against a database with one registered H200 worker (bf16 and fp8, 141
 * GiB of which its engine keeps 40 loaded) */
static void test_check(const char *dir) {
    char path[512], err[VDN_ERR_LEN];
    snprintf(path, sizeof path, "%s/cost.db", dir);
    sqlite3 *db = cdb_open(path, 0, err, sizeof err);
    CHECK(db, "%s", err);
    if (!db) return;
    CHECK(cdb_run(db, err, sizeof err,
                  "INSERT INTO workers(id,state,gpus,checkpoint,backend,first_seen,last_seen,"
                  "precisions) VALUES('h200','idle',?,'VDN-H3','cuda',0,0,'bf16,fp8')",
                  "s",
                  "[{\"index\":0,\"name\":\"NVIDIA H200\",\"memory\":151397597184,"
                  "\"resident\":42949672960}]") == 0,
          "%s", err);
    cost_caps c;
    cost_caps_default(&c);
    c.max_job_seconds = 3600, c.max_job_memory = 100 * gib;
    vdn_errlist e = {0};
    /* under both caps: the workload's clip at fp8, 8 steps (~102 s, 31 GiB) */
    vdn_job_spec ok = spec(345, 768, 1344, 8, "fp8");
    cost_check(db, &ok, &c, &e, "job 1 of the batch");
    CHECK(e.n == 0, "%s", e.n ? e.lines[0] : "");
    /* 2000 frames x 60 steps at fp8: 60 x 11.55 s x R / 103,903 + the decode = 68 min > 1 h */
    vdn_job_spec slow = spec(2000, 768, 1344, 60, "fp8");
    cost_check(db, &slow, &c, &e, "job 2 of the batch");
    const double R = rows_of(2000, 768, 1344);
    char want[300];
    snprintf(want, sizeof want,
             "job 2 of the batch: field 'frames': 2000 x 768 x 1344 x 60 steps is an estimated "
             "%.1f min on NVIDIA H200 fp8 (the fastest registered worker kind",
             (60 * 11.55 * R / 103903 + 10.1 * 2000 / 345) / 60);
    CHECK(e.n == 1 && strstr(e.lines[0], want) &&
              strstr(e.lines[0], "over this coordinator's --max-job-seconds 3600"),
          "wanted '%s' in: %s", want, e.n ? e.lines[0] : "(none)");
    vdn_errlist_free(&e);
    /* memory: 2000 frames need 35.9 GiB of bf16 weights + 66.5 GiB of activations + 1.3 > 100
     * GiB; at fp8 18.0 GiB of weights: under the cap (1 step: no time cap in the way) */
    vdn_job_spec big = spec(2000, 768, 1344, 1, NULL);
    cost_check(db, &big, &c, &e, "job 3 of the batch");
    const double need = 2.0 * 50 * (4.0 * 5376 * 7168 + 3.0 * 5376 * 14336) +
                        R * 2 * (3 * 5376 + 6 * 56 * 128) + 2.0 * 16384 * 3 * 14336;
    snprintf(want, sizeof want,
             "job 3 of the batch: field 'frames': 2000 frames x 768 x 1344 need at least %.1f GiB "
             "of GPU memory (the H3 DiT's bf16 weights",
             need / gib);
    CHECK(e.n == 1 && strstr(e.lines[0], want) && strstr(e.lines[0], "--max-job-memory 100.0 GiB"),
          "wanted '%s' in: %s", want, e.n ? e.lines[0] : "(none)");
    vdn_errlist_free(&e);
    big.precision = "fp8";
    cost_check(db, &big, &c, &e, "job 4 of the batch");
    CHECK(e.n == 0, "fp8 fits: %s", e.n ? e.lines[0] : "");
    vdn_errlist_free(&e);
    /* caps off: nothing checked but the GPU's room */
    c.max_job_seconds = 0, c.max_job_memory = 0;
    cost_check(db, &slow, &c, &e, "job 5 of the batch");
    CHECK(e.n == 0, "%s", e.n ? e.lines[0] : "");
    vdn_errlist_free(&e);
    sqlite3_close(db);
}

int main(void) {
    char dir[] = "/tmp/vdn-test-cost-XXXXXX";
    if (!mkdtemp(dir)) return 2;
    test_times();
    test_memory_precision();
    test_rate_parse();
    test_check(dir);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    return check_report("coordinator_cost");
}
