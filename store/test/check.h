/* Tiny assertion helpers shared by the store tests: count failures, keep going, report. */
#ifndef VDN_STORE_TEST_CHECK_H
#define VDN_STORE_TEST_CHECK_H

#include <stdio.h>
#include <string.h>

#include "../../ops/test/check.h"

/* The error text must mention `want`; prints it either way so logs show real messages. */
#define CHECK_ERR(rc, err, want)                                                                   \
    do {                                                                                           \
        if ((rc) >= 0 && (rc) != -1) {                                                             \
            fprintf(stderr, "%s:%d: expected failure, got rc=%d (%s)\n", __FILE__, __LINE__,       \
                    (int)(rc), #rc);                                                               \
            failures++;                                                                            \
        } else if (!strstr((err), (want))) {                                                       \
            fprintf(stderr, "%s:%d: error '%s' does not mention '%s'\n", __FILE__, __LINE__,       \
                    (err), (want));                                                                \
            failures++;                                                                            \
        } else {                                                                                   \
            printf("  ok, rejected: %s\n", (err));                                                 \
        }                                                                                          \
    } while (0)

#endif
