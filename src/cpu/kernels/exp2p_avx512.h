/* kernels/exp2p_avx512.h — 2^x for the softmax's P and the backward's P on AVX-512 (simd.h
 * v_exp2_p), in one place for its two users: simd.h's AVX-512 mapping (the vocabulary's
 * kernels, kernels_simd.h) and avx512bf16.c's p_ds_split, which computes the P of p_ds in its
 * own registers and must get p_ds's bits. Raw intrinsics, no vocabulary, so that
 * tests/emu/run.sh can compile it against the intrinsic models of tests/emu/immintrin.h.
 *
 * 2^x = 2^f 2^floor(x) with f = x - floor(x) in [0, 1] by vreduceps, 2^f by a degree-4
 * polynomial (minimax for the relative error on [0, 1], 2.7e-6 in float32 -- 1/1400 of a bf16
 * rounding step), and the 2^floor(x) by vscalefps: 4 FMA and two single instructions, where
 * v_exp2_ftz takes 7 FMA, a clamp, a round, a subtraction, a multiplication and 3 integer
 * steps. x = -inf gives f = 0 and exactly +0.0; results below FLT_MIN are subnormal (x < -126).
 * NaN in, NaN out. Valid for x <= 127 (the softmax's x = s - max <= 0, the backward's
 * x = s - L <= 0 but for rounding). */
#ifndef FLASHC_CPU_EXP2P_AVX512_H
#define FLASHC_CPU_EXP2P_AVX512_H

#include <immintrin.h>

/* 2^f of f = x - floor(x), before the scaling by 2^floor(x) */
static inline __attribute__((always_inline)) __m512 exp2p_avx512_frac(__m512 x)
{
    const __m512 f = _mm512_reduce_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 p = _mm512_set1_ps(1.353416778e-2f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.201146007e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.414427549e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.930038333e-1f));
    return _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.000002623e+0f));
}

static inline __attribute__((always_inline)) __m512 exp2p_avx512(__m512 x)
{
    return _mm512_scalef_ps(exp2p_avx512_frac(x), x);
}

/* exp2p_avx512 in the lanes of k, +0.0 in the others (the zeroing is the last instruction's) */
static inline __attribute__((always_inline)) __m512 exp2p_avx512_maskz(__mmask16 k, __m512 x)
{
    return _mm512_maskz_scalef_ps(k, exp2p_avx512_frac(x), x);
}

#endif
