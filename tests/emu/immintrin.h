/* tests/emu/immintrin.h — a portable C model of the few AVX-512 and AMX intrinsics that
 * src/cpu/kernels/amx.c and avx512bf16.c use, so that their packing, tiling and edge logic can
 * be run (under ASan) on a CPU without AVX-512 or AMX: tests/emu/run.sh compiles those two files
 * against this header instead of the compiler's. Each model follows the instruction's
 * pseudo-code in the Intel SDM (element order, masking, lane structure); masked loads read only
 * the selected elements and tile loads read every byte of their 16 rows, so ASan sees exactly
 * the memory the real instructions touch. Not part of the library. */
#ifndef FLASHC_EMU_IMMINTRIN_H
#define FLASHC_EMU_IMMINTRIN_H
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

typedef long long __m512i __attribute__((vector_size(64), may_alias));
typedef float __m512 __attribute__((vector_size(64), may_alias));
typedef short __m512bh __attribute__((vector_size(64), may_alias));
typedef uint16_t __mmask16;
typedef uint32_t __mmask32;

typedef union { __m512i v; uint16_t h[32]; uint32_t w[16]; uint64_t q[8]; float f[16]; } emu_v;

static inline emu_v emu_i(__m512i x) { emu_v u; memcpy(&u, &x, 64); return u; }
static inline __m512i emu_o(emu_v u) { __m512i x; memcpy(&x, &u, 64); return x; }
static inline emu_v emu_f(__m512 x) { emu_v u; memcpy(&u, &x, 64); return u; }
static inline __m512 emu_of(emu_v u) { __m512 x; memcpy(&x, &u, 64); return x; }

static inline __m512i _mm512_loadu_si512(const void *p) { emu_v u; memcpy(&u, p, 64); return emu_o(u); }
static inline void _mm512_storeu_si512(void *p, __m512i x) { emu_v u = emu_i(x); memcpy(p, &u, 64); }
static inline __m512i _mm512_setzero_si512(void) { emu_v u; memset(&u, 0, 64); return emu_o(u); }
static inline __m512i _mm512_set1_epi16(short x) { emu_v u; for (int i = 0; i < 32; i++) u.h[i] = (uint16_t)x; return emu_o(u); }
static inline __m512i _mm512_set1_epi32(int x) { emu_v u; for (int i = 0; i < 16; i++) u.w[i] = (uint32_t)x; return emu_o(u); }
static inline __m512i _mm512_add_epi16(__m512i a, __m512i b)
{ emu_v x = emu_i(a), y = emu_i(b); for (int i = 0; i < 32; i++) x.h[i] = (uint16_t)(x.h[i] + y.h[i]); return emu_o(x); }
static inline __m512i _mm512_maskz_loadu_epi16(__mmask32 k, const void *p)
{
    emu_v u; memset(&u, 0, 64);
    for (int i = 0; i < 32; i++) if (k >> i & 1) memcpy(&u.h[i], (const char *)p + 2 * i, 2);
    return emu_o(u);
}
static inline __m512i _mm512_maskz_loadu_epi32(__mmask16 k, const void *p)
{
    emu_v u; memset(&u, 0, 64);
    for (int i = 0; i < 16; i++) if (k >> i & 1) memcpy(&u.w[i], (const char *)p + 4 * i, 4);
    return emu_o(u);
}
static inline void _mm512_mask_storeu_epi32(void *p, __mmask16 k, __m512i x)
{
    emu_v u = emu_i(x);
    for (int i = 0; i < 16; i++) if (k >> i & 1) memcpy((char *)p + 4 * i, &u.w[i], 4);
}
static inline __m512i _mm512_permutex2var_epi16(__m512i a, __m512i idx, __m512i b)
{
    emu_v x = emu_i(a), y = emu_i(b), ix = emu_i(idx), r;
    for (int i = 0; i < 32; i++) { int j = ix.h[i] & 63; r.h[i] = j < 32 ? x.h[j] : y.h[j - 32]; }
    return emu_o(r);
}
static inline __m512i _mm512_unpacklo_epi32(__m512i a, __m512i b)
{
    emu_v x = emu_i(a), y = emu_i(b), r;
    for (int l = 0; l < 4; l++) { r.w[4*l] = x.w[4*l]; r.w[4*l+1] = y.w[4*l]; r.w[4*l+2] = x.w[4*l+1]; r.w[4*l+3] = y.w[4*l+1]; }
    return emu_o(r);
}
static inline __m512i _mm512_unpackhi_epi32(__m512i a, __m512i b)
{
    emu_v x = emu_i(a), y = emu_i(b), r;
    for (int l = 0; l < 4; l++) { r.w[4*l] = x.w[4*l+2]; r.w[4*l+1] = y.w[4*l+2]; r.w[4*l+2] = x.w[4*l+3]; r.w[4*l+3] = y.w[4*l+3]; }
    return emu_o(r);
}
static inline __m512i _mm512_unpacklo_epi64(__m512i a, __m512i b)
{
    emu_v x = emu_i(a), y = emu_i(b), r;
    for (int l = 0; l < 4; l++) { r.q[2*l] = x.q[2*l]; r.q[2*l+1] = y.q[2*l]; }
    return emu_o(r);
}
static inline __m512i _mm512_unpackhi_epi64(__m512i a, __m512i b)
{
    emu_v x = emu_i(a), y = emu_i(b), r;
    for (int l = 0; l < 4; l++) { r.q[2*l] = x.q[2*l+1]; r.q[2*l+1] = y.q[2*l+1]; }
    return emu_o(r);
}
static inline __m512i _mm512_shuffle_i32x4(__m512i a, __m512i b, int imm)
{
    emu_v x = emu_i(a), y = emu_i(b), r;
    for (int l = 0; l < 4; l++) {
        const int s = imm >> (2 * l) & 3;
        memcpy(&r.w[4 * l], l < 2 ? &x.w[4 * s] : &y.w[4 * s], 16);
    }
    return emu_o(r);
}
/* kernels/avx512bf16.c split: bit casts, 32-bit integer lanes, compares into masks */
#define _CMP_EQ_OQ 0x00
#define _CMP_UNORD_Q 0x03
static inline __m512i _mm512_castps_si512(__m512 a) { return emu_o(emu_f(a)); }
static inline __m512 _mm512_castsi512_ps(__m512i a) { return emu_of(emu_i(a)); }
static inline __m512i _mm512_and_si512(__m512i a, __m512i b)
{ emu_v x = emu_i(a), y = emu_i(b); for (int i = 0; i < 16; i++) x.w[i] &= y.w[i]; return emu_o(x); }
static inline __m512i _mm512_or_si512(__m512i a, __m512i b)
{ emu_v x = emu_i(a), y = emu_i(b); for (int i = 0; i < 16; i++) x.w[i] |= y.w[i]; return emu_o(x); }
static inline __m512i _mm512_add_epi32(__m512i a, __m512i b)
{ emu_v x = emu_i(a), y = emu_i(b); for (int i = 0; i < 16; i++) x.w[i] += y.w[i]; return emu_o(x); }
static inline __m512i _mm512_srli_epi32(__m512i a, unsigned int n)
{ emu_v x = emu_i(a); for (int i = 0; i < 16; i++) x.w[i] = n > 31 ? 0 : x.w[i] >> n; return emu_o(x); }
static inline __m512i _mm512_mask_mov_epi32(__m512i src, __mmask16 k, __m512i a)
{ emu_v x = emu_i(src), y = emu_i(a); for (int i = 0; i < 16; i++) if (k >> i & 1) x.w[i] = y.w[i]; return emu_o(x); }
static inline __m512 _mm512_sub_ps(__m512 a, __m512 b)
{ emu_v x = emu_f(a), y = emu_f(b); for (int i = 0; i < 16; i++) x.f[i] -= y.f[i]; return emu_of(x); }
static inline __m512 _mm512_maskz_mov_ps(__mmask16 k, __m512 a)
{ emu_v x = emu_f(a); for (int i = 0; i < 16; i++) if (!(k >> i & 1)) x.f[i] = 0.0f; return emu_of(x); }
/* only the two predicates the kernels use: equal (ordered, quiet) and unordered */
static inline __mmask16 _mm512_cmp_ps_mask(__m512 a, __m512 b, const int pred)
{
    emu_v x = emu_f(a), y = emu_f(b);
    __mmask16 k = 0;
    for (int i = 0; i < 16; i++) {
        const int un = x.f[i] != x.f[i] || y.f[i] != y.f[i];
        const int t = pred == _CMP_UNORD_Q ? un : pred == _CMP_EQ_OQ ? !un && x.f[i] == y.f[i] : (abort(), 0);
        k |= (__mmask16)(t << i);
    }
    return k;
}
/* kernels/avx512bf16.c split_cvt: vcvtne2ps2bf16 (round to nearest even; a denormal input
 * reads as a signed zero; NaN truncated and quieted: SDM convert_fp32_to_bfloat16), the
 * 256-bit halves, zero extension of words, vfpclassps */
typedef long long __m256i __attribute__((vector_size(32), may_alias));
static inline uint16_t emu_cvt_bf16(float f)
{
    uint32_t u; memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) == 0) return (uint16_t)(u >> 16 & 0x8000u);        /* zero, denormal */
    if ((u & 0x7f800000u) == 0x7f800000u)                                      /* inf, NaN */
        return (uint16_t)(u >> 16 | ((u & 0x7fffffu) ? 0x40u : 0u));
    return (uint16_t)((u + 0x7fffu + (u >> 16 & 1u)) >> 16);
}
static inline __m512bh _mm512_cvtne2ps_pbh(__m512 a, __m512 b)
{
    emu_v x = emu_f(a), y = emu_f(b), r; __m512bh o;
    for (int i = 0; i < 16; i++) r.h[i] = emu_cvt_bf16(y.f[i]), r.h[16 + i] = emu_cvt_bf16(x.f[i]);
    memcpy(&o, &r, 64); return o;
}
static inline __m512i _mm512_maskz_permutexvar_epi16(__mmask32 k, __m512i idx, __m512i a)
{
    emu_v x = emu_i(a), ix = emu_i(idx), r;
    for (int i = 0; i < 32; i++) r.h[i] = k >> i & 1 ? x.h[ix.h[i] & 31] : 0;
    return emu_o(r);
}
static inline __m256i _mm512_castsi512_si256(__m512i a) { __m256i r; memcpy(&r, &a, 32); return r; }
static inline __m256i _mm512_extracti64x4_epi64(__m512i a, const int imm)
{ __m256i r; memcpy(&r, (const char *)&a + 32 * (imm & 1), 32); return r; }
static inline __m512i _mm512_cvtepu16_epi32(__m256i a)
{ uint16_t h[16]; memcpy(h, &a, 32); emu_v r; for (int i = 0; i < 16; i++) r.w[i] = h[i]; return emu_o(r); }
static inline __m512i _mm512_slli_epi32(__m512i a, unsigned int n)
{ emu_v x = emu_i(a); for (int i = 0; i < 16; i++) x.w[i] = n > 31 ? 0 : x.w[i] << n; return emu_o(x); }
/* imm bits: 0x01 QNaN, 0x02 +0, 0x04 -0, 0x08 +inf, 0x10 -inf, 0x20 denormal, 0x40 finite
 * negative, 0x80 SNaN */
static inline __mmask16 _mm512_fpclass_ps_mask(__m512 a, const int imm)
{
    emu_v x = emu_f(a);
    __mmask16 k = 0;
    for (int i = 0; i < 16; i++) {
        const uint32_t u = x.w[i], e = u & 0x7f800000u, m = u & 0x7fffffu, neg = u >> 31;
        int c = 0;
        if (e == 0x7f800000u && m) c = m & 0x400000u ? 0x01 : 0x80;
        else if (e == 0x7f800000u) c = neg ? 0x10 : 0x08;
        else if (e == 0 && !m) c = neg ? 0x04 : 0x02;
        else c = (e == 0 ? 0x20 : 0) | (neg ? 0x40 : 0);
        k |= (__mmask16)((c & imm ? 1 : 0) << i);
    }
    return k;
}
static inline __m512 _mm512_setzero_ps(void) { emu_v u; memset(&u, 0, 64); return emu_of(u); }
static inline __m512 _mm512_set1_ps(float f) { emu_v u; for (int i = 0; i < 16; i++) u.f[i] = f; return emu_of(u); }
static inline __m512 _mm512_loadu_ps(const void *p) { emu_v u; memcpy(&u, p, 64); return emu_of(u); }
static inline void _mm512_storeu_ps(void *p, __m512 x) { emu_v u = emu_f(x); memcpy(p, &u, 64); }
/* the float forms: the 32-bit word forms' models, reinterpreted */
static inline __m512 _mm512_maskz_loadu_ps(__mmask16 k, const void *p)
{
    return _mm512_castsi512_ps(_mm512_maskz_loadu_epi32(k, p));
}
static inline void _mm512_mask_storeu_ps(void *p, __mmask16 k, __m512 x)
{
    _mm512_mask_storeu_epi32(p, k, _mm512_castps_si512(x));
}
static inline __m512 _mm512_mul_ps(__m512 a, __m512 b)
{ emu_v x = emu_f(a), y = emu_f(b); for (int i = 0; i < 16; i++) x.f[i] *= y.f[i]; return emu_of(x); }
static inline __m512 _mm512_fmadd_ps(__m512 a, __m512 b, __m512 c)
{ emu_v x = emu_f(a), y = emu_f(b), z = emu_f(c); for (int i = 0; i < 16; i++) x.f[i] = __builtin_fmaf(x.f[i], y.f[i], z.f[i]); return emu_of(x); }
/* kernels/exp2p_avx512.h: vreduceps with imm 0x09 only (M = 0 fraction bits kept, rounding
 * down, exceptions suppressed: x - floor(x); inf -> +0, NaN -> quiet NaN), vscalefps (a 2^floor(b),
 * rounded once; the SDM's special cases: NaN operands, b = +-inf) and its zero-masking form,
 * zero-masked multiplication */
#define _MM_FROUND_TO_NEG_INF 0x01
#define _MM_FROUND_NO_EXC 0x08
static inline float emu_qnan(float x) { uint32_t u; memcpy(&u, &x, 4); u |= 0x400000u; memcpy(&x, &u, 4); return x; }
static inline __m512 _mm512_reduce_ps(__m512 a, const int imm)
{
    if (imm != (_MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)) abort();
    emu_v x = emu_f(a);
    for (int i = 0; i < 16; i++) {
        const float v = x.f[i];
        x.f[i] = v != v ? emu_qnan(v) : __builtin_isinf(v) ? 0.0f : v - __builtin_floorf(v);
    }
    return emu_of(x);
}
static inline float emu_scalef(float a, float b)
{
    if (a != a) return emu_qnan(a);
    if (b != b) return emu_qnan(b);
    if (__builtin_isinf(b)) {
        if (b > 0) return a == 0.0f ? __builtin_nanf("") : a < 0 ? -__builtin_inff() : __builtin_inff();
        return __builtin_isinf(a) ? __builtin_nanf("") : a < 0 || (a == 0.0f && __builtin_signbit(a)) ? -0.0f : 0.0f;
    }
    float e = __builtin_floorf(b);
    e = e > 400.0f ? 400.0f : e < -400.0f ? -400.0f : e;
    return __builtin_ldexpf(a, (int)e);
}
static inline __m512 _mm512_scalef_ps(__m512 a, __m512 b)
{ emu_v x = emu_f(a), y = emu_f(b); for (int i = 0; i < 16; i++) x.f[i] = emu_scalef(x.f[i], y.f[i]); return emu_of(x); }
static inline __m512 _mm512_maskz_scalef_ps(__mmask16 k, __m512 a, __m512 b)
{ emu_v x = emu_f(a), y = emu_f(b); for (int i = 0; i < 16; i++) x.f[i] = k >> i & 1 ? emu_scalef(x.f[i], y.f[i]) : 0.0f; return emu_of(x); }
static inline __m512 _mm512_maskz_mul_ps(__mmask16 k, __m512 a, __m512 b)
{ emu_v x = emu_f(a), y = emu_f(b); for (int i = 0; i < 16; i++) x.f[i] = k >> i & 1 ? x.f[i] * y.f[i] : 0.0f; return emu_of(x); }
static inline float emu_bf(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }
static inline __m512 _mm512_dpbf16_ps(__m512 src, __m512bh a, __m512bh b)
{
    emu_v s = emu_f(src), x, y;
    memcpy(&x, &a, 64), memcpy(&y, &b, 64);
    for (int i = 0; i < 16; i++)
        s.f[i] += emu_bf(x.h[2*i]) * emu_bf(y.h[2*i]) + emu_bf(x.h[2*i+1]) * emu_bf(y.h[2*i+1]);
    return emu_of(s);
}

/* ---- AMX: 8 tiles of 16 rows x 64 bytes, palette 1 only ------------------------------------ */
static _Thread_local unsigned char emu_tmm[8][16][64];
static _Thread_local int emu_tile_cfg; /* 1 after ldtilecfg, 0 after tilerelease */
static inline void emu_tile_check(void)
{
    if (!emu_tile_cfg) { fprintf(stderr, "emu: tile instruction without a tile configuration\n"); abort(); }
}
static inline void _tile_loadconfig(const void *cfg)
{
    const unsigned char *c = cfg;
    if (c[0] != 1) { fprintf(stderr, "emu: palette %d\n", c[0]); abort(); }
    for (int t = 0; t < 8; t++) {
        uint16_t colsb; memcpy(&colsb, c + 16 + 2 * t, 2);
        if (colsb != 64 || c[48 + t] != 16) { fprintf(stderr, "emu: tile %d not 16 x 64\n", t); abort(); }
    }
    emu_tile_cfg = 1;
}
static inline void _tile_release(void) { emu_tile_cfg = 0; }
static inline void emu_tile_loadd(int t, const void *base, long stride)
{
    emu_tile_check();
    for (int r = 0; r < 16; r++) memcpy(emu_tmm[t][r], (const char *)base + r * stride, 64);
}
static inline void emu_tile_stored(int t, void *base, long stride)
{
    emu_tile_check();
    for (int r = 0; r < 16; r++) memcpy((char *)base + r * stride, emu_tmm[t][r], 64);
}
static inline void emu_tile_zero(int t) { emu_tile_check(); memset(emu_tmm[t], 0, sizeof emu_tmm[t]); }
static inline void emu_tile_dpbf16ps(int d, int a, int b)
{
    emu_tile_check();
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 16; n++) {
            float c; memcpy(&c, &emu_tmm[d][m][4 * n], 4);
            for (int k = 0; k < 16; k++) {
                uint16_t a0, a1, b0, b1;
                memcpy(&a0, &emu_tmm[a][m][4 * k], 2), memcpy(&a1, &emu_tmm[a][m][4 * k + 2], 2);
                memcpy(&b0, &emu_tmm[b][k][4 * n], 2), memcpy(&b1, &emu_tmm[b][k][4 * n + 2], 2);
                c += emu_bf(a0) * emu_bf(b0) + emu_bf(a1) * emu_bf(b1);
            }
            memcpy(&emu_tmm[d][m][4 * n], &c, 4);
        }
}
#define _tile_loadd(t, base, stride) emu_tile_loadd(t, base, stride)
#define _tile_stored(t, base, stride) emu_tile_stored(t, base, stride)
#define _tile_zero(t) emu_tile_zero(t)
#define _tile_dpbf16ps(d, a, b) emu_tile_dpbf16ps(d, a, b)
#endif
