/* The models' host helpers (patchify, sequence and positions, sigma grid, Euler step, noise)
 * against references written here. The ops themselves are tested through the op layer
 * (test_op_cpu.c: every CPU op against float64 written there). */
#include <math.h>
#include <string.h>

#include "check.h"
#include "sampler.h"
#include "engine.h"
#include "seq.h"

static void test_patchify(void) {
    int C = 3, F = 2, H = 4, W = 6;
    float lat[3 * 2 * 4 * 6], rows[3 * 2 * 4 * 6], back[3 * 2 * 4 * 6];
    fill(lat, sizeof lat / 4, 1);
    vdn_patchify(rows, lat, C, F, H, W, 2, 2);
    /* reshape(C,F,1,H/2,2,W/2,2).permute(f,hp,wp,c,pt,ph,pw): row (f,hp,wp), feature c*4+ph*2+pw */
    int bad = 0;
    for (int f = 0; f < F; f++)
        for (int hp = 0; hp < 2; hp++)
            for (int wp = 0; wp < 3; wp++)
                for (int c = 0; c < C; c++)
                    for (int ph = 0; ph < 2; ph++)
                        for (int pw = 0; pw < 2; pw++) {
                            int row = (f * 2 + hp) * 3 + wp, feat = c * 4 + ph * 2 + pw;
                            float want = lat[((c * F + f) * H + hp * 2 + ph) * W + wp * 2 + pw];
                            bad += rows[row * 12 + feat] != want;
                        }
    CHECK(bad == 0, "patchify: %d misplaced values", bad);
    vdn_unpatchify(back, rows, C, F, H, W, 2, 2);
    CHECK(memcmp(back, lat, sizeof lat) == 0, "unpatchify(patchify(x)) != x");
    float audio[2 * 4 * 5], arows[2 * 4 * 5], aback[2 * 4 * 5];
    fill(audio, 40, 1);
    vdn_audio_to_rows(arows, audio, 4, 5);
    CHECK(arows[(1 * 5 + 3) * 4 + 2] == audio[(1 * 4 + 2) * 5 + 3], "audio rows channel-major");
    vdn_rows_to_audio(aback, arows, 4, 5);
    CHECK(memcmp(aback, audio, sizeof audio) == 0, "audio row round trip");
}

static void test_positions(void) {
    vdn_config cfg = {0};
    cfg.patch_t = 1, cfg.patch_h = 2, cfg.patch_w = 2;
    int L = 7, F = 12, lh = 6, lw = 10, La = 20;
    int8_t tags[7] = {1, 1, 0, 0, 1, 1, 1};
    for (int variant = 0; variant < 2; variant++) { /* t2va, then fl2va with first+last */
        int nk = variant ? 2 : 0, anchors[2] = {VDN_KF_FIRST, VDN_KF_LAST};
        vdn_seq s;
        char err[256];
        CHECK(vdn_seq_build(&s, &cfg, tags, L, F, lh, lw, La, nk, anchors, err, sizeof err) == 0,
              "seq build: %s", err);
        int S = 15, Lr = L + nk * S + 2 * La + F * S;
        CHECK(s.lay.n_rows == Lr, "rows %d vs %d", s.lay.n_rows, Lr);
        /* direct formula: gaps 5/3, 20/3 x4 repeating; linspace grid as numpy */
        double tf[12], acc = 0;
        for (int k = 0; k < F; k++)
            tf[k] = L + (k == 0 ? 0 : (acc += (k - 1) % 5 == 0 ? 5.0 / 3 : 20.0 / 3));
        double rh = 6 / sqrt(60.0), rw = 10 / sqrt(60.0);
        int bad = 0;
        for (int f = 0; f < F; f++)
            for (int y = 0; y < 3; y++)
                for (int x = 0; x < 5; x++) {
                    int r = s.lay.video_start + f * S + y * 5 + x;
                    double gh = ((1 - rh) / 2 + y * rh / 3) * 32,
                           gw = ((1 - rw) / 2 + x * rw / 5) * 32;
                    bad += fabs(s.pos[3 * r] - tf[f]) > 1e-12 ||
                           fabs(s.pos[3 * r + 1] - gh) > 1e-12 ||
                           fabs(s.pos[3 * r + 2] - gw) > 1e-12 || s.tags[r] != 0;
                }
        CHECK(bad == 0, "video positions: %d rows wrong", bad);
        for (int i = 0; i < L; i++)
            CHECK(s.pos[3 * i] == i && s.pos[3 * i + 1] == 0 && s.tags[i] == tags[i], "text row %d",
                  i);
        double gw0 = ((1 - rw) / 2) * 32, gw4 = ((1 - rw) / 2 + 4 * rw / 5) * 32;
        for (int c = 0; c < 2; c++)
            for (int a = 0; a < La; a++) {
                int r = s.lay.audio_start + c * La + a;
                CHECK(fabs(s.pos[3 * r] - (L + a)) < 1e-12 && s.pos[3 * r + 1] == 0 &&
                          fabs(s.pos[3 * r + 2] - (c ? gw4 : gw0)) < 1e-12 && s.tags[r] == 2,
                      "audio row %d", r);
            }
        if (nk) { /* first at L; last at L + span(F) - 5/3 = last pixel frame time */
            double span = 0;
            for (int j = 0; j < F; j++)
                span += (j % 5 == 0) ? 5.0 / 3 : 20.0 / 3;
            CHECK(fabs(s.pos[3 * s.lay.cond_start] - L) < 1e-12, "first keyframe time");
            CHECK(fabs(s.pos[3 * (s.lay.cond_start + S)] - (L + span - 5.0 / 3)) < 1e-12,
                  "last keyframe time %.6f", s.pos[3 * (s.lay.cond_start + S)]);
        }
        vdn_seq_timesteps(&s, 0.25f, 0.5f);
        CHECK(s.n_t == (nk ? 3 : 2), "unique timesteps %d", s.n_t);
        CHECK(s.t_values[s.t_index[0]] == 0.25f, "text gets t_v");
        CHECK(s.t_values[s.t_index[s.lay.audio_start]] == 0.5f, "audio gets t_a");
        CHECK(s.t_values[s.t_index[s.lay.video_start]] == 0.25f, "video gets t_v");
        if (nk) CHECK(s.t_values[s.t_index[s.lay.cond_start]] == 0.999f, "keyframe gets 0.999");
        for (int i = 1; i < s.n_t; i++)
            CHECK(s.t_values[i - 1] < s.t_values[i], "sorted");
        vdn_seq_free(&s);
    }
    /* spec's derived grid at 48x84: step ~1.00791, h 3.905..27.087, w -5.166..36.158 */
    double g[42];
    vdn_rope_grid(g, 48, 2, 48, 84);
    CHECK_NEAR(g[0], 3.905, 1e-3, "h grid start");
    CHECK_NEAR(g[23], 27.087, 1e-3, "h grid end");
    vdn_rope_grid(g, 84, 2, 48, 84);
    CHECK_NEAR(g[0], -5.166, 1e-3, "w grid start");
    CHECK_NEAR(g[41], 36.158, 1e-3, "w grid end");
}

static void test_sigma_grid(void) {
    /* spec 4 (derived): 8 NFE grids, shift 12 and 3 */
    const double v12[9] = {1, .98824, .97297, .95238, .92308, .87805, .8, .63158, 0};
    const double v3[9] = {1, .95455, .9, .83333, .75, .64286, .5, .3, 0};
    float s[64];
    CHECK(vdn_sigma_grid(s, 9, 12.0f) == 9, "video grid length");
    for (int i = 0; i < 9; i++)
        CHECK_NEAR(s[i], v12[i], 6e-6, "video sigma");
    CHECK(vdn_sigma_grid(s, 9, 3.0f) == 9, "audio grid length");
    for (int i = 0; i < 9; i++)
        CHECK_NEAR(s[i], v3[i], 6e-6, "audio sigma");
    int m = vdn_sigma_grid(s, 51, 12.0f);
    CHECK(m == 51 && s[50] == 0.0f && s[0] == 1.0f, "50 NFE grid has 51 points");
    /* Euler: x0 = x + sigma v; x' = r x + (1-r) x0 */
    float x[3] = {1, -2, 0.5f}, v[3] = {0.3f, 0.1f, -1};
    float t = 1 - 0.8f, sg = 0.8f, sn = 0.63158f;
    double r = (double)sn / sg;
    double ref[3];
    for (int i = 0; i < 3; i++)
        ref[i] = r * x[i] + (1 - r) * (x[i] + 0.8 * v[i]);
    vdn_euler_step(x, v, 3, t, sg, sn);
    CHECK_REL(ref, x, 3, 1e-6, "euler step");
    /* noise: seeded, deterministic, roughly standard normal */
    vdn_rng a, b;
    static float na[20000], nb[20000];
    vdn_rng_seed(&a, 42), vdn_rng_seed(&b, 42);
    vdn_rng_normal(&a, na, 20000), vdn_rng_normal(&b, nb, 20000);
    CHECK(memcmp(na, nb, sizeof na) == 0, "noise not deterministic");
    double mean = 0, var = 0;
    for (int i = 0; i < 20000; i++)
        mean += na[i] / 20000.0;
    for (int i = 0; i < 20000; i++)
        var += (na[i] - mean) * (na[i] - mean) / 20000.0;
    CHECK(fabs(mean) < 0.03 && fabs(var - 1) < 0.05, "noise moments %g %g", mean, var);
}

/* DIFF-MP: snap up to 17n+5 (loop as the reference), latent (n-5)//17*5+2, audio round(n/24*40) */
static void test_frames(void) {
    for (int f = 1; f <= 400; f++) {
        int snap = f;
        while (snap % 17 != 5)
            snap++;
        CHECK(vdn_snap_frames(f) == snap, "snap(%d) = %d, expected %d", f, vdn_snap_frames(f),
              snap);
        CHECK(vdn_latent_frames(f) == (snap - 5) / 17 * 5 + 2, "latent(%d)", f);
        CHECK(vdn_audio_latents(f) == (int)lround(snap / 24.0 * 40.0), "audio(%d)", f);
    }
    CHECK(vdn_latent_frames(345) == 102 && vdn_audio_latents(345) == 575, "345 -> 102, 575");
    CHECK(vdn_latent_frames(56) == 17, "56 -> 17 latent frames");
}

int main(void) {
    test_frames();
    test_patchify();
    test_positions();
    test_sigma_grid();
    return test_done("test_ops");
}
