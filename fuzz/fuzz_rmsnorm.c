/*
 * fuzz_rmsnorm.c — flashc_rmsnorm, flashc_rmsnorm_naive, flashc_rmsnorm_residual and
 * flashc_rmsnorm_residual_naive. Descriptors x (T, D), residual (T, D), w (D), y (T, D) and an
 * eps (NaN, negative, huge now and then). The fused path runs on the decoded buffers, the naive
 * on twins of the outputs (the residual's x is an output: written back); when both accept
 * with finite inputs, y (and the new x) agree within the dtype's rounding.
 */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz f = {data, size};
    const flashc_dtype dt = fz_dtype(&f);
    const int64_t T = fz_range(&f, 1, 9), D = fz_range(&f, 1, fz_one_in(&f, 4) ? 300 : 40);
    const int residual = fz_u8(&f) & 1;
    static const float epss[8] = {1e-6f, 1e-5f, 0.0f, 0.1f, -1e-6f, NAN, INFINITY, 1e30f};
    const float eps = epss[fz_u8(&f) % 8];
    const int64_t shx[2] = {T, D}, shw[1] = {D};
    fz_tensor x, r, w, y, x2, y2;
    fz_decode(&f, &x, 2, shx, dt, residual);
    if (residual) /* x is read and written: fill it like an input */
        for (size_t b = 0; b < x.bytes; b++)
            x.base[b] = fz_u8(&f) & 0x3f; /* small positive bf16/f16/f32 bit patterns */
    fz_decode(&f, &r, 2, shx, dt, 0);
    fz_decode(&f, &w, 1, shw, dt, 0);
    fz_decode(&f, &y, 2, shx, dt, 1);
    if (fz_one_in(&f, 24))
        fz_alias(&f, &y, fz_one_in(&f, 2) ? &w : &x);
    if (residual && fz_one_in(&f, 24))
        fz_alias(&f, &x, &r);
    fz_set s = {{&x, &r, &w, &y}, 4};
    fz_snapshot(&s);
    fz_current = &s;
    const int aliased = !x.owns || !y.owns;
    const flashc_status got =
        residual ? flashc_rmsnorm_residual(fz_out(&x), fz_arg(&r), fz_arg(&w), eps, fz_out(&y))
                 : flashc_rmsnorm(fz_arg(&x), fz_arg(&w), eps, fz_out(&y));
    fz_check(residual ? "flashc_rmsnorm_residual" : "flashc_rmsnorm", &s, got);
    fz_set s2 = s;
    if (!aliased) {
        fz_make_twin(&y, &y2);
        s2.t[3] = &y2;
        if (residual) {
            fz_make_twin(&x, &x2);
            s2.t[0] = &x2;
        }
    } else {
        fz_restore(&s);
    }
    fz_tensor *xa = aliased || !residual ? &x : &x2, *ya = aliased ? &y : &y2;
    const flashc_status gn =
        residual ? flashc_rmsnorm_residual_naive(fz_out(xa), fz_arg(&r), fz_arg(&w), eps, fz_out(ya))
                 : flashc_rmsnorm_naive(fz_arg(&x), fz_arg(&w), eps, fz_out(ya));
    fz_check(residual ? "flashc_rmsnorm_residual_naive" : "flashc_rmsnorm_naive", &s2, gn);
    if (!aliased && got == FLASHC_OK && gn == FLASHC_OK && (!residual || fz_finite(&r)) &&
        fz_finite(&w)) {
        /* x after the call: the residual sum, identical in both (one rounding of x + r) */
        if (residual)
            fz_compare("x (residual stream)", &x, x2.t.data, 0.0);
        if (fz_finite(&x) && fz_maxabs(&x) < 1e30 && fz_maxabs(&w) < 1e30)
            /* y = x * rstd * w, |x * rstd| <= sqrt(D): float32 sums vs float64, then one
             * rounding to dt each (a 16-bit y may round either way: two ulps) */
            fz_compare("y", &y, y2.t.data,
                       (4.0 * fz_eps_set(&s, dt) + 1e-5) * sqrt((double)D) * (1.0 + fz_maxabs(&w)));
    }
    fz_current = NULL;
    if (!aliased) {
        free(y2.base), free(y2.snap);
        if (residual)
            free(x2.base), free(x2.snap);
    }
    fz_free(&s);
    return 0;
}
