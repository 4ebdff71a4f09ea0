/* swiglu.c — fused SwiGLU on the CPU: reads gate and up in place from the gate|up row, writes
 * silu(g) * u once. One pass, no temporaries; rows split across threads. */
#include "internal.h"

#include <math.h>

flashc_status cpu_swiglu(const rows_problem *p)
{
    const int64_t I = p->D;
#pragma omp parallel for schedule(static) num_threads(p->threads)
    for (int64_t t = 0; t < p->T; t++) {
        const int64_t go = t * p->sx[0], uo = go + I * p->sx[1], yo = t * p->sy[0];
        for (int64_t i = 0; i < I; i++) {
            const float g = flashc__load(p->x, p->dtype, go + i * p->sx[1]);
            const float u = flashc__load(p->x, p->dtype, uo + i * p->sx[1]);
            flashc__store(p->y, p->dtype, yo + i * p->sy[1], g / (1.0f + expf(-g)) * u);
        }
    }
    return FLASHC_OK;
}
