/* The daemon's side of its renderer processes: start one, stop one, reap one that died. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "renderer.h"
#include "vdn_util.h"

int vdn_renderer_spawn(vdn_renderer *r, const char *exe, const char *const *argv, const int *pos,
                       int npos, const vdn_relay_config *cfg, const vdn_gpu_list *gpus, char *err,
                       size_t errlen) {
    memset(r, 0, sizeof *r);
    r->fd = -1;
    vdn_relay_config c = *cfg;
    c.n = 0;
    for (int i = 0; !c.cpu && i < npos; i++) {
        c.pos[c.n] = pos[i];
        c.gpu[c.n++] = gpus->gpu[pos[i]];
    }
    /* everything the child needs, made before the fork: after it, only exec */
    const char *args[32];
    int na = 0;
    while (argv[na] && na < 28) {
        args[na] = argv[na];
        na++;
    }
    char fdarg[16], pidarg[32];
    snprintf(fdarg, sizeof fdarg, "%d", 3);
    snprintf(pidarg, sizeof pidarg, "%ld", (long)getpid());
    args[na++] = fdarg;
    args[na++] = pidarg;
    args[na] = NULL;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
        return vdn_fail(err, errlen, "socketpair: %s", strerror(errno));
    sigset_t all;
    sigemptyset(&all);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(sv[0]);
        close(sv[1]);
        return vdn_fail(err, errlen, "fork: %s", strerror(e));
    }
    if (pid == 0) {
        /* the child: async-signal-safe calls only, then exec. Its end becomes fd 3 (without
         * CLOEXEC); the daemon's blocked signals (signalfd) are not the renderer's. */
        if (sv[1] == 3 ? fcntl(3, F_SETFD, 0) < 0 : dup2(sv[1], 3) < 0) _exit(127);
        sigprocmask(SIG_SETMASK, &all, NULL);
        execv(exe, (char *const *)args);
        _exit(127);
    }
    close(sv[1]);
    r->pid = pid;
    r->fd = sv[0];
    fcntl(r->fd, F_SETFL, fcntl(r->fd, F_GETFL) | O_NONBLOCK);
    memcpy(r->pos, pos, sizeof *pos * (size_t)npos);
    r->npos = npos;
    r->started = vdn_now();
    cJSON *m = vdn_relay_config_json(&c);
    int rc = vdn_relay_send(r->fd, m);
    cJSON_Delete(m);
    if (rc) {
        vdn_renderer_stop(r, 0, NULL, 0);
        return vdn_fail(err, errlen, "the renderer exited before it took its config");
    }
    return 0;
}

static void describe(int st, char *how, size_t len) {
    if (!how) return;
    if (WIFSIGNALED(st))
        snprintf(how, len, "signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else
        snprintf(how, len, "exit status %d", WEXITSTATUS(st));
}

/* waitpid for up to patience_s, then SIGKILL and wait. Returns the status. */
static int wait_for(pid_t pid, double patience_s) {
    int st = 0;
    double until = vdn_now() + patience_s;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) return st;
        if (w < 0 && errno != EINTR) return 0;
        if (vdn_now() >= until) break;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return st;
}

void vdn_renderer_stop(vdn_renderer *r, double patience_s, char *how, size_t howlen) {
    if (r->fd >= 0) close(r->fd);
    r->fd = -1;
    if (r->pid > 0) describe(wait_for(r->pid, patience_s), how, howlen);
    r->pid = 0;
    vdn_relay_buf_free(&r->rb);
}

int vdn_renderer_reap(vdn_renderer *r, char *how, size_t howlen) {
    int st = r->pid > 0 ? wait_for(r->pid, 5.0) : 0;
    describe(st, how, howlen);
    if (r->fd >= 0) close(r->fd);
    r->fd = -1;
    r->pid = 0;
    vdn_relay_buf_free(&r->rb);
    return WIFSIGNALED(st) || WEXITSTATUS(st) != 0;
}
