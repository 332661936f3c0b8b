/* Where a stretch of device work spends its time, op by op (`vdn bench --whole --profile`,
 * `vdn bench text-encoder --profile`, `bench_vae --profile`).
 *
 * While a profile is on, the front end brackets every op it dispatches with two device timers:
 * CUDA events on the device's stream (so the times are the GPU's own and no op waits for the
 * host), the wall clock on the CPU, whose ops are synchronous. Nothing is synchronised until
 * the profile stops. Ops are grouped by a key: the op's name and, for the products and
 * attention, the operands' shapes and dtypes, so each GEMM shape shows its own TFLOP/s. An op
 * called from inside another op (a backend that calls the front end) counts under the outer one.
 * The time between ops (host work, launch gaps, copies the host waits for) is what the span has
 * beyond the sum of the ops. Ops on a device's lane 1 (op.h, lanes: the DiT's VDA branch) are
 * timed on their own stream and overlap lane 0's, so the sum may then exceed the span
 * (the DiT's vdn_dit_opts.vda_one_lane profiles the forward on one lane). */
#ifndef VDN_OP_PROFILE_H
#define VDN_OP_PROFILE_H

#include <stdio.h>

#include "op_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Start recording d's ops. -1 (message in d): the backend has no timers, or one is running. */
int vdn_prof_start(vdn_dev *d);
/* Wait for d, print the table to out under title (NULL out: print nothing), end the profile.
 * Returns the span in seconds from the first op's start to the last op's end, or -1. */
double vdn_prof_stop(vdn_dev *d, FILE *out, const char *title);

/* The front end's hooks (through VDN_PROF). flops: the op's arithmetic (0: not counted). */
void vdn_prof_begin(vdn_dev *d, const char *op, const vdn_tensor *a, const vdn_tensor *b,
                    double flops);
int vdn_prof_end(vdn_dev *d, int rc);

/* call = the backend call of op `name`; a and b: the operands its key shows (NULL: none) */
#define VDN_PROF(d, name, a, b, flops, call)                                                       \
    ((d)->prof ? (vdn_prof_begin((d), (name), (a), (b), (flops)), vdn_prof_end((d), (call)))       \
               : (call))

#ifdef __cplusplus
}
#endif
#endif
