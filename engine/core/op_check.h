/* The front end's shared checks, for op.c and the model families' front ends (op_vda.c, ...).
 * Each returns 0, or -1 with "op OP: NAME is ..., expected ..." recorded in the device. */
#ifndef VDN_OP_CHECK_H
#define VDN_OP_CHECK_H

#include "op_backend.h"

/* present, a valid view, on device d, rows at least as wide as the columns */
int vdn_chk_tensor(vdn_dev *d, const char *op, const char *name, const vdn_tensor *t);
/* and of a float dtype (f32, bf16, f16) */
int vdn_chk_float(vdn_dev *d, const char *op, const char *name, const vdn_tensor *t);
/* and of exactly dtype dt */
int vdn_chk_dtype(vdn_dev *d, const char *op, const char *name, const vdn_tensor *t, vdn_dtype dt);
/* 2-D form (rows = all outer dims) is [rows, cols] */
int vdn_chk_2d(vdn_dev *d, const char *op, const char *name, const vdn_tensor *t, int64_t rows,
               int64_t cols);
/* a model family's table is present on d's backend ("op X: not implemented on backend Y") */
int vdn_chk_family(vdn_dev *d, const char *op, const void *table);

#endif
