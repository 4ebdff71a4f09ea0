/* test_softmax.c — the online-softmax primitive and the merge of partial attention states,
 * on the seeds' worked numbers and on random splits. */
#include "common.h"

#include <math.h>
#include <stdlib.h>

/* Attention of one query over keys given directly as scores: d = 1, q = 1, k_j = s_j, scale 1. */
static float attend_scores(const float *s, const float *v, int64_t n, int64_t bc, float *lse)
{
    float q = 1.0f, o = NAN;
    flashc_tensor tq = flashc_tensor_4d(&q, FLASHC_F32, 1, 1, 1, 1);
    flashc_tensor tk = flashc_tensor_4d((void *)s, FLASHC_F32, 1, n, 1, 1);
    flashc_tensor tv = flashc_tensor_4d((void *)v, FLASHC_F32, 1, n, 1, 1);
    flashc_tensor to = flashc_tensor_4d(&o, FLASHC_F32, 1, 1, 1, 1);
    flashc_tensor tl = flashc_tensor_3d(lse, FLASHC_F32, 1, 1, 1);
    flashc_attn_params p = flashc_attn_params_default();
    p.has_softmax_scale = 1, p.softmax_scale = 1.0f, p.block_k = bc;
    TU_OK(flashc_attn_fwd(&p, &tq, &tk, &tv, &to, &tl, NULL));
    return o;
}

/* Lesson: x = (1, 3, 2) -> m = 3, l = e^-2 + 1 + e^-1 = 1.5032; with v = (10, 20, 30) -> 21.547. */
static void test_seed_three_scores(void **state)
{
    (void)state;
    const float x[3] = {1, 3, 2}, v[3] = {10, 20, 30};
    flashc_softmax_state s = flashc_softmax_state_init();
    TU_OK(flashc_online_softmax(&s, x, 3));
    assert_true(s.m == 3.0f);
    assert_float_equal(s.l, 1.5032, 5e-5);
    /* element by element, as a stream, gives the same state */
    flashc_softmax_state t = flashc_softmax_state_init();
    for (int i = 0; i < 3; i++)
        TU_OK(flashc_online_softmax(&t, x + i, 1));
    assert_true(t.m == s.m);
    assert_float_equal(t.l, s.l, 1e-6);
    for (int64_t bc = 1; bc <= 3; bc++) {
        float lse;
        assert_float_equal(attend_scores(x, v, 3, bc, &lse), 21.547, 5e-4);
        assert_float_equal(lse, 3.0 + log(1.5032), 1e-4);
    }
}

/* Module 07: n = 8, d = 1, v = 1..8, row 0 scores [2, 4, 1, 3 | 0, 5, 2, 1], blocks of 4:
 * block 1 gives l = 1.55300, O = 3.75622; block 2 rescales by e^-1 -> l = 1.64615,
 * O = 7.91059; O / l = 4.8055. */
static void test_seed_two_blocks(void **state)
{
    (void)state;
    const float s[8] = {2, 4, 1, 3, 0, 5, 2, 1}, v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    flashc_softmax_state a = flashc_softmax_state_init();
    TU_OK(flashc_online_softmax(&a, s, 4));
    assert_true(a.m == 4.0f);
    assert_float_equal(a.l, 1.55300, 1e-5);
    TU_OK(flashc_online_softmax(&a, s + 4, 4));
    assert_true(a.m == 5.0f);
    assert_float_equal(a.l, 1.64615, 1e-5);
    float lse;
    assert_float_equal(attend_scores(s, v, 8, 4, &lse), 4.8055, 1e-4);
    assert_float_equal(attend_scores(s, v, 8, 8, &lse), 4.8055, 1e-4);
}

/* Masked entries and the empty state: no NaN from -inf - -inf. */
static void test_masked_and_empty(void **state)
{
    (void)state;
    const float x[3] = {-INFINITY, -INFINITY, 2.0f};
    flashc_softmax_state s = flashc_softmax_state_init();
    TU_OK(flashc_online_softmax(&s, x, 2));
    assert_true(isinf(s.m) && s.m < 0 && s.l == 0.0f);
    TU_OK(flashc_online_softmax(&s, x, 3));
    assert_true(s.m == 2.0f && s.l == 1.0f);
    TU_OK(flashc_online_softmax(&s, NULL, 0));
    assert_int_equal(flashc_online_softmax(NULL, x, 3), FLASHC_ERR_NULL_POINTER);
    assert_int_equal(flashc_online_softmax(&s, NULL, 3), FLASHC_ERR_NULL_POINTER);
    assert_int_equal(flashc_online_softmax(&s, x, -1), FLASHC_ERR_INVALID_SHAPE);
    flashc_softmax_state e = flashc_softmax_state_init(), m = flashc_softmax_state_merge(e, s);
    assert_true(m.m == s.m && m.l == s.l);
}

/* Random streams: any split, merged, equals one pass over the whole stream (float64 check). */
static void test_random_splits(void **state)
{
    (void)state;
    for (int rep = 0; rep < 50; rep++) {
        int64_t n = 1 + (int64_t)(tu_uniform() * 300), cut = (int64_t)(tu_uniform() * (n + 1));
        float *x = tu_alloc_normal(n, 5);
        flashc_softmax_state whole = flashc_softmax_state_init(), a = whole, b = whole;
        TU_OK(flashc_online_softmax(&whole, x, n));
        TU_OK(flashc_online_softmax(&a, x, cut));
        TU_OK(flashc_online_softmax(&b, x + cut, n - cut));
        flashc_softmax_state m = flashc_softmax_state_merge(a, b);
        double mx = -INFINITY, l = 0.0;
        for (int64_t i = 0; i < n; i++)
            mx = fmax(mx, x[i]);
        for (int64_t i = 0; i < n; i++)
            l += exp(x[i] - mx);
        assert_true(whole.m == (float)mx && m.m == (float)mx);
        assert_float_equal(whole.l, l, 1e-5 * l);
        assert_float_equal(m.l, l, 1e-5 * l);
        free(x);
    }
}

/* Split-KV: attention over keys [0, c) and [c, Sk) merged by LSE equals one pass. */
static void test_merge_equals_one_pass(void **state)
{
    (void)state;
    const int64_t B = 2, S = 5, H = 3, D = 16, Sk = 77, cut = 30;
    const int64_t nq = B * S * H * D, nl = B * H * S;
    float *q = tu_alloc_normal(nq, 1), *k = tu_alloc_normal(B * Sk * H * D, 1),
          *v = tu_alloc_normal(B * Sk * H * D, 1);
    float *o1 = tu_poisoned(nq), *o2 = tu_poisoned(nq), *o = tu_poisoned(nq), *of = tu_poisoned(nq);
    float *l1 = tu_poisoned(nl), *l2 = tu_poisoned(nl), *l = tu_poisoned(nl), *lf = tu_poisoned(nl);
    flashc_tensor tq = flashc_tensor_4d(q, FLASHC_F32, B, S, H, D);
    flashc_tensor tk = flashc_tensor_4d(k, FLASHC_F32, B, Sk, H, D);
    flashc_tensor tv = flashc_tensor_4d(v, FLASHC_F32, B, Sk, H, D);
    /* the two halves are strided views into k and v: no copy */
    flashc_tensor tk1 = tk, tv1 = tv, tk2 = tk, tv2 = tv;
    tk1.shape[1] = tv1.shape[1] = cut;
    tk2.shape[1] = tv2.shape[1] = Sk - cut;
    tk2.data = k + cut * H * D, tv2.data = v + cut * H * D;
    flashc_tensor to1 = flashc_tensor_4d(o1, FLASHC_F32, B, S, H, D), to2 = to1, to = to1, tof = to1;
    to2.data = o2, to.data = o, tof.data = of;
    flashc_tensor tl1 = flashc_tensor_3d(l1, FLASHC_F32, B, H, S), tl2 = tl1, tl = tl1, tlf = tl1;
    tl2.data = l2, tl.data = l, tlf.data = lf;
    TU_OK(flashc_attn_fwd(NULL, &tq, &tk1, &tv1, &to1, &tl1, NULL));
    TU_OK(flashc_attn_fwd(NULL, &tq, &tk2, &tv2, &to2, &tl2, NULL));
    TU_OK(flashc_attn_fwd(NULL, &tq, &tk, &tv, &tof, &tlf, NULL));
    TU_OK(flashc_attn_merge(&to1, &tl1, &to2, &tl2, &to, &tl));
    assert_true(tu_max_abs_diff(o, of, nq) <= 1e-5);
    assert_true(tu_max_abs_diff(l, lf, nl) <= 1e-5);
    /* lse is optional */
    float *o3 = tu_poisoned(nq);
    flashc_tensor to3 = to;
    to3.data = o3;
    TU_OK(flashc_attn_merge(&to1, &tl1, &to2, &tl2, &to3, NULL));
    assert_memory_equal(o3, o, nq * sizeof *o);
    /* an empty state (-inf) contributes nothing; two empty states give 0 and -inf */
    for (int64_t i = 0; i < nl; i++)
        l2[i] = -INFINITY;
    TU_OK(flashc_attn_merge(&to1, &tl1, &to2, &tl2, &to, &tl));
    assert_true(tu_max_abs_diff(o, o1, nq) <= 1e-6);
    for (int64_t i = 0; i < nl; i++)
        l1[i] = -INFINITY;
    TU_OK(flashc_attn_merge(&to1, &tl1, &to2, &tl2, &to, &tl));
    assert_false(tu_has_nan(o, nq));
    for (int64_t i = 0; i < nq; i++)
        assert_true(o[i] == 0.0f);
    for (int64_t i = 0; i < nl; i++)
        assert_true(isinf(l[i]) && l[i] < 0);
    /* bad input leaves the outputs untouched */
    float *keep = tu_copy(o, nq);
    flashc_tensor bad = tl2;
    bad.shape[2] = S + 1;
    assert_int_equal(flashc_attn_merge(&to1, &tl1, &to2, &bad, &to, &tl), FLASHC_ERR_INVALID_SHAPE);
    assert_int_equal(flashc_attn_merge(&to1, &tl1, &to2, &tl2, &to1, &tl), FLASHC_ERR_OVERLAP);
    assert_memory_equal(o, keep, nq * sizeof *o);
    free(q), free(k), free(v), free(o1), free(o2), free(o), free(of), free(o3), free(keep);
    free(l1), free(l2), free(l), free(lf);
}

int main(void)
{
    tu_seed_from_env();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_three_scores),
        cmocka_unit_test(test_seed_two_blocks),
        cmocka_unit_test(test_masked_and_empty),
        cmocka_unit_test(test_random_splits),
        cmocka_unit_test(test_merge_equals_one_pass),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
