/* `vdn coordinator`: options, sockets, and the main loop (the database's only writer). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>
#include <zmq.h>

#include "commands.h"
#include "coord.h"
#include "curve.h"
#include "db.h"
#include "http.h"
#include "vdn_util.h"
#include "wire.h"

static volatile sig_atomic_t stop_requested, reload_requested;
static void on_signal(int sig) {
    if (sig == SIGHUP)
        reload_requested = 1;
    else
        stop_requested = 1;
}

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: vdn coordinator --db FILE [--bind tcp://127.0.0.1:5555]\n"
        "                       [--client-bind tcp://127.0.0.1:5556] [--store URI]\n"
        "                       [--lease-seconds 60] [--heartbeat-seconds 5]\n"
        "                       [--max-attempts 3] [--max-worker-faults 20]\n"
        "                       [--blocklist-failures 3]\n"
        "                       [--blocklist-seconds 300] [--keys DIR]\n"
        "                       [--max-crashes 3] [--crash-window 3600]\n"
        "                       [--gpu-memory-limit GIB] [--max-job-seconds S]\n"
        "                       [--max-job-memory GIB] [--job-rate MATCH[/PREC]=S ...]\n"
        "                       [--max-workers 1024]\n"
        "                       [--max-jobs-per-batch 10000] [--max-prompt-chars 16384]\n"
        "                       [--stall-seconds 900] [--stall-factor 10]\n"
        "                       [--http 127.0.0.1:8080 [--http-token-file FILE]\n"
        "                        [--http-cert PEM --http-key PEM] [--media-cache DIR]\n"
        "                        [--media-cache-mb 2048] [--store-retry-seconds 10]]\n"
        "\n"
        "Keeps every job in SQLite (WAL) and hands them to workers over ZeroMQ.\n"
        "--keys DIR turns on CURVE: DIR/coordinator.key (+ .pub), DIR/authorized_workers/*.pub,\n"
        "DIR/authorized_clients/*.pub (make keys with `vdn keygen`; SIGHUP re-reads the\n"
        "authorized folders). Without --keys only loopback endpoints are allowed.\n"
        "--max-attempts N: ended attempts a job may use that were not lost with their\n"
        "worker; --max-worker-faults N: attempts lost with a worker (killed, vanished, lease\n"
        "run out, GPU fault), which never count as attempts (docs/cluster.md \"Failures\").\n"
        "A request no registered worker's GPU can hold is refused at submit (docs/cluster.md\n"
        "\"Memory check at submit\"); --gpu-memory-limit GIB is the GPU size checked against\n"
        "while no worker advertises GPU memory (default: no check then).\n"
        "Sizes by cost (docs/cluster.md \"Sizes by cost\"): --max-job-seconds S refuses a\n"
        "request estimated to take longer than S seconds on the fastest registered worker\n"
        "kind (backend, GPU, precision), --max-job-memory GIB one needing more GPU memory (both\n"
        "off by default); --job-rate MATCH[/bf16|/fp8]=S (repeatable) sets the rate table's\n"
        "seconds per model evaluation at the H3 workload for GPUs whose name contains MATCH\n"
        "(or cpu); the defaults are the H200's measured figures and the CPU backend's.\n"
        "Limits (docs/cluster.md \"Limits\"): --max-workers worker ids known at once (a new id\n"
        "beyond it takes the place of a gone worker, else its READY is refused),\n"
        "--max-jobs-per-batch, --max-prompt-chars (a text prompt's characters, refused at\n"
        "submit before any worker tokenizes it).\n"
        "Crash blame (docs/cluster.md \"Crash blame\"): a renderer crash ends its attempt only,\n"
        "charged to no budget; a job that crashed renderers on two workers, or --max-crashes\n"
        "times, is quarantined (`vdn retry --force` runs it again); a worker whose renderers\n"
        "crashed under --blocklist-failures different jobs (at least 2) within --crash-window\n"
        "seconds is blocklisted for --blocklist-seconds.\n"
        "Hung renders: an attempt with no progress for max(--stall-seconds, --stall-factor x its\n"
        "last model evaluation's time) is stopped and blamed by the evidence (0: never); one past\n"
        "its request's \"timeout\" is stopped as the job's fault.\n"
        "--http HOST:PORT serves a read-only status page (/), its JSON (/api/status),\n"
        "Prometheus metrics (/metrics) and done jobs' posters and mp4s from the --store\n"
        "(/media/jN/poster.png, /media/jN/video.mp4); off by default. Beyond loopback it needs\n"
        "TLS (--http-cert/--http-key) and a token (--http-token-file; send it as\n"
        "'Authorization: Bearer TOKEN' only; a browser opens /#token=TOKEN and media come by\n"
        "signed links that expire). On loopback the Host must be a loopback name.\n"
        "With an s3:// --store the media are fetched once into a local cache and served from\n"
        "it: --media-cache DIR (default: the database's path + .media-cache), at most\n"
        "--media-cache-mb MB (default 2048; least recently served copies go first). S3 settings\n"
        "come from the environment as for every vdn tool (VDN_S3_ENDPOINT, AWS_REGION,\n"
        "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY; docs/storage.md); a store that does not\n"
        "answer gets --store-retry-seconds S of retries (default 10) before a 502.\n");
}

static int parse_num(const char *flag, const char *v, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !(x >= lo && x <= hi)) {
        fprintf(stderr, "vdn coordinator: %s: expected a number in %g..%g, got '%s'\n", flag, lo,
                hi, v);
        return -1;
    }
    *out = x;
    return 0;
}

/* Receives one multipart message from a ROUTER: [identity][(empty)][body]. */
static int recv_routed(void *sock, zmq_msg_t *id, zmq_msg_t *body, int *delimited) {
    zmq_msg_t parts[4];
    int n = 0, more = 1;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&m);
            for (int i = 0; i < n; i++)
                zmq_msg_close(&parts[i]);
            return -1;
        }
        more = zmq_msg_more(&m);
        if (n < 4)
            parts[n++] = m;
        else
            zmq_msg_close(&m); /* extra frames are dropped; the body is checked below */
    }
    if (n < 2) {
        for (int i = 0; i < n; i++)
            zmq_msg_close(&parts[i]);
        return 0;
    }
    *delimited = n == 3 && zmq_msg_size(&parts[1]) == 0;
    zmq_msg_init(id);
    zmq_msg_init(body);
    zmq_msg_move(id, &parts[0]);
    zmq_msg_move(body, &parts[n - 1]);
    for (int i = 0; i < n; i++)
        zmq_msg_close(&parts[i]);
    return 1;
}

static void *make_router(coord *c, const char *ep, const char *domain, char *err, size_t errlen) {
    void *s = zmq_socket(c->ctx, ZMQ_ROUTER);
    int one = 1, zero = 0;
    zmq_setsockopt(s, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    /* a new connection with a known routing id takes over (worker reconnects) */
    zmq_setsockopt(s, ZMQ_ROUTER_HANDOVER, &one, sizeof one);
    int64_t maxmsg = VDN_MAX_FRAME;
    zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    if (c->curve) {
        char key[4096];
        snprintf(key, sizeof key, "%s/coordinator.key", c->o.keys_dir);
        if (vdn_curve_server_setup(s, key, domain, err, errlen)) {
            zmq_close(s);
            return NULL;
        }
    }
    if (zmq_bind(s, ep) != 0) {
        vdn_fail(err, errlen, "cannot bind %s: %s", ep, zmq_strerror(zmq_errno()));
        zmq_close(s);
        return NULL;
    }
    return s;
}

int vdn_cmd_coordinator(int argc, char **argv) {
    coord c;
    memset(&c, 0, sizeof c);
    coord_opts *o = &c.o;
    coord_http_opts http = {0};
    o->bind = "tcp://127.0.0.1:5555";
    o->client_bind = "tcp://127.0.0.1:5556";
    o->lease_seconds = 60;
    o->heartbeat_seconds = 5;
    o->max_attempts = 3;
    o->max_worker_faults = 20;
    o->blocklist_failures = 3;
    o->blocklist_seconds = 300;
    o->max_crashes = 3;
    o->crash_window = 3600;
    o->max_workers = 1024;
    o->stall_seconds = 900;
    o->stall_factor = 10;
    o->max_jobs_per_batch = 10000;
    o->max_prompt_chars = 16384;
    cost_caps_default(&o->caps);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "vdn coordinator: %s needs a value (or is unknown)\n", a);
            usage(stderr);
            return 2;
        }
        const char *v = argv[++i];
        double x;
        if (!strcmp(a, "--db"))
            o->db_path = v;
        else if (!strcmp(a, "--bind"))
            o->bind = v;
        else if (!strcmp(a, "--client-bind"))
            o->client_bind = v;
        else if (!strcmp(a, "--store"))
            o->store_uri = v;
        else if (!strcmp(a, "--keys"))
            o->keys_dir = v;
        else if (!strcmp(a, "--http"))
            http.bind = v;
        else if (!strcmp(a, "--http-token-file"))
            http.token_file = v;
        else if (!strcmp(a, "--http-cert"))
            http.tls_cert = v;
        else if (!strcmp(a, "--http-key"))
            http.tls_key = v;
        else if (!strcmp(a, "--media-cache"))
            http.media_cache_dir = v;
        else if (!strcmp(a, "--media-cache-mb")) {
            if (parse_num(a, v, 1, 1 << 24, &x)) return 2;
            http.media_cache_bytes = (uint64_t)(x * 1048576.0);
        } else if (!strcmp(a, "--store-retry-seconds")) {
            if (parse_num(a, v, 0.1, 3600, &http.store_retry_seconds)) return 2;
        } else if (!strcmp(a, "--lease-seconds")) {
            if (parse_num(a, v, 0.1, 86400 * 7, &o->lease_seconds)) return 2;
        } else if (!strcmp(a, "--heartbeat-seconds")) {
            if (parse_num(a, v, 0.05, 3600, &o->heartbeat_seconds)) return 2;
        } else if (!strcmp(a, "--max-attempts")) {
            if (parse_num(a, v, 1, 1000, &x)) return 2;
            o->max_attempts = (int)x;
        } else if (!strcmp(a, "--max-worker-faults")) {
            if (parse_num(a, v, 1, 100000, &x)) return 2;
            o->max_worker_faults = (int)x;
        } else if (!strcmp(a, "--blocklist-failures")) {
            if (parse_num(a, v, 1, 1000, &x)) return 2;
            o->blocklist_failures = (int)x;
        } else if (!strcmp(a, "--max-crashes")) {
            if (parse_num(a, v, 1, 1000, &x)) return 2;
            o->max_crashes = (int)x;
        } else if (!strcmp(a, "--crash-window")) {
            if (parse_num(a, v, 1, 86400 * 30, &o->crash_window)) return 2;
        } else if (!strcmp(a, "--gpu-memory-limit")) {
            if (parse_num(a, v, 1, 1 << 20, &x)) return 2;
            o->caps.gpu_memory_limit = (uint64_t)(x * 1073741824.0);
        } else if (!strcmp(a, "--max-job-seconds")) {
            if (parse_num(a, v, 1, 86400 * 365, &o->caps.max_job_seconds)) return 2;
        } else if (!strcmp(a, "--max-job-memory")) {
            if (parse_num(a, v, 0.001, 1 << 20, &x)) return 2;
            o->caps.max_job_memory = x * 1073741824.0;
        } else if (!strcmp(a, "--job-rate")) {
            char rerr[VDN_ERR_LEN];
            if (cost_rate_parse(&o->caps, v, rerr, sizeof rerr)) {
                fprintf(stderr, "vdn coordinator: %s\n", rerr);
                return 2;
            }
        } else if (!strcmp(a, "--stall-seconds")) {
            if (parse_num(a, v, 0, 86400 * 7, &o->stall_seconds)) return 2;
        } else if (!strcmp(a, "--stall-factor")) {
            if (parse_num(a, v, 1, 1000, &o->stall_factor)) return 2;
        } else if (!strcmp(a, "--max-workers")) {
            if (parse_num(a, v, 1, 1000000, &x)) return 2;
            o->max_workers = (int)x;
        } else if (!strcmp(a, "--max-jobs-per-batch")) {
            if (parse_num(a, v, 1, 10000000, &x)) return 2;
            o->max_jobs_per_batch = (int)x;
        } else if (!strcmp(a, "--max-prompt-chars")) {
            if (parse_num(a, v, 1, 10000000, &x)) return 2;
            o->max_prompt_chars = (int)x;
        } else if (!strcmp(a, "--blocklist-seconds")) {
            if (parse_num(a, v, 0, 86400 * 7, &o->blocklist_seconds)) return 2;
        } else {
            fprintf(stderr, "vdn coordinator: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!o->db_path) {
        fprintf(stderr, "vdn coordinator: --db FILE is required\n");
        usage(stderr);
        return 2;
    }
    if (!http.bind && (http.token_file || http.tls_cert || http.tls_key || http.media_cache_dir ||
                       http.media_cache_bytes || http.store_retry_seconds > 0)) {
        fprintf(stderr, "vdn coordinator: --http-token-file/--http-cert/--http-key/--media-cache/"
                        "--media-cache-mb/--store-retry-seconds need --http\n");
        return 2;
    }
    if ((http.media_cache_dir || http.media_cache_bytes || http.store_retry_seconds > 0) &&
        !(o->store_uri && !strncmp(o->store_uri, "s3://", 5)))
        VDN_WARN("--media-cache/--media-cache-mb/--store-retry-seconds apply to an s3:// --store "
                 "only: ignored");
    char err[VDN_ERR_LEN];
    if (http.bind && coord_http_check(&http, err, sizeof err)) {
        fprintf(stderr, "vdn coordinator: %s\n", err);
        return 2;
    }
    if (o->lease_seconds < 2 * o->heartbeat_seconds)
        VDN_WARN("--lease-seconds %.1f is under two heartbeats (%.1f s): busy workers may lose "
                 "their jobs between heartbeats",
                 o->lease_seconds, o->heartbeat_seconds);
    if (o->keys_dir) {
        if (!vdn_curve_available()) {
            fprintf(stderr, "vdn coordinator: --keys given but this libzmq has no CURVE "
                            "(zmq_has(\"curve\") = 0)\n");
            return 2;
        }
        c.curve = 1;
    } else {
        const char *eps[2] = {o->bind, o->client_bind};
        for (int i = 0; i < 2; i++)
            if (!vdn_endpoint_is_loopback(eps[i])) {
                fprintf(stderr,
                        "vdn coordinator: refusing to bind %s without --keys: unauthenticated "
                        "endpoints are loopback-only (make keys with `vdn keygen`)\n",
                        eps[i]);
                return 2;
            }
        VDN_WARN("no --keys: CURVE is off, endpoints bound to loopback only");
    }
    /* One writer per database: a second coordinator on the same file would hand out the same
     * jobs. The lock dies with the process, so a crash never leaves it stale. */
    char lock_path[4096];
    snprintf(lock_path, sizeof lock_path, "%s.lock", o->db_path);
    int lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock_fd < 0 || flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
        char other[32] = "?";
        ssize_t n = lock_fd >= 0 ? pread(lock_fd, other, sizeof other - 1, 0) : -1;
        if (n > 0) other[n] = 0, other[strcspn(other, "\n")] = 0;
        fprintf(stderr, "vdn coordinator: %s: %s\n", lock_path,
                lock_fd < 0 ? strerror(errno)
                            : "another coordinator is using this database (pid in the lock file)");
        if (lock_fd >= 0) fprintf(stderr, "vdn coordinator: lock holder pid %s\n", other);
        if (lock_fd >= 0) close(lock_fd);
        return 1;
    }
    char pidtext[32];
    int pn = snprintf(pidtext, sizeof pidtext, "%d\n", (int)getpid());
    if (ftruncate(lock_fd, 0) != 0 || pwrite(lock_fd, pidtext, (size_t)pn, 0) != pn)
        VDN_WARN("%s: could not record our pid", lock_path);
    c.db = cdb_open(o->db_path, 0, err, sizeof err);
    if (!c.db) {
        fprintf(stderr, "vdn coordinator: %s\n", err);
        close(lock_fd);
        return 1;
    }
    coord_recover(&c);
    c.ctx = zmq_ctx_new();
    zap_handler *zap = NULL;
    coord_http *web = NULL;
    int rc = 1;
    http.db_path = o->db_path;
    http.store_uri = o->store_uri; /* done jobs' poster and mp4 on the page */
    if (http.bind && !(web = coord_http_start(&http, err, sizeof err))) {
        fprintf(stderr, "vdn coordinator: %s\n", err);
        goto out;
    }
    if (c.curve && !(zap = zap_start(c.ctx, o->keys_dir, err, sizeof err))) {
        fprintf(stderr, "vdn coordinator: %s\n", err);
        goto out;
    }
    if (!(c.wsock = make_router(&c, o->bind, "workers", err, sizeof err)) ||
        !(c.csock = make_router(&c, o->client_bind, "clients", err, sizeof err))) {
        fprintf(stderr, "vdn coordinator: %s\n", err);
        goto out;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    VDN_INFO("coordinator up: workers %s, clients %s, db %s (lease %.1f s, heartbeat %.1f s)",
             o->bind, o->client_bind, o->db_path, o->lease_seconds, o->heartbeat_seconds);
    /* stdout line for scripts and `vdn up`: the endpoints are bound and the db is open */
    printf("ready workers=%s clients=%s\n", o->bind, o->client_bind);
    fflush(stdout);

    double tick = o->heartbeat_seconds / 2 < 1 ? o->heartbeat_seconds / 2 : 1;
    if (tick > o->lease_seconds / 4) tick = o->lease_seconds / 4;
    double next_tick = vdn_now();
    while (!stop_requested) {
        if (reload_requested) {
            reload_requested = 0;
            if (!c.curve)
                VDN_INFO("SIGHUP: no --keys, nothing to reload");
            else if (zap_reload(zap, err, sizeof err))
                VDN_ERROR("SIGHUP: keys not reloaded, the old lists stay: %s", err);
        }
        zmq_pollitem_t items[2] = {{c.wsock, 0, ZMQ_POLLIN, 0}, {c.csock, 0, ZMQ_POLLIN, 0}};
        double wait = next_tick - vdn_now();
        long ms = wait > 0 ? (long)(wait * 1000) + 1 : 0;
        if (zmq_poll(items, 2, ms) < 0) {
            if (zmq_errno() == EINTR) continue;
            VDN_ERROR("zmq_poll: %s", zmq_strerror(zmq_errno()));
            break;
        }
        /* drain each socket; a bounded batch per turn keeps the other one served */
        for (int k = 0; k < 2; k++) {
            if (!(items[k].revents & ZMQ_POLLIN)) continue;
            for (int n = 0; n < 256; n++) {
                zmq_msg_t id, body;
                int delim = 0;
                int got = recv_routed(items[k].socket, &id, &body, &delim);
                if (got < 0) break;
                if (got == 0) continue;
                /* who sent it: the ZAP handler's "ROLE:NAME" for the connection's key */
                const char *user = c.curve ? zmq_msg_gets(&body, "User-Id") : NULL;
                if (k == 0)
                    coord_on_worker_frame(&c, zmq_msg_data(&id), zmq_msg_size(&id), user,
                                          zmq_msg_data(&body), zmq_msg_size(&body));
                else
                    coord_on_client_frames(&c, zmq_msg_data(&id), zmq_msg_size(&id), delim, user,
                                           zmq_msg_data(&body), zmq_msg_size(&body));
                zmq_msg_close(&id);
                zmq_msg_close(&body);
            }
        }
        if (vdn_now() >= next_tick) {
            coord_tick(&c);
            next_tick = vdn_now() + tick;
        }
    }
    VDN_INFO("coordinator stopping");
    rc = 0;
out:
    coord_http_stop(web);
    if (c.wsock) zmq_close(c.wsock);
    if (c.csock) zmq_close(c.csock);
    zmq_ctx_shutdown(c.ctx);
    zap_stop(zap);
    zmq_ctx_term(c.ctx);
    free(c.w);
    cdb_close(c.db);
    close(lock_fd); /* releases the lock */
    return rc;
}
