#include "range.h"

#include <stddef.h>
#include <string.h>
#include <strings.h>

/* RFC 9110 5.6.3: optional whitespace is spaces and horizontal tabs, nothing else. */
static int is_ows(char c) {
    return c == ' ' || c == '\t';
}

/* RFC 9110 5.6.2 tchar: the characters a token (here, the range unit) may hold. */
static int is_tchar(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* 1*DIGIT from p up to end, saturating at UINT64_MAX (the grammar sets no limit, so a longer
 * number is valid syntax; saturation keeps its meaning: "past any end"). Returns the digits
 * consumed, 0 when p holds none. */
static size_t parse_digits(const char *p, const char *end, uint64_t *v) {
    size_t n = 0;
    *v = 0;
    for (; p + n < end && p[n] >= '0' && p[n] <= '9'; n++) {
        uint64_t d = (uint64_t)(p[n] - '0');
        *v = *v > (UINT64_MAX - d) / 10 ? UINT64_MAX : *v * 10 + d;
    }
    return n;
}

typedef struct {
    int suffix;    /* "-N": the last N bytes */
    uint64_t a, b; /* first-pos and last-pos, or a = N for a suffix */
    int has_last;  /* int-range with a last-pos */
} range_spec;

/* One range-spec, exactly the bytes [p, end): int-range (A-B, A-) or suffix-range (-N).
 * 0, or -1 when it is not one (including B < A, which RFC 9110 14.1.1 calls invalid). */
static int parse_spec(const char *p, const char *end, range_spec *s) {
    memset(s, 0, sizeof *s);
    if (p < end && *p == '-') {
        size_t n = parse_digits(p + 1, end, &s->a);
        s->suffix = 1;
        return n && p + 1 + n == end ? 0 : -1;
    }
    size_t n = parse_digits(p, end, &s->a);
    if (!n || p + n >= end || p[n] != '-') return -1;
    p += n + 1;
    if (p == end) return 0;
    n = parse_digits(p, end, &s->b);
    if (!n || p + n != end) return -1;
    s->has_last = 1;
    return s->b < s->a ? -1 : 0;
}

/* The range-set after "bytes=": its one range-spec in *s. 1 = exactly one, 2 = more than one,
 * -1 = a syntax error or none (1#range-spec needs one). RFC 9110 5.6.1: list elements are
 * separated by OWS "," OWS, and empty elements are accepted and skipped. */
static int parse_set(const char *p, const char *end, range_spec *s) {
    int count = 0;
    while (p < end) {
        while (p < end && is_ows(*p))
            p++;
        const char *e = p;
        while (e < end && *e != ',')
            e++;
        const char *t = e;
        while (t > p && is_ows(t[-1]))
            t--;
        if (t > p) {
            range_spec one;
            if (parse_spec(p, t, &one)) return -1;
            if (count++ == 0) *s = one;
        }
        p = e < end ? e + 1 : e;
    }
    return count == 0 ? -1 : count == 1 ? 1 : 2;
}

static coord_range_result resolve(const range_spec *s, uint64_t size, uint64_t *first,
                                  uint64_t *len) {
    if (size == 0) return COORD_RANGE_UNSATISFIABLE; /* no byte to select */
    if (s->suffix) {
        if (s->a == 0) return COORD_RANGE_UNSATISFIABLE;
        *first = s->a >= size ? 0 : size - s->a;
        *len = size - *first;
        return COORD_RANGE_PARTIAL;
    }
    if (s->a >= size) return COORD_RANGE_UNSATISFIABLE;
    uint64_t last = s->has_last && s->b < size - 1 ? s->b : size - 1;
    *first = s->a;
    *len = last - s->a + 1;
    return COORD_RANGE_PARTIAL;
}

coord_range_result coord_range_parse(const char *value, uint64_t size, uint64_t *first,
                                     uint64_t *len) {
    *first = *len = 0;
    if (!value) return COORD_RANGE_IGNORE;
    const char *p = value, *end = value + strlen(value);
    /* a field value's surrounding whitespace is not part of it (RFC 9110 5.5) */
    while (p < end && is_ows(*p))
        p++;
    while (end > p && is_ows(end[-1]))
        end--;
    const char *unit = p;
    while (p < end && is_tchar(*p))
        p++;
    /* range-unit "=" range-set: a unit we do not know is ignored, as RFC 9110 14.2 requires */
    if (p == unit || p == end || *p != '=' || p - unit != 5 || strncasecmp(unit, "bytes", 5))
        return COORD_RANGE_IGNORE;
    range_spec s;
    if (parse_set(p + 1, end, &s) != 1) return COORD_RANGE_IGNORE;
    return resolve(&s, size, first, len);
}
