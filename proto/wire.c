/* Envelope encode/decode with the protocol version check; see wire.h. */
#include "wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "vdn_util.h"

Vdn__Envelope *vdn_wire_decode(const void *buf, size_t len, int *code, char *err, size_t errlen) {
    *code = VDN__ERROR__CODE__MALFORMED;
    if (len == 0) {
        vdn_fail(err, errlen, "empty frame: expected a vdn.Envelope");
        return NULL;
    }
    if (len > VDN_MAX_FRAME) {
        vdn_fail(err, errlen, "frame of %zu bytes exceeds the %u byte limit", len, VDN_MAX_FRAME);
        return NULL;
    }
    Vdn__Envelope *env = vdn__envelope__unpack(NULL, len, buf);
    if (!env) {
        vdn_fail(err, errlen,
                 "malformed frame (%zu bytes): not a vdn.Envelope (truncated or corrupt)", len);
        return NULL;
    }
    if (!env->has_protocol_version) {
        *code = VDN__ERROR__CODE__BAD_VERSION;
        vdn_fail(err, errlen, "envelope has no protocol_version: expected %d",
                 VDN_PROTOCOL_VERSION);
        vdn__envelope__free_unpacked(env, NULL);
        return NULL;
    }
    if (env->protocol_version != VDN_PROTOCOL_VERSION) {
        *code = VDN__ERROR__CODE__BAD_VERSION;
        vdn_fail(err, errlen, "unsupported protocol_version %u: this side speaks %d",
                 env->protocol_version, VDN_PROTOCOL_VERSION);
        vdn__envelope__free_unpacked(env, NULL);
        return NULL;
    }
    if (env->payload_case == VDN__ENVELOPE__PAYLOAD__NOT_SET) {
        vdn_fail(err, errlen, "envelope has no payload: expected one of READY, HEARTBEAT, ...");
        vdn__envelope__free_unpacked(env, NULL);
        return NULL;
    }
    *code = 0;
    return env;
}

uint8_t *vdn_wire_encode(Vdn__Envelope *env, size_t *len) {
    env->has_protocol_version = 1;
    env->protocol_version = VDN_PROTOCOL_VERSION;
    size_t n = vdn__envelope__get_packed_size(env);
    uint8_t *buf = vdn_xmalloc(n ? n : 1);
    *len = vdn__envelope__pack(env, buf);
    return buf;
}

int vdn_wire_send(void *sock, const void *id, size_t idlen, Vdn__Envelope *env, char *err,
                  size_t errlen) {
    size_t len;
    uint8_t *buf = vdn_wire_encode(env, &len);
    /* A ROUTER (id given) must never block its loop on one peer that stopped reading: with
     * ZMQ_ROUTER_MANDATORY a full queue is EAGAIN and a vanished peer EHOSTUNREACH. */
    int dontwait = id ? ZMQ_DONTWAIT : 0;
    int rc = 0, e = 0;
    if (id && zmq_send(sock, id, idlen, ZMQ_SNDMORE | dontwait) < 0) rc = -1, e = errno;
    if (!rc && zmq_send(sock, buf, len, dontwait) < 0) rc = -1, e = errno;
    free(buf);
    if (rc) {
        vdn_fail(err, errlen, "send %s: %s", vdn_wire_payload_name(env->payload_case),
                 e == EAGAIN ? "peer is not reading (send queue full)" : zmq_strerror(e));
        errno = e; /* callers tell EHOSTUNREACH (peer gone) from the rest */
        return -1;
    }
    return 0;
}

int vdn_wire_send_error(void *sock, const void *id, size_t idlen, uint64_t request_id, int code,
                        uint64_t attempt_id, const char *message) {
    Vdn__Envelope env = VDN__ENVELOPE__INIT;
    Vdn__Error e = VDN__ERROR__INIT;
    e.has_code = 1;
    e.code = code;
    e.message = (char *)message;
    if (attempt_id) {
        e.has_attempt_id = 1;
        e.attempt_id = attempt_id;
    }
    if (request_id) {
        env.has_request_id = 1;
        env.request_id = request_id;
    }
    env.payload_case = VDN__ENVELOPE__PAYLOAD_ERROR;
    env.error = &e;
    char err[VDN_ERR_LEN];
    return vdn_wire_send(sock, id, idlen, &env, err, sizeof err);
}

const char *vdn_wire_payload_name(int c) {
    switch (c) {
    case VDN__ENVELOPE__PAYLOAD_READY:
        return "READY";
    case VDN__ENVELOPE__PAYLOAD_HEARTBEAT:
        return "HEARTBEAT";
    case VDN__ENVELOPE__PAYLOAD_ASSIGN:
        return "ASSIGN";
    case VDN__ENVELOPE__PAYLOAD_PROGRESS:
        return "PROGRESS";
    case VDN__ENVELOPE__PAYLOAD_RESULT:
        return "RESULT";
    case VDN__ENVELOPE__PAYLOAD_FAIL:
        return "FAIL";
    case VDN__ENVELOPE__PAYLOAD_CANCEL:
        return "CANCEL";
    case VDN__ENVELOPE__PAYLOAD_ACK:
        return "ACK";
    case VDN__ENVELOPE__PAYLOAD_DISCONNECT:
        return "DISCONNECT";
    case VDN__ENVELOPE__PAYLOAD_SUBMIT:
        return "SUBMIT";
    case VDN__ENVELOPE__PAYLOAD_SUBMIT_REPLY:
        return "SUBMIT_REPLY";
    case VDN__ENVELOPE__PAYLOAD_STATUS:
        return "STATUS";
    case VDN__ENVELOPE__PAYLOAD_STATUS_REPLY:
        return "STATUS_REPLY";
    case VDN__ENVELOPE__PAYLOAD_LIST:
        return "LIST";
    case VDN__ENVELOPE__PAYLOAD_LIST_REPLY:
        return "LIST_REPLY";
    case VDN__ENVELOPE__PAYLOAD_CANCEL_REQ:
        return "CANCEL_REQ";
    case VDN__ENVELOPE__PAYLOAD_RETRY:
        return "RETRY";
    case VDN__ENVELOPE__PAYLOAD_COUNT_REPLY:
        return "COUNT_REPLY";
    case VDN__ENVELOPE__PAYLOAD_DRAIN:
        return "DRAIN";
    case VDN__ENVELOPE__PAYLOAD_WORKERS:
        return "WORKERS";
    case VDN__ENVELOPE__PAYLOAD_WORKERS_REPLY:
        return "WORKERS_REPLY";
    case VDN__ENVELOPE__PAYLOAD_LOGS:
        return "LOGS";
    case VDN__ENVELOPE__PAYLOAD_LOGS_REPLY:
        return "LOGS_REPLY";
    case VDN__ENVELOPE__PAYLOAD_ERROR:
        return "ERROR";
    default:
        return "UNKNOWN";
    }
}

const char *vdn_wire_error_name(int code) {
    const ProtobufCEnumValue *v =
        protobuf_c_enum_descriptor_get_value(&vdn__error__code__descriptor, code);
    return v ? v->name : "UNKNOWN_ERROR";
}
