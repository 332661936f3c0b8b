/* Randomized soak (fixed seed, bounded time): four fake workers take 40 jobs from a real
 * coordinator and randomly succeed, fail, go silent and come back, and sometimes send a RESULT
 * for an attempt they lost. Afterwards the database must satisfy the invariants of
 * docs/schema.md: every job finished, each done job completed by exactly one attempt whose
 * result is the one recorded, no attempt left running, failed jobs used all their attempts.
 * Usage: test_soak PATH/TO/vdn-coord-test */
#include <sqlite3.h>

#include "client.h"
#include "harness.h"

enum { NW = 4, NJOBS = 40, MAX_ATTEMPTS = 5 };

typedef struct {
    fake_worker fw;
    int state; /* 0 idle, 1 working, 2 silent */
    uint64_t attempt;
    double until; /* silent until */
    uint64_t lost_attempt;
} sim;

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static void handle(sim *s) {
    for (;;) {
        Vdn__Envelope *e = fw_recv(&s->fw, 0.001);
        if (!e) return;
        switch (e->payload_case) {
        case VDN__ENVELOPE__PAYLOAD_ASSIGN:
            CHECK(s->state == 0); /* the coordinator never double-books a worker */
            s->state = 1;
            s->attempt = s->fw.attempt = e->assign->attempt_id;
            break;
        case VDN__ENVELOPE__PAYLOAD_CANCEL:
            if (s->state == 1 && e->cancel->attempt_id == s->attempt) {
                fw_fail(&s->fw, s->attempt, "cancelled", 0);
                s->state = 0;
                s->fw.attempt = 0;
            }
            break;
        case VDN__ENVELOPE__PAYLOAD_ERROR:
            if (e->error->code == VDN__ERROR__CODE__STALE_ATTEMPT && s->state == 1 &&
                e->error->attempt_id == s->attempt) {
                s->state = 0;
                s->fw.attempt = 0;
            }
            if (e->error->code == VDN__ERROR__CODE__UNKNOWN_WORKER)
                fw_ready(&s->fw, "tiny", 1, 1ull << 30, s->state == 1 ? s->attempt : 0);
            break;
        default:
            break;
        }
        vdn__envelope__free_unpacked(e, NULL);
    }
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    harness_init(argv[1]);
    char wep[64], cep[64], db[300], err[VDN_ERR_LEN], id[16];
    snprintf(wep, sizeof wep, "tcp://127.0.0.1:%d", h_port(0));
    snprintf(cep, sizeof cep, "tcp://127.0.0.1:%d", h_port(1));
    snprintf(db, sizeof db, "%s/soak.db", h_tmp);
    pid_t pid = start_coordinator("--db", db, "--bind", wep, "--client-bind", cep,
                                  "--heartbeat-seconds", "0.3", "--lease-seconds", "2",
                                  "--max-attempts", "5", "--blocklist-failures", "1000", NULL);
    vdn_client_opts o = {cep, NULL, NULL, 5000, NULL};
    vdn_client *c = vdn_client_open(&o, err, sizeof err);
    REQUIRE(c);
    vdn_job_spec specs[NJOBS];
    memset(specs, 0, sizeof specs);
    for (int i = 0; i < NJOBS; i++) {
        specs[i].prompt_cache = "/p.safetensors";
        specs[i].priority = i % 3;
        specs[i].has_priority = 1;
    }
    uint64_t batch;
    REQUIRE(vdn_client_submit(c, specs, NJOBS, "soak", 0, NULL, &batch, NULL, err, sizeof err) ==
            0);
    sim w[NW];
    for (int i = 0; i < NW; i++) {
        memset(&w[i], 0, sizeof w[i]);
        snprintf(id, sizeof id, "soak%d", i);
        fw_open(&w[i].fw, wep, id);
        fw_ready(&w[i].fw, "tiny", 1, 1ull << 30, 0);
    }
    double t0 = vdn_now(), next_check = t0 + 1;
    int finished = 0, stale_sent = 0;
    while (vdn_now() - t0 < 40 && !finished) {
        for (int i = 0; i < NW; i++) {
            sim *s = &w[i];
            if (s->state == 2) {
                if (vdn_now() < s->until) continue;
                /* back from a partition, having finished the lost attempt meanwhile: READY
                 * claiming it (it was requeued: must be cancelled), then its RESULT (must be
                 * refused); then the worker is free */
                s->fw.alive = 1;
                fw_ready(&s->fw, "tiny", 1, 1ull << 30, s->lost_attempt);
                fw_result(&s->fw, s->lost_attempt, "stale/result");
                stale_sent++;
                s->state = 0;
                s->attempt = s->fw.attempt = 0;
                continue;
            }
            handle(s);
            if (s->state != 1) continue;
            double u = urand();
            if (u < 0.25) {
                char key[48];
                snprintf(key, sizeof key, "k/%llu", (unsigned long long)s->attempt);
                fw_result(&s->fw, s->attempt, key);
                s->state = 0;
                s->fw.attempt = 0;
            } else if (u < 0.33) {
                fw_fail(&s->fw, s->attempt, "random failure", 1);
                s->state = 0;
                s->fw.attempt = 0;
            } else if (u < 0.36) {
                s->state = 2; /* silent: no heartbeats, no reading */
                s->fw.alive = 0;
                s->lost_attempt = s->attempt;
                s->until = vdn_now() + 2.0 + urand(); /* loss shows after 0.9-1.05 s */
            } else if (u < 0.6) {
                fw_progress(&s->fw, s->attempt, 1, 2);
            }
        }
        sleep_s(0.02);
        if (vdn_now() > next_check) {
            next_check = vdn_now() + 0.5;
            char t[32];
            snprintf(t, sizeof t, "b%llu", (unsigned long long)batch);
            Vdn__StatusReply *r = vdn_client_status(c, t, err, sizeof err);
            REQUIRE(r);
            finished = r->batches[0]->n_queued == 0 && r->batches[0]->n_running == 0;
            vdn_client_free(r);
        }
    }
    CHECK(finished);
    CHECK(stale_sent > 0);
    for (int i = 0; i < NW; i++)
        fw_close(&w[i].fw);
    vdn_client_close(c);
    stop_coordinator(pid, SIGTERM);

    sqlite3 *h;
    REQUIRE(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    static const struct {
        const char *what, *sql;
    } inv[] = {
        {"unfinished jobs", "SELECT count(*) FROM jobs WHERE state NOT IN ('done','failed')"},
        {"attempts still running", "SELECT count(*) FROM attempts WHERE state='running'"},
        {"done jobs without exactly one done attempt",
         "SELECT count(*) FROM jobs j WHERE state='done' AND (SELECT count(*) FROM attempts a "
         "WHERE a.job_id=j.id AND a.state='done') != 1"},
        {"done attempts of jobs that are not done",
         "SELECT count(*) FROM attempts a JOIN jobs j ON j.id=a.job_id WHERE a.state='done' AND "
         "j.state!='done'"},
        {"done jobs whose recorded result is not their completing attempt's",
         "SELECT count(*) FROM jobs WHERE state='done' AND object_keys != "
         "'[\"k/' || current_attempt || '\"]'"},
        {"failed jobs that did not use all attempts",
         "SELECT count(*) FROM jobs j WHERE state='failed' AND (SELECT count(*) FROM attempts a "
         "WHERE a.job_id=j.id AND a.state IN ('failed','expired')) != 5"},
        {"jobs with more attempts than allowed", "SELECT count(*) FROM jobs WHERE attempts > 5"},
        {"stale results accepted", "SELECT count(*) FROM jobs WHERE object_keys LIKE '%stale%'"},
    };
    for (size_t i = 0; i < sizeof inv / sizeof *inv; i++) {
        sqlite3_stmt *st;
        REQUIRE(sqlite3_prepare_v2(h, inv[i].sql, -1, &st, NULL) == SQLITE_OK);
        REQUIRE(sqlite3_step(st) == SQLITE_ROW);
        int n = sqlite3_column_int(st, 0);
        if (n) fprintf(stderr, "invariant broken: %d %s\n", n, inv[i].what);
        CHECK(n == 0);
        sqlite3_finalize(st);
    }
    sqlite3_stmt *st;
    sqlite3_prepare_v2(h,
                       "SELECT (SELECT count(*) FROM jobs WHERE state='done'), (SELECT count(*) "
                       "FROM attempts WHERE state='expired'), (SELECT count(*) FROM events WHERE "
                       "kind='stale_refused')",
                       -1, &st, NULL);
    sqlite3_step(st);
    int done = sqlite3_column_int(st, 0), expired = sqlite3_column_int(st, 1),
        stale = sqlite3_column_int(st, 2);
    sqlite3_finalize(st);
    sqlite3_close(h);
    /* the run exercised what it claims to: successes, lost workers, refused stale results */
    CHECK(done > NJOBS / 2 && expired > 0 && stale > 0);
    if (failures) harness_dump_log();
    harness_cleanup();
    if (failures) return 1;
    printf("soak: %d/%d done, %d expired attempts, %d stale messages refused (%.1f s)\n", done,
           NJOBS, expired, stale, vdn_now() - t0);
    return 0;
}
