/* kernels/avx512bf16.c — kernels.h cpu_mm_bf16 on AVX512-BF16 (vdpbf16ps): the bf16 products
 * for CPUs without AMX (Zen 4/5, Cooper Lake), and the two packing routines that the AMX
 * sub-table (amx.c) shares. Flags: -mavx512f -mavx512bw -mavx512vl -mavx512bf16 -mfma
 * (isa.cmake); dispatch.c offers it only where the avx512 table runs.
 *
 * vdpbf16ps multiplies the bf16 pairs of two 32-bit lanes and adds both products to a float32
 * lane: with A's pair (A[m][2kk], A[m][2kk+1]) broadcast to every lane and a 16-word row of the
 * VNNI-packed B, one instruction adds 16 columns x 2 k of C row m -- twice an FMA's work. */
#if defined(__x86_64__)
#include "kernels.h"

#include <immintrin.h>
#include <string.h>

static inline int64_t rup(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* Bp from B's rows: pair-row kk interleaves rows 2kk and 2kk + 1 (16-bit elements), 32 columns
 * per step by one two-source permute per 16 output words. */
void cpu_mm_avx512_pack_b(const uint16_t *B, int64_t ldb, int64_t K, int64_t N, uint32_t *Bp,
                          int64_t ldbp)
{
    static const uint16_t lo_idx[32] = {0,  32, 1,  33, 2,  34, 3,  35, 4,  36, 5,
                                        37, 6,  38, 7,  39, 8,  40, 9,  41, 10, 42,
                                        11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
    const __m512i ilo = _mm512_loadu_si512(lo_idx);
    const __m512i ihi = _mm512_add_epi16(ilo, _mm512_set1_epi16(16));
    const int64_t kp = rup(K, CPU_MM_KP), np = rup(N, 16);
    for (int64_t kk = 0; kk < kp / 2; kk++) {
        const uint16_t *r0 = 2 * kk < K ? B + 2 * kk * ldb : NULL;
        const uint16_t *r1 = 2 * kk + 1 < K ? B + (2 * kk + 1) * ldb : NULL;
        uint32_t *out = Bp + kk * ldbp;
        for (int64_t n0 = 0; n0 < np; n0 += 32) {
            const int64_t nv = N - n0 >= 32 ? 32 : N - n0 > 0 ? N - n0 : 0;
            const __mmask32 mk = nv == 32 ? 0xffffffffu : (__mmask32)((1u << nv) - 1u);
            const __m512i a = r0 ? _mm512_maskz_loadu_epi16(mk, r0 + n0) : _mm512_setzero_si512();
            const __m512i b = r1 ? _mm512_maskz_loadu_epi16(mk, r1 + n0) : _mm512_setzero_si512();
            _mm512_storeu_si512(out + n0, _mm512_permutex2var_epi16(a, ilo, b));
            if (np - n0 > 16)
                _mm512_storeu_si512(out + n0 + 16, _mm512_permutex2var_epi16(a, ihi, b));
        }
    }
}

/* 16 x 16 transpose of 32-bit elements: r[i] word j -> r[j] word i. Unpacks of 32 and 64 bits
 * within 128-bit lanes (then r[4g + c] lane L holds column 4L + c of rows 4g .. 4g + 3), then
 * two rounds of 128-bit lane shuffles gather the four groups. */
static inline __attribute__((always_inline)) void transpose16(__m512i r[16])
{
    __m512i t[16], u[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int g = 0; g < 4; g++) {
        u[4 * g + 0] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
        u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
        u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
        u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
    }
    for (int c = 0; c < 4; c++) {
        const __m512i x0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88);
        const __m512i x1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xdd);
        const __m512i y0 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88);
        const __m512i y1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xdd);
        r[c] = _mm512_shuffle_i32x4(x0, y0, 0x88);
        r[8 + c] = _mm512_shuffle_i32x4(x0, y0, 0xdd);
        r[4 + c] = _mm512_shuffle_i32x4(x1, y1, 0x88);
        r[12 + c] = _mm512_shuffle_i32x4(x1, y1, 0xdd);
    }
}

/* Bp from B^T's rows: word kk of row n of Bt is already the pair (B[2kk][n], B[2kk+1][n]), so
 * the packing is a 32-bit transpose, done in 16 x 16 blocks (16 rows of 32 bf16 in, 16
 * pair-rows of 16 words out). Masked loads supply the zero padding (k >= K, n >= N). */
void cpu_mm_avx512_pack_bt(const uint16_t *Bt, int64_t ldbt, int64_t N, int64_t K, uint32_t *Bp,
                           int64_t ldbp)
{
    const int64_t kp = rup(K, CPU_MM_KP), np = rup(N, 16);
    for (int64_t n0 = 0; n0 < np; n0 += 16)
        for (int64_t k0 = 0; k0 < kp; k0 += 32) {
            const int64_t kv = K - k0 >= 32 ? 32 : K - k0; /* >= 1: k0 < kp */
            const __mmask32 mk = kv == 32 ? 0xffffffffu : (__mmask32)((1u << kv) - 1u);
            __m512i r[16];
            for (int i = 0; i < 16; i++)
                r[i] = n0 + i < N ? _mm512_maskz_loadu_epi16(mk, Bt + (n0 + i) * ldbt + k0)
                                  : _mm512_setzero_si512();
            transpose16(r);
            for (int i = 0; i < 16; i++)
                _mm512_storeu_si512(Bp + (k0 / 2 + i) * ldbp + n0, r[i]);
        }
}

/* ---- gemm on vdpbf16ps -------------------------------------------------------------------- */

enum { DP_MR = 12 }; /* 12 rows x 2 vectors = 24 accumulators + 2 B vectors + 1 broadcast */

static inline __attribute__((always_inline)) __m512bh dp_pair(const uint16_t *a)
{
    int32_t w;
    memcpy(&w, a, sizeof w); /* (a[0], a[1]): one pair of A, broadcast to every lane */
    return (__m512bh)_mm512_set1_epi32(w);
}

/* C[0..mr)[0..nc) (= diag(rowscale) C +) A B over kh pair-rows, nc <= 32 columns from Bp.
 * Called with constants (mr = DP_MR, two = 1) for the full blocks. */
static inline __attribute__((always_inline)) void
dp_block(const int mr, const int two, int64_t kh, const uint16_t *A, int64_t lda,
         const uint32_t *Bp, int64_t ldbp, const float *rowscale, float *C, int64_t ldc, int nc)
{
    __m512 c0[DP_MR], c1[DP_MR];
    for (int r = 0; r < DP_MR; r++)
        c0[r] = c1[r] = _mm512_setzero_ps();
    for (int64_t kk = 0; kk < kh; kk++) {
        const uint32_t *b = Bp + kk * ldbp;
        const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b);
        const __m512bh b1 = two ? (__m512bh)_mm512_loadu_si512(b + 16) : b0;
        for (int r = 0; r < DP_MR; r++)
            if (r < mr) {
                const __m512bh a = dp_pair(A + r * lda + 2 * kk);
                c0[r] = _mm512_dpbf16_ps(c0[r], a, b0);
                if (two)
                    c1[r] = _mm512_dpbf16_ps(c1[r], a, b1);
            }
    }
    const int n0 = nc < 16 ? nc : 16, n1 = nc - n0;
    const __mmask16 m0 = n0 == 16 ? 0xffff : (__mmask16)((1u << n0) - 1u);
    const __mmask16 m1 = n1 >= 16 ? 0xffff : (__mmask16)((1u << (n1 > 0 ? n1 : 0)) - 1u);
    for (int r = 0; r < DP_MR; r++)
        if (r < mr) {
            float *c = C + r * ldc;
            if (rowscale) {
                const __m512 s = _mm512_set1_ps(rowscale[r]);
                c0[r] = _mm512_fmadd_ps(s, _mm512_maskz_loadu_ps(m0, c), c0[r]);
                if (two)
                    c1[r] = _mm512_fmadd_ps(s, _mm512_maskz_loadu_ps(m1, c + 16), c1[r]);
            }
            _mm512_mask_storeu_ps(c, m0, c0[r]);
            if (two)
                _mm512_mask_storeu_ps(c + 16, m1, c1[r]);
        }
}

static void dp_gemm(int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t lda,
                    const uint32_t *Bp, int64_t ldbp, const float *rowscale, float *C,
                    int64_t ldc)
{
    const int64_t kh = (K + 1) / 2; /* pair-rows with data; the padding beyond is zero */
    for (int64_t n0 = 0; n0 < N; n0 += 32) { /* a 32-column panel of Bp stays in L1 */
        const int nc = N - n0 < 32 ? (int)(N - n0) : 32;
        const uint32_t *b = Bp + n0;
        int64_t m0 = 0;
        if (nc > 16) {
            for (; m0 + DP_MR <= M; m0 += DP_MR)
                dp_block(DP_MR, 1, kh, A + m0 * lda, lda, b, ldbp,
                         rowscale ? rowscale + m0 : NULL, C + m0 * ldc + n0, ldc, nc);
            if (m0 < M)
                dp_block((int)(M - m0), 1, kh, A + m0 * lda, lda, b, ldbp,
                         rowscale ? rowscale + m0 : NULL, C + m0 * ldc + n0, ldc, nc);
        } else {
            for (; m0 + DP_MR <= M; m0 += DP_MR)
                dp_block(DP_MR, 0, kh, A + m0 * lda, lda, b, ldbp,
                         rowscale ? rowscale + m0 : NULL, C + m0 * ldc + n0, ldc, nc);
            if (m0 < M)
                dp_block((int)(M - m0), 0, kh, A + m0 * lda, lda, b, ldbp,
                         rowscale ? rowscale + m0 : NULL, C + m0 * ldc + n0, ldc, nc);
        }
    }
}

static void dp_nop(void) {}

const cpu_mm_bf16 cpu_mm_bf16_avx512 = {
    .unit = "avx512bf16",
    .begin = dp_nop,
    .end = dp_nop,
    .pack_b = cpu_mm_avx512_pack_b,
    .pack_bt = cpu_mm_avx512_pack_bt,
    .gemm = dp_gemm,
    .softmax = cpu_kernels_avx512_mm_softmax,
};
#endif
