/* test_rope.c — rotary embedding (flashc_rope, flashc_rope_bwd) against the float64 reference
 * (flashc_rope_naive): both styles, tables and computed angles, positions and offsets, partial
 * rotary_dim, GQA-shaped k, a (B, H, S, D) view and a feature stride of 2, float32 / bfloat16 /
 * float16 storage. float32: |diff| <= 2e-6 (1 + |ref|); 16-bit: FlashAttention's rule, the
 * error against the exact result at most 2x that of a naive same-precision rotation (cos, sin,
 * both products and the sum rounded to the storage type). Features past rotary_dim must be
 * bit-identical; the backward must undo the forward. */
#include "common.h"
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct rope_case {
    int64_t B, S, H, Hk, D, rd;
    int style, tables, use_pos, layout; /* layout 0 (B,S,H,D), 1 (B,H,S,D), 2 feature stride 2 */
    int64_t offset;
} rope_case;

static float rnd(flashc_dtype dt, float x)
{
    float h; /* room for any dtype */
    if (dt == FLASHC_F32)
        return x;
    flashc__store(&h, dt, 0, x);
    return flashc__load(&h, dt, 0);
}

static flashc_tensor view(void *buf, flashc_dtype dt, const rope_case *c, int64_t H, int64_t *n)
{
    flashc_tensor t = flashc_tensor_4d(buf, dt, c->B, c->S, H, c->D);
    if (c->layout == 1)
        t.stride[0] = H * c->S * c->D, t.stride[1] = c->D, t.stride[2] = c->S * c->D;
    if (c->layout == 2)
        t.stride[3] = 2, t.stride[2] = 2 * c->D, t.stride[1] = 2 * c->D * H,
        t.stride[0] = 2 * c->D * H * c->S;
    *n = c->B * c->S * H * c->D * (c->layout == 2 ? 2 : 1);
    return t;
}

static int64_t at(const flashc_tensor *t, int64_t b, int64_t s, int64_t h, int64_t d)
{
    return b * t->stride[0] + s * t->stride[1] + h * t->stride[2] + d * t->stride[3];
}

static void *alloc_typed(int64_t n, flashc_dtype dt)
{
    void *p = malloc((size_t)(n > 0 ? n : 1) * flashc_dtype_size(dt));
    assert_non_null(p);
    return p;
}

typedef struct angles {
    int64_t P;
    float *cos, *sin; /* (P, rd/2) */
    int32_t *pos;     /* (B, S) */
} angles;

static angles make_angles(const rope_case *c)
{
    angles a = {0};
    a.P = c->S + c->offset + 40;
    a.cos = alloc_typed(a.P * (c->rd / 2), FLASHC_F32);
    a.sin = alloc_typed(a.P * (c->rd / 2), FLASHC_F32);
    for (int64_t p = 0; p < a.P; p++)
        for (int64_t i = 0; i < c->rd / 2; i++) {
            const double ang = (double)p * pow(10000.0, -2.0 * (double)i / (double)c->rd);
            a.cos[p * (c->rd / 2) + i] = (float)cos(ang);
            a.sin[p * (c->rd / 2) + i] = (float)sin(ang);
        }
    a.pos = alloc_typed(c->B * c->S, FLASHC_F32);
    for (int64_t i = 0; i < c->B * c->S; i++) /* computed angles: large positions too */
        a.pos[i] = (int32_t)(tu_uniform() * (double)(c->tables ? a.P : 200000));
    return a;
}

static flashc_rope_params params_of(const rope_case *c, const angles *a)
{
    flashc_rope_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.style = (flashc_rope_style)c->style;
    p.rotary_dim = c->rd == c->D ? 0 : c->rd;
    p.positions = c->use_pos ? a->pos : NULL;
    p.pos_offset = c->offset;
    return p;
}

/* The angle of pair i of token (b, s), as the naive rotation sees it. */
static void angle_of(const rope_case *c, const angles *a, int64_t b, int64_t s, int64_t i,
                     double *cs, double *sn)
{
    const int64_t pos = c->use_pos ? a->pos[b * c->S + s] : s + c->offset;
    if (c->tables) {
        *cs = a->cos[pos * (c->rd / 2) + i], *sn = a->sin[pos * (c->rd / 2) + i];
    } else {
        const double ang = (double)pos * pow(10000.0, -2.0 * (double)i / (double)c->rd);
        *cs = cos(ang), *sn = sin(ang);
    }
}

/* Naive same-precision rotation of t (storage dt) in place. */
static void naive_lowp(const rope_case *c, const angles *a, flashc_dtype dt, flashc_tensor *t,
                       int64_t H)
{
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t s = 0; s < c->S; s++)
            for (int64_t i = 0; i < c->rd / 2; i++) {
                double cd, sd;
                angle_of(c, a, b, s, i, &cd, &sd);
                const float cs = rnd(dt, (float)cd), sn = rnd(dt, (float)sd);
                const int64_t i0 = c->style ? 2 * i : i, i1 = c->style ? 2 * i + 1 : i + c->rd / 2;
                for (int64_t h = 0; h < H; h++) {
                    const int64_t o0 = at(t, b, s, h, i0), o1 = at(t, b, s, h, i1);
                    const float x0 = flashc__load(t->data, dt, o0), x1 = flashc__load(t->data, dt, o1);
                    flashc__store(t->data, dt, o0, rnd(dt, rnd(dt, x0 * cs) - rnd(dt, x1 * sn)));
                    flashc__store(t->data, dt, o1, rnd(dt, rnd(dt, x1 * cs) + rnd(dt, x0 * sn)));
                }
            }
}

/* max over the rotated features of |got - ref| (f32: / (1 + |ref|)); features past rd must
 * equal orig exactly. */
static double errors(const rope_case *c, flashc_dtype dt, const flashc_tensor *got,
                     const flashc_tensor *ref, const flashc_tensor *orig, int64_t H, int rel)
{
    double worst = 0.0;
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t s = 0; s < c->S; s++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t d = 0; d < c->D; d++) {
                    const int64_t o = at(got, b, s, h, d);
                    const float g = flashc__load(got->data, dt, o);
                    if (d >= c->rd) {
                        assert_true(memcmp((char *)got->data + o * flashc_dtype_size(dt),
                                           (char *)orig->data + o * flashc_dtype_size(dt),
                                           flashc_dtype_size(dt)) == 0);
                        continue;
                    }
                    const double r = ((float *)ref->data)[o];
                    double e = fabs((double)g - r) / (rel ? 1.0 + fabs(r) : 1.0);
                    if (!(e <= worst))
                        worst = e; /* NaN sticks */
                }
    return worst;
}

static void run_case(const rope_case *c, flashc_dtype dt, int bwd)
{
    int64_t nq, nk;
    flashc_tensor q = view(NULL, dt, c, c->H, &nq), k = view(NULL, dt, c, c->Hk, &nk);
    q.data = alloc_typed(nq, dt), k.data = alloc_typed(nk, dt);
    flashc_tensor q0 = q, k0 = k, q2 = q, k2 = k; /* original, naive same-precision */
    q0.data = alloc_typed(nq, dt), k0.data = alloc_typed(nk, dt);
    q2.data = alloc_typed(nq, dt), k2.data = alloc_typed(nk, dt);
    flashc_tensor qf = q, kf = k; /* exact: float32 widened, through the float64 reference */
    qf.dtype = kf.dtype = FLASHC_F32;
    qf.data = alloc_typed(nq, FLASHC_F32), kf.data = alloc_typed(nk, FLASHC_F32);
    for (int t = 0; t < 2; t++) {
        flashc_tensor *x = t ? &k : &q, *x0 = t ? &k0 : &q0, *x2 = t ? &k2 : &q2, *xf = t ? &kf : &qf;
        const int64_t n = t ? nk : nq;
        for (int64_t i = 0; i < n; i++) {
            const float v = rnd(dt, (float)tu_normal() * 2.0f);
            flashc__store(x->data, dt, i, v), flashc__store(x0->data, dt, i, v);
            flashc__store(x2->data, dt, i, v), ((float *)xf->data)[i] = v;
        }
    }
    angles a = make_angles(c);
    flashc_rope_params p = params_of(c, &a);
    flashc_tensor tc = flashc_tensor_2d(a.cos, FLASHC_F32, a.P, c->rd / 2);
    flashc_tensor ts = flashc_tensor_2d(a.sin, FLASHC_F32, a.P, c->rd / 2);
    const flashc_tensor *pc = c->tables ? &tc : NULL, *ps = c->tables ? &ts : NULL;
    if (bwd)
        TU_OK(flashc_rope_bwd(&p, &q, &k, pc, ps));
    else
        TU_OK(flashc_rope(&p, &q, &k, pc, ps));
    TU_OK(flashc_rope_naive(&p, &qf, &kf, pc, ps, bwd));
    const int rel = dt == FLASHC_F32;
    const double eq = errors(c, dt, &q, &qf, &q0, c->H, rel), ek = errors(c, dt, &k, &kf, &k0, c->Hk, rel);
    if (dt == FLASHC_F32) {
        if (!(eq <= 2e-6 && ek <= 2e-6))
            print_error("f32 style %d tables %d: err q %.3g k %.3g\n", c->style, c->tables, eq, ek);
        assert_true(eq <= 2e-6 && ek <= 2e-6);
        /* the backward undoes the forward */
        if (!bwd) {
            TU_OK(flashc_rope_bwd(&p, &q, &k, pc, ps));
            assert_true(errors(c, dt, &q, &q0, &q0, c->H, 1) <= 0.0 + 4e-6);
        }
    } else if (!bwd) {
        naive_lowp(c, &a, dt, &q2, c->H);
        naive_lowp(c, &a, dt, &k2, c->Hk);
        const double nq_err = errors(c, dt, &q2, &qf, &q0, c->H, 0);
        const double nk_err = errors(c, dt, &k2, &kf, &k0, c->Hk, 0);
        if (!(eq <= 2.0 * nq_err && ek <= 2.0 * nk_err))
            print_error("dtype %d style %d: err q %.3g (naive %.3g) k %.3g (naive %.3g)\n", (int)dt,
                        c->style, eq, nq_err, ek, nk_err);
        assert_true(eq <= 2.0 * nq_err && ek <= 2.0 * nk_err);
    } else { /* backward in 16 bits: one rounding of the exact result */
        const double u = dt == FLASHC_BF16 ? 0x1p-8 : 0x1p-11;
        assert_true(errors(c, dt, &q, &qf, &q0, c->H, 1) <= 2.0 * u * 8.0);
    }
    free(q.data), free(k.data), free(q0.data), free(k0.data), free(q2.data), free(k2.data);
    free(qf.data), free(kf.data), free(a.cos), free(a.sin), free(a.pos);
}

static const rope_case cases[] = {
    /* B  S   H Hk  D   rd style tables pos layout offset */
    {2, 37, 3, 1, 64, 64, 0, 1, 0, 0, 0},
    {2, 37, 3, 1, 64, 64, 1, 1, 1, 0, 0},
    {1, 50, 4, 2, 128, 64, 0, 0, 1, 0, 0},
    {1, 50, 4, 2, 128, 64, 1, 0, 0, 1, 7},
    {3, 9, 2, 2, 6, 4, 0, 1, 0, 2, 5},
    {1, 5, 1, 1, 2, 2, 1, 0, 1, 2, 0},
    {1, 17, 8, 1, 80, 80, 0, 0, 0, 0, 100000},
};

static void test_rope_all(void **state)
{
    (void)state;
    const flashc_dtype dts[3] = {FLASHC_F32, FLASHC_BF16, FLASHC_F16};
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (int di = 0; di < 3; di++)
            for (int bwd = 0; bwd < 2; bwd++)
                run_case(&cases[ci], dts[di], bwd);
}

static void test_rope_bad_input(void **state)
{
    (void)state;
    enum { S = 8, D = 16 };
    float q[S * D], q0[S * D], cs[S * D / 2], sn[S * D / 2];
    tu_fill_normal(q, S * D, 1);
    tu_fill_normal(cs, S * D / 2, 1);
    tu_fill_normal(sn, S * D / 2, 1);
    memcpy(q0, q, sizeof q);
    flashc_tensor tq = flashc_tensor_4d(q, FLASHC_F32, 1, S, 1, D);
    flashc_tensor tc = flashc_tensor_2d(cs, FLASHC_F32, S, D / 2), ts = flashc_tensor_2d(sn, FLASHC_F32, S, D / 2);
    flashc_rope_params p;
    memset(&p, 0, sizeof p);
    assert_int_equal(flashc_rope(NULL, &tq, NULL, NULL, NULL), FLASHC_ERR_NULL_POINTER);
    assert_int_equal(flashc_rope(&p, &tq, NULL, NULL, NULL), FLASHC_ERR_INVALID_ARGUMENT);
    p.struct_size = sizeof p;
    p.rotary_dim = 5;
    assert_int_equal(flashc_rope(&p, &tq, NULL, NULL, NULL), FLASHC_ERR_INVALID_ARGUMENT);
    p.rotary_dim = 0;
    assert_int_equal(flashc_rope(&p, &tq, NULL, &tc, NULL), FLASHC_ERR_NULL_POINTER);
    int32_t pos[S] = {0, 1, 2, 3, 4, 5, 6, 8}; /* 8 is past the tables' 8 rows */
    p.positions = pos;
    assert_int_equal(flashc_rope(&p, &tq, NULL, &tc, &ts), FLASHC_ERR_INVALID_ARGUMENT);
    p.positions = NULL, p.pos_offset = 1; /* s + 1 reaches row 8 */
    assert_int_equal(flashc_rope(&p, &tq, NULL, &tc, &ts), FLASHC_ERR_INVALID_ARGUMENT);
    p.pos_offset = 0, p.style = (flashc_rope_style)7;
    assert_int_equal(flashc_rope(&p, &tq, NULL, &tc, &ts), FLASHC_ERR_INVALID_ARGUMENT);
    p.style = FLASHC_ROPE_NEOX, p.theta = -1.0f;
    assert_int_equal(flashc_rope(&p, &tq, NULL, NULL, NULL), FLASHC_ERR_INVALID_ARGUMENT);
    flashc_tensor alias = tq; /* k == q: an output overlapping another */
    p.theta = 0.0f;
    assert_int_equal(flashc_rope(&p, &tq, &alias, NULL, NULL), FLASHC_ERR_OVERLAP);
    assert_memory_equal(q, q0, sizeof q);
    TU_OK(flashc_rope(&p, &tq, NULL, &tc, &ts));
}

int main(void)
{
    tu_seed_from_env();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rope_all),
        cmocka_unit_test(test_rope_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
