/* The coordinator daemon's state: options, the database, the two ROUTER sockets and the workers
 * connected now. One thread (the main loop) does all of it; the ZAP handler is the only other
 * thread and touches nothing here but the key lists. */
#ifndef VDN_COORD_H
#define VDN_COORD_H

#include <signal.h>
#include <sqlite3.h>
#include <stdint.h>

#include "cost.h"
#include "vdn.pb-c.h"

typedef struct {
    const char *db_path;
    const char *bind;        /* workers' ROUTER */
    const char *client_bind; /* clients' ROUTER */
    const char *store_uri;   /* sent in ASSIGN; NULL = the worker's own --store */
    const char *keys_dir;    /* NULL = no CURVE (loopback only) */
    double lease_seconds;
    double heartbeat_seconds;
    int max_attempts;       /* ended attempts that were not lost with their worker (jobs.h) */
    int max_worker_faults;  /* attempts lost with their worker (killed, vanished, GPU fault) */
    int blocklist_failures; /* consecutive failed/expired attempts before a time-out */
    double blocklist_seconds;
    /* crash blame (docs/cluster.md "Crash blame"): crashes in a job's record that quarantine it
     * even all on one worker; how long a worker's renderer crashes count against it */
    int max_crashes;
    double crash_window;
    /* what a request may cost, checked at submit (cost.h): --gpu-memory-limit (the GPU size
     * while no registered worker advertises GPU memory, memfit.h), --max-job-seconds,
     * --max-job-memory, and the rate table (--job-rate) */
    cost_caps caps;
    /* limits on what peers may make it hold (docs/cluster.md "Limits") */
    int max_workers;        /* --max-workers: worker ids known at once */
    int max_jobs_per_batch; /* --max-jobs-per-batch */
    int max_prompt_chars;   /* --max-prompt-chars: a text prompt's characters (code points) */
    /* hung renders: an attempt with no PROGRESS for max(stall_seconds, stall_factor x its last
     * NFE's seconds) is stopped and blamed by the evidence (0 = never) */
    double stall_seconds;
    double stall_factor;
} coord_opts;

#define COORD_MAX_GPUS 64
#define COORD_MAX_HOLDS 128

/* An attempt a worker holds (running, or being stopped), and on which of its GPUs. */
typedef struct {
    int64_t attempt, job; /* job 0: not known (a stale attempt a worker still runs) */
    uint64_t mask;        /* bit i: GPU position i */
    double cancel_sent;   /* when we told it to stop, 0 = not */
    double started;       /* monotonic */
    double est_seconds;   /* estimated render time when placed, < 0 unknown */
    double pixels;        /* frames x height x width of the request, 0 unknown */
    int nfe_done, nfe_total;
    double nfe_seconds;   /* the last NFE's */
    double last_progress; /* monotonic: assigned, or its last PROGRESS */
    int timeout;          /* the request's "timeout" in seconds, 0 = none */
} chold;

typedef struct {
    int index; /* as the worker numbers it (nvidia-smi) */
    char name[64];
    uint64_t memory; /* bytes */
    uint64_t used;   /* bytes in use, from its last HEARTBEAT */
    /* the least in use while free since READY: what the engine keeps loaded (weights, VAEs);
     * 0 = not reported. The submit check (memfit.h) counts the rest as room for a render. */
    uint64_t resident;
    int out_of_service;
    char fault[160];
} cgpu;

typedef struct {
    char id[128];
    uint8_t ident[256]; /* ZeroMQ routing id of its DEALER */
    size_t ident_len;
    int ngpus; /* GPUs it reported (0: a CPU worker, placed as one slot) */
    cgpu gpu[COORD_MAX_GPUS];
    int per_gpu;         /* runs a job per GPU set (READY.per_gpu); else one job at a time */
    uint64_t gpu_memory; /* smallest GPU */
    char checkpoint[256];
    char identity[160];
    char backend[32];    /* READY.backend: "cpu" (stand-in GPUs too) or "cuda" */
    unsigned precisions; /* bit p: a DiT engine at precision p (READY.precisions; bf16 if none) */
    chold hold[COORD_MAX_HOLDS]; /* attempts it holds; may already be cancelled in the DB */
    int nhold;
    int64_t reserved_for; /* job the placement holds GPUs back for here, 0 = none */
    uint64_t reserved_mask;
    double reserved_deadline; /* monotonic time it is expected to start; < 0 unknown */
    double rate;      /* observed seconds per NFE per pixel-frame on this worker, 0 = none */
    double last_seen; /* monotonic */
    double last_hb_sent;
    double last_saved;    /* monotonic time its row was last written (last_seen) */
    double blocked_until; /* wall clock */
    int draining;         /* `vdn drain`: stored, survives restarts */
    int stopping;         /* the worker itself says it drains (SIGTERM): READY/HEARTBEAT draining */
    int connected;
    uint64_t store_retries; /* its store operations cured by a retry, as its process reported */
} cworker;

typedef struct coord {
    coord_opts o;
    sqlite3 *db;
    void *ctx, *wsock, *csock;
    cworker *w;
    int nw;
    int curve;
    double rate;       /* seconds per NFE per pixel-frame over the farm (EMA), 0 = none yet */
    double waiting_at; /* monotonic time queued jobs' reasons were last written (waiting.h) */
} coord;

/* coord_worker.c */
/* user: the connection's ZAP user id ("ROLE:NAME", keys.h; NULL without CURVE) */
void coord_on_worker_frame(coord *c, const uint8_t *ident, size_t ident_len, const char *user,
                           const void *body, size_t len);
void coord_tick(coord *c);
void coord_schedule(coord *c);
void coord_recover(coord *c); /* at start: requeue running attempts whose lease is past */
cworker *coord_worker_by_id(coord *c, const char *id);
void coord_send_cancel(coord *c, int64_t attempt, const char *worker_id, const char *reason);
void coord_worker_save(coord *c, cworker *w);

/* coord_api.c */
void coord_on_client_frames(coord *c, const uint8_t *ident, size_t ident_len, int delimited,
                            const char *user, const void *body, size_t len);

/* zap.c: starts the ZAP handler for `ctx` with the keys under keys_dir. */
typedef struct zap_handler zap_handler;
zap_handler *zap_start(void *ctx, const char *keys_dir, char *err, size_t errlen);
void zap_stop(zap_handler *z); /* after zmq_ctx_shutdown */
/* Re-reads the authorized key folders (SIGHUP); on error the old lists stay. */
int zap_reload(zap_handler *z, char *err, size_t errlen);

#endif
