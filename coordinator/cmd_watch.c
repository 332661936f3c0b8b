/* `vdn watch bN`: live progress of a batch until every job is finished. On a terminal it
 * redraws one screen (bars per running job, ETA, per-worker view); otherwise it prints one
 * plain line per change, so logs and CI stay readable. */
#include <math.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli_common.h"
#include "commands.h"
#include "print.h"
#include "vdn_util.h"

static int interval_own(void *user, int argc, char **argv, int i) {
    if (strcmp(argv[i], "--interval")) return 0;
    double v;
    if (i + 1 >= argc || (v = atof(argv[i + 1])) <= 0) {
        fprintf(stderr, "vdn watch: --interval needs a positive number of seconds\n");
        return -1;
    }
    *(double *)user = v;
    return 2;
}

static void bar(char *out, int width, double frac) {
    int fill = (int)lround(frac * width);
    if (fill > width) fill = width;
    for (int i = 0; i < width; i++)
        out[i] = i < fill ? '#' : '.';
    out[width] = 0;
}

/* Remaining time: the running jobs' NFE left at their last NFE speed, plus queued jobs at the
 * mean duration of finished ones, spread over the workers busy now. */
static double eta(const Vdn__StatusReply *r) {
    double left = 0, done_sum = 0;
    int done_n = 0, queued = 0, busy = 0;
    for (size_t i = 0; i < r->n_jobs; i++) {
        const Vdn__JobInfo *j = r->jobs[i];
        if (!strcmp(j->state, "running")) {
            busy++;
            if (j->nfe_total && j->nfe_seconds > 0)
                left += (j->nfe_total - j->nfe_done) * j->nfe_seconds;
        } else if (!strcmp(j->state, "queued")) {
            queued++;
        } else if (!strcmp(j->state, "done") && j->elapsed_seconds > 0) {
            done_sum += j->elapsed_seconds;
            done_n++;
        }
    }
    if (queued && done_n)
        left += queued * done_sum / done_n;
    else if (queued)
        return -1;
    return busy > 1 ? left / busy : left;
}

int vdn_cmd_watch(int argc, char **argv) {
    cli_args a;
    double interval = 1.0;
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: vdn watch bN [--interval S] [--coordinator EP | --dir DIR]\n"
               "  exit 0 when every job is done, 1 when some failed or were cancelled\n");
        return 0;
    }
    if (cli_parse("watch", argc, argv, &a, interval_own, &interval)) return VDN_EXIT_USAGE;
    char err[VDN_ERR_LEN], kind;
    uint64_t id;
    if (a.npos != 1 || vdn_parse_target(a.pos[0], &kind, &id, err, sizeof err) || kind != 'b') {
        fprintf(stderr, "usage: vdn watch bN\n");
        return VDN_EXIT_USAGE;
    }
    vdn_client *c = cli_connect("watch", &a);
    if (!c) return VDN_EXIT_UNREACHABLE;
    int tty = isatty(STDOUT_FILENO);
    char last[4096] = "";
    double down_since = 0;
    int rc;
    for (;;) {
        Vdn__StatusReply *r = vdn_client_status(c, a.pos[0], err, sizeof err);
        /* a coordinator restart is routine (it resumes from its database): keep watching
         * through a short outage, give up after two minutes without an answer */
        if (!r && vdn_client_error_code(c) == VDN_CLIENT_E_UNREACHABLE &&
            (down_since == 0 || vdn_now() - down_since < 120)) {
            if (down_since == 0) {
                down_since = vdn_now();
                fprintf(stderr, "vdn watch: %s; still trying\n", err);
            }
            continue;
        }
        if (!r) {
            rc = cli_fail("watch", c, err);
            break;
        }
        if (down_since) fprintf(stderr, "vdn watch: coordinator is back\n");
        down_since = 0;
        const Vdn__BatchInfo *b = r->batches[0];
        int finished = b->n_queued == 0 && b->n_running == 0;
        double e = eta(r);
        char etas[32] = "?";
        if (e >= 0) fmt_duration(e, etas, sizeof etas);
        if (tty) {
            printf("\033[H\033[J");
            printf("batch b%llu %s  %d/%d done, %d running, %d queued, %d failed, %d cancelled  "
                   "ETA %s\n\n",
                   (unsigned long long)id, b->tag ? b->tag : "", b->n_done, b->n_jobs, b->n_running,
                   b->n_queued, b->n_failed, b->n_cancelled, finished ? "-" : etas);
            for (size_t i = 0; i < r->n_jobs; i++) {
                const Vdn__JobInfo *j = r->jobs[i];
                char bbuf[41];
                double frac = !strcmp(j->state, "done") ? 1
                              : j->nfe_total            ? (double)j->nfe_done / j->nfe_total
                                                        : 0;
                bar(bbuf, 40, frac);
                printf("j%-6llu %-9s [%s] %3.0f%%  %s\n", (unsigned long long)j->job_id, j->state,
                       bbuf, 100 * frac, j->worker_id ? j->worker_id : "");
            }
            printf("\nworkers:\n");
            for (size_t i = 0; i < r->n_workers; i++) {
                const Vdn__WorkerInfo *w = r->workers[i];
                if (!strcmp(w->state, "gone")) continue;
                printf("  %-16s %-9s %s%llu\n", w->worker_id, w->state,
                       w->has_running_job ? "j" : "",
                       (unsigned long long)(w->has_running_job ? w->running_job : 0));
            }
            fflush(stdout);
        } else {
            /* one line per change of any job's state or progress */
            char line[4096];
            int off = snprintf(line, sizeof line,
                               "b%llu: %d/%d done, %d running, %d queued, %d "
                               "failed, %d cancelled",
                               (unsigned long long)id, b->n_done, b->n_jobs, b->n_running,
                               b->n_queued, b->n_failed, b->n_cancelled);
            for (size_t i = 0; i < r->n_jobs && off < (int)sizeof line - 64; i++)
                if (!strcmp(r->jobs[i]->state, "running")) {
                    const Vdn__JobInfo *jj = r->jobs[i];
                    if (jj->nfe_total)
                        off += snprintf(line + off, sizeof line - (size_t)off,
                                        "; j%llu %d/%d NFE on %s", (unsigned long long)jj->job_id,
                                        jj->nfe_done, jj->nfe_total,
                                        jj->worker_id ? jj->worker_id : "?");
                    else
                        off += snprintf(line + off, sizeof line - (size_t)off,
                                        "; j%llu starting on %s", (unsigned long long)jj->job_id,
                                        jj->worker_id ? jj->worker_id : "?");
                }
            if (strcmp(line, last)) {
                printf("%s%s%s\n", line, finished ? "" : ", ETA ", finished ? "" : etas);
                fflush(stdout);
                snprintf(last, sizeof last, "%s", line);
            }
        }
        if (finished) {
            rc = b->n_done == b->n_jobs ? VDN_EXIT_OK : VDN_EXIT_JOBS_FAILED;
            vdn_client_free(r);
            break;
        }
        vdn_client_free(r);
        struct timespec ts = {(time_t)interval, (long)((interval - (long)interval) * 1e9)};
        nanosleep(&ts, NULL);
    }
    vdn_client_close(c);
    return rc;
}
