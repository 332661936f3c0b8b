/* The C client library of the coordinator's client endpoint: used by the `vdn` client commands
 * (submit, status, ls, watch, cancel, retry, logs, workers, drain), by `vdn up` and by eval sweeps.
 *
 * Replies come back as the decoded protobuf-c messages of proto/vdn.proto (Vdn__StatusReply...);
 * free them with vdn_client_free(). Errors: NULL / -1 with a message in err, and
 * vdn_client_error_code() says which (VDN__ERROR__CODE__NOT_FOUND, ..., or VDN_CLIENT_E_UNREACHABLE
 * when no reply came in time). */
#ifndef VDN_CLIENT_H
#define VDN_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "vdn.pb-c.h"

/* ------------------------------------------------------------------ one render as submitted */

/* A parsed request line. Strings are malloc'd (vdn_job_spec_free); 0 / NULL = engine default. */
typedef struct {
    char *prompt_cache; /* path or URI; this or prompt is required */
    char *prompt;       /* text; encoded on the worker (text/prompt_text.h) when no prompt_cache */
    char *first_frame;  /* keyframe pictures (path, store key or URI) encoded with the text */
    char *last_frame;   /*   prompt: I2VA (first), L2VA (last), FL2VA (both); NULL = none */
    char *kind;         /* NULL or "render": a render; "score": an eval scoring job, which */
    char *score;        /*   renders nothing and does the work `score` (JSON) describes */
    int frames, height, width, steps;
    uint64_t seed;
    int has_seed;
    char *variant;    /* NULL = "vdn" */
    char *checkpoint; /* NULL = any loaded checkpoint */
    char *precision;  /* the DiT's: "bf16" or "fp8"; NULL = bf16. Only a worker that loaded it
                         (vdn worker --precision) gets the job */
    float video_shift, audio_shift;
    char *output_prefix; /* store key prefix; NULL = coordinator picks batches/bN/jM/out */
    char *noise_file;
    int gpus; /* 0 = 1 */
    uint64_t min_gpu_memory;
    int timeout; /* seconds an attempt may run before the coordinator stops it; 0 = none */
    int priority;
    int has_priority; /* per-line priority overrides the batch priority */
    char *tag;        /* per-job tag (eval: "prompt/variant") */
    int save_latents, record;
    char *latents_root;
    char *source_line; /* the line as written */
    int line_no;       /* 1-based, 0 when not from a file */
} vdn_job_spec;

void vdn_job_spec_free(vdn_job_spec *spec); /* frees the strings, not the struct */

/* JSONL (one request per line; blank lines and lines starting with '#' are skipped).
 * Accepted fields: prompt_cache | prompt_file, frames | num_frames, height, width,
 * steps | num_steps, seed, variant, checkpoint, priority, tag, out | output_prefix, video_shift,
 * audio_shift, noise_file, gpus, min_gpu_memory, timeout, save_latents, latents_root, record,
 * first_frame, last_frame, kind ("render" | "score"), score (a JSON object),
 * precision ("bf16" | "fp8").
 * Every bad line is reported ("FILE:LINE: field 'steps': expected a positive integer, got ...")
 * into errs; on any error *jobs is NULL. check_files: also require prompt_cache files to exist
 * (local paths relative to base_dir when not absolute; URIs with "scheme://" are not checked). */
typedef struct {
    char **lines; /* one message per problem */
    int n;
} vdn_errlist;
void vdn_errlist_add(vdn_errlist *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void vdn_errlist_free(vdn_errlist *e);

/* The longest a request's "timeout" may be, in seconds (a week). */
#define VDN_JOB_MAX_TIMEOUT 604800
/* The largest request the parser takes (issue 27: 100,000 frames at 32 x 32, or 22 frames at
 * 8192 x 8192, kept a worker busy for minutes before its first model evaluation): two minutes at
 * 24 fps (the release renders 5-15 s), sides up to 4096 pixels. */
#define VDN_JOB_MAX_FRAMES 2880
#define VDN_JOB_MAX_SIDE 4096

/* A request line longer than this is refused ("FILE:LINE: ... bytes, above the limit"): a
 * request is a few hundred bytes, its prompt at most --max-prompt-chars. */
#define VDN_JSONL_MAX_LINE_BYTES (1u << 20)

int vdn_jsonl_parse(const char *text, size_t len, const char *fname, const char *base_dir,
                    int check_files, vdn_job_spec **jobs, int *n_jobs, vdn_errlist *errs);
int vdn_jsonl_parse_file(const char *path, int check_files, vdn_job_spec **jobs, int *n_jobs,
                         vdn_errlist *errs);
void vdn_jobs_free(vdn_job_spec *jobs, int n);

/* spec <-> wire */
void vdn_job_spec_to_proto(const vdn_job_spec *spec, Vdn__RenderRequest *out); /* borrows strings */

/* ------------------------------------------------------------------ where the coordinator is */

/* DIR/vdn.conf, written by `vdn up DIR` (worker/conf.h has the writer and the general parser),
 * read here by every client command given --dir DIR. Lines "key = value", '#' comments.
 * Keys the client reads: client_endpoint (the coordinator's --client-bind; "coordinator" is
 * accepted as an alias), worker_endpoint (--bind), db (SQLite file, for `status --db`),
 * store, keys (coordinator --keys dir), key (this client's NAME.key), coordinator_key
 * (coordinator.pub). Other keys are ignored here. */
typedef struct {
    char client_endpoint[256];
    char worker_endpoint[256];
    char db[1024];
    char store[1024];
    char keys[1024];
    char key[1024];
    char coordinator_key[1024];
    /* where client_endpoint came from, for error messages: "--coordinator", "$VDN_COORDINATOR",
     * the vdn.conf path that was read, or "the default" */
    char endpoint_source[1100];
} vdn_client_conf;

int vdn_client_conf_read(const char *path, vdn_client_conf *conf, char *err, size_t errlen);

typedef struct {
    const char *endpoint;        /* the coordinator's client endpoint, e.g. tcp://127.0.0.1:5556 */
    const char *key;             /* this client's NAME.key (CURVE), NULL = no CURVE */
    const char *coordinator_key; /* coordinator.pub, needed with key */
    int timeout_ms;              /* per request; 0 = 10000 */
    const char *endpoint_source; /* named in "no reply" errors (vdn_client_conf); may be NULL */
} vdn_client_opts;

/* The client commands' environment, read by the command layer (cli/): $VDN_COORDINATOR,
 * $VDN_DIR, $VDN_KEY, $VDN_COORDINATOR_KEY; NULL or "": unset. */
typedef struct vdn_client_env {
    const char *coordinator, *dir, *key, *coordinator_key;
} vdn_client_env;

/* Resolves the endpoint and keys, first found wins: the flags (--coordinator, --key,
 * --coordinator-key), DIR/vdn.conf from --dir, env's $VDN_COORDINATOR / $VDN_KEY /
 * $VDN_COORDINATOR_KEY, $VDN_DIR/vdn.conf, ./vdn.conf (when none of --coordinator, --dir,
 * $VDN_COORDINATOR, $VDN_DIR is given: a `vdn up .` farm found from its own folder), then
 * tcp://127.0.0.1:5556. env NULL: none set. Strings point into *conf; conf->endpoint_source says
 * which won. */
int vdn_client_resolve(const char *coordinator_flag, const char *dir_flag, const char *key_flag,
                       const char *coordinator_key_flag, const vdn_client_env *env,
                       vdn_client_conf *conf, vdn_client_opts *opts, char *err, size_t errlen);

/* ------------------------------------------------------------------ requests */

enum { VDN_CLIENT_E_UNREACHABLE = 100, VDN_CLIENT_E_LOCAL = 101 };

typedef struct vdn_client vdn_client;

vdn_client *vdn_client_open(const vdn_client_opts *opts, char *err, size_t errlen);
void vdn_client_close(vdn_client *c);
int vdn_client_error_code(const vdn_client *c); /* of the last failed call, 0 after success */

/* Submits n jobs as one batch (all or nothing). job_ids may be NULL, else n entries. */
int vdn_client_submit(vdn_client *c, const vdn_job_spec *jobs, int n, const char *tag, int priority,
                      const char *source, uint64_t *batch_id, uint64_t *job_ids, char *err,
                      size_t errlen);
/* vdn_client_submit with flags: VDN_SUBMIT_ALLOW_WAIT accepts jobs no registered worker could
 * ever take (they wait, saying why), which the coordinator otherwise refuses. */
enum { VDN_SUBMIT_ALLOW_WAIT = 1 };
int vdn_client_submit_flags(vdn_client *c, const vdn_job_spec *jobs, int n, const char *tag,
                            int priority, const char *source, unsigned flags, uint64_t *batch_id,
                            uint64_t *job_ids, char *err, size_t errlen);
/* target: NULL = all batches (batches only), "b12" = batch 12 and its jobs, "j34" = job 34.
 * The reply also carries the workers (for watch's per-worker view). */
Vdn__StatusReply *vdn_client_status(vdn_client *c, const char *target, char *err, size_t errlen);
Vdn__ListReply *vdn_client_list(vdn_client *c, const char *tag, int limit, char *err,
                                size_t errlen);
int vdn_client_cancel(vdn_client *c, const char *target, int *count, char *err, size_t errlen);
int vdn_client_retry(vdn_client *c, const char *target, int *count, char *err, size_t errlen);
/* The same, and *quarantined = quarantined jobs it left alone (may be NULL); force: those too,
 * their crash records cleared (docs/cluster.md "Crash blame"). */
int vdn_client_retry_force(vdn_client *c, const char *target, int force, int *count,
                           int *quarantined, char *err, size_t errlen);
int vdn_client_drain(vdn_client *c, const char *worker_id, int undo, char *err, size_t errlen);
Vdn__WorkersReply *vdn_client_workers(vdn_client *c, char *err, size_t errlen);
Vdn__LogsReply *vdn_client_logs(vdn_client *c, const char *target, char *err, size_t errlen);
void vdn_client_free(void *reply); /* any reply above; NULL is fine */

/* "b12" / "j34" / "12" parsing. kind = 'b' or 'j'; a bare number is refused as ambiguous. */
int vdn_parse_target(const char *s, char *kind, uint64_t *id, char *err, size_t errlen);

#endif
