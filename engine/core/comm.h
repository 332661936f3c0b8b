/* Communicators for sequence parallelism (issue 10; spec 6): P ranks that each own a device and a
 * contiguous shard of the packed sequence's rows, and the collectives the sharded DiT needs, as
 * ops of the op layer.
 *
 * Two layouts of a [S, C] activation (C = heads * head_dim, or any per-row width):
 *  - row-sharded: rank r holds rows [row0(r), row0(r+1)) with every column;
 *  - column-sharded (head-sharded): rank r holds every row with columns [col0(r), col0(r+1)).
 * vdn_op_rows_to_cols and vdn_op_cols_to_rows are the all-to-alls between them;
 * vdn_op_all_gather_rows restores the full sequence on every rank; vdn_op_rows_to_cols_parts moves
 * several row-sharded tensors (some column-split, some gathered whole) in one exchange: one
 * message per pair of ranks instead of one per tensor.
 *
 * Implementations (a table, so that engine/ never depends on NCCL):
 *  - in-process (engine/comm.c): P ranks are threads of one process; each rank's tensors are
 *    reachable by every other rank (host memory on the CPU backend; one GPU's memory for P virtual
 *    ranks on it), so a collective is: sync own device, barrier, copy the peers' pieces, sync,
 *    barrier. Used by CI on the CPU backend and for P virtual ranks on one GPU.
 *  - NCCL (kernels/comm_nccl.cu, optional): one rank per GPU.
 *
 * Every call is collective: all P ranks make the same calls in the same order with matching
 * shapes. A failing rank must still reach the barriers (the in-process group aborts: every later
 * collective of the group fails on every rank, so no thread waits forever). */
#ifndef VDN_COMM_H
#define VDN_COMM_H

#include <stdint.h>

#include "op.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How S rows (or C columns) split over P ranks: contiguous, ceil(S/P) per rank, the remainder on
 * the last (spec 6; a rank may get none when P is large). off[r] .. off[r+1] is rank r's range. */
typedef struct {
    int parts;
    int64_t off[65]; /* parts + 1 offsets */
} vdn_split;
#define VDN_COMM_MAX_RANKS 64
#define VDN_COMM_ID_BYTES 128 /* a device communicator's group id (sizeof(ncclUniqueId)) */
void vdn_split_rows(vdn_split *sp, int64_t n, int parts);
/* Heads balanced over ranks: n heads, the first n % parts ranks get one more (56 over 6 = 10, 10,
 * 9, 9, 9, 9); offsets in heads. */
void vdn_split_heads(vdn_split *sp, int64_t n, int parts);
static inline int64_t vdn_split_len(const vdn_split *sp, int r) {
    return sp->off[r + 1] - sp->off[r];
}

typedef struct vdn_comm vdn_comm;

/* One tensor of vdn_op_rows_to_cols_parts: in [nrows(me), C] -> out [S, ncols(me)] with the
 * columns split by cols, or (cols NULL) out [S, C]: every rank gets every column, an all-gather. */
typedef struct {
    vdn_tensor *out;
    const vdn_tensor *in;
    const vdn_split *cols;
} vdn_comm_part;
#define VDN_COMM_MAX_PARTS 8

/* What an implementation provides. Tensors are already checked by the front end (comm.c). */
typedef struct {
    const char *name; /* "inproc", "nccl" */
    /* n parts (1..VDN_COMM_MAX_PARTS), each row-sharded by rows, to their column-sharded (or
     * gathered) outs in one exchange; rows_to_cols and all_gather_rows are its one-part cases.
     * parts NULL: this rank's shapes were wrong (fail the group's collective) */
    int (*rows_to_cols_parts)(vdn_comm *c, const vdn_comm_part *parts, int n,
                              const vdn_split *rows);
    int (*cols_to_rows)(vdn_comm *c, vdn_tensor *out, const vdn_tensor *in, const vdn_split *rows,
                        const vdn_split *cols);
    /* x [n, C] summed over ranks, in place (float) */
    int (*all_reduce_sum)(vdn_comm *c, vdn_tensor *x);
    int (*barrier)(vdn_comm *c);
    /* this rank failed outside a collective: make the peers' pending collective fail too */
    int (*abort)(vdn_comm *c);
    void (*free)(vdn_comm *c);
} vdn_comm_impl;

struct vdn_comm {
    const vdn_comm_impl *impl;
    int rank, size;
    vdn_dev *dev; /* this rank's device */
    /* payload bytes this rank received from other ranks (all collectives): the peers' pieces of
     * an all-to-all or all-gather; for an all-reduce of n bytes, (P - 1) n in-process (it reads
     * every peer's tensor) and a ring's 2 (P - 1) / P n over NCCL */
    uint64_t bytes;
    int failed;    /* a collective failed on some rank: the group is unusable */
    void *state;   /* the implementation's */
    int64_t calls; /* collectives this rank entered (all four kinds) */
    /* Profiling (`vdn bench --whole --comm-profile`). When set, each collective first syncs this
     * rank's device (its queued compute ends outside the collective), then waits in a barrier for
     * every rank (wait_s: the time the slowest peer took to arrive), then runs and syncs again
     * (collective_s: the data movement, device time included). That adds two device syncs and a
     * barrier per collective, so the host no longer queues ahead across one: use it to see where
     * the time goes, not to time a render. Every rank must set the same value, and change it only
     * between the same two collectives on every rank (the barrier counts must match). */
    int profile;
    double wait_s, collective_s;
};

/* ---- the in-process communicator ---- */

typedef struct vdn_comm_group vdn_comm_group;
/* A group of P ranks; rank r's communicator is vdn_comm_inproc(g, r, dev). Freed after every
 * rank's communicator. */
vdn_comm_group *vdn_comm_group_new(int size, char *err, size_t errlen);
void vdn_comm_group_free(vdn_comm_group *g);
vdn_comm *vdn_comm_inproc(vdn_comm_group *g, int rank, vdn_dev *dev);
/* Runs fn(rank, arg) on P threads (rank 0 on the caller's); returns the number of ranks whose fn
 * returned nonzero. */
int vdn_comm_run_ranks(int size, int (*fn)(int rank, void *arg), void *arg);

void vdn_comm_free(vdn_comm *c);
/* Call when this rank fails outside a collective (an op, an allocation): the peers' next
 * collective fails instead of waiting for it (in-process: the group is marked aborted, which
 * fails every pending and later barrier of it, whatever the count; NCCL: ncclCommAbort). Returns
 * -1. No-op once a collective failed. */
int vdn_comm_abort(vdn_comm *c);

/* ---- collectives as ops (check shapes on this rank, then call the implementation) ---- */

int vdn_op_rows_to_cols(vdn_comm *c, vdn_tensor *out, const vdn_tensor *in, const vdn_split *rows,
                        const vdn_split *cols);
int vdn_op_cols_to_rows(vdn_comm *c, vdn_tensor *out, const vdn_tensor *in, const vdn_split *rows,
                        const vdn_split *cols);
int vdn_op_all_gather_rows(vdn_comm *c, vdn_tensor *out, const vdn_tensor *in,
                           const vdn_split *rows);
/* every part's rows_to_cols (or, cols NULL, all_gather_rows) in one exchange */
int vdn_op_rows_to_cols_parts(vdn_comm *c, const vdn_comm_part *parts, int n,
                              const vdn_split *rows);
int vdn_op_all_reduce_sum(vdn_comm *c, vdn_tensor *x);

#ifdef __cplusplus
}
#endif
/* The device backend's own communicator (op_backend.h comm_*: NCCL for cuda), for a group of
 * that backend's devices: its name ("nccl"), or NULL where the build has none. */
const char *vdn_dev_comm_name(const vdn_dev *d);
/* rank 0 makes the group's id (VDN_COMM_ID_BYTES); every rank then opens with it. 0 / a comm, or
 * -1 / NULL with err (also where the backend has no communicator). */
int vdn_dev_comm_unique_id(const vdn_dev *d, void *id, char *err, size_t errlen);
vdn_comm *vdn_dev_comm_open(vdn_dev *d, int rank, int size, const void *id, char *err,
                            size_t errlen);

#endif
