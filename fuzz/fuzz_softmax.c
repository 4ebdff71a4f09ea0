/*
 * fuzz_softmax.c — flashc_online_softmax, flashc_softmax_state_init and _merge. The input is
 * a stream of floats, a split point, NULL / negative / huge n and NULL states now and then.
 * Oracle: a refusal leaves the state as it was and x untouched; an accepted pass gives the
 * float64 max and sum (relative 1e-5 per element), and any split merged gives the same.
 */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz f = {data, size};
    const int specials = fz_one_in(&f, 4);
    const int64_t n = fz_range(&f, 0, 200);
    float *x = malloc((size_t)(n ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        x[i] = fz_value(&f, specials);
    if (fz_one_in(&f, 4)) /* masked entries */
        for (int64_t i = 0; i < n; i++)
            if (fz_one_in(&f, 3))
                x[i] = -INFINITY;
    float *snap = malloc((size_t)(n ? n : 1) * sizeof(float));
    memcpy(snap, x, (size_t)n * sizeof(float));
    const uint8_t mode = fz_u8(&f);
    int64_t pass_n = n;
    const float *px = x;
    if (mode == 1)
        pass_n = -fz_range(&f, 1, 5);
    else if (mode == 2)
        pass_n = FZ_HUGE[fz_range(&f, 0, 2)];
    else if (mode == 3)
        px = NULL;
    else if (mode == 4 && n > 0)
        px = (const float *)((const char *)x + 1); /* misaligned */
    flashc_softmax_state s0 = flashc_softmax_state_init(), s = s0;
    if (!(s0.m == -INFINITY && s0.l == 0.0f))
        fz_die("init is not the empty state", NULL);
    if (fz_one_in(&f, 8)) { /* a prior state */
        s.m = fz_value(&f, specials), s.l = fabsf(fz_value(&f, 0)) + 1.0f;
    }
    const flashc_softmax_state before = s;
    const flashc_status st = flashc_online_softmax(mode == 5 ? NULL : &s, px, pass_n);
    if ((unsigned)st >= FLASHC_STATUS_COUNT)
        fz_die("status out of range", NULL);
    if (memcmp(x, snap, (size_t)n * sizeof(float)) != 0)
        fz_die("x modified", NULL);
    if (st != FLASHC_OK) {
        if (memcmp(&s, &before, sizeof s) != 0)
            fz_die("state changed by a refused call", NULL);
        if (!flashc_last_error()[0])
            fz_die("a refusal without a message", NULL);
    } else if (px == x && pass_n == n && before.m == -INFINITY && before.l == 0.0f) {
        double m = -INFINITY, l = 0.0;
        int finite = 1;
        for (int64_t i = 0; i < n; i++) {
            finite &= isfinite(x[i]) || x[i] == -INFINITY;
            m = fmax(m, (double)x[i]);
        }
        for (int64_t i = 0; i < n && m != -INFINITY; i++)
            l += exp((double)x[i] - m);
        if (finite) {
            if ((float)m != s.m || !(fabs(s.l - l) <= 1e-5 * (double)(n + 1) * l + 1e-30)) {
                char msg[160];
                snprintf(msg, sizeof msg, "m %g l %g, want %g %g", (double)s.m, (double)s.l, m, l);
                fz_die("online softmax differs from float64", msg);
            }
            /* any split, merged (either order), gives the same state */
            const int64_t c = n ? fz_range(&f, 0, n) : 0;
            flashc_softmax_state a = s0, b = s0;
            if (flashc_online_softmax(&a, x, c) != FLASHC_OK ||
                flashc_online_softmax(&b, x + c, n - c) != FLASHC_OK)
                fz_die("a split was refused", NULL);
            const flashc_softmax_state ab = flashc_softmax_state_merge(a, b),
                                       ba = flashc_softmax_state_merge(b, a);
            if (ab.m != s.m || ba.m != s.m ||
                !(fabs(ab.l - l) <= 1e-5 * (double)(n + 1) * l + 1e-30) ||
                !(fabs(ba.l - l) <= 1e-5 * (double)(n + 1) * l + 1e-30))
                fz_die("merged split differs", NULL);
        }
    }
    free(x), free(snap);
    return 0;
}
