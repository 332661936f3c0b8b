/* The real `vdn worker` process against a scripted coordinator (a ROUTER socket in this test,
 * speaking proto/vdn.proto through the shared wire helpers). Covers the protocol corners the
 * real coordinator rarely produces: garbage and wrong-version frames, bad output keys, an
 * ASSIGN while busy, a repeated ASSIGN, a RESULT re-sent until it is ACKed, a stale-attempt
 * refusal mid-render, a DISCONNECT asking for READY again, SIGTERM, and an ASSIGN for a DiT
 * precision the worker did not load (an older coordinator's).
 *
 * usage: test_worker_proto VDN_BINARY   (makes its own tiny checkpoint with `vdn ckpt init`) */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "vdn_util.h"
#include "wire.h"
#include "../../ops/test/check.h"

static void *router;
static uint8_t ident[256];
static size_t ident_len;
static double last_hb;
static int beating = 1; /* send our heartbeats while waiting */
static char dir[256], prompt[512];
static char *assign_precision; /* RenderRequest.precision of the next assign(); NULL: none */

static void send_env(Vdn__Envelope *env) {
    char err[VDN_ERR_LEN];
    if (vdn_wire_send(router, ident, ident_len, env, err, sizeof err))
        fprintf(stderr, "send: %s\n", err);
}

static void send_raw(const void *body, size_t len) {
    zmq_send(router, ident, ident_len, ZMQ_SNDMORE);
    zmq_send(router, body, len, 0);
}

static void heartbeat(void) {
    Vdn__Heartbeat h = VDN__HEARTBEAT__INIT;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_HEARTBEAT;
    env.heartbeat = &h;
    send_env(&env);
    last_hb = vdn_now();
}

/* Next envelope of kind `want` (0 = any but HEARTBEAT/PROGRESS) within timeout seconds, keeping
 * the worker's liveness up with our heartbeats meanwhile. NULL on timeout. */
static Vdn__Envelope *expect(int want, double timeout) {
    double end = vdn_now() + timeout;
    while (vdn_now() < end) {
        if (beating && ident_len && vdn_now() - last_hb > 0.2) heartbeat();
        zmq_pollitem_t it = {.socket = router, .events = ZMQ_POLLIN};
        if (zmq_poll(&it, 1, 50) <= 0) continue;
        zmq_msg_t id, body;
        zmq_msg_init(&id);
        zmq_msg_init(&body);
        zmq_msg_recv(&id, router, 0);
        zmq_msg_recv(&body, router, 0);
        ident_len = zmq_msg_size(&id) < sizeof ident ? zmq_msg_size(&id) : sizeof ident;
        memcpy(ident, zmq_msg_data(&id), ident_len);
        char err[VDN_ERR_LEN];
        int code;
        Vdn__Envelope *env =
            vdn_wire_decode(zmq_msg_data(&body), zmq_msg_size(&body), &code, err, sizeof err);
        zmq_msg_close(&id);
        zmq_msg_close(&body);
        if (!env) {
            failures++;
            fprintf(stderr, "the worker sent an undecodable frame: %s\n", err);
            continue;
        }
        int kind = (int)env->payload_case;
        if (kind == want || (want == 0 && kind != VDN__ENVELOPE__PAYLOAD_HEARTBEAT &&
                             kind != VDN__ENVELOPE__PAYLOAD_PROGRESS))
            return env;
        vdn__envelope__free_unpacked(env, NULL);
    }
    return NULL;
}

static void assign(uint64_t attempt, int steps, const char *key0, const char *key1) {
    Vdn__RenderRequest r = VDN__RENDER_REQUEST__INIT;
    r.prompt_cache = prompt;
    r.has_frames = r.has_height = r.has_width = r.has_steps = r.has_seed = 1;
    r.frames = 56, r.height = 32, r.width = 32, r.steps = steps, r.seed = attempt;
    r.precision = assign_precision;
    char *keys[2] = {(char *)key0, (char *)key1};
    r.n_output_keys = 2;
    r.output_keys = keys;
    Vdn__Assign a = VDN__ASSIGN__INIT;
    a.has_job_id = a.has_attempt_id = 1;
    a.job_id = attempt;
    a.attempt_id = attempt;
    a.request = &r;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_ASSIGN;
    env.assign = &a;
    send_env(&env);
}

static void ack(uint64_t attempt) {
    Vdn__Ack a = VDN__ACK__INIT;
    a.has_attempt_id = 1;
    a.attempt_id = attempt;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_ACK;
    env.ack = &a;
    send_env(&env);
}

static int run(char *const argv[]) {
    pid_t pid = fork();
    if (pid == 0) {
        execv(argv[0], argv);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s VDN_BINARY\n", argv[0]);
        return 2;
    }
    char *vdn = argv[1];
    snprintf(dir, sizeof dir, "/tmp/vdn-test-worker-proto-%d", (int)getpid());
    char ckpt[300], store[300], scratch[300], ep[64];
    snprintf(ckpt, sizeof ckpt, "%s/ckpt", dir);
    snprintf(store, sizeof store, "file://%s/store", dir);
    snprintf(scratch, sizeof scratch, "%s/scratch", dir);
    snprintf(prompt, sizeof prompt, "%s/prompt.safetensors", ckpt);
    char *init[] = {vdn, "ckpt", "init", "--preset", "tiny", "--vdn", "--out", ckpt, NULL};
    if (run(init) != 0) {
        fprintf(stderr, "vdn ckpt init failed\n");
        return 1;
    }

    void *ctx = zmq_ctx_new();
    router = zmq_socket(ctx, ZMQ_ROUTER);
    int zero = 0;
    zmq_setsockopt(router, ZMQ_LINGER, &zero, sizeof zero);
    zmq_bind(router, "tcp://127.0.0.1:*");
    size_t eplen = sizeof ep;
    zmq_getsockopt(router, ZMQ_LAST_ENDPOINT, ep, &eplen);

    pid_t worker = fork();
    if (worker == 0) {
        setenv("VDN_TEST_NFE_DELAY_MS", "150", 1);
        char *wargv[] = {vdn,
                         "worker",
                         "--connect",
                         ep,
                         "--checkpoint",
                         ckpt,
                         "--store",
                         store,
                         "--id",
                         "pw",
                         "--cpu",
                         "--scratch",
                         scratch,
                         "--heartbeat-seconds",
                         "0.2",
                         "--threads",
                         "1",
                         "--data-root",
                         dir,
                         NULL};
        execv(vdn, wargv);
        _exit(127);
    }

    /* READY with what the worker is */
    Vdn__Envelope *e = expect(VDN__ENVELOPE__PAYLOAD_READY, 30);
    CHECK(e, "no READY");
    if (!e) goto out;
    CHECK(e->ready->worker_id && !strcmp(e->ready->worker_id, "pw"), "worker_id");
    CHECK(e->ready->backend && !strcmp(e->ready->backend, "cpu"), "backend");
    CHECK(e->ready->n_gpus == 0, "--cpu reports %zu GPUs", e->ready->n_gpus);
    CHECK(e->ready->checkpoint_identity && strlen(e->ready->checkpoint_identity) == 64,
          "identity '%s'", e->ready->checkpoint_identity ? e->ready->checkpoint_identity : "");
    CHECK(e->ready->engine_version && e->ready->engine_version[0], "engine version");
    CHECK(e->ready->has_running_attempt && e->ready->running_attempt == 0, "running attempt");
    /* no --precision: the bf16 engine only */
    CHECK(e->ready->n_precisions == 1 && !strcmp(e->ready->precisions[0], "bf16"),
          "precisions: %zu", e->ready->n_precisions);
    vdn__envelope__free_unpacked(e, NULL);

    /* garbage and a wrong protocol version: ignored, the worker keeps talking */
    send_raw("\xff\xff\xff garbage", 12);
    Vdn__Envelope bad = VDN__ENVELOPE__INIT;
    Vdn__Heartbeat hb = VDN__HEARTBEAT__INIT;
    bad.has_protocol_version = 1;
    bad.protocol_version = 99;
    bad.payload_case = VDN__ENVELOPE__PAYLOAD_HEARTBEAT;
    bad.heartbeat = &hb;
    size_t blen = vdn__envelope__get_packed_size(&bad);
    uint8_t *bbuf = malloc(blen);
    vdn__envelope__pack(&bad, bbuf);
    send_raw(bbuf, blen);
    free(bbuf);
    e = expect(VDN__ENVELOPE__PAYLOAD_HEARTBEAT, 5);
    CHECK(e, "no heartbeat after garbage frames");
    if (e) vdn__envelope__free_unpacked(e, NULL);

    /* output keys that do not name a latents file and a record: FAIL, not retryable */
    assign(1, 2, "o/1.mp4", "o/1.json");
    e = expect(0, 20);
    CHECK(e && e->payload_case == VDN__ENVELOPE__PAYLOAD_FAIL && e->fail->attempt_id == 1 &&
              e->fail->has_retryable && !e->fail->retryable &&
              strstr(e->fail->reason, "output_keys[0] 'o/1.mp4'"),
          "bad keys: %s",
          e && e->payload_case == VDN__ENVELOPE__PAYLOAD_FAIL ? e->fail->reason : "-");
    if (e) vdn__envelope__free_unpacked(e, NULL);
    ack(1);

    /* a precision this worker did not load: FAIL at once as the worker's fault (it may render
     * elsewhere), naming it; a name no engine knows: the job's fault */
    assign_precision = "fp8";
    assign(90, 2, "o/90.safetensors", "o/90.json");
    e = expect(0, 20);
    CHECK(e && e->payload_case == VDN__ENVELOPE__PAYLOAD_FAIL && e->fail->attempt_id == 90 &&
              e->fail->has_fault && e->fail->fault == VDN__FAIL__FAULT__WORKER &&
              strstr(e->fail->reason, "no fp8 engine loaded"),
          "fp8 on a bf16 worker: %s",
          e && e->payload_case == VDN__ENVELOPE__PAYLOAD_FAIL ? e->fail->reason : "-");
    if (e) vdn__envelope__free_unpacked(e, NULL);
    ack(90);
    assign_precision = "fp16";
    assign(91, 2, "o/91.safetensors", "o/91.json");
    e = expect(0, 20);
    CHECK(e && e->payload_case == VDN__ENVELOPE__PAYLOAD_FAIL && e->fail->attempt_id == 91 &&
              e->fail->has_fault && e->fail->fault == VDN__FAIL__FAULT__JOB &&
              strstr(e->fail->reason, "'precision'") && strstr(e->fail->reason, "fp16"),
          "fp16: %s", e && e->payload_case == VDN__ENVELOPE__PAYLOAD_FAIL ? e->fail->reason : "-");
    if (e) vdn__envelope__free_unpacked(e, NULL);
    ack(91);
    assign_precision = NULL;

    /* a render; the same ASSIGN again is ignored; another while busy is refused, retryable */
    assign(2, 6, "o/2.safetensors", "o/2.json");
    e = expect(VDN__ENVELOPE__PAYLOAD_PROGRESS, 20);
    CHECK(e && e->progress->attempt_id == 2 && e->progress->nfe_done == 1 &&
              e->progress->nfe_total == 6,
          "first PROGRESS");
    if (e) vdn__envelope__free_unpacked(e, NULL);
    assign(2, 6, "o/2.safetensors", "o/2.json");
    assign(3, 2, "o/3.safetensors", "o/3.json");
    e = expect(0, 20);
    CHECK(e && e->payload_case == VDN__ENVELOPE__PAYLOAD_FAIL && e->fail->attempt_id == 3 &&
              e->fail->retryable && strstr(e->fail->reason, "busy"),
          "ASSIGN while busy");
    if (e) vdn__envelope__free_unpacked(e, NULL);
    ack(3);
    e = expect(0, 30);
    CHECK(e && e->payload_case == VDN__ENVELOPE__PAYLOAD_RESULT && e->result->attempt_id == 2 &&
              e->result->n_object_keys == 2 && e->result->run_record_json &&
              strstr(e->result->run_record_json, "\"latent_frames\""),
          "RESULT of attempt 2");
    if (e) vdn__envelope__free_unpacked(e, NULL);
    /* not ACKed: it comes again */
    e = expect(0, 10);
    CHECK(e && e->payload_case == VDN__ENVELOPE__PAYLOAD_RESULT && e->result->attempt_id == 2,
          "RESULT re-sent without an ACK");
    if (e) vdn__envelope__free_unpacked(e, NULL);
    /* The coordinator restarted before its ACK: asked to register again (both ways a new
     * coordinator asks), the worker's READY names the rendered-but-unacknowledged attempt, so
     * the coordinator lets it report instead of ending the attempt and rendering it again;
     * the RESULT follows. */
    for (int way = 0; way < 2; way++) {
        if (way == 0) {
            Vdn__Disconnect dc = VDN__DISCONNECT__INIT;
            dc.reason = "coordinator restarted";
            Vdn__Envelope de = VDN__ENVELOPE__INIT;
            de.payload_case = VDN__ENVELOPE__PAYLOAD_DISCONNECT;
            de.disconnect = &dc;
            send_env(&de);
        } else {
            /* past the worker's one-READY-per-second limit for this reply, beating meanwhile
             * (a silent second would make it reconnect instead); it never sends an ASSIGN */
            e = expect(VDN__ENVELOPE__PAYLOAD_ASSIGN, 1.1);
            if (e) vdn__envelope__free_unpacked(e, NULL);
            vdn_wire_send_error(router, ident, ident_len, 0, VDN__ERROR__CODE__UNKNOWN_WORKER, 0,
                                "HEARTBEAT from an unknown worker: send READY first");
        }
        e = expect(VDN__ENVELOPE__PAYLOAD_READY, 5);
        CHECK(e && e->ready->has_running_attempt && e->ready->running_attempt == 2,
              "way %d: READY after a restart names running_attempt %llu, expected the unACKed 2",
              way, e ? (unsigned long long)e->ready->running_attempt : 0ull);
        if (e) vdn__envelope__free_unpacked(e, NULL);
        e = expect(0, 5);
        CHECK(e && e->payload_case == VDN__ENVELOPE__PAYLOAD_RESULT && e->result->attempt_id == 2,
              "way %d: RESULT after the READY", way);
        if (e) vdn__envelope__free_unpacked(e, NULL);
    }
    ack(2);
    e = expect(0, 5);
    CHECK(!e, "something after the ACK: %d", e ? (int)e->payload_case : 0);
    if (e) vdn__envelope__free_unpacked(e, NULL);
    char path[600];
    snprintf(path, sizeof path, "%s/store/o/2.safetensors", dir);
    CHECK(access(path, F_OK) == 0, "%s not uploaded", path);

    /* stale mid-render: the worker stops, reports nothing for it, and does not upload */
    assign(4, 20, "o/4.safetensors", "o/4.json");
    e = expect(VDN__ENVELOPE__PAYLOAD_PROGRESS, 20);
    if (e) vdn__envelope__free_unpacked(e, NULL);
    vdn_wire_send_error(router, ident, ident_len, 0, VDN__ERROR__CODE__STALE_ATTEMPT, 4,
                        "attempt 4 is not current");
    e = expect(0, 6);
    CHECK(!e, "the worker reported a stale attempt: kind %d", e ? (int)e->payload_case : 0);
    if (e) vdn__envelope__free_unpacked(e, NULL);
    snprintf(path, sizeof path, "%s/store/o/4.json", dir);
    CHECK(access(path, F_OK) != 0, "stale attempt uploaded %s", path);

    /* Frozen (SIGSTOP) near the end of a render, and the coordinator has gone quiet: on waking
     * the worker must not upload before a fresh heartbeat says the attempt is still its own;
     * a stale refusal then drops it with nothing written. */
    for (int round = 0; round < 2; round++) {
        uint64_t att = 5 + (uint64_t)round;
        char k0[64], k1[64];
        snprintf(k0, sizeof k0, "o/%llu.safetensors", (unsigned long long)att);
        snprintf(k1, sizeof k1, "o/%llu.json", (unsigned long long)att);
        assign(att, 8, k0, k1);
        for (;;) {
            e = expect(VDN__ENVELOPE__PAYLOAD_PROGRESS, 20);
            int n = e ? e->progress->nfe_done : 99;
            if (e) vdn__envelope__free_unpacked(e, NULL);
            if (n >= 7) break;
        }
        kill(worker, SIGSTOP);
        usleep(2000000);
        beating = 0;
        kill(worker, SIGCONT);
        e = expect(VDN__ENVELOPE__PAYLOAD_RESULT, 3);
        CHECK(!e, "round %d: RESULT without a fresh heartbeat after a freeze", round);
        if (e) vdn__envelope__free_unpacked(e, NULL);
        snprintf(path, sizeof path, "%s/store/%s", dir, k1);
        CHECK(access(path, F_OK) != 0, "round %d: uploaded %s before the check", round, path);
        if (round == 0) {
            vdn_wire_send_error(router, ident, ident_len, 0, VDN__ERROR__CODE__STALE_ATTEMPT, att,
                                "attempt is not current");
            beating = 1;
            e = expect(VDN__ENVELOPE__PAYLOAD_RESULT, 4);
            CHECK(!e, "RESULT for a stale attempt");
            if (e) vdn__envelope__free_unpacked(e, NULL);
            CHECK(access(path, F_OK) != 0, "the stale attempt uploaded %s", path);
        } else {
            beating = 1; /* the coordinator still counts us in: go ahead */
            e = expect(VDN__ENVELOPE__PAYLOAD_RESULT, 10);
            CHECK(e && e->result->attempt_id == att, "no RESULT once heartbeats came back");
            if (e) vdn__envelope__free_unpacked(e, NULL);
            ack(att);
            CHECK(access(path, F_OK) == 0, "%s not uploaded after the check", path);
        }
    }

    /* DISCONNECT from the coordinator: register again */
    Vdn__Disconnect d = VDN__DISCONNECT__INIT;
    d.reason = "test";
    Vdn__Envelope denv = VDN__ENVELOPE__INIT;
    denv.payload_case = VDN__ENVELOPE__PAYLOAD_DISCONNECT;
    denv.disconnect = &d;
    send_env(&denv);
    e = expect(0, 5);
    CHECK(e && e->payload_case == VDN__ENVELOPE__PAYLOAD_READY, "READY after DISCONNECT");
    if (e) vdn__envelope__free_unpacked(e, NULL);

    /* SIGTERM while idle: DISCONNECT and exit 0 */
    kill(worker, SIGTERM);
    e = expect(0, 10);
    CHECK(e && e->payload_case == VDN__ENVELOPE__PAYLOAD_DISCONNECT, "DISCONNECT on SIGTERM");
    if (e) vdn__envelope__free_unpacked(e, NULL);
    int st = 0;
    for (int i = 0; i < 100 && waitpid(worker, &st, WNOHANG) == 0; i++)
        usleep(50000);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "worker exit status %d", st);
    worker = 0;
out:
    if (worker > 0) {
        kill(worker, SIGKILL);
        waitpid(worker, NULL, 0);
    }
    zmq_close(router);
    zmq_ctx_term(ctx);
    if (!failures) {
        char *rm[] = {"/bin/rm", "-rf", dir, NULL};
        run(rm);
        printf("test_worker_proto: all passed\n");
    } else {
        fprintf(stderr, "test_worker_proto: %d failure(s); files in %s\n", failures, dir);
    }
    return failures ? 1 : 0;
}
