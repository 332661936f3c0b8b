/* Crash blame, with fake workers on a real coordinator (docs/cluster.md "Crash blame"): a FAIL
 * with fault CRASH (the renderer process of a slot died under the attempt) ends that attempt only.
 * - a job that crashes the renderer on worker A, then on worker B, is quarantined: failed with
 *   "crashed the renderer twice (workers A, B)", shown by vdn status/logs, the JSON of the client
 *   API and of the status page, the status page and the job's page in headless Chromium;
 *   `vdn retry` leaves it alone and says so, `vdn retry --force`
 *   clears its crash record and runs it again;
 * - one crash requeues the job charged to no budget (--max-attempts 1: a charged attempt would
 *   fail it), preferably on another worker; the worker's other job runs on untouched and the
 *   worker's standing is untouched;
 * - crashes under 3 different jobs on one worker (--blocklist-failures 3) blocklist it;
 * - one poison job crashing the same worker again and again never does: it is quarantined after
 *   --max-crashes 3 and the worker takes the next job at once.
 * Usage: test_crash PATH/TO/vdn-coord-test */
#include <sqlite3.h>

#include "client.h"
#include "harness.h"

static char wep[128], cep[128], db[300];
static int http_port;

static pid_t start(const char *name, int with_http) {
    snprintf(db, sizeof db, "%s/%s.db", h_tmp, name);
    char http[64];
    snprintf(http, sizeof http, "127.0.0.1:%d", http_port);
    return start_coordinator("--db", db, "--bind", wep, "--client-bind", cep, "--lease-seconds",
                             "30", "--heartbeat-seconds", "0.3", "--max-attempts", "1",
                             "--max-worker-faults", "1", "--blocklist-failures", "3",
                             "--blocklist-seconds", "60", "--max-crashes", "3",
                             with_http ? "--http" : NULL, http, NULL);
}

static vdn_client *client(void) {
    vdn_client_opts o = {cep, NULL, NULL, 3000, NULL};
    char err[VDN_ERR_LEN];
    vdn_client *c = vdn_client_open(&o, err, sizeof err);
    REQUIRE(c);
    return c;
}

static uint64_t submit(vdn_client *c, int seed) {
    vdn_job_spec s;
    memset(&s, 0, sizeof s);
    s.prompt_cache = "/data/prompt.safetensors";
    s.steps = 4, s.frames = 22, s.height = 64, s.width = 64;
    s.seed = (uint64_t)seed, s.has_seed = 1;
    uint64_t batch = 0, ids[1] = {0};
    char err[VDN_ERR_LEN];
    int rc = vdn_client_submit(c, &s, 1, "t", 0, "crash", &batch, ids, err, sizeof err);
    if (rc) fprintf(stderr, "submit: %s\n", err);
    REQUIRE(rc == 0);
    return ids[0];
}

/* A worker that runs a job per GPU (READY.per_gpu), with n GPUs of 80 GiB. */
static void ready_per_gpu(fake_worker *w, int n) {
    Vdn__Gpu g[4], *gp[4];
    for (int i = 0; i < n; i++) {
        vdn__gpu__init(&g[i]);
        g[i].has_index = g[i].has_memory_bytes = 1;
        g[i].index = i;
        g[i].memory_bytes = 80ull << 30;
        gp[i] = &g[i];
    }
    Vdn__Ready r = VDN__READY__INIT;
    r.worker_id = w->id;
    r.n_gpus = (size_t)n;
    r.gpus = gp;
    r.checkpoint = "tiny";
    r.engine_version = "test";
    r.has_per_gpu = r.per_gpu = 1;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_READY;
    env.ready = &r;
    fw_send(w, &env);
}

static void open_worker(fake_worker *w, const char *id) {
    fw_open(w, wep, id);
    fw_ready(w, "tiny", 1, 80ull << 30, 0);
}

/* The next ASSIGN to w within `wait` s: its attempt (and job in *job), 0 = none. */
static uint64_t assigned(fake_worker *w, double wait, uint64_t *job) {
    Vdn__Envelope *e = fw_expect(w, VDN__ENVELOPE__PAYLOAD_ASSIGN, wait);
    if (!e) return 0;
    uint64_t a = e->assign->attempt_id;
    if (job) *job = e->assign->job_id;
    vdn__envelope__free_unpacked(e, NULL);
    w->attempt = a;
    return a;
}

static void crash(fake_worker *w, uint64_t attempt) {
    fw_fail_fault(w, attempt, "renderer crashed: signal 11 (Segmentation fault) at NFE 3/6",
                  VDN__FAIL__FAULT__CRASH);
    w->attempt = 0;
}

static int64_t q_int(const char *sql, uint64_t arg) {
    sqlite3 *h;
    REQUIRE(sqlite3_open(db, &h) == SQLITE_OK);
    sqlite3_busy_timeout(h, 2000);
    sqlite3_stmt *st;
    int64_t v = -1;
    if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, (sqlite3_int64)arg);
        if (sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    sqlite3_close(h);
    return v;
}

/* Job `id` once it is in `state` (polls up to 10 s: a worker's message and a client's query
 * travel on different sockets); the reply to free in *hold. */
static Vdn__JobInfo *job_when(vdn_client *c, uint64_t id, const char *state,
                              Vdn__StatusReply **hold) {
    char t[32], err[VDN_ERR_LEN];
    snprintf(t, sizeof t, "j%llu", (unsigned long long)id);
    for (double end = vdn_now() + 10;; sleep_s(0.05)) {
        *hold = vdn_client_status(c, t, err, sizeof err);
        REQUIRE(*hold && (*hold)->n_jobs == 1);
        Vdn__JobInfo *j = (*hold)->jobs[0];
        if (!strcmp(j->state, state) || vdn_now() > end) return j;
        vdn_client_free(*hold);
    }
}

/* Whether JSON text holds "key":value, whatever the white space. */
static int json_has(const char *text, const char *key_value) {
    static char flat[65536];
    size_t n = 0;
    for (const char *p = text; *p && n < sizeof flat - 1; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n') flat[n++] = *p;
    flat[n] = 0;
    return strstr(flat, key_value) != NULL;
}

static const char *last_line(const char *s) {
    const char *nl = s ? strrchr(s, '\n') : NULL;
    return nl ? nl + 1 : s ? s : "";
}

/* GET path from the status page's server on loopback: the body into buf. */
static int http_get(const char *path, char *buf, size_t len) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)http_port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a)) {
        if (fd >= 0) close(fd);
        return -1;
    }
    char req[256];
    int n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n", path,
                     http_port);
    if (write(fd, req, (size_t)n) != n) {
        close(fd);
        return -1;
    }
    size_t got = 0;
    for (ssize_t r; got < len - 1 && (r = read(fd, buf + got, len - 1 - got)) > 0;)
        got += (size_t)r;
    buf[got] = 0;
    close(fd);
    return strstr(buf, " 200 ") ? 0 : -1;
}

/* The DOM of a status page after its script ran (headless Chromium, as e2e_http does), into
 * buf: 0, or -1 without Chromium (the page check then does not run, and says so). */
static int chromium_dom(const char *path, char *buf, size_t len) {
    const char *chrome = access("/usr/bin/chromium", X_OK) == 0 ? "/usr/bin/chromium"
                         : access("/usr/bin/chromium-browser", X_OK) == 0
                             ? "/usr/bin/chromium-browser"
                             : NULL;
    if (!chrome) {
        fprintf(stderr, "test_crash: no chromium: the status page's DOM is not checked\n");
        return -1;
    }
    run_cli(buf, len,
            "!%s --headless --no-sandbox --disable-gpu --no-first-run "
            "--disable-background-networking --disable-component-update --disable-sync "
            "--user-data-dir=%s/chrome --virtual-time-budget=3000 --dump-dom "
            "'http://127.0.0.1:%d%s'",
            chrome, h_tmp, http_port, path);
    return 0;
}

/* A on A, then on B: quarantined, shown everywhere; retry leaves it, --force runs it again. */
static void test_quarantine(void) {
    pid_t pid = start("quarantine", 1);
    vdn_client *c = client();
    char err[VDN_ERR_LEN], t[32];
    static char out[1 << 16];
    fake_worker a, b;
    open_worker(&a, "wA");
    uint64_t j = submit(c, 1), got = 0;
    snprintf(t, sizeof t, "j%llu", (unsigned long long)j);
    uint64_t x1 = assigned(&a, 5, &got);
    REQUIRE(x1 && got == j);
    open_worker(&b, "wB");
    sleep_s(0.3); /* B registered before the crash: the requeued job has somewhere else to go */
    crash(&a, x1);
    /* requeued, charged to no budget (--max-attempts 1), and placed away from A */
    uint64_t x2 = assigned(&b, 5, &got);
    CHECK(x2 && got == j, "the crashed job was not requeued onto the other worker");
    uint64_t none = assigned(&a, 0.5, NULL);
    CHECK(none == 0, "the crashed job went back to the worker it crashed");
    CHECK(q_int("SELECT count(*) FROM attempts WHERE id=? AND fault='crash' AND state='failed'",
                x1) == 1,
          "the crashed attempt is not recorded as a crash");
    crash(&b, x2);
    Vdn__StatusReply *h;
    Vdn__JobInfo *ji = job_when(c, j, "failed", &h);
    CHECK(!strcmp(ji->state, "failed") && ji->quarantined, "after crashes on A and B: %s%s",
          ji->state, ji->quarantined ? " (quarantined)" : "");
    CHECK(!strcmp(last_line(ji->last_error), "crashed the renderer twice (workers wA, wB)"),
          "reason: '%s'", last_line(ji->last_error));
    CHECK(ji->n_crashed_on == 2 && !strcmp(ji->crashed_on[0], "wA") &&
              !strcmp(ji->crashed_on[1], "wB"),
          "crash record of %zu", ji->n_crashed_on);
    vdn_client_free(h);
    /* neither worker is charged: the job crashed both */
    CHECK(q_int("SELECT count(*) FROM workers WHERE failures > 0 OR blocked_until > 0", 0) == 0,
          "a worker was charged for the quarantined job");
    /* vdn status, vdn logs, --json (the client API's JSON), the status page's JSON */
    CHECK(run_cli(out, sizeof out, "status %s --coordinator %s", t, cep) == 0 &&
              strstr(out, "failed, quarantined") &&
              strstr(out, "crashes    the renderer on wA, wB (quarantined"),
          "vdn status:\n%s", out);
    CHECK(run_cli(out, sizeof out, "status %s --json --coordinator %s", t, cep) == 0 &&
              json_has(out, "\"quarantined\":true") &&
              json_has(out, "\"crashed_on\":[\"wA\",\"wB\"]"),
          "vdn status --json:\n%s", out);
    CHECK(run_cli(out, sizeof out, "logs %s --coordinator %s", t, cep) == 0 &&
              strstr(out, "quarantined") &&
              strstr(out, "crashed the renderer twice (workers wA, wB); not retried") &&
              strstr(out, "(crash fault) renderer crashed: signal 11"),
          "vdn logs:\n%s", out);
    CHECK(http_get("/api/status", out, sizeof out) == 0 && json_has(out, "\"quarantined\":true"),
          "/api/status:\n%.2000s", out);
    CHECK(http_get("/metrics", out, sizeof out) == 0 && strstr(out, "\nvdn_jobs_quarantined 1\n") &&
              strstr(out, "\nvdn_attempt_failures_total{fault=\"crash\"} 2\n"),
          "/metrics:\n%.3000s", out);
    static char dom[1 << 17];
    double tc = vdn_now();
    if (chromium_dom("/", dom, sizeof dom) == 0)
        CHECK(strstr(dom, "<span class=\"st quarantined\">quarantined</span>"),
              "the status page shows no quarantined job:\n%.3000s", dom);
    char page[64];
    snprintf(page, sizeof page, "/job#j=%llu", (unsigned long long)j);
    if (chromium_dom(page, dom, sizeof dom) == 0)
        CHECK(strstr(dom, "): failed (quarantined)</h1>") &&
                  strstr(dom, "<th>crashed the renderer on</th><td>wA, wB</td>"),
              "the job page:\n%.3000s", dom);
    fprintf(stderr, "test_crash: the pages in Chromium: %.1f s\n", vdn_now() - tc);
    /* the workers were silent meanwhile: they say READY again */
    fw_ready(&a, "tiny", 1, 80ull << 30, 0);
    fw_ready(&b, "tiny", 1, 80ull << 30, 0);
    /* retry leaves it alone and says so */
    int n = -1, q = -1;
    CHECK(vdn_client_retry_force(c, t, 0, &n, &q, err, sizeof err) == 0 && n == 0 && q == 1,
          "retry: %d requeued, %d quarantined left (%s)", n, q, err);
    CHECK(run_cli(out, sizeof out, "retry %s --coordinator %s", t, cep) == 1 &&
              strstr(out, "requeued 0 job(s)") && strstr(out, "left 1 quarantined job(s)") &&
              strstr(out, "--force"),
          "vdn retry:\n%s", out);
    ji = job_when(c, j, "failed", &h);
    CHECK(!strcmp(ji->state, "failed") && ji->quarantined, "retried without --force: %s",
          ji->state);
    vdn_client_free(h);
    /* --force: the crash record cleared, queued and run again */
    CHECK(run_cli(out, sizeof out, "retry %s --force --coordinator %s", t, cep) == 0 &&
              strstr(out, "requeued 1 job(s)"),
          "vdn retry --force:\n%s", out);
    uint64_t x3 = 0;
    for (double end = vdn_now() + 5; !x3 && vdn_now() < end;)
        if (!(x3 = assigned(&a, 0.2, &got))) x3 = assigned(&b, 0.2, &got);
    CHECK(x3 && got == j, "not run again after --force");
    ji = job_when(c, j, "running", &h);
    CHECK(!ji->quarantined && ji->n_crashed_on == 0, "after --force: quarantined %d, %zu crashes",
          ji->quarantined, ji->n_crashed_on);
    vdn_client_free(h);
    fw_close(&a);
    fw_close(&b);
    vdn_client_close(c);
    stop_coordinator(pid, SIGTERM);
}

/* One crash on a worker running two jobs: that attempt ends, the other job runs on, nothing is
 * charged (--max-attempts 1, --max-worker-faults 1) and the worker keeps its standing. */
static void test_one_crash(void) {
    pid_t pid = start("one", 0);
    vdn_client *c = client();
    fake_worker w;
    fw_open(&w, wep, "w2");
    ready_per_gpu(&w, 2);
    uint64_t j1 = submit(c, 1), j2 = submit(c, 2), g1 = 0, g2 = 0;
    uint64_t x1 = assigned(&w, 5, &g1), x2 = assigned(&w, 5, &g2);
    REQUIRE(x1 && x2 && g1 == j1 && g2 == j2);
    crash(&w, x1);
    /* the only worker: j1 comes back to it, on the slot it freed */
    uint64_t got = 0, x3 = assigned(&w, 5, &got);
    CHECK(x3 && got == j1, "the crashed job was not requeued (--max-attempts 1)");
    Vdn__StatusReply *h;
    Vdn__JobInfo *ji = job_when(c, j2, "running", &h);
    CHECK(!strcmp(ji->state, "running") && ji->current_attempt == x2 && ji->attempts == 1,
          "the neighbour: %s, attempt %llu (want %llu)", ji->state,
          (unsigned long long)ji->current_attempt, (unsigned long long)x2);
    vdn_client_free(h);
    CHECK(q_int("SELECT count(*) FROM attempts WHERE id=? AND state='running'", x2) == 1,
          "the neighbour's attempt was ended");
    CHECK(q_int("SELECT worker_faults FROM jobs WHERE id=?", j1) == 0,
          "the crash was charged as a worker fault");
    CHECK(q_int("SELECT crashes FROM jobs WHERE id=?", j1) == 1, "the crash was not counted");
    CHECK(q_int("SELECT failures FROM workers WHERE id='w2' AND ?=0", 0) == 0 &&
              q_int("SELECT count(*) FROM worker_blocks WHERE ?=0", 0) == 0,
          "the worker was charged a fault for one crash");
    fw_result(&w, x2, "out/j2.mp4");
    fw_result(&w, x3, "out/j1.mp4");
    ji = job_when(c, j2, "done", &h);
    CHECK(!strcmp(ji->state, "done"), "the neighbour: %s", ji->state);
    vdn_client_free(h);
    ji = job_when(c, j1, "done", &h);
    CHECK(!strcmp(ji->state, "done") && !ji->quarantined && ji->n_crashed_on == 1,
          "the crashed job: %s, %zu crashes", ji->state, ji->n_crashed_on);
    vdn_client_free(h);
    fw_close(&w);
    vdn_client_close(c);
    stop_coordinator(pid, SIGTERM);
}

/* Crashes under 3 different jobs on one worker: blocklisted (--blocklist-failures 3). */
static void test_three_jobs(void) {
    pid_t pid = start("three", 0);
    vdn_client *c = client();
    char err[VDN_ERR_LEN];
    fake_worker w;
    fw_open(&w, wep, "w3");
    ready_per_gpu(&w, 3);
    uint64_t jobs[3], x[3];
    for (int i = 0; i < 3; i++)
        jobs[i] = submit(c, i + 1);
    for (int i = 0; i < 3; i++)
        REQUIRE((x[i] = assigned(&w, 5, NULL)) != 0);
    for (int i = 0; i < 3; i++)
        crash(&w, x[i]);
    int blocked = 0;
    for (double end = vdn_now() + 5; !blocked && vdn_now() < end; sleep_s(0.1)) {
        Vdn__WorkersReply *r = vdn_client_workers(c, err, sizeof err);
        blocked = r && r->n_workers == 1 && !strcmp(r->workers[0]->state, "blocked");
        vdn_client_free(r);
    }
    CHECK(blocked, "crashes under 3 different jobs did not blocklist the worker");
    CHECK(q_int("SELECT count(*) FROM events WHERE kind='blocklisted' AND worker_id='w3' AND "
                "detail LIKE '%3 different jobs%' AND ?=0",
                0) == 1,
          "no blocklisted event naming the 3 jobs");
    /* the slots the first crashes freed may have taken their jobs back before the third crash
     * came: those ASSIGNs were sent before the blocklisting; after it, nothing new */
    int64_t blocked_at = q_int("SELECT max(id) FROM attempts WHERE ?=0", 0);
    while (assigned(&w, 0.3, NULL))
        ;
    uint64_t fresh = submit(c, 4), again = assigned(&w, 1.0, NULL);
    CHECK(again == 0 &&
              q_int("SELECT count(*) FROM attempts WHERE id > ?", (uint64_t)blocked_at) == 0,
          "a blocklisted worker got work");
    CHECK(q_int("SELECT count(*) FROM jobs WHERE id=? AND state='queued'", fresh) == 1);
    /* the jobs are not to blame: requeued, their crash records cleared with the blocklisting */
    for (int i = 0; i < 3; i++)
        CHECK(q_int("SELECT count(*) FROM jobs WHERE id=? AND state IN ('queued','running') AND "
                    "NOT quarantined",
                    jobs[i]) == 1 &&
                  q_int("SELECT count(*) FROM crashes WHERE job_id=? AND job_record", jobs[i]) == 0,
              "job %d after its worker was blocklisted", i);
    fw_close(&w);
    vdn_client_close(c);
    stop_coordinator(pid, SIGTERM);
}

/* One poison job crashing the same worker again and again: quarantined after --max-crashes 3,
 * the worker never blocklisted (its crashes were all one job's) and takes the next job. */
static void test_poison(void) {
    pid_t pid = start("poison", 0);
    vdn_client *c = client();
    char err[VDN_ERR_LEN];
    fake_worker w;
    open_worker(&w, "w4");
    uint64_t p = submit(c, 1), got = 0;
    for (int i = 0; i < 3; i++) {
        uint64_t x = assigned(&w, 5, &got);
        CHECK(x && got == p, "crash %d: no ASSIGN of the poison job", i + 1);
        if (!x) break;
        crash(&w, x);
    }
    Vdn__StatusReply *h;
    Vdn__JobInfo *ji = job_when(c, p, "failed", &h);
    CHECK(!strcmp(ji->state, "failed") && ji->quarantined &&
              !strcmp(last_line(ji->last_error), "crashed the renderer 3 times (worker w4)"),
          "the poison job: %s, '%s'", ji->state, last_line(ji->last_error));
    vdn_client_free(h);
    Vdn__WorkersReply *r = vdn_client_workers(c, err, sizeof err);
    CHECK(r && r->n_workers == 1 && strcmp(r->workers[0]->state, "blocked") &&
              r->workers[0]->failures == 0,
          "the poison job blocklisted the worker: %s",
          r && r->n_workers ? r->workers[0]->state : "?");
    vdn_client_free(r);
    uint64_t good = submit(c, 2), x = assigned(&w, 5, &got);
    CHECK(x && got == good, "the next job did not run on the worker");
    fw_result(&w, x, "out/good.mp4");
    ji = job_when(c, good, "done", &h);
    CHECK(!strcmp(ji->state, "done"), "the next job: %s", ji->state);
    vdn_client_free(h);
    fw_close(&w);
    vdn_client_close(c);
    stop_coordinator(pid, SIGTERM);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_crash PATH/TO/vdn-coord-test\n");
        return 2;
    }
    harness_init(argv[1]);
    snprintf(wep, sizeof wep, "tcp://127.0.0.1:%d", h_port(0));
    snprintf(cep, sizeof cep, "tcp://127.0.0.1:%d", h_port(1));
    http_port = h_port(2);
    double t0 = vdn_now();
    test_quarantine();
    test_one_crash();
    test_three_jobs();
    test_poison();
    fprintf(stderr, "test_crash: %.1f s\n", vdn_now() - t0);
    harness_cleanup();
    return check_report("crash");
}
