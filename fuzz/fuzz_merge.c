/*
 * fuzz_merge.c — flashc_attn_merge. Six descriptors (o1, lse1, o2, lse2; o, lse optional).
 * Besides the common oracle: when the call accepts, o and lse equal a float64 evaluation of
 * the documented formula (o = w1 o1 + w2 o2, an LSE of -inf weighs nothing and its o is never
 * read; both -inf: o = 0, L = -inf), NaN in a state that counts giving NaN.
 */
#include "fuzz_common.h"

static double ld(const fz_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d)
{
    const flashc_tensor *v = &t->t;
    int64_t off = a * v->stride[0] + b * v->stride[1] + c * v->stride[2];
    if (v->ndim == 4)
        off += d * v->stride[3];
    return fz_load(v->data, v->dtype, off); /* o1, o2, o may be bf16 / f16 (the merge takes them) */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz f = {data, size};
    const int64_t B = fz_range(&f, 1, 2), S = fz_range(&f, 1, 9), H = fz_range(&f, 1, 3);
    const int64_t D = fz_range(&f, 1, 12);
    const flashc_dtype dt = fz_one_in(&f, 16) ? fz_dtype(&f) : FLASHC_F32;
    const int64_t sho[4] = {B, S, H, D}, shl[3] = {B, H, S};
    fz_tensor o1, l1, o2, l2, o, l;
    fz_decode(&f, &o1, 4, sho, dt, 0);
    fz_decode(&f, &l1, 3, shl, FLASHC_F32, 0);
    fz_decode(&f, &o2, 4, sho, dt, 0);
    fz_decode(&f, &l2, 3, shl, FLASHC_F32, 0);
    fz_decode(&f, &o, 4, sho, dt, 1);
    fz_decode(&f, &l, 3, shl, FLASHC_F32, 1);
    const int use_lse = !fz_one_in(&f, 4);
    l.output = use_lse;
    /* empty states (-inf) in the LSEs now and then, whatever the values drew */
    if (fz_one_in(&f, 2) && l2.count > 0 && l2.t.data && l2.t.dtype == FLASHC_F32) {
        const int64_t e = fz_range(&f, 0, l2.count - 1);
        float ninf = -INFINITY;
        memcpy((char *)l2.t.data + fz_offset_of(&l2.t, e) * 4, &ninf, 4);
    }
    if (fz_one_in(&f, 3) && l1.count > 0 && l1.t.data && l1.t.dtype == FLASHC_F32) {
        const int64_t e = fz_range(&f, 0, l1.count - 1);
        float ninf = -INFINITY;
        memcpy((char *)l1.t.data + fz_offset_of(&l1.t, e) * 4, &ninf, 4);
    }
    if (fz_one_in(&f, 24))
        fz_alias(&f, &o, fz_one_in(&f, 2) ? &o1 : &l2);
    if (fz_one_in(&f, 24))
        fz_alias(&f, &l, fz_one_in(&f, 2) ? &o : &l1);
    fz_set s = {{&o1, &l1, &o2, &l2, &o, &l}, 6};
    fz_snapshot(&s);
    fz_current = &s;
    const flashc_status st = flashc_attn_merge(fz_arg(&o1), fz_arg(&l1), fz_arg(&o2), fz_arg(&l2),
                                               fz_out(&o), use_lse ? fz_out(&l) : NULL);
    fz_check("flashc_attn_merge", &s, st);
    if (st == FLASHC_OK) {
        /* o is rounded once into its dtype: float32 1e-5, float16 2^-10, bfloat16 2^-7 */
        const double otol = o.t.dtype == FLASHC_BF16 ? 0x1p-7 : o.t.dtype == FLASHC_F16 ? 0x1p-10 : 1e-5;
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t i = 0; i < S; i++) {
                    const double x = ld(&l1, b, h, i, 0), y = ld(&l2, b, h, i, 0);
                    const double m = fmax(x, y);
                    double L = -INFINITY, wa = 0.0, wb = 0.0;
                    if (isnan(x) || isnan(y))
                        L = wa = wb = NAN;
                    else if (m != -INFINITY) {
                        const double ea = exp(x - m), eb = exp(y - m);
                        wa = ea / (ea + eb), wb = eb / (ea + eb), L = m + log(ea + eb);
                    }
                    if (use_lse && l.present) {
                        const double got = ld(&l, b, h, i, 0);
                        if (!(fabs(got - L) <= 1e-5 * (1.0 + fabs(L))) && !(got == L) &&
                            !(isnan(got) && isnan(L)))
                            fz_die("merge lse differs from the formula", NULL);
                    }
                    for (int64_t d = 0; d < D; d++) {
                        const double a = x == -INFINITY ? 0.0 : wa * ld(&o1, b, i, h, d);
                        const double c = y == -INFINITY ? 0.0 : wb * ld(&o2, b, i, h, d);
                        const double want = a + c, got = ld(&o, b, i, h, d);
                        const double mag = fabs(ld(&o1, b, i, h, d)) + fabs(ld(&o2, b, i, h, d));
                        /* got is want +- the tolerance, rounded into o's dtype: rounding is
                         * monotone, so the bounds are the band's ends rounded (float16 turns
                         * anything from 65520 up into inf, and so must the library) */
                        const double band = otol * (1.0 + mag);
                        const double lo = fz_round(o.t.dtype, want - band);
                        const double hi = fz_round(o.t.dtype, want + band);
                        if (isnan(want) != isnan(got) ||
                            (!isnan(want) && isfinite(mag) && mag < 1e30 &&
                             !(got >= lo && got <= hi))) {
                            char msg[200];
                            snprintf(msg, sizeof msg, "o[%lld][%lld][%lld][%lld] = %g, want %g",
                                     (long long)b, (long long)i, (long long)h, (long long)d, got,
                                     want);
                            fz_die("merge o differs from the formula", msg);
                        }
                    }
                }
    }
    fz_current = NULL;
    fz_free(&s);
    return 0;
}
