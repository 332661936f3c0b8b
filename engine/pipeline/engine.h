/* The engine's public face: load a checkpoint once, render many requests. Used by `vdn render`,
 * the worker and eval. Everything numerical lives behind this. */
#ifndef VDN_ENGINE_H
#define VDN_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "dit.h" /* vdn_dit_opts */
#include "precision.h"
#include "prompt.h"
#include "seq.h"

typedef enum { VDN_BACKEND_AUTO = 0, VDN_BACKEND_CPU, VDN_BACKEND_CUDA } vdn_backend_kind;

typedef struct {
    const char *prompt_cache; /* safetensors: prompt_embeds (L,text_dim), text_token_tags (L,) [+
                                 keyframes] */
    /* The prompt cache already loaded by the caller (dit/prompt.h vdn_prompt_load with this
     * checkpoint's text_dim; borrowed for the call), so a job reads it once: the render then
     * reads no file and prompt_cache only names it in messages and the run record. NULL: the
     * render loads prompt_cache. */
    const vdn_prompt *prompt;
    int frames;        /* pixel frames; snapped up to 17n+5 like the official pipeline */
    int height, width; /* pixels, multiples of 32 */
    int steps;         /* model evaluations (NFE); the sigma grid has steps + 1 points */
    uint64_t seed;
    const char *variant;    /* "vdn" (default when the checkpoint has a branch), "dense",
                               "vdn-no-anchors", "window-only", "vdn-additive" */
    float video_shift;      /* 0 = checkpoint default (12.0) */
    float audio_shift;      /* 0 = checkpoint default (3.0) */
    const char *noise_file; /* optional safetensors: noise_video (24,F,H,W), noise_audio (2L,32) */
    const char
        *out_prefix; /* writes PREFIX.safetensors (video, audio) and PREFIX.json (run record) */
    /* Resumable renders (the worker's snapshots; docs/engine.md "Snapshots and resume"). */
    const struct vdn_render_state *resume; /* NULL = start from the noise; else continue it */
    int (*snapshot)(void *user, const struct vdn_render_state *state); /* NULL = none */
    void *snapshot_user;
    int snapshot_every_nfe;        /* a snapshot after every K-th NFE (0 = by time only) */
    double snapshot_every_seconds; /* or once this much loop time passed since the last one */
    /* vdn_engine_render_group: profile the collectives of the last N model evaluations (comm.h
     * vdn_comm.profile: a device sync and a barrier more per collective, so time the others);
     * the times land in vdn_engine_nfe_times. 0 = none (the worker's renders). */
    int comm_profile_last;
    /* The caller's stop request (cancel.h), checked before each model evaluation and between the
     * DiT's blocks: the render fails with "cancelled" within a block's time of it being set,
     * its device memory freed. NULL: only the progress callback cancels. */
    const atomic_int *cancel;
} vdn_render_request;

/* The sampler between two model evaluations: everything a bit-identical continuation needs
 * beyond the request itself (noise, sigma grids, sequence and keyframe conditioning are rebuilt
 * from the request and the seed). Latents in the loop's own layouts: video as its patch rows
 * (n_video floats), audio as its 2 x audio-latents rows of audio channels (n_audio floats).
 * A plain struct: the caller serializes it however it likes. */
typedef struct vdn_render_state {
    int step;  /* model evaluations done; the next one evaluates sigma[step] */
    int steps; /* the request's steps (a resume must match) */
    size_t n_video, n_audio;
    float *video, *audio; /* snapshot callback: valid during the call only */
} vdn_render_state;

/* Called after each NFE (k of n done, seconds for that NFE). Return nonzero to cancel the render,
 * which then fails with "cancelled". Called on the rendering thread. */
typedef int (*vdn_progress_fn)(void *user, int nfe_done, int nfe_total, double nfe_seconds);

typedef struct vdn_engine vdn_engine;

/* How an engine is opened: every choice is the caller's and belongs to the engine it opens (no
 * process-wide setting; but see threads). A zeroed struct (or NULL) is the default: auto
 * backend, the first GPU, default threads, one rank, bf16. */
typedef struct {
    vdn_backend_kind backend; /* AUTO: cuda when built in and available, else cpu */
    int device;               /* GPU ordinal among the visible ones (<= 0: the first); the CPU
                                 backend ignores it. A worker opens one engine per GPU this way. */
    /* CPU worker threads for the cpu backend's big products and the render's host work (noise,
     * Euler updates). 0 = default: 2 with the cpu backend, the online cores up to 8 with another
     * backend (whose forward leaves the cores idle). The op layer's CPU thread count is still
     * one per process (ops.h vdn_ops_set_threads says why): opening sets it, so engines opened
     * in one process should ask for the same count. */
    int threads;
    /* Sequence parallelism: the forward sharded over this many in-process ranks (threads, each
     * with its own device on the same memory: the CPU or the one GPU; spec 6,
     * engine/dit/dit_shard.c). 0 or 1 = the plain forward; at most 64. Equal to the plain forward
     * up to rounding. */
    int ranks;
    /* Numerical precision of the DiT's large Linears (issue 13): bf16 (the default: the release's
     * bf16 weights; the cpu backend's oracle in fp32) or fp8 (q/k/v, to_out, FFN, to_out_linear,
     * the refiner and context_embedder quantised to e4m3 with row scales once at load, their
     * inputs per row at each call; dit.h vdn_dit_weights_quantize_fp8). On the cpu backend fp8
     * runs the quantised oracle (the same bytes and scales as CUDA, float64 sums). The engine
     * keeps it for its life (vdn_engine_precision). */
    vdn_precision precision;
    /* The forward's experiment switches (dit.h: feed-forward piece rows, linear-branch heads per
     * pass, one lane), for every render of this engine; zeroed = the defaults. */
    vdn_dit_opts dit;
    /* A VDN checkpoint's base when its model_spec.json's base.source is not there (ckpt.h
     * vdn_ckpt_open; the vdn command gives VDN_BASE_DIR); NULL: none. */
    const char *base_dir;
} vdn_engine_opts;

/* NULL opts = a zeroed vdn_engine_opts. */
vdn_engine *vdn_engine_open(const char *checkpoint_dir, const char *const *extra_adapters,
                            int n_extra, const vdn_engine_opts *opts, char *err, size_t errlen);
/* An engine over weights from any source instead of a checkpoint folder (dit.h's
 * vdn_weight_source; cfg gives the shapes): `vdn bench --whole` renders the real H3 with random
 * weights this way. label names the weights in run records (where a checkpoint's identity goes);
 * such an engine has no adapters. */
struct vdn_weight_source;
vdn_engine *vdn_engine_open_source(const vdn_config *cfg, const struct vdn_weight_source *src,
                                   const char *label, const vdn_engine_opts *opts, char *err,
                                   size_t errlen);
/* Bytes of device memory the engine holds now (allocations through the op layer: weights and
 * activations; on the CPU backend, host memory). */
uint64_t vdn_engine_memory_used(const vdn_engine *eng);
void vdn_engine_close(vdn_engine *eng);
const vdn_config *vdn_engine_config(const vdn_engine *eng);
const char *vdn_engine_identity(const vdn_engine *eng); /* checkpoint identity hash (or label) */
/* bytes of device memory the op layer held at most since the engine opened */
uint64_t vdn_engine_memory_peak(const vdn_engine *eng);
const char *vdn_engine_backend_name(const vdn_engine *eng); /* "cpu" | "cuda" */

/* The precision the engine was opened with (vdn_engine_opts.precision). */
vdn_precision vdn_engine_precision(const vdn_engine *eng);

/* 0 on success; -1 with a message in err. Safe to call repeatedly on one engine.
 * Snapshots: when req->snapshot is set, it is called on the rendering thread after the NFEs the
 * request's snapshot_every_* pick (never after the last), before that NFE's progress call. A
 * nonzero return is logged and the render goes on. With req->resume the render starts at
 * resume->step; on one backend the outputs equal an uninterrupted render's bit for bit, and
 * progress counts on from resume->step. */
int vdn_engine_render(vdn_engine *eng, const vdn_render_request *req, vdn_progress_fn progress,
                      void *user, char *err, size_t errlen);

/* Where a request leaves the official pipeline's range (spec 1.1): frames not 17n+5 (rounded
 * up), a duration outside 5-15 s at 24 fps (after rounding), an area above 768 x 1344, an aspect
 * ratio outside 1:4..4:1. Not errors (sides that are not multiples of 32 are: vdn_engine_render
 * refuses them); vdn_engine_render logs each as a WARNING and lists them in the run record's
 * "warnings". Writes up to max messages; returns how many were written. */
#define VDN_REQ_WARN_LEN 256
int vdn_request_warnings(const vdn_render_request *req, char (*msgs)[VDN_REQ_WARN_LEN], int max);

/* The official frame/audio arithmetic (vdn_snap_frames, ...) is seq.h's. */

/* The op-layer device the engine renders on (op.h): a model that runs beside the DiT on the same
 * GPU (the worker's VAE decoders) uses it, so its memory counts with the engine's. One thread at
 * a time: the engine's renders and that model's calls must not overlap. */
struct vdn_dev *vdn_engine_device(vdn_engine *eng);

/* ---- one clip on several GPUs (sequence parallelism, spec 6) ---- */

/* Whether engs[0..n-1] can render one clip together, one rank each: the same checkpoint and
 * backend, no virtual ranks, and a communicator between their devices: in-process on the CPU
 * backend (host memory); NCCL between GPUs where it is built in (VDN_HAVE_NCCL). Returns the
 * communicator's name ("inproc", "nccl"), or NULL with why not (a CUDA build without NCCL: the
 * in-process one cannot move data between GPUs). n = 1: "none". */
const char *vdn_engine_group_check(vdn_engine *const *engs, int n, char *why, size_t len);
/* vdn_engine_render with the forward sharded over the n engines (rank r on engs[r]'s device with
 * its own copy of the weights): every rank steps its own copy of the latents; rank 0's are
 * written. On the CPU the result equals a one-engine render bit for bit. The run record is
 * engs[0]'s; progress and snapshots come from rank 0. vdn_engine_last_fault of each engine says
 * which device failed. n = 1 is vdn_engine_render. */
int vdn_engine_render_group(vdn_engine *const *engs, int n, const vdn_render_request *req,
                            vdn_progress_fn progress, void *user, char *err, size_t errlen);

/* What the last render (vdn_engine_render, or this engine's rank of vdn_engine_render_group) spent
 * on each model evaluation on this engine's device: out[k] for NFE k (k < the request's steps;
 * before a resume's first NFE, zeros). The collective fields are this rank's: calls and bytes
 * always, wait and collective seconds only for the NFEs the request profiled (comm_profile_last;
 * else 0). compute = nfe - wait - collective (kernels, launches, the Euler step). Returns the
 * number of entries written (at most max): the NFEs the render got through. */
typedef struct {
    double nfe_s;        /* wall time of the evaluation on this rank, device sync included */
    double wait_s;       /* in barriers before collectives: waiting for the slowest rank */
    double collective_s; /* in the collectives once every rank arrived, device time included */
    int profiled;        /* 1 when the two above were measured */
    int64_t collectives; /* collective calls this rank made in the evaluation */
    uint64_t bytes;      /* payload received from the other ranks */
} vdn_nfe_time;
int vdn_engine_nfe_times(const vdn_engine *eng, vdn_nfe_time *out, int max);
/* Start the engine's peak memory (vdn_engine_memory_peak) again from what it holds now, so a
 * benchmark reads the peak of each render apart. */
void vdn_engine_memory_reset_peak(vdn_engine *eng);

/* ---- failures (the worker's failure blame) ---- */

/* What the last vdn_engine_render's failure came from, as the op layer recorded it on the
 * engine's devices (op.h vdn_dev_fault_kind), never guessed from the message: NONE when the
 * render succeeded or failed outside the devices (a request, a prompt cache, a file), MEMORY when
 * a device ran out of memory, DEVICE when a device itself failed (a CUDA, cuBLAS or NCCL error:
 * its context may be unusable). */
typedef enum {
    VDN_ENGINE_FAULT_NONE = 0,
    VDN_ENGINE_FAULT_MEMORY,
    VDN_ENGINE_FAULT_DEVICE
} vdn_engine_fault;
vdn_engine_fault vdn_engine_last_fault(const vdn_engine *eng);
/* Test hook (the worker's VDN_TEST_GPU_FAULT): from now on every linear op on the engine's
 * devices fails as on a GPU that hit an illegal memory access, through the backend's own failure
 * path (a DEVICE fault with the CUDA backend's words). Call between renders or from a progress
 * callback, on the rendering thread. */
void vdn_engine_inject_device_fault(vdn_engine *eng);

#define VDN_ENGINE_VERSION "0.1.0"

#endif
