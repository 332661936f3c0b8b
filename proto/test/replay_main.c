/* Runs a fuzz target over every file of a corpus directory (a plain main for normal CI, where
 * libFuzzer may not be available). Exit 0 when every input was handled without a crash. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vdn_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }
    DIR *d = opendir(argv[1]);
    if (!d) {
        perror(argv[1]);
        return 1;
    }
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[4096], err[VDN_ERR_LEN];
        snprintf(path, sizeof path, "%s/%s", argv[1], e->d_name);
        size_t len;
        char *buf = vdn_read_file(path, &len, err, sizeof err);
        if (!buf) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
        /* every prefix too: truncated frames are the common real-world corruption */
        for (size_t k = 0; k < len && k < 512; k++)
            LLVMFuzzerTestOneInput((const uint8_t *)buf, k);
        free(buf);
        n++;
    }
    closedir(d);
    if (n == 0) {
        fprintf(stderr, "%s: empty corpus\n", argv[1]);
        return 1;
    }
    printf("replayed %d inputs (and their prefixes) from %s\n", n, argv[1]);
    return 0;
}
