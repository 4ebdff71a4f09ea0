/*
 * attn_fwd_sm80.cu — FlashAttention-2 forward on tensor cores through mma.sync (sm_80 and up;
 * also what runs on sm_90a until a wgmma kernel takes over there).
 *
 * One thread block (NWARPS warps) owns a tile of BM = 16 * MI * NWARPS query rows of one
 * (batch, head); warp w owns rows [w * 16 MI, (w + 1) * 16 MI) and needs no other warp's data,
 * so the softmax statistics never leave registers. Per K/V block of BN keys:
 *   S = Q K^T            mma.sync m16n8k16, Q and K read from shared memory by ldmatrix
 *   mask                 only on blocks that cross the causal diagonal or the Sk tail
 *   m' = max(m, rowmax S) if it grew by more than 2^8 in some row of the warp, else m' = m
 *   O = O 2^(m s' - m' s'), l = l 2^(m s' - m' s')   only when m' != m (see softmax_block)
 *   P = 2^(S s' - m' s'), l += rowsum P, O += P V   P goes from the S accumulators straight
 *                                                   into the A fragments of P V
 * with s' = scale * log2(e) folded into the one FFMA before ex2. One division by l at the end;
 * LSE = m scale + ln l. Rows that see no key output zeros and LSE = -inf. Under the causal
 * mask a warp whose rows see no key of a block skips its MMAs there.
 *
 * Memory pipeline (FA-2): Q, then K and V tiles arrive by cp.async in shared memory swizzled in
 * 16-byte chunks (chunk c of row r sits at c ^ (r mod 8) within its 128-byte group), so the 8
 * rows one ldmatrix phase reads fall in 8 different bank groups. The load of V_j overlaps
 * S = Q K_j^T, the load of K_{j-1} overlaps the softmax and P V_j; blocks are visited from the
 * last to the first, so the masked ones come first and the rest run without mask code.
 * Tails (Sq, Sk not multiples of the tile) are predicated loads that zero-fill shared memory
 * (a zero V row times P = 0 stays 0; garbage could be NaN) and predicated stores.
 *
 * Causal: bottom-right aligned (row i sees key j iff j <= i + Sk - Sq); K blocks entirely
 * above the diagonal are never loaded. Thread blocks are launched last Q tile first: those
 * see the most keys, so the triangular work drains evenly (longest job first), within groups
 * of heads whose K/V fit in L2 so the tiles of one head still share its K/V there.
 *
 * Nothing but LSE is written besides o; no device memory is allocated.
 *
 * The plain reference is src/ref/attn_fwd.c; tests/test_cuda_attn.c checks every variant
 * against a float64 reference and a naive same-precision attention (FlashAttention's 2x rule).
 * The version ladder that led here is in bench/RESULTS.md.
 */
#include "attn_cuda.cuh"
#include "ptx.cuh"

#include <math.h>

/* Element offset of 16-byte chunk c of row r in a swizzled tile with rows of DS elements
 * (DS a multiple of 64, i.e. whole 128-byte groups of 8 chunks). */
template <int DS> static __device__ __forceinline__ int swz(int r, int c)
{
    return r * DS + ((c & ~7) | ((c ^ r) & 7)) * 8;
}

/* Shared byte address of even chunk c (compile-time) of the row a lane addresses, given that
 * lane's address of chunk 0 of the pair it reads (lane_base, with the swizzle already applied
 * to the lane's own row and half, and 128-byte aligned rows). Because c is even and the lane's
 * half is 0 or 1, chunk (c + half) ^ row = (c mod 8) ^ (half ^ row) + whole groups: one XOR
 * with a constant and an immediate offset, so no per-(c, row) address stays in registers. */
static __device__ __forceinline__ uint32_t swz_step(uint32_t lane_base, int c)
{
    return (lane_base ^ (uint32_t)((c & 7) * 16)) + (uint32_t)((c >> 3) * 128);
}

/* Copies rows [0, ROWS) of a tile whose row r is at g + r * row_stride into the swizzled
 * shared tile s; rows >= valid_rows are zero-filled. All NTHREADS threads take part. */
template <typename T, int D, int DS, int ROWS, int NTHREADS>
static __device__ __forceinline__ void load_tile(T *s, const T *g, int64_t row_stride,
                                                 int valid_rows)
{
    constexpr int CPR = D / 8; /* 16-byte chunks per row */
    constexpr int CHUNKS = ROWS * CPR;
    static_assert(CHUNKS % NTHREADS == 0, "every thread copies the same number of chunks");
    if constexpr (NTHREADS % CPR == 0) {
        /* Each thread keeps one column chunk and steps down the rows: its swizzle (r mod 8)
         * is the same on every step, so the shared address advances by an immediate. */
        constexpr int RPP = NTHREADS / CPR; /* rows per pass */
        static_assert(RPP % 8 == 0, "rows per pass keep r mod 8");
        const int r0 = (int)threadIdx.x / CPR, c = (int)threadIdx.x % CPR;
        const uint32_t dst = ptx_smem_addr(s + swz<DS>(r0, c));
        const T *src = g + (int64_t)r0 * row_stride + c * 8;
        const int64_t step = (int64_t)RPP * row_stride;
#pragma unroll
        for (int i = 0; i < ROWS / RPP; i++) {
            const bool valid = r0 + i * RPP < valid_rows;
            /* an invalid row reads nothing; point it at row 0, which is mapped. The pointer
             * walks by one step per pass: precomputed offsets i * step would be 16 live
             * registers the compiler ends up spilling. */
            ptx_cp_async_16(dst + (uint32_t)(i * RPP * DS * (int)sizeof(T)),
                            valid ? src : g + c * 8, valid);
            src += step;
        }
    } else {
#pragma unroll
        for (int i = 0; i < CHUNKS / NTHREADS; i++) {
            const int idx = i * NTHREADS + (int)threadIdx.x;
            const int r = idx / CPR, c = idx % CPR;
            const bool valid = r < valid_rows;
            const T *src = g + (valid ? (int64_t)r * row_stride : 0) + c * 8;
            ptx_cp_async_16(ptx_smem_addr(s + swz<DS>(r, c)), src, valid);
        }
    }
}

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

/* S = Q K^T for one K block: s (MI x NT tiles of 16 x 8, C layout) over D in steps of 16.
 * q_lane, k_lane: this lane's ldmatrix addresses of chunk 0 (see swz_step). */
template <typename T, int D, int MI, int NT, uint32_t ROWB>
static __device__ __forceinline__ void qk_block(float (&s)[MI][NT][4], uint32_t q_lane,
                                                uint32_t k_lane)
{
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                s[mi][nt][e] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < D / 16; ks++) {
        uint32_t qa[MI][4];
#pragma unroll
        for (int mi = 0; mi < MI; mi++)
            ptx_ldmatrix_x4(qa[mi], swz_step(q_lane, 2 * ks) + mi * 16 * ROWB);
#pragma unroll
        for (int np = 0; np < NT / 2; np++) {
            uint32_t kb[4]; /* B fragments of key tiles 2np (kb[0..1]) and 2np+1 (kb[2..3]) */
            ptx_ldmatrix_x4(kb, swz_step(k_lane, 2 * ks) + np * 16 * ROWB);
#pragma unroll
            for (int mi = 0; mi < MI; mi++) {
                ptx_mma_m16n8k16(T(), s[mi][2 * np], qa[mi], kb[0], kb[1]);
                ptx_mma_m16n8k16(T(), s[mi][2 * np + 1], qa[mi], kb[2], kb[3]);
            }
        }
    }
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

/* Rows' max only moves the exponent base when it grew by more than 2^RESCALE_LOG2: until
 * then P = 2^(S s' - m s') stays <= 2^8, far from overflow in fp32 and (for P V) in
 * bf16/fp16, and LSE = m scale + ln l is exact for any base m. So O and l are rescaled in
 * the few blocks where some row of the warp jumped, not in every block. */
static constexpr float RESCALE_LOG2 = 8.0f;

/* Online softmax for one block: turns s into P (in place), updates the base m, the partial
 * row sums l and, when the base moves, rescales O. A row that has seen only masked keys
 * keeps m = -inf; its exponent base is then 0, so no -inf - -inf = NaN. */
template <int MI, int NT, int DT>
static __device__ __forceinline__ void softmax_block(float (&s)[MI][NT][4],
                                                     float (&acc)[MI][DT][4],
                                                     float (&row_m)[MI][2], float (&row_l)[MI][2],
                                                     float scale_log2)
{
    float mx[MI][2];
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
    if (__any_sync(0xffffffffu, grow)) {
#pragma unroll
        for (int mi = 0; mi < MI; mi++)
#pragma unroll
            for (int hr = 0; hr < 2; hr++) {
                const float base = mx[mi][hr] == -INFINITY ? 0.0f : mx[mi][hr] * scale_log2;
                const float alpha = ptx_exp2(row_m[mi][hr] * scale_log2 - base);
                row_m[mi][hr] = mx[mi][hr];
                row_l[mi][hr] *= alpha;
#pragma unroll
                for (int dt = 0; dt < DT; dt++) {
                    acc[mi][dt][2 * hr] *= alpha;
                    acc[mi][dt][2 * hr + 1] *= alpha;
                }
            }
    }
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

/* O += P V for one block, over its keys in steps of 16. P's accumulator layout for key tiles
 * 2kk and 2kk+1 is exactly the A fragment of keys [16 kk, 16 kk + 16): no shuffles. */
template <typename T, int D, int MI, int NT, int DT, uint32_t ROWB>
static __device__ __forceinline__ void pv_block(const float (&s)[MI][NT][4],
                                                float (&acc)[MI][DT][4], uint32_t v_lane)
{
#pragma unroll
    for (int kk = 0; kk < NT / 2; kk++) {
        uint32_t pa[MI][4];
#pragma unroll
        for (int mi = 0; mi < MI; mi++) {
            pa[mi][0] = ptx_pack2(T(), s[mi][2 * kk][0], s[mi][2 * kk][1]);
            pa[mi][1] = ptx_pack2(T(), s[mi][2 * kk][2], s[mi][2 * kk][3]);
            pa[mi][2] = ptx_pack2(T(), s[mi][2 * kk + 1][0], s[mi][2 * kk + 1][1]);
            pa[mi][3] = ptx_pack2(T(), s[mi][2 * kk + 1][2], s[mi][2 * kk + 1][3]);
        }
#pragma unroll
        for (int dp = 0; dp < D / 16; dp++) {
            uint32_t vb[4]; /* B fragments of feature tiles 2dp (vb[0..1]) and 2dp+1 */
            ptx_ldmatrix_x4_trans(vb, swz_step(v_lane, 2 * dp) + kk * 16 * ROWB);
#pragma unroll
            for (int mi = 0; mi < MI; mi++) {
                ptx_mma_m16n8k16(T(), acc[mi][2 * dp], pa[mi], vb[0], vb[1]);
                ptx_mma_m16n8k16(T(), acc[mi][2 * dp + 1], pa[mi], vb[2], vb[3]);
            }
        }
    }
}

/* Shape of the thread block:
 *   T       __nv_bfloat16 or __half (fp32 accumulation)
 *   D       head dim, a multiple of 32 (64, 96, 128, 256)
 *   NWARPS  warps per block; MI: 16-row MMA tiles per warp; BM = 16 MI NWARPS query rows
 *   BN      keys per K/V block, a multiple of 16 */
template <typename T, int D, int NWARPS, int MI, int BN>
__global__ void __launch_bounds__(NWARPS * 32)
    attn_fwd_sm80_kernel(const attn_fwd_args a)
{
    constexpr int NTHREADS = NWARPS * 32;
    constexpr int BM = 16 * MI * NWARPS;
    constexpr int DS = (D + 63) / 64 * 64; /* shared row length: whole swizzle groups */
    constexpr int NT = BN / 8;             /* 8-key column tiles of S                 */
    constexpr int DT = D / 8;              /* 8-wide column tiles of O                */
    static_assert(D % 32 == 0 && BN % 16 == 0, "tile shapes");

    extern __shared__ __align__(128) uint4 smem_u4[]; /* swz_step needs 128-byte rows */
    T *sQ = (T *)smem_u4;
    T *sK = sQ + BM * DS;
    T *sV = sK + BN * DS;

    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4;
    int m_block, b, h;
    block_coords<BM>(a, ptx_block_index(), &m_block, &b, &h);
    const int hk = h / a.group;
    const int m0 = m_block * BM;
    const int wrow = warp * 16 * MI; /* this warp's first row in the tile */
    const int diag = a.Sk - a.Sq;    /* row i sees keys j <= i + diag (causal) */

    /* Per-lane ldmatrix addresses of chunk 0 (see swz_step). Q and V (.trans): lanes 0-15
     * address rows 0-15 at the pair's first chunk, lanes 16-31 the same rows at the second.
     * K: lanes 0-7 rows 0-7 first chunk, 8-15 rows 0-7 second, 16-31 rows 8-15 likewise. */
    constexpr uint32_t ROWB = DS * sizeof(T); /* bytes per shared row, a multiple of 128 */
    static_assert(ROWB % 128 == 0, "swz_step needs 128-byte rows");
    const uint32_t q_lane = ptx_smem_addr(sQ) + (wrow + (lane & 15)) * ROWB +
                            (((lane >> 4) ^ (lane & 7)) * 16);
    const uint32_t k_lane = ptx_smem_addr(sK) + ((lane & 7) + (lane >> 4) * 8) * ROWB +
                            ((((lane >> 3) & 1) ^ (lane & 7)) * 16);
    const uint32_t v_lane = ptx_smem_addr(sV) + (lane & 15) * ROWB +
                            (((lane >> 4) ^ (lane & 7)) * 16);

    const T *qg = (const T *)a.q + b * a.sq[0] + h * a.sq[2] + (int64_t)m0 * a.sq[1];
    const T *kg = (const T *)a.k + b * a.sk[0] + hk * a.sk[2];
    const T *vg = (const T *)a.v + b * a.sv[0] + hk * a.sv[2];

    /* Keys the tile's last valid row sees; blocks past them are never touched. */
    const int last_row = min(m0 + BM, a.Sq) - 1;
    const int n_end = a.causal ? min(a.Sk, last_row + 1 + diag) : a.Sk;
    const int n_blocks = n_end > 0 ? (n_end + BN - 1) / BN : 0;

    float acc[MI][DT][4];
    float row_m[MI][2], row_l[MI][2]; /* running max (unscaled S) and partial sum per row */
#pragma unroll
    for (int mi = 0; mi < MI; mi++) {
#pragma unroll
        for (int dt = 0; dt < DT; dt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[mi][dt][e] = 0.0f;
        row_m[mi][0] = row_m[mi][1] = -INFINITY;
        row_l[mi][0] = row_l[mi][1] = 0.0f;
    }

    if (n_blocks > 0) {
        load_tile<T, D, DS, BM, NTHREADS>(sQ, qg, a.sq[1], a.Sq - m0);
        const int n_last = (n_blocks - 1) * BN;
        load_tile<T, D, DS, BN, NTHREADS>(sK, kg + (int64_t)n_last * a.sk[1], a.sk[1],
                                          a.Sk - n_last);
        ptx_cp_async_commit();
    }

    for (int nb = n_blocks - 1; nb >= 0; nb--) {
        const int n0 = nb * BN;
        ptx_cp_async_wait<0>();
        __syncthreads(); /* K_nb landed for everyone; every warp is done with V_{nb+1} */
        load_tile<T, D, DS, BN, NTHREADS>(sV, vg + (int64_t)n0 * a.sv[1], a.sv[1], a.Sk - n0);
        ptx_cp_async_commit();

        /* Under the causal mask a warp whose last row cannot see key n0 has nothing in this
         * block (S all masked, P = 0, m and O unchanged): it only takes part in the loads and
         * barriers, and leaves its tensor-core share to the SM's other warps. */
        const bool live = !a.causal || n0 <= m0 + wrow + 16 * MI - 1 + diag;
        float s[MI][NT][4];
        if (live) {
            qk_block<T, D, MI, NT, ROWB>(s, q_lane, k_lane);
            /* Mask only blocks that reach past the Sk tail or the first row's causal limit. */
            if (n0 + BN > a.Sk || (a.causal && n0 + BN > m0 + 1 + diag))
                mask_block<MI, NT>(s, a, m0 + wrow + g, n0 + 2 * t, diag);
        }

        ptx_cp_async_wait<0>();
        __syncthreads(); /* V_nb landed; every warp is done reading K_nb */
        if (nb > 0) {
            const int n_prev = n0 - BN;
            load_tile<T, D, DS, BN, NTHREADS>(sK, kg + (int64_t)n_prev * a.sk[1], a.sk[1],
                                              a.Sk - n_prev);
            ptx_cp_async_commit();
        }

        if (live) {
            softmax_block<MI, NT, DT>(s, acc, row_m, row_l, a.scale_log2);
            pv_block<T, D, MI, NT, DT, ROWB>(s, acc, v_lane);
        }
    }

    /* Epilogue: the one division per row, then o and LSE. The block's coordinates are
     * derived again rather than kept in registers through the main loop. */
    block_coords<BM>(a, ptx_block_index(), &m_block, &b, &h);
    T *og = (T *)a.o + b * a.so[0] + h * a.so[2];
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            float l = row_l[mi][hr];
            l += __shfl_xor_sync(0xffffffffu, l, 1);
            l += __shfl_xor_sync(0xffffffffu, l, 2);
            const float inv = l > 0.0f ? 1.0f / l : 0.0f;
            const int row = m0 + wrow + mi * 16 + g + 8 * hr;
            if (row < a.Sq) {
                T *orow = og + (int64_t)row * a.so[1];
#pragma unroll
                for (int dt = 0; dt < DT; dt++)
                    *(uint32_t *)(orow + dt * 8 + 2 * t) =
                        ptx_pack2(T(), acc[mi][dt][2 * hr] * inv, acc[mi][dt][2 * hr + 1] * inv);
                if (a.lse && t == 0)
                    a.lse[b * a.slse[0] + h * a.slse[1] + (int64_t)row * a.slse[2]] =
                        l > 0.0f ? row_m[mi][hr] * a.scale + logf(l) : -INFINITY;
            }
        }
}

template <typename T, int D, int NWARPS, int MI, int BN>
static cudaError_t attn_fwd_sm80_launch(const attn_fwd_args *a, cudaStream_t stream)
{
    constexpr int BM = 16 * MI * NWARPS;
    constexpr int DS = (D + 63) / 64 * 64;
    const size_t smem = (size_t)(BM + 2 * BN) * DS * sizeof(T);
    void (*kernel)(const attn_fwd_args) = attn_fwd_sm80_kernel<T, D, NWARPS, MI, BN>;
    /* Above 48 KB a block's dynamic shared memory must be opted into, per device; setting it
     * is a cheap host-side call, so it is done on every launch rather than cached. */
    cudaError_t err =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (err != cudaSuccess)
        return err;
    const int64_t blocks = (int64_t)((a->Sq + BM - 1) / BM) * a->B * a->Hq;
    if (blocks > 0x7fffffff)
        return cudaErrorInvalidConfiguration;
    kernel<<<(unsigned)blocks, NWARPS * 32, smem, stream>>>(*a);
    return cudaGetLastError();
}

/* Tiles as FlashAttention-2 picks them for sm_80/sm_90 without dropout: 4 warps of 32 rows for
 * D <= 128 (two 16-row MMA tiles per warp halve the K/V fragment reads per FLOP); 128 keys
 * per block at D = 64, 64 above (registers: O and S live in the same 255); 8 warps of 16 rows
 * at D = 256, where O alone takes 128 registers a thread. */
const attn_fwd_variant attn_fwd_sm80_variants[] = {
    {"attn_fwd_bf16_sm80_d64_128x128", FLASHC_BF16, 64, 80, 128, 128,
     attn_fwd_sm80_launch<__nv_bfloat16, 64, 4, 2, 128>},
    {"attn_fwd_bf16_sm80_d96_128x64", FLASHC_BF16, 96, 80, 128, 64,
     attn_fwd_sm80_launch<__nv_bfloat16, 96, 4, 2, 64>},
    {"attn_fwd_bf16_sm80_d128_128x64", FLASHC_BF16, 128, 80, 128, 64,
     attn_fwd_sm80_launch<__nv_bfloat16, 128, 4, 2, 64>},
    {"attn_fwd_bf16_sm80_d256_128x64", FLASHC_BF16, 256, 80, 128, 64,
     attn_fwd_sm80_launch<__nv_bfloat16, 256, 8, 1, 64>},
    {"attn_fwd_f16_sm80_d64_128x128", FLASHC_F16, 64, 80, 128, 128,
     attn_fwd_sm80_launch<__half, 64, 4, 2, 128>},
    {"attn_fwd_f16_sm80_d96_128x64", FLASHC_F16, 96, 80, 128, 64,
     attn_fwd_sm80_launch<__half, 96, 4, 2, 64>},
    {"attn_fwd_f16_sm80_d128_128x64", FLASHC_F16, 128, 80, 128, 64,
     attn_fwd_sm80_launch<__half, 128, 4, 2, 64>},
    {"attn_fwd_f16_sm80_d256_128x64", FLASHC_F16, 256, 80, 128, 64,
     attn_fwd_sm80_launch<__half, 256, 8, 1, 64>},
};
const int attn_fwd_sm80_variant_count =
    (int)(sizeof attn_fwd_sm80_variants / sizeof attn_fwd_sm80_variants[0]);
