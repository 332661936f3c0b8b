/* Per-op device times of a stretch of work (op_profile.h says what and why). */
#include "op_profile.h"

#include <stdlib.h>
#include <string.h>

#include "vdn_util.h"

typedef struct {
    int key;
    void *t0, *t1; /* the backend's timers around the op */
} prof_rec;

typedef struct {
    char name[192]; /* "linear [103903x5376 bf16] [16384x5376 f8_e4m3]" */
    double flops, ms;
    int calls;
} prof_key;

struct vdn_prof {
    prof_rec *rec;
    int n_rec, cap_rec;
    prof_key *keys;
    int n_keys, cap_keys;
    int depth;     /* nesting of front-end calls; only the outermost is timed */
    int open_key;  /* the outermost op in flight */
    void *open_t0; /* its start timer */
    int lost;      /* ops not timed (a timer could not be made) */
};

/* p grown to hold n elements of size sz (abort on out of memory, as vdn_xmalloc) */
static void *grow(void *p, int *cap, size_t sz) {
    *cap = *cap ? 2 * *cap : 256;
    void *q = vdn_xmalloc((size_t)*cap * sz);
    if (p) memcpy(q, p, (size_t)(*cap / 2) * sz);
    free(p);
    return q;
}

int vdn_prof_start(vdn_dev *d) {
    const vdn_dev_backend *be = d->be;
    if (!be->timer_new || !be->timer_mark || !be->timer_ms || !be->timer_free)
        return vdn_dev_fail(d, "profile: backend %s has no timers", be->name);
    if (d->prof) return vdn_dev_fail(d, "profile: one is already running on %s", d->name);
    d->prof = vdn_xcalloc(1, sizeof *d->prof);
    return 0;
}

static void shape_of(const vdn_tensor *t, char *s, size_t n) {
    size_t k = (size_t)snprintf(s, n, "[");
    for (int i = 0; i < t->ndim && k < n; i++)
        k += (size_t)snprintf(s + k, n - k, "%s%lld", i ? "x" : "", (long long)t->ne[i]);
    if (k < n) snprintf(s + k, n - k, " %s]", vdn_dtype_name(t->dtype));
}

static int key_index(vdn_prof *p, const char *op, const vdn_tensor *a, const vdn_tensor *b) {
    char name[sizeof p->keys[0].name], sa[80] = "", sb[80] = "";
    if (a) shape_of(a, sa, sizeof sa);
    if (b) shape_of(b, sb, sizeof sb);
    snprintf(name, sizeof name, "%s%s%s%s%s", op, a ? " " : "", sa, b ? " " : "", sb);
    for (int i = p->n_keys - 1; i >= 0; i--)
        if (!strcmp(p->keys[i].name, name)) return i;
    if (p->n_keys == p->cap_keys) p->keys = grow(p->keys, &p->cap_keys, sizeof *p->keys);
    prof_key *k = &p->keys[p->n_keys];
    memset(k, 0, sizeof *k);
    snprintf(k->name, sizeof k->name, "%s", name);
    return p->n_keys++;
}

/* a timer marking "now" in d's work order, or NULL */
static void *mark(vdn_dev *d) {
    void *t = d->be->timer_new(d);
    if (t && d->be->timer_mark(d, t) != 0) {
        d->be->timer_free(d, t);
        t = NULL;
    }
    return t;
}

void vdn_prof_begin(vdn_dev *d, const char *op, const vdn_tensor *a, const vdn_tensor *b,
                    double flops) {
    vdn_prof *p = d->prof;
    if (p->depth++ > 0) return;
    p->open_key = key_index(p, op, a, b);
    p->keys[p->open_key].flops += flops;
    p->open_t0 = mark(d);
}

int vdn_prof_end(vdn_dev *d, int rc) {
    vdn_prof *p = d->prof;
    if (!p || --p->depth > 0) return rc;
    void *t1 = p->open_t0 ? mark(d) : NULL;
    if (!t1) {
        if (p->open_t0) d->be->timer_free(d, p->open_t0);
        p->lost++;
        return rc;
    }
    if (p->n_rec == p->cap_rec) p->rec = grow(p->rec, &p->cap_rec, sizeof *p->rec);
    p->rec[p->n_rec++] = (prof_rec){p->open_key, p->open_t0, t1};
    return rc;
}

static int by_ms(const void *a, const void *b) {
    double x = ((const prof_key *)a)->ms, y = ((const prof_key *)b)->ms;
    return (x < y) - (x > y);
}

/* the keys summed by op name (the key up to its first space) */
static int by_op(const prof_key *keys, int n, prof_key *ops) {
    int n_ops = 0;
    for (int i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)strcspn(keys[i].name, " "), keys[i].name);
        int j = 0;
        while (j < n_ops && strcmp(ops[j].name, name))
            j++;
        if (j == n_ops) {
            memset(&ops[n_ops], 0, sizeof ops[0]);
            snprintf(ops[n_ops++].name, sizeof ops[0].name, "%s", name);
        }
        ops[j].ms += keys[i].ms, ops[j].calls += keys[i].calls, ops[j].flops += keys[i].flops;
    }
    qsort(ops, (size_t)n_ops, sizeof *ops, by_ms);
    return n_ops;
}

static void print_row(FILE *f, const prof_key *k, double span_ms, int per_call) {
    fprintf(f, "  %10.2f %6.2f%% %7d", k->ms, 100 * k->ms / span_ms, k->calls);
    if (per_call) fprintf(f, " %10.3f", k->ms / k->calls);
    if (k->flops > 0 && k->ms > 0)
        fprintf(f, " %8.4g", k->flops / (k->ms * 1e-3) / 1e12);
    else
        fprintf(f, " %8s", "-");
    fprintf(f, "  %s\n", k->name);
}

#define N_GAPS 3
typedef struct {
    double ms;
    int before, after;                          /* keys of the ops either side (-1: none) */
    char names[2][sizeof((prof_key *)0)->name]; /* theirs, kept while the keys get sorted */
} prof_gap;

/* the N_GAPS longest waits between one op's end and the next one's start, longest first */
static void longest_gaps(vdn_dev *d, const vdn_prof *p, prof_gap *g) {
    for (int j = 0; j < N_GAPS; j++)
        g[j].ms = 0, g[j].before = g[j].after = -1;
    for (int i = 1; i < p->n_rec; i++) {
        double ms = d->be->timer_ms(d, p->rec[i - 1].t1, p->rec[i].t0);
        int j = N_GAPS;
        while (j > 0 && ms > g[j - 1].ms)
            j--;
        if (j == N_GAPS) continue;
        memmove(&g[j + 1], &g[j], (size_t)(N_GAPS - 1 - j) * sizeof *g);
        g[j].ms = ms, g[j].before = p->rec[i - 1].key, g[j].after = p->rec[i].key;
    }
    for (int j = 0; j < N_GAPS && g[j].before >= 0; j++) {
        snprintf(g[j].names[0], sizeof g[j].names[0], "%s", p->keys[g[j].before].name);
        snprintf(g[j].names[1], sizeof g[j].names[1], "%s", p->keys[g[j].after].name);
    }
}

static void print_gaps(FILE *f, const prof_gap *g) {
    if (g[0].before < 0) return;
    fprintf(f, "  longest waits between ops:\n");
    for (int j = 0; j < N_GAPS && g[j].before >= 0; j++)
        fprintf(f, "  %10.2f ms after %s, before %s\n", g[j].ms, g[j].names[0], g[j].names[1]);
}

static void print_table(FILE *f, const char *title, prof_key *keys, int n_keys, double span_ms,
                        int n_ops, int lost) {
    double in_ops = 0;
    for (int i = 0; i < n_keys; i++)
        in_ops += keys[i].ms;
    fprintf(f, "profile: %s\n  span %.2f ms: %d ops take %.2f ms (%.1f%%), between ops %.2f ms",
            title ? title : "", span_ms, n_ops, in_ops, 100 * in_ops / span_ms, span_ms - in_ops);
    if (lost) fprintf(f, " (%d ops not timed: no timer)", lost);
    fprintf(f, "\n  by op:\n  %10s %7s %7s %8s  %s\n", "ms", "share", "calls", "TFLOP/s", "op");
    prof_key *ops = vdn_xcalloc((size_t)n_keys, sizeof *ops);
    int n = by_op(keys, n_keys, ops);
    for (int i = 0; i < n; i++)
        print_row(f, &ops[i], span_ms, 0);
    free(ops);
    qsort(keys, (size_t)n_keys, sizeof *keys, by_ms);
    fprintf(f,
            "  by op and operands (those over 0.1%% of the span):\n  %10s %7s %7s %10s %8s  %s\n",
            "ms", "share", "calls", "ms/call", "TFLOP/s", "op [operand a] [operand b]");
    for (int i = 0; i < n_keys && keys[i].ms >= 1e-3 * span_ms; i++)
        print_row(f, &keys[i], span_ms, 1);
}

double vdn_prof_stop(vdn_dev *d, FILE *out, const char *title) {
    vdn_prof *p = d->prof;
    if (!p) return vdn_dev_fail(d, "profile: none is running on %s", d->name);
    double span = -1;
    if (vdn_dev_sync(d) == 0) {
        for (int i = 0; i < p->n_rec; i++) {
            prof_key *k = &p->keys[p->rec[i].key];
            k->ms += d->be->timer_ms(d, p->rec[i].t0, p->rec[i].t1);
            k->calls++;
        }
        span = p->n_rec ? d->be->timer_ms(d, p->rec[0].t0, p->rec[p->n_rec - 1].t1) : 0;
        if (out && span > 0) {
            prof_gap g[N_GAPS];
            longest_gaps(d, p, g); /* before the table sorts the keys */
            print_table(out, title, p->keys, p->n_keys, span, p->n_rec, p->lost);
            print_gaps(out, g);
        }
        span *= 1e-3;
    }
    for (int i = 0; i < p->n_rec; i++) {
        d->be->timer_free(d, p->rec[i].t0);
        d->be->timer_free(d, p->rec[i].t1);
    }
    free(p->rec);
    free(p->keys);
    free(p);
    d->prof = NULL;
    return span;
}
