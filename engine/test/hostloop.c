/* The render loop's own host work, without a model: a test-only op-layer device (null_device.h,
 * registered under the name "cuda", the way kernels/ provides its device) whose ops cost nothing
 * and whose products are zero, so the velocities are zero. What remains of each NFE's time is the
 * engine's work around the model (per-row timesteps, the index uploads, the Euler updates on the
 * device, progress), the part a GPU render pays on the host.
 *
 *   engine_hostloop DIR                 test: small request, checks below, no timing asserted
 *   engine_hostloop DIR --h3 [--steps K] [--threads N] [--frames N --height H --width W]
 *                                        bench: H3-sized request (345 frames at 768x1344 ->
 *                                        102 x 48 x 84 latents, 103,903 rows with 512 text rows)
 *
 * Checks (both modes): what crosses to the device per NFE is at most the two per-row index
 * vectors and the timestep values (positions, latents and masks go once, before the first NFE),
 * nothing comes back until the end (the latents stay on the device); with zero velocity the
 * Euler update keeps x up to rounding (x0 = x, then r x + (1 - r) x), so the output is compared
 * with the seeded noise, regenerated here, to one float32 rounding per step). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "check.h"
#include "null_device.h"
#include "ckpt_init.h"
#include "engine.h"
#include "safetensors.h"
#include "sampler.h"
#include "seq.h"
#include "vdn_util.h"

typedef struct {
    double *host_s; /* per NFE: its seconds (the null device's ops cost only the zero fills) */
    double nfe_total;
    int n;
} timing;

static int on_progress(void *user, int done, int total, double secs) {
    timing *t = user;
    (void)total;
    t->host_s[done - 1] = secs;
    t->nfe_total += secs;
    t->n = done;
    return 0;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "/tmp/vdn_hostloop";
    int steps = 4, frames = 56, height = 64, width = 96, prompt_tokens = 0;
    vdn_engine_opts eo = {.backend = VDN_BACKEND_CUDA}; /* the null device stands in */
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--h3"))
            steps = 8, frames = 345, height = 768, width = 1344, prompt_tokens = 512;
        else if (i + 1 < argc && !strcmp(argv[i], "--threads"))
            eo.threads = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--steps"))
            steps = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--frames"))
            frames = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--height"))
            height = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--width"))
            width = atoi(argv[++i]);
        else {
            fprintf(stderr, "engine_hostloop: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    char ck[512], prompt[600], out[600], path[700], err[VDN_ERR_LEN];
    snprintf(ck, sizeof ck, "%s/ckpt", dir);
    snprintf(prompt, sizeof prompt, "%s/prompt.safetensors", ck);
    snprintf(out, sizeof out, "%s/out", dir);
    vdn_ckpt_init_opts o = {
        .preset = "tiny", .out = ck, .seed = 5, .vdn = 1, .prompt_tokens = prompt_tokens};
    if (vdn_ckpt_init(&o, err, sizeof err) != 0) {
        fprintf(stderr, "ckpt init: %s\n", err);
        return 1;
    }
    CHECK(vdn_dev_backend_register(null_device()) == 0, "register");
    vdn_engine *eng = vdn_engine_open(ck, NULL, 0, &eo, err, sizeof err);
    CHECK(eng != NULL, "open: %s", err);
    if (!eng) return test_done("engine_hostloop");
    const vdn_config *c = vdn_engine_config(eng);
    vdn_render_request rq = {.prompt_cache = prompt,
                             .frames = frames,
                             .height = height,
                             .width = width,
                             .steps = steps,
                             .seed = 21,
                             .out_prefix = out};
    timing tm = {vdn_xcalloc((size_t)steps, sizeof(double)), 0, 0};
    double t0 = vdn_now();
    int rc = vdn_engine_render(eng, &rq, on_progress, &tm, err, sizeof err);
    double total = vdn_now() - t0;
    CHECK(rc == 0, "render: %s", err);
    CHECK(tm.n == steps, "progress %d of %d", tm.n, steps);
    CHECK(!strcmp(vdn_engine_backend_name(eng), "cuda"), "the stand-in renders");
    /* per NFE: the changed indices of ada_idx and t_idx (int32, one per row each) and the <= 4
     * timestep values, nothing else; nothing read back before the end */
    const int F0 = vdn_latent_frames(frames), S0 = (height / 32) * (width / 32);
    const size_t rows_max = (size_t)(prompt_tokens > 600 ? prompt_tokens : 600) + (size_t)F0 * S0 +
                            (size_t)2 * vdn_audio_latents(frames) + (size_t)4 * S0;
    CHECK(g_null.syncs == steps, "%d syncs for %d NFE", g_null.syncs, steps);
    CHECK(g_null.max_nfe_set_bytes <= 8 * rows_max + 16,
          "an NFE sent %zu bytes to the device (at most the two index vectors, %zu)",
          g_null.max_nfe_set_bytes, 8 * rows_max + 16);
    CHECK(g_null.nfe_get_bytes == 0, "%zu bytes read back during the loop", g_null.nfe_get_bytes);
    CHECK(g_null.setup_set_bytes > 4 * (size_t)F0 * S0 * 4 * 24,
          "the latents went up before the first NFE (%zu bytes)", g_null.setup_set_bytes);
    printf("engine_hostloop: to the device: %.2f MB before the first NFE, at most %zu bytes per "
           "NFE after it\n",
           g_null.setup_set_bytes / 1e6, g_null.max_nfe_set_bytes);

    /* timing report: the engine's own work per NFE, outside the forward */
    double sum = 0, mx = 0;
    for (int k = 0; k < tm.n; k++)
        sum += tm.host_s[k], mx = tm.host_s[k] > mx ? tm.host_s[k] : mx;
    const int F = vdn_latent_frames(frames), lh = height / 16, lw = width / 16;
    printf("engine_hostloop: %d px frames %dx%d -> %d x %d x %d latents, %d NFE: render %.3f s, "
           "host work per NFE mean %.2f ms, max %.2f ms (the model's ops cost nothing); before and "
           "after "
           "the loop %.3f s\n",
           frames, height, width, F, lh, lw, steps, total, 1e3 * sum / (tm.n ? tm.n : 1), 1e3 * mx,
           total - tm.nfe_total);

    /* output = seeded noise after `steps` Euler updates with v = 0, recomputed here */
    const int Cv = c->in_channels, La = vdn_audio_latents(frames);
    const size_t nv = (size_t)Cv * F * lh * lw, na = (size_t)2 * La * c->audio_channels;
    float *noise = vdn_xmalloc(sizeof(float) * (nv + na + 1));
    vdn_rng rng;
    vdn_rng_seed(&rng, 21);
    vdn_rng_normal(&rng, noise, nv);
    vdn_rng_normal(&rng, noise + nv, na);
    snprintf(path, sizeof path, "%s.safetensors", out);
    vdn_st_file *f = rc == 0 ? vdn_st_open(path, err, sizeof err) : NULL;
    CHECK(rc != 0 || f != NULL, "output: %s", err);
    if (f) {
        const vdn_st_entry *ev = vdn_st_find(f, "video");
        float *got = vdn_xmalloc(sizeof(float) * nv);
        CHECK(ev && ev->numel == (int64_t)nv && vdn_st_to_f32(f, ev, got, err, sizeof err) == 0,
              "video tensor: %s", err);
        /* float64: x stays x up to one rounding per step (r x + (1 - r) x) */
        double worst = 0;
        for (size_t i = 0; i < nv; i++) {
            double d = fabs((double)got[i] - noise[i]) / (fabs(noise[i]) + 1e-30);
            worst = d > worst ? d : worst;
        }
        CHECK(worst <= steps * 2.4e-7, "zero velocity moved the video by %.3g (relative)", worst);
        free(got);
        vdn_st_close(f);
    }
    free(noise);
    free(tm.host_s);
    vdn_engine_close(eng);
    return test_done("engine_hostloop");
}
