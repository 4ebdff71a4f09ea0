/*
 * attn_decode.cu — the CUDA kernel of every attention problem the dense prefill kernels do not
 * serve: the KV-cache entry point (decode, Sq = 1..16, and chunked prefill against a cache),
 * varlen, and dense problems with a window, softcap, ALiBi, a split request or Dk != Dv.
 *
 * GQA packing. The rows of a tile are (query row, head of the KV group) pairs: packed row
 * R = i * group + (h mod group) of KV head hk, so a decode step of a group of 8 query heads is
 * one 16-row tile and the group's K and V are read once, not once per query head. A thread
 * block owns 16 packed rows of one (sequence, KV head) and one split of their keys.
 *
 * Keys. Rows of a tile are sorted by query row, so their key ranges [lo_i, hi_i) (window,
 * causal, bottom-right per sequence) move monotonically: the tile visits the union
 * [lo(first row), hi(last row)), cut into num_splits equal chunks of 16-key blocks, and split
 * s of that union goes to thread block (.., s). Inside a block its 4 warps take every 4th
 * 16-key block: each warp runs its own double-buffered cp.async pipeline (K and V of block
 * n + 4 arrive while block n is multiplied), with __syncwarp as its only barrier, its own
 * online softmax over its keys, and the 4 partial states are merged through shared memory at
 * the end. Every key row is looked up on its own (attn_kv_loc): a paged cache of any page size
 * costs one table read per 16 keys and lane, no alignment of pages to blocks is needed.
 *
 * Scores are moved to the log2 domain before the softmax: x = scale * q.k (softcap: softcap
 * tanh(x / softcap); ALiBi: - slope |a_i - j|), times log2(e), then -inf outside the row's
 * range. So masks and modifiers are per element, on 8 scores a lane per block, which a
 * memory-bound kernel does not notice.
 *
 * Split-KV. With one split the block writes o and lse itself. With more, each split writes its
 * normalised float32 partial O and its LSE to the workspace, (splits, B, Hq, Sq, Dv) and
 * (splits, B, Hq, Sq), and attn_decode_merge combines them on the device (o = sum_s
 * exp(lse_s - L) o_s, L = log sum_s exp(lse_s); empty splits have lse = -inf and are skipped).
 *
 * CUDA graphs. The launch shape depends only on the maxima: grid (B * Hkv * ceil(Sq_max * group
 * / 16), splits) with splits from params.num_splits or, for 0, from B * Hkv, the tile count,
 * Sk_max (for device caches: the capacity, S_cache or max_pages * page_size) and the SM count
 * (splits_of: whole waves of this kernel's blocks per SM, or FlashAttention-2's rule);
 * the actual lengths (cache_seqlens, cu_seqlens) are read by the kernels. Nothing synchronises
 * with the host; with a workspace nothing is allocated (else the scratch pool, scratch.cu, on
 * the stream).
 *
 * Index tensors on the device cannot be checked by the host: an entry outside its range (a page
 * >= num_pages, a cache_batch_idx >= the cache's rows, a length past the capacity) is clamped
 * to nothing: such keys read as absent and appended rows past the capacity are dropped; memory
 * outside the tensors is never touched. Keys a tile loads but a row may not see (inside the
 * tile's union range) are masked to P = 0; a non-finite V there would still reach that row
 * through 0 * inf, so such keys must hold finite values (keys past a sequence's length, the
 * usual garbage of a cache, are never loaded: they are zero-filled).
 *
 * The append (k_new, v_new into the cache at cache_seqlens[b]) runs as its own kernel first,
 * on the same stream, so the attention kernel sees the new keys.
 *
 * Rows that are not 16-byte aligned (in any of q, k, v, o: a head dim that is not a multiple of
 * 8 in a packed tensor, a stride that is not a multiple of 8 elements, a pointer that is only
 * element-aligned) cannot be named by a 16-byte cp.async or store. Such problems run the
 * DEC_VAR_ELEM instances (var_of, for every head dim): the base loader with each 16-byte chunk
 * of a Q, K or V row read as 2-byte elements (none past the row's last, zeros past D / Dv, as
 * the copies' zero-fill) and stored to the same swizzled chunk of shared memory, and o stored
 * element by element; the products, masks, split partials and merges are the aligned path's.
 * Those loads are synchronous, so a warp no longer overlaps its next block's loads with its
 * products (the SM's other warps still do): a path that makes such rows work, not a fast one.
 * The append copies by 16 bytes or by elements as each row's addresses allow, the merges'
 * stores to o are element-wise already.
 *
 * Merge variants (FLASHC_DECODE_MERGE, read at every call so one process can compare them; the
 * default is "auto" since 2026-12-03: v3 (v4 since the evening of 2026-12-03: the same bits, one
 * L2 round trip fewer) while its grid is <= 4 blocks a SM, else pdl, 1-3% ahead of pdl at B 1
 * and 4 on 2026-12-02; the failure that held it back was the test's,
 * bench/RESULTS.md, decode5; pdl was the default from the run of 2026-12-01 17:05 UTC):
 *   v1     attn_decode_merge, one warp a row, each lane walking the splits one dependent load
 *          after another: at B 1 (32 rows, 28-42 splits) that chain of L2 round trips is the
 *          suspected fixed cost of 15-40 us a call (bench/RESULTS.md, issue 13);
 *   v2     attn_decode_merge2, one block a row: the LSEs of all splits in one round trip, then
 *          each thread sums its columns over a quarter of the splits with 8 loads in flight,
 *          the quarters combined in a fixed order (dec_merge_rows);
 *   v3     attn_decode_merge3 as a programmatic dependent (as pdl): a block per (row, 32
 *          columns), 16 split groups, so each thread has its few partial loads in flight at once;
 *   v4     v3 with each thread's partial loads issued together with the LSE loads (decode6;
 *          auto's merge for small grids): one L2 round trip after the split kernel instead of
 *          two, v3's bits (v3 stays as the reference of that check: no other merge sums in
 *          its order);
 *   pdl    v2 launched as a programmatic dependent of the split kernel (sm_90): its blocks are
 *          resident and waiting (griddepcontrol.wait) when the last split block retires, so the
 *          launch gap goes; other devices launch it as v2.
 * Removed on 2026-12-04 (bench/RESULTS.md, decode13; the code is in git at commit a9d5878):
 * the fused merges, where the last split block of a tile to arrive (an arrival counter per tile
 * in the workspace, zeroed by a kernel first) merges the tile's rows with no merge launch:
 * fused (dec_merge_rows in that block; 0.91-1.04x auto in three runs) and fused2 (the partials
 * staged in that block's shared memory by cp.async, one L2 round trip; decode12, H200
 * 2026-12-04: geomean 0.977x auto at 32/8 heads, 0.987x at 16/8, 0.94-0.97x at 1 x 32k).
 *
 * The lean loader of the split kernel (FLASHC_DECODE_KERNEL unset or lean: the default since
 * 2026-12-03, measured 1.02-1.11x the base loader at B 1..16 x 4k..128k on 2026-12-02, paged
 * within 3% of contiguous; split or base the historical loader; lean3, lean5 opt-in;
 * head dims <= 128, any sm_80+ device; larger head dims take the base instance). The Nsight profile
 * of 2026-12-01 (1 x 32k: 67% DRAM, 0.47 instructions issued a cycle and scheduler, ~1000
 * instructions a warp per 16-key block) and the SASS read here showed that dec_load_kv's 64-bit
 * address arithmetic, redone for K and for V at every row of every pass, is most of a warp's
 * instructions: a warp's own serial work, not the memory system, set its rate. dec_load_kv_lean
 * computes each key's offset once (one lane a key, then shuffles) and adds it to per-lane
 * pointers fixed for the block's life. lean3 gives each warp 3 stages (two blocks in flight
 * while it multiplies one; 100 KB a block at d 128: 2 blocks an SM), lean5 5 stages (164 KB, one
 * block an SM: cuDNN's shape at B 16, one block a (b, kv head) and no merge). Measured
 * (round 1): the lean loader gains 2-11%, less than its instruction count suggests: with it the
 * split kernel is no longer issue-bound, and lean3's extra loads in flight gain nothing more.
 * wide (opt-in, decode11) is lean with 12 warps a block (196 KB at d 128, one block an SM): an
 * SM's 12 warps on one (b, KV head), so at B >= 16 the split rules give one split, no partials
 * and no merge (cuDNN's grid), where lean5's 4 warps an SM were issue-bound. The default takes
 * wide for decode at <= 4096 keys where the tiles are at least half the SMs; autow (opt-in,
 * decode13) also past 4096 keys where lean's count would not be the deep part's (var_of).
 * Removed on 2026-12-03 after losing at every shape measured (bench/RESULTS.md): lean-pf (the
 * L2::256B hint, 1-6% slower than lean) and the ring kernels attn_decode_ring / ring-cpa (a
 * producer warp feeding 4 consumers through an mbarrier ring: 0.2-0.8x cuDNN, flat across
 * shapes; the single producer warp's instruction stream was the limit).
 * Removed on the evening of 2026-12-03 (bench/RESULTS.md, decode6 / decode7; the code is in git
 * at commit 188e3cf): leanef (lean with the K / V copies under the L2 evict-first policy: +7% at
 * 1 x 32k under the bench's dirty flush only, 0.94-0.98x at 4x-64x 32k and 1 x 128k, no gain
 * under a clean flush), leanpf (lean with L2 prefetches of each warp's first blocks before the
 * length is read: 0.93x lean at 1 x 4k, 1.00x at 1 x 32k) and merge v5 (v4 reading
 * cache_seqlens before griddepcontrol.wait: 0.99-1.01x v4).
 *
 * Split rule (FLASHC_DECODE_SPLITS, read at every call): fill (the default since 2026-12-03),
 * which splits tiles that are at most half the slots into whole waves of k blocks a SM, at most
 * 33 splits (splits_of); fa2, FlashAttention-2's rule, the default before; or deep (opt-in,
 * decode11): at least 5 blocks a slot where every split keeps >= 8192 keys (64 x 32k: 4 splits
 * instead of fa2's 2); where that depth needs splits under 8192 keys, fill for small grids and
 * whole waves for large ones (64 x 4k: 3 splits).
 */
#include "attn_cuda.cuh"
#include "scratch.cuh"
#include "attn_fwd_common.cuh"
#include "attn_mma_sm80.cuh"
#include "ptx.cuh"

#include <math.h>
#include <stdio.h>
#include <string.h>

namespace {

constexpr int DEC_WARPS = 4;   /* warps per block, each with its own key blocks      */
constexpr int DEC_BM = 16;     /* packed rows per block (one m16 MMA tile)           */
constexpr int DEC_BN = 16;     /* keys per warp block                                */
constexpr int DEC_STAGES = 2;  /* K/V buffers per warp                               */
constexpr int DEC_MAX_SPLITS = 256;
constexpr int DEC_MERGE_DEPTH = 8; /* partial loads a merging thread keeps in flight         */
constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;

/* The problem as the kernels take it (by value). Strides in elements, [0] batch (or page),
 * [1] row, [2] head; features are contiguous. */
struct dec_args {
    const void *q, *k, *v;
    void *o;
    float *lse;
    int64_t sq[3], sk[3], sv[3], so[3], slse[3];
    int layout;                   /* attn_layout                                         */
    const int32_t *cu_q, *cu_k;   /* varlen (B + 1)                                      */
    const int32_t *seqlens;       /* kvcache (B) or NULL                                  */
    const int32_t *kv_batch;      /* kvcache contiguous (B) or NULL                       */
    const int32_t *kv_start;      /* kvcache contiguous: cache_leftpad (B) or NULL        */
    const int32_t *pages;         /* kvcache paged (B, max_pages) or NULL                */
    int64_t pages_stride;
    int page_size, num_pages, kv_rows, capacity;
    int B, Sq, Sk, Hq, Hkv, group, D, Dv, s_new;
    int64_t wl, wr;               /* window, -1 = unbounded                              */
    float scale, scale_log2, softcap, inv_softcap;
    int modified;                 /* softcap or ALiBi: the general score path            */
    const float *alibi;
    int64_t salibi[2];
    int m_tiles;                  /* ceil(Sq * group / 16)                               */
    int splits;
    float *part_o;                /* (splits, B, Hq, Sq, Dv) float32 when splits > 1     */
    float *part_lse;              /* (splits, B, Hq, Sq)                                 */
    /* append */
    const void *k_new, *v_new;
    int64_t sknew[3], svnew[3];
    int total_q, total_k;         /* varlen: rows of q, o and of k, v                    */
    int merge;                    /* DEC_MERGE_*: how split partials become o and lse    */
};

enum { DEC_MERGE_V1 = 1, DEC_MERGE_V2 = 2, DEC_MERGE_PDL = 3, DEC_MERGE_V3 = 5,
       DEC_MERGE_AUTO = 6 /* host only: v4 or pdl (cuda_attn_decode) */, DEC_MERGE_V4 = 7 };
/* FLASHC_DECODE_KERNEL: the split kernel's loader ("split" names the base loader) */
enum { DEC_KERNEL_LEAN = 4, DEC_KERNEL_LEAN3 = 5, DEC_KERNEL_BASE = 7, DEC_KERNEL_LEAN5 = 8,
       DEC_KERNEL_WIDE = 9, DEC_KERNEL_AUTO = 10 /* unset: lean, or wide (var_of) */,
       DEC_KERNEL_AUTOW = 11 /* auto with wide's region past 4096 keys (var_of; decode13) */ };
/* The split kernel's instances (its VAR template argument): the base loader (FLASHC_DECODE_KERNEL
 * = base, and every head dim > 128) and the lean loaders (lean, the default; lean3, lean5; head
 * dims <= 128 only); ELEM, the base loader with element-wise copies for rows that are not
 * 16-byte aligned (every head dim, whatever FLASHC_DECODE_KERNEL says; var_of). */
enum { DEC_VAR_BASE = 0, DEC_VAR_LEAN = 1, DEC_VAR_LEAN3 = 2, DEC_VAR_LEAN5 = 4, DEC_VAR_WIDE = 8,
       DEC_VAR_ELEM = 16 };
__host__ __device__ constexpr int dec_var_stages(int var)
{
    return var == DEC_VAR_LEAN3 ? 3 : var == DEC_VAR_LEAN5 ? 5 : DEC_STAGES;
}
/* Warps a block of the split kernel: wide (decode11) is lean with 12 warps, the default's 3
 * blocks x 4 warps of an SM in one block, so one block a (b, KV head) needs no split and no
 * merge where the tiles fill the SMs (cuDNN's grid; lean5 had it with 4 warps an SM). */
__host__ __device__ constexpr int dec_var_warps(int var)
{
    return var == DEC_VAR_WIDE ? 12 : DEC_WARPS;
}

/* o's row width, for attn_clear_unowned (attn_fwd_common.cuh). */
__device__ __forceinline__ int unowned_width(const dec_args &a) { return a.Dv; }

/* kvcache: the cache row of sequence b's first key (cache_leftpad, clamped into [0, its
 * cache_seqlens]: device index tensors are not validated); 0 without. */
__device__ __forceinline__ int dec_kv_start(const dec_args &a, int b)
{
    return a.kv_start ? min(max(a.kv_start[b], 0), max(a.seqlens[b], 0)) : 0;
}

/* Lengths of sequence b; device index tensors are clamped into range. */
__device__ __forceinline__ void dec_seqlens(const dec_args &a, int b, int *sq, int *sk)
{
    if (a.layout == ATTN_VARLEN) {
        const int q0 = a.cu_q[b], q1 = a.cu_q[b + 1], k0 = a.cu_k[b], k1 = a.cu_k[b + 1];
        *sq = q0 >= 0 && q1 <= a.total_q ? min(max(q1 - q0, 0), a.Sq) : 0;
        /* paged: cu_k gives lengths only (Sk: at most the block-table row's capacity) */
        *sk = a.pages || (k0 >= 0 && k1 <= a.total_k) ? min(max(k1 - k0, 0), a.Sk) : 0;
    } else if (a.layout == ATTN_KVCACHE) {
        *sq = a.Sq;
        *sk = a.seqlens ? max(min(max(a.seqlens[b], 0) + a.s_new, a.capacity) - dec_kv_start(a, b),
                              0)
                        : a.Sk;
    } else {
        *sq = a.Sq;
        *sk = a.Sk;
    }
}

/* The first q-side row of sequence b (varlen: cu_seqlens_q[b]; else 0, with the batch stride
 * doing the work). */
__device__ __forceinline__ int dec_qbase(const dec_args &a, int b)
{
    return a.layout == ATTN_VARLEN ? a.cu_q[b] : 0;
}

/* Where key j of sequence b lives: element offset x * s[0] + y * s[1] of a k-side tensor, as
 * (x, y); x = -1 when the index tensors point outside the cache (the key reads as absent). */
__device__ __forceinline__ void dec_kv_loc(const dec_args &a, int b, int j, int *x, int *y)
{
    if (a.pages) { /* a paged KV cache or paged varlen */
        const int pg = a.pages[(int64_t)b * a.pages_stride + j / a.page_size];
        *x = pg >= 0 && pg < a.num_pages ? pg : -1;
        *y = j % a.page_size;
    } else if (a.layout == ATTN_KVCACHE) {
        const int r = a.kv_batch ? a.kv_batch[b] : b;
        *x = r >= 0 && r < a.kv_rows ? r : -1;
        *y = dec_kv_start(a, b) + j;
    } else if (a.layout == ATTN_VARLEN) {
        *x = 0;
        *y = a.cu_k[b] + j;
    } else {
        *x = b;
        *y = j;
    }
}

/* Key range [lo, hi) of query row i of a sequence (sq, sk) (internal.h, attn_key_range). */
__device__ __forceinline__ void dec_key_range(const dec_args &a, int sq, int sk, int i, int *lo,
                                              int *hi)
{
    const int64_t p = (int64_t)i + sk - sq;
    int64_t l = 0, h = sk;
    if (a.wl >= 0 && p - a.wl > l)
        l = p - a.wl;
    if (a.wr >= 0 && p + a.wr + 1 < h)
        h = p + a.wr + 1;
    if (h < l)
        h = l;
    *lo = (int)l;
    *hi = (int)h;
}

/* The element-wise form of ptx_cp_async_16_n (DEC_VAR_ELEM: rows that are not 16-byte aligned,
 * so no 16-byte copy may name them): elements src[0 .. n - 1] (n = 0..8) by 2-byte loads, none
 * past the n-th (nothing is read for n = 0), zeros after, stored as one 16-byte chunk at dst,
 * where the copy would have put them. Synchronous: the data is in shared memory when this
 * returns, so the cp.async groups the kernel commits and waits for are empty, and its barriers
 * (__syncwarp, __syncthreads) order these stores before the reads as they order the copies. */
template <typename T>
__device__ __forceinline__ void dec_copy_elems(T *dst, const T *src, int n)
{
    const unsigned short *e = (const unsigned short *)src;
    uint32_t w[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const uint32_t lo = 2 * k < n ? e[2 * k] : 0u;
        const uint32_t hi = 2 * k + 1 < n ? e[2 * k + 1] : 0u;
        w[k] = lo | hi << 16;
    }
    *(uint4 *)dst = make_uint4(w[0], w[1], w[2], w[3]);
}

/* VEC: 16-byte cp.async copies (rows 16-byte aligned); else dec_copy_elems. */
template <typename T, int DI, int DS, bool VEC = true>
__device__ __forceinline__ void dec_load_kv(const dec_args &a, T *sK, T *sV, int b, int hk,
                                            int j0, int khi, int lane)
{
    constexpr int CPR = DI / 8;     /* 16-byte chunks per row   */
    constexpr int RPP = 32 / CPR;   /* rows per pass of a warp  */
    static_assert(32 % CPR == 0 || CPR % 32 == 0, "chunks per row");
    /* lane l looks up key j0 + (l mod 16); the lanes of a pass fetch it by shuffle */
    int x = -1, y = 0;
    const int jj = j0 + (lane & 15);
    if (jj < khi)
        dec_kv_loc(a, b, jj, &x, &y);
    const T *kb = (const T *)a.k + (int64_t)hk * a.sk[2];
    const T *vb = (const T *)a.v + (int64_t)hk * a.sv[2];
    if constexpr (RPP >= 1 && CPR <= 32) {
        const int c = lane % CPR;
        const int kbytes = 2 * min(8, max(0, a.D - 8 * c));
        const int vbytes = 2 * min(8, max(0, a.Dv - 8 * c));
#pragma unroll
        for (int p = 0; p < DEC_BN / RPP; p++) {
            const int r = lane / CPR + p * RPP;
            const int xr = __shfl_sync(0xffffffffu, x, r);
            const int yr = __shfl_sync(0xffffffffu, y, r);
            const bool ok = xr >= 0;
            const T *ks = ok && kbytes ? kb + (int64_t)xr * a.sk[0] + (int64_t)yr * a.sk[1] + 8 * c
                                       : (const T *)a.k;
            const T *vs = ok && vbytes ? vb + (int64_t)xr * a.sv[0] + (int64_t)yr * a.sv[1] + 8 * c
                                       : (const T *)a.v;
            if constexpr (VEC) {
                ptx_cp_async_16_n(ptx_smem_addr(sK + swz<DS>(r, c)), ks, ok ? kbytes : 0);
                ptx_cp_async_16_n(ptx_smem_addr(sV + swz<DS>(r, c)), vs, ok ? vbytes : 0);
            } else {
                dec_copy_elems(sK + swz<DS>(r, c), ks, ok ? kbytes / 2 : 0);
                dec_copy_elems(sV + swz<DS>(r, c), vs, ok ? vbytes / 2 : 0);
            }
        }
    }
}

/* The lean variants' per-lane constants of dec_load_kv_lean, fixed for a block's life. */
struct dec_lane_kv {
    const char *kl, *vl; /* this lane's chunk of key row 0 of head hk: k + hk sk[2] + 8c (bytes) */
    int kbytes, vbytes;  /* bytes of that chunk inside D / Dv (0: a padded column)             */
    uint32_t soff;       /* byte offset of the lane's chunk of pass 0 in a swizzled K / V tile  */
    bool same;           /* K and V share their batch / row strides: one offset serves both    */
};

template <typename T, int DI, int DS>
__device__ __forceinline__ dec_lane_kv dec_lane_setup(const dec_args &a, int hk, int lane)
{
    constexpr int CPR = DI / 8;
    dec_lane_kv L;
    const int c = lane % CPR, r0 = lane / CPR;
    L.kbytes = 2 * min(8, max(0, a.D - 8 * c));
    L.vbytes = 2 * min(8, max(0, a.Dv - 8 * c));
    const T *k = (const T *)a.k, *v = (const T *)a.v;
    L.kl = (const char *)(L.kbytes ? k + (int64_t)hk * a.sk[2] + 8 * c : k);
    L.vl = (const char *)(L.vbytes ? v + (int64_t)hk * a.sv[2] + 8 * c : v);
    L.soff = (uint32_t)(swz<DS>(r0, c) * (int)sizeof(T));
    L.same = a.sv[0] == a.sk[0] && a.sv[1] == a.sk[1];
    return L;
}

/* dec_load_kv with the address arithmetic taken out of the copy loop (the lean variants:
 * dec_lean_lookup, then dec_lean_issue).
 * dec_load_kv recomputes x sk[0] + y sk[1] + hk sk[2] in 64 bits for K and for V at every row
 * of every pass (about 85 instructions a pass at d 128, 8 passes a block: most of the split
 * kernel's instructions, the reason its warps stream only ~2.5 GB/s each). Here each lane finds
 * its own key (lane mod 16) once, as one byte offset for K (and V when their strides differ),
 * -1 when absent; a pass gets its row's offset by shuffle and adds it to the lane's fixed
 * chunk pointer. The swizzled shared address of pass p is the lane's pass-0 address with
 * rows + RPP p: since the lane's row in pass 0 is < RPP, chunk ^ row = (chunk ^ row0) ^
 * (RPP p mod 8), a constant XOR, and the row offset is a constant too. */
/* The lean loader's lookup half: where this lane's key j0 + (lane mod 16) lives, as the raw
 * (x, y) of dec_kv_loc before x is checked (*x = -1 past khi). The kernel runs it one block ahead
 * of the copies and dec_lean_issue checks and uses x only then, so the index tensors' loads
 * (block table, cache_batch_idx, cu_seqlens) are in flight while the warp multiplies instead of
 * stalling it in front of its next copies. */
__device__ __forceinline__ void dec_lean_lookup(const dec_args &a, int b, int j0, int khi,
                                                int lane, int *x, int *y)
{
    const int jj = j0 + (lane & 15);
    const bool in = jj < khi;
    if (a.pages) {
        *x = in ? a.pages[(int64_t)b * a.pages_stride + jj / a.page_size] : -1;
        *y = jj % a.page_size;
    } else if (a.layout == ATTN_KVCACHE) {
        *x = in ? (a.kv_batch ? a.kv_batch[b] : b) : -1;
        *y = dec_kv_start(a, b) + jj;
    } else if (a.layout == ATTN_VARLEN) {
        *x = in ? 0 : -1;
        *y = a.cu_k[b] + jj;
    } else {
        *x = in ? b : -1;
        *y = jj;
    }
}

/* The copy half: K and V rows of the 16 keys that lanes 0..15 looked up (x, y from
 * dec_lean_lookup; x checked here as dec_kv_loc checks it) into the swizzled tiles at shared
 * addresses sK, sV. */
template <typename T, int DI, int DS>
__device__ __forceinline__ void dec_lean_issue(const dec_args &a, const dec_lane_kv &L,
                                               uint32_t sK, uint32_t sV, int x, int y, int lane)
{
    constexpr int CPR = DI / 8;   /* 16-byte chunks per row   */
    constexpr int RPP = 32 / CPR; /* rows per pass of a warp  */
    static_assert(CPR <= 32 && 32 % CPR == 0, "chunks per row");
    const int lim = a.pages ? a.num_pages : a.layout == ATTN_KVCACHE ? a.kv_rows : 0x7fffffff;
    int64_t ok = -1, ov = -1;
    if (x >= 0 && x < lim) {
        ok = ((int64_t)x * a.sk[0] + (int64_t)y * a.sk[1]) * (int64_t)sizeof(T);
        ov = L.same ? ok : ((int64_t)x * a.sv[0] + (int64_t)y * a.sv[1]) * (int64_t)sizeof(T);
    }
#pragma unroll
    for (int p = 0; p < DEC_BN / RPP; p++) {
        const int r = lane / CPR + p * RPP;
        const int64_t okr = __shfl_sync(0xffffffffu, ok, r);
        const int64_t ovr = L.same ? okr : __shfl_sync(0xffffffffu, ov, r);
        const uint32_t so = (L.soff ^ (uint32_t)(((RPP * p) & 7) * 16)) +
                            (uint32_t)(RPP * p * DS * (int)sizeof(T));
        /* absent key: src-size 0 from the lane's own chunk of row 0 (L.kl is k itself for a
         * padded column, whose size is 0 anyway), so nothing outside the tensors is named */
        const void *ks = L.kl + (okr >= 0 ? okr : 0);
        const void *vs = L.vl + (ovr >= 0 ? ovr : 0);
        const int kn = okr >= 0 ? L.kbytes : 0, vn = ovr >= 0 ? L.vbytes : 0;
        ptx_cp_async_16_n(sK + so, ks, kn);
        ptx_cp_async_16_n(sV + so, vs, vn);
    }
}

/* Four consecutive float32 partials (columns 4c .. 4c + n - 1), read through L2: they were
 * written by other blocks (L1 is not coherent). vec: Dv % 4 == 0, so the address is 16-byte
 * aligned (the partials' rows start 64-byte aligned). */
__device__ __forceinline__ float4 dec_ld4(const float *p, bool vec, int n)
{
    if (vec)
        return __ldcg((const float4 *)p);
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    v.x = __ldcg(p);
    if (n > 1)
        v.y = __ldcg(p + 1);
    if (n > 2)
        v.z = __ldcg(p + 2);
    if (n > 3)
        v.w = __ldcg(p + 3);
    return v;
}

/* acc += w * v, skipping an empty split (w = 0: its o is not read into the sum, so NaN there
 * cannot leak), as attn_decode_merge does. */
__device__ __forceinline__ void dec_fma4(float4 &acc, float w, const float4 &v)
{
    if (w != 0.0f) {
        acc.x = fmaf(w, v.x, acc.x), acc.y = fmaf(w, v.y, acc.y);
        acc.z = fmaf(w, v.z, acc.z), acc.w = fmaf(w, v.w, acc.w);
    }
}

/* sum over s = g, g + G, .. < S of w[s] * partial s (4 columns at po, sstride floats between
 * splits): DEC_MERGE_DEPTH loads in flight, the last batch predicated (no serial remainder),
 * the sum in split order. */
template <bool VEC>
__device__ __forceinline__ float4 dec_sum_splits(const float *po, int64_t sstride, const float *w,
                                                 int g, int G, int S, int n)
{
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int s = g; s < S; s += DEC_MERGE_DEPTH * G) {
        float4 v[DEC_MERGE_DEPTH];
#pragma unroll
        for (int u = 0; u < DEC_MERGE_DEPTH; u++)
            v[u] = s + u * G < S ? dec_ld4(po + (int64_t)(s + u * G) * sstride, VEC, n)
                                 : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int u = 0; u < DEC_MERGE_DEPTH; u++)
            if (s + u * G < S)
                dec_fma4(acc, w[s + u * G], v[u]);
    }
    return acc;
}

/* o[0 .. n - 1] = acc * inv, rounded once (n = 1..4). */
template <typename T>
__device__ __forceinline__ void dec_store4(T *o, const float4 &acc, float inv, int n)
{
    o[0] = T(acc.x * inv);
    if (n > 1)
        o[1] = T(acc.y * inv);
    if (n > 2)
        o[2] = T(acc.z * inv);
    if (n > 3)
        o[3] = T(acc.w * inv);
}

/* Merges the split partials of nr packed rows m0 .. m0 + nr - 1 of sequence b (packed row R is
 * query row R / group of head hbase + R % group) into o and lse. Called by all 128 threads of a
 * block (it synchronises them); sw: shared memory of at least nr * splits + 2 * nr + 4 floats
 * plus 128 float4 (16-byte aligned). The order of every sum is fixed by (nr, Dv, splits)
 * alone: split s of column chunk c always lands in the same thread's sum at the same place,
 * and the G partial sums of a chunk are added in group order, so the result is deterministic.
 *   1. every (row, split) LSE at once (one L2 round trip);
 *   2. per row (a warp each) M = max, w_s = exp(lse_s - M), L = sum w_s (shuffle trees);
 *   3. thread = (split group g of G, row, chunk of 4 columns): the sum over s = g, g + G, ..
 *      with DEC_MERGE_DEPTH independent loads in flight; G = 128 / (rows x chunks) when that
 *      is > 1 (v2 / pdl: one row, 32 chunks at Dv 128: G = 4). */
template <typename T>
__device__ __forceinline__ void dec_merge_rows(const dec_args &a, int b, int m0, int hbase, int nr,
                                               float *sw)
{
    const int tid = (int)threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int S = a.splits;
    const int64_t nrows = (int64_t)a.B * a.Hq * a.Sq;
    const int qbase = dec_qbase(a, b);
    for (int x = tid; x < nr * S; x += DEC_WARPS * 32) {
        const int r = x / S, s = x % S, R = m0 + r;
        const int64_t prow = ((int64_t)b * a.Hq + hbase + R % a.group) * a.Sq + R / a.group;
        sw[x] = __ldcg(a.part_lse + (int64_t)s * nrows + prow);
    }
    __syncthreads();
    float *sinv = sw + nr * S, *slse = sinv + nr;
    float4 *red = (float4 *)(sw + (nr * S + 2 * nr + 3) / 4 * 4);
    for (int r = warp; r < nr; r += DEC_WARPS) {
        float M = -INFINITY;
        for (int s = lane; s < S; s += 32)
            M = fmaxf(M, sw[r * S + s]);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
        float L = 0.0f;
        for (int s = lane; s < S; s += 32) {
            const float l = sw[r * S + s];
            const float w = l == -INFINITY ? 0.0f : expf(l - M);
            sw[r * S + s] = w;
            L += w;
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            L += __shfl_xor_sync(0xffffffffu, L, o);
        if (lane == 0) {
            sinv[r] = L > 0.0f ? 1.0f / L : 0.0f;
            slse[r] = L > 0.0f ? M + logf(L) : -INFINITY;
        }
    }
    __syncthreads();
    const int C4 = (a.Dv + 3) / 4, pairs = nr * C4;
    const int G = max(1, min(S, DEC_WARPS * 32 / pairs));
    const bool vec = a.Dv % 4 == 0;
    const int64_t sstride = nrows * a.Dv; /* floats from one split's partials to the next */
    for (int x = tid; x < pairs * G; x += DEC_WARPS * 32) {
        const int g = x / pairs, pr = x % pairs, r = pr / C4, c = pr % C4, R = m0 + r;
        const int i = R / a.group, h = hbase + R % a.group;
        const int n = min(4, a.Dv - 4 * c);
        const float *po = a.part_o + (((int64_t)b * a.Hq + h) * a.Sq + i) * a.Dv + 4 * c;
        const float *w = sw + r * S;
        const float4 acc = vec ? dec_sum_splits<true>(po, sstride, w, g, G, S, n)
                               : dec_sum_splits<false>(po, sstride, w, g, G, S, n);
        if (G > 1) {
            red[x] = acc;
        } else {
            dec_store4((T *)a.o + (int64_t)b * a.so[0] + (int64_t)(qbase + i) * a.so[1] +
                           (int64_t)h * a.so[2] + 4 * c,
                       acc, sinv[r], n);
        }
    }
    if (G > 1) {
        __syncthreads();
        for (int pr = tid; pr < pairs; pr += DEC_WARPS * 32) {
            const int r = pr / C4, c = pr % C4, R = m0 + r;
            const int i = R / a.group, h = hbase + R % a.group;
            const int n = min(4, a.Dv - 4 * c);
            float4 acc = red[pr];
            for (int gg = 1; gg < G; gg++) {
                const float4 v = red[gg * pairs + pr];
                acc.x += v.x, acc.y += v.y, acc.z += v.z, acc.w += v.w;
            }
            dec_store4((T *)a.o + (int64_t)b * a.so[0] + (int64_t)(qbase + i) * a.so[1] +
                           (int64_t)h * a.so[2] + 4 * c,
                       acc, sinv[r], n);
        }
    }
    if (a.lse)
        for (int r = tid; r < nr; r += DEC_WARPS * 32) {
            const int R = m0 + r, i = R / a.group, h = hbase + R % a.group;
            a.lse[(int64_t)b * a.slse[0] + (int64_t)h * a.slse[1] +
                  (int64_t)(qbase + i) * a.slse[2]] = slse[r];
        }
}

/* Dynamic shared memory of a split kernel block: Q and the warps' K / V stages, or (reused at
 * the end) the warps' partial states. */
template <typename T, int DI, int STG = DEC_STAGES, int NW = DEC_WARPS>
__host__ __device__ constexpr size_t dec_smem_bytes()
{
    constexpr int DS = (DI + 63) / 64 * 64;
    constexpr size_t tiles = (size_t)(DEC_BM + NW * STG * 2 * DEC_BN) * DS * sizeof(T);
    constexpr size_t merge = (size_t)DEC_BM * DS * sizeof(T) +
                             (size_t)NW * DEC_BM * (DI + 2) * sizeof(float);
    return tiles > merge ? tiles : merge;
}

/* One block: 16 packed rows (m_tile) of KV head hk of sequence b, split blockIdx.y.
 *   T   __nv_bfloat16 or __half; DI the instance's head dim (a multiple of 64, >= D and Dv;
 *   the columns past D / Dv are zero in shared memory and never stored). */
template <typename T, int DI, int VAR>
__global__ void __launch_bounds__(dec_var_warps(VAR) * 32) attn_decode_kernel(const dec_args a)
{
    constexpr bool VEC = VAR != DEC_VAR_ELEM;           /* 16-byte rows: cp.async, uint4 o   */
    constexpr bool LEAN = VAR != DEC_VAR_BASE && VEC;   /* dec_load_kv_lean                  */
    constexpr int STG = dec_var_stages(VAR);            /* K/V buffers a warp                */
    constexpr int NW = dec_var_warps(VAR);              /* warps, each its own key blocks    */
    constexpr int DS = (DI + 63) / 64 * 64;
    constexpr int DT = DI / 8;
    constexpr uint32_t ROWB = DS * sizeof(T);
    constexpr int TILE = DEC_BN * DS; /* elements of one K or V buffer */
    static_assert(ROWB % 128 == 0, "swz_step needs 128-byte rows");

    extern __shared__ __align__(128) uint4 smem_u4[];
    T *sQ = (T *)smem_u4;
    T *sKV = sQ + DEC_BM * DS;

    const int tid = (int)threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;
    const int mt = (int)(blockIdx.x % (unsigned)a.m_tiles);
    const int bh = (int)(blockIdx.x / (unsigned)a.m_tiles);
    const int b = bh / a.Hkv, hk = bh % a.Hkv;
    const int split = (int)blockIdx.y;
    if (a.merge == DEC_MERGE_PDL || a.merge == DEC_MERGE_V3 || a.merge == DEC_MERGE_V4)
        ptx_griddep_launch_dependents(); /* the merge may take free slots from now on */

    int sq, sk;
    dec_seqlens(a, b, &sq, &sk);
    const int rows = sq * a.group;
    const int m0 = mt * DEC_BM;
    if (m0 >= rows) /* uniform: rows past this sequence's length belong to no query */
        return;
    const int qbase = dec_qbase(a, b);

    /* the union of the tile's key ranges, and this split's share of its 16-key blocks */
    int klo, khi, lo_tmp, hi_tmp;
    dec_key_range(a, sq, sk, m0 / a.group, &klo, &hi_tmp);
    dec_key_range(a, sq, sk, (min(m0 + DEC_BM, rows) - 1) / a.group, &lo_tmp, &khi);
    const int nblk = khi > klo ? (khi - klo + DEC_BN - 1) / DEC_BN : 0;
    const int per = (nblk + a.splits - 1) / a.splits;
    const int blk_begin = split * per, blk_end = min(nblk, blk_begin + per);

    /* Q: the 16 packed rows, gathered from their (row, head) */
    {
        constexpr int CPR = DI / 8;
        for (int idx = tid; idx < DEC_BM * CPR; idx += NW * 32) {
            const int r = idx / CPR, c = idx % CPR;
            const int R = m0 + r;
            int bytes = 0;
            const T *src = (const T *)a.q;
            if (R < rows) {
                const int i = R / a.group, h = hk * a.group + R % a.group;
                bytes = 2 * min(8, max(0, a.D - 8 * c));
                if (bytes)
                    src = (const T *)a.q + (int64_t)b * a.sq[0] + (int64_t)(qbase + i) * a.sq[1] +
                          (int64_t)h * a.sq[2] + 8 * c;
            }
            if constexpr (VEC)
                ptx_cp_async_16_n(ptx_smem_addr(sQ + swz<DS>(r, c)), src, bytes);
            else
                dec_copy_elems(sQ + swz<DS>(r, c), src, bytes / 2);
        }
        ptx_cp_async_commit();
    }

    /* this thread's two rows (g, g + 8): key range, position, ALiBi slope (log2 units) */
    int r_lo[2], r_hi[2], r_pos[2];
    float r_slope[2];
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        const int R = m0 + g + 8 * hr;
        r_lo[hr] = 0, r_hi[hr] = 0, r_pos[hr] = 0, r_slope[hr] = 0.0f;
        if (R < rows) {
            const int i = R / a.group, h = hk * a.group + R % a.group;
            dec_key_range(a, sq, sk, i, &r_lo[hr], &r_hi[hr]);
            r_pos[hr] = i + sk - sq;
            if (a.alibi)
                r_slope[hr] = a.alibi[b * a.salibi[0] + h * a.salibi[1]] * LOG2E;
        }
    }

    T *wK = sKV + warp * STG * 2 * TILE; /* this warp's buffers: K0 V0 K1 V1 (K2 V2) */
    const uint32_t q_lane =
        ptx_smem_addr(sQ) + (lane & 15) * ROWB + (((lane >> 4) ^ (lane & 7)) * 16);
    const uint32_t k_off = ((lane & 7) + (lane >> 4) * 8) * ROWB +
                           ((((lane >> 3) & 1) ^ (lane & 7)) * 16);
    const uint32_t v_off = (lane & 15) * ROWB + (((lane >> 4) ^ (lane & 7)) * 16);

    float acc[1][DT][4];
    float row_m[1][2], row_l[1][2];
#pragma unroll
    for (int dt = 0; dt < DT; dt++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            acc[0][dt][e] = 0.0f;
    row_m[0][0] = row_m[0][1] = -INFINITY;
    row_l[0][0] = row_l[0][1] = 0.0f;

    int kb = blk_begin + warp;
    dec_lane_kv lkv = {};
    if constexpr (LEAN)
        lkv = dec_lane_setup<T, DI, DS>(a, hk, lane);
    /* this warp's buffer pair st: K at sK(st), V one tile above */
    const uint32_t wbase = ptx_smem_addr(wK);
    int px = -1, py = 0; /* lean: where the next block to copy lives (looked up early) */
    auto lookup = [&](int blk) {
        if constexpr (LEAN) {
            if (blk < blk_end)
                dec_lean_lookup(a, b, klo + blk * DEC_BN, khi, lane, &px, &py);
        }
    };
    auto load = [&](int blk, int stage) {
        if constexpr (LEAN)
            dec_lean_issue<T, DI, DS>(a, lkv, wbase + stage * 2 * TILE * (int)sizeof(T),
                                          wbase + (stage * 2 + 1) * TILE * (int)sizeof(T), px,
                                          py, lane);
        else
            dec_load_kv<T, DI, DS, VEC>(a, wK + stage * 2 * TILE, wK + stage * 2 * TILE + TILE, b,
                                        hk, klo + blk * DEC_BN, khi, lane);
    };
    /* STG - 1 blocks in flight before the loop, one group each (empty groups past the end) */
#pragma unroll
    for (int f = 0; f < STG - 1; f++) {
        if (kb + f * NW < blk_end) {
            lookup(kb + f * NW);
            load(kb + f * NW, f);
        }
        ptx_cp_async_commit();
    }
    lookup(kb + (STG - 1) * NW);
    ptx_cp_async_wait<STG - 1>(); /* Q (the oldest group) has landed for this thread */
    __syncthreads();              /* ... and for everyone */

    int st = 0;
    for (; kb < blk_end; kb += NW) {
        const int nx = kb + (STG - 1) * NW;
        if (nx < blk_end) {
            load(nx, st == 0 ? STG - 1 : st - 1);
            lookup(nx + NW); /* used by the next iteration's copies */
        }
        ptx_cp_async_commit();
        ptx_cp_async_wait<STG - 1>();
        __syncwarp();

        const uint32_t kbase = wbase + st * 2 * TILE * (uint32_t)sizeof(T);
        float s[1][2][4];
        qk_block<T, DI, 1, 2, ROWB>(s, q_lane, kbase + k_off);

        const int j0 = klo + kb * DEC_BN;
#pragma unroll
        for (int nt = 0; nt < 2; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int hr = e >> 1;
                const int j = j0 + nt * 8 + 2 * t + (e & 1);
                float x = s[0][nt][e];
                if (a.modified) {
                    x *= a.scale;
                    if (a.softcap > 0.0f)
                        x = a.softcap * tanhf(x * a.inv_softcap);
                    x = x * LOG2E - r_slope[hr] * (float)abs(r_pos[hr] - j);
                } else {
                    x *= a.scale_log2;
                }
                s[0][nt][e] = j >= r_lo[hr] && j < r_hi[hr] ? x : -INFINITY;
            }
        softmax_block<1, 2, DT>(s, acc, row_m, row_l, 1.0f);
        pv_block<T, DI, 1, 2, DT, ROWB>(s, acc, kbase + TILE * sizeof(T) + v_off);
        __syncwarp(); /* every lane is done with buffer st before it is refilled */
        st = st == STG - 1 ? 0 : st + 1;
    }
    ptx_cp_async_wait<0>();

    /* merge the NW warps' states through shared memory (the K/V buffers are free now) */
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        row_l[0][hr] += __shfl_xor_sync(0xffffffffu, row_l[0][hr], 1);
        row_l[0][hr] += __shfl_xor_sync(0xffffffffu, row_l[0][hr], 2);
    }
    __syncthreads();
    float *sO = (float *)sKV;                  /* (warps, 16, DI)   */
    float *sM = sO + NW * DEC_BM * DI;         /* (warps, 16)       */
    float *sL = sM + NW * DEC_BM;
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        const int r = g + 8 * hr;
        float *orow = sO + (warp * DEC_BM + r) * DI;
#pragma unroll
        for (int dt = 0; dt < DT; dt++) {
            orow[dt * 8 + 2 * t] = acc[0][dt][2 * hr];
            orow[dt * 8 + 2 * t + 1] = acc[0][dt][2 * hr + 1];
        }
        if (t == 0) {
            sM[warp * DEC_BM + r] = row_m[0][hr];
            sL[warp * DEC_BM + r] = row_l[0][hr];
        }
    }
    __syncthreads();

    /* 8 threads a row, 8 consecutive columns each per step (wide: the first 4 warps) */
    const int r = tid / 8, part = tid % 8;
    const int R = m0 + r;
    if ((NW == DEC_WARPS || r < DEC_BM) && R < rows) {
        const int i = R / a.group, h = hk * a.group + R % a.group;
        float M = -INFINITY;
#pragma unroll
        for (int w = 0; w < NW; w++)
            M = fmaxf(M, sM[w * DEC_BM + r]);
        float wt[NW], L = 0.0f;
#pragma unroll
        for (int w = 0; w < NW; w++) {
            const float m = sM[w * DEC_BM + r];
            wt[w] = m == -INFINITY ? 0.0f : ptx_exp2(m - M);
            L += sL[w * DEC_BM + r] * wt[w];
        }
        const float inv = L > 0.0f ? 1.0f / L : 0.0f;
        const float lse = L > 0.0f ? (M + log2f(L)) * LN2 : -INFINITY;
        const int64_t prow = ((int64_t)b * a.Hq + h) * a.Sq + i; /* split partials' row */
        const int64_t nrows = (int64_t)a.B * a.Hq * a.Sq;
        T *og = (T *)a.o + (int64_t)b * a.so[0] + (int64_t)(qbase + i) * a.so[1] +
                (int64_t)h * a.so[2];
        float *po = a.part_o + ((int64_t)split * nrows + prow) * a.Dv;
        for (int c0 = part * 8; c0 < a.Dv; c0 += 64) {
            float val[8];
#pragma unroll
            for (int k = 0; k < 8; k++) {
                float x = 0.0f;
#pragma unroll
                for (int w = 0; w < NW; w++)
                    x += sO[(w * DEC_BM + r) * DI + c0 + k] * wt[w];
                val[k] = x * inv;
            }
            if (a.splits == 1) {
                if (VEC && c0 + 8 <= a.Dv) {
                    uint4 pk;
                    pk.x = ptx_pack2(T(), val[0], val[1]);
                    pk.y = ptx_pack2(T(), val[2], val[3]);
                    pk.z = ptx_pack2(T(), val[4], val[5]);
                    pk.w = ptx_pack2(T(), val[6], val[7]);
                    *(uint4 *)(og + c0) = pk;
                } else if constexpr (VEC) { /* the row's last chunk, c0 + 8 > Dv */
                    for (int k = 0; c0 + k < a.Dv; k++)
                        og[c0 + k] = T(val[k]);
                } else { /* every chunk, element by element */
                    for (int k = 0; k < 8 && c0 + k < a.Dv; k++)
                        og[c0 + k] = T(val[k]);
                }
            } else {
                for (int k = 0; k < 8 && c0 + k < a.Dv; k++)
                    po[c0 + k] = val[k];
            }
        }
        if (part == 0) {
            if (a.splits == 1) {
                if (a.lse)
                    a.lse[(int64_t)b * a.slse[0] + (int64_t)h * a.slse[1] +
                          (int64_t)(qbase + i) * a.slse[2]] = lse;
            } else {
                a.part_lse[(int64_t)split * nrows + prow] = lse;
            }
        }
    }
}

/* Split-KV merge: one warp per (b, h, i) row. */
template <typename T>
__global__ void __launch_bounds__(128) attn_decode_merge(const dec_args a)
{
    __shared__ float wts[4][DEC_MAX_SPLITS];
    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    const int64_t nrows = (int64_t)a.B * a.Hq * a.Sq;
    const int64_t prow = (int64_t)blockIdx.x * 4 + warp;
    if (prow >= nrows)
        return;
    const int i = (int)(prow % a.Sq), h = (int)(prow / a.Sq % a.Hq), b = (int)(prow / a.Sq / a.Hq);
    int sq, sk;
    dec_seqlens(a, b, &sq, &sk);
    if (i >= sq)
        return;
    float M = -INFINITY;
    for (int s = lane; s < a.splits; s += 32)
        M = fmaxf(M, a.part_lse[(int64_t)s * nrows + prow]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
    float L = 0.0f;
    for (int s = lane; s < a.splits; s += 32) {
        const float l = a.part_lse[(int64_t)s * nrows + prow];
        const float w = l == -INFINITY ? 0.0f : expf(l - M);
        wts[warp][s] = w;
        L += w;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        L += __shfl_xor_sync(0xffffffffu, L, o);
    __syncwarp();
    const float inv = L > 0.0f ? 1.0f / L : 0.0f;
    const int qbase = dec_qbase(a, b);
    T *og = (T *)a.o + (int64_t)b * a.so[0] + (int64_t)(qbase + i) * a.so[1] + (int64_t)h * a.so[2];
    for (int c = lane; c < a.Dv; c += 32) {
        float x = 0.0f;
        for (int s = 0; s < a.splits; s++) {
            const float w = wts[warp][s];
            if (w != 0.0f) /* an empty split's o is not read: NaN there cannot leak */
                x += w * a.part_o[((int64_t)s * nrows + prow) * a.Dv + c];
        }
        og[c] = T(x * inv);
    }
    if (lane == 0 && a.lse)
        a.lse[(int64_t)b * a.slse[0] + (int64_t)h * a.slse[1] + (int64_t)(qbase + i) * a.slse[2]] =
            L > 0.0f ? M + logf(L) : -INFINITY;
}

/* Split-KV merge v2 (and pdl): one block of 128 threads per (b, h, i) row, dec_merge_rows. */
template <typename T>
__global__ void __launch_bounds__(DEC_WARPS * 32) attn_decode_merge2(const dec_args a)
{
    __shared__ __align__(16) float sw[(DEC_MAX_SPLITS + 2 + 3) / 4 * 4 + 4 * DEC_WARPS * 32];
    ptx_griddep_wait(); /* pdl: every split block's partials are written */
    const int64_t prow = blockIdx.x;
    const int i = (int)(prow % a.Sq), h = (int)(prow / a.Sq % a.Hq), b = (int)(prow / a.Sq / a.Hq);
    int sq, sk;
    dec_seqlens(a, b, &sq, &sk);
    if (i >= sq)
        return; /* uniform */
    dec_merge_rows<T>(a, b, i * a.group + h % a.group, h / a.group * a.group, 1, sw);
}

/* Split-KV merge v3 (FLASHC_DECODE_MERGE=v3; a programmatic dependent of the split kernel on
 * sm_90, as pdl): block (row, 32-column slice), 128 threads = 16 split groups x 8 column quads,
 * so a thread sums every 16th split of its 4 columns with all of them in flight: at 42 splits
 * 3 loads, one L2 round trip after the LSEs' one, where v2's one block a row (4 groups x 32
 * quads) needs 11 loads a thread in two batches. More blocks (4 a row at Dv 128) to wait on
 * the split kernel, fewer dependent round trips each. The 16 group sums are added in group order
 * and each group's in split order (dec_sum_splits), so the result depends on (splits, Dv) only.
 * EARLY (v4, FLASHC_DECODE_MERGE=v4; auto's merge for small grids): with at most 16 x
 * DEC_MERGE_DEPTH = 128 splits, each thread issues its partial loads together with the LSE
 * loads, before the weights exist, so the merge waits on one L2 round trip after
 * griddepcontrol.wait instead of two; the sums are the same operations in the same order as
 * v3's (one batch of dec_sum_splits), so v4 gives v3's bits (test_kvcache_merge_variants checks
 * it). */
template <typename T, bool EARLY>
__global__ void __launch_bounds__(DEC_WARPS * 32) attn_decode_merge3(const dec_args a)
{
    constexpr int G = 16, Q = 8; /* split groups x column quads = 128 threads */
    __shared__ float sw[DEC_MAX_SPLITS];
    __shared__ float4 red[G * Q];
    __shared__ float s_inv, s_lse;
    const int64_t prow = blockIdx.x;
    const int i = (int)(prow % a.Sq), h = (int)(prow / a.Sq % a.Hq), b = (int)(prow / a.Sq / a.Hq);
    ptx_griddep_wait(); /* every split block's partials are written */
    int sq, sk;
    dec_seqlens(a, b, &sq, &sk);
    if (i >= sq)
        return; /* uniform */
    const int S = a.splits, tid = (int)threadIdx.x;
    const int64_t nrows = (int64_t)a.B * a.Hq * a.Sq;
    const int g = tid / Q, q = tid % Q;
    const int c = (int)blockIdx.y * 4 * Q + 4 * q; /* first column of this thread's quad */
    const int n = min(4, a.Dv - c);
    const float *po = a.part_o + prow * a.Dv + c;
    const int64_t sstride = nrows * a.Dv;
    const bool vec = a.Dv % 4 == 0;
    const bool early = EARLY && S <= G * DEC_MERGE_DEPTH && c < a.Dv;
    float4 pv[DEC_MERGE_DEPTH];
    if (early) { /* issued before the LSEs are even read: in flight with them */
#pragma unroll
        for (int u = 0; u < DEC_MERGE_DEPTH; u++)
            pv[u] = g + u * G < S ? dec_ld4(po + (int64_t)(g + u * G) * sstride, vec, n)
                                 : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    for (int x = tid; x < S; x += DEC_WARPS * 32)
        sw[x] = __ldcg(a.part_lse + (int64_t)x * nrows + prow);
    __syncthreads();
    if (tid < 32) {
        float M = -INFINITY;
        for (int x = tid; x < S; x += 32)
            M = fmaxf(M, sw[x]);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
        float L = 0.0f;
        for (int x = tid; x < S; x += 32) {
            const float l = sw[x];
            const float w = l == -INFINITY ? 0.0f : expf(l - M);
            sw[x] = w;
            L += w;
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            L += __shfl_xor_sync(0xffffffffu, L, o);
        if (tid == 0) {
            s_inv = L > 0.0f ? 1.0f / L : 0.0f;
            s_lse = L > 0.0f ? M + logf(L) : -INFINITY;
        }
    }
    __syncthreads();
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (early) { /* dec_sum_splits' one batch, on the loads already made */
#pragma unroll
        for (int u = 0; u < DEC_MERGE_DEPTH; u++)
            if (g + u * G < S)
                dec_fma4(acc, sw[g + u * G], pv[u]);
    } else if (c < a.Dv) {
        acc = vec ? dec_sum_splits<true>(po, sstride, sw, g, G, S, n)
                  : dec_sum_splits<false>(po, sstride, sw, g, G, S, n);
    }
    red[tid] = acc;
    __syncthreads();
    if (tid < Q && c < a.Dv) { /* g = 0: this quad's 16 group sums, in group order */
        float4 t = red[tid];
        for (int gg = 1; gg < G; gg++) {
            const float4 v = red[gg * Q + tid];
            t.x += v.x, t.y += v.y, t.z += v.z, t.w += v.w;
        }
        const int qbase = dec_qbase(a, b);
        dec_store4((T *)a.o + (int64_t)b * a.so[0] + (int64_t)(qbase + i) * a.so[1] +
                       (int64_t)h * a.so[2] + c,
                   t, s_inv, min(4, a.Dv - c));
    }
    if (blockIdx.y == 0 && tid == 0 && a.lse)
        a.lse[(int64_t)b * a.slse[0] + (int64_t)h * a.slse[1] +
              (int64_t)(dec_qbase(a, b) + i) * a.slse[2]] = s_lse;
}

/* KV-cache append: one block of 64 threads per (b, j, hk) row of k_new / v_new. */
template <typename T>
__global__ void __launch_bounds__(64) attn_decode_append(const dec_args a)
{
    const int64_t row = blockIdx.x;
    const int hk = (int)(row % a.Hkv), j = (int)(row / a.Hkv % a.s_new),
              b = (int)(row / a.Hkv / a.s_new);
    const int pos = max(a.seqlens[b], 0) + j; /* the cache row, whatever cache_leftpad */
    if (pos >= a.capacity)
        return; /* past the capacity: dropped (the host cannot check device lengths) */
    int x, y;
    dec_kv_loc(a, b, pos - dec_kv_start(a, b), &x, &y); /* key pos - start of the sequence */
    if (x < 0)
        return;
    const T *src[2] = {(const T *)a.k_new + (int64_t)b * a.sknew[0] + (int64_t)j * a.sknew[1] +
                           (int64_t)hk * a.sknew[2],
                       (const T *)a.v_new + (int64_t)b * a.svnew[0] + (int64_t)j * a.svnew[1] +
                           (int64_t)hk * a.svnew[2]};
    T *dst[2] = {(T *)a.k + (int64_t)x * a.sk[0] + (int64_t)y * a.sk[1] + (int64_t)hk * a.sk[2],
                 (T *)a.v + (int64_t)x * a.sv[0] + (int64_t)y * a.sv[1] + (int64_t)hk * a.sv[2]};
    const int dims[2] = {a.D, a.Dv};
#pragma unroll
    for (int m = 0; m < 2; m++) {
        const bool vec = ((uintptr_t)src[m] % 16 == 0) && ((uintptr_t)dst[m] % 16 == 0);
        for (int c = (int)threadIdx.x; c * 8 < dims[m]; c += 64) {
            if (vec && c * 8 + 8 <= dims[m]) {
                *(uint4 *)(dst[m] + c * 8) = *(const uint4 *)(src[m] + c * 8);
            } else {
                for (int e = c * 8; e < c * 8 + 8 && e < dims[m]; e++)
                    dst[m][e] = src[m][e];
            }
        }
    }
}

/* A launch on the stream; pdl: as a programmatic dependent of the stream's previous kernel
 * (sm_90: it may start before that one ends and waits for it in cudaGridDependencySynchronize;
 * captured into a graph as a programmatic edge). */
template <typename... Args>
cudaError_t dec_launch_ex(void (*kernel)(Args...), dim3 grid, dim3 block, size_t smem,
                          cudaStream_t stream, bool pdl, Args... args)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = stream;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = pdl ? at : NULL;
    cfg.numAttrs = pdl ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, kernel, args...);
}

template <typename T, int DI, int VAR>
cudaError_t dec_launch(const dec_args &a, cudaStream_t stream)
{
    constexpr size_t smem = dec_smem_bytes<T, DI, dec_var_stages(VAR), dec_var_warps(VAR)>();
    constexpr int threads = dec_var_warps(VAR) * 32;
    cudaError_t err = cudaFuncSetAttribute(attn_decode_kernel<T, DI, VAR>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (err != cudaSuccess)
        return err;
    const int64_t blocks = (int64_t)a.B * a.Hkv * a.m_tiles;
    attn_decode_kernel<T, DI, VAR><<<dim3((unsigned)blocks, (unsigned)a.splits), threads, smem,
                                     stream>>>(a);
    return cudaGetLastError();
}

/* var: DEC_VAR_* (var_of: the base instance at head dims > 128). */
template <typename T, int VAR>
cudaError_t dec_launch_var(const dec_args &a, int di, cudaStream_t stream)
{
    return di == 64 ? dec_launch<T, 64, VAR>(a, stream) : dec_launch<T, 128, VAR>(a, stream);
}

template <typename T>
cudaError_t dec_launch_di(const dec_args &a, int di, int var, cudaStream_t stream)
{
    if (var == DEC_VAR_ELEM) /* rows not 16-byte aligned: every head dim */
        return di == 64    ? dec_launch<T, 64, DEC_VAR_ELEM>(a, stream)
               : di == 128 ? dec_launch<T, 128, DEC_VAR_ELEM>(a, stream)
                           : dec_launch<T, 256, DEC_VAR_ELEM>(a, stream);
    switch (di > 128 ? DEC_VAR_BASE : var) {
    case DEC_VAR_LEAN: return dec_launch_var<T, DEC_VAR_LEAN>(a, di, stream);
    case DEC_VAR_LEAN3: return dec_launch_var<T, DEC_VAR_LEAN3>(a, di, stream);
    case DEC_VAR_LEAN5: return dec_launch_var<T, DEC_VAR_LEAN5>(a, di, stream);
    case DEC_VAR_WIDE: return dec_launch_var<T, DEC_VAR_WIDE>(a, di, stream);
    default: break;
    }
    return di == 64    ? dec_launch<T, 64, DEC_VAR_BASE>(a, stream)
           : di == 128 ? dec_launch<T, 128, DEC_VAR_BASE>(a, stream)
                       : dec_launch<T, 256, DEC_VAR_BASE>(a, stream);
}

/* sm90: the device takes programmatic dependent launches (the merges v3, v4 and pdl); var: the
 * split kernel's instance (DEC_VAR_*). */
template <typename T>
cudaError_t dec_run_all(const dec_args &a, int di, bool sm90, int var, cudaStream_t stream)
{
    cudaError_t err = cudaSuccess;
    if (a.k_new && a.s_new > 0) {
        attn_decode_append<T><<<(unsigned)((int64_t)a.B * a.s_new * a.Hkv), 64, 0, stream>>>(a);
        if ((err = cudaGetLastError()) != cudaSuccess)
            return err;
    }
    const int64_t tiles = (int64_t)a.B * a.Hkv * a.m_tiles;
    if (tiles == 0) /* varlen with max_seqlen_q = 0 */
        return cudaSuccess;
    if ((err = dec_launch_di<T>(a, di, var, stream)) != cudaSuccess)
        return err;
    if (a.splits > 1) {
        const int64_t nrows = (int64_t)a.B * a.Hq * a.Sq;
        if (a.merge == DEC_MERGE_V1)
            attn_decode_merge<T><<<(unsigned)((nrows + 3) / 4), 128, 0, stream>>>(a);
        else if (a.merge == DEC_MERGE_V3 || a.merge == DEC_MERGE_V4)
            err = dec_launch_ex(a.merge == DEC_MERGE_V4 ? attn_decode_merge3<T, true>
                                                        : attn_decode_merge3<T, false>,
                                dim3((unsigned)nrows, (unsigned)((a.Dv + 31) / 32)),
                                dim3(DEC_WARPS * 32), 0, stream, sm90, a);
        else
            err = dec_launch_ex(attn_decode_merge2<T>, dim3((unsigned)nrows),
                                dim3(DEC_WARPS * 32), 0, stream,
                                a.merge == DEC_MERGE_PDL && sm90, a);
        if (err != cudaSuccess || (err = cudaGetLastError()) != cudaSuccess)
            return err;
    }
    if (a.layout == ATTN_VARLEN) {
        const int64_t n = (int64_t)a.total_q * a.Hq;
        if (n > 0)
            attn_clear_unowned<T, dec_args><<<(unsigned)((n + 3) / 4), 128, 0, stream>>>(a);
        err = cudaGetLastError();
    }
    return err;
}

const char *fn_of(const attn_problem *p)
{
    return p->layout == ATTN_KVCACHE  ? "flashc_attn_kvcache_fwd"
           : p->layout == ATTN_VARLEN ? "flashc_attn_varlen_fwd"
                                      : "flashc_attn_fwd";
}

int head_dim_instance(const attn_problem *p)
{
    const int64_t d = p->D > p->Dv ? p->D : p->Dv;
    return d <= 64 ? 64 : d <= 128 ? 128 : 256;
}

/* SMs of the current device (attn.cu's cuda_sm_count), 108 (an A100's) when the query fails */
int sm_count(void)
{
    const int n = cuda_sm_count();
    return n > 0 ? n : 108;
}

/* FLASHC_DECODE_KERNEL, read at every call (so one process can compare the kernels): unset or
 * "" the default (DEC_KERNEL_AUTO: the lean loader, or wide where var_of says); "lean" the lean
 * loader everywhere (faster than base at every B x ctx measured on 2026-12-02,
 * bench/RESULTS.md); "split" or "base" the split kernel's historical loader; "lean3", "lean5"
 * the lean loader with 3 or 5 stages a warp; "wide" the lean loader with 12 warps a block
 * (dec_var_warps) everywhere; "autow" the default's choice with wide's region extended past
 * DEC_WIDE_MAX_KEYS (var_of; opt-in, decode13); 0 for anything else. */
int kernel_mode(void)
{
    const char *e = getenv("FLASHC_DECODE_KERNEL");
    if (!e || !e[0])
        return DEC_KERNEL_AUTO;
    if (strcmp(e, "lean") == 0)
        return DEC_KERNEL_LEAN;
    if (strcmp(e, "split") == 0 || strcmp(e, "base") == 0)
        return DEC_KERNEL_BASE;
    if (strcmp(e, "lean5") == 0)
        return DEC_KERNEL_LEAN5;
    if (strcmp(e, "lean3") == 0)
        return DEC_KERNEL_LEAN3;
    if (strcmp(e, "wide") == 0)
        return DEC_KERNEL_WIDE;
    if (strcmp(e, "autow") == 0)
        return DEC_KERNEL_AUTOW;
    return 0;
}

int64_t m_tiles_of(const attn_problem *p)
{
    return (p->Sq * (p->Hq / p->Hkv) + DEC_BM - 1) / DEC_BM;
}

/* Shared memory a block may opt in to on the current device, cached per device ordinal. */
size_t smem_optin(void)
{
    static size_t cached[64];
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0)
        return 0;
    if (dev < 64 && cached[dev] > 0)
        return cached[dev];
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
        n <= 0)
        return 0;
    if (dev < 64)
        cached[dev] = (size_t)n;
    return (size_t)n;
}

/* FLASHC_DECODE_SPLITS, read at every call: unset, "" or "fill" the deep part of decode11's
 * rule where it applies, else the whole-wave fill rule (splits_of; fill the default since
 * 2026-12-03, the deep part since 2026-12-04 midday); "fa2" FlashAttention-2's rule, the
 * default before; "deep" the deep part, fill, and whole waves for the large grids the deep
 * part does not take (splits_of, decode11; opt-in); 0 for anything else. */
enum { DEC_SPLITS_FA2 = 1, DEC_SPLITS_FILL = 2, DEC_SPLITS_DEEP = 3 };
int split_rule(void)
{
    const char *e = getenv("FLASHC_DECODE_SPLITS");
    if (!e || !e[0] || strcmp(e, "fill") == 0)
        return DEC_SPLITS_FILL;
    if (strcmp(e, "fa2") == 0)
        return DEC_SPLITS_FA2;
    if (strcmp(e, "deep") == 0)
        return DEC_SPLITS_DEEP;
    return 0;
}

/* The deep rule's constants (FLASHC_DECODE_SPLITS=deep, decode11): at least DEC_DEEP_WAVES
 * blocks a slot, each split keeping at least DEC_DEEP_KEYS keys; else (splits_of) fill for
 * small grids and whole waves for large ones. */
constexpr int64_t DEC_DEEP_WAVES = 5;
constexpr int64_t DEC_DEEP_KEYS = 8192;

/* Thread blocks of lean's instance an SM holds at once (shared memory 34 / 68 KB at d 64 / 128,
 * registers <= 168 a thread): the default's slots an SM (blocks_per_sm). */
int lean_blocks_per_sm(const attn_problem *p)
{
    const int di = head_dim_instance(p);
    return di == 64 ? 4 : di == 128 ? 3 : 1;
}

/* The deep part of the split rule (splits_of): the fewest splits that make ctas tiles at least
 * DEC_DEEP_WAVES blocks a slot of slots, if each split keeps >= DEC_DEEP_KEYS keys and there are
 * at most 33; 0 where it does not apply (that, FLASHC_DECODE_SPLITS=fa2, or no tiles). */
int64_t deep_splits(const attn_problem *p, int64_t ctas, int64_t slots)
{
    if (ctas <= 0 || split_rule() == DEC_SPLITS_FA2)
        return 0;
    const int64_t deep = (DEC_DEEP_WAVES * slots + ctas - 1) / ctas;
    return deep <= 33 && (deep == 1 || deep * DEC_DEEP_KEYS <= p->Sk) ? deep : 0;
}

/* Keys (the plan-time maximum) up to which the default takes wide (var_of). */
constexpr int64_t DEC_WIDE_MAX_KEYS = 4096;

/* The split kernel's instance for p under FLASHC_DECODE_KERNEL (DEC_VAR_*): DEC_VAR_ELEM where
 * q, k, v or o has rows that are not 16-byte aligned; else a lean variant at head dims <= 128,
 * else the base instance; wide where its shared memory fits the device (d 128:
 * 196 KB, so CC 9.0; on sm_80 parts d 64 only), else lean.
 * The default (unset) takes wide for decode proper (one 16-row tile a KV head) at short
 * contexts (<= DEC_WIDE_MAX_KEYS keys) whose tiles are at least half the SMs: there one wide
 * block an SM needs one split, or two, where lean's three blocks an SM split the keys 2-3 ways
 * and merge, which at 4k keys costs a measurable share (helper decode11, H200 2026-12-04:
 * wide 1.051-1.090x lean at B 16 and 64 x 4k, 32/8 and 16/8 heads, contiguous and page 16;
 * 1.004x at 128 x 4k, where lean already ran one split; at B 1 x 4k, 4 tiles, 0.927x, and
 * longer contexts were not measured as a region: 0.978-1.09x at 32k). From the maxima only.
 * autow (FLASHC_DECODE_KERNEL=autow, opt-in, decode13) is the default with wide's region past
 * DEC_WIDE_MAX_KEYS: decode proper whose tiles are at least an eighth of the SMs (at most 8
 * wide blocks a tile under fill) where lean's count would not be the deep part's. There lean
 * splits each (b, KV head) 3-12 ways (16 x 32k: 3 x 128 blocks, 4 x 32k: 12 x 32) and pays the
 * partials, 3 prologues an SM and the merge (5.7 us of the 500 at 16 x 32k, decode9's ncu),
 * where wide runs one block an SM, 1 split at B 16 x 32k (cuDNN's grid) and 4 at B 4. Recorded
 * (decode11's run, wide forced, fill): 1.030x lean at 16 x 32k, 1.015x at 32 x 32k (1 split),
 * 1.018x / 1.020x at 4 x 32k / 128k (4 splits), but 0.994-1.004x at B 1 (16 splits; page 16
 * 0.983-0.987), hence the eighth; where the deep part takes lean (64 x 32k, 16 x 128k) it
 * beat wide (1.029x against 1.006x, 1.025x against 1.022x). */
int var_of(const attn_problem *p)
{
    if (!cuda_rows_vec16(p))
        return DEC_VAR_ELEM; /* the one loader that takes such rows, whatever the knob says */
    const int k = kernel_mode();
    if (head_dim_instance(p) > 128)
        return DEC_VAR_BASE;
    const int64_t tiles = p->B * p->Hkv * m_tiles_of(p);
    const int64_t sms = sm_count();
    const bool decode = m_tiles_of(p) == 1 && sms > 0;
    bool wide_default = false;
    if ((k == DEC_KERNEL_AUTO || k == DEC_KERNEL_AUTOW) && decode)
        wide_default = p->Sk <= DEC_WIDE_MAX_KEYS
                           ? tiles * 2 >= sms
                           : k == DEC_KERNEL_AUTOW && tiles * 8 >= sms &&
                                 deep_splits(p, tiles, sms * lean_blocks_per_sm(p)) == 0;
    if (k == DEC_KERNEL_WIDE || wide_default) {
        constexpr int nw = dec_var_warps(DEC_VAR_WIDE);
        const size_t need = head_dim_instance(p) == 64
                                ? dec_smem_bytes<__nv_bfloat16, 64, DEC_STAGES, nw>()
                                : dec_smem_bytes<__nv_bfloat16, 128, DEC_STAGES, nw>();
        return need <= smem_optin() ? DEC_VAR_WIDE : DEC_VAR_LEAN;
    }
    if (k == DEC_KERNEL_LEAN || k == DEC_KERNEL_AUTO || k == DEC_KERNEL_AUTOW)
        return DEC_VAR_LEAN;
    return k == DEC_KERNEL_LEAN3   ? DEC_VAR_LEAN3
           : k == DEC_KERNEL_LEAN5 ? DEC_VAR_LEAN5
                                   : DEC_VAR_BASE;
}

/* Thread blocks of one instance an SM holds at once (shared memory: 34 / 68 / 136 KB, lean3 50 /
 * 100 KB; registers <= 128 a thread at d <= 128, ~250 at 256): the slots a split count should
 * fill. ELEM has base's shared memory: lean's count. */
int blocks_per_sm(const attn_problem *p)
{
    const int di = head_dim_instance(p);
    if (var_of(p) == DEC_VAR_LEAN3)
        return di == 64 ? 4 : 2;
    if (var_of(p) == DEC_VAR_LEAN5) /* 82 / 164 KB */
        return di == 64 ? 2 : 1;
    if (var_of(p) == DEC_VAR_WIDE) /* 100 / 196 KB, 384 threads */
        return 1;
    return lean_blocks_per_sm(p);
}

/* The split count: the caller's, or (0) the deep rule (FLASHC_DECODE_SPLITS=deep, where it
 * applies), the fill rule (FLASHC_DECODE_SPLITS, below), or
 * FlashAttention-2's rule on this kernel's slots: among 1..64 splits (each keeping at least 128
 * keys, 2 blocks a warp), the smallest whose last wave of thread blocks is within 85% of the
 * best wave efficiency n_waves / ceil(n_waves). From the maxima only (B, Hkv, the tile count,
 * Sk_max), the SM count, FLASHC_DECODE_KERNEL and FLASHC_DECODE_SPLITS. */
int splits_of(const attn_problem *p)
{
    const int64_t keys = p->Sk;
    const int64_t kblocks = keys > 0 ? (keys + DEC_BN - 1) / DEC_BN : 1;
    int64_t n;
    const int rule = split_rule();
    const int64_t ctas = p->B * p->Hkv * m_tiles_of(p);
    const int64_t slots = (int64_t)sm_count() * blocks_per_sm(p);
    /* deep: the fewest splits that make the grid DEC_DEEP_WAVES blocks a slot, where each split
     * keeps >= DEC_DEEP_KEYS keys (else fill's count, or whole waves below). Why: a memory-bound
     * grid's blocks drift apart over its waves, so the kernel ends with a drain of about one
     * block's life in which fewer and fewer blocks stream and the DRAM is not kept busy; a
     * deeper grid has shorter blocks, so a shorter drain, while each block still streams long
     * enough (8192 keys: 4 MB of K + V at d 128, ~1000x its prologue, the first key block's
     * latency, and its partial store) that the blocks' fixed cost and the merge's extra
     * partials stay under 1%. Measured (bench/RESULTS.md, decode9 / decode10 sweeps, 32/8
     * heads, d 128): 64 x 32k 2 splits (2.6 blocks a slot) -> 4 (5.2 a slot, 8k keys each)
     * +2.7% and +2.5%, 64 x 128k +3.0%; 16 x 128k 3 -> 16 (5.2, 8k keys) +2.2% (2026-12-02);
     * while 16 x 32k at 16 splits (5.2 a slot but 2k keys) gained nothing, and neither did 3 or
     * 6 splits at 64 x 32k (3.9 / 7.8 a slot). At most 33 splits, as fill (the merge's work a
     * row). From the maxima only (deep_splits). */
    const int64_t deep = deep_splits(p, ctas, slots);
    if (p->num_splits > 0) {
        n = p->num_splits;
    } else if (ctas == 0) {
        n = 1; /* no tiles (varlen, max_seqlen_q 0): nothing runs, and the rules divide by ctas */
    } else if (deep > 0) {
        /* the deep part (fill and deep alike; H200 2026-12-04 midday, s11_decode11.sh, in git
         * at a9d5878: 1.015-1.084x fill in all 15 cells where it changes the count, 32/8 and
         * 16/8 heads, contiguous and page 16: 64 x 32k / 128k 4 splits, 128 x 32k 2, 32 x 128k
         * 8, 16 x 128k 16; its whole-wave part below was 0.982-1.037x and stays with "deep") */
        n = deep;
    } else if (rule != DEC_SPLITS_FA2 && ctas * 2 <= slots) {
        /* fill: the tiles are at most half the slots, so split them to fill whole waves of the
         * slots (k blocks a SM, every SM alike: the sweeps of 2026-12-01 had 33 and 49 splits,
         * 264 / 392 blocks, above 42's 336 at B 1), each split keeping >= 256 keys: the largest
         * k <= blocks_per_sm whose count this allows */
        /* at most 33 splits: past that the merge's per-row work costs more than a third block a
         * SM gains (round 1: 1 x 32k 2581 GB/s at 33 splits, 2521 at 49; 1 x 128k 3781, 3742) */
        int64_t max_n = keys / 256;
        max_n = max_n < 1 ? 1 : max_n > 33 ? 33 : max_n;
        n = 1;
        for (int k = blocks_per_sm(p); k >= 1; k--) {
            const int64_t s = (int64_t)k * sm_count() / ctas;
            if (s >= 1 && s <= max_n) {
                n = s;
                break;
            }
            if (s > max_n && k == 1)
                n = max_n;
        }
    } else if (rule == DEC_SPLITS_DEEP) {
        /* deep, where its depth needs shorter splits (short contexts at large B): whole waves.
         * Short blocks start together and stay in step, so the grid runs in ceil(waves) rounds
         * of one block's time: the count s in 1..8 (>= 1024 keys a split) with the fewest
         * block-times ceil(ctas s / slots) / s, the smallest on a tie (decode10's ceil rule,
         * 0.995-1.054x over its cells there for every large grid, e.g. 3 splits at 64 x 32k,
         * 1.002x in decode9's sweep; here only below deep's keys).
         * 64 x 4k: 3 splits (3.9 waves, 1.33 tile-times) instead of fa2's 2 (2.6, 1.5). */
        int64_t max_n = keys / 1024;
        max_n = max_n < 1 ? 1 : max_n > 8 ? 8 : max_n;
        int64_t best_r = 0;
        n = 1;
        for (int64_t s = 1; s <= max_n; s++) {
            const int64_t r = (ctas * s + slots - 1) / slots; /* rounds of s-split blocks */
            if (s == 1 || r * n < best_r * s)
                best_r = r, n = s;
        }
    } else {
        int64_t max_n = keys / 128;
        max_n = max_n < 1 ? 1 : max_n > 64 ? 64 : max_n;
        double eff[65], best = 0.0;
        for (int64_t s = 1; s <= max_n; s++) {
            const double waves = (double)ctas * (double)s / (double)slots;
            eff[s] = waves / ceil(waves);
            best = eff[s] > best ? eff[s] : best;
        }
        n = 1;
        for (int64_t s = 1; s <= max_n; s++)
            if (eff[s] >= 0.85 * best) {
                n = s;
                break;
            }
    }
    if (n > kblocks)
        n = kblocks; /* more splits than 16-key blocks would only be empty */
    if (n > DEC_MAX_SPLITS)
        n = DEC_MAX_SPLITS;
    return (int)(n < 1 ? 1 : n);
}

/* FLASHC_DECODE_MERGE (the header comment), read at every call so that one process can compare
 * the variants: unset, "" or "auto" the default (v4 for small merge grids, else pdl; resolved in
 * cuda_attn_decode); "v1", "v2", "v3", "v4", "pdl"; 0 for anything else (the fused merges
 * "fused" and "fused2" too, removed on 2026-12-04). */
int merge_mode(void)
{
    const char *e = getenv("FLASHC_DECODE_MERGE");
    if (!e || !e[0] || strcmp(e, "auto") == 0)
        return DEC_MERGE_AUTO;
    if (strcmp(e, "v1") == 0)
        return DEC_MERGE_V1;
    if (strcmp(e, "v2") == 0)
        return DEC_MERGE_V2;
    if (strcmp(e, "pdl") == 0)
        return DEC_MERGE_PDL;
    if (strcmp(e, "v3") == 0)
        return DEC_MERGE_V3;
    if (strcmp(e, "v4") == 0)
        return DEC_MERGE_V4;
    return 0;
}

/* Split partials (splits, B, Hq, Sq, Dv) and (splits, B, Hq, Sq) float32, each 64-byte
 * aligned. */
size_t workspace_of(const attn_problem *p, int splits)
{
    if (splits <= 1)
        return 0;
    const size_t rows = (size_t)p->B * (size_t)p->Hq * (size_t)p->Sq * (size_t)splits;
    const size_t sizes[2] = {rows * (size_t)p->Dv * sizeof(float), rows * sizeof(float)};
    return attn_scratch_bytes(2, sizes);
}

/* The three knobs read at every call (merge_mode, kernel_mode, split_rule) hold values they
 * know, else INVALID_ARGUMENT naming the one that does not. */
flashc_status check_env_modes(const char *fn)
{
    if (!merge_mode())
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                            "%s: FLASHC_DECODE_MERGE=%s: expected auto, v1, v2, v3, v4 or pdl",
                            fn, getenv("FLASHC_DECODE_MERGE"));
    if (!kernel_mode())
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                            "%s: FLASHC_DECODE_KERNEL=%s: expected split, base, lean, lean3, "
                            "lean5, wide or autow",
                            fn, getenv("FLASHC_DECODE_KERNEL"));
    if (!split_rule())
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                            "%s: FLASHC_DECODE_SPLITS=%s: expected fill, fa2 or deep", fn,
                            getenv("FLASHC_DECODE_SPLITS"));
    return FLASHC_OK;
}

/* The current device's compute capability major into *major. */
flashc_status device_major(const char *fn, int *major)
{
    int dev = 0;
    cudaError_t err = cudaGetDevice(&dev);
    if (err == cudaSuccess)
        err = cudaDeviceGetAttribute(major, cudaDevAttrComputeCapabilityMajor, dev);
    if (err != cudaSuccess)
        return cuda_device_error(fn, "querying the current CUDA device", err);
    return FLASHC_OK;
}

} /* namespace */

flashc_status cuda_attn_decode_supports(const attn_problem *p)
{
    const char *fn = fn_of(p);
    if (p->dtype != FLASHC_BF16 && p->dtype != FLASHC_F16)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED_DTYPE,
                            "%s: the CUDA backend supports bf16 and fp16 storage only (%s given)",
                            fn, flashc__dtype_name(p->dtype));
    if (p->D < 1 || p->D > 256 || p->Dv < 1 || p->Dv > 256)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "%s: the CUDA backend supports head dims 1 to 256 (got D = %lld, "
                            "Dv = %lld)",
                            fn, (long long)p->D, (long long)p->Dv);
    if ((p->br && p->br != DEC_BM) || (p->bc && p->bc != DEC_BN))
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "%s: the CUDA KV-cache/varlen kernel uses tiles of %d packed rows x "
                            "%d keys; pass block_q = block_k = 0 or those (got %lld x %lld)",
                            fn, DEC_BM, DEC_BN, (long long)p->br, (long long)p->bc);
    const int64_t group = p->Hq / p->Hkv;
    const int64_t cap = p->layout == ATTN_KVCACHE ? p->kv_capacity : 0;
    const int64_t limit = (int64_t)1 << 30;
    if (p->Sq * group > limit || p->Sk > limit || cap > limit || p->total_q > limit ||
        p->total_k > limit || p->num_pages > limit || p->kv_rows > limit ||
        p->B * p->Hkv * m_tiles_of(p) > 0x7fffffff)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "%s: the CUDA KV-cache/varlen kernel takes Sq * Hq / Hkv, Sk, cache "
                            "capacity and row counts <= 2^30 and at most 2^31 - 1 thread blocks",
                            fn);
    FLASHC_TRY(check_env_modes(fn));
    FLASHC_TRY(cuda_check_no_pending_error(fn));
    flashc_status st;
    const int cache = p->layout == ATTN_KVCACHE;
    if ((st = cuda_check_operand(fn, "q", p->q, p->sq)) != FLASHC_OK ||
        (st = cuda_check_operand(fn, cache ? "k_cache" : "k", p->k, p->sk)) != FLASHC_OK ||
        (st = cuda_check_operand(fn, cache ? "v_cache" : "v", p->v, p->sv)) != FLASHC_OK ||
        (st = cuda_check_operand(fn, "o", p->o, p->so)) != FLASHC_OK)
        return st;
    if (p->k_new && ((st = cuda_check_operand(fn, "k_new", p->k_new, p->sknew)) != FLASHC_OK ||
                     (st = cuda_check_operand(fn, "v_new", p->v_new, p->svnew)) != FLASHC_OK))
        return st;
    const void *idx[6] = {p->lse, p->alibi, p->cu_q, p->cu_k, p->seqlens_k, p->pages};
    const char *idx_names[6] = {"lse", "alibi_slopes", "cu_seqlens_q", "cu_seqlens_k",
                                "cache_seqlens", "block_table"};
    for (int n = 0; n < 6; n++)
        if (idx[n] && (st = cuda_check_memory(fn, idx_names[n], idx[n])) != FLASHC_OK)
            return st;
    if (p->kv_batch && (st = cuda_check_memory(fn, "cache_batch_idx", p->kv_batch)) != FLASHC_OK)
        return st;
    if (p->kv_start && (st = cuda_check_memory(fn, "cache_leftpad", p->kv_start)) != FLASHC_OK)
        return st;
    int major = 0;
    FLASHC_TRY(device_major(fn, &major));
    if (major < 8)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "%s: no CUDA kernel for this device (sm_80 or newer needed)", fn);
    return FLASHC_OK;
}

size_t cuda_attn_decode_workspace(const attn_problem *p)
{
    return workspace_of(p, splits_of(p));
}

flashc_status cuda_attn_decode(const attn_problem *p, flashc_attn_stats *stats)
{
    const char *fn = fn_of(p);
    FLASHC_TRY(cuda_check_no_pending_error(fn));
    cudaStream_t stream = (cudaStream_t)p->stream;
    dec_args a;
    memset(&a, 0, sizeof a);
    a.q = p->q, a.k = p->k, a.v = p->v, a.o = p->o, a.lse = p->lse;
    for (int i = 0; i < 3; i++) {
        a.sq[i] = p->sq[i], a.sk[i] = p->sk[i], a.sv[i] = p->sv[i], a.so[i] = p->so[i];
        a.slse[i] = p->slse[i];
        a.sknew[i] = p->sknew[i], a.svnew[i] = p->svnew[i];
    }
    a.layout = (int)p->layout;
    a.cu_q = p->cu_q, a.cu_k = p->cu_k;
    a.seqlens = p->seqlens_k, a.kv_batch = p->kv_batch, a.kv_start = p->kv_start;
    a.pages = p->pages;
    a.pages_stride = p->pages_stride;
    a.page_size = (int)(p->page_size > 0 ? p->page_size : 1);
    a.num_pages = (int)p->num_pages, a.kv_rows = (int)p->kv_rows;
    a.capacity = (int)p->kv_capacity;
    a.B = (int)p->B, a.Sq = (int)p->Sq, a.Sk = (int)p->Sk, a.Hq = (int)p->Hq, a.Hkv = (int)p->Hkv;
    a.group = (int)(p->Hq / p->Hkv);
    a.D = (int)p->D, a.Dv = (int)p->Dv, a.s_new = (int)p->s_new;
    a.wl = p->wl, a.wr = p->wr;
    a.scale = p->scale;
    a.scale_log2 = (float)((double)p->scale * 1.4426950408889634);
    a.softcap = p->softcap;
    a.inv_softcap = p->softcap > 0.0f ? 1.0f / p->softcap : 0.0f;
    a.alibi = p->alibi;
    a.salibi[0] = p->salibi[0], a.salibi[1] = p->salibi[1];
    a.modified = p->softcap > 0.0f || p->alibi != NULL;
    a.m_tiles = (int)m_tiles_of(p);
    a.splits = splits_of(p);
    a.k_new = p->k_new, a.v_new = p->v_new;
    a.total_q = (int)p->total_q, a.total_k = (int)p->total_k;
    FLASHC_TRY(check_env_modes(fn));
    a.merge = merge_mode();
    if (a.merge == DEC_MERGE_AUTO) {
        /* v4 (v3's sums, its partial loads issued beside the LSE loads) while its grid (a
         * block a row and 32 columns) is at most 4 blocks a SM, else pdl: round 1 (2026-12-02)
         * had v3 ahead of pdl at B 1 and 4 (128 rows: 512 blocks) by 1-3% and behind at B 16
         * (2048 blocks) by 0.5-1.6%; v4 gave v3's bits at 1.01x / 1.01x / 1.005x at 1x4k, 1x32k,
         * 4x32k (2026-12-03, decode6's round A; bench/RESULTS.md) */
        const int64_t mblocks = p->B * p->Hq * p->Sq * ((p->Dv + 31) / 32);
        a.merge = mblocks <= 4 * (int64_t)sm_count() ? DEC_MERGE_V4 : DEC_MERGE_PDL;
    }
    if (a.merge != DEC_MERGE_V1 && p->B * p->Hq * p->Sq > 0x7fffffff)
        a.merge = DEC_MERGE_V1; /* v2's grid is one block a row */
    int major = 0;
    FLASHC_TRY(device_major(fn, &major));

    const size_t ws = workspace_of(p, a.splits);
    void *own = NULL;
    if (ws > 0) {
        attn_scratch sc;
        attn_scratch_init(&sc, p);
        void *base;
        if (sc.base) {
            base = sc.base; /* the core checked workspace_bytes >= ws */
        } else {
            const cudaError_t err = cuda_scratch_alloc(&own, ws, stream);
            if (err != cudaSuccess)
                return flashc__fail(FLASHC_ERR_OUT_OF_MEMORY,
                                    "%s: cudaMallocAsync of the %zu-byte split-KV workspace "
                                    "failed: %s",
                                    fn, ws, cudaGetErrorString(err));
            base = (void *)(((uintptr_t)own + 63) & ~(uintptr_t)63);
        }
        const size_t rows = (size_t)p->B * (size_t)p->Hq * (size_t)p->Sq * (size_t)a.splits;
        a.part_o = (float *)base;
        const size_t lse_off = (rows * (size_t)p->Dv * sizeof(float) + 63) / 64 * 64;
        a.part_lse = (float *)((char *)base + lse_off);
    }

    const int di = head_dim_instance(p);
    const bool sm90 = major >= 9;
    cudaError_t err = p->dtype == FLASHC_BF16
                          ? dec_run_all<__nv_bfloat16>(a, di, sm90, var_of(p), stream)
                          : dec_run_all<__half>(a, di, sm90, var_of(p), stream);
    if (own) {
        const cudaError_t ferr = cuda_scratch_free(own, stream);
        if (err == cudaSuccess)
            err = ferr;
    }
    if (err != cudaSuccess)
        return cuda_device_error(fn, "launching the KV-cache/varlen attention kernels", err);

    const int64_t tiles_total = p->B * p->Hq * ((p->Sq + DEC_BM - 1) / DEC_BM) *
                                ((p->Sk + DEC_BN - 1) / DEC_BN);
    stats->tile_pairs = tiles_total; /* lengths live on the device: the maxima's count */
    stats->tile_pairs_total = tiles_total;
    stats->block_q = DEC_BM;
    stats->block_k = DEC_BN;
    stats->num_splits = a.splits;
    stats->workspace_bytes = (int64_t)ws;
    return FLASHC_OK;
}

/* ---- flashc_attn_merge on CUDA tensors ------------------------------------------------------ */

namespace {

struct merge_args {
    const void *o1, *o2;
    void *o;
    const float *l1, *l2;
    float *l;
    flashc_dtype t1, t2, to;
    int64_t s1[4], s2[4], so[4], sl1[3], sl2[3], sl[3];
    int B, S, H, D;
};

__device__ __forceinline__ float merge_load(const void *p, flashc_dtype t, int64_t i)
{
    if (t == FLASHC_F32)
        return ((const float *)p)[i];
    if (t == FLASHC_BF16)
        return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    return __half2float(((const __half *)p)[i]);
}

__device__ __forceinline__ void merge_store(void *p, flashc_dtype t, int64_t i, float x)
{
    if (t == FLASHC_F32)
        ((float *)p)[i] = x;
    else if (t == FLASHC_BF16)
        ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(x);
    else
        ((__half *)p)[i] = __float2half_rn(x);
}

/* One warp per (b, s, h) row; float32 math, o rounded once (as the host version). */
__global__ void __launch_bounds__(128) attn_merge_kernel(const merge_args a)
{
    const int64_t row = (int64_t)blockIdx.x * 4 + threadIdx.x / 32;
    const int lane = (int)threadIdx.x % 32;
    if (row >= (int64_t)a.B * a.S * a.H)
        return;
    const int h = (int)(row % a.H), s = (int)(row / a.H % a.S), b = (int)(row / a.H / a.S);
    const float x = a.l1[b * a.sl1[0] + h * a.sl1[1] + s * a.sl1[2]];
    const float y = a.l2[b * a.sl2[0] + h * a.sl2[1] + s * a.sl2[2]];
    const float m = fmaxf(x, y);
    float wa = 0.0f, wb = 0.0f, L = -INFINITY;
    if (isnan(x) || isnan(y)) { /* NaN never passes (fmaxf would drop it) */
        wa = wb = L = NAN;
    } else if (m != -INFINITY) {
        const float ea = expf(x - m), eb = expf(y - m), sum = ea + eb;
        wa = ea / sum, wb = eb / sum;
        L = m + logf(sum);
    }
    const bool use_a = x != -INFINITY, use_b = y != -INFINITY; /* an empty state is not read */
    const int64_t ra = b * a.s1[0] + s * a.s1[1] + h * a.s1[2];
    const int64_t rb = b * a.s2[0] + s * a.s2[1] + h * a.s2[2];
    const int64_t ro = b * a.so[0] + s * a.so[1] + h * a.so[2];
    for (int d = lane; d < a.D; d += 32)
        merge_store(a.o, a.to, ro + d * a.so[3],
                    (use_a ? wa * merge_load(a.o1, a.t1, ra + d * a.s1[3]) : 0.0f) +
                        (use_b ? wb * merge_load(a.o2, a.t2, rb + d * a.s2[3]) : 0.0f));
    if (lane == 0 && a.l)
        a.l[b * a.sl[0] + h * a.sl[1] + s * a.sl[2]] = L;
}

} /* namespace */

extern "C" flashc_status cuda_attn_merge(const flashc_tensor *o1, const flashc_tensor *lse1,
                                         const flashc_tensor *o2, const flashc_tensor *lse2,
                                         flashc_tensor *o, flashc_tensor *lse)
{
    static const char fn[] = "flashc_attn_merge";
    FLASHC_TRY(cuda_check_no_pending_error(fn));
    const flashc_tensor *ts[6] = {o1, o2, o, lse1, lse2, lse};
    const char *names[6] = {"o1", "o2", "o", "lse1", "lse2", "lse"};
    for (int i = 0; i < 6; i++) {
        if (!ts[i])
            continue;
        const size_t es = flashc_dtype_size(ts[i]->dtype);
        if ((uintptr_t)ts[i]->data % es != 0)
            return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT, "%s: %s is not element-aligned", fn,
                                names[i]);
        FLASHC_TRY(cuda_check_memory(fn, names[i], ts[i]->data));
    }
    merge_args a;
    memset(&a, 0, sizeof a);
    a.o1 = o1->data, a.o2 = o2->data, a.o = o->data;
    a.l1 = (const float *)lse1->data, a.l2 = (const float *)lse2->data;
    a.l = lse ? (float *)lse->data : NULL;
    a.t1 = o1->dtype, a.t2 = o2->dtype, a.to = o->dtype;
    for (int i = 0; i < 4; i++)
        a.s1[i] = o1->stride[i], a.s2[i] = o2->stride[i], a.so[i] = o->stride[i];
    for (int i = 0; i < 3; i++) {
        a.sl1[i] = lse1->stride[i], a.sl2[i] = lse2->stride[i];
        a.sl[i] = lse ? lse->stride[i] : 0;
    }
    a.B = (int)o1->shape[0], a.S = (int)o1->shape[1], a.H = (int)o1->shape[2];
    a.D = (int)o1->shape[3];
    for (int i = 0; i < 4; i++)
        if (o1->shape[i] > 0x7fffffff)
            return flashc__fail(FLASHC_ERR_UNSUPPORTED, "%s: a dim above 2^31 - 1 on CUDA", fn);
    const int64_t rows = (int64_t)a.B * a.S * a.H;
    if (rows > ((int64_t)1 << 33))
        return flashc__fail(FLASHC_ERR_UNSUPPORTED, "%s: more than 2^33 rows on CUDA", fn);
    attn_merge_kernel<<<(unsigned)((rows + 3) / 4), 128>>>(a);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess)
        return cuda_device_error(fn, "launching the merge kernel", err);
    return FLASHC_OK;
}
