/* The worker side of the coordinator: READY/HEARTBEAT/PROGRESS/RESULT/FAIL/DISCONNECT handling,
 * fencing by attempt id, heartbeats and lease expiry, scheduling. docs/protocol.md is the prose
 * version of this file. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <string.h>
#include <zmq.h>

#include "client.h"
#include "coord.h"
#include "db.h"
#include "jobs.h"
#include "spec.h"
#include "vdn_util.h"
#include "wire.h"

cworker *coord_worker_by_id(coord *c, const char *id) {
    for (int i = 0; i < c->nw; i++)
        if (!strcmp(c->w[i].id, id)) return &c->w[i];
    return NULL;
}

static cworker *by_ident(coord *c, const uint8_t *ident, size_t n) {
    for (int i = 0; i < c->nw; i++)
        if (c->w[i].connected && c->w[i].ident_len == n && !memcmp(c->w[i].ident, ident, n))
            return &c->w[i];
    return NULL;
}

static const char *worker_state(const coord *c, const cworker *w) {
    (void)c;
    if (!w->connected) return "gone";
    if (w->blocked_until > vdn_wall()) return "blocked";
    if (w->draining || w->stopping) return w->attempt ? "draining" : "drained";
    return w->attempt ? "busy" : "idle";
}

void coord_worker_save(coord *c, cworker *w) {
    char err[VDN_ERR_LEN];
    w->last_saved = vdn_now();
    if (cdb_run(c->db, err, sizeof err,
                "UPDATE workers SET state=?, last_seen=?, draining=?, blocked_until=? WHERE id=?",
                "sdids", worker_state(c, w), vdn_wall(), (int64_t)w->draining, w->blocked_until,
                w->id))
        VDN_ERROR("worker %s: %s", w->id, err);
}

static void send_env(coord *c, cworker *w, Vdn__Envelope *env) {
    char err[VDN_ERR_LEN];
    if (vdn_wire_send(c->wsock, w->ident, w->ident_len, env, err, sizeof err)) {
        /* ROUTER_MANDATORY: EHOSTUNREACH means the peer's connection is gone. The lease and
         * heartbeat timeout deal with its attempt; here we only stop talking to it. */
        VDN_WARN("worker %s: %s", w->id, err);
        if (errno == EHOSTUNREACH) w->connected = 0;
    }
}

void coord_send_cancel(coord *c, int64_t attempt, const char *worker_id, const char *reason) {
    cworker *w = worker_id ? coord_worker_by_id(c, worker_id) : NULL;
    if (!w || !w->connected) return;
    Vdn__Cancel m = VDN__CANCEL__INIT;
    m.has_attempt_id = 1;
    m.attempt_id = (uint64_t)attempt;
    m.reason = (char *)reason;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_CANCEL;
    env.cancel = &m;
    send_env(c, w, &env);
    if (w->attempt == attempt) w->cancel_sent = vdn_now();
    VDN_INFO("worker %s: CANCEL attempt %lld (%s)", w->id, (long long)attempt, reason);
}

static void send_ack(coord *c, cworker *w, int64_t attempt) {
    Vdn__Ack m = VDN__ACK__INIT;
    m.has_attempt_id = 1;
    m.attempt_id = (uint64_t)attempt;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_ACK;
    env.ack = &m;
    send_env(c, w, &env);
}

/* Worker faults in a row keep a worker from new work for a while (Flamenco's soft-fail): in
 * the failing job's class after --blocklist-failures of them there, from everything after twice
 * as many across classes (a machine that fails whatever it gets). */
static void maybe_blocklist(coord *c, const char *worker_id, int64_t job) {
    char err[VDN_ERR_LEN], detail[512], cls[300] = "";
    sqlite3_stmt *st = cdb_prep(c->db, "SELECT job_class FROM jobs WHERE id=?", "i", job);
    if (st && sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
        snprintf(cls, sizeof cls, "%s", sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    double until = vdn_wall() + c->o.blocklist_seconds;
    int64_t fc =
        cdb_int(c->db, 0, "SELECT failures FROM worker_blocks WHERE worker_id=? AND job_class=?",
                "ss", worker_id, cls);
    if (fc >= c->o.blocklist_failures) {
        cdb_run(c->db, err, sizeof err,
                "UPDATE worker_blocks SET failures=0, blocked_until=? WHERE worker_id=? AND "
                "job_class=?",
                "dss", until, worker_id, cls);
        snprintf(detail, sizeof detail,
                 "%lld worker faults in a row in class %s; none of it for "
                 "%.0f s",
                 (long long)fc, cls, c->o.blocklist_seconds);
        cdb_event(c->db, 0, 0, 0, worker_id, "blocklisted_class", detail);
        VDN_WARN("worker %s blocklisted for a class: %s", worker_id, detail);
    }
    int64_t f = cdb_int(c->db, 0, "SELECT failures FROM workers WHERE id=?", "s", worker_id);
    if (f < 2 * (int64_t)c->o.blocklist_failures) return;
    cdb_run(c->db, err, sizeof err, "UPDATE workers SET failures=0, blocked_until=? WHERE id=?",
            "ds", until, worker_id);
    snprintf(detail, sizeof detail, "%lld worker faults in a row; no work for %.0f s", (long long)f,
             c->o.blocklist_seconds);
    cdb_event(c->db, 0, 0, 0, worker_id, "blocklisted", detail);
    cworker *w = coord_worker_by_id(c, worker_id);
    if (w) {
        w->blocked_until = until;
        coord_worker_save(c, w);
    }
    VDN_WARN("worker %s blocklisted: %s", worker_id, detail);
}

/* Ends a running attempt (lost, expired, failed) and requeues or fails its job. */
static void end_attempt(coord *c, int64_t attempt, const char *state, const char *reason,
                        job_fault fault) {
    char err[VDN_ERR_LEN], js[16];
    attempt_info a;
    if (!jobs_attempt(c->db, attempt, &a) || !a.current) return;
    if (jobs_end_attempt(c->db, attempt, state, reason, fault, c->o.max_attempts, js, err,
                         sizeof err)) {
        VDN_ERROR("attempt %lld: %s", (long long)attempt, err);
        return;
    }
    VDN_INFO("job j%lld attempt %lld %s (%s fault: %s): job now %s", (long long)a.job,
             (long long)attempt, state, job_fault_name(fault), reason, js);
    if (fault == FAULT_WORKER) maybe_blocklist(c, a.worker, a.job);
}

/* A worker that vanished mid-job (crash, power, a cut cable) is the machine's fault; one that
 * said goodbye (shutdown) or whose connection now speaks for another id is nobody's. */
static void worker_lost(coord *c, cworker *w, const char *why, job_fault fault) {
    VDN_WARN("worker %s lost: %s", w->id, why);
    if (w->attempt) end_attempt(c, w->attempt, "expired", why, fault);
    w->attempt = 0;
    w->connected = 0;
    coord_worker_save(c, w);
    cdb_event(c->db, 0, 0, 0, w->id, "worker_gone", why);
}

static void on_ready(coord *c, const uint8_t *ident, size_t n, const Vdn__Ready *r) {
    char err[VDN_ERR_LEN];
    if (!r->worker_id || !r->worker_id[0] || strlen(r->worker_id) >= sizeof c->w->id ||
        n > sizeof c->w->ident) {
        vdn_wire_send_error(c->wsock, ident, n, 0, VDN__ERROR__CODE__INVALID, 0,
                            "READY: field 'worker_id' must be a non-empty string under 128 bytes");
        return;
    }
    /* another live connection with this worker id: the old one is a stale socket */
    cworker *w = coord_worker_by_id(c, r->worker_id);
    cworker *other = by_ident(c, ident, n);
    if (other && other != w)
        worker_lost(c, other, "its connection now speaks for another id", FAULT_TRANSIENT);
    if (!w) {
        c->w = realloc(c->w, sizeof *c->w * (size_t)(c->nw + 1));
        VDN_ASSERT(c->w);
        w = &c->w[c->nw++];
        memset(w, 0, sizeof *w);
        snprintf(w->id, sizeof w->id, "%s", r->worker_id);
    }
    memcpy(w->ident, ident, n);
    w->ident_len = n;
    w->connected = 1;
    w->last_seen = vdn_now();
    w->ngpus = (int)r->n_gpus;
    w->gpu_memory = 0;
    cJSON *gpus = cJSON_CreateArray();
    for (size_t i = 0; i < r->n_gpus; i++) {
        const Vdn__Gpu *g = r->gpus[i];
        if (i == 0 || g->memory_bytes < w->gpu_memory) w->gpu_memory = g->memory_bytes;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "index", g->has_index ? g->index : (int)i);
        if (g->name) cJSON_AddStringToObject(o, "name", g->name);
        cJSON_AddNumberToObject(o, "memory", (double)g->memory_bytes);
        cJSON_AddItemToArray(gpus, o);
    }
    /* a CPU-only worker renders one job at a time: count it as one device without memory */
    if (w->ngpus == 0) w->ngpus = 1;
    snprintf(w->checkpoint, sizeof w->checkpoint, "%s", r->checkpoint ? r->checkpoint : "");
    snprintf(w->identity, sizeof w->identity, "%s",
             r->checkpoint_identity ? r->checkpoint_identity : "");
    char *gj = cJSON_PrintUnformatted(gpus);
    cJSON_Delete(gpus);
    double now = vdn_wall();
    cdb_run(c->db, err, sizeof err,
            "INSERT INTO workers(id,state,gpus,checkpoint,checkpoint_identity,engine_version,"
            "backend,hostname,first_seen,last_seen) VALUES(?,'idle',?,?,?,?,?,?,?,?) "
            "ON CONFLICT(id) DO UPDATE SET gpus=excluded.gpus, checkpoint=excluded.checkpoint, "
            "checkpoint_identity=excluded.checkpoint_identity, "
            "engine_version=excluded.engine_version, backend=excluded.backend, "
            "hostname=excluded.hostname, last_seen=excluded.last_seen",
            "sssssssdd", r->worker_id, gj, r->checkpoint, r->checkpoint_identity, r->engine_version,
            r->backend, r->hostname, now, now);
    free(gj);
    w->draining = (int)cdb_int(c->db, 0, "SELECT draining FROM workers WHERE id=?", "s", w->id);
    double bu = 0;
    sqlite3_stmt *st = cdb_prep(c->db, "SELECT blocked_until FROM workers WHERE id=?", "s", w->id);
    if (st && sqlite3_step(st) == SQLITE_ROW) bu = sqlite3_column_double(st, 0);
    sqlite3_finalize(st);
    w->blocked_until = bu;
    w->stopping = r->has_draining && r->draining;

    /* Reconnect: a worker still running attempt X may finish it when X is still current. Any
     * other attempt the database has it running was lost with the worker's old process. */
    int64_t keep = 0;
    if (r->has_running_attempt && r->running_attempt) {
        attempt_info a;
        int64_t x = (int64_t)r->running_attempt;
        if (jobs_attempt(c->db, x, &a) && a.current && !strcmp(a.worker, w->id)) {
            keep = x;
            jobs_renew(c->db, x, now + c->o.lease_seconds);
            cdb_event(c->db, a.batch, a.job, x, w->id, "resumed", "worker reconnected with it");
        } else {
            w->attempt = x; /* until it acknowledges the cancel */
            coord_send_cancel(c, x, w->id, "attempt is no longer current");
        }
    }
    st = cdb_prep(c->db, "SELECT id FROM attempts WHERE worker_id=? AND state='running'", "s",
                  w->id);
    int64_t lost[64];
    int nl = 0;
    while (st && sqlite3_step(st) == SQLITE_ROW && nl < 64) {
        int64_t x = sqlite3_column_int64(st, 0);
        if (x != keep) lost[nl++] = x;
    }
    sqlite3_finalize(st);
    for (int i = 0; i < nl; i++)
        end_attempt(c, lost[i], "expired", "worker restarted without it (READY)", FAULT_WORKER);
    if (keep)
        w->attempt = keep, w->cancel_sent = 0;
    else if (!(r->has_running_attempt && r->running_attempt))
        w->attempt = 0;
    coord_worker_save(c, w);
    cdb_event(c->db, 0, 0, 0, w->id, "worker_ready", r->engine_version);
    VDN_INFO("worker %s ready: %d GPU(s), checkpoint '%s'%s", w->id, (int)r->n_gpus, w->checkpoint,
             keep ? ", resuming its attempt" : "");
}

/* Fencing: a message about an attempt counts only if that attempt is the job's current one and
 * belongs to this worker. Anything else is refused and the worker told to stop it. */
static int fence(coord *c, cworker *w, int64_t attempt, const char *what, attempt_info *a) {
    if (jobs_attempt(c->db, attempt, a) && a->current && !strcmp(a->worker, w->id)) return 1;
    char msg[256];
    snprintf(msg, sizeof msg, "%s for attempt %lld refused: %s", what, (long long)attempt,
             !a->job ? "no such attempt"
                     : "not the job's current attempt (it was requeued, "
                       "cancelled or finished)");
    vdn_wire_send_error(c->wsock, w->ident, w->ident_len, 0, VDN__ERROR__CODE__STALE_ATTEMPT,
                        (uint64_t)attempt, msg);
    if (a->job) cdb_event(c->db, a->batch, a->job, attempt, w->id, "stale_refused", what);
    VDN_WARN("worker %s: %s", w->id, msg);
    return 0;
}

static void on_progress(coord *c, cworker *w, const Vdn__Progress *p) {
    attempt_info a;
    if (!fence(c, w, (int64_t)p->attempt_id, "PROGRESS", &a)) {
        coord_send_cancel(c, (int64_t)p->attempt_id, w->id, "stale attempt");
        return;
    }
    jobs_progress(c->db, (int64_t)p->attempt_id, p->nfe_done, p->nfe_total, p->nfe_seconds,
                  p->elapsed_seconds, vdn_wall() + c->o.lease_seconds);
    if (p->has_nfe_evaluated || (p->snapshot_key && p->snapshot_key[0]))
        jobs_snapshot(c->db, (int64_t)p->attempt_id, p->nfe_evaluated, p->snapshot_key,
                      p->snapshot_step);
}

static void on_result(coord *c, cworker *w, const Vdn__Result *r) {
    attempt_info a;
    int64_t x = (int64_t)r->attempt_id;
    if (w->attempt == x) w->attempt = 0;
    if (!fence(c, w, x, "RESULT", &a)) return;
    char err[VDN_ERR_LEN];
    if (jobs_complete(c->db, x, r->object_keys, r->n_object_keys, r->run_record_json, err,
                      sizeof err)) {
        VDN_ERROR("job j%lld: recording result failed: %s", (long long)a.job, err);
        vdn_wire_send_error(c->wsock, w->ident, w->ident_len, 0, VDN__ERROR__CODE__INTERNAL,
                            (uint64_t)x, "coordinator could not record the result; will retry");
        return;
    }
    send_ack(c, w, x);
    coord_worker_save(c, w);
    VDN_INFO("job j%lld done by %s (attempt %lld, %zu objects)", (long long)a.job, w->id,
             (long long)x, r->n_object_keys);
}

static void on_fail(coord *c, cworker *w, const Vdn__Fail *f) {
    attempt_info a;
    int64_t x = (int64_t)f->attempt_id;
    /* the answer to our CANCEL: the job is already cancelled, just free the worker */
    if (w->attempt == x && jobs_attempt(c->db, x, &a) && !strcmp(a.state, "cancelled")) {
        w->attempt = 0;
        send_ack(c, w, x);
        coord_worker_save(c, w);
        return;
    }
    if (w->attempt == x) w->attempt = 0;
    if (!fence(c, w, x, "FAIL", &a)) return;
    /* an older worker says only whether to retry: a retryable failure was the machine's */
    job_fault fault = f->has_fault                          ? (job_fault)f->fault
                      : (!f->has_retryable || f->retryable) ? FAULT_WORKER
                                                            : FAULT_JOB;
    end_attempt(c, x, "failed", f->reason ? f->reason : "(no reason given)", fault);
    send_ack(c, w, x);
    coord_worker_save(c, w);
}

void coord_on_worker_frame(coord *c, const uint8_t *ident, size_t ident_len, const void *body,
                           size_t len) {
    char err[VDN_ERR_LEN];
    int code;
    Vdn__Envelope *env = vdn_wire_decode(body, len, &code, err, sizeof err);
    if (!env) {
        VDN_WARN("worker endpoint: %s", err);
        vdn_wire_send_error(c->wsock, ident, ident_len, 0, code, 0, err);
        return;
    }
    if (env->payload_case == VDN__ENVELOPE__PAYLOAD_READY) {
        on_ready(c, ident, ident_len, env->ready);
        coord_schedule(c);
        vdn__envelope__free_unpacked(env, NULL);
        return;
    }
    cworker *w = by_ident(c, ident, ident_len);
    if (!w) {
        /* e.g. after a coordinator restart: the worker answers with READY (docs/protocol.md) */
        snprintf(err, sizeof err, "%s from an unknown worker: send READY first",
                 vdn_wire_payload_name(env->payload_case));
        vdn_wire_send_error(c->wsock, ident, ident_len, 0, VDN__ERROR__CODE__UNKNOWN_WORKER, 0,
                            err);
        vdn__envelope__free_unpacked(env, NULL);
        return;
    }
    w->last_seen = vdn_now();
    switch (env->payload_case) {
    case VDN__ENVELOPE__PAYLOAD_HEARTBEAT: {
        int64_t x = env->heartbeat->has_attempt_id ? (int64_t)env->heartbeat->attempt_id : 0;
        attempt_info a;
        /* SIGTERM: it finishes what it has and leaves; an ASSIGN now would only come back */
        if (env->heartbeat->has_draining && env->heartbeat->draining && !w->stopping) {
            w->stopping = 1;
            VDN_INFO("worker %s is shutting down: no new work for it", w->id);
            coord_worker_save(c, w);
        }
        if (x && jobs_attempt(c->db, x, &a) && a.current && !strcmp(a.worker, w->id))
            jobs_renew(c->db, x, vdn_wall() + c->o.lease_seconds);
        else if (x && (!a.job || !a.current || strcmp(a.worker, w->id))) {
            /* it still renders a stale attempt: busy until it stops, so no ASSIGN meanwhile */
            if (!w->attempt) w->attempt = x;
            coord_send_cancel(c, x, w->id, "attempt is no longer current");
        }
        /* the worker says it is idle: an attempt we thought it held is over only if the
         * database agrees (a just-sent ASSIGN may cross this heartbeat on the wire) */
        if (!x && w->attempt && !(jobs_attempt(c->db, w->attempt, &a) && a.current)) w->attempt = 0;
        /* keep `vdn workers` LAST SEEN fresh without a write per heartbeat */
        if (vdn_now() - w->last_saved > 5) coord_worker_save(c, w);
        break;
    }
    case VDN__ENVELOPE__PAYLOAD_PROGRESS:
        on_progress(c, w, env->progress);
        break;
    case VDN__ENVELOPE__PAYLOAD_RESULT:
        on_result(c, w, env->result);
        break;
    case VDN__ENVELOPE__PAYLOAD_FAIL:
        on_fail(c, w, env->fail);
        break;
    case VDN__ENVELOPE__PAYLOAD_DISCONNECT:
        worker_lost(c, w, env->disconnect->reason ? env->disconnect->reason : "disconnected",
                    FAULT_TRANSIENT);
        break;
    default:
        snprintf(err, sizeof err, "%s does not belong on the worker endpoint",
                 vdn_wire_payload_name(env->payload_case));
        vdn_wire_send_error(c->wsock, ident, ident_len, 0, VDN__ERROR__CODE__UNEXPECTED, 0, err);
    }
    vdn__envelope__free_unpacked(env, NULL);
    coord_schedule(c);
}

static void assign(coord *c, cworker *w, const job_claim *cl) {
    vdn_job_spec *specs = NULL;
    int n = 0;
    vdn_errlist errs = {0};
    if (vdn_jsonl_parse(cl->request_json, strlen(cl->request_json), "jobs.request", NULL, 0, &specs,
                        &n, &errs) ||
        n != 1) {
        end_attempt(c, cl->attempt, "failed",
                    errs.n ? errs.lines[0] : "stored request does not parse", FAULT_JOB);
        vdn_errlist_free(&errs);
        vdn_jobs_free(specs, n);
        return;
    }
    Vdn__RenderRequest req;
    vdn_job_spec_to_proto(&specs[0], &req);
    req.output_prefix = cl->output_prefix;
    char k0[600], k1[600];
    snprintf(k0, sizeof k0, "%s.safetensors", cl->output_prefix);
    snprintf(k1, sizeof k1, "%s.json", cl->output_prefix);
    char *keys[2] = {k0, k1};
    req.n_output_keys = 2;
    req.output_keys = keys;
    Vdn__Assign m = VDN__ASSIGN__INIT;
    m.has_job_id = m.has_attempt_id = m.has_batch_id = m.has_lease_seconds = 1;
    m.job_id = (uint64_t)cl->job;
    m.batch_id = (uint64_t)cl->batch;
    m.attempt_id = (uint64_t)cl->attempt;
    m.lease_seconds = c->o.lease_seconds;
    m.store_uri = (char *)c->o.store_uri;
    m.resume_key = cl->resume_key;
    m.request = &req;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_ASSIGN;
    env.assign = &m;
    w->attempt = cl->attempt;
    w->cancel_sent = 0;
    send_env(c, w, &env);
    if (!w->connected)
        worker_lost(c, w, "ASSIGN could not be delivered", FAULT_TRANSIENT);
    else
        VDN_INFO("job j%lld -> %s (attempt %lld)", (long long)cl->job, w->id,
                 (long long)cl->attempt);
    vdn_jobs_free(specs, n);
}

void coord_schedule(coord *c) {
    double wall = vdn_wall();
    /* the common case on every heartbeat: nothing queued, no transaction per idle worker */
    if (!cdb_int(c->db, 0, "SELECT count(*) FROM (SELECT 1 FROM jobs WHERE state='queued' LIMIT 1)",
                 ""))
        return;
    for (int i = 0; i < c->nw; i++) {
        cworker *w = &c->w[i];
        if (!w->connected || w->attempt || w->draining || w->stopping || w->blocked_until > wall)
            continue;
        job_caps caps = {w->id, w->ngpus, w->gpu_memory, w->checkpoint, w->identity};
        job_claim cl;
        char err[VDN_ERR_LEN];
        int rc = jobs_claim(c->db, &caps, c->o.lease_seconds, &cl, err, sizeof err);
        if (rc < 0) VDN_ERROR("claim for %s: %s", w->id, err);
        if (rc <= 0) continue;
        assign(c, w, &cl);
        job_claim_free(&cl);
        coord_worker_save(c, w);
    }
}

static void expire_one(void *user, int64_t attempt) {
    coord *c = user;
    attempt_info a;
    if (!jobs_attempt(c->db, attempt, &a)) return;
    end_attempt(c, attempt, "expired", "lease expired (no heartbeat or progress in time)",
                FAULT_WORKER);
    cworker *w = coord_worker_by_id(c, a.worker);
    if (w && w->attempt == attempt) coord_send_cancel(c, attempt, w->id, "lease expired");
}

void coord_tick(coord *c) {
    double now = vdn_now();
    for (int i = 0; i < c->nw; i++) {
        cworker *w = &c->w[i];
        if (!w->connected) continue;
        if (now - w->last_seen > 3 * c->o.heartbeat_seconds) {
            char why[128];
            snprintf(why, sizeof why, "no heartbeat for %.1f s", now - w->last_seen);
            worker_lost(c, w, why, FAULT_WORKER);
            continue;
        }
        /* a worker that never answers a CANCEL is free again after one lease */
        if (w->cancel_sent && now - w->cancel_sent > c->o.lease_seconds) {
            w->attempt = 0;
            w->cancel_sent = 0;
        }
        if (now - w->last_hb_sent >= c->o.heartbeat_seconds) {
            Vdn__Heartbeat hb = VDN__HEARTBEAT__INIT;
            hb.has_sent_at = 1;
            hb.sent_at = vdn_wall();
            Vdn__Envelope env = VDN__ENVELOPE__INIT;
            env.payload_case = VDN__ENVELOPE__PAYLOAD_HEARTBEAT;
            env.heartbeat = &hb;
            send_env(c, w, &env);
            w->last_hb_sent = now;
            if (!w->connected) worker_lost(c, w, "its connection is gone", FAULT_WORKER);
        }
    }
    jobs_each_expired(c->db, vdn_wall(), expire_one, c);
    coord_schedule(c);
}

static void requeue_past(void *user, int64_t attempt) {
    coord *c = user;
    end_attempt(c, attempt, "expired", "lease passed while the coordinator was down",
                FAULT_TRANSIENT);
}

void coord_recover(coord *c) {
    char err[VDN_ERR_LEN];
    int n = jobs_each_expired(c->db, vdn_wall(), requeue_past, c);
    if (n > 0) VDN_INFO("recovery: requeued %d attempt(s) whose lease passed", n);
    /* nobody is connected yet: every worker row is 'gone' until it says READY */
    cdb_run(c->db, err, sizeof err, "UPDATE workers SET state='gone'", "");
    int64_t live = cdb_int(c->db, 0, "SELECT count(*) FROM attempts WHERE state='running'", "");
    if (live)
        VDN_INFO("recovery: %lld attempt(s) still leased; their workers may reconnect and finish",
                 (long long)live);
}
