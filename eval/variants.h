/* Named engine configurations of a sweep: "dense@50", "vdn@8", "vdn-no-anchors", "vdn@8:fp8"...
 * NAME[@K][:PRECISION]: NAME is an engine variant (engine.h: dense, vdn, vdn-no-anchors,
 * window-only, vdn-additive); "@K" sets the model evaluations (NFE), default 50; ":PRECISION" the
 * DiT's precision, bf16 (default) or fp8, which becomes the jobs' "precision" field (only
 * workers started with --precision ...fp8 take them). */
#ifndef VDN_EVAL_VARIANTS_H
#define VDN_EVAL_VARIANTS_H

#include <stddef.h>

typedef struct {
    char name[64];     /* as written, normalized to NAME@K (bf16) or NAME@K:fp8 */
    char engine[32];   /* engine variant */
    int steps;         /* NFE */
    char precision[8]; /* "bf16" or "fp8" */
    char key[64];      /* store-key form: NAME_K (bf16) or NAME_K_fp8 */
} vdn_variant;

int vdn_variant_parse(const char *s, vdn_variant *out, char *err, size_t errlen);
/* Comma-separated list; duplicates are refused. *out malloc'd. */
int vdn_variant_list_parse(const char *s, vdn_variant **out, int *n, char *err, size_t errlen);

#endif
