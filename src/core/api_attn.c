/* api_attn.c — the attention entry points: validate, reduce to an attn_problem, dispatch.
 *
 * Every entry point runs the same steps, each of which may refuse the call before anything is
 * written:
 *   1. read_params     the sized params struct, with defaults for what the caller's size lacks
 *   2. build_*         tensors, shapes, dtypes and devices of one layout (dense, varlen,
 *                      kvcache) reduced to an attn_problem; index tensors validated element by
 *                      element (cu_seqlens monotone and in range, block tables < num_pages,
 *                      cache lengths within capacity)
 *   3. outputs         layouts injective, no output overlapping an input or another output
 *   4. dispatch        the (op, device) row of the table (dispatch.c) answers supports() and
 *                      workspace(); the caller's workspace must be large enough
 *   5. run             host scratch is taken before the KV-cache append, so that a call that
 *                      has started writing can no longer fail
 */
#include "internal.h"
#include "sized_struct.h"

#include <math.h>
#include <string.h>

static const char *const dims4[4] = {"batch", "seqlen", "heads", "head dim"};

/* ---- params ------------------------------------------------------------------------------- */

flashc_attn_params flashc_attn_params_default(void)
{
    flashc_attn_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.window_left = -1;
    p.window_right = -1;
    return p;
}

/* The caller's params with its struct_size honoured: known fields copied, the rest defaulted. */
static flashc_status read_params(const char *fn, const flashc_attn_params *in,
                                 flashc_attn_params *out)
{
    *out = flashc_attn_params_default();
    if (!in)
        return FLASHC_OK;
    const size_t size = in->struct_size;
    if (size < offsetof(flashc_attn_params, softmax_scale))
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                            "%s: params.struct_size = %zu; set it to sizeof(flashc_attn_params) "
                            "(start from flashc_attn_params_default())",
                            fn, size);
#define F(f) FLASHC__FIELD(flashc_attn_params, f)
    static const flashc__field fields[] = {
        F(struct_size),  F(has_softmax_scale), F(softmax_scale), F(causal),
        F(window_left),  F(window_right),      F(softcap),       F(alibi_slopes),
        F(block_q),      F(block_k),           F(num_threads),   F(num_splits),
        F(deterministic), F(workspace),        F(workspace_bytes), F(cuda_stream),
        F(validate_indices)};
#undef F
    FLASHC_TRY(flashc__read_sized(fn, "params", in, size, out, sizeof *out, fields,
                                  (int)(sizeof fields / sizeof fields[0])));
    out->struct_size = sizeof *out;
    const flashc_attn_params *pr = out;
    if (pr->has_softmax_scale && !isfinite(pr->softmax_scale))
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT, "%s: softmax_scale = %g is not finite",
                            fn, (double)pr->softmax_scale);
    if (pr->window_left < -1 || pr->window_right < -1)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                            "%s: window = (%lld, %lld); each side is >= 0, or -1 for unbounded",
                            fn, (long long)pr->window_left, (long long)pr->window_right);
    if (!isfinite(pr->softcap) || pr->softcap < 0.0f)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                            "%s: softcap = %g; it must be finite and >= 0 (0 = off)", fn,
                            (double)pr->softcap);
    if (pr->block_q < 0 || pr->block_k < 0)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                            "%s: block_q = %lld, block_k = %lld; tiles must be >= 0 (0 = default)",
                            fn, (long long)pr->block_q, (long long)pr->block_k);
    if (pr->num_threads < 0 || pr->num_threads > FLASHC_MAX_THREADS)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                            "%s: num_threads = %d; must be 0 (the default) to "
                            "FLASHC_MAX_THREADS = %d",
                            fn, pr->num_threads, FLASHC_MAX_THREADS);
    if (pr->num_splits < 0)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                            "%s: num_splits = %d is negative (0 = library's choice)", fn,
                            pr->num_splits);
    return FLASHC_OK;
}

/* ---- the bound on one call --------------------------------------------------------------- */

/* Sizes the backends derive from a validated problem, checked before any of them is computed:
 * the per-call work bound (flashc.h), the naive paths' per-head S and P (Sq x Sk floats, plus
 * dP for the backward) and an upper bound on the tiled paths' per-thread workspaces (tiles
 * clamped to the sequences, as the backends clamp them; the decode path stacks a KV head's
 * query heads into one tile) times the threads. Kept apart from the shape checks so that every
 * attention path reuses it: a backend may then compute its sizes without overflow checks.
 * Sq and Sk are the maxima over sequences (varlen, KV caches). */
flashc_status attn_check_work(const char *fn, const attn_problem *p)
{
    const int64_t dmax = p->D > p->Dv ? p->D : p->Dv;
    int64_t work;
    if (__builtin_mul_overflow(p->B, p->Hq, &work) || __builtin_mul_overflow(work, p->Sq, &work) ||
        __builtin_mul_overflow(work, p->Sk, &work) || __builtin_mul_overflow(work, dmax, &work) ||
        work > FLASHC_MAX_ATTN_WORK)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "%s: B * Hq * Sq * Sk * D = %lld * %lld * %lld * %lld * %lld exceeds "
                            "FLASHC_MAX_ATTN_WORK = 2^60 multiply-adds",
                            fn, (long long)p->B, (long long)p->Hq, (long long)p->Sq,
                            (long long)p->Sk, (long long)dmax);
    /* naive: S and P (the backward: P and dP) of one head, Sq x Sk floats each */
    int64_t sp_bytes;
    if (__builtin_mul_overflow(p->Sq, p->Sk, &sp_bytes) ||
        __builtin_mul_overflow(sp_bytes, 2 * (int64_t)sizeof(float), &sp_bytes))
        return flashc__fail(FLASHC_ERR_OVERFLOW,
                            "%s: S and P of one head (2 x %lld x %lld floats) overflow 64 bits", fn,
                            (long long)p->Sq, (long long)p->Sk);
    /* tiled: per thread at most (D + 16) * (2 br + 2 bc + 64) + 2 (br + 16) (bc + 16) floats
     * (both passes' formulas are below it), br and bc the clamped tiles */
    const int64_t br_req = p->br ? p->br : 512, bc_req = p->bc ? p->bc : 512;
    int64_t br = br_req < p->Sq ? br_req : p->Sq, bc = bc_req < p->Sk ? bc_req : p->Sk;
    if (p->Sq < 16 && __builtin_mul_overflow(br, p->Hq / p->Hkv, &br))
        br = INT64_MAX;
    int64_t a, b, floats, bytes;
    if (__builtin_mul_overflow(2, br, &a) || __builtin_add_overflow(a, 2 * bc + 64, &a) ||
        __builtin_mul_overflow(a, dmax + 16, &a) || __builtin_mul_overflow(br + 16, bc + 16, &b) ||
        __builtin_mul_overflow(b, 2, &b) || __builtin_add_overflow(a, b, &floats) ||
        __builtin_mul_overflow(floats, (int64_t)sizeof(float), &bytes) ||
        __builtin_mul_overflow(bytes, (int64_t)(p->threads > 0 ? p->threads : 1), &bytes))
        return flashc__fail(FLASHC_ERR_OVERFLOW,
                            "%s: tiles %lld x %lld (clamped to the sequences) on %d threads need "
                            "a workspace whose size overflows 64 bits; use smaller block_q, "
                            "block_k or fewer threads",
                            fn, (long long)br, (long long)bc, p->threads);
    return FLASHC_OK;
}

/* ---- tensor checks ------------------------------------------------------------------------ */

static void copy_strides(int64_t *dst, const flashc_tensor *t)
{
    for (int i = 0; i < t->ndim; i++)
        dst[i] = t->stride[i];
}

static flashc_status check_same_kind(const char *fn, const char *name, const flashc_tensor *t,
                                     const flashc_tensor *q)
{
    if (t->dtype != q->dtype)
        return flashc__fail(FLASHC_ERR_DTYPE_MISMATCH, "%s: %s is %s but q is %s", fn, name,
                            flashc__dtype_name(t->dtype), flashc__dtype_name(q->dtype));
    if (t->device != q->device)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                            "%s: %s is on device %d but q is on device %d", fn, name,
                            (int)t->device, (int)q->device);
    return FLASHC_OK;
}

static flashc_status check_float_dtype(const char *fn, const flashc_tensor *q)
{
    if (q->dtype == FLASHC_I32)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED_DTYPE,
                            "%s: q is int32; attention takes float32, bfloat16 or float16", fn);
    return FLASHC_OK;
}

/* t's shape must equal want[0..n); dims names the axes for the message. */
static flashc_status check_shape(const char *fn, const char *name, const flashc_tensor *t,
                                 const int64_t *want, int n, const char *const *dims,
                                 int head_axis, int dim_axis, const char *like)
{
    for (int i = 0; i < n; i++) {
        if (t->shape[i] != want[i]) {
            flashc_status st = i == head_axis  ? FLASHC_ERR_HEAD_MISMATCH
                               : i == dim_axis ? FLASHC_ERR_DIM_MISMATCH
                                               : FLASHC_ERR_INVALID_SHAPE;
            return flashc__fail(st, "%s: %s.shape[%d] (%s) = %lld but %s has %lld", fn, name, i,
                                dims[i], (long long)t->shape[i], like, (long long)want[i]);
        }
    }
    return FLASHC_OK;
}

static flashc_status check_heads(const char *fn, int64_t Hq, int64_t Hkv)
{
    if (Hq % Hkv != 0)
        return flashc__fail(FLASHC_ERR_HEAD_MISMATCH,
                            "%s: q has %lld heads, not a multiple of k/v's %lld heads", fn,
                            (long long)Hq, (long long)Hkv);
    return FLASHC_OK;
}

/* lse: float32 on q's device with the given shape (3 = dense (B, Hq, Sq); 2 = varlen). */
static flashc_status check_lse(const char *fn, const flashc_tensor *lse, const flashc_tensor *q,
                               int ndim, const int64_t *want, const char *layout)
{
    FLASHC_TRY(flashc__check_tensor(fn, "lse", lse, ndim));
    if (lse->dtype != FLASHC_F32)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED_DTYPE, "%s: lse must be float32", fn);
    if (lse->device != q->device)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT, "%s: lse is not on q's device", fn);
    for (int i = 0; i < ndim; i++)
        if (lse->shape[i] != want[i]) {
            if (ndim == 3)
                return flashc__fail(FLASHC_ERR_INVALID_SHAPE,
                                    "%s: lse shape (%lld, %lld, %lld), expected %s = "
                                    "(%lld, %lld, %lld)",
                                    fn, (long long)lse->shape[0], (long long)lse->shape[1],
                                    (long long)lse->shape[2], layout, (long long)want[0],
                                    (long long)want[1], (long long)want[2]);
            return flashc__fail(FLASHC_ERR_INVALID_SHAPE,
                                "%s: lse shape (%lld, %lld), expected %s = (%lld, %lld)", fn,
                                (long long)lse->shape[0], (long long)lse->shape[1], layout,
                                (long long)want[0], (long long)want[1]);
        }
    return FLASHC_OK;
}

/* An int32 index tensor of rank ndim with unit stride along its last axis, on the host for a
 * host call (the CPU validates and reads it element by element). Returns its data. */
static flashc_status check_index(const char *fn, const char *name, const flashc_tensor *t,
                                 int ndim, const flashc_tensor *q)
{
    FLASHC_TRY(flashc__check_tensor(fn, name, t, ndim));
    if (t->dtype != FLASHC_I32)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED_DTYPE, "%s: %s must be int32 (%s given)", fn,
                            name, flashc__dtype_name(t->dtype));
    if (t->device != q->device)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                            "%s: %s is on device %d but q is on device %d", fn, name,
                            (int)t->device, (int)q->device);
    if (t->shape[ndim - 1] > 1 && t->stride[ndim - 1] != 1)
        return flashc__fail(FLASHC_ERR_INVALID_STRIDE,
                            "%s: %s.stride[%d] = %lld; index tensors need unit stride along "
                            "their last axis",
                            fn, name, ndim - 1, (long long)t->stride[ndim - 1]);
    return FLASHC_OK;
}

static flashc_status check_alibi(const char *fn, const flashc_tensor *a, const flashc_tensor *q,
                                 int64_t B, int64_t Hq, attn_problem *p)
{
    if (!a)
        return FLASHC_OK;
    if (a->ndim != 1 && a->ndim != 2)
        return flashc__fail(FLASHC_ERR_INVALID_SHAPE,
                            "%s: alibi_slopes.ndim = %d; expected (Hq) or (B, Hq)", fn,
                            a ? (int)a->ndim : 0);
    FLASHC_TRY(flashc__check_tensor(fn, "alibi_slopes", a, a->ndim));
    if (a->dtype != FLASHC_F32)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED_DTYPE, "%s: alibi_slopes must be float32 (%s)",
                            fn, flashc__dtype_name(a->dtype));
    if (a->device != q->device)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT, "%s: alibi_slopes is not on q's device",
                            fn);
    if (a->ndim == 1 ? a->shape[0] != Hq : (a->shape[0] != B || a->shape[1] != Hq))
        return flashc__fail(FLASHC_ERR_INVALID_SHAPE,
                            "%s: alibi_slopes shape must be (Hq) = (%lld) or (B, Hq) = (%lld, %lld)",
                            fn, (long long)Hq, (long long)B, (long long)Hq);
    p->alibi = (const float *)a->data;
    p->salibi[0] = a->ndim == 2 ? a->stride[0] : 0;
    p->salibi[1] = a->ndim == 2 ? a->stride[1] : a->stride[0];
    return FLASHC_OK;
}

/* The problem fields every layout shares. */
static flashc_status fill_common(const char *fn, const flashc_attn_params *pr,
                                 const flashc_tensor *q, attn_problem *p)
{
    memset(p, 0, sizeof *p);
    p->dtype = q->dtype;
    p->device = q->device;
    p->causal = pr->causal != 0;
    p->wl = pr->window_left;
    p->wr = pr->window_right;
    if (p->causal)
        p->wr = 0; /* flash-attn: causal is window_right = 0 */
    p->softcap = pr->softcap;
    p->br = pr->block_q, p->bc = pr->block_k;
    p->threads = flashc__threads(pr->num_threads);
    p->num_splits = pr->num_splits;
    p->deterministic = pr->deterministic != 0;
    p->stream = pr->cuda_stream;
    p->workspace = pr->workspace;
    p->workspace_bytes = pr->workspace ? pr->workspace_bytes : 0;
    return FLASHC_OK;
}

static void set_scale(const flashc_attn_params *pr, attn_problem *p)
{
    p->scale = pr->has_softmax_scale ? pr->softmax_scale : (float)(1.0 / sqrt((double)p->D));
}

/* ---- dense -------------------------------------------------------------------------------- */

static flashc_status build_dense(const char *fn, const flashc_attn_params *pr,
                                 const flashc_tensor *q, const flashc_tensor *k,
                                 const flashc_tensor *v, const flashc_tensor *o,
                                 const flashc_tensor *lse, attn_problem *p)
{
    FLASHC_TRY(flashc__check_tensor(fn, "q", q, 4));
    FLASHC_TRY(flashc__check_tensor(fn, "k", k, 4));
    FLASHC_TRY(flashc__check_tensor(fn, "v", v, 4));
    FLASHC_TRY(flashc__check_tensor(fn, "o", o, 4));
    FLASHC_TRY(check_float_dtype(fn, q));
    FLASHC_TRY(check_same_kind(fn, "k", k, q));
    FLASHC_TRY(check_same_kind(fn, "v", v, q));
    FLASHC_TRY(check_same_kind(fn, "o", o, q));
    const int64_t B = q->shape[0], Sq = q->shape[1], Hq = q->shape[2], D = q->shape[3];
    const int64_t Sk = k->shape[1], Hkv = k->shape[2], Dv = v->shape[3];
    const int64_t vw[4] = {B, Sk, Hkv, Dv}, ow[4] = {B, Sq, Hq, Dv};
    if (k->shape[0] != B)
        return flashc__fail(FLASHC_ERR_INVALID_SHAPE, "%s: k.shape[0] (batch) = %lld but q has %lld",
                            fn, (long long)k->shape[0], (long long)B);
    if (k->shape[3] != D)
        return flashc__fail(FLASHC_ERR_DIM_MISMATCH,
                            "%s: k.shape[3] (head dim) = %lld but q.shape[3] = %lld", fn,
                            (long long)k->shape[3], (long long)D);
    FLASHC_TRY(check_shape(fn, "v", v, vw, 3, dims4, 2, 3, "k"));
    FLASHC_TRY(check_shape(fn, "o", o, ow, 4, dims4, 2, 3, "q and v"));
    FLASHC_TRY(check_heads(fn, Hq, Hkv));
    if (lse) {
        const int64_t lw[3] = {B, Hq, Sq};
        FLASHC_TRY(check_lse(fn, lse, q, 3, lw, "(B, Hq, Sq)"));
    }
    FLASHC_TRY(fill_common(fn, pr, q, p));
    p->layout = ATTN_DENSE;
    p->B = B, p->Sq = Sq, p->Sk = Sk, p->Hq = Hq, p->Hkv = Hkv, p->D = D, p->Dv = Dv;
    set_scale(pr, p);
    FLASHC_TRY(check_alibi(fn, pr->alibi_slopes, q, B, Hq, p));
    p->q = q->data, p->k = k->data, p->v = v->data, p->o = o->data;
    copy_strides(p->sq, q), copy_strides(p->sk, k), copy_strides(p->sv, v), copy_strides(p->so, o);
    if (lse) {
        p->lse = (float *)lse->data;
        copy_strides(p->slse, lse);
    }
    return FLASHC_OK;
}

/* ---- varlen ------------------------------------------------------------------------------- */

/* cu (B + 1) int32: cu[0] = 0, non-decreasing, cu[B] <= total, every length <= max_len. */
/* The index tensors' entries as host memory, for their element-by-element checks: a host
 * tensor is read in place; a device tensor is copied (params.validate_indices) into a buffer
 * the caller frees with idx_host_free, or not read at all (*out = NULL). At most 4 per call. */
typedef struct idx_host {
    void *buf[4];
    int n;
} idx_host;

static void idx_host_free(idx_host *h)
{
    for (int i = 0; i < h->n; i++)
        flashc__free(h->buf[i]);
    h->n = 0;
}

/* t: a checked int32 index tensor (check_index); its entries span (rows - 1) * stride[0] +
 * shape[last] elements. */
static flashc_status idx_host_view(const char *fn, const char *name, const flashc_tensor *t,
                                   const flashc_attn_params *pr, idx_host *h,
                                   const int32_t **out)
{
    *out = NULL;
    if (t->device == FLASHC_DEVICE_CPU) {
        *out = (const int32_t *)t->data;
        return FLASHC_OK;
    }
    if (!pr->validate_indices)
        return FLASHC_OK;
    int64_t n = t->shape[t->ndim - 1];
    if (t->ndim == 2 && t->shape[0] > 1)
        n += (t->shape[0] - 1) * t->stride[0];
    if (n <= 0)
        return FLASHC_OK;
#ifdef FLASHC_HAVE_CUDA
    if (h->n >= 4) /* more than any entry point has */
        return flashc__fail(FLASHC_ERR_UNSUPPORTED, "%s: too many index tensors", fn);
    int32_t *buf = (int32_t *)flashc__malloc((size_t)n * sizeof(int32_t));
    if (!buf)
        return flashc__fail(FLASHC_ERR_OUT_OF_MEMORY, "%s: %lld bytes for a host copy of %s", fn,
                            (long long)n * 4, name);
    h->buf[h->n++] = buf;
    FLASHC_TRY(cuda_copy_to_host(fn, buf, t->data, (size_t)n * sizeof(int32_t), pr->cuda_stream));
    *out = buf;
    return FLASHC_OK;
#else
    (void)h, (void)name;
    return flashc__fail(FLASHC_ERR_UNSUPPORTED, "%s: a device index tensor in a build without CUDA",
                        fn);
#endif
}

/* A per-sequence index tensor of a KV cache (int32 (B): cache_seqlens, cache_batch_idx,
 * cache_leftpad): checked as check_index does, one entry for each of q's B sequences; *dev its
 * data (what the backends read), *host its host view (idx_host_view: NULL when not read). */
static flashc_status seq_index(const char *fn, const char *name, const flashc_tensor *t,
                               const flashc_tensor *q, int64_t B, const flashc_attn_params *pr,
                               idx_host *h, const int32_t **dev, const int32_t **host)
{
    FLASHC_TRY(check_index(fn, name, t, 1, q));
    if (t->shape[0] != B)
        return flashc__fail(FLASHC_ERR_INVALID_SHAPE,
                            "%s: %s has %lld entries but q has batch %lld", fn, name,
                            (long long)t->shape[0], (long long)B);
    *dev = (const int32_t *)t->data;
    return idx_host_view(fn, name, t, pr, h, host);
}

static flashc_status check_cu(const char *fn, const char *name, const int32_t *cu, int64_t B,
                              int64_t total, int64_t max_len, const char *max_name)
{
    if (cu[0] != 0)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT, "%s: %s[0] = %d; it must be 0", fn,
                            name, (int)cu[0]);
    for (int64_t b = 0; b < B; b++) {
        const int64_t len = (int64_t)cu[b + 1] - cu[b];
        if (len < 0)
            return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                                "%s: %s decreases at %lld (%d > %d): it must be non-decreasing",
                                fn, name, (long long)b, (int)cu[b], (int)cu[b + 1]);
        if (len > max_len)
            return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                                "%s: sequence %lld has %lld rows (%s) but %s = %lld", fn,
                                (long long)b, (long long)len, name, max_name, (long long)max_len);
    }
    if (cu[B] > total)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                            "%s: %s[%lld] = %d exceeds the %lld packed rows", fn, name,
                            (long long)B, (int)cu[B], (long long)total);
    return FLASHC_OK;
}

/* The caller's varlen struct with its struct_size honoured (flashc__read_sized): a caller built
 * before block_table existed gets it NULL. */
static flashc_status read_varlen(const char *fn, const flashc_varlen *in, flashc_varlen *out)
{
    if (!in)
        return flashc__fail(FLASHC_ERR_NULL_POINTER, "%s: varlen is NULL", fn);
    const size_t size = in->struct_size;
    if (size < offsetof(flashc_varlen, block_table))
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                            "%s: varlen.struct_size = %zu; set it to sizeof(flashc_varlen)", fn,
                            size);
#define F(f) FLASHC__FIELD(flashc_varlen, f)
    static const flashc__field fields[] = {F(struct_size),  F(cu_seqlens_q), F(cu_seqlens_k),
                                           F(max_seqlen_q), F(max_seqlen_k), F(block_table)};
#undef F
    memset(out, 0, sizeof *out);
    FLASHC_TRY(flashc__read_sized(fn, "varlen", in, size, out, sizeof *out, fields,
                                  (int)(sizeof fields / sizeof fields[0])));
    out->struct_size = sizeof *out;
    return FLASHC_OK;
}

/* A block table bt (int32 (B, max_pages)) over the paged cache whose keys are kc (num_pages,
 * page_size, Hkv, D), for the KV-cache and the paged varlen entry points: p's page fields,
 * *capacity = max_pages * page_size (the keys one sequence can hold), *host the table's host
 * view (NULL: a device table not validated). */
static flashc_status page_table(const char *fn, const flashc_tensor *bt, const flashc_tensor *kc,
                                const flashc_tensor *q, int64_t B, const flashc_attn_params *pr,
                                idx_host *h, attn_problem *p, const int32_t **host,
                                int64_t *capacity)
{
    FLASHC_TRY(check_index(fn, "block_table", bt, 2, q));
    if (bt->shape[0] != B)
        return flashc__fail(FLASHC_ERR_INVALID_SHAPE,
                            "%s: block_table.shape[0] = %lld but there are %lld sequences", fn,
                            (long long)bt->shape[0], (long long)B);
    p->pages = (const int32_t *)bt->data;
    p->pages_stride = bt->stride[0];
    FLASHC_TRY(idx_host_view(fn, "block_table", bt, pr, h, host));
    p->num_pages = kc->shape[0];
    p->page_size = kc->shape[1];
    if (__builtin_mul_overflow(bt->shape[1], p->page_size, capacity))
        return flashc__fail(FLASHC_ERR_OVERFLOW, "%s: max_pages * page_size overflows", fn);
    return FLASHC_OK;
}

/* The pages that hold sequence b's first n keys, in the cache (host view of the table). */
static flashc_status pages_in_range(const char *fn, const int32_t *h_pages, const attn_problem *p,
                                    int64_t b, int64_t n)
{
    const int32_t *row = h_pages + b * p->pages_stride;
    for (int64_t g = 0; g < (n + p->page_size - 1) / p->page_size; g++)
        if (row[g] < 0 || row[g] >= p->num_pages)
            return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                                "%s: block_table[%lld][%lld] = %d is outside the cache's %lld "
                                "pages",
                                fn, (long long)b, (long long)g, (int)row[g],
                                (long long)p->num_pages);
    return FLASHC_OK;
}

static flashc_status build_varlen(const char *fn, const flashc_attn_params *pr,
                                  const flashc_varlen *vl, const flashc_tensor *q,
                                  const flashc_tensor *k, const flashc_tensor *v,
                                  const flashc_tensor *o, const flashc_tensor *lse,
                                  attn_problem *p, idx_host *h)
{
    static const char *const dims3[3] = {"rows", "heads", "head dim"};
    static const char *const pdims[4] = {"pages", "page size", "heads", "head dim"};
    const int paged = vl->block_table != NULL; /* k, v (num_pages, page_size, Hkv, D / Dv) */
    FLASHC_TRY(flashc__check_tensor(fn, "q", q, 3));
    FLASHC_TRY(flashc__check_tensor(fn, "k", k, 3 + paged));
    FLASHC_TRY(flashc__check_tensor(fn, "v", v, 3 + paged));
    FLASHC_TRY(flashc__check_tensor(fn, "o", o, 3));
    FLASHC_TRY(check_float_dtype(fn, q));
    FLASHC_TRY(check_same_kind(fn, "k", k, q));
    FLASHC_TRY(check_same_kind(fn, "v", v, q));
    FLASHC_TRY(check_same_kind(fn, "o", o, q));
    FLASHC_TRY(check_index(fn, "cu_seqlens_q", vl->cu_seqlens_q, 1, q));
    FLASHC_TRY(check_index(fn, "cu_seqlens_k", vl->cu_seqlens_k, 1, q));
    const int64_t Tq = q->shape[0], Hq = q->shape[1], D = q->shape[2];
    int64_t Tk = k->shape[0]; /* paged: the keys one sequence can hold, once the table is read */
    const int64_t Hkv = k->shape[1 + paged], Dv = v->shape[2 + paged];
    const int64_t B = vl->cu_seqlens_q->shape[0] - 1;
    if (B < 1)
        return flashc__fail(FLASHC_ERR_INVALID_SHAPE,
                            "%s: cu_seqlens_q has %lld entries; it needs B + 1 >= 2", fn,
                            (long long)(B + 1));
    if (vl->cu_seqlens_k->shape[0] != B + 1)
        return flashc__fail(FLASHC_ERR_INVALID_SHAPE,
                            "%s: cu_seqlens_k has %lld entries but cu_seqlens_q has %lld", fn,
                            (long long)vl->cu_seqlens_k->shape[0], (long long)(B + 1));
    if (vl->max_seqlen_q < 0 || vl->max_seqlen_k < 0)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                            "%s: max_seqlen_q = %lld, max_seqlen_k = %lld must be >= 0", fn,
                            (long long)vl->max_seqlen_q, (long long)vl->max_seqlen_k);
    if (k->shape[2 + paged] != D)
        return flashc__fail(FLASHC_ERR_DIM_MISMATCH,
                            "%s: k.shape[%d] (head dim) = %lld but q.shape[2] = %lld", fn,
                            2 + paged, (long long)k->shape[2 + paged], (long long)D);
    const int64_t ow[3] = {Tq, Hq, Dv};
    if (paged)
        FLASHC_TRY(check_shape(fn, "v", v, k->shape, 3, pdims, 2, 3, "k"));
    else
        FLASHC_TRY(check_shape(fn, "v", v, k->shape, 2, dims3, 1, 2, "k"));
    FLASHC_TRY(check_shape(fn, "o", o, ow, 3, dims3, 1, 2, "q and v"));
    FLASHC_TRY(check_heads(fn, Hq, Hkv));
    if (lse) {
        const int64_t lw[2] = {Hq, Tq};
        FLASHC_TRY(check_lse(fn, lse, q, 2, lw, "(Hq, total_q)"));
    }
    FLASHC_TRY(fill_common(fn, pr, q, p));
    const int32_t *cuq = (const int32_t *)vl->cu_seqlens_q->data;
    const int32_t *cuk = (const int32_t *)vl->cu_seqlens_k->data;
    const int32_t *hq, *hk, *hp = NULL; /* host views (NULL: device tensors not validated) */
    if (paged)
        FLASHC_TRY(page_table(fn, vl->block_table, k, q, B, pr, h, p, &hp, &Tk));
    FLASHC_TRY(idx_host_view(fn, "cu_seqlens_q", vl->cu_seqlens_q, pr, h, &hq));
    FLASHC_TRY(idx_host_view(fn, "cu_seqlens_k", vl->cu_seqlens_k, pr, h, &hk));
    if (hq)
        FLASHC_TRY(check_cu(fn, "cu_seqlens_q", hq, B, Tq, vl->max_seqlen_q, "max_seqlen_q"));
    /* paged: cu_seqlens_k gives lengths only, each within the sequence's pages */
    if (hk)
        FLASHC_TRY(check_cu(fn, "cu_seqlens_k", hk, B, paged ? INT32_MAX : Tk, vl->max_seqlen_k,
                            "max_seqlen_k"));
    for (int64_t b = 0; paged && hk && b < B; b++) {
        const int64_t len = (int64_t)hk[b + 1] - hk[b];
        if (len > Tk)
            return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                                "%s: sequence %lld has %lld keys but its block_table row holds "
                                "%lld (max_pages * page_size)",
                                fn, (long long)b, (long long)len, (long long)Tk);
        if (hp)
            FLASHC_TRY(pages_in_range(fn, hp, p, b, len));
    }
    p->layout = ATTN_VARLEN;
    /* No sequence can hold more rows than the packed tensor, so the maxima are clamped to the
     * totals: a generous max_seqlen (flash-attn allows any upper bound) then costs nothing,
     * and a huge one cannot overflow the tile and grid arithmetic (a fuzz finding: INT64_MAX
     * with max_seqlen_k = 0 passed the work bound, B * Hq * Sq * Sk * D = 0). */
    p->B = B, p->Sq = vl->max_seqlen_q < Tq ? vl->max_seqlen_q : Tq;
    p->Sk = vl->max_seqlen_k < Tk ? vl->max_seqlen_k : Tk;
    p->Hq = Hq, p->Hkv = Hkv, p->D = D, p->Dv = Dv;
    p->cu_q = cuq, p->cu_k = cuk, p->total_q = Tq, p->total_k = paged ? 0 : Tk;
    set_scale(pr, p);
    FLASHC_TRY(check_alibi(fn, pr->alibi_slopes, q, B, Hq, p));
    p->q = q->data, p->k = k->data, p->v = v->data, p->o = o->data;
    /* (rows, heads, dim) -> the 4-d stride convention with no batch stride; a paged k / v
     * keeps its own (page, row, head, dim) strides */
    const flashc_tensor *ts[4] = {q, k, v, o};
    int64_t *ss[4] = {p->sq, p->sk, p->sv, p->so};
    for (int t = 0; t < 4; t++) {
        if (paged && (t == 1 || t == 2)) {
            copy_strides(ss[t], ts[t]);
            continue;
        }
        ss[t][0] = 0;
        ss[t][1] = ts[t]->stride[0];
        ss[t][2] = ts[t]->stride[1];
        ss[t][3] = ts[t]->stride[2];
    }
    if (lse) {
        p->lse = (float *)lse->data;
        p->slse[0] = 0, p->slse[1] = lse->stride[0], p->slse[2] = lse->stride[1];
    }
    return FLASHC_OK;
}

/* ---- kvcache ------------------------------------------------------------------------------ */

typedef struct kvcache_views {
    const flashc_tensor *k_new, *v_new; /* NULL when nothing is appended */
} kvcache_views;

/* The caller's cache struct with its struct_size honoured, as read_params does: a caller built
 * before cache_leftpad existed (struct_size up to v_new) gets it NULL; a size that cuts a field
 * or leaves out the first version's fields is refused, and a larger one only with its unknown
 * tail zero. */
static flashc_status read_kv_cache(const char *fn, const flashc_kv_cache *in, flashc_kv_cache *out)
{
    if (!in)
        return flashc__fail(FLASHC_ERR_NULL_POINTER, "%s: cache is NULL", fn);
    const size_t size = in->struct_size;
    if (size < offsetof(flashc_kv_cache, cache_leftpad))
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                            "%s: cache.struct_size = %zu; set it to sizeof(flashc_kv_cache)", fn,
                            size);
#define F(f) FLASHC__FIELD(flashc_kv_cache, f)
    static const flashc__field fields[] = {F(struct_size), F(k_cache),         F(v_cache),
                                           F(cache_seqlens), F(block_table), F(cache_batch_idx),
                                           F(k_new),       F(v_new),           F(cache_leftpad)};
#undef F
    memset(out, 0, sizeof *out);
    FLASHC_TRY(flashc__read_sized(fn, "cache", in, size, out, sizeof *out, fields,
                                  (int)(sizeof fields / sizeof fields[0])));
    out->struct_size = sizeof *out;
    return FLASHC_OK;
}

static flashc_status build_kvcache(const char *fn, const flashc_attn_params *pr,
                                   const flashc_kv_cache *c, const flashc_tensor *q,
                                   const flashc_tensor *o, const flashc_tensor *lse,
                                   attn_problem *p, kvcache_views *views, idx_host *h)
{
    const flashc_tensor *kc = c->k_cache, *vc = c->v_cache;
    FLASHC_TRY(flashc__check_tensor(fn, "q", q, 4));
    FLASHC_TRY(flashc__check_tensor(fn, "k_cache", kc, 4));
    FLASHC_TRY(flashc__check_tensor(fn, "v_cache", vc, 4));
    FLASHC_TRY(flashc__check_tensor(fn, "o", o, 4));
    FLASHC_TRY(check_float_dtype(fn, q));
    FLASHC_TRY(check_same_kind(fn, "k_cache", kc, q));
    FLASHC_TRY(check_same_kind(fn, "v_cache", vc, q));
    FLASHC_TRY(check_same_kind(fn, "o", o, q));
    const int64_t B = q->shape[0], Sq = q->shape[1], Hq = q->shape[2], D = q->shape[3];
    const int64_t Hkv = kc->shape[2], Dv = vc->shape[3];
    if (kc->shape[3] != D)
        return flashc__fail(FLASHC_ERR_DIM_MISMATCH,
                            "%s: k_cache.shape[3] (head dim) = %lld but q.shape[3] = %lld", fn,
                            (long long)kc->shape[3], (long long)D);
    static const char *const cdims[4] = {"batch or pages", "seqlen or page size", "heads",
                                         "head dim"};
    FLASHC_TRY(check_shape(fn, "v_cache", vc, kc->shape, 3, cdims, 2, 3, "k_cache"));
    const int64_t ow[4] = {B, Sq, Hq, Dv};
    FLASHC_TRY(check_shape(fn, "o", o, ow, 4, dims4, 2, 3, "q and v_cache"));
    FLASHC_TRY(check_heads(fn, Hq, Hkv));
    if (lse) {
        const int64_t lw[3] = {B, Hq, Sq};
        FLASHC_TRY(check_lse(fn, lse, q, 3, lw, "(B, Hq, Sq)"));
    }
    FLASHC_TRY(fill_common(fn, pr, q, p));
    p->layout = ATTN_KVCACHE;
    p->B = B, p->Sq = Sq, p->Hq = Hq, p->Hkv = Hkv, p->D = D, p->Dv = Dv;

    /* appended keys */
    views->k_new = views->v_new = NULL;
    if ((c->k_new == NULL) != (c->v_new == NULL))
        return flashc__fail(FLASHC_ERR_NULL_POINTER, "%s: k_new and v_new go together (%s given)",
                            fn, c->k_new ? "only k_new" : "only v_new");
    int64_t s_new = 0;
    if (c->k_new) {
        FLASHC_TRY(flashc__check_tensor(fn, "k_new", c->k_new, 4));
        FLASHC_TRY(flashc__check_tensor(fn, "v_new", c->v_new, 4));
        FLASHC_TRY(check_same_kind(fn, "k_new", c->k_new, q));
        FLASHC_TRY(check_same_kind(fn, "v_new", c->v_new, q));
        s_new = c->k_new->shape[1];
        const int64_t kw[4] = {B, s_new, Hkv, D}, vw[4] = {B, s_new, Hkv, Dv};
        FLASHC_TRY(check_shape(fn, "k_new", c->k_new, kw, 4, dims4, 2, 3, "(B, S_new, Hkv, D)"));
        FLASHC_TRY(check_shape(fn, "v_new", c->v_new, vw, 4, dims4, 2, 3, "(B, S_new, Hkv, Dv)"));
        if (!c->cache_seqlens)
            return flashc__fail(FLASHC_ERR_NULL_POINTER,
                                "%s: appending k_new/v_new needs cache_seqlens (where to write)",
                                fn);
        views->k_new = c->k_new, views->v_new = c->v_new;
        p->k_new = c->k_new->data, p->v_new = c->v_new->data;
        copy_strides(p->sknew, c->k_new), copy_strides(p->svnew, c->v_new);
    }
    p->s_new = s_new;

    const int host = q->device == FLASHC_DEVICE_CPU;
    /* host views of the index tensors for their element checks (NULL: device, not validated) */
    const int32_t *h_pages = NULL, *h_kvb = NULL, *h_lens = NULL;
    int64_t capacity;
    if (c->block_table) {
        if (c->cache_batch_idx || c->cache_leftpad)
            return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                                "%s: %s applies to contiguous caches only (a block table is "
                                "given)",
                                fn, c->cache_batch_idx ? "cache_batch_idx" : "cache_leftpad");
        if (!c->cache_seqlens)
            return flashc__fail(FLASHC_ERR_NULL_POINTER,
                                "%s: a paged cache needs cache_seqlens", fn);
        FLASHC_TRY(page_table(fn, c->block_table, kc, q, B, pr, h, p, &h_pages, &capacity));
    } else {
        capacity = kc->shape[1];
        if (c->cache_batch_idx) {
            FLASHC_TRY(seq_index(fn, "cache_batch_idx", c->cache_batch_idx, q, B, pr, h,
                                 &p->kv_batch, &h_kvb));
            for (int64_t b = 0; h_kvb && b < B; b++)
                if (h_kvb[b] < 0 || h_kvb[b] >= kc->shape[0])
                    return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                                        "%s: cache_batch_idx[%lld] = %d is outside the cache's "
                                        "%lld sequences",
                                        fn, (long long)b, (int)h_kvb[b],
                                        (long long)kc->shape[0]);
        } else if (kc->shape[0] != B) {
            return flashc__fail(FLASHC_ERR_INVALID_SHAPE,
                                "%s: k_cache.shape[0] (batch) = %lld but q has %lld (pass "
                                "cache_batch_idx to map sequences onto cache rows)",
                                fn, (long long)kc->shape[0], (long long)B);
        }
        if (views->k_new && h_kvb) /* two sequences appending into one cache row */
            for (int64_t a = 0; a < B; a++)
                for (int64_t b = a + 1; b < B; b++)
                    if (h_kvb[a] == h_kvb[b])
                        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                                            "%s: sequences %lld and %lld both append into cache "
                                            "row %d",
                                            fn, (long long)a, (long long)b, (int)h_kvb[a]);
    }
    const int32_t *h_start = NULL;
    if (c->cache_leftpad) { /* (contiguous: checked with the block table) */
        if (!c->cache_seqlens)
            return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                                "%s: cache_leftpad needs cache_seqlens (where each sequence ends)",
                                fn);
        FLASHC_TRY(seq_index(fn, "cache_leftpad", c->cache_leftpad, q, B, pr, h, &p->kv_start,
                             &h_start));
    }
    int64_t max_sk = c->cache_seqlens ? 0 : capacity;
    if (c->cache_seqlens) {
        FLASHC_TRY(seq_index(fn, "cache_seqlens", c->cache_seqlens, q, B, pr, h, &p->seqlens_k,
                             &h_lens));
        for (int64_t b = 0; h_lens && b < B; b++) {
            const int64_t len = h_lens[b];
            if (len < 0 || len + s_new > capacity)
                return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                                    "%s: cache_seqlens[%lld] = %lld%s%lld does not fit the "
                                    "cache's capacity of %lld keys",
                                    fn, (long long)b, (long long)len, " + S_new ",
                                    (long long)s_new, (long long)capacity);
            const int64_t start = h_start ? h_start[b] : 0;
            if (start < 0 || start > len)
                return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                                    "%s: cache_leftpad[%lld] = %lld is outside [0, "
                                    "cache_seqlens[%lld] = %lld]",
                                    fn, (long long)b, (long long)start, (long long)b,
                                    (long long)len);
            if (len + s_new - start > max_sk)
                max_sk = len + s_new - start;
            if (h_pages)
                FLASHC_TRY(pages_in_range(fn, h_pages, p, b, len + s_new));
        }
        if (!host) /* the launch shape depends on the shapes only (graphs), validated or not */
            max_sk = capacity;
    }
    p->Sk = max_sk;
    p->kv_capacity = capacity;
    p->kv_rows = kc->shape[0];
    set_scale(pr, p);
    FLASHC_TRY(check_alibi(fn, pr->alibi_slopes, q, B, Hq, p));
    p->q = q->data, p->k = kc->data, p->v = vc->data, p->o = o->data;
    copy_strides(p->sq, q), copy_strides(p->sk, kc), copy_strides(p->sv, vc);
    copy_strides(p->so, o);
    if (lse) {
        p->lse = (float *)lse->data;
        copy_strides(p->slse, lse);
    }
    return FLASHC_OK;
}

/* Writes k_new/v_new into the cache at cache_seqlens[b] (host memory; validated). */
static void kvcache_append(const attn_problem *p, const kvcache_views *views)
{
    const size_t es = flashc_dtype_size(p->dtype);
    const flashc_tensor *src[2] = {views->k_new, views->v_new};
    void *dst[2] = {(void *)p->k, (void *)p->v};
    const int64_t *dst_st[2] = {p->sk, p->sv};
    const int64_t dims[2] = {p->D, p->Dv};
    for (int t = 0; t < 2; t++) {
        const flashc_tensor *s = src[t];
        for (int64_t b = 0; b < p->B; b++)
            for (int64_t j = 0; j < p->s_new; j++) {
                /* cache row seqlens_k[b] + j, which is key seqlens_k[b] - start + j */
                const int64_t row =
                    attn_kv_off(p, dst_st[t], b, p->seqlens_k[b] - attn_kv_start(p, b) + j);
                for (int64_t h = 0; h < p->Hkv; h++) {
                    char *d = (char *)dst[t] + (row + h * dst_st[t][2]) * (int64_t)es;
                    const char *x = (const char *)s->data +
                                    (b * s->stride[0] + j * s->stride[1] + h * s->stride[2]) *
                                        (int64_t)es;
                    if (s->stride[3] == 1 && dst_st[t][3] == 1) {
                        memcpy(d, x, (size_t)dims[t] * es);
                    } else {
                        for (int64_t e = 0; e < dims[t]; e++)
                            memcpy(d + e * dst_st[t][3] * (int64_t)es,
                                   x + e * s->stride[3] * (int64_t)es, es);
                    }
                }
            }
    }
}

/* ---- output checks ------------------------------------------------------------------------ */

static flashc_status check_fwd_outputs(const char *fn, const flashc_tensor *q,
                                       const flashc_tensor *k, const flashc_tensor *v,
                                       const flashc_tensor *o, const flashc_tensor *lse,
                                       const flashc_attn_params *pr, const flashc_tensor *idx1,
                                       const flashc_tensor *idx2, const flashc_tensor *idx3)
{
    const flashc_tensor *outs[2] = {o, lse},
                        *ins[7] = {q, k, v, pr->alibi_slopes, idx1, idx2, idx3};
    static const char *const out_names[2] = {"o", "lse"},
                             *const in_names[7] = {"q", "k", "v", "alibi_slopes", "cu_seqlens_q",
                                                   "cu_seqlens_k", "block_table"};
    return flashc__check_outputs(fn, 2, outs, out_names, 7, ins, in_names);
}

/* ---- dispatch and run --------------------------------------------------------------------- */

/* The problem's row of the table, its supports() answer, and its workspace need. */
static flashc_status plan(const char *fn, attn_op op, const attn_problem *p,
                          const attn_impl **impl, size_t *ws)
{
    *impl = attn_impl_find(op, p->device, attn_forced_backend());
    if (!*impl)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED, "%s: %s tensors given but this build has no %s "
                            "backend for this op",
                            fn, p->device == FLASHC_DEVICE_CUDA ? "CUDA" : "host",
                            p->device == FLASHC_DEVICE_CUDA ? "CUDA" : "host");
    FLASHC_TRY((*impl)->supports(p));
    *ws = (*impl)->workspace ? (*impl)->workspace(p) : 0;
    return FLASHC_OK;
}

/* Varlen rows past cu[B] belong to no sequence: zeros (lse -inf), so no output is left
 * unwritten. */
static void clear_rows(void *base, flashc_dtype dt, const int64_t *st, int64_t r0, int64_t r1,
                       int64_t H, int64_t D)
{
    for (int64_t r = r0; r < r1; r++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t d = 0; d < D; d++)
                flashc__store(base, dt, r * st[1] + h * st[2] + d * st[3], 0.0f);
}

static void clear_unowned_rows(const attn_problem *p, attn_op op)
{
    const int64_t q_end = p->cu_q[p->B], k_end = p->cu_k[p->B];
    if (op == ATTN_OP_FWD) {
        clear_rows(p->o, p->dtype, p->so, q_end, p->total_q, p->Hq, p->Dv);
        for (int64_t r = q_end; p->lse && r < p->total_q; r++)
            for (int64_t h = 0; h < p->Hq; h++)
                p->lse[h * p->slse[1] + r * p->slse[2]] = -INFINITY;
    } else {
        clear_rows(p->dq, p->dtype, p->sdq, q_end, p->total_q, p->Hq, p->D);
        clear_rows(p->dk, p->dtype, p->sdk, k_end, p->total_k, p->Hkv, p->D);
        clear_rows(p->dv, p->dtype, p->sdv, k_end, p->total_k, p->Hkv, p->Dv);
    }
}

/* Runs impl on p: host scratch comes from the caller's workspace or one counted allocation made
 * here, before anything is written (the KV-cache append included), so a started call cannot
 * fail for memory. */
static flashc_status run(const char *fn, const attn_impl *impl, attn_problem *p, size_t ws,
                         const kvcache_views *append, flashc_attn_stats *user_stats)
{
    void *own = NULL;
    if (p->workspace) {
        if (p->workspace_bytes < ws)
            return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                                "%s: workspace_bytes = %zu but this call needs %zu (ask the "
                                "*_workspace_size query with the same arguments)",
                                fn, p->workspace_bytes, ws);
    } else if (ws > 0 && impl->host_scratch) {
        own = flashc__malloc(ws);
        if (!own)
            return flashc__fail(FLASHC_ERR_OUT_OF_MEMORY,
                                "%s: cannot allocate %zu bytes of scratch", fn, ws);
        p->workspace = own;
        p->workspace_bytes = ws;
    }
    if (append && append->k_new && impl->host_scratch) /* device backends append themselves */
        kvcache_append(p, append);
    flashc_attn_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    st.num_splits = 1;
    st.workspace_bytes = (int64_t)ws;
    flashc_status status = impl->run(p, &st);
    if (status == FLASHC_OK && p->device == FLASHC_DEVICE_CPU && p->layout == ATTN_VARLEN)
        clear_unowned_rows(p, impl->op);
    flashc__free(own);
    if (p->workspace == own) {
        p->workspace = NULL;
        p->workspace_bytes = 0;
    }
    if (status == FLASHC_OK && user_stats) {
        const size_t n = user_stats->struct_size < sizeof st ? user_stats->struct_size : sizeof st;
        if (n > sizeof st.struct_size)
            memcpy((char *)user_stats + sizeof st.struct_size,
                   (const char *)&st + sizeof st.struct_size, n - sizeof st.struct_size);
    }
    return status;
}

static flashc_status check_stats(const char *fn, const flashc_attn_stats *stats)
{
    if (stats && stats->struct_size < offsetof(flashc_attn_stats, tile_pairs_total))
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                            "%s: stats.struct_size = %zu; set it to sizeof(flashc_attn_stats) "
                            "(FLASHC_ATTN_STATS_INIT)",
                            fn, stats->struct_size);
    return FLASHC_OK;
}

static flashc_status need_bytes(const char *fn, size_t *bytes)
{
    if (!bytes)
        return flashc__fail(FLASHC_ERR_NULL_POINTER, "%s: bytes is NULL", fn);
    return FLASHC_OK;
}

/* ---- forward entry points ----------------------------------------------------------------- */

static flashc_status dense_fwd_plan(const char *fn, const flashc_attn_params *params,
                                    const flashc_tensor *q, const flashc_tensor *k,
                                    const flashc_tensor *v, const flashc_tensor *o,
                                    const flashc_tensor *lse, attn_problem *p,
                                    const attn_impl **impl, size_t *ws)
{
    flashc_attn_params pr;
    FLASHC_TRY(read_params(fn, params, &pr));
    FLASHC_TRY(build_dense(fn, &pr, q, k, v, o, lse, p));
    FLASHC_TRY(check_fwd_outputs(fn, q, k, v, o, lse, &pr, NULL, NULL, NULL));
    FLASHC_TRY(attn_check_work(fn, p));
    return plan(fn, ATTN_OP_FWD, p, impl, ws);
}

flashc_status flashc_attn_fwd_supported(const flashc_attn_params *params, const flashc_tensor *q,
                                        const flashc_tensor *k, const flashc_tensor *v,
                                        const flashc_tensor *o, const flashc_tensor *lse)
{
    attn_problem p;
    const attn_impl *impl;
    size_t ws;
    return dense_fwd_plan("flashc_attn_fwd", params, q, k, v, o, lse, &p, &impl, &ws);
}

flashc_status flashc_attn_fwd_workspace_size(const flashc_attn_params *params,
                                             const flashc_tensor *q, const flashc_tensor *k,
                                             const flashc_tensor *v, const flashc_tensor *o,
                                             const flashc_tensor *lse, size_t *bytes)
{
    static const char fn[] = "flashc_attn_fwd_workspace_size";
    FLASHC_TRY(need_bytes(fn, bytes));
    attn_problem p;
    const attn_impl *impl;
    size_t ws;
    FLASHC_TRY(dense_fwd_plan(fn, params, q, k, v, o, lse, &p, &impl, &ws));
    *bytes = ws;
    return FLASHC_OK;
}

flashc_status flashc_attn_fwd(const flashc_attn_params *params, const flashc_tensor *q,
                              const flashc_tensor *k, const flashc_tensor *v, flashc_tensor *o,
                              flashc_tensor *lse, flashc_attn_stats *stats)
{
    static const char fn[] = "flashc_attn_fwd";
    attn_problem p;
    const attn_impl *impl;
    size_t ws;
    FLASHC_TRY(check_stats(fn, stats));
    FLASHC_TRY(dense_fwd_plan(fn, params, q, k, v, o, lse, &p, &impl, &ws));
    return run(fn, impl, &p, ws, NULL, stats);
}

flashc_status flashc_attn_fwd_naive(const flashc_attn_params *params, const flashc_tensor *q,
                                    const flashc_tensor *k, const flashc_tensor *v,
                                    flashc_tensor *o, flashc_tensor *lse,
                                    flashc_attn_stats *stats)
{
    static const char fn[] = "flashc_attn_fwd_naive";
    flashc_attn_params pr;
    attn_problem p;
    FLASHC_TRY(check_stats(fn, stats));
    FLASHC_TRY(read_params(fn, params, &pr));
    pr.workspace = NULL; /* the reference allocates its S and P: that is what it measures */
    pr.num_splits = 0;
    FLASHC_TRY(build_dense(fn, &pr, q, k, v, o, lse, &p));
    FLASHC_TRY(check_fwd_outputs(fn, q, k, v, o, lse, &pr, NULL, NULL, NULL));
    FLASHC_TRY(attn_check_work(fn, &p));
    const attn_impl *impl = attn_impl_find(ATTN_OP_FWD, FLASHC_DEVICE_CPU, "ref");
    if (p.device != FLASHC_DEVICE_CPU)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED, "%s: the reference runs on host memory only",
                            fn);
    FLASHC_TRY(impl->supports(&p));
    return run(fn, impl, &p, impl->workspace(&p), NULL, stats);
}

static flashc_status varlen_fwd_plan(const char *fn, const flashc_attn_params *params,
                                     const flashc_varlen *varlen_in, const flashc_tensor *q,
                                     const flashc_tensor *k, const flashc_tensor *v,
                                     const flashc_tensor *o, const flashc_tensor *lse,
                                     attn_problem *p, const attn_impl **impl, size_t *ws)
{
    flashc_attn_params pr;
    flashc_varlen vlc;
    FLASHC_TRY(read_params(fn, params, &pr));
    FLASHC_TRY(read_varlen(fn, varlen_in, &vlc));
    idx_host h = {{0}, 0};
    const flashc_status st = build_varlen(fn, &pr, &vlc, q, k, v, o, lse, p, &h);
    idx_host_free(&h);
    FLASHC_TRY(st);
    FLASHC_TRY(check_fwd_outputs(fn, q, k, v, o, lse, &pr, vlc.cu_seqlens_q, vlc.cu_seqlens_k,
                                 vlc.block_table));
    FLASHC_TRY(attn_check_work(fn, p));
    return plan(fn, ATTN_OP_FWD, p, impl, ws);
}

flashc_status flashc_attn_varlen_fwd(const flashc_attn_params *params, const flashc_varlen *varlen,
                                     const flashc_tensor *q, const flashc_tensor *k,
                                     const flashc_tensor *v, flashc_tensor *o, flashc_tensor *lse,
                                     flashc_attn_stats *stats)
{
    static const char fn[] = "flashc_attn_varlen_fwd";
    attn_problem p;
    const attn_impl *impl;
    size_t ws;
    FLASHC_TRY(check_stats(fn, stats));
    FLASHC_TRY(varlen_fwd_plan(fn, params, varlen, q, k, v, o, lse, &p, &impl, &ws));
    return run(fn, impl, &p, ws, NULL, stats);
}

flashc_status flashc_attn_varlen_fwd_workspace_size(const flashc_attn_params *params,
                                                    const flashc_varlen *varlen,
                                                    const flashc_tensor *q, const flashc_tensor *k,
                                                    const flashc_tensor *v, const flashc_tensor *o,
                                                    const flashc_tensor *lse, size_t *bytes)
{
    static const char fn[] = "flashc_attn_varlen_fwd_workspace_size";
    FLASHC_TRY(need_bytes(fn, bytes));
    attn_problem p;
    const attn_impl *impl;
    size_t ws;
    FLASHC_TRY(varlen_fwd_plan(fn, params, varlen, q, k, v, o, lse, &p, &impl, &ws));
    *bytes = ws;
    return FLASHC_OK;
}

static flashc_status kvcache_plan(const char *fn, const flashc_attn_params *params,
                                  const flashc_kv_cache *c, const flashc_tensor *q,
                                  const flashc_tensor *o, const flashc_tensor *lse,
                                  attn_problem *p, kvcache_views *views, const attn_impl **impl,
                                  size_t *ws)
{
    flashc_attn_params pr;
    FLASHC_TRY(read_params(fn, params, &pr));
    flashc_kv_cache cc;
    FLASHC_TRY(read_kv_cache(fn, c, &cc));
    c = &cc;
    idx_host h = {{0}, 0};
    const flashc_status st = build_kvcache(fn, &pr, c, q, o, lse, p, views, &h);
    idx_host_free(&h);
    FLASHC_TRY(st);
    /* outputs: o, lse, and the caches when they are appended to */
    const int app = views->k_new != NULL;
    const flashc_tensor *outs[4] = {o, lse, app ? c->k_cache : NULL, app ? c->v_cache : NULL};
    const flashc_tensor *ins[10] = {q,           app ? NULL : c->k_cache, app ? NULL : c->v_cache,
                                    c->k_new,    c->v_new,               c->cache_seqlens,
                                    c->block_table, c->cache_batch_idx,  pr.alibi_slopes,
                                    c->cache_leftpad};
    static const char *const out_names[4] = {"o", "lse", "k_cache", "v_cache"};
    static const char *const in_names[10] = {"q",           "k_cache",      "v_cache",
                                             "k_new",       "v_new",        "cache_seqlens",
                                             "block_table", "cache_batch_idx", "alibi_slopes",
                                             "cache_leftpad"};
    FLASHC_TRY(flashc__check_outputs(fn, 4, outs, out_names, 10, ins, in_names));
    FLASHC_TRY(attn_check_work(fn, p));
    return plan(fn, ATTN_OP_FWD, p, impl, ws);
}

flashc_status flashc_attn_kvcache_fwd(const flashc_attn_params *params,
                                      const flashc_kv_cache *cache, const flashc_tensor *q,
                                      flashc_tensor *o, flashc_tensor *lse,
                                      flashc_attn_stats *stats)
{
    static const char fn[] = "flashc_attn_kvcache_fwd";
    attn_problem p;
    kvcache_views views;
    const attn_impl *impl;
    size_t ws;
    FLASHC_TRY(check_stats(fn, stats));
    FLASHC_TRY(kvcache_plan(fn, params, cache, q, o, lse, &p, &views, &impl, &ws));
    return run(fn, impl, &p, ws, &views, stats);
}

flashc_status flashc_attn_kvcache_fwd_workspace_size(const flashc_attn_params *params,
                                                     const flashc_kv_cache *cache,
                                                     const flashc_tensor *q, const flashc_tensor *o,
                                                     const flashc_tensor *lse, size_t *bytes)
{
    static const char fn[] = "flashc_attn_kvcache_fwd_workspace_size";
    FLASHC_TRY(need_bytes(fn, bytes));
    attn_problem p;
    kvcache_views views;
    const attn_impl *impl;
    size_t ws;
    FLASHC_TRY(kvcache_plan(fn, params, cache, q, o, lse, &p, &views, &impl, &ws));
    *bytes = ws;
    return FLASHC_OK;
}

flashc_status flashc_attn_fwd_unfused(const flashc_attn_params *params, const flashc_tensor *q,
                                      const flashc_tensor *k, const flashc_tensor *v,
                                      flashc_tensor *o, flashc_tensor *lse,
                                      flashc_attn_stats *stats)
{
    static const char fn[] = "flashc_attn_fwd_unfused";
    flashc_attn_params pr;
    attn_problem p;
    FLASHC_TRY(check_stats(fn, stats));
    FLASHC_TRY(read_params(fn, params, &pr));
    pr.workspace = NULL; /* S and P through the counting allocator: that is what it measures */
    pr.num_splits = 0;
    FLASHC_TRY(build_dense(fn, &pr, q, k, v, o, lse, &p));
    FLASHC_TRY(check_fwd_outputs(fn, q, k, v, o, lse, &pr, NULL, NULL, NULL));
    FLASHC_TRY(attn_check_work(fn, &p));
    if (p.device != FLASHC_DEVICE_CPU)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED, "%s: runs on host memory only", fn);
    const attn_impl *impl = attn_impl_find(ATTN_OP_FWD, FLASHC_DEVICE_CPU, "unfused");
    FLASHC_TRY(impl->supports(&p));
    return run(fn, impl, &p, impl->workspace(&p), NULL, stats);
}

/* ---- backward ----------------------------------------------------------------------------- */

/* The gradient tensors of either layout: dout and dq like q/o, dk like k, dv like v. */
static flashc_status add_grads(const char *fn, const flashc_tensor *q, const flashc_tensor *k,
                               const flashc_tensor *v, const flashc_tensor *o,
                               const flashc_tensor *dout, const flashc_tensor *lse,
                               const flashc_tensor *dq, const flashc_tensor *dk,
                               const flashc_tensor *dv, const flashc_attn_params *pr,
                               const flashc_tensor *idx1, const flashc_tensor *idx2,
                               attn_problem *p)
{
    const int nd = q->ndim;
    static const char *const dims3[3] = {"rows", "heads", "head dim"};
    const char *const *dims = nd == 4 ? dims4 : dims3;
    FLASHC_TRY(flashc__check_tensor(fn, "dout", dout, nd));
    FLASHC_TRY(flashc__check_tensor(fn, "dq", dq, nd));
    FLASHC_TRY(flashc__check_tensor(fn, "dk", dk, nd));
    FLASHC_TRY(flashc__check_tensor(fn, "dv", dv, nd));
    FLASHC_TRY(check_same_kind(fn, "dout", dout, q));
    FLASHC_TRY(check_same_kind(fn, "dq", dq, q));
    FLASHC_TRY(check_same_kind(fn, "dk", dk, q));
    FLASHC_TRY(check_same_kind(fn, "dv", dv, q));
    FLASHC_TRY(check_shape(fn, "dout", dout, o->shape, nd, dims, nd - 2, nd - 1, "o"));
    FLASHC_TRY(check_shape(fn, "dq", dq, q->shape, nd, dims, nd - 2, nd - 1, "q"));
    FLASHC_TRY(check_shape(fn, "dk", dk, k->shape, nd, dims, nd - 2, nd - 1, "k"));
    FLASHC_TRY(check_shape(fn, "dv", dv, v->shape, nd, dims, nd - 2, nd - 1, "v"));
    const flashc_tensor *outs[3] = {dq, dk, dv};
    const flashc_tensor *ins[9] = {q, k, v, o, dout, lse, pr->alibi_slopes, idx1, idx2};
    static const char *const out_names[3] = {"dq", "dk", "dv"};
    static const char *const in_names[9] = {"q",    "k",   "v",
                                            "o",    "dout", "lse",
                                            "alibi_slopes", "cu_seqlens_q", "cu_seqlens_k"};
    FLASHC_TRY(flashc__check_outputs(fn, 3, outs, out_names, 9, ins, in_names));
    p->dout = dout->data;
    p->dq = dq->data, p->dk = dk->data, p->dv = dv->data;
    if (nd == 4) {
        copy_strides(p->sdo, dout);
        copy_strides(p->sdq, dq), copy_strides(p->sdk, dk), copy_strides(p->sdv, dv);
    } else {
        const flashc_tensor *ts[4] = {dout, dq, dk, dv};
        int64_t *ss[4] = {p->sdo, p->sdq, p->sdk, p->sdv};
        for (int t = 0; t < 4; t++) {
            ss[t][0] = 0;
            ss[t][1] = ts[t]->stride[0];
            ss[t][2] = ts[t]->stride[1];
            ss[t][3] = ts[t]->stride[2];
        }
    }
    return FLASHC_OK;
}

static flashc_status bwd_plan(const char *fn, const flashc_attn_params *params,
                              const flashc_varlen *vl, const flashc_tensor *q,
                              const flashc_tensor *k, const flashc_tensor *v,
                              const flashc_tensor *o, const flashc_tensor *dout,
                              const flashc_tensor *lse, const flashc_tensor *dq,
                              const flashc_tensor *dk, const flashc_tensor *dv, int naive,
                              attn_problem *p, const attn_impl **impl, size_t *ws)
{
    flashc_attn_params pr;
    FLASHC_TRY(read_params(fn, params, &pr));
    if (naive)
        pr.workspace = NULL, pr.num_splits = 0;
    if (!naive && !lse)
        return flashc__fail(FLASHC_ERR_NULL_POINTER, "%s: lse is required by the backward", fn);
    flashc_varlen vlc;
    if (vl) {
        FLASHC_TRY(read_varlen(fn, vl, &vlc));
        vl = &vlc;
        if (vl->block_table)
            return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                                "%s: a paged varlen (block_table) is forward only: no gradient "
                                "flows into a paged cache",
                                fn);
        idx_host h = {{0}, 0};
        const flashc_status st = build_varlen(fn, &pr, vl, q, k, v, o, lse, p, &h);
        idx_host_free(&h);
        FLASHC_TRY(st);
    }
    else
        FLASHC_TRY(build_dense(fn, &pr, q, k, v, o, lse, p));
    FLASHC_TRY(add_grads(fn, q, k, v, o, dout, lse, dq, dk, dv, &pr,
                         vl ? vl->cu_seqlens_q : NULL, vl ? vl->cu_seqlens_k : NULL, p));
    FLASHC_TRY(attn_check_work(fn, p));
    if (naive) {
        if (p->device != FLASHC_DEVICE_CPU)
            return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                                "%s: the reference runs on host memory only", fn);
        *impl = attn_impl_find(ATTN_OP_BWD, FLASHC_DEVICE_CPU, "ref");
        FLASHC_TRY((*impl)->supports(p));
        *ws = (*impl)->workspace(p);
        return FLASHC_OK;
    }
    return plan(fn, ATTN_OP_BWD, p, impl, ws);
}

flashc_status flashc_attn_bwd(const flashc_attn_params *params, const flashc_tensor *q,
                              const flashc_tensor *k, const flashc_tensor *v,
                              const flashc_tensor *o, const flashc_tensor *dout,
                              const flashc_tensor *lse, flashc_tensor *dq, flashc_tensor *dk,
                              flashc_tensor *dv, flashc_attn_stats *stats)
{
    static const char fn[] = "flashc_attn_bwd";
    attn_problem p;
    const attn_impl *impl;
    size_t ws;
    FLASHC_TRY(check_stats(fn, stats));
    FLASHC_TRY(bwd_plan(fn, params, NULL, q, k, v, o, dout, lse, dq, dk, dv, 0, &p, &impl, &ws));
    return run(fn, impl, &p, ws, NULL, stats);
}

flashc_status flashc_attn_bwd_workspace_size(const flashc_attn_params *params,
                                             const flashc_tensor *q, const flashc_tensor *k,
                                             const flashc_tensor *v, const flashc_tensor *o,
                                             const flashc_tensor *dout, const flashc_tensor *lse,
                                             const flashc_tensor *dq, const flashc_tensor *dk,
                                             const flashc_tensor *dv, size_t *bytes)
{
    static const char fn[] = "flashc_attn_bwd_workspace_size";
    FLASHC_TRY(need_bytes(fn, bytes));
    attn_problem p;
    const attn_impl *impl;
    size_t ws;
    FLASHC_TRY(bwd_plan(fn, params, NULL, q, k, v, o, dout, lse, dq, dk, dv, 0, &p, &impl, &ws));
    *bytes = ws;
    return FLASHC_OK;
}

flashc_status flashc_attn_bwd_naive(const flashc_attn_params *params, const flashc_tensor *q,
                                    const flashc_tensor *k, const flashc_tensor *v,
                                    const flashc_tensor *o, const flashc_tensor *dout,
                                    const flashc_tensor *lse, flashc_tensor *dq, flashc_tensor *dk,
                                    flashc_tensor *dv, flashc_attn_stats *stats)
{
    static const char fn[] = "flashc_attn_bwd_naive";
    attn_problem p;
    const attn_impl *impl;
    size_t ws;
    FLASHC_TRY(check_stats(fn, stats));
    FLASHC_TRY(bwd_plan(fn, params, NULL, q, k, v, o, dout, lse, dq, dk, dv, 1, &p, &impl, &ws));
    return run(fn, impl, &p, ws, NULL, stats);
}

flashc_status flashc_attn_varlen_bwd(const flashc_attn_params *params, const flashc_varlen *varlen,
                                     const flashc_tensor *q, const flashc_tensor *k,
                                     const flashc_tensor *v, const flashc_tensor *o,
                                     const flashc_tensor *dout, const flashc_tensor *lse,
                                     flashc_tensor *dq, flashc_tensor *dk, flashc_tensor *dv,
                                     flashc_attn_stats *stats)
{
    static const char fn[] = "flashc_attn_varlen_bwd";
    attn_problem p;
    const attn_impl *impl;
    size_t ws;
    FLASHC_TRY(check_stats(fn, stats));
    if (!varlen)
        return flashc__fail(FLASHC_ERR_NULL_POINTER, "%s: varlen is NULL", fn);
    FLASHC_TRY(bwd_plan(fn, params, varlen, q, k, v, o, dout, lse, dq, dk, dv, 0, &p, &impl, &ws));
    return run(fn, impl, &p, ws, NULL, stats);
}

flashc_status flashc_attn_varlen_bwd_workspace_size(
    const flashc_attn_params *params, const flashc_varlen *varlen, const flashc_tensor *q,
    const flashc_tensor *k, const flashc_tensor *v, const flashc_tensor *o,
    const flashc_tensor *dout, const flashc_tensor *lse, const flashc_tensor *dq,
    const flashc_tensor *dk, const flashc_tensor *dv, size_t *bytes)
{
    static const char fn[] = "flashc_attn_varlen_bwd_workspace_size";
    FLASHC_TRY(need_bytes(fn, bytes));
    if (!varlen)
        return flashc__fail(FLASHC_ERR_NULL_POINTER, "%s: varlen is NULL", fn);
    attn_problem p;
    const attn_impl *impl;
    size_t ws;
    FLASHC_TRY(bwd_plan(fn, params, varlen, q, k, v, o, dout, lse, dq, dk, dv, 0, &p, &impl, &ws));
    *bytes = ws;
    return FLASHC_OK;
}
