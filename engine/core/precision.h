/* The precision a model's big matrix products run in, chosen when the model is opened: bf16
 * (the contract's) or fp8 e4m3 with row-wise scales (op.h's quantised linear). Shared by every
 * model (DiT, video decoder, text encoder), so it lives in the core. */
#ifndef VDN_PRECISION_H
#define VDN_PRECISION_H

typedef enum { VDN_PRECISION_BF16 = 0, VDN_PRECISION_FP8 } vdn_precision;
#define VDN_PRECISION_COUNT 2 /* the values above: an array indexed by vdn_precision */

const char *vdn_precision_name(vdn_precision p);            /* "bf16" | "fp8" */
int vdn_precision_parse(const char *s, vdn_precision *out); /* 0, or -1 for an unknown name */
/* A comma-separated list of names ("bf16", "fp8", "bf16,fp8") as a set: bit p of *mask for
 * precision p. 0, or -1 for an empty list, an empty or unknown name, or a name given twice. */
int vdn_precision_parse_list(const char *s, unsigned *mask);

#endif
