/*
 * attn_bwd.c — FlashAttention-2 backward on the CPU (Algorithm 2 of the FA-2 paper): dQ, dK, dV
 * by recomputing each tile of P = exp(S - L) from the forward's log-sum-exp L. P, dP and dS
 * never exist beyond one Br x Bc tile per thread.
 *
 * For each visible (Q block i, K block j) pair of a (batch, query head):
 *   S  = scale Q_i K_j^T                        qk micro-kernel (kernels.h)
 *   dP = dO_i V_j^T                             qk micro-kernel with scale 1
 *   P  = exp(S - L_i), 0 where masked or where the row saw no key (L = -inf)
 *   dS = P * (dP - D_i),   D_i = rowsum(dO_i * O_i), computed once up front: B * Hq * Sq floats
 *   dV_j += P^T dO_i,   dK_j += dS^T Q_i,   dQ_i += dS K_j     (scale applied once, at the end)
 * K blocks entirely above the causal diagonal (bottom-right aligned) are never visited.
 *
 * Determinism without float atomics: every output element is one sum in a fixed order that does
 * not depend on the schedule — dK_j and dV_j over (query head of the group, Q block) ascending,
 * dQ_i over K blocks ascending. Two schedules produce exactly these sums:
 *   fused — one work item per (batch, KV head) owns dK, dV and the dQ of its whole query-head
 *           group, so dQ_i accumulates in place in the float32 output as the K blocks advance:
 *           five tile products per pair, but only B * Hkv parallel items.
 *   split — pass 1 over (batch, KV head, K block) for dK, dV; pass 2 over (batch, query head,
 *           Q block) recomputes S, P, dP, dS and accumulates dQ: seven tile products per pair,
 *           parallel over blocks.
 * Both run the same per-element operations in the same order, so the choice (made from the item
 * count and the thread count) changes the speed but not a single bit of the result.
 *
 * Memory (counting allocator): D (B * Hq * Sq floats) plus per-thread tiles,
 * O(threads * ((Br + Bc) * D + Br * Bc)); nothing of size Sq x Sk.
 */
#include "internal.h"
#include "kernels.h"

#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
static inline int thread_id(void) { return omp_get_thread_num(); }
#else
static inline int thread_id(void) { return 0; }
#endif

enum { DEFAULT_BR = 64, DEFAULT_BC = 64 };

size_t cpu_attn_bwd_workspace(const attn_problem *p)
{
    (void)p;
    return 0;
}

flashc_status cpu_attn_bwd_supports(const attn_problem *p)
{
    if (!attn_is_plain(p))
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "flashc_attn_bwd: the CPU kernel does not serve this problem yet "
                            "(varlen, window, softcap, ALiBi or Dk != Dv)");
    if (p->dtype != FLASHC_F32)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED_DTYPE,
                            "flashc_attn_bwd: the CPU backend supports float32 storage only "
                            "(%s given)",
                            flashc__dtype_name(p->dtype));
    return FLASHC_OK;
}

/* Rows [off, off + rows * st[1]) of a (B, S, H, D) tensor with strides st as a row-major float32
 * tile: points into the tensor when it already is float32 with unit feature stride (no copy),
 * otherwise converts into buf (rows x D). *ld receives the leading dimension in floats. */
static const float *load_tile_f32(const void *base, flashc_dtype dt, const int64_t *st,
                                  int64_t off, int64_t rows, int64_t D, float *buf, int64_t *ld)
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

/* ---- tile products ------------------------------------------------------------------------
 * The matrix products go through the micro-kernel table (kernels.h): qk for S and dP, gemm
 * with A read transposed (strides 1, lda) for dV += P^T dO and dK += dS^T Q, pv for dQ += dS K.
 * Each call's arithmetic depends only on its operands and sizes, which both schedules pass
 * identically, so the result stays bit-identical between them on every ISA. */

/* The softmax gradient on one tile, in place, row r of rows:
 *   S (rows x cols, ld) scores  ->  P[r][c] = exp(S[r][c] - lse[r]) for c < vis[r], 0 beyond
 *   dP (rows x cols, ld)        ->  dS[r][c] = P[r][c] * (dP[r][c] - di[r])
 * vis[r] in [0, cols] is the number of keys of the tile row r may see (0: a row that sees none,
 * whose lse is -inf, so exp is never evaluated there). exp is the table's vector exp. */
static void dsoftmax_tile_f32(const cpu_kernels *kr, float *S, float *dP, int64_t ld,
                              int64_t rows, int64_t cols, const float *lse, const float *di,
                              const int64_t *vis)
{
    for (int64_t r = 0; r < rows; r++) {
        float *s = S + r * ld, *dp = dP + r * ld;
        const float L = lse[r], Di = di[r];
        const int64_t n = vis[r];
        for (int64_t c = 0; c < n; c++)
            s[c] -= L;
        kr->exp(s, s, n);
        for (int64_t c = 0; c < n; c++)
            dp[c] = s[c] * (dp[c] - Di);
        for (int64_t c = n; c < cols; c++)
            s[c] = dp[c] = 0.0f;
    }
}

/* C[c][d] += sum_r A[r][c] * X[r][d]:  A (rows x cols, lda): P or dS;  X (rows x D, ldx): dO
 * or Q;  C (cols x D, ldc): dV or dK;  ones: cols 1s (the gemm's row scale: accumulate). */
static void acc_atx_f32(const cpu_kernels *kr, const float *A, int64_t lda, const float *X,
                        int64_t ldx, int64_t rows, int64_t cols, int64_t D, const float *ones,
                        float *C, int64_t ldc)
{
    kr->gemm(cols, D, rows, A, 1, lda, X, ldx, ones, C, ldc);
}

/* ---- per-thread workspace ----------------------------------------------------------------- */

typedef struct bwd_ws {
    int64_t *vis;           /* br: keys of the current K tile each Q row sees                  */
    float *q, *dout;        /* br x D conversion buffers (used when the feature stride != 1)   */
    float *k, *v;           /* bc x D conversion buffers                                       */
    float *s, *dp;          /* br x bc: S then P; dP then dS                                   */
    float *dk, *dv;         /* bc x D accumulators of the current K block                      */
    float *dq;              /* br x D accumulator of the current Q block (split pass 2)        */
    float *lse, *di;        /* br: L and D of the Q block's rows                               */
    float *ones;            /* max(br, bc) 1s: the row scale of an accumulating gemm / pv      */
} bwd_ws;

static size_t ws_floats(int64_t br, int64_t bc, int64_t D)
{
    const size_t n = (size_t)(2 * br + 2 * br * D + 2 * bc * D + 2 * br * bc + 2 * bc * D +
                              br * D + 2 * br + (br > bc ? br : bc));
    return (n + 15) / 16 * 16; /* whole cache lines, so threads never share one */
}

static bwd_ws ws_at(float *base, int64_t br, int64_t bc, int64_t D)
{
    bwd_ws w;
    w.vis = (int64_t *)(void *)base; /* base is 64-byte aligned */
    w.q = base + 2 * br;
    w.dout = w.q + br * D;
    w.k = w.dout + br * D;
    w.v = w.k + bc * D;
    w.s = w.v + bc * D;
    w.dp = w.s + br * bc;
    w.dk = w.dp + br * bc;
    w.dv = w.dk + bc * D;
    w.dq = w.dv + bc * D;
    w.lse = w.dq + br * D;
    w.di = w.lse + br;
    w.ones = w.di + br;
    for (int64_t r = 0; r < (br > bc ? br : bc); r++)
        w.ones[r] = 1.0f;
    return w;
}

/* ---- blocks ---------------------------------------------------------------------------------- */

/* What a tile pair needs of a Q block: rows [i0, i0 + rows) of query head h in batch b. */
typedef struct qblock {
    int64_t b, h, i0, rows;
    const float *Q, *dO; /* rows x D */
    int64_t ldq, lddo;
} qblock;

/* ... and of a K block: rows [j0, j0 + cols) of KV head hk in batch b. */
typedef struct kblock {
    int64_t j0, cols;
    const float *K, *V; /* cols x D */
    int64_t ldk, ldv;
} kblock;

static qblock load_qblock(const attn_problem *p, bwd_ws *w, const float *dbuf, int64_t b,
                          int64_t h, int64_t i0, int64_t rows)
{
    qblock qb = {.b = b, .h = h, .i0 = i0, .rows = rows};
    qb.Q = load_tile_f32(p->q, p->dtype, p->sq, b * p->sq[0] + h * p->sq[2] + i0 * p->sq[1],
                         rows, p->D, w->q, &qb.ldq);
    qb.dO = load_tile_f32(p->dout, p->dtype, p->sdo, b * p->sdo[0] + h * p->sdo[2] + i0 * p->sdo[1],
                          rows, p->D, w->dout, &qb.lddo);
    const float *L = p->lse + b * p->slse[0] + h * p->slse[1];
    const float *Di = dbuf + (b * p->Hq + h) * p->Sq;
    for (int64_t r = 0; r < rows; r++) {
        w->lse[r] = L[(i0 + r) * p->slse[2]];
        w->di[r] = Di[i0 + r];
    }
    return qb;
}

static kblock load_kblock(const attn_problem *p, bwd_ws *w, int64_t b, int64_t hk, int64_t j0,
                          int64_t cols)
{
    kblock kb = {.j0 = j0, .cols = cols};
    kb.K = load_tile_f32(p->k, p->dtype, p->sk, b * p->sk[0] + hk * p->sk[2] + j0 * p->sk[1],
                         cols, p->D, w->k, &kb.ldk);
    kb.V = load_tile_f32(p->v, p->dtype, p->sv, b * p->sv[0] + hk * p->sv[2] + j0 * p->sv[1],
                         cols, p->D, w->v, &kb.ldv);
    return kb;
}

/* Whether any row of Q block [i0, i0 + rows) sees a key of a K block starting at j0: the last
 * row sees the most. */
static int pair_visible(const attn_problem *p, int64_t i0, int64_t rows, int64_t j0)
{
    return attn_key_end(p, i0 + rows - 1) > j0;
}

/* P into w->s and dS into w->dp (both rows x cols, leading dim bc) for one tile pair. */
static void tile_p_ds(const attn_problem *p, const cpu_kernels *kr, bwd_ws *w, const qblock *qb,
                      const kblock *kb, int64_t bc)
{
    const int64_t rows = qb->rows, cols = kb->cols;
    kr->qk(qb->Q, qb->ldq, kb->K, kb->ldk, rows, cols, p->D, p->scale, w->s, bc);
    kr->qk(qb->dO, qb->lddo, kb->V, kb->ldv, rows, cols, p->D, 1.0f, w->dp, bc);
    for (int64_t r = 0; r < rows; r++) {
        int64_t n = attn_key_end(p, qb->i0 + r) - kb->j0;
        n = n < 0 ? 0 : n > cols ? cols : n;
        w->vis[r] = w->lse[r] == -INFINITY ? 0 : n; /* a row that saw no key: zero gradients */
    }
    dsoftmax_tile_f32(kr, w->s, w->dp, bc, rows, cols, w->lse, w->di, w->vis);
}

/* dK, dV of one K block (KV head hk, batch b), summed over the group's query heads and the
 * visible Q blocks in ascending order. With dq_inplace the item also adds dS K_j into the dQ
 * rows of the float32 output (fused schedule). Returns the tile pairs computed. */
static int64_t dkdv_block(const attn_problem *p, const cpu_kernels *kr, bwd_ws *w,
                          const float *dbuf, int64_t b, int64_t hk, int64_t j0, int64_t cols,
                          int64_t br, int64_t bc, int dq_inplace)
{
    const int64_t D = p->D, group = p->Hq / p->Hkv;
    const kblock kb = load_kblock(p, w, b, hk, j0, cols);
    memset(w->dk, 0, (size_t)(cols * D) * sizeof(float));
    memset(w->dv, 0, (size_t)(cols * D) * sizeof(float));
    int64_t pairs = 0;
    for (int64_t h = hk * group; h < (hk + 1) * group; h++) {
        for (int64_t i0 = 0; i0 < p->Sq; i0 += br) {
            const int64_t rows = i0 + br < p->Sq ? br : p->Sq - i0;
            if (!pair_visible(p, i0, rows, j0))
                continue;
            const qblock qb = load_qblock(p, w, dbuf, b, h, i0, rows);
            tile_p_ds(p, kr, w, &qb, &kb, bc);
            acc_atx_f32(kr, w->s, bc, qb.dO, qb.lddo, rows, cols, D, w->ones, w->dv, D);
            acc_atx_f32(kr, w->dp, bc, qb.Q, qb.ldq, rows, cols, D, w->ones, w->dk, D);
            if (dq_inplace) {
                float *dq = (float *)p->dq + b * p->sdq[0] + h * p->sdq[2] + i0 * p->sdq[1];
                kr->pv(w->dp, bc, kb.K, kb.ldk, rows, cols, D, w->ones, dq, p->sdq[1]);
            }
            pairs++;
        }
    }
    for (int64_t c = 0; c < cols; c++) {
        const int64_t ok = b * p->sdk[0] + hk * p->sdk[2] + (j0 + c) * p->sdk[1];
        const int64_t ov = b * p->sdv[0] + hk * p->sdv[2] + (j0 + c) * p->sdv[1];
        for (int64_t d = 0; d < D; d++) {
            flashc__store(p->dk, p->dtype, ok + d * p->sdk[3], w->dk[c * D + d] * p->scale);
            flashc__store(p->dv, p->dtype, ov + d * p->sdv[3], w->dv[c * D + d]);
        }
    }
    return pairs;
}

/* dQ of one Q block (split schedule, pass 2): the same tiles as pass 1, K blocks ascending. */
static void dq_block(const attn_problem *p, const cpu_kernels *kr, bwd_ws *w, const float *dbuf,
                     int64_t b, int64_t h, int64_t i0, int64_t rows, int64_t bc)
{
    const int64_t D = p->D, hk = h / (p->Hq / p->Hkv);
    const qblock qb = load_qblock(p, w, dbuf, b, h, i0, rows);
    memset(w->dq, 0, (size_t)(rows * D) * sizeof(float));
    for (int64_t j0 = 0; j0 < p->Sk && pair_visible(p, i0, rows, j0); j0 += bc) {
        const int64_t cols = j0 + bc < p->Sk ? bc : p->Sk - j0;
        const kblock kb = load_kblock(p, w, b, hk, j0, cols);
        tile_p_ds(p, kr, w, &qb, &kb, bc);
        kr->pv(w->dp, bc, kb.K, kb.ldk, rows, cols, D, w->ones, w->dq, D);
    }
    for (int64_t r = 0; r < rows; r++) {
        const int64_t o = b * p->sdq[0] + h * p->sdq[2] + (i0 + r) * p->sdq[1];
        for (int64_t d = 0; d < D; d++)
            flashc__store(p->dq, p->dtype, o + d * p->sdq[3], w->dq[r * D + d] * p->scale);
    }
}

/* ---- the schedules ------------------------------------------------------------------------ */

/* D_i = dO_i . O_i for every (b, h, i), laid out [b][h][i]; float64 sum (O(Sq D) per head,
 * negligible), rounded once. */
static void compute_di(const attn_problem *p, float *dbuf, int threads)
{
    const int64_t rows = p->B * p->Hq * p->Sq;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t t = 0; t < rows; t++) {
        const int64_t i = t % p->Sq, h = (t / p->Sq) % p->Hq, b = t / (p->Sq * p->Hq);
        const int64_t oo = b * p->so[0] + h * p->so[2] + i * p->so[1];
        const int64_t od = b * p->sdo[0] + h * p->sdo[2] + i * p->sdo[1];
        double acc = 0.0;
        for (int64_t d = 0; d < p->D; d++)
            acc += (double)flashc__load(p->o, p->dtype, oo + d * p->so[3]) *
                   (double)flashc__load(p->dout, p->dtype, od + d * p->sdo[3]);
        dbuf[t] = (float)acc;
    }
}

/* Fused schedule, one item: dK, dV of every K block of KV head hk and, in place, the dQ of its
 * query-head group, whose rows receive their terms K block by K block in ascending order. */
static int64_t fused_kv_head(const attn_problem *p, const cpu_kernels *kr, bwd_ws *w,
                             const float *dbuf, int64_t b, int64_t hk, int64_t br, int64_t bc)
{
    const int64_t group = p->Hq / p->Hkv;
    for (int64_t h = hk * group; h < (hk + 1) * group; h++)
        for (int64_t i = 0; i < p->Sq; i++)
            memset((float *)p->dq + b * p->sdq[0] + h * p->sdq[2] + i * p->sdq[1], 0,
                   (size_t)p->D * sizeof(float));
    int64_t pairs = 0;
    for (int64_t j0 = 0; j0 < p->Sk; j0 += bc)
        pairs += dkdv_block(p, kr, w, dbuf, b, hk, j0, j0 + bc < p->Sk ? bc : p->Sk - j0, br, bc,
                            1);
    for (int64_t h = hk * group; h < (hk + 1) * group; h++)
        for (int64_t i = 0; i < p->Sq; i++) {
            float *row = (float *)p->dq + b * p->sdq[0] + h * p->sdq[2] + i * p->sdq[1];
            for (int64_t d = 0; d < p->D; d++)
                row[d] *= p->scale;
        }
    return pairs;
}

static int min_threads(int threads, int64_t items)
{
    return items < threads ? (int)items : threads;
}

flashc_status cpu_attn_bwd(const attn_problem *p, flashc_attn_stats *stats)
{
    const cpu_kernels *kr = cpu_kernels_get();
    int64_t br = p->br ? p->br : DEFAULT_BR, bc = p->bc ? p->bc : DEFAULT_BC;
    const int64_t br_used = br, bc_used = bc;
    if (br > p->Sq) /* a tile never needs to be larger than the sequence */
        br = p->Sq;
    if (bc > p->Sk)
        bc = p->Sk;
    const int64_t nqb = (p->Sq + br - 1) / br, nkb = (p->Sk + bc - 1) / bc;
    const int64_t kv_heads = p->B * p->Hkv, q_heads = p->B * p->Hq;

    /* Fused when the (batch, KV head) items alone balance the threads (and dq rows are plain
     * float32 rows to accumulate into); otherwise split, parallel over blocks. */
    const int fused = p->sdq[3] == 1 && (kv_heads % p->threads == 0 || kv_heads >= 4 * p->threads);
    const int64_t items1 = fused ? kv_heads : nkb * kv_heads, items2 = fused ? 0 : nqb * q_heads;
    const int nt1 = min_threads(p->threads, items1), nt2 = min_threads(p->threads, items2);

    const size_t per_thread = ws_floats(br, bc, p->D);
    float *dbuf = flashc__malloc((size_t)q_heads * (size_t)p->Sq * sizeof(float));
    float *ws = flashc__malloc((size_t)(nt1 > nt2 ? nt1 : nt2) * per_thread * sizeof(float));
    if (!dbuf || !ws) {
        flashc__free(dbuf);
        flashc__free(ws);
        return flashc__fail(FLASHC_ERR_OUT_OF_MEMORY,
                            "flashc_attn_bwd: cannot allocate D (%lld floats) and %d thread "
                            "workspaces of %zu floats",
                            (long long)(q_heads * p->Sq), nt1 > nt2 ? nt1 : nt2, per_thread);
    }
    compute_di(p, dbuf, p->threads);

    /* Pass 1: fused items, or dK, dV per (K block, batch, KV head) with K block 0 — seen by the
     * most query rows under the causal mask — handed out first. */
    int64_t pairs = 0;
#pragma omp parallel num_threads(nt1) reduction(+ : pairs)
    {
        bwd_ws w = ws_at(ws + (size_t)thread_id() * per_thread, br, bc, p->D);
#pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < items1; it++) {
            if (fused) {
                pairs += fused_kv_head(p, kr, &w, dbuf, it / p->Hkv, it % p->Hkv, br, bc);
            } else {
                const int64_t j0 = it / kv_heads * bc, bh = it % kv_heads;
                pairs += dkdv_block(p, kr, &w, dbuf, bh / p->Hkv, bh % p->Hkv, j0,
                                    j0 + bc < p->Sk ? bc : p->Sk - j0, br, bc, 0);
            }
        }
    }
    /* Pass 2 (split only): dQ per (Q block, batch, query head), the last (heaviest) Q blocks
     * first. */
    if (items2 > 0) {
#pragma omp parallel num_threads(nt2)
        {
            bwd_ws w = ws_at(ws + (size_t)thread_id() * per_thread, br, bc, p->D);
#pragma omp for schedule(dynamic, 1)
            for (int64_t it = 0; it < items2; it++) {
                const int64_t i0 = (nqb - 1 - it / q_heads) * br, bh = it % q_heads;
                dq_block(p, kr, &w, dbuf, bh / p->Hq, bh % p->Hq, i0,
                         i0 + br < p->Sq ? br : p->Sq - i0, bc);
            }
        }
    }
    flashc__free(ws);
    flashc__free(dbuf);

    stats->tile_pairs = pairs;
    stats->tile_pairs_total = q_heads * nqb * nkb;
    stats->block_q = br_used;
    stats->block_k = bc_used;
    return FLASHC_OK;
}
