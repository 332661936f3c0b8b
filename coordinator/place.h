/* Placement: which queued jobs start now, on which GPUs of which worker. Pure (no database, no
 * sockets) so the policy is tested on its own (coordinator/test/test_place.c).
 *
 * A k-GPU job runs on k free GPUs of one worker. Jobs are considered in queue order (priority,
 * then submit time). The first job that cannot start now gets a reservation (as SLURM's backfill
 * does): the worker where k GPUs are expected free soonest, at time T, from the estimated
 * remaining time of the jobs running there. Later jobs may still start on that worker only if
 * they cannot delay it: their estimated duration ends by T, or they use GPUs the reserved job
 * will not need at T (spare = free now + freed by T - k). A job whose duration cannot be
 * estimated, or a T that cannot (a running job with no estimate), never counts as "ends by T",
 * so a big job at the head of the queue is never starved by a stream of small ones. Estimates:
 * place_estimate (docs/cluster.md "Placement"). */
#ifndef VDN_COORD_PLACE_H
#define VDN_COORD_PLACE_H

#include <stddef.h>
#include <stdint.h>

#define PLACE_MAX_GPUS 64

typedef struct {
    const char *id;                    /* the worker's id (place_job.avoid), NULL = none */
    int n;                             /* GPU positions (a CPU worker: one) */
    int in_service[PLACE_MAX_GPUS];    /* 0: out of service (a CUDA error) */
    int busy[PLACE_MAX_GPUS];          /* held by an attempt */
    double release_in[PLACE_MAX_GPUS]; /* busy: estimated seconds until free, < 0 unknown */
    uint64_t memory[PLACE_MAX_GPUS];   /* bytes; 0 = unknown (a CPU slot) */
    int eligible;                      /* connected, not draining, not blocklisted */
    int one_job;                       /* runs one job at a time on all its GPUs */
    const char *checkpoint, *identity; /* what it loaded */
    unsigned precisions; /* bit p: it has a DiT engine at precision p (precision.h); 0 = bf16 only
                            (a worker older than Ready.precisions) */
    char **blocked;      /* job classes it gets none of for now (worker faults: worker_blocks) */
    int nblocked;
    double rate; /* seconds per NFE per pixel-frame (frames x height x width); 0 = unknown */
} place_worker;

typedef struct {
    int64_t id;
    int gpus;                         /* >= 1 */
    uint64_t min_memory;              /* per GPU, 0 = any */
    const char *checkpoint;           /* NULL or "" = any */
    int precision;                    /* the DiT's (vdn_precision); 0 = bf16 */
    const char *job_class;            /* CHECKPOINT/VARIANT/2^k (jobs.job_class), NULL = none */
    int steps, frames, height, width; /* 0 = not given (no estimate) */
    const char *avoid; /* the worker its last attempt was lost with: another one that can take
                          it now is preferred; NULL = none */
} place_job;

typedef struct {
    int job, worker; /* indices into the arrays given to place_plan */
    uint64_t mask;   /* bit i: GPU position i of the worker */
} place_pick;

typedef struct {
    int job, worker; /* -1: no reservation */
    int64_t job_id;  /* the job's id (place_job.id) */
    double start_in; /* estimated seconds until it can start, < 0 unknown */
    uint64_t mask;   /* GPUs held back for it (free now or freed first) */
} place_reservation;

/* Whether w loaded the DiT at this precision (vdn_precision): a job of that precision goes only
 * to such a worker. */
int place_has_precision(const place_worker *w, int precision);

/* Whether none of the workers could ever take j, whatever they run now and whether or not they
 * take work (draining, blocklisted): by checkpoint, DiT precision, GPU count or GPU memory, in
 * that order. 0 when one could; 1 with *field set to the request's field that no worker meets
 * ("checkpoint", "precision", "gpus", "min_gpu_memory") and why[] saying so ("no worker has
 * checkpoint X", "no worker renders precision fp8", "no worker with 2 GPUs (at most 1)"). */
int place_unfit(const place_worker *ws, int nw, const place_job *j, const char **field, char *why,
                size_t len);

/* Estimated seconds a job takes on a worker: steps x frames x height x width x rate. < 0 when
 * the job lacks a size or the worker (and the farm) has no observed rate yet. */
double place_estimate(const place_worker *w, const place_job *j);

/* Fills picks (at most maxpicks) with the jobs to start now, marking their GPUs busy in ws, and
 * res with the reservation in force (res->job = -1: none). prev (or NULL): the reservation of
 * the last plan, its start_in brought up to now; when it is for the same job, it keeps its
 * worker and its deadline (the deadline only moves earlier). Returns the number of picks. */
int place_plan(place_worker *ws, int nw, const place_job *js, int nj, place_pick *picks,
               int maxpicks, const place_reservation *prev, place_reservation *res);

#endif
