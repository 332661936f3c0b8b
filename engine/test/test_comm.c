/* The in-process communicator on the CPU backend (comm.h): splits, both all-to-alls, the
 * all-gather and the all-reduce for P = 1..8 ranks against direct indexing of the full matrix,
 * uneven splits (ranks with no rows or no columns), and a failing rank failing the collective on
 * every rank instead of hanging. Profiling: the same results with every collective profiled, its
 * wait measuring a late rank; an abort fails every later collective of every rank whatever the
 * barrier counts (profiled or not). */
#include <string.h>
#include <time.h>

#include "check.h"
#include "comm.h"

enum { S = 23, C = 10 };

static void test_splits(void) {
    vdn_split sp;
    vdn_split_heads(&sp, 56, 6);
    const int64_t want[7] = {0, 10, 20, 29, 38, 47, 56};
    for (int r = 0; r <= 6; r++)
        CHECK(sp.off[r] == want[r], "56 heads over 6: off[%d] = %lld", r, (long long)sp.off[r]);
    vdn_split_rows(&sp, 10, 4); /* ceil = 3: 3, 3, 3, 1 */
    CHECK(sp.off[1] == 3 && sp.off[3] == 9 && sp.off[4] == 10, "10 rows over 4");
    vdn_split_rows(&sp, 10, 8); /* ceil = 2: 2 2 2 2 2 0 0 0 */
    CHECK(sp.off[5] == 10 && sp.off[8] == 10 && vdn_split_len(&sp, 6) == 0, "10 rows over 8");
}

typedef struct {
    int P;
    vdn_comm_group *g;
    float full[S * C]; /* the global matrix: value r * C + c, a distinct value per element */
    int bad_rank;      /* this rank passes a wrongly shaped tensor (-1: none) */
    int failures[8];
    int profile;   /* profile every collective */
    int late_rank; /* this rank sleeps LATE_MS before its first collective (-1: none) */
    double wait_s[8], collective_s[8];
    int64_t calls[8];
} job;

enum { LATE_MS = 60 };

static int rank_fn(int rank, void *arg) {
    job *j = arg;
    char err[256];
    vdn_dev *d = vdn_dev_open("cpu", 0, 1, err, sizeof err);
    if (!d) return -1;
    vdn_comm *c = vdn_comm_inproc(j->g, rank, d);
    c->profile = j->profile;
    if (rank == j->late_rank) nanosleep(&(struct timespec){0, LATE_MS * 1000000L}, NULL);
    vdn_split rows, cols;
    vdn_split_rows(&rows, S, j->P);
    vdn_split_heads(&cols, C, j->P);
    const int64_t nr = vdn_split_len(&rows, rank), nc = vdn_split_len(&cols, rank);
    const int64_t r0 = rows.off[rank], c0 = cols.off[rank];
    /* tensors of at least one row/column; views give the exact (possibly empty) shapes */
    vdn_tensor *mine = vdn_tensor_new2(d, VDN_DT_F32, nr ? nr : 1, C);
    vdn_tensor *heads = vdn_tensor_new2(d, VDN_DT_F32, S, nc ? nc : 1);
    vdn_tensor *back = vdn_tensor_new2(d, VDN_DT_F32, nr ? nr : 1, C);
    vdn_tensor *all = vdn_tensor_new2(d, VDN_DT_F32, S, C);
    vdn_tensor *sum = vdn_tensor_new2(d, VDN_DT_F32, 2, 3);
    vdn_tensor m = *mine, h = *heads, bk = *back;
    m.ne[0] = nr, bk.ne[0] = nr, h.ne[1] = nc;
    if (nr) vdn_tensor_set(&m, j->full + r0 * C, VDN_DT_F32);
    int fails = 0;
    if (j->bad_rank == rank) {
        vdn_tensor wrong = vdn_view_cols(all, 0, C - 1);
        fails += vdn_op_rows_to_cols(c, &h, &wrong, &rows, &cols) != 0;
        fails += vdn_op_all_gather_rows(c, all, &wrong, &rows) != 0;
    } else {
        fails += vdn_op_rows_to_cols(c, &h, &m, &rows, &cols) != 0;
        if (j->bad_rank < 0) {
            float *hv = malloc(sizeof(float) * S * (nc ? nc : 1));
            if (nc) vdn_tensor_get(&h, hv);
            for (int r = 0; r < S && nc; r++)
                for (int k = 0; k < nc; k++)
                    CHECK(hv[r * nc + k] == j->full[r * C + c0 + k], "P=%d rank %d head-sharded",
                          j->P, rank);
            free(hv);
            fails += vdn_op_cols_to_rows(c, &bk, &h, &rows, &cols) != 0;
            float bv[S * C];
            if (nr) vdn_tensor_get(&bk, bv);
            for (int64_t i = 0; i < nr * C; i++)
                CHECK(bv[i] == j->full[r0 * C + i], "P=%d rank %d back to rows", j->P, rank);
        }
        fails += vdn_op_all_gather_rows(c, all, &m, &rows) != 0;
        if (j->bad_rank < 0) {
            float av[S * C];
            vdn_tensor_get(all, av);
            CHECK(memcmp(av, j->full, sizeof av) == 0, "P=%d rank %d all-gather", j->P, rank);
            /* both in one exchange: the same results, and the bytes of both from the peers */
            vdn_tensor_fill(&h, -1), vdn_tensor_fill(all, -1);
            const uint64_t before = c->bytes;
            const vdn_comm_part parts[2] = {{&h, &m, &cols}, {all, &m, NULL}};
            fails += vdn_op_rows_to_cols_parts(c, parts, 2, &rows) != 0;
            const uint64_t want = (uint64_t)(S - nr) * (uint64_t)(nc + C) * sizeof(float);
            CHECK(c->bytes - before == want, "P=%d rank %d parts: %llu bytes, expected %llu", j->P,
                  rank, (unsigned long long)(c->bytes - before), (unsigned long long)want);
            float *hv = malloc(sizeof(float) * S * (nc ? nc : 1));
            if (nc) vdn_tensor_get(&h, hv);
            for (int r = 0; r < S && nc; r++)
                for (int k = 0; k < nc; k++)
                    CHECK(hv[r * nc + k] == j->full[r * C + c0 + k], "P=%d rank %d parts heads",
                          j->P, rank);
            free(hv);
            vdn_tensor_get(all, av);
            CHECK(memcmp(av, j->full, sizeof av) == 0, "P=%d rank %d parts gathered", j->P, rank);
        }
    }
    const float part[6] = {(float)rank, 1, 2, 3, 4, (float)(rank * rank)};
    vdn_tensor_set(sum, part, VDN_DT_F32);
    if (j->bad_rank < 0) {
        fails += vdn_op_all_reduce_sum(c, sum) != 0;
        float sv[6];
        vdn_tensor_get(sum, sv);
        const int P = j->P;
        CHECK(sv[0] == P * (P - 1) / 2 && sv[1] == P && sv[5] == (P - 1) * P * (2 * P - 1) / 6,
              "P=%d rank %d all-reduce", P, rank);
    }
    j->failures[rank] = fails;
    j->wait_s[rank] = c->wait_s, j->collective_s[rank] = c->collective_s;
    j->calls[rank] = c->calls;
    vdn_tensor *ts[] = {mine, heads, back, all, sum};
    for (int i = 0; i < 5; i++)
        vdn_tensor_free(ts[i]);
    vdn_comm_free(c);
    vdn_dev_close(d);
    return 0;
}

/* Rank `aborter` aborts after `after` collectives while the others make 4; profiled or not, every
 * rank's collectives from then on fail and none waits (the test would hang). */
typedef struct {
    vdn_comm_group *g;
    int aborter, after, profile;
    int ok[8]; /* collectives that succeeded per rank */
} abort_job;

static int abort_fn(int rank, void *arg) {
    abort_job *j = arg;
    char err[256];
    vdn_dev *d = vdn_dev_open("cpu", 0, 1, err, sizeof err);
    if (!d) return -1;
    vdn_comm *c = vdn_comm_inproc(j->g, rank, d);
    c->profile = j->profile;
    vdn_tensor *x = vdn_tensor_new2(d, VDN_DT_F32, 2, 2);
    const float ones[4] = {1, 1, 1, 1};
    vdn_tensor_set(x, ones, VDN_DT_F32);
    j->ok[rank] = 0;
    for (int i = 0; i < 4; i++) {
        if (rank == j->aborter && i == j->after) {
            vdn_comm_abort(c);
            break;
        }
        j->ok[rank] += vdn_op_all_reduce_sum(c, x) == 0;
    }
    vdn_tensor_free(x);
    vdn_comm_free(c);
    vdn_dev_close(d);
    return 0;
}

static void test_profile_and_abort(void) {
    char err[256];
    for (int late = -1; late <= 2; late += 3) { /* no late rank, then rank 2 late */
        job j = {.P = 3, .bad_rank = -1, .profile = 1, .late_rank = late};
        j.g = vdn_comm_group_new(3, err, sizeof err);
        for (int i = 0; i < S * C; i++)
            j.full[i] = (float)i;
        CHECK(vdn_comm_run_ranks(3, rank_fn, &j) == 0, "profiled ranks ran");
        for (int r = 0; r < 3; r++) {
            CHECK(j.failures[r] == 0 && j.calls[r] == 5, "profiled rank %d: %d failed, %lld calls",
                  r, j.failures[r], (long long)j.calls[r]);
            CHECK(j.wait_s[r] >= 0 && j.collective_s[r] >= 0, "profiled rank %d: negative times",
                  r);
        }
        if (late == 2) /* ranks 0 and 1 waited for rank 2 in the first barrier; rank 2 did not */
            for (int r = 0; r < 2; r++)
                CHECK(j.wait_s[r] >= 0.8 * LATE_MS / 1e3 && j.wait_s[2] < j.wait_s[r],
                      "rank %d waited %.3f s for a rank %d ms late (the late one %.3f s)", r,
                      j.wait_s[r], LATE_MS, j.wait_s[2]);
        vdn_comm_group_free(j.g);
    }
    { /* unprofiled: no times, calls still counted */
        job j = {.P = 2, .bad_rank = -1, .late_rank = -1};
        j.g = vdn_comm_group_new(2, err, sizeof err);
        CHECK(vdn_comm_run_ranks(2, rank_fn, &j) == 0, "unprofiled ranks ran");
        CHECK(j.calls[1] == 5 && j.wait_s[1] == 0 && j.collective_s[1] == 0,
              "unprofiled: %lld calls, wait %g, collective %g", (long long)j.calls[1], j.wait_s[1],
              j.collective_s[1]);
        vdn_comm_group_free(j.g);
    }
    for (int profile = 0; profile <= 1; profile++)
        for (int after = 0; after <= 2; after++) {
            abort_job a = {.aborter = 1, .after = after, .profile = profile};
            a.g = vdn_comm_group_new(4, err, sizeof err);
            CHECK(vdn_comm_run_ranks(4, abort_fn, &a) == 0, "abort run");
            for (int r = 0; r < 4; r++)
                CHECK(a.ok[r] == after, "profile %d, rank 1 aborts after %d: rank %d had %d ok",
                      profile, after, r, a.ok[r]);
            vdn_comm_group_free(a.g);
        }
}

int main(void) {
    test_splits();
    test_profile_and_abort();
    char err[256];
    for (int P = 1; P <= 8; P++) {
        job j = {.P = P, .bad_rank = -1, .late_rank = -1};
        j.g = vdn_comm_group_new(P, err, sizeof err);
        for (int i = 0; i < S * C; i++)
            j.full[i] = (float)i;
        CHECK(vdn_comm_run_ranks(P, rank_fn, &j) == 0, "P=%d ranks ran", P);
        for (int r = 0; r < P; r++)
            CHECK(j.failures[r] == 0, "P=%d rank %d: %d collectives failed", P, r, j.failures[r]);
        if (P >= 2) { /* rank 1 passes a bad shape: both collectives fail on every rank */
            j.bad_rank = 1;
            CHECK(vdn_comm_run_ranks(P, rank_fn, &j) == 0, "P=%d bad rank run", P);
            for (int r = 0; r < P; r++)
                CHECK(j.failures[r] == 2, "P=%d rank %d: %d of 2 collectives failed", P, r,
                      j.failures[r]);
        }
        vdn_comm_group_free(j.g);
    }
    CHECK(vdn_comm_group_new(0, err, sizeof err) == NULL && strstr(err, "0 ranks"), "0 ranks");
    return test_done("test_comm");
}
