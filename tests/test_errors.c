/* test_errors.c — bad input: every case gets its specific status and a detail message, and
 * leaves every output untouched (outputs are poisoned first and compared bit for bit). */
#include "common.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

enum { B = 2, SQ = 9, SK = 11, HQ = 4, HKV = 2, D = 8 };
enum { NQ = B * SQ * HQ * D, NK = B * SK * HKV * D, NL = B * HQ * SQ };

typedef struct setup {
    float q[NQ], k[NK], v[NK], o[NQ], lse[NL];
    flashc_tensor tq, tk, tv, to, tl;
    flashc_attn_params p;
    flashc_tensor *lse_arg;
} setup;

static void good(setup *s)
{
    tu_fill_normal(s->q, NQ, 1), tu_fill_normal(s->k, NK, 1), tu_fill_normal(s->v, NK, 1);
    for (int i = 0; i < NQ; i++)
        s->o[i] = NAN;
    for (int i = 0; i < NL; i++)
        s->lse[i] = NAN;
    s->tq = flashc_tensor_4d(s->q, FLASHC_F32, B, SQ, HQ, D);
    s->tk = flashc_tensor_4d(s->k, FLASHC_F32, B, SK, HKV, D);
    s->tv = flashc_tensor_4d(s->v, FLASHC_F32, B, SK, HKV, D);
    s->to = flashc_tensor_4d(s->o, FLASHC_F32, B, SQ, HQ, D);
    s->tl = flashc_tensor_3d(s->lse, FLASHC_F32, B, HQ, SQ);
    s->p = flashc_attn_params_default();
    s->lse_arg = &s->tl;
}

typedef struct bad_case {
    const char *name;
    void (*mutate)(setup *s);
    flashc_status want;
} bad_case;

static void m_null_q_data(setup *s) { s->tq.data = NULL; }
static void m_zero_seqlen(setup *s) { s->tq.shape[1] = 0; }
static void m_negative_heads(setup *s) { s->tk.shape[2] = -2; }
static void m_wrong_rank(setup *s) { s->tv.ndim = 3; }
static void m_negative_stride(setup *s) { s->tk.stride[1] = -16; }
static void m_heads_not_multiple(setup *s) { s->tk.shape[2] = 3, s->tv.shape[2] = 3; }
static void m_k_v_heads_differ(setup *s) { s->tv.shape[2] = 1; }
static void m_head_dim_k(setup *s) { s->tk.shape[3] = 4; }
static void m_head_dim_v(setup *s) { s->tv.shape[3] = 4; }
static void m_batch_mismatch(setup *s) { s->tk.shape[0] = 1, s->tv.shape[0] = 1; }
static void m_seqlen_kv_mismatch(setup *s) { s->tv.shape[1] = SK - 1; }
static void m_o_shape(setup *s) { s->to.shape[1] = SQ - 1; }
static void m_o_overlaps_q(setup *s) { s->to.data = s->q; }
static void m_o_overlaps_v(setup *s) { s->to.data = s->v + 3; }
static void m_lse_overlaps_o(setup *s) { s->tl.data = s->o + 5; }
static void m_bad_dtype(setup *s) { s->tq.dtype = (flashc_dtype)7; }
static void m_dtype_mismatch(setup *s) { s->tk.dtype = FLASHC_F16; }
static void m_lse_dtype(setup *s) { s->tl.dtype = FLASHC_BF16; }
static void m_lse_shape(setup *s) { s->tl.shape[1] = HKV; }
static void m_scale_nan(setup *s) { s->p.has_softmax_scale = 1, s->p.softmax_scale = NAN; }
static void m_scale_inf(setup *s) { s->p.has_softmax_scale = 1, s->p.softmax_scale = INFINITY; }
static void m_negative_tile(setup *s) { s->p.block_q = -1; }
static void m_negative_threads(setup *s) { s->p.num_threads = -3; }
static void m_bad_device(setup *s) { s->tk.device = (flashc_device)9; }
static void m_device_mismatch(setup *s) { s->tk.device = FLASHC_DEVICE_CUDA; }
/* 2^40 x 2^30 elements: the byte extent overflows 64 bits */
static void m_overflow(setup *s) { s->tk.shape[1] = (int64_t)1 << 40, s->tk.stride[1] = (int64_t)1 << 30; }
static void m_o_zero_stride(setup *s) { s->to.stride[2] = 0; }
/* rows of o overlap: seqlen stride smaller than the heads x dims it must step over */
static void m_o_self_overlap(setup *s) { s->to.stride[1] = D; }
static void m_lse_zero_stride(setup *s) { s->tl.stride[2] = 0; }
/* a zero stride on an input is a legal broadcast: one q row for every position */
static void m_q_broadcast(setup *s) { s->tq.stride[1] = 0; }
static void m_offset_overflow(setup *s) { s->tq.stride[0] = INT64_MAX / 2; }

static const bad_case ATTN_CASES[] = {
    {"q.data NULL", m_null_q_data, FLASHC_ERR_NULL_POINTER},
    {"seqlen 0", m_zero_seqlen, FLASHC_ERR_INVALID_SHAPE},
    {"negative heads", m_negative_heads, FLASHC_ERR_INVALID_SHAPE},
    {"v rank 3", m_wrong_rank, FLASHC_ERR_INVALID_SHAPE},
    {"negative stride", m_negative_stride, FLASHC_ERR_INVALID_STRIDE},
    {"Hq % Hkv != 0", m_heads_not_multiple, FLASHC_ERR_HEAD_MISMATCH},
    {"k and v heads differ", m_k_v_heads_differ, FLASHC_ERR_HEAD_MISMATCH},
    {"k head dim", m_head_dim_k, FLASHC_ERR_DIM_MISMATCH},
    {"v head dim", m_head_dim_v, FLASHC_ERR_DIM_MISMATCH},
    {"batch mismatch", m_batch_mismatch, FLASHC_ERR_INVALID_SHAPE},
    {"k/v seqlen mismatch", m_seqlen_kv_mismatch, FLASHC_ERR_INVALID_SHAPE},
    {"o shape", m_o_shape, FLASHC_ERR_INVALID_SHAPE},
    {"o overlaps q", m_o_overlaps_q, FLASHC_ERR_OVERLAP},
    {"o overlaps v", m_o_overlaps_v, FLASHC_ERR_OVERLAP},
    {"lse overlaps o", m_lse_overlaps_o, FLASHC_ERR_OVERLAP},
    {"dtype 7", m_bad_dtype, FLASHC_ERR_UNSUPPORTED_DTYPE},
    {"k f16, q f32", m_dtype_mismatch, FLASHC_ERR_DTYPE_MISMATCH},
    {"lse bf16", m_lse_dtype, FLASHC_ERR_UNSUPPORTED_DTYPE},
    {"lse shape", m_lse_shape, FLASHC_ERR_INVALID_SHAPE},
    {"scale NaN", m_scale_nan, FLASHC_ERR_INVALID_ARGUMENT},
    {"scale inf", m_scale_inf, FLASHC_ERR_INVALID_ARGUMENT},
    {"block_q < 0", m_negative_tile, FLASHC_ERR_INVALID_ARGUMENT},
    {"num_threads < 0", m_negative_threads, FLASHC_ERR_INVALID_ARGUMENT},
    {"device 9", m_bad_device, FLASHC_ERR_INVALID_ARGUMENT},
    {"k on CUDA, q on CPU", m_device_mismatch, FLASHC_ERR_INVALID_ARGUMENT},
    {"byte count overflow", m_overflow, FLASHC_ERR_OVERFLOW},
    {"offset overflow", m_offset_overflow, FLASHC_ERR_OVERFLOW},
    {"o stride 0 on heads", m_o_zero_stride, FLASHC_ERR_INVALID_STRIDE},
    {"o rows overlap", m_o_self_overlap, FLASHC_ERR_INVALID_STRIDE},
    {"lse stride 0", m_lse_zero_stride, FLASHC_ERR_INVALID_STRIDE},
};

typedef flashc_status (*fwd_fn)(const flashc_attn_params *, const flashc_tensor *,
                                const flashc_tensor *, const flashc_tensor *, flashc_tensor *,
                                flashc_tensor *, flashc_attn_stats *);

static void check_attn(fwd_fn fn, const char *fname)
{
    static setup s; /* static: big arrays off the stack */
    for (size_t i = 0; i < sizeof ATTN_CASES / sizeof ATTN_CASES[0]; i++) {
        const bad_case *c = &ATTN_CASES[i];
        good(&s);
        float q0[NQ], k0[NK], v0[NK], o0[NQ], l0[NL];
        memcpy(q0, s.q, sizeof q0), memcpy(k0, s.k, sizeof k0), memcpy(v0, s.v, sizeof v0);
        memcpy(o0, s.o, sizeof o0), memcpy(l0, s.lse, sizeof l0);
        c->mutate(&s);
        flashc_attn_stats st = {sizeof st, -7, -7, -7, -7, -7, -7};
        flashc_status got = fn(&s.p, &s.tq, &s.tk, &s.tv, &s.to, s.lse_arg, &st);
        print_message("  %s %-22s -> %-30s %s\n", fname, c->name, flashc_status_string(got),
                      flashc_last_error());
        assert_int_equal(got, c->want);
        assert_true(strlen(flashc_last_error()) > 0);
        assert_memory_equal(s.o, o0, sizeof o0);
        assert_memory_equal(s.lse, l0, sizeof l0);
        assert_memory_equal(s.q, q0, sizeof q0);
        assert_memory_equal(s.k, k0, sizeof k0);
        assert_memory_equal(s.v, v0, sizeof v0);
        assert_true(st.tile_pairs == -7); /* stats untouched too */
    }
    /* a broadcast input (zero stride) is accepted */
    good(&s);
    m_q_broadcast(&s);
    TU_OK(fn(&s.p, &s.tq, &s.tk, &s.tv, &s.to, s.lse_arg, NULL));
    /* the unchanged setup succeeds and leaves the last failure's message in place (the
     * header: it stays until the next failing call on the thread) */
    good(&s);
    char before[512];
    snprintf(before, sizeof before, "%s", flashc_last_error());
    TU_OK(fn(&s.p, &s.tq, &s.tk, &s.tv, &s.to, s.lse_arg, NULL));
    assert_string_equal(flashc_last_error(), before);
}

static void test_attn_fwd_bad_input(void **state)
{
    (void)state;
    check_attn(flashc_attn_fwd, "fwd");
    check_attn(flashc_attn_fwd_naive, "naive");
    check_attn(flashc_attn_fwd_unfused, "unfused");
    /* NULL tensors */
    static setup s;
    good(&s);
    assert_int_equal(flashc_attn_fwd(NULL, NULL, &s.tk, &s.tv, &s.to, NULL, NULL),
                     FLASHC_ERR_NULL_POINTER);
    assert_int_equal(flashc_attn_fwd(NULL, &s.tq, &s.tk, &s.tv, NULL, NULL, NULL),
                     FLASHC_ERR_NULL_POINTER);
    /* the "supported?" query answers like the call, and writes nothing */
    good(&s);
    m_head_dim_k(&s);
    assert_int_equal(flashc_attn_fwd_supported(NULL, &s.tq, &s.tk, &s.tv, &s.to, NULL),
                     FLASHC_ERR_DIM_MISMATCH);
    good(&s);
    assert_int_equal(flashc_attn_fwd_supported(NULL, &s.tq, &s.tk, &s.tv, &s.to, &s.tl), FLASHC_OK);
    for (int i = 0; i < NQ; i++)
        assert_true(isnan(s.o[i]));
}

static void test_status_strings(void **state)
{
    (void)state;
    /* every status below the count has its own name, none of them the fallback's */
    const char *unknown = flashc_status_string(FLASHC_STATUS_COUNT);
    assert_non_null(unknown);
    assert_true(strlen(unknown) > 0);
    for (int st = 0; st < FLASHC_STATUS_COUNT; st++) {
        const char *m = flashc_status_string((flashc_status)st);
        assert_non_null(m);
        assert_true(strlen(m) > 0);
        if (strcmp(m, unknown) == 0)
            fail_msg("status %d has no name of its own (\"%s\")", st, m);
        for (int o = 0; o < st; o++)
            if (strcmp(m, flashc_status_string((flashc_status)o)) == 0)
                fail_msg("statuses %d and %d share the name \"%s\"", o, st, m);
    }
    for (int st = FLASHC_STATUS_COUNT; st <= FLASHC_STATUS_COUNT + 3; st++)
        assert_string_equal(flashc_status_string((flashc_status)st), unknown);
    assert_string_equal(flashc_status_string((flashc_status)-1), unknown);
    assert_string_equal(flashc_status_string(FLASHC_ERR_OVERLAP), "output overlaps another tensor");
    assert_int_equal(flashc_dtype_size(FLASHC_BF16), 2);
    assert_int_equal(flashc_dtype_size((flashc_dtype)42), 0);
}

static void test_rows_bad_input(void **state)
{
    (void)state;
    enum { T = 5, W = 12 };
    float x[T * W], w[W], y[T * W], y0[T * W], gu[T * 2 * W], out[T * W], out0[T * W];
    tu_fill_normal(x, T * W, 1), tu_fill_normal(w, W, 1), tu_fill_normal(gu, T * 2 * W, 1);
    for (int i = 0; i < T * W; i++)
        y[i] = out[i] = NAN;
    memcpy(y0, y, sizeof y), memcpy(out0, out, sizeof out);
    flashc_tensor tx = flashc_tensor_2d(x, FLASHC_F32, T, W), tw = flashc_tensor_1d(w, FLASHC_F32, W);
    flashc_tensor ty = flashc_tensor_2d(y, FLASHC_F32, T, W);
    flashc_tensor bad;

    bad = tw, bad.shape[0] = W - 1;
    assert_int_equal(flashc_rmsnorm(&tx, &bad, 1e-6f, &ty), FLASHC_ERR_DIM_MISMATCH);
    assert_int_equal(flashc_rmsnorm(&tx, &tw, -1.0f, &ty), FLASHC_ERR_INVALID_ARGUMENT);
    assert_int_equal(flashc_rmsnorm(&tx, &tw, NAN, &ty), FLASHC_ERR_INVALID_ARGUMENT);
    assert_int_equal(flashc_rmsnorm(&tx, &tw, 1e-6f, &tx), FLASHC_ERR_OVERLAP);
    assert_int_equal(flashc_rmsnorm(NULL, &tw, 1e-6f, &ty), FLASHC_ERR_NULL_POINTER);
    bad = ty, bad.shape[0] = T + 1;
    assert_int_equal(flashc_rmsnorm(&tx, &tw, 1e-6f, &bad), FLASHC_ERR_INVALID_SHAPE);
    bad = tw, bad.dtype = FLASHC_BF16;
    assert_int_equal(flashc_rmsnorm(&tx, &bad, 1e-6f, &ty), FLASHC_ERR_DTYPE_MISMATCH);
    bad = tx, bad.shape[1] = 0;
    assert_int_equal(flashc_rmsnorm_naive(&bad, &tw, 1e-6f, &ty), FLASHC_ERR_INVALID_SHAPE);
    /* residual: x must not overlap r */
    float x0[T * W];
    memcpy(x0, x, sizeof x);
    assert_int_equal(flashc_rmsnorm_residual(&tx, &tx, &tw, 1e-6f, &ty), FLASHC_ERR_OVERLAP);
    bad = tx, bad.shape[0] = T - 1;
    assert_int_equal(flashc_rmsnorm_residual(&tx, &bad, &tw, 1e-6f, &ty), FLASHC_ERR_INVALID_SHAPE);
    assert_memory_equal(x, x0, sizeof x);
    assert_memory_equal(y, y0, sizeof y);

    flashc_tensor tg = flashc_tensor_2d(gu, FLASHC_F32, T, 2 * W), to = flashc_tensor_2d(out, FLASHC_F32, T, W);
    bad = tg, bad.shape[1] = 2 * W - 1;
    assert_int_equal(flashc_swiglu(&bad, &to), FLASHC_ERR_INVALID_SHAPE);
    bad = to, bad.shape[1] = W + 1;
    assert_int_equal(flashc_swiglu(&tg, &bad), FLASHC_ERR_INVALID_SHAPE);
    bad = tg, bad.data = out;
    assert_int_equal(flashc_swiglu_naive(&bad, &to), FLASHC_ERR_OVERLAP);
    bad = to, bad.stride[0] = 0;
    assert_int_equal(flashc_swiglu(&tg, &bad), FLASHC_ERR_INVALID_STRIDE);
    bad = ty, bad.stride[0] = W / 2; /* rows overlap */
    assert_int_equal(flashc_rmsnorm(&tx, &tw, 1e-6f, &bad), FLASHC_ERR_INVALID_STRIDE);
    flashc_tensor bcast = flashc_tensor_2d(gu, FLASHC_F32, T, W);
    bcast.stride[0] = 0; /* x broadcast over rows: fine as an input, not as the residual output */
    assert_int_equal(flashc_rmsnorm_residual(&bcast, &ty, &tw, 1e-6f, &to), FLASHC_ERR_INVALID_STRIDE);
    bad = to, bad.device = FLASHC_DEVICE_CUDA;
    assert_int_equal(flashc_swiglu(&tg, &bad), FLASHC_ERR_UNSUPPORTED);
    assert_memory_equal(out, out0, sizeof out);
}

int main(void)
{
    tu_seed_from_env();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attn_fwd_bad_input),
        cmocka_unit_test(test_status_strings),
        cmocka_unit_test(test_rows_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
