/* Named engine configurations of a sweep: "dense@50", "vdn@8", "vdn-no-anchors", ...
 * NAME is an engine variant (engine.h: dense, vdn, vdn-no-anchors, window-only, vdn-additive);
 * "@K" sets the model evaluations (NFE), default 50. */
#ifndef VDN_EVAL_VARIANTS_H
#define VDN_EVAL_VARIANTS_H

#include <stddef.h>

typedef struct {
    char name[64];   /* as written, normalized to NAME@K */
    char engine[32]; /* engine variant */
    int steps;       /* NFE */
    char key[64];    /* store-key form: NAME_K */
} vdn_variant;

int vdn_variant_parse(const char *s, vdn_variant *out, char *err, size_t errlen);
/* Comma-separated list; duplicates are refused. *out malloc'd. */
int vdn_variant_list_parse(const char *s, vdn_variant **out, int *n, char *err, size_t errlen);

#endif
