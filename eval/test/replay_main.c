/* Runs a libFuzzer target over every file of corpus folders, without libFuzzer: CI exercises
 * the malformed inputs on any compiler. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vdn_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
    int files = 0;
    for (int a = 1; a < argc; a++) {
        DIR *d = opendir(argv[a]);
        if (!d) {
            fprintf(stderr, "replay: cannot open corpus folder %s\n", argv[a]);
            return 1;
        }
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            char path[4096], err[VDN_ERR_LEN];
            snprintf(path, sizeof path, "%s/%s", argv[a], e->d_name);
            size_t len;
            char *data = vdn_read_file(path, &len, err, sizeof err);
            if (!data) {
                fprintf(stderr, "replay: %s\n", err);
                return 1;
            }
            LLVMFuzzerTestOneInput((const uint8_t *)data, len);
            free(data);
            files++;
        }
        closedir(d);
    }
    printf("replay: %d inputs, no crash\n", files);
    return files > 0 ? 0 : 1;
}
