/* api_rows.c — entry points of the row-wise fused ops (RMSNorm, residual RMSNorm, SwiGLU). */
#include "internal.h"

#include <math.h>
#include <string.h>

/* Every tensor on x's device (host, or CUDA in a build with the CUDA backend) and x's dtype. */
static flashc_status check_host_like(const char *fn, const char *name, const flashc_tensor *t,
                                     const flashc_tensor *like)
{
    if (like ? t->device != like->device
             : t->device != FLASHC_DEVICE_CPU && t->device != FLASHC_DEVICE_CUDA)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED, "%s: %s is on device %d, not x's", fn, name,
                            (int)t->device);
    if (like && t->dtype != like->dtype)
        return flashc__fail(FLASHC_ERR_DTYPE_MISMATCH, "%s: %s is %s but x is %s", fn, name,
                            flashc__dtype_name(t->dtype), flashc__dtype_name(like->dtype));
    return FLASHC_OK;
}

/* The fused ops' dispatch: the CPU loop nest or the CUDA kernels (unit element strides). */
static flashc_status run_fused(const char *fn, const rows_problem *p, int swiglu)
{
    if (p->device == FLASHC_DEVICE_CPU)
        return swiglu ? cpu_swiglu(p) : cpu_rmsnorm(p);
#ifdef FLASHC_HAVE_CUDA
    const int64_t es[4] = {p->sx[1], p->r ? p->sr[1] : 1, swiglu ? 1 : p->sw, p->sy[1]};
    FLASHC_TRY(cuda_rows_supports(fn, p->dtype, es, 4));
    return swiglu ? cuda_swiglu(p) : cuda_rmsnorm(p);
#else
    return flashc__fail(FLASHC_ERR_UNSUPPORTED, "%s: CUDA tensors but no CUDA backend", fn);
#endif
}

static flashc_status host_only(const char *fn, const rows_problem *p)
{
    if (p->device != FLASHC_DEVICE_CPU)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED, "%s: the naive version runs on host memory only",
                            fn);
    return FLASHC_OK;
}

static flashc_status check_rmsnorm(const char *fn, const flashc_tensor *x, const flashc_tensor *r,
                                   const flashc_tensor *w, float eps, const flashc_tensor *y,
                                   int residual, rows_problem *p)
{
    FLASHC_TRY(flashc__check_tensor(fn, "x", x, 2));
    FLASHC_TRY(check_host_like(fn, "x", x, NULL));
    if (residual) {
        FLASHC_TRY(flashc__check_tensor(fn, "residual", r, 2));
        FLASHC_TRY(check_host_like(fn, "residual", r, x));
        if (r->shape[0] != x->shape[0] || r->shape[1] != x->shape[1])
            return flashc__fail(FLASHC_ERR_INVALID_SHAPE,
                                "%s: residual is (%lld, %lld) but x is (%lld, %lld)", fn,
                                (long long)r->shape[0], (long long)r->shape[1],
                                (long long)x->shape[0], (long long)x->shape[1]);
    }
    FLASHC_TRY(flashc__check_tensor(fn, "w", w, 1));
    FLASHC_TRY(check_host_like(fn, "w", w, x));
    FLASHC_TRY(flashc__check_tensor(fn, "y", y, 2));
    FLASHC_TRY(check_host_like(fn, "y", y, x));
    if (w->shape[0] != x->shape[1])
        return flashc__fail(FLASHC_ERR_DIM_MISMATCH, "%s: w has %lld elements but x rows have %lld",
                            fn, (long long)w->shape[0], (long long)x->shape[1]);
    if (y->shape[0] != x->shape[0] || y->shape[1] != x->shape[1])
        return flashc__fail(FLASHC_ERR_INVALID_SHAPE, "%s: y is (%lld, %lld) but x is (%lld, %lld)",
                            fn, (long long)y->shape[0], (long long)y->shape[1],
                            (long long)x->shape[0], (long long)x->shape[1]);
    if (!isfinite(eps) || eps < 0.0f)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT, "%s: eps = %g must be finite and >= 0", fn,
                            (double)eps);
    /* the residual variant writes x back: then x is an output too */
    const flashc_tensor *outs[2] = {y, residual ? x : NULL};
    const flashc_tensor *ins[3] = {residual ? NULL : x, w, residual ? r : NULL};
    static const char *const out_names[2] = {"y", "x"}, *const in_names[3] = {"x", "w", "residual"};
    FLASHC_TRY(flashc__check_outputs(fn, 2, outs, out_names, 3, ins, in_names));
    memset(p, 0, sizeof *p);
    p->T = x->shape[0], p->D = x->shape[1];
    p->dtype = x->dtype;
    p->device = x->device;
    p->threads = flashc_get_num_threads();
    p->eps = eps;
    p->x = x->data, p->sx[0] = x->stride[0], p->sx[1] = x->stride[1];
    p->xw = residual ? x->data : NULL;
    if (residual)
        p->r = r->data, p->sr[0] = r->stride[0], p->sr[1] = r->stride[1];
    p->w = w->data, p->sw = w->stride[0];
    p->y = y->data, p->sy[0] = y->stride[0], p->sy[1] = y->stride[1];
    return FLASHC_OK;
}

flashc_status flashc_rmsnorm(const flashc_tensor *x, const flashc_tensor *w, float eps,
                             flashc_tensor *y)
{
    rows_problem p;
    FLASHC_TRY(check_rmsnorm("flashc_rmsnorm", x, NULL, w, eps, y, 0, &p));
    return run_fused("flashc_rmsnorm", &p, 0);
}

flashc_status flashc_rmsnorm_naive(const flashc_tensor *x, const flashc_tensor *w, float eps,
                                   flashc_tensor *y)
{
    rows_problem p;
    FLASHC_TRY(check_rmsnorm("flashc_rmsnorm_naive", x, NULL, w, eps, y, 0, &p));
    FLASHC_TRY(host_only("flashc_rmsnorm_naive", &p));
    return ref_rmsnorm(&p);
}

flashc_status flashc_rmsnorm_residual(flashc_tensor *x, const flashc_tensor *r,
                                      const flashc_tensor *w, float eps, flashc_tensor *y)
{
    rows_problem p;
    FLASHC_TRY(check_rmsnorm("flashc_rmsnorm_residual", x, r, w, eps, y, 1, &p));
    return run_fused("flashc_rmsnorm_residual", &p, 0);
}

flashc_status flashc_rmsnorm_residual_naive(flashc_tensor *x, const flashc_tensor *r,
                                            const flashc_tensor *w, float eps, flashc_tensor *y)
{
    rows_problem p;
    FLASHC_TRY(check_rmsnorm("flashc_rmsnorm_residual_naive", x, r, w, eps, y, 1, &p));
    FLASHC_TRY(host_only("flashc_rmsnorm_residual_naive", &p));
    return ref_rmsnorm(&p);
}

static flashc_status check_swiglu(const char *fn, const flashc_tensor *gu, const flashc_tensor *out,
                                  rows_problem *p)
{
    FLASHC_TRY(flashc__check_tensor(fn, "gate_up", gu, 2));
    FLASHC_TRY(check_host_like(fn, "gate_up", gu, NULL));
    FLASHC_TRY(flashc__check_tensor(fn, "out", out, 2));
    FLASHC_TRY(check_host_like(fn, "out", out, gu));
    if (gu->shape[1] % 2 != 0)
        return flashc__fail(FLASHC_ERR_INVALID_SHAPE,
                            "%s: gate_up has %lld columns; it must be gate|up, an even count", fn,
                            (long long)gu->shape[1]);
    if (out->shape[0] != gu->shape[0] || out->shape[1] != gu->shape[1] / 2) /* no 2 I: overflow */
        return flashc__fail(FLASHC_ERR_INVALID_SHAPE,
                            "%s: out is (%lld, %lld) but gate_up (%lld, %lld) needs (T, I) = "
                            "(%lld, %lld)",
                            fn, (long long)out->shape[0], (long long)out->shape[1],
                            (long long)gu->shape[0], (long long)gu->shape[1],
                            (long long)gu->shape[0], (long long)(gu->shape[1] / 2));
    const flashc_tensor *outs[1] = {out}, *ins[1] = {gu};
    static const char *const out_names[1] = {"out"}, *const in_names[1] = {"gate_up"};
    FLASHC_TRY(flashc__check_outputs(fn, 1, outs, out_names, 1, ins, in_names));
    memset(p, 0, sizeof *p);
    p->T = out->shape[0], p->D = out->shape[1];
    p->dtype = gu->dtype;
    p->device = gu->device;
    p->threads = flashc_get_num_threads();
    p->x = gu->data, p->sx[0] = gu->stride[0], p->sx[1] = gu->stride[1];
    p->y = out->data, p->sy[0] = out->stride[0], p->sy[1] = out->stride[1];
    return FLASHC_OK;
}

flashc_status flashc_swiglu(const flashc_tensor *gu, flashc_tensor *out)
{
    rows_problem p;
    FLASHC_TRY(check_swiglu("flashc_swiglu", gu, out, &p));
    return run_fused("flashc_swiglu", &p, 1);
}

flashc_status flashc_swiglu_naive(const flashc_tensor *gu, flashc_tensor *out)
{
    rows_problem p;
    FLASHC_TRY(check_swiglu("flashc_swiglu_naive", gu, out, &p));
    FLASHC_TRY(host_only("flashc_swiglu_naive", &p));
    return ref_swiglu(&p);
}
