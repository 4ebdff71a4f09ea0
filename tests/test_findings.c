/*
 * test_findings.c — regression tests of the reliability findings of issue 10 outside the
 * attention kernels (those are in test_findings_attn.c):
 *   F1, F2  size products of the attention workspaces wrap / unbounded work per call
 *   F3      signed overflow validating flashc_swiglu
 *   F7      valid output layouts refused; what the overlap check really checks
 *   F8      flashc_attn_merge and the -inf promise
 *   F11     a successful call keeps flashc_last_error()
 *   F12     misaligned data is refused with a clear status
 *   RMSNorm |x| >~ 2e19 (x^2 overflows) and tiny |x| (x^2 underflows)
 *   the per-call bounds FLASHC_MAX_ELEMENTS and FLASHC_MAX_ATTN_WORK
 * Each test failed (crashed, or aborted under UBSan) before its fix.
 */
#include "common.h"
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int has(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

/* ---- F1 / F2: attention sizes ------------------------------------------------------------ */

/* q, o (1, 4, 1, 1); k = v = (1, Sk, 1, 1) broadcast (all strides 0) over one float. */
typedef struct bcast {
    float q[4], o[4], o0[4], lse[4], lse0[4], kv;
    flashc_tensor tq, tk, tv, to, tl;
} bcast;

static void bcast_setup(bcast *s, int64_t Sk)
{
    for (int i = 0; i < 4; i++)
        s->q[i] = 0.5f * (float)i, s->o[i] = s->o0[i] = NAN, s->lse[i] = s->lse0[i] = NAN;
    s->kv = 1.0f;
    s->tq = flashc_tensor_4d(s->q, FLASHC_F32, 1, 4, 1, 1);
    s->to = flashc_tensor_4d(s->o, FLASHC_F32, 1, 4, 1, 1);
    s->tl = flashc_tensor_3d(s->lse, FLASHC_F32, 1, 1, 4);
    s->tk = flashc_tensor_4d(&s->kv, FLASHC_F32, 1, 1, 1, 1);
    s->tk.shape[1] = Sk;
    for (int i = 0; i < 4; i++)
        s->tk.stride[i] = 0;
    s->tv = s->tk;
}

static void assert_untouched(const bcast *s)
{
    assert_memory_equal(s->o, s->o0, sizeof s->o);
    assert_memory_equal(s->lse, s->lse0, sizeof s->lse);
}

static void test_f1_naive_sp_size(void **state)
{
    (void)state;
    static bcast s;
    bcast_setup(&s, (INT64_C(1) << 60) + 1); /* Sq * Sk * 4 wrapped to 16 bytes */
    flashc_status st = flashc_attn_fwd_naive(NULL, &s.tq, &s.tk, &s.tv, &s.to, &s.tl, NULL);
    print_message("  naive Sk = 2^60 + 1: %s: %s\n", flashc_status_string(st), flashc_last_error());
    assert_int_equal(st, FLASHC_ERR_UNSUPPORTED);
    assert_untouched(&s);
    /* Sq * Sk within the element bound but S and P of one head too large to count in bytes is
     * the same check; a plain large broadcast below the bounds still runs */
    bcast_setup(&s, 3000);
    TU_OK(flashc_attn_fwd_naive(NULL, &s.tq, &s.tk, &s.tv, &s.to, &s.tl, NULL));
    for (int i = 0; i < 4; i++) /* every key equal: o = v = 1, lse = score + log(Sk) */
        assert_float_equal(s.o[i], 1.0, 1e-6);
    assert_float_equal(s.lse[3], 1.5 + log(3000.0), 1e-4);
}

static void test_f2_flash_workspace_size(void **state)
{
    (void)state;
    static bcast s;
    bcast_setup(&s, INT64_C(1) << 58);
    flashc_attn_params p = flashc_attn_params_default();
    p.block_k = INT64_C(1) << 58;
    flashc_status st = flashc_attn_fwd_supported(&p, &s.tq, &s.tk, &s.tv, &s.to, &s.tl);
    print_message("  supported, Sk = block_k = 2^58: %s: %s\n", flashc_status_string(st),
                  flashc_last_error());
    assert_int_not_equal(st, FLASHC_OK);
    assert_int_equal(flashc_attn_fwd(&p, &s.tq, &s.tk, &s.tv, &s.to, &s.tl, NULL), st);
    assert_untouched(&s);
    /* default tiles, Sk = 2^40: refused at once instead of running for minutes */
    bcast_setup(&s, INT64_C(1) << 40);
    st = flashc_attn_fwd(NULL, &s.tq, &s.tk, &s.tv, &s.to, &s.tl, NULL);
    assert_int_equal(st, FLASHC_ERR_UNSUPPORTED);
    assert_true(has(flashc_last_error(), "FLASHC_MAX_ELEMENTS"));
    assert_untouched(&s);
    /* a huge tile on a short sequence is clamped to the sequence, not refused */
    bcast_setup(&s, 50);
    p.block_k = INT64_C(1) << 58, p.block_q = INT64_C(1) << 60;
    TU_OK(flashc_attn_fwd(&p, &s.tq, &s.tk, &s.tv, &s.to, &s.tl, NULL));
    for (int i = 0; i < 4; i++)
        assert_float_equal(s.o[i], 1.0, 1e-6);
}

/* The forward's work B * Hq * Sq * Sk * D is not bounded by its tensors' sizes: o bounds
 * B * Sq * Hq * D and k bounds B * Sk * Hkv * D, each by FLASHC_MAX_ELEMENTS, so their product
 * may reach 2^76. Sq = 2^23 (o is 32 MiB), Sk = 2^38 broadcast keys, D = 1: work 2^61. */
static void test_work_bound(void **state)
{
    (void)state;
    /* naive backward: q, o, dout broadcast (inputs), dq is an output: Sq = 1; k, v broadcast,
     * dk, dv outputs of Sk rows... every output injective bounds its own size. The product
     * Sq * Sk * Hq * D is what S, P cost: reach 2^61 with q and k broadcast over 2^31 rows
     * and only o, dq (Sq rows) and dk, dv (Sk rows) real. Too big to allocate here; so test
     * the check on the forward with Sq and Sk both broadcast-sized where o is small: not
     * possible either (o has Sq rows). The forward's work is bounded by o's elements times
     * Sk, which FLASHC_MAX_ELEMENTS bounds at 2^76: so the work bound is needed. Sq = 2^20
     * rows of o cost 4 MiB; Sk = 2^38 broadcast keys; D = 1: work 2^58 is allowed, 2^60+ is
     * not: Sq = 2^23 rows (32 MiB of o) x Sk = 2^38 = 2^61. */
    const int64_t Sq = INT64_C(1) << 23, Sk = INT64_C(1) << 38;
    float *q = calloc((size_t)Sq, sizeof(float)), *o = malloc((size_t)Sq * sizeof(float));
    assert_non_null(q), assert_non_null(o);
    memset(o, 0x7f, (size_t)Sq * sizeof(float));
    float kv = 1.0f;
    flashc_tensor tq = flashc_tensor_4d(q, FLASHC_F32, 1, Sq, 1, 1);
    flashc_tensor to = flashc_tensor_4d(o, FLASHC_F32, 1, Sq, 1, 1);
    flashc_tensor tk = flashc_tensor_4d(&kv, FLASHC_F32, 1, 1, 1, 1);
    tk.shape[1] = Sk;
    for (int i = 0; i < 4; i++)
        tk.stride[i] = 0;
    flashc_status st = flashc_attn_fwd(NULL, &tq, &tk, &tk, &to, NULL, NULL);
    print_message("  work 2^61: %s: %s\n", flashc_status_string(st), flashc_last_error());
    assert_int_equal(st, FLASHC_ERR_UNSUPPORTED);
    assert_true(has(flashc_last_error(), "FLASHC_MAX_ATTN_WORK"));
    assert_int_equal(flashc_attn_fwd_naive(NULL, &tq, &tk, &tk, &to, NULL, NULL), st);
    for (int64_t i = 0; i < Sq; i += 4099)
        assert_true(((uint32_t *)o)[i] == 0x7f7f7f7fu);
    free(q), free(o);
}

/* Within both bounds (Sq * Sk = 2^59), tiles as large as the sequences make one thread's
 * Br x Bc score tile 2^61 bytes: 4 threads' workspaces do not fit in 64 bits. The naive path's
 * S and P (2^61 bytes each) fit the count and fail to allocate. */
static void test_tile_workspace_bound(void **state)
{
    (void)state;
    const int64_t Sq = INT64_C(1) << 21, Sk = INT64_C(1) << 38;
    float *q = calloc((size_t)Sq, sizeof(float)), *o = malloc((size_t)Sq * sizeof(float));
    assert_non_null(q), assert_non_null(o);
    memset(o, 0x7f, (size_t)Sq * sizeof(float));
    float kv = 1.0f;
    flashc_tensor tq = flashc_tensor_4d(q, FLASHC_F32, 1, Sq, 1, 1);
    flashc_tensor to = flashc_tensor_4d(o, FLASHC_F32, 1, Sq, 1, 1);
    flashc_tensor tk = flashc_tensor_4d(&kv, FLASHC_F32, 1, 1, 1, 1);
    tk.shape[1] = Sk;
    for (int i = 0; i < 4; i++)
        tk.stride[i] = 0;
    flashc_attn_params p = flashc_attn_params_default();
    p.block_q = Sq, p.block_k = Sk, p.num_threads = 4;
    flashc_status st = flashc_attn_fwd_supported(&p, &tq, &tk, &tk, &to, NULL);
    print_message("  tiles 2^21 x 2^38, 4 threads: %s: %s\n", flashc_status_string(st),
                  flashc_last_error());
    assert_int_equal(st, FLASHC_ERR_OVERFLOW);
    assert_true(has(flashc_last_error(), "workspace"));
    assert_int_equal(flashc_attn_fwd(&p, &tq, &tk, &tk, &to, NULL, NULL), FLASHC_ERR_OVERFLOW);
    p.block_q = p.block_k = 0; /* (tiles are validated for every path, the naive's too) */
    st = flashc_attn_fwd_naive(&p, &tq, &tk, &tk, &to, NULL, NULL);
    assert_int_equal(st, FLASHC_ERR_OUT_OF_MEMORY);
    for (int64_t i = 0; i < Sq; i += 4099)
        assert_true(((uint32_t *)o)[i] == 0x7f7f7f7fu);
    free(q), free(o);
}

/* ---- the element bound on the row ops ---------------------------------------------------- */

static void test_element_bound_rows(void **state)
{
    (void)state;
    float x = 1.0f, w[4] = {1, 1, 1, 1}, y[4] = {NAN, NAN, NAN, NAN};
    flashc_tensor tx = flashc_tensor_2d(&x, FLASHC_F32, INT64_C(1) << 37, 4);
    tx.stride[0] = tx.stride[1] = 0; /* a broadcast input of 2^39 elements */
    flashc_tensor tw = flashc_tensor_1d(w, FLASHC_F32, 4);
    flashc_tensor ty = flashc_tensor_2d(y, FLASHC_F32, 1, 4);
    ty.shape[0] = INT64_C(1) << 37; /* would be injective, just far too long */
    assert_int_equal(flashc_rmsnorm(&tx, &tw, 0.0f, &ty), FLASHC_ERR_UNSUPPORTED);
    assert_true(has(flashc_last_error(), "FLASHC_MAX_ELEMENTS"));
    for (int i = 0; i < 4; i++)
        assert_true(isnan(y[i]));
    flashc_softmax_state sm = flashc_softmax_state_init();
    assert_int_equal(flashc_online_softmax(&sm, &x, (INT64_C(1) << 38) + 1), FLASHC_ERR_UNSUPPORTED);
    assert_true(sm.m == -INFINITY && sm.l == 0.0f);
}

/* ---- thread counts and the tensor helpers at the ends of int64 ---------------------------- */

static void test_thread_bound_and_huge_helpers(void **state)
{
    (void)state;
    float q[4] = {1, 2, 3, 4}, o[4] = {NAN, NAN, NAN, NAN};
    flashc_tensor tq = flashc_tensor_4d(q, FLASHC_F32, 1, 4, 1, 1);
    flashc_tensor to = flashc_tensor_4d(o, FLASHC_F32, 1, 4, 1, 1);
    flashc_attn_params p = flashc_attn_params_default();
    p.num_threads = FLASHC_MAX_THREADS + 1; /* libgomp aborts when it cannot create them */
    assert_int_equal(flashc_attn_fwd(&p, &tq, &tq, &tq, &to, NULL, NULL), FLASHC_ERR_INVALID_ARGUMENT);
    assert_int_equal(flashc_attn_fwd_naive(&p, &tq, &tq, &tq, &to, NULL, NULL),
                     FLASHC_ERR_INVALID_ARGUMENT);
    assert_true(isnan(o[0]));
    const int before = flashc_get_num_threads();
    flashc_set_num_threads(1 << 30);
    assert_int_equal(flashc_get_num_threads(), FLASHC_MAX_THREADS);
    flashc_set_num_threads(0);
    assert_int_equal(flashc_get_num_threads(), before);
    /* contiguous helpers whose size product overflows: refused by validation (the product
     * overflowed inside flashc_tensor_4d before: UBSan abort) */
    const int64_t big = INT64_C(1) << 40;
    flashc_tensor h = flashc_tensor_4d(q, FLASHC_F32, big, big, big, 2);
    flashc_tensor h2 = flashc_tensor_2d(q, FLASHC_F32, INT64_MAX, INT64_MAX);
    float w[2] = {1, 1};
    flashc_tensor tw = flashc_tensor_1d(w, FLASHC_F32, 2);
    assert_int_equal(flashc_rmsnorm(&h2, &tw, 0.0f, &h2), FLASHC_ERR_OVERFLOW);
    assert_int_equal(flashc_attn_fwd(NULL, &h, &h, &h, &to, NULL, NULL), FLASHC_ERR_OVERFLOW);
}

/* ---- F3: swiglu validation --------------------------------------------------------------- */

static void test_f3_swiglu_shape_overflow(void **state)
{
    (void)state;
    float gu[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[2] = {NAN, NAN};
    flashc_tensor tg = flashc_tensor_2d(gu, FLASHC_F32, 2, 4);
    flashc_tensor to = flashc_tensor_2d(out, FLASHC_F32, 2, (INT64_C(1) << 62) + 5);
    to.stride[0] = to.stride[1] = 0; /* out->shape[1] * 2 overflowed before (UBSan abort) */
    assert_int_equal(flashc_swiglu(&tg, &to), FLASHC_ERR_UNSUPPORTED); /* > 2^38 elements */
    assert_int_equal(flashc_swiglu_naive(&tg, &to), FLASHC_ERR_UNSUPPORTED);
    /* within the element bound: the width comparison itself */
    to.shape[0] = 1, to.shape[1] = INT64_C(1) << 37;
    assert_int_equal(flashc_swiglu(&tg, &to), FLASHC_ERR_INVALID_SHAPE);
    assert_true(has(flashc_last_error(), "needs (T, I) = (2, 2)"));
    assert_true(isnan(out[0]) && isnan(out[1]));
}

/* ---- F7: output layouts ------------------------------------------------------------------ */

static int exact_injective(const flashc_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    int64_t *off = malloc((size_t)n * sizeof *off);
    for (int64_t e = 0; e < n; e++) {
        int64_t rem = e, o = 0;
        for (int i = t->ndim - 1; i >= 0; i--)
            o += rem % t->shape[i] * t->stride[i], rem /= t->shape[i];
        off[e] = o;
    }
    int ok = 1;
    for (int64_t a = 0; a < n && ok; a++)
        for (int64_t b = a + 1; b < n && ok; b++)
            ok = off[a] != off[b];
    free(off);
    return ok;
}

static void test_f7_output_layout_exact(void **state)
{
    (void)state;
    /* the case: out (2, 3) strides (3, 2) touches 0, 2, 4, 3, 5, 7 */
    float gu[12], out[8], want[8];
    for (int i = 0; i < 12; i++)
        gu[i] = 0.25f * (float)(i - 5);
    for (int i = 0; i < 8; i++)
        out[i] = want[i] = NAN;
    flashc_tensor tg = flashc_tensor_2d(gu, FLASHC_F32, 2, 6);
    flashc_tensor to = flashc_tensor_2d(out, FLASHC_F32, 2, 3);
    to.stride[0] = 3, to.stride[1] = 2;
    TU_OK(flashc_swiglu(&tg, &to));
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < 3; i++) {
            const float g = gu[t * 6 + i], u = gu[t * 6 + 3 + i];
            want[t * 3 + i * 2] = g / (1.0f + expf(-g)) * u;
        }
    for (int i = 0; i < 8; i++) {
        if (isnan(want[i]))
            assert_true(isnan(out[i])); /* offsets 1 and 6 are not part of the view */
        else
            assert_float_equal(out[i], want[i], 1e-6);
    }
    /* against a brute-force answer on random small layouts of up to 4 dims */
    float buf[1];
    int accepted = 0, refused = 0;
    for (int iter = 0; iter < 4000; iter++) {
        flashc_tensor t = flashc_tensor_1d(buf, FLASHC_F32, 1);
        t.ndim = 1 + (int)(tu_uniform() * 4);
        for (int i = 0; i < t.ndim; i++) {
            t.shape[i] = 1 + (int64_t)(tu_uniform() * 5);
            t.stride[i] = (int64_t)(tu_uniform() * 13);
        }
        const int want_ok = exact_injective(&t);
        const flashc_status st = flashc__check_output_layout("t", "t", &t);
        if (want_ok != (st == FLASHC_OK))
            fail_msg("layout (%lld %lld %lld %lld) strides (%lld %lld %lld %lld) ndim %d: "
                     "injective %d but check says %s",
                     (long long)t.shape[0], (long long)t.shape[1], (long long)t.shape[2],
                     (long long)t.shape[3], (long long)t.stride[0], (long long)t.stride[1],
                     (long long)t.stride[2], (long long)t.stride[3], t.ndim, want_ok,
                     flashc_status_string(st));
        accepted += want_ok, refused += !want_ok;
    }
    print_message("  %d injective layouts accepted, %d others refused\n", accepted, refused);
    /* two big dims, injective by the gcd rule though no stride exceeds the other's reach */
    flashc_tensor big = flashc_tensor_2d(buf, FLASHC_F32, 1000, 999);
    big.stride[0] = 999 * 7 + 1, big.stride[1] = 7; /* rows interleave; no element shared */
    assert_int_equal(flashc__check_output_layout("t", "t", &big), FLASHC_OK);
    big.stride[0] = 14, big.stride[1] = 7; /* row 1 = row 0 shifted by two: aliases */
    assert_int_equal(flashc__check_output_layout("t", "t", &big), FLASHC_ERR_INVALID_STRIDE);
    assert_true(has(flashc_last_error(), "share"));
}

static void test_f7_overlap_message(void **state)
{
    (void)state;
    /* gate|up and out interleaved in one buffer, sharing no element: refused, and the message
     * says that the check compares the byte ranges the views span */
    float buf[64];
    for (int i = 0; i < 64; i++)
        buf[i] = 1.0f;
    flashc_tensor tg = flashc_tensor_2d(buf, FLASHC_F32, 2, 4);
    tg.stride[0] = 16;
    flashc_tensor to = flashc_tensor_2d(buf + 8, FLASHC_F32, 2, 2);
    to.stride[0] = 16;
    assert_int_equal(flashc_swiglu(&tg, &to), FLASHC_ERR_OVERLAP);
    assert_true(has(flashc_last_error(), "byte range"));
}

/* ---- F8: merge with empty states --------------------------------------------------------- */

static void test_f8_merge_minus_inf(void **state)
{
    (void)state;
    float o1[4] = {1, 2, 3, 4}, o2[4] = {NAN, INFINITY, 5, 6}, o[4], l1 = 0.5f,
          l2 = -INFINITY, l;
    flashc_tensor t1 = flashc_tensor_4d(o1, FLASHC_F32, 1, 1, 1, 4);
    flashc_tensor t2 = flashc_tensor_4d(o2, FLASHC_F32, 1, 1, 1, 4);
    flashc_tensor to = flashc_tensor_4d(o, FLASHC_F32, 1, 1, 1, 4);
    flashc_tensor tl1 = flashc_tensor_3d(&l1, FLASHC_F32, 1, 1, 1);
    flashc_tensor tl2 = flashc_tensor_3d(&l2, FLASHC_F32, 1, 1, 1);
    flashc_tensor tl = flashc_tensor_3d(&l, FLASHC_F32, 1, 1, 1);
    TU_OK(flashc_attn_merge(&t1, &tl1, &t2, &tl2, &to, &tl));
    assert_memory_equal(o, o1, sizeof o); /* state 2 contributes nothing, NaN and Inf included */
    assert_true(l == l1);
    TU_OK(flashc_attn_merge(&t2, &tl2, &t1, &tl1, &to, &tl)); /* either order */
    assert_memory_equal(o, o1, sizeof o);
    l1 = -INFINITY; /* both empty: o = 0, L = -inf */
    o1[0] = NAN;
    TU_OK(flashc_attn_merge(&t1, &tl1, &t2, &tl2, &to, &tl));
    for (int i = 0; i < 4; i++)
        assert_true(o[i] == 0.0f && !signbit(o[i]));
    assert_true(l == -INFINITY);
    /* a finite LSE, however small its weight, still carries NaN through (the weight is not 0) */
    l1 = 0.0f, l2 = -300.0f;
    TU_OK(flashc_attn_merge(&t1, &tl1, &t1, &tl2, &to, &tl));
    assert_true(isnan(o[0]));
}

/* Found by fuzz_merge: a NaN LSE beside an empty state (-inf) was taken for empty too. */
static void test_merge_nan_lse(void **state)
{
    (void)state;
    float o1[2] = {1, 2}, o2[2] = {3, 4}, o[2], l1 = NAN, l2 = -INFINITY, l;
    flashc_tensor t1 = flashc_tensor_4d(o1, FLASHC_F32, 1, 1, 1, 2);
    flashc_tensor t2 = flashc_tensor_4d(o2, FLASHC_F32, 1, 1, 1, 2);
    flashc_tensor to = flashc_tensor_4d(o, FLASHC_F32, 1, 1, 1, 2);
    flashc_tensor tl1 = flashc_tensor_3d(&l1, FLASHC_F32, 1, 1, 1);
    flashc_tensor tl2 = flashc_tensor_3d(&l2, FLASHC_F32, 1, 1, 1);
    flashc_tensor tl = flashc_tensor_3d(&l, FLASHC_F32, 1, 1, 1);
    TU_OK(flashc_attn_merge(&t1, &tl1, &t2, &tl2, &to, &tl));
    assert_true(isnan(l) && isnan(o[0]) && isnan(o[1]));
    TU_OK(flashc_attn_merge(&t2, &tl2, &t1, &tl1, &to, &tl));
    assert_true(isnan(l) && isnan(o[0]) && isnan(o[1]));
    l2 = 0.0f;
    TU_OK(flashc_attn_merge(&t1, &tl1, &t2, &tl2, &to, &tl));
    assert_true(isnan(l) && isnan(o[0]));
}

/* ---- F11: success keeps the last error ---------------------------------------------------- */

static void test_f11_success_keeps_last_error(void **state)
{
    (void)state;
    float x[8], w[4] = {1, 1, 1, 1}, y[8], gu[8], o[4], l[2], q[8], lse[2];
    tu_fill_normal(x, 8, 1), tu_fill_normal(gu, 8, 1), tu_fill_normal(q, 8, 1);
    flashc_tensor tx = flashc_tensor_2d(x, FLASHC_F32, 2, 4), tw = flashc_tensor_1d(w, FLASHC_F32, 4);
    flashc_tensor ty = flashc_tensor_2d(y, FLASHC_F32, 2, 4);
    flashc_tensor tg = flashc_tensor_2d(gu, FLASHC_F32, 2, 4), tgo = flashc_tensor_2d(o, FLASHC_F32, 2, 2);
    flashc_tensor tq = flashc_tensor_4d(q, FLASHC_F32, 1, 2, 1, 4);
    flashc_tensor tqo = flashc_tensor_4d(y, FLASHC_F32, 1, 2, 1, 4);
    flashc_tensor tl = flashc_tensor_3d(lse, FLASHC_F32, 1, 1, 2);
    flashc_tensor tm = flashc_tensor_4d(o, FLASHC_F32, 1, 2, 1, 2);
    flashc_tensor tml = flashc_tensor_3d(l, FLASHC_F32, 1, 1, 2);
    assert_int_equal(flashc_rmsnorm(&tx, &tw, -1.0f, &ty), FLASHC_ERR_INVALID_ARGUMENT);
    char msg[512];
    strcpy(msg, flashc_last_error());
    assert_true(strlen(msg) > 0);
    flashc_softmax_state sm = flashc_softmax_state_init();
    TU_OK(flashc_rmsnorm(&tx, &tw, 1e-6f, &ty));
    TU_OK(flashc_rmsnorm_naive(&tx, &tw, 1e-6f, &ty));
    TU_OK(flashc_swiglu(&tg, &tgo));
    TU_OK(flashc_swiglu_naive(&tg, &tgo));
    TU_OK(flashc_online_softmax(&sm, x, 8));
    TU_OK(flashc_attn_fwd(NULL, &tq, &tq, &tq, &tqo, &tl, NULL));
    TU_OK(flashc_attn_fwd_naive(NULL, &tq, &tq, &tq, &tqo, &tl, NULL));
    TU_OK(flashc_attn_fwd_supported(NULL, &tq, &tq, &tq, &tqo, &tl));
    float oo[4], ll[2];
    flashc_tensor to2 = flashc_tensor_4d(oo, FLASHC_F32, 1, 2, 1, 2), tl2 = flashc_tensor_3d(ll, FLASHC_F32, 1, 1, 2);
    memcpy(o, gu, sizeof o), l[0] = 0.0f, l[1] = 1.0f;
    TU_OK(flashc_attn_merge(&tm, &tml, &tm, &tml, &to2, &tl2));
    assert_string_equal(flashc_last_error(), msg);
    float dq[8], dk[8], dv[8];
    flashc_tensor tdq = flashc_tensor_4d(dq, FLASHC_F32, 1, 2, 1, 4);
    flashc_tensor tdk = flashc_tensor_4d(dk, FLASHC_F32, 1, 2, 1, 4);
    flashc_tensor tdv = flashc_tensor_4d(dv, FLASHC_F32, 1, 2, 1, 4);
    TU_OK(flashc_attn_fwd(NULL, &tq, &tq, &tq, &tqo, &tl, NULL));
    TU_OK(flashc_attn_bwd(NULL, &tq, &tq, &tq, &tqo, &tq, &tl, &tdq, &tdk, &tdv, NULL));
    TU_OK(flashc_attn_bwd_naive(NULL, &tq, &tq, &tq, &tqo, &tq, &tl, &tdq, &tdk, &tdv, NULL));
    assert_string_equal(flashc_last_error(), msg);
    /* the next failure replaces it */
    assert_int_equal(flashc_swiglu(NULL, &tgo), FLASHC_ERR_NULL_POINTER);
    assert_string_not_equal(flashc_last_error(), msg);
}

/* ---- F12: alignment ---------------------------------------------------------------------- */

static void test_f12_misaligned(void **state)
{
    (void)state;
    static float store[64];
    for (int i = 0; i < 64; i++)
        store[i] = 1.0f;
    char *base = (char *)store;
    float w[4] = {1, 1, 1, 1}, y[8] = {0};
    flashc_tensor tx = flashc_tensor_2d(base + 2, FLASHC_F32, 2, 4); /* f32 at a 2-byte offset */
    flashc_tensor tw = flashc_tensor_1d(w, FLASHC_F32, 4), ty = flashc_tensor_2d(y, FLASHC_F32, 2, 4);
    assert_int_equal(flashc_rmsnorm(&tx, &tw, 0.0f, &ty), FLASHC_ERR_INVALID_ARGUMENT);
    assert_true(has(flashc_last_error(), "aligned"));
    tx.data = base + 4;
    TU_OK(flashc_rmsnorm(&tx, &tw, 0.0f, &ty)); /* element alignment is all that is needed */
    uint16_t h[16] = {0};
    flashc_tensor tb = flashc_tensor_2d((char *)h + 1, FLASHC_BF16, 2, 4);
    flashc_tensor tbo = flashc_tensor_2d(h + 8, FLASHC_BF16, 2, 2);
    assert_int_equal(flashc_swiglu(&tb, &tbo), FLASHC_ERR_INVALID_ARGUMENT);
    flashc_tensor tq = flashc_tensor_4d(base + 1, FLASHC_F32, 1, 2, 1, 4);
    flashc_tensor to = flashc_tensor_4d(y, FLASHC_F32, 1, 2, 1, 4);
    assert_int_equal(flashc_attn_fwd(NULL, &tq, &tq, &tq, &to, NULL, NULL),
                     FLASHC_ERR_INVALID_ARGUMENT);
    assert_int_equal(flashc_attn_fwd_naive(NULL, &tq, &tq, &tq, &to, NULL, NULL),
                     FLASHC_ERR_INVALID_ARGUMENT);
    flashc_softmax_state sm = flashc_softmax_state_init();
    assert_int_equal(flashc_online_softmax(&sm, (const float *)(base + 3), 4),
                     FLASHC_ERR_INVALID_ARGUMENT);
    assert_true(sm.m == -INFINITY);
}

/* ---- RMSNorm at the ends of the float32 range -------------------------------------------- */

static void rms_check(flashc_dtype dt, double mag, float eps, int naive, int residual)
{
    enum { T = 3, D = 37 };
    double xv[T * D], wv[D];
    unsigned char x[T * D * 4], r[T * D * 4], w[D * 4], y[T * D * 4];
    for (int i = 0; i < T * D; i++) {
        xv[i] = mag * (0.25 + tu_uniform()) * (tu_uniform() < 0.5 ? -1 : 1);
        flashc__store(x, dt, i, (float)(residual ? xv[i] * 0.5 : xv[i]));
        flashc__store(r, dt, i, (float)(residual ? xv[i] * 0.5 : 0.0));
    }
    for (int d = 0; d < D; d++)
        flashc__store(w, dt, d, (float)(0.5 + tu_uniform()));
    for (int i = 0; i < T * D; i++) /* the values the op sees (the stored residual sum) */
        xv[i] = (double)flashc__load(x, dt, i) + (double)flashc__load(r, dt, i);
    for (int d = 0; d < D; d++)
        wv[d] = flashc__load(w, dt, d);
    flashc_tensor tx = flashc_tensor_2d(x, dt, T, D), tr = flashc_tensor_2d(r, dt, T, D);
    flashc_tensor tw = flashc_tensor_1d(w, dt, D), ty = flashc_tensor_2d(y, dt, T, D);
    if (residual)
        TU_OK(naive ? flashc_rmsnorm_residual_naive(&tx, &tr, &tw, eps, &ty)
                    : flashc_rmsnorm_residual(&tx, &tr, &tw, eps, &ty));
    else
        TU_OK(naive ? flashc_rmsnorm_naive(&tx, &tw, eps, &ty) : flashc_rmsnorm(&tx, &tw, eps, &ty));
    const double tol = dt == FLASHC_F32 ? 2e-5 : 2e-2;
    for (int t = 0; t < T; t++) {
        double ss = 0.0, xs = 0.0;
        for (int d = 0; d < D; d++)
            xs = fmax(xs, fabs(xv[t * D + d]));
        for (int d = 0; d < D; d++)
            ss += (xv[t * D + d] / xs) * (xv[t * D + d] / xs);
        const double rstd = 1.0 / (xs * sqrt(ss / D + (double)eps / (xs * xs)));
        for (int d = 0; d < D; d++) {
            const double want = xv[t * D + d] * rstd * wv[d];
            const double got = flashc__load(y, dt, t * D + d);
            if (!(fabs(got - want) <= tol * fmax(1.0, fabs(want))))
                fail_msg("rmsnorm%s%s %s |x| ~ %g: y[%d][%d] = %g, want %g", naive ? "_naive" : "",
                         residual ? " residual" : "", flashc__dtype_name(dt), mag, t, d, got, want);
        }
    }
}

static void test_rmsnorm_extreme_magnitudes(void **state)
{
    (void)state;
    const flashc_dtype dts[2] = {FLASHC_F32, FLASHC_BF16};
    for (int k = 0; k < 2; k++)
        for (int naive = 0; naive < 2; naive++)
            for (int res = 0; res < 2; res++) {
                rms_check(dts[k], 3e19, 1e-6f, naive, res);  /* x^2 overflows float32 */
                rms_check(dts[k], 1e38, 1e-6f, naive, res);  /* near FLT_MAX */
                rms_check(dts[k], 1e-25, 0.0f, naive, res);  /* x^2 underflows; eps 0 */
                rms_check(dts[k], 1e-39, 0.0f, naive, res);  /* subnormal x: 1/|x| overflows */
                rms_check(dts[k], 2.5e38, 0.0f, naive, res); /* rstd is subnormal */
                rms_check(dts[k], 1.0, 1e-6f, naive, res);   /* the ordinary case */
            }
    rms_check(FLASHC_F16, 3e4, 1e-6f, 0, 0); /* f16: x^2 is formed in float32: fine */
    rms_check(FLASHC_F16, 3e4, 1e-6f, 1, 1);
}

/* The fuzz_rmsnorm finding of 2026-12-01 (fuzz/crash-rmsnorm-open-b7dc42af): D = 1, eps = 0,
 * one subnormal x. The float32 rstd = 1/|x| overflowed to inf and y came out -inf; y is
 * sign(x) * w. Every row kernel of the machine's table and the scalar one. */
static void test_rmsnorm_subnormal_row(void **state)
{
    (void)state;
    float x[3] = {1.76e-41f, -3e-44f, 6.875f}, r[3] = {0.0f, 0.0f, 0.0f}, w[1] = {-0.0625f};
    float y[3];
    flashc_tensor tx = flashc_tensor_2d(x, FLASHC_F32, 3, 1), tw = flashc_tensor_1d(w, FLASHC_F32, 1);
    flashc_tensor ty = flashc_tensor_2d(y, FLASHC_F32, 3, 1), tr = flashc_tensor_2d(r, FLASHC_F32, 3, 1);
    const float want[3] = {-0.0625f, 0.0625f, -0.0625f};
    for (int res = 0; res < 2; res++) {
        TU_OK(res ? flashc_rmsnorm_residual(&tx, &tr, &tw, 0.0f, &ty)
                  : flashc_rmsnorm(&tx, &tw, 0.0f, &ty));
        for (int i = 0; i < 3; i++)
            if (!(fabsf(y[i] - want[i]) <= 1e-7f))
                fail_msg("rmsnorm%s x = %g: y = %g, want %g", res ? "_residual" : "", x[i], y[i],
                         want[i]);
    }
}

/* The backward at the ends of the float32 range (a fuzz_rows_bwd finding of 2026-12-01): x^2
 * overflowed the float32 sum (|x| ~ 3e19: dx = inf / NaN) and dy * x overflowed before the
 * rstd that brings it back (dw = inf); both must match the float64 reference. */
static void test_rmsnorm_bwd_extremes(void **state)
{
    (void)state;
    enum { T = 3, D = 37 };
    static const double mags[3] = {3e19, 1e-30, 1.0};
    for (int m = 0; m < 3; m++) {
        float x[T * D], w[D], dy[T * D], dx[T * D], dw[D], dx2[T * D], dw2[D];
        for (int i = 0; i < T * D; i++) {
            x[i] = (float)(mags[m] * (0.25 + tu_uniform()) * (tu_uniform() < 0.5 ? -1 : 1));
            dy[i] = (float)(m == 2 ? 3e37 : 1.0) * (float)(tu_uniform() - 0.5);
        }
        for (int d = 0; d < D; d++)
            w[d] = (float)(0.5 + tu_uniform());
        flashc_tensor tx = flashc_tensor_2d(x, FLASHC_F32, T, D), tw = flashc_tensor_1d(w, FLASHC_F32, D);
        flashc_tensor tg = flashc_tensor_2d(dy, FLASHC_F32, T, D);
        flashc_tensor tdx = flashc_tensor_2d(dx, FLASHC_F32, T, D), tdw = flashc_tensor_1d(dw, FLASHC_F32, D);
        flashc_tensor tdx2 = flashc_tensor_2d(dx2, FLASHC_F32, T, D), tdw2 = flashc_tensor_1d(dw2, FLASHC_F32, D);
        TU_OK(flashc_rmsnorm_bwd(&tx, &tw, &tg, NULL, 0.0f, &tdx, &tdw));
        TU_OK(flashc_rmsnorm_bwd_naive(&tx, &tw, &tg, NULL, 0.0f, &tdx2, &tdw2));
        /* tolerances relative to the sums of magnitudes (the terms cancel: dw sums dy of both
         * signs, dx subtracts two terms), float32 arithmetic */
        double dwb[D] = {0};
        for (int t = 0; t < T; t++) {
            double ss = 0.0, gx = 0.0;
            for (int d = 0; d < D; d++)
                ss += (double)x[t * D + d] * x[t * D + d],
                    gx += fabs((double)dy[t * D + d] * w[d] * x[t * D + d]);
            const double r = 1.0 / sqrt(ss / D);
            for (int d = 0; d < D; d++) {
                const int i = t * D + d;
                const double bound = r * (fabs((double)dy[i] * w[d]) + fabs((double)x[i]) * r * r * gx / D);
                dwb[d] += fabs((double)dy[i] * x[i] * r);
                if (!(fabs((double)dx[i] - dx2[i]) <= 1e-5 * bound))
                    fail_msg("|x| ~ %g: dx[%d] = %g, want %g", mags[m], i, dx[i], dx2[i]);
            }
        }
        for (int d = 0; d < D; d++)
            if (!(fabs((double)dw[d] - dw2[d]) <= 1e-5 * dwb[d]))
                fail_msg("|x| ~ %g: dw[%d] = %g, want %g", mags[m], d, dw[d], dw2[d]);
    }
}

int main(void)
{
    tu_seed_from_env();
    /* FLASHC_TEST_FILTER / _SKIP: test-name patterns, e.g. test_f8* (tu_select_tests) */
    struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f1_naive_sp_size),
        cmocka_unit_test(test_f2_flash_workspace_size),
        cmocka_unit_test(test_work_bound),
        cmocka_unit_test(test_tile_workspace_bound),
        cmocka_unit_test(test_element_bound_rows),
        cmocka_unit_test(test_f3_swiglu_shape_overflow),
        cmocka_unit_test(test_f7_output_layout_exact),
        cmocka_unit_test(test_f7_overlap_message),
        cmocka_unit_test(test_f8_merge_minus_inf),
        cmocka_unit_test(test_f11_success_keeps_last_error),
        cmocka_unit_test(test_f12_misaligned),
        cmocka_unit_test(test_rmsnorm_extreme_magnitudes),
        cmocka_unit_test(test_rmsnorm_subnormal_row),
        cmocka_unit_test(test_rmsnorm_bwd_extremes),
        cmocka_unit_test(test_thread_bound_and_huge_helpers),
        cmocka_unit_test(test_merge_nan_lse),
    };
    return tu_run_selected_tests(tests);
}
