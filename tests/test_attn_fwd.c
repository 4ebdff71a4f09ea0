/* test_attn_fwd.c — the CPU flash forward and the library's reference against an independent
 * float64 oracle, and the forward's behaviour beyond error (fresh random inputs, seed printed). */
#include "cases.h"
#include "common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The error-vs-reference cases (shapes, masks, tiles, GQA, head dims, Q x 100) are rows of the
 * one case table (tests/cases/table.c, run by test_cases on every kernel path). What stays here
 * is what the table cannot say: the library's float64 reference and the flash kernel against
 * an independent oracle (common.c's, a second implementation), tile counts, empty rows, strided
 * views, thread counts and custom scales. */

/* The library's naive reference and flash against tu_attn_ref64 on the table's plain (float32,
 * BSHD, no modifier) attention rows: guards the oracle the whole table trusts. */
static void test_reference_vs_oracle(void **state)
{
    (void)state;
    int n, ran = 0;
    const case_spec *t = cases_table(&n);
    for (int i = 0; i < n; i++) {
        case_spec c = t[i];
        if (strcmp(c.op, "attn") != 0 || c.dtype != FLASHC_F32 || c.bhsd || c.window ||
            c.window_right || c.softcap > 0.0f || c.alibi || c.dv || c.prop)
            continue;
        case_spec_defaults(&c);
        const int64_t nq = c.batch * c.sq * c.heads * c.d, nk = c.batch * c.sk * c.kv_heads * c.d;
        const int64_t nl = c.batch * c.heads * c.sq;
        float *q = tu_alloc_normal(nq, c.q_scale), *k = tu_alloc_normal(nk, 1),
              *v = tu_alloc_normal(nk, 1);
        float *o = tu_poisoned(nq), *lse = tu_poisoned(nl);
        float *on = tu_poisoned(nq), *lsen = tu_poisoned(nl);
        double *o64 = malloc((size_t)nq * sizeof *o64), *lse64 = malloc((size_t)nl * sizeof *lse64);
        flashc_tensor tq = flashc_tensor_4d(q, FLASHC_F32, c.batch, c.sq, c.heads, c.d);
        flashc_tensor tk = flashc_tensor_4d(k, FLASHC_F32, c.batch, c.sk, c.kv_heads, c.d);
        flashc_tensor tv = flashc_tensor_4d(v, FLASHC_F32, c.batch, c.sk, c.kv_heads, c.d);
        flashc_tensor to = flashc_tensor_4d(o, FLASHC_F32, c.batch, c.sq, c.heads, c.d);
        flashc_tensor tl = flashc_tensor_3d(lse, FLASHC_F32, c.batch, c.heads, c.sq);
        flashc_tensor ton = flashc_tensor_4d(on, FLASHC_F32, c.batch, c.sq, c.heads, c.d);
        flashc_tensor tln = flashc_tensor_3d(lsen, FLASHC_F32, c.batch, c.heads, c.sq);
        flashc_attn_params p = flashc_attn_params_default();
        p.causal = c.causal, p.block_q = c.br, p.block_k = c.bc;
        TU_OK(flashc_attn_fwd_supported(&p, &tq, &tk, &tv, &to, &tl));
        TU_OK(flashc_attn_fwd(&p, &tq, &tk, &tv, &to, &tl, NULL));
        TU_OK(flashc_attn_fwd_naive(&p, &tq, &tk, &tv, &ton, &tln, NULL));
        tu_attn_ref64(q, k, v, c.batch, c.sq, c.sk, c.heads, c.kv_heads, c.d,
                      1.0 / sqrt((double)c.d), c.causal, o64, lse64);
        const double tol = case_default_tol(&c);
        const double e64 = tu_max_abs_diff64(o, o64, nq), en64 = tu_max_abs_diff64(on, o64, nq);
        double e_lse = 0.0;
        for (int64_t j = 0; j < nl; j++)
            for (int w = 0; w < 2; w++) {
                const float x = w ? lsen[j] : lse[j];
                if (x == (float)lse64[j])
                    continue;
                const double d = fabs((double)x - lse64[j]) / fmax(1.0, fabs(lse64[j]));
                e_lse = isnan(d) ? INFINITY : fmax(e_lse, d);
            }
        char shape[200];
        case_describe(&c, shape, sizeof shape);
        if (!(e64 <= tol && en64 <= tol && e_lse <= tol) || tu_has_nan(o, nq) || tu_has_nan(on, nq))
            fail_msg("%s: |flash - oracle| %.2e |naive - oracle| %.2e lse %.2e (tol %.1e)", shape,
                     e64, en64, e_lse, tol);
        free(q), free(k), free(v), free(o), free(lse), free(on), free(lsen), free(o64), free(lse64);
        ran++;
    }
    print_message("  %d table rows against the independent oracle\n", ran);
    assert_true(ran >= 20);
}

/* Tile pairs computed: the seeds' block counts. */
static int64_t pairs(int64_t n, int64_t d, int64_t b, int causal)
{
    float *q = tu_alloc_normal(n * d, 1), *k = tu_alloc_normal(n * d, 1), *v = tu_alloc_normal(n * d, 1);
    float *o = tu_poisoned(n * d);
    flashc_tensor tq = flashc_tensor_4d(q, FLASHC_F32, 1, n, 1, d);
    flashc_tensor tk = flashc_tensor_4d(k, FLASHC_F32, 1, n, 1, d);
    flashc_tensor tv = flashc_tensor_4d(v, FLASHC_F32, 1, n, 1, d);
    flashc_tensor to = flashc_tensor_4d(o, FLASHC_F32, 1, n, 1, d);
    flashc_attn_params p = flashc_attn_params_default();
    p.causal = causal, p.block_q = b, p.block_k = b;
    flashc_attn_stats st = FLASHC_ATTN_STATS_INIT;
    TU_OK(flashc_attn_fwd(&p, &tq, &tk, &tv, &to, NULL, &st));
    assert_int_equal(st.tile_pairs_total, ((n + b - 1) / b) * ((n + b - 1) / b));
    free(q), free(k), free(v), free(o);
    return st.tile_pairs;
}

static void test_tile_pairs(void **state)
{
    (void)state;
    assert_int_equal(pairs(256, 64, 32, 0), 64);
    assert_int_equal(pairs(256, 64, 32, 1), 36);
    assert_int_equal(pairs(4096, 8, 128, 1), 528);
    assert_int_equal(pairs(2048, 8, 128, 1), 136);
}

/* Rows that see no key (causal, Sq > Sk) output exactly 0 and LSE = -inf, never NaN. */
static void test_fully_masked_rows(void **state)
{
    (void)state;
    const int64_t Sq = 8, Sk = 4, D = 16;
    float *q = tu_alloc_normal(Sq * D, 1), *k = tu_alloc_normal(Sk * D, 1), *v = tu_alloc_normal(Sk * D, 1);
    float *o = tu_poisoned(Sq * D), *lse = tu_poisoned(Sq);
    flashc_tensor tq = flashc_tensor_4d(q, FLASHC_F32, 1, Sq, 1, D);
    flashc_tensor tk = flashc_tensor_4d(k, FLASHC_F32, 1, Sk, 1, D);
    flashc_tensor tv = flashc_tensor_4d(v, FLASHC_F32, 1, Sk, 1, D);
    flashc_tensor to = flashc_tensor_4d(o, FLASHC_F32, 1, Sq, 1, D);
    flashc_tensor tl = flashc_tensor_3d(lse, FLASHC_F32, 1, 1, Sq);
    flashc_attn_params p = flashc_attn_params_default();
    p.causal = 1;
    for (int naive = 0; naive < 2; naive++) {
        TU_OK((naive ? flashc_attn_fwd_naive : flashc_attn_fwd)(&p, &tq, &tk, &tv, &to, &tl, NULL));
        assert_false(tu_has_nan(o, Sq * D));
        for (int64_t i = 0; i < Sq - Sk; i++) { /* rows 0..3 see nothing */
            assert_true(isinf(lse[i]) && lse[i] < 0);
            for (int64_t d = 0; d < D; d++)
                assert_true(o[i * D + d] == 0.0f);
        }
        for (int64_t i = Sq - Sk; i < Sq; i++)
            assert_true(isfinite(lse[i]));
    }
    free(q), free(k), free(v), free(o), free(lse);
}

/* q, k, v, o given as (B, H, S, D) buffers through strided (B, S, H, D) views. */
static void test_strided_bhsd(void **state)
{
    (void)state;
    const int64_t B = 2, S = 45, H = 4, Hkv = 2, D = 24;
    const int64_t nq = B * H * S * D, nk = B * Hkv * S * D;
    float *q = tu_alloc_normal(nq, 1), *k = tu_alloc_normal(nk, 1), *v = tu_alloc_normal(nk, 1);
    float *o = tu_poisoned(nq);
    /* contiguous (B, S, H, D) copies for the reference */
    float *qc = malloc(nq * 4), *kc = malloc(nk * 4), *vc = malloc(nk * 4), *oc = tu_poisoned(nq);
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++)
            for (int64_t d = 0; d < D; d++) {
                for (int64_t h = 0; h < H; h++)
                    qc[((b * S + s) * H + h) * D + d] = q[((b * H + h) * S + s) * D + d];
                for (int64_t h = 0; h < Hkv; h++) {
                    kc[((b * S + s) * Hkv + h) * D + d] = k[((b * Hkv + h) * S + s) * D + d];
                    vc[((b * S + s) * Hkv + h) * D + d] = v[((b * Hkv + h) * S + s) * D + d];
                }
            }
    flashc_tensor tq = flashc_tensor_4d(q, FLASHC_F32, B, S, H, D);
    tq.stride[0] = H * S * D, tq.stride[1] = D, tq.stride[2] = S * D, tq.stride[3] = 1;
    flashc_tensor tk = flashc_tensor_4d(k, FLASHC_F32, B, S, Hkv, D);
    tk.stride[0] = Hkv * S * D, tk.stride[1] = D, tk.stride[2] = S * D, tk.stride[3] = 1;
    flashc_tensor tv = tk;
    tv.data = v;
    flashc_tensor to = tq;
    to.data = o;
    flashc_tensor tqc = flashc_tensor_4d(qc, FLASHC_F32, B, S, H, D);
    flashc_tensor tkc = flashc_tensor_4d(kc, FLASHC_F32, B, S, Hkv, D);
    flashc_tensor tvc = flashc_tensor_4d(vc, FLASHC_F32, B, S, Hkv, D);
    flashc_tensor toc = flashc_tensor_4d(oc, FLASHC_F32, B, S, H, D);
    flashc_attn_params p = flashc_attn_params_default();
    p.causal = 1, p.block_q = 16, p.block_k = 8;
    TU_OK(flashc_attn_fwd(&p, &tq, &tk, &tv, &to, NULL, NULL));
    TU_OK(flashc_attn_fwd_naive(&p, &tqc, &tkc, &tvc, &toc, NULL, NULL));
    double err = 0.0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t d = 0; d < D; d++)
                    err = fmax(err, fabs(o[((b * H + h) * S + s) * D + d] -
                                         oc[((b * S + s) * H + h) * D + d]));
    assert_false(tu_has_nan(o, nq));
    assert_true(err <= 1e-5);
    free(q), free(k), free(v), free(o), free(qc), free(kc), free(vc), free(oc);
}

/* Same result for 1 and 2 threads, and for a custom scale, negative too (the header allows
 * any finite scale: the smallest q.k then dominates, and masked scores must stay masked). */
static void test_threads_and_scale(void **state)
{
    (void)state;
    const int64_t S = 100, H = 3, D = 32, n = S * H * D;
    float *q = tu_alloc_normal(n, 1), *k = tu_alloc_normal(n, 1), *v = tu_alloc_normal(n, 1);
    float *o1 = tu_poisoned(n), *o2 = tu_poisoned(n);
    double *o64 = malloc(n * sizeof *o64), *l64 = malloc(S * H * sizeof *l64);
    flashc_tensor tq = flashc_tensor_4d(q, FLASHC_F32, 1, S, H, D);
    flashc_tensor tk = flashc_tensor_4d(k, FLASHC_F32, 1, S, H, D);
    flashc_tensor tv = flashc_tensor_4d(v, FLASHC_F32, 1, S, H, D);
    flashc_tensor t1 = flashc_tensor_4d(o1, FLASHC_F32, 1, S, H, D);
    flashc_tensor t2 = flashc_tensor_4d(o2, FLASHC_F32, 1, S, H, D);
    static const float scales[2] = {0.37f, -0.37f};
    for (int s = 0; s < 2; s++) {
        flashc_attn_params p = flashc_attn_params_default();
        p.has_softmax_scale = 1, p.softmax_scale = scales[s], p.causal = 1, p.num_threads = 1;
        TU_OK(flashc_attn_fwd(&p, &tq, &tk, &tv, &t1, NULL, NULL));
        p.num_threads = 2;
        TU_OK(flashc_attn_fwd(&p, &tq, &tk, &tv, &t2, NULL, NULL));
        assert_memory_equal(o1, o2, n * sizeof *o1); /* rows are independent: bit-identical */
        tu_attn_ref64(q, k, v, 1, S, S, H, H, D, scales[s], 1, o64, l64);
        assert_true(tu_max_abs_diff64(o1, o64, n) <= 1e-5);
    }
    free(q), free(k), free(v), free(o1), free(o2), free(o64), free(l64);
}

int main(void)
{
    tu_seed_from_env();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_vs_oracle),
        cmocka_unit_test(test_tile_pairs),
        cmocka_unit_test(test_fully_masked_rows),
        cmocka_unit_test(test_strided_bhsd),
        cmocka_unit_test(test_threads_and_scale),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
