/* swiglu.c — fused SwiGLU on the CPU: the loop nest. Each row is one call of the table's
 * swiglu_row (kernels.h), which reads gate and up in place from the gate|up row and writes
 * silu(g) * u once. One pass, no temporaries; rows split statically across threads. */
#include "internal.h"
#include "kernels.h"

#ifdef _OPENMP
#include <omp.h>
#endif

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

/* ---- backward ----------------------------------------------------------------------------
 * Per row: g, u, dout widened into float32 rows, e = exp(-g) by the table's vector exp, then
 * s = 1 / (1 + e), dg = dout u s (1 + g (1 - s)), du = dout g s in plain loops, both halves of
 * dgu stored once. A gate below about -88 makes e = +inf: s = 0 and both gradients 0 (no NaN). */
flashc_status cpu_swiglu_bwd(const rows_bwd_problem *p)
{
    const cpu_kernels *kr = cpu_kernels_get();
    const int64_t T = p->T, I = p->D;
    const flashc_dtype dt = p->dtype;
    const int64_t es = (int64_t)flashc_dtype_size(dt);
    int threads = p->threads;
    if ((int64_t)threads > T)
        threads = (int)T;
    float *rows = flashc__malloc((size_t)threads * 4 * (size_t)I * sizeof(float));
    if (!rows)
        return flashc__fail(FLASHC_ERR_OUT_OF_MEMORY, "flashc_swiglu_bwd: out of memory");
#pragma omp parallel num_threads(threads)
    {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        float *g = rows + (size_t)tid * 4 * (size_t)I, *u = g + I, *go = u + I, *e = go + I;
#pragma omp for schedule(static)
        for (int64_t t = 0; t < T; t++) {
            const char *gu = (const char *)p->x + t * p->sx[0] * es;
            const char *dout = (const char *)p->dy + t * p->sdy[0] * es;
            char *dgu = (char *)p->dx + t * p->sdx[0] * es;
            for (int k = 0; k < 3; k++) {
                float *dst = k == 0 ? g : k == 1 ? u : go;
                const char *src = k == 2 ? dout : gu + (k == 1 ? I * p->sx[1] * es : 0);
                const int64_t st = k == 2 ? p->sdy[1] : p->sx[1];
                if (st == 1)
                    kr->load_row(src, dt, I, dst);
                else
                    for (int64_t i = 0; i < I; i++)
                        dst[i] = flashc__load(src, dt, i * st);
            }
            for (int64_t i = 0; i < I; i++)
                e[i] = -g[i];
            kr->exp(e, e, I);
            for (int64_t i = 0; i < I; i++) {
                const float s = 1.0f / (1.0f + e[i]);
                const float dg = go[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
                u[i] = go[i] * g[i] * s; /* du */
                g[i] = dg;
            }
            if (p->sdx[1] == 1) {
                kr->store_row(g, 1.0f, I, dgu, dt);
                kr->store_row(u, 1.0f, I, dgu + I * es, dt);
            } else {
                for (int64_t i = 0; i < I; i++) {
                    flashc__store(dgu, dt, i * p->sdx[1], g[i]);
                    flashc__store(dgu, dt, (I + i) * p->sdx[1], u[i]);
                }
            }
        }
    }
    flashc__free(rows);
    return FLASHC_OK;
}
