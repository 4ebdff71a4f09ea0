/* rope.c — rotary position embedding on the CPU, in place: the loop nest.
 *
 * Work item = one token (b, s): its rd/2 angles are turned into float32 cos / sin once (from
 * the tables, or in float64 from pos and theta, reduced, then rounded) into a per-thread row,
 * and every head of q and k reuses them. A head's rotated features go through a float32 row
 * (kernels.h load_row / store_row: F16C / shifts for the 16-bit types), the pairs are rotated
 * with plain loops over contiguous halves (NeoX) or neighbours (GPT-J) that the compiler
 * vectorises, and only the first rd features are stored back. Tokens split statically.
 */
#include "internal.h"
#include "kernels.h"

#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* cs[i] = cos a_i, cs[h + i] = sin a_i (h = rd / 2; sin negated for the backward). */
static void token_angles(const rope_problem *p, int64_t pos, float *cs)
{
    const int64_t h = p->rd / 2;
    const float sign = p->inverse ? -1.0f : 1.0f;
    if (p->P > 0) {
        for (int64_t i = 0; i < h; i++) {
            cs[i] = p->cos[pos * p->scos[0] + i * p->scos[1]];
            cs[h + i] = sign * p->sin[pos * p->ssin[0] + i * p->ssin[1]];
        }
        return;
    }
    for (int64_t i = 0; i < h; i++) {
        /* float64 angle: a float32 pos * inv_freq loses ~1e-3 rad at pos ~ 1e5 */
        const double a = (double)pos * pow(p->theta, -2.0 * (double)i / (double)p->rd);
        cs[i] = (float)cos(a);
        cs[h + i] = sign * (float)sin(a);
    }
}

static void rotate_row(const rope_problem *p, float *x, const float *cs)
{
    const int64_t h = p->rd / 2;
    const float *c = cs, *s = cs + h;
    if (p->style == FLASHC_ROPE_GPTJ) {
        for (int64_t i = 0; i < h; i++) {
            const float x0 = x[2 * i], x1 = x[2 * i + 1];
            x[2 * i] = x0 * c[i] - x1 * s[i];
            x[2 * i + 1] = x1 * c[i] + x0 * s[i];
        }
    } else {
        float *a = x, *b = x + h;
        for (int64_t i = 0; i < h; i++) {
            const float x0 = a[i], x1 = b[i];
            a[i] = x0 * c[i] - x1 * s[i];
            b[i] = x1 * c[i] + x0 * s[i];
        }
    }
}

static void rotate_heads(const rope_problem *p, const cpu_kernels *kr, void *base,
                         const int64_t *st, int64_t H, int64_t b, int64_t s, const float *cs,
                         float *row)
{
    const size_t es = flashc_dtype_size(p->dtype);
    for (int64_t hh = 0; hh < H; hh++) {
        const int64_t o = b * st[0] + s * st[1] + hh * st[2];
        char *ptr = (char *)base + o * (int64_t)es;
        if (st[3] == 1) {
            kr->load_row(ptr, p->dtype, p->rd, row);
            rotate_row(p, row, cs);
            kr->store_row(row, 1.0f, p->rd, ptr, p->dtype);
        } else {
            for (int64_t d = 0; d < p->rd; d++)
                row[d] = flashc__load(base, p->dtype, o + d * st[3]);
            rotate_row(p, row, cs);
            for (int64_t d = 0; d < p->rd; d++)
                flashc__store(base, p->dtype, o + d * st[3], row[d]);
        }
    }
}

flashc_status cpu_rope(const rope_problem *p)
{
    const cpu_kernels *kr = cpu_kernels_get();
    const int64_t tokens = p->B * p->S;
    int threads = p->threads;
    if ((int64_t)threads > tokens)
        threads = (int)tokens;
    const size_t per_thread = (size_t)(2 * p->rd); /* cos|sin row + one head row */
    float *ws = flashc__malloc((size_t)threads * per_thread * sizeof(float));
    if (!ws)
        return flashc__fail(FLASHC_ERR_OUT_OF_MEMORY, "flashc_rope: cannot allocate %d rows",
                            threads);
#pragma omp parallel num_threads(threads)
    {
#ifdef _OPENMP
        float *cs = ws + (size_t)omp_get_thread_num() * per_thread;
#else
        float *cs = ws;
#endif
        float *row = cs + p->rd;
#pragma omp for schedule(static)
        for (int64_t t = 0; t < tokens; t++) {
            const int64_t b = t / p->S, s = t % p->S;
            const int64_t pos = p->pos ? p->pos[b * p->spos[0] + s * p->spos[1]] : s + p->pos_offset;
            token_angles(p, pos, cs);
            rotate_heads(p, kr, p->q, p->sq, p->Hq, b, s, cs, row);
            if (p->k)
                rotate_heads(p, kr, p->k, p->sk, p->Hk, b, s, cs, row);
        }
    }
    flashc__free(ws);
    return FLASHC_OK;
}
