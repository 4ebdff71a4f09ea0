/* test_attn_bwd.c — attention backward: flash (recomputation from the LSE) against the naive
 * reference, both against central finite differences in float64, determinism across runs and
 * thread counts, bad inputs, untouched inputs, and measured extra memory. */
#include "common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a problem instance ---------------------------------------------------------------------- */

enum layout {
    LAYOUT_BSHD, /* contiguous (B, S, H, D): the flash-attn convention                        */
    LAYOUT_BHSD, /* (B, H, S, D) memory viewed as (B, S, H, D)                               */
    LAYOUT_BSDH, /* (B, S, D, H) memory: feature stride H, the tile-conversion path          */
};

typedef struct shape {
    int64_t B, Sq, Sk, Hq, Hkv, D;
    int causal;
    int64_t br, bc; /* 0 = library default */
    enum layout layout;
} shape;

typedef struct attn_case {
    shape s;
    flashc_attn_params params;
    float *q, *k, *v, *o, *dout, *lse, *dq, *dk, *dv;
    size_t nq, nk, nlse; /* elements of q-like, k-like and lse buffers */
    flashc_tensor tq, tk, tv, to, tdo, tlse, tdq, tdk, tdv;
    float *snap; /* copy of every input, to check that no call modifies one */
} attn_case;

static flashc_tensor view4(float *data, const shape *s, int64_t S, int64_t H)
{
    flashc_tensor t = flashc_tensor_4d(data, FLASHC_F32, s->B, S, H, s->D);
    const int64_t D = s->D;
    if (s->layout == LAYOUT_BHSD) {
        int64_t st[4] = {H * S * D, D, S * D, 1};
        memcpy(t.stride, st, sizeof st);
    } else if (s->layout == LAYOUT_BSDH) {
        int64_t st[4] = {S * D * H, D * H, 1, H};
        memcpy(t.stride, st, sizeof st);
    }
    return t;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    assert_non_null(p);
    return p;
}

/* Fresh random q, k, v, dO (the binary prints its seed); o and lse from the flash forward, as
 * in training. */
static attn_case make_case(const shape *s)
{
    attn_case c;
    memset(&c, 0, sizeof c);
    c.params = flashc_attn_params_default();
    c.s = *s;
    c.params.causal = s->causal;
    c.params.block_q = s->br;
    c.params.block_k = s->bc;
    c.nq = (size_t)(s->B * s->Sq * s->Hq * s->D);
    c.nk = (size_t)(s->B * s->Sk * s->Hkv * s->D);
    c.nlse = (size_t)(s->B * s->Hq * s->Sq);
    c.q = xmalloc(c.nq * 4), c.o = xmalloc(c.nq * 4), c.dout = xmalloc(c.nq * 4);
    c.dq = xmalloc(c.nq * 4);
    c.k = xmalloc(c.nk * 4), c.v = xmalloc(c.nk * 4), c.dk = xmalloc(c.nk * 4);
    c.dv = xmalloc(c.nk * 4);
    c.lse = xmalloc(c.nlse * 4);
    c.snap = xmalloc((3 * c.nq + 2 * c.nk + c.nlse) * 4);
    tu_fill_normal(c.q, (int64_t)c.nq, 1.0f), tu_fill_normal(c.k, (int64_t)c.nk, 1.0f);
    tu_fill_normal(c.v, (int64_t)c.nk, 1.0f), tu_fill_normal(c.dout, (int64_t)c.nq, 1.0f);
    c.tq = view4(c.q, s, s->Sq, s->Hq), c.to = view4(c.o, s, s->Sq, s->Hq);
    c.tdo = view4(c.dout, s, s->Sq, s->Hq), c.tdq = view4(c.dq, s, s->Sq, s->Hq);
    c.tk = view4(c.k, s, s->Sk, s->Hkv), c.tv = view4(c.v, s, s->Sk, s->Hkv);
    c.tdk = view4(c.dk, s, s->Sk, s->Hkv), c.tdv = view4(c.dv, s, s->Sk, s->Hkv);
    c.tlse = flashc_tensor_3d(c.lse, FLASHC_F32, s->B, s->Hq, s->Sq);
    assert_int_equal(flashc_attn_fwd(&c.params, &c.tq, &c.tk, &c.tv, &c.to, &c.tlse, NULL),
                     FLASHC_OK);
    return c;
}

static void free_case(attn_case *c)
{
    free(c->q), free(c->k), free(c->v), free(c->o), free(c->dout), free(c->lse);
    free(c->dq), free(c->dk), free(c->dv), free(c->snap);
}

static void snapshot_inputs(attn_case *c)
{
    float *p = c->snap;
    memcpy(p, c->q, c->nq * 4), p += c->nq;
    memcpy(p, c->o, c->nq * 4), p += c->nq;
    memcpy(p, c->dout, c->nq * 4), p += c->nq;
    memcpy(p, c->k, c->nk * 4), p += c->nk;
    memcpy(p, c->v, c->nk * 4), p += c->nk;
    memcpy(p, c->lse, c->nlse * 4);
}

static void assert_inputs_unchanged(const attn_case *c)
{
    const float *p = c->snap;
    assert_memory_equal(p, c->q, c->nq * 4), p += c->nq;
    assert_memory_equal(p, c->o, c->nq * 4), p += c->nq;
    assert_memory_equal(p, c->dout, c->nq * 4), p += c->nq;
    assert_memory_equal(p, c->k, c->nk * 4), p += c->nk;
    assert_memory_equal(p, c->v, c->nk * 4), p += c->nk;
    assert_memory_equal(p, c->lse, c->nlse * 4);
}

enum impl { FLASH, NAIVE };

/* One backward call on the case's tensors; checks that the inputs come back unchanged. */
static flashc_status run_bwd(attn_case *c, enum impl which, const flashc_attn_params *params,
                             flashc_attn_stats *stats)
{
    snapshot_inputs(c);
    flashc_status st =
        which == FLASH ? flashc_attn_bwd(params, &c->tq, &c->tk, &c->tv, &c->to, &c->tdo,
                                         &c->tlse, &c->tdq, &c->tdk, &c->tdv, stats)
                       : flashc_attn_bwd_naive(params, &c->tq, &c->tk, &c->tv, &c->to, &c->tdo,
                                               &c->tlse, &c->tdq, &c->tdk, &c->tdv, stats);
    assert_inputs_unchanged(c);
    return st;
}

/* Gradients of one run, copied out. */
typedef struct grads {
    float *dq, *dk, *dv;
} grads;

static grads run_grads(attn_case *c, enum impl which, const flashc_attn_params *params)
{
    flashc_status st = run_bwd(c, which, params, NULL);
    if (st != FLASHC_OK)
        fail_msg("backward failed: %s (%s)", flashc_status_string(st), flashc_last_error());
    grads g = {xmalloc(c->nq * 4), xmalloc(c->nk * 4), xmalloc(c->nk * 4)};
    memcpy(g.dq, c->dq, c->nq * 4), memcpy(g.dk, c->dk, c->nk * 4), memcpy(g.dv, c->dv, c->nk * 4);
    return g;
}

static void free_grads(grads *g) { free(g->dq), free(g->dk), free(g->dv); }

static void assert_all_finite(const char *what, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            fail_msg("%s[%zu] = %g is not finite", what, i, (double)x[i]);
}

/* max |a - b| / max(max |b|, 1): the error normalised by the gradient's size. The inputs are
 * N(0, 1), so the gradients and the terms they are summed from are O(1); the floor keeps a
 * gradient that vanishes by cancellation (a row with one visible key has P = 1, so
 * dS = dP - D = 0 up to the rounding of O(1) terms) from dividing that rounding by ~0. */
static double norm_err(const float *a, const float *b, size_t n)
{
    double e = 0.0, m = 1.0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - (double)b[i]);
        e = d > e || isnan(d) ? d : e;
        m = fabs((double)b[i]) > m ? fabs((double)b[i]) : m;
    }
    return e / m;
}

static void shape_name(const shape *s, char *buf, size_t n)
{
    snprintf(buf, n, "B%lld Sq%lld Sk%lld Hq%lld Hkv%lld D%lld causal%d br%lld bc%lld layout%d",
             (long long)s->B, (long long)s->Sq, (long long)s->Sk, (long long)s->Hq,
             (long long)s->Hkv, (long long)s->D, s->causal, (long long)s->br, (long long)s->bc,
             (int)s->layout);
}

/* ---- flash against the naive reference ------------------------------------------------------- */

static const shape odd_shapes[] = {
    /* B  Sq   Sk  Hq Hkv  D  causal br  bc  layout */
    {1, 1, 1, 1, 1, 8, 0, 0, 0, LAYOUT_BSHD},       /* n = 1 */
    {1, 1, 1, 1, 1, 8, 1, 0, 0, LAYOUT_BSHD},
    {1, 1, 37, 2, 1, 16, 1, 0, 0, LAYOUT_BSHD},     /* one query row (decode), MQA */
    {2, 37, 53, 4, 2, 24, 0, 16, 8, LAYOUT_BSHD},   /* Sq != Sk, tiles do not divide, GQA */
    {2, 37, 53, 4, 2, 24, 1, 16, 8, LAYOUT_BSHD},
    {1, 70, 45, 3, 1, 20, 1, 16, 16, LAYOUT_BSHD},  /* Sq > Sk causal: fully masked rows, MQA */
    {1, 70, 45, 3, 1, 20, 0, 0, 0, LAYOUT_BSHD},
    {2, 65, 65, 2, 2, 40, 1, 0, 0, LAYOUT_BHSD},    /* 65 = one more than the default tile */
    {1, 29, 31, 6, 3, 12, 1, 7, 5, LAYOUT_BSDH},    /* feature-strided views */
    {3, 130, 100, 2, 1, 72, 1, 64, 32, LAYOUT_BSHD},/* MQA, non-power-of-two head dim */
    {1, 9, 200, 2, 2, 5, 1, 4, 64, LAYOUT_BSHD},
};

static void test_flash_matches_reference(void **state)
{
    (void)state;
    for (size_t t = 0; t < sizeof odd_shapes / sizeof odd_shapes[0]; t++) {
        const shape *s = &odd_shapes[t];
        char name[160];
        shape_name(s, name, sizeof name);
        attn_case c = make_case(s);
        grads ref = run_grads(&c, NAIVE, &c.params);
        flashc_attn_stats st = FLASHC_ATTN_STATS_INIT;
        memset(&st, 0xff, sizeof st);
        st.struct_size = sizeof st;
        assert_int_equal(run_bwd(&c, FLASH, &c.params, &st), FLASHC_OK);
        assert_all_finite("dq", c.dq, c.nq);
        assert_all_finite("dk", c.dk, c.nk);
        assert_all_finite("dv", c.dv, c.nk);
        const double eq = norm_err(c.dq, ref.dq, c.nq), ek = norm_err(c.dk, ref.dk, c.nk),
                     ev = norm_err(c.dv, ref.dv, c.nk);
        /* float32 tiles against float64 sums: a few ulps times sqrt(length) */
        if (!(eq < 5e-6 && ek < 5e-6 && ev < 5e-6))
            fail_msg("%s: normalised errors dq %.3g dk %.3g dv %.3g", name, eq, ek, ev);

        /* The backward visits exactly the (Q block, K block) pairs with a visible key (blocks
         * above the causal diagonal skipped), once per query head. */
        int64_t br = st.block_q, bc = st.block_k, pairs = 0;
        assert_true(br > 0 && bc > 0);
        br = br < s->Sq ? br : s->Sq, bc = bc < s->Sk ? bc : s->Sk;
        for (int64_t i0 = 0; i0 < s->Sq; i0 += br) {
            const int64_t last = (i0 + br < s->Sq ? i0 + br : s->Sq) - 1;
            int64_t kend = s->causal ? last + 1 + s->Sk - s->Sq : s->Sk;
            kend = kend < s->Sk ? kend : s->Sk;
            pairs += kend > 0 ? (kend + bc - 1) / bc : 0;
        }
        assert_int_equal(st.tile_pairs, s->B * s->Hq * pairs);
        assert_int_equal(st.tile_pairs_total,
                         s->B * s->Hq * ((s->Sq + br - 1) / br) * ((s->Sk + bc - 1) / bc));
        if (s->causal && s->Sq > 64)
            assert_true(st.tile_pairs < st.tile_pairs_total);
        free_grads(&ref);
        free_case(&c);
    }
}

/* Sq > Sk under the bottom-right causal mask: query rows i < Sq - Sk see no key. Their LSE is
 * -inf, their dQ exactly zero, and they add nothing to dK, dV (no NaN from exp(S + inf)). */
static void test_fully_masked_rows(void **state)
{
    (void)state;
    const shape s = {2, 23, 6, 2, 1, 8, 1, 4, 4, LAYOUT_BSHD};
    attn_case c = make_case(&s);
    const int64_t masked = s.Sq - s.Sk;
    for (int64_t b = 0; b < s.B; b++)
        for (int64_t h = 0; h < s.Hq; h++)
            for (int64_t i = 0; i < masked; i++)
                assert_true(c.lse[(b * s.Hq + h) * s.Sq + i] == -INFINITY);
    for (int impl = FLASH; impl <= NAIVE; impl++) {
        memset(c.dq, 0xff, c.nq * 4); /* NaN poison: every element must be written */
        assert_int_equal(run_bwd(&c, (enum impl)impl, &c.params, NULL), FLASHC_OK);
        assert_all_finite("dq", c.dq, c.nq);
        assert_all_finite("dk", c.dk, c.nk);
        assert_all_finite("dv", c.dv, c.nk);
        for (int64_t b = 0; b < s.B; b++)
            for (int64_t i = 0; i < s.Sq; i++)
                for (int64_t h = 0; h < s.Hq; h++) {
                    double norm = 0.0;
                    for (int64_t d = 0; d < s.D; d++)
                        norm += fabs(c.dq[((b * s.Sq + i) * s.Hq + h) * s.D + d]);
                    if (i < masked)
                        assert_true(norm == 0.0);
                    else if (i > masked) /* row `masked` sees one key: P = 1, dQ = 0 too */
                        assert_true(norm > 0.0);
                }
    }
    /* dK, dV equal those of the visible rows alone: the same problem without the masked rows. */
    grads full = run_grads(&c, FLASH, &c.params);
    attn_case tail = c;
    const int64_t off = masked * s.Hq * s.D;
    tail.tq.data = c.q + off, tail.to.data = c.o + off, tail.tdo.data = c.dout + off;
    tail.tdq.data = c.dq + off;
    tail.tq.shape[1] = tail.to.shape[1] = tail.tdo.shape[1] = tail.tdq.shape[1] = s.Sk;
    tail.tlse.data = c.lse + masked;
    tail.tlse.shape[2] = s.Sk;
    tail.tlse.stride[1] = s.Sq, tail.tlse.stride[0] = s.Hq * s.Sq;
    assert_int_equal(flashc_attn_bwd(&c.params, &tail.tq, &tail.tk, &tail.tv, &tail.to, &tail.tdo,
                                     &tail.tlse, &tail.tdq, &tail.tdk, &tail.tdv, NULL),
                     FLASHC_OK);
    assert_true(norm_err(c.dk, full.dk, c.nk) < 1e-6);
    assert_true(norm_err(c.dv, full.dv, c.nk) < 1e-6);
    free_grads(&full);
    free_case(&c);
}

/* The contract is on L itself: a row whose given LSE is -inf gets zero gradients even where the
 * mask would let it see keys (exp(S - L) would be +inf there), and adds nothing to dK, dV. */
static void test_lse_minus_inf_row(void **state)
{
    (void)state;
    const shape s = {1, 12, 10, 2, 1, 8, 0, 4, 4, LAYOUT_BSHD};
    attn_case c = make_case(&s);
    const int64_t row = 5, head = 1;
    c.lse[head * s.Sq + row] = -INFINITY;
    assert_int_equal(run_bwd(&c, FLASH, &c.params, NULL), FLASHC_OK);
    assert_all_finite("dq", c.dq, c.nq);
    assert_all_finite("dk", c.dk, c.nk);
    assert_all_finite("dv", c.dv, c.nk);
    for (int64_t d = 0; d < s.D; d++)
        assert_true(c.dq[(row * s.Hq + head) * s.D + d] == 0.0f);
    grads with_row = run_grads(&c, FLASH, &c.params);
    /* dK, dV as if that row's dO were zero (its P never enters the sums) */
    for (int64_t d = 0; d < s.D; d++)
        c.dout[(row * s.Hq + head) * s.D + d] = 0.0f;
    grads without = run_grads(&c, FLASH, &c.params);
    assert_true(norm_err(with_row.dv, without.dv, c.nk) < 1e-6);
    assert_true(norm_err(with_row.dk, without.dk, c.nk) < 1e-6);
    free_grads(&with_row), free_grads(&without);
    free_case(&c);
}

/* ---- against finite differences of a float64 loss -------------------------------------------- */

/* loss = sum(dO * attention(q, k, v)) in float64, the layouts of LAYOUT_BSHD. */
static double loss64(const shape *s, float scale, const double *q, const double *k,
                     const double *v, const float *dout)
{
    const int64_t D = s->D, group = s->Hq / s->Hkv;
    double loss = 0.0, sc[64], o[16];
    for (int64_t b = 0; b < s->B; b++)
        for (int64_t h = 0; h < s->Hq; h++)
            for (int64_t i = 0; i < s->Sq; i++) {
                int64_t kend = s->causal ? i + 1 + s->Sk - s->Sq : s->Sk;
                kend = kend < s->Sk ? kend : s->Sk;
                if (kend <= 0)
                    continue;
                const double *qi = q + ((b * s->Sq + i) * s->Hq + h) * D;
                double m = -INFINITY, l = 0.0;
                for (int64_t j = 0; j < kend; j++) {
                    const double *kj = k + ((b * s->Sk + j) * s->Hkv + h / group) * D;
                    double acc = 0.0;
                    for (int64_t d = 0; d < D; d++)
                        acc += qi[d] * kj[d];
                    sc[j] = acc * scale;
                    m = sc[j] > m ? sc[j] : m;
                }
                for (int64_t d = 0; d < D; d++)
                    o[d] = 0.0;
                for (int64_t j = 0; j < kend; j++) {
                    const double e = exp(sc[j] - m);
                    const double *vj = v + ((b * s->Sk + j) * s->Hkv + h / group) * D;
                    l += e;
                    for (int64_t d = 0; d < D; d++)
                        o[d] += e * vj[d];
                }
                for (int64_t d = 0; d < D; d++)
                    loss += dout[((b * s->Sq + i) * s->Hq + h) * D + d] * o[d] / l;
            }
    return loss;
}

/* Central differences of loss64 with respect to every element of x (n of them). */
static void fd_grad(const shape *s, float scale, double *q, double *k, double *v,
                    const float *dout, double *x, size_t n, double *g)
{
    const double eps = 1e-5;
    for (size_t i = 0; i < n; i++) {
        const double x0 = x[i];
        x[i] = x0 + eps;
        const double lp = loss64(s, scale, q, k, v, dout);
        x[i] = x0 - eps;
        const double lm = loss64(s, scale, q, k, v, dout);
        x[i] = x0;
        g[i] = (lp - lm) / (2 * eps);
    }
}

static double err_vs64(const float *a, const double *ref, size_t n)
{
    double e = 0.0, m = 1.0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - ref[i]);
        e = d > e || isnan(d) ? d : e;
        m = fabs(ref[i]) > m ? fabs(ref[i]) : m;
    }
    return e / m;
}

static void test_finite_differences(void **state)
{
    (void)state;
    static const shape tiny[] = {
        {1, 3, 5, 2, 1, 3, 0, 2, 2, LAYOUT_BSHD},
        {1, 3, 5, 2, 1, 3, 1, 2, 2, LAYOUT_BSHD},
        {2, 5, 3, 3, 3, 2, 1, 2, 2, LAYOUT_BSHD}, /* Sq > Sk causal: masked rows */
        {1, 4, 4, 4, 2, 5, 1, 3, 3, LAYOUT_BSHD},
    };
    for (size_t t = 0; t < sizeof tiny / sizeof tiny[0]; t++) {
        const shape *s = &tiny[t];
        attn_case c = make_case(s);
        c.params.has_softmax_scale = 1, c.params.softmax_scale = 0.7f; /* a non-default scale, through fwd and bwd */
        assert_int_equal(flashc_attn_fwd(&c.params, &c.tq, &c.tk, &c.tv, &c.to, &c.tlse, NULL),
                         FLASHC_OK);
        double *q = xmalloc(c.nq * 8), *k = xmalloc(c.nk * 8), *v = xmalloc(c.nk * 8);
        double *gq = xmalloc(c.nq * 8), *gk = xmalloc(c.nk * 8), *gv = xmalloc(c.nk * 8);
        for (size_t i = 0; i < c.nq; i++)
            q[i] = c.q[i];
        for (size_t i = 0; i < c.nk; i++)
            k[i] = c.k[i], v[i] = c.v[i];
        fd_grad(s, 0.7f, q, k, v, c.dout, q, c.nq, gq);
        fd_grad(s, 0.7f, q, k, v, c.dout, k, c.nk, gk);
        fd_grad(s, 0.7f, q, k, v, c.dout, v, c.nk, gv);
        for (int impl = FLASH; impl <= NAIVE; impl++) {
            assert_int_equal(run_bwd(&c, (enum impl)impl, &c.params, NULL), FLASHC_OK);
            const double eq = err_vs64(c.dq, gq, c.nq), ek = err_vs64(c.dk, gk, c.nk),
                         ev = err_vs64(c.dv, gv, c.nk);
            if (!(eq < 1e-5 && ek < 1e-5 && ev < 1e-5))
                fail_msg("shape %zu %s: errors vs finite differences dq %.3g dk %.3g dv %.3g", t,
                         impl == FLASH ? "flash" : "naive", eq, ek, ev);
        }
        free(q), free(k), free(v), free(gq), free(gk), free(gv);
        free_case(&c);
    }
}

/* ---- determinism ----------------------------------------------------------------------------- */

static void assert_grads_identical(const attn_case *c, const grads *a, const grads *b)
{
    assert_memory_equal(a->dq, b->dq, c->nq * 4);
    assert_memory_equal(a->dk, b->dk, c->nk * 4);
    assert_memory_equal(a->dv, b->dv, c->nk * 4);
}

/* Bit-identical for repeated runs and for 1, 2 and 3 threads. With B * Hkv = 1 one thread runs
 * the fused schedule and two threads the split one; with B * Hkv = 4, three threads split. */
static void test_deterministic(void **state)
{
    (void)state;
    static const shape shapes[] = {
        {1, 77, 93, 2, 1, 24, 1, 16, 8, LAYOUT_BSHD},
        {2, 61, 50, 4, 2, 16, 0, 8, 16, LAYOUT_BSHD},
        {2, 61, 50, 4, 2, 16, 1, 0, 0, LAYOUT_BSDH},
    };
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        attn_case c = make_case(&shapes[t]);
        flashc_attn_params pr = c.params;
        pr.num_threads = 1;
        grads one = run_grads(&c, FLASH, &pr);
        grads again = run_grads(&c, FLASH, &pr);
        assert_grads_identical(&c, &one, &again);
        for (int th = 2; th <= 3; th++) {
            pr.num_threads = th;
            grads g = run_grads(&c, FLASH, &pr);
            grads g2 = run_grads(&c, FLASH, &pr);
            assert_grads_identical(&c, &one, &g);
            assert_grads_identical(&c, &g, &g2);
            free_grads(&g), free_grads(&g2);
        }
        /* The naive reference is deterministic too (its threads split rows, not sums). */
        pr.num_threads = 1;
        grads n1 = run_grads(&c, NAIVE, &pr);
        pr.num_threads = 2;
        grads n2 = run_grads(&c, NAIVE, &pr);
        assert_grads_identical(&c, &n1, &n2);
        free_grads(&one), free_grads(&again), free_grads(&n1), free_grads(&n2);
        free_case(&c);
    }
}

/* ---- bad inputs ------------------------------------------------------------------------------ */

/* A mutable copy of the case's arguments. */
typedef struct args {
    flashc_attn_params params;
    const flashc_attn_params *pp;
    flashc_tensor q, k, v, o, dout, lse, dq, dk, dv;
    flashc_tensor *tq, *tk, *tv, *to, *tdo, *tlse, *tdq, *tdk, *tdv;
} args;

static void args_init(args *a, const attn_case *c)
{
    a->params = c->params;
    a->pp = &a->params;
    a->q = c->tq, a->k = c->tk, a->v = c->tv, a->o = c->to, a->dout = c->tdo, a->lse = c->tlse;
    a->dq = c->tdq, a->dk = c->tdk, a->dv = c->tdv;
    a->tq = &a->q, a->tk = &a->k, a->tv = &a->v, a->to = &a->o, a->tdo = &a->dout;
    a->tlse = &a->lse, a->tdq = &a->dq, a->tdk = &a->dk, a->tdv = &a->dv;
}

static const unsigned char POISON = 0xA5;

static void assert_poisoned(const float *x, size_t n)
{
    const unsigned char *b = (const unsigned char *)x;
    for (size_t i = 0; i < n * 4; i++)
        if (b[i] != POISON)
            fail_msg("output byte %zu was written by a failing call", i);
}

/* Expects status from both implementations (flash and naive), outputs untouched, inputs
 * unchanged and a detail message. */
static void expect_bad(attn_case *c, const args *a, flashc_status want_flash,
                       flashc_status want_naive, const char *what)
{
    for (int impl = FLASH; impl <= NAIVE; impl++) {
        const flashc_status want = impl == FLASH ? want_flash : want_naive;
        memset(c->dq, POISON, c->nq * 4);
        memset(c->dk, POISON, c->nk * 4);
        memset(c->dv, POISON, c->nk * 4);
        snapshot_inputs(c);
        const flashc_status st =
            impl == FLASH
                ? flashc_attn_bwd(a->pp, a->tq, a->tk, a->tv, a->to, a->tdo, a->tlse, a->tdq,
                                  a->tdk, a->tdv, NULL)
                : flashc_attn_bwd_naive(a->pp, a->tq, a->tk, a->tv, a->to, a->tdo, a->tlse,
                                        a->tdq, a->tdk, a->tdv, NULL);
        if (st != want)
            fail_msg("%s (%s): got '%s' (%s), expected '%s'", what,
                     impl == FLASH ? "flash" : "naive", flashc_status_string(st),
                     flashc_last_error(), flashc_status_string(want));
        if (st == FLASHC_OK)
            continue;
        assert_true(strlen(flashc_last_error()) > 0);
        /* An output aliased onto an input (the overlap cases) is covered by the input check. */
        if (a->dq.data == c->dq)
            assert_poisoned(c->dq, c->nq);
        if (a->dk.data == c->dk)
            assert_poisoned(c->dk, c->nk);
        if (a->dv.data == c->dv)
            assert_poisoned(c->dv, c->nk);
        assert_inputs_unchanged(c);
    }
}

static void test_bad_inputs(void **state)
{
    (void)state;
    const shape s = {2, 9, 7, 4, 2, 8, 1, 0, 0, LAYOUT_BSHD};
    attn_case c = make_case(&s);
    const flashc_status BOTH_OK = FLASHC_OK;
    args a;

    args_init(&a, &c);
    expect_bad(&c, &a, BOTH_OK, BOTH_OK, "valid arguments");
    args_init(&a, &c), a.pp = NULL;
    expect_bad(&c, &a, BOTH_OK, BOTH_OK, "NULL params (the defaults)");

    args_init(&a, &c), a.tq = NULL;
    expect_bad(&c, &a, FLASHC_ERR_NULL_POINTER, FLASHC_ERR_NULL_POINTER, "q NULL");
    args_init(&a, &c), a.tdo = NULL;
    expect_bad(&c, &a, FLASHC_ERR_NULL_POINTER, FLASHC_ERR_NULL_POINTER, "dout NULL");
    args_init(&a, &c), a.tdv = NULL;
    expect_bad(&c, &a, FLASHC_ERR_NULL_POINTER, FLASHC_ERR_NULL_POINTER, "dv NULL");
    args_init(&a, &c), a.dk.data = NULL;
    expect_bad(&c, &a, FLASHC_ERR_NULL_POINTER, FLASHC_ERR_NULL_POINTER, "dk.data NULL");
    /* the flash backward needs the forward's LSE; the naive recomputes P without it */
    args_init(&a, &c), a.tlse = NULL;
    expect_bad(&c, &a, FLASHC_ERR_NULL_POINTER, BOTH_OK, "lse NULL");

    args_init(&a, &c), a.dout.shape[1] = s.Sq - 1;
    expect_bad(&c, &a, FLASHC_ERR_INVALID_SHAPE, FLASHC_ERR_INVALID_SHAPE, "dout seqlen");
    args_init(&a, &c), a.dk.shape[1] = s.Sk - 1;
    expect_bad(&c, &a, FLASHC_ERR_INVALID_SHAPE, FLASHC_ERR_INVALID_SHAPE, "dk seqlen");
    args_init(&a, &c), a.dv.shape[2] = 1;
    expect_bad(&c, &a, FLASHC_ERR_HEAD_MISMATCH, FLASHC_ERR_HEAD_MISMATCH, "dv heads");
    args_init(&a, &c), a.dq.shape[3] = s.D - 1;
    expect_bad(&c, &a, FLASHC_ERR_DIM_MISMATCH, FLASHC_ERR_DIM_MISMATCH, "dq head dim");
    args_init(&a, &c), a.dout.ndim = 3;
    expect_bad(&c, &a, FLASHC_ERR_INVALID_SHAPE, FLASHC_ERR_INVALID_SHAPE, "dout rank");
    args_init(&a, &c), a.lse.shape[2] = s.Sq - 1;
    expect_bad(&c, &a, FLASHC_ERR_INVALID_SHAPE, FLASHC_ERR_INVALID_SHAPE, "lse seqlen");

    /* Hq = 3 query heads (views of the first three) against Hkv = 2 */
    args_init(&a, &c);
    a.q.shape[2] = a.o.shape[2] = a.dout.shape[2] = a.dq.shape[2] = 3;
    a.lse.shape[1] = 3;
    expect_bad(&c, &a, FLASHC_ERR_HEAD_MISMATCH, FLASHC_ERR_HEAD_MISMATCH, "Hq % Hkv != 0");

    args_init(&a, &c), a.dq.data = c.q;
    expect_bad(&c, &a, FLASHC_ERR_OVERLAP, FLASHC_ERR_OVERLAP, "dq overlaps q");
    args_init(&a, &c), a.dv.data = c.dout + 5;
    expect_bad(&c, &a, FLASHC_ERR_OVERLAP, FLASHC_ERR_OVERLAP, "dv overlaps dout");
    args_init(&a, &c), a.dk.data = c.lse;
    expect_bad(&c, &a, FLASHC_ERR_OVERLAP, FLASHC_ERR_OVERLAP, "dk overlaps lse");
    args_init(&a, &c), a.dk.data = c.dv;
    expect_bad(&c, &a, FLASHC_ERR_OVERLAP, FLASHC_ERR_OVERLAP, "dk overlaps dv");

    args_init(&a, &c), a.dv.stride[1] = -a.dv.stride[1];
    expect_bad(&c, &a, FLASHC_ERR_INVALID_STRIDE, FLASHC_ERR_INVALID_STRIDE, "negative stride");
    args_init(&a, &c), a.dout.dtype = FLASHC_BF16;
    expect_bad(&c, &a, FLASHC_ERR_DTYPE_MISMATCH, FLASHC_ERR_DTYPE_MISMATCH, "dout dtype");
    args_init(&a, &c), a.dq.dtype = FLASHC_F16;
    expect_bad(&c, &a, FLASHC_ERR_DTYPE_MISMATCH, FLASHC_ERR_DTYPE_MISMATCH, "dq dtype");
    args_init(&a, &c), a.lse.dtype = FLASHC_BF16;
    expect_bad(&c, &a, FLASHC_ERR_UNSUPPORTED_DTYPE, FLASHC_ERR_UNSUPPORTED_DTYPE, "lse dtype");
    args_init(&a, &c), a.v.dtype = (flashc_dtype)77;
    expect_bad(&c, &a, FLASHC_ERR_UNSUPPORTED_DTYPE, FLASHC_ERR_UNSUPPORTED_DTYPE, "bad dtype");

    args_init(&a, &c), a.params.has_softmax_scale = 1, a.params.softmax_scale = NAN;
    expect_bad(&c, &a, FLASHC_ERR_INVALID_ARGUMENT, FLASHC_ERR_INVALID_ARGUMENT, "scale NaN");
    args_init(&a, &c), a.params.block_k = -1;
    expect_bad(&c, &a, FLASHC_ERR_INVALID_ARGUMENT, FLASHC_ERR_INVALID_ARGUMENT, "block_k < 0");
    args_init(&a, &c), a.params.num_threads = -2;
    expect_bad(&c, &a, FLASHC_ERR_INVALID_ARGUMENT, FLASHC_ERR_INVALID_ARGUMENT,
               "num_threads < 0");

    /* bfloat16 storage throughout (views of the float buffers: half their bytes): accepted by
     * both (test_attn_bwd_v2.c checks the bf16/f16 values). */
    args_init(&a, &c);
    a.q.dtype = a.k.dtype = a.v.dtype = a.o.dtype = a.dout.dtype = FLASHC_BF16;
    a.dq.dtype = a.dk.dtype = a.dv.dtype = FLASHC_BF16;
    memset(c.dq, POISON, c.nq * 4);
    expect_bad(&c, &a, BOTH_OK, BOTH_OK, "bf16 storage");

    /* device memory: the CUDA backward takes bf16/fp16 only (a build without CUDA refuses
     * any CUDA tensor), and the reference is host-only */
    args_init(&a, &c);
    a.q.device = a.k.device = a.v.device = a.o.device = a.dout.device = a.lse.device =
        FLASHC_DEVICE_CUDA;
    a.dq.device = a.dk.device = a.dv.device = FLASHC_DEVICE_CUDA;
#ifdef FLASHC_HAVE_CUDA
    expect_bad(&c, &a, FLASHC_ERR_UNSUPPORTED_DTYPE, FLASHC_ERR_UNSUPPORTED, "CUDA tensors");
#else
    expect_bad(&c, &a, FLASHC_ERR_UNSUPPORTED, FLASHC_ERR_UNSUPPORTED, "CUDA tensors");
#endif
    free_case(&c);
}

/* The naive reference recomputes P by a full softmax: lse given or not, the same bits. */
static void test_naive_without_lse(void **state)
{
    (void)state;
    const shape s = {1, 19, 23, 2, 1, 8, 1, 0, 0, LAYOUT_BSHD};
    attn_case c = make_case(&s);
    grads with = run_grads(&c, NAIVE, &c.params);
    snapshot_inputs(&c);
    assert_int_equal(flashc_attn_bwd_naive(&c.params, &c.tq, &c.tk, &c.tv, &c.to, &c.tdo, NULL,
                                           &c.tdq, &c.tdk, &c.tdv, NULL),
                     FLASHC_OK);
    assert_inputs_unchanged(&c);
    assert_memory_equal(with.dq, c.dq, c.nq * 4);
    assert_memory_equal(with.dk, c.dk, c.nk * 4);
    assert_memory_equal(with.dv, c.dv, c.nk * 4);
    free_grads(&with);
    free_case(&c);
}

/* ---- memory ---------------------------------------------------------------------------------- */

/* Peak bytes the library allocated during one backward call. */
static int64_t measured_peak(attn_case *c, enum impl which)
{
    const int64_t before = flashc_mem_get().current_bytes;
    flashc_mem_reset_peak();
    assert_int_equal(run_bwd(c, which, &c->params, NULL), FLASHC_OK);
    assert_int_equal(flashc_mem_get().current_bytes, before); /* everything freed */
    return flashc_mem_get().peak_bytes - before;
}

/* At n = 1024 the naive backward holds P and dS (2 n^2 floats, 8 MiB); the flash backward
 * holds D (n floats) and fixed per-thread tiles: doubling n adds about n floats of memory. */
static void test_extra_memory(void **state)
{
    (void)state;
    shape s = {1, 1024, 1024, 1, 1, 64, 1, 0, 0, LAYOUT_BSHD};
    attn_case c = make_case(&s);
    const int64_t naive = measured_peak(&c, NAIVE), flash = measured_peak(&c, FLASH);
    free_case(&c);
    s.Sq = s.Sk = 2048;
    c = make_case(&s);
    const int64_t flash2 = measured_peak(&c, FLASH);
    free_case(&c);
    print_message("extra memory at n = 1024: naive %lld bytes, flash %lld bytes; flash at "
                  "n = 2048: %lld bytes\n",
                  (long long)naive, (long long)flash, (long long)flash2);
    assert_true(naive >= 2 * 1024 * 1024 * 4);
    assert_true(flash * 20 < naive);
    assert_true(flash2 - flash <= 2 * 1024 * 4); /* O(n): n = 1024 more floats of D, plus slack */
}

int main(void)
{
    tu_seed_from_env();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flash_matches_reference),
        cmocka_unit_test(test_fully_masked_rows),
        cmocka_unit_test(test_lse_minus_inf_row),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_naive_without_lse),
        cmocka_unit_test(test_extra_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
