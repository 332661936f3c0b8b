/* --noise files: a valid one reads back exactly; each malformed one fails with a message naming
 * the file, tensor and expectation; then a deterministic replay of byte-level mutations through
 * the fuzz target (what CI runs without clang/libFuzzer). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "safetensors.h"
#include "sampler.h"
#include "vdn_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static float video[48], audio[24], kf[24];

static void write_file(const char *path, const vdn_st_tensor *t, int n) {
    char err[VDN_ERR_LEN];
    if (vdn_st_write(path, t, n, NULL, 0, err, sizeof err) != 0) {
        fprintf(stderr, "setup: %s\n", err);
        failures++;
    }
}

/* expect failure with every needle in the message */
static void expect_error(const char *path, int nk, const char *n1, const char *n2) {
    char err[VDN_ERR_LEN] = "";
    vdn_st_file *f = vdn_st_open(path, err, sizeof err);
    float v[48], a[24], k[24];
    int rc = f ? vdn_noise_read(f, 3, 2, 2, 4, 3, 4, nk, v, a, k, NULL, err, sizeof err) : -1;
    vdn_st_close(f);
    CHECK(rc != 0, "%s: malformed noise file accepted", path);
    CHECK(strstr(err, path) && strstr(err, n1) && (!n2 || strstr(err, n2)),
          "%s: error '%s' should name the file, '%s'%s%s", path, err, n1, n2 ? " and " : "",
          n2 ? n2 : "");
}

int main(void) {
    char dir[] = "/tmp/vdn_test_noise_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char p[256];
    fill(video, 48, 2), fill(audio, 24, 2), fill(kf, 24, 2);
    vdn_st_tensor good[3] = {{"noise_video", VDN_DT_F32, 4, {3, 2, 2, 4}, video},
                             {"noise_audio", VDN_DT_F32, 2, {6, 4}, audio},
                             {"noise_keyframes", VDN_DT_F32, 5, {1, 3, 1, 2, 4}, kf}};
    snprintf(p, sizeof p, "%s/good.safetensors", dir);
    write_file(p, good, 3);
    {
        char err[VDN_ERR_LEN];
        float v[48], a[24], k[24];
        int have = 0;
        vdn_st_file *f = vdn_st_open(p, err, sizeof err);
        CHECK(f && vdn_noise_read(f, 3, 2, 2, 4, 3, 4, 1, v, a, k, &have, err, sizeof err) == 0,
              "valid noise file: %s", err);
        CHECK(!memcmp(v, video, sizeof v) && !memcmp(a, audio, sizeof a) &&
                  !memcmp(k, kf, sizeof k) && have,
              "noise values not read back exactly");
        vdn_st_close(f);
    }
    /* missing audio */
    snprintf(p, sizeof p, "%s/no_audio.safetensors", dir);
    write_file(p, good, 1);
    expect_error(p, 1, "noise_audio", "[6, 4]");
    /* wrong video shape (frames) */
    vdn_st_tensor bad_shape[2] = {{"noise_video", VDN_DT_F32, 4, {3, 1, 4, 4}, video}, good[1]};
    snprintf(p, sizeof p, "%s/shape.safetensors", dir);
    write_file(p, bad_shape, 2);
    expect_error(p, 0, "noise_video", NULL);
    /* integer dtype */
    int32_t ints[48] = {0};
    vdn_st_tensor bad_dt[2] = {{"noise_video", VDN_DT_I32, 4, {3, 2, 2, 4}, ints}, good[1]};
    snprintf(p, sizeof p, "%s/dtype.safetensors", dir);
    write_file(p, bad_dt, 2);
    expect_error(p, 0, "noise_video", "I32");
    /* keyframe noise without keyframes */
    snprintf(p, sizeof p, "%s/kf.safetensors", dir);
    write_file(p, good, 3);
    expect_error(p, 0, "noise_keyframes", "no keyframes");
    /* non-finite values */
    float nanv[48];
    memcpy(nanv, video, sizeof nanv);
    nanv[17] = 0.0f / 0.0f;
    vdn_st_tensor bad_nan[2] = {{"noise_video", VDN_DT_F32, 4, {3, 2, 2, 4}, nanv}, good[1]};
    snprintf(p, sizeof p, "%s/nan.safetensors", dir);
    write_file(p, bad_nan, 2);
    expect_error(p, 0, "noise_video", "non-finite");
    /* truncated file */
    snprintf(p, sizeof p, "%s/good.safetensors", dir);
    char err[VDN_ERR_LEN];
    size_t len;
    char *bytes = vdn_read_file(p, &len, err, sizeof err);
    CHECK(bytes != NULL, "read back: %s", err);
    snprintf(p, sizeof p, "%s/trunc.safetensors", dir);
    if (bytes) {
        vdn_write_file_atomic(p, bytes, len - 7, err, sizeof err);
        expect_error(p, 1, "trunc.safetensors", NULL);
        /* replay: deterministic mutations of the valid file through the fuzz target */
        char *m = vdn_xmalloc(len);
        for (int it = 0; it < 3000; it++) {
            memcpy(m, bytes, len);
            int nflip = 1 + it % 4;
            for (int j = 0; j < nflip; j++) {
                size_t at = (size_t)((rnd() + 1) / 2 * len) % len;
                m[at] = (char)(it % 3 == 0 ? m[at] ^ (1 << (it % 8)) : (int)(rnd() * 128));
            }
            size_t cut = it % 5 == 0 ? (size_t)((rnd() + 1) / 2 * len) : len;
            LLVMFuzzerTestOneInput((const uint8_t *)m, cut);
        }
        free(m);
        free(bytes);
    }
    return test_done("test_noise");
}
