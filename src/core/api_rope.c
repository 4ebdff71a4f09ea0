/* api_rope.c — entry points of rotary position embedding: validate, reduce to a rope_problem,
 * dispatch to the float64 reference, the CPU loop nest or the CUDA kernel. */
#include "internal.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

static flashc_status check_rope(const char *fn, const flashc_rope_params *pr,
                                const flashc_tensor *q, const flashc_tensor *k,
                                const flashc_tensor *cs, const flashc_tensor *sn, int inverse,
                                rope_problem *p)
{
    if (!pr)
        return flashc__fail(FLASHC_ERR_NULL_POINTER,
                            "%s: params is required (set struct_size = sizeof(flashc_rope_params))",
                            fn);
    if (pr->struct_size != sizeof(flashc_rope_params))
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                            "%s: params->struct_size = %zu but this library's flashc_rope_params "
                            "has %zu bytes",
                            fn, pr->struct_size, sizeof(flashc_rope_params));
    if (pr->style != FLASHC_ROPE_NEOX && pr->style != FLASHC_ROPE_GPTJ)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT, "%s: style = %d is not a flashc_rope_style",
                            fn, (int)pr->style);
    if (pr->num_threads < 0)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT, "%s: num_threads = %d is negative", fn,
                            pr->num_threads);
    FLASHC_TRY(flashc__check_tensor(fn, "q", q, 4));
    const int64_t B = q->shape[0], S = q->shape[1], D = q->shape[3];
    if (k) {
        FLASHC_TRY(flashc__check_tensor(fn, "k", k, 4));
        if (k->dtype != q->dtype)
            return flashc__fail(FLASHC_ERR_DTYPE_MISMATCH, "%s: k is %s but q is %s", fn,
                                flashc__dtype_name(k->dtype), flashc__dtype_name(q->dtype));
        if (k->device != q->device)
            return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT, "%s: k is not on q's device", fn);
        if (k->shape[0] != B || k->shape[1] != S)
            return flashc__fail(FLASHC_ERR_INVALID_SHAPE,
                                "%s: k has batch %lld, seqlen %lld but q has %lld, %lld", fn,
                                (long long)k->shape[0], (long long)k->shape[1], (long long)B,
                                (long long)S);
        if (k->shape[3] != D)
            return flashc__fail(FLASHC_ERR_DIM_MISMATCH, "%s: k.shape[3] = %lld but q.shape[3] = %lld",
                                fn, (long long)k->shape[3], (long long)D);
    }
    const int64_t rd = pr->rotary_dim ? pr->rotary_dim : D;
    if (rd < 2 || rd > D || rd % 2 != 0)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                            "%s: rotary_dim = %lld must be even and in [2, D = %lld]", fn,
                            (long long)rd, (long long)D);
    if ((cs == NULL) != (sn == NULL))
        return flashc__fail(FLASHC_ERR_NULL_POINTER, "%s: cos and sin must be given together", fn);
    int64_t P = 0;
    if (cs) {
        FLASHC_TRY(flashc__check_tensor(fn, "cos", cs, 2));
        FLASHC_TRY(flashc__check_tensor(fn, "sin", sn, 2));
        for (int i = 0; i < 2; i++) {
            const flashc_tensor *t = i ? sn : cs;
            const char *name = i ? "sin" : "cos";
            if (t->dtype != FLASHC_F32)
                return flashc__fail(FLASHC_ERR_UNSUPPORTED_DTYPE, "%s: %s must be float32 (%s given)",
                                    fn, name, flashc__dtype_name(t->dtype));
            if (t->device != q->device)
                return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT, "%s: %s is not on q's device", fn,
                                    name);
            if (t->shape[1] != rd / 2 || t->shape[0] != cs->shape[0])
                return flashc__fail(FLASHC_ERR_INVALID_SHAPE,
                                    "%s: %s is (%lld, %lld); cos and sin must both be (P, "
                                    "rotary_dim / 2 = %lld)",
                                    fn, name, (long long)t->shape[0], (long long)t->shape[1],
                                    (long long)(rd / 2));
        }
        P = cs->shape[0];
    } else if (!(pr->theta == 0.0f || (isfinite(pr->theta) && pr->theta > 0.0f))) {
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT, "%s: theta = %g must be finite and > 0",
                            fn, (double)pr->theta);
    }
    int64_t spos[2] = {pr->pos_stride[0], pr->pos_stride[1]};
    if (spos[0] == 0 && spos[1] == 0)
        spos[0] = S, spos[1] = 1;
    if (pr->positions) {
        if (spos[0] < 0 || spos[1] < 0)
            return flashc__fail(FLASHC_ERR_INVALID_STRIDE, "%s: pos_stride = {%lld, %lld} is negative",
                                fn, (long long)spos[0], (long long)spos[1]);
        if (P > 0 && q->device == FLASHC_DEVICE_CPU) /* the device's positions: see flashc.h */
            for (int64_t b = 0; b < B; b++)
                for (int64_t s = 0; s < S; s++) {
                    const int32_t v = pr->positions[b * spos[0] + s * spos[1]];
                    if (v < 0 || v >= P)
                        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                                            "%s: positions[%lld, %lld] = %d is outside the "
                                            "tables' %lld rows",
                                            fn, (long long)b, (long long)s, (int)v, (long long)P);
                }
    } else {
        if (pr->pos_offset < -((int64_t)1 << 40) || pr->pos_offset > ((int64_t)1 << 40))
            return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT, "%s: pos_offset = %lld is out of range",
                                fn, (long long)pr->pos_offset);
        if (P > 0 && (pr->pos_offset < 0 || pr->pos_offset + S > P))
            return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                                "%s: positions pos_offset .. pos_offset + S - 1 = %lld .. %lld "
                                "are outside the tables' %lld rows",
                                fn, (long long)pr->pos_offset, (long long)(pr->pos_offset + S - 1),
                                (long long)P);
    }
    const flashc_tensor *outs[2] = {q, k}, *ins[2] = {cs, sn};
    static const char *const out_names[2] = {"q", "k"}, *const in_names[2] = {"cos", "sin"};
    FLASHC_TRY(flashc__check_outputs(fn, 2, outs, out_names, 2, ins, in_names));

    memset(p, 0, sizeof *p);
    p->B = B, p->S = S, p->Hq = q->shape[2], p->Hk = k ? k->shape[2] : 0, p->D = D, p->rd = rd;
    p->dtype = q->dtype, p->device = q->device;
    p->style = (int)pr->style, p->inverse = inverse;
    p->threads = flashc__threads(pr->num_threads);
    p->stream = pr->cuda_stream;
    p->theta = pr->theta == 0.0f ? 10000.0 : (double)pr->theta;
    p->q = q->data;
    for (int i = 0; i < 4; i++)
        p->sq[i] = q->stride[i];
    if (k) {
        p->k = k->data;
        for (int i = 0; i < 4; i++)
            p->sk[i] = k->stride[i];
    }
    if (cs) {
        p->cos = (const float *)cs->data, p->sin = (const float *)sn->data, p->P = P;
        p->scos[0] = cs->stride[0], p->scos[1] = cs->stride[1];
        p->ssin[0] = sn->stride[0], p->ssin[1] = sn->stride[1];
    }
    p->pos = pr->positions;
    p->spos[0] = spos[0], p->spos[1] = spos[1];
    p->pos_offset = pr->pos_offset;
    return FLASHC_OK;
}

static flashc_status run(const char *fn, const rope_problem *p)
{
    flashc_status st;
    if (p->device == FLASHC_DEVICE_CPU) {
        st = cpu_rope(p);
    } else {
#ifdef FLASHC_HAVE_CUDA
        const int64_t es[2] = {p->sq[3], p->k ? p->sk[3] : 1};
        FLASHC_TRY(cuda_rows_supports(fn, p->dtype, es, 2));
        st = cuda_rope(p);
#else
        return flashc__fail(FLASHC_ERR_UNSUPPORTED, "%s: CUDA tensors but no CUDA backend", fn);
#endif
    }
    return st;
}

flashc_status flashc_rope(const flashc_rope_params *params, flashc_tensor *q, flashc_tensor *k,
                          const flashc_tensor *cos, const flashc_tensor *sin)
{
    static const char fn[] = "flashc_rope";
    rope_problem p;
    FLASHC_TRY(check_rope(fn, params, q, k, cos, sin, 0, &p));
    return run(fn, &p);
}

flashc_status flashc_rope_bwd(const flashc_rope_params *params, flashc_tensor *dq,
                              flashc_tensor *dk, const flashc_tensor *cos,
                              const flashc_tensor *sin)
{
    static const char fn[] = "flashc_rope_bwd";
    rope_problem p;
    FLASHC_TRY(check_rope(fn, params, dq, dk, cos, sin, 1, &p));
    return run(fn, &p);
}

flashc_status flashc_rope_naive(const flashc_rope_params *params, flashc_tensor *q,
                                flashc_tensor *k, const flashc_tensor *cos,
                                const flashc_tensor *sin, int inverse)
{
    static const char fn[] = "flashc_rope_naive";
    rope_problem p;
    FLASHC_TRY(check_rope(fn, params, q, k, cos, sin, inverse != 0, &p));
    if (p.device != FLASHC_DEVICE_CPU)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED, "%s: the reference runs on host memory only",
                            fn);
    const flashc_status st = ref_rope(&p);
    return st;
}
