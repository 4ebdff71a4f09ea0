/*
 * attn_bwd_dq_sm90.cu — dQ in a kernel of its own, for the Hopper backward at d = 64 / 128 /
 * 192 / 256 (issue 12; the split family sm90hs, whose dK / dV half runs on the fused kernels
 * without their dQ path: attn_bwd_sm90h.cu's at d 192 / 256, attn_bwd_sm90v3.cu's at d 64 /
 * 128).
 *
 * Why: the fused kernels (sm90h, sm90h2) add each K block's share of dQ into an fp32 accumulator
 * with bulk reduce-adds; deterministic mode orders those adds by turns, and even with every turn
 * free (FLASHC_CUDA_BWD_DET_FREE) the mode's completions and fences leave it at 0.70-0.81x fast
 * mode at d = 192 / 256 (bench/RESULTS.md, 2026-12-06). Here each thread block owns 128 rows of
 * dQ and walks the key blocks itself, so every dQ element is one thread's sum in a fixed order:
 * deterministic by construction, with no adds, no turns and no fp32 workspace. The price is the
 * recomputation of S = Q K^T and dP = dO V^T (the dK / dV kernel computes them too): 3 products
 * here against the fused kernel's 1, shaped like the forward's (Q stationary, K / V streaming).
 *
 * Shape: 384 threads, one block per SM; a producer warpgroup (setmaxnreg 24, one lane works)
 * loads Q and dO of the block's 128 rows once and streams the key blocks (64 keys) by TMA: K in
 * a ring of two stages, V in one stage at d = 256 (two below); K's stage is handed back
 * after dQ's product of the block, V's as soon as dP's product is done, so the next V loads under
 * the softmax and dQ's product. Two consumer warpgroups (setmaxnreg 240) own 64 rows each:
 *   S = Q K^T, dP = dO V^T (m64n64, k over the head dim, A and B K-major from shared memory;
 *   two committed groups), P = 2^(S scale log2 e - LSE log2 e) while dP runs, dS = P (dP - D)
 *   (softcap and ALiBi through bwd_mod_elem, as the fused kernels), dS rounded to the storage
 *   type in registers (the A operand), dQ += dS K (m64n128 + m64n(D - 128) above d 128, m64nD
 *   at d 64 / 128; B = K MN-major:
 *   keys are the reduction index), waited for before the next block's S and dP. The two
 *   consumer warpgroups' softmax and products overlap each other. Not done (ptxas, nvcc 13.0):
 *   S, dP accumulators kept across blocks, or dQ_j left in flight under S_j+1 (FlashAttention-3's
 *   intra-warpgroup overlap): either made ptxas serialise the wgmmas (C7515); S, dP are fresh
 *   in each block. dQ_j-1 issued behind S_j and dP_j and waited for within block j compiled
 *   clean but ran slower (the split at 0.97-1.06x the fused kernels at d 192 instead of
 *   1.04-1.14x; an H100, 2026-12-07 midday, call 8), and 4 K / V stages at d <= 128 gained
 *   nothing (call 7). On an H100 (2026-12-07 midday, bench/gpu/s33_nodq.sh, two runs) the
 *   split backward ran at 1.04-1.18x the fused kernels' fast mode with this revision, and the
 *   serialised one (the late morning's) at 0.98-1.09x in the same session.
 * At the end dQ = scale dQ, rounded and stored (rows below Sq, columns below a.D).
 * Masks: every mask of the contract through the fused kernels' key ranges (bwd_range), the key
 * blocks of a tile cut to the union of its rows' ranges; rows past Sq arrive as zeros (TMA) with
 * LSE +inf (P = 0); keys past Sk are masked. GQA: K / V of the head's KV head. Rows whose LSE is
 * -inf (no key) get dQ = 0.
 * Tiles: grid (batch x head, Q blocks), the Q blocks of an upper key bound (causal) longest
 * first, so the first wave takes the longest tiles of every head.
 * Shared memory at d 256: Q, dO 64 KB each, K 2 x 32 KB, V 32 KB, 7 barriers: 224.1 KB + 1 KB
 * alignment slack; at d 192: Q, dO 48 KB each, K and V 2 x 24 KB each: 192.1 KB; d 128: 128.1
 * KB; d 64: 64.1 KB (one block per SM all the same: 384 threads at up to 240 registers).
 */
#include "attn_bwd_common.cuh"
#include "attn_cuda.cuh"
#include "ptx.cuh"
#include "ptx_sm90.cuh"
#include "tma_host.cuh"

#include <cuda.h> /* CUtensorMap and the driver's types only */
#include <type_traits>

namespace {

constexpr int DQ_BM = 128, DQ_BN = 64, DQ_THREADS = 384;
constexpr int DQ_PRODUCER_REGS = 24, DQ_CONSUMER_REGS = 240;
static_assert((168 - DQ_PRODUCER_REGS) * 128 == (DQ_CONSUMER_REGS - 168) * 256,
              "setmaxnreg: the registers given cover the registers taken");

/* Byte offsets from a 1024-byte aligned base; a tile of R rows x D columns is D / 64 panels of
 * R rows x 128 bytes (the 128-byte swizzle TMA writes). */
template <int D> struct dq90_smem {
    static constexpr int VS = D == 256 ? 1 : 2; /* V stages (a second does not fit at d 256) */
    static constexpr int QB = DQ_BM * D * 2;    /* Q or dO of the block's rows */
    static constexpr int KVB = DQ_BN * D * 2;   /* one K or V block */
    static constexpr int Q = 0;
    static constexpr int DO = Q + QB;
    static constexpr int K = DO + QB;      /* [2][D / 64][64][128 B] */
    static constexpr int V = K + 2 * KVB;  /* [VS][D / 64][64][128 B] */
    /* mbarriers: q_full, k_full[2], k_empty[2], v_full[VS], v_empty[VS] */
    static constexpr int BARS = V + VS * KVB;
    static constexpr int ROWS = BARS + (5 + 2 * VS) * 8; /* float [2][BM]: LSE log2 e, D */
    static constexpr int TOTAL = ROWS + 2 * DQ_BM * 4;
    static constexpr int LAUNCH = TOTAL + 1024;
    static_assert(LAUNCH <= 227 * 1024, "one block per SM fits");
    static_assert(QB % 1024 == 0 && KVB % 1024 == 0, "swizzle atoms 1024-byte aligned");
};

} // namespace


template <typename T, int D, bool MODS>
__global__ void __launch_bounds__(DQ_THREADS, 1)
    attn_bwd_dq_sm90_kernel(const __grid_constant__ CUtensorMap tm_q,
                            const __grid_constant__ CUtensorMap tm_do,
                            const __grid_constant__ CUtensorMap tm_k,
                            const __grid_constant__ CUtensorMap tm_v, const attn_bwd_args a)
{
#if FLASHC_PTX_SM90A
    using L = dq90_smem<D>;
    constexpr int NP = D / 64, VS = L::VS;
    /* dQ's accumulators: features [0, min(D, 128)) in dqa, [128, D) in dqb (none at d <= 128) */
    constexpr int NA = D < 128 ? D / 8 : 16, NB = D > 128 ? (D - 128) / 8 : 0;
    static_assert(D == 64 || D == 128 || D == 192 || D == 256, "the four instances");

    extern __shared__ uint8_t smem_raw[];
    const uint32_t raw = ptx_smem_addr(smem_raw);
    const uint32_t base = (raw + 1023u) & ~1023u;
    const uint32_t q_full = base + L::BARS;
    auto k_full = [&](int s) { return base + L::BARS + 8u * (1 + s); };
    auto k_empty = [&](int s) { return base + L::BARS + 8u * (3 + s); };
    auto v_full = [&](int s) { return base + L::BARS + 8u * (5 + s); };
    auto v_empty = [&](int s) { return base + L::BARS + 8u * (5 + VS + s); };

    const int tid = (int)threadIdx.x, warp = tid / 32, lane = tid % 32;
    const bwd_range rg = bwd_range_of(a);
    const int bh = (int)blockIdx.x;
    const int b = bh / a.Hq, h = bh % a.Hq, hk = h / a.group;
    const int mb = rg.has_hi ? (int)gridDim.y - 1 - (int)blockIdx.y : (int)blockIdx.y;
    const int m0 = mb * DQ_BM;
    /* the union of the block's rows' key ranges: row i sees j with lo_off <= j - i <= hi_off */
    const int last = min(m0 + DQ_BM, a.Sq) - 1;
    const int64_t lo = rg.has_lo ? max((int64_t)0, (int64_t)m0 + rg.lo_off) : 0;
    const int64_t hi = rg.has_hi ? min((int64_t)a.Sk, (int64_t)last + rg.hi_off + 1) : a.Sk;
    const int jb0 = (int)(lo / DQ_BN);
    const int nb = hi > lo ? (int)((hi + DQ_BN - 1) / DQ_BN) - jb0 : 0;

    if (tid == 0) {
        ptx_mbarrier_init(q_full, 1);
        for (int s = 0; s < 2; s++) {
            ptx_mbarrier_init(k_full(s), 1);
            ptx_mbarrier_init(k_empty(s), 256); /* every consumer thread */
        }
        for (int s = 0; s < VS; s++) {
            ptx_mbarrier_init(v_full(s), 1);
            ptx_mbarrier_init(v_empty(s), 256);
        }
        ptx_fence_mbarrier_init();
    }
    __syncthreads(); /* the only block-wide barrier: the roles part here */

    if (warp < 4) {
        /* ---- producer ---- */
        ptx_setmaxnreg_dec<DQ_PRODUCER_REGS>();
        if (tid != 0 || nb == 0)
            return;
        ptx_prefetch_tensormap(&tm_k);
        ptx_prefetch_tensormap(&tm_v);
        ptx_mbarrier_arrive_expect_tx(q_full, 2 * L::QB);
        for (int p = 0; p < NP; p++) {
            ptx_tma_load_4d(base + L::Q + p * DQ_BM * 128, &tm_q, q_full, 64 * p, m0, h, b);
            ptx_tma_load_4d(base + L::DO + p * DQ_BM * 128, &tm_do, q_full, 64 * p, m0, h, b);
        }
        for (int j = 0; j < nb; j++) {
            const int n0 = (jb0 + j) * DQ_BN;
            /* a fresh barrier passes parity 1 at once: the first use of each stage waits for
             * nothing */
            const int ks = j & 1, vs = j % VS;
            ptx_mbarrier_wait(k_empty(ks), ((uint32_t)(j / 2) & 1u) ^ 1u);
            ptx_mbarrier_arrive_expect_tx(k_full(ks), L::KVB);
            for (int p = 0; p < NP; p++)
                ptx_tma_load_4d(base + L::K + ks * L::KVB + p * DQ_BN * 128, &tm_k, k_full(ks),
                                64 * p, n0, hk, b);
            ptx_mbarrier_wait(v_empty(vs), ((uint32_t)(j / VS) & 1u) ^ 1u);
            ptx_mbarrier_arrive_expect_tx(v_full(vs), L::KVB);
            for (int p = 0; p < NP; p++)
                ptx_tma_load_4d(base + L::V + vs * L::KVB + p * DQ_BN * 128, &tm_v, v_full(vs),
                                64 * p, n0, hk, b);
        }
        return;
    }

    /* ---- consumers ---- */
    ptx_setmaxnreg_inc<DQ_CONSUMER_REGS>();
    const int cw = warp - 4, wg = cw / 4, wq = cw % 4;
    const int g = lane / 4, t = lane % 4;
    /* this thread's rows: r (e < 2) and r + 8 (e >= 2) of the block, r = 64 wg + 16 wq + g.
     * Their LSE log2 e and D wait in shared memory (read per block: at d 256 two registers
     * each would spill, dQ's 128 accumulators and S, dP's 64 being live together) */
    const int r = 64 * wg + 16 * wq + g;
    float *rl2 = (float *)(smem_raw + (base - raw) + L::ROWS), *rds = rl2 + DQ_BM;
    if (t == 0) {
#pragma unroll
        for (int x = 0; x < 2; x++) {
            const int64_t row = m0 + r + 8 * x;
            const bool valid = row < a.Sq;
            rl2[r + 8 * x] =
                valid ? bwd_lse_log2(a.lse[b * a.slse[0] + h * a.slse[1] + row * a.slse[2]])
                      : INFINITY;
            rds[r + 8 * x] = valid ? a.dsum[((int64_t)b * a.Hq + h) * a.Sq + row] : 0.0f;
        }
    }
    ptx_named_bar_sync(1 + wg, 128); /* the warpgroup's rows written */
    const float slope = MODS ? bwd_slope(a, b, h) : 0.0f;
    (void)slope;

    float dqa[NA][4], dqb[NB > 0 ? NB : 1][4];
#pragma unroll
    for (int i = 0; i < NA; i++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            dqa[i][e] = 0.0f;
#pragma unroll
    for (int i = 0; i < NB; i++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            dqb[i][e] = 0.0f;

    const uint32_t sQ = base + L::Q + wg * 64 * 128, sdO = base + L::DO + wg * 64 * 128;
    /* S = Q K^T and dP = dO V^T of key block j into s, dp: two committed groups, S first.
     * s, dp are fresh in each iteration (declared in the loop): accumulators that carried the
     * last block's P and dS (written by the softmax) into the next block's first wgmma made
     * ptxas serialize the wgmmas (C7515) */
    auto issue_s_dp = [&](int j, float(&s)[8][4], float(&dp)[8][4]) {
        const uint32_t sK = base + L::K + (j & 1) * L::KVB;
        const uint32_t sV = base + L::V + (j % VS) * L::KVB;
        ptx_mbarrier_wait(k_full(j & 1), (uint32_t)(j / 2) & 1u);
        ptx_wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < D / 16; ks++)
            ptx_wgmma_ss_m64n64k16<0>(
                T(), s, ptx_wgmma_desc(sQ + (ks / 4) * DQ_BM * 128 + (ks % 4) * 32, 16, 1024),
                ptx_wgmma_desc(sK + (ks / 4) * DQ_BN * 128 + (ks % 4) * 32, 16, 1024), ks > 0);
        ptx_wgmma_commit();
        ptx_mbarrier_wait(v_full(j % VS), (uint32_t)(j / VS) & 1u);
#pragma unroll
        for (int ks = 0; ks < D / 16; ks++)
            ptx_wgmma_ss_m64n64k16<0>(
                T(), dp, ptx_wgmma_desc(sdO + (ks / 4) * DQ_BM * 128 + (ks % 4) * 32, 16, 1024),
                ptx_wgmma_desc(sV + (ks / 4) * DQ_BN * 128 + (ks % 4) * 32, 16, 1024), ks > 0);
        ptx_wgmma_commit();
    };

    if (nb > 0)
        ptx_mbarrier_wait(q_full, 0);
    for (int j = 0; j < nb; j++) {
        const int n0 = (jb0 + j) * DQ_BN;
        float s[8][4], dp[8][4];
        issue_s_dp(j, s, dp);
        /* S_j done (dQ_j-1 was waited for): K_j-1's stage goes back */
        ptx_wgmma_wait<1>();
        ptx_fence_operands(s);
        ptx_fence_operands(dqa);
        if constexpr (NB > 0)
            ptx_fence_operands(dqb);
        if (j > 0)
            ptx_mbarrier_arrive(k_empty((j - 1) & 1));
        /* the range again from the parameters (constant bank) rather than kept in 5
         * registers across the loop */
        const bwd_range rg = bwd_range_of(a);
        const bool need_mask = bwd_tile_needs_mask(a, rg, m0 + 64 * wg, 64, n0, DQ_BN);
        const float l2[2] = {rl2[r], rl2[r + 8]};
        /* s[nt][e]: row r (+8 for e >= 2), key n0 + 8 nt + 2t + (e & 1) */
        if constexpr (!MODS) {
            /* P = 2^(S s' - L') while dP is still on the tensor cores */
#pragma unroll
            for (int nt = 0; nt < 8; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int key = n0 + 8 * nt + 2 * t + (e & 1);
                    const int row = m0 + r + (e >= 2 ? 8 : 0);
                    float p = ptx_exp2(fmaf(s[nt][e], a.scale_log2, -l2[e >> 1]));
                    if (need_mask && (key >= a.Sk || bwd_outside(rg, key - row)))
                        p = 0.0f;
                    s[nt][e] = p;
                }
            ptx_wgmma_wait<0>();
            ptx_fence_operands(dp);
            ptx_mbarrier_arrive(v_empty(j % VS)); /* V_j read */
            const float dsum[2] = {rds[r], rds[r + 8]};
#pragma unroll
            for (int nt = 0; nt < 8; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    dp[nt][e] = s[nt][e] * (dp[nt][e] - dsum[e >> 1]);
        } else {
            /* softcap's derivative needs the raw score beside dP: both first */
            ptx_wgmma_wait<0>();
            ptx_fence_operands(dp);
            ptx_mbarrier_arrive(v_empty(j % VS));
            const float dsum[2] = {rds[r], rds[r + 8]};
#pragma unroll
            for (int nt = 0; nt < 8; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int key = n0 + 8 * nt + 2 * t + (e & 1);
                    const int row = m0 + r + (e >= 2 ? 8 : 0);
                    float p, ds;
                    bwd_mod_elem(a, slope, s[nt][e], dp[nt][e], l2[e >> 1], dsum[e >> 1],
                                 key - row - rg.diag, &p, &ds);
                    if (need_mask && (key >= a.Sk || bwd_outside(rg, key - row)))
                        ds = 0.0f;
                    dp[nt][e] = ds;
                }
        }
        /* dS as the A operand of dQ += dS K: 16 keys (fragments 2 kk, 2 kk + 1) a step; dQ
         * m64n128 over features [0, 128) and m64n(D - 128) over the rest (m64nD at d <= 128),
         * B = K's rows [16 kk, +16) MN-major (the feature panels LBO apart) */
        uint32_t da[4][4];
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            da[kk][0] = ptx_pack2(T(), dp[2 * kk][0], dp[2 * kk][1]);
            da[kk][1] = ptx_pack2(T(), dp[2 * kk][2], dp[2 * kk][3]);
            da[kk][2] = ptx_pack2(T(), dp[2 * kk + 1][0], dp[2 * kk + 1][1]);
            da[kk][3] = ptx_pack2(T(), dp[2 * kk + 1][2], dp[2 * kk + 1][3]);
        }
        const uint32_t sK = base + L::K + (j & 1) * L::KVB;
        ptx_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            ptx_wgmma_rs_tb<T>(dqa, da[kk], ptx_wgmma_desc(sK + kk * 16 * 128, DQ_BN * 128, 1024));
            if constexpr (NB > 0)
                ptx_wgmma_rs_tb<T>(dqb, da[kk], ptx_wgmma_desc(sK + 2 * DQ_BN * 128 + kk * 16 * 128,
                                                               DQ_BN * 128, 1024));
        }
        ptx_wgmma_commit();
        /* dQ_j waited for before the next block's S, dP (the header: issued behind them, it
         * made ptxas serialise the wgmmas at d 192, C7515; at d 256 the registers would not
         * hold dS beside dQ and the next S, dP anyway) */
        ptx_wgmma_wait<0>();
    }
    ptx_wgmma_wait<0>();
    ptx_fence_operands(dqa);
    if constexpr (NB > 0)
        ptx_fence_operands(dqb);

    /* dQ = scale dQ: rows r, r + 8 below Sq, columns 8 i + 2t (+1) below a.D */
#pragma unroll
    for (int x = 0; x < 2; x++) {
        const int row = m0 + r + 8 * x;
        if (row >= a.Sq)
            continue;
        T *dq = (T *)a.dq + b * a.sdq[0] + (int64_t)row * a.sdq[1] + h * a.sdq[2];
#pragma unroll
        for (int i = 0; i < NA; i++)
            bwd_store_pair(dq, 8 * i + 2 * t, a.D, dqa[i][2 * x] * a.scale,
                           dqa[i][2 * x + 1] * a.scale);
#pragma unroll
        for (int i = 0; i < NB; i++)
            bwd_store_pair(dq, 128 + 8 * i + 2 * t, a.D, dqb[i][2 * x] * a.scale,
                           dqb[i][2 * x + 1] * a.scale);
    }
#endif
}

bool attn_bwd_dq_sm90_fits(const attn_bwd_args *a)
{
    return ((int64_t)a->Sq + DQ_BM - 1) / DQ_BM <= 65535 && (int64_t)a->B * a->Hq <= 0x7fffffff;
}

/* dQ of a dense problem at head dim D (64, 128, 192 or 256; a.D == a.Dv <= D, a multiple of 8: padded
 * columns arrive as zeros and are not stored), from q, k, v, dout, LSE and D = rowsum(dO O)
 * (a.dsum, the preprocess's); writes a.dq alone. cudaErrorInvalidValue if the tensor maps do not
 * encode (the caller falls back). */
template <typename T, int D>
cudaError_t attn_bwd_dq_sm90_launch(const attn_bwd_args *a, cudaStream_t stream)
{
    using L = dq90_smem<D>;
    const flashc_dtype dt = std::is_same<T, __nv_bfloat16>::value ? FLASHC_BF16 : FLASHC_F16;
    if (a->D != a->Dv || a->D > D || a->D % 8 != 0 || a->cu_q)
        return cudaErrorInvalidValue;
    CUtensorMap mq, mdo, mk, mv;
    if (!cuda_tma_map_bshd(&mq, dt, a->q, a->B, a->Sq, a->Hq, a->D, a->sq, DQ_BM) ||
        !cuda_tma_map_bshd(&mdo, dt, a->dout, a->B, a->Sq, a->Hq, a->Dv, a->sdo, DQ_BM) ||
        !cuda_tma_map_bshd(&mk, dt, a->k, a->B, a->Sk, a->Hkv, a->D, a->sk, DQ_BN) ||
        !cuda_tma_map_bshd(&mv, dt, a->v, a->B, a->Sk, a->Hkv, a->Dv, a->sv, DQ_BN))
        return cudaErrorInvalidValue;
    const bool mods = a->softcap > 0.0f || a->alibi;
    void (*kernel)(const CUtensorMap, const CUtensorMap, const CUtensorMap, const CUtensorMap,
                   const attn_bwd_args) = mods ? attn_bwd_dq_sm90_kernel<T, D, true>
                                               : attn_bwd_dq_sm90_kernel<T, D, false>;
    if (!attn_bwd_dq_sm90_fits(a))
        return cudaErrorInvalidValue;
    const dim3 grid((unsigned)(a->B * a->Hq), (unsigned)((a->Sq + DQ_BM - 1) / DQ_BM), 1);
    cudaError_t err =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, L::LAUNCH);
    if (err != cudaSuccess)
        return err;
    kernel<<<grid, DQ_THREADS, L::LAUNCH, stream>>>(mq, mdo, mk, mv, *a);
    return cudaGetLastError();
}

template cudaError_t attn_bwd_dq_sm90_launch<__nv_bfloat16, 192>(const attn_bwd_args *,
                                                                 cudaStream_t);
template cudaError_t attn_bwd_dq_sm90_launch<__nv_bfloat16, 256>(const attn_bwd_args *,
                                                                 cudaStream_t);
template cudaError_t attn_bwd_dq_sm90_launch<__half, 192>(const attn_bwd_args *, cudaStream_t);
template cudaError_t attn_bwd_dq_sm90_launch<__nv_bfloat16, 64>(const attn_bwd_args *,
                                                                cudaStream_t);
template cudaError_t attn_bwd_dq_sm90_launch<__nv_bfloat16, 128>(const attn_bwd_args *,
                                                                 cudaStream_t);
template cudaError_t attn_bwd_dq_sm90_launch<__half, 64>(const attn_bwd_args *, cudaStream_t);
template cudaError_t attn_bwd_dq_sm90_launch<__half, 128>(const attn_bwd_args *, cudaStream_t);
template cudaError_t attn_bwd_dq_sm90_launch<__half, 256>(const attn_bwd_args *, cudaStream_t);
