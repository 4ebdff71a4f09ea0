/*
 * attn_fwd.c — FlashAttention-2 forward on the CPU: the portable loop nest.
 *
 * Work item = (batch, head, Q block of Br rows). For each item: load the Q tile once, then
 * stream K/V tiles of Bc rows through the micro-kernels (kernels.h): S = scale Q K^T,
 * the online-softmax update (rescale acc by exp(m_old - m_new) only when the max grows),
 * acc += P V. One division by l per row at the end; LSE = m + log l.
 *
 * Causal (bottom-right aligned): K blocks entirely above the diagonal are never visited, and
 * the mask is written only into tiles that straddle it. Items are handed out heaviest first
 * (the last Q blocks see the most keys) with dynamic scheduling, so the triangular work
 * balances across threads.
 *
 * Memory: per-thread tiles only, O(threads * (Br + 2 Bc) * D + Br * Bc), from the counting
 * allocator; nothing of size Sq x Sk exists.
 */
#include "internal.h"
#include "kernels.h"

#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

enum { DEFAULT_BR = 64, DEFAULT_BC = 64 };

flashc_status cpu_attn_fwd_supports(const attn_problem *p)
{
    if (p->dtype != FLASHC_F32)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED_DTYPE,
                            "flashc_attn_fwd: the CPU backend supports float32 storage only "
                            "(%s given)",
                            flashc__dtype_name(p->dtype));
    return FLASHC_OK;
}

/* A rows x D tile of a (B, S, H, D) tensor as float32: points into the tensor when it already
 * is float32 with unit feature stride, otherwise converts into buf. Returns the leading dim. */
static const float *load_tile(const void *base, flashc_dtype dt, const int64_t *st, int64_t off,
                              int64_t rows, int64_t D, float *buf, int64_t *ld)
{
    if (dt == FLASHC_F32 && st[3] == 1) {
        *ld = st[1];
        return (const float *)base + off;
    }
    for (int64_t r = 0; r < rows; r++)
        for (int64_t d = 0; d < D; d++)
            buf[r * D + d] = flashc__load(base, dt, off + r * st[1] + d * st[3]);
    *ld = D;
    return buf;
}

typedef struct workspace {
    float *q, *k, *v; /* conversion buffers: br x D, bc x D, bc x D */
    float *s;         /* br x bc scores / probabilities            */
    float *acc;       /* br x D unnormalised output                */
    float *m, *l, *alpha;
} workspace;

static size_t workspace_floats(int64_t br, int64_t bc, int64_t D)
{
    return (size_t)(br * D + 2 * bc * D + br * bc + br * D + 3 * br);
}

static workspace workspace_at(float *base, int64_t br, int64_t bc, int64_t D)
{
    workspace w;
    w.q = base;
    w.k = w.q + br * D;
    w.v = w.k + bc * D;
    w.s = w.v + bc * D;
    w.acc = w.s + br * bc;
    w.m = w.acc + br * D;
    w.l = w.m + br;
    w.alpha = w.l + br;
    return w;
}

/* One (batch, head, Q block) item. Returns the number of tile pairs computed. */
static int64_t fwd_block(const attn_problem *p, const cpu_kernels *kr, workspace *w, int64_t b,
                         int64_t h, int64_t i0, int64_t rows, int64_t br, int64_t bc)
{
    const int64_t D = p->D, hk = h / (p->Hq / p->Hkv);
    const int64_t kend_max = attn_key_end(p, i0 + rows - 1); /* the block's last row sees most */
    const int64_t kend_min = attn_key_end(p, i0);            /* its first row sees least       */
    int64_t pairs = 0;

    for (int64_t r = 0; r < rows; r++) {
        w->m[r] = -INFINITY;
        w->l[r] = 0.0f;
    }
    memset(w->acc, 0, (size_t)(rows * D) * sizeof(float));

    if (kend_max > 0) {
        int64_t ldq, ldk, ldv;
        const float *Q = load_tile(p->q, p->dtype, p->sq, b * p->sq[0] + h * p->sq[2] + i0 * p->sq[1],
                                   rows, D, w->q, &ldq);
        for (int64_t j0 = 0; j0 < kend_max; j0 += bc) {
            const int64_t cols = j0 + bc < p->Sk ? bc : p->Sk - j0;
            const float *K = load_tile(p->k, p->dtype, p->sk,
                                       b * p->sk[0] + hk * p->sk[2] + j0 * p->sk[1], cols, D,
                                       w->k, &ldk);
            const float *V = load_tile(p->v, p->dtype, p->sv,
                                       b * p->sv[0] + hk * p->sv[2] + j0 * p->sv[1], cols, D,
                                       w->v, &ldv);
            kr->qk(Q, ldq, K, ldk, rows, cols, D, p->scale, w->s, bc);
            if (p->causal && j0 + cols > kend_min) { /* the tile straddles the diagonal */
                for (int64_t r = 0; r < rows; r++) {
                    int64_t first = attn_key_end(p, i0 + r) - j0;
                    for (int64_t c = first < 0 ? 0 : first; c < cols; c++)
                        w->s[r * bc + c] = -INFINITY;
                }
            }
            kr->softmax(w->s, bc, rows, cols, w->m, w->l, w->alpha);
            kr->pv(w->s, bc, V, ldv, rows, cols, D, w->alpha, w->acc, D);
            pairs++;
        }
    }

    /* The one division per row; a row that saw no key outputs 0 and LSE = -inf. */
    const int64_t oo = b * p->so[0] + h * p->so[2];
    for (int64_t r = 0; r < rows; r++) {
        const float l = w->l[r];
        const float inv = l > 0.0f ? 1.0f / l : 0.0f;
        const int64_t orow = oo + (i0 + r) * p->so[1];
        for (int64_t d = 0; d < D; d++)
            flashc__store(p->o, p->dtype, orow + d * p->so[3], w->acc[r * D + d] * inv);
        if (p->lse)
            p->lse[b * p->slse[0] + h * p->slse[1] + (i0 + r) * p->slse[2]] =
                l > 0.0f ? w->m[r] + logf(l) : -INFINITY;
    }
    return pairs;
}

flashc_status cpu_attn_fwd(const attn_problem *p, flashc_attn_stats *stats)
{
    const cpu_kernels *kr = cpu_kernels_get();
    int64_t br = p->br ? p->br : DEFAULT_BR, bc = p->bc ? p->bc : DEFAULT_BC;
    const int64_t br_used = br, bc_used = bc;
    if (br > p->Sq) /* a tile never needs to be larger than the sequence */
        br = p->Sq;
    if (bc > p->Sk)
        bc = p->Sk;

    const int64_t nqb = (p->Sq + br - 1) / br, heads = p->B * p->Hq, items = heads * nqb;
    int threads = p->threads;
    if (threads > items)
        threads = (int)items;
    const size_t per_thread = (workspace_floats(br, bc, p->D) + 15) / 16 * 16; /* 64-byte rows */
    float *ws = flashc__malloc((size_t)threads * per_thread * sizeof(float));
    if (!ws)
        return flashc__fail(FLASHC_ERR_OUT_OF_MEMORY,
                            "flashc_attn_fwd: cannot allocate %d thread workspaces of %zu floats",
                            threads, per_thread);

    int64_t pairs = 0;
#pragma omp parallel num_threads(threads) reduction(+ : pairs)
    {
#ifdef _OPENMP
        const int tid = omp_get_thread_num();
#else
        const int tid = 0;
#endif
        workspace w = workspace_at(ws + (size_t)tid * per_thread, br, bc, p->D);
#pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < items; it++) {
            const int64_t qb = nqb - 1 - it / heads; /* heaviest (last) Q blocks first */
            const int64_t bh = it % heads;
            const int64_t i0 = qb * br;
            const int64_t rows = i0 + br < p->Sq ? br : p->Sq - i0;
            pairs += fwd_block(p, kr, &w, bh / p->Hq, bh % p->Hq, i0, rows, br, bc);
        }
    }
    flashc__free(ws);

    stats->tile_pairs = pairs;
    stats->tile_pairs_total = heads * nqb * ((p->Sk + bc - 1) / bc);
    stats->block_q = br_used;
    stats->block_k = bc_used;
    return FLASHC_OK;
}
