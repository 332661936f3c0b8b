/* Refusing at submit what no worker's GPU can hold (docs/cluster.md "Memory check at submit").
 * A request needs at least the DiT's weights plus its activations at the request's sequence
 * rows. The estimate is a lower bound, so a refused request can never fit: it counts only the
 * buffers every variant allocates for every row, in bf16 as the CUDA backend keeps them at either
 * precision, for the H3 DiT the farm serves; the weights at the request's precision. Workers
 * measure what their engine keeps loaded (memory in use on a free GPU: weights and VAEs), so the
 * check takes the room a GPU has beside that. */
#ifndef VDN_COORD_MEMFIT_H
#define VDN_COORD_MEMFIT_H

#include <sqlite3.h>
#include <stdint.h>

#include "client.h"

typedef struct {
    long long rows;     /* the fewest sequence rows of the request (jsonl.c) */
    int gpus;           /* its rows are spread over these once the forward is sharded */
    double per_row;     /* activation bytes per row */
    double activations; /* rows / gpus x per_row */
    double ffn;         /* the feed-forward piece (at most 16,384 rows at once) */
    double weights;     /* the H3 DiT's block matrices at the request's precision (bf16: 2 bytes a
                           weight; fp8: 1 byte and a 4-byte scale a row), when no worker measured
                           them */
    const char *precision; /* "bf16" | "fp8" */
} coord_mem_need;

void coord_mem_need_of(const vdn_job_spec *s, coord_mem_need *n);

/* The most room for a render on any GPU of any registered worker: its memory less what its
 * engine keeps loaded (0 when it did not say). *gpu_bytes gets that GPU's memory and worker its
 * worker (size 128). 0 when no worker advertises GPU memory. */
double coord_mem_room(sqlite3 *db, uint64_t *gpu_bytes, char *worker);

/* Adds "WHERE: ..." to errs when the request cannot fit: against the registered workers' GPUs,
 * or, when none advertises memory, against `limit` bytes less the H3 weights (0: no check). */
void coord_mem_check(sqlite3 *db, const vdn_job_spec *s, uint64_t limit, vdn_errlist *errs,
                     const char *where);

#endif
