/* One s3:// store shared by several threads (workers upload from a render thread while the
 * main thread talks to the coordinator). Each thread puts, checks and reads back its own keys;
 * the Python driver then checks every object with the AWS CLI.
 * usage: test_s3_threads URI THREADS OBJECTS_PER_THREAD   (endpoint/credentials from env) */
#include "store.h"
#include "vdn_util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static vdn_store *st;
static int per_thread;

static void fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)((seed * 131u + i * 7u) >> 3);
}

static void *worker(void *arg) {
    int id = (int)(intptr_t)arg;
    char err[VDN_ERR_LEN];
    for (int j = 0; j < per_thread; j++) {
        char key[64];
        snprintf(key, sizeof key, "threads/t%d/o%d.bin", id, j);
        size_t n = 1000 + (size_t)(id * 1000 + j) * 37;
        unsigned char *data = malloc(n);
        fill(data, n, (unsigned)(id * 100 + j));
        uint64_t size = 0;
        void *back = NULL;
        size_t len = 0;
        int ex = 0;
        err[0] = 0;
        const char *failed = NULL; /* which step, for the message */
        if (vdn_store_put_bytes(st, key, data, n, err, sizeof err))
            failed = "put";
        else if ((ex = vdn_store_exists(st, key, &size, err, sizeof err)) != 1)
            failed = ex == 0 ? "exists says the key is absent" : "exists";
        else if (size != n)
            snprintf(err, sizeof err, "exists says %llu bytes, %zu were put",
                     (unsigned long long)size, n);
        else if (vdn_store_get_bytes(st, key, &back, &len, err, sizeof err))
            failed = "get";
        else if (len != n || memcmp(back, data, n) || ((char *)back)[n] != 0)
            snprintf(err, sizeof err, "got %zu bytes back, not the %zu that were put", len, n);
        if (failed || err[0]) {
            fprintf(stderr, "thread %d key %s: FAILED: %s%s%s\n", id, key, failed ? failed : "",
                    failed ? ": " : "", err);
            free(data);
            free(back);
            return (void *)1;
        }
        free(data);
        free(back);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: test_s3_threads URI THREADS OBJECTS_PER_THREAD\n");
        return 2;
    }
    char err[VDN_ERR_LEN];
    st = vdn_store_open(argv[1], NULL, err, sizeof err);
    if (!st) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    int threads = atoi(argv[2]);
    per_thread = atoi(argv[3]);
    pthread_t tid[64];
    if (threads < 1 || threads > 64) return 2;
    for (int i = 0; i < threads; i++)
        pthread_create(&tid[i], NULL, worker, (void *)(intptr_t)i);
    int bad = 0;
    for (int i = 0; i < threads; i++) {
        void *rv;
        pthread_join(tid[i], &rv);
        bad += rv != NULL;
    }
    vdn_store_close(st);
    printf("test_s3_threads: %d threads x %d objects, %d failed\n", threads, per_thread, bad);
    return bad ? 1 : 0;
}
