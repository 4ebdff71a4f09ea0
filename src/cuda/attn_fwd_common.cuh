/*
 * attn_fwd_common.cuh — what every forward kernel shares: the order of thread blocks, and the
 * masking and online-softmax steps that run on the score accumulators, whatever instruction
 * produced them (mma.sync in attn_fwd_sm80.cu, wgmma in attn_fwd_sm90.cu): both leave a thread
 * with the same m16n8 C layout per 16-row tile (rows g and g + 8, columns 2t and 2t + 1 of each
 * 8-column tile; lane = 4 g + t), so s[MI][NT][4] describes either: MI 16-row tiles of this warp, NT 8-key column tiles.
 *
 * Which keys a row sees is asked in one place per path: mask_block ("keys [0, limit)" per row,
 * the plain dense problem) and mods_block (a per-row key range [lo, hi) with the score
 * modifiers: windows, varlen, softcap, ALiBi).
 */
#ifndef FLASHC_CUDA_ATTN_FWD_COMMON_CUH
#define FLASHC_CUDA_ATTN_FWD_COMMON_CUH

#include "attn_cuda.cuh"
#include "ptx.cuh"

#include <math.h>

/* The (Q tile, batch, head) of thread block `block`. Order (see attn_fwd_args.head_group):
 * heads in groups whose K/V fit in L2; within a group, the last Q tiles (the heaviest under
 * the causal mask) of all its heads first, so the longest jobs start first. */
template <int BM>
static __device__ __forceinline__ void block_coords(const attn_fwd_args &a, int block,
                                                    int *m_block, int *b, int *h)
{
    const int n_mblocks = (a.Sq + BM - 1) / BM;
    const int span = a.head_group * n_mblocks; /* blocks of one full group */
    const int grp = block / span, in_grp = block % span;
    const int heads_here = min(a.head_group, a.B * a.Hq - grp * a.head_group);
    const int bh = grp * a.head_group + in_grp % heads_here;
    *m_block = n_mblocks - 1 - in_grp / heads_here;
    *b = bh / a.Hq;
    *h = bh % a.Hq;
}

/* Sets to -inf the scores of keys a row may not see: past Sk, or past its causal limit.
 * row0: the thread's first row (tile mi, half 0); col0: its first key column. */
template <int MI, int NT>
static __device__ __forceinline__ void mask_block(float (&s)[MI][NT][4], const attn_fwd_args &a,
                                                  int row0, int col0, int diag)
{
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int row = row0 + mi * 16 + (e >= 2 ? 8 : 0);
            const int limit = a.causal ? min(a.Sk, row + 1 + diag) : a.Sk;
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
                if (col0 + nt * 8 + (e & 1) >= limit)
                    s[mi][nt][e] = -INFINITY;
        }
}

/* ---- masks and modifiers (the sm80 kernel's mods instances) --------------------------------
 * The v2 contract's two questions, asked of a tile's rows: which keys may row i see ([lo, hi),
 * attn_key_range in internal.h: bottom-right per sequence, window, causal folded into wr = 0)
 * and how a score is transformed (softcap, then ALiBi). */

/* Sequence b's lengths and first rows. Varlen: device cu_seqlens, clamped as the KV-cache
 * kernel clamps them (attn_decode.cu, dec_seqlens): an entry outside [0, total] makes the
 * sequence empty, a length past the maxima the launch was sized for is cut to them (the host
 * cannot check either). Dense: Sq, Sk and row 0 (the batch stride does the rest). */
static __device__ __forceinline__ void fwd_sequence(const attn_fwd_args &a, int b, int *sq,
                                                    int *sk, int *q0, int *k0)
{
    *sq = a.Sq, *sk = a.Sk, *q0 = 0, *k0 = 0;
    if (a.cu_q) {
        const int qa = a.cu_q[b], qb = a.cu_q[b + 1], ka = a.cu_k[b], kb = a.cu_k[b + 1];
        *sq = qa >= 0 && qb <= a.total_q ? min(max(qb - qa, 0), a.Sq) : 0;
        *sk = ka >= 0 && kb <= a.total_k ? min(max(kb - ka, 0), a.Sk) : 0;
        *q0 = *sq > 0 ? qa : 0; /* an empty side is never addressed */
        *k0 = *sk > 0 ? ka : 0;
    }
}

/* Varlen rows past cu_seqlens_q[B] belong to no sequence: zeros and LSE = -inf (flashc.h), the
 * same rows whatever cu_seqlens_q[B] holds, for the forward (A = attn_fwd_args) and the KV-cache
 * kernel (A = dec_args, attn_decode.cu). o: (total_q, Hq, unowned_width(a)) with strides so;
 * lse: (Hq, total_q) with strides slse. unowned_width (o's row width: Dv) is an overload
 * beside each A. One warp per (row, head), 4 per block of 128 threads.
 * One kernel template rather than a device helper under two kernels: that call, even inlined,
 * gave ptxas a differently ordered body (different SASS); this is the old body verbatim. */
static __device__ __forceinline__ int unowned_width(const attn_fwd_args &a) { return a.Dv; }

template <typename T, typename A>
__global__ void __launch_bounds__(128) attn_clear_unowned(const A a)
{
    const int64_t row = (int64_t)blockIdx.x * 4 + threadIdx.x / 32;
    const int lane = (int)threadIdx.x % 32;
    if (row >= (int64_t)a.total_q * a.Hq)
        return;
    const int r = (int)(row / a.Hq), h = (int)(row % a.Hq);
    if (r < a.cu_q[a.B])
        return;
    T *og = (T *)a.o + (int64_t)r * a.so[1] + (int64_t)h * a.so[2];
    for (int c = lane; c < unowned_width(a); c += 32)
        og[c] = T(0.0f);
    if (lane == 0 && a.lse)
        a.lse[(int64_t)h * a.slse[1] + (int64_t)r * a.slse[2]] = -INFINITY;
}

/* First key row i sees (row position a_i = i + diag, diag = Sk_b - Sq_b). In 64 bits: i may be
 * a tail row past the sequence and the bounds are only known to be below 2^30 each. */
static __device__ __forceinline__ int fwd_key_lo(const attn_fwd_args &a, int diag, int i)
{
    return a.wl >= 0 ? (int)max((int64_t)0, (int64_t)i + diag - a.wl) : 0;
}

/* One past the last key row i sees (<= sk; may be <= fwd_key_lo: the row sees nothing). */
static __device__ __forceinline__ int fwd_key_hi(const attn_fwd_args &a, int diag, int sk, int i)
{
    return a.wr >= 0 ? (int)min((int64_t)sk, (int64_t)i + diag + a.wr + 1) : sk;
}

/* Scores of one block into the log2 domain of the softmax (softmax_block with scale_log2 = 1):
 * x = scale s, softcap tanh(x / softcap) when softcap > 0, minus slope |a_i - j| for ALiBi,
 * times log2(e); with mask set, -inf outside each row's [lo, hi). The transform runs on
 * every block (it is not linear in s, so it cannot be folded into the exponent as the plain
 * kernel folds the scale); the mask only where the block is not inside every row's range.
 * slope_log2: this head's ALiBi slope times log2(e) (0 without ALiBi). row0: the thread's
 * first row (tile mi, half 0); col0: its first key column. */
template <int MI, int NT>
static __device__ __forceinline__ void mods_block(float (&s)[MI][NT][4], const attn_fwd_args &a,
                                                  int row0, int col0, int diag, int sk,
                                                  float slope_log2, bool mask)
{
    constexpr float LOG2E = 1.4426950408889634f;
    /* One pass per step, each behind a uniform branch: fused into one loop, the tanh of the
     * softcap and the per-row bounds were live at once beside S (ptxas: spills). */
    if (a.softcap > 0.0f) {
        const float cap_in = a.scale / a.softcap, cap_out = a.softcap * LOG2E;
#pragma unroll
        for (int mi = 0; mi < MI; mi++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    s[mi][nt][e] = cap_out * tanhf(s[mi][nt][e] * cap_in);
    } else {
#pragma unroll
        for (int mi = 0; mi < MI; mi++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    s[mi][nt][e] *= a.scale_log2;
    }
    if (a.alibi) {
#pragma unroll
        for (int mi = 0; mi < MI; mi++)
#pragma unroll
            for (int hr = 0; hr < 2; hr++) {
                const int pos = row0 + mi * 16 + 8 * hr + diag;
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
#pragma unroll
                    for (int c = 0; c < 2; c++)
                        s[mi][nt][2 * hr + c] -=
                            slope_log2 * (float)abs(pos - (col0 + nt * 8 + c));
            }
    }
    if (mask) {
#pragma unroll
        for (int mi = 0; mi < MI; mi++)
#pragma unroll
            for (int hr = 0; hr < 2; hr++) {
                const int row = row0 + mi * 16 + 8 * hr;
                const int lo = fwd_key_lo(a, diag, row), hi = fwd_key_hi(a, diag, sk, row);
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
#pragma unroll
                    for (int c = 0; c < 2; c++) {
                        const int col = col0 + nt * 8 + c;
                        if (col < lo || col >= hi)
                            s[mi][nt][2 * hr + c] = -INFINITY;
                    }
            }
    }
}

/* Rows' max only moves the exponent base when it grew by more than 2^RESCALE_LOG2: until
 * then P = 2^(S s' - m s') stays <= 2^8, far from overflow in fp32 and (for P V) in
 * bf16/fp16, and LSE = m scale + ln l is exact for any base m. So O and l are rescaled in
 * the few blocks where some row of the warp jumped, not in every block. */
static constexpr float RESCALE_LOG2 = 8.0f;

/* The first half of the online softmax: mx = max(m, rowmax s) per row (over the quad of
 * lanes that share a row); returns whether some row of the warp grew by more than
 * 2^RESCALE_LOG2, i.e. whether the base must move (the same answer in every lane). */
template <int MI, int NT>
static __device__ __forceinline__ bool block_rows_max(const float (&s)[MI][NT][4],
                                                      const float (&row_m)[MI][2],
                                                      float (&mx)[MI][2], float scale_log2)
{
    bool grow = false;
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            float m = row_m[mi][hr];
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
                m = fmaxf(m, fmaxf(s[mi][nt][2 * hr], s[mi][nt][2 * hr + 1]));
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
            mx[mi][hr] = m;
            /* -inf -> finite is a jump (inf > 8); -inf -> -inf is not (NaN compares false) */
            grow |= (m - row_m[mi][hr]) * scale_log2 > RESCALE_LOG2;
        }
    return __any_sync(0xffffffffu, grow);
}

/* Moves the base of each row to mx: alpha = 2^(m s' - mx s'), l *= alpha, m = mx. A row that
 * has seen only masked keys keeps m = -inf; its exponent base is then 0, so no -inf - -inf. */
template <int MI>
static __device__ __forceinline__ void block_move_base(const float (&mx)[MI][2],
                                                       float (&row_m)[MI][2],
                                                       float (&row_l)[MI][2],
                                                       float (&alpha)[MI][2], float scale_log2)
{
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            const float base = mx[mi][hr] == -INFINITY ? 0.0f : mx[mi][hr] * scale_log2;
            alpha[mi][hr] = ptx_exp2(row_m[mi][hr] * scale_log2 - base);
            row_m[mi][hr] = mx[mi][hr];
            row_l[mi][hr] *= alpha[mi][hr];
        }
}

template <int MI, int DT>
static __device__ __forceinline__ void block_rescale(float (&acc)[MI][DT][4],
                                                     const float (&alpha)[MI][2])
{
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int dt = 0; dt < DT; dt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[mi][dt][e] *= alpha[mi][e / 2];
}

/* The second half: s becomes P = 2^(s s' - m s') in place and l gains its row sums. */
template <int MI, int NT>
static __device__ __forceinline__ void block_exp(float (&s)[MI][NT][4],
                                                 const float (&row_m)[MI][2],
                                                 float (&row_l)[MI][2], float scale_log2)
{
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            const float m = row_m[mi][hr];
            const float base = m == -INFINITY ? 0.0f : m * scale_log2;
            float sum = 0.0f;
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 2 * hr; e < 2 * hr + 2; e++) {
                    const float p = ptx_exp2(fmaf(s[mi][nt][e], scale_log2, -base));
                    s[mi][nt][e] = p;
                    sum += p;
                }
            row_l[mi][hr] += sum;
        }
}

/* Online softmax for one block: turns s into P (in place), updates the base m, the partial
 * row sums l and, when the base moves, rescales O. */
template <int MI, int NT, int DT>
static __device__ __forceinline__ void softmax_block(float (&s)[MI][NT][4],
                                                     float (&acc)[MI][DT][4],
                                                     float (&row_m)[MI][2], float (&row_l)[MI][2],
                                                     float scale_log2)
{
    float mx[MI][2];
    if (block_rows_max<MI, NT>(s, row_m, mx, scale_log2)) {
        float alpha[MI][2];
        block_move_base<MI>(mx, row_m, row_l, alpha, scale_log2);
        block_rescale<MI, DT>(acc, alpha);
    }
    block_exp<MI, NT>(s, row_m, row_l, scale_log2);
}

#endif /* FLASHC_CUDA_ATTN_FWD_COMMON_CUH */
