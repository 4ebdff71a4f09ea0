/*
 * test_cuda_attn_bwd.c — the CUDA backward against a float64 reference, by FlashAttention's
 * rule: for each of dq, dk, dv the kernel's max error must be at most 2x the max error of a
 * naive backward in the same precision, against the same reference (plus a floor of one ulp
 * at 0.3 in the storage dtype, as flash-attn's Hopper tests add, for the rare case where the
 * naive error is tiny).
 *
 * Inputs: q, k, v, dout fresh random numbers rounded to the storage dtype (the seed is
 * printed); o and lse from the CUDA forward on them. Reference: flashc_attn_bwd_naive (float64
 * accumulation, P recomputed by a full softmax) on float32 copies of exactly those rounded
 * q, k, v, o, dout. Naive same-precision backward (written here, what an unfused bf16/fp16
 * framework computes, float32 accumulation): S = (scale q rounded) k^T rounded, P = softmax(S)
 * rounded, dP = dout v^T rounded, D = rowsum(dout o), dS = P (dP - D) rounded, dV = P^T dout,
 * dQ = scale (dS k), dK = scale (dS^T q) each rounded per query head, and for GQA the heads of
 * a group summed in float32 and rounded once.
 * Every output is poisoned with NaN first; NaN never passes; rows that see no key must get
 * dq = 0 exactly.
 *
 * Cases: seqlen pairs (1,1) (113,203) (128,217) (203,113: Sq > Sk, fully masked rows under
 * the causal mask) (256,512) (1023,1024) and (2048,2048) (trimmed to fewer heads and dtypes for
 * time), causal and not, MHA / GQA / MQA, head dims 64 96 128 256, bf16 and fp16, fast and
 * deterministic mode; a (B, H, S, D) strided layout on a user stream with a caller workspace
 * (poisoned, off the allocation's alignment); the non-default tiles (params.block_q/block_k);
 * deterministic mode bit-identical over 3 runs (and fast mode's dk, dv, which never use
 * atomics); capture into a CUDA graph; refusals. Head dims without an instance of their own
 * (1-250, odd ones in rows pitched to 16 bytes) and Dk != Dv, dense and varlen: every buffer's
 * rows are max(D, Dv) rounded up to 8 wide, the tensors views of their first D / Dv columns,
 * and the columns past them must still hold the poison after the call (rows 64 wide in some
 * padded cases, so that a store past D stays in its own row); k, v broadcast over the batch
 * (stride 0).
 *
 * No CUDA device (or a build without CUDA): prints why and exits 77 (ctest: skipped).
 * FLASHC_TEST_SMALL=1 keeps a few short cases (for compute-sanitizer).
 */
#define _POSIX_C_SOURCE 200809L /* setenv (the varlen switch test) */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>

#ifdef FLASHC_HAVE_CUDA
#include "cuda_common.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

typedef struct bwd_case {
    int B, Sq, Sk, Hq, Hkv, D, causal;
    flashc_dtype dt;
    int deterministic;
    int bhsd;       /* every tensor in a (B, H, S, D) buffer, passed as a strided view */
    int use_stream; /* a created stream and a caller-provided workspace                */
    int br, bc;     /* backward tiles requested (0: the default variant)               */
    /* modifiers (zero-initialised: none) */
    int win, wl, wr; /* win: params.window_left / right = wl, wr (-1 = unbounded side)   */
    float softcap;   /* params.softcap                                                   */
    int alibi;       /* ALiBi slopes (Hq), per head 2^(-(h + 1) / 2)                     */
    int Dv;          /* head dim of v, o, dout, dv (0: D); every buffer's rows are         */
                     /* max(D, Dv) rounded up to 8 wide (16-byte rows, as the CUDA backend */
                     /* needs), each tensor a view of its first D or Dv columns            */
    int wide;        /* rows rounded up to 64 instead (the instance a padded head dim runs */
                     /* on: its stores past D / Dv would land in the row's own poisoned    */
                     /* columns, which unused_columns checks, not in the next row)         */
    int bcast;       /* k, v broadcast over the batch: their device views have stride[0]   */
                     /* 0 (every batch's host data is batch 0's, so the references agree); */
                     /* no tensor map takes that, so the Hopper families' fallback runs    */
} bwd_case;

static int has_mods(const bwd_case *c) { return c->win || c->softcap > 0.0f || c->alibi; }
static int dv_of(const bwd_case *c) { return c->Dv ? c->Dv : c->D; }
static int wid(const bwd_case *c)
{
    const int m = c->wide ? 64 : 8;
    return ((c->D > dv_of(c) ? c->D : dv_of(c)) + m - 1) / m * m;
}

/* Key range [lo, hi) of row i (attn_key_range of include/flashc.h: a_i = i + Sk - Sq). */
static void key_range(const bwd_case *c, int64_t i, int64_t *lo, int64_t *hi)
{
    const int64_t a = i + c->Sk - c->Sq;
    const int64_t wl = c->win ? c->wl : -1, wr = c->causal ? 0 : (c->win ? c->wr : -1);
    int64_t l = 0, h = c->Sk;
    if (wl >= 0 && a - wl > l)
        l = a - wl;
    if (wr >= 0 && a + wr + 1 < h)
        h = a + wr + 1;
    *lo = l;
    *hi = h < l ? l : h;
}

static float slope_of(int h) { return (float)pow(2.0, -(h + 1) / 2.0); }

/* Element offset of (b, s, h, d): (B, S, H, W) contiguous, or a (B, H, S, W) buffer, W =
 * wid(c). */
static int64_t off(const bwd_case *c, int64_t S, int64_t H, int64_t b, int64_t s, int64_t h,
                   int64_t d)
{
    const int64_t W = wid(c);
    if (c->bhsd)
        return ((b * H + h) * S + s) * W + d;
    return ((b * S + s) * H + h) * W + d;
}

/* The view of the first d columns of a buffer laid out as off() says. */
static flashc_tensor view_d(const bwd_case *c, void *data, flashc_dtype dt, int64_t S, int64_t H,
                            flashc_device dev, int d)
{
    const int64_t W = wid(c);
    flashc_tensor t = flashc_tensor_4d(data, dt, c->B, S, H, W);
    if (c->bhsd) {
        t.stride[0] = H * S * W;
        t.stride[1] = W;
        t.stride[2] = S * W;
        t.stride[3] = 1;
    }
    t.shape[3] = d;
    t.device = dev;
    return t;
}

/* k or v as an input on the device: stride[0] = 0 under c->bcast */
static flashc_tensor kv_in(const bwd_case *c, flashc_tensor t)
{
    if (c->bcast)
        t.stride[0] = 0;
    return t;
}

/* q, k, dq, dk: D columns; v, o, dout, dv: Dv */
static flashc_tensor view(const bwd_case *c, void *data, flashc_dtype dt, int64_t S, int64_t H,
                          flashc_device dev)
{
    return view_d(c, data, dt, S, H, dev, c->D);
}

static flashc_tensor vview(const bwd_case *c, void *data, flashc_dtype dt, int64_t S, int64_t H,
                           flashc_device dev)
{
    return view_d(c, data, dt, S, H, dev, dv_of(c));
}

/* Host and device copies of one case's tensors. */
typedef struct bufs {
    int64_t nq, nk, nl;
    uint16_t *hq, *hk, *hv, *hdo, *ho, *hdq, *hdk, *hdv; /* host bits            */
    float *fq, *fk, *fv, *fdo, *fo;                      /* host, as float       */
    float *hlse;
    void *dq_, *dk_, *dv_, *ddo, *do_, *ddq, *ddk, *ddv; /* device               */
    float *dlse;
    float *hal, *dal;                      /* ALiBi slopes (Hq), host and device */
    flashc_tensor al_host, al_dev;
} bufs;

static void fill(const bwd_case *c, int64_t n, uint16_t *bits, float *f)
{
    for (int64_t i = 0; i < n; i++) {
        bits[i] = to_bits(c->dt, (float)tu_normal());
        f[i] = from_bits(c->dt, bits[i]);
    }
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        fail_msg("out of host memory");
    return p;
}

static void bufs_create(const bwd_case *c, bufs *r)
{
    r->nq = (int64_t)c->B * c->Sq * c->Hq * wid(c);
    r->nk = (int64_t)c->B * c->Sk * c->Hkv * wid(c);
    r->nl = (int64_t)c->B * c->Hq * c->Sq;
    uint16_t **h16[8] = {&r->hq, &r->hdo, &r->ho, &r->hdq, &r->hk, &r->hv, &r->hdk, &r->hdv};
    for (int i = 0; i < 8; i++)
        *h16[i] = xmalloc((i < 4 ? r->nq : r->nk) * 2);
    r->fq = xmalloc(r->nq * 4), r->fdo = xmalloc(r->nq * 4), r->fo = xmalloc(r->nq * 4);
    r->fk = xmalloc(r->nk * 4), r->fv = xmalloc(r->nk * 4);
    r->hlse = xmalloc(r->nl * 4);
    fill(c, r->nq, r->hq, r->fq);
    fill(c, r->nk, r->hk, r->fk);
    fill(c, r->nk, r->hv, r->fv);
    fill(c, r->nq, r->hdo, r->fdo);
    const int64_t kb = r->nk / c->B; /* one batch of k or v: contiguous in both layouts */
    for (int64_t b = 1; c->bcast && b < c->B; b++) {
        memcpy(r->hk + b * kb, r->hk, kb * 2), memcpy(r->fk + b * kb, r->fk, kb * 4);
        memcpy(r->hv + b * kb, r->hv, kb * 2), memcpy(r->fv + b * kb, r->fv, kb * 4);
    }
    void **d[8] = {&r->dq_, &r->ddo, &r->do_, &r->ddq, &r->dk_, &r->dv_, &r->ddk, &r->ddv};
    for (int i = 0; i < 8; i++)
        CUDA_OK(cudaMalloc(d[i], (i < 4 ? r->nq : r->nk) * 2));
    CUDA_OK(cudaMalloc((void **)&r->dlse, r->nl * 4));
    CUDA_OK(cudaMemcpy(r->dq_, r->hq, r->nq * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(r->dk_, r->hk, r->nk * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(r->dv_, r->hv, r->nk * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(r->ddo, r->hdo, r->nq * 2, cudaMemcpyHostToDevice));
    r->hal = xmalloc(c->Hq * 4);
    for (int h = 0; h < c->Hq; h++)
        r->hal[h] = slope_of(h);
    CUDA_OK(cudaMalloc((void **)&r->dal, c->Hq * 4));
    CUDA_OK(cudaMemcpy(r->dal, r->hal, c->Hq * 4, cudaMemcpyHostToDevice));
    r->al_host = flashc_tensor_1d(r->hal, FLASHC_F32, c->Hq);
    r->al_dev = flashc_tensor_1d(r->dal, FLASHC_F32, c->Hq);
    r->al_dev.device = FLASHC_DEVICE_CUDA;
}

static void bufs_destroy(bufs *r)
{
    void *d[9] = {r->dq_, r->ddo, r->do_, r->ddq, r->dk_, r->dv_, r->ddk, r->ddv, r->dlse};
    for (int i = 0; i < 9; i++)
        cudaFree(d[i]);
    void *h[14] = {r->hq, r->hdo, r->ho, r->hdq, r->hk, r->hv, r->hdk,
                   r->hdv, r->fq, r->fdo, r->fo, r->fk, r->fv, r->hlse};
    for (int i = 0; i < 14; i++)
        free(h[i]);
    cudaFree(r->dal);
    free(r->hal);
}

/* slopes: the ALiBi tensor on the call's device (used when c->alibi). */
static flashc_attn_params params_of(const bwd_case *c, cudaStream_t stream,
                                    const flashc_tensor *slopes)
{
    flashc_attn_params pr = flashc_attn_params_default();
    pr.causal = c->causal;
    pr.deterministic = c->deterministic;
    pr.cuda_stream = stream;
    if (c->win)
        pr.window_left = c->wl, pr.window_right = c->wr;
    pr.softcap = c->softcap;
    if (c->alibi)
        pr.alibi_slopes = slopes;
    return pr;
}

/* The device views of a call on r's buffers (k, v through kv_in: a broadcast case's stride 0). */
typedef struct dev_views {
    flashc_tensor q, k, v, o, dout, dq, dk, dv, lse;
} dev_views;
static dev_views dev_views_of(const bwd_case *c, const bufs *r)
{
    dev_views t;
    t.q = view(c, r->dq_, c->dt, c->Sq, c->Hq, FLASHC_DEVICE_CUDA);
    t.k = kv_in(c, view(c, r->dk_, c->dt, c->Sk, c->Hkv, FLASHC_DEVICE_CUDA));
    t.v = kv_in(c, vview(c, r->dv_, c->dt, c->Sk, c->Hkv, FLASHC_DEVICE_CUDA));
    t.o = vview(c, r->do_, c->dt, c->Sq, c->Hq, FLASHC_DEVICE_CUDA);
    t.dout = vview(c, r->ddo, c->dt, c->Sq, c->Hq, FLASHC_DEVICE_CUDA);
    t.dq = view(c, r->ddq, c->dt, c->Sq, c->Hq, FLASHC_DEVICE_CUDA);
    t.dk = view(c, r->ddk, c->dt, c->Sk, c->Hkv, FLASHC_DEVICE_CUDA);
    t.dv = vview(c, r->ddv, c->dt, c->Sk, c->Hkv, FLASHC_DEVICE_CUDA);
    t.lse = flashc_tensor_3d(r->dlse, FLASHC_F32, c->B, c->Hq, c->Sq);
    t.lse.device = FLASHC_DEVICE_CUDA;
    return t;
}

/* The forward: o, lse (device) and their host copies (o also as float). On the device when
 * the CUDA forward serves the problem; otherwise (a modifier the CUDA forward lacks) the CPU
 * forward on the float32 copies of the rounded inputs, o rounded to the dtype and uploaded. */
static void run_forward(const bwd_case *c, bufs *r, cudaStream_t stream)
{
    flashc_attn_params pr = params_of(c, stream, &r->al_dev);
    flashc_tensor q = view(c, r->dq_, c->dt, c->Sq, c->Hq, FLASHC_DEVICE_CUDA);
    flashc_tensor k = kv_in(c, view(c, r->dk_, c->dt, c->Sk, c->Hkv, FLASHC_DEVICE_CUDA));
    flashc_tensor v = kv_in(c, vview(c, r->dv_, c->dt, c->Sk, c->Hkv, FLASHC_DEVICE_CUDA));
    flashc_tensor o = vview(c, r->do_, c->dt, c->Sq, c->Hq, FLASHC_DEVICE_CUDA);
    flashc_tensor lse = flashc_tensor_3d(r->dlse, FLASHC_F32, c->B, c->Hq, c->Sq);
    lse.device = FLASHC_DEVICE_CUDA;
    flashc_status st = flashc_attn_fwd(&pr, &q, &k, &v, &o, &lse, NULL);
    if (st == FLASHC_ERR_UNSUPPORTED && (has_mods(c) || c->bcast)) {
        flashc_attn_params ph = params_of(c, NULL, &r->al_host);
        flashc_tensor hq = view(c, r->fq, FLASHC_F32, c->Sq, c->Hq, FLASHC_DEVICE_CPU);
        flashc_tensor hk = view(c, r->fk, FLASHC_F32, c->Sk, c->Hkv, FLASHC_DEVICE_CPU);
        flashc_tensor hv = vview(c, r->fv, FLASHC_F32, c->Sk, c->Hkv, FLASHC_DEVICE_CPU);
        flashc_tensor ho = vview(c, r->fo, FLASHC_F32, c->Sq, c->Hq, FLASHC_DEVICE_CPU);
        flashc_tensor hl = flashc_tensor_3d(r->hlse, FLASHC_F32, c->B, c->Hq, c->Sq);
        TU_OK(flashc_attn_fwd(&ph, &hq, &hk, &hv, &ho, &hl, NULL));
        for (int64_t i = 0; i < r->nq; i++) {
            r->ho[i] = to_bits(c->dt, r->fo[i]);
            r->fo[i] = from_bits(c->dt, r->ho[i]);
        }
        CUDA_OK(cudaMemcpy(r->do_, r->ho, r->nq * 2, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemcpy(r->dlse, r->hlse, r->nl * 4, cudaMemcpyHostToDevice));
        return;
    }
    TU_OK(st);
    CUDA_OK(stream ? cudaStreamSynchronize(stream) : cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(r->ho, r->do_, r->nq * 2, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(r->hlse, r->dlse, r->nl * 4, cudaMemcpyDeviceToHost));
    for (int64_t i = 0; i < r->nq; i++)
        r->fo[i] = from_bits(c->dt, r->ho[i]);
}

/* The backward on the device into poisoned dq, dk, dv, fetched to the host; returns the
 * status. workspace/ws_bytes: passed through params (NULL: the call allocates). */
static flashc_status run_backward(const bwd_case *c, bufs *r, cudaStream_t stream,
                                  void *workspace, size_t ws_bytes)
{
    flashc_attn_params pr = params_of(c, stream, &r->al_dev);
    pr.workspace = workspace;
    pr.workspace_bytes = ws_bytes;
    pr.block_q = c->br, pr.block_k = c->bc;
    dev_views t = dev_views_of(c, r);
    /* 0xffff is NaN in bf16 and fp16: an element the kernel never writes stays NaN */
    CUDA_OK(cudaMemset(r->ddq, 0xff, r->nq * 2));
    CUDA_OK(cudaMemset(r->ddk, 0xff, r->nk * 2));
    CUDA_OK(cudaMemset(r->ddv, 0xff, r->nk * 2));
    flashc_status st = flashc_attn_bwd(&pr, &t.q, &t.k, &t.v, &t.o, &t.dout, &t.lse, &t.dq,
                                       &t.dk, &t.dv, NULL);
    if (st != FLASHC_OK)
        return st;
    CUDA_OK(stream ? cudaStreamSynchronize(stream) : cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(r->hdq, r->ddq, r->nq * 2, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(r->hdk, r->ddk, r->nk * 2, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(r->hdv, r->ddv, r->nk * 2, cudaMemcpyDeviceToHost));
    return FLASHC_OK;
}

/* ---- the references ----------------------------------------------------------------------- */

/* float64-accumulating oracle (the library's naive backward) on float32 copies of the rounded
 * inputs and the device forward's o: gq (like q), gk, gv (like k). */
static void reference(const bwd_case *c, const bufs *r, float *gq, float *gk, float *gv)
{
    flashc_attn_params pr = params_of(c, NULL, &r->al_host);
    flashc_tensor q = view(c, r->fq, FLASHC_F32, c->Sq, c->Hq, FLASHC_DEVICE_CPU);
    flashc_tensor k = view(c, r->fk, FLASHC_F32, c->Sk, c->Hkv, FLASHC_DEVICE_CPU);
    flashc_tensor v = vview(c, r->fv, FLASHC_F32, c->Sk, c->Hkv, FLASHC_DEVICE_CPU);
    flashc_tensor o = vview(c, r->fo, FLASHC_F32, c->Sq, c->Hq, FLASHC_DEVICE_CPU);
    flashc_tensor dout = vview(c, r->fdo, FLASHC_F32, c->Sq, c->Hq, FLASHC_DEVICE_CPU);
    flashc_tensor dq = view(c, gq, FLASHC_F32, c->Sq, c->Hq, FLASHC_DEVICE_CPU);
    flashc_tensor dk = view(c, gk, FLASHC_F32, c->Sk, c->Hkv, FLASHC_DEVICE_CPU);
    flashc_tensor dv = vview(c, gv, FLASHC_F32, c->Sk, c->Hkv, FLASHC_DEVICE_CPU);
    TU_OK(flashc_attn_bwd_naive(&pr, &q, &k, &v, &o, &dout, NULL, &dq, &dk, &dv, NULL));
}

/* The naive same-precision backward (see the top of the file) into nq (like q), nk, nv (like k),
 * as floats holding dtype values. */
static void naive_lowp(const bwd_case *c, const bufs *r, float *nq, float *nk, float *nv)
{
    /* D: q and k's columns (q.k, dq, dk), Dv: v, o, dout's (dout.v, D_i, dv); W the rows of
     * the accumulators */
    const int64_t Sq = c->Sq, Sk = c->Sk, D = c->D, Dv = dv_of(c), W = wid(c);
    const int64_t grp = c->Hq / c->Hkv;
    const float scale = (float)(1.0 / sqrt((double)D));
    const flashc_dtype dt = c->dt;
    float *P = xmalloc((size_t)Sq * Sk * 4), *dS = xmalloc((size_t)Sq * Sk * 4);
    float *qs = xmalloc((size_t)Sq * D * 4);
    float *kacc = xmalloc((size_t)Sk * W * 4), *vacc = xmalloc((size_t)Sk * W * 4);
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t hk = 0; hk < c->Hkv; hk++) {
            memset(kacc, 0, (size_t)Sk * W * 4);
            memset(vacc, 0, (size_t)Sk * W * 4);
            for (int64_t h = hk * grp; h < (hk + 1) * grp; h++) {
#pragma omp parallel for schedule(dynamic, 8)
                for (int64_t i = 0; i < Sq; i++) {
                    const float *q = r->fq + off(c, Sq, c->Hq, b, i, h, 0);
                    const float *o = r->fo + off(c, Sq, c->Hq, b, i, h, 0);
                    const float *g = r->fdo + off(c, Sq, c->Hq, b, i, h, 0);
                    float *qsi = qs + i * D;
                    for (int64_t d = 0; d < D; d++)
                        qsi[d] = rnd(dt, q[d] * scale);
                    int64_t klo, kend;
                    key_range(c, i, &klo, &kend);
                    float *p = P + i * Sk, *ds = dS + i * Sk;
                    float m = -INFINITY, l = 0.0f, Di = 0.0f;
                    const float slope = c->alibi ? slope_of((int)h) : 0.0f;
                    const int64_t ai = i + Sk - Sq;
                    for (int64_t j = 0; j < Sk; j++) {
                        p[j] = -INFINITY;
                        ds[j] = 1.0f; /* the softcap derivative, briefly */
                        if (j >= klo && j < kend) {
                            const float *k = r->fk + off(c, Sk, c->Hkv, b, j, hk, 0);
                            float acc = 0.0f;
                            for (int64_t d = 0; d < D; d++)
                                acc += qsi[d] * k[d];
                            p[j] = rnd(dt, acc);
                            if (c->softcap > 0.0f) {
                                const float th = tanhf(p[j] / c->softcap);
                                p[j] = rnd(dt, c->softcap * th);
                                ds[j] = rnd(dt, 1.0f - th * th);
                            }
                            if (c->alibi)
                                p[j] = rnd(dt, p[j] - slope * (float)(ai > j ? ai - j : j - ai));
                            m = p[j] > m ? p[j] : m;
                        }
                    }
                    for (int64_t j = klo; j < kend; j++)
                        l += (p[j] = expf(p[j] - m));
                    for (int64_t d = 0; d < Dv; d++)
                        Di += g[d] * o[d];
                    for (int64_t j = 0; j < Sk; j++) {
                        const int in = j >= klo && j < kend;
                        p[j] = in ? rnd(dt, p[j] / l) : 0.0f;
                        const float *v = r->fv + off(c, Sk, c->Hkv, b, j, hk, 0);
                        float acc = 0.0f;
                        for (int64_t d = 0; d < Dv; d++)
                            acc += g[d] * v[d];
                        const float dcap = ds[j];
                        ds[j] = rnd(dt, p[j] * (rnd(dt, acc) - Di));
                        if (c->softcap > 0.0f)
                            ds[j] = rnd(dt, ds[j] * dcap);
                    }
                    float acc[256] = {0};
                    for (int64_t j = klo; j < kend; j++) {
                        const float *k = r->fk + off(c, Sk, c->Hkv, b, j, hk, 0);
                        for (int64_t d = 0; d < D; d++)
                            acc[d] += ds[j] * k[d];
                    }
                    float *dqi = nq + off(c, Sq, c->Hq, b, i, h, 0);
                    for (int64_t d = 0; d < D; d++)
                        dqi[d] = rnd(dt, rnd(dt, acc[d]) * scale);
                }
#pragma omp parallel for schedule(dynamic, 8)
                for (int64_t j = 0; j < Sk; j++) {
                    float ak[256] = {0}, av[256] = {0};
                    for (int64_t i = 0; i < Sq; i++) {
                        const float ds = dS[i * Sk + j], p = P[i * Sk + j];
                        if (p == 0.0f && ds == 0.0f)
                            continue;
                        const float *q = r->fq + off(c, Sq, c->Hq, b, i, h, 0);
                        const float *g = r->fdo + off(c, Sq, c->Hq, b, i, h, 0);
                        for (int64_t d = 0; d < D; d++)
                            ak[d] += ds * q[d];
                        for (int64_t d = 0; d < Dv; d++)
                            av[d] += p * g[d];
                    }
                    for (int64_t d = 0; d < D; d++)
                        kacc[j * W + d] += rnd(dt, rnd(dt, ak[d]) * scale);
                    for (int64_t d = 0; d < Dv; d++)
                        vacc[j * W + d] += rnd(dt, av[d]);
                }
            }
            for (int64_t j = 0; j < Sk; j++) {
                for (int64_t d = 0; d < D; d++)
                    nk[off(c, Sk, c->Hkv, b, j, hk, d)] = rnd(dt, kacc[j * W + d]);
                for (int64_t d = 0; d < Dv; d++)
                    nv[off(c, Sk, c->Hkv, b, j, hk, d)] = rnd(dt, vacc[j * W + d]);
            }
        }
    free(P), free(dS), free(qs), free(kacc), free(vacc);
}

/* Max |got - ref| and |naive - ref| over n elements; counts non-finite results. */
static void errors(flashc_dtype dt, const uint16_t *got, const float *naive, const float *ref,
                   int64_t n, double *e_got, double *e_naive, int64_t *bad)
{
    double eg = 0.0, en = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const float g = from_bits(dt, got[i]);
        if (!isfinite(g)) {
            (*bad)++;
            continue;
        }
        const double a = fabs((double)g - ref[i]), b = fabs((double)naive[i] - ref[i]);
        eg = a > eg ? a : eg;
        en = b > en ? b : en;
    }
    *e_got = eg, *e_naive = en;
}

/* The columns >= used of a gradient buffer (rows wid(c) wide): counts those the backward
 * wrote (anything but the 0xffff poison), then sets them all to 0 for the comparison. */
static int64_t unused_columns(const bwd_case *c, uint16_t *bits, int64_t n, int used)
{
    const int64_t W = wid(c);
    int64_t written = 0;
    if (used == W)
        return 0;
    for (int64_t i = 0; i < n; i++)
        if (i % W >= used) {
            written += bits[i] != 0xffff;
            bits[i] = 0;
        }
    return written;
}

/* One case: forward, backward, both references, the 2x rule for dq, dk, dv. */
/* flashc_attn_bwd_workspace_size of c's call on r's buffers */
static size_t bwd_ws_bytes(const bwd_case *c, bufs *r, cudaStream_t stream)
{
    flashc_attn_params pr = params_of(c, stream, &r->al_dev);
    pr.block_q = c->br, pr.block_k = c->bc;
    dev_views t = dev_views_of(c, r);
    size_t ws_bytes = 0;
    TU_OK(flashc_attn_bwd_workspace_size(&pr, &t.q, &t.k, &t.v, &t.o, &t.dout, &t.lse, &t.dq,
                                         &t.dk, &t.dv, &ws_bytes));
    return ws_bytes;
}

static void check_case(const bwd_case *c)
{
    bufs r;
    bufs_create(c, &r);
    cudaStream_t stream = NULL;
    void *ws = NULL;
    size_t ws_bytes = 0;
    if (c->use_stream)
        CUDA_OK(cudaStreamCreate(&stream));
    run_forward(c, &r, stream);
    if (c->use_stream) {
        /* a caller workspace of exactly the queried size, poisoned: the call must not rely on
         * its contents */
        ws_bytes = bwd_ws_bytes(c, &r, stream);
        /* at least the float32 dq accumulator of the problem's D columns (the kernel's rows
         * may be wider, the buffers' too) */
        assert_true(ws_bytes >= (size_t)c->B * c->Hq * c->Sq * c->D * 4);
        /* 16 bytes off an allocation's alignment: the library aligns inside */
        CUDA_OK(cudaMalloc(&ws, ws_bytes + 16));
        CUDA_OK(cudaMemset(ws, 0xff, ws_bytes + 16));
    }
    flashc_status st = run_backward(c, &r, stream, ws ? (char *)ws + 16 : NULL, ws_bytes);
    if (st != FLASHC_OK)
        fail_msg("flashc_attn_bwd: %s: %s", flashc_status_string(st), flashc_last_error());
    if (ws)
        CUDA_OK(cudaFree(ws));
    if (stream)
        CUDA_OK(cudaStreamDestroy(stream));

    /* zeroed: the columns past D / Dv of a Dk != Dv case are nobody's and compare as 0 */
    float *gq = calloc(r.nq, 4), *gk = calloc(r.nk, 4), *gv = calloc(r.nk, 4);
    float *nq = calloc(r.nq, 4), *nk = calloc(r.nk, 4), *nv = calloc(r.nk, 4);
    if (!gq || !gk || !gv || !nq || !nk || !nv)
        fail_msg("out of host memory");
    reference(c, &r, gq, gk, gv);
    naive_lowp(c, &r, nq, nk, nv);
    /* ... and the kernel must not have written them: still the NaN poison */
    const int64_t beyond = unused_columns(c, r.hdq, r.nq, c->D) +
                           unused_columns(c, r.hdk, r.nk, c->D) +
                           unused_columns(c, r.hdv, r.nk, dv_of(c));
    double e[3], en[3];
    int64_t bad = 0;
    errors(c->dt, r.hdq, nq, gq, r.nq, &e[0], &en[0], &bad);
    errors(c->dt, r.hdk, nk, gk, r.nk, &e[1], &en[1], &bad);
    errors(c->dt, r.hdv, nv, gv, r.nk, &e[2], &en[2], &bad);
    /* rows that see no key: dq exactly zero */
    int64_t nonzero = 0, empty_rows = 0;
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t i = 0; i < c->Sq; i++) {
            int64_t lo, hi;
            key_range(c, i, &lo, &hi);
            if (lo < hi)
                continue;
            empty_rows++;
            for (int64_t h = 0; h < c->Hq; h++)
                for (int64_t d = 0; d < c->D; d++)
                    nonzero += from_bits(c->dt, r.hdq[off(c, c->Sq, c->Hq, b, i, h, d)]) != 0.0f;
        }
    char tiles[128] = "";
    if (c->br || c->bc)
        snprintf(tiles, sizeof tiles, " tiles %dx%d", c->br, c->bc);
    if (c->win)
        snprintf(tiles + strlen(tiles), sizeof tiles - strlen(tiles), " window (%d, %d)", c->wl,
                 c->wr);
    if (c->softcap > 0.0f)
        snprintf(tiles + strlen(tiles), sizeof tiles - strlen(tiles), " softcap %g", c->softcap);
    if (c->alibi)
        snprintf(tiles + strlen(tiles), sizeof tiles - strlen(tiles), " alibi");
    if (c->Dv)
        snprintf(tiles + strlen(tiles), sizeof tiles - strlen(tiles), " Dv=%d", c->Dv);
    if (empty_rows)
        snprintf(tiles + strlen(tiles), sizeof tiles - strlen(tiles), " (%lld empty rows)",
                 (long long)empty_rows);
    printf("  %s D=%3d B=%d Sq=%4d Sk=%4d Hq=%d Hkv=%d causal=%d%s%s%s%s: dq %.3g (naive %.3g) "
           "dk %.3g (%.3g) dv %.3g (%.3g)\n",
           dtname(c->dt), c->D, c->B, c->Sq, c->Sk, c->Hq, c->Hkv, c->causal,
           c->deterministic ? " det" : "", c->bhsd ? " bhsd" : "",
           c->use_stream ? " stream+ws" : "", tiles, e[0], en[0], e[1], en[1], e[2], en[2]);
    free(gq), free(gk), free(gv), free(nq), free(nk), free(nv);
    bufs_destroy(&r);
    if (bad)
        fail_msg("%lld gradients non-finite or unwritten", (long long)bad);
    if (nonzero)
        fail_msg("%lld dq elements of rows that see no key are not 0", (long long)nonzero);
    if (beyond)
        fail_msg("%lld gradient elements past the head dim written", (long long)beyond);
    /* flash-attn's floor: one ulp at 0.3 (2 x the rounding error there) */
    const double floor = c->dt == FLASHC_BF16 ? 1.0 / 512 : 1.0 / 4096;
    static const char *names[3] = {"dq", "dk", "dv"};
    for (int i = 0; i < 3; i++)
        if (!(e[i] <= 2.0 * en[i] + floor))
            fail_msg("%s error %.4g > 2 x naive %.4g + %.3g", names[i], e[i], en[i], floor);
}

static const int pairs_short[][2] = {{1, 1}, {113, 203}, {128, 217}, {203, 113}};
static const int heads_short[][2] = {{4, 4}, {6, 2}, {4, 1}};

/* One (dtype, head dim): every short pair x causal x head layout (fast mode, plus
 * deterministic on GQA), then the longer pairs with fewer heads. */
static void suite(flashc_dtype dt, int D)
{
    if (small_only()) {
        /* under compute-sanitizer (~100x slower): GQA, causal, one pair each way, both modes */
        bwd_case a = {1, 113, 203, 6, 2, D, 1, dt, 0, 0, 0, 0, 0};
        check_case(&a);
        bwd_case b = {1, 203, 113, 6, 2, D, 1, dt, 1, 0, 0, 0, 0};
        check_case(&b);
        return;
    }
    for (int s = 0; s < 4; s++)
        for (int causal = 0; causal < 2; causal++)
            for (int hh = 0; hh < 3; hh++)
                for (int det = 0; det < (hh == 1 ? 2 : 1); det++) {
                    bwd_case c = {2, pairs_short[s][0], pairs_short[s][1], heads_short[hh][0],
                                  heads_short[hh][1], D, causal, dt, det, 0, 0, 0, 0};
                    check_case(&c);
                }
    for (int causal = 0; causal < 2; causal++) {
        bwd_case c = {1, 256, 512, 4, 2, D, causal, dt, causal, 0, 0, 0, 0};
        check_case(&c);
        bwd_case l = {1, 1023, 1024, 2, 1, D, causal, dt, 0, 0, 0, 0, 0};
        check_case(&l);
    }
    /* the longest pair once per head dim in bf16 (the references are O(S^2 D) on the host) */
    if (dt == FLASHC_BF16 && D <= 128) {
        bwd_case c = {1, 2048, 2048, 2, 1, D, 1, dt, 1, 0, 0, 0, 0};
        check_case(&c);
    }
}

static void test_bf16_d64(void **state) { (void)state; suite(FLASHC_BF16, 64); }
static void test_bf16_d96(void **state) { (void)state; suite(FLASHC_BF16, 96); }
static void test_bf16_d128(void **state) { (void)state; suite(FLASHC_BF16, 128); }
static void test_bf16_d256(void **state) { (void)state; suite(FLASHC_BF16, 256); }
/* d 192: sm80p's d 192 instance by default; FLASHC_CUDA_BWD_KERNEL=sm90h on a Hopper GPU its
 * d 192 kernel (attn_bwd_sm90h.cu) */
static void test_bf16_d192(void **state) { (void)state; suite(FLASHC_BF16, 192); }
static void test_f16_d192(void **state) { (void)state; suite(FLASHC_F16, 192); }
static void test_f16_d64(void **state) { (void)state; suite(FLASHC_F16, 64); }
static void test_f16_d96(void **state) { (void)state; suite(FLASHC_F16, 96); }
static void test_f16_d128(void **state) { (void)state; suite(FLASHC_F16, 128); }
static void test_f16_d256(void **state) { (void)state; suite(FLASHC_F16, 256); }

/* (B, H, S, D) buffers passed as strided views, on a user stream with a caller workspace. */
static void test_strided_stream_workspace(void **state)
{
    (void)state;
    bwd_case c = {2, 77, 301, 4, 2, 128, 1, FLASHC_BF16, 0, 1, 1, 0, 0};
    check_case(&c);
    c.causal = 0, c.dt = FLASHC_F16, c.D = 64, c.Sq = 300, c.Sk = 5, c.deterministic = 1;
    check_case(&c);
}

/* The variants behind non-default tiles (params.block_q / block_k; the bench's ladder). */
static void test_other_tiles(void **state)
{
    (void)state;
    static const int tiles[][3] = {{128, 64, 64}, {64, 128, 128}}; /* D, br, bc */
    for (int dt = 0; dt < 2; dt++)
        for (int t = 0; t < 2; t++) {
            const flashc_dtype d = dt ? FLASHC_F16 : FLASHC_BF16;
            const int D = tiles[t][0], br = tiles[t][1], bc = tiles[t][2];
            bwd_case a = {2, 113, 203, 6, 2, D, 1, d, 0, 0, 0, br, bc};
            check_case(&a);
            bwd_case b = {1, 203, 113, 4, 1, D, 1, d, 1, 0, 0, br, bc};
            check_case(&b);
            if (small_only())
                continue;
            bwd_case l = {1, 1023, 1024, 2, 1, D, 0, d, 0, 0, 1, br, bc};
            check_case(&l);
            bwd_case m = {1, 777, 1024, 4, 2, D, 1, d, 1, 0, 0, br, bc};
            check_case(&m);
        }
}

/* Host copies of the gradients of r's last backward, to hold later runs against. */
typedef struct grads {
    uint16_t *dq, *dk, *dv;
} grads;

static grads grads_keep(const bufs *r)
{
    grads g = {xmalloc(r->nq * 2), xmalloc(r->nk * 2), xmalloc(r->nk * 2)};
    memcpy(g.dq, r->hdq, r->nq * 2);
    memcpy(g.dk, r->hdk, r->nk * 2);
    memcpy(g.dv, r->hdv, r->nk * 2);
    return g;
}

/* r's dk, dv (and dq where with_dq) bit for bit those kept in g */
static void grads_same(const grads *g, const bufs *r, int with_dq)
{
    if (with_dq)
        assert_memory_equal(g->dq, r->hdq, r->nq * 2);
    assert_memory_equal(g->dk, r->hdk, r->nk * 2);
    assert_memory_equal(g->dv, r->hdv, r->nk * 2);
}

static void grads_free(grads *g) { free(g->dq), free(g->dk), free(g->dv); }

/* var set to val (NULL: unset) */
static void env_put(const char *var, const char *val)
{
    if (val)
        setenv(var, val, 1);
    else
        unsetenv(var);
}

/* One backward of c with var = base (NULL: unset) kept, then REPS more under each of the NV
 * values of vals (NULL: unset), each bit for bit the kept gradients: dk, dv, and dq where
 * with_dq (fast mode's dQ adds are atomic). var is left as the last value set. */
static void grads_same_over(const bwd_case *c, const char *var, const char *base,
                            const char *const *vals, int nv, int reps, int with_dq)
{
    bufs r;
    bufs_create(c, &r);
    run_forward(c, &r, NULL);
    env_put(var, base);
    assert_int_equal(run_backward(c, &r, NULL, NULL, 0), FLASHC_OK);
    grads kept = grads_keep(&r);
    for (int v = 0; v < nv; v++) {
        env_put(var, vals[v]);
        for (int rep = 0; rep < reps; rep++) {
            assert_int_equal(run_backward(c, &r, NULL, NULL, 0), FLASHC_OK);
            grads_same(&kept, &r, with_dq);
        }
    }
    grads_free(&kept);
    bufs_destroy(&r);
}

/* Deterministic mode: dq, dk, dv bit-identical over 3 runs (fast mode: dk, dv too, which never
 * use atomics). Many K blocks per Q block, GQA, so the dQ order matters. */
static void test_deterministic_bitwise(void **state)
{
    (void)state;
    const int S = small_only() ? 300 : 1500;
    /* d 128 and 64: sm90v3u by default on a Hopper GPU (sm90v2 and sm90v3w have both; sm90v2s
     * d 64 only); 80 and 48: sm80, or sm90v3u's padded entries when forced; 256 and 160: sm90hs
     * on a Hopper GPU (160 padded into its d 192 kernels), elsewhere sm80p where its shared
     * memory fits (on an A100 d 256 takes sm80's two-slice instance), sm80's two-slice
     * instances when forced; FLASHC_CUDA_BWD_KERNEL=sm90h: its d 256 kernel and its d 192 one */
    static const int dims[] = {128, 64, 80, 48, 256, 160};
    for (int di = 0; di < 6; di++)
    for (int det = 1; det >= 0; det--)
        for (int causal = 0; causal < 2; causal++) {
            const int D = dims[di];
            bwd_case c = {2, S, S + 37, 8, 2, D, causal, FLASHC_BF16, det, 0, 0, 0, 0};
            bufs r;
            bufs_create(&c, &r);
            run_forward(&c, &r, NULL);
            assert_int_equal(run_backward(&c, &r, NULL, NULL, 0), FLASHC_OK);
            grads first = grads_keep(&r);
            int64_t diff_dq = 0;
            for (int rep = 1; rep < 3; rep++) {
                assert_int_equal(run_backward(&c, &r, NULL, NULL, 0), FLASHC_OK);
                grads_same(&first, &r, det);
                for (int64_t i = 0; !det && i < r.nq; i++)
                    diff_dq += first.dq[i] != r.hdq[i];
            }
            printf("  D=%d det=%d causal=%d S=%d: dk, dv%s bit-identical over 3 runs%s", D, det,
                   causal, S, det ? ", dq" : "", det ? "\n" : "");
            if (!det)
                printf("; fast-mode dq elements that moved: %lld of %lld\n", (long long)diff_dq,
                       (long long)(2 * r.nq));
            grads_free(&first);
            bufs_destroy(&r);
        }
}

/* Deterministic case c's dq, dk, dv bit-identical over 3 runs of the backward (one forward). */
static void det_bits_3runs(const bwd_case *c)
{
    bufs r;
    bufs_create(c, &r);
    run_forward(c, &r, NULL);
    uint16_t *first = xmalloc(r.nq * 2 + 2 * r.nk * 2);
    for (int rep = 0; rep < 3; rep++) {
        assert_int_equal(run_backward(c, &r, NULL, NULL, 0), FLASHC_OK);
        uint16_t *got[3] = {r.hdq, r.hdk, r.hdv};
        const int64_t n[3] = {r.nq, r.nk, r.nk}, at[3] = {0, r.nq, r.nq + r.nk};
        for (int x = 0; x < 3; x++) {
            if (rep == 0)
                memcpy(first + at[x], got[x], n[x] * 2);
            else
                assert_memory_equal(first + at[x], got[x], n[x] * 2);
        }
    }
    printf("    det: dq, dk, dv bit-identical over 3 runs\n");
    free(first);
    bufs_destroy(&r);
}

/* Whether the current device is compute capability 9.0, where the sm_90a families run; if not,
 * prints that WHAT is skipped there. */
static int cc90_or_skip(const char *what)
{
    int dev = 0, major = 0, minor = 0;
    CUDA_OK(cudaGetDevice(&dev));
    CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    CUDA_OK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    if (major == 9 && minor == 0)
        return 1;
    printf("  %s: compute capability %d.%d, not 9.0: not served, skipped\n", what, major, minor);
    return 0;
}

/* Family CAND's gradients against family REF's, both forced by FLASHC_CUDA_BWD_KERNEL (where
 * neither serves, e.g. not on compute capability 9.0, both calls get the dispatcher's choice and
 * the comparison holds trivially): dq, dk, dv bit-identical in deterministic mode, dk, dv in
 * fast mode (dq's adds are atomic there), twice. Many heads and K blocks (sm90v3wg's groups, a
 * short last group), GQA, Sq != Sk, causal, a left-only window, bf16 and fp16, at the head dims
 * of DIMS (0-terminated); DET: which modes (bit 0 fast, bit 1 deterministic). */
static void family_bits(const char *cand, const char *ref, const int *dims, int modes)
{
    char *saved = env_save("FLASHC_CUDA_BWD_KERNEL");
    /* S 900 (short): 15 Q blocks x 4 heads a group = 60 steps, G = 9 heads of 10 on 132 SMs */
    const int S = small_only() ? 900 : 1500;
    for (const int *dp = dims; *dp; dp++)
        for (int det = 0; det < 2; det++)
            for (int v = 0; v < 4 && (modes >> det & 1); v++) {
                /* v 0: non-causal bf16, 1: causal fp16, 2: left window bf16, 3: non-causal fp16 */
                bwd_case c = {5, S, S + 37, 8, 2, *dp, v == 1, v & 1 ? FLASHC_F16 : FLASHC_BF16,
                              det, 0, 0, 0, 0};
                if (v == 2)
                    c.win = 1, c.wl = 300, c.wr = -1;
                grads_same_over(&c, "FLASHC_CUDA_BWD_KERNEL", ref, &cand, 1, 2, det);
                printf("  D=%d det=%d case %d (causal %d, window %d, %s) S=%d: %s %s bit-identical "
                       "to %s's, twice\n", *dp, det, v, c.causal, c.win,
                       c.dt == FLASHC_F16 ? "fp16" : "bf16", S, cand, det ? "dq, dk, dv" : "dk, dv",
                       ref);
            }
    env_restore("FLASHC_CUDA_BWD_KERNEL", saved);
}

/* sm90v3wg's deterministic mode (blocks in groups of heads, attn_bwd_sm90v3.cu) keeps
 * sm90v3w's order of dQ adds: the same bits at d 128 and 64. */
static void test_det_grouped_bits(void **state)
{
    (void)state;
    static const int dims[] = {128, 64, 0};
    family_bits("sm90v3wg", "sm90v3w", dims, 2);
}

/* sm90v3u (tiles without masked keys through a softmax loop without the mask's test,
 * attn_bwd_sm90v3.cu) does sm90v3wg's float operations: the same dk, dv in fast mode, the same
 * bits in deterministic mode; the cases have masked tiles (the last K block, the diagonal, the
 * window) and unmasked ones. */
static void test_unmasked_bits(void **state)
{
    (void)state;
    static const int dims[] = {128, 64, 0};
    family_bits("sm90v3u", "sm90v3wg", dims, 3);
}

/* sm90v3e (dV issued before the consumers' meeting, attn_bwd_sm90v3.cu) runs sm90v3u's
 * products in another order across the accumulators but each accumulator's own in the same
 * one: the same dk, dv in fast mode, the same bits in deterministic mode (at d 64 against
 * sm90v3wg's deterministic kernel, which sm90v3u launches there). */
static void test_early_bits(void **state)
{
    (void)state;
    static const int dims[] = {128, 64, 0};
    family_bits("sm90v3e", "sm90v3u", dims, 3);
}

/* sm90v3d (deterministic mode at d 64 with pipelined dQ adds: a tile's count released after
 * the next tile's adds are issued, three staging buffers; its blocks in groups of heads under
 * causal too, K blocks reversed; attn_bwd_sm90v3.cu) keeps the dQ order of the turn counters:
 * dq, dk, dv bit for bit sm90v3w's deterministic result (the K blocks head by head, one tile's
 * adds completed before the next's, a masked softmax loop), so neither the grouping of the
 * blocks nor the writers' pipelining nor the grid's order moves a bit; fast mode is sm90v3u's
 * kernel (dk, dv sm90v3w's). The cases: non-causal (grouped blocks), causal (grouped, K blocks
 * reversed; at S 1500 6 heads a group of 10, a short last group), a left window, bf16 and
 * fp16. */
static void test_pipelined_bits(void **state)
{
    (void)state;
    static const int dims[] = {64, 0};
    family_bits("sm90v3d", "sm90v3w", dims, 3);
}

/* sm90h2l and sm90hl (attn_bwd_sm90h.cu: sm90h2's d 192 and sm90h's d 256 kernels whose
 * deterministic mode completes a Q block's dQ adds once and releases the turn a Q block late)
 * keep the turn counters' dQ order: dq, dk, dv bit for bit sm90h2's / sm90h's deterministic
 * result over the same plane count (FLASHC_CUDA_BWD_DET_PLANES 1 and 3 asked: the families'
 * default counts differ, attn_bwd.cu's det_planes); fast mode is the base family's kernel (dk,
 * dv equal). The cases: non-causal, causal, a left window, bf16 and fp16. */
static void test_late_release_d192_d256(void **state)
{
    (void)state;
    static const int e192[] = {192, 0}, e256[] = {256, 0};
    char *planes_was = env_save("FLASHC_CUDA_BWD_DET_PLANES");
    for (int P = 1; P <= 3; P += 2) {
        setenv("FLASHC_CUDA_BWD_DET_PLANES", P == 1 ? "1" : "3", 1);
        printf(" %d plane(s)\n", P);
        family_bits("sm90h2l", "sm90h2", e192, P == 1 ? 3 : 2);
        family_bits("sm90hl", "sm90h", e256, P == 1 ? 3 : 2);
    }
    env_restore("FLASHC_CUDA_BWD_DET_PLANES", planes_was);
}

/* sm80p (head dims above 128: one thread block per K/V block, two warps per 16 keys, P^T and
 * dS^T through shared memory, attn_bwd_sm80.cu) does the sm80 instances' float operations in
 * the same order (S^T, dP^T per element over the full head dim, dV, dK, dQ tiles over the same
 * 16-query and 16-key steps, the same dQ turns): the same dk, dv in fast mode, the same bits
 * in deterministic mode, on both instances (160: the d 192 one, padded). */
static void test_sm80p_bits(void **state)
{
    (void)state;
    static const int dims[] = {256, 160, 0};
    family_bits("sm80p", "sm80", dims, 3);
}

/* sm90h2 and sm90h2e (attn_bwd_sm90h.cu: the d 192 kernel in 128 x 64 steps, helper bwd22;
 * sm90h2e with dV / dK issued before dQ), family FAM forced by FLASHC_CUDA_BWD_KERNEL and tiles
 * 128 x 64 (params.block_q / block_k: no other d 192
 * entry has them, so a call that did not reach sm90h2 fails instead of passing on another
 * kernel); compute capability 9.0 only (elsewhere nothing serves those tiles: skipped). Against
 * the fp64 reference with flash-attn's 2x rule: causal and not, Sq != Sk both ways, MHA / GQA /
 * MQA, windows, softcap, ALiBi, padded dims (136, 176, 160: its "p" entries), lengths whose
 * last Q block leaves warpgroup 1 no row (Sq 300, 64, 1: its deterministic turn skipped) or part
 * of one (200, 333), a caller workspace of the queried size (turn counters per 64 rows), K / V
 * broadcast over the batch (no tensor map: the launch's sm80 fallback in the same workspace);
 * every deterministic case bit-identical over 3 runs. Under compute-sanitizer one short case
 * (causal, GQA, softcap, ALiBi, deterministic, warpgroup 1 with part of its rows). */
/* fam: a family with the exact d 192 entries. The padded rows (D 136..184) run on its padded
 * entries where it has them (sm90h2, sm90h2e, sm90hs), else (sm90h2l) on the default's, which
 * since 2026-12-07 has the same 128 x 64 tiles at those dims (sm90hs's padded entry: a forced
 * family that does not serve a problem yields to the default); until then no default entry had
 * them and this test checked that such rows were refused. */
static void wide_q_d192(const char *fam)
{
    if (!cc90_or_skip(fam))
        return;
    char *saved = env_save("FLASHC_CUDA_BWD_KERNEL");
    setenv("FLASHC_CUDA_BWD_KERNEL", fam, 1);
    if (small_only()) {
        const bwd_case c = {1, 200, 203, 6, 2, 192, 1, FLASHC_BF16, 1, 0, 0, 128, 64,
                            0, 0, 0, 20.0f, 1, 0, 0, 0};
        check_case(&c);
    }
    /* B Sq Sk Hq Hkv D causal dt det bhsd stream br bc | win wl wr softcap alibi | Dv wide bcast */
    static const bwd_case cases[] = {
        {1, 200, 203, 6, 2, 192, 1, FLASHC_BF16, 1, 0, 0, 128, 64, 0, 0, 0, 0.0f, 0, 0, 0, 0},
        {1, 113, 203, 4, 2, 192, 0, FLASHC_F16, 1, 0, 0, 128, 64, 1, 50, 30, 20.0f, 1, 0, 0, 0},
        {2, 300, 300, 6, 2, 192, 1, FLASHC_BF16, 1, 0, 0, 128, 64, 0, 0, 0, 0.0f, 0, 0, 0, 0},
        {1, 511, 640, 4, 2, 192, 0, FLASHC_F16, 1, 0, 0, 128, 64, 1, 150, 90, 20.0f, 1, 0, 0, 0},
        {1, 64, 500, 4, 2, 192, 0, FLASHC_BF16, 1, 0, 0, 128, 64, 0, 0, 0, 0.0f, 0, 0, 0, 0},
        {2, 200, 333, 4, 4, 192, 0, FLASHC_F16, 0, 0, 0, 128, 64, 0, 0, 0, 0.0f, 0, 0, 0, 0},
        {1, 333, 200, 4, 1, 192, 1, FLASHC_BF16, 1, 0, 1, 128, 64, 0, 0, 0, 0.0f, 0, 0, 0, 0},
        {1, 1000, 1024, 2, 1, 192, 1, FLASHC_BF16, 0, 1, 0, 128, 64, 0, 0, 0, 0.0f, 0, 0, 0, 0},
        {1, 777, 1024, 4, 2, 192, 1, FLASHC_F16, 1, 0, 0, 128, 64, 0, 0, 0, 0.0f, 0, 0, 0, 0},
        {2, 203, 313, 6, 2, 192, 0, FLASHC_BF16, 0, 0, 0, 128, 64, 1, 37, 19, 0.0f, 0, 0, 0, 0},
        {1, 300, 300, 4, 2, 192, 1, FLASHC_BF16, 1, 0, 0, 128, 64, 1, 50, -1, 0.0f, 0, 0, 0, 0},
        {1, 257, 257, 4, 1, 192, 1, FLASHC_BF16, 1, 0, 0, 128, 64, 0, 0, 0, 0.0f, 1, 0, 0, 0},
        {2, 113, 203, 6, 2, 192, 0, FLASHC_F16, 0, 0, 0, 128, 64, 0, 0, 0, 15.0f, 0, 0, 0, 0},
        {1, 1, 1, 4, 4, 192, 0, FLASHC_BF16, 1, 0, 0, 128, 64, 0, 0, 0, 0.0f, 0, 0, 0, 0},
        {2, 113, 203, 6, 2, 136, 1, FLASHC_BF16, 1, 0, 0, 128, 64, 0, 0, 0, 0.0f, 0, 0, 1, 0},
        {1, 203, 113, 4, 1, 176, 0, FLASHC_F16, 1, 1, 1, 128, 64, 0, 0, 0, 0.0f, 0, 0, 1, 0},
        {1, 400, 400, 2, 1, 160, 0, FLASHC_BF16, 1, 0, 0, 128, 64, 1, 70, -1, 30.0f, 1, 0, 1, 0},
        {2, 113, 203, 6, 2, 192, 1, FLASHC_BF16, 1, 0, 0, 128, 64, 0, 0, 0, 0.0f, 0, 0, 1, 1},
    };
    const int n_cases = (int)(sizeof cases / sizeof cases[0]);
    for (int i = 0; i < n_cases; i++) {
        if (small_only())
            break;
        const bwd_case *c = &cases[i];
        check_case(c);
        if (!c->deterministic)
            continue;
        det_bits_3runs(c);
    }
    env_restore("FLASHC_CUDA_BWD_KERNEL", saved);
}

static void test_sm90h2_d192(void **state) { (void)state; wide_q_d192("sm90h2"); }
static void test_sm90h2e_d192(void **state) { (void)state; wide_q_d192("sm90h2e"); }

/* sm90hs's cases (the family forced by the caller): each under the 2x rule, the deterministic
 * ones bit-identical over 3 runs; then fast mode's bits against deterministic mode's at head dims
 * D0 (tiles BR0 x 64) and D1 (BR1 x 64; 0: the default tiles) */
static void hs_cases(const bwd_case *cases, int n_cases, int d0, int br0, int d1, int br1)
{
    for (int i = 0; i < n_cases; i++) {
        if (small_only() && i > 0)
            break;
        const bwd_case *c = &cases[i];
        check_case(c);
        if (c->deterministic && !small_only())
            det_bits_3runs(c);
    }
    /* fast mode's bits are deterministic mode's */
    for (int f = 0; f < 2 && !small_only(); f++) {
        const int br = f ? br1 : br0;
        bwd_case c = {2, 300, 333, 4, 2, f ? d1 : d0, 1, FLASHC_BF16, 0, 0, 0, br, br ? 64 : 0,
                      1, 90, -1, 0.0f, 0, 0, 0, 0};
        bufs r;
        bufs_create(&c, &r);
        run_forward(&c, &r, NULL);
        assert_int_equal(run_backward(&c, &r, NULL, NULL, 0), FLASHC_OK);
        grads g = grads_keep(&r);
        c.deterministic = 1;
        assert_int_equal(run_backward(&c, &r, NULL, NULL, 0), FLASHC_OK);
        grads_same(&g, &r, 1);
        printf("  sm90hs D=%d: fast and deterministic mode bit-identical\n", c.D);
        grads_free(&g);
        bufs_destroy(&r);
    }
}

/* sm90hs, the split family (attn_bwd_sm90h.cu's H_SPLIT: dK / dV by the fused kernels' H_NODQ
 * twins, dQ by attn_bwd_dq_sm90.cu's kernel of its own): d 192 with wide_q_d192's cases (tiles
 * 128 x 64, padded 136..184 included), d 256 with tiles 64 x 64 (padded 200..248): causal and
 * not, windows, softcap, ALiBi, MHA / GQA / MQA, Sq != Sk both ways (rows that see no key), 1 x 1,
 * (B, H, S, D) views, a stream with a caller workspace, K / V broadcast (the sm80 fallback);
 * every deterministic case bit-identical over 3 runs, and fast mode the same bits as
 * deterministic mode (the same kernels: no adds, nothing to order). Compute capability 9.0 only. */
static void test_sm90hs_d192_d256(void **state)
{
    (void)state;
    wide_q_d192("sm90hs");
    if (!cc90_or_skip("sm90hs"))
        return;
    char *saved = env_save("FLASHC_CUDA_BWD_KERNEL");
    setenv("FLASHC_CUDA_BWD_KERNEL", "sm90hs", 1);
    /* B Sq Sk Hq Hkv D causal dt det bhsd stream br bc | win wl wr softcap alibi | Dv wide bcast */
    static const bwd_case cases[] = {
        {1, 200, 203, 6, 2, 256, 1, FLASHC_BF16, 1, 0, 0, 64, 64, 0, 0, 0, 0.0f, 0, 0, 0, 0},
        {1, 113, 203, 4, 2, 256, 0, FLASHC_F16, 1, 0, 0, 64, 64, 1, 50, 30, 20.0f, 1, 0, 0, 0},
        {2, 300, 300, 6, 2, 256, 1, FLASHC_BF16, 0, 0, 0, 64, 64, 0, 0, 0, 0.0f, 0, 0, 0, 0},
        {1, 64, 500, 4, 1, 256, 0, FLASHC_BF16, 1, 0, 0, 64, 64, 0, 0, 0, 0.0f, 0, 0, 0, 0},
        {1, 333, 200, 4, 1, 256, 1, FLASHC_BF16, 1, 0, 1, 64, 64, 0, 0, 0, 0.0f, 0, 0, 0, 0},
        {1, 1000, 1024, 2, 1, 256, 1, FLASHC_BF16, 0, 1, 0, 64, 64, 0, 0, 0, 0.0f, 0, 0, 0, 0},
        {2, 203, 313, 6, 2, 256, 0, FLASHC_F16, 1, 0, 0, 64, 64, 1, 37, 19, 0.0f, 0, 0, 0, 0},
        {1, 257, 257, 4, 1, 256, 1, FLASHC_BF16, 1, 0, 0, 64, 64, 0, 0, 0, 0.0f, 1, 0, 0, 0},
        {1, 1, 1, 4, 4, 256, 0, FLASHC_BF16, 1, 0, 0, 64, 64, 0, 0, 0, 0.0f, 0, 0, 0, 0},
        {2, 113, 203, 6, 2, 200, 1, FLASHC_BF16, 1, 0, 0, 64, 64, 0, 0, 0, 0.0f, 0, 0, 1, 0},
        {1, 400, 400, 2, 1, 232, 0, FLASHC_F16, 1, 0, 0, 64, 64, 1, 70, -1, 30.0f, 1, 0, 1, 0},
        {2, 113, 203, 6, 2, 256, 1, FLASHC_BF16, 1, 0, 0, 64, 64, 0, 0, 0, 0.0f, 0, 0, 1, 1},
        /* d 192 on the 64-row dK / dV kernel (opt-in: block_q 64), exact and padded */
        {1, 300, 301, 6, 2, 192, 1, FLASHC_BF16, 1, 0, 0, 64, 64, 0, 0, 0, 0.0f, 0, 0, 0, 0},
        {1, 129, 250, 4, 1, 192, 0, FLASHC_F16, 1, 0, 1, 64, 64, 1, 40, 25, 15.0f, 1, 0, 0, 0},
        {2, 211, 150, 4, 2, 168, 1, FLASHC_BF16, 1, 0, 0, 64, 64, 0, 0, 0, 0.0f, 0, 0, 1, 0},
    };
    hs_cases(cases, (int)(sizeof cases / sizeof cases[0]), 256, 64, 192, 128);
    env_restore("FLASHC_CUDA_BWD_KERNEL", saved);
}

/* sm90hs at d 128 / 64 (attn_bwd_sm90v3.cu's V3_SPLIT: dK / dV by sm90v3u's kernel without its
 * dQ path, dQ by attn_bwd_dq_sm90.cu's kernel): causal and not, windows, softcap, ALiBi, MHA /
 * GQA / MQA, Sq != Sk both ways, 1 x 1, (B, H, S, D) views, a stream with a caller workspace, K /
 * V broadcast (the fallback); deterministic cases bitwise over 3 runs, fast mode the same bits
 * as deterministic mode. Compute capability 9.0 only. */
static void test_sm90hs_d64_d128(void **state)
{
    (void)state;
    if (!cc90_or_skip("sm90hs"))
        return;
    char *saved = env_save("FLASHC_CUDA_BWD_KERNEL");
    setenv("FLASHC_CUDA_BWD_KERNEL", "sm90hs", 1);
    /* B Sq Sk Hq Hkv D causal dt det bhsd stream br bc | win wl wr softcap alibi | Dv wide bcast */
    static const bwd_case cases[] = {
        {1, 200, 203, 6, 2, 128, 1, FLASHC_BF16, 1, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0, 0, 0, 0},
        {1, 113, 203, 4, 2, 128, 0, FLASHC_F16, 1, 0, 0, 0, 0, 1, 50, 30, 20.0f, 1, 0, 0, 0},
        {2, 300, 300, 6, 2, 64, 1, FLASHC_BF16, 0, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0, 0, 0, 0},
        {1, 64, 500, 4, 1, 64, 0, FLASHC_BF16, 1, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0, 0, 0, 0},
        {1, 333, 200, 4, 1, 128, 1, FLASHC_BF16, 1, 0, 1, 0, 0, 0, 0, 0, 0.0f, 0, 0, 0, 0},
        {1, 1000, 1024, 2, 1, 128, 1, FLASHC_BF16, 0, 1, 0, 0, 0, 0, 0, 0, 0.0f, 0, 0, 0, 0},
        {2, 203, 313, 6, 2, 64, 0, FLASHC_F16, 1, 0, 0, 0, 0, 1, 37, 19, 0.0f, 0, 0, 0, 0},
        {1, 257, 257, 4, 1, 64, 1, FLASHC_BF16, 1, 0, 0, 0, 0, 0, 0, 0, 0.0f, 1, 0, 0, 0},
        {1, 1, 1, 4, 4, 128, 0, FLASHC_BF16, 1, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0, 0, 0, 0},
        {2, 130, 77, 8, 1, 128, 0, FLASHC_F16, 1, 0, 0, 0, 0, 0, 0, 0, 30.0f, 0, 0, 0, 0},
        {2, 113, 203, 6, 2, 128, 1, FLASHC_BF16, 1, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0, 0, 1, 0},
        {2, 113, 203, 6, 2, 64, 1, FLASHC_BF16, 1, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0, 0, 1, 1},
    };
    hs_cases(cases, (int)(sizeof cases / sizeof cases[0]), 128, 0, 64, 0);
    env_restore("FLASHC_CUDA_BWD_KERNEL", saved);
}
/* FLASHC_CUDA_BWD_TRACE (bwd_trace.cuh, the diagnostic of bench/gpu/bwd_trace.py): the traced
 * twins of sm90h's d 256, sm90h2's d 192 (layout 1) and sm90v3d's d 64 kernels (layout 2; fast
 * mode sm90v3u's kernel) give the untraced kernel's gradients bit for bit (fast: dk, dv; deterministic: dq,
 * dk, dv), and write their record: the file's magic, layout, grid, tiles, steps a block and
 * size; each block's header (steps <= the maximum, its clocks ascending, an SM id); each step's
 * stamps in order: layout 1, warpgroup 0's data, dQ epilogue, turn (deterministic mode), last
 * issue; layout 2, consumer warpgroup 0's data, staging wanted, staging had, and writer 0's
 * buffer full, turn (deterministic mode), issue. Non-causal and causal (K blocks reversed in
 * deterministic mode), GQA, Sq != Sk, bf16. Compute capability 9.0 only (elsewhere the families
 * are not served: skipped). */
static void test_bwd_trace(void **state)
{
    (void)state;
    if (!cc90_or_skip("trace"))
        return;
    char path[] = "/tmp/flashc_bwd_trace_XXXXXX";
    const int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    char *saved = env_save("FLASHC_CUDA_BWD_KERNEL");
    static const struct {
        int d, bm, bn, layout;
        const char *fam;
    } fams[] = {{256, 64, 64, 1, "sm90h"},
                {192, 128, 64, 1, "sm90h2"},
                {64, 64, 128, 2, "sm90v3d"}};
    for (int f = 0; f < 3; f++)
        for (int det = 0; det < 2; det++)
            for (int causal = 0; causal < 2; causal++) {
                /* under compute-sanitizer (FLASHC_TEST_SMALL): fast non-causal and
                 * deterministic causal only, shorter */
                if (small_only() && det != causal)
                    continue;
                const int S = small_only() ? 200 : 300;
                bwd_case c = {2, S, S + 33, 4, 2, fams[f].d, causal, FLASHC_BF16, det};
                bufs r;
                bufs_create(&c, &r);
                run_forward(&c, &r, NULL);
                setenv("FLASHC_CUDA_BWD_KERNEL", fams[f].fam, 1);
                unsetenv("FLASHC_CUDA_BWD_TRACE");
                assert_int_equal(run_backward(&c, &r, NULL, NULL, 0), FLASHC_OK);
                grads base = grads_keep(&r);
                remove(path);
                setenv("FLASHC_CUDA_BWD_TRACE", path, 1);
                assert_int_equal(run_backward(&c, &r, NULL, NULL, 0), FLASHC_OK);
                unsetenv("FLASHC_CUDA_BWD_TRACE");
                grads_same(&base, &r, det);
                /* the file: "FCBWDTR1", 16 int32 (version, grid x, y, steps, bm, bn, d, det,
                 * has_hi, sq, sk, group, hkv, b, header words, step words), int64 words */
                FILE *fp = fopen(path, "rb");
                assert_non_null(fp);
                char magic[8];
                int32_t h[16];
                int64_t words = 0;
                assert_int_equal(fread(magic, 1, 8, fp), 8);
                assert_int_equal(fread(h, 4, 16, fp), 16);
                assert_int_equal(fread(&words, 8, 1, fp), 1);
                assert_memory_equal(magic, "FCBWDTR1", 8);
                const int gx = (c.Sk + fams[f].bn - 1) / fams[f].bn, gy = c.B * c.Hkv;
                const int maxit = (c.Hq / c.Hkv) * ((c.Sq + fams[f].bm - 1) / fams[f].bm);
                assert_int_equal(h[0], fams[f].layout);
                assert_int_equal(h[1], gx);
                assert_int_equal(h[2], gy);
                assert_int_equal(h[3], maxit);
                assert_int_equal(h[4], fams[f].bm);
                assert_int_equal(h[6], fams[f].d);
                assert_int_equal(h[7], det);
                assert_int_equal(h[8], causal);
                const int hw = h[14], iw = h[15];
                assert_int_equal(words, (int64_t)gx * gy * (hw + (int64_t)iw * maxit));
                uint64_t *w = xmalloc((size_t)words * 8);
                assert_int_equal(fread(w, 8, (size_t)words, fp), (size_t)words);
                fclose(fp);
                int steps = 0;
                for (int blk = 0; blk < gx * gy; blk++) {
                    const uint64_t *hb = w + (int64_t)blk * (hw + (int64_t)iw * maxit);
                    assert_true(hb[7] <= (uint64_t)maxit);
                    assert_true(hb[0] > 0 && hb[0] <= hb[2]); /* %globaltimer */
                    assert_true(hb[1] < hb[3]);               /* %clock64 */
                    assert_true(hb[4] < 1024);                /* %smid */
                    for (int it = 0; it < (int)hb[7]; it++) {
                        const uint64_t *e = hb + hw + (int64_t)it * iw; /* warpgroup 0 */
                        if (fams[f].layout == 1) {
                            assert_true(hb[1] <= e[0] && e[0] <= e[1] && e[1] <= e[3] &&
                                        e[3] <= hb[3]);
                            if (det)
                                assert_true(e[1] <= e[2] && e[2] <= e[3]);
                        } else {
                            /* consumer 0 (its thread wrote the header too), then writer 0
                             * (the same SM's clock; its last issue may follow the end) */
                            assert_true(hb[1] <= e[0] && e[0] <= e[1] && e[1] <= e[2] &&
                                        e[2] <= hb[3]);
                            assert_true(hb[1] <= e[6] && e[6] <= e[8]);
                            if (det)
                                assert_true(e[6] <= e[7] && e[7] <= e[8]);
                        }
                        steps++;
                    }
                }
                assert_true(steps > 0);
                printf("  trace D=%d det=%d causal %d: %s bit-identical traced, %d blocks, %d "
                       "steps recorded\n", c.D, det, causal, fams[f].fam, gx * gy, steps);
                free(w);
                grads_free(&base);
                bufs_destroy(&r);
            }
    remove(path);
    env_restore("FLASHC_CUDA_BWD_KERNEL", saved);
}

/* sm90h2l: sm90h2 whose deterministic mode releases its turns a Q block late; the same wide
 * suite (its deterministic cases 3 runs bit for bit) */
static void test_sm90h2l_d192(void **state) { (void)state; wide_q_d192("sm90h2l"); }

/* FLASHC_CUDA_BWD_DET_FREE=1 (a diagnostic: deterministic mode's instructions with every turn
 * counting as taken, attn_bwd_args.det_free) on the sm90h families: the gradients still meet the
 * 2x rule (every add still lands; only their order is free). The d 64 default (sm90v3d) does not
 * read it: its deterministic mode stays bit-identical over 3 runs with the variable set. */
static void test_det_free(void **state)
{
    (void)state;
    if (!cc90_or_skip("FLASHC_CUDA_BWD_DET_FREE"))
        return;
    char *free_was = env_save("FLASHC_CUDA_BWD_DET_FREE");
    setenv("FLASHC_CUDA_BWD_DET_FREE", "1", 1);
    /* B Sq Sk Hq Hkv D causal dt det bhsd stream br bc | win wl wr softcap alibi */
    static const bwd_case cases[] = {
        {2, 300, 333, 4, 2, 256, 0, FLASHC_BF16, 1, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0, 0, 0, 0},
        {1, 500, 500, 4, 1, 256, 1, FLASHC_F16, 1, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0, 0, 0, 0},
        {2, 300, 333, 6, 2, 192, 0, FLASHC_BF16, 1, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0, 0, 0, 0},
        {1, 257, 300, 2, 1, 192, 1, FLASHC_F16, 1, 0, 1, 0, 0, 1, 50, -1, 0.0f, 0, 0, 0, 0},
    };
    for (int i = 0; i < 4; i++) {
        if (small_only() && i > 0)
            break;
        check_case(&cases[i]);
    }
    const bwd_case d64 = {2, 300, 333, 4, 2, 64, 0, FLASHC_BF16, 1, 0, 0, 0, 0,
                          0, 0, 0, 0.0f, 0, 0, 0, 0};
    det_bits_3runs(&d64);
    env_restore("FLASHC_CUDA_BWD_DET_FREE", free_was);
}

/* Deterministic mode's turn release without the __threadfence before its red.release.gpu (the
 * default since 2026-12-06; FLASHC_CUDA_BWD_DET_FENCE=1 puts it back, attn_bwd_common.cuh's
 * bwd_release_turn) changes no order of adds: dq, dk, dv bit for bit the fenced result, twice,
 * at every Hopper default (d 64 sm90v3d, 128 sm90v3u, 192 sm90h2l, 256 sm90hl) and on the sm80
 * family forced (d 64), non-causal bf16 and causal fp16. */
static void test_det_fence_bits(void **state)
{
    (void)state;
    if (!cc90_or_skip("the Hopper families' turn release"))
        return;
    char *fence_was = env_save("FLASHC_CUDA_BWD_DET_FENCE");
    char *kernel_was = env_save("FLASHC_CUDA_BWD_KERNEL");
    static const struct {
        const char *fam;
        int D;
    } runs[] = {{"", 64}, {"", 128}, {"", 192}, {"", 256}, {"sm80", 64}};
    const int S = small_only() ? 700 : 1300;
    for (int i = 0; i < 5; i++)
        for (int v = 0; v < 2; v++) {
            if (small_only() && i > 0 && v > 0)
                continue;
            bwd_case c = {3, S, S + 37, 8, 2, runs[i].D, v == 1, v ? FLASHC_F16 : FLASHC_BF16,
                          1, 0, 0, 0, 0};
            if (runs[i].fam[0])
                setenv("FLASHC_CUDA_BWD_KERNEL", runs[i].fam, 1);
            else
                unsetenv("FLASHC_CUDA_BWD_KERNEL");
            static const char *const unset[] = {NULL};
            grads_same_over(&c, "FLASHC_CUDA_BWD_DET_FENCE", "1", unset, 1, 2, 1);
            printf("  %s D=%d %s %s S=%d: without the fence bit-identical to with it, twice\n",
                   runs[i].fam[0] ? runs[i].fam : "default", runs[i].D,
                   v ? "causal" : "non-causal", v ? "fp16" : "bf16", S);
        }
    env_restore("FLASHC_CUDA_BWD_KERNEL", kernel_was);
    env_restore("FLASHC_CUDA_BWD_DET_FENCE", fence_was);
}

/* Fast mode's walk of the grid under an upper key bound (attn_bwd_common.cuh's bwd_block_of:
 * the last R heads K block by K block; attn_bwd.cu's order_tail, FLASHC_CUDA_BWD_ORDER = C:
 * R = ceil(C SMs / N)) must give every (K block, head) one thread block whatever R: at each
 * default family (d 64 / 128 sm90v3u, 192 sm90h2, 256 sm90h) and sm80 forced, causal with GQA 4
 * and Sq != Sk (and a right window at d 128), 5 batch x KV heads, the gradients under the 2x
 * rule at C = 0 (head by head) and the default, and dk, dv bit for bit those of C = 0 at C =
 * 0.05, 0.1, 0.18 (on 132 SMs with 6-18 K blocks: R from 1 to 4) and 1000 (every head). */
static void test_bwd_order(void **state)
{
    (void)state;
    char *order_was = env_save("FLASHC_CUDA_BWD_ORDER");
    char *kernel_was = env_save("FLASHC_CUDA_BWD_KERNEL");
    static const struct {
        const char *fam;
        int D, win;
    } runs[] = {{"sm80", 64, 0}, {"", 64, 0}, {"", 128, 0}, {"", 128, 1}, {"", 192, 0}, {"", 256, 0}};
    static const char *const orders[] = {"0.05", "0.1", "0.18", "1000"};
    const int S = small_only() ? 700 : 1100;
    const int hopper = cc90_or_skip("the Hopper defaults' grid order");
    for (int i = 0; i < 6; i++) {
        if (!runs[i].fam[0] && !hopper)
            continue;
        if (small_only() && i != 0 && i != 2 && i != 5)
            continue;
        bwd_case c = {5, S, S + 37, 4, 1, runs[i].D, !runs[i].win, i % 2 ? FLASHC_F16 : FLASHC_BF16,
                      0, 0, 0, 0, 0};
        if (runs[i].win)
            c.win = 1, c.wl = -1, c.wr = 50;
        if (runs[i].fam[0])
            setenv("FLASHC_CUDA_BWD_KERNEL", runs[i].fam, 1);
        else
            unsetenv("FLASHC_CUDA_BWD_KERNEL");
        setenv("FLASHC_CUDA_BWD_ORDER", "0", 1);
        check_case(&c);
        unsetenv("FLASHC_CUDA_BWD_ORDER");
        check_case(&c);
        grads_same_over(&c, "FLASHC_CUDA_BWD_ORDER", "0", orders, 4, 1, 0);
        printf("  %s D=%d %s: dk, dv bit-identical over the grid walks C = 0, 0.05, 0.1, "
               "0.18, 1000\n", runs[i].fam[0] ? runs[i].fam : "default", runs[i].D,
               runs[i].win ? "right window 50" : "causal");
    }
    env_restore("FLASHC_CUDA_BWD_KERNEL", kernel_was);
    env_restore("FLASHC_CUDA_BWD_ORDER", order_was);
}

/* FLASHC_CUDA_BWD_DET_PLANES=P (attn_bwd.cu's det_planes: deterministic mode's turns dealt over
 * P chains, each with its float32 dQ accumulator, summed in plane order by the postprocess) on
 * the sm90h families (d 256 sm90h and sm90hl, d 192 sm90h2, sm90h2l and sm90h's 64-row kernel):
 * the gradients under the 2x rule and bit-identical over 3 runs for P = 2 and 3; dk, dv the bits
 * of one plane (only dQ's order of adds changes); the workspace P accumulators large; unset, the
 * default (def_planes: the workspace and dq's bits those of P = the default); P = 0 and 9
 * (outside 1..8) the default. */
static int def_planes(const char *fam, int D, int upper, int Sq, int Sk)
{
    /* attn_bwd.cu's det_planes: the late-release families (sm90hl, sm90h2l) d 256 2 / 1
     * (without / with an upper key bound), d 192 4 up to 2k without one, else 2; the base
     * kernels 2 without an upper key bound up to 8k, else 1 */
    if (strcmp(fam, "sm90hl") == 0 || strcmp(fam, "sm90h2l") == 0)
        return D >= 256 ? (upper ? 1 : 2) : upper || Sq > 2048 || Sk > 2048 ? 2 : 4;
    return !upper && Sq <= 8192 && Sk <= 8192 ? 2 : 1;
}

static void test_det_planes(void **state)
{
    (void)state;
    if (!cc90_or_skip("FLASHC_CUDA_BWD_DET_PLANES"))
        return;
    char *saved = env_save("FLASHC_CUDA_BWD_KERNEL");
    char *planes_was = env_save("FLASHC_CUDA_BWD_DET_PLANES");
    static const struct {
        const char *fam;
        int D, br;
    } fams[] = {{"sm90h", 256, 64}, {"sm90h2", 192, 128}, {"sm90hl", 256, 64},
                {"sm90h2l", 192, 128}, {"sm90h", 192, 64}};
    for (size_t f = 0; f < sizeof fams / sizeof fams[0]; f++) {
        if (small_only() && f > 1)
            break;
        setenv("FLASHC_CUDA_BWD_KERNEL", fams[f].fam, 1);
        const int D = fams[f].D, br = fams[f].br;
        /* B Sq Sk Hq Hkv D causal dt det bhsd stream br bc | win wl wr softcap alibi */
        const bwd_case cases[] = {
            {2, 300, 333, 4, 2, D, 0, FLASHC_BF16, 1, 0, 0, br, 64, 0, 0, 0, 0.0f, 0, 0, 0, 0},
            {1, 500, 500, 4, 1, D, 1, FLASHC_F16, 1, 0, 1, br, 64, 0, 0, 0, 0.0f, 0, 0, 0, 0},
            {1, 257, 300, 2, 1, D, 0, FLASHC_BF16, 1, 0, 0, br, 64, 1, 50, 20, 0.0f, 0, 0, 0, 0},
        };
        for (int i = 0; i < 3; i++) {
            if (small_only() && i > 0)
                break;
            const bwd_case *c = &cases[i];
            printf("  %s d %d:\n", fams[f].fam, D);
            for (int P = 2; P <= 3; P++) {
                char pv[4];
                snprintf(pv, sizeof pv, "%d", P);
                setenv("FLASHC_CUDA_BWD_DET_PLANES", pv, 1);
                printf("   planes %d\n", P);
                check_case(c);
                if (i == 0)
                    det_bits_3runs(c);
            }
            /* one plane against P = 3 (dk, dv equal, dq a different order), the workspace,
             * the default (def_planes) and P values outside 1..8 (the default) */
            bufs r;
            bufs_create(c, &r);
            run_forward(c, &r, NULL);
            uint16_t *one = xmalloc((r.nq + 2 * r.nk) * 2);
            setenv("FLASHC_CUDA_BWD_DET_PLANES", "1", 1);
            const size_t ws1 = bwd_ws_bytes(c, &r, NULL);
            assert_int_equal(run_backward(c, &r, NULL, NULL, 0), FLASHC_OK);
            memcpy(one, r.hdq, r.nq * 2);
            memcpy(one + r.nq, r.hdk, r.nk * 2);
            memcpy(one + r.nq + r.nk, r.hdv, r.nk * 2);
            setenv("FLASHC_CUDA_BWD_DET_PLANES", "2", 1);
            const size_t ws2 = bwd_ws_bytes(c, &r, NULL);
            setenv("FLASHC_CUDA_BWD_DET_PLANES", "3", 1);
            const size_t ws3 = bwd_ws_bytes(c, &r, NULL);
            assert_true(ws3 >= ws1 + 2 * (size_t)c->B * c->Hq * c->Sq * D * 4);
            assert_int_equal(run_backward(c, &r, NULL, NULL, 0), FLASHC_OK);
            assert_memory_equal(one + r.nq, r.hdk, r.nk * 2);
            assert_memory_equal(one + r.nq + r.nk, r.hdv, r.nk * 2);
            const int upper = c->causal || (c->win && c->wr >= 0);
            const int pd = def_planes(fams[f].fam, D, upper, c->Sq, c->Sk);
            char pdv[4];
            snprintf(pdv, sizeof pdv, "%d", pd);
            setenv("FLASHC_CUDA_BWD_DET_PLANES", pdv, 1); /* the default's count, asked */
            const size_t wsp = bwd_ws_bytes(c, &r, NULL);
            if (pd <= 3)
                assert_int_equal(wsp, pd == 1 ? ws1 : pd == 2 ? ws2 : ws3);
            else
                assert_true(wsp >= ws3 + (size_t)c->B * c->Hq * c->Sq * D * 4);
            assert_int_equal(run_backward(c, &r, NULL, NULL, 0), FLASHC_OK);
            uint16_t *asked = xmalloc(r.nq * 2);
            memcpy(asked, r.hdq, r.nq * 2);
            unsetenv("FLASHC_CUDA_BWD_DET_PLANES");
            const size_t wsd = bwd_ws_bytes(c, &r, NULL);
            assert_int_equal(wsd, wsp);
            assert_int_equal(run_backward(c, &r, NULL, NULL, 0), FLASHC_OK);
            uint16_t *def = xmalloc(r.nq * 2);
            memcpy(def, r.hdq, r.nq * 2);
            assert_memory_equal(asked, def, r.nq * 2);
            if (pd == 1)
                assert_memory_equal(one, def, r.nq * 2);
            free(asked);
            for (int bad = 0; bad < 2; bad++) {
                setenv("FLASHC_CUDA_BWD_DET_PLANES", bad ? "9" : "0", 1);
                assert_int_equal(bwd_ws_bytes(c, &r, NULL), wsd);
                assert_int_equal(run_backward(c, &r, NULL, NULL, 0), FLASHC_OK);
                assert_memory_equal(def, r.hdq, r.nq * 2);
            }
            free(def);
            printf("   planes 3: dk, dv the bits of one plane; workspace %zu against %zu bytes; "
                   "default %d planes\n", ws3, ws1, pd);
            free(one);
            bufs_destroy(&r);
        }
    }
    env_restore("FLASHC_CUDA_BWD_DET_PLANES", planes_was);
    env_restore("FLASHC_CUDA_BWD_KERNEL", saved);
}

/* The call captured into a CUDA graph (no host synchronisation inside, workspace from the
 * scratch pool, an allocation node of the graph) replays to the same gradients as a direct
 * deterministic call. */
static void test_graph_capture(void **state)
{
    (void)state;
    bwd_case c = {1, 200, 333, 4, 2, 64, 1, FLASHC_BF16, 1, 0, 0, 0, 0};
    bufs r;
    bufs_create(&c, &r);
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreate(&stream));
    run_forward(&c, &r, stream);
    assert_int_equal(run_backward(&c, &r, stream, NULL, 0), FLASHC_OK);
    uint16_t *want = xmalloc(r.nq * 2);
    memcpy(want, r.hdq, r.nq * 2);

    flashc_attn_params pr = params_of(&c, stream, NULL);
    dev_views t = dev_views_of(&c, &r);
    flashc_tensor q = t.q, k = t.k, v = t.v, o = t.o, dout = t.dout, dq = t.dq, dk = t.dk,
                  dv = t.dv, lse = t.lse;
    CUDA_OK(cudaMemset(r.ddq, 0xff, r.nq * 2));
    cudaGraph_t graph;
    CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    flashc_status st = flashc_attn_bwd(&pr, &q, &k, &v, &o, &dout, &lse, &dq, &dk, &dv, NULL);
    CUDA_OK(cudaStreamEndCapture(stream, &graph));
    if (st != FLASHC_OK)
        fail_msg("captured flashc_attn_bwd: %s: %s", flashc_status_string(st), flashc_last_error());
    cudaGraphExec_t exec;
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    for (int rep = 0; rep < 2; rep++)
        CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    CUDA_OK(cudaMemcpy(r.hdq, r.ddq, r.nq * 2, cudaMemcpyDeviceToHost));
    assert_memory_equal(want, r.hdq, r.nq * 2);
    printf("  graph: captured call replayed twice, dq bit-identical to the direct call\n");
    CUDA_OK(cudaGraphExecDestroy(exec));
    CUDA_OK(cudaGraphDestroy(graph));
    CUDA_OK(cudaStreamDestroy(stream));
    free(want);
    bufs_destroy(&r);
}

/* Windows, softcap and ALiBi (flash-attn semantics, src/ref/attn_bwd.c), alone and together,
 * with the causal mask, GQA / MQA, Sq != Sk, rows that see no key, both modes; every head dim
 * (on a Hopper GPU 128: sm90v3w, 64: sm90v3w, the others sm80; FLASHC_CUDA_BWD_KERNEL=sm90v2
 * or sm90v3w puts 64 and 128 on that family, sm90v2e / sm90v2s / sm90v2sa 64).
 * Deterministic cases are also run
 * three times and compared bit for bit. */
static void test_modifiers(void **state)
{
    (void)state;
    /* B Sq Sk Hq Hkv D causal dt det bhsd stream br bc | win wl wr softcap alibi */
    static const bwd_case cases[] = {
        {2, 203, 313, 6, 2, 0, 0, FLASHC_BF16, 0, 0, 0, 0, 0, 1, 37, 19, 0.0f, 0},
        {1, 300, 300, 4, 2, 0, 1, FLASHC_BF16, 1, 0, 0, 0, 0, 1, 50, -1, 0.0f, 0},
        {2, 113, 203, 6, 2, 0, 0, FLASHC_F16, 0, 0, 0, 0, 0, 0, 0, 0, 15.0f, 0},
        {1, 257, 257, 4, 1, 0, 1, FLASHC_BF16, 1, 0, 0, 0, 0, 0, 0, 0, 0.0f, 1},
        {1, 300, 100, 4, 2, 0, 0, FLASHC_F16, 1, 0, 0, 0, 0, 1, 10, 5, 0.0f, 0},
        {1, 400, 400, 2, 1, 0, 0, FLASHC_BF16, 1, 0, 0, 0, 0, 1, 70, -1, 0.0f, 0},
        {1, 130, 260, 4, 4, 0, 0, FLASHC_BF16, 0, 0, 0, 0, 0, 1, 0, 0, 0.0f, 0},
        {1, 1000, 1024, 2, 1, 0, 1, FLASHC_BF16, 0, 0, 0, 0, 0, 1, 200, 0, 30.0f, 1},
        {1, 511, 640, 4, 2, 0, 0, FLASHC_F16, 1, 0, 0, 0, 0, 1, 150, 90, 20.0f, 1},
    };
    static const int dims[] = {128, 64, 96, 256};
    const int n_cases = (int)(sizeof cases / sizeof cases[0]);
    for (int di = 0; di < 4; di++)
        for (int i = 0; i < n_cases; i++) {
            if (small_only() && (dims[di] > 128 || (i != 1 && i != 2)))
                continue;
            if (dims[di] > 128 && i > 4 && i != 8) /* d 96, 256: a few cases each */
                continue;
            if (dims[di] == 96 && i != 2 && i != 5 && i != 8)
                continue;
            bwd_case c = cases[i];
            c.D = dims[di];
            check_case(&c);
            if (!c.deterministic)
                continue;
            det_bits_3runs(&c);
        }
}

/* ---- varlen ------------------------------------------------------------------------------- */

/* A varlen case: B sequences of lengths lq[b] x lk[b] packed into (total, H, D) tensors with
 * pad_q / pad_k rows past cu[B] that belong to no sequence; the modifiers as bwd_case. */
typedef struct vl_case {
    int B;
    const int *lq, *lk;
    int Hq, Hkv, D, causal;
    flashc_dtype dt;
    int deterministic;
    int pad_q, pad_k;
    int use_stream; /* a created stream and a caller workspace (poisoned, off alignment) */
    int win, wl, wr;
    float softcap;
    int alibi;
    int reps; /* deterministic: 3 runs compared bit for bit; fast: dk, dv compared */
    int no_ref; /* only the repeat and the zero rows (long sequences: the host references are
                   O(S^2 D)) */
    int Dv;     /* v, o, dout, dv's head dim (0: D); rows of every buffer as bwd_case's wid() */
} vl_case;

/* The dense case of one sequence of c (for the references and key_range). */
static bwd_case vl_seq_case(const vl_case *c, int b)
{
    bwd_case s;
    memset(&s, 0, sizeof s);
    s.B = 1, s.Sq = c->lq[b], s.Sk = c->lk[b], s.Hq = c->Hq, s.Hkv = c->Hkv, s.D = c->D;
    s.Dv = c->Dv;
    s.causal = c->causal, s.dt = c->dt, s.deterministic = c->deterministic;
    s.win = c->win, s.wl = c->wl, s.wr = c->wr, s.softcap = c->softcap, s.alibi = c->alibi;
    return s;
}

/* The packed tensors of a varlen case, host and device. */
typedef struct vl_bufs {
    int32_t cuq[33], cuk[33];
    int tq, tk, maxq, maxk;
    int64_t nq, nk;
    int W;          /* the row length of every buffer (wid of the sequences' cases) */
    int64_t beyond; /* gradient elements past D / Dv the backward wrote (vl_backward) */
    uint16_t *hq, *hk, *hv, *hdo, *ho, *hdq, *hdk, *hdv;
    float *fq, *fk, *fv, *fdo, *fo, *hlse, *hal;
    void *dq_, *dk_, *dv_, *ddo, *do_, *ddq, *ddk, *ddv;
    float *dlse, *dal;
    int32_t *dcuq, *dcuk;
    flashc_tensor al_host, al_dev, cq, ck;
    flashc_varlen vl;
} vl_bufs;

static void vl_create(const vl_case *c, vl_bufs *r)
{
    memset(r, 0, sizeof *r);
    assert_true(c->B <= 32);
    r->maxq = r->maxk = 0;
    for (int b = 0; b < c->B; b++) {
        r->cuq[b + 1] = r->cuq[b] + c->lq[b];
        r->cuk[b + 1] = r->cuk[b] + c->lk[b];
        r->maxq = c->lq[b] > r->maxq ? c->lq[b] : r->maxq;
        r->maxk = c->lk[b] > r->maxk ? c->lk[b] : r->maxk;
    }
    r->tq = r->cuq[c->B] + c->pad_q, r->tk = r->cuk[c->B] + c->pad_k;
    bwd_case fc = vl_seq_case(c, 0); /* fill() reads the dtype only; wid() the dims */
    r->W = wid(&fc);
    r->nq = (int64_t)r->tq * c->Hq * r->W, r->nk = (int64_t)r->tk * c->Hkv * r->W;
    uint16_t **h16[8] = {&r->hq, &r->hdo, &r->ho, &r->hdq, &r->hk, &r->hv, &r->hdk, &r->hdv};
    for (int i = 0; i < 8; i++)
        *h16[i] = xmalloc((i < 4 ? r->nq : r->nk) * 2);
    r->fq = xmalloc(r->nq * 4), r->fdo = xmalloc(r->nq * 4), r->fo = xmalloc(r->nq * 4);
    r->fk = xmalloc(r->nk * 4), r->fv = xmalloc(r->nk * 4);
    r->hlse = xmalloc((size_t)c->Hq * r->tq * 4);
    fill(&fc, r->nq, r->hq, r->fq);
    fill(&fc, r->nk, r->hk, r->fk);
    fill(&fc, r->nk, r->hv, r->fv);
    fill(&fc, r->nq, r->hdo, r->fdo);
    void **d[8] = {&r->dq_, &r->ddo, &r->do_, &r->ddq, &r->dk_, &r->dv_, &r->ddk, &r->ddv};
    for (int i = 0; i < 8; i++)
        CUDA_OK(cudaMalloc(d[i], (i < 4 ? r->nq : r->nk) * 2 + 16));
    CUDA_OK(cudaMalloc((void **)&r->dlse, (size_t)c->Hq * r->tq * 4 + 16));
    CUDA_OK(cudaMemcpy(r->dq_, r->hq, r->nq * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(r->dk_, r->hk, r->nk * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(r->dv_, r->hv, r->nk * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(r->ddo, r->hdo, r->nq * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMalloc((void **)&r->dcuq, 4 * (c->B + 1)));
    CUDA_OK(cudaMalloc((void **)&r->dcuk, 4 * (c->B + 1)));
    CUDA_OK(cudaMemcpy(r->dcuq, r->cuq, 4 * (c->B + 1), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(r->dcuk, r->cuk, 4 * (c->B + 1), cudaMemcpyHostToDevice));
    r->hal = xmalloc(c->Hq * 4);
    for (int h = 0; h < c->Hq; h++)
        r->hal[h] = slope_of(h);
    CUDA_OK(cudaMalloc((void **)&r->dal, c->Hq * 4));
    CUDA_OK(cudaMemcpy(r->dal, r->hal, c->Hq * 4, cudaMemcpyHostToDevice));
    r->al_host = flashc_tensor_1d(r->hal, FLASHC_F32, c->Hq);
    r->al_dev = flashc_tensor_1d(r->dal, FLASHC_F32, c->Hq);
    r->al_dev.device = FLASHC_DEVICE_CUDA;
    r->cq = flashc_tensor_1d(r->dcuq, FLASHC_I32, c->B + 1);
    r->ck = flashc_tensor_1d(r->dcuk, FLASHC_I32, c->B + 1);
    r->cq.device = r->ck.device = FLASHC_DEVICE_CUDA;
    r->vl.struct_size = sizeof(flashc_varlen);
    r->vl.cu_seqlens_q = &r->cq, r->vl.cu_seqlens_k = &r->ck;
    r->vl.max_seqlen_q = r->maxq, r->vl.max_seqlen_k = r->maxk;
}

static void vl_destroy(vl_bufs *r)
{
    void *d[13] = {r->dq_, r->ddo, r->do_, r->ddq, r->dk_, r->dv_, r->ddk,
                   r->ddv, r->dlse, r->dal, r->dcuq, r->dcuk, NULL};
    for (int i = 0; i < 12; i++)
        cudaFree(d[i]);
    void *h[15] = {r->hq, r->hdo, r->ho, r->hdq, r->hk, r->hv, r->hdk, r->hdv,
                   r->fq, r->fdo, r->fo, r->fk, r->fv, r->hlse, r->hal};
    for (int i = 0; i < 15; i++)
        free(h[i]);
}

static flashc_attn_params vl_params(const vl_case *c, cudaStream_t stream,
                                    const flashc_tensor *slopes)
{
    bwd_case s = vl_seq_case(c, 0);
    return params_of(&s, stream, slopes);
}

/* (n0, n1, d) views of buffers whose rows are W wide: host ones, and on the device */
static flashc_tensor host3(void *data, flashc_dtype dt, int64_t n0, int64_t n1, int W, int d)
{
    flashc_tensor t = flashc_tensor_3d(data, dt, n0, n1, W);
    t.shape[2] = d;
    return t;
}

static flashc_tensor dev3(void *data, flashc_dtype dt, int64_t n0, int64_t n1, int W, int d)
{
    flashc_tensor t = host3(data, dt, n0, n1, W, d);
    t.device = FLASHC_DEVICE_CUDA;
    return t;
}

static int vl_dv(const vl_case *c) { return c->Dv ? c->Dv : c->D; }

/* The varlen forward on the device (o, lse and their host copies); the CPU forward on the
 * float32 copies where the CUDA forward refuses the case. */
static void vl_forward(const vl_case *c, vl_bufs *r, cudaStream_t stream)
{
    flashc_attn_params pr = vl_params(c, stream, &r->al_dev);
    flashc_tensor q = dev3(r->dq_, c->dt, r->tq, c->Hq, r->W, c->D);
    flashc_tensor k = dev3(r->dk_, c->dt, r->tk, c->Hkv, r->W, c->D);
    flashc_tensor v = dev3(r->dv_, c->dt, r->tk, c->Hkv, r->W, vl_dv(c));
    flashc_tensor o = dev3(r->do_, c->dt, r->tq, c->Hq, r->W, vl_dv(c));
    flashc_tensor lse = flashc_tensor_2d(r->dlse, FLASHC_F32, c->Hq, r->tq);
    lse.device = FLASHC_DEVICE_CUDA;
    flashc_status st = flashc_attn_varlen_fwd(&pr, &r->vl, &q, &k, &v, &o, &lse, NULL);
    const size_t nl = (size_t)c->Hq * r->tq;
    if (st == FLASHC_ERR_UNSUPPORTED) {
        flashc_attn_params ph = vl_params(c, NULL, &r->al_host);
        flashc_tensor cq = flashc_tensor_1d(r->cuq, FLASHC_I32, c->B + 1);
        flashc_tensor ck = flashc_tensor_1d(r->cuk, FLASHC_I32, c->B + 1);
        flashc_varlen hvl = {sizeof(flashc_varlen), &cq, &ck, r->maxq, r->maxk, NULL};
        flashc_tensor hq = host3(r->fq, FLASHC_F32, r->tq, c->Hq, r->W, c->D);
        flashc_tensor hk = host3(r->fk, FLASHC_F32, r->tk, c->Hkv, r->W, c->D);
        flashc_tensor hv = host3(r->fv, FLASHC_F32, r->tk, c->Hkv, r->W, vl_dv(c));
        flashc_tensor ho = host3(r->fo, FLASHC_F32, r->tq, c->Hq, r->W, vl_dv(c));
        flashc_tensor hl = flashc_tensor_2d(r->hlse, FLASHC_F32, c->Hq, r->tq);
        TU_OK(flashc_attn_varlen_fwd(&ph, &hvl, &hq, &hk, &hv, &ho, &hl, NULL));
        for (int64_t i = 0; i < r->nq; i++) {
            r->ho[i] = to_bits(c->dt, r->fo[i]);
            r->fo[i] = from_bits(c->dt, r->ho[i]);
        }
        CUDA_OK(cudaMemcpy(r->do_, r->ho, r->nq * 2, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemcpy(r->dlse, r->hlse, nl * 4, cudaMemcpyHostToDevice));
        return;
    }
    TU_OK(st);
    CUDA_OK(stream ? cudaStreamSynchronize(stream) : cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(r->ho, r->do_, r->nq * 2, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(r->hlse, r->dlse, nl * 4, cudaMemcpyDeviceToHost));
    for (int64_t i = 0; i < r->nq; i++)
        r->fo[i] = from_bits(c->dt, r->ho[i]);
}

/* flashc_attn_varlen_bwd on the device into NaN-poisoned dq, dk, dv, fetched to the host. */
static flashc_status vl_backward(const vl_case *c, vl_bufs *r, cudaStream_t stream, void *ws,
                                 size_t ws_bytes, int query_only, size_t *ws_need)
{
    flashc_attn_params pr = vl_params(c, stream, &r->al_dev);
    pr.workspace = ws, pr.workspace_bytes = ws_bytes;
    flashc_tensor q = dev3(r->dq_, c->dt, r->tq, c->Hq, r->W, c->D);
    flashc_tensor k = dev3(r->dk_, c->dt, r->tk, c->Hkv, r->W, c->D);
    flashc_tensor v = dev3(r->dv_, c->dt, r->tk, c->Hkv, r->W, vl_dv(c));
    flashc_tensor o = dev3(r->do_, c->dt, r->tq, c->Hq, r->W, vl_dv(c));
    flashc_tensor dout = dev3(r->ddo, c->dt, r->tq, c->Hq, r->W, vl_dv(c));
    flashc_tensor dq = dev3(r->ddq, c->dt, r->tq, c->Hq, r->W, c->D);
    flashc_tensor dk = dev3(r->ddk, c->dt, r->tk, c->Hkv, r->W, c->D);
    flashc_tensor dv = dev3(r->ddv, c->dt, r->tk, c->Hkv, r->W, vl_dv(c));
    flashc_tensor lse = flashc_tensor_2d(r->dlse, FLASHC_F32, c->Hq, r->tq);
    lse.device = FLASHC_DEVICE_CUDA;
    if (query_only)
        return flashc_attn_varlen_bwd_workspace_size(&pr, &r->vl, &q, &k, &v, &o, &dout, &lse,
                                                     &dq, &dk, &dv, ws_need);
    CUDA_OK(cudaMemset(r->ddq, 0xff, r->nq * 2));
    CUDA_OK(cudaMemset(r->ddk, 0xff, r->nk * 2));
    CUDA_OK(cudaMemset(r->ddv, 0xff, r->nk * 2));
    flashc_status st =
        flashc_attn_varlen_bwd(&pr, &r->vl, &q, &k, &v, &o, &dout, &lse, &dq, &dk, &dv, NULL);
    if (st != FLASHC_OK)
        return st;
    CUDA_OK(stream ? cudaStreamSynchronize(stream) : cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(r->hdq, r->ddq, r->nq * 2, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(r->hdk, r->ddk, r->nk * 2, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(r->hdv, r->ddv, r->nk * 2, cudaMemcpyDeviceToHost));
    /* the columns past D / Dv: never written (still the poison), then 0 for the checks */
    const bwd_case s0 = vl_seq_case(c, 0);
    r->beyond += unused_columns(&s0, r->hdq, r->nq, c->D) +
                 unused_columns(&s0, r->hdk, r->nk, c->D) +
                 unused_columns(&s0, r->hdv, r->nk, vl_dv(c));
    return FLASHC_OK;
}

/* Elements of got[0, n) that are not exactly 0 (NaN included). */
static int64_t count_nonzero(flashc_dtype dt, const uint16_t *got, int64_t n)
{
    int64_t x = 0;
    for (int64_t i = 0; i < n; i++)
        x += !(from_bits(dt, got[i]) == 0.0f);
    return x;
}

/* One varlen case: forward, backward, per sequence the float64 reference and the naive
 * same-precision backward (the dense ones of this file on the sequence's slices, which are
 * dense (1, S, H, D) tensors), the 2x rule over all sequences; exact zeros for rows that see
 * no key, keys no row sees (sequences of zero queries), and the rows of no sequence; the
 * repeat check when c->reps. */
static void check_varlen(const vl_case *c)
{
    vl_bufs r;
    vl_create(c, &r);
    cudaStream_t stream = NULL;
    void *ws = NULL;
    size_t ws_bytes = 0;
    if (c->use_stream) {
        CUDA_OK(cudaStreamCreate(&stream));
        TU_OK(vl_backward(c, &r, stream, NULL, 0, 1, &ws_bytes));
        assert_true(ws_bytes >= (size_t)c->Hq * r.tq * c->D * 4);
        CUDA_OK(cudaMalloc(&ws, ws_bytes + 16));
        CUDA_OK(cudaMemset(ws, 0xff, ws_bytes + 16));
    }
    vl_forward(c, &r, stream);
    flashc_status st = vl_backward(c, &r, stream, ws ? (char *)ws + 16 : NULL, ws_bytes, 0, NULL);
    if (st != FLASHC_OK)
        fail_msg("flashc_attn_varlen_bwd: %s: %s", flashc_status_string(st),
                 flashc_last_error());

    const int64_t rq = (int64_t)c->Hq * r.W, rk = (int64_t)c->Hkv * r.W; /* per packed row */
    double e[3] = {0, 0, 0}, en[3] = {0, 0, 0};
    int64_t bad = 0, nonzero = 0, empty_rows = 0;
    for (int b = 0; b < c->B && !c->no_ref; b++) {
        const bwd_case s = vl_seq_case(c, b);
        const int64_t oq = r.cuq[b] * rq, ok = r.cuk[b] * rk;
        const int64_t nq = s.Sq * rq, nk = s.Sk * rk;
        if (s.Sq == 0) { /* no query sees these keys */
            nonzero += count_nonzero(c->dt, r.hdk + ok, nk) + count_nonzero(c->dt, r.hdv + ok, nk);
            continue;
        }
        if (s.Sk == 0) { /* these rows see no key */
            nonzero += count_nonzero(c->dt, r.hdq + oq, nq);
            empty_rows += s.Sq;
            continue;
        }
        bufs sb;
        memset(&sb, 0, sizeof sb);
        sb.fq = r.fq + oq, sb.fdo = r.fdo + oq, sb.fo = r.fo + oq;
        sb.fk = r.fk + ok, sb.fv = r.fv + ok;
        sb.hal = r.hal, sb.al_host = r.al_host;
        /* zeroed: the columns past D / Dv compare as 0 */
        float *gq = calloc(nq, 4), *gk = calloc(nk, 4), *gv = calloc(nk, 4);
        float *xq = calloc(nq, 4), *xk = calloc(nk, 4), *xv = calloc(nk, 4);
        if (!gq || !gk || !gv || !xq || !xk || !xv)
            fail_msg("out of host memory");
        reference(&s, &sb, gq, gk, gv);
        naive_lowp(&s, &sb, xq, xk, xv);
        double g[3], n[3];
        errors(c->dt, r.hdq + oq, xq, gq, nq, &g[0], &n[0], &bad);
        errors(c->dt, r.hdk + ok, xk, gk, nk, &g[1], &n[1], &bad);
        errors(c->dt, r.hdv + ok, xv, gv, nk, &g[2], &n[2], &bad);
        for (int i = 0; i < 3; i++) {
            e[i] = g[i] > e[i] ? g[i] : e[i];
            en[i] = n[i] > en[i] ? n[i] : en[i];
        }
        for (int64_t i = 0; i < s.Sq; i++) {
            int64_t lo, hi;
            key_range(&s, i, &lo, &hi);
            if (lo < hi)
                continue;
            empty_rows++;
            nonzero += count_nonzero(c->dt, r.hdq + oq + i * rq, rq);
        }
        free(gq), free(gk), free(gv), free(xq), free(xk), free(xv);
    }
    if (c->no_ref) { /* NaN never passes, reference or not */
        const uint16_t *g[3] = {r.hdq, r.hdk, r.hdv};
        const int64_t n[3] = {r.nq, r.nk, r.nk};
        for (int x = 0; x < 3; x++)
            for (int64_t i = 0; i < n[x]; i++)
                bad += !isfinite(from_bits(c->dt, g[x][i]));
    }
    /* the rows of no sequence: zero gradients */
    const int64_t tail_q = count_nonzero(c->dt, r.hdq + (int64_t)r.cuq[c->B] * rq,
                                         (int64_t)c->pad_q * rq);
    const int64_t tail_k = count_nonzero(c->dt, r.hdk + (int64_t)r.cuk[c->B] * rk,
                                         (int64_t)c->pad_k * rk) +
                           count_nonzero(c->dt, r.hdv + (int64_t)r.cuk[c->B] * rk,
                                         (int64_t)c->pad_k * rk);
    char what[160] = "";
    if (c->win)
        snprintf(what, sizeof what, " window (%d, %d)", c->wl, c->wr);
    if (c->softcap > 0.0f)
        snprintf(what + strlen(what), sizeof what - strlen(what), " softcap %g", c->softcap);
    if (c->alibi)
        snprintf(what + strlen(what), sizeof what - strlen(what), " alibi");
    if (empty_rows)
        snprintf(what + strlen(what), sizeof what - strlen(what), " (%lld empty rows)",
                 (long long)empty_rows);
    if (c->Dv)
        snprintf(what + strlen(what), sizeof what - strlen(what), " Dv=%d", c->Dv);
    printf("  varlen %s D=%3d B=%d total %d x %d (max %d x %d, +%d/+%d unowned) Hq=%d Hkv=%d "
           "causal=%d%s%s%s: ",
           dtname(c->dt), c->D, c->B, r.tq, r.tk, r.maxq, r.maxk, c->pad_q, c->pad_k, c->Hq,
           c->Hkv, c->causal, c->deterministic ? " det" : "", c->use_stream ? " stream+ws" : "",
           what);
    if (c->no_ref)
        printf("(no reference)\n");
    else
        printf("dq %.3g (naive %.3g) dk %.3g (%.3g) dv %.3g (%.3g)\n", e[0], en[0], e[1], en[1],
               e[2], en[2]);
    if (c->reps) {
        uint16_t *first = xmalloc(r.nq * 2 + 2 * r.nk * 2);
        memcpy(first, r.hdq, r.nq * 2);
        memcpy(first + r.nq, r.hdk, r.nk * 2);
        memcpy(first + r.nq + r.nk, r.hdv, r.nk * 2);
        int64_t moved = 0;
        for (int rep = 1; rep < 3; rep++) {
            TU_OK(vl_backward(c, &r, stream, ws ? (char *)ws + 16 : NULL, ws_bytes, 0, NULL));
            assert_memory_equal(first + r.nq, r.hdk, r.nk * 2);
            assert_memory_equal(first + r.nq + r.nk, r.hdv, r.nk * 2);
            if (c->deterministic)
                assert_memory_equal(first, r.hdq, r.nq * 2);
            else
                for (int64_t i = 0; i < r.nq; i++)
                    moved += first[i] != r.hdq[i];
        }
        if (c->deterministic)
            printf("    det: dq, dk, dv bit-identical over 3 runs\n");
        else
            printf("    fast: dk, dv bit-identical over 3 runs; dq elements that moved: %lld\n",
                   (long long)moved);
        free(first);
    }
    if (ws)
        CUDA_OK(cudaFree(ws));
    if (stream)
        CUDA_OK(cudaStreamDestroy(stream));
    const int64_t beyond = r.beyond;
    vl_destroy(&r);
    if (beyond)
        fail_msg("%lld gradient elements past the head dim written", (long long)beyond);
    if (bad)
        fail_msg("%lld gradients non-finite or unwritten", (long long)bad);
    if (nonzero)
        fail_msg("%lld gradients of rows that see no key (or keys no row sees) are not 0",
                 (long long)nonzero);
    if (tail_q || tail_k)
        fail_msg("rows of no sequence: %lld dq and %lld dk/dv elements are not 0",
                 (long long)tail_q, (long long)tail_k);
    const double floor = c->dt == FLASHC_BF16 ? 1.0 / 512 : 1.0 / 4096;
    static const char *names[3] = {"dq", "dk", "dv"};
    for (int i = 0; i < 3 && !c->no_ref; i++)
        if (!(e[i] <= 2.0 * en[i] + floor))
            fail_msg("%s error %.4g > 2 x naive %.4g + %.3g", names[i], e[i], en[i], floor);
}

/* Ragged lengths with empty sequences on either side (0 x 5, 1 x 0, 0 x 0), Sq > Sk (rows the
 * causal mask leaves empty), Sq < Sk, sequences of several tiles (BM = 64, BN = 128 / 64);
 * causal and not, GQA 1 / 4 / 8, bf16 and fp16, every head dim, fast and deterministic. */
static const int vl_lq[] = {0, 150, 1, 77, 300, 0, 100, 9};
static const int vl_lk[] = {5, 150, 0, 140, 260, 0, 100, 200};

static void test_varlen_suite(void **state)
{
    (void)state;
    static const int heads[3][2] = {{4, 4}, {8, 2}, {8, 1}};
    /* 40, 192: padded into the sm80 instances of 64 and 192 */
    static const int dims[6] = {128, 64, 96, 256, 40, 192};
    int n = 0;
    for (int di = 0; di < 6; di++)
        for (int dt = 0; dt < 2; dt++)
            for (int causal = 0; causal < 2; causal++, n++) {
                if (small_only() && (dims[di] != 128 || dt == 1))
                    continue;
                /* the others: bf16 causal and fp16 not (the host references take time) */
                if (dims[di] != 128 && dt == causal)
                    continue;
                vl_case c;
                memset(&c, 0, sizeof c);
                c.B = 8, c.lq = vl_lq, c.lk = vl_lk;
                c.Hq = heads[n % 3][0], c.Hkv = heads[n % 3][1], c.D = dims[di];
                c.causal = causal, c.dt = dt ? FLASHC_F16 : FLASHC_BF16;
                c.deterministic = (n / 2) % 2;
                c.pad_q = 13, c.pad_k = n % 2 ? 7 : 0;
                check_varlen(&c);
            }
}

/* Dk != Dv with varlen (the dense test_dkdv's shapes): both masks and modes, a window with
 * softcap and ALiBi, unowned rows on both sides, a caller workspace on a stream. */
static void test_varlen_dkdv(void **state)
{
    (void)state;
    static const int dd[][2] = {{192, 128}, {128, 192}, {59, 111}};
    for (int i = 0; i < 3; i++) {
        /* B lq lk Hq Hkv D causal dt det pad_q pad_k stream | win wl wr softcap alibi reps */
        vl_case a = {8, vl_lq, vl_lk, 6, 2, dd[i][0], 1, FLASHC_BF16, 0, 5, 3, 0,
                     0, 0, 0, 0.0f, 0, 0, 0, dd[i][1]};
        check_varlen(&a);
        if (small_only())
            continue;
        vl_case b = {8, vl_lq, vl_lk, 4, 1, dd[i][0], 0, FLASHC_F16, 1, 2, 0, 1,
                     1, 37, 19, 20.0f, 1, 1, 0, dd[i][1]};
        check_varlen(&b);
    }
}

/* Windows, softcap and ALiBi with varlen (per-sequence bottom-right alignment), alone and
 * together; deterministic ones repeated bit for bit. */
static void test_varlen_modifiers(void **state)
{
    (void)state;
    /* B lq lk Hq Hkv D causal dt det pad_q pad_k stream | win wl wr softcap alibi reps */
    const vl_case cases[] = {
        {8, vl_lq, vl_lk, 6, 2, 128, 0, FLASHC_BF16, 0, 5, 3, 0, 1, 37, 19, 0.0f, 0, 0, 0},
        {8, vl_lq, vl_lk, 4, 2, 128, 1, FLASHC_BF16, 1, 0, 4, 0, 1, 50, -1, 0.0f, 0, 1, 0},
        {8, vl_lq, vl_lk, 6, 2, 128, 0, FLASHC_F16, 0, 2, 0, 0, 0, 0, 0, 15.0f, 0, 0, 0},
        {8, vl_lq, vl_lk, 4, 1, 128, 1, FLASHC_BF16, 1, 3, 3, 0, 0, 0, 0, 0.0f, 1, 1, 0},
        {8, vl_lq, vl_lk, 8, 1, 128, 0, FLASHC_F16, 1, 1, 1, 1, 1, 150, 90, 20.0f, 1, 1, 0},
    };
    static const int dims[3] = {128, 64, 256};
    for (int di = 0; di < 3; di++)
        for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
            if (small_only() && (di > 0 || (i != 1 && i != 4)))
                continue;
            if (di > 0 && i != 1 && i != 4)
                continue;
            vl_case c = cases[i];
            c.D = dims[di];
            check_varlen(&c);
        }
}

/* Longer sequences (many K blocks per Q block: the dQ order matters), deterministic mode
 * bit-identical over 3 runs and fast mode's dk, dv; one with the reference too. */
static void test_varlen_long(void **state)
{
    (void)state;
    static const int lq[] = {1500, 0, 700, 2100, 33, 1024};
    static const int lk[] = {1537, 64, 700, 2000, 900, 1024};
    static const int lq_s[] = {300, 0, 70};
    static const int lk_s[] = {337, 64, 200};
    for (int det = 1; det >= 0; det--)
        for (int causal = 0; causal < 2; causal++) {
            vl_case c;
            memset(&c, 0, sizeof c);
            c.B = small_only() ? 3 : 6, c.lq = small_only() ? lq_s : lq;
            c.lk = small_only() ? lk_s : lk;
            c.Hq = 8, c.Hkv = 2, c.D = 128, c.causal = causal, c.dt = FLASHC_BF16;
            c.deterministic = det, c.pad_q = 9, c.pad_k = 11, c.reps = 1;
            c.no_ref = !small_only();
            check_varlen(&c);
        }
    if (small_only())
        return;
    static const int lq2[] = {700, 1030, 0};
    static const int lk2[] = {700, 1100, 3};
    vl_case c;
    memset(&c, 0, sizeof c);
    c.B = 3, c.lq = lq2, c.lk = lk2, c.Hq = 2, c.Hkv = 1, c.D = 128, c.causal = 1;
    c.dt = FLASHC_BF16, c.deterministic = 1, c.pad_q = 4, c.pad_k = 4;
    check_varlen(&c);
    c.causal = 0, c.dt = FLASHC_F16, c.deterministic = 0, c.D = 64;
    check_varlen(&c);
}

/* FLASHC_CUDA_BWD_VARLEN=0 refuses varlen (the switch for a first device run) and leaves the
 * outputs untouched; dense calls are not affected. */
static void test_varlen_switch(void **state)
{
    (void)state;
    static const int lq[] = {30, 0}, lk[] = {40, 10};
    vl_case c;
    memset(&c, 0, sizeof c);
    c.B = 2, c.lq = lq, c.lk = lk, c.Hq = 2, c.Hkv = 1, c.D = 64, c.dt = FLASHC_BF16;
    c.pad_q = 2;
    vl_bufs r;
    vl_create(&c, &r);
    vl_forward(&c, &r, NULL);
    setenv("FLASHC_CUDA_BWD_VARLEN", "0", 1);
    const flashc_status st = vl_backward(&c, &r, NULL, NULL, 0, 0, NULL);
    const char *msg = flashc_last_error();
    printf("  FLASHC_CUDA_BWD_VARLEN=0: %s\n", msg);
    unsetenv("FLASHC_CUDA_BWD_VARLEN");
    assert_int_equal(st, FLASHC_ERR_UNSUPPORTED);
    CUDA_OK(cudaMemcpy(r.hdq, r.ddq, r.nq * 2, cudaMemcpyDeviceToHost));
    for (int64_t i = 0; i < r.nq; i++)
        assert_int_equal(r.hdq[i], 0xffff);
    vl_destroy(&r);
    check_varlen(&c); /* and on again */
}

/* What the kernels cannot do is refused with a specific status; dq stays untouched. */
/* Head dims without an instance of their own, padded into the next one (sm80: 32 takes 1-32,
 * 64 33-64, 96, 128, 192 129-192, 256 193-256; FLASHC_CUDA_BWD_KERNEL=sm90v3u on a Hopper
 * GPU: the multiples of 8 up to 64 on its d 64 kernels, up to 128 on its d 128 ones), D % 8
 * != 0 too (rows pitched to 16 bytes, the last chunk read in part): every short pair x causal
 * on GQA, fast and deterministic (the causal ones in rows 64 wide: a store past D stays in its
 * row's poison), a window with softcap and ALiBi, and a longer pair. */
static void padded_suite(flashc_dtype dt, const int *dims, int n)
{
    for (int di = 0; di < n; di++) {
        const int D = dims[di];
        if (small_only()) { /* under compute-sanitizer: every third dim, one case */
            if (di % 3 == 0) {
                bwd_case a = {1, 113, 203, 6, 2, D, 1, dt, di % 2, 0, 0, 0, 0};
                a.wide = 1;
                check_case(&a);
            }
            continue;
        }
        for (int s = 0; s < 4; s++)
            for (int causal = 0; causal < 2; causal++) {
                bwd_case c = {2, pairs_short[s][0], pairs_short[s][1], 6, 2, D, causal, dt,
                              (s + causal) % 2, 0, 0, 0, 0};
                c.wide = causal;
                check_case(&c);
            }
        bwd_case w = {1, 256, 300, 4, 2, D, 0, dt, di % 2};
        w.win = 1, w.wl = 37, w.wr = 19, w.softcap = 30.0f, w.alibi = 1, w.wide = 1;
        check_case(&w);
        bwd_case l = {1, 256, 512, 4, 1, D, 1, dt, 0, 1, 1, 0, 0}; /* bhsd, stream + ws */
        l.wide = 1;
        check_case(&l);
    }
}

static void test_padded_dims_bf16(void **state)
{
    (void)state;
    static const int dims[] = {1, 8, 32, 40, 59, 80, 111, 120, 136, 160, 192, 224, 250};
    padded_suite(FLASHC_BF16, dims, (int)(sizeof dims / sizeof dims[0]));
}

static void test_padded_dims_f16(void **state)
{
    (void)state;
    static const int dims[] = {3, 16, 48, 72, 104, 117, 176, 201};
    padded_suite(FLASHC_F16, dims, (int)(sizeof dims / sizeof dims[0]));
}

/* k and v broadcast over the batch (stride[0] = 0, bwd_case.bcast): no tensor map encodes a
 * zero stride, so on a Hopper GPU sm90v3u's launch hands the problem to its fallback: at d 128
 * and 64 the sm90 / sm90v2s kernels, at its padded dims (forced) the sm80 instance of the dim
 * (bwd90v3_fallback); elsewhere the dispatcher's kernel reads the zero stride itself. GQA,
 * causal and not, fast and deterministic, one layout each way. */
static void test_broadcast_kv(void **state)
{
    (void)state;
    static const int dims[] = {128, 64, 80, 48, 112};
    for (int di = 0; di < 5; di++)
        for (int det = 0; det < 2; det++) {
            bwd_case c = {2, 113, 203, 6, 2, dims[di], det, di % 2 ? FLASHC_F16 : FLASHC_BF16,
                          det, det, 0, 0, 0};
            c.bcast = 1, c.wide = 1;
            check_case(&c);
            if (small_only())
                break;
        }
}

/* Dk != Dv (sm80, the instance of max(D, Dv), the narrower side zero in shared memory): the
 * DeepSeek shape 192 / 128 and the other way, with GQA, both masks and modes, a window,
 * softcap, ALiBi, the (B, H, S, D) layout on a stream with a caller workspace. */
static void test_dkdv(void **state)
{
    (void)state;
    static const int dd[][2] = {{192, 128}, {128, 192}, {64, 32}, {40, 72}, {59, 111}};
    for (int i = 0; i < 5; i++)
        for (int t = 0; t < (small_only() ? 1 : 2); t++) {
            const flashc_dtype dt = t ? FLASHC_F16 : FLASHC_BF16;
            const int D = dd[i][0], Dv = dd[i][1];
            bwd_case a = {2, 113, 203, 6, 2, D, 1, dt, 0};
            a.Dv = Dv;
            check_case(&a);
            if (small_only())
                continue;
            bwd_case b = {1, 203, 113, 4, 1, D, 0, dt, 1, 1, 1};
            b.Dv = Dv;
            check_case(&b);
            bwd_case w = {1, 256, 300, 4, 2, D, 0, dt, t};
            w.Dv = Dv, w.win = 1, w.wl = 37, w.wr = 19, w.softcap = 30.0f, w.alibi = i % 2;
            check_case(&w);
        }
}

static void test_refusals(void **state)
{
    (void)state;
    bwd_case c = {1, 64, 64, 2, 2, 64, 0, FLASHC_BF16, 0, 0, 0, 0, 0};
    bufs r;
    bufs_create(&c, &r);
    run_forward(&c, &r, NULL);
    CUDA_OK(cudaMemset(r.ddq, 0xff, r.nq * 2));
    flashc_attn_params pr = params_of(&c, NULL, NULL);
    dev_views t = dev_views_of(&c, &r);
    flashc_tensor q = t.q, k = t.k, v = t.v, o = t.o, dout = t.dout, dq = t.dq, dk = t.dk,
                  dv = t.dv, lse = t.lse;

    /* head dim 33 packed (rows of 66 bytes): the 16-byte loads cannot take it */
    flashc_tensor t33[8] = {q, k, v, o, dout, dq, dk, dv};
    for (int i = 0; i < 8; i++) {
        const int64_t H = t33[i].shape[2], S = t33[i].shape[1];
        t33[i].shape[3] = 33;
        t33[i].stride[2] = 33, t33[i].stride[1] = 33 * H, t33[i].stride[0] = 33 * H * S;
    }
    assert_int_equal(flashc_attn_bwd(&pr, &t33[0], &t33[1], &t33[2], &t33[3], &t33[4], &lse,
                                     &t33[5], &t33[6], &t33[7], NULL),
                     FLASHC_ERR_UNSUPPORTED);
    printf("  D=33 packed: %s\n", flashc_last_error());

    /* a host pointer marked as device memory */
    flashc_tensor qh = q;
    qh.data = r.hq;
    assert_int_equal(flashc_attn_bwd(&pr, &qh, &k, &v, &o, &dout, &lse, &dq, &dk, &dv, NULL),
                     FLASHC_ERR_INVALID_ARGUMENT);
    printf("  host ptr: %s\n", flashc_last_error());

    /* a workspace smaller than the query's answer */
    pr.workspace = r.ddk;
    pr.workspace_bytes = 64;
    assert_int_equal(flashc_attn_bwd(&pr, &q, &k, &v, &o, &dout, &lse, &dq, &dk, &dv, NULL),
                     FLASHC_ERR_INVALID_ARGUMENT);
    printf("  workspace: %s\n", flashc_last_error());
    pr.workspace = NULL, pr.workspace_bytes = 0;

    /* a non-unit feature stride in dq */
    flashc_tensor dq2 = dq;
    dq2.shape[3] = 32, dq2.stride[3] = 2;
    flashc_tensor t2[5] = {q, k, v, o, dout};
    for (int i = 0; i < 5; i++)
        t2[i].shape[3] = 32;
    flashc_tensor dk2 = dk, dv2 = dv;
    dk2.shape[3] = dv2.shape[3] = 32;
    assert_int_equal(flashc_attn_bwd(&pr, &t2[0], &t2[1], &t2[2], &t2[3], &t2[4], &lse, &dq2,
                                     &dk2, &dv2, NULL),
                     FLASHC_ERR_UNSUPPORTED);
    printf("  stride: %s\n", flashc_last_error());

    CUDA_OK(cudaMemcpy(r.hdq, r.ddq, r.nq * 2, cudaMemcpyDeviceToHost));
    for (int64_t i = 0; i < r.nq; i++)
        assert_int_equal(r.hdq[i], 0xffff);
    bufs_destroy(&r);
}

int main(void)
{
    if (!flashc_cuda_available()) {
        printf("test_cuda_attn_bwd: SKIPPED: no CUDA device visible (%s)\n", flashc_build_info());
        return 77;
    }
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress lines out as they come (a job cut by its
                                         * time limit still shows how far it got) */
    tu_seed_from_env();
    printf("test_cuda_attn_bwd: %s\n", flashc_build_info());
    /* FLASHC_TEST_FILTER / FLASHC_TEST_SKIP: comma-separated test-name patterns to run / not
     * to run (tu_select_tests; the device scripts run single tests, final_check.sh the suite
     * in three jobs) */
    struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_padded_dims_bf16),
        cmocka_unit_test(test_padded_dims_f16),
        cmocka_unit_test(test_dkdv),
        cmocka_unit_test(test_broadcast_kv),
        cmocka_unit_test(test_varlen_suite),
        cmocka_unit_test(test_varlen_modifiers),
        cmocka_unit_test(test_varlen_dkdv),
        cmocka_unit_test(test_varlen_long),
        cmocka_unit_test(test_varlen_switch),
        cmocka_unit_test(test_modifiers),
        cmocka_unit_test(test_deterministic_bitwise),
        cmocka_unit_test(test_det_grouped_bits),
        cmocka_unit_test(test_unmasked_bits),
        cmocka_unit_test(test_early_bits),
        cmocka_unit_test(test_pipelined_bits),
        cmocka_unit_test(test_sm80p_bits),
        cmocka_unit_test(test_late_release_d192_d256),
        cmocka_unit_test(test_graph_capture),
        cmocka_unit_test(test_strided_stream_workspace),
        cmocka_unit_test(test_other_tiles),
        cmocka_unit_test(test_bf16_d64),
        cmocka_unit_test(test_bf16_d128),
        cmocka_unit_test(test_bf16_d96),
        cmocka_unit_test(test_bf16_d256),
        cmocka_unit_test(test_f16_d64),
        cmocka_unit_test(test_f16_d128),
        cmocka_unit_test(test_f16_d96),
        cmocka_unit_test(test_f16_d256),
        cmocka_unit_test(test_bf16_d192),
        cmocka_unit_test(test_f16_d192),
        cmocka_unit_test(test_sm90h2_d192),
        cmocka_unit_test(test_sm90h2e_d192),
        cmocka_unit_test(test_sm90hs_d192_d256),
        cmocka_unit_test(test_sm90hs_d64_d128),
        cmocka_unit_test(test_sm90h2l_d192),
        cmocka_unit_test(test_det_planes),
        cmocka_unit_test(test_det_free),
        cmocka_unit_test(test_det_fence_bits),
        cmocka_unit_test(test_bwd_order),
        cmocka_unit_test(test_bwd_trace),
    };
    return tu_run_selected_tests(tests);
}

#else /* !FLASHC_HAVE_CUDA */

int main(void)
{
    printf("test_cuda_attn_bwd: SKIPPED: this build has no CUDA backend (%s)\n",
           flashc_build_info());
    return 77;
}

#endif
