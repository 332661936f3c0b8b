/* libFuzzer target for the keys file (keys.h): whatever the bytes, the parser either fails with an
 * error naming the file, or gives entries that are all valid (names, roles) with no key listed
 * twice; and every accepted identity round-trips through the ZAP user id "ROLE:NAME". */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "keys.h"
#include "vdn_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    vdn_keyset ks = {0};
    char err[VDN_ERR_LEN];
    if (vdn_keys_parse((const char *)data, size, "authorized_keys", &ks, err, sizeof err)) {
        if (strncmp(err, "authorized_keys", 15)) __builtin_trap(); /* names the file */
        vdn_keys_free(&ks);
        return 0;
    }
    for (int i = 0; i < ks.n; i++) {
        const vdn_key_entry *e = &ks.e[i];
        if (!vdn_key_name_ok(e->name) || (unsigned)e->role > VDN_ROLE_ADMIN) __builtin_trap();
        if (vdn_keys_find(&ks, e->key) != e) __builtin_trap();
        char user[16 + VDN_KEY_NAME_MAX];
        vdn_peer p;
        snprintf(user, sizeof user, "%s:%s", vdn_role_name(e->role), e->name);
        if (vdn_peer_parse(user, &p) || p.local || p.role != e->role || strcmp(p.name, e->name))
            __builtin_trap();
    }
    vdn_keys_free(&ks);
    return 0;
}
