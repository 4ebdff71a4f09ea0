/*
 * fuzz_attn_fwd.c — flashc_attn_fwd_supported, flashc_attn_fwd and flashc_attn_fwd_naive.
 * One input = one problem: shapes (Dk != Dv now and then), dtype, params with the v2
 * modifiers (window, softcap, ALiBi slopes as a sixth descriptor, num_splits; fz_attn_mods),
 * five tensor descriptors (q, k, v, o, lse), their layouts and values. The oracle (fuzz_common.h) runs on each call; besides:
 *   - supported() writes nothing and answers exactly what fwd() returns (or fwd() runs out of
 *     memory), with stats untouched on a refusal;
 *   - when both the flash path and the naive reference accept and the inputs are finite,
 *     o and lse agree within a bound derived from the scores' size and the dtype's rounding.
 */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz f = {data, size};
    const flashc_dtype dt = fz_dtype(&f);
    const int64_t B = fz_range(&f, 1, 2), Sq = fz_range(&f, 1, fz_one_in(&f, 8) ? 130 : 20);
    const int64_t Sk = fz_range(&f, 1, fz_one_in(&f, 8) ? 130 : 20);
    const int64_t Hkv = fz_range(&f, 1, 2), Hq = Hkv * fz_range(&f, 1, 3);
    static const int64_t dims[8] = {1, 2, 3, 4, 8, 16, 32, 40};
    const int64_t D = dims[fz_u8(&f) % 8], Dv = fz_one_in(&f, 4) ? dims[fz_u8(&f) % 8] : D;

    flashc_attn_params pr;
    fz_tensor alibi;
    const double bias = fz_attn_params(&f, &pr, B, Hq, Sq > Sk ? Sq : Sk, &alibi);
    const uint8_t abi = fz_abi_draw(&f, &pr); /* the params ABI: fz_abi_params */
    const int use_params = !fz_one_in(&f, 16), use_lse = !fz_one_in(&f, 4);
    const int use_stats = fz_u8(&f) & 1;

    const int64_t shq[4] = {B, Sq, Hq, D}, shk[4] = {B, Sk, Hkv, D}, shl[3] = {B, Hq, Sq};
    const int64_t shv[4] = {B, Sk, Hkv, Dv}, sho[4] = {B, Sq, Hq, Dv};
    fz_tensor q, k, v, o, lse, o2, lse2;
    fz_decode(&f, &q, 4, shq, dt, 0);
    fz_decode(&f, &k, 4, shk, dt, 0);
    fz_decode(&f, &v, 4, shv, dt, 0);
    fz_decode(&f, &o, 4, sho, dt, 1);
    fz_decode(&f, &lse, 3, shl, FLASHC_F32, 1);
    if (fz_one_in(&f, 24)) /* outputs pointing into an input or the other output */
        fz_alias(&f, &o, fz_one_in(&f, 2) ? &q : &v);
    if (fz_one_in(&f, 24))
        fz_alias(&f, &lse, fz_one_in(&f, 2) ? &o : &k);
    lse.output = use_lse; /* not passed: must stay as it is */
    fz_set s = {{&q, &k, &v, &o, &lse, &alibi}, 6};
    fz_snapshot(&s);
    fz_current = &s;
    /* the reference writes into twins of the outputs; an output aliasing another tensor has no
     * twin (the pointer is into that tensor's memory): then the reference reuses the same
     * outputs, restored, and nothing is compared */
    const int aliased = !o.owns || !lse.owns;
    fz_make_twin(&o, &o2);
    fz_make_twin(&lse, &lse2);
    if (aliased) {
        free(o2.base), free(o2.snap), free(lse2.base), free(lse2.snap);
        o2 = o, lse2 = lse;
        o2.base = o2.snap = lse2.base = lse2.snap = NULL; /* freed with s */
    }
    fz_set s2 = {{&q, &k, &v, aliased ? &o : &o2, aliased ? &lse : &lse2, &alibi}, 6};

    const flashc_attn_params *pp = fz_abi_params(&f, abi, &pr, use_params);
    flashc_tensor *lp = use_lse ? fz_out(&lse) : NULL, *lp2 = use_lse ? fz_out(&lse2) : NULL;
    const flashc_status sup = flashc_attn_fwd_supported(pp, fz_arg(&q), fz_arg(&k), fz_arg(&v),
                                                        fz_arg(&o), lp);
    fz_check_untouched("flashc_attn_fwd_supported", &s, sup);

    flashc_attn_stats st = {-7, -7, -7, -7}, st2 = {-7, -7, -7, -7};
    const flashc_status got = flashc_attn_fwd(pp, fz_arg(&q), fz_arg(&k), fz_arg(&v), fz_out(&o),
                                              lp, use_stats ? &st : NULL);
    fz_check("flashc_attn_fwd", &s, got);
    if (got != sup && !(sup == FLASHC_OK && got == FLASHC_ERR_OUT_OF_MEMORY)) {
        char m[200];
        snprintf(m, sizeof m, "supported() said %s, fwd() returned %s",
                 flashc_status_string(sup), flashc_status_string(got));
        fz_die("supported() disagrees with the call", m);
    }
    if (got != FLASHC_OK && st.tile_pairs != -7)
        fz_die("stats written by a refused call", NULL);

    if (aliased) {
        fz_restore(&s);
        lp2 = use_lse ? fz_out(&lse) : NULL;
    }
    const flashc_status gn = flashc_attn_fwd_naive(pp, fz_arg(&q), fz_arg(&k), fz_arg(&v),
                                                   aliased ? fz_out(&o) : fz_out(&o2), lp2,
                                                   use_stats ? &st2 : NULL);
    fz_check("flashc_attn_fwd_naive", &s2, gn);

    if (!aliased && got == FLASHC_OK && gn == FLASHC_OK && fz_finite(&q) && fz_finite(&k) &&
        fz_finite(&v) && fz_mods_finite(&alibi)) {
        const int all_params = fz_abi_complete(abi, use_params);
        const double scale = fz_used_scale(&pr, use_params, all_params, D);
        const double smax = scale * (double)D * fz_maxabs(&q) * fz_maxabs(&k) + bias;
        const double vmax = fz_maxabs(&v);
        /* |score| beyond 1e6: F5 (issue 10), open in the attention kernels; |v| near FLT_MAX:
         * the float32 accumulator may overflow where the float64 reference does not */
        /* (and q.k itself beyond float32's range, whatever the scale: the float32 dot product
         * overflows where the float64 one does not) */
        const double dot = (double)D * fz_maxabs(&q) * fz_maxabs(&k);
        if (smax < 1e6 && vmax < 1e30 && dot < 1e30) {
            const double cond = 32.0 * smax * 0x1p-24;
            fz_compare("o", &o, o2.t.data, vmax * (2 * fz_eps_set(&s, dt) + cond) + 1e-6);
            if (use_lse && lse.present)
                fz_compare("lse", &lse, lse2.t.data, 1e-5 * (1.0 + smax) + cond);
        }
    }
    fz_current = NULL;
    fz_free(&s);
    free(o2.base), free(o2.snap), free(lse2.base), free(lse2.snap);
    return 0;
}
