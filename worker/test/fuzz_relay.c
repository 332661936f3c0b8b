/* libFuzzer target for the relay between the worker daemon and its renderer processes (relay.h):
 * any bytes as a stream of frames. Each whole frame is a message or an error, never a crash; a
 * message that parses is written again and must parse again to the same JSON (what one side
 * writes, the other reads back unchanged). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "relay.h"
#include "vdn_util.h"

/* Parses m by its type; 1 when it parsed, with the message written again from the struct in
 * *again (NULL for types without a writer of their own). */
static int parse(const cJSON *m, cJSON **again) {
    char err[VDN_ERR_LEN];
    const char *t = vdn_relay_type(m);
    *again = NULL;
    if (!strcmp(t, "config")) {
        vdn_relay_config c;
        if (vdn_relay_config_parse(m, &c, err, sizeof err)) return 0;
        *again = vdn_relay_config_json(&c);
    } else if (!strcmp(t, "start")) {
        vdn_assignment s;
        int pos[VDN_MAX_GPUS], npos, prec;
        if (vdn_relay_start_parse(m, &s, pos, &npos, &prec, err, sizeof err)) return 0;
        *again = vdn_relay_start_json(&s, pos, npos, prec);
        vdn_assignment_free(&s);
    } else if (!strcmp(t, "gate") || !strcmp(t, "cancel")) {
        uint64_t id;
        int go;
        if (vdn_relay_attempt_parse(m, &id, &go, err, sizeof err)) return 0;
        *again = !strcmp(t, "gate") ? vdn_relay_gate_json(id, go) : vdn_relay_cancel_json(id);
    } else if (!strcmp(t, "hello")) {
        vdn_relay_hello h;
        if (vdn_relay_hello_parse(m, &h, err, sizeof err)) return 0;
        *again = vdn_relay_hello_json(&h);
    } else if (!strcmp(t, "state")) {
        vdn_relay_state s;
        if (vdn_relay_state_parse(m, &s, err, sizeof err)) return 0;
        *again = vdn_relay_state_json(&s);
        vdn_relay_state_free(&s);
    } else {
        return 0;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    vdn_relay_buf rb = {0};
    rb.cap = size + 1;
    rb.buf = malloc(rb.cap);
    if (!rb.buf) return 0;
    memcpy(rb.buf, data, size);
    rb.len = size;
    char err[VDN_ERR_LEN];
    cJSON *m;
    while ((m = vdn_relay_next(&rb, err, sizeof err)) != NULL) {
        cJSON *again;
        if (parse(m, &again) && again) {
            cJSON *third;
            if (!parse(again, &third) || !third) abort(); /* what we write, we read */
            char *a = cJSON_PrintUnformatted(again), *b = cJSON_PrintUnformatted(third);
            if (!a || !b || strcmp(a, b)) abort(); /* and read it back the same */
            free(a);
            free(b);
            cJSON_Delete(third);
        }
        cJSON_Delete(again);
        cJSON_Delete(m);
    }
    vdn_relay_buf_free(&rb);
    return 0;
}
