/* Envelope framing shared by the coordinator, the worker and the client library.
 * Every ZeroMQ message body is one vdn.Envelope (proto/vdn.proto). On ROUTER sockets a message
 * is [peer identity][body]; on DEALER sockets it is [body]. Decoding checks the protocol
 * version and that a payload is set, so callers only ever see well-formed envelopes. */
#ifndef VDN_WIRE_H
#define VDN_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "vdn.pb-c.h"

#define VDN_PROTOCOL_VERSION 1
#define VDN_MAX_FRAME (64u << 20) /* larger frames are refused before decoding */

/* Decode one body. NULL on failure with *code = VDN__ERROR__CODE__MALFORMED or __BAD_VERSION
 * and a message naming what was wrong. Free with vdn__envelope__free_unpacked(env, NULL). */
Vdn__Envelope *vdn_wire_decode(const void *buf, size_t len, int *code, char *err, size_t errlen);

/* Pack into a malloc'd buffer; sets protocol_version. */
uint8_t *vdn_wire_encode(Vdn__Envelope *env, size_t *len);

/* Send [identity frame when id != NULL] + body. 0 or -1 with the reason in err and errno kept
 * (EHOSTUNREACH on a ROUTER_MANDATORY socket: the peer is gone; EAGAIN: its queue is full).
 * Sends with an identity (ROUTER) never block. */
int vdn_wire_send(void *sock, const void *id, size_t idlen, Vdn__Envelope *env, char *err,
                  size_t errlen);

/* Convenience: send an ERROR reply. */
int vdn_wire_send_error(void *sock, const void *id, size_t idlen, uint64_t request_id, int code,
                        uint64_t attempt_id, const char *message);

/* "READY", "HEARTBEAT", ... for logs. */
const char *vdn_wire_payload_name(int payload_case);
/* "BAD_VERSION", ... */
const char *vdn_wire_error_name(int code);

#endif
