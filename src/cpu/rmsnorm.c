/* rmsnorm.c — fused RMSNorm (and residual add + RMSNorm) on the CPU.
 * One pass reads the row (adding the residual and writing it back on the way) and sums
 * squares in float32 lanes; the second pass re-reads the row while it is still in L1/L2 and
 * writes y. No (T, D) temporary. Rows are split across threads. Sum of squares: all terms are
 * non-negative, so plain accumulation has no cancellation; float32 holds x = 1e3 squared. */
#include "internal.h"

#include <math.h>

flashc_status cpu_rmsnorm(const rows_problem *p)
{
    const int64_t D = p->D;
#pragma omp parallel for schedule(static) num_threads(p->threads)
    for (int64_t t = 0; t < p->T; t++) {
        const int64_t xo = t * p->sx[0], yo = t * p->sy[0];
        float ss = 0.0f;
        if (p->r) {
            const int64_t ro = t * p->sr[0];
            for (int64_t d = 0; d < D; d++) {
                const float v = flashc__load(p->x, p->dtype, xo + d * p->sx[1]) +
                                flashc__load(p->r, p->dtype, ro + d * p->sr[1]);
                flashc__store(p->xw, p->dtype, xo + d * p->sx[1], v);
                /* square what was stored, so y normalises exactly the new residual stream */
                const float s = flashc__load(p->x, p->dtype, xo + d * p->sx[1]);
                ss += s * s;
            }
        } else {
            for (int64_t d = 0; d < D; d++) {
                const float v = flashc__load(p->x, p->dtype, xo + d * p->sx[1]);
                ss += v * v;
            }
        }
        const float rstd = 1.0f / sqrtf(ss / (float)D + p->eps);
        for (int64_t d = 0; d < D; d++)
            flashc__store(p->y, p->dtype, yo + d * p->sy[1],
                          flashc__load(p->x, p->dtype, xo + d * p->sx[1]) * rstd *
                              flashc__load(p->w, p->dtype, d * p->sw));
    }
    return FLASHC_OK;
}
