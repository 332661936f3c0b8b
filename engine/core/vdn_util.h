/* Small shared helpers for every part of vdn: errors, logging, time, files.
 * Kept deliberately tiny; anything a maintained library does belongs to that library. */
#ifndef VDN_UTIL_H
#define VDN_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Error text travels in caller-provided buffers: `char err[VDN_ERR_LEN]`.
 * Messages name the file, the field/tensor and what was expected. */
#define VDN_ERR_LEN 1024

/* printf-style into an error buffer; returns -1 so callers can `return vdn_fail(...)`. */
int vdn_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Log to stderr with a level prefix and wall-clock time, at or above the process's threshold:
 * info unless the program sets another (the vdn command: VDN_LOG_LEVEL=debug|info|warn|error). */
enum { VDN_LOG_DEBUG = 0, VDN_LOG_INFO = 1, VDN_LOG_WARN = 2, VDN_LOG_ERROR = 3 };
void vdn_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void vdn_log_set_level(int level);
#define VDN_DEBUG(...) vdn_log(VDN_LOG_DEBUG, __VA_ARGS__)
#define VDN_INFO(...) vdn_log(VDN_LOG_INFO, __VA_ARGS__)
#define VDN_WARN(...) vdn_log(VDN_LOG_WARN, __VA_ARGS__)
#define VDN_ERROR(...) vdn_log(VDN_LOG_ERROR, __VA_ARGS__)

/* Abort on programming errors (never on bad user input: that gets an error message). */
#define VDN_ASSERT(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__, #cond);           \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

void *vdn_xmalloc(size_t n); /* abort on OOM, with the size in the message */
void *vdn_xcalloc(size_t n, size_t size);
char *vdn_xstrdup(const char *s);

double vdn_now(void);  /* monotonic seconds */
double vdn_wall(void); /* seconds since the epoch */

/* Whole file into a NUL-terminated buffer; NULL and an error naming the path on failure. */
char *vdn_read_file(const char *path, size_t *len, char *err, size_t errlen);

/* rel ('/'-separated, no leading '/') opened beneath the folder root_fd with open flags `flags`,
 * following no symlink anywhere and never leaving the folder (beneath.c): openat2's
 * RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS where the kernel has it (5.6+), else the walk below.
 * -1 with errno: ELOOP, ENOTDIR or EXDEV for a symlink, ".." or an escape on the way; ENOENT. */
int vdn_open_beneath(int root_fd, const char *rel, int flags);
/* The walk of kernels without openat2: openat one component at a time, each O_NOFOLLOW (folders
 * O_DIRECTORY); "", "." and ".." parts refused (EXDEV). mkdirs: rel is a folder; create it and
 * the missing folders on the way (mode 0755), as a file store's put needs. */
int vdn_open_beneath_walk(int root_fd, const char *rel, int flags, int mkdirs);
/* Write atomically: PATH.tmp.PID, fsync, rename. */
int vdn_write_file_atomic(const char *path, const void *data, size_t len, char *err, size_t errlen);
int vdn_mkdir_p(const char *path, char *err, size_t errlen);

/* bf16/f16 <-> f32, round-to-nearest-even like torch. */
float vdn_bf16_to_f32(uint16_t h);
uint16_t vdn_f32_to_bf16(float f);
float vdn_f16_to_f32(uint16_t h);
uint16_t vdn_f32_to_f16(float f);
/* fp8 e4m3 (the OCP "e4m3fn" of torch.float8_e4m3fn and CUDA's __nv_fp8_e4m3): bias 7, no
 * infinities, 0x7f/0xff NaN, largest finite 448, subnormals down to 2^-9. f32 -> e4m3 rounds to
 * nearest even and saturates to +-448 (CUDA's __NV_SATFINITE), NaN stays NaN. */
float vdn_e4m3_to_f32(uint8_t q);
uint8_t vdn_f32_to_e4m3(float f);
static inline float vdn_round_bf16(float f) {
    return vdn_bf16_to_f32(vdn_f32_to_bf16(f));
}

/* SHA-256 (for checkpoint identity in run records). out = 64 hex chars + NUL. */
void vdn_sha256_hex(const void *data, size_t len, char out[65]);

#endif
