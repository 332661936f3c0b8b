/* Latents file -> mp4, frames, WAV, poster (decode.h). */
#include "decode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mp4.h"
#include "safetensors.h"
#include "still.h"
#include "vae.h"
#include "vdn_util.h"

static const vdn_st_entry *find_any(vdn_st_file *f, const char *a, const char *b) {
    const vdn_st_entry *e = vdn_st_find(f, a);
    return e ? e : vdn_st_find(f, b);
}

typedef struct {
    int quiet;
    const char *what;
    const atomic_int *cancel; /* vdn_decode_opts.cancel */
} progress_ctx;

static int on_progress(void *user, int done, int total) {
    const progress_ctx *p = user;
    if (!p->quiet) fprintf(stderr, "vdn decode: %s %d/%d\n", p->what, done, total);
    return vdn_cancelled(p->cancel);
}

struct vdn_decoder {
    vdn_dev *dev;
    vdn_video_vae *vv;
    vdn_audio_vae *av; /* NULL: no audio VAE */
    const char *vae_dir, *audio_vae_dir;
    char *dirs; /* owns the two names (decoders opened by the worker outlive its options) */
};

vdn_decoder *vdn_decoder_open(vdn_dev *dev, const char *vae_dir, const char *audio_vae_dir,
                              vdn_precision precision, char *err, size_t errlen) {
    if (!vae_dir) {
        vdn_fail(err, errlen, "no video VAE folder (--vae DIR or a checkpoint with vae/)");
        return NULL;
    }
    vdn_decoder *d = vdn_xcalloc(1, sizeof *d);
    d->dev = dev;
    size_t nv = strlen(vae_dir) + 1, na = audio_vae_dir ? strlen(audio_vae_dir) + 1 : 0;
    d->dirs = vdn_xmalloc(nv + na + 1);
    memcpy(d->dirs, vae_dir, nv);
    d->vae_dir = d->dirs;
    if (audio_vae_dir) {
        memcpy(d->dirs + nv, audio_vae_dir, na);
        d->audio_vae_dir = d->dirs + nv;
    }
    if (!(d->vv = vdn_video_vae_load_precision(dev, vae_dir, precision, err, errlen)) ||
        (audio_vae_dir && !(d->av = vdn_audio_vae_load(dev, audio_vae_dir, err, errlen)))) {
        vdn_decoder_close(d);
        return NULL;
    }
    return d;
}

vdn_precision vdn_decoder_precision(const vdn_decoder *d) {
    return vdn_video_vae_precision(d->vv);
}

void vdn_decoder_close(vdn_decoder *d) {
    if (!d) return;
    vdn_audio_vae_free(d->av);
    vdn_video_vae_free(d->vv);
    free(d->dirs);
    free(d);
}

/* the latents' tensors, checked against the VAEs */
typedef struct {
    const vdn_st_entry *ve, *ae;
    int C, T, h, w, F;
} latents_info;

static int check_latents(const vdn_decoder *d, vdn_st_file *lf, const vdn_decode_opts *o,
                         latents_info *li, char *err, size_t errlen) {
    const vdn_st_entry *ve = li->ve = find_any(lf, "video", "latents");
    const vdn_st_entry *ae = li->ae = find_any(lf, "audio", "audio_latents");
    if (!ve)
        return vdn_fail(
            err, errlen,
            "%s: no video latents (tensor \"video\" (C, T, h, w) or \"latents\" (1, C, T, h, w))",
            o->latents);
    const int off = ve->ndim == 5 ? 1 : 0;
    if (!((ve->ndim == 4) || (ve->ndim == 5 && ve->shape[0] == 1)))
        return vdn_fail(err, errlen,
                        "%s: tensor %s: %d dims, expected (C, T, h, w) or (1, C, T, h, w)",
                        o->latents, ve->name, ve->ndim);
    li->C = (int)ve->shape[off], li->T = (int)ve->shape[off + 1];
    li->h = (int)ve->shape[off + 2], li->w = (int)ve->shape[off + 3];
    if (ae && (ae->ndim != 3 || ae->shape[0] < 1 || ae->shape[0] > 2))
        return vdn_fail(err, errlen,
                        "%s: tensor %s: expected (channels, C, La) with 1 or 2 channels",
                        o->latents, ae->name);
    if (!d) return 0; /* the shapes alone (before the VAEs load) */
    const vdn_vae_video_config *vc = vdn_video_vae_config(d->vv);
    if (li->C != vc->latent_channels)
        return vdn_fail(err, errlen,
                        "%s: tensor %s has %d latent channels, the video VAE (%s) takes %d",
                        o->latents, ve->name, li->C, d->vae_dir, vc->latent_channels);
    char ferr[512];
    if ((li->F = vdn_video_vae_frames(d->vv, li->T, ferr, sizeof ferr)) < 0)
        return vdn_fail(err, errlen, "%s: tensor %s: %s", o->latents, ve->name, ferr);
    if (d->av && ae && ae->shape[1] != vdn_audio_vae_config(d->av)->latent_channels)
        return vdn_fail(err, errlen,
                        "%s: tensor %s has %lld latent channels, the audio VAE (%s) takes %d",
                        o->latents, ae->name, (long long)ae->shape[1], d->audio_vae_dir,
                        vdn_audio_vae_config(d->av)->latent_channels);
    if (ae && !d->av && !o->quiet)
        fprintf(stderr, "vdn decode: no audio VAE: the video will have no sound\n");
    return 0;
}

/* The members of a group hold copies of the same VAEs (the same folders), each on its own device
 * (the VAE decoders check the devices and configs again). */
static int check_group(vdn_decoder *const *d, int n, char *err, size_t errlen) {
    if (n < 1 || n > VDN_VAE_MAX_GROUP)
        return vdn_fail(err, errlen, "decode: a group of %d decoders (expected 1 to %d)", n,
                        VDN_VAE_MAX_GROUP);
    for (int i = 1; i < n; i++) {
        const char *a0 = d[0]->audio_vae_dir, *ai = d[i]->audio_vae_dir;
        if (strcmp(d[i]->vae_dir, d[0]->vae_dir) || !a0 != !ai || (a0 && strcmp(a0, ai)))
            return vdn_fail(err, errlen,
                            "decode: decoder %d of the group has the VAEs of %s%s%s, decoder 0 "
                            "those of %s%s%s (a group decodes with copies of the same VAEs)",
                            i, d[i]->vae_dir, ai ? " and " : "", ai ? ai : "", d[0]->vae_dir,
                            a0 ? " and " : "", a0 ? a0 : "");
    }
    return 0;
}

static int decode_open(vdn_decoder *const *dg, int nd, vdn_st_file *lf, const vdn_decode_opts *o,
                       vdn_decode_share *share, char *err, size_t errlen) {
    vdn_decoder *d = dg[0];
    latents_info li;
    if (check_group(dg, nd, err, errlen) || check_latents(d, lf, o, &li, err, errlen)) return -1;
    vdn_video_vae *vv[VDN_VAE_MAX_GROUP];
    vdn_audio_vae *av[VDN_VAE_MAX_GROUP];
    for (int i = 0; i < nd; i++) {
        vv[i] = dg[i]->vv;
        av[i] = dg[i]->av;
        vdn_dev_clear_fault(dg[i]->dev); /* what the devices record from here is this decode's */
    }
    const vdn_st_entry *ve = li.ve, *ae = d->av ? li.ae : NULL;
    const vdn_vae_video_config *vc = vdn_video_vae_config(d->vv);
    const int T = li.T, h = li.h, w = li.w, F = li.F;
    float *z = NULL, *za = NULL, *frames = NULL, *wave = NULL;
    int rc = -1, wrote_mp4 = 0, wrote_frames = 0, wrote_wav = 0;
    if (!o->quiet) {
        fprintf(stderr, "vdn decode: decoding on %s", vdn_dev_name(d->dev));
        for (int i = 1; i < nd; i++)
            fprintf(stderr, ", %s", vdn_dev_name(dg[i]->dev));
        if (nd > 1) fprintf(stderr, " (%d devices)", nd);
        fprintf(stderr, "%s\n",
                vdn_decoder_precision(d) == VDN_PRECISION_FP8 ? ", video decoder at fp8" : "");
    }
    /* decode */
    z = vdn_xmalloc(sizeof(float) * (size_t)ve->numel);
    if (vdn_st_to_f32(lf, ve, z, err, errlen)) goto done;
    const int H = h * vc->spatial_ratio, W = w * vc->spatial_ratio;
    frames = malloc(sizeof(float) * 3 * (size_t)F * H * W);
    if (!frames) {
        vdn_fail(err, errlen, "out of memory for %d frames of %dx%d", F, W, H);
        goto done;
    }
    progress_ctx pv = {o->quiet, "video tile", o->cancel};
    double t0 = vdn_now();
    if (vdn_video_vae_decode_group(vv, nd, z, T, h, w, frames, on_progress, &pv,
                                   share ? &share->video : NULL, err, errlen))
        goto done;
    if (share) share->video_s = vdn_now() - t0;
    int64_t n = 0;
    int chans = 0, rate = 0;
    if (ae) {
        const vdn_vae_audio_config *ac = vdn_audio_vae_config(d->av);
        chans = (int)ae->shape[0];
        const int La = (int)ae->shape[2];
        n = (int64_t)La * ac->hop;
        rate = ac->sampling_rate;
        za = vdn_xmalloc(sizeof(float) * (size_t)ae->numel);
        wave = vdn_xmalloc(sizeof(float) * (size_t)(chans * n));
        progress_ctx pa = {o->quiet, "audio channel", o->cancel};
        t0 = vdn_now();
        if (vdn_st_to_f32(lf, ae, za, err, errlen) ||
            vdn_audio_vae_decode_group(av, nd, za, chans, La, wave, on_progress, &pa,
                                       share ? &share->audio : NULL, err, errlen))
            goto done;
        if (share) share->audio_s = vdn_now() - t0;
    }
    t0 = vdn_now();
    /* write: the mp4 first (the product), then the extras; a failure removes what this call wrote
     */
    if (o->mp4) {
        vdn_mp4_opts mo = {.width = W, .height = H, .crf = o->crf, .sample_rate = rate};
        if (wave) {
            mo.left = wave;
            mo.right = chans == 2 ? wave + n : wave;
            mo.n_samples = n;
        }
        if (vdn_mp4_write(o->mp4, frames, F, &mo, err, errlen)) goto done;
        wrote_mp4 = 1;
    }
    if (o->frames_out) {
        vdn_st_tensor t = {"frames", VDN_DT_F32, 4, {3, F, H, W}, frames};
        vdn_st_kv meta[1] = {{"vae", d->vae_dir}};
        if (vdn_st_write(o->frames_out, &t, 1, meta, 1, err, errlen)) goto done;
        wrote_frames = 1;
    }
    if (o->wav) {
        if (!wave) {
            vdn_fail(err, errlen, "%s: no waveform to write (%s)", o->wav,
                     li.ae ? "no audio VAE" : "the latents have no audio");
            goto done;
        }
        const float *ch[2] = {wave, chans == 2 ? wave + n : wave};
        if (vdn_wav_write_f32(o->wav, ch, 2, n, rate, err, errlen)) goto done;
        wrote_wav = 1;
    }
    if (o->poster && vdn_poster_png3(o->poster, frames, F, H, W, err, errlen)) goto done;
    if (share) share->write_s = vdn_now() - t0;
    if (!o->quiet)
        fprintf(stderr, "vdn decode: %d frames %dx%d%s%s\n", F, W, H,
                wave ? ", stereo audio" : ", no audio", o->mp4 ? "" : " (no mp4 asked)");
    rc = 0;
done:
    if (rc) {
        if (wrote_mp4) unlink(o->mp4);
        if (wrote_frames) unlink(o->frames_out);
        if (wrote_wav) unlink(o->wav);
    }
    free(z);
    free(za);
    free(frames);
    free(wave);
    return rc;
}

int vdn_decoder_decode_group(vdn_decoder *const *d, int n, const vdn_decode_opts *o,
                             vdn_decode_share *share, char *err, size_t errlen) {
    if (share) memset(share, 0, sizeof *share);
    vdn_st_file *lf = vdn_st_open(o->latents, err, errlen);
    if (!lf) return -1;
    int rc = decode_open(d, n, lf, o, share, err, errlen);
    vdn_st_close(lf);
    return rc;
}

int vdn_decoder_decode(vdn_decoder *d, const vdn_decode_opts *o, char *err, size_t errlen) {
    return vdn_decoder_decode_group(&d, 1, o, NULL, err, errlen);
}

int vdn_decode_file(const vdn_decode_opts *o, char *err, size_t errlen) {
    if (!o->vae_dir)
        return vdn_fail(err, errlen, "no video VAE folder (--vae DIR or a checkpoint with vae/)");
    vdn_st_file *lf = vdn_st_open(o->latents, err, errlen);
    if (!lf) return -1;
    const int nd = o->devices > 1 ? o->devices : 1;
    if (nd > VDN_VAE_MAX_GROUP) {
        vdn_st_close(lf);
        return vdn_fail(err, errlen, "--devices %d: expected 1 to %d", nd, VDN_VAE_MAX_GROUP);
    }
    vdn_dev *dev[VDN_VAE_MAX_GROUP] = {0};
    vdn_decoder *d[VDN_VAE_MAX_GROUP] = {0};
    int rc = -1;
    latents_info li;
    /* the latents' shapes before any VAE loads; the audio VAE only for latents with audio */
    if (check_latents(NULL, lf, o, &li, err, errlen)) goto done;
    const char *backend = o->backend;
    if (!backend || !strcmp(backend, "auto")) { /* the GPU when there is one */
        char e2[256];
        dev[0] = vdn_dev_open("cuda", 0, 0, e2, sizeof e2);
        backend = dev[0] ? "cuda" : "cpu";
    }
    /* devices 0 .. nd-1 of the backend (cuda: GPUs 0 .. nd-1; cpu: nd host devices), each with
     * its own copy of the VAEs */
    for (int i = 0; i < nd; i++) {
        char e2[VDN_ERR_LEN];
        if (!dev[i] && !(dev[i] = vdn_dev_open(backend, i, 0, e2, sizeof e2))) {
            if (nd > 1)
                vdn_fail(err, errlen, "device %d of the %d asked (--devices): %s", i, nd, e2);
            else
                vdn_fail(err, errlen, "%s", e2);
            goto done;
        }
        if (!(d[i] = vdn_decoder_open(dev[i], o->vae_dir, li.ae ? o->audio_vae_dir : NULL,
                                      o->precision, err, errlen)))
            goto done;
    }
    rc = decode_open(d, nd, lf, o, NULL, err, errlen);
done:
    for (int i = 0; i < nd; i++) {
        vdn_decoder_close(d[i]);
        if (dev[i]) vdn_dev_close(dev[i]);
    }
    vdn_st_close(lf);
    return rc;
}
