/*
 * attn_fwd_sm90.cu — FlashAttention-3-style forward for Hopper (sm_90a): the copy engine (TMA)
 * brings the tiles, wgmma multiplies them, and the warps of a thread block specialise.
 *
 * One thread block of three warpgroups owns BM = 128 query rows of one (batch, head):
 *   warpgroup 0, the producer: one thread issues every copy. Q once; then, per K/V block of
 *     BN keys (128, or 176 in sm90v4w), K and V into a ring of STAGES shared-memory slots,
 *     each copy completing on the slot's "full" mbarrier, each slot reused once its "empty"
 *     mbarrier says both consumers are done with it. It gives most of its registers away
 *     (setmaxnreg.dec).
 *   warpgroups 1 and 2, the consumers, 64 query rows each (wgmma m64nNk16) and 240 registers:
 *     S = Q K^T          wgmma, Q and K from shared memory (K-major)
 *     mask, online softmax  as in attn_fwd_sm80.cu (attn_fwd_common.cuh: lazy rescale of O)
 *     O += P V           wgmma with P in registers as the A operand (the S accumulator
 *                        layout is the A fragment layout) and V from shared memory (MN-major)
 * Blocks are visited from the last to the first (the masked ones first), as in sm80; under the
 * causal mask blocks past the tile's last row are never loaded; in v1 a consumer whose 64 rows
 * see none of a block's keys skips its wgmmas there (it still takes part in the barriers).
 *
 * Tensor maps (4-d: feature, sequence, head, batch; the caller's strides) are built on the
 * host per call through the runtime's driver entry point (no link to libcuda; the last few
 * per host thread are memoised, make_map) and passed as __grid_constant__ parameters. The copy engine zero-fills rows past Sq and Sk, so tails need
 * no code besides the key mask (zero V rows times P = 0 stay 0). Output: direct 4-byte stores
 * from the accumulators; LSE = m scale + ln l.
 *
 * What it serves: bf16/fp16, head dims 64, 128, 192 and 256 (sm90v6h*), and every D in
 * (64, 256) padded by the copy engine (8-63 too with FLASHC_CUDA_SM90_PAD: sm90_pads),
 * rows 16-byte aligned (the copy engine's stride rule),
 * compute capability 9.0 exactly (sm_90a code runs on no later chip); anything else goes to
 * the sm80 kernel (see attn.cu). Dense windows, softcap and ALiBi: v6's kernel with MODS set
 * (the default at every head dim since 2026-12-04 evening, attn.cu's sm90_mods_family; the
 * kernel's comment and the mods table at the end): a per-tile key range changes the blocks the
 * producer and consumers walk (tile_at), and mods_block replaces mask_block (mask_at). Varlen
 * (FLASHC_CUDA_SM90_VARLEN, the default at d <= 128): v6d's kernel with MODS and VL (3-d maps
 * over the packed rows, per-tile sequences from cu_seqlens, guarded
 * direct stores of O; the kernel's comment and the sm90vl entries of the mods table).
 *
 * Versions (template VER, each its own FLASHC_CUDA_KERNEL family; the ladder and which one the
 * dispatcher picks where are in bench/RESULTS.md and the table at the end of this file):
 *   v1 "sm90"     S, softmax, P V in turn per block.
 *   v3 "sm90v3"   FlashAttention-3's intra-warpgroup overlap and ping-pong (v2 was the same
 *                 with a per-warpgroup causal skip, under which ptxas serialised the wgmmas).
 *   v4 "sm90v4"   v3 with shorter softmax dependency chains and a 3-stage K/V ring;
 *      "sm90v4w"  the same with BN = 176 keys per block (FA-3's non-causal d128 tile), 2 stages.
 *   v5 "sm90v5"   v4 on a persistent grid (one thread block per multiprocessor walking tiles
 *                 in the longest-first order): the producer loads the next tile's Q and K/V
 *                 while the consumers finish the last one and store it.
 *   v6 "sm90v6"   v5 with a dynamic tile scheduler (VER 7): after a thread block's first tile
 *                 (blockIdx.x), its producer claims each next one from an atomic counter in
 *                 device memory (zeroed in stream order before the launch) once the last
 *                 tile's loads are issued, and passes its index to the consumers through a
 *                 one-slot queue in shared memory (its own full / empty mbarriers, every
 *                 consumer thread arriving after its read), so that tiles of unequal cost
 *                 (causal) and multiprocessors of unequal speed even out as under the
 *                 hardware's block scheduler; tiles go longest first
 *                 under the causal mask, head by head without it (the tiles in flight share
 *                 the K/V of fewer heads in L2). BN = 176 without the mask, 128 under it,
 *                 2 stages. O goes through
 *                 shared memory (a 64-column panel per consumer) and a TMA store, which runs
 *                 on while the consumer starts its next tile.
 *      "sm90v6d"  v6's scheduler with v5's direct stores of O (VER 6);
 *      "sm90v6w"  v6 with BN = 176 under the causal mask too.
 *   v7 "sm90v7"   v6 with 3 consumer warpgroups (VER 8, d = 64, BM = 192).
 *   v8 "sm90v8"   non-causal (VER 9): v6's kernel in clusters of two thread blocks on
 *                 adjacent Q tiles of one head, each producer loading half of every K/V block
 *                 and the copy engine multicasting it to both, so that L2 delivers each block
 *                 once per pair (at BM = 128 and d = 128 the K/V reads alone are ~5 TB/s from L2
 *                 at 600 TFLOP/s); pairs in a static order; causal problems on v6's kernel.
 *   v9 "sm90v9"   v6 with the tile boundary overlapped (VER 11): a consumer issues the last
 *                 O += P V of tile t in the same turn as S = Q K^T of the first block of tile
 *                 t + 1, and stores tile t's O while that S runs, so that the tensor cores see
 *                 one stream of blocks across tiles instead of a drain (last P V alone, the
 *                 epilogue) and a fill (first S alone, its softmax) per tile: at the bench's
 *                 2k-4k a tile is only 12-24 blocks, and that bubble was about one block's time
 *                 per tile (bench/RESULTS.md, "Issue 11: sm90 forward v9"). To fit the
 *                 registers, O and the last P are divided by l at the end of the tile (LSE is
 *                 stored then), and the pending tile's place waits in shared memory. As that
 *                 turn needs the next tile's Q and first K with no epilogue before it to hide
 *                 their latency, the producer loads the first K before waiting for Q's buffer,
 *                 and a second producer thread reads the tile queue too and asks L2 for each
 *                 claimed tile's Q at once. The default at d 128 under the causal mask from
 *                 seqlen 4k (round 1 of 2026-12-03: 1.06x / 1.02x v6 at 4k / 16k, level or
 *                 below without the mask).
 *   (v9t, v9 on v7's shape at d 64 (VER 13), was no faster than v7 and was removed; so
 *   were v9n, v9 with 128-key blocks without the mask too, 0.93-1.02x v6, and v6p, v6 with
 *   v9's two load changes alone (VER 12 then), 0.98-1.02x v6: round 2 of 2026-12-03.)
 *   (v10, these defaults with the softmax's exponentials held under the P V issued beside S
 *   by a shared store before the wait, which ptxas otherwise hoists above them (VER 12-14),
 *   was level or slower, 0.94-1.02x: round 1 of 2026-12-04, removed.)
 *   sm90abl   v6 with one stage left out (VER = 7 + 32 x a mask, sm90_ver; fwd15's ladder);
 *   sm90np    each default (v5, v6, v7, v9) without ping-pong (VER = base + 64).
 *   sm90v6h   v6 (VER 7) at d 192 and 256: 64-key blocks (S 32 registers, P 16 beside O's 96 /
 *             128) in a 2-stage ring; S = Q K^T at N = 64, O += P V as N = 128 + (D - 128)
 *             (panels 0-1, then 2-3); the producer at 40 registers, the consumers at 232 (at
 *             24 the producer's tile loop spilled a word). Shared memory at d 256: Q 64 KB, K
 *             and V 2 x 2 x 32 KB, O one 64-column panel (16 KB): 209 KB; at d 192 Q 48 KB,
 *             K / V 96 KB, the whole O tile (48 KB): 193 KB.
 *      "sm90v6hnp" the same without ping-pong (VER 7 + 64);
 *      "sm90v6hw"  80-key blocks (FlashAttention-3's d 256 block; S 40 and P 20 registers):
 *                 at d 256 Q 64 KB + K / V 4 x 40 KB leave no room for the staged O, so v6d's
 *                 direct stores (VER 6), 225 KB; at d 192 v6 (VER 7), 217 KB.
 * Dk != Dv (dense, otherwise plain): the TMA-store kernels of max(D, Dv) with the maps of V and
 * O Dv wide (sm90_dkdv_enabled, the default; D and Dv multiples of 8), else the sm80 kernel's
 * mods instance. Not on sm90 yet: D < 64 by default (d 32 measured 0.98-1.08x sm80), and
 * D % 8 != 0 with masks or modifiers, varlen, or D != Dv (sm80 serves them).
 */
#include "attn_cuda.cuh"
#include "scratch.cuh"
#include "attn_fwd_common.cuh"
#include "ptx_sm90.cuh"
#include "tma_host.cuh"

#include <cuda.h> /* CUtensorMap and the driver's types only: the library never links libcuda */
#include <atomic>
#include <string.h>
#include <type_traits>

namespace {

/* A version with stages left out: VER = base + 32 x a mask of the stages below (sm90_ver);
 * every other test of VER reads the base (VER % 32). sm90abl, the leave-one-out ladder of v6
 * (bench/RESULTS.md, "Issue 11: leave-one-out"), leaves each out of v6 (base 7); sm90np
 * ("Issue 11: the defaults without ping-pong") leaves ping-pong out of every default. */
enum {
    SM90_ABL_OVERLAP = 1,  /* S_i waited for together with P_{i-1} V: softmax after both  */
    SM90_ABL_PINGPONG = 2, /* no turns: the consumers issue their wgmmas as they come     */
    SM90_ABL_DYNAMIC = 4,  /* persistent, static tile walk (blockIdx.x + k gridDim.x)     */
    SM90_ABL_PERSIST = 8,  /* one tile per thread block, the hardware's block scheduler   */
};
__host__ __device__ constexpr int sm90_ablate(int ver) { return ver / 32; }
__host__ __device__ constexpr int sm90_base(int ver) { return ver % 32; }
constexpr int sm90_ver(int base, int ablate) { return base + 32 * ablate; }
/* Consumer warpgroups of version VER: 3 in v7 (VER 8, and v8t on its shape: 10;
 * FlashAttention-3's d = 64 shape, BM = 192: the softmax, not the tensor cores, bounds
 * d = 64, and a third consumer gives the multiprocessor's exp units more independent rows),
 * else 2. BM = 64 per consumer. */
__host__ __device__ constexpr int sm90_consumers(int ver)
{
    return sm90_base(ver) == 8 || sm90_base(ver) == 10 ? 3 : 2;
}
/* v9's tile boundary overlap (VER 11, v6's shape), with its loads (the first K before Q, Q
 * prefetched into L2 by a second thread) */
__host__ __device__ constexpr bool sm90_cross_tile(int ver) { return sm90_base(ver) == 11; }
/* v8's pairs of thread blocks sharing K/V by multicast: VER 9 (v6's shape), 10 (v7's) */
__host__ __device__ constexpr bool sm90_pair(int ver)
{
    return sm90_base(ver) == 9 || sm90_base(ver) == 10;
}
/* a persistent grid (v5 on); v6's dynamic tile scheduler (v6 on, not v8's pairs) */
__host__ __device__ constexpr bool sm90_persist(int ver)
{
    return sm90_base(ver) >= 5 && !(sm90_ablate(ver) & SM90_ABL_PERSIST);
}
__host__ __device__ constexpr bool sm90_dyn(int ver)
{
    return sm90_base(ver) >= 6 && !sm90_pair(ver) &&
           !(sm90_ablate(ver) & (SM90_ABL_DYNAMIC | SM90_ABL_PERSIST));
}
__host__ __device__ constexpr int sm90_bm(int ver) { return 64 * sm90_consumers(ver); }
__host__ __device__ constexpr int sm90_threads(int ver) { return 128 * (1 + sm90_consumers(ver)); }
/* setmaxnreg's split: (launch - producer) x 128 = (consumer - launch) x 128 consumers, with
 * launch = 65536 / threads (168 or 128); the MODS instances' producer computes the tiles' key
 * ranges (at 24 registers it spilled two words) */
__host__ __device__ constexpr int sm90_producer_regs(int ver, int d, bool mods = false)
{
    return sm90_consumers(ver) == 3 ? 32
           : sm90_base(ver) >= 6 && (d == 64 || d > 128 || mods) ? 40
                                                                 : 24;
}
__host__ __device__ constexpr int sm90_consumer_regs(int ver, int d, bool mods = false)
{
    return sm90_consumers(ver) == 3 ? 160
           : sm90_base(ver) >= 6 && (d == 64 || d > 128 || mods) ? 232
                                                                 : 240;
}
static_assert((168 - 24) * 128 == (240 - 168) * 256 && (168 - 40) * 128 == (232 - 168) * 256 &&
                  (128 - 32) * 128 == (160 - 128) * 384,
              "setmaxnreg: the registers given cover the registers taken");

/* Shared memory of one thread block, in bytes from a 1024-byte aligned base. BN: keys per
 * K/V block (a multiple of 16; BN * 128 a multiple of 1024, so every panel is aligned). */
template <int D, int BN, int STAGES, int VER = 1> struct sm90_smem {
    static_assert(BN % 16 == 0 && BN * 128 % 1024 == 0 && BN <= 256, "K/V block of BN rows");
    static constexpr int Q_BYTES = sm90_bm(VER) * D * 2;
    static constexpr int KV_BYTES = BN * D * 2;           /* one K (or V) slot          */
    static constexpr int Q = 0;
    static constexpr int K = Q + Q_BYTES;
    static constexpr int V = K + STAGES * KV_BYTES;
    static constexpr int O = V + STAGES * KV_BYTES;
    /* v6's staged O: the whole tile where it fits, else (d 128 beside a 176-key ring) one
     * 64-column panel per consumer at a time */
    static constexpr int O_PANELS =
        O + Q_BYTES + 8 * (2 + 4 * STAGES) + 48 + 1024 <= 227 * 1024 ? D / 64 : 1;
    static constexpr int O_BYTES = sm90_base(VER) >= 7 ? sm90_bm(VER) * 128 * O_PANELS : 0;
    static constexpr int BARS = O + O_BYTES;              /* q_full, k/v full and empty, */
    static constexpr int SCHED = BARS + 8 * (2 + 4 * STAGES); /* q_empty; then v6's tile */
    static constexpr int SCHED_FULL = SCHED + 8;          /* the index's mbarriers       */
    static constexpr int SCHED_EMPTY = SCHED_FULL + 8;
    static constexpr int PEND = SCHED_EMPTY + 8;          /* v9: per consumer, the pending */
    static constexpr int TOTAL = PEND + 8 * 3;            /* tile's m0 and b Hq + h        */
    static constexpr size_t LAUNCH = TOTAL + 1024;        /* room to align the base     */
    static_assert(LAUNCH <= 227 * 1024, "shared memory of one thread block on sm_90");
};

/* S = Q K^T for one k-step: N = BN keys. */
template <int BN, typename T>
static __device__ __forceinline__ void wgmma_qk(T tag, float (&d)[1][BN / 8][4], uint64_t da,
                                                uint64_t db, int scale_d)
{
#if FLASHC_PTX_SM90A
    if constexpr (BN == 64) /* the wide head dims' blocks (sm90v6h): K-major B, as below */
        ptx_wgmma_ss_m64n64k16<0>(tag, d[0], da, db, scale_d);
    else if constexpr (BN == 80) /* sm90v6hw */
        ptx_wgmma_ss_m64n80k16(tag, d[0], da, db, scale_d);
    else if constexpr (BN == 128)
        ptx_wgmma_ss_m64n128k16(tag, d[0], da, db, scale_d);
    else
        ptx_wgmma_ss_m64n176k16(tag, d[0], da, db, scale_d);
#endif
}

/* v4's softmax halves: the same values as attn_fwd_common.cuh's block_rows_max / block_exp
 * (up to the order of the row sum), with shorter dependency chains: the row max as a tree,
 * the row sum in four partial sums. One consumer warp per SM sub-partition and warpgroup
 * runs the softmax, so latency, not throughput, bounds it. */
template <int NT>
static __device__ __forceinline__ bool sm90_rows_max(const float (&s)[1][NT][4],
                                                     const float (&row_m)[1][2],
                                                     float (&mx)[1][2], float scale_log2)
{
    bool grow = false;
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        float v[NT];
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
            v[nt] = fmaxf(s[0][nt][2 * hr], s[0][nt][2 * hr + 1]);
#pragma unroll
        for (int w = 1; w < NT; w *= 2)
#pragma unroll
            for (int nt = 0; nt + w < NT; nt += 2 * w)
                v[nt] = fmaxf(v[nt], v[nt + w]);
        float m = fmaxf(row_m[0][hr], v[0]);
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
        mx[0][hr] = m;
        grow |= (m - row_m[0][hr]) * scale_log2 > RESCALE_LOG2;
    }
    return __any_sync(0xffffffffu, grow);
}

template <int NT>
static __device__ __forceinline__ void sm90_exp(float (&s)[1][NT][4], const float (&row_m)[1][2],
                                                float (&row_l)[1][2], float scale_log2)
{
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        const float m = row_m[0][hr];
        const float base = m == -INFINITY ? 0.0f : m * scale_log2;
        float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int e = 2 * hr; e < 2 * hr + 2; e++) {
                const float p = ptx_exp2(fmaf(s[0][nt][e], scale_log2, -base));
                s[0][nt][e] = p;
                part[(nt % 2) * 2 + (e & 1)] += p;
            }
        row_l[0][hr] += (part[0] + part[1]) + (part[2] + part[3]);
    }
}

} // namespace

/* VER: 1 (no overlap), 3 (overlap and ping-pong), 4 (v3 with v4's softmax), 5 (v4 on a
 * persistent grid: each thread block walks tiles blockIdx.x, + gridDim.x, ...; the others get
 * one tile per thread block, the same loop run once).
 * MODS: the v2 contract's masks and modifiers on a dense problem (attn_fwd_args.mods, the
 * sm90mods instances): a key range [lo_i, hi_i) per row (windows; causal folded into wr = 0,
 * a.causal = 0), softcap and ALiBi, through attn_fwd_common.cuh's mods_block on the S
 * accumulators (the wgmma m64 layout is the m16n8 C layout per warp) and fwd_key_lo / hi:
 *   - a tile walks the key blocks [lo(first row) / BN, ceil(hi(last row) / BN)) only (tile_at:
 *     n_blocks of them, the last one kb_hi - 1): the producer never loads the others and the
 *     consumers never compute them; a tile whose rows see nothing walks none (O = 0, LSE = -inf,
 *     as for v6's empty causal tiles);
 *   - both consumers walk the tile's blocks, so every one takes part in every barrier and turn
 *     (a block none of a consumer's rows see is computed and masked whole, P = 0, as v6 does
 *     above the causal diagonal);
 *   - scores go to the log2 domain in mods_block (softcap, then ALiBi, then the mask where a
 *     warp's rows do not all see the whole block), the softmax runs with scale_log2 = 1 and
 *     LSE = m ln 2 + ln l, as in the sm80 kernel's MODS instance;
 *   - the tile order is longest-first for the windowed cost (tile_at).
 * A template flag of v6's and v9's kernel (VER 6, 7, 11), not a version: the plain instances
 * are unchanged.
 * VL (with MODS, v6d's kernel: VER 6): varlen, flashc_attn_varlen_fwd's packed (total, H, D)
 * rows, sequence b owning q / o rows [cu_q[b], cu_q[b + 1]) and k / v rows [cu_k[b], cu_k[b +
 * 1]) (attn_fwd_args; the sm80 kernel's MODS instance is the contract):
 *   - the tensor maps are 3-d (feature, row, head) over the packed tensors, rows up to
 *     total_q / total_k (make_map with B = 0); a tile's boxes start at its sequence's first row
 *     (Q at cu_q[b] + m0, K / V at cu_k[b] + n0), so a box may run into the next sequence's rows
 *     (the copy engine zero-fills only past the tensor);
 *   - the tile space is (sequence, Q tile of max_seqlen_q, head), as the dense one with B
 *     sequences and Sq = max_seqlen_q; each tile reads its sequence's lengths and first rows
 *     from cu_seqlens on the device (fwd_sequence: clamped as the sm80 kernel clamps them), and
 *     its key range and blocks come from them (tile_at, per sequence bottom-right: diag = Sk_b -
 *     Sq_b); a tile past its sequence's rows is skipped by the producer (never handed to the
 *     consumers, so every barrier stays matched: both sides count only the tiles handed over),
 *     a tile of rows against no key is handed over and stores O = 0, LSE = -inf, as the dense
 *     empty tiles do;
 *   - K / V rows past the sequence's end (the next sequence's, or rows of no sequence, in the
 *     one block that crosses it: the first a tile walks, kb_hi - 1, as hi <= Sk_b) are kept
 *     from this sequence's O and LSE whatever they hold (NaN, +-inf). K: they lie outside every
 *     row's key range, and mods_block sets those scores to -inf by a select (a NaN score of a
 *     NaN K row does not survive it; an add would keep it), so P = 0 there. V: P = 0 is not
 *     enough (0 x inf and 0 x NaN are NaN), so the rows are zeroed in shared memory before any
 *     P V reads them, as the sm80 kernel zero-fills them in its loads: the producer lands that
 *     block's V on a barrier of its own (v_land, one per slot), and a warp of the producer's
 *     warpgroup (the V fixer, warp 1, idle otherwise) waits for it, stores zeros over the rows
 *     past Sk_b of every panel (whole 128-byte rows: no swizzle to follow), makes them visible to
 *     the async proxy that wgmma reads through (fence.proxy.async, then one arrival), and only
 *     then completes v_full, the barrier the consumers wait on; the consumers' code is
 *     unchanged. It reads the tile queue as the consumers do (all 32 lanes, each arriving on
 *     sched_empty after its read), where the producer now also writes which slot that block
 *     goes to and how many of its rows to keep (the queue's second word; -1: no such block).
 *     Cost: at most BN - 1 rows x D columns of 16-byte stores (32 KB at d 128: 64 a lane, four
 *     wavefronts each) once per tile that reaches its sequence's last key block, off the
 *     consumers' path: they need that V only after S and the softmax of the same block, which
 *     the K copied beside it starts (and the producer's next handoff but one waits for the
 *     fixer's read, which follows the zeros: at most one tile's);
 *   - Q rows past the sequence's end (the next sequence's, whatever they hold, or zeros) are
 *     computed with the keys their index would see and never stored (a row's S, softmax and O
 *     stay in that row; a NaN / inf row can at most make its warp move the base of every row,
 *     each by its own max, as the online softmax may anyway): O by guarded direct stores (v6d's,
 *     rows < Sq_b, columns < Dv: a TMA store's 64-row box would write the next sequence's
 *     rows), LSE into (Hq, total_q) at cu_q[b] + row;
 *   - rows of no sequence (past cu_q[B]) are cleared after the kernel (attn_clear_unowned, the
 *     sm80 launch's, attn_fwd_clear_unowned).
 *   Windows, softcap and ALiBi come with MODS (the slope of (sequence, head)). */
template <typename T, int D, int BN, int STAGES, int VER, bool MODS = false, bool VL = false>
__global__ void __launch_bounds__(sm90_threads(VER), 1)
    attn_fwd_sm90_kernel(const __grid_constant__ CUtensorMap tm_q,
                         const __grid_constant__ CUtensorMap tm_k,
                         const __grid_constant__ CUtensorMap tm_v, const attn_fwd_args a,
                         const __grid_constant__ CUtensorMap tm_o, int *tile_ctr)
{
#if FLASHC_PTX_SM90A
    using L = sm90_smem<D, BN, STAGES, VER>;
    constexpr int NC = sm90_consumers(VER), BM = sm90_bm(VER), NP = D / 64; /* 64-col panels */
    constexpr int BASE = sm90_base(VER); /* the version; VER / 32: stages left out */
    constexpr bool OVERLAP = BASE >= 3, PERSIST = sm90_persist(VER);
    /* sm90abl, sm90np: stages left out (sm90_ablate); ping-pong: the consumers' turns */
    constexpr bool PINGPONG = OVERLAP && !(sm90_ablate(VER) & SM90_ABL_PINGPONG);
    constexpr bool SPLIT_WAIT = !(sm90_ablate(VER) & SM90_ABL_OVERLAP);
    /* v6 (VER 6 and 7): tiles from the atomic counter tile_ctr (zero at launch), the producer
     * passing each to the consumers through shared memory; VER 7 also stores O by TMA. */
    /* v8 (VER 9): a cluster of two thread blocks on two adjacent Q tiles of one (batch, head)
     * walks the same K/V blocks; each producer loads half of every K and V block (KV_ROWS rows)
     * and the copy engine writes it into both blocks' shared memory, so L2 serves each block
     * once per pair; a slot is refilled once the consumers of both blocks have released it.
     * Its tiles (pairs) go in a static order (non-causal only: every pair costs the same). */
    constexpr bool MC = sm90_pair(VER);
    constexpr bool DYN = sm90_dyn(VER), TMA_O = BASE >= 7;
    /* v6's head-by-head tile order without the mask (sm90abl's static walks keep it) */
    constexpr bool HEADWISE = BASE >= 6 && !MC;
    /* v9 (VER 11): the last P V of a tile goes out with the next tile's first S (XT) */
    constexpr bool XT = sm90_cross_tile(VER);
    /* v7's shape (3 consumers, BM 192; plain, not v8t's pairs), when a.skip_dead: a consumer
     * whose rows are all outside [0, Sq) skips the tile's products, and one whose rows see no
     * key of the first block walked skips that block's S and softmax (the consumers' loop) */
    constexpr bool SKIP_DEAD = NC == 3 && OVERLAP && !XT && !MODS && !MC;
    static_assert(!XT || (DYN && TMA_O), "v9 is v6 with the tile boundary overlapped");
    constexpr int KV_ROWS = MC ? BN / 2 : BN;
    static_assert(KV_ROWS % 8 == 0, "a multicast half is whole 1024-byte swizzle atoms");
    constexpr int NT = BN / 8, DT = D / 8;
    static_assert(D % 64 == 0 && D <= 256, "panels of 64 columns; O fits the registers");
    static_assert(D <= 128 || ((BN == 64 || BN == 80) && (BASE == 6 || BASE == 7) && !MC),
                  "d 192 / 256 (sm90v6h*): v6 on 64 / 80-key blocks, O 96 / 128 registers");
    static_assert(!MODS || (DYN && (BASE == 6 || BASE == 7 || BASE == 11)),
                  "masks and modifiers: v6's and v9's kernel (empty tiles go through them)");
    static_assert(!VL || (MODS && BASE == 6 && sm90_ablate(VER) == 0),
                  "varlen: v6d's kernel with MODS (guarded direct stores of O)");

    extern __shared__ uint8_t smem_raw[];
    const uint32_t base = (ptx_smem_addr(smem_raw) + 1023u) & ~1023u;
    const uint32_t sQ = base + L::Q, sK = base + L::K, sV = base + L::V;
    const uint32_t bar_q = base + L::BARS;
    auto k_full = [&](int s) { return bar_q + 8u * (1 + s); };
    auto v_full = [&](int s) { return bar_q + 8u * (1 + STAGES + s); };
    auto k_empty = [&](int s) { return bar_q + 8u * (1 + 2 * STAGES + s); };
    auto v_empty = [&](int s) { return bar_q + 8u * (1 + 3 * STAGES + s); };
    const uint32_t q_empty = bar_q + 8u * (1 + 4 * STAGES);
    /* varlen: slot s's landing barrier for a V block that crosses its sequence's end (the V
     * fixer's, below), in the words of v9's pending tile (VL is v6d's kernel, never v9) */
    static_assert(!VL || (!XT && L::PEND + 8 * STAGES <= L::TOTAL), "varlen: v_land's words");
    auto v_land = [&](int s) { return base + (uint32_t)L::PEND + 8u * s; };
    /* v6: the next tile's index, or n_tiles (no more), a one-slot queue of its own: the producer
     * writes it and arrives on sched_full (count 1: its own arrival, release, completes the
     * phase); every consumer thread reads it after its wait on sched_full (acquire) and then
     * arrives on sched_empty (count: every consumer thread), which the producer waits for
     * before the next write. Every thread that reads releases its own read: an arrival by one
     * lane per warp would order only that lane's (racecheck reported exactly that, and the
     * handoff rode on Q's barrier, whose phase the copy engine's bytes complete). */
    volatile int *const sched = (volatile int *)(smem_raw + (base - ptx_smem_addr(smem_raw)) +
                                                 L::SCHED);
    const uint32_t sched_full = base + L::SCHED_FULL, sched_empty = base + L::SCHED_EMPTY;

    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    const int wg = warp / 4;
    if (threadIdx.x == 0) {
        ptx_mbarrier_init(bar_q, 1);
        for (int s = 0; s < STAGES; s++) {
            ptx_mbarrier_init(k_full(s), 1);
            ptx_mbarrier_init(v_full(s), 1);
            /* one arrival per consumer warp (of both blocks of a v8 pair) */
            ptx_mbarrier_init(k_empty(s), 4 * NC * (MC ? 2 : 1));
            ptx_mbarrier_init(v_empty(s), 4 * NC * (MC ? 2 : 1));
            if constexpr (VL)
                ptx_mbarrier_init(v_land(s), 1); /* the producer's arrival and the bytes */
        }
        ptx_mbarrier_init(q_empty, 4 * NC);
        ptx_mbarrier_init(sched_full, 1);
        /* v9: + Q's prefetcher; varlen: + the V fixer's 32 lanes */
        ptx_mbarrier_init(sched_empty, 128 * NC + (XT ? 1 : VL ? 32 : 0));
        ptx_fence_mbarrier_init();
    }
    /* the last block-wide barrier: the roles part here (v8: cluster-wide, so that the peer's
     * barriers are initialised before this block's copies and arrivals reach them) */
    if constexpr (MC)
        ptx_cluster_sync();
    else
        __syncthreads();
    /* v8: which Q tile of the pair; and the first tile. Read again where used (special
     * registers), not held through the role split, where ptxas spilled them */
    auto crank = [&]() { return MC ? ptx_cluster_ctarank() : 0u; };
    auto first_tile = [&]() { return MC ? ptx_block_index() / 2 : ptx_block_index(); };

    const int diag = a.Sk - a.Sq; /* row i sees keys j <= i + diag (causal) */
    const int n_mblocks = (a.Sq + BM - 1) / BM;
    /* Q tiles aligned to the sequence's end (a.q_shift > 0: FLASHC_CUDA_SM90_CSHIFT under the
     * plain causal mask; attn.cu sets a.cshift, the launch the shift): tile k holds rows
     * [k BM - shift, (k + 1) BM - shift) with shift = sm90_q_shift(Sq, BM), the partial tile's
     * missing rows in whole 64-row boxes, so the partial tile is the first one, which sees the
     * fewest keys, rather than the last, which sees them all (at 2k and BM 192: 96 block pairs
     * of 192 x 128 a head instead of 101, at 4k 363 instead of 384). Rows < 0 of the first
     * tile: Q zero-filled by the copy engine (its coordinates are signed and its load bounds
     * two-sided, as past Sq), their scores masked like any row's (limit = row + 1 + diag: with
     * Sk <= Sq they see no key, m = -inf, P = 0, l = 0, no NaN; with Sk > Sq some, finite), each
     * row independent of the others, and never stored (store_rows, store_o: the row's unsigned
     * compare with Sq; a consumer whose 64 rows are all < 0 issues no TMA store of O, and whole
     * boxes leave no box partly below row 0, which the copy engine's store does not clip: the
     * launch's comment; test_cuda_attn's test_causal_end_tiles checks it). Not for v8's pairs
     * (never under the mask), MODS (causal folded into its key range) or VL (the launch leaves
     * it 0 there too). A value of the launch rather than a template flag, so that one instance
     * serves both and a run times both in one process; read from the parameter where used
     * (computed here from Sq and a flag, it spilled in d 128's 176-key instances, whose producer
     * has 24 registers). */
    auto q_shift = [&]() { return MODS || VL || MC ? 0 : a.q_shift; };
    const int n_tiles = (MC ? (n_mblocks + 1) / 2 : n_mblocks) * a.B * a.Hq; /* v8: pairs */
    const int tile_step = MC ? (int)gridDim.x / 2 : PERSIST ? (int)gridDim.x : n_tiles;
    /* Tile coordinates and the K/V blocks it visits: n_blocks of them, from block kb_hi - 1
     * down (plain: kb_hi = n_blocks, blocks [0, n_blocks); MODS: the tile's key range). */
    auto tile_at = [&](int tile, int &m0, int &b, int &h, int &n_blocks, int &kb_hi) {
        int m_block;
        if (MC) {
            /* v8: pair tile -> Q tiles 2 k and 2 k + 1 of one head (the second past Sq when
             * the count is odd: zero-filled Q, nothing stored), head by head */
            const int n_pairs = (n_mblocks + 1) / 2, bh = tile / n_pairs;
            m_block = 2 * (n_pairs - 1 - tile % n_pairs) + (int)crank();
            b = bh / a.Hq, h = bh % a.Hq;
        } else if (HEADWISE && !a.causal && !(MODS && (a.wl >= 0 || a.wr >= 0))) {
            /* v6 without the mask: every tile costs the same, so no longest-first; head by
             * head instead, so that the tiles in flight at once (132) share the K/V of a few
             * heads, not of a whole head group (the H200 profile: v4w read 1.7x cuDNN's DRAM
             * bytes at d128 4k, the K/V re-read) */
            const int bh = tile / n_mblocks;
            m_block = n_mblocks - 1 - tile % n_mblocks;
            b = bh / a.Hq, h = bh % a.Hq;
        } else {
            block_coords<BM>(a, tile, &m_block, &b, &h);
            /* MODS, longest first under a window: a tile's keys are [lo(m0), hi(last row)),
             * both bounds moving with the rows. With a right bound (causal: wr = 0) the width
             * only grows with the row until it is the window's (the last tiles first, as under
             * the causal mask; a two-sided window's last few tiles, cut by Sk, are the
             * exception); with a left bound alone it only shrinks (hi = Sk): the first first */
            if (MODS && a.wr < 0)
                m_block = n_mblocks - 1 - m_block;
        }
        m0 = m_block * BM - q_shift();
        if constexpr (VL) {
            /* varlen: sequence b's lengths; a tile past its rows: n_blocks = -1 (skipped) */
            int sq, sk, q0, k0;
            fwd_sequence(a, b, &sq, &sk, &q0, &k0);
            const int vdiag = sk - sq, last_row = min(m0 + BM, sq) - 1;
            const int lo = fwd_key_lo(a, vdiag, m0), hi = fwd_key_hi(a, vdiag, sk, last_row);
            kb_hi = hi > lo ? (hi + BN - 1) / BN : 0;
            n_blocks = m0 >= sq ? -1 : hi > lo ? kb_hi - lo / BN : 0;
            return;
        }
        const int last_row = min(m0 + BM, a.Sq) - 1;
        if constexpr (MODS) {
            const int lo = fwd_key_lo(a, diag, m0), hi = fwd_key_hi(a, diag, a.Sk, last_row);
            kb_hi = hi > lo ? (hi + BN - 1) / BN : 0;
            n_blocks = hi > lo ? kb_hi - lo / BN : 0;
        } else {
            const int n_end = a.causal ? min(a.Sk, last_row + 1 + diag) : a.Sk;
            n_blocks = n_end > 0 ? (n_end + BN - 1) / BN : 0;
            kb_hi = n_blocks;
        }
    };
    /* The K/V ring runs on across tiles: block j of the thread block's walk is in slot
     * j % STAGES, phase (j / STAGES) & 1; likewise Q's buffer with its tile count. */

    if (wg == 0) {
        /* ---- producer ---- */
        /* setmaxnreg.inc waits until the block's own pool (the launch's registers per thread
         * times its threads, 168 x 384 or 128 x 512) has the registers; what the producer
         * gives must cover what the consumers take, or they wait for ever (round 1 of v6:
         * 32 given, 240 taken, a hang). So 24 / 240 (d 128, and every version before v6),
         * 40 / 232 (v6 at d 64 and above 128: its scheduler spilled at 24, the consumers
         * fit 232: at d 64 they need less, at d 192 / 256 the key blocks are 64), and
         * 32 / 160 with 3 consumers. */
        ptx_setmaxnreg_dec<sm90_producer_regs(VER, D, MODS)>();
        /* panel p of the K or V block at key n0 into slot dst (v8: this block's half, into
         * both blocks of the pair) */
        auto load_kv = [&](uint32_t dst, const CUtensorMap *tm, uint32_t bar, int p, int n0,
                           int hk, int b) {
            if constexpr (VL) /* n0: the packed row (the sequence's first row added) */
                ptx_tma_load_3d(dst, tm, bar, 64 * p, n0, hk);
            else if constexpr (MC)
                ptx_tma_load_4d_multicast(dst + crank() * KV_ROWS * 128, tm, bar, 64 * p,
                                          n0 + (int)crank() * KV_ROWS, hk, b, 0x3);
            else
                ptx_tma_load_4d(dst, tm, bar, 64 * p, n0, hk, b);
        };
        if (warp == 0 && lane == 0) {
            ptx_prefetch_tensormap(&tm_q);
            ptx_prefetch_tensormap(&tm_k);
            ptx_prefetch_tensormap(&tm_v);
            int it = 0, tq = 0;
            int tile = first_tile();
            for (;;) {
                if (!DYN && tile >= n_tiles)
                    break;
                int m0 = 0, b = 0, h = 0, n_blocks = 0, kb_hi = 0;
                if (tile < n_tiles)
                    tile_at(tile, m0, b, h, n_blocks, kb_hi);
                if (!DYN && n_blocks == 0) {
                    tile += tile_step;
                    continue;
                }
                if (VL && n_blocks < 0) { /* varlen: no rows of its sequence, not handed over */
                    tile = atomicAdd(tile_ctr, 1) + (int)gridDim.x;
                    continue;
                }
                /* varlen: the packed rows of the sequence's first query and key (else 0); and
                 * the rows of the first block walked that are the sequence's keys (v_keep < BN:
                 * it crosses the sequence's end, the V fixer's work) */
                int q_base = 0, k_base = 0, v_keep = BN;
                if constexpr (VL) {
                    int sq, sk;
                    fwd_sequence(a, b, &sq, &sk, &q_base, &k_base);
                    if (n_blocks > 0)
                        v_keep = min(sk - (kb_hi - 1) * BN, BN);
                }
                const int hk = h / a.group;
                if constexpr (DYN) {
                    /* v6: every tile's index goes to the consumers, the empty ones (O = 0,
                     * LSE = -inf to store) and the end mark too, once every consumer thread
                     * has read the last one (a fresh barrier passes parity 1 at once). Tile
                     * tq's index is handoff tq: one count (one register) for both rings. */
                    ptx_mbarrier_wait(sched_empty, ((uint32_t)tq & 1u) ^ 1u);
                    *sched = tile;
                    /* varlen: the V fixer's word beside it, the crossing block's slot and the
                     * rows to keep, or -1 (none) */
                    if constexpr (VL)
                        sched[1] = v_keep < BN ? it % STAGES + STAGES * v_keep : -1;
                    ptx_mbarrier_arrive(sched_full);
                    if (tile >= n_tiles)
                        break;
                }
                /* K of block i (relative to the ring's count it) into its slot */
                auto load_k = [&](int i) {
                    const int s = (it + i) % STAGES;
                    ptx_mbarrier_wait(k_empty(s), ((uint32_t)((it + i) / STAGES) & 1u) ^ 1u);
                    /* the whole block lands here (v8: half from the peer's copies) */
                    ptx_mbarrier_arrive_expect_tx(k_full(s), L::KV_BYTES);
                    for (int p = 0; p < NP; p++)
                        load_kv(sK + s * L::KV_BYTES + p * BN * 128, &tm_k, k_full(s), p,
                                (kb_hi - 1 - i) * BN + k_base, hk, b);
                };
                /* v9: the first K before Q: its slot frees a block before Q's buffer (after
                 * the last tile's last S but one), and the consumers need both at once */
                if (XT && n_blocks > 0)
                    load_k(0);
                /* Q's buffer is free once both consumers issued and finished their last S of
                 * the previous tile (a fresh barrier passes parity 1 at once) */
                ptx_mbarrier_wait(q_empty, ((uint32_t)tq & 1u) ^ 1u);
                if (DYN && n_blocks == 0) {
                    /* an empty tile still takes its turn of Q's buffer (a plain arrival), so
                     * that tq counts every tile on both sides */
                    ptx_mbarrier_arrive(bar_q);
                    tq++;
                    tile = atomicAdd(tile_ctr, 1) + (int)gridDim.x;
                    continue;
                }
                ptx_mbarrier_arrive_expect_tx(bar_q, L::Q_BYTES);
                for (int p = 0; p < NP; p++) {
                    if constexpr (VL)
                        ptx_tma_load_3d(sQ + p * BM * 128, &tm_q, bar_q, 64 * p, m0 + q_base, h);
                    else
                        ptx_tma_load_4d(sQ + p * BM * 128, &tm_q, bar_q, 64 * p, m0, h, b);
                }
                for (int i = 0; i < n_blocks; i++) {
                    const int s = (it + i) % STAGES;
                    const uint32_t ph = (uint32_t)((it + i) / STAGES) & 1u;
                    const int n0 = (kb_hi - 1 - i) * BN;
                    if (!XT || i > 0)
                        load_k(i);
                    ptx_mbarrier_wait(v_empty(s), ph ^ 1u);
                    /* varlen: the block past the sequence's last key (only the first walked)
                     * lands on v_land; the V fixer clears its rows from v_keep on and completes
                     * v_full */
                    const uint32_t v_bar = VL && i == 0 && v_keep < BN ? v_land(s) : v_full(s);
                    ptx_mbarrier_arrive_expect_tx(v_bar, L::KV_BYTES);
                    for (int p = 0; p < NP; p++)
                        load_kv(sV + s * L::KV_BYTES + p * BN * 128, &tm_v, v_bar, p,
                                n0 + k_base, hk, b);
                }
                it += n_blocks, tq++;
                /* v6: the next tile, claimed once this one's loads are all issued, so that the
                 * claim waits for the ring to drain to STAGES blocks (the atomic's round trip
                 * hides behind them) and no tile is claimed long before it can start */
                tile = DYN ? atomicAdd(tile_ctr, 1) + (int)gridDim.x : tile + tile_step;
            }
        } else if (XT && warp == 1 && lane == 0) {
            /* v9: one more reader of the tile queue, which asks L2 for each tile's Q (read
             * once, so from DRAM) as soon as the producer has claimed the tile, two blocks
             * before Q's buffer frees for it: the consumers need it in the turn that ends the
             * last tile, with no epilogue before it any more to hide its latency. (In the
             * producer's own thread, at 24 registers, the prefetch spilled.) */
            for (int k = 0;; k++) {
                ptx_mbarrier_wait(sched_full, (uint32_t)k & 1u);
                const int tile = *sched;
                ptx_mbarrier_arrive(sched_empty);
                if (tile >= n_tiles)
                    break;
                int m0, b, h, n_blocks, kb_hi;
                tile_at(tile, m0, b, h, n_blocks, kb_hi);
                if (n_blocks > 0)
                    for (int p = 0; p < NP; p++)
                        ptx_tma_prefetch_4d(&tm_q, 64 * p, m0, h, b);
            }
        } else if (VL && warp == 1) {
            /* varlen: the V fixer (the kernel's comment). Every lane reads the tile queue, the
             * tile and the producer's word beside it (the crossing block's slot and rows to
             * keep, or -1), and releases its own read, as the consumers do; land holds the
             * parity of each slot's v_land (the crossing blocks loaded into it so far, mod 2).
             * It computes nothing of the tile itself: at 40 registers (the producer's), its own
             * tile_at and fwd_sequence spilled (ptxas, d 256: 8 bytes, loaded in the consumers'
             * path too). */
            uint32_t land = 0;
            for (int k = 0;; k++) {
                ptx_mbarrier_wait(sched_full, (uint32_t)k & 1u);
                const int tile = sched[0], fix = sched[1];
                ptx_mbarrier_arrive(sched_empty);
                if (tile >= n_tiles)
                    break;
                if (fix >= 0) {
                    const int s = fix % STAGES, keep = fix / STAGES;
                    ptx_mbarrier_wait(v_land(s), (land >> s) & 1u);
                    land ^= 1u << s;
                    /* rows [keep, BN) of each panel: whole rows, contiguous in a panel */
                    const uint32_t slot = sV + s * L::KV_BYTES;
#pragma unroll 1
                    for (int p = 0; p < NP; p++)
#pragma unroll 1
                        for (int c = keep * 8 + lane; c < BN * 8; c += 32)
                            ptx_st_shared_zero16(slot + p * BN * 128 + c * 16);
                    ptx_fence_proxy_async_shared(); /* each lane's zeros, for wgmma's reads */
                    __syncwarp();                   /* every lane's, before the arrival */
                    if (lane == 0)
                        ptx_mbarrier_arrive(v_full(s));
                    __syncwarp();
                }
            }
        }
        if constexpr (MC) { /* v8: no block leaves while its peer may still arrive on its
                             * barriers or copy into it */
            __syncwarp();
            ptx_cluster_sync();
        }
        return;
    }

    /* ---- consumers ---- */
    ptx_setmaxnreg_inc<sm90_consumer_regs(VER, D, MODS)>();
    const int cw = wg - 1;                    /* which 64 rows of the tile           */
    const int wq = warp % 4;                  /* warp within the warpgroup: 16 rows  */
    const int g = lane / 4, t = lane % 4;
    /* The thread's first row in the tile, cw 64 + wq 16 + g; v9 re-reads it from the thread
     * index where used, so that it does not hold a register through the kernel (v9 on v7's
     * shape, 3 consumers at 160 registers, spilled; that variant, v9t, is gone) */
    auto row_in_tile = [&]() {
        if constexpr (XT) {
            const int tid = ptx_thread_index();
            return (tid / 128 - 1) * 64 + tid % 128 / 32 * 16 + tid % 32 / 4;
        } else {
            return cw * 64 + wq * 16 + g;
        }
    };
    /* Ping-pong (v3 on): the two consumers take turns to issue their wgmmas, on named barriers
     * 1 and 2, and the turns run on across tiles (both walk the same tiles, with the same
     * number of turns in each): a protocol restarted per tile could let consumer 1 pass twice
     * before consumer 0 took the first pass. */
    /* With 3 consumers (v7) the turns go round: 0, 1, 2, 0, ... */
    const int me = 1 + cw, other = 1 + (cw + 1) % NC;
    /* without ping-pong (sm90abl pingpong, sm90np): no turns, each consumer syncing its own
     * warpgroup only where it would wait for its turn (the same instruction stream, no wait
     * for the others) */
    auto my_turn = [&]() { ptx_named_bar_sync(me, PINGPONG ? 256 : 128); };
    auto pass_turn = [&]() {
        if constexpr (PINGPONG)
            ptx_named_bar_arrive(other, 256);
    };
    if (PINGPONG && cw == NC - 1)
        pass_turn(); /* consumer 0 issues first */
    /* it: K/V blocks walked (slot (it + i) % STAGES, phase ((it + i) / STAGES) & 1); tq: tiles
     * (Q's buffer and the tile queue, parity tq & 1). v9 needs them only mod 2 STAGES and mod 2
     * and keeps both in it, 4 STAGES + (blocks mod 2 STAGES) + 2 STAGES (tiles mod 2): the same
     * slots and phases (4 STAGES keeps it - 1 positive), one register less (v9t, gone, spilled
     * tq). */
    int it = XT ? 4 * STAGES : 0, tq = 0;
    auto tq_parity = [&]() {
        if constexpr (XT) {
            /* from an opaque copy: otherwise the parity is kept from the tile's top to the
             * update at its end, a register more (v9t, gone, spilled it) */
            uint32_t x = (uint32_t)it;
            ptx_fence_operand(x);
            return x / (2 * STAGES) & 1u;
        } else {
            return (uint32_t)tq & 1u;
        }
    };
    /* O and the rows' base m and sum l of the tile in hand (v9: of the pending tile until its
     * O is stored); S of the block in hand, then its P, and P as A fragments */
    float acc[1][DT][4], row_m[1][2], row_l[1][2];
    float sc[1][NT][4];
    uint32_t pa[BN / 16][4];
    auto reset_o = [&]() {
#pragma unroll
        for (int dt = 0; dt < DT; dt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[0][dt][e] = 0.0f;
    };
    auto reset_rows = [&]() {
#pragma unroll
        for (int hr = 0; hr < 2; hr++)
            row_m[0][hr] = -INFINITY, row_l[0][hr] = 0.0f;
    };
    /* v9: whether a tile's last O += P V and store of O are still to come (its LSE stored, O
     * and its last P in sc already divided by l). Its place (m0, b Hq + h) waits in shared
     * memory, written and read by the one thread that issues the store: in registers beside
     * the next tile's state, through the turn that ends it, ptxas spilled. */
    bool pend = false;
    volatile int *const pend_at = (volatile int *)(smem_raw + (base - ptx_smem_addr(smem_raw)) +
                                                   L::PEND) + 2 * cw;
    if constexpr (XT)
        reset_o(), reset_rows();
    for (int tile = first_tile();; tile += tile_step) {
        if constexpr (DYN) {
            ptx_mbarrier_wait(sched_full, tq_parity());
            tile = *sched;
            ptx_mbarrier_arrive(sched_empty); /* this thread's read is done */
        }
        if (!XT && tile >= n_tiles)
            break;
        int m0 = 0, b = 0, h = 0, n_blocks = 0, kb_hi = 0;
        if (!XT || tile < n_tiles)
            tile_at(tile, m0, b, h, n_blocks, kb_hi);
        const int row0 = m0 + row_in_tile(); /* this thread's rows: row0, row0 + 8 */
        /* varlen: the sequence's query rows and keys, its first packed query row, its diag
         * (dense: Sq, Sk, 0 and diag, which the dense instances read as before) */
        int seq_q = a.Sq, seq_k = a.Sk, q_base = 0;
        if constexpr (VL) {
            int k_base;
            fwd_sequence(a, b, &seq_q, &seq_k, &q_base, &k_base);
        }
        const int tdiag = VL ? seq_k - seq_q : diag;
        auto slot = [&](int i) { return (it + i) % STAGES; };
        auto phase = [&](int i) { return (uint32_t)((it + i) / STAGES) & 1u; };
        if constexpr (!XT)
            reset_o(), reset_rows();

        /* Issues S = Q K^T of the block in slot s (uncommitted). */
        auto issue_qk = [&](float (&sc)[1][NT][4], int s) {
            ptx_wgmma_fence();
#pragma unroll
            for (int ks = 0; ks < D / 16; ks++) {
                const uint32_t qa = sQ + (ks / 4) * BM * 128 + cw * 64 * 128 + (ks % 4) * 32;
                const uint32_t kb = sK + s * L::KV_BYTES + (ks / 4) * BN * 128 + (ks % 4) * 32;
                wgmma_qk<BN>(T(), sc, ptx_wgmma_desc(qa, 16, 1024), ptx_wgmma_desc(kb, 16, 1024),
                             ks > 0);
            }
        };
        /* P (in sc) into A fragments: tiles 2kk and 2kk + 1 of S are the A fragment of keys
         * [16 kk, 16 kk + 16). */
        auto pack_p = [&](const float (&sc)[1][NT][4], uint32_t (&pa)[BN / 16][4]) {
#pragma unroll
            for (int kk = 0; kk < BN / 16; kk++)
                ptx_pack_a<T>(pa[kk], sc[0][2 * kk], sc[0][2 * kk + 1]);
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
                if constexpr (D == 128) {
                    ptx_wgmma_rs_m64n128k16_tb(T(), acc[0], pa[kk], dv, 1);
                } else if constexpr (D == 64) {
                    ptx_wgmma_rs_m64n64k16_tb(T(), acc[0], pa[kk], dv, 1);
                } else {
                    /* d 192 / 256: N = 128 over panels 0-1, then N = D - 128 over the rest
                     * (the accumulator's column tiles 16.. are theirs) */
                    float(&lo)[16][4] = *reinterpret_cast<float(*)[16][4]>(&acc[0][0]);
                    float(&hi)[DT - 16][4] = *reinterpret_cast<float(*)[DT - 16][4]>(&acc[0][16]);
                    const uint64_t dv2 = ptx_wgmma_desc(vb + 2 * BN * 128, BN * 128, 1024);
                    ptx_wgmma_rs_m64n128k16_tb(T(), lo, pa[kk], dv, 1);
                    if constexpr (D == 256)
                        ptx_wgmma_rs_m64n128k16_tb(T(), hi, pa[kk], dv2, 1);
                    else
                        ptx_wgmma_rs_m64n64k16_tb(T(), hi, pa[kk], dv2, 1);
                }
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
        /* a K/V slot: v8 releases it in both blocks of the pair (both producers fill it) */
        auto release_kv = [&](uint32_t bar) {
            if (lane == 0) {
                if constexpr (MC) {
                    ptx_mbarrier_arrive_cluster(ptx_mapa_shared(bar, 0));
                    ptx_mbarrier_arrive_cluster(ptx_mapa_shared(bar, 1));
                } else {
                    ptx_mbarrier_arrive(bar);
                }
            }
            __syncwarp();
        };
        /* Under the causal mask a warpgroup whose last row cannot see key n0 has nothing in a
         * block: S all masked, P = 0, m and O unchanged. Blocks go from the last to the first, so
         * once a block is live every later one is. */
        auto live_at = [&](int i) {
            return !a.causal || (n_blocks - 1 - i) * BN <= m0 + cw * 64 + 63 + diag;
        };
        /* MODS: S into the log2 domain (softcap, ALiBi) and the key range, masked where some
         * row of the warp (16 rows r0 .. r0 + 15; past Sq too, which are never stored) does not
         * see the whole block */
        auto sl2 = [&]() { return MODS ? 1.0f : a.scale_log2; }; /* the softmax's scale */
        auto mask_at = [&](float (&sc)[1][NT][4], int i) {
            const int n0 = (kb_hi - 1 - i) * BN;
            if constexpr (MODS) {
                const int r0 = row0 - g;
                const int dg = VL ? tdiag : diag;
                const bool mask = n0 < fwd_key_lo(a, dg, r0 + 15) ||
                                  n0 + BN > fwd_key_hi(a, dg, VL ? seq_k : a.Sk, r0);
                /* this head's ALiBi slope, in the log2 domain: read per block (an L1 hit)
                 * rather than held through the tile */
                const float slope_log2 =
                    a.alibi ? a.alibi[b * a.salibi[0] + h * a.salibi[1]] * 1.4426950408889634f
                            : 0.0f;
                mods_block<1, NT>(sc, a, row0, n0 + 2 * t, dg, VL ? seq_k : a.Sk, slope_log2,
                                  mask);
            } else if (n0 + BN > a.Sk || (a.causal && n0 + BN > m0 + cw * 64 + 1 + diag)) {
                mask_block<1, NT>(sc, a, row0, n0 + 2 * t, diag);
            }
        };
        /* Epilogue of the tile at (m0, b, h), in two halves: the rows' sums (the one division
         * per row, inv) and LSE from row_m and row_l, which are final after the last softmax;
         * then O from acc once the last P V is in. Rows past Sq are not stored, nor rows < 0 of
         * a tile aligned to the sequence's end (q_shift: one unsigned compare takes both). v9
         * runs the second half for the tile before the one in hand, under that one's first S. */
        auto store_rows = [&](const int m0, const int b, const int h, float (&inv)[2]) {
            const int row0 = m0 + row_in_tile();
#pragma unroll
            for (int hr = 0; hr < 2; hr++) {
                float l = row_l[0][hr];
                l += __shfl_xor_sync(0xffffffffu, l, 1);
                l += __shfl_xor_sync(0xffffffffu, l, 2);
                inv[hr] = l > 0.0f ? 1.0f / l : 0.0f;
                const int row = row0 + 8 * hr;
                /* varlen: the sequence's rows, LSE into (Hq, total_q) at its packed rows (a
                 * statement of its own: folded into the dense one's index, or both through one
                 * lambda, it changed the dense kernels' register allocation) */
                if constexpr (VL) {
                    if (row < seq_q && a.lse && t == 0)
                        a.lse[h * a.slse[1] + ((int64_t)q_base + row) * a.slse[2]] =
                            l > 0.0f ? row_m[0][hr] * 0.6931471805599453f + logf(l) : -INFINITY;
                }
                if (!VL && (unsigned)row < (unsigned)a.Sq && a.lse && t == 0)
                    a.lse[b * a.slse[0] + h * a.slse[1] + (int64_t)row * a.slse[2]] =
                        l > 0.0f ? row_m[0][hr] * (MODS ? 0.6931471805599453f : a.scale) +
                                       logf(l)
                                 : -INFINITY;
            }
        };
        auto store_o = [&](const int m0, const int b, const int h, const float (&inv)[2]) {
            if constexpr (!TMA_O && !VL) {
                const int row0 = m0 + row_in_tile();
                T *og = (T *)a.o + b * a.so[0] + h * a.so[2];
#pragma unroll
                for (int hr = 0; hr < 2; hr++) {
                    const int row = row0 + 8 * hr;
                    if ((unsigned)row < (unsigned)a.Sq) {
                        T *orow = og + (int64_t)row * a.so[1];
#pragma unroll
                        for (int dt = 0; dt < DT; dt++)
                            *(uint32_t *)(orow + dt * 8 + 2 * t) = ptx_pack2(
                                T(), acc[0][dt][2 * hr] * inv[hr], acc[0][dt][2 * hr + 1] * inv[hr]);
                    }
                }
            }
            if constexpr (TMA_O) {
                /* v6: O through shared memory, the whole tile or (d 128 beside a 176-key ring,
                 * where only that fits) one 64-column panel at a time per consumer, in the 128-byte
                 * swizzle the O map reads (conflict-free: the 8 rows of a warp's store land in 8
                 * different chunks), then a TMA store that clips rows past Sq. One thread per
                 * consumer issues the stores and, before the panel is rewritten, waits for the last
                 * one's reads; the consumer goes on to its next tile while the copy engine writes. */
                /* the thread's place re-read here, so that ptxas does not hoist 16 store addresses
                 * out of the tile loop and hold them through the main loop */
                const int tid = ptx_thread_index() % 128, eg = tid % 32 / 4, et = tid % 4;
                const bool issuer = tid == 0;
#pragma unroll
                for (int p = 0; p < NP; p++) {
                    const uint32_t sO = base + L::O + (p % L::O_PANELS) * BM * 128 + cw * 64 * 128;
                    const uint32_t row_at = sO + (uint32_t)(tid / 32 * 16 + eg) * 128 + 4 * et;
                    if (p == 0 || L::O_PANELS == 1) { /* the buffer's last store (the last
                                              tile's, or panel p - 1's when it is one panel) */
                        if (issuer)
                            ptx_bulk_wait_group_read<0>();
                        ptx_named_bar_sync(1 + NC + cw, 128); /* after the turns' ids */
                    }
#pragma unroll
                    for (int hr = 0; hr < 2; hr++) /* rows eg + 8 hr of the warp's 16: r % 8 = eg */
#pragma unroll
                        for (int c = 0; c < 8; c++) {
                            const int dt = 8 * p + c;
                            ptx_st_shared_b32(row_at + hr * 8 * 128 + ((c ^ eg) << 4),
                                              ptx_pack2(T(), acc[0][dt][2 * hr] * inv[hr],
                                                        acc[0][dt][2 * hr + 1] * inv[hr]));
                        }
                    ptx_fence_proxy_async_shared(); /* for the copy engine's reads */
                    ptx_named_bar_sync(1 + NC + cw, 128); /* after the turns' ids */
                    /* rows past Sq, and rows < 0 (q_shift), are outside O's map: the
                     * copy engine writes none of them; a box with none inside is not issued */
                    if (issuer && m0 + cw * 64 < a.Sq && m0 + cw * 64 > -64) {
                        ptx_tma_store_4d(&tm_o, sO, 64 * p, m0 + cw * 64, h, b);
                        ptx_bulk_commit_group();
                    }
                }
                /* Dv % 8 != 0 (a padded head dim in rows pitched to 8 elements): the O map
                 * stops at Dv rounded down to 8 (o_map_cols: the copy engine stores whole
                 * 16-byte units, so a map Dv wide would write the caller's row padding up to
                 * the next multiple of 8), and the last 1-7 columns go out here as 2-byte
                 * stores from the accumulators, by the threads that hold them (columns
                 * 8 dt + 2 t, + 1 of the rows row0, row0 + 8). */
                if (a.Dv % 8 != 0) {
                    const int row0 = m0 + row_in_tile(), d8 = a.Dv / 8 * 8;
                    T *og = (T *)a.o + b * a.so[0] + h * a.so[2];
                    /* the tail's chunk is one of the last 8: an instance of head dim 8 DT serves
                     * Dv > 8 DT - 64 (the table's head_dim_min), so d8 >= 8 (DT - 8); unrolling
                     * only those keeps the epilogue's code small (all DT: 168-1,496 more
                     * instructions per kernel) */
#pragma unroll
                    for (int dt = DT > 8 ? DT - 8 : 0; dt < DT; dt++)
                        if (dt * 8 == d8)
#pragma unroll
                            for (int hr = 0; hr < 2; hr++)
#pragma unroll
                                for (int e = 0; e < 2; e++)
                                    if ((unsigned)(row0 + 8 * hr) < (unsigned)a.Sq &&
                                        d8 + 2 * t + e < a.Dv)
                                        og[(int64_t)(row0 + 8 * hr) * a.so[1] + d8 + 2 * t + e] =
                                            T(acc[0][dt][2 * hr + e] * inv[hr]);
                }
            }
            if constexpr (VL) {
                /* varlen: the sequence's rows only (a box of 64 rows would write the next
                 * sequence's), at its packed rows; columns < Dv (padded D, Dk != Dv: the
                 * instance's columns past Dv are zero and not o's); Dv % 8 == 0, so a pair of
                 * columns is whole */
                const int row0 = m0 + row_in_tile();
                T *og = (T *)a.o + h * a.so[2] + (int64_t)q_base * a.so[1];
#pragma unroll
                for (int hr = 0; hr < 2; hr++) {
                    const int row = row0 + 8 * hr;
                    if (row < seq_q) {
                        T *orow = og + (int64_t)row * a.so[1];
#pragma unroll
                        for (int dt = 0; dt < DT; dt++)
                            if (dt * 8 + 2 * t < a.Dv)
                                *(uint32_t *)(orow + dt * 8 + 2 * t) =
                                    ptx_pack2(T(), acc[0][dt][2 * hr] * inv[hr],
                                              acc[0][dt][2 * hr + 1] * inv[hr]);
                    }
                }
            }
        };
        /* The last block's O += P V alone, block i of the walk: v1-v8 at the end of every tile,
         * v9 at the end of the pending tile (i = -1) when no next S goes out with it (at the
         * end, or before a tile with no block). */
        auto last_pv = [&](int i) {
            const int s = slot(i);
            ptx_mbarrier_wait(v_full(s), phase(i));
            pack_p(sc, pa);
            my_turn();
            issue_pv(pa, s);
            ptx_wgmma_commit();
            pass_turn();
            ptx_wgmma_wait<0>();
            fence_pv(pa);
            release_kv(v_empty(s));
        };
        /* v9: the pending tile's O, stored, and O cleared for the tile in hand */
        auto store_pending = [&]() {
            const float one[2] = {1.0f, 1.0f};
            int pm0 = 0, pbh = 0; /* read by the issuer of the store only */
            if (a.Dv % 8 != 0) {
                /* ... and by every thread where O's last columns are stored from the
                 * accumulators (store_o): after the issuer's write, which the barrier orders,
                 * and before its next, which waits for store_o's barrier */
                ptx_named_bar_sync(1 + NC + cw, 128);
                pm0 = pend_at[0], pbh = pend_at[1];
            } else if (ptx_thread_index() % 128 == 0) {
                pm0 = pend_at[0], pbh = pend_at[1];
            }
            store_o(pm0, pbh / a.Hq, pbh % a.Hq, one);
            reset_o();
            pend = false;
        };
        if (XT && pend && n_blocks == 0) { /* tile >= n_tiles too: n_blocks = 0 */
            last_pv(-1);
            store_pending();
        }
        if (XT && tile >= n_tiles)
            break;

        if (DYN || n_blocks > 0)
            ptx_mbarrier_wait(bar_q, tq_parity());
        if (DYN && n_blocks == 0)
            release(q_empty); /* no S to wait for */
        /* after the wait for the last S of the tile: Q's buffer may take the next tile's Q */
        auto release_q = [&](int i) {
            if (i == n_blocks - 1)
                release(q_empty);
        };

        if constexpr (!OVERLAP) {
            /* v1 ("sm90"): per block, S, softmax, P V in turn; the two consumers interleave as
             * the warp schedulers let them. */
            for (int i = 0; i < n_blocks; i++) {
                const int s = slot(i);
                const uint32_t ph = phase(i);
                const bool live = live_at(i);
                ptx_mbarrier_wait(k_full(s), ph);
                if (live) {
                    issue_qk(sc, s);
                    ptx_wgmma_commit();
                    ptx_wgmma_wait<0>();
                    fence_s(sc);
                }
                release_kv(k_empty(s));
                release_q(i);
                if (live) {
                    mask_at(sc, i);
                    softmax_block<1, NT, DT>(sc, acc, row_m, row_l, sl2());
                }
                ptx_mbarrier_wait(v_full(s), ph);
                if (live) {
                    pack_p(sc, pa);
                    issue_pv(pa, s);
                    ptx_wgmma_commit();
                    ptx_wgmma_wait<0>();
                    fence_pv(pa);
                }
                release_kv(v_empty(s));
            }
        } else if (SKIP_DEAD && a.skip_dead &&
                   (m0 + cw * 64 >= seq_q || m0 + cw * 64 <= -64)) {
            /* a dead consumer (FLASHC_CUDA_SM90_SKIPDEAD; v7's shape): none of its 64 rows is
             * stored (all past Sq: the last Q tile of a length that is not a multiple of 192
             * leaves one or two consumers without rows, e.g. 2k: 128 live rows, 4k: 64; or all
             * < 0: the first causal tile aligned to the end). It issues no wgmma and runs no
             * softmax, so that the live consumers have the tensor cores and the exp units to
             * themselves, but keeps every step of the protocol in the same order: the slot waits
             * (so that its arrivals count towards the phase the live consumers' do), its turns
             * (n_blocks + 1 of them, as below, so that the turn order stays matched across
             * tiles), the slot and Q releases. O stays 0 and l = 0: the epilogue stores nothing
             * of these rows (LSE and O past Sq or < 0 are not stored). A branch over the whole
             * tile, uniform in the warpgroup, with no wgmma on this side: a conditional issue
             * inside the loop made ptxas serialise the wgmmas (C7518, v2). */
            for (int i = 0; i < n_blocks; i++) {
                ptx_mbarrier_wait(k_full(slot(i)), phase(i));
                my_turn();
                pass_turn();
                release_kv(k_empty(slot(i)));
                release_q(i);
                if (i > 0) {
                    ptx_mbarrier_wait(v_full(slot(i - 1)), phase(i - 1));
                    release_kv(v_empty(slot(i - 1)));
                }
            }
            if (n_blocks > 0) { /* last_pv's turn */
                ptx_mbarrier_wait(v_full(slot(n_blocks - 1)), phase(n_blocks - 1));
                my_turn();
                pass_turn();
                release_kv(v_empty(slot(n_blocks - 1)));
            }
        } else {
            /* v3 and v4 (FlashAttention-3's intra-warpgroup overlap and ping-pong): S_i = Q K_i^T
             * and O += P_{i-1} V_{i-1} are issued together, then the softmax of S_i runs while P V
             * is still on the tensor cores; O's rescale for block i waits for that P V. The two
             * consumers take turns to issue (named barriers 1 and 2), so one's softmax overlaps
             * the other's GEMMs. No causal skip here: a block above a warpgroup's rows is computed
             * and fully masked (P = 0), so that every wgmma is issued on a path ptxas sees as
             * warpgroup-uniform; under v2's `if (live)` it serialised them (ptxas C7518), which
             * cost the overlap. */
            /* The softmax of S_i in sc: m and l move now, O (alpha) once its P V is done. */
            auto softmax_s = [&](int i, float (&alpha)[1][2]) {
                mask_at(sc, i);
                float mx[1][2];
                bool moved;
                if constexpr (BASE >= 4)
                    moved = sm90_rows_max<NT>(sc, row_m, mx, sl2());
                else
                    moved = block_rows_max<1, NT>(sc, row_m, mx, sl2());
                if (moved)
                    block_move_base<1>(mx, row_m, row_l, alpha, sl2());
                if constexpr (BASE >= 4)
                    sm90_exp<NT>(sc, row_m, row_l, sl2());
                else
                    block_exp<1, NT>(sc, row_m, row_l, sl2());
                return moved;
            };
            if (n_blocks > 0) {
                /* v9: the pending tile's last P V goes out in this turn too, before S, so that
                 * its O is stored while S runs */
                ptx_mbarrier_wait(k_full(slot(0)), phase(0));
                /* SKIP_DEAD (a.skip_dead) under the causal mask: a consumer none of whose rows
                 * sees a key of the first block walked (the diagonal one: only that block can be
                 * wholly above a consumer's rows, since the next starts BN keys lower) issues
                 * no S for it and runs no softmax; its P is 0, as the masked S would give, so
                 * the P V issued with the next S (which stays unconditional) adds nothing and m,
                 * l stay as they were. At d 64 causal 2k on v7's tiles 5.6 % of the (consumer,
                 * block) pairs, 3.0 % at 4k. Turn and releases as on the other path. The wait,
                 * fence and softmax stay on the issuing side (`if (!dead0)` below): with the
                 * wait common to both sides, ptxas serialised the wgmmas (C7518). */
                const bool dead0 = SKIP_DEAD && a.skip_dead && !live_at(0);
                if (XT && pend) {
                    /* two straight paths: with the issue conditional, ptxas serialised the
                     * wgmmas (C7514, the store's reads of O under the S) */
                    ptx_mbarrier_wait(v_full(slot(-1)), phase(-1));
                    pack_p(sc, pa);
                    my_turn();
                    issue_pv(pa, slot(-1));
                    ptx_wgmma_commit();
                    issue_qk(sc, slot(0));
                    ptx_wgmma_commit();
                    pass_turn();
                    ptx_wgmma_wait<1>(); /* the P V done, S may still run */
                    fence_pv(pa);
                    release_kv(v_empty(slot(-1)));
                    store_pending();
                } else if (dead0) {
                    my_turn();
                    pass_turn();
#pragma unroll
                    for (int nt = 0; nt < NT; nt++)
#pragma unroll
                        for (int e = 0; e < 4; e++)
                            sc[0][nt][e] = 0.0f; /* P = 0 */
                    release_kv(k_empty(slot(0)));
                    release_q(0);
                } else {
                    my_turn();
                    issue_qk(sc, slot(0));
                    ptx_wgmma_commit();
                    pass_turn();
                }
                if (!dead0) {
                    ptx_wgmma_wait<0>();
                    fence_s(sc);
                    release_kv(k_empty(slot(0)));
                    release_q(0);
                    float alpha[1][2];
                    (void)softmax_s(0, alpha); /* O is still 0: nothing to rescale */
                }
            }
            for (int i = 1; i < n_blocks; i++) {
                const int s = slot(i), sp = slot(i - 1);
                const uint32_t ph = phase(i), php = phase(i - 1);
                ptx_mbarrier_wait(k_full(s), ph);
                ptx_mbarrier_wait(v_full(sp), php);
                pack_p(sc, pa); /* frees sc for S_i */
                my_turn();
                issue_qk(sc, s);
                ptx_wgmma_commit();
                issue_pv(pa, sp);
                ptx_wgmma_commit();
                pass_turn();
                /* S_i done, P V may still run (sm90abl overlap: both done) */
                ptx_wgmma_wait<SPLIT_WAIT ? 1 : 0>();
                fence_s(sc);
                release_kv(k_empty(s));
                release_q(i);
                float alpha[1][2];
                const bool moved = softmax_s(i, alpha);
                ptx_wgmma_wait<0>();
                fence_pv(pa);
                release_kv(v_empty(sp));
                if (moved)
                    block_rescale<1, DT>(acc, alpha);
            }
            if (!XT && n_blocks > 0)
                last_pv(n_blocks - 1);
        }

        if (!XT || n_blocks == 0) {
            float inv[2];
            store_rows(m0, b, h, inv);
            store_o(m0, b, h, inv);
        } else {
            /* v9: its last P V goes out with the next tile's first S, its O under that S;
             * O and that P divided by l now, so that nothing but (m0, b, h) waits for it */
            float inv[1][2];
            store_rows(m0, b, h, inv[0]);
            block_rescale<1, DT>(acc, inv);
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    sc[0][nt][e] *= inv[0][e / 2];
            reset_rows();
            if (ptx_thread_index() % 128 == 0)
                pend_at[0] = m0, pend_at[1] = b * a.Hq + h;
            pend = true;
        }
        if constexpr (XT) /* DYN: every tile takes a turn of Q's buffer */
            it = 4 * STAGES + (it + n_blocks) % (2 * STAGES) +
                 2 * STAGES * (((it / (2 * STAGES)) + 1) & 1);
        else
            it += n_blocks, tq += DYN || n_blocks > 0;
    } /* tiles */
    if (PINGPONG && cw == 0)
        my_turn(); /* takes the last consumer's last pass: no barrier is left half-arrived */
    if (TMA_O && ptx_thread_index() % 128 == 0)
        ptx_bulk_wait_group<0>(); /* the shared panel stays until the copy engine is done */
    if constexpr (MC)
        ptx_cluster_sync(); /* v8: the peer's last arrivals on this block's barriers are in */
#endif /* FLASHC_PTX_SM90A */
}

/* ---- host side: tensor maps --------------------------------------------------------------- */

/* The arguments of one make_map call, all of them (the key of the memo below). */
struct map_key {
    const void *ptr;
    int64_t B, S, H, D, st[3];
    int dt, rows;
};

/* The maps this host thread encoded last. A call encodes each map up to three times (the
 * dispatcher's supports() for flashc_attn_fwd's check and again for the run, then the launch),
 * and calls on the same buffers (a benchmark, a model's fixed activation buffers) encode the
 * same maps again; cuTensorMapEncodeTiled is a pure function of its arguments, so a map whose
 * arguments match an entry is copied from it. Only successful encodes are kept. */
struct map_memo {
    static constexpr int N = 8; /* q, k, v, o of two problems */
    map_key key[N];
    CUtensorMap map[N];
    int used = 0, next = 0;
};
static thread_local map_memo memo;

/* cuda_tma_map_bshd's map (tma_host.cuh: (D, S, H, B), or (D, S, H) for a varlen operand, B =
 * 0), through the memo above. */
static int make_map(CUtensorMap *m, flashc_dtype dt, const void *ptr, int64_t B, int64_t S,
                    int64_t H, int64_t D, const int64_t *st, int rows)
{
    map_key k;
    memset(&k, 0, sizeof k); /* padding too: keys compare by memcmp */
    k.ptr = ptr, k.B = B, k.S = S, k.H = H, k.D = D, k.dt = (int)dt, k.rows = rows;
    for (int i = 0; i < 3; i++)
        k.st[i] = st[i];
    for (int i = 0; i < memo.used; i++)
        if (memcmp(&memo.key[i], &k, sizeof k) == 0) {
            *m = memo.map[i];
            return 1;
        }
    if (!cuda_tma_map_bshd(m, dt, ptr, B, S, H, D, st, rows))
        return 0;
    memo.key[memo.next] = k;
    memo.map[memo.next] = *m;
    memo.next = (memo.next + 1) % map_memo::N;
    memo.used += memo.used < map_memo::N;
    return 1;
}

/* bm, bn: the kernel's Q tile and K/V block rows (the boxes of the Q and the K and V maps).
 * Varlen (cu_q set): 3-d maps over the packed rows, total_q and total_k of them (at least one,
 * which a map needs: with no rows no sequence has any, and nothing is loaded). */
static int make_maps(const attn_fwd_args *a, flashc_dtype dt, int bm, int bn, CUtensorMap *mq,
                     CUtensorMap *mk, CUtensorMap *mv)
{
    const int64_t Hkv = a->Hq / a->group;
    if (a->cu_q) {
        const int64_t tq = a->total_q > 1 ? a->total_q : 1, tk = a->total_k > 1 ? a->total_k : 1;
        return make_map(mq, dt, a->q, 0, tq, a->Hq, a->D, a->sq, bm) &&
               make_map(mk, dt, a->k, 0, tk, Hkv, a->D, a->sk, bn) &&
               make_map(mv, dt, a->v, 0, tk, Hkv, a->Dv, a->sv, bn);
    }
    return make_map(mq, dt, a->q, a->B, a->Sq, a->Hq, a->D, a->sq, bm) &&
           make_map(mk, dt, a->k, a->B, a->Sk, Hkv, a->D, a->sk, bn) &&
           make_map(mv, dt, a->v, a->B, a->Sk, Hkv, a->Dv, a->sv, bn);
}

/* Padded head dims (bench/RESULTS.md, "Issue 11: every head dim <= 128 on sm90 by TMA padding"
 * and its device run of 2026-12-04; "Issue 11: head dims 136-248 padded into the d 192 / 256
 * kernels"): the kernels that store O by TMA serve head dims D below their instance's with D % 8
 * == 0 (the instance of head dim I serves (I - 64, I], the table's head_dim_min): sm90v6, sm90v7,
 * sm90v9, sm90np at d 128 (its d 64 causal entry stores O directly, so sm90np pads at d 128
 * only, serving all or none of a head dim's cases), sm90v6h, sm90v6hnp, and sm90v6hw at d 192
 * (its d 256 kernel stores O directly). Nothing in the kernel changes: the tensor maps keep the
 * true inner dimension D (boxes of 64 columns), so the copy engine zero-fills the columns >= D of
 * Q, K and V in shared memory, where S = Q K^T is unchanged by the zeros and P V computes zero
 * columns, and the TMA store of O drops the columns >= D. D % 8 != 0 (rows pitched to 8
 * elements, which the copy engine's stride rule asks anyway): the loads zero-fill past any D,
 * but the copy engine's stores write whole 16-byte units (the H200 run of 2026-12-04 evening,
 * bench/gpu/s14_pad8.sh at 59e4c47: a map Dv wide wrote the caller's row padding up to the next
 * multiple of 8), so O's map stops at Dv rounded down to 8 (o_map_cols) and the consumers store
 * the last 1-7 columns from their accumulators (store_o). D < 8 stays with sm80.
 * FLASHC_CUDA_SM90_PAD (read once) names the instances that pad: "1" all, "0" none, or a comma
 * list of instance head dims ("128,192,256"); unset (or anything else), SM90_PAD_DEFAULT: the d
 * 128 instances (D 72-120: 1.65-1.78x sm80 at d 96, 2k and 4k, causal and not, on the H200;
 * 1.54-1.97x at d 96 / 112, 1k and 8k), the d 192 ones (D 136-184: 1.93-2.27x sm80 at d 136 /
 * 160, 1k-8k) and the d 256 ones (D 200-248: 2.09-2.47x at d 200 / 224), s11_fwd19.sh on the
 * H200, 2026-12-04 midday; but not the d 64 ones (d 32: 1.08x without the mask, 0.98-1.00x
 * under it). */
static int sm90_pad_bit(int head_dim) /* the instance's bit in a FLASHC_CUDA_SM90_PAD mask */
{
    return head_dim == 64 ? 1 : head_dim == 128 ? 2 : head_dim == 192 ? 4 : head_dim == 256 ? 8 : 0;
}
/* the default's bits: 2 = d 128 (D 72-120); + 4 = d 192 (D 136-184), + 8 = d 256 (D 200-248) */
enum { SM90_PAD_ALL = 15, SM90_PAD_DEFAULT = 14 };
static int sm90_pad_mask(void)
{
    static int value = -1;
    if (value < 0) {
        const char *e = getenv("FLASHC_CUDA_SM90_PAD");
        int m = e && strcmp(e, "1") == 0 ? SM90_PAD_ALL : 0;
        if (e && e[0] && !m) { /* "0", or a list of instance head dims */
            for (const char *c = e; m >= 0 && *c;) {
                char *end;
                const long d = strtol(c, &end, 10);
                const int bit = sm90_pad_bit((int)d), whole = end != c && (*end == ',' || !*end);
                m = whole && (bit || d == 0) ? m | bit : -1; /* -1: not such a list */
                c = *end ? end + 1 : end;
            }
        }
        value = e && e[0] && m >= 0 ? m : SM90_PAD_DEFAULT; /* racing first calls agree */
    }
    return value;
}
/* the kernels above, which store O by TMA: what a column past D (or Dv) may rely on */
static int sm90_pad_family(const attn_fwd_variant *v)
{
    return strcmp(v->family, "sm90v6") == 0 || strcmp(v->family, "sm90v7") == 0 ||
           strcmp(v->family, "sm90v9") == 0 || strcmp(v->family, "sm90v6h") == 0 ||
           strcmp(v->family, "sm90v6hnp") == 0 ||
           (strcmp(v->family, "sm90np") == 0 && v->head_dim == 128) ||
           (strcmp(v->family, "sm90v6hw") == 0 && v->head_dim == 192);
}
static int sm90_pads(const attn_fwd_variant *v, int mask)
{
    return (mask & sm90_pad_bit(v->head_dim)) && sm90_pad_family(v);
}

/* Dk != Dv (bench/RESULTS.md, "Issue 11: Dk != Dv on sm90"; attn.cu, dkdv_route): the same
 * zero fill serves a problem whose Q / K rows are D wide and V / O rows Dv wide, in the instance
 * of max(D, Dv): the maps of Q and K keep D, those of V and O keep Dv (make_maps), so S = Q K^T
 * sums D columns (the rest are zero), P V computes zero columns past Dv, and the TMA store drops
 * them; nothing in the kernel reads D or Dv. The same kernels as padding (sm90_pad_family); the
 * wider side takes the instance's head dim or a padded one as for D == Dv (sm90_pads), both D
 * and Dv multiples of 8. FLASHC_CUDA_SM90_DKDV, read on every call (so that a test or a benchmark
 * runs both routes in one process): "1" on, "0" off; unset (or anything else), SM90_DKDV_DEFAULT:
 * on since the H200 run of 2026-12-04 midday (s11_fwd20.sh: 192/128 bf16 at 2k and 8k, causal
 * and not, 2.30-2.55x the sm80 kernel's mods instance, 0.80-0.91x SDPA cuDNN). */
enum { SM90_DKDV_DEFAULT = 1 };
static int sm90_dkdv_enabled(void)
{
    const char *e = getenv("FLASHC_CUDA_SM90_DKDV");
    return e && strcmp(e, "1") == 0 ? 1 : e && strcmp(e, "0") == 0 ? 0 : SM90_DKDV_DEFAULT;
}

static int sm90_encodes(const attn_fwd_variant *v, const attn_problem *p, int kv_rows, int dyn,
                        int tma_o);

/* The inner dimension of O's tensor map: Dv, or Dv rounded down to 8 where Dv % 8 != 0 (the
 * copy engine's stores write whole 16-byte units; the kernel stores the rest, store_o). Dv < 8
 * gives 0, which no map encodes: those stay with sm80. */
static int64_t o_map_cols(int64_t dv) { return dv / 8 * 8; }

/* Beyond dtype and head dim (the table's fields): the chip the sm_90a code runs on, rows the
 * copy engine takes, the head dim (the instance's, or a padded one above; D != Dv as above), and
 * tensor maps that encode (tried here, so that "supported" and the run agree). */
static int sm90_supports_rows(const attn_fwd_variant *v, const attn_problem *p, int cc,
                              int vec16, int kv_rows)
{
    const int pad = sm90_pad_mask(); /* read at the first call, whatever its head dim */
    if (cc != 90 || !vec16)
        return 0;
    const int64_t d = p->D > p->Dv ? p->D : p->Dv; /* the dispatcher's: in v's range */
    if (d != v->head_dim && !sm90_pads(v, pad)) /* any D == Dv (o_map_cols); D != Dv below */
        return 0;
    if (p->D != p->Dv &&
        (p->D % 8 != 0 || p->Dv % 8 != 0 || !sm90_pad_family(v) || !sm90_dkdv_enabled()))
        return 0;
    /* the dynamic scheduler's kernels (v6*, v7, v9, and v8 / v8t under the mask, which run
     * v6's / v7's) take their tile counter from the stream's memory pool: on a device without
     * pools they are not offered, and the dispatcher goes on to v4w / v5, which need no memory */
    /* (sm90abl asks what v6 asks, whichever entry: every FLASHC_SM90_ABLATE value serves the
     * same problems; sm90np asks it of all its entries, v5's shape at d 64 causal too) */
    const int v9_abl = strncmp(v->family, "sm90v9", 6) == 0 ||
                       strcmp(v->family, "sm90abl") == 0 || strcmp(v->family, "sm90np") == 0;
    const int dyn = strncmp(v->family, "sm90v6", 6) == 0 || strcmp(v->family, "sm90v7") == 0 ||
                    v9_abl || (strncmp(v->family, "sm90v8", 6) == 0 && p->causal);
    /* v6, v7, v8 and v9 store O through a tensor map too */
    const int tma_o = strncmp(v->family, "sm90v6", 6) == 0 || strcmp(v->family, "sm90v7") == 0 ||
                      strncmp(v->family, "sm90v8", 6) == 0 || v9_abl;
    return sm90_encodes(v, p, kv_rows, dyn, tma_o);
}

/* The tensor maps of v's launch encode (Q, K, V with K/V boxes of kv_rows; O too where tma_o)
 * and, where dyn (the dynamic scheduler's tile counter), the device has memory pools. */
static int sm90_encodes(const attn_fwd_variant *v, const attn_problem *p, int kv_rows, int dyn,
                        int tma_o)
{
    attn_fwd_args a;
    memset(&a, 0, sizeof a);
    a.q = p->q, a.k = p->k, a.v = p->v;
    for (int i = 0; i < 3; i++)
        a.sq[i] = p->sq[i], a.sk[i] = p->sk[i], a.sv[i] = p->sv[i];
    a.B = (int)p->B, a.Sq = (int)p->Sq, a.Sk = (int)p->Sk, a.Hq = (int)p->Hq;
    a.group = (int)(p->Hq / p->Hkv), a.D = (int)p->D, a.Dv = (int)p->Dv;
    if (p->layout == ATTN_VARLEN) /* the maps of the launch's (make_maps) */
        a.cu_q = p->cu_q, a.cu_k = p->cu_k, a.total_q = (int)p->total_q,
        a.total_k = (int)p->total_k;
    CUtensorMap mq, mk, mv, mo;
    if (!make_maps(&a, v->dtype, v->block_q, kv_rows, &mq, &mk, &mv))
        return 0;
    if (dyn) {
        int dev = 0, pools = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, dev) != cudaSuccess ||
            !pools) {
            (void)cudaGetLastError();
            return 0;
        }
    }
    const int64_t ocols = o_map_cols(p->Dv);
    return !tma_o ||
           (ocols > 0 && make_map(&mo, v->dtype, p->o, p->B, p->Sq, p->Hq, ocols, p->so, 64));
}
static int sm90_supports(const attn_fwd_variant *v, const attn_problem *p, int cc, int vec16)
{
    return sm90_supports_rows(v, p, cc, vec16, v->block_k);
}

/* v6 and v6d: BN = 176 without the mask, 128 under it (the diagonal block wastes less of a
 * smaller block); sm90v6w takes 176 for both. */
static int sm90_supports_nc(const attn_fwd_variant *v, const attn_problem *p, int cc, int vec16)
{
    return !p->causal && sm90_supports(v, p, cc, vec16);
}
static int sm90_supports_c(const attn_fwd_variant *v, const attn_problem *p, int cc, int vec16)
{
    return p->causal && sm90_supports(v, p, cc, vec16);
}
/* sm90abl: which v6 stage FLASHC_SM90_ABLATE leaves out, read once; the names in the order of
 * the table's sm90abl entries (abl_index). A value that names none serves nothing. */
static const char *const sm90_abl_names[] = {"none",   "overlap", "pingpong", "dynamic", "persist",
                                             "stores", "bn128",   "s2d",      "s3d"};
static int sm90_abl_index(void)
{
    static int idx = -2;
    if (idx == -2) {
        const char *e = getenv("FLASHC_SM90_ABLATE");
        int k = -1;
        for (int i = 0; i < (int)(sizeof sm90_abl_names / sizeof sm90_abl_names[0]); i++)
            if (strcmp(e && e[0] ? e : "none", sm90_abl_names[i]) == 0)
                k = i;
        idx = k; /* racing first calls store the same value */
    }
    return idx;
}
const char *attn_fwd_sm90_ablate_names(void)
{
    return "none|overlap|pingpong|dynamic|persist|stores|bn128|s2d|s3d";
}
/* entry K of sm90abl: the one FLASHC_SM90_ABLATE names, without the mask; K = -1: v6's causal
 * kernel, which takes the masked problems whatever value is named (so that the family serves
 * every case of bf16 d 128), but none when the value names no entry */
template <int K>
static int sm90_supports_abl(const attn_fwd_variant *v, const attn_problem *p, int cc, int vec16)
{
    return (K < 0 ? p->causal && sm90_abl_index() >= 0 : !p->causal && sm90_abl_index() == K) &&
           sm90_supports(v, p, cc, vec16);
}

/* sm90np: under the causal mask from seqlen S (Sq and Sk), where the default changes */
template <int S>
static int sm90_supports_c_from(const attn_fwd_variant *v, const attn_problem *p, int cc,
                                int vec16)
{
    return p->Sq >= S && p->Sk >= S && sm90_supports_c(v, p, cc, vec16);
}

/* sm90np as the default (bench/RESULTS.md, "Issue 11: the defaults without ping-pong"): up to
 * seqlen T per (head dim, mask), the T that bench/gpu/np_table.py printed in the H200 run of
 * 2026-12-04 ~02:28 UTC (d 128: 4096 without the mask, 8192 under it; d 64: 0, never); each entry
 * from the seqlen FROM at which its kernel is the default's (v9 at d 128 causal from 4k, v7 at
 * d 64 causal from 2k), which it also checks when forced (where the default's thresholds do
 * not apply) */
constexpr int SM90_NP_D128_NC = 4096, SM90_NP_D128_C = 8192, SM90_NP_D64_NC = 0, SM90_NP_D64_C = 0;
template <int T, bool CAUSAL, int FROM, int UPTO>
static int sm90_supports_np_default(const attn_fwd_variant *v, const attn_problem *p, int cc,
                                    int vec16)
{
    return p->Sq <= T && p->Sk <= T && p->Sq >= FROM && p->Sk >= FROM &&
           (UPTO == 0 || p->Sq < UPTO || p->Sk < UPTO) && !p->causal == !CAUSAL &&
           sm90_supports(v, p, cc, vec16);
}

/* v8's pairs: non-causal, K/V boxes of half a block (each block of the pair loads one half) */
static int sm90_supports_pair(const attn_fwd_variant *v, const attn_problem *p, int cc,
                              int vec16)
{
    return !p->causal && sm90_supports_rows(v, p, cc, vec16, v->block_k / 2);
}

template <typename T, int D, int BN, int STAGES, int VER, bool MODS = false, bool VL = false>
static cudaError_t attn_fwd_sm90_launch(const attn_fwd_args *a, cudaStream_t stream)
{
    using L = sm90_smem<D, BN, STAGES, VER>;
    const flashc_dtype dt = std::is_same<T, __nv_bfloat16>::value ? FLASHC_BF16 : FLASHC_F16;
    CUtensorMap mq, mk, mv, mo;
    memset(&mo, 0, sizeof mo); /* read by VER 7 only */
    constexpr int BM = sm90_bm(VER);
    /* D != Dv: the direct stores of O would write D columns (sm90_supports_rows sends it
     * nothing but TMA-store kernels) */
    if (a->D != a->Dv && sm90_base(VER) < 7)
        return cudaErrorInvalidValue;
    /* masks and modifiers on the MODS instances only, varlen on the VL ones (attn.cu,
     * mods_route) */
    if (!a->mods != !MODS || !a->cu_q != !VL)
        return cudaErrorInvalidValue;
    /* the kernel's arguments: the caller's, with the rows the Q tiles move up by where attn.cu
     * asked for tiles aligned to the sequence's end (the kernel's q_shift: the plain causal
     * mask, not v8's pairs, MODS or VL) */
    /* The shift is rounded down to whole 64-row boxes (sm90_q_shift), so that with O by TMA
     * store (VER 7 on) a consumer's store box starts either at a row >= 0 or 64 or more rows
     * below 0 (not issued). A box partly below row 0 is not clipped there as it is past Sq: the
     * H200 run of 2026-12-05 (bench/gpu/s16_fwd24.sh, odd Sq) failed every TMA-store family
     * with the exact shift (1664 memcheck errors on sm90v7), while the direct-store families
     * (v5, v6d) and the loads of Q at negative rows passed. The bench's lengths need whole boxes
     * anyway (d 64 2k: 64 rows, 4k: 128). */
    attn_fwd_args ka = *a;
    ka.q_shift = a->cshift && a->causal && !MODS && !VL && !sm90_pair(VER)
                     ? (int)sm90_q_shift(a->Sq, BM)
                     : 0;
    if (!make_maps(a, dt, BM, sm90_pair(VER) ? BN / 2 : BN, &mq, &mk, &mv) ||
        (sm90_base(VER) >= 7 &&
         (o_map_cols(a->Dv) <= 0 ||
          !make_map(&mo, dt, a->o, a->B, a->Sq, a->Hq, o_map_cols(a->Dv), a->so, 64))))
        return cudaErrorInvalidValue; /* sm90_supports said yes: the driver changed its mind */
    void (*kernel)(const CUtensorMap, const CUtensorMap, const CUtensorMap, const attn_fwd_args,
                   const CUtensorMap, int *) =
        attn_fwd_sm90_kernel<T, D, BN, STAGES, VER, MODS, VL>;
    /* The kernel's dynamic shared memory limit, raised once per device (a bit per ordinal
     * below 64) rather than on every call. Should the device's context have been reset since
     * (cudaDeviceReset drops it), the launch fails and is retried once after raising it again;
     * v8's pairs ask the occupancy of the raised kernel first, so they raise it every call. */
    static std::atomic<uint64_t> raised{0};
    auto raise = [&]() {
        return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)L::LAUNCH);
    };
    int dev = 0;
    cudaError_t err = cudaGetDevice(&dev);
    if (err != cudaSuccess)
        return err;
    const uint64_t bit = dev >= 0 && dev < 64 ? 1ull << dev : 0;
    const bool was_raised = !sm90_pair(VER) && (raised.load(std::memory_order_relaxed) & bit);
    if (!was_raised) {
        if ((err = raise()) != cudaSuccess)
            return err;
        raised.fetch_or(bit, std::memory_order_relaxed);
    }
    int64_t blocks = (int64_t)((a->Sq + BM - 1) / BM) * a->B * a->Hq;
    if (blocks > 0x7fffffff)
        return cudaErrorInvalidConfiguration;
    if constexpr (sm90_pair(VER)) {
        /* v8: pairs of thread blocks in clusters of two, as many pairs as fit at once (the
         * runtime's count: a GPC with an odd number of free multiprocessors leaves one idle) */
        const int64_t pairs = (int64_t)((a->Sq + BM - 1) / BM + 1) / 2 * a->B * a->Hq;
        cudaLaunchAttribute attr[1] = {};
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = 2;
        attr[0].val.clusterDim.y = 1;
        attr[0].val.clusterDim.z = 1;
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(2, 1, 1);
        cfg.blockDim = dim3(sm90_threads(VER), 1, 1);
        cfg.dynamicSmemBytes = L::LAUNCH;
        cfg.stream = stream;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        int fit = 0;
        if ((err = cudaOccupancyMaxActiveClusters(&fit, (const void *)kernel, &cfg)) !=
            cudaSuccess)
            return err;
        if (fit < 1)
            return cudaErrorInvalidConfiguration;
        if (pairs == 0)
            return cudaSuccess; /* Sq = 0 or B Hq = 0: refused before, nothing to do */
        cfg.gridDim = dim3((unsigned)(2 * (pairs < fit ? pairs : fit)), 1, 1);
        int *no_ctr = NULL;
        err = cudaLaunchKernelEx(&cfg, kernel, mq, mk, mv, ka, mo, no_ctr);
        return err == cudaSuccess ? cudaGetLastError() : err;
    }
    if (sm90_persist(VER)) { /* persistent: one thread block per multiprocessor at most */
        int sms = 0;
        if ((err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) !=
            cudaSuccess)
            return err;
        blocks = blocks < sms ? blocks : sms;
    }
    /* v6's tile counter: its own 4 bytes per call, allocated and zeroed in stream order (no
     * host sync, capturable in a CUDA graph), so that calls on concurrent streams never share
     * one; the kernel's first tiles are blockIdx.x, the counter hands out the rest. */
    int *ctr = NULL;
    if (sm90_dyn(VER)) {
        if ((err = cuda_scratch_alloc((void **)&ctr, sizeof(int), stream)) != cudaSuccess)
            return err;
        if ((err = cudaMemsetAsync(ctr, 0, sizeof(int), stream)) != cudaSuccess) {
            (void)cuda_scratch_free(ctr, stream);
            return err;
        }
    }
    kernel<<<(unsigned)blocks, sm90_threads(VER), L::LAUNCH, stream>>>(mq, mk, mv, ka, mo, ctr);
    err = cudaGetLastError();
    if (err != cudaSuccess && was_raised && raise() == cudaSuccess) {
        /* nothing ran (a launch error is synchronous): the counter is still zero */
        kernel<<<(unsigned)blocks, sm90_threads(VER), L::LAUNCH, stream>>>(mq, mk, mv, ka, mo,
                                                                           ctr);
        err = cudaGetLastError();
    }
    if (ctr) {
        const cudaError_t ferr = cuda_scratch_free(ctr, stream);
        if (err == cudaSuccess)
            err = ferr;
    }
    if (VL && err == cudaSuccess) /* varlen: the rows of no sequence */
        err = attn_fwd_clear_unowned(a, dt, stream);
    return err;
}

/* What the dispatcher picks without FLASHC_CUDA_KERNEL (bench/RESULTS.md, H200, 2026-12-01,
 * "sm90 v3-v5"): every sm90 version was faster than sm80 at d 64 and 128 from seqlen 1k; of
 * them v4w was the fastest from 4k (up to 1.00x cuDNN at d128 16k, 1.07x causal) and v5 (the
 * persistent grid) at 1k (455 vs 435 TFLOP/s at d128, 1.2x sm80 at d64 causal), while v5 fell
 * behind at 16k causal (the static tile walk leaves the multiprocessors unevenly loaded). So:
 * v4w where Sq, Sk >= 2048 (the first match in this table wins), v5 from 1024, sm80 below
 * (512 was not measured). v1, v3 and v4 stay for FLASHC_CUDA_KERNEL and the ladder.
 * Then (bench/RESULTS.md, "session 5 (helper fwd7)", round 1, H200 2026-12-02): with the tile
 * handoff fixed (racecheck, synccheck, memcheck clean) v6 was at or above v5 / v4w in every d128
 * cell from 1k (+14 % at 1k, +8 % at 4k non-causal, +13 % / +12 % causal 1k / 4k, level at 16k)
 * and v7 at d 64 in every cell but causal 1k (non-causal +9 % at 1k, +18 % at 4k, +16 % at 16k;
 * causal +14 % at 4k, +5 % at 16k; causal 1k -8 % against v5, +24 % against v4w, which v7
 * replaces from 2k). So, first in the table: v7 at d 64 from 1024 without the mask and from 2048
 * under it, v6 at d 128 from 1024; v4w and v5 keep d 64 causal 1k-2k and nothing else.
 * Then ("Issue 11: sm90 forward v9", round 1, H200 2026-12-03): v9 at d 128 under the causal
 * mask from 4096 (1.06x / 1.02x v6 at 4k / 16k; below 1.02x elsewhere, so v6 stays there). */
#define SM90_VARIANT_S(TN, T, FAM, D, BM, BN, ST, VER, DEF, MINSEQ, SUP)                          \
    {"attn_fwd_" #TN "_" FAM "_d" #D "_" #BM "x" #BN, FAM, TN##_DTYPE_SM90, D - 63, D, 90, BM, BN, \
     DEF, MINSEQ, SUP, attn_fwd_sm90_launch<T, D, BN, ST, VER>}
#define SM90_VARIANT(TN, T, FAM, D, BN, ST, VER, DEF, MINSEQ)                                     \
    SM90_VARIANT_S(TN, T, FAM, D, 128, BN, ST, VER, DEF, MINSEQ, sm90_supports)
#define bf16_DTYPE_SM90 FLASHC_BF16
#define f16_DTYPE_SM90 FLASHC_F16
#define SM90_FAMILY(FAM, D, BN, ST, VER, DEF, MINSEQ)                                              \
    SM90_VARIANT(bf16, __nv_bfloat16, FAM, D, BN, ST, VER, DEF, MINSEQ),                           \
        SM90_VARIANT(f16, __half, FAM, D, BN, ST, VER, DEF, MINSEQ)
#define SM90_FAMILY_S(FAM, D, BM, BN, ST, VER, DEF, MINSEQ, SUP)                                   \
    SM90_VARIANT_S(bf16, __nv_bfloat16, FAM, D, BM, BN, ST, VER, DEF, MINSEQ, SUP),                \
        SM90_VARIANT_S(f16, __half, FAM, D, BM, BN, ST, VER, DEF, MINSEQ, SUP)
/* sm90abl's entry K (FLASHC_SM90_ABLATE=NAME): bf16, d 128, without the mask */
#define SM90_ABL(K, NAME, BN, ST, VER)                                                             \
    {"attn_fwd_bf16_sm90abl_" #NAME "_d128_128x" #BN, "sm90abl", FLASHC_BF16, 65, 128, 90, 128,   \
     BN, 0, 0, sm90_supports_abl<K>, attn_fwd_sm90_launch<__nv_bfloat16, 128, BN, ST, VER>}
const attn_fwd_variant attn_fwd_sm90_variants[] = {
    /* d 256 and 192 (bench/RESULTS.md, "Issue 11: sm90 forward at d 192/256", device run of
     * 2026-12-04 ~06:57 UTC, bench/gpu/s10_fwd18.sh): every family 2.2-2.6x sm80 from 1k (the
     * shortest measured); the fastest, sm90v6hnp at d 256 (0.97-1.24x cuDNN) and sm90v6hw at
     * d 192 (0.90-1.09x cuDNN), from 1024, sm80 below. */
    SM90_FAMILY_S("sm90v6hnp", 256, 128, 64, 2, sm90_ver(7, SM90_ABL_PINGPONG), 1, 1024,
                  sm90_supports),
    SM90_FAMILY_S("sm90v6hw", 192, 128, 80, 2, 7, 1, 1024, sm90_supports),
    /* sm90np, the defaults without ping-pong, first where the device run's rule put them (the
     * SM90_NP_* thresholds above); the same kernels as its forced-only entries below */
    SM90_FAMILY_S("sm90np", 128, 128, 128, 2, sm90_ver(11, SM90_ABL_PINGPONG), 1, 4096,
                  (sm90_supports_np_default<SM90_NP_D128_C, true, 4096, 0>)),
    SM90_FAMILY_S("sm90np", 128, 128, 128, 2, sm90_ver(7, SM90_ABL_PINGPONG), 1, 1024,
                  (sm90_supports_np_default<SM90_NP_D128_C, true, 1024, 4096>)),
    SM90_FAMILY_S("sm90np", 128, 128, 176, 2, sm90_ver(7, SM90_ABL_PINGPONG), 1, 1024,
                  (sm90_supports_np_default<SM90_NP_D128_NC, false, 1024, 0>)),
    SM90_FAMILY_S("sm90np", 64, 192, 128, 2, sm90_ver(8, SM90_ABL_PINGPONG), 1, 1024,
                  (sm90_supports_np_default<SM90_NP_D64_NC, false, 1024, 0>)),
    SM90_FAMILY_S("sm90np", 64, 192, 128, 2, sm90_ver(8, SM90_ABL_PINGPONG), 1, 2048,
                  (sm90_supports_np_default<SM90_NP_D64_C, true, 2048, 0>)),
    SM90_FAMILY_S("sm90np", 64, 128, 128, 3, sm90_ver(5, SM90_ABL_PINGPONG), 1, 1024,
                  (sm90_supports_np_default<SM90_NP_D64_C, true, 1024, 2048>)),
    /* v9 (VER 11) at d 128 under the causal mask from 4096, before v6's entry (the first match
     * wins): bench/RESULTS.md, "Issue 11: sm90 forward v9", round 1 (H200, 2026-12-03, ~19:00
     * UTC, bench/gpu/s6_fwd8.sh): v9 / v6 = 1.061 at causal 4k and 1.022 at 16k, but 1.015 at
     * 2k and 0.956 at 1k, and 0.97-1.00 without the mask, where v6 stays. */
    SM90_FAMILY_S("sm90v9", 128, 128, 128, 2, 11, 1, 4096, sm90_supports_c),
    /* v7 (VER 8): v6 with 3 consumers, BM = 192, d = 64 only (O and S of 128 keys fit 160
     * registers; at d = 128 they would not). The default from seqlen 512, both masks, since the
     * H100 run of 2026-12-06 (bench/gpu/s19_fwd64.sh, bench/RESULTS.md "Session of 2026-12-06,
     * morning"; with HGEVEN and SKIPDEAD on): 1.33x / 1.12x the default then (sm80 / v5) under
     * the mask at 512 / 1k, 1.37x (sm80) without it at 512, level at 2k causal and 1k
     * non-causal, where it was the default already; each other family 0.71-1.24x v7's figure */
    SM90_FAMILY_S("sm90v7", 64, 192, 128, 2, 8, 1, 512, sm90_supports_nc),
    SM90_FAMILY_S("sm90v7", 64, 192, 128, 2, 8, 1, 512, sm90_supports_c),
    /* v6 (VER 7): the dynamic tile scheduler and O by TMA store; v6d (VER 6): the scheduler
     * alone (direct stores); v6w: v6 with 176-key blocks under the causal mask too. */
    SM90_FAMILY_S("sm90v6", 128, 128, 176, 2, 7, 1, 1024, sm90_supports_nc),
    SM90_FAMILY_S("sm90v6", 128, 128, 128, 2, 7, 1, 1024, sm90_supports_c),
    SM90_FAMILY("sm90v4w", 64, 176, 2, 4, 1, 2048),
    SM90_FAMILY("sm90v4w", 128, 176, 2, 4, 1, 2048),
    SM90_FAMILY("sm90v5", 64, 128, 3, 5, 1, 1024),
    SM90_FAMILY("sm90v5", 128, 128, 3, 5, 1, 1024),
    SM90_FAMILY("sm90", 64, 128, 2, 1, 0, 0),
    SM90_FAMILY("sm90", 128, 128, 2, 1, 0, 0),
    SM90_FAMILY("sm90v3", 64, 128, 2, 3, 0, 0),
    SM90_FAMILY("sm90v3", 128, 128, 2, 3, 0, 0),
    SM90_FAMILY("sm90v4", 64, 128, 3, 4, 0, 0),
    SM90_FAMILY("sm90v4", 128, 128, 3, 4, 0, 0),
    SM90_FAMILY_S("sm90v6", 64, 128, 176, 2, 7, 0, 0, sm90_supports_nc),
    SM90_FAMILY_S("sm90v6", 64, 128, 128, 2, 7, 0, 0, sm90_supports_c),
    SM90_FAMILY_S("sm90v6d", 64, 128, 176, 2, 6, 0, 0, sm90_supports_nc),
    SM90_FAMILY_S("sm90v6d", 128, 128, 176, 2, 6, 0, 0, sm90_supports_nc),
    SM90_FAMILY_S("sm90v6d", 64, 128, 128, 2, 6, 0, 0, sm90_supports_c),
    SM90_FAMILY_S("sm90v6d", 128, 128, 128, 2, 6, 0, 0, sm90_supports_c),
    SM90_FAMILY("sm90v6w", 64, 176, 2, 7, 0, 0),
    SM90_FAMILY("sm90v6w", 128, 176, 2, 7, 0, 0),
    /* v6s: v6's scheduler with 128-key blocks in a 3-stage ring and direct stores of O (VER 6;
     * the staged O does not fit beside 3 stages at d 128), both masks: the shape of cuDNN's
     * d128 kernel on the H200 profile (132 x 384 threads, 232 KB of shared memory) */
    SM90_FAMILY("sm90v6s", 64, 128, 3, 6, 0, 0),
    SM90_FAMILY("sm90v6s", 128, 128, 3, 6, 0, 0),
    /* v6n: v6 with 128-key blocks without the mask too (no partial block at 1k: 8 x 128) */
    SM90_FAMILY("sm90v6n", 64, 128, 2, 7, 0, 0),
    SM90_FAMILY("sm90v6n", 128, 128, 2, 7, 0, 0),
    /* v8 (VER 9): v6's kernel (O by TMA store) in clusters of two thread blocks on adjacent Q
     * tiles, each K/V block loaded half by each and multicast to both, tiles (pairs) in a
     * static order; non-causal only (a pair under the mask would walk unequal blocks), v6's
     * kernel under the mask, so that the family serves every case of its head dims */
    SM90_FAMILY_S("sm90v8", 64, 128, 176, 2, 9, 0, 0, sm90_supports_pair),
    SM90_FAMILY_S("sm90v8", 128, 128, 176, 2, 9, 0, 0, sm90_supports_pair),
    SM90_FAMILY_S("sm90v8", 64, 128, 128, 2, 7, 0, 0, sm90_supports_c),
    SM90_FAMILY_S("sm90v8", 128, 128, 128, 2, 7, 0, 0, sm90_supports_c),
    /* v8t (VER 10, d = 64): the same pairs on v7's shape (3 consumers, BM = 192); v7's kernel
     * under the mask */
    SM90_FAMILY_S("sm90v8t", 64, 192, 128, 2, 10, 0, 0, sm90_supports_pair),
    SM90_FAMILY_S("sm90v8t", 64, 192, 128, 2, 8, 0, 0, sm90_supports_c),
    /* v9 (VER 11): v6 with the tile boundary overlapped (the last P V of a tile issued with
     * the next tile's first S, O stored under it) and the next Q prefetched into L2; v6's
     * blocks (176 keys without the mask, 128 under it; its default entry, d 128 causal, is
     * at the top) */
    SM90_FAMILY_S("sm90v9", 64, 128, 176, 2, 11, 0, 0, sm90_supports_nc),
    SM90_FAMILY_S("sm90v9", 128, 128, 176, 2, 11, 0, 0, sm90_supports_nc),
    SM90_FAMILY_S("sm90v9", 64, 128, 128, 2, 11, 0, 0, sm90_supports_c),
    /* sm90abl (bf16, d 128; bench/RESULTS.md, "Issue 11: leave-one-out"): the default kernel
     * without the mask, v6 (VER 7, 176-key blocks, 2 stages), with one stage left out, chosen
     * by FLASHC_SM90_ABLATE; v6's causal kernel under the mask. Four are instances of their
     * own (sm90_ver(7, mask)); the others are exactly existing kernels: stores =
     * v6d, bn128 = v6n, and s2d / s3d (128-key blocks, direct stores, 2 / 3
     * stages: v6d's causal instance and v6s) the ring depth where a third slot fits. */
    SM90_ABL(0, none, 176, 2, 7),
    SM90_ABL(1, overlap, 176, 2, sm90_ver(7, SM90_ABL_OVERLAP)),
    SM90_ABL(2, pingpong, 176, 2, sm90_ver(7, SM90_ABL_PINGPONG)),
    SM90_ABL(3, dynamic, 176, 2, sm90_ver(7, SM90_ABL_DYNAMIC)),
    SM90_ABL(4, persist, 176, 2, sm90_ver(7, SM90_ABL_PERSIST)),
    SM90_ABL(5, stores, 176, 2, 6),
    SM90_ABL(6, bn128, 128, 2, 7),
    SM90_ABL(7, s2d, 128, 2, 6),
    SM90_ABL(8, s3d, 128, 3, 6),
    SM90_ABL(-1, causal, 128, 2, 7), /* v6 under the mask, whatever the value */
    /* sm90np (bench/RESULTS.md, "Issue 11: the defaults without ping-pong"): for each problem
     * the sm90 kernel the dispatcher picks (by the thresholds above; below them, where sm80
     * runs, the entry of the nearest threshold), without the consumers' turns. 9 instances of
     * their own (bf16 d 128 without the mask is sm90abl's pingpong). */
    SM90_FAMILY_S("sm90np", 128, 128, 128, 2, sm90_ver(11, SM90_ABL_PINGPONG), 0, 0,
                  sm90_supports_c_from<4096>),
    SM90_FAMILY_S("sm90np", 128, 128, 128, 2, sm90_ver(7, SM90_ABL_PINGPONG), 0, 0,
                  sm90_supports_c),
    SM90_FAMILY_S("sm90np", 128, 128, 176, 2, sm90_ver(7, SM90_ABL_PINGPONG), 0, 0,
                  sm90_supports_nc),
    SM90_FAMILY_S("sm90np", 64, 192, 128, 2, sm90_ver(8, SM90_ABL_PINGPONG), 0, 0,
                  sm90_supports_nc),
    SM90_FAMILY_S("sm90np", 64, 192, 128, 2, sm90_ver(8, SM90_ABL_PINGPONG), 0, 0,
                  sm90_supports_c_from<2048>),
    SM90_FAMILY_S("sm90np", 64, 128, 128, 3, sm90_ver(5, SM90_ABL_PINGPONG), 0, 0,
                  sm90_supports_c),
    /* sm90v6h (d 192 and 256; bench/RESULTS.md, "Issue 11: sm90 forward at d 192/256"): v6
     * (VER 7) on 64-key blocks, 2 stages, both masks; sm90v6hnp the same without ping-pong
     * (its d 256 kernel is the default from 1k: the entry at the top, which a forced
     * sm90v6hnp takes at every length). */
    SM90_FAMILY_S("sm90v6h", 256, 128, 64, 2, 7, 0, 0, sm90_supports),
    SM90_FAMILY_S("sm90v6h", 192, 128, 64, 2, 7, 0, 0, sm90_supports),
    SM90_FAMILY_S("sm90v6hnp", 192, 128, 64, 2, sm90_ver(7, SM90_ABL_PINGPONG), 0, 0,
                  sm90_supports),
    /* sm90v6hw: FlashAttention-3's d 256 block, 80 keys, 2 stages; at d 256 the staged O no
     * longer fits beside them (Q 64 KB + K / V 4 x 40 KB = 224 KB), so v6d (VER 6: direct
     * stores of O), at d 192 v6 (VER 7; Q 48 + K / V 120 + O 48 KB: the default from 1k, the
     * entry at the top, which a forced sm90v6hw takes at every length) */
    SM90_FAMILY_S("sm90v6hw", 256, 128, 80, 2, 6, 0, 0, sm90_supports),
};
const int attn_fwd_sm90_variant_count =
    (int)(sizeof attn_fwd_sm90_variants / sizeof attn_fwd_sm90_variants[0]);

/* ---- masks and modifiers (attn.cu, mods_route; FLASHC_CUDA_SM90_MODS, the default) -----------
 * Dense problems with a window, softcap or ALiBi (causal folded into the key range; D != Dv as
 * for plain problems) on v6's kernel (VER 7: the dynamic scheduler, O by TMA store) with MODS
 * set, one instance per head dim and dtype, each in a shape whose consumers keep everything in
 * their 232 registers (ptxas -v, CUDA 13.0): 128-key blocks at d 64 and 128, 80 at d 192
 * (sm90v6hw's), 64 at d 256 (sm90v6h's). Spilled and not used: d 64 on v7's shape (3 consumers
 * at 160 registers: 212 bytes) or on 176-key blocks (52 bytes), d 256 on 80-key blocks (v6d, 56
 * bytes). Every D % 8 == 0 of an instance's range is padded in (nothing in the kernel reads D).
 * Varlen: the "sm90vl" entries below (FLASHC_CUDA_SM90_VARLEN). */
template <int VER>
static int sm90_supports_mods(const attn_fwd_variant *v, const attn_problem *p, int cc, int vec16)
{
    constexpr int TMA_O = sm90_base(VER) >= 7;
    if (cc != 90 || !vec16 || p->layout != ATTN_DENSE)
        return 0;
    const int64_t d = p->D > p->Dv ? p->D : p->Dv; /* the dispatcher's: in v's range */
    if (d != v->head_dim && d % 8 != 0)
        return 0;
    if (p->D != p->Dv && (p->D % 8 != 0 || p->Dv % 8 != 0 || !TMA_O || !sm90_dkdv_enabled()))
        return 0;
    return sm90_encodes(v, p, v->block_k, 1, TMA_O);
}
#define SM90_MODS_F(TN, T, FAM, D, BN, VER)                                                        \
    {"attn_fwd_" #TN "_" FAM "_d" #D "_128x" #BN, FAM, TN##_DTYPE_SM90, D - 63, D, 90, 128, BN, 0, \
     0, sm90_supports_mods<VER>, attn_fwd_sm90_launch<T, D, BN, 2, VER, true>}
#define SM90_MODS_FAMILY(D, BN, VER)                                                               \
    SM90_MODS_F(bf16, __nv_bfloat16, "sm90mods", D, BN, VER),                                     \
        SM90_MODS_F(f16, __half, "sm90mods", D, BN, VER)

/* Varlen (attn.cu, mods_route: FLASHC_CUDA_SM90_VARLEN; the kernel's VL): the mods instances'
 * shapes (128-key blocks at d 64 and 128, 80 at d 192, 64 at d 256) on v6d's kernel (VER 6: the
 * dynamic scheduler, O by guarded direct stores, which also frees the staged O's shared memory),
 * with or without windows, softcap and ALiBi. Packed rows the copy engine takes (strides
 * multiples of 8 elements: vec16), the same head dims as the dense instances (D, Dv multiples of
 * 8 below the instance's; D != Dv with FLASHC_CUDA_SM90_DKDV on, the narrower side zero-filled
 * and the stores cut at Dv). */
static int sm90_supports_vl(const attn_fwd_variant *v, const attn_problem *p, int cc, int vec16)
{
    if (cc != 90 || !vec16 || p->layout != ATTN_VARLEN)
        return 0;
    const int64_t d = p->D > p->Dv ? p->D : p->Dv;
    if ((p->D != d && p->D % 8 != 0) || (p->Dv != d && p->Dv % 8 != 0) || d % 8 != 0)
        return 0;
    if (p->D != p->Dv && !sm90_dkdv_enabled())
        return 0;
    return sm90_encodes(v, p, v->block_k, 1, 0);
}
#define SM90_VL_F(TN, T, D, BN)                                                                    \
    {"attn_fwd_" #TN "_sm90vl_d" #D "_128x" #BN, "sm90vl", TN##_DTYPE_SM90, D - 63, D, 90, 128,    \
     BN, 0, 0, sm90_supports_vl, attn_fwd_sm90_launch<T, D, BN, 2, 6, true, true>}
#define SM90_VL_FAMILY(D, BN) SM90_VL_F(bf16, __nv_bfloat16, D, BN), SM90_VL_F(f16, __half, D, BN)
const attn_fwd_variant attn_fwd_sm90_mods_variants[] = {
    SM90_MODS_FAMILY(64, 128, 7),
    /* bf16 d 128: v6 without ping-pong (the H200 run of 2026-12-04 evening, s12_fwd21.sh:
     * 1.00-1.08x v6's speed in the 6 d 128 cells, >= 1.03x in 4 of them; v9np, 0.98-1.13x, had
     * one cell below; bench/RESULTS.md); fp16 keeps v6 (not timed) */
    SM90_MODS_F(bf16, __nv_bfloat16, "sm90mods", 128, 128, sm90_ver(7, SM90_ABL_PINGPONG)),
    SM90_MODS_F(f16, __half, "sm90mods", 128, 128, 7),
    SM90_MODS_FAMILY(192, 80, 7),
    SM90_MODS_FAMILY(256, 64, 7),
    /* alternatives at bf16 d 128 (FLASHC_CUDA_SM90_MODS=v6, v9, v9np: attn.cu): v6 with
     * ping-pong (the default until the run above), v9 (VER 11: the tile boundary overlapped, which
     * a window's short tiles may need more than the plain problem: at window 1024 a tile is 9
     * blocks), v9 without ping-pong (1.02-1.13x v6 there but 0.98x at softcap 2k); the same
     * 40 / 232 registers, no spills */
    SM90_MODS_F(bf16, __nv_bfloat16, "sm90mods-v6", 128, 128, 7),
    SM90_MODS_F(bf16, __nv_bfloat16, "sm90mods-v9", 128, 128, 11),
    SM90_MODS_F(bf16, __nv_bfloat16, "sm90mods-v9np", 128, 128, sm90_ver(11, SM90_ABL_PINGPONG)),
    SM90_VL_FAMILY(64, 128),
    SM90_VL_FAMILY(128, 128),
    SM90_VL_FAMILY(192, 80),
    SM90_VL_FAMILY(256, 64),
};
const int attn_fwd_sm90_mods_variant_count =
    (int)(sizeof attn_fwd_sm90_mods_variants / sizeof attn_fwd_sm90_mods_variants[0]);
