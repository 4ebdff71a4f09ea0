/*
 * attn_bwd_sm90v2.cu — the Hopper backward's second version: families sm90v2 (d 64, 128),
 * sm90v2e, sm90v2s, sm90v2sa, sm90v2sd (d 64), all opt-in through FLASHC_CUDA_BWD_KERNEL.
 * sm90v2s was the default at d 64 from the device run of 2026-12-01 23:00 (correct, 1.27x sm80)
 * until sm90v3w (attn_bwd_sm90v3.cu) replaced it on 2026-12-03; at d 128 sm90v2 measured
 * 0.92-0.96x sm90. The sm90 kernel's products and layout (attn_bwd_sm90.cu: S^T = K Q^T,
 * dP^T = V dO^T, P^T / dS^T in registers as the A operands of dV += P^T dO and dK += dS^T Q, dS
 * stored transposed by stmatrix for dQ = dS K) with the waits that did not have to be there
 * taken out:
 *
 *  - dQ leaves through shared memory. Each warp owns 16 rows of its warpgroup's dQ tile (the
 *    wgmma accumulator layout); it stores them to a staging tile and 16 of its lanes hand one
 *    row each (256 bytes of float32) to the copy engine as a bulk reduce-add into the fp32
 *    accumulator (cp.reduce.async.bulk .add.f32). The sm90 kernel issued 8 16-byte atomics and
 *    16 shuffles per thread per Q block and waited for nothing else; here the adds run behind
 *    the next Q block's products. The staging tile is double-buffered: a row's bulk read has a
 *    whole iteration to finish before the warp writes that buffer again.
 *  - LSE and D arrive by cp.async with the Q and dO tiles of the same Q block. The sm90 kernel
 *    loaded them with plain loads right before its S^T wgmma, so warps 0-1 (warpgroup 0)
 *    stalled a global round trip per Q block, and warpgroup 1 with them at the next barrier.
 *    The log2-e scaling and the -inf (empty row) case move to the use.
 *  - Deterministic mode waits per warp, not per block: warp w of the K block with turn t adds
 *    its rows once the counter reached 8 t (every warp of the blocks before it released), then
 *    releases one count after its adds completed. No block barrier around the turn.
 *  - Head dim 64 as well as 128. At d = 64 each warpgroup takes dQ over its own 64 keys for all
 *    64 features (m64n64, k = 64), so the dQ products need only the warpgroup's own dS panel (a
 *    named barrier of 128 threads, not the block barrier of d = 128, whose dQ halves are split
 *    by features and read both panels); both warpgroups then add into the same dQ rows, which
 *    deterministic mode orders too (warpgroup 1 waits for 8 t + 4: warpgroup 0's four warps).
 *
 * Tiles as sm90: BN = 128 keys per block (warpgroup w: keys [64 w, 64 w + 64)), Q blocks of
 * BM = 64 rows, 256 threads, one block per SM. Dense only (varlen stays on sm80).
 */
#include "attn_bwd_common.cuh"
#include "attn_cuda.cuh"
#include "ptx.cuh"
#include "ptx_sm90.cuh"

#include <math.h>

namespace {

/* NWG warpgroups per block (2; 1 for sm90v2s at d 64), BN = 64 NWG keys, 128 NWG threads */
constexpr int V2_BM = 64;
/* dQ staging rows: 64 floats + 16 bytes, so the 8 rows a warp's float2 stores touch at once
 * fall on different banks (a 256-byte stride would put them all on the same 8) */
constexpr int V2_DQ_ROW = 272;

/* Shared memory, byte offsets from a 1024-byte aligned base. A tile of R rows x D columns is
 * D / 64 panels of R rows x 128 bytes (the 128-byte swizzle of ptx_sm90.cuh). */
template <int D, int NWG> struct bwd90v2_smem {
    static constexpr int BN = 64 * NWG;
    static constexpr int KV_BYTES = BN * D * 2;
    static constexpr int QBUF = V2_BM * D * 2;              /* one buffer of Q (or dO)   */
    static constexpr int K = 0;
    static constexpr int V = K + KV_BYTES;
    static constexpr int Q = V + KV_BYTES;                  /* [2][D / 64][BM][128 B]   */
    static constexpr int DO = Q + 2 * QBUF;                 /* [2][D / 64][BM][128 B]   */
    static constexpr int DS = DO + 2 * QBUF;                /* [2 panels][BM][128 B]    */
    static constexpr int DQ = DS + V2_BM * BN * 2;          /* float [2][NWG][BM][272 B] */
    static constexpr int DQ_BUF = NWG * V2_BM * V2_DQ_ROW;  /* one buffer, every warpgroup */
    static constexpr int LSE = DQ + 2 * DQ_BUF;             /* float [2][BM], raw LSE   */
    static constexpr int DSUM = LSE + 2 * V2_BM * 4;        /* float [2][BM], D         */
    static constexpr int TOTAL = DSUM + 2 * V2_BM * 4;
    static constexpr int LAUNCH = TOTAL + 1024;             /* room to align the base   */
};

} // namespace

/* T: __nv_bfloat16 or __half; D: 64 or 128; DET: deterministic dQ; MODS: softcap or ALiBi.
 * EARLY (family sm90v2e, d 64, without MODS only): dV += P^T dO is issued as soon as P^T is
 * packed, so it runs on the tensor cores while dS^T = P^T (dP^T - D) is computed.
 * ATOM (family sm90v2sa, d 64, fast mode only): dQ added from registers by 16-byte atomics
 * as in sm90, not by the staging tile and bulk reductions (the device run of 23:00 measured
 * sm90v2 at d 128 0.92-0.96x sm90: is it the bulk path? At d 128 the atomics' shuffles spill
 * 36 bytes, so only d 64 has the instance).
 * REGDET (family sm90v2sd, d 64, deterministic mode only): the turn's adds from registers by
 * 16-byte L2 loads and stores, as sm90's deterministic mode, instead of a bulk reduction the
 * warp must see complete before it releases the turn. */
template <typename T, int D, bool DET, bool MODS, bool EARLY = false, int NWG = 2,
          bool ATOM = false, bool REGDET = false>
__global__ void __launch_bounds__(128 * NWG, 3 - NWG) attn_bwd_sm90v2_kernel(const attn_bwd_args a)
{
#if FLASHC_PTX_SM90A
    using L = bwd90v2_smem<D, NWG>;
    constexpr int BM = V2_BM, BN = 64 * NWG, THREADS = 128 * NWG;
    static_assert(NWG == 2 || (NWG == 1 && D == 64), "one warpgroup: d 64 (dQ by keys) only");
    constexpr int NT = BM / 8; /* 8-query column tiles of S^T, dP^T */
    constexpr int DT = D / 8;  /* 8-wide column tiles of dK, dV     */
    static_assert(D == 64 || D == 128, "dK, dV as m64nDk16 accumulators");
    /* d 128: dQ halves by features (64 each, over all 128 keys: both dS panels);
     * d 64: dQ partials by keys (this warpgroup's 64, all 64 features: its own panel) */
    constexpr bool DQ_BY_KEYS = D == 64;

    extern __shared__ uint8_t smem_raw[];
    const uint32_t raw = ptx_smem_addr(smem_raw);
    const uint32_t base = (raw + 1023u) & ~1023u;
    uint8_t *sbase = smem_raw + (base - raw);
    const float *sL = (const float *)(sbase + L::LSE);
    const float *sDs = (const float *)(sbase + L::DSUM);
    const uint32_t sK = base + L::K, sV = base + L::V, sQ = base + L::Q, sdO = base + L::DO;
    const uint32_t sdS = base + L::DS;

    const int tid = (int)threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wg = warp / 4, wq = warp % 4;
    const int g = lane / 4, t = lane % 4;
    const bwd_range rg = bwd_range_of(a);
    int n_block, bh;
    bwd_block_of(a, rg, DET, &n_block, &bh);
    const int b = bh / a.Hkv, hk = bh % a.Hkv;
    const int n0 = n_block * BN;
    const int n_mb = (a.Sq + BM - 1) / BM;
    int m_begin, m_end;
    bwd_q_blocks(a, rg, n0, BN, BM, &m_begin, &m_end);
    const int per_head = max(0, m_end - m_begin);
    const int total = a.group * per_head;

    const T *kg = (const T *)a.k + b * a.sk[0] + hk * a.sk[2] + (int64_t)n0 * a.sk[1];
    const T *vg = (const T *)a.v + b * a.sv[0] + hk * a.sv[2] + (int64_t)n0 * a.sv[1];

    /* Q, dO, LSE, D of Q block m of head h into buffer buf, all by cp.async (no thread waits
     * here). Rows past Sq: zeros (Q, dO zero, so their P and dS add nothing to dK, dV; their
     * dQ rows are never added). */
    auto load_q = [&](int buf, int h, int m) {
        const int m0 = m * BM;
        const T *qg = (const T *)a.q + b * a.sq[0] + h * a.sq[2] + (int64_t)m0 * a.sq[1];
        const T *dog = (const T *)a.dout + b * a.sdo[0] + h * a.sdo[2] + (int64_t)m0 * a.sdo[1];
        bwd_load_tile<T, D, BM, THREADS>(sQ + buf * L::QBUF, qg, a.sq[1], a.Sq - m0);
        bwd_load_tile<T, D, BM, THREADS>(sdO + buf * L::QBUF, dog, a.sdo[1], a.Sq - m0);
        if (tid < 2 * BM) {
            const int r = tid % BM;
            const bool valid = m0 + r < a.Sq;
            const int rr = valid ? m0 + r : 0;
            const float *src =
                tid < BM ? a.lse + b * a.slse[0] + h * a.slse[1] + (int64_t)rr * a.slse[2]
                         : a.dsum + ((int64_t)b * a.Hq + h) * a.Sq + rr;
            ptx_cp_async_4(base + (tid < BM ? L::LSE : L::DSUM) + (uint32_t)(buf * BM + r) * 4, src,
                           valid);
        }
    };

    float dk[DT][4], dv[DT][4];
#pragma unroll
    for (int dt = 0; dt < DT; dt++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            dk[dt][e] = dv[dt][e] = 0.0f;

    if (total > 0) {
        bwd_load_tile<T, D, BN, THREADS>(sK, kg, a.sk[1], a.Sk - n0);
        bwd_load_tile<T, D, BN, THREADS>(sV, vg, a.sv[1], a.Sk - n0);
        load_q(0, hk * a.group, m_begin);
        ptx_cp_async_commit();
    }

    int h = hk * a.group, m = m_begin;
    for (int it = 0; it < total; it++) {
        const int buf = it & 1;
        const int m0 = m * BM;
        ptx_cp_async_wait<0>();
        ptx_fence_proxy_async_shared(); /* this thread's copies, for the wgmmas */
        __syncthreads(); /* the tiles landed; every warpgroup is done with the other buffer,
                            with dS and with K as dQ's operand */
        int h_next = h, m_next = m + 1;
        if (m_next == m_end)
            h_next = h + 1, m_next = m_begin;
        if (it + 1 < total) {
            load_q(buf ^ 1, h_next, m_next);
            ptx_cp_async_commit();
        }
        const uint32_t q_buf = sQ + buf * L::QBUF, do_buf = sdO + buf * L::QBUF;
        const float *lrow = sL + buf * BM, *drow = sDs + buf * BM;

        /* S^T, dP^T: this warpgroup's 64 keys x the BM queries, k over the head dim */
        float s[NT][4], dp[NT][4];
        bwd_st_dpt_mma<T, D, BM, BN>(s, dp, sK, sV, q_buf, do_buf, wg);

        uint32_t pa[BM / 16][4], da[BM / 16][4]; /* A fragments of P^T, dS^T */
        const int key0 = n0 + warp * 16 + g; /* this thread's keys: key0, key0 + 8 */
        const bool need_mask = bwd_tile_needs_mask(a, rg, m0, BM, n0, BN);
        if constexpr (!MODS) {
            /* P^T = 2^(S^T s' - L') while dP^T is still on the tensor cores */
            ptx_wgmma_wait<1>();
            ptx_fence_operands(s);
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int qi = nt * 8 + 2 * t + (e & 1);
                    const int key = key0 + (e >= 2 ? 8 : 0);
                    float p = ptx_exp2(fmaf(s[nt][e], a.scale_log2, -bwd_lse_log2(lrow[qi])));
                    if (need_mask && (key >= a.Sk || bwd_outside(rg, key - (m0 + qi))))
                        p = 0.0f;
                    s[nt][e] = p;
                }
            if constexpr (EARLY) {
#pragma unroll
                for (int kk = 0; kk < BM / 16; kk++) {
                    ptx_pack_a<T>(pa[kk], s[2 * kk], s[2 * kk + 1]);
                }
                ptx_fence_operands(dv);
                ptx_wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < BM / 16; kk++) {
                    const uint64_t desc = ptx_wgmma_desc(do_buf + kk * 16 * 128, BM * 128, 1024);
                    if constexpr (D == 128)
                        ptx_wgmma_rs_m64n128k16_tb(T(), dv, pa[kk], desc, 1);
                    else
                        ptx_wgmma_rs_m64n64k16_tb(T(), dv, pa[kk], desc, 1);
                }
                ptx_wgmma_commit();
                ptx_wgmma_wait<1>(); /* dP^T (dV may still run) */
            } else {
                ptx_wgmma_wait<0>();
            }
            ptx_fence_operands(dp);
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    dp[nt][e] = s[nt][e] * (dp[nt][e] - drow[nt * 8 + 2 * t + (e & 1)]);
        } else {
            /* softcap's derivative needs the raw score beside dP: both first */
            ptx_wgmma_wait<0>();
            ptx_fence_operands(s);
            ptx_fence_operands(dp);
            const float slope = bwd_slope(a, b, h);
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int qi = nt * 8 + 2 * t + (e & 1);
                    const int key = key0 + (e >= 2 ? 8 : 0);
                    float p, ds;
                    bwd_mod_elem(a, slope, s[nt][e], dp[nt][e], bwd_lse_log2(lrow[qi]), drow[qi],
                                 key - (m0 + qi) - rg.diag, &p, &ds);
                    if (need_mask && (key >= a.Sk || bwd_outside(rg, key - (m0 + qi))))
                        p = ds = 0.0f;
                    s[nt][e] = p;
                    dp[nt][e] = ds;
                }
        }

        /* A fragments: tiles 2 kk, 2 kk + 1 are queries [16 kk, 16 kk + 16) */
#pragma unroll
        for (int kk = 0; kk < BM / 16; kk++) {
            if constexpr (!EARLY || MODS) {
                ptx_pack_a<T>(pa[kk], s[2 * kk], s[2 * kk + 1]);
            }
            ptx_pack_a<T>(da[kk], dp[2 * kk], dp[2 * kk + 1]);
        }

        /* dS [query][key] into panel wg (see attn_bwd_sm90.cu: fragment i of da[kk] is keys
         * 8 (i & 1) + g of the warp's 16, queries 8 (2 kk + (i >> 1)) + 2t; stored transposed,
         * row j is query 8 (2 kk + (i >> 1)) + j, chunk 2 wq + (i & 1) of that row) */
        {
            const int i = lane / 8, j = lane % 8;
            const int c = 2 * wq + (i & 1);
#pragma unroll
            for (int kk = 0; kk < BM / 16; kk++) {
                const int q = (2 * kk + (i >> 1)) * 8 + j;
                ptx_stmatrix_x4_trans(sdS + (uint32_t)(wg * BM * 128 + q * 128 + ((c ^ (q & 7)) * 16)),
                                      da[kk]);
            }
        }
        ptx_fence_proxy_async_shared(); /* dS, for the dQ wgmmas after the barrier */

        /* dV += P^T dO, dK += dS^T Q: queries are the reduction index, 16 per step; dO and Q
         * MN-major (two 8-row groups per step, SBO; the feature panels, LBO) */
        if constexpr (!EARLY || MODS)
            ptx_fence_operands(dv);
        ptx_fence_operands(dk);
        ptx_wgmma_fence();
        if constexpr (!EARLY || MODS) {
#pragma unroll
            for (int kk = 0; kk < BM / 16; kk++) {
                const uint64_t desc = ptx_wgmma_desc(do_buf + kk * 16 * 128, BM * 128, 1024);
                if constexpr (D == 128)
                    ptx_wgmma_rs_m64n128k16_tb(T(), dv, pa[kk], desc, 1);
                else
                    ptx_wgmma_rs_m64n64k16_tb(T(), dv, pa[kk], desc, 1);
            }
        }
#pragma unroll
        for (int kk = 0; kk < BM / 16; kk++) {
            const uint64_t desc = ptx_wgmma_desc(q_buf + kk * 16 * 128, BM * 128, 1024);
            if constexpr (D == 128)
                ptx_wgmma_rs_m64n128k16_tb(T(), dk, da[kk], desc, 1);
            else
                ptx_wgmma_rs_m64n64k16_tb(T(), dk, da[kk], desc, 1);
        }
        ptx_wgmma_commit();

        /* dQ tile acc: the BM queries x 64 columns. d 128: features [64 wg, +64) = dS K over
         * the 128 keys, both warpgroups' dS panels (the block barrier); d 64: all 64 features
         * over this warpgroup's keys, its own panel (a barrier of its 128 threads). */
        float acc[8][4];
        if constexpr (DQ_BY_KEYS)
            ptx_named_bar_sync(1 + wg, 128);
        else
            __syncthreads();
        bwd_dq_mma<T, BM, BN, DQ_BY_KEYS>(acc, sdS, sK, wg);
        ptx_wgmma_wait<0>();
        ptx_fence_operands(acc);
        ptx_fence_operands(dv);
        ptx_fence_operands(dk);
        ptx_fence_operands(pa);
        ptx_fence_operands(da);

        /* acc[j]: rows 16 wq + g (+8), columns 8 j + 2t, +1 */
        if constexpr (REGDET && DET) {
            const bool odd = (t & 1) != 0;
            const int arow = wq * 16 + g + (odd ? 8 : 0);
            const bool row_ok = m0 + arow < a.Sq;
            float *p = a.dq_acc + (((int64_t)b * a.Hq + h) * a.Sq + m0 + arow) * D +
                       (DQ_BY_KEYS ? 0 : wg * 64) + 2 * t - (odd ? 2 : 0);
            if (lane == 0) {
                const int *sem = a.sem + ((int64_t)b * a.Hq + h) * n_mb + m;
                const int turn = bwd_turn(rg, n_block, (int)gridDim.x, m, BM, BN);
                const int target = 4 * NWG * turn + (DQ_BY_KEYS ? 4 * wg : 0);
                while (ptx_ld_acquire_gpu(sem) < target) {
                }
            }
            __syncwarp(); /* our turn: the blocks before us in the order added theirs */
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const float s0 = odd ? acc[j][0] : acc[j][2];
                const float s1 = odd ? acc[j][1] : acc[j][3];
                const float r0 = __shfl_xor_sync(0xffffffffu, s0, 1);
                const float r1 = __shfl_xor_sync(0xffffffffu, s1, 1);
                if (row_ok) {
                    float4 *q = (float4 *)(p + j * 8);
                    float4 v = __ldcg(q);
                    if (odd)
                        v.x += r0, v.y += r1, v.z += acc[j][2], v.w += acc[j][3];
                    else
                        v.x += acc[j][0], v.y += acc[j][1], v.z += r0, v.w += r1;
                    __stcg(q, v);
                }
            }
            __threadfence(); /* this lane's adds, device-wide, before the release */
            __syncwarp();
            if (lane == 0)
                ptx_red_release_gpu_add(a.sem + ((int64_t)b * a.Hq + h) * n_mb + m, 1);
        } else if constexpr (ATOM && !DET) {
            /* lane pairs (t, t ^ 1) swap halves: the even lane then holds row g, columns
             * 8 j + 2t .. +3, the odd one row g + 8, columns 8 j + 2t - 2 .. +1 */
            const bool odd = (t & 1) != 0;
            const int arow = wq * 16 + g + (odd ? 8 : 0);
            const bool row_ok = m0 + arow < a.Sq;
            float *p = a.dq_acc + (((int64_t)b * a.Hq + h) * a.Sq + m0 + arow) * D +
                       (DQ_BY_KEYS ? 0 : wg * 64) + 2 * t - (odd ? 2 : 0);
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const float s0 = odd ? acc[j][0] : acc[j][2];
                const float s1 = odd ? acc[j][1] : acc[j][3];
                const float r0 = __shfl_xor_sync(0xffffffffu, s0, 1);
                const float r1 = __shfl_xor_sync(0xffffffffu, s1, 1);
                if (row_ok)
                    atomicAdd((float4 *)(p + j * 8),
                              odd ? make_float4(r0, r1, acc[j][2], acc[j][3])
                                  : make_float4(acc[j][0], acc[j][1], r0, r1));
            }
        } else {
            /* this warp's 16 rows into the staging buffer of this iteration, then lane r < 16
             * adds row 16 wq + r; before the stores, this warp's bulk reads of two iterations
             * ago (the same buffer) are done */
            const uint32_t stage_s = base + L::DQ + buf * L::DQ_BUF + wg * BM * V2_DQ_ROW;
            if (!DET && lane < 16)
                ptx_bulk_wait_group_read<1>();
            __syncwarp();
            {
                const uint32_t st0 = stage_s + (uint32_t)((wq * 16 + g) * V2_DQ_ROW + 8 * t);
    #pragma unroll
                for (int j = 0; j < 8; j++) {
                    ptx_st_shared_v2_f32(st0 + 32 * j, acc[j][0], acc[j][1]);
                    ptx_st_shared_v2_f32(st0 + 8 * V2_DQ_ROW + 32 * j, acc[j][2], acc[j][3]);
                }
            }
            ptx_fence_proxy_async_shared(); /* the stores, for the copy engine's reads */
            __syncwarp();
            const int row = wq * 16 + lane;
            const bool adds = lane < 16 && m0 + row < a.Sq;
            float *dqa = a.dq_acc + (((int64_t)b * a.Hq + h) * a.Sq + m0 + row) * D +
                         (DQ_BY_KEYS ? 0 : wg * 64);
            if constexpr (!DET) {
                if (adds)
                    ptx_bulk_reduce_add_f32(dqa, stage_s + (uint32_t)row * V2_DQ_ROW, 256);
                if (lane < 16)
                    ptx_bulk_commit_group();
            } else {
                if (lane == 0) {
                    const int *sem = a.sem + ((int64_t)b * a.Hq + h) * n_mb + m;
                    /* every warp (4 NWG) releases one count; d 64's warpgroup 1 also waits
                     * for warpgroup 0 of its own block */
                    const int turn = bwd_turn(rg, n_block, (int)gridDim.x, m, BM, BN);
                    const int target = 4 * NWG * turn + (DQ_BY_KEYS ? 4 * wg : 0);
                    while (ptx_ld_acquire_gpu(sem) < target) {
                    }
                }
                __syncwarp();
                if (lane < 16) {
                    ptx_fence_proxy_async_global(); /* the acquire before our bulk adds */
                    if (adds)
                        ptx_bulk_reduce_add_f32(dqa, stage_s + (uint32_t)row * V2_DQ_ROW, 256);
                    ptx_bulk_commit_group();
                    ptx_bulk_wait_group<0>(); /* our adds performed ... */
                    ptx_fence_proxy_async_global(); /* ... and ordered before the release */
                }
                __syncwarp();
                if (lane == 0) {
                    bwd_release_turn(a, a.sem + ((int64_t)b * a.Hq + h) * n_mb + m);
                }
            }
        }
        h = h_next, m = m_next;
    }
    /* the block's shared memory outlives the copy engine's last reads */
    if (lane < 16)
        ptx_bulk_wait_group<0>();

    /* dK = scale dS^T Q and dV; rows past Sk not stored; all zero if no query sees the keys */
    T *dkg = (T *)a.dk + b * a.sdk[0] + hk * a.sdk[2] + (int64_t)n0 * a.sdk[1] + 2 * t;
    T *dvg = (T *)a.dv + b * a.sdv[0] + hk * a.sdv[2] + (int64_t)n0 * a.sdv[1] + 2 * t;
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        const int r = warp * 16 + g + 8 * hr;
        if (n0 + r < a.Sk) {
            T *krow = dkg + (int64_t)r * a.sdk[1];
            T *vrow = dvg + (int64_t)r * a.sdv[1];
#pragma unroll
            for (int dt = 0; dt < DT; dt++) {
                *(uint32_t *)(krow + dt * 8) =
                    ptx_pack2(T(), dk[dt][2 * hr] * a.scale, dk[dt][2 * hr + 1] * a.scale);
                *(uint32_t *)(vrow + dt * 8) = ptx_pack2(T(), dv[dt][2 * hr], dv[dt][2 * hr + 1]);
            }
        }
    }
#endif
}

template <typename T, int D, bool EARLY, int NWG, bool ATOM = false, bool REGDET = false>
static cudaError_t attn_bwd_sm90v2_launch(const attn_bwd_args *a, cudaStream_t stream)
{
    cudaError_t err = attn_bwd_pre_launch<T, D, V2_BM, 1>(a, stream);
    if (err != cudaSuccess)
        return err;

    constexpr int smem = bwd90v2_smem<D, NWG>::LAUNCH;
    const bool mods = a->softcap > 0.0f || a->alibi;
    void (*kernel)(const attn_bwd_args) =
        mods ? (a->deterministic ? attn_bwd_sm90v2_kernel<T, D, true, true, false, NWG, false, REGDET>
                                 : attn_bwd_sm90v2_kernel<T, D, false, true, false, NWG, ATOM>)
             : (a->deterministic ? attn_bwd_sm90v2_kernel<T, D, true, false, EARLY, NWG, false, REGDET>
                                 : attn_bwd_sm90v2_kernel<T, D, false, false, EARLY, NWG, ATOM>);
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    /* the largest shared-memory carveout, so that sm90v2s's two blocks fit on an SM */
    if (err == cudaSuccess)
        err = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 100);
    if (err != cudaSuccess)
        return err;
    const dim3 grid((unsigned)((a->Sk + 64 * NWG - 1) / (64 * NWG)), (unsigned)(a->B * a->Hkv), 1);
    kernel<<<grid, 128 * NWG, smem, stream>>>(*a);
    if ((err = cudaGetLastError()) != cudaSuccess)
        return err;

    return attn_bwd_post_bh_launch<T, D>(a, stream);
}

/* opt_in 1: taken only under FLASHC_CUDA_BWD_KERNEL=sm90v2, sm90v2e, sm90v2s, sm90v2sa, sm90v2sd
 * (sm90v3w, attn_bwd_sm90v3.cu, is the dispatcher's choice at d 64; the sm80 family stays at
 * FLASHC_CUDA_BWD_KERNEL=sm80).
 * sm90v2e at d 64 only: at d 128 the early dV holds P^T's fragments beside dP^T and spills
 * (56 bytes by ptxas), at d 64 it fits (236 registers). sm90v2s (d 64): one warpgroup of 64
 * keys per block and two blocks per SM, which run out of step, so one's element-wise work
 * can overlap the other's wgmmas (the two warpgroups of a 2-warpgroup block meet at a block
 * barrier per Q block); each Q tile is loaded per 64 keys instead of 128, but dQ is added once
 * per element per block instead of twice. */
const attn_bwd_variant attn_bwd_sm90v2_variants[] = {
    {"attn_bwd_bf16_sm90v2_d128_64x128", "sm90v2", FLASHC_BF16, 128, 90, 90, V2_BM, 128, 1,
     bwd90v2_smem<128, 2>::LAUNCH, attn_bwd_sm90v2_launch<__nv_bfloat16, 128, false, 2>, NULL, 1},
    {"attn_bwd_f16_sm90v2_d128_64x128", "sm90v2", FLASHC_F16, 128, 90, 90, V2_BM, 128, 1,
     bwd90v2_smem<128, 2>::LAUNCH, attn_bwd_sm90v2_launch<__half, 128, false, 2>, NULL, 1},
    {"attn_bwd_bf16_sm90v2_d64_64x128", "sm90v2", FLASHC_BF16, 64, 90, 90, V2_BM, 128, 1,
     bwd90v2_smem<64, 2>::LAUNCH, attn_bwd_sm90v2_launch<__nv_bfloat16, 64, false, 2>, NULL, 1},
    {"attn_bwd_f16_sm90v2_d64_64x128", "sm90v2", FLASHC_F16, 64, 90, 90, V2_BM, 128, 1,
     bwd90v2_smem<64, 2>::LAUNCH, attn_bwd_sm90v2_launch<__half, 64, false, 2>, NULL, 1},
    {"attn_bwd_bf16_sm90v2e_d64_64x128", "sm90v2e", FLASHC_BF16, 64, 90, 90, V2_BM, 128, 1,
     bwd90v2_smem<64, 2>::LAUNCH, attn_bwd_sm90v2_launch<__nv_bfloat16, 64, true, 2>, NULL, 1},
    {"attn_bwd_f16_sm90v2e_d64_64x128", "sm90v2e", FLASHC_F16, 64, 90, 90, V2_BM, 128, 1,
     bwd90v2_smem<64, 2>::LAUNCH, attn_bwd_sm90v2_launch<__half, 64, true, 2>, NULL, 1},
    /* the default at d 64 on compute capability 9.0 from the device run of 2026-12-01 23:00
     * (correct in every forced test, 1.27x the sm80 kernel) until sm90v3w replaced it after
     * s8_bwd6.sh's run (bench/RESULTS.md); opt-in since, and sm90v3w's fallback where the copy
     * engine cannot map a stride */
    {"attn_bwd_bf16_sm90v2s_d64_64x64", "sm90v2s", FLASHC_BF16, 64, 90, 90, V2_BM, 64, 1,
     bwd90v2_smem<64, 1>::LAUNCH, attn_bwd_sm90v2_launch<__nv_bfloat16, 64, false, 1>, NULL, 1},
    {"attn_bwd_f16_sm90v2s_d64_64x64", "sm90v2s", FLASHC_F16, 64, 90, 90, V2_BM, 64, 1,
     bwd90v2_smem<64, 1>::LAUNCH, attn_bwd_sm90v2_launch<__half, 64, false, 1>, NULL, 1},
    {"attn_bwd_bf16_sm90v2sa_d64_64x64", "sm90v2sa", FLASHC_BF16, 64, 90, 90, V2_BM, 64, 1,
     bwd90v2_smem<64, 1>::LAUNCH, attn_bwd_sm90v2_launch<__nv_bfloat16, 64, false, 1, true>, NULL, 1},
    {"attn_bwd_f16_sm90v2sa_d64_64x64", "sm90v2sa", FLASHC_F16, 64, 90, 90, V2_BM, 64, 1,
     bwd90v2_smem<64, 1>::LAUNCH, attn_bwd_sm90v2_launch<__half, 64, false, 1, true>, NULL, 1},
    {"attn_bwd_bf16_sm90v2sd_d64_64x64", "sm90v2sd", FLASHC_BF16, 64, 90, 90, V2_BM, 64, 1,
     bwd90v2_smem<64, 1>::LAUNCH, attn_bwd_sm90v2_launch<__nv_bfloat16, 64, false, 1, false, true>, NULL, 1},
    {"attn_bwd_f16_sm90v2sd_d64_64x64", "sm90v2sd", FLASHC_F16, 64, 90, 90, V2_BM, 64, 1,
     bwd90v2_smem<64, 1>::LAUNCH, attn_bwd_sm90v2_launch<__half, 64, false, 1, false, true>, NULL, 1},
};
const int attn_bwd_sm90v2_variant_count =
    (int)(sizeof attn_bwd_sm90v2_variants / sizeof attn_bwd_sm90v2_variants[0]);
