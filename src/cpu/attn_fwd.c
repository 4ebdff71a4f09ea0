/*
 * attn_fwd.c — FlashAttention-2 forward on the CPU, the whole v2 contract: one loop nest for the
 * dense, varlen and KV-cache layouts (contiguous or paged), key ranges [lo, hi) per row (causal,
 * sliding windows), softcap and ALiBi, Dk != Dv, GQA, split-KV, bf16/f16 storage.
 *
 * The loops ask only two questions (internal.h): which keys may row i see (attn_key_range) and
 * where does a row live (attn_q_off, attn_kv_off: the paged lookup is in the K/V tile loader,
 * so every path gets it once). The score modifiers are one vectorised transform of a score tile
 * (kernels.h score_mod_t / score_mod_row: softcap, then ALiBi).
 *
 * Work unit = (sequence, Q block of Br rows, key chunk); item = unit x query head (decode: x KV
 * head, below). Units are handed out heaviest first (visible keys x rows, a shape-only order),
 * with dynamic scheduling. For each item: pack the Q tile once, transposed, Qt[d][i] = q[i][d];
 * then stream the K/V tiles of Bc keys that meet the union of the block's key ranges (the loop
 * starts at the block's lowest lo, not at key 0) through two products and the online softmax:
 *   St = K Qt                 (Bc x Br)  the scores, transposed: column i is query row i
 *   [St = log2e mod(scale St)]           score_mod_t, when softcap / ALiBi / scale 0
 *   P^T = 2^(c St - m), m, l  softmax_t (c = scale log2 e, or 1 after score_mod_t)
 *   acc = alpha acc + P V     (Br x Dv)  P^T read with strides (1, ldst), alpha folded in
 * One division by l per row at the end; LSE = m ln2 + ln l (m is in base-2 units).
 *
 * Why transposed: with S^T the queries run along the vector lanes, so the softmax's max, sum
 * and rescale need no horizontal reductions, the K tile is the gemm's broadcast operand (read
 * in place, no per-tile transpose), and the only transpose is of Q, once per item. Taking
 * scale * log2(e) into the softmax's FMA turns every exp into an exp2 at no extra operation.
 *
 * Masks: a tile where every row of the block sees every key is computed without one. A tile
 * that straddles a range edge goes in sub-panels of DIAG_ROWS rows, each against only the keys
 * its rows see, and only there is the mask written (kernels.h mask_t). Masked P entries are 0;
 * they must never multiply V (0 * NaN = NaN, 0 * inf = NaN, issue 10 F4): when the V tile of a
 * straddling tile holds a non-finite value, P V is taken row by row over each row's own keys.
 * Rows whose l is 0 (no visible key) are stored as zeros explicitly, never as acc * 0.
 *
 * Decode (Sq < FEW_ROWS, any layout): S stays row-major (qk's dot products, the row softmax in
 * natural units, pv), and the query heads of one KV head form one item, so each K/V tile is
 * read and converted once per group. The grouping, the split count and hence every row's
 * arithmetic depend on the shape only, never on the thread count: results are bit-identical
 * for any thread count (issue 10 F6). Threads are kept busy when B * Hkv is small by split-KV:
 * num_splits = 0 cuts the keys into chunks (a multiple of Bc, at least SPLIT_MIN_KEYS) until
 * there are SPLIT_ITEMS items; each chunk's (acc, m, l) goes to scratch and a second pass
 * merges them in chunk order.
 *
 * Tiles (Br = query rows per item, Bc = key rows per tile), chosen for Zen-class caches
 * (32-48 KiB L1d, 512 KiB - 1 MiB L2 per core) and for the register blocks (MR = 6 on AVX2,
 * 12 on AVX-512; 48, 96, 192 and 288 are multiples of both and of the 16/32-lane panels):
 *   D <= 128: Br = 288, Bc = 96   Measured on Zen 3, 1 thread, n = 1024, GFLOP/s at D = 128 /
 *                                 64: Br x Bc = 96 x 96: 67 / 53; 192 x 96: 76.5 / 70.2;
 *                                 288 x 96: 78.9 / 72.5; 384 x 96: 78.5 / 75.1; 192 x 192: 69.
 *   D > 128:  Br = 192, Bc = 48   D = 256: 96 x 48: 74.6; 192 x 48: 77.1; 96 x 96: 75.0.
 * (D is max(Dk, Dv).) Br steps down (288, 192, 96, 48) while there are fewer than 2 items per
 * thread; that changes no result (every score, max, sum and product chain of a row is the same
 * for any Br). Decode: Bc = 48 (f16 KV, 32k keys, 2 threads: Bc 48: 13.3 ms, 96: 14.3).
 *
 * Memory: everything comes from the call's scratch (cpu_attn_fwd_workspace: per-thread tiles,
 * the unit list, the split partials), i.e. the caller's workspace or the core's one allocation;
 * nothing of size Sq x Sk exists.
 */
#include "internal.h"
#include "kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

enum {
    FEW_ROWS = 8,        /* Sq below this: the row-major decode path                        */
    DIAG_ROWS = 48,      /* sub-panel rows of a straddling tile                              */
    SPLIT_ITEMS = 128,   /* num_splits = 0: split decode until there are this many items     */
    SPLIT_MIN_KEYS = 512 /* ... with chunks of at least this many keys                        */
};

flashc_status cpu_attn_fwd_supports(const attn_problem *p)
{
    if (p->device != FLASHC_DEVICE_CPU)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED, "flashc_attn_fwd: the CPU backend takes host "
                            "memory only");
    if (p->dtype != FLASHC_F32 && p->dtype != FLASHC_BF16 && p->dtype != FLASHC_F16)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED_DTYPE,
                            "flashc_attn_fwd: the CPU backend supports float32, bfloat16 and "
                            "float16 storage (%s given)",
                            flashc__dtype_name(p->dtype));
    return FLASHC_OK;
}

/* ---- the plan: tiles, grouping, splits, scratch (a function of the problem only) ---------- */

typedef struct fwd_unit {
    int64_t b, i0, rows, s; /* sequence, first query row, rows, key chunk                   */
    int64_t cost;           /* rows x keys its block may see in the chunk: the sort key       */
    int64_t idx;            /* creation order: the tie-break that makes the order total       */
} fwd_unit;

typedef struct fwd_plan {
    int64_t br, bc;         /* tiles used (br = Sq on the decode path)                       */
    int64_t br_req, bc_req; /* as reported in the stats (before clamping to the sequence)     */
    int few;                /* row-major decode path                                          */
    int64_t nh, hgroups;    /* query heads per item, items per unit (nh * hgroups = Hq)       */
    int64_t splits, chunk;  /* key chunks per row, keys per chunk (a multiple of bc)          */
    int64_t units, items;
    int64_t part_rows;      /* query rows of the layout (for the split partials)              */
    int threads;
    int64_t brp, ldk, ldv, lda; /* leading dimensions of the per-thread tiles                */
    size_t per_thread;      /* floats                                                         */
    size_t sizes[3];        /* scratch: thread tiles, units, split partials                   */
} fwd_plan;

/* Leading dimension of the per-thread tiles: whole 64-byte lines, an odd number of them, so the
 * rows of a tile spread over every L1 set. (The tensors' own row strides are usually H x D
 * floats, a power of two: read in place, the 96 rows of a K or V tile fall into a handful of
 * L1 sets and evict each other; that cost 10-15% before the tiles were copied.) */
static int64_t tile_ld(int64_t n) { return ((n + 15) / 16 | 1) * 16; }

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

static void default_tiles(const attn_problem *p, int64_t *br, int64_t *bc)
{
    if (p->Sq < FEW_ROWS) { /* decode: K/V streamed from memory; short tiles measured best */
        *br = p->Sq, *bc = 48;
        return;
    }
    if (max64(p->D, p->Dv) <= 128)
        *br = 288, *bc = 96;
    else
        *br = 192, *bc = 48;
    while (*br > 48 && p->B * p->Hq * cdiv(p->Sq, *br) < 2 * (int64_t)p->threads)
        *br = *br > 192 ? 192 : *br / 2; /* 288 -> 192 -> 96 -> 48 */
}

static void make_plan(const attn_problem *p, fwd_plan *pl)
{
    memset(pl, 0, sizeof *pl);
    int64_t br, bc;
    default_tiles(p, &br, &bc);
    pl->few = p->Sq < FEW_ROWS;
    if (p->br && !pl->few)
        br = p->br;
    if (p->bc)
        bc = p->bc;
    pl->br_req = br, pl->bc_req = bc;
    /* a tile never needs to be larger than the sequence (which may be empty: varlen) */
    br = max64(1, min64(br, p->Sq));
    bc = max64(1, min64(bc, p->Sk));
    pl->br = br, pl->bc = bc;
    pl->nh = pl->few ? p->Hq / p->Hkv : 1;
    pl->hgroups = p->Hq / pl->nh;

    /* split count: the caller's, or from the shape alone */
    const int64_t ktiles = cdiv(p->Sk, bc);
    int64_t n = p->num_splits;
    if (n == 0) {
        n = 1;
        if (pl->few) {
            const int64_t per = p->B * pl->hgroups; /* items of an unsplit call */
            n = max64(1, min64(cdiv(SPLIT_ITEMS, per), p->Sk / SPLIT_MIN_KEYS));
        }
    }
    n = max64(1, min64(n, ktiles));
    pl->chunk = cdiv(max64(ktiles, 1), n) * bc;
    pl->splits = max64(1, cdiv(p->Sk, pl->chunk));

    int64_t units = 0;
    for (int64_t b = 0; b < p->B; b++) {
        int64_t sq, sk;
        attn_seqlens(p, b, &sq, &sk);
        units += cdiv(sq, br) * pl->splits;
    }
    pl->units = units;
    pl->items = units * pl->hgroups;
    pl->part_rows = p->layout == ATTN_VARLEN ? p->total_q : p->B * p->Sq;
    pl->threads = (int)max64(1, min64(p->threads, pl->items));

    const int64_t rows = br * pl->nh;
    pl->brp = tile_ld(rows);
    pl->ldk = tile_ld(p->D);
    pl->ldv = tile_ld(p->Dv);
    pl->lda = max64(pl->ldk, pl->ldv); /* acc also stages the Q tile (D wide) */
    pl->per_thread = (size_t)(p->D * pl->brp + bc * pl->ldk + bc * pl->ldv + bc * pl->brp +
                              rows * pl->lda + 5 * pl->brp);
    pl->sizes[0] = (size_t)pl->threads * pl->per_thread * sizeof(float);
    /* Varlen sequences differ, so their units are sorted in a list; the other layouts share
     * one Sq, and their order is computed (the last Q blocks, which see the most keys under a
     * causal mask, first), which keeps the scratch independent of the sequence length. */
    pl->sizes[1] = p->layout == ATTN_VARLEN ? (size_t)max64(units, 1) * sizeof(fwd_unit) : 0;
    pl->sizes[2] = pl->splits > 1
                       ? (size_t)(pl->part_rows * p->Hq * pl->splits) * (size_t)(p->Dv + 2) *
                             sizeof(float)
                       : 0;
}

size_t cpu_attn_fwd_workspace(const attn_problem *p)
{
    fwd_plan pl;
    make_plan(p, &pl);
    return attn_scratch_bytes(3, pl.sizes);
}

/* Units heaviest first; equal costs in creation order (a total order: the same on every run). */
static int unit_cmp(const void *a, const void *b)
{
    const fwd_unit *x = a, *y = b;
    if (x->cost != y->cost)
        return x->cost > y->cost ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* The union [*lo, *hi) of the key ranges of rows [i0, i0 + rows) (ranges move monotonically
 * with the row, so the first and last rows bound it), cut to key chunk s. */
static void block_keys(const attn_problem *p, const fwd_plan *pl, int64_t sq, int64_t sk,
                       int64_t i0, int64_t rows, int64_t s, int64_t *lo, int64_t *hi)
{
    int64_t lo0, hi0, lo1, hi1;
    attn_key_range(p, sq, sk, i0, &lo0, &hi0);
    attn_key_range(p, sq, sk, i0 + rows - 1, &lo1, &hi1);
    *lo = max64(min64(lo0, lo1), s * pl->chunk);
    *hi = min64(max64(hi0, hi1), (s + 1) * pl->chunk);
}

/* Unit number idx of the schedule: from the sorted list (varlen), or computed: Q blocks from
 * the last, then sequences, then chunks. */
static fwd_unit unit_at(const attn_problem *p, const fwd_plan *pl, const fwd_unit *list,
                        int64_t idx)
{
    if (list)
        return list[idx];
    const int64_t per_qb = p->B * pl->splits, nqb = cdiv(p->Sq, pl->br);
    const int64_t qb = nqb - 1 - idx / per_qb, rem = idx % per_qb;
    const int64_t i0 = qb * pl->br;
    return (fwd_unit){rem / pl->splits, i0, min64(pl->br, p->Sq - i0), rem % pl->splits, 0, idx};
}

static void make_units(const attn_problem *p, const fwd_plan *pl, fwd_unit *u)
{
    int64_t n = 0;
    for (int64_t b = 0; b < p->B; b++) {
        int64_t sq, sk;
        attn_seqlens(p, b, &sq, &sk);
        for (int64_t i0 = 0; i0 < sq; i0 += pl->br) {
            const int64_t rows = min64(pl->br, sq - i0);
            for (int64_t s = 0; s < pl->splits; s++) {
                int64_t lo, hi;
                block_keys(p, pl, sq, sk, i0, rows, s, &lo, &hi);
                u[n] = (fwd_unit){b, i0, rows, s, rows * max64(hi - lo, 0), n};
                n++;
            }
        }
    }
    qsort(u, (size_t)n, sizeof *u, unit_cmp);
}

/* ---- per-thread tiles --------------------------------------------------------------------- */

typedef struct tiles {
    float *qt;            /* D x brp   Q^T (decode: rows x D, ld D)                          */
    float *k, *v;         /* bc x ldk, bc x ldv  K and V tiles as float32                    */
    float *st;            /* bc x brp  scores / probabilities, transposed (decode: row-major) */
    float *acc;           /* rows x lda  unnormalised output (and the Q staging tile)         */
    float *m, *l, *alpha; /* brp each                                                        */
    float *lo, *hi;       /* brp each: a straddling sub-panel's key ranges, for mask_t       */
} tiles;

static tiles tiles_at(const fwd_plan *pl, const attn_problem *p, float *base)
{
    tiles w;
    w.qt = base;
    w.k = w.qt + p->D * pl->brp;
    w.v = w.k + pl->bc * pl->ldk;
    w.st = w.v + pl->bc * pl->ldv;
    w.acc = w.st + pl->bc * pl->brp;
    w.m = w.acc + pl->br * pl->nh * pl->lda;
    w.l = w.m + pl->brp;
    w.alpha = w.l + pl->brp;
    w.lo = w.alpha + pl->brp;
    w.hi = w.lo + pl->brp;
    return w;
}

/* ---- tile loaders ------------------------------------------------------------------------- */

static const void *elem_ptr(const void *base, flashc_dtype dt, int64_t off)
{
    return (const char *)base + off * (int64_t)flashc_dtype_size(dt);
}

/* One row of n features at element offset off of a tensor with feature stride fs, as float32
 * (bf16/f16 converted on the way: kernels.h load_row). */
static void load_row(const cpu_kernels *kr, const void *base, flashc_dtype dt, int64_t off,
                     int64_t fs, int64_t n, float *dst)
{
    if (fs == 1)
        kr->load_row(elem_ptr(base, dt, off), dt, n, dst);
    else /* strided features: element by element */
        for (int64_t d = 0; d < n; d++)
            dst[d] = flashc__load(base, dt, off + d * fs);
}

/* Key rows [j, j + n) of sequence b in runs that are contiguous in memory: the whole range for
 * dense and varlen tensors, the part inside one page for a paged cache. Returns the run length
 * from j and its element offset (head 0) through attn_kv_off, the one paged lookup. */
static int64_t kv_run(const attn_problem *p, const int64_t *st, int64_t b, int64_t j, int64_t n,
                      int64_t *off)
{
    *off = attn_kv_off(p, st, b, j);
    if (p->layout == ATTN_KVCACHE && p->pages)
        return min64(n, p->page_size - j % p->page_size);
    return n;
}

/* Copies keys [j0, j0 + rows) of KV head hk of sequence b (width n features) into buf
 * (leading dimension ld) as float32, and prefetches the next tile's next_rows rows into L2:
 * K/V rows lie H x D elements apart, typically one row per 4 KiB page, where the hardware
 * prefetchers do not follow, and one tile of gemm work is ample prefetch distance. */
static void load_kv_tile(const attn_problem *p, const cpu_kernels *kr, const void *base,
                         const int64_t *st, int64_t b, int64_t hk, int64_t j0, int64_t rows,
                         int64_t n, float *buf, int64_t ld, int64_t next_rows)
{
    for (int64_t r = 0; r < rows;) {
        int64_t off;
        const int64_t run = kv_run(p, st, b, j0 + r, rows - r, &off);
        off += hk * st[2];
        for (int64_t t = 0; t < run; t++)
            load_row(kr, base, p->dtype, off + t * st[1], st[3], n, buf + (r + t) * ld);
        r += run;
    }
    const int64_t row_bytes = n * st[3] * (int64_t)flashc_dtype_size(p->dtype);
    for (int64_t r = 0; r < next_rows;) {
        int64_t off;
        const int64_t run = kv_run(p, st, b, j0 + rows + r, next_rows - r, &off);
        off += hk * st[2];
        for (int64_t t = 0; t < run; t++) {
            const char *nx = elem_ptr(base, p->dtype, off + t * st[1]);
            for (int64_t x = 0; x < row_bytes; x += 64)
                __builtin_prefetch(nx + x, 0, 2);
        }
        r += run;
    }
}

/* ---- the two products (small functions, so that other units' products slot in) ---------- */

/* St (cols x rows, brp) = K (cols x D) Qt (D x rows): the raw scores, transposed. */
static void product_qk_t(const attn_problem *p, const cpu_kernels *kr, const float *k,
                         int64_t ldk, int64_t cols, const float *qt, int64_t brp, int64_t rows,
                         float *st)
{
    kr->gemm(cols, rows, p->D, k, ldk, 1, qt, brp, NULL, st, brp);
}

/* acc (rows x Dv, lda) = diag(alpha) acc + (P^T)^T V: P^T (cols x rows, brp), V (cols x Dv). */
static void product_pv_t(const attn_problem *p, const cpu_kernels *kr, const float *st,
                         int64_t brp, int64_t rows, int64_t cols, const float *v, int64_t ldv,
                         const float *alpha, float *acc, int64_t lda)
{
    kr->gemm(rows, p->Dv, cols, st, 1, brp, v, ldv, alpha, acc, lda);
}

/* ---- one item --------------------------------------------------------------------------- */

typedef struct item_ctx {
    const attn_problem *p;
    const cpu_kernels *kr;
    const fwd_plan *pl;
    tiles *w;
    int64_t b, sq, sk, h, hk, i0, rows, total;
    int mod;              /* score_mod applies (softcap, ALiBi, or scale 0)                */
    cpu_score_mod sm;     /* the transposed path's modifier (slope of head h)              */
    float c;              /* softmax_t's scale                                              */
} item_ctx;

/* Qt[d][r] = q[i0 + r][d] for the item's rows, through acc (free until the K loop).
 * A negative softmax_scale is carried by Q: Qt = -Q^T, and the softmax gets |scale|: softmax_t
 * takes the max of the raw scores and scales it after, which is right only for a positive
 * scale (for a negative one that max is the minimum). The negation is exact. */
static void pack_qt(const item_ctx *x)
{
    const attn_problem *p = x->p;
    tiles *w = x->w;
    const int64_t D = p->D, brp = x->pl->brp, lda = x->pl->lda;
    const float sign = p->scale < 0.0f ? -1.0f : 1.0f;
    const int64_t off = attn_q_off(p, p->sq, x->b, x->i0) + x->h * p->sq[2];
    for (int64_t r = 0; r < x->rows; r++)
        load_row(x->kr, p->q, p->dtype, off + r * p->sq[1], p->sq[3], D, w->acc + r * lda);
    for (int64_t r = 0; r < x->rows; r++)
        for (int64_t d = 0; d < D; d++)
            w->qt[d * brp + r] = sign * w->acc[r * lda + d];
}

/* Key range of item row i (a query row of the sequence), relative to key k0, clamped to
 * [0, n): the row sees tile columns [*a, *e). */
static void row_cols(const item_ctx *x, int64_t i, int64_t k0, int64_t n, int64_t *a, int64_t *e)
{
    int64_t lo, hi;
    attn_key_range(x->p, x->sq, x->sk, i, &lo, &hi);
    *a = min64(max64(lo - k0, 0), n);
    *e = max64(min64(hi - k0, n), *a);
}

/* A tile of keys [ks, ks + cols) on the transposed path. full: every row of the block sees
 * every key of it. Otherwise sub-panels of DIAG_ROWS rows, each taken through the whole update
 * against only the keys its rows see [ulo, uhi); a sub-panel that sees no key of the tile keeps
 * its m, l and accumulator unchanged (alpha would be exactly 1). */
static void tile_t(const item_ctx *x, int64_t ks, int64_t cols, int full)
{
    const attn_problem *p = x->p;
    const cpu_kernels *kr = x->kr;
    tiles *w = x->w;
    const int64_t brp = x->pl->brp, ldk = x->pl->ldk, ldv = x->pl->ldv, lda = x->pl->lda;
    const int64_t a0 = x->i0 + x->sk - x->sq; /* position of the block's first row */
    if (full) {
        product_qk_t(p, kr, w->k, ldk, cols, w->qt, brp, x->rows, w->st);
        if (x->mod)
            kr->score_mod_t(w->st, brp, cols, x->rows, &x->sm, a0 - ks);
        kr->softmax_t(w->st, brp, cols, x->rows, x->c, w->m, w->l, w->alpha);
        product_pv_t(p, kr, w->st, brp, x->rows, cols, w->v, ldv, w->alpha, w->acc, lda);
        return;
    }
    int vbad = -1; /* V tile holds inf/NaN: asked once, when a mask is first needed */
    for (int64_t s0 = 0; s0 < x->rows; s0 += DIAG_ROWS) {
        const int64_t sr = min64(DIAG_ROWS, x->rows - s0);
        int64_t fa, fe, la, le; /* columns seen by the sub-panel's first and last rows */
        row_cols(x, x->i0 + s0, ks, cols, &fa, &fe);
        row_cols(x, x->i0 + s0 + sr - 1, ks, cols, &la, &le);
        const int64_t u0 = fa, u1 = max64(fe, le);
        if (u1 <= u0)
            continue;
        const int64_t kn = u1 - u0;
        float *st = w->st + s0;
        product_qk_t(p, kr, w->k + u0 * ldk, ldk, kn, w->qt + s0, brp, sr, st);
        if (x->mod)
            kr->score_mod_t(st, brp, kn, sr, &x->sm, a0 + s0 - (ks + u0));
        const int sub_full = la <= u0 && fe >= u1;
        if (!sub_full) {
            for (int64_t r = 0; r < sr; r++) {
                int64_t a, e;
                row_cols(x, x->i0 + s0 + r, ks + u0, kn, &a, &e);
                w->lo[r] = (float)a, w->hi[r] = (float)e;
            }
            kr->mask_t(st, brp, kn, sr, w->lo, w->hi);
        }
        kr->softmax_t(st, brp, kn, sr, x->c, w->m + s0, w->l + s0, w->alpha + s0);
        if (!sub_full && vbad < 0)
            vbad = kr->nonfinite(w->v, ldv, cols, p->Dv);
        if (sub_full || !vbad) {
            product_pv_t(p, kr, st, brp, sr, kn, w->v + u0 * ldv, ldv, w->alpha + s0,
                         w->acc + s0 * lda, lda);
            continue;
        }
        for (int64_t r = 0; r < sr; r++) { /* each row over its own keys only */
            const int64_t a = (int64_t)w->lo[r], e = (int64_t)w->hi[r];
            if (e > a) /* (a row that sees none of these keys has alpha == 1) */
                product_pv_t(p, kr, st + a * brp + r, brp, 1, e - a, w->v + (u0 + a) * ldv, ldv,
                             w->alpha + s0 + r, w->acc + (s0 + r) * lda, lda);
        }
    }
}

/* A tile on the decode path: S row-major (total x cols), row r = query row i0 + r % rows of
 * head h + r / rows. */
static void tile_few(const item_ctx *x, int64_t ks, int64_t cols, int full)
{
    const attn_problem *p = x->p;
    const cpu_kernels *kr = x->kr;
    tiles *w = x->w;
    const int64_t ldk = x->pl->ldk, ldv = x->pl->ldv, lda = x->pl->lda, rows = x->rows;
    kr->qk(w->qt, p->D, w->k, ldk, x->total, cols, p->D, p->scale, w->st, cols);
    for (int64_t r = 0; x->mod && r < x->total; r++) {
        cpu_score_mod sm = x->sm;
        sm.scale = 1.0f, sm.out_scale = 1.0f; /* qk applied the scale; natural units */
        sm.slope = attn_alibi_slope(p, x->b, x->h + r / rows);
        kr->score_mod_row(w->st + r * cols, cols, &sm, x->i0 + r % rows + x->sk - x->sq - ks);
    }
    if (!full)
        for (int64_t r = 0; r < x->total; r++) {
            int64_t a, e;
            row_cols(x, x->i0 + r % rows, ks, cols, &a, &e);
            float *s = w->st + r * cols;
            for (int64_t c = 0; c < a; c++)
                s[c] = -INFINITY;
            for (int64_t c = e; c < cols; c++)
                s[c] = -INFINITY;
            w->lo[r % rows] = (float)a, w->hi[r % rows] = (float)e;
        }
    kr->softmax(w->st, cols, x->total, cols, w->m, w->l, w->alpha);
    if (full || !kr->nonfinite(w->v, ldv, cols, p->Dv)) {
        kr->pv(w->st, cols, w->v, ldv, x->total, cols, p->Dv, w->alpha, w->acc, lda);
        return;
    }
    for (int64_t r = 0; r < x->total; r++) {
        const int64_t a = (int64_t)w->lo[r % rows], e = (int64_t)w->hi[r % rows];
        if (e > a)
            kr->pv(w->st + r * cols + a, cols, w->v + a * ldv, ldv, 1, e - a, p->Dv,
                   w->alpha + r, w->acc + r * lda, lda);
    }
}

/* Split partials: row (q row g of the layout, head h, chunk s) holds acc (Dv), m, l. */
typedef struct parts {
    float *acc, *m, *l;
    int64_t hq, splits, dv;
} parts;

static int64_t part_index(const parts *pt, const attn_problem *p, int64_t b, int64_t i,
                          int64_t h, int64_t s)
{
    const int64_t g = p->layout == ATTN_VARLEN ? (int64_t)p->cu_q[b] + i : b * p->Sq + i;
    return (g * pt->hq + h) * pt->splits + s;
}

/* Stores output row (b, i, h): acc * inv (kernels.h store_row) or zeros. */
static void store_out(const attn_problem *p, const cpu_kernels *kr, int64_t b, int64_t i,
                      int64_t h, float *acc, float inv, int empty)
{
    const int64_t off = attn_q_off(p, p->so, b, i) + h * p->so[2];
    if (empty) /* never acc * 0: acc may hold 0 * inf of a key no row sees */
        memset(acc, 0, (size_t)p->Dv * sizeof(float)), inv = 0.0f;
    if (p->so[3] == 1)
        kr->store_row(acc, inv, p->Dv, (void *)elem_ptr(p->o, p->dtype, off), p->dtype);
    else
        for (int64_t d = 0; d < p->Dv; d++)
            flashc__store(p->o, p->dtype, off + d * p->so[3], acc[d] * inv);
}

/* One item: unit u (sequence, Q block, chunk) for query heads [h, h + nh). Returns the
 * (Q block, K block) tile pairs computed, counted per head. */
static int64_t fwd_item(const attn_problem *p, const cpu_kernels *kr, const fwd_plan *pl,
                        tiles *w, const fwd_unit *u, int64_t hg, const parts *pt)
{
    item_ctx x;
    x.p = p, x.kr = kr, x.pl = pl, x.w = w;
    x.b = u->b, x.i0 = u->i0, x.rows = u->rows;
    attn_seqlens(p, x.b, &x.sq, &x.sk);
    x.h = hg * pl->nh;
    x.hk = x.h / (p->Hq / p->Hkv);
    x.total = pl->nh * x.rows;
    x.mod = p->softcap > 0.0f || p->alibi || p->scale == 0.0f;
    x.sm.scale = fabsf(p->scale);
    x.sm.softcap = p->softcap;
    x.sm.slope = attn_alibi_slope(p, x.b, x.h);
    x.sm.out_scale = 1.44269504088896341f;
    x.c = x.mod ? 1.0f : fabsf(p->scale) * 1.44269504088896341f;
    const int64_t D = p->D, bc = pl->bc, lda = pl->lda;

    int64_t klo, khi, lo1, hi0, t;
    block_keys(p, pl, x.sq, x.sk, x.i0, x.rows, u->s, &klo, &khi);
    attn_key_range(p, x.sq, x.sk, x.i0, &t, &hi0);
    attn_key_range(p, x.sq, x.sk, x.i0 + x.rows - 1, &lo1, &t);

    for (int64_t r = 0; r < x.total; r++)
        w->m[r] = -INFINITY, w->l[r] = 0.0f;
    if (khi > klo) {
        if (pl->few)
            for (int64_t g = 0; g < pl->nh; g++) {
                const int64_t off = attn_q_off(p, p->sq, x.b, x.i0) + (x.h + g) * p->sq[2];
                for (int64_t r = 0; r < x.rows; r++)
                    load_row(kr, p->q, p->dtype, off + r * p->sq[1], p->sq[3], D,
                             w->qt + (g * x.rows + r) * D);
            }
        else
            pack_qt(&x);
    }
    memset(w->acc, 0, (size_t)(x.total * lda) * sizeof(float));

    int64_t pairs = 0;
    for (int64_t j0 = klo / bc * bc; j0 < khi; j0 += bc) {
        /* keys outside the block's union are never loaded */
        const int64_t ks = max64(j0, klo), ke = min64(j0 + bc, khi), cols = ke - ks;
        const int64_t next = max64(0, min64(j0 + 2 * bc, khi) - ke);
        load_kv_tile(p, kr, p->k, p->sk, x.b, x.hk, ks, cols, D, w->k, pl->ldk, next);
        load_kv_tile(p, kr, p->v, p->sv, x.b, x.hk, ks, cols, p->Dv, w->v, pl->ldv, next);
        const int full = lo1 <= ks && hi0 >= ke;
        if (pl->few)
            tile_few(&x, ks, cols, full);
        else
            tile_t(&x, ks, cols, full);
        pairs += pl->nh;
    }

    /* The one division per row; a row that saw no key (l == 0) outputs 0 and LSE = -inf.
     * A NaN l (NaN among the visible scores or values) stays NaN in O and LSE. */
    const float ln2 = pl->few ? 1.0f : 0.693147180559945f; /* m's units to natural */
    for (int64_t r = 0; r < x.total; r++) {
        const int64_t h = x.h + r / x.rows, i = x.i0 + r % x.rows;
        const float l = w->l[r];
        if (pl->splits > 1) {
            const int64_t k = part_index(pt, p, x.b, i, h, u->s);
            memcpy(pt->acc + k * pt->dv, w->acc + r * lda, (size_t)p->Dv * sizeof(float));
            pt->m[k] = w->m[r] * ln2;
            pt->l[k] = l;
            continue;
        }
        store_out(p, kr, x.b, i, h, w->acc + r * lda, 1.0f / l, l == 0.0f);
        if (p->lse)
            p->lse[attn_lse_off(p, x.b, h, i)] = l == 0.0f ? -INFINITY : w->m[r] * ln2 + logf(l);
    }
    return pairs;
}

/* Merges the chunks of output row (b, i, h) in chunk order (so the result is the same for
 * any thread count): O = sum_s e^(m_s - M) acc_s / sum_s e^(m_s - M) l_s, M = max_s m_s over
 * the chunks that saw a key. A chunk with l = 0 saw none and is not read. */
static void merge_row(const attn_problem *p, const cpu_kernels *kr, const parts *pt, int64_t b,
                      int64_t i, int64_t h, float *tmp)
{
    const int64_t k0 = part_index(pt, p, b, i, h, 0);
    float M = -INFINITY;
    for (int64_t s = 0; s < pt->splits; s++) {
        const float m = pt->m[k0 + s], l = pt->l[k0 + s];
        if (l != 0.0f && (m > M || isnan(m) || isnan(l)))
            M = isnan(l) ? NAN : m;
    }
    memset(tmp, 0, (size_t)p->Dv * sizeof(float));
    float L = 0.0f;
    for (int64_t s = 0; s < pt->splits && M != -INFINITY; s++) {
        const float l = pt->l[k0 + s];
        if (l == 0.0f)
            continue;
        const float wgt = expf(pt->m[k0 + s] - M);
        const float *a = pt->acc + (k0 + s) * pt->dv;
        L = fmaf(wgt, l, L);
        for (int64_t d = 0; d < p->Dv; d++)
            tmp[d] = fmaf(wgt, a[d], tmp[d]);
    }
    const int empty = M == -INFINITY;
    store_out(p, kr, b, i, h, tmp, 1.0f / L, empty);
    if (p->lse)
        p->lse[attn_lse_off(p, b, h, i)] = empty ? -INFINITY : M + logf(L);
}

flashc_status cpu_attn_fwd(const attn_problem *p, flashc_attn_stats *stats)
{
    const cpu_kernels *kr = cpu_kernels_get();
    fwd_plan pl;
    make_plan(p, &pl);
    attn_scratch sc;
    attn_scratch_init(&sc, p);
    float *ws = attn_scratch_take(&sc, pl.sizes[0]);
    fwd_unit *units = pl.sizes[1] ? attn_scratch_take(&sc, pl.sizes[1]) : NULL;
    float *pbuf = pl.sizes[2] ? attn_scratch_take(&sc, pl.sizes[2]) : NULL;
    if (!ws || (pl.sizes[1] && !units) || (pl.sizes[2] && !pbuf)) {
        attn_scratch_free(&sc, pbuf), attn_scratch_free(&sc, units), attn_scratch_free(&sc, ws);
        return flashc__fail(FLASHC_ERR_OUT_OF_MEMORY,
                            "flashc_attn_fwd: cannot allocate %d thread workspaces of %zu floats",
                            pl.threads, pl.per_thread);
    }
    if (units)
        make_units(p, &pl, units);
    parts pt = {0};
    if (pbuf) {
        const int64_t n = pl.part_rows * p->Hq * pl.splits;
        pt.acc = pbuf, pt.m = pbuf + n * p->Dv, pt.l = pt.m + n;
        pt.hq = p->Hq, pt.splits = pl.splits, pt.dv = p->Dv;
    }

    int64_t pairs = 0;
    const int64_t items = pl.items, hgroups = pl.hgroups;
#pragma omp parallel num_threads(pl.threads) reduction(+ : pairs)
    {
#ifdef _OPENMP
        const int tid = omp_get_thread_num();
#else
        const int tid = 0;
#endif
        tiles w = tiles_at(&pl, p, ws + (size_t)tid * pl.per_thread);
#pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < items; it++) {
            const fwd_unit u = unit_at(p, &pl, units, it / hgroups);
            pairs += fwd_item(p, kr, &pl, &w, &u, it % hgroups, &pt);
        }
        if (pl.splits > 1) {
            /* the units of chunk 0 name every (sequence, Q block) once */
#pragma omp for schedule(dynamic, 1)
            for (int64_t it = 0; it < pl.units * p->Hq; it++) {
                const fwd_unit u = unit_at(p, &pl, units, it / p->Hq);
                if (u.s != 0)
                    continue;
                for (int64_t i = u.i0; i < u.i0 + u.rows; i++)
                    merge_row(p, kr, &pt, u.b, i, it % p->Hq, w.acc);
            }
        }
    }
    attn_scratch_free(&sc, pbuf), attn_scratch_free(&sc, units), attn_scratch_free(&sc, ws);

    int64_t total;
    attn_tile_pairs(p, pl.br, pl.bc, &total);
    stats->tile_pairs = pairs;
    stats->tile_pairs_total = total;
    stats->block_q = pl.few ? pl.br : pl.br_req;
    stats->block_k = pl.bc_req;
    stats->num_splits = pl.splits;
    return FLASHC_OK;
}
