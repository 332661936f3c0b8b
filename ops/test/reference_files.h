/* Reference checks' expected files (the scripts of ops/reference, docs/reference-check.md) record
 * the SHA-256 of each checkpoint file the public code read, as metadata "sha256.<file>": the test
 * first checks that the checkpoint it was handed is that one, so a changed generator (`vdn ckpt
 * init`) fails as such, not as a numerical mismatch. Header-only, with check.h's CHECK. */
#ifndef VDN_OPS_TEST_REFERENCE_FILES_H
#define VDN_OPS_TEST_REFERENCE_FILES_H

#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "safetensors.h"
#include "vdn_util.h"

/* root/files[i] hashes to expected's "sha256.files[i]", for each of the n files. */
static inline void check_reference_hashes(const vdn_st_file *expected, const char *root,
                                          const char *const *files, int n) {
    for (int i = 0; i < n; i++) {
        char path[4200], key[512], err[512], hex[65];
        snprintf(path, sizeof path, "%s/%s", root, files[i]);
        snprintf(key, sizeof key, "sha256.%s", files[i]);
        size_t len;
        char *data = vdn_read_file(path, &len, err, sizeof err);
        CHECK(data != NULL, "%s", err);
        if (!data) continue;
        vdn_sha256_hex(data, len, hex);
        free(data);
        const char *want = vdn_st_meta(expected, key);
        CHECK(want && !strcmp(want, hex),
              "%s changed (sha256 %s, the reference read %s): `vdn ckpt init --vae` no longer "
              "writes what the expected values were made from; re-run docs/reference-check.md",
              path, hex, want ? want : "?");
    }
}

#endif
