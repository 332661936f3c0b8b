/* The status page's Range header parser (coordinator/range.h) against RFC 9110 14.1-14.2: the
 * three single-range forms, clamping to the object, what is unsatisfiable (416), and what is
 * ignored (the whole object: malformed values, other units, several ranges). */
#include <stdint.h>
#include <stdio.h>

#include "range.h"
#include "../../ops/test/check.h"

typedef struct {
    const char *value;
    uint64_t size;
    coord_range_result want;
    uint64_t first, len;
} range_case;

#define P COORD_RANGE_PARTIAL
#define I COORD_RANGE_IGNORE
#define U COORD_RANGE_UNSATISFIABLE

static const range_case CASES[] = {
    /* the three forms a browser sends */
    {"bytes=0-99", 1000, P, 0, 100},
    {"bytes=100-", 1000, P, 100, 900},
    {"bytes=-300", 1000, P, 700, 300},
    {"bytes=999-999", 1000, P, 999, 1},
    {"bytes=0-0", 1, P, 0, 1},
    /* clamped to the object */
    {"bytes=500-5000", 1000, P, 500, 500},
    {"bytes=-5000", 1000, P, 0, 1000},
    {"bytes=0-99999999999999999999999999", 1000, P, 0, 1000},
    {"bytes=0-18446744073709551615", 1000, P, 0, 1000},
    /* case-insensitive unit, whitespace around the value and list commas, empty elements */
    {"BYTES=1-2", 10, P, 1, 2},
    {"  bytes=1-2\t", 10, P, 1, 2},
    {"bytes= 1-2 ", 10, P, 1, 2},
    {"bytes=,1-2,", 10, P, 1, 2},
    {"bytes=, ,\t3- ,", 10, P, 3, 7},
    /* unsatisfiable: 416 */
    {"bytes=1000-", 1000, U, 0, 0},
    {"bytes=1000-2000", 1000, U, 0, 0},
    {"bytes=-0", 1000, U, 0, 0},
    {"bytes=99999999999999999999999-", 1000, U, 0, 0},
    {"bytes=0-", 0, U, 0, 0},
    {"bytes=-1", 0, U, 0, 0},
    /* ignored: the whole object */
    {NULL, 1000, I, 0, 0},
    {"", 1000, I, 0, 0},
    {"bytes", 1000, I, 0, 0},
    {"bytes=", 1000, I, 0, 0},
    {"bytes=,", 1000, I, 0, 0},
    {"bytes=5-2", 1000, I, 0, 0},     /* last-pos below first-pos: invalid */
    {"bytes=0-1,5-6", 1000, I, 0, 0}, /* several ranges: no multipart/byteranges */
    {"bytes=0-1,x", 1000, I, 0, 0},
    {"bytes=-", 1000, I, 0, 0},
    {"bytes=--1", 1000, I, 0, 0},
    {"bytes=1", 1000, I, 0, 0},
    {"bytes=1-2-3", 1000, I, 0, 0},
    {"bytes=+1-2", 1000, I, 0, 0},
    {"bytes=-+1", 1000, I, 0, 0},
    {"bytes=0x1-2", 1000, I, 0, 0},
    {"bytes=1 -2", 1000, I, 0, 0},
    {"bytes=1- 2", 1000, I, 0, 0},
    {"bytes =1-2", 1000, I, 0, 0},
    {"bytes= =1-2", 1000, I, 0, 0},
    {"items=0-1", 1000, I, 0, 0}, /* a unit we do not know */
    {"bytes2=0-1", 1000, I, 0, 0},
    {"byte=0-1", 1000, I, 0, 0},
    {"=0-1", 1000, I, 0, 0},
    {"bytes=0-1\r\n", 1000, I, 0, 0},    /* CR LF are not whitespace here */
    {"bytes=\xd9\xa1-2", 1000, I, 0, 0}, /* a non-ASCII digit */
    {"bytes=1000-5,", 1000, I, 0, 0},    /* invalid beats unsatisfiable */
};

int main(void) {
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        const range_case *c = &CASES[i];
        uint64_t first = 1234, len = 5678;
        coord_range_result r = coord_range_parse(c->value, c->size, &first, &len);
        CHECK(r == c->want, "'%s' of %llu bytes: got %d, expected %d",
              c->value ? c->value : "(none)", (unsigned long long)c->size, (int)r, (int)c->want);
        CHECK(first == c->first && len == c->len, "'%s': got %llu+%llu, expected %llu+%llu",
              c->value ? c->value : "(none)", (unsigned long long)first, (unsigned long long)len,
              (unsigned long long)c->first, (unsigned long long)c->len);
    }
    /* the largest object: no overflow at the top of the range */
    uint64_t first, len;
    CHECK(coord_range_parse("bytes=-1", UINT64_MAX, &first, &len) == P && first == UINT64_MAX - 1 &&
          len == 1);
    CHECK(coord_range_parse("bytes=0-", UINT64_MAX, &first, &len) == P && first == 0 &&
          len == UINT64_MAX);
    CHECK(coord_range_parse("bytes=18446744073709551614-", UINT64_MAX, &first, &len) == P &&
          first == UINT64_MAX - 1 && len == 1);
    CHECK(coord_range_parse("bytes=18446744073709551615-", UINT64_MAX, &first, &len) == U);
    printf("%d range checks\n", checks);
    return check_report("test_range");
}
