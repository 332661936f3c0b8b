#include "slots.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "vdn_util.h"

typedef struct {
    vdn_slot *slot;
    int device; /* CUDA ordinal: the slot's position among the visible GPUs */
    vdn_backend_kind backend;
    const char *checkpoint;
    const char *const *adapters;
    int n_adapters;
    vdn_precision vae_precision; /* the video decoder's */
    char err[VDN_ERR_LEN];
} open_job;

/* The VAEs beside the checkpoint's transformer/, on the engine's device (the CPU slot's: the CPU,
 * as `vdn decode --cpu`). A checkpoint without vae/ is fine: its jobs store latents only. */
static void open_decoder(open_job *j) {
    vdn_slot *s = j->slot;
    char vdir[4096], adir[4096], err[VDN_ERR_LEN];
    if (!j->checkpoint || vdn_vae_find(j->checkpoint, "vae", vdir, sizeof vdir) != 0) return;
    int audio = vdn_vae_find(j->checkpoint, "audio_vae", adir, sizeof adir) == 0;
    s->dec = vdn_decoder_open(vdn_engine_device(s->eng), vdir, audio ? adir : NULL,
                              j->vae_precision, err, sizeof err);
    if (!s->dec) {
        snprintf(s->dec_err, sizeof s->dec_err, "the VAEs did not load at start: %.200s", err);
        VDN_ERROR("worker: %s %d (%s): %s; its jobs will fail at decode",
                  s->index < 0 ? "slot" : "GPU", s->index, s->name, s->dec_err);
        return;
    }
    VDN_INFO("worker: GPU %d (%s): VAEs loaded on %s (video at %s%s), kept for every job here",
             s->index, s->name, vdn_dev_name(vdn_engine_device(s->eng)),
             vdn_precision_name(j->vae_precision), audio ? " + audio" : "");
}

static void *open_thread(void *arg) {
    open_job *j = arg;
    j->slot->eng = vdn_engine_open_on(j->checkpoint, j->adapters, j->n_adapters, j->backend,
                                      j->device, j->err, sizeof j->err);
    if (j->slot->eng) open_decoder(j);
    return NULL;
}

int vdn_slots_open(vdn_slots *sl, const vdn_gpu_list *gpus, int cpu, const char *checkpoint,
                   const char *const *adapters, int n_adapters, const char *store_uri,
                   double store_retry_s, vdn_precision text_precision, vdn_precision vae_precision,
                   char *err, size_t errlen) {
    memset(sl, 0, sizeof *sl);
    vdn_worker_text_init(&sl->text, checkpoint, text_precision); /* tokenizer, text encoder */
    sl->n = cpu || gpus->n == 0 ? 1 : gpus->n;
    open_job jobs[VDN_MAX_GPUS];
    pthread_t th[VDN_MAX_GPUS];
    int started[VDN_MAX_GPUS] = {0};
    for (int i = 0; i < sl->n; i++) {
        vdn_slot *s = &sl->s[i];
        if (sl->n == 1 && (cpu || gpus->n == 0)) {
            s->index = -1;
            snprintf(s->name, sizeof s->name, "cpu");
        } else {
            s->index = gpus->gpu[i].index;
            snprintf(s->name, sizeof s->name, "%s", gpus->gpu[i].name);
            s->memory = gpus->gpu[i].memory_mib << 20;
        }
        if (store_uri) s->stores.default_uri = vdn_xstrdup(store_uri);
        s->stores.opts.retry_max_seconds = store_retry_s;
        s->stores.text = &sl->text;
        jobs[i] = (open_job){.slot = s,
                             .device = s->index < 0 ? -1 : i,
                             .backend = s->index < 0 ? VDN_BACKEND_CPU : VDN_BACKEND_AUTO,
                             .checkpoint = checkpoint,
                             .adapters = adapters,
                             .n_adapters = n_adapters,
                             .vae_precision = vae_precision};
        /* one at a time would cost 8 x the load; the disk and the page cache are shared */
        started[i] = pthread_create(&th[i], NULL, open_thread, &jobs[i]) == 0;
        if (!started[i]) open_thread(&jobs[i]);
    }
    int ok = 0;
    for (int i = 0; i < sl->n; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        vdn_slot *s = &sl->s[i];
        if (s->eng) {
            ok++;
            continue;
        }
        s->out_of_service = 1;
        snprintf(s->fault, sizeof s->fault, "engine did not open: %s", jobs[i].err);
        if (s->index >= 0)
            VDN_ERROR("worker: GPU %d (%s) out of service: %s", s->index, s->name, s->fault);
    }
    if (ok == 0) {
        for (int i = 0; i < sl->n; i++)
            if (jobs[i].err[0]) {
                vdn_fail(err, errlen, "%s", jobs[i].err);
                break;
            }
        vdn_slots_close(sl);
        return -1;
    }
    /* CPU engines behind a stand-in inventory, or CUDA on some GPUs only: say which */
    for (int i = 0; i < sl->n; i++)
        if (sl->s[i].eng && sl->s[i].index >= 0)
            VDN_DEBUG("worker: GPU %d (%s): engine on %s", sl->s[i].index, sl->s[i].name,
                      vdn_engine_backend_name(sl->s[i].eng));
    return 0;
}

void vdn_slots_close(vdn_slots *sl) {
    vdn_worker_text_close(&sl->text); /* an encoder it kept may live on an engine's device */
    for (int i = 0; i < sl->n; i++) {
        vdn_decoder_close(sl->s[i].dec); /* before its device goes with the engine */
        vdn_engine_close(sl->s[i].eng);
        vdn_worker_stores_close(&sl->s[i].stores);
    }
    memset(sl, 0, sizeof *sl);
}

vdn_engine *vdn_slots_engine(const vdn_slots *sl) {
    for (int i = 0; i < sl->n; i++)
        if (sl->s[i].eng) return sl->s[i].eng;
    return NULL;
}

int vdn_slots_find(const vdn_slots *sl, int index) {
    for (int i = 0; i < sl->n; i++)
        if (sl->s[i].index == index) return i;
    return -1;
}

int vdn_slots_free(const vdn_slots *sl) {
    int n = 0;
    for (int i = 0; i < sl->n; i++)
        n += !sl->s[i].out_of_service && !sl->s[i].attempt;
    return n;
}

void vdn_slot_fault(vdn_slots *sl, int pos, const char *worker_id, const char *reason) {
    vdn_slot *s = &sl->s[pos];
    if (s->out_of_service) return;
    s->out_of_service = 1;
    snprintf(s->fault, sizeof s->fault, "%s", reason);
    int left = 0;
    for (int i = 0; i < sl->n; i++)
        left += !sl->s[i].out_of_service;
    VDN_ERROR("worker %s: GPU %d (%s) OUT OF SERVICE after: %s. Its job failed and is handed back; "
              "%d GPU(s) keep working; restart the worker to bring it back",
              worker_id, s->index, s->name, reason, left);
}
