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
#include "attn_fwd_common.cuh"
#include "attn_mma_sm80.cuh"
#include "ptx.cuh"

#include <math.h>

/* Copies rows [0, ROWS) and columns [0, d) of a tile whose row r is at g + r * row_stride into
 * the swizzled shared tile s of DI columns; rows >= valid_rows and columns >= d are
 * zero-filled, so a padded head dim adds zeros to Q K^T and zero columns to O. Rows of g start
 * on 16-byte boundaries (attn_fwd_args.vec16): 16-byte cp.async, the chunk that holds column
 * d - 1 predicated down to the bytes that exist (src-size < 16 zero-fills the rest, nothing
 * past it is read). All NTHREADS threads take part. */
template <typename T, int DI, int DS, int ROWS, int NTHREADS>
static __device__ __forceinline__ void load_tile(T *s, const T *g, int64_t row_stride,
                                                 int valid_rows, int d)
{
    constexpr int CPR = DI / 8; /* 16-byte chunks per row */
    constexpr int CHUNKS = ROWS * CPR;
    static_assert(CHUNKS % NTHREADS == 0, "every thread copies the same number of chunks");
    if constexpr (NTHREADS % CPR == 0) {
        /* Each thread keeps one column chunk and steps down the rows: its swizzle (r mod 8)
         * is the same on every step, so the shared address advances by an immediate. */
        constexpr int RPP = NTHREADS / CPR; /* rows per pass */
        static_assert(RPP % 8 == 0, "rows per pass keep r mod 8");
        const int r0 = (int)threadIdx.x / CPR, c = (int)threadIdx.x % CPR;
        const int bytes = 2 * min(8, max(0, d - 8 * c)); /* of this chunk, in every row */
        const uint32_t dst = ptx_smem_addr(s + swz<DS>(r0, c));
        const T *src = g + (int64_t)r0 * row_stride + c * 8;
        const int64_t step = (int64_t)RPP * row_stride;
#pragma unroll
        for (int i = 0; i < ROWS / RPP; i++) {
            const bool valid = r0 + i * RPP < valid_rows && bytes > 0;
            /* an invalid chunk reads nothing; point it at the tile's first element, which is
             * mapped. The pointer walks by one step per pass: precomputed offsets i * step
             * would be 16 live registers the compiler ends up spilling. */
            ptx_cp_async_16_n(dst + (uint32_t)(i * RPP * DS * (int)sizeof(T)),
                              valid ? src : g, valid ? bytes : 0);
            src += step;
        }
    } else {
#pragma unroll
        for (int i = 0; i < CHUNKS / NTHREADS; i++) {
            const int idx = i * NTHREADS + (int)threadIdx.x;
            const int r = idx / CPR, c = idx % CPR;
            const int bytes = r < valid_rows ? 2 * min(8, max(0, d - 8 * c)) : 0;
            const T *src = bytes > 0 ? g + (int64_t)r * row_stride + c * 8 : g;
            ptx_cp_async_16_n(ptx_smem_addr(s + swz<DS>(r, c)), src, bytes);
        }
    }
}

/* load_tile for rows that are only element-aligned (a head dim that is not a multiple of 8 in
 * a packed tensor, say): plain 2-byte loads and shared stores, synchronous, so the pipeline's
 * barriers order them as they order the cp.async copies. Consecutive threads take
 * consecutive columns of a row, so a warp's loads stay within a few lines. */
template <typename T, int DI, int DS, int ROWS, int NTHREADS>
static __device__ __forceinline__ void load_tile_elementwise(T *s, const T *g, int64_t row_stride,
                                                          int valid_rows, int d)
{
    const unsigned short *src = (const unsigned short *)g;
    unsigned short *dst = (unsigned short *)s;
#pragma unroll 4
    for (int idx = (int)threadIdx.x; idx < ROWS * DI; idx += NTHREADS) {
        const int r = idx / DI, col = idx % DI;
        const unsigned short x =
            r < valid_rows && col < d ? __ldg(src + (int64_t)r * row_stride + col) : 0;
        dst[swz<DS>(r, col / 8) + col % 8] = x;
    }
}

/* The kernel is compiled twice, VEC (attn_fwd_args.vec16) or not, rather than branching at
 * run time: the element-wise path's addresses would cost the main loop registers. */
template <typename T, int DI, int DS, int ROWS, int NTHREADS, bool VEC>
static __device__ __forceinline__ void load_any(T *s, const T *g, int64_t row_stride,
                                                int valid_rows, int d)
{
    if constexpr (VEC)
        load_tile<T, DI, DS, ROWS, NTHREADS>(s, g, row_stride, valid_rows, d);
    else
        load_tile_elementwise<T, DI, DS, ROWS, NTHREADS>(s, g, row_stride, valid_rows, d);
}

/* Shape of the thread block:
 *   T       __nv_bfloat16 or __half (fp32 accumulation)
 *   D       the instance's head dim, a multiple of 32; a.D <= D columns of q and k and
 *           a.Dv <= D of v and o exist (the rest are zero in shared memory and never stored:
 *           zero columns of Q and K add nothing to S, zero columns of V give zero columns of O).
 *           a.Dv != a.D only on the mods instance (the dispatcher sends it nothing else)
 *   NWARPS  warps per block; MI: 16-row MMA tiles per warp; BM = 16 MI NWARPS query rows
 *   BN      keys per K/V block, a multiple of 16
 *   VEC     rows 16-byte aligned (attn_fwd_args.vec16): 16-byte copies, else element-wise
 *   MODS    the v2 masks and modifiers (attn_fwd_args.mods): varlen sequences, key ranges
 *           [lo_i, hi_i) (windows; causal as wr = 0), softcap, ALiBi. Scores go to the log2
 *           domain before the softmax (mods_block); K blocks outside the union of the tile's
 *           ranges are never loaded, a warp whose rows see nothing of a block skips it. A
 *           separate instance, so that the plain problem's loop keeps its registers. */
template <typename T, int D, int NWARPS, int MI, int BN, bool VEC, bool MODS>
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
    /* This sequence's lengths and first rows (dense: Sq, Sk, 0, 0). */
    int seq_q = a.Sq, seq_k = a.Sk, q_row0 = 0, k_row0 = 0;
    if constexpr (MODS) {
        fwd_sequence(a, b, &seq_q, &seq_k, &q_row0, &k_row0);
        if (m0 >= seq_q)
            return; /* uniform: a tile past its sequence's rows (varlen) has nothing to do */
    }
    const int diag = seq_k - seq_q; /* row i's position among the keys is i + diag */

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

    const T *qg = (const T *)a.q + b * a.sq[0] + h * a.sq[2] + ((int64_t)q_row0 + m0) * a.sq[1];
    const T *kg = (const T *)a.k + b * a.sk[0] + hk * a.sk[2] + (int64_t)k_row0 * a.sk[1];
    const T *vg = (const T *)a.v + b * a.sv[0] + hk * a.sv[2] + (int64_t)k_row0 * a.sv[1];

    /* Keys the tile's last valid row sees; blocks past them are never touched. With a key
     * range, also the blocks before the first row's first key (ranges move monotonically
     * with the row, so the tile's union is [lo(first row), hi(last row))). */
    const int last_row = min(m0 + BM, seq_q) - 1;
    int n_end = a.causal ? min(seq_k, last_row + 1 + diag) : seq_k;
    int nb_first = 0; /* the first K block visited */
    float slope_log2 = 0.0f;
    if constexpr (MODS) {
        const int n_begin = fwd_key_lo(a, diag, m0);
        n_end = fwd_key_hi(a, diag, seq_k, last_row);
        if (n_end <= n_begin)
            n_end = 0;
        nb_first = n_end > 0 ? n_begin / BN : 0;
        if (a.alibi)
            slope_log2 = a.alibi[b * a.salibi[0] + h * a.salibi[1]] * 1.4426950408889634f;
    }
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

    if (n_blocks > nb_first) {
        load_any<T, D, DS, BM, NTHREADS, VEC>(sQ, qg, a.sq[1], seq_q - m0, a.D);
        const int n_last = (n_blocks - 1) * BN;
        load_any<T, D, DS, BN, NTHREADS, VEC>(sK, kg + (int64_t)n_last * a.sk[1], a.sk[1],
                                              seq_k - n_last, a.D);
        ptx_cp_async_commit();
    }

    for (int nb = n_blocks - 1; nb >= nb_first; nb--) {
        const int n0 = nb * BN;
        ptx_cp_async_wait<0>();
        __syncthreads(); /* K_nb landed for everyone; every warp is done with V_{nb+1} */
        load_any<T, D, DS, BN, NTHREADS, VEC>(sV, vg + (int64_t)n0 * a.sv[1], a.sv[1],
                                              seq_k - n0, a.Dv);
        ptx_cp_async_commit();

        /* Under the causal mask a warp whose last row cannot see key n0 has nothing in this
         * block (S all masked, P = 0, m and O unchanged): it only takes part in the loads and
         * barriers, and leaves its tensor-core share to the SM's other warps. With a key range,
         * likewise a warp whose rows' union misses the block. */
        bool live, mask = false;
        if constexpr (MODS) {
            /* The warp's first and last valid rows r0 <= r1: the union of their ranges is
             * [lo(r0), hi(r1)); a block inside [lo(r1), hi(r0)) is seen whole by every row and
             * needs no mask. Derived per block rather than kept: 4 registers fewer through the
             * loop (ptxas: spills). */
            const int r0 = m0 + wrow, r1 = min(m0 + wrow + 16 * MI, seq_q) - 1;
            live = r0 <= r1 && n0 < fwd_key_hi(a, diag, seq_k, r1) &&
                   n0 + BN > fwd_key_lo(a, diag, r0);
            mask = n0 < fwd_key_lo(a, diag, r1) || n0 + BN > fwd_key_hi(a, diag, seq_k, r0);
        } else
            live = !a.causal || n0 <= m0 + wrow + 16 * MI - 1 + diag;
        float s[MI][NT][4];
        if (live) {
            qk_block<T, D, MI, NT, ROWB>(s, q_lane, k_lane);
            if constexpr (MODS) {
                mods_block<MI, NT>(s, a, m0 + wrow + g, n0 + 2 * t, diag, seq_k, slope_log2,
                                   mask);
            } else {
                /* Mask only blocks that reach past the Sk tail or the first row's causal
                 * limit. */
                if (n0 + BN > a.Sk || (a.causal && n0 + BN > m0 + 1 + diag))
                    mask_block<MI, NT>(s, a, m0 + wrow + g, n0 + 2 * t, diag);
            }
        }

        ptx_cp_async_wait<0>();
        __syncthreads(); /* V_nb landed; every warp is done reading K_nb */
        if (nb > nb_first) {
            const int n_prev = n0 - BN;
            load_any<T, D, DS, BN, NTHREADS, VEC>(sK, kg + (int64_t)n_prev * a.sk[1], a.sk[1],
                                                  seq_k - n_prev, a.D);
            ptx_cp_async_commit();
        }

        if (live) {
            /* MODS: the scores are in the log2 domain already (mods_block) */
            softmax_block<MI, NT, DT>(s, acc, row_m, row_l, MODS ? 1.0f : a.scale_log2);
            pv_block<T, D, MI, NT, DT, ROWB>(s, acc, v_lane);
        }
    }

    /* Epilogue: the one division per row, then o and LSE. The block's coordinates are
     * derived again rather than kept in registers through the main loop. */
    block_coords<BM>(a, ptx_block_index(), &m_block, &b, &h);
    if constexpr (MODS)
        fwd_sequence(a, b, &seq_q, &seq_k, &q_row0, &k_row0);
    T *og = (T *)a.o + b * a.so[0] + h * a.so[2] + (int64_t)q_row0 * a.so[1];
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            float l = row_l[mi][hr];
            l += __shfl_xor_sync(0xffffffffu, l, 1);
            l += __shfl_xor_sync(0xffffffffu, l, 2);
            const float inv = l > 0.0f ? 1.0f / l : 0.0f;
            const int row = m0 + wrow + mi * 16 + g + 8 * hr;
            if (row < seq_q) {
                T *orow = og + (int64_t)row * a.so[1];
#pragma unroll
                for (int dt = 0; dt < DT; dt++) {
                    const int col = dt * 8 + 2 * t;
                    const uint32_t pair =
                        ptx_pack2(T(), acc[mi][dt][2 * hr] * inv, acc[mi][dt][2 * hr + 1] * inv);
                    if (VEC && col + 1 < a.Dv) {
                        *(uint32_t *)(orow + col) = pair;
                    } else { /* the last odd column, or rows only 2-byte aligned */
                        if (col < a.Dv)
                            ((unsigned short *)orow)[col] = (unsigned short)(pair & 0xffff);
                        if (col + 1 < a.Dv)
                            ((unsigned short *)orow)[col + 1] = (unsigned short)(pair >> 16);
                    }
                }
                /* MODS: m is in the log2 domain, LSE = m ln 2 + ln l */
                if (a.lse && t == 0)
                    a.lse[b * a.slse[0] + h * a.slse[1] + ((int64_t)q_row0 + row) * a.slse[2]] =
                        l > 0.0f ? row_m[mi][hr] * (MODS ? 0.6931471805599453f : a.scale) +
                                       logf(l)
                                 : -INFINITY;
            }
        }
}

/* varlen: the rows of no sequence (attn_fwd_clear_unowned, attn_cuda.cuh) */
template <typename T>
static cudaError_t attn_fwd_clear_unowned_t(const attn_fwd_args *a, cudaStream_t stream)
{
    if (a->total_q <= 0)
        return cudaSuccess;
    const int64_t rows = (int64_t)a->total_q * a->Hq;
    attn_clear_unowned<T, attn_fwd_args><<<(unsigned)((rows + 3) / 4), 128, 0, stream>>>(*a);
    return cudaGetLastError();
}

template <typename T, int D, int NWARPS, int MI, int BN>
static cudaError_t attn_fwd_sm80_launch(const attn_fwd_args *a, cudaStream_t stream)
{
    constexpr int BM = 16 * MI * NWARPS;
    constexpr int DS = (D + 63) / 64 * 64;
    const size_t smem = (size_t)(BM + 2 * BN) * DS * sizeof(T);
    /* The mods instance without VEC serves rows only 2-byte aligned (head dims D % 8 != 0, odd
     * strides): attn.cu's mods_route sends such problems here by the rules it applies to
     * aligned ones (prefill-length dense / varlen; short queries, one-wave grids over many
     * keys, split requests and paged varlen go to the KV-cache kernel, which serves such rows
     * too), never to the sm90 mods / varlen instances (TMA: 16-byte rows only). */
    void (*kernel)(const attn_fwd_args) =
        a->mods    ? (a->vec16 ? attn_fwd_sm80_kernel<T, D, NWARPS, MI, BN, true, true>
                               : attn_fwd_sm80_kernel<T, D, NWARPS, MI, BN, false, true>)
        : a->vec16 ? attn_fwd_sm80_kernel<T, D, NWARPS, MI, BN, true, false>
                   : attn_fwd_sm80_kernel<T, D, NWARPS, MI, BN, false, false>;
    /* Above 48 KB a block's dynamic shared memory must be opted into, per device; setting it
     * is a cheap host-side call, so it is done on every launch rather than cached. */
    cudaError_t err =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (err != cudaSuccess)
        return err;
    const int64_t blocks = (int64_t)((a->Sq + BM - 1) / BM) * a->B * a->Hq;
    if (blocks > 0x7fffffff)
        return cudaErrorInvalidConfiguration;
    if (blocks > 0) { /* none: varlen with max_seqlen_q = 0 */
        kernel<<<(unsigned)blocks, NWARPS * 32, smem, stream>>>(*a);
        if ((err = cudaGetLastError()) != cudaSuccess)
            return err;
    }
    if (a->cu_q)
        err = attn_fwd_clear_unowned_t<T>(a, stream);
    return err;
}

cudaError_t attn_fwd_clear_unowned(const attn_fwd_args *a, flashc_dtype dt, cudaStream_t stream)
{
    return dt == FLASHC_BF16 ? attn_fwd_clear_unowned_t<__nv_bfloat16>(a, stream)
                             : attn_fwd_clear_unowned_t<__half>(a, stream);
}

/* Tiles as FlashAttention-2 picks them for sm_80/sm_90 without dropout: 4 warps of 32 rows for
 * D <= 128 (two 16-row MMA tiles per warp halve the K/V fragment reads per FLOP); 128 keys
 * per block at D <= 64, 64 above (registers: O and S live in the same 255); 8 warps of 16 rows
 * above 128, where O alone takes D / 2 registers a thread. Each instance takes the head dims
 * above the previous one, padded (see load_tile). */
#define SM80_VARIANT(TN, T, DLO, D, NW, MI, BN)                                                    \
    {"attn_fwd_" #TN "_sm80_d" #D "_" #BN, "sm80", TN##_DTYPE, DLO, D, 80, 16 * MI * NW, BN,      \
     1, 0, NULL, attn_fwd_sm80_launch<T, D, NW, MI, BN>}
#define bf16_DTYPE FLASHC_BF16
#define f16_DTYPE FLASHC_F16
const attn_fwd_variant attn_fwd_sm80_variants[] = {
    SM80_VARIANT(bf16, __nv_bfloat16, 1, 32, 4, 2, 128),
    SM80_VARIANT(bf16, __nv_bfloat16, 33, 64, 4, 2, 128),
    SM80_VARIANT(bf16, __nv_bfloat16, 65, 96, 4, 2, 64),
    SM80_VARIANT(bf16, __nv_bfloat16, 97, 128, 4, 2, 64),
    SM80_VARIANT(bf16, __nv_bfloat16, 129, 160, 8, 1, 64),
    SM80_VARIANT(bf16, __nv_bfloat16, 161, 192, 8, 1, 64),
    SM80_VARIANT(bf16, __nv_bfloat16, 193, 224, 8, 1, 64),
    SM80_VARIANT(bf16, __nv_bfloat16, 225, 256, 8, 1, 64),
    SM80_VARIANT(f16, __half, 1, 32, 4, 2, 128),
    SM80_VARIANT(f16, __half, 33, 64, 4, 2, 128),
    SM80_VARIANT(f16, __half, 65, 96, 4, 2, 64),
    SM80_VARIANT(f16, __half, 97, 128, 4, 2, 64),
    SM80_VARIANT(f16, __half, 129, 160, 8, 1, 64),
    SM80_VARIANT(f16, __half, 161, 192, 8, 1, 64),
    SM80_VARIANT(f16, __half, 193, 224, 8, 1, 64),
    SM80_VARIANT(f16, __half, 225, 256, 8, 1, 64),
};
const int attn_fwd_sm80_variant_count =
    (int)(sizeof attn_fwd_sm80_variants / sizeof attn_fwd_sm80_variants[0]);
