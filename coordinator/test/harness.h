/* Test harness: a real coordinator process on loopback, a fake worker speaking the protocol
 * directly, and small assertion helpers. Header-only; each test file includes it once. */
#ifndef VDN_TEST_HARNESS_H
#define VDN_TEST_HARNESS_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "curve.h"
#include "vdn_util.h"
#include "wire.h"
#include "../../ops/test/check.h"

#define REQUIRE(c)                                                                                 \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: REQUIRE failed: %s\n", __FILE__, __LINE__, #c);                \
            harness_dump_log();                                                                    \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static char h_tmp[256];
static char h_bin[1024];
static char h_log[512];

static inline void harness_dump_log(void) {
    char cmd[700];
    snprintf(cmd, sizeof cmd, "echo '--- coordinator log:'; tail -n 40 %s 1>&2", h_log);
    if (h_log[0] && system(cmd)) {
    }
}

static inline void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (long)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* Coordinators still running when a test exits early (REQUIRE) are killed, never orphaned. */
static pid_t h_pids[16];
static inline void harness_kill_all(void) {
    for (int i = 0; i < 16; i++)
        if (h_pids[i] > 0) {
            kill(h_pids[i], SIGKILL);
            waitpid(h_pids[i], NULL, 0);
            h_pids[i] = 0;
        }
}

static inline void harness_init(const char *bin) {
    atexit(harness_kill_all);
    snprintf(h_bin, sizeof h_bin, "%s", bin);
    snprintf(h_tmp, sizeof h_tmp, "/tmp/vdn_coord_test_XXXXXX");
    REQUIRE(mkdtemp(h_tmp) != NULL);
    snprintf(h_log, sizeof h_log, "%s/coordinator.log", h_tmp);
}

static inline void harness_cleanup(void) {
    if (failures) {
        fprintf(stderr, "keeping %s for inspection\n", h_tmp);
        return;
    }
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", h_tmp);
    if (system(cmd)) {
    }
}

/* Free loopback ports from the kernel (bind to port 0), remembered per index so a test can
 * restart the coordinator on the same endpoints. */
static inline int h_port(int k) {
    static int ports[4];
    if (ports[k]) return ports[k];
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    REQUIRE(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
            getsockname(fd, (struct sockaddr *)&a, &len) == 0);
    ports[k] = ntohs(a.sin_port);
    close(fd);
    for (int i = 0; i < k; i++)
        if (ports[i] == ports[k]) { /* the kernel handed the same port back: ask again */
            ports[k] = 0;
            return h_port(k);
        }
    return ports[k];
}

/* Starts `BIN coordinator ARGS...` (NULL-terminated), waits for its "ready" line. */
static inline pid_t start_coordinator(const char *first, ...) {
    const char *args[40];
    int n = 0;
    args[n++] = h_bin;
    args[n++] = "coordinator";
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && n < 38; a = va_arg(ap, const char *))
        args[n++] = a;
    va_end(ap);
    args[n] = NULL;
    int pfd[2];
    REQUIRE(pipe(pfd) == 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* dies with the test, even on a ctest timeout */
        dup2(pfd[1], 1);
        FILE *lf = fopen(h_log, "a");
        if (lf) dup2(fileno(lf), 2);
        close(pfd[0]);
        execv(h_bin, (char **)args);
        _exit(127);
    }
    close(pfd[1]);
    char buf[512];
    size_t got = 0;
    double deadline = vdn_now() + 15;
    while (vdn_now() < deadline && got < sizeof buf - 1) {
        ssize_t r = read(pfd[0], buf + got, sizeof buf - 1 - got);
        if (r <= 0) break;
        got += (size_t)r;
        buf[got] = 0;
        if (strstr(buf, "ready")) break;
    }
    close(pfd[0]);
    buf[got] = 0;
    for (int i = 0; i < 16; i++)
        if (h_pids[i] <= 0) {
            h_pids[i] = pid;
            break;
        }
    if (!strstr(buf, "ready")) {
        harness_dump_log();
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        fprintf(stderr, "coordinator did not start\n");
        exit(1);
    }
    return pid;
}

/* Also fails the test when a sanitizer build of the coordinator reported anything. */
static inline int stop_coordinator(pid_t pid, int sig) {
    kill(pid, sig);
    int st = 0;
    waitpid(pid, &st, 0);
    for (int i = 0; i < 16; i++)
        if (h_pids[i] == pid) h_pids[i] = 0;
    char err[VDN_ERR_LEN];
    size_t len;
    char *log = vdn_read_file(h_log, &len, err, sizeof err);
    if (log && (strstr(log, "Sanitizer") || strstr(log, "runtime error:"))) {
        fprintf(stderr, "sanitizer report in %s\n", h_log);
        failures++;
    }
    free(log);
    return st;
}

/* Runs BIN with a shell command line (or, when fmt starts with '!', the shell line as is);
 * stdout+stderr captured to out; returns the exit code. */
static inline int run_cli(char *out, size_t outlen, const char *fmt, ...) {
    char cmd[4096];
    int off = fmt[0] == '!' ? 0 : snprintf(cmd, sizeof cmd, "%s ", h_bin);
    if (fmt[0] == '!') fmt++;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd + off, sizeof cmd - (size_t)off, fmt, ap);
    va_end(ap);
    strncat(cmd, " 2>&1", sizeof cmd - strlen(cmd) - 1);
    FILE *p = popen(cmd, "r");
    REQUIRE(p != NULL);
    size_t n = fread(out, 1, outlen - 1, p);
    out[n] = 0;
    int st = pclose(p);
    if (strstr(out, "Sanitizer") || strstr(out, "runtime error:")) {
        fprintf(stderr, "sanitizer report from: %s\n%s\n", cmd, out);
        failures++;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* ------------------------------------------------------------------ fake worker */

typedef struct {
    void *ctx, *sock;
    char id[64];
    int alive;        /* send HEARTBEATs while waiting in fw_recv */
    int draining;     /* those heartbeats say it is shutting down */
    uint64_t attempt; /* what those heartbeats say it runs */
    double last_hb;
    const char *backend; /* READY.backend ("cpu", "cuda"); NULL = none */
} fake_worker;

static inline void fw_heartbeat(fake_worker *w, uint64_t attempt);

static inline void fw_open(fake_worker *w, const char *endpoint, const char *id) {
    memset(w, 0, sizeof *w);
    w->alive = 1;
    snprintf(w->id, sizeof w->id, "%s", id);
    w->ctx = zmq_ctx_new();
    w->sock = zmq_socket(w->ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(w->sock, ZMQ_LINGER, &zero, sizeof zero);
    REQUIRE(zmq_connect(w->sock, endpoint) == 0);
}

/* The same over CURVE: my_key = NAME.key, server_pub = coordinator.pub (curve.h). */
static inline void fw_open_curve(fake_worker *w, const char *endpoint, const char *id,
                                 const char *my_key, const char *server_pub) {
    memset(w, 0, sizeof *w);
    w->alive = 1;
    snprintf(w->id, sizeof w->id, "%s", id);
    w->ctx = zmq_ctx_new();
    w->sock = zmq_socket(w->ctx, ZMQ_DEALER);
    int zero = 0;
    char err[VDN_ERR_LEN];
    zmq_setsockopt(w->sock, ZMQ_LINGER, &zero, sizeof zero);
    REQUIRE(vdn_curve_client_setup(w->sock, my_key, server_pub, err, sizeof err) == 0);
    REQUIRE(zmq_connect(w->sock, endpoint) == 0);
}

static inline void fw_close(fake_worker *w) {
    zmq_close(w->sock);
    zmq_ctx_term(w->ctx);
}

static inline void fw_send(fake_worker *w, Vdn__Envelope *env) {
    char err[VDN_ERR_LEN];
    REQUIRE(vdn_wire_send(w->sock, NULL, 0, env, err, sizeof err) == 0);
}

static inline void fw_send_raw(fake_worker *w, const void *buf, size_t len) {
    REQUIRE(zmq_send(w->sock, buf, len, 0) == (int)len);
}

/* Next envelope that is not a HEARTBEAT, or NULL after timeout seconds. */
static inline Vdn__Envelope *fw_recv(fake_worker *w, double timeout) {
    double deadline = vdn_now() + timeout;
    for (;;) {
        double left = deadline - vdn_now();
        if (left <= 0) return NULL;
        if (w->alive && vdn_now() - w->last_hb > 0.1) {
            fw_heartbeat(w, w->attempt);
            w->last_hb = vdn_now();
        }
        if (left > 0.1) left = 0.1;
        zmq_pollitem_t it = {w->sock, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, (long)(left * 1000) + 1) <= 0) continue;
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, w->sock, 0) < 0) {
            zmq_msg_close(&m);
            continue;
        }
        char err[VDN_ERR_LEN];
        int code;
        Vdn__Envelope *env =
            vdn_wire_decode(zmq_msg_data(&m), zmq_msg_size(&m), &code, err, sizeof err);
        zmq_msg_close(&m);
        REQUIRE(env != NULL);
        if (env->payload_case == VDN__ENVELOPE__PAYLOAD_HEARTBEAT) {
            vdn__envelope__free_unpacked(env, NULL);
            continue;
        }
        return env;
    }
}

/* Waits for a message of one kind, skipping others (returns NULL on timeout). */
static inline Vdn__Envelope *fw_expect(fake_worker *w, int payload, double timeout) {
    double deadline = vdn_now() + timeout;
    for (;;) {
        double left = deadline - vdn_now();
        if (left <= 0) return NULL;
        Vdn__Envelope *e = fw_recv(w, left);
        if (!e) return NULL;
        if ((int)e->payload_case == payload) return e;
        vdn__envelope__free_unpacked(e, NULL);
    }
}

static inline void fw_ready(fake_worker *w, const char *checkpoint, int ngpus, uint64_t mem,
                            uint64_t running) {
    Vdn__Gpu g[8], *gp[8];
    for (int i = 0; i < ngpus; i++) {
        vdn__gpu__init(&g[i]);
        g[i].has_index = g[i].has_memory_bytes = 1;
        g[i].index = i;
        g[i].memory_bytes = mem;
        gp[i] = &g[i];
    }
    Vdn__Ready r = VDN__READY__INIT;
    r.worker_id = w->id;
    r.n_gpus = (size_t)ngpus;
    r.gpus = gp;
    r.checkpoint = (char *)checkpoint;
    r.engine_version = "test";
    r.backend = (char *)w->backend;
    if (running) r.has_running_attempt = 1, r.running_attempt = running;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_READY;
    env.ready = &r;
    fw_send(w, &env);
}

static inline void fw_heartbeat(fake_worker *w, uint64_t attempt) {
    Vdn__Heartbeat h = VDN__HEARTBEAT__INIT;
    if (attempt) h.has_attempt_id = 1, h.attempt_id = attempt;
    if (w->draining) h.has_draining = 1, h.draining = 1;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_HEARTBEAT;
    env.heartbeat = &h;
    fw_send(w, &env);
}

static inline void fw_progress(fake_worker *w, uint64_t attempt, int done, int total) {
    Vdn__Progress p = VDN__PROGRESS__INIT;
    p.has_attempt_id = p.has_nfe_done = p.has_nfe_total = p.has_nfe_seconds = 1;
    p.attempt_id = attempt, p.nfe_done = done, p.nfe_total = total, p.nfe_seconds = 0.5;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_PROGRESS;
    env.progress = &p;
    fw_send(w, &env);
}

static inline void fw_result_record(fake_worker *w, uint64_t attempt, const char *key,
                                    const char *record) {
    char *keys[1] = {(char *)key};
    Vdn__Result r = VDN__RESULT__INIT;
    r.has_attempt_id = 1, r.attempt_id = attempt;
    r.n_object_keys = 1, r.object_keys = keys;
    r.run_record_json = (char *)record;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_RESULT;
    env.result = &r;
    fw_send(w, &env);
}

static inline void fw_result(fake_worker *w, uint64_t attempt, const char *key) {
    char *keys[1] = {(char *)key};
    Vdn__Result r = VDN__RESULT__INIT;
    r.has_attempt_id = 1, r.attempt_id = attempt;
    r.n_object_keys = 1, r.object_keys = keys;
    r.run_record_json = "{\"ok\":true}";
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_RESULT;
    env.result = &r;
    fw_send(w, &env);
}

/* FAIL with a fault (Vdn__Fail__Fault): whose fault it was, as a current worker says. */
static inline void fw_fail_fault(fake_worker *w, uint64_t attempt, const char *reason, int fault) {
    Vdn__Fail f = VDN__FAIL__INIT;
    f.has_attempt_id = f.has_retryable = f.has_fault = 1;
    f.attempt_id = attempt, f.retryable = fault != VDN__FAIL__FAULT__JOB, f.reason = (char *)reason;
    f.fault = (Vdn__Fail__Fault)fault;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_FAIL;
    env.fail = &f;
    fw_send(w, &env);
}

/* FAIL from the object store: transient, with the operation that failed (Vdn__Fail__StoreOp). */
static inline void fw_fail_store(fake_worker *w, uint64_t attempt, const char *reason, int op) {
    Vdn__Fail f = VDN__FAIL__INIT;
    f.has_attempt_id = f.has_retryable = f.has_fault = f.has_store_op = 1;
    f.attempt_id = attempt, f.retryable = 1, f.reason = (char *)reason;
    f.fault = VDN__FAIL__FAULT__TRANSIENT;
    f.store_op = (Vdn__Fail__StoreOp)op;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_FAIL;
    env.fail = &f;
    fw_send(w, &env);
}

/* HEARTBEAT carrying the worker's count of store operations cured by a retry. */
static inline void fw_heartbeat_retries(fake_worker *w, uint64_t retries) {
    Vdn__Heartbeat h = VDN__HEARTBEAT__INIT;
    h.has_store_retries = 1, h.store_retries = retries;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_HEARTBEAT;
    env.heartbeat = &h;
    fw_send(w, &env);
}

/* FAIL as an older worker says it: retryable or not, no fault. */
static inline void fw_fail(fake_worker *w, uint64_t attempt, const char *reason, int retryable) {
    Vdn__Fail f = VDN__FAIL__INIT;
    f.has_attempt_id = f.has_retryable = 1;
    f.attempt_id = attempt, f.retryable = retryable, f.reason = (char *)reason;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_FAIL;
    env.fail = &f;
    fw_send(w, &env);
}

#endif
