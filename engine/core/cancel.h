/* A caller's request to stop long work: a flag the caller owns and sets from any thread (a
 * worker's CANCEL, a lost lease), handed down with the work (vdn_render_request.cancel,
 * vdn_dit_opts.cancel, vdn_decode_opts.cancel), never a global. Loops check it between pieces
 * of work (DiT blocks, model evaluations, decoder tiles and chunks) and stop with "cancelled". */
#ifndef VDN_CANCEL_H
#define VDN_CANCEL_H

#include <stdatomic.h>

/* nonzero once flag (NULL: never) is set */
static inline int vdn_cancelled(const atomic_int *flag) {
    return flag && atomic_load_explicit((atomic_int *)flag, memory_order_relaxed) != 0;
}

#endif
