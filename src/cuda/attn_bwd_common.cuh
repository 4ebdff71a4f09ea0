/*
 * attn_bwd_common.cuh — what the backward's kernel families (attn_bwd_sm80.cu, attn_bwd_sm90*.cu)
 * share: the preprocess (D = rowsum(dO * O), the float32 dQ accumulator zeroed, deterministic
 * mode's turn counters zeroed) and the postprocess (dQ = scale * accumulator in the storage
 * dtype). Both are memory-bound one-pass kernels; the families differ only in the main kernel.
 * Below them the main kernels' shared pieces: key ranges, score modifiers and, for the sm_90a
 * families, the dQ = dS K product.
 */
#ifndef FLASHC_CUDA_ATTN_BWD_COMMON_CUH
#define FLASHC_CUDA_ATTN_BWD_COMMON_CUH

#include "attn_cuda.cuh"
#include "ptx.cuh"
#include "ptx_sm90.cuh"

#include <math.h>

/* ---- preprocess: D = rowsum(dO * O), zero the accumulators ----------------------------------- */

/* The dot product of o and dout over their first dv columns (dv <= D, the instance's), summed
 * over the warp (every lane returns it). Pairs of 4-byte loads where both columns exist, the
 * last odd column alone (nothing past column dv - 1 is read). */
template <typename T, int D>
static __device__ __forceinline__ float bwd_row_dot(const T *o, const T *dout, int dv, int lane)
{
    float acc = 0.0f;
#pragma unroll
    for (int d = 2 * lane; d < D; d += 64) {
        if (d + 1 < dv) {
            const float2 x = ptx_unpack2(T(), *(const uint32_t *)(o + d));
            const float2 y = ptx_unpack2(T(), *(const uint32_t *)(dout + d));
            acc = fmaf(x.x, y.x, fmaf(x.y, y.y, acc));
        } else if (d < dv) {
            acc = fmaf((float)o[d], (float)dout[d], acc);
        }
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
        acc += __shfl_xor_sync(0xffffffffu, acc, off);
    return acc;
}

/* Stores columns (d, d + 1) of a row of n columns (d even): one 4-byte store where both exist
 * (the row 4-byte aligned: its strides are multiples of 8 elements), else column d alone. */
template <typename T>
static __device__ __forceinline__ void bwd_store_pair(T *row, int d, int n, float x, float y)
{
    const uint32_t pair = ptx_pack2(T(), x, y);
    if (d + 1 < n)
        *(uint32_t *)(row + d) = pair;
    else if (d < n)
        ((unsigned short *)row)[d] = (unsigned short)(pair & 0xffff);
}

/* One warp per query row, rows in (b, h, s) order. BM: the main kernel's Q block (for the turn
 * counters, one per (b, h, Q block, slice)). */
template <typename T, int D, int BM, int SPLIT>
__global__ void __launch_bounds__(128) attn_bwd_pre_kernel(const attn_bwd_args a)
{
    const int lane = (int)threadIdx.x % 32;
    const int64_t row = (int64_t)blockIdx.x * 4 + (int)threadIdx.x / 32;
    if (row >= (int64_t)a.B * a.Hq * a.Sq)
        return;
    const int s = (int)(row % a.Sq);
    const int64_t bh = row / a.Sq;
    const int h = (int)(bh % a.Hq), b = (int)(bh / a.Hq);
    const T *o = (const T *)a.o + b * a.so[0] + (int64_t)s * a.so[1] + h * a.so[2];
    const T *dout = (const T *)a.dout + b * a.sdo[0] + (int64_t)s * a.sdo[1] + h * a.sdo[2];
    const float acc = bwd_row_dot<T, D>(o, dout, a.Dv, lane);
    if (lane == 0)
        a.dsum[row] = acc;
    for (int pl = 0; pl < a.planes; pl++) {
        float4 *dq = (float4 *)(a.dq_acc + pl * a.dq_plane + row * D);
#pragma unroll
        for (int d = lane; d < D / 4; d += 32)
            dq[d] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (a.deterministic && s % BM == 0 && lane < SPLIT) {
            const int n_mb = (a.Sq + BM - 1) / BM;
            a.sem[pl * a.sem_plane + (bh * n_mb + s / BM) * SPLIT + lane] = 0;
        }
    }
}

/* Launches the preprocess over the dense problem on stream (every dense launcher's). */
template <typename T, int D, int BM, int SPLIT>
static cudaError_t attn_bwd_pre_launch(const attn_bwd_args *a, cudaStream_t stream)
{
    const int64_t rows = (int64_t)a->B * a->Hq * a->Sq;
    attn_bwd_pre_kernel<T, D, BM, SPLIT><<<(unsigned)((rows + 3) / 4), 128, 0, stream>>>(*a);
    return cudaGetLastError();
}

/* ---- postprocess: dQ = scale * accumulator in the storage dtype ----------------------------- */

template <typename T, int D> __global__ void __launch_bounds__(256) attn_bwd_post_kernel(const attn_bwd_args a)
{
    const int64_t pairs = (int64_t)a.B * a.Hq * a.Sq * (D / 2);
    for (int64_t x = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; x < pairs;
         x += (int64_t)gridDim.x * blockDim.x) {
        const int64_t row = x / (D / 2);
        const int d = (int)(x % (D / 2)) * 2;
        const int s = (int)(row % a.Sq);
        const int64_t bh = row / a.Sq;
        const int h = (int)(bh % a.Hq), b = (int)(bh / a.Hq);
        if (d >= a.D) /* a padded column */
            continue;
        const float2 v = *(const float2 *)(a.dq_acc + row * D + d);
        T *dq = (T *)a.dq + b * a.sdq[0] + (int64_t)s * a.sdq[1] + h * a.sdq[2];
        bwd_store_pair(dq, d, a.D, v.x * a.scale, v.y * a.scale);
    }
}

/* dQ = scale * accumulator in the storage dtype, 8 features per thread (two 16-byte loads, one
 * 16-byte store: check_operand gave dq 16-byte rows); the Hopper families' postprocess. (batch, head) on grid y, so a thread
 * divides nothing by Sq (the shared postprocess does two 64-bit divisions per feature pair:
 * ALU-bound, 84 us at d 128 4k against cuDNN's 54 in the 21:36 profile). PAD: dq has a.D <= D
 * columns, a multiple of 8 (sm90v3u's padded entries): the chunks past a.D skipped; without
 * PAD a.D == D. */
template <typename T, int D, bool PAD = false>
__global__ void __launch_bounds__(256) attn_bwd_post_bh_kernel(const attn_bwd_args a)
{
    constexpr int CPR = D / 8;
    const int64_t per_bh = (int64_t)a.Sq * CPR;
    for (int bh = (int)blockIdx.y; bh < a.B * a.Hq; bh += (int)gridDim.y) {
        const int b = bh / a.Hq, h = bh % a.Hq;
        const float *acc = a.dq_acc + (int64_t)bh * a.Sq * D;
        T *dq = (T *)a.dq + b * a.sdq[0] + h * a.sdq[2];
        for (int64_t x = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; x < per_bh;
             x += (int64_t)gridDim.x * blockDim.x) {
            const int64_t s = x / CPR;
            const int c = (int)(x % CPR) * 8;
            if (PAD && c >= a.D) /* a padded chunk */
                continue;
            float4 v0 = __ldcs((const float4 *)(acc + s * D + c));
            float4 v1 = __ldcs((const float4 *)(acc + s * D + c + 4));
            /* deterministic mode's other planes, added in plane order (attn_bwd_args) */
            for (int pl = 1; pl < a.planes; pl++) {
                const float4 w0 = __ldcs((const float4 *)(acc + pl * a.dq_plane + s * D + c));
                const float4 w1 = __ldcs((const float4 *)(acc + pl * a.dq_plane + s * D + c + 4));
                v0.x += w0.x, v0.y += w0.y, v0.z += w0.z, v0.w += w0.w;
                v1.x += w1.x, v1.y += w1.y, v1.z += w1.z, v1.w += w1.w;
            }
            uint4 o;
            o.x = ptx_pack2(T(), v0.x * a.scale, v0.y * a.scale);
            o.y = ptx_pack2(T(), v0.z * a.scale, v0.w * a.scale);
            o.z = ptx_pack2(T(), v1.x * a.scale, v1.y * a.scale);
            o.w = ptx_pack2(T(), v1.z * a.scale, v1.w * a.scale);
            *(uint4 *)(dq + s * a.sdq[1] + c) = o;
        }
    }
}

/* Launches attn_bwd_post_bh_kernel over the whole problem on stream. */
template <typename T, int D, bool PAD = false>
static cudaError_t attn_bwd_post_bh_launch(const attn_bwd_args *a, cudaStream_t stream)
{
    const int64_t bx = ((int64_t)a->Sq * (D / 8) + 255) / 256;
    const int bh = a->B * a->Hq;
    const dim3 pgrid((unsigned)(bx < 8192 ? bx : 8192), (unsigned)(bh < 65535 ? bh : 65535), 1);
    attn_bwd_post_bh_kernel<T, D, PAD><<<pgrid, 256, 0, stream>>>(*a);
    return cudaGetLastError();
}

/* ---- varlen: the same two passes over packed rows --------------------------------------------
 * Rows x = h total_q + r, r the packed row (lse's (Hq, total_q) order): dq_acc (Hq, total_q, D),
 * dsum (Hq, total_q). Every packed row is visited, those of no sequence too (r >= cu_q[B]):
 * their accumulator stays 0, so the postprocess writes dq = 0 there, as the CPU backward's
 * core clears them (api_attn.c, clear_unowned_rows). Deterministic mode's turn counters are
 * zeroed by a memset (their (b, h, m) index has no packed row to hang on). */
template <typename T, int D>
__global__ void __launch_bounds__(128) attn_bwd_pre_varlen_kernel(const attn_bwd_args a)
{
    const int lane = (int)threadIdx.x % 32;
    const int64_t row = (int64_t)blockIdx.x * 4 + (int)threadIdx.x / 32;
    if (row >= (int64_t)a.Hq * a.total_q)
        return;
    const int r = (int)(row % a.total_q), h = (int)(row / a.total_q);
    const T *o = (const T *)a.o + (int64_t)r * a.so[1] + h * a.so[2];
    const T *dout = (const T *)a.dout + (int64_t)r * a.sdo[1] + h * a.sdo[2];
    const float acc = bwd_row_dot<T, D>(o, dout, a.Dv, lane);
    if (lane == 0)
        a.dsum[row] = acc;
    float4 *dq = (float4 *)(a.dq_acc + row * D);
#pragma unroll
    for (int d = lane; d < D / 4; d += 32)
        dq[d] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
}

template <typename T, int D>
__global__ void __launch_bounds__(256) attn_bwd_post_varlen_kernel(const attn_bwd_args a)
{
    const int64_t pairs = (int64_t)a.Hq * a.total_q * (D / 2);
    for (int64_t x = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; x < pairs;
         x += (int64_t)gridDim.x * blockDim.x) {
        const int64_t row = x / (D / 2);
        const int d = (int)(x % (D / 2)) * 2;
        const int r = (int)(row % a.total_q), h = (int)(row / a.total_q);
        if (d >= a.D) /* a padded column */
            continue;
        const float2 v = *(const float2 *)(a.dq_acc + row * D + d);
        T *dq = (T *)a.dq + (int64_t)r * a.sdq[1] + h * a.sdq[2];
        bwd_store_pair(dq, d, a.D, v.x * a.scale, v.y * a.scale);
    }
}

/* dK = dV = 0 on the packed key rows of no sequence (r >= cu_k[B]), which no main-kernel block
 * owns (the CPU backward's contract, clear_unowned_rows); their first D / Dv columns. */
template <typename T, int D>
__global__ void __launch_bounds__(256) attn_bwd_clear_keys_varlen_kernel(const attn_bwd_args a)
{
    const int k_end = min(max(a.cu_k[a.B], 0), a.total_k);
    const int64_t pairs = ((int64_t)a.total_k - k_end) * a.Hkv * (D / 2);
    for (int64_t x = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; x < pairs;
         x += (int64_t)gridDim.x * blockDim.x) {
        const int64_t row = x / (D / 2);
        const int d = (int)(x % (D / 2)) * 2;
        const int r = k_end + (int)(row / a.Hkv), h = (int)(row % a.Hkv);
        bwd_store_pair((T *)a.dk + (int64_t)r * a.sdk[1] + h * a.sdk[2], d, a.D, 0.0f, 0.0f);
        bwd_store_pair((T *)a.dv + (int64_t)r * a.sdv[1] + h * a.sdv[2], d, a.Dv, 0.0f, 0.0f);
    }
}

/* Sequence b of a varlen problem: first packed rows q0, k0 and lengths sq, sk. The device
 * index arrays are clamped (attn_bwd_args): a sequence outside [0, total] is empty, a length
 * past the maximum is cut to it, so no block reads or writes outside the tensors. */
struct bwd_seq {
    int q0, k0, sq, sk;
};

/* Releases a deterministic turn: *sem += 1 with release semantics at GPU scope, issued by the
 * one thread that a barrier (__syncthreads / __syncwarp, or its own bulk-group wait and proxy
 * fence) has ordered after every add of the turn. red.release is itself a release pattern (a
 * fence.acq_rel and the red) and cumulative over what that thread has observed, so the full
 * __threadfence (fence.sc.gpu) that used to precede it orders nothing more. Dropping it ran
 * deterministic mode 1.04-1.24x faster on an H100 (d 64-256, S 2k / 16k; bit-identical runs
 * and every test and sanitizer clean without it: bench/RESULTS.md, "Session of 2026-12-06,
 * midday"); FLASHC_CUDA_BWD_DET_FENCE=1 (attn_bwd_args.det_fence) brings it back, to
 * measure what it cost. */
static __device__ __forceinline__ void bwd_release_turn(const attn_bwd_args &a, int *sem)
{
    if (a.det_fence)
        __threadfence();
    ptx_red_release_gpu_add(sem, 1);
}

static __device__ __forceinline__ bwd_seq bwd_seq_of(const attn_bwd_args &a, int b)
{
    const int q0 = __ldg(a.cu_q + b), q1 = __ldg(a.cu_q + b + 1);
    const int k0 = __ldg(a.cu_k + b), k1 = __ldg(a.cu_k + b + 1);
    bwd_seq s;
    const bool qok = q0 >= 0 && q1 <= a.total_q, kok = k0 >= 0 && k1 <= a.total_k;
    s.q0 = qok ? q0 : 0, s.k0 = kok ? k0 : 0;
    s.sq = qok ? min(max(q1 - q0, 0), a.Sq) : 0;
    s.sk = kok ? min(max(k1 - k0, 0), a.Sk) : 0;
    return s;
}

/* LSE log2 e from the raw LSE; -inf (the row saw no key) becomes +inf, so P = 2^(x - l) = 0 */
static __device__ __forceinline__ float bwd_lse_log2(float lse)
{
    return lse > -INFINITY ? lse * 1.4426950408889634f : INFINITY;
}

/* Rows [0, ROWS) of a tile whose row r is at g + r * row_stride into the panels at shared
 * address s (chunk c of row r: panel c / 8, row r, chunk (c mod 8) ^ (r mod 8)); rows >=
 * valid_rows zero-filled. All THREADS threads take part (the cp.async loaders of sm90,
 * sm90v2). */
template <typename T, int D, int ROWS, int THREADS>
static __device__ __forceinline__ void bwd_load_tile(uint32_t s, const T *g, int64_t row_stride,
                                                     int valid_rows)
{
    constexpr int CPR = D / 8, CHUNKS = ROWS * CPR;
    static_assert(CHUNKS % THREADS == 0, "every thread copies the same number of chunks");
#pragma unroll
    for (int i = 0; i < CHUNKS / THREADS; i++) {
        const int idx = i * THREADS + (int)threadIdx.x;
        const int r = idx / CPR, c = idx % CPR;
        const bool valid = r < valid_rows;
        const T *src = g + (valid ? (int64_t)r * row_stride : 0) + c * 8;
        ptx_cp_async_16(s + (uint32_t)((c / 8) * ROWS * 128 + r * 128 + (((c % 8) ^ (r % 8)) * 16)),
                        src, valid);
    }
}

/* ---- key ranges and score modifiers, shared by the main kernels ------------------------------
 * Row i sees key j iff lo_off <= j - i <= hi_off with hi_off = diag + wr (wr >= 0, else no
 * upper bound) and lo_off = diag - wl (wl >= 0, else none), diag = Sk - Sq: attn_key_range with
 * the row's position a_i = i + diag. Under the causal mask wr = 0. */
struct bwd_range {
    int diag, lo_off, hi_off;
    bool has_lo, has_hi;
};

static __device__ __forceinline__ bwd_range bwd_range_of(const attn_bwd_args &a)
{
    bwd_range r;
    r.diag = a.Sk - a.Sq;
    r.has_lo = a.wl >= 0, r.has_hi = a.wr >= 0;
    r.lo_off = r.diag - (r.has_lo ? a.wl : 0);
    r.hi_off = r.diag + (r.has_hi ? a.wr : 0);
    return r;
}

/* The Q blocks [*mb, *me) of BM rows with a row that sees a key of [n0, n0 + bn). */
static __device__ __forceinline__ void bwd_q_blocks(const attn_bwd_args &a, const bwd_range &r,
                                                    int n0, int bn, int BM, int *mb, int *me)
{
    const int n_mb = (a.Sq + BM - 1) / BM;
    /* first row: i >= n0 - hi_off; last row: i <= n0 + bn - 1 - lo_off (int64: the sums may
     * pass 2^31 at the limits of the sizes) */
    const int64_t first = r.has_hi ? max((int64_t)0, (int64_t)n0 - r.hi_off) : 0;
    const int64_t last = r.has_lo ? (int64_t)n0 + bn - 1 - r.lo_off : (int64_t)a.Sq - 1;
    *mb = (int)min(first / BM, (int64_t)n_mb);
    *me = last < 0 ? 0 : (int)min(last / BM + 1, (int64_t)n_mb);
}

/* The same for one sequence of lengths (sq, sk) (varlen: per-sequence bottom-right alignment;
 * the dense helpers above read a.Sq, a.Sk). */
static __device__ __forceinline__ bwd_range bwd_range_of(const attn_bwd_args &a, int sq, int sk)
{
    bwd_range r;
    r.diag = sk - sq;
    r.has_lo = a.wl >= 0, r.has_hi = a.wr >= 0;
    r.lo_off = r.diag - (r.has_lo ? a.wl : 0);
    r.hi_off = r.diag + (r.has_hi ? a.wr : 0);
    return r;
}

static __device__ __forceinline__ void bwd_q_blocks(int sq, const bwd_range &r, int n0, int bn,
                                                    int BM, int *mb, int *me)
{
    const int n_mb = (sq + BM - 1) / BM;
    const int64_t first = r.has_hi ? max((int64_t)0, (int64_t)n0 - r.hi_off) : 0;
    const int64_t last = r.has_lo ? (int64_t)n0 + bn - 1 - r.lo_off : (int64_t)sq - 1;
    *mb = (int)min(first / BM, (int64_t)n_mb);
    *me = last < 0 ? 0 : (int)min(last / BM + 1, (int64_t)n_mb);
}

static __device__ __forceinline__ bool bwd_tile_needs_mask(int sk, const bwd_range &r, int m0,
                                                           int bm, int n0, int bn)
{
    return n0 + bn > sk || (r.has_hi && n0 + bn - 1 - m0 > r.hi_off) ||
           (r.has_lo && n0 - (m0 + bm - 1) < r.lo_off);
}

/* FLASHC_CUDA_BWD_TRACE's block header (bwd_trace.cuh; the traced twins of attn_bwd_sm90h.cu and
 * attn_bwd_sm90v3.cu): words 0 / 1 %globaltimer / %clock64 as the consumers start, 4 %smid, 5
 * the K block, 6 batch x KV head, 7 the steps; bwd_trace_head_end: words 2 / 3 as they end. */
static __device__ __forceinline__ void bwd_trace_head_start(uint64_t *r, int n_block, int bh,
                                                            int total)
{
    r[0] = ptx_globaltimer();
    r[1] = ptx_clock64();
    r[4] = ptx_smid();
    r[5] = (uint64_t)n_block;
    r[6] = (uint64_t)bh;
    r[7] = (uint64_t)total;
}
static __device__ __forceinline__ void bwd_trace_head_end(uint64_t *r)
{
    r[2] = ptx_globaltimer();
    r[3] = ptx_clock64();
}
/* This thread block's record in buf (HDR header words, then ITW words a step, maxit steps a
 * block; blocks in linear order y * gridDim.x + x), its address recomputed at each use rather
 * than held through a kernel's loop; bwd_trace_put: word k of step it gets v (it < maxit). */
template <int HDR, int ITW>
static __device__ __forceinline__ uint64_t *bwd_trace_row(uint64_t *buf, int maxit)
{
    return buf + ((uint64_t)blockIdx.y * gridDim.x + ptx_block_index()) *
                     (HDR + ITW * (uint64_t)maxit);
}
template <int HDR, int ITW>
static __device__ __forceinline__ void bwd_trace_put(uint64_t *buf, int maxit, int it, int k,
                                                     uint64_t v)
{
    if (it < maxit)
        bwd_trace_row<HDR, ITW>(buf, maxit)[HDR + (int64_t)it * ITW + k] = v;
}

/* Deterministic mode: the turn of K block nb (of n_kb, BN keys each) at Q block m (BM rows).
 * The K blocks that visit Q block m (bwd_q_blocks) are a contiguous range [first(m), last(m)].
 * With an upper bound (causal, or a window's right side) they add in descending order, turn =
 * last(m) - nb, and the launch order is reversed (see attn_bwd_sm80.cu); otherwise ascending,
 * turn = nb - first(m). Either way a block waits only on blocks launched before it. */
static __device__ __forceinline__ int bwd_turn(const bwd_range &r, int nb, int n_kb, int m,
                                               int BM, int BN)
{
    if (r.has_hi) {
        /* nb visits m iff nb BN <= (m + 1) BM - 1 + hi_off */
        const int64_t x = (int64_t)(m + 1) * BM - 1 + r.hi_off; /* >= 0: m is visited */
        return (int)min((int64_t)n_kb - 1, x / BN) - nb;
    }
    if (!r.has_lo)
        return nb;
    /* nb visits m iff nb BN >= m BM - BN + 1 + lo_off */
    const int64_t x = (int64_t)m * BM - BN + 1 + r.lo_off;
    return nb - (x <= 0 ? 0 : (int)((x + BN - 1) / BN));
}

/* Deterministic mode, blocks in groups of heads (bwd90v3_grouped's order, attn_bwd_sm90v3.cu,
 * where the argument is written out; sm90h's grouped families, which used it too, were measured
 * slower on 2026-12-06 and removed, bench/RESULTS.md): which
 * (K block *n_block, batch x head *bh) this thread block runs, from its linear index in the grid
 * (N K blocks, BH): group by group of G heads, K block by K block, head by head. Block n of a
 * head then starts G places in the linear order after block n - 1 (rev: after block n + 1, the
 * K blocks reversed, as bwd_turn orders them under an upper key bound), which with
 * G = ceil(4 SMs / steps) (steps: a block's Q blocks of BM rows over the group's heads) is about
 * four Q blocks later once the GPU is full, so that its turns are ready when it reaches them.
 * The turns are untouched, so the dQ order and bits are those of the head-by-head order.
 * (bwd90v3_grouped calls it with BM = 64.) */
static __device__ __forceinline__ void bwd_grouped_order(const attn_bwd_args &a, int BM, bool rev,
                                                         int *n_block, int *bh)
{
    const unsigned nsm = ptx_nsmid(); /* SM ids (>= the SM count; a heuristic only) */
    const int N = (int)gridDim.x, BH = (int)gridDim.y;
    const int64_t steps = max((int64_t)1, (int64_t)a.group * ((a.Sq + BM - 1) / BM));
    const int G = (int)min((int64_t)BH, max((int64_t)1, (4 * (int64_t)nsm + steps - 1) / steps));
    const int64_t lin = (int64_t)blockIdx.y * N + ptx_block_index();
    const int grp = (int)(lin / ((int64_t)G * N));
    const int r = (int)(lin - (int64_t)grp * G * N);
    const int gc = min(G, BH - grp * G); /* the last group's heads */
    *n_block = rev ? N - 1 - r / gc : r / gc;
    *bh = grp * G + r % gc;
}

/* Which (K block *n_block, batch x head *bh) this thread block runs.
 * - Deterministic mode under an upper key bound (causal, a right window): the K blocks of a
 *   head reversed (bwd_turn's order: block n's turn comes after block n + 1's), head by head.
 * - Fast mode under an upper key bound, a.order_tail = R > 0: K block n of a head visits more
 *   Q blocks than n + 1 (causal: every row from its diagonal down), so head by head every head
 *   ends on its shortest block but starts on its longest, the last head too: that block starts
 *   about when the other SMs run out of work, and the grid's tail is its length (a list
 *   schedule: the average + the longest job started last). So the last R heads are walked K
 *   block by K block (all their blocks 0, then all their blocks 1, ...): their longest blocks
 *   start a few waves before the end and their short ones fill the tail. Only those R heads:
 *   walking every head so (groups of heads, K block by K block) left a wave fewer blocks of each
 *   head to share its Q and dO rows in L2 and measured 0.61-1.08x head by head (H100,
 *   2026-12-06 evening, bench/RESULTS.md).
 * - Elsewhere (every block of a head the same length): head by head. */
static __device__ __forceinline__ void bwd_block_of(const attn_bwd_args &a, const bwd_range &rg,
                                                    bool det, int *n_block, int *bh)
{
    if (!det && rg.has_hi && a.order_tail > 0) {
        const int N = (int)gridDim.x, BH = (int)gridDim.y, R = min(a.order_tail, BH);
        const int64_t lin = (int64_t)blockIdx.y * N + ptx_block_index();
        const int64_t head_major = (int64_t)(BH - R) * N; /* the blocks before the tail */
        if (lin < head_major) {
            *n_block = (int)(lin % N), *bh = (int)(lin / N);
        } else {
            const int r = (int)(lin - head_major);
            *n_block = r / R, *bh = BH - R + r % R;
        }
        return;
    }
    *n_block = det && rg.has_hi ? (int)gridDim.x - 1 - ptx_block_index() : ptx_block_index();
    *bh = (int)blockIdx.y;
}

/* Whether key - row = rel lies outside the row's range. */
static __device__ __forceinline__ bool bwd_outside(const bwd_range &r, int rel)
{
    return (r.has_hi && rel > r.hi_off) || (r.has_lo && rel < r.lo_off);
}

/* Whether some (row, key) of rows [m0, m0 + bm) x keys [n0, n0 + bn) needs a mask: the Sk
 * tail or a range bound crossing the tile. */
static __device__ __forceinline__ bool bwd_tile_needs_mask(const attn_bwd_args &a,
                                                           const bwd_range &r, int m0, int bm,
                                                           int n0, int bn)
{
    return n0 + bn > a.Sk || (r.has_hi && n0 + bn - 1 - m0 > r.hi_off) ||
           (r.has_lo && n0 - (m0 + bm - 1) < r.lo_off);
}

/* P and dS of one score s = q.k (unscaled) under softcap and ALiBi (slope 0 without), for a
 * (row, key) inside the range; rel = key - row - diag = j - a_i. l: LSE log2 e (+inf: P = 0).
 * P = exp(mod(scale s) - LSE), dS = P (dP - D) mod', mod' = 1 - tanh^2 under softcap (the
 * bias has no gradient), as src/ref/attn_bwd.c. tanhf, not tanh.approx: the derivative
 * 1 - t^2 loses the relative accuracy of t near |t| = 1. */
static __device__ __forceinline__ void bwd_mod_elem(const attn_bwd_args &a, float slope, float s,
                                                    float dp, float l, float dsum, int rel,
                                                    float *p_out, float *ds_out)
{
    float u = s * a.scale, dcap = 1.0f;
    if (a.softcap > 0.0f) {
        const float th = tanhf(u / a.softcap);
        u = a.softcap * th;
        dcap = 1.0f - th * th;
    }
    u -= slope * fabsf((float)rel);
    const float p = ptx_exp2(fmaf(u, 1.4426950408889634f, -l));
    *p_out = p;
    *ds_out = p * (dp - dsum) * dcap;
}

/* The ALiBi slope of (b, h), 0 without ALiBi. */
static __device__ __forceinline__ float bwd_slope(const attn_bwd_args &a, int b, int h)
{
    return a.alibi ? __ldg(a.alibi + b * a.salibi[0] + h * a.salibi[1]) : 0.0f;
}

#if FLASHC_PTX_SM90A
/* S^T and dP^T for one warpgroup of the sm_90a families (sm90, sm90v2, sm90v3): its 64 keys
 * [64 wg, +64) of the K / V block (sK, sV: [D / 64 panels][BN keys][128 B]) against the BM = 64
 * queries of the Q block's Q / dO (q_buf, do_buf: [D / 64 panels][BM rows][128 B]), k over the
 * head dim; all 128-byte swizzled. Issued after a fence as two committed groups, S^T first (so
 * the caller can wait for S^T alone and work on it while dP^T runs). */
template <typename T, int D, int BM, int BN>
static __device__ __forceinline__ void bwd_st_dpt_mma(float (&s)[8][4], float (&dp)[8][4],
                                                      uint32_t sK, uint32_t sV, uint32_t q_buf,
                                                      uint32_t do_buf, int wg)
{
    static_assert(BM == 64, "an m64n64 tile: the warpgroup's 64 keys x 64 queries");
    /* acc = (the warpgroup's keys of kv) (rows)^T, one committed group */
    auto product = [&](float(&acc)[8][4], uint32_t kv, uint32_t rows) {
#pragma unroll
        for (int ks = 0; ks < D / 16; ks++) {
            const uint32_t ka = kv + (ks / 4) * BN * 128 + wg * 64 * 128 + (ks % 4) * 32;
            const uint32_t rb = rows + (ks / 4) * BM * 128 + (ks % 4) * 32;
            ptx_wgmma_ss_m64n64k16<0>(T(), acc, ptx_wgmma_desc(ka, 16, 1024),
                                      ptx_wgmma_desc(rb, 16, 1024), ks > 0);
        }
        ptx_wgmma_commit();
    };
    ptx_wgmma_fence();
    product(s, sK, q_buf);
    product(dp, sV, do_buf);
}

/* dQ = dS K for one warpgroup of the sm_90a families (sm90, sm90v2, sm90v3): acc is the m64n64
 * tile of the BM = 64 queries of a Q block x 64 columns, issued after a fence and committed
 * as one group (the caller waits). sdS: the Q block's dS, [BN / 64 panels][64 queries][128 B],
 * panel p = keys [64 p, +64), 128-byte swizzled; sK: the K/V block's K, [D / 64 panels][BN
 * keys][128 B]. wg selects what the warpgroup's tile covers:
 *  - DQ_BY_KEYS (d 64): all 64 features over keys [64 wg, +64), its own dS panel only, so no
 *    other warpgroup's dS is needed (the partial tiles of the warpgroups add up in dq_acc);
 *  - else (d 128): features [64 wg, +64) (K's panel wg) over all BN keys, every dS panel. */
template <typename T, int BM, int BN, bool DQ_BY_KEYS>
static __device__ __forceinline__ void bwd_dq_mma(float (&acc)[8][4], uint32_t sdS, uint32_t sK,
                                                  int wg)
{
    static_assert(BM == 64 && BN % 64 == 0, "an m64n64 tile; dS panels of 64 keys");
    ptx_wgmma_fence();
    if constexpr (DQ_BY_KEYS) {
#pragma unroll
        for (int ks = 0; ks < 4; ks++) {
            const uint32_t dsa = sdS + wg * BM * 128 + ks * 32;
            const uint32_t kb = sK + (wg * 64 + ks * 16) * 128;
            ptx_wgmma_ss_m64n64k16<1>(T(), acc, ptx_wgmma_desc(dsa, 16, 1024),
                                      ptx_wgmma_desc(kb, BN * 128, 1024), ks > 0);
        }
    } else {
#pragma unroll
        for (int ks = 0; ks < BN / 16; ks++) {
            const uint32_t dsa = sdS + (ks / 4) * BM * 128 + (ks % 4) * 32;
            const uint32_t kb = sK + wg * BN * 128 + ks * 16 * 128;
            ptx_wgmma_ss_m64n64k16<1>(T(), acc, ptx_wgmma_desc(dsa, 16, 1024),
                                      ptx_wgmma_desc(kb, BN * 128, 1024), ks > 0);
        }
    }
    ptx_wgmma_commit();
}
#endif

#endif /* FLASHC_CUDA_ATTN_BWD_COMMON_CUH */
