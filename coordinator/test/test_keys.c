/* The keys file parser (keys.h): entries, comments, a key that begins with '#', and each refusal
 * naming the file, the line and the field; the ZAP user id round trip; vdn_keys_append. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "../../ops/test/check.h"
#include "keys.h"
#include "vdn_util.h"

#define REQUIRE_OK(c)                                                                              \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: REQUIRE failed: %s\n", __FILE__, __LINE__, #c);                \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

/* Parses text; 0 on success, else err holds the message. */
static int parse(const char *text, vdn_keyset *ks, char *err) {
    memset(ks, 0, sizeof *ks);
    return vdn_keys_parse(text, strlen(text), "ak", ks, err, VDN_ERR_LEN);
}

static void expect_error(const char *text, const char *want) {
    vdn_keyset ks;
    char err[VDN_ERR_LEN];
    int rc = parse(text, &ks, err);
    CHECK(rc != 0);
    if (rc && !strstr(err, want)) {
        fprintf(stderr, "error \"%s\" does not say \"%s\"\n", err, want);
        failures++;
    }
    vdn_keys_free(&ks);
}

int main(void) {
    char k1[41], k2[41], h[41], sec[41], text[1024], err[VDN_ERR_LEN];
    REQUIRE_OK(zmq_curve_keypair(k1, sec) == 0);
    REQUIRE_OK(zmq_curve_keypair(k2, sec) == 0);
    /* no key begins with '#' (digit 84 overflows the first 32-bit word), so '#' is a comment */
    uint8_t raw[32];
    REQUIRE_OK(zmq_curve_keypair(h, sec) == 0);
    char hashed[41];
    memcpy(hashed, h, 41);
    hashed[0] = '#';
    CHECK(zmq_z85_decode(raw, hashed) == NULL);
    snprintf(text, sizeof text,
             "# farm keys\n\n  %s gpu-01 worker\n%s\talice submit\r\n#%s x read\n%s root admin", k1,
             k2, h, h);
    vdn_keyset ks;
    CHECK(parse(text, &ks, err) == 0);
    CHECK(ks.n == 3);
    if (ks.n == 3) {
        CHECK(!strcmp(ks.e[0].name, "gpu-01") && ks.e[0].role == VDN_ROLE_WORKER);
        CHECK(!strcmp(ks.e[1].name, "alice") && ks.e[1].role == VDN_ROLE_SUBMIT);
        CHECK(!strcmp(ks.e[2].name, "root") && ks.e[2].role == VDN_ROLE_ADMIN);
        zmq_z85_decode(raw, k2);
        CHECK(vdn_keys_find(&ks, raw) == &ks.e[1]);
        CHECK(!strcmp(ks.e[2].where, "ak:6"));
    }
    vdn_keys_free(&ks);

    snprintf(text, sizeof text, "%s bob root\n", k1);
    expect_error(text, "ak:1: field 'role': expected worker, read, submit or admin, got \"root\"");
    snprintf(text, sizeof text, "\n%s ../etc admin\n", k1);
    expect_error(text, "ak:2: field 'name'");
    snprintf(text, sizeof text, "%s node01-g0,2,5 worker\n", k1); /* a systemd unit's worker id */
    CHECK(parse(text, &ks, err) == 0 && ks.n == 1, "%s", err);
    vdn_keys_free(&ks);
    snprintf(text, sizeof text, "%s .hidden admin\n", k1);
    expect_error(text, "field 'name'");
    expect_error("abc bob read\n", "ak:1: field 'public key': expected the 40-character Z85 key");
    snprintf(text, sizeof text, "%s bob\n", k1);
    expect_error(text, "ak:1: expected 3 fields 'PUBLIC_KEY NAME ROLE'");
    snprintf(text, sizeof text, "%s a worker\n%s b read\n", k1, k1);
    expect_error(text, "ak:2: this public key is already listed at ak:1");
    snprintf(text, sizeof text, "%s a read\n%s a admin\n", k1, k2);
    expect_error(text, "ak:2: name 'a' is already a client at ak:1");
    /* a worker and a client may share a name (two sides) */
    snprintf(text, sizeof text, "%s a worker\n%s a admin\n", k1, k2);
    CHECK(parse(text, &ks, err) == 0 && ks.n == 2);
    vdn_keys_free(&ks);
    memset(&ks, 0, sizeof ks);
    CHECK(vdn_keys_parse("x\0y\n", 4, "ak", &ks, err, sizeof err) != 0 &&
          strstr(err, "ak:1: NUL byte"));

    vdn_peer p;
    CHECK(vdn_peer_parse(NULL, &p) == 0 && p.local && p.role == VDN_ROLE_ADMIN);
    CHECK(vdn_peer_parse("submit:alice", &p) == 0 && !p.local && p.role == VDN_ROLE_SUBMIT &&
          !strcmp(p.name, "alice"));
    CHECK(vdn_peer_parse("boss:alice", &p) != 0);
    CHECK(vdn_peer_parse("read:a/b", &p) != 0);
    CHECK(vdn_peer_parse("read", &p) != 0);

    /* vdn_keys_append: onto a file without a final newline; refuses a duplicate name */
    char path[] = "/tmp/vdn_test_keys_XXXXXX";
    int fd = mkstemp(path);
    REQUIRE_OK(fd >= 0);
    snprintf(text, sizeof text, "%s gpu-01 worker", k1);
    REQUIRE_OK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    CHECK(vdn_keys_append(path, k2, "alice", VDN_ROLE_READ, err, sizeof err) == 0);
    int arc = vdn_keys_append(path, h, "alice", VDN_ROLE_ADMIN, err, sizeof err);
    CHECK(arc != 0 && strstr(err, "name 'alice' is already a client"), "%d %s", arc, err);
    size_t len;
    char *got = vdn_read_file(path, &len, err, sizeof err);
    REQUIRE_OK(got);
    CHECK(parse(got, &ks, err) == 0 && ks.n == 2 && ks.e[1].role == VDN_ROLE_READ);
    vdn_keys_free(&ks);
    free(got);
    unlink(path);
    return check_report("keys file");
}
