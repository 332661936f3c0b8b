/* Helpers media/'s files share (not part of its interface). */
#ifndef VDN_MEDIA_UTIL_H
#define VDN_MEDIA_UTIL_H

#include <stddef.h>

/* "PATH: MSG" into err; returns -1 */
int vdn_media_fail(char *err, size_t errlen, const char *msg, const char *path);
/* a then b (nb may be 0) to PATH.partial, then renamed to PATH; 0, or -1 with err set */
int vdn_media_write_atomic(const char *path, const void *a, size_t na, const void *b, size_t nb,
                           char *err, size_t errlen);

#endif
