/*
 * test_attn_v2.c — the CPU forward on the whole v2 contract: key ranges (causal, windows),
 * softcap, ALiBi, Dk != Dv, GQA, varlen, KV caches (contiguous and paged, append), split-KV,
 * workspaces, and the issue-10 findings of the forward (F4, F5, F6, NaN propagation).
 *
 * Oracles:
 *   dense     flashc_attn_fwd_naive (float64 accumulation) on the same (rounded) inputs;
 *   varlen,   the public entry point twice: once with attn_force_backend("ref") (the float64
 *   kvcache   reference through the same validation), once normally.
 * Accuracy follows FlashAttention's rule in every dtype (as tests/test_attn_lowp.c): max |O -
 * O_ref| <= 2 x max |O_naive - O_ref| + 2^-21, where O_naive is a plain same-precision
 * implementation written here from the contract in flashc.h (scores, modifiers, softmax and P
 * rounded to the storage type, float32 sums). Properties (bit-identical unless said):
 *   K/V outside a row's key range poisoned with 1e4 or NaN leave that row unchanged;
 *   permuting the keys (no mask, no ALiBi) changes O only by fp32 rounding;
 *   split-KV + merge = one pass (rounding); num_splits = 0 gives the same bits on 1, 2, 3 threads;
 *   paged caches (shuffled pages, page sizes 1, 3, 16) = the contiguous cache, and a paged
 *   varlen = the packed one;
 *   varlen = each sequence alone; append writes exactly the new rows;
 *   a caller's workspace: the call allocates nothing.
 * Runs on each kernel table through tests/CMakeLists.txt's FLASHC_TEST_ISAS loop.
 */
#include "common.h"
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------------------------ */

static const flashc_dtype DTYPES[3] = {FLASHC_F32, FLASHC_BF16, FLASHC_F16};

static float rnd(flashc_dtype dt, float x)
{
    uint16_t h;
    if (dt == FLASHC_F32)
        return x;
    flashc__store(&h, dt, 0, x);
    return flashc__load(&h, dt, 0);
}

/* n values of dtype dt, N(0, spread^2) rounded to dt; *f receives the float copy. */
static void *typed_normal(flashc_dtype dt, int64_t n, float spread, float **f)
{
    void *t = malloc((size_t)(n > 0 ? n : 1) * flashc_dtype_size(dt));
    float *c = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    assert_non_null(t), assert_non_null(c);
    for (int64_t i = 0; i < n; i++) {
        c[i] = rnd(dt, (float)tu_normal() * spread);
        flashc__store(t, dt, i, c[i]);
    }
    *f = c;
    return t;
}

static void *typed_poison(flashc_dtype dt, int64_t n)
{
    void *t = malloc((size_t)(n > 0 ? n : 1) * flashc_dtype_size(dt));
    assert_non_null(t);
    for (int64_t i = 0; i < n; i++)
        flashc__store(t, dt, i, NAN);
    return t;
}

static void *dup(const void *x, size_t bytes)
{
    void *y = malloc(bytes ? bytes : 1);
    assert_non_null(y);
    memcpy(y, x, bytes);
    return y;
}

/* The contract's key range (flashc.h), written independently of internal.h. */
static void key_range(int64_t sq, int64_t sk, int64_t i, int causal, int64_t wl, int64_t wr,
                      int64_t *lo, int64_t *hi)
{
    const int64_t a = i + sk - sq;
    if (causal)
        wr = 0;
    int64_t l = wl >= 0 && a - wl > 0 ? a - wl : 0;
    int64_t h = wr >= 0 && a + wr + 1 < sk ? a + wr + 1 : sk;
    *lo = l;
    *hi = h > l ? h : l;
}

typedef struct mods {
    int causal;
    int64_t wl, wr;
    float softcap;
    int alibi; /* 0: none; 1: slopes (Hq); 2: slopes (B, Hq) */
    int has_scale;
    float scale;
} mods;

static void set_params(flashc_attn_params *pr, const mods *m, const flashc_tensor *slopes)
{
    *pr = flashc_attn_params_default();
    pr->causal = m->causal;
    pr->window_left = m->wl, pr->window_right = m->wr;
    pr->softcap = m->softcap;
    pr->alibi_slopes = m->alibi ? slopes : NULL;
    pr->has_softmax_scale = m->has_scale;
    pr->softmax_scale = m->scale;
}

/* ALiBi slopes: B x Hq values in [0.02, 0.5] (mode 1 uses the first Hq). */
static float *make_slopes(int64_t B, int64_t Hq, int mode, flashc_tensor *t)
{
    float *s = malloc((size_t)(B * Hq) * sizeof(float));
    assert_non_null(s);
    for (int64_t i = 0; i < B * Hq; i++)
        s[i] = (float)(0.02 + 0.48 * tu_uniform());
    *t = mode == 2 ? flashc_tensor_2d(s, FLASHC_F32, B, Hq) : flashc_tensor_1d(s, FLASHC_F32, Hq);
    return s;
}

/* The plain same-precision attention of one sequence and head, from the contract:
 * q (Sq rows, stride qs), k, v (Sk rows, strides ks, vs) as floats holding dt values;
 * o (Sq rows, stride os) written as floats holding dt values (0 for an empty row). */
static void naive_lp(flashc_dtype dt, const mods *m, float scale, float slope, int64_t sq,
                     int64_t sk, int64_t D, int64_t Dv, const float *q, int64_t qs,
                     const float *k, int64_t ks, const float *v, int64_t vs, float *o, int64_t os)
{
    float *s = malloc((size_t)(sk > 0 ? sk : 1) * sizeof(float));
    assert_non_null(s);
    for (int64_t i = 0; i < sq; i++) {
        int64_t lo, hi;
        key_range(sq, sk, i, m->causal, m->wl, m->wr, &lo, &hi);
        const int64_t a = i + sk - sq;
        float mx = -INFINITY, sum = 0.0f;
        for (int64_t j = lo; j < hi; j++) {
            float acc = 0.0f;
            for (int64_t d = 0; d < D; d++)
                acc += q[i * qs + d] * k[j * ks + d];
            float x = rnd(dt, rnd(dt, acc) * scale);
            if (m->softcap > 0.0f)
                x = rnd(dt, m->softcap * tanhf(x / m->softcap));
            if (m->alibi)
                x = rnd(dt, x - slope * (float)(a > j ? a - j : j - a));
            s[j] = x;
            mx = x > mx ? x : mx;
        }
        for (int64_t j = lo; j < hi; j++)
            sum += s[j] = expf(s[j] - mx);
        for (int64_t d = 0; d < Dv; d++) {
            float acc = 0.0f;
            for (int64_t j = lo; j < hi; j++)
                acc += rnd(dt, s[j] / sum) * v[j * vs + d];
            o[i * os + d] = hi > lo ? rnd(dt, acc) : 0.0f;
        }
    }
    free(s);
}

/* Tile pairs a pass with tiles br x bc computes when it visits, per Q block, only the aligned
 * K blocks that meet the union of its rows' ranges (what stats.tile_pairs must say). */
static int64_t expected_pairs(const mods *m, int64_t sq, int64_t sk, int64_t br, int64_t bc)
{
    int64_t pairs = 0;
    for (int64_t i0 = 0; i0 < sq; i0 += br) {
        const int64_t i1 = i0 + br < sq ? i0 + br : sq;
        int64_t lo = sk, hi = 0;
        for (int64_t i = i0; i < i1; i++) {
            int64_t l, h;
            key_range(sq, sk, i, m->causal, m->wl, m->wr, &l, &h);
            if (h > l) {
                lo = l < lo ? l : lo;
                hi = h > hi ? h : hi;
            }
        }
        if (hi > lo)
            pairs += (hi + bc - 1) / bc - lo / bc;
    }
    return pairs;
}

/* ---- dense: every modifier against the reference, every dtype ---------------------------- */

typedef struct dcase {
    const char *name;
    int64_t B, Sq, Sk, Hq, Hkv, D, Dv;
    mods m;
    int64_t br, bc;
} dcase;

#define NOWIN -1, -1
static const dcase DENSE[] = {
    {"plain 77x91 d40", 1, 77, 91, 2, 2, 40, 40, {0, NOWIN, 0, 0, 0, 0}, 0, 0},
    {"causal Dk192 Dv128", 1, 130, 150, 2, 1, 192, 128, {1, NOWIN, 0, 0, 0, 0}, 0, 0},
    {"window (16,0) GQA", 2, 200, 200, 4, 2, 64, 64, {0, 16, 0, 0, 0, 0, 0}, 0, 0},
    {"window (0,0)", 1, 50, 50, 1, 1, 16, 16, {0, 0, 0, 0, 0, 0, 0}, 0, 0},
    {"window (7,3) Sq<Sk", 1, 100, 173, 2, 2, 32, 32, {0, 7, 3, 0, 0, 0, 0}, 0, 0},
    {"window (3,11) Sq>Sk", 1, 150, 90, 2, 1, 24, 24, {0, 3, 11, 0, 0, 0, 0}, 32, 16},
    {"window (-1,5)", 1, 120, 120, 1, 1, 32, 48, {0, -1, 5, 0, 0, 0, 0}, 0, 0},
    {"window (20,-1) causal", 1, 300, 300, 2, 2, 64, 64, {1, 20, -1, 0, 0, 0, 0}, 0, 0},
    {"causal + wr 4 (reduced to 0)", 1, 90, 100, 2, 1, 32, 32, {1, -1, 4, 0, 0, 0, 0}, 0, 0},
    {"softcap 5", 1, 99, 120, 2, 1, 48, 48, {0, NOWIN, 5.0f, 0, 0, 0}, 0, 0},
    {"softcap 0.5 causal", 1, 64, 64, 2, 2, 16, 16, {1, NOWIN, 0.5f, 0, 0, 0}, 16, 8},
    {"alibi (Hq) causal GQA", 2, 80, 110, 4, 2, 32, 32, {1, NOWIN, 0, 1, 0, 0}, 0, 0},
    {"alibi (B,Hq) window softcap", 2, 120, 120, 2, 2, 64, 64, {0, 30, 10, 20.0f, 2, 0, 0}, 0, 0},
    {"all: causal win softcap alibi 72/40", 2, 301, 333, 6, 2, 72, 40, {1, 50, -1, 10.0f, 2, 0, 0}, 0, 0},
    {"d3/dv5 tiny tiles window alibi", 2, 19, 23, 3, 1, 3, 5, {0, 2, 1, 0, 1, 0, 0}, 1, 1},
    {"decode Sq1 window softcap alibi", 3, 1, 300, 8, 2, 64, 64, {1, 100, -1, 30.0f, 1, 0, 0}, 0, 0},
    {"decode Sq5 576/512 causal", 1, 5, 129, 4, 1, 576, 512, {1, NOWIN, 0, 0, 0, 0}, 0, 0},
    {"decode Sq7 window (2,1) alibi", 2, 7, 40, 4, 1, 16, 8, {0, 2, 1, 0, 2, 0, 0}, 0, 16},
    {"prefill 576/512 causal", 1, 40, 70, 2, 1, 576, 512, {1, NOWIN, 0, 0, 0, 0}, 0, 0},
    {"Sq>Sk causal softcap", 1, 30, 10, 2, 1, 16, 16, {1, NOWIN, 3.0f, 0, 0, 0}, 0, 0},
    {"scale 0 causal", 1, 40, 50, 2, 1, 16, 16, {1, NOWIN, 0, 0, 1, 0.0f}, 0, 0},
    {"scale -0.3 window", 1, 60, 60, 2, 2, 16, 24, {0, 9, 4, 0, 0, 1, -0.3f}, 0, 0},
    {"br 64 bc 16 window (40,40)", 1, 257, 263, 2, 1, 32, 32, {0, 40, 40, 0, 0, 0, 0}, 64, 16},
};

static void run_dense(const dcase *c, flashc_dtype dt)
{
    const int64_t B = c->B, Sq = c->Sq, Sk = c->Sk, Hq = c->Hq, Hkv = c->Hkv, D = c->D,
                  Dv = c->Dv;
    const int64_t nq = B * Sq * Hq * D, nk = B * Sk * Hkv * D, nv = B * Sk * Hkv * Dv,
                  no = B * Sq * Hq * Dv, nl = B * Hq * Sq;
    float *qf, *kf, *vf;
    void *q = typed_normal(dt, nq, 1.0f, &qf), *k = typed_normal(dt, nk, 1.0f, &kf),
         *v = typed_normal(dt, nv, 1.0f, &vf);
    void *o = typed_poison(dt, no);
    float *lse = tu_poisoned(nl), *oref = tu_poisoned(no), *lref = tu_poisoned(nl);
    float *onv = tu_poisoned(no);
    flashc_tensor ts;
    float *slopes = make_slopes(B, Hq, c->m.alibi ? c->m.alibi : 1, &ts);
    flashc_attn_params pr;
    set_params(&pr, &c->m, &ts);
    pr.block_q = c->br, pr.block_k = c->bc;

    flashc_tensor tq = flashc_tensor_4d(q, dt, B, Sq, Hq, D), tk = flashc_tensor_4d(k, dt, B, Sk, Hkv, D);
    flashc_tensor tv = flashc_tensor_4d(v, dt, B, Sk, Hkv, Dv), to = flashc_tensor_4d(o, dt, B, Sq, Hq, Dv);
    flashc_tensor tl = flashc_tensor_3d(lse, FLASHC_F32, B, Hq, Sq);
    flashc_tensor fq = flashc_tensor_4d(qf, FLASHC_F32, B, Sq, Hq, D),
                  fk = flashc_tensor_4d(kf, FLASHC_F32, B, Sk, Hkv, D);
    flashc_tensor fv = flashc_tensor_4d(vf, FLASHC_F32, B, Sk, Hkv, Dv),
                  fo = flashc_tensor_4d(oref, FLASHC_F32, B, Sq, Hq, Dv);
    flashc_tensor fl = flashc_tensor_3d(lref, FLASHC_F32, B, Hq, Sq);
    flashc_attn_stats st = FLASHC_ATTN_STATS_INIT;
    TU_OK(flashc_attn_fwd(&pr, &tq, &tk, &tv, &to, &tl, &st));
    TU_OK(flashc_attn_fwd_naive(&pr, &fq, &fk, &fv, &fo, &fl, NULL));

    const float scale = c->m.has_scale ? c->m.scale : 1.0f / sqrtf((float)D);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++) {
            const int64_t hk = h / (Hq / Hkv);
            const float slope = c->m.alibi == 2 ? slopes[b * Hq + h] : slopes[h];
            naive_lp(dt, &c->m, scale, slope, Sq, Sk, D, Dv, qf + (b * Sq * Hq + h) * D, Hq * D,
                     kf + (b * Sk * Hkv + hk) * D, Hkv * D, vf + (b * Sk * Hkv + hk) * Dv,
                     Hkv * Dv, onv + (b * Sq * Hq + h) * Dv, Hq * Dv);
        }
    double ef = 0.0, en = 0.0;
    for (int64_t i = 0; i < no; i++) {
        const double e = fabs((double)flashc__load(o, dt, i) - oref[i]);
        ef = e <= ef ? ef : e; /* NaN sticks */
        en = fmax(en, fabs((double)onv[i] - oref[i]));
    }
    double el = 0.0;
    for (int64_t i = 0; i < nl; i++) {
        if (isinf(lref[i])) {
            assert_true(isinf(lse[i]) && lse[i] < 0);
            continue;
        }
        const double e = fabs((double)lse[i] - lref[i]) / (1.0 + fabs((double)lref[i]));
        el = e <= el ? el : e;
    }
    /* the stats: tiles outside every row's range skipped, and counted */
    const int64_t br = st.block_q < Sq ? st.block_q : Sq, bc = st.block_k < Sk ? st.block_k : Sk;
    const int64_t want = expected_pairs(&c->m, Sq, Sk, br, bc) * B * Hq;
    print_message("  %-36s %-8s |O-ref| %.2e naive %.2e lse %.1e pairs %lld/%lld splits %lld\n",
                  c->name, flashc__dtype_name(dt), ef, en, el, (long long)st.tile_pairs,
                  (long long)st.tile_pairs_total, (long long)st.num_splits);
    /* the slack: 2^-21, or float32's floor (common.h), where ALiBi's bias reaches max slope x
     * the longest distance */
    double slack = 0x1p-21;
    if (dt == FLASHC_F32) {
        const double smax = c->m.alibi ? tu_max_abs(slopes, B * Hq) : 0.0;
        slack = tu_f32_logit_floor(scale, tu_max_row_norm(qf, nq / D, D),
                                   tu_max_row_norm(kf, nk / D, D),
                                   smax * (double)(Sq > Sk ? Sq : Sk), tu_max_abs(vf, nv));
    }
    assert_true(ef <= 2.0 * en + slack);
    assert_true(el <= 2e-5);
    assert_int_equal(st.tile_pairs, want);
    assert_int_equal(st.tile_pairs_total, B * Hq * ((Sq + br - 1) / br) * ((Sk + bc - 1) / bc));
    free(q), free(k), free(v), free(o), free(qf), free(kf), free(vf), free(lse), free(oref);
    free(lref), free(onv), free(slopes);
}

static void test_dense_modifiers(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof DENSE / sizeof DENSE[0]; i++)
        for (int t = 0; t < 3; t++)
            run_dense(&DENSE[i], DTYPES[t]);
}

/* ---- dense problem holder for the property tests (float32 unless given) ----------------- */

typedef struct prob {
    int64_t B, Sq, Sk, Hq, Hkv, D, Dv;
    flashc_dtype dt;
    void *q, *k, *v, *o;
    float *lse, *slopes;
    flashc_tensor tq, tk, tv, to, tl, ts;
} prob;

static void prob_init(prob *p, flashc_dtype dt, int64_t B, int64_t Sq, int64_t Sk, int64_t Hq,
                      int64_t Hkv, int64_t D, int64_t Dv, float qspread)
{
    memset(p, 0, sizeof *p);
    p->B = B, p->Sq = Sq, p->Sk = Sk, p->Hq = Hq, p->Hkv = Hkv, p->D = D, p->Dv = Dv, p->dt = dt;
    float *f;
    p->q = typed_normal(dt, B * Sq * Hq * D, qspread, &f), free(f);
    p->k = typed_normal(dt, B * Sk * Hkv * D, 1.0f, &f), free(f);
    p->v = typed_normal(dt, B * Sk * Hkv * Dv, 1.0f, &f), free(f);
    p->o = typed_poison(dt, B * Sq * Hq * Dv);
    p->lse = tu_poisoned(B * Hq * Sq);
    p->slopes = make_slopes(B, Hq, 2, &p->ts);
    p->tq = flashc_tensor_4d(p->q, dt, B, Sq, Hq, D);
    p->tk = flashc_tensor_4d(p->k, dt, B, Sk, Hkv, D);
    p->tv = flashc_tensor_4d(p->v, dt, B, Sk, Hkv, Dv);
    p->to = flashc_tensor_4d(p->o, dt, B, Sq, Hq, Dv);
    p->tl = flashc_tensor_3d(p->lse, FLASHC_F32, B, Hq, Sq);
}

static void prob_free(prob *p)
{
    free(p->q), free(p->k), free(p->v), free(p->o), free(p->lse), free(p->slopes);
}

static size_t osize(const prob *p)
{
    return (size_t)(p->B * p->Sq * p->Hq * p->Dv) * flashc_dtype_size(p->dt);
}

/* ---- properties ---------------------------------------------------------------------------- */

/* For a few rows of each case: K and V of every key outside the row's range set to 1e4, then
 * to NaN (in K and in V); the row's output and LSE keep their bits. */
static void test_poison_outside_range(void **state)
{
    (void)state;
    static const struct { int64_t B, Sq, Sk, Hq, Hkv, D, Dv; mods m; } C[] = {
        {1, 120, 150, 2, 1, 32, 24, {1, 20, -1, 0, 0, 0, 0}},
        {2, 64, 64, 2, 2, 16, 16, {0, 5, 9, 4.0f, 2, 0, 0}},
        {1, 40, 25, 2, 1, 8, 8, {1, NOWIN, 0, 1, 0, 0}},   /* Sq > Sk: empty rows */
        {2, 3, 200, 4, 2, 16, 16, {1, 60, -1, 0, 1, 0, 0}},   /* decode */
        {1, 300, 300, 1, 1, 64, 64, {1, NOWIN, 0, 0, 0, 0}},
    };
    for (size_t c = 0; c < sizeof C / sizeof C[0]; c++)
        for (int t = 0; t < 3; t++) {
            prob p;
            prob_init(&p, DTYPES[t], C[c].B, C[c].Sq, C[c].Sk, C[c].Hq, C[c].Hkv, C[c].D,
                      C[c].Dv, 1.0f);
            flashc_attn_params pr;
            set_params(&pr, &C[c].m, &p.ts);
            TU_OK(flashc_attn_fwd(&pr, &p.tq, &p.tk, &p.tv, &p.to, &p.tl, NULL));
            void *o0 = dup(p.o, osize(&p));
            float *l0 = dup(p.lse, (size_t)(p.B * p.Hq * p.Sq) * sizeof(float));
            void *k0 = dup(p.k, (size_t)(p.B * p.Sk * p.Hkv * p.D) * flashc_dtype_size(p.dt));
            void *v0 = dup(p.v, (size_t)(p.B * p.Sk * p.Hkv * p.Dv) * flashc_dtype_size(p.dt));
            for (int rep = 0; rep < 3; rep++) {
                const int64_t i = (int64_t)(tu_uniform() * (double)p.Sq), b = p.B - 1;
                int64_t lo, hi;
                key_range(p.Sq, p.Sk, i, C[c].m.causal, C[c].m.wl, C[c].m.wr, &lo, &hi);
                for (int poison = 0; poison < 3; poison++) {
                    const float val = poison == 0 ? 1e4f : NAN;
                    for (int64_t j = 0; j < p.Sk; j++) {
                        if (j >= lo && j < hi)
                            continue;
                        for (int64_t h = 0; h < p.Hkv; h++) {
                            for (int64_t d = 0; poison != 2 && d < p.D; d++)
                                flashc__store(p.k, p.dt, ((b * p.Sk + j) * p.Hkv + h) * p.D + d, val);
                            for (int64_t d = 0; poison != 1 && d < p.Dv; d++)
                                flashc__store(p.v, p.dt, ((b * p.Sk + j) * p.Hkv + h) * p.Dv + d, val);
                        }
                    }
                    TU_OK(flashc_attn_fwd(&pr, &p.tq, &p.tk, &p.tv, &p.to, &p.tl, NULL));
                    const size_t es = flashc_dtype_size(p.dt);
                    for (int64_t h = 0; h < p.Hq; h++) {
                        const int64_t x = ((b * p.Sq + i) * p.Hq + h) * p.Dv;
                        assert_memory_equal((char *)p.o + x * es, (char *)o0 + x * es,
                                            (size_t)p.Dv * es);
                        const int64_t y = (b * p.Hq + h) * p.Sq + i;
                        assert_memory_equal(&p.lse[y], &l0[y], sizeof(float));
                    }
                    memcpy(p.k, k0, (size_t)(p.B * p.Sk * p.Hkv * p.D) * es);
                    memcpy(p.v, v0, (size_t)(p.B * p.Sk * p.Hkv * p.Dv) * es);
                }
            }
            free(o0), free(l0), free(k0), free(v0);
            prob_free(&p);
        }
}

/* Permuting the keys (K and V rows together; no mask, no ALiBi: the softmax is a set function)
 * leaves O equal up to fp32 rounding of the sums. */
static void test_permute_keys(void **state)
{
    (void)state;
    static const struct { int64_t Sq, Sk, D, Dv; float softcap; } C[] = {
        {50, 173, 32, 16, 0}, {5, 300, 64, 64, 0}, {97, 97, 24, 40, 7.0f}};
    for (size_t c = 0; c < sizeof C / sizeof C[0]; c++) {
        prob p;
        prob_init(&p, FLASHC_F32, 1, C[c].Sq, C[c].Sk, 2, 1, C[c].D, C[c].Dv, 1.0f);
        flashc_attn_params pr = flashc_attn_params_default();
        pr.softcap = C[c].softcap;
        TU_OK(flashc_attn_fwd(&pr, &p.tq, &p.tk, &p.tv, &p.to, &p.tl, NULL));
        float *o0 = dup(p.o, osize(&p));
        float *k = p.k, *v = p.v;
        for (int64_t j = p.Sk - 1; j > 0; j--) { /* Fisher-Yates */
            const int64_t r = (int64_t)(tu_uniform() * (double)(j + 1));
            for (int64_t d = 0; d < p.D; d++) {
                const float t = k[j * p.D + d];
                k[j * p.D + d] = k[r * p.D + d], k[r * p.D + d] = t;
            }
            for (int64_t d = 0; d < p.Dv; d++) {
                const float t = v[j * p.Dv + d];
                v[j * p.Dv + d] = v[r * p.Dv + d], v[r * p.Dv + d] = t;
            }
        }
        TU_OK(flashc_attn_fwd(&pr, &p.tq, &p.tk, &p.tv, &p.to, &p.tl, NULL));
        const double e = tu_max_abs_diff(p.o, o0, p.Sq * p.Hq * p.Dv);
        print_message("  permuted keys Sq %lld Sk %lld: max |dO| %.2e\n", (long long)p.Sq,
                      (long long)p.Sk, e);
        assert_true(e <= 2e-6);
        free(o0);
        prob_free(&p);
    }
}

/* Split-KV: num_splits = 2, 3, 7 against one pass (rounding), on the prefill and decode paths;
 * num_splits = 0 on 1, 2, 3 threads: the same bits, and stats.num_splits > 1 for a decode of
 * one sequence against a long cache (the threads are kept busy). */
static void test_split_kv(void **state)
{
    (void)state;
    static const struct { int64_t B, Sq, Sk, Hq, Hkv, D; mods m; } C[] = {
        {1, 1, 3000, 8, 2, 64, {0, NOWIN, 0, 0, 0, 0}},
        {1, 4, 2100, 4, 1, 32, {1, 700, -1, 5.0f, 1, 0, 0}},
        {2, 100, 700, 2, 1, 32, {1, NOWIN, 0, 0, 0, 0}},
        {1, 50, 400, 2, 2, 16, {0, 30, 30, 0, 2, 0, 0}},
    };
    for (size_t c = 0; c < sizeof C / sizeof C[0]; c++)
        for (int t = 0; t < 3; t++) {
            prob p;
            prob_init(&p, DTYPES[t], C[c].B, C[c].Sq, C[c].Sk, C[c].Hq, C[c].Hkv, C[c].D,
                      C[c].D, 1.0f);
            const int64_t no = p.B * p.Sq * p.Hq * p.Dv, nl = p.B * p.Hq * p.Sq;
            flashc_attn_params pr;
            set_params(&pr, &C[c].m, &p.ts);
            pr.num_splits = 1;
            flashc_attn_stats st = FLASHC_ATTN_STATS_INIT;
            TU_OK(flashc_attn_fwd(&pr, &p.tq, &p.tk, &p.tv, &p.to, &p.tl, &st));
            assert_int_equal(st.num_splits, 1);
            void *o1 = dup(p.o, osize(&p));
            float *l1 = dup(p.lse, (size_t)nl * sizeof(float));
            const int splits[3] = {2, 3, 7};
            for (int s = 0; s < 3; s++) {
                pr.num_splits = splits[s];
                TU_OK(flashc_attn_fwd(&pr, &p.tq, &p.tk, &p.tv, &p.to, &p.tl, &st));
                assert_true(st.num_splits > 1 && st.num_splits <= splits[s]);
                double e = 0.0, el = 0.0;
                for (int64_t i = 0; i < no; i++)
                    e = fmax(e, fabs((double)flashc__load(p.o, p.dt, i) - flashc__load(o1, p.dt, i)));
                for (int64_t i = 0; i < nl; i++)
                    el = fmax(el, fabs((double)p.lse[i] - l1[i]));
                /* one rounding of the stored O (bf16: 2^-8 relative) plus float32 sums */
                const double tol = p.dt == FLASHC_F32 ? 2e-6 : p.dt == FLASHC_BF16 ? 2e-2 : 3e-3;
                assert_false(tu_has_nan(p.lse, nl));
                assert_true(e <= tol);
                assert_true(el <= 2e-5);
            }
            pr.num_splits = 0;
            void *ot = NULL;
            for (int threads = 1; threads <= 3; threads++) {
                pr.num_threads = threads;
                TU_OK(flashc_attn_fwd(&pr, &p.tq, &p.tk, &p.tv, &p.to, &p.tl, &st));
                if (p.Sq < 8 && p.B * p.Hkv < 8 && p.Sk >= 2048)
                    assert_true(st.num_splits > 1);
                if (!ot)
                    ot = dup(p.o, osize(&p));
                else
                    assert_memory_equal(p.o, ot, osize(&p));
            }
            free(o1), free(l1), free(ot);
            prob_free(&p);
        }
}

/* ---- issue 10 findings (forward) --------------------------------------------------------- */

/* F4: NaN or Inf in V at one key reaches exactly the rows that see it; rows that see no key
 * (Sq > Sk) stay 0; on the prefill (Sq 16, 300) and decode paths, every dtype. */
static void test_f4_nonfinite_v(void **state)
{
    (void)state;
    static const struct { int64_t Sq, Sk, key; int causal; } C[] = {
        {16, 16, 9, 1}, {300, 300, 150, 1}, {20, 8, 7, 1}, {5, 30, 27, 1}, {64, 64, 3, 0}};
    for (size_t c = 0; c < sizeof C / sizeof C[0]; c++)
        for (int t = 0; t < 3; t++)
            for (int inf = 0; inf < 2; inf++) {
                prob p;
                prob_init(&p, DTYPES[t], 1, C[c].Sq, C[c].Sk, 2, 1, 8, 8, 1.0f);
                /* causal, or (non-causal) a window (2, 2) around the row */
                mods m = {C[c].causal, C[c].causal ? -1 : 2, C[c].causal ? -1 : 2, 0, 0, 0, 0};
                flashc_attn_params pr;
                set_params(&pr, &m, &p.ts);
                TU_OK(flashc_attn_fwd(&pr, &p.tq, &p.tk, &p.tv, &p.to, &p.tl, NULL));
                void *o0 = dup(p.o, osize(&p));
                for (int64_t d = 0; d < p.Dv; d++)
                    flashc__store(p.v, p.dt, C[c].key * p.Dv + d, inf ? INFINITY : NAN);
                TU_OK(flashc_attn_fwd(&pr, &p.tq, &p.tk, &p.tv, &p.to, &p.tl, NULL));
                int64_t bad = 0, want = 0;
                for (int64_t i = 0; i < p.Sq; i++) {
                    int64_t lo, hi;
                    key_range(p.Sq, p.Sk, i, m.causal, m.wl, m.wr, &lo, &hi);
                    const int sees = C[c].key >= lo && C[c].key < hi;
                    want += sees * p.Hq;
                    for (int64_t h = 0; h < p.Hq; h++) {
                        const int64_t x = (i * p.Hq + h) * p.Dv;
                        int nonfinite = 0;
                        for (int64_t d = 0; d < p.Dv; d++)
                            nonfinite |= !isfinite(flashc__load(p.o, p.dt, x + d));
                        bad += nonfinite;
                        if (!sees) {
                            const size_t es = flashc_dtype_size(p.dt);
                            assert_memory_equal((char *)p.o + x * es, (char *)o0 + x * es,
                                                (size_t)p.Dv * es);
                        }
                        if (hi <= lo)
                            for (int64_t d = 0; d < p.Dv; d++)
                                assert_true(flashc__load(p.o, p.dt, x + d) == 0.0f);
                    }
                }
                assert_int_equal(bad, want);
                free(o0);
                prob_free(&p);
            }
}

/* F5: scores of magnitude 1e10 .. 1e12 stay finite and match the reference (the softmax is
 * one-hot there: O is the value row of the top key). */
static void test_f5_large_scores(void **state)
{
    (void)state;
    const double mags[3] = {2e9, 1e10, 1e12};
    for (int g = 0; g < 3; g++)
        for (int causal = 0; causal < 2; causal++)
            for (int64_t Sq = 1; Sq <= 16; Sq += 15) {
                prob p;
                const int64_t D = 8;
                /* q ~ mag N(0, 1), k ~ N(0, 1): the scores q . k / sqrt(D) ~ mag N(0, 1) */
                prob_init(&p, FLASHC_F32, 1, Sq, 16, 1, 1, D, D, (float)mags[g]);
                float *oref = tu_poisoned(Sq * D), *lref = tu_poisoned(Sq);
                flashc_tensor to = flashc_tensor_4d(oref, FLASHC_F32, 1, Sq, 1, D);
                flashc_tensor tl = flashc_tensor_3d(lref, FLASHC_F32, 1, 1, Sq);
                flashc_attn_params pr = flashc_attn_params_default();
                pr.causal = causal;
                TU_OK(flashc_attn_fwd(&pr, &p.tq, &p.tk, &p.tv, &p.to, &p.tl, NULL));
                TU_OK(flashc_attn_fwd_naive(&pr, &p.tq, &p.tk, &p.tv, &to, &tl, NULL));
                float *o = p.o;
                double e = 0.0, el = 0.0;
                for (int64_t i = 0; i < Sq * D; i++) {
                    assert_true(isfinite(o[i]));
                    e = fmax(e, fabs((double)o[i] - oref[i]));
                }
                for (int64_t i = 0; i < Sq; i++) {
                    assert_true(isfinite(p.lse[i]));
                    /* relative to the size of the products: a float32 dot product of
                     * terms ~mag may cancel, the reference's does not */
                    el = fmax(el, fabs((double)p.lse[i] - lref[i]) / mags[g]);
                }
                print_message("  F5 |score| ~ %.0e causal %d Sq %lld: |dO| %.2e, |dLSE| / mag %.2e\n",
                              mags[g], causal, (long long)Sq, e, el);
                assert_true(e <= 1e-5);
                assert_true(el <= 4e-6);
                free(oref), free(lref);
                prob_free(&p);
            }
}

/* F6: the decode path with GQA gives the same bits for any thread count (B 3, Sq 7, Hq 2,
 * Hkv 1, D 3, Sk 21 differed in 78 of 126 outputs between 1 and 2 threads). */
static void test_f6_decode_threads(void **state)
{
    (void)state;
    static const struct { int64_t B, Sq, Sk, Hq, Hkv, D; } C[] = {
        {3, 7, 21, 2, 1, 3}, {1, 1, 5000, 8, 2, 64}, {2, 4, 1500, 6, 3, 32}, {5, 2, 77, 4, 4, 16}};
    for (size_t c = 0; c < sizeof C / sizeof C[0]; c++)
        for (int t = 0; t < 3; t++)
            for (int causal = 0; causal < 2; causal++) {
                prob p;
                prob_init(&p, DTYPES[t], C[c].B, C[c].Sq, C[c].Sk, C[c].Hq, C[c].Hkv, C[c].D,
                          C[c].D, 1.0f);
                flashc_attn_params pr = flashc_attn_params_default();
                pr.causal = causal;
                void *o1 = NULL;
                float *l1 = NULL;
                for (int threads = 1; threads <= 4; threads++) {
                    pr.num_threads = threads;
                    TU_OK(flashc_attn_fwd(&pr, &p.tq, &p.tk, &p.tv, &p.to, &p.tl, NULL));
                    if (!o1) {
                        o1 = dup(p.o, osize(&p));
                        l1 = dup(p.lse, (size_t)(p.B * p.Hq * p.Sq) * sizeof(float));
                        continue;
                    }
                    assert_memory_equal(p.o, o1, osize(&p));
                    assert_memory_equal(p.lse, l1, (size_t)(p.B * p.Hq * p.Sq) * sizeof(float));
                }
                free(o1), free(l1);
                prob_free(&p);
            }
}

/* The reference's NaN rule: a NaN among a row's visible scores (a NaN in K) or values makes
 * the row NaN (O and LSE); other rows keep their bits. A NaN q row makes its row NaN. */
static void test_nan_propagation(void **state)
{
    (void)state;
    for (int t = 0; t < 3; t++)
        for (int64_t Sq = 3; Sq <= 40; Sq += 37) {
            prob p;
            prob_init(&p, DTYPES[t], 1, Sq, 40, 2, 1, 16, 16, 1.0f);
            mods m = {1, 10, -1, 0, 0, 0, 0};
            flashc_attn_params pr;
            set_params(&pr, &m, &p.ts);
            TU_OK(flashc_attn_fwd(&pr, &p.tq, &p.tk, &p.tv, &p.to, &p.tl, NULL));
            void *o0 = dup(p.o, osize(&p));
            const int64_t key = 35;
            flashc__store(p.k, p.dt, key * p.D + 3, NAN); /* one element of one key */
            flashc__store(p.q, p.dt, (0 * p.Hq + 1) * p.D + 5, NAN); /* row 0, head 1 */
            TU_OK(flashc_attn_fwd(&pr, &p.tq, &p.tk, &p.tv, &p.to, &p.tl, NULL));
            for (int64_t i = 0; i < Sq; i++) {
                int64_t lo, hi;
                key_range(Sq, 40, i, 1, 10, -1, &lo, &hi);
                for (int64_t h = 0; h < p.Hq; h++) {
                    const int nan_row = (key >= lo && key < hi) || (i == 0 && h == 1);
                    const int64_t x = (i * p.Hq + h) * p.Dv;
                    for (int64_t d = 0; d < p.Dv; d++)
                        assert_int_equal(isnan(flashc__load(p.o, p.dt, x + d)) != 0, nan_row);
                    assert_int_equal(isnan(p.lse[h * Sq + i]) != 0, nan_row);
                    if (!nan_row) {
                        const size_t es = flashc_dtype_size(p.dt);
                        assert_memory_equal((char *)p.o + x * es, (char *)o0 + x * es,
                                            (size_t)p.Dv * es);
                    }
                }
            }
            free(o0);
            prob_free(&p);
        }
}

/* ---- workspace ---------------------------------------------------------------------------- */

/* With the caller's workspace (of the queried size, misaligned on purpose) the call allocates
 * nothing; the results equal the call without one; a workspace one byte short is refused. */
static void test_workspace(void **state)
{
    (void)state;
    static const struct { int64_t B, Sq, Sk; int splits; } C[] = {
        {2, 100, 130, 0}, {1, 1, 4000, 0}, {1, 20, 300, 3}};
    for (size_t c = 0; c < sizeof C / sizeof C[0]; c++) {
        prob p;
        prob_init(&p, FLASHC_BF16, C[c].B, C[c].Sq, C[c].Sk, 4, 2, 32, 24, 1.0f);
        mods m = {1, 50, -1, 8.0f, 1, 0, 0};
        flashc_attn_params pr;
        set_params(&pr, &m, &p.ts);
        pr.num_splits = C[c].splits;
        TU_OK(flashc_attn_fwd(&pr, &p.tq, &p.tk, &p.tv, &p.to, &p.tl, NULL));
        void *o0 = dup(p.o, osize(&p));
        size_t bytes = 0;
        TU_OK(flashc_attn_fwd_workspace_size(&pr, &p.tq, &p.tk, &p.tv, &p.to, &p.tl, &bytes));
        assert_true(bytes > 0);
        char *ws = malloc(bytes + 1);
        assert_non_null(ws);
        pr.workspace = ws + 1, pr.workspace_bytes = bytes;
        memset(p.o, 0, osize(&p));
        flashc_mem_reset_peak();
        const flashc_mem_stats before = flashc_mem_get();
        flashc_attn_stats st = FLASHC_ATTN_STATS_INIT;
        TU_OK(flashc_attn_fwd(&pr, &p.tq, &p.tk, &p.tv, &p.to, &p.tl, &st));
        const flashc_mem_stats after = flashc_mem_get();
        assert_int_equal(after.alloc_count, 0);
        assert_int_equal(after.peak_bytes, before.current_bytes);
        assert_int_equal(st.workspace_bytes, (int64_t)bytes);
        assert_memory_equal(p.o, o0, osize(&p));
        pr.workspace_bytes = bytes - 1;
        assert_int_equal(flashc_attn_fwd(&pr, &p.tq, &p.tk, &p.tv, &p.to, &p.tl, NULL),
                         FLASHC_ERR_INVALID_ARGUMENT);
        free(ws), free(o0);
        prob_free(&p);
    }
}

/* ---- varlen ------------------------------------------------------------------------------- */

typedef struct packed {
    int64_t B, Tq, Tk, Hq, Hkv, D, Dv;
    int32_t *cuq, *cuk;
    flashc_dtype dt;
    void *q, *k, *v, *o;
    float *lse, *slopes;
    flashc_tensor tq, tk, tv, to, tl, tcq, tck, ts;
    flashc_varlen vl;
} packed;

/* B sequences with the given lengths; extra rows of q / k past the sequences (belonging to
 * none) when pad > 0. */
static void packed_init(packed *p, flashc_dtype dt, int64_t B, const int64_t *sq,
                        const int64_t *sk, int64_t Hq, int64_t Hkv, int64_t D, int64_t Dv,
                        int64_t pad)
{
    memset(p, 0, sizeof *p);
    p->B = B, p->Hq = Hq, p->Hkv = Hkv, p->D = D, p->Dv = Dv, p->dt = dt;
    p->cuq = malloc((size_t)(B + 1) * sizeof(int32_t));
    p->cuk = malloc((size_t)(B + 1) * sizeof(int32_t));
    p->cuq[0] = p->cuk[0] = 0;
    int64_t mq = 0, mk = 0;
    for (int64_t b = 0; b < B; b++) {
        p->cuq[b + 1] = p->cuq[b] + (int32_t)sq[b];
        p->cuk[b + 1] = p->cuk[b] + (int32_t)sk[b];
        mq = sq[b] > mq ? sq[b] : mq;
        mk = sk[b] > mk ? sk[b] : mk;
    }
    p->Tq = p->cuq[B] + pad, p->Tk = p->cuk[B] + pad;
    if (p->Tq == 0)
        p->Tq = 1;
    if (p->Tk == 0)
        p->Tk = 1;
    float *f;
    p->q = typed_normal(dt, p->Tq * Hq * D, 1.0f, &f), free(f);
    p->k = typed_normal(dt, p->Tk * Hkv * D, 1.0f, &f), free(f);
    p->v = typed_normal(dt, p->Tk * Hkv * Dv, 1.0f, &f), free(f);
    p->o = typed_poison(dt, p->Tq * Hq * Dv);
    p->lse = tu_poisoned(Hq * p->Tq);
    p->slopes = make_slopes(B, Hq, 2, &p->ts);
    p->tq = flashc_tensor_3d(p->q, dt, p->Tq, Hq, D);
    p->tk = flashc_tensor_3d(p->k, dt, p->Tk, Hkv, D);
    p->tv = flashc_tensor_3d(p->v, dt, p->Tk, Hkv, Dv);
    p->to = flashc_tensor_3d(p->o, dt, p->Tq, Hq, Dv);
    p->tl = flashc_tensor_2d(p->lse, FLASHC_F32, Hq, p->Tq);
    p->tcq = flashc_tensor_1d(p->cuq, FLASHC_I32, B + 1);
    p->tck = flashc_tensor_1d(p->cuk, FLASHC_I32, B + 1);
    p->vl = (flashc_varlen){sizeof(flashc_varlen), &p->tcq, &p->tck, mq, mk, NULL};
}

static void packed_free(packed *p)
{
    free(p->cuq), free(p->cuk), free(p->q), free(p->k), free(p->v), free(p->o), free(p->lse);
    free(p->slopes);
}

/* Varlen against the reference (through the same entry point), with mixed and zero lengths,
 * rows past the sequences (zeros, LSE -inf), every modifier; then each sequence alone through
 * the dense entry point (explicit tiles, one split) gives the same bits. */
static void test_varlen(void **state)
{
    (void)state;
    static const int64_t sq1[5] = {37, 0, 120, 9, 64}, sk1[5] = {50, 13, 120, 0, 200};
    static const int64_t sq2[4] = {3, 1, 0, 7}, sk2[4] = {90, 300, 5, 7}; /* decode path */
    static const int64_t sq3[3] = {0, 0, 0}, sk3[3] = {0, 4, 0};          /* nothing to do */
    static const struct { int64_t B; const int64_t *sq, *sk; mods m; int64_t D, Dv; } C[] = {
        {5, sq1, sk1, {1, NOWIN, 0, 0, 0, 0}, 32, 32},
        {5, sq1, sk1, {0, 20, 5, 6.0f, 2, 0, 0}, 40, 24},
        {5, sq1, sk1, {1, 30, -1, 0, 1, 0, 0}, 16, 16},
        {4, sq2, sk2, {1, NOWIN, 4.0f, 2, 0, 0}, 64, 32},
        {4, sq2, sk2, {0, 10, 2, 0, 0, 0, 0}, 16, 16},
        {3, sq3, sk3, {1, NOWIN, 0, 0, 0, 0}, 8, 8},
    };
    for (size_t c = 0; c < sizeof C / sizeof C[0]; c++)
        for (int t = 0; t < 3; t++) {
            packed p;
            packed_init(&p, DTYPES[t], C[c].B, C[c].sq, C[c].sk, 4, 2, C[c].D, C[c].Dv, 5);
            flashc_attn_params pr;
            set_params(&pr, &C[c].m, &p.ts);
            const int64_t no = p.Tq * p.Hq * p.Dv, nl = p.Hq * p.Tq;
            const size_t es = flashc_dtype_size(p.dt);
            attn_force_backend("ref");
            TU_OK(flashc_attn_varlen_fwd(&pr, &p.vl, &p.tq, &p.tk, &p.tv, &p.to, &p.tl, NULL));
            attn_force_backend(NULL);
            void *oref = dup(p.o, (size_t)no * es);
            float *lref = dup(p.lse, (size_t)nl * sizeof(float));
            memset(p.o, 0xff, (size_t)no * es);
            flashc_attn_stats st = FLASHC_ATTN_STATS_INIT;
            TU_OK(flashc_attn_varlen_fwd(&pr, &p.vl, &p.tq, &p.tk, &p.tv, &p.to, &p.tl, &st));
            double e = 0.0, el = 0.0;
            for (int64_t i = 0; i < no; i++) {
                const double d = fabs((double)flashc__load(p.o, p.dt, i) - flashc__load(oref, p.dt, i));
                e = d <= e ? e : d;
            }
            for (int64_t i = 0; i < nl; i++) {
                if (isinf(lref[i])) {
                    assert_true(isinf(p.lse[i]) && p.lse[i] < 0);
                    continue;
                }
                const double d = fabs((double)p.lse[i] - lref[i]) / (1.0 + fabs((double)lref[i]));
                el = d <= el ? el : d;
            }
            /* both outputs are rounded to the storage type once: up to one ulp apart */
            const double tol = p.dt == FLASHC_F32 ? 1e-5 : p.dt == FLASHC_BF16 ? 3e-2 : 4e-3;
            print_message("  varlen case %zu %-8s |O-ref| %.2e lse %.1e pairs %lld/%lld\n", c,
                          flashc__dtype_name(p.dt), e, el, (long long)st.tile_pairs,
                          (long long)st.tile_pairs_total);
            assert_true(e <= tol);
            assert_true(el <= 2e-5);
            for (int64_t r = p.cuq[p.B]; r < p.Tq; r++) /* rows of no sequence */
                for (int64_t h = 0; h < p.Hq; h++) {
                    for (int64_t d = 0; d < p.Dv; d++)
                        assert_true(flashc__load(p.o, p.dt, (r * p.Hq + h) * p.Dv + d) == 0.0f);
                    assert_true(isinf(p.lse[h * p.Tq + r]) && p.lse[h * p.Tq + r] < 0);
                }

            /* each sequence alone: the same bits */
            pr.num_splits = 1, pr.block_q = 64, pr.block_k = 32;
            TU_OK(flashc_attn_varlen_fwd(&pr, &p.vl, &p.tq, &p.tk, &p.tv, &p.to, &p.tl, NULL));
            for (int64_t b = 0; b < p.B; b++) {
                const int64_t sq = C[c].sq[b], sk = C[c].sk[b];
                if (sq == 0 || sk == 0 || (sq < 8) != (p.vl.max_seqlen_q < 8))
                    continue; /* the dense call needs sizes >= 1; the decode path is by Sq */
                flashc_tensor q1 = flashc_tensor_4d((char *)p.q + p.cuq[b] * p.Hq * p.D * es, p.dt, 1, sq, p.Hq, p.D);
                flashc_tensor k1 = flashc_tensor_4d((char *)p.k + p.cuk[b] * p.Hkv * p.D * es, p.dt, 1, sk, p.Hkv, p.D);
                flashc_tensor v1 = flashc_tensor_4d((char *)p.v + p.cuk[b] * p.Hkv * p.Dv * es, p.dt, 1, sk, p.Hkv, p.Dv);
                void *o1 = typed_poison(p.dt, sq * p.Hq * p.Dv);
                float *l1 = tu_poisoned(p.Hq * sq);
                flashc_tensor to1 = flashc_tensor_4d(o1, p.dt, 1, sq, p.Hq, p.Dv);
                flashc_tensor tl1 = flashc_tensor_3d(l1, FLASHC_F32, 1, p.Hq, sq);
                flashc_attn_params pb = pr;
                flashc_tensor sl1 = flashc_tensor_1d(p.slopes + b * p.Hq, FLASHC_F32, p.Hq);
                if (pr.alibi_slopes)
                    pb.alibi_slopes = &sl1;
                TU_OK(flashc_attn_fwd(&pb, &q1, &k1, &v1, &to1, &tl1, NULL));
                assert_memory_equal(o1, (char *)p.o + p.cuq[b] * p.Hq * p.Dv * es,
                                    (size_t)(sq * p.Hq * p.Dv) * es);
                for (int64_t h = 0; h < p.Hq; h++)
                    assert_memory_equal(l1 + h * sq, p.lse + h * p.Tq + p.cuq[b],
                                        (size_t)sq * sizeof(float));
                free(o1), free(l1);
            }
            free(oref), free(lref);
            packed_free(&p);
        }
}

/* A paged copy of a packed problem's K/V (varlen.block_table): sequence b's keys in pages of ps
 * rows, page ids shuffled among num_pages (two spare pages); every row that holds no key (page
 * tails, spare pages) is NaN, so a read of one shows in O. */
typedef struct paged_kv {
    int64_t ps, num_pages, max_pages;
    int32_t *table;
    void *k, *v;
    flashc_tensor tk, tv, tt;
} paged_kv;

static void paged_kv_init(paged_kv *g, const packed *p, int64_t ps)
{
    const size_t es = flashc_dtype_size(p->dt);
    g->ps = ps, g->max_pages = 1, g->num_pages = 2;
    for (int64_t b = 0; b < p->B; b++) {
        const int64_t n = (p->cuk[b + 1] - p->cuk[b] + ps - 1) / ps;
        g->num_pages += n;
        g->max_pages = n > g->max_pages ? n : g->max_pages;
    }
    int32_t *perm = malloc((size_t)g->num_pages * sizeof(int32_t));
    assert_non_null(perm);
    for (int64_t i = 0; i < g->num_pages; i++)
        perm[i] = (int32_t)i;
    for (int64_t i = g->num_pages - 1; i > 0; i--) {
        const int64_t j = (int64_t)(tu_uniform() * (double)(i + 1)) % (i + 1);
        const int32_t t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    g->table = malloc((size_t)(p->B * g->max_pages) * sizeof(int32_t));
    assert_non_null(g->table);
    g->k = typed_poison(p->dt, g->num_pages * ps * p->Hkv * p->D);
    g->v = typed_poison(p->dt, g->num_pages * ps * p->Hkv * p->Dv);
    int64_t next = 0;
    for (int64_t b = 0; b < p->B; b++) {
        const int64_t sk = p->cuk[b + 1] - p->cuk[b];
        for (int64_t x = 0; x < g->max_pages; x++) /* unused entries: any value, never read */
            g->table[b * g->max_pages + x] = x < (sk + ps - 1) / ps ? perm[next++] : -7;
        for (int64_t j = 0; j < sk; j++) {
            const int64_t row = g->table[b * g->max_pages + j / ps] * ps + j % ps;
            memcpy((char *)g->k + row * p->Hkv * p->D * es,
                   (char *)p->k + (p->cuk[b] + j) * p->Hkv * p->D * es,
                   (size_t)(p->Hkv * p->D) * es);
            memcpy((char *)g->v + row * p->Hkv * p->Dv * es,
                   (char *)p->v + (p->cuk[b] + j) * p->Hkv * p->Dv * es,
                   (size_t)(p->Hkv * p->Dv) * es);
        }
    }
    free(perm);
    g->tk = flashc_tensor_4d(g->k, p->dt, g->num_pages, ps, p->Hkv, p->D);
    g->tv = flashc_tensor_4d(g->v, p->dt, g->num_pages, ps, p->Hkv, p->Dv);
    g->tt = flashc_tensor_2d(g->table, FLASHC_I32, p->B, g->max_pages);
}

static void paged_kv_free(paged_kv *g)
{
    free(g->table), free(g->k), free(g->v);
}

/* Paged varlen (varlen.block_table, vLLM's mixed prefill/decode batch): the same bits as the
 * packed varlen call, on shuffled pages of 1, 3 and 16 rows whose unused rows are NaN, with
 * every modifier, GQA, Dk != Dv, empty sequences, the decode path and the reference; then the
 * refusals (a page outside the cache, a sequence longer than its table row, the backward), and
 * a caller of the struct before block_table. */
static void test_varlen_paged(void **state)
{
    (void)state;
    static const int64_t sq1[4] = {37, 0, 70, 1}, sk1[4] = {50, 13, 121, 1};
    static const int64_t sq2[3] = {3, 1, 5}, sk2[3] = {90, 300, 5}; /* decode path */
    static const struct { int64_t B; const int64_t *sq, *sk; mods m; int64_t D, Dv; } C[] = {
        {4, sq1, sk1, {1, NOWIN, 0, 0, 0, 0}, 32, 32},
        {4, sq1, sk1, {0, 20, 5, 6.0f, 2, 0, 0}, 40, 24},
        {3, sq2, sk2, {1, NOWIN, 4.0f, 1, 0, 0}, 16, 16},
    };
    static const int64_t PS[3] = {1, 3, 16};
    for (size_t c = 0; c < sizeof C / sizeof C[0]; c++)
        for (int t = 0; t < 3; t++)
            for (int pi = 0; pi < 3; pi++) {
                packed p;
                packed_init(&p, DTYPES[t], C[c].B, C[c].sq, C[c].sk, 4, 2, C[c].D, C[c].Dv, 3);
                paged_kv g;
                paged_kv_init(&g, &p, PS[pi]);
                flashc_attn_params pr;
                set_params(&pr, &C[c].m, &p.ts);
                const int64_t no = p.Tq * p.Hq * p.Dv, nl = p.Hq * p.Tq;
                const size_t es = flashc_dtype_size(p.dt);
                TU_OK(flashc_attn_varlen_fwd(&pr, &p.vl, &p.tq, &p.tk, &p.tv, &p.to, &p.tl, NULL));
                void *opk = dup(p.o, (size_t)no * es);
                float *lpk = dup(p.lse, (size_t)nl * sizeof(float));
                flashc_varlen vp = p.vl;
                vp.block_table = &g.tt;
                memset(p.o, 0xff, (size_t)no * es);
                TU_OK(flashc_attn_varlen_fwd(&pr, &vp, &p.tq, &g.tk, &g.tv, &p.to, &p.tl, NULL));
                assert_memory_equal(p.o, opk, (size_t)no * es);
                assert_memory_equal(p.lse, lpk, (size_t)nl * sizeof(float));
                /* the reference reads the pages through the same lookup */
                attn_force_backend("ref");
                TU_OK(flashc_attn_varlen_fwd(&pr, &vp, &p.tq, &g.tk, &g.tv, &p.to, &p.tl, NULL));
                attn_force_backend(NULL);
                double e = 0.0;
                for (int64_t i = 0; i < no; i++) {
                    const double d = fabs((double)flashc__load(p.o, p.dt, i) -
                                          flashc__load(opk, p.dt, i));
                    assert_false(isnan(d));
                    e = d <= e ? e : d;
                }
                assert_true(e <= (p.dt == FLASHC_F32 ? 1e-5 : p.dt == FLASHC_BF16 ? 3e-2 : 4e-3));
                free(opk), free(lpk);
                paged_kv_free(&g);
                packed_free(&p);
            }

    /* refusals leave the outputs untouched */
    packed p;
    packed_init(&p, FLASHC_F32, 4, sq1, sk1, 4, 2, 16, 16, 0);
    paged_kv g;
    paged_kv_init(&g, &p, 16);
    flashc_attn_params pr = flashc_attn_params_default();
    flashc_varlen vp = p.vl;
    vp.block_table = &g.tt;
    const size_t no = (size_t)(p.Tq * p.Hq * p.Dv) * sizeof(float);
    memset(p.o, 0x5a, no);
    void *before = dup(p.o, no);
    const int32_t keep = g.table[2 * g.max_pages + 1];
    g.table[2 * g.max_pages + 1] = (int32_t)g.num_pages; /* sequence 2 uses 8 pages */
    assert_int_equal(flashc_attn_varlen_fwd(&pr, &vp, &p.tq, &g.tk, &g.tv, &p.to, &p.tl, NULL),
                     FLASHC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(flashc_last_error(), "block_table[2][1]"));
    assert_memory_equal(p.o, before, no);
    g.table[2 * g.max_pages + 1] = keep;
    flashc_tensor narrow = flashc_tensor_2d(g.table, FLASHC_I32, p.B, 2); /* 32 keys a row */
    narrow.stride[0] = g.max_pages;
    vp.block_table = &narrow;
    assert_int_equal(flashc_attn_varlen_fwd(&pr, &vp, &p.tq, &g.tk, &g.tv, &p.to, &p.tl, NULL),
                     FLASHC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(flashc_last_error(), "block_table row holds"));
    assert_memory_equal(p.o, before, no);
    vp.block_table = &g.tt;
    flashc_tensor k3 = p.tk; /* packed k with a block table: the paged layout is 4-d */
    assert_int_not_equal(flashc_attn_varlen_fwd(&pr, &vp, &p.tq, &k3, &p.tv, &p.to, &p.tl, NULL),
                         FLASHC_OK);
    assert_memory_equal(p.o, before, no);
    /* the backward refuses a paged varlen */
    TU_OK(flashc_attn_varlen_fwd(&pr, &vp, &p.tq, &g.tk, &g.tv, &p.to, &p.tl, NULL));
    void *dq = typed_poison(FLASHC_F32, p.Tq * p.Hq * p.D);
    flashc_tensor tdq = flashc_tensor_3d(dq, FLASHC_F32, p.Tq, p.Hq, p.D);
    assert_int_equal(flashc_attn_varlen_bwd(&pr, &vp, &p.tq, &g.tk, &g.tv, &p.to, &p.to, &p.tl,
                                            &tdq, &g.tk, &g.tv, NULL),
                     FLASHC_ERR_UNSUPPORTED);
    assert_non_null(strstr(flashc_last_error(), "forward only"));
    /* a caller built before block_table: its struct ends at max_seqlen_k */
    flashc_varlen old = p.vl;
    old.struct_size = offsetof(flashc_varlen, block_table);
    old.block_table = &g.tt; /* past the caller's struct: never read */
    TU_OK(flashc_attn_varlen_fwd(&pr, &old, &p.tq, &p.tk, &p.tv, &p.to, &p.tl, NULL));
    TU_OK(flashc_attn_varlen_fwd(&pr, &p.vl, &p.tq, &p.tk, &p.tv, &p.to, &p.tl, NULL));
    free(dq), free(before);
    paged_kv_free(&g);
    packed_free(&p);
}

/* ---- KV cache ----------------------------------------------------------------------------- */

typedef struct cache {
    int64_t B, Sq, Hq, Hkv, D, Dv, cap, snew, page; /* page 0: contiguous */
    flashc_dtype dt;
    int32_t *seqlens, *table;
    int64_t num_pages, max_pages;
    void *kc, *vc, *kn, *vn, *q, *o;
    float *lse, *slopes;
    flashc_tensor tkc, tvc, tkn, tvn, tq, to, tl, tsl, ttab, ts;
    flashc_kv_cache kv;
} cache;

/* A contiguous cache (B, cap, Hkv, D) with random lengths (<= cap - snew), random contents
 * (the unused rows too), and k_new/v_new when snew > 0. */
static void cache_init(cache *c, flashc_dtype dt, int64_t B, int64_t Sq, int64_t Hq,
                       int64_t Hkv, int64_t D, int64_t Dv, int64_t cap, int64_t snew)
{
    memset(c, 0, sizeof *c);
    c->B = B, c->Sq = Sq, c->Hq = Hq, c->Hkv = Hkv, c->D = D, c->Dv = Dv, c->cap = cap;
    c->snew = snew, c->dt = dt;
    c->seqlens = malloc((size_t)B * sizeof(int32_t));
    for (int64_t b = 0; b < B; b++)
        c->seqlens[b] = (int32_t)(tu_uniform() * (double)(cap - snew + 1));
    c->seqlens[0] = (int32_t)(cap - snew); /* one full */
    float *f;
    c->kc = typed_normal(dt, B * cap * Hkv * D, 1.0f, &f), free(f);
    c->vc = typed_normal(dt, B * cap * Hkv * Dv, 1.0f, &f), free(f);
    c->q = typed_normal(dt, B * Sq * Hq * D, 1.0f, &f), free(f);
    c->o = typed_poison(dt, B * Sq * Hq * Dv);
    c->lse = tu_poisoned(B * Hq * Sq);
    c->slopes = make_slopes(B, Hq, 2, &c->ts);
    c->tkc = flashc_tensor_4d(c->kc, dt, B, cap, Hkv, D);
    c->tvc = flashc_tensor_4d(c->vc, dt, B, cap, Hkv, Dv);
    c->tq = flashc_tensor_4d(c->q, dt, B, Sq, Hq, D);
    c->to = flashc_tensor_4d(c->o, dt, B, Sq, Hq, Dv);
    c->tl = flashc_tensor_3d(c->lse, FLASHC_F32, B, Hq, Sq);
    c->tsl = flashc_tensor_1d(c->seqlens, FLASHC_I32, B);
    c->kv = (flashc_kv_cache){sizeof(flashc_kv_cache), &c->tkc, &c->tvc, &c->tsl, NULL, NULL,
                              NULL, NULL, NULL};
    if (snew) {
        c->kn = typed_normal(dt, B * snew * Hkv * D, 1.0f, &f), free(f);
        c->vn = typed_normal(dt, B * snew * Hkv * Dv, 1.0f, &f), free(f);
        c->tkn = flashc_tensor_4d(c->kn, dt, B, snew, Hkv, D);
        c->tvn = flashc_tensor_4d(c->vn, dt, B, snew, Hkv, Dv);
        c->kv.k_new = &c->tkn, c->kv.v_new = &c->tvn;
    }
}

/* The same cache as pages of page_size rows in a shuffled order (plus spare pages): pc holds
 * its own k/v buffers; the contiguous one is kept. */
static void cache_paged_from(cache *pc, const cache *c, int64_t page)
{
    *pc = *c;
    pc->page = page;
    pc->max_pages = (c->cap + page - 1) / page;
    pc->num_pages = c->B * pc->max_pages + 3;
    const size_t es = flashc_dtype_size(c->dt);
    pc->table = malloc((size_t)(c->B * pc->max_pages) * sizeof(int32_t));
    int32_t *perm = malloc((size_t)pc->num_pages * sizeof(int32_t));
    for (int64_t i = 0; i < pc->num_pages; i++)
        perm[i] = (int32_t)i;
    for (int64_t i = pc->num_pages - 1; i > 0; i--) {
        const int64_t r = (int64_t)(tu_uniform() * (double)(i + 1));
        const int32_t t = perm[i];
        perm[i] = perm[r], perm[r] = t;
    }
    for (int64_t i = 0; i < c->B * pc->max_pages; i++)
        pc->table[i] = perm[i];
    free(perm);
    float *f;
    pc->kc = typed_normal(c->dt, pc->num_pages * page * c->Hkv * c->D, 1.0f, &f), free(f);
    pc->vc = typed_normal(c->dt, pc->num_pages * page * c->Hkv * c->Dv, 1.0f, &f), free(f);
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t j = 0; j < c->cap; j++) {
            const int64_t pg = pc->table[b * pc->max_pages + j / page], r = j % page;
            memcpy((char *)pc->kc + ((pg * page + r) * c->Hkv) * c->D * es,
                   (char *)c->kc + ((b * c->cap + j) * c->Hkv) * c->D * es,
                   (size_t)(c->Hkv * c->D) * es);
            memcpy((char *)pc->vc + ((pg * page + r) * c->Hkv) * c->Dv * es,
                   (char *)c->vc + ((b * c->cap + j) * c->Hkv) * c->Dv * es,
                   (size_t)(c->Hkv * c->Dv) * es);
        }
    pc->tkc = flashc_tensor_4d(pc->kc, c->dt, pc->num_pages, page, c->Hkv, c->D);
    pc->tvc = flashc_tensor_4d(pc->vc, c->dt, pc->num_pages, page, c->Hkv, c->Dv);
    pc->ttab = flashc_tensor_2d(pc->table, FLASHC_I32, c->B, pc->max_pages);
    pc->o = typed_poison(c->dt, c->B * c->Sq * c->Hq * c->Dv);
    pc->lse = tu_poisoned(c->B * c->Hq * c->Sq);
    pc->to = flashc_tensor_4d(pc->o, c->dt, c->B, c->Sq, c->Hq, c->Dv);
    pc->tl = flashc_tensor_3d(pc->lse, FLASHC_F32, c->B, c->Hq, c->Sq);
    pc->kv.k_cache = &pc->tkc, pc->kv.v_cache = &pc->tvc, pc->kv.block_table = &pc->ttab;
}

static void cache_free(cache *c, int paged)
{
    free(c->kc), free(c->vc), free(c->o), free(c->lse);
    if (paged) {
        free(c->table);
        return;
    }
    free(c->seqlens), free(c->kn), free(c->vn), free(c->q), free(c->slopes);
}

static size_t cache_osize(const cache *c)
{
    return (size_t)(c->B * c->Sq * c->Hq * c->Dv) * flashc_dtype_size(c->dt);
}

/* KV cache: against the reference through the same entry point (decode and chunked prefill,
 * every modifier, with and without append); append writes exactly the new rows; paged caches
 * with shuffled pages of 1, 3 and 16 rows give the contiguous cache's bits. */
static void test_kvcache(void **state)
{
    (void)state;
    static const struct { int64_t B, Sq, Hq, Hkv, D, Dv, cap, snew; mods m; int splits; } C[] = {
        {3, 1, 8, 2, 64, 64, 700, 0, {1, NOWIN, 0, 0, 0, 0}, 0},
        {2, 1, 4, 1, 32, 32, 300, 1, {1, 100, -1, 10.0f, 1, 0, 0}, 0},
        {2, 5, 6, 2, 48, 32, 200, 5, {1, NOWIN, 0, 2, 0, 0}, 0},
        {2, 40, 4, 2, 32, 32, 250, 40, {1, 64, -1, 0, 0, 0, 0}, 0},
        {1, 16, 2, 2, 16, 16, 120, 0, {0, 8, 8, 3.0f, 1, 0, 0}, 3},
    };
    const int64_t pages[3] = {1, 3, 16};
    for (size_t n = 0; n < sizeof C / sizeof C[0]; n++)
        for (int t = 0; t < 3; t++) {
            cache c;
            cache_init(&c, DTYPES[t], C[n].B, C[n].Sq, C[n].Hq, C[n].Hkv, C[n].D, C[n].Dv,
                       C[n].cap, C[n].snew);
            flashc_attn_params pr;
            set_params(&pr, &C[n].m, &c.ts);
            pr.num_splits = C[n].splits;
            const size_t es = flashc_dtype_size(c.dt);
            const size_t kbytes = (size_t)(c.B * c.cap * c.Hkv * c.D) * es;
            const size_t vbytes = (size_t)(c.B * c.cap * c.Hkv * c.Dv) * es;
            void *k0 = dup(c.kc, kbytes), *v0 = dup(c.vc, vbytes);
            attn_force_backend("ref");
            TU_OK(flashc_attn_kvcache_fwd(&pr, &c.kv, &c.tq, &c.to, &c.tl, NULL));
            attn_force_backend(NULL);
            /* append: exactly rows seqlens[b] .. + snew of each sequence changed, to k_new */
            for (int64_t b = 0; b < c.B; b++)
                for (int64_t j = 0; j < c.cap; j++) {
                    const int64_t r = j - c.seqlens[b];
                    const size_t ko = (size_t)((b * c.cap + j) * c.Hkv * c.D) * es;
                    const size_t vo = (size_t)((b * c.cap + j) * c.Hkv * c.Dv) * es;
                    if (r >= 0 && r < c.snew) {
                        assert_memory_equal((char *)c.kc + ko,
                                            (char *)c.kn + (size_t)((b * c.snew + r) * c.Hkv * c.D) * es,
                                            (size_t)(c.Hkv * c.D) * es);
                        assert_memory_equal((char *)c.vc + vo,
                                            (char *)c.vn + (size_t)((b * c.snew + r) * c.Hkv * c.Dv) * es,
                                            (size_t)(c.Hkv * c.Dv) * es);
                    } else {
                        assert_memory_equal((char *)c.kc + ko, (char *)k0 + ko, (size_t)(c.Hkv * c.D) * es);
                        assert_memory_equal((char *)c.vc + vo, (char *)v0 + vo, (size_t)(c.Hkv * c.Dv) * es);
                    }
                }
            void *oref = dup(c.o, cache_osize(&c));
            float *lref = dup(c.lse, (size_t)(c.B * c.Hq * c.Sq) * sizeof(float));
            memcpy(c.kc, k0, kbytes), memcpy(c.vc, v0, vbytes); /* the cpu run appends again */
            flashc_attn_stats st = FLASHC_ATTN_STATS_INIT;
            TU_OK(flashc_attn_kvcache_fwd(&pr, &c.kv, &c.tq, &c.to, &c.tl, &st));
            double e = 0.0, el = 0.0;
            const int64_t no = c.B * c.Sq * c.Hq * c.Dv, nl = c.B * c.Hq * c.Sq;
            for (int64_t i = 0; i < no; i++) {
                const double d = fabs((double)flashc__load(c.o, c.dt, i) - flashc__load(oref, c.dt, i));
                e = d <= e ? e : d;
            }
            for (int64_t i = 0; i < nl; i++) {
                if (isinf(lref[i])) {
                    assert_true(isinf(c.lse[i]) && c.lse[i] < 0);
                    continue;
                }
                const double d = fabs((double)c.lse[i] - lref[i]) / (1.0 + fabs((double)lref[i]));
                el = d <= el ? el : d;
            }
            const double tol = c.dt == FLASHC_F32 ? 1e-5 : c.dt == FLASHC_BF16 ? 3e-2 : 4e-3;
            print_message("  kvcache case %zu %-8s |O-ref| %.2e lse %.1e splits %lld\n", n,
                          flashc__dtype_name(c.dt), e, el, (long long)st.num_splits);
            assert_true(e <= tol);
            assert_true(el <= 2e-5);

            /* paged = contiguous, bit for bit (caches restored: both runs append the same) */
            void *oc = dup(c.o, cache_osize(&c));
            float *lc = dup(c.lse, (size_t)nl * sizeof(float));
            for (int g = 0; g < 3; g++) {
                memcpy(c.kc, k0, kbytes), memcpy(c.vc, v0, vbytes);
                cache pc;
                cache_paged_from(&pc, &c, pages[g]);
                TU_OK(flashc_attn_kvcache_fwd(&pr, &pc.kv, &c.tq, &pc.to, &pc.tl, NULL));
                assert_memory_equal(pc.o, oc, cache_osize(&c));
                assert_memory_equal(pc.lse, lc, (size_t)nl * sizeof(float));
                cache_free(&pc, 1);
            }
            /* a caller's workspace: nothing allocated */
            size_t bytes = 0;
            TU_OK(flashc_attn_kvcache_fwd_workspace_size(&pr, &c.kv, &c.tq, &c.to, &c.tl, &bytes));
            void *ws = malloc(bytes);
            pr.workspace = ws, pr.workspace_bytes = bytes;
            memcpy(c.kc, k0, kbytes), memcpy(c.vc, v0, vbytes);
            flashc_mem_reset_peak();
            TU_OK(flashc_attn_kvcache_fwd(&pr, &c.kv, &c.tq, &c.to, &c.tl, NULL));
            assert_int_equal(flashc_mem_get().alloc_count, 0);
            assert_memory_equal(c.o, oc, cache_osize(&c));
            free(ws), free(oc), free(lc), free(oref), free(lref), free(k0), free(v0);
            cache_free(&c, 0);
        }
}

/* Varlen with a caller's workspace allocates nothing either. */
static void test_varlen_workspace(void **state)
{
    (void)state;
    static const int64_t sq[3] = {30, 0, 77}, sk[3] = {40, 9, 77};
    packed p;
    packed_init(&p, FLASHC_F16, 3, sq, sk, 2, 1, 32, 32, 0);
    flashc_attn_params pr = flashc_attn_params_default();
    pr.causal = 1;
    size_t bytes = 0;
    TU_OK(flashc_attn_varlen_fwd_workspace_size(&pr, &p.vl, &p.tq, &p.tk, &p.tv, &p.to, &p.tl,
                                                &bytes));
    void *ws = malloc(bytes);
    pr.workspace = ws, pr.workspace_bytes = bytes;
    flashc_mem_reset_peak();
    TU_OK(flashc_attn_varlen_fwd(&pr, &p.vl, &p.tq, &p.tk, &p.tv, &p.to, &p.tl, NULL));
    assert_int_equal(flashc_mem_get().alloc_count, 0);
    free(ws);
    packed_free(&p);
}

/* flashc_attn_merge takes bf16/f16 partial outputs (each may differ from the others): two
 * halves of the keys, each through flashc_attn_fwd in dtype dt, merged into an output of
 * another dtype, match the one pass over all keys within the dtypes' roundings; an empty state
 * (lse -inf) with a NaN o contributes nothing. */
static void test_merge_lowp(void **state)
{
    (void)state;
    const int64_t Sq = 9, Sk = 70, H = 2, D = 16, half = 33;
    for (int t = 0; t < 3; t++)
        for (int u = 0; u < 3; u++) {
            const flashc_dtype dt = DTYPES[t], dto = DTYPES[u];
            prob p;
            prob_init(&p, dt, 1, Sq, Sk, H, H, D, D, 1.0f);
            TU_OK(flashc_attn_fwd(NULL, &p.tq, &p.tk, &p.tv, &p.to, &p.tl, NULL));
            const size_t es = flashc_dtype_size(dt);
            void *o1 = typed_poison(dt, Sq * H * D), *o2 = typed_poison(dt, Sq * H * D);
            void *om = typed_poison(dto, Sq * H * D);
            float *l1 = tu_poisoned(H * Sq), *l2 = tu_poisoned(H * Sq), *lm = tu_poisoned(H * Sq);
            flashc_tensor k1 = p.tk, v1 = p.tv, k2 = p.tk, v2 = p.tv;
            k1.shape[1] = v1.shape[1] = half;
            k2.shape[1] = v2.shape[1] = Sk - half;
            k2.data = (char *)p.k + (size_t)(half * H * D) * es;
            v2.data = (char *)p.v + (size_t)(half * H * D) * es;
            flashc_tensor to1 = flashc_tensor_4d(o1, dt, 1, Sq, H, D), to2 = flashc_tensor_4d(o2, dt, 1, Sq, H, D);
            flashc_tensor tom = flashc_tensor_4d(om, dto, 1, Sq, H, D);
            flashc_tensor tl1 = flashc_tensor_3d(l1, FLASHC_F32, 1, H, Sq), tl2 = flashc_tensor_3d(l2, FLASHC_F32, 1, H, Sq);
            flashc_tensor tlm = flashc_tensor_3d(lm, FLASHC_F32, 1, H, Sq);
            TU_OK(flashc_attn_fwd(NULL, &p.tq, &k1, &v1, &to1, &tl1, NULL));
            TU_OK(flashc_attn_fwd(NULL, &p.tq, &k2, &v2, &to2, &tl2, NULL));
            TU_OK(flashc_attn_merge(&to1, &tl1, &to2, &tl2, &tom, &tlm));
            const double u_in = dt == FLASHC_F32 ? 1e-6 : dt == FLASHC_BF16 ? 0x1p-8 : 0x1p-11;
            const double u_out = dto == FLASHC_F32 ? 1e-6 : dto == FLASHC_BF16 ? 0x1p-8 : 0x1p-11;
            for (int64_t i = 0; i < Sq * H * D; i++) {
                const double ref = flashc__load(p.o, dt, i), got = flashc__load(om, dto, i);
                assert_true(fabs(got - ref) <= (2.0 * u_in + u_out) * (fabs(ref) + 0.5) + 1e-6);
            }
            for (int64_t i = 0; i < H * Sq; i++)
                assert_true(fabs(lm[i] - p.lse[i]) <= 1e-5 * (1.0 + fabs(p.lse[i])));
            /* state 2 empty, its o NaN: the result is state 1, rounded into dto */
            for (int64_t i = 0; i < H * Sq; i++)
                l2[i] = -INFINITY;
            for (int64_t i = 0; i < Sq * H * D; i++)
                flashc__store(o2, dt, i, NAN);
            TU_OK(flashc_attn_merge(&to1, &tl1, &to2, &tl2, &tom, &tlm));
            for (int64_t i = 0; i < Sq * H * D; i++)
                assert_true(flashc__load(om, dto, i) == rnd(dto, flashc__load(o1, dt, i)));
            assert_memory_equal(lm, l1, (size_t)(H * Sq) * sizeof(float));
            free(o1), free(o2), free(om), free(l1), free(l2), free(lm);
            prob_free(&p);
        }
}

int main(void)
{
    tu_seed_from_env();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dense_modifiers),   cmocka_unit_test(test_poison_outside_range),
        cmocka_unit_test(test_permute_keys),      cmocka_unit_test(test_split_kv),
        cmocka_unit_test(test_f4_nonfinite_v),    cmocka_unit_test(test_f5_large_scores),
        cmocka_unit_test(test_f6_decode_threads), cmocka_unit_test(test_nan_propagation),
        cmocka_unit_test(test_workspace),         cmocka_unit_test(test_varlen),
        cmocka_unit_test(test_varlen_paged),
        cmocka_unit_test(test_kvcache),           cmocka_unit_test(test_varlen_workspace),
        cmocka_unit_test(test_merge_lowp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
