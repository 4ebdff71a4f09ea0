/*
 * attn_bwd_sm90.cu — FlashAttention backward for Hopper (sm_90a): the five products of the
 * sm80 kernel (attn_bwd_sm80.cu) on wgmma instead of mma.sync. Same three kernels per call
 * (the preprocess and postprocess of attn_bwd_common.cuh), same grid, same dQ accumulation
 * (atomics, or deterministic mode's turn order), same masks; only the main loop differs.
 *
 * Why: the sm80 kernel at d = 128 is bound by shared-memory bandwidth. Each of its 8 warps owns
 * 16 keys and reads the whole Q and dO tiles twice per Q block through ldmatrix (S^T, dP^T as
 * B operands, then dV, dK as B operands): about 750 KB of shared reads per 64 x 128 block step
 * for 10.5 MFLOP, ~5,900 cycles at 128 B/cycle against ~3,800 cycles of mma.sync. wgmma reads a
 * shared operand once per warpgroup (4 warps) and feeds the tensor cores at their Hopper rate:
 * about 256 KB per step here (~2,000 cycles) against ~2,600 cycles of wgmma at the dense peak.
 *
 * One thread block of two warpgroups per K/V block of BN = 128 keys (warpgroup w: keys
 * [64 w, 64 w + 64), warp 4 w + j of it keys [16 (4 w + j), +16): the sm80 kernel's key rows),
 * looping over the Q blocks of BM = 64 rows (and the query heads of the GQA group) that see
 * its keys. Per Q block, per warpgroup:
 *   S^T  = K Q^T      wgmma m64n64k16, K and Q from shared memory, both K-major
 *   dP^T = V dO^T     the same
 *   P^T, dS^T         in registers, as in sm80 (the accumulator layout per warp is the m16n8 C
 *                     layout of mma.sync, so the masking and exp code is the same)
 *   dV += P^T dO      wgmma m64n128k16, P^T from registers (the C layout packs into the A
 *   dK += dS^T Q      fragment as is), dO and Q from shared memory MN-major (queries are K)
 *   dS^T -> shared memory as dS [query][key] (stmatrix .trans: the warpgroup's 64 keys are one
 *                     64-column panel), then after a block barrier
 *   dQ_tile = dS K    wgmma m64n64k16: all 64 queries x this warpgroup's 64 feature columns,
 *                     dS K-major, K MN-major (keys are K), added to the float32 accumulator
 *                     with 16-byte atomics (lane pairs swap halves so each holds 4 adjacent
 *                     columns of one row), or in deterministic mode in the turn order.
 * Shared tiles are the forward's 128-byte-swizzled panels (ptx_sm90.cuh), filled by cp.async
 * (Q, dO double-buffered as in sm80); fence.proxy.async hands them to wgmma.
 *
 * Serves bf16/fp16 at head dim 128, compute capability 9.0 exactly; everything else stays on
 * the sm80 family (attn_bwd.cu picks). Not yet: TMA and warp specialisation (FlashAttention-3
 * splits producer and consumers and overlaps the softmax-like step of one warpgroup with the
 * other's wgmmas), head dims 64 (dQ's 32-column halves) and 256.
 */
#include "attn_bwd_common.cuh"
#include "attn_cuda.cuh"
#include "ptx.cuh"
#include "ptx_sm90.cuh"

#include <math.h>

namespace {

constexpr int B90_BM = 64, B90_BN = 128, B90_THREADS = 256;

/* Shared memory of one thread block, byte offsets from a 1024-byte aligned base. A tile of R
 * rows and D columns is D / 64 panels of R rows x 128 bytes. */
template <int D> struct bwd90_smem {
    static constexpr int KV_BYTES = B90_BN * D * 2;
    static constexpr int QBUF = B90_BM * D * 2;      /* one buffer of Q (or dO)           */
    static constexpr int K = 0;
    static constexpr int V = K + KV_BYTES;
    static constexpr int Q = V + KV_BYTES;           /* [2][D / 64][BM][128 B]            */
    static constexpr int DO = Q + 2 * QBUF;          /* [2][D / 64][BM][128 B]            */
    static constexpr int DS = DO + 2 * QBUF;         /* dS [2 panels of 64 keys][BM][128 B] */
    static constexpr int LSE = DS + B90_BM * B90_BN * 2; /* float [2][BM]: LSE log2 e or +inf */
    static constexpr int DSUM = LSE + 2 * B90_BM * 4;    /* float [2][BM]: D                 */
    static constexpr int TOTAL = DSUM + 2 * B90_BM * 4;
    static constexpr int LAUNCH = TOTAL + 1024; /* room to align the base */
};

} // namespace

/* T: __nv_bfloat16 or __half; D: 128; DET: deterministic dQ (a.deterministic); MODS: softcap
 * or ALiBi (template arguments for the registers, as in sm80). */
template <typename T, int D, bool DET, bool MODS>
__global__ void __launch_bounds__(B90_THREADS, 1) attn_bwd_sm90_kernel(const attn_bwd_args a)
{
#if FLASHC_PTX_SM90A
    using L = bwd90_smem<D>;
    constexpr int BM = B90_BM, BN = B90_BN;
    constexpr int NT = BM / 8;  /* 8-query column tiles of S^T, dP^T */
    constexpr int DT = D / 8;   /* 8-wide column tiles of dK, dV     */
    static_assert(D == 128, "dK, dV as m64n128 accumulators; dQ in two 64-column halves");

    extern __shared__ uint8_t smem_raw[];
    const uint32_t raw = ptx_smem_addr(smem_raw);
    const uint32_t base = (raw + 1023u) & ~1023u;
    float *sL = (float *)(smem_raw + (base - raw) + L::LSE);
    float *sDs = (float *)(smem_raw + (base - raw) + L::DSUM);
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

    auto load_q = [&](int buf, int h, int m) {
        const int m0 = m * BM;
        const T *qg = (const T *)a.q + b * a.sq[0] + h * a.sq[2] + (int64_t)m0 * a.sq[1];
        const T *dog = (const T *)a.dout + b * a.sdo[0] + h * a.sdo[2] + (int64_t)m0 * a.sdo[1];
        bwd_load_tile<T, D, BM, B90_THREADS>(sQ + buf * L::QBUF, qg, a.sq[1], a.Sq - m0);
        bwd_load_tile<T, D, BM, B90_THREADS>(sdO + buf * L::QBUF, dog, a.sdo[1], a.Sq - m0);
        for (int r = tid; r < BM; r += B90_THREADS) {
            float l = INFINITY, dsum = 0.0f;
            if (m0 + r < a.Sq) {
                const float lse =
                    a.lse[b * a.slse[0] + h * a.slse[1] + (int64_t)(m0 + r) * a.slse[2]];
                if (lse > -INFINITY) /* -inf: the row saw no key; P = 0 there */
                    l = lse * 1.4426950408889634f;
                dsum = a.dsum[((int64_t)b * a.Hq + h) * a.Sq + m0 + r];
            }
            sL[buf * BM + r] = l;
            sDs[buf * BM + r] = dsum;
        }
    };

    float dk[DT][4], dv[DT][4];
#pragma unroll
    for (int dt = 0; dt < DT; dt++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            dk[dt][e] = dv[dt][e] = 0.0f;

    if (total > 0) {
        bwd_load_tile<T, D, BN, B90_THREADS>(sK, kg, a.sk[1], a.Sk - n0);
        bwd_load_tile<T, D, BN, B90_THREADS>(sV, vg, a.sv[1], a.Sk - n0);
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

        /* S^T, dP^T: this warpgroup's 64 keys x the BM queries, k over the head dim */
        float s[NT][4], dp[NT][4];
        bwd_st_dpt_mma<T, D, BM, BN>(s, dp, sK, sV, q_buf, do_buf, wg);

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
                    float p = ptx_exp2(fmaf(s[nt][e], a.scale_log2, -sL[buf * BM + qi]));
                    if (need_mask && (key >= a.Sk || bwd_outside(rg, key - (m0 + qi))))
                        p = 0.0f;
                    s[nt][e] = p;
                }
            ptx_wgmma_wait<0>();
            ptx_fence_operands(dp);
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    dp[nt][e] = s[nt][e] * (dp[nt][e] - sDs[buf * BM + nt * 8 + 2 * t + (e & 1)]);
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
                    bwd_mod_elem(a, slope, s[nt][e], dp[nt][e], sL[buf * BM + qi],
                                 sDs[buf * BM + qi], key - (m0 + qi) - rg.diag, &p, &ds);
                    if (need_mask && (key >= a.Sk || bwd_outside(rg, key - (m0 + qi))))
                        p = ds = 0.0f;
                    s[nt][e] = p;
                    dp[nt][e] = ds;
                }
        }

        /* A fragments: tiles 2 kk, 2 kk + 1 are queries [16 kk, 16 kk + 16) */
        uint32_t pa[BM / 16][4], da[BM / 16][4];
#pragma unroll
        for (int kk = 0; kk < BM / 16; kk++) {
            ptx_pack_a<T>(pa[kk], s[2 * kk], s[2 * kk + 1]);
            ptx_pack_a<T>(da[kk], dp[2 * kk], dp[2 * kk + 1]);
        }

        /* dS [query][key] into panel wg (keys 64 wg..64 wg + 63): da[kk][i] is the 8 x 8
         * fragment (keys 8 (i & 1) + g of the warp's 16, queries 8 (2 kk + (i >> 1)) + 2t);
         * stored transposed, its row j is query 8 (2 kk + (i >> 1)) + j, and the 8 keys are
         * chunk 2 wq + (i & 1) of that row. Before the dK wgmmas that read da: registers an
         * in-flight wgmma reads are left alone until its wait. */
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
         * MN-major (two 8-row groups per step, SBO; the two feature panels, LBO) */
        ptx_fence_operands(dv);
        ptx_fence_operands(dk);
        ptx_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BM / 16; kk++)
            ptx_wgmma_rs_m64n128k16_tb(T(), dv, pa[kk],
                                       ptx_wgmma_desc(do_buf + kk * 16 * 128, BM * 128, 1024), 1);
#pragma unroll
        for (int kk = 0; kk < BM / 16; kk++)
            ptx_wgmma_rs_m64n128k16_tb(T(), dk, da[kk],
                                       ptx_wgmma_desc(q_buf + kk * 16 * 128, BM * 128, 1024), 1);
        ptx_wgmma_commit();

        __syncthreads(); /* dS complete (both warpgroups' keys) */

        /* dQ tile: the BM queries x features [64 wg, 64 wg + 64) = dS K over the 128 keys */
        float acc[8][4];
        bwd_dq_mma<T, BM, BN, false>(acc, sdS, sK, wg);
        ptx_wgmma_wait<0>();
        ptx_fence_operands(acc);
        ptx_fence_operands(dv);
        ptx_fence_operands(dk);
        ptx_fence_operands(pa);
        ptx_fence_operands(da);

        /* acc[j]: rows 16 wq + g (+8), columns 8 j + 2t, +1 of the warpgroup's 64. Lane pairs
         * (t, t ^ 1) swap halves: the even lane then holds row g, columns 8 j + 2t .. +3, the
         * odd one row g + 8, columns 8 j + 2t - 2 .. +1 (16-byte aligned either way). */
        const bool odd = (t & 1) != 0;
        const int row = wq * 16 + g + (odd ? 8 : 0);
        const int col = 2 * t - (odd ? 2 : 0);
        float *dqa = a.dq_acc + (((int64_t)b * a.Hq + h) * a.Sq + m0 + row) * D + wg * 64 + col;
        float4 add[8];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const float s0 = odd ? acc[j][0] : acc[j][2];
            const float s1 = odd ? acc[j][1] : acc[j][3];
            const float r0 = __shfl_xor_sync(0xffffffffu, s0, 1);
            const float r1 = __shfl_xor_sync(0xffffffffu, s1, 1);
            add[j] = odd ? make_float4(r0, r1, acc[j][2], acc[j][3])
                         : make_float4(acc[j][0], acc[j][1], r0, r1);
        }
        const bool row_ok = m0 + row < a.Sq;
        if constexpr (!DET) {
            if (row_ok)
#pragma unroll
                for (int j = 0; j < 8; j++)
                    atomicAdd((float4 *)(dqa + j * 8), add[j]);
        } else {
            int *sem = a.sem + ((int64_t)b * a.Hq + h) * n_mb + m;
            /* the sm80 kernel's turn order (see attn_bwd_sm80.cu) */
            const int nb = rg.has_hi ? (int)gridDim.x - 1 - ptx_block_index() : ptx_block_index();
            const int turn = bwd_turn(rg, nb, (int)gridDim.x, m, BM, BN);
            if (tid == 0)
                while (ptx_ld_acquire_gpu(sem) != turn) {
                }
            __syncthreads(); /* our turn: the K blocks before us in the order added theirs */
            if (row_ok)
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    float4 *p = (float4 *)(dqa + j * 8);
                    float4 v = __ldcg(p);
                    v.x += add[j].x, v.y += add[j].y, v.z += add[j].z, v.w += add[j].w;
                    __stcg(p, v);
                }
            __syncthreads(); /* every thread's adds are ordered before the release */
            if (tid == 0) {
                bwd_release_turn(a, sem);
            }
        }
        h = h_next, m = m_next;
    }

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

template <typename T, int D>
static cudaError_t attn_bwd_sm90_launch(const attn_bwd_args *a, cudaStream_t stream)
{
    const int64_t rows = (int64_t)a->B * a->Hq * a->Sq;
    cudaError_t err = attn_bwd_pre_launch<T, D, B90_BM, 1>(a, stream);
    if (err != cudaSuccess)
        return err;

    constexpr int smem = bwd90_smem<D>::LAUNCH;
    const bool mods = a->softcap > 0.0f || a->alibi;
    void (*kernel)(const attn_bwd_args) =
        mods ? (a->deterministic ? attn_bwd_sm90_kernel<T, D, true, true>
                                 : attn_bwd_sm90_kernel<T, D, false, true>)
             : (a->deterministic ? attn_bwd_sm90_kernel<T, D, true, false>
                                 : attn_bwd_sm90_kernel<T, D, false, false>);
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (err != cudaSuccess)
        return err;
    const dim3 grid((unsigned)((a->Sk + B90_BN - 1) / B90_BN), (unsigned)(a->B * a->Hkv), 1);
    kernel<<<grid, B90_THREADS, smem, stream>>>(*a);
    if ((err = cudaGetLastError()) != cudaSuccess)
        return err;

    const int64_t pairs = rows * (D / 2);
    const int64_t blocks = (pairs + 255) / 256;
    attn_bwd_post_kernel<T, D>
        <<<(unsigned)(blocks < 65536 * 4 ? blocks : 65536 * 4), 256, 0, stream>>>(*a);
    return cudaGetLastError();
}

/* opt_in 1 since the device round of 2026-12-03: sm90v3w (attn_bwd_sm90v3.cu) is the default at
 * d 128 (fast and deterministic; racecheck-clean after bwd5's fix, bench/RESULTS.md); sm90 stays
 * for FLASHC_CUDA_BWD_KERNEL=sm90 and as sm90v3's fallback where a tensor map does not encode. */
const attn_bwd_variant attn_bwd_sm90_variants[] = {
    {"attn_bwd_bf16_sm90_d128_64x128", "sm90", FLASHC_BF16, 128, 90, 90, B90_BM, B90_BN, 1,
     bwd90_smem<128>::LAUNCH, attn_bwd_sm90_launch<__nv_bfloat16, 128>, NULL, 1},
    {"attn_bwd_f16_sm90_d128_64x128", "sm90", FLASHC_F16, 128, 90, 90, B90_BM, B90_BN, 1,
     bwd90_smem<128>::LAUNCH, attn_bwd_sm90_launch<__half, 128>, NULL, 1},
};
const int attn_bwd_sm90_variant_count =
    (int)(sizeof attn_bwd_sm90_variants / sizeof attn_bwd_sm90_variants[0]);
