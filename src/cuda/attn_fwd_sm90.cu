/*
 * attn_fwd_sm90.cu — FlashAttention-3-style forward for Hopper (sm_90a): the copy engine (TMA)
 * brings the tiles, wgmma multiplies them, and the warps of a thread block specialise.
 *
 * One thread block of three warpgroups owns BM = 128 query rows of one (batch, head):
 *   warpgroup 0, the producer: one thread issues every copy. Q once; then, per K/V block of
 *     BN = 128 keys, K and V into a ring of STAGES shared-memory slots, each copy completing
 *     on the slot's "full" mbarrier, each slot reused once its "empty" mbarrier says both
 *     consumers are done with it. It gives most of its registers away (setmaxnreg.dec).
 *   warpgroups 1 and 2, the consumers, 64 query rows each (wgmma m64nNk16) and 240 registers:
 *     S = Q K^T          wgmma, Q and K from shared memory (K-major)
 *     mask, online softmax  as in attn_fwd_sm80.cu (attn_fwd_common.cuh: lazy rescale of O)
 *     O += P V           wgmma with P in registers as the A operand (the S accumulator
 *                        layout is the A fragment layout) and V from shared memory (MN-major)
 * Blocks are visited from the last to the first (the masked ones first), as in sm80; under the
 * causal mask blocks past the tile's last row are never loaded, and a consumer whose 64 rows
 * see none of a block's keys skips its wgmmas there (it still takes part in the barriers).
 *
 * Tensor maps (4-d: feature, sequence, head, batch; the caller's strides) are built on the
 * host per call through the runtime's driver entry point (no link to libcuda) and passed as
 * __grid_constant__ parameters. The copy engine zero-fills rows past Sq and Sk, so tails need
 * no code besides the key mask (zero V rows times P = 0 stay 0). Output: direct 4-byte stores
 * from the accumulators; LSE = m scale + ln l.
 *
 * What it serves: bf16/fp16, head dims 64 and 128, rows 16-byte aligned (the copy engine's
 * stride rule), compute capability 9.0 exactly (sm_90a code runs on no later chip); anything
 * else goes to the sm80 kernel (see attn.cu). A per-row key range [lo, hi) would change two
 * places: which blocks the producer and consumers walk (now [0, n_end)), and mask_block.
 *
 * Two versions (template OVERLAP): v1, the one dispatched, and v2 with FlashAttention-3's
 * intra-warpgroup overlap and ping-pong, correct but slower so far (see the table below).
 * Not yet: a v2 whose wgmmas ptxas does not serialise, a persistent grid, TMA stores of O,
 * other head dims, Dk != Dv. The version ladder is in bench/RESULTS.md.
 */
#include "attn_cuda.cuh"
#include "attn_fwd_common.cuh"
#include "ptx_sm90.cuh"

#include <cuda.h> /* CUtensorMap and the driver's types only: the library never links libcuda */
#include <string.h>
#include <type_traits>

namespace {

constexpr int SM90_BM = 128, SM90_BN = 128, SM90_THREADS = 384;

/* Shared memory of one thread block, in bytes from a 1024-byte aligned base. */
template <int D, int STAGES> struct sm90_smem {
    static constexpr int Q_BYTES = SM90_BM * D * 2;
    static constexpr int KV_BYTES = SM90_BN * D * 2;      /* one K (or V) slot          */
    static constexpr int Q = 0;
    static constexpr int K = Q + Q_BYTES;
    static constexpr int V = K + STAGES * KV_BYTES;
    static constexpr int BARS = V + STAGES * KV_BYTES;    /* q_full, k/v full and empty */
    static constexpr int TOTAL = BARS + 8 * (1 + 4 * STAGES);
    static constexpr size_t LAUNCH = TOTAL + 1024;        /* room to align the base     */
};

} // namespace

template <typename T, int D, int STAGES, bool OVERLAP>
__global__ void __launch_bounds__(SM90_THREADS, 1)
    attn_fwd_sm90_kernel(const __grid_constant__ CUtensorMap tm_q,
                         const __grid_constant__ CUtensorMap tm_k,
                         const __grid_constant__ CUtensorMap tm_v, const attn_fwd_args a)
{
#if FLASHC_PTX_SM90A
    using L = sm90_smem<D, STAGES>;
    constexpr int BM = SM90_BM, BN = SM90_BN, NP = D / 64; /* NP: 64-column panels */
    constexpr int NT = BN / 8, DT = D / 8;
    static_assert(D % 64 == 0 && D <= 128, "panels of 64 columns; O fits the registers");

    extern __shared__ uint8_t smem_raw[];
    const uint32_t base = (ptx_smem_addr(smem_raw) + 1023u) & ~1023u;
    const uint32_t sQ = base + L::Q, sK = base + L::K, sV = base + L::V;
    const uint32_t bar_q = base + L::BARS;
    auto k_full = [&](int s) { return bar_q + 8u * (1 + s); };
    auto v_full = [&](int s) { return bar_q + 8u * (1 + STAGES + s); };
    auto k_empty = [&](int s) { return bar_q + 8u * (1 + 2 * STAGES + s); };
    auto v_empty = [&](int s) { return bar_q + 8u * (1 + 3 * STAGES + s); };

    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    const int wg = warp / 4;
    if (threadIdx.x == 0) {
        ptx_mbarrier_init(bar_q, 1);
        for (int s = 0; s < STAGES; s++) {
            ptx_mbarrier_init(k_full(s), 1);
            ptx_mbarrier_init(v_full(s), 1);
            ptx_mbarrier_init(k_empty(s), 8); /* one arrival per consumer warp */
            ptx_mbarrier_init(v_empty(s), 8);
        }
        ptx_fence_mbarrier_init();
    }
    __syncthreads(); /* the last block-wide barrier: the roles part here */

    int m_block, b, h;
    block_coords<BM>(a, ptx_block_index(), &m_block, &b, &h);
    const int m0 = m_block * BM;
    const int diag = a.Sk - a.Sq; /* row i sees keys j <= i + diag (causal) */
    const int last_row = min(m0 + BM, a.Sq) - 1;
    const int n_end = a.causal ? min(a.Sk, last_row + 1 + diag) : a.Sk;
    const int n_blocks = n_end > 0 ? (n_end + BN - 1) / BN : 0;

    if (wg == 0) {
        /* ---- producer ---- */
        ptx_setmaxnreg_dec<24>();
        if (warp == 0 && lane == 0 && n_blocks > 0) {
            ptx_prefetch_tensormap(&tm_q);
            ptx_prefetch_tensormap(&tm_k);
            ptx_prefetch_tensormap(&tm_v);
            const int hk = h / a.group;
            ptx_mbarrier_arrive_expect_tx(bar_q, L::Q_BYTES);
            for (int p = 0; p < NP; p++)
                ptx_tma_load_4d(sQ + p * BM * 128, &tm_q, bar_q, 64 * p, m0, h, b);
            for (int i = 0; i < n_blocks; i++) {
                const int s = i % STAGES;
                const uint32_t ph = (uint32_t)(i / STAGES) & 1u;
                const int n0 = (n_blocks - 1 - i) * BN;
                ptx_mbarrier_wait(k_empty(s), ph ^ 1u);
                ptx_mbarrier_arrive_expect_tx(k_full(s), L::KV_BYTES);
                for (int p = 0; p < NP; p++)
                    ptx_tma_load_4d(sK + s * L::KV_BYTES + p * BN * 128, &tm_k, k_full(s),
                                    64 * p, n0, hk, b);
                ptx_mbarrier_wait(v_empty(s), ph ^ 1u);
                ptx_mbarrier_arrive_expect_tx(v_full(s), L::KV_BYTES);
                for (int p = 0; p < NP; p++)
                    ptx_tma_load_4d(sV + s * L::KV_BYTES + p * BN * 128, &tm_v, v_full(s),
                                    64 * p, n0, hk, b);
            }
        }
        return;
    }

    /* ---- consumers ---- */
    ptx_setmaxnreg_inc<240>();
    const int cw = wg - 1;                    /* which 64 rows of the tile           */
    const int wq = warp % 4;                  /* warp within the warpgroup: 16 rows  */
    const int g = lane / 4, t = lane % 4;
    const int row0 = m0 + cw * 64 + wq * 16 + g; /* this thread's rows: row0, row0 + 8 */

    float acc[1][DT][4];
    float row_m[1][2] = {{-INFINITY, -INFINITY}}, row_l[1][2] = {{0.0f, 0.0f}};
#pragma unroll
    for (int dt = 0; dt < DT; dt++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            acc[0][dt][e] = 0.0f;

    /* Issues S = Q K^T of the block in slot s (uncommitted). */
    auto issue_qk = [&](float (&sc)[1][NT][4], int s) {
        ptx_wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < D / 16; ks++) {
            const uint32_t qa = sQ + (ks / 4) * BM * 128 + cw * 64 * 128 + (ks % 4) * 32;
            const uint32_t kb = sK + s * L::KV_BYTES + (ks / 4) * BN * 128 + (ks % 4) * 32;
            ptx_wgmma_ss_m64n128k16(T(), sc[0], ptx_wgmma_desc(qa, 16, 1024),
                                    ptx_wgmma_desc(kb, 16, 1024), ks > 0);
        }
    };
    /* P (in sc) into A fragments: tiles 2kk and 2kk + 1 of S are the A fragment of keys
     * [16 kk, 16 kk + 16). */
    auto pack_p = [&](const float (&sc)[1][NT][4], uint32_t (&pa)[BN / 16][4]) {
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) {
            pa[kk][0] = ptx_pack2(T(), sc[0][2 * kk][0], sc[0][2 * kk][1]);
            pa[kk][1] = ptx_pack2(T(), sc[0][2 * kk][2], sc[0][2 * kk][3]);
            pa[kk][2] = ptx_pack2(T(), sc[0][2 * kk + 1][0], sc[0][2 * kk + 1][1]);
            pa[kk][3] = ptx_pack2(T(), sc[0][2 * kk + 1][2], sc[0][2 * kk + 1][3]);
        }
    };
    /* Issues O += P V of the block in slot s (uncommitted). */
    auto issue_pv = [&](const uint32_t (&pa)[BN / 16][4], int s) {
#pragma unroll
        for (int dt = 0; dt < DT; dt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                ptx_fence_operand(acc[0][dt][e]);
        ptx_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) {
            /* keys [16 kk, 16 kk + 16): two 8-row groups (SBO) of every panel (LBO) */
            const uint32_t vb = sV + s * L::KV_BYTES + kk * 16 * 128;
            const uint64_t dv = ptx_wgmma_desc(vb, BN * 128, 1024);
            if constexpr (D == 128)
                ptx_wgmma_rs_m64n128k16_tb(T(), acc[0], pa[kk], dv, 1);
            else
                ptx_wgmma_rs_m64n64k16_tb(T(), acc[0], pa[kk], dv, 1);
        }
    };
    /* After a wait: reads of the results stay below it, and the registers the wgmma read
     * (A fragments) stay allocated until it. */
    auto fence_s = [&](float (&sc)[1][NT][4]) {
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                ptx_fence_operand(sc[0][nt][e]);
    };
    auto fence_pv = [&](uint32_t (&pa)[BN / 16][4]) {
#pragma unroll
        for (int dt = 0; dt < DT; dt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                ptx_fence_operand(acc[0][dt][e]);
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                ptx_fence_operand(pa[kk][e]);
    };
    auto release = [&](uint32_t bar) {
        if (lane == 0)
            ptx_mbarrier_arrive(bar); /* this warp's reads of the slot are complete */
        __syncwarp(); /* converged again for the .aligned instructions that follow */
    };
    /* Under the causal mask a warpgroup whose last row cannot see key n0 has nothing in a
     * block: S all masked, P = 0, m and O unchanged. Blocks go from the last to the first, so
     * once a block is live every later one is. */
    auto live_at = [&](int i) {
        return !a.causal || (n_blocks - 1 - i) * BN <= m0 + cw * 64 + 63 + diag;
    };
    auto mask_at = [&](float (&sc)[1][NT][4], int i) {
        const int n0 = (n_blocks - 1 - i) * BN;
        if (n0 + BN > a.Sk || (a.causal && n0 + BN > m0 + cw * 64 + 1 + diag))
            mask_block<1, NT>(sc, a, row0, n0 + 2 * t, diag);
    };

    if (n_blocks > 0)
        ptx_mbarrier_wait(bar_q, 0);

    if constexpr (!OVERLAP) {
        /* v1 ("sm90"): per block, S, softmax, P V in turn; the two consumers interleave as
         * the warp schedulers let them. */
        for (int i = 0; i < n_blocks; i++) {
            const int s = i % STAGES;
            const uint32_t ph = (uint32_t)(i / STAGES) & 1u;
            const bool live = live_at(i);
            float sc[1][NT][4];
            ptx_mbarrier_wait(k_full(s), ph);
            if (live) {
                issue_qk(sc, s);
                ptx_wgmma_commit();
                ptx_wgmma_wait<0>();
                fence_s(sc);
            }
            release(k_empty(s));
            if (live) {
                mask_at(sc, i);
                softmax_block<1, NT, DT>(sc, acc, row_m, row_l, a.scale_log2);
            }
            ptx_mbarrier_wait(v_full(s), ph);
            if (live) {
                uint32_t pa[BN / 16][4];
                pack_p(sc, pa);
                issue_pv(pa, s);
                ptx_wgmma_commit();
                ptx_wgmma_wait<0>();
                fence_pv(pa);
            }
            release(v_empty(s));
        }
    } else {
        /* v2 ("sm90v2", FlashAttention-3's intra-warpgroup overlap and ping-pong): S_i = Q K_i^T
         * and O += P_{i-1} V_{i-1} are issued together, then the softmax of S_i runs while P V
         * is still on the tensor cores; O's rescale for block i waits for that P V. The two
         * consumers take turns to issue (named barriers 1 and 2), so one's softmax overlaps
         * the other's GEMMs. Every consumer passes the same turns whatever it skips.
         * v3 (this branch, NOT YET RUN ON A GPU): no causal skip here: a block above a
         * warpgroup's rows is computed and fully masked (P = 0), so that every wgmma is issued
         * on a path ptxas sees as warpgroup-uniform; under v2's `if (live)` it serialised them
         * (ptxas C7518), which cost the overlap. Local compile: no C7518, no spills. */
        const int me = 1 + cw, other = 2 - cw;
        auto my_turn = [&]() { ptx_named_bar_sync(me, 256); };
        auto pass_turn = [&]() { ptx_named_bar_arrive(other, 256); };
        if (cw == 1)
            pass_turn(); /* consumer 0 issues first */
        float sc[1][NT][4];
        uint32_t pa[BN / 16][4];
        if (n_blocks > 0) {
            const bool live = true; /* v3: see above */
            ptx_mbarrier_wait(k_full(0), 0);
            my_turn();
            if (live) {
                issue_qk(sc, 0);
                ptx_wgmma_commit();
            }
            pass_turn();
            if (live) {
                ptx_wgmma_wait<0>();
                fence_s(sc);
            }
            release(k_empty(0));
            if (live) {
                mask_at(sc, 0);
                softmax_block<1, NT, DT>(sc, acc, row_m, row_l, a.scale_log2);
            }
        }
        for (int i = 1; i < n_blocks; i++) {
            const int s = i % STAGES, sp = (i - 1) % STAGES;
            const uint32_t ph = (uint32_t)(i / STAGES) & 1u;
            const uint32_t php = (uint32_t)((i - 1) / STAGES) & 1u;
            const bool live = true, live_prev = true;
            ptx_mbarrier_wait(k_full(s), ph);
            ptx_mbarrier_wait(v_full(sp), php);
            if (live_prev)
                pack_p(sc, pa); /* frees sc for S_i */
            my_turn();
            if (live) {
                issue_qk(sc, s);
                ptx_wgmma_commit();
            }
            if (live_prev) {
                issue_pv(pa, sp);
                ptx_wgmma_commit();
            }
            pass_turn();
            float alpha[1][2];
            bool moved = false;
            if (live) {
                if (live_prev)
                    ptx_wgmma_wait<1>(); /* S_i done, P V may still run */
                else
                    ptx_wgmma_wait<0>();
                fence_s(sc);
            }
            release(k_empty(s));
            if (live) {
                mask_at(sc, i);
                float mx[1][2];
                moved = block_rows_max<1, NT>(sc, row_m, mx, a.scale_log2);
                if (moved)
                    block_move_base<1>(mx, row_m, row_l, alpha, a.scale_log2);
                block_exp<1, NT>(sc, row_m, row_l, a.scale_log2);
            }
            if (live_prev) {
                ptx_wgmma_wait<0>();
                fence_pv(pa);
            }
            release(v_empty(sp));
            if (moved)
                block_rescale<1, DT>(acc, alpha);
        }
        if (n_blocks > 0) {
            const int i = n_blocks - 1, s = i % STAGES;
            const bool live = true;
            ptx_mbarrier_wait(v_full(s), (uint32_t)(i / STAGES) & 1u);
            if (live)
                pack_p(sc, pa);
            my_turn();
            if (live) {
                issue_pv(pa, s);
                ptx_wgmma_commit();
            }
            pass_turn();
            if (live) {
                ptx_wgmma_wait<0>();
                fence_pv(pa);
            }
            release(v_empty(s));
        }
        if (cw == 0)
            my_turn(); /* takes consumer 1's last pass, so no barrier is left half-arrived */
    }

    /* Epilogue: the one division per row, then o and LSE (rows past Sq are not stored). */
    T *og = (T *)a.o + b * a.so[0] + h * a.so[2];
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        float l = row_l[0][hr];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        const float inv = l > 0.0f ? 1.0f / l : 0.0f;
        const int row = row0 + 8 * hr;
        if (row < a.Sq) {
            T *orow = og + (int64_t)row * a.so[1];
#pragma unroll
            for (int dt = 0; dt < DT; dt++)
                *(uint32_t *)(orow + dt * 8 + 2 * t) =
                    ptx_pack2(T(), acc[0][dt][2 * hr] * inv, acc[0][dt][2 * hr + 1] * inv);
            if (a.lse && t == 0)
                a.lse[b * a.slse[0] + h * a.slse[1] + (int64_t)row * a.slse[2]] =
                    l > 0.0f ? row_m[0][hr] * a.scale + logf(l) : -INFINITY;
        }
    }
#endif /* FLASHC_PTX_SM90A */
}

/* ---- host side: tensor maps --------------------------------------------------------------- */

typedef CUresult (*encode_tiled_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                    const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                    const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                    CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/* cuTensorMapEncodeTiled through the runtime (the driver is loaded anyway), looked up once;
 * NULL if this driver has none. */
static encode_tiled_fn encode_tiled(void)
{
    static encode_tiled_fn fn = NULL;
    static int looked = 0;
    if (!looked) {
        void *p = NULL;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
                                             cudaEnableDefault, &q) != cudaSuccess ||
            q != cudaDriverEntryPointSuccess)
            p = NULL;
        (void)cudaGetLastError();
        fn = (encode_tiled_fn)p;
        looked = 1; /* racing first calls store the same pointer */
    }
    return fn;
}

/* A (B, S, H, D) operand as a 4-d tensor map (D, S, H, B) with boxes of 64 features x rows,
 * 128-byte swizzled (the panels of ptx_sm90.cuh). st: batch, seq, head strides in elements. */
static int make_map(CUtensorMap *m, flashc_dtype dt, const void *ptr, int64_t B, int64_t S,
                    int64_t H, int64_t D, const int64_t *st, int rows)
{
    encode_tiled_fn enc = encode_tiled();
    if (!enc)
        return 0;
    const cuuint64_t dims[4] = {(cuuint64_t)D, (cuuint64_t)S, (cuuint64_t)H, (cuuint64_t)B};
    const cuuint64_t strides[3] = {(cuuint64_t)st[1] * 2, (cuuint64_t)st[2] * 2,
                                   (cuuint64_t)st[0] * 2};
    const cuuint32_t box[4] = {64, (cuuint32_t)rows, 1, 1};
    const cuuint32_t estr[4] = {1, 1, 1, 1};
    for (int i = 0; i < 3; i++) /* the copy engine's limits on strides */
        if (strides[i] % 16 != 0 || strides[i] >= (1ull << 40) || strides[i] == 0)
            return 0;
    return enc(m, dt == FLASHC_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                    : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
               4, (void *)ptr, dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
               CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

static int make_maps(const attn_fwd_args *a, flashc_dtype dt, CUtensorMap *mq, CUtensorMap *mk,
                     CUtensorMap *mv)
{
    const int64_t Hkv = a->Hq / a->group;
    return make_map(mq, dt, a->q, a->B, a->Sq, a->Hq, a->D, a->sq, SM90_BM) &&
           make_map(mk, dt, a->k, a->B, a->Sk, Hkv, a->D, a->sk, SM90_BN) &&
           make_map(mv, dt, a->v, a->B, a->Sk, Hkv, a->D, a->sv, SM90_BN);
}

/* Beyond dtype and head dim (the table's fields): the chip the sm_90a code runs on, rows the
 * copy engine takes, and tensor maps that encode (tried here, so that "supported" and the run
 * agree). */
static int sm90_supports(const attn_fwd_variant *v, const attn_problem *p, int cc, int vec16)
{
    if (cc != 90 || !vec16)
        return 0;
    attn_fwd_args a;
    memset(&a, 0, sizeof a);
    a.q = p->q, a.k = p->k, a.v = p->v;
    for (int i = 0; i < 3; i++)
        a.sq[i] = p->sq[i], a.sk[i] = p->sk[i], a.sv[i] = p->sv[i];
    a.B = (int)p->B, a.Sq = (int)p->Sq, a.Sk = (int)p->Sk, a.Hq = (int)p->Hq;
    a.group = (int)(p->Hq / p->Hkv), a.D = (int)p->D;
    CUtensorMap mq, mk, mv;
    return make_maps(&a, v->dtype, &mq, &mk, &mv);
}

template <typename T, int D, int STAGES, bool OVERLAP>
static cudaError_t attn_fwd_sm90_launch(const attn_fwd_args *a, cudaStream_t stream)
{
    using L = sm90_smem<D, STAGES>;
    CUtensorMap mq, mk, mv;
    if (!make_maps(a, std::is_same<T, __nv_bfloat16>::value ? FLASHC_BF16 : FLASHC_F16, &mq,
                   &mk, &mv))
        return cudaErrorInvalidValue; /* sm90_supports said yes: the driver changed its mind */
    void (*kernel)(const CUtensorMap, const CUtensorMap, const CUtensorMap,
                   const attn_fwd_args) = attn_fwd_sm90_kernel<T, D, STAGES, OVERLAP>;
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           (int)L::LAUNCH);
    if (err != cudaSuccess)
        return err;
    const int64_t blocks = (int64_t)((a->Sq + SM90_BM - 1) / SM90_BM) * a->B * a->Hq;
    if (blocks > 0x7fffffff)
        return cudaErrorInvalidConfiguration;
    kernel<<<(unsigned)blocks, SM90_THREADS, L::LAUNCH, stream>>>(mq, mk, mv, *a);
    return cudaGetLastError();
}

/* The dispatcher picks v1 ("sm90") by default where the recorded H200 runs showed it correct and
 * faster than sm80 (bench/RESULTS.md, 2026-12-01, two runs): d = 128 from seqlen 1k (1.29x to
 * 1.48x), d = 64 from 4k (1.07x to 1.15x; at 1k sm80 was as fast or faster). v2 ("sm90v2",
 * overlap and ping-pong) was correct but slower in the same run: its wgmma issues sit on paths
 * ptxas cannot prove warpgroup-uniform (the causal skip), so it serialises them (C7518); it
 * stays only when forced, for the ladder. */
#define SM90_VARIANT(TN, T, FAM, D, OVL, DEF, MINSEQ)                                              \
    {"attn_fwd_" #TN "_" FAM "_d" #D "_128x128", FAM, TN##_DTYPE_SM90, D, D, 90, 128, 128, DEF,   \
     MINSEQ, sm90_supports, attn_fwd_sm90_launch<T, D, 2, OVL>}
#define bf16_DTYPE_SM90 FLASHC_BF16
#define f16_DTYPE_SM90 FLASHC_F16
const attn_fwd_variant attn_fwd_sm90_variants[] = {
    SM90_VARIANT(bf16, __nv_bfloat16, "sm90", 64, false, 1, 4096),
    SM90_VARIANT(bf16, __nv_bfloat16, "sm90", 128, false, 1, 1024),
    SM90_VARIANT(f16, __half, "sm90", 64, false, 1, 4096),
    SM90_VARIANT(f16, __half, "sm90", 128, false, 1, 1024),
    SM90_VARIANT(bf16, __nv_bfloat16, "sm90v2", 64, true, 0, 0),
    SM90_VARIANT(bf16, __nv_bfloat16, "sm90v2", 128, true, 0, 0),
    SM90_VARIANT(f16, __half, "sm90v2", 64, true, 0, 0),
    SM90_VARIANT(f16, __half, "sm90v2", 128, true, 0, 0),
};
const int attn_fwd_sm90_variant_count =
    (int)(sizeof attn_fwd_sm90_variants / sizeof attn_fwd_sm90_variants[0]);
