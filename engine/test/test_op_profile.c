/* The op profile (op_profile.h) on the CPU backend: it counts every op the backend ran, once,
 * under its key (a call the front end refused is not counted), with the products' arithmetic;
 * the times add up (the ops fit in the span; the larger product takes longer); a second start,
 * a stop without a start and a backend without timers are refused; ops after the stop are not
 * recorded. The table is read back from its text. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "op.h"
#include "op_backend.h"
#include "op_profile.h"
#include "vdn_util.h"

/* the row of `key` in table text: its ms, calls and TFLOP/s ("-" gives -1); 0 when absent.
 * A row is "ms share% calls [ms/call] TFLOP/s  key". */
static int row(const char *text, const char *key, double *ms, int *calls, double *tflops) {
    char want[256];
    snprintf(want, sizeof want, "  %s\n", key);
    const char *p = strstr(text, want);
    if (!p) return 0;
    const char *line = p;
    while (line > text && line[-1] != '\n')
        line--;
    char cols[256];
    snprintf(cols, sizeof cols, "%.*s", (int)(p - line), line);
    char *tok[8], *save = NULL;
    int n = 0;
    for (char *t = strtok_r(cols, " ", &save); t && n < 8; t = strtok_r(NULL, " ", &save))
        tok[n++] = t;
    if (n < 4) return 0;
    *ms = atof(tok[0]);
    *calls = atoi(tok[2]);
    *tflops = strcmp(tok[n - 1], "-") ? atof(tok[n - 1]) : -1;
    return 1;
}

static vdn_tensor *filled(vdn_dev *d, int rows, int cols, double v) {
    vdn_tensor *t = vdn_tensor_new2(d, VDN_DT_F32, rows, cols);
    VDN_ASSERT(t && vdn_tensor_fill(t, v) == 0);
    return t;
}

static void test_counts_and_keys(vdn_dev *d) {
    vdn_tensor *x = filled(d, 64, 96, 0.5), *w = filled(d, 48, 96, 0.25);
    vdn_tensor *y = filled(d, 64, 48, 0), *big_x = filled(d, 512, 512, 0.1);
    vdn_tensor *big_w = filled(d, 512, 512, 0.1), *big_y = filled(d, 512, 512, 0);
    vdn_tensor *bad = filled(d, 64, 47, 0);
    CHECK(vdn_prof_start(d) == 0, "%s", vdn_dev_error(d));
    CHECK(vdn_prof_start(d) != 0 && strstr(vdn_dev_error(d), "already running"),
          "a second start: %s", vdn_dev_error(d));
    for (int i = 0; i < 3; i++)
        CHECK(vdn_op_linear(y, x, w, NULL, VDN_ACT_NONE, 0) == 0);
    CHECK(vdn_op_linear(big_y, big_x, big_w, NULL, VDN_ACT_NONE, 0) == 0);
    CHECK(vdn_op_add(y, y) == 0 && vdn_op_add(y, y) == 0);
    /* refused by the front end: the backend never runs, nothing is timed */
    CHECK(vdn_op_linear(bad, x, w, NULL, VDN_ACT_NONE, 0) != 0);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    double span = vdn_prof_stop(d, f, "unit");
    fclose(f);
    printf("%s", text);
    CHECK(span > 0, "span %g s", span);
    CHECK(strstr(text, "profile: unit") && strstr(text, ": 6 ops take"), "header:\n%s", text);
    CHECK(strstr(text, "longest waits between ops:\n") && strstr(text, " ms after linear ["),
          "the waits between ops:\n%s", text);
    double ms, tf, ms_big, tf_big, ms_add, tf_add;
    int calls = 0, calls_big = 0, calls_add = 0;
    CHECK(row(text, "linear [64x96 F32] [48x96 F32]", &ms, &calls, &tf), "small linear row");
    CHECK(row(text, "linear [512x512 F32] [512x512 F32]", &ms_big, &calls_big, &tf_big),
          "big linear row");
    CHECK(row(text, "add", &ms_add, &calls_add, &tf_add), "add row");
    CHECK(calls == 3 && calls_big == 1 && calls_add == 2, "calls %d %d %d", calls, calls_big,
          calls_add);
    /* the rate is the products' arithmetic over their time: 2 m n k / t */
    CHECK(tf_big > 0 && tf_add < 0, "TFLOP/s %g (linear) %g (add, none)", tf_big, tf_add);
    CHECK(fabs(tf_big - 2.0 * 512 * 512 * 512 / (ms_big * 1e-3) / 1e12) <= 0.05 * tf_big + 1e-3,
          "big linear: %g TFLOP/s for %g ms", tf_big, ms_big);
    /* 512^3 multiply-adds take longer than 64 x 96 x 48 ones, three times over */
    CHECK(ms_big > ms, "big %g ms, small %g ms (3 calls)", ms_big, ms);
    CHECK(ms + ms_big + ms_add <= span * 1e3 * 1.001, "ops %g ms in a %g ms span",
          ms + ms_big + ms_add, span * 1e3);
    free(text);
    /* after the stop: nothing recorded, and a stop without a start is refused */
    CHECK(d->prof == NULL && vdn_op_add(y, y) == 0 && d->prof == NULL);
    CHECK(vdn_prof_stop(d, NULL, NULL) < 0 && strstr(vdn_dev_error(d), "none is running"));
    vdn_tensor *all[] = {x, w, y, big_x, big_w, big_y, bad};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        vdn_tensor_free(all[i]);
}

/* a backend without timers (a copy of the CPU's table with them removed) refuses a profile */
static void test_no_timers(void) {
    static vdn_dev_backend bare;
    bare = vdn_cpu_dev_backend;
    bare.name = "cpu_no_timers";
    bare.timer_new = NULL;
    CHECK(vdn_dev_backend_register(&bare) == 0);
    char err[256];
    vdn_dev *d = vdn_dev_open("cpu_no_timers", 0, 1, err, sizeof err);
    CHECK(d, "%s", err);
    if (!d) return;
    CHECK(vdn_prof_start(d) != 0 && strstr(vdn_dev_error(d), "has no timers"), "%s",
          vdn_dev_error(d));
    vdn_dev_close(d);
}

int main(void) {
    char err[256];
    vdn_dev *d = vdn_dev_open("cpu", 0, 1, err, sizeof err);
    if (!d) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    test_counts_and_keys(d);
    vdn_dev_close(d);
    test_no_timers();
    return check_report("test_op_profile");
}
