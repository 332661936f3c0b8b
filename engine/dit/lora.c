/* PEFT LoRA adapters: loading, name translation, folding; see lora.h. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_names.h"
#include "lora.h"
#include "vdn_util.h"

float vdn_round_dtype(float x, vdn_dtype dt) {
    if (dt == VDN_DT_BF16) return vdn_round_bf16(x);
    if (dt == VDN_DT_F16) return vdn_f16_to_f32(vdn_f32_to_f16(x));
    return x;
}

/* ---- the adapter JSON ---- */

typedef struct {
    int rank;
    double alpha;
    const cJSON *rank_pattern, *alpha_pattern; /* objects or NULL */
} lora_conf;

static int positive(const cJSON *j, int integer, double *out) {
    if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble) || j->valuedouble <= 0) return -1;
    if (integer && (floor(j->valuedouble) != j->valuedouble || j->valuedouble > 1 << 20)) return -1;
    *out = j->valuedouble;
    return 0;
}

/* First present key of two spellings; -1 on a wrong type. */
static int conf_number(const char *label, const cJSON *cfg, const char *k1, const char *k2,
                       int integer, double *out, char *err, size_t errlen) {
    const char *keys[2] = {k1, k2};
    for (int i = 0; i < 2; i++) {
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(cfg, keys[i]);
        if (!j || cJSON_IsNull(j)) continue;
        if (positive(j, integer, out) != 0)
            return vdn_fail(err, errlen, "%s: key \"%s\": expected a positive %s", label, keys[i],
                            integer ? "integer" : "number");
        return 1;
    }
    return 0;
}

static int conf_pattern(const char *label, const cJSON *cfg, const char *key, int integer,
                        const cJSON **out, char *err, size_t errlen) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(cfg, key);
    *out = NULL;
    if (!j || cJSON_IsNull(j)) return 0;
    if (!cJSON_IsObject(j))
        return vdn_fail(err, errlen, "%s: key \"%s\": expected an object {module: value}", label,
                        key);
    const cJSON *kv;
    double v;
    cJSON_ArrayForEach(kv, j) {
        if (positive(kv, integer, &v) != 0)
            return vdn_fail(err, errlen, "%s: key \"%s\"[\"%s\"]: expected a positive %s", label,
                            key, kv->string, integer ? "integer" : "number");
    }
    *out = j;
    return 0;
}

static int parse_conf(const char *label, const cJSON *root, lora_conf *c, char *err,
                      size_t errlen) {
    if (!cJSON_IsObject(root)) return vdn_fail(err, errlen, "%s: expected a JSON object", label);
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(root, "config");
    if (!cJSON_IsObject(cfg)) cfg = root; /* peft adapter_config.json keeps keys at the top */
    double v = 0; /* set by conf_number when it returns 1; -O3 cannot see that */
    int rc = conf_number(label, cfg, "r", "rank", 1, &v, err, errlen);
    if (rc < 0) return -1;
    if (rc) c->rank = (int)v;
    rc = conf_number(label, cfg, "lora_alpha", "alpha", 0, &v, err, errlen);
    if (rc < 0) return -1;
    if (rc) c->alpha = v;
    if (conf_pattern(label, cfg, "rank_pattern", 1, &c->rank_pattern, err, errlen) ||
        conf_pattern(label, cfg, "alpha_pattern", 0, &c->alpha_pattern, err, errlen))
        return -1;
    return 0;
}

int vdn_lora_check_json(const char *label, const char *text, size_t len, int *rank, float *alpha,
                        char *err, size_t errlen) {
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root) return vdn_fail(err, errlen, "%s: not valid JSON", label);
    lora_conf c = {0};
    int rc = parse_conf(label, root, &c, err, errlen);
    cJSON_Delete(root);
    if (rc == 0) {
        *rank = c.rank;
        *alpha = (float)c.alpha;
    }
    return rc;
}

/* PEFT matches a pattern key against the module name as a whole or as a dotted suffix. */
static const cJSON *pattern_lookup(const cJSON *pat, const char *module) {
    if (!pat) return NULL;
    size_t ml = strlen(module);
    const cJSON *kv;
    cJSON_ArrayForEach(kv, pat) {
        size_t kl = strlen(kv->string);
        if (kl == ml && strcmp(kv->string, module) == 0) return kv;
        if (kl < ml && module[ml - kl - 1] == '.' && strcmp(module + ml - kl, kv->string) == 0)
            return kv;
    }
    return NULL;
}

/* ---- tensors ---- */

typedef struct {
    char module[VDN_NAME_MAX];
    const vdn_st_entry *A, *B;
} raw_pair;

static int cmp_raw(const void *a, const void *b) {
    return strcmp(((const raw_pair *)a)->module, ((const raw_pair *)b)->module);
}
static int cmp_pair(const void *a, const void *b) {
    return strcmp(((const vdn_lora_pair *)a)->target, ((const vdn_lora_pair *)b)->target);
}

/* "MODULE.lora_A[.NAME].weight" -> module, kind 'A'/'B'; -1 otherwise. */
static int split_lora_name(const char *name, char *module, size_t n, char *kind) {
    const char *at = strstr(name, ".lora_A.");
    if (!at) at = strstr(name, ".lora_B.");
    if (!at) return -1;
    const char *tail = at + strlen(".lora_A.");
    const char *dot = strchr(tail, '.');
    if (strcmp(tail, "weight") != 0 && !(dot && dot > tail && strcmp(dot, ".weight") == 0))
        return -1;
    if ((size_t)(at - name) >= n || at == name) return -1;
    memcpy(module, name, at - name);
    module[at - name] = '\0';
    *kind = at[6];
    return 0;
}

static int is_original_module(const char *m) {
    if (strncmp(m, "diffusion_model.", 16) == 0) m += 16;
    return strncmp(m, "blocks.", 7) == 0 || strncmp(m, "token_refiner.blocks.", 21) == 0 ||
           strncmp(m, "final_layer.", 12) == 0 || strstr(m, ".qkv_proj") != NULL;
}

static void add_pair(vdn_lora *l, int *cap, const char *target, int rank, float scale, int64_t out,
                     int64_t in, const raw_pair *r, int64_t b_row0, int b_swap) {
    if (l->n_pairs == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        l->pairs = realloc(l->pairs, (size_t)*cap * sizeof *l->pairs);
        VDN_ASSERT(l->pairs);
    }
    l->pairs[l->n_pairs++] =
        (vdn_lora_pair){vdn_xstrdup(target), rank, scale, out, in, r->A, r->B, b_row0, b_swap};
}

static int build_pairs(vdn_lora *l, const lora_conf *conf, int alpha_from_meta, char *err,
                       size_t errlen) {
    const char *path = l->path;
    int n = vdn_st_count(l->file);
    raw_pair *raw = vdn_xcalloc(n ? n : 1, sizeof *raw);
    int n_raw = 0, rc = 0, cap = 0;
    /* group A and B by module */
    for (int i = 0; i < n && rc == 0; i++) {
        const vdn_st_entry *e = vdn_st_at(l->file, i);
        char module[VDN_NAME_MAX], kind;
        if (split_lora_name(e->name, module, sizeof module, &kind) != 0) {
            rc = vdn_fail(err, errlen,
                          "%s: tensor \"%s\" is not a LoRA factor (expected "
                          "MODULE.lora_A[.NAME].weight / MODULE.lora_B[.NAME].weight)",
                          path, e->name);
            break;
        }
        int j = 0;
        while (j < n_raw && strcmp(raw[j].module, module) != 0)
            j++;
        if (j == n_raw) snprintf(raw[n_raw++].module, VDN_NAME_MAX, "%s", module);
        const vdn_st_entry **slot = kind == 'A' ? &raw[j].A : &raw[j].B;
        if (*slot) {
            rc = vdn_fail(err, errlen, "%s: module \"%s\" has two lora_%c tensors", path, module,
                          kind);
            break;
        }
        *slot = e;
    }
    qsort(raw, n_raw, sizeof *raw, cmp_raw);
    for (int j = 0; j < n_raw && rc == 0; j++)
        l->original_layout |= is_original_module(raw[j].module);

    int first_rank = 0, unexplained = 0;
    for (int j = 0; j < n_raw && rc == 0; j++) {
        raw_pair *r = &raw[j];
        if (!r->A || !r->B) {
            rc = vdn_fail(err, errlen, "%s: module \"%s\" has lora_%c but no lora_%c", path,
                          r->module, r->A ? 'A' : 'B', r->A ? 'B' : 'A');
            break;
        }
        const vdn_st_entry *A = r->A, *B = r->B;
        if (A->ndim != 2 || B->ndim != 2 || B->shape[1] != A->shape[0] || A->shape[0] < 1 ||
            !vdn_dtype_is_float(A->dtype) || !vdn_dtype_is_float(B->dtype)) {
            rc = vdn_fail(err, errlen,
                          "%s: module \"%s\": expected float lora_A (r, in) and lora_B (out, r) "
                          "with the same r",
                          path, r->module);
            break;
        }
        int rank = (int)A->shape[0];
        if (!first_rank) first_rank = rank;
        const cJSON *rp = pattern_lookup(conf->rank_pattern, r->module);
        if (rp && (int)rp->valuedouble != rank) {
            rc = vdn_fail(err, errlen,
                          "%s: module \"%s\": lora_A has rank %d but rank_pattern says r = %d",
                          path, r->module, rank, (int)rp->valuedouble);
            break;
        }
        if (alpha_from_meta && rank != first_rank) {
            rc = vdn_fail(err, errlen,
                          "%s: one alpha (file metadata) cannot scale mixed ranks %d and %d", path,
                          first_rank, rank);
            break;
        }
        const cJSON *ap = pattern_lookup(conf->alpha_pattern, r->module);
        double alpha = ap ? ap->valuedouble : conf->alpha > 0 ? conf->alpha : rank;
        if (!rp && !ap && conf->rank && conf->rank != rank) {
            /* a rank the config does not explain (no rank_pattern entry): keep the configured
             * alpha/r ratio, which is 1 for the released adapters as the reference folds them */
            unexplained++;
            alpha = (conf->alpha > 0 ? conf->alpha : conf->rank) * rank / conf->rank;
        }
        float scale = (float)(alpha / rank);

        char canon[VDN_NAME_MAX];
        if (vdn_lora_module_canonical(r->module, canon, sizeof canon) != 0) {
            rc = vdn_fail(err, errlen, "%s: module name \"%s\" too long", path, r->module);
            break;
        }
        if (!l->original_layout) {
            add_pair(l, &cap, canon, rank, scale, B->shape[0], A->shape[1], r, 0, 0);
            continue;
        }
        /* native layout -> canonical, through the weight-name map */
        char wname[VDN_NAME_MAX + 8], outs[3][VDN_NAME_MAX];
        snprintf(wname, sizeof wname, "%s.weight", canon);
        vdn_xform xf;
        int k = vdn_native_to_canonical(wname, outs, &xf);
        if (k < 1) {
            rc = vdn_fail(err, errlen,
                          "%s: module \"%s\" is not a module of the native MiniMax-H3 layout", path,
                          r->module);
            break;
        }
        int64_t rows = B->shape[0];
        if ((xf == VDN_XF_QKV && rows % 3) || (xf == VDN_XF_SWAP && rows % 2)) {
            rc = vdn_fail(err, errlen,
                          "%s: module \"%s\": lora_B has %lld rows, not divisible "
                          "into its %s",
                          path, r->module, (long long)rows,
                          xf == VDN_XF_QKV ? "q/k/v parts" : "two SwiGLU halves");
            break;
        }
        for (int q = 0; q < k; q++) {
            outs[q][strlen(outs[q]) - strlen(".weight")] = '\0';
            int64_t out = xf == VDN_XF_QKV ? rows / 3 : rows;
            add_pair(l, &cap, outs[q], rank, scale, out, A->shape[1], r, q * out,
                     xf == VDN_XF_SWAP);
        }
    }
    free(raw);
    if (rc) return rc;
    if (unexplained)
        VDN_WARN("%s: %d LoRA pairs have a rank the adapter config (r = %d) does not explain and "
                 "no rank_pattern entry; folded at its alpha/r = %g",
                 path, unexplained, conf->rank,
                 (conf->alpha > 0 ? conf->alpha : conf->rank) / conf->rank);
    qsort(l->pairs, l->n_pairs, sizeof *l->pairs, cmp_pair);
    for (int i = 1; i < l->n_pairs; i++)
        if (strcmp(l->pairs[i].target, l->pairs[i - 1].target) == 0)
            return vdn_fail(err, errlen, "%s: two LoRA pairs target \"%s\"", path,
                            l->pairs[i].target);
    if (l->n_pairs == 0) return vdn_fail(err, errlen, "%s: no LoRA pairs in the adapter", path);
    return 0;
}

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}
static int is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

int vdn_lora_open(vdn_lora *l, const char *path, const char *name, char *err, size_t errlen) {
    memset(l, 0, sizeof *l);
    char buf[4096], json_path[4096] = "";
    const char *base = strrchr(path, '/');
    base = base && base[1] ? base + 1 : path;
    if (is_dir(path)) {
        snprintf(buf, sizeof buf, "%s/adapter_model.safetensors", path);
        static const char *const jsons[] = {"adapter_spec.json", "adapter_config.json"};
        for (int i = 0; i < 2 && !json_path[0]; i++) {
            snprintf(json_path, sizeof json_path, "%s/%s", path, jsons[i]);
            if (!is_file(json_path)) json_path[0] = '\0';
        }
        l->name = vdn_xstrdup(name ? name : base);
    } else {
        snprintf(buf, sizeof buf, "%s", path);
        char stem[512];
        snprintf(stem, sizeof stem, "%s", base);
        char *dot = strstr(stem, ".safetensors");
        if (dot) *dot = '\0';
        l->name = vdn_xstrdup(name ? name : stem);
    }
    l->path = vdn_xstrdup(buf);
    l->json_text = vdn_xstrdup("");
    l->file = vdn_st_open(l->path, err, errlen);
    if (!l->file) {
        vdn_lora_free(l);
        return -1;
    }
    size_t hl;
    const char *h = vdn_st_header(l->file, &hl);
    vdn_sha256_hex(h, hl, l->header_sha);

    lora_conf conf = {0};
    cJSON *root = NULL;
    int rc = 0, alpha_from_meta = 0;
    if (json_path[0]) {
        size_t len;
        free(l->json_text);
        l->json_text = vdn_read_file(json_path, &len, err, errlen);
        if (!l->json_text) {
            l->json_text = vdn_xstrdup("");
            vdn_lora_free(l);
            return -1;
        }
        root = cJSON_ParseWithLength(l->json_text, len);
        rc = root ? parse_conf(json_path, root, &conf, err, errlen)
                  : vdn_fail(err, errlen, "%s: not valid JSON", json_path);
    } else {
        /* a bare file may stamp its alpha in the metadata */
        const char *a = vdn_st_meta(l->file, "alpha");
        if (!a) a = vdn_st_meta(l->file, "lora_alpha");
        if (a) {
            char *end;
            errno = 0;
            double v = strtod(a, &end);
            if (errno || end == a || *end || !(v > 0) || !isfinite(v))
                rc = vdn_fail(err, errlen,
                              "%s: metadata \"alpha\" = \"%s\", expected a positive "
                              "number",
                              l->path, a);
            conf.alpha = v;
            alpha_from_meta = 1;
        }
    }
    if (rc == 0) rc = build_pairs(l, &conf, alpha_from_meta, err, errlen);
    l->rank = conf.rank;
    l->alpha = (float)conf.alpha;
    if (rc == 0 && !l->rank) {
        /* no configured r: report the most common pair rank */
        int best = 0, best_n = 0;
        for (int i = 0; i < l->n_pairs; i++) {
            int c = 0;
            for (int j = 0; j < l->n_pairs; j++)
                c += l->pairs[j].rank == l->pairs[i].rank;
            if (c > best_n) best = l->pairs[i].rank, best_n = c;
        }
        l->rank = best;
    }
    cJSON_Delete(root);
    if (rc) {
        vdn_lora_free(l);
        return -1;
    }
    return 0;
}

void vdn_lora_free(vdn_lora *l) {
    for (int i = 0; i < l->n_pairs; i++)
        free(l->pairs[i].target);
    free(l->pairs);
    vdn_st_close(l->file);
    free(l->name);
    free(l->path);
    free(l->json_text);
    memset(l, 0, sizeof *l);
}

const vdn_lora_pair *vdn_lora_find(const vdn_lora *l, const char *module) {
    int lo = 0, hi = l->n_pairs - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        int c = strcmp(l->pairs[mid].target, module);
        if (c == 0) return &l->pairs[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

/* Rows [row0, row1) of one fold. Every row is computed the same way whatever the split, so the
 * result does not depend on the thread count. */
typedef struct {
    float *W;
    const float *A, *B;
    const vdn_lora_pair *p;
    vdn_dtype wdtype;
    int64_t row0, row1;
} fold_job;

static void *fold_rows(void *arg) {
    const fold_job *j = arg;
    const vdn_lora_pair *p = j->p;
    const int64_t r = p->rank, in = p->in, rows = p->B->shape[0];
    float *acc = vdn_xmalloc((size_t)in * sizeof(float));
    for (int64_t o = j->row0; o < j->row1; o++) {
        /* B row for this output row: chunk offset for q/k/v, halves swapped for fc1 */
        int64_t br = p->b_row0 + o;
        if (p->b_swap) br = (br + rows / 2) % rows;
        const float *brow = j->B + br * r;
        memset(acc, 0, (size_t)in * sizeof(float));
        for (int64_t k = 0; k < r; k++) {
            const float b = brow[k], *arow = j->A + k * in;
            for (int64_t i = 0; i < in; i++)
                acc[i] += b * arow[i];
        }
        float *w = j->W + o * in;
        for (int64_t i = 0; i < in; i++)
            w[i] = vdn_round_dtype(w[i] + vdn_round_dtype(acc[i] * p->scale, j->wdtype), j->wdtype);
    }
    free(acc);
    return NULL;
}

int vdn_lora_fold(float *W, vdn_dtype wdtype, const vdn_lora *l, const vdn_lora_pair *p,
                  int threads_max, char *err, size_t errlen) {
    const int64_t r = p->rank, in = p->in, out = p->out, rows = p->B->shape[0];
    float *A = vdn_xmalloc((size_t)(r * in) * sizeof(float));
    float *B = vdn_xmalloc((size_t)(rows * r) * sizeof(float));
    int rc = 0;
    if (vdn_st_to_f32(l->file, p->A, A, err, errlen) ||
        vdn_st_to_f32(l->file, p->B, B, err, errlen))
        rc = -1;
    /* an H3 adaLN fold is ~17 GFLOP: spread big ones over the cores (each thread owns whole
     * rows, so the result does not depend on the count) */
    int threads = 1;
    if (rc == 0 && (double)out * in * r > 6.4e7) {
        long n = threads_max > 0 ? threads_max : sysconf(_SC_NPROCESSORS_ONLN);
        threads = n < 1 ? 1 : n > 64 ? 64 : (int)n;
        if (threads > out) threads = (int)out;
    }
    fold_job jobs[64];
    pthread_t tid[64];
    int started = 0;
    for (int t = 0; t < threads && rc == 0; t++) {
        jobs[t] = (fold_job){W, A, B, p, wdtype, out * t / threads, out * (t + 1) / threads};
        if (t == 0) continue; /* this thread does slice 0 */
        if (pthread_create(&tid[t], NULL, fold_rows, &jobs[t]) != 0) {
            jobs[t].row0 = jobs[t].row1; /* not started: folded below */
            break;
        }
        started = t;
    }
    if (rc == 0) {
        fold_rows(&jobs[0]);
        for (int t = 1; t <= started; t++)
            pthread_join(tid[t], NULL);
        /* slices whose thread could not start */
        for (int t = started + 1; t < threads; t++) {
            jobs[t] = (fold_job){W, A, B, p, wdtype, out * t / threads, out * (t + 1) / threads};
            fold_rows(&jobs[t]);
        }
    }
    free(A);
    free(B);
    return rc;
}
