/*
 * attn_bwd_sm90v3.cu — the Hopper backward in the FlashAttention-3 shape: families sm90v3,
 * sm90v3t, sm90v3q (d = 128), sm90v3w and sm90v3wg (d = 128 and 64; wg: sm90v3w's deterministic
 * mode with its blocks in groups of heads, bwd90v3_grouped) and sm90v3u (d 128 and 64:
 * sm90v3wg with an unmasked softmax loop for tiles without masked keys; helper bwd13,
 * 2026-12-04) and sm90v3e (d 128 and 64: sm90v3u with dV issued before the consumers'
 * meeting; helper bwd15), sm90v3u the default at both on compute capability 9.0 since the
 * device round of 2026-12-04 midday (sm90v3wg's before, sm90v3w's before that: d 64 since the
 * device run of 2026-12-03, helper bwd6: dQ by keys, below), the others opt-in through
 * FLASHC_CUDA_BWD_KERNEL; bwd15's sm90v3e2, sm90v3s and sm90v3es were measured (H200,
 * 2026-12-04 afternoon: 0.78-1.01x sm90v3u) and removed (helper bwd17);
 * racecheck's hazards of 2026-12-02: see the table.
 * sm90v3u's padded entries (helper bwd16; the default since the afternoon run of 2026-12-04)
 * serve the head dims D == Dv, multiples of 8, in 40-56 and 72-120 on its d 64 and d 128
 * kernels (V3_PAD, the kernel's comment).
 *
 * Why: the 21:36 profile of sm90 at d 128 4k (/work/wt/PROFILE.md): 255 registers, 256 threads,
 * the tensor pipe 34% busy; cuDNN: 132 x 384 threads, warp-specialised, 66%. In sm90 (and
 * sm90v2) every thread both loads (cp.async) and computes, and the two warpgroups meet at two
 * block barriers per Q block, one of which waits for the next tile's copies. Here:
 *
 *  - a producer warpgroup (setmaxnreg 24; one warp works) loads K and V once per block and
 *    Q, dO of each Q block by TMA (tensor maps, 128-byte swizzle, rows past Sq zero-filled) and
 *    LSE, D by plain loads and stores into a 2-stage ring; stage s completes on mbarrier
 *    full[s] (the TMA bytes plus an arrival of each producer lane after its stores) and is
 *    handed back on empty[s] (an arrival of every consumer thread once its wgmmas on the stage
 *    completed and its reads of LSE, D, info are done);
 *  - two consumer warpgroups (setmaxnreg 240) own 64 keys each of the BN = 128 K/V block with
 *    dK, dV (m64n128 each) in registers, and run sm90v2's products (attn_bwd_sm90v2.cu):
 *    S^T = K Q^T, dP^T = V dO^T, P^T and dS^T in registers as the A operands of dV += P^T dO and
 *    dK += dS^T Q, dS stored transposed (stmatrix) for dQ = dS K. Their one meeting per Q block
 *    is a 256-thread named barrier before dQ (whose feature halves need both warpgroups' dS);
 *    dS is double-buffered so that no second barrier guards its reuse;
 *  - dQ leaves as in sm90v2: each warp stages its 16 rows of the warpgroup's 64 x 64 dQ tile in
 *    shared memory and 16 lanes issue one bulk reduce-add (cp.reduce.async.bulk .add.f32) of a
 *    row each into the fp32 accumulator; deterministic mode orders those adds per warp by the
 *    turn counters (8 per K block: one per consumer warp), as sm90v2.
 *
 * Shared memory: K, V 32 KB each, Q, dO 2 x 16 KB each, dS 2 x 16 KB, dQ staging 34 KB (one
 * buffer: a warp waits for its previous iteration's bulk reads, long done, before restaging),
 * LSE, D, barriers: 196 KB, one block per SM. Dense only (varlen stays on sm80, as for sm90);
 * every dense modifier of sm90 (causal, window, softcap, ALiBi, GQA, Sq != Sk) is served the
 * same way. Tensor maps that fail to encode (an old driver): the sm90 kernel runs instead
 * (padded dims: sm80's, bwd90v3_fallback).
 */
#include "attn_bwd_common.cuh"
#include "attn_cuda.cuh"
#include "bwd_trace.cuh"
#include "ptx.cuh"
#include "ptx_sm90.cuh"
#include "tma_host.cuh"

#include <cuda.h> /* CUtensorMap and the driver's types only: the library never links libcuda */
#include <math.h>
#include <string.h>
#include <type_traits>

namespace {

constexpr int V3_BM = 64, V3_BN = 128, V3_THREADS = 384;
/* The kernel's and the launch's options, one bit each (the kernel's comment says what each
 * does), rather than a row of positional bools that a table entry would have to count:
 * attn_bwd_sm90v3_launch<T, D, V3_W | V3_GRP> reads as the family it is. The launch takes the
 * family's bits (TDQ, DQF, WRT, GRP, UM) and adds DET, MODS per call. A profiler's kernel name
 * shows F as a number (e.g. 125 = V3_W | V3_GRP | V3_UM | V3_DET: sm90v3u's det at d 128). */
enum : unsigned {
    V3_DET = 1u << 0,  /* deterministic dQ                                        */
    V3_MODS = 1u << 1, /* softcap or ALiBi                                        */
    V3_TDQ = 1u << 2,  /* sm90v3t: dQ by tensor reduce-adds, one per warpgroup    */
    V3_DQF = 1u << 3,  /* sm90v3q: dV, dK issued after dQ                         */
    V3_WRT = 1u << 4,  /* sm90v3w: dQ adds on writer warps                        */
    V3_GRP = 1u << 5,  /* sm90v3wg: deterministic blocks in groups of heads       */
    V3_UM = 1u << 6,   /* sm90v3u: the unmasked softmax loop                      */
    V3_DVE = 1u << 7,  /* sm90v3e: dV issued right after P, before dP's wait      */
    /* bits 8, 9: sm90v3e2's and sm90v3s's, measured and removed (bench/RESULTS.md) */
    V3_PAD = 1u << 10, /* head dim a.D <= D (padded entries): dK, dV cut at a.D   */
    V3_DQP = 1u << 11, /* sm90v3d: deterministic dQ adds pipelined, 3 staging bufs */
    V3_TRACE = 1u << 12, /* FLASHC_CUDA_BWD_TRACE's twins (below)                  */
    V3_NODQ = 1u << 13, /* no dQ path: sm90hs's dK / dV half, FLASHC_CUDA_BWD_NO_DQ  */
    V3_SPLIT = 1u << 14, /* sm90hs (the launch): V3_NODQ, then attn_bwd_dq_sm90.cu   */
    V3_W = V3_TDQ | V3_DQF | V3_WRT, /* sm90v3w's bits (WRT needs TDQ and DQF)    */
};
/* dQ staging rows: 64 floats + 16 bytes (the bank spread of sm90v2's V2_DQ_ROW) */
constexpr int V3_DQ_ROW = 272;
/* setmaxnreg's split: (168 - P) x 128 producer threads = (C - 168) x 256 consumer threads.
 * d 128: P 24, C 240 (its consumers' 4-15 spilled words are loop invariants, 2-3 reloads a Q
 * block; P 40, C 232 spills more, ptxas 2026-12-03). d 64: P 56, C 224; at P 24 the producer
 * warpgroup (writers) spilled 4 bytes, 40 in deterministic mode; at P 40 or 56 nothing does. */
template <int D> struct bwd90v3_regs {
    static constexpr int PRODUCER = D == 64 ? 56 : 24;
    static constexpr int CONSUMER = 168 + (168 - PRODUCER) / 2;
    static_assert((168 - PRODUCER) * 128 == (CONSUMER - 168) * 256 && CONSUMER % 8 == 0,
                  "setmaxnreg: the registers given cover the registers taken");
};

/* Byte offsets from a 1024-byte aligned base; a tile of R rows x D columns is D / 64 panels of
 * R rows x 128 bytes (ptx_sm90.cuh's swizzle, which TMA writes). */
template <int D, bool WRT = false, int NB = 2> struct bwd90v3_smem {
    static constexpr int KV_BYTES = V3_BN * D * 2;
    static constexpr int QBUF = V3_BM * D * 2;            /* one stage of Q (or dO)       */
    static constexpr int DS_BUF = V3_BM * V3_BN * 2;      /* one dS [2 panels][BM][128 B] */
    static constexpr int K = 0;
    static constexpr int V = K + KV_BYTES;
    static constexpr int Q = V + KV_BYTES;                /* [2][D / 64][BM][128 B]       */
    static constexpr int DO = Q + 2 * QBUF;
    static constexpr int DS = DO + 2 * QBUF;              /* [2][DS_BUF]                  */
    /* dQ staging, float: sm90v3 [2 wg][BM][272 B] rows; sm90v3t [2 wg][2 halves][BM][128 B],
     * 128-byte swizzled (the fp32 tensor map's boxes of 32 columns), 32 KB of the 34 */
    static constexpr int DQ = DS + 2 * DS_BUF;
    static constexpr int DQ_BUF = 2 * 2 * V3_BM * 128;   /* sm90v3w: NB of those, DQ_BUF apart */
    static constexpr int LSE = DQ + (WRT ? NB * DQ_BUF : 2 * V3_BM * V3_DQ_ROW); /* float [2][BM] */
    static constexpr int DSUM = LSE + 2 * V3_BM * 4;      /* float [2][BM], D             */
    static constexpr int INFO = DSUM + 2 * V3_BM * 4;     /* int [2][4]: the stage's Q block */
    static constexpr int BARS = INFO + 2 * 16;            /* kv_full, full[2], empty[2]   */
    /* sm90v3d (NB 3): then dq_full[2 wg][NB], the staging buffers' mbarriers */
    static constexpr int TOTAL = BARS + (NB > 2 ? 5 + 2 * NB : 5) * 8;
    static constexpr int LAUNCH = TOTAL + 1024;           /* room to align the base       */
};
static_assert(bwd90v3_smem<128>::LAUNCH <= 227 * 1024 &&
                  bwd90v3_smem<128, true>::LAUNCH <= 227 * 1024 &&
                  bwd90v3_smem<64, true>::LAUNCH <= 227 * 1024 &&
                  bwd90v3_smem<64, true, 3>::LAUNCH <= 227 * 1024,
              "one block per SM fits");
/* The staging buffers of the writer warps: 3 in sm90v3d's kernels (deterministic mode at d 64,
 * where a fourth would not fit: 230 KB), 2 elsewhere. */
__host__ __device__ constexpr int bwd90v3_nb(int D, unsigned F)
{
    return (F & V3_DQP) && D == 64 ? 3 : 2;
}

/* V3_TRACE's record (bwd_trace.cuh: layout version 2; bench/gpu/bwd_trace.py reads it): per
 * thread block (linear index y * gridDim.x + x) V3_TR_HDR words as attn_bwd_sm90h.cu's (0 / 1
 * %globaltimer / %clock64 as the consumers start, 2 / 3 as they end after dK, dV are stored, 4
 * %smid, 5 the K block, 6 batch x KV head, 7 the steps), then V3_TR_IT words a Q-block step it:
 * consumer warpgroup w's %clock64 at 3 w + 0 its Q / dO data arrived, + 1 it wanted a dQ staging
 * buffer, + 2 it had one (the writer had handed it back); writer w's at 6 + 3 w + 0 it saw the
 * buffer full, + 1 its turn acquired (deterministic mode), + 2 its adds issued; 12 the Q block's
 * first row | head << 32. Lane 0 of a consumer warpgroup's first warp and of each writer warp
 * write their words. The writer-warp kernels of sm90v3u and sm90v3d at d 64 only (0 spills, as
 * the untraced ones). */
constexpr int V3_TR_HDR = 8, V3_TR_IT = 14;

} // namespace

/* V3_TRACE's buffer and its steps per block (the host sets both before a traced launch) */
static __device__ uint64_t *bwd90v3_trace_buf;
static __device__ int bwd90v3_trace_maxit;
#if FLASHC_PTX_SM90A
/* V3_TRACE: this thread block's record (bwd_trace_row), and %clock64 into word k of step it */
static __device__ __forceinline__ uint64_t *bwd90v3_trace_row(void)
{
    return bwd_trace_row<V3_TR_HDR, V3_TR_IT>(bwd90v3_trace_buf, bwd90v3_trace_maxit);
}
static __device__ __forceinline__ void bwd90v3_trace_at(int it, int k)
{
    bwd_trace_put<V3_TR_HDR, V3_TR_IT>(bwd90v3_trace_buf, bwd90v3_trace_maxit, it, k,
                                       ptx_clock64());
}
#endif

#if FLASHC_PTX_SM90A

/* dV += P^T dO or dK += dS^T Q: A (P^T or dS^T, 64 keys x V3_BM queries) from registers, B (dO
 * or Q, the stage's buffer) MN-major: queries are the reduction index, 16 per step (two 8-row
 * groups per step, SBO; the feature panels, LBO) */
template <typename T, int DT>
static __device__ __forceinline__ void bwd90v3_kv_mma(float (&acc)[DT][4],
                                                      const uint32_t (&a)[V3_BM / 16][4],
                                                      uint32_t b_buf)
{
#pragma unroll
    for (int kk = 0; kk < V3_BM / 16; kk++)
        ptx_wgmma_rs_tb<T>(acc, a[kk], ptx_wgmma_desc(b_buf + kk * 16 * 128, V3_BM * 128, 1024));
}

/* The deterministic turn counter of Q block m of head h, batch b (a.sem's index) */
static __device__ __forceinline__ int bwd90v3_turn_counter(const attn_bwd_args &a, int b, int h,
                                                            int m)
{
    return (int)(((int64_t)b * a.Hq + h) * ((a.Sq + V3_BM - 1) / V3_BM) + m);
}

/* sm90v3wg (helper bwd9, 2026-12-04), deterministic mode without an upper key bound: which
 * (K block n, batch x head bh) this thread block runs, from its linear index in the grid
 * (N K blocks, BH), in groups of G heads: group by group, n by n, head by head, rather than
 * sm90v3w's head by head, n by n.
 *
 * Why: sm90v3w's deterministic dQ adds of Q block m go in the order n = 0, 1, ..., N - 1
 * (the turn counter per (b, h, m)); the blocks of one head are neighbours in the linear order,
 * so the hardware starts them together and they all reach Q block 0 at once: block n's writer
 * then waits for n links of the chain (at d 64 two per block: the two warpgroups add into the
 * same rows, each an acquire, a 16 KB reduce-add to completion and a release), its consumers
 * stall two Q blocks later, and the block ends about n links after block 0: the H200's round
 * of 2026-12-04 measured det / fast 0.71-0.73 at d 64 non-causal 1k-4k, where every wave
 * starts whole heads together again, against 0.90 at 16k (one head, 128 blocks, fills the
 * GPU; the next head's blocks start in the order the previous head's end, already staggered)
 * and 0.92-0.99 at d 128 (the same chain, but two Q-block products as long per link).
 *
 * Here block n of a head starts G places in the linear order after block n - 1 of that head:
 * once the GPU is full, about G x (steps x T) / SMs later (steps Q blocks of time T each), so
 * G = ceil(4 SMs / steps) puts block n - 1 about four Q blocks ahead and the turn waits end;
 * G heads at a time keep the L2 working set near sm90v3w's (G Q/dO/dQ streams).
 *
 * The result: the turn rule is untouched (same counters, same turn of (n, m): bwd_turn), so
 * dQ(m) is still the sum over n = 0, 1, ... in that order: bit-identical to sm90v3w's
 * deterministic mode (tested), and, as there, independent of the grid and of the order in
 * which the hardware runs the blocks. Forward progress needs, as sm90v3w's, only that a
 * block's predecessor n - 1 was started no later than itself: its linear index is lower by
 * gc. Not taken: a rotated walk (block n visiting Q blocks n, n + 1, ... mod M, each starting
 * without a wait) can keep no fixed order that a block can always wait for: with the order
 * n = 0, 1, ... block n meets block n - 1 one step behind it on every Q block (block n lags
 * n steps, worse than now); with the order of visit (turn (min(m, N - 1) - n) mod N) its
 * predecessors include blocks of higher linear index, which may not be resident: a
 * deadlock once a head's blocks outnumber the SMs free.
 * REV (sm90v3d, helper bwd21: with an upper key bound, causal or a right window): the K blocks
 * of a head in reverse, n = N - 1, N - 2, ..., as bwd_turn orders them there (block n after
 * block n + 1): block n + 1 then starts gc places before block n, the same argument mirrored.
 * sm90v3w runs those problems head by head, where the blocks of a head start together: at
 * d 64 causal 8k / 16k the default's deterministic mode measured 0.72x its fast mode, its worst
 * cells (bwd19's table). */
static __device__ __forceinline__ void bwd90v3_grouped(const attn_bwd_args &a, int *n_block,
                                                       int *bh, bool rev = false)
{
    /* the order itself: attn_bwd_common.cuh */
    bwd_grouped_order(a, V3_BM, rev, n_block, bh);
}

/* sm90v3d (helper bwd21, 2026-12-05): writer warp wgc's loop in deterministic mode at d 64
 * (both warpgroups' dQ by keys into the same rows: warpgroup 1's add of Q block m after
 * warpgroup 0's, both after the previous K block's; the counters and turns of sm90v3w).
 *
 * Why: sm90v3w's writer does per Q block, in series: wait for the staging buffer, spin for the
 * turn, reduce-add 16 KB, wait for the adds to complete (cp.async.bulk.wait_group 0: the
 * L2's read-modify-writes acknowledged), fence, release the count, and only then hand the
 * buffer back. At d 64 a Q block's products take ~1.7 us on an H200 SM (fast mode, 404
 * TFLOP/s), about what that round trip costs; deterministic mode runs ~2.3 us a Q block
 * whatever the consumers do (the unmasked softmax, two planes for the warpgroups' adds:
 * 0.95-1.08x, RESULTS.md), so the writer's series is the pace. Here:
 *  - the buffer is handed back once the copy engine has read it (wait_group.read), not after
 *    the adds completed and the count was released: the consumers never wait for L2;
 *  - the count of tile i is released after tile i + 1's adds are issued (wait_group 1: all
 *    but the newest group complete), so two tiles' adds are in flight and the completion
 *    round trip overlaps the next tile's turn and issue;
 *  - three staging buffers a warpgroup instead of two (the shared memory d 64 has left).
 * The drain rule keeps it free of deadlock and of convoys: before any wait that can last
 * (the next buffer's full barrier, the next turn), the writer asks once without blocking
 * (mbarrier.test_wait, one ld.acquire), and if the answer is no it first completes and
 * releases what it holds. So it blocks holding nothing, and the waits among writers stay
 * sm90v3w's: on lower (K block, warpgroup) pairs only, the same forward-progress argument.
 * A held count is released at most one tile issue late, and only while this writer is busy.
 *
 * The adds into each row happen in the same order (same counters, same turns): dq is
 * sm90v3w's deterministic result bit for bit (test_pipelined_bits).
 * dq_base: the staging buffers (NB, dq_buf bytes apart; warpgroup w's tile at w * 2 BM * 128).
 * full_mb(w, sb), empty_id(w, sb): the buffers' mbarriers and named barriers (160 threads). */
template <int NB, bool TR, typename FullMb, typename EmptyId>
static __device__ __forceinline__ void
bwd90v3_pipelined_writer(const attn_bwd_args &a, const bwd_range &rg, const CUtensorMap *tm_dq,
                         uint32_t dq_base, int dq_buf, int wgc, int b, int hk, int n_block,
                         int m_begin, int m_end, int total, FullMb full_mb, EmptyId empty_id)
{
    const int lane = (int)threadIdx.x % 32;
    for (int sb = 0; sb < NB && sb < total; sb++)
        ptx_named_bar_arrive(empty_id(wgc, sb), 160);
    int *held = nullptr; /* lane 0: the count whose release waits for our newest adds */
    auto drain = [&]() {
        if (held) {
            ptx_bulk_wait_group<0>();       /* our adds performed ... */
            ptx_fence_proxy_async_global(); /* ... and ordered before the release */
            bwd_release_turn(a, held);
            held = nullptr;
        }
    };
    int h = hk * a.group, m = m_begin;
    for (int it = 0; it < total; it++) {
        const int sb = it % NB;
        if (lane == 0) {
            const uint32_t full = full_mb(wgc, sb), parity = ((uint32_t)(it / NB)) & 1u;
            if (!ptx_mbarrier_test_wait(full, parity)) {
                drain();
                ptx_mbarrier_wait(full, parity);
            }
            if constexpr (TR)
                bwd90v3_trace_at(it, 6 + 3 * wgc);
            int *sem = a.sem + bwd90v3_turn_counter(a, b, h, m);
            const int want = 2 * bwd_turn(rg, n_block, (int)gridDim.x, m, V3_BM, V3_BN) + wgc;
            if (ptx_ld_acquire_gpu(sem) < want) {
                drain();
                while (ptx_ld_acquire_gpu(sem) < want) {
                }
            }
            if constexpr (TR)
                bwd90v3_trace_at(it, 7 + 3 * wgc);
            ptx_fence_proxy_async_global(); /* the acquire before our adds */
            const uint32_t st = dq_base + sb * dq_buf + wgc * 2 * V3_BM * 128;
            for (int hf = 0; hf < 2; hf++)
                ptx_tma_reduce_add_4d(tm_dq, st + hf * V3_BM * 128, 32 * hf, m * V3_BM, h, b);
            ptx_bulk_commit_group();
            if constexpr (TR)
                bwd90v3_trace_at(it, 8 + 3 * wgc);
            if (held) { /* the previous tile's adds (all groups but this one) completed */
                ptx_bulk_wait_group<1>();
                ptx_fence_proxy_async_global();
                bwd_release_turn(a, held);
            }
            held = sem;
            ptx_bulk_wait_group_read<0>(); /* this buffer read: the consumers may restage it */
        }
        __syncwarp();
        if (it + NB < total)
            ptx_named_bar_arrive(empty_id(wgc, sb), 160);
        if (++m == m_end)
            h++, m = m_begin;
    }
    if (lane == 0)
        drain();
}
#endif

/* T: __nv_bfloat16 or __half; D: 128 (64: sm90v3w only); F: V3_* bits. DET: deterministic dQ;
 * MODS: softcap or ALiBi.
 * TDQ (family sm90v3t): each warpgroup's 64 x 64 dQ tile leaves as two tensor reduce-adds
 * (boxes of 32 float columns x 64 rows, tm_dq over dq_acc (D, Sq, Hq, B)) issued by one thread
 * after a warpgroup barrier, instead of 16 row reductions per warp; deterministic mode then
 * takes turns per warpgroup (2 counts per K block), not per warp.
 * DQF (family sm90v3q, with TDQ): dV += P^T dO and dK += dS^T Q issued after dQ = dS K, so
 * that dQ's epilogue (staging, adds, deterministic mode's turn wait) runs while they are on
 * the tensor cores; sm90v3t issues them before the barrier, to fill its wait instead.
 * Tensor maps (D, S, H, B) of q, dout (boxes 64 x BM) and k, v (64 x BN). Grid: (K/V blocks of
 * BN keys, B Hkv); under DET with an upper key bound the K blocks run in reverse (bwd_turn).
 * GRP (family sm90v3wg, with DET): without an upper key bound the blocks take their (K block,
 * head) in groups of heads (bwd90v3_grouped), the same dQ order and bits.
 * DQP (family sm90v3d, with DET, WRT, GRP at d 64): the writer warps pipeline their dQ adds
 * (bwd90v3_pipelined_writer, 3 staging buffers), and the grouping serves an upper key bound
 * too, its K blocks reversed; the same dQ order and bits.
 * UM (family sm90v3u, with WRT, without MODS): tiles without masked keys take a softmax loop
 * without the mask's test.
 * PAD (sm90v3u's padded entries, helper bwd16): the problem's head dim a.D == a.Dv, a multiple
 * of 8, may be below D; the tensor maps are a.D wide, so the copy engine fills columns
 * a.D..D - 1 of Q, K, V, dO with zeros, which add nothing to S, dP and leave zero columns in
 * dK, dV, dQ: dK, dV stores stop at a.D's 8-column tile (the postprocess cuts dQ); the main
 * loop is the same code. */
template <typename T, int D, unsigned F>
__global__ void __launch_bounds__(V3_THREADS, 1)
    attn_bwd_sm90v3_kernel(const __grid_constant__ CUtensorMap tm_q,
                           const __grid_constant__ CUtensorMap tm_do,
                           const __grid_constant__ CUtensorMap tm_k,
                           const __grid_constant__ CUtensorMap tm_v,
                           const __grid_constant__ CUtensorMap tm_dq, const attn_bwd_args a)
{
#if FLASHC_PTX_SM90A
    constexpr bool DET = F & V3_DET, MODS = F & V3_MODS, TDQ = F & V3_TDQ, DQF = F & V3_DQF,
                   WRT = F & V3_WRT, GRP = F & V3_GRP, UM = F & V3_UM, DVE = F & V3_DVE,
                   PAD = F & V3_PAD, DQP = F & V3_DQP, TRACE = F & V3_TRACE,
                   NODQ = F & V3_NODQ;
    constexpr int NB = bwd90v3_nb(D, F); /* the writer warps' staging buffers */
    using L = bwd90v3_smem<D, WRT, NB>;
    static_assert(!WRT || (TDQ && DQF), "sm90v3w: sm90v3q with the dQ adds on writer warps");
    static_assert(!DQP || (DET && WRT && D == 64),
                  "sm90v3d: sm90v3w's deterministic mode at d 64 with pipelined dQ adds");
    static_assert(!UM || (WRT && !MODS),
                  "sm90v3u: sm90v3w's kernel with an unmasked softmax loop");
    static_assert(!DVE || (UM && WRT && !MODS), "sm90v3e: sm90v3u's kernel, dV issued early");
    static_assert(!TRACE || (WRT && !MODS && !PAD), "V3_TRACE: the writer-warp kernels");
    static_assert(!NODQ || (WRT && !DET && !DVE && !TRACE),
                  "V3_NODQ: the writer-warp kernels' fast mode (dK, dV need no order)");
    /* sm90v3e's dV: at d 64 right after P^T, before dP's wait (it then runs under dS's
     * elementwise step too); at d 128 after dS^T's pack, where P^T's 16 registers held by the
     * wgmma in flight across that step cost ptxas 112 bytes of spills (88 more than sm90v3u's
     * 24; 32 at this place) */
    constexpr bool DV_FIRST = DVE && D == 64;
    /* sm90v3w's named barriers (1: the consumers' per-Q-block meeting at d 128; 2, 3: sm90v3t's
     * warpgroup barriers, and d 64's): staging buffer sb of warpgroup w full (consumers
     * arrive, its writer waits) and empty (the other way), 128 + 32 threads each */
    auto dq_full_id = [](int w, int sb) { return 4 + 2 * w + sb; };
    auto dq_empty_id = [](int w, int sb) { return 8 + NB * w + sb; }; /* (NB 3: ids 8-13) */
    constexpr int BM = V3_BM, BN = V3_BN;
    constexpr int NT = BM / 8; /* 8-query column tiles of S^T, dP^T */
    constexpr int DT = D / 8;  /* 8-wide column tiles of dK, dV     */
    static_assert(D == 128 || (D == 64 && WRT),
                  "dK, dV as m64nD accumulators; d 128: dQ in two 64-column halves, d 64: dQ "
                  "by keys (sm90v3w only)");
    /* d 128: warpgroup w's dQ tile is features [64 w, +64) over the 128 keys (both dS
     * panels: the consumers' meeting); d 64: all 64 features over its own 64 keys (its own
     * panel: a barrier of its 128 threads), and both warpgroups add into the same dQ rows,
     * deterministic mode ordering them (warpgroup 1 waits for warpgroup 0's count), as
     * sm90v2 at d 64 */
    constexpr bool DQ_BY_KEYS = D == 64;

    extern __shared__ uint8_t smem_raw[];
    const uint32_t raw = ptx_smem_addr(smem_raw);
    const uint32_t base = (raw + 1023u) & ~1023u;
    uint8_t *sbase = smem_raw + (base - raw);
    const uint32_t sK = base + L::K, sV = base + L::V, sQ = base + L::Q, sdO = base + L::DO;
    const uint32_t kv_full = base + L::BARS;
    auto full = [&](int s) { return base + L::BARS + 8u * (1 + s); };
    auto empty = [&](int s) { return base + L::BARS + 8u * (3 + s); };
    /* sm90v3d: staging buffer sb of warpgroup w full, an mbarrier (128 consumer arrivals), so
     * that its writer can ask without blocking (the drain rule at the writer's loop) */
    auto dq_full_mb = [&](int w, int sb) { return base + L::BARS + 8u * (5 + NB * w + sb); };

    const int tid = (int)threadIdx.x, warp = tid / 32, lane = tid % 32;
    const bwd_range rg = bwd_range_of(a);
    int n_block, bh;
    if constexpr (DET && GRP) {
        /* (has_hi without DQP: not launched so, attn_bwd_sm90v3_launch; kept correct all the
         * same; sm90v3d groups those problems too, its K blocks reversed) */
        if (rg.has_hi && !DQP)
            n_block = (int)gridDim.x - 1 - ptx_block_index(), bh = (int)blockIdx.y;
        else
            bwd90v3_grouped(a, &n_block, &bh, DQP && rg.has_hi);
    } else {
        bwd_block_of(a, rg, DET, &n_block, &bh);
    }
    const int b = bh / a.Hkv, hk = bh % a.Hkv;
    const int n0 = n_block * BN;
    int m_begin, m_end;
    bwd_q_blocks(a, rg, n0, BN, BM, &m_begin, &m_end);
    const int per_head = max(0, m_end - m_begin);
    const int total = a.group * per_head;

    if (tid == 0) {
        ptx_mbarrier_init(kv_full, 1);
        for (int s = 0; s < 2; s++) {
            ptx_mbarrier_init(full(s), 1 + 32); /* the expect_tx arrival + every producer lane's */
            ptx_mbarrier_init(empty(s), 256);   /* every consumer thread */
        }
        if constexpr (DQP)
            for (int i = 0; i < 2 * NB; i++)
                ptx_mbarrier_init(dq_full_mb(i / NB, i % NB), 128);
        ptx_fence_mbarrier_init();
    }
    __syncthreads(); /* the only block-wide barrier: the roles part here */

    if (warp < 4) {
        /* ---- producer ---- */
        ptx_setmaxnreg_dec<bwd90v3_regs<D>::PRODUCER>();
        if constexpr (WRT) {
            if (warp == 1 || warp == 2) {
                /* sm90v3w: warp 1 + w adds consumer warpgroup w's dQ tiles, so that neither
                 * the copy engine's reads nor deterministic mode's turn wait the consumers */
                if constexpr (NODQ)
                    return; /* nothing to add */
                const int wgc = warp - 1;
                if constexpr (DQP) {
                    bwd90v3_pipelined_writer<NB, TRACE>(a, rg, &tm_dq, base + L::DQ, L::DQ_BUF,
                                                        wgc, b, hk, n_block, m_begin, m_end,
                                                        total, dq_full_mb, dq_empty_id);
                    return;
                }
                if (total > 0)
                    ptx_named_bar_arrive(dq_empty_id(wgc, 0), 160);
                if (total > 1)
                    ptx_named_bar_arrive(dq_empty_id(wgc, 1), 160);
                /* the Q blocks in the producer's order (h, m), followed here rather than
                 * handed over in shared memory: a handoff less */
                int h = hk * a.group, m = m_begin;
                for (int it = 0; it < total; it++) {
                    const int sb = it & 1;
                    ptx_named_bar_sync(dq_full_id(wgc, sb), 160);
                    if (lane == 0) {
                        if constexpr (TRACE)
                            bwd90v3_trace_at(it, 6 + 3 * wgc);
                        const uint32_t st = base + L::DQ + sb * L::DQ_BUF + wgc * 2 * BM * 128;
                        int *sem = a.sem + bwd90v3_turn_counter(a, b, h, m);
                        if constexpr (DET) {
                            /* each writer (2 per block) releases one count; by keys,
                             * warpgroup 1's writer after warpgroup 0's (the same dQ rows) */
                            const int turn = bwd_turn(rg, n_block, (int)gridDim.x, m, BM, BN);
                            while (ptx_ld_acquire_gpu(sem) < 2 * turn + (DQ_BY_KEYS ? wgc : 0)) {
                            }
                            ptx_fence_proxy_async_global(); /* the acquire before our adds */
                            if constexpr (TRACE)
                                bwd90v3_trace_at(it, 7 + 3 * wgc);
                        }
                        for (int hf = 0; hf < 2; hf++)
                            ptx_tma_reduce_add_4d(&tm_dq, st + hf * BM * 128,
                                                  (DQ_BY_KEYS ? 0 : 64 * wgc) + 32 * hf, m * BM,
                                                  h, b);
                        ptx_bulk_commit_group();
                        if constexpr (TRACE)
                            bwd90v3_trace_at(it, 8 + 3 * wgc);
                        if constexpr (DET) {
                            ptx_bulk_wait_group<0>();       /* our adds performed ... */
                            ptx_fence_proxy_async_global(); /* ... and ordered before the release */
                            bwd_release_turn(a, sem);
                        } else {
                            ptx_bulk_wait_group_read<0>(); /* the buffer read */
                        }
                    }
                    __syncwarp();
                    if (it + 2 < total) /* the consumers' next use of this buffer */
                        ptx_named_bar_arrive(dq_empty_id(wgc, sb), 160);
                    if (++m == m_end)
                        h++, m = m_begin;
                }
                if (lane == 0)
                    ptx_bulk_wait_group<0>();
                return;
            }
        }
        if (warp != 0 || total == 0)
            return;
        if (lane == 0) {
            ptx_prefetch_tensormap(&tm_q);
            ptx_prefetch_tensormap(&tm_do);
            ptx_mbarrier_arrive_expect_tx(kv_full, 2 * L::KV_BYTES);
            for (int p = 0; p < D / 64; p++) {
                ptx_tma_load_4d(sK + p * BN * 128, &tm_k, kv_full, 64 * p, n0, hk, b);
                ptx_tma_load_4d(sV + p * BN * 128, &tm_v, kv_full, 64 * p, n0, hk, b);
            }
        }
        int h = hk * a.group, m = m_begin;
        for (int it = 0; it < total; it++) {
            const int s = it & 1;
            const int m0 = m * BM;
            /* the stage's previous Q block is done (a fresh barrier passes parity 1 at once) */
            ptx_mbarrier_wait(empty(s), (((uint32_t)it >> 1) & 1u) ^ 1u);
            if (lane == 0) {
                /* what the consumers would otherwise keep in registers across their loop:
                 * the Q block's first row, head, turn counter and turn (deterministic mode) */
                int *info = (int *)(sbase + L::INFO) + 4 * s;
                info[0] = m0, info[1] = h;
                info[2] = bwd90v3_turn_counter(a, b, h, m);
                info[3] = DET ? bwd_turn(rg, n_block, (int)gridDim.x, m, BM, BN) : 0;
                ptx_mbarrier_arrive_expect_tx(full(s), 2 * L::QBUF);
                for (int p = 0; p < D / 64; p++) {
                    ptx_tma_load_4d(sQ + s * L::QBUF + p * BM * 128, &tm_q, full(s), 64 * p, m0,
                                    h, b);
                    ptx_tma_load_4d(sdO + s * L::QBUF + p * BM * 128, &tm_do, full(s), 64 * p,
                                    m0, h, b);
                }
            }
            /* LSE and D rows (rows past Sq: zeros; with Q, dO zero there they add nothing to
             * dK, dV, and their dQ rows are never added), loaded into registers and stored by
             * this lane, whose own arrival (release) then publishes them. Until 2026-12-03
             * they came by cp.async + cp.async.mbarrier.arrive.noinc: racecheck reported its 10
             * hazards of sm90v3q between those writes and the consumers' reads of LSE and D. */
            float lse_r[BM / 32], d_r[BM / 32];
#pragma unroll
            for (int i = 0; i < BM / 32; i++) {
                const int64_t row = m0 + lane + 32 * i;
                const bool valid = row < a.Sq;
                lse_r[i] = valid ? a.lse[b * a.slse[0] + h * a.slse[1] + row * a.slse[2]] : 0.0f;
                d_r[i] = valid ? a.dsum[((int64_t)b * a.Hq + h) * a.Sq + row] : 0.0f;
            }
            float *sl = (float *)(sbase + L::LSE) + s * BM;
            float *sd = (float *)(sbase + L::DSUM) + s * BM;
#pragma unroll
            for (int i = 0; i < BM / 32; i++)
                sl[lane + 32 * i] = lse_r[i], sd[lane + 32 * i] = d_r[i];
            ptx_mbarrier_arrive(full(s));
            if (++m == m_end)
                h++, m = m_begin;
        }
        return;
    }

    /* ---- consumers ---- */
    ptx_setmaxnreg_inc<bwd90v3_regs<D>::CONSUMER>();
    const int cw = warp - 4, wg = cw / 4, wq = cw % 4;
    const int g = lane / 4, t = lane % 4;
    const bool issuer = TDQ && wq == 0 && lane == 0; /* sm90v3t: its warpgroup's dQ adds */
    if constexpr (TRACE) {
        if (cw == 0 && lane == 0) {
            bwd_trace_head_start(bwd90v3_trace_row(), n_block, bh, total);
        }
    }
    const float *sL = (const float *)(sbase + L::LSE);
    const float *sDs = (const float *)(sbase + L::DSUM);

    float dk[DT][4], dv[DT][4];
#pragma unroll
    for (int dt = 0; dt < DT; dt++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            dk[dt][e] = dv[dt][e] = 0.0f;

    if (total > 0)
        ptx_mbarrier_wait(kv_full, 0);
    for (int it = 0; it < total; it++) {
        const int buf = it & 1;
        ptx_mbarrier_wait(full(buf), ((uint32_t)it >> 1) & 1u);
        const int *info = (const int *)(sbase + L::INFO) + 4 * buf;
        const int m0 = info[0], h = info[1];
        if constexpr (TRACE) {
            if (wq == 0 && lane == 0) {
                bwd90v3_trace_at(it, 3 * wg);
                if (wg == 0)
                    bwd_trace_put<V3_TR_HDR, V3_TR_IT>(bwd90v3_trace_buf, bwd90v3_trace_maxit, it,
                                                       12, (uint32_t)m0 | (uint64_t)h << 32);
            }
        }
        const uint32_t q_buf = sQ + buf * L::QBUF, do_buf = sdO + buf * L::QBUF;
        const uint32_t sdS = base + L::DS + buf * L::DS_BUF;
        const float *lrow = sL + buf * BM, *drow = sDs + buf * BM;

        /* S^T, dP^T: this warpgroup's 64 keys x the BM queries, k over the head dim */
        float s[NT][4], dp[NT][4];
        bwd_st_dpt_mma<T, D, BM, BN>(s, dp, sK, sV, q_buf, do_buf, wg);

        uint32_t pa[BM / 16][4], da[BM / 16][4]; /* A fragments of P^T, dS^T */
        const int key0 = n0 + cw * 16 + g; /* this thread's keys: key0, key0 + 8 */
        const bool need_mask = bwd_tile_needs_mask(a, rg, m0, BM, n0, BN);
        if constexpr (!MODS) {
            /* P^T = 2^(S^T s' - L') while dP^T is still on the tensor cores */
            ptx_wgmma_wait<1>();
            ptx_fence_operands(s);
            if (UM && !need_mask) {
                /* sm90v3u: a tile without masked keys takes a loop without the mask's test,
                 * which otherwise costs a predicated branch (BSSY, BSYNC) per element */
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        s[nt][e] = ptx_exp2(fmaf(s[nt][e], a.scale_log2,
                                                  -bwd_lse_log2(lrow[nt * 8 + 2 * t + (e & 1)])));
            } else {
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
            }
            if constexpr (DV_FIRST) {
                /* sm90v3e: dV += P^T dO needs neither dP nor the other warpgroup, so it goes
                 * to the tensor cores now and runs under dS's elementwise step and the
                 * stmatrix, where sm90v3u leaves them idle (at d 128 both warpgroups, in
                 * lockstep through their meeting); wait_group 1 then waits for dP only */
#pragma unroll
                for (int kk = 0; kk < BM / 16; kk++) {
                    pa[kk][0] = ptx_pack2(T(), s[2 * kk][0], s[2 * kk][1]);
                    pa[kk][1] = ptx_pack2(T(), s[2 * kk][2], s[2 * kk][3]);
                    pa[kk][2] = ptx_pack2(T(), s[2 * kk + 1][0], s[2 * kk + 1][1]);
                    pa[kk][3] = ptx_pack2(T(), s[2 * kk + 1][2], s[2 * kk + 1][3]);
                }
                ptx_fence_operands(dv);
                ptx_wgmma_fence();
                bwd90v3_kv_mma<T>(dv, pa, do_buf);
                ptx_wgmma_commit();
                ptx_wgmma_wait<1>();
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
            if constexpr (!DV_FIRST) { /* (sm90v3e at d 64 packed P^T already) */
                pa[kk][0] = ptx_pack2(T(), s[2 * kk][0], s[2 * kk][1]);
                pa[kk][1] = ptx_pack2(T(), s[2 * kk][2], s[2 * kk][3]);
                pa[kk][2] = ptx_pack2(T(), s[2 * kk + 1][0], s[2 * kk + 1][1]);
                pa[kk][3] = ptx_pack2(T(), s[2 * kk + 1][2], s[2 * kk + 1][3]);
            }
            da[kk][0] = ptx_pack2(T(), dp[2 * kk][0], dp[2 * kk][1]);
            da[kk][1] = ptx_pack2(T(), dp[2 * kk][2], dp[2 * kk][3]);
            da[kk][2] = ptx_pack2(T(), dp[2 * kk + 1][0], dp[2 * kk + 1][1]);
            da[kk][3] = ptx_pack2(T(), dp[2 * kk + 1][2], dp[2 * kk + 1][3]);
        }

        if constexpr (DVE && !DV_FIRST) {
            /* sm90v3e at d 128: dV under the stmatrix and the consumers' meeting */
            ptx_fence_operands(dv);
            ptx_wgmma_fence();
            bwd90v3_kv_mma<T>(dv, pa, do_buf);
            ptx_wgmma_commit();
        }

        /* dV += P^T dO, dK += dS^T Q: one committed group */
        auto issue_dv_dk = [&]() {
            ptx_fence_operands(dv);
            ptx_fence_operands(dk);
            ptx_wgmma_fence();
            bwd90v3_kv_mma<T>(dv, pa, do_buf);
            bwd90v3_kv_mma<T>(dk, da, q_buf);
            ptx_wgmma_commit();
        };
        if constexpr (NODQ) {
            /* sm90hs's dK / dV half (and FLASHC_CUDA_BWD_NO_DQ's diagnostic): dV, dK and nothing
             * of dQ: no dS store, no meeting of the warpgroups (each runs at its own pace over
             * its own keys), no staging, no adds */
            issue_dv_dk();
            ptx_wgmma_wait<0>();
            ptx_fence_operands(dv);
            ptx_fence_operands(dk);
            ptx_fence_operands(pa);
            ptx_fence_operands(da);
            ptx_mbarrier_arrive(empty(buf)); /* the stage's reads done (the loop's end) */
            continue;
        }
        /* dS [query][key] into panel wg of this stage's dS (attn_bwd_sm90.cu: fragment i of
         * da[kk] is keys 8 (i & 1) + g of the warp's 16, queries 8 (2 kk + (i >> 1)) + 2t;
         * stored transposed, row j is query 8 (2 kk + (i >> 1)) + j, chunk 2 wq + (i & 1)) */
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

        /* dV += P^T dO, dK += dS^T Q before the meeting (sm90v3, sm90v3t) */
        if constexpr (!DQF)
            issue_dv_dk();

        /* dQ tile: d 128, the BM queries x features [64 wg, +64) = dS K over the 128 keys, both
         * warpgroups' dS panels: the consumers' one meeting per Q block. dS is per stage, so
         * a warpgroup that runs ahead writes the other buffer (and can be at most one Q block
         * ahead: it waits here for the other's arrival). d 64: the BM queries x 64 features
         * over this warpgroup's keys, its own panel, which its own warps alone write. */
        if constexpr (TDQ && !DET && !WRT) {
            /* the staging tile is free for this Q block once the issuer's reads of the last
             * one are done; the barrier below tells the whole warpgroup */
            if (issuer)
                ptx_bulk_wait_group_read<0>();
        }
        if constexpr (DQ_BY_KEYS)
            ptx_named_bar_sync(2 + wg, 128); /* (ids 2, 3: sm90v3t's, never at d 64) */
        else
            ptx_named_bar_sync(1, 256);
        float acc[8][4];
        bwd_dq_mma<T, BM, BN, DQ_BY_KEYS>(acc, sdS, sK, wg);
        if constexpr (DQF) {
            /* dV, dK behind dQ: the dQ epilogue below runs while they are on the tensor
             * cores (in sm90v3t they ran before the barrier instead); sm90v3e's dV is in
             * flight already (its registers untouched here) */
            if constexpr (!DVE)
                ptx_fence_operands(dv);
            ptx_fence_operands(dk);
            if constexpr (!DVE)
                bwd90v3_kv_mma<T>(dv, pa, do_buf);
            bwd90v3_kv_mma<T>(dk, da, q_buf);
            ptx_wgmma_commit();
            ptx_wgmma_wait<1>(); /* dQ (and sm90v3e's dV, issued before it) */
            ptx_fence_operands(acc);
        } else {
            ptx_wgmma_wait<0>();
            ptx_fence_operands(acc);
            ptx_fence_operands(dv);
            ptx_fence_operands(dk);
            ptx_fence_operands(pa);
            ptx_fence_operands(da);
        }

        if constexpr (TDQ) {
            /* the warpgroup's tile into its two swizzled halves (columns 32 hf + c of row r:
             * 16-byte chunk c / 4 of row r of half hf stored at chunk (c / 4) ^ (r mod 8), the
             * tensor map's 128-byte swizzle; a warp's 32 float2 stores then fill 32 banks
             * twice, the minimum), then one thread adds both halves */
            const int sb = NB == 2 ? it & 1 : it % NB;
            if constexpr (TRACE) {
                if (wq == 0 && lane == 0)
                    bwd90v3_trace_at(it, 3 * wg + 1);
            }
            if constexpr (WRT) /* this buffer's adds of NB Q blocks ago have read it */
                ptx_named_bar_sync(dq_empty_id(wg, sb), 160);
            if constexpr (TRACE) {
                if (wq == 0 && lane == 0)
                    bwd90v3_trace_at(it, 3 * wg + 2);
            }
            const uint32_t stage_s = base + L::DQ + (WRT ? sb * L::DQ_BUF : 0) + wg * 2 * BM * 128;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const int hf = j / 4, c = 8 * (j % 4) + 2 * t;
#pragma unroll
                for (int hr = 0; hr < 2; hr++) {
                    const int r = wq * 16 + g + 8 * hr;
                    ptx_st_shared_v2_f32(stage_s + (uint32_t)(hf * BM * 128 + r * 128 +
                                                              (((c / 4) ^ g) * 16) + (c % 4) * 4),
                                         acc[j][2 * hr], acc[j][2 * hr + 1]);
                }
            }
            ptx_fence_proxy_async_shared(); /* the stores, for the copy engine's reads */
            if constexpr (WRT) {
                if constexpr (DQP) /* each thread after its own stores and fence */
                    ptx_mbarrier_arrive(dq_full_mb(wg, sb));
                else
                    ptx_named_bar_arrive(dq_full_id(wg, sb), 160); /* to the writer warp */
            } else {
            ptx_named_bar_sync(2 + wg, 128);
            if (issuer) {
                if constexpr (DET) {
                    int *sem = a.sem + info[2];
                    /* each warpgroup (2 per block) releases one count */
                    while (ptx_ld_acquire_gpu(sem) < 2 * info[3]) {
                    }
                    ptx_fence_proxy_async_global(); /* the acquire before our adds */
                }
                for (int hf = 0; hf < 2; hf++)
                    ptx_tma_reduce_add_4d(&tm_dq, stage_s + hf * BM * 128, 64 * wg + 32 * hf, m0,
                                          h, b);
                ptx_bulk_commit_group();
                if constexpr (DET) {
                    ptx_bulk_wait_group<0>();       /* our adds performed ... */
                    ptx_fence_proxy_async_global(); /* ... and ordered before the release */
                    bwd_release_turn(a, a.sem + info[2]);
                }
            }
            }
        } else {
            /* this warp's 16 rows (acc[j]: rows 16 wq + g (+8), columns 8 j + 2t, +1) into its
             * staging rows, then lane r < 16 adds row 16 wq + r; first, this warp's bulk reads of
             * the previous Q block are done (one Q block ago: long since, as a rule) */
            const uint32_t stage_s = base + L::DQ + wg * BM * V3_DQ_ROW;
            if (!DET && lane < 16)
                ptx_bulk_wait_group_read<0>();
            __syncwarp();
            {
                const uint32_t st0 = stage_s + (uint32_t)((wq * 16 + g) * V3_DQ_ROW + 8 * t);
    #pragma unroll
                for (int j = 0; j < 8; j++) {
                    ptx_st_shared_v2_f32(st0 + 32 * j, acc[j][0], acc[j][1]);
                    ptx_st_shared_v2_f32(st0 + 8 * V3_DQ_ROW + 32 * j, acc[j][2], acc[j][3]);
                }
            }
            ptx_fence_proxy_async_shared(); /* the stores, for the copy engine's reads */
            __syncwarp();
            const int row = wq * 16 + lane;
            const bool adds = lane < 16 && m0 + row < a.Sq;
            float *dqa = a.dq_acc + (((int64_t)b * a.Hq + h) * a.Sq + m0 + row) * D + wg * 64;
            if constexpr (!DET) {
                if (adds)
                    ptx_bulk_reduce_add_f32(dqa, stage_s + (uint32_t)row * V3_DQ_ROW, 256);
                if (lane < 16)
                    ptx_bulk_commit_group();
            } else {
                int *sem = a.sem + info[2];
                if (lane == 0) {
                    /* every consumer warp (8 per block) releases one count */
                    const int turn = info[3];
                    while (ptx_ld_acquire_gpu(sem) < 8 * turn) {
                    }
                }
                __syncwarp();
                if (lane < 16) {
                    ptx_fence_proxy_async_global(); /* the acquire before our bulk adds */
                    if (adds)
                        ptx_bulk_reduce_add_f32(dqa, stage_s + (uint32_t)row * V3_DQ_ROW, 256);
                    ptx_bulk_commit_group();
                    ptx_bulk_wait_group<0>();       /* our adds performed ... */
                    ptx_fence_proxy_async_global(); /* ... and ordered before the release */
                }
                __syncwarp();
                if (lane == 0) {
                    bwd_release_turn(a, sem);
                }
            }
        }

        if constexpr (DQF) {
            ptx_wgmma_wait<0>(); /* dV, dK */
            ptx_fence_operands(dv);
            ptx_fence_operands(dk);
            ptx_fence_operands(pa);
            ptx_fence_operands(da);
        }
        /* this thread is done with the stage: Q, dO (its wgmmas completed), LSE, D, info. Every
         * reading thread releases its own reads (count 256), as sm90v6's index handoff does,
         * rather than lane 0 after __syncwarp: that costs the sm90v3t/v3q instances 4-56 more
         * bytes of spills (ptxas), but racecheck need not follow the warp barrier. */
        ptx_mbarrier_arrive(empty(buf));
    }
    /* the block's shared memory outlives the copy engine's last reads */
    if (lane < 16)
        ptx_bulk_wait_group<0>();

    /* dK = scale dS^T Q and dV; rows past Sk not stored; all zero if no query sees the keys;
     * PAD: the (zero) columns past a.D not stored */
    T *dkg = (T *)a.dk + b * a.sdk[0] + hk * a.sdk[2] + (int64_t)n0 * a.sdk[1] + 2 * t;
    T *dvg = (T *)a.dv + b * a.sdv[0] + hk * a.sdv[2] + (int64_t)n0 * a.sdv[1] + 2 * t;
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        const int r = cw * 16 + g + 8 * hr;
        if (n0 + r < a.Sk) {
            T *krow = dkg + (int64_t)r * a.sdk[1];
            T *vrow = dvg + (int64_t)r * a.sdv[1];
#pragma unroll
            for (int dt = 0; dt < DT; dt++) {
                if (PAD && dt * 8 >= a.D) /* a.D == a.Dv, a multiple of 8 */
                    break;
                *(uint32_t *)(krow + dt * 8) =
                    ptx_pack2(T(), dk[dt][2 * hr] * a.scale, dk[dt][2 * hr + 1] * a.scale);
                *(uint32_t *)(vrow + dt * 8) = ptx_pack2(T(), dv[dt][2 * hr], dv[dt][2 * hr + 1]);
            }
        }
    }
    if constexpr (TRACE) {
        if (cw == 0 && lane == 0) {
            bwd_trace_head_end(bwd90v3_trace_row());
        }
    }
#endif
}

/* ---- host side: tensor maps (Q, dO, K, V: tma_host.cuh's cuda_tma_map_bshd, as the forward's;
 * dq_acc's below) */

/* dq_acc (B, Hq, Sq, D) float32, contiguous, as the 4-d map (D, Sq, Hq, B) with boxes of 32
 * columns x BM rows, 128-byte swizzled (sm90v3t's dQ adds); 0 if it does not encode. */
static int bwd90v3_map_dq(CUtensorMap *m, const attn_bwd_args *a, int D)
{
    cuda_tma_encode_fn enc = cuda_tma_encoder();
    if (!enc)
        return 0;
    const cuuint64_t dims[4] = {(cuuint64_t)D, (cuuint64_t)a->Sq, (cuuint64_t)a->Hq,
                                (cuuint64_t)a->B};
    const cuuint64_t row = (cuuint64_t)D * 4;
    const cuuint64_t strides[3] = {row, row * a->Sq, row * a->Sq * a->Hq};
    const cuuint32_t box[4] = {32, (cuuint32_t)V3_BM, 1, 1};
    const cuuint32_t estr[4] = {1, 1, 1, 1};
    for (int i = 0; i < 3; i++)
        if (strides[i] >= (1ull << 40))
            return 0;
    return enc(m, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, (void *)a->dq_acc, dims, strides, box, estr,
               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
               CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

/* Launches the cp.async kernel that serves a's dense problem when this family's tensor maps do
 * not encode (a stride the copy engine does not take, a broadcast head say, or no encoder):
 * at D == a.D == a.Dv the sm90 kernel (d 128) or sm90v2s (d 64), named by family, whichever
 * is the default; a padded problem (a.D < D) the sm80 default entry of its dims (each of those
 * exact Hopper kernels serves one head dim only), whose workspace fits in the one this family
 * sized: dq_acc rows of its head_dim <= D, turn counters of block_q 64, split 1 as V3_BM's. */
template <typename T, int D>
static cudaError_t bwd90v3_fallback(const attn_bwd_args *a, cudaStream_t stream)
{
    const flashc_dtype dt = std::is_same<T, __nv_bfloat16>::value ? FLASHC_BF16 : FLASHC_F16;
    if (a->D != D || a->Dv != D) {
        for (int i = 0; i < attn_bwd_sm80_variant_count; i++) {
            const attn_bwd_variant *v = &attn_bwd_sm80_variants[i];
            if (v->dtype == dt && !v->opt_in && v->head_dim_lo > 0 && v->head_dim_lo <= a->D &&
                a->D <= v->head_dim && v->head_dim <= D && v->block_q == V3_BM && v->split == 1)
                return v->launch(a, stream);
        }
        return cudaErrorInvalidValue;
    }
    const attn_bwd_variant *tab = D == 128 ? attn_bwd_sm90_variants : attn_bwd_sm90v2_variants;
    const int n = D == 128 ? attn_bwd_sm90_variant_count : attn_bwd_sm90v2_variant_count;
    for (int i = 0; i < n; i++)
        if (tab[i].dtype == dt && tab[i].head_dim == D &&
            strcmp(tab[i].family, D == 128 ? "sm90" : "sm90v2s") == 0)
            return tab[i].launch(a, stream);
    return cudaErrorInvalidValue;
}

/* F: the family's bits, V3_TDQ, V3_DQF, V3_WRT, V3_GRP, V3_UM, V3_PAD (DET, MODS come per
 * call). Without PAD the problem's head dims are D (an exact entry); with PAD a.D == a.Dv <= D
 * (a padded entry, serves_dims in attn_bwd.cu). */
template <typename T, int D, unsigned F>
static cudaError_t attn_bwd_sm90v3_launch(const attn_bwd_args *a, cudaStream_t stream)
{
    static_assert((F & (V3_DET | V3_MODS)) == 0, "DET, MODS: chosen per call");
    constexpr bool TDQ = F & V3_TDQ, WRT = F & V3_WRT, GRP = F & V3_GRP, UM = F & V3_UM,
                   PAD = F & V3_PAD, SPLIT = F & V3_SPLIT;
    static_assert(!SPLIT || (WRT && UM && !PAD && !(F & (V3_DVE | V3_DQP))),
                  "sm90hs: sm90v3u's exact kernels without dQ");
    const flashc_dtype dt = std::is_same<T, __nv_bfloat16>::value ? FLASHC_BF16 : FLASHC_F16;
    if (a->D != a->Dv || a->D > D || a->D % 8 != 0 || (!PAD && a->D != D))
        return cudaErrorInvalidValue; /* not dispatched so (serves_dims) */
    CUtensorMap mq, mdo, mk, mv, mdq;
    memset(&mdq, 0, sizeof mdq); /* read by sm90v3t only */
    /* dq_acc D wide; q, k, v, dout a.D (== a.Dv) wide: the copy engine pads to D */
    if ((TDQ && !bwd90v3_map_dq(&mdq, a, D)) ||
        !cuda_tma_map_bshd(&mq, dt, a->q, a->B, a->Sq, a->Hq, a->D, a->sq, V3_BM) ||
        !cuda_tma_map_bshd(&mdo, dt, a->dout, a->B, a->Sq, a->Hq, a->Dv, a->sdo, V3_BM) ||
        !cuda_tma_map_bshd(&mk, dt, a->k, a->B, a->Sk, a->Hkv, a->D, a->sk, V3_BN) ||
        !cuda_tma_map_bshd(&mv, dt, a->v, a->B, a->Sk, a->Hkv, a->Dv, a->sv, V3_BN))
        return bwd90v3_fallback<T, D>(a, stream);

    /* sm90hs needs D = rowsum(dO O) alone from the preprocess (no accumulator to zero, no
     * counters: planes 0) */
    attn_bwd_args pre = *a;
    if constexpr (SPLIT) {
        pre.planes = 0;
        if (!attn_bwd_dq_sm90_fits(a))
            return bwd90v3_fallback<T, D>(a, stream);
    }
    cudaError_t err = attn_bwd_pre_launch<T, D, V3_BM, 1>(&pre, stream);
    if (err != cudaSuccess)
        return err;

    /* (sm90v3d: 3 staging buffers in deterministic mode; its fast mode is sm90v3u's kernel) */
    const int smem = a->deterministic ? bwd90v3_smem<D, WRT, bwd90v3_nb(D, F)>::LAUNCH
                                      : bwd90v3_smem<D, WRT>::LAUNCH;
    const bool mods = a->softcap > 0.0f || a->alibi;
    /* sm90v3wg: the grouped order only without an upper key bound (causal or a right window:
     * sm90v3w's kernel, whose reversed K blocks its turns need); sm90v3d: always (reversed
     * there: bwd90v3_grouped's REV), so its "ungrouped" instances below are the grouped ones */
    const bool grp = GRP && (a->wr < 0 || (F & V3_DQP));
    /* UM in deterministic mode at d 128 only: at d 64 (s11_bwd13.sh, H200) sm90v3u's
     * deterministic mode was 0.95-1.08x sm90v3wg's, where its fast mode was 1.10-1.23x;
     * sm90v3e's at both (s12_bwd15.sh measured its d 64 deterministic mode) */
    /* sm90v3d's (DQP) too: with its writers no longer the pace, the consumers' time counts */
    constexpr bool UMD = UM && (D == 128 || (F & (V3_DVE | V3_DQP)));
    /* the kernel's bits: the family's without GRP, UM, DVE, DQP, which each instance adds back
     * (DVE: with UM only; DQP: deterministic mode only, whose writers it changes) */
    constexpr unsigned K = F & (V3_TDQ | V3_DQF | V3_WRT | V3_PAD), KE = F & V3_DVE,
                       KU = UM ? V3_UM | KE : 0u, KUD = (UMD ? V3_UM | KE : 0u) | (F & V3_DQP),
                       KG = GRP ? V3_GRP : 0u, KP = F & V3_DQP,
                       KNG = (F & V3_DQP) ? KG : 0u; /* the "ungrouped" det instances' GRP */
    void (*kernel)(const CUtensorMap, const CUtensorMap, const CUtensorMap, const CUtensorMap,
                   const CUtensorMap, const attn_bwd_args);
    if constexpr (SPLIT) {
        /* sm90hs: the V3_NODQ kernel in both modes (dK, dV need no order), then dQ's own */
        kernel = mods ? attn_bwd_sm90v3_kernel<T, D, K | V3_MODS | V3_NODQ>
                      : attn_bwd_sm90v3_kernel<T, D, K | KU | V3_NODQ>;
    } else {
        kernel =
            /* (UM: only the softmax without modifiers has the loop to unswitch) */
            mods ? (a->deterministic
                        ? (grp ? attn_bwd_sm90v3_kernel<T, D, K | V3_DET | V3_MODS | KG | KP>
                               : attn_bwd_sm90v3_kernel<T, D, K | V3_DET | V3_MODS | KP | KNG>)
                        : attn_bwd_sm90v3_kernel<T, D, K | V3_MODS>)
                 : (a->deterministic
                        ? (grp ? attn_bwd_sm90v3_kernel<T, D, K | V3_DET | KG | KUD>
                               : attn_bwd_sm90v3_kernel<T, D, K | V3_DET | KUD | KNG>)
                        : attn_bwd_sm90v3_kernel<T, D, K | KU>);
        /* FLASHC_CUDA_BWD_NO_DQ: the exact plain kernels' fast mode without dQ (V3_NODQ) */
        if constexpr (UM && !PAD && !(F & V3_DVE)) {
            if (a->no_dq && !mods && !a->deterministic)
                kernel = attn_bwd_sm90v3_kernel<T, D, K | KU | V3_NODQ>;
        }
    }
    const dim3 grid((unsigned)((a->Sk + V3_BN - 1) / V3_BN), (unsigned)(a->B * a->Hkv), 1);
    /* FLASHC_CUDA_BWD_TRACE (attn_bwd_sm90h.cu's comment; bwd_trace.cuh): at d 64, sm90v3u's and
     * sm90v3d's kernels without softcap / ALiBi run as their V3_TRACE twins, the record
     * (layout version 2) written to the path; the same gradients bit for bit (test_bwd_trace).
     * Not at d 128: its consumers' registers are full (the untraced kernels spill 24-72 bytes),
     * and the twins spilled 124-172, which would time something else. */
    const char *tpath = NULL;
    uint64_t *tbuf = NULL;
    cuda_bwd_trace_head hd;
    memset(&hd, 0, sizeof hd);
    if constexpr (D == 64 && (F & V3_WRT) && (F & V3_UM) && !(F & (V3_PAD | V3_DVE | V3_SPLIT))) {
        tpath = mods ? NULL : cuda_bwd_trace_path();
        if (tpath) {
            constexpr unsigned TR = V3_TRACE;
            kernel = a->deterministic
                         ? (grp ? attn_bwd_sm90v3_kernel<T, D, K | V3_DET | KG | KUD | TR>
                                : attn_bwd_sm90v3_kernel<T, D, K | V3_DET | KUD | KNG | TR>)
                         : attn_bwd_sm90v3_kernel<T, D, K | KU | TR>;
            hd.version = 2, hd.grid_x = (int32_t)grid.x, hd.grid_y = (int32_t)grid.y;
            hd.bm = V3_BM, hd.bn = V3_BN, hd.d = D, hd.hdr_words = V3_TR_HDR;
            hd.it_words = V3_TR_IT;
            if ((err = cuda_bwd_trace_begin(&hd, a, &tbuf, stream)) != cudaSuccess)
                return err;
            if ((err = cudaMemcpyToSymbolAsync(bwd90v3_trace_buf, &tbuf, sizeof tbuf, 0,
                                               cudaMemcpyHostToDevice, stream)) != cudaSuccess ||
                (err = cudaMemcpyToSymbolAsync(bwd90v3_trace_maxit, &hd.maxit, sizeof hd.maxit,
                                               0, cudaMemcpyHostToDevice, stream)) != cudaSuccess)
                return cuda_bwd_trace_finish(err, tpath, tbuf, &hd, stream);
        }
    }
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (err == cudaSuccess) {
        kernel<<<grid, V3_THREADS, smem, stream>>>(mq, mdo, mk, mv, mdq, *a);
        err = cudaGetLastError();
    }
    if (tpath)
        err = cuda_bwd_trace_finish(err, tpath, tbuf, &hd, stream);
    if (err != cudaSuccess)
        return err;
    if constexpr (SPLIT)
        return attn_bwd_dq_sm90_launch<T, D>(a, stream); /* dQ itself: no postprocess */
    return attn_bwd_post_bh_launch<T, D, PAD>(a, stream);
}

/* The table's entries, one per element type: family FAM's kernel at head dim D with the bits F
 * (attn_bwd_sm90v3_launch), the writer warps' staging where W (bwd90v3_smem), opt_in OPT, and
 * head_dim_lo LO (> 0: the padded entries, whose names take the suffix SUF = "p"). */
#define V3_ENTRY(TN, T, DT, FAM, D, SUF, W, F, OPT, LO)                                            \
    {"attn_bwd_" #TN "_" FAM "_d" #D SUF "_64x128", FAM, DT, D, 90, 90, V3_BM, V3_BN, 1,          \
     bwd90v3_smem<D, W, bwd90v3_nb(D, F)>::LAUNCH, attn_bwd_sm90v3_launch<T, D, F>, NULL, OPT, LO}
#define V3_PAIR(FAM, D, SUF, W, F, OPT, LO)                                                        \
    V3_ENTRY(bf16, __nv_bfloat16, FLASHC_BF16, FAM, D, SUF, W, F, OPT, LO),                        \
        V3_ENTRY(f16, __half, FLASHC_F16, FAM, D, SUF, W, F, OPT, LO)

/* sm90v3u is the default at d 128 and d 64 (below: sm90v3wg with an unmasked softmax loop,
 * which is sm90v3w's fast kernel with its deterministic mode in groups of heads); the others are
 * opt-in (opt_in 1). sm90v3q
 * passed every forced test on the H200 on 2026-12-02 (suites, modifiers, deterministic bitwise,
 * memcheck, synccheck) and is 1.22-1.26x sm90, 1.34-1.46x SDPA-FA2 (bench/RESULTS.md), and it was
 * the default at d 128 for one device round; but racecheck then reported 10 hazards in it (fp16
 * d 128, short cases: writes at +0x8e50..0x8e80 against reads at +0x2570..0x57c0, 512 each).
 * They were the write-after-read of a stage's LSE and D, whose reads lane 0 handed back after
 * __syncwarp; since 2026-12-03 every consumer thread arrives on empty[s] and racecheck reports
 * none (bench/RESULTS.md, helper bwd5), and sm90v3w became the default. */
const attn_bwd_variant attn_bwd_sm90v3_variants[] = {
    V3_PAIR("sm90v3", 128, "", false, 0, 1, 0),
    V3_PAIR("sm90v3t", 128, "", false, V3_TDQ, 1, 0),
    /* sm90v3q: sm90v3t with dV, dK issued after dQ, so that dQ's epilogue overlaps them */
    V3_PAIR("sm90v3q", 128, "", false, V3_TDQ | V3_DQF, 1, 0),
    /* sm90v3w, the default at d 128 on compute capability 9.0 from the device round of
     * 2026-12-03 to sm90v3wg's of 2026-12-04: sm90v3q whose dQ adds (and deterministic
     * turns) run on two writer warps of the producer warpgroup, the staging tiles
     * double-buffered */
    V3_PAIR("sm90v3w", 128, "", true, V3_W, 1, 0),
    /* sm90v3w at d 64 (helper bwd6, 2026-12-03), the default at d 64 on compute capability
     * 9.0 from s8_bwd6.sh's device run to sm90v3wg's: both consumer warpgroups' dQ by keys, as
     * sm90v2 at d 64; against sm90v2s (one warpgroup, 64 keys, no producer) it has BN = 128,
     * TMA and the writer warps */
    V3_PAIR("sm90v3w", 64, "", true, V3_W, 1, 0),
    /* sm90v3wg (helper bwd9), the default at d 128 and d 64 on compute capability 9.0 from the
     * night's device round of 2026-12-04 to sm90v3u's (midday; opt-in since) (s9_bwd9.sh:
     * det / det of sm90v3w 1.25-1.30x at d 64 non-causal 1k-4k, 1.00-1.07x elsewhere;
     * bench/RESULTS.md): sm90v3w whose deterministic
     * mode without an upper key bound runs the blocks in groups of heads (bwd90v3_grouped), the
     * same bits; its fast mode is sm90v3w's kernel. sm90v3w above is opt-in since then (the
     * reference of test_det_grouped_bits). */
    V3_PAIR("sm90v3wg", 128, "", true, V3_W | V3_GRP, 1, 0),
    V3_PAIR("sm90v3wg", 64, "", true, V3_W | V3_GRP, 1, 0),
    /* sm90v3u (helper bwd13), the default at d 128 and d 64 on compute capability 9.0 since the
     * device round of 2026-12-04 midday (s11_bwd13.sh; bench/RESULTS.md): sm90v3wg whose softmax
     * takes a loop without the mask's test in tiles without masked keys (the same float
     * operations: the same bits as sm90v3wg, test_unmasked_bits). Fast mode 1.09-1.15x sm90v3wg
     * at d 128 and 1.10-1.23x at d 64, deterministic mode 1.05-1.16x at d 128; at d 64 its
     * deterministic mode was 0.95-1.08x, so there it keeps sm90v3wg's kernel (the launch). */
    V3_PAIR("sm90v3u", 128, "", true, V3_W | V3_GRP | V3_UM, 0, 0),
    V3_PAIR("sm90v3u", 64, "", true, V3_W | V3_GRP | V3_UM, 1, 0),
    /* sm90v3d (helper bwd21, 2026-12-05): sm90v3u whose deterministic mode at d 64 pipelines
     * the writer warps' dQ adds (a tile's count released after the next tile's adds are issued,
     * buffers handed back once read, three of them; bwd90v3_pipelined_writer), takes the
     * unmasked softmax loop, and groups the blocks by heads under an upper key bound too (K
     * blocks reversed: bwd90v3_grouped's REV); the same dQ order, so sm90v3u's deterministic
     * bits (test_pipelined_bits). Its fast mode is sm90v3u's kernel. The default at d 64 on
     * compute capability 9.0 since the device run of 2026-12-06 (s17_bwd21.sh on an H100:
     * deterministic 0.99-1.14x sm90v3u's, geomean 1.07, 1.11-1.14x from 8k; every forced suite
     * and sanitizer clean; bench/RESULTS.md); sm90v3u's d 64 entry is opt-in since. Listed
     * before the padded entries, which serve d 64 too (the first default entry wins). */
    V3_PAIR("sm90v3d", 64, "", true, V3_W | V3_GRP | V3_UM | V3_DQP, 0, 0),
    /* sm90v3e (helper bwd15, 2026-12-04; opt-in): sm90v3u whose consumers issue dV += P^T dO
     * right after the softmax, before they wait for dP^T, so that it runs under dS's
     * elementwise step, the stmatrix and the consumers' meeting (sm90v3u: after the meeting,
     * behind dQ). The same products in the same order per accumulator: sm90v3u's bits
     * (fast-mode dK, dV; deterministic dQ, dK, dV; test_early_bits). Deterministic mode with
     * UM at d 64 as well; with softcap / ALiBi sm90v3wg's kernels, as sm90v3u. H200, call 2
     * of 2026-12-04 afternoon: 0.98-1.04x sm90v3u at d 128 (geomean 1.02), deterministic at
     * d 64 geomean 1.03; kept opt-in for a re-measure. */
    V3_PAIR("sm90v3e", 128, "", true, V3_W | V3_GRP | V3_UM | V3_DVE, 1, 0),
    V3_PAIR("sm90v3e", 64, "", true, V3_W | V3_GRP | V3_UM | V3_DVE, 1, 0),
    /* sm90v3u's padded entries (helper bwd16, 2026-12-04): head dims D == Dv, multiples of 8
     * below an instance's, 40-56 on the d 64 kernels and 72-120 on the d 128 ones (the exact
     * dims take the entries above, first in the table; 8-32 stay on sm80's d 32 instance,
     * which does half the d 64 kernels' FLOPs), with V3_PAD: tensor maps D wide, the copy
     * engine's zero columns up to the instance's, stores cut at D. The default since the H200
     * run of 2026-12-04 afternoon (s12_bwd16.sh: 1.64-2.53x the sm80 instances at d 48, 80, 96,
     * 112, fast; 2.0-3.0x deterministic; bench/RESULTS.md). */
    V3_PAIR("sm90v3u", 128, "p", true, V3_W | V3_GRP | V3_UM | V3_PAD, 0, 65),
    V3_PAIR("sm90v3u", 64, "p", true, V3_W | V3_GRP | V3_UM | V3_PAD, 0, 33),
    /* sm90hs at d 128 / 64 (opt-in; the split family of attn_bwd_sm90h.cu, the default at
     * d 192 / 256): dK / dV by sm90v3u's kernel without its dQ path (V3_NODQ: no dS store, no
     * meeting of the consumer warpgroups, no writer warps' adds), then dQ by
     * attn_bwd_dq_sm90.cu's kernel; deterministic by construction, the same bits in both
     * modes. test_sm90hs_d64_d128 and its memcheck / racecheck / synccheck passed on an H100
     * (2026-12-07 midday), but it is slower than the fused default there (s33_nodq.sh with
     * S33_DIMS=128,64: 0.74-0.87x sm90v3u's fast mode at d 128, 0.63-0.83x sm90v3d's at
     * d 64; deterministic 0.72-0.95x theirs): without dQ the fused kernel runs 1.27-1.61x the
     * whole step, but the dQ kernel, whose 64-key blocks carry little work between their
     * waits at these head dims, takes about as long as that dK / dV half (bench/RESULTS.md).
     * Opt-in: the base for a faster dQ kernel, and a deterministic mode with no turns. */
    V3_PAIR("sm90hs", 128, "", true, V3_W | V3_GRP | V3_UM | V3_SPLIT, 1, 0),
    V3_PAIR("sm90hs", 64, "", true, V3_W | V3_GRP | V3_UM | V3_SPLIT, 1, 0),
};
#undef V3_PAIR
#undef V3_ENTRY
const int attn_bwd_sm90v3_variant_count =
    (int)(sizeof attn_bwd_sm90v3_variants / sizeof attn_bwd_sm90v3_variants[0]);
