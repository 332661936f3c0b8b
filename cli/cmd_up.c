/* `vdn up DIR`: a whole render farm in one directory, for a laptop, a CI box or a first try.
 *
 * DIR/ckpt      tiny random checkpoint (made with `vdn ckpt init` unless --checkpoint is given)
 * DIR/vdn.db    the coordinator's SQLite database
 * DIR/store/    the file:// object store (unless --store names another)
 * DIR/logs/     one log per process
 * DIR/vdn.conf  endpoints and paths, so `vdn submit/watch/status --dir DIR` find the farm
 *
 * This process is a small supervisor: it runs the coordinator and N workers as children of our
 * own binary (/proc/self/exe), prefixes their log lines, restarts one that dies, and on
 * SIGTERM/SIGINT stops the workers first (each finishes its job) and then the coordinator. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "env.h"
#include "commands.h"
#include "conf.h"
#include "gpus.h"
#include "encoder_init.h"
#include "engine.h"
#include "vdn_util.h"

#define MAX_CHILDREN 65
#define MAX_ARGS 64

typedef struct {
    char name[32];
    char *argv[MAX_ARGS];
    int argc;
    pid_t pid;
    int out_fd; /* read end of the child's stdout+stderr */
    FILE *log;  /* DIR/logs/NAME.log */
    char line[4096];
    size_t len;
    double restart_at; /* 0 = running or stopped on purpose */
    double started_at;
    int restarts;
} child;

typedef struct {
    char dir[PATH_MAX], exe[PATH_MAX], ckpt[PATH_MAX + 64], store[PATH_MAX + 16];
    char worker_ep[64], client_ep[64];
    int workers, cpu, detach, stop, port;
    const char *gpus, *lease, *heartbeat, *max_attempts, *max_worker_faults;
    const char *max_job_seconds, *max_job_memory; /* the coordinator's caps (cost.h) */
    const char *http; /* --http HOST:PORT for the coordinator's status page and metrics */
    const char *text_precision, *vae_precision; /* passed to every worker (bf16 | fp8) */
    const char *precision;     /* every worker's DiT precisions (vdn worker --precision) */
    const char *data_roots[8]; /* --data-root: more folders requests may name files in */
    int n_data_roots;
    child kids[MAX_CHILDREN];
    int nkids;
    int sigfd;
    int stopping;
} up;

static const char usage[] =
    "usage: vdn up DIR [--workers N] [--cpu] [--store URI] [--checkpoint DIR] [--port P]\n"
    "                  [--gpus SPEC] [--lease-seconds S] [--heartbeat-seconds S]\n"
    "                  [--max-attempts N] [--max-worker-faults N]\n"
    "                  [--max-job-seconds S] [--max-job-memory GIB]\n"
    "                  [--http 127.0.0.1:8080] [--detach]\n"
    "                  [--precision bf16|fp8|bf16,fp8]\n"
    "                  [--text-precision bf16|fp8] [--vae-precision bf16|fp8]\n"
    "                  [--data-root DIR ...]\n"
    "       vdn up DIR --stop\n"
    "Runs coordinator + N local workers (default 1) + SQLite (DIR/vdn.db) + a file store\n"
    "(DIR/store) in the foreground until Ctrl-C; --detach runs it in the background.\n"
    "Without --checkpoint a tiny random VDN checkpoint is made in DIR/ckpt.\n"
    "Then: vdn submit requests.jsonl --dir DIR; vdn watch BATCH --dir DIR.\n"
    "--http: the coordinator serves a live status page and Prometheus /metrics there.\n"
    "--max-job-seconds, --max-job-memory: the coordinator's caps on a request's estimated\n"
    "seconds and GPU memory, checked at submit (docs/cluster.md \"Sizes by cost\").\n"
    "--precision: the DiT precisions every worker loads (vdn worker --precision; default\n"
    "bf16); a request line's \"precision\" picks one.\n"
    "--text-precision, --vae-precision: every worker's text encoder and video decoder\n"
    "precision (vdn worker's options of the same names; default bf16).\n"
    "A request may name local files (prompt caches, noise) only under DIR, the checkpoint's\n"
    "folder and each --data-root DIR (up to 8); elsewhere, name a store key or URI.\n";

static void child_add(up *u, const char *name, ...) {
    child *c = &u->kids[u->nkids++];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    c->out_fd = -1;
    va_list ap;
    va_start(ap, name);
    const char *a;
    c->argv[c->argc++] = u->exe;
    while ((a = va_arg(ap, const char *)) != NULL)
        c->argv[c->argc++] = vdn_xstrdup(a);
    va_end(ap);
}

static void child_arg(child *c, const char *a, const char *b) {
    VDN_ASSERT(c->argc + 3 < MAX_ARGS);
    c->argv[c->argc++] = vdn_xstrdup(a);
    if (b) c->argv[c->argc++] = vdn_xstrdup(b);
}

static int child_start(up *u, child *c) {
    int fd[2];
    if (pipe2(fd, O_CLOEXEC)) return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return -1;
    }
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        dup2(fd[1], 1);
        dup2(fd[1], 2);
        /* A process group of its own: a terminal's Ctrl-C reaches only us, and we stop the
         * children in order (workers first, so they can finish their jobs). */
        setpgid(0, 0);
        c->argv[c->argc] = NULL;
        execv(u->exe, c->argv);
        fprintf(stderr, "vdn up: exec %s: %s\n", u->exe, strerror(errno));
        _exit(127);
    }
    close(fd[1]);
    fcntl(fd[0], F_SETFL, O_NONBLOCK);
    c->pid = pid;
    c->out_fd = fd[0];
    c->restart_at = 0;
    c->started_at = vdn_now();
    VDN_INFO("up: started %s (pid %d)", c->name, (int)pid);
    return 0;
}

static void child_emit(child *c, const char *line) {
    fprintf(stderr, "[%s] %s\n", c->name, line);
    if (c->log) {
        fprintf(c->log, "%s\n", line);
        fflush(c->log);
    }
}

static void child_read(child *c) {
    for (;;) {
        ssize_t r = read(c->out_fd, c->line + c->len, sizeof c->line - 1 - c->len);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r == 0 || errno != EAGAIN) {
                if (c->len) {
                    c->line[c->len] = '\0';
                    child_emit(c, c->line);
                    c->len = 0;
                }
                close(c->out_fd);
                c->out_fd = -1;
            }
            return;
        }
        c->len += (size_t)r;
        char *start = c->line, *nl;
        while ((nl = memchr(start, '\n', c->len - (size_t)(start - c->line)))) {
            *nl = '\0';
            child_emit(c, start);
            start = nl + 1;
        }
        c->len -= (size_t)(start - c->line);
        memmove(c->line, start, c->len);
        if (c->len == sizeof c->line - 1) { /* an endless line: flush it as is */
            c->line[c->len] = '\0';
            child_emit(c, c->line);
            c->len = 0;
        }
    }
}

/* `want` on loopback if nothing holds it, else any free port (want = 0: any). */
static int free_port(int want) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)want),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = -1;
    if (s >= 0 && bind(s, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(s, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (s >= 0) close(s);
    return port < 0 && want ? free_port(0) : port;
}

static int port_open(int port) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int ok = s >= 0 && connect(s, (struct sockaddr *)&a, sizeof a) == 0;
    if (s >= 0) close(s);
    return ok;
}

/* Runs `vdn ckpt init` as a child of our own binary and waits for it (with the tiny VAEs, so
 * every job stores a playable out.mp4). */
static int make_checkpoint(up *u) {
    char out[PATH_MAX + 8];
    snprintf(out, sizeof out, "%s/ckpt", u->dir);
    VDN_INFO("up: no --checkpoint; making a tiny random VDN checkpoint in %s", out);
    if (access(cli_env_tokenizer_json(), R_OK) != 0)
        VDN_WARN("up: no tokenizer at %s (ops/install-deps.sh installs it): the farm takes prompt "
                 "caches only, no text prompts",
                 cli_env_tokenizer_json());
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        /* with the tiny text encoder and the real tokenizer when the tokenizer is installed, so
         * requests may carry text prompts (ops/install-deps.sh installs it) */
        char *argv[] = {u->exe,  "ckpt",  "init", "--preset",       "tiny", "--vdn",
                        "--vae", "--out", out,    "--text-encoder", NULL};
        if (access(cli_env_tokenizer_json(), R_OK) != 0) argv[9] = NULL;
        execv(u->exe, argv);
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st)) {
        VDN_ERROR("up: `vdn ckpt init --preset tiny --vdn --vae --out %s` failed (status %d)", out,
                  WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        return -1;
    }
    snprintf(u->ckpt, sizeof u->ckpt, "%s", out);
    return 0;
}

static int read_pid(const char *dir, pid_t *pid) {
    char path[PATH_MAX + 16], err[VDN_ERR_LEN];
    snprintf(path, sizeof path, "%s/vdn.conf", dir);
    vdn_conf c;
    if (access(path, F_OK)) return 0;
    if (vdn_conf_load(&c, path, err, sizeof err)) {
        VDN_ERROR("up: %s", err);
        return -1;
    }
    const char *p = vdn_conf_get(&c, "pid");
    *pid = p ? (pid_t)atol(p) : 0;
    vdn_conf_free(&c);
    return 0;
}

static int do_stop(const char *dir) {
    pid_t pid = 0;
    if (read_pid(dir, &pid)) return 1;
    if (pid <= 0 || kill(pid, 0)) {
        fprintf(stderr, "vdn up --stop: no farm running in %s\n", dir);
        return 1;
    }
    kill(pid, SIGTERM);
    for (int i = 0; i < 1200 && kill(pid, 0) == 0; i++)
        usleep(50000);
    if (kill(pid, 0) == 0) {
        fprintf(stderr, "vdn up --stop: pid %d still running after 60 s\n", (int)pid);
        return 1;
    }
    printf("vdn up: stopped the farm in %s\n", dir);
    return 0;
}

static int write_conf(up *u, pid_t pid) {
    char path[PATH_MAX + 16], db[PATH_MAX + 16], logs[PATH_MAX + 16], nw[16], ps[16],
        err[VDN_ERR_LEN];
    snprintf(path, sizeof path, "%s/vdn.conf", u->dir);
    snprintf(db, sizeof db, "%s/vdn.db", u->dir);
    snprintf(logs, sizeof logs, "%s/logs", u->dir);
    snprintf(nw, sizeof nw, "%d", u->workers);
    snprintf(ps, sizeof ps, "%d", (int)pid);
    const char *k[] = {"client_endpoint", "worker_endpoint", "db",      "store",
                       "checkpoint",      "workers",         "log_dir", "pid"};
    const char *v[] = {u->client_ep, u->worker_ep, db, u->store, u->ckpt, nw, logs, ps};
    if (vdn_conf_write(path, k, v, pid ? 8 : 7, err, sizeof err)) {
        VDN_ERROR("up: %s", err);
        return -1;
    }
    return 0;
}

static int n_running(up *u) {
    int n = 0;
    for (int i = 0; i < u->nkids; i++)
        n += u->kids[i].pid > 0;
    return n;
}

static void reap(up *u) {
    int st;
    pid_t pid;
    while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
        for (int i = 0; i < u->nkids; i++) {
            child *c = &u->kids[i];
            if (c->pid != pid) continue;
            c->pid = 0;
            if (c->out_fd >= 0) child_read(c);
            char how[64];
            if (WIFEXITED(st))
                snprintf(how, sizeof how, "exit status %d", WEXITSTATUS(st));
            else
                snprintf(how, sizeof how, "signal %d", WTERMSIG(st));
            if (u->stopping) {
                VDN_INFO("up: %s stopped (%s)", c->name, how);
            } else {
                if (vdn_now() - c->started_at > 60) c->restarts = 0; /* it had been healthy */
                double wait = c->restarts < 5 ? 1.0 * (1 << c->restarts) : 30.0;
                c->restarts++;
                c->restart_at = vdn_now() + wait;
                VDN_WARN("up: %s died (%s); restarting in %.0f s", c->name, how, wait);
            }
        }
    }
}

static void signal_kids(up *u, int from, int to, int sig) {
    for (int i = from; i < to; i++)
        if (u->kids[i].pid > 0) kill(u->kids[i].pid, sig);
}

/* Poll child output and signals until `until` (monotonic) or, with all_of >= 0, until the
 * children from index all_of on have exited. */
static void pump(up *u, double until, int all_of) {
    for (;;) {
        reap(u);
        if (all_of >= 0) {
            int alive = 0;
            for (int i = all_of; i < u->nkids; i++)
                alive += u->kids[i].pid > 0;
            if (!alive) return;
        }
        double now = vdn_now();
        if (now >= until) return;
        struct pollfd p[MAX_CHILDREN + 1];
        int map[MAX_CHILDREN + 1], n = 0;
        p[n] = (struct pollfd){.fd = u->sigfd, .events = POLLIN};
        map[n++] = -1;
        for (int i = 0; i < u->nkids; i++)
            if (u->kids[i].out_fd >= 0) {
                p[n] = (struct pollfd){.fd = u->kids[i].out_fd, .events = POLLIN};
                map[n++] = i;
            }
        double wait = until - now;
        if (wait > 0.2) wait = 0.2; /* children exit without closing their pipe first */
        if (poll(p, (nfds_t)n, (int)(wait * 1000) + 1) < 0 && errno != EINTR) return;
        for (int i = 0; i < n; i++) {
            if (!p[i].revents) continue;
            if (map[i] < 0) {
                struct signalfd_siginfo si;
                while (read(u->sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
                    if (si.ssi_signo == SIGCHLD) continue;
                    if (!u->stopping) VDN_INFO("up: %s: stopping", strsignal((int)si.ssi_signo));
                    u->stopping++;
                }
            } else {
                child_read(&u->kids[map[i]]);
            }
        }
        if (u->stopping && all_of < 0) return;
    }
}

static int supervise(up *u) {
    /* kids[0] is the coordinator; then the workers. */
    while (!u->stopping) {
        pump(u, vdn_now() + 1.0, -1);
        double now = vdn_now();
        for (int i = 0; i < u->nkids && !u->stopping; i++) {
            child *c = &u->kids[i];
            if (c->pid == 0 && c->restart_at > 0 && now >= c->restart_at) child_start(u, c);
        }
    }
    /* Workers first: each finishes its current job (tiny jobs: seconds). A second Ctrl-C
     * hands the jobs back at once. */
    VDN_INFO("up: stopping %d worker(s), then the coordinator", u->nkids - 1);
    signal_kids(u, 1, u->nkids, SIGTERM);
    int seen = u->stopping;
    double deadline = vdn_now() + 120;
    while (n_running(u) > (u->kids[0].pid > 0) && vdn_now() < deadline) {
        pump(u, vdn_now() + 0.5, 1);
        if (u->stopping > seen) {
            seen = u->stopping;
            signal_kids(u, 1, u->nkids, SIGTERM);
        }
    }
    signal_kids(u, 1, u->nkids, SIGKILL);
    signal_kids(u, 0, 1, SIGTERM);
    pump(u, vdn_now() + 15, 0);
    if (n_running(u)) {
        VDN_WARN("up: children still running after SIGTERM; killing them");
        signal_kids(u, 0, u->nkids, SIGKILL);
        pump(u, vdn_now() + 5, 0);
    }
    for (int i = 0; i < u->nkids; i++) {
        child *c = &u->kids[i];
        if (c->out_fd >= 0) close(c->out_fd);
        if (c->log) fclose(c->log);
        for (int k = 1; k < c->argc; k++)
            free(c->argv[k]);
    }
    write_conf(u, 0); /* no pid: nothing runs; the endpoints stay for `vdn status --db` */
    VDN_INFO("up: stopped");
    return 0;
}

static int parse(up *u, int argc, char **argv) {
    const char *dir = NULL, *ckpt = NULL, *store = NULL;
    u->workers = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return 1;
        }
        if (!strcmp(a, "--cpu"))
            u->cpu = 1;
        else if (!strcmp(a, "--detach"))
            u->detach = 1;
        else if (!strcmp(a, "--stop"))
            u->stop = 1;
        else if (a[0] == '-' && a[1] == '-') {
            if (i + 1 >= argc) {
                fprintf(stderr, "vdn up: %s needs a value\n", a);
                return -1;
            }
            const char *v = argv[++i];
            char *end;
            if (!strcmp(a, "--workers") || !strcmp(a, "--port")) {
                long x = strtol(v, &end, 10);
                int lim = !strcmp(a, "--workers") ? MAX_CHILDREN - 1 : 65534;
                if (end == v || *end || x < 1 || x > lim) {
                    fprintf(stderr, "vdn up: %s '%s': expected an integer in 1..%d\n", a, v, lim);
                    return -1;
                }
                if (!strcmp(a, "--workers"))
                    u->workers = (int)x;
                else
                    u->port = (int)x;
            } else if (!strcmp(a, "--store"))
                store = v;
            else if (!strcmp(a, "--checkpoint"))
                ckpt = v;
            else if (!strcmp(a, "--gpus"))
                u->gpus = v;
            else if (!strcmp(a, "--lease-seconds"))
                u->lease = v;
            else if (!strcmp(a, "--heartbeat-seconds"))
                u->heartbeat = v;
            else if (!strcmp(a, "--max-attempts"))
                u->max_attempts = v;
            else if (!strcmp(a, "--max-worker-faults"))
                u->max_worker_faults = v;
            else if (!strcmp(a, "--http"))
                u->http = v;
            else if (!strcmp(a, "--data-root")) {
                if (u->n_data_roots == 8) {
                    fprintf(stderr, "vdn up: --data-root: at most 8\n");
                    return -1;
                }
                u->data_roots[u->n_data_roots++] = v;
            } else if (!strcmp(a, "--precision")) {
                unsigned m;
                if (vdn_precision_parse_list(v, &m)) {
                    fprintf(stderr,
                            "vdn up: --precision '%s': expected bf16, fp8 or bf16,fp8 (each "
                            "once)\n",
                            v);
                    return -1;
                }
                u->precision = v;
            } else if (!strcmp(a, "--max-job-seconds") || !strcmp(a, "--max-job-memory")) {
                /* the coordinator's own bounds, so that it never refuses them at start */
                const int secs = a[10] == 's';
                const double lo = secs ? 1 : 0.001, hi = secs ? 86400.0 * 365 : 1 << 20;
                char *end;
                double x = strtod(v, &end);
                if (end == v || *end || !(x >= lo && x <= hi)) {
                    fprintf(stderr, "vdn up: %s '%s': expected a number in %g..%g\n", a, v, lo, hi);
                    return -1;
                }
                *(secs ? &u->max_job_seconds : &u->max_job_memory) = v;
            } else if (!strcmp(a, "--text-precision") || !strcmp(a, "--vae-precision")) {
                vdn_precision p;
                if (vdn_precision_parse(v, &p)) {
                    fprintf(stderr, "vdn up: %s '%s': expected bf16 or fp8\n", a, v);
                    return -1;
                }
                *(!strcmp(a, "--text-precision") ? &u->text_precision : &u->vae_precision) = v;
            } else {
                fprintf(stderr, "vdn up: unknown option '%s'\n%s", a, usage);
                return -1;
            }
        } else if (!dir)
            dir = a;
        else {
            fprintf(stderr, "vdn up: unexpected argument '%s' (DIR is '%s')\n", a, dir);
            return -1;
        }
    }
    if (!dir) {
        fprintf(stderr, "vdn up: DIR is required\n%s", usage);
        return -1;
    }
    char err[VDN_ERR_LEN];
    if (!u->stop && vdn_mkdir_p(dir, err, sizeof err)) {
        fprintf(stderr, "vdn up: %s\n", err);
        return -1;
    }
    if (!realpath(dir, u->dir)) {
        fprintf(stderr, "vdn up: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    if (ckpt && !realpath(ckpt, u->ckpt)) {
        fprintf(stderr, "vdn up: --checkpoint %s: %s\n", ckpt, strerror(errno));
        return -1;
    }
    if (store)
        snprintf(u->store, sizeof u->store, "%s", store);
    else
        snprintf(u->store, sizeof u->store, "file://%s/store", u->dir);
    ssize_t n = readlink("/proc/self/exe", u->exe, sizeof u->exe - 1);
    if (n <= 0) {
        fprintf(stderr, "vdn up: cannot find our own binary: %s\n", strerror(errno));
        return -1;
    }
    u->exe[n] = '\0';
    return 0;
}

static void open_logs(up *u) {
    char path[PATH_MAX + 64], err[VDN_ERR_LEN];
    snprintf(path, sizeof path, "%s/logs", u->dir);
    if (vdn_mkdir_p(path, err, sizeof err)) VDN_WARN("up: %s", err);
    for (int i = 0; i < u->nkids; i++) {
        snprintf(path, sizeof path, "%s/logs/%s.log", u->dir, u->kids[i].name);
        u->kids[i].log = fopen(path, "a");
    }
}

int vdn_cmd_up(int argc, char **argv) {
    static up u; /* large; one per process */
    memset(&u, 0, sizeof u);
    int rc = parse(&u, argc, argv);
    if (rc) return rc > 0 ? 0 : 2;
    if (u.stop) return do_stop(u.dir);

    pid_t running = 0;
    if (read_pid(u.dir, &running)) return 2;
    if (running > 0 && kill(running, 0) == 0) {
        fprintf(stderr, "vdn up: a farm already runs in %s (pid %d); `vdn up %s --stop` first\n",
                u.dir, (int)running, u.dir);
        return 1;
    }
    if (!u.ckpt[0]) {
        char probe[PATH_MAX + 32];
        snprintf(probe, sizeof probe, "%s/ckpt/prompt.safetensors", u.dir);
        if (access(probe, F_OK) == 0)
            snprintf(u.ckpt, sizeof u.ckpt, "%s/ckpt", u.dir);
        else if (make_checkpoint(&u))
            return 1;
    }
    /* The coordinator's default ports when they are free, so `vdn submit` and friends find
     * this farm without --dir; other free ports when they are taken. */
    int wp = u.port ? u.port : free_port(5555), cp = u.port ? u.port + 1 : free_port(5556);
    if (wp < 0 || cp < 0 || wp == cp) {
        fprintf(stderr, "vdn up: cannot find free loopback ports\n");
        return 1;
    }
    snprintf(u.worker_ep, sizeof u.worker_ep, "tcp://127.0.0.1:%d", wp);
    snprintf(u.client_ep, sizeof u.client_ep, "tcp://127.0.0.1:%d", cp);

    if (u.detach) {
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "vdn up: fork: %s\n", strerror(errno));
            return 1;
        }
        if (pid > 0) {
            /* Wait until the child has written vdn.conf with its pid and the coordinator takes
             * connections, so the next command (vdn submit) finds a farm. */
            for (int i = 0; i < 600; i++) {
                pid_t seen = 0;
                int st;
                if (waitpid(pid, &st, WNOHANG) == pid) {
                    fprintf(stderr, "vdn up: the farm exited at start; see %s/logs/up.log\n",
                            u.dir);
                    return 1;
                }
                if (read_pid(u.dir, &seen) == 0 && seen == pid && port_open(cp)) {
                    printf("vdn up: farm running in %s (pid %d)\n  client endpoint %s\n  worker "
                           "endpoint %s\n  logs %s/logs\n  stop with: vdn up %s --stop\n",
                           u.dir, (int)pid, u.client_ep, u.worker_ep, u.dir, u.dir);
                    return 0;
                }
                usleep(100000);
            }
            fprintf(stderr, "vdn up: the farm did not come up in 60 s; see %s/logs/up.log\n",
                    u.dir);
            return 1;
        }
        setsid();
        char path[PATH_MAX + 32], err[VDN_ERR_LEN];
        snprintf(path, sizeof path, "%s/logs", u.dir);
        vdn_mkdir_p(path, err, sizeof err);
        snprintf(path, sizeof path, "%s/logs/up.log", u.dir);
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        int nul = open("/dev/null", O_RDONLY);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        if (nul >= 0) {
            dup2(nul, 0);
            close(nul);
        }
    }

    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, NULL);
    u.sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    signal(SIGPIPE, SIG_IGN);

    char db[PATH_MAX + 16], scratch[PATH_MAX + 16], id[32], g[16];
    snprintf(db, sizeof db, "%s/vdn.db", u.dir);
    snprintf(scratch, sizeof scratch, "%s/scratch", u.dir);
    child_add(&u, "coordinator", "coordinator", "--db", db, "--bind", u.worker_ep, "--client-bind",
              u.client_ep, "--store", u.store, NULL);
    child *co = &u.kids[0];
    if (u.lease) child_arg(co, "--lease-seconds", u.lease);
    if (u.heartbeat) child_arg(co, "--heartbeat-seconds", u.heartbeat);
    if (u.max_attempts) child_arg(co, "--max-attempts", u.max_attempts);
    if (u.max_worker_faults) child_arg(co, "--max-worker-faults", u.max_worker_faults);
    if (u.max_job_seconds) child_arg(co, "--max-job-seconds", u.max_job_seconds);
    if (u.max_job_memory) child_arg(co, "--max-job-memory", u.max_job_memory);
    if (u.http) child_arg(co, "--http", u.http);
    vdn_gpu_list gpus = {0};
    if (!u.cpu && !u.gpus) {
        char gerr[VDN_ERR_LEN];
        if (vdn_gpu_inventory(NULL, -1, &gpus, gerr, sizeof gerr)) VDN_WARN("up: %s", gerr);
    }
    for (int k = 1; k <= u.workers; k++) {
        snprintf(id, sizeof id, "worker-%d", k);
        child_add(&u, id, "worker", "--connect", u.worker_ep, "--checkpoint", u.ckpt, "--store",
                  u.store, "--scratch", scratch, NULL);
        child *w = &u.kids[u.nkids - 1];
        /* the farm's own folders (the quickstart's prompt caches are in its checkpoint), and
         * those the user adds: never the whole machine */
        child_arg(w, "--data-root", u.dir);
        child_arg(w, "--data-root", u.ckpt);
        for (int r = 0; r < u.n_data_roots; r++)
            child_arg(w, "--data-root", u.data_roots[r]);
        snprintf(id, sizeof id, "up-%d", k);
        child_arg(w, "--id", id);
        if (u.cpu)
            child_arg(w, "--cpu", NULL);
        else if (u.gpus)
            child_arg(w, "--gpus", u.gpus);
        else if (gpus.n == 0) /* no GPU here: say so instead of letting each worker find out */
            child_arg(w, "--cpu", NULL);
        else if (u.workers > 1) { /* several workers share the GPUs round-robin, one each */
            snprintf(g, sizeof g, "%d", gpus.gpu[(k - 1) % gpus.n].index);
            child_arg(w, "--gpus", g);
        }
        if (u.heartbeat) child_arg(w, "--heartbeat-seconds", u.heartbeat);
        if (u.precision) child_arg(w, "--precision", u.precision);
        if (u.text_precision) child_arg(w, "--text-precision", u.text_precision);
        if (u.vae_precision) child_arg(w, "--vae-precision", u.vae_precision);
    }
    open_logs(&u);
    VDN_INFO("up: farm in %s: coordinator %s (clients %s), %d worker(s), store %s, checkpoint %s",
             u.dir, u.worker_ep, u.client_ep, u.workers, u.store, u.ckpt);
    if (child_start(&u, co)) {
        VDN_ERROR("up: cannot start the coordinator: %s", strerror(errno));
        return 1;
    }
    /* Workers dial in with backoff anyway; waiting for the port just keeps the logs calm. */
    for (int i = 0; i < 100 && !port_open(wp); i++)
        pump(&u, vdn_now() + 0.1, -1);
    for (int i = 1; i < u.nkids; i++)
        if (child_start(&u, &u.kids[i])) VDN_ERROR("up: cannot start %s", u.kids[i].name);
    if (write_conf(&u, getpid())) {
        u.stopping = 1;
    } else if (!u.detach) {
        fprintf(stderr,
                "vdn up: ready. In another shell:\n  vdn submit requests.jsonl --dir %s\n"
                "  vdn watch BATCH --dir %s\nCtrl-C stops the farm.\n",
                u.dir, u.dir);
    }
    return supervise(&u);
}
