/* S3 response bodies held in memory are bounded (vdn_store_opts.max_body_bytes): a tiny HTTP
 * server on loopback answers every request with a 200 and a body of 3 MiB. With a 1 MiB limit
 * vdn_store_get_bytes fails at once, naming the limit, and is not retried (one request); with an
 * 8 MiB limit the same object is read whole, so it is the limit that refused it. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../ops/test/check.h"
#include "store.h"
#include "vdn_util.h"

#define BODY (3u << 20)

static int listen_fd;
static int requests;

static void *serve(void *arg) {
    (void)arg;
    char *body = malloc(BODY);
    memset(body, 'x', BODY);
    for (;;) {
        int fd = accept(listen_fd, NULL, NULL);
        if (fd < 0) break;
        char req[8192];
        size_t got = 0;
        while (got < sizeof req - 1) { /* read the request head */
            ssize_t r = read(fd, req + got, sizeof req - 1 - got);
            if (r <= 0) break;
            got += (size_t)r;
            req[got] = 0;
            if (strstr(req, "\r\n\r\n")) break;
        }
        __atomic_fetch_add(&requests, 1, __ATOMIC_SEQ_CST);
        char head[200];
        int n =
            snprintf(head, sizeof head,
                     "HTTP/1.1 200 OK\r\nContent-Length: %u\r\nConnection: close\r\n\r\n", BODY);
        if (write(fd, head, (size_t)n) == n) {
            for (size_t off = 0; off < BODY;) {
                ssize_t w = write(fd, body + off, BODY - off);
                if (w <= 0) break;
                off += (size_t)w;
            }
        }
        close(fd);
    }
    free(body);
    return NULL;
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&a, sizeof a) || listen(listen_fd, 8) ||
        getsockname(listen_fd, (struct sockaddr *)&a, &len))
        return 1;
    pthread_t t;
    pthread_create(&t, NULL, serve, NULL);
    char endpoint[64], err[VDN_ERR_LEN];
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d", ntohs(a.sin_port));
    size_t limits[2] = {1u << 20, 8u << 20};
    for (int k = 0; k < 2; k++) {
        vdn_store_opts o = {.endpoint = endpoint,
                            .region = "us-east-1",
                            .access_key = "AKIDTEST",
                            .secret_key = "secret-test-key",
                            .max_retries = 3,
                            .retry_max_seconds = 5,
                            .max_body_bytes = limits[k]};
        vdn_store *st = vdn_store_open("s3://bucket/prefix", &o, err, sizeof err);
        CHECK(st != NULL, "%s", err);
        if (!st) break;
        int before = __atomic_load_n(&requests, __ATOMIC_SEQ_CST);
        void *data = NULL;
        size_t n = 0;
        int rc = vdn_store_get_bytes(st, "big.bin", &data, &n, err, sizeof err);
        int made = __atomic_load_n(&requests, __ATOMIC_SEQ_CST) - before;
        if (k == 0)
            CHECK(rc != 0 && strstr(err, "over 1048576 bytes") && strstr(err, "max_body_bytes") &&
                      made == 1,
                  "1 MiB limit: rc %d, %d request(s): %s", rc, made, err);
        else
            CHECK(rc == 0 && n == BODY, "8 MiB limit: rc %d, %zu bytes: %s", rc, n, err);
        free(data);
        vdn_store_close(st);
    }
    shutdown(listen_fd, SHUT_RDWR);
    close(listen_fd);
    pthread_join(t, NULL);
    return check_report("s3 body limit");
}
