/* The store API on the file:// backend, the key rules every backend shares, URI and option
 * errors, and "a failed put leaves nothing under the key" with a real mid-write failure
 * (RLIMIT_FSIZE makes write(2) fail with EFBIG part-way through the copy). Two writers racing on
 * one key (two workers storing the same prompt-cache entry) never show a reader a torn object.
 * Also the S3 backend's error text on a dead endpoint: it names endpoint and key, never the
 * secret. */
#include "store.h"
#include "vdn_util.h"
#include "check.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char root[4096];     /* local scratch folder (and the store itself in file mode) */
static char base_uri[4200]; /* the store under test */
static int file_mode;       /* folder semantics and on-disk checks apply only to file:// */

static void rm_rf(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return;
    if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
            char sub[4096];
            snprintf(sub, sizeof sub, "%s/%s", path, de->d_name);
            rm_rf(sub);
        }
        if (d) closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

static void write_local(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, len, f) == len);
    if (f) fclose(f);
}

static unsigned char *random_bytes(size_t n, unsigned seed) {
    unsigned char *p = malloc(n);
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (unsigned char)x;
    }
    return p;
}

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) n++;
    closedir(d);
    return n;
}

typedef struct {
    char keys[32][64];
    uint64_t sizes[32];
    int n, stop_after;
} listing;

static int collect(void *user, const char *key, uint64_t size) {
    listing *l = user;
    if (l->n < 32) {
        snprintf(l->keys[l->n], sizeof l->keys[0], "%s", key);
        l->sizes[l->n] = size;
    }
    l->n++;
    return l->stop_after && l->n >= l->stop_after;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char **)a, *(char **)b);
}

static void test_roundtrip(vdn_store *st) {
    char err[VDN_ERR_LEN];
    /* bytes */
    CHECK(vdn_store_put_bytes(st, "hello.txt", "hi there", 8, err, sizeof err) == 0);
    void *data = NULL;
    size_t len = 0;
    CHECK(vdn_store_get_bytes(st, "hello.txt", &data, &len, err, sizeof err) == 0);
    CHECK(len == 8 && data && !memcmp(data, "hi there", 9)); /* NUL-terminated */
    free(data);
    /* empty object */
    CHECK(vdn_store_put_bytes(st, "empty", NULL, 0, err, sizeof err) == 0);
    uint64_t size = 99;
    CHECK(vdn_store_exists(st, "empty", &size, err, sizeof err) == 1 && size == 0);
    CHECK(vdn_store_get_bytes(st, "empty", &data, &len, err, sizeof err) == 0 && len == 0);
    free(data);
    /* a 3 MiB file through put_file/get_file, compared byte for byte */
    size_t big = 3u << 20;
    unsigned char *content = random_bytes(big, 7);
    char src[4200], dst[4200];
    snprintf(src, sizeof src, "%s.src", root);
    snprintf(dst, sizeof dst, "%s.dst", root);
    write_local(src, content, big);
    CHECK(vdn_store_put_file(st, "batches/b1/job2/out.bin", src, err, sizeof err) == 0);
    CHECK(vdn_store_exists(st, "batches/b1/job2/out.bin", &size, err, sizeof err) == 1);
    CHECK(size == big);
    CHECK(vdn_store_get_file(st, "batches/b1/job2/out.bin", dst, err, sizeof err) == 0);
    FILE *f = fopen(dst, "rb");
    unsigned char *back = malloc(big + 1);
    size_t got = f ? fread(back, 1, big + 1, f) : 0;
    if (f) fclose(f);
    CHECK(got == big && !memcmp(back, content, big));
    /* overwrite replaces */
    CHECK(vdn_store_put_bytes(st, "batches/b1/job2/out.bin", "v2", 2, err, sizeof err) == 0);
    CHECK(vdn_store_get_bytes(st, "batches/b1/job2/out.bin", &data, &len, err, sizeof err) == 0);
    CHECK(len == 2 && !memcmp(data, "v2", 2));
    free(data);
    /* absent keys */
    CHECK(vdn_store_exists(st, "nope", &size, err, sizeof err) == 0);
    CHECK(vdn_store_exists(st, "batches", &size, err, sizeof err) == 0); /* a folder */
    CHECK(vdn_store_exists(st, "hello.txt/x", &size, err, sizeof err) == 0);
    int rc = vdn_store_get_bytes(st, "nope", &data, &len, err, sizeof err);
    CHECK_ERR(rc, err, file_mode ? "no such key" : "NoSuchKey");
    CHECK(strstr(err, "nope") != NULL);
    /* a failed get leaves an existing local file alone */
    write_local(dst, "keep", 4);
    rc = vdn_store_get_file(st, "nope", dst, err, sizeof err);
    CHECK_ERR(rc, err, file_mode ? "no such key" : "NoSuchKey");
    f = fopen(dst, "rb");
    got = f ? fread(back, 1, 16, f) : 0;
    if (f) fclose(f);
    CHECK(got == 4 && !memcmp(back, "keep", 4));
    /* local-side errors name the local path */
    rc = vdn_store_put_file(st, "x", "/nonexistent/dir/file.bin", err, sizeof err);
    CHECK_ERR(rc, err, "/nonexistent/dir/file.bin");
    rc = vdn_store_put_file(st, "x", root, err, sizeof err);
    CHECK_ERR(rc, err, "is a directory");
    /* on disk an object cannot also be a folder (S3 has no folders, so there both work) */
    if (file_mode) {
        rc = vdn_store_put_bytes(st, "hello.txt/child", "x", 1, err, sizeof err);
        CHECK_ERR(rc, err, "hello.txt/child");
        rc = vdn_store_put_bytes(st, "batches/b1", "x", 1, err, sizeof err);
        CHECK_ERR(rc, err, "folder");
    }
    unlink(src);
    unlink(dst);
    free(content);
    free(back);
}

static void test_list_delete(void) {
    char err[VDN_ERR_LEN];
    const char *keys[] = {"ba", "b/y/z", "a", "b/x", "b-c", "c/d/e/f", "B"};
    size_t nk = sizeof keys / sizeof *keys;
    vdn_store *sub = NULL;
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/listing", base_uri);
    sub = vdn_store_open(dir, NULL, err, sizeof err);
    CHECK(sub != NULL);
    if (!sub) return;
    for (size_t i = 0; i < nk; i++)
        CHECK(vdn_store_put_bytes(sub, keys[i], keys[i], strlen(keys[i]), err, sizeof err) == 0);
    /* A stray temp file of an in-flight put is never listed. */
    char stray[4300];
    snprintf(stray, sizeof stray, "%s/listing/.vdn-tmp/put-abc123", root);
    if (file_mode) write_local(stray, "half", 4);

    /* Expected order: byte order of the keys (what S3 returns), computed independently. */
    const char *sorted[16];
    memcpy(sorted, keys, sizeof keys);
    qsort(sorted, nk, sizeof *sorted, cmp_str);
    listing l = {0};
    CHECK(vdn_store_list(sub, "", collect, &l, err, sizeof err) == 0);
    CHECK(l.n == (int)nk);
    for (size_t i = 0; i < nk && i < (size_t)l.n; i++) {
        CHECK(!strcmp(l.keys[i], sorted[i]));
        CHECK(l.sizes[i] == strlen(sorted[i]));
    }
    static const struct {
        const char *prefix;
        const char *want[8];
    } cases[] = {
        {"b/", {"b/x", "b/y/z"}}, {"b", {"b-c", "b/x", "b/y/z", "ba"}},
        {"b/y/", {"b/y/z"}},      {"c/d/e/f", {"c/d/e/f"}},
        {"zz", {NULL}},           {"a/", {NULL}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        listing m = {0};
        CHECK(vdn_store_list(sub, cases[c].prefix, collect, &m, err, sizeof err) == 0);
        int want_n = 0;
        while (want_n < 8 && cases[c].want[want_n])
            want_n++;
        CHECK(m.n == want_n);
        for (int i = 0; i < want_n && i < m.n; i++)
            CHECK(!strcmp(m.keys[i], cases[c].want[i]));
    }
    /* The callback can stop the walk. */
    listing s = {.stop_after = 2};
    CHECK(vdn_store_list(sub, "", collect, &s, err, sizeof err) == 0 && s.n == 2);

    /* delete: gone, emptied folders gone too, absent keys are fine. */
    CHECK(vdn_store_delete(sub, "c/d/e/f", err, sizeof err) == 0);
    uint64_t size;
    CHECK(vdn_store_exists(sub, "c/d/e/f", &size, err, sizeof err) == 0);
    char cdir[4300];
    snprintf(cdir, sizeof cdir, "%s/listing/c", root);
    struct stat sb;
    CHECK(!file_mode || (stat(cdir, &sb) != 0 && errno == ENOENT));
    CHECK(vdn_store_delete(sub, "c/d/e/f", err, sizeof err) == 0);
    CHECK(vdn_store_delete(sub, "b/y/z", err, sizeof err) == 0);
    CHECK(vdn_store_exists(sub, "b/x", &size, err, sizeof err) == 1); /* sibling untouched */
    if (file_mode) {
        int rc = vdn_store_delete(sub, "b", err, sizeof err);
        CHECK_ERR(rc, err, "folder");
    }
    listing after = {0};
    CHECK(vdn_store_list(sub, "", collect, &after, err, sizeof err) == 0);
    CHECK(after.n == (int)nk - 2);
    vdn_store_close(sub);
}

static void test_key_rules(vdn_store *st) {
    static const struct {
        const char *key, *want;
    } bad[] = {
        {"", "empty"},
        {"/abs", "starts with '/'"},
        {"a//b", "empty segment"},
        {"a/", "ends with '/'"},
        {"../x", "'..' segment"},
        {"a/../../x", "'..' segment"},
        {"a/./b", "'.' segment"},
        {".", "'.' segment"},
        {"a\\b", "backslash"},
        {"a\nb", "control byte 0x0a"},
        {".vdn-tmp/x", "reserved"},
        {".vdn-tmp", "reserved"},
    };
    char err[VDN_ERR_LEN];
    uint64_t size;
    void *data;
    size_t len;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int rc = vdn_store_put_bytes(st, bad[i].key, "x", 1, err, sizeof err);
        CHECK_ERR(rc, err, bad[i].want);
        CHECK(strstr(err, "key") != NULL);
        rc = vdn_store_get_bytes(st, bad[i].key, &data, &len, err, sizeof err);
        CHECK_ERR(rc, err, bad[i].want);
        rc = vdn_store_exists(st, bad[i].key, &size, err, sizeof err);
        CHECK_ERR(rc, err, bad[i].want);
        rc = vdn_store_delete(st, bad[i].key, err, sizeof err);
        CHECK_ERR(rc, err, bad[i].want);
        rc = vdn_store_check_key(bad[i].key, err, sizeof err);
        CHECK_ERR(rc, err, bad[i].want);
    }
    char longkey[1100];
    memset(longkey, 'k', 1025);
    longkey[1025] = 0;
    int rc = vdn_store_check_key(longkey, err, sizeof err);
    CHECK_ERR(rc, err, "at most 1024");
    /* Nothing escaped the store: the parent of root has no file named x. */
    char outside[4200];
    snprintf(outside, sizeof outside, "%s/../x", root);
    struct stat sb;
    CHECK(stat(outside, &sb) != 0);
    /* Good keys and prefixes. */
    CHECK(vdn_store_check_key("a", err, sizeof err) == 0);
    CHECK(vdn_store_check_key("a.b/..c/d..", err, sizeof err) == 0);
    CHECK(vdn_store_check_key(".hidden/x", err, sizeof err) == 0);
    CHECK(vdn_store_check_prefix("", err, sizeof err) == 0);
    CHECK(vdn_store_check_prefix("a/", err, sizeof err) == 0);
    CHECK(vdn_store_check_prefix("a/b", err, sizeof err) == 0);
    listing l = {0};
    rc = vdn_store_list(st, "../", collect, &l, err, sizeof err);
    CHECK_ERR(rc, err, "'..' segment");
    rc = vdn_store_list(st, "a//", collect, &l, err, sizeof err);
    CHECK_ERR(rc, err, "empty segment");
}

/* A put whose copy fails part-way must leave nothing under the key (and keep an older version
 * intact), and clean up its temp file. */
static void test_no_half_object(vdn_store *st) {
    char err[VDN_ERR_LEN], src[4200], tmpdir[4200];
    size_t big = 4u << 20;
    unsigned char *content = random_bytes(big, 3);
    snprintf(src, sizeof src, "%s.big", root);
    write_local(src, content, big);
    snprintf(tmpdir, sizeof tmpdir, "%s/.vdn-tmp", root);
    CHECK(vdn_store_put_bytes(st, "keep/old.bin", "old", 3, err, sizeof err) == 0);

    struct rlimit saved, lim;
    getrlimit(RLIMIT_FSIZE, &saved);
    lim = saved;
    lim.rlim_cur = 1u << 20; /* 1 MiB: the 4 MiB copy fails after its first megabyte */
    signal(SIGXFSZ, SIG_IGN);
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    int rc1 = vdn_store_put_file(st, "new/obj.bin", src, err, sizeof err);
    char err1[VDN_ERR_LEN];
    memcpy(err1, err, sizeof err1);
    int rc2 = vdn_store_put_file(st, "keep/old.bin", src, err, sizeof err);
    int rc3 = vdn_store_put_bytes(st, "new/bytes.bin", content, big, err, sizeof err);
    setrlimit(RLIMIT_FSIZE, &saved);

    CHECK_ERR(rc1, err1, "new/obj.bin");
    CHECK(strstr(err1, "File too large") != NULL);
    CHECK(rc2 == -1 && rc3 == -1);
    uint64_t size;
    CHECK(vdn_store_exists(st, "new/obj.bin", &size, err, sizeof err) == 0);
    CHECK(vdn_store_exists(st, "new/bytes.bin", &size, err, sizeof err) == 0);
    void *data;
    size_t len;
    CHECK(vdn_store_get_bytes(st, "keep/old.bin", &data, &len, err, sizeof err) == 0);
    CHECK(len == 3 && !memcmp(data, "old", 3));
    free(data);
    CHECK(count_entries(tmpdir) == 0); /* temp files cleaned up */
    /* Temps left by a crashed put: a day-old one is swept when the store is next opened, a
     * fresh one (maybe a live put of another process) is left alone. */
    char old_tmp[4300], new_tmp[4300], uri[4300];
    snprintf(old_tmp, sizeof old_tmp, "%s/put-OLD123", tmpdir);
    snprintf(new_tmp, sizeof new_tmp, "%s/put-NEW123", tmpdir);
    write_local(old_tmp, "x", 1);
    write_local(new_tmp, "y", 1);
    struct timespec times[2] = {{time(NULL) - 2 * 24 * 3600, 0}, {time(NULL) - 2 * 24 * 3600, 0}};
    CHECK(utimensat(AT_FDCWD, old_tmp, times, 0) == 0);
    snprintf(uri, sizeof uri, "file://%s", root);
    vdn_store *again = vdn_store_open(uri, NULL, err, sizeof err);
    CHECK(again != NULL);
    vdn_store_close(again);
    struct stat tsb;
    CHECK(stat(old_tmp, &tsb) != 0);
    CHECK(stat(new_tmp, &tsb) == 0);
    unlink(new_tmp);
    /* A fresh temp of a process of this host that is gone (a put killed mid-upload) is swept at
     * once; one of a live process (this one), and one of another host, are left alone. */
    char host[64], dead_tmp[4300], live_tmp[4300], other_tmp[4300];
    gethostname(host, sizeof host);
    host[sizeof host - 1] = 0;
    for (char *p = host; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.'))
            *p = '_';
    pid_t child = fork();
    if (child == 0) _exit(0);
    waitpid(child, NULL, 0); /* its pid is no process now */
    snprintf(dead_tmp, sizeof dead_tmp, "%s/put-%s.%ld-AbC123", tmpdir, host, (long)child);
    snprintf(live_tmp, sizeof live_tmp, "%s/put-%s.%ld-AbC123", tmpdir, host, (long)getpid());
    snprintf(other_tmp, sizeof other_tmp, "%s/put-elsewhere.%ld-AbC123", tmpdir, (long)child);
    write_local(dead_tmp, "d", 1);
    write_local(live_tmp, "l", 1);
    write_local(other_tmp, "o", 1);
    again = vdn_store_open(uri, NULL, err, sizeof err);
    CHECK(again != NULL);
    vdn_store_close(again);
    CHECK(stat(dead_tmp, &tsb) != 0, "a dead process's temp file %s was kept", dead_tmp);
    CHECK(stat(live_tmp, &tsb) == 0 && stat(other_tmp, &tsb) == 0);
    unlink(live_tmp);
    unlink(other_tmp);
    listing l = {0};
    CHECK(vdn_store_list(st, "new", collect, &l, err, sizeof err) == 0 && l.n == 0);
    /* And after the limit is lifted the same put succeeds. */
    CHECK(vdn_store_put_file(st, "new/obj.bin", src, err, sizeof err) == 0);
    CHECK(vdn_store_exists(st, "new/obj.bin", &size, err, sizeof err) == 1 && size == big);
    unlink(src);
    free(content);
}

/* Two workers storing one key at once (both encoded the same prompt): each through its own
 * store handle, puts of different contents over and over, while a reader reads the key. Every
 * read must be one writer's whole object: the file backend publishes a put by temp file +
 * rename. File mode only: on S3 the service publishes a PUT (or a multipart complete) atomically,
 * and s3rver, the S3 stand-in of the tests, writes an object's file in place, so racing it would
 * test s3rver, not vdn. */
typedef struct {
    const unsigned char *data;
    size_t len;
    const char *local;
    int rounds, failed;
    char err[VDN_ERR_LEN];
} race_writer;

static atomic_int race_writing;

static void *race_put(void *arg) {
    race_writer *w = arg;
    vdn_store *st = vdn_store_open(base_uri, NULL, w->err, sizeof w->err);
    for (int i = 0; st && i < w->rounds; i++)
        if (vdn_store_put_file(st, "race/same.bin", w->local, w->err, sizeof w->err)) w->failed++;
    if (!st) w->failed++;
    vdn_store_close(st);
    atomic_fetch_sub(&race_writing, 1);
    return NULL;
}

static void test_same_key_race(void) {
    size_t len = 3u << 20;
    int rounds = 20;
    unsigned char *a = random_bytes(len, 11), *b = random_bytes(len, 12);
    char la[4300], lb[4300], err[VDN_ERR_LEN];
    snprintf(la, sizeof la, "%s.race_a", root);
    snprintf(lb, sizeof lb, "%s.race_b", root);
    write_local(la, a, len);
    write_local(lb, b, len);
    race_writer w[2] = {{a, len, la, rounds, 0, ""}, {b, len, lb, rounds, 0, ""}};
    vdn_store *reader = vdn_store_open(base_uri, NULL, err, sizeof err);
    CHECK(reader != NULL, "%s", err);
    if (!reader) return;
    atomic_store(&race_writing, 2);
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, race_put, &w[i]);
    int whole = 0, torn = 0;
    while (atomic_load(&race_writing) > 0) {
        void *data;
        size_t got;
        if (vdn_store_get_bytes(reader, "race/same.bin", &data, &got, err, sizeof err))
            continue; /* not there yet */
        int same = got == len && (!memcmp(data, a, len) || !memcmp(data, b, len));
        whole += same;
        torn += !same;
        free(data);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        CHECK(w[i].failed == 0, "writer %d: %d puts failed: %s", i, w[i].failed, w[i].err);
    }
    CHECK(torn == 0, "%d reads of a key two writers were putting saw neither whole object", torn);
    void *data;
    size_t got;
    CHECK(vdn_store_get_bytes(reader, "race/same.bin", &data, &got, err, sizeof err) == 0, "%s",
          err);
    if (got == len) CHECK(!memcmp(data, a, len) || !memcmp(data, b, len), "the last put is torn");
    free(data);
    char tmpdir[4200];
    snprintf(tmpdir, sizeof tmpdir, "%s/.vdn-tmp", root);
    CHECK(count_entries(tmpdir) == 0, "temp files left by the racing puts");
    printf("same-key race: 2 writers x %d puts of %zu bytes, %d whole reads, %d torn\n", rounds,
           len, whole, torn);
    CHECK(vdn_store_delete(reader, "race/same.bin", err, sizeof err) == 0, "%s", err);
    vdn_store_close(reader);
    unlink(la);
    unlink(lb);
    free(a);
    free(b);
}

static void test_open_errors(void) {
    char err[VDN_ERR_LEN];
    vdn_store *st = vdn_store_open("", NULL, err, sizeof err);
    CHECK_ERR(st ? 0 : -1, err, "empty");
    st = vdn_store_open("ftp://host/x", NULL, err, sizeof err);
    CHECK_ERR(st ? 0 : -1, err, "unknown scheme");
    st = vdn_store_open("file://", NULL, err, sizeof err);
    CHECK_ERR(st ? 0 : -1, err, "names no directory");
    char file_as_dir[4300];
    snprintf(file_as_dir, sizeof file_as_dir, "%s/hello.txt", root);
    st = vdn_store_open(file_as_dir, NULL, err, sizeof err);
    CHECK_ERR(st ? 0 : -1, err, "hello.txt");
    st = vdn_store_open("s3://", NULL, err, sizeof err);
    CHECK_ERR(st ? 0 : -1, err, "expected s3://BUCKET");
    st = vdn_store_open("s3:///prefix", NULL, err, sizeof err);
    CHECK_ERR(st ? 0 : -1, err, "expected s3://BUCKET");
    st = vdn_store_open("s3://bu cket/x", NULL, err, sizeof err);
    CHECK_ERR(st ? 0 : -1, err, "bucket name has ' '");
    st = vdn_store_open("s3://b/../x", NULL, err, sizeof err);
    CHECK_ERR(st ? 0 : -1, err, "bad prefix");
    vdn_store_opts o = {.endpoint = "127.0.0.1:9", .access_key = "A", .secret_key = "S"};
    st = vdn_store_open("s3://b/p", &o, err, sizeof err);
    CHECK_ERR(st ? 0 : -1, err, "must start with http");
    vdn_store_opts o2 = {.endpoint = "http://127.0.0.1:9",
                         .access_key = "A",
                         .secret_key = "S",
                         .multipart_threshold = 1 << 20};
    st = vdn_store_open("s3://b/p", &o2, err, sizeof err);
    CHECK_ERR(st ? 0 : -1, err, "5 MiB");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    vdn_store_opts o3 = {.endpoint = "http://127.0.0.1:9", .access_key = "AKIDONLY"};
    st = vdn_store_open("s3://b/p", &o3, err, sizeof err);
    CHECK_ERR(st ? 0 : -1, err, "credentials incomplete");
    vdn_store_opts o4 = {.endpoint = "http://127.0.0.1:9",
                         .region = "us east",
                         .access_key = "A",
                         .secret_key = "S"};
    st = vdn_store_open("s3://b/p", &o4, err, sizeof err);
    CHECK_ERR(st ? 0 : -1, err, "region");
    /* Opening a plain path and file:// of it give the same store. */
    st = vdn_store_open(root, NULL, err, sizeof err);
    CHECK(st != NULL && !strcmp(vdn_store_uri(st), root));
    uint64_t size;
    CHECK(st && vdn_store_exists(st, "hello.txt", &size, err, sizeof err) == 1);
    vdn_store_close(st);
}

/* No S3 server needed: a port nothing listens on. The error must name endpoint and key, say
 * it retried, and never contain the secret. */
static void test_dead_endpoint(void) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    CHECK(bind(s, (struct sockaddr *)&a, sizeof a) == 0);
    getsockname(s, (struct sockaddr *)&a, &al);
    int port = ntohs(a.sin_port);
    close(s); /* now nothing listens there */
    char ep[64], err[VDN_ERR_LEN];
    snprintf(ep, sizeof ep, "http://127.0.0.1:%d", port);
    const char *secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzzSECRET";
    vdn_store_opts o = {
        .endpoint = ep, .access_key = "AKIAEXAMPLE", .secret_key = secret, .max_retries = 2};
    vdn_store *st = vdn_store_open("s3://bucket/pre", &o, err, sizeof err);
    CHECK(st != NULL);
    if (!st) return;
    double t0 = (double)time(NULL);
    int rc = vdn_store_put_bytes(st, "dir/obj.bin", "abc", 3, err, sizeof err);
    CHECK_ERR(rc, err, ep);
    CHECK(strstr(err, "dir/obj.bin") != NULL);
    CHECK(strstr(err, "after 3 attempts") != NULL);
    CHECK(strstr(err, secret) == NULL);
    CHECK(strstr(err, "SECRET") == NULL);
    CHECK((double)time(NULL) - t0 < 30);
    uint64_t size;
    rc = vdn_store_exists(st, "dir/obj.bin", &size, err, sizeof err);
    CHECK_ERR(rc, err, "Couldn't connect");
    CHECK(strstr(err, secret) == NULL);
    vdn_store_close(st);
}

/* The file store follows no symlink: a link planted under a key, or a folder on a key's way that
 * is a link to a folder outside, makes a get fail (naming the symlink), an exists say absent, a
 * put refuse (nothing written outside) or replace the link itself, and a delete touch nothing
 * outside. */
static void test_symlinks(void) {
    char store[4200], outside[4200], secret[4300], link[4300], lnkdir[4300], err[VDN_ERR_LEN];
    char uri[4300];
    snprintf(store, sizeof store, "%s/sym-store", root);
    snprintf(outside, sizeof outside, "%s/sym-outside", root);
    snprintf(secret, sizeof secret, "%s/secret.bin", outside);
    snprintf(link, sizeof link, "%s/a/link.bin", store);
    snprintf(lnkdir, sizeof lnkdir, "%s/users", store);
    snprintf(uri, sizeof uri, "file://%s", store);
    vdn_store *st = vdn_store_open(uri, NULL, err, sizeof err);
    CHECK(st != NULL, "%s", err);
    if (!st) return;
    CHECK(vdn_mkdir_p(outside, err, sizeof err) == 0);
    write_local(secret, "secret", 6);
    CHECK(vdn_store_put_bytes(st, "a/real.bin", "real", 4, err, sizeof err) == 0, "%s", err);
    CHECK(symlink(secret, link) == 0 && symlink(outside, lnkdir) == 0);
    void *data = NULL;
    size_t len = 0;
    uint64_t size = 0;
    int rc = vdn_store_get_bytes(st, "a/link.bin", &data, &len, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "symlink"), "get through a link: %s", err);
    free(rc == 0 ? data : NULL);
    rc = vdn_store_get_bytes(st, "users/secret.bin", &data, &len, err, sizeof err);
    CHECK(rc != 0, "get through a linked folder was served");
    free(rc == 0 ? data : NULL);
    CHECK(vdn_store_exists(st, "a/link.bin", &size, err, sizeof err) == 0);
    CHECK(vdn_store_exists(st, "users/secret.bin", &size, err, sizeof err) == 0);
    /* a put through the linked folder is refused; nothing lands outside */
    CHECK(vdn_store_put_bytes(st, "users/new.bin", "x", 1, err, sizeof err) != 0 &&
              strstr(err, "symlink"),
          "put through a linked folder: %s", err);
    char planted[4300];
    snprintf(planted, sizeof planted, "%s/new.bin", outside);
    struct stat sb;
    CHECK(stat(planted, &sb) != 0, "a put wrote outside the store");
    /* a put over a planted link replaces the link, the file it pointed to is untouched */
    CHECK(vdn_store_put_bytes(st, "a/link.bin", "over", 4, err, sizeof err) == 0, "%s", err);
    CHECK(lstat(link, &sb) == 0 && S_ISREG(sb.st_mode), "the link is still a link");
    size_t n = 0;
    char *back = vdn_read_file(secret, &n, err, sizeof err);
    CHECK(back && n == 6 && !memcmp(back, "secret", 6), "the file outside changed");
    free(back);
    /* a delete through the linked folder deletes nothing outside */
    CHECK(vdn_store_delete(st, "users/secret.bin", err, sizeof err) != 0 && strstr(err, "symlink"),
          "delete through a linked folder: %s", err);
    CHECK(stat(secret, &sb) == 0, "a delete removed a file outside the store");
    vdn_store_close(st);
}

/* usage: test_store_file [STORE_URI]
 * Without an argument: everything, on a fresh file:// store in $TMPDIR. With an s3:// URI
 * (endpoint and credentials from the environment; the s3rver driver passes one): the same
 * API tests against that store; the file-only checks are left out. */
int main(int argc, char **argv) {
    const char *tmp = getenv("TMPDIR");
    snprintf(root, sizeof root, "%s/vdn-store-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    char err[VDN_ERR_LEN];
    file_mode = argc < 2;
    if (file_mode)
        snprintf(base_uri, sizeof base_uri, "file://%s", root);
    else
        snprintf(base_uri, sizeof base_uri, "%s", argv[1]);
    printf("test_store_file: store %s\n", base_uri);
    vdn_store *st = vdn_store_open(base_uri, NULL, err, sizeof err);
    CHECK(st != NULL);
    if (!st) fprintf(stderr, "%s\n", err);
    if (st) {
        CHECK(!strcmp(vdn_store_uri(st), base_uri));
        test_roundtrip(st);
        test_list_delete();
        test_key_rules(st);
        if (file_mode) test_no_half_object(st);
        if (file_mode) test_same_key_race();
        vdn_store_close(st);
    }
    if (file_mode) {
        test_open_errors();
        test_dead_endpoint();
        test_symlinks();
    }
    rm_rf(root);
    return check_report("test_store_file");
}
