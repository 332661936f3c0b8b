#include "place.h"

#include <stdio.h>
#include <string.h>

#include "precision.h"

double place_estimate(const place_worker *w, const place_job *j) {
    if (w->rate <= 0 || j->steps <= 0 || j->frames <= 0 || j->height <= 0 || j->width <= 0)
        return -1;
    return w->rate * j->steps * (double)j->frames * j->height * j->width;
}

int place_has_precision(const place_worker *w, int precision) {
    unsigned m = w->precisions ? w->precisions : 1u; /* bit 0: bf16 */
    return precision >= 0 && precision < 32 && (m >> precision & 1u);
}

static int has_checkpoint(const place_worker *w, const place_job *j) {
    return !(j->checkpoint && j->checkpoint[0]) ||
           (w->checkpoint && !strcmp(j->checkpoint, w->checkpoint)) ||
           (w->identity && !strcmp(j->checkpoint, w->identity));
}

/* GPUs of w a job could use (in service, enough memory); a CPU worker: its one slot */
static int usable_count(const place_worker *w, const place_job *j) {
    int usable = 0;
    for (int i = 0; i < w->n; i++)
        usable += w->in_service[i] && w->memory[i] >= j->min_memory;
    return usable;
}

int place_unfit(const place_worker *ws, int nw, const place_job *j, const char **field, char *why,
                size_t len) {
    int ck = 0, prec = 0, most = 0, most_any = 0;
    for (int i = 0; i < nw; i++) {
        if (!has_checkpoint(&ws[i], j)) continue;
        ck++;
        if (!place_has_precision(&ws[i], j->precision)) continue;
        prec++;
        int u = usable_count(&ws[i], j), n = 0;
        for (int g = 0; g < ws[i].n; g++)
            n += ws[i].in_service[g];
        if (u > most) most = u;
        if (n > most_any) most_any = n;
        if (u >= j->gpus) return 0;
    }
    if (!ck) {
        *field = "checkpoint";
        snprintf(why, len, "no worker has checkpoint %s", j->checkpoint);
    } else if (!prec) {
        *field = "precision";
        snprintf(why, len, "no worker renders precision %s%s%s",
                 j->precision >= 0 && j->precision < VDN_PRECISION_COUNT
                     ? vdn_precision_name((vdn_precision)j->precision)
                     : "?",
                 j->checkpoint && j->checkpoint[0] ? " with checkpoint " : "",
                 j->checkpoint && j->checkpoint[0] ? j->checkpoint : "");
    } else if (most_any < j->gpus) {
        *field = "gpus";
        snprintf(why, len, "no worker with %d GPU%s (the most any has in service: %d)", j->gpus,
                 j->gpus == 1 ? "" : "s", most_any);
    } else {
        *field = "min_gpu_memory";
        snprintf(why, len, "no worker with %d GPU%s of at least %.1f GiB (at most %d)", j->gpus,
                 j->gpus == 1 ? "" : "s", (double)j->min_memory / 1073741824.0, most);
    }
    return 1;
}

static int fits_worker(const place_worker *w, const place_job *j) {
    if (!w->eligible) return 0;
    if (!place_has_precision(w, j->precision)) return 0;
    for (int i = 0; i < w->nblocked && j->job_class; i++)
        if (!strcmp(w->blocked[i], j->job_class)) return 0;
    if (!has_checkpoint(w, j)) return 0;
    /* a one-job worker (a CPU worker, an older worker) takes a job that asks for more GPUs
     * than it has only as before: never */
    return usable_count(w, j) >= j->gpus;
}

static int usable_gpu(const place_worker *w, int i, const place_job *j) {
    return w->in_service[i] && w->memory[i] >= j->min_memory;
}

/* The job's GPUs on w if it can start now: the lowest free usable positions. 0 = not now. */
static uint64_t free_set(const place_worker *w, const place_job *j) {
    if (w->one_job) {
        for (int i = 0; i < w->n; i++)
            if (w->busy[i]) return 0;
    }
    uint64_t m = 0;
    int got = 0;
    for (int i = 0; i < w->n && got < j->gpus; i++)
        if (usable_gpu(w, i, j) && !w->busy[i]) m |= 1ull << i, got++;
    if (got < j->gpus) return 0;
    if (w->one_job) /* it renders on all of them anyway */
        for (int i = 0; i < w->n; i++)
            if (w->in_service[i]) m |= 1ull << i;
    return m;
}

static int popcount(uint64_t m) {
    return __builtin_popcountll(m);
}

static int free_count(const place_worker *w) {
    int n = 0;
    for (int i = 0; i < w->n; i++)
        n += w->in_service[i] && !w->busy[i];
    return n;
}

/* When k usable GPUs of w are expected free: now (0), in T seconds, or unknown (-1). Fills
 * *mask with the GPUs it would get (free ones first, then in release order). */
static double start_time(const place_worker *w, const place_job *j, uint64_t *mask) {
    int order[PLACE_MAX_GPUS], n = 0;
    for (int i = 0; i < w->n; i++)
        if (usable_gpu(w, i, j)) order[n++] = i;
    /* free first, then known release times ascending, then unknown ones */
    for (int a = 1; a < n; a++)
        for (int b = a; b > 0; b--) {
            int x = order[b - 1], y = order[b];
            double kx = !w->busy[x] ? -2 : w->release_in[x] < 0 ? 1e300 : w->release_in[x];
            double ky = !w->busy[y] ? -2 : w->release_in[y] < 0 ? 1e300 : w->release_in[y];
            if (kx <= ky) break;
            order[b - 1] = y, order[b] = x;
        }
    *mask = 0; /* informative: which GPUs it would get; backfill counts, it does not pin */
    double t = 0;
    for (int i = 0; i < w->n; i++) {
        /* its k GPUs, or every GPU of a one-job worker */
        int needed = w->one_job ? w->busy[i] : 0;
        for (int k = 0; k < j->gpus && k < n && !needed; k++)
            needed = order[k] == i;
        if (!needed) continue;
        if (usable_gpu(w, i, j)) *mask |= 1ull << i;
        if (!w->busy[i]) continue;
        if (w->release_in[i] < 0)
            t = -1;
        else if (t >= 0 && w->release_in[i] > t)
            t = w->release_in[i];
    }
    return t;
}

/* GPUs of w beyond the k a job needs that are free at time t (free now, or freed by t). */
static int spare_at(const place_worker *w, const place_job *j, double t) {
    if (t < 0) return 0;
    int at_t = 0;
    for (int i = 0; i < w->n; i++)
        if (usable_gpu(w, i, j) &&
            (!w->busy[i] || (w->release_in[i] >= 0 && w->release_in[i] <= t)))
            at_t++;
    return at_t > j->gpus ? at_t - j->gpus : 0;
}

int place_plan(place_worker *ws, int nw, const place_job *js, int nj, place_pick *picks,
               int maxpicks, const place_reservation *prev, place_reservation *res) {
    int np = 0, spare = 0;
    memset(res, 0, sizeof *res);
    res->job = res->worker = -1;
    for (int k = 0; k < nj && np < maxpicks; k++) {
        const place_job *j = &js[k];
        /* best fit: the worker with the fewest free GPUs that still takes it now, so whole
         * machines stay free for big jobs; the worker that just lost it only when no other
         * takes it now (a job killed there should not go straight back) */
        int best = -1, best_avoided = 0;
        uint64_t best_m = 0;
        int ends_by_t = 0;
        for (int i = 0; i < nw; i++) {
            place_worker *w = &ws[i];
            if (!fits_worker(w, j)) continue;
            uint64_t m = free_set(w, j);
            if (!m) continue;
            int by_t = 0;
            if (res->worker == i) {
                /* backfill on the reserved worker: only what cannot delay the reserved job */
                double est = place_estimate(w, j);
                by_t = res->start_in >= 0 && est >= 0 && est <= res->start_in;
                /* else it may only take GPUs the reserved job will not need at T: what
                 * counts is how many are free then, not which */
                if (!by_t && (popcount(m) > spare || w->one_job)) continue;
            }
            int avoided = j->avoid && w->id && !strcmp(j->avoid, w->id);
            if (best < 0 || (best_avoided && !avoided) ||
                (avoided == best_avoided && free_count(w) < free_count(&ws[best]))) {
                best = i;
                best_avoided = avoided;
                best_m = m;
                ends_by_t = by_t;
            }
        }
        if (best >= 0) {
            place_worker *w = &ws[best];
            double est = place_estimate(w, j);
            for (int p = 0; p < w->n; p++)
                if (best_m >> p & 1) {
                    w->busy[p] = 1;
                    w->release_in[p] = est;
                }
            if (res->worker == best && !ends_by_t) spare -= popcount(best_m);
            picks[np++] = (place_pick){k, best, best_m};
            continue;
        }
        if (res->job >= 0) continue; /* one reservation: the first job that waits */
        /* Reserve for it where it can start soonest (unknown counts as last; then the worker
         * with the most free GPUs). A job no worker could ever take (too many GPUs, another
         * checkpoint) waits without holding anything back. */
        int rw = -1;
        double rt = 0;
        uint64_t rm = 0;
        for (int i = 0; i < nw; i++) {
            if (!fits_worker(&ws[i], j)) continue;
            uint64_t m;
            double t = start_time(&ws[i], j, &m);
            int better = rw < 0 || (t >= 0 && (rt < 0 || t < rt)) ||
                         (t < 0 && rt < 0 && free_count(&ws[i]) > free_count(&ws[rw]));
            if (better) rw = i, rt = t, rm = m;
        }
        if (rw < 0) continue;
        /* The same reservation as last time keeps its deadline: estimates err short (setup,
         * upload), and a T recomputed from jobs backfilled against the previous T would let
         * a chain of them push the big job back for ever. It only moves earlier. */
        if (prev && prev->job_id == j->id && prev->worker >= 0 && prev->worker < nw &&
            fits_worker(&ws[prev->worker], j)) {
            double t = start_time(&ws[prev->worker], j, &rm);
            rw = prev->worker;
            rt = t < 0 ? -1 : prev->start_in >= 0 && prev->start_in < t ? prev->start_in : t;
        }
        res->job = k;
        res->job_id = j->id;
        res->worker = rw;
        res->start_in = rt;
        res->mask = rm;
        spare = spare_at(&ws[rw], j, rt);
    }
    return np;
}
