/* engine/core/torch_rng.c against torch itself: every
 * engine/test/reference/torch_randn_*.safetensors (ops/reference/torch_randn_reference.py:
 * torch.randn under each ATen CPU kernel, as values or as sha256 of the float32 bytes) must equal
 * our draw bit for bit, with the kernel path its capability names (AVX2: the avx_mathfun
 * polynomials; anything else: libm). Also: the refusal of n < 16, and that the two paths differ (so
 * each comparison can fail). usage: test_torch_rng DIR */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../ops/test/check.h"
#include "safetensors.h"
#include "torch_rng.h"
#include "vdn_util.h"

static int checked; /* draws compared */

/* "<cap>.s<seed>_n<n>": the capability, seed and count of a draw */
static int parse_key(const char *k, char cap[64], unsigned long long *seed, long long *n) {
    const char *dot = strchr(k, '.');
    if (!dot || dot - k >= 64 || sscanf(dot + 1, "s%llu_n%lld", seed, n) != 2) return -1;
    memcpy(cap, k, (size_t)(dot - k));
    cap[dot - k] = 0;
    return 0;
}

/* the path a capability ran: torch's AVX2 kernel file is the only one with the vector
 * Box-Muller, and AVX512 has no normal kernel of its own (the dispatcher takes AVX2's) */
static vdn_torch_randn_path path_of(const char *capability) {
    return !strcmp(capability, "AVX2") || !strcmp(capability, "AVX512") ? VDN_TORCH_RANDN_AVX2
                                                                        : VDN_TORCH_RANDN_SCALAR;
}

static float *draw(long long n, unsigned long long seed, vdn_torch_randn_path path) {
    float *out = vdn_xmalloc(sizeof(float) * (size_t)n);
    char err[256];
    if (vdn_torch_randn(out, n, seed, path, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
    return out;
}

static const char *cap_path(const vdn_st_file *f, const char *cap) {
    char key[128];
    snprintf(key, sizeof key, "capability.%s", cap);
    const char *c = vdn_st_meta(f, key);
    return c ? c : "";
}

static void check_file(const char *path) {
    char err[512];
    vdn_st_file *f = vdn_st_open(path, err, sizeof err);
    if (!f) {
        CHECK(0, "%s", err);
        return;
    }
    for (int i = 0; i < vdn_st_count(f); i++) { /* "<cap>.s<seed>_n<n>": the values */
        const vdn_st_entry *e = vdn_st_at(f, i);
        char cap[64];
        unsigned long long seed;
        long long n;
        if (parse_key(e->name, cap, &seed, &n) || e->dtype != VDN_DT_F32 || e->numel != n) {
            CHECK(0, "%s: tensor %s is not a <cap>.s<seed>_n<n> float32 draw", path, e->name);
            continue;
        }
        float *ours = draw(n, seed, path_of(cap_path(f, cap)));
        long long bad = 0;
        for (long long k = 0; k < n; k++)
            bad += memcmp(&ours[k], (const float *)e->data + k, sizeof(float)) != 0;
        CHECK(!bad, "%s: %s (%s kernel): %lld of %lld values differ", path, e->name,
              cap_path(f, cap), bad, n);
        checked++;
        free(ours);
    }
    for (int i = 0; i < vdn_st_meta_count(f); i++) { /* "sha256.<cap>.s<seed>_n<n>" */
        const char *k, *v;
        vdn_st_meta_at(f, i, &k, &v);
        if (strncmp(k, "sha256.", 7)) continue;
        char cap[64];
        unsigned long long seed;
        long long n;
        if (parse_key(k + 7, cap, &seed, &n)) {
            CHECK(0, "%s: metadata %s is not sha256.<cap>.s<seed>_n<n>", path, k);
            continue;
        }
        float *ours = draw(n, seed, path_of(cap_path(f, cap)));
        char hex[65];
        vdn_sha256_hex(ours, sizeof(float) * (size_t)n, hex);
        CHECK(!strcmp(hex, v), "%s: %s (%s kernel): sha256 %s, torch's %s", path, k,
              cap_path(f, cap), hex, v);
        checked++;
        free(ours);
    }
    vdn_st_close(f);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR (holding torch_randn_*.safetensors)\n", argv[0]);
        return 2;
    }
    DIR *d = opendir(argv[1]);
    if (!d) {
        fprintf(stderr, "%s: cannot open\n", argv[1]);
        return 1;
    }
    int files = 0;
    for (struct dirent *de; (de = readdir(d));) {
        size_t len = strlen(de->d_name);
        if (strncmp(de->d_name, "torch_randn_", 12) || len < 12 + 12 ||
            strcmp(de->d_name + len - 12, ".safetensors"))
            continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", argv[1], de->d_name);
        check_file(path);
        files++;
    }
    closedir(d);
    CHECK(files >= 1, "no torch_randn_*.safetensors in %s", argv[1]);
    /* the two paths differ (so a fixture of one cannot pass for the other) */
    float *a = draw(1000, 42, VDN_TORCH_RANDN_SCALAR), *b = draw(1000, 42, VDN_TORCH_RANDN_AVX2);
    int differ = 0;
    for (int k = 0; k < 1000; k++)
        differ += memcmp(&a[k], &b[k], sizeof(float)) != 0;
    CHECK(differ > 100, "the scalar and AVX2 paths differ in only %d of 1000 values", differ);
    free(a);
    free(b);
    char err[256];
    float small[15];
    CHECK(vdn_torch_randn(small, 15, 42, VDN_TORCH_RANDN_SCALAR, err, sizeof err) == -1 &&
              strstr(err, "15 values"),
          "n = 15 not refused with a message: %s", err);
    printf("%d file(s), %d draws compared bit for bit\n", files, checked);
    return check_report("test_torch_rng");
}
