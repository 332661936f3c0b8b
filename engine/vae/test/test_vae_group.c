/* One clip decoded over a group of CPU devices (vae.h "one clip over several devices") equals
 * the one-device decode bit for bit. usage: test_vae_group CKPT_ROOT (from `vdn ckpt init --preset
 * tiny --vae`). Every decoder of a group is its own copy of the VAEs on its own CPU device.
 * Checks:
 *  - video, three temporal chunks of two tiles each (they cross-fade; on 2 devices the middle
 *    chunk's tiles are split between the members and the cross-fade between the members' chunks
 *    is joined on the host; on 3 each owns a chunk) and one chunk of three tiles (split over 2 and
 *    3 members: the owner receives the others' tiles), over 2 and 3 devices: the frames equal the
 *    one-device frames bit for bit; every member decoded some tiles and the shares add up to the
 *    clip's tiles; progress counts 1..total in order; a clip of 2 tiles on 3 devices leaves the
 *    third idle (it allocates nothing) and still equals the one-device frames;
 *  - audio, two stereo channels over 2 and 3 devices: the waveform equals the one-device one bit
 *    for bit, one channel on each of the first two members;
 *  - the checks can fail: other latents give other frames;
 *  - a device fault on member 1 (its linear op fails as a GPU's would, typed DEVICE) fails the
 *    decode naming that member (member 0, waiting for member 1's tile of the chunk they share,
 *    wakes and stops), marks only its share failed, and only its device records the
 *    fault;
 *  - a group that names one device twice is refused. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../ops/test/check.h"
#include "backends.h"
#include "op_backend.h"
#include "vae.h"
#include "vdn_util.h"

#define MAXD 3

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* xorshift64*, uniform in [-1.5, 1.5) */
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (float)((double)((rng * 0x2545f4914f6cdd1dull) >> 11) * 0x1.0p-53 * 3.0 - 1.5);
}

static float *random_latents(int64_t n) {
    float *z = vdn_xmalloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        z[i] = frand();
    return z;
}

typedef struct {
    int calls, last, total, in_order;
    int stop_at; /* a cancel: progress says stop at this unit (0: never) */
} progress_log;

static int on_progress(void *user, int done, int total) {
    progress_log *p = user;
    p->in_order = p->in_order && done == p->last + 1 && (p->total == 0 || total == p->total);
    p->calls++;
    p->last = done;
    p->total = total;
    return p->stop_at && done >= p->stop_at;
}

/* decode over the first n decoders; frames into out */
static int video(vdn_video_vae **v, int n, const float *z, int T, int h, int w, float *out,
                 vdn_vae_share *share, progress_log *pl, char *err) {
    *pl = (progress_log){.in_order = 1};
    return vdn_video_vae_decode_group(v, n, z, T, h, w, out, on_progress, pl, share, err,
                                      VDN_ERR_LEN);
}

static void video_case(vdn_video_vae **v, const char *name, int T, int h, int w, int can_fail) {
    char err[VDN_ERR_LEN];
    const vdn_vae_video_config *c = vdn_video_vae_config(v[0]);
    const int F = vdn_video_vae_frames(v[0], T, err, sizeof err);
    CHECK(F > 0, "%s: %s", name, err);
    if (F <= 0) return;
    const int64_t nf = 3LL * F * (h * c->spatial_ratio) * (w * c->spatial_ratio);
    float *z = random_latents((int64_t)c->latent_channels * T * h * w);
    float *one = vdn_xmalloc(sizeof(float) * (size_t)nf);
    float *many = vdn_xmalloc(sizeof(float) * (size_t)nf);
    vdn_vae_share sh;
    progress_log pl;
    int rc = video(v, 1, z, T, h, w, one, &sh, &pl, err);
    CHECK(rc == 0, "%s on 1 device: %s", name, err);
    const int tiles = sh.units[0];
    CHECK(sh.n == 1 && pl.calls == tiles && pl.last == tiles && pl.in_order,
          "%s on 1 device: %d tiles, %d progress calls (last %d)", name, tiles, pl.calls, pl.last);
    for (int n = 2; n <= MAXD && !rc; n++) {
        memset(many, 0xff, sizeof(float) * (size_t)nf); /* NaN: a frame nobody wrote shows */
        int rn = video(v, n, z, T, h, w, many, &sh, &pl, err);
        CHECK(rn == 0, "%s on %d devices: %s", name, n, err);
        if (rn) continue;
        int64_t diff = 0;
        for (int64_t i = 0; i < nf; i++)
            diff += memcmp(&one[i], &many[i], sizeof(float)) != 0;
        int sum = 0, idle = 0;
        char shares[128] = "";
        for (int i = 0; i < n; i++) {
            sum += sh.units[i];
            idle += sh.units[i] == 0;
            snprintf(shares + strlen(shares), sizeof shares - strlen(shares), "%s%d", i ? "+" : "",
                     sh.units[i]);
        }
        printf("video %-7s (%d latent frames %dx%d -> %d frames, %d tiles) on %d devices: tiles "
               "%s, %lld of %lld values differ from 1 device\n",
               name, T, h, w, F, tiles, n, shares, (long long)diff, (long long)nf);
        CHECK(diff == 0, "%s on %d devices: %lld values differ from the 1-device decode", name, n,
              (long long)diff);
        CHECK(sh.n == n && sum == tiles && idle == (n > tiles ? n - tiles : 0) && !sh.failed,
              "%s on %d devices: shares %s of %d tiles, failed %llx", name, n, shares, tiles,
              (unsigned long long)sh.failed);
        CHECK(pl.calls == tiles && pl.last == tiles && pl.total == tiles && pl.in_order,
              "%s on %d devices: progress %d calls, last %d of %d, in order %d", name, n, pl.calls,
              pl.last, pl.total, pl.in_order);
    }
    /* a cancel (progress says stop after the first unit): every member stops at its next pass
     * and the decode fails, saying so; a clip of several chunks before its last tile (one pass
     * may decode several tiles of a chunk at once) */
    for (int n = 1; n <= 2; n++) {
        pl = (progress_log){.in_order = 1, .stop_at = 1};
        int rs = vdn_video_vae_decode_group(v, n, z, T, h, w, many, on_progress, &pl, &sh, err,
                                            sizeof err);
        CHECK(rs == -1 && strstr(err, "cancelled") && (strcmp(name, "chunks") || pl.last < tiles),
              "%s cancelled on %d devices: rc %d, %d of %d tiles, '%s'", name, n, rs, pl.last,
              tiles, err);
    }
    /* the comparison can fail: other latents, other frames */
    z[0] += 1.0f;
    if (can_fail && !rc && !video(v, 2, z, T, h, w, many, &sh, &pl, err))
        CHECK(memcmp(one, many, sizeof(float) * (size_t)nf) != 0,
              "%s: other latents decoded to the same frames", name);
    free(z);
    free(one);
    free(many);
}

static void audio_case(vdn_audio_vae **a, int La) {
    char err[VDN_ERR_LEN];
    const vdn_vae_audio_config *c = vdn_audio_vae_config(a[0]);
    const int64_t ns = 2LL * La * c->hop;
    float *z = random_latents(2LL * c->latent_channels * La);
    float *one = vdn_xmalloc(sizeof(float) * (size_t)ns), *many = vdn_xmalloc(sizeof(float) * ns);
    vdn_vae_share sh;
    int rc = vdn_audio_vae_decode_group(a, 1, z, 2, La, one, NULL, NULL, &sh, err, sizeof err);
    CHECK(rc == 0 && sh.units[0] == 2, "audio on 1 device: %s", err);
    for (int n = 2; n <= MAXD && !rc; n++) {
        memset(many, 0xff, sizeof(float) * (size_t)ns);
        int rn = vdn_audio_vae_decode_group(a, n, z, 2, La, many, NULL, NULL, &sh, err, sizeof err);
        CHECK(rn == 0, "audio on %d devices: %s", n, err);
        if (rn) continue;
        const int same = !memcmp(one, many, sizeof(float) * (size_t)ns);
        printf("audio (2 x %d latents) on %d devices: channels %d+%d%s, %s\n", La, n, sh.units[0],
               sh.units[1], n > 2 ? "+0" : "",
               same ? "equal to 1 device bit for bit" : "DIFFERENT from 1 device");
        CHECK(same, "audio on %d devices differs from 1 device", n);
        CHECK(sh.units[0] == 1 && sh.units[1] == 1 && (n < 3 || sh.units[2] == 0),
              "audio on %d devices: channels %d+%d", n, sh.units[0], sh.units[1]);
    }
    free(z);
    free(one);
    free(many);
}

/* A decoder keeps its tiles' rope positions on the device between passes and decodes
 * (video_vae.c tile_pos): one that decoded other shapes last decodes a clip to the same bits as
 * a decoder fresh from its files. */
static void reuse_case(vdn_video_vae *used, vdn_dev *dev, const char *vdir) {
    char err[VDN_ERR_LEN];
    const int T = 3, h = 2, w = 6; /* one tile, narrower than the other cases' */
    vdn_video_vae *fresh = vdn_video_vae_load(dev, vdir, err, sizeof err);
    CHECK(fresh != NULL, "reloading the video VAE: %s", err);
    if (!fresh) return;
    const vdn_vae_video_config *c = vdn_video_vae_config(fresh);
    const int F = vdn_video_vae_frames(fresh, T, err, sizeof err);
    const int64_t nf = 3LL * F * (h * c->spatial_ratio) * (w * c->spatial_ratio);
    float *z = random_latents((int64_t)c->latent_channels * T * h * w);
    float *a = vdn_xmalloc(sizeof(float) * (size_t)nf), *b = vdn_xmalloc(sizeof(float) * nf);
    int rc = vdn_video_vae_decode(fresh, z, T, h, w, a, NULL, NULL, err, sizeof err);
    CHECK(rc == 0, "fresh decoder: %s", err);
    rc = rc || vdn_video_vae_decode(used, z, T, h, w, b, NULL, NULL, err, sizeof err);
    CHECK(rc == 0, "used decoder: %s", err);
    int64_t diff = 0;
    for (int64_t i = 0; !rc && i < nf; i++)
        diff += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    printf("video after other shapes: %lld of %lld values differ from a fresh decoder\n",
           (long long)diff, (long long)nf);
    CHECK(diff == 0, "a decoder that decoded other shapes: %lld values differ from a fresh one",
          (long long)diff);
    free(z);
    free(a);
    free(b);
    vdn_video_vae_free(fresh);
}

/* member 1's device fails every linear op as the CUDA backend's own failure path would */
static int faulty_linear(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w,
                         const vdn_tensor *b, vdn_act act, int accumulate) {
    (void)x, (void)w, (void)b, (void)act, (void)accumulate;
    return vdn_dev_fault(y->dev, VDN_DEV_FAULT_DEVICE, "op linear: injected device fault");
}

static void fault_case(vdn_video_vae **v, vdn_dev **dev) {
    char err[VDN_ERR_LEN];
    const int T = 13, h = 2, w = 20;
    const vdn_vae_video_config *c = vdn_video_vae_config(v[0]);
    float *z = random_latents((int64_t)c->latent_channels * T * h * w);
    float *out = vdn_xmalloc(sizeof(float) * 3 * (size_t)vdn_video_vae_frames(v[0], T, err, 256) *
                             h * w * 256);
    vdn_dev_backend faulty = *dev[1]->be;
    const vdn_dev_backend *good = dev[1]->be;
    faulty.linear = faulty_linear;
    dev[1]->be = &faulty;
    vdn_dev_clear_fault(dev[0]);
    vdn_dev_clear_fault(dev[1]);
    vdn_vae_share sh;
    progress_log pl;
    int rc = video(v, 2, z, T, h, w, out, &sh, &pl, err);
    dev[1]->be = good;
    printf("a fault on device 1 of 2: rc %d, failed %llx: %s\n", rc, (unsigned long long)sh.failed,
           rc ? err : "-");
    CHECK(rc != 0 && sh.failed == 2, "the decode did not fail on member 1 alone (failed %llx)",
          (unsigned long long)sh.failed);
    CHECK(strstr(err, "injected device fault") && strstr(err, "decoder 1 of a group of 2"),
          "message: %s", err);
    CHECK(vdn_dev_faulted(dev[1]) == VDN_DEV_FAULT_DEVICE &&
              vdn_dev_faulted(dev[0]) == VDN_DEV_FAULT_NONE,
          "fault records: device 0 %d, device 1 %d", vdn_dev_faulted(dev[0]),
          vdn_dev_faulted(dev[1]));
    vdn_dev_clear_fault(dev[1]);
    /* one device twice */
    vdn_video_vae *twice[2] = {v[0], v[0]};
    rc = vdn_video_vae_decode_group(twice, 2, z, T, h, w, out, NULL, NULL, NULL, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "share a device"), "one device twice: rc %d: %s", rc, err);
    free(z);
    free(out);
}

int main(int argc, char **argv) {
    vdn_backends_register(); /* "cuda" where this build has it */
    if (argc != 2) {
        fprintf(stderr, "usage: %s CKPT_ROOT\n", argv[0]);
        return 2;
    }
    char err[VDN_ERR_LEN], vdir[4200], adir[4200];
    snprintf(vdir, sizeof vdir, "%s/vae", argv[1]);
    snprintf(adir, sizeof adir, "%s/audio_vae", argv[1]);
    vdn_dev *dev[MAXD] = {0};
    vdn_video_vae *v[MAXD] = {0};
    vdn_audio_vae *a[MAXD] = {0};
    int ok = 1;
    for (int i = 0; i < MAXD && ok; i++) {
        dev[i] = vdn_dev_open("cpu", i, 2, err, sizeof err);
        ok = dev[i] && (v[i] = vdn_video_vae_load(dev[i], vdir, err, sizeof err)) &&
             (a[i] = vdn_audio_vae_load(dev[i], adir, err, sizeof err));
        CHECK(ok, "device %d: %s", i, err);
    }
    if (ok) {
        video_case(v, "chunks", 13, 2, 20, 0); /* 3 chunks (they cross-fade) x 1x2 tiles */
        video_case(v, "tiles", 3, 2, 36, 1);   /* 1 chunk x 1x3 tiles */
        video_case(v, "few", 3, 2, 20, 0);     /* 1 chunk x 1x2 tiles: on 3, one member idle */
        reuse_case(v[0], dev[0], vdir);
        audio_case(a, 12);
        fault_case(v, dev);
    }
    for (int i = 0; i < MAXD; i++) {
        vdn_audio_vae_free(a[i]);
        vdn_video_vae_free(v[i]);
        if (dev[i]) vdn_dev_close(dev[i]);
    }
    return check_report("vae_group");
}
