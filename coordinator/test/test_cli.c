/* The client commands as a user runs them, against a real coordinator: submit (good file,
 * many bad lines, missing prompt cache), status/ls/logs/workers in human and --json form,
 * cancel/retry, watch without a TTY, exit codes; keygen and CURVE (a listed client key works,
 * an unlisted one is refused); the loopback-only rule without keys.
 * Usage: test_cli PATH/TO/vdn-coord-test */
#include <cjson/cJSON.h>
#include <sys/stat.h>

#include "client.h"
#include "engine.h"
#include "harness.h"

static char out[65536];

static void write_text(const char *path, const char *text) {
    char err[VDN_ERR_LEN];
    REQUIRE(vdn_write_file_atomic(path, text, strlen(text), err, sizeof err) == 0);
}

static void test_plain(void) {
    char wep[64], cep[64], db[300], cache[300], good[300], bad[300], text[2048];
    snprintf(wep, sizeof wep, "tcp://127.0.0.1:%d", h_port(0));
    snprintf(cep, sizeof cep, "tcp://127.0.0.1:%d", h_port(1));
    snprintf(db, sizeof db, "%s/cli.db", h_tmp);
    snprintf(cache, sizeof cache, "%s/cat.safetensors", h_tmp);
    snprintf(good, sizeof good, "%s/good.jsonl", h_tmp);
    snprintf(bad, sizeof bad, "%s/bad.jsonl", h_tmp);
    write_text(cache, "not really safetensors, the coordinator never opens it");
    write_text(good, "{\"prompt_file\": \"cat.safetensors\", \"num_steps\": 4, \"seed\": 1}\n"
                     "{\"prompt_cache\": \"cat.safetensors\", \"steps\": 4, \"variant\": "
                     "\"dense\", \"out\": \"runs/cat-dense\"}\n");
    snprintf(text, sizeof text,
             "{\"prompt_cache\": \"cat.safetensors\", \"steps\": 4}\n"
             "{\"prompt_cache\": \"dog.safetensors\"}\n"
             "{\"prompt_cache\": \"cat.safetensors\", \"height\": 33}\n"
             "{oops}\n");
    write_text(bad, text);

    /* unreachable coordinator: exit 3 with the endpoint named */
    CHECK(run_cli(out, sizeof out, "ls --coordinator %s --timeout 0.5", cep) == 3 &&
          strstr(out, cep));
    pid_t pid = start_coordinator("--db", db, "--bind", wep, "--client-bind", cep,
                                  "--heartbeat-seconds", "2", NULL);
    setenv("VDN_COORDINATOR", cep, 1);
    /* a second coordinator on the same database is refused */
    CHECK(run_cli(out, sizeof out,
                  "coordinator --db %s --bind tcp://127.0.0.1:%d --client-bind tcp://127.0.0.1:%d",
                  db, h_port(2), h_port(3)) == 1 &&
          strstr(out, "another coordinator") && strstr(out, ".lock"));

    int rc = run_cli(out, sizeof out, "submit %s", bad);
    CHECK(rc == 5);
    CHECK(strstr(out, "bad.jsonl:2: field 'prompt_cache'") && strstr(out, "dog.safetensors"));
    CHECK(strstr(out, "bad.jsonl:3: field 'height'"));
    CHECK(strstr(out, "bad.jsonl:4:") && strstr(out, "nothing submitted"));
    CHECK(!strstr(out, "bad.jsonl:1:"));
    CHECK(run_cli(out, sizeof out, "submit %s --json", bad) == 5);
    cJSON *ej = strstr(out, "{\"errors\"") ? cJSON_Parse(strstr(out, "{\"errors\"")) : NULL;
    CHECK(ej && cJSON_GetArraySize(cJSON_GetObjectItem(ej, "errors")) == 3);
    cJSON_Delete(ej);
    CHECK(run_cli(out, sizeof out, "ls --json") == 0);
    cJSON *j = cJSON_Parse(out);
    CHECK(j && cJSON_GetArraySize(cJSON_GetObjectItem(j, "batches")) == 0);
    cJSON_Delete(j);

    CHECK(run_cli(out, sizeof out, "submit %s --tag smoke --priority 3 --json", good) == 0);
    j = cJSON_Parse(out);
    CHECK(j && !strcmp(cJSON_GetObjectItem(j, "batch")->valuestring, "b1") &&
          cJSON_GetArraySize(cJSON_GetObjectItem(j, "jobs")) == 2);
    cJSON_Delete(j);
    CHECK(run_cli(out, sizeof out, "status") == 0 && strstr(out, "b1") && strstr(out, "smoke") &&
          strstr(out, "queued"));
    /* queued jobs say why they wait (no worker has registered) */
    CHECK(run_cli(out, sizeof out, "status b1") == 0 && strstr(out, "j1") && strstr(out, "j2") &&
              strstr(out, "waiting: "),
          "%s", out);
    CHECK(run_cli(out, sizeof out, "status j2") == 0 && strstr(out, "runs/cat-dense") &&
              strstr(out, "  waiting    "),
          "%s", out);
    CHECK(run_cli(out, sizeof out, "status j1 --json") == 0);
    j = cJSON_Parse(out);
    const cJSON *job = j ? cJSON_GetArrayItem(cJSON_GetObjectItem(j, "jobs"), 0) : NULL;
    const cJSON *req = job ? cJSON_GetObjectItem(job, "request") : NULL;
    CHECK(req && !strcmp(cJSON_GetObjectItem(req, "prompt_cache")->valuestring, cache) &&
          cJSON_GetObjectItem(req, "steps")->valueint == 4 &&
          cJSON_GetObjectItem(job, "priority")->valueint == 3);
    cJSON_Delete(j);
    CHECK(run_cli(out, sizeof out, "status j99") == 4 && strstr(out, "j99"));
    CHECK(run_cli(out, sizeof out, "status 5") == 2 && strstr(out, "ambiguous"));
    CHECK(run_cli(out, sizeof out, "ls --tag smoke") == 0 && strstr(out, "b1"));
    CHECK(run_cli(out, sizeof out, "ls --tag other --json") == 0 && !strstr(out, "\"b1\""));

    /* a worker takes j1; cancel the batch; watch (no TTY) prints lines and exits 1 */
    fake_worker w;
    char wid[32] = "cli-w";
    fw_open(&w, wep, wid);
    fw_ready(&w, "", 1, 1ull << 30, 0);
    Vdn__Envelope *e = fw_expect(&w, VDN__ENVELOPE__PAYLOAD_ASSIGN, 3);
    REQUIRE(e);
    uint64_t a = e->assign->attempt_id;
    w.attempt = a;
    vdn__envelope__free_unpacked(e, NULL);
    fw_progress(&w, a, 2, 4);
    /* the PROGRESS and our queries travel on different sockets: wait until it has counted */
    {
        vdn_client_opts po = {cep, NULL, NULL, 3000, NULL};
        char perr[VDN_ERR_LEN];
        vdn_client *pc = vdn_client_open(&po, perr, sizeof perr);
        REQUIRE(pc);
        int seen = 0;
        for (double end = vdn_now() + 10; !seen && vdn_now() < end; sleep_s(0.05)) {
            Vdn__StatusReply *r = vdn_client_status(pc, "j1", perr, sizeof perr);
            seen = r && r->n_jobs == 1 && r->jobs[0]->nfe_done == 2;
            vdn_client_free(r);
        }
        CHECK(seen);
        vdn_client_close(pc);
    }
    CHECK(run_cli(out, sizeof out, "workers") == 0 && strstr(out, "cli-w") && strstr(out, "busy"));
    CHECK(run_cli(out, sizeof out, "watch b1 --interval 0.2 --timeout 2 & sleep 0.6; %s cancel b1",
                  h_bin) == 0);
    CHECK(strstr(out, "2/4 NFE") && strstr(out, "cancelled 2 job(s) of b1"));
    e = fw_expect(&w, VDN__ENVELOPE__PAYLOAD_CANCEL, 3);
    CHECK(e && e->cancel->attempt_id == a);
    if (e) vdn__envelope__free_unpacked(e, NULL);
    CHECK(run_cli(out, sizeof out, "watch b1") == 1 && strstr(out, "2 cancelled"));
    /* on a terminal: one screen redrawn in place (home, each line cleared to its end, the rest
     * cleared) with the batch's bar, a bar per job and the workers; a 46-column terminal cuts
     * lines instead of wrapping them, and an idle worker's job reads "-" */
    CHECK(run_cli(out, sizeof out, "!script -qec 'stty cols 46 rows 20; %s watch b1' /dev/null",
                  h_bin) == 1);
    CHECK(strstr(out, "\033[H") && strstr(out, "\033[K") && strstr(out, "\033[J"));
    CHECK(strstr(out, "2 cancelled") && strstr(out, "ended in"));
    CHECK(strstr(out, "j1") && strstr(out, "cancelled [...."));
    CHECK(strstr(out, "WORKER") && strstr(out, "cli-w"));
    int widest = 0, cur = 0;
    for (const char *p = out; *p; p++) {
        if (*p == '\033') { /* skip the escape sequence */
            while (p[1] && !((p[1] >= 'A' && p[1] <= 'Z') || (p[1] >= 'a' && p[1] <= 'z')))
                p++;
            if (p[1]) p++;
            continue;
        }
        if (*p == '\n' || *p == '\r') {
            cur = 0;
            continue;
        }
        if (++cur > widest) widest = cur;
    }
    CHECK(widest <= 46);
    if (widest > 46 || !strstr(out, "ended in"))
        fprintf(stderr, "watch on a 46-column terminal printed:\n%s\n", out);
    CHECK(run_cli(out, sizeof out, "logs j1") == 0 && strstr(out, "assigned") &&
          strstr(out, "cancelled") && strstr(out, "cli-w"));
    CHECK(run_cli(out, sizeof out, "logs b1") == 2);
    CHECK(run_cli(out, sizeof out, "retry b1") == 0 && strstr(out, "requeued 2 job(s)"));
    CHECK(run_cli(out, sizeof out, "drain nobody") == 4);
    CHECK(run_cli(out, sizeof out, "drain cli-w") == 0 && strstr(out, "draining"));
    CHECK(run_cli(out, sizeof out, "status --bogus") == 2);
    fw_close(&w);
    unsetenv("VDN_COORDINATOR");
    /* --dir DIR/vdn.conf finds the coordinator, as `vdn up` writes it */
    char conf[400], cdir[300];
    snprintf(cdir, sizeof cdir, "%s/farm", h_tmp);
    mkdir(cdir, 0755);
    snprintf(conf, sizeof conf, "%s/vdn.conf", cdir);
    snprintf(text, sizeof text, "client_endpoint = %s\nworker_endpoint = %s\n", cep, wep);
    write_text(conf, text);
    CHECK(run_cli(out, sizeof out, "ls --dir %s", cdir) == 0 && strstr(out, "b1"));
    /* no flag, no $VDN_COORDINATOR: ./vdn.conf of the folder we are in (a `vdn up .` farm) */
    CHECK(run_cli(out, sizeof out, "!cd %s && %s ls", cdir, h_bin) == 0 && strstr(out, "b1"));
    CHECK(run_cli(out, sizeof out, "!cd %s && %s status b1 --json", cdir, h_bin) == 0 &&
          strstr(out, "\"jobs\""));
    /* a farm that is not running: the error says which config named the endpoint */
    char dead[300], dconf[400];
    snprintf(dead, sizeof dead, "%s/deadfarm", h_tmp);
    mkdir(dead, 0755);
    snprintf(dconf, sizeof dconf, "%s/vdn.conf", dead);
    snprintf(text, sizeof text, "client_endpoint = tcp://127.0.0.1:%d\n", h_port(2));
    write_text(dconf, text);
    CHECK(run_cli(out, sizeof out, "!cd %s && %s ls --timeout 0.3", dead, h_bin) == 3 &&
          strstr(out, "endpoint from ./vdn.conf"));
    /* an explicit $VDN_COORDINATOR or --coordinator wins over ./vdn.conf */
    CHECK(run_cli(out, sizeof out, "!cd %s && VDN_COORDINATOR=%s %s ls", dead, cep, h_bin) == 0 &&
          strstr(out, "b1"));
    CHECK(run_cli(out, sizeof out, "!cd %s && %s ls --coordinator %s", dead, h_bin, cep) == 0 &&
          strstr(out, "b1"));
    CHECK(run_cli(out, sizeof out,
                  "!cd %s && VDN_COORDINATOR=tcp://127.0.0.1:%d %s ls --timeout 0.3", cdir,
                  h_port(2), h_bin) == 3 &&
          strstr(out, "endpoint from $VDN_COORDINATOR"));
    /* a broken ./vdn.conf is named with its line, not silently skipped */
    write_text(dconf, "client_endpoint tcp://127.0.0.1:1\n");
    CHECK(run_cli(out, sizeof out, "!cd %s && %s ls", dead, h_bin) != 0 &&
          strstr(out, "./vdn.conf:1: expected 'key = value'"));

    /* watch keeps going through a coordinator restart */
    char wout[400], wpid[400], cmd[2048];
    snprintf(wout, sizeof wout, "%s/watch.out", h_tmp);
    snprintf(wpid, sizeof wpid, "%s/watch.pid", h_tmp);
    snprintf(cmd, sizeof cmd,
             "VDN_COORDINATOR=%s %s watch b1 --interval 0.2 --timeout 0.5 > %s 2>&1 & echo $! > %s",
             cep, h_bin, wout, wpid);
    REQUIRE(system(cmd) == 0);
    sleep_s(0.5);
    stop_coordinator(pid, SIGKILL);
    sleep_s(1.2);
    pid = start_coordinator("--db", db, "--bind", wep, "--client-bind", cep, NULL);
    CHECK(run_cli(out, sizeof out, "cancel b1 --coordinator %s", cep) == 0);
    size_t len;
    char err[VDN_ERR_LEN], *pidtext = vdn_read_file(wpid, &len, err, sizeof err);
    pid_t watcher = pidtext ? (pid_t)atoi(pidtext) : 0;
    free(pidtext);
    for (int i = 0; i < 100 && watcher > 0 && kill(watcher, 0) == 0; i++)
        sleep_s(0.1);
    CHECK(watcher > 0 && kill(watcher, 0) != 0); /* it ended by itself */
    char *wtext = vdn_read_file(wout, &len, err, sizeof err);
    CHECK(wtext && strstr(wtext, "still trying") && strstr(wtext, "coordinator is back") &&
          strstr(wtext, "2 cancelled"));
    free(wtext);
    stop_coordinator(pid, SIGTERM);
    CHECK(run_cli(out, sizeof out, "status --db %s b1", db) == 0 && strstr(out, "j2"));
    CHECK(run_cli(out, sizeof out, "logs j1 --db %s", db) == 0 && strstr(out, "retried"));
}

static void test_curve(void) {
    char keys[300], aw[320], ac[320], cmd[2048], db[300], wep[64], cep[64];
    snprintf(keys, sizeof keys, "%s/keys", h_tmp);
    snprintf(aw, sizeof aw, "%s/authorized_workers", keys);
    snprintf(ac, sizeof ac, "%s/authorized_clients", keys);
    snprintf(db, sizeof db, "%s/curve.db", h_tmp);
    snprintf(wep, sizeof wep, "tcp://127.0.0.1:%d", h_port(0));
    snprintf(cep, sizeof cep, "tcp://127.0.0.1:%d", h_port(1));
    CHECK(run_cli(out, sizeof out, "keygen --out %s/coordinator", keys) == 0);
    CHECK(run_cli(out, sizeof out, "keygen --out %s/alice", h_tmp) == 0);
    CHECK(run_cli(out, sizeof out, "keygen --out %s/mallory", h_tmp) == 0);
    CHECK(run_cli(out, sizeof out, "keygen --out %s/w1", h_tmp) == 0);
    CHECK(run_cli(out, sizeof out, "keygen --out %s/alice", h_tmp) == 6 && strstr(out, "refusing"));
    struct stat st;
    char p[400];
    snprintf(p, sizeof p, "%s/alice.key", h_tmp);
    CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0600);
    snprintf(cmd, sizeof cmd, "mkdir -p %s %s && cp %s/alice.pub %s/ && cp %s/w1.pub %s/", aw, ac,
             h_tmp, ac, h_tmp, aw);
    REQUIRE(system(cmd) == 0);
    pid_t pid =
        start_coordinator("--db", db, "--bind", wep, "--client-bind", cep, "--keys", keys, NULL);
    CHECK(run_cli(out, sizeof out,
                  "ls --coordinator %s --key %s/alice.key --coordinator-key %s/coordinator.pub",
                  cep, h_tmp, keys) == 0 &&
          strstr(out, "no batches"));
    CHECK(run_cli(out, sizeof out,
                  "ls --coordinator %s --key %s/mallory.key --coordinator-key %s/coordinator.pub "
                  "--timeout 1",
                  cep, h_tmp, keys) == 3);
    /* no key at all: CURVE handshake never completes */
    CHECK(run_cli(out, sizeof out, "ls --coordinator %s --timeout 1", cep) == 3);
    /* a worker key is not a client key */
    CHECK(run_cli(out, sizeof out,
                  "ls --coordinator %s --key %s/w1.key --coordinator-key %s/coordinator.pub "
                  "--timeout 1",
                  cep, h_tmp, keys) == 3);
    /* the library's view: alice works, mallory gets the unreachable code */
    char ak[400], mk[400], ck[400], err[VDN_ERR_LEN];
    snprintf(ak, sizeof ak, "%s/alice.key", h_tmp);
    snprintf(mk, sizeof mk, "%s/mallory.key", h_tmp);
    snprintf(ck, sizeof ck, "%s/coordinator.pub", keys);
    vdn_client_opts o = {cep, ak, ck, 2000, NULL};
    vdn_client *c = vdn_client_open(&o, err, sizeof err);
    REQUIRE(c);
    Vdn__WorkersReply *wr = vdn_client_workers(c, err, sizeof err);
    CHECK(wr != NULL);
    vdn_client_free(wr);
    vdn_client_close(c);
    o.key = mk;
    o.timeout_ms = 800;
    c = vdn_client_open(&o, err, sizeof err);
    REQUIRE(c);
    CHECK(vdn_client_workers(c, err, sizeof err) == NULL &&
          vdn_client_error_code(c) == VDN_CLIENT_E_UNREACHABLE);
    vdn_client_close(c);
    /* authorize mallory and SIGHUP: the new key list applies without a restart */
    snprintf(cmd, sizeof cmd, "cp %s/mallory.pub %s/", h_tmp, ac);
    REQUIRE(system(cmd) == 0);
    kill(pid, SIGHUP);
    /* new connections are checked against the new lists once the coordinator says so */
    int reloaded = 0;
    for (double end = vdn_now() + 10; !reloaded && vdn_now() < end; sleep_s(0.05)) {
        size_t ll;
        char *lt0 = vdn_read_file(h_log, &ll, err, sizeof err);
        reloaded = lt0 && strstr(lt0, "CURVE keys reloaded") != NULL;
        free(lt0);
    }
    CHECK(reloaded);
    CHECK(run_cli(out, sizeof out,
                  "ls --coordinator %s --key %s/mallory.key --coordinator-key %s/coordinator.pub "
                  "--timeout 3",
                  cep, h_tmp, keys) == 0);
    stop_coordinator(pid, SIGTERM);
    /* the refusal was logged with the offending public key, never a secret key */
    char logtext[65536];
    size_t len;
    char *lt = vdn_read_file(h_log, &len, err, sizeof err);
    REQUIRE(lt);
    snprintf(logtext, sizeof logtext, "%s", lt);
    free(lt);
    char sec[64], pub[64];
    snprintf(p, sizeof p, "%s/mallory.pub", h_tmp);
    lt = vdn_read_file(p, &len, err, sizeof err);
    snprintf(pub, sizeof pub, "%.40s", lt ? lt : "");
    free(lt);
    CHECK(strstr(logtext, "refused") && strstr(logtext, pub) && strstr(logtext, "reloaded"));
    const char *secrets[] = {"coordinator.key", "alice.key", "mallory.key"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", i ? h_tmp : keys, secrets[i]);
        lt = vdn_read_file(p, &len, err, sizeof err);
        snprintf(sec, sizeof sec, "%.40s", lt ? lt : "");
        free(lt);
        CHECK(strlen(sec) == 40 && !strstr(logtext, sec));
    }
    /* without keys, a non-loopback bind is refused */
    CHECK(run_cli(out, sizeof out, "coordinator --db %s --bind tcp://0.0.0.0:%d", db, h_port(0)) ==
              2 &&
          strstr(out, "loopback"));
    /* a keys folder without a keys file or the authorized folders is a clear error */
    snprintf(cmd, sizeof cmd, "rm -rf %s %s", aw, ac);
    REQUIRE(system(cmd) == 0);
    CHECK(run_cli(out, sizeof out, "coordinator --db %s --bind %s --client-bind %s --keys %s", db,
                  wep, cep, keys) != 0 &&
          strstr(out, "authorized_keys") && strstr(out, "authorized_workers"));
}

/* Sizes no GPU can hold are refused at submit with the line and the numbers (memfit.h): against
 * --gpu-memory-limit while no worker advertises GPU memory, then against the most room a
 * registered worker's GPU has beside what its engine keeps loaded (memory in use while free). */
static void test_memory(void) {
    char wep[64], cep[64], db[300], req[300], text[2048], want[256];
    snprintf(wep, sizeof wep, "tcp://127.0.0.1:%d", h_port(0));
    snprintf(cep, sizeof cep, "tcp://127.0.0.1:%d", h_port(1));
    snprintf(db, sizeof db, "%s/mem.db", h_tmp);
    snprintf(req, sizeof req, "%s/mem.jsonl", h_tmp);
    pid_t pid = start_coordinator("--db", db, "--bind", wep, "--client-bind", cep,
                                  "--gpu-memory-limit", "40", NULL);
    setenv("VDN_COORDINATOR", cep, 1);
    const char *small = "{\"prompt_cache\": \"s3://b/p.safetensors\", \"frames\": 56, "
                        "\"height\": 32, \"width\": 32}\n";
    const char *medium = "{\"prompt_cache\": \"s3://b/p.safetensors\", \"frames\": 345, "
                         "\"height\": 1088, \"width\": 1920}\n";
    const char *huge = "{\"prompt_cache\": \"s3://b/p.safetensors\", \"frames\": 721, "
                       "\"height\": 2176, \"width\": 3840%s}\n";
    /* H3: per row 2 bytes x (3 x 5376 + 6 x 56 x 128); a feed-forward piece 2 x 16384 x 3 x
     * 14336; weights 2 x 50 x (4 x 5376 x 7168 + 3 x 5376 x 14336) */
    const double per_row = 2.0 * (3 * 5376 + 6 * 56 * 128), piece = 2.0 * 16384 * 3 * 14336,
                 weights = 2.0 * 50 * (4.0 * 5376 * 7168 + 3.0 * 5376 * 14336), gib = 1 << 30;
    long long rows_m = 1 + (long long)vdn_latent_frames(345) * 34 * 60 + 2 * vdn_audio_latents(345);
    long long rows_h =
        1 + (long long)vdn_latent_frames(721) * 68 * 120 + 2 * vdn_audio_latents(721);
    CHECK(rows_h < (1 << 21), "the huge request must pass the row limit: %lld rows", rows_h);

    /* --dry-run: the estimate of each line, nothing submitted (no coordinator asked) */
    snprintf(text, sizeof text,
             "%s{\"prompt_cache\": \"s3://b/p.safetensors\", \"frames\": 345, \"height\": 1088, "
             "\"width\": 1920, \"steps\": 30}\n",
             small);
    write_text(req, text);
    CHECK(run_cli(out, sizeof out, "submit %s --dry-run", req) == 0, "%s", out);
    snprintf(want, sizeof want,
             "mem.jsonl:2: 345 frames x 1088 x 1920, 30 steps: cost %.4g NFE pixel-frames, %lld "
             "sequence rows, at least %.1f GiB of GPU memory",
             30.0 * 345 * 1088 * 1920, rows_m, (weights + rows_m * per_row + piece) / gib);
    CHECK(strstr(out, want) && strstr(out, "nothing submitted (--dry-run)"), "wanted '%s' in:\n%s",
          want, out);
    /* no worker yet: the configured 40 GiB, the H3 weights counted */
    snprintf(text, sizeof text, "%s%s", small, medium);
    write_text(req, text);
    CHECK(run_cli(out, sizeof out, "submit %s", req) == 5, "%s", out);
    snprintf(want, sizeof want,
             "mem.jsonl:2: frames x height x width = 345 x 1088 x 1920 need at "
             "least %.1f GiB",
             (weights + rows_m * per_row + piece) / gib);
    CHECK(strstr(out, want) && strstr(out, "--gpu-memory-limit of 40.0 GiB") &&
              strstr(out, "nothing submitted") && !strstr(out, "mem.jsonl:1:"),
          "wanted '%s' in:\n%s", want, out);
    snprintf(want, sizeof want, "%lld sequence rows x 115.5 KiB", rows_m);
    CHECK(strstr(out, want), "wanted '%s' in:\n%s", want, out);
    write_text(req, small);
    CHECK(run_cli(out, sizeof out, "submit %s", req) == 0, "a small job under 40 GiB: %s", out);

    /* a worker with a 141 GiB GPU whose engine holds 40 GiB while free: 101 GiB of room */
    fake_worker w;
    fw_open(&w, wep, "big-gpu");
    Vdn__Gpu g = VDN__GPU__INIT, *gp = &g;
    g.has_index = g.has_memory_bytes = g.has_memory_used = 1;
    g.memory_bytes = 141ull << 30, g.memory_used = 40ull << 30;
    Vdn__Ready r = VDN__READY__INIT;
    r.worker_id = w.id, r.n_gpus = 1, r.gpus = &gp, r.checkpoint = "VDN-H3";
    r.engine_version = "test";
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_READY, env.ready = &r;
    fw_send(&w, &env);
    sleep_s(0.5);
    char hugeline[512], huge2[512];
    snprintf(hugeline, sizeof hugeline, huge, "");
    snprintf(huge2, sizeof huge2, huge, ", \"gpus\": 2");
    snprintf(text, sizeof text, "# comment\n%s%s%s", medium, hugeline, huge2);
    write_text(req, text);
    CHECK(run_cli(out, sizeof out, "submit %s --allow-wait", req) == 5, "%s", out);
    snprintf(want, sizeof want,
             "mem.jsonl:3: frames x height x width = 721 x 2176 x 3840 need at "
             "least %.1f GiB of GPU memory beside the loaded model (%lld sequence rows",
             (rows_h * per_row + piece) / gib, rows_h);
    CHECK(strstr(out, want) && strstr(out, "101.0 GiB of 141.0 GiB on big-gpu") &&
              !strstr(out, "mem.jsonl:2:") && !strstr(out, "mem.jsonl:4:"),
          "wanted '%s' (and lines 2 and 4, medium and the huge one over 2 GPUs, accepted):\n%s",
          want, out);
    /* without the refused line the batch goes in: the configured limit no longer applies
     * (--allow-wait: no registered worker has the 2 GPUs of line 2; without it, that is said
     * together with the memory check's findings) */
    snprintf(text, sizeof text, "%s%s", medium, huge2);
    write_text(req, text);
    CHECK(run_cli(out, sizeof out, "submit %s --allow-wait", req) == 0, "%s", out);
    snprintf(text, sizeof text, "# comment\n%s%s%s", medium, hugeline, huge2);
    write_text(req, text);
    CHECK(run_cli(out, sizeof out, "submit %s", req) == 5 && strstr(out, want) &&
              strstr(out, "mem.jsonl:4: field 'gpus': no worker with 2 GPUs"),
          "%s", out);
    fw_close(&w);
    stop_coordinator(pid, SIGTERM);
    unsetenv("VDN_COORDINATOR");
}

/* Sizes by cost (cost.h) through `vdn submit`: with --max-job-seconds and --max-job-memory and
 * one registered H200 worker (bf16 and fp8), a request over either cap is refused naming its
 * line, the field, the estimate on that kind and the cap; one under both is accepted; --dry-run
 * prints each job's memory and its seconds on the registered kinds. The seconds are worked out
 * here from the H200 figures of docs/PERF.md (13.82 / 11.55 s a model evaluation at the H3
 * workload's 103,903 rows, 10.1 s to decode its 345 frames at 768 x 1344). */
static void test_caps(void) {
    char wep[64], cep[64], db[300], req[300], text[2048], want[400];
    snprintf(wep, sizeof wep, "tcp://127.0.0.1:%d", h_port(0));
    snprintf(cep, sizeof cep, "tcp://127.0.0.1:%d", h_port(1));
    snprintf(db, sizeof db, "%s/caps.db", h_tmp);
    snprintf(req, sizeof req, "%s/caps.jsonl", h_tmp);
    pid_t pid = start_coordinator("--db", db, "--bind", wep, "--client-bind", cep,
                                  "--max-job-seconds", "3600", "--max-job-memory", "100", NULL);
    setenv("VDN_COORDINATOR", cep, 1);
    fake_worker w;
    fw_open(&w, wep, "h200");
    Vdn__Gpu g = VDN__GPU__INIT, *gp = &g;
    g.has_index = g.has_memory_bytes = g.has_memory_used = 1;
    g.name = "NVIDIA H200", g.memory_bytes = 141ull << 30, g.memory_used = 40ull << 30;
    char *precs[] = {"bf16", "fp8"};
    Vdn__Ready r = VDN__READY__INIT;
    r.worker_id = w.id, r.n_gpus = 1, r.gpus = &gp, r.checkpoint = "VDN-H3";
    r.engine_version = "test", r.backend = "cuda", r.n_precisions = 2, r.precisions = precs;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_READY, env.ready = &r;
    fw_send(&w, &env);
    sleep_s(0.5);
    const char *under = "{\"prompt_cache\": \"s3://b/p.safetensors\", \"frames\": 345, "
                        "\"height\": 768, \"width\": 1344, \"steps\": 8, \"precision\": "
                        "\"fp8\"}\n";
    const char *slow = "{\"prompt_cache\": \"s3://b/p.safetensors\", \"frames\": 2000, "
                       "\"height\": 768, \"width\": 1344, \"steps\": 60, \"precision\": "
                       "\"fp8\"}\n";
    const char *big = "{\"prompt_cache\": \"s3://b/p.safetensors\", \"frames\": 2000, "
                      "\"height\": 768, \"width\": 1344, \"steps\": 1}\n";
    const double R = 1 + (double)vdn_latent_frames(2000) * 24 * 42 + 2 * vdn_audio_latents(2000);
    const double R0 = 1 + (double)vdn_latent_frames(345) * 24 * 42 + 2 * vdn_audio_latents(345);
    snprintf(text, sizeof text, "%s%s%s", under, slow, big);
    write_text(req, text);
    CHECK(run_cli(out, sizeof out, "submit %s", req) == 5, "%s", out);
    snprintf(want, sizeof want,
             "caps.jsonl:2: field 'frames': 2000 x 768 x 1344 x 60 steps is an estimated %.1f "
             "min on NVIDIA H200 fp8",
             (60 * 11.55 * R / 103903 + 10.1 * 2000 / 345) / 60);
    CHECK(strstr(out, want) && strstr(out, "--max-job-seconds 3600") &&
              strstr(out, "caps.jsonl:3: field 'frames': 2000 frames x 768 x 1344 need at least") &&
              strstr(out, "--max-job-memory 100.0 GiB") && !strstr(out, "caps.jsonl:1:") &&
              strstr(out, "nothing submitted"),
          "wanted '%s' and line 3 over the memory cap in:\n%s", want, out);
    write_text(req, under);
    CHECK(run_cli(out, sizeof out, "submit %s", req) == 0, "under the caps: %s", out);
    /* the dry run: the registered kind at each job's precision */
    snprintf(text, sizeof text, "%s%s", under, big);
    write_text(req, text);
    CHECK(run_cli(out, sizeof out, "submit %s --dry-run", req) == 0, "%s", out);
    char w1[200], w2[200];
    snprintf(w1, sizeof w1, "  NVIDIA H200 fp8, 1 worker(s): estimated %.1f s (%.1f s a model",
             8 * 11.55 * R0 / 103903 + 10.1, 11.55 * R0 / 103903);
    snprintf(w2, sizeof w2, "  NVIDIA H200 bf16, 1 worker(s): estimated %.1f min (%.1f s a model",
             (13.82 * R / 103903 + 10.1 * 2000 / 345) / 60, 13.82 * R / 103903);
    CHECK(strstr(out, "estimates on the 1 worker(s) registered with the coordinator") &&
              strstr(out, w1) && strstr(out, w2) && strstr(out, "of H3 fp8 weights") &&
              strstr(out, "nothing submitted (--dry-run)"),
          "wanted '%s' and '%s' in:\n%s", w1, w2, out);
    fw_close(&w);
    stop_coordinator(pid, SIGTERM);
    unsetenv("VDN_COORDINATOR");
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_cli PATH/TO/vdn-coord-test\n");
        return 2;
    }
    harness_init(argv[1]);
    double t0 = vdn_now();
    test_plain();
    fprintf(stderr, "cli done (%.1f s)\n", vdn_now() - t0);
    test_curve();
    fprintf(stderr, "curve done (%.1f s)\n", vdn_now() - t0);
    test_memory();
    fprintf(stderr, "memory check done (%.1f s)\n", vdn_now() - t0);
    test_caps();
    fprintf(stderr, "caps done (%.1f s)\n", vdn_now() - t0);
    if (failures) {
        harness_dump_log();
        fprintf(stderr, "%d checks failed\n", failures);
    }
    harness_cleanup();
    if (failures) return 1;
    printf("cli: all checks passed (%.1f s)\n", vdn_now() - t0);
    return 0;
}
