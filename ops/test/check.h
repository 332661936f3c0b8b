/* Assertions shared by the C tests: CHECK counts a failed condition and keeps going, so one run
 * reports every broken check; check_report ends a test with the verdict. Header-only: each test
 * program includes it once (directly or through its folder's own test header). */
#ifndef VDN_OPS_TEST_CHECK_H
#define VDN_OPS_TEST_CHECK_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

/* atomic: tests check from several threads (ranks, decoders, workers' jobs) */
static atomic_int failures;                       /* checks that failed */
static atomic_int checks __attribute__((unused)); /* checks evaluated (some tests print it) */

/* Counts one failure: where, the condition, and the optional printf-style message. */
static inline void check_failed(const char *file, int line, const char *cond, const char *fmt,
                                ...) {
    failures++;
    fprintf(stderr, "%s:%d: CHECK failed: %s", file, line, cond);
    if (fmt[0]) {
        va_list ap;
        va_start(ap, fmt);
        fputs(": ", stderr);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
    }
    fputc('\n', stderr);
}

/* CHECK(cond) or CHECK(cond, fmt, ...). The trailing "" makes the message optional: with no
 * message it is the format, with one it is an unused extra argument. */
#define CHECK(...) CHECK_AT_(__VA_ARGS__, "")
#define CHECK_AT_(cond, ...)                                                                       \
    do {                                                                                           \
        checks++;                                                                                  \
        if (!(cond)) check_failed(__FILE__, __LINE__, #cond, __VA_ARGS__);                         \
    } while (0)

/* The exit status of a test: 1 when any check failed, saying how many. */
static inline int check_report(const char *name) {
    if (failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, failures);
        return 1;
    }
    printf("%s: all checks passed\n", name);
    return 0;
}

#endif
