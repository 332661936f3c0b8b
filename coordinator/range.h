/* The value of an HTTP Range request header (RFC 9110 section 14.2), for the status page's media
 * route (http.c). Only what a browser's <video> needs to seek: one byte range. The parser is strict
 * and total (any byte string, any size): it never reads past the NUL and never yields a range
 * outside the object. libmicrohttpd does the rest of HTTP; this is the one header we read. */
#ifndef VDN_COORD_RANGE_H
#define VDN_COORD_RANGE_H

#include <stdint.h>

typedef enum {
    /* Serve the whole object (200): no header, a syntax error, a unit other than "bytes", or
     * more than one range (RFC 9110 14.2: a server MAY ignore Range; we send no
     * multipart/byteranges). */
    COORD_RANGE_IGNORE = 0,
    /* Serve [*first, *first + *len) with 206 and Content-Range; *len >= 1, within the size. */
    COORD_RANGE_PARTIAL,
    /* A well-formed single range that selects no byte of the object: 416 with
     * "Content-Range: bytes *\/SIZE" (first-pos at or past the end, "-0", any range of an empty
     * object). */
    COORD_RANGE_UNSATISFIABLE
} coord_range_result;

/* value: the Range header's value (NULL = absent); size: the object's length in bytes.
 * Accepted: "bytes=A-B", "bytes=A-", "bytes=-N" (the unit case-insensitive, optional whitespace
 * around list commas, empty list elements skipped). Digits beyond 2^64 - 1 saturate (a huge
 * last-pos means "to the end", a huge first-pos is unsatisfiable). A range whose last-pos is
 * below its first-pos is invalid: ignored, as any other syntax error. */
coord_range_result coord_range_parse(const char *value, uint64_t size, uint64_t *first,
                                     uint64_t *len);

#endif
