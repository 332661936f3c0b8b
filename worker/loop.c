/* The worker's main loop: the only thread that touches the ZeroMQ socket.
 *
 * It polls three things: the DEALER socket to the coordinator, the running attempt's eventfd
 * (progress and outcome from the render thread) and a signalfd (SIGTERM/SIGINT). Every outcome
 * (RESULT or FAIL) is kept until the coordinator ACKs it, and re-sent after a reconnect, so a
 * finished render is never lost to a coordinator restart. When the coordinator falls silent for
 * `liveness` heartbeats, the socket is dropped and re-made with exponential backoff; READY then
 * re-announces the attempt still running, and the coordinator decides whether it is current. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>
#include <zmq.h>

#include "attempt.h"
#include "curve.h"
#include "engine.h"
#include "vdn_util.h"
#include "wire.h"
#include "worker.h"

enum { CANCEL_NONE = 0, CANCEL_BY_COORDINATOR, CANCEL_STALE, CANCEL_SHUTDOWN };

/* A finished attempt's report, kept until ACKed. */
typedef struct {
    int active;
    uint64_t attempt_id, job_id;
    int ok, retryable, fault;
    char *reason;
    char **keys;
    int nkeys;
    char *record;
    double sent_at; /* vdn_now() of the last send, 0 = not yet sent */
} outcome;

typedef struct {
    const vdn_worker_opts *o;
    void *ctx, *sock;
    vdn_engine *eng;
    vdn_gpu_list gpus;
    vdn_worker_stores stores;
    char scratch[1900];
    char hostname[256];

    vdn_attempt *cur;
    int cancel_why;
    /* Upload gate (see vdn_attempt_gate): `suspect` is set when, since the attempt began, we
     * were frozen, lost the connection or stopped hearing the coordinator's heartbeats; then
     * the outputs wait for a fresh heartbeat of a coordinator that still counts us in. */
    int suspect;
    int gate_state; /* 0 = not asked, 1 = waiting for a heartbeat, 2 = answered */
    double gate_since;
    int progress_sent; /* NFEs of cur already reported */
    int snap_sent;     /* step of cur's newest snapshot already reported */
    outcome out;

    double last_heard, last_hb;
    int need_ready;       /* READY not yet through (the connection is still being made) */
    double ready_sent_at; /* vdn_now() of the last READY that went out */
    double coord_hb_at;   /* when the coordinator's last HEARTBEAT came */
    double coord_gap; /* seconds between its heartbeats, as observed (its --heartbeat-seconds) */
    double backoff, reconnect_at;
    int sigfd;
    int terms;
    double term_at;
    int leave_now; /* shutting down and nothing left to report */
} worker;

static void outcome_clear(outcome *o) {
    free(o->reason);
    for (int i = 0; i < o->nkeys; i++)
        free(o->keys[i]);
    free(o->keys);
    free(o->record);
    memset(o, 0, sizeof *o);
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

static uint64_t running_attempt(const worker *w) {
    if (w->cur && w->cancel_why != CANCEL_STALE) return w->cur->spec.attempt_id;
    return 0;
}

static void send_ready(worker *w) {
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    Vdn__Ready r = VDN__READY__INIT;
    Vdn__Gpu g[VDN_MAX_GPUS], *gp[VDN_MAX_GPUS];
    for (int i = 0; i < w->gpus.n; i++) {
        vdn__gpu__init(&g[i]);
        g[i].has_index = g[i].has_memory_bytes = 1;
        g[i].index = w->gpus.gpu[i].index;
        g[i].name = w->gpus.gpu[i].name;
        g[i].memory_bytes = w->gpus.gpu[i].memory_mib << 20;
        gp[i] = &g[i];
    }
    r.worker_id = (char *)w->o->id;
    r.n_gpus = (size_t)w->gpus.n;
    r.gpus = gp;
    r.checkpoint = (char *)w->o->checkpoint_name;
    r.checkpoint_identity = (char *)vdn_engine_identity(w->eng);
    r.engine_version = VDN_ENGINE_VERSION;
    r.backend = (char *)vdn_engine_backend_name(w->eng);
    r.hostname = w->hostname;
    uint64_t a = running_attempt(w);
    if (!a && w->out.active) a = w->out.attempt_id;
    r.has_running_attempt = 1;
    r.running_attempt = a;
    r.has_draining = 1;
    r.draining = w->terms > 0; /* re-registering while shutting down: no new work */
    env.payload_case = VDN__ENVELOPE__PAYLOAD_READY;
    env.ready = &r;
    if (send_env(w, &env) < 0) {
        w->need_ready = 1; /* no connection yet: the loop tries again */
        return;
    }
    w->need_ready = 0;
    w->ready_sent_at = vdn_now();
    if (w->cur) {
        /* A coordinator that lost us lost our progress too: report the latest NFE again. */
        w->suspect = 1;
        if (w->progress_sent > 0) {
            w->progress_sent--;
            uint64_t one = 1;
            if (write(w->cur->efd, &one, sizeof one) < 0) VDN_DEBUG("worker: eventfd write failed");
        }
    }
    if (a)
        VDN_INFO("worker %s: READY sent to %s, re-announcing attempt %llu", w->o->id, w->o->connect,
                 (unsigned long long)a);
    else
        VDN_INFO("worker %s: READY sent to %s (%d GPU(s), backend %s)", w->o->id, w->o->connect,
                 w->gpus.n, r.backend);
}

static void send_outcome(worker *w) {
    outcome *o = &w->out;
    if (!o->active || !w->sock) return;
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
        env.payload_case = VDN__ENVELOPE__PAYLOAD_FAIL;
        env.fail = &f;
    }
    if (send_env(w, &env) == 0) o->sent_at = vdn_now();
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

static void send_heartbeat(worker *w) {
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    Vdn__Heartbeat h = VDN__HEARTBEAT__INIT;
    h.has_attempt_id = h.has_sent_at = 1;
    h.attempt_id = running_attempt(w);
    h.sent_at = vdn_wall();
    h.has_draining = 1;
    h.draining = w->terms > 0;
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
    if (w->cur) w->suspect = 1;
    double jitter = 0.75 + 0.5 * ((double)rand() / RAND_MAX);
    double wait = w->backoff * jitter;
    VDN_WARN("worker %s: %s; reconnecting to %s in %.1f s", w->o->id, why, w->o->connect, wait);
    w->reconnect_at = vdn_now() + wait;
    w->backoff = w->backoff * 2 > w->o->reconnect_max_s ? w->o->reconnect_max_s : w->backoff * 2;
}

static char *dup_or_null(const char *s) {
    return s && *s ? vdn_xstrdup(s) : NULL;
}

static void start_attempt(worker *w, const Vdn__Assign *a) {
    char err[VDN_ERR_LEN];
    const Vdn__RenderRequest *rq = a->request;
    if (!rq) {
        send_fail_now(w, a->attempt_id, "ASSIGN without a request", VDN_FAULT_JOB);
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
    s.video_shift = rq->has_video_shift ? rq->video_shift : 0;
    s.audio_shift = rq->has_audio_shift ? rq->audio_shift : 0;
    s.resume_key = dup_or_null(a->resume_key);
    s.snapshot_seconds = w->o->snapshot_seconds;
    s.snapshot_every = w->o->snapshot_every;
    s.data_roots = w->o->data_roots;
    s.n_data_roots = w->o->n_data_roots;
    VDN_INFO("worker %s: job %llu attempt %llu: start (%s, %dx%dx%d, %d steps, seed %llu)",
             w->o->id, (unsigned long long)s.job_id, (unsigned long long)s.attempt_id,
             s.prompt_cache ? s.prompt_cache
             : s.prompt     ? "text prompt"
                            : "-",
             s.frames, s.height, s.width, s.steps, (unsigned long long)s.seed);
    uint64_t attempt = s.attempt_id;
    w->cur = vdn_attempt_start(&s, w->eng, &w->stores, w->scratch, w->o->upload_attempts, err,
                               sizeof err);
    w->cancel_why = CANCEL_NONE;
    w->progress_sent = 0;
    w->snap_sent = 0;
    w->suspect = 0;
    w->gate_state = 0;
    if (!w->cur) {
        VDN_ERROR("worker %s: attempt %llu: %s", w->o->id, (unsigned long long)attempt, err);
        send_fail_now(w, attempt, err, VDN_FAULT_WORKER);
    }
}

static void on_assign(worker *w, const Vdn__Assign *a) {
    if (w->terms) {
        /* The coordinator may assign to us between our last RESULT and our DISCONNECT
         * (heartbeats say we drain, but an older coordinator may not listen). Give it straight
         * back and leave before another one comes. */
        send_fail_now(w, a->attempt_id, "worker is shutting down", VDN_FAULT_TRANSIENT);
        if (!w->cur && !w->out.active) w->leave_now = 1;
        return;
    }
    if (w->cur && w->cur->spec.attempt_id == a->attempt_id) return; /* repeated ASSIGN */
    if (w->out.active && w->out.attempt_id == a->attempt_id) {
        send_outcome(w); /* it is done already; say so again */
        return;
    }
    if (w->cur) {
        char msg[128];
        snprintf(msg, sizeof msg, "worker busy with attempt %llu",
                 (unsigned long long)w->cur->spec.attempt_id);
        send_fail_now(w, a->attempt_id, msg, VDN_FAULT_TRANSIENT);
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
    if (!w->need_ready) send_outcome(w);
}

static void cancel_current(worker *w, int why, const char *log_reason) {
    if (!w->cur) return;
    if (w->cancel_why == CANCEL_NONE || why == CANCEL_STALE) w->cancel_why = why;
    atomic_store(&w->cur->cancel, 1);
    vdn_attempt_gate(w->cur, 0);
    VDN_INFO("worker %s: attempt %llu: cancelling (%s)", w->o->id,
             (unsigned long long)w->cur->spec.attempt_id, log_reason);
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
    case VDN__ENVELOPE__PAYLOAD_HEARTBEAT: {
        /* Learn the coordinator's heartbeat interval so silence is judged on its clock, not
         * ours: it may beat far slower than we do. */
        double now = vdn_now();
        if (w->coord_hb_at > 0) {
            double gap = now - w->coord_hb_at;
            if (w->cur && gap > 2 * w->coord_gap) w->suspect = 1; /* it lost us for a while? */
            w->coord_gap = gap < w->o->heartbeat_s ? w->o->heartbeat_s : gap;
        }
        w->coord_hb_at = now;
        if (w->cur && w->gate_state == 1 && w->cancel_why == CANCEL_NONE && !w->need_ready &&
            now - w->gate_since >= 0.5 * w->coord_gap) {
            VDN_INFO("worker %s: attempt %llu is still ours; uploading", w->o->id,
                     (unsigned long long)w->cur->spec.attempt_id);
            w->gate_state = 2;
            vdn_attempt_gate(w->cur, 1);
        }
        break;
    }
    case VDN__ENVELOPE__PAYLOAD_ASSIGN:
        on_assign(w, env->assign);
        break;
    case VDN__ENVELOPE__PAYLOAD_CANCEL:
        if (w->cur && w->cur->spec.attempt_id == env->cancel->attempt_id)
            cancel_current(w, CANCEL_BY_COORDINATOR,
                           env->cancel->reason ? env->cancel->reason : "coordinator CANCEL");
        break;
    case VDN__ENVELOPE__PAYLOAD_ACK:
        if (w->out.active && w->out.attempt_id == env->ack->attempt_id) {
            VDN_DEBUG("worker %s: attempt %llu acknowledged", w->o->id,
                      (unsigned long long)w->out.attempt_id);
            outcome_clear(&w->out);
            if (w->terms && !w->cur) w->leave_now = 1; /* read nothing more: go */
        }
        break;
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
            if (w->cur && w->cur->spec.attempt_id == e->attempt_id)
                cancel_current(w, CANCEL_STALE, "the job was reassigned");
            if (w->out.active && w->out.attempt_id == e->attempt_id) outcome_clear(&w->out);
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

/* Progress and the outcome from the render thread. */
static void on_attempt_event(worker *w) {
    vdn_attempt *a = w->cur;
    uint64_t n;
    while (read(a->efd, &n, sizeof n) > 0) {
    }
    int first = w->progress_sent, done, total, finished, phase, resumed, snap_step;
    double secs[64];
    char snap_key[sizeof a->snap_key];
    pthread_mutex_lock(&a->mu);
    resumed = a->resumed_from;
    if (first < resumed) first = resumed; /* those came from the snapshot */
    snap_step = a->snap_step;
    memcpy(snap_key, a->snap_key, sizeof snap_key);
    done = a->nfe_done;
    total = a->nfe_total;
    finished = a->phase == VDN_ATTEMPT_FINISHED;
    phase = a->phase;
    /* More than 64 NFEs between two polls: report the latest ones; the count says the rest. */
    if (done - first > 64) first = done - 64;
    for (int k = first; k < done; k++)
        secs[k - first] = a->nfe_seconds[k];
    pthread_mutex_unlock(&a->mu);

    if (w->cancel_why != CANCEL_STALE) {
        for (int k = first + 1; k <= done; k++) {
            Vdn__Envelope env = VDN__ENVELOPE__INIT;
            Vdn__Progress p = VDN__PROGRESS__INIT;
            p.has_attempt_id = p.has_nfe_done = p.has_nfe_total = 1;
            p.has_nfe_seconds = p.has_elapsed_seconds = 1;
            p.attempt_id = a->spec.attempt_id;
            p.nfe_done = k;
            p.nfe_total = total;
            p.nfe_seconds = secs[k - 1 - first];
            p.elapsed_seconds = vdn_now() - a->started;
            p.has_nfe_evaluated = 1;
            p.nfe_evaluated = k - resumed;
            /* the snapshot taken after NFE k (it is stored before NFE k is reported) */
            if (snap_step > w->snap_sent && snap_step <= k) {
                p.snapshot_key = snap_key;
                p.has_snapshot_step = 1;
                p.snapshot_step = snap_step;
                w->snap_sent = snap_step;
            }
            env.payload_case = VDN__ENVELOPE__PAYLOAD_PROGRESS;
            env.progress = &p;
            send_env(w, &env);
        }
    }
    w->progress_sent = done;
    if (phase == VDN_ATTEMPT_UPLOAD_WAIT && w->gate_state == 0) {
        double now = vdn_now();
        if (w->cancel_why != CANCEL_NONE) {
            w->gate_state = 2;
            vdn_attempt_gate(a, 0);
        } else if (!w->suspect && w->sock && !w->need_ready && w->coord_hb_at > 0 &&
                   now - w->coord_hb_at <= 2 * w->coord_gap) {
            w->gate_state = 2; /* heard from the coordinator all along: ours */
            vdn_attempt_gate(a, 1);
        } else {
            VDN_INFO("worker %s: attempt %llu rendered after a gap in contact; checking with the "
                     "coordinator before uploading",
                     w->o->id, (unsigned long long)a->spec.attempt_id);
            w->gate_state = 1;
            w->gate_since = now;
            send_heartbeat(w); /* names the attempt: a stale one draws a CANCEL */
        }
    }
    if (!finished) return;

    double took = vdn_now() - a->started;
    outcome *o = &w->out;
    outcome_clear(o);
    if (w->cancel_why == CANCEL_STALE) {
        VDN_INFO("worker %s: job %llu attempt %llu: dropped (stale) after %.1f s", w->o->id,
                 (unsigned long long)a->spec.job_id, (unsigned long long)a->spec.attempt_id, took);
    } else {
        o->active = 1;
        o->attempt_id = a->spec.attempt_id;
        o->job_id = a->spec.job_id;
        o->ok = a->ok;
        if (a->ok) {
            o->keys = a->object_keys;
            o->nkeys = a->n_object_keys;
            o->record = a->record_json;
            a->object_keys = NULL;
            a->n_object_keys = 0;
            a->record_json = NULL;
            VDN_INFO("worker %s: job %llu attempt %llu: done in %.1f s, uploaded %s", w->o->id,
                     (unsigned long long)o->job_id, (unsigned long long)o->attempt_id, took,
                     o->keys[0]);
        } else {
            char reason[VDN_ERR_LEN + 64];
            o->retryable = a->retryable;
            o->fault = a->fault;
            if (w->cancel_why == CANCEL_BY_COORDINATOR) {
                o->retryable = 0;
                o->fault = VDN_FAULT_JOB; /* the job is over already: nothing to retry */
                snprintf(reason, sizeof reason, "cancelled by the coordinator");
            } else if (w->cancel_why == CANCEL_SHUTDOWN) {
                o->retryable = 1;
                o->fault = VDN_FAULT_TRANSIENT;
                snprintf(reason, sizeof reason, "worker shut down (second SIGTERM) mid-job");
            } else {
                snprintf(reason, sizeof reason, "%s", a->reason);
            }
            o->reason = vdn_xstrdup(reason);
            VDN_WARN("worker %s: job %llu attempt %llu: failed after %.1f s (%s fault): %s",
                     w->o->id, (unsigned long long)o->job_id, (unsigned long long)o->attempt_id,
                     took,
                     o->fault == VDN_FAULT_JOB      ? "job"
                     : o->fault == VDN_FAULT_WORKER ? "worker"
                                                    : "transient",
                     reason);
        }
        send_outcome(w);
    }
    vdn_attempt_free(a);
    w->cur = NULL;
    w->cancel_why = CANCEL_NONE;
}

static void on_signal(worker *w) {
    struct signalfd_siginfo si;
    while (read(w->sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGHUP) continue;
        w->terms++;
        if (w->terms == 1) {
            w->term_at = vdn_now();
            send_heartbeat(w); /* says "draining" now, before our RESULT invites an ASSIGN */
            if (w->cur)
                VDN_INFO("worker %s: %s: finishing attempt %llu, then exiting (signal again to "
                         "hand it back now)",
                         w->o->id, strsignal((int)si.ssi_signo),
                         (unsigned long long)w->cur->spec.attempt_id);
            else
                VDN_INFO("worker %s: %s: idle, exiting", w->o->id, strsignal((int)si.ssi_signo));
        } else if (w->cur) {
            cancel_current(w, CANCEL_SHUTDOWN, "second signal: handing the job back");
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
            if (!w->need_ready) send_outcome(w); /* anything finished while we were away */
        }
        if (w->sock && !w->need_ready && now - w->last_hb >= hb) send_heartbeat(w);
        if (w->sock && !w->need_ready && w->out.active &&
            (w->out.sent_at == 0 || now - w->out.sent_at > resend))
            send_outcome(w);

        if (w->terms && !w->cur) {
            /* Wait a little for the coordinator to take our last report, then leave at once:
             * it schedules right after the ACK, and our DISCONNECT hands back whatever it
             * assigned in between (see on_assign). A report that never gets through is not
             * lost work either: the lease runs out and the job is requeued. */
            double patience = w->terms >= 2 ? 5 : 30;
            if (!w->out.active || now - w->term_at > patience) {
                if (w->out.active)
                    VDN_WARN("worker %s: leaving without an ACK for attempt %llu", w->o->id,
                             (unsigned long long)w->out.attempt_id);
                send_disconnect(w, "worker shutting down");
                close_socket(w, 1000);
                VDN_INFO("worker %s: exiting", w->o->id);
                return 0;
            }
        }

        zmq_pollitem_t items[3];
        int n = 0, i_sock = -1, i_att = -1, i_sig;
        if (w->sock) {
            items[n] = (zmq_pollitem_t){.socket = w->sock, .events = ZMQ_POLLIN};
            i_sock = n++;
        }
        if (w->cur) {
            items[n] = (zmq_pollitem_t){.fd = w->cur->efd, .events = ZMQ_POLLIN};
            i_att = n++;
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
         * Our lease may have run out meanwhile; see the upload gate. */
        double slept = vdn_now() - before;
        if (slept > (double)ms / 1000 + 1.0 + hb) {
            VDN_WARN("worker %s: the process was frozen for %.1f s", w->o->id, slept);
            if (w->cur) w->suspect = 1;
        }
        if (items[i_sig].revents & ZMQ_POLLIN) on_signal(w);
        if (i_att >= 0 && (items[i_att].revents & ZMQ_POLLIN)) on_attempt_event(w);
        if (i_sock >= 0 && (items[i_sock].revents & ZMQ_POLLIN)) drain_socket(w);
    }
}

int vdn_worker_run(const vdn_worker_opts *o) {
    char err[VDN_ERR_LEN];
    worker w = {.o = o, .sigfd = -1};
    gethostname(w.hostname, sizeof w.hostname - 1);
    /* via 64 bits: milliseconds since 1970 do not fit an unsigned int (UB as a direct cast) */
    srand((unsigned)getpid() ^ (unsigned)(unsigned long long)(vdn_wall() * 1000));

    /* Signals arrive through a signalfd in this loop. Block them before any thread exists
     * (the render thread, ZeroMQ's I/O threads) so none of those is picked to take one. */
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

    snprintf(w.scratch, sizeof w.scratch, "%s/vdn-worker-%s", o->scratch, o->id);
    if (vdn_mkdir_p(w.scratch, err, sizeof err)) {
        VDN_ERROR("worker: scratch: %s", err);
        return 1;
    }
    vdn_backend_kind backend = o->cpu || w.gpus.n == 0 ? VDN_BACKEND_CPU : VDN_BACKEND_AUTO;
    double t0 = vdn_now();
    if (o->threads > 0) vdn_engine_set_threads(o->threads);
    w.eng = vdn_engine_open(o->checkpoint, o->adapters, o->n_adapters, backend, err, sizeof err);
    if (!w.eng) {
        VDN_ERROR("worker: cannot load checkpoint %s: %s", o->checkpoint, err);
        return 1;
    }
    VDN_INFO("worker %s: loaded %s in %.1f s (identity %.16s, backend %s)", o->id, o->checkpoint,
             vdn_now() - t0, vdn_engine_identity(w.eng), vdn_engine_backend_name(w.eng));
    if (o->store) w.stores.default_uri = vdn_xstrdup(o->store);
    w.stores.opts.retry_max_seconds = o->store_retry_s;
    w.stores.checkpoint = o->checkpoint;

    w.ctx = zmq_ctx_new();
    int rc = run_loop(&w);

    if (w.cur) { /* only on a poll failure */
        atomic_store(&w.cur->cancel, 1);
        vdn_attempt_free(w.cur);
    }
    outcome_clear(&w.out);
    close_socket(&w, 0);
    zmq_ctx_term(w.ctx);
    vdn_worker_stores_close(&w.stores);
    vdn_engine_close(w.eng);
    close(w.sigfd);
    return rc;
}
