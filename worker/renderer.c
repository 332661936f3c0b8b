/* The renderer process: the engines of some of the worker's GPU slots and the attempts that run
 * on them (attempt.c, one thread each, as in the daemon before), relayed to the daemon over a
 * socket (relay.h). It never talks to the coordinator. */
#include "renderer.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "slots.h"
#include "vdn_util.h"

typedef struct {
    vdn_attempt *a;
    int sent_nfe; /* NFEs whose seconds went to the daemon */
} rjob;

typedef struct {
    int fd;
    vdn_relay_buf rb;
    cJSON *cfg_msg; /* cfg's strings point into it */
    vdn_relay_config cfg;
    vdn_slots slots;
    vdn_score_fn score;
    rjob run[VDN_MAX_GPUS];
    int nrun;
} renderer;

/* The slot of this renderer at worker-wide position pos, -1 when it has none there. */
static int local_slot(const renderer *r, int pos) {
    if (r->cfg.cpu) return pos == 0 ? 0 : -1;
    for (int i = 0; i < r->cfg.n; i++)
        if (r->cfg.pos[i] == pos) return i;
    return -1;
}

static int send_msg(renderer *r, cJSON *m) {
    int rc = vdn_relay_send(r->fd, m);
    cJSON_Delete(m);
    return rc;
}

/* An attempt that never ran here: its outcome at once. */
static void send_refusal(renderer *r, uint64_t attempt, const char *reason) {
    vdn_relay_state s = {.attempt_id = attempt,
                         .phase = VDN_ATTEMPT_FINISHED,
                         .retryable = 1,
                         .fault = VDN_FAULT_WORKER};
    snprintf(s.reason, sizeof s.reason, "%s", reason);
    s.store_retries = vdn_worker_store_retries();
    send_msg(r, vdn_relay_state_json(&s));
}

static void on_start(renderer *r, const cJSON *m) {
    char err[VDN_ERR_LEN];
    vdn_assignment s;
    int pos[VDN_MAX_GPUS], npos, prec;
    if (vdn_relay_start_parse(m, &s, pos, &npos, &prec, err, sizeof err)) {
        VDN_ERROR("renderer: %s", err);
        uint64_t id = 0;
        int go;
        vdn_relay_attempt_parse(m, &id, &go, err, sizeof err);
        if (id) send_refusal(r, id, "the renderer could not read the attempt");
        return;
    }
    const uint64_t id = s.attempt_id;
    vdn_attempt_gpus g = {.n = npos};
    for (int i = 0; i < npos; i++) {
        int k = local_slot(r, pos[i]);
        vdn_slot *sl = k < 0 ? NULL : &r->slots.s[k];
        if (!sl || !sl->by_precision[prec]) {
            snprintf(err, sizeof err, "slot %d: no %s engine in this renderer (%s)", pos[i],
                     vdn_precision_name((vdn_precision)prec),
                     sl && sl->fault[0] ? sl->fault : "not one of its slots");
            vdn_assignment_free(&s);
            send_refusal(r, id, err);
            return;
        }
        g.eng[i] = sl->by_precision[prec];
        g.index[i] = sl->index;
        g.dec[i] = sl->dec;
        if (r->cfg.decode_fault_index != -2 && sl->index == r->cfg.decode_fault_index)
            g.decode_fault |= 1ull << i;
    }
    vdn_slot *first = &r->slots.s[local_slot(r, pos[0])];
    g.dec_err = first->dec_err;
    s.snapshot_seconds = r->cfg.snapshot_seconds;
    s.snapshot_every = r->cfg.snapshot_every;
    s.data_roots = r->cfg.data_roots;
    s.n_data_roots = r->cfg.n_data_roots;
    s.score_fn = r->score;
    s.stale_scratch_folders = r->cfg.stale_scratch_folders;
    s.stale_scratch_bytes = r->cfg.stale_scratch_bytes;
    const int poison = r->cfg.has_poison && s.seed == r->cfg.poison_seed;
    vdn_attempt *a = vdn_attempt_start(&s, &g, &first->stores, r->cfg.scratch,
                                       r->cfg.upload_attempts, err, sizeof err);
    if (!a) {
        send_refusal(r, id, err);
        return;
    }
    a->poison = poison;
    if (r->cfg.fault_index != -2 && first->index == r->cfg.fault_index) a->inject_fault = 1;
    r->run[r->nrun++] = (rjob){.a = a};
}

static rjob *find_job(renderer *r, uint64_t attempt) {
    for (int i = 0; i < r->nrun; i++)
        if (r->run[i].a->spec.attempt_id == attempt) return &r->run[i];
    return NULL;
}

/* Progress, and the outcome once finished, of one attempt to the daemon. 1: it finished (freed,
 * its entry removed). */
static int relay_state(renderer *r, rjob *j) {
    vdn_attempt *a = j->a;
    uint64_t n;
    while (read(a->efd, &n, sizeof n) > 0) {
    }
    vdn_relay_state s = {.attempt_id = a->spec.attempt_id};
    pthread_mutex_lock(&a->mu);
    s.phase = a->phase;
    s.nfe_done = a->nfe_done;
    s.nfe_total = a->nfe_total;
    s.resumed_from = a->resumed_from;
    s.nfe_from = j->sent_nfe;
    if (s.nfe_done - s.nfe_from > 64) s.nfe_from = s.nfe_done - 64;
    if (s.nfe_from > s.nfe_done) s.nfe_from = s.nfe_done;
    for (int k = s.nfe_from; k < s.nfe_done; k++)
        s.nfe_seconds[s.n_nfe++] = a->nfe_seconds[k];
    snprintf(s.snap_key, sizeof s.snap_key, "%s", a->snap_key);
    s.snap_step = a->snap_step;
    const int finished = a->phase == VDN_ATTEMPT_FINISHED;
    if (finished) {
        s.ok = a->ok;
        s.retryable = a->retryable;
        s.fault = a->fault;
        s.store_op = a->store_op;
        s.gpu_fault = a->gpu_fault;
        s.gpu_fault_mask = a->gpu_fault_mask;
        snprintf(s.reason, sizeof s.reason, "%s", a->reason);
        s.record_json = a->record_json;
        s.outputs_store = a->outputs_store;
        s.snap_prefix = a->snap_prefix[0] ? a->snap_prefix : NULL;
        s.object_keys = a->object_keys;
        s.n_object_keys = a->n_object_keys;
    }
    pthread_mutex_unlock(&a->mu);
    j->sent_nfe = s.nfe_done;
    s.store_retries = vdn_worker_store_retries();
    send_msg(r, vdn_relay_state_json(&s)); /* the daemon gone: PDEATHSIG ends us */
    if (!finished) return 0;
    vdn_attempt_free(a);
    *j = r->run[--r->nrun];
    return 1;
}

static void on_message(renderer *r, const cJSON *m) {
    const char *t = vdn_relay_type(m);
    char err[VDN_ERR_LEN];
    if (!strcmp(t, "start")) {
        on_start(r, m);
        return;
    }
    uint64_t id;
    int go;
    if ((strcmp(t, "gate") && strcmp(t, "cancel")) ||
        vdn_relay_attempt_parse(m, &id, &go, err, sizeof err)) {
        VDN_WARN("renderer: ignoring a relay message \"%.40s\"", t);
        return;
    }
    rjob *j = find_job(r, id);
    if (!j) return; /* finished meanwhile */
    if (!strcmp(t, "cancel")) atomic_store(&j->a->cancel, 1);
    vdn_attempt_gate(j->a, !strcmp(t, "gate") && go);
}

/* Blocks until the daemon's first message, the config. */
static int read_config(renderer *r, char *err, size_t errlen) {
    for (;;) {
        cJSON *m = vdn_relay_next(&r->rb, err, errlen);
        if (m) {
            r->cfg_msg = m;
            return vdn_relay_config_parse(m, &r->cfg, err, errlen);
        }
        if (err[0]) return -1;
        struct pollfd p = {.fd = r->fd, .events = POLLIN};
        if (poll(&p, 1, -1) < 0 && errno != EINTR) return vdn_fail(err, errlen, "poll failed");
        if (vdn_relay_fill(r->fd, &r->rb) <= 0)
            return vdn_fail(err, errlen, "the worker daemon closed the relay before the config");
    }
}

static void open_engines(renderer *r, vdn_relay_hello *h) {
    char err[VDN_ERR_LEN];
    vdn_gpu_list gl = {.n = r->cfg.n};
    memcpy(gl.gpu, r->cfg.gpu, sizeof r->cfg.gpu[0] * (size_t)r->cfg.n);
    const vdn_slots_opts so = {.cpu = r->cfg.cpu,
                               .checkpoint = r->cfg.checkpoint,
                               .adapters = r->cfg.adapters,
                               .n_adapters = r->cfg.n_adapters,
                               .store_uri = r->cfg.store,
                               .store_retry_s = r->cfg.store_retry_s,
                               .text_precision = (vdn_precision)r->cfg.text_precision,
                               .text_prompts = {.keep = r->cfg.text_keep,
                                                .keep_free_gib = r->cfg.text_keep_free_gib,
                                                .test_encode_delay_ms = r->cfg.text_encode_delay_ms,
                                                /* jobs in the worker's other renderers missing
                                                 * the same text prompt wait for one encode
                                                 * (flight locks in the worker's scratch,
                                                 * removed as each flight lands) */
                                                .flight_dir = r->cfg.scratch},
                               .base_dir = r->cfg.base_dir,
                               .vae_precision = (vdn_precision)r->cfg.vae_precision,
                               .precisions = r->cfg.precisions,
                               .threads = r->cfg.threads,
                               .devices = r->cfg.pos};
    memset(h, 0, sizeof *h);
    if (vdn_slots_open(&r->slots, &gl, &so, err, sizeof err)) {
        snprintf(h->error, sizeof h->error, "%s", err);
        return;
    }
    vdn_engine *eng = vdn_slots_engine(&r->slots);
    snprintf(h->identity, sizeof h->identity, "%s", vdn_engine_identity(eng));
    snprintf(h->backend, sizeof h->backend, "%s", vdn_engine_backend_name(eng));
    h->precisions = vdn_slots_precisions(&r->slots);
    h->n = r->slots.n;
    for (int i = 0; i < r->slots.n; i++) {
        const vdn_slot *s = &r->slots.s[i];
        for (int p = 0; p < VDN_PRECISION_COUNT; p++)
            if (s->by_precision[p])
                h->slot[i].memory_used += vdn_engine_memory_used(s->by_precision[p]);
        h->slot[i].out_of_service = s->out_of_service;
        snprintf(h->slot[i].fault, sizeof h->slot[i].fault, "%s", s->fault);
        snprintf(h->slot[i].dec_err, sizeof h->slot[i].dec_err, "%s", s->dec_err);
    }
}

/* The daemon closed the relay: stop whatever runs (it is the daemon's to report, not ours) */
static void stop_all(renderer *r) {
    for (int i = 0; i < r->nrun; i++) {
        atomic_store(&r->run[i].a->cancel, 1);
        vdn_attempt_gate(r->run[i].a, 0);
    }
    for (int i = 0; i < r->nrun; i++)
        vdn_attempt_free(r->run[i].a);
    r->nrun = 0;
}

/* Acts on every whole message read so far. 0, or -1 when the stream is unreadable. */
static int act(renderer *r) {
    char err[VDN_ERR_LEN];
    cJSON *m;
    while ((m = vdn_relay_next(&r->rb, err, sizeof err)) != NULL) {
        on_message(r, m);
        cJSON_Delete(m);
    }
    if (err[0]) VDN_ERROR("renderer: %s", err);
    return err[0] ? -1 : 0;
}

static int serve(renderer *r) {
    if (act(r)) return 1; /* what came with the config (a start sent while we loaded) */
    for (;;) {
        struct pollfd p[VDN_MAX_GPUS + 1];
        uint64_t ids[VDN_MAX_GPUS];
        int n = 0, nrun = r->nrun;
        p[n++] = (struct pollfd){.fd = r->fd, .events = POLLIN};
        for (int i = 0; i < nrun; i++) {
            p[n++] = (struct pollfd){.fd = r->run[i].a->efd, .events = POLLIN};
            ids[i] = r->run[i].a->spec.attempt_id;
        }
        if (poll(p, (nfds_t)n, -1) < 0) {
            if (errno == EINTR) continue;
            VDN_ERROR("renderer: poll: %s", strerror(errno));
            return 1;
        }
        for (int i = 0; i < nrun; i++) {
            rjob *j = p[1 + i].revents ? find_job(r, ids[i]) : NULL;
            if (j) relay_state(r, j);
        }
        if (!p[0].revents) continue;
        int rc = vdn_relay_fill(r->fd, &r->rb);
        if (act(r)) return 1;
        if (rc <= 0) return 0; /* the daemon stops us (or is gone) */
    }
}

int vdn_worker_renderer(int fd, long parent, vdn_score_fn score) {
    /* die with the daemon, however it dies (set after the exec: the parent may have died in
     * between, then we are someone else's child already) */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if ((long)getppid() != parent) return 1;
    /* The daemon decides when we stop: a terminal's ^C or a SIGTERM to the process group is
     * for it to drain, not for us to die under its attempts. */
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    renderer r = {.fd = fd, .score = score};
    char err[VDN_ERR_LEN];
    if (read_config(&r, err, sizeof err)) {
        VDN_ERROR("renderer %d: %s", (int)getpid(), err);
        return 1;
    }
    vdn_relay_hello h;
    open_engines(&r, &h);
    cJSON *hm = vdn_relay_hello_json(&h);
    int sent = vdn_relay_send(fd, hm);
    cJSON_Delete(hm);
    int rc = h.error[0] ? 1 : sent ? 0 : serve(&r);
    stop_all(&r);
    if (!h.error[0]) vdn_slots_close(&r.slots);
    cJSON_Delete(r.cfg_msg);
    vdn_relay_buf_free(&r.rb);
    close(fd);
    return rc;
}
