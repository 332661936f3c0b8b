/* The target table of the CUDA-engine issue: our `vdn bench --json` results beside the PyTorch
 * peers' (`shared/bench/h3_peers.py`, PEERS_JSON) from the same run. Plain C so that recorded runs
 * can be compared (and this code tested) on a machine without a GPU. */
#include "bench_programs.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "vdn_util.h"

/* Official stack, seconds per NFE on one H200 (VDN README "Results"; spec section 7): not in the
 * peer script, which times single ops. */
#define OFFICIAL_DENSE_S 32.7
#define OFFICIAL_VDN_FP8_S 11.2

static cJSON *load_json(const char *path, char *err, size_t errlen) {
    size_t n;
    char *text = vdn_read_file(path, &n, err, errlen);
    if (!text) return NULL;
    cJSON *j = cJSON_ParseWithLength(text, n);
    free(text);
    if (!j) vdn_fail(err, errlen, "%s: not valid JSON", path);
    return j;
}

/* ms of the fastest op whose name starts with prefix; its name in *which. -1 when none. */
static double best_with_prefix(const cJSON *ops, const char *prefix, const char **which) {
    double best = -1;
    const cJSON *op;
    cJSON_ArrayForEach(op, ops) {
        const cJSON *ms = cJSON_GetObjectItemCaseSensitive(op, "ms");
        if (!op->string || strncmp(op->string, prefix, strlen(prefix)) || !cJSON_IsNumber(ms))
            continue;
        if (best < 0 || ms->valuedouble < best) best = ms->valuedouble, *which = op->string;
    }
    return best;
}

static double peer_ms(const cJSON *rows, const char *name) {
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(rows, name);
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(r, "ms");
    return cJSON_IsNumber(ms) ? ms->valuedouble : -1;
}

static void cell(FILE *out, double v, const char *unit) {
    if (v < 0)
        fprintf(out, " %12s", "-");
    else
        fprintf(out, " %9.2f %-2s", v, unit);
}

int vdn_bench_compare(const char *ours_path, const char *peers_path, FILE *out, char *err,
                      size_t errlen) {
    cJSON *ours = load_json(ours_path, err, errlen);
    if (!ours) return -1;
    cJSON *peers = load_json(peers_path, err, errlen);
    if (!peers) {
        cJSON_Delete(ours);
        return -1;
    }
    int rc = -1;
    const cJSON *ops = cJSON_GetObjectItemCaseSensitive(ours, "ops");
    const cJSON *sum = cJSON_GetObjectItemCaseSensitive(ours, "summed");
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(peers, "rows");
    const cJSON *of = cJSON_GetObjectItemCaseSensitive(ours, "frames");
    const cJSON *pf = cJSON_GetObjectItemCaseSensitive(peers, "frames");
    if (!cJSON_IsObject(ops) || !cJSON_IsObject(sum)) {
        vdn_fail(err, errlen,
                 "%s: expected a `vdn bench --json` file (objects \"ops\", \"summed\")", ours_path);
        goto done;
    }
    if (!cJSON_IsObject(rows)) {
        vdn_fail(err, errlen, "%s: expected an h3_peers.py PEERS_JSON file (object \"rows\")",
                 peers_path);
        goto done;
    }
    if (cJSON_IsNumber(of) && cJSON_IsNumber(pf) && of->valueint != pf->valueint) {
        vdn_fail(err, errlen, "%s has %d frames but %s has %d: not the same workload", ours_path,
                 of->valueint, peers_path, pf->valueint);
        goto done;
    }

    static const struct {
        const char *what, *ours_prefix, *peer, *unit;
        double target;
    } table[] = {
        {"block GEMMs", "block GEMMs", "block GEMMs (qkv,o,ffn13,ffn2) bf16", "ms", 120},
        {"dense attention, one layer", "attention dense", "dense SDPA CUDNN_ATTENTION", "ms", 555},
        {"window+anchor attention, one layer", "attention window+anchors",
         "flex window+anchors (density 19.5%)", "ms", 110},
        {"VDA stats", "stats A (fp32", "VDA stats A,B (fp32 einsum)", "ms", 3},
        {"VDA inverse", "solve (I+A)^-1", "VDA (I+A)^-1 Cholesky", "ms", 2},
        {"VDA scans", "scans forward + reverse", "VDA two scans (baddbmm loop)", "ms", 2},
    };
    fprintf(out, "%-36s %12s %12s %12s  %s\n", "what", "peer", "target", "vdn", "");
    int missed = 0;
    for (size_t i = 0; i < sizeof table / sizeof *table; i++) {
        const char *which = "";
        double v = best_with_prefix(ops, table[i].ours_prefix, &which);
        double p = peer_ms(rows, table[i].peer);
        fprintf(out, "%-36s", table[i].what);
        cell(out, p, table[i].unit);
        fprintf(out, " <= %6.1f %-2s", table[i].target, table[i].unit);
        cell(out, v, table[i].unit);
        int ok = v >= 0 && v <= table[i].target;
        missed += !ok;
        fprintf(out, "  %s%s%s%s\n",
                v < 0 ? "not measured"
                : ok  ? "met"
                      : "MISSED",
                v >= 0 ? " [" : "", v >= 0 ? which : "", v >= 0 ? "]" : "");
    }
    const cJSON *ds = cJSON_GetObjectItemCaseSensitive(sum, "dense_s_per_nfe");
    const cJSON *vs = cJSON_GetObjectItemCaseSensitive(sum, "vdn_s_per_nfe");
    struct {
        const char *what;
        double official, target, ours;
    } nfe[] = {{"dense H3, s/NFE (sum of ops)", OFFICIAL_DENSE_S, 32,
                cJSON_IsNumber(ds) ? ds->valuedouble : -1},
               {"VDN-H3, s/NFE (sum of ops)", OFFICIAL_VDN_FP8_S, 11.2,
                cJSON_IsNumber(vs) ? vs->valuedouble : -1}};
    for (int i = 0; i < 2; i++) {
        fprintf(out, "%-36s", nfe[i].what);
        cell(out, nfe[i].official, "s");
        fprintf(out, " <= %6.1f %-2s", nfe[i].target, "s");
        cell(out, nfe[i].ours, "s");
        int ok = nfe[i].ours >= 0 && nfe[i].ours <= nfe[i].target;
        missed += !ok;
        fprintf(out, "  %s\n", nfe[i].ours < 0 ? "not measured" : ok ? "met" : "MISSED");
    }
    fprintf(out,
            "(peer = PyTorch from the same run; s/NFE peer = the official stack's published "
            "H200 number, %s fp8 for VDN)\n",
            "with");
    fprintf(out, "%d of 8 targets met\n", 8 - missed);
    rc = 0;
done:
    cJSON_Delete(ours);
    cJSON_Delete(peers);
    return rc;
}
