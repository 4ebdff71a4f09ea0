/* kernels/avx512.c — the SIMD kernels (kernels_simd.h) compiled for AVX-512 F/BW/VL/BF16 + FMA
 * + F16C (bf16 stores use vcvtneps2bf16). Flags: src/cpu/kernels/isa.cmake. Chosen at run time by
 * dispatch.c only on CPUs that report all of these features. */
#if defined(__x86_64__)
#include "internal.h"
#include "kernels.h"

#include <immintrin.h>

/* ---- di_rows: eight rows as the eight float64 lanes of one vector ------------------------
 * Each row's 8 next features as 8 float64 products (exact), an 8 x 8 transpose, then the 8
 * adds in feature order: lane r of the accumulator is row r's sum, in the scalar loop's order
 * (the same bits). Unit feature strides only; otherwise the plain C entry. */
_Static_assert(CPU_DI_ROWS == 8, "di_rows_avx512 holds one row per float64 lane");

static inline __attribute__((always_inline)) __m512d load8_pd(const void *base, flashc_dtype dt,
                                                              int64_t off)
{
    if (dt == FLASHC_BF16) {
        const __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)base + off));
        const __m256i w = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
        return _mm512_cvtps_pd(_mm256_castsi256_ps(w));
    }
    if (dt == FLASHC_F16)
        return _mm512_cvtps_pd(
            _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)base + off))));
    return _mm512_cvtps_pd(_mm256_loadu_ps((const float *)base + off));
}

/* p[r] lane k -> p[k] lane r (unpacks within 128-bit lanes, then two rounds of lane shuffles) */
static inline __attribute__((always_inline)) void transpose8_pd(__m512d p[8])
{
    __m512d t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm512_unpacklo_pd(p[2 * i], p[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_pd(p[2 * i], p[2 * i + 1]);
    }
    for (int h = 0; h < 2; h++) /* u[4h + c]: features c, c + 4 (c = 0, 2, 1, 3) of rows 4h.. */
        for (int c = 0; c < 2; c++) {
            u[4 * h + 2 * c] = _mm512_shuffle_f64x2(t[4 * h + c], t[4 * h + 2 + c], 0x88);
            u[4 * h + 2 * c + 1] = _mm512_shuffle_f64x2(t[4 * h + c], t[4 * h + 2 + c], 0xdd);
        }
    /* u[0]: f0 | f4, u[1]: f2 | f6, u[2]: f1 | f5, u[3]: f3 | f7 (rows 0-3); u[4..7] rows 4-7 */
    static const int f[4] = {0, 2, 1, 3};
    for (int i = 0; i < 4; i++) {
        p[f[i]] = _mm512_shuffle_f64x2(u[i], u[4 + i], 0x88);
        p[f[i] + 4] = _mm512_shuffle_f64x2(u[i], u[4 + i], 0xdd);
    }
}

static inline __attribute__((always_inline)) void
di_rows_dt(const void *a, const int64_t *ao, const void *b, const int64_t *bo, int64_t n,
           flashc_dtype dt, float *out)
{
    __m512d acc = _mm512_setzero_pd();
    int64_t d = 0;
    for (; d + 8 <= n; d += 8) {
        __m512d p[8];
        for (int r = 0; r < 8; r++)
            p[r] = _mm512_mul_pd(load8_pd(a, dt, ao[r] + d), load8_pd(b, dt, bo[r] + d));
        transpose8_pd(p);
        for (int k = 0; k < 8; k++)
            acc = _mm512_add_pd(acc, p[k]);
    }
    double s[8];
    _mm512_storeu_pd(s, acc);
    for (int r = 0; r < 8; r++) {
        for (int64_t e = d; e < n; e++)
            s[r] += (double)flashc__load(a, dt, ao[r] + e) * (double)flashc__load(b, dt, bo[r] + e);
        out[r] = (float)s[r];
    }
}

static void di_rows_avx512(const void *a, const int64_t *ao, int64_t sa, const void *b,
                           const int64_t *bo, int64_t sb, int64_t n, flashc_dtype dt, float *out)
{
    if (sa != 1 || sb != 1) {
        cpu_di_rows_scalar(a, ao, sa, b, bo, sb, n, dt, out);
        return;
    }
    switch (dt) {
    case FLASHC_BF16: di_rows_dt(a, ao, b, bo, n, FLASHC_BF16, out); break;
    case FLASHC_F16: di_rows_dt(a, ao, b, bo, n, FLASHC_F16, out); break;
    default: di_rows_dt(a, ao, b, bo, n, FLASHC_F32, out); break;
    }
}

#define SIMD_DI_ROWS di_rows_avx512
#define SIMD_TABLE cpu_kernels_avx512
#define SIMD_NAME "avx512"
#include "kernels_simd.h"

/* The same kernels plus bf16 matrix products for bfloat16 storage: vdpbf16ps (avx512bf16.c) and
 * AMX tiles (amx.c). dispatch.c offers them only where the CPU (and, for AMX, Linux) allows. */
const cpu_kernels cpu_kernels_avx512bf16 = {
    .name = "avx512bf16",
    .bf16 = &cpu_mm_bf16_avx512,
    SIMD_ENTRIES,
};

const cpu_kernels cpu_kernels_amx = {
    .name = "amx",
    .bf16 = &cpu_mm_bf16_amx,
    SIMD_ENTRIES,
};
#endif
