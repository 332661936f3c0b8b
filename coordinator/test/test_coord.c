/* The coordinator as a real process on loopback, driven by fake workers that speak the wire
 * protocol directly and by the client library: assignment and matching, leases and requeue
 * with a new attempt id, fencing of stale attempts, max attempts with every reason kept,
 * blocklisting, cancel reaching a running job, drain, priorities, malformed frames on both
 * endpoints, restart from the database. Usage: test_coord PATH/TO/vdn-coord-test */
#include <cjson/cJSON.h>
#include <sqlite3.h>

#include "client.h"
#include "harness.h"

static char wep[128], cep[128];

static vdn_client *client(void) {
    vdn_client_opts o = {cep, NULL, NULL, 3000, NULL};
    char err[VDN_ERR_LEN];
    vdn_client *c = vdn_client_open(&o, err, sizeof err);
    REQUIRE(c);
    return c;
}

static uint64_t submit_f(vdn_client *c, int n, int priority, const char *checkpoint, int gpus,
                         unsigned flags, uint64_t *ids) {
    vdn_job_spec s[8];
    memset(s, 0, sizeof s);
    for (int i = 0; i < n; i++) {
        s[i].prompt_cache = "/data/prompt.safetensors";
        s[i].steps = 4;
        s[i].frames = 22;
        s[i].height = 64;
        s[i].width = 64;
        s[i].seed = 7 + (uint64_t)i;
        s[i].has_seed = 1;
        s[i].checkpoint = (char *)checkpoint;
        s[i].gpus = gpus;
    }
    uint64_t batch = 0;
    char err[VDN_ERR_LEN];
    int rc = vdn_client_submit_flags(c, s, n, "test", priority, "test_coord", flags, &batch, ids,
                                     err, sizeof err);
    if (rc) fprintf(stderr, "submit: %s\n", err);
    REQUIRE(rc == 0);
    return batch;
}

static uint64_t submit(vdn_client *c, int n, int priority, const char *checkpoint, int gpus,
                       uint64_t *ids) {
    return submit_f(c, n, priority, checkpoint, gpus, 0, ids);
}

/* A queued job's `waiting` once it contains want (the reason is written at most once a second):
 * 1 found, 0 not within 4 s (got gets the last one seen). beat: a fake worker kept connected
 * meanwhile (heartbeats). */
static int waits_for(vdn_client *c, uint64_t job, const char *want, fake_worker *beat, char *got,
                     size_t len) {
    char t[32], err[VDN_ERR_LEN];
    snprintf(t, sizeof t, "j%llu", (unsigned long long)job);
    got[0] = 0;
    for (double t0 = vdn_now(); vdn_now() - t0 < 4;) {
        Vdn__StatusReply *r = vdn_client_status(c, t, err, sizeof err);
        int ok = 0;
        if (r && r->n_jobs == 1 && r->jobs[0]->waiting) {
            snprintf(got, len, "%s", r->jobs[0]->waiting);
            ok = strstr(got, want) != NULL;
        }
        vdn_client_free(r);
        if (ok) return 1;
        if (beat) fw_heartbeat_retries(beat, 0);
        sleep_s(0.1);
    }
    return 0;
}

static Vdn__JobInfo *job(vdn_client *c, uint64_t id, Vdn__StatusReply **hold) {
    char t[32], err[VDN_ERR_LEN];
    snprintf(t, sizeof t, "j%llu", (unsigned long long)id);
    *hold = vdn_client_status(c, t, err, sizeof err);
    REQUIRE(*hold && (*hold)->n_jobs == 1);
    return (*hold)->jobs[0];
}

static Vdn__JobInfo *job_when(vdn_client *c, uint64_t id, const char *state, int nfe,
                              Vdn__StatusReply **hold);

/* Whether job `id` is (or within the wait of job_when becomes) `state`. */
static int job_is(vdn_client *c, uint64_t id, const char *state) {
    Vdn__StatusReply *h;
    int ok = !strcmp(job_when(c, id, state, 0, &h)->state, state);
    vdn_client_free(h);
    return ok;
}

/* A fake worker's message and a client's query travel on different sockets, so the query may
 * overtake it: poll (up to 10 s, for a loaded CI machine) until job `id` is in `state` and has
 * at least `nfe` NFEs done, then return it (or the last reply seen, for the CHECKs to name). */
static Vdn__JobInfo *job_when(vdn_client *c, uint64_t id, const char *state, int nfe,
                              Vdn__StatusReply **hold) {
    double end = vdn_now() + 10;
    for (;;) {
        Vdn__JobInfo *j = job(c, id, hold);
        if ((!state || !strcmp(j->state, state)) && j->nfe_done >= nfe) return j;
        if (vdn_now() > end) return j;
        vdn_client_free(*hold);
        sleep_s(0.05);
    }
}

/* The CANCEL of `attempt`: a CANCEL of an earlier attempt may still be queued (e.g. one a
 * heartbeat drew just before the RESULT that ended it was processed), so others are skipped. */
static Vdn__Envelope *expect_cancel(fake_worker *w, uint64_t attempt, double timeout) {
    double end = vdn_now() + timeout;
    for (;;) {
        Vdn__Envelope *e = fw_expect(w, VDN__ENVELOPE__PAYLOAD_CANCEL, end - vdn_now());
        if (!e || e->cancel->attempt_id == attempt) return e;
        vdn__envelope__free_unpacked(e, NULL);
    }
}

static Vdn__Envelope *expect_assign(fake_worker *w, double timeout) {
    Vdn__Envelope *e = fw_expect(w, VDN__ENVELOPE__PAYLOAD_ASSIGN, timeout);
    if (e) w->attempt = e->assign->attempt_id;
    return e;
}

static void start_wf(pid_t *pid, const char *db, const char *lease, const char *maxatt,
                     const char *blockf, const char *max_worker_faults) {
    *pid =
        start_coordinator("--db", db, "--bind", wep, "--client-bind", cep, "--lease-seconds", lease,
                          "--heartbeat-seconds", "0.3", "--max-attempts", maxatt,
                          "--max-worker-faults", max_worker_faults, "--blocklist-failures", blockf,
                          "--blocklist-seconds", "60", "--store", "file:///tmp/store", NULL);
}

static void start(pid_t *pid, const char *db, const char *lease, const char *maxatt,
                  const char *blockf) {
    start_wf(pid, db, lease, maxatt, blockf, "20");
}

/* assignment, matching, lease loss, requeue with a new attempt, fencing */
static void test_lease_and_fencing(void) {
    char db[300];
    snprintf(db, sizeof db, "%s/a.db", h_tmp);
    pid_t pid;
    start(&pid, db, "30", "3", "10");
    vdn_client *c = client();
    uint64_t ids[1];
    submit(c, 1, 0, "tiny", 0, ids);
    CHECK(job_is(c, ids[0], "queued"));

    fake_worker other, w1, w2;
    fw_open(&other, wep, "w-other");
    fw_ready(&other, "big", 1, 80ull << 30, 0);
    Vdn__Envelope *e = expect_assign(&other, 0.8);
    CHECK(e == NULL); /* wrong checkpoint: not for this worker */
    if (e) vdn__envelope__free_unpacked(e, NULL);

    fw_open(&w1, wep, "w1");
    fw_ready(&w1, "tiny", 1, 80ull << 30, 0);
    e = expect_assign(&w1, 3);
    REQUIRE(e);
    uint64_t a1 = e->assign->attempt_id;
    const Vdn__RenderRequest *r = e->assign->request;
    CHECK(e->assign->job_id == ids[0]);
    CHECK(r && !strcmp(r->prompt_cache, "/data/prompt.safetensors") && r->steps == 4 &&
          r->frames == 22 && r->seed == 7 && r->n_output_keys == 2 &&
          strstr(r->output_keys[0], ".safetensors") && strstr(r->output_keys[1], ".json"));
    CHECK(e->assign->store_uri && !strcmp(e->assign->store_uri, "file:///tmp/store"));
    vdn__envelope__free_unpacked(e, NULL);
    CHECK(job_is(c, ids[0], "running"));

    fw_progress(&w1, a1, 1, 4);
    Vdn__StatusReply *h;
    Vdn__JobInfo *j = job_when(c, ids[0], "running", 1, &h);
    CHECK(j->nfe_done == 1 && j->nfe_total == 4 && j->worker_id && !strcmp(j->worker_id, "w1"));
    vdn_client_free(h);

    /* w1 goes silent: after 3 missed heartbeats its attempt is requeued */
    w1.alive = 0;
    fw_open(&w2, wep, "w2");
    fw_ready(&w2, "tiny", 1, 80ull << 30, 0);
    e = expect_assign(&w2, 5);
    REQUIRE(e);
    uint64_t a2 = e->assign->attempt_id;
    CHECK(e->assign->job_id == ids[0] && a2 != a1);
    vdn__envelope__free_unpacked(e, NULL);

    /* w1 comes back still running a1: told to cancel it; its RESULT and PROGRESS are refused */
    w1.alive = 1;
    fw_ready(&w1, "tiny", 1, 80ull << 30, a1);
    e = expect_cancel(&w1, a1, 3);
    CHECK(e && e->cancel->attempt_id == a1);
    if (e) vdn__envelope__free_unpacked(e, NULL);
    fw_progress(&w1, a1, 2, 4);
    e = fw_expect(&w1, VDN__ENVELOPE__PAYLOAD_ERROR, 3);
    CHECK(e && e->error->code == VDN__ERROR__CODE__STALE_ATTEMPT && e->error->attempt_id == a1);
    if (e) vdn__envelope__free_unpacked(e, NULL);
    fw_result(&w1, a1, "stale/out.safetensors");
    e = fw_expect(&w1, VDN__ENVELOPE__PAYLOAD_ERROR, 3);
    CHECK(e && e->error->code == VDN__ERROR__CODE__STALE_ATTEMPT && e->error->attempt_id == a1);
    if (e) vdn__envelope__free_unpacked(e, NULL);
    CHECK(job_is(c, ids[0], "running"));

    /* the current attempt's result counts */
    fw_progress(&w2, a2, 4, 4);
    fw_result(&w2, a2, "batches/x/out.safetensors");
    e = fw_expect(&w2, VDN__ENVELOPE__PAYLOAD_ACK, 3);
    CHECK(e && e->ack->attempt_id == a2);
    if (e) vdn__envelope__free_unpacked(e, NULL);
    j = job(c, ids[0], &h);
    CHECK(!strcmp(j->state, "done") && j->attempts == 2 && j->n_object_keys == 1 &&
          !strcmp(j->object_keys[0], "batches/x/out.safetensors"));
    vdn_client_free(h);

    /* a RESULT after done from the attempt that completed it (its ACK was lost: the worker
     * connected again) is acknowledged again, so the worker lets the snapshots go, and recorded
     * nothing: completed once, with the first RESULT's keys */
    fw_result(&w2, a2, "again.safetensors");
    e = fw_expect(&w2, VDN__ENVELOPE__PAYLOAD_ACK, 3);
    CHECK(e && e->ack->attempt_id == a2);
    if (e) vdn__envelope__free_unpacked(e, NULL);
    j = job(c, ids[0], &h);
    CHECK(!strcmp(j->state, "done") && j->n_object_keys == 1 &&
          !strcmp(j->object_keys[0], "batches/x/out.safetensors"));
    vdn_client_free(h);
    /* from any other attempt it is refused */
    fw_result(&w1, a1, "late.safetensors");
    e = fw_expect(&w1, VDN__ENVELOPE__PAYLOAD_ERROR, 3);
    CHECK(e && e->error->code == VDN__ERROR__CODE__STALE_ATTEMPT);
    if (e) vdn__envelope__free_unpacked(e, NULL);

    char err[VDN_ERR_LEN], t[32];
    snprintf(t, sizeof t, "j%llu", (unsigned long long)ids[0]);
    Vdn__LogsReply *lg = vdn_client_logs(c, t, err, sizeof err);
    REQUIRE(lg);
    int expired = 0, requeued = 0, stale = 0, done = 0;
    for (size_t i = 0; i < lg->n_events; i++) {
        expired += !strcmp(lg->events[i]->kind, "expired");
        requeued += !strcmp(lg->events[i]->kind, "requeued");
        stale += !strcmp(lg->events[i]->kind, "stale_refused");
        done += !strcmp(lg->events[i]->kind, "done");
    }
    CHECK(expired == 1 && requeued == 1 && stale >= 2 && done == 1);
    CHECK(lg->n_attempts == 2 && !strcmp(lg->attempts[0]->state, "expired") &&
          !strcmp(lg->attempts[1]->state, "done"));
    vdn_client_free(lg);
    fw_close(&w1);
    fw_close(&w2);
    fw_close(&other);
    vdn_client_close(c);
    CHECK(WIFEXITED(stop_coordinator(pid, SIGTERM)));
}

/* What the coordinator kept of the store errors and retries: attempt a5 ended on an upload,
 * a6 on nothing of the store's, the worker reported `retries`, and no other attempt has a store
 * operation (the older FAILs without one). Polled: the heartbeat is not answered. */
static void check_store_columns(const char *db, uint64_t a5, uint64_t a6, const char *worker,
                                int retries) {
    sqlite3 *dbh;
    REQUIRE(sqlite3_open_v2(db, &dbh, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    sqlite3_busy_timeout(dbh, 5000);
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT (SELECT store_op FROM attempts WHERE id=%llu), "
             "(SELECT count(*) FROM attempts WHERE id=%llu AND store_op IS NULL), "
             "(SELECT count(*) FROM attempts WHERE store_op IS NOT NULL), "
             "(SELECT store_retries FROM workers WHERE id='%s')",
             (unsigned long long)a5, (unsigned long long)a6, worker);
    int ok = 0;
    char got[200] = "";
    for (int i = 0; i < 50 && !ok; i++, sleep_s(0.1)) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(dbh, sql, -1, &st, NULL) != SQLITE_OK) continue;
        if (sqlite3_step(st) == SQLITE_ROW) {
            const char *op = (const char *)sqlite3_column_text(st, 0);
            snprintf(got, sizeof got, "a5 %s, a6 untyped %d, typed %d, retries %d",
                     op ? op : "NULL", sqlite3_column_int(st, 1), sqlite3_column_int(st, 2),
                     sqlite3_column_int(st, 3));
            ok = op && !strcmp(op, "upload") && sqlite3_column_int(st, 1) == 1 &&
                 sqlite3_column_int(st, 2) == 1 && sqlite3_column_int(st, 3) == retries;
        }
        sqlite3_finalize(st);
    }
    CHECK(ok, "store columns: %s", got);
    sqlite3_close(dbh);
}

/* FAIL handling: two budgets keeping every reason: worker faults (the machine's: an older
 * worker's retryable FAIL, a GPU fault) never use --max-attempts, only --max-worker-faults;
 * transient FAILs use --max-attempts; non-retryable fails at once; a worker that keeps failing
 * is blocklisted; retry requeues. Also GPU-count matching. */
static void test_failures(void) {
    char db[300], err[VDN_ERR_LEN];
    snprintf(db, sizeof db, "%s/b.db", h_tmp);
    pid_t pid;
    start_wf(&pid, db, "30", "2", "3", "2");
    vdn_client *c = client();
    uint64_t ids[1], ids2[1], ids3[1];
    submit(c, 1, 0, NULL, 0, ids);
    fake_worker w;
    fw_open(&w, wep, "w3");
    fw_ready(&w, "tiny", 1, 80ull << 30, 0);
    Vdn__Envelope *e = expect_assign(&w, 3);
    REQUIRE(e);
    uint64_t a1 = e->assign->attempt_id;
    vdn__envelope__free_unpacked(e, NULL);
    fw_fail(&w, a1, "out of memory (first)", 1); /* a worker fault: 1 of 2 worker faults */
    e = expect_assign(&w, 3);
    REQUIRE(e);
    uint64_t a2 = e->assign->attempt_id;
    CHECK(a2 != a1 && e->assign->job_id == ids[0]);
    vdn__envelope__free_unpacked(e, NULL);
    w.attempt = 0;
    /* a transient failure: 1 of 2 attempts (the worker fault did not count; before, this was
     * the second of 2 and failed the job) */
    fw_fail_fault(&w, a2, "store down (second)", VDN__FAIL__FAULT__TRANSIENT);
    e = expect_assign(&w, 3);
    CHECK(e, "a worker fault used up --max-attempts");
    REQUIRE(e);
    uint64_t a2b = e->assign->attempt_id;
    CHECK(e->assign->job_id == ids[0]);
    vdn__envelope__free_unpacked(e, NULL);
    w.attempt = 0;
    /* the second worker fault spends --max-worker-faults 2: failed, after 3 attempts */
    fw_fail_fault(&w, a2b, "CUDA error: an illegal memory access (third)",
                  VDN__FAIL__FAULT__WORKER);
    Vdn__StatusReply *h;
    Vdn__JobInfo *j = job_when(c, ids[0], "failed", 0, &h);
    CHECK(!strcmp(j->state, "failed") && j->attempts == 3, "%s after %d", j->state, j->attempts);
    CHECK(j->last_error && strstr(j->last_error, "(first)") && strstr(j->last_error, "(second)") &&
          strstr(j->last_error, "(third)"));
    vdn_client_free(h);
    {
        sqlite3 *dbh = NULL;
        char detail[256] = "";
        if (sqlite3_open_v2(db, &dbh, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
            sqlite3_stmt *st = NULL;
            sqlite3_prepare_v2(dbh,
                               "SELECT detail FROM events WHERE job_id=? AND kind='failed' "
                               "ORDER BY id DESC LIMIT 1",
                               -1, &st, NULL);
            sqlite3_bind_int64(st, 1, (sqlite3_int64)ids[0]);
            if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
                snprintf(detail, sizeof detail, "%s", sqlite3_column_text(st, 0));
            sqlite3_finalize(st);
        }
        sqlite3_close(dbh);
        CHECK(strstr(detail, "2 of 2 worker faults") && strstr(detail, "1 of 2 attempts"),
              "failed event: %s", detail);
    }

    /* non-retryable: failed after one attempt */
    submit(c, 1, 0, NULL, 0, ids2);
    e = expect_assign(&w, 3);
    REQUIRE(e);
    uint64_t a3 = e->assign->attempt_id;
    vdn__envelope__free_unpacked(e, NULL);
    w.attempt = 0;
    fw_fail(&w, a3, "prompt cache is corrupt", 0);
    j = job_when(c, ids2[0], "failed", 0, &h);
    CHECK(!strcmp(j->state, "failed") && j->attempts == 1);
    vdn_client_free(h);

    /* the job's fault did not count against w3: it takes the next job at once */
    submit(c, 1, 0, NULL, 0, ids3);
    e = expect_assign(&w, 3);
    REQUIRE(e);
    uint64_t a4 = e->assign->attempt_id;
    CHECK(e->assign->job_id == ids3[0]);
    vdn__envelope__free_unpacked(e, NULL);
    w.attempt = 0;
    /* a third worker fault in the job's class (checkpoint any, vdn, its size): w3 gets no more
     * of that class, but is not blocked from everything */
    fw_fail_fault(&w, a4, "CUDA error: an illegal memory access", VDN__FAIL__FAULT__WORKER);
    e = expect_assign(&w, 1.0);
    CHECK(e == NULL, "a job of the blocked class was assigned");
    if (e) vdn__envelope__free_unpacked(e, NULL);
    Vdn__WorkersReply *wr = vdn_client_workers(c, err, sizeof err);
    REQUIRE(wr && wr->n_workers == 1);
    CHECK(strcmp(wr->workers[0]->state, "blocked") && wr->workers[0]->n_blocked_classes == 1,
          "state %s, %zu blocked classes", wr->workers[0]->state,
          wr->workers[0]->n_blocked_classes);
    if (wr->workers[0]->n_blocked_classes)
        CHECK(strstr(wr->workers[0]->blocked_classes[0], "*/vdn/2^"), "class %s",
              wr->workers[0]->blocked_classes[0]);
    vdn_client_free(wr);
    /* a job of another class (it names the checkpoint) runs on w3 at once */
    uint64_t other[1];
    submit(c, 1, 0, "tiny", 0, other);
    e = expect_assign(&w, 3);
    REQUIRE(e);
    uint64_t a5 = e->assign->attempt_id;
    CHECK(e->assign->job_id == other[0]);
    vdn__envelope__free_unpacked(e, NULL);
    w.attempt = 0;
    /* a transient failure (the store) counts for nobody: the job comes straight back; the
     * store operation it came from is kept with the attempt */
    fw_fail_store(&w, a5, "upload failed: store unreachable", VDN__FAIL__STORE_OP__UPLOAD);
    e = expect_assign(&w, 3);
    CHECK(e && e->assign->job_id == other[0] && e->assign->attempt_id != a5);
    uint64_t a6 = e ? e->assign->attempt_id : 0;
    if (e) vdn__envelope__free_unpacked(e, NULL);
    /* a transient failure that names the store in words but carries no store_op (an older
     * worker, or not the store's): not a store error */
    fw_fail_fault(&w, a6, "download of the store's prompt failed", VDN__FAIL__FAULT__TRANSIENT);
    e = expect_assign(&w, 3);
    if (e) vdn__envelope__free_unpacked(e, NULL);
    fw_heartbeat_retries(&w, 7);
    check_store_columns(db, a5, a6, "w3", 7);

    /* a two-GPU job no registered worker could take (w3 has one GPU) is refused at submit,
     * naming the field; --allow-wait queues it and its status says why it waits */
    {
        vdn_job_spec s2 = {0};
        s2.prompt_cache = "/data/prompt.safetensors";
        s2.gpus = 2;
        uint64_t b2, id2[1];
        CHECK(vdn_client_submit(c, &s2, 1, NULL, 0, NULL, &b2, id2, err, sizeof err) == -1 &&
                  vdn_client_error_code(c) == VDN__ERROR__CODE__INVALID &&
                  strstr(err, "job 1 of the batch: field 'gpus': no worker with 2 GPUs") &&
                  strstr(err, "--allow-wait"),
              "a 2-GPU job on a 1-GPU farm: %s", err);
    }
    uint64_t big[1];
    submit_f(c, 1, 10, NULL, 2, VDN_SUBMIT_ALLOW_WAIT, big);
    char why[512];
    fake_worker one, two;
    fw_open(&one, wep, "w-1gpu");
    fw_ready(&one, "tiny", 1, 80ull << 30, 0);
    e = expect_assign(&one, 3);
    CHECK(e &&
          e->assign->job_id == ids3[0]); /* the 1-GPU job, although the 2-GPU one ranks higher */
    if (e) vdn__envelope__free_unpacked(e, NULL);
    CHECK(waits_for(c, big[0], "no worker with 2 GPUs (the most any has in service: 1)", &one, why,
                    sizeof why),
          "waiting: '%s'", why);
    fw_open(&two, wep, "w-2gpu");
    fw_ready(&two, "tiny", 2, 80ull << 30, 0);
    e = expect_assign(&two, 3);
    CHECK(e && e->assign->job_id == big[0]);
    if (e) vdn__envelope__free_unpacked(e, NULL);

    /* a job needing more GPU memory than a worker's smallest GPU waits for a bigger one */
    {
        vdn_job_spec s = {0};
        s.prompt_cache = "/data/prompt.safetensors";
        s.min_gpu_memory = 100ull << 30;
        uint64_t b, mem[1];
        CHECK(vdn_client_submit(c, &s, 1, NULL, 50, NULL, &b, mem, err, sizeof err) == -1 &&
                  strstr(err, "field 'min_gpu_memory'"),
              "%s", err);
        CHECK(vdn_client_submit_flags(c, &s, 1, NULL, 50, NULL, VDN_SUBMIT_ALLOW_WAIT, &b, mem, err,
                                      sizeof err) == 0);

        fake_worker small, large;
        fw_open(&small, wep, "w-80g");
        fw_ready(&small, "tiny", 1, 80ull << 30, 0);
        e = expect_assign(&small, 0.8);
        CHECK(e == NULL || e->assign->job_id != mem[0]);
        if (e) vdn__envelope__free_unpacked(e, NULL);
        CHECK(waits_for(c, mem[0], "no worker with 1 GPU of at least 100.0 GiB (at most 0)", &small,
                        why, sizeof why),
              "waiting: '%s'", why);
        fw_open(&large, wep, "w-141g");
        fw_ready(&large, "tiny", 1, 141ull << 30, 0);
        e = expect_assign(&large, 3);
        CHECK(e && e->assign->job_id == mem[0]);
        if (e) vdn__envelope__free_unpacked(e, NULL);
        fw_close(&small);
        fw_close(&large);
    }

    /* retry: the failed jobs are queued again with a fresh budget */
    char t[32];
    int n = -1;
    snprintf(t, sizeof t, "j%llu", (unsigned long long)ids[0]);
    CHECK(vdn_client_retry(c, t, &n, err, sizeof err) == 0 && n == 1);
    CHECK(vdn_client_retry(c, t, &n, err, sizeof err) == 0 && n == 0); /* no longer failed */
    CHECK(vdn_client_retry(c, "j999999", &n, err, sizeof err) == -1 &&
          vdn_client_error_code(c) == VDN__ERROR__CODE__NOT_FOUND && strstr(err, "j999999"));
    fw_close(&w);
    fw_close(&one);
    fw_close(&two);
    vdn_client_close(c);
    stop_coordinator(pid, SIGTERM);
}

/* priorities, cancel reaching a running job, drain and undo */
static void test_cancel_drain(void) {
    char db[300], err[VDN_ERR_LEN];
    snprintf(db, sizeof db, "%s/c.db", h_tmp);
    pid_t pid;
    start(&pid, db, "30", "3", "10");
    vdn_client *c = client();
    uint64_t low[2], high[1];
    submit(c, 2, 0, NULL, 0, low);
    submit(c, 1, 5, NULL, 0, high);
    fake_worker w;
    fw_open(&w, wep, "w5");
    fw_ready(&w, "tiny", 1, 80ull << 30, 0);
    Vdn__Envelope *e = expect_assign(&w, 3);
    REQUIRE(e);
    CHECK(e->assign->job_id == high[0]); /* priority first */
    uint64_t a = e->assign->attempt_id;
    vdn__envelope__free_unpacked(e, NULL);
    /* the queued ones say why they wait, and how many are ahead of them */
    char why[512];
    CHECK(waits_for(c, low[1], "all 1 worker busy; 1 ahead", &w, why, sizeof why), "'%s'", why);
    CHECK(waits_for(c, low[0], "next in line: GPUs of w5 held back for it", &w, why, sizeof why) &&
              !strstr(why, "ahead"),
          "'%s'", why);
    char t[32];
    snprintf(t, sizeof t, "j%llu", (unsigned long long)high[0]);
    int n = 0;
    CHECK(vdn_client_cancel(c, t, &n, err, sizeof err) == 0 && n == 1);
    e = expect_cancel(&w, a, 3);
    CHECK(e && e->cancel->attempt_id == a);
    if (e) vdn__envelope__free_unpacked(e, NULL);
    CHECK(job_is(c, high[0], "cancelled"));
    /* the worker stops and says so; then it gets the next job (oldest of equal priority) */
    w.attempt = 0;
    fw_fail(&w, a, "cancelled", 0);
    e = expect_assign(&w, 3);
    REQUIRE(e);
    CHECK(e->assign->job_id == low[0]);
    uint64_t a2 = e->assign->attempt_id;
    vdn__envelope__free_unpacked(e, NULL);
    /* drain: finishes this job, takes no more */
    CHECK(vdn_client_drain(c, "w5", 0, err, sizeof err) == 0);
    CHECK(vdn_client_drain(c, "nobody", 0, err, sizeof err) == -1 &&
          vdn_client_error_code(c) == VDN__ERROR__CODE__NOT_FOUND);
    fw_result(&w, a2, "k");
    w.attempt = 0;
    CHECK(waits_for(c, low[1], "no worker that can take it takes work now (w5 draining)", &w, why,
                    sizeof why),
          "'%s'", why);
    e = expect_assign(&w, 1.0);
    CHECK(e == NULL);
    if (e) vdn__envelope__free_unpacked(e, NULL);
    CHECK(job_is(c, low[0], "done") && job_is(c, low[1], "queued"));
    Vdn__WorkersReply *wr = vdn_client_workers(c, err, sizeof err);
    CHECK(wr && wr->n_workers == 1 && !strcmp(wr->workers[0]->state, "drained"));
    vdn_client_free(wr);
    CHECK(vdn_client_drain(c, "w5", 1, err, sizeof err) == 0);
    e = expect_assign(&w, 3);
    CHECK(e && e->assign->job_id == low[1]);
    if (e) vdn__envelope__free_unpacked(e, NULL);
    /* cancel a whole batch: the queued-or-running job counts */
    char b[32];
    Vdn__StatusReply *h;
    job(c, low[1], &h);
    snprintf(b, sizeof b, "b%llu", (unsigned long long)h->jobs[0]->batch_id);
    vdn_client_free(h);
    CHECK(vdn_client_cancel(c, b, &n, err, sizeof err) == 0 && n == 1);
    fw_close(&w);
    vdn_client_close(c);
    stop_coordinator(pid, SIGTERM);
}

/* A worker that says it drains (SIGTERM: HEARTBEAT or READY with draining) finishes its job and
 * is handed nothing more, though jobs wait; `vdn drain` is not involved and nothing is stored. */
static void test_self_drain(void) {
    char db[300], err[VDN_ERR_LEN];
    snprintf(db, sizeof db, "%s/sd.db", h_tmp);
    pid_t pid;
    start(&pid, db, "30", "3", "10");
    vdn_client *c = client();
    uint64_t ids[3];
    submit(c, 3, 0, NULL, 0, ids);
    fake_worker w;
    fw_open(&w, wep, "w-term");
    fw_ready(&w, "tiny", 1, 80ull << 30, 0);
    Vdn__Envelope *e = expect_assign(&w, 3);
    REQUIRE(e);
    uint64_t a = e->assign->attempt_id;
    vdn__envelope__free_unpacked(e, NULL);
    w.draining = 1;
    fw_heartbeat(&w, a);
    /* the heartbeat and this query travel on different sockets: wait for it to count */
    int draining = 0;
    for (double end = vdn_now() + 5; !draining && vdn_now() < end; sleep_s(0.05)) {
        Vdn__WorkersReply *wr = vdn_client_workers(c, err, sizeof err);
        draining = wr && wr->n_workers == 1 && !strcmp(wr->workers[0]->state, "draining");
        vdn_client_free(wr);
    }
    CHECK(draining);
    fw_result(&w, a, "drain/out.safetensors");
    e = fw_expect(&w, VDN__ENVELOPE__PAYLOAD_ACK, 3);
    CHECK(e && e->ack->attempt_id == a);
    if (e) vdn__envelope__free_unpacked(e, NULL);
    w.attempt = 0;
    e = expect_assign(&w, 1.0);
    CHECK(e == NULL); /* two jobs are queued, but it is leaving */
    if (e) vdn__envelope__free_unpacked(e, NULL);
    CHECK(job_is(c, ids[0], "done") && job_is(c, ids[1], "queued"));
    Vdn__WorkersReply *wr = vdn_client_workers(c, err, sizeof err);
    CHECK(wr && wr->n_workers == 1 && !strcmp(wr->workers[0]->state, "drained"));
    vdn_client_free(wr);
    /* re-registering while still shutting down: READY says so, still nothing */
    Vdn__Ready r = VDN__READY__INIT;
    r.worker_id = w.id;
    r.checkpoint = "tiny";
    r.has_draining = 1, r.draining = 1;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_READY;
    env.ready = &r;
    fw_send(&w, &env);
    e = expect_assign(&w, 1.0);
    CHECK(e == NULL);
    if (e) vdn__envelope__free_unpacked(e, NULL);
    fw_close(&w);
    /* the same worker id restarted (a new process, not draining) takes work again: the flag
     * was the old process's, never stored as a `vdn drain` */
    fake_worker w2;
    fw_open(&w2, wep, "w-term");
    fw_ready(&w2, "tiny", 1, 80ull << 30, 0);
    e = expect_assign(&w2, 3);
    CHECK(e && e->assign->job_id == ids[1]);
    if (e) vdn__envelope__free_unpacked(e, NULL);
    fw_close(&w2);
    vdn_client_close(c);
    stop_coordinator(pid, SIGTERM);
}

/* malformed and wrong-version frames on both endpoints: clear ERROR, service continues */
static void test_malformed(void) {
    char db[300], err[VDN_ERR_LEN];
    snprintf(db, sizeof db, "%s/d.db", h_tmp);
    pid_t pid;
    start(&pid, db, "30", "3", "10");
    fake_worker w, cl;
    fw_open(&w, wep, "w-raw");
    w.alive = 0;
    fw_open(&cl, cep, "client-raw");
    cl.alive = 0;
    static const struct {
        const char *bytes;
        size_t len;
        int code;
    } bad[] = {
        {"\x08\x02\x5a\x00", 4, VDN__ERROR__CODE__BAD_VERSION},   /* version 2 heartbeat */
        {"\x5a\x00", 2, VDN__ERROR__CODE__BAD_VERSION},           /* no version */
        {"\x08", 1, VDN__ERROR__CODE__MALFORMED},                 /* truncated varint */
        {"\x08\x01\x52\x10\x0a", 5, VDN__ERROR__CODE__MALFORMED}, /* length past the end */
        {"\x08\x01", 2, VDN__ERROR__CODE__MALFORMED},             /* no payload */
        {"GET / HTTP/1.1\r\n\r\n", 18, VDN__ERROR__CODE__MALFORMED},
    };
    fake_worker *socks[2] = {&w, &cl};
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
            fw_send_raw(socks[s], bad[i].bytes, bad[i].len);
            Vdn__Envelope *e = fw_recv(socks[s], 3);
            CHECK(e && e->payload_case == VDN__ENVELOPE__PAYLOAD_ERROR &&
                  (int)e->error->code == bad[i].code && e->error->message &&
                  strlen(e->error->message) > 10);
            if (e && bad[i].code == VDN__ERROR__CODE__BAD_VERSION && bad[i].len == 4)
                CHECK(strstr(e->error->message, "protocol_version 2") != NULL);
            if (e) vdn__envelope__free_unpacked(e, NULL);
        }
    /* an oversized frame: libzmq drops that connection, the coordinator carries on */
    {
        fake_worker big;
        fw_open(&big, cep, "client-big");
        big.alive = 0;
        size_t n = (size_t)VDN_MAX_FRAME + 1024;
        char *blob = vdn_xcalloc(n, 1);
        blob[0] = 0x08, blob[1] = 0x01;
        fw_send_raw(&big, blob, n);
        free(blob);
        sleep_s(0.3);
        fw_close(&big);
    }
    /* messages on the wrong endpoint, and before READY */
    fw_heartbeat(&w, 0);
    Vdn__Envelope *e = fw_recv(&w, 3);
    CHECK(e && e->payload_case == VDN__ENVELOPE__PAYLOAD_ERROR &&
          e->error->code == VDN__ERROR__CODE__UNKNOWN_WORKER);
    if (e) vdn__envelope__free_unpacked(e, NULL);
    fw_ready(&cl, "tiny", 1, 1, 0);
    e = fw_recv(&cl, 3);
    CHECK(e && e->payload_case == VDN__ENVELOPE__PAYLOAD_ERROR &&
          e->error->code == VDN__ERROR__CODE__UNEXPECTED);
    if (e) vdn__envelope__free_unpacked(e, NULL);
    /* a READY without a worker id is refused with the field named */
    Vdn__Ready r = VDN__READY__INIT;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_READY;
    env.ready = &r;
    fw_send(&w, &env);
    e = fw_recv(&w, 3);
    CHECK(e && e->payload_case == VDN__ENVELOPE__PAYLOAD_ERROR &&
          e->error->code == VDN__ERROR__CODE__INVALID && strstr(e->error->message, "worker_id"));
    if (e) vdn__envelope__free_unpacked(e, NULL);
    /* an invalid job over the wire is refused whole, each problem named */
    vdn_client *c = client();
    vdn_job_spec s[2];
    memset(s, 0, sizeof s);
    s[0].prompt_cache = "/p";
    s[1].prompt_cache = NULL;
    s[1].height = 65;
    s[1].variant = "bogus";
    uint64_t batch;
    CHECK(vdn_client_submit(c, s, 2, NULL, 0, NULL, &batch, NULL, err, sizeof err) == -1);
    CHECK(vdn_client_error_code(c) == VDN__ERROR__CODE__INVALID && strstr(err, "job 2") &&
          strstr(err, "prompt_cache") && strstr(err, "height") && strstr(err, "variant"));
    Vdn__ListReply *l = vdn_client_list(c, NULL, 0, err, sizeof err);
    CHECK(l && l->n_batches == 0); /* nothing submitted */
    vdn_client_free(l);
    CHECK(vdn_client_status(c, "b77", err, sizeof err) == NULL &&
          vdn_client_error_code(c) == VDN__ERROR__CODE__NOT_FOUND);
    /* a REQ socket (with its empty delimiter frame) is served as well */
    void *req = zmq_socket(cl.ctx, ZMQ_REQ);
    int zero = 0;
    zmq_setsockopt(req, ZMQ_LINGER, &zero, sizeof zero);
    REQUIRE(zmq_connect(req, cep) == 0);
    Vdn__WorkersRequest wq = VDN__WORKERS_REQUEST__INIT;
    Vdn__Envelope q = VDN__ENVELOPE__INIT;
    q.payload_case = VDN__ENVELOPE__PAYLOAD_WORKERS;
    q.workers = &wq;
    CHECK(vdn_wire_send(req, NULL, 0, &q, err, sizeof err) == 0);
    zmq_pollitem_t it = {req, 0, ZMQ_POLLIN, 0};
    CHECK(zmq_poll(&it, 1, 3000) == 1);
    char buf[4096];
    int got = zmq_recv(req, buf, sizeof buf, ZMQ_DONTWAIT);
    int code;
    e = got > 0 ? vdn_wire_decode(buf, (size_t)got, &code, err, sizeof err) : NULL;
    CHECK(e && e->payload_case == VDN__ENVELOPE__PAYLOAD_WORKERS_REPLY);
    if (e) vdn__envelope__free_unpacked(e, NULL);
    zmq_close(req);
    vdn_client_close(c);
    fw_close(&w);
    fw_close(&cl);
    kill(pid, 0);
    CHECK(kill(pid, 0) == 0); /* still running after all that */
    stop_coordinator(pid, SIGTERM);
}

/* restart: a killed coordinator resumes from the database; a worker that reconnects with its
 * still-current attempt finishes it (completed once); an attempt whose lease passed while the
 * coordinator was down is requeued with a new attempt id. */
static void test_restart(void) {
    char db[300];
    snprintf(db, sizeof db, "%s/e.db", h_tmp);
    pid_t pid;
    /* run 1 and 2 hold long leases, so a slow restart on a loaded machine cannot expire a1 */
    start(&pid, db, "10", "3", "10");
    vdn_client *c = client();
    uint64_t ids[2];
    submit(c, 2, 0, NULL, 0, ids);
    fake_worker w;
    fw_open(&w, wep, "w6");
    fw_ready(&w, "tiny", 1, 80ull << 30, 0);
    Vdn__Envelope *e = expect_assign(&w, 3);
    REQUIRE(e);
    uint64_t a1 = e->assign->attempt_id;
    vdn__envelope__free_unpacked(e, NULL);
    stop_coordinator(pid, SIGKILL);
    start(&pid, db, "1.5", "3", "10"); /* a2, assigned by this run, gets a short lease */
    /* the worker's heartbeats now reach a coordinator that does not know it */
    e = fw_expect(&w, VDN__ENVELOPE__PAYLOAD_ERROR, 5);
    CHECK(e && e->error->code == VDN__ERROR__CODE__UNKNOWN_WORKER);
    if (e) vdn__envelope__free_unpacked(e, NULL);
    fw_ready(&w, "tiny", 1, 80ull << 30, a1);
    e = fw_recv(&w, 0.8);
    CHECK(e == NULL || e->payload_case != VDN__ENVELOPE__PAYLOAD_CANCEL);
    if (e) vdn__envelope__free_unpacked(e, NULL);
    fw_result(&w, a1, "restart/out.safetensors");
    w.attempt =
        0; /* our heartbeats stop naming a1 (one naming it after the RESULT draws a CANCEL) */
    e = fw_expect(&w, VDN__ENVELOPE__PAYLOAD_ACK, 3);
    CHECK(e && e->ack->attempt_id == a1);
    if (e) vdn__envelope__free_unpacked(e, NULL);
    /* every PROGRESS of a1 was lost with the first coordinator, and its record names no NFE
     * count: done still reads all NFEs, counted from the request's 4 steps (not 0/0) */
    Vdn__StatusReply *h;
    Vdn__JobInfo *jd = job(c, ids[0], &h);
    CHECK(!strcmp(jd->state, "done") && jd->nfe_done == 4 && jd->nfe_total == 4);
    vdn_client_free(h);
    w.attempt = 0;
    e = expect_assign(&w, 3);
    REQUIRE(e);
    CHECK(e->assign->job_id == ids[1]);
    uint64_t a2 = e->assign->attempt_id;
    vdn__envelope__free_unpacked(e, NULL);
    vdn_client_close(c);
    /* down longer than the lease */
    stop_coordinator(pid, SIGKILL);
    w.alive = 0;
    sleep_s(2.0);
    start(&pid, db, "10", "3", "10");
    w.alive = 1;
    c = client();
    CHECK(job_is(c, ids[1], "queued"));
    fw_ready(&w, "tiny", 1, 80ull << 30, a2);
    e = expect_cancel(&w, a2, 3);
    CHECK(e && e->cancel->attempt_id == a2);
    if (e) vdn__envelope__free_unpacked(e, NULL);
    w.attempt = 0;
    fw_fail(&w, a2, "cancelled", 0); /* stale: refused, and the worker is free */
    e = expect_assign(&w, 3);
    REQUIRE(e);
    uint64_t a3 = e->assign->attempt_id;
    CHECK(e->assign->job_id == ids[1] && a3 != a2);
    vdn__envelope__free_unpacked(e, NULL);
    /* one PROGRESS got through, then the RESULT: the run record's NFE count and time win */
    fw_progress(&w, a3, 1, 4);
    fw_result_record(&w, a3, "restart/out2.safetensors",
                     "{\"sampler\": {\"nfe\": 4}, \"timing\": {\"total_seconds\": 2.5}}");
    e = fw_expect(&w, VDN__ENVELOPE__PAYLOAD_ACK, 3);
    CHECK(e != NULL);
    if (e) vdn__envelope__free_unpacked(e, NULL);
    jd = job(c, ids[1], &h);
    CHECK(!strcmp(jd->state, "done") && jd->nfe_done == 4 && jd->nfe_total == 4 &&
          jd->elapsed_seconds == 2.5);
    vdn_client_free(h);
    CHECK(job_is(c, ids[0], "done") && job_is(c, ids[1], "done"));
    vdn_client_close(c);
    fw_close(&w);
    stop_coordinator(pid, SIGTERM);

    /* offline status straight from the database, as JSON, checked against SQLite itself */
    char out[65536];
    CHECK(run_cli(out, sizeof out, "status --db %s --json", db) == 0);
    cJSON *j = cJSON_Parse(out);
    CHECK(j != NULL);
    const cJSON *b = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "batches"), 0);
    CHECK(b && cJSON_GetObjectItem(b, "n_done")->valueint == 2 &&
          !strcmp(cJSON_GetObjectItem(b, "state")->valuestring, "done"));
    cJSON_Delete(j);
    char t[32];
    snprintf(t, sizeof t, "j%llu", (unsigned long long)ids[0]);
    CHECK(run_cli(out, sizeof out, "status --db %s %s", db, t) == 0 && strstr(out, "done") &&
          strstr(out, "restart/out.safetensors"));
    /* exactly one 'done' event and one done attempt per job: nothing completed twice */
    sqlite3 *dbh;
    REQUIRE(sqlite3_open_v2(db, &dbh, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    sqlite3_stmt *st;
    REQUIRE(sqlite3_prepare_v2(dbh,
                               "SELECT (SELECT count(*) FROM events WHERE kind='done'), "
                               "(SELECT count(*) FROM attempts WHERE state='done'), "
                               "(SELECT count(*) FROM attempts WHERE state='running')",
                               -1, &st, NULL) == SQLITE_OK);
    REQUIRE(sqlite3_step(st) == SQLITE_ROW);
    CHECK(sqlite3_column_int(st, 0) == 2 && sqlite3_column_int(st, 1) == 2 &&
          sqlite3_column_int(st, 2) == 0);
    sqlite3_finalize(st);
    sqlite3_close(dbh);
    CHECK(run_cli(out, sizeof out, "status --db %s/missing.db", h_tmp) == 6 &&
          strstr(out, "missing.db"));
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_coord PATH/TO/vdn-coord-test\n");
        return 2;
    }
    harness_init(argv[1]);
    snprintf(wep, sizeof wep, "tcp://127.0.0.1:%d", h_port(0));
    snprintf(cep, sizeof cep, "tcp://127.0.0.1:%d", h_port(1));
    double t0 = vdn_now();
    test_lease_and_fencing();
    fprintf(stderr, "lease/fencing done (%.1f s)\n", vdn_now() - t0);
    test_failures();
    fprintf(stderr, "failures done (%.1f s)\n", vdn_now() - t0);
    test_cancel_drain();
    fprintf(stderr, "cancel/drain done (%.1f s)\n", vdn_now() - t0);
    test_self_drain();
    fprintf(stderr, "self drain done (%.1f s)\n", vdn_now() - t0);
    test_malformed();
    fprintf(stderr, "malformed done (%.1f s)\n", vdn_now() - t0);
    test_restart();
    fprintf(stderr, "restart done (%.1f s)\n", vdn_now() - t0);
    if (failures) {
        harness_dump_log();
        fprintf(stderr, "%d checks failed\n", failures);
    }
    harness_cleanup();
    if (failures) return 1;
    printf("coordinator: all checks passed (%.1f s)\n", vdn_now() - t0);
    return 0;
}
