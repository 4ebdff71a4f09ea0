/* test_attn_bwd_v2.c — the CPU backward on the v2 contract: key ranges (causal, windows incl.
 * (0, 0) and asymmetric ones), softcap, ALiBi (Hq) and (B, Hq), Dk != Dv, GQA, Sq != Sk, rows
 * with empty key ranges, a zero and a negative scale, float32 / bfloat16 / float16 storage, the
 * varlen layout, the caller's workspace, determinism across thread counts.
 *
 * Oracles: flashc_attn_bwd_naive (float64, dense) and the "ref" row of the dispatch table through
 * the public varlen entry point (attn_force_backend), on fresh random inputs (seed printed;
 * FLASHC_TEST_SEED replays), central finite differences of a float64 loss written here from the
 * contract's definitions, and a plain same-precision backward (naive_sp, below) for the
 * low-precision rule: max |flash - ref| <= 2 max |naive_sp - ref| + 5e-6 max(|ref|, 1). The last
 * term is float32 rounding (test_attn_bwd.c's float32 bound): where a gradient vanishes
 * analytically (a row that sees one key has P = 1 and dS = dP - D = 0), naive_sp computes dP
 * and D by the same float32 sum and gets an exact 0, which the tiles' dP (SIMD order) against
 * D (float64) cannot match bit for bit. o and lse come from the reference
 * forward on the same (rounded) inputs, o rounded to the storage type as training would keep it.
 */
#include "common.h"
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    assert_non_null(p);
    return p;
}

static float rnd(flashc_dtype dt, float x)
{
    uint32_t h; /* room for any dtype, so the float32 branch of flashc__store stays in bounds */
    if (dt == FLASHC_F32)
        return x;
    flashc__store(&h, dt, 0, x);
    return flashc__load(&h, dt, 0);
}

static void round_all(flashc_dtype dt, float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = rnd(dt, x[i]);
}

/* A storage copy of x (dt elements), malloc'ed. */
static void *to_dtype(flashc_dtype dt, const float *x, size_t n)
{
    const size_t es = flashc_dtype_size(dt);
    char *b = xmalloc(n * es);
    for (size_t i = 0; i < n; i++)
        flashc__store(b, dt, (int64_t)i, x[i]);
    return b;
}

static void from_dtype(flashc_dtype dt, const void *b, float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = flashc__load(b, dt, (int64_t)i);
}

static const char *dt_name(flashc_dtype dt)
{
    return dt == FLASHC_F32 ? "f32" : dt == FLASHC_BF16 ? "bf16" : "f16";
}

/* ---- the contract's definitions, written again (independent of internal.h) ----------------- */

typedef struct mods {
    int causal;
    int64_t wl, wr;
    float softcap;
    int alibi;        /* 0: none, 1: (Hq), 2: (B, Hq) */
    int has_scale;
    float scale;
} mods;

static void key_range(const mods *m, int64_t sq, int64_t sk, int64_t i, int64_t *lo, int64_t *hi)
{
    const int64_t a = i + sk - sq, wr = m->causal ? 0 : m->wr;
    int64_t l = 0, h = sk;
    if (m->wl >= 0 && a - m->wl > l)
        l = a - m->wl;
    if (wr >= 0 && a + wr + 1 < h)
        h = a + wr + 1;
    *lo = l, *hi = h > l ? h : l;
}

static void set_params(flashc_attn_params *pr, const mods *m, int64_t br, int64_t bc,
                       const flashc_tensor *alibi)
{
    *pr = flashc_attn_params_default();
    pr->causal = m->causal;
    pr->window_left = m->wl, pr->window_right = m->wr;
    pr->softcap = m->softcap;
    pr->has_softmax_scale = m->has_scale, pr->softmax_scale = m->scale;
    pr->block_q = br, pr->block_k = bc;
    pr->alibi_slopes = m->alibi ? alibi : NULL;
}

/* ---- dense problems ----------------------------------------------------------------------- */

typedef struct shape {
    int64_t B, Sq, Sk, Hq, Hkv, D, Dv, br, bc;
} shape;

typedef struct prob {
    shape s;
    mods m;
    flashc_dtype dt;
    size_t nq, nk, nv, no, nl; /* elements: q/dq, k/dk, v/dv, o/dout, lse */
    float *q, *k, *v, *o, *dout, *lse, *slopes; /* float32 holding storage-rounded values */
    flashc_tensor talibi;
    float scale;
} prob;

static flashc_tensor t4(void *d, flashc_dtype dt, int64_t B, int64_t S, int64_t H, int64_t D)
{
    return flashc_tensor_4d(d, dt, B, S, H, D);
}

static prob make_prob(const shape *s, const mods *m, flashc_dtype dt)
{
    prob p;
    memset(&p, 0, sizeof p);
    p.s = *s, p.m = *m, p.dt = dt;
    p.nq = (size_t)(s->B * s->Sq * s->Hq * s->D);
    p.nk = (size_t)(s->B * s->Sk * s->Hkv * s->D);
    p.nv = (size_t)(s->B * s->Sk * s->Hkv * s->Dv);
    p.no = (size_t)(s->B * s->Sq * s->Hq * s->Dv);
    p.nl = (size_t)(s->B * s->Hq * s->Sq);
    p.q = tu_alloc_normal((int64_t)p.nq, 1.0f), p.k = tu_alloc_normal((int64_t)p.nk, 1.0f);
    p.v = tu_alloc_normal((int64_t)p.nv, 1.0f), p.dout = tu_alloc_normal((int64_t)p.no, 1.0f);
    round_all(dt, p.q, p.nq), round_all(dt, p.k, p.nk), round_all(dt, p.v, p.nv);
    round_all(dt, p.dout, p.no);
    p.o = xmalloc(p.no * 4), p.lse = xmalloc(p.nl * 4);
    p.slopes = xmalloc((size_t)(s->B * s->Hq) * 4);
    for (int64_t x = 0; x < s->B * s->Hq; x++) /* flash-attn's slopes are O(1/H); these vary */
        p.slopes[x] = (float)(0.05 + 0.5 * tu_uniform());
    p.talibi = m->alibi == 2 ? flashc_tensor_2d(p.slopes, FLASHC_F32, s->B, s->Hq)
                             : flashc_tensor_1d(p.slopes, FLASHC_F32, s->Hq);
    p.scale = m->has_scale ? m->scale : (float)(1.0 / sqrt((double)s->D));
    flashc_attn_params pr;
    set_params(&pr, m, 0, 0, &p.talibi);
    flashc_tensor q = t4(p.q, FLASHC_F32, s->B, s->Sq, s->Hq, s->D);
    flashc_tensor k = t4(p.k, FLASHC_F32, s->B, s->Sk, s->Hkv, s->D);
    flashc_tensor v = t4(p.v, FLASHC_F32, s->B, s->Sk, s->Hkv, s->Dv);
    flashc_tensor o = t4(p.o, FLASHC_F32, s->B, s->Sq, s->Hq, s->Dv);
    flashc_tensor l = flashc_tensor_3d(p.lse, FLASHC_F32, s->B, s->Hq, s->Sq);
    TU_OK(flashc_attn_fwd_naive(&pr, &q, &k, &v, &o, &l, NULL));
    round_all(dt, p.o, p.no);
    return p;
}

static void free_prob(prob *p)
{
    free(p->q), free(p->k), free(p->v), free(p->o), free(p->dout), free(p->lse), free(p->slopes);
}

typedef struct grads {
    float *dq, *dk, *dv;
} grads;

static grads alloc_grads(const prob *p)
{
    grads g = {xmalloc(p->nq * 4), xmalloc(p->nk * 4), xmalloc(p->nv * 4)};
    return g;
}

static void free_grads(grads *g) { free(g->dq), free(g->dk), free(g->dv); }

/* The float64 naive backward on the float32 copies (every dtype's oracle). */
static grads ref_grads(const prob *p)
{
    const shape *s = &p->s;
    grads g = alloc_grads(p);
    flashc_attn_params pr;
    set_params(&pr, &p->m, 0, 0, &p->talibi);
    flashc_tensor q = t4(p->q, FLASHC_F32, s->B, s->Sq, s->Hq, s->D);
    flashc_tensor k = t4(p->k, FLASHC_F32, s->B, s->Sk, s->Hkv, s->D);
    flashc_tensor v = t4(p->v, FLASHC_F32, s->B, s->Sk, s->Hkv, s->Dv);
    flashc_tensor o = t4(p->o, FLASHC_F32, s->B, s->Sq, s->Hq, s->Dv);
    flashc_tensor dout = t4(p->dout, FLASHC_F32, s->B, s->Sq, s->Hq, s->Dv);
    flashc_tensor l = flashc_tensor_3d(p->lse, FLASHC_F32, s->B, s->Hq, s->Sq);
    flashc_tensor dq = t4(g.dq, FLASHC_F32, s->B, s->Sq, s->Hq, s->D);
    flashc_tensor dk = t4(g.dk, FLASHC_F32, s->B, s->Sk, s->Hkv, s->D);
    flashc_tensor dv = t4(g.dv, FLASHC_F32, s->B, s->Sk, s->Hkv, s->Dv);
    TU_OK(flashc_attn_bwd_naive(&pr, &q, &k, &v, &o, &dout, &l, &dq, &dk, &dv, NULL));
    return g;
}

/* The CPU flash backward in the problem's storage dtype; gradients widened to float32. */
static flashc_status flash_grads(const prob *p, int threads, void *ws, size_t ws_bytes,
                                 flashc_attn_stats *stats, grads *g)
{
    const shape *s = &p->s;
    const flashc_dtype dt = p->dt;
    flashc_attn_params pr;
    set_params(&pr, &p->m, s->br, s->bc, &p->talibi);
    pr.num_threads = threads;
    pr.workspace = ws, pr.workspace_bytes = ws_bytes;
    void *bq = to_dtype(dt, p->q, p->nq), *bk = to_dtype(dt, p->k, p->nk);
    void *bv = to_dtype(dt, p->v, p->nv), *bo = to_dtype(dt, p->o, p->no);
    void *bdo = to_dtype(dt, p->dout, p->no);
    const size_t es = flashc_dtype_size(dt);
    void *bdq = xmalloc(p->nq * es), *bdk = xmalloc(p->nk * es), *bdv = xmalloc(p->nv * es);
    memset(bdq, 0xff, p->nq * es), memset(bdk, 0xff, p->nk * es), memset(bdv, 0xff, p->nv * es);
    flashc_tensor q = t4(bq, dt, s->B, s->Sq, s->Hq, s->D);
    flashc_tensor k = t4(bk, dt, s->B, s->Sk, s->Hkv, s->D);
    flashc_tensor v = t4(bv, dt, s->B, s->Sk, s->Hkv, s->Dv);
    flashc_tensor o = t4(bo, dt, s->B, s->Sq, s->Hq, s->Dv);
    flashc_tensor dout = t4(bdo, dt, s->B, s->Sq, s->Hq, s->Dv);
    flashc_tensor l = flashc_tensor_3d(p->lse, FLASHC_F32, s->B, s->Hq, s->Sq);
    flashc_tensor dq = t4(bdq, dt, s->B, s->Sq, s->Hq, s->D);
    flashc_tensor dk = t4(bdk, dt, s->B, s->Sk, s->Hkv, s->D);
    flashc_tensor dv = t4(bdv, dt, s->B, s->Sk, s->Hkv, s->Dv);
    const flashc_status st = flashc_attn_bwd(&pr, &q, &k, &v, &o, &dout, &l, &dq, &dk, &dv, stats);
    if (st == FLASHC_OK) {
        from_dtype(dt, bdq, g->dq, p->nq);
        from_dtype(dt, bdk, g->dk, p->nk);
        from_dtype(dt, bdv, g->dv, p->nv);
    }
    free(bq), free(bk), free(bv), free(bo), free(bdo), free(bdq), free(bdk), free(bdv);
    return st;
}

static float slope_of(const prob *p, int64_t b, int64_t h)
{
    return p->m.alibi == 2 ? p->slopes[b * p->s.Hq + h] : p->m.alibi ? p->slopes[h] : 0.0f;
}

/* The plain same-precision backward, as a framework's unfused ops in that dtype compute it:
 * U = q k^T rounded, scaled and rounded; softcap and ALiBi each rounded; P = softmax(S) in
 * float32, rounded; dV = P^T dO, dP = dO v^T, D = rowsum(dO o), dS = P (dP - D) tanh', dQ, dK:
 * float32 sums, each result rounded to the storage type. */
static grads naive_sp(const prob *p)
{
    const shape *s = &p->s;
    const flashc_dtype dt = p->dt;
    const int64_t D = s->D, Dv = s->Dv, group = s->Hq / s->Hkv;
    grads g = alloc_grads(p);
    float *dk = calloc(p->nk, 4), *dv = calloc(p->nv, 4);
    float *S = xmalloc((size_t)s->Sk * 4), *P = xmalloc((size_t)s->Sk * 4);
    float *G = xmalloc((size_t)s->Sk * 4);
    assert_non_null(dk), assert_non_null(dv);
    for (int64_t b = 0; b < s->B; b++)
        for (int64_t h = 0; h < s->Hq; h++) {
            const int64_t hk = h / group;
            const float slope = slope_of(p, b, h);
            for (int64_t i = 0; i < s->Sq; i++) {
                int64_t lo, hi;
                key_range(&p->m, s->Sq, s->Sk, i, &lo, &hi);
                const float *qi = p->q + ((b * s->Sq + i) * s->Hq + h) * D;
                const float *doi = p->dout + ((b * s->Sq + i) * s->Hq + h) * Dv;
                const float *oi = p->o + ((b * s->Sq + i) * s->Hq + h) * Dv;
                float mx = -INFINITY, sum = 0.0f;
                for (int64_t j = lo; j < hi; j++) {
                    const float *kj = p->k + ((b * s->Sk + j) * s->Hkv + hk) * D;
                    float acc = 0.0f;
                    for (int64_t d = 0; d < D; d++)
                        acc += qi[d] * kj[d];
                    float u = rnd(dt, rnd(dt, acc) * p->scale);
                    G[j] = 1.0f;
                    if (p->m.softcap > 0.0f) {
                        const float t = rnd(dt, tanhf(u / p->m.softcap));
                        u = rnd(dt, p->m.softcap * t);
                        G[j] = rnd(dt, 1.0f - t * t);
                    }
                    if (p->m.alibi) {
                        const int64_t a = i + s->Sk - s->Sq;
                        u = rnd(dt, u - slope * (float)(a > j ? a - j : j - a));
                    }
                    S[j] = u;
                    mx = u > mx ? u : mx;
                }
                for (int64_t j = lo; j < hi; j++)
                    sum += P[j] = expf(S[j] - mx);
                for (int64_t j = lo; j < hi; j++)
                    P[j] = rnd(dt, P[j] / sum);
                float di = 0.0f;
                for (int64_t d = 0; d < Dv; d++)
                    di += doi[d] * oi[d];
                di = rnd(dt, di);
                float *dqi = g.dq + ((b * s->Sq + i) * s->Hq + h) * D;
                float dq[1024];
                for (int64_t d = 0; d < D; d++)
                    dq[d] = 0.0f;
                for (int64_t j = lo; j < hi; j++) {
                    const float *vj = p->v + ((b * s->Sk + j) * s->Hkv + hk) * Dv;
                    const float *kj = p->k + ((b * s->Sk + j) * s->Hkv + hk) * D;
                    float dp = 0.0f;
                    for (int64_t d = 0; d < Dv; d++)
                        dp += doi[d] * vj[d];
                    dp = rnd(dt, dp);
                    const float ds = rnd(dt, rnd(dt, P[j] * (dp - di)) * G[j]);
                    for (int64_t d = 0; d < D; d++)
                        dq[d] += ds * kj[d];
                    float *dkj = dk + ((b * s->Sk + j) * s->Hkv + hk) * D;
                    float *dvj = dv + ((b * s->Sk + j) * s->Hkv + hk) * Dv;
                    for (int64_t d = 0; d < D; d++)
                        dkj[d] += ds * qi[d];
                    for (int64_t d = 0; d < Dv; d++)
                        dvj[d] += P[j] * doi[d];
                }
                for (int64_t d = 0; d < D; d++)
                    dqi[d] = rnd(dt, dq[d] * p->scale);
            }
        }
    for (size_t x = 0; x < p->nk; x++)
        g.dk[x] = rnd(dt, dk[x] * p->scale);
    for (size_t x = 0; x < p->nv; x++)
        g.dv[x] = rnd(dt, dv[x]);
    free(dk), free(dv), free(S), free(P), free(G);
    return g;
}

static double max_abs(const float *x, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        m = fabs((double)x[i]) > m ? fabs((double)x[i]) : m;
    return m;
}

static double max_err(const float *a, const float *b, size_t n)
{
    double e = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - (double)b[i]);
        e = d > e || isnan(d) ? d : e;
    }
    return e;
}

static double norm_err(const float *a, const float *b, size_t n);

static void assert_finite(const char *what, const char *name, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            fail_msg("%s: %s[%zu] = %g is not finite", name, what, i, (double)x[i]);
}

/* Per storage dtype (float32, bfloat16, float16), the largest ef / (2 en + slack) check_rule
 * saw (1 is the bound) and its case: printed after the dense cases, the margin a run kept. */
static double worst_ratio[3];
static char worst_case[3][300];

/* The low-precision rule on one gradient (see the top of the file). */
static void check_rule(int dti, const char *name, const char *what, const float *flash,
                       const float *naive, const float *ref, size_t n)
{
    const double ef = max_err(flash, ref, n), en = max_err(naive, ref, n);
    const double slack = 5e-6 * (max_abs(ref, n) > 1.0 ? max_abs(ref, n) : 1.0);
    if (ef / (2.0 * en + slack) > worst_ratio[dti]) {
        worst_ratio[dti] = ef / (2.0 * en + slack);
        snprintf(worst_case[dti], sizeof worst_case[dti], "%s %s", name, what);
    }
    if (!(ef <= 2.0 * en + slack))
        fail_msg("%s: %s max error %.3g > 2 x naive same-precision %.3g (+ %.2g)", name, what, ef,
                 en, slack);
}

/* Tile pairs the contract's skipping rule visits: per (sequence, head, Q block), the K blocks
 * intersecting the union of its rows' key ranges. */
static int64_t expected_pairs(const mods *m, int64_t B, const int64_t *sq, const int64_t *sk,
                              int64_t Hq, int64_t br, int64_t bc)
{
    int64_t pairs = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i0 = 0; i0 < sq[b]; i0 += br) {
            const int64_t i1 = (i0 + br < sq[b] ? i0 + br : sq[b]) - 1;
            int64_t lo = INT64_MAX, hi = -1;
            for (int64_t i = i0; i <= i1; i++) {
                int64_t l, h;
                key_range(m, sq[b], sk[b], i, &l, &h);
                if (l < h)
                    lo = l < lo ? l : lo, hi = h > hi ? h : hi;
            }
            if (hi > lo)
                pairs += (hi + bc - 1) / bc - lo / bc;
        }
    return pairs * Hq;
}

static void case_name(const shape *s, const mods *m, flashc_dtype dt, char *buf, size_t n)
{
    snprintf(buf, n,
             "%s B%lld Sq%lld Sk%lld H%lld/%lld D%lld Dv%lld br%lld bc%lld causal%d w(%lld,%lld) "
             "cap%g alibi%d scale%s%g",
             dt_name(dt), (long long)s->B, (long long)s->Sq, (long long)s->Sk, (long long)s->Hq,
             (long long)s->Hkv, (long long)s->D, (long long)s->Dv, (long long)s->br,
             (long long)s->bc, m->causal, (long long)m->wl, (long long)m->wr, (double)m->softcap,
             m->alibi, m->has_scale ? "=" : "~", (double)m->scale);
}

static const shape shapes[] = {
    /* B  Sq  Sk Hq Hkv  D  Dv  br  bc */
    {2, 37, 53, 4, 2, 24, 24, 16, 8},  /* Sq != Sk, tiles do not divide, GQA */
    {1, 70, 45, 3, 1, 20, 12, 16, 16}, /* Sq > Sk: rows that see nothing, MQA, Dk != Dv */
    {2, 65, 65, 2, 2, 40, 40, 0, 0},   /* the default tiles, one row more than a tile */
    {1, 1, 37, 2, 1, 16, 8, 0, 0},     /* one query row */
    {1, 29, 31, 6, 3, 12, 20, 7, 5},   /* Dv > Dk, tiny tiles */
    /* bfloat16 only (UNIT_SHAPES): the matrix units' default tiles, 64 x 128 at d 64 and
     * 128 x 128 at d 128, with edge blocks (attn_bwd.c mm_*: bf16 storage) */
    {1, 150, 170, 2, 1, 64, 64, 0, 0},
    {1, 140, 130, 2, 2, 128, 128, 0, 0},
};
enum { UNIT_SHAPES = 2 };

static const mods mod_list[] = {
    /* causal wl  wr  cap  alibi has scale */
    {0, -1, -1, 0.0f, 0, 0, 0.0f},
    {1, -1, -1, 0.0f, 0, 0, 0.0f},
    {0, 0, 0, 0.0f, 0, 0, 0.0f},   /* window (0, 0): the diagonal key only */
    {0, 3, 1, 0.0f, 0, 0, 0.0f},   /* asymmetric */
    {0, -1, 2, 0.0f, 0, 0, 0.0f},
    {0, 5, -1, 0.0f, 0, 0, 0.0f},
    {1, 4, -1, 0.0f, 0, 0, 0.0f},  /* causal sliding window */
    {0, -1, -1, 1.5f, 0, 0, 0.0f}, /* softcap in its nonlinear range */
    {0, -1, -1, 0.0f, 1, 0, 0.0f}, /* ALiBi (Hq) */
    {1, -1, -1, 0.0f, 2, 0, 0.0f}, /* ALiBi (B, Hq), causal */
    {1, 6, -1, 2.0f, 2, 1, 0.7f},  /* everything at once */
    {0, 2, 2, 0.8f, 1, 0, 0.0f},
    {0, -1, -1, 0.0f, 0, 1, 0.0f}, /* softmax_scale = 0: uniform P, dQ = dK = 0 */
    {1, -1, -1, 1.0f, 0, 1, -0.4f},/* a negative scale with softcap */
};

/* Every shape x modifier x dtype against the float64 naive backward. */
static void test_dense_against_reference(void **state)
{
    (void)state;
    static const flashc_dtype dts[] = {FLASHC_F32, FLASHC_BF16, FLASHC_F16};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (size_t mi = 0; mi < sizeof mod_list / sizeof mod_list[0]; mi++)
            for (size_t di = 0; di < 3; di++) {
                if (si + UNIT_SHAPES >= sizeof shapes / sizeof shapes[0] && di != 1)
                    continue;
                const shape *s = &shapes[si];
                const mods *m = &mod_list[mi];
                char name[256];
                case_name(s, m, dts[di], name, sizeof name);
                prob p = make_prob(s, m, dts[di]);
                grads ref = ref_grads(&p), nsp = naive_sp(&p), fl = alloc_grads(&p);
                flashc_attn_stats st = FLASHC_ATTN_STATS_INIT;
                const flashc_status status = flash_grads(&p, 0, NULL, 0, &st, &fl);
                if (status != FLASHC_OK)
                    fail_msg("%s: %s (%s)", name, flashc_status_string(status),
                             flashc_last_error());
                assert_finite("dq", name, fl.dq, p.nq);
                assert_finite("dk", name, fl.dk, p.nk);
                assert_finite("dv", name, fl.dv, p.nv);
                check_rule((int)di, name, "dq", fl.dq, nsp.dq, ref.dq, p.nq);
                check_rule((int)di, name, "dk", fl.dk, nsp.dk, ref.dk, p.nk);
                check_rule((int)di, name, "dv", fl.dv, nsp.dv, ref.dv, p.nv);
                /* rows with an empty key range: dq exactly 0 */
                for (int64_t b = 0; b < s->B; b++)
                    for (int64_t i = 0; i < s->Sq; i++) {
                        int64_t lo, hi;
                        key_range(m, s->Sq, s->Sk, i, &lo, &hi);
                        for (int64_t h = 0; lo >= hi && h < s->Hq; h++)
                            for (int64_t d = 0; d < s->D; d++)
                                if (fl.dq[((b * s->Sq + i) * s->Hq + h) * s->D + d] != 0.0f)
                                    fail_msg("%s: row %lld sees no key but dq != 0", name,
                                             (long long)i);
                    }
                /* the tiles visited: exactly those the key ranges reach */
                int64_t br = st.block_q < s->Sq ? st.block_q : s->Sq;
                int64_t bc = st.block_k < s->Sk ? st.block_k : s->Sk;
                int64_t sq[4], sk[4];
                for (int64_t b = 0; b < s->B; b++)
                    sq[b] = s->Sq, sk[b] = s->Sk;
                const int64_t want = expected_pairs(m, s->B, sq, sk, s->Hq, br, bc);
                if (st.tile_pairs != want)
                    fail_msg("%s: %lld tile pairs, expected %lld", name, (long long)st.tile_pairs,
                             (long long)want);
                assert_int_equal(st.tile_pairs_total,
                                 s->B * s->Hq * ((s->Sq + br - 1) / br) * ((s->Sk + bc - 1) / bc));
                free_grads(&ref), free_grads(&nsp), free_grads(&fl);
                free_prob(&p);
            }
    for (int di = 0; di < 3; di++)
        print_message("worst ratio to the bound (2 x naive + slack): %.3f at %s\n",
                      worst_ratio[di], worst_case[di]);
}

/* A causal sliding window (20 keys) on a longer sequence skips most tiles, and keys outside a
 * row's range, poisoned, never reach its gradients. With 1e4 the poisoned scores become exact
 * zeros of P and dS: the dq of every row that does not see them, and the dk, dv of keys only such
 * rows see, are bit-identical. With NaN the same holds for every Q block whose key union avoids
 * them; the rows of a block that does include them (60..63 share a block with rows that see the
 * NaN keys) take the row-by-row dQ product: finite and equal within rounding (float32: 1e-6;
 * bf16, whose mm path there reads the float32 dS that p_ds_split keeps for such a block, the
 * clean run's split products against those float32 ones, both rounded to bf16: 1e-2). */
static void test_window_skips_and_ignores_outside_keys(void **state)
{
    (void)state;
    const shape s = {1, 300, 300, 2, 1, 16, 16, 32, 32};
    const mods m = {1, 20, -1, 0.0f, 0, 0, 0.0f};
    for (int run = 0; run < 4; run++) {
        const int nan = run & 1;
        const flashc_dtype dt = run < 2 ? FLASHC_F32 : FLASHC_BF16;
        prob p = make_prob(&s, &m, dt);
        grads a = alloc_grads(&p), b = alloc_grads(&p);
        flashc_attn_stats st = FLASHC_ATTN_STATS_INIT;
        TU_OK(flash_grads(&p, 2, NULL, 0, &st, &a));
        assert_true(st.tile_pairs * 4 < st.tile_pairs_total);
        for (int64_t j = 0; j < 40; j++) /* rows >= 60 see keys >= 40 only */
            for (int64_t d = 0; d < s.D; d++) {
                p.k[j * s.D + d] = nan && j % 2 ? NAN : 1e4f;
                p.v[j * s.D + d] = nan && j % 3 == 0 ? NAN : -1e4f;
            }
        TU_OK(flash_grads(&p, 2, NULL, 0, NULL, &b));
        const int64_t row = (int64_t)(s.Hq * s.D);
        const int64_t exact = nan ? 64 : 60; /* NaN: the first Q block whose union is clean */
        for (int64_t i = exact; i < s.Sq; i++)
            assert_memory_equal(a.dq + i * row, b.dq + i * row, (size_t)row * 4);
        assert_finite("dq", "window, poisoned keys", b.dq + 60 * row, (size_t)(s.Sq - 60) * row);
        const double e = norm_err(b.dq + 60 * row, a.dq + 60 * row, (size_t)(4 * row));
        if (!(e < (dt == FLASHC_F32 ? 1e-6 : 1e-2)))
            fail_msg("rows 60..63 with poisoned keys in their block (%s): error %.3g",
                     dt_name(dt), e);
        for (int64_t j = 60; j < s.Sk; j++) { /* keys seen only by rows >= 60 */
            assert_memory_equal(a.dk + j * s.D, b.dk + j * s.D, (size_t)s.D * 4);
            assert_memory_equal(a.dv + j * s.D, b.dv + j * s.D, (size_t)s.D * 4);
        }
        free_grads(&a), free_grads(&b);
        free_prob(&p);
    }
}

/* ---- finite differences --------------------------------------------------------------------- */

/* loss = sum(dO * attention(q, k, v)) in float64 under the problem's modifiers. */
static double loss64(const prob *p, const double *q, const double *k, const double *v)
{
    const shape *s = &p->s;
    const int64_t D = s->D, Dv = s->Dv, group = s->Hq / s->Hkv;
    double loss = 0.0, sc[64], o[16];
    for (int64_t b = 0; b < s->B; b++)
        for (int64_t h = 0; h < s->Hq; h++)
            for (int64_t i = 0; i < s->Sq; i++) {
                int64_t lo, hi;
                key_range(&p->m, s->Sq, s->Sk, i, &lo, &hi);
                if (lo >= hi)
                    continue;
                const double *qi = q + ((b * s->Sq + i) * s->Hq + h) * D;
                double mx = -INFINITY, l = 0.0;
                for (int64_t j = lo; j < hi; j++) {
                    const double *kj = k + ((b * s->Sk + j) * s->Hkv + h / group) * D;
                    double acc = 0.0;
                    for (int64_t d = 0; d < D; d++)
                        acc += qi[d] * kj[d];
                    double u = acc * p->scale;
                    if (p->m.softcap > 0.0f)
                        u = p->m.softcap * tanh(u / p->m.softcap);
                    if (p->m.alibi) {
                        const int64_t a = i + s->Sk - s->Sq;
                        u -= (double)slope_of(p, b, h) * (double)(a > j ? a - j : j - a);
                    }
                    sc[j] = u;
                    mx = u > mx ? u : mx;
                }
                for (int64_t d = 0; d < Dv; d++)
                    o[d] = 0.0;
                for (int64_t j = lo; j < hi; j++) {
                    const double e = exp(sc[j] - mx);
                    const double *vj = v + ((b * s->Sk + j) * s->Hkv + h / group) * Dv;
                    l += e;
                    for (int64_t d = 0; d < Dv; d++)
                        o[d] += e * vj[d];
                }
                for (int64_t d = 0; d < Dv; d++)
                    loss += p->dout[((b * s->Sq + i) * s->Hq + h) * Dv + d] * o[d] / l;
            }
    return loss;
}

static void fd_grad(const prob *p, double *q, double *k, double *v, double *x, size_t n,
                    double *g)
{
    const double eps = 1e-5;
    for (size_t i = 0; i < n; i++) {
        const double x0 = x[i];
        x[i] = x0 + eps;
        const double lp = loss64(p, q, k, v);
        x[i] = x0 - eps;
        const double lm = loss64(p, q, k, v);
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
    static const struct {
        shape s;
        mods m;
    } cases[] = {
        {{1, 4, 6, 2, 1, 3, 2, 2, 2}, {0, -1, -1, 0.9f, 0, 1, 1.3f}},  /* softcap */
        {{1, 5, 5, 2, 2, 3, 4, 2, 2}, {0, 1, 1, 0.0f, 0, 0, 0.0f}},    /* window (1, 1) */
        {{2, 6, 4, 2, 1, 2, 3, 3, 2}, {0, 0, 1, 0.0f, 0, 0, 0.0f}},    /* (0, 1), Sq > Sk */
        {{1, 5, 7, 2, 1, 3, 3, 2, 3}, {1, 2, -1, 1.2f, 2, 1, 0.8f}},  /* all of them */
        {{1, 4, 4, 2, 1, 3, 2, 2, 2}, {0, -1, -1, 0.0f, 1, 0, 0.0f}}, /* ALiBi: no gradient */
    };
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        prob p = make_prob(&cases[t].s, &cases[t].m, FLASHC_F32);
        double *q = xmalloc(p.nq * 8), *k = xmalloc(p.nk * 8), *v = xmalloc(p.nv * 8);
        double *gq = xmalloc(p.nq * 8), *gk = xmalloc(p.nk * 8), *gv = xmalloc(p.nv * 8);
        for (size_t i = 0; i < p.nq; i++)
            q[i] = p.q[i];
        for (size_t i = 0; i < p.nk; i++)
            k[i] = p.k[i];
        for (size_t i = 0; i < p.nv; i++)
            v[i] = p.v[i];
        fd_grad(&p, q, k, v, q, p.nq, gq);
        fd_grad(&p, q, k, v, k, p.nk, gk);
        fd_grad(&p, q, k, v, v, p.nv, gv);
        grads g = alloc_grads(&p);
        TU_OK(flash_grads(&p, 0, NULL, 0, NULL, &g));
        const double eq = err_vs64(g.dq, gq, p.nq), ek = err_vs64(g.dk, gk, p.nk),
                     ev = err_vs64(g.dv, gv, p.nv);
        if (!(eq < 1e-5 && ek < 1e-5 && ev < 1e-5))
            fail_msg("case %zu: errors vs finite differences dq %.3g dk %.3g dv %.3g", t, eq, ek,
                     ev);
        free_grads(&g);
        free(q), free(k), free(v), free(gq), free(gk), free(gv);
        free_prob(&p);
    }
}

/* ---- determinism and the workspace -------------------------------------------------------- */

static void assert_same(const prob *p, const grads *a, const grads *b)
{
    assert_memory_equal(a->dq, b->dq, p->nq * 4);
    assert_memory_equal(a->dk, b->dk, p->nk * 4);
    assert_memory_equal(a->dv, b->dv, p->nv * 4);
}

/* Bit-identical for 1, 2 and 3 threads (the fused and split schedules), with modifiers and in
 * every dtype; with the caller's workspace the same bits and no allocation at all. */
static void test_threads_and_workspace(void **state)
{
    (void)state;
    static const shape ss[] = {
        {1, 77, 93, 2, 1, 24, 16, 16, 8}, /* B Hkv = 1: fused on one thread, split on more */
        {2, 61, 50, 4, 2, 16, 16, 8, 16},
    };
    static const mods ms[] = {{1, 9, -1, 1.5f, 2, 0, 0.0f}, {0, 3, 5, 0.0f, 1, 0, 0.0f}};
    static const flashc_dtype dts[] = {FLASHC_F32, FLASHC_BF16, FLASHC_F16};
    for (size_t si = 0; si < 2; si++)
        for (size_t mi = 0; mi < 2; mi++)
            for (size_t di = 0; di < 3; di++) {
                prob p = make_prob(&ss[si], &ms[mi], dts[di]);
                grads one = alloc_grads(&p), g = alloc_grads(&p);
                TU_OK(flash_grads(&p, 1, NULL, 0, NULL, &one));
                for (int th = 1; th <= 3; th++) {
                    TU_OK(flash_grads(&p, th, NULL, 0, NULL, &g));
                    assert_same(&p, &one, &g);
                }
                /* the caller's workspace, of exactly the queried size, misaligned by 4 bytes */
                const shape *s = &p.s;
                flashc_attn_params pr;
                set_params(&pr, &p.m, s->br, s->bc, &p.talibi);
                pr.num_threads = 2;
                const flashc_dtype dt = p.dt;
                void *bq = to_dtype(dt, p.q, p.nq), *bk = to_dtype(dt, p.k, p.nk);
                void *bv = to_dtype(dt, p.v, p.nv), *bo = to_dtype(dt, p.o, p.no);
                void *bdo = to_dtype(dt, p.dout, p.no);
                const size_t es = flashc_dtype_size(dt);
                void *bdq = xmalloc(p.nq * es), *bdk = xmalloc(p.nk * es);
                void *bdv = xmalloc(p.nv * es);
                flashc_tensor q = t4(bq, dt, s->B, s->Sq, s->Hq, s->D);
                flashc_tensor k = t4(bk, dt, s->B, s->Sk, s->Hkv, s->D);
                flashc_tensor v = t4(bv, dt, s->B, s->Sk, s->Hkv, s->Dv);
                flashc_tensor o = t4(bo, dt, s->B, s->Sq, s->Hq, s->Dv);
                flashc_tensor dout = t4(bdo, dt, s->B, s->Sq, s->Hq, s->Dv);
                flashc_tensor l = flashc_tensor_3d(p.lse, FLASHC_F32, s->B, s->Hq, s->Sq);
                flashc_tensor dq = t4(bdq, dt, s->B, s->Sq, s->Hq, s->D);
                flashc_tensor dk = t4(bdk, dt, s->B, s->Sk, s->Hkv, s->D);
                flashc_tensor dv = t4(bdv, dt, s->B, s->Sk, s->Hkv, s->Dv);
                size_t bytes = 0;
                TU_OK(flashc_attn_bwd_workspace_size(&pr, &q, &k, &v, &o, &dout, &l, &dq, &dk,
                                                     &dv, &bytes));
                assert_true(bytes > 0);
                char *ws = xmalloc(bytes + 4);
                pr.workspace = ws + 4, pr.workspace_bytes = bytes;
                flashc_mem_reset_peak();
                const int64_t before = flashc_mem_get().current_bytes;
                flashc_attn_stats st = FLASHC_ATTN_STATS_INIT;
                TU_OK(flashc_attn_bwd(&pr, &q, &k, &v, &o, &dout, &l, &dq, &dk, &dv, &st));
                assert_int_equal(flashc_mem_get().alloc_count, 0);
                assert_int_equal(flashc_mem_get().peak_bytes, before);
                assert_int_equal(st.workspace_bytes, (int64_t)bytes);
                from_dtype(dt, bdq, g.dq, p.nq), from_dtype(dt, bdk, g.dk, p.nk);
                from_dtype(dt, bdv, g.dv, p.nv);
                assert_same(&p, &one, &g);
                /* one byte short: refused before anything is written */
                pr.workspace_bytes = bytes - 1;
                memset(bdq, 0x5a, p.nq * es);
                assert_int_equal(
                    flashc_attn_bwd(&pr, &q, &k, &v, &o, &dout, &l, &dq, &dk, &dv, NULL),
                    FLASHC_ERR_INVALID_ARGUMENT);
                for (size_t x = 0; x < p.nq * es; x++)
                    assert_int_equal(((unsigned char *)bdq)[x], 0x5a);
                free(ws);
                free(bq), free(bk), free(bv), free(bo), free(bdo), free(bdq), free(bdk), free(bdv);
                free_grads(&one), free_grads(&g);
                free_prob(&p);
            }
}

/* ---- varlen --------------------------------------------------------------------------------- */

typedef struct vprob {
    int64_t B, Hq, Hkv, D, Dv, Tq, Tk, br, bc;  /* Tq, Tk: packed rows (>= cu[B]) */
    int32_t cuq[8], cuk[8];
    int64_t maxq, maxk;
    mods m;
    flashc_dtype dt;
    float *q, *k, *v, *o, *dout, *lse, *slopes;
    flashc_tensor talibi, tcuq, tcuk;
    flashc_varlen vl;
} vprob;

static void vparams(const vprob *p, flashc_attn_params *pr)
{
    set_params(pr, &p->m, p->br, p->bc, &p->talibi);
}

/* q/o-side (rows, heads, dim) tensor */
static flashc_tensor t3(void *d, flashc_dtype dt, int64_t T, int64_t H, int64_t D)
{
    return flashc_tensor_3d(d, dt, T, H, D);
}

static vprob make_vprob(int64_t B, const int64_t *lq, const int64_t *lk, int64_t extra_q,
                        int64_t extra_k, int64_t Hq, int64_t Hkv, int64_t D, int64_t Dv,
                        int64_t br, int64_t bc, const mods *m, flashc_dtype dt)
{
    vprob p;
    memset(&p, 0, sizeof p);
    p.B = B, p.Hq = Hq, p.Hkv = Hkv, p.D = D, p.Dv = Dv, p.br = br, p.bc = bc, p.m = *m, p.dt = dt;
    for (int64_t b = 0; b < B; b++) {
        p.cuq[b + 1] = p.cuq[b] + (int32_t)lq[b];
        p.cuk[b + 1] = p.cuk[b] + (int32_t)lk[b];
        p.maxq = lq[b] > p.maxq ? lq[b] : p.maxq;
        p.maxk = lk[b] > p.maxk ? lk[b] : p.maxk;
    }
    p.maxq += 3; /* an upper bound, not the exact maximum */
    p.Tq = p.cuq[B] + extra_q, p.Tk = p.cuk[B] + extra_k;
    p.q = tu_alloc_normal(p.Tq * Hq * D, 1.0f), p.k = tu_alloc_normal(p.Tk * Hkv * D, 1.0f);
    p.v = tu_alloc_normal(p.Tk * Hkv * Dv, 1.0f), p.dout = tu_alloc_normal(p.Tq * Hq * Dv, 1.0f);
    round_all(dt, p.q, (size_t)(p.Tq * Hq * D)), round_all(dt, p.k, (size_t)(p.Tk * Hkv * D));
    round_all(dt, p.v, (size_t)(p.Tk * Hkv * Dv));
    round_all(dt, p.dout, (size_t)(p.Tq * Hq * Dv));
    p.o = xmalloc((size_t)(p.Tq * Hq * Dv) * 4), p.lse = xmalloc((size_t)(Hq * p.Tq) * 4);
    p.slopes = xmalloc((size_t)(B * Hq) * 4);
    for (int64_t x = 0; x < B * Hq; x++)
        p.slopes[x] = (float)(0.05 + 0.5 * tu_uniform());
    p.talibi = m->alibi == 2 ? flashc_tensor_2d(p.slopes, FLASHC_F32, B, Hq)
                             : flashc_tensor_1d(p.slopes, FLASHC_F32, Hq);
    p.tcuq = flashc_tensor_1d(p.cuq, FLASHC_I32, B + 1);
    p.tcuk = flashc_tensor_1d(p.cuk, FLASHC_I32, B + 1);
    p.vl.struct_size = sizeof p.vl;
    p.vl.max_seqlen_q = p.maxq, p.vl.max_seqlen_k = p.maxk;
    return p;
}

static void vfix(vprob *p) /* the varlen struct points into p: set after every copy */
{
    p->tcuq.data = p->cuq, p->tcuk.data = p->cuk;
    p->vl.cu_seqlens_q = &p->tcuq, p->vl.cu_seqlens_k = &p->tcuk;
    p->talibi.data = p->slopes;
}

/* o, lse from the reference forward (the "ref" row through the public varlen entry point). */
static void vforward(vprob *p)
{
    vfix(p);
    flashc_attn_params pr;
    vparams(p, &pr);
    flashc_tensor q = t3(p->q, FLASHC_F32, p->Tq, p->Hq, p->D);
    flashc_tensor k = t3(p->k, FLASHC_F32, p->Tk, p->Hkv, p->D);
    flashc_tensor v = t3(p->v, FLASHC_F32, p->Tk, p->Hkv, p->Dv);
    flashc_tensor o = t3(p->o, FLASHC_F32, p->Tq, p->Hq, p->Dv);
    flashc_tensor l = flashc_tensor_2d(p->lse, FLASHC_F32, p->Hq, p->Tq);
    attn_force_backend("ref");
    const flashc_status st = flashc_attn_varlen_fwd(&pr, &p->vl, &q, &k, &v, &o, &l, NULL);
    attn_force_backend(NULL);
    TU_OK(st);
    round_all(p->dt, p->o, (size_t)(p->Tq * p->Hq * p->Dv));
}

typedef struct vgrads {
    float *dq, *dk, *dv;
} vgrads;

/* The varlen backward of backend ("cpu", "ref") in the storage dtype; gradients as float32. */
static vgrads vbackward(vprob *p, const char *backend, int threads, int use_ws)
{
    vfix(p);
    const flashc_dtype dt = p->dt;
    const size_t es = flashc_dtype_size(dt);
    const size_t nq = (size_t)(p->Tq * p->Hq * p->D), nk = (size_t)(p->Tk * p->Hkv * p->D);
    const size_t nv = (size_t)(p->Tk * p->Hkv * p->Dv), no = (size_t)(p->Tq * p->Hq * p->Dv);
    flashc_attn_params pr;
    vparams(p, &pr);
    pr.num_threads = threads;
    void *bq = to_dtype(dt, p->q, nq), *bk = to_dtype(dt, p->k, nk), *bv = to_dtype(dt, p->v, nv);
    void *bo = to_dtype(dt, p->o, no), *bdo = to_dtype(dt, p->dout, no);
    void *bdq = xmalloc(nq * es), *bdk = xmalloc(nk * es), *bdv = xmalloc(nv * es);
    memset(bdq, 0xff, nq * es), memset(bdk, 0xff, nk * es), memset(bdv, 0xff, nv * es);
    flashc_tensor q = t3(bq, dt, p->Tq, p->Hq, p->D), k = t3(bk, dt, p->Tk, p->Hkv, p->D);
    flashc_tensor v = t3(bv, dt, p->Tk, p->Hkv, p->Dv), o = t3(bo, dt, p->Tq, p->Hq, p->Dv);
    flashc_tensor dout = t3(bdo, dt, p->Tq, p->Hq, p->Dv);
    flashc_tensor l = flashc_tensor_2d(p->lse, FLASHC_F32, p->Hq, p->Tq);
    flashc_tensor dq = t3(bdq, dt, p->Tq, p->Hq, p->D), dk = t3(bdk, dt, p->Tk, p->Hkv, p->D);
    flashc_tensor dv = t3(bdv, dt, p->Tk, p->Hkv, p->Dv);
    void *ws = NULL;
    if (use_ws) {
        size_t bytes = 0;
        TU_OK(flashc_attn_varlen_bwd_workspace_size(&pr, &p->vl, &q, &k, &v, &o, &dout, &l, &dq,
                                                    &dk, &dv, &bytes));
        ws = xmalloc(bytes);
        pr.workspace = ws, pr.workspace_bytes = bytes;
        flashc_mem_reset_peak();
    }
    attn_force_backend(backend);
    const flashc_status st =
        flashc_attn_varlen_bwd(&pr, &p->vl, &q, &k, &v, &o, &dout, &l, &dq, &dk, &dv, NULL);
    attn_force_backend(NULL);
    TU_OK(st);
    if (use_ws)
        assert_int_equal(flashc_mem_get().alloc_count, 0);
    vgrads g = {xmalloc(nq * 4), xmalloc(nk * 4), xmalloc(nv * 4)};
    from_dtype(dt, bdq, g.dq, nq), from_dtype(dt, bdk, g.dk, nk), from_dtype(dt, bdv, g.dv, nv);
    free(ws);
    free(bq), free(bk), free(bv), free(bo), free(bdo), free(bdq), free(bdk), free(bdv);
    return g;
}

static void free_vgrads(vgrads *g) { free(g->dq), free(g->dk), free(g->dv); }

static void free_vprob(vprob *p)
{
    free(p->q), free(p->k), free(p->v), free(p->o), free(p->dout), free(p->lse), free(p->slopes);
}

static double norm_err(const float *a, const float *b, size_t n)
{
    return max_err(a, b, n) / (max_abs(b, n) > 1.0 ? max_abs(b, n) : 1.0);
}

/* Sequence b alone through the dense backward (B = 1 views into the packed buffers); its
 * gradients must equal the varlen call's rows bit for bit. */
static void check_alone(vprob *p, const vgrads *vg, int64_t b)
{
    const int64_t sq = p->cuq[b + 1] - p->cuq[b], sk = p->cuk[b + 1] - p->cuk[b];
    const int64_t Hq = p->Hq, Hkv = p->Hkv, D = p->D, Dv = p->Dv;
    const flashc_dtype dt = p->dt;
    const size_t es = flashc_dtype_size(dt);
    if (sq == 0 || sk == 0) { /* nothing to attend: zero gradients on the side that exists */
        for (int64_t x = p->cuq[b] * Hq * D; x < p->cuq[b + 1] * Hq * D; x++)
            assert_true(vg->dq[x] == 0.0f);
        for (int64_t x = p->cuk[b] * Hkv * D; x < p->cuk[b + 1] * Hkv * D; x++)
            assert_true(vg->dk[x] == 0.0f);
        for (int64_t x = p->cuk[b] * Hkv * Dv; x < p->cuk[b + 1] * Hkv * Dv; x++)
            assert_true(vg->dv[x] == 0.0f);
        return;
    }
    const size_t nq = (size_t)(sq * Hq * D), nk = (size_t)(sk * Hkv * D);
    const size_t nv = (size_t)(sk * Hkv * Dv), no = (size_t)(sq * Hq * Dv);
    void *bq = to_dtype(dt, p->q + p->cuq[b] * Hq * D, nq);
    void *bk = to_dtype(dt, p->k + p->cuk[b] * Hkv * D, nk);
    void *bv = to_dtype(dt, p->v + p->cuk[b] * Hkv * Dv, nv);
    void *bo = to_dtype(dt, p->o + p->cuq[b] * Hq * Dv, no);
    void *bdo = to_dtype(dt, p->dout + p->cuq[b] * Hq * Dv, no);
    float *lse = xmalloc((size_t)(Hq * sq) * 4);
    for (int64_t h = 0; h < Hq; h++)
        for (int64_t i = 0; i < sq; i++)
            lse[h * sq + i] = p->lse[h * p->Tq + p->cuq[b] + i];
    void *bdq = xmalloc(nq * es), *bdk = xmalloc(nk * es), *bdv = xmalloc(nv * es);
    flashc_attn_params pr;
    vparams(p, &pr);
    flashc_tensor alibi = flashc_tensor_1d(p->slopes + (p->m.alibi == 2 ? b * Hq : 0),
                                           FLASHC_F32, Hq);
    pr.alibi_slopes = p->m.alibi ? &alibi : NULL;
    flashc_tensor q = t4(bq, dt, 1, sq, Hq, D), k = t4(bk, dt, 1, sk, Hkv, D);
    flashc_tensor v = t4(bv, dt, 1, sk, Hkv, Dv), o = t4(bo, dt, 1, sq, Hq, Dv);
    flashc_tensor dout = t4(bdo, dt, 1, sq, Hq, Dv);
    flashc_tensor l = flashc_tensor_3d(lse, FLASHC_F32, 1, Hq, sq);
    flashc_tensor dq = t4(bdq, dt, 1, sq, Hq, D), dk = t4(bdk, dt, 1, sk, Hkv, D);
    flashc_tensor dv = t4(bdv, dt, 1, sk, Hkv, Dv);
    TU_OK(flashc_attn_bwd(&pr, &q, &k, &v, &o, &dout, &l, &dq, &dk, &dv, NULL));
    float *g = xmalloc((nq > nv ? (nq > nk ? nq : nk) : (nv > nk ? nv : nk)) * 4);
    from_dtype(dt, bdq, g, nq);
    if (memcmp(g, vg->dq + p->cuq[b] * Hq * D, nq * 4) != 0)
        fail_msg("sequence %lld: varlen dq differs from the sequence alone", (long long)b);
    from_dtype(dt, bdk, g, nk);
    if (memcmp(g, vg->dk + p->cuk[b] * Hkv * D, nk * 4) != 0)
        fail_msg("sequence %lld: varlen dk differs from the sequence alone", (long long)b);
    from_dtype(dt, bdv, g, nv);
    if (memcmp(g, vg->dv + p->cuk[b] * Hkv * Dv, nv * 4) != 0)
        fail_msg("sequence %lld: varlen dv differs from the sequence alone", (long long)b);
    free(g), free(lse);
    free(bq), free(bk), free(bv), free(bo), free(bdo), free(bdq), free(bdk), free(bdv);
}

static void test_varlen(void **state)
{
    (void)state;
    /* mixed lengths: zero-length q, k and both, one-row sequences, Sq > Sk, Sq < Sk */
    static const int64_t lq[6] = {5, 0, 37, 1, 20, 0};
    static const int64_t lk[6] = {9, 4, 0, 1, 33, 0};
    static const mods ms[] = {
        {0, -1, -1, 0.0f, 0, 0, 0.0f}, {1, -1, -1, 0.0f, 0, 0, 0.0f},
        {0, 3, 1, 1.5f, 0, 0, 0.0f},   {1, -1, -1, 0.0f, 2, 0, 0.0f},
        {1, 6, -1, 2.0f, 1, 1, 0.6f},  {0, 0, 0, 0.0f, 0, 0, 0.0f},
    };
    static const flashc_dtype dts[] = {FLASHC_F32, FLASHC_BF16, FLASHC_F16};
    for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
        for (size_t di = 0; di < 3; di++) {
            const int64_t Dv = mi % 2 ? 12 : 16; /* Dk != Dv in half of the cases */
            vprob p = make_vprob(6, lq, lk, 3, 2, 4, 2, 16, Dv, 8, 8, &ms[mi], dts[di]);
            vforward(&p);
            vgrads fl = vbackward(&p, "cpu", 2, 0);
            vgrads ref = vbackward(&p, "ref", 2, 0);
            const size_t nq = (size_t)(p.Tq * p.Hq * p.D), nk = (size_t)(p.Tk * p.Hkv * p.D);
            const size_t nv = (size_t)(p.Tk * p.Hkv * p.Dv);
            assert_finite("dq", "varlen", fl.dq, nq);
            assert_finite("dk", "varlen", fl.dk, nk);
            assert_finite("dv", "varlen", fl.dv, nv);
            /* the bf16/f16 rule is checked on the dense cases, which this equals bit for bit */
            const double tol = dts[di] == FLASHC_F32 ? 1e-5 : dts[di] == FLASHC_F16 ? 2e-2 : 1e-1;
            const double eq = norm_err(fl.dq, ref.dq, nq), ek = norm_err(fl.dk, ref.dk, nk),
                         ev = norm_err(fl.dv, ref.dv, nv);
            if (!(eq < tol && ek < tol && ev < tol))
                fail_msg("varlen mods %zu %s: errors dq %.3g dk %.3g dv %.3g", mi,
                         dt_name(dts[di]), eq, ek, ev);
            for (int64_t b = 0; b < p.B; b++)
                check_alone(&p, &fl, b);
            /* rows past cu[B]: zero */
            for (int64_t x = p.cuq[p.B] * p.Hq * p.D; x < (int64_t)nq; x++)
                assert_true(fl.dq[x] == 0.0f);
            for (int64_t x = p.cuk[p.B] * p.Hkv * p.D; x < (int64_t)nk; x++)
                assert_true(fl.dk[x] == 0.0f);
            /* threads 1 and 3, and the caller's workspace: the same bits, no allocation */
            for (int th = 1; th <= 3; th += 2) {
                vgrads g = vbackward(&p, "cpu", th, th == 3);
                assert_memory_equal(g.dq, fl.dq, nq * 4);
                assert_memory_equal(g.dk, fl.dk, nk * 4);
                assert_memory_equal(g.dv, fl.dv, nv * 4);
                free_vgrads(&g);
            }
            free_vgrads(&fl), free_vgrads(&ref);
            free_vprob(&p);
        }
}

/* Every sequence empty on one side: nothing to attend, every gradient zero, no hang. */
static void test_varlen_all_empty(void **state)
{
    (void)state;
    static const int64_t lq[3] = {0, 4, 0}, lk[3] = {3, 0, 0};
    const mods m = {1, -1, -1, 0.0f, 0, 0, 0.0f};
    vprob p = make_vprob(3, lq, lk, 1, 1, 2, 1, 8, 8, 0, 0, &m, FLASHC_F32);
    vforward(&p);
    vgrads g = vbackward(&p, "cpu", 2, 1);
    for (int64_t x = 0; x < p.Tq * p.Hq * p.D; x++)
        assert_true(g.dq[x] == 0.0f);
    for (int64_t x = 0; x < p.Tk * p.Hkv * p.D; x++)
        assert_true(g.dk[x] == 0.0f && g.dv[x] == 0.0f);
    free_vgrads(&g);
    free_vprob(&p);
}

int main(void)
{
    tu_seed_from_env();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dense_against_reference),
        cmocka_unit_test(test_window_skips_and_ignores_outside_keys),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_threads_and_workspace),
        cmocka_unit_test(test_varlen),
        cmocka_unit_test(test_varlen_all_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
