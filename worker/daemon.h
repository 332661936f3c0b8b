/* The worker daemon's state, shared by its main loop (loop.c: the coordinator's socket, leases,
 * the upload gate, reports until ACKed) and its renderer supervision (supervise.c: starting,
 * regrouping, restarting and stopping the renderer processes, renderer.h). Internal to the
 * worker library. */
#ifndef VDN_WORKER_DAEMON_H
#define VDN_WORKER_DAEMON_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "relay.h"
#include "renderer.h"
#include "slots.h"
#include "worker.h"

enum { CANCEL_NONE = 0, CANCEL_BY_COORDINATOR, CANCEL_STALE, CANCEL_SHUTDOWN };

/* A finished attempt's report, kept until ACKed. */
typedef struct {
    uint64_t attempt_id, job_id;
    int ok, retryable, fault;
    int store_op; /* vdn_store_op: the store operation a failure came from, 0 = none */
    char *reason;
    char **keys;
    int nkeys;
    char *record;
    double sent_at; /* vdn_now() of the last send, 0 = not yet sent */
    /* a done job's snapshots, deleted once the coordinator ACKs the RESULT (NULL: none) */
    char *snap_store, *snap_prefix;
} outcome;

/* The daemon's view of an attempt that runs in a renderer process: what the renderer relayed. */
typedef struct {
    struct {
        uint64_t job_id, attempt_id;
    } spec;
    double started;
    int rend; /* its renderer (worker.rend[]) */
    int phase, nfe_done, nfe_total, resumed_from, snap_step;
    char snap_key[1200];
    double *nfe_seconds; /* per NFE, grown as the renderer reports */
    int nfe_cap;
    vdn_relay_state out; /* once phase is FINISHED: the outcome */
} proxy;

/* An attempt rendering now, on the slots (GPUs) in pos[]. */
typedef struct {
    proxy *a;
    int pos[VDN_MAX_GPUS];
    int npos;
    int cancel_why;
    /* Upload gate (see gate_send): `suspect` is set when, since the attempt began, we
     * were frozen, lost the connection or stopped hearing the coordinator's heartbeats; then
     * the outputs wait for a fresh heartbeat of a coordinator that still counts us in. */
    int suspect;
    int gate_state; /* 0 = not asked, 1 = waiting for a heartbeat, 2 = answered */
    double gate_since;
    int progress_sent; /* NFEs already reported */
    int snap_sent;     /* step of its newest snapshot already reported */
} running;

typedef struct {
    const vdn_worker_opts *o;
    void *ctx, *sock;
    vdn_slots slots;
    vdn_gpu_list gpus;
    char scratch[1900];
    char hostname[256];

    running run[VDN_MAX_GPUS];
    int nrun;
    outcome *outs; /* reports waiting for their ACK */
    int nouts;

    double last_heard, last_hb;
    int need_ready;       /* READY not yet through (the connection is still being made) */
    int refused;          /* the coordinator refused us for our key (FORBIDDEN): we stop */
    double ready_sent_at; /* vdn_now() of the last READY that went out */
    double coord_hb_at;   /* when the coordinator's last HEARTBEAT came */
    double coord_gap; /* seconds between its heartbeats, as observed (its --heartbeat-seconds) */
    double backoff, reconnect_at;
    int sigfd;
    int terms;
    double term_at;
    int leave_now;         /* shutting down and nothing left to report */
    vdn_relay_config rcfg; /* what every renderer is given (its GPUs filled in per renderer) */
    const char *renderer_exe;
    const char *const *renderer_argv;
    vdn_renderer rend[VDN_MAX_GPUS]; /* pid 0: a free entry */
    int slot_rend[VDN_MAX_GPUS];     /* the renderer of each slot, -1: none */
    char identity[128], backend[32]; /* the engines', from the first renderer's hello */
    uint64_t store_retries_gone;     /* of renderers that ended */
} worker;

/* loop.c */
running *daemon_find_run(worker *w, uint64_t attempt);
/* A finished attempt (its proxy's outcome filled in): its report kept until ACKed and sent, its
 * GPUs freed (out of service on a GPU fault), its run[] entry removed. */
void daemon_finish_run(worker *w, running *j);
/* Progress, the upload gate and the outcome of one attempt, as its renderer relayed them. */
void daemon_attempt_event(worker *w, running *j);
void daemon_send_heartbeat(worker *w);

/* supervise.c */
/* Starts a renderer per slot and waits until each has loaded its engines or died. 0, or -1
 * with the first error when none loaded. */
int renderers_start(worker *w, char *err, size_t errlen);
/* Stops every renderer (each cancels what still runs in it and exits). */
void renderers_stop(worker *w);
/* The renderer for a job on j's slots (regrouping idle ones when needed); -1 with why. */
int renderers_for(worker *w, running *j, uint64_t attempt, char *why, size_t len);
/* What renderer ri's relay has for us: hello, state; its end (a crash) handled. */
void renderers_readable(worker *w, int ri);

#endif
