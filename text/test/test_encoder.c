/* The text encoder (CPU backend, fp32) against hidden states computed by the public transformers
 * Qwen3-VL model on the same tiny random checkpoint (reference/make_expected_hidden.py, run on
 * the GPU machine; expected_hidden.safetensors), and its refusals.
 *
 *   test_encoder CKPT EXPECTED.safetensors [BACKEND [TOL]]
 *
 * CKPT comes from `vdn ckpt init --preset tiny --text-encoder` (the values are a fixed function of
 * the seed, so the file the reference read is rebuilt bit for bit). The ids come from the file
 * and are also checked against our tokenizer on the prompts in its metadata. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../ops/test/check.h"
#include "encoder.h"
#include "safetensors.h"
#include "tokenizer.h"
#include "vdn_util.h"

static double tol = 1e-4;
static vdn_text_encoder *cpu_twin; /* when the backend under test is not the CPU: the oracle */

/* max |got - want| relative to max |want| */
static double rel_err(const float *got, const float *want, size_t n) {
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)got[i] - want[i]));
        m = fmax(m, fabs((double)want[i]));
    }
    return m > 0 ? d / m : d;
}

static int32_t *ids_of(const vdn_st_entry *e) {
    int32_t *ids = vdn_xmalloc(sizeof(int32_t) * (size_t)e->numel);
    for (int64_t i = 0; i < e->numel; i++) {
        int64_t v;
        memcpy(&v, (const char *)e->data + 8 * i, 8);
        ids[i] = (int32_t)v;
    }
    return ids;
}

/* one expected tensor against the encoder at `layer` */
static void compare(vdn_text_encoder *enc, const vdn_st_file *f, const char *ids_name,
                    const char *want_name) {
    const vdn_st_entry *ei = vdn_st_find(f, ids_name), *ew = vdn_st_find(f, want_name);
    CHECK(ei && ew && ei->dtype == VDN_DT_I64 && ew->dtype == VDN_DT_F32, "%s / %s", ids_name,
          want_name);
    if (!ei || !ew) return;
    int n = (int)ei->numel;
    int64_t H = vdn_text_encoder_config(enc)->hidden;
    CHECK(ew->ndim == 2 && ew->shape[0] == n && ew->shape[1] == H, "%s shape", want_name);
    int32_t *ids = ids_of(ei);
    float *got = vdn_xmalloc(sizeof(float) * (size_t)(n * H));
    char err[VDN_ERR_LEN];
    int rc = vdn_text_encoder_run(enc, ids, n, got, err, sizeof err);
    CHECK(rc == 0, "%s: %s", want_name, err);
    if (rc == 0) {
        double e = rel_err(got, ew->data, (size_t)(n * H));
        printf("%-10s %4d tokens, layer %d: max error %.2e of max |h|\n", want_name, n,
               vdn_text_encoder_layer(enc), e);
        CHECK(e <= tol, "%s: error %.3e > %.1e", want_name, e, tol);
        float *ref = vdn_xmalloc(sizeof(float) * (size_t)(n * H));
        if (cpu_twin && vdn_text_encoder_layer(cpu_twin) == vdn_text_encoder_layer(enc) &&
            vdn_text_encoder_run(cpu_twin, ids, n, ref, err, sizeof err) == 0) {
            double ec = rel_err(got, ref, (size_t)(n * H));
            printf("%-10s against the CPU backend: max error %.2e of max |h|\n", want_name, ec);
            CHECK(ec <= tol, "%s: against CPU: error %.3e > %.1e", want_name, ec, tol);
        }
        free(ref);
    }
    free(ids);
    free(got);
}

/* the reference's ids are the ids our tokenizer gives for the same prompts */
static void same_ids(const char *ckpt, const vdn_st_file *f) {
    char path[4096], err[VDN_ERR_LEN];
    snprintf(path, sizeof path, "%s/tokenizer", ckpt);
    vdn_tokenizer *t = vdn_tokenizer_load(path, err, sizeof err);
    CHECK(t, "%s", err);
    cJSON *prompts = cJSON_Parse(vdn_st_meta(f, "prompts") ? vdn_st_meta(f, "prompts") : "");
    CHECK(cJSON_IsArray(prompts), "metadata 'prompts'");
    int k = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, prompts) {
        char name[32];
        snprintf(name, sizeof name, "ids_%d", k++);
        const vdn_st_entry *e = vdn_st_find(f, name);
        int32_t *ids;
        size_t n;
        if (!t || !e ||
            vdn_tokenize(t, p->valuestring, strlen(p->valuestring), &ids, &n, err, sizeof err)) {
            CHECK(0, "%s", name);
            continue;
        }
        int32_t *want = ids_of(e);
        CHECK((int64_t)n == e->numel && !memcmp(ids, want, n * sizeof *ids), "%s", name);
        free(want);
        free(ids);
    }
    cJSON_Delete(prompts);
    vdn_tokenizer_free(t);
}

static void refusals(vdn_text_encoder *enc) {
    const vdn_text_config *c = vdn_text_encoder_config(enc);
    int n = (int)c->max_positions + 1;
    int32_t *ids = vdn_xcalloc((size_t)n, sizeof *ids);
    float *out = vdn_xmalloc(sizeof(float) * (size_t)n * (size_t)c->hidden);
    char err[VDN_ERR_LEN] = "", limit[32];
    snprintf(limit, sizeof limit, "limit is %lld", (long long)c->max_positions);
    CHECK(vdn_text_encoder_run(enc, ids, n, out, err, sizeof err) && strstr(err, limit), "%s", err);
    ids[0] = (int32_t)c->vocab;
    CHECK(vdn_text_encoder_run(enc, ids, 1, out, err, sizeof err) && strstr(err, "vocabulary"),
          "%s", err);
    CHECK(vdn_text_encoder_run(enc, ids, 0, out, err, sizeof err) && strstr(err, "no tokens"), "%s",
          err);
    free(ids);
    free(out);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s CKPT EXPECTED.safetensors [BACKEND [TOL]]\n", argv[0]);
        return 2;
    }
    const char *backend = argc > 3 ? argv[3] : "cpu";
    if (argc > 4) tol = atof(argv[4]);
    char err[VDN_ERR_LEN], dir[4096];
    vdn_dev *dev = vdn_dev_open(backend, 0, 0, err, sizeof err);
    if (!dev) {
        if (strcmp(backend, "cpu")) {
            printf("SKIP: no %s device here: %s\n", backend, err);
            return 77;
        }
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    vdn_st_file *f = vdn_st_open(argv[2], err, sizeof err);
    CHECK(f, "%s", err);
    snprintf(dir, sizeof dir, "%s/text_encoder", argv[1]);
    vdn_text_encoder *enc = vdn_text_encoder_open(dir, dev, 0, err, sizeof err);
    CHECK(enc, "%s", err);
    vdn_dev *cpu = NULL;
    if (!vdn_dev_is_cpu(dev)) {
        cpu = vdn_dev_open("cpu", 0, 0, err, sizeof err);
        cpu_twin = cpu ? vdn_text_encoder_open(dir, cpu, 0, err, sizeof err) : NULL;
        CHECK(cpu_twin, "%s", err);
    }
    if (f && enc) {
        same_ids(argv[1], f);
        char ids[32], want[32];
        for (int k = 0; k < 64; k++) {
            snprintf(ids, sizeof ids, "ids_%d", k);
            snprintf(want, sizeof want, "hidden_%d", k);
            if (!vdn_st_find(f, ids)) break;
            compare(enc, f, ids, want);
        }
        refusals(enc);
        vdn_text_encoder *one = vdn_text_encoder_open(dir, dev, 1, err, sizeof err);
        CHECK(one, "%s", err);
        if (one) compare(one, f, "ids_0", "layer1_0");
        vdn_text_encoder_close(one);
        CHECK(!vdn_text_encoder_open(dir, dev, 99, err, sizeof err) && strstr(err, "layer 99"),
              "%s", err);
    }
    vdn_text_encoder_close(enc);
    vdn_text_encoder_close(cpu_twin);
    vdn_dev_close(cpu);
    vdn_st_close(f);
    vdn_dev_close(dev);
    return check_report("test_encoder");
}
