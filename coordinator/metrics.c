#include "metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "query.h"
#include "vdn_util.h"

/* A label value: backslash, double quote and newline escaped, as the format requires. */
static void label(FILE *f, const char *s) {
    for (; s && *s; s++) {
        if (*s == '\\' || *s == '"')
            fputc('\\', f), fputc(*s, f);
        else if (*s == '\n')
            fputs("\\n", f);
        else
            fputc(*s, f);
    }
}

static void head(FILE *f, const char *name, const char *type, const char *help) {
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A histogram of the values the query yields (one REAL column), cumulative buckets. */
static void histogram(FILE *f, sqlite3 *db, const char *name, const char *help, const char *sql,
                      const double *le, int n) {
    long long count[32] = {0}, total = 0;
    double sum = 0;
    sqlite3_stmt *st = cdb_prep(db, sql, "");
    while (st && sqlite3_step(st) == SQLITE_ROW) {
        double v = sqlite3_column_double(st, 0);
        if (v < 0) v = 0;
        for (int i = 0; i < n; i++)
            if (v <= le[i]) count[i]++;
        sum += v;
        total++;
    }
    sqlite3_finalize(st);
    head(f, name, "histogram", help);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s_bucket{le=\"%g\"} %lld\n", name, le[i], count[i]);
    fprintf(f, "%s_bucket{le=\"+Inf\"} %lld\n%s_sum %.6f\n%s_count %lld\n", name, total, name, sum,
            name, total);
}

static void jobs_by_state(FILE *f, sqlite3 *db) {
    static const char *states[] = {"queued", "running", "done", "failed", "cancelled"};
    head(f, "vdn_jobs", "gauge", "Jobs by state.");
    for (int i = 0; i < 5; i++)
        fprintf(
            f, "vdn_jobs{state=\"%s\"} %lld\n", states[i],
            (long long)cdb_int(db, 0, "SELECT count(*) FROM jobs WHERE state=?", "s", states[i]));
    head(f, "vdn_jobs_quarantined", "gauge",
         "Failed jobs quarantined for crashing the renderer (docs/cluster.md \"Crash blame\").");
    fprintf(f, "vdn_jobs_quarantined %lld\n",
            (long long)cdb_int(db, 0,
                               "SELECT count(*) FROM jobs WHERE state='failed' AND "
                               "quarantined",
                               ""));
}

static void attempts_by_fault(FILE *f, sqlite3 *db) {
    static const char *faults[] = {"job", "worker", "transient", "crash"};
    head(f, "vdn_attempt_failures_total", "counter",
         "Attempts that ended without a result, by whose fault (docs/protocol.md).");
    for (int i = 0; i < 4; i++)
        fprintf(f, "vdn_attempt_failures_total{fault=\"%s\"} %lld\n", faults[i],
                (long long)cdb_int(db, 0, "SELECT count(*) FROM attempts WHERE fault=?", "s",
                                   faults[i]));
}

/* Attempts that ended on a store error, by the operation the worker says failed (Fail.store_op,
 * kept in attempts.store_op): exact, never guessed from the reason's words. Workers older than
 * the field report none; attempts that ended before schema 4 have none. */
static void store_errors(FILE *f, sqlite3 *db) {
    static const char *ops[] = {"download", "upload", "open"};
    head(f, "vdn_store_errors_total", "counter",
         "Attempts that ended on an object-store error, by operation (download of an input, "
         "upload of an output, opening the store), as the worker typed it.");
    for (int i = 0; i < 3; i++)
        fprintf(f, "vdn_store_errors_total{op=\"%s\"} %lld\n", ops[i],
                (long long)cdb_int(db, 0, "SELECT count(*) FROM attempts WHERE store_op=?", "s",
                                   ops[i]));
}

static const char *const WORKER_STATES[] = {"idle",    "busy",    "draining",
                                            "drained", "blocked", "gone"};
static const char *const GPU_STATES[] = {"idle", "busy", "reserved", "out_of_service",
                                         "unavailable"};
enum { N_WORKER_STATES = 6, N_GPU_STATES = 5 };

static int state_index(const char *s, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (s && !strcmp(s, names[i])) return i;
    return n - 1; /* unknown: the last ("gone", "unavailable") */
}

/* The series of one family accumulate in their own buffer while the workers are walked once,
 * because the format wants each family's samples together under its HELP and TYPE. */
typedef struct {
    char *text;
    size_t len;
    FILE *f;
} series;

static void series_open(series *s) {
    memset(s, 0, sizeof *s);
    s->f = open_memstream(&s->text, &s->len);
    VDN_ASSERT(s->f);
}

static void series_emit_as(FILE *f, series *s, const char *name, const char *type,
                           const char *help) {
    fclose(s->f);
    head(f, name, type, help);
    fputs(s->text ? s->text : "", f);
    free(s->text);
}

static void series_emit(FILE *f, series *s, const char *name, const char *help) {
    series_emit_as(f, s, name, "gauge", help);
}

/* worker="W",gpu="N" */
static void gpu_labels(FILE *f, const char *worker, const Vdn__Gpu *g) {
    fputs("worker=\"", f);
    label(f, worker);
    fprintf(f, "\",gpu=\"%d\"", g->index);
}

enum { S_GPU_INFO, S_GPU_STATE, S_GPU_MEM, S_GPU_USED, S_GPU_JOB, S_GPU_PROGRESS, S_NSERIES };

/* One GPU's series: its state (one series per state, 1 for the current one, so an alert can
 * say vdn_gpu_state{state="out_of_service"} == 1), memory, and the job it runs. */
static void gpu_series(series *s, const char *worker, const Vdn__Gpu *g) {
    const char *st = g->state ? g->state : "unavailable";
    fprintf(s[S_GPU_INFO].f, "vdn_gpu_info{");
    gpu_labels(s[S_GPU_INFO].f, worker, g);
    fputs(",name=\"", s[S_GPU_INFO].f);
    label(s[S_GPU_INFO].f, g->name ? g->name : "");
    fprintf(s[S_GPU_INFO].f, "\",state=\"%s\",memory_bytes=\"%llu\"} 1\n", st,
            (unsigned long long)g->memory_bytes);
    for (int i = 0; i < N_GPU_STATES; i++) {
        fprintf(s[S_GPU_STATE].f, "vdn_gpu_state{");
        gpu_labels(s[S_GPU_STATE].f, worker, g);
        fprintf(s[S_GPU_STATE].f, ",state=\"%s\"} %d\n", GPU_STATES[i], !strcmp(st, GPU_STATES[i]));
    }
    fprintf(s[S_GPU_MEM].f, "vdn_gpu_memory_bytes{");
    gpu_labels(s[S_GPU_MEM].f, worker, g);
    fprintf(s[S_GPU_MEM].f, "} %llu\n", (unsigned long long)g->memory_bytes);
    fprintf(s[S_GPU_USED].f, "vdn_gpu_memory_used_bytes{");
    gpu_labels(s[S_GPU_USED].f, worker, g);
    fprintf(s[S_GPU_USED].f, "} %llu\n", (unsigned long long)g->memory_used);
    if (!g->has_job_id) return;
    fprintf(s[S_GPU_JOB].f, "vdn_gpu_job_info{");
    gpu_labels(s[S_GPU_JOB].f, worker, g);
    fprintf(s[S_GPU_JOB].f, ",job=\"j%llu\",attempt=\"%llu\"} 1\n", (unsigned long long)g->job_id,
            (unsigned long long)g->attempt_id);
    fprintf(s[S_GPU_PROGRESS].f, "vdn_gpu_job_progress_ratio{");
    gpu_labels(s[S_GPU_PROGRESS].f, worker, g);
    fprintf(s[S_GPU_PROGRESS].f, ",job=\"j%llu\"} %.6f\n", (unsigned long long)g->job_id,
            g->nfe_total > 0 ? (double)g->nfe_done / g->nfe_total : 0.0);
}

/* Workers by state, GPUs by their own state (docs/cluster.md "Watching the farm"), and the
 * per-worker and per-GPU series, from the same WorkerInfo replies `vdn workers` prints. */
static void workers(FILE *f, sqlite3 *db) {
    long long by_state[N_WORKER_STATES] = {0}, gpus[N_GPU_STATES] = {0};
    series s[S_NSERIES], winfo, wjobs, wretries;
    for (int i = 0; i < S_NSERIES; i++)
        series_open(&s[i]);
    series_open(&winfo);
    series_open(&wjobs);
    series_open(&wretries);
    Vdn__WorkersReply *r = query_workers(db);
    for (size_t i = 0; i < r->n_workers; i++) {
        const Vdn__WorkerInfo *w = r->workers[i];
        int k = state_index(w->state, WORKER_STATES, N_WORKER_STATES);
        by_state[k]++;
        fputs("vdn_worker_info{worker=\"", winfo.f);
        label(winfo.f, w->worker_id);
        fprintf(winfo.f, "\",state=\"%s\"} 1\n", WORKER_STATES[k]);
        fputs("vdn_worker_running_jobs{worker=\"", wjobs.f);
        label(wjobs.f, w->worker_id);
        fprintf(wjobs.f, "\"} %zu\n", w->n_running_jobs);
        fputs("vdn_store_retries_total{worker=\"", wretries.f);
        label(wretries.f, w->worker_id);
        fprintf(wretries.f, "\"} %llu\n", (unsigned long long)w->store_retries);
        for (size_t g = 0; g < w->n_gpus; g++) {
            gpus[state_index(w->gpus[g]->state, GPU_STATES, N_GPU_STATES)]++;
            gpu_series(s, w->worker_id, w->gpus[g]);
        }
    }
    protobuf_c_message_free_unpacked(&r->base, NULL);
    head(f, "vdn_workers", "gauge", "Workers by state (every worker that ever said READY).");
    for (int i = 0; i < N_WORKER_STATES; i++)
        fprintf(f, "vdn_workers{state=\"%s\"} %lld\n", WORKER_STATES[i], by_state[i]);
    head(f, "vdn_gpus", "gauge",
         "GPUs of the workers by their own state (unavailable: the worker is gone, draining, "
         "drained or blocked).");
    for (int i = 0; i < N_GPU_STATES; i++)
        fprintf(f, "vdn_gpus{state=\"%s\"} %lld\n", GPU_STATES[i], gpus[i]);
    series_emit(f, &winfo, "vdn_worker_info", "One series per worker, labelled with its state.");
    series_emit(f, &wjobs, "vdn_worker_running_jobs",
                "Jobs each worker runs now (one per GPU set).");
    series_emit_as(f, &wretries, "vdn_store_retries_total", "counter",
                   "Store operations of each worker that failed and then succeeded on a retry "
                   "(the S3 client's own or a whole upload tried again), since its process "
                   "started: a restart resets it.");
    series_emit(f, &s[S_GPU_INFO], "vdn_gpu_info", "One series per GPU, labelled with its state.");
    series_emit(f, &s[S_GPU_STATE], "vdn_gpu_state",
                "1 for the GPU's current state, 0 for the others.");
    series_emit(f, &s[S_GPU_MEM], "vdn_gpu_memory_bytes", "Memory of each GPU.");
    series_emit(f, &s[S_GPU_USED], "vdn_gpu_memory_used_bytes",
                "Memory in use on each GPU: the engine's allocations (0 when unknown or gone).");
    series_emit(f, &s[S_GPU_JOB], "vdn_gpu_job_info", "The job each busy GPU runs.");
    series_emit(f, &s[S_GPU_PROGRESS], "vdn_gpu_job_progress_ratio",
                "NFEs done over NFEs of the job each busy GPU runs.");
}

char *coord_metrics_text(sqlite3 *db) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    VDN_ASSERT(f);
    jobs_by_state(f, db);
    static const double wait_le[] = {1, 5, 15, 60, 300, 900, 3600, 14400};
    histogram(f, db, "vdn_job_queue_wait_seconds",
              "Seconds from submission to the first assignment, per job that started.",
              "SELECT min(a.started_at) - j.submitted_at FROM attempts a JOIN jobs j ON "
              "j.id = a.job_id GROUP BY j.id",
              wait_le, 8);
    static const double render_le[] = {10, 30, 60, 120, 300, 600, 1800, 3600, 7200};
    histogram(f, db, "vdn_job_render_seconds",
              "Render seconds of done jobs (the accepted attempt's run record).",
              "SELECT elapsed_seconds FROM jobs WHERE state='done'", render_le, 9);
    double rate = 0;
    sqlite3_stmt *st =
        cdb_prep(db, "SELECT nfe_seconds FROM jobs WHERE state='running' AND nfe_seconds > 0", "");
    while (st && sqlite3_step(st) == SQLITE_ROW)
        rate += 1.0 / sqlite3_column_double(st, 0);
    sqlite3_finalize(st);
    head(f, "vdn_model_evaluations_per_second", "gauge",
         "Model evaluations (NFEs) per second over the running jobs, from each one's last NFE.");
    fprintf(f, "vdn_model_evaluations_per_second %.6f\n", rate);
    head(f, "vdn_model_evaluations_total", "counter",
         "NFEs evaluated over all attempts (resumed renders skip the ones they resume from).");
    fprintf(f, "vdn_model_evaluations_total %lld\n",
            (long long)cdb_int(db, 0, "SELECT coalesce(sum(nfe_evaluated), 0) FROM attempts", ""));
    attempts_by_fault(f, db);
    store_errors(f, db);
    workers(f, db);
    fclose(f);
    return text;
}
