#include "metrics.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
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
}

static void attempts_by_fault(FILE *f, sqlite3 *db) {
    static const char *faults[] = {"job", "worker", "transient"};
    head(f, "vdn_attempt_failures_total", "counter",
         "Attempts that ended without a result, by whose fault (docs/protocol.md).");
    for (int i = 0; i < 3; i++)
        fprintf(f, "vdn_attempt_failures_total{fault=\"%s\"} %lld\n", faults[i],
                (long long)cdb_int(db, 0, "SELECT count(*) FROM attempts WHERE fault=?", "s",
                                   faults[i]));
    head(f, "vdn_store_errors_total", "counter",
         "Attempts that ended on a store error (download, upload or opening the store).");
    fprintf(f, "vdn_store_errors_total %lld\n",
            (long long)cdb_int(db, 0,
                               "SELECT count(*) FROM attempts WHERE fault='transient' AND "
                               "(reason LIKE '%upload%' OR reason LIKE '%store%' OR reason "
                               "LIKE '%download%')",
                               ""));
}

/* Workers by state, GPUs by state (a busy worker's GPUs are busy; a gone, blocked or draining
 * one's unavailable), and one info series per GPU. */
static void workers(FILE *f, sqlite3 *db) {
    static const char *states[] = {"idle", "busy", "draining", "drained", "blocked", "gone"};
    long long by_state[6] = {0}, gpus_busy = 0, gpus_idle = 0, gpus_off = 0;
    char *winfo_text = NULL, *ginfo_text = NULL;
    size_t winfo_len = 0, ginfo_len = 0;
    FILE *winfo = open_memstream(&winfo_text, &winfo_len);
    FILE *info = open_memstream(&ginfo_text, &ginfo_len);
    VDN_ASSERT(winfo && info);
    double now = vdn_wall();
    sqlite3_stmt *st = cdb_prep(db, "SELECT id, state, gpus, blocked_until FROM workers", "");
    while (st && sqlite3_step(st) == SQLITE_ROW) {
        const char *id = (const char *)sqlite3_column_text(st, 0);
        const char *s = (const char *)sqlite3_column_text(st, 1);
        if (s && strcmp(s, "gone") && sqlite3_column_double(st, 3) > now) s = "blocked";
        int k = 5;
        for (int i = 0; i < 6; i++)
            if (s && !strcmp(s, states[i])) k = i;
        by_state[k]++;
        cJSON *g = cJSON_Parse((const char *)sqlite3_column_text(st, 2));
        int ng = cJSON_GetArraySize(g);
        const char *gs = k == 0 ? "idle" : k == 1 ? "busy" : "unavailable";
        if (k == 0)
            gpus_idle += ng;
        else if (k == 1)
            gpus_busy += ng;
        else
            gpus_off += ng;
        const cJSON *e;
        cJSON_ArrayForEach(e, g) {
            const cJSON *ix = cJSON_GetObjectItem(e, "index"), *nm = cJSON_GetObjectItem(e, "name");
            const cJSON *mem = cJSON_GetObjectItem(e, "memory");
            fprintf(info, "vdn_gpu_info{worker=\"");
            label(info, id);
            fprintf(info, "\",gpu=\"%d\",name=\"", cJSON_IsNumber(ix) ? ix->valueint : 0);
            label(info, cJSON_IsString(nm) ? nm->valuestring : "");
            fprintf(info, "\",state=\"%s\",memory_bytes=\"%.0f\"} 1\n", gs,
                    cJSON_IsNumber(mem) ? mem->valuedouble : 0);
        }
        cJSON_Delete(g);
        fprintf(winfo, "vdn_worker_info{worker=\"");
        label(winfo, id);
        fprintf(winfo, "\",state=\"%s\"} 1\n", states[k]);
    }
    sqlite3_finalize(st);
    fclose(info);
    fclose(winfo);
    head(f, "vdn_workers", "gauge", "Workers by state (every worker that ever said READY).");
    for (int i = 0; i < 6; i++)
        fprintf(f, "vdn_workers{state=\"%s\"} %lld\n", states[i], by_state[i]);
    head(f, "vdn_gpus", "gauge", "GPUs of the workers by state.");
    fprintf(f,
            "vdn_gpus{state=\"busy\"} %lld\nvdn_gpus{state=\"idle\"} %lld\n"
            "vdn_gpus{state=\"unavailable\"} %lld\n",
            gpus_busy, gpus_idle, gpus_off);
    head(f, "vdn_worker_info", "gauge", "One series per worker, labelled with its state.");
    fputs(winfo_text ? winfo_text : "", f);
    head(f, "vdn_gpu_info", "gauge", "One series per GPU, labelled with its worker's state.");
    fputs(ginfo_text ? ginfo_text : "", f);
    free(winfo_text);
    free(ginfo_text);
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
    workers(f, db);
    fclose(f);
    return text;
}
