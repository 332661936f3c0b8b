/* ZeroMQ CURVE keys and socket setup, shared by coordinator, worker and clients.
 *
 * Key files (written by `vdn keygen --out DIR/NAME`):
 *   NAME.key  the 40-character Z85 secret key and a newline, mode 0600
 *   NAME.pub  the 40-character Z85 public key and a newline
 * Coordinator --keys DIR holds coordinator.key, coordinator.pub, authorized_workers/ *.pub and
 * authorized_clients/ *.pub (docs/protocol.md). Secret keys are never logged. */
#ifndef VDN_CURVE_H
#define VDN_CURVE_H

#include <stddef.h>

#define VDN_Z85_KEY_LEN 40

/* 1 when libzmq was built with CURVE (zmq_has("curve")). */
int vdn_curve_available(void);

/* Writes PREFIX.key (0600) and PREFIX.pub; refuses to overwrite an existing key. */
int vdn_curve_keygen(const char *prefix, char *err, size_t errlen);

/* Reads a key file: exactly one Z85 key (40 chars) plus optional trailing whitespace. */
int vdn_curve_read_key(const char *path, char key[VDN_Z85_KEY_LEN + 1], char *err, size_t errlen);

/* Client side (worker, CLI): my_key = NAME.key path (NAME.pub is derived from it),
 * server_pub = coordinator.pub path. Sets ZMQ_CURVE_SERVERKEY/PUBLICKEY/SECRETKEY. */
int vdn_curve_client_setup(void *sock, const char *my_key, const char *server_pub, char *err,
                           size_t errlen);

/* Server side: ZMQ_CURVE_SERVER with the secret from secret_key_path and ZAP domain `domain`. */
int vdn_curve_server_setup(void *sock, const char *secret_key_path, const char *domain, char *err,
                           size_t errlen);

/* 1 if host part of a tcp:// endpoint is loopback (127.x, ::1, localhost), or ipc:// / inproc://.
 */
int vdn_endpoint_is_loopback(const char *endpoint);

#endif
