/*
 * kernels_simd.h — the SIMD micro-kernels of kernels.h, written once against simd.h.
 *
 * Included by exactly one file per instruction set (kernels_avx2.c, kernels_avx512.c,
 * kernels_neon.c), each compiled with that ISA's flags and defining
 *   SIMD_TABLE  the name of the cpu_kernels table to define (cpu_kernels_avx2, ...)
 *   SIMD_NAME   its name string ("avx2", ...)
 * before including this file. Nothing here is ISA-specific: widths come from SIMD_VL.
 */
#if !defined(SIMD_TABLE) || !defined(SIMD_NAME)
#error "define SIMD_TABLE and SIMD_NAME before including kernels_simd.h"
#endif

#include "internal.h"
#include "kernels.h"
#include "simd.h"

#include <math.h>

/* Register block of the gemm: SIMD_MR rows x 2 vectors. AVX2 (16 registers): 6 x 16 = 12
 * accumulators + 2 B vectors + 1 broadcast. AVX-512 and NEON (32 registers): 12 x 2 vectors
 * = 24 accumulators. A's element is broadcast from memory (a load-port operation, no shuffle),
 * so each k step is 2 vector loads + MR broadcasts for 2 MR FMAs: FMA-bound. */
#if SIMD_VL == 8
#define SIMD_MR 6
#else
#define SIMD_MR 12
#endif
#define SIMD_NR (2 * SIMD_VL)

/* ---- gemm ------------------------------------------------------------------------------ */

/* C[0..mr)[0..nv) = (rowscale ? diag(rowscale) C : 0) + A[0..mr)[0..K) B[0..K)[0..nv).
 * mr <= SIMD_MR, nv <= SIMD_NR. Called with constants (mr = SIMD_MR, nv = SIMD_NR) for the
 * full blocks, so the row tests fold away and the accumulators live in registers. */
SIMD_INLINE void gemm_block(const int mr, const int nv, int64_t K, const float *A, int64_t as_m,
                            int64_t as_k, const float *B, int64_t ldb, const float *rowscale,
                            float *C, int64_t ldc)
{
    vf c0[SIMD_MR], c1[SIMD_MR];
    const int n0 = nv < SIMD_VL ? nv : SIMD_VL, n1 = nv - n0;
#pragma GCC unroll 16
    for (int r = 0; r < SIMD_MR; r++)
        c0[r] = c1[r] = v_zero();
    for (int64_t k = 0; k < K; k++) {
        const float *b = B + k * ldb, *a = A + k * as_k;
        vf b0, b1;
        if (nv == SIMD_NR) {
            b0 = v_load(b);
            b1 = v_load(b + SIMD_VL);
        } else {
            b0 = v_load_part(b, n0);
            b1 = v_load_part(b + SIMD_VL, n1);
        }
#pragma GCC unroll 16
        for (int r = 0; r < SIMD_MR; r++)
            if (r < mr) {
                const vf ar = v_set1(a[r * as_m]);
                c0[r] = v_fma(ar, b0, c0[r]);
                c1[r] = v_fma(ar, b1, c1[r]);
            }
    }
#pragma GCC unroll 16
    for (int r = 0; r < SIMD_MR; r++)
        if (r < mr) {
            float *c = C + r * ldc;
            if (nv == SIMD_NR) {
                if (rowscale) {
                    const vf s = v_set1(rowscale[r]);
                    c0[r] = v_fma(s, v_load(c), c0[r]);
                    c1[r] = v_fma(s, v_load(c + SIMD_VL), c1[r]);
                }
                v_store(c, c0[r]);
                v_store(c + SIMD_VL, c1[r]);
            } else {
                if (rowscale) {
                    const vf s = v_set1(rowscale[r]);
                    c0[r] = v_fma(s, v_load_part(c, n0), c0[r]);
                    c1[r] = v_fma(s, v_load_part(c + SIMD_VL, n1), c1[r]);
                }
                v_store_part(c, c0[r], n0);
                v_store_part(c + SIMD_VL, c1[r], n1);
            }
        }
}

/* Column panels outside, row blocks inside: the K x NR panel of B stays in L1 while A streams. */
static void gemm_simd(int64_t M, int64_t N, int64_t K, const float *A, int64_t as_m, int64_t as_k,
                      const float *B, int64_t ldb, const float *rowscale, float *C, int64_t ldc)
{
    for (int64_t n0 = 0; n0 < N; n0 += SIMD_NR) {
        const int nv = N - n0 < SIMD_NR ? (int)(N - n0) : SIMD_NR;
        const float *Bp = B + n0;
        int64_t m0 = 0;
        for (; m0 + SIMD_MR <= M; m0 += SIMD_MR) {
            const float *Ap = A + m0 * as_m;
            const float *rs = rowscale ? rowscale + m0 : NULL;
            float *Cp = C + m0 * ldc + n0;
            if (nv == SIMD_NR)
                gemm_block(SIMD_MR, SIMD_NR, K, Ap, as_m, as_k, Bp, ldb, rs, Cp, ldc);
            else
                gemm_block(SIMD_MR, nv, K, Ap, as_m, as_k, Bp, ldb, rs, Cp, ldc);
        }
        if (m0 < M) {
            const int mr = (int)(M - m0);
            const float *Ap = A + m0 * as_m;
            const float *rs = rowscale ? rowscale + m0 : NULL;
            float *Cp = C + m0 * ldc + n0;
            if (mr == 1 && nv == SIMD_NR) /* one row (decode's P V): no row tests */
                gemm_block(1, SIMD_NR, K, Ap, as_m, as_k, Bp, ldb, rs, Cp, ldc);
            else if (nv == SIMD_NR)
                gemm_block(mr, SIMD_NR, K, Ap, as_m, as_k, Bp, ldb, rs, Cp, ldc);
            else
                gemm_block(mr, nv, K, Ap, as_m, as_k, Bp, ldb, rs, Cp, ldc);
        }
    }
}

static void pv_simd(const float *P, int64_t ldp, const float *V, int64_t ldv, int64_t br,
                    int64_t bc, int64_t D, const float *alpha, float *O, int64_t ldo)
{
    gemm_simd(br, D, bc, P, ldp, 1, V, ldv, alpha, O, ldo);
}

/* ---- qk (row-major S, for the backward) ------------------------------------------------ */

SIMD_INLINE vf load_upto(const float *p, int64_t left)
{
    return left >= SIMD_VL ? v_load(p) : v_load_part(p, (int)left);
}

/* Dot products along D, 1 x 4 blocks, one horizontal sum per score: for head dims too large for
 * qk_simd's packed chunks and for a few rows (decode), where packing K^T would cost as much as
 * the products. */
static void qk_dot(const float *Q, int64_t ldq, const float *K, int64_t ldk, int64_t br,
                   int64_t bc, int64_t D, float scale, float *S, int64_t lds)
{
    for (int64_t i = 0; i < br; i++) {
        const float *q = Q + i * ldq;
        int64_t j = 0;
        for (; j + 4 <= bc; j += 4) {
            const float *k0 = K + j * ldk, *k1 = k0 + ldk, *k2 = k1 + ldk, *k3 = k2 + ldk;
            vf a0 = v_zero(), a1 = v_zero(), a2 = v_zero(), a3 = v_zero();
            for (int64_t d = 0; d < D; d += SIMD_VL) {
                const vf qv = load_upto(q + d, D - d);
                a0 = v_fma(qv, load_upto(k0 + d, D - d), a0);
                a1 = v_fma(qv, load_upto(k1 + d, D - d), a1);
                a2 = v_fma(qv, load_upto(k2 + d, D - d), a2);
                a3 = v_fma(qv, load_upto(k3 + d, D - d), a3);
            }
            S[i * lds + j] = v_hsum(a0) * scale;
            S[i * lds + j + 1] = v_hsum(a1) * scale;
            S[i * lds + j + 2] = v_hsum(a2) * scale;
            S[i * lds + j + 3] = v_hsum(a3) * scale;
        }
        for (; j < bc; j++) {
            const float *k0 = K + j * ldk;
            vf a0 = v_zero();
            for (int64_t d = 0; d < D; d += SIMD_VL)
                a0 = v_fma(load_upto(q + d, D - d), load_upto(k0 + d, D - d), a0);
            S[i * lds + j] = v_hsum(a0) * scale;
        }
    }
}

/* S = scale Q K^T as the gemm's broadcast form: chunks of kc keys are packed transposed and
 * pre-scaled on the stack (kc x D <= 32 KiB), then S[:, chunk] = Q (scale K_chunk)^T. The dot
 * product form spends a horizontal sum per score and ran at 50 GFLOP/s against the gemm's
 * 88 (AVX2, Zen 3, 64 x 64 x 128 tiles, 1 thread). */
enum { QK_PACK_FLOATS = 8192, QK_PACK_MIN_ROWS = 8 };

static void qk_simd(const float *Q, int64_t ldq, const float *K, int64_t ldk, int64_t br,
                    int64_t bc, int64_t D, float scale, float *S, int64_t lds)
{
    const int64_t kc = QK_PACK_FLOATS / D / SIMD_NR * SIMD_NR;
    if (kc == 0 || br < QK_PACK_MIN_ROWS) { /* too wide to pack, or too few rows to repay it */
        qk_dot(Q, ldq, K, ldk, br, bc, D, scale, S, lds);
        return;
    }
    float kt[QK_PACK_FLOATS] __attribute__((aligned(64)));
    for (int64_t j0 = 0; j0 < bc; j0 += kc) {
        const int64_t nc = bc - j0 < kc ? bc - j0 : kc;
        for (int64_t c = 0; c < nc; c++) {
            const float *k = K + (j0 + c) * ldk;
            for (int64_t d = 0; d < D; d++)
                kt[d * nc + c] = k[d] * scale;
        }
        gemm_simd(br, nc, D, Q, ldq, 1, kt, nc, NULL, S + j0, lds);
    }
}

/* ---- online softmax ------------------------------------------------------------------- */

/* Row-wise, natural exp (for the backward's contract): max and sum horizontal per row. */
static void softmax_simd(float *S, int64_t lds, int64_t br, int64_t bc, float *m, float *l,
                         float *alpha)
{
    const vf log2e = v_set1(1.44269504088896341f);
    for (int64_t i = 0; i < br; i++) {
        float *s = S + i * lds;
        int64_t j = 0;
        vf vmx = v_set1(m[i]);
        for (; j + SIMD_VL <= bc; j += SIMD_VL)
            vmx = v_max(vmx, v_load(s + j));
        /* a NaN score sticks (v_hmax's order may drop it; the contract's NaN rule) */
        float mx = v_hmax(v_select(v_isnan(vmx), v_set1(__builtin_inff()), v_zero())) > 0.0f
                       ? __builtin_nanf("")
                       : v_hmax(vmx);
        for (; j < bc; j++)
            mx = s[j] > mx || s[j] != s[j] ? s[j] : mx;
        if (mx == -INFINITY) {
            for (j = 0; j < bc; j++)
                s[j] = 0.0f;
            alpha[i] = 1.0f;
            continue;
        }
        const float a = mx > m[i] ? expf(m[i] - mx) : 1.0f;
        const vf vm2 = v_set1(mx);
        vf vsum = v_zero();
        for (j = 0; j + SIMD_VL <= bc; j += SIMD_VL) {
            const vf e = v_exp2_ftz(v_mul(v_sub(v_load(s + j), vm2), log2e));
            v_store(s + j, e);
            vsum = v_add(vsum, e);
        }
        float sum = 0.0f;
        if (j < bc) { /* tail: only the first k lanes are scores */
            const int k = (int)(bc - j);
            float t[SIMD_VL];
            v_store(t, v_exp2_ftz(v_mul(v_sub(v_load_part(s + j, k), vm2), log2e)));
            for (int q = 0; q < k; q++)
                sum += t[q];
            v_store_part(s + j, v_load(t), k);
        }
        l[i] = l[i] * a + v_hsum(vsum) + sum;
        m[i] = mx;
        alpha[i] = a;
    }
}

/* Full or partial vector access: k == SIMD_VL is a constant in the main loops, so they use
 * plain loads and stores (AVX2 masked stores are slow on AMD: never in a hot loop). */
SIMD_INLINE vf ld_k(const float *p, int k) { return k == SIMD_VL ? v_load(p) : v_load_part(p, k); }
SIMD_INLINE void st_k(float *p, vf x, int k)
{
    if (k == SIMD_VL)
        v_store(p, x);
    else
        v_store_part(p, x, k);
}

/* One strip of k <= SIMD_VL query columns of softmax_t. */
SIMD_INLINE void softmax_t_strip(float *St, int64_t ldst, int64_t bc, float scale, float *m,
                                 float *l, float *alpha, int k)
{
    const vf m_old = ld_k(m, k), c = v_set1(scale);
    vf mx = v_set1(-INFINITY);
    for (int64_t j = 0; j < bc; j++)
        mx = v_max(mx, ld_k(St + j * ldst, k)); /* the score second: NaN propagates */
    mx = v_max(m_old, v_mul(mx, c));            /* scale > 0 commutes with the max */
    /* A column that has seen only -inf: subtract 0 instead, so P = 2^-inf = 0, not NaN. */
    const vm empty = v_lt(mx, v_set1(-3.0e38f));
    const vf neg_ms = v_sub(v_zero(), v_select(empty, v_zero(), mx));
    vf sum = v_zero();
    /* The FMA gives the exact c s - m rounded once, so the max score's exponent is the
     * rounding error of m = c s_max: up to half an ulp of m, which past |m| ~ 2^28 leaves
     * 2^-16 .. 2^16 and at |m| ~ 1e10 under- or overflows (the row came out 0, issue 10 F5).
     * Such lanes take c s rounded first, so that their max's exponent is exactly 0. */
    const vf am = v_max(neg_ms, v_sub(v_zero(), neg_ms));
    const vm big = v_gt(am, v_set1(0x1p28f));
    if (v_hmax(v_select(big, v_set1(1.0f), v_zero())) > 0.0f) {
        for (int64_t j = 0; j < bc; j++) {
            float *s = St + j * ldst;
            const vf x = ld_k(s, k);
            const vf e = v_exp2_ftz(v_select(big, v_add(v_mul(x, c), neg_ms), v_fma(x, c, neg_ms)));
            st_k(s, e, k);
            sum = v_add(sum, e);
        }
    } else {
        for (int64_t j = 0; j < bc; j++) {
            float *s = St + j * ldst;
            const vf e = v_exp2_ftz(v_fma(ld_k(s, k), c, neg_ms));
            st_k(s, e, k);
            sum = v_add(sum, e);
        }
    }
    const vf a = v_select(empty, v_set1(1.0f), v_exp2_ftz(v_add(m_old, neg_ms)));
    st_k(l, v_fma(ld_k(l, k), a, sum), k);
    st_k(m, mx, k);
    st_k(alpha, a, k);
}

/* Column-wise (the forward's transposed tile), base 2: every step is vertical. */
static void softmax_t_simd(float *St, int64_t ldst, int64_t bc, int64_t n, float scale, float *m,
                           float *l, float *alpha)
{
    int64_t i0 = 0;
    for (; i0 + SIMD_VL <= n; i0 += SIMD_VL)
        softmax_t_strip(St + i0, ldst, bc, scale, m + i0, l + i0, alpha + i0, SIMD_VL);
    if (i0 < n)
        softmax_t_strip(St + i0, ldst, bc, scale, m + i0, l + i0, alpha + i0, (int)(n - i0));
}

/* kernels.h cpu_mm_bf16.softmax in the vocabulary: the forward's row update between two bf16
 * products (the bf16 sub-tables of avx512.c use the AVX-512 instance; the others are compiled
 * too, so the same source is tested on every SIMD CPU against the scalar model). Rows, base 2:
 * the max is horizontal once per row, then one FMA + exp2 + bf16 store per score. */
#define SIMD_MM_CAT2(a, b) a##b
#define SIMD_MM_CAT(a, b) SIMD_MM_CAT2(a, b)
void SIMD_MM_CAT(SIMD_TABLE, _mm_softmax)(const float *S, int64_t lds, int64_t br, int64_t bc,
                                          float scale, float *m, float *l, float *alpha,
                                          uint16_t *P, int64_t ldp)
{
    const vf c = v_set1(scale);
    const int64_t bcp = (bc + CPU_MM_KP - 1) / CPU_MM_KP * CPU_MM_KP;
    /* The maxima of a group of rows first, then each row's exponentials: a row's exp pass
     * waits for its max (a chain of vector maxima and a horizontal one), so computing the
     * maxima of the next rows meanwhile would need a look-ahead the core does not have; this
     * way the rows' passes are independent. Two accumulators halve the max chain (the max of
     * finite values is exact in any order; NaN: see below). Per row the same arithmetic. */
    enum { GROUP = 16 };
    float gmx[GROUP];
    for (int64_t i = 0; i < br; i++) {
        const float *s = S + i * lds;
        uint16_t *p = P + i * ldp;
        int64_t j = 0;
        if (i % GROUP == 0)
            for (int64_t g = 0; g < GROUP && i + g < br; g++) {
                const float *sg = S + (i + g) * lds;
                vf vmx0 = v_set1(-INFINITY), vmx1 = vmx0;
                for (j = 0; j + 2 * SIMD_VL <= bc; j += 2 * SIMD_VL) {
                    vmx0 = v_max(vmx0, v_load(sg + j)); /* the score second: NaN propagates */
                    vmx1 = v_max(vmx1, v_load(sg + j + SIMD_VL));
                }
                if (j + SIMD_VL <= bc)
                    vmx0 = v_max(vmx0, v_load(sg + j)), j += SIMD_VL;
                float rm = j > 0 ? v_hmax(v_max(vmx0, vmx1)) : -INFINITY;
                for (; j < bc; j++)
                    rm = sg[j] > rm || isnan(sg[j]) ? sg[j] : rm;
                gmx[g] = rm;
            }
        const float rmx = gmx[i % GROUP];
        /* A NaN that the horizontal max lost still reaches P through its own exp2 below. */
        const float mx = rmx * scale > m[i] || isnan(rmx) ? rmx * scale : m[i];
        for (j = bc; j < bcp; j++)
            p[j] = 0;
        float mxx = mx;
        if (mx == -INFINITY) { /* nothing visible yet: keep the empty state, P = 0 ... */
            int nan = 0;
            for (j = 0; j < bc; j++)
                nan |= isnan(s[j]);
            if (!nan) {
                for (j = 0; j < bc; j++)
                    p[j] = 0;
                alpha[i] = 1.0f;
                continue;
            }
            /* ... unless the horizontal max lost a NaN among -inf: the row becomes NaN (the
             * model's max keeps it), as O and LSE must */
            mxx = NAN;
        }
        /* exactly 1 when the max did not grow; no libm call then (most rows of most tiles) */
        const float a = m[i] == mxx ? 1.0f : exp2f(m[i] - mxx);
        const vf nm = v_set1(-mxx);
        vf vsum = v_zero();
        /* two vectors a step for v_store_bf16x2_p; the sum in column order as one at a time */
        for (j = 0; j + 2 * SIMD_VL <= bc; j += 2 * SIMD_VL) {
            const vf e0 = v_exp2_p(v_fma(v_load(s + j), c, nm));
            const vf e1 = v_exp2_p(v_fma(v_load(s + j + SIMD_VL), c, nm));
            v_store_bf16x2_p(p + j, e0, e1);
            vsum = v_add(vsum, e0);
            vsum = v_add(vsum, e1);
        }
        if (j + SIMD_VL <= bc) {
            const vf e = v_exp2_p(v_fma(v_load(s + j), c, nm));
            v_store_bf16_p(p + j, e);
            vsum = v_add(vsum, e);
            j += SIMD_VL;
        }
        float sum = 0.0f;
        if (j < bc) { /* tail: only the first k lanes are scores */
            const int k = (int)(bc - j);
            float t[SIMD_VL];
            const vf e = v_exp2_p(v_fma(v_load_part(s + j, k), c, nm));
            uint16_t h[SIMD_VL];
            v_store(t, e);
            for (int q = 0; q < k; q++)
                sum += t[q];
            v_store_bf16_p(h, e);
            memcpy(p + j, h, (size_t)k * sizeof(uint16_t));
        }
        l[i] = l[i] * a + v_hsum(vsum) + sum;
        m[i] = mxx;
        alpha[i] = a;
    }
}

/* kernels.h cpu_mm_bf16.p_ds in the vocabulary (the avx512 instance serves the bf16 sub-tables;
 * every instance is tested against the scalar model): per row one pass over the visible columns,
 * x = scale S - L by one FMA, P = 2^(x log2 e) by v_exp2_p, dS = P (dP - Di) [G]; zeros outside. */
void SIMD_MM_CAT(SIMD_TABLE, _mm_p_ds)(CPU_MM_P_DS_ARGS)
{
    const vf c = v_set1(scale), log2e = v_set1(1.44269504088896341f);
    for (int64_t r = 0; r < rows; r++) {
        float *s = S + r * lds, *dp = dP + r * lds;
        const float *g = G ? G + r * lds : NULL;
        int64_t c0 = lo[r] - jlo, c1 = hi[r] - jlo;
        c0 = c0 < 0 ? 0 : c0 > n ? n : c0;
        c1 = c1 < c0 ? c0 : c1 > n ? n : c1;
        const vf nl = v_set1(-L[r]), di = v_set1(Di[r]);
        int64_t j = c0;
        for (; j + SIMD_VL <= c1; j += SIMD_VL) {
            const vf p = v_exp2_p(v_mul(v_fma(v_load(s + j), c, nl), log2e));
            vf ds = v_mul(p, v_sub(v_load(dp + j), di));
            if (g)
                ds = v_mul(ds, v_load(g + j));
            v_store(s + j, p);
            v_store(dp + j, ds);
        }
        if (j < c1) {
            const int k = (int)(c1 - j);
            const vf p = v_exp2_p(v_mul(v_fma(v_load_part(s + j, k), c, nl), log2e));
            vf ds = v_mul(p, v_sub(v_load_part(dp + j, k), di));
            if (g)
                ds = v_mul(ds, v_load_part(g + j, k));
            v_store_part(s + j, p, k);
            v_store_part(dp + j, ds, k);
        }
        memset(s, 0, (size_t)c0 * sizeof *s), memset(dp, 0, (size_t)c0 * sizeof *dp);
        memset(s + c1, 0, (size_t)(n - c1) * sizeof *s);
        memset(dp + c1, 0, (size_t)(n - c1) * sizeof *dp);
    }
}

/* ---- element-wise ---------------------------------------------------------------------- */

static void exp_simd(const float *x, float *y, int64_t n)
{
    int64_t i = 0;
    for (; i + SIMD_VL <= n; i += SIMD_VL)
        v_store(y + i, v_exp(v_load(x + i)));
    if (i < n)
        v_store_part(y + i, v_exp(v_load_part(x + i, (int)(n - i))), (int)(n - i));
}

static void exp2_simd(const float *x, float *y, int64_t n)
{
    int64_t i = 0;
    for (; i + SIMD_VL <= n; i += SIMD_VL)
        v_store(y + i, v_exp2_ftz(v_load(x + i)));
    if (i < n)
        v_store_part(y + i, v_exp2_ftz(v_load_part(x + i, (int)(n - i))), (int)(n - i));
}

/* Typed vector access: called with a constant dt inside the per-dtype instances below, so the
 * switch folds away. k < SIMD_VL selects the partial (tail) form. */
SIMD_INLINE vf ld_dt(flashc_dtype dt, const void *p, int64_t i, int k)
{
    switch (dt) {
    case FLASHC_BF16:
        return k == SIMD_VL ? v_load_bf16((const uint16_t *)p + i)
                            : v_load_bf16_part((const uint16_t *)p + i, k);
    case FLASHC_F16:
        return k == SIMD_VL ? v_load_f16((const uint16_t *)p + i)
                            : v_load_f16_part((const uint16_t *)p + i, k);
    default:
        return k == SIMD_VL ? v_load((const float *)p + i) : v_load_part((const float *)p + i, k);
    }
}

SIMD_INLINE void st_dt(flashc_dtype dt, void *p, int64_t i, vf x, int k)
{
    switch (dt) {
    case FLASHC_BF16:
        if (k == SIMD_VL)
            v_store_bf16((uint16_t *)p + i, x);
        else
            v_store_bf16_part((uint16_t *)p + i, x, k);
        break;
    case FLASHC_F16:
        if (k == SIMD_VL)
            v_store_f16((uint16_t *)p + i, x);
        else
            v_store_f16_part((uint16_t *)p + i, x, k);
        break;
    default:
        if (k == SIMD_VL)
            v_store((float *)p + i, x);
        else
            v_store_part((float *)p + i, x, k);
        break;
    }
}

SIMD_INLINE void load_row_dt(flashc_dtype dt, const void *src, int64_t n, float *dst)
{
    int64_t i = 0;
    for (; i + SIMD_VL <= n; i += SIMD_VL)
        v_store(dst + i, ld_dt(dt, src, i, SIMD_VL));
    if (i < n)
        v_store_part(dst + i, ld_dt(dt, src, i, (int)(n - i)), (int)(n - i));
}

static void load_row_simd(const void *src, flashc_dtype dt, int64_t n, float *dst)
{
    switch (dt) {
    case FLASHC_BF16: load_row_dt(FLASHC_BF16, src, n, dst); break;
    case FLASHC_F16: load_row_dt(FLASHC_F16, src, n, dst); break;
    default: load_row_dt(FLASHC_F32, src, n, dst); break;
    }
}

SIMD_INLINE void store_row_dt(flashc_dtype dt, const float *src, float scale, int64_t n,
                              void *dst)
{
    const vf s = v_set1(scale);
    int64_t i = 0;
    for (; i + SIMD_VL <= n; i += SIMD_VL)
        st_dt(dt, dst, i, v_mul(v_load(src + i), s), SIMD_VL);
    if (i < n) {
        const int k = (int)(n - i);
        st_dt(dt, dst, i, v_mul(v_load_part(src + i, k), s), k);
    }
}

static void store_row_simd(const float *src, float scale, int64_t n, void *dst, flashc_dtype dt)
{
    switch (dt) {
    case FLASHC_BF16: store_row_dt(FLASHC_BF16, src, scale, n, dst); break;
    case FLASHC_F16: store_row_dt(FLASHC_F16, src, scale, n, dst); break;
    default: store_row_dt(FLASHC_F32, src, scale, n, dst); break;
    }
}

/* Two vectors of 2 x SIMD_VL consecutive elements, for element-wise work: bf16 goes through
 * the pair forms of simd.h (cheaper conversions, in a private element order that the pair
 * store undoes), the other types through two plain accesses. */
SIMD_INLINE void ld2_dt(flashc_dtype dt, const void *p, int64_t i, vf *a, vf *b)
{
    if (dt == FLASHC_BF16) {
        v_load_bf16x2((const uint16_t *)p + i, a, b);
    } else {
        *a = ld_dt(dt, p, i, SIMD_VL);
        *b = ld_dt(dt, p, i + SIMD_VL, SIMD_VL);
    }
}

SIMD_INLINE void st2_dt(flashc_dtype dt, void *p, int64_t i, vf a, vf b)
{
    if (dt == FLASHC_BF16) {
        v_store_bf16x2((uint16_t *)p + i, a, b);
    } else {
        st_dt(dt, p, i, a, SIMD_VL);
        st_dt(dt, p, i + SIMD_VL, b, SIMD_VL);
    }
}

/* RMSNorm of one contiguous row: pass 1 (add the residual, store it, sum squares of the stored
 * value), pass 2 (scale) re-reads the row from L1/L2. Pairs of vectors in the main loops (two
 * partial sums hide the FMA latency), then single vectors, then one partial tail. */
SIMD_INLINE vf rms_pass1(flashc_dtype dt, const void *x, const void *r, void *xw, int64_t d,
                         int k, vf ss)
{
    vf v = ld_dt(dt, x, d, k);
    if (r) {
        st_dt(dt, xw, d, v_add(v, ld_dt(dt, r, d, k)), k);
        v = ld_dt(dt, xw, d, k);
    }
    return v_fma(v, v, ss);
}

SIMD_INLINE void rmsnorm_row_dt(flashc_dtype dt, const void *x, const void *r, void *xw,
                                const void *w, void *y, int64_t D, float eps)
{
    vf s0 = v_zero(), s1 = v_zero();
    int64_t d = 0;
    for (; d + 2 * SIMD_VL <= D; d += 2 * SIMD_VL) {
        vf a, b;
        ld2_dt(dt, x, d, &a, &b);
        if (r) {
            vf ra, rb;
            ld2_dt(dt, r, d, &ra, &rb);
            st2_dt(dt, xw, d, v_add(a, ra), v_add(b, rb));
            ld2_dt(dt, xw, d, &a, &b); /* square what was stored (rounded to dt) */
        }
        s0 = v_fma(a, a, s0);
        s1 = v_fma(b, b, s1);
    }
    for (; d + SIMD_VL <= D; d += SIMD_VL)
        s0 = rms_pass1(dt, x, r, xw, d, SIMD_VL, s0);
    if (d < D)
        s1 = rms_pass1(dt, x, r, xw, d, (int)(D - d), s1);
    const float sum = v_hsum(v_add(s0, s1));
    const void *xs = r ? xw : x;
    float div;
    const float r1 = cpu_rms_rstd_rescaled(xs, 1, D, eps, sum, dt, &div); /* plain unless x^2
                                                                            over/underflows */
    if (div != 1.0f) { /* rstd is no normal float (kernels.h): the rare divided form */
        for (d = 0; d < D; d++)
            flashc__store(y, dt, d, flashc__load(xs, dt, d) / div * r1 * flashc__load(w, dt, d));
        return;
    }
    const vf rstd = v_set1(r1);
    for (d = 0; d + 2 * SIMD_VL <= D; d += 2 * SIMD_VL) {
        vf a, b, wa, wb;
        ld2_dt(dt, xs, d, &a, &b);
        ld2_dt(dt, w, d, &wa, &wb);
        st2_dt(dt, y, d, v_mul(v_mul(a, rstd), wa), v_mul(v_mul(b, rstd), wb));
    }
    for (; d < D; d += SIMD_VL) {
        const int k = D - d < SIMD_VL ? (int)(D - d) : SIMD_VL;
        st_dt(dt, y, d, v_mul(v_mul(ld_dt(dt, xs, d, k), rstd), ld_dt(dt, w, d, k)), k);
    }
}

static void rmsnorm_row_simd(const void *x, int64_t sx, const void *r, int64_t sr, void *xw,
                             const void *w, int64_t sw, void *y, int64_t sy, int64_t D,
                             float eps, flashc_dtype dt)
{
    if (sx != 1 || (r && sr != 1) || sw != 1 || sy != 1) { /* strided rows: the reference */
        cpu_kernels_scalar.rmsnorm_row(x, sx, r, sr, xw, w, sw, y, sy, D, eps, dt);
        return;
    }
    switch (dt) {
    case FLASHC_BF16: rmsnorm_row_dt(FLASHC_BF16, x, r, xw, w, y, D, eps); break;
    case FLASHC_F16: rmsnorm_row_dt(FLASHC_F16, x, r, xw, w, y, D, eps); break;
    default: rmsnorm_row_dt(FLASHC_F32, x, r, xw, w, y, D, eps); break;
    }
}

/* silu for a result stored in dt: float32 keeps the full-accuracy v_silu; 16-bit results take
 * the shorter exp of v_silu_lp, whose error stays far below their rounding (simd.h). */
SIMD_INLINE vf silu_dt(flashc_dtype dt, vf g)
{
    return dt == FLASHC_BF16 ? v_silu_lp(g, 3) : dt == FLASHC_F16 ? v_silu_lp(g, 4) : v_silu(g);
}

SIMD_INLINE void swiglu_row_dt(flashc_dtype dt, const void *gu, void *y, int64_t I)
{
    int64_t i = 0;
    for (; i + 2 * SIMD_VL <= I; i += 2 * SIMD_VL) {
        vf ga, gb, ua, ub;
        ld2_dt(dt, gu, i, &ga, &gb);
        ld2_dt(dt, gu, I + i, &ua, &ub);
        st2_dt(dt, y, i, v_mul(silu_dt(dt, ga), ua), v_mul(silu_dt(dt, gb), ub));
    }
    for (; i < I; i += SIMD_VL) {
        const int k = I - i < SIMD_VL ? (int)(I - i) : SIMD_VL;
        st_dt(dt, y, i, v_mul(silu_dt(dt, ld_dt(dt, gu, i, k)), ld_dt(dt, gu, I + i, k)), k);
    }
}

static void swiglu_row_simd(const void *gu, int64_t sgu, void *y, int64_t sy, int64_t I,
                            flashc_dtype dt)
{
    if (sgu != 1 || sy != 1) {
        cpu_kernels_scalar.swiglu_row(gu, sgu, y, sy, I, dt);
        return;
    }
    switch (dt) {
    case FLASHC_BF16: swiglu_row_dt(FLASHC_BF16, gu, y, I); break;
    case FLASHC_F16: swiglu_row_dt(FLASHC_F16, gu, y, I); break;
    default: swiglu_row_dt(FLASHC_F32, gu, y, I); break;
    }
}

/* ---- attention v2 forward: score modifiers, masks ------------------------------------- */

/* tanh(x) as a rational function of x (odd degree 13 over even degree 6, Eigen's ptanh_float
 * coefficients), x clamped to +-7.905 where float tanh is +-1, and tanh(x) = x below 4e-4.
 * Max relative error 2.8e-7 (measured against tanh in double over [-12, 12]); NaN stays NaN
 * (the clamp takes x second), +-inf gives +-1. */
SIMD_INLINE vf v_tanh(vf x)
{
    const vf c = v_set1(7.90531110763549805f);
    const vf xc = v_min(c, v_max(v_sub(v_zero(), c), x));
    const vf x2 = v_mul(xc, xc);
    vf p = v_set1(-2.76076847742355e-16f);
    p = v_fma(p, x2, v_set1(2.00018790482477e-13f));
    p = v_fma(p, x2, v_set1(-8.60467152213735e-11f));
    p = v_fma(p, x2, v_set1(5.12229709037114e-08f));
    p = v_fma(p, x2, v_set1(1.48572235717979e-05f));
    p = v_fma(p, x2, v_set1(6.37261928875436e-04f));
    p = v_fma(p, x2, v_set1(4.89352455891786e-03f));
    p = v_mul(p, xc);
    vf q = v_set1(1.19825839466702e-06f);
    q = v_fma(q, x2, v_set1(1.18534705686654e-04f));
    q = v_fma(q, x2, v_set1(2.26843463243900e-03f));
    q = v_fma(q, x2, v_set1(4.89352518554385e-03f));
    const vf ax = v_max(x, v_sub(v_zero(), x));
    return v_select(v_lt(ax, v_set1(4.0e-4f)), x, v_div(p, q));
}

/* The modifier on one vector of scores; dist = the ALiBi distances of its lanes. */
SIMD_INLINE vf score_mod_v(vf s, const cpu_score_mod *m, vf dist)
{
    s = v_mul(s, v_set1(m->scale));
    if (m->softcap > 0.0f)
        s = v_mul(v_set1(m->softcap), v_tanh(v_mul(s, v_set1(1.0f / m->softcap))));
    if (m->slope != 0.0f)
        s = v_fma(v_set1(-m->slope), v_max(dist, v_sub(v_zero(), dist)), s);
    return v_mul(s, v_set1(m->out_scale));
}

SIMD_INLINE vf lane_iota(void)
{
    float t[SIMD_VL];
    for (int i = 0; i < SIMD_VL; i++)
        t[i] = (float)i;
    return v_load(t);
}

static void score_mod_t_simd(float *St, int64_t ldst, int64_t bc, int64_t n,
                             const cpu_score_mod *m, int64_t d0)
{
    const vf iota = lane_iota();
    for (int64_t c = 0; c < bc; c++) {
        float *s = St + c * ldst;
        int64_t r = 0;
        for (; r + SIMD_VL <= n; r += SIMD_VL) {
            const vf dist = v_add(v_set1((float)(d0 + r - c)), iota);
            v_store(s + r, score_mod_v(v_load(s + r), m, dist));
        }
        if (r < n) {
            const vf dist = v_add(v_set1((float)(d0 + r - c)), iota);
            v_store_part(s + r, score_mod_v(v_load_part(s + r, (int)(n - r)), m, dist),
                         (int)(n - r));
        }
    }
}

static void score_mod_row_simd(float *s, int64_t n, const cpu_score_mod *m, int64_t d0)
{
    const vf iota = lane_iota();
    int64_t c = 0;
    for (; c + SIMD_VL <= n; c += SIMD_VL) {
        const vf dist = v_sub(v_set1((float)(d0 - c)), iota);
        v_store(s + c, score_mod_v(v_load(s + c), m, dist));
    }
    if (c < n) {
        const vf dist = v_sub(v_set1((float)(d0 - c)), iota);
        v_store_part(s + c, score_mod_v(v_load_part(s + c, (int)(n - c)), m, dist), (int)(n - c));
    }
}

SIMD_INLINE vf mask_v(vf x, vf key, vf lo, vf hi)
{
    const vf ninf = v_set1(-__builtin_inff());
    x = v_select(v_lt(key, lo), ninf, x);
    return v_select(v_lt(key, hi), x, ninf);
}

static void mask_t_simd(float *St, int64_t ldst, int64_t bc, int64_t n, const float *lo,
                        const float *hi)
{
    for (int64_t c = 0; c < bc; c++) {
        float *s = St + c * ldst;
        const vf key = v_set1((float)c);
        int64_t r = 0;
        for (; r + SIMD_VL <= n; r += SIMD_VL)
            v_store(s + r, mask_v(v_load(s + r), key, v_load(lo + r), v_load(hi + r)));
        if (r < n) {
            const int k = (int)(n - r);
            v_store_part(s + r, mask_v(v_load_part(s + r, k), key, v_load_part(lo + r, k),
                                       v_load_part(hi + r, k)),
                         k);
        }
    }
}

static int nonfinite_simd(const float *x, int64_t ld, int64_t rows, int64_t n)
{
    vf acc = v_zero(); /* x * 0 is 0 for finite x, NaN for inf and NaN */
    for (int64_t r = 0; r < rows; r++) {
        const float *p = x + r * ld;
        int64_t d = 0;
        for (; d + SIMD_VL <= n; d += SIMD_VL)
            acc = v_add(acc, v_mul(v_load(p + d), v_zero()));
        if (d < n)
            acc = v_add(acc, v_mul(v_load_part(p + d, (int)(n - d)), v_zero()));
    }
    return v_hsum(acc) != 0.0f; /* NaN != 0 */
}

/* di_rows: the ISA's own where its file defines SIMD_DI_ROWS before including this one (avx512.c),
 * else the plain C one. */
#ifndef SIMD_DI_ROWS
#define SIMD_DI_ROWS cpu_di_rows_scalar
#endif

/* The entries of this ISA's table, for SIMD_TABLE and for tables that add a bf16 sub-table to
 * them (avx512.c: avx512bf16, amx). */
#define SIMD_ENTRIES                                                                           \
    .gemm = gemm_simd, .qk = qk_simd, .softmax = softmax_simd, .softmax_t = softmax_t_simd,    \
    .pv = pv_simd, .exp = exp_simd, .exp2 = exp2_simd, .load_row = load_row_simd,              \
    .store_row = store_row_simd, .rmsnorm_row = rmsnorm_row_simd,                              \
    .swiglu_row = swiglu_row_simd, .score_mod_t = score_mod_t_simd,                            \
    .score_mod_row = score_mod_row_simd, .mask_t = mask_t_simd, .nonfinite = nonfinite_simd,    \
    .di_rows = SIMD_DI_ROWS

const cpu_kernels SIMD_TABLE = {
    .name = SIMD_NAME,
    SIMD_ENTRIES,
};
