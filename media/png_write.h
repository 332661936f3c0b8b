/* PNG encoding (libpng) of RGB pictures (eval's frame strips), and base64 for data: URIs so
 * eval's report page is one self-contained file. */
#ifndef VDN_MEDIA_PNG_WRITE_H
#define VDN_MEDIA_PNG_WRITE_H

#include <stddef.h>
#include <stdint.h>

/* rgb: h rows of w*3 bytes. *out malloc'd. 0, or -1 with a message. */
int vdn_png_encode(const uint8_t *rgb, int w, int h, uint8_t **out, size_t *len, char *err,
                   size_t errlen);
int vdn_png_write_file(const char *path, const uint8_t *rgb, int w, int h, char *err,
                       size_t errlen);
/* Standard base64 (RFC 4648, with padding), NUL-terminated, malloc'd. */
char *vdn_base64(const uint8_t *data, size_t len);

#endif
