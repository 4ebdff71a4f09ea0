/*
 * test_cuda_attn.c — the CUDA forward against a float64 reference, by FlashAttention's rule:
 * the kernel's max error must be at most 2x the max error of a naive implementation in the same
 * precision (q scaled and rounded, S = q k^T rounded, P = softmax(S) rounded, O = P v rounded,
 * float32 accumulation: what an unfused bf16/fp16 framework computes) against the same
 * reference. Checked for o and LSE, on fresh random inputs (the seed is printed), every element
 * poisoned with NaN first; NaN never passes. The float64 reference is computed here row by row
 * (in parallel, fused with the naive same-precision one) rather than with tu_attn_ref64: the
 * 1k x 1k cases of every kernel would take minutes single-threaded.
 *
 * Cases: seqlen pairs (1,147) (113,203) (128,217) (108,256) (1023,1024) (1024,1023), causal and
 * not, MHA / GQA / MQA, head dims 64 96 128 256, bf16 and fp16; plus a (B, H, S, D) strided
 * layout, a user stream, repeatability (a race shows as a moving result), refusals, and the
 * CUDA error contract (pending application errors, host / pinned / other-device / managed memory).
 *
 * No CUDA device (or a build without CUDA): prints why and exits 77, which ctest reports as
 * skipped. FLASHC_TEST_SMALL=1 keeps a few short cases of each kernel (for compute-sanitizer).
 */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>

#ifdef FLASHC_HAVE_CUDA
#include "internal.h" /* bf16 / fp16 conversions */

#include <cuda_runtime_api.h>
#include <math.h>
#include <string.h>

#define CUDA_OK(call)                                                                              \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            fail_msg("%s failed: %s", #call, cudaGetErrorString(e_));                              \
    } while (0)

/* Round a float to the storage dtype and back. */
static float rnd(flashc_dtype dt, float x)
{
    return dt == FLASHC_BF16 ? flashc__bf16_to_f32(flashc__f32_to_bf16(x))
                             : flashc__f16_to_f32(flashc__f32_to_f16(x));
}

static uint16_t to_bits(flashc_dtype dt, float x)
{
    return dt == FLASHC_BF16 ? flashc__f32_to_bf16(x) : flashc__f32_to_f16(x);
}

static float from_bits(flashc_dtype dt, uint16_t h)
{
    return dt == FLASHC_BF16 ? flashc__bf16_to_f32(h) : flashc__f16_to_f32(h);
}

typedef struct attn_case {
    int B, Sq, Sk, Hq, Hkv, D, causal;
    flashc_dtype dt;
    int bhsd;          /* q/k/v/o live in (B, H, S, D) buffers, passed as strided views */
    int use_stream;    /* pass a created stream rather than the default one             */
} attn_case;

/* Element offset of (b, s, h, d) in a (B, S, H, D) tensor, or in a (B, H, S, D) buffer. */
static int64_t off(const attn_case *c, int64_t S, int64_t H, int64_t b, int64_t s, int64_t h,
                   int64_t d)
{
    if (c->bhsd)
        return ((b * H + h) * S + s) * c->D + d;
    return ((b * S + s) * H + h) * c->D + d;
}

static flashc_tensor view(const attn_case *c, void *data, int64_t S, int64_t H)
{
    flashc_tensor t = flashc_tensor_4d(data, c->dt, c->B, S, H, c->D);
    if (c->bhsd) {
        t.stride[0] = H * S * c->D;
        t.stride[1] = c->D;
        t.stride[2] = S * c->D;
        t.stride[3] = 1;
    }
    t.device = FLASHC_DEVICE_CUDA;
    return t;
}

/* Max errors of one case. */
typedef struct errs {
    double o, o_naive, lse, lse_naive;
    int64_t bad; /* non-finite outputs, or LSE finiteness disagreeing with the reference */
} errs;

/* Reference (float64) and naive same-precision attention for one row, compared with the
 * kernel's row. qf, kf, vf: the rounded inputs as float. */
static void check_row(const attn_case *c, float scale, const float *qf, const float *kf,
                      const float *vf, const uint16_t *o, const float *lse, int64_t b, int64_t h,
                      int64_t i, double *sref, float *snaive, double *oref, float *onaive,
                      errs *e)
{
    const int64_t D = c->D, Sk = c->Sk, hk = h / (c->Hq / c->Hkv);
    int64_t kend = c->causal ? i + 1 + Sk - c->Sq : Sk;
    if (kend > Sk)
        kend = Sk;
    const float *q = qf + off(c, c->Sq, c->Hq, b, i, h, 0);
    float qs[256];
    for (int64_t d = 0; d < D; d++)
        qs[d] = rnd(c->dt, q[d] * scale);
    double m = -INFINITY;
    float mn = -INFINITY;
    for (int64_t j = 0; j < kend; j++) {
        const float *k = kf + off(c, Sk, c->Hkv, b, j, hk, 0);
        double acc = 0.0, accn = 0.0;
        for (int64_t d = 0; d < D; d++) {
            acc += (double)q[d] * (double)k[d];
            accn += (double)qs[d] * (double)k[d];
        }
        sref[j] = acc * (double)scale;
        snaive[j] = rnd(c->dt, (float)accn);
        m = sref[j] > m ? sref[j] : m;
        mn = snaive[j] > mn ? snaive[j] : mn;
    }
    double l = 0.0;
    float ln = 0.0f;
    for (int64_t j = 0; j < kend; j++) {
        sref[j] = exp(sref[j] - m);
        l += sref[j];
        snaive[j] = expf(snaive[j] - mn);
        ln += snaive[j];
    }
    for (int64_t d = 0; d < D; d++) {
        oref[d] = 0.0;
        onaive[d] = 0.0f;
    }
    for (int64_t j = 0; j < kend; j++) {
        const float *v = vf + off(c, Sk, c->Hkv, b, j, hk, 0);
        const double p = sref[j] / l;
        const float pn = rnd(c->dt, snaive[j] / ln);
        for (int64_t d = 0; d < D; d++) {
            oref[d] += p * (double)v[d];
            onaive[d] += pn * v[d];
        }
    }
    const uint16_t *orow = o + off(c, c->Sq, c->Hq, b, i, h, 0);
    for (int64_t d = 0; d < D; d++) {
        const float got = from_bits(c->dt, orow[d]);
        if (!isfinite(got)) {
            e->bad++;
            continue;
        }
        const double eo = fabs((double)got - oref[d]);
        const double en = fabs((double)rnd(c->dt, onaive[d]) - oref[d]);
        e->o = eo > e->o ? eo : e->o;
        e->o_naive = en > e->o_naive ? en : e->o_naive;
    }
    if (lse) {
        const float got = lse[(b * c->Hq + h) * c->Sq + i];
        if (kend <= 0) {
            if (!(isinf(got) && got < 0))
                e->bad++;
        } else if (!isfinite(got)) {
            e->bad++;
        } else {
            const double ref = m + log(l);
            const double el = fabs((double)got - ref);
            const double en = fabs((double)(mn + logf(ln)) - ref);
            e->lse = el > e->lse ? el : e->lse;
            e->lse_naive = en > e->lse_naive ? en : e->lse_naive;
        }
    }
}

static void merge_errs(errs *into, const errs *e)
{
    into->o = e->o > into->o ? e->o : into->o;
    into->o_naive = e->o_naive > into->o_naive ? e->o_naive : into->o_naive;
    into->lse = e->lse > into->lse ? e->lse : into->lse;
    into->lse_naive = e->lse_naive > into->lse_naive ? e->lse_naive : into->lse_naive;
    into->bad += e->bad;
}

static void fill(const attn_case *c, int64_t n, float *f, uint16_t *bits)
{
    for (int64_t i = 0; i < n; i++) {
        bits[i] = to_bits(c->dt, (float)tu_normal());
        f[i] = from_bits(c->dt, bits[i]);
    }
}

/* Runs the kernel on fresh inputs; fills o/lse (host copies); returns the status. */
typedef struct run_buffers {
    int64_t nq, nk;
    float *qf, *kf, *vf;
    uint16_t *qh, *kh, *vh, *oh;
    float *lseh;
    void *dq, *dk, *dv, *dout;
    float *dlse;
} run_buffers;

static void buffers_create(const attn_case *c, run_buffers *r)
{
    r->nq = (int64_t)c->B * c->Sq * c->Hq * c->D;
    r->nk = (int64_t)c->B * c->Sk * c->Hkv * c->D;
    r->qf = malloc(r->nq * sizeof(float));
    r->kf = malloc(r->nk * sizeof(float));
    r->vf = malloc(r->nk * sizeof(float));
    r->qh = malloc(r->nq * 2);
    r->kh = malloc(r->nk * 2);
    r->vh = malloc(r->nk * 2);
    r->oh = malloc(r->nq * 2);
    r->lseh = malloc((size_t)c->B * c->Hq * c->Sq * sizeof(float));
    if (!(r->qf && r->kf && r->vf && r->qh && r->kh && r->vh && r->oh && r->lseh))
        fail_msg("out of host memory");
    fill(c, r->nq, r->qf, r->qh);
    fill(c, r->nk, r->kf, r->kh);
    fill(c, r->nk, r->vf, r->vh);
    CUDA_OK(cudaMalloc(&r->dq, r->nq * 2));
    CUDA_OK(cudaMalloc(&r->dk, r->nk * 2));
    CUDA_OK(cudaMalloc(&r->dv, r->nk * 2));
    CUDA_OK(cudaMalloc(&r->dout, r->nq * 2));
    CUDA_OK(cudaMalloc((void **)&r->dlse, (size_t)c->B * c->Hq * c->Sq * sizeof(float)));
    CUDA_OK(cudaMemcpy(r->dq, r->qh, r->nq * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(r->dk, r->kh, r->nk * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(r->dv, r->vh, r->nk * 2, cudaMemcpyHostToDevice));
}

static void buffers_poison(const attn_case *c, run_buffers *r)
{
    /* 0xffff is NaN in bf16 and fp16, 0xffffffff NaN in float32 */
    CUDA_OK(cudaMemset(r->dout, 0xff, r->nq * 2));
    CUDA_OK(cudaMemset(r->dlse, 0xff, (size_t)c->B * c->Hq * c->Sq * sizeof(float)));
}

static void buffers_fetch(const attn_case *c, run_buffers *r)
{
    CUDA_OK(cudaMemcpy(r->oh, r->dout, r->nq * 2, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(r->lseh, r->dlse, (size_t)c->B * c->Hq * c->Sq * sizeof(float),
                       cudaMemcpyDeviceToHost));
}

static void buffers_destroy(run_buffers *r)
{
    cudaFree(r->dq), cudaFree(r->dk), cudaFree(r->dv), cudaFree(r->dout), cudaFree(r->dlse);
    free(r->qf), free(r->kf), free(r->vf), free(r->qh), free(r->kh), free(r->vh), free(r->oh);
    free(r->lseh);
}

static flashc_status run_kernel(const attn_case *c, run_buffers *r, cudaStream_t stream)
{
    flashc_attn_params pr = {0};
    pr.causal = c->causal;
    pr.cuda_stream = stream;
    flashc_tensor q = view(c, r->dq, c->Sq, c->Hq), k = view(c, r->dk, c->Sk, c->Hkv);
    flashc_tensor v = view(c, r->dv, c->Sk, c->Hkv), o = view(c, r->dout, c->Sq, c->Hq);
    flashc_tensor lse = flashc_tensor_3d(r->dlse, FLASHC_F32, c->B, c->Hq, c->Sq);
    lse.device = FLASHC_DEVICE_CUDA;
    flashc_status st = flashc_attn_fwd(&pr, &q, &k, &v, &o, &lse, NULL);
    if (st == FLASHC_OK)
        CUDA_OK(stream ? cudaStreamSynchronize(stream) : cudaDeviceSynchronize());
    return st;
}

static const char *dtname(flashc_dtype dt) { return dt == FLASHC_BF16 ? "bf16" : "fp16"; }

/* One case: run, compare with the references, assert the 2x rule. */
static void check_case(const attn_case *c)
{
    run_buffers r;
    buffers_create(c, &r);
    buffers_poison(c, &r);
    cudaStream_t stream = NULL;
    if (c->use_stream)
        CUDA_OK(cudaStreamCreate(&stream));
    flashc_status st = run_kernel(c, &r, stream);
    if (st != FLASHC_OK)
        fail_msg("flashc_attn_fwd: %s: %s", flashc_status_string(st), flashc_last_error());
    buffers_fetch(c, &r);
    if (stream)
        CUDA_OK(cudaStreamDestroy(stream));

    const float scale = (float)(1.0 / sqrt((double)c->D));
    errs total = {0};
    const int64_t rows = (int64_t)c->B * c->Hq * c->Sq;
#pragma omp parallel
    {
        double *sref = malloc((size_t)c->Sk * sizeof(double));
        float *snaive = malloc((size_t)c->Sk * sizeof(float));
        double oref[256];
        float onaive[256];
        errs e = {0};
#pragma omp for schedule(dynamic, 16)
        for (int64_t x = 0; x < rows; x++) {
            const int64_t b = x / ((int64_t)c->Hq * c->Sq), h = x / c->Sq % c->Hq, i = x % c->Sq;
            check_row(c, scale, r.qf, r.kf, r.vf, r.oh, r.lseh, b, h, i, sref, snaive, oref,
                      onaive, &e);
        }
#pragma omp critical
        merge_errs(&total, &e);
        free(sref);
        free(snaive);
    }
    buffers_destroy(&r);

    printf("  %s D=%3d B=%d Sq=%4d Sk=%4d Hq=%d Hkv=%d causal=%d%s%s: o err %.3g (naive %.3g), "
           "lse err %.3g (naive %.3g)\n",
           dtname(c->dt), c->D, c->B, c->Sq, c->Sk, c->Hq, c->Hkv, c->causal,
           c->bhsd ? " bhsd" : "", c->use_stream ? " stream" : "", total.o, total.o_naive,
           total.lse, total.lse_naive);
    if (total.bad)
        fail_msg("%lld outputs non-finite or unwritten", (long long)total.bad);
    /* The floors only matter if the naive error is exactly 0, which random data never gives. */
    if (!(total.o <= 2.0 * total.o_naive + 1e-6))
        fail_msg("o error %.4g > 2 x naive %.4g", total.o, total.o_naive);
    if (!(total.lse <= 2.0 * total.lse_naive + 1e-6))
        fail_msg("lse error %.4g > 2 x naive %.4g", total.lse, total.lse_naive);
}

static int small_only(void)
{
    const char *s = getenv("FLASHC_TEST_SMALL");
    return s && s[0] == '1';
}

static const int seqlens[][2] = {{1, 147}, {113, 203}, {128, 217}, {108, 256}, {1023, 1024},
                                 {1024, 1023}};
/* (Hq, Hkv): MHA, GQA, MQA; fewer heads for the long sequences (the reference is O(S^2)) */
static const int heads_short[][2] = {{4, 4}, {6, 2}, {4, 1}};
static const int heads_long[][2] = {{2, 2}, {4, 2}, {3, 1}};

/* Every seqlen pair x causal x head layout for one (dtype, head dim). */
static void suite(flashc_dtype dt, int D)
{
    /* FLASHC_TEST_SMALL (under compute-sanitizer, ~100x slower): two short pairs, GQA only */
    const int npairs = small_only() ? 2 : (int)(sizeof seqlens / sizeof seqlens[0]);
    for (int s = 0; s < npairs; s++) {
        const int big = seqlens[s][0] > 512;
        for (int causal = 0; causal < 2; causal++)
            for (int hh = small_only() ? 1 : 0; hh < (small_only() ? 2 : 3); hh++) {
                attn_case c = {0};
                c.B = big ? 1 : 2;
                c.Sq = seqlens[s][0], c.Sk = seqlens[s][1];
                c.Hq = big ? heads_long[hh][0] : heads_short[hh][0];
                c.Hkv = big ? heads_long[hh][1] : heads_short[hh][1];
                c.D = D, c.causal = causal, c.dt = dt;
                check_case(&c);
            }
    }
}

static void test_bf16_d64(void **state) { (void)state; suite(FLASHC_BF16, 64); }
static void test_bf16_d96(void **state) { (void)state; suite(FLASHC_BF16, 96); }
static void test_bf16_d128(void **state) { (void)state; suite(FLASHC_BF16, 128); }
static void test_bf16_d256(void **state) { (void)state; suite(FLASHC_BF16, 256); }
static void test_f16_d64(void **state) { (void)state; suite(FLASHC_F16, 64); }
static void test_f16_d96(void **state) { (void)state; suite(FLASHC_F16, 96); }
static void test_f16_d128(void **state) { (void)state; suite(FLASHC_F16, 128); }
static void test_f16_d256(void **state) { (void)state; suite(FLASHC_F16, 256); }

/* (B, H, S, D) buffers passed as strided views, on a user stream, with odd sizes. */
static void test_strided_layout_and_stream(void **state)
{
    (void)state;
    attn_case c = {2, 77, 301, 4, 2, 128, 1, FLASHC_BF16, 1, 1};
    check_case(&c);
    c.causal = 0, c.dt = FLASHC_F16, c.D = 64, c.Sq = 300, c.Sk = 5;
    check_case(&c);
}

/* The same inputs twice give bit-identical results: a race would show as a moving result. */
static void test_repeatable(void **state)
{
    (void)state;
    attn_case c = {2, 333, 517, 4, 2, 128, 1, FLASHC_BF16, 0, 0};
    run_buffers r;
    buffers_create(&c, &r);
    uint16_t *first = malloc(r.nq * 2);
    float *first_lse = malloc((size_t)c.B * c.Hq * c.Sq * sizeof(float));
    for (int rep = 0; rep < 3; rep++) {
        buffers_poison(&c, &r);
        assert_int_equal(run_kernel(&c, &r, NULL), FLASHC_OK);
        buffers_fetch(&c, &r);
        if (rep == 0) {
            memcpy(first, r.oh, r.nq * 2);
            memcpy(first_lse, r.lseh, (size_t)c.B * c.Hq * c.Sq * sizeof(float));
        } else {
            assert_memory_equal(first, r.oh, r.nq * 2);
            assert_memory_equal(first_lse, r.lseh, (size_t)c.B * c.Hq * c.Sq * sizeof(float));
        }
    }
    free(first);
    free(first_lse);
    buffers_destroy(&r);
}

/* What the kernels cannot do is refused with a specific status; o stays untouched. */
static void test_refusals(void **state)
{
    (void)state;
    attn_case c = {1, 64, 64, 2, 2, 64, 0, FLASHC_BF16, 0, 0};
    run_buffers r;
    buffers_create(&c, &r);
    buffers_poison(&c, &r);
    flashc_attn_params pr = {0};
    flashc_tensor q = view(&c, r.dq, c.Sq, c.Hq), k = view(&c, r.dk, c.Sk, c.Hkv);
    flashc_tensor v = view(&c, r.dv, c.Sk, c.Hkv), o = view(&c, r.dout, c.Sq, c.Hq);

    /* float32 on the device: the same buffers seen as 32 floats a row (same bytes) */
    flashc_tensor q32 = q, k32 = k, v32 = v, o32 = o;
    flashc_tensor *all32[4] = {&q32, &k32, &v32, &o32};
    for (int i = 0; i < 4; i++) {
        all32[i]->dtype = FLASHC_F32;
        all32[i]->shape[3] = 32;
        for (int j = 0; j < 3; j++)
            all32[i]->stride[j] /= 2;
    }
    assert_int_equal(flashc_attn_fwd(&pr, &q32, &k32, &v32, &o32, NULL, NULL),
                     FLASHC_ERR_UNSUPPORTED_DTYPE);
    printf("  fp32: %s\n", flashc_last_error());

    /* head dim 32 (a view of the first 32 features) */
    flashc_tensor q2 = q, k2 = k, v2 = v, o2 = o;
    q2.shape[3] = k2.shape[3] = v2.shape[3] = o2.shape[3] = 32;
    assert_int_equal(flashc_attn_fwd(&pr, &q2, &k2, &v2, &o2, NULL, NULL), FLASHC_ERR_UNSUPPORTED);
    printf("  D=32: %s\n", flashc_last_error());

    /* a feature stride of 2 is not unit */
    flashc_tensor q3 = q;
    q3.shape[1] = 32, q3.stride[3] = 2, q3.shape[3] = 64;
    flashc_tensor o3 = o;
    o3.shape[1] = 32;
    assert_int_equal(flashc_attn_fwd(&pr, &q3, &k, &v, &o3, NULL, NULL), FLASHC_ERR_UNSUPPORTED);
    printf("  stride: %s\n", flashc_last_error());

    /* a sequence stride that breaks 16-byte rows */
    flashc_tensor q4 = q;
    q4.shape[1] = 16, q4.stride[1] = c.Hq * c.D + 4;
    flashc_tensor o4 = o;
    o4.shape[1] = 16;
    assert_int_equal(flashc_attn_fwd(&pr, &q4, &k, &v, &o4, NULL, NULL), FLASHC_ERR_UNSUPPORTED);
    printf("  align: %s\n", flashc_last_error());

    /* a host pointer marked as device memory */
    flashc_tensor qh = q;
    qh.data = r.qh;
    assert_int_equal(flashc_attn_fwd(&pr, &qh, &k, &v, &o, NULL, NULL),
                     FLASHC_ERR_INVALID_ARGUMENT);
    printf("  host ptr: %s\n", flashc_last_error());

    /* o untouched by every refusal */
    buffers_fetch(&c, &r);
    for (int64_t i = 0; i < r.nq; i++)
        assert_int_equal(r.oh[i], 0xffff);
    buffers_destroy(&r);
}

/* The application's CUDA error state (attn.cu "CUDA errors"): a pending error is neither
 * cleared nor taken for the library's; the library leaves none of its own behind; memory of the
 * wrong kind gets a clear status; managed memory computes like device memory. */
static void test_cuda_errors(void **state)
{
    (void)state;
    attn_case c = {1, 64, 64, 2, 2, 64, 0, FLASHC_BF16, 0, 0};
    run_buffers r;
    buffers_create(&c, &r);
    buffers_poison(&c, &r);
    flashc_attn_params pr = {0};
    flashc_tensor q = view(&c, r.dq, c.Sq, c.Hq), k = view(&c, r.dk, c.Sk, c.Hkv);
    flashc_tensor v = view(&c, r.dv, c.Sk, c.Hkv), o = view(&c, r.dout, c.Sq, c.Hq);
    assert_int_equal(cudaPeekAtLastError(), cudaSuccess);

    /* 1. an error the application left pending (an allocation it did not check) */
    void *huge = NULL;
    assert_int_not_equal(cudaMalloc(&huge, (size_t)1 << 62), cudaSuccess);
    const cudaError_t pending = cudaPeekAtLastError();
    assert_int_not_equal(pending, cudaSuccess);
    assert_int_equal(flashc_attn_fwd(&pr, &q, &k, &v, &o, NULL, NULL), FLASHC_ERR_DEVICE);
    printf("  pending: %s\n", flashc_last_error());
    assert_non_null(strstr(flashc_last_error(), cudaGetErrorName(pending)));
    assert_int_equal(flashc_attn_fwd_supported(&pr, &q, &k, &v, &o, NULL), FLASHC_ERR_DEVICE);
    (void)flashc_cuda_available();
    assert_int_equal(cudaGetLastError(), pending); /* still the application's, once */
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    buffers_fetch(&c, &r);
    for (int64_t i = 0; i < r.nq; i++)
        assert_int_equal(r.oh[i], 0xffff); /* nothing was launched */

    /* 2. a success and a refusal leave no error of the library's behind */
    TU_OK(flashc_attn_fwd(&pr, &q, &k, &v, &o, NULL, NULL));
    CUDA_OK(cudaDeviceSynchronize());
    assert_int_equal(cudaPeekAtLastError(), cudaSuccess);
    buffers_poison(&c, &r);

    /* 3. pinned host memory and plain host memory marked as CUDA */
    void *pinned = NULL;
    CUDA_OK(cudaMallocHost(&pinned, r.nq * 2));
    flashc_tensor qp = q;
    qp.data = pinned;
    assert_int_equal(flashc_attn_fwd(&pr, &qp, &k, &v, &o, NULL, NULL), FLASHC_ERR_INVALID_ARGUMENT);
    printf("  pinned: %s\n", flashc_last_error());
    assert_non_null(strstr(flashc_last_error(), "pinned host memory"));
    assert_int_equal(cudaPeekAtLastError(), cudaSuccess);
    qp.data = r.qh;
    assert_int_equal(flashc_attn_fwd(&pr, &qp, &k, &v, &o, NULL, NULL), FLASHC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(flashc_last_error(), "host memory"));
    assert_int_equal(cudaPeekAtLastError(), cudaSuccess);
    cudaFreeHost(pinned);

    /* 4. memory of another device (needs two) */
    int ndev = 0;
    CUDA_OK(cudaGetDeviceCount(&ndev));
    if (ndev >= 2) {
        void *other = NULL;
        CUDA_OK(cudaSetDevice(1));
        CUDA_OK(cudaMalloc(&other, r.nq * 2));
        CUDA_OK(cudaSetDevice(0));
        flashc_tensor qo = q;
        qo.data = other;
        assert_int_equal(flashc_attn_fwd(&pr, &qo, &k, &v, &o, NULL, NULL),
                         FLASHC_ERR_INVALID_ARGUMENT);
        printf("  other device: %s\n", flashc_last_error());
        assert_non_null(strstr(flashc_last_error(), "device 1"));
        cudaFree(other);
    } else {
        printf("  other device: not checked (%d device visible)\n", ndev);
    }

    /* 5. managed memory: accepted, bit-identical to device memory */
    void *mq = NULL, *mo = NULL;
    CUDA_OK(cudaMallocManaged(&mq, r.nq * 2, cudaMemAttachGlobal));
    CUDA_OK(cudaMallocManaged(&mo, r.nq * 2, cudaMemAttachGlobal));
    CUDA_OK(cudaMemcpy(mq, r.dq, r.nq * 2, cudaMemcpyDeviceToDevice));
    flashc_tensor qm = q, om = o;
    qm.data = mq, om.data = mo;
    TU_OK(flashc_attn_fwd(&pr, &qm, &k, &v, &om, NULL, NULL));
    TU_OK(flashc_attn_fwd(&pr, &q, &k, &v, &o, NULL, NULL));
    CUDA_OK(cudaDeviceSynchronize());
    buffers_fetch(&c, &r);
    assert_memory_equal(mo, r.oh, r.nq * 2);
    cudaFree(mq), cudaFree(mo);
    assert_int_equal(cudaPeekAtLastError(), cudaSuccess);
    buffers_destroy(&r);
}

int main(void)
{
    if (!flashc_cuda_available()) {
        printf("test_cuda_attn: SKIPPED: no CUDA device visible (%s)\n", flashc_build_info());
        return 77;
    }
    tu_seed_from_env();
    printf("test_cuda_attn: %s\n", flashc_build_info());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_cuda_errors),
        cmocka_unit_test(test_repeatable),
        cmocka_unit_test(test_strided_layout_and_stream),
        cmocka_unit_test(test_bf16_d64),
        cmocka_unit_test(test_bf16_d128),
        cmocka_unit_test(test_bf16_d96),
        cmocka_unit_test(test_bf16_d256),
        cmocka_unit_test(test_f16_d64),
        cmocka_unit_test(test_f16_d128),
        cmocka_unit_test(test_f16_d96),
        cmocka_unit_test(test_f16_d256),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else /* !FLASHC_HAVE_CUDA */

int main(void)
{
    printf("test_cuda_attn: SKIPPED: this build has no CUDA backend (%s)\n", flashc_build_info());
    return 77;
}

#endif
