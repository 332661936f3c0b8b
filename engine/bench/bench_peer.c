/* The PyTorch peer's JSON line (bench_peer.h). */
#include "bench_peer.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "vdn_util.h"

/* the peer's number for `key`, or -1 when it has none (missing, null, not a positive finite
 * number) */
static double peer_time(const cJSON *j, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    return cJSON_IsNumber(v) && v->valuedouble > 0 && isfinite(v->valuedouble) ? v->valuedouble
                                                                               : -1;
}

static void peer_string(const cJSON *j, const char *key, char *out, size_t len) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    snprintf(out, len, "%s", cJSON_IsString(v) && v->valuestring ? v->valuestring : "?");
}

/* the peer must have timed what we timed: the same latents and audio length */
static int peer_shapes(const cJSON *j, const char *path, const int want[4], int La, int video,
                       int audio, char *err, size_t errlen) {
    const cJSON *lat = cJSON_GetObjectItemCaseSensitive(j, "latents");
    if (video) {
        int ok = cJSON_IsArray(lat) && cJSON_GetArraySize(lat) == 4;
        for (int i = 0; ok && i < 4; i++) {
            const cJSON *e = cJSON_GetArrayItem(lat, i);
            ok = cJSON_IsNumber(e) && e->valuedouble == want[i];
        }
        if (!ok)
            return vdn_fail(err, errlen,
                            "%s: field \"latents\": expected [%d, %d, %d, %d], what this run "
                            "decoded (time the peer at the same --T/--h/--w)",
                            path, want[0], want[1], want[2], want[3]);
    }
    const cJSON *la = cJSON_GetObjectItemCaseSensitive(j, "audio_latents");
    if (audio && !(cJSON_IsNumber(la) && la->valuedouble == La))
        return vdn_fail(err, errlen, "%s: field \"audio_latents\": expected %d, this run's --La",
                        path, La);
    return 0;
}

int vdn_vae_peer_parse(const char *text, size_t n, const char *path, const int latents[4], int La,
                       int video, int audio, vdn_vae_peer *out, char *err, size_t errlen) {
    cJSON *j = cJSON_ParseWithLength(text, n);
    if (!j || !cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return vdn_fail(err, errlen,
                        "%s: not a JSON object (expected ops/reference/vae_bench.py's line)", path);
    }
    const int rc = peer_shapes(j, path, latents, La, video, audio, err, errlen);
    if (!rc) {
        out->video_s = peer_time(j, "video_s");
        out->audio_s = peer_time(j, "audio_s");
        peer_string(j, "peer", out->peer, sizeof out->peer);
        peer_string(j, "gpu", out->gpu, sizeof out->gpu);
    }
    cJSON_Delete(j);
    return rc;
}

/* the whole-number field key must equal want, what this run does (hint says how to match it) */
static int peer_equals(const cJSON *j, const char *path, const char *key, int want,
                       const char *hint, char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (cJSON_IsNumber(v) && v->valuedouble == want) return 0;
    return vdn_fail(err, errlen, "%s: field \"%s\": expected %d, %s", path, key, want, hint);
}

#define ENCODE_HINT "what this run encodes (time the peer at the same --keyframes/--height/--width)"
#define MUX_HINT "this clip's (mux it at the same --frames/--height/--width)"

int vdn_encode_peer_parse(const char *text, size_t n, const char *path, int keyframes, int height,
                          int width, vdn_encode_peer *out, char *err, size_t errlen) {
    cJSON *j = cJSON_ParseWithLength(text, n);
    int rc = 0;
    if (!j || !cJSON_IsObject(j))
        rc = vdn_fail(err, errlen,
                      "%s: not a JSON object (expected ops/reference/vae_encoder_bench.py's line)",
                      path);
    if (!rc)
        rc = peer_equals(j, path, "keyframes", keyframes, ENCODE_HINT, err, errlen) ||
             peer_equals(j, path, "height", height, ENCODE_HINT, err, errlen) ||
             peer_equals(j, path, "width", width, ENCODE_HINT, err, errlen);
    if (!rc && (out->seconds = peer_time(j, "seconds")) < 0)
        rc = vdn_fail(err, errlen, "%s: field \"seconds\": expected a positive number", path);
    if (!rc) {
        peer_string(j, "peer", out->peer, sizeof out->peer);
        peer_string(j, "gpu", out->gpu, sizeof out->gpu);
    }
    cJSON_Delete(j);
    return rc;
}

int vdn_mux_part_parse(const char *text, size_t n, const char *path, int frames, int height,
                       int width, vdn_mux_part *out, char *err, size_t errlen) {
    cJSON *j = cJSON_ParseWithLength(text, n);
    const cJSON *op = j ? cJSON_GetObjectItemCaseSensitive(j, "op") : NULL;
    int rc = 0;
    if (!j || !cJSON_IsObject(j) || !cJSON_IsString(op) || !op->valuestring ||
        strcmp(op->valuestring, "mux"))
        rc = vdn_fail(err, errlen,
                      "%s: expected the JSON of `vdn bench --clip --mux-only --json` (\"op\": "
                      "\"mux\")",
                      path);
    if (!rc)
        rc = peer_equals(j, path, "pixel_frames", frames, MUX_HINT, err, errlen) ||
             peer_equals(j, path, "height", height, MUX_HINT, err, errlen) ||
             peer_equals(j, path, "width", width, MUX_HINT, err, errlen);
    if (!rc && (out->mux_s = peer_time(j, "mux_s")) < 0)
        rc = vdn_fail(err, errlen, "%s: field \"mux_s\": expected a positive number", path);
    if (!rc) {
        const double cores = peer_time(j, "cores");
        out->cores = cores >= 1 && cores < 1e6 ? (int)cores : 0;
        peer_string(j, "source", out->source, sizeof out->source);
    }
    cJSON_Delete(j);
    return rc;
}
