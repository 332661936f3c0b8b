#include "slots.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "vdn_util.h"

typedef struct {
    vdn_slot *slot;
    vdn_engine_opts eo; /* backend, device (the slot's CUDA ordinal), threads */
    const vdn_slots_opts *o;
    char err[VDN_ERR_LEN];
} open_job;

/* The VAEs beside the checkpoint's transformer/, on the engine's device (the CPU slot's: the CPU,
 * as `vdn decode --cpu`). A checkpoint without vae/ is fine: its jobs store latents only. */
static void open_decoder(open_job *j) {
    vdn_slot *s = j->slot;
    char vdir[4096], adir[4096], err[VDN_ERR_LEN];
    const char *ck = j->o->checkpoint;
    if (!ck || vdn_vae_find(ck, "vae", vdir, sizeof vdir) != 0) return;
    int audio = vdn_vae_find(ck, "audio_vae", adir, sizeof adir) == 0;
    s->dec = vdn_decoder_open(vdn_engine_device(s->eng), vdir, audio ? adir : NULL,
                              j->o->vae_precision, err, sizeof err);
    if (!s->dec) {
        snprintf(s->dec_err, sizeof s->dec_err, "the VAEs did not load at start: %.200s", err);
        VDN_ERROR("worker: %s %d (%s): %s; its jobs will fail at decode",
                  s->index < 0 ? "slot" : "GPU", s->index, s->name, s->dec_err);
        return;
    }
    VDN_INFO("worker: GPU %d (%s): VAEs loaded on %s (video at %s%s), kept for every job here",
             s->index, s->name, vdn_dev_name(vdn_engine_device(s->eng)),
             vdn_precision_name(j->o->vae_precision), audio ? " + audio" : "");
}

static void close_engines(vdn_slot *s) {
    for (int p = 0; p < VDN_PRECISION_COUNT; p++) {
        vdn_engine_close(s->by_precision[p]);
        s->by_precision[p] = NULL;
    }
    s->eng = NULL;
}

/* every precision asked for, or none: a slot that cannot render some of its worker's jobs would
 * take them and fail each one */
static void *open_thread(void *arg) {
    open_job *j = arg;
    vdn_slot *s = j->slot;
    for (int p = 0; p < VDN_PRECISION_COUNT; p++) {
        if (!(j->o->precisions >> p & 1u)) continue;
        j->eo.precision = (vdn_precision)p;
        char err[VDN_ERR_LEN - 32];
        s->by_precision[p] = vdn_engine_open(j->o->checkpoint, j->o->adapters, j->o->n_adapters,
                                             &j->eo, err, sizeof err);
        if (!s->by_precision[p]) {
            snprintf(j->err, sizeof j->err, "%s engine: %s", vdn_precision_name(j->eo.precision),
                     err);
            close_engines(s);
            return NULL;
        }
        if (!s->eng) s->eng = s->by_precision[p];
    }
    if (s->eng) open_decoder(j);
    return NULL;
}

unsigned vdn_slots_precisions(const vdn_slots *sl) {
    return sl->precisions;
}

int vdn_slots_open(vdn_slots *sl, const vdn_gpu_list *gpus, const vdn_slots_opts *o, char *err,
                   size_t errlen) {
    memset(sl, 0, sizeof *sl);
    vdn_slots_opts oo = *o;
    if (!oo.precisions) oo.precisions = 1u << VDN_PRECISION_BF16;
    o = &oo; /* the jobs below point at it until they are joined */
    sl->precisions = oo.precisions;
    vdn_worker_text_init(&sl->text, o->checkpoint, o->text_precision,
                         &o->text_prompts); /* tokenizer, encoder */
    const int cpu = o->cpu;
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
        if (o->store_uri) s->stores.default_uri = vdn_xstrdup(o->store_uri);
        s->stores.opts.retry_max_seconds = o->store_retry_s;
        s->stores.text = &sl->text;
        jobs[i] = (open_job){.slot = s,
                             .eo = {.backend = s->index < 0 ? VDN_BACKEND_CPU : VDN_BACKEND_AUTO,
                                    .device = s->index < 0 ? -1
                                              : o->devices ? o->devices[i]
                                                           : i,
                                    .threads = o->threads,
                                    .base_dir = o->base_dir},
                             .o = o};
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

void vdn_slots_describe(vdn_slots *sl, const vdn_gpu_list *gpus, int cpu) {
    memset(sl, 0, sizeof *sl);
    sl->n = cpu || gpus->n == 0 ? 1 : gpus->n;
    for (int i = 0; i < sl->n; i++) {
        vdn_slot *s = &sl->s[i];
        if (cpu || gpus->n == 0) {
            s->index = -1;
            snprintf(s->name, sizeof s->name, "cpu");
        } else {
            s->index = gpus->gpu[i].index;
            snprintf(s->name, sizeof s->name, "%s", gpus->gpu[i].name);
            s->memory = gpus->gpu[i].memory_mib << 20;
        }
    }
}

void vdn_slots_close(vdn_slots *sl) {
    vdn_worker_text_close(&sl->text); /* an encoder it kept may live on an engine's device */
    for (int i = 0; i < sl->n; i++) {
        vdn_decoder_close(sl->s[i].dec); /* before its device goes with the engine */
        close_engines(&sl->s[i]);
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
