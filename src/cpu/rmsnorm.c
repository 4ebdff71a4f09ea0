/* rmsnorm.c — fused RMSNorm (and residual add + RMSNorm) on the CPU: the loop nest.
 * Rows are split statically across threads (every row costs the same); each row is one call of
 * the table's rmsnorm_row (kernels.h): pass 1 reads the row (adding the residual and writing it
 * back on the way) and sums squares in float32 lanes, pass 2 re-reads it from L1/L2 and writes
 * y. No (T, D) temporary: the op moves the fewest bytes it can (read x [+ r], write y [+ x]). */
#include "internal.h"
#include "kernels.h"

flashc_status cpu_rmsnorm(const rows_problem *p)
{
    const cpu_kernels *kr = cpu_kernels_get();
    const int64_t esize = (int64_t)flashc_dtype_size(p->dtype);
#pragma omp parallel for schedule(static) num_threads(p->threads)
    for (int64_t t = 0; t < p->T; t++) {
        const int64_t xo = t * p->sx[0] * esize;
        kr->rmsnorm_row((const char *)p->x + xo, p->sx[1],
                        p->r ? (const char *)p->r + t * p->sr[0] * esize : NULL, p->sr[1],
                        p->xw ? (char *)p->xw + xo : NULL, p->w, p->sw,
                        (char *)p->y + t * p->sy[0] * esize, p->sy[1], p->D, p->eps, p->dtype);
    }
    return FLASHC_OK;
}
