/* libFuzzer target: any byte string through the envelope decoder must give an envelope or a
 * clear error, never a crash; a decoded envelope must re-encode and decode to the same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vdn_util.h"
#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[VDN_ERR_LEN];
    int code;
    Vdn__Envelope *env = vdn_wire_decode(data, size, &code, err, sizeof err);
    if (!env) {
        VDN_ASSERT(code == VDN__ERROR__CODE__MALFORMED || code == VDN__ERROR__CODE__BAD_VERSION);
        VDN_ASSERT(err[0] != 0);
        return 0;
    }
    size_t len1, len2;
    uint8_t *b1 = vdn_wire_encode(env, &len1);
    Vdn__Envelope *env2 = vdn_wire_decode(b1, len1, &code, err, sizeof err);
    VDN_ASSERT(env2 != NULL);
    uint8_t *b2 = vdn_wire_encode(env2, &len2);
    VDN_ASSERT(len1 == len2 && memcmp(b1, b2, len1) == 0);
    (void)vdn_wire_payload_name(env->payload_case);
    free(b1);
    free(b2);
    vdn__envelope__free_unpacked(env2, NULL);
    vdn__envelope__free_unpacked(env, NULL);
    return 0;
}
