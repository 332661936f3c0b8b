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
#include "keys.h"
#include "place.h"
#include "precision.h"
#include "spec.h"
#include "vdn_util.h"
#include "waiting.h"
#include "wire.h"

/* ---- the attempts a worker holds, and on which GPUs ---- */

static int npos(const cworker *w) {
    return w->ngpus > 0 ? w->ngpus : 1; /* a CPU worker: one slot */
}

static uint64_t all_gpus(const cworker *w) {
    int n = npos(w);
    return n >= 64 ? ~0ull : (1ull << n) - 1;
}

static chold *find_hold(cworker *w, int64_t attempt) {
    for (int i = 0; i < w->nhold; i++)
        if (w->hold[i].attempt == attempt) return &w->hold[i];
    return NULL;
}

static chold *add_hold(cworker *w, int64_t attempt, int64_t job, uint64_t mask) {
    chold *h = find_hold(w, attempt);
    if (!h) {
        if (w->nhold == COORD_MAX_HOLDS) return NULL;
        h = &w->hold[w->nhold++];
    }
    memset(h, 0, sizeof *h);
    h->attempt = attempt;
    h->job = job;
    h->mask = mask;
    h->started = h->last_progress = vdn_now();
    h->est_seconds = -1;
    return h;
}

static void drop_hold(cworker *w, int64_t attempt) {
    chold *h = find_hold(w, attempt);
    if (h) *h = w->hold[--w->nhold];
}

/* GPUs a READY or HEARTBEAT says run attempt x; 0 when it does not say (an older worker). */
static uint64_t mask_of(const cworker *w, Vdn__Gpu **g, size_t n, int64_t x) {
    uint64_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (g[i]->has_attempt_id && (int64_t)g[i]->attempt_id == x)
            for (int p = 0; p < w->ngpus; p++)
                if (w->gpu[p].index == g[i]->index) m |= 1ull << p;
    return m;
}

/* A worker's GPU state from READY or HEARTBEAT (memory in use, out of service). */
static void note_gpu_state(coord *c, cworker *w, Vdn__Gpu **g, size_t n) {
    for (size_t i = 0; i < n; i++)
        for (int p = 0; p < w->ngpus; p++) {
            cgpu *x = &w->gpu[p];
            if (x->index != g[i]->index) continue;
            x->used = g[i]->memory_used;
            int free_now = !(g[i]->has_attempt_id && g[i]->attempt_id);
            if (free_now && x->used && (!x->resident || x->used < x->resident))
                x->resident = x->used;
            int out = g[i]->has_out_of_service && g[i]->out_of_service;
            if (out && !x->out_of_service) {
                snprintf(x->fault, sizeof x->fault, "%s", g[i]->fault ? g[i]->fault : "");
                VDN_WARN("worker %s: GPU %d out of service (%s); nothing more is placed on it",
                         w->id, x->index, x->fault);
                cdb_event(c->db, 0, 0, 0, w->id, "gpu_out_of_service", x->fault);
            }
            x->out_of_service = out;
        }
}

/* The live state of every GPU, as the workers table keeps it for `vdn workers`. */
static char *gpus_json(const cworker *w) {
    cJSON *arr = cJSON_CreateArray();
    for (int p = 0; p < w->ngpus; p++) {
        const cgpu *g = &w->gpu[p];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "index", g->index);
        if (g->name[0]) cJSON_AddStringToObject(o, "name", g->name);
        cJSON_AddNumberToObject(o, "memory", (double)g->memory);
        if (g->used) cJSON_AddNumberToObject(o, "used", (double)g->used);
        if (g->resident) cJSON_AddNumberToObject(o, "resident", (double)g->resident);
        for (int i = 0; i < w->nhold; i++)
            if (w->hold[i].mask >> p & 1)
                cJSON_AddNumberToObject(o, "attempt", (double)w->hold[i].attempt);
        if (g->out_of_service) {
            cJSON_AddTrueToObject(o, "out_of_service");
            cJSON_AddStringToObject(o, "fault", g->fault);
        }
        if (w->reserved_for && (w->reserved_mask >> p & 1))
            cJSON_AddNumberToObject(o, "reserved_for", (double)w->reserved_for);
        cJSON_AddItemToArray(arr, o);
    }
    char *s = cJSON_PrintUnformatted(arr);
    cJSON_Delete(arr);
    return s;
}

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
    if (w->draining || w->stopping) return w->nhold ? "draining" : "drained";
    return w->nhold ? "busy" : "idle";
}

void coord_worker_save(coord *c, cworker *w) {
    char err[VDN_ERR_LEN];
    w->last_saved = vdn_now();
    char *gj = gpus_json(w);
    if (cdb_run(c->db, err, sizeof err,
                "UPDATE workers SET state=?, last_seen=?, draining=?, blocked_until=?, gpus=?, "
                "store_retries=? WHERE id=?",
                "sdidsis", worker_state(c, w), vdn_wall(), (int64_t)w->draining, w->blocked_until,
                gj, (int64_t)w->store_retries, w->id))
        VDN_ERROR("worker %s: %s", w->id, err);
    free(gj);
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
    chold *h = find_hold(w, attempt);
    if (h) h->cancel_sent = vdn_now();
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

/* Crash blame, the worker's side: its renderers crashed under --blocklist-failures different
 * jobs (at least two: one poison job crashing it again and again is the job's, never the
 * machine's) within --crash-window keep it from all work for --blocklist-seconds. Those crashes
 * then leave both records: the worker's (it paid for them) and the jobs' (not their fault). */
static void maybe_blocklist_crashes(coord *c, const char *worker_id) {
    char err[VDN_ERR_LEN], detail[512], list[256] = "";
    double now = vdn_wall(), since = now - c->o.crash_window;
    int64_t jobs[8];
    int need = c->o.blocklist_failures > 2 ? c->o.blocklist_failures : 2;
    int n = jobs_crashed_jobs(c->db, worker_id, since, jobs, 8);
    if (n < need) return;
    for (int i = 0; i < n && i < 8; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%sj%lld", i ? ", " : "",
                 (long long)jobs[i]);
    double until = now + c->o.blocklist_seconds;
    if (jobs_crash_blocklisted(c->db, worker_id, since, err, sizeof err) ||
        cdb_run(c->db, err, sizeof err, "UPDATE workers SET blocked_until=? WHERE id=?", "ds",
                until, worker_id)) {
        VDN_ERROR("worker %s: crash blocklist: %s", worker_id, err);
        return;
    }
    snprintf(detail, sizeof detail,
             "its renderer crashed under %d different jobs (%s%s) within %.0f s; no work for "
             "%.0f s",
             n, list, n > 8 ? ", ..." : "", c->o.crash_window, c->o.blocklist_seconds);
    cdb_event(c->db, 0, 0, 0, worker_id, "blocklisted", detail);
    cworker *w = coord_worker_by_id(c, worker_id);
    if (w) {
        w->blocked_until = until;
        coord_worker_save(c, w);
    }
    VDN_WARN("worker %s blocklisted: %s", worker_id, detail);
}

/* Ends a running attempt (lost, expired, failed) and requeues or fails its job. store_op: the
 * object-store operation a worker's FAIL says the failure came from (NULL: none). lost: the
 * attempt went with its worker (jobs.h job_budget: --max-worker-faults, not --max-attempts). */
static void end_attempt_store(coord *c, int64_t attempt, const char *state, const char *reason,
                              job_fault fault, const char *store_op, int lost) {
    char err[VDN_ERR_LEN], js[16];
    attempt_info a;
    if (!jobs_attempt(c->db, attempt, &a) || !a.current) return;
    job_budget b = {c->o.max_attempts, c->o.max_worker_faults, c->o.max_crashes};
    if (jobs_end_attempt(c->db, attempt, state, reason, fault, store_op, lost, &b, js, err,
                         sizeof err)) {
        VDN_ERROR("attempt %lld: %s", (long long)attempt, err);
        return;
    }
    VDN_INFO("job j%lld attempt %lld %s (%s fault: %s): job now %s", (long long)a.job,
             (long long)attempt, state, job_fault_name(fault), reason, js);
    if (fault == FAULT_WORKER) maybe_blocklist(c, a.worker, a.job);
    if (fault == FAULT_CRASH) maybe_blocklist_crashes(c, a.worker);
}

/* An attempt the coordinator ends itself: its worker vanished, restarted without it, let the
 * lease pass, or went away (or the coordinator did): lost with its worker, unless the job's
 * own fault (its stored request does not parse). */
static void end_attempt(coord *c, int64_t attempt, const char *state, const char *reason,
                        job_fault fault) {
    end_attempt_store(c, attempt, state, reason, fault, NULL, fault != FAULT_JOB);
}

/* A worker that vanished mid-job (crash, power, a cut cable) is the machine's fault; one that
 * said goodbye (shutdown) or whose connection now speaks for another id is nobody's. All of its
 * attempts end at once. */
static void worker_lost(coord *c, cworker *w, const char *why, job_fault fault) {
    VDN_WARN("worker %s lost: %s (%d attempt(s) requeued)", w->id, why, w->nhold);
    for (int i = 0; i < w->nhold; i++)
        end_attempt(c, w->hold[i].attempt, "expired", why, fault);
    w->nhold = 0;
    w->connected = 0;
    coord_worker_save(c, w);
    cdb_event(c->db, 0, 0, 0, w->id, "worker_gone", why);
}

/* The DiT precisions a READY names, as a set (bit p: precision p) and as text ("bf16,fp8") for
 * the workers table. Names this build does not know are left out; none at all: bf16 only (a
 * worker older than Ready.precisions). */
static unsigned ready_precisions(const Vdn__Ready *r, char *text, size_t len) {
    unsigned m = 0;
    for (size_t i = 0; i < r->n_precisions; i++) {
        vdn_precision p;
        if (r->precisions[i] && !vdn_precision_parse(r->precisions[i], &p)) m |= 1u << p;
    }
    if (!m) m = 1u << VDN_PRECISION_BF16;
    text[0] = 0;
    for (int p = 0; p < VDN_PRECISION_COUNT; p++)
        if (m >> p & 1u)
            snprintf(text + strlen(text), len - strlen(text), "%s%s", text[0] ? "," : "",
                     vdn_precision_name((vdn_precision)p));
    return m;
}

static void on_ready(coord *c, const uint8_t *ident, size_t n, const Vdn__Ready *r) {
    char err[VDN_ERR_LEN];
    if (!r->worker_id || !r->worker_id[0] || strlen(r->worker_id) >= sizeof c->w->id ||
        n > sizeof c->w->ident) {
        vdn_wire_send_error(c->wsock, ident, n, 0, VDN__ERROR__CODE__INVALID, 0,
                            "READY: field 'worker_id' must be a non-empty string under 128 bytes");
        return;
    }
    cworker *w = coord_worker_by_id(c, r->worker_id);
    /* --max-workers: a new id beyond it takes the place of a worker that is gone and holds
     * nothing, else it is refused (the table of workers never grows without bound) */
    cworker *slot = NULL;
    if (!w && c->o.max_workers > 0 && c->nw >= c->o.max_workers) {
        for (int i = 0; i < c->nw && !slot; i++)
            if (!c->w[i].connected && !c->w[i].nhold && !c->w[i].reserved_for) slot = &c->w[i];
        if (!slot) {
            snprintf(err, sizeof err,
                     "READY refused: %d workers are connected or hold work, this coordinator's "
                     "--max-workers",
                     c->nw);
            VDN_WARN("worker endpoint: worker '%.100s': %s", r->worker_id, err);
            vdn_wire_send_error(c->wsock, ident, n, 0, VDN__ERROR__CODE__INVALID, 0, err);
            return;
        }
    }
    /* another live connection with this worker id: the old one is a stale socket */
    cworker *other = by_ident(c, ident, n);
    if (other && other != w)
        worker_lost(c, other, "its connection now speaks for another id", FAULT_TRANSIENT);
    if (!w) {
        if (!slot) {
            c->w = realloc(c->w, sizeof *c->w * (size_t)(c->nw + 1));
            VDN_ASSERT(c->w);
            slot = &c->w[c->nw++];
        }
        w = slot;
        memset(w, 0, sizeof *w);
        snprintf(w->id, sizeof w->id, "%s", r->worker_id);
    }
    memcpy(w->ident, ident, n);
    w->ident_len = n;
    w->connected = 1;
    w->last_seen = vdn_now();
    w->ngpus = r->n_gpus > COORD_MAX_GPUS ? COORD_MAX_GPUS : (int)r->n_gpus;
    w->gpu_memory = 0;
    for (int i = 0; i < w->ngpus; i++) {
        const Vdn__Gpu *g = r->gpus[i];
        cgpu *x = &w->gpu[i];
        memset(x, 0, sizeof *x);
        x->index = g->has_index ? g->index : i;
        snprintf(x->name, sizeof x->name, "%s", g->name ? g->name : "");
        x->memory = g->memory_bytes;
        if (i == 0 || g->memory_bytes < w->gpu_memory) w->gpu_memory = g->memory_bytes;
    }
    note_gpu_state(c, w, r->gpus, (size_t)w->ngpus);
    w->per_gpu = r->has_per_gpu && r->per_gpu;
    snprintf(w->checkpoint, sizeof w->checkpoint, "%s", r->checkpoint ? r->checkpoint : "");
    snprintf(w->identity, sizeof w->identity, "%s",
             r->checkpoint_identity ? r->checkpoint_identity : "");
    snprintf(w->backend, sizeof w->backend, "%s", r->backend ? r->backend : "");
    char precs[64];
    w->precisions = ready_precisions(r, precs, sizeof precs);
    char *gj = gpus_json(w);
    double now = vdn_wall();
    cdb_run(c->db, err, sizeof err,
            "INSERT INTO workers(id,state,gpus,checkpoint,checkpoint_identity,engine_version,"
            "backend,hostname,first_seen,last_seen,precisions) VALUES(?,'idle',?,?,?,?,?,?,?,?,?) "
            "ON CONFLICT(id) DO UPDATE SET gpus=excluded.gpus, checkpoint=excluded.checkpoint, "
            "checkpoint_identity=excluded.checkpoint_identity, "
            "engine_version=excluded.engine_version, backend=excluded.backend, "
            "hostname=excluded.hostname, last_seen=excluded.last_seen, "
            "precisions=excluded.precisions",
            "sssssssdds", r->worker_id, gj, r->checkpoint, r->checkpoint_identity,
            r->engine_version, r->backend, r->hostname, now, now, precs);
    free(gj);
    w->draining = (int)cdb_int(c->db, 0, "SELECT draining FROM workers WHERE id=?", "s", w->id);
    double bu = 0;
    sqlite3_stmt *st = cdb_prep(c->db, "SELECT blocked_until FROM workers WHERE id=?", "s", w->id);
    if (st && sqlite3_step(st) == SQLITE_ROW) bu = sqlite3_column_double(st, 0);
    sqlite3_finalize(st);
    w->blocked_until = bu;
    w->stopping = r->has_draining && r->draining;
    /* a new process counts from 0 (a counter reset, as Prometheus expects of a restart) */
    w->store_retries = r->has_store_retries ? r->store_retries : 0;

    /* Reconnect: a worker still running attempt X (or holding its unACKed report) may finish
     * it when X is still current. Any other attempt the database has it running was lost with
     * the worker's old process. A worker that runs a job per GPU lists them all. */
    uint64_t one = r->has_running_attempt ? r->running_attempt : 0;
    uint64_t *ann = w->per_gpu ? r->running_attempts : &one;
    size_t nann = w->per_gpu ? r->n_running_attempts : (one ? 1 : 0);
    int64_t keep[COORD_MAX_HOLDS];
    int nkeep = 0;
    w->nhold = 0;
    for (size_t i = 0; i < nann; i++) {
        attempt_info a;
        int64_t x = (int64_t)ann[i];
        uint64_t m = w->per_gpu ? mask_of(w, r->gpus, (size_t)w->ngpus, x) : all_gpus(w);
        if (jobs_attempt(c->db, x, &a) && a.current && !strcmp(a.worker, w->id)) {
            if (nkeep < COORD_MAX_HOLDS) keep[nkeep++] = x;
            add_hold(w, x, a.job, m);
            jobs_renew(c->db, x, now + c->o.lease_seconds);
            cdb_event(c->db, a.batch, a.job, x, w->id, "resumed", "worker reconnected with it");
        } else {
            add_hold(w, x, 0, m); /* busy until it acknowledges the cancel */
            coord_send_cancel(c, x, w->id, "attempt is no longer current");
        }
    }
    st = cdb_prep(c->db, "SELECT id FROM attempts WHERE worker_id=? AND state='running'", "s",
                  w->id);
    int64_t lost[COORD_MAX_HOLDS];
    int nl = 0;
    while (st && sqlite3_step(st) == SQLITE_ROW && nl < COORD_MAX_HOLDS) {
        int64_t x = sqlite3_column_int64(st, 0);
        int kept = 0;
        for (int i = 0; i < nkeep; i++)
            kept |= keep[i] == x;
        if (!kept) lost[nl++] = x;
    }
    sqlite3_finalize(st);
    for (int i = 0; i < nl; i++)
        end_attempt(c, lost[i], "expired", "worker restarted without it (READY)", FAULT_WORKER);
    coord_worker_save(c, w);
    cdb_event(c->db, 0, 0, 0, w->id, "worker_ready", r->engine_version);
    VDN_INFO("worker %s ready: %d GPU(s)%s, checkpoint '%s', precision %s%s", w->id, (int)r->n_gpus,
             w->per_gpu ? ", a job per GPU" : "", w->checkpoint, precs,
             nkeep ? ", resuming its attempt(s)" : "");
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
    chold *h = find_hold(w, (int64_t)p->attempt_id);
    if (!h) return;
    if (p->nfe_done > h->nfe_done || !h->nfe_done) h->last_progress = vdn_now();
    h->nfe_done = p->nfe_done;
    h->nfe_total = p->nfe_total;
    h->nfe_seconds = p->nfe_seconds;
    /* the placement's duration estimates: seconds per NFE per pixel-frame, per worker and
     * over the farm, as moving averages of what the workers report */
    if (h->pixels > 0 && p->nfe_seconds > 0) {
        double r = p->nfe_seconds / h->pixels;
        w->rate = w->rate > 0 ? 0.7 * w->rate + 0.3 * r : r;
        c->rate = c->rate > 0 ? 0.9 * c->rate + 0.1 * r : r;
    }
}

static void on_result(coord *c, cworker *w, const Vdn__Result *r) {
    attempt_info a;
    int64_t x = (int64_t)r->attempt_id;
    drop_hold(w, x);
    /* the RESULT again for the attempt that completed the job: our ACK was lost (the worker
     * connected again before it came), so acknowledge it again, and the worker lets the job's
     * snapshots go (refused as stale, they stayed in the store for good) */
    if (jobs_attempt(c->db, x, &a) && !strcmp(a.state, "done") && !strcmp(a.worker, w->id)) {
        send_ack(c, w, x);
        VDN_INFO("worker %s: RESULT for attempt %lld again (j%lld already done by it): ACK", w->id,
                 (long long)x, (long long)a.job);
        return;
    }
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
    /* the answer to our CANCEL: the job is already cancelled (or the attempt ended: a timeout, a
     * stall), just free the worker */
    chold *held = find_hold(w, x);
    if (held && jobs_attempt(c->db, x, &a) &&
        (!strcmp(a.state, "cancelled") || (held->cancel_sent && !a.current))) {
        drop_hold(w, x);
        send_ack(c, w, x);
        coord_worker_save(c, w);
        return;
    }
    drop_hold(w, x);
    if (!fence(c, w, x, "FAIL", &a)) return;
    /* an older worker says only whether to retry: a retryable failure was the machine's; a
     * fault this coordinator does not know (a newer worker's) too */
    job_fault fault = f->has_fault && (int)f->fault >= FAULT_JOB && (int)f->fault <= FAULT_CRASH
                          ? (job_fault)f->fault
                      : (!f->has_retryable || f->retryable) ? FAULT_WORKER
                                                            : FAULT_JOB;
    /* the store operation it came from, typed by the worker (an older one never says) */
    const char *op = f->has_store_op ? job_store_op_name(f->store_op) : NULL;
    /* a worker fault (its GPU, its memory) is the machine's: lost with it; a transient FAIL
     * (the store still down after its retries) is charged to the job's --max-attempts */
    end_attempt_store(c, x, "failed", f->reason ? f->reason : "(no reason given)", fault, op,
                      fault == FAULT_WORKER);
    send_ack(c, w, x);
    coord_worker_save(c, w);
}

/* Hung renders: seconds without progress an attempt may go, max(--stall-seconds, --stall-factor x
 * its last NFE's seconds); 1 past it (why says how long), 0 not, or never with --stall-seconds 0.
 * The floor covers what comes before the first NFE (loading, a text encode) and after the last
 * (decoding). */
static int stalled(const coord *c, const chold *h, double now, char *why, size_t len) {
    if (c->o.stall_seconds <= 0 || !h->job || h->cancel_sent) return 0;
    double limit = c->o.stall_seconds, by_nfe = c->o.stall_factor * h->nfe_seconds;
    if (by_nfe > limit) limit = by_nfe;
    double quiet = now - h->last_progress;
    if (quiet <= limit) return 0;
    if (why)
        snprintf(why, len,
                 "stalled: no progress for %.0f s (the limit: %.0f s, max(--stall-seconds %.0f, "
                 "%.0f x its last model evaluation's %.1f s))",
                 quiet, limit, c->o.stall_seconds, c->o.stall_factor, h->nfe_seconds);
    return 1;
}

/* Whose fault a stall is, by the evidence: a GPU of the attempt out of service is the worker's;
 * on the CPU backend (stand-in GPUs included) the device cannot hang, so the render itself is
 * stuck: the job's; a job that already stalled on another worker stalls wherever it goes: the
 * job's; on GPUs without such evidence the GPU may have stopped answering: the worker's
 * (requeued elsewhere). */
static job_fault stall_blame(coord *c, const cworker *w, const chold *h, char *why, size_t len) {
    for (int p = 0; p < w->ngpus; p++)
        if ((h->mask >> p & 1) && w->gpu[p].out_of_service) {
            snprintf(why + strlen(why), len - strlen(why), "; GPU %d is out of service (%s)",
                     w->gpu[p].index, w->gpu[p].fault);
            return FAULT_WORKER;
        }
    if (!strcmp(w->backend, "cpu")) {
        snprintf(why + strlen(why), len - strlen(why),
                 "; the worker answers and renders on the CPU, which cannot hang: the render "
                 "itself is stuck");
        return FAULT_JOB;
    }
    int64_t elsewhere = cdb_int(c->db, 0,
                                "SELECT count(DISTINCT worker_id) FROM attempts WHERE job_id=? "
                                "AND worker_id != ? AND reason LIKE 'stalled:%'",
                                "is", h->job, w->id);
    if (elsewhere > 0) {
        snprintf(why + strlen(why), len - strlen(why),
                 "; it stalled on another worker before: the job stalls wherever it runs");
        return FAULT_JOB;
    }
    snprintf(why + strlen(why), len - strlen(why),
             "; the worker answers but its GPU may not (backend %s): retried elsewhere",
             w->backend[0] ? w->backend : "unknown");
    return FAULT_WORKER;
}

static void on_heartbeat(coord *c, cworker *w, const Vdn__Heartbeat *hb) {
    /* SIGTERM: it finishes what it has and leaves; an ASSIGN now would only come back */
    if (hb->has_draining && hb->draining && !w->stopping) {
        w->stopping = 1;
        VDN_INFO("worker %s is shutting down: no new work for it", w->id);
        coord_worker_save(c, w);
    }
    note_gpu_state(c, w, hb->gpus, hb->n_gpus);
    /* rare and wanted on /metrics at once: saved now, not with the next periodic save */
    int retries_changed = hb->has_store_retries && hb->store_retries != w->store_retries;
    if (retries_changed) w->store_retries = hb->store_retries;
    uint64_t one = hb->has_attempt_id ? hb->attempt_id : 0;
    uint64_t *ids = w->per_gpu ? hb->attempt_ids : &one;
    size_t n = w->per_gpu ? hb->n_attempt_ids : (one ? 1 : 0);
    for (size_t i = 0; i < n; i++) {
        int64_t x = (int64_t)ids[i];
        attempt_info a;
        if (jobs_attempt(c->db, x, &a) && a.current && !strcmp(a.worker, w->id)) {
            /* a lease is renewed by progress: a heartbeat carries it on only while the render
             * has made progress within its stall limit (coord_tick ends it past that) */
            chold *h = find_hold(w, x);
            if (!h || !stalled(c, h, vdn_now(), NULL, 0))
                jobs_renew(c->db, x, vdn_wall() + c->o.lease_seconds);
            continue;
        }
        /* it still renders a stale attempt: its GPUs are busy until it stops */
        if (!find_hold(w, x))
            add_hold(w, x, 0, w->per_gpu ? mask_of(w, hb->gpus, hb->n_gpus, x) : all_gpus(w));
        coord_send_cancel(c, x, w->id, "attempt is no longer current");
    }
    /* an attempt we thought it held and it no longer names is over only if the database
     * agrees (a just-sent ASSIGN may cross this heartbeat on the wire, a RESULT may follow) */
    for (int i = w->nhold - 1; i >= 0; i--) {
        int64_t x = w->hold[i].attempt;
        int named = 0;
        for (size_t k = 0; k < n; k++)
            named |= (int64_t)ids[k] == x;
        attempt_info a;
        if (!named && !(jobs_attempt(c->db, x, &a) && a.current)) drop_hold(w, x);
    }
    /* keep `vdn workers` LAST SEEN and the GPUs' memory fresh without a write per heartbeat */
    if (retries_changed || vdn_now() - w->last_saved > 5) coord_worker_save(c, w);
}

/* With CURVE the connection's key names the worker (keys.h): the name it must use in READY, and
 * the only worker whose attempts its messages may touch. NULL without CURVE (any id goes). */
static const char *pinned_id(coord *c, const char *user, const uint8_t *ident, size_t n,
                             vdn_peer *who) {
    if (!c->curve) return NULL;
    if (vdn_peer_parse(user, who) || who->local || who->role != VDN_ROLE_WORKER) {
        vdn_wire_send_error(c->wsock, ident, n, 0, VDN__ERROR__CODE__FORBIDDEN, 0,
                            "this connection's key is not a worker's key");
        return "";
    }
    return who->name;
}

void coord_on_worker_frame(coord *c, const uint8_t *ident, size_t ident_len, const char *user,
                           const void *body, size_t len) {
    char err[VDN_ERR_LEN];
    int code;
    vdn_peer who;
    const char *pin = pinned_id(c, user, ident, ident_len, &who);
    if (pin && !pin[0]) return;
    Vdn__Envelope *env = vdn_wire_decode(body, len, &code, err, sizeof err);
    if (!env) {
        VDN_WARN("worker endpoint: %s", err);
        vdn_wire_send_error(c->wsock, ident, ident_len, 0, code, 0, err);
        return;
    }
    if (env->payload_case == VDN__ENVELOPE__PAYLOAD_READY) {
        const char *id = env->ready->worker_id ? env->ready->worker_id : "";
        if (pin && strcmp(id, pin)) {
            snprintf(err, sizeof err,
                     "READY: worker id '%.100s' refused: this connection's key belongs to worker "
                     "'%s' (the keys file); start it with --id %s",
                     id, pin, pin);
            VDN_WARN("worker endpoint: %s", err);
            vdn_wire_send_error(c->wsock, ident, ident_len, 0, VDN__ERROR__CODE__FORBIDDEN, 0, err);
            vdn__envelope__free_unpacked(env, NULL);
            return;
        }
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
    /* fencing by the key: a connection speaks only for the worker its key names */
    if (pin && strcmp(w->id, pin)) {
        snprintf(err, sizeof err, "%s refused: the key of worker '%s' cannot speak for worker '%s'",
                 vdn_wire_payload_name(env->payload_case), pin, w->id);
        VDN_WARN("worker endpoint: %s", err);
        vdn_wire_send_error(c->wsock, ident, ident_len, 0, VDN__ERROR__CODE__FORBIDDEN, 0, err);
        vdn__envelope__free_unpacked(env, NULL);
        return;
    }
    w->last_seen = vdn_now();
    switch (env->payload_case) {
    case VDN__ENVELOPE__PAYLOAD_HEARTBEAT:
        on_heartbeat(c, w, env->heartbeat);
        break;
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

static void assign(coord *c, cworker *w, const job_claim *cl, uint64_t mask, double est) {
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
    /* PREFIX.safetensors is where the latents go when they are stored (the request's
     * save_latents, or a worker without a video VAE, whose only output they are); its stem also
     * names the mp4, the poster and the snapshots. The RESULT's object_keys say what was
     * stored. Both keys stay in the list so that older workers, which expect them, still work. */
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
    /* a worker that runs a job per GPU is told which; a CPU worker has one slot, unnamed */
    int32_t idx[COORD_MAX_GPUS];
    char gl[256] = "";
    if (w->per_gpu && w->ngpus > 0) {
        for (int p = 0; p < w->ngpus; p++)
            if (mask >> p & 1) {
                idx[m.n_gpu_indices++] = w->gpu[p].index;
                snprintf(gl + strlen(gl), sizeof gl - strlen(gl), "%s%d", gl[0] ? "," : " GPU ",
                         w->gpu[p].index);
            }
        m.gpu_indices = idx;
    }
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_ASSIGN;
    env.assign = &m;
    chold *h = add_hold(w, cl->attempt, cl->job, mask);
    if (h) {
        h->est_seconds = est;
        h->pixels = (double)specs[0].frames * specs[0].height * specs[0].width;
        h->timeout = specs[0].timeout;
    }
    send_env(c, w, &env);
    if (!w->connected)
        worker_lost(c, w, "ASSIGN could not be delivered", FAULT_TRANSIENT);
    else
        VDN_INFO("job j%lld -> %s%s (attempt %lld)", (long long)cl->job, w->id, gl,
                 (long long)cl->attempt);
    vdn_jobs_free(specs, n);
}

/* Seconds until a held attempt frees its GPUs, from its progress (NFEs left x the last NFE's
 * time) or its estimate at placement; < 0 unknown. */
static double remaining(const chold *h) {
    if (h->nfe_total > 0 && h->nfe_seconds > 0)
        return (h->nfe_total - h->nfe_done) * h->nfe_seconds;
    if (h->est_seconds >= 0) {
        double left = h->est_seconds - (vdn_now() - h->started);
        return left > 0 ? left : 0;
    }
    return -1;
}

static void worker_for_plan(const coord *c, const cworker *w, double wall, place_worker *p) {
    memset(p, 0, sizeof *p);
    p->n = npos(w);
    p->eligible = w->connected && !w->draining && !w->stopping && w->blocked_until <= wall;
    p->one_job = !w->per_gpu || w->ngpus == 0;
    p->id = w->id;
    p->checkpoint = w->checkpoint;
    p->identity = w->identity;
    p->precisions = w->precisions;
    p->rate = w->rate > 0 ? w->rate : c->rate;
    for (int i = 0; i < p->n; i++) {
        p->in_service[i] = w->ngpus == 0 || !w->gpu[i].out_of_service;
        p->memory[i] = w->ngpus ? w->gpu[i].memory : 0;
        p->release_in[i] = 0;
    }
    for (int k = 0; k < w->nhold; k++)
        for (int i = 0; i < p->n; i++)
            if (w->hold[k].mask >> i & 1) {
                double r = remaining(&w->hold[k]);
                /* the GPU frees when its slowest holder does */
                if (!p->busy[i] || r < 0 || (p->release_in[i] >= 0 && r > p->release_in[i]))
                    p->release_in[i] = r;
                p->busy[i] = 1;
            }
    if (p->one_job && w->nhold) /* one job at a time: busy whatever GPUs it named */
        for (int i = 0; i < p->n; i++)
            if (!p->busy[i]) p->busy[i] = 1, p->release_in[i] = remaining(&w->hold[0]);
}

static void free_plan_workers(place_worker *pw, int n) {
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < pw[i].nblocked; k++)
            free(pw[i].blocked[k]);
        free(pw[i].blocked);
    }
    free(pw);
}

enum { PLAN_MAX_JOBS = 1000 };

/* A job's "precision" as stored (validated at submission): NULL = bf16. */
static int job_precision(const char *name) {
    vdn_precision p = VDN_PRECISION_BF16;
    if (name) vdn_precision_parse(name, &p);
    return (int)p;
}

/* Places queued jobs on free GPUs (coordinator/place.h: reservation for the job at the head of
 * the queue, backfill only of what cannot delay it) and records the reservation for display. */
void coord_schedule(coord *c) {
    double wall = vdn_wall();
    /* the common case on every heartbeat: nothing queued, no transaction per idle worker */
    if (!cdb_int(c->db, 0, "SELECT count(*) FROM (SELECT 1 FROM jobs WHERE state='queued' LIMIT 1)",
                 "")) {
        for (int i = 0; i < c->nw; i++)
            if (c->w[i].reserved_for) {
                c->w[i].reserved_for = 0;
                if (c->w[i].connected) coord_worker_save(c, &c->w[i]);
            }
        return;
    }
    place_worker *pw = vdn_xcalloc((size_t)c->nw + 1, sizeof *pw);
    int any = 0;
    for (int i = 0; i < c->nw; i++) {
        worker_for_plan(c, &c->w[i], wall, &pw[i]);
        /* job classes this worker keeps failing at (worker faults) are not placed on it */
        sqlite3_stmt *b = pw[i].eligible ? cdb_prep(c->db,
                                                    "SELECT job_class FROM worker_blocks WHERE "
                                                    "worker_id = ? AND blocked_until > ?",
                                                    "sd", c->w[i].id, wall)
                                         : NULL;
        while (b && sqlite3_step(b) == SQLITE_ROW) {
            pw[i].blocked = realloc(pw[i].blocked, sizeof *pw[i].blocked * (pw[i].nblocked + 1));
            VDN_ASSERT(pw[i].blocked);
            pw[i].blocked[pw[i].nblocked++] = cdb_col_str(b, 0);
        }
        sqlite3_finalize(b);
        for (int g = 0; g < pw[i].n && pw[i].eligible; g++)
            any |= pw[i].in_service[g] && !pw[i].busy[g];
    }
    /* why queued jobs wait (waiting.h): at most once a second */
    int note = vdn_now() - c->waiting_at >= 1.0;
    if (!any && !note) { /* no free GPU anywhere: nothing can start, the reservation stands */
        free_plan_workers(pw, c->nw);
        return;
    }
    sqlite3_stmt *st =
        cdb_prep(c->db,
                 "SELECT id, gpus, min_gpu_memory, checkpoint, "
                 "json_extract(request,'$.steps'), json_extract(request,'$.frames'), "
                 "json_extract(request,'$.height'), json_extract(request,'$.width'), job_class, "
                 "json_extract(request,'$.precision'), "
                 /* the worker its last attempt was lost with (not a job fault) */
                 "(SELECT worker_id FROM attempts WHERE job_id=jobs.id AND "
                 "coalesce(fault,'') != 'job' ORDER BY id DESC LIMIT 1) "
                 "FROM jobs WHERE state='queued' "
                 "ORDER BY priority DESC, submitted_at, id LIMIT ?",
                 "i", (int64_t)PLAN_MAX_JOBS);
    place_job *pj = vdn_xcalloc(PLAN_MAX_JOBS, sizeof *pj);
    char **ck = vdn_xcalloc(PLAN_MAX_JOBS, sizeof *ck);
    char **cls = vdn_xcalloc(PLAN_MAX_JOBS, sizeof *cls);
    char **avoid = vdn_xcalloc(PLAN_MAX_JOBS, sizeof *avoid);
    int nj = 0;
    while (st && nj < PLAN_MAX_JOBS && sqlite3_step(st) == SQLITE_ROW) {
        place_job *j = &pj[nj];
        j->id = sqlite3_column_int64(st, 0);
        j->gpus = sqlite3_column_int(st, 1) > 0 ? sqlite3_column_int(st, 1) : 1;
        j->min_memory = (uint64_t)sqlite3_column_int64(st, 2);
        ck[nj] = cdb_col_str(st, 3);
        j->checkpoint = ck[nj];
        j->steps = sqlite3_column_int(st, 4);
        j->frames = sqlite3_column_int(st, 5);
        j->height = sqlite3_column_int(st, 6);
        j->width = sqlite3_column_int(st, 7);
        cls[nj] = cdb_col_str(st, 8);
        j->job_class = cls[nj];
        j->precision = job_precision((const char *)sqlite3_column_text(st, 9));
        avoid[nj] = cdb_col_str(st, 10);
        j->avoid = avoid[nj];
        nj++;
    }
    sqlite3_finalize(st);
    place_pick *picks = vdn_xcalloc((size_t)nj + 1, sizeof *picks);
    /* the last plan's reservation, its deadline brought up to now */
    place_reservation prev = {.job = -1, .worker = -1}, res;
    double mono = vdn_now();
    for (int i = 0; i < c->nw; i++)
        if (c->w[i].reserved_for) {
            prev.worker = i;
            prev.job_id = c->w[i].reserved_for;
            prev.mask = c->w[i].reserved_mask;
            prev.start_in = c->w[i].reserved_deadline < 0      ? -1
                            : c->w[i].reserved_deadline > mono ? c->w[i].reserved_deadline - mono
                                                               : 0;
        }
    int np = 0;
    if (any) {
        np = place_plan(pw, c->nw, pj, nj, picks, nj, &prev, &res);
    } else { /* nothing can start: the reservation stands as it is */
        res = prev;
        for (int k = 0; k < nj && prev.worker >= 0; k++)
            if (pj[k].id == prev.job_id) res.job = k;
        /* a reservation on a worker that takes no work any more (draining) is void */
        if (res.job < 0 || !pw[res.worker].eligible) res.job = res.worker = -1;
    }
    if (note) coord_note_waiting(c, pw, pj, nj, picks, np, &res);
    for (int k = 0; k < np; k++) {
        cworker *w = &c->w[picks[k].worker];
        const place_job *j = &pj[picks[k].job];
        job_claim cl;
        char err[VDN_ERR_LEN];
        int rc = jobs_claim(c->db, j->id, w->id, c->o.lease_seconds, &cl, err, sizeof err);
        if (rc < 0) VDN_ERROR("claim of j%lld for %s: %s", (long long)j->id, w->id, err);
        if (rc <= 0) continue;
        assign(c, w, &cl, picks[k].mask, place_estimate(&pw[picks[k].worker], j));
        job_claim_free(&cl);
        coord_worker_save(c, w);
    }
    /* the reservation, for `vdn workers` and the log (once per change) */
    int64_t rjob = res.job >= 0 ? pj[res.job].id : 0;
    for (int i = 0; i < c->nw; i++) {
        cworker *w = &c->w[i];
        int64_t want = i == res.worker ? rjob : 0;
        uint64_t mask = i == res.worker ? res.mask : 0;
        w->reserved_deadline = i == res.worker && res.start_in >= 0 ? mono + res.start_in : -1;
        if (want == w->reserved_for && mask == w->reserved_mask) continue;
        w->reserved_for = want;
        w->reserved_mask = mask;
        if (want) {
            char when[64];
            if (res.start_in >= 0)
                snprintf(when, sizeof when, "expected in %.0f s", res.start_in);
            else
                snprintf(when, sizeof when, "start time not yet estimable");
            VDN_INFO("reserving %d GPU(s) of %s for j%lld (%d GPUs, head of the queue), %s; "
                     "only work that cannot delay it is backfilled there",
                     __builtin_popcountll(mask), w->id, (long long)want, pj[res.job].gpus, when);
            char detail[300];
            snprintf(detail, sizeof detail, "%d GPU(s) of %s held for it, %s",
                     __builtin_popcountll(mask), w->id, when);
            cdb_event(c->db, 0, want, 0, w->id, "reserved", detail);
        }
        if (w->connected) coord_worker_save(c, w);
    }
    for (int k = 0; k < nj; k++)
        free(ck[k]), free(cls[k]), free(avoid[k]);
    free(ck);
    free(cls);
    free(avoid);
    free(pj);
    free(picks);
    free_plan_workers(pw, c->nw);
}

static void expire_one(void *user, int64_t attempt) {
    coord *c = user;
    attempt_info a;
    if (!jobs_attempt(c->db, attempt, &a)) return;
    end_attempt(c, attempt, "expired", "lease expired (no heartbeat or progress in time)",
                FAULT_WORKER);
    cworker *w = coord_worker_by_id(c, a.worker);
    if (w && find_hold(w, attempt)) coord_send_cancel(c, attempt, w->id, "lease expired");
}

/* Past its request's timeout (the job's own limit: its fault, no retry), or stalled (blamed by
 * the evidence): the attempt ends now and the worker is told to stop it. */
static void police_renders(coord *c, cworker *w, double now) {
    for (int k = w->nhold - 1; k >= 0; k--) {
        chold *h = &w->hold[k];
        char why[600] = "";
        job_fault fault;
        if (!h->job || h->cancel_sent) continue;
        if (h->timeout > 0 && now - h->started > h->timeout) {
            snprintf(why, sizeof why,
                     "ran past its timeout: %.0f s, the request's \"timeout\" is %d s",
                     now - h->started, h->timeout);
            fault = FAULT_JOB;
        } else if (stalled(c, h, now, why, sizeof why)) {
            fault = stall_blame(c, w, h, why, sizeof why);
        } else {
            continue;
        }
        int64_t attempt = h->attempt;
        VDN_WARN("worker %s: attempt %lld of j%lld %s", w->id, (long long)attempt,
                 (long long)h->job, why);
        end_attempt(c, attempt, "failed", why, fault);
        coord_send_cancel(c, attempt, w->id, why);
    }
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
        /* a worker that never answers a CANCEL frees those GPUs after one lease */
        for (int k = w->nhold - 1; k >= 0; k--)
            if (w->hold[k].cancel_sent && now - w->hold[k].cancel_sent > c->o.lease_seconds)
                drop_hold(w, w->hold[k].attempt);
        police_renders(c, w, now);
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
