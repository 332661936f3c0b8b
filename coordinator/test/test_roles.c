/* A farm many people share: the coordinator with --keys and a keys file written by `vdn keygen
 * --keys-file`, fake workers and clients each with their own CURVE key.
 * - a worker key pins its worker id: READY with another id is refused, so a second worker key
 *   cannot take over the first worker's attempts (its RESULT is refused, the job stays running);
 * - a client key is not let in on the workers' endpoint;
 * - roles: read only looks; submit submits and cancels/retries only its own batches; admin may
 *   touch anyone's and drain;
 * - tenants: a client's outputs go under users/NAME/, an `out` in another's folder or in the
 *   farm's own prefixes (prompt-cache/, PREFIX.snapshots/) is refused naming the field;
 * - limits: workers known at once, jobs per batch, a prompt's characters.
 * Usage: test_roles PATH/TO/vdn-coord-test */
#include <sqlite3.h>

#include "client.h"
#include "harness.h"

static char wep[128], cep[128], keys[300], cpub[400];

static vdn_client *client_as(const char *name) {
    static char key[400];
    snprintf(key, sizeof key, "%s/%s.key", keys, name);
    vdn_client_opts o = {cep, key, cpub, 3000, NULL};
    char err[VDN_ERR_LEN];
    vdn_client *c = vdn_client_open(&o, err, sizeof err);
    REQUIRE(c);
    return c;
}

static void spec(vdn_job_spec *s, const char *out) {
    memset(s, 0, sizeof *s);
    s->prompt_cache = "/data/prompt.safetensors";
    s->steps = 4, s->frames = 22, s->height = 64, s->width = 64;
    s->output_prefix = (char *)out;
}

/* Submits one job as `c`; returns the batch (0 when refused, with the message in err). */
static uint64_t submit_out(vdn_client *c, const char *out, uint64_t *job, char *err, size_t n) {
    vdn_job_spec s;
    spec(&s, out);
    uint64_t batch = 0, ids[1] = {0};
    err[0] = 0;
    if (vdn_client_submit(c, &s, 1, "t", 0, "test_roles", &batch, ids, err, n)) return 0;
    if (job) *job = ids[0];
    return batch;
}

static void keygen(const char *name, const char *role) {
    char out[2048];
    int rc = run_cli(out, sizeof out, "keygen --out %s/%s --keys-file %s/authorized_keys --role %s",
                     keys, name, keys, role);
    if (rc) fprintf(stderr, "%s", out);
    REQUIRE(rc == 0);
}

static Vdn__Envelope *expect_error(fake_worker *w, double timeout) {
    return fw_expect(w, VDN__ENVELOPE__PAYLOAD_ERROR, timeout);
}

static char *job_prefix(const char *db, uint64_t job) {
    sqlite3 *h;
    REQUIRE(sqlite3_open(db, &h) == SQLITE_OK);
    sqlite3_stmt *st;
    REQUIRE(sqlite3_prepare_v2(h, "SELECT output_prefix FROM jobs WHERE id=?", -1, &st, NULL) ==
            SQLITE_OK);
    sqlite3_bind_int64(st, 1, (sqlite3_int64)job);
    char *p = sqlite3_step(st) == SQLITE_ROW ? strdup((const char *)sqlite3_column_text(st, 0))
                                             : strdup("");
    sqlite3_finalize(st);
    sqlite3_close(h);
    return p;
}

static void test_shared_farm(void) {
    char db[300], out[2048], err[VDN_ERR_LEN], wkey[400];
    snprintf(db, sizeof db, "%s/r.db", h_tmp);
    snprintf(keys, sizeof keys, "%s/keys", h_tmp);
    snprintf(cpub, sizeof cpub, "%s/coordinator.pub", keys);
    REQUIRE(run_cli(out, sizeof out, "keygen --out %s/coordinator", keys) == 0);
    keygen("w1", "worker");
    keygen("w2", "worker");
    keygen("alice", "submit");
    keygen("bob", "submit");
    keygen("rita", "read");
    keygen("root", "admin");
    /* the keys file refuses a second entry of a name */
    CHECK(run_cli(out, sizeof out,
                  "keygen --out %s/alice2 --keys-file %s/authorized_keys --role "
                  "read --name alice",
                  keys, keys) != 0);
    CHECK(strstr(out, "name 'alice' is already a client") != NULL);
    pid_t pid = start_coordinator("--db", db, "--bind", wep, "--client-bind", cep, "--keys", keys,
                                  "--lease-seconds", "30", "--heartbeat-seconds", "5", "--store",
                                  "file:///tmp/store", NULL);

    /* a worker key pins its id */
    fake_worker a, b, intruder;
    snprintf(wkey, sizeof wkey, "%s/w1.key", keys);
    fw_open_curve(&a, wep, "w2", wkey, cpub);
    fw_ready(&a, "tiny", 1, 80ull << 30, 0);
    Vdn__Envelope *e = expect_error(&a, 3);
    CHECK(e && e->error->code == VDN__ERROR__CODE__FORBIDDEN &&
          strstr(e->error->message, "belongs to worker 'w1'"));
    if (e) vdn__envelope__free_unpacked(e, NULL);
    snprintf(a.id, sizeof a.id, "w1");
    fw_ready(&a, "tiny", 1, 80ull << 30, 0);

    vdn_client *alice = client_as("alice"), *bob = client_as("bob"), *rita = client_as("rita"),
               *root = client_as("root");
    uint64_t j1 = 0, b1 = submit_out(alice, NULL, &j1, err, sizeof err);
    REQUIRE(b1);
    e = fw_expect(&a, VDN__ENVELOPE__PAYLOAD_ASSIGN, 5);
    REQUIRE(e);
    uint64_t att = e->assign->attempt_id;
    a.attempt = att;
    /* tenants: the default output of alice's job is in her folder */
    char want[128];
    snprintf(want, sizeof want, "users/alice/batches/b%llu/j%llu/out", (unsigned long long)b1,
             (unsigned long long)j1);
    CHECK(e->assign->request && e->assign->request->output_prefix &&
          !strcmp(e->assign->request->output_prefix, want));
    vdn__envelope__free_unpacked(e, NULL);

    /* w2's key claims to be w1: refused, and its RESULT for w1's attempt counts for nothing */
    snprintf(wkey, sizeof wkey, "%s/w2.key", keys);
    fw_open_curve(&b, wep, "w1", wkey, cpub);
    b.alive = 0;
    fw_ready(&b, "tiny", 1, 80ull << 30, 0);
    e = expect_error(&b, 3);
    CHECK(e && e->error->code == VDN__ERROR__CODE__FORBIDDEN);
    if (e) vdn__envelope__free_unpacked(e, NULL);
    fw_result(&b, att, "users/alice/stolen.safetensors");
    e = expect_error(&b, 3);
    CHECK(e != NULL); /* unknown worker: it never got registered */
    if (e) vdn__envelope__free_unpacked(e, NULL);
    Vdn__StatusReply *st;
    char t[32];
    snprintf(t, sizeof t, "j%llu", (unsigned long long)j1);
    st = vdn_client_status(rita, t, err, sizeof err); /* read may look */
    REQUIRE(st && st->n_jobs == 1);
    CHECK(!strcmp(st->jobs[0]->state, "running"));
    vdn_client_free(st);

    /* a client key on the workers' endpoint is not let in at all */
    snprintf(wkey, sizeof wkey, "%s/alice.key", keys);
    fw_open_curve(&intruder, wep, "alice", wkey, cpub);
    intruder.alive = 0;
    fw_ready(&intruder, "tiny", 1, 80ull << 30, 0);
    CHECK(fw_recv(&intruder, 1.5) == NULL);

    /* roles and owners */
    char bt[32];
    snprintf(bt, sizeof bt, "b%llu", (unsigned long long)b1);
    int n = 0;
    CHECK(vdn_client_cancel(bob, bt, &n, err, sizeof err) != 0);
    CHECK(vdn_client_error_code(bob) == VDN__ERROR__CODE__FORBIDDEN && strstr(err, "alice"));
    CHECK(vdn_client_retry(bob, t, &n, err, sizeof err) != 0);
    CHECK(vdn_client_error_code(bob) == VDN__ERROR__CODE__FORBIDDEN);
    CHECK(submit_out(rita, NULL, NULL, err, sizeof err) == 0);
    CHECK(vdn_client_error_code(rita) == VDN__ERROR__CODE__FORBIDDEN && strstr(err, "read"));
    CHECK(vdn_client_cancel(rita, bt, &n, err, sizeof err) != 0);
    CHECK(vdn_client_drain(bob, "w1", 0, err, sizeof err) != 0);
    CHECK(vdn_client_error_code(bob) == VDN__ERROR__CODE__FORBIDDEN && strstr(err, "admin"));
    snprintf(t, sizeof t, "j%llu", (unsigned long long)j1);
    st = vdn_client_status(alice, t, err, sizeof err);
    REQUIRE(st && st->n_jobs == 1);
    CHECK(!strcmp(st->jobs[0]->state, "running")); /* none of the refusals touched it */
    vdn_client_free(st);
    /* everyone may look, and sees whose each batch is */
    Vdn__ListReply *lr = vdn_client_list(rita, NULL, 10, err, sizeof err);
    int owned = 0;
    for (size_t i = 0; lr && i < lr->n_batches; i++)
        owned |= lr->batches[i]->batch_id == b1 && lr->batches[i]->owner &&
                 !strcmp(lr->batches[i]->owner, "alice");
    CHECK(owned, "b%llu is not listed as alice's", (unsigned long long)b1);
    vdn_client_free(lr);
    /* alice's own cancel and retry work; so do an admin's */
    CHECK(vdn_client_cancel(alice, bt, &n, err, sizeof err) == 0 && n == 1);
    CHECK(vdn_client_retry(alice, bt, &n, err, sizeof err) == 0 && n == 1);
    CHECK(vdn_client_cancel(root, bt, &n, err, sizeof err) == 0 && n == 1);
    CHECK(vdn_client_drain(root, "w1", 0, err, sizeof err) == 0);
    CHECK(vdn_client_drain(root, "w1", 1, err, sizeof err) == 0);

    /* tenants: `out` confined to the owner's folder, the farm's prefixes refused */
    uint64_t j = 0;
    CHECK(submit_out(alice, "users/bob/x/out", NULL, err, sizeof err) == 0);
    CHECK(strstr(err, "field 'out'") && strstr(err, "outside your namespace users/alice/"));
    CHECK(submit_out(alice, "prompt-cache/0123", NULL, err, sizeof err) == 0);
    CHECK(strstr(err, "field 'out'") && strstr(err, "only the farm's workers"));
    CHECK(submit_out(root, "batches/b1/j1/out.snapshots/a1", NULL, err, sizeof err) == 0);
    CHECK(strstr(err, "field 'out'") && strstr(err, "snapshots"));
    CHECK(submit_out(alice, "runs/cat/out", &j, err, sizeof err) != 0);
    char *p = job_prefix(db, j);
    CHECK(!strcmp(p, "users/alice/runs/cat/out"));
    free(p);
    CHECK(submit_out(alice, "users/alice/runs/dog/out", &j, err, sizeof err) != 0);
    p = job_prefix(db, j);
    CHECK(!strcmp(p, "users/alice/runs/dog/out"));
    free(p);
    CHECK(submit_out(root, "eval/t1/p1/vdn/out", &j, err, sizeof err) != 0); /* admin: as given */
    p = job_prefix(db, j);
    CHECK(!strcmp(p, "eval/t1/p1/vdn/out"));
    free(p);
    CHECK(submit_out(bob, "eval/t1/p1/vdn/out", &j, err, sizeof err) != 0); /* in bob's folder */
    p = job_prefix(db, j);
    CHECK(!strcmp(p, "users/bob/eval/t1/p1/vdn/out"));
    free(p);

    vdn_client_close(alice), vdn_client_close(bob), vdn_client_close(rita), vdn_client_close(root);
    fw_close(&a), fw_close(&b), fw_close(&intruder);
    stop_coordinator(pid, SIGTERM);
}

/* Limits on what peers make the coordinator hold: --max-workers (a new id beyond it takes a gone
 * worker's place, else its READY is refused), --max-jobs-per-batch, --max-prompt-chars (counted
 * in characters, not bytes, and refused at submit). A farm without keys: the local user. */
static void test_limits(void) {
    char db[300], err[VDN_ERR_LEN];
    snprintf(db, sizeof db, "%s/l.db", h_tmp);
    pid_t pid = start_coordinator("--db", db, "--bind", wep, "--client-bind", cep,
                                  "--heartbeat-seconds", "5", "--max-workers", "2",
                                  "--max-jobs-per-batch", "3", "--max-prompt-chars", "10", NULL);
    fake_worker w[3];
    const char *ids[3] = {"l1", "l2", "l3"};
    vdn_client_opts o = {cep, NULL, NULL, 3000, NULL};
    vdn_client *c = vdn_client_open(&o, err, sizeof err);
    REQUIRE(c);
    for (int i = 0; i < 3; i++) {
        fw_open(&w[i], wep, ids[i]);
        w[i].alive = i < 2; /* l3 sends no heartbeats: its only answers are to its READYs */
        fw_ready(&w[i], "tiny", 1, 80ull << 30, 0);
        /* one after the other: READYs on separate connections may arrive in any order */
        for (double end = vdn_now() + 5; i < 2 && vdn_now() < end; sleep_s(0.05)) {
            Vdn__WorkersReply *wr = vdn_client_workers(c, err, sizeof err);
            size_t n = wr ? wr->n_workers : 0;
            vdn_client_free(wr);
            if (n == (size_t)i + 1) break;
        }
    }
    Vdn__Envelope *e = fw_expect(&w[2], VDN__ENVELOPE__PAYLOAD_ERROR, 3);
    CHECK(e && strstr(e->error->message, "--max-workers"), "the third worker was let in");
    if (e) vdn__envelope__free_unpacked(e, NULL);
    /* l1 says goodbye: l3 takes its place */
    Vdn__Disconnect d = VDN__DISCONNECT__INIT;
    d.reason = "test";
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_DISCONNECT;
    env.disconnect = &d;
    w[0].alive = 0;
    fw_send(&w[0], &env);
    sleep_s(0.3);
    fw_ready(&w[2], "tiny", 1, 80ull << 30, 0);
    CHECK(fw_expect(&w[2], VDN__ENVELOPE__PAYLOAD_ERROR, 1.5) == NULL,
          "l3 refused although l1 had gone");
    Vdn__WorkersReply *wr = vdn_client_workers(c, err, sizeof err);
    int seen3 = 0;
    for (size_t i = 0; wr && i < wr->n_workers; i++)
        seen3 |= !strcmp(wr->workers[i]->worker_id, "l3");
    CHECK(seen3, "l3 is not among the workers");
    vdn_client_free(wr);
    /* jobs per batch */
    vdn_job_spec s[4];
    for (int i = 0; i < 4; i++)
        spec(&s[i], NULL);
    uint64_t batch = 0;
    CHECK(vdn_client_submit(c, s, 4, "t", 0, "l", &batch, NULL, err, sizeof err) != 0 &&
              strstr(err, "4 jobs in one batch, above this coordinator's --max-jobs-per-batch 3"),
          "%s", err);
    CHECK(vdn_client_submit(c, s, 3, "t", 0, "l", &batch, NULL, err, sizeof err) == 0, "%s", err);
    /* prompt characters: ten e-acutes are 20 bytes and pass, eleven are refused */
    s[0].prompt_cache = NULL;
    s[0].prompt =
        "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9";
    CHECK(vdn_client_submit(c, s, 1, "t", 0, "l", &batch, NULL, err, sizeof err) == 0, "%s", err);
    s[0].prompt =
        "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9!";
    CHECK(vdn_client_submit(c, s, 1, "t", 0, "l", &batch, NULL, err, sizeof err) != 0 &&
              strstr(err, "field 'prompt': 11 characters, above this coordinator's "
                          "--max-prompt-chars 10"),
          "%s", err);
    vdn_client_close(c);
    for (int i = 0; i < 3; i++)
        fw_close(&w[i]);
    stop_coordinator(pid, SIGTERM);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_roles PATH/TO/vdn-coord-test\n");
        return 2;
    }
    harness_init(argv[1]);
    if (!vdn_curve_available()) {
        printf("SKIP: this libzmq has no CURVE\n");
        harness_cleanup();
        return 77;
    }
    snprintf(wep, sizeof wep, "tcp://127.0.0.1:%d", h_port(0));
    snprintf(cep, sizeof cep, "tcp://127.0.0.1:%d", h_port(1));
    double t0 = vdn_now();
    test_shared_farm();
    test_limits();
    if (failures) {
        harness_dump_log();
        fprintf(stderr, "%d checks failed\n", failures);
    }
    harness_cleanup();
    if (failures) return 1;
    printf("roles and tenants: all checks passed (%.1f s)\n", vdn_now() - t0);
    return 0;
}
