/*
 * fuzz_rows_bwd.c — the row ops that came with issue 14: flashc_rope / flashc_rope_bwd against
 * flashc_rope_naive, flashc_rmsnorm_bwd against flashc_rmsnorm_bwd_naive, flashc_swiglu_bwd
 * against flashc_swiglu_bwd_naive. The first byte picks the family.
 *   RoPE: q (B, S, H, D), k (B, S, Hkv, D) or NULL, in place (both are inputs and outputs, so
 *     they carry values); both styles; rotary_dim (0, even, odd: refused, > D: refused); theta
 *     (0, 10000, 1e6, NaN, -1); positions (NULL, or int32 (B, S) with its strides, corrupted
 *     now and then) or pos_offset; cos/sin tables (P, rotary_dim / 2) or computed angles.
 *   RMSNorm backward: x (T, D), w (D), dy (T, D), dres (T, D) or NULL, dx (T, D), dw (D).
 *   SwiGLU backward: gu (T, 2I), dout (T, I), dgu (T, 2I).
 * The oracle, besides fuzz_common.h's: when both accept finite inputs, the outputs agree within
 * the dtype's rounding (RoPE: two roundings, a float32 angle) scaled by the values' size.
 */
#include "fuzz_common.h"

static void rope_case(fz *f)
{
    const flashc_dtype dt = fz_dtype(f);
    const int64_t B = fz_range(f, 1, 2), S = fz_range(f, 1, 9), H = fz_range(f, 1, 3);
    const int64_t Hk = fz_range(f, 1, 2), D = 2 * fz_range(f, 1, fz_one_in(f, 4) ? 40 : 8);
    flashc_rope_params rp;
    memset(&rp, 0, sizeof rp);
    rp.struct_size = fz_one_in(f, 32) ? (size_t)fz_range(f, 0, 8) : sizeof rp;
    rp.style = fz_one_in(f, 32) ? (flashc_rope_style)7 : (flashc_rope_style)(fz_u8(f) & 1);
    const uint8_t rd = fz_u8(f);
    rp.rotary_dim = rd < 128 ? 0 : rd < 224 ? 2 * fz_range(f, 1, D / 2) : fz_range(f, -1, D + 2);
    static const float thetas[8] = {0.0f, 10000.0f, 10000.0f, 1e6f, 500000.0f, NAN, -1.0f, 1.0f};
    rp.theta = thetas[fz_u8(f) % 8];
    const int64_t r = rp.rotary_dim ? rp.rotary_dim : D;
    const int tables = fz_u8(f) & 1, use_pos = fz_one_in(f, 3);
    const int64_t P = S + fz_range(f, 0, 4);
    const int64_t shq[4] = {B, S, H, D}, shk[4] = {B, S, Hk, D}, sht[2] = {P, r / 2 > 0 ? r / 2 : 1};
    fz_tensor q, k, cs, sn, q2, k2;
    fz_decode(f, &q, 4, shq, dt, 0);
    fz_decode(f, &k, 4, shk, dt, 0);
    q.output = k.output = 1; /* in place */
    if (fz_one_in(f, 8))
        k.present = k.output = 0; /* not passed: must stay as it is */
    /* positions: a raw pointer without an extent, so the harness gives exactly the (B, S)
     * the call will take from q's (possibly mutated) shape, in its own buffer (ASan sees an
     * over-read) */
    const int64_t qb = q.t.shape[0], qs = q.t.shape[1];
    int32_t *pos = NULL;
    if (use_pos && qb > 0 && qs > 0 && qb <= 4096 && qs <= 4096 && qb * qs <= 4096) {
        pos = malloc((size_t)(qb * qs) * sizeof *pos);
        for (int64_t i = 0; i < qb * qs; i++)
            pos[i] = (int32_t)fz_range(f, 0, fz_one_in(f, 16) ? P + 1 : P - 1); /* >= P: refused */
        rp.positions = pos;
        if (fz_one_in(f, 4)) /* (S, 0): every batch row reads its own; (0, 1): shared */
            rp.pos_stride[0] = fz_one_in(f, 2) ? 0 : qs, rp.pos_stride[1] = fz_one_in(f, 2);
    } else {
        rp.pos_offset = fz_one_in(f, 8) ? -3 : fz_range(f, 0, 4);
    }
    memset(&cs, 0, sizeof cs), memset(&sn, 0, sizeof sn);
    if (tables) {
        fz_decode(f, &cs, 2, sht, FLASHC_F32, 0);
        fz_decode(f, &sn, 2, sht, FLASHC_F32, 0);
        /* real cos / sin values where the layout allows: |x| <= 1, sin^2 + cos^2 = 1 */
        for (int64_t e = 0; cs.count > 0 && sn.count == cs.count && cs.t.data && sn.t.data &&
                            cs.t.dtype == FLASHC_F32 && sn.t.dtype == FLASHC_F32 && e < cs.count;
             e++) {
            const float a = (float)e * 0.37f, c = cosf(a), si = sinf(a);
            memcpy((float *)cs.t.data + fz_offset_of(&cs.t, e), &c, 4);
            memcpy((float *)sn.t.data + fz_offset_of(&sn.t, e), &si, 4);
        }
    }
    if (fz_one_in(f, 24))
        fz_alias(f, &k, &q);
    const int inverse = fz_u8(f) & 1;
    fz_set s = {{&q, &k, &cs, &sn}, 4};
    fz_snapshot(&s);
    fz_current = &s;
    const flashc_tensor *tc = tables ? fz_arg(&cs) : NULL, *ts = tables ? fz_arg(&sn) : NULL;
    const flashc_status got = inverse ? flashc_rope_bwd(&rp, fz_out(&q), fz_out(&k), tc, ts)
                                      : flashc_rope(&rp, fz_out(&q), fz_out(&k), tc, ts);
    fz_check(inverse ? "flashc_rope_bwd" : "flashc_rope", &s, got);
    if (got == FLASHC_OK && q.owns && k.owns) {
        fz_make_twin(&q, &q2), fz_make_twin(&k, &k2); /* the inputs, from the snapshots */
        const flashc_status gn = flashc_rope_naive(&rp, fz_out(&q2), k.present ? fz_out(&k2) : NULL,
                                                   tc, ts, inverse);
        if (gn != FLASHC_OK)
            fz_die("flashc_rope_naive refused what the fast path accepted", flashc_last_error());
        /* relative to the largest |x|: a float32 angle at |pos| <= 16 is off by a few ulps of pos * freq; the
         * rotation and one rounding to dt each side */
        const double mag = fmax(8.0, fmax(fz_maxabs(&q2), k.present ? fz_maxabs(&k2) : 0.0));
        const double tol = 1.5 * mag * (2.0 * fz_eps_set(&s, dt) + 64.0 * 0x1p-24 * (double)(P + 8));
        const int fin = fz_finite(&q2) && (!k.present || fz_finite(&k2));
        if (fin && (!tables || (fz_finite(&cs) && fz_finite(&sn)))) {
            fz_compare("q", &q, q2.t.data, tol);
            if (k.present)
                fz_compare("k", &k, k2.t.data, tol);
        }
        free(q2.base), free(q2.snap), free(k2.base), free(k2.snap);
    }
    fz_current = NULL;
    fz_free(&s);
    free(pos);
}

static void rmsnorm_bwd_case(fz *f)
{
    const flashc_dtype dt = fz_dtype(f);
    const int64_t T = fz_range(f, 1, fz_one_in(f, 4) ? 140 : 9), D = fz_range(f, 1, fz_one_in(f, 4) ? 300 : 40);
    static const float epss[8] = {1e-6f, 1e-5f, 0.0f, 0.1f, -1e-6f, NAN, INFINITY, 1e-6f};
    const float eps = epss[fz_u8(f) % 8];
    const int64_t shx[2] = {T, D}, shw[1] = {D};
    fz_tensor x, w, dy, dres, dx, dw, dx2, dw2;
    fz_decode(f, &x, 2, shx, dt, 0);
    fz_decode(f, &w, 1, shw, dt, 0);
    fz_decode(f, &dy, 2, shx, dt, 0);
    fz_decode(f, &dres, 2, shx, dt, 0);
    if (!fz_one_in(f, 2))
        dres.present = 0;
    fz_decode(f, &dx, 2, shx, dt, 1);
    fz_decode(f, &dw, 1, shw, dt, 1);
    if (fz_one_in(f, 24))
        fz_alias(f, &dw, fz_one_in(f, 2) ? &dx : &x);
    fz_set s = {{&x, &w, &dy, &dres, &dx, &dw}, 6};
    fz_snapshot(&s);
    fz_current = &s;
    const flashc_status got = flashc_rmsnorm_bwd(fz_arg(&x), fz_arg(&w), fz_arg(&dy), fz_arg(&dres),
                                                 eps, fz_out(&dx), fz_out(&dw));
    fz_check("flashc_rmsnorm_bwd", &s, got);
    if (got == FLASHC_OK && dx.owns && dw.owns) {
        fz_make_twin(&dx, &dx2), fz_make_twin(&dw, &dw2);
        fz_set s2 = {{&x, &w, &dy, &dres, &dx2, &dw2}, 6};
        const flashc_status gn = flashc_rmsnorm_bwd_naive(fz_arg(&x), fz_arg(&w), fz_arg(&dy),
                                                          fz_arg(&dres), eps, fz_out(&dx2), fz_out(&dw2));
        fz_check("flashc_rmsnorm_bwd_naive", &s2, gn);
        const double xm = fz_maxabs(&x), wm = fz_maxabs(&w), gm = fz_maxabs(&dy);
        /* rows far from zero (rstd <= 1 / min rms is bounded only by eps): compare where the
         * row's rms is at least 1/16, which the decoded values give unless a row is near 0 */
        int rows_ok = 1;
        /* the shape the call accepted (a 1-D x is one row) */
        const int one = x.t.ndim == 1;
        const int64_t xt = one ? 1 : x.t.shape[0], xd = one ? x.t.shape[0] : x.t.shape[1];
        const int64_t s0 = one ? 0 : x.t.stride[0], s1 = one ? x.t.stride[0] : x.t.stride[1];
        for (int64_t t = 0; t < xt && rows_ok; t++) {
            double ss = 0.0;
            for (int64_t d = 0; d < xd; d++) {
                const double v = fz_load(x.t.data, x.t.dtype, t * s0 + d * s1);
                ss += v * v;
            }
            rows_ok = ss / (double)xd + (double)eps >= 1.0 / 256.0;
        }
        if (gn == FLASHC_OK && rows_ok && fz_finite(&x) && fz_finite(&w) && fz_finite(&dy) &&
            (!dres.present || fz_finite(&dres)) && eps >= 0.0f && eps < 1.0f &&
            fz_maxabs(&dx2) < 1e36 && fz_maxabs(&dw2) < 1e36 && /* float32 sums near FLT_MAX */
            gm * wm * fmax(xm, 1.0) < 1e36) { /* and float32 products of dy, w, x beyond it */
            /* rstd <= 16; dx ~ rstd (|g| + |x| rstd^2 mean|g x|): float32 sums over D */
            const double c = (4.0 * fz_eps(x.t.dtype) + 64.0 * (double)xd * 0x1p-24);
            fz_compare("dx", &dx, dx2.t.data,
                       c * 16.0 * (gm * wm + xm * 256.0 * gm * wm * xm) + 2.0 * fz_eps(x.t.dtype) * (dres.present ? fz_maxabs(&dres) : 0.0) + 1e-6);
            fz_compare("dw", &dw, dw2.t.data, c * 16.0 * gm * xm * (double)xt + 1e-6);
        }
        free(dx2.base), free(dx2.snap), free(dw2.base), free(dw2.snap);
    }
    fz_current = NULL;
    fz_free(&s);
}

static void swiglu_bwd_case(fz *f)
{
    const flashc_dtype dt = fz_dtype(f);
    const int64_t T = fz_range(f, 1, 9), I = fz_range(f, 1, fz_one_in(f, 4) ? 200 : 30);
    const int64_t shg[2] = {T, 2 * I + (fz_one_in(f, 16) ? 1 : 0)}, sho[2] = {T, I};
    fz_tensor gu, dout, dgu, dgu2;
    fz_decode(f, &gu, 2, shg, dt, 0);
    fz_decode(f, &dout, 2, sho, dt, 0);
    fz_decode(f, &dgu, 2, shg, dt, 1);
    if (fz_one_in(f, 16))
        fz_alias(f, &dgu, fz_one_in(f, 2) ? &gu : &dout);
    fz_set s = {{&gu, &dout, &dgu}, 3};
    fz_snapshot(&s);
    fz_current = &s;
    const flashc_status got = flashc_swiglu_bwd(fz_arg(&gu), fz_arg(&dout), fz_out(&dgu));
    fz_check("flashc_swiglu_bwd", &s, got);
    if (got == FLASHC_OK && dgu.owns) {
        fz_make_twin(&dgu, &dgu2);
        fz_set s2 = {{&gu, &dout, &dgu2}, 3};
        const flashc_status gn = flashc_swiglu_bwd_naive(fz_arg(&gu), fz_arg(&dout), fz_out(&dgu2));
        fz_check("flashc_swiglu_bwd_naive", &s2, gn);
        const double gm = fz_maxabs(&gu), dm = fz_maxabs(&dout);
        /* (float32 products of |dout| |u| |g| beyond its range overflow where float64 does not) */
        if (gn == FLASHC_OK && fz_finite(&gu) && fz_finite(&dout) && gm < 1e4 &&
            dm * gm * (1.0 + gm) < 1e30) {
            /* |d/dg| <= |dout| |u| 1.1 (1 + |g|), |d/du| <= |dout| |g|; a float32 exp */
            fz_compare("dgu", &dgu, dgu2.t.data,
                       (4.0 * fz_eps_set(&s, dt) + 1e-6) * dm * gm * 1.1 * (1.0 + gm) + 1e-6);
        }
        free(dgu2.base), free(dgu2.snap);
    }
    fz_current = NULL;
    fz_free(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz f = {data, size};
    switch (fz_u8(&f) % 3) {
    case 0: rope_case(&f); break;
    case 1: rmsnorm_bwd_case(&f); break;
    default: swiglu_bwd_case(&f); break;
    }
    return 0;
}
