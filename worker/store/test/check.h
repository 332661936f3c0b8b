/* Tiny assertion helpers shared by the store tests: count failures, keep going, report. */
#ifndef VDN_STORE_TEST_CHECK_H
#define VDN_STORE_TEST_CHECK_H

#include <stdio.h>
#include <string.h>

static int check_failures = 0;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
            check_failures++;                                                                      \
        }                                                                                          \
    } while (0)

/* The error text must mention `want`; prints it either way so logs show real messages. */
#define CHECK_ERR(rc, err, want)                                                                   \
    do {                                                                                           \
        if ((rc) >= 0 && (rc) != -1) {                                                             \
            fprintf(stderr, "%s:%d: expected failure, got rc=%d (%s)\n", __FILE__, __LINE__,       \
                    (int)(rc), #rc);                                                               \
            check_failures++;                                                                      \
        } else if (!strstr((err), (want))) {                                                       \
            fprintf(stderr, "%s:%d: error '%s' does not mention '%s'\n", __FILE__, __LINE__,       \
                    (err), (want));                                                                \
            check_failures++;                                                                      \
        } else {                                                                                   \
            printf("  ok, rejected: %s\n", (err));                                                 \
        }                                                                                          \
    } while (0)

static int check_report(const char *name) {
    if (check_failures) {
        fprintf(stderr, "%s: %d check(s) FAILED\n", name, check_failures);
        return 1;
    }
    printf("%s: all checks passed\n", name);
    return 0;
}

#endif
