/* libFuzzer target for the status page's Range header parser (coordinator/range.h). The first
 * byte picks the object's size (0, 1, small, 2^64 - 1 and a few between: the edges the
 * arithmetic has), the rest is the header value. Whatever the input, a partial range lies inside
 * the object and is not empty, and the same value parsed again gives the same answer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "range.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const uint64_t sizes[] = {0, 1, 2, 7, 100, 4096, 1000000, UINT64_MAX - 1, UINT64_MAX};
    if (size < 1) return 0;
    uint64_t len = sizes[data[0] % (sizeof sizes / sizeof *sizes)];
    char *value = malloc(size); /* size - 1 bytes of value and a NUL */
    if (!value) return 0;
    memcpy(value, data + 1, size - 1);
    value[size - 1] = 0;
    uint64_t first = 7, n = 7, first2, n2;
    coord_range_result r = coord_range_parse(value, len, &first, &n);
    if (r == COORD_RANGE_PARTIAL && (n == 0 || first >= len || n > len - first)) __builtin_trap();
    if (r != COORD_RANGE_PARTIAL && (first || n)) __builtin_trap(); /* outputs cleared */
    if (r == COORD_RANGE_UNSATISFIABLE && !strchr(value, '=')) __builtin_trap();
    if (coord_range_parse(value, len, &first2, &n2) != r || first2 != first || n2 != n)
        __builtin_trap();
    free(value);
    return 0;
}
