/*
 * test_cpu_kernels.c — every micro-kernel table this CPU can run against the scalar reference
 * table (kernels/scalar.c), plus the vector exp against libm in double.
 *
 * Each test iterates over cpu_isa_names and prints which paths ran and which were skipped
 * (a path the CPU cannot run, e.g. avx512 on a Zen 3). Sizes are odd on purpose (tails of the
 * register blocks and of the vector lanes), inputs are fresh random values (seed printed),
 * outputs are poisoned first and the memory around them is checked untouched.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/cpu/kernels/kernels.h"
#include "common.h"
#include "internal.h"

/* ---- helpers ---------------------------------------------------------------------------- */

static uint64_t rng_state;

static uint64_t rng_next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static float rng_uniform(float lo, float hi)
{
    return lo + (hi - lo) * (float)((rng_next() >> 40) * (1.0 / 16777216.0));
}

static float *rand_buf(int64_t n, float lo, float hi)
{
    float *p = malloc((size_t)n * sizeof(float));
    assert_non_null(p);
    for (int64_t i = 0; i < n; i++)
        p[i] = rng_uniform(lo, hi);
    return p;
}

static const float POISON = 12345.678f;

static float *poison_buf(int64_t n)
{
    float *p = malloc((size_t)n * sizeof(float));
    assert_non_null(p);
    for (int64_t i = 0; i < n; i++)
        p[i] = POISON;
    return p;
}

/* |a - b| <= tol * (1 + |b|) element-wise over rows x cols of ld-strided tiles; NaN fails. */
static void assert_close(const char *what, const char *isa, const float *a, const float *b,
                         int64_t rows, int64_t cols, int64_t ld, double tol)
{
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            const double x = a[i * ld + j], y = b[i * ld + j];
            if (!(fabs(x - y) <= tol * (1.0 + fabs(y)))) {
                print_error("%s [%s]: (%lld, %lld) = %.9g, reference %.9g\n", what, isa,
                            (long long)i, (long long)j, x, y);
                fail();
            }
        }
}

/* The tables to test: every ISA this build knows that this CPU runs. */
typedef void (*table_test)(const cpu_kernels *t);

static void for_each_isa(const char *what, table_test fn)
{
    for (int i = 0; cpu_isa_names[i]; i++) {
        const cpu_kernels *t = cpu_kernels_by_name(cpu_isa_names[i]);
        if (!t) {
            printf("  %s: %s skipped (this CPU cannot run it)\n", what, cpu_isa_names[i]);
            continue;
        }
        fn(t);
        printf("  %s: %s ran\n", what, t->name);
    }
}

/* ---- gemm / pv / qk ------------------------------------------------------------------- */

static void gemm_case(const cpu_kernels *t, int64_t M, int64_t N, int64_t K, int transA,
                      int scaled)
{
    const int64_t lda = (transA ? M : K) + 3, ldb = N + 5, ldc = N + 7;
    float *A = rand_buf((transA ? K : M) * lda, -1, 1), *B = rand_buf(K * ldb, -1, 1);
    float *rs = rand_buf(M, 0, 1);
    float *C0 = rand_buf(M * ldc, -1, 1), *C1 = malloc((size_t)(M * ldc) * sizeof(float));
    assert_non_null(C1);
    /* poison the padding columns: they must come back untouched */
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = N; j < ldc; j++)
            C0[i * ldc + j] = POISON;
    memcpy(C1, C0, (size_t)(M * ldc) * sizeof(float));
    const int64_t as_m = transA ? 1 : lda, as_k = transA ? lda : 1;
    cpu_kernels_scalar.gemm(M, N, K, A, as_m, as_k, B, ldb, scaled ? rs : NULL, C0, ldc);
    t->gemm(M, N, K, A, as_m, as_k, B, ldb, scaled ? rs : NULL, C1, ldc);
    assert_close("gemm", t->name, C1, C0, M, N, ldc, 1e-5 * (double)K);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = N; j < ldc; j++)
            assert_true(C1[i * ldc + j] == POISON);
    free(A), free(B), free(rs), free(C0), free(C1);
}

static void gemm_all(const cpu_kernels *t)
{
    static const int64_t sizes[] = {1, 2, 5, 6, 7, 12, 13, 16, 17, 31, 33, 96, 101};
    const int ns = (int)(sizeof sizes / sizeof sizes[0]);
    for (int a = 0; a < ns; a++)
        for (int b = 0; b < ns; b += 2)
            for (int trans = 0; trans < 2; trans++)
                gemm_case(t, sizes[a], sizes[b], sizes[(a + b) % ns], trans, (a + b) & 1);
}

static void test_gemm(void **state)
{
    (void)state;
    for_each_isa("gemm", gemm_all);
}

static void qk_pv_all(const cpu_kernels *t)
{
    static const int64_t shapes[][3] = {{1, 1, 1},    {3, 5, 7},    {6, 16, 64}, {13, 17, 40},
                                        {64, 64, 128}, {7, 33, 80}, {12, 9, 96}, {5, 70, 3},
                                        {3, 9, 600} /* qk_simd falls back to dot products */};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t br = shapes[s][0], bc = shapes[s][1], D = shapes[s][2];
        const int64_t ld = D + 1, lds = bc + 3, ldo = D + 2;
        float *Q = rand_buf(br * ld, -1, 1), *K = rand_buf(bc * ld, -1, 1);
        float *S0 = poison_buf(br * lds), *S1 = poison_buf(br * lds);
        cpu_kernels_scalar.qk(Q, ld, K, ld, br, bc, D, 0.125f, S0, lds);
        t->qk(Q, ld, K, ld, br, bc, D, 0.125f, S1, lds);
        assert_close("qk", t->name, S1, S0, br, lds, lds, 1e-6 * (double)D);

        float *P = rand_buf(br * lds, 0, 1), *V = rand_buf(bc * ld, -1, 1);
        float *al = rand_buf(br, 0, 1);
        float *O0 = rand_buf(br * ldo, -1, 1), *O1 = malloc((size_t)(br * ldo) * sizeof(float));
        assert_non_null(O1);
        memcpy(O1, O0, (size_t)(br * ldo) * sizeof(float));
        cpu_kernels_scalar.pv(P, lds, V, ld, br, bc, D, al, O0, ldo);
        t->pv(P, lds, V, ld, br, bc, D, al, O1, ldo);
        assert_close("pv", t->name, O1, O0, br, ldo, ldo, 1e-6 * (double)bc);
        free(Q), free(K), free(S0), free(S1), free(P), free(V), free(al), free(O0), free(O1);
    }
}

static void test_qk_pv(void **state)
{
    (void)state;
    for_each_isa("qk+pv", qk_pv_all);
}

/* ---- online softmax --------------------------------------------------------------------- */

/* Two consecutive tiles through both layouts, with masked entries, a fully masked first tile
 * for some rows (state stays empty, then starts), and rows that never see a key. */
static void softmax_all(const cpu_kernels *t)
{
    static const int64_t shapes[][2] = {{1, 1}, {3, 7}, {8, 16}, {13, 29}, {33, 64}, {96, 96}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t rows = shapes[s][0], cols = shapes[s][1], ld = cols + 3, ldt = rows + 5;
        float *m[2], *l[2], *al[2], *S[2], *St[2];
        for (int v = 0; v < 2; v++) {
            m[v] = poison_buf(rows), l[v] = poison_buf(rows), al[v] = poison_buf(rows);
            S[v] = poison_buf(rows * ld), St[v] = poison_buf(cols * ldt);
        }
        for (int layout = 0; layout < 2; layout++) {
            for (int v = 0; v < 2; v++)
                for (int64_t i = 0; i < rows; i++)
                    m[v][i] = -INFINITY, l[v][i] = 0.0f;
            for (int tile = 0; tile < 2; tile++) {
                float *X = rand_buf(rows * cols, -8, 8);
                for (int64_t i = 0; i < rows; i++)
                    for (int64_t j = 0; j < cols; j++) {
                        const int never = i % 5 == 4;             /* sees nothing at all   */
                        const int late = i % 3 == 1 && tile == 0; /* first tile masked     */
                        if (never || late || (rng_next() & 7) == 0)
                            X[i * cols + j] = -INFINITY;
                    }
                for (int v = 0; v < 2; v++)
                    for (int64_t i = 0; i < rows; i++)
                        for (int64_t j = 0; j < cols; j++) {
                            S[v][i * ld + j] = X[i * cols + j];
                            St[v][j * ldt + i] = X[i * cols + j];
                        }
                const cpu_kernels *tab[2] = {&cpu_kernels_scalar, t};
                for (int v = 0; v < 2; v++) {
                    if (layout == 0)
                        tab[v]->softmax(S[v], ld, rows, cols, m[v], l[v], al[v]);
                    else
                        tab[v]->softmax_t(St[v], ldt, cols, rows, 0.37f, m[v], l[v], al[v]);
                }
                if (layout == 0)
                    assert_close("softmax P", t->name, S[1], S[0], rows, ld, ld, 1e-6);
                else
                    assert_close("softmax_t P", t->name, St[1], St[0], cols, ldt, ldt, 1e-6);
                for (int64_t i = 0; i < rows; i++) {
                    if (m[0][i] == -INFINITY)
                        assert_true(m[1][i] == -INFINITY);
                    else
                        assert_close("softmax m", t->name, m[1] + i, m[0] + i, 1, 1, 1, 1e-7);
                    assert_close("softmax l", t->name, l[1] + i, l[0] + i, 1, 1, 1, 1e-6);
                    assert_close("softmax alpha", t->name, al[1] + i, al[0] + i, 1, 1, 1, 1e-6);
                    if (i % 5 == 4) /* never sees a key: empty state, alpha 1 */
                        assert_true(l[1][i] == 0.0f && al[1][i] == 1.0f);
                }
                free(X);
            }
        }
        for (int v = 0; v < 2; v++)
            free(m[v]), free(l[v]), free(al[v]), free(S[v]), free(St[v]);
    }
}

static void test_softmax(void **state)
{
    (void)state;
    for_each_isa("softmax", softmax_all);
}

/* ---- exp: dense sweeps against libm in double -------------------------------------------- */

/* Documented bounds (simd.h): max relative error of v_exp over [ln FLT_MIN, ln FLT_MAX] and
 * of v_exp2_ftz over [-126, 127.4], asserted here. */
static const double EXP_REL_BOUND = 1.5e-7;

static double sweep(const cpu_kernels *t, int base2, double lo, double hi, int64_t n)
{
    enum { CHUNK = 4096 };
    float x[CHUNK], y[CHUNK];
    double worst = 0.0;
    for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
        const int m = n - i0 < CHUNK ? (int)(n - i0) : CHUNK;
        for (int i = 0; i < m; i++)
            x[i] = (float)(lo + (hi - lo) * (double)(i0 + i) / (double)(n - 1));
        (base2 ? t->exp2 : t->exp)(x, y, m);
        for (int i = 0; i < m; i++) {
            const double ref = base2 ? exp2((double)x[i]) : exp((double)x[i]);
            const double rel = fabs((double)y[i] - ref) / ref;
            if (!(rel <= worst)) /* also catches NaN */
                worst = rel;
        }
    }
    return worst;
}

static void exp_all(const cpu_kernels *t)
{
    if (t->exp == cpu_kernels_scalar.exp) /* libm itself (scalar, bf16ref): nothing to bound */
        return;
    /* about 2^24 points per function: every float in [1, 2) has ~8 neighbours in the sweep */
    const double e = sweep(t, 0, -87.3365, 88.7228, 1 << 24);
    const double e2 = sweep(t, 1, -126.0, 127.4, 1 << 24);
    printf("  exp [%s]: max relative error %.3g (exp), %.3g (exp2); bound %.3g\n", t->name, e, e2,
           EXP_REL_BOUND);
    assert_true(e <= EXP_REL_BOUND);
    assert_true(e2 <= EXP_REL_BOUND);
    /* a dense sweep near 0 where exp(r) is the polynomial alone */
    assert_true(sweep(t, 0, -1.0, 1.0, 1 << 20) <= EXP_REL_BOUND);

    const float sx[] = {-INFINITY, INFINITY, NAN, -1000.0f, -88.0f, 89.0f, 1000.0f, 0.0f,
                        -127.5f, -200.0f};
    float y[10], y2[10];
    t->exp(sx, y, 10);
    t->exp2(sx, y2, 10);
    assert_true(y[0] == 0.0f && y2[0] == 0.0f);             /* masked scores contribute 0 */
    assert_true(isinf(y[1]) && y[1] > 0);                   /* overflow -> +inf           */
    assert_true(isnan(y[2]) && isnan(y2[2]));               /* NaN never passes as a number */
    assert_true(y[3] == 0.0f && y[4] == 0.0f);              /* below FLT_MIN: flushed     */
    assert_true(isinf(y[5]) && isinf(y[6]));
    assert_true(y[7] == 1.0f && y2[7] == 1.0f);
    assert_true(y2[8] == 0.0f && y2[9] == 0.0f);
}

static void test_exp(void **state)
{
    (void)state;
    for_each_isa("exp", exp_all);
}

/* ---- conversions and row ops -------------------------------------------------------------- */

static int same_float(float a, float b) { return (isnan(a) && isnan(b)) || a == b; }

static void convert_all(const cpu_kernels *t)
{
    /* every 16-bit pattern loads exactly as the scalar conversion */
    enum { N = 65536 + 3 };
    uint16_t *h = malloc(N * sizeof(uint16_t)), *h1 = malloc(N * sizeof(uint16_t));
    float *f0 = malloc(N * sizeof(float)), *f1 = malloc(N * sizeof(float));
    assert_true(h && h1 && f0 && f1);
    for (int i = 0; i < N; i++)
        h[i] = (uint16_t)i;
    const flashc_dtype dts[2] = {FLASHC_BF16, FLASHC_F16};
    for (int d = 0; d < 2; d++) {
        cpu_kernels_scalar.load_row(h, dts[d], N, f0);
        t->load_row(h, dts[d], N, f1);
        for (int i = 0; i < N; i++)
            assert_true(same_float(f0[i], f1[i]));
    }
    /* stores round to nearest even exactly like the scalar reference: random floats over many
     * binades, halfway cases, subnormals, inf, NaN */
    for (int i = 0; i < N; i++) {
        union { uint32_t u; float f; } c;
        c.u = (uint32_t)rng_next();
        if (i % 4 == 1)
            c.u = (c.u & 0xffff0000u) | 0x8000u; /* exactly halfway for bf16 */
        if (i % 4 == 2)
            c.f = rng_uniform(-70000.0f, 70000.0f) * ldexpf(1.0f, -(int)(rng_next() % 40));
        f0[i] = c.f;
    }
    f0[0] = INFINITY, f0[1] = -INFINITY, f0[2] = NAN, f0[3] = 65520.0f, f0[4] = 1e-8f;
    /* float32 subnormals (AVX-512's vcvtneps2bf16 would flush them), every 16th value */
    static const uint32_t subn[] = {0x00000001u, 0x007fffffu, 0x80400000u, 0x00008000u,
                                    0x00018000u, 0x807f8000u};
    for (int i = 0; i < (int)(sizeof subn / sizeof subn[0]); i++) {
        union { uint32_t u; float f; } c = {subn[i]};
        f0[5 + 16 * i] = c.f;
    }
    for (int d = 0; d < 2; d++)
        for (int64_t n = 1; n <= N; n = n * 3 + 1) { /* lengths with every tail */
            cpu_kernels_scalar.store_row(f0, 1.0f, n, h, dts[d]);
            t->store_row(f0, 1.0f, n, h1, dts[d]);
            for (int64_t i = 0; i < n; i++) {
                const float a = flashc__load(h, dts[d], i), b = flashc__load(h1, dts[d], i);
                if (!same_float(a, b)) {
                    print_error("store_row [%s] dtype %d: %.9g -> %#x, reference %#x\n", t->name,
                                (int)dts[d], (double)f0[i], h1[i], h[i]);
                    fail();
                }
            }
        }
    free(h), free(h1), free(f0), free(f1);
}

static void test_convert(void **state)
{
    (void)state;
    for_each_isa("convert", convert_all);
}

static void *typed_copy(const float *src, int64_t n, flashc_dtype dt)
{
    void *p = malloc((size_t)n * flashc_dtype_size(dt));
    assert_non_null(p);
    for (int64_t i = 0; i < n; i++)
        flashc__store(p, dt, i, src[i]);
    return p;
}

static void rows_all(const cpu_kernels *t)
{
    static const int64_t widths[] = {1, 3, 8, 17, 64, 127, 1000};
    const flashc_dtype dts[3] = {FLASHC_F32, FLASHC_BF16, FLASHC_F16};
    for (int di = 0; di < 3; di++) {
        const flashc_dtype dt = dts[di];
        /* one rounding of the output in dt plus float32 sums in another order */
        const double tol = dt == FLASHC_F32 ? 2e-6 : dt == FLASHC_BF16 ? 8e-3 : 1e-3;
        for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
            const int64_t D = widths[wi];
            float *xf = rand_buf(2 * D, -3, 3), *rf = rand_buf(D, -1, 1), *wf = rand_buf(D, 0, 2);
            void *x0 = typed_copy(xf, 2 * D, dt), *x1 = typed_copy(xf, 2 * D, dt);
            void *r = typed_copy(rf, D, dt), *w = typed_copy(wf, D, dt);
            void *y0 = typed_copy(xf, 2 * D, dt), *y1 = typed_copy(xf, 2 * D, dt);
            float a[1000 * 2], b[1000 * 2];
            for (int res = 0; res < 2; res++) {
                cpu_kernels_scalar.rmsnorm_row(x0, 1, res ? r : NULL, 1, res ? x0 : NULL, w, 1,
                                               y0, 1, D, 1e-5f, dt);
                t->rmsnorm_row(x1, 1, res ? r : NULL, 1, res ? x1 : NULL, w, 1, y1, 1, D, 1e-5f,
                               dt);
                for (int64_t i = 0; i < D; i++)
                    a[i] = flashc__load(y1, dt, i), b[i] = flashc__load(y0, dt, i);
                assert_close("rmsnorm y", t->name, a, b, 1, D, D, tol);
                for (int64_t i = 0; i < D; i++) /* the written-back residual stream */
                    assert_true(same_float(flashc__load(x1, dt, i), flashc__load(x0, dt, i)));
            }
            /* strided rows (every other element) take the reference path inside */
            t->rmsnorm_row(x1, 2, NULL, 1, NULL, w, 1, y1, 2, (D + 1) / 2, 1e-5f, dt);
            cpu_kernels_scalar.rmsnorm_row(x1, 2, NULL, 1, NULL, w, 1, y0, 2,
                                           (D + 1) / 2, 1e-5f, dt);
            for (int64_t i = 0; i < (D + 1) / 2; i++)
                assert_true(same_float(flashc__load(y1, dt, 2 * i), flashc__load(y0, dt, 2 * i)));

            /* SwiGLU over a gate|up row of 2D with large |g| too (exp overflow -> silu = -0) */
            float *gu = rand_buf(2 * D, -12, 12);
            if (D > 3)
                gu[0] = -100.0f, gu[1] = 100.0f;
            void *g = typed_copy(gu, 2 * D, dt);
            cpu_kernels_scalar.swiglu_row(g, 1, y0, 1, D, dt);
            t->swiglu_row(g, 1, y1, 1, D, dt);
            for (int64_t i = 0; i < D; i++)
                a[i] = flashc__load(y1, dt, i), b[i] = flashc__load(y0, dt, i);
            assert_close("swiglu", t->name, a, b, 1, D, D, tol);
            free(gu), free(g);
            free(xf), free(rf), free(wf), free(x0), free(x1), free(r), free(w), free(y0),
                free(y1);
        }
    }
}

static void test_rows(void **state)
{
    (void)state;
    for_each_isa("rows", rows_all);
}

/* SwiGLU in 16-bit storage over every value of the gate: all 2^16 bf16 / f16 bit patterns as g
 * with u = 1, so y = silu(g) rounded to dt. Rounding the exact silu (the naive same-precision
 * result) is off by at most half an ulp, 2^-8 |silu| in bf16 and 2^-11 |silu| in f16 (+ half
 * the f16 subnormal spacing); the SIMD paths' shorter exp (v_silu_lp, simd.h) must stay within
 * twice that. Absolute slack 1e-36: below it silu flushes to -0 on every path. NaN and inf
 * exactly as the scalar reference; a NaN in u gives NaN. */
static void silu16_all(const cpu_kernels *t)
{
    enum { N = 1 << 16 };
    const flashc_dtype dts[2] = {FLASHC_BF16, FLASHC_F16};
    uint16_t *gu = malloc(2 * N * sizeof *gu), *y = malloc(N * sizeof *y);
    uint16_t *y0 = malloc(N * sizeof *y0);
    assert_true(gu && y && y0);
    for (int d = 0; d < 2; d++) {
        const flashc_dtype dt = dts[d];
        const double half_ulp = dt == FLASHC_BF16 ? 0x1p-8 : 0x1p-11;
        const double floor_abs = dt == FLASHC_BF16 ? 1e-36 : 0x1p-25;
        for (int i = 0; i < N; i++)
            gu[i] = (uint16_t)i;
        for (int i = 0; i < N; i++)
            flashc__store(gu + N, dt, i, 1.0f);
        t->swiglu_row(gu, 1, y, 1, N, dt);
        cpu_kernels_scalar.swiglu_row(gu, 1, y0, 1, N, dt);
        double worst = 0.0; /* max |y - silu| / (half_ulp |silu| + floor) */
        for (int i = 0; i < N; i++) {
            const double g = flashc__load(gu, dt, i), v = flashc__load(y, dt, i);
            const float v0 = flashc__load(y0, dt, i);
            if (isnan(g) || isinf(g) || isnan(v0)) {
                if (!same_float((float)v, v0)) {
                    print_error("swiglu %s [%s]: silu(%g) = %g, reference %g\n",
                                dt == FLASHC_BF16 ? "bf16" : "f16", t->name, g, v, (double)v0);
                    fail();
                }
                continue;
            }
            const double ref = g / (1.0 + exp(-g));
            const double r = fabs(v - ref) / (half_ulp * fabs(ref) + floor_abs);
            if (!(r <= worst))
                worst = r;
        }
        printf("  silu %s [%s]: max error %.3g x (naive bound: half an ulp)\n",
               dt == FLASHC_BF16 ? "bf16" : "f16", t->name, worst);
        assert_true(worst <= 2.0);
        /* NaN in u (and in g next to it) propagates through the pair and the tail paths */
        for (int i = 0; i < 37; i++)
            flashc__store(gu, dt, i, (float)i - 18.0f), flashc__store(gu + 37, dt, i, 1.0f);
        flashc__store(gu + 37, dt, 3, NAN);
        flashc__store(gu + 37, dt, 35, NAN);
        flashc__store(gu, dt, 20, NAN);
        t->swiglu_row(gu, 1, y, 1, 37, dt);
        for (int i = 0; i < 37; i++)
            assert_true(isnan(flashc__load(y, dt, i)) == (i == 3 || i == 35 || i == 20));
    }
    free(gu), free(y), free(y0);
}

static void test_silu16(void **state)
{
    (void)state;
    for_each_isa("silu16", silu16_all);
}

/* ---- bf16 matrix products (kernels.h cpu_mm_bf16) ------------------------------------ */

static int64_t rup(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

static uint16_t rand_bf16(void) { return flashc__f32_to_bf16(rng_uniform(-2, 2)); }

/* One shape: pack_b and pack_bt of the same matrix give the model's words bit for bit (padding
 * zero, words past the padding untouched); gemm matches the model within float32 rounding
 * (the units sum in another order) and writes only C's M x N. */
static void mm_case(const cpu_kernels *t, int64_t M, int64_t N, int64_t K, int scaled)
{
    const cpu_mm_bf16 *mm = t->bf16;
    const int64_t kp = rup(K, CPU_MM_KP), np = rup(N, 16), m16 = rup(M, 16);
    const int64_t ldb = N + 3, ldbt = K + 5, lda = kp + (M & 1 ? 32 : 0), ldbp = np + 16;
    const int64_t ldc = N + 7, nbp = kp / 2 * ldbp;
    uint16_t *B = malloc((size_t)(K * ldb) * 2), *Bt = malloc((size_t)(N * ldbt) * 2);
    uint32_t *P0 = malloc((size_t)nbp * 4), *P1 = malloc((size_t)nbp * 4);
    uint16_t *A = malloc((size_t)(m16 * lda) * 2);
    float *C0 = malloc((size_t)(M * ldc) * 4), *C1 = malloc((size_t)(M * ldc) * 4);
    float *rs = malloc((size_t)M * 4);
    assert_true(B && Bt && P0 && P1 && A && C0 && C1 && rs);
    for (int64_t k = 0; k < K; k++)
        for (int64_t n = 0; n < N; n++)
            B[k * ldb + n] = Bt[n * ldbt + k] = rand_bf16();
    for (int pass = 0; pass < 2; pass++) {
        memset(P0, 0xee, (size_t)nbp * 4), memset(P1, 0xee, (size_t)nbp * 4);
        cpu_mm_bf16_ref.pack_b(B, ldb, K, N, P0, ldbp);
        if (pass == 0)
            mm->pack_b(B, ldb, K, N, P1, ldbp);
        else
            mm->pack_bt(Bt, ldbt, N, K, P1, ldbp);
        for (int64_t i = 0; i < nbp; i++)
            if (P0[i] != P1[i]) {
                print_error("%s [%s] K %lld N %lld: word (%lld, %lld) = %08x, model %08x\n",
                            pass ? "pack_bt" : "pack_b", t->name, (long long)K, (long long)N,
                            (long long)(i / ldbp), (long long)(i % ldbp), P1[i], P0[i]);
                fail();
            }
    }
    for (int64_t m = 0; m < m16; m++)
        for (int64_t k = 0; k < lda; k++)
            A[m * lda + k] = m < M && k < K ? rand_bf16() : 0;
    for (int64_t m = 0; m < M; m++) {
        rs[m] = m % 3 == 0 ? 1.0f : rng_uniform(0, 1);
        for (int64_t n = 0; n < ldc; n++)
            C0[m * ldc + n] = C1[m * ldc + n] = n < N ? rng_uniform(-1, 1) : POISON;
    }
    mm->begin();
    cpu_mm_bf16_ref.gemm(M, N, K, A, lda, P0, ldbp, scaled ? rs : NULL, C0, ldc);
    mm->gemm(M, N, K, A, lda, P0, ldbp, scaled ? rs : NULL, C1, ldc);
    mm->end();
    assert_close("mm gemm", t->name, C1, C0, M, ldc, ldc, 4e-6 * (double)(K + 1));
    free(B), free(Bt), free(P0), free(P1), free(A), free(C0), free(C1), free(rs);
}

static void mm_all(const cpu_kernels *t)
{
    if (!t->bf16)
        return;
    static const int64_t sz[] = {1, 2, 7, 15, 16, 17, 31, 32, 33, 47, 64, 96, 100, 129};
    const int ns = (int)(sizeof sz / sizeof sz[0]);
    for (int a = 0; a < ns; a++)
        for (int b = 0; b < ns; b++)
            mm_case(t, sz[a], sz[b], sz[(a * 5 + b) % ns], (a + b) & 1);
    printf("  mm: %s (%s) %d shapes\n", t->name, t->bf16->unit, ns * ns);
}

static void test_mm_bf16(void **state)
{
    (void)state;
    for_each_isa("mm", mm_all);
}

/* cpu_mm_bf16.softmax: every SIMD instance against the scalar model, with masked scores, rows
 * that see nothing yet, a running max that grows or not. P within one bf16 rounding (the
 * vector exp2 differs from libm's: a few float32 ulps on AVX2 / NEON, up to 2.7e-6 relative for
 * AVX-512's v_exp2_p), its padding exactly zero, the memory past the padding untouched; l, a
 * sum of those exponentials, within 1e-5 (so it bounds v_exp2_p's error too). */
typedef void (*mm_softmax_fn)(CPU_MM_SOFTMAX_ARGS);

static void mm_softmax_case(const char *name, mm_softmax_fn fn, int64_t br, int64_t bc)
{
    const int64_t lds = bc + 3, bcp = rup(bc, CPU_MM_KP), ldp = bcp + 16;
    float *S = rand_buf(br * lds, -30, 30);
    float m0[64], l0[64], a0[64], m1[64], l1[64], a1[64];
    uint16_t *P0 = malloc((size_t)(br * ldp) * 2), *P1 = malloc((size_t)(br * ldp) * 2);
    assert_true(br <= 64 && P0 && P1);
    for (int64_t i = 0; i < br; i++) {
        for (int64_t j = 0; j < bc; j++)
            if ((i + j) % 5 == 0 || i % 7 == 3)
                S[i * lds + j] = -INFINITY; /* row 3, 10, ...: nothing visible */
        m0[i] = m1[i] = i % 4 == 0 ? -INFINITY : rng_uniform(-20, 20);
        l0[i] = l1[i] = i % 4 == 0 ? 0.0f : rng_uniform(0.5f, 10);
    }
    memset(P0, 0x5a, (size_t)(br * ldp) * 2), memset(P1, 0x5a, (size_t)(br * ldp) * 2);
    const float c = 0.125f * 1.44269504f;
    cpu_mm_bf16_ref.softmax(S, lds, br, bc, c, m0, l0, a0, P0, ldp);
    fn(S, lds, br, bc, c, m1, l1, a1, P1, ldp);
    for (int64_t i = 0; i < br; i++) { /* m = -inf on a row that has seen nothing */
        if (!(m1[i] == m0[i] || fabsf(m1[i] - m0[i]) <= 1e-6f * (1.0f + fabsf(m0[i])))) {
            print_error("mm softmax m [%s]: row %lld = %.9g, model %.9g\n", name, (long long)i,
                        (double)m1[i], (double)m0[i]);
            fail();
        }
    }
    assert_close("mm softmax l", name, l1, l0, 1, br, br, 1e-5);
    assert_close("mm softmax alpha", name, a1, a0, 1, br, br, 1e-5);
    /* P is exp in float32 (the SIMD exp within 2.7e-6 of the model's) rounded to bf16: a value
     * next to a rounding boundary may land on either neighbour, so one bf16 ulp (2^-7
     * relative; seen on the Xeon's AVX-512 table) is the tolerance */
    for (int64_t i = 0; i < br; i++)
        for (int64_t j = 0; j < ldp; j++) {
            const uint16_t x = P1[i * ldp + j], y = P0[i * ldp + j];
            const float fx = flashc__bf16_to_f32(x), fy = flashc__bf16_to_f32(y);
            const int ok = j >= bcp  ? x == 0x5a5a /* past the padding: untouched */
                           : j >= bc ? x == 0      /* the padding */
                                     : fabsf(fx - fy) <= 0x1p-7f * fabsf(fy) + 1e-30f;
            if (!ok) {
                print_error("mm softmax P [%s] br %lld bc %lld: (%lld, %lld) = %04x, model %04x\n",
                            name, (long long)br, (long long)bc, (long long)i, (long long)j, x, y);
                fail();
            }
        }
    free(S), free(P0), free(P1);
}

/* NaN scores: a row whose only non-masked score is NaN (the case a horizontal max can lose),
 * with and without a running max, and a NaN among finite scores all end with l = NaN and P =
 * NaN at the NaN's column; a row of -inf only keeps the empty state. */
static void mm_softmax_nan(const char *name, mm_softmax_fn fn)
{
    enum { BR = 4, BC = 37, LDS = 40, LDP = 64 };
    float S[BR * LDS], m[BR] = {-INFINITY, 3.0f, -INFINITY, -INFINITY}, l[BR] = {0, 2, 0, 0};
    float a[BR];
    uint16_t P[BR * LDP];
    const int col[BR] = {20, 33, 5, -1};
    for (int i = 0; i < BR; i++)
        for (int j = 0; j < BC; j++)
            S[i * LDS + j] = j == col[i] ? NAN : i == 2 ? (float)(j % 7) : -INFINITY;
    fn(S, LDS, BR, BC, 0.18f, m, l, a, P, LDP);
    for (int i = 0; i < 3; i++) {
        const uint16_t x = P[i * LDP + col[i]];
        if (!isnan(l[i]) || (x & 0x7f80u) != 0x7f80u || !(x & 0x7fu)) {
            print_error("mm softmax NaN [%s]: row %d: l = %g, P = %04x (want NaN)\n", name, i,
                        (double)l[i], x);
            fail();
        }
    }
    assert_true(m[3] == -INFINITY && l[3] == 0.0f && a[3] == 1.0f);
    for (int j = 0; j < rup(BC, CPU_MM_KP); j++)
        assert_int_equal(P[3 * LDP + j], 0);
}

static void test_mm_softmax(void **state)
{
    (void)state;
    static const struct { const char *isa; mm_softmax_fn fn; } inst[] = {
#if defined(__x86_64__)
        {"avx2", cpu_kernels_avx2_mm_softmax},
        {"avx512", cpu_kernels_avx512_mm_softmax},
#endif
#if defined(__aarch64__)
        {"neon", cpu_kernels_neon_mm_softmax},
#endif
        {NULL, NULL}};
    static const int64_t shapes[][2] = {{1, 1}, {3, 7}, {16, 16}, {17, 33}, {48, 96}, {64, 100}};
    mm_softmax_nan("scalar model", cpu_mm_bf16_ref.softmax);
    for (int k = 0; inst[k].isa; k++) {
        if (!cpu_kernels_by_name(inst[k].isa)) {
            printf("  mm softmax: %s skipped (this CPU cannot run it)\n", inst[k].isa);
            continue;
        }
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            mm_softmax_case(inst[k].isa, inst[k].fn, shapes[s][0], shapes[s][1]);
        mm_softmax_nan(inst[k].isa, inst[k].fn);
        printf("  mm softmax: %s ran\n", inst[k].isa);
    }
}

/* cpu_mm_bf16.p_ds: every SIMD instance against the scalar model, with rows whose visible
 * columns start or end inside the tile, rows that see nothing, NaN / inf outside a row's range
 * (must not reach it), with and without G and a scale. P within 4e-6 relative of the model
 * (AVX-512's v_exp2_p: 2.7e-6) or 1e-37 absolute (values below FLT_MIN may become 0), dS the
 * same relative to |P (dP - Di) G|; exact zeros outside. */
typedef void (*mm_p_ds_fn)(CPU_MM_P_DS_ARGS);

static void mm_p_ds_case(const char *name, mm_p_ds_fn fn, int64_t rows, int64_t n, int with_g)
{
    const int64_t lds = n + 5, jlo = 40;
    float *S0 = rand_buf(rows * lds, -6, 6), *D0 = rand_buf(rows * lds, -3, 3);
    float *G = rand_buf(rows * lds, 0, 1);
    float *S1 = malloc((size_t)(rows * lds) * 4), *D1 = malloc((size_t)(rows * lds) * 4);
    float L[70], Di[70];
    int64_t lo[70], hi[70];
    assert_true(rows <= 70 && S1 && D1);
    for (int64_t r = 0; r < rows; r++) {
        L[r] = rng_uniform(-2, 8), Di[r] = rng_uniform(-1, 1);
        lo[r] = jlo + (r % 3 == 0 ? -5 : (r * 7) % (n + 1)); /* before, inside the tile */
        hi[r] = r % 5 == 4 ? lo[r] : lo[r] + (r % 2 ? n + 9 : (r * 5) % (n + 1) + 1);
        for (int64_t j = 0; j < n; j++)
            if (jlo + j < lo[r] || jlo + j >= hi[r]) /* outside: poison */
                S0[r * lds + j] = j % 3 ? NAN : INFINITY, D0[r * lds + j] = NAN;
        if (r == 1) /* a score far below the LSE: P underflows */
            S0[r * lds + n - 1] = -1e4f;
    }
    memcpy(S1, S0, (size_t)(rows * lds) * 4), memcpy(D1, D0, (size_t)(rows * lds) * 4);
    const float scale = with_g ? 1.0f : 0.37f;
    cpu_mm_bf16_ref.p_ds(S0, D0, with_g ? G : NULL, lds, rows, n, scale, L, Di, lo, hi, jlo);
    fn(S1, D1, with_g ? G : NULL, lds, rows, n, scale, L, Di, lo, hi, jlo);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < n; j++) {
            const float p0 = S0[r * lds + j], p1 = S1[r * lds + j];
            const float d0 = D0[r * lds + j], d1 = D1[r * lds + j];
            const int in = jlo + j >= lo[r] && jlo + j < hi[r];
            const float big = in ? fabsf(p0) * (fabsf(d0 / (p0 ? p0 : 1.0f)) + 1.0f) : 0.0f;
            const int ok = in ? fabsf(p1 - p0) <= 4e-6f * p0 + 1e-37f &&
                                    fabsf(d1 - d0) <= 4e-6f * big + 1e-37f
                              : p1 == 0.0f && d1 == 0.0f && !signbit(p1) && !signbit(d1);
            if (!ok) {
                print_error("mm p_ds [%s] rows %lld n %lld g %d: (%lld, %lld) P %.9g dS %.9g, "
                            "model %.9g %.9g\n", name, (long long)rows, (long long)n, with_g,
                            (long long)r, (long long)j, (double)p1, (double)d1, (double)p0,
                            (double)d0);
                fail();
            }
        }
    free(S0), free(D0), free(G), free(S1), free(D1);
}

static void test_mm_p_ds(void **state)
{
    (void)state;
    static const struct { const char *isa; mm_p_ds_fn fn; } inst[] = {
#if defined(__x86_64__)
        {"avx2", cpu_kernels_avx2_mm_p_ds},
        {"avx512", cpu_kernels_avx512_mm_p_ds},
#endif
#if defined(__aarch64__)
        {"neon", cpu_kernels_neon_mm_p_ds},
#endif
        {NULL, NULL}};
    static const int64_t shapes[][2] = {{1, 1}, {3, 7}, {16, 16}, {17, 33}, {64, 128}, {70, 100}};
    for (int k = 0; inst[k].isa; k++) {
        if (!cpu_kernels_by_name(inst[k].isa)) {
            printf("  mm p_ds: %s skipped (this CPU cannot run it)\n", inst[k].isa);
            continue;
        }
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int g = 0; g < 2; g++)
                mm_p_ds_case(inst[k].isa, inst[k].fn, shapes[s][0], shapes[s][1], g);
        printf("  mm p_ds: %s ran\n", inst[k].isa);
    }
}

/* cpu_mm_bf16.split and split_cvt: bit for bit the scalar model, every word of both outputs
 * (the padding is part of the contract), each output alone and both at once. X: normal values
 * of several scales, then in some 32-column blocks one lane each of what split_cvt must hand to
 * split's arithmetic (NaN, +-inf, FLT_MAX rounding to inf, a denormal, a tiny normal whose lo is
 * denormal, -0) and blocks of exact ties and zeros that it keeps. */
typedef void (*mm_split_fn)(const float *, int64_t, int64_t, int64_t, uint16_t *, int64_t,
                            uint32_t *, int64_t);

static void mm_split_case(const char *name, mm_split_fn fn, int64_t rows, int64_t n, int which)
{
    const int64_t kr = rup(rows, 32), kn = rup(n, 32), r16 = rup(rows, 16), n16 = rup(n, 16);
    const int64_t ldx = n + 3, lda = 2 * kn + 32, ldbp = n16 + 16;
    float *X = rand_buf(rows * ldx, -4, 4);
    for (int64_t i = 0; i < rows * ldx; i++)
        X[i] *= i % 5 == 1 ? 1e-3f : i % 5 == 2 ? 1e-30f : i % 5 == 3 ? 1e20f : 1.0f;
    static const float odd[] = {NAN, INFINITY, -INFINITY, FLT_MAX, -0x1.fffffep127f, 0x1p-140f,
                                -0x1.000002p-120f, 0x1.00001p-105f, -0.0f, 0x1.008p0f,
                                0x1.018p0f, 0.0f, 0x1p-126f, 0x1.00ffffp-100f, 0x1p-130f,
                                -0x1.01p-120f, 0x1.03p-118f};
    const int nodd = (int)(sizeof odd / sizeof odd[0]);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c0 = 0; c0 < n; c0 += 32)
            if ((r + c0 / 32) % 3 == 1) /* one odd lane in this block */
                X[r * ldx + c0 + (r * 7 + c0) % (n - c0 < 32 ? n - c0 : 32)] =
                    odd[(r + c0 / 32) % nodd];
    uint16_t *a0 = malloc((size_t)(r16 * lda) * 2), *a1 = malloc((size_t)(r16 * lda) * 2);
    uint32_t *b0 = malloc((size_t)(kr * ldbp) * 4), *b1 = malloc((size_t)(kr * ldbp) * 4);
    assert_true(a0 && a1 && b0 && b1);
    memset(a0, 0xee, (size_t)(r16 * lda) * 2), memset(a1, 0xee, (size_t)(r16 * lda) * 2);
    memset(b0, 0xee, (size_t)(kr * ldbp) * 4), memset(b1, 0xee, (size_t)(kr * ldbp) * 4);
    cpu_mm_bf16_ref.split(X, ldx, rows, n, which & 1 ? a0 : NULL, lda, which & 2 ? b0 : NULL,
                          ldbp);
    fn(X, ldx, rows, n, which & 1 ? a1 : NULL, lda, which & 2 ? b1 : NULL, ldbp);
    for (int64_t r = 0; r < r16 && (which & 1); r++)
        for (int64_t c = 0; c < 2 * kn; c++)
            if (a0[r * lda + c] != a1[r * lda + c]) {
                print_error("mm split [%s] A rows %lld n %lld: (%lld, %lld) %04x, model %04x\n",
                            name, (long long)rows, (long long)n, (long long)r, (long long)c,
                            a1[r * lda + c], a0[r * lda + c]);
                fail();
            }
    for (int64_t kk = 0; kk < kr && (which & 2); kk++)
        for (int64_t c = 0; c < n16; c++)
            if (b0[kk * ldbp + c] != b1[kk * ldbp + c]) {
                print_error("mm split [%s] B rows %lld n %lld: (%lld, %lld) %08x, model %08x\n",
                            name, (long long)rows, (long long)n, (long long)kk, (long long)c,
                            b1[kk * ldbp + c], b0[kk * ldbp + c]);
                fail();
            }
    free(X), free(a0), free(a1), free(b0), free(b1);
}

static void mm_split_all(const cpu_kernels *t)
{
    if (!t->bf16)
        return;
    static const int64_t sz[] = {1, 2, 7, 16, 17, 31, 32, 33, 64, 65, 100, 128};
    const int ns = (int)(sizeof sz / sizeof sz[0]);
    char name[64];
    for (int v = 0; v < 2; v++) {
        const mm_split_fn fn = v ? t->bf16->split_cvt : t->bf16->split;
        if (!fn)
            continue;
        snprintf(name, sizeof name, "%s %s", t->name, v ? "split_cvt" : "split");
        for (int a = 0; a < ns; a++)
            for (int b = 0; b < ns; b++)
                mm_split_case(name, fn, sz[a], sz[b], 1 + (a + b) % 3);
        printf("  mm split: %s, %d shapes\n", name, ns * ns);
    }
}

static void test_mm_split(void **state)
{
    (void)state;
    for_each_isa("mm split", mm_split_all);
}

/* cpu_mm_bf16.p_ds_split against the two steps it replaces on the same table (p_ds with
 * G = NULL, then split of P as B, dS as B and as A by segments: attn_bwd.c mm_split_ds): every
 * word of each output's extent, bit for bit, and the float32 dS (keep_ds) or untouched S, dP.
 * S holds ordinary scores and, in some entries, random bit patterns (NaN, inf, huge, denormal);
 * dP likewise; rows start and end their ranges inside the tile, before it, past it, or see
 * nothing; odd row and column counts; one or several A segments. */
static void mm_p_ds_split_case(const cpu_kernels *t, int64_t rows, int64_t n, int which,
                               int64_t seg0, int64_t seg, int keep)
{
    const cpu_mm_bf16 *mm = t->bf16;
    const int64_t kr = rup(rows, 32), kn = rup(n, 32), r16 = rup(rows, 16), n16 = rup(n, 16);
    const int64_t lds = n + 7, ldpb = n16 + 16, ldds = 2 * kn + 64, jlo = 50;
    float *S0 = rand_buf(rows * lds, -8, 4), *D0 = rand_buf(rows * lds, -3, 3);
    for (int64_t i = 0; i < rows * lds; i++) {
        uint32_t u = (uint32_t)(rng_next() >> 32);
        if (i % 11 == 5)
            memcpy(&S0[i], &u, 4);
        if (i % 13 == 7)
            memcpy(&D0[i], &u, 4);
    }
    float L[160], Di[160];
    int64_t lo[160], hi[160];
    assert_true(rows <= 160);
    for (int64_t r = 0; r < rows; r++) {
        L[r] = rng_uniform(-4, 4), Di[r] = rng_uniform(-1, 1);
        lo[r] = jlo + (r % 4 == 0 ? -9 : (r * 13) % (n + 3));
        hi[r] = r % 6 == 5 ? lo[r] - 1 : lo[r] + (r % 3 ? n + 20 : (r * 7) % (n + 1) + 1);
    }
    float *S1 = malloc((size_t)(rows * lds) * 4), *D1 = malloc((size_t)(rows * lds) * 4);
    uint32_t *pb[2], *dsp[2];
    uint16_t *dsa[2];
    for (int v = 0; v < 2; v++) {
        pb[v] = malloc((size_t)(kr * ldpb) * 4), dsp[v] = malloc((size_t)(kr * ldpb) * 4);
        dsa[v] = malloc((size_t)(r16 * ldds) * 2);
        assert_true(pb[v] && dsp[v] && dsa[v]);
        memset(pb[v], 0xee, (size_t)(kr * ldpb) * 4), memset(dsp[v], 0xee, (size_t)(kr * ldpb) * 4);
        memset(dsa[v], 0xee, (size_t)(r16 * ldds) * 2);
    }
    float *Dk = malloc((size_t)(rows * lds) * 4);
    assert_true(S1 && D1 && Dk);
    memcpy(S1, S0, (size_t)(rows * lds) * 4), memcpy(D1, D0, (size_t)(rows * lds) * 4);
    const int wp = which & 1, wa = which & 2, wb = which & 4;
    const float scale = 0.3f;
    /* the two steps, on S0 and D0 */
    for (int v = 0; v < (mm->split_cvt ? 2 : 1); v++) {
        float *S = malloc((size_t)(rows * lds) * 4), *D = malloc((size_t)(rows * lds) * 4);
        assert_true(S && D);
        memcpy(S, S0, (size_t)(rows * lds) * 4), memcpy(D, D0, (size_t)(rows * lds) * 4);
        void (*split)(const float *, int64_t, int64_t, int64_t, uint16_t *, int64_t, uint32_t *,
                      int64_t) = v ? mm->split_cvt : mm->split;
        mm->p_ds(S, D, NULL, lds, rows, n, scale, L, Di, lo, hi, jlo);
        uint32_t *p2 = malloc((size_t)(kr * ldpb) * 4), *d2 = malloc((size_t)(kr * ldpb) * 4);
        uint16_t *a2 = malloc((size_t)(r16 * ldds) * 2);
        assert_true(p2 && d2 && a2);
        memset(p2, 0xee, (size_t)(kr * ldpb) * 4), memset(d2, 0xee, (size_t)(kr * ldpb) * 4);
        memset(a2, 0xee, (size_t)(r16 * ldds) * 2);
        if (wp)
            split(S, lds, rows, n, NULL, 0, p2, ldpb);
        if (wb)
            split(D, lds, rows, n, NULL, 0, d2, ldpb);
        for (int64_t o = 0, len; wa && o < n; o += len) {
            len = o == 0 ? (seg0 < n ? seg0 : n) : n - o < seg ? n - o : seg;
            split(D + o, lds, rows, len, a2 + 2 * o, ldds, NULL, 0);
        }
        if (v == 0) {
            memcpy(pb[0], p2, (size_t)(kr * ldpb) * 4), memcpy(dsp[0], d2, (size_t)(kr * ldpb) * 4);
            memcpy(dsa[0], a2, (size_t)(r16 * ldds) * 2);
            memcpy(Dk, D, (size_t)(rows * lds) * 4); /* dS, for keep_ds */
        } else { /* split_cvt: the same bits as split */
            assert_memory_equal(pb[0], p2, (size_t)(kr * ldpb) * 4);
            assert_memory_equal(dsp[0], d2, (size_t)(kr * ldpb) * 4);
            assert_memory_equal(dsa[0], a2, (size_t)(r16 * ldds) * 2);
        }
        free(S), free(D), free(p2), free(d2), free(a2);
    }
    float *D1in = malloc((size_t)(rows * lds) * 4);
    assert_true(D1in);
    memcpy(D1in, D1, (size_t)(rows * lds) * 4);
    const cpu_mm_p_ds_split g = {
        .S = S1, .dP = D1, .lds = lds, .rows = rows, .n = n, .scale = scale, .L = L, .Di = Di,
        .lo = lo, .hi = hi, .jlo = jlo, .pb = wp ? pb[1] : NULL, .dsp = wb ? dsp[1] : NULL,
        .ldpb = ldpb, .dsa = wa ? dsa[1] : NULL, .ldds = ldds, .seg0 = seg0, .seg = seg,
        .keep_ds = keep};
    mm->p_ds_split(&g);
    const char *what[3] = {"P as B", "dS as B", "dS as A"};
    for (int k = 0; k < 3; k++) {
        const void *x0 = k == 0 ? (void *)pb[0] : k == 1 ? (void *)dsp[0] : (void *)dsa[0];
        const void *x1 = k == 0 ? (void *)pb[1] : k == 1 ? (void *)dsp[1] : (void *)dsa[1];
        const size_t bytes = k < 2 ? (size_t)(kr * ldpb) * 4 : (size_t)(r16 * ldds) * 2;
        const int on = k == 0 ? wp : k == 1 ? wb : wa;
        int untouched = 1; /* an output not asked for is not written */
        for (size_t i = 0; i < bytes; i++)
            untouched &= ((const uint8_t *)x1)[i] == 0xee;
        if (on ? memcmp(x0, x1, bytes) != 0 : !untouched) {
            const size_t wsz = k < 2 ? 4 : 2;
            size_t i = 0;
            while (i < bytes / wsz && !memcmp((const char *)x0 + i * wsz, (const char *)x1 + i * wsz, wsz))
                i++;
            print_error("mm p_ds_split [%s] %s rows %lld n %lld seg0 %lld seg %lld: word %zu "
                        "(row %zu, column %zu) differs from p_ds + split\n",
                        t->name, what[k], (long long)rows, (long long)n, (long long)seg0,
                        (long long)seg, i, i / (size_t)(k < 2 ? ldpb : ldds),
                        i % (size_t)(k < 2 ? ldpb : ldds));
            fail();
        }
    }
    /* S only read; dP: dS (keep_ds, p_ds's bits, columns n .. lds untouched) or only read */
    assert_memory_equal(S1, S0, (size_t)(rows * lds) * 4);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < lds; c++) {
            uint32_t a, b;
            const float want = keep && c < n ? Dk[r * lds + c] : D1in[r * lds + c];
            memcpy(&a, &D1[r * lds + c], 4), memcpy(&b, &want, 4);
            if (a != b) {
                print_error("mm p_ds_split [%s] rows %lld n %lld keep %d: dP (%lld, %lld) = "
                            "%08x, want %08x\n", t->name, (long long)rows, (long long)n, keep,
                            (long long)r, (long long)c, a, b);
                fail();
            }
        }
    free(S0), free(D0), free(S1), free(D1), free(D1in), free(Dk);
    for (int v = 0; v < 2; v++)
        free(pb[v]), free(dsp[v]), free(dsa[v]);
}

static void mm_p_ds_split_all(const cpu_kernels *t)
{
    if (!t->bf16 || !t->bf16->p_ds_split)
        return;
    static const int64_t rs[] = {1, 2, 7, 16, 17, 33, 64, 128, 129};
    static const int64_t ns[] = {1, 7, 16, 31, 32, 33, 64, 100, 128, 129, 200, 256};
    int cases = 0;
    for (size_t a = 0; a < sizeof rs / sizeof rs[0]; a++)
        for (size_t b = 0; b < sizeof ns / sizeof ns[0]; b++) {
            const int64_t n = ns[b];
            /* one segment; the mm default (MM_SEG 128 after a first one of 32 .. 128); 32s */
            const int64_t segs[3][2] = {{n, 128}, {32 * (int64_t)(1 + (a + b) % 4), 128}, {32, 32}};
            for (int s = 0; s < 3; s++) {
                const int which = 1 + (int)((a * 3 + b + (size_t)s) % 7); /* every subset */
                mm_p_ds_split_case(t, rs[a], n, which, segs[s][0], segs[s][1],
                                   (int)((a + b + (size_t)s) & 1));
                cases++;
            }
            mm_p_ds_split_case(t, rs[a], n, 7, n, 128, 1);
            cases++;
        }
    printf("  mm p_ds_split: %s, %d cases = p_ds + split\n", t->name, cases);
}

static void test_mm_p_ds_split(void **state)
{
    (void)state;
    for_each_isa("mm p_ds_split", mm_p_ds_split_all);
}

/* cpu_mm_bf16.transpose: every word of Y^T = X, bit for bit (X holds arbitrary bit patterns,
 * NaNs among them: a copy keeps them), and Y's padding columns untouched. */
static void mm_transpose_all(const cpu_kernels *t)
{
    if (!t->bf16)
        return;
    static const int64_t sz[] = {1, 3, 15, 16, 17, 31, 33, 64, 100, 128, 130};
    const int ns = (int)(sizeof sz / sizeof sz[0]);
    for (int a = 0; a < ns; a++)
        for (int b = 0; b < ns; b++) {
            const int64_t rows = sz[a], n = sz[b], ldx = n + 5, ldy = rows + 3;
            uint32_t *X = malloc((size_t)(rows * ldx) * 4), *Y = malloc((size_t)(n * ldy) * 4);
            assert_true(X && Y);
            for (int64_t i = 0; i < rows * ldx; i++)
                X[i] = (uint32_t)(rng_next() >> 32);
            memset(Y, 0xee, (size_t)(n * ldy) * 4);
            t->bf16->transpose((const float *)X, ldx, rows, n, (float *)Y, ldy);
            for (int64_t c = 0; c < n; c++)
                for (int64_t r = 0; r < ldy; r++) {
                    const uint32_t want = r < rows ? X[r * ldx + c] : 0xeeeeeeeeu;
                    if (Y[c * ldy + r] != want) {
                        print_error("mm transpose [%s] rows %lld n %lld: (%lld, %lld) %08x, "
                                    "want %08x\n", t->name, (long long)rows, (long long)n,
                                    (long long)c, (long long)r, Y[c * ldy + r], want);
                        fail();
                    }
                }
            free(X), free(Y);
        }
    printf("  mm transpose: %s, %d shapes\n", t->name, ns * ns);
}

static void test_mm_transpose(void **state)
{
    (void)state;
    for_each_isa("mm transpose", mm_transpose_all);
}

/* di_rows: bit for bit the plain C entry (each row's float64 sum in feature order), float32,
 * bf16 and float16 rows of values over several scales, unit and wider feature strides, feature
 * counts around the vector width, rows at scattered offsets. */
static void di_rows_all(const cpu_kernels *t)
{
    static const int64_t ns[] = {1, 5, 8, 9, 16, 63, 64, 100, 128, 257};
    static const flashc_dtype dts[] = {FLASHC_F32, FLASHC_BF16, FLASHC_F16};
    int cases = 0;
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
            for (int64_t s = 1; s <= 3; s += 2) {
                const int64_t n = ns[i], len = 8 * (n * s + 11) + 8;
                const flashc_dtype dt = dts[k];
                float *x = rand_buf(2 * len, -2, 2);
                void *buf = malloc((size_t)(2 * len) * 4);
                assert_non_null(buf);
                for (int64_t e = 0; e < 2 * len; e++)
                    flashc__store(buf, dt, e, x[e] * (e % 7 == 3 ? 1e-3f : e % 7 == 5 ? 64.0f : 1.0f));
                const void *a = buf;
                const void *b = (const char *)buf + len * flashc_dtype_size(dt);
                int64_t ao[CPU_DI_ROWS], bo[CPU_DI_ROWS];
                for (int r = 0; r < CPU_DI_ROWS; r++) /* rows in a scrambled order, odd offsets */
                    ao[r] = ((r * 5) % 8) * (n * s + 11) + r % 3, bo[r] = r * (n * s + 11) + 1;
                /* a product +-B^2 at two features of a row, which cancel: what is left of the
                 * small terms added while B^2 was in the sum depends on the order of the adds */
                const float B = dt == FLASHC_F16 ? 0x1p15f : 0x1p20f;
                for (int r = 0; r < CPU_DI_ROWS && n > 2; r++) {
                    const int64_t d0 = (r * 3) % n, d1 = (d0 + 1 + r % (n - 1)) % n;
                    flashc__store(buf, dt, ao[r] + d0 * s, B);
                    flashc__store((void *)b, dt, bo[r] + d0 * s, B);
                    flashc__store(buf, dt, ao[r] + d1 * s, B);
                    flashc__store((void *)b, dt, bo[r] + d1 * s, -B);
                }
                float want[CPU_DI_ROWS], got[CPU_DI_ROWS];
                cpu_di_rows_scalar(a, ao, s, b, bo, s, n, dt, want);
                t->di_rows(a, ao, s, b, bo, s, n, dt, got);
                for (int r = 0; r < CPU_DI_ROWS; r++)
                    if (memcmp(&want[r], &got[r], sizeof(float)) != 0) {
                        print_error("di_rows [%s] dt %d n %lld stride %lld row %d: %a, want %a\n",
                                    t->name, (int)dt, (long long)n, (long long)s, r,
                                    (double)got[r], (double)want[r]);
                        fail();
                    }
                free(x), free(buf);
                cases++;
            }
    printf("  di_rows: %s, %d cases\n", t->name, cases);
}

static void test_di_rows(void **state)
{
    (void)state;
    for_each_isa("di_rows", di_rows_all);
}

/* The dispatcher: the automatic choice is one of the runnable tables, and forcing works. */
static void test_dispatch(void **state)
{
    (void)state;
    const cpu_kernels *best = cpu_kernels_get();
    assert_non_null(best);
    assert_ptr_equal(cpu_kernels_by_name(best->name), best);
    /* FLASHC_ISA naming a runnable table selects exactly it (ctest runs this file under each) */
    const char *env = getenv("FLASHC_ISA");
    if (env && cpu_kernels_by_name(env))
        assert_ptr_equal(best, cpu_kernels_by_name(env));
    assert_null(cpu_kernels_by_name("no-such-isa"));
#if defined(__x86_64__)
    /* Unforced, a CPU with AVX-512 but no usable AMX takes avx512bf16 (vdpbf16ps) on AMD, where
     * it runs at the FMA's rate, and avx512 (the float32 path) on Intel (dispatch.c) */
    if (!(env && cpu_kernels_by_name(env)) && cpu_kernels_by_name("avx512") &&
        !cpu_kernels_by_name("amx")) {
        unsigned a, b, c, d;
        const int amd = __get_cpuid(0, &a, &b, &c, &d) && b == 0x68747541u; /* "Auth" */
        assert_string_equal(best->name, amd ? "avx512bf16" : "avx512");
    }
#endif
    cpu_kernels_force(&cpu_kernels_scalar);
    assert_ptr_equal(cpu_kernels_get(), &cpu_kernels_scalar);
    cpu_kernels_force(NULL);
    assert_ptr_equal(cpu_kernels_get(), best);
    printf("  dispatch: %s in use (FLASHC_ISA=%s); build info: %s\n", best->name,
           getenv("FLASHC_ISA") ? getenv("FLASHC_ISA") : "unset", flashc_build_info());
}

int main(void)
{
    tu_seed_from_env(); /* FLASHC_TEST_SEED replays a failure (common.c prints the seed) */
    rng_state = tu_seed() * 2654435761u + 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dispatch), cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_qk_pv),    cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_exp),      cmocka_unit_test(test_convert),
        cmocka_unit_test(test_rows),     cmocka_unit_test(test_silu16),
        cmocka_unit_test(test_mm_bf16),  cmocka_unit_test(test_mm_softmax),
        cmocka_unit_test(test_mm_split),   cmocka_unit_test(test_mm_transpose),
        cmocka_unit_test(test_di_rows),
        cmocka_unit_test(test_mm_p_ds),
        cmocka_unit_test(test_mm_p_ds_split),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
