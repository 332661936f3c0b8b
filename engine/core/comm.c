/* Splits, the collectives' front end, and the in-process communicator (comm.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "op_backend.h"
#include "vdn_util.h"

void vdn_split_rows(vdn_split *sp, int64_t n, int parts) {
    VDN_ASSERT(parts >= 1 && parts <= VDN_COMM_MAX_RANKS);
    const int64_t per = (n + parts - 1) / parts;
    sp->parts = parts;
    for (int r = 0; r <= parts; r++)
        sp->off[r] = (int64_t)r * per < n ? (int64_t)r * per : n;
}

void vdn_split_heads(vdn_split *sp, int64_t n, int parts) {
    VDN_ASSERT(parts >= 1 && parts <= VDN_COMM_MAX_RANKS);
    sp->parts = parts;
    sp->off[0] = 0;
    for (int r = 0; r < parts; r++)
        sp->off[r + 1] = sp->off[r] + n / parts + (r < n % parts ? 1 : 0);
}

/* ---- front end ---- */

static int check_split(vdn_comm *c, const char *op, const char *what, const vdn_split *sp) {
    if (!sp || sp->parts != c->size)
        return vdn_dev_fail(c->dev, "op %s: the %s split has %d parts, the communicator %d ranks",
                            op, what, sp ? sp->parts : 0, c->size);
    return 0;
}

static int check_2d(vdn_comm *c, const char *op, const char *name, const vdn_tensor *t,
                    int64_t rows, int64_t cols) {
    if (!t || t->dev != c->dev)
        return vdn_dev_fail(c->dev, "op %s: %s is missing or lives on another device", op, name);
    if (vdn_tensor_rows(t) != rows || vdn_tensor_cols(t) != cols) {
        char b[96];
        return vdn_dev_fail(c->dev, "op %s: %s is %s, expected [%lld, %lld] on rank %d", op, name,
                            vdn_tensor_desc(t, b, sizeof b), (long long)rows, (long long)cols,
                            c->rank);
    }
    return 0;
}

static int same_dtype(vdn_comm *c, const char *op, const vdn_tensor *a, const vdn_tensor *b) {
    if (a->dtype != b->dtype)
        return vdn_dev_fail(c->dev, "op %s: in is %s, out %s (a collective does not convert)", op,
                            vdn_dtype_name(b->dtype), vdn_dtype_name(a->dtype));
    return 0;
}

/* Profiling (comm.h): the device's queued work ends before the clock starts; the barrier's time
 * is the wait for the slowest peer; the collective's runs until its data is on this device. A
 * failed barrier fails this rank's collective, which still runs its own barriers (passed NULL). */
static int prof_enter(vdn_comm *c, double *t_start) {
    c->calls++;
    if (!c->profile) return 0;
    vdn_dev_sync(c->dev); /* a device failure shows again in the barrier's own sync */
    const double t0 = vdn_now();
    int rc = c->impl->barrier(c);
    *t_start = vdn_now();
    c->wait_s += *t_start - t0;
    return rc;
}

static int prof_leave(vdn_comm *c, int rc, double t_start) {
    if (!c->profile) return rc;
    if (rc == 0) rc = vdn_dev_sync(c->dev);
    c->collective_s += vdn_now() - t_start;
    return rc;
}

/* one part of a rows-to-columns exchange, checked on this rank */
static int check_part(vdn_comm *c, const char *op, const vdn_comm_part *p, const vdn_split *rows) {
    if (p->cols && check_split(c, op, "column", p->cols)) return -1;
    const int64_t C = p->cols ? p->cols->off[c->size] : p->in ? vdn_tensor_cols(p->in) : 0;
    const int64_t nc = p->cols ? vdn_split_len(p->cols, c->rank) : C;
    return check_2d(c, op, "in", p->in, vdn_split_len(rows, c->rank), C) ||
           check_2d(c, op, "out", p->out, rows->off[c->size], nc) ||
           same_dtype(c, op, p->out, p->in);
}

/* The shape checks fail this rank; the implementation still runs its barriers with the failure,
 * so every rank of the collective fails together instead of waiting. */
static int parts_op(vdn_comm *c, const char *op, const vdn_comm_part *parts, int n,
                    const vdn_split *rows) {
    double t = 0;
    int bad = prof_enter(c, &t) || check_split(c, op, "row", rows);
    if (!bad && (n < 1 || n > VDN_COMM_MAX_PARTS))
        bad = vdn_dev_fail(c->dev, "op %s: %d parts, expected 1..%d", op, n, VDN_COMM_MAX_PARTS);
    for (int i = 0; i < n && !bad; i++)
        bad = check_part(c, op, &parts[i], rows);
    return prof_leave(c, c->impl->rows_to_cols_parts(c, bad ? NULL : parts, n, rows), t);
}

int vdn_op_rows_to_cols(vdn_comm *c, vdn_tensor *out, const vdn_tensor *in, const vdn_split *rows,
                        const vdn_split *cols) {
    static const vdn_split none = {0}; /* no split: fails the checks, still collectively */
    const vdn_comm_part p = {out, in, cols ? cols : &none};
    return parts_op(c, "rows_to_cols", &p, 1, rows);
}

int vdn_op_rows_to_cols_parts(vdn_comm *c, const vdn_comm_part *parts, int n,
                              const vdn_split *rows) {
    return parts_op(c, "rows_to_cols_parts", parts, n, rows);
}

int vdn_op_cols_to_rows(vdn_comm *c, vdn_tensor *out, const vdn_tensor *in, const vdn_split *rows,
                        const vdn_split *cols) {
    const char *op = "cols_to_rows";
    double t = 0;
    int bad =
        prof_enter(c, &t) || check_split(c, op, "row", rows) || check_split(c, op, "column", cols);
    if (!bad) {
        const int64_t S = rows->off[c->size], C = cols->off[c->size];
        bad = check_2d(c, op, "in", in, S, vdn_split_len(cols, c->rank)) ||
              check_2d(c, op, "out", out, vdn_split_len(rows, c->rank), C) ||
              same_dtype(c, op, out, in);
    }
    return prof_leave(c, c->impl->cols_to_rows(c, bad ? NULL : out, in, rows, cols), t);
}

int vdn_op_all_gather_rows(vdn_comm *c, vdn_tensor *out, const vdn_tensor *in,
                           const vdn_split *rows) {
    const vdn_comm_part p = {out, in, NULL};
    return parts_op(c, "all_gather_rows", &p, 1, rows);
}

int vdn_op_all_reduce_sum(vdn_comm *c, vdn_tensor *x) {
    double t = 0;
    int bad = prof_enter(c, &t);
    if (!bad && (!x || x->dev != c->dev))
        bad = vdn_dev_fail(c->dev, "op all_reduce_sum: x is missing or lives on another device");
    return prof_leave(c, c->impl->all_reduce_sum(c, bad ? NULL : x), t);
}

int vdn_comm_abort(vdn_comm *c) {
    if (!c->failed) c->impl->abort(c);
    c->failed = 1;
    return -1;
}

void vdn_comm_free(vdn_comm *c) {
    if (c) c->impl->free(c);
}

/* ---- in-process: P threads, one shared table of published tensors ---- */

struct vdn_comm_group {
    int size;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int arrived, generation, all_ok, last_ok;
    int aborted;      /* a rank called vdn_comm_abort: every barrier fails from now on */
    vdn_tensor *slot; /* [size][VDN_COMM_MAX_PARTS] what each rank published for the current
                       * collective */
};

vdn_comm_group *vdn_comm_group_new(int size, char *err, size_t errlen) {
    if (size < 1 || size > VDN_COMM_MAX_RANKS) {
        snprintf(err, errlen, "comm: %d ranks, expected 1..%d", size, VDN_COMM_MAX_RANKS);
        return NULL;
    }
    vdn_comm_group *g = vdn_xcalloc(1, sizeof *g);
    g->size = size;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->all_ok = 1;
    g->slot = vdn_xcalloc((size_t)size * VDN_COMM_MAX_PARTS, sizeof *g->slot);
    return g;
}

void vdn_comm_group_free(vdn_comm_group *g) {
    if (!g) return;
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g->slot);
    free(g);
}

/* Wait for every rank; returns 1 when every rank arrived with ok = 1. Once the group is aborted
 * it returns 0 at once (and wakes the waiting ranks), so no count of barriers has to match the
 * aborting rank's: a rank may abort between any two collectives, profiled or not. */
static int group_barrier(vdn_comm_group *g, int ok) {
    pthread_mutex_lock(&g->mu);
    int all = 0;
    if (!g->aborted) {
        const int gen = g->generation;
        g->all_ok &= ok;
        if (++g->arrived == g->size) {
            g->last_ok = g->all_ok;
            g->all_ok = 1, g->arrived = 0, g->generation++;
            pthread_cond_broadcast(&g->cv);
        } else {
            while (gen == g->generation && !g->aborted)
                pthread_cond_wait(&g->cv, &g->mu);
        }
        all = gen != g->generation && g->last_ok;
    }
    pthread_mutex_unlock(&g->mu);
    return all;
}

/* tensor i that rank r published */
static vdn_tensor *slot(vdn_comm_group *g, int r, int i) {
    return &g->slot[r * VDN_COMM_MAX_PARTS + i];
}

/* Publish n tensors (t NULL: this rank failed), wait for all; 0 when every rank is ready to be
 * read. */
static int publish(vdn_comm *c, const vdn_tensor *t, int n) {
    vdn_comm_group *g = c->state;
    int ok = t != NULL && vdn_dev_sync(c->dev) == 0;
    for (int i = 0; i < n && ok; i++)
        *slot(g, c->rank, i) = t[i];
    if (!group_barrier(g, ok)) {
        c->failed = 1;
        return t && ok ? vdn_dev_fail(c->dev, "comm: another rank failed this collective") : -1;
    }
    return 0;
}

/* Every rank done reading the published tensors (and its own copies complete). */
static int finish(vdn_comm *c, int ok) {
    ok = ok && vdn_dev_sync(c->dev) == 0;
    if (!group_barrier(c->state, ok)) {
        c->failed = 1;
        return ok ? vdn_dev_fail(c->dev, "comm: another rank failed this collective") : -1;
    }
    return 0;
}

/* dst <- src where src belongs to a peer: the in-process group shares one address space (host, or
 * one GPU), so the copy runs on this rank's device with src seen as its own. */
static int pull(vdn_comm *c, vdn_tensor *dst, vdn_tensor src, int from) {
    if (vdn_tensor_rows(dst) == 0 || vdn_tensor_cols(dst) == 0) return 0;
    src.dev = c->dev;
    if (from != c->rank) c->bytes += (uint64_t)vdn_tensor_numel(dst) * vdn_dtype_size(dst->dtype);
    return vdn_tensor_copy(dst, &src);
}

/* a view of rows [r0, r0+n), tolerating n == 0 (pull skips it) */
static vdn_tensor rows_of(const vdn_tensor *t, int64_t r0, int64_t n) {
    if (n == 0 || vdn_tensor_cols(t) == 0) {
        vdn_tensor e = *t;
        e.ne[0] = n, e.ndim = 2, e.ne[1] = vdn_tensor_cols(t);
        return e;
    }
    return vdn_view_rows(t, r0, n);
}
static vdn_tensor cols_of(const vdn_tensor *t, int64_t c0, int64_t n) {
    if (n == 0 || vdn_tensor_rows(t) == 0) {
        vdn_tensor e = *t;
        e.ndim = 2, e.ne[0] = vdn_tensor_rows(t), e.ne[1] = n;
        return e;
    }
    return vdn_view_cols(t, c0, n);
}

static int ip_rows_to_cols_parts(vdn_comm *c, const vdn_comm_part *parts, int n,
                                 const vdn_split *rows) {
    vdn_tensor in[VDN_COMM_MAX_PARTS];
    for (int i = 0; parts && i < n; i++)
        in[i] = *parts[i].in;
    if (publish(c, parts ? in : NULL, n) != 0) return finish(c, 0), -1;
    vdn_comm_group *g = c->state;
    const int me = c->rank;
    int ok = 1;
    for (int q = 0; q < c->size && ok; q++)
        for (int i = 0; i < n && ok; i++) {
            const vdn_split *cols = parts[i].cols;
            vdn_tensor dst = rows_of(parts[i].out, rows->off[q], vdn_split_len(rows, q));
            vdn_tensor src = cols ? cols_of(slot(g, q, i), cols->off[me], vdn_split_len(cols, me))
                                  : *slot(g, q, i);
            ok = pull(c, &dst, src, q) == 0;
        }
    return finish(c, ok);
}

static int ip_cols_to_rows(vdn_comm *c, vdn_tensor *out, const vdn_tensor *in,
                           const vdn_split *rows, const vdn_split *cols) {
    if (publish(c, out ? in : NULL, 1) != 0) return finish(c, 0), -1;
    vdn_comm_group *g = c->state;
    const int me = c->rank;
    int ok = 1;
    for (int q = 0; q < c->size && ok; q++) {
        vdn_tensor dst = cols_of(out, cols->off[q], vdn_split_len(cols, q));
        vdn_tensor src = rows_of(slot(g, q, 0), rows->off[me], vdn_split_len(rows, me));
        ok = pull(c, &dst, src, q) == 0;
    }
    return finish(c, ok);
}

/* Every rank sums the published tensors in rank order, so every rank holds the same bits. */
static int ip_all_reduce_sum(vdn_comm *c, vdn_tensor *x) {
    vdn_tensor *acc = x ? vdn_tensor_new(c->dev, x->dtype, x->ndim, x->ne) : NULL;
    if (publish(c, acc ? x : NULL, 1) != 0) {
        vdn_tensor_free(acc);
        return finish(c, 0), -1;
    }
    vdn_comm_group *g = c->state;
    int ok = pull(c, acc, *slot(g, 0, 0), 0) == 0;
    for (int q = 1; q < c->size && ok; q++) {
        vdn_tensor src = *slot(g, q, 0);
        src.dev = c->dev;
        if (q != c->rank) c->bytes += (uint64_t)vdn_tensor_numel(x) * vdn_dtype_size(x->dtype);
        ok = vdn_op_add(acc, &src) == 0;
    }
    int rc = finish(c, ok); /* nobody reads x any more */
    if (rc == 0) rc = vdn_tensor_copy(x, acc);
    vdn_tensor_free(acc);
    return rc;
}

static int ip_barrier(vdn_comm *c) {
    return finish(c, 1);
}

static int ip_abort(vdn_comm *c) {
    vdn_comm_group *g = c->state;
    pthread_mutex_lock(&g->mu);
    g->aborted = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    return -1;
}

static void ip_free(vdn_comm *c) {
    free(c);
}

static const vdn_comm_impl inproc_impl = {.name = "inproc",
                                          .rows_to_cols_parts = ip_rows_to_cols_parts,
                                          .cols_to_rows = ip_cols_to_rows,
                                          .all_reduce_sum = ip_all_reduce_sum,
                                          .barrier = ip_barrier,
                                          .abort = ip_abort,
                                          .free = ip_free};

vdn_comm *vdn_comm_inproc(vdn_comm_group *g, int rank, vdn_dev *dev) {
    VDN_ASSERT(g && rank >= 0 && rank < g->size && dev);
    vdn_comm *c = vdn_xcalloc(1, sizeof *c);
    c->impl = &inproc_impl;
    c->rank = rank, c->size = g->size, c->dev = dev, c->state = g;
    return c;
}

typedef struct {
    int rank, rc;
    int (*fn)(int, void *);
    void *arg;
} rank_thread;

static void *rank_main(void *p) {
    rank_thread *t = p;
    t->rc = t->fn(t->rank, t->arg);
    return NULL;
}

int vdn_comm_run_ranks(int size, int (*fn)(int rank, void *arg), void *arg) {
    rank_thread *t = vdn_xcalloc((size_t)size, sizeof *t);
    pthread_t *tid = vdn_xcalloc((size_t)size, sizeof *tid);
    for (int r = 0; r < size; r++) {
        t[r] = (rank_thread){r, 0, fn, arg};
        if (r > 0 && pthread_create(&tid[r], NULL, rank_main, &t[r]) != 0) VDN_ASSERT(0);
    }
    rank_main(&t[0]);
    int failed = t[0].rc != 0;
    for (int r = 1; r < size; r++) {
        pthread_join(tid[r], NULL);
        failed += t[r].rc != 0;
    }
    free(t);
    free(tid);
    return failed;
}

/* ---- the device backend's communicator ---- */

const char *vdn_dev_comm_name(const vdn_dev *d) {
    return d->be->comm_open ? d->be->comm_name : NULL;
}

int vdn_dev_comm_unique_id(const vdn_dev *d, void *id, char *err, size_t errlen) {
    if (!d->be->comm_unique_id)
        return vdn_fail(err, errlen, "backend %s has no communicator in this build", d->be->name);
    return d->be->comm_unique_id(id, err, errlen);
}

vdn_comm *vdn_dev_comm_open(vdn_dev *d, int rank, int size, const void *id, char *err,
                            size_t errlen) {
    if (!d->be->comm_open) {
        vdn_fail(err, errlen, "backend %s has no communicator in this build", d->be->name);
        return NULL;
    }
    return d->be->comm_open(d, rank, size, id, err, errlen);
}
