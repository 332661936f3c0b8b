/* Why a queued job waits (docs/cluster.md "Why a job waits"): at submit, a job no registered
 * worker could ever take is refused unless the batch allows waiting; after each placement, every
 * queued job that did not start gets its reason in jobs.waiting (vdn status, vdn logs, the JSON
 * API and the status page show it), and a job no connected worker can take says so once in its
 * events and the log. */
#include <cjson/cJSON.h>
#include <string.h>

#include "coord.h"
#include "db.h"
#include "place.h"
#include "precision.h"
#include "spec.h"
#include "vdn_util.h"
#include "waiting.h"

/* A worker as the workers table registered it (gone ones too): what it could take, not what it
 * runs now. */
static void registered_worker(sqlite3_stmt *st, place_worker *p) {
    memset(p, 0, sizeof *p);
    p->id = (const char *)sqlite3_column_text(st, 0);
    p->checkpoint = (const char *)sqlite3_column_text(st, 1);
    p->identity = (const char *)sqlite3_column_text(st, 2);
    const char *precs = (const char *)sqlite3_column_text(st, 3);
    unsigned m = 0;
    p->precisions = precs && !vdn_precision_parse_list(precs, &m) ? m : 0;
    p->eligible = 1;
    cJSON *g = cJSON_Parse((const char *)sqlite3_column_text(st, 4));
    int n = cJSON_GetArraySize(g);
    if (n <= 0) { /* a CPU worker: one slot */
        p->n = 1;
        p->in_service[0] = 1;
    }
    for (int i = 0; i < n && i < PLACE_MAX_GPUS; i++) {
        const cJSON *x = cJSON_GetArrayItem(g, i);
        const cJSON *mem = cJSON_GetObjectItem(x, "memory");
        p->memory[i] = cJSON_IsNumber(mem) && mem->valuedouble > 0 ? (uint64_t)mem->valuedouble : 0;
        p->in_service[i] = !cJSON_IsTrue(cJSON_GetObjectItem(x, "out_of_service"));
        p->n = i + 1;
    }
    cJSON_Delete(g);
}

static void job_of_spec(const vdn_job_spec *s, place_job *j) {
    memset(j, 0, sizeof *j);
    j->gpus = s->gpus > 0 ? s->gpus : 1;
    j->min_memory = s->min_gpu_memory;
    j->checkpoint = s->checkpoint;
    vdn_precision p = VDN_PRECISION_BF16;
    if (s->precision) vdn_precision_parse(s->precision, &p);
    j->precision = (int)p;
}

int coord_submit_check(coord *c, const Vdn__SubmitRequest *req, vdn_errlist *errs) {
    sqlite3_stmt *st = cdb_prep(c->db,
                                "SELECT id, checkpoint, checkpoint_identity, precisions, gpus "
                                "FROM workers ORDER BY id",
                                "");
    place_worker *ws = NULL;
    int nw = 0;
    while (st && sqlite3_step(st) == SQLITE_ROW) {
        ws = realloc(ws, sizeof *ws * (size_t)(nw + 1));
        VDN_ASSERT(ws);
        registered_worker(st, &ws[nw]);
        /* the strings live in the statement's row only: keep copies */
        ws[nw].id = ws[nw].id ? vdn_xstrdup(ws[nw].id) : NULL;
        ws[nw].checkpoint = ws[nw].checkpoint ? vdn_xstrdup(ws[nw].checkpoint) : NULL;
        ws[nw].identity = ws[nw].identity ? vdn_xstrdup(ws[nw].identity) : NULL;
        nw++;
    }
    sqlite3_finalize(st);
    int bad = 0;
    /* a farm that has not seen a worker yet refuses nothing: its workers are still starting */
    for (size_t i = 0; nw > 0 && i < req->n_jobs; i++) {
        char where[64], why[300];
        snprintf(where, sizeof where, "job %zu of the batch", i + 1);
        vdn_job_spec s;
        vdn_job_spec_from_proto(req->jobs[i], &s);
        vdn_errlist own = {0};
        int invalid = vdn_job_spec_validate(&s, &own, where); /* jobs_submit says why */
        vdn_errlist_free(&own);
        if (invalid) {
            vdn_job_spec_free(&s);
            continue;
        }
        place_job j;
        job_of_spec(&s, &j);
        const char *field = "";
        if (place_unfit(ws, nw, &j, &field, why, sizeof why)) {
            vdn_errlist_add(errs,
                            "%s: field '%s': %s among the %d registered worker(s), so it could "
                            "never start; submit with --allow-wait to queue it anyway",
                            where, field, why, nw);
            bad = 1;
        }
        vdn_job_spec_free(&s);
    }
    for (int i = 0; i < nw; i++) {
        free((char *)ws[i].id);
        free((char *)ws[i].checkpoint);
        free((char *)ws[i].identity);
    }
    free(ws);
    return bad ? -1 : 0;
}

/* Why worker w, able to take jobs like this one, takes none now. */
static const char *not_taking(const cworker *w, double wall) {
    if (w->stopping) return "shutting down";
    if (w->draining) return "draining";
    if (w->blocked_until > wall) return "blocklisted";
    return "blocklisted for this job class";
}

/* The reason one queued job k did not start in this plan. 1 = a job no connected worker can
 * take (said once in its events and the log), 0 = it only waits its turn. */
static int reason(const coord *c, const place_worker *pw, const place_job *pj, int k,
                  const place_reservation *res, char *why, size_t len) {
    const place_job *j = &pj[k];
    place_worker *conn = vdn_xcalloc((size_t)c->nw + 1, sizeof *conn);
    int nconn = 0;
    for (int i = 0; i < c->nw; i++)
        if (c->w[i].connected) conn[nconn++] = pw[i];
    const char *field;
    int unfit = nconn == 0 || place_unfit(conn, nconn, j, &field, why, len);
    free(conn);
    if (nconn == 0) { /* a farm starting, or a coordinator restarted: not worth an event */
        snprintf(why, len, "no worker connected");
        return 0;
    }
    if (unfit) return 1;
    if (res->job == k) {
        if (res->start_in >= 0)
            snprintf(why, len, "next in line: GPUs of %s held back for it, expected in %.0f s",
                     c->w[res->worker].id, res->start_in);
        else
            snprintf(why, len, "next in line: GPUs of %s held back for it", c->w[res->worker].id);
        return 0;
    }
    /* the connected workers that could take it: busy, or not taking work */
    int able = 0, taking = 0;
    char off[300] = "";
    double wall = vdn_wall();
    for (int i = 0; i < c->nw; i++) {
        if (!c->w[i].connected) continue;
        const char *f;
        char tmp[8];
        if (place_unfit(&pw[i], 1, j, &f, tmp, sizeof tmp)) continue;
        able++;
        int blocked_class = 0;
        for (int b = 0; b < pw[i].nblocked && j->job_class; b++)
            blocked_class |= !strcmp(pw[i].blocked[b], j->job_class);
        if (pw[i].eligible && !blocked_class)
            taking++;
        else if (strlen(off) < sizeof off - 80)
            snprintf(off + strlen(off), sizeof off - strlen(off), "%s%s %s", off[0] ? ", " : "",
                     c->w[i].id, not_taking(&c->w[i], wall));
    }
    if (!taking)
        snprintf(why, len, "no worker that can take it takes work now (%s)", off);
    else if (taking == nconn)
        snprintf(why, len, "all %d worker%s busy", taking, taking == 1 ? "" : "s");
    else
        snprintf(why, len, "all %d worker%s that can take it busy", taking, taking == 1 ? "" : "s");
    (void)able;
    return 0;
}

void coord_note_waiting(coord *c, const place_worker *pw, const place_job *pj, int nj,
                        const place_pick *picks, int np, const place_reservation *res) {
    char err[VDN_ERR_LEN];
    c->waiting_at = vdn_now();
    if (cdb_begin(c->db, err, sizeof err)) return;
    for (int k = 0; k < nj; k++) {
        int started = 0;
        for (int p = 0; p < np; p++)
            started |= picks[p].job == k;
        if (started) continue;
        char why[400];
        int stuck = reason(c, pw, pj, k, res, why, sizeof why);
        if (cdb_run(c->db, err, sizeof err,
                    "UPDATE jobs SET waiting=? WHERE id=? AND state='queued' AND waiting IS NOT ?",
                    "sis", why, pj[k].id, why)) {
            VDN_ERROR("j%lld: %s", (long long)pj[k].id, err);
            continue;
        }
        if (!stuck || !sqlite3_changes(c->db)) continue;
        /* a job no connected worker can take: once per job and reason in its events */
        if (cdb_int(c->db, 0,
                    "SELECT count(*) FROM events WHERE job_id=? AND kind='unplaceable' AND "
                    "detail=?",
                    "is", pj[k].id, why))
            continue;
        VDN_WARN("j%lld waiting: %s", (long long)pj[k].id, why);
        cdb_event(c->db, 0, pj[k].id, 0, NULL, "unplaceable", why);
    }
    if (cdb_commit(c->db, err, sizeof err)) {
        VDN_ERROR("waiting reasons: %s", err);
        cdb_rollback(c->db);
    }
}
