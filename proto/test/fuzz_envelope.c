/* libFuzzer target: any byte string through the envelope decoder must give an envelope or a
 * clear error, never a crash; a decoded envelope must re-encode and decode to the same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vdn_util.h"
#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Unknown fields are kept by protobuf-c and ignored by us (forward compatibility); protobuf-c
 * even keeps an invalid field number 0, which then does not re-encode to a decodable frame.
 * The round-trip property is checked for envelopes made only of fields vdn.proto defines. */
static int has_unknown(const ProtobufCMessage *m) {
    if (m->n_unknown_fields) return 1;
    const ProtobufCMessageDescriptor *d = m->descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->type != PROTOBUF_C_TYPE_MESSAGE) continue;
        const char *base = (const char *)m;
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF &&
            *(const uint32_t *)(base + f->quantifier_offset) != f->id)
            continue;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *)(base + f->quantifier_offset);
            ProtobufCMessage *const *items = *(ProtobufCMessage *const *const *)(base + f->offset);
            for (size_t k = 0; k < n; k++)
                if (has_unknown(items[k])) return 1;
        } else {
            const ProtobufCMessage *sub = *(ProtobufCMessage *const *)(base + f->offset);
            if (sub && has_unknown(sub)) return 1;
        }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[VDN_ERR_LEN];
    int code;
    Vdn__Envelope *env = vdn_wire_decode(data, size, &code, err, sizeof err);
    if (!env) {
        VDN_ASSERT(code == VDN__ERROR__CODE__MALFORMED || code == VDN__ERROR__CODE__BAD_VERSION);
        VDN_ASSERT(err[0] != 0);
        return 0;
    }
    if (has_unknown(&env->base)) {
        vdn__envelope__free_unpacked(env, NULL);
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
