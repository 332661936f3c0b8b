/* The op layer's backends beyond the built-in CPU one, registered by a program before it opens a
 * device (engine/core/op_backend.h: the core never names them). `vdn` and every test program
 * that may run on a GPU call it once at start; a build without CUDA registers nothing. */
#ifndef VDN_BACKENDS_H
#define VDN_BACKENDS_H

/* Registers "cuda" (kernels/op_cuda.cu) where the CUDA backend is built in. 0, or -1 when the
 * registry is full. Idempotent. */
int vdn_backends_register(void);

#endif
