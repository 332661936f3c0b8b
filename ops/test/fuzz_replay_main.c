/* Runs a libFuzzer target over every file of one or more corpus folders, and over every prefix
 * (up to 512 bytes) of each file, without libFuzzer: normal CI exercises the malformed inputs with
 * any compiler. Truncated input is the commonest real-world corruption, hence the prefixes.
 * Exit 0 when every input was handled without a crash; 1 on an unreadable or empty corpus. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "vdn_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR...\n", argv[0]);
        return 2;
    }
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
                closedir(d);
                return 1;
            }
            LLVMFuzzerTestOneInput((const uint8_t *)data, len);
            for (size_t k = 0; k < len && k < 512; k++)
                LLVMFuzzerTestOneInput((const uint8_t *)data, k);
            free(data);
            files++;
        }
        closedir(d);
    }
    if (files == 0) {
        fprintf(stderr, "replay: no inputs in the corpus folder(s)\n");
        return 1;
    }
    printf("replay: %d inputs (and their prefixes), no crash\n", files);
    return 0;
}
