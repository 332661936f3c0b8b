/* Job and attempt transitions; see jobs.h. Every function is one transaction: a crash between
 * two statements can never leave a job running without its attempt or the other way round. */
#include "jobs.h"

#include <cjson/cJSON.h>
#include <string.h>

#include "db.h"
#include "spec.h"
#include "vdn_util.h"

void job_claim_free(job_claim *c) {
    free(c->request_json);
    free(c->output_prefix);
    free(c->resume_key);
    memset(c, 0, sizeof *c);
}

const char *job_fault_name(job_fault f) {
    return f == FAULT_JOB      ? "job"
           : f == FAULT_WORKER ? "worker"
           : f == FAULT_CRASH  ? "crash"
                               : "transient";
}

void jobs_class_of(const vdn_job_spec *s, char *buf, size_t len) {
    /* sizes a GPU cannot take come in bands: a worker that runs out of memory at 2^k pixels of
     * video will at 2^k + 1 too, and may well manage 2^(k-1) */
    double px = (double)(s->frames > 0 ? s->frames : 1) * (s->height > 0 ? s->height : 1) *
                (s->width > 0 ? s->width : 1);
    int band = 0;
    while (band < 62 && (double)(1ull << band) < px)
        band++;
    snprintf(buf, len, "%s/%s/2^%d", s->checkpoint && *s->checkpoint ? s->checkpoint : "*",
             s->variant && *s->variant ? s->variant : "vdn", band);
}

/* 1 if `out` is, or lies under, a prefix only the farm's workers write. */
static const char *system_prefix(const char *out) {
    if (!strncmp(out, "prompt-cache", 12) && (!out[12] || out[12] == '/'))
        return "the text prompts' cache, prompt-cache/";
    for (const char *p = out; (p = strstr(p, ".snapshots")); p += 10)
        if (!p[10] || p[10] == '/') return "a job's sampler snapshots, PREFIX.snapshots/";
    return NULL;
}

/* Characters of UTF-8 text: the bytes that do not continue a sequence. */
static size_t utf8_chars(const char *s) {
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

int jobs_output_prefix(const char *out, const jobs_submitter *who, int64_t batch, int64_t job,
                       char *buf, size_t len, vdn_errlist *errs, const char *where) {
    const char *sys = out ? system_prefix(out) : NULL;
    if (sys) {
        vdn_errlist_add(errs,
                        "%s: field 'out': \"%.80s\" lies in %s, which only the farm's workers "
                        "write; choose another prefix",
                        where, out, sys);
        return -1;
    }
    char users[VDN_ERR_LEN] = "";
    if (who->owner) snprintf(users, sizeof users, "users/%s/", who->owner);
    int n;
    if (!out)
        n = snprintf(buf, len, "%sbatches/b%lld/j%lld/out", users, (long long)batch,
                     (long long)job);
    else if (!who->owner || who->admin || !strncmp(out, users, strlen(users)))
        n = snprintf(buf, len, "%s", out);
    else if (!strncmp(out, "users/", 6)) {
        vdn_errlist_add(errs,
                        "%s: field 'out': \"%.80s\" is outside your namespace %s (the store "
                        "folder of your key's name); give a prefix under it, or one without "
                        "users/ that is put there",
                        where, out, users);
        return -1;
    } else
        n = snprintf(buf, len, "%s%s", users, out);
    if (n < 0 || (size_t)n >= len) {
        vdn_errlist_add(errs, "%s: field 'out': the store prefix is longer than %zu bytes", where,
                        len - 1);
        return -1;
    }
    return 0;
}

int jobs_owner(sqlite3 *db, char kind, int64_t id, char *buf, size_t len) {
    sqlite3_stmt *st = cdb_prep(db,
                                kind == 'b' ? "SELECT coalesce(owner,'') FROM batches WHERE id=?"
                                            : "SELECT coalesce(b.owner,'') FROM jobs j JOIN "
                                              "batches b ON b.id=j.batch_id WHERE j.id=?",
                                "i", id);
    int found = st && sqlite3_step(st) == SQLITE_ROW;
    if (found) snprintf(buf, len, "%s", sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return found ? 0 : -1;
}

int jobs_submit(sqlite3 *db, const Vdn__SubmitRequest *req, const cost_caps *caps,
                const jobs_submitter *who, int64_t *batch, int64_t **job_ids, vdn_errlist *errs) {
    char err[VDN_ERR_LEN];
    *job_ids = NULL;
    if (req->n_jobs == 0) {
        vdn_errlist_add(errs, "submit: no jobs in the batch");
        return -1;
    }
    if (who->max_jobs > 0 && req->n_jobs > (size_t)who->max_jobs) {
        vdn_errlist_add(errs,
                        "submit: %zu jobs in one batch, above this coordinator's "
                        "--max-jobs-per-batch %d: split the file into several batches",
                        req->n_jobs, who->max_jobs);
        return -1;
    }
    if (req->n_job_priorities && req->n_job_priorities != req->n_jobs)
        vdn_errlist_add(errs, "submit: %zu job_priorities for %zu jobs", req->n_job_priorities,
                        req->n_jobs);
    if (req->n_job_tags && req->n_job_tags != req->n_jobs)
        vdn_errlist_add(errs, "submit: %zu job_tags for %zu jobs", req->n_job_tags, req->n_jobs);
    vdn_job_spec *specs = vdn_xcalloc(req->n_jobs, sizeof *specs);
    for (size_t i = 0; i < req->n_jobs; i++) {
        char where[64];
        snprintf(where, sizeof where, "job %zu of the batch", i + 1);
        vdn_job_spec_from_proto(req->jobs[i], &specs[i]);
        char prefix[512];
        size_t chars = specs[i].prompt ? utf8_chars(specs[i].prompt) : 0;
        if (who->max_prompt_chars > 0 && chars > (size_t)who->max_prompt_chars)
            vdn_errlist_add(errs,
                            "%s: field 'prompt': %zu characters, above this coordinator's "
                            "--max-prompt-chars %d",
                            where, chars, who->max_prompt_chars);
        else if (vdn_job_spec_validate(&specs[i], errs, where) == 0 &&
                 jobs_output_prefix(specs[i].output_prefix, who, 0, 0, prefix, sizeof prefix, errs,
                                    where) == 0)
            cost_check(db, &specs[i], caps, errs, where);
    }
    int64_t *ids = vdn_xcalloc(req->n_jobs, sizeof *ids);
    int rc = -1;
    if (errs->n) goto out;
    if (cdb_begin(db, err, sizeof err)) goto dberr;
    double now = vdn_wall();
    int prio = req->has_priority ? req->priority : 0;
    if (cdb_run(db, err, sizeof err,
                "INSERT INTO batches(tag,priority,source,submitted_at,owner) VALUES(?,?,?,?,?)",
                "sisds", req->tag, (int64_t)prio, req->source, now, who->owner))
        goto rollback;
    *batch = sqlite3_last_insert_rowid(db);
    for (size_t i = 0; i < req->n_jobs; i++) {
        vdn_job_spec *s = &specs[i];
        int jp = req->n_job_priorities ? req->job_priorities[i] : prio;
        const char *tag = req->n_job_tags && req->job_tags[i][0] ? req->job_tags[i] : req->tag;
        char *json = vdn_job_spec_to_json(s), cls[300];
        jobs_class_of(s, cls, sizeof cls);
        int bad = cdb_run(db, err, sizeof err,
                          "INSERT INTO jobs(batch_id,state,priority,tag,request,checkpoint,gpus,"
                          "min_gpu_memory,output_prefix,submitted_at,job_class) "
                          "VALUES(?,'queued',?,?,?,?,?,?,'',?,?)",
                          "iisssiids", *batch, (int64_t)jp, tag, json, s->checkpoint,
                          (int64_t)(s->gpus ? s->gpus : 1), (int64_t)s->min_gpu_memory, now, cls);
        free(json);
        if (bad) goto rollback;
        ids[i] = sqlite3_last_insert_rowid(db);
        char prefix[512];
        if (jobs_output_prefix(s->output_prefix, who, *batch, ids[i], prefix, sizeof prefix, errs,
                               "submit")) {
            snprintf(err, sizeof err, "output prefix of job %zu", i + 1);
            goto rollback;
        }
        if (cdb_run(db, err, sizeof err, "UPDATE jobs SET output_prefix=? WHERE id=?", "si", prefix,
                    ids[i]))
            goto rollback;
    }
    char detail[128];
    snprintf(detail, sizeof detail, "%zu jobs, priority %d", req->n_jobs, prio);
    cdb_event(db, *batch, 0, 0, NULL, "submitted", detail);
    if (cdb_commit(db, err, sizeof err)) goto rollback;
    *job_ids = ids;
    ids = NULL;
    rc = 0;
    goto out;
rollback:
    cdb_rollback(db);
dberr:
    vdn_errlist_add(errs, "database: %s", err);
out:
    for (size_t i = 0; i < req->n_jobs; i++)
        vdn_job_spec_free(&specs[i]);
    free(specs);
    free(ids);
    return rc;
}

static int claim(sqlite3 *db, int64_t job, const char *worker_id, double lease, job_claim *out,
                 char *err, size_t errlen);

/* The attempt id is the fencing token, and a rowid: a claim lost to a power cut would hand the
 * same id to the next claim while the first worker still holds it. So this one commit waits for
 * the disk (synchronous=FULL: the WAL is fsynced before COMMIT returns, and the ASSIGN is sent
 * only after), and the connection goes back to NORMAL for the frequent small writes (progress,
 * heartbeats), which a power cut may lose without harm. */
int jobs_claim(sqlite3 *db, int64_t job, const char *worker_id, double lease, job_claim *out,
               char *err, size_t errlen) {
    char e2[VDN_ERR_LEN];
    if (cdb_run(db, err, errlen, "PRAGMA synchronous=FULL", "")) return -1;
    int rc = claim(db, job, worker_id, lease, out, err, errlen);
    if (cdb_run(db, e2, sizeof e2, "PRAGMA synchronous=NORMAL", ""))
        VDN_ERROR("claim: back to synchronous=NORMAL: %s", e2);
    return rc;
}

static int claim(sqlite3 *db, int64_t job, const char *worker_id, double lease, job_claim *out,
                 char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (cdb_begin(db, err, errlen)) return -1;
    sqlite3_stmt *st = cdb_prep(db,
                                "SELECT id, batch_id, request, output_prefix, snapshot_key FROM "
                                "jobs WHERE id = ? AND state='queued'",
                                "i", job);
    if (!st) {
        cdb_rollback(db);
        return vdn_fail(err, errlen, "claim: %s", sqlite3_errmsg(db));
    }
    int rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        sqlite3_finalize(st);
        cdb_rollback(db);
        return rc == SQLITE_DONE ? 0 : vdn_fail(err, errlen, "claim: %s", sqlite3_errmsg(db));
    }
    out->job = sqlite3_column_int64(st, 0);
    out->batch = sqlite3_column_int64(st, 1);
    out->request_json = cdb_col_str(st, 2);
    out->output_prefix = cdb_col_str(st, 3);
    out->resume_key = cdb_col_str(st, 4);
    sqlite3_finalize(st);
    double now = vdn_wall();
    if (cdb_run(db, err, errlen,
                "INSERT INTO attempts(job_id,worker_id,state,started_at,lease_until) "
                "VALUES(?,?,'running',?,?)",
                "isdd", out->job, worker_id, now, now + lease))
        goto fail;
    out->attempt = sqlite3_last_insert_rowid(db);
    if (cdb_run(db, err, errlen,
                "UPDATE jobs SET state='running', current_attempt=?, attempts=attempts+1, "
                "waiting=NULL, "
                "nfe_done=0, nfe_total=0, nfe_seconds=0, elapsed_seconds=0 WHERE id=?",
                "ii", out->attempt, out->job))
        goto fail;
    cdb_event(db, out->batch, out->job, out->attempt, worker_id, "assigned", NULL);
    if (cdb_commit(db, err, errlen)) goto fail;
    return 1;
fail:
    cdb_rollback(db);
    job_claim_free(out);
    return -1;
}

int jobs_attempt(sqlite3 *db, int64_t attempt, attempt_info *o) {
    memset(o, 0, sizeof *o);
    sqlite3_stmt *st = cdb_prep(db,
                                "SELECT a.job_id, j.batch_id, a.state, j.state, a.worker_id, "
                                "j.current_attempt = a.id FROM attempts a JOIN jobs j ON "
                                "j.id = a.job_id WHERE a.id = ?",
                                "i", attempt);
    if (!st) return 0;
    int found = sqlite3_step(st) == SQLITE_ROW;
    if (found) {
        o->job = sqlite3_column_int64(st, 0);
        o->batch = sqlite3_column_int64(st, 1);
        snprintf(o->state, sizeof o->state, "%s", sqlite3_column_text(st, 2));
        snprintf(o->job_state, sizeof o->job_state, "%s", sqlite3_column_text(st, 3));
        snprintf(o->worker, sizeof o->worker, "%s", sqlite3_column_text(st, 4));
        o->current = sqlite3_column_int(st, 5) && !strcmp(o->state, "running") &&
                     !strcmp(o->job_state, "running");
    }
    sqlite3_finalize(st);
    return found;
}

int jobs_renew(sqlite3 *db, int64_t attempt, double lease_until) {
    char err[VDN_ERR_LEN];
    return cdb_run(db, err, sizeof err,
                   "UPDATE attempts SET lease_until=max(lease_until, ?) WHERE id=? AND "
                   "state='running'",
                   "di", lease_until, attempt);
}

int jobs_progress(sqlite3 *db, int64_t attempt, int nfe_done, int nfe_total, double nfe_seconds,
                  double elapsed, double lease_until) {
    char err[VDN_ERR_LEN];
    if (cdb_begin(db, err, sizeof err)) return -1;
    if (cdb_run(db, err, sizeof err,
                "UPDATE jobs SET nfe_done=?, nfe_total=?, nfe_seconds=?, elapsed_seconds=? "
                "WHERE current_attempt=? AND state='running'",
                "iiddi", (int64_t)nfe_done, (int64_t)nfe_total, nfe_seconds, elapsed, attempt) ||
        cdb_run(db, err, sizeof err,
                "UPDATE attempts SET lease_until=max(lease_until, ?) WHERE id=? AND "
                "state='running'",
                "di", lease_until, attempt)) {
        cdb_rollback(db);
        VDN_ERROR("progress: %s", err);
        return -1;
    }
    return cdb_commit(db, err, sizeof err);
}

int jobs_snapshot(sqlite3 *db, int64_t attempt, int nfe_evaluated, const char *key, int step) {
    char err[VDN_ERR_LEN];
    if (cdb_begin(db, err, sizeof err)) return -1;
    int bad = cdb_run(db, err, sizeof err,
                      "UPDATE attempts SET nfe_evaluated=max(nfe_evaluated, ?) WHERE id=? AND "
                      "state='running'",
                      "ii", (int64_t)nfe_evaluated, attempt) ||
              cdb_run(db, err, sizeof err,
                      "UPDATE jobs SET nfe_evaluated=(SELECT sum(nfe_evaluated) FROM attempts "
                      "WHERE job_id=jobs.id) WHERE current_attempt=? AND state='running'",
                      "i", attempt);
    /* only a later step replaces the newest snapshot (messages may arrive out of order) */
    if (!bad && key && *key && step > 0)
        bad = cdb_run(db, err, sizeof err,
                      "UPDATE jobs SET snapshot_key=?, snapshot_step=? WHERE current_attempt=? "
                      "AND state='running' AND snapshot_step < ?",
                      "siii", key, (int64_t)step, attempt, (int64_t)step);
    if (bad) {
        cdb_rollback(db);
        VDN_ERROR("snapshot: %s", err);
        return -1;
    }
    return cdb_commit(db, err, sizeof err);
}

/* What a finished render did, from its run record (engine/record.c: sampler.nfe,
 * timing.total_seconds). PROGRESS messages sent while the coordinator was down are lost, so
 * the record, not the last PROGRESS, is what a done job's progress is taken from. 0 = absent
 * (a record that is not JSON, or an older worker's): the request's steps then stand in. */
static void record_nfe(const char *record, int *nfe, int *resumed, double *seconds) {
    *nfe = *resumed = 0;
    *seconds = 0;
    cJSON *r = record ? cJSON_Parse(record) : NULL;
    const cJSON *n = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "sampler"), "nfe");
    const cJSON *rs = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "sampler"), "resumed_from_step");
    if (cJSON_IsNumber(rs) && rs->valuedouble >= 0 && rs->valuedouble <= 1e6)
        *resumed = (int)rs->valuedouble;
    const cJSON *t = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "timing"), "total_seconds");
    if (cJSON_IsNumber(n) && n->valuedouble >= 1 && n->valuedouble <= 1e6)
        *nfe = (int)n->valuedouble;
    if (cJSON_IsNumber(t) && t->valuedouble > 0 && t->valuedouble < 1e9) *seconds = t->valuedouble;
    cJSON_Delete(r);
}

int jobs_complete(sqlite3 *db, int64_t attempt, char **keys, size_t nkeys, const char *record,
                  char *err, size_t errlen) {
    attempt_info a;
    if (!jobs_attempt(db, attempt, &a) || !a.current)
        return vdn_fail(err, errlen, "attempt %lld is not current", (long long)attempt);
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; i < nkeys; i++)
        cJSON_AddItemToArray(arr, cJSON_CreateString(keys[i]));
    char *keys_json = cJSON_PrintUnformatted(arr);
    cJSON_Delete(arr);
    double now = vdn_wall(), rec_seconds;
    int rc = -1, rec_nfe, rec_resumed;
    record_nfe(record, &rec_nfe, &rec_resumed, &rec_seconds);
    int evaluated = rec_nfe > rec_resumed ? rec_nfe - rec_resumed : 0;
    if (cdb_begin(db, err, errlen)) goto out;
    if (cdb_run(db, err, errlen, "UPDATE attempts SET state='done', finished_at=? WHERE id=?", "di",
                now, attempt) ||
        cdb_run(db, err, errlen,
                "UPDATE jobs SET state='done', finished_at=?, object_keys=?, run_record=? "
                "WHERE id=?",
                "dssi", now, keys_json, record, a.job) ||
        /* done means every NFE ran: the record's count, else the last PROGRESS's total, else
         * the request's steps (one NFE per step) */
        cdb_run(db, err, errlen,
                "UPDATE jobs SET nfe_total=CASE WHEN ?>0 THEN ? WHEN nfe_total>0 THEN nfe_total "
                "ELSE coalesce(json_extract(request, '$.steps'), 0) END WHERE id=?",
                "iii", (int64_t)rec_nfe, (int64_t)rec_nfe, a.job) ||
        cdb_run(db, err, errlen,
                "UPDATE jobs SET nfe_done=nfe_total, elapsed_seconds=CASE WHEN ?>0 THEN ? "
                "ELSE elapsed_seconds END WHERE id=?",
                "ddi", rec_seconds, rec_seconds, a.job) ||
        /* this attempt's own NFEs (its last PROGRESS may not have come), then the job's sum;
         * the worker deletes the snapshots with the result, so none is left to resume from */
        cdb_run(db, err, errlen,
                "UPDATE attempts SET nfe_evaluated=max(nfe_evaluated, ?) WHERE id=?", "ii",
                (int64_t)evaluated, attempt) ||
        cdb_run(db, err, errlen,
                "UPDATE jobs SET nfe_evaluated=(SELECT sum(nfe_evaluated) FROM attempts WHERE "
                "job_id=jobs.id), snapshot_key=NULL WHERE id=?",
                "i", a.job) ||
        cdb_run(db, err, errlen, "UPDATE workers SET failures=0 WHERE id=?", "s", a.worker) ||
        cdb_run(db, err, errlen,
                "UPDATE worker_blocks SET failures=0 WHERE worker_id=? AND job_class=(SELECT "
                "job_class FROM jobs WHERE id=?)",
                "si", a.worker, a.job)) {
        cdb_rollback(db);
        goto out;
    }
    char detail[64];
    snprintf(detail, sizeof detail, "%zu objects", nkeys);
    cdb_event(db, a.batch, a.job, attempt, a.worker, "done", detail);
    rc = cdb_commit(db, err, errlen);
    if (rc) cdb_rollback(db);
out:
    free(keys_json);
    return rc;
}

const char *job_store_op_name(int op) {
    return op == 1 ? "download" : op == 2 ? "upload" : op == 3 ? "open" : NULL;
}

/* The job's crash record: the workers whose renderers it crashed, in the order of their first
 * crash, as "A, B" into buf ("A (2x), B" when it crashed one of several more than once); returns
 * how many crashes it holds and *workers how many distinct workers. */
static int crash_record(sqlite3 *db, int64_t job, char *buf, size_t len, int *workers) {
    int n = 0;
    buf[0] = 0;
    *workers = (int)cdb_int(db, 0,
                            "SELECT count(DISTINCT worker_id) FROM crashes WHERE job_id=? AND "
                            "job_record",
                            "i", job);
    sqlite3_stmt *st = cdb_prep(db,
                                "SELECT worker_id, count(*) FROM crashes WHERE job_id=? AND "
                                "job_record GROUP BY worker_id ORDER BY min(attempt_id)",
                                "i", job);
    while (st && sqlite3_step(st) == SQLITE_ROW) {
        int k = sqlite3_column_int(st, 1);
        size_t used = strlen(buf);
        char times[24] = "";
        if (k > 1 && *workers > 1) snprintf(times, sizeof times, " (%dx)", k);
        snprintf(buf + used, len - used, "%s%s%s", used ? ", " : "", sqlite3_column_text(st, 0),
                 times);
        n += k;
    }
    sqlite3_finalize(st);
    return n;
}

/* "crashed the renderer twice (workers A, B)": why a job is quarantined. */
static void quarantine_reason(char *buf, size_t len, int crashes, int workers, const char *record) {
    char times[24];
    if (crashes == 2)
        snprintf(times, sizeof times, "twice");
    else
        snprintf(times, sizeof times, "%d times", crashes);
    snprintf(buf, len, "crashed the renderer %s (worker%s %s)", times, workers > 1 ? "s" : "",
             record);
}

/* A crash joins the job's record; a record naming two workers (it crashes wherever it runs), or
 * budget->max_crashes crashes on one (a farm of one worker cannot tell more), quarantines it.
 * 1 quarantined (reason in why), 0 not (why: the record), -1 error. */
static int record_crash(sqlite3 *db, const attempt_info *a, int64_t attempt, double now,
                        const job_budget *budget, char *why, size_t whylen, char *err,
                        size_t errlen) {
    if (cdb_run(db, err, errlen,
                "INSERT INTO crashes(attempt_id, job_id, worker_id, at) VALUES(?,?,?,?)", "iisd",
                attempt, a->job, a->worker, now) ||
        cdb_run(db, err, errlen, "UPDATE jobs SET crashes=crashes+1 WHERE id=?", "i", a->job))
        return -1;
    char record[512];
    int workers, n = crash_record(db, a->job, record, sizeof record, &workers);
    if (workers < 2 && n < budget->max_crashes) {
        snprintf(why, whylen, "%d in its crash record (%s)", n, record);
        return 0;
    }
    quarantine_reason(why, whylen, n, workers, record);
    /* the job is the cause: its crashes no longer count against the workers it crashed */
    if (cdb_run(db, err, errlen, "UPDATE jobs SET quarantined=1 WHERE id=?", "i", a->job) ||
        cdb_run(db, err, errlen, "UPDATE crashes SET worker_record=0 WHERE job_id=?", "i", a->job))
        return -1;
    return 1;
}

int jobs_end_attempt(sqlite3 *db, int64_t attempt, const char *attempt_state, const char *reason,
                     job_fault fault, const char *store_op, int lost, const job_budget *budget,
                     char job_state_out[16], char *err, size_t errlen) {
    attempt_info a;
    if (!jobs_attempt(db, attempt, &a) || !a.current)
        return vdn_fail(err, errlen, "attempt %lld is not current", (long long)attempt);
    double now = vdn_wall();
    if (cdb_begin(db, err, errlen)) return -1;
    /* jobs.attempts counts every claim, this one included; the lost ones and the crashed ones
     * are not the job's */
    int crash = fault == FAULT_CRASH;
    int64_t lost_before = cdb_int(db, 0, "SELECT worker_faults FROM jobs WHERE id=?", "i", a.job);
    int64_t crashes = cdb_int(db, 0, "SELECT crashes FROM jobs WHERE id=?", "i", a.job) + crash;
    int64_t claimed = cdb_int(db, 0, "SELECT attempts FROM jobs WHERE id=?", "i", a.job);
    int64_t nlost = lost_before + (lost ? 1 : 0), used = claimed - nlost - crashes;
    char crash_why[600] = "";
    int quarantine =
        crash ? record_crash(db, &a, attempt, now, budget, crash_why, sizeof crash_why, err, errlen)
              : 0;
    if (quarantine < 0) goto fail;
    int final =
        fault == FAULT_JOB || quarantine ||
        (!crash && (lost ? nlost >= budget->max_worker_faults : used >= budget->max_attempts));
    const char *js = final ? "failed" : "queued";
    char line[VDN_ERR_LEN];
    snprintf(line, sizeof line, "attempt %lld on %s %s (%s fault): %s", (long long)attempt,
             a.worker, attempt_state, job_fault_name(fault), reason ? reason : "(no reason)");
    /* last_error keeps every attempt's reason, newest last, so a failed job explains itself */
    if (cdb_run(db, err, errlen,
                "UPDATE attempts SET state=?, finished_at=?, reason=?, fault=?, store_op=? WHERE "
                "id=?",
                "sdsssi", attempt_state, now, reason, job_fault_name(fault), store_op, attempt) ||
        cdb_run(db, err, errlen,
                "UPDATE jobs SET state=?, current_attempt=NULL, finished_at=?, worker_faults=?, "
                "last_error = CASE WHEN last_error IS NULL THEN ? ELSE last_error || char(10) || ? "
                "END WHERE id=?",
                "sdissi", js, final ? now : 0.0, nlost, line, line, a.job))
        goto fail;
    /* a quarantined job's last line says why it ended */
    if (quarantine == 1 && cdb_run(db, err, errlen,
                                   "UPDATE jobs SET last_error = last_error || char(10) || ? "
                                   "WHERE id=?",
                                   "si", crash_why, a.job))
        goto fail;
    /* only the machine's own faults count against it, overall and in the job's class */
    if (fault == FAULT_WORKER &&
        (cdb_run(db, err, errlen, "UPDATE workers SET failures=failures+1 WHERE id=?", "s",
                 a.worker) ||
         cdb_run(db, err, errlen,
                 "INSERT INTO worker_blocks(worker_id, job_class, failures) SELECT ?, job_class, "
                 "1 FROM jobs WHERE id=? ON CONFLICT(worker_id, job_class) DO UPDATE SET "
                 "failures=failures+1",
                 "si", a.worker, a.job)))
        goto fail;
    if (!final) cdb_run(db, err, errlen, "UPDATE jobs SET finished_at=NULL WHERE id=?", "i", a.job);
    cdb_event(db, a.batch, a.job, attempt, a.worker, attempt_state, reason);
    char detail[800];
    const char *kind = final ? "failed" : "requeued";
    if (quarantine == 1) {
        kind = "quarantined";
        snprintf(detail, sizeof detail, "%s; not retried without vdn retry --force", crash_why);
    } else if (crash)
        snprintf(detail, sizeof detail,
                 "renderer crash %s; charged to no budget: %lld of %d attempts used", crash_why,
                 (long long)used, budget->max_attempts);
    else if (fault == FAULT_JOB)
        snprintf(detail, sizeof detail, "after %lld of %d attempts (job fault), not retried",
                 (long long)used, budget->max_attempts);
    else if (lost)
        snprintf(detail, sizeof detail,
                 "lost with its worker (%s fault): %lld of %d worker faults; %lld of %d attempts "
                 "used",
                 job_fault_name(fault), (long long)nlost, budget->max_worker_faults,
                 (long long)used, budget->max_attempts);
    else
        snprintf(detail, sizeof detail, "after %lld of %d attempts (%s fault)", (long long)used,
                 budget->max_attempts, job_fault_name(fault));
    cdb_event(db, a.batch, a.job, attempt, a.worker, kind, detail);
    if (cdb_commit(db, err, errlen)) goto fail;
    snprintf(job_state_out, 16, "%s", quarantine == 1 ? "quarantined" : js);
    return 0;
fail:
    cdb_rollback(db);
    return -1;
}

int jobs_crashed_jobs(sqlite3 *db, const char *worker_id, double since, int64_t *jobs, int max) {
    sqlite3_stmt *st = cdb_prep(db,
                                "SELECT DISTINCT job_id FROM crashes WHERE worker_id=? AND "
                                "worker_record AND at >= ? ORDER BY job_id",
                                "sd", worker_id, since);
    int n = 0;
    while (st && sqlite3_step(st) == SQLITE_ROW) {
        if (n < max) jobs[n] = sqlite3_column_int64(st, 0);
        n++;
    }
    sqlite3_finalize(st);
    return n;
}

int jobs_crash_blocklisted(sqlite3 *db, const char *worker_id, double since, char *err,
                           size_t errlen) {
    return cdb_run(db, err, errlen,
                   "UPDATE crashes SET worker_record=0, job_record=0 WHERE worker_id=? AND "
                   "worker_record AND at >= ?",
                   "sd", worker_id, since);
}

static const char *target_where(char kind) {
    return kind == 'b' ? "batch_id = ?" : "id = ?";
}

int jobs_cancel(sqlite3 *db, char kind, int64_t id, int *count,
                void (*on_running)(void *user, int64_t attempt, const char *worker), void *user,
                char *err, size_t errlen) {
    *count = 0;
    char sql[512];
    if (cdb_begin(db, err, errlen)) return -1;
    double now = vdn_wall();
    snprintf(
        sql, sizeof sql,
        "SELECT j.id, j.batch_id, j.current_attempt, a.worker_id FROM jobs j LEFT JOIN "
        "attempts a ON a.id = j.current_attempt WHERE j.state IN ('queued','running') AND j.%s",
        target_where(kind));
    sqlite3_stmt *st = cdb_prep(db, sql, "i", id);
    if (!st) goto fail;
    typedef struct {
        int64_t job, batch, attempt;
        char *worker;
    } row;
    row *rows = NULL;
    int n = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        rows = realloc(rows, sizeof *rows * (size_t)(n + 1));
        VDN_ASSERT(rows);
        rows[n].job = sqlite3_column_int64(st, 0);
        rows[n].batch = sqlite3_column_int64(st, 1);
        rows[n].attempt = sqlite3_column_int64(st, 2);
        rows[n].worker = cdb_col_str(st, 3);
        n++;
    }
    sqlite3_finalize(st);
    int bad = 0;
    for (int i = 0; i < n && !bad; i++) {
        bad |= cdb_run(db, err, errlen,
                       "UPDATE jobs SET state='cancelled', current_attempt=NULL, finished_at=? "
                       "WHERE id=?",
                       "di", now, rows[i].job);
        if (rows[i].attempt)
            bad |= cdb_run(db, err, errlen,
                           "UPDATE attempts SET state='cancelled', finished_at=?, "
                           "reason='cancelled by user' WHERE id=? AND state='running'",
                           "di", now, rows[i].attempt);
        cdb_event(db, rows[i].batch, rows[i].job, rows[i].attempt, rows[i].worker, "cancelled",
                  rows[i].attempt ? "running attempt cancelled" : "was queued");
    }
    if (bad || cdb_commit(db, err, errlen)) {
        for (int i = 0; i < n; i++)
            free(rows[i].worker);
        free(rows);
        goto fail;
    }
    for (int i = 0; i < n; i++) {
        if (rows[i].attempt && on_running) on_running(user, rows[i].attempt, rows[i].worker);
        free(rows[i].worker);
    }
    free(rows);
    *count = n;
    return 0;
fail:
    if (!err[0]) vdn_fail(err, errlen, "cancel: %s", sqlite3_errmsg(db));
    cdb_rollback(db);
    return -1;
}

int jobs_retry(sqlite3 *db, char kind, int64_t id, int force, int *count, int *quarantined,
               char *err, size_t errlen) {
    char sql[768], which[256];
    *count = *quarantined = 0;
    if (cdb_begin(db, err, errlen)) return -1;
    /* a quarantined job crashed renderers on two workers: only --force runs it again */
    snprintf(which, sizeof which, "state IN ('failed','cancelled')%s AND %s",
             force ? "" : " AND NOT quarantined", target_where(kind));
    if (!force) {
        snprintf(sql, sizeof sql,
                 "SELECT count(*) FROM jobs WHERE state='failed' AND quarantined AND %s",
                 target_where(kind));
        *quarantined = (int)cdb_int(db, 0, sql, "i", id);
    }
    snprintf(sql, sizeof sql,
             "INSERT INTO events(at,batch_id,job_id,kind,detail) SELECT ?, batch_id, id, "
             "'retried', 'was ' || CASE WHEN quarantined THEN 'quarantined' ELSE state END || "
             "CASE WHEN ? AND EXISTS(SELECT 1 FROM crashes WHERE job_id=jobs.id AND job_record) "
             "THEN '; its crash record cleared (--force)' ELSE '' END FROM jobs WHERE %s",
             which);
    if (cdb_run(db, err, errlen, sql, "dii", vdn_wall(), (int64_t)force, id)) goto fail;
    if (force) {
        snprintf(sql, sizeof sql,
                 "UPDATE crashes SET job_record=0 WHERE job_id IN (SELECT id FROM jobs WHERE %s)",
                 which);
        if (cdb_run(db, err, errlen, sql, "i", id)) goto fail;
    }
    snprintf(sql, sizeof sql,
             "UPDATE jobs SET state='queued', attempts=0, worker_faults=0, crashes=0, "
             "quarantined=0, finished_at=NULL, current_attempt=NULL WHERE %s",
             which);
    if (cdb_run(db, err, errlen, sql, "i", id)) goto fail;
    *count = sqlite3_changes(db);
    if (cdb_commit(db, err, errlen)) goto fail;
    return 0;
fail:
    cdb_rollback(db);
    return -1;
}

int jobs_each_expired(sqlite3 *db, double now, void (*fn)(void *user, int64_t attempt),
                      void *user) {
    sqlite3_stmt *st = cdb_prep(db,
                                "SELECT id FROM attempts WHERE state='running' AND lease_until < ? "
                                "ORDER BY id",
                                "d", now);
    if (!st) return -1;
    int64_t *ids = NULL;
    int n = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        ids = realloc(ids, sizeof *ids * (size_t)(n + 1));
        VDN_ASSERT(ids);
        ids[n++] = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    for (int i = 0; i < n; i++)
        fn(user, ids[i]);
    free(ids);
    return n;
}
