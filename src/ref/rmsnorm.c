/* ref/rmsnorm.c — unfused RMSNorm, the way a framework's separate ops run it:
 *   [x = x + r]  sq = x*x  ->  ms = mean(sq, -1)  ->  xn = x * rsqrt(ms + eps)  ->  y = xn * w
 * (a row whose x^2 over- or underflows float32 takes the mean of (x / max|x|)^2 instead)
 * Each arrow is a pass over memory; sq and xn are (T, D) float32 temporaries from the counting
 * allocator (peak memory measured by the benchmark). float64 for the row mean. */
#include "internal.h"

#include <math.h>

flashc_status ref_rmsnorm(const rows_problem *p)
{
    const int64_t T = p->T, D = p->D;
    float *sq = flashc__malloc((size_t)T * (size_t)D * sizeof(float));
    float *xn = flashc__malloc((size_t)T * (size_t)D * sizeof(float));
    float *ms = flashc__malloc((size_t)T * 2 * sizeof(float)); /* per row: mean, scale */
    if (!sq || !xn || !ms) {
        flashc__free(sq), flashc__free(xn), flashc__free(ms);
        return flashc__fail(FLASHC_ERR_OUT_OF_MEMORY,
                            "rmsnorm (naive): cannot allocate two (%lld, %lld) temporaries",
                            (long long)T, (long long)D);
    }
    if (p->r) /* the residual add, written back into x */
        for (int64_t t = 0; t < T; t++)
            for (int64_t d = 0; d < D; d++) {
                const int64_t ix = t * p->sx[0] + d * p->sx[1];
                flashc__store(p->xw, p->dtype, ix,
                              flashc__load(p->x, p->dtype, ix) +
                                  flashc__load(p->r, p->dtype, t * p->sr[0] + d * p->sr[1]));
            }
    for (int64_t t = 0; t < T; t++)
        for (int64_t d = 0; d < D; d++) {
            const float v = flashc__load(p->x, p->dtype, t * p->sx[0] + d * p->sx[1]);
            sq[t * D + d] = v * v;
        }
    float *scale = ms + T;
    for (int64_t t = 0; t < T; t++) {
        double s = 0.0;
        for (int64_t d = 0; d < D; d++)
            s += sq[t * D + d];
        scale[t] = 1.0f;
        if (isinf(s) || s < 0x1p-64) {
            /* x^2 overflowed (|x| >~ 2e19) or underflowed float32: the mean of (x / max|x|)^2
             * instead, and the scale back in rs */
            float amax = 0.0f;
            for (int64_t d = 0; d < D; d++)
                amax = fmaxf(amax, fabsf(flashc__load(p->x, p->dtype, t * p->sx[0] + d * p->sx[1])));
            if (amax > 0.0f && isfinite(amax)) {
                s = 0.0;
                for (int64_t d = 0; d < D; d++) {
                    const double u =
                        (double)flashc__load(p->x, p->dtype, t * p->sx[0] + d * p->sx[1]) / amax;
                    s += u * u;
                }
                scale[t] = amax;
            }
        }
        ms[t] = (float)(s / (double)D);
    }
    for (int64_t t = 0; t < T; t++) {
        const double sc = scale[t];
        const double rs = 1.0 / (sc * sqrt((double)ms[t] + (double)p->eps / (sc * sc)));
        for (int64_t d = 0; d < D; d++)
            xn[t * D + d] =
                (float)((double)flashc__load(p->x, p->dtype, t * p->sx[0] + d * p->sx[1]) * rs);
    }
    for (int64_t t = 0; t < T; t++)
        for (int64_t d = 0; d < D; d++)
            flashc__store(p->y, p->dtype, t * p->sy[0] + d * p->sy[1],
                          xn[t * D + d] * flashc__load(p->w, p->dtype, d * p->sw));
    flashc__free(sq), flashc__free(xn), flashc__free(ms);
    return FLASHC_OK;
}

/* The backward in float64, row by row (the formulas of flashc.h): no temporaries but dw's
 * float64 accumulator. */
flashc_status ref_rmsnorm_bwd(const rows_bwd_problem *p)
{
    const int64_t T = p->T, D = p->D;
    double *dw = flashc__calloc((size_t)D, sizeof(double));
    if (!dw)
        return flashc__fail(FLASHC_ERR_OUT_OF_MEMORY, "rmsnorm_bwd (naive): out of memory");
    const flashc_dtype dt = p->dtype;
    for (int64_t t = 0; t < T; t++) {
        double ss = 0.0, dot = 0.0;
        for (int64_t d = 0; d < D; d++) {
            const double x = flashc__load(p->x, dt, t * p->sx[0] + d * p->sx[1]);
            const double g = (double)flashc__load(p->dy, dt, t * p->sdy[0] + d * p->sdy[1]) *
                             (double)flashc__load(p->w, dt, d * p->sw);
            ss += x * x, dot += g * x;
        }
        const double rstd = 1.0 / sqrt(ss / (double)D + (double)p->eps);
        const double c = rstd * rstd * dot / (double)D;
        for (int64_t d = 0; d < D; d++) {
            const double x = flashc__load(p->x, dt, t * p->sx[0] + d * p->sx[1]);
            const double dy = flashc__load(p->dy, dt, t * p->sdy[0] + d * p->sdy[1]);
            const double g = dy * (double)flashc__load(p->w, dt, d * p->sw);
            double dx = rstd * (g - x * c);
            if (p->dres)
                dx += flashc__load(p->dres, dt, t * p->sdres[0] + d * p->sdres[1]);
            flashc__store(p->dx, dt, t * p->sdx[0] + d * p->sdx[1], (float)dx);
            dw[d] += dy * x * rstd;
        }
    }
    for (int64_t d = 0; d < D; d++)
        flashc__store(p->dw, dt, d * p->sdw, (float)dw[d]);
    flashc__free(dw);
    return FLASHC_OK;
}
