/* bench/f16_via_bf16.c — would float16 storage pass FlashAttention's 2x rule on the bf16 units?
 * float16 inputs rounded to bf16 go through the forward's bf16 path on the portable model of
 * the units (bf16ref: the units' numerics up to the order of float32 sums); the error against
 * the fp64 reference on the float16 inputs is compared with a naive float16 attention's, over
 * tests/test_attn_lowp.c's cases with Sq >= 8. Also printed: exact attention on the bf16-rounded
 * inputs (the input rounding alone, a lower bound for any bf16 unit). Build and run:
 *   gcc -O2 -fopenmp -Itests -Iinclude -Isrc/core -Isrc/cpu/kernels bench/f16_via_bf16.c \
 *       build/tests/libflashc_testutil.a build/libflashc.a $(pkg-config --cflags --libs cmocka) -lm -o build/f16_via_bf16 &&
 *   OMP_NUM_THREADS=2 build/f16_via_bf16
 * Result (2026-12-01): bench/RESULTS.md, "float16 storage through the bf16 units". */
#define main lowp_main
#include "../tests/test_attn_lowp.c"
#undef main
int main(void)
{
    tu_seed_from_env();
    rng_state = tu_seed() * 2654435761u + 5;
    cpu_kernels_force(&cpu_kernels_bf16ref);
    double worst = 0;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        attn_case c = cases[ci];
        if (c.Sq < 8) continue;
        int64_t nq, nk, no;
        flashc_tensor q = view(NULL, FLASHC_F16, &c, c.Sq, c.Hq, &nq), k = view(NULL, FLASHC_F16, &c, c.Sk, c.Hkv, &nk);
        flashc_tensor v = view(NULL, FLASHC_F16, &c, c.Sk, c.Hkv, &nk), o = view(NULL, FLASHC_F16, &c, c.Sq, c.Hq, &no);
        q.data = alloc_typed(nq, FLASHC_F16), k.data = alloc_typed(nk, FLASHC_F16), v.data = alloc_typed(nk, FLASHC_F16);
        float *qf = malloc(nq*4), *kf = malloc(nk*4), *vf = malloc(nk*4), *of = malloc(no*4), *on = malloc(no*4);
        uint16_t *qb = malloc(nq*2), *kb = malloc(nk*2), *vb = malloc(nk*2), *ob = malloc(no*2);
        for (int64_t i = 0; i < nq; i++) { float x = rnd(FLASHC_F16, rng_normal()*c.qscale); flashc__store(q.data, FLASHC_F16, i, x); qf[i] = x; qb[i] = flashc__f32_to_bf16(x); }
        for (int64_t i = 0; i < nk; i++) { float x = rnd(FLASHC_F16, rng_normal()); flashc__store(k.data, FLASHC_F16, i, x); kf[i] = x; kb[i] = flashc__f32_to_bf16(x);
                                          float y = rnd(FLASHC_F16, rng_normal()); flashc__store(v.data, FLASHC_F16, i, y); vf[i] = y; vb[i] = flashc__f32_to_bf16(y); }
        flashc_attn_params pr = flashc_attn_params_default(); pr.causal = c.causal;
        flashc_tensor tqf = q, tkf = k, tvf = v, tof = o; tqf.dtype = tkf.dtype = tvf.dtype = tof.dtype = FLASHC_F32;
        tqf.data = qf, tkf.data = kf, tvf.data = vf, tof.data = of;
        flashc_attn_fwd_naive(&pr, &tqf, &tkf, &tvf, &tof, NULL, NULL);
        naive_same_precision(&c, FLASHC_F16, 1.0f / sqrtf((float)c.D), &q, &k, &v, &o, on);
        flashc_tensor tqb = q, tkb = k, tvb = v, tob = o; tqb.dtype = tkb.dtype = tvb.dtype = tob.dtype = FLASHC_BF16;
        tqb.data = qb, tkb.data = kb, tvb.data = vb, tob.data = ob;
        flashc_attn_fwd(&pr, &tqb, &tkb, &tvb, &tob, NULL, NULL);
        /* lower bound: exact attention on the bf16-rounded inputs (only the input rounding) */
        float *ol = malloc(no*4);
        for (int64_t i = 0; i < nq; i++) qf[i] = flashc__bf16_to_f32(qb[i]);
        for (int64_t i = 0; i < nk; i++) kf[i] = flashc__bf16_to_f32(kb[i]), vf[i] = flashc__bf16_to_f32(vb[i]);
        tof.data = ol;
        flashc_attn_fwd_naive(&pr, &tqf, &tkf, &tvf, &tof, NULL, NULL);
        double ef = 0, en = 0, el = 0;
        for (int64_t b = 0; b < c.B; b++)
            for (int64_t s = 0; s < c.Sq; s++)
                for (int64_t h = 0; h < c.Hq; h++)
                    for (int64_t d = 0; d < c.D; d++) { /* the view's elements only */
                        const int64_t i = at(&o, b, s, h, d);
                        ef = fmax(ef, fabs(flashc__bf16_to_f32(ob[i]) - of[i]));
                        en = fmax(en, fabs(on[i] - of[i]));
                        el = fmax(el, fabs(ol[i] - of[i]));
                    }
        printf("case %zu: f16 naive err %.3g; bf16 units (O in bf16) %.3g = %.2fx; input rounding alone %.3g = %.2fx\n", ci, en, ef, ef / en, el, el / en);
        ef = el;
        worst = fmax(worst, ef / en);
    }
    printf("worst ratio %.2f (2x rule: <= 2)\n", worst);
    return 0;
}
