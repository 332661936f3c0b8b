/* ZAP handler (RFC 27) on inproc://zeromq.zap.01: admits a CURVE client only when its public key
 * is one of the .pub files in KEYS/authorized_workers (ZAP domain "workers") or
 * KEYS/authorized_clients (domain "clients"). Runs on its own thread, owns its own socket. */
#include <dirent.h>
#include <pthread.h>
#include <string.h>
#include <zmq.h>

#include "coord.h"
#include "curve.h"
#include "vdn_util.h"

typedef struct {
    uint8_t (*keys)[32];
    int n;
} keyset;

struct zap_handler {
    void *ctx, *sock;
    pthread_t thread;
    pthread_mutex_t lock; /* guards the key sets: zap_reload swaps them from the main thread */
    keyset workers, clients;
    char dir[4096];
};

static int load_dir(const char *dir, keyset *ks, char *err, size_t errlen) {
    DIR *d = opendir(dir);
    if (!d)
        return vdn_fail(err, errlen,
                        "%s: cannot open the authorized keys folder (--keys layout: "
                        "coordinator.key, authorized_workers/, authorized_clients/)",
                        dir);
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 4, ".pub")) continue;
        char path[4096], z85[VDN_Z85_KEY_LEN + 1];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (vdn_curve_read_key(path, z85, err, errlen)) {
            closedir(d);
            return -1;
        }
        ks->keys = realloc(ks->keys, sizeof *ks->keys * (size_t)(ks->n + 1));
        VDN_ASSERT(ks->keys);
        zmq_z85_decode(ks->keys[ks->n++], z85);
    }
    closedir(d);
    return 0;
}

static int admitted(const keyset *ks, const uint8_t *key) {
    for (int i = 0; i < ks->n; i++)
        if (!memcmp(ks->keys[i], key, 32)) return 1;
    return 0;
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
        char domain[32] = "", addr[64] = "";
        if (n >= 7) {
            size_t dl =
                zmq_msg_size(&f[2]) < sizeof domain - 1 ? zmq_msg_size(&f[2]) : sizeof domain - 1;
            memcpy(domain, zmq_msg_data(&f[2]), dl);
            size_t al =
                zmq_msg_size(&f[3]) < sizeof addr - 1 ? zmq_msg_size(&f[3]) : sizeof addr - 1;
            memcpy(addr, zmq_msg_data(&f[3]), al);
            int curve = zmq_msg_size(&f[5]) == 5 && !memcmp(zmq_msg_data(&f[5]), "CURVE", 5);
            pthread_mutex_lock(&z->lock);
            const keyset *ks = !strcmp(domain, "workers")   ? &z->workers
                               : !strcmp(domain, "clients") ? &z->clients
                                                            : NULL;
            if (curve && ks && zmq_msg_size(&f[6]) == 32 && admitted(ks, zmq_msg_data(&f[6])))
                status = "200", text = "OK";
            else if (!curve)
                text = "CURVE required";
            pthread_mutex_unlock(&z->lock);
            if (status[0] != '2') {
                char pub[41] = "?";
                if (curve && zmq_msg_size(&f[6]) == 32)
                    zmq_z85_encode(pub, zmq_msg_data(&f[6]), 32);
                VDN_WARN("refused a connection from %s on the %s endpoint: public key %s is not "
                         "in authorized_%s/",
                         addr, domain, pub, domain);
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
        zmq_send(z->sock, "", 0, ZMQ_SNDMORE);
        zmq_send(z->sock, "", 0, 0);
        for (int i = 0; i < n; i++)
            zmq_msg_close(&f[i]);
    }
}

static int load_keys(const char *keys_dir, keyset *workers, keyset *clients, char *err,
                     size_t errlen) {
    char dir[4096];
    memset(workers, 0, sizeof *workers);
    memset(clients, 0, sizeof *clients);
    snprintf(dir, sizeof dir, "%s/authorized_workers", keys_dir);
    if (load_dir(dir, workers, err, errlen)) goto fail;
    snprintf(dir, sizeof dir, "%s/authorized_clients", keys_dir);
    if (load_dir(dir, clients, err, errlen)) goto fail;
    return 0;
fail:
    free(workers->keys);
    free(clients->keys);
    return -1;
}

zap_handler *zap_start(void *ctx, const char *keys_dir, char *err, size_t errlen) {
    zap_handler *z = vdn_xcalloc(1, sizeof *z);
    snprintf(z->dir, sizeof z->dir, "%s", keys_dir);
    if (load_keys(keys_dir, &z->workers, &z->clients, err, errlen)) {
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
    VDN_INFO("CURVE on: %d authorized worker key(s), %d authorized client key(s)", z->workers.n,
             z->clients.n);
    return z;
fail:
    free(z->workers.keys);
    free(z->clients.keys);
    free(z);
    return NULL;
}

int zap_reload(zap_handler *z, char *err, size_t errlen) {
    if (!z) return 0;
    keyset w, c;
    if (load_keys(z->dir, &w, &c, err, errlen)) return -1; /* keep the old lists */
    pthread_mutex_lock(&z->lock);
    keyset ow = z->workers, oc = z->clients;
    z->workers = w;
    z->clients = c;
    pthread_mutex_unlock(&z->lock);
    free(ow.keys);
    free(oc.keys);
    VDN_INFO("CURVE keys reloaded: %d authorized worker key(s), %d authorized client key(s)", w.n,
             c.n);
    return 0;
}

void zap_stop(zap_handler *z) {
    if (!z) return;
    pthread_join(z->thread, NULL);
    zmq_close(z->sock);
    free(z->workers.keys);
    free(z->clients.keys);
    free(z);
}
