/* The worker's main loop: the only thread that touches the ZeroMQ socket.
 *
 * A worker drives every GPU it is given (slots.h), through renderer processes (renderer.h): one
 * per group of slots, a slot each at start, that hold the engines and run the attempts, each on
 * the GPUs its ASSIGN names. The loop polls the DEALER socket to the coordinator, each renderer's
 * relay socket (progress and outcome of the attempts in it, relay.h) and a signalfd
 * (SIGTERM/SIGINT). A renderer that dies fails only the attempts in it (fault CRASH) and is
 * started again (supervise.c; docs/cluster.md "Crash blame"). Every outcome (RESULT or FAIL) is
 * kept until the coordinator ACKs it, and re-sent after a reconnect, so a finished render is never
 * lost to a coordinator restart. When the coordinator falls silent for `liveness` heartbeats, the
 * socket is dropped and re-made with exponential backoff; READY then re-announces the attempts
 * still running, and the coordinator decides which are current. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <cjson/cJSON.h>

#include "attempt.h"
#include "curve.h"
#include "renderer.h"
#include "engine.h"
#include "slots.h"
#include "snapshot.h"
#include "vdn_util.h"
#include "wire.h"
#include "worker.h"

#include "daemon.h"

static uint64_t sweep_bytes; /* sweep_scratch's count (nftw takes no user pointer) */
static int swept_folders;    /* what sweep_scratch removed at start (the run records say it) */

static int rm_tree_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)flag;
    (void)ftw;
    if (S_ISREG(sb->st_mode)) sweep_bytes += (uint64_t)sb->st_size;
    remove(path);
    return 0;
}

/* The worker's scratch folder is its own while it holds DIR/.lock (flock; released by the
 * kernel when the process dies, however it dies). -1 when it cannot be made (logged). */
static int lock_scratch(const char *dir) {
    char path[2000];
    snprintf(path, sizeof path, "%s/.lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0) {
        VDN_WARN("worker: scratch %s: cannot lock: %s", dir, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

/* Removes the scratch folders under root of workers that are gone: any vdn-worker-* folder whose
 * .lock nobody holds, and this worker id's folders of an older vdn that had no lock. Logged with
 * what was removed. */
static void sweep_scratch(const char *root, const char *id, const char *mine) {
    DIR *d = opendir(root);
    if (!d) return;
    char own[200];
    snprintf(own, sizeof own, "vdn-worker-%.100s-", id);
    for (char *p = own + 11; *p; p++)
        if (*p == '/') *p = '_';
    int n = 0;
    sweep_bytes = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, "vdn-worker-", 11)) continue;
        char path[2000], lockf[2100];
        snprintf(path, sizeof path, "%s/%s", root, de->d_name);
        if (!strcmp(path, mine)) continue;
        struct stat sb;
        if (lstat(path, &sb) != 0 || !S_ISDIR(sb.st_mode) || sb.st_uid != geteuid()) continue;
        snprintf(lockf, sizeof lockf, "%s/.lock", path);
        int fd = open(lockf, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        int dead = fd >= 0 ? flock(fd, LOCK_EX | LOCK_NB) == 0
                           : errno == ENOENT && !strncmp(de->d_name, own, strlen(own));
        if (fd >= 0) close(fd);
        if (!dead) continue;
        nftw(path, rm_tree_entry, 16, FTW_DEPTH | FTW_PHYS);
        n++;
    }
    closedir(d);
    swept_folders = n;
    if (n)
        VDN_INFO("worker %s: removed %d stale scratch folder(s) of workers that are gone (%.1f MB) "
                 "under %s",
                 id, n, (double)sweep_bytes / 1e6, root);
}

static void outcome_free(outcome *o) {
    free(o->reason);
    for (int i = 0; i < o->nkeys; i++)
        free(o->keys[i]);
    free(o->keys);
    free(o->record);
    free(o->snap_store);
    free(o->snap_prefix);
    memset(o, 0, sizeof *o);
}

typedef struct {
    char *uri, *prefix;
    unsigned long long job;
    vdn_store_opts opts;
} snap_delete;

static void *snap_delete_main(void *p) {
    snap_delete *d = p;
    vdn_snapshots_delete(d->uri, &d->opts, d->prefix, d->job);
    free(d->uri);
    free(d->prefix);
    free(d);
    return NULL;
}

/* The coordinator accepted a done job: its snapshots go, on a thread of their own (a store that
 * is slow or down must not hold up the heartbeats). */
static void delete_snapshots_after_ack(worker *w, outcome *o) {
    if (!o->ok || !o->snap_store || !o->snap_prefix) return;
    snap_delete *d = vdn_xcalloc(1, sizeof *d);
    d->uri = o->snap_store, d->prefix = o->snap_prefix, d->job = (unsigned long long)o->job_id;
    o->snap_store = o->snap_prefix = NULL;
    d->opts.retry_max_seconds = w->o->store_retry_s;
    pthread_t t;
    if (pthread_create(&t, NULL, snap_delete_main, d) == 0) {
        pthread_detach(t);
    } else {
        snap_delete_main(d); /* no thread: here, once */
    }
}

static outcome *find_outcome(worker *w, uint64_t attempt) {
    for (int i = 0; i < w->nouts; i++)
        if (w->outs[i].attempt_id == attempt) return &w->outs[i];
    return NULL;
}

static void drop_outcome(worker *w, outcome *o) {
    outcome_free(o);
    int i = (int)(o - w->outs);
    memmove(&w->outs[i], &w->outs[i + 1], sizeof *o * (size_t)(w->nouts - i - 1));
    w->nouts--;
}

/* Store operations that failed and then succeeded on a retry: the daemon's own (snapshot
 * deletion) plus every renderer's, those that ended included. */
static uint64_t store_retries(const worker *w) {
    uint64_t n = vdn_worker_store_retries() + w->store_retries_gone;
    for (int r = 0; r < VDN_MAX_GPUS; r++)
        if (w->rend[r].pid > 0) n += w->rend[r].store_retries;
    return n;
}

running *daemon_find_run(worker *w, uint64_t attempt) {
    for (int i = 0; i < w->nrun; i++)
        if (w->run[i].a->spec.attempt_id == attempt) return &w->run[i];
    return NULL;
}

/* Non-blocking send: with the coordinator away a DEALER would otherwise block once its queue
 * fills. A dropped heartbeat or progress message costs nothing; outcomes are re-sent. */
static int send_env(worker *w, Vdn__Envelope *env) {
    if (!w->sock) return -1;
    size_t len;
    uint8_t *buf = vdn_wire_encode(env, &len);
    int rc = zmq_send(w->sock, buf, len, ZMQ_DONTWAIT);
    int e = errno;
    free(buf);
    if (rc < 0) {
        VDN_DEBUG("worker: %s not sent: %s", vdn_wire_payload_name(env->payload_case),
                  zmq_strerror(e));
        return -1;
    }
    return 0;
}

/* Attempts that hold our GPUs, a stale one being stopped included: the coordinator keeps its
 * GPUs busy (and CANCELs it again) while we name it. Left out, the GPUs looked free, the next
 * ASSIGN there was refused ("worker busy") and charged to an innocent job's --max-attempts
 * (found by the campaign: a coordinator stall, then a decode that takes seconds to stop). */
static int running_attempts(const worker *w, uint64_t *ids) {
    int n = 0;
    for (int i = 0; i < w->nrun; i++)
        ids[n++] = w->run[i].a->spec.attempt_id;
    return n;
}

/* Each slot's live state for READY and HEARTBEAT. g and gp have room for VDN_MAX_GPUS. A CPU
 * slot is not a GPU: a CPU worker reports none, as it always did. */
static size_t gpu_states(worker *w, Vdn__Gpu *g, Vdn__Gpu **gp) {
    size_t n = 0;
    for (int i = 0; i < w->slots.n; i++) {
        const vdn_slot *s = &w->slots.s[i];
        if (s->index < 0) continue;
        vdn__gpu__init(&g[n]);
        g[n].has_index = g[n].has_memory_bytes = g[n].has_attempt_id = 1;
        g[n].has_out_of_service = g[n].has_memory_used = 1;
        g[n].index = s->index;
        g[n].name = (char *)s->name;
        g[n].memory_bytes = s->memory;
        g[n].attempt_id = s->attempt;
        g[n].out_of_service = s->out_of_service;
        if (s->out_of_service) g[n].fault = (char *)s->fault;
        g[n].memory_used = s->memory_used; /* its renderer's engines' weights on this GPU */
        gp[n] = &g[n];
        n++;
    }
    return n;
}

static void send_outcome(worker *w, outcome *o);
static void send_progress(worker *w, running *j);

static void send_ready(worker *w) {
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    Vdn__Ready r = VDN__READY__INIT;
    Vdn__Gpu g[VDN_MAX_GPUS], *gp[VDN_MAX_GPUS];
    uint64_t ids[2 * VDN_MAX_GPUS + 64];
    char *prec[VDN_PRECISION_COUNT];
    r.worker_id = (char *)w->o->id;
    r.n_gpus = gpu_states(w, g, gp);
    r.gpus = gp;
    r.checkpoint = (char *)w->o->checkpoint_name;
    r.checkpoint_identity = w->identity;
    r.engine_version = VDN_ENGINE_VERSION;
    r.backend = w->backend;
    r.hostname = w->hostname;
    /* running ones, then the finished ones whose report is not ACKed yet */
    size_t n = (size_t)running_attempts(w, ids);
    for (int i = 0; i < w->nouts && n < sizeof ids / sizeof *ids; i++)
        ids[n++] = w->outs[i].attempt_id;
    r.has_running_attempt = 1;
    r.running_attempt = n ? ids[0] : 0;
    r.n_running_attempts = n;
    r.running_attempts = ids;
    r.has_per_gpu = 1;
    r.per_gpu = 1;
    r.has_draining = 1;
    r.draining = w->terms > 0; /* re-registering while shutting down: no new work */
    r.has_store_retries = 1;
    r.store_retries = store_retries(w);
    for (int p = 0; p < VDN_PRECISION_COUNT; p++)
        if (vdn_slots_precisions(&w->slots) >> p & 1u)
            prec[r.n_precisions++] = (char *)vdn_precision_name((vdn_precision)p);
    r.precisions = prec;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_READY;
    env.ready = &r;
    if (send_env(w, &env) < 0) {
        w->need_ready = 1; /* no connection yet: the loop tries again */
        return;
    }
    w->need_ready = 0;
    w->ready_sent_at = vdn_now();
    for (int i = 0; i < w->nrun; i++) {
        /* A coordinator that lost us lost our progress too: report the latest NFE again, with
         * the newest snapshot (the PROGRESS that named it may have gone to the coordinator that
         * died: without it a requeued job would render from the noise) */
        running *j = &w->run[i];
        j->suspect = 1;
        j->snap_sent = 0;
        if (j->progress_sent > 0) {
            j->progress_sent--;
            send_progress(w, j);
        }
    }
    if (n)
        VDN_INFO("worker %s: READY sent to %s, re-announcing %zu attempt(s), first %llu", w->o->id,
                 w->o->connect, n, (unsigned long long)ids[0]);
    else
        VDN_INFO("worker %s: READY sent to %s (%zu GPU(s), backend %s)", w->o->id, w->o->connect,
                 r.n_gpus, r.backend);
}

static void send_outcome(worker *w, outcome *o) {
    if (!w->sock) return;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    Vdn__Result r = VDN__RESULT__INIT;
    Vdn__Fail f = VDN__FAIL__INIT;
    if (o->ok) {
        r.has_attempt_id = 1;
        r.attempt_id = o->attempt_id;
        r.n_object_keys = (size_t)o->nkeys;
        r.object_keys = o->keys;
        r.run_record_json = o->record;
        env.payload_case = VDN__ENVELOPE__PAYLOAD_RESULT;
        env.result = &r;
    } else {
        f.has_attempt_id = f.has_retryable = f.has_fault = 1;
        f.attempt_id = o->attempt_id;
        f.reason = o->reason;
        f.retryable = o->retryable;
        f.fault = (Vdn__Fail__Fault)o->fault;
        f.has_store_op = o->store_op != VDN_STORE_OP_NONE;
        f.store_op = (Vdn__Fail__StoreOp)o->store_op;
        env.payload_case = VDN__ENVELOPE__PAYLOAD_FAIL;
        env.fail = &f;
    }
    if (send_env(w, &env) == 0) o->sent_at = vdn_now();
}

static void send_outcomes(worker *w) {
    for (int i = 0; i < w->nouts; i++)
        send_outcome(w, &w->outs[i]);
}

static void send_fail_now(worker *w, uint64_t attempt, const char *reason, vdn_fault fault) {
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    Vdn__Fail f = VDN__FAIL__INIT;
    f.has_attempt_id = f.has_retryable = f.has_fault = 1;
    f.attempt_id = attempt;
    f.reason = (char *)reason;
    f.retryable = fault != VDN_FAULT_JOB;
    f.fault = (Vdn__Fail__Fault)fault;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_FAIL;
    env.fail = &f;
    send_env(w, &env);
}

void daemon_send_heartbeat(worker *w) {
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    Vdn__Heartbeat h = VDN__HEARTBEAT__INIT;
    Vdn__Gpu g[VDN_MAX_GPUS], *gp[VDN_MAX_GPUS];
    uint64_t ids[VDN_MAX_GPUS];
    size_t n = (size_t)running_attempts(w, ids);
    h.has_attempt_id = h.has_sent_at = 1;
    h.attempt_id = n ? ids[0] : 0;
    h.n_attempt_ids = n;
    h.attempt_ids = ids;
    h.n_gpus = gpu_states(w, g, gp);
    h.gpus = gp;
    h.sent_at = vdn_wall();
    h.has_draining = 1;
    h.draining = w->terms > 0;
    h.has_store_retries = 1;
    h.store_retries = store_retries(w);
    env.payload_case = VDN__ENVELOPE__PAYLOAD_HEARTBEAT;
    env.heartbeat = &h;
    send_env(w, &env);
    w->last_hb = vdn_now();
}

static void send_disconnect(worker *w, const char *reason) {
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    Vdn__Disconnect d = VDN__DISCONNECT__INIT;
    d.reason = (char *)reason;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_DISCONNECT;
    env.disconnect = &d;
    send_env(w, &env);
}

static void close_socket(worker *w, int linger_ms) {
    if (!w->sock) return;
    zmq_setsockopt(w->sock, ZMQ_LINGER, &linger_ms, sizeof linger_ms);
    zmq_close(w->sock);
    w->sock = NULL;
}

static int open_socket(worker *w) {
    char err[VDN_ERR_LEN];
    w->sock = zmq_socket(w->ctx, ZMQ_DEALER);
    if (!w->sock) {
        VDN_ERROR("worker: zmq_socket: %s", zmq_strerror(errno));
        return -1;
    }
    /* IMMEDIATE: queue nothing while the connection is down. Messages queued for a dead
     * coordinator would otherwise all reach its successor, each answered with "unknown worker",
     * each prompting another READY. What matters (READY, the outcome) is re-sent by us. */
    int zero = 0, one = 1;
    zmq_setsockopt(w->sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(w->sock, ZMQ_IMMEDIATE, &one, sizeof one);
    if (w->o->key &&
        vdn_curve_client_setup(w->sock, w->o->key, w->o->server_key, err, sizeof err)) {
        VDN_ERROR("worker: CURVE set-up: %s", err);
        close_socket(w, 0);
        return -1;
    }
    if (zmq_connect(w->sock, w->o->connect)) {
        VDN_ERROR("worker: connect %s: %s", w->o->connect, zmq_strerror(errno));
        close_socket(w, 0);
        return -1;
    }
    w->last_heard = vdn_now();
    w->coord_hb_at = 0;
    w->need_ready = 1; /* sent by the loop once the connection is up */
    return 0;
}

/* Drop the connection and come back after an exponentially growing, jittered wait. */
static void schedule_reconnect(worker *w, const char *why) {
    close_socket(w, 0);
    for (int i = 0; i < w->nrun; i++)
        w->run[i].suspect = 1;
    double jitter = 0.75 + 0.5 * ((double)rand() / RAND_MAX);
    double wait = w->backoff * jitter;
    VDN_WARN("worker %s: %s; reconnecting to %s in %.1f s", w->o->id, why, w->o->connect, wait);
    w->reconnect_at = vdn_now() + wait;
    w->backoff = w->backoff * 2 > w->o->reconnect_max_s ? w->o->reconnect_max_s : w->backoff * 2;
}

static char *dup_or_null(const char *s) {
    return s && *s ? vdn_xstrdup(s) : NULL;
}

/* The DiT precision the request asks for (absent or "": bf16) when this worker loaded it: 0.
 * Else the fault to report: JOB for a name no engine knows, WORKER for one not loaded here (a
 * coordinator older than Ready.precisions; it counts toward blocking this worker for the job's
 * class). */
static vdn_fault assigned_precision(const worker *w, const Vdn__RenderRequest *rq, vdn_precision *p,
                                    char *why, size_t whylen) {
    const char *name = rq->precision && rq->precision[0] ? rq->precision : "bf16";
    if (vdn_precision_parse(name, p)) {
        snprintf(why, whylen, "request field 'precision': \"%.40s\": expected bf16 or fp8", name);
        return VDN_FAULT_JOB;
    }
    if (!(vdn_slots_precisions(&w->slots) >> *p & 1u)) {
        snprintf(why, whylen,
                 "precision %s: this worker has no %s engine loaded (vdn worker --precision)", name,
                 name);
        return VDN_FAULT_WORKER;
    }
    return 0;
}

/* Which slots an ASSIGN runs on: the GPUs it names, or (a coordinator that does not place per
 * GPU) every slot in service, one job at a time. 0, or -1 with why (nobody's fault: the job
 * goes back to the queue). */
static int pick_slots(worker *w, const Vdn__Assign *a, running *j, char *why, size_t whylen) {
    j->npos = 0;
    if (a->n_gpu_indices == 0) {
        if (w->nrun) {
            snprintf(why, whylen, "worker busy with attempt %llu",
                     (unsigned long long)w->run[0].a->spec.attempt_id);
            return -1;
        }
        for (int i = 0; i < w->slots.n; i++)
            if (!w->slots.s[i].out_of_service) j->pos[j->npos++] = i;
        if (!j->npos) {
            snprintf(why, whylen, "every GPU of this worker is out of service");
            return -1;
        }
        return 0;
    }
    for (size_t k = 0; k < a->n_gpu_indices; k++) {
        int p = vdn_slots_find(&w->slots, a->gpu_indices[k]);
        if (p < 0) {
            snprintf(why, whylen, "ASSIGN gpu_indices: GPU %d is not on this worker",
                     a->gpu_indices[k]);
            return -1;
        }
        const vdn_slot *s = &w->slots.s[p];
        for (int i = 0; i < j->npos; i++)
            if (j->pos[i] == p) {
                snprintf(why, whylen, "ASSIGN gpu_indices: GPU %d named twice", s->index);
                return -1;
            }
        if (s->out_of_service) {
            snprintf(why, whylen, "GPU %d is out of service (%s)", s->index, s->fault);
            return -1;
        }
        if (s->attempt) {
            snprintf(why, whylen, "worker busy: GPU %d runs attempt %llu", s->index,
                     (unsigned long long)s->attempt);
            return -1;
        }
        j->pos[j->npos++] = p;
    }
    return 0;
}

static void start_attempt(worker *w, const Vdn__Assign *a) {
    char err[VDN_ERR_LEN];
    const Vdn__RenderRequest *rq = a->request;
    if (!rq) {
        send_fail_now(w, a->attempt_id, "ASSIGN without a request", VDN_FAULT_JOB);
        return;
    }
    running *j = &w->run[w->nrun];
    memset(j, 0, sizeof *j);
    if (pick_slots(w, a, j, err, sizeof err)) {
        VDN_WARN("worker %s: attempt %llu refused: %s", w->o->id, (unsigned long long)a->attempt_id,
                 err);
        send_fail_now(w, a->attempt_id, err, VDN_FAULT_TRANSIENT);
        return;
    }
    vdn_precision prec;
    vdn_fault pf = assigned_precision(w, rq, &prec, err, sizeof err);
    if (pf) {
        VDN_WARN("worker %s: attempt %llu refused: %s", w->o->id, (unsigned long long)a->attempt_id,
                 err);
        send_fail_now(w, a->attempt_id, err, pf);
        return;
    }
    vdn_assignment s = {0};
    s.job_id = a->job_id;
    s.attempt_id = a->attempt_id;
    s.batch_id = a->batch_id;
    s.prompt_cache = dup_or_null(rq->prompt_cache);
    s.prompt = dup_or_null(rq->prompt);
    s.variant = dup_or_null(rq->variant);
    s.noise_file = dup_or_null(rq->noise_file);
    s.first_frame = dup_or_null(rq->first_frame);
    s.last_frame = dup_or_null(rq->last_frame);
    s.kind = dup_or_null(rq->kind);
    s.score = dup_or_null(rq->score);
    s.store_uri = dup_or_null(a->store_uri);
    s.output_prefix = dup_or_null(rq->output_prefix);
    s.nkeys = (int)rq->n_output_keys;
    s.keys = vdn_xcalloc(rq->n_output_keys + 1, sizeof *s.keys);
    for (size_t i = 0; i < rq->n_output_keys; i++)
        s.keys[i] = vdn_xstrdup(rq->output_keys[i]);
    s.frames = rq->has_frames ? rq->frames : 0;
    s.height = rq->has_height ? rq->height : 0;
    s.width = rq->has_width ? rq->width : 0;
    s.steps = rq->has_steps ? rq->steps : 0;
    s.seed = rq->has_seed ? rq->seed : 0;
    s.save_latents = rq->has_save_latents && rq->save_latents;
    s.video_shift = rq->has_video_shift ? rq->video_shift : 0;
    s.audio_shift = rq->has_audio_shift ? rq->audio_shift : 0;
    s.resume_key = dup_or_null(a->resume_key);
    /* A k-GPU job renders one clip sharded over the engines of its k GPUs (attempt.c
     * render_ranks) and decodes it over their k decoders, in one renderer process that holds
     * them all; it keeps its store handles on the first. */
    vdn_slot *first = &w->slots.s[j->pos[0]];
    char gl[256] = "";
    for (int i = 0; i < j->npos; i++)
        snprintf(gl + strlen(gl), sizeof gl - strlen(gl), "%s%d", i ? "," : "",
                 w->slots.s[j->pos[i]].index);
    VDN_INFO("worker %s: job %llu attempt %llu: start on %s %s (%s, %dx%dx%d, %d steps, seed %llu, "
             "%s)",
             w->o->id, (unsigned long long)s.job_id, (unsigned long long)s.attempt_id,
             first->index < 0 ? "the" : "GPU", first->index < 0 ? "CPU" : gl,
             s.prompt_cache ? s.prompt_cache
             : s.prompt     ? "text prompt"
                            : "-",
             s.frames, s.height, s.width, s.steps, (unsigned long long)s.seed,
             vdn_precision_name(prec));
    uint64_t attempt = s.attempt_id;
    int ri = renderers_for(w, j, attempt, err, sizeof err);
    if (ri < 0) {
        VDN_WARN("worker %s: attempt %llu refused: %s", w->o->id, (unsigned long long)attempt, err);
        vdn_assignment_free(&s);
        send_fail_now(w, attempt, err, VDN_FAULT_TRANSIENT);
        return;
    }
    /* a renderer still loading reads it once its engines are there */
    cJSON *m = vdn_relay_start_json(&s, j->pos, j->npos, (int)prec);
    vdn_relay_send(w->rend[ri].fd, m); /* a renderer gone: its end of file fails the attempt */
    cJSON_Delete(m);
    proxy *px = vdn_xcalloc(1, sizeof *px);
    px->spec.job_id = s.job_id;
    px->spec.attempt_id = attempt;
    px->started = vdn_now();
    px->rend = ri;
    vdn_assignment_free(&s);
    j->a = px;
    w->rend[ri].attempts++;
    for (int i = 0; i < j->npos; i++)
        w->slots.s[j->pos[i]].attempt = attempt;
    w->nrun++;
}

static void on_assign(worker *w, const Vdn__Assign *a) {
    if (w->terms) {
        /* The coordinator may assign to us between our last RESULT and our DISCONNECT
         * (heartbeats say we drain, but an older coordinator may not listen). Give it straight
         * back and leave before another one comes. */
        send_fail_now(w, a->attempt_id, "worker is shutting down", VDN_FAULT_TRANSIENT);
        if (!w->nrun && !w->nouts) w->leave_now = 1;
        return;
    }
    if (daemon_find_run(w, a->attempt_id)) return; /* repeated ASSIGN */
    outcome *o = find_outcome(w, a->attempt_id);
    if (o) {
        send_outcome(w, o); /* it is done already; say so again */
        return;
    }
    start_attempt(w, a);
}

/* The coordinator does not know us (it restarted): one READY answers every "unknown worker"
 * reply to messages that were already on their way, so send one per second at most. A
 * DISCONNECT asks in so many words and is always answered. Any outcome waiting for its ACK
 * follows the READY. */
static void reregister(worker *w, int asked) {
    if (w->need_ready || (!asked && vdn_now() - w->ready_sent_at < 1.0)) return;
    send_ready(w);
    if (!w->need_ready) send_outcomes(w);
}

/* Main loop -> renderer: may the attempt's outputs go to the store (1) or not (0)? Granted only
 * while we believe the attempt is still ours: a worker that was frozen or cut off past its
 * lease must not overwrite the objects of the attempt that replaced it. */
static void gate_send(worker *w, running *j, int go) {
    cJSON *m = vdn_relay_gate_json(j->a->spec.attempt_id, go);
    vdn_relay_send(w->rend[j->a->rend].fd, m);
    cJSON_Delete(m);
}

static void cancel_run(worker *w, running *j, int why, const char *log_reason) {
    if (j->cancel_why == CANCEL_NONE || why == CANCEL_STALE) j->cancel_why = why;
    cJSON *m = vdn_relay_cancel_json(j->a->spec.attempt_id);
    vdn_relay_send(w->rend[j->a->rend].fd, m);
    cJSON_Delete(m);
    VDN_INFO("worker %s: attempt %llu: cancelling (%s)", w->o->id,
             (unsigned long long)j->a->spec.attempt_id, log_reason);
}

static void on_heartbeat(worker *w) {
    /* Learn the coordinator's heartbeat interval so silence is judged on its clock, not ours:
     * it may beat far slower than we do. */
    double now = vdn_now();
    if (w->coord_hb_at > 0) {
        double gap = now - w->coord_hb_at;
        if (gap > 2 * w->coord_gap) /* it lost us for a while? */
            for (int i = 0; i < w->nrun; i++)
                w->run[i].suspect = 1;
        w->coord_gap = gap < w->o->heartbeat_s ? w->o->heartbeat_s : gap;
    }
    w->coord_hb_at = now;
    for (int i = 0; i < w->nrun; i++) {
        running *j = &w->run[i];
        if (j->gate_state == 1 && j->cancel_why == CANCEL_NONE && !w->need_ready &&
            now - j->gate_since >= 0.5 * w->coord_gap) {
            VDN_INFO("worker %s: attempt %llu is still ours; uploading", w->o->id,
                     (unsigned long long)j->a->spec.attempt_id);
            j->gate_state = 2;
            gate_send(w, j, 1);
        }
    }
}

static void on_message(worker *w, const void *buf, size_t len) {
    char err[VDN_ERR_LEN];
    int code;
    Vdn__Envelope *env = vdn_wire_decode(buf, len, &code, err, sizeof err);
    if (!env) {
        VDN_WARN("worker %s: ignoring a frame from the coordinator: %s", w->o->id, err);
        return;
    }
    w->last_heard = vdn_now();
    w->backoff = 0.5;
    switch (env->payload_case) {
    case VDN__ENVELOPE__PAYLOAD_HEARTBEAT:
        on_heartbeat(w);
        break;
    case VDN__ENVELOPE__PAYLOAD_ASSIGN:
        on_assign(w, env->assign);
        break;
    case VDN__ENVELOPE__PAYLOAD_CANCEL: {
        running *j = daemon_find_run(w, env->cancel->attempt_id);
        if (j)
            cancel_run(w, j, CANCEL_BY_COORDINATOR,
                       env->cancel->reason ? env->cancel->reason : "coordinator CANCEL");
        break;
    }
    case VDN__ENVELOPE__PAYLOAD_ACK: {
        outcome *o = find_outcome(w, env->ack->attempt_id);
        if (o) {
            VDN_DEBUG("worker %s: attempt %llu acknowledged", w->o->id,
                      (unsigned long long)o->attempt_id);
            delete_snapshots_after_ack(w, o);
            drop_outcome(w, o);
            if (w->terms && !w->nrun && !w->nouts) w->leave_now = 1; /* read nothing more: go */
        }
        break;
    }
    case VDN__ENVELOPE__PAYLOAD_DISCONNECT:
        VDN_INFO("worker %s: coordinator asks us to register again (%s)", w->o->id,
                 env->disconnect->reason ? env->disconnect->reason : "no reason");
        reregister(w, 1); /* asked in so many words: always answer */
        break;
    case VDN__ENVELOPE__PAYLOAD_ERROR: {
        const Vdn__Error *e = env->error;
        const char *m = e->message ? e->message : "";
        if (e->code == VDN__ERROR__CODE__STALE_ATTEMPT) {
            VDN_WARN("worker %s: coordinator refused attempt %llu as stale: %s", w->o->id,
                     (unsigned long long)e->attempt_id, m);
            running *j = daemon_find_run(w, e->attempt_id);
            if (j) cancel_run(w, j, CANCEL_STALE, "the job was reassigned");
            outcome *o = find_outcome(w, e->attempt_id);
            if (o) drop_outcome(w, o);
        } else if (e->code == VDN__ERROR__CODE__FORBIDDEN) {
            /* our key does not allow what we are (another worker id): asking again changes
             * nothing, so stop with the reason rather than knock every heartbeat */
            VDN_ERROR("worker %s: the coordinator refuses this worker: %s; stopping", w->o->id, m);
            w->refused = 1;
        } else if (e->code == VDN__ERROR__CODE__UNKNOWN_WORKER) {
            VDN_INFO("worker %s: coordinator does not know us (%s)", w->o->id, m);
            reregister(w, 0);
        } else {
            VDN_WARN("worker %s: coordinator error %s: %s", w->o->id, vdn_wire_error_name(e->code),
                     m);
        }
        break;
    }
    default:
        VDN_WARN("worker %s: unexpected %s from the coordinator; ignored", w->o->id,
                 vdn_wire_payload_name(env->payload_case));
    }
    vdn__envelope__free_unpacked(env, NULL);
}

static void drain_socket(worker *w) {
    while (w->sock && !w->leave_now) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, w->sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&m);
            return;
        }
        on_message(w, zmq_msg_data(&m), zmq_msg_size(&m));
        zmq_msg_close(&m);
    }
}

/* The upload gate of a rendered attempt: go at once when we heard the coordinator all along,
 * else ask it first (see gate_send). */
static void open_gate(worker *w, running *j) {
    double now = vdn_now();
    if (j->cancel_why != CANCEL_NONE) {
        j->gate_state = 2;
        gate_send(w, j, 0);
    } else if (!j->suspect && w->sock && !w->need_ready && w->coord_hb_at > 0 &&
               now - w->coord_hb_at <= 2 * w->coord_gap) {
        j->gate_state = 2; /* heard from the coordinator all along: ours */
        gate_send(w, j, 1);
    } else {
        VDN_INFO("worker %s: attempt %llu rendered after a gap in contact; checking with the "
                 "coordinator before uploading",
                 w->o->id, (unsigned long long)j->a->spec.attempt_id);
        j->gate_state = 1;
        j->gate_since = now;
        daemon_send_heartbeat(w); /* names the attempt: a stale one draws a CANCEL */
    }
}

/* A finished attempt: keep its report until ACKed, free its GPUs (taking them out of service
 * when the render failed on a GPU fault), forget its proxy. */
void daemon_finish_run(worker *w, running *j) {
    proxy *px = j->a;
    vdn_relay_state *a = &px->out;
    double took = vdn_now() - px->started;
    int fault = 0;
    if (j->cancel_why == CANCEL_STALE) {
        VDN_INFO("worker %s: job %llu attempt %llu: dropped (stale) after %.1f s", w->o->id,
                 (unsigned long long)px->spec.job_id, (unsigned long long)px->spec.attempt_id,
                 took);
    } else {
        w->outs = realloc(w->outs, sizeof *w->outs * (size_t)(w->nouts + 1));
        VDN_ASSERT(w->outs);
        outcome *o = &w->outs[w->nouts++];
        memset(o, 0, sizeof *o);
        o->attempt_id = px->spec.attempt_id;
        o->job_id = px->spec.job_id;
        o->ok = a->ok && a->n_object_keys > 0;
        if (o->ok) {
            o->keys = a->object_keys;
            o->nkeys = a->n_object_keys;
            o->record = a->record_json;
            a->object_keys = NULL;
            a->n_object_keys = 0;
            a->record_json = NULL;
            o->snap_store = a->outputs_store;
            o->snap_prefix = a->snap_prefix;
            a->outputs_store = a->snap_prefix = NULL;
            VDN_INFO("worker %s: job %llu attempt %llu: done in %.1f s, uploaded %s", w->o->id,
                     (unsigned long long)o->job_id, (unsigned long long)o->attempt_id, took,
                     o->keys[0]);
        } else {
            char reason[VDN_ERR_LEN + 64];
            o->retryable = a->retryable;
            o->fault = a->fault ? a->fault : VDN_FAULT_WORKER;
            o->store_op = a->store_op;
            fault = a->gpu_fault; /* typed by the engine's devices (blame.h), cancelled or not */
            if (j->cancel_why == CANCEL_BY_COORDINATOR) {
                o->retryable = 0;
                o->fault = VDN_FAULT_JOB; /* the job is over already: nothing to retry */
                o->store_op = VDN_STORE_OP_NONE;
                snprintf(reason, sizeof reason, "cancelled by the coordinator");
            } else if (j->cancel_why == CANCEL_SHUTDOWN) {
                o->retryable = 1;
                o->fault = VDN_FAULT_TRANSIENT;
                o->store_op = VDN_STORE_OP_NONE;
                snprintf(reason, sizeof reason, "worker shut down (second SIGTERM) mid-job");
            } else {
                snprintf(reason, sizeof reason, "%s", a->reason);
            }
            if (fault) {
                /* out of service before the FAIL goes: the coordinator places the job again
                 * as soon as it reads the FAIL, and must know by then not to use this GPU */
                for (int i = 0; i < j->npos; i++)
                    if (a->gpu_fault_mask >> i & 1)
                        vdn_slot_fault(&w->slots, j->pos[i], w->o->id, a->reason);
                daemon_send_heartbeat(w);
            }
            o->reason = vdn_xstrdup(reason);
            VDN_WARN("worker %s: job %llu attempt %llu: failed after %.1f s (%s fault): %s",
                     w->o->id, (unsigned long long)o->job_id, (unsigned long long)o->attempt_id,
                     took,
                     o->fault == VDN_FAULT_JOB      ? "job"
                     : o->fault == VDN_FAULT_WORKER ? "worker"
                     : o->fault == VDN_FAULT_CRASH  ? "crash"
                                                    : "transient",
                     reason);
        }
        send_outcome(w, o);
    }
    for (int i = 0; i < j->npos; i++)
        w->slots.s[j->pos[i]].attempt = 0;
    if (px->rend >= 0 && w->rend[px->rend].attempts > 0) w->rend[px->rend].attempts--;
    vdn_relay_state_free(a);
    free(px->nfe_seconds);
    free(px);
    *j = w->run[--w->nrun];
}

/* PROGRESS for the NFEs the coordinator has not heard of yet. */
static void send_progress(worker *w, running *j) {
    proxy *a = j->a;
    int first = j->progress_sent, done = a->nfe_done, resumed = a->resumed_from;
    if (first < resumed) first = resumed; /* those came from the snapshot */
    /* More than 64 NFEs between two polls: report the latest ones; the count says the rest. */
    if (done - first > 64) first = done - 64;
    if (j->cancel_why != CANCEL_STALE) {
        for (int k = first + 1; k <= done; k++) {
            Vdn__Envelope env = VDN__ENVELOPE__INIT;
            Vdn__Progress p = VDN__PROGRESS__INIT;
            p.has_attempt_id = p.has_nfe_done = p.has_nfe_total = 1;
            p.has_nfe_seconds = p.has_elapsed_seconds = 1;
            p.attempt_id = a->spec.attempt_id;
            p.nfe_done = k;
            p.nfe_total = a->nfe_total;
            p.nfe_seconds = k - 1 < a->nfe_cap ? a->nfe_seconds[k - 1] : 0;
            p.elapsed_seconds = vdn_now() - a->started;
            p.has_nfe_evaluated = 1;
            p.nfe_evaluated = k - resumed;
            /* the snapshot taken after NFE k (it is stored before NFE k is reported) */
            if (a->snap_step > j->snap_sent && a->snap_step <= k) {
                p.snapshot_key = a->snap_key;
                p.has_snapshot_step = 1;
                p.snapshot_step = a->snap_step;
                j->snap_sent = a->snap_step;
            }
            env.payload_case = VDN__ENVELOPE__PAYLOAD_PROGRESS;
            env.progress = &p;
            send_env(w, &env);
        }
    }
    if (done > j->progress_sent) j->progress_sent = done;
}

/* Progress and the outcome of one attempt, as its renderer relayed them. */
void daemon_attempt_event(worker *w, running *j) {
    send_progress(w, j);
    if (j->a->phase == VDN_ATTEMPT_UPLOAD_WAIT && j->gate_state == 0) open_gate(w, j);
    if (j->a->phase == VDN_ATTEMPT_FINISHED) daemon_finish_run(w, j);
}

static void on_signal(worker *w) {
    struct signalfd_siginfo si;
    while (read(w->sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGHUP) continue;
        w->terms++;
        if (w->terms == 1) {
            w->term_at = vdn_now();
            daemon_send_heartbeat(w); /* says "draining" now, before our RESULT invites an ASSIGN */
            if (w->nrun)
                VDN_INFO("worker %s: %s: finishing %d attempt(s) (first %llu), then exiting "
                         "(signal again to hand them back now)",
                         w->o->id, strsignal((int)si.ssi_signo), w->nrun,
                         (unsigned long long)w->run[0].a->spec.attempt_id);
            else
                VDN_INFO("worker %s: %s: idle, exiting", w->o->id, strsignal((int)si.ssi_signo));
        } else {
            for (int i = 0; i < w->nrun; i++)
                cancel_run(w, &w->run[i], CANCEL_SHUTDOWN, "second signal: handing the job back");
        }
    }
}

static double min_d(double a, double b) {
    return a < b ? a : b;
}

static int run_loop(worker *w) {
    const double hb = w->o->heartbeat_s;
    const double resend = hb * 3 > 3 ? hb * 3 : 3;
    w->backoff = 0.5;
    w->coord_gap = 5.0; /* the coordinator's default heartbeat until we have seen its own */
    open_socket(w);
    if (!w->sock) schedule_reconnect(w, "could not open the socket");
    for (;;) {
        double now = vdn_now();
        if (!w->sock && now >= w->reconnect_at && open_socket(w))
            schedule_reconnect(w, "could not open the socket");
        /* Silent for `liveness` of our beats, or three of the coordinator's, whichever is
         * longer (the coordinator counts a worker gone after three of its own). */
        double silence =
            w->o->liveness * hb > 3 * w->coord_gap ? w->o->liveness * hb : 3 * w->coord_gap;
        if (w->sock && now - w->last_heard > silence) {
            char why[128];
            snprintf(why, sizeof why, "coordinator silent for %.1f s", now - w->last_heard);
            schedule_reconnect(w, why);
        }
        if (w->sock && w->need_ready) {
            send_ready(w);
            if (!w->need_ready) send_outcomes(w); /* anything finished while we were away */
        }
        if (w->sock && !w->need_ready && now - w->last_hb >= hb) daemon_send_heartbeat(w);
        if (w->sock && !w->need_ready)
            for (int i = 0; i < w->nouts; i++)
                if (w->outs[i].sent_at == 0 || now - w->outs[i].sent_at > resend)
                    send_outcome(w, &w->outs[i]);

        if (w->refused && !w->nrun) {
            close_socket(w, 0);
            return 1;
        }
        if (w->terms && !w->nrun) {
            /* Wait a little for the coordinator to take our last reports, then leave at once:
             * it schedules right after the ACK, and our DISCONNECT hands back whatever it
             * assigned in between (see on_assign). A report that never gets through is not
             * lost work either: the lease runs out and the job is requeued. */
            double patience = w->terms >= 2 ? 5 : 30;
            if (!w->nouts || now - w->term_at > patience) {
                for (int i = 0; i < w->nouts; i++)
                    VDN_WARN("worker %s: leaving without an ACK for attempt %llu", w->o->id,
                             (unsigned long long)w->outs[i].attempt_id);
                send_disconnect(w, "worker shutting down");
                close_socket(w, 1000);
                VDN_INFO("worker %s: exiting", w->o->id);
                return 0;
            }
        }

        zmq_pollitem_t items[VDN_MAX_GPUS + 2];
        int polled[VDN_MAX_GPUS];
        pid_t polled_pid[VDN_MAX_GPUS];
        int n = 0, i_sock = -1, i_rend = -1, i_sig, nrend = 0;
        if (w->sock) {
            items[n] = (zmq_pollitem_t){.socket = w->sock, .events = ZMQ_POLLIN};
            i_sock = n++;
        }
        i_rend = n;
        for (int r = 0; r < VDN_MAX_GPUS; r++) {
            if (w->rend[r].pid <= 0) continue;
            items[n++] = (zmq_pollitem_t){.fd = w->rend[r].fd, .events = ZMQ_POLLIN};
            polled[nrend] = r;
            polled_pid[nrend++] = w->rend[r].pid;
        }
        items[n] = (zmq_pollitem_t){.fd = w->sigfd, .events = ZMQ_POLLIN};
        i_sig = n++;
        double wait = w->sock ? w->last_hb + hb - now : w->reconnect_at - now;
        if (w->terms) wait = min_d(wait, 0.2);
        if (w->sock && w->need_ready) wait = min_d(wait, 0.05);
        long ms = wait <= 0 ? 0 : (long)(wait * 1000) + 1;
        double before = vdn_now();
        if (zmq_poll(items, n, ms) < 0) {
            if (errno == EINTR) continue;
            VDN_ERROR("worker: zmq_poll: %s", zmq_strerror(errno));
            return 1;
        }
        /* Slept far past the timeout: the process was stopped (SIGSTOP, a paused VM, swap).
         * Our leases may have run out meanwhile; see the upload gate. */
        double slept = vdn_now() - before;
        if (slept > (double)ms / 1000 + 1.0 + hb) {
            VDN_WARN("worker %s: the process was frozen for %.1f s", w->o->id, slept);
            for (int i = 0; i < w->nrun; i++)
                w->run[i].suspect = 1;
        }
        if (items[i_sig].revents & ZMQ_POLLIN) on_signal(w);
        /* by pid: a renderer that died may have been replaced meanwhile */
        for (int i = 0; i < nrend; i++)
            if (items[i_rend + i].revents && w->rend[polled[i]].pid == polled_pid[i])
                renderers_readable(w, polled[i]);
        if (i_sock >= 0 && (items[i_sock].revents & ZMQ_POLLIN)) drain_socket(w);
    }
}

int vdn_worker_run(const vdn_worker_opts *o) {
    char err[VDN_ERR_LEN];
    worker w = {.o = o, .sigfd = -1, .rcfg = {.fault_index = -2, .decode_fault_index = -2}};
    gethostname(w.hostname, sizeof w.hostname - 1);
    /* via 64 bits: milliseconds since 1970 do not fit an unsigned int (UB as a direct cast) */
    srand((unsigned)getpid() ^ (unsigned)(unsigned long long)(vdn_wall() * 1000));
    /* test hooks, handed to the renderers: the GPU index whose renders (decodes) fault; a seed
     * whose job aborts the renderer at its first NFE (docs/cluster.md "Crash blame") */
    const char *fault = getenv("VDN_TEST_GPU_FAULT");
    if (fault && *fault) w.rcfg.fault_index = atoi(fault);
    const char *dfault = getenv("VDN_TEST_DECODE_FAULT");
    if (dfault && *dfault) w.rcfg.decode_fault_index = atoi(dfault);
    w.rcfg.has_poison = o->test_poison;
    w.rcfg.poison_seed = o->test_poison_seed;
    for (int i = 0; i < VDN_MAX_GPUS; i++)
        w.slot_rend[i] = -1;

    /* Signals arrive through a signalfd in this loop. Block them before any thread exists
     * (the render threads, ZeroMQ's I/O threads) so none of those is picked to take one. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    w.sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (w.sigfd < 0) {
        VDN_ERROR("worker: signalfd: %s", strerror(errno));
        return 1;
    }

    if (vdn_gpu_inventory(o->sel, o->nsel, &w.gpus, err, sizeof err)) {
        VDN_ERROR("worker: %s", err);
        return 1;
    }
    /* CUDA numbers the visible GPUs 0..n-1 in PCI order, as nvidia-smi lists them: GPU slot i
     * of this worker is then CUDA device i. */
    setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1);
    if (w.gpus.n > 0 && o->nsel > 0) {
        char vis[512] = "";
        for (int i = 0; i < w.gpus.n; i++)
            snprintf(vis + strlen(vis), sizeof vis - strlen(vis), "%s%d", i ? "," : "",
                     w.gpus.gpu[i].index);
        setenv("CUDA_VISIBLE_DEVICES", vis, 1);
    }
    for (int i = 0; i < w.gpus.n; i++)
        VDN_INFO("worker %s: GPU %d %s, %llu MiB", o->id, w.gpus.gpu[i].index, w.gpus.gpu[i].name,
                 (unsigned long long)w.gpus.gpu[i].memory_mib);

    /* a fresh folder of our own (mkdtemp: an unpredictable name, mode 0700): no other user of a
     * shared --scratch can plant a file or a symlink where an attempt writes or reads */
    if (vdn_mkdir_p(o->scratch, err, sizeof err)) {
        VDN_ERROR("worker: scratch: %s", err);
        return 1;
    }
    snprintf(w.scratch, sizeof w.scratch, "%s/vdn-worker-%.100s-XXXXXX", o->scratch, o->id);
    for (char *p = w.scratch + strlen(o->scratch) + 1; *p; p++)
        if (*p == '/') *p = '_'; /* an id is a name, not a path */
    if (!mkdtemp(w.scratch)) {
        VDN_ERROR("worker: scratch: %s: %s", w.scratch, strerror(errno));
        return 1;
    }
    /* ours while we live (.lock held); the folders of workers that died (SIGKILL, a crash) are
     * removed now: nobody else would */
    int scratch_lock = lock_scratch(w.scratch);
    sweep_scratch(o->scratch, o->id, w.scratch);
    double t0 = vdn_now();
    vdn_slots_describe(&w.slots, &w.gpus, o->cpu);
    w.rcfg.stale_scratch_folders = swept_folders; /* each run record says it */
    w.rcfg.stale_scratch_bytes = sweep_bytes;
    if (renderers_start(&w, err, sizeof err)) {
        VDN_ERROR("worker: cannot load checkpoint %s: %s", o->checkpoint, err);
        renderers_stop(&w);
        return 1;
    }
    VDN_INFO("worker %s: loaded %s %d time(s) in %.1f s (identity %.16s, backend %s): %d job(s) "
             "at once, each slot in a renderer process of its own",
             o->id, o->checkpoint, w.slots.n, vdn_now() - t0, w.identity, w.backend,
             vdn_slots_free(&w.slots));

    w.ctx = zmq_ctx_new();
    int rc = run_loop(&w);

    renderers_stop(&w); /* each cancels what still runs in it (only on a poll failure) */
    for (int i = 0; i < w.nrun; i++) {
        vdn_relay_state_free(&w.run[i].a->out);
        free(w.run[i].a->nfe_seconds);
        free(w.run[i].a);
    }
    for (int i = 0; i < w.nouts; i++)
        outcome_free(&w.outs[i]);
    free(w.outs);
    close_socket(&w, 0);
    zmq_ctx_term(w.ctx);
    close(w.sigfd);
    char rj[2000];
    snprintf(rj, sizeof rj, "%s/renderers.json", w.scratch);
    unlink(rj);
    char lockf[2000];
    snprintf(lockf, sizeof lockf, "%s/.lock", w.scratch);
    unlink(lockf);
    if (scratch_lock >= 0) close(scratch_lock);
    rmdir(w.scratch); /* empty once every attempt is freed */
    return rc;
}
