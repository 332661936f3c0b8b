/* Whose fault a failed attempt was (docs/protocol.md "Failure blame"), and whether the GPU it ran
 * on failed. The engine says what its devices recorded (engine.h vdn_engine_last_fault: a type
 * set by the backend where the failure happened); the words of the message are only a fallback
 * for failures outside that record. No engine or network here: unit-tested on its own. */
#ifndef VDN_WORKER_BLAME_H
#define VDN_WORKER_BLAME_H

#include "engine.h"

/* The wire's Fail.Fault values. The job's fails it at once; only the worker's counts toward its
 * blocklist; transient counts for nobody; a crash (the renderer process died under the attempt,
 * renderer.h) counts toward the job's crash count. */
typedef enum {
    VDN_FAULT_JOB = 1,
    VDN_FAULT_WORKER = 2,
    VDN_FAULT_TRANSIENT = 3,
    VDN_FAULT_CRASH = 4
} vdn_fault;

/* The wire's Fail.StoreOp: a failure that came from the object store, and in which operation,
 * said where the store call failed (never guessed from the message). NONE: not the store's. */
typedef enum {
    VDN_STORE_OP_NONE = 0,
    VDN_STORE_OP_DOWNLOAD = 1, /* an input: a prompt cache's HEAD or GET */
    VDN_STORE_OP_UPLOAD = 2,   /* an output: latents, mp4, poster, run record */
    VDN_STORE_OP_OPEN = 3      /* the job's store did not open */
} vdn_store_op;

/* A render (or decode) that failed after the request and the prompt cache were checked.
 * dev: the devices' record; msg: the engine's message. Returns the blame; *gpu_fault = 1 when the
 * GPU itself failed (a CUDA/cuBLAS/NCCL error other than out of memory: take it out of service),
 * else 0. Out of memory is the worker's (another GPU may be larger or emptier) but leaves the GPU
 * in service; anything else the engine refuses is a property of the request: the job's. */
vdn_fault vdn_blame_render(vdn_engine_fault dev, const char *msg, int *gpu_fault);

/* The fallback on words alone, matching what the backends really write (kernels/op_cuda.h OPC/OPK:
 * "op NAME (cuda:N): CALL: REASON", cuBLAS "status N", NCCL "comm nccl ...", cudaMalloc / the op
 * layer's "out of device memory"). VDN_ENGINE_FAULT_NONE when the message names neither. */
vdn_engine_fault vdn_blame_message(const char *msg);

#endif
