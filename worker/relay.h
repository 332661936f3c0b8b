/* The relay between the worker daemon and its renderer processes (docs/cluster.md "Crash
 * blame"): messages over a stream socketpair, each a frame of a 4-byte big-endian length and
 * that many bytes of JSON (cJSON). This file is the whole of the format: the framing, and each
 * message's fields in and out of plain structs, so that its one parser has one fuzz target
 * (test/fuzz_relay.c).
 *
 * daemon -> renderer: "config" (first, once: what to load and the worker's policy), "start" (an
 * attempt: its assignment and the worker-wide slot positions it runs on), "gate" (may it upload),
 * "cancel". The daemon closing its end is the order to stop.
 * renderer -> daemon: "hello" (once, after its engines loaded, or with "error" when they did
 * not), "state" (an attempt's progress and, when finished, its outcome). */
#ifndef VDN_WORKER_RELAY_H
#define VDN_WORKER_RELAY_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "attempt.h"
#include "gpus.h"

#define VDN_RELAY_MAX_FRAME (64u << 20) /* a run record with every NFE's timing fits many times */

/* Bytes read from the socket that do not yet make a whole frame. */
typedef struct {
    uint8_t *buf;
    size_t len, cap;
} vdn_relay_buf;

/* Writes one message (blocking; EINTR and short writes handled). 0, or -1 (the peer is gone). */
int vdn_relay_send(int fd, const cJSON *msg);
/* Reads what the socket has (non-blocking fd) into rb. 1: read something or nothing waiting,
 * 0: end of file (the peer closed or died), -1: a read error. */
int vdn_relay_fill(int fd, vdn_relay_buf *rb);
/* Takes the next whole frame out of rb as parsed JSON: a message object with a string "t".
 * NULL with err "" when no whole frame is there yet; NULL with err set when the bytes are not
 * a frame of a message (the stream is then unusable). */
cJSON *vdn_relay_next(vdn_relay_buf *rb, char *err, size_t errlen);
void vdn_relay_buf_free(vdn_relay_buf *rb);
/* The message's type ("t"), "" when it has none. */
const char *vdn_relay_type(const cJSON *msg);

/* ---- "config": what a renderer loads, and the worker's policy for its attempts ---- */
typedef struct {
    const char *checkpoint;
    const char *adapters[16];
    int n_adapters;
    const char *store;    /* the default store URI, NULL = none */
    double store_retry_s; /* cap on one store request's retry backoff (0 = the store's) */
    const char *scratch;  /* the worker's scratch folder: attempts work in a<ID>/ under it */
    int cpu;              /* the CPU slot (no GPU list) */
    int text_precision, vae_precision;
    int text_keep; /* text prompts' keep policy (prompt_text.h vdn_text_prompts_opts) */
    double text_keep_free_gib;
    int text_encode_delay_ms; /* test hook */
    const char *base_dir;     /* a VDN checkpoint's base elsewhere (engine.h), NULL = none */
    unsigned precisions;      /* the DiT's, bit p = an engine at precision p */
    int threads;
    int upload_attempts;
    double snapshot_seconds;
    int snapshot_every;
    const char *data_roots[16];
    int n_data_roots;
    /* the GPUs of this renderer: gpu[i] is worker-wide slot pos[i], CUDA device pos[i] */
    int n;
    int pos[VDN_MAX_GPUS];
    vdn_gpu gpu[VDN_MAX_GPUS];
    /* test hooks (worker/loop.c reads them from the environment): GPU index whose renders /
     * decodes fault (-2 = none); a seed whose job makes the renderer abort at its first NFE */
    int fault_index, decode_fault_index;
    int has_poison;
    uint64_t poison_seed;
    /* what the daemon removed at its start (stale scratch folders): each run record says it */
    int stale_scratch_folders;
    uint64_t stale_scratch_bytes;
} vdn_relay_config;

cJSON *vdn_relay_config_json(const vdn_relay_config *c);
/* The strings point into msg (keep it while c is used). */
int vdn_relay_config_parse(const cJSON *msg, vdn_relay_config *c, char *err, size_t errlen);

/* ---- "start": an attempt, its assignment and slots ---- */
cJSON *vdn_relay_start_json(const vdn_assignment *s, const int *pos, int npos, int precision);
/* Fills s (owned strings: vdn_assignment_free) and pos. The policy fields of s (snapshots, data
 * roots, the score function) are not on the wire: the renderer sets them from its config. */
int vdn_relay_start_parse(const cJSON *msg, vdn_assignment *s, int *pos, int *npos, int *precision,
                          char *err, size_t errlen);

/* ---- "gate" and "cancel" ---- */
cJSON *vdn_relay_gate_json(uint64_t attempt, int go);
cJSON *vdn_relay_cancel_json(uint64_t attempt);
/* "gate" or "cancel": the attempt (and for a gate, go). */
int vdn_relay_attempt_parse(const cJSON *msg, uint64_t *attempt, int *go, char *err, size_t errlen);

/* ---- "hello": the renderer's engines ---- */
typedef struct {
    char error[VDN_ERR_LEN]; /* "" = loaded */
    char identity[128], backend[32];
    unsigned precisions;
    int n; /* its slots, in config order */
    struct {
        uint64_t memory_used;
        int out_of_service;
        char fault[256];
        char dec_err[256];
    } slot[VDN_MAX_GPUS];
} vdn_relay_hello;

cJSON *vdn_relay_hello_json(const vdn_relay_hello *h);
int vdn_relay_hello_parse(const cJSON *msg, vdn_relay_hello *h, char *err, size_t errlen);

/* ---- "state": an attempt's progress, and its outcome once finished ---- */
typedef struct {
    uint64_t attempt_id;
    int phase; /* vdn_attempt_phase */
    int nfe_done, nfe_total, resumed_from;
    int nfe_from;           /* nfe_seconds[0] is NFE nfe_from + 1 */
    int n_nfe;              /* how many follow */
    double nfe_seconds[64]; /* the newest NFEs' seconds (older ones were sent before) */
    char snap_key[1200];
    int snap_step;
    uint64_t store_retries; /* the renderer process's (vdn_worker_store_retries) */
    /* when phase is FINISHED: */
    int ok, retryable, fault, store_op, gpu_fault;
    uint64_t gpu_fault_mask;
    char reason[VDN_ERR_LEN];
    char *record_json, *outputs_store, *snap_prefix; /* owned (vdn_relay_state_free) */
    char **object_keys;
    int n_object_keys;
} vdn_relay_state;

cJSON *vdn_relay_state_json(const vdn_relay_state *s);
int vdn_relay_state_parse(const cJSON *msg, vdn_relay_state *s, char *err, size_t errlen);
void vdn_relay_state_free(vdn_relay_state *s);

#endif
