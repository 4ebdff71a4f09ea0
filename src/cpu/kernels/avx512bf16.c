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
#include "exp2p_avx512.h"

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

/* ---- the backward's operands (kernels.h split, pack_at) ----------------------------------- */

/* bf16(x) in the high halves of the 32-bit lanes, low halves zero: round to nearest even, a
 * NaN kept a quiet NaN (flashc__f32_to_bf16, lane by lane). */
static inline __m512i bf16_bits(__m512 x)
{
    const __m512i u = _mm512_castps_si512(x);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd));
    const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(u, _mm512_set1_epi32(0x400000)));
    return _mm512_and_si512(r, _mm512_set1_epi32((int)0xffff0000u));
}

/* hi, lo of 16 floats (kernels.h split), each as bf16_bits. */
static inline void split16(__m512 x, __m512i *hi, __m512i *lo)
{
    *hi = bf16_bits(x);
    __m512 r = _mm512_sub_ps(x, _mm512_castsi512_ps(*hi));
    const __mmask16 fin = _mm512_cmp_ps_mask(_mm512_sub_ps(r, r), _mm512_setzero_ps(), _CMP_EQ_OQ);
    r = _mm512_maskz_mov_ps(fin, r);
    *lo = bf16_bits(r);
}

/* split of one row pair x 32 columns by vcvtne2ps2bf16: hp[i], lp[i] = the 32 hi, lo words of row
 * i in column order (x[i][half]: its 16-column halves). The instruction rounds to nearest even
 * as bf16_bits does, but reads a denormal input as zero and writes no denormal (Intel SDM,
 * VCVTNEPS2BF16), and lo must be 0 where x - hi is not finite; every such lane shows in r = x -
 * hi (hi read back from hp): x NaN / inf or rounded to inf -> r NaN / inf, x denormal -> hi = 0,
 * r = x denormal, r denormal itself. Returns 0 (hp, lp not valid) if any lane of r is NaN, inf
 * or denormal; otherwise hp, lp are bit for bit split16's. */
static inline __attribute__((always_inline)) int split_cvt32(const __m512 x[2][2], __m512i hp[2],
                                                             __m512i lp[2], __m512i hl[2][2])
{
    /* word 2j + 1 of hl[i][half] <- word 16 half + j of hp[i] (the low words zeroed by the
     * mask): hi as float32, one vpermw a half (vpmovzxwd + vpslld + vextracti64x4 before) */
    static const uint16_t up_idx[32] = {0, 0,  0, 1,  0, 2,  0, 3,  0, 4,  0, 5,  0, 6,  0, 7,
                                        0, 8,  0, 9,  0, 10, 0, 11, 0, 12, 0, 13, 0, 14, 0, 15};
    const __m512i up0 = _mm512_loadu_si512(up_idx);
    const __m512i up1 = _mm512_add_epi16(up0, _mm512_set1_epi16(16));
    __mmask16 bad = 0;
    for (int i = 0; i < 2; i++) {
        __m512bh h = _mm512_cvtne2ps_pbh(x[i][1], x[i][0]);
        memcpy(&hp[i], &h, 64);
        hl[i][0] = _mm512_maskz_permutexvar_epi16(0xaaaaaaaau, up0, hp[i]);
        hl[i][1] = _mm512_maskz_permutexvar_epi16(0xaaaaaaaau, up1, hp[i]);
        const __m512 r0 = _mm512_sub_ps(x[i][0], _mm512_castsi512_ps(hl[i][0]));
        const __m512 r1 = _mm512_sub_ps(x[i][1], _mm512_castsi512_ps(hl[i][1]));
        /* QNaN 0x01, +inf 0x08, -inf 0x10, denormal 0x20, SNaN 0x80 */
        bad |= _mm512_fpclass_ps_mask(r0, 0xb9) | _mm512_fpclass_ps_mask(r1, 0xb9);
        __m512bh l = _mm512_cvtne2ps_pbh(r1, r0);
        memcpy(&lp[i], &l, 64);
    }
    return bad == 0;
}

/* The permute indices of split_block: the high words of two vectors' lanes in order (A rows)
 * and pack_b's interleave of two rows' words (B pair-rows), loaded once per call. */
typedef struct split_idx {
    __m512i odd, ilo, ihi;
} split_idx;

static inline __attribute__((always_inline)) split_idx split_idx_load(void)
{
    static const uint16_t odd_idx[32] = {1,  3,  5,  7,  9,  11, 13, 15, 17, 19, 21,
                                         23, 25, 27, 29, 31, 33, 35, 37, 39, 41, 43,
                                         45, 47, 49, 51, 53, 55, 57, 59, 61, 63};
    static const uint16_t lo_idx[32] = {0,  32, 1,  33, 2,  34, 3,  35, 4,  36, 5,
                                        37, 6,  38, 7,  39, 8,  40, 9,  41, 10, 42,
                                        11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
    split_idx ix;
    ix.odd = _mm512_loadu_si512(odd_idx);
    ix.ilo = _mm512_loadu_si512(lo_idx);
    ix.ihi = _mm512_add_epi16(ix.ilo, _mm512_set1_epi16(16));
    return ix;
}

/* split of one row pair (r0, r0 + 1) x 32 columns, x[row of the pair][16-column half], into
 *   a (NULL: none): row r0's hi words at a[0 .. 32), its lo words at a[akn ..], row r0 + 1's
 *     lda further; a row r0 + i >= ra is not written;
 *   b0, b1 (NULL: none): the hi and lo pair-rows of the pair at this block's first column, nb
 *     columns of them (16 or 32; <= 0: none).
 * 16-column halves split once, then the A rows (the high halves of two halves' lanes, in
 * order: one two-source permute) and the B pair-rows (row r0's high half shifted down, or'ed
 * with row r0 + 1's). cvt: by split_cvt32 first (A rows as they come, B pair-rows by pack_b's
 * interleave), split16 where it declines: the same bits. */
static inline __attribute__((always_inline)) void
split_block(const __m512 x[2][2], const split_idx *ix, int cvt, uint16_t *a, int64_t lda,
            int64_t akn, int arows, uint32_t *b0, uint32_t *b1, int64_t nb)
{
    __m512i hp[2], lp[2], h[2][2], l[2][2];
    if (cvt && split_cvt32(x, hp, lp, h)) {
        for (int i = 0; i < arows && a; i++) {
            _mm512_storeu_si512(a + i * lda, hp[i]);
            _mm512_storeu_si512(a + i * lda + akn, lp[i]);
        }
        for (int half = 0; half < 2 && b0 && 16 * half < nb; half++) {
            _mm512_storeu_si512(b0 + 16 * half,
                                _mm512_or_si512(_mm512_srli_epi32(h[0][half], 16), h[1][half]));
            _mm512_storeu_si512(b1 + 16 * half,
                                _mm512_permutex2var_epi16(lp[0], half ? ix->ihi : ix->ilo, lp[1]));
        }
        return;
    }
    for (int i = 0; i < 2; i++)
        for (int half = 0; half < 2; half++)
            split16(x[i][half], &h[i][half], &l[i][half]);
    for (int i = 0; i < arows && a; i++) {
        _mm512_storeu_si512(a + i * lda, _mm512_permutex2var_epi16(h[i][0], ix->odd, h[i][1]));
        _mm512_storeu_si512(a + i * lda + akn,
                            _mm512_permutex2var_epi16(l[i][0], ix->odd, l[i][1]));
    }
    for (int half = 0; half < 2 && b0 && 16 * half < nb; half++) {
        _mm512_storeu_si512(b0 + 16 * half,
                            _mm512_or_si512(_mm512_srli_epi32(h[0][half], 16), h[1][half]));
        _mm512_storeu_si512(b1 + 16 * half,
                            _mm512_or_si512(_mm512_srli_epi32(l[0][half], 16), l[1][half]));
    }
}

/* Row pairs (2kk, 2kk + 1) of X, 32 columns at a time, through split_block. */
static inline __attribute__((always_inline)) void split_rows(const float *X, int64_t ldx,
                                                             int64_t rows, int64_t n, uint16_t *a,
                                                             int64_t lda, uint32_t *bp,
                                                             int64_t ldbp, int cvt)
{
    const split_idx ix = split_idx_load();
    const int64_t kr = rup(rows, CPU_MM_KP), kn = rup(n, CPU_MM_KP), n16 = rup(n, 16);
    const int64_t ra = rup(rows, 16), cend = a ? kn : n16;
    for (int64_t r0 = 0; r0 < (bp ? kr : ra); r0 += 2)
        for (int64_t c0 = 0; c0 < cend; c0 += 32) {
            __m512 x[2][2]; /* [row of the pair][16-column half] */
            if (cvt && r0 + 2 <= rows && c0 + 32 <= n) { /* inside X: plain loads */
                for (int i = 0; i < 2; i++)
                    for (int half = 0; half < 2; half++)
                        x[i][half] = _mm512_loadu_ps(X + (r0 + i) * ldx + c0 + 16 * half);
            } else {
                for (int i = 0; i < 2; i++)
                    for (int half = 0; half < 2; half++) {
                        const int64_t c = c0 + 16 * half, nv = n - c;
                        const __mmask16 mk = nv >= 16   ? 0xffff
                                             : nv > 0 ? (__mmask16)((1u << nv) - 1u)
                                                      : 0;
                        x[i][half] = r0 + i < rows && mk
                                         ? _mm512_maskz_loadu_ps(mk, X + (r0 + i) * ldx + c)
                                         : _mm512_setzero_ps();
                    }
            }
            const int arows = !a ? 0 : r0 + 2 <= ra ? 2 : r0 < ra ? 1 : 0;
            split_block(x, &ix, cvt, arows ? a + r0 * lda + c0 : NULL, lda, kn, arows,
                        bp ? bp + r0 / 2 * ldbp + c0 : NULL,
                        bp ? bp + (kr + r0) / 2 * ldbp + c0 : NULL, n16 - c0);
        }
}

/* The lanes of columns [c0, c0 + 32) inside [lo, hi) (0 <= lo <= hi). */
static inline __attribute__((always_inline)) __mmask32 range32(int64_t lo, int64_t hi, int64_t c0)
{
    const int64_t a0 = lo - c0, a1 = hi - c0;
    const uint32_t e = a1 <= 0 ? 0 : a1 >= 32 ? 0xffffffffu : (1u << a1) - 1u;
    const uint32_t s = a0 <= 0 ? 0 : a0 >= 32 ? 0xffffffffu : (1u << a0) - 1u;
    return (__mmask32)(e & ~s);
}

/* p_ds_split (kernels.h cpu_mm_p_ds_split): for each row pair and 32 columns, P and dS as p_ds
 * computes them (kernels_simd.h: P = 2^((scale S - L) log2 e) by exp2p_avx512.h, dS = P (dP -
 * Di), the same operations in the same order, lane by lane), +0.0 outside each row's range (the
 * zero masking of the last operation), and split (split_block, the split_cvt path) into the
 * operands while in registers: S and dP are read once, and neither float32 tile is written
 * back (but dS with keep_ds). A block that no row of the pair sees is split from zeros without
 * reading S or dP. */
void cpu_mm_avx512_p_ds_split(const cpu_mm_p_ds_split *g)
{
    const split_idx ix = split_idx_load();
    const int64_t rows = g->rows, n = g->n, lds = g->lds;
    const int64_t kr = rup(rows, CPU_MM_KP), kn = rup(n, CPU_MM_KP), n16 = rup(n, 16);
    const int64_t ra = rup(rows, 16), cend = g->dsa ? kn : n16;
    const int b = g->pb || g->dsp;
    const __m512 c = _mm512_set1_ps(g->scale), log2e = _mm512_set1_ps(1.44269504088896341f);
    for (int64_t r0 = 0; r0 < (b ? kr : ra); r0 += 2) {
        int64_t c0r[2], c1r[2];
        __m512 nl[2], di[2];
        for (int i = 0; i < 2; i++) {
            const int64_t r = r0 + i < rows ? r0 + i : -1;
            int64_t lo = r < 0 ? 0 : g->lo[r] - g->jlo, hi = r < 0 ? 0 : g->hi[r] - g->jlo;
            lo = lo < 0 ? 0 : lo > n ? n : lo;
            hi = hi < lo ? lo : hi > n ? n : hi;
            c0r[i] = lo, c1r[i] = hi;
            nl[i] = _mm512_set1_ps(r < 0 ? 0.0f : -g->L[r]);
            di[i] = _mm512_set1_ps(r < 0 ? 0.0f : g->Di[r]);
        }
        const float *S = g->S + r0 * lds, *dP = g->dP + r0 * lds;
        const int arows = !g->dsa ? 0 : r0 + 2 <= ra ? 2 : r0 < ra ? 1 : 0;
        int64_t o = 0, len = g->seg0 < n ? g->seg0 : n; /* the A segment of column c0 */
        for (int64_t c0 = 0; c0 < cend; c0 += 32) {
            if (c0 >= o + len && c0 < n) {
                o += len;
                len = n - o < g->seg ? n - o : g->seg;
            }
            const __mmask32 m0 = range32(c0r[0], c1r[0], c0), m1 = range32(c0r[1], c1r[1], c0);
            __m512 p[2][2], ds[2][2];
            if (m0 | m1) {
                for (int i = 0; i < 2; i++)
                    for (int half = 0; half < 2; half++) {
                        const __mmask16 mk = (__mmask16)((i ? m1 : m0) >> 16 * half);
                        const int64_t at = i * lds + c0 + 16 * half;
                        const __m512 sv = _mm512_maskz_loadu_ps(mk, S + at);
                        const __m512 dv = _mm512_maskz_loadu_ps(mk, dP + at);
                        p[i][half] = exp2p_avx512_maskz(
                            mk, _mm512_mul_ps(_mm512_fmadd_ps(sv, c, nl[i]), log2e));
                        ds[i][half] = _mm512_maskz_mul_ps(mk, p[i][half], _mm512_sub_ps(dv, di[i]));
                    }
            } else {
                for (int i = 0; i < 2; i++)
                    p[i][0] = p[i][1] = ds[i][0] = ds[i][1] = _mm512_setzero_ps();
            }
            if (g->keep_ds)
                for (int i = 0; i < 2 && r0 + i < rows; i++)
                    for (int half = 0; half < 2; half++) {
                        const int64_t cc = c0 + 16 * half, nv = n - cc;
                        if (nv > 0)
                            _mm512_mask_storeu_ps(g->dP + (r0 + i) * lds + cc,
                                                  nv >= 16 ? 0xffff : (__mmask16)((1u << nv) - 1u),
                                                  ds[i][half]);
                    }
            if (g->pb)
                split_block(p, &ix, 1, NULL, 0, 0, 0, g->pb + r0 / 2 * g->ldpb + c0,
                            g->pb + (kr + r0) / 2 * g->ldpb + c0, n16 - c0);
            if (g->dsa || g->dsp)
                split_block(ds, &ix, 1, arows ? g->dsa + r0 * g->ldds + o + c0 : NULL, g->ldds,
                            rup(len, CPU_MM_KP), arows,
                            g->dsp ? g->dsp + r0 / 2 * g->ldpb + c0 : NULL,
                            g->dsp ? g->dsp + (kr + r0) / 2 * g->ldpb + c0 : NULL, n16 - c0);
        }
    }
}

void cpu_mm_avx512_split(const float *X, int64_t ldx, int64_t rows, int64_t n, uint16_t *a,
                         int64_t lda, uint32_t *bp, int64_t ldbp)
{
    split_rows(X, ldx, rows, n, a, lda, bp, ldbp, 0);
}

void cpu_mm_avx512_split_cvt(const float *X, int64_t ldx, int64_t rows, int64_t n, uint16_t *a,
                             int64_t lda, uint32_t *bp, int64_t ldbp)
{
    split_rows(X, ldx, rows, n, a, lda, bp, ldbp, 1);
}

/* pack_at: blocks of 32 rows x 16 columns of X; the two rows of each pair interleaved (as
 * pack_b) give 16 rows of 16 words, word kk of row c = (X[2kk][c], X[2kk + 1][c]); their 32-bit
 * transpose is 16 rows of A (one per column of X), 32 bf16 each, stored twice. */
void cpu_mm_avx512_pack_at(const uint16_t *X, int64_t ldx, int64_t rows, int64_t n, uint16_t *A,
                           int64_t lda)
{
    static const uint16_t lo_idx[32] = {0,  32, 1,  33, 2,  34, 3,  35, 4,  36, 5,
                                        37, 6,  38, 7,  39, 8,  40, 9,  41, 10, 42,
                                        11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
    const __m512i ilo = _mm512_loadu_si512(lo_idx);
    const int64_t kr = rup(rows, CPU_MM_KP), n16 = rup(n, 16);
    for (int64_t c0 = 0; c0 < n16; c0 += 16) {
        const int64_t nv = n - c0 >= 16 ? 16 : n - c0;
        const __mmask32 mk = (__mmask32)((1u << nv) - 1u);
        for (int64_t r0 = 0; r0 < kr; r0 += 32) {
            __m512i t[16];
            for (int i = 0; i < 16; i++) {
                const int64_t ra = r0 + 2 * i, rb = ra + 1;
                const __m512i x0 = ra < rows ? _mm512_maskz_loadu_epi16(mk, X + ra * ldx + c0)
                                             : _mm512_setzero_si512();
                const __m512i x1 = rb < rows ? _mm512_maskz_loadu_epi16(mk, X + rb * ldx + c0)
                                             : _mm512_setzero_si512();
                t[i] = _mm512_permutex2var_epi16(x0, ilo, x1);
            }
            transpose16(t);
            for (int j = 0; j < 16; j++) {
                _mm512_storeu_si512(A + (c0 + j) * lda + r0, t[j]);
                _mm512_storeu_si512(A + (c0 + j) * lda + kr + r0, t[j]);
            }
        }
    }
}

/* transpose: 16 x 16 blocks of 32-bit words through transpose16; masked loads and stores at the
 * edges (rows of X past rows read as zeros and are never stored). */
void cpu_mm_avx512_transpose(const float *X, int64_t ldx, int64_t rows, int64_t n, float *Y,
                             int64_t ldy)
{
    for (int64_t r0 = 0; r0 < rows; r0 += 16) {
        const int64_t rv = rows - r0 >= 16 ? 16 : rows - r0;
        const __mmask16 mr = (__mmask16)((1u << rv) - 1u);
        for (int64_t c0 = 0; c0 < n; c0 += 16) {
            const int64_t cv = n - c0 >= 16 ? 16 : n - c0;
            const __mmask16 mc = (__mmask16)((1u << cv) - 1u);
            __m512i t[16];
            for (int i = 0; i < 16; i++)
                t[i] = i < rv ? _mm512_maskz_loadu_epi32(mc, X + (r0 + i) * ldx + c0)
                              : _mm512_setzero_si512();
            transpose16(t);
            for (int j = 0; j < cv; j++)
                _mm512_mask_storeu_epi32(Y + (c0 + j) * ldy + r0, mr, t[j]);
        }
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
    .split = cpu_mm_avx512_split,
    .split_cvt = cpu_mm_avx512_split_cvt,
    .pack_at = cpu_mm_avx512_pack_at,
    .transpose = cpu_mm_avx512_transpose,
    .p_ds = cpu_kernels_avx512_mm_p_ds,
    .p_ds_split = cpu_mm_avx512_p_ds_split,
};
#endif
