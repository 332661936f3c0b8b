/* The text encoder (CPU backend, fp32) against hidden states computed by the public transformers
 * Qwen3-VL model on the same tiny random checkpoint (reference/make_expected_hidden.py, run on
 * the GPU machine; expected_hidden.safetensors), and its refusals. With PRECISION fp8: the fp8
 * encoder instead (fp8_checks below: its error bounds, its memory, its quantised weights).
 *
 *   test_encoder CKPT EXPECTED.safetensors [BACKEND [TOL [PRECISION]]]
 *
 * CKPT comes from `vdn ckpt init --preset tiny --text-encoder` (the values are a fixed function of
 * the seed, so the file the reference read is rebuilt bit for bit). The ids come from the file
 * and are also checked against our tokenizer on the prompts in its metadata. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../ops/test/check.h"
#include "backends.h"
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

/* ---- fp8 precision ---- */

/* ||got - want|| / ||want|| over all elements (the Frobenius norm: the statistic the bound
 * below is argued in) */
static double rel_l2(const float *got, const float *want, size_t n) {
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)got[i] - want[i];
        d += e * e;
        m += (double)want[i] * want[i];
    }
    return m > 0 ? sqrt(d / m) : sqrt(d);
}

/* The bounds of the fp8 encoder against the unquantised one (relative L2 of hidden_states),
 * from e4m3's precision.
 *
 * e4m3 keeps 3 mantissa bits and rounds to nearest: a value moves by at most half a step, which
 * is between 2^-5 and 2^-4 of its magnitude depending on where in its binade it lies, so a
 * quantised operand's RMS relative error lies between 2^-5/sqrt(3) = 1.8e-2 and 2^-4/sqrt(3) =
 * 3.6e-2 (an error spread evenly over the half step). A product quantises both operands with
 * independent errors: its output is off by sqrt(2) times that, 2.6e-2 .. 5.1e-2 (engine_fp8
 * checks one product against float64). A decoder layer adds two branches to the residual
 * stream, each two quantised products in series (q/k/v then o_proj; gate/up then down_proj), so
 * a branch is off by at most sqrt(2) x 5.1e-2 = 7.2e-2 relative. The next layer's branches also
 * see the stream's error; independent errors add in square, so after L layers the stream is off
 * by at most sqrt(L) x 7.2e-2: FP8_HI(L). The tiny checkpoint's 3 layers give 1.25e-1 (measured
 * 6.3e-2 .. 7.8e-2) and its first layer alone 7.2e-2 (measured 4.2e-2): its random weights make
 * every branch as large as the stream, the worst case for this argument. A lost or swapped scale,
 * a wrong row or a product of the raw e4m3 codes gives O(1).
 *
 * FP8_LO: a path that skipped the quantisation gives the fp32 encoder's output, 0 against it and
 * 6e-7 against transformers (text_encoder_vs_transformers), while each product of the first layer
 * alone is off by at least 2.6e-2 (above), diluted in the stream only by the exact embedding rows.
 * 1e-2 sits between the two. Skipping one weight of the many stays inside both bounds: the
 * memory and count checks (memory_checks) are what catch that. */
#define FP8_LO 1e-2
#define FP8_HI(layers) (7.2e-2 * sqrt((double)(layers)))

/* Bytes an encoder of `layers` layers holds on a device whose float weights take wsz bytes:
 * norms and inv_freq always; the four Linears as e4m3 (1 byte) + one F32 scale a row when fp8,
 * else wsz a value. *largest: the biggest float Linear's bytes (the most a layer-by-layer load
 * may hold beside the fp8 ones). Written from the config alone. */
static size_t encoder_bytes(const vdn_text_config *c, int layers, size_t wsz, int fp8,
                            size_t *largest) {
    int64_t H = c->hidden, hd = c->head_dim, qd = c->heads * hd, kd = c->kv_heads * hd;
    int64_t I = c->intermediate;
    int64_t rows[4] = {qd + 2 * kd, H, 2 * I, H}, cols[4] = {H, qd, H, I};
    size_t per = wsz * (size_t)(2 * H + 2 * hd); /* input/post norms, q/k norms */
    *largest = 0;
    for (int i = 0; i < 4; i++) {
        size_t n = (size_t)(rows[i] * cols[i]);
        per += fp8 ? n + 4 * (size_t)rows[i] : wsz * n;
        if (wsz * n > *largest) *largest = wsz * n;
    }
    return (size_t)layers * per + 4 * (size_t)(hd / 2);
}

/* The memory an encoder of dir takes on a fresh device of `backend`: what it holds after the
 * open (exactly the config's arithmetic) and its peak while loading (at fp8, never more than one
 * float Linear beside the fp8 ones: the layer-by-layer quantisation). */
static void memory_checks(const char *dir, const char *backend, vdn_precision prec) {
    char err[VDN_ERR_LEN];
    vdn_dev *d = vdn_dev_open(backend, 0, 0, err, sizeof err);
    CHECK(d, "%s", err);
    if (!d) return;
    size_t in0, peak0, in1, peak1, largest;
    vdn_dev_memory(d, &in0, &peak0);
    vdn_text_encoder *e = vdn_text_encoder_open(dir, d, 0, prec, err, sizeof err);
    CHECK(e, "%s", err);
    if (e) {
        vdn_dev_memory(d, &in1, &peak1);
        size_t wsz = vdn_dev_is_cpu(d) ? 4 : 2;
        int fp8 = prec == VDN_PRECISION_FP8;
        size_t want = encoder_bytes(vdn_text_encoder_config(e), vdn_text_encoder_layer(e), wsz, fp8,
                                    &largest);
        printf("%s encoder on %s: %zu bytes held (expected %zu), load peak %zu\n",
               vdn_precision_name(prec), vdn_dev_name(d), in1 - in0, want, peak1 - in0);
        CHECK(in1 - in0 == want, "%s: the encoder holds %zu bytes, its config says %zu",
              vdn_precision_name(prec), in1 - in0, want);
        if (fp8)
            CHECK(peak1 - in0 <= want + largest,
                  "fp8 load peaked at %zu bytes: more than the fp8 encoder (%zu) and one float "
                  "Linear (%zu) together",
                  peak1 - in0, want, largest);
        CHECK(vdn_text_encoder_fp8_linears(e) == (fp8 ? 4 * vdn_text_encoder_layer(e) : 0),
              "%d Linears in fp8 over %d layers", vdn_text_encoder_fp8_linears(e),
              vdn_text_encoder_layer(e));
    }
    vdn_text_encoder_close(e);
    vdn_dev_close(d);
}

/* One expected tensor: the fp8 encoder against transformers' fp32 values and against our fp32
 * oracle (ref, on the CPU) within FP8_LO..FP8_HI; on a GPU also against the CPU's fp8 oracle
 * (twin) closer than the oracle is to fp32; on the CPU repeated runs give the same bits. */
static void compare_fp8(vdn_text_encoder *enc, vdn_text_encoder *ref, vdn_text_encoder *twin,
                        const vdn_st_file *f, const char *ids_name, const char *want_name) {
    const vdn_st_entry *ei = vdn_st_find(f, ids_name), *ew = vdn_st_find(f, want_name);
    CHECK(ei && ew && ew->dtype == VDN_DT_F32, "%s / %s", ids_name, want_name);
    if (!ei || !ew) return;
    int n = (int)ei->numel;
    size_t m = (size_t)n * (size_t)vdn_text_encoder_config(enc)->hidden;
    int32_t *ids = ids_of(ei);
    float *got = vdn_xmalloc(sizeof(float) * m), *again = vdn_xmalloc(sizeof(float) * m);
    float *r32 = vdn_xmalloc(sizeof(float) * m), *r8 = vdn_xmalloc(sizeof(float) * m);
    char err[VDN_ERR_LEN];
    int rc = vdn_text_encoder_run(enc, ids, n, got, err, sizeof err) ||
             vdn_text_encoder_run(enc, ids, n, again, err, sizeof err) ||
             vdn_text_encoder_run(ref, ids, n, r32, err, sizeof err) ||
             (twin && vdn_text_encoder_run(twin, ids, n, r8, err, sizeof err));
    CHECK(rc == 0, "%s: %s", want_name, err);
    if (rc == 0) {
        double et = rel_l2(got, ew->data, m), eo = rel_l2(got, r32, m);
        double eref = rel_l2(r32, ew->data, m);
        printf(
            "%-10s %4d tokens, layer %d, fp8: %.2e of ||h|| from transformers (max %.2e of "
            "max |h|), %.2e from our fp32 (which is %.1e from transformers); bounds %.0e..%.2e\n",
            want_name, n, vdn_text_encoder_layer(enc), et, rel_err(got, ew->data, m), eo, eref,
            FP8_LO, FP8_HI(vdn_text_encoder_layer(enc)));
        const double hi = FP8_HI(vdn_text_encoder_layer(enc));
        CHECK(et > FP8_LO && et < hi, "%s: fp8 %.3e from transformers, outside %.1e..%.2e",
              want_name, et, FP8_LO, hi);
        CHECK(eo > FP8_LO && eo < hi, "%s: fp8 %.3e from the fp32 encoder, outside %.1e..%.2e",
              want_name, eo, FP8_LO, hi);
        /* the oracle is deterministic (a GPU's reductions need not be) */
        CHECK(twin || !memcmp(got, again, sizeof(float) * m), "%s: two fp8 runs differ", want_name);
        if (twin) {
            /* The GPU and the oracle quantise the same weights to the same codes; they part only
             * where a bf16 activation rounds to another e4m3 code than its fp32 twin, a subset
             * of the roundings that separate fp8 from fp32. So the two fp8 results are closer
             * to each other than the oracle is to fp32. (Per element that is not so: one flipped
             * code is a whole e4m3 step, 5-7% of max |h| on the H200, 2026-11-26.) */
            double el = rel_l2(got, r8, m), e8 = rel_l2(r8, r32, m), ec = rel_err(got, r8, m);
            printf("%-10s against the CPU's fp8 oracle: %.2e of ||h|| (the oracle is %.2e from "
                   "fp32); max error %.2e of max |h|\n",
                   want_name, el, e8, ec);
            CHECK(el < e8, "%s: against the CPU fp8 oracle: %.3e, not under fp8's own %.3e",
                  want_name, el, e8);
        }
    }
    free(ids), free(got), free(again), free(r32), free(r8);
}

static void fp8_checks(const char *dir, vdn_dev *dev, const vdn_st_file *f) {
    char err[VDN_ERR_LEN];
    memory_checks(dir, vdn_dev_is_cpu(dev) ? "cpu" : "cuda", VDN_PRECISION_BF16);
    memory_checks(dir, vdn_dev_is_cpu(dev) ? "cpu" : "cuda", VDN_PRECISION_FP8);
    vdn_dev *cpu = vdn_dev_is_cpu(dev) ? dev : vdn_dev_open("cpu", 0, 0, err, sizeof err);
    CHECK(cpu, "%s", err);
    if (!cpu) return;
    vdn_text_encoder *enc = vdn_text_encoder_open(dir, dev, 0, VDN_PRECISION_FP8, err, sizeof err);
    CHECK(enc, "%s", err);
    vdn_text_encoder *ref = vdn_text_encoder_open(dir, cpu, 0, VDN_PRECISION_BF16, err, sizeof err);
    CHECK(ref, "%s", err);
    vdn_text_encoder *twin =
        cpu == dev ? NULL : vdn_text_encoder_open(dir, cpu, 0, VDN_PRECISION_FP8, err, sizeof err);
    CHECK(cpu == dev || twin, "%s", err);
    if (enc && ref) {
        CHECK(vdn_text_encoder_precision(enc) == VDN_PRECISION_FP8 &&
                  vdn_text_encoder_precision(ref) == VDN_PRECISION_BF16,
              "precisions %s / %s", vdn_precision_name(vdn_text_encoder_precision(enc)),
              vdn_precision_name(vdn_text_encoder_precision(ref)));
        /* the identity names the checkpoint, the same at both precisions (the cache key adds
         * the precision: text_prompt_cache) */
        CHECK(!strcmp(vdn_text_encoder_identity(enc), vdn_text_encoder_identity(ref)),
              "identity %s at fp8, %s at bf16", vdn_text_encoder_identity(enc),
              vdn_text_encoder_identity(ref));
        char ids[32], want[32];
        for (int k = 0; k < 64; k++) {
            snprintf(ids, sizeof ids, "ids_%d", k);
            snprintf(want, sizeof want, "hidden_%d", k);
            if (!vdn_st_find(f, ids)) break;
            compare_fp8(enc, ref, twin, f, ids, want);
        }
        refusals(enc);
    }
    vdn_text_encoder_close(enc), vdn_text_encoder_close(ref), vdn_text_encoder_close(twin);
    /* one layer: the bounds hold for the first layer's output alone too */
    enc = vdn_text_encoder_open(dir, dev, 1, VDN_PRECISION_FP8, err, sizeof err);
    ref = vdn_text_encoder_open(dir, cpu, 1, VDN_PRECISION_BF16, err, sizeof err);
    twin =
        cpu == dev ? NULL : vdn_text_encoder_open(dir, cpu, 1, VDN_PRECISION_FP8, err, sizeof err);
    CHECK(enc && ref, "%s", err);
    if (enc && ref) compare_fp8(enc, ref, twin, f, "ids_0", "layer1_0");
    vdn_text_encoder_close(enc), vdn_text_encoder_close(ref), vdn_text_encoder_close(twin);
    if (cpu != dev) vdn_dev_close(cpu);
}

int main(int argc, char **argv) {
    vdn_backends_register(); /* "cuda" where this build has it */
    if (argc < 3) {
        fprintf(stderr, "usage: %s CKPT EXPECTED.safetensors [BACKEND [TOL [PRECISION]]]\n",
                argv[0]);
        return 2;
    }
    const char *backend = argc > 3 ? argv[3] : "cpu";
    if (argc > 4) tol = atof(argv[4]);
    vdn_precision prec = VDN_PRECISION_BF16;
    if (argc > 5 && vdn_precision_parse(argv[5], &prec)) {
        fprintf(stderr, "%s: PRECISION '%s': expected bf16 or fp8\n", argv[0], argv[5]);
        return 2;
    }
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
    if (prec == VDN_PRECISION_FP8) {
        if (f) fp8_checks(dir, dev, f);
        vdn_st_close(f);
        vdn_dev_close(dev);
        return check_report("test_encoder (fp8)");
    }
    vdn_text_encoder *enc = vdn_text_encoder_open(dir, dev, 0, VDN_PRECISION_BF16, err, sizeof err);
    CHECK(enc, "%s", err);
    vdn_dev *cpu = NULL;
    if (!vdn_dev_is_cpu(dev)) {
        cpu = vdn_dev_open("cpu", 0, 0, err, sizeof err);
        cpu_twin =
            cpu ? vdn_text_encoder_open(dir, cpu, 0, VDN_PRECISION_BF16, err, sizeof err) : NULL;
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
        vdn_text_encoder *one =
            vdn_text_encoder_open(dir, dev, 1, VDN_PRECISION_BF16, err, sizeof err);
        CHECK(one, "%s", err);
        if (one) compare(one, f, "ids_0", "layer1_0");
        vdn_text_encoder_close(one);
        CHECK(!vdn_text_encoder_open(dir, dev, 99, VDN_PRECISION_BF16, err, sizeof err) &&
                  strstr(err, "layer 99"),
              "%s", err);
    }
    vdn_text_encoder_close(enc);
    vdn_text_encoder_close(cpu_twin);
    vdn_dev_close(cpu);
    vdn_st_close(f);
    vdn_dev_close(dev);
    return check_report("test_encoder");
}
