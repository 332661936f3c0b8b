/* `vdn watch bN`: live progress of a batch until every job is finished. On a terminal it
 * redraws one screen in place (the batch's bar and ETA, a bar per job that fits the terminal,
 * running jobs first, and what each worker does); otherwise it prints one
 * plain line per change, so logs and CI stay readable. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
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
 * mean duration of finished ones (before any has finished: what the running ones project from
 * their progress so far), spread over the workers busy now. -1 = no estimate yet. */
static double eta(const Vdn__StatusReply *r) {
    double left = 0, done_sum = 0, proj_sum = 0;
    int done_n = 0, proj_n = 0, queued = 0, busy = 0;
    for (size_t i = 0; i < r->n_jobs; i++) {
        const Vdn__JobInfo *j = r->jobs[i];
        if (!strcmp(j->state, "running")) {
            busy++;
            if (j->nfe_total && j->nfe_seconds > 0)
                left += (j->nfe_total - j->nfe_done) * j->nfe_seconds;
            if (j->nfe_total && j->nfe_done > 0 && j->elapsed_seconds > 0) {
                proj_sum += j->elapsed_seconds * j->nfe_total / j->nfe_done;
                proj_n++;
            }
        } else if (!strcmp(j->state, "queued")) {
            queued++;
        } else if (!strcmp(j->state, "done") && j->elapsed_seconds > 0) {
            done_sum += j->elapsed_seconds;
            done_n++;
        }
    }
    if (queued && done_n)
        left += queued * done_sum / done_n;
    else if (queued && proj_n)
        left += queued * proj_sum / proj_n;
    else if (queued)
        return -1;
    return busy > 1 ? left / busy : left;
}

/* The terminal's size (rows, columns); 24x80 when it cannot be asked. */
static void term_size(int *rows, int *cols) {
    struct winsize ws;
    *rows = 24;
    *cols = 80;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0) {
        *rows = ws.ws_row;
        *cols = ws.ws_col;
    }
}

/* One screen line: written over the old one, cut at the terminal width so nothing wraps (a
 * wrapped line would push the screen down and leave stale rows behind). */
static void put_line(int cols, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put_line(int cols, const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (cols > 0 && cols < (int)sizeof line && (int)strlen(line) >= cols) line[cols - 1] = 0;
    printf("%s\033[K\n", line);
}

static double job_frac(const Vdn__JobInfo *j) {
    if (!strcmp(j->state, "done")) return 1;
    if (!strcmp(j->state, "running") && j->nfe_total > 0) return (double)j->nfe_done / j->nfe_total;
    return 0;
}

/* Order of the job rows: what moves first (running), then what needs a look (failed,
 * cancelled), then what waits (queued), then what is over (done). */
static int state_rank(const char *s) {
    return !strcmp(s, "running")     ? 0
           : !strcmp(s, "failed")    ? 1
           : !strcmp(s, "cancelled") ? 2
           : !strcmp(s, "queued")    ? 3
                                     : 4;
}

static void job_row(int cols, const Vdn__JobInfo *j, double now) {
    char bbuf[24], nfe[24] = "", t[24] = "";
    double frac = job_frac(j);
    bar(bbuf, 20, frac);
    if (j->nfe_total > 0 && strcmp(j->state, "queued"))
        snprintf(nfe, sizeof nfe, "%d/%d", j->nfe_done, j->nfe_total);
    if (!strcmp(j->state, "running") && j->elapsed_seconds > 0)
        fmt_duration(j->elapsed_seconds, t, sizeof t);
    else if (!strcmp(j->state, "done") && j->elapsed_seconds > 0)
        fmt_duration(j->elapsed_seconds, t, sizeof t);
    else if (!strcmp(j->state, "queued") && j->submitted_at > 0)
        snprintf(t, sizeof t, "waiting");
    (void)now;
    char id[24];
    snprintf(id, sizeof id, "j%llu", (unsigned long long)j->job_id);
    const char *why = !strcmp(j->state, "failed") && j->last_error ? j->last_error : "";
    /* last_error keeps one line per attempt: show the latest */
    const char *nl = strrchr(why, '\n');
    if (nl && nl[1]) why = nl + 1;
    put_line(cols, "%-7s %-9s [%s] %3.0f%%  %-7s %-12s %-9s %s", id, j->state, bbuf, 100 * frac,
             nfe, j->worker_id && strcmp(j->state, "queued") ? j->worker_id : "-", t, why);
}

/* An eval sweep's progress per variant: when every job's tag is PROMPT/VARIANT (the tags `vdn
 * eval sweep` gives; a scoring job's PROMPT/VARIANT/score), "by variant: dense@50 40/103,
 * vdn@8 38/103" (done of each); else "". */
static void by_variant(const Vdn__StatusReply *r, char *out, size_t len) {
    enum { MAX_GROUPS = 16 };
    const char *name[MAX_GROUPS];
    int done[MAX_GROUPS] = {0}, total[MAX_GROUPS] = {0}, n = 0;
    out[0] = 0;
    for (size_t i = 0; i < r->n_jobs; i++) {
        const char *t = r->jobs[i]->tag, *slash = t ? strchr(t, '/') : NULL;
        if (!slash || !slash[1]) return;
        int g = 0;
        while (g < n && strcmp(name[g], slash + 1))
            g++;
        if (g == n) {
            if (n == MAX_GROUPS) return;
            name[n++] = slash + 1;
        }
        total[g]++;
        done[g] += !strcmp(r->jobs[i]->state, "done");
    }
    size_t off = 0;
    for (int g = 0; g < n && off + 64 < len; g++)
        off += (size_t)snprintf(out + off, len - off, "%s%s %d/%d",
                                g ? ", " : "by variant: ", name[g], done[g], total[g]);
}

/* The whole screen, redrawn in place: a header with the batch's bar and ETA, a row per job that
 * fits (running first), the workers. Rows that do not fit are summed up in one line. */
static void draw_screen(const Vdn__StatusReply *r, uint64_t id, int finished, const char *etas,
                        double now) {
    int rows, cols;
    term_size(&rows, &cols);
    const Vdn__BatchInfo *b = r->batches[0];
    double sum = 0, first_submit = b->submitted_at, last_finish = 0;
    for (size_t i = 0; i < r->n_jobs; i++) {
        const Vdn__JobInfo *j = r->jobs[i];
        sum += strcmp(j->state, "failed") && strcmp(j->state, "cancelled") ? job_frac(j) : 1;
        if (j->finished_at > last_finish) last_finish = j->finished_at;
    }
    double frac = b->n_jobs ? sum / b->n_jobs : 1;
    char el[24] = "-", bbuf[48];
    if (first_submit > 0)
        fmt_duration((finished && last_finish > 0 ? last_finish : now) - first_submit, el,
                     sizeof el);
    int bw = cols - 40 < 40 ? cols - 40 : 40; /* room left for "NN%   elapsed ... ETA ..." */
    bar(bbuf, bw < 10 ? 10 : bw, frac);
    printf("\033[H");
    /* counts that are not zero only: the line stays short enough for a narrow terminal */
    char counts[128] = "";
    const struct {
        int n;
        const char *what;
    } cs[] = {{b->n_failed, "failed"},
              {b->n_cancelled, "cancelled"},
              {b->n_running, "running"},
              {b->n_queued, "queued"}};
    for (size_t i = 0; i < sizeof cs / sizeof *cs; i++)
        if (cs[i].n)
            snprintf(counts + strlen(counts), sizeof counts - strlen(counts), ", %d %s", cs[i].n,
                     cs[i].what);
    put_line(cols, "batch b%llu%s%s: %d/%d done%s", (unsigned long long)id,
             b->tag && b->tag[0] ? " " : "", b->tag ? b->tag : "", b->n_done, b->n_jobs, counts);
    if (finished)
        put_line(cols, "[%s] %3.0f%%   %s in %s", bbuf, 100 * frac,
                 b->n_done == b->n_jobs ? "finished" : "ended", el);
    else
        put_line(cols, "[%s] %3.0f%%   elapsed %s   ETA %s", bbuf, 100 * frac, el, etas);
    char groups[1024];
    by_variant(r, groups, sizeof groups);
    put_line(cols, "%s", groups);

    /* workers shown: those not gone */
    size_t nw = 0;
    for (size_t i = 0; i < r->n_workers; i++)
        if (strcmp(r->workers[i]->state, "gone")) nw += 1 + r->workers[i]->n_gpus;
    /* rows left for jobs: header 3, job title 1, a blank and the worker title 2, the workers,
     * one for "... more" and one for the cursor's last line */
    int room = rows - 3 - 1 - 2 - (int)nw - 2;
    if (room < 3) room = 3;

    const Vdn__JobInfo **order = vdn_xcalloc(r->n_jobs + 1, sizeof *order);
    size_t n = 0;
    for (int rank = 0; rank <= 4; rank++)
        for (size_t i = 0; i < r->n_jobs; i++)
            if (state_rank(r->jobs[i]->state) == rank) order[n++] = r->jobs[i];
    put_line(cols, "%-7s %-9s %-22s %4s  %-7s %-12s %s", "JOB", "STATE", "PROGRESS", "", "NFE",
             "WORKER", "TIME");
    size_t shown = n <= (size_t)room ? n : (size_t)room - 1;
    for (size_t i = 0; i < shown; i++)
        job_row(cols, order[i], now);
    if (shown < n) {
        int q = 0, d = 0, o = 0;
        for (size_t i = shown; i < n; i++) {
            if (!strcmp(order[i]->state, "queued"))
                q++;
            else if (!strcmp(order[i]->state, "done"))
                d++;
            else
                o++;
        }
        char more[128] = "";
        if (q) snprintf(more + strlen(more), sizeof more - strlen(more), ", %d queued", q);
        if (d) snprintf(more + strlen(more), sizeof more - strlen(more), ", %d done", d);
        if (o) snprintf(more + strlen(more), sizeof more - strlen(more), ", %d other", o);
        put_line(cols, "... %zu more job(s) not shown (%s)", n - shown, more + 2);
    }
    free(order);

    put_line(cols, "%s", "");
    put_line(cols, "%-16s %-9s %-8s %s", "WORKER", "STATE", "JOB", "PROGRESS");
    if (!nw) put_line(cols, "  (no worker connected)");
    for (size_t i = 0; i < r->n_workers; i++) {
        const Vdn__WorkerInfo *w = r->workers[i];
        if (!strcmp(w->state, "gone")) continue;
        char job[24] = "-", prog[64] = "";
        if (w->has_running_job && w->running_job) {
            snprintf(job, sizeof job, "j%llu", (unsigned long long)w->running_job);
            for (size_t k = 0; k < r->n_jobs; k++) {
                const Vdn__JobInfo *j = r->jobs[k];
                if (j->job_id != w->running_job) continue;
                if (j->nfe_total > 0 && j->nfe_seconds > 0)
                    snprintf(prog, sizeof prog, "NFE %d/%d, %.2f s/NFE", j->nfe_done, j->nfe_total,
                             j->nfe_seconds);
                else if (j->nfe_total > 0)
                    snprintf(prog, sizeof prog, "NFE %d/%d", j->nfe_done, j->nfe_total);
                else
                    snprintf(prog, sizeof prog, "starting");
            }
            if (!prog[0]) snprintf(prog, sizeof prog, "(another batch)");
        }
        if (w->n_running_attempts > 1)
            snprintf(prog, sizeof prog, "%zu jobs", w->n_running_attempts);
        put_line(cols, "%-16s %-9s %-8s %s", w->worker_id, w->state, job, prog);
        for (size_t g = 0; g < w->n_gpus; g++) {
            char line[512];
            print_gpu_line(line, sizeof line, w->gpus[g]);
            put_line(cols, "  %s", line);
        }
        if (w->reservation) put_line(cols, "  GPUs held back for %s", w->reservation);
    }
    printf("\033[J"); /* whatever the last screen had below this one */
    fflush(stdout);
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
                if (!tty) fprintf(stderr, "vdn watch: %s; still trying\n", err);
            }
            if (tty) { /* over the header line: the rest of the screen is the last known state */
                int rows, cols;
                term_size(&rows, &cols);
                printf("\033[H");
                put_line(cols,
                         "coordinator not answering for %.0f s; still trying (gives up "
                         "after 120 s)",
                         vdn_now() - down_since);
                fflush(stdout);
            }
            continue;
        }
        if (!r) {
            rc = cli_fail("watch", c, err);
            break;
        }
        if (down_since && !tty) fprintf(stderr, "vdn watch: coordinator is back\n");
        down_since = 0;
        const Vdn__BatchInfo *b = r->batches[0];
        int finished = b->n_queued == 0 && b->n_running == 0;
        double e = eta(r);
        char etas[32] = "estimating";
        if (e >= 0) fmt_duration(e, etas, sizeof etas);
        if (tty) {
            draw_screen(r, id, finished, etas, vdn_wall());
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
            char groups[1024];
            by_variant(r, groups, sizeof groups);
            if (groups[0] && off < (int)sizeof line - 2)
                snprintf(line + off, sizeof line - (size_t)off, "; %s", groups);
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
