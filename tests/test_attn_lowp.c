/*
 * test_attn_lowp.c — the CPU flash forward on every runnable kernel table, for float32,
 * bfloat16 and float16 storage, against the float64-accumulating naive reference.
 *
 * Low precision follows FlashAttention's rule: with inputs rounded to the storage type once,
 * max |O_flash - O_ref| must be <= 2 x max |O_naive - O_ref|, where O_ref is the fp64 reference
 * on the same (rounded) inputs and O_naive is a plain same-precision implementation, the way a
 * framework computes attention in bf16/f16: S = q k^T rounded to the storage type, scaled and
 * rounded, softmax in float32 rounded, O = P V accumulated in float32 and rounded. Float32
 * storage is held to the same rule against the same naive code in float32 (every rounding then
 * is float32's), plus common.h's tu_f32_logit_floor: there both errors come mostly from rounding
 * the logits, and the maximum of one over a case can land 4x the other's (seed
 * 1883682745445686, the unfused AVX-512 path: 1.9e-6 against 4.8e-7 on a row of 7 keys).
 * LSE is float32 in every case.
 *
 * Cases: odd sizes (n = 1, n not a multiple of the tiles, head dims 1, 7, 40, 80, 256), causal
 * and not, Sq > Sk (rows that see no key: O = 0, LSE = -inf), GQA, a (B, H, S, D) layout, a
 * feature stride of 2, forced tiny tiles, decode shapes (Sq < 8, grouped GQA heads). Outputs are poisoned with NaN first, so an element
 * left unwritten fails; inputs are fresh random values (seed printed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/cpu/kernels/kernels.h"
#include "common.h"
#include "internal.h"

static uint64_t rng_state;

/* The implementation under test: the flash forward, or the unfused one (S and P materialised on
 * the same kernels), which is held to the same rule. */
typedef flashc_status (*fwd_fn)(const flashc_attn_params *, const flashc_tensor *,
                                const flashc_tensor *, const flashc_tensor *, flashc_tensor *,
                                flashc_tensor *, flashc_attn_stats *);
static fwd_fn impl_fn = flashc_attn_fwd;
static const char *impl_name = "flash";

static uint64_t rng_next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* roughly N(0, 1): sum of 4 uniforms, rescaled */
static float rng_normal(void)
{
    double s = 0.0;
    for (int i = 0; i < 4; i++)
        s += (double)(rng_next() >> 11) * (1.0 / 9007199254740992.0);
    return (float)((s - 2.0) * 1.7320508);
}

typedef struct attn_case {
    int64_t B, Sq, Sk, Hq, Hkv, D;
    int causal;
    int layout; /* 0: (B, S, H, D); 1: (B, H, S, D) memory; 2: (B, S, H, D) with feature stride 2 */
    int64_t block_q, block_k;
    float qscale; /* spread of q: larger makes the softmax peakier */
} attn_case;

/* A (B, S, H, D) view of buf in the case's layout; *elems = the buffer's element count. */
static flashc_tensor view(void *buf, flashc_dtype dt, const attn_case *c, int64_t S, int64_t H,
                          int64_t *elems)
{
    flashc_tensor t = flashc_tensor_4d(buf, dt, c->B, S, H, c->D);
    if (c->layout == 1) {
        t.stride[0] = H * S * c->D, t.stride[1] = c->D, t.stride[2] = S * c->D, t.stride[3] = 1;
    } else if (c->layout == 2) {
        t.stride[3] = 2, t.stride[2] = 2 * c->D, t.stride[1] = 2 * c->D * H;
        t.stride[0] = 2 * c->D * H * S;
    }
    *elems = c->B * S * H * c->D * (c->layout == 2 ? 2 : 1);
    return t;
}

static int64_t at(const flashc_tensor *t, int64_t b, int64_t s, int64_t h, int64_t d)
{
    return b * t->stride[0] + s * t->stride[1] + h * t->stride[2] + d * t->stride[3];
}

/* Round to the storage type and back. */
static float rnd(flashc_dtype dt, float x)
{
    uint16_t h;
    if (dt == FLASHC_F32)
        return x;
    flashc__store(&h, dt, 0, x);
    return flashc__load(&h, dt, 0);
}

/* The plain same-precision attention (see the top of the file), into of (float, B S H D as o). */
static void naive_same_precision(const attn_case *c, flashc_dtype dt, float scale,
                                 const flashc_tensor *q, const flashc_tensor *k,
                                 const flashc_tensor *v, const flashc_tensor *o, float *of)
{
    float *s = malloc((size_t)c->Sk * sizeof(float));
    assert_non_null(s);
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t h = 0; h < c->Hq; h++) {
            const int64_t hk = h / (c->Hq / c->Hkv);
            for (int64_t i = 0; i < c->Sq; i++) {
                int64_t end = c->causal ? i + 1 + c->Sk - c->Sq : c->Sk;
                end = end < c->Sk ? end : c->Sk;
                float mx = -INFINITY, sum = 0.0f;
                for (int64_t j = 0; j < end; j++) {
                    float acc = 0.0f;
                    for (int64_t d = 0; d < c->D; d++)
                        acc += flashc__load(q->data, dt, at(q, b, i, h, d)) *
                               flashc__load(k->data, dt, at(k, b, j, hk, d));
                    s[j] = rnd(dt, rnd(dt, acc) * scale);
                    mx = s[j] > mx ? s[j] : mx;
                }
                for (int64_t j = 0; j < end; j++)
                    sum += s[j] = expf(s[j] - mx);
                for (int64_t d = 0; d < c->D; d++) {
                    float acc = 0.0f;
                    for (int64_t j = 0; j < end; j++)
                        acc += rnd(dt, s[j] / sum) * flashc__load(v->data, dt, at(v, b, j, hk, d));
                    of[at(o, b, i, h, d)] = end > 0 ? rnd(dt, acc) : 0.0f;
                }
            }
        }
    free(s);
}

static void *alloc_typed(int64_t n, flashc_dtype dt)
{
    void *p = malloc((size_t)n * flashc_dtype_size(dt));
    assert_non_null(p);
    return p;
}

/* max over (b, s, h) of the Euclidean norm of row t[b, s, h, :] (float32 data) */
static double max_row_norm(const flashc_tensor *t, const attn_case *c, int64_t S, int64_t H)
{
    double m = 0.0;
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t i = 0; i < S; i++)
            for (int64_t h = 0; h < H; h++) {
                double n2 = 0.0;
                for (int64_t d = 0; d < c->D; d++) {
                    const double x = ((const float *)t->data)[at(t, b, i, h, d)];
                    n2 += x * x;
                }
                m = fmax(m, sqrt(n2));
            }
    return m;
}

/* One case on one table and dtype. Returns the (flash, naive) errors through *ef, *en and the
 * slack of the 2x rule through *slack: float32's floor (see the top of the file), else 0. */
static void run_case(const attn_case *c, flashc_dtype dt, const char *isa, double *ef, double *en,
                     double *slack)
{
    int64_t nq, nk, no;
    /* typed inputs, their float copies (the same rounded values), outputs */
    flashc_tensor q = view(NULL, dt, c, c->Sq, c->Hq, &nq), k = view(NULL, dt, c, c->Sk, c->Hkv, &nk);
    flashc_tensor v = view(NULL, dt, c, c->Sk, c->Hkv, &nk), o = view(NULL, dt, c, c->Sq, c->Hq, &no);
    q.data = alloc_typed(nq, dt), k.data = alloc_typed(nk, dt), v.data = alloc_typed(nk, dt);
    o.data = alloc_typed(no, dt);
    flashc_tensor qf = q, kf = k, vf = v, of = o;
    qf.dtype = kf.dtype = vf.dtype = of.dtype = FLASHC_F32;
    qf.data = alloc_typed(nq, FLASHC_F32), kf.data = alloc_typed(nk, FLASHC_F32);
    vf.data = alloc_typed(nk, FLASHC_F32), of.data = alloc_typed(no, FLASHC_F32);
    float *on = alloc_typed(no, FLASHC_F32);
    const struct { const flashc_tensor *t, *f; int64_t n; float spread; } in[3] = {
        {&q, &qf, nq, c->qscale}, {&k, &kf, nk, 1.0f}, {&v, &vf, nk, 1.0f}};
    for (int t = 0; t < 3; t++)
        for (int64_t i = 0; i < in[t].n; i++) {
            const float x = rnd(dt, rng_normal() * in[t].spread);
            flashc__store(in[t].t->data, dt, i, x);
            ((float *)in[t].f->data)[i] = x;
        }
    for (int64_t i = 0; i < no; i++) /* poison: NaN in every dtype */
        flashc__store(o.data, dt, i, NAN), on[i] = 0.0f;

    float *lse = alloc_typed(c->B * c->Hq * c->Sq, FLASHC_F32);
    float *lse_ref = alloc_typed(c->B * c->Hq * c->Sq, FLASHC_F32);
    for (int64_t i = 0; i < c->B * c->Hq * c->Sq; i++)
        lse[i] = NAN;
    flashc_tensor tl = flashc_tensor_3d(lse, FLASHC_F32, c->B, c->Hq, c->Sq);
    flashc_tensor tlr = flashc_tensor_3d(lse_ref, FLASHC_F32, c->B, c->Hq, c->Sq);

    flashc_attn_params pr = flashc_attn_params_default();
    pr.causal = c->causal, pr.block_q = c->block_q, pr.block_k = c->block_k;
    flashc_attn_stats st = FLASHC_ATTN_STATS_INIT;
    flashc_status s = impl_fn(&pr, &q, &k, &v, &o, &tl, &st);
    if (s != FLASHC_OK)
        print_error("%s: %s: %s\n", impl_name, flashc_status_string(s), flashc_last_error());
    assert_int_equal(s, FLASHC_OK);
    assert_int_equal(flashc_attn_fwd_naive(&pr, &qf, &kf, &vf, &of, &tlr, NULL), FLASHC_OK);
    const float scale = 1.0f / sqrtf((float)c->D);
    naive_same_precision(c, dt, scale, &q, &k, &v, &o, on);

    double errf = 0.0, errn = 0.0;
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t i = 0; i < c->Sq; i++)
            for (int64_t h = 0; h < c->Hq; h++)
                for (int64_t d = 0; d < c->D; d++) {
                    const int64_t x = at(&o, b, i, h, d);
                    const double ref = ((float *)of.data)[x];
                    const double e = fabs((double)flashc__load(o.data, dt, x) - ref);
                    if (!(e <= errf)) /* NaN sticks */
                        errf = e;
                    errn = fmax(errn, fabs((double)on[x] - ref));
                }
    for (int64_t i = 0; i < c->B * c->Hq * c->Sq; i++) {
        if (isinf(lse_ref[i])) { /* a row that sees no key */
            assert_true(isinf(lse[i]) && lse[i] < 0);
            continue;
        }
        if (!(fabs(lse[i] - lse_ref[i]) <= 2e-5 * (1.0 + fabs(lse_ref[i])))) {
            print_error("[%s dtype %d] lse[%lld] = %.8g, reference %.8g\n", isa, (int)dt,
                        (long long)i, (double)lse[i], (double)lse_ref[i]);
            fail();
        }
    }
    *slack = dt != FLASHC_F32 ? 0.0
                              : tu_f32_logit_floor(scale, max_row_norm(&qf, c, c->Sq, c->Hq),
                                                   max_row_norm(&kf, c, c->Sk, c->Hkv), 0.0,
                                                   tu_max_abs(vf.data, nk));
    *ef = errf, *en = errn;
    free(q.data), free(k.data), free(v.data), free(o.data), free(qf.data), free(kf.data);
    free(vf.data), free(of.data), free(on), free(lse), free(lse_ref);
}

static const attn_case cases[] = {
    /*  B  Sq   Sk  Hq Hkv   D  causal layout bq bk qscale */
    {1, 1, 1, 1, 1, 8, 0, 0, 0, 0, 1.0f},
    {1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1.0f},
    {2, 37, 53, 4, 2, 40, 0, 0, 0, 0, 1.0f},
    {2, 37, 53, 4, 2, 40, 1, 0, 0, 0, 2.0f},
    {1, 200, 200, 2, 1, 64, 1, 0, 0, 0, 1.0f},
    {1, 130, 257, 3, 3, 80, 0, 1, 0, 0, 3.0f},
    {1, 100, 60, 2, 2, 128, 1, 0, 0, 0, 1.0f},
    {1, 33, 70, 1, 1, 7, 1, 2, 0, 0, 1.0f},
    {1, 29, 31, 2, 1, 24, 1, 0, 5, 7, 1.0f},
    {1, 50, 50, 1, 1, 256, 0, 0, 0, 0, 1.0f},
    {1, 1, 300, 4, 1, 128, 1, 0, 0, 0, 1.0f},
    /* several K/V tiles and row chunks of the bf16 matrix-unit path (Bc 192, chunks 64 / 32) */
    {1, 300, 500, 2, 1, 64, 1, 0, 0, 0, 1.0f},
    {1, 200, 450, 2, 1, 128, 0, 1, 0, 0, 2.0f},
    /* decode shapes (Sq < 8): the row-major path; with B x Hkv >= 2 x threads the query heads
     * of a KV head are grouped into one item */
    {2, 3, 77, 8, 2, 64, 1, 0, 0, 0, 1.0f},
    {1, 5, 130, 8, 4, 40, 0, 1, 0, 0, 2.0f},
    {4, 7, 7, 2, 1, 24, 1, 0, 0, 0, 1.0f},
};

static void run_all_on(const cpu_kernels *t)
{
    const flashc_dtype dts[3] = {FLASHC_F32, FLASHC_BF16, FLASHC_F16};
    const char *dnames[3] = {"f32", "bf16", "f16"};
    for (int di = 0; di < 3; di++) {
        /* A table with bf16 products (amx, avx512bf16, bf16ref) differs from its base table
         * (avx512, scalar) only for bf16 storage: its f32 and f16 runs would repeat the base's. */
        if (t->bf16 && dts[di] != FLASHC_BF16)
            continue;
        double worst_ratio = 0.0, worst_f32 = 0.0;
        for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
            const attn_case *c = &cases[ci];
            double ef, en, slack;
            run_case(c, dts[di], t->name, &ef, &en, &slack);
            worst_f32 = fmax(worst_f32, ef);
            if (!(ef <= 2.0 * en + slack)) {
                print_error("[%s %s] case %zu: %s error %.3g > 2 x naive error %.3g + %.3g\n",
                            t->name, dnames[di], ci, impl_name, ef, en, slack);
                fail();
            }
            if (en > 0.0)
                worst_ratio = fmax(worst_ratio, ef / en);
        }
        printf("  %s %s %s: worst %s/naive error ratio %.3f (bound 2), max |O - O_ref| %.3g\n",
               impl_name, t->name, dnames[di], impl_name, worst_ratio, worst_f32);
    }
}

static void test_every_path(void **state)
{
    (void)state;
    for (int i = 0; cpu_isa_names[i]; i++) {
        const cpu_kernels *t = cpu_kernels_by_name(cpu_isa_names[i]);
        if (!t) {
            printf("  %s skipped (this CPU cannot run it)\n", cpu_isa_names[i]);
            continue;
        }
        cpu_kernels_force(t);
        run_all_on(t);
        cpu_kernels_force(NULL);
        printf("  %s ran\n", t->name);
    }
}

static void test_unfused_every_path(void **state)
{
    impl_fn = flashc_attn_fwd_unfused, impl_name = "unfused";
    test_every_path(state);
    impl_fn = flashc_attn_fwd, impl_name = "flash";
}

/* NaN in one query element makes that output row NaN, on every path and dtype, in flash and in
 * the unfused baseline. */
static void test_nan_propagates(void **state)
{
    (void)state;
    for (int which = 0; which < 2; which++) {
    const fwd_fn fn = which ? flashc_attn_fwd_unfused : flashc_attn_fwd;
    const int64_t S = 40, D = 32;
    const flashc_dtype dts[3] = {FLASHC_F32, FLASHC_BF16, FLASHC_F16};
    for (int i = 0; cpu_isa_names[i]; i++) {
        const cpu_kernels *t = cpu_kernels_by_name(cpu_isa_names[i]);
        if (!t)
            continue;
        cpu_kernels_force(t);
        for (int di = 0; di < 3; di++) {
            const flashc_dtype dt = dts[di];
            void *q = alloc_typed(S * D, dt), *k = alloc_typed(S * D, dt), *v = alloc_typed(S * D, dt);
            void *o = alloc_typed(S * D, dt);
            for (int64_t x = 0; x < S * D; x++) {
                flashc__store(q, dt, x, rng_normal());
                flashc__store(k, dt, x, rng_normal());
                flashc__store(v, dt, x, rng_normal());
            }
            flashc__store(q, dt, 7 * D + 3, NAN);
            flashc_tensor tq = flashc_tensor_4d(q, dt, 1, S, 1, D), tk = flashc_tensor_4d(k, dt, 1, S, 1, D);
            flashc_tensor tv = flashc_tensor_4d(v, dt, 1, S, 1, D), to = flashc_tensor_4d(o, dt, 1, S, 1, D);
            assert_int_equal(fn(NULL, &tq, &tk, &tv, &to, NULL, NULL), FLASHC_OK);
            for (int64_t d = 0; d < D; d++)
                assert_true(isnan(flashc__load(o, dt, 7 * D + d)));
            assert_false(isnan(flashc__load(o, dt, 6 * D)));
            free(q), free(k), free(v), free(o);
        }
        cpu_kernels_force(NULL);
    }
    }
}

int main(void)
{
    tu_seed_from_env(); /* FLASHC_TEST_SEED replays a failure (common.c prints the seed) */
    rng_state = tu_seed() * 2654435761u + 7;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_path),
        cmocka_unit_test(test_unfused_every_path),
        cmocka_unit_test(test_nan_propagates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
