/* Hung renders and timeouts, with fake workers on a real coordinator (--stall-seconds 1
 * --stall-factor 1, leases of 30 s that heartbeats would otherwise keep renewing):
 * - a job past its request's "timeout" is stopped (CANCEL) and fails as the job's fault;
 * - a render that stops progressing on a CPU worker (the device cannot hang) is stopped and its
 *   job fails as the job's fault, the worker's standing untouched;
 * - the same on a GPU worker without evidence that the GPU answers: the worker's fault, the job
 *   requeued; when it then stalls on a second GPU worker too, the job's (it stalls wherever it
 *   runs);
 * - a render that keeps progressing is never stopped, however long it runs.
 * Usage: test_stall PATH/TO/vdn-coord-test */
#include <sqlite3.h>

#include "client.h"
#include "harness.h"

static char wep[128], cep[128], db[300];

static uint64_t submit(vdn_client *c, int timeout) {
    vdn_job_spec s;
    memset(&s, 0, sizeof s);
    s.prompt_cache = "/data/prompt.safetensors";
    s.steps = 4, s.frames = 22, s.height = 64, s.width = 64;
    s.timeout = timeout;
    uint64_t batch = 0, ids[1] = {0};
    char err[VDN_ERR_LEN];
    int rc = vdn_client_submit(c, &s, 1, "t", 0, "stall", &batch, ids, err, sizeof err);
    if (rc) fprintf(stderr, "submit: %s\n", err);
    REQUIRE(rc == 0);
    return ids[0];
}

/* The job's state and last error, and the fault of its newest attempt. */
static void job_row(uint64_t job, char *state, char *error, char *fault) {
    sqlite3 *h;
    REQUIRE(sqlite3_open(db, &h) == SQLITE_OK);
    sqlite3_busy_timeout(h, 2000);
    sqlite3_stmt *st;
    REQUIRE(sqlite3_prepare_v2(h,
                               "SELECT j.state, coalesce(j.last_error,''), coalesce((SELECT "
                               "fault FROM attempts WHERE job_id=j.id ORDER BY id DESC LIMIT 1),"
                               "'') FROM jobs j WHERE j.id=?",
                               -1, &st, NULL) == SQLITE_OK);
    sqlite3_bind_int64(st, 1, (sqlite3_int64)job);
    state[0] = error[0] = fault[0] = 0;
    if (sqlite3_step(st) == SQLITE_ROW) {
        snprintf(state, 16, "%s", sqlite3_column_text(st, 0));
        snprintf(error, 1024, "%s", sqlite3_column_text(st, 1));
        snprintf(fault, 16, "%s", sqlite3_column_text(st, 2));
    }
    sqlite3_finalize(st);
    sqlite3_close(h);
}

static int64_t q_int(const char *sql) {
    sqlite3 *h;
    REQUIRE(sqlite3_open(db, &h) == SQLITE_OK);
    sqlite3_busy_timeout(h, 2000);
    sqlite3_stmt *st;
    int64_t v = -1;
    if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(h);
    return v;
}

/* Assigned its job, the worker renders it: `progress` NFE reports every 0.2 s (0 = none after
 * the first), while heartbeating; returns the CANCEL that came within `wait` s, or NULL. */
static Vdn__Envelope *render(fake_worker *w, int first_progress, int keep_progressing,
                             double wait) {
    Vdn__Envelope *e = fw_expect(w, VDN__ENVELOPE__PAYLOAD_ASSIGN, 5);
    REQUIRE(e);
    w->attempt = e->assign->attempt_id;
    vdn__envelope__free_unpacked(e, NULL);
    if (first_progress) fw_progress(w, w->attempt, 1, 100);
    double end = vdn_now() + wait;
    for (int n = 2; vdn_now() < end; n++) {
        e = fw_expect(w, VDN__ENVELOPE__PAYLOAD_CANCEL, 0.2);
        if (e) return e;
        if (keep_progressing) fw_progress(w, w->attempt, n, 100);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_stall PATH/TO/vdn-coord-test\n");
        return 2;
    }
    harness_init(argv[1]);
    snprintf(wep, sizeof wep, "tcp://127.0.0.1:%d", h_port(0));
    snprintf(cep, sizeof cep, "tcp://127.0.0.1:%d", h_port(1));
    snprintf(db, sizeof db, "%s/s.db", h_tmp);
    double t0 = vdn_now();
    pid_t pid = start_coordinator("--db", db, "--bind", wep, "--client-bind", cep,
                                  "--lease-seconds", "30", "--heartbeat-seconds", "0.3",
                                  "--stall-seconds", "1", "--stall-factor", "1", NULL);
    vdn_client_opts o = {cep, NULL, NULL, 3000, NULL};
    char err[VDN_ERR_LEN], state[16], error[1024], fault[16];
    vdn_client *c = vdn_client_open(&o, err, sizeof err);
    REQUIRE(c);

    /* a CPU worker: the timeout, a stall, a job that keeps progressing */
    fake_worker cpu;
    fw_open(&cpu, wep, "cpu-w");
    cpu.backend = "cpu";
    fw_ready(&cpu, "tiny", 1, 80ull << 30, 0);
    uint64_t j = submit(c, 1);
    Vdn__Envelope *e = render(&cpu, 1, 1, 4); /* progressing, but past 1 s */
    CHECK(e != NULL && strstr(e->cancel->reason, "timeout"), "no CANCEL for the timeout");
    if (e) vdn__envelope__free_unpacked(e, NULL);
    fw_fail_fault(&cpu, cpu.attempt, "cancelled", VDN__FAIL__FAULT__TRANSIENT);
    cpu.attempt = 0;
    sleep_s(0.3);
    job_row(j, state, error, fault);
    CHECK(!strcmp(state, "failed") && strstr(error, "ran past its timeout") &&
              !strcmp(fault, "job"),
          "timeout: %s, %s, fault %s", state, error, fault);

    j = submit(c, 0);
    e = render(&cpu, 1, 0, 4); /* one NFE, then nothing while it heartbeats */
    CHECK(e != NULL && strstr(e->cancel->reason, "stalled"), "no CANCEL for the stall");
    if (e) vdn__envelope__free_unpacked(e, NULL);
    fw_fail_fault(&cpu, cpu.attempt, "cancelled", VDN__FAIL__FAULT__TRANSIENT);
    cpu.attempt = 0;
    sleep_s(0.3);
    job_row(j, state, error, fault);
    CHECK(!strcmp(state, "failed") && strstr(error, "stalled: no progress") &&
              strstr(error, "cannot hang") && !strcmp(fault, "job"),
          "CPU stall: %s, %s, fault %s", state, error, fault);
    CHECK(q_int("SELECT failures FROM workers WHERE id='cpu-w'") == 0,
          "a stuck render counted against the CPU worker");

    j = submit(c, 0);
    e = render(&cpu, 1, 1, 3); /* 3 s of steady progress against a 1 s stall limit */
    CHECK(e == NULL, "a progressing render was stopped: %s", e ? e->cancel->reason : "");
    if (e) vdn__envelope__free_unpacked(e, NULL);
    job_row(j, state, error, fault);
    CHECK(!strcmp(state, "running"), "the progressing job is %s", state);
    fw_result(&cpu, cpu.attempt, "batches/x/out.safetensors");
    cpu.attempt = 0;
    e = fw_expect(&cpu, VDN__ENVELOPE__PAYLOAD_ACK, 3);
    if (e) vdn__envelope__free_unpacked(e, NULL);
    cpu.alive = 0;
    fw_close(&cpu);

    /* a GPU worker without evidence that its GPU answers: the worker's fault, requeued */
    fake_worker gpu;
    fw_open(&gpu, wep, "gpu-w");
    gpu.backend = "cuda";
    fw_ready(&gpu, "tiny", 1, 80ull << 30, 0);
    j = submit(c, 0);
    e = render(&gpu, 1, 0, 4);
    CHECK(e != NULL && strstr(e->cancel->reason, "stalled"), "no CANCEL for the GPU stall");
    if (e) vdn__envelope__free_unpacked(e, NULL);
    fw_fail_fault(&gpu, gpu.attempt, "cancelled", VDN__FAIL__FAULT__TRANSIENT);
    gpu.attempt = 0;
    sleep_s(0.3);
    job_row(j, state, error, fault);
    char sql[200];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM attempts WHERE job_id=%llu AND fault='worker' AND reason "
             "LIKE 'stalled:%%may not%%'",
             (unsigned long long)j);
    CHECK(strcmp(state, "failed") && q_int(sql) == 1, "GPU stall: job %s, %s", state, error);
    /* requeued; the first worker leaves, the job goes to a second GPU worker, stalls there too,
     * and now it is the job's */
    fake_worker gpu2;
    gpu.alive = 0;
    fw_close(&gpu);
    fw_open(&gpu2, wep, "gpu-w2");
    gpu2.backend = "cuda";
    fw_ready(&gpu2, "tiny", 1, 80ull << 30, 0);
    e = render(&gpu2, 1, 0, 6);
    CHECK(e != NULL && strstr(e->cancel->reason, "stalled"), "no CANCEL for the second stall");
    if (e) vdn__envelope__free_unpacked(e, NULL);
    fw_fail_fault(&gpu2, gpu2.attempt, "cancelled", VDN__FAIL__FAULT__TRANSIENT);
    gpu2.attempt = 0;
    sleep_s(0.3);
    job_row(j, state, error, fault);
    CHECK(!strcmp(state, "failed") && strstr(error, "stalls wherever it runs") &&
              !strcmp(fault, "job"),
          "second GPU stall: %s, %s, fault %s", state, error, fault);
    gpu2.alive = 0;
    fw_close(&gpu2);

    vdn_client_close(c);
    stop_coordinator(pid, SIGTERM);
    if (failures) harness_dump_log();
    harness_cleanup();
    if (failures) return 1;
    printf("stalls and timeouts: all checks passed (%.1f s)\n", vdn_now() - t0);
    return 0;
}
