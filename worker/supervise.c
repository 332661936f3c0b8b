/* The worker daemon's renderer processes (renderer.h; docs/cluster.md "Crash blame"): one per
 * slot at start, regrouped for a k-GPU job, restarted after a crash (the attempts in it fail
 * with the fault CRASH), their pids in SCRATCH/renderers.json. Runs on the daemon's main loop. */
#include <errno.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon.h"
#include "vdn_util.h"

static const char *slot_name(const worker *w, int pos, char *buf, size_t len) {
    const vdn_slot *s = &w->slots.s[pos];
    if (s->index < 0)
        snprintf(buf, len, "cpu");
    else
        snprintf(buf, len, "gpu %d", s->index);
    return buf;
}

/* SCRATCH/renderers.json: each slot's renderer pid, for tests and operators (docs/cluster.md
 * "Crash blame"): {"worker": ID, "slots": [{"slot", "gpu", "pid", "group": [slots]}]}; pid 0:
 * none (out of service). */
static void write_renderers(worker *w) {
    cJSON *o = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(o, "slots");
    cJSON_AddStringToObject(o, "worker", w->o->id);
    for (int i = 0; i < w->slots.n; i++) {
        cJSON *e = cJSON_CreateObject(), *g = cJSON_AddArrayToObject(e, "group");
        int r = w->slot_rend[i];
        cJSON_AddNumberToObject(e, "slot", i);
        cJSON_AddNumberToObject(e, "gpu", w->slots.s[i].index);
        cJSON_AddNumberToObject(e, "pid", r >= 0 ? w->rend[r].pid : 0);
        for (int k = 0; r >= 0 && k < w->rend[r].npos; k++)
            cJSON_AddItemToArray(g, cJSON_CreateNumber(w->rend[r].pos[k]));
        cJSON_AddItemToArray(a, e);
    }
    char *text = cJSON_Print(o), path[2000], err[VDN_ERR_LEN];
    cJSON_Delete(o);
    snprintf(path, sizeof path, "%s/renderers.json", w->scratch);
    if (vdn_write_file_atomic(path, text, strlen(text), err, sizeof err))
        VDN_WARN("worker %s: %s", w->o->id, err);
    free(text);
}

/* A renderer over slots pos[]; its index, or -1 (logged; the slots then have none). */
static int spawn_renderer(worker *w, const int *pos, int npos, const char *why) {
    char err[VDN_ERR_LEN], nm[32];
    int r = 0;
    while (r < VDN_MAX_GPUS && w->rend[r].pid > 0)
        r++;
    VDN_ASSERT(r < VDN_MAX_GPUS);
    if (vdn_renderer_spawn(&w->rend[r], w->renderer_exe, w->renderer_argv, pos, npos, &w->rcfg,
                           &w->gpus, err, sizeof err)) {
        VDN_ERROR("worker %s: cannot start a renderer for slot %d: %s", w->o->id, pos[0], err);
        for (int i = 0; i < npos; i++)
            w->slot_rend[pos[i]] = -1;
        return -1;
    }
    for (int i = 0; i < npos; i++) {
        w->slot_rend[pos[i]] = r;
        VDN_INFO("worker %s: renderer slot %d (%s) pid %d started%s%s", w->o->id, pos[i],
                 slot_name(w, pos[i], nm, sizeof nm), (int)w->rend[r].pid, why ? ": " : "",
                 why ? why : "");
    }
    write_renderers(w);
    return r;
}

/* Slots pos[] leave service: no renderer will run on them until the worker restarts. */
static void slots_out(worker *w, const int *pos, int npos, const char *reason) {
    for (int i = 0; i < npos; i++) {
        w->slot_rend[pos[i]] = -1;
        vdn_slot_fault(&w->slots, pos[i], w->o->id, reason);
    }
    write_renderers(w);
    daemon_send_heartbeat(w);
}

/* The renderer for a job on j's slots: the one over exactly them, or a new one (the renderers
 * it replaces must be idle: their weights load again, logged). -1 with why. */
int renderers_for(worker *w, running *j, uint64_t attempt, char *why, size_t len) {
    int r0 = w->slot_rend[j->pos[0]];
    if (r0 >= 0 && w->rend[r0].npos == j->npos) {
        int same = 1;
        for (int i = 0; i < j->npos; i++)
            same &= w->slot_rend[j->pos[i]] == r0;
        if (same) return r0;
    }
    int old[VDN_MAX_GPUS], nold = 0, left[VDN_MAX_GPUS], nleft = 0;
    for (int i = 0; i < j->npos; i++) {
        int r = w->slot_rend[j->pos[i]], seen = 0;
        for (int k = 0; k < nold; k++)
            seen |= old[k] == r;
        if (r < 0 || seen) continue;
        if (w->rend[r].attempts) {
            snprintf(why, len,
                     "GPU %d shares a renderer with GPUs busy with another attempt; "
                     "regrouping waits for it",
                     w->slots.s[j->pos[i]].index);
            return -1;
        }
        old[nold++] = r;
    }
    char gl[256] = "";
    for (int i = 0; i < j->npos; i++)
        snprintf(gl + strlen(gl), sizeof gl - strlen(gl), "%s%d", i ? "," : "",
                 w->slots.s[j->pos[i]].index);
    VDN_INFO("worker %s: attempt %llu: slots regrouped, one renderer over GPU(s) %s (their "
             "engines load again)",
             w->o->id, (unsigned long long)attempt, gl);
    for (int k = 0; k < nold; k++) {
        vdn_renderer *r = &w->rend[old[k]];
        for (int i = 0; i < r->npos; i++) {
            int mine = 0;
            for (int q = 0; q < j->npos; q++)
                mine |= j->pos[q] == r->pos[i];
            if (!mine) left[nleft++] = r->pos[i];
            w->slot_rend[r->pos[i]] = -1;
        }
        w->store_retries_gone += r->store_retries;
        /* idle: 2 s to close its engines, then SIGKILL (the main loop, heartbeats included, waits)
         */
        vdn_renderer_stop(r, 2.0, NULL, 0);
    }
    for (int i = 0; i < nleft; i++) /* the slots left over render alone again */
        if (spawn_renderer(w, &left[i], 1, "regrouped") < 0)
            slots_out(w, &left[i], 1, "its renderer could not be started");
    int r = spawn_renderer(w, j->pos, j->npos, "regrouped");
    if (r < 0) {
        slots_out(w, j->pos, j->npos, "its renderer could not be started");
        snprintf(why, len, "the renderer for GPU(s) %s could not be started", gl);
    }
    return r;
}

/* Its engines loaded (or not). */
static void on_hello(worker *w, int ri, const cJSON *m) {
    vdn_renderer *r = &w->rend[ri];
    vdn_relay_hello h;
    char err[VDN_ERR_LEN];
    if (vdn_relay_hello_parse(m, &h, err, sizeof err)) {
        snprintf(h.error, sizeof h.error, "%s", err);
        h.n = 0;
    }
    if (h.error[0]) { /* it exits: on_renderer_gone takes the slots out of service */
        VDN_ERROR("worker %s: renderer pid %d: engines did not load: %s", w->o->id, (int)r->pid,
                  h.error);
        return;
    }
    r->hello = 1;
    if (!w->identity[0]) {
        snprintf(w->identity, sizeof w->identity, "%s", h.identity);
        snprintf(w->backend, sizeof w->backend, "%s", h.backend);
    }
    w->slots.precisions = h.precisions;
    for (int i = 0; i < h.n && i < r->npos; i++) {
        vdn_slot *s = &w->slots.s[r->pos[i]];
        s->memory_used = h.slot[i].memory_used;
        if (h.slot[i].out_of_service && !s->out_of_service) {
            s->out_of_service = 1;
            snprintf(s->fault, sizeof s->fault, "%s", h.slot[i].fault);
        }
    }
    VDN_DEBUG("worker %s: renderer pid %d ready in %.1f s", w->o->id, (int)r->pid,
              vdn_now() - r->started);
}

static void on_state(worker *w, int ri, const cJSON *m) {
    vdn_relay_state s;
    char err[VDN_ERR_LEN];
    if (vdn_relay_state_parse(m, &s, err, sizeof err)) {
        VDN_ERROR("worker %s: renderer pid %d: %s", w->o->id, (int)w->rend[ri].pid, err);
        return;
    }
    w->rend[ri].store_retries = s.store_retries;
    running *j = daemon_find_run(w, s.attempt_id);
    if (!j || j->a->rend != ri) {
        vdn_relay_state_free(&s);
        return;
    }
    proxy *a = j->a;
    if (s.nfe_done > a->nfe_cap) {
        int cap = s.nfe_total > s.nfe_done ? s.nfe_total : s.nfe_done;
        a->nfe_seconds = realloc(a->nfe_seconds, (size_t)cap * sizeof *a->nfe_seconds);
        VDN_ASSERT(a->nfe_seconds);
        memset(a->nfe_seconds + a->nfe_cap, 0, (size_t)(cap - a->nfe_cap) * sizeof(double));
        a->nfe_cap = cap;
    }
    for (int k = 0; k < s.n_nfe; k++)
        a->nfe_seconds[s.nfe_from + k] = s.nfe_seconds[k];
    a->phase = s.phase;
    a->nfe_done = s.nfe_done;
    a->nfe_total = s.nfe_total;
    a->resumed_from = s.resumed_from;
    a->snap_step = s.snap_step;
    snprintf(a->snap_key, sizeof a->snap_key, "%s", s.snap_key);
    if (s.phase == VDN_ATTEMPT_FINISHED) {
        a->out = s; /* takes its strings */
    } else {
        vdn_relay_state_free(&s);
    }
    daemon_attempt_event(w, j);
}

static int rm_tree(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

/* Its relay reached end of file: the process ended. The attempts in it fail (CRASH when it died
 * under them; a renderer that never loaded is this worker's), and it is started again over the
 * same slots, unless it never loaded or keeps dying idle: then its slots leave service. */
static void on_renderer_gone(worker *w, int ri) {
    vdn_renderer *r = &w->rend[ri];
    char how[160], nm[32];
    const pid_t pid = r->pid;
    const int loaded = r->hello, had = r->attempts, crashed = vdn_renderer_reap(r, how, sizeof how);
    int pos[VDN_MAX_GPUS], npos = r->npos;
    memcpy(pos, r->pos, sizeof pos);
    w->store_retries_gone += r->store_retries;
    r->store_retries = 0;
    for (int i = w->nrun - 1; i >= 0; i--) {
        running *j = &w->run[i];
        if (j->a->rend != ri) continue;
        proxy *a = j->a;
        vdn_relay_state *o = &a->out;
        o->phase = VDN_ATTEMPT_FINISHED;
        o->ok = 0;
        o->retryable = 1;
        o->fault = loaded ? VDN_FAULT_CRASH : VDN_FAULT_WORKER;
        if (loaded && a->nfe_total > 0)
            snprintf(o->reason, sizeof o->reason, "renderer %s: %s at NFE %d/%d",
                     crashed ? "crashed" : "ended", how, a->nfe_done, a->nfe_total);
        else if (loaded)
            snprintf(o->reason, sizeof o->reason, "renderer %s: %s before any NFE was reported",
                     crashed ? "crashed" : "ended", how);
        else
            snprintf(o->reason, sizeof o->reason, "renderer died loading the checkpoint: %s", how);
        char dir[2100]; /* what it left in scratch */
        snprintf(dir, sizeof dir, "%s/a%llu", w->scratch, (unsigned long long)a->spec.attempt_id);
        nftw(dir, rm_tree, 16, FTW_DEPTH | FTW_PHYS);
        daemon_finish_run(w, j);
    }
    r->attempts = 0;
    VDN_WARN("worker %s: renderer pid %d of slot(s) %d%s (%s) %s: %s; %d attempt(s) in it failed",
             w->o->id, (int)pid, pos[0], npos > 1 ? ",..." : "",
             slot_name(w, pos[0], nm, sizeof nm), crashed ? "died" : "ended", how, had);
    r->idle_deaths = had ? 0 : r->idle_deaths + 1;
    const int idle_deaths = r->idle_deaths;
    for (int i = 0; i < npos; i++)
        w->slot_rend[pos[i]] = -1;
    if (w->terms) { /* shutting down: no new work comes */
        write_renderers(w);
        return;
    }
    char reason[300];
    if (!loaded || idle_deaths >= 3) {
        snprintf(reason, sizeof reason, "its renderer %s: %s",
                 loaded ? "keeps dying idle" : "did not load the checkpoint", how);
        slots_out(w, pos, npos, reason);
        return;
    }
    snprintf(reason, sizeof reason, "restarted after %s", how);
    int nr = spawn_renderer(w, pos, npos, reason);
    if (nr < 0) {
        slots_out(w, pos, npos, "its renderer could not be restarted");
        return;
    }
    w->rend[nr].idle_deaths = idle_deaths;
}

/* What one renderer's relay has for us. */
void renderers_readable(worker *w, int ri) {
    vdn_renderer *r = &w->rend[ri];
    int rc = vdn_relay_fill(r->fd, &r->rb);
    char err[VDN_ERR_LEN];
    cJSON *m;
    while (r->pid > 0 && (m = vdn_relay_next(&r->rb, err, sizeof err)) != NULL) {
        const char *t = vdn_relay_type(m);
        if (!strcmp(t, "hello"))
            on_hello(w, ri, m);
        else if (!strcmp(t, "state"))
            on_state(w, ri, m);
        else
            VDN_WARN("worker %s: renderer pid %d: unknown relay message \"%.40s\"", w->o->id,
                     (int)r->pid, t);
        cJSON_Delete(m);
    }
    if (r->pid > 0 && err[0]) { /* a stream we cannot read further: the renderer is of no use */
        VDN_ERROR("worker %s: renderer pid %d: %s; stopping it", w->o->id, (int)r->pid, err);
        kill(r->pid, SIGKILL);
        rc = 0;
    }
    if (r->pid > 0 && rc <= 0) on_renderer_gone(w, ri);
}

/* Starts a renderer per slot and waits until each has loaded its engines or died. 0, or -1
 * with the first error when none loaded. */
int renderers_start(worker *w, char *err, size_t errlen) {
    const vdn_worker_opts *o = w->o;
    vdn_relay_config *c = &w->rcfg;
    c->checkpoint = o->checkpoint;
    for (int i = 0; i < o->n_adapters && i < 16; i++)
        c->adapters[c->n_adapters++] = o->adapters[i];
    c->store = o->store;
    c->store_retry_s = o->store_retry_s;
    c->scratch = w->scratch;
    c->cpu = w->slots.s[0].index < 0;
    c->text_precision = (int)o->text_precision;
    c->text_keep = o->text_prompts.keep;
    c->text_keep_free_gib = o->text_prompts.keep_free_gib;
    c->text_encode_delay_ms = o->text_prompts.test_encode_delay_ms;
    c->base_dir = o->base_dir;
    c->vae_precision = (int)o->vae_precision;
    c->precisions = o->precisions;
    c->threads = o->threads;
    c->upload_attempts = o->upload_attempts;
    c->snapshot_seconds = o->snapshot_seconds;
    c->snapshot_every = o->snapshot_every;
    for (int i = 0; i < o->n_data_roots && i < 16; i++)
        c->data_roots[c->n_data_roots++] = o->data_roots[i];
    w->renderer_exe = o->renderer_exe;
    w->renderer_argv = o->renderer_argv;
    if (!w->renderer_exe || !w->renderer_argv || !w->renderer_argv[0])
        return vdn_fail(err, errlen, "no command to start renderers with (renderer_argv)");
    for (int i = 0; i < w->slots.n; i++)
        if (spawn_renderer(w, &i, 1, NULL) < 0) slots_out(w, &i, 1, "its renderer did not start");
    /* they load in parallel (the disk and the page cache are shared) */
    for (;;) {
        struct pollfd p[VDN_MAX_GPUS];
        int idx[VDN_MAX_GPUS], n = 0;
        for (int r = 0; r < VDN_MAX_GPUS; r++)
            if (w->rend[r].pid > 0 && !w->rend[r].hello) {
                p[n] = (struct pollfd){.fd = w->rend[r].fd, .events = POLLIN};
                idx[n++] = r;
            }
        if (!n) break;
        if (poll(p, (nfds_t)n, -1) < 0 && errno != EINTR)
            return vdn_fail(err, errlen, "poll: %s", strerror(errno));
        for (int i = 0; i < n; i++)
            if (p[i].revents) renderers_readable(w, idx[i]);
    }
    int ok = 0;
    for (int i = 0; i < w->slots.n; i++)
        ok += !w->slots.s[i].out_of_service;
    if (!ok)
        return vdn_fail(err, errlen, "no renderer loaded it (%s)",
                        w->slots.s[0].fault[0] ? w->slots.s[0].fault : "see above");
    return 0;
}

/* Stops every renderer: each cancels what still runs in it and exits (all asked at once, then
 * waited for). */
void renderers_stop(worker *w) {
    for (int r = 0; r < VDN_MAX_GPUS; r++)
        if (w->rend[r].pid > 0 && w->rend[r].fd >= 0) {
            close(w->rend[r].fd);
            w->rend[r].fd = -1;
        }
    for (int r = 0; r < VDN_MAX_GPUS; r++)
        if (w->rend[r].pid > 0) {
            char how[160];
            pid_t pid = w->rend[r].pid;
            vdn_renderer_stop(&w->rend[r], 30.0, how, sizeof how);
            VDN_DEBUG("worker %s: renderer pid %d stopped (%s)", w->o->id, (int)pid, how);
        }
    for (int i = 0; i < w->slots.n; i++)
        w->slot_rend[i] = -1;
}
