/* ZAP handler (RFC 27) on inproc://zeromq.zap.01: admits a CURVE peer only when its public key is
 * listed (KEYS/authorized_keys, keys.h; or the legacy folders authorized_workers/ and
 * authorized_clients/), a worker key only on the workers' endpoint (ZAP domain "workers") and a
 * client key only on the clients' ("clients"), and answers with the user id "ROLE:NAME", which
 * the coordinator reads from every message (zmq_msg_gets "User-Id"). Runs on its own thread,
 * owns its own socket. */
#include <dirent.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "coord.h"
#include "curve.h"
#include "keys.h"
#include "vdn_util.h"

struct zap_handler {
    void *ctx, *sock;
    pthread_t thread;
    pthread_mutex_t lock; /* guards the keys: zap_reload swaps them from the main thread */
    vdn_keyset keys;
    char dir[4096];
};

/* The legacy folders: authorized_workers/NAME.pub is worker NAME, authorized_clients/NAME.pub
 * client NAME with role submit. A folder that does not exist is no error (the keys file may be
 * all there is); *found counts the sources read. */
static int load_dir(const char *dir, vdn_role role, vdn_keyset *ks, int *found, char *err,
                    size_t errlen) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    ++*found;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 4, ".pub")) continue;
        char path[4096], z85[VDN_Z85_KEY_LEN + 1], name[VDN_KEY_NAME_MAX + 1];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        snprintf(name, sizeof name, "%.*s", (int)(n - 4 < VDN_KEY_NAME_MAX ? n - 4 : 0), e->d_name);
        if (!vdn_key_name_ok(name)) {
            closedir(d);
            return vdn_fail(err, errlen,
                            "%s: the file's name is the %s's name: expected 1..%d of A-Z a-z 0-9 "
                            ". _ - starting with a letter or digit, then .pub",
                            path, role == VDN_ROLE_WORKER ? "worker" : "client", VDN_KEY_NAME_MAX);
        }
        uint8_t raw[32];
        if (vdn_curve_read_key(path, z85, err, errlen) ||
            (zmq_z85_decode(raw, z85), vdn_keys_add(ks, raw, name, role, path, err, errlen))) {
            closedir(d);
            return -1;
        }
    }
    closedir(d);
    return 0;
}

static int load_keys(const char *keys_dir, vdn_keyset *ks, char *err, size_t errlen) {
    char path[4096];
    int found = 0;
    memset(ks, 0, sizeof *ks);
    snprintf(path, sizeof path, "%s/authorized_keys", keys_dir);
    if (access(path, F_OK) == 0) {
        size_t len;
        char *text = vdn_read_file(path, &len, err, errlen);
        int rc = text ? vdn_keys_parse(text, len, path, ks, err, errlen) : -1;
        free(text);
        if (rc) goto fail;
        found++;
    }
    snprintf(path, sizeof path, "%s/authorized_workers", keys_dir);
    if (load_dir(path, VDN_ROLE_WORKER, ks, &found, err, errlen)) goto fail;
    snprintf(path, sizeof path, "%s/authorized_clients", keys_dir);
    if (load_dir(path, VDN_ROLE_SUBMIT, ks, &found, err, errlen)) goto fail;
    if (!found) {
        vdn_fail(err, errlen,
                 "%s: no keys file: expected %s/authorized_keys (lines 'PUBLIC_KEY NAME ROLE', "
                 "vdn keygen --keys-file) or the folders authorized_workers/, authorized_clients/",
                 keys_dir, keys_dir);
        goto fail;
    }
    return 0;
fail:
    vdn_keys_free(ks);
    return -1;
}

static void count(const vdn_keyset *ks, int *workers, int *clients) {
    *workers = *clients = 0;
    for (int i = 0; i < ks->n; i++)
        ++*(ks->e[i].role == VDN_ROLE_WORKER ? workers : clients);
}

static void *run(void *arg) {
    zap_handler *z = arg;
    for (;;) {
        /* version, request id, domain, address, identity, mechanism, credentials... */
        zmq_msg_t f[8];
        int n = 0, more = 1;
        while (more) {
            zmq_msg_t m;
            zmq_msg_init(&m);
            if (zmq_msg_recv(&m, z->sock, 0) < 0) {
                zmq_msg_close(&m);
                for (int i = 0; i < n; i++)
                    zmq_msg_close(&f[i]);
                return NULL; /* context shut down */
            }
            more = zmq_msg_more(&m);
            if (n < 8)
                f[n++] = m;
            else
                zmq_msg_close(&m);
        }
        const char *status = "400", *text = "no such key";
        char domain[32] = "", addr[64] = "", user[16 + VDN_KEY_NAME_MAX] = "";
        if (n >= 7) {
            size_t dl =
                zmq_msg_size(&f[2]) < sizeof domain - 1 ? zmq_msg_size(&f[2]) : sizeof domain - 1;
            memcpy(domain, zmq_msg_data(&f[2]), dl);
            size_t al =
                zmq_msg_size(&f[3]) < sizeof addr - 1 ? zmq_msg_size(&f[3]) : sizeof addr - 1;
            memcpy(addr, zmq_msg_data(&f[3]), al);
            int curve = zmq_msg_size(&f[5]) == 5 && !memcmp(zmq_msg_data(&f[5]), "CURVE", 5);
            pthread_mutex_lock(&z->lock);
            const vdn_key_entry *k = curve && zmq_msg_size(&f[6]) == 32
                                         ? vdn_keys_find(&z->keys, zmq_msg_data(&f[6]))
                                         : NULL;
            /* a worker key only on the workers' endpoint, a client key only on the clients' */
            int workers = !strcmp(domain, "workers"), clients = !strcmp(domain, "clients");
            if (k && ((workers && k->role == VDN_ROLE_WORKER) ||
                      (clients && k->role != VDN_ROLE_WORKER))) {
                status = "200", text = "OK";
                snprintf(user, sizeof user, "%s:%s", vdn_role_name(k->role), k->name);
            } else if (!curve)
                text = "CURVE required";
            else if (k)
                text = "key of the wrong kind for this endpoint";
            pthread_mutex_unlock(&z->lock);
            if (status[0] != '2') {
                char pub[41] = "?";
                if (curve && zmq_msg_size(&f[6]) == 32)
                    zmq_z85_encode(pub, zmq_msg_data(&f[6]), 32);
                VDN_WARN(
                    "refused a connection from %s on the %s endpoint: public key %s %s", addr,
                    domain, pub,
                    k ? (k->role == VDN_ROLE_WORKER ? "is a worker's key" : "is a client's key")
                      : "is not in the keys file");
            }
        }
        /* reply: version, request id, status code, status text, user id, metadata */
        zmq_send(z->sock, "1.0", 3, ZMQ_SNDMORE);
        if (n >= 2)
            zmq_send(z->sock, zmq_msg_data(&f[1]), zmq_msg_size(&f[1]), ZMQ_SNDMORE);
        else
            zmq_send(z->sock, "", 0, ZMQ_SNDMORE);
        zmq_send(z->sock, status, 3, ZMQ_SNDMORE);
        zmq_send(z->sock, text, strlen(text), ZMQ_SNDMORE);
        zmq_send(z->sock, user, strlen(user), ZMQ_SNDMORE); /* the coordinator's vdn_peer */
        zmq_send(z->sock, "", 0, 0);
        for (int i = 0; i < n; i++)
            zmq_msg_close(&f[i]);
    }
}

zap_handler *zap_start(void *ctx, const char *keys_dir, char *err, size_t errlen) {
    zap_handler *z = vdn_xcalloc(1, sizeof *z);
    snprintf(z->dir, sizeof z->dir, "%s", keys_dir);
    if (load_keys(keys_dir, &z->keys, err, errlen)) {
        free(z);
        return NULL;
    }
    pthread_mutex_init(&z->lock, NULL);
    z->ctx = ctx;
    z->sock = zmq_socket(ctx, ZMQ_REP);
    int linger = 0;
    zmq_setsockopt(z->sock, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_bind(z->sock, "inproc://zeromq.zap.01") != 0) {
        vdn_fail(err, errlen, "ZAP handler bind: %s", zmq_strerror(zmq_errno()));
        zmq_close(z->sock);
        goto fail;
    }
    if (pthread_create(&z->thread, NULL, run, z) != 0) {
        vdn_fail(err, errlen, "ZAP handler thread");
        zmq_close(z->sock);
        goto fail;
    }
    int nw, nc;
    count(&z->keys, &nw, &nc);
    VDN_INFO("CURVE on: %d worker key(s), %d client key(s)", nw, nc);
    return z;
fail:
    vdn_keys_free(&z->keys);
    free(z);
    return NULL;
}

int zap_reload(zap_handler *z, char *err, size_t errlen) {
    if (!z) return 0;
    vdn_keyset ks;
    if (load_keys(z->dir, &ks, err, errlen)) return -1; /* keep the old lists */
    pthread_mutex_lock(&z->lock);
    vdn_keyset old = z->keys;
    z->keys = ks;
    pthread_mutex_unlock(&z->lock);
    vdn_keys_free(&old);
    int nw, nc;
    count(&ks, &nw, &nc);
    VDN_INFO("CURVE keys reloaded: %d worker key(s), %d client key(s)", nw, nc);
    return 0;
}

void zap_stop(zap_handler *z) {
    if (!z) return;
    pthread_join(z->thread, NULL);
    zmq_close(z->sock);
    vdn_keys_free(&z->keys);
    free(z);
}
