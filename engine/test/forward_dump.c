/* Helper for test_forward_numpy.py: builds the tiny random model (tiny_model.h), a packed sequence
 * with two keyframes (first, last) at 13 latent frames, runs one forward per variant and writes
 * weights, inputs and outputs to one safetensors file for an independent numpy forward. */
#include <stdio.h>
#include <string.h>

#include "safetensors.h"
#include "seq.h"
#include "tiny_model.h"
#include "tiny_forward.h"

#define MAXT 400
static vdn_st_tensor T[MAXT];
static char names[MAXT][128];
static int nt;

static void put(const char *name, vdn_dtype dt, const void *data, int ndim, int64_t a, int64_t b,
                int64_t c) {
    VDN_ASSERT(nt < MAXT);
    snprintf(names[nt], sizeof names[nt], "%s", name);
    T[nt] = (vdn_st_tensor){names[nt], dt, ndim, {a, b, c}, data};
    nt++;
}
#define PUT1(n, p, a) put(n, VDN_DT_F32, p, 1, a, 0, 0)
#define PUT2(n, p, a, b) put(n, VDN_DT_F32, p, 2, a, b, 0)

static void put_block(const char *pre, const vdn_block_weights *b, const vdn_config *c, int dit) {
    char n[128];
    int hid = c->hidden, C = c->heads * c->head_dim;
#define NM(s) (snprintf(n, sizeof n, "%s.%s", pre, s), n)
    PUT1(NM("norm1"), b->norm1, hid), PUT1(NM("norm2"), b->norm2, hid);
    PUT2(NM("to_q"), b->to_q, C, hid), PUT2(NM("to_k"), b->to_k, C, hid);
    PUT2(NM("to_v"), b->to_v, C, hid), PUT2(NM("to_out"), b->to_out, hid, C);
    PUT1(NM("norm_q"), b->norm_q, c->head_dim), PUT1(NM("norm_k"), b->norm_k, c->head_dim);
    PUT2(NM("ff_in"), b->ff_in, 2 * c->ffn, hid), PUT2(NM("ff_out"), b->ff_out, hid, c->ffn);
    if (!dit) return;
    PUT2(NM("ada_w"), b->ada_w, 18 * hid, c->time_embed_dim), PUT1(NM("ada_b"), b->ada_b, 18 * hid);
    PUT2(NM("sg_w"), b->sg_w, c->heads, hid), PUT1(NM("sg_b"), b->sg_b, c->heads);
    PUT2(NM("to_out_linear"), b->to_out_linear, hid, C);
    const vdn_vda_weights *v = &b->vda;
    PUT2(NM("k_sp"), v->k_sp, C, 25), PUT2(NM("v_sp"), v->v_sp, C, 25);
    PUT2(NM("k_tm"), v->k_tm, C, 5), PUT2(NM("v_tm"), v->v_tm, C, 5);
    PUT2(NM("beta_w"), v->beta_w, c->heads, hid);
    PUT2(NM("alpha_down"), v->alpha_down, c->alpha_rank, hid);
    PUT2(NM("alpha_up"), v->alpha_up, C, c->alpha_rank);
    PUT1(NM("A_log"), v->A_log, c->heads), PUT1(NM("dt_bias"), v->dt_bias, C);
    PUT2(NM("gate_down"), v->gate_down, c->gate_rank, hid);
    PUT2(NM("gate_up"), v->gate_up, C, c->gate_rank), PUT1(NM("gate_up_b"), v->gate_up_b, C);
    PUT1(NM("lin_norm"), v->norm_w, c->head_dim);
#undef NM
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: forward_dump OUT.safetensors\n");
        return 2;
    }
    vdn_config c = tiny_config(1);
    c.layers = 2;
    vdn_weights w;
    random_weights(&w, &c);
    int L = 5, F = 13, lh = 4, lw = 6, La = 7, anchors[2] = {VDN_KF_FIRST, VDN_KF_LAST};
    int8_t tags[5] = {1, 0, 0, 1, 1};
    vdn_seq s;
    char err[VDN_ERR_LEN];
    if (vdn_seq_build(&s, &c, tags, L, F, lh, lw, La, 2, anchors, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    vdn_seq_timesteps(&s, 0.3f, 0.55f);
    const vdn_layout *lay = &s.lay;
    int pf = 12, nv = lay->n_video * pf, na = lay->n_audio * 4, nc = lay->n_cond * pf;
    float *emb = rnd_arr(L * c.text_dim, 1), *vx = rnd_arr(nv, 1), *ax = rnd_arr(na, 1);
    float *cx = rnd_arr(nc, 1), *text = vdn_xmalloc(sizeof(float) * L * c.hidden);
    tiny_refine_text(text, emb, L, &w, &c);
    static float vout[5][4096], aout[5][1024];
    VDN_ASSERT(nv <= 4096 && na <= 1024);
    for (int m = 0; m < 5; m++) {
        vdn_step_inputs in = {
            lay,   vx,        cx,         ax,    s.tags,
            s.pos, s.t_index, s.t_values, s.n_t, vdn_attn_plan_make(&c, (vdn_attn_mode)m, F)};
        if (tiny_forward(&w, &c, text, &in, vout[m], aout[m], err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        char n[64];
        snprintf(n, sizeof n, "out_video.%s", vdn_attn_mode_name((vdn_attn_mode)m));
        put(n, VDN_DT_F32, vout[m], 2, lay->n_video, pf, 0);
        snprintf(n, sizeof n, "out_audio.%s", vdn_attn_mode_name((vdn_attn_mode)m));
        put(n, VDN_DT_F32, aout[m], 2, lay->n_audio, 4, 0);
    }
    int hid = c.hidden;
    PUT2("proj_in_w", w.proj_in_w, hid, pf), PUT1("proj_in_b", w.proj_in_b, hid);
    PUT2("audio_in_w", w.audio_in_w, hid, 4), PUT1("audio_in_b", w.audio_in_b, hid);
    PUT2("ctx_w", w.ctx_w, hid, c.text_dim), PUT1("ctx_b", w.ctx_b, hid);
    PUT2("t1_w", w.t1_w, c.time_hidden, c.freq_dim), PUT1("t1_b", w.t1_b, c.time_hidden);
    PUT2("t2_w", w.t2_w, c.time_embed_dim, c.time_hidden), PUT1("t2_b", w.t2_b, c.time_embed_dim);
    PUT1("refiner_final_norm", w.refiner_final_norm, hid), PUT1("norm_out_w", w.norm_out_w, hid);
    PUT2("norm_out_lin_w", w.norm_out_lin_w, 2 * hid, c.time_embed_dim);
    PUT1("norm_out_lin_b", w.norm_out_lin_b, 2 * hid);
    PUT2("proj_out_w", w.proj_out_w, pf, hid), PUT1("proj_out_b", w.proj_out_b, pf);
    PUT2("audio_out_w", w.audio_out_w, 4, hid), PUT1("audio_out_b", w.audio_out_b, 4);
    put_block("refiner0", &w.refiner[0], &c, 0);
    put_block("block0", &w.blocks[0], &c, 1);
    put_block("block1", &w.blocks[1], &c, 1);
    PUT2("in_text", emb, L, c.text_dim);
    PUT2("in_video", vx, lay->n_video, pf), PUT2("in_cond", cx, lay->n_cond, pf);
    PUT2("in_audio", ax, lay->n_audio, 4);
    put("in_tags", VDN_DT_U8, s.tags, 1, lay->n_rows, 0, 0);
    put("in_t_index", VDN_DT_I32, s.t_index, 1, lay->n_rows, 0, 0);
    PUT1("in_t_values", s.t_values, s.n_t);
    char lay_s[256];
    snprintf(lay_s, sizeof lay_s, "%d %d %d %d %d %d %d %d %d %d", lay->n_text, lay->n_cond,
             lay->n_audio, lay->n_video, lay->frames, lay->grid_h, lay->grid_w, L, La, 2);
    char cfg_s[512];
    snprintf(cfg_s, sizeof cfg_s,
             "{\"hidden\": %d, \"heads\": %d, \"head_dim\": %d, \"ffn\": %d, \"layers\": %d, "
             "\"text_dim\": %d, \"freq_dim\": %d, \"rope_freq_dim\": %d, \"rope_theta\": %g, "
             "\"norm_eps\": %g, \"chunk\": %d, \"radius\": %d, \"linear_norm_eps\": %g, "
             "\"text_state_scale\": %g}",
             c.hidden, c.heads, c.head_dim, c.ffn, c.layers, c.text_dim, c.freq_dim,
             c.rope_freq_dim, c.rope_theta, c.norm_eps, c.chunk, c.radius, c.linear_norm_eps,
             c.text_state_scale);
    vdn_st_kv meta[2] = {{"layout", lay_s}, {"config", cfg_s}};
    if (vdn_st_write(argv[1], T, nt, meta, 2, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    return 0;
}
