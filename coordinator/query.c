/* Replies built from the database; see query.h. */
#include "query.h"

#include <cjson/cJSON.h>
#include <string.h>

#include "client.h"
#include "db.h"
#include "spec.h"
#include "vdn_util.h"

#define PUSH(arr, n, item)                                                                         \
    do {                                                                                           \
        arr = realloc(arr, sizeof *(arr) * ((n) + 1));                                             \
        VDN_ASSERT(arr);                                                                           \
        (arr)[(n)++] = (item);                                                                     \
    } while (0)

static const char *BATCH_SQL =
    "SELECT b.id, b.tag, b.priority, b.submitted_at, b.source, count(j.id), "
    "coalesce(sum(j.state='queued'),0), coalesce(sum(j.state='running'),0), "
    "coalesce(sum(j.state='done'),0), coalesce(sum(j.state='failed'),0), "
    "coalesce(sum(j.state='cancelled'),0), b.owner FROM batches b LEFT JOIN jobs j ON "
    "j.batch_id = b.id ";

static Vdn__BatchInfo *batch_row(sqlite3_stmt *st) {
    Vdn__BatchInfo *b = vdn_xmalloc(sizeof *b);
    vdn__batch_info__init(b);
    b->has_batch_id = b->has_priority = b->has_submitted_at = 1;
    b->batch_id = (uint64_t)sqlite3_column_int64(st, 0);
    b->tag = cdb_col_str(st, 1);
    b->priority = sqlite3_column_int(st, 2);
    b->submitted_at = sqlite3_column_double(st, 3);
    b->source = cdb_col_str(st, 4);
    b->has_n_jobs = b->has_n_queued = b->has_n_running = b->has_n_done = b->has_n_failed =
        b->has_n_cancelled = 1;
    b->n_jobs = sqlite3_column_int(st, 5);
    b->n_queued = sqlite3_column_int(st, 6);
    b->n_running = sqlite3_column_int(st, 7);
    b->n_done = sqlite3_column_int(st, 8);
    b->n_failed = sqlite3_column_int(st, 9);
    b->n_cancelled = sqlite3_column_int(st, 10);
    b->owner = cdb_col_str(st, 11);
    const char *s;
    if (b->n_running || (b->n_queued && b->n_queued < b->n_jobs))
        s = "running";
    else if (b->n_queued)
        s = "queued";
    else if (b->n_done == b->n_jobs)
        s = "done";
    else if (b->n_failed)
        s = "failed";
    else
        s = "cancelled";
    b->state = vdn_xstrdup(s);
    return b;
}

static const char *JOB_SQL =
    "SELECT j.id, j.batch_id, j.state, j.priority, j.tag, j.attempts, j.current_attempt, "
    "a.worker_id, j.nfe_done, j.nfe_total, j.elapsed_seconds, j.submitted_at, j.finished_at, "
    "j.object_keys, j.last_error, j.request, j.nfe_seconds, j.output_prefix, j.snapshot_step, "
    "j.nfe_evaluated, j.job_class, j.waiting, "
    /* a queued job's place in the queue (priority, then submit time, then id): jobs_queue */
    "CASE WHEN j.state='queued' THEN (SELECT count(*) FROM jobs q WHERE q.state='queued' AND "
    "(q.priority > j.priority OR (q.priority = j.priority AND (q.submitted_at < j.submitted_at "
    "OR (q.submitted_at = j.submitted_at AND q.id < j.id))))) END "
    "FROM jobs j LEFT JOIN attempts a ON a.id = j.current_attempt ";

/* Crash blame: the job's quarantine and its crash record, the worker of each crash (a database
 * older than schema 9, read with --db, has neither and shows none). */
static void add_crashes(sqlite3 *db, Vdn__JobInfo *j) {
    if (cdb_schema_version(db) < 9) return;
    sqlite3_stmt *st = cdb_prep(db,
                                "SELECT worker_id FROM crashes WHERE job_id=? AND job_record "
                                "ORDER BY attempt_id",
                                "i", (int64_t)j->job_id);
    while (st && sqlite3_step(st) == SQLITE_ROW)
        PUSH(j->crashed_on, j->n_crashed_on, cdb_col_str(st, 0));
    sqlite3_finalize(st);
    if (cdb_int(db, 0, "SELECT quarantined FROM jobs WHERE id=?", "i", (int64_t)j->job_id))
        j->has_quarantined = j->quarantined = 1;
}

static Vdn__JobInfo *job_row(sqlite3 *db, sqlite3_stmt *st) {
    Vdn__JobInfo *j = vdn_xmalloc(sizeof *j);
    vdn__job_info__init(j);
    j->has_job_id = j->has_batch_id = j->has_priority = j->has_attempts = 1;
    j->job_id = (uint64_t)sqlite3_column_int64(st, 0);
    j->batch_id = (uint64_t)sqlite3_column_int64(st, 1);
    j->state = cdb_col_str(st, 2);
    j->priority = sqlite3_column_int(st, 3);
    j->tag = cdb_col_str(st, 4);
    j->attempts = sqlite3_column_int(st, 5);
    if (sqlite3_column_type(st, 6) != SQLITE_NULL)
        j->has_current_attempt = 1, j->current_attempt = (uint64_t)sqlite3_column_int64(st, 6);
    j->worker_id = cdb_col_str(st, 7);
    j->has_nfe_done = j->has_nfe_total = j->has_elapsed_seconds = j->has_submitted_at = 1;
    j->nfe_done = sqlite3_column_int(st, 8);
    j->nfe_total = sqlite3_column_int(st, 9);
    j->elapsed_seconds = sqlite3_column_double(st, 10);
    j->submitted_at = sqlite3_column_double(st, 11);
    if (sqlite3_column_type(st, 12) != SQLITE_NULL)
        j->has_finished_at = 1, j->finished_at = sqlite3_column_double(st, 12);
    const char *keys = (const char *)sqlite3_column_text(st, 13);
    if (keys) {
        cJSON *arr = cJSON_Parse(keys);
        const cJSON *k;
        cJSON_ArrayForEach(k, arr) if (cJSON_IsString(k))
            PUSH(j->object_keys, j->n_object_keys, vdn_xstrdup(k->valuestring));
        cJSON_Delete(arr);
    }
    j->last_error = cdb_col_str(st, 14);
    const char *req = (const char *)sqlite3_column_text(st, 15);
    if (req) {
        vdn_job_spec *specs;
        int n;
        vdn_errlist errs = {0};
        if (vdn_jsonl_parse(req, strlen(req), "jobs.request", NULL, 0, &specs, &n, &errs) == 0 &&
            n == 1) {
            free(specs[0].source_line);
            specs[0].source_line = NULL;
            free(specs[0].output_prefix);
            specs[0].output_prefix = cdb_col_str(st, 17);
            j->request = vdn_xmalloc(sizeof *j->request);
            /* the RenderRequest takes over the spec's strings; freed with the reply */
            vdn_job_spec_to_proto(&specs[0], j->request);
            free(specs[0].tag);
            free(specs);
        }
        vdn_errlist_free(&errs);
    }
    j->has_nfe_seconds = j->has_snapshot_step = j->has_nfe_evaluated = 1;
    j->nfe_seconds = sqlite3_column_double(st, 16);
    j->snapshot_step = sqlite3_column_int(st, 18);
    j->nfe_evaluated = sqlite3_column_int(st, 19);
    j->job_class = cdb_col_str(st, 20);
    if (sqlite3_column_type(st, 22) != SQLITE_NULL) {
        j->has_ahead = 1;
        j->ahead = sqlite3_column_int(st, 22);
        /* the placement's reason, and how many wait before it */
        const char *why = (const char *)sqlite3_column_text(st, 21);
        char buf[600];
        if (why && j->ahead)
            snprintf(buf, sizeof buf, "%s; %d ahead", why, j->ahead);
        else if (why)
            snprintf(buf, sizeof buf, "%s", why);
        else if (j->ahead)
            snprintf(buf, sizeof buf, "not yet placed; %d ahead", j->ahead);
        else
            snprintf(buf, sizeof buf, "not yet placed");
        j->waiting = vdn_xstrdup(buf);
    }
    add_crashes(db, j);
    return j;
}

static void add_jobs(sqlite3 *db, Vdn__StatusReply *r, const char *where, int64_t id) {
    char sql[1024];
    snprintf(sql, sizeof sql, "%s WHERE %s ORDER BY j.id", JOB_SQL, where);
    sqlite3_stmt *st = cdb_prep(db, sql, "i", id);
    while (st && sqlite3_step(st) == SQLITE_ROW)
        PUSH(r->jobs, r->n_jobs, job_row(db, st));
    sqlite3_finalize(st);
}

static void add_batches(sqlite3 *db, Vdn__BatchInfo ***arr, size_t *n, const char *where,
                        const char *types, int64_t id, const char *tag, int limit) {
    char sql[1024];
    snprintf(sql, sizeof sql, "%s %s GROUP BY b.id ORDER BY b.id DESC LIMIT %d", BATCH_SQL, where,
             limit > 0 ? limit : 1000000);
    sqlite3_stmt *st =
        types[0] == 'i' ? cdb_prep(db, sql, types, id) : cdb_prep(db, sql, types, tag);
    while (st && sqlite3_step(st) == SQLITE_ROW)
        PUSH(*arr, *n, batch_row(st));
    sqlite3_finalize(st);
}

/* The job and progress of the attempt a GPU runs, while it is still that job's current one. */
static void gpu_job(sqlite3 *db, Vdn__Gpu *x) {
    sqlite3_stmt *q = cdb_prep(db,
                               "SELECT j.id, j.nfe_done, j.nfe_total FROM attempts a "
                               "JOIN jobs j ON j.id = a.job_id WHERE a.id = ? AND "
                               "j.current_attempt = a.id",
                               "i", (int64_t)x->attempt_id);
    if (q && sqlite3_step(q) == SQLITE_ROW) {
        x->has_job_id = x->has_nfe_done = x->has_nfe_total = 1;
        x->job_id = (uint64_t)sqlite3_column_int64(q, 0);
        x->nfe_done = sqlite3_column_int(q, 1);
        x->nfe_total = sqlite3_column_int(q, 2);
    }
    sqlite3_finalize(q);
}

const char *query_gpu_state(const char *worker_state, const Vdn__Gpu *g) {
    const char *ws = worker_state ? worker_state : "gone";
    if (!strcmp(ws, "gone")) return "unavailable";
    if (g->out_of_service) return "out_of_service";
    if (g->attempt_id) return "busy"; /* a draining worker's running GPU still works */
    if (strcmp(ws, "idle") && strcmp(ws, "busy")) return "unavailable";
    if (g->reserved_for) return "reserved";
    return "idle";
}

/* One GPU of the workers table's JSON (coord_worker.c gpus_json). A gone worker's last live
 * state is history, not a fact about now: its memory in use and attempts are left out. */
static Vdn__Gpu *gpu_row(sqlite3 *db, const cJSON *g, const char *worker_state) {
    Vdn__Gpu *x = vdn_xmalloc(sizeof *x);
    vdn__gpu__init(x);
    int live = strcmp(worker_state, "gone") != 0;
    const cJSON *v;
    if ((v = cJSON_GetObjectItem(g, "index")) && cJSON_IsNumber(v))
        x->has_index = 1, x->index = v->valueint;
    if ((v = cJSON_GetObjectItem(g, "name")) && cJSON_IsString(v))
        x->name = vdn_xstrdup(v->valuestring);
    if ((v = cJSON_GetObjectItem(g, "memory")) && cJSON_IsNumber(v))
        x->has_memory_bytes = 1, x->memory_bytes = (uint64_t)v->valuedouble;
    if (live && (v = cJSON_GetObjectItem(g, "used")) && cJSON_IsNumber(v))
        x->has_memory_used = 1, x->memory_used = (uint64_t)v->valuedouble;
    if (cJSON_IsTrue(cJSON_GetObjectItem(g, "out_of_service"))) {
        x->has_out_of_service = 1, x->out_of_service = 1;
        if ((v = cJSON_GetObjectItem(g, "fault")) && cJSON_IsString(v))
            x->fault = vdn_xstrdup(v->valuestring);
    }
    if (live && (v = cJSON_GetObjectItem(g, "attempt")) && cJSON_IsNumber(v)) {
        x->has_attempt_id = 1, x->attempt_id = (uint64_t)v->valuedouble;
        gpu_job(db, x);
    }
    if (live && (v = cJSON_GetObjectItem(g, "reserved_for")) && cJSON_IsNumber(v))
        x->has_reserved_for = 1, x->reserved_for = (uint64_t)v->valuedouble;
    x->state = vdn_xstrdup(query_gpu_state(worker_state, x));
    return x;
}

static void add_gpus(sqlite3 *db, Vdn__WorkerInfo *w, const char *gpus) {
    cJSON *arr = gpus ? cJSON_Parse(gpus) : NULL;
    const cJSON *g;
    cJSON_ArrayForEach(g, arr) {
        Vdn__Gpu *x = gpu_row(db, g, w->state);
        if (x->has_reserved_for && !w->reservation) {
            char rs[64];
            snprintf(rs, sizeof rs, "j%llu", (unsigned long long)x->reserved_for);
            w->reservation = vdn_xstrdup(rs);
        }
        PUSH(w->gpus, w->n_gpus, x);
    }
    cJSON_Delete(arr);
}

/* Every attempt the worker runs, and its job: a multi-GPU worker runs several at once. */
static void add_running(sqlite3 *db, Vdn__WorkerInfo *w) {
    sqlite3_stmt *a = cdb_prep(db,
                               "SELECT id, job_id FROM attempts WHERE worker_id=? AND "
                               "state='running' ORDER BY id",
                               "s", w->worker_id);
    while (a && sqlite3_step(a) == SQLITE_ROW) {
        uint64_t x = (uint64_t)sqlite3_column_int64(a, 0);
        uint64_t job = (uint64_t)sqlite3_column_int64(a, 1);
        if (!w->n_running_attempts) {
            w->has_running_attempt = w->has_running_job = 1;
            w->running_attempt = x;
            w->running_job = job;
        }
        PUSH(w->running_attempts, w->n_running_attempts, x);
        PUSH(w->running_jobs, w->n_running_jobs, job);
    }
    sqlite3_finalize(a);
}

/* "bf16,fp8" from the workers table as a list (its own query: a database older than schema 5,
 * read with --db, has no column and shows none) */
static void add_precisions(sqlite3 *db, Vdn__WorkerInfo *w) {
    sqlite3_stmt *st = cdb_prep(db, "SELECT precisions FROM workers WHERE id=?", "s", w->worker_id);
    char *text = st && sqlite3_step(st) == SQLITE_ROW ? cdb_col_str(st, 0) : NULL;
    sqlite3_finalize(st);
    for (char *save = NULL, *p = text ? strtok_r(text, ",", &save) : NULL; p;
         p = strtok_r(NULL, ",", &save))
        PUSH(w->precisions, w->n_precisions, vdn_xstrdup(p));
    free(text);
}

static Vdn__WorkerInfo *worker_row(sqlite3 *db, sqlite3_stmt *st) {
    Vdn__WorkerInfo *w = vdn_xmalloc(sizeof *w);
    vdn__worker_info__init(w);
    w->worker_id = cdb_col_str(st, 0);
    w->checkpoint = cdb_col_str(st, 3);
    w->engine_version = cdb_col_str(st, 4);
    w->has_last_seen = w->has_failures = w->has_blocked_until = 1;
    w->last_seen = sqlite3_column_double(st, 5);
    w->failures = sqlite3_column_int(st, 6);
    w->blocked_until = sqlite3_column_double(st, 7);
    w->backend = cdb_col_str(st, 8);
    w->hostname = cdb_col_str(st, 9);
    /* the row's state is written on the worker's events; a blocklisting that began since
     * shows here at once */
    const char *s = (const char *)sqlite3_column_text(st, 1);
    if (!s) s = "gone";
    if (strcmp(s, "gone") && w->blocked_until > vdn_wall()) s = "blocked";
    w->state = vdn_xstrdup(s);
    add_gpus(db, w, (const char *)sqlite3_column_text(st, 2));
    add_running(db, w);
    /* its own query: a database older than schema 4 (read with --db) just shows 0 */
    w->has_store_retries = 1;
    w->store_retries =
        (uint64_t)cdb_int(db, 0, "SELECT store_retries FROM workers WHERE id=?", "s", w->worker_id);
    add_precisions(db, w);
    sqlite3_stmt *b = cdb_prep(db,
                               "SELECT job_class FROM worker_blocks WHERE worker_id=? AND "
                               "blocked_until > ? ORDER BY job_class",
                               "sd", w->worker_id, vdn_wall());
    while (b && sqlite3_step(b) == SQLITE_ROW)
        PUSH(w->blocked_classes, w->n_blocked_classes, cdb_col_str(b, 0));
    sqlite3_finalize(b);
    return w;
}

static void add_workers(sqlite3 *db, Vdn__WorkerInfo ***arr, size_t *n) {
    sqlite3_stmt *st = cdb_prep(db,
                                "SELECT id, state, gpus, checkpoint, engine_version, last_seen, "
                                "failures, blocked_until, backend, hostname FROM workers ORDER BY "
                                "id",
                                "");
    while (st && sqlite3_step(st) == SQLITE_ROW)
        PUSH(*arr, *n, worker_row(db, st));
    sqlite3_finalize(st);
}

Vdn__StatusReply *query_status(sqlite3 *db, char kind, int64_t id, char *err, size_t errlen) {
    Vdn__StatusReply *r = vdn_xmalloc(sizeof *r);
    vdn__status_reply__init(r);
    if (kind == 'j') {
        int64_t batch = cdb_int(db, 0, "SELECT batch_id FROM jobs WHERE id=?", "i", id);
        if (!batch) goto notfound;
        add_batches(db, &r->batches, &r->n_batches, "WHERE b.id = ?", "i", batch, NULL, 0);
        add_jobs(db, r, "j.id = ?", id);
    } else if (kind == 'b') {
        add_batches(db, &r->batches, &r->n_batches, "WHERE b.id = ?", "i", id, NULL, 0);
        if (!r->n_batches) goto notfound;
        add_jobs(db, r, "j.batch_id = ?", id);
    } else {
        add_batches(db, &r->batches, &r->n_batches, "", "", 0, NULL, 0);
    }
    add_workers(db, &r->workers, &r->n_workers);
    return r;
notfound:
    vdn_fail(err, errlen, "no %s %c%lld", kind == 'j' ? "job" : "batch", kind, (long long)id);
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return NULL;
}

Vdn__ListReply *query_list(sqlite3 *db, const char *tag, int limit) {
    Vdn__ListReply *r = vdn_xmalloc(sizeof *r);
    vdn__list_reply__init(r);
    if (tag && tag[0])
        add_batches(db, &r->batches, &r->n_batches, "WHERE b.tag = ?", "s", 0, tag, limit);
    else
        add_batches(db, &r->batches, &r->n_batches, "", "", 0, NULL, limit);
    return r;
}

Vdn__WorkersReply *query_workers(sqlite3 *db) {
    Vdn__WorkersReply *r = vdn_xmalloc(sizeof *r);
    vdn__workers_reply__init(r);
    add_workers(db, &r->workers, &r->n_workers);
    return r;
}

/* The store operation an attempt's failure came from (schema 4), NULL when none; a database
 * older than schema 4 read with --db has no such column: NULL too. */
static char *attempt_store_op(sqlite3 *db, int64_t attempt) {
    sqlite3_stmt *st = cdb_prep(db, "SELECT store_op FROM attempts WHERE id=?", "i", attempt);
    char *op = st && sqlite3_step(st) == SQLITE_ROW ? cdb_col_str(st, 0) : NULL;
    sqlite3_finalize(st);
    return op;
}

Vdn__LogsReply *query_logs(sqlite3 *db, int64_t job, char *err, size_t errlen) {
    Vdn__StatusReply *s = query_status(db, 'j', job, err, errlen);
    if (!s) return NULL;
    Vdn__LogsReply *r = vdn_xmalloc(sizeof *r);
    vdn__logs_reply__init(r);
    r->job = s->jobs[0];
    s->n_jobs = 0; /* moved */
    free(s->jobs);
    s->jobs = NULL;
    protobuf_c_message_free_unpacked(&s->base, NULL);
    int64_t batch = (int64_t)r->job->batch_id;
    sqlite3_stmt *st =
        cdb_prep(db,
                 "SELECT at, job_id, attempt_id, worker_id, kind, detail FROM events "
                 "WHERE job_id = ? OR (job_id IS NULL AND batch_id = ?) ORDER BY id",
                 "ii", job, batch);
    while (st && sqlite3_step(st) == SQLITE_ROW) {
        Vdn__EventInfo *e = vdn_xmalloc(sizeof *e);
        vdn__event_info__init(e);
        e->has_at = 1;
        e->at = sqlite3_column_double(st, 0);
        if (sqlite3_column_type(st, 1) != SQLITE_NULL)
            e->has_job_id = 1, e->job_id = (uint64_t)sqlite3_column_int64(st, 1);
        if (sqlite3_column_type(st, 2) != SQLITE_NULL)
            e->has_attempt_id = 1, e->attempt_id = (uint64_t)sqlite3_column_int64(st, 2);
        e->worker_id = cdb_col_str(st, 3);
        e->kind = cdb_col_str(st, 4);
        e->detail = cdb_col_str(st, 5);
        PUSH(r->events, r->n_events, e);
    }
    sqlite3_finalize(st);
    st = cdb_prep(db,
                  "SELECT id, job_id, worker_id, state, started_at, finished_at, reason, fault, "
                  "nfe_evaluated FROM attempts WHERE job_id = ? ORDER BY id",
                  "i", job);
    while (st && sqlite3_step(st) == SQLITE_ROW) {
        Vdn__AttemptInfo *a = vdn_xmalloc(sizeof *a);
        vdn__attempt_info__init(a);
        a->has_attempt_id = a->has_job_id = a->has_started_at = 1;
        a->attempt_id = (uint64_t)sqlite3_column_int64(st, 0);
        a->job_id = (uint64_t)sqlite3_column_int64(st, 1);
        a->worker_id = cdb_col_str(st, 2);
        a->state = cdb_col_str(st, 3);
        a->started_at = sqlite3_column_double(st, 4);
        if (sqlite3_column_type(st, 5) != SQLITE_NULL)
            a->has_finished_at = 1, a->finished_at = sqlite3_column_double(st, 5);
        a->reason = cdb_col_str(st, 6);
        a->fault = cdb_col_str(st, 7);
        a->has_nfe_evaluated = 1;
        a->nfe_evaluated = sqlite3_column_int(st, 8);
        a->store_op = attempt_store_op(db, (int64_t)a->attempt_id);
        PUSH(r->attempts, r->n_attempts, a);
    }
    sqlite3_finalize(st);
    return r;
}
