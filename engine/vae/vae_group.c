/* A group of decoders of one clip (vae_group.h). */
#include "vae_group.h"

#include <stdlib.h>
#include <string.h>

int vae_group_check(int n, vdn_dev *const *devs, char *const *config_json, const char *what,
                    char *err, size_t errlen) {
    if (n < 1 || n > VDN_VAE_MAX_GROUP)
        return vdn_fail(err, errlen, "%s: a group of %d decoders (expected 1 to %d)", what, n,
                        VDN_VAE_MAX_GROUP);
    for (int i = 1; i < n; i++) {
        for (int j = 0; j < i; j++)
            if (devs[i] == devs[j])
                return vdn_fail(err, errlen,
                                "%s: decoders %d and %d of the group share a device (%s); a "
                                "device is used by one thread at a time",
                                what, j, i, vdn_dev_name(devs[i]));
        if (strcmp(config_json[i], config_json[0]))
            return vdn_fail(err, errlen,
                            "%s: decoder %d of the group has another config than decoder 0 (a "
                            "group decodes with copies of one VAE)",
                            what, i);
    }
    return 0;
}

void vae_group_init(vae_group *g, int n, int total, vdn_vae_progress_fn progress, void *user) {
    memset(g, 0, sizeof *g);
    g->n = n;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->changed, NULL);
    g->total = total;
    g->progress = progress;
    g->user = user;
    atomic_init(&g->stop, 0);
    g->share.n = n;
    g->err = vdn_xcalloc((size_t)n, sizeof *g->err);
}

void vae_group_done(vae_group *g, int member, int units) {
    pthread_mutex_lock(&g->mu);
    g->share.units[member] += units;
    for (int u = 0; u < units; u++) {
        g->done++;
        if (g->progress && g->progress(g->user, g->done, g->total) != 0 && !g->cancelled) {
            g->cancelled = 1; /* a cancel: everyone stops at the next unit */
            atomic_store(&g->stop, 1);
            pthread_cond_broadcast(&g->changed);
        }
    }
    pthread_mutex_unlock(&g->mu);
}

void vae_group_fail(vae_group *g, int member) {
    pthread_mutex_lock(&g->mu);
    g->share.failed |= 1ull << member;
    atomic_store(&g->stop, 1);
    pthread_cond_broadcast(&g->changed);
    pthread_mutex_unlock(&g->mu);
}

void vae_group_arrive(vae_group *g, int *left, int units) {
    pthread_mutex_lock(&g->mu);
    *left -= units;
    pthread_cond_broadcast(&g->changed);
    pthread_mutex_unlock(&g->mu);
}

int vae_group_wait_zero(vae_group *g, const int *left) {
    pthread_mutex_lock(&g->mu);
    while (*left > 0 && !atomic_load(&g->stop))
        pthread_cond_wait(&g->changed, &g->mu);
    const int stopped = *left > 0;
    pthread_mutex_unlock(&g->mu);
    return stopped;
}

typedef struct {
    int member;
    void (*fn)(int, void *);
    void *arg;
} member_thread;

static void *member_main(void *p) {
    const member_thread *t = p;
    t->fn(t->member, t->arg);
    return NULL;
}

void vae_group_run(vae_group *g, void (*fn)(int member, void *arg), void *arg) {
    pthread_t th[VDN_VAE_MAX_GROUP];
    int started[VDN_VAE_MAX_GROUP] = {0};
    member_thread t[VDN_VAE_MAX_GROUP];
    for (int i = 0; i < g->n; i++) {
        t[i] = (member_thread){i, fn, arg};
        if (i > 0) started[i] = pthread_create(&th[i], NULL, member_main, &t[i]) == 0;
    }
    fn(0, arg);
    for (int i = 1; i < g->n; i++)
        if (started[i]) pthread_join(th[i], NULL);
    for (int i = 1; i < g->n; i++)
        if (!started[i]) fn(i, arg);
}

int vae_group_finish(vae_group *g, vdn_dev *const *devs, vdn_vae_share *share, char *err,
                     size_t errlen) {
    int rc = 0;
    for (int i = 0; i < g->n; i++)
        if (g->share.failed >> i & 1) {
            if (g->n == 1)
                vdn_fail(err, errlen, "%s", g->err[i]);
            else
                vdn_fail(err, errlen, "%s (decoder %d of a group of %d, on %s)", g->err[i], i, g->n,
                         vdn_dev_name(devs[i]));
            rc = -1;
            break;
        }
    if (!rc && g->cancelled)
        rc = vdn_fail(err, errlen, "cancelled after %d of %d decoder units", g->done, g->total);
    if (share) *share = g->share;
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->changed);
    free(g->err);
    return rc;
}
