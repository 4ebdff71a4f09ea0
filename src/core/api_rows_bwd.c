/* api_rows_bwd.c — entry points of the row ops' backwards (RMSNorm, SwiGLU): validate, reduce to
 * a rows_bwd_problem, dispatch to the host reference, the CPU loop nest or the CUDA kernels. */
#include "internal.h"

#include <math.h>
#include <string.h>

static flashc_status check_like(const char *fn, const char *name, const flashc_tensor *t,
                                const flashc_tensor *like, const char *like_name)
{
    if (t->dtype != like->dtype)
        return flashc__fail(FLASHC_ERR_DTYPE_MISMATCH, "%s: %s is %s but %s is %s", fn, name,
                            flashc__dtype_name(t->dtype), like_name,
                            flashc__dtype_name(like->dtype));
    if (t->device != like->device)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT, "%s: %s is on device %d but %s on %d",
                            fn, name, (int)t->device, like_name, (int)like->device);
    return FLASHC_OK;
}

static flashc_status check_2d(const char *fn, const char *name, const flashc_tensor *t,
                              int64_t rows, int64_t cols)
{
    if (t->shape[0] != rows || t->shape[1] != cols)
        return flashc__fail(FLASHC_ERR_INVALID_SHAPE, "%s: %s is (%lld, %lld), expected (%lld, %lld)",
                            fn, name, (long long)t->shape[0], (long long)t->shape[1],
                            (long long)rows, (long long)cols);
    return FLASHC_OK;
}

static flashc_status host_only(const char *fn, flashc_device dev)
{
    if (dev != FLASHC_DEVICE_CPU)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED, "%s: the reference runs on host memory only",
                            fn);
    return FLASHC_OK;
}

/* ---- RMSNorm backward --------------------------------------------------------------------- */

static flashc_status check_rms_bwd(const char *fn, const flashc_tensor *x, const flashc_tensor *w,
                                   const flashc_tensor *dy, const flashc_tensor *dres, float eps,
                                   const flashc_tensor *dx, const flashc_tensor *dw,
                                   rows_bwd_problem *p)
{
    FLASHC_TRY(flashc__check_tensor(fn, "x", x, 2));
    FLASHC_TRY(flashc__check_tensor(fn, "w", w, 1));
    FLASHC_TRY(flashc__check_tensor(fn, "dy", dy, 2));
    if (dres)
        FLASHC_TRY(flashc__check_tensor(fn, "dres", dres, 2));
    FLASHC_TRY(flashc__check_tensor(fn, "dx", dx, 2));
    FLASHC_TRY(flashc__check_tensor(fn, "dw", dw, 1));
    const int64_t T = x->shape[0], D = x->shape[1];
    FLASHC_TRY(check_like(fn, "w", w, x, "x"));
    FLASHC_TRY(check_like(fn, "dy", dy, x, "x"));
    if (dres)
        FLASHC_TRY(check_like(fn, "dres", dres, x, "x"));
    FLASHC_TRY(check_like(fn, "dx", dx, x, "x"));
    FLASHC_TRY(check_like(fn, "dw", dw, x, "x"));
    if (w->shape[0] != D || dw->shape[0] != D)
        return flashc__fail(FLASHC_ERR_DIM_MISMATCH,
                            "%s: w has %lld and dw %lld elements but x rows have %lld", fn,
                            (long long)w->shape[0], (long long)dw->shape[0], (long long)D);
    FLASHC_TRY(check_2d(fn, "dy", dy, T, D));
    if (dres)
        FLASHC_TRY(check_2d(fn, "dres", dres, T, D));
    FLASHC_TRY(check_2d(fn, "dx", dx, T, D));
    if (!isfinite(eps) || eps < 0.0f)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT, "%s: eps = %g must be finite and >= 0", fn,
                            (double)eps);
    const flashc_tensor *outs[2] = {dx, dw}, *ins[4] = {x, w, dy, dres};
    static const char *const out_names[2] = {"dx", "dw"},
                             *const in_names[4] = {"x", "w", "dy", "dres"};
    FLASHC_TRY(flashc__check_outputs(fn, 2, outs, out_names, 4, ins, in_names));
    memset(p, 0, sizeof *p);
    p->T = T, p->D = D, p->dtype = x->dtype, p->device = x->device;
    p->threads = flashc_get_num_threads();
    p->eps = eps;
    p->x = x->data, p->sx[0] = x->stride[0], p->sx[1] = x->stride[1];
    p->w = w->data, p->sw = w->stride[0];
    p->dy = dy->data, p->sdy[0] = dy->stride[0], p->sdy[1] = dy->stride[1];
    if (dres)
        p->dres = dres->data, p->sdres[0] = dres->stride[0], p->sdres[1] = dres->stride[1];
    p->dx = dx->data, p->sdx[0] = dx->stride[0], p->sdx[1] = dx->stride[1];
    p->dw = dw->data, p->sdw = dw->stride[0];
    return FLASHC_OK;
}

flashc_status flashc_rmsnorm_bwd(const flashc_tensor *x, const flashc_tensor *w,
                                 const flashc_tensor *dy, const flashc_tensor *dres, float eps,
                                 flashc_tensor *dx, flashc_tensor *dw)
{
    static const char fn[] = "flashc_rmsnorm_bwd";
    rows_bwd_problem p;
    FLASHC_TRY(check_rms_bwd(fn, x, w, dy, dres, eps, dx, dw, &p));
    if (p.device == FLASHC_DEVICE_CPU)
        return cpu_rmsnorm_bwd(&p);
#ifdef FLASHC_HAVE_CUDA
    const int64_t es[6] = {p.sx[1], p.sw, p.sdy[1], p.dres ? p.sdres[1] : 1, p.sdx[1], p.sdw};
    FLASHC_TRY(cuda_rows_supports(fn, p.dtype, es, 6));
    return cuda_rmsnorm_bwd(&p);
#else
    return flashc__fail(FLASHC_ERR_UNSUPPORTED, "%s: CUDA tensors but no CUDA backend", fn);
#endif
}

flashc_status flashc_rmsnorm_bwd_naive(const flashc_tensor *x, const flashc_tensor *w,
                                       const flashc_tensor *dy, const flashc_tensor *dres,
                                       float eps, flashc_tensor *dx, flashc_tensor *dw)
{
    static const char fn[] = "flashc_rmsnorm_bwd_naive";
    rows_bwd_problem p;
    FLASHC_TRY(check_rms_bwd(fn, x, w, dy, dres, eps, dx, dw, &p));
    FLASHC_TRY(host_only(fn, p.device));
    return ref_rmsnorm_bwd(&p);
}

/* ---- SwiGLU backward ---------------------------------------------------------------------- */

static flashc_status check_swiglu_bwd(const char *fn, const flashc_tensor *gu,
                                      const flashc_tensor *dout, const flashc_tensor *dgu,
                                      rows_bwd_problem *p)
{
    FLASHC_TRY(flashc__check_tensor(fn, "gate_up", gu, 2));
    FLASHC_TRY(flashc__check_tensor(fn, "dout", dout, 2));
    FLASHC_TRY(flashc__check_tensor(fn, "dgate_up", dgu, 2));
    FLASHC_TRY(check_like(fn, "dout", dout, gu, "gate_up"));
    FLASHC_TRY(check_like(fn, "dgate_up", dgu, gu, "gate_up"));
    if (gu->shape[1] % 2 != 0)
        return flashc__fail(FLASHC_ERR_INVALID_SHAPE,
                            "%s: gate_up has %lld columns; it must be gate|up, an even count", fn,
                            (long long)gu->shape[1]);
    const int64_t T = gu->shape[0], I = gu->shape[1] / 2;
    FLASHC_TRY(check_2d(fn, "dout", dout, T, I));
    FLASHC_TRY(check_2d(fn, "dgate_up", dgu, T, 2 * I));
    const flashc_tensor *outs[1] = {dgu}, *ins[2] = {gu, dout};
    static const char *const out_names[1] = {"dgate_up"},
                             *const in_names[2] = {"gate_up", "dout"};
    FLASHC_TRY(flashc__check_outputs(fn, 1, outs, out_names, 2, ins, in_names));
    memset(p, 0, sizeof *p);
    p->T = T, p->D = I, p->dtype = gu->dtype, p->device = gu->device;
    p->threads = flashc_get_num_threads();
    p->x = gu->data, p->sx[0] = gu->stride[0], p->sx[1] = gu->stride[1];
    p->dy = dout->data, p->sdy[0] = dout->stride[0], p->sdy[1] = dout->stride[1];
    p->dx = dgu->data, p->sdx[0] = dgu->stride[0], p->sdx[1] = dgu->stride[1];
    return FLASHC_OK;
}

flashc_status flashc_swiglu_bwd(const flashc_tensor *gu, const flashc_tensor *dout,
                                flashc_tensor *dgu)
{
    static const char fn[] = "flashc_swiglu_bwd";
    rows_bwd_problem p;
    FLASHC_TRY(check_swiglu_bwd(fn, gu, dout, dgu, &p));
    if (p.device == FLASHC_DEVICE_CPU)
        return cpu_swiglu_bwd(&p);
#ifdef FLASHC_HAVE_CUDA
    const int64_t es[3] = {p.sx[1], p.sdy[1], p.sdx[1]};
    FLASHC_TRY(cuda_rows_supports(fn, p.dtype, es, 3));
    return cuda_swiglu_bwd(&p);
#else
    return flashc__fail(FLASHC_ERR_UNSUPPORTED, "%s: CUDA tensors but no CUDA backend", fn);
#endif
}

flashc_status flashc_swiglu_bwd_naive(const flashc_tensor *gu, const flashc_tensor *dout,
                                      flashc_tensor *dgu)
{
    static const char fn[] = "flashc_swiglu_bwd_naive";
    rows_bwd_problem p;
    FLASHC_TRY(check_swiglu_bwd(fn, gu, dout, dgu, &p));
    FLASHC_TRY(host_only(fn, p.device));
    return ref_swiglu_bwd(&p);
}
