/* `vdn eval suite keyframes`: a suite whose keyframe lines name pictures it brings along, so a
 * suite of text (such as the shipped eval/suites/h3-103) becomes complete without outside files.
 * The pictures come from a folder (PICDIR/ID_first.EXT, PICDIR/ID_last.EXT, EXT one of png, jpg,
 * jpeg, webp) or from an earlier sweep's outputs: the first and last decoded frames of the mp4
 * the sweep stored for the same prompt id (its baseline's, or --variant's), written as PNG. */
#ifndef VDN_EVAL_SUITE_KEYFRAMES_H
#define VDN_EVAL_SUITE_KEYFRAMES_H

#include <stddef.h>

typedef struct {
    const char *suite;    /* the suite to complete */
    const char *out_dir;  /* writes OUT/suite.jsonl and OUT/keyframes/ID_{first,last}.EXT */
    const char *from;     /* a sweep manifest, or NULL */
    const char *variant;  /* with from: whose outputs (NULL: the sweep's baseline) */
    const char *pictures; /* a folder of pictures, or NULL (one of from / pictures) */
} vdn_suite_keyframes_opts;

/* Every line of a keyframe mode gets first_frame / last_frame (as its mode needs) naming
 * keyframes/ID_first.EXT / keyframes/ID_last.EXT beside OUT/suite.jsonl, and loses its
 * prompt_cache and keyframes (the text renders, with the pictures); other lines are kept, their
 * relative paths made absolute. *n_lines: the keyframe lines completed. 0, or -1 with a message
 * naming the line and the missing picture or output. */
int vdn_suite_keyframes(const vdn_suite_keyframes_opts *o, int *n_lines, char *err, size_t errlen);

#endif
