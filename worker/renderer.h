/* Renderer processes (docs/cluster.md "Crash blame"). The worker daemon (loop.c) holds the
 * coordinator's socket, the leases and the upload gate; the engines and the attempts live in
 * renderer processes it starts and supervises, one per group of GPU slots (a slot each at start;
 * a k-GPU job's slots share one, as its engines must be in one process). A renderer that dies
 * (a segfault, an abort, a fatal CUDA error) takes with it only the attempts that ran in it: the
 * daemon fails those with the fault CRASH and starts a new renderer over the same slots.
 *
 * A renderer is this same program run again (fork + exec: CUDA does not survive a fork), with
 * the command the program gives (vdn_worker_opts.renderer_exe and renderer_argv) plus "FD
 * PARENT_PID": fd is its
 * end of a socketpair to the daemon (relay.h), and it dies with the daemon (PR_SET_PDEATHSIG). */
#ifndef VDN_WORKER_RENDERER_H
#define VDN_WORKER_RENDERER_H

#include <stdint.h>
#include <sys/types.h>

#include "attempt.h"
#include "relay.h"

/* ---- the renderer process ---- */

/* The renderer's main: reads its config from fd, opens the engines of its slots, says hello,
 * then runs the attempts the daemon starts until the daemon closes fd (or dies). parent: the
 * daemon's pid (a renderer whose parent is already gone exits at once). Returns the exit code. */
int vdn_worker_renderer(int fd, long parent, vdn_score_fn score);

/* ---- the daemon's handle of one ---- */

typedef struct {
    pid_t pid;             /* 0: not running */
    int fd;                /* the daemon's end (non-blocking) */
    int pos[VDN_MAX_GPUS]; /* the worker-wide slots it renders on */
    int npos;
    int hello;       /* 1: its engines loaded (its "hello" came) */
    int attempts;    /* running in it now */
    int idle_deaths; /* it died with no attempt in it, in a row */
    double started;
    uint64_t store_retries; /* its process's (relay "state") */
    vdn_relay_buf rb;
} vdn_renderer;

/* Starts a renderer over slots pos[] (cfg: the worker's config; its GPU list is filled here from
 * gpus, or the CPU slot) and sends it the config. exe, argv: the command that runs a renderer.
 * 0, or -1 with err (no process left behind). */
int vdn_renderer_spawn(vdn_renderer *r, const char *exe, const char *const *argv, const int *pos,
                       int npos, const vdn_relay_config *cfg, const vdn_gpu_list *gpus, char *err,
                       size_t errlen);
/* Asks it to stop (closes the daemon's end) and waits for it up to patience_s, then SIGKILL.
 * how (optional) gets how it ended. */
void vdn_renderer_stop(vdn_renderer *r, double patience_s, char *how, size_t howlen);
/* After its socket reported end of file: reaps the process (SIGKILL after 5 s: a renderer that
 * closed its socket but lives on is of no use), says how it ended ("signal 11 (Segmentation
 * fault)", "exit status 3", "exit status 0"). Returns 1 when it was killed by a signal or exited
 * other than 0. */
int vdn_renderer_reap(vdn_renderer *r, char *how, size_t howlen);

#endif
