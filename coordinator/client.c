/* The client library: endpoint resolution, one DEALER socket, request/reply with a request id
 * (stale replies from a timed-out request are skipped), typed calls. See client.h. */
#include "client.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "curve.h"
#include "vdn_util.h"
#include "wire.h"

struct vdn_client {
    void *ctx, *sock;
    int timeout_ms;
    uint64_t next_id;
    int last_code;
    char endpoint[256];
    char source[1200]; /* " (endpoint from ...)" or "" */
};

int vdn_parse_target(const char *s, char *kind, uint64_t *id, char *err, size_t errlen) {
    if (!s || !s[0]) return vdn_fail(err, errlen, "expected a batch (b12) or job (j34) id");
    char k = (char)tolower((unsigned char)s[0]);
    const char *digits = s + 1;
    if (!isdigit((unsigned char)s[0]) && k != 'b' && k != 'j')
        return vdn_fail(err, errlen, "'%s': expected a batch (b12) or job (j34) id", s);
    if (isdigit((unsigned char)s[0]))
        return vdn_fail(err, errlen, "'%s' is ambiguous: write b%s for a batch or j%s for a job", s,
                        s, s);
    uint64_t x = 0;
    if (!*digits) return vdn_fail(err, errlen, "'%s': expected digits after '%c'", s, s[0]);
    for (const char *p = digits; *p; p++) {
        if (!isdigit((unsigned char)*p) || x > (UINT64_MAX - 9) / 10)
            return vdn_fail(err, errlen, "'%s': expected %c followed by digits", s, k);
        x = x * 10 + (uint64_t)(*p - '0');
    }
    if (x == 0 || x > INT64_MAX) return vdn_fail(err, errlen, "'%s': ids start at 1", s);
    *kind = k;
    *id = x;
    return 0;
}

/* ------------------------------------------------------------------ vdn.conf */

static void trim(char *s) {
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = 0;
    size_t a = 0;
    while (s[a] && isspace((unsigned char)s[a]))
        a++;
    memmove(s, s + a, n - a + 1);
}

int vdn_client_conf_read(const char *path, vdn_client_conf *conf, char *err, size_t errlen) {
    memset(conf, 0, sizeof *conf);
    size_t len;
    char *text = vdn_read_file(path, &len, err, errlen);
    if (!text) return -1;
    int line = 0, rc = 0;
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        line++;
        char *hash = strchr(l, '#');
        if (hash) *hash = 0;
        trim(l);
        if (!l[0]) continue;
        char *eq = strchr(l, '=');
        if (!eq) {
            rc = vdn_fail(err, errlen, "%s:%d: expected 'key = value', got '%.80s'", path, line, l);
            break;
        }
        *eq = 0;
        char *k = l, *v = eq + 1;
        trim(k);
        trim(v);
        struct {
            const char *name;
            char *dst;
            size_t n;
        } map[] = {
            {"client_endpoint", conf->client_endpoint, sizeof conf->client_endpoint},
            {"coordinator", conf->client_endpoint, sizeof conf->client_endpoint},
            {"worker_endpoint", conf->worker_endpoint, sizeof conf->worker_endpoint},
            {"db", conf->db, sizeof conf->db},
            {"store", conf->store, sizeof conf->store},
            {"keys", conf->keys, sizeof conf->keys},
            {"key", conf->key, sizeof conf->key},
            {"coordinator_key", conf->coordinator_key, sizeof conf->coordinator_key},
        };
        for (size_t i = 0; i < sizeof map / sizeof *map; i++)
            if (!strcmp(k, map[i].name)) {
                if (strlen(v) >= map[i].n) {
                    rc = vdn_fail(err, errlen, "%s:%d: value of '%s' too long", path, line, k);
                    break;
                }
                /* relative paths in DIR/vdn.conf are relative to DIR */
                if (v[0] && v[0] != '/' && !strstr(v, "://") && strcmp(k, "client_endpoint") &&
                    strcmp(k, "coordinator") && strcmp(k, "worker_endpoint")) {
                    char dir[1024];
                    snprintf(dir, sizeof dir, "%s", path);
                    char *slash = strrchr(dir, '/');
                    if (slash) {
                        slash[1] = 0;
                        snprintf(map[i].dst, map[i].n, "%s%s", dir, v);
                        continue;
                    }
                }
                snprintf(map[i].dst, map[i].n, "%s", v);
            }
        if (rc) break;
    }
    free(text);
    return rc;
}

int vdn_client_resolve(const char *coordinator_flag, const char *dir_flag, const char *key_flag,
                       const char *coordinator_key_flag, const vdn_client_env *envs,
                       vdn_client_conf *conf, vdn_client_opts *opts, char *err, size_t errlen) {
    memset(opts, 0, sizeof *opts);
    memset(conf, 0, sizeof *conf);
    const vdn_client_env none = {0};
    if (!envs) envs = &none;
    const char *env_coord = envs->coordinator;
    int have_env_coord = env_coord && env_coord[0];
    const char *dir = dir_flag ? dir_flag : envs->dir;
    char path[2048] = "";
    if (dir && dir[0])
        snprintf(path, sizeof path, "%s/vdn.conf", dir);
    else if (!coordinator_flag && !have_env_coord && access("vdn.conf", F_OK) == 0)
        /* nothing says where the farm is: a `vdn up DIR` farm, run from inside DIR */
        snprintf(path, sizeof path, "./vdn.conf");
    if (path[0] && vdn_client_conf_read(path, conf, err, errlen)) return -1;
    const char *env;
    if (coordinator_flag) {
        snprintf(conf->client_endpoint, sizeof conf->client_endpoint, "%s", coordinator_flag);
        snprintf(conf->endpoint_source, sizeof conf->endpoint_source, "--coordinator");
    } else if (have_env_coord && !(dir_flag && conf->client_endpoint[0])) {
        snprintf(conf->client_endpoint, sizeof conf->client_endpoint, "%s", env_coord);
        snprintf(conf->endpoint_source, sizeof conf->endpoint_source, "$VDN_COORDINATOR");
    } else if (conf->client_endpoint[0]) {
        snprintf(conf->endpoint_source, sizeof conf->endpoint_source, "%s", path);
    }
    if (!conf->client_endpoint[0]) {
        snprintf(conf->client_endpoint, sizeof conf->client_endpoint, "tcp://127.0.0.1:5556");
        if (path[0])
            snprintf(conf->endpoint_source, sizeof conf->endpoint_source,
                     "the default (%s names no client_endpoint)", path);
        else
            snprintf(conf->endpoint_source, sizeof conf->endpoint_source,
                     "the default (no --coordinator, --dir, $VDN_COORDINATOR, $VDN_DIR or "
                     "./vdn.conf)");
    }
    if (key_flag)
        snprintf(conf->key, sizeof conf->key, "%s", key_flag);
    else if ((env = envs->key) && env[0] && !(dir_flag && conf->key[0]))
        snprintf(conf->key, sizeof conf->key, "%s", env);
    if (coordinator_key_flag)
        snprintf(conf->coordinator_key, sizeof conf->coordinator_key, "%s", coordinator_key_flag);
    else if ((env = envs->coordinator_key) && env[0] && !(dir_flag && conf->coordinator_key[0]))
        snprintf(conf->coordinator_key, sizeof conf->coordinator_key, "%s", env);
    if (conf->key[0] && !conf->coordinator_key[0])
        return vdn_fail(err, errlen,
                        "a client key (%s) needs the coordinator's public key too "
                        "(--coordinator-key FILE.pub or $VDN_COORDINATOR_KEY)",
                        conf->key);
    opts->endpoint = conf->client_endpoint;
    opts->key = conf->key[0] ? conf->key : NULL;
    opts->coordinator_key = conf->coordinator_key[0] ? conf->coordinator_key : NULL;
    opts->endpoint_source = conf->endpoint_source;
    return 0;
}

/* ------------------------------------------------------------------ connection */

vdn_client *vdn_client_open(const vdn_client_opts *o, char *err, size_t errlen) {
    vdn_client *c = vdn_xcalloc(1, sizeof *c);
    c->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 10000;
    c->next_id = ((uint64_t)getpid() << 32) | 1;
    snprintf(c->endpoint, sizeof c->endpoint, "%s", o->endpoint);
    if (o->endpoint_source && o->endpoint_source[0])
        snprintf(c->source, sizeof c->source, " (endpoint from %s)", o->endpoint_source);
    c->ctx = zmq_ctx_new();
    c->sock = zmq_socket(c->ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(c->sock, ZMQ_LINGER, &zero, sizeof zero);
    int64_t maxmsg = VDN_MAX_FRAME;
    zmq_setsockopt(c->sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    if (o->key && vdn_curve_client_setup(c->sock, o->key, o->coordinator_key, err, errlen))
        goto fail;
    if (zmq_connect(c->sock, o->endpoint) != 0) {
        vdn_fail(err, errlen, "cannot connect to %s%s: %s", o->endpoint, c->source,
                 zmq_strerror(zmq_errno()));
        goto fail;
    }
    return c;
fail:
    vdn_client_close(c);
    return NULL;
}

void vdn_client_close(vdn_client *c) {
    if (!c) return;
    if (c->sock) zmq_close(c->sock);
    if (c->ctx) zmq_ctx_term(c->ctx);
    free(c);
}

int vdn_client_error_code(const vdn_client *c) {
    return c->last_code;
}

/* Sends env, waits for the reply with the same request id and the expected payload. */
static Vdn__Envelope *call(vdn_client *c, Vdn__Envelope *env, int want, char *err, size_t errlen) {
    c->last_code = 0;
    env->has_request_id = 1;
    env->request_id = c->next_id++;
    char e2[VDN_ERR_LEN];
    if (vdn_wire_send(c->sock, NULL, 0, env, e2, sizeof e2)) {
        c->last_code = VDN_CLIENT_E_UNREACHABLE;
        vdn_fail(err, errlen, "%s: %s", c->endpoint, e2);
        return NULL;
    }
    double deadline = vdn_now() + c->timeout_ms / 1000.0;
    for (;;) {
        double left = deadline - vdn_now();
        zmq_pollitem_t it = {c->sock, 0, ZMQ_POLLIN, 0};
        int rc = left > 0 ? zmq_poll(&it, 1, (long)(left * 1000) + 1) : 0;
        if (rc < 0 && zmq_errno() == EINTR) continue;
        if (rc <= 0) {
            c->last_code = VDN_CLIENT_E_UNREACHABLE;
            vdn_fail(err, errlen,
                     "no reply from the coordinator at %s%s within %.1f s (is it running? with "
                     "CURVE: is this client's key authorized?)",
                     c->endpoint, c->source, c->timeout_ms / 1000.0);
            return NULL;
        }
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, c->sock, 0) < 0) {
            zmq_msg_close(&m);
            continue;
        }
        int more = zmq_msg_more(&m), code;
        Vdn__Envelope *r =
            vdn_wire_decode(zmq_msg_data(&m), zmq_msg_size(&m), &code, e2, sizeof e2);
        zmq_msg_close(&m);
        while (more) { /* a well-behaved coordinator sends one frame; drop any extra */
            zmq_msg_init(&m);
            zmq_msg_recv(&m, c->sock, 0);
            more = zmq_msg_more(&m);
            zmq_msg_close(&m);
        }
        if (!r) {
            c->last_code = VDN__ERROR__CODE__MALFORMED;
            vdn_fail(err, errlen, "reply from %s: %s", c->endpoint, e2);
            return NULL;
        }
        /* a reply to an earlier, timed-out request: not ours */
        if (r->has_request_id && r->request_id != env->request_id) {
            vdn__envelope__free_unpacked(r, NULL);
            continue;
        }
        if (r->payload_case == VDN__ENVELOPE__PAYLOAD_ERROR) {
            c->last_code = r->error->has_code ? (int)r->error->code : VDN__ERROR__CODE__INTERNAL;
            vdn_fail(err, errlen, "%s", r->error->message ? r->error->message : "error");
            vdn__envelope__free_unpacked(r, NULL);
            return NULL;
        }
        if ((int)r->payload_case != want) {
            c->last_code = VDN__ERROR__CODE__UNEXPECTED;
            vdn_fail(err, errlen, "coordinator answered %s, expected %s",
                     vdn_wire_payload_name(r->payload_case), vdn_wire_payload_name(want));
            vdn__envelope__free_unpacked(r, NULL);
            return NULL;
        }
        return r;
    }
}

/* Takes the payload out of the envelope so the caller frees just the reply. */
static void *detach(Vdn__Envelope *r, void **slot) {
    void *p = *slot;
    *slot = NULL;
    r->payload_case = VDN__ENVELOPE__PAYLOAD__NOT_SET;
    vdn__envelope__free_unpacked(r, NULL);
    return p;
}

void vdn_client_free(void *reply) {
    if (reply) protobuf_c_message_free_unpacked(reply, NULL);
}

int vdn_client_submit(vdn_client *c, const vdn_job_spec *jobs, int n, const char *tag, int priority,
                      const char *source, uint64_t *batch_id, uint64_t *job_ids, char *err,
                      size_t errlen) {
    return vdn_client_submit_flags(c, jobs, n, tag, priority, source, 0, batch_id, job_ids, err,
                                   errlen);
}

int vdn_client_submit_flags(vdn_client *c, const vdn_job_spec *jobs, int n, const char *tag,
                            int priority, const char *source, unsigned flags, uint64_t *batch_id,
                            uint64_t *job_ids, char *err, size_t errlen) {
    Vdn__RenderRequest *reqs = vdn_xcalloc((size_t)(n ? n : 1), sizeof *reqs);
    Vdn__RenderRequest **ptrs = vdn_xcalloc((size_t)(n ? n : 1), sizeof *ptrs);
    int32_t *prios = vdn_xcalloc((size_t)(n ? n : 1), sizeof *prios);
    char **tags = vdn_xcalloc((size_t)(n ? n : 1), sizeof *tags);
    int any_tag = 0, any_prio = 0;
    for (int i = 0; i < n; i++) {
        vdn_job_spec_to_proto(&jobs[i], &reqs[i]);
        ptrs[i] = &reqs[i];
        prios[i] = jobs[i].has_priority ? jobs[i].priority : priority;
        any_prio |= jobs[i].has_priority;
        tags[i] = jobs[i].tag ? jobs[i].tag : "";
        any_tag |= jobs[i].tag != NULL;
    }
    Vdn__SubmitRequest s = VDN__SUBMIT_REQUEST__INIT;
    s.n_jobs = (size_t)n;
    s.jobs = ptrs;
    s.tag = (char *)tag;
    s.has_priority = 1;
    s.priority = priority;
    s.source = (char *)source;
    if (flags & VDN_SUBMIT_ALLOW_WAIT) s.has_allow_wait = s.allow_wait = 1;
    if (any_prio) s.n_job_priorities = (size_t)n, s.job_priorities = prios;
    if (any_tag) s.n_job_tags = (size_t)n, s.job_tags = tags;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_SUBMIT;
    env.submit = &s;
    Vdn__Envelope *r = call(c, &env, VDN__ENVELOPE__PAYLOAD_SUBMIT_REPLY, err, errlen);
    free(reqs);
    free(ptrs);
    free(prios);
    free(tags);
    if (!r) return -1;
    *batch_id = r->submit_reply->batch_id;
    if (job_ids)
        for (int i = 0; i < n && (size_t)i < r->submit_reply->n_job_ids; i++)
            job_ids[i] = r->submit_reply->job_ids[i];
    vdn__envelope__free_unpacked(r, NULL);
    return 0;
}

Vdn__StatusReply *vdn_client_status(vdn_client *c, const char *target, char *err, size_t errlen) {
    Vdn__StatusRequest q = VDN__STATUS_REQUEST__INIT;
    q.target = (char *)target;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_STATUS;
    env.status = &q;
    Vdn__Envelope *r = call(c, &env, VDN__ENVELOPE__PAYLOAD_STATUS_REPLY, err, errlen);
    return r ? detach(r, (void **)&r->status_reply) : NULL;
}

Vdn__ListReply *vdn_client_list(vdn_client *c, const char *tag, int limit, char *err,
                                size_t errlen) {
    Vdn__ListRequest q = VDN__LIST_REQUEST__INIT;
    q.tag = (char *)tag;
    if (limit > 0) q.has_limit = 1, q.limit = limit;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_LIST;
    env.list = &q;
    Vdn__Envelope *r = call(c, &env, VDN__ENVELOPE__PAYLOAD_LIST_REPLY, err, errlen);
    return r ? detach(r, (void **)&r->list_reply) : NULL;
}

static int count_call2(vdn_client *c, Vdn__Envelope *env, int *count, int *quarantined, char *err,
                       size_t errlen) {
    Vdn__Envelope *r = call(c, env, VDN__ENVELOPE__PAYLOAD_COUNT_REPLY, err, errlen);
    if (!r) return -1;
    if (count) *count = r->count_reply->count;
    if (quarantined) *quarantined = r->count_reply->quarantined;
    vdn__envelope__free_unpacked(r, NULL);
    return 0;
}

static int count_call(vdn_client *c, Vdn__Envelope *env, int *count, char *err, size_t errlen) {
    return count_call2(c, env, count, NULL, err, errlen);
}

int vdn_client_cancel(vdn_client *c, const char *target, int *count, char *err, size_t errlen) {
    Vdn__CancelRequest q = VDN__CANCEL_REQUEST__INIT;
    q.target = (char *)target;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_CANCEL_REQ;
    env.cancel_req = &q;
    return count_call(c, &env, count, err, errlen);
}

int vdn_client_retry_force(vdn_client *c, const char *target, int force, int *count,
                           int *quarantined, char *err, size_t errlen) {
    Vdn__RetryRequest q = VDN__RETRY_REQUEST__INIT;
    q.target = (char *)target;
    if (force) q.has_force = 1, q.force = 1;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_RETRY;
    env.retry = &q;
    return count_call2(c, &env, count, quarantined, err, errlen);
}

int vdn_client_retry(vdn_client *c, const char *target, int *count, char *err, size_t errlen) {
    return vdn_client_retry_force(c, target, 0, count, NULL, err, errlen);
}

int vdn_client_drain(vdn_client *c, const char *worker_id, int undo, char *err, size_t errlen) {
    Vdn__DrainRequest q = VDN__DRAIN_REQUEST__INIT;
    q.worker_id = (char *)worker_id;
    if (undo) q.has_undo = 1, q.undo = 1;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_DRAIN;
    env.drain = &q;
    return count_call(c, &env, NULL, err, errlen);
}

Vdn__WorkersReply *vdn_client_workers(vdn_client *c, char *err, size_t errlen) {
    Vdn__WorkersRequest q = VDN__WORKERS_REQUEST__INIT;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_WORKERS;
    env.workers = &q;
    Vdn__Envelope *r = call(c, &env, VDN__ENVELOPE__PAYLOAD_WORKERS_REPLY, err, errlen);
    return r ? detach(r, (void **)&r->workers_reply) : NULL;
}

Vdn__LogsReply *vdn_client_logs(vdn_client *c, const char *target, char *err, size_t errlen) {
    Vdn__LogsRequest q = VDN__LOGS_REQUEST__INIT;
    q.target = (char *)target;
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    env.payload_case = VDN__ENVELOPE__PAYLOAD_LOGS;
    env.logs = &q;
    Vdn__Envelope *r = call(c, &env, VDN__ENVELOPE__PAYLOAD_LOGS_REPLY, err, errlen);
    return r ? detach(r, (void **)&r->logs_reply) : NULL;
}
