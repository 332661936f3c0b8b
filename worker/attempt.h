/* One attempt of one job, run on its own thread of a renderer process (renderer.h): fetch the
 * prompt cache, render with the engine, upload the outputs through the store. It publishes
 * progress and its outcome under a mutex and wakes the renderer's loop through an eventfd; the
 * renderer relays them to the worker daemon, which alone talks to the coordinator. */
#ifndef VDN_WORKER_ATTEMPT_H
#define VDN_WORKER_ATTEMPT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "blame.h"
#include "decode.h"
#include "engine.h"
#include "gpus.h"
#include "prompt_text.h"
#include "store.h"
#include "vdn_util.h"

/* A scoring job's work (worker.h vdn_worker_opts.score): reads what `spec` (JSON) names from the
 * job's store st, works in scratch, writes its result to out_path (uploaded by the worker as the
 * job's record). 0; -1 with a message: the job's fault (a missing output, a bad spec); -2: the
 * store's (another attempt may succeed). */
typedef int (*vdn_score_fn)(const char *spec, vdn_store *st, const char *scratch,
                            const char *out_path, char *err, size_t errlen);

/* What the coordinator asked for, copied out of the ASSIGN so the envelope can be freed. */
typedef struct {
    uint64_t job_id, attempt_id, batch_id;
    char *prompt_cache;  /* local path, file:// or s3:// URI, or a key in the job's store */
    char *prompt;        /* text, used when prompt_cache is empty: encoded through the cache */
    char *variant;       /* NULL = engine default */
    char *noise_file;    /* NULL = none */
    char *first_frame;   /* keyframe pictures, as prompt_cache: local path, URI or store key; */
    char *last_frame;    /*   NULL = none */
    char *kind;          /* NULL / "render", or "score": an eval scoring job */
    char *score;         /* its work (JSON) */
    char *store_uri;     /* NULL = the worker's --store */
    char *output_prefix; /* used to name keys when the coordinator sent none */
    char **keys;         /* output keys: one ending .json (run record), one .safetensors */
    int nkeys;
    int save_latents; /* store the latents beside the mp4 (request save_latents); a job without
                         a video VAE stores them anyway: they are its only output */
    int frames, height, width, steps;
    uint64_t seed;
    float video_shift, audio_shift;
    char *resume_key; /* newest sampler snapshot of the job (ASSIGN resume_key), NULL = none */
    /* the worker's policy, not owned: */
    double snapshot_seconds;       /* a snapshot after this much render time (0 = by count) */
    int snapshot_every;            /* or after every K NFEs (0 = by time only) */
    const char *const *data_roots; /* local paths a request may name live under these */
    int n_data_roots;
    vdn_score_fn score_fn; /* scoring jobs' work; NULL: this worker takes none */
    /* what this worker process removed at its start: scratch folders of workers that are gone
     * (the run record's "cleaned", docs/formats.md) */
    int stale_scratch_folders;
    uint64_t stale_scratch_bytes;
} vdn_assignment;

void vdn_assignment_free(vdn_assignment *s);

typedef enum {
    VDN_ATTEMPT_RENDERING = 0,
    VDN_ATTEMPT_UPLOAD_WAIT, /* rendered; waits for the main loop's vdn_attempt_gate() */
    VDN_ATTEMPT_UPLOADING,
    VDN_ATTEMPT_FINISHED
} vdn_attempt_phase;

/* Store handles kept across jobs (opening an s3:// store is cheap but not free). One set per
 * GPU slot (slots.h): touched only by the job thread of that slot, one at a time. */
typedef struct {
    vdn_store_opts opts; /* retry budget etc. for every store opened */
    char *default_uri;
    vdn_store *dflt;
    char *other_uri;
    vdn_store *other;
    struct vdn_worker_text *text; /* the worker's text prompts (shared by its slots, not owned) */
} vdn_worker_stores;

/* Text prompts (text/prompt_text.h), one set per renderer process, shared by all its slots: one
 * tokenizer and one table of the prompts being encoded, so jobs on different GPUs missing the
 * same prompt at once encode it once (across the worker's renderer processes through flight
 * locks in its scratch). Each miss encodes on the job's own first GPU (its engine's device).
 * Opened on the first text prompt from the checkpoint's tokenizer/ and text_encoder/; owned and
 * closed by vdn_slots, before the engines whose devices it may hold an encoder on. */
typedef struct vdn_worker_text {
    pthread_mutex_t mu; /* guards the open */
    const char *checkpoint;
    vdn_text_prompts_opts opts; /* precision: the text encoder's (vdn worker --text-precision) */
    struct vdn_text_prompts *p;
} vdn_worker_text;

void vdn_worker_text_init(vdn_worker_text *t, const char *checkpoint, vdn_precision precision,
                          const vdn_text_prompts_opts *opts);
/* The worker's text prompts, opened now if this is the first text prompt; NULL + err when the
 * checkpoint has no text encoder (tried again on the next text prompt). */
struct vdn_text_prompts *vdn_worker_text_get(vdn_worker_text *t, char *err, size_t errlen);
void vdn_worker_text_close(vdn_worker_text *t);

void vdn_worker_stores_close(vdn_worker_stores *c);

/* What an attempt renders and decodes with: the engines of the GPUs its ASSIGN names (one per
 * GPU, each with its own copy of the weights; eng[0] first), and their slots' decoders. */
typedef struct {
    vdn_engine *eng[VDN_MAX_GPUS];
    int index[VDN_MAX_GPUS]; /* their GPUs' nvidia-smi indices (-1: the CPU slot), for the logs */
    int n;
    /* the VAEs on eng[r]'s device; NULL: none (latents only) or not loaded. A job decodes over
     * the decoders of all its GPUs (dec[0] must be there; another GPU without one sits out). */
    vdn_decoder *dec[VDN_MAX_GPUS];
    const char *dec_err;   /* why dec[0]'s did not load ("" or NULL: the checkpoint has none) */
    uint64_t decode_fault; /* test hook (VDN_TEST_DECODE_FAULT): bit r: eng[r]'s device faults
                              in the decode (vdn_engine_inject_device_fault before it) */
} vdn_attempt_gpus;

typedef struct {
    vdn_assignment spec;
    vdn_attempt_gpus gpus;
    vdn_engine *eng; /* gpus.eng[0], used by one job at a time */
    vdn_worker_stores *stores;
    char scratch[2048];  /* this attempt's private directory, removed at the end */
    int upload_attempts; /* whole-upload retries on top of the store's own retries */
    int nfe_delay_ms;    /* test hook: sleep after each NFE so tests can hit a live render */
    int poison;          /* test hook (VDN_TEST_POISON_SEED): abort() the process at the first
                            NFE, as a renderer crash would (docs/cluster.md "Crash blame") */
    int inject_fault;    /* test hook (VDN_TEST_GPU_FAULT): after the first NFE the engine's
                            device faults (vdn_engine_inject_device_fault), as a GPU would */

    char snap_prefix[1100]; /* store prefix of the job's snapshots (KEY.snapshots/) */
    int scratch_leftover;   /* a folder of an earlier run of this attempt was removed at start */
    char fingerprint[2048]; /* what a snapshot must match to be resumed from (snapshot.h) */

    pthread_t thread;
    int efd;           /* eventfd: written whenever the state below changes */
    atomic_int cancel; /* set by the main loop (CANCEL, stale, second SIGTERM) */
    double started;    /* vdn_now() at start */

    pthread_mutex_t mu; /* guards everything below */
    vdn_attempt_phase phase;
    int gate; /* upload permission: 0 = not yet, 1 = go, -1 = refused */
    pthread_cond_t gate_cv;
    int nfe_done, nfe_total;
    int resumed_from;    /* NFEs taken from a snapshot (0 = started from noise) */
    char snap_key[1200]; /* the newest snapshot this attempt stored ("" = none yet) */
    int snap_step;
    double *nfe_seconds; /* per NFE, grown as the engine reports */
    int nfe_cap;
    int ok, retryable;
    vdn_fault fault;       /* on failure: whose fault (retryable = fault != VDN_FAULT_JOB) */
    vdn_store_op store_op; /* on failure: the store operation it came from (NONE: not the store) */
    int gpu_fault;         /* on failure: the GPU itself failed (blame.h): take it out of service */
    uint64_t gpu_fault_mask; /* which of gpus.eng[] failed (bit r: rank r's GPU) */
    char reason[VDN_ERR_LEN];
    char *record_json;   /* on success */
    char *outputs_store; /* on success: the URI of the store the outputs (and snapshots) are in */
    char **object_keys;  /* on success: the keys written */
    int n_object_keys;
} vdn_attempt;

/* Starts the thread. Takes ownership of spec. NULL with err on failure (spec then freed). */
vdn_attempt *vdn_attempt_start(vdn_assignment *spec, const vdn_attempt_gpus *gpus,
                               vdn_worker_stores *stores, const char *scratch_root,
                               int upload_attempts, char *err, size_t errlen);
/* Main loop -> render thread: may the outputs go to the store (1) or not (0)? The loop grants
 * it only while it believes the attempt is still ours: a worker that was frozen or cut off
 * past its lease must not overwrite the objects of the attempt that replaced it. */
void vdn_attempt_gate(vdn_attempt *j, int go);

/* Store operations of this process that failed and then succeeded on a retry: the store's own
 * request retries (store.h vdn_store_retried_ok) plus whole uploads the worker tried again
 * (upload_attempts) and got through. Sent with every HEARTBEAT. */
uint64_t vdn_worker_store_retries(void);

/* Joins the thread (call once the phase is FINISHED, or after setting cancel) and frees. */
void vdn_attempt_free(vdn_attempt *j);

/* Resolves the output keys of a spec: the coordinator's keys when given, else PREFIX.safetensors
 * and PREFIX.json. Picks which is the record (.json) and which the latents (.safetensors).
 * -1 with an error when the keys do not name exactly one of each. */
/* A local path a request names, confined to the worker's --data-root folders (roots.c): the
 * path must lie under a root as spelled (no "", "." or ".." parts); the file is opened from a
 * descriptor of that root without following any symlink (openat2 RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS, else openat walks with O_NOFOLLOW), must be a regular file of at most
 * VDN_ROOT_COPY_MAX bytes, and is copied to dest (0600, the attempt's private scratch): the
 * render reads only that copy, so a symlink swapped in or a file truncated under the root
 * afterwards can neither escape the root nor fault a mapping (SIGBUS). 0, or -1 saying why
 * (none configured, outside them, a symlink on the way, missing, too big). */
#define VDN_ROOT_COPY_MAX (4ull << 30)
int vdn_root_copy(const char *path, const char *const *roots, int nroots, const char *dest,
                  char *err, size_t errlen);

int vdn_attempt_output_keys(const vdn_assignment *s, const char **latents_key,
                            const char **record_key, char *buf, size_t buflen, char *err,
                            size_t errlen);

#endif
