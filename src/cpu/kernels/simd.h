/*
 * simd.h — the one SIMD vocabulary of the CPU kernels.
 *
 * A float vector type `vf` of SIMD_VL lanes, a lane mask `vm`, and a small set of operations,
 * mapped onto the instruction set the including file is compiled for:
 *   AVX-512 (F, DQ, BW, VL, BF16) + FMA + F16C   VL = 16   kernels_avx512.c (-mavx512f ...)
 *   AVX2 + FMA + F16C                         VL = 8    kernels_avx2.c   (-mavx2 -mfma -mf16c)
 *   NEON (AArch64)                            VL = 4    kernels_neon.c
 * The operations are written once against this vocabulary (kernels_simd.h) and compiled once
 * per ISA file; the scalar reference kernels (kernels_scalar.c) are plain C and do not use it.
 * Which file runs is decided at run time (kernels_dispatch.c), so the library itself is built
 * for baseline x86-64.
 *
 * Semantics every mapping keeps (the ops rely on them):
 *   v_max(a, b)    if b is NaN the result is NaN (x86 max returns its second operand when either
 *                  is NaN; NEON propagates NaN): put the possibly-NaN value second.
 *   v_round(x)     to nearest, ties to even.
 *   v_pow2i(n)     2^n for integer-valued n in [-126, 127]; n = -127 gives exactly +0.0 and
 *                  n = 128 +inf (biased exponent 0 / 255), which the exp kernels use to flush
 *                  to zero and to overflow.
 *   *_part(p, k)   touch only the first k lanes (0 <= k <= VL) of memory; other lanes read 0.
 *   bf16 stores round to nearest even and keep NaN a NaN; f16 stores round to nearest even.
 *   v_load_bf16x2 / v_store_bf16x2  2 x VL bf16 values as two vectors in an order private to
 *                  the mapping (AVX2: even | odd elements): only for element-wise work whose
 *                  operands are all loaded this way and whose results are stored this way.
 *                  v_store_bf16x2 rounds to nearest even and keeps a NaN a NaN if the low 16
 *                  bits of its float32 are zero -- which every NaN computed from bf16 operands
 *                  is: arithmetic returns an operand's NaN (quieted, payload kept) or the
 *                  default NaN 0xffc00000. (AVX2 saves the NaN check of v_store_bf16 that way.)
 *   v_pow2_magic(t) 2^n from t = 12583039 + n (1.5 * 2^23 + 127 + n, an exact float for
 *                  integer n in [-127, 128]): t's low bits hold n + 127, a shift makes them the
 *                  exponent; n = -127 gives +0.0, n = 128 +inf.
 */
#ifndef FLASHC_CPU_SIMD_H
#define FLASHC_CPU_SIMD_H

#include <stdint.h>
#include <string.h>

#define SIMD_INLINE static inline __attribute__((always_inline))

#if defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__AVX512BW__) &&                      \
    defined(__AVX512VL__) && defined(__AVX512BF16__) && defined(__FMA__) && defined(__F16C__)
/* ---------------------------------------------------------------- AVX-512 -------------- */
#include <immintrin.h>
#include "exp2p_avx512.h"
#define SIMD_VL 16
typedef __m512 vf;
typedef __mmask16 vm;

SIMD_INLINE vf v_zero(void) { return _mm512_setzero_ps(); }
SIMD_INLINE vf v_set1(float x) { return _mm512_set1_ps(x); }
SIMD_INLINE vf v_load(const float *p) { return _mm512_loadu_ps(p); }
SIMD_INLINE void v_store(float *p, vf x) { _mm512_storeu_ps(p, x); }
SIMD_INLINE vf v_load_part(const float *p, int k)
{
    return _mm512_maskz_loadu_ps((__mmask16)((1u << k) - 1u), p);
}
SIMD_INLINE void v_store_part(float *p, vf x, int k)
{
    _mm512_mask_storeu_ps(p, (__mmask16)((1u << k) - 1u), x);
}
SIMD_INLINE vf v_add(vf a, vf b) { return _mm512_add_ps(a, b); }
SIMD_INLINE vf v_sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
SIMD_INLINE vf v_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
SIMD_INLINE vf v_div(vf a, vf b) { return _mm512_div_ps(a, b); }
SIMD_INLINE vf v_fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
SIMD_INLINE vf v_max(vf a, vf b) { return _mm512_max_ps(a, b); }
SIMD_INLINE vf v_min(vf a, vf b) { return _mm512_min_ps(a, b); }
SIMD_INLINE vf v_round(vf x)
{
    return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
SIMD_INLINE vf v_pow2i(vf n)
{
    __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
    return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
}
SIMD_INLINE vf v_pow2_magic(vf t)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(t), 23));
}
SIMD_INLINE vm v_lt(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
SIMD_INLINE vm v_gt(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
SIMD_INLINE vm v_isnan(vf a) { return _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q); }
SIMD_INLINE vf v_select(vm m, vf a, vf b) { return _mm512_mask_blend_ps(m, b, a); }
SIMD_INLINE float v_hsum(vf x) { return _mm512_reduce_add_ps(x); }
SIMD_INLINE float v_hmax(vf x) { return _mm512_reduce_max_ps(x); }
SIMD_INLINE vf v_load_bf16(const uint16_t *p)
{
    __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
/* AVX-512 BF16: one instruction, round to nearest even, NaN stays NaN -- but vcvtneps2bf16
 * treats float32 subnormal inputs as zero, where the reference (and the AVX2 path) round them
 * like any other value. Vectors holding a subnormal (rare: |x| < 2^-126) take the integer
 * rounding instead, so every path stores the same bits. */
SIMD_INLINE __mmask16 simd_subnormal(vf x)
{
    const vf a = _mm512_abs_ps(x);
    return _mm512_cmp_ps_mask(a, _mm512_set1_ps(__FLT_MIN__), _CMP_LT_OQ) &
           _mm512_cmp_ps_mask(a, _mm512_setzero_ps(), _CMP_GT_OQ);
}
SIMD_INLINE __m256i simd_bf16_rne_int(vf x) /* u + 0x7fff + lsb, for finite x */
{
    const __m512i u = _mm512_castps_si512(x);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16));
}
SIMD_INLINE __m256i simd_bf16(vf x)
{
    const __m256i h = (__m256i)_mm512_cvtneps_pbh(x);
    const __mmask16 sub = simd_subnormal(x);
    return sub ? _mm256_mask_blend_epi16(sub, h, simd_bf16_rne_int(x)) : h;
}
SIMD_INLINE void v_store_bf16(uint16_t *p, vf x) { _mm256_storeu_si256((__m256i *)p, simd_bf16(x)); }
/* The softmax's P (mm_softmax), rounded to bf16 right after, and the backward's P (p_ds):
 * exp2p_avx512.h (accuracy and special values there). Results below FLT_MIN are subnormal, and
 * v_store_bf16_p flushes those to zero, so the softmax's P has no subnormals. */
#define SIMD_EXP2_P 1
SIMD_INLINE vf v_exp2_p(vf x) { return exp2p_avx512(x); }
/* bf16 of v_exp2_p's results: vcvtneps2bf16 alone (subnormals, below FLT_MIN, become 0). */
SIMD_INLINE void v_store_bf16_p(uint16_t *p, vf x)
{
    _mm256_storeu_si256((__m256i *)p, (__m256i)_mm512_cvtneps_pbh(x));
}
/* v_store_bf16_p of a, then b at p + 16: vcvtne2ps2bf16 rounds as vcvtneps2bf16 does, in one
 * instruction for two vectors (the conversion was a fifth of the softmax's exponential pass). */
SIMD_INLINE void v_store_bf16x2_p(uint16_t *p, vf a, vf b)
{
    _mm512_storeu_si512((void *)p, (__m512i)_mm512_cvtne2ps_pbh(b, a)); /* low half: a */
}
SIMD_INLINE void v_load_bf16x2(const uint16_t *p, vf *a, vf *b)
{
    *a = v_load_bf16(p);
    *b = v_load_bf16(p + 16);
}
SIMD_INLINE void v_store_bf16x2(uint16_t *p, vf a, vf b)
{
    if (simd_subnormal(a) | simd_subnormal(b)) { /* see simd_bf16 */
        v_store_bf16(p, a);
        v_store_bf16(p + 16, b);
    } else {
        _mm512_storeu_si512((void *)p, (__m512i)_mm512_cvtne2ps_pbh(b, a)); /* low half: a */
    }
}
SIMD_INLINE vf v_load_f16(const uint16_t *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}
SIMD_INLINE void v_store_f16(uint16_t *p, vf x)
{
    _mm256_storeu_si256((__m256i *)p, _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
}

#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
/* ---------------------------------------------------------------- AVX2 + FMA ----------- */
#include <immintrin.h>
#define SIMD_VL 8
typedef __m256 vf;
typedef __m256 vm;

/* maskload/maskstore masks for k lanes: 8 - k entries into {-1 x 8, 0 x 8} */
static const int32_t simd_part_mask[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

SIMD_INLINE vf v_zero(void) { return _mm256_setzero_ps(); }
SIMD_INLINE vf v_set1(float x) { return _mm256_set1_ps(x); }
SIMD_INLINE vf v_load(const float *p) { return _mm256_loadu_ps(p); }
SIMD_INLINE void v_store(float *p, vf x) { _mm256_storeu_ps(p, x); }
SIMD_INLINE vf v_load_part(const float *p, int k)
{
    return _mm256_maskload_ps(p, _mm256_loadu_si256((const __m256i *)(simd_part_mask + 8 - k)));
}
SIMD_INLINE void v_store_part(float *p, vf x, int k)
{
    _mm256_maskstore_ps(p, _mm256_loadu_si256((const __m256i *)(simd_part_mask + 8 - k)), x);
}
SIMD_INLINE vf v_add(vf a, vf b) { return _mm256_add_ps(a, b); }
SIMD_INLINE vf v_sub(vf a, vf b) { return _mm256_sub_ps(a, b); }
SIMD_INLINE vf v_mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
SIMD_INLINE vf v_div(vf a, vf b) { return _mm256_div_ps(a, b); }
SIMD_INLINE vf v_fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
SIMD_INLINE vf v_max(vf a, vf b) { return _mm256_max_ps(a, b); }
SIMD_INLINE vf v_min(vf a, vf b) { return _mm256_min_ps(a, b); }
SIMD_INLINE vf v_round(vf x)
{
    return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
SIMD_INLINE vf v_pow2i(vf n)
{
    __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
}
SIMD_INLINE vf v_pow2_magic(vf t)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(t), 23));
}
SIMD_INLINE vm v_lt(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
SIMD_INLINE vm v_gt(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
SIMD_INLINE vm v_isnan(vf a) { return _mm256_cmp_ps(a, a, _CMP_UNORD_Q); }
SIMD_INLINE vf v_select(vm m, vf a, vf b) { return _mm256_blendv_ps(b, a, m); }
SIMD_INLINE float v_hsum(vf x)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
SIMD_INLINE float v_hmax(vf x)
{
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
SIMD_INLINE vf v_load_bf16(const uint16_t *p)
{
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
/* No bf16 instructions here: round to nearest even in integers (u + 0x7fff + lsb; the bf16 is
 * then the high half of each 32-bit lane). */
SIMD_INLINE __m256i simd_bf16_round(vf x)
{
    const __m256i u = _mm256_castps_si256(x);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    return _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
}
/* ... with a NaN kept quiet by setting a mantissa bit (a carry could turn it into inf or 0);
 * the 16-bit results in the low half of each 32-bit lane. */
SIMD_INLINE __m256i simd_bf16_bits(vf x)
{
    const __m256i hi = _mm256_srli_epi32(_mm256_castps_si256(x), 16);
    const __m256i r = _mm256_srli_epi32(simd_bf16_round(x), 16);
    const __m256i qnan = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
    return _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(r), _mm256_castsi256_ps(qnan), v_isnan(x)));
}
SIMD_INLINE void v_store_bf16(uint16_t *p, vf x)
{
    const __m256i r = simd_bf16_bits(x);
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xd8);
    _mm_storeu_si128((__m128i *)p, _mm256_castsi256_si128(packed));
}
/* Pairs: 16 bf16 values as two vectors, the even elements and the odd ones: each 32-bit lane
 * holds two bf16, so a shift (even) and a mask (odd) widen them and a 16-bit blend of the
 * rounded results packs them back, with no shuffle (measured faster than the unpack/pack
 * order: bench/RESULTS.md, SwiGLU bf16/f16). The rounding is simd_bf16_round without
 * simd_bf16_bits' NaN check (see the header: NaNs computed from bf16 operands have zero low
 * bits, so the carry of the rounding cannot reach their high half). */
SIMD_INLINE void v_load_bf16x2(const uint16_t *p, vf *a, vf *b)
{
    const __m256i x = _mm256_loadu_si256((const __m256i *)p);
    *a = _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
    *b = _mm256_castsi256_ps(_mm256_and_si256(x, _mm256_set1_epi32((int)0xffff0000u)));
}
SIMD_INLINE void v_store_bf16x2(uint16_t *p, vf a, vf b)
{
    const __m256i even = _mm256_srli_epi32(simd_bf16_round(a), 16);
    _mm256_storeu_si256((__m256i *)p, _mm256_blend_epi16(even, simd_bf16_round(b), 0xaa));
}
SIMD_INLINE vf v_load_f16(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}
SIMD_INLINE void v_store_f16(uint16_t *p, vf x)
{
    _mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
}

#elif defined(__aarch64__) && defined(__ARM_NEON)
/* ---------------------------------------------------------------- NEON (AArch64) ------- */
#include <arm_neon.h>
#define SIMD_VL 4
typedef float32x4_t vf;
typedef uint32x4_t vm;

SIMD_INLINE vf v_zero(void) { return vdupq_n_f32(0.0f); }
SIMD_INLINE vf v_set1(float x) { return vdupq_n_f32(x); }
SIMD_INLINE vf v_load(const float *p) { return vld1q_f32(p); }
SIMD_INLINE void v_store(float *p, vf x) { vst1q_f32(p, x); }
SIMD_INLINE vf v_load_part(const float *p, int k)
{
    float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    memcpy(t, p, (size_t)k * sizeof(float));
    return vld1q_f32(t);
}
SIMD_INLINE void v_store_part(float *p, vf x, int k)
{
    float t[4];
    vst1q_f32(t, x);
    memcpy(p, t, (size_t)k * sizeof(float));
}
SIMD_INLINE vf v_add(vf a, vf b) { return vaddq_f32(a, b); }
SIMD_INLINE vf v_sub(vf a, vf b) { return vsubq_f32(a, b); }
SIMD_INLINE vf v_mul(vf a, vf b) { return vmulq_f32(a, b); }
SIMD_INLINE vf v_div(vf a, vf b) { return vdivq_f32(a, b); }
SIMD_INLINE vf v_fma(vf a, vf b, vf c) { return vfmaq_f32(c, a, b); }
SIMD_INLINE vf v_max(vf a, vf b) { return vmaxq_f32(a, b); }
SIMD_INLINE vf v_min(vf a, vf b) { return vminq_f32(a, b); }
SIMD_INLINE vf v_round(vf x) { return vrndnq_f32(x); }
SIMD_INLINE vf v_pow2i(vf n)
{
    int32x4_t e = vaddq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(127));
    return vreinterpretq_f32_s32(vshlq_n_s32(e, 23));
}
SIMD_INLINE vf v_pow2_magic(vf t)
{
    return vreinterpretq_f32_s32(vshlq_n_s32(vreinterpretq_s32_f32(t), 23));
}
SIMD_INLINE vm v_lt(vf a, vf b) { return vcltq_f32(a, b); }
SIMD_INLINE vm v_gt(vf a, vf b) { return vcgtq_f32(a, b); }
SIMD_INLINE vm v_isnan(vf a) { return vmvnq_u32(vceqq_f32(a, a)); }
SIMD_INLINE vf v_select(vm m, vf a, vf b) { return vbslq_f32(m, a, b); }
SIMD_INLINE float v_hsum(vf x) { return vaddvq_f32(x); }
SIMD_INLINE float v_hmax(vf x) { return vmaxvq_f32(x); }
SIMD_INLINE vf v_load_bf16(const uint16_t *p)
{
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
}
SIMD_INLINE void v_store_bf16(uint16_t *p, vf x)
{
    uint32x4_t u = vreinterpretq_u32_f32(x);
    uint32x4_t lsb = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
    uint32x4_t r = vshrq_n_u32(vaddq_u32(u, vaddq_u32(lsb, vdupq_n_u32(0x7fff))), 16);
    uint32x4_t qnan = vorrq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(0x40));
    vst1_u16(p, vmovn_u32(vbslq_u32(v_isnan(x), qnan, r)));
}
SIMD_INLINE void v_load_bf16x2(const uint16_t *p, vf *a, vf *b)
{
    *a = v_load_bf16(p);
    *b = v_load_bf16(p + 4);
}
SIMD_INLINE void v_store_bf16x2(uint16_t *p, vf a, vf b)
{
    v_store_bf16(p, a);
    v_store_bf16(p + 4, b);
}
SIMD_INLINE vf v_load_f16(const uint16_t *p)
{
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}
SIMD_INLINE void v_store_f16(uint16_t *p, vf x)
{
    vst1_u16(p, vreinterpret_u16_f16(vcvt_f16_f32(x)));
}

#else
#error "simd.h: compile this file with the flags of one instruction set (see src/cpu/isa.cmake)"
#endif

/* ---- built on the mapping: the same for every ISA ------------------------------------- */

/* Typed partial loads/stores for row tails: through a VL-wide staging buffer. */
SIMD_INLINE vf v_load_bf16_part(const uint16_t *p, int k)
{
    uint16_t t[SIMD_VL] = {0};
    memcpy(t, p, (size_t)k * sizeof(uint16_t));
    return v_load_bf16(t);
}
SIMD_INLINE vf v_load_f16_part(const uint16_t *p, int k)
{
    uint16_t t[SIMD_VL] = {0};
    memcpy(t, p, (size_t)k * sizeof(uint16_t));
    return v_load_f16(t);
}
SIMD_INLINE void v_store_bf16_part(uint16_t *p, vf x, int k)
{
    uint16_t t[SIMD_VL];
    v_store_bf16(t, x);
    memcpy(p, t, (size_t)k * sizeof(uint16_t));
}
SIMD_INLINE void v_store_f16_part(uint16_t *p, vf x, int k)
{
    uint16_t t[SIMD_VL];
    v_store_f16(t, x);
    memcpy(p, t, (size_t)k * sizeof(uint16_t));
}

/* exp(r) for |r| <= ln2/2: degree-6 polynomial (Chebyshev-node fit of exp on that interval,
 * coefficients rounded to float; approximation error 2.0e-8 relative), Horner with FMA
 * (Estrin's scheme measured no faster here and doubled the rounding error). */
SIMD_INLINE vf v_exp_poly(vf r)
{
    vf p = v_set1(1.394110848e-3f);
    p = v_fma(p, r, v_set1(8.375125937e-3f));
    p = v_fma(p, r, v_set1(4.166635126e-2f));
    p = v_fma(p, r, v_set1(1.666641533e-1f));
    p = v_fma(p, r, v_set1(0.5f));
    p = v_fma(p, r, v_set1(1.0f));
    return v_fma(p, r, v_set1(1.0f));
}

/* 2^x for the softmax, where x = s - max <= 0 (or -inf for a masked score):
 * x = n + f, n = round(x), |f| <= 1/2, 2^f = exp(f ln2). Inputs below -126.5 give exactly 0
 * (clamped to n = -127, whose v_pow2i is +0.0): no subnormal results, and a masked -inf
 * contributes exactly nothing. Valid for x < 127.5. NaN in, NaN out.
 * Error: max relative error <= 1.5e-7 (1.26 ulp of 1) over [-126, 127.4]: asserted by a dense
 * sweep (2^24 points) against exp2() in double in tests/test_cpu_kernels.c; measured 8.9e-8 on
 * AVX2 (2026-11-29). */
SIMD_INLINE vf v_exp2_ftz(vf x)
{
    x = v_max(v_set1(-127.0f), x); /* x second: NaN propagates */
    const vf n = v_round(x);
    const vf r = v_mul(v_sub(x, n), v_set1(0.693147180559945f));
    return v_mul(v_exp_poly(r), v_pow2i(n));
}

/* v_exp2_p / v_store_bf16_p / v_store_bf16x2_p (see the AVX-512 mapping) elsewhere: v_exp2_ftz
 * and v_store_bf16. */
#ifndef SIMD_EXP2_P
SIMD_INLINE vf v_exp2_p(vf x) { return v_exp2_ftz(x); }
SIMD_INLINE void v_store_bf16_p(uint16_t *p, vf x) { v_store_bf16(p, x); }
SIMD_INLINE void v_store_bf16x2_p(uint16_t *p, vf a, vf b)
{
    v_store_bf16(p, a);
    v_store_bf16(p + SIMD_VL, b);
}
#endif

/* e^x for x already in [-87, 89] (callers clamp): n = round(x log2 e) is then in [-126, 128];
 * one v_pow2i scales, and n = 128 (x > 88.03) gives +inf (biased exponent 255): an overflow
 * slightly early, below ln(FLT_MAX) = 88.72. r = x - n ln2 in two FMA steps (Cody-Waite: ln2 = hi + lo, hi with 9
 * trailing zero bits so n * hi is exact for |n| <= 128). Same error as v_exp. */
SIMD_INLINE vf v_exp_core(vf x)
{
    const vf n = v_round(v_mul(x, v_set1(1.44269504088896341f)));
    vf r = v_fma(n, v_set1(-0.693145751953125f), x);
    r = v_fma(n, v_set1(-1.42860682030941723212e-6f), r);
    return v_mul(v_exp_poly(r), v_pow2i(n));
}

/* e^x over the whole float range: v_exp_core inside [-87, 88]; above, up to ln(FLT_MAX), 2^n is
 * applied in two halves so n = 128 does not overflow early. x > ln(FLT_MAX) -> +inf,
 * x < ln(FLT_MIN) -> 0 (results below FLT_MIN are flushed), NaN -> NaN.
 * Error: max relative error <= 1.5e-7 over [ln FLT_MIN, ln FLT_MAX], asserted like v_exp2_ftz;
 * measured 9.0e-8 on AVX2 (2026-11-29). */
SIMD_INLINE vf v_exp(vf x)
{
    const vf n = v_round(v_mul(x, v_set1(1.44269504088896341f)));
    vf r = v_fma(n, v_set1(-0.693145751953125f), x);
    r = v_fma(n, v_set1(-1.42860682030941723212e-6f), r);
    const vf nh = v_round(v_mul(n, v_set1(0.5f))); /* |n| <= 128 after the selects below */
    vf y = v_mul(v_mul(v_exp_poly(r), v_pow2i(nh)), v_pow2i(v_sub(n, nh)));
    y = v_select(v_gt(x, v_set1(88.7228391f)), v_set1(__builtin_inff()), y);
    y = v_select(v_lt(x, v_set1(-87.3365447f)), v_zero(), y);
    return v_select(v_isnan(x), x, y);
}

/* silu(g) = g / (1 + e^-g). e^-g is taken with -g clamped to [-87, 89], without v_exp's
 * selects: below, 1 + e^-g is 1 to float precision (silu = g); above 88.03, e^-g is +inf and
 * silu = -0, where the true |silu| < 1e-36 (the scalar reference flushes from -g > 88.72).
 * v_max/v_min keep a NaN g (it is their second operand). */
SIMD_INLINE vf v_silu(vf g)
{
    const vf e = v_exp_core(v_min(v_set1(89.0f), v_max(v_set1(-87.0f), v_sub(v_zero(), g))));
    return v_div(g, v_add(v_set1(1.0f), e));
}

/* silu(g) = g / (1 + 2^(-g log2 e)) for a result rounded to 16 bits: a shorter exp, degree
 * deg = 3 (bf16) or 4 (f16). -g log2 e = n + r by one FMA onto the magic 1.5 * 2^23 + 127
 * (t = magic + n, rounded to nearest; n = t - magic exactly), r = -g log2 e - n by a second
 * FMA (|r| <= 1/2), 2^r by a polynomial (Chebyshev-node fit on [-1/2, 1/2], coefficients in
 * float), 2^n by v_pow2_magic. g is clamped to [-89, 87] for the exponential only, so n is in
 * [-126, 128]: g > 87 gives 1 + e = 1 (silu = g), g < -88.4 gives e = +inf (silu = -0, where
 * the true |silu| < 1e-36); NaN g -> NaN (the quotient keeps g), +inf -> +inf, -inf -> NaN
 * (-inf / inf), as in the scalar reference.
 * Error before the output rounding (relative): 2^r's fit 1.9e-4 (deg 3) / 3.6e-6 (deg 4), plus
 * <= 2.6e-6 from log2 e in float (|n| <= 128), plus a few float roundings; the error of e
 * enters silu scaled by e / (1 + e) < 1. After rounding to bf16 (half ulp <= 2^-8 = 3.9e-3) or
 * f16 (2^-11 = 4.9e-4) that is <= 1.05x resp. 1.02x the error of rounding the exact silu: the
 * dense sweep in tests/test_cpu_kernels.c asserts <= 2x over every bf16 / f16 value of g. */
SIMD_INLINE vf v_silu_lp(vf g, int deg)
{
    const vf gc = v_min(v_set1(87.0f), v_max(v_set1(-89.0f), g));
    const vf nlog2e = v_set1(-1.44269504088896341f), magic = v_set1(12583039.0f);
    const vf t = v_fma(gc, nlog2e, magic);
    const vf r = v_fma(gc, nlog2e, v_sub(magic, t));
    vf p;
    if (deg == 3) {
        p = v_set1(5.583828315e-2f);
        p = v_fma(p, r, v_set1(2.426394820e-1f));
        p = v_fma(p, r, v_set1(6.931367517e-1f));
    } else {
        p = v_set1(9.666368365e-3f);
        p = v_fma(p, r, v_set1(5.592197552e-2f));
        p = v_fma(p, r, v_set1(2.402234972e-1f));
        p = v_fma(p, r, v_set1(6.931210160e-1f));
    }
    p = v_fma(p, r, v_set1(1.0f));
    return v_div(g, v_fma(p, v_pow2_magic(t), v_set1(1.0f)));
}

#endif /* FLASHC_CPU_SIMD_H */
