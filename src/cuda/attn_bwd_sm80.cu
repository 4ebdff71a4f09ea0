/*
 * attn_bwd_sm80.cu — FlashAttention-2 backward on tensor cores through mma.sync (sm_80 and up;
 * also what runs on sm_90a until a wgmma kernel takes over there). Three kernels per call:
 *
 *   preprocess   D = rowsum(dO * O) per query row (float32), the dQ accumulator zeroed, and in
 *                deterministic mode the turn counters zeroed.
 *   main         one thread block per (K/V block of BN keys, batch, KV head, column slice); it
 *                keeps its K and V tiles in shared memory, loops over the query heads of the GQA
 *                group and, per head, over the Q blocks that see its keys, and accumulates dK and
 *                dV in registers (so GQA sums its group in place, with no expanded K/V).
 *   postprocess  dQ = scale * accumulator, rounded to the storage dtype and written with the
 *                caller's strides.
 *
 * Main kernel, per Q block of BM rows (warp w owns the 16 keys [16 w, 16 w + 16) of the block):
 *   S^T  = K Q^T               16 keys x BM queries per warp, mma.sync m16n8k16
 *   dP^T = V dO^T              the same shape
 *   P^T  = 2^(S^T s' - L')     in registers; s' = scale log2 e, L' = LSE log2 e per query; a row
 *                              that saw no key (LSE = -inf) and padding rows get L' = +inf, so
 *                              P = 0 there and nothing can become NaN
 *   dS^T = P^T (dP^T - D)
 *   dV  += P^T dO,  dK += dS^T Q   the accumulator layouts of P^T and dS^T are the A fragments
 *                                  of these products (no shuffles, as P V in the forward)
 *   dS^T -> shared memory (bf16/fp16), then dQ_block = dS K: warps split the BM x D/split tile,
 *   and add it into the float32 accumulator:
 *     fast           atomicAdd (float2 atomics on sm_90),
 *     deterministic  in a fixed K-block order: the block for K block n waits until the
 *                    counter of its (batch, head, Q block, slice) reads its turn, adds with plain
 *                    loads and stores, then releases the next turn. Without the causal mask the
 *                    order is ascending (turn n) and K block n is launched n-th; under it the
 *                    order is descending (turn n_last(m) - n, n_last(m) the last K block that
 *                    Q block m sees) and the launch order is reversed, so the light blocks near
 *                    the diagonal, which reach a Q block after fewer Q blocks of their own, go
 *                    first and the heavy ones never wait for them (ascending order under the
 *                    mask would hold every block of a head resident, spinning, until its block
 *                    0 got there: half the speed). Either way a block waits only on blocks of
 *                    the same (batch, KV head, slice) with a lower linear block index, which
 *                    were dispatched first: no deadlock however many blocks are resident. Every
 *                    dQ element is then the same sum in the same order on every run; dK and dV
 *                    never depend on the schedule.
 * Q, dO (and their LSE, D) are double-buffered: the cp.async load of the next Q block overlaps
 * the five products of the current one.
 *
 * Head dims above 128 split the output columns over `split` thread blocks per K/V block (each
 * recomputes S and dP over the full head dim, and owns dK, dV, dQ of D / split columns), so dK
 * and dV stay at <= 128 floats per thread in registers. The family sm80p (QS = 2,
 * FlashAttention-2's layout) does it without the recomputation, and is the default above d 128
 * where shared memory holds it (since the H200 run of 2026-12-04 evening, bench/gpu/s12_bwd18.sh:
 * 1.62-1.89x the split instances' throughput, deterministic 1.45-1.62x): one thread block of
 * 2 x BN / 16 warps per K/V block, warp w taking the keys [16 (w mod BN / 16), +16) with half
 * the Q block's queries in S^T, dP^T; P^T and dS^T go to shared memory, and each warp adds dV,
 * dK of its 16 keys over all BM queries for half the columns (A fragments by ldmatrix), and dQ
 * in two passes of half its columns (registers: dK, dV take 128 floats a thread). Every float
 * operation is sm80's, in the same order: the same bits (test_sm80p_bits).
 *
 * Key ranges: causal bottom-right aligned (row i sees key j iff j <= i + Sk - Sq) and windows
 * (keys [a_i - wl, a_i + wr], a_i = i + Sk - Sq), as the forward and the CPU backward
 * (attn_key_range); a K block visits only the Q blocks with a row that sees one of its keys
 * (bwd_q_blocks), masks are applied only on tiles a bound or the Sk tail crosses. Softcap
 * (with its gradient, 1 - tanh^2) and ALiBi go through bwd_mod_elem in the MODS kernels.
 *
 * The plain reference is src/ref/attn_bwd.c; tests/test_cuda_attn_bwd.c checks every variant
 * against a float64 reference and a naive same-precision backward (FlashAttention's 2x rule).
 * Measured speed (about 0.8x FlashAttention-2, 0.5x cuDNN's Hopper kernel at d = 128 on an
 * H200; there the dispatcher now takes attn_bwd_sm90.cu at d = 128) and the version/tile
 * ladder: bench/RESULTS.md. The tile helpers below repeat the
 * forward's (attn_fwd_sm80.cu keeps its own static copies; one shared header is the obvious
 * next step once both files can change together).
 */
#include "attn_bwd_common.cuh"
#include "attn_cuda.cuh"
#include "ptx.cuh"

#include <math.h>

/* ---- shared-memory tiles (the forward's swizzle: chunk c of row r at c ^ (r mod 8)) ------- */

/* Element offset of 16-byte chunk c of row r in a swizzled tile with rows of DS elements
 * (DS a multiple of 64, i.e. whole 128-byte groups of 8 chunks). */
template <int DS> static __device__ __forceinline__ int bwd_swz(int r, int c)
{
    return r * DS + ((c & ~7) | ((c ^ r) & 7)) * 8;
}

/* Shared byte address of even chunk c of a lane's row, from that lane's address of chunk 0 of
 * the pair it reads (swizzle applied to the lane's own row and half; 128-byte rows). */
static __device__ __forceinline__ uint32_t bwd_swz_step(uint32_t lane_base, int c)
{
    return (lane_base ^ (uint32_t)((c & 7) * 16)) + (uint32_t)((c >> 3) * 128);
}

/* Lane bases for ldmatrix (see ptx.cuh). "A": lanes 0-15 rows 0-15 at the pair's first chunk,
 * 16-31 the same rows at the second: plain, an A fragment of a [m][k] tile; .trans, the B
 * fragments of two n-tiles of a [k][n] tile. "B": lanes 0-7 rows 0-7 first chunk, 8-15 rows 0-7
 * second, 16-31 rows 8-15 likewise: plain, the B fragments of two n-tiles of an [n][k] tile;
 * .trans, an A fragment of a [k][m] tile. */
static __device__ __forceinline__ uint32_t lane_a(uint32_t tile, uint32_t rowb, int lane)
{
    return tile + (uint32_t)(lane & 15) * rowb + (uint32_t)(((lane >> 4) ^ (lane & 7)) * 16);
}

static __device__ __forceinline__ uint32_t lane_b(uint32_t tile, uint32_t rowb, int lane)
{
    return tile + (uint32_t)((lane & 7) + (lane >> 4) * 8) * rowb +
           (uint32_t)(((((lane >> 3) & 1) ^ (lane & 7))) * 16);
}

/* Copies rows [0, ROWS) and columns [0, d) of a tile whose row r is at g + r * row_stride into
 * the swizzled shared tile s (D columns) by cp.async; rows >= valid_rows and columns >= d are
 * zero-filled (zero Q/dO/K/V rows keep every product finite; zero columns of a padded head dim
 * add nothing to S^T, dP^T and give zero columns of dK, dV, dQ, which are not stored). The
 * chunk that holds column d - 1 is predicated down to the bytes that exist (src-size < 16
 * zero-fills the rest; nothing past it is read). All NTHREADS threads take part. */
template <typename T, int D, int DS, int ROWS, int NTHREADS>
static __device__ __forceinline__ void bwd_load_tile(T *s, const T *g, int64_t row_stride,
                                                     int valid_rows, int d)
{
    constexpr int CPR = D / 8; /* 16-byte chunks per row */
    constexpr int CHUNKS = ROWS * CPR;
    static_assert(CHUNKS % NTHREADS == 0, "every thread copies the same number of chunks");
#pragma unroll
    for (int i = 0; i < CHUNKS / NTHREADS; i++) {
        const int idx = i * NTHREADS + (int)threadIdx.x;
        const int r = idx / CPR, c = idx % CPR;
        const int bytes = r < valid_rows ? 2 * min(8, max(0, d - 8 * c)) : 0;
        const T *src = g + (bytes > 0 ? (int64_t)r * row_stride + c * 8 : 0);
        ptx_cp_async_16_n(ptx_smem_addr(s + bwd_swz<DS>(r, c)), src, bytes);
    }
}

/* dV += P^T dO and dK += dS^T Q over one 16-query step: pa, da are the A fragments of this
 * warp's 16 keys of P^T and dS^T; dO and Q are read as [query][feature] B operands (.trans) from
 * the lanes' addresses do_lane, q_lane at row offset row_off, DT / 2 pairs of 8-wide column
 * tiles from chunk c (the sm80 kernel's QS = 1 and QS = 2 paths alike). */
template <typename T, int DT>
static __device__ __forceinline__ void bwd_kv_step(float (&dv)[DT][4], float (&dk)[DT][4],
                                                   const uint32_t (&pa)[4],
                                                   const uint32_t (&da)[4], uint32_t do_lane,
                                                   uint32_t q_lane, int c, uint32_t row_off)
{
#pragma unroll
    for (int dq = 0; dq < DT / 2; dq++) {
        uint32_t ob[4], qb[4];
        ptx_ldmatrix_x4_trans(ob, bwd_swz_step(do_lane, c + 2 * dq) + row_off);
        ptx_ldmatrix_x4_trans(qb, bwd_swz_step(q_lane, c + 2 * dq) + row_off);
        ptx_mma_m16n8k16(T(), dv[2 * dq], pa, ob[0], ob[1]);
        ptx_mma_m16n8k16(T(), dv[2 * dq + 1], pa, ob[2], ob[3]);
        ptx_mma_m16n8k16(T(), dk[2 * dq], da, qb[0], qb[1]);
        ptx_mma_m16n8k16(T(), dk[2 * dq + 1], da, qb[2], qb[3]);
    }
}

/* ---- main kernel ---------------------------------------------------------------------------- */

/* Shape of the thread block:
 *   T      __nv_bfloat16 or __half (fp32 accumulation)
 *   D      the instance's head dim, a multiple of 32 (32, 64, 96, 128, 192, 256): q, k, dq, dk
 *          have a.D <= D columns, v, o, dout, dv a.Dv <= D (attn_bwd_args; bwd_load_tile
 *          zero-fills the rest, the stores skip them)
 *   BM     query rows per Q block (64 or 128: the dS^T tile's rows are whole swizzle groups)
 *   BN     keys per K/V block, 16 per warp
 *   SPLIT  thread blocks per K/V block over the output columns (D / SPLIT each)
 *   DET    deterministic dQ (a.deterministic; a template argument so that the fast kernel's
 *          registers are allocated without the turn-taking code)
 *   MODS   softcap or ALiBi (the same reason; a window needs only masks, so every kernel
 *          takes one)
 *   VARLEN packed ragged sequences (attn_bwd_args): the block of batch index b reads its
 *          sequence's rows and lengths from cu_q/cu_k; the lengths take the place of Sq, Sk
 *          everywhere (bounds, the bottom-right diagonal, the K blocks of the turn order).
 *          With VARLEN false every sequence term folds to the dense expression, so the dense
 *          kernels compile as they did before varlen existed. */
template <typename T, int D, int BM, int BN, int SPLIT, int QS, bool DET, bool MODS, bool VARLEN>
__global__ void __launch_bounds__(QS * BN / 16 * 32) attn_bwd_sm80_kernel(const attn_bwd_args a)
{
    constexpr int KW = BN / 16;            /* warps over the keys, 16 each                  */
    constexpr int NWARPS = QS * KW;
    constexpr int NTHREADS = NWARPS * 32;
    constexpr int DS = (D + 63) / 64 * 64; /* shared row length: whole swizzle groups       */
    constexpr int DO = D / SPLIT;          /* output columns of this block                  */
    constexpr int NT = BM / QS / 8;        /* 8-query column tiles of a warp's S^T, dP^T    */
    constexpr int DT = DO / QS / 8;        /* 8-wide column tiles of a warp's dK, dV        */
    constexpr int WM = BM / 16;            /* dQ: warps over the Q block's 16-row tiles ... */
    constexpr int WN = NWARPS / WM;        /* ... and over column groups                    */
    constexpr int QT = DO / WN / 8;        /* 8-wide column tiles of a warp's dQ            */
    constexpr int NPASS = QS == 2 ? 2 : 1; /* dQ passes over those tiles ...                */
    constexpr int QC = QT / NPASS;         /* ... of QC tiles each                          */
    static_assert(D % 32 == 0 && BM % 64 == 0 && BN % 16 == 0, "tile shapes");
    static_assert(NWARPS % WM == 0 && QC % 2 == 0 && DT % 2 == 0 && D % SPLIT == 0 &&
                      (QS == 1 || (QS == 2 && SPLIT == 1 && NT % 2 == 0)),
                  "warp layouts");
    constexpr uint32_t ROWB = DS * sizeof(T); /* bytes per K/V/Q/dO row, a multiple of 128 */
    constexpr uint32_t ROWS = BM * sizeof(T); /* bytes per dS^T row                          */
    constexpr uint32_t QBUF = BM * DS * sizeof(T);

    extern __shared__ __align__(128) uint4 smem_u4[];
    T *sK = (T *)smem_u4;
    T *sV = sK + BN * DS;
    T *sQ = sV + BN * DS;  /* [2][BM][DS] */
    T *sdO = sQ + 2 * BM * DS; /* [2][BM][DS] */
    T *sdS = sdO + 2 * BM * DS; /* [BN][BM]  */
    T *sP = sdS + BN * BM; /* [BN][BM], QS == 2 only: P^T */
    float *sL = (float *)(sP + (QS == 2 ? BN * BM : 0)); /* [2][BM]: LSE log2 e, +inf where P
                                                           must be 0 */
    float *sDs = sL + 2 * BM;             /* [2][BM]: D                                 */

    const int tid = (int)threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;
    /* QS == 2: warp w takes the keys [16 kw, +16) with queries [BM / 2 qw, +BM / 2) of S^T,
     * dP^T, and columns [DO / 2 qw, +DO / 2) of dK, dV over all BM queries */
    const int kw = QS == 1 ? warp : warp % KW, qw = QS == 1 ? 0 : warp / KW;
    /* varlen: this block's sequence, packed row offsets q0, k0 (0 when dense: the batch
     * stride does it) and lengths Sq, Sk (the problem's when dense). The dense statements
     * keep their order of before varlen (same code). */
    bwd_seq seq = {0, 0, 0, 0};
    if constexpr (VARLEN)
        seq = bwd_seq_of(a, (int)blockIdx.y / a.Hkv);
    const int q0 = VARLEN ? seq.q0 : 0, k0 = VARLEN ? seq.k0 : 0;
    /* The lengths. Dense: a.Sq, a.Sk read where used, as before varlen (a local copy made
     * at the top changes the dense kernels' register allocation). */
    const auto Sq = [&]() -> int {
        if constexpr (VARLEN)
            return seq.sq;
        else
            return a.Sq;
    };
    const auto Sk = [&]() -> int {
        if constexpr (VARLEN)
            return seq.sk;
        else
            return a.Sk;
    };
    const bwd_range rg = [&] {
        if constexpr (VARLEN)
            return bwd_range_of(a, seq.sq, seq.sk);
        else
            return bwd_range_of(a);
    }();
    /* K block: in deterministic causal mode the launch order is reversed (top of the file).
     * Read again where needed (ptx_block_index) rather than held through the loop. */
    int n_block, bh;
    bwd_block_of(a, rg, DET, &n_block, &bh);
    const int split = (int)blockIdx.z;
    const int b = bh / a.Hkv, hk = bh % a.Hkv;
    const int n0 = n_block * BN;
    if constexpr (VARLEN)
        if (n0 >= seq.sk) /* the grid covers the longest sequence; no key of this one here */
            return;
    const int n_mb = (a.Sq + BM - 1) / BM; /* the turn counters' index: the maximum's blocks */
    /* The Q blocks with a row that sees a key of this block (under the causal mask, from the
     * one of the first row that sees key n0 to the end) */
    int m_begin, m_end;
    if constexpr (VARLEN)
        bwd_q_blocks(seq.sq, rg, n0, BN, BM, &m_begin, &m_end);
    else
        bwd_q_blocks(a, rg, n0, BN, BM, &m_begin, &m_end);
    const int per_head = max(0, m_end - m_begin);
    const int total = a.group * per_head;
    const int c0 = split * DO / 8; /* first output chunk (even: DO is a multiple of 16) */
    const int ckv = c0 + qw * DT;  /* this warp's first dK, dV chunk */

    const T *kg = (const T *)a.k + b * a.sk[0] + hk * a.sk[2] + (int64_t)(k0 + n0) * a.sk[1];
    const T *vg = (const T *)a.v + b * a.sv[0] + hk * a.sv[2] + (int64_t)(k0 + n0) * a.sv[1];
    /* dq_acc / dsum row of (head h, row 0 of the sequence): (B, Hq, Sq) or (Hq, total_q) */
    auto acc_row0 = [&](int hh) -> int64_t {
        if constexpr (VARLEN)
            return (int64_t)hh * a.total_q + q0;
        else
            return ((int64_t)b * a.Hq + hh) * a.Sq;
    };

    /* Q, dO, L', D of (head h, Q block m) into buffer buf. */
    auto load_q = [&](int buf, int h, int m) {
        const int m0 = m * BM;
        const T *qg =
            (const T *)a.q + b * a.sq[0] + h * a.sq[2] + (int64_t)(q0 + m0) * a.sq[1];
        const T *dog =
            (const T *)a.dout + b * a.sdo[0] + h * a.sdo[2] + (int64_t)(q0 + m0) * a.sdo[1];
        bwd_load_tile<T, D, DS, BM, NTHREADS>(sQ + buf * BM * DS, qg, a.sq[1], Sq() - m0, a.D);
        bwd_load_tile<T, D, DS, BM, NTHREADS>(sdO + buf * BM * DS, dog, a.sdo[1], Sq() - m0,
                                              a.Dv);
        for (int r = tid; r < BM; r += NTHREADS) {
            float l = INFINITY, dsum = 0.0f;
            if (m0 + r < Sq()) {
                const float lse =
                    a.lse[b * a.slse[0] + h * a.slse[1] + (int64_t)(q0 + m0 + r) * a.slse[2]];
                /* -inf: the row saw no key; NaN never reaches P either way */
                if (lse > -INFINITY)
                    l = lse * 1.4426950408889634f;
                dsum = a.dsum[acc_row0(h) + m0 + r];
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

    const uint32_t sK_a = ptx_smem_addr(sK), sV_a = ptx_smem_addr(sV);
    const uint32_t sQ_a = ptx_smem_addr(sQ), sdO_a = ptx_smem_addr(sdO);
    const uint32_t sdS_a = ptx_smem_addr(sdS);
    /* this warp's 16 keys as A operands (S^T = K Q^T, dP^T = V dO^T) */
    const uint32_t k_lane = lane_a(sK_a, ROWB, lane) + kw * 16 * ROWB;
    const uint32_t v_lane = lane_a(sV_a, ROWB, lane) + kw * 16 * ROWB;
    /* Q and dO rows as B operands of S^T, dP^T (offset by the buffer) */
    const uint32_t q_lane_b = lane_b(sQ_a, ROWB, lane) + qw * (BM / QS) * ROWB;
    const uint32_t do_lane_b = lane_b(sdO_a, ROWB, lane) + qw * (BM / QS) * ROWB;
    /* Q and dO as [k = query][n = feature] B operands of dK, dV (.trans) */
    const uint32_t q_lane_t = lane_a(sQ_a, ROWB, lane);
    const uint32_t do_lane_t = lane_a(sdO_a, ROWB, lane);
    /* dQ = dS K: dS^T [key][query] as the A operand (.trans), K [key][feature] as B (.trans) */
    const int mt = warp % WM, cg = warp / WM;
    const uint32_t ds_lane_t = lane_b(sdS_a, ROWS, lane);
    const uint32_t kq_lane_t = lane_a(sK_a, ROWB, lane);
    /* QS == 2: P^T, dS^T [key][query] as A operands of dV, dK (this warp's 16 keys) */
    const uint32_t p_lane = lane_a(ptx_smem_addr(sP), ROWS, lane) + kw * 16 * ROWS;
    const uint32_t dsa_lane = lane_a(sdS_a, ROWS, lane) + kw * 16 * ROWS;

    if (total > 0) {
        bwd_load_tile<T, D, DS, BN, NTHREADS>(sK, kg, a.sk[1], Sk() - n0, a.D);
        bwd_load_tile<T, D, DS, BN, NTHREADS>(sV, vg, a.sv[1], Sk() - n0, a.Dv);
        load_q(0, hk * a.group, m_begin);
        ptx_cp_async_commit();
    }

    int h = hk * a.group, m = m_begin;
    for (int it = 0; it < total; it++) {
        const int buf = it & 1;
        const int m0 = m * BM;
        ptx_cp_async_wait<0>();
        __syncthreads(); /* Q/dO of this block landed; every warp is done with the other buffer
                            and with dS^T of the previous block */
        int h_next = h, m_next = m + 1;
        if (m_next == m_end)
            h_next = h + 1, m_next = m_begin;
        if (it + 1 < total) {
            load_q(buf ^ 1, h_next, m_next);
            ptx_cp_async_commit();
        }

        /* S^T and dP^T for this warp's 16 keys x BM / QS queries */
        float s[NT][4], dp[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                s[nt][e] = dp[nt][e] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < D / 16; ks++) {
            uint32_t ka[4], va[4];
            ptx_ldmatrix_x4(ka, bwd_swz_step(k_lane, 2 * ks));
            ptx_ldmatrix_x4(va, bwd_swz_step(v_lane, 2 * ks));
#pragma unroll
            for (int np = 0; np < NT / 2; np++) {
                uint32_t qb[4], ob[4];
                ptx_ldmatrix_x4(qb, bwd_swz_step(q_lane_b + buf * QBUF, 2 * ks) + np * 16 * ROWB);
                ptx_ldmatrix_x4(ob, bwd_swz_step(do_lane_b + buf * QBUF, 2 * ks) + np * 16 * ROWB);
                ptx_mma_m16n8k16(T(), s[2 * np], ka, qb[0], qb[1]);
                ptx_mma_m16n8k16(T(), s[2 * np + 1], ka, qb[2], qb[3]);
                ptx_mma_m16n8k16(T(), dp[2 * np], va, ob[0], ob[1]);
                ptx_mma_m16n8k16(T(), dp[2 * np + 1], va, ob[2], ob[3]);
            }
        }

        /* P^T = 2^(S^T s' - L'), dS^T = P^T (dP^T - D) (under MODS: bwd_mod_elem); masked
         * entries P = 0 */
        const int key0 = n0 + kw * 16 + g; /* this thread's keys: key0, key0 + 8 */
        const bool need_mask = [&] {
            if constexpr (VARLEN)
                return bwd_tile_needs_mask(seq.sk, rg, m0, BM, n0, BN);
            else
                return bwd_tile_needs_mask(a, rg, m0, BM, n0, BN);
        }();
        const float slope = MODS ? bwd_slope(a, b, h) : 0.0f;
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int qi = qw * (BM / QS) + nt * 8 + 2 * t + (e & 1); /* in the block */
                const int key = key0 + (e >= 2 ? 8 : 0);
                const float l = sL[buf * BM + qi];
                float p, ds;
                if constexpr (MODS) {
                    bwd_mod_elem(a, slope, s[nt][e], dp[nt][e], l, sDs[buf * BM + qi],
                                 key - (m0 + qi) - rg.diag, &p, &ds);
                } else {
                    p = ptx_exp2(fmaf(s[nt][e], a.scale_log2, -l));
                    ds = p * (dp[nt][e] - sDs[buf * BM + qi]);
                }
                if (need_mask && (key >= Sk() || bwd_outside(rg, key - (m0 + qi))))
                    p = ds = 0.0f;
                s[nt][e] = p;
                dp[nt][e] = ds;
            }

        if constexpr (QS == 1) {
            /* dV += P^T dO, dK += dS^T Q over this block's queries in steps of 16 */
#pragma unroll
            for (int kk = 0; kk < BM / 16; kk++) {
                uint32_t pa[4], da[4];
                ptx_pack_a<T>(pa, s[2 * kk], s[2 * kk + 1]);
                ptx_pack_a<T>(da, dp[2 * kk], dp[2 * kk + 1]);
                bwd_kv_step<T, DT>(dv, dk, pa, da, do_lane_t + buf * QBUF, q_lane_t + buf * QBUF,
                                   c0, kk * 16 * ROWB);
            }

            /* dS^T to shared memory: rows = keys, columns = queries, swizzled like the tiles */
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int hr = 0; hr < 2; hr++) {
                    const int r = warp * 16 + g + 8 * hr;
                    *(uint32_t *)(sdS + bwd_swz<BM>(r, nt) + 2 * t) =
                        ptx_pack2(T(), dp[nt][2 * hr], dp[nt][2 * hr + 1]);
                }
        } else {
            /* P^T and dS^T to shared memory (this warp's 16 keys x BM / 2 queries of each) */
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int hr = 0; hr < 2; hr++) {
                    const int r = kw * 16 + g + 8 * hr, c = qw * NT + nt;
                    *(uint32_t *)(sP + bwd_swz<BM>(r, c) + 2 * t) =
                        ptx_pack2(T(), s[nt][2 * hr], s[nt][2 * hr + 1]);
                    *(uint32_t *)(sdS + bwd_swz<BM>(r, c) + 2 * t) =
                        ptx_pack2(T(), dp[nt][2 * hr], dp[nt][2 * hr + 1]);
                }
        }
        __syncthreads(); /* dS^T (and P^T) complete */
        if constexpr (QS == 2) {
            /* dV += P^T dO, dK += dS^T Q: this warp's 16 keys over all BM queries (A fragments
             * of P^T, dS^T [key][query] from shared memory), its DO / 2 columns */
#pragma unroll
            for (int kk = 0; kk < BM / 16; kk++) {
                uint32_t pa[4], da[4];
                ptx_ldmatrix_x4(pa, bwd_swz_step(p_lane, 2 * kk));
                ptx_ldmatrix_x4(da, bwd_swz_step(dsa_lane, 2 * kk));
                bwd_kv_step<T, DT>(dv, dk, pa, da, do_lane_t + buf * QBUF, q_lane_t + buf * QBUF,
                                   ckv, kk * 16 * ROWB);
            }
        }

        /* dQ tile (16 queries x DO / WN columns per warp) = dS K over the block's keys, in
         * NPASS passes of QC column tiles (sm80p: two, so that the accumulator fits beside
         * dK, dV; one pass a statement order of its own) */
#pragma unroll
        for (int pass = 0; pass < NPASS; pass++) {
            float acc[QC][4];
#pragma unroll
            for (int qt = 0; qt < QC; qt++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    acc[qt][e] = 0.0f;
            /* this warp's first feature chunk in this pass */
            const int qc0 = c0 + cg * (DO / WN) / 8 + pass * QC;
#pragma unroll
            for (int kk = 0; kk < BN / 16; kk++) {
                uint32_t sa[4];
                ptx_ldmatrix_x4_trans(sa, bwd_swz_step(ds_lane_t, 2 * mt) + kk * 16 * ROWS);
#pragma unroll
                for (int j = 0; j < QC / 2; j++) {
                    uint32_t kb[4];
                    ptx_ldmatrix_x4_trans(kb,
                                          bwd_swz_step(kq_lane_t, qc0 + 2 * j) + kk * 16 * ROWB);
                    ptx_mma_m16n8k16(T(), acc[2 * j], sa, kb[0], kb[1]);
                    ptx_mma_m16n8k16(T(), acc[2 * j + 1], sa, kb[2], kb[3]);
                }
            }

            float *dqa = a.dq_acc + (acc_row0(h) + m0) * D + qc0 * 8 + 2 * t;
            const int r0 = mt * 16 + g; /* this thread's rows r0, r0 + 8 of the Q block */
            if constexpr (!DET) {
#pragma unroll
                for (int hr = 0; hr < 2; hr++)
                    if (m0 + r0 + 8 * hr < Sq()) {
                        float *row = dqa + (int64_t)(r0 + 8 * hr) * D;
#pragma unroll
                        for (int qt = 0; qt < QC; qt++) {
#if __CUDA_ARCH__ >= 900
                            atomicAdd((float2 *)(row + qt * 8),
                                      make_float2(acc[qt][2 * hr], acc[qt][2 * hr + 1]));
#else
                            atomicAdd(row + qt * 8, acc[qt][2 * hr]);
                            atomicAdd(row + qt * 8 + 1, acc[qt][2 * hr + 1]);
#endif
                        }
                    }
            } else {
                int *sem = a.sem + (((int64_t)b * a.Hq + h) * n_mb + m) * SPLIT + split;
                if (pass == 0) {
                    /* turn: ascending K blocks, or under an upper bound (causal) descending
                     * from the last K block a row of Q block m sees (bwd_turn) */
                    const int nb =
                        rg.has_hi ? (int)gridDim.x - 1 - ptx_block_index() : ptx_block_index();
                    const int n_kb = VARLEN ? (Sk() + BN - 1) / BN : (int)gridDim.x;
                    const int turn = bwd_turn(rg, nb, n_kb, m, BM, BN);
                    if (tid == 0)
                        while (ptx_ld_acquire_gpu(sem) != turn) {
                        }
                    __syncthreads(); /* our turn: the K blocks before us in the order added
                                        theirs */
                }
#pragma unroll
                for (int hr = 0; hr < 2; hr++)
                    if (m0 + r0 + 8 * hr < Sq()) {
                        float *row = dqa + (int64_t)(r0 + 8 * hr) * D;
#pragma unroll
                        for (int qt = 0; qt < QC; qt++) {
                            float2 *p = (float2 *)(row + qt * 8);
                            float2 v = __ldcg(p);
                            v.x += acc[qt][2 * hr];
                            v.y += acc[qt][2 * hr + 1];
                            __stcg(p, v);
                        }
                    }
                if (pass == NPASS - 1) {
                    __syncthreads(); /* every thread's adds are ordered before the release */
                    if (tid == 0) {
                        bwd_release_turn(a, sem);
                    }
                }
            }
        }
        h = h_next, m = m_next;
    }

    /* dK = scale dS^T Q and dV, rows past Sk and columns past a.D / a.Dv not stored; all zero
     * if no query sees the keys */
    T *dkg = (T *)a.dk + b * a.sdk[0] + hk * a.sdk[2] + (int64_t)(k0 + n0) * a.sdk[1];
    T *dvg = (T *)a.dv + b * a.sdv[0] + hk * a.sdv[2] + (int64_t)(k0 + n0) * a.sdv[1];
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        const int r = kw * 16 + g + 8 * hr;
        if (n0 + r < Sk()) {
            T *krow = dkg + (int64_t)r * a.sdk[1];
            T *vrow = dvg + (int64_t)r * a.sdv[1];
#pragma unroll
            for (int dt = 0; dt < DT; dt++) {
                const int col = ckv * 8 + dt * 8 + 2 * t;
                bwd_store_pair(krow, col, a.D, dk[dt][2 * hr] * a.scale,
                               dk[dt][2 * hr + 1] * a.scale);
                bwd_store_pair(vrow, col, a.Dv, dv[dt][2 * hr], dv[dt][2 * hr + 1]);
            }
        }
    }
}

template <typename T, int D, int BM, int BN, int SPLIT, int QS> static constexpr int bwd_smem_bytes()
{
    constexpr int DS = (D + 63) / 64 * 64;
    return (2 * BN * DS + 4 * BM * DS + QS * BN * BM) * (int)sizeof(T) +
           4 * BM * (int)sizeof(float);
}

/* The main kernel of an instance for a's modifiers and mode. */
template <typename T, int D, int BM, int BN, int SPLIT, int QS, bool VARLEN>
static void (*bwd80_kernel_of(const attn_bwd_args *a))(const attn_bwd_args)
{
    const bool mods = a->softcap > 0.0f || a->alibi;
    return mods ? (a->deterministic
                       ? attn_bwd_sm80_kernel<T, D, BM, BN, SPLIT, QS, true, true, VARLEN>
                       : attn_bwd_sm80_kernel<T, D, BM, BN, SPLIT, QS, false, true, VARLEN>)
                : (a->deterministic
                       ? attn_bwd_sm80_kernel<T, D, BM, BN, SPLIT, QS, true, false, VARLEN>
                       : attn_bwd_sm80_kernel<T, D, BM, BN, SPLIT, QS, false, false, VARLEN>);
}

template <typename T, int D, int BM, int BN, int SPLIT, int QS>
static cudaError_t attn_bwd_sm80_launch(const attn_bwd_args *a, cudaStream_t stream)
{
    const int64_t rows = (int64_t)a->B * a->Hq * a->Sq;
    cudaError_t err = attn_bwd_pre_launch<T, D, BM, SPLIT>(a, stream);
    if (err != cudaSuccess)
        return err;

    constexpr int smem = bwd_smem_bytes<T, D, BM, BN, SPLIT, QS>();
    void (*kernel)(const attn_bwd_args) = bwd80_kernel_of<T, D, BM, BN, SPLIT, QS, false>(a);
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (err != cudaSuccess)
        return err;
    /* K blocks fastest: in deterministic mode a block waits only on earlier blocks of its row */
    const dim3 grid((unsigned)((a->Sk + BN - 1) / BN), (unsigned)(a->B * a->Hkv), SPLIT);
    kernel<<<grid, QS * BN / 16 * 32, smem, stream>>>(*a);
    if ((err = cudaGetLastError()) != cudaSuccess)
        return err;

    const int64_t pairs = rows * (D / 2);
    const int64_t blocks = (pairs + 255) / 256;
    attn_bwd_post_kernel<T, D>
        <<<(unsigned)(blocks < 65536 * 4 ? blocks : 65536 * 4), 256, 0, stream>>>(*a);
    return cudaGetLastError();
}

/* Varlen: the preprocess and postprocess over the packed rows (attn_bwd_common.cuh), the key
 * rows of no sequence cleared, the turn counters zeroed by a memset (deterministic mode), and
 * the main kernel with a block per (K block of the longest sequence, batch, KV head, slice):
 * a block past its own sequence's keys returns at once. Grids of zero blocks (no packed rows,
 * max_seqlen_k = 0) are skipped, not launched. */
template <typename T, int D, int BM, int BN, int SPLIT, int QS>
static cudaError_t attn_bwd_sm80_launch_varlen(const attn_bwd_args *a, cudaStream_t stream)
{
    cudaError_t err = cudaSuccess;
    const int64_t rows = (int64_t)a->Hq * a->total_q;
    if (rows > 0) {
        attn_bwd_pre_varlen_kernel<T, D><<<(unsigned)((rows + 3) / 4), 128, 0, stream>>>(*a);
        if ((err = cudaGetLastError()) != cudaSuccess)
            return err;
    }
    const int64_t kpairs = (int64_t)a->total_k * a->Hkv * (D / 2);
    if (kpairs > 0) {
        const int64_t blocks = (kpairs + 255) / 256;
        attn_bwd_clear_keys_varlen_kernel<T, D>
            <<<(unsigned)(blocks < 65536 ? blocks : 65536), 256, 0, stream>>>(*a);
        if ((err = cudaGetLastError()) != cudaSuccess)
            return err;
    }
    const int n_kb = (a->Sk + BN - 1) / BN;
    if (rows > 0 && n_kb > 0 && a->B * a->Hkv > 0) {
        if (a->deterministic) {
            const int64_t n_mb = (a->Sq + BM - 1) / BM;
            const size_t bytes = (size_t)a->B * a->Hq * n_mb * SPLIT * sizeof(int);
            if (bytes && (err = cudaMemsetAsync(a->sem, 0, bytes, stream)) != cudaSuccess)
                return err;
        }
        constexpr int smem = bwd_smem_bytes<T, D, BM, BN, SPLIT, QS>();
        void (*kernel)(const attn_bwd_args) = bwd80_kernel_of<T, D, BM, BN, SPLIT, QS, true>(a);
        err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (err != cudaSuccess)
            return err;
        const dim3 grid((unsigned)n_kb, (unsigned)(a->B * a->Hkv), SPLIT);
        kernel<<<grid, QS * BN / 16 * 32, smem, stream>>>(*a);
        if ((err = cudaGetLastError()) != cudaSuccess)
            return err;
    }
    if (rows > 0) {
        const int64_t pairs = rows * (D / 2);
        const int64_t blocks = (pairs + 255) / 256;
        attn_bwd_post_varlen_kernel<T, D>
            <<<(unsigned)(blocks < 65536 * 4 ? blocks : 65536 * 4), 256, 0, stream>>>(*a);
        err = cudaGetLastError();
    }
    return err;
}

/* Tiles: 64 query rows per Q block (S^T and dP^T take 2 x 32 floats a thread); 128 keys per K/V
 * block in 8 warps up to D = 128 (dK and dV: 2 x D / 2 floats a thread); at D = 192 and 256 two
 * column slices of 96 / 128 with 64 keys in 4 warps (shared memory: K, V and two buffers of Q
 * and dO; 153 KB at 192). Each instance takes every head dim above the previous one, padded
 * (bwd_load_tile), and Dk != Dv by max(D, Dv). sm80p (the default there; first in the table so
 * that it wins among equals, the split instances serving where its shared memory does not fit,
 * or FLASHC_CUDA_BWD_KERNEL=sm80): 64 x 64 in 8 warps at D = 192
 * and 256 (S^T, dP^T 2 x 16 floats a thread, dK, dV 2 x D / 4; shared memory: sm80's and a
 * [64][64] P^T, 161 / 209 KB: the A100's 163 KB holds only the d 192 one). */

/* The defaults first, then other tiles for the ladder (params.block_q / block_k pick them):
 * 64 x 64 in 4 warps (104 KB of shared memory at D = 128: two blocks per SM, but twice the
 * dQ atomics per FLOP), 128 x 128 at D = 64 (S^T, dP^T 2 x 64 floats a thread). */
/* A row of the table: name (attn_bwd_<dtype>_sm80_d<D>_<BM>x<BN>[_s<SPLIT>]), shared memory
 * and launcher of one instance, spelled once (as attn_fwd_sm80.cu's SM80_VARIANT); BWD80_VARLEN
 * adds the varlen launcher of the same instance, BWD80_VARIANT leaves it NULL (dense only). */
#define BWD80_FIELDS(FAM, TN, T, D, BM, BN, SPLIT, QS)                                            \
    "attn_bwd_" #TN "_" #FAM "_d" #D "_" #BM "x" #BN BWD80_SPLIT_##SPLIT, #FAM, TN##_DTYPE, D, 80, \
        0, BM, BN, SPLIT, bwd_smem_bytes<T, D, BM, BN, SPLIT, QS>(),                               \
        attn_bwd_sm80_launch<T, D, BM, BN, SPLIT, QS>
#define BWD80_VARIANT(TN, T, DLO, D, BM, BN, SPLIT)                                                \
    {BWD80_FIELDS(sm80, TN, T, D, BM, BN, SPLIT, 1), NULL, 0, DLO, 1}
#define BWD80_VARLEN(TN, T, DLO, D, BM, BN, SPLIT)                                                 \
    {BWD80_FIELDS(sm80, TN, T, D, BM, BN, SPLIT, 1),                                               \
     attn_bwd_sm80_launch_varlen<T, D, BM, BN, SPLIT, 1>, 0, DLO, 1}
/* sm80p: QS = 2 warps per 16 keys, one thread block per K/V block */
#define BWD80P_VARLEN(TN, T, DLO, D)                                                               \
    {BWD80_FIELDS(sm80p, TN, T, D, 64, 64, 1, 2), attn_bwd_sm80_launch_varlen<T, D, 64, 64, 1, 2>, \
     0, DLO, 1}
#define BWD80_SPLIT_1 ""
#define BWD80_SPLIT_2 "_s2"
#define bf16_DTYPE FLASHC_BF16
#define f16_DTYPE FLASHC_F16
const attn_bwd_variant attn_bwd_sm80_variants[] = {
    BWD80_VARLEN(bf16, __nv_bfloat16, 1, 32, 64, 128, 1),
    BWD80_VARLEN(bf16, __nv_bfloat16, 33, 64, 64, 128, 1),
    BWD80_VARLEN(bf16, __nv_bfloat16, 65, 96, 64, 128, 1),
    BWD80_VARLEN(bf16, __nv_bfloat16, 97, 128, 64, 128, 1),
    BWD80P_VARLEN(bf16, __nv_bfloat16, 129, 192),
    BWD80P_VARLEN(bf16, __nv_bfloat16, 193, 256),
    BWD80_VARLEN(bf16, __nv_bfloat16, 129, 192, 64, 64, 2),
    BWD80_VARLEN(bf16, __nv_bfloat16, 193, 256, 64, 64, 2),
    BWD80_VARLEN(f16, __half, 1, 32, 64, 128, 1),
    BWD80_VARLEN(f16, __half, 33, 64, 64, 128, 1),
    BWD80_VARLEN(f16, __half, 65, 96, 64, 128, 1),
    BWD80_VARLEN(f16, __half, 97, 128, 64, 128, 1),
    BWD80P_VARLEN(f16, __half, 129, 192),
    BWD80P_VARLEN(f16, __half, 193, 256),
    BWD80_VARLEN(f16, __half, 129, 192, 64, 64, 2),
    BWD80_VARLEN(f16, __half, 193, 256, 64, 64, 2),
    BWD80_VARIANT(bf16, __nv_bfloat16, 97, 128, 64, 64, 1),
    BWD80_VARIANT(f16, __half, 97, 128, 64, 64, 1),
    BWD80_VARIANT(bf16, __nv_bfloat16, 33, 64, 128, 128, 1),
    BWD80_VARIANT(f16, __half, 33, 64, 128, 128, 1),
};
const int attn_bwd_sm80_variant_count =
    (int)(sizeof attn_bwd_sm80_variants / sizeof attn_bwd_sm80_variants[0]);
