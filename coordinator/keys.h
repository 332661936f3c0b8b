/* Who a CURVE key is: the keys file (--keys DIR/authorized_keys) binds each public key to a name
 * and a role, and the coordinator acts on that identity, never on what a peer says it is.
 *
 *   # public key (Z85, 40 chars)            name        role
 *   rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf gpu-node-01 worker
 *   JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh alice       submit
 *
 * (A worker's name is its worker id: the systemd unit's is HOST-gSPEC, e.g. node01-g0,2,5.)
 * One entry a line, fields separated by blanks; a line starting with '#' is a comment (no valid
 * key begins with '#': Z85's '#' is digit 84, and 84 x 85^4 overflows a key's 32-bit word).
 * Names: 1..100 of [A-Za-z0-9._-,], starting with a letter or digit (a name becomes a store folder,
 * users/NAME/). Roles: worker (may connect as a worker, and only with the worker id NAME), read
 * (status, ls, logs, workers, watch), submit (read + submit, and cancel/retry its own batches),
 * admin (everything: anyone's batches, drain). A key may appear once; a name once per side (worker
 * or client). The ZAP handler tells the coordinator the identity as the connection's user id,
 * "ROLE:NAME" (vdn_peer_parse). */
#ifndef VDN_COORD_KEYS_H
#define VDN_COORD_KEYS_H

#include <stddef.h>
#include <stdint.h>

typedef enum { VDN_ROLE_WORKER, VDN_ROLE_READ, VDN_ROLE_SUBMIT, VDN_ROLE_ADMIN } vdn_role;

#define VDN_KEY_NAME_MAX 100

typedef struct {
    uint8_t key[32];
    char name[VDN_KEY_NAME_MAX + 1];
    vdn_role role;
    char where[160]; /* "FILE:LINE" or the .pub file it came from, for duplicate errors */
} vdn_key_entry;

typedef struct {
    vdn_key_entry *e;
    int n;
} vdn_keyset;

const char *vdn_role_name(vdn_role r); /* "worker" "read" "submit" "admin" */
int vdn_role_parse(const char *s, vdn_role *out);
/* 1 if s is a valid key name (see above). */
int vdn_key_name_ok(const char *s);

/* Parses the text of a keys file into ks (appending; a key or name already in ks is an error).
 * Errors name "FNAME:LINE", the field and what was expected. */
int vdn_keys_parse(const char *text, size_t len, const char *fname, vdn_keyset *ks, char *err,
                   size_t errlen);
/* Adds one entry (the legacy authorized_workers/NAME.pub files come in this way). */
int vdn_keys_add(vdn_keyset *ks, const uint8_t key[32], const char *name, vdn_role role,
                 const char *where, char *err, size_t errlen);
const vdn_key_entry *vdn_keys_find(const vdn_keyset *ks, const uint8_t key[32]);
void vdn_keys_free(vdn_keyset *ks);

/* Appends "PUB NAME ROLE" to the keys file at path (created 0644 if missing), after checking the
 * existing file parses and holds neither the key nor the name (`vdn keygen --keys-file`). */
int vdn_keys_append(const char *path, const char *pub_z85, const char *name, vdn_role role,
                    char *err, size_t errlen);

/* A connected peer as the coordinator sees it. local: no CURVE (the loopback farm of one user,
 * who is admin and has no name). */
typedef struct {
    int local;
    vdn_role role;
    char name[VDN_KEY_NAME_MAX + 1];
} vdn_peer;

/* "ROLE:NAME" (the ZAP user id) -> peer; NULL or "" -> local. -1 if malformed. */
int vdn_peer_parse(const char *user_id, vdn_peer *p);

#endif
