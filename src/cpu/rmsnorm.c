/* rmsnorm.c — fused RMSNorm (and residual add + RMSNorm) on the CPU: the loop nest.
 * Rows are split statically across threads (every row costs the same); each row is one call of
 * the table's rmsnorm_row (kernels.h): pass 1 reads the row (adding the residual and writing it
 * back on the way) and sums squares in float32 lanes, pass 2 re-reads it from L1/L2 and writes
 * y. No (T, D) temporary: the op moves the fewest bytes it can (read x [+ r], write y [+ x]). */
#include "internal.h"
#include "kernels.h"

#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif

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

/* ---- backward ----------------------------------------------------------------------------
 * Rows in fixed chunks of CHUNK rows, whatever the thread count: each chunk sums its rows'
 * dy * x * rstd into its own float32 partial row, and the partials are added in chunk order at
 * the end, so dw is bit-identical for any thread count. Per row: x, dy (and w, once per
 * thread) widened into float32 rows (kernels.h load_row), two sums (x^2 and g x), then dx in
 * one pass; the elementwise loops are plain C for the compiler to vectorise. */
enum { BWD_CHUNK = 64 };

static void load_strided(const cpu_kernels *kr, const void *base, flashc_dtype dt, int64_t off,
                         int64_t stride, int64_t n, float *dst)
{
    if (stride == 1)
        kr->load_row((const char *)base + off * (int64_t)flashc_dtype_size(dt), dt, n, dst);
    else
        for (int64_t i = 0; i < n; i++)
            dst[i] = flashc__load(base, dt, off + i * stride);
}

static void store_strided(const cpu_kernels *kr, const float *src, void *base, flashc_dtype dt,
                          int64_t off, int64_t stride, int64_t n)
{
    if (stride == 1)
        kr->store_row(src, 1.0f, n, (char *)base + off * (int64_t)flashc_dtype_size(dt), dt);
    else
        for (int64_t i = 0; i < n; i++)
            flashc__store(base, dt, off + i * stride, src[i]);
}

flashc_status cpu_rmsnorm_bwd(const rows_bwd_problem *p)
{
    const cpu_kernels *kr = cpu_kernels_get();
    const int64_t T = p->T, D = p->D, nchunk = (T + BWD_CHUNK - 1) / BWD_CHUNK;
    const flashc_dtype dt = p->dtype;
    int threads = p->threads;
    if ((int64_t)threads > nchunk)
        threads = (int)nchunk;
    float *part = flashc__malloc((size_t)nchunk * (size_t)D * sizeof(float));
    float *rows = flashc__malloc((size_t)threads * 4 * (size_t)D * sizeof(float));
    if (!part || !rows) {
        flashc__free(part), flashc__free(rows);
        return flashc__fail(FLASHC_ERR_OUT_OF_MEMORY,
                            "flashc_rmsnorm_bwd: cannot allocate %lld dw partial rows",
                            (long long)nchunk);
    }
#pragma omp parallel num_threads(threads)
    {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        float *x = rows + (size_t)tid * 4 * (size_t)D, *g = x + D, *w = g + D, *dr = w + D;
        load_strided(kr, p->w, dt, 0, p->sw, D, w);
#pragma omp for schedule(static)
        for (int64_t c = 0; c < nchunk; c++) {
            float *dw = part + c * D;
            for (int64_t d = 0; d < D; d++)
                dw[d] = 0.0f;
            const int64_t t1 = (c + 1) * BWD_CHUNK < T ? (c + 1) * BWD_CHUNK : T;
            for (int64_t t = c * BWD_CHUNK; t < t1; t++) {
                load_strided(kr, p->x, dt, t * p->sx[0], p->sx[1], D, x);
                load_strided(kr, p->dy, dt, t * p->sdy[0], p->sdy[1], D, g); /* dy for now */
                float ss = 0.0f, dot = 0.0f;
                for (int64_t d = 0; d < D; d++) {
                    ss += x[d] * x[d];
                    dot += g[d] * w[d] * x[d];
                }
                if (ss >= 0x1p-64f && ss <= 0x1p+100f && isfinite(dot)) {
                    const float rstd = 1.0f / sqrtf(ss / (float)D + p->eps);
                    const float cc = rstd * rstd * dot / (float)D;
                    for (int64_t d = 0; d < D; d++) {
                        const float dy = g[d];
                        dw[d] += dy * (x[d] * rstd); /* |x rstd| <= sqrt(D): no overflow first */
                        g[d] = rstd * (dy * w[d] - x[d] * cc); /* dx */
                    }
                } else {
                    /* x^2 or the dot product leaves float32's range (|x| beyond ~1e19, or a
                     * row of tiny values whose rstd overflows): this row in float64, which
                     * holds both (the forward rescales instead: cpu_rms_rstd_rescaled) */
                    double ssd = 0.0, dotd = 0.0;
                    for (int64_t d = 0; d < D; d++) {
                        ssd += (double)x[d] * x[d];
                        dotd += (double)g[d] * w[d] * x[d];
                    }
                    const double rstd = 1.0 / sqrt(ssd / (double)D + (double)p->eps);
                    const double cc = rstd * rstd * dotd / (double)D;
                    for (int64_t d = 0; d < D; d++) {
                        const double dy = g[d];
                        dw[d] += (float)(dy * x[d] * rstd);
                        g[d] = (float)(rstd * (dy * w[d] - x[d] * cc));
                    }
                }
                if (p->dres) {
                    load_strided(kr, p->dres, dt, t * p->sdres[0], p->sdres[1], D, dr);
                    for (int64_t d = 0; d < D; d++)
                        g[d] += dr[d];
                }
                store_strided(kr, g, p->dx, dt, t * p->sdx[0], p->sdx[1], D);
            }
        }
    }
    /* the partials in chunk order (the fixed order), column by column in parallel */
#pragma omp parallel for schedule(static) num_threads(p->threads)
    for (int64_t d = 0; d < D; d++) {
        float s = 0.0f;
        for (int64_t c = 0; c < nchunk; c++)
            s += part[c * D + d];
        flashc__store(p->dw, dt, d * p->sdw, s);
    }
    flashc__free(part), flashc__free(rows);
    return FLASHC_OK;
}
