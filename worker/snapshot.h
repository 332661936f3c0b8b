/* Sampler snapshots as files (docs/cluster.md "Resumable renders"): a safetensors file with the
 * render state's two latent tensors, its step, and a fingerprint of everything that must match
 * for a continuation to equal an uninterrupted render bit for bit (the request, the checkpoint
 * identity, the backend). A snapshot that does not match is not resumed from. */
#ifndef VDN_WORKER_SNAPSHOT_H
#define VDN_WORKER_SNAPSHOT_H

#include <stddef.h>

#include "attempt.h"
#include "engine.h"
#include "store.h"

/* The fingerprint of a job's render on this engine (written into buf). */
void vdn_snapshot_fingerprint(const vdn_assignment *s, const char *identity, const char *backend,
                              char *buf, size_t len);

int vdn_snapshot_write(const char *path, const vdn_render_state *st, const char *fingerprint,
                       char *err, size_t errlen);

/* Reads a snapshot into st (video/audio malloc'd; free with vdn_snapshot_free). -1 with a reason
 * when the file is not a snapshot, is damaged, or belongs to another render (fingerprint). */
int vdn_snapshot_read(const char *path, const char *fingerprint, vdn_render_state *st, char *err,
                      size_t errlen);
/* The same over bytes the caller keeps alive (fuzzing); label names them in errors. */
int vdn_snapshot_read_mem(const void *buf, size_t len, const char *label, const char *fingerprint,
                          vdn_render_state *st, char *err, size_t errlen);
void vdn_snapshot_free(vdn_render_state *st);

/* A done job's snapshots (every key under prefix, KEY.snapshots/) deleted from the store at uri,
 * once the coordinator has accepted the result: until then a worker that dies after uploading
 * leaves the newest snapshot for the next attempt to resume from. Opens its own store handle (it
 * runs on a thread of its own, off the worker's loop); failures are logged. */
void vdn_snapshots_delete(const char *uri, const vdn_store_opts *opts, const char *prefix,
                          unsigned long long job);

#endif
