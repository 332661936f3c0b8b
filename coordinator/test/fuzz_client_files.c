/* libFuzzer target for the two small file parsers a client reads: vdn.conf
 * (vdn_client_conf_read) and CURVE key files (vdn_curve_read_key). The first byte picks the
 * parser; the rest is the file's content. Both take a path, so the input goes through a file. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "curve.h"
#include "vdn_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char path[64];
    if (!path[0]) snprintf(path, sizeof path, "/tmp/vdn-fuzz-client-%ld", (long)getpid());
    if (size < 1) return 0;
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data + 1, 1, size - 1, f);
    fclose(f);
    char err[VDN_ERR_LEN];
    if (data[0] & 1) {
        vdn_client_conf conf;
        memset(&conf, 0, sizeof conf);
        if (vdn_client_conf_read(path, &conf, err, sizeof err) == 0) {
            /* every field is a NUL-terminated string within its array */
            if (memchr(conf.client_endpoint, 0, sizeof conf.client_endpoint) == NULL)
                __builtin_trap();
            if (memchr(conf.db, 0, sizeof conf.db) == NULL) __builtin_trap();
        } else if (!strstr(err, path)) {
            __builtin_trap(); /* an error names the file */
        }
    } else {
        char key[VDN_Z85_KEY_LEN + 1];
        if (vdn_curve_read_key(path, key, err, sizeof err) == 0) {
            if (strlen(key) != VDN_Z85_KEY_LEN) __builtin_trap();
        } else if (!strstr(err, path)) {
            __builtin_trap();
        }
    }
    return 0;
}
