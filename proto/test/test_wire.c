/* Protocol round trips for every payload, version and truncation refusals, CURVE key files and
 * the loopback check. Assertions compare decoded fields with what was set, field by field. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zmq.h>

#include "curve.h"
#include "vdn_util.h"
#include "wire.h"
#include "../../ops/test/check.h"

static Vdn__Envelope *roundtrip(Vdn__Envelope *env) {
    size_t len;
    uint8_t *buf = vdn_wire_encode(env, &len);
    char err[VDN_ERR_LEN];
    int code;
    Vdn__Envelope *out = vdn_wire_decode(buf, len, &code, err, sizeof err);
    if (!out) fprintf(stderr, "decode failed: %s\n", err);
    CHECK(out && out->payload_case == env->payload_case && out->protocol_version == 1);
    /* every strict prefix must be refused or decode to something else, never crash; most
     * prefixes of a message with a nested payload cannot decode at all */
    for (size_t k = 0; k < len; k++) {
        Vdn__Envelope *p = vdn_wire_decode(buf, k, &code, err, sizeof err);
        if (p)
            vdn__envelope__free_unpacked(p, NULL);
        else
            CHECK(err[0] &&
                  (code == VDN__ERROR__CODE__MALFORMED || code == VDN__ERROR__CODE__BAD_VERSION));
    }
    free(buf);
    return out;
}

static void test_assign(void) {
    Vdn__RenderRequest r = VDN__RENDER_REQUEST__INIT;
    r.prompt_cache = "/tmp/p.safetensors";
    r.has_frames = r.has_height = r.has_width = r.has_steps = r.has_seed = 1;
    r.frames = 22, r.height = 64, r.width = 96, r.steps = 4, r.seed = 0xfedcba9876543210ull;
    r.variant = "dense";
    r.checkpoint = "tiny";
    r.has_video_shift = r.has_audio_shift = 1;
    r.video_shift = 12.5f, r.audio_shift = 3.25f;
    r.output_prefix = "batches/b1/j2/out";
    char *keys[] = {"batches/b1/j2/out.safetensors", "batches/b1/j2/out.json"};
    r.n_output_keys = 2;
    r.output_keys = keys;
    Vdn__Assign a = VDN__ASSIGN__INIT;
    a.has_job_id = a.has_attempt_id = a.has_lease_seconds = 1;
    a.job_id = 2, a.attempt_id = 77, a.lease_seconds = 30.0;
    a.request = &r;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_ASSIGN;
    env.assign = &a;
    Vdn__Envelope *o = roundtrip(&env);
    if (!o) return;
    Vdn__RenderRequest *q = o->assign->request;
    CHECK(o->assign->job_id == 2 && o->assign->attempt_id == 77 &&
          o->assign->lease_seconds == 30.0);
    CHECK(!strcmp(q->prompt_cache, r.prompt_cache) && q->frames == 22 && q->height == 64 &&
          q->width == 96 && q->steps == 4 && q->seed == r.seed && !strcmp(q->variant, "dense") &&
          !strcmp(q->checkpoint, "tiny") && q->video_shift == 12.5f && q->audio_shift == 3.25f &&
          !strcmp(q->output_prefix, r.output_prefix) && q->n_output_keys == 2 &&
          !strcmp(q->output_keys[1], keys[1]) && !q->has_gpus);
    vdn__envelope__free_unpacked(o, NULL);
}

static void test_worker_messages(void) {
    Vdn__Gpu g0 = VDN__GPU__INIT, g1 = VDN__GPU__INIT;
    g0.has_index = g1.has_index = g0.has_memory_bytes = g1.has_memory_bytes = 1;
    g0.index = 0, g1.index = 1, g0.memory_bytes = 150ull << 30, g1.memory_bytes = 80ull << 30;
    g1.name = "H200";
    Vdn__Gpu *gs[] = {&g0, &g1};
    Vdn__Ready rd = VDN__READY__INIT;
    rd.worker_id = "w-1";
    rd.n_gpus = 2, rd.gpus = gs;
    rd.checkpoint = "tiny", rd.checkpoint_identity = "abc123", rd.engine_version = "0.1.0";
    rd.has_running_attempt = 1, rd.running_attempt = 9;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_READY, env.ready = &rd;
    Vdn__Envelope *o = roundtrip(&env);
    if (o) {
        CHECK(!strcmp(o->ready->worker_id, "w-1") && o->ready->n_gpus == 2 &&
              o->ready->gpus[0]->memory_bytes == (150ull << 30) &&
              !strcmp(o->ready->gpus[1]->name, "H200") && o->ready->running_attempt == 9 &&
              !strcmp(o->ready->checkpoint_identity, "abc123"));
        vdn__envelope__free_unpacked(o, NULL);
    }
    Vdn__Progress p = VDN__PROGRESS__INIT;
    p.has_attempt_id = p.has_nfe_done = p.has_nfe_total = p.has_nfe_seconds = 1;
    p.attempt_id = 5, p.nfe_done = 3, p.nfe_total = 30, p.nfe_seconds = 1.5;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_PROGRESS, env.progress = &p;
    if ((o = roundtrip(&env))) {
        CHECK(o->progress->attempt_id == 5 && o->progress->nfe_done == 3 &&
              o->progress->nfe_total == 30 && o->progress->nfe_seconds == 1.5);
        vdn__envelope__free_unpacked(o, NULL);
    }
    char *keys[] = {"a/b.safetensors"};
    Vdn__Result r = VDN__RESULT__INIT;
    r.has_attempt_id = 1, r.attempt_id = 6, r.n_object_keys = 1, r.object_keys = keys;
    r.run_record_json = "{\"seed\":1}";
    env.payload_case = VDN__ENVELOPE__PAYLOAD_RESULT, env.result = &r;
    if ((o = roundtrip(&env))) {
        CHECK(o->result->attempt_id == 6 && o->result->n_object_keys == 1 &&
              !strcmp(o->result->object_keys[0], keys[0]) &&
              !strcmp(o->result->run_record_json, "{\"seed\":1}"));
        vdn__envelope__free_unpacked(o, NULL);
    }
    Vdn__Fail f = VDN__FAIL__INIT;
    f.has_attempt_id = f.has_retryable = 1, f.attempt_id = 7, f.retryable = 1, f.reason = "oom";
    env.payload_case = VDN__ENVELOPE__PAYLOAD_FAIL, env.fail = &f;
    if ((o = roundtrip(&env))) {
        CHECK(o->fail->attempt_id == 7 && o->fail->retryable && !strcmp(o->fail->reason, "oom"));
        vdn__envelope__free_unpacked(o, NULL);
    }
    Vdn__Heartbeat h = VDN__HEARTBEAT__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_HEARTBEAT, env.heartbeat = &h;
    if ((o = roundtrip(&env))) {
        CHECK(!o->heartbeat->has_attempt_id);
        vdn__envelope__free_unpacked(o, NULL);
    }
    Vdn__Disconnect d = VDN__DISCONNECT__INIT;
    d.reason = "bye";
    env.payload_case = VDN__ENVELOPE__PAYLOAD_DISCONNECT, env.disconnect = &d;
    if ((o = roundtrip(&env))) {
        CHECK(!strcmp(o->disconnect->reason, "bye"));
        vdn__envelope__free_unpacked(o, NULL);
    }
    Vdn__Cancel c = VDN__CANCEL__INIT;
    c.has_attempt_id = 1, c.attempt_id = 8;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_CANCEL, env.cancel = &c;
    if ((o = roundtrip(&env))) {
        CHECK(o->cancel->attempt_id == 8);
        vdn__envelope__free_unpacked(o, NULL);
    }
}

static void test_client_messages(void) {
    Vdn__RenderRequest r1 = VDN__RENDER_REQUEST__INIT, r2 = VDN__RENDER_REQUEST__INIT;
    r1.prompt_cache = "a", r2.prompt_cache = "b";
    Vdn__RenderRequest *rs[] = {&r1, &r2};
    Vdn__SubmitRequest s = VDN__SUBMIT_REQUEST__INIT;
    s.n_jobs = 2, s.jobs = rs, s.tag = "sweep", s.has_priority = 1, s.priority = -3;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.has_request_id = 1, env.request_id = 12345;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_SUBMIT, env.submit = &s;
    Vdn__Envelope *o = roundtrip(&env);
    if (o) {
        CHECK(o->request_id == 12345 && o->submit->n_jobs == 2 &&
              !strcmp(o->submit->jobs[1]->prompt_cache, "b") && o->submit->priority == -3 &&
              !strcmp(o->submit->tag, "sweep"));
        vdn__envelope__free_unpacked(o, NULL);
    }
    Vdn__Error e = VDN__ERROR__INIT;
    e.has_code = 1, e.code = VDN__ERROR__CODE__STALE_ATTEMPT, e.message = "stale";
    env.payload_case = VDN__ENVELOPE__PAYLOAD_ERROR, env.error = &e;
    if ((o = roundtrip(&env))) {
        CHECK(o->error->code == VDN__ERROR__CODE__STALE_ATTEMPT);
        CHECK(!strcmp(vdn_wire_error_name(o->error->code), "STALE_ATTEMPT"));
        vdn__envelope__free_unpacked(o, NULL);
    }
}

static void test_refusals(void) {
    char err[VDN_ERR_LEN];
    int code;
    Vdn__Heartbeat h = VDN__HEARTBEAT__INIT;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_HEARTBEAT, env.heartbeat = &h;
    size_t len;
    uint8_t *buf = vdn_wire_encode(&env, &len);
    /* byte 1 is the version varint (field 1 = 0x08, value 1): make it version 2 */
    CHECK(len >= 2 && buf[0] == 0x08 && buf[1] == 0x01);
    buf[1] = 0x02;
    CHECK(vdn_wire_decode(buf, len, &code, err, sizeof err) == NULL);
    CHECK(code == VDN__ERROR__CODE__BAD_VERSION && strstr(err, "protocol_version 2"));
    free(buf);
    CHECK(vdn_wire_decode("", 0, &code, err, sizeof err) == NULL &&
          code == VDN__ERROR__CODE__MALFORMED && strstr(err, "empty"));
    CHECK(vdn_wire_decode("\x08", 1, &code, err, sizeof err) == NULL &&
          code == VDN__ERROR__CODE__MALFORMED && strstr(err, "malformed"));
    CHECK(vdn_wire_decode("\x08\x01", 2, &code, err, sizeof err) == NULL &&
          code == VDN__ERROR__CODE__MALFORMED && strstr(err, "no payload"));
    CHECK(vdn_wire_decode("\x5a\x00", 2, &code, err, sizeof err) == NULL &&
          code == VDN__ERROR__CODE__BAD_VERSION);
}

static void test_keys(void) {
    char dir[] = "/tmp/vdn_test_wire_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char prefix[256], path[300], err[VDN_ERR_LEN], key[41], pub[41];
    snprintf(prefix, sizeof prefix, "%s/w1", dir);
    if (!vdn_curve_available()) {
        printf("libzmq without CURVE: key tests skipped\n");
        return;
    }
    CHECK(vdn_curve_keygen(prefix, err, sizeof err) == 0);
    CHECK(vdn_curve_keygen(prefix, err, sizeof err) == -1 && strstr(err, "refusing"));
    snprintf(path, sizeof path, "%s.key", prefix);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
    CHECK(vdn_curve_read_key(path, key, err, sizeof err) == 0);
    char derived[41];
    CHECK(zmq_curve_public(derived, key) == 0);
    snprintf(path, sizeof path, "%s.pub", prefix);
    CHECK(vdn_curve_read_key(path, pub, err, sizeof err) == 0 && !strcmp(pub, derived));
    FILE *f = fopen(path, "w");
    fputs("not a key\n", f);
    fclose(f);
    CHECK(vdn_curve_read_key(path, pub, err, sizeof err) == -1 && strstr(err, path) &&
          strstr(err, "40-character"));
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

static void test_loopback(void) {
    CHECK(vdn_endpoint_is_loopback("tcp://127.0.0.1:5555"));
    CHECK(vdn_endpoint_is_loopback("tcp://127.3.2.1:1"));
    CHECK(vdn_endpoint_is_loopback("tcp://localhost:5555"));
    CHECK(vdn_endpoint_is_loopback("tcp://[::1]:5555"));
    CHECK(vdn_endpoint_is_loopback("ipc:///tmp/x"));
    CHECK(!vdn_endpoint_is_loopback("tcp://0.0.0.0:5555"));
    CHECK(!vdn_endpoint_is_loopback("tcp://*:5555"));
    CHECK(!vdn_endpoint_is_loopback("tcp://10.0.0.1:5555"));
    CHECK(!vdn_endpoint_is_loopback("tcp://eth0:5555"));
    CHECK(!vdn_endpoint_is_loopback("tcp://[::]:5555"));
}

int main(void) {
    test_assign();
    test_worker_messages();
    test_client_messages();
    test_refusals();
    test_keys();
    test_loopback();
    return check_report("proto wire");
}
