/*
 * fuzz_swiglu.c — flashc_swiglu and flashc_swiglu_naive: gate_up (T, 2I) and out (T, I)
 * descriptors; the fused path against the naive on twins of out, within the dtype's rounding
 * when both accept finite inputs.
 */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz f = {data, size};
    const flashc_dtype dt = fz_dtype(&f);
    const int64_t T = fz_range(&f, 1, 9), I = fz_range(&f, 1, fz_one_in(&f, 4) ? 200 : 30);
    const int64_t shg[2] = {T, 2 * I + (fz_one_in(&f, 16) ? 1 : 0)}, sho[2] = {T, I};
    fz_tensor gu, out, out2;
    fz_decode(&f, &gu, 2, shg, dt, 0);
    fz_decode(&f, &out, 2, sho, dt, 1);
    if (fz_one_in(&f, 16))
        fz_alias(&f, &out, &gu);
    fz_set s = {{&gu, &out}, 2};
    fz_snapshot(&s);
    fz_current = &s;
    const int aliased = !out.owns;
    const flashc_status got = flashc_swiglu(fz_arg(&gu), fz_out(&out));
    fz_check("flashc_swiglu", &s, got);
    fz_set s2 = s;
    if (!aliased) {
        fz_make_twin(&out, &out2);
        s2.t[1] = &out2;
    } else {
        fz_restore(&s);
    }
    const flashc_status gn = flashc_swiglu_naive(fz_arg(&gu), fz_out(aliased ? &out : &out2));
    fz_check("flashc_swiglu_naive", &s2, gn);
    if (got != gn && got != FLASHC_ERR_OUT_OF_MEMORY && gn != FLASHC_ERR_OUT_OF_MEMORY)
        fz_die("swiglu and swiglu_naive validate differently", NULL);
    if (!aliased && got == FLASHC_OK && gn == FLASHC_OK && fz_finite(&gu) && fz_maxabs(&gu) < 1e15) {
        const double m = fz_maxabs(&gu);
        fz_compare("out", &out, out2.t.data, (4.0 * fz_eps_set(&s, dt) + 4e-6) * (1.0 + m * m));
    }
    fz_current = NULL;
    if (!aliased)
        free(out2.base), free(out2.snap);
    fz_free(&s);
    return 0;
}
