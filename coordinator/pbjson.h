/* Any protobuf-c message as JSON (field names from vdn.proto), for `vdn ... --json`. */
#ifndef VDN_COORD_PBJSON_H
#define VDN_COORD_PBJSON_H

#include <cjson/cJSON.h>
#include <protobuf-c/protobuf-c.h>

cJSON *vdn_pb_to_json(const ProtobufCMessage *m);

#endif
