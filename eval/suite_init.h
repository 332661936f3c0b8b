#ifndef VDN_EVAL_SUITE_INIT_H
#define VDN_EVAL_SUITE_INIT_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *dir;        /* writes DIR/suite.jsonl and DIR/caches/pNNN.safetensors */
    const char *checkpoint; /* text_dim comes from its config */
    int text_dim;           /* nonzero: use this instead of opening the checkpoint */
    const char *base_dir;   /* the checkpoint's base elsewhere (ckpt.h vdn_ckpt_open), or NULL */
    int n_prompts;          /* 103 */
    int frames, height, width;
    uint64_t seed;
} vdn_suite_init_opts;

int vdn_suite_init(const vdn_suite_init_opts *o, char *err, size_t errlen);

#endif
