/* test_attn_api.c — the Attention v2 contract at the API: sized params and stats, the float64
 * reference on every layout against an independent oracle (windows, softcap, ALiBi, Dk != Dv),
 * varlen against per-sequence dense calls, paged against contiguous caches, the KV-cache append,
 * index validation (each refusal leaves outputs and cache untouched), workspaces, the bound on
 * one call. The reference runs through the public entry points with attn_force_backend("ref"),
 * so these tests hold for whatever kernel later serves each layout. */
#include "common.h"
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- an independent oracle: dense (B, S, H, D) contiguous, double throughout ------------- */

typedef struct mods {
    int causal;
    int64_t wl, wr;
    double softcap;
    const float *alibi; /* (Hq) or NULL */
    double scale;
} mods;

static void oracle(const float *q, const float *k, const float *v, int64_t B, int64_t Sq,
                   int64_t Sk, int64_t Hq, int64_t Hkv, int64_t D, int64_t Dv, const mods *m,
                   double *o, double *lse)
{
    double *s = malloc((size_t)Sk * sizeof *s);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++) {
            const int64_t hk = h / (Hq / Hkv);
            for (int64_t i = 0; i < Sq; i++) {
                const int64_t a = i + Sk - Sq;
                double mx = -INFINITY;
                for (int64_t j = 0; j < Sk; j++) {
                    int vis = 1;
                    if (m->causal && j > a)
                        vis = 0;
                    if (m->wl >= 0 && j < a - m->wl)
                        vis = 0;
                    if (m->wr >= 0 && j > a + m->wr)
                        vis = 0;
                    s[j] = -INFINITY;
                    if (!vis)
                        continue;
                    double dot = 0;
                    for (int64_t d = 0; d < D; d++)
                        dot += (double)q[((b * Sq + i) * Hq + h) * D + d] *
                               (double)k[((b * Sk + j) * Hkv + hk) * D + d];
                    double x = dot * m->scale;
                    if (m->softcap > 0)
                        x = m->softcap * tanh(x / m->softcap);
                    if (m->alibi)
                        x -= (double)m->alibi[h] * (double)llabs(a - j);
                    s[j] = x;
                    mx = x > mx ? x : mx;
                }
                double sum = 0;
                for (int64_t j = 0; j < Sk; j++)
                    sum += s[j] == -INFINITY ? 0 : exp(s[j] - mx);
                double *orow = o + ((b * Sq + i) * Hq + h) * Dv;
                for (int64_t d = 0; d < Dv; d++) {
                    double acc = 0;
                    for (int64_t j = 0; j < Sk; j++)
                        if (s[j] != -INFINITY)
                            acc += exp(s[j] - mx) / sum *
                                   (double)v[((b * Sk + j) * Hkv + hk) * Dv + d];
                    orow[d] = sum > 0 ? acc : 0.0;
                }
                lse[(b * Hq + h) * Sq + i] = sum > 0 ? mx + log(sum) : -INFINITY;
            }
        }
    free(s);
}

static double max_diff64(const float *a, const double *b, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        if ((double)a[i] == b[i])
            continue;
        const double d = fabs((double)a[i] - b[i]) / (1.0 + fabs(b[i]));
        if (isnan(d))
            return INFINITY;
        m = d > m ? d : m;
    }
    return m;
}

/* ---- params and stats ABI ----------------------------------------------------------------- */

static void small_dense(float **q, float **k, float **v, float **o, flashc_tensor *tq,
                        flashc_tensor *tk, flashc_tensor *tv, flashc_tensor *to)
{
    *q = tu_alloc_normal(2 * 5 * 2 * 8, 1), *k = tu_alloc_normal(2 * 7 * 1 * 8, 1);
    *v = tu_alloc_normal(2 * 7 * 1 * 8, 1), *o = tu_poisoned(2 * 5 * 2 * 8);
    *tq = flashc_tensor_4d(*q, FLASHC_F32, 2, 5, 2, 8);
    *tk = flashc_tensor_4d(*k, FLASHC_F32, 2, 7, 1, 8);
    *tv = flashc_tensor_4d(*v, FLASHC_F32, 2, 7, 1, 8);
    *to = flashc_tensor_4d(*o, FLASHC_F32, 2, 5, 2, 8);
}

static void test_params_abi(void **state)
{
    (void)state;
    float *q, *k, *v, *o;
    flashc_tensor tq, tk, tv, to;
    small_dense(&q, &k, &v, &o, &tq, &tk, &tv, &to);
    float *o0 = tu_copy(o, 2 * 5 * 2 * 8);

    flashc_attn_params p = flashc_attn_params_default();
    p.struct_size = 0; /* a zero-initialised struct */
    assert_int_equal(flashc_attn_fwd_naive(&p, &tq, &tk, &tv, &to, NULL, NULL),
                     FLASHC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(flashc_last_error(), "struct_size"));
    assert_memory_equal(o, o0, sizeof(float) * 2 * 5 * 2 * 8);

    /* an older caller's shorter struct: the fields past its size take their defaults, even when
     * the bytes there say otherwise (a window of (0, 0) would change the result) */
    flashc_attn_params full = flashc_attn_params_default();
    TU_OK(flashc_attn_fwd_naive(&full, &tq, &tk, &tv, &to, NULL, NULL));
    float *want = tu_copy(o, 2 * 5 * 2 * 8);
    p = flashc_attn_params_default();
    p.window_left = 0, p.window_right = 0, p.softcap = 5.0f;
    p.struct_size = offsetof(flashc_attn_params, window_left);
    TU_OK(flashc_attn_fwd_naive(&p, &tq, &tk, &tv, &to, NULL, NULL));
    assert_memory_equal(o, want, sizeof(float) * 2 * 5 * 2 * 8);

    /* a struct_size that ends inside a field (no header's sizeof does) is refused: copying it
     * would take the low bytes of the alibi_slopes pointer (a fuzz finding) */
    p = flashc_attn_params_default();
    p.alibi_slopes = (const flashc_tensor *)&p; /* never to be read */
    p.struct_size = offsetof(flashc_attn_params, alibi_slopes) + 3;
    memcpy(o0, o, sizeof(float) * 2 * 5 * 2 * 8);
    assert_int_equal(flashc_attn_fwd_naive(&p, &tq, &tk, &tv, &to, NULL, NULL),
                     FLASHC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(flashc_last_error(), "inside the field alibi_slopes"));
    assert_memory_equal(o, o0, sizeof(float) * 2 * 5 * 2 * 8);
    p.struct_size = offsetof(flashc_attn_params, alibi_slopes); /* a boundary: fine */
    TU_OK(flashc_attn_fwd_naive(&p, &tq, &tk, &tv, &to, NULL, NULL));

    /* a newer caller's longer struct: accepted when the unknown tail is zero */
    struct {
        flashc_attn_params p;
        int64_t future[2];
    } big;
    memset(&big, 0, sizeof big);
    big.p = flashc_attn_params_default();
    big.p.struct_size = sizeof big;
    TU_OK(flashc_attn_fwd_naive(&big.p, &tq, &tk, &tv, &to, NULL, NULL));
    big.future[1] = 1;
    memcpy(o0, o, sizeof(float) * 2 * 5 * 2 * 8);
    assert_int_equal(flashc_attn_fwd_naive(&big.p, &tq, &tk, &tv, &to, NULL, NULL),
                     FLASHC_ERR_UNSUPPORTED);
    assert_memory_equal(o, o0, sizeof(float) * 2 * 5 * 2 * 8);

    /* softmax_scale = 0 is a real scale: uniform weights over the visible keys */
    p = flashc_attn_params_default();
    p.has_softmax_scale = 1, p.softmax_scale = 0.0f;
    TU_OK(flashc_attn_fwd_naive(&p, &tq, &tk, &tv, &to, NULL, NULL));
    for (int64_t b = 0; b < 2; b++)
        for (int64_t d = 0; d < 8; d++) {
            double mean = 0;
            for (int64_t j = 0; j < 7; j++)
                mean += v[(b * 7 + j) * 8 + d] / 7.0;
            assert_true(fabs(o[((b * 5 + 3) * 2 + 1) * 8 + d] - mean) < 1e-6);
        }

    /* stats: only the fields inside struct_size are written */
    flashc_attn_stats st;
    memset(&st, 0x5a, sizeof st);
    st.struct_size = offsetof(flashc_attn_stats, num_splits);
    TU_OK(flashc_attn_fwd(NULL, &tq, &tk, &tv, &to, NULL, &st));
    int64_t untouched;
    memset(&untouched, 0x5a, sizeof untouched);
    assert_true(st.num_splits == untouched && st.workspace_bytes == untouched);
    assert_true(st.block_k > 0);
    st.struct_size = 0;
    assert_int_equal(flashc_attn_fwd(NULL, &tq, &tk, &tv, &to, NULL, &st),
                     FLASHC_ERR_INVALID_ARGUMENT);

    /* parameter ranges */
    const struct {
        int64_t wl, wr;
        float cap;
        int splits;
    } bad[] = {{-2, -1, 0, 0}, {-1, -5, 0, 0}, {-1, -1, -1.0f, 0}, {-1, -1, INFINITY, 0},
               {-1, -1, 0, -1}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        p = flashc_attn_params_default();
        p.window_left = bad[i].wl, p.window_right = bad[i].wr, p.softcap = bad[i].cap;
        p.num_splits = bad[i].splits;
        memcpy(o0, o, sizeof(float) * 2 * 5 * 2 * 8);
        assert_int_equal(flashc_attn_fwd_naive(&p, &tq, &tk, &tv, &to, NULL, NULL),
                         FLASHC_ERR_INVALID_ARGUMENT);
        assert_memory_equal(o, o0, sizeof(float) * 2 * 5 * 2 * 8);
    }
    free(q), free(k), free(v), free(o), free(o0), free(want);
}

/* ---- the reference against the oracle: masks, modifiers, Dk != Dv ------------------------ */

static void test_reference_modifiers(void **state)
{
    (void)state;
    const int64_t B = 2, Hq = 4, Hkv = 2;
    const struct {
        int64_t Sq, Sk, D, Dv;
    } shapes[] = {{9, 9, 8, 8}, {5, 13, 12, 6}, {13, 5, 6, 10}, {1, 17, 16, 8}};
    const struct {
        int causal;
        int64_t wl, wr;
        float cap;
        int alibi;
    } mm[] = {{0, -1, -1, 0, 0}, {1, -1, -1, 0, 0}, {0, 3, 2, 0, 0}, {1, 2, -1, 0, 0},
              {0, 0, 0, 0, 0},   {0, -1, 1, 0, 0},  {0, 4, -1, 0, 0}, {0, -1, -1, 2.5f, 0},
              {0, -1, -1, 0, 1}, {1, 3, -1, 3.0f, 1}};
    float slopes[4] = {0.5f, 0.25f, 0.125f, 0.0625f};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (size_t mi = 0; mi < sizeof mm / sizeof mm[0]; mi++) {
            const int64_t Sq = shapes[si].Sq, Sk = shapes[si].Sk, D = shapes[si].D,
                          Dv = shapes[si].Dv;
            float *q = tu_alloc_normal(B * Sq * Hq * D, 1.5f);
            float *k = tu_alloc_normal(B * Sk * Hkv * D, 1.5f);
            float *v = tu_alloc_normal(B * Sk * Hkv * Dv, 1);
            float *o = tu_poisoned(B * Sq * Hq * Dv), *lse = tu_poisoned(B * Hq * Sq);
            double *o64 = malloc(sizeof(double) * (size_t)(B * Sq * Hq * Dv));
            double *l64 = malloc(sizeof(double) * (size_t)(B * Hq * Sq));
            flashc_tensor tq = flashc_tensor_4d(q, FLASHC_F32, B, Sq, Hq, D);
            flashc_tensor tk = flashc_tensor_4d(k, FLASHC_F32, B, Sk, Hkv, D);
            flashc_tensor tv = flashc_tensor_4d(v, FLASHC_F32, B, Sk, Hkv, Dv);
            flashc_tensor to = flashc_tensor_4d(o, FLASHC_F32, B, Sq, Hq, Dv);
            flashc_tensor tl = flashc_tensor_3d(lse, FLASHC_F32, B, Hq, Sq);
            flashc_tensor ta = flashc_tensor_1d(slopes, FLASHC_F32, Hq);
            flashc_attn_params p = flashc_attn_params_default();
            p.causal = mm[mi].causal, p.window_left = mm[mi].wl, p.window_right = mm[mi].wr;
            p.softcap = mm[mi].cap;
            p.alibi_slopes = mm[mi].alibi ? &ta : NULL;
            TU_OK(flashc_attn_fwd_naive(&p, &tq, &tk, &tv, &to, &tl, NULL));
            mods m = {mm[mi].causal, mm[mi].wl, mm[mi].wr, mm[mi].cap,
                      mm[mi].alibi ? slopes : NULL, 1.0 / sqrt((double)D)};
            oracle(q, k, v, B, Sq, Sk, Hq, Hkv, D, Dv, &m, o64, l64);
            const double eo = max_diff64(o, o64, B * Sq * Hq * Dv);
            const double el = max_diff64(lse, l64, B * Hq * Sq);
            if (eo > 2e-6 || el > 2e-6)
                print_error("shape %zu mods %zu: o err %g, lse err %g\n", si, mi, eo, el);
            assert_true(eo <= 2e-6 && el <= 2e-6);
            free(q), free(k), free(v), free(o), free(lse), free(o64), free(l64);
        }
}

/* ---- varlen: each sequence as if alone ------------------------------------------------------ */

static void test_varlen_reference(void **state)
{
    (void)state;
    const int64_t Hq = 4, Hkv = 2, D = 8, Dv = 6, B = 5;
    const int32_t lq[5] = {3, 0, 7, 1, 4}, lk[5] = {5, 2, 7, 0, 9}; /* zero lengths included */
    int32_t cuq[6] = {0}, cuk[6] = {0};
    for (int b = 0; b < B; b++)
        cuq[b + 1] = cuq[b] + lq[b], cuk[b + 1] = cuk[b] + lk[b];
    const int64_t Tq = cuq[B] + 2, Tk = cuk[B] + 1; /* trailing rows in no sequence */
    float *q = tu_alloc_normal(Tq * Hq * D, 1), *k = tu_alloc_normal(Tk * Hkv * D, 1);
    float *v = tu_alloc_normal(Tk * Hkv * Dv, 1);
    float *o = tu_poisoned(Tq * Hq * Dv), *lse = tu_poisoned(Hq * Tq);
    flashc_tensor tq = flashc_tensor_3d(q, FLASHC_F32, Tq, Hq, D);
    flashc_tensor tk = flashc_tensor_3d(k, FLASHC_F32, Tk, Hkv, D);
    flashc_tensor tv = flashc_tensor_3d(v, FLASHC_F32, Tk, Hkv, Dv);
    flashc_tensor to = flashc_tensor_3d(o, FLASHC_F32, Tq, Hq, Dv);
    flashc_tensor tl = flashc_tensor_2d(lse, FLASHC_F32, Hq, Tq);
    flashc_tensor tcq = flashc_tensor_1d(cuq, FLASHC_I32, B + 1);
    flashc_tensor tck = flashc_tensor_1d(cuk, FLASHC_I32, B + 1);
    flashc_varlen vl = {sizeof vl, &tcq, &tck, 7, 9, NULL};
    for (int causal = 0; causal < 2; causal++) {
        flashc_attn_params p = flashc_attn_params_default();
        p.causal = causal, p.window_left = causal ? 3 : -1;
        attn_force_backend("ref");
        TU_OK(flashc_attn_varlen_fwd(&p, &vl, &tq, &tk, &tv, &to, &tl, NULL));
        attn_force_backend(NULL);
        for (int b = 0; b < B; b++) {
            if (lq[b] == 0)
                continue;
            float *so = tu_poisoned(lq[b] * Hq * Dv), *sl = tu_poisoned(Hq * lq[b]);
            flashc_tensor sq = tq, sk = tk, sv = tv, sot, slt;
            /* the sequence alone, as a dense batch of one: views into the packed buffers */
            sq = flashc_tensor_4d(q + (int64_t)cuq[b] * Hq * D, FLASHC_F32, 1, lq[b], Hq, D);
            const int64_t skl = lk[b] ? lk[b] : 1;
            sk = flashc_tensor_4d(k + (int64_t)cuk[b] * Hkv * D, FLASHC_F32, 1, skl, Hkv, D);
            sv = flashc_tensor_4d(v + (int64_t)cuk[b] * Hkv * Dv, FLASHC_F32, 1, skl, Hkv, Dv);
            sot = flashc_tensor_4d(so, FLASHC_F32, 1, lq[b], Hq, Dv);
            slt = flashc_tensor_3d(sl, FLASHC_F32, 1, Hq, lq[b]);
            if (lk[b] == 0) { /* no keys: every row empty */
                for (int64_t x = 0; x < lq[b] * Hq * Dv; x++)
                    assert_true(o[(int64_t)cuq[b] * Hq * Dv + x] == 0.0f);
                for (int64_t h = 0; h < Hq; h++)
                    for (int64_t i = 0; i < lq[b]; i++)
                        assert_true(lse[h * Tq + cuq[b] + i] == -INFINITY);
            } else {
                TU_OK(flashc_attn_fwd_naive(&p, &sq, &sk, &sv, &sot, &slt, NULL));
                assert_memory_equal(o + (int64_t)cuq[b] * Hq * Dv, so,
                                    sizeof(float) * (size_t)(lq[b] * Hq * Dv));
                for (int64_t h = 0; h < Hq; h++)
                    assert_memory_equal(lse + h * Tq + cuq[b], sl + h * lq[b],
                                        sizeof(float) * (size_t)lq[b]);
            }
            free(so), free(sl);
        }
        for (int64_t x = (int64_t)cuq[B] * Hq * Dv; x < Tq * Hq * Dv; x++)
            assert_true(o[x] == 0.0f); /* rows of no sequence: zeros */
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t r = cuq[B]; r < Tq; r++)
                assert_true(lse[h * Tq + r] == -INFINITY);
    }

    /* index validation: each refusal names the problem and writes nothing */
    const struct {
        int at;        /* 0: cu_q, 1: cu_k */
        int idx;
        int32_t val;
        int big_max; /* lift max_seqlen so the check under test is the one that fires */
        const char *says;
    } bad[] = {{0, 0, 1, 0, "must be 0"},  {0, 3, 2, 0, "non-decreasing"},
               {1, 5, 100, 1, "exceeds"},  {0, 5, 15 + 10, 1, "exceeds"},
               {1, 3, 7 + 10, 0, "max_seqlen_k"}};
    float *o0 = tu_copy(o, Tq * Hq * Dv), *l0 = tu_copy(lse, Hq * Tq);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int32_t *arr = bad[i].at ? cuk : cuq;
        const int32_t keep = arr[bad[i].idx];
        arr[bad[i].idx] = bad[i].val;
        flashc_varlen vb = vl;
        if (bad[i].big_max)
            vb.max_seqlen_q = vb.max_seqlen_k = 1000;
        flashc_status st = flashc_attn_varlen_fwd(NULL, &vb, &tq, &tk, &tv, &to, &tl, NULL);
        arr[bad[i].idx] = keep;
        if (st != FLASHC_ERR_INVALID_ARGUMENT || !strstr(flashc_last_error(), bad[i].says))
            print_error("case %zu: %s: %s\n", i, flashc_status_string(st), flashc_last_error());
        assert_int_equal(st, FLASHC_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(flashc_last_error(), bad[i].says));
        assert_memory_equal(o, o0, sizeof(float) * (size_t)(Tq * Hq * Dv));
        assert_memory_equal(lse, l0, sizeof(float) * (size_t)(Hq * Tq));
    }
    /* max_seqlen is only an upper bound: INT64_MAX (a fuzz finding: with max_seqlen_k = 0 it
     * overflowed the tile arithmetic) gives the reference's answer (o, lse: the causal pass) */
    {
        flashc_attn_params p = flashc_attn_params_default();
        p.causal = 1, p.window_left = 3;
        float *o2 = tu_poisoned(Tq * Hq * Dv), *l2 = tu_poisoned(Hq * Tq);
        flashc_tensor to2 = flashc_tensor_3d(o2, FLASHC_F32, Tq, Hq, Dv);
        flashc_tensor tl2 = flashc_tensor_2d(l2, FLASHC_F32, Hq, Tq);
        flashc_varlen vh = vl;
        vh.max_seqlen_q = vh.max_seqlen_k = INT64_MAX;
        TU_OK(flashc_attn_varlen_fwd(&p, &vh, &tq, &tk, &tv, &to2, &tl2, NULL));
        for (int64_t x = 0; x < Tq * Hq * Dv; x++)
            assert_true(fabsf(o2[x] - o[x]) <= 1e-5f);
        for (int64_t x = 0; x < Hq * Tq; x++)
            assert_true(l2[x] == lse[x] || fabsf(l2[x] - lse[x]) <= 1e-5f);
        /* no keys at all: max_seqlen_k = 0 is then true, and every row is empty */
        int32_t zk[16] = {0};
        flashc_tensor tzk = flashc_tensor_1d(zk, FLASHC_I32, B + 1);
        vh.cu_seqlens_k = &tzk, vh.max_seqlen_k = 0;
        TU_OK(flashc_attn_varlen_fwd(&p, &vh, &tq, &tk, &tv, &to2, &tl2, NULL));
        for (int64_t x = 0; x < Tq * Hq * Dv; x++)
            assert_true(o2[x] == 0.0f);
        for (int64_t x = 0; x < Hq * Tq; x++)
            assert_true(l2[x] == -INFINITY);
        free(o2), free(l2);
    }
    /* wrong index dtype, missing struct */
    flashc_tensor fcq = tcq;
    fcq.dtype = FLASHC_F32;
    flashc_varlen bad_vl = vl;
    bad_vl.cu_seqlens_q = &fcq;
    assert_int_equal(flashc_attn_varlen_fwd(NULL, &bad_vl, &tq, &tk, &tv, &to, &tl, NULL),
                     FLASHC_ERR_UNSUPPORTED_DTYPE);
    assert_int_equal(flashc_attn_varlen_fwd(NULL, NULL, &tq, &tk, &tv, &to, &tl, NULL),
                     FLASHC_ERR_NULL_POINTER);
    bad_vl = vl;
    bad_vl.struct_size = 0;
    assert_int_equal(flashc_attn_varlen_fwd(NULL, &bad_vl, &tq, &tk, &tv, &to, &tl, NULL),
                     FLASHC_ERR_INVALID_ARGUMENT);
    assert_memory_equal(o, o0, sizeof(float) * (size_t)(Tq * Hq * Dv));
    free(q), free(k), free(v), free(o), free(lse), free(o0), free(l0);
}

/* ---- KV cache: contiguous vs paged, append, validation ------------------------------------ */

static void test_kvcache_reference(void **state)
{
    (void)state;
    const int64_t B = 3, Sq = 2, Hq = 4, Hkv = 2, D = 8, Dv = 8, S_new = 2, CAP = 24;
    int32_t seqlens[3] = {5, 0, 13};
    float *q = tu_alloc_normal(B * Sq * Hq * D, 1);
    float *kn = tu_alloc_normal(B * S_new * Hkv * D, 1), *vn = tu_alloc_normal(B * S_new * Hkv * Dv, 1);
    float *kc = tu_alloc_normal(B * CAP * Hkv * D, 1), *vc = tu_alloc_normal(B * CAP * Hkv * Dv, 1);
    float *kc0 = tu_copy(kc, B * CAP * Hkv * D), *vc0 = tu_copy(vc, B * CAP * Hkv * Dv);
    float *o = tu_poisoned(B * Sq * Hq * Dv), *lse = tu_poisoned(B * Hq * Sq);
    flashc_tensor tq = flashc_tensor_4d(q, FLASHC_F32, B, Sq, Hq, D);
    flashc_tensor tkn = flashc_tensor_4d(kn, FLASHC_F32, B, S_new, Hkv, D);
    flashc_tensor tvn = flashc_tensor_4d(vn, FLASHC_F32, B, S_new, Hkv, Dv);
    flashc_tensor tkc = flashc_tensor_4d(kc, FLASHC_F32, B, CAP, Hkv, D);
    flashc_tensor tvc = flashc_tensor_4d(vc, FLASHC_F32, B, CAP, Hkv, Dv);
    flashc_tensor to = flashc_tensor_4d(o, FLASHC_F32, B, Sq, Hq, Dv);
    flashc_tensor tl = flashc_tensor_3d(lse, FLASHC_F32, B, Hq, Sq);
    flashc_tensor tsl = flashc_tensor_1d(seqlens, FLASHC_I32, B);
    flashc_kv_cache c = {sizeof c, &tkc, &tvc, &tsl, NULL, NULL, &tkn, &tvn, NULL};
    flashc_attn_params p = flashc_attn_params_default();
    p.causal = 1;

    attn_force_backend("ref");
    TU_OK(flashc_attn_kvcache_fwd(&p, &c, &tq, &to, &tl, NULL));
    attn_force_backend(NULL);
    /* the append wrote exactly rows seqlens[b] .. + S_new - 1 */
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < CAP; j++)
            for (int64_t x = 0; x < Hkv * D; x++) {
                const int64_t at = (b * CAP + j) * Hkv * D + x;
                const int fresh = j >= seqlens[b] && j < seqlens[b] + S_new;
                const float want = fresh ? kn[(b * S_new + (j - seqlens[b])) * Hkv * D + x] : kc0[at];
                assert_true(kc[at] == want);
            }
    /* the result is dense causal attention over each sequence's first seqlens + S_new keys */
    for (int64_t b = 0; b < B; b++) {
        const int64_t sk = seqlens[b] + S_new;
        float *so = tu_poisoned(Sq * Hq * Dv), *sl = tu_poisoned(Hq * Sq);
        flashc_tensor sq = flashc_tensor_4d(q + b * Sq * Hq * D, FLASHC_F32, 1, Sq, Hq, D);
        flashc_tensor sk_ = flashc_tensor_4d(kc + b * CAP * Hkv * D, FLASHC_F32, 1, sk, Hkv, D);
        flashc_tensor sv = flashc_tensor_4d(vc + b * CAP * Hkv * Dv, FLASHC_F32, 1, sk, Hkv, Dv);
        flashc_tensor sot = flashc_tensor_4d(so, FLASHC_F32, 1, Sq, Hq, Dv);
        flashc_tensor slt = flashc_tensor_3d(sl, FLASHC_F32, 1, Hq, Sq);
        TU_OK(flashc_attn_fwd_naive(&p, &sq, &sk_, &sv, &sot, &slt, NULL));
        assert_memory_equal(o + b * Sq * Hq * Dv, so, sizeof(float) * (size_t)(Sq * Hq * Dv));
        assert_memory_equal(lse + b * Hq * Sq, sl, sizeof(float) * (size_t)(Hq * Sq));
        free(so), free(sl);
    }

    /* cache_leftpad: over the cache as appended (lengths seqlens + S_new, nothing appended),
     * sequence b is dense causal attention over cache rows [lp[b], seqlens[b] + S_new), on the
     * reference and on the default backend, with split-KV too; a caller of the struct before
     * cache_leftpad (struct_size up to v_new) gets none, whatever lies past it; leftpad past
     * cache_seqlens or negative, on a paged cache, or without cache_seqlens: refused. */
    {
        /* the second leftpads all its keys (empty: o 0, lse -inf), the third all but the two
         * appended ones */
        int32_t lens[3], lp[3] = {2, 2, 13};
        for (int64_t b = 0; b < B; b++)
            lens[b] = seqlens[b] + (int32_t)S_new;
        flashc_tensor tlens = flashc_tensor_1d(lens, FLASHC_I32, B);
        flashc_tensor tlp = flashc_tensor_1d(lp, FLASHC_I32, B);
        flashc_kv_cache lc = {sizeof lc, &tkc, &tvc, &tlens, NULL, NULL, NULL, NULL, &tlp};
        float *lo = tu_poisoned(B * Sq * Hq * Dv), *ll = tu_poisoned(B * Hq * Sq);
        flashc_tensor tlo = flashc_tensor_4d(lo, FLASHC_F32, B, Sq, Hq, Dv);
        flashc_tensor tll = flashc_tensor_3d(ll, FLASHC_F32, B, Hq, Sq);
        for (int backend = 0; backend < 3; backend++) {
            flashc_attn_params lpp = p;
            lpp.num_splits = backend == 2 ? 3 : 0;
            attn_force_backend(backend == 0 ? "ref" : NULL);
            TU_OK(flashc_attn_kvcache_fwd(&lpp, &lc, &tq, &tlo, &tll, NULL));
            attn_force_backend(NULL);
            for (int64_t b = 0; b < B; b++) {
                const int64_t sk = lens[b] - lp[b];
                if (sk == 0) {
                    for (int64_t x = 0; x < Sq * Hq * Dv; x++)
                        assert_true(lo[b * Sq * Hq * Dv + x] == 0.0f);
                    for (int64_t x = 0; x < Hq * Sq; x++)
                        assert_true(isinf(ll[b * Hq * Sq + x]) && ll[b * Hq * Sq + x] < 0);
                    continue;
                }
                float *so = tu_poisoned(Sq * Hq * Dv), *sl = tu_poisoned(Hq * Sq);
                flashc_tensor sq = flashc_tensor_4d(q + b * Sq * Hq * D, FLASHC_F32, 1, Sq, Hq, D);
                flashc_tensor sk_ = flashc_tensor_4d(kc + (b * CAP + lp[b]) * Hkv * D, FLASHC_F32,
                                                     1, sk, Hkv, D);
                flashc_tensor sv = flashc_tensor_4d(vc + (b * CAP + lp[b]) * Hkv * Dv, FLASHC_F32,
                                                    1, sk, Hkv, Dv);
                flashc_tensor sot = flashc_tensor_4d(so, FLASHC_F32, 1, Sq, Hq, Dv);
                flashc_tensor slt = flashc_tensor_3d(sl, FLASHC_F32, 1, Hq, Sq);
                TU_OK(flashc_attn_fwd_naive(&p, &sq, &sk_, &sv, &sot, &slt, NULL));
                for (int64_t x = 0; x < Sq * Hq * Dv; x++) /* other backends: within rounding */
                    assert_true(fabsf(lo[b * Sq * Hq * Dv + x] - so[x]) <= 1e-5f);
                for (int64_t x = 0; x < Hq * Sq; x++)
                    assert_true(fabsf(ll[b * Hq * Sq + x] - sl[x]) <= 1e-5f);
                free(so), free(sl);
            }
        }
        flashc_kv_cache old = lc, plain = lc;
        old.struct_size = offsetof(flashc_kv_cache, cache_leftpad);
        old.cache_leftpad = (const flashc_tensor *)(uintptr_t)1; /* past its size: never read */
        plain.cache_leftpad = NULL;
        float *oo = tu_poisoned(B * Sq * Hq * Dv), *po = tu_poisoned(B * Sq * Hq * Dv);
        flashc_tensor too = flashc_tensor_4d(oo, FLASHC_F32, B, Sq, Hq, Dv);
        flashc_tensor tpo = flashc_tensor_4d(po, FLASHC_F32, B, Sq, Hq, Dv);
        TU_OK(flashc_attn_kvcache_fwd(&p, &old, &tq, &too, NULL, NULL));
        TU_OK(flashc_attn_kvcache_fwd(&p, &plain, &tq, &tpo, NULL, NULL));
        assert_memory_equal(oo, po, sizeof(float) * (size_t)(B * Sq * Hq * Dv));
        old.struct_size -= sizeof(void *);
        assert_int_equal(flashc_attn_kvcache_fwd(&p, &old, &tq, &too, NULL, NULL),
                         FLASHC_ERR_INVALID_ARGUMENT);
        old.struct_size = offsetof(flashc_kv_cache, cache_leftpad) + 3; /* inside a pointer */
        assert_int_equal(flashc_attn_kvcache_fwd(&p, &old, &tq, &too, NULL, NULL),
                         FLASHC_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(flashc_last_error(), "inside the field cache_leftpad"));
        /* a newer caller's longer struct: its unknown tail zero, accepted (the same result);
         * set, refused as a feature this library lacks */
        struct {
            flashc_kv_cache c;
            uint64_t more[2];
        } newer = {plain, {0, 0}};
        newer.c.struct_size = sizeof newer;
        TU_OK(flashc_attn_kvcache_fwd(&p, &newer.c, &tq, &too, NULL, NULL));
        assert_memory_equal(oo, po, sizeof(float) * (size_t)(B * Sq * Hq * Dv));
        newer.more[1] = 1;
        assert_int_equal(flashc_attn_kvcache_fwd(&p, &newer.c, &tq, &too, NULL, NULL),
                         FLASHC_ERR_UNSUPPORTED);
        assert_non_null(strstr(flashc_last_error(), "cache.struct_size"));
        float *lo0 = tu_copy(lo, B * Sq * Hq * Dv);
        lp[2] = lens[2] + 1;
        assert_int_equal(flashc_attn_kvcache_fwd(&p, &lc, &tq, &tlo, &tll, NULL),
                         FLASHC_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(flashc_last_error(), "cache_leftpad"));
        lp[2] = -1;
        assert_int_equal(flashc_attn_kvcache_fwd(&p, &lc, &tq, &tlo, &tll, NULL),
                         FLASHC_ERR_INVALID_ARGUMENT);
        lp[2] = 13;
        flashc_kv_cache bad = lc;
        bad.cache_seqlens = NULL;
        assert_int_equal(flashc_attn_kvcache_fwd(&p, &bad, &tq, &tlo, &tll, NULL),
                         FLASHC_ERR_INVALID_ARGUMENT);
        int32_t bt1[3] = {0, 1, 2};
        flashc_tensor tbt1 = flashc_tensor_2d(bt1, FLASHC_I32, B, 1);
        bad = lc;
        bad.block_table = &tbt1;
        assert_int_equal(flashc_attn_kvcache_fwd(&p, &bad, &tq, &tlo, &tll, NULL),
                         FLASHC_ERR_INVALID_ARGUMENT);
        assert_memory_equal(lo, lo0, sizeof(float) * (size_t)(B * Sq * Hq * Dv));
        free(lo), free(ll), free(oo), free(po), free(lo0);
    }

    /* the same cache paged (shuffled pages of size 1, 3 and 16) gives the same bits */
    float *want = tu_copy(o, B * Sq * Hq * Dv), *want_l = tu_copy(lse, B * Hq * Sq);
    const int64_t page_sizes[3] = {1, 3, 16};
    for (int ps_i = 0; ps_i < 3; ps_i++) {
        const int64_t ps = page_sizes[ps_i], per = (CAP + ps - 1) / ps, np = B * per + 3;
        float *kp = tu_alloc_normal(np * ps * Hkv * D, 1e4f), *vp = tu_alloc_normal(np * ps * Hkv * Dv, 1e4f);
        int32_t *bt = malloc(sizeof(int32_t) * (size_t)(B * per));
        int32_t *perm = malloc(sizeof(int32_t) * (size_t)np);
        for (int64_t i = 0; i < np; i++)
            perm[i] = (int32_t)i;
        for (int64_t i = np - 1; i > 0; i--) { /* shuffle */
            const int64_t j = (int64_t)(tu_uniform() * (double)(i + 1));
            const int32_t t = perm[i];
            perm[i] = perm[j], perm[j] = t;
        }
        for (int64_t b = 0; b < B; b++)
            for (int64_t g = 0; g < per; g++) {
                bt[b * per + g] = perm[b * per + g];
                for (int64_t r = 0; r < ps && g * ps + r < CAP; r++) {
                    memcpy(kp + (bt[b * per + g] * ps + r) * Hkv * D, kc0 + (b * CAP + g * ps + r) * Hkv * D,
                           sizeof(float) * (size_t)(Hkv * D));
                    memcpy(vp + (bt[b * per + g] * ps + r) * Hkv * Dv, vc0 + (b * CAP + g * ps + r) * Hkv * Dv,
                           sizeof(float) * (size_t)(Hkv * Dv));
                }
            }
        flashc_tensor tkp = flashc_tensor_4d(kp, FLASHC_F32, np, ps, Hkv, D);
        flashc_tensor tvp = flashc_tensor_4d(vp, FLASHC_F32, np, ps, Hkv, Dv);
        flashc_tensor tbt = flashc_tensor_2d(bt, FLASHC_I32, B, per);
        flashc_kv_cache pc = {sizeof pc, &tkp, &tvp, &tsl, &tbt, NULL, &tkn, &tvn, NULL};
        attn_force_backend("ref");
        TU_OK(flashc_attn_kvcache_fwd(&p, &pc, &tq, &to, &tl, NULL));
        attn_force_backend(NULL);
        assert_memory_equal(o, want, sizeof(float) * (size_t)(B * Sq * Hq * Dv));
        assert_memory_equal(lse, want_l, sizeof(float) * (size_t)(B * Hq * Sq));

        /* validation: a used block-table entry out of range, capacity exceeded */
        float *o0 = tu_copy(o, B * Sq * Hq * Dv);
        float *kp0 = tu_copy(kp, np * ps * Hkv * D);
        const int32_t keep = bt[2 * per + (13 + 1) / ps];
        bt[2 * per + (13 + 1) / ps] = (int32_t)np;
        assert_int_equal(flashc_attn_kvcache_fwd(&p, &pc, &tq, &to, &tl, NULL),
                         FLASHC_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(flashc_last_error(), "block_table"));
        bt[2 * per + (13 + 1) / ps] = -1;
        assert_int_equal(flashc_attn_kvcache_fwd(&p, &pc, &tq, &to, &tl, NULL),
                         FLASHC_ERR_INVALID_ARGUMENT);
        bt[2 * per + (13 + 1) / ps] = keep;
        seqlens[2] = (int32_t)(per * ps - 1); /* + S_new = 2 past the capacity */
        assert_int_equal(flashc_attn_kvcache_fwd(&p, &pc, &tq, &to, &tl, NULL),
                         FLASHC_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(flashc_last_error(), "capacity"));
        seqlens[2] = 13;
        assert_memory_equal(o, o0, sizeof(float) * (size_t)(B * Sq * Hq * Dv));
        assert_memory_equal(kp, kp0, sizeof(float) * (size_t)(np * ps * Hkv * D));
        free(kp), free(vp), free(bt), free(perm), free(o0), free(kp0);
    }

    /* validation without writes: k_new alone, no seqlens with k_new, wrong index dtype */
    memcpy(kc, kc0, sizeof(float) * (size_t)(B * CAP * Hkv * D));
    float *kc1 = tu_copy(kc, B * CAP * Hkv * D);
    flashc_kv_cache bad = c;
    bad.v_new = NULL;
    assert_int_equal(flashc_attn_kvcache_fwd(&p, &bad, &tq, &to, &tl, NULL),
                     FLASHC_ERR_NULL_POINTER);
    bad = c;
    bad.cache_seqlens = NULL;
    assert_int_equal(flashc_attn_kvcache_fwd(&p, &bad, &tq, &to, &tl, NULL),
                     FLASHC_ERR_NULL_POINTER);
    flashc_tensor fsl = tsl;
    fsl.dtype = FLASHC_F32;
    bad = c;
    bad.cache_seqlens = &fsl;
    assert_int_equal(flashc_attn_kvcache_fwd(&p, &bad, &tq, &to, &tl, NULL),
                     FLASHC_ERR_UNSUPPORTED_DTYPE);
    int32_t idx[3] = {2, 0, 2}; /* two sequences appending into one cache row */
    flashc_tensor tidx = flashc_tensor_1d(idx, FLASHC_I32, B);
    bad = c;
    bad.cache_batch_idx = &tidx;
    assert_int_equal(flashc_attn_kvcache_fwd(&p, &bad, &tq, &to, &tl, NULL),
                     FLASHC_ERR_INVALID_ARGUMENT);
    idx[2] = 3; /* out of range */
    bad.k_new = bad.v_new = NULL;
    assert_int_equal(flashc_attn_kvcache_fwd(&p, &bad, &tq, &to, &tl, NULL),
                     FLASHC_ERR_INVALID_ARGUMENT);
    assert_memory_equal(kc, kc1, sizeof(float) * (size_t)(B * CAP * Hkv * D));
    /* cache_batch_idx maps sequences onto cache rows (no append) */
    idx[0] = 2, idx[1] = 0, idx[2] = 1;
    attn_force_backend("ref");
    TU_OK(flashc_attn_kvcache_fwd(&p, &bad, &tq, &to, &tl, NULL));
    attn_force_backend(NULL);
    {
        const int64_t b = 0, sk = seqlens[0];
        float *so = tu_poisoned(Sq * Hq * Dv);
        flashc_tensor sq = flashc_tensor_4d(q + b * Sq * Hq * D, FLASHC_F32, 1, Sq, Hq, D);
        flashc_tensor sk_ = flashc_tensor_4d(kc + 2 * CAP * Hkv * D, FLASHC_F32, 1, sk, Hkv, D);
        flashc_tensor sv = flashc_tensor_4d(vc + 2 * CAP * Hkv * Dv, FLASHC_F32, 1, sk, Hkv, Dv);
        flashc_tensor sot = flashc_tensor_4d(so, FLASHC_F32, 1, Sq, Hq, Dv);
        TU_OK(flashc_attn_fwd_naive(&p, &sq, &sk_, &sv, &sot, NULL, NULL));
        assert_memory_equal(o, so, sizeof(float) * (size_t)(Sq * Hq * Dv));
        free(so);
    }
    free(q), free(kn), free(vn), free(kc), free(vc), free(kc0), free(vc0), free(kc1);
    free(o), free(lse), free(want), free(want_l);
}

/* ---- workspace ------------------------------------------------------------------------------ */

static void test_workspace(void **state)
{
    (void)state;
    float *q, *k, *v, *o;
    flashc_tensor tq, tk, tv, to;
    small_dense(&q, &k, &v, &o, &tq, &tk, &tv, &to);
    flashc_attn_params p = flashc_attn_params_default();
    size_t bytes = 0;
    attn_force_backend("ref");
    TU_OK(flashc_attn_fwd_workspace_size(&p, &tq, &tk, &tv, &to, NULL, &bytes));
    assert_true(bytes >= 2 * 5 * 7 * sizeof(float));
    TU_OK(flashc_attn_fwd(&p, &tq, &tk, &tv, &to, NULL, NULL));
    float *want = tu_copy(o, 2 * 5 * 2 * 8);
    char *ws = malloc(bytes + 3);
    p.workspace = ws + 3; /* any alignment */
    p.workspace_bytes = bytes;
    memset(o, 0xff, sizeof(float) * 2 * 5 * 2 * 8);
    flashc_mem_reset_peak();
    TU_OK(flashc_attn_fwd(&p, &tq, &tk, &tv, &to, NULL, NULL));
    assert_int_equal(flashc_mem_get().alloc_count, 0); /* nothing allocated */
    assert_memory_equal(o, want, sizeof(float) * 2 * 5 * 2 * 8);
    p.workspace_bytes = bytes - 1;
    memset(o, 0xff, sizeof(float) * 2 * 5 * 2 * 8);
    float *o0 = tu_copy(o, 2 * 5 * 2 * 8);
    assert_int_equal(flashc_attn_fwd(&p, &tq, &tk, &tv, &to, NULL, NULL),
                     FLASHC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(flashc_last_error(), "workspace"));
    assert_memory_equal(o, o0, sizeof(float) * 2 * 5 * 2 * 8);
    attn_force_backend(NULL);
    assert_int_equal(flashc_attn_fwd_workspace_size(&p, &tq, &tk, &tv, &to, NULL, NULL),
                     FLASHC_ERR_NULL_POINTER);
    free(q), free(k), free(v), free(o), free(want), free(ws), free(o0);
}

/* ---- the bound on one call (issue 10, F1/F2) -------------------------------------------- */

static void test_work_bound(void **state)
{
    (void)state;
    float q[4] = {1, 2, 3, 4}, kv[1] = {1}, o[4], lse[4];
    flashc_tensor tq = flashc_tensor_4d(q, FLASHC_F32, 1, 4, 1, 1);
    flashc_tensor tk = flashc_tensor_4d(kv, FLASHC_F32, 1, (int64_t)1 << 40, 1, 1);
    for (int i = 0; i < 4; i++)
        tk.stride[i] = 0; /* a broadcast view of one element */
    flashc_tensor to = flashc_tensor_4d(o, FLASHC_F32, 1, 4, 1, 1);
    flashc_tensor tl = flashc_tensor_3d(lse, FLASHC_F32, 1, 1, 4);
    for (int naive = 0; naive < 2; naive++) {
        for (int i = 0; i < 4; i++)
            o[i] = lse[i] = NAN;
        flashc_status st = naive ? flashc_attn_fwd_naive(NULL, &tq, &tk, &tk, &to, &tl, NULL)
                                 : flashc_attn_fwd(NULL, &tq, &tk, &tk, &to, &tl, NULL);
        assert_int_equal(st, FLASHC_ERR_UNSUPPORTED);
        assert_non_null(strstr(flashc_last_error(), "FLASHC_MAX_ELEMENTS"));
        for (int i = 0; i < 4; i++)
            assert_true(isnan(o[i]) && isnan(lse[i]));
    }
}

int main(void)
{
    tu_seed_from_env();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_params_abi),       cmocka_unit_test(test_reference_modifiers),
        cmocka_unit_test(test_varlen_reference), cmocka_unit_test(test_kvcache_reference),
        cmocka_unit_test(test_workspace),        cmocka_unit_test(test_work_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
