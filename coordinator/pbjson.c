/* protobuf-c message -> cJSON through the descriptors, for `--json` output: every reply prints
 * with the proto's own field names, and a field added to vdn.proto shows up without code here. */
#include "pbjson.h"

#include <string.h>

static cJSON *value(const ProtobufCFieldDescriptor *f, const void *p) {
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        return cJSON_CreateNumber(*(const int32_t *)p);
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        return cJSON_CreateNumber(*(const uint32_t *)p);
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        return cJSON_CreateNumber((double)*(const int64_t *)p);
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        return cJSON_CreateNumber((double)*(const uint64_t *)p);
    case PROTOBUF_C_TYPE_FLOAT:
        return cJSON_CreateNumber(*(const float *)p);
    case PROTOBUF_C_TYPE_DOUBLE:
        return cJSON_CreateNumber(*(const double *)p);
    case PROTOBUF_C_TYPE_BOOL:
        return cJSON_CreateBool(*(const protobuf_c_boolean *)p);
    case PROTOBUF_C_TYPE_ENUM: {
        const ProtobufCEnumValue *v =
            protobuf_c_enum_descriptor_get_value(f->descriptor, *(const int *)p);
        return v ? cJSON_CreateString(v->name) : cJSON_CreateNumber(*(const int *)p);
    }
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)p;
        return s ? cJSON_CreateString(s) : NULL;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *m = *(ProtobufCMessage *const *)p;
        return m ? vdn_pb_to_json(m) : NULL;
    }
    default:
        return NULL; /* bytes: not used by replies */
    }
}

static size_t elem_size(ProtobufCType t) {
    switch (t) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return 8;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(void *);
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    default:
        return 4;
    }
}

cJSON *vdn_pb_to_json(const ProtobufCMessage *m) {
    cJSON *o = cJSON_CreateObject();
    const ProtobufCMessageDescriptor *d = m->descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        const char *base = (const char *)m;
        const void *p = base + f->offset;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *)(base + f->quantifier_offset);
            cJSON *arr = cJSON_CreateArray();
            const char *items = *(char *const *)p;
            for (size_t k = 0; k < n; k++) {
                cJSON *v = value(f, items + k * elem_size(f->type));
                if (v) cJSON_AddItemToArray(arr, v);
            }
            cJSON_AddItemToObject(o, f->name, arr);
            continue;
        }
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            if (*(const uint32_t *)(base + f->quantifier_offset) != f->id) continue;
        } else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_STRING &&
                   f->type != PROTOBUF_C_TYPE_MESSAGE &&
                   !*(const protobuf_c_boolean *)(base + f->quantifier_offset)) {
            continue;
        }
        cJSON *v = value(f, p);
        if (v) cJSON_AddItemToObject(o, f->name, v);
    }
    return o;
}
