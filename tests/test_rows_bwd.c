/* test_rows_bwd.c — RMSNorm and SwiGLU backwards.
 *   1. The float64 references (the *_naive entry points) against central differences of an
 *      independent float64 forward written here (loss = sum(dy * y)): the formulas themselves.
 *   2. The fused backwards against the references: float32 within 1e-5 (1 + |ref|); bfloat16 and
 *      float16 by FlashAttention's rule, at most 2x the error of a naive same-precision backward
 *      (every elementwise op rounded to the storage type, sums in float32), both against the
 *      reference on the same rounded inputs. Strided rows, the residual gradient, dw
 *      bit-identical for 1 and 2 threads. */
#include "common.h"
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static float rnd(flashc_dtype dt, float x)
{
    float h; /* room for any dtype */
    if (dt == FLASHC_F32)
        return x;
    flashc__store(&h, dt, 0, x);
    return flashc__load(&h, dt, 0);
}

static void *alloc_typed(int64_t n, flashc_dtype dt)
{
    void *p = malloc((size_t)(n > 0 ? n : 1) * flashc_dtype_size(dt));
    assert_non_null(p);
    return p;
}

/* ---- 1. formulas vs finite differences ----------------------------------------------------- */

static double rms_loss(const double *x, const double *w, const double *dy, int64_t T, int64_t D,
                       double eps)
{
    double L = 0.0;
    for (int64_t t = 0; t < T; t++) {
        double ss = 0.0;
        for (int64_t d = 0; d < D; d++)
            ss += x[t * D + d] * x[t * D + d];
        const double r = 1.0 / sqrt(ss / (double)D + eps);
        for (int64_t d = 0; d < D; d++)
            L += dy[t * D + d] * x[t * D + d] * r * w[d];
    }
    return L;
}

static void test_rmsnorm_bwd_formula(void **state)
{
    (void)state;
    enum { T = 3, D = 7 };
    float x[T * D], w[D], dy[T * D], dx[T * D], dw[D];
    double xd[T * D], wd[D], dyd[T * D];
    tu_fill_normal(x, T * D, 1), tu_fill_normal(w, D, 1), tu_fill_normal(dy, T * D, 1);
    for (int i = 0; i < T * D; i++)
        xd[i] = x[i], dyd[i] = dy[i];
    for (int i = 0; i < D; i++)
        wd[i] = w[i];
    flashc_tensor tx = flashc_tensor_2d(x, FLASHC_F32, T, D), tw = flashc_tensor_1d(w, FLASHC_F32, D);
    flashc_tensor tdy = flashc_tensor_2d(dy, FLASHC_F32, T, D), tdx = flashc_tensor_2d(dx, FLASHC_F32, T, D);
    flashc_tensor tdw = flashc_tensor_1d(dw, FLASHC_F32, D);
    TU_OK(flashc_rmsnorm_bwd_naive(&tx, &tw, &tdy, NULL, 1e-3f, &tdx, &tdw));
    const double h = 1e-6, eps = (double)1e-3f;
    for (int i = 0; i < T * D; i++) {
        const double x0 = xd[i];
        xd[i] = x0 + h;
        const double lp = rms_loss(xd, wd, dyd, T, D, eps);
        xd[i] = x0 - h;
        const double lm = rms_loss(xd, wd, dyd, T, D, eps);
        xd[i] = x0;
        assert_float_equal(dx[i], (lp - lm) / (2 * h), 1e-5 * (1 + fabs(dx[i])));
    }
    for (int i = 0; i < D; i++) {
        const double w0 = wd[i];
        wd[i] = w0 + h;
        const double lp = rms_loss(xd, wd, dyd, T, D, eps);
        wd[i] = w0 - h;
        const double lm = rms_loss(xd, wd, dyd, T, D, eps);
        wd[i] = w0;
        assert_float_equal(dw[i], (lp - lm) / (2 * h), 1e-5 * (1 + fabs(dw[i])));
    }
}

static void test_swiglu_bwd_formula(void **state)
{
    (void)state;
    enum { T = 2, I = 9 };
    float gu[T * 2 * I], go[T * I], dgu[T * 2 * I];
    tu_fill_normal(gu, T * 2 * I, 3), tu_fill_normal(go, T * I, 1);
    flashc_tensor tg = flashc_tensor_2d(gu, FLASHC_F32, T, 2 * I), to = flashc_tensor_2d(go, FLASHC_F32, T, I);
    flashc_tensor td = flashc_tensor_2d(dgu, FLASHC_F32, T, 2 * I);
    TU_OK(flashc_swiglu_bwd_naive(&tg, &to, &td));
    const double h = 1e-6;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < I; i++) {
            const double g = gu[t * 2 * I + i], u = gu[t * 2 * I + I + i], o = go[t * I + i];
            const double f = o * ((g + h) / (1 + exp(-(g + h))) - (g - h) / (1 + exp(-(g - h)))) *
                             u / (2 * h);
            assert_float_equal(dgu[t * 2 * I + i], f, 1e-5 * (1 + fabs(f)));
            assert_float_equal(dgu[t * 2 * I + I + i], o * g / (1 + exp(-g)), 1e-5 * (1 + fabs(f)));
        }
}

/* ---- 2. fused vs reference ---------------------------------------------------------------- */

/* naive same-precision RMSNorm backward (a framework's autograd in dt): dx and dw as floats */
static void rms_bwd_lowp(flashc_dtype dt, const float *x, const float *w, const float *dy,
                         const float *dres, int64_t T, int64_t D, float eps, float *dx, float *dw)
{
    for (int64_t d = 0; d < D; d++)
        dw[d] = 0.0f;
    float *acc = calloc((size_t)D, sizeof(float));
    for (int64_t t = 0; t < T; t++) {
        const float *xr = x + t * D, *dr = dy + t * D;
        float ss = 0.0f, dot = 0.0f;
        for (int64_t d = 0; d < D; d++)
            ss += rnd(dt, xr[d] * xr[d]);
        const float rstd = rnd(dt, 1.0f / sqrtf(rnd(dt, ss / (float)D) + eps));
        for (int64_t d = 0; d < D; d++)
            dot += rnd(dt, rnd(dt, dr[d] * w[d]) * rnd(dt, xr[d] * rstd));
        const float m = rnd(dt, dot / (float)D);
        for (int64_t d = 0; d < D; d++) {
            const float xh = rnd(dt, xr[d] * rstd), g = rnd(dt, dr[d] * w[d]);
            float v = rnd(dt, rstd * rnd(dt, g - rnd(dt, xh * m)));
            if (dres)
                v = rnd(dt, v + dres[t * D + d]);
            dx[t * D + d] = v;
            acc[d] += rnd(dt, dr[d] * xh);
        }
    }
    for (int64_t d = 0; d < D; d++)
        dw[d] = rnd(dt, acc[d]);
    free(acc);
}

static double max_err(const float *got, const float *ref, int64_t n, int rel)
{
    double e = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double d = fabs((double)got[i] - ref[i]) / (rel ? 1.0 + fabs(ref[i]) : 1.0);
        if (!(d <= e))
            e = d;
    }
    return e;
}

/* typed (T, D) buffer with row stride ld, from floats; and back */
static void *to_typed(const float *src, flashc_dtype dt, int64_t T, int64_t D, int64_t ld)
{
    void *p = alloc_typed(T * ld, dt);
    for (int64_t i = 0; i < T * ld; i++)
        flashc__store(p, dt, i, NAN);
    for (int64_t t = 0; t < T; t++)
        for (int64_t d = 0; d < D; d++)
            flashc__store(p, dt, t * ld + d, src[t * D + d]);
    return p;
}

static void from_typed(const void *p, flashc_dtype dt, int64_t T, int64_t D, int64_t ld, float *dst)
{
    for (int64_t t = 0; t < T; t++)
        for (int64_t d = 0; d < D; d++)
            dst[t * D + d] = flashc__load(p, dt, t * ld + d);
}

static void rms_case(flashc_dtype dt, int64_t T, int64_t D, int64_t ld, int res)
{
    const int64_t n = T * D;
    float *x = tu_alloc_normal(n, 1), *w = tu_alloc_normal(D, 1), *dy = tu_alloc_normal(n, 1);
    float *dr = tu_alloc_normal(n, 1);
    for (int64_t i = 0; i < n; i++)
        x[i] = rnd(dt, x[i]), dy[i] = rnd(dt, dy[i]), dr[i] = rnd(dt, dr[i]);
    for (int64_t i = 0; i < D; i++)
        w[i] = rnd(dt, w[i]);
    /* the reference in float32 storage on the same values */
    float *dxr = tu_poisoned(n), *dwr = tu_poisoned(D);
    flashc_tensor fx = flashc_tensor_2d(x, FLASHC_F32, T, D), fw = flashc_tensor_1d(w, FLASHC_F32, D);
    flashc_tensor fdy = flashc_tensor_2d(dy, FLASHC_F32, T, D), fdr = flashc_tensor_2d(dr, FLASHC_F32, T, D);
    flashc_tensor fdx = flashc_tensor_2d(dxr, FLASHC_F32, T, D), fdw = flashc_tensor_1d(dwr, FLASHC_F32, D);
    TU_OK(flashc_rmsnorm_bwd_naive(&fx, &fw, &fdy, res ? &fdr : NULL, 1e-5f, &fdx, &fdw));
    /* the fused backward in dt, strided rows */
    void *tx = to_typed(x, dt, T, D, ld), *tdy = to_typed(dy, dt, T, D, ld), *tdr = to_typed(dr, dt, T, D, D);
    void *tw = to_typed(w, dt, 1, D, D), *tdx = to_typed(dxr, dt, T, D, ld), *tdw = to_typed(dwr, dt, 1, D, D);
    flashc_tensor vx = flashc_tensor_2d(tx, dt, T, D), vdy = flashc_tensor_2d(tdy, dt, T, D);
    flashc_tensor vdx = flashc_tensor_2d(tdx, dt, T, D), vdr = flashc_tensor_2d(tdr, dt, T, D);
    flashc_tensor vw = flashc_tensor_1d(tw, dt, D), vdw = flashc_tensor_1d(tdw, dt, D);
    vx.stride[0] = vdy.stride[0] = vdx.stride[0] = ld;
    for (int64_t i = 0; i < T * ld; i++)
        flashc__store(tdx, dt, i, NAN);
    flashc_set_num_threads(1);
    TU_OK(flashc_rmsnorm_bwd(&vx, &vw, &vdy, res ? &vdr : NULL, 1e-5f, &vdx, &vdw));
    float *dw1 = malloc(D * sizeof(float));
    from_typed(tdw, dt, 1, D, D, dw1);
    flashc_set_num_threads(2);
    TU_OK(flashc_rmsnorm_bwd(&vx, &vw, &vdy, res ? &vdr : NULL, 1e-5f, &vdx, &vdw));
    flashc_set_num_threads(0);
    float *dx = malloc(n * sizeof(float)), *dw = malloc(D * sizeof(float));
    from_typed(tdx, dt, T, D, ld, dx), from_typed(tdw, dt, 1, D, D, dw);
    assert_memory_equal(dw, dw1, D * sizeof(float)); /* deterministic */
    for (int64_t t = 0; t < T; t++) /* the gaps between strided rows are untouched */
        for (int64_t d = D; d < ld; d++)
            assert_true(isnan(flashc__load(tdx, dt, t * ld + d)));
    const double ex = max_err(dx, dxr, n, 1), ew = max_err(dw, dwr, D, 1);
    if (dt == FLASHC_F32) {
        /* dw is a float32 sum over T rows: its bound grows with T */
        const double tw = 1e-5 * (1.0 + (double)T / 100.0);
        if (!(ex <= 1e-5 && ew <= tw))
            print_error("rmsnorm_bwd f32 T%lld D%lld: dx err %.3g dw err %.3g (tol %.3g)\n",
                        (long long)T, (long long)D, ex, ew, tw);
        assert_true(ex <= 1e-5 && ew <= tw);
    } else {
        float *nx = malloc(n * sizeof(float)), *nw = malloc(D * sizeof(float));
        rms_bwd_lowp(dt, x, w, dy, res ? dr : NULL, T, D, 1e-5f, nx, nw);
        const double nex = max_err(nx, dxr, n, 1), new_ = max_err(nw, dwr, D, 1);
        print_message("  rmsnorm_bwd dtype %d T%lld D%lld: dx %.3g (naive %.3g), dw %.3g (naive %.3g)\n",
                      (int)dt, (long long)T, (long long)D, ex, nex, ew, new_);
        assert_true(ex <= 2.0 * nex && ew <= 2.0 * new_);
        free(nx), free(nw);
    }
    free(x), free(w), free(dy), free(dr), free(dxr), free(dwr), free(tx), free(tdy), free(tdr);
    free(tw), free(tdx), free(tdw), free(dw1), free(dx), free(dw);
}

static void test_rmsnorm_bwd(void **state)
{
    (void)state;
    const flashc_dtype dts[3] = {FLASHC_F32, FLASHC_BF16, FLASHC_F16};
    for (int di = 0; di < 3; di++) {
        rms_case(dts[di], 300, 1024, 1024, 0);
        rms_case(dts[di], 77, 333, 340, 1);
        rms_case(dts[di], 1, 5, 5, 1);
    }
}

static void swiglu_case(flashc_dtype dt, int64_t T, int64_t I, int64_t ld)
{
    float *gu = tu_alloc_normal(T * 2 * I, 3), *go = tu_alloc_normal(T * I, 1);
    for (int64_t i = 0; i < T * 2 * I; i++)
        gu[i] = rnd(dt, gu[i]);
    for (int64_t i = 0; i < T * I; i++)
        go[i] = rnd(dt, go[i]);
    gu[0] = rnd(dt, -100.0f), gu[1] = rnd(dt, 100.0f); /* saturated gates: no NaN */
    float *ref = tu_poisoned(T * 2 * I);
    flashc_tensor fg = flashc_tensor_2d(gu, FLASHC_F32, T, 2 * I), fo = flashc_tensor_2d(go, FLASHC_F32, T, I);
    flashc_tensor fr = flashc_tensor_2d(ref, FLASHC_F32, T, 2 * I);
    TU_OK(flashc_swiglu_bwd_naive(&fg, &fo, &fr));
    void *tg = to_typed(gu, dt, T, 2 * I, ld), *to = to_typed(go, dt, T, I, I);
    void *td = to_typed(ref, dt, T, 2 * I, ld);
    for (int64_t i = 0; i < T * ld; i++)
        flashc__store(td, dt, i, NAN);
    flashc_tensor vg = flashc_tensor_2d(tg, dt, T, 2 * I), vo = flashc_tensor_2d(to, dt, T, I);
    flashc_tensor vd = flashc_tensor_2d(td, dt, T, 2 * I);
    vg.stride[0] = vd.stride[0] = ld;
    TU_OK(flashc_swiglu_bwd(&vg, &vo, &vd));
    float *got = malloc(T * 2 * I * sizeof(float));
    from_typed(td, dt, T, 2 * I, ld, got);
    const double e = max_err(got, ref, T * 2 * I, 1);
    if (dt == FLASHC_F32) {
        if (!(e <= 1e-5))
            print_error("swiglu_bwd f32: err %.3g\n", e);
        assert_true(e <= 1e-5);
    } else {
        float *nv = malloc(T * 2 * I * sizeof(float));
        for (int64_t t = 0; t < T; t++)
            for (int64_t i = 0; i < I; i++) {
                const float g = gu[t * 2 * I + i], u = gu[t * 2 * I + I + i], o = go[t * I + i];
                const float s = rnd(dt, 1.0f / (1.0f + expf(-g)));
                const float dsilu = rnd(dt, s * rnd(dt, 1.0f + rnd(dt, g * rnd(dt, 1.0f - s))));
                nv[t * 2 * I + i] = rnd(dt, rnd(dt, o * u) * dsilu);
                nv[t * 2 * I + I + i] = rnd(dt, o * rnd(dt, g * s));
            }
        const double en = max_err(nv, ref, T * 2 * I, 1);
        print_message("  swiglu_bwd dtype %d: err %.3g (naive %.3g)\n", (int)dt, e, en);
        assert_true(e <= 2.0 * en);
        free(nv);
    }
    free(gu), free(go), free(ref), free(tg), free(to), free(td), free(got);
}

static void test_swiglu_bwd(void **state)
{
    (void)state;
    const flashc_dtype dts[3] = {FLASHC_F32, FLASHC_BF16, FLASHC_F16};
    for (int di = 0; di < 3; di++) {
        swiglu_case(dts[di], 129, 771, 2 * 771 + 10);
        swiglu_case(dts[di], 1, 1, 2);
    }
}

static void test_bwd_bad_input(void **state)
{
    (void)state;
    enum { T = 4, D = 8 };
    float x[T * D], w[D], dy[T * D], dx[T * D], dw[D], dx0[T * D];
    tu_fill_normal(x, T * D, 1), tu_fill_normal(w, D, 1), tu_fill_normal(dy, T * D, 1);
    memcpy(dx0, dx, sizeof dx);
    flashc_tensor tx = flashc_tensor_2d(x, FLASHC_F32, T, D), tw = flashc_tensor_1d(w, FLASHC_F32, D);
    flashc_tensor tdy = flashc_tensor_2d(dy, FLASHC_F32, T, D), tdx = flashc_tensor_2d(dx, FLASHC_F32, T, D);
    flashc_tensor tdw = flashc_tensor_1d(dw, FLASHC_F32, D);
    flashc_tensor bad = tdw;
    bad.shape[0] = D - 1;
    assert_int_equal(flashc_rmsnorm_bwd(&tx, &tw, &tdy, NULL, 1e-6f, &tdx, &bad), FLASHC_ERR_DIM_MISMATCH);
    assert_int_equal(flashc_rmsnorm_bwd(&tx, &tw, &tdy, NULL, -1.0f, &tdx, &tdw), FLASHC_ERR_INVALID_ARGUMENT);
    assert_int_equal(flashc_rmsnorm_bwd(&tx, &tw, &tdy, NULL, 1e-6f, &tx, &tdw), FLASHC_ERR_OVERLAP);
    bad = tdy, bad.dtype = FLASHC_BF16;
    assert_int_equal(flashc_rmsnorm_bwd(&tx, &tw, &bad, NULL, 1e-6f, &tdx, &tdw), FLASHC_ERR_DTYPE_MISMATCH);
    assert_memory_equal(dx, dx0, sizeof dx);
    flashc_tensor tg = flashc_tensor_2d(x, FLASHC_F32, T, D), to = flashc_tensor_2d(dy, FLASHC_F32, T, D / 2);
    flashc_tensor td = flashc_tensor_2d(dx, FLASHC_F32, T, D);
    bad = tg, bad.shape[1] = D - 1;
    assert_int_equal(flashc_swiglu_bwd(&bad, &to, &td), FLASHC_ERR_INVALID_SHAPE);
    assert_int_equal(flashc_swiglu_bwd(&tg, &to, &tg), FLASHC_ERR_OVERLAP);
    assert_memory_equal(dx, dx0, sizeof dx);
    TU_OK(flashc_swiglu_bwd(&tg, &to, &td));
}

int main(void)
{
    tu_seed_from_env();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rmsnorm_bwd_formula), cmocka_unit_test(test_swiglu_bwd_formula),
        cmocka_unit_test(test_rmsnorm_bwd),         cmocka_unit_test(test_swiglu_bwd),
        cmocka_unit_test(test_bwd_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
