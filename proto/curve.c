/* CURVE key files and socket options; see curve.h. */
#include "curve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "vdn_util.h"

int vdn_curve_available(void) {
    return zmq_has("curve");
}

static int write_new(const char *path, const char *text, mode_t mode, char *err, size_t errlen) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, mode);
    if (fd < 0) return vdn_fail(err, errlen, "%s: %s", path, strerror(errno));
    size_t n = strlen(text);
    if (fchmod(fd, mode) != 0 || write(fd, text, n) != (ssize_t)n || fsync(fd) != 0) {
        int e = errno;
        close(fd);
        unlink(path);
        return vdn_fail(err, errlen, "%s: %s", path, strerror(e));
    }
    close(fd);
    return 0;
}

int vdn_curve_keygen(const char *prefix, char *err, size_t errlen) {
    if (!vdn_curve_available())
        return vdn_fail(err, errlen,
                        "this libzmq was built without CURVE (zmq_has(\"curve\") = 0)");
    char pub[VDN_Z85_KEY_LEN + 1], sec[VDN_Z85_KEY_LEN + 1];
    if (zmq_curve_keypair(pub, sec) != 0)
        return vdn_fail(err, errlen, "zmq_curve_keypair: %s", zmq_strerror(errno));
    char kpath[4096], ppath[4096], text[64];
    snprintf(kpath, sizeof kpath, "%s.key", prefix);
    snprintf(ppath, sizeof ppath, "%s.pub", prefix);
    if (access(kpath, F_OK) == 0 || access(ppath, F_OK) == 0)
        return vdn_fail(err, errlen, "%s or %s exists already; refusing to overwrite a key", kpath,
                        ppath);
    snprintf(text, sizeof text, "%s\n", sec);
    if (write_new(kpath, text, 0600, err, errlen)) return -1;
    snprintf(text, sizeof text, "%s\n", pub);
    if (write_new(ppath, text, 0644, err, errlen)) {
        unlink(kpath);
        return -1;
    }
    memset(sec, 0, sizeof sec);
    memset(text, 0, sizeof text);
    return 0;
}

int vdn_curve_read_key(const char *path, char key[VDN_Z85_KEY_LEN + 1], char *err, size_t errlen) {
    size_t len;
    char *text = vdn_read_file(path, &len, err, errlen);
    if (!text) return -1;
    while (len && (text[len - 1] == '\n' || text[len - 1] == '\r' || text[len - 1] == ' '))
        text[--len] = 0;
    uint8_t raw[32];
    /* strlen too: an embedded NUL would let z85_decode read a shorter key and accept it */
    int ok = len == VDN_Z85_KEY_LEN && strlen(text) == len && zmq_z85_decode(raw, text) != NULL;
    if (ok) memcpy(key, text, VDN_Z85_KEY_LEN + 1);
    memset(text, 0, len);
    free(text);
    memset(raw, 0, sizeof raw);
    if (!ok)
        return vdn_fail(err, errlen, "%s: expected one 40-character Z85 CURVE key (vdn keygen)",
                        path);
    return 0;
}

int vdn_curve_client_setup(void *sock, const char *my_key, const char *server_pub, char *err,
                           size_t errlen) {
    if (!vdn_curve_available()) return vdn_fail(err, errlen, "this libzmq was built without CURVE");
    char sec[VDN_Z85_KEY_LEN + 1], pub[VDN_Z85_KEY_LEN + 1], srv[VDN_Z85_KEY_LEN + 1];
    if (vdn_curve_read_key(my_key, sec, err, errlen)) return -1;
    if (vdn_curve_read_key(server_pub, srv, err, errlen)) return -1;
    if (zmq_curve_public(pub, sec) != 0) return vdn_fail(err, errlen, "%s: bad secret key", my_key);
    int rc = zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, srv, VDN_Z85_KEY_LEN) ||
             zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, pub, VDN_Z85_KEY_LEN) ||
             zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, sec, VDN_Z85_KEY_LEN);
    memset(sec, 0, sizeof sec);
    if (rc) return vdn_fail(err, errlen, "CURVE socket options: %s", zmq_strerror(errno));
    return 0;
}

int vdn_curve_server_setup(void *sock, const char *secret_key_path, const char *domain, char *err,
                           size_t errlen) {
    if (!vdn_curve_available()) return vdn_fail(err, errlen, "this libzmq was built without CURVE");
    char sec[VDN_Z85_KEY_LEN + 1];
    if (vdn_curve_read_key(secret_key_path, sec, err, errlen)) return -1;
    int one = 1;
    int rc = zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof one) ||
             zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, sec, VDN_Z85_KEY_LEN) ||
             zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, domain, strlen(domain));
    memset(sec, 0, sizeof sec);
    if (rc) return vdn_fail(err, errlen, "CURVE server options: %s", zmq_strerror(errno));
    return 0;
}

int vdn_endpoint_is_loopback(const char *ep) {
    if (!strncmp(ep, "ipc://", 6) || !strncmp(ep, "inproc://", 9)) return 1;
    if (strncmp(ep, "tcp://", 6)) return 0;
    const char *host = ep + 6;
    char h[256];
    size_t n;
    if (*host == '[') { /* tcp://[::1]:port */
        const char *end = strchr(host, ']');
        if (!end) return 0;
        n = (size_t)(end - host - 1);
        if (n >= sizeof h) return 0;
        memcpy(h, host + 1, n);
    } else {
        const char *colon = strrchr(host, ':');
        n = colon ? (size_t)(colon - host) : strlen(host);
        if (n >= sizeof h) return 0;
        memcpy(h, host, n);
    }
    h[n] = 0;
    if (!strcmp(h, "localhost") || !strcmp(h, "lo")) return 1;
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, h, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, h, &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
    return 0;
}
