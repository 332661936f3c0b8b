/* `vdn bench` on the GPU: one MiniMax-H3 / VDN-H3 block op by op at the H3 workload, random
 * weights generated on the device, CUDA events, warm-up then the median of repeats. What is
 * measured and what is summed is printed and written to the JSON. */
#include <algorithm>
#include <cublas_v2.h>
#include <math.h>
#include <string.h>
#include <time.h>
#include <vector>

#include "attn_tiles.h"
#include "bench.h"
#include "bench_time.cuh"
#include "cuda_util.cuh"

namespace {

struct Row {
    char name[64];
    double ms;
    double tflops;
};
std::vector<Row> rows;

double put(const char *name, double ms, double flops) {
    Row r;
    snprintf(r.name, sizeof r.name, "%s", name);
    r.ms = ms;
    r.tflops = flops > 0 ? flops / ms / 1e9 : 0;
    rows.push_back(r);
    if (flops > 0)
        printf("%-46s %10.3f ms %8.1f TFLOP/s\n", name, ms, r.tflops);
    else
        printf("%-46s %10.3f ms\n", name, ms);
    fflush(stdout);
    return ms;
}

void *dalloc(size_t bytes, int *err) {
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
        fprintf(stderr, "vdn bench: cudaMalloc(%zu bytes): %s\n", bytes, cudaGetErrorString(e));
        *err = 1;
        return NULL;
    }
    return p;
}

} // namespace

extern "C" int vdn_bench_cuda(const vdn_bench_opts *o) {
    int err = 0;
    int dev_count = 0;
    if (cudaGetDeviceCount(&dev_count) != cudaSuccess || dev_count == 0) {
        fprintf(stderr, "vdn bench: no CUDA GPU is visible on this machine\n");
        return -1;
    }
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    const int F = o->frames, S = o->gh * o->gw, H = 56, D = 128, HID = 5376, FFN = 14336;
    const int C = H * D, NG = o->text + o->audio, N = NG + F * S;
    const int FI = F - 2, TV = F * S; /* interior frames of the branch; target video rows */
    const int EXTRA = 56 + 56 + 128;  /* softmax gate | beta | output-gate down, fused into QKV */
    const int LDQ = 3 * C + EXTRA;
    time_t now = time(NULL);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    printf("vdn bench  %s  %s (%d SMs)  frames %d  tokens/frame %d  N %d  heads %dx%d\n", date,
           prop.name, prop.multiProcessorCount, F, S, N, H, D);

    /* ---- buffers ---- */
    bf16 *x = (bf16 *)dalloc((size_t)N * HID * 2, &err),
         *hm = (bf16 *)dalloc((size_t)N * HID * 2, &err);
    bf16 *qkv = (bf16 *)dalloc((size_t)N * LDQ * 2, &err);
    bf16 *qr = (bf16 *)dalloc((size_t)N * C * 2, &err),
         *kr = (bf16 *)dalloc((size_t)N * C * 2, &err);
    bf16 *ao = (bf16 *)dalloc((size_t)N * C * 2, &err),
         *y = (bf16 *)dalloc((size_t)N * HID * 2, &err);
    bf16 *fh = (bf16 *)dalloc((size_t)N * 2 * FFN * 2, &err),
         *fa = (bf16 *)dalloc((size_t)N * FFN * 2, &err);
    bf16 *tab = (bf16 *)dalloc((size_t)3 * 18 * HID * 2, &err);
    int *idx = (int *)dalloc((size_t)N * 4, &err);
    double *pos = (double *)dalloc((size_t)N * 3 * 8, &err);
    float *invf = (float *)dalloc(48 * 4, &err);
    bf16 *Wcat = (bf16 *)dalloc((size_t)LDQ * HID * 2, &err),
         *Wo = (bf16 *)dalloc((size_t)HID * C * 2, &err);
    bf16 *W1 = (bf16 *)dalloc((size_t)2 * FFN * HID * 2, &err),
         *W2 = (bf16 *)dalloc((size_t)HID * FFN * 2, &err);
    bf16 *Wlin = (bf16 *)dalloc((size_t)HID * C * 2, &err),
         *Wgup = (bf16 *)dalloc((size_t)C * 128 * 2, &err);
    bf16 *bgup = (bf16 *)dalloc((size_t)C * 2, &err), *wqn = (bf16 *)dalloc(256, &err),
         *wkn = (bf16 *)dalloc(256, &err);
    bf16 *wn = (bf16 *)dalloc(256, &err), *wnorm = (bf16 *)dalloc((size_t)HID * 2, &err);
    bf16 *wsk = (bf16 *)dalloc((size_t)C * 25 * 2, &err),
         *wsv = (bf16 *)dalloc((size_t)C * 25 * 2, &err);
    bf16 *wtk = (bf16 *)dalloc((size_t)C * 5 * 2, &err),
         *wtv = (bf16 *)dalloc((size_t)C * 5 * 2, &err);
    float *Wdn = (float *)dalloc((size_t)128 * HID * 4, &err),
          *Wup = (float *)dalloc((size_t)C * 128 * 4, &err);
    float *dtb = (float *)dalloc((size_t)C * 4, &err), *Alog = (float *)dalloc(H * 4, &err);
    bf16 *Wada = (bf16 *)dalloc((size_t)96768 * 2688 * 2, &err),
         *ada_in = (bf16 *)dalloc(2 * 2688 * 2, &err);
    bf16 *ada_out = (bf16 *)dalloc((size_t)2 * 96768 * 2, &err);
    float *Wpe = (float *)dalloc((size_t)HID * 96 * 4, &err),
          *Whd = (float *)dalloc((size_t)128 * HID * 4, &err);
    float *pin = (float *)dalloc((size_t)TV * 96 * 4, &err),
          *hin = (float *)dalloc((size_t)N * HID * 4, &err);
    float *hout = (float *)dalloc((size_t)N * 128 * 4, &err),
          *pout = (float *)dalloc((size_t)TV * HID * 4, &err);
    /* VDA */
    const size_t fs = (size_t)FI * S, mats = (size_t)FI * H * D * D;
    bf16 *kb = (bf16 *)dalloc(fs * C * 2, &err);
    bf16 *vt = (bf16 *)dalloc(fs * C * 2, &err), *qt = (bf16 *)dalloc(fs * C * 2, &err);
    float *ks = (float *)dalloc(fs * C * 4, &err); /* fp32 sqrt(beta) k~ for A */
    float *beta = (float *)dalloc((size_t)N * H * 4, &err),
          *sg = (float *)dalloc((size_t)N * H * 4, &err);
    float *A = (float *)dalloc(mats * 4, &err), *B = (float *)dalloc(mats * 4, &err);
    float *T = (float *)dalloc(mats * 4, &err), *J = (float *)dalloc(mats * 4, &err);
    float *P = (float *)dalloc(mats * 4, &err), *R = (float *)dalloc(mats * 4, &err);
    bf16 *Sl = (bf16 *)dalloc(mats * 2, &err);
    float *rr = (float *)dalloc(fs * C * 4, &err);
    bf16 *gpre = (bf16 *)dalloc((size_t)TV * C * 2, &err),
         *lin = (bf16 *)dalloc((size_t)TV * C * 2, &err);
    float *alpha = (float *)dalloc((size_t)FI * C * 4, &err),
          *means = (float *)dalloc((size_t)FI * HID * 4, &err);
    float *dvec = (float *)dalloc((size_t)FI * 128 * 4, &err),
          *uvec = (float *)dalloc((size_t)FI * C * 4, &err);
    float *S0 = (float *)dalloc((size_t)H * D * D * 4, &err);
    int *dwin = (int *)dalloc((size_t)FI * 8, &err);
    if (err) return -1;

    /* ---- random contents (never zeros: they run faster than real data) ---- */
    uint64_t seed = 1;
    auto rb = [&](void *p, size_t n, float sc) { err |= vdn_k_randn_bf16(p, n, seed++, sc, 0); };
    auto rf = [&](float *p, size_t n, float sc, float off) {
        err |= vdn_k_randn_f32(p, n, seed++, sc, off, 0);
    };
    rb(x, (size_t)N * HID, 1.f);
    rb(tab, (size_t)3 * 18 * HID, .1f);
    rb(Wcat, (size_t)LDQ * HID, .02f), rb(Wo, (size_t)HID * C, .02f),
        rb(W1, (size_t)2 * FFN * HID, .02f);
    rb(W2, (size_t)HID * FFN, .02f), rb(Wlin, (size_t)HID * C, .02f),
        rb(Wgup, (size_t)C * 128, .05f);
    rb(bgup, C, .1f), rb(wqn, 128, 1.f), rb(wkn, 128, 1.f), rb(wn, 128, 1.f), rb(wnorm, HID, 1.f);
    rb(wsk, (size_t)C * 25, .2f), rb(wsv, (size_t)C * 25, .2f), rb(wtk, (size_t)C * 5, .45f),
        rb(wtv, (size_t)C * 5, .45f);
    rf(Wdn, (size_t)128 * HID, .02f, 0), rf(Wup, (size_t)C * 128, .05f, 0), rf(dtb, C, .5f, -3.f),
        rf(Alog, H, .3f, 1.f);
    rb(Wada, (size_t)96768 * 2688, .02f), rb(ada_in, 2 * 2688, 1.f);
    rf(Wpe, (size_t)HID * 96, .05f, 0), rf(Whd, (size_t)128 * HID, .02f, 0),
        rf(pin, (size_t)TV * 96, 1.f, 0);
    rf(hin, (size_t)N * HID, 1.f, 0), rf(S0, (size_t)H * D * D, .05f, 0);
    rb(qkv, (size_t)N * LDQ, 1.f);
    err |= vdn_k_rand_uniform_f32(beta, (size_t)N * H, seed++, 0.f, 1.f, 0);
    err |= vdn_k_rand_uniform_f32(sg, (size_t)N * H, seed++, 0.f, 1.f, 0);
    {
        std::vector<int> hidx(N);
        std::vector<double> hpos((size_t)N * 3);
        for (int r = 0; r < N; r++) {
            hidx[r] = r < o->text ? 1 : (r < NG ? 2 : 0);
            int v = r - NG;
            hpos[3 * r] = r < NG ? r : NG + (v / S) * 5.0;
            hpos[3 * r + 1] = r < NG ? 0 : (v % S) / o->gw;
            hpos[3 * r + 2] = r < NG ? 0 : (v % S) % o->gw;
        }
        float hf[48]; /* one per rotated pair: the 16 frequencies for each position axis */
        for (int j = 0; j < 48; j++)
            hf[j] = (float)pow(10000.0, -2.0 * (j % 16) / 32.0);
        CUDA_CHECK(cudaMemcpy(idx, hidx.data(), (size_t)N * 4, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(pos, hpos.data(), (size_t)N * 24, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(invf, hf, sizeof hf, cudaMemcpyHostToDevice));
        /* the branch frames' windows (the end frames skipped, chunk 5, radius 1), rebased */
        std::vector<int> w2(2 * FI);
        for (int t = 0; t < FI; t++) {
            const int c = (t + 1) / 5;
            w2[2 * t] = (c - 1) * 5 - 1, w2[2 * t + 1] = (c + 2) * 5 - 1 - 1;
        }
        CUDA_CHECK(cudaMemcpy(dwin, w2.data(), (size_t)FI * 8, cudaMemcpyHostToDevice));
    }
    /* attention plans: dense, and VDN window + anchors */
    vdn_attn_rows ard, arw;
    int ntd, ntw;
    if (vdn_attn_rows_make(&ard, NG, F, S, 0, 0, 5, 1) ||
        vdn_attn_rows_make(&arw, NG, F, S, 1, 1, 5, 1))
        return -1;
    int *htd = vdn_attn_tiles_make(&ard, VDN_ATTN_BM, &ntd),
        *htw = vdn_attn_tiles_make(&arw, VDN_ATTN_BM, &ntw);
    int *dtd = (int *)dalloc((size_t)ntd * 32, &err), *dtw = (int *)dalloc((size_t)ntw * 32, &err);
    int *dld = (int *)dalloc((size_t)N * 8, &err), *dlw = (int *)dalloc((size_t)N * 8, &err);
    if (err || !htd || !htw) return -1;
    {
        std::vector<int> l2((size_t)N * 2);
        for (int r = 0; r < N; r++)
            l2[2 * r] = ard.lo[r], l2[2 * r + 1] = ard.hi[r];
        CUDA_CHECK(cudaMemcpy(dld, l2.data(), (size_t)N * 8, cudaMemcpyHostToDevice));
        for (int r = 0; r < N; r++)
            l2[2 * r] = arw.lo[r], l2[2 * r + 1] = arw.hi[r];
        CUDA_CHECK(cudaMemcpy(dlw, l2.data(), (size_t)N * 8, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(dtd, htd, (size_t)ntd * 32, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(dtw, htw, (size_t)ntw * 32, cudaMemcpyHostToDevice));
    }
    const double dense_pairs = vdn_attn_rows_pairs(&ard), win_pairs = vdn_attn_rows_pairs(&arw);
    vdn_gemm_ctx *gc = vdn_gemm_create((size_t)64 << 20);
    void *cb = vdn_cublas_create();
    if (!gc || !cb) return -1;
    CUDA_CHECK(cudaDeviceSynchronize());
    if (err) return -1;

    const int W0 = 1, NREP = o->reps, RA = o->attn_reps;
    const float sc = 1.f / sqrtf((float)D);
    const int ld6 = 6 * HID; /* one adaLN row (timestep, modality): 6 vectors of `hidden` */
    auto gflop = [](double m, double n, double k) { return 2.0 * m * n * k; };

    printf("-- GEMMs (cuBLASLt, bf16, fp32 accumulate) --\n");
    double g_qkv = put("gemm qkv 5376->3x7168",
                       time_ms(
                           [&] {
                               return vdn_gemm_bf16(gc, hm, HID, Wcat, HID, qkv, LDQ, N, 3 * C, HID,
                                                    NULL, 0, 0);
                           },
                           W0, NREP, &err),
                       gflop(N, 3 * C, HID));
    double g_cat =
        put("gemm qkv+gates+beta 5376->21744",
            time_ms(
                [&] {
                    return vdn_gemm_bf16(gc, hm, HID, Wcat, HID, qkv, LDQ, N, LDQ, HID, NULL, 0, 0);
                },
                W0, NREP, &err),
            gflop(N, LDQ, HID));
    double g_o =
        put("gemm o 7168->5376",
            time_ms([&] { return vdn_gemm_bf16(gc, ao, C, Wo, C, y, HID, N, HID, C, NULL, 0, 0); },
                    W0, NREP, &err),
            gflop(N, HID, C));
    double g_f1 = put("gemm ffn in 5376->28672",
                      time_ms(
                          [&] {
                              return vdn_gemm_bf16(gc, hm, HID, W1, HID, fh, 2 * FFN, N, 2 * FFN,
                                                   HID, NULL, 0, 0);
                          },
                          W0, NREP, &err),
                      gflop(N, 2 * FFN, HID));
    double g_f2 = put(
        "gemm ffn out 14336->5376",
        time_ms(
            [&] { return vdn_gemm_bf16(gc, fa, FFN, W2, FFN, y, HID, N, HID, FFN, NULL, 0, 0); },
            W0, NREP, &err),
        gflop(N, HID, FFN));
    double g_four = put(
        "block GEMMs (qkv,o,ffn13,ffn2) back to back",
        time_ms(
            [&] {
                int e = vdn_gemm_bf16(gc, hm, HID, Wcat, HID, qkv, LDQ, N, 3 * C, HID, NULL, 0, 0);
                e |= vdn_gemm_bf16(gc, ao, C, Wo, C, y, HID, N, HID, C, NULL, 0, 0);
                e |= vdn_gemm_bf16(gc, hm, HID, W1, HID, fh, 2 * FFN, N, 2 * FFN, HID, NULL, 0, 0);
                e |= vdn_gemm_bf16(gc, fa, FFN, W2, FFN, y, HID, N, HID, FFN, NULL, 0, 0);
                return e;
            },
            W0, NREP, &err),
        gflop(N, 3 * C, HID) + gflop(N, HID, C) + gflop(N, 2 * FFN, HID) + gflop(N, HID, FFN));
    double g_gup = put("gemm output-gate up 128->7168 (video rows)",
                       time_ms(
                           [&] {
                               return vdn_gemm_bf16(gc, qkv + 3 * C + 112, LDQ, Wgup, 128, gpre, C,
                                                    TV, C, 128, bgup, 0, 0);
                           },
                           W0, NREP, &err),
                       gflop(TV, C, 128));
    double g_lin = put("gemm to_out_linear 7168->5376 (+=, video)",
                       time_ms(
                           [&] {
                               return vdn_gemm_bf16(gc, lin, C, Wlin, C, y + (size_t)NG * HID, HID,
                                                    TV, HID, C, NULL, 1, 0);
                           },
                           W0, NREP, &err),
                       gflop(TV, HID, C));
    (void)g_qkv;

    printf("-- per-row kernels --\n");
    double e_norm = put("rmsnorm + adaLN modulate",
                        time_ms(
                            [&] {
                                return vdn_k_rmsnorm_modulate(x, wnorm, tab, tab + HID, idx, ld6, N,
                                                              HID, 1e-5f, hm, 0);
                            },
                            W0, NREP, &err),
                        0);
    double e_gate =
        put("gate + residual",
            time_ms([&] { return vdn_k_gate_residual(x, y, tab + 2 * HID, idx, ld6, N, HID, 0); },
                    W0, NREP, &err),
            0);
    double e_swi =
        put("swiglu", time_ms([&] { return vdn_k_swiglu(fh, N, FFN, fa, 0); }, W0, NREP, &err), 0);
    double e_rope = put("qk-norm + rope (q and k)",
                        time_ms(
                            [&] {
                                return vdn_k_qknorm_rope(qkv, qkv + C, LDQ, pos, invf, wqn, wkn, N,
                                                         H, 1e-5f, qr, kr, C, 0);
                            },
                            W0, NREP, &err),
                        0);
    double e_sig = put("sigmoid softmax-gate + beta",
                       time_ms(
                           [&] {
                               int e = vdn_k_sigmoid_cols(qkv, LDQ, 3 * C, H, N, NULL, sg, 0);
                               e |= vdn_k_sigmoid_cols(qkv + (size_t)(NG + S) * LDQ, LDQ, 3 * C + H,
                                                       H, (int)fs, NULL, beta, 0);
                               return e;
                           },
                           W0, NREP, &err),
                       0);

    printf("-- attention (block-sparse flash, bf16, fp32 accumulation) --\n");
    rb(qr, (size_t)N * C, 1.f), rb(kr, (size_t)N * C, 1.f);
    bf16 *vts = (bf16 *)dalloc(vdn_attention_vt_elems(N, H, D) * 2, &err);
    const double dflop = 4.0 * dense_pairs * H * D, wflop = 4.0 * win_pairs * H * D;
    put("attention dense (mma.sync)",
        time_ms(
            [&] {
                return vdn_k_attention(qr, C, kr, C, qkv + 2 * C, LDQ, N, H, dld, ard.head_end,
                                       ard.tail_start, dtd, ntd, sc, NULL, ao, C, 0);
            },
            1, RA, &err),
        dflop);
    /* the engine's kernel (the portable mma.sync one above is its fallback); the names keep the
     * "(wgmma TMA ping-pong)" suffix of the recorded runs, which compared the variants */
    auto wgmma = [&](const char *label, const int *dl, const auto &ar, const int *dt, int nt,
                     const float *gate, double flop) {
        char name[128];
        snprintf(name, sizeof name, "%s (wgmma TMA ping-pong)", label);
        return put(name,
                   time_ms(
                       [&] {
                           return vdn_k_attention_wgmma(qr, C, kr, C, qkv + 2 * C, LDQ, vts, N, H,
                                                        D, dl, ar.head_end, ar.tail_start, dt, nt,
                                                        sc, gate, ao, C, 0);
                       },
                       1, RA, &err),
                   flop);
    };
    const double a_dense = wgmma("attention dense", dld, ard, dtd, ntd, NULL, dflop);
    char wname[80];
    snprintf(wname, sizeof wname, "attention window+anchors %.1f%% (mma.sync)",
             100.0 * win_pairs / dense_pairs);
    put(wname,
        time_ms(
            [&] {
                return vdn_k_attention(qr, C, kr, C, qkv + 2 * C, LDQ, N, H, dlw, arw.head_end,
                                       arw.tail_start, dtw, ntw, sc, sg, ao, C, 0);
            },
            1, RA, &err),
        wflop);
    char wlabel[80];
    snprintf(wlabel, sizeof wlabel, "attention window+anchors %.1f%%",
             100.0 * win_pairs / dense_pairs);
    const double a_win = wgmma(wlabel, dlw, arw, dtw, ntw, sg, wflop);

    printf("-- VDA linear branch (interior frames %d x %d heads) --\n", FI, H);
    const bf16 *vrow = qkv + (size_t)(NG + S) * LDQ; /* first interior frame */
    double v_alpha = put("alpha: frame means + projections",
                         time_ms(
                             [&] {
                                 int e = vdn_k_frame_means(hm + (size_t)(NG + S) * HID, HID, FI, S,
                                                           HID, means, 0);
                                 e |= vdn_sgemm_f32(cb, means, Wdn, dvec, FI, 128, HID, 0);
                                 e |= vdn_sgemm_f32(cb, dvec, Wup, uvec, FI, C, 128, 0);
                                 e |= vdn_k_alpha_finish(uvec, dtb, Alog, FI, C, alpha, 0);
                                 return e;
                             },
                             W0, NREP, &err),
                         0);
    /* one pass (run 32: 13.0 ms where the former spatial conv + temporal/act kernels took
     * 7.8 + 5.8 ms) */
    const double v_prep =
        put("prep: fused (5x5, 5-tap, silu, l2, beta, layout)",
            time_ms(
                [&] {
                    return vdn_k_vda_prep(vrow + C, vrow + 2 * C, vrow, LDQ, FI, o->gh, o->gw, H,
                                          wsk, wtk, wsv, wtv, beta, NULL, kb, vt, qt, ks, 0);
                },
                W0, NREP, &err),
            0);
    double v_stats =
        put("stats A (fp32, TF32), B (bf16)",
            time_ms([&] { return vdn_k_vda_stats(cb, ks, kb, vt, FI * H, S, A, B, 0); }, W0, NREP,
                    &err),
            4.0 * (double)FI * H * D * D * S);
    err |= vdn_k_alpha_finish(uvec, dtb, Alog, FI, C, alpha, 0);
    double v_solve = put(
        "solve (I+A)^-1, T, J (sweep)",
        time_ms([&] { return vdn_k_vda_solve(A, B, alpha, FI * H, T, J, 0, 0); }, W0, NREP, &err),
        0);
    /* where the solve's time goes (diagnostics, not counted): without J = B M, and J = B M
     * alone as one batched fp32 cuBLAS product */
    put("  solve diagnostic: inverse and T only (J skipped)",
        time_ms([&] { return vdn_k_vda_solve(A, B, alpha, FI * H, T, NULL, 0, 0); }, W0, NREP,
                &err),
        0);
    put("  solve diagnostic: J = B M alone (cuBLAS fp32)",
        time_ms(
            [&] {
                float one = 1.f, zero = 0.f;
                cublasHandle_t hd = (cublasHandle_t)cb;
                return (int)cublasSgemmStridedBatched(
                    hd, CUBLAS_OP_N, CUBLAS_OP_N, D, D, D, &one, T, D, (long long)D * D, B, D,
                    (long long)D * D, &zero, J, D, (long long)D * D, FI * H);
            },
            W0, NREP, &err),
        2.0 * FI * H * (double)D * D * D);
    err |= vdn_k_vda_solve(A, B, alpha, FI * H, T, J, 0, 0); /* T, J for the scans */
    double v_scan =
        put("scans forward + reverse",
            time_ms([&] { return vdn_k_vda_scans(T, J, S0, FI, H, P, R, 0); }, W0, NREP, &err),
            2.0 * 2.0 * FI * H * (double)D * D * D);
    /* half the CTAs (forward only): time falls with the CTAs per SM if the SMs are busy, stays
     * if each CTA's step chain is the limit */
    put("  scans diagnostic: forward only (224 CTAs)",
        time_ms([&] { return vdn_k_vda_scans(T, J, S0, FI, H, P, NULL, 0); }, W0, NREP, &err),
        2.0 * FI * H * (double)D * D * D);
    double v_gath =
        put("gather + alpha bridge",
            time_ms([&] { return vdn_k_vda_gather(P, R, S0, alpha, dwin, FI, H, Sl, 0); }, W0, NREP,
                    &err),
            0);
    double v_read = put(
        "readout S q (batched cuBLAS)",
        time_ms([&] { return vdn_k_vda_readout(cb, Sl, qt, FI * H, S, rr, 0); }, W0, NREP, &err),
        gflop(FI * H, D, (double)S * D));
    double v_epi = put("epilogue rmsnorm, gate, layout",
                       time_ms(
                           [&] {
                               return vdn_k_vda_epilogue(rr, wn, 1e-6f, gpre + (size_t)S * C, C, FI,
                                                         S, H, lin + (size_t)S * C, C, 0);
                           },
                           W0, NREP, &err),
                       0);
    double v_text =
        put("text state (prep, stats, solve)",
            time_ms(
                [&] {
                    int e = vdn_k_vda_act(qkv + C, LDQ, qkv + 2 * C, LDQ, NULL, 0, NULL, NULL, beta,
                                          1, o->text, H, NULL, kb, vt, NULL, ks, 0);
                    e |= vdn_k_vda_stats(cb, ks, kb, vt, H, o->text, A, B, 0);
                    e |= vdn_k_vda_solve(A, B, NULL, H, NULL, S0, 0, 0);
                    return e;
                },
                W0, NREP, &err),
            0);

    printf("-- per model evaluation, outside the blocks --\n");
    double x_ada = put("adaLN projection of one block (2 timesteps)",
                       time_ms(
                           [&] {
                               return vdn_gemm_bf16(gc, ada_in, 2688, Wada, 2688, ada_out, 96768, 2,
                                                    96768, 2688, NULL, 0, 0);
                           },
                           W0, NREP, &err),
                       0);
    double x_pe = put(
        "video patch embed 96->5376 fp32",
        time_ms([&] { return vdn_sgemm_f32(cb, pin, Wpe, pout, TV, HID, 96, 0); }, W0, NREP, &err),
        gflop(TV, HID, 96));
    double x_hd = put("final norm + heads 5376->96+32 fp32",
                      time_ms(
                          [&] {
                              int e = vdn_k_rmsnorm_modulate(x, wnorm, NULL, NULL, NULL, 0, N, HID,
                                                             1e-5f, hm, 0);
                              e |= vdn_sgemm_f32(cb, hin, Whd, hout, N, 128, HID, 0);
                              return e;
                          },
                          W0, NREP, &err),
                      gflop(N, 128, HID));
    if (err) {
        fprintf(stderr, "vdn bench: a kernel failed (see above)\n");
        return -1;
    }

    const double elem = 2 * e_norm + 2 * e_gate + e_swi + e_rope;
    const double dense_blk = g_four + a_dense + elem;
    const double vda =
        v_alpha + v_prep + v_stats + v_solve + v_scan + v_gath + v_read + v_epi + v_text;
    const double vdn_blk = (g_four - (g_qkv) + g_cat) + a_win + elem + e_sig + g_gup + g_lin + vda;
    const double outside = 51 * x_ada + x_pe + x_hd;
    printf("-- estimates (sums of the measured ops above) --\n");
    printf("%-46s %10.3f ms\n", "dense block", dense_blk);
    printf("%-46s %10.3f ms  (VDA part %.3f ms)\n", "VDN block", vdn_blk, vda);
    printf("%-46s %10.3f s\n", "dense s/NFE (50 blocks + embed/heads)",
           (50 * dense_blk + outside) / 1e3);
    printf("%-46s %10.3f s\n", "VDN s/NFE (50 blocks + embed/heads)",
           (50 * vdn_blk + outside) / 1e3);
    if (o->json) {
        FILE *f = fopen(o->json, "w");
        if (!f) {
            fprintf(stderr, "vdn bench: cannot write %s\n", o->json);
            return -1;
        }
        fprintf(f,
                "{\n \"date\": \"%s\",\n \"gpu\": \"%s\",\n \"frames\": %d,\n \"N\": %d,\n "
                "\"ops\": {\n",
                date, prop.name, F, N);
        for (size_t i = 0; i < rows.size(); i++)
            fprintf(f, "  \"%s\": {\"ms\": %.4f, \"tflops\": %.2f}%s\n", rows[i].name, rows[i].ms,
                    rows[i].tflops, i + 1 < rows.size() ? "," : "");
        fprintf(
            f,
            " },\n \"summed\": {\"dense_block_ms\": %.3f, \"vdn_block_ms\": %.3f, \"vda_ms\": "
            "%.3f, "
            "\"outside_blocks_ms\": %.3f, \"dense_s_per_nfe\": %.4f, \"vdn_s_per_nfe\": %.4f}\n}\n",
            dense_blk, vdn_blk, vda, outside, (50 * dense_blk + outside) / 1e3,
            (50 * vdn_blk + outside) / 1e3);
        fclose(f);
    }
    vdn_gemm_destroy(gc);
    vdn_cublas_destroy(cb);
    vdn_attn_rows_free(&ard);
    vdn_attn_rows_free(&arw);
    free(htd);
    free(htw);
    cudaDeviceReset();
    return 0;
}
