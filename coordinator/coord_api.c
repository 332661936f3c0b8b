/* The client API endpoint: one request envelope in, one reply envelope out (same request_id).
 * Reads go to query.c, writes to jobs.c; everything on the main loop thread. */
#include <string.h>
#include <zmq.h>

#include "client.h"
#include "coord.h"
#include "db.h"
#include "jobs.h"
#include "keys.h"
#include "query.h"
#include "vdn_util.h"
#include "waiting.h"
#include "wire.h"

typedef struct {
    coord *c;
    const uint8_t *ident;
    size_t ident_len;
    int delimited; /* a REQ peer: echo the empty delimiter frame */
    uint64_t request_id;
    vdn_peer who; /* the connection's key: name and role (local: no CURVE, the farm's one user) */
} peer;

static void reply(peer *p, Vdn__Envelope *env) {
    char err[VDN_ERR_LEN];
    if (p->request_id) env->has_request_id = 1, env->request_id = p->request_id;
    if (p->delimited) {
        if (zmq_send(p->c->csock, p->ident, p->ident_len, ZMQ_SNDMORE) < 0 ||
            zmq_send(p->c->csock, "", 0, ZMQ_SNDMORE) < 0) {
            VDN_WARN("client reply: %s", zmq_strerror(zmq_errno()));
            return;
        }
        if (vdn_wire_send(p->c->csock, NULL, 0, env, err, sizeof err))
            VDN_WARN("client reply: %s", err);
        return;
    }
    if (vdn_wire_send(p->c->csock, p->ident, p->ident_len, env, err, sizeof err))
        VDN_WARN("client reply: %s", err);
}

static void reply_error(peer *p, int code, const char *msg) {
    Vdn__Error e = VDN__ERROR__INIT;
    e.has_code = 1;
    e.code = code;
    e.message = (char *)msg;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_ERROR;
    env.error = &e;
    reply(p, &env);
}

/* quarantined: jobs a retry left alone (-1: not a retry's reply) */
static void reply_counts(peer *p, int n, int quarantined) {
    Vdn__CountReply r = VDN__COUNT_REPLY__INIT;
    r.has_count = 1;
    r.count = n;
    if (quarantined >= 0) r.has_quarantined = 1, r.quarantined = quarantined;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_COUNT_REPLY;
    env.count_reply = &r;
    reply(p, &env);
}

static void reply_count(peer *p, int n) {
    reply_counts(p, n, -1);
}

/* "b12" / "j34" -> kind and id, and it must exist. */
static int target(peer *p, const char *s, const char *allowed, char *kind, int64_t *id) {
    char err[VDN_ERR_LEN];
    uint64_t u;
    if (!s || vdn_parse_target(s, kind, &u, err, sizeof err)) {
        reply_error(p, VDN__ERROR__CODE__INVALID, s ? err : "field 'target': required");
        return -1;
    }
    if (!strchr(allowed, *kind)) {
        snprintf(err, sizeof err, "field 'target': expected a %s id, got \"%s\"",
                 allowed[0] == 'j' && !allowed[1] ? "job (j34)" : "batch or job", s);
        reply_error(p, VDN__ERROR__CODE__INVALID, err);
        return -1;
    }
    *id = (int64_t)u;
    int exists = cdb_int(p->c->db, 0,
                         *kind == 'b' ? "SELECT count(*) FROM batches WHERE id=?"
                                      : "SELECT count(*) FROM jobs WHERE id=?",
                         "i", *id) > 0;
    if (!exists) {
        snprintf(err, sizeof err, "no %s %s", *kind == 'b' ? "batch" : "job", s);
        reply_error(p, VDN__ERROR__CODE__NOT_FOUND, err);
        return -1;
    }
    return 0;
}

/* Roles (keys.h): read looks, submit also submits and cancels/retries its own batches, admin does
 * everything. 0 allowed, else -1 with the refusal sent. */
static int allowed(peer *p, vdn_role need, const char *what) {
    if (p->who.local || p->who.role >= need) return 0;
    char err[VDN_ERR_LEN];
    snprintf(err, sizeof err, "%s refused: key '%s' has role %s; this needs %s (the keys file)",
             what, p->who.name, vdn_role_name(p->who.role), vdn_role_name(need));
    reply_error(p, VDN__ERROR__CODE__FORBIDDEN, err);
    VDN_WARN("client endpoint: %s", err);
    return -1;
}

/* Cancel and retry touch only the caller's own batches, unless it is an admin. */
static int owns(peer *p, char kind, int64_t id, const char *what) {
    if (allowed(p, VDN_ROLE_SUBMIT, what)) return -1;
    if (p->who.local || p->who.role == VDN_ROLE_ADMIN) return 0;
    char owner[VDN_KEY_NAME_MAX + 1] = "";
    if (jobs_owner(p->c->db, kind, id, owner, sizeof owner) == 0 && !strcmp(owner, p->who.name))
        return 0;
    char err[VDN_ERR_LEN];
    snprintf(err, sizeof err,
             "%s of %c%lld refused: it belongs to %s%s, not to '%s' (only an admin "
             "may touch another's batch)",
             what, kind, (long long)id, owner[0] ? "" : "the farm's local user", owner,
             p->who.name);
    reply_error(p, VDN__ERROR__CODE__FORBIDDEN, err);
    VDN_WARN("client endpoint: %s", err);
    return -1;
}

static void on_submit(peer *p, const Vdn__SubmitRequest *s) {
    vdn_errlist errs = {0};
    int64_t batch = 0, *ids = NULL;
    if (allowed(p, VDN_ROLE_SUBMIT, "submit")) return;
    jobs_submitter who = {p->who.local ? NULL : p->who.name,
                          p->who.local || p->who.role == VDN_ROLE_ADMIN, p->c->o.max_jobs_per_batch,
                          p->c->o.max_prompt_chars};
    /* jobs no registered worker could take: lines in errs, which jobs_submit then adds its own
     * findings to and refuses to insert */
    if (!(s->has_allow_wait && s->allow_wait)) coord_submit_check(p->c, s, &errs);
    if (jobs_submit(p->c->db, s, &p->c->o.caps, &who, &batch, &ids, &errs)) {
        size_t cap = 1;
        for (int i = 0; i < errs.n; i++)
            cap += strlen(errs.lines[i]) + 1;
        char *msg = vdn_xmalloc(cap);
        msg[0] = 0;
        for (int i = 0; i < errs.n; i++) {
            strcat(msg, errs.lines[i]);
            if (i + 1 < errs.n) strcat(msg, "\n");
        }
        reply_error(p, VDN__ERROR__CODE__INVALID, msg);
        free(msg);
        vdn_errlist_free(&errs);
        return;
    }
    Vdn__SubmitReply r = VDN__SUBMIT_REPLY__INIT;
    r.has_batch_id = 1;
    r.batch_id = (uint64_t)batch;
    r.n_job_ids = s->n_jobs;
    r.job_ids = (uint64_t *)ids;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_SUBMIT_REPLY;
    env.submit_reply = &r;
    reply(p, &env);
    VDN_INFO("batch b%lld submitted by %s: %zu job(s), tag '%s'", (long long)batch,
             who.owner ? who.owner : "the local user", s->n_jobs, s->tag ? s->tag : "");
    free(ids);
    coord_schedule(p->c);
}

static void cancel_cb(void *user, int64_t attempt, const char *worker) {
    coord_send_cancel(user, attempt, worker, "cancelled by user");
}

static void on_drain(peer *p, const Vdn__DrainRequest *d) {
    coord *c = p->c;
    char err[VDN_ERR_LEN];
    if (allowed(p, VDN_ROLE_ADMIN, "drain")) return;
    if (!d->worker_id || !d->worker_id[0]) {
        reply_error(p, VDN__ERROR__CODE__INVALID, "field 'worker_id': required");
        return;
    }
    int undo = d->has_undo && d->undo;
    cworker *w = coord_worker_by_id(c, d->worker_id);
    if (!w && !cdb_int(c->db, 0, "SELECT count(*) FROM workers WHERE id=?", "s", d->worker_id)) {
        snprintf(err, sizeof err, "no worker '%s'", d->worker_id);
        reply_error(p, VDN__ERROR__CODE__NOT_FOUND, err);
        return;
    }
    cdb_run(c->db, err, sizeof err, "UPDATE workers SET draining=? WHERE id=?", "is",
            (int64_t)!undo, d->worker_id);
    cdb_event(c->db, 0, 0, 0, d->worker_id, undo ? "undrained" : "drain", NULL);
    if (w) {
        w->draining = !undo;
        coord_worker_save(c, w);
    }
    reply_count(p, 1);
    if (undo) coord_schedule(c);
}

void coord_on_client_frames(coord *c, const uint8_t *ident, size_t ident_len, int delimited,
                            const char *user, const void *body, size_t len) {
    char err[VDN_ERR_LEN];
    int code;
    peer p = {c, ident, ident_len, delimited, 0, {0}};
    if (!c->curve)
        vdn_peer_parse(NULL, &p.who);
    else if (vdn_peer_parse(user, &p.who) || p.who.local || p.who.role == VDN_ROLE_WORKER) {
        reply_error(&p, VDN__ERROR__CODE__FORBIDDEN, "this connection's key is not a client's key");
        return;
    }
    Vdn__Envelope *env = vdn_wire_decode(body, len, &code, err, sizeof err);
    if (!env) {
        VDN_WARN("client endpoint: %s", err);
        reply_error(&p, code, err);
        return;
    }
    p.request_id = env->has_request_id ? env->request_id : 0;
    Vdn__Envelope out = VDN__ENVELOPE__INIT;
    char kind;
    int64_t id;
    int n, q;
    switch (env->payload_case) {
    case VDN__ENVELOPE__PAYLOAD_SUBMIT:
        on_submit(&p, env->submit);
        break;
    case VDN__ENVELOPE__PAYLOAD_STATUS: {
        const char *t = env->status->target;
        kind = 0, id = 0;
        if (t && t[0] && target(&p, t, "bj", &kind, &id)) break;
        Vdn__StatusReply *r = query_status(c->db, kind, id, err, sizeof err);
        if (!r) {
            reply_error(&p, VDN__ERROR__CODE__NOT_FOUND, err);
            break;
        }
        out.payload_case = VDN__ENVELOPE__PAYLOAD_STATUS_REPLY;
        out.status_reply = r;
        reply(&p, &out);
        protobuf_c_message_free_unpacked(&r->base, NULL);
        break;
    }
    case VDN__ENVELOPE__PAYLOAD_LIST: {
        Vdn__ListReply *r =
            query_list(c->db, env->list->tag, env->list->has_limit ? env->list->limit : 0);
        out.payload_case = VDN__ENVELOPE__PAYLOAD_LIST_REPLY;
        out.list_reply = r;
        reply(&p, &out);
        protobuf_c_message_free_unpacked(&r->base, NULL);
        break;
    }
    case VDN__ENVELOPE__PAYLOAD_CANCEL_REQ:
        if (target(&p, env->cancel_req->target, "bj", &kind, &id)) break;
        if (owns(&p, kind, id, "cancel")) break;
        if (jobs_cancel(c->db, kind, id, &n, cancel_cb, c, err, sizeof err))
            reply_error(&p, VDN__ERROR__CODE__INTERNAL, err);
        else
            reply_count(&p, n);
        break;
    case VDN__ENVELOPE__PAYLOAD_RETRY:
        if (target(&p, env->retry->target, "bj", &kind, &id)) break;
        if (owns(&p, kind, id, "retry")) break;
        if (jobs_retry(c->db, kind, id, env->retry->has_force && env->retry->force, &n, &q, err,
                       sizeof err))
            reply_error(&p, VDN__ERROR__CODE__INTERNAL, err);
        else
            reply_counts(&p, n, q);
        coord_schedule(c);
        break;
    case VDN__ENVELOPE__PAYLOAD_DRAIN:
        on_drain(&p, env->drain);
        break;
    case VDN__ENVELOPE__PAYLOAD_WORKERS: {
        Vdn__WorkersReply *r = query_workers(c->db);
        out.payload_case = VDN__ENVELOPE__PAYLOAD_WORKERS_REPLY;
        out.workers_reply = r;
        reply(&p, &out);
        protobuf_c_message_free_unpacked(&r->base, NULL);
        break;
    }
    case VDN__ENVELOPE__PAYLOAD_LOGS: {
        if (target(&p, env->logs->target, "j", &kind, &id)) break;
        Vdn__LogsReply *r = query_logs(c->db, id, err, sizeof err);
        if (!r) {
            reply_error(&p, VDN__ERROR__CODE__NOT_FOUND, err);
            break;
        }
        out.payload_case = VDN__ENVELOPE__PAYLOAD_LOGS_REPLY;
        out.logs_reply = r;
        reply(&p, &out);
        protobuf_c_message_free_unpacked(&r->base, NULL);
        break;
    }
    default:
        snprintf(err, sizeof err, "%s does not belong on the client endpoint",
                 vdn_wire_payload_name(env->payload_case));
        reply_error(&p, VDN__ERROR__CODE__UNEXPECTED, err);
    }
    vdn__envelope__free_unpacked(env, NULL);
}
