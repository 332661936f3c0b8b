/* The worker daemon: one process drives every GPU it is given, one engine per GPU (slots.h), and
 * runs a job per GPU set at once. The main loop (loop.c) is the only thread that touches the
 * ZeroMQ socket; the engines and renders live in renderer processes it supervises (renderer.h),
 * one per group of GPUs, so that a crash costs only the job that was in it. See docs/protocol.md
 * for the conversation and docs/cluster.md to deploy. */
#ifndef VDN_WORKER_H
#define VDN_WORKER_H

#include "attempt.h" /* vdn_score_fn */
#include "engine.h"  /* vdn_precision */
#include "gpus.h"
#include "prompt_text.h"

typedef struct {
    const char *connect;         /* coordinator worker endpoint, tcp://HOST:5555 */
    const char *checkpoint;      /* checkpoint dir, loaded once at start */
    const char *checkpoint_name; /* what READY calls it; default: the dir's last component */
    const char *store;           /* default store for outputs (an ASSIGN may name another) */
    const char *id;              /* worker id; default HOST-gSPEC or HOST-cpu */
    const char *key;             /* CURVE: this worker's secret key file (NAME.key) */
    const char *server_key;      /* CURVE: the coordinator's public key file */
    const char *scratch;         /* private dir for downloads and outputs before upload */
    const char *adapters[16];    /* extra PEFT adapters folded at load */
    int n_adapters;
    int cpu;                /* force the CPU backend and report no GPUs */
    int sel[64];            /* --gpus selection */
    int nsel;               /* -1 = every GPU nvidia-smi lists */
    double heartbeat_s;     /* seconds between heartbeats */
    int liveness;           /* heartbeats of silence before the coordinator counts as gone */
    double reconnect_max_s; /* cap on the reconnect backoff */
    int upload_attempts;    /* whole-upload retries on top of the store's own */
    int threads;            /* CPU backend threads, 0 = the engine's default */
    double store_retry_s;   /* cap on one store request's retry backoff, 0 = the store's (120 s) */
    double
        snapshot_seconds; /* sampler snapshot after this much render time (default 60, 0 = off) */
    int snapshot_every;   /* or after every K NFEs (0 = by time only) */
    const char *data_roots[16]; /* local paths a request names must lie under one of these */
    int n_data_roots;
    vdn_precision text_precision;       /* the text encoder's: bf16 (default) or fp8 */
    vdn_text_prompts_opts text_prompts; /* their keep policy and test hook (cli/env.h) */
    const char *base_dir;        /* a VDN checkpoint's base elsewhere (VDN_BASE_DIR; engine.h) */
    vdn_precision vae_precision; /* the video decoder's: bf16 (default) or fp8 */
    unsigned precisions; /* the DiT's (--precision): bit p = an engine at vdn_precision p on every
                            GPU; default bf16 only */
    /* Scoring jobs (request kind "score", eval's): the work is done by this function, given by
     * the program that runs the worker (the vdn CLI gives eval's; the worker library does not
     * know eval). NULL: such jobs fail as this worker's set-up. */
    vdn_score_fn score;
    /* The command that runs a renderer process (renderer.h): renderer_exe (this program again:
     * /proc/self/exe, the very binary even when the file was replaced since) with renderer_argv
     * (argv[0] first: what ps shows), in the mode that calls vdn_worker_renderer with the two
     * arguments the daemon appends (its relay fd and its own pid). Given by the program (the vdn
     * CLI: vdn worker --renderer). */
    const char *renderer_exe;
    const char *const *renderer_argv;
    /* tests (VDN_TEST_POISON_SEED to `vdn worker`): a job with this seed makes the renderer it
     * lands on abort() at its first NFE (docs/cluster.md "Crash blame") */
    int test_poison;
    uint64_t test_poison_seed;
} vdn_worker_opts;

/* Parses argv (argv[0] = "worker"). 0 ok, 1 = --help printed, -1 = error printed to err. */
int vdn_worker_parse_args(int argc, char **argv, vdn_worker_opts *o, char *err, size_t errlen);

/* Runs until SIGTERM/SIGINT (see loop.c). Returns the process exit code. */
int vdn_worker_run(const vdn_worker_opts *o);

#endif
