/* The worker's GPUs as render slots: one engine (one copy of the weights) per GPU and DiT
 * precision the worker loads (--precision), and which attempt runs on each. The engines live in
 * the renderer processes (renderer.h: each opens the slots of its GPUs, at its start); the
 * daemon keeps the same table without engines (vdn_slots_describe) for READY, HEARTBEAT and
 * placement.
 * The VAEs live on the first engine's device; a job's render, and a text prompt it encodes, on
 * the device of its precision's engine (the slot runs one job at a time). A GPU whose render hit a
 * CUDA error is taken out of service (its engine's context may be poisoned); the other GPUs keep
 * working. A worker without GPUs has one slot on the CPU backend; a stand-in GPU inventory (tests,
 * CI) gets one CPU engine per listed GPU, so the multi-GPU code runs without a GPU. */
#ifndef VDN_WORKER_SLOTS_H
#define VDN_WORKER_SLOTS_H

#include <stdint.h>

#include "attempt.h"
#include "decode.h"
#include "engine.h"
#include "gpus.h"

typedef struct {
    int index;       /* nvidia-smi index (what READY and ASSIGN name); -1 = the CPU slot */
    char name[96];   /* "NVIDIA H200", "cpu" */
    uint64_t memory; /* bytes on the GPU, 0 for the CPU slot */
    /* One engine per precision the worker loads (--precision), each with its own copy of the
     * DiT's weights on this GPU; NULL for a precision not loaded. A job renders on the engine of
     * its request's precision. */
    vdn_engine *by_precision[VDN_PRECISION_COUNT];
    vdn_engine *eng; /* the first of them (its device hosts the VAEs; READY's identity); NULL
                        when the GPU could not be opened (then out of service) */
    /* The checkpoint's VAEs (vae/, audio_vae/ beside transformer/), loaded once on the engine's
     * device, so a job decodes on its own GPU. NULL: the checkpoint has none (jobs store latents
     * only), or they did not load (dec_err says why; such a slot's jobs fail at decode). */
    vdn_decoder *dec;
    char dec_err[256];
    uint64_t memory_used; /* the daemon's table: what its renderer's engines hold there */
    uint64_t attempt;     /* running on it now, 0 = free */
    int out_of_service;   /* a CUDA error happened on it: no more work until a restart */
    char fault[256];
    vdn_worker_stores stores; /* store handles of the job running here (one thread at a time) */
} vdn_slot;

typedef struct {
    int n;
    vdn_slot s[VDN_MAX_GPUS];
    vdn_worker_text text; /* text prompts, shared by the slots; a miss encodes on its job's GPU */
    unsigned precisions;  /* bit p: every slot has an engine at precision p */
} vdn_slots;

typedef struct {
    int cpu; /* the CPU backend even with GPUs */
    const char *checkpoint;
    const char *const *adapters;
    int n_adapters;
    const char *store_uri; /* the default store */
    double store_retry_s;
    vdn_precision text_precision; /* the text encoder's (a miss's encode and every cache key) */
    vdn_text_prompts_opts text_prompts; /* their keep policy and test hook */
    const char *base_dir;               /* vdn_engine_opts.base_dir */
    vdn_precision vae_precision; /* the video decoder's (vae.h vdn_video_vae_load_precision) */
    unsigned precisions;         /* the DiT's: bit p = an engine at precision p (0 = bf16 only) */
    int threads;                 /* CPU threads (vdn_engine_opts.threads; 0 = default) */
    const int *devices; /* CUDA device of gpus->gpu[i] (a renderer holds some of the worker's
                           GPUs, each keeps its worker-wide ordinal); NULL = i */
} vdn_slots_opts;

/* The engines of every GPU of gpus (on the CPU backend when cpu is set or the build/host has
 * no CUDA), one per precision in o->precisions, opened in parallel; no GPUs: one CPU slot. A GPU
 * where one fails to open is out of service with a log line; 0 unless no slot could be opened
 * (then -1 with the first error). */
int vdn_slots_open(vdn_slots *sl, const vdn_gpu_list *gpus, const vdn_slots_opts *o, char *err,
                   size_t errlen);
/* The worker daemon's table of its slots (renderer processes hold the engines, renderer.h):
 * the GPUs of gpus, or the CPU slot, with no engine opened. */
void vdn_slots_describe(vdn_slots *sl, const vdn_gpu_list *gpus, int cpu);
/* The precisions every slot loaded (o->precisions, bf16 when it was 0). */
unsigned vdn_slots_precisions(const vdn_slots *sl);
void vdn_slots_close(vdn_slots *sl);

/* The first engine that opened (for READY's identity and backend). */
vdn_engine *vdn_slots_engine(const vdn_slots *sl);
/* Position of the slot with this GPU index, -1 if none. */
int vdn_slots_find(const vdn_slots *sl, int index);
int vdn_slots_free(const vdn_slots *sl); /* in service and idle */

/* Take slot pos out of service, logging which GPU and why. */
void vdn_slot_fault(vdn_slots *sl, int pos, const char *worker_id, const char *reason);

#endif
