/* swiglu.c — fused SwiGLU on the CPU: the loop nest. Each row is one call of the table's
 * swiglu_row (kernels.h), which reads gate and up in place from the gate|up row and writes
 * silu(g) * u once. One pass, no temporaries; rows split statically across threads. */
#include "internal.h"
#include "kernels.h"

flashc_status cpu_swiglu(const rows_problem *p)
{
    const cpu_kernels *kr = cpu_kernels_get();
    const int64_t esize = (int64_t)flashc_dtype_size(p->dtype);
#pragma omp parallel for schedule(static) num_threads(p->threads)
    for (int64_t t = 0; t < p->T; t++)
        kr->swiglu_row((const char *)p->x + t * p->sx[0] * esize, p->sx[1],
                       (char *)p->y + t * p->sy[0] * esize, p->sy[1], p->D, p->dtype);
    return FLASHC_OK;
}
