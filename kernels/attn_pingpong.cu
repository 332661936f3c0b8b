/* The engine's attention kernel on Hopper (vdn_k_attention_wgmma, launched by attn_wgmma.cu):
 * block-sparse flash attention on Hopper, bf16 in, fp32 accumulation, head dim 128 (attn_pp_k,
 * the DiT's; head dim 64 runs the persistent kernel of attn_pp64.cu); shared pieces and the tile
 * layout are in attn_wgmma.cuh, the per-tile key ranges in attn_tiles.h.
 *
 * Per CTA (128 query rows of one head, two warpgroups of 64 rows, 256 threads):
 *   - K and V^T tiles of 128 keys stream through a ring of 3 shared-memory stages (PP_STAGES in
 *     attn_wgmma.cuh says why 3), filled by
 *     the tensor memory accelerator (thread 0 issues one box per 64 columns of a tile; the hardware
 *     swizzles and zero-fills rows past N). Stage s's `full` mbarrier completes when its bytes
 *     have landed; its `empty` mbarrier when all 256 threads are done reading it.
 *   - In iteration i a warpgroup issues S_{i+1} = Q K_{i+1}^T and O += P_i V_i back to back,
 *     waits only for S_{i+1}, and runs the softmax of block i+1 while P_i V_i is still on the
 *     tensor cores; O is rescaled once that product has landed.
 *   - Ping-pong (FlashAttention-3's schedule): the two warpgroups take turns issuing their
 *     products (named barriers 1 and 2), so one warpgroup's softmax runs while the tensor cores
 *     work for the other.
 * Measured on an H200 (docs/PERF.md, run 23): dense 484 ms (640 TFLOP/s) and window+anchors
 * 105 ms for the H3 workload, against 606 / 128 ms for the pipelined kernel without the TMA
 * ring and ping-pong. (Head dim 64 at the video VAE decoder's shape ran this body too: 2.849 ms a
 * call, 260 TFLOP/s; attn_pp64.cu's persistent kernel took over at 2.163 ms, docs/PERF.md.) */
#include "attn_wgmma.cuh"

template <int HD>
__device__ __forceinline__ void
attn_pp(const CUtensorMap &qmap, const CUtensorMap &kmap, const CUtensorMap &vmap, int N,
        const int *__restrict__ lohi, int head_end, int tail_start, const int *__restrict__ tiles,
        float scale_log2, const float *__restrict__ gate, int heads, bf16 *__restrict__ O,
        int ldo) {
    constexpr int NO = HD / 2; /* O accumulators per thread */
    constexpr int NSTAGE = PP_STAGES;
    static_assert(NSTAGE > PP_AHEAD, "a block's stage must not be the one being read");
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    char *base = (char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    char *sQ = base, *sK = sQ + BM * HD * 2, *sV = sK + NSTAGE * BN * HD * 2;
    const int TILE = BN * HD * 2;
    __shared__ __align__(8) uint64_t full[NSTAGE], empty[NSTAGE];
    if (threadIdx.x == 0)
        for (int k = 0; k < NSTAGE; k++)
            mbar_init(&full[k], 1), mbar_init(&empty[k], NT);
    __syncthreads();

    const int tile = blockIdx.x, h = blockIdx.y, wg = threadIdx.x >> 7;
    const int q0 = tile * BM;
    const KeyBlocks kbs(tiles + tile * 8);
    const int nb = kbs.nb;
    Rows rows(q0, kbs.mixed, lohi, N);

    /* thread 0: TMA copies of block i's K and V^T into its stage, completing on full[stage] */
    auto load_kv = [&](int i) {
        int s_, e_, kb;
        kbs.at(i, s_, e_, kb);
        char *ks = sK + (i % NSTAGE) * TILE, *vs = sV + (i % NSTAGE) * TILE;
        uint64_t *bar = &full[i % NSTAGE];
#pragma unroll
        for (int c = 0; c < HD / 64; c++) /* K: one box per 64 columns */
            tma3(ks + c * BN * 128, &kmap, c * 64, h, kb, bar);
        tma3(vs, &vmap, kb, 0, h, bar), tma3(vs + HD * 128, &vmap, kb + 64, 0, h, bar);
    };
    /* block j lives in stage j % NSTAGE; its copies are the (j / NSTAGE)-th use of that stage,
     * so they wait until every thread has released the stage's previous block */
    auto fill = [&](int j) {
        if (j >= NSTAGE) mbar_wait(&empty[j % NSTAGE], ((j / NSTAGE) - 1) & 1);
        mbar_expect_tx(&full[j % NSTAGE], 2 * TILE);
        load_kv(j);
    };

    float o[NO], s[64];
#pragma unroll
    for (int i = 0; i < NO; i++)
        o[i] = 0.f;
    const char *qw = sQ + wg * 64 * 128; /* this warpgroup's 64 rows inside each half */
    unsigned pf[BN / 16][4];

    /* prologue: Q rides with stage 0; S_0 and its softmax */
    if (threadIdx.x == 0) {
        mbar_expect_tx(&full[0], BM * HD * 2 + (nb > 0 ? 2 * TILE : 0));
#pragma unroll
        for (int c = 0; c < HD / 64; c++)
            tma3(sQ + c * BM * 128, &qmap, c * 64, h, q0, &full[0]);
        if (nb > 0) load_kv(0);
        for (int j = 1; j < PP_AHEAD && j < nb; j++)
            fill(j);
    }
    mbar_wait(&full[0], 0);
    if (nb > 0) {
        wgmma_fence();
        issue_qk<HD>(s, qw, sK);
        wgmma_commit();
        wgmma_wait0();
        fence_regs<64>(s);
        rows.softmax(s, kbs, 0, N, head_end, tail_start, scale_log2);
        pack_p(s, pf);
    }

    /* all but the last block: S_{i+1} always exists, so the loop body has no branches around
     * the asynchronous products */
    if (wg == 1) named_arrive(1, NT); /* warpgroup 0 issues first */
    for (int i = 0; i + 1 < nb; i++) {
        if (threadIdx.x == 0 && i + PP_AHEAD < nb) fill(i + PP_AHEAD);
        mbar_wait(&full[(i + 1) % NSTAGE], ((i + 1) / NSTAGE) & 1); /* K_{i+1}, V_{i+1} landed */
        const char *kn = sK + ((i + 1) % NSTAGE) * TILE, *vc = sV + (i % NSTAGE) * TILE;
        named_sync(1 + wg, NT); /* my turn on the tensor cores */
        wgmma_fence();
        issue_qk<HD>(s, qw, kn);
        wgmma_commit();
        wgmma_fence(); /* a separate stage: the softmax below reads S while P V runs */
        issue_pv<HD>(o, pf, vc);
        wgmma_commit();
        named_arrive(1 + (wg ^ 1), NT); /* the other warpgroup's turn */
        wgmma_wait1();                  /* S_{i+1} is in; P_i V_i may still run */
        fence_regs<64>(s);
        rows.softmax(s, kbs, i + 1, N, head_end, tail_start, scale_log2);
        wgmma_wait0();
        fence_regs<NO>(o);
        fence_regs<4 * (BN / 16)>(&pf[0][0]);
        mbar_arrive(&empty[i % NSTAGE]); /* this thread is done with K_i and V_i */
        rows.rescale<HD>(o);
        pack_p(s, pf);
    }
    if (nb > 0) { /* the last block: only its P V product is left (its V landed with its K) */
        const char *vc = sV + ((nb - 1) % NSTAGE) * TILE;
        named_sync(1 + wg, NT);
        wgmma_fence();
        issue_pv<HD>(o, pf, vc);
        wgmma_commit();
        named_arrive(1 + (wg ^ 1), NT);
        wgmma_wait0();
        fence_regs<NO>(o);
    }
    rows.store<HD>(o, gate, heads, h, O, ldo, N);
}

__global__ void __launch_bounds__(NT, 1) attn_pp_k(ATTN_PP_ARGS) {
    attn_pp<128>(qmap, kmap, vmap, N, lohi, head_end, tail_start, tiles, scale_log2, gate, heads, O,
                 ldo);
}
