/* Tables for humans; `--json` bypasses all of this. */
#include "print.h"

#include <string.h>

#include "cli_common.h"

const char *fmt_duration(double s, char *buf, size_t n) {
    if (s < 0) s = 0;
    if (s < 60)
        snprintf(buf, n, "%.1f s", s);
    else if (s < 3600)
        snprintf(buf, n, "%d m %02d s", (int)s / 60, (int)s % 60);
    else
        snprintf(buf, n, "%d h %02d m", (int)s / 3600, (int)s % 3600 / 60);
    return buf;
}

void print_batches(FILE *f, Vdn__BatchInfo **b, size_t n) {
    if (!n) {
        fprintf(f, "no batches\n");
        return;
    }
    fprintf(f, "%-8s %-10s %5s %5s %7s %7s %5s %6s %9s  %-21s %s\n", "BATCH", "STATE", "PRIO",
            "JOBS", "QUEUED", "RUNNING", "DONE", "FAILED", "CANCELLED", "SUBMITTED", "TAG");
    for (size_t i = 0; i < n; i++) {
        char id[24], t[40];
        snprintf(id, sizeof id, "b%llu", (unsigned long long)b[i]->batch_id);
        fprintf(f, "%-8s %-10s %5d %5d %7d %7d %5d %6d %9d  %-21s %s\n", id, b[i]->state,
                b[i]->priority, b[i]->n_jobs, b[i]->n_queued, b[i]->n_running, b[i]->n_done,
                b[i]->n_failed, b[i]->n_cancelled, cli_time(b[i]->submitted_at, t, sizeof t),
                b[i]->tag ? b[i]->tag : "");
    }
}

static const char *last_line(const char *s) {
    if (!s) return "";
    const char *nl = strrchr(s, '\n');
    return nl ? nl + 1 : s;
}

/* A job's state for people: a quarantined job is failed, and says so. */
static const char *job_state(const Vdn__JobInfo *j) {
    return j->quarantined ? "quarantined" : j->state;
}

/* Its crash record: "A, B" (the worker of each renderer crash). */
static void crash_list(char *buf, size_t len, const Vdn__JobInfo *j) {
    buf[0] = 0;
    for (size_t i = 0; i < j->n_crashed_on; i++)
        snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", i ? ", " : "", j->crashed_on[i]);
}

void print_jobs(FILE *f, Vdn__JobInfo **j, size_t n) {
    fprintf(f, "%-8s %-11s %4s %-16s %-9s %-10s %s\n", "JOB", "STATE", "TRY", "WORKER", "NFE",
            "ELAPSED", "OUTPUT / ERROR");
    for (size_t i = 0; i < n; i++) {
        char id[24], nfe[24], el[24];
        snprintf(id, sizeof id, "j%llu", (unsigned long long)j[i]->job_id);
        if (j[i]->nfe_total)
            snprintf(nfe, sizeof nfe, "%d/%d", j[i]->nfe_done, j[i]->nfe_total);
        else
            snprintf(nfe, sizeof nfe, "-");
        const char *what = "";
        char wait[640];
        if (!strcmp(j[i]->state, "done") && j[i]->n_object_keys)
            what = j[i]->object_keys[0];
        else if (!strcmp(j[i]->state, "queued") && j[i]->waiting) {
            snprintf(wait, sizeof wait, "waiting: %s", j[i]->waiting); /* why not started */
            what = wait;
        } else if (j[i]->last_error)
            what = last_line(j[i]->last_error);
        else if (j[i]->request && j[i]->request->output_prefix)
            what = j[i]->request->output_prefix;
        fprintf(f, "%-8s %-11s %4d %-16s %-9s %-10s %s\n", id, job_state(j[i]), j[i]->attempts,
                j[i]->worker_id ? j[i]->worker_id : "-", nfe,
                j[i]->elapsed_seconds > 0 ? fmt_duration(j[i]->elapsed_seconds, el, sizeof el)
                                          : "-",
                what);
    }
}

void print_job_detail(FILE *f, const Vdn__JobInfo *j) {
    char t[40], t2[40];
    fprintf(f, "job j%llu (batch b%llu): %s%s\n", (unsigned long long)j->job_id,
            (unsigned long long)j->batch_id, j->state, j->quarantined ? ", quarantined" : "");
    fprintf(f, "  priority %d, attempts %d%s%s\n", j->priority, j->attempts,
            j->worker_id ? ", on " : "", j->worker_id ? j->worker_id : "");
    if (j->tag) fprintf(f, "  tag        %s\n", j->tag);
    if (j->request) {
        const Vdn__RenderRequest *r = j->request;
        if (r->prompt_cache && r->prompt_cache[0])
            fprintf(f, "  prompt     %s\n", r->prompt_cache);
        else if (r->prompt) /* a text prompt: the worker encodes it; its first line shown */
            fprintf(f, "  prompt     text \"%.*s%s\"\n", (int)strcspn(r->prompt, "\n"), r->prompt,
                    strchr(r->prompt, '\n') ? " ..." : "");
        fprintf(f,
                "  render     %d frames, %dx%d, %d steps, seed %s%llu, variant %s, precision %s\n",
                r->frames, r->width, r->height, r->steps, r->has_seed ? "" : "(default) ",
                (unsigned long long)r->seed, r->variant ? r->variant : "vdn",
                r->precision && r->precision[0] ? r->precision : "bf16");
        if (r->output_prefix) fprintf(f, "  output     %s\n", r->output_prefix);
    }
    if (!strcmp(j->state, "queued") && j->waiting) fprintf(f, "  waiting    %s\n", j->waiting);
    if (j->nfe_total)
        fprintf(f, "  progress   %d/%d NFE, last NFE %.2f s\n", j->nfe_done, j->nfe_total,
                j->nfe_seconds);
    fprintf(f, "  submitted  %s, finished %s\n", cli_time(j->submitted_at, t, sizeof t),
            j->has_finished_at ? cli_time(j->finished_at, t2, sizeof t2) : "-");
    for (size_t i = 0; i < j->n_object_keys; i++)
        fprintf(f, "  object     %s\n", j->object_keys[i]);
    if (j->n_crashed_on) { /* crash blame: where it crashed the renderer */
        char who[512];
        crash_list(who, sizeof who, j);
        fprintf(f, "  crashes    the renderer on %s%s\n", who,
                j->quarantined ? " (quarantined: vdn retry --force runs it again)" : "");
    }
    if (j->last_error) {
        fprintf(f, "  errors:\n");
        const char *s = j->last_error;
        while (*s) {
            const char *nl = strchr(s, '\n');
            int len = nl ? (int)(nl - s) : (int)strlen(s);
            fprintf(f, "    %.*s\n", len, s);
            s += len + (nl ? 1 : 0);
        }
    }
}

void print_gpu_line(char *buf, size_t len, const Vdn__Gpu *g) {
    char mem[64] = "";
    if (g->memory_used && g->memory_bytes)
        snprintf(mem, sizeof mem, "  %.1f/%.0f GiB", g->memory_used / 1073741824.0,
                 g->memory_bytes / 1073741824.0);
    else if (g->memory_bytes)
        snprintf(mem, sizeof mem, "  %.0f GiB", g->memory_bytes / 1073741824.0);
    if (g->out_of_service)
        snprintf(buf, len, "gpu %-3d OUT OF SERVICE%s  (%s)", g->index, mem,
                 g->fault ? g->fault : "no reason given");
    else if (g->has_job_id && g->nfe_total > 0)
        snprintf(buf, len, "gpu %-3d j%-8llu NFE %d/%d%s", g->index, (unsigned long long)g->job_id,
                 g->nfe_done, g->nfe_total, mem);
    else if (g->has_job_id)
        snprintf(buf, len, "gpu %-3d j%-8llu starting%s", g->index, (unsigned long long)g->job_id,
                 mem);
    else if (g->attempt_id)
        snprintf(buf, len, "gpu %-3d stopping attempt %llu%s", g->index,
                 (unsigned long long)g->attempt_id, mem);
    else if (g->has_reserved_for)
        snprintf(buf, len, "gpu %-3d free, held back for j%llu%s", g->index,
                 (unsigned long long)g->reserved_for, mem);
    else
        snprintf(buf, len, "gpu %-3d free%s", g->index, mem);
}

void print_workers(FILE *f, Vdn__WorkerInfo **w, size_t n) {
    if (!n) {
        fprintf(f, "no workers\n");
        return;
    }
    fprintf(f, "%-16s %-9s %4s %-10s %-8s %-21s %s\n", "WORKER", "STATE", "GPUS", "JOB", "FAILS",
            "LAST SEEN", "CHECKPOINT");
    for (size_t i = 0; i < n; i++) {
        char job[40], t[40];
        if (w[i]->n_running_attempts > 1)
            snprintf(job, sizeof job, "j%llu +%zu", (unsigned long long)w[i]->running_job,
                     w[i]->n_running_attempts - 1);
        else if (w[i]->has_running_job)
            snprintf(job, sizeof job, "j%llu", (unsigned long long)w[i]->running_job);
        else
            snprintf(job, sizeof job, "-");
        fprintf(f, "%-16s %-9s %4zu %-10s %-8d %-21s %s\n", w[i]->worker_id, w[i]->state,
                w[i]->n_gpus, job, w[i]->failures, cli_time(w[i]->last_seen, t, sizeof t),
                w[i]->checkpoint ? w[i]->checkpoint : "");
        /* the DiT precisions it loaded, when more than the default (jobs' "precision") */
        if (w[i]->n_precisions > 1 ||
            (w[i]->n_precisions == 1 && strcmp(w[i]->precisions[0], "bf16"))) {
            fprintf(f, "%-16s   precision", "");
            for (size_t k = 0; k < w[i]->n_precisions; k++)
                fprintf(f, "%s%s", k ? "," : " ", w[i]->precisions[k]);
            fputc('\n', f);
        }
        /* worker faults kept it from these job classes for now (docs/protocol.md) */
        for (size_t k = 0; k < w[i]->n_blocked_classes; k++)
            fprintf(f, "%-16s   no jobs of class %s for now (worker faults)\n", "",
                    w[i]->blocked_classes[k]);
        /* each GPU of a connected worker: its job and progress, memory in use, faults */
        if (!strcmp(w[i]->state, "gone")) continue;
        for (size_t g = 0; g < w[i]->n_gpus; g++) {
            char line[512];
            print_gpu_line(line, sizeof line, w[i]->gpus[g]);
            fprintf(f, "  %s\n", line);
        }
        if (w[i]->reservation)
            fprintf(f, "  GPUs held back for %s (the head of the queue)\n", w[i]->reservation);
    }
}

void print_logs(FILE *f, const Vdn__LogsReply *r) {
    if (r->job) print_job_detail(f, r->job);
    fprintf(f, "\nattempts:\n");
    for (size_t i = 0; i < r->n_attempts; i++) {
        const Vdn__AttemptInfo *a = r->attempts[i];
        char t[40], d[24], fault[32] = "";
        if (a->fault) snprintf(fault, sizeof fault, "(%s fault) ", a->fault);
        fprintf(f, "  %-6llu %-10s %-16s %s  %s  %d NFE  %s%s\n", (unsigned long long)a->attempt_id,
                a->state, a->worker_id ? a->worker_id : "", cli_time(a->started_at, t, sizeof t),
                a->has_finished_at ? fmt_duration(a->finished_at - a->started_at, d, sizeof d) : "",
                a->nfe_evaluated, fault, a->reason ? a->reason : "");
    }
    fprintf(f, "\nevents:\n");
    for (size_t i = 0; i < r->n_events; i++) {
        const Vdn__EventInfo *e = r->events[i];
        char t[40], att[32] = "";
        if (e->has_attempt_id)
            snprintf(att, sizeof att, "attempt %llu", (unsigned long long)e->attempt_id);
        fprintf(f, "  %s  %-13s %-12s %-16s %s\n", cli_time(e->at, t, sizeof t), e->kind, att,
                e->worker_id ? e->worker_id : "", e->detail ? e->detail : "");
    }
}
