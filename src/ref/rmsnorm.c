/* ref/rmsnorm.c — unfused RMSNorm, the way a framework's separate ops run it:
 *   [x = x + r]  sq = x*x  ->  ms = mean(sq, -1)  ->  xn = x * rsqrt(ms + eps)  ->  y = xn * w
 * Each arrow is a pass over memory; sq and xn are (T, D) float32 temporaries from the counting
 * allocator (peak memory measured by the benchmark). float64 for the row mean. */
#include "internal.h"

#include <math.h>

flashc_status ref_rmsnorm(const rows_problem *p)
{
    const int64_t T = p->T, D = p->D;
    float *sq = flashc__malloc((size_t)T * (size_t)D * sizeof(float));
    float *xn = flashc__malloc((size_t)T * (size_t)D * sizeof(float));
    float *ms = flashc__malloc((size_t)T * sizeof(float));
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
    for (int64_t t = 0; t < T; t++) {
        double s = 0.0;
        for (int64_t d = 0; d < D; d++)
            s += sq[t * D + d];
        ms[t] = (float)(s / (double)D);
    }
    for (int64_t t = 0; t < T; t++) {
        const double rs = 1.0 / sqrt((double)ms[t] + (double)p->eps);
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
