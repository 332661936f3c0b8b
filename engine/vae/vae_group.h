/* What the video and audio decoders share when one clip runs over a group of devices (vae.h "one
 * clip over several devices"): the member threads, the progress they report together, and the
 * first failure. Internal to vae/. */
#ifndef VDN_VAE_GROUP_H
#define VDN_VAE_GROUP_H

#include <pthread.h>
#include <stdatomic.h>

#include "vae.h"
#include "vdn_util.h"

typedef struct {
    int n;
    pthread_mutex_t mu;     /* guards everything below but stop */
    pthread_cond_t changed; /* a count of vae_group_arrive fell, or a member failed */
    int done, total;        /* progress units (tiles, channels) */
    vdn_vae_progress_fn progress;
    void *user;
    atomic_int stop; /* a member failed, or progress said stop: the others stop at their next
                        unit */
    int cancelled;   /* progress said stop (a cancel) */
    vdn_vae_share share;
    char (*err)[VDN_ERR_LEN]; /* each member's failure */
} vae_group;

/* "video VAE" / "audio VAE" for the messages; -1 with a message when n is out of range, the
 * devices are not distinct or a member's config (config_json) differs from member 0's. */
int vae_group_check(int n, vdn_dev *const *devs, char *const *config_json, const char *what,
                    char *err, size_t errlen);
void vae_group_init(vae_group *g, int n, int total, vdn_vae_progress_fn progress, void *user);
/* member finished units of work: counted in its share and reported, one unit at a time */
void vae_group_done(vae_group *g, int member, int units);
/* member failed (its message in g->err[member]); the others stop at their next unit */
void vae_group_fail(vae_group *g, int member);
/* units of work arrived for another member: *left -= units under the lock, waking waiters */
void vae_group_arrive(vae_group *g, int *left, int units);
/* wait until *left (counted down by vae_group_arrive) is 0: 0, or 1 when a member failed first */
int vae_group_wait_zero(vae_group *g, const int *left);
/* fn(member, arg) for every member, each on a thread of its own (member 0 on the caller's). A
 * thread that cannot start runs its member on the caller's thread after member 0: a device is
 * still used by one thread at a time. */
void vae_group_run(vae_group *g, void (*fn)(int member, void *arg), void *arg);
/* The outcome: 0, or -1 with the lowest failed member's message (naming its device and place
 * when n > 1). Copies the shares to *share (NULL: none) and frees g. */
int vae_group_finish(vae_group *g, vdn_dev *const *devs, vdn_vae_share *share, char *err,
                     size_t errlen);

#endif
