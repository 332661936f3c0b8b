/* A sweep: every (prompt, variant) pair of a suite rendered through the coordinator as one
 * tagged batch, outputs in the object store under
 *   eval/TAG/PROMPT/VARIANT_KEY/out.safetensors   (video (24,F,H,W), audio (2,32,L) float32)
 *   eval/TAG/PROMPT/VARIANT_KEY/out.json          (run record)
 * The sweep manifest (JSON) names the suite, checkpoint, store, tag, batches and every pair with
 * its keys; `vdn eval report` reads only it, the suite and the store. Re-running the same sweep
 * submits only pairs with no output in the store and no job still queued or running. */
#ifndef VDN_EVAL_SWEEP_H
#define VDN_EVAL_SWEEP_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"
#include "suite.h"
#include "variants.h"

typedef struct {
    char *prompt;              /* suite id */
    char *variant;             /* variant name, e.g. "vdn@8" */
    char *video_key;           /* PREFIX.safetensors */
    char *record_key;          /* PREFIX.json */
    uint64_t batch_id, job_id; /* 0 when not submitted by this manifest's runs */
} vdn_sweep_pair;

typedef struct {
    char *path;       /* the manifest file */
    char *suite;      /* absolute suite manifest path */
    char *checkpoint; /* as given */
    char *store;      /* store URI */
    char *tag;
    char *baseline;     /* variant name */
    int steps_override; /* 0 = none */
    vdn_variant *variants;
    int n_variants;
    uint64_t *batches;
    int n_batches;
    vdn_sweep_pair *pairs;
    int n_pairs;
} vdn_sweep;

int vdn_sweep_parse(const char *text, size_t len, const char *path, vdn_sweep *s, char *err,
                    size_t errlen);
int vdn_sweep_load(const char *path, vdn_sweep *s, char *err, size_t errlen);
int vdn_sweep_save(const vdn_sweep *s, char *err, size_t errlen); /* atomic, to s->path */
void vdn_sweep_free(vdn_sweep *s);
const vdn_sweep_pair *vdn_sweep_find(const vdn_sweep *s, const char *prompt, const char *variant);

struct vdn_client_env;
/* `vdn eval sweep`, `vdn eval report` and `vdn eval score` (argv[0] = "sweep" / "report" /
 * "score"); env: the client commands' environment (client.h vdn_client_resolve). */
int vdn_eval_sweep_main(int argc, char **argv, const struct vdn_client_env *env);
int vdn_eval_report_main(int argc, char **argv);
int vdn_eval_score_main(int argc, char **argv, const struct vdn_client_env *env);

struct vdn_client;
/* What a job carries for a keyframe picture named in the suite: a local file as its absolute
 * path, or with upload its key in the store (eval/TAG/inputs/ID_WHICH.EXT, put there once); a
 * URI or store key as written. */
int vdn_sweep_picture_input(const vdn_suite *suite, vdn_store *st, const char *tag, const char *id,
                            const char *which, const char *name, int upload, char **out, char *err,
                            size_t errlen);
/* Jobs of this batch tag still queued or running, as their job tags; NULL + err. */
char **vdn_sweep_inflight_tags(struct vdn_client *c, const char *tag, int *n, char *err,
                               size_t errlen);

/* The prompts whose frame strips the report shows (and whose scoring jobs make them): the first
 * prompt of each mode, then the next ones in order, n_strips in all. strip_of: n entries. */
void vdn_eval_pick_strips(const vdn_suite *suite, int n_strips, int *strip_of);

#endif
