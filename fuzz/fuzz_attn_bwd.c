/*
 * fuzz_attn_bwd.c — flashc_attn_bwd and flashc_attn_bwd_naive. One input = one problem with
 * nine tensor descriptors (q, k, v, o, dout, lse; dq, dk, dv), the v2 modifiers (window,
 * softcap, ALiBi; fz_attn_mods) and Dk != Dv now and then. o and lse are first produced by
 * the naive forward when it accepts the layouts (so the backward sees a consistent state), then
 * both backwards run on twins of the outputs; when both accept and every input is finite and
 * small, dq, dk and dv agree within a bound derived from the scores' size.
 */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz f = {data, size};
    const flashc_dtype dt = fz_one_in(&f, 8) ? fz_dtype(&f) : FLASHC_F32; /* CPU bwd: f32 */
    const int64_t B = fz_range(&f, 1, 2), Sq = fz_range(&f, 1, fz_one_in(&f, 8) ? 70 : 16);
    const int64_t Sk = fz_range(&f, 1, fz_one_in(&f, 8) ? 70 : 16);
    const int64_t Hkv = fz_range(&f, 1, 2), Hq = Hkv * fz_range(&f, 1, 3);
    static const int64_t dims[8] = {1, 2, 3, 4, 8, 16, 5, 24};
    const int64_t D = dims[fz_u8(&f) % 8], Dv = fz_one_in(&f, 4) ? dims[fz_u8(&f) % 8] : D;
    flashc_attn_params pr;
    fz_tensor alibi;
    const double bias = fz_attn_params(&f, &pr, B, Hq, Sq > Sk ? Sq : Sk, &alibi);
    const uint8_t abi = fz_abi_draw(&f, &pr); /* the params ABI: fz_abi_params */
    const int use_params = !fz_one_in(&f, 16), use_stats = fz_u8(&f) & 1;

    const int64_t shq[4] = {B, Sq, Hq, D}, shk[4] = {B, Sk, Hkv, D}, shl[3] = {B, Hq, Sq};
    const int64_t shv[4] = {B, Sk, Hkv, Dv}, sho[4] = {B, Sq, Hq, Dv};
    fz_tensor q, k, v, o, dout, lse, dq, dk, dv, dq2, dk2, dv2;
    fz_decode(&f, &q, 4, shq, dt, 0);
    fz_decode(&f, &k, 4, shk, dt, 0);
    fz_decode(&f, &v, 4, shv, dt, 0);
    fz_decode(&f, &o, 4, sho, dt, 0);
    fz_decode(&f, &dout, 4, sho, dt, 0);
    fz_decode(&f, &lse, 3, shl, FLASHC_F32, 0);
    fz_decode(&f, &dq, 4, shq, dt, 1);
    fz_decode(&f, &dk, 4, shk, dt, 1);
    fz_decode(&f, &dv, 4, shv, dt, 1);
    if (fz_one_in(&f, 24))
        fz_alias(&f, &dq, fz_one_in(&f, 2) ? &q : &lse);
    if (fz_one_in(&f, 24))
        fz_alias(&f, &dv, fz_one_in(&f, 2) ? &dk : &dout);
    const flashc_attn_params *pp = fz_abi_params(&f, abi, &pr, use_params);
    /* a consistent forward state where the layouts allow (its own oracle is fuzz_attn_fwd's) */
    const flashc_status fw =
        flashc_attn_fwd_naive(pp, fz_arg(&q), fz_arg(&k), fz_arg(&v), fz_out(&o), fz_out(&lse), NULL);
    fz_set s = {{&q, &k, &v, &o, &dout, &lse, &dq, &dk, &dv, &alibi}, 10};
    fz_snapshot(&s);
    fz_current = &s;
    const int aliased = !dq.owns || !dk.owns || !dv.owns;

    flashc_attn_stats st = {-7, -7, -7, -7};
    const flashc_status got =
        flashc_attn_bwd(pp, fz_arg(&q), fz_arg(&k), fz_arg(&v), fz_arg(&o), fz_arg(&dout),
                        fz_arg(&lse), fz_out(&dq), fz_out(&dk), fz_out(&dv), use_stats ? &st : NULL);
    fz_check("flashc_attn_bwd", &s, got);
    if (got != FLASHC_OK && st.tile_pairs != -7)
        fz_die("stats written by a refused call", NULL);

    fz_set s2 = s;
    if (!aliased) {
        fz_make_twin(&dq, &dq2), fz_make_twin(&dk, &dk2), fz_make_twin(&dv, &dv2);
        s2.t[6] = &dq2, s2.t[7] = &dk2, s2.t[8] = &dv2;
    } else {
        fz_restore(&s);
    }
    const flashc_status gn = flashc_attn_bwd_naive(
        pp, fz_arg(&q), fz_arg(&k), fz_arg(&v), fz_arg(&o), fz_arg(&dout), fz_arg(&lse),
        fz_out(aliased ? &dq : &dq2), fz_out(aliased ? &dk : &dk2), fz_out(aliased ? &dv : &dv2),
        NULL);
    fz_check("flashc_attn_bwd_naive", &s2, gn);

    if (!aliased && fw == FLASHC_OK && got == FLASHC_OK && gn == FLASHC_OK && fz_finite(&q) &&
        fz_finite(&k) && fz_finite(&v) && fz_finite(&dout) && fz_mods_finite(&alibi)) {
        const int all_params = fz_abi_complete(abi, use_params);
        const double scale = fz_used_scale(&pr, use_params, all_params, D);
        const double qm = fz_maxabs(&q), km = fz_maxabs(&k), vm = fz_maxabs(&v),
                     dm = fz_maxabs(&dout);
        const double smax = scale * (double)D * qm * km + bias;
        if (smax < 1e3 && qm < 1e4 && km < 1e4 && vm < 1e4 && dm < 1e4) {
            /* |dS| <= 2 |dO| |V| D; dQ sums Sk of them times |K| scale, dK Sq times |Q| */
            const double ds = 2.0 * dm * vm * (double)Dv, n = (double)(Sq > Sk ? Sq : Sk);
            const double cond = 1e-5 + 64.0 * (1.0 + smax) * 0x1p-24;
            const int64_t group = Hq / Hkv;
            /* + one rounding of each result to dt (a tie may round either way) */
            const double r = 2.0 * fz_eps_set(&s, dt);
            fz_compare("dq", &dq, dq2.t.data, cond * (1.0 + ds * n * km * scale) + r * fz_maxabs(&dq2));
            fz_compare("dk", &dk, dk2.t.data,
                       cond * (1.0 + ds * n * group * qm * scale) + r * fz_maxabs(&dk2));
            fz_compare("dv", &dv, dv2.t.data, cond * (1.0 + dm * n * group) + r * fz_maxabs(&dv2));
        }
    }
    fz_current = NULL;
    if (!aliased) {
        free(dq2.base), free(dq2.snap), free(dk2.base), free(dk2.snap);
        free(dv2.base), free(dv2.snap);
    }
    fz_free(&s);
    return 0;
}
