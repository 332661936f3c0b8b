/* The weight upload path (upload.h) with a fake device (host memory): every tensor of random
 * checkpoints in the diffusers layout with LoRA adapters folded (built tensors) and in the native
 * layout (converted tensors) arrives bit-identical to bf16/fp32 of the float32 oracle view
 * (vdn_ckpt_f32), the right tensors are converted "on the device", host anonymous memory stays far
 * below a float32 copy of the model (while the float32 path is shown to cost it), and every bad
 * request fails with an error naming the tensor. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt.h"
#include "ckpt_init.h"
#include "upload.h"
#include "vdn_util.h"
#include "../../ops/test/check.h"

#if defined(__SANITIZE_ADDRESS__)
#define VDN_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VDN_UNDER_ASAN 1
#endif
#endif
#ifndef VDN_UNDER_ASAN
#define VDN_UNDER_ASAN 0
#endif

/* ---- the fake device: host buffers, conversion written here from the dtype definitions ---- */
typedef struct {
    void *stage;
    size_t stage_bytes;
    int fail_copy; /* 1: to_device fails */
    int discard;   /* 1: copies only checksum (memory test: no device buffer on the host) */
    uint64_t sum;
    size_t copies, converts;
} fake_dev;

static int fake_copy(void *ctx, void *dst, const void *src, size_t bytes) {
    fake_dev *d = ctx;
    if (d->fail_copy) return -1;
    d->copies++;
    if (d->discard) {
        const uint8_t *s = src;
        for (size_t i = 0; i < bytes; i += 64)
            d->sum += s[i];
        return 0;
    }
    memcpy(dst, src, bytes);
    return 0;
}

static float widen(const void *src, vdn_dtype have, size_t i) {
    uint16_t h;
    float f;
    switch (have) {
    case VDN_DT_F32:
        memcpy(&f, (const char *)src + 4 * i, 4);
        return f;
    case VDN_DT_BF16:
        memcpy(&h, (const char *)src + 2 * i, 2);
        return vdn_bf16_to_f32(h);
    default:
        memcpy(&h, (const char *)src + 2 * i, 2);
        return vdn_f16_to_f32(h);
    }
}

static int fake_convert(void *ctx, void *dst, vdn_dtype want, const void *src, vdn_dtype have,
                        size_t n) {
    fake_dev *d = ctx;
    d->converts++;
    if (d->discard) return 0;
    for (size_t i = 0; i < n; i++) {
        float v = widen(src, have, i);
        if (want == VDN_DT_F32)
            memcpy((char *)dst + 4 * i, &v, 4);
        else {
            uint16_t h = vdn_f32_to_bf16(v);
            memcpy((char *)dst + 2 * i, &h, 2);
        }
    }
    return 0;
}

static void *fake_stage(void *ctx, size_t bytes) {
    fake_dev *d = ctx;
    if (bytes > d->stage_bytes) {
        free(d->stage);
        d->stage = vdn_xmalloc(bytes);
        d->stage_bytes = bytes;
    }
    return d->stage;
}

static vdn_uploader fake_uploader(fake_dev *d) {
    vdn_uploader u = {0};
    u.ctx = d, u.to_device = fake_copy, u.convert = fake_convert, u.staging = fake_stage;
    return u;
}

/* anonymous resident memory of this process, bytes (the mapping's pages are file-backed) */
static long long rss_anon(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "RssAnon: %lld kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb * 1024;
}

static int is_float(vdn_dtype d) {
    return d == VDN_DT_F32 || d == VDN_DT_BF16 || d == VDN_DT_F16;
}

/* every float tensor, both target dtypes, bit-compared with the float32 view */
static void check_values(const char *dir, const char *what) {
    char err[VDN_ERR_LEN];
    vdn_ckpt *ck = vdn_ckpt_open(dir, NULL, 0, err, sizeof err);
    CHECK(ck, "%s: open: %s", what, err);
    if (!ck) return;
    fake_dev d = {0};
    vdn_uploader u = fake_uploader(&d);
    size_t tensors = 0, expect_conv = 0, bad = 0;
    for (int i = 0; i < vdn_ckpt_count(ck); i++) {
        const char *name = vdn_ckpt_name(ck, i);
        int64_t shape[8];
        int nd = vdn_ckpt_shape(ck, name, shape);
        vdn_dtype dt = vdn_ckpt_dtype(ck, name);
        if (nd < 0 || !is_float(dt)) continue;
        size_t n = 1;
        for (int k = 0; k < nd; k++)
            n *= (size_t)shape[k];
        const float *ref = vdn_ckpt_f32(ck, name, nd, shape, err, sizeof err);
        CHECK(ref, "%s: %s: %s", what, name, err);
        if (!ref) continue;
        float *ref_copy = vdn_xmalloc(n * 4 + 4);
        memcpy(ref_copy, ref, n * 4);
        vdn_ckpt_release(ck, name);
        for (int w = 0; w < 2; w++) {
            vdn_dtype want = w ? VDN_DT_F32 : VDN_DT_BF16;
            void *dst = vdn_xmalloc(n * 4 + 4);
            int rc = vdn_upload(&u, ck, name, nd, shape, want, dst, err, sizeof err);
            CHECK(rc == 0, "%s: upload %s: %s", what, name, err);
            expect_conv += dt != want;
            for (size_t j = 0; rc == 0 && j < n; j++) {
                uint32_t a, b;
                if (want == VDN_DT_F32) {
                    memcpy(&a, (float *)dst + j, 4);
                    memcpy(&b, ref_copy + j, 4);
                } else {
                    a = ((uint16_t *)dst)[j];
                    b = vdn_f32_to_bf16(ref_copy[j]);
                }
                if (a != b && bad++ < 5)
                    fprintf(stderr, "FAIL %s: %s[%zu] as %s: 0x%x, expected 0x%x\n", what, name, j,
                            vdn_upload_dtype_name(want), a, b);
            }
            free(dst);
        }
        free(ref_copy);
        tensors++;
    }
    CHECK(bad == 0, "%s: %zu values differ", what, bad);
    CHECK(tensors > 30, "%s: only %zu tensors", what, tensors);
    CHECK(u.n_tensors == 2 * tensors, "%s: %llu uploads for %zu tensors x 2", what,
          (unsigned long long)u.n_tensors, tensors);
    CHECK(d.converts == expect_conv && u.n_converted == expect_conv,
          "%s: %zu conversions, expected %zu (stored dtype != target)", what, d.converts,
          expect_conv);
    printf("%s: %zu tensors bit-identical as bf16 and fp32 (%zu device conversions)\n", what,
           tensors, expect_conv);
    free(d.stage);
    vdn_ckpt_close(ck);
}

/* host memory: uploading everything costs far less anonymous memory than float32 views */
static void check_memory(const char *dir) {
    char err[VDN_ERR_LEN];
    vdn_ckpt *ck = vdn_ckpt_open(dir, NULL, 0, err, sizeof err);
    CHECK(ck, "memory: open: %s", err);
    if (!ck) return;
    fake_dev d = {.discard = 1};
    vdn_uploader u = fake_uploader(&d);
    size_t f32_bytes = 0, widened = 0; /* float32 bytes of all / of the non-F32 tensors */
    long long r0 = rss_anon();
    for (int i = 0; i < vdn_ckpt_count(ck); i++) {
        const char *name = vdn_ckpt_name(ck, i);
        int64_t shape[8];
        int nd = vdn_ckpt_shape(ck, name, shape);
        if (nd < 0 || !is_float(vdn_ckpt_dtype(ck, name))) continue;
        size_t n = 1;
        for (int k = 0; k < nd; k++)
            n *= (size_t)shape[k];
        f32_bytes += 4 * n;
        widened += vdn_ckpt_dtype(ck, name) == VDN_DT_F32 ? 0 : 4 * n;
        CHECK(vdn_upload(&u, ck, name, nd, shape, VDN_DT_BF16, NULL, err, sizeof err) == 0,
              "memory: %s: %s", name, err);
    }
    long long r1 = rss_anon();
    /* the old path: float32 views of every tensor, kept */
    for (int i = 0; i < vdn_ckpt_count(ck); i++) {
        const char *name = vdn_ckpt_name(ck, i);
        int64_t shape[8];
        int nd = vdn_ckpt_shape(ck, name, shape);
        if (nd < 0 || !is_float(vdn_ckpt_dtype(ck, name))) continue;
        CHECK(vdn_ckpt_f32(ck, name, nd, shape, err, sizeof err), "memory: f32 %s: %s", name, err);
    }
    long long r2 = rss_anon();
    printf("host anonymous memory: upload of all tensors +%.1f MB, float32 views +%.1f MB "
           "(float32 model %.1f MB, %.1f MB of it widened from 16 bits; largest tensor %.1f MB)\n",
           (r1 - r0) / 1e6, (r2 - r1) / 1e6, f32_bytes / 1e6, widened / 1e6, u.max_tensor_b / 1e6);
    CHECK(r0 > 0, "RssAnon not readable");
#if VDN_UNDER_ASAN
    /* AddressSanitizer keeps freed blocks in quarantine, so RSS measures its allocator here */
    printf("(under AddressSanitizer: the upload's RSS bound is not checked)\n");
#else
    /* a few tensors' worth of allocator slack is allowed; a float32 model copy is not */
    CHECK(r1 - r0 < (long long)(f32_bytes / 4), "upload kept %.1f MB of host memory (limit %.1f)",
          (r1 - r0) / 1e6, f32_bytes / 4e6);
#endif
    /* (F32-stored tensors are views of the mapping; the widened ones are new memory) */
    CHECK(r2 - r1 > (long long)(widened / 2),
          "the float32 views cost only %.1f MB: the measurement cannot tell", (r2 - r1) / 1e6);
    free(d.stage);
    vdn_ckpt_close(ck);
}

static void check_errors(const char *dir) {
    char err[VDN_ERR_LEN] = "";
    vdn_ckpt *ck = vdn_ckpt_open(dir, NULL, 0, err, sizeof err);
    CHECK(ck, "errors: open: %s", err);
    if (!ck) return;
    fake_dev d = {0};
    vdn_uploader u = fake_uploader(&d);
    const char *nm = "proj_in.bias";
    int64_t shape[8];
    int nd = vdn_ckpt_shape(ck, nm, shape);
    CHECK(nd == 1, "proj_in.bias: ndim %d", nd);
    float buf[4096];
    CHECK(shape[0] <= 4096, "proj_in.bias too large for the test");
    int rc = vdn_upload(&u, ck, "no.such.tensor", 1, shape, VDN_DT_F32, buf, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "no.such.tensor"), "missing tensor: rc %d, err \"%s\"", rc, err);
    int64_t wrong[1] = {shape[0] + 1};
    rc = vdn_upload(&u, ck, nm, 1, wrong, VDN_DT_F32, buf, err, sizeof err);
    CHECK(rc == -1 && strstr(err, nm), "wrong shape: rc %d, err \"%s\"", rc, err);
    rc = vdn_upload(&u, ck, nm, 1, shape, VDN_DT_F16, buf, err, sizeof err);
    CHECK(rc == -1 && strstr(err, nm) && strstr(err, "F32 or BF16"), "F16 target: err \"%s\"", err);
    d.fail_copy = 1;
    rc = vdn_upload(&u, ck, nm, 1, shape, VDN_DT_F32, buf, err, sizeof err);
    CHECK(rc == -1 && strstr(err, nm) && strstr(err, "failed"), "failed copy: err \"%s\"", err);
    printf("bad requests fail with the tensor named (e.g. \"%s\")\n", err);
    d.fail_copy = 0;
    CHECK(u.n_tensors == 0, "failed uploads counted: %llu", (unsigned long long)u.n_tensors);
    rc = vdn_upload(&u, ck, nm, 1, shape, VDN_DT_F32, buf, err, sizeof err);
    CHECK(rc == 0, "upload after failures: %s", err);
    vdn_ckpt_close(ck);
}

int main(void) {
    char dir[] = "/tmp/vdn-upload-XXXXXX", err[VDN_ERR_LEN];
    if (!mkdtemp(dir)) return 1;
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/diffusers", dir);
    snprintf(b, sizeof b, "%s/native", dir);
    vdn_ckpt_init_opts oa = {.preset = "small", .out = a, .seed = 3, .vdn = 1};
    vdn_ckpt_init_opts ob = {.preset = "tiny", .out = b, .seed = 4, .native = 1};
    if (vdn_ckpt_init(&oa, err, sizeof err) || vdn_ckpt_init(&ob, err, sizeof err)) {
        fprintf(stderr, "ckpt init: %s\n", err);
        return 1;
    }
    check_values(a, "small VDN, adapters folded");
    check_values(b, "tiny native layout");
    check_memory(a);
    check_errors(b);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    if (failures) {
        printf("%d check(s) FAILED\n", failures);
        return 1;
    }
    printf("upload path ok\n");
    return 0;
}
