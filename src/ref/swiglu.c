/* ref/swiglu.c — unfused SwiGLU: g = gu[:, :I] and u = gu[:, I:] copied out (as a framework's
 * chunk().contiguous() does), a = silu(g) materialised, then out = a * u. Three (T, I) float32
 * temporaries from the counting allocator. */
#include "internal.h"

#include <math.h>

flashc_status ref_swiglu(const rows_problem *p)
{
    const int64_t T = p->T, I = p->D;
    const size_t n = (size_t)T * (size_t)I;
    float *g = flashc__malloc(n * sizeof(float));
    float *u = flashc__malloc(n * sizeof(float));
    float *a = flashc__malloc(n * sizeof(float));
    if (!g || !u || !a) {
        flashc__free(g), flashc__free(u), flashc__free(a);
        return flashc__fail(FLASHC_ERR_OUT_OF_MEMORY,
                            "swiglu (naive): cannot allocate three (%lld, %lld) temporaries",
                            (long long)T, (long long)I);
    }
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < I; i++) {
            g[t * I + i] = flashc__load(p->x, p->dtype, t * p->sx[0] + i * p->sx[1]);
            u[t * I + i] = flashc__load(p->x, p->dtype, t * p->sx[0] + (I + i) * p->sx[1]);
        }
    for (size_t e = 0; e < n; e++)
        a[e] = (float)((double)g[e] / (1.0 + exp(-(double)g[e])));
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < I; i++)
            flashc__store(p->y, p->dtype, t * p->sy[0] + i * p->sy[1], a[t * I + i] * u[t * I + i]);
    flashc__free(g), flashc__free(u), flashc__free(a);
    return FLASHC_OK;
}

/* The backward in float64: dg = dout u s (1 + g (1 - s)), du = dout g s, s = sigmoid(g). */
flashc_status ref_swiglu_bwd(const rows_bwd_problem *p)
{
    const int64_t I = p->D;
    const flashc_dtype dt = p->dtype;
    for (int64_t t = 0; t < p->T; t++)
        for (int64_t i = 0; i < I; i++) {
            const double g = flashc__load(p->x, dt, t * p->sx[0] + i * p->sx[1]);
            const double u = flashc__load(p->x, dt, t * p->sx[0] + (I + i) * p->sx[1]);
            const double go = flashc__load(p->dy, dt, t * p->sdy[0] + i * p->sdy[1]);
            const double s = 1.0 / (1.0 + exp(-g));
            flashc__store(p->dx, dt, t * p->sdx[0] + i * p->sdx[1],
                          (float)(go * u * s * (1.0 + g * (1.0 - s))));
            flashc__store(p->dx, dt, t * p->sdx[0] + (I + i) * p->sdx[1], (float)(go * g * s));
        }
    return FLASHC_OK;
}
