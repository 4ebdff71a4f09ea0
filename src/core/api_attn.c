/* api_attn.c — the attention entry points: validate, reduce to an attn_problem, dispatch. */
#include "internal.h"

#include <math.h>
#include <string.h>

int64_t attn_tile_pairs_per_head(const attn_problem *p, int64_t br, int64_t bc)
{
    int64_t pairs = 0;
    for (int64_t i0 = 0; i0 < p->Sq; i0 += br) {
        int64_t i1 = i0 + br < p->Sq ? i0 + br : p->Sq;
        int64_t kend = attn_key_end(p, i1 - 1); /* the last row of the block sees the most */
        if (kend > 0)
            pairs += (kend + bc - 1) / bc;
    }
    return pairs;
}

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

/* Shape (B, S, H, D) of t must equal want[]. */
static flashc_status check_shape4(const char *fn, const char *name, const flashc_tensor *t,
                                  const int64_t *want, const char *like)
{
    static const char *dims[4] = {"batch", "seqlen", "heads", "head dim"};
    for (int i = 0; i < 4; i++) {
        if (t->shape[i] != want[i]) {
            flashc_status st = i == 2   ? FLASHC_ERR_HEAD_MISMATCH
                               : i == 3 ? FLASHC_ERR_DIM_MISMATCH
                                        : FLASHC_ERR_INVALID_SHAPE;
            return flashc__fail(st, "%s: %s.shape[%d] (%s) = %lld but %s has %lld", fn, name, i,
                                dims[i], (long long)t->shape[i], like, (long long)want[i]);
        }
    }
    return FLASHC_OK;
}

static flashc_status check_params(const char *fn, const flashc_attn_params *pr)
{
    if (!isfinite(pr->softmax_scale))
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT, "%s: softmax_scale = %g is not finite",
                            fn, (double)pr->softmax_scale);
    if (pr->block_q < 0 || pr->block_k < 0)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                            "%s: block_q = %lld, block_k = %lld; tiles must be >= 0 (0 = default)",
                            fn, (long long)pr->block_q, (long long)pr->block_k);
    if (pr->num_threads < 0)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT, "%s: num_threads = %d is negative", fn,
                            pr->num_threads);
    return FLASHC_OK;
}

/* q, k, v, o (and lse if given) → p. o is an output of the forward, an input of the backward. */
static flashc_status build_problem(const char *fn, const flashc_attn_params *params,
                                   const flashc_tensor *q, const flashc_tensor *k,
                                   const flashc_tensor *v, const flashc_tensor *o,
                                   const flashc_tensor *lse, attn_problem *p)
{
    flashc_attn_params defaults;
    memset(&defaults, 0, sizeof defaults);
    const flashc_attn_params *pr = params ? params : &defaults;
    FLASHC_TRY(check_params(fn, pr));
    FLASHC_TRY(flashc__check_tensor(fn, "q", q, 4));
    FLASHC_TRY(flashc__check_tensor(fn, "k", k, 4));
    FLASHC_TRY(flashc__check_tensor(fn, "v", v, 4));
    FLASHC_TRY(flashc__check_tensor(fn, "o", o, 4));
    FLASHC_TRY(check_same_kind(fn, "k", k, q));
    FLASHC_TRY(check_same_kind(fn, "v", v, q));
    FLASHC_TRY(check_same_kind(fn, "o", o, q));

    int64_t B = q->shape[0], Sq = q->shape[1], Hq = q->shape[2], D = q->shape[3];
    int64_t Sk = k->shape[1], Hkv = k->shape[2];
    if (k->shape[0] != B)
        return flashc__fail(FLASHC_ERR_INVALID_SHAPE, "%s: k.shape[0] (batch) = %lld but q has %lld",
                            fn, (long long)k->shape[0], (long long)B);
    if (k->shape[3] != D)
        return flashc__fail(FLASHC_ERR_DIM_MISMATCH,
                            "%s: k.shape[3] (head dim) = %lld but q.shape[3] = %lld", fn,
                            (long long)k->shape[3], (long long)D);
    FLASHC_TRY(check_shape4(fn, "v", v, k->shape, "k"));
    FLASHC_TRY(check_shape4(fn, "o", o, q->shape, "q"));
    if (Hq % Hkv != 0)
        return flashc__fail(FLASHC_ERR_HEAD_MISMATCH,
                            "%s: q has %lld heads, not a multiple of k/v's %lld heads", fn,
                            (long long)Hq, (long long)Hkv);
    if (lse) {
        FLASHC_TRY(flashc__check_tensor(fn, "lse", lse, 3));
        if (lse->dtype != FLASHC_F32)
            return flashc__fail(FLASHC_ERR_UNSUPPORTED_DTYPE, "%s: lse must be float32", fn);
        if (lse->device != q->device)
            return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT, "%s: lse is not on q's device", fn);
        if (lse->shape[0] != B || lse->shape[1] != Hq || lse->shape[2] != Sq)
            return flashc__fail(FLASHC_ERR_INVALID_SHAPE,
                                "%s: lse shape (%lld, %lld, %lld), expected (B, Hq, Sq) = "
                                "(%lld, %lld, %lld)",
                                fn, (long long)lse->shape[0], (long long)lse->shape[1],
                                (long long)lse->shape[2], (long long)B, (long long)Hq,
                                (long long)Sq);
    }

    memset(p, 0, sizeof *p);
    p->B = B, p->Sq = Sq, p->Sk = Sk, p->Hq = Hq, p->Hkv = Hkv, p->D = D;
    p->dtype = q->dtype;
    p->device = q->device;
    p->scale = pr->softmax_scale != 0.0f ? pr->softmax_scale : (float)(1.0 / sqrt((double)D));
    p->causal = pr->causal != 0;
    p->br = pr->block_q, p->bc = pr->block_k;
    p->threads = flashc__threads(pr->num_threads);
    p->stream = pr->cuda_stream;
    p->q = q->data, p->k = k->data, p->v = v->data, p->o = o->data;
    copy_strides(p->sq, q), copy_strides(p->sk, k), copy_strides(p->sv, v), copy_strides(p->so, o);
    if (lse) {
        p->lse = (float *)lse->data;
        copy_strides(p->slse, lse);
    }
    return FLASHC_OK;
}

static flashc_status check_fwd_outputs(const char *fn, const flashc_tensor *q,
                                       const flashc_tensor *k, const flashc_tensor *v,
                                       const flashc_tensor *o, const flashc_tensor *lse)
{
    const flashc_tensor *outs[2] = {o, lse}, *ins[3] = {q, k, v};
    static const char *const out_names[2] = {"o", "lse"}, *const in_names[3] = {"q", "k", "v"};
    return flashc__check_outputs(fn, 2, outs, out_names, 3, ins, in_names);
}

static flashc_status fwd_supported(const attn_problem *p)
{
    if (p->device == FLASHC_DEVICE_CPU)
        return cpu_attn_fwd_supports(p);
#ifdef FLASHC_HAVE_CUDA
    return cuda_attn_fwd_supports(p);
#else
    return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                        "flashc_attn_fwd: CUDA tensors given but this build has no CUDA backend");
#endif
}

flashc_status flashc_attn_fwd_supported(const flashc_attn_params *params, const flashc_tensor *q,
                                        const flashc_tensor *k, const flashc_tensor *v,
                                        const flashc_tensor *o, const flashc_tensor *lse)
{
    static const char fn[] = "flashc_attn_fwd";
    attn_problem p;
    FLASHC_TRY(build_problem(fn, params, q, k, v, o, lse, &p));
    FLASHC_TRY(check_fwd_outputs(fn, q, k, v, o, lse));
    return fwd_supported(&p);
}

flashc_status flashc_attn_fwd(const flashc_attn_params *params, const flashc_tensor *q,
                              const flashc_tensor *k, const flashc_tensor *v, flashc_tensor *o,
                              flashc_tensor *lse, flashc_attn_stats *stats)
{
    static const char fn[] = "flashc_attn_fwd";
    attn_problem p;
    FLASHC_TRY(build_problem(fn, params, q, k, v, o, lse, &p));
    FLASHC_TRY(check_fwd_outputs(fn, q, k, v, o, lse));
    FLASHC_TRY(fwd_supported(&p));
    flashc_attn_stats local;
    flashc_status st;
    if (p.device == FLASHC_DEVICE_CPU)
        st = cpu_attn_fwd(&p, stats ? stats : &local);
    else
#ifdef FLASHC_HAVE_CUDA
        st = cuda_attn_fwd(&p, stats ? stats : &local);
#else
        st = FLASHC_ERR_UNSUPPORTED;
#endif
    if (st == FLASHC_OK)
        flashc__clear_error();
    return st;
}

flashc_status flashc_attn_fwd_naive(const flashc_attn_params *params, const flashc_tensor *q,
                                    const flashc_tensor *k, const flashc_tensor *v,
                                    flashc_tensor *o, flashc_tensor *lse,
                                    flashc_attn_stats *stats)
{
    static const char fn[] = "flashc_attn_fwd_naive";
    attn_problem p;
    FLASHC_TRY(build_problem(fn, params, q, k, v, o, lse, &p));
    FLASHC_TRY(check_fwd_outputs(fn, q, k, v, o, lse));
    if (p.device != FLASHC_DEVICE_CPU)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED, "%s: the reference runs on host memory only",
                            fn);
    flashc_attn_stats local;
    flashc_status st = ref_attn_fwd(&p, stats ? stats : &local);
    if (st == FLASHC_OK)
        flashc__clear_error();
    return st;
}

flashc_status flashc_attn_fwd_unfused(const flashc_attn_params *params, const flashc_tensor *q,
                                      const flashc_tensor *k, const flashc_tensor *v,
                                      flashc_tensor *o, flashc_tensor *lse,
                                      flashc_attn_stats *stats)
{
    static const char fn[] = "flashc_attn_fwd_unfused";
    attn_problem p;
    FLASHC_TRY(build_problem(fn, params, q, k, v, o, lse, &p));
    FLASHC_TRY(check_fwd_outputs(fn, q, k, v, o, lse));
    if (p.device != FLASHC_DEVICE_CPU)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED, "%s: runs on host memory only", fn);
    FLASHC_TRY(cpu_attn_fwd_supports(&p));
    flashc_attn_stats local;
    flashc_status st = cpu_attn_fwd_unfused(&p, stats ? stats : &local);
    if (st == FLASHC_OK)
        flashc__clear_error();
    return st;
}

/* ---- backward ----------------------------------------------------------------------------- */

static flashc_status build_bwd(const char *fn, const flashc_attn_params *params,
                               const flashc_tensor *q, const flashc_tensor *k,
                               const flashc_tensor *v, const flashc_tensor *o,
                               const flashc_tensor *dout, const flashc_tensor *lse,
                               int lse_required, flashc_tensor *dq, flashc_tensor *dk,
                               flashc_tensor *dv, attn_problem *p)
{
    if (lse_required && !lse)
        return flashc__fail(FLASHC_ERR_NULL_POINTER, "%s: lse is required by the backward", fn);
    FLASHC_TRY(build_problem(fn, params, q, k, v, o, lse, p));
    FLASHC_TRY(flashc__check_tensor(fn, "dout", dout, 4));
    FLASHC_TRY(flashc__check_tensor(fn, "dq", dq, 4));
    FLASHC_TRY(flashc__check_tensor(fn, "dk", dk, 4));
    FLASHC_TRY(flashc__check_tensor(fn, "dv", dv, 4));
    FLASHC_TRY(check_same_kind(fn, "dout", dout, q));
    FLASHC_TRY(check_same_kind(fn, "dq", dq, q));
    FLASHC_TRY(check_same_kind(fn, "dk", dk, q));
    FLASHC_TRY(check_same_kind(fn, "dv", dv, q));
    FLASHC_TRY(check_shape4(fn, "dout", dout, q->shape, "q"));
    FLASHC_TRY(check_shape4(fn, "dq", dq, q->shape, "q"));
    FLASHC_TRY(check_shape4(fn, "dk", dk, k->shape, "k"));
    FLASHC_TRY(check_shape4(fn, "dv", dv, k->shape, "k"));
    const flashc_tensor *outs[3] = {dq, dk, dv}, *ins[6] = {q, k, v, o, dout, lse};
    static const char *const out_names[3] = {"dq", "dk", "dv"},
                             *const in_names[6] = {"q", "k", "v", "o", "dout", "lse"};
    FLASHC_TRY(flashc__check_outputs(fn, 3, outs, out_names, 6, ins, in_names));
    p->dout = dout->data;
    copy_strides(p->sdo, dout);
    p->dq = dq->data, p->dk = dk->data, p->dv = dv->data;
    copy_strides(p->sdq, dq), copy_strides(p->sdk, dk), copy_strides(p->sdv, dv);
    return FLASHC_OK;
}

flashc_status flashc_attn_bwd(const flashc_attn_params *params, const flashc_tensor *q,
                              const flashc_tensor *k, const flashc_tensor *v,
                              const flashc_tensor *o, const flashc_tensor *dout,
                              const flashc_tensor *lse, flashc_tensor *dq, flashc_tensor *dk,
                              flashc_tensor *dv, flashc_attn_stats *stats)
{
    static const char fn[] = "flashc_attn_bwd";
    attn_problem p;
    FLASHC_TRY(build_bwd(fn, params, q, k, v, o, dout, lse, 1, dq, dk, dv, &p));
    if (p.device != FLASHC_DEVICE_CPU)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED, "%s: no CUDA backward yet", fn);
    FLASHC_TRY(cpu_attn_bwd_supports(&p));
    flashc_attn_stats local;
    flashc_status st = cpu_attn_bwd(&p, stats ? stats : &local);
    if (st == FLASHC_OK)
        flashc__clear_error();
    return st;
}

flashc_status flashc_attn_bwd_naive(const flashc_attn_params *params, const flashc_tensor *q,
                                    const flashc_tensor *k, const flashc_tensor *v,
                                    const flashc_tensor *o, const flashc_tensor *dout,
                                    const flashc_tensor *lse, flashc_tensor *dq, flashc_tensor *dk,
                                    flashc_tensor *dv, flashc_attn_stats *stats)
{
    static const char fn[] = "flashc_attn_bwd_naive";
    attn_problem p;
    FLASHC_TRY(build_bwd(fn, params, q, k, v, o, dout, lse, 0, dq, dk, dv, &p));
    if (p.device != FLASHC_DEVICE_CPU)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED, "%s: the reference runs on host memory only",
                            fn);
    flashc_attn_stats local;
    flashc_status st = ref_attn_bwd(&p, stats ? stats : &local);
    if (st == FLASHC_OK)
        flashc__clear_error();
    return st;
}
