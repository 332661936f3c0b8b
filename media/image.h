/* Pictures in: PNG, JPEG and WebP files (or their bytes) decoded with FFmpeg's libraries to 8-bit
 * RGB as Pillow's Image.open(f).convert("RGB") gives it, which is what the release's
 * encode_keyframes.py feeds the model (docs/formats.md "Pictures"):
 *
 * - alpha is dropped, never composited (RGBA, LA, palette transparency, WebP alpha);
 * - grey and palette pictures are expanded (1/2/4-bit grey scaled by 255, 85, 17);
 * - 16-bit RGB(A) and grey+alpha PNGs keep the high byte of each sample (Pillow unpacks them
 *   with "RGB;16B"/"RGBA;16B"/"LA;16B"); a 16-bit grey PNG becomes min(v, 255) in every channel,
 *   Pillow's "I" (9.x) / "I;16" (11+) -> RGB conversion, which clips instead of scaling: such a
 *   picture comes out nearly white, in Pillow as here;
 * - the EXIF orientation and ICC profiles are ignored, as Image.open ignores them;
 * - CMYK JPEGs (Adobe, as Photoshop writes them) are converted by FFmpeg's decoder, within two
 *   levels of Pillow's cmyk2rgb; JPEG and lossy WebP pixels are FFmpeg's decoders' (libjpeg-turbo
 *   and libwebp upsample chroma and round differently, docs/formats.md has the measured gap).
 *
 * Refused, with a message naming the picture and what was expected: an empty file, a file that is
 * no PNG, JPEG or WebP (GIF, BMP, TIFF, HEIF/AVIF named as such), truncated or corrupt data, an
 * animated PNG or WebP, a JPEG of other than 8 bits, and a picture over the caller's pixel limit,
 * which is checked from the header before any pixel is decoded. */
#ifndef VDN_MEDIA_IMAGE_H
#define VDN_MEDIA_IMAGE_H

#include <stddef.h>
#include <stdint.h>

/* Defaults of vdn_image_opts (a field left 0 takes them). 50 megapixels covers 8K frames and
 * 50 MP camera photos and bounds a decode to a few hundred MB; a keyframe ends on a canvas of
 * at most 768 x 1344 anyway. */
#define VDN_IMAGE_MAX_PIXELS_DEFAULT 50000000LL
#define VDN_IMAGE_MAX_BYTES_DEFAULT ((size_t)256 << 20)

typedef struct {
    long long max_pixels; /* width * height above this is refused from the header */
    size_t max_bytes;     /* a file larger than this is refused before it is read */
} vdn_image_opts;

typedef enum { VDN_IMAGE_PNG = 1, VDN_IMAGE_JPEG, VDN_IMAGE_WEBP } vdn_image_format;

/* What the header says (vdn_image_probe): no pixel decoded. */
typedef struct {
    vdn_image_format format;
    int width, height;
    int bit_depth; /* per sample: PNG 1..16, JPEG 8, WebP 8 */
    int channels;  /* as stored: 1 grey, 2 grey+alpha, 3 colour, 4 colour+alpha or CMYK */
    int palette;   /* PNG colour type 3 */
    int lossless;  /* WebP VP8L */
} vdn_image_info;

typedef struct {
    int width, height;
    uint8_t *rgb; /* width * height * 3 bytes, R G B interleaved, rows top to bottom */
    vdn_image_info info;
    char *name; /* the path or the name given with the bytes, for messages */
} vdn_image;

/* "png", "jpeg", "webp" */
const char *vdn_image_format_name(vdn_image_format f);

/* The header of `data` (a whole file's bytes): format, size, layout; refuses what the loader
 * refuses without decoding (not a picture, unsupported, animated, truncated, over the pixel
 * limit). `name` names the picture in messages. 0, or -1 with the message in err. */
int vdn_image_probe(const void *data, size_t len, const char *name, const vdn_image_opts *opts,
                    vdn_image_info *info, char *err, size_t errlen);

/* Decode a picture held in memory (the bytes of a store object, say) to RGB. On success *out
 * owns its pixels and a copy of name (vdn_image_free); on failure *out is empty. */
int vdn_image_decode(const void *data, size_t len, const char *name, const vdn_image_opts *opts,
                     vdn_image *out, char *err, size_t errlen);

/* The same from a file (read whole, at most opts->max_bytes). */
int vdn_image_load(const char *path, const vdn_image_opts *opts, vdn_image *out, char *err,
                   size_t errlen);

/* sha256 of a file's bytes, 64 hex digits (what a run record names a picture by); 0 or -1. */
int vdn_image_file_sha256(const char *path, const vdn_image_opts *opts, char hex[65], char *err,
                          size_t errlen);

void vdn_image_free(vdn_image *im);

#endif
