/* Checkpoint assembly: base (diffusers or native layout) + VDN linear branch + folded LoRA
 * adapters, exposed under canonical names; see ckpt.h and docs/formats.md.
 *
 * Tensors are mapped, validated against the schema of the config at open (names, shapes), and
 * widened to float32 on first use, with native-layout conversions and LoRA folds applied then:
 * opening a 66 GB checkpoint reads only its headers. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt.h"
#include "ckpt_config.h"
#include "ckpt_names.h"
#include "lora.h"
#include "safetensors.h"
#include "vdn_util.h"

typedef struct {
    int adapter;
    const vdn_lora_pair *pair;
} lora_ref;

typedef struct {
    char *name; /* canonical */
    vdn_dtype dtype;
    int ndim;
    int64_t shape[VDN_ST_MAX_DIMS];
    int64_t numel;
    const vdn_st_file *file;
    const vdn_st_entry *src;
    vdn_xform xf;
    int part;
    int n_lora;
    lora_ref *lora;
    float *f32;
    void *stored; /* stored-dtype copy when the mapping cannot be used as is */
} ck_tensor;

struct vdn_ckpt {
    char *dir;
    vdn_config cfg;
    vdn_layout_kind layout;
    vdn_st_set *base, *branch;
    int n, cap;
    ck_tensor *t; /* sorted by name after open */
    int n_ad;
    vdn_lora *ad;
    char identity[65];
    pthread_mutex_t mu;
};

/* ---- small helpers ---- */

typedef struct {
    char *s;
    size_t len, cap;
} strbuf;

static void sb_add(strbuf *b, const void *p, size_t n) {
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->s = realloc(b->s, b->cap);
        VDN_ASSERT(b->s);
    }
    memcpy(b->s + b->len, p, n);
    b->len += n;
    b->s[b->len] = '\0';
}
static void sb_str(strbuf *b, const char *tag, const char *s) {
    sb_add(b, tag, strlen(tag));
    sb_add(b, "\n", 1);
    sb_add(b, s, strlen(s));
    sb_add(b, "\n", 1);
}

static int exists_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}
static int exists_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static void widen(const uint8_t *p, vdn_dtype dt, int64_t n, float *out) {
    if (dt == VDN_DT_F32) {
        memcpy(out, p, (size_t)n * 4);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        out[i] = dt == VDN_DT_BF16 ? vdn_bf16_to_f32(h) : vdn_f16_to_f32(h);
    }
}

/* Identity of one safetensors file: sha256 of its header and the first MiB of its data (the
 * reference stamps data too, so two exports with the same names but different weights differ;
 * reading a MiB per file keeps it cheap on a 66 GB checkpoint). */
static void file_digest(strbuf *id, const vdn_st_file *f) {
    size_t hl, data = 0;
    const char *h = vdn_st_header(f, &hl);
    for (int i = 0; i < vdn_st_count(f); i++)
        data += vdn_st_at(f, i)->nbytes;
    if (data > (1u << 20)) data = 1u << 20;
    char *buf = vdn_xmalloc(hl + data + 1);
    memcpy(buf, h, hl);
    /* the data region is contiguous (validated), starting at the first tensor */
    if (data) memcpy(buf + hl, vdn_st_at(f, 0)->data, data);
    char hex[65];
    vdn_sha256_hex(buf, hl + data, hex);
    free(buf);
    sb_str(id, "file", hex);
}

static ck_tensor *find(const vdn_ckpt *ck, const char *name) {
    int lo = 0, hi = ck->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        int c = strcmp(ck->t[mid].name, name);
        if (c == 0) return &ck->t[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

static const char *origin(const ck_tensor *t) {
    return t ? vdn_st_path(t->file) : "?";
}

static int cmp_tensor(const void *a, const void *b) {
    return strcmp(((const ck_tensor *)a)->name, ((const ck_tensor *)b)->name);
}

static ck_tensor *add_tensor(vdn_ckpt *ck, const char *name, const vdn_st_file *f,
                             const vdn_st_entry *e) {
    if (ck->n == ck->cap) {
        ck->cap = ck->cap ? 2 * ck->cap : 1024;
        ck->t = realloc(ck->t, (size_t)ck->cap * sizeof *ck->t);
        VDN_ASSERT(ck->t);
    }
    ck_tensor *t = &ck->t[ck->n++];
    memset(t, 0, sizeof *t);
    t->name = vdn_xstrdup(name);
    t->dtype = e->dtype;
    t->ndim = e->ndim;
    memcpy(t->shape, e->shape, sizeof t->shape);
    t->numel = e->numel;
    t->file = f;
    t->src = e;
    return t;
}

/* ---- base ---- */

static int load_base_tensors(vdn_ckpt *ck, char *err, size_t errlen) {
    const int64_t inner = (int64_t)ck->cfg.heads * ck->cfg.head_dim;
    for (int i = 0; i < vdn_st_set_count(ck->base); i++) {
        const vdn_st_file *f;
        const vdn_st_entry *e = vdn_st_set_at(ck->base, i, &f);
        if (!vdn_dtype_is_float(e->dtype))
            return vdn_fail(err, errlen, "%s: tensor \"%s\": dtype %s, expected F32, BF16 or F16",
                            vdn_st_path(f), e->name, vdn_dtype_name(e->dtype));
        if (ck->layout == VDN_LAYOUT_DIFFUSERS) {
            if (strcmp(e->name, "rope.inv_freq") != 0) add_tensor(ck, e->name, f, e);
            continue;
        }
        char out[3][VDN_NAME_MAX];
        vdn_xform xf;
        int k = vdn_native_to_canonical(e->name, out, &xf);
        if (k < 0)
            return vdn_fail(err, errlen,
                            "%s: tensor \"%s\" is not part of the native MiniMaxH3DiTModel layout",
                            vdn_st_path(f), e->name);
        if (xf == VDN_XF_QKV && (e->ndim != 2 || e->shape[0] != 3 * inner))
            return vdn_fail(err, errlen,
                            "%s: tensor \"%s\": expected a fused [3 * %" PRId64 ", hidden] matrix",
                            vdn_st_path(f), e->name, inner);
        if (xf == VDN_XF_SWAP && (e->ndim != 2 || e->shape[0] % 2))
            return vdn_fail(err, errlen, "%s: tensor \"%s\": expected [2 * ffn, hidden]",
                            vdn_st_path(f), e->name);
        for (int q = 0; q < k; q++) {
            ck_tensor *t = add_tensor(ck, out[q], f, e);
            t->xf = xf;
            t->part = q;
            if (xf == VDN_XF_QKV) {
                t->shape[0] = inner;
                t->numel = inner * t->shape[1];
            }
        }
    }
    return 0;
}

static int open_base(vdn_ckpt *ck, const char *dir, strbuf *id, char *err, size_t errlen) {
    char tdir[4096], path[4608];
    snprintf(path, sizeof path, "%s/transformer/config.json", dir);
    if (exists_file(path))
        snprintf(tdir, sizeof tdir, "%s/transformer", dir);
    else
        snprintf(tdir, sizeof tdir, "%s", dir);
    snprintf(path, sizeof path, "%s/config.json", tdir);
    if (!exists_file(path))
        return vdn_fail(err, errlen,
                        "%s: not a checkpoint: no config.json, transformer/config.json or "
                        "model_spec.json",
                        dir);
    size_t len;
    char *text = vdn_read_file(path, &len, err, errlen);
    if (!text) return -1;
    int rc = vdn_config_parse_base(path, text, len, &ck->cfg, &ck->layout, err, errlen);
    sb_str(id, "base-config", text);
    free(text);
    if (rc) return -1;

    /* the released file names: diffusers diffusion_pytorch_model*, native model* */
    const char *stem = ck->layout == VDN_LAYOUT_DIFFUSERS ? "diffusion_pytorch_model" : "model";
    snprintf(path, sizeof path, "%s/%s.safetensors.index.json", tdir, stem);
    if (!exists_file(path)) snprintf(path, sizeof path, "%s/%s.safetensors", tdir, stem);
    if (!exists_file(path))
        return vdn_fail(err, errlen,
                        "%s: no %s.safetensors.index.json or %s.safetensors (the %s "
                        "layout's weights)",
                        tdir, stem, stem,
                        ck->layout == VDN_LAYOUT_DIFFUSERS ? "diffusers" : "native");
    ck->base = vdn_st_set_open(path, err, errlen);
    if (!ck->base) return -1;
    sb_str(id, "base-index", vdn_st_set_index_text(ck->base));
    for (int i = 0; i < vdn_st_set_file_count(ck->base); i++)
        file_digest(id, vdn_st_set_file(ck->base, i));
    if (load_base_tensors(ck, err, errlen)) return -1;

    /* sampler shifts from the pipeline's scheduler configs when they are there */
    static const char *const sched[2] = {"scheduler", "audio_scheduler"};
    for (int s = 0; s < 2; s++) {
        snprintf(path, sizeof path, "%s/../%s/scheduler_config.json", tdir, sched[s]);
        if (!exists_file(path)) continue;
        char *st = vdn_read_file(path, &len, err, errlen);
        if (!st) return -1;
        float shift;
        rc = vdn_config_parse_shift(path, st, len, &shift, err, errlen);
        free(st);
        if (rc) return -1;
        if (s == 0)
            ck->cfg.video_shift = shift;
        else
            ck->cfg.audio_shift = shift;
    }
    return 0;
}

/* ---- VDN ---- */

static cJSON *read_json(const char *path, strbuf *id, char *err, size_t errlen) {
    size_t len;
    char *text = vdn_read_file(path, &len, err, errlen);
    if (!text) return NULL;
    cJSON *j = cJSON_ParseWithLength(text, len);
    if (!j) vdn_fail(err, errlen, "%s: not valid JSON", path);
    if (id) sb_str(id, path + (strrchr(path, '/') ? strrchr(path, '/') - path + 1 : 0), text);
    free(text);
    return j;
}

/* The base named by model_spec.json: base.source (+ base.subfolder) as a path, absolute or
 * relative to the VDN directory; else the caller's base_dir (VDN_BASE_DIR to the vdn command);
 * else the sibling "h3-base" of the official layout (ckpts/h3-base next to ckpts/stage-*). */
static int resolve_base(const char *vdn_dir, const cJSON *base, const char *base_dir, char *out,
                        size_t n, char *err, size_t errlen) {
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(base, "source");
    const cJSON *sub = cJSON_GetObjectItemCaseSensitive(base, "subfolder");
    char tried[3][4096] = {"", "", ""};
    if (cJSON_IsString(src) && src->valuestring[0]) {
        if (src->valuestring[0] == '/')
            snprintf(tried[0], sizeof tried[0], "%s", src->valuestring);
        else
            snprintf(tried[0], sizeof tried[0], "%s/%s", vdn_dir, src->valuestring);
        char with_sub[4200];
        if (cJSON_IsString(sub) && sub->valuestring[0] && !strstr(sub->valuestring, "..")) {
            snprintf(with_sub, sizeof with_sub, "%s/%s", tried[0], sub->valuestring);
            if (exists_dir(with_sub)) {
                snprintf(out, n, "%s", with_sub);
                return 0;
            }
        }
        if (exists_dir(tried[0])) {
            snprintf(out, n, "%s", tried[0]);
            return 0;
        }
    }
    if (base_dir && base_dir[0]) {
        snprintf(tried[1], sizeof tried[1], "%s", base_dir);
        if (exists_dir(tried[1])) {
            snprintf(out, n, "%s", tried[1]);
            return 0;
        }
    }
    snprintf(tried[2], sizeof tried[2], "%s/../h3-base", vdn_dir);
    if (exists_dir(tried[2])) {
        snprintf(out, n, "%s", tried[2]);
        return 0;
    }
    return vdn_fail(err, errlen,
                    "%s/model_spec.json: base checkpoint not found (tried base.source \"%s\", "
                    "$VDN_BASE_DIR \"%s\", \"%s\")",
                    vdn_dir, tried[0], tried[1], tried[2]);
}

static int load_branch(vdn_ckpt *ck, const char *dir, strbuf *id, char *err, size_t errlen) {
    char path[4608];
    snprintf(path, sizeof path, "%s/linear_branch/model.safetensors", dir);
    ck->branch = vdn_st_set_open(path, err, errlen);
    if (!ck->branch) return -1;
    file_digest(id, vdn_st_set_file(ck->branch, 0));
    const vdn_st_file *f = vdn_st_set_file(ck->branch, 0);
    for (int i = 0; i < vdn_st_set_count(ck->branch); i++) {
        const vdn_st_entry *e = vdn_st_set_at(ck->branch, i, NULL);
        char v2[VDN_NAME_MAX];
        vdn_branch_name_v2(e->name, v2, sizeof v2);
        if (!vdn_dtype_is_float(e->dtype))
            return vdn_fail(err, errlen, "%s: tensor \"%s\": dtype %s, expected F32, BF16 or F16",
                            path, e->name, vdn_dtype_name(e->dtype));
        add_tensor(ck, v2, f, e);
    }
    /* sizes the transform config does not state: from block 0's tensors */
    const struct {
        const char *suffix;
        int dim;
        int *field;
    } derived[] = {
        {"linear_attention.alpha.down.weight", 0, &ck->cfg.alpha_rank},
        {"linear_attention.output_gate.down.weight", 0, &ck->cfg.gate_rank},
        {"linear_attention.short_conv.k_sp.weight", 2, &ck->cfg.conv_spatial},
        {"linear_attention.short_conv.k_tm.weight", 2, &ck->cfg.conv_temporal},
    };
    for (size_t k = 0; k < sizeof derived / sizeof *derived; k++) {
        char name[VDN_NAME_MAX];
        snprintf(name, sizeof name, "transformer_blocks.0.attn.%s", derived[k].suffix);
        const ck_tensor *t = NULL;
        for (int i = 0; i < ck->n && !t; i++)
            if (strcmp(ck->t[i].name, name) == 0) t = &ck->t[i];
        if (!t) return vdn_fail(err, errlen, "%s: missing tensor \"%s\"", path, name);
        if (t->ndim <= derived[k].dim || t->shape[derived[k].dim] < 1 ||
            t->shape[derived[k].dim] > 1 << 20)
            return vdn_fail(err, errlen, "%s: tensor \"%s\": unexpected shape", path, name);
        *derived[k].field = (int)t->shape[derived[k].dim];
    }
    return 0;
}

static int open_adapter(vdn_ckpt *ck, const char *path, const char *name, strbuf *id, char *err,
                        size_t errlen) {
    ck->ad = realloc(ck->ad, (size_t)(ck->n_ad + 1) * sizeof *ck->ad);
    VDN_ASSERT(ck->ad);
    vdn_lora *l = &ck->ad[ck->n_ad];
    if (vdn_lora_open(l, path, name, err, errlen)) return -1;
    ck->n_ad++;
    sb_str(id, "adapter", l->name);
    sb_str(id, "adapter-json", l->json_text);
    file_digest(id, l->file);
    return 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int open_vdn(vdn_ckpt *ck, const char *dir, const char *base_from, strbuf *id, char *err,
                    size_t errlen) {
    char path[4608], base_dir[4096];
    snprintf(path, sizeof path, "%s/model_spec.json", dir);
    cJSON *spec = read_json(path, id, err, errlen);
    if (!spec) return -1;
    int rc = -1;
    const cJSON *fv = cJSON_GetObjectItemCaseSensitive(spec, "format_version");
    const cJSON *base = cJSON_GetObjectItemCaseSensitive(spec, "base");
    const cJSON *transforms = cJSON_GetObjectItemCaseSensitive(spec, "transforms");
    const cJSON *hybrid = NULL, *t;
    if (!cJSON_IsNumber(fv) || fv->valuedouble != 2) {
        vdn_fail(err, errlen, "%s: key \"format_version\": expected 2", path);
        goto done;
    }
    if (!cJSON_IsObject(base)) {
        vdn_fail(err, errlen, "%s: key \"base\": expected an object", path);
        goto done;
    }
    if (transforms && !cJSON_IsArray(transforms)) {
        vdn_fail(err, errlen, "%s: key \"transforms\": expected an array", path);
        goto done;
    }
    cJSON_ArrayForEach(t, transforms) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(t, "type");
        if (!cJSON_IsString(ty)) {
            vdn_fail(err, errlen, "%s: transforms[]: missing \"type\"", path);
            goto done;
        }
        if (strcmp(ty->valuestring, "hybrid_attention") != 0) {
            vdn_fail(err, errlen,
                     "%s: transform type \"%s\" is not supported (expected "
                     "hybrid_attention)",
                     path, ty->valuestring);
            goto done;
        }
        hybrid = t;
    }
    snprintf(path, sizeof path, "%s/metadata.json", dir);
    cJSON *meta = read_json(path, id, err, errlen);
    if (!meta) goto done;
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(meta, "kind");
    const cJSON *cfv = cJSON_GetObjectItemCaseSensitive(meta, "checkpoint_format_version");
    int meta_ok = cJSON_IsString(kind) && strcmp(kind->valuestring, "weights") == 0 &&
                  cJSON_IsNumber(cfv) && cfv->valuedouble == 2;
    cJSON_Delete(meta);
    if (!meta_ok) {
        vdn_fail(err, errlen,
                 "%s: expected \"kind\": \"weights\" and "
                 "\"checkpoint_format_version\": 2",
                 path);
        goto done;
    }
    if (resolve_base(dir, base, base_from, base_dir, sizeof base_dir, err, errlen) ||
        open_base(ck, base_dir, id, err, errlen))
        goto done;
    qsort(ck->t, ck->n, sizeof *ck->t, cmp_tensor);
    if (hybrid) {
        char *js = cJSON_PrintUnformatted(hybrid);
        snprintf(path, sizeof path, "%s/model_spec.json", dir);
        int r = vdn_config_parse_transform(path, js, strlen(js), &ck->cfg, err, errlen);
        cJSON_free(js);
        if (r) goto done;
        /* linear_branch/config.json is a copy of the transform: it must agree */
        snprintf(path, sizeof path, "%s/linear_branch/config.json", dir);
        if (exists_file(path)) {
            size_t len;
            char *text = vdn_read_file(path, &len, err, errlen);
            if (!text) goto done;
            vdn_config copy = ck->cfg;
            r = vdn_config_parse_transform(path, text, len, &copy, err, errlen);
            free(text);
            if (r) goto done;
            if (memcmp(&copy, &ck->cfg, sizeof copy) != 0) {
                vdn_fail(err, errlen, "%s disagrees with model_spec.json transforms[]", path);
                goto done;
            }
        }
        if (load_branch(ck, dir, id, err, errlen)) goto done;
    } else {
        snprintf(path, sizeof path, "%s/linear_branch/model.safetensors", dir);
        if (exists_file(path)) {
            vdn_fail(err, errlen,
                     "%s exists but model_spec.json has no hybrid_attention "
                     "transform",
                     path);
            goto done;
        }
    }
    /* every adapter of the checkpoint, in name order (default before turbo) */
    snprintf(path, sizeof path, "%s/adapters", dir);
    DIR *d = opendir(path);
    if (d) {
        char **names = NULL;
        int n_names = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
            char sub[8192];
            snprintf(sub, sizeof sub, "%s/%s", path, de->d_name);
            if (de->d_name[0] == '.' || !exists_dir(sub)) continue;
            names = realloc(names, (size_t)(n_names + 1) * sizeof *names);
            VDN_ASSERT(names);
            names[n_names++] = vdn_xstrdup(de->d_name);
        }
        closedir(d);
        qsort(names, n_names, sizeof *names, cmp_str);
        int r = 0;
        for (int i = 0; i < n_names; i++) {
            char sub[8192];
            snprintf(sub, sizeof sub, "%s/%s", path, names[i]);
            if (!r) r = open_adapter(ck, sub, names[i], id, err, errlen);
            free(names[i]);
        }
        free(names);
        if (r) goto done;
    }
    rc = 0;
done:
    cJSON_Delete(spec);
    return rc;
}

/* ---- validation against the schema ---- */

typedef struct {
    vdn_ckpt *ck;
    int failed;
    char *err;
    size_t errlen;
    int seen;
} schema_check;

static void check_one(void *user, const char *name, int ndim, const int64_t *shape,
                      vdn_dtype dtype) {
    (void)dtype; /* any float dtype is accepted; vdn_ckpt_dtype tells the stored one */
    schema_check *s = user;
    if (s->failed) return;
    const ck_tensor *t = find(s->ck, name);
    if (!t) {
        s->failed = 1;
        vdn_fail(s->err, s->errlen, "%s: missing tensor \"%s\"", s->ck->dir, name);
        return;
    }
    s->seen++;
    int same = t->ndim == ndim;
    for (int d = 0; same && d < ndim; d++)
        same = t->shape[d] == shape[d];
    if (!same) {
        s->failed = 1;
        vdn_st_entry fake = *t->src;
        fake.name = t->name;
        fake.ndim = t->ndim;
        memcpy(fake.shape, t->shape, sizeof fake.shape);
        vdn_st_check_shape(t->file, &fake, ndim, shape, s->err, s->errlen);
    }
}

static void mark_known(void *user, const char *name, int ndim, const int64_t *shape,
                       vdn_dtype dtype) {
    (void)ndim, (void)shape, (void)dtype;
    ck_tensor *t = find(user, name);
    if (t) t->part |= 0x100; /* temporary mark, cleared below */
}

static int validate(vdn_ckpt *ck, char *err, size_t errlen) {
    schema_check s = {ck, 0, err, errlen, 0};
    int which = VDN_SCHEMA_BASE | (ck->cfg.has_vdn ? VDN_SCHEMA_VDN : 0);
    vdn_ckpt_schema(&ck->cfg, which, check_one, &s);
    if (s.failed) return -1;
    if (s.seen != ck->n) {
        vdn_ckpt_schema(&ck->cfg, which, mark_known, ck);
        int rc = 0;
        for (int i = 0; i < ck->n; i++) {
            if (!(ck->t[i].part & 0x100) && !rc)
                rc = vdn_fail(err, errlen,
                              "%s: unexpected tensor \"%s\" (not in the %d-layer schema of the "
                              "config)",
                              origin(&ck->t[i]), ck->t[i].src->name, ck->cfg.layers);
            ck->t[i].part &= 0xff;
        }
        return rc;
    }
    return 0;
}

static int attach_adapters(vdn_ckpt *ck, char *err, size_t errlen) {
    for (int a = 0; a < ck->n_ad; a++) {
        const vdn_lora *l = &ck->ad[a];
        for (int i = 0; i < l->n_pairs; i++) {
            const vdn_lora_pair *p = &l->pairs[i];
            char wname[VDN_NAME_MAX + 8];
            snprintf(wname, sizeof wname, "%s.weight", p->target);
            ck_tensor *t = find(ck, wname);
            if (!t)
                return vdn_fail(err, errlen,
                                "%s: LoRA target \"%s\" has no weight in the checkpoint (also "
                                "tried the .attn.orig. rerooting)",
                                l->path, p->target);
            if (t->ndim != 2 || t->shape[0] != p->out || t->shape[1] != p->in)
                return vdn_fail(err, errlen,
                                "%s: LoRA target \"%s\": B @ A is %" PRId64 "x%" PRId64
                                " but the weight is %" PRId64 "x%" PRId64,
                                l->path, p->target, p->out, p->in, t->shape[0],
                                t->ndim > 1 ? t->shape[1] : 0);
            t->lora = realloc(t->lora, (size_t)(t->n_lora + 1) * sizeof *t->lora);
            VDN_ASSERT(t->lora);
            t->lora[t->n_lora++] = (lora_ref){a, p};
        }
    }
    return 0;
}

/* ---- public ---- */

vdn_ckpt *vdn_ckpt_open(const char *dir, const char *const *extra_adapters, int n_extra,
                        const char *base_dir, char *err, size_t errlen) {
    vdn_ckpt *ck = vdn_xcalloc(1, sizeof *ck);
    pthread_mutex_init(&ck->mu, NULL);
    ck->dir = vdn_xstrdup(dir);
    strbuf id = {0};
    char path[4608];
    int rc;
    if (!exists_dir(dir)) {
        rc = vdn_fail(err, errlen, "%s: not a directory", dir);
    } else {
        snprintf(path, sizeof path, "%s/model_spec.json", dir);
        if (exists_file(path)) {
            rc = open_vdn(ck, dir, base_dir, &id, err, errlen);
        } else {
            rc = open_base(ck, dir, &id, err, errlen);
        }
    }
    if (!rc) qsort(ck->t, ck->n, sizeof *ck->t, cmp_tensor);
    for (int i = 1; !rc && i < ck->n; i++)
        if (strcmp(ck->t[i].name, ck->t[i - 1].name) == 0)
            rc = vdn_fail(err, errlen, "tensor \"%s\" appears twice (%s and %s)", ck->t[i].name,
                          origin(&ck->t[i - 1]), origin(&ck->t[i]));
    for (int i = 0; !rc && i < n_extra; i++)
        rc = open_adapter(ck, extra_adapters[i], NULL, &id, err, errlen);
    if (!rc) rc = validate(ck, err, errlen);
    if (!rc) rc = attach_adapters(ck, err, errlen);
    if (!rc) {
        sb_str(&id, "layout", vdn_ckpt_layout(ck));
        vdn_sha256_hex(id.s ? id.s : "", id.len, ck->identity);
    }
    free(id.s);
    if (rc) {
        vdn_ckpt_close(ck);
        return NULL;
    }
    return ck;
}

void vdn_ckpt_close(vdn_ckpt *ck) {
    if (!ck) return;
    for (int i = 0; i < ck->n; i++) {
        free(ck->t[i].name);
        free(ck->t[i].lora);
        free(ck->t[i].f32);
        free(ck->t[i].stored);
    }
    free(ck->t);
    for (int a = 0; a < ck->n_ad; a++)
        vdn_lora_free(&ck->ad[a]);
    free(ck->ad);
    vdn_st_set_close(ck->base);
    vdn_st_set_close(ck->branch);
    pthread_mutex_destroy(&ck->mu);
    free(ck->dir);
    free(ck);
}

const vdn_config *vdn_ckpt_config(const vdn_ckpt *ck) {
    return &ck->cfg;
}

static int materialize(vdn_ckpt *ck, ck_tensor *t, char *err, size_t errlen) {
    float *w = malloc((size_t)(t->numel ? t->numel : 1) * sizeof(float));
    if (!w)
        return vdn_fail(err, errlen, "%s: tensor \"%s\": out of memory for %" PRId64 " floats",
                        origin(t), t->name, t->numel);
    const uint8_t *src = t->src->data;
    const size_t es = vdn_dtype_size(t->dtype);
    if (t->xf == VDN_XF_COPY) {
        widen(src, t->dtype, t->numel, w);
    } else if (t->xf == VDN_XF_QKV) {
        /* native rows per head: [q (hd), k (hd), v (hd)]; canonical part rows: head-major */
        const int64_t hd = ck->cfg.head_dim, in = t->shape[1];
        for (int64_t h = 0; h < ck->cfg.heads; h++)
            for (int64_t d = 0; d < hd; d++) {
                int64_t from = h * 3 * hd + t->part * hd + d, to = h * hd + d;
                widen(src + (size_t)(from * in) * es, t->dtype, in, w + to * in);
            }
    } else { /* VDN_XF_SWAP: native [gate; up] -> canonical [up; gate] */
        const int64_t rows = t->shape[0], in = t->shape[1], half = rows / 2;
        for (int64_t o = 0; o < rows; o++)
            widen(src + (size_t)(((o + half) % rows) * in) * es, t->dtype, in, w + o * in);
    }
    for (int i = 0; i < t->n_lora; i++)
        if (vdn_lora_fold(w, t->dtype, &ck->ad[t->lora[i].adapter], t->lora[i].pair, 0, err,
                          errlen)) {
            free(w);
            return -1;
        }
    t->f32 = w;
    return 0;
}

/* The tensor called name, its shape checked against ndim/shape when shape is given; NULL and an
 * error naming the checkpoint and tensor otherwise. */
static ck_tensor *find_checked(vdn_ckpt *ck, const char *name, int ndim, const int64_t *shape,
                               char *err, size_t errlen) {
    ck_tensor *t = find(ck, name);
    if (!t) {
        vdn_fail(err, errlen, "%s: missing tensor \"%s\"", ck->dir, name);
        return NULL;
    }
    if (shape) {
        vdn_st_entry fake = *t->src;
        fake.name = t->name;
        fake.ndim = t->ndim;
        memcpy(fake.shape, t->shape, sizeof fake.shape);
        if (vdn_st_check_shape(t->file, &fake, ndim, shape, err, errlen)) return NULL;
    }
    return t;
}

const float *vdn_ckpt_f32(vdn_ckpt *ck, const char *name, int ndim, const int64_t *shape, char *err,
                          size_t errlen) {
    ck_tensor *t = find_checked(ck, name, ndim, shape, err, errlen);
    if (!t) return NULL;
    pthread_mutex_lock(&ck->mu);
    int rc = t->f32 ? 0 : materialize(ck, t, err, errlen);
    pthread_mutex_unlock(&ck->mu);
    return rc ? NULL : t->f32;
}

int vdn_ckpt_has(const vdn_ckpt *ck, const char *name) {
    return find(ck, name) != NULL;
}

vdn_dtype vdn_ckpt_dtype(const vdn_ckpt *ck, const char *name) {
    const ck_tensor *t = find(ck, name);
    return t ? t->dtype : VDN_DT_F32;
}

const char *vdn_ckpt_identity(const vdn_ckpt *ck) {
    return ck->identity;
}
const char *vdn_ckpt_layout(const vdn_ckpt *ck) {
    return ck->layout == VDN_LAYOUT_NATIVE ? "native" : "diffusers";
}
int vdn_ckpt_adapter_count(const vdn_ckpt *ck) {
    return ck->n_ad;
}
const char *vdn_ckpt_adapter_name(const vdn_ckpt *ck, int i) {
    return i >= 0 && i < ck->n_ad ? ck->ad[i].name : NULL;
}
int vdn_ckpt_adapter_rank(const vdn_ckpt *ck, int i) {
    return i >= 0 && i < ck->n_ad ? ck->ad[i].rank : 0;
}
int vdn_ckpt_adapter_targets(const vdn_ckpt *ck, int i) {
    return i >= 0 && i < ck->n_ad ? ck->ad[i].n_pairs : 0;
}
int vdn_ckpt_count(const vdn_ckpt *ck) {
    return ck->n;
}
const char *vdn_ckpt_name(const vdn_ckpt *ck, int i) {
    return i >= 0 && i < ck->n ? ck->t[i].name : NULL;
}
int vdn_ckpt_shape(const vdn_ckpt *ck, const char *name, int64_t shape[8]) {
    const ck_tensor *t = find(ck, name);
    if (!t) return -1;
    for (int d = 0; d < 8; d++)
        shape[d] = d < t->ndim ? t->shape[d] : 0;
    return t->ndim;
}
void vdn_ckpt_release(vdn_ckpt *ck, const char *name) {
    ck_tensor *t = find(ck, name);
    if (!t) return;
    pthread_mutex_lock(&ck->mu);
    free(t->f32);
    t->f32 = NULL;
    free(t->stored);
    t->stored = NULL;
    pthread_mutex_unlock(&ck->mu);
}

const void *vdn_ckpt_stored(vdn_ckpt *ck, const char *name, int ndim, const int64_t *shape,
                            vdn_dtype *dtype, char *err, size_t errlen) {
    ck_tensor *t = find_checked(ck, name, ndim, shape, err, errlen);
    if (!t) return NULL;
    *dtype = t->dtype;
    if (t->xf == VDN_XF_COPY && t->n_lora == 0) return t->src->data;
    pthread_mutex_lock(&ck->mu);
    int rc = 0;
    if (!t->stored) {
        /* convert and fold in float32 (exact for the stored dtype), then narrow */
        int had_f32 = t->f32 != NULL;
        rc = had_f32 ? 0 : materialize(ck, t, err, errlen);
        if (rc == 0) {
            size_t es = vdn_dtype_size(t->dtype);
            uint8_t *out = vdn_xmalloc((size_t)(t->numel ? t->numel : 1) * es);
            for (int64_t i = 0; i < t->numel; i++) {
                if (t->dtype == VDN_DT_F32) {
                    memcpy(out + 4 * i, &t->f32[i], 4);
                } else {
                    uint16_t h = t->dtype == VDN_DT_BF16 ? vdn_f32_to_bf16(t->f32[i])
                                                         : vdn_f32_to_f16(t->f32[i]);
                    memcpy(out + 2 * i, &h, 2);
                }
            }
            t->stored = out;
            if (!had_f32) { /* the float32 copy was only a step: do not keep both */
                free(t->f32);
                t->f32 = NULL;
            }
        }
    }
    pthread_mutex_unlock(&ck->mu);
    return rc ? NULL : t->stored;
}
void vdn_ckpt_bytes_by_dtype(const vdn_ckpt *ck, uint64_t bytes[VDN_DT_COUNT]) {
    memset(bytes, 0, VDN_DT_COUNT * sizeof *bytes);
    for (int i = 0; i < ck->n; i++)
        if ((int)ck->t[i].dtype >= 0 && (int)ck->t[i].dtype < VDN_DT_COUNT)
            bytes[ck->t[i].dtype] += (uint64_t)ck->t[i].numel * vdn_dtype_size(ck->t[i].dtype);
}
