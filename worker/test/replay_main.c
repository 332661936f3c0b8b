/* Runs a libFuzzer target over every file of a corpus directory, so normal CI (gcc, no
 * libFuzzer) exercises the malformed inputs. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

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
        free(buf);
        n++;
    }
    closedir(d);
    printf("replayed %d inputs\n", n);
    return n > 0 ? 0 : 1;
}
