/* ref/rope.c — rotary position embedding in float64: the oracle of the tests.
 * Token by token: the angle of each pair from the table (widened) or pos * theta^(-2i / rd) in
 * float64, then every head of q and k rotated in float64 and rounded once into the dtype. */
#include "internal.h"

#include <math.h>

/* Feature indices of pair i: NeoX (i, i + rd/2), GPT-J (2i, 2i + 1). */
static void pair_index(const rope_problem *p, int64_t i, int64_t *i0, int64_t *i1)
{
    if (p->style == FLASHC_ROPE_GPTJ)
        *i0 = 2 * i, *i1 = 2 * i + 1;
    else
        *i0 = i, *i1 = i + p->rd / 2;
}

static void rotate_heads(const rope_problem *p, void *base, const int64_t *st, int64_t H,
                         int64_t b, int64_t s, int64_t i, double c, double sn)
{
    int64_t i0, i1;
    pair_index(p, i, &i0, &i1);
    for (int64_t h = 0; h < H; h++) {
        const int64_t o = b * st[0] + s * st[1] + h * st[2];
        const double x0 = flashc__load(base, p->dtype, o + i0 * st[3]);
        const double x1 = flashc__load(base, p->dtype, o + i1 * st[3]);
        flashc__store(base, p->dtype, o + i0 * st[3], (float)(x0 * c - x1 * sn));
        flashc__store(base, p->dtype, o + i1 * st[3], (float)(x1 * c + x0 * sn));
    }
}

flashc_status ref_rope(const rope_problem *p)
{
    for (int64_t b = 0; b < p->B; b++)
        for (int64_t s = 0; s < p->S; s++) {
            const int64_t pos = p->pos ? p->pos[b * p->spos[0] + s * p->spos[1]] : s + p->pos_offset;
            for (int64_t i = 0; i < p->rd / 2; i++) {
                double c, sn;
                if (p->P > 0) {
                    c = p->cos[pos * p->scos[0] + i * p->scos[1]];
                    sn = p->sin[pos * p->ssin[0] + i * p->ssin[1]];
                } else {
                    const double a = (double)pos * pow(p->theta, -2.0 * (double)i / (double)p->rd);
                    c = cos(a), sn = sin(a);
                }
                if (p->inverse)
                    sn = -sn;
                rotate_heads(p, p->q, p->sq, p->Hq, b, s, i, c, sn);
                if (p->k)
                    rotate_heads(p, p->k, p->sk, p->Hk, b, s, i, c, sn);
            }
        }
    return FLASHC_OK;
}
