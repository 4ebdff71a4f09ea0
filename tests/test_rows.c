/* test_rows.c — fused RMSNorm (plain and residual) and SwiGLU against the naive versions and
 * float64 formulas: the seeds' task 07.1 checklist. */
#include "common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* max |y - ref| / max(1, |ref|) against the float64 formula */
static double rms_ref64(const float *x, const float *w, int64_t T, int64_t D, float eps,
                        const float *y)
{
    double err = 0.0;
    for (int64_t t = 0; t < T; t++) {
        double ss = 0.0;
        for (int64_t d = 0; d < D; d++)
            ss += (double)x[t * D + d] * x[t * D + d];
        double r = 1.0 / sqrt(ss / (double)D + (double)eps);
        for (int64_t d = 0; d < D; d++) {
            double ref = (double)x[t * D + d] * r * (double)w[d];
            double e = fabs((double)y[t * D + d] - ref) / fmax(1.0, fabs(ref));
            err = isnan(e) ? INFINITY : fmax(err, e);
        }
    }
    return err;
}

/* T = 4096, D = 512, x, w ~ N(0, 1): max |diff| < 1e-5 against the reference. */
static void test_rmsnorm_seed(void **state)
{
    (void)state;
    const int64_t T = 4096, D = 512, n = T * D;
    float *x = tu_alloc_normal(n, 1), *w = tu_alloc_normal(D, 1), *x0 = tu_copy(x, n);
    float *y = tu_poisoned(n), *yn = tu_poisoned(n);
    flashc_tensor tx = flashc_tensor_2d(x, FLASHC_F32, T, D), tw = flashc_tensor_1d(w, FLASHC_F32, D);
    flashc_tensor ty = flashc_tensor_2d(y, FLASHC_F32, T, D), tyn = flashc_tensor_2d(yn, FLASHC_F32, T, D);
    TU_OK(flashc_rmsnorm(&tx, &tw, 1e-6f, &ty));
    TU_OK(flashc_rmsnorm_naive(&tx, &tw, 1e-6f, &tyn));
    double e_naive = tu_max_abs_diff(y, yn, n), e64 = rms_ref64(x, w, T, D, 1e-6f, y);
    print_message("  rmsnorm 4096x512: |fused-naive| %.2e |fused-fp64| %.2e\n", e_naive, e64);
    assert_true(e_naive < 1e-5);
    assert_true(e64 < 1e-5);
    assert_memory_equal(x, x0, n * sizeof *x);
    free(x), free(w), free(x0), free(y), free(yn);
}

static void test_rmsnorm_edges(void **state)
{
    (void)state;
    const int64_t T = 3, D = 1000, n = T * D;
    float *x = calloc(n, sizeof *x), *w = tu_alloc_normal(D, 1), *y = tu_poisoned(n);
    flashc_tensor tx = flashc_tensor_2d(x, FLASHC_F32, T, D), tw = flashc_tensor_1d(w, FLASHC_F32, D);
    flashc_tensor ty = flashc_tensor_2d(y, FLASHC_F32, T, D);
    /* zeros -> zeros, no division by zero */
    TU_OK(flashc_rmsnorm(&tx, &tw, 1e-6f, &ty));
    for (int64_t i = 0; i < n; i++)
        assert_true(y[i] == 0.0f);
    /* one large component: 1e3 squared is 1e6, no overflow */
    tu_fill_normal(x, n, 1);
    x[0] = 1e3f;
    TU_OK(flashc_rmsnorm(&tx, &tw, 1e-6f, &ty));
    assert_false(tu_has_nan(y, n));
    assert_true(rms_ref64(x, w, T, D, 1e-6f, y) < 1e-5);
    /* w = 1: every output row has unit RMS (eps is negligible here) */
    for (int64_t d = 0; d < D; d++)
        w[d] = 1.0f;
    TU_OK(flashc_rmsnorm(&tx, &tw, 1e-6f, &ty));
    for (int64_t t = 0; t < T; t++) {
        double ss = 0.0;
        for (int64_t d = 0; d < D; d++)
            ss += (double)y[t * D + d] * y[t * D + d];
        assert_float_equal(sqrt(ss / D), 1.0, 1e-4);
    }
    /* eps inside the root, mean over D: a constant row c gives c / sqrt(c^2 + eps) */
    for (int64_t d = 0; d < D; d++)
        x[d] = 0.01f;
    TU_OK(flashc_rmsnorm(&tx, &tw, 1e-3f, &ty));
    assert_float_equal(y[0], 0.01 / sqrt(1e-4 + 1e-3), 1e-6);
    free(x), free(w), free(y);
}

/* Strided rows (a view into a wider buffer) and the residual variant. */
static void test_rmsnorm_residual(void **state)
{
    (void)state;
    const int64_t T = 37, D = 300, ld = 320, n = T * ld;
    float *x = tu_alloc_normal(n, 1), *r = tu_alloc_normal(T * D, 1), *w = tu_alloc_normal(D, 1);
    float *xn = tu_copy(x, n), *x0 = tu_copy(x, n), *r0 = tu_copy(r, T * D);
    float *y = tu_poisoned(T * D), *yn = tu_poisoned(T * D);
    flashc_tensor tx = flashc_tensor_2d(x, FLASHC_F32, T, D);
    tx.stride[0] = ld;
    flashc_tensor txn = tx;
    txn.data = xn;
    flashc_tensor tr = flashc_tensor_2d(r, FLASHC_F32, T, D), tw = flashc_tensor_1d(w, FLASHC_F32, D);
    flashc_tensor ty = flashc_tensor_2d(y, FLASHC_F32, T, D), tyn = flashc_tensor_2d(yn, FLASHC_F32, T, D);
    TU_OK(flashc_rmsnorm_residual(&tx, &tr, &tw, 1e-5f, &ty));
    TU_OK(flashc_rmsnorm_residual_naive(&txn, &tr, &tw, 1e-5f, &tyn));
    /* x now holds x0 + r inside the view, and is untouched outside it */
    for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < ld; c++) {
            float want = c < D ? x0[t * ld + c] + r[t * D + c] : x0[t * ld + c];
            assert_true(x[t * ld + c] == want);
        }
    assert_memory_equal(x, xn, n * sizeof *x);
    assert_memory_equal(r, r0, T * D * sizeof *r);
    assert_true(tu_max_abs_diff(y, yn, T * D) < 1e-5);
    /* y is the RMSNorm of the updated x */
    float *xs = malloc(T * D * sizeof *xs);
    for (int64_t t = 0; t < T; t++)
        memcpy(xs + t * D, x + t * ld, D * sizeof *xs);
    assert_true(rms_ref64(xs, w, T, D, 1e-5f, y) < 1e-5);
    free(x), free(r), free(w), free(xn), free(x0), free(r0), free(y), free(yn), free(xs);
}

static void test_swiglu(void **state)
{
    (void)state;
    const int64_t T = 129, I = 3072 / 4 + 3;
    float *gu = tu_alloc_normal(T * 2 * I, 3), *gu0 = tu_copy(gu, T * 2 * I);
    float *o = tu_poisoned(T * I), *on = tu_poisoned(T * I);
    flashc_tensor tg = flashc_tensor_2d(gu, FLASHC_F32, T, 2 * I);
    flashc_tensor to = flashc_tensor_2d(o, FLASHC_F32, T, I), ton = flashc_tensor_2d(on, FLASHC_F32, T, I);
    TU_OK(flashc_swiglu(&tg, &to));
    TU_OK(flashc_swiglu_naive(&tg, &ton));
    double e64 = 0.0;
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < I; i++) {
            double g = gu[t * 2 * I + i], u = gu[t * 2 * I + I + i];
            e64 = fmax(e64, fabs(o[t * I + i] - g / (1.0 + exp(-g)) * u) / fmax(1.0, fabs(g * u)));
        }
    print_message("  swiglu: |fused-naive| %.2e  rel |fused-fp64| %.2e\n",
                  tu_max_abs_diff(o, on, T * I), e64);
    assert_false(tu_has_nan(o, T * I));
    assert_true(tu_max_abs_diff(o, on, T * I) < 1e-5 * 10);
    assert_true(e64 < 1e-6);
    assert_memory_equal(gu, gu0, T * 2 * I * sizeof *gu);
    /* extreme gates: silu(-100) = -0 (no NaN from exp overflow), silu(100) = 100 */
    float ext[4] = {-100.0f, 100.0f, 2.0f, 3.0f}, eo[2];
    flashc_tensor te = flashc_tensor_2d(ext, FLASHC_F32, 1, 4), teo = flashc_tensor_2d(eo, FLASHC_F32, 1, 2);
    TU_OK(flashc_swiglu(&te, &teo));
    assert_true(eo[0] == 0.0f && eo[1] == 300.0f);
    free(gu), free(gu0), free(o), free(on);
}

int main(void)
{
    tu_seed_from_env();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rmsnorm_seed),
        cmocka_unit_test(test_rmsnorm_edges),
        cmocka_unit_test(test_rmsnorm_residual),
        cmocka_unit_test(test_swiglu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
