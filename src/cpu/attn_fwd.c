/*
 * attn_fwd.c — FlashAttention-2 forward on the CPU: the portable loop nest.
 *
 * Work item = (batch, head, Q block of Br rows). For each item: pack the Q tile once,
 * transposed, Qt[d][i] = q[i][d]; then stream K/V tiles of Bc rows through two gemm
 * micro-kernel calls and the online softmax (kernels.h):
 *   St = K Qt                 (Bc x Br)  the scores, transposed: column i is query row i
 *   P^T = 2^(c St - m), m, l  softmax_t, c = scale log2(e) applied by one FMA per score:
 *                             running max/sum per query, all vertical vector ops
 *   acc = alpha acc + P V     (Br x D)   P^T read with strides (1, ldst), alpha folded in
 * One division by l per row at the end; LSE = m ln2 + ln l (m is in base-2 units).
 *
 * Why transposed: with S^T the queries run along the vector lanes, so the softmax's max, sum
 * and rescale need no horizontal reductions, the K tile is the gemm's broadcast operand (read
 * in place, no per-tile transpose), and the only transpose is of Q, once per item (Br x D,
 * against Br x Sk x D x 4 FLOPs of work). Taking scale * log2(e) into the softmax's FMA turns
 * every exp into an exp2 at no extra operation (pre-scaling Q instead rounded every q element
 * once more and doubled the float32 error against the naive float32 path in some cases).
 *
 * Storage: float32, bfloat16 or float16 Q/K/V/O with float32 accumulation everywhere. Every
 * K/V tile is copied into a per-thread buffer with a cache-friendly leading dimension,
 * converting bf16/f16 on the way (kernels.h load_row: F16C / a shift for bf16), and O is
 * rounded once on the final store.
 *
 * Tiles (Br = query rows per item, Bc = key rows per tile), chosen for Zen-class caches
 * (32-48 KiB L1d, 512 KiB - 1 MiB L2 per core) and for the register blocks (MR = 6 on AVX2,
 * 12 on AVX-512; 48, 96, 192 and 288 are multiples of both and of the 16/32-lane panels):
 *   D <= 128: Br = 288, Bc = 96   The gemm panels stay in L1 (Qt column panel D x 16 floats =
 *                                 8 KiB at D = 128, V panel Bc x 16 = 6 KiB). The whole per-
 *                                 thread set (Qt 152 + acc 162 + St 114 + K, V 54 KiB each at
 *                                 D = 128; 340 KiB at D = 64) is about one Zen 3 L2: a tall Q
 *                                 block divides the K/V tile copies per FLOP by Br, and that
 *                                 won over fitting L2 exactly. Measured on Zen 3, 1 thread,
 *                                 n = 1024, GFLOP/s at D = 128 / 64: Br x Bc = 96 x 96: 67 /
 *                                 53; 192 x 96: 76.5 / 70.2; 288 x 96: 78.9 / 72.5; 384 x 96:
 *                                 78.5 / 75.1; 192 x 192: 69 / 69; Bc = 48 or 144: no better.
 *   D > 128:  Br = 192, Bc = 48   D = 256: 96 x 48: 74.6; 192 x 48: 77.1; 96 x 96: 75.0.
 * Br steps down (288, 192, 96, 48) while there are fewer than 2 items per thread, so short sequences
 * and few heads still keep every thread busy. Decode (Sq < 8): Bc = 48 (f16 KV, 32k keys,
 * 16/8 heads, 2 threads: Bc 48: 13.3 ms, 96: 14.3, 384: 22.1). bench/RESULTS.md "CPU speed" has
 * the figures.
 *
 * Causal (bottom-right aligned): K blocks entirely above the diagonal are never visited, and
 * the mask is written only into tiles that straddle it. Items are handed out heaviest first
 * (the last Q blocks see the most keys) with dynamic scheduling, so the triangular work
 * balances across threads.
 *
 * Memory: per-thread tiles only, from the counting allocator; nothing of size Sq x Sk exists.
 */
#include "internal.h"
#include "kernels.h"

#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

flashc_status cpu_attn_fwd_supports(const attn_problem *p)
{
    if (!attn_is_plain(p))
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "flashc_attn_fwd: the CPU kernel does not serve this problem yet "
                            "(varlen, KV cache, window, softcap, ALiBi, Dk != Dv or split-KV)");
    if (p->dtype != FLASHC_F32 && p->dtype != FLASHC_BF16 && p->dtype != FLASHC_F16)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED_DTYPE,
                            "flashc_attn_fwd: the CPU backend supports float32, bfloat16 and "
                            "float16 storage (%s given)",
                            flashc__dtype_name(p->dtype));
    return FLASHC_OK;
}

/* Scratch: per-thread tiles, allocated inside (moving onto attn_scratch with the v2 kernel). */
size_t cpu_attn_fwd_workspace(const attn_problem *p)
{
    (void)p;
    return 0;
}

enum { FEW_ROWS = 8 };

static void default_tiles(const attn_problem *p, int64_t *br, int64_t *bc)
{
    if (p->Sq < FEW_ROWS) { /* decode: K/V streamed from memory; short tiles measured best */
        *br = p->Sq, *bc = 48;
        return;
    }
    if (p->D <= 128)
        *br = 288, *bc = 96;
    else
        *br = 192, *bc = 48;
    while (*br > 48 && p->B * p->Hq * ((p->Sq + *br - 1) / *br) < 2 * (int64_t)p->threads)
        *br = *br > 192 ? 192 : *br / 2; /* 288 -> 192 -> 96 -> 48 */
}

static const void *elem_ptr(const void *base, flashc_dtype dt, int64_t off)
{
    return (const char *)base + off * (int64_t)flashc_dtype_size(dt);
}

/* Leading dimension of the per-thread tiles: whole 64-byte lines, an odd number of them, so the
 * rows of a tile spread over every L1 set. (The tensors' own row strides are usually H x D
 * floats, a power of two: read in place, the 96 rows of a K or V tile fall into a handful of
 * L1 sets and evict each other; that cost 10-15% before the tiles were copied.) */
static int64_t tile_ld(int64_t n) { return ((n + 15) / 16 | 1) * 16; }

/* Copies a rows x D tile of a (B, S, H, D) tensor into buf (leading dimension ld) as float32,
 * converting bf16/f16 on the way (kernels.h load_row), and prefetches the next tile's first
 * next_rows rows (the tile `rows` rows further on) into L2: K/V rows lie H x D elements apart,
 * typically one row per 4 KiB page, where the hardware prefetchers do not follow, and one tile
 * of gemm work is ample prefetch distance. */
static void load_tile(const cpu_kernels *kr, const void *base, flashc_dtype dt, const int64_t *st,
                      int64_t off, int64_t rows, int64_t D, float *buf, int64_t ld,
                      int64_t next_rows)
{
    const int64_t row_bytes = D * st[3] * (int64_t)flashc_dtype_size(dt);
    for (int64_t r = 0; r < rows; r++) {
        if (st[3] == 1)
            kr->load_row(elem_ptr(base, dt, off + r * st[1]), dt, D, buf + r * ld);
        else /* strided features: element by element */
            for (int64_t d = 0; d < D; d++)
                buf[r * ld + d] = flashc__load(base, dt, off + r * st[1] + d * st[3]);
        if (r < next_rows) {
            const char *nx = elem_ptr(base, dt, off + (r + rows) * st[1]);
            for (int64_t b = 0; b < row_bytes; b += 64)
                __builtin_prefetch(nx + b, 0, 2);
        }
    }
}

typedef struct workspace {
    int64_t brp;      /* leading dimension of qt and st: tile_ld(Br)                        */
    int64_t ld;       /* leading dimension of k, v and acc: tile_ld(D)                      */
    float *qt;        /* D x brp   Q^T                                                     */
    float *k, *v;     /* bc x ld   K and V tiles as float32                                */
    float *st;        /* bc x brp  scores / probabilities, transposed                      */
    float *acc;       /* br x ld   unnormalised output                                     */
    float *m, *l, *alpha; /* brp each                                                      */
} workspace;

static size_t workspace_floats(int64_t br, int64_t bc, int64_t D)
{
    const int64_t brp = tile_ld(br), ld = tile_ld(D);
    return (size_t)(D * brp + 2 * bc * ld + bc * brp + br * ld + 3 * brp);
}

static workspace workspace_at(float *base, int64_t br, int64_t bc, int64_t D)
{
    workspace w;
    w.brp = tile_ld(br);
    w.ld = tile_ld(D);
    w.qt = base;
    w.k = w.qt + D * w.brp;
    w.v = w.k + bc * w.ld;
    w.st = w.v + bc * w.ld;
    w.acc = w.st + bc * w.brp;
    w.m = w.acc + br * w.ld;
    w.l = w.m + w.brp;
    w.alpha = w.l + w.brp;
    return w;
}

/* Qt[d][r] = q[i0 + r][d] for the item's rows, through acc (free until the K loop).
 * A negative softmax_scale is carried by Q: Qt = -Q^T, and the softmax gets |scale| (see
 * positive_scale); the negation is exact. */
static void pack_qt(const attn_problem *p, const cpu_kernels *kr, workspace *w, int64_t qoff,
                    int64_t rows)
{
    const int64_t D = p->D;
    const float sign = p->scale < 0.0f ? -1.0f : 1.0f;
    load_tile(kr, p->q, p->dtype, p->sq, qoff, rows, D, w->acc, w->ld, 0);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t d = 0; d < D; d++)
            w->qt[d * w->brp + r] = sign * w->acc[r * w->ld + d];
}

/* softmax_t's scale, in base-2 units: it takes the max of the raw scores and scales it after,
 * which is right only for a positive scale (for a negative one that max is the minimum, and a
 * masked -inf score would become +inf). pack_qt moves the sign into Qt. */
static float positive_scale(const attn_problem *p)
{
    return fabsf(p->scale) * 1.44269504088896341f;
}

/* A K/V tile that straddles the causal diagonal: query row i sees keys j < attn_key_end(i).
 * The queries go in sub-panels of DIAG_ROWS rows, each taken through the whole update (scores,
 * mask, softmax, P V) against only the keys its last row sees, so the work above the diagonal
 * shrinks from Br x Bc / 2 to DIAG_ROWS x Bc / 2 per tile. Keys a sub-panel skips are masked for
 * all its rows: they would contribute exactly 0, and a sub-panel that sees no key of the tile
 * keeps its m, l and accumulator unchanged (alpha would be exactly 1). */
enum { DIAG_ROWS = 48 };

static void straddling_tile(const attn_problem *p, const cpu_kernels *kr, workspace *w,
                            int64_t i0, int64_t rows, int64_t j0, int64_t cols)
{
    const int64_t brp = w->brp, D = p->D;
    const float c = positive_scale(p); /* scores to base-2 units */
    for (int64_t s0 = 0; s0 < rows; s0 += DIAG_ROWS) {
        const int64_t sr = rows - s0 < DIAG_ROWS ? rows - s0 : DIAG_ROWS;
        int64_t kn = attn_key_end(p, i0 + s0 + sr - 1) - j0; /* the sub-panel's last row */
        kn = kn > cols ? cols : kn;
        if (kn <= 0)
            continue;
        float *st = w->st + s0;
        kr->gemm(kn, sr, D, w->k, w->ld, 1, w->qt + s0, brp, NULL, st, brp);
        for (int64_t r = 0; r < sr; r++) {
            const int64_t first = attn_key_end(p, i0 + s0 + r) - j0;
            for (int64_t c = first < 0 ? 0 : first; c < kn; c++)
                st[c * brp + r] = -INFINITY;
        }
        kr->softmax_t(st, brp, kn, sr, c, w->m + s0, w->l + s0, w->alpha + s0);
        kr->gemm(sr, D, kn, st, 1, brp, w->v, w->ld, w->alpha + s0, w->acc + s0 * w->ld, w->ld);
    }
}

/* One item: query rows [i0, i0 + rows) of the nh heads h .. h + nh - 1 (nh > 1 only on the
 * decode path: heads that share a KV head, so each K/V tile is loaded once for all of them).
 * Row r of the item is query row i0 + r % rows of head h + r / rows. Returns the number of
 * (Q block, K block) tile pairs computed, counted per head. */
static int64_t fwd_block(const attn_problem *p, const cpu_kernels *kr, workspace *w, int64_t b,
                         int64_t h, int64_t nh, int64_t i0, int64_t rows, int64_t bc)
{
    const int64_t D = p->D, hk = h / (p->Hq / p->Hkv), brp = w->brp, total = nh * rows;
    const float c = positive_scale(p); /* scores to base-2 units */
    const int64_t kend_max = attn_key_end(p, i0 + rows - 1); /* the block's last row sees most */
    const int64_t kend_min = attn_key_end(p, i0);            /* its first row sees least       */
    int64_t pairs = 0;

    /* Fewer than FEW_ROWS query rows in the whole sequence (decode) would fill only a few
     * vector lanes of the transposed path; S stays row-major instead (qk's dot products, the
     * row softmax in natural units, pv), Q rows as float32 in qt (ld D). Decided by Sq, not by
     * the block, so the arithmetic of a row never depends on the tiles, the head grouping or
     * the thread count (results are bit-identical for any thread count). */
    const int few = p->Sq < FEW_ROWS;
    for (int64_t r = 0; r < total; r++) {
        w->m[r] = -INFINITY;
        w->l[r] = 0.0f;
    }
    for (int64_t g = 0; g < nh && kend_max > 0; g++) {
        const int64_t qoff = b * p->sq[0] + (h + g) * p->sq[2] + i0 * p->sq[1];
        if (few)
            load_tile(kr, p->q, p->dtype, p->sq, qoff, rows, D, w->qt + g * rows * D, D, 0);
        else
            pack_qt(p, kr, w, qoff, rows);
    }
    memset(w->acc, 0, (size_t)(total * w->ld) * sizeof(float));

    for (int64_t j0 = 0; j0 < kend_max; j0 += bc) {
        /* keys past the block's last visible one are never loaded */
        const int64_t cols = j0 + bc < kend_max ? bc : kend_max - j0;
        const int64_t next = kend_max - (j0 + cols) < cols ? kend_max - (j0 + cols) : cols;
        load_tile(kr, p->k, p->dtype, p->sk, b * p->sk[0] + hk * p->sk[2] + j0 * p->sk[1], cols,
                  D, w->k, w->ld, next);
        load_tile(kr, p->v, p->dtype, p->sv, b * p->sv[0] + hk * p->sv[2] + j0 * p->sv[1], cols,
                  D, w->v, w->ld, next);
        if (few) {
            kr->qk(w->qt, D, w->k, w->ld, total, cols, D, p->scale, w->st, cols);
            for (int64_t r = 0; p->causal && r < total; r++) {
                const int64_t first = attn_key_end(p, i0 + r % rows) - j0;
                for (int64_t c = first < 0 ? 0 : first; c < cols; c++)
                    w->st[r * cols + c] = -INFINITY;
            }
            kr->softmax(w->st, cols, total, cols, w->m, w->l, w->alpha);
            kr->pv(w->st, cols, w->v, w->ld, total, cols, D, w->alpha, w->acc, w->ld);
        } else if (!p->causal || j0 + cols <= kend_min) { /* every row sees every key */
            kr->gemm(cols, rows, D, w->k, w->ld, 1, w->qt, brp, NULL, w->st, brp);
            kr->softmax_t(w->st, brp, cols, rows, c, w->m, w->l, w->alpha);
            kr->gemm(rows, D, cols, w->st, 1, brp, w->v, w->ld, w->alpha, w->acc, w->ld);
        } else {
            straddling_tile(p, kr, w, i0, rows, j0, cols);
        }
        pairs += nh;
    }

    /* The one division per row; a row that saw no key (l == 0) outputs 0 and LSE = -inf.
     * A NaN l (NaN inputs) stays NaN in O and LSE. */
    for (int64_t r = 0; r < total; r++) {
        const int64_t hr = h + r / rows, i = i0 + r % rows;
        const float l = w->l[r];
        const float inv = l == 0.0f ? 0.0f : 1.0f / l;
        const int64_t orow = b * p->so[0] + hr * p->so[2] + i * p->so[1];
        if (p->so[3] == 1)
            kr->store_row(w->acc + r * w->ld, inv, D, (void *)elem_ptr(p->o, p->dtype, orow),
                          p->dtype);
        else
            for (int64_t d = 0; d < D; d++)
                flashc__store(p->o, p->dtype, orow + d * p->so[3], w->acc[r * w->ld + d] * inv);
        if (p->lse)
            p->lse[b * p->slse[0] + hr * p->slse[1] + i * p->slse[2]] =
                l == 0.0f ? -INFINITY : w->m[r] * (few ? 1.0f : 0.693147180559945f) + logf(l);
    }
    return pairs;
}

flashc_status cpu_attn_fwd(const attn_problem *p, flashc_attn_stats *stats)
{
    const cpu_kernels *kr = cpu_kernels_get();
    int64_t br, bc;
    default_tiles(p, &br, &bc);
    if (p->br)
        br = p->br;
    if (p->bc)
        bc = p->bc;
    const int64_t br_used = br, bc_used = bc;
    if (br > p->Sq) /* a tile never needs to be larger than the sequence */
        br = p->Sq;
    if (bc > p->Sk)
        bc = p->Sk;

    /* Decode (Sq < FEW_ROWS): the query heads of a KV head form one item when that still
     * leaves 2 items per thread, so each K/V tile is read and converted once per group. */
    const int64_t nh = p->Sq < FEW_ROWS && p->B * p->Hkv >= 2 * (int64_t)p->threads
                           ? p->Hq / p->Hkv
                           : 1;
    const int64_t nqb = (p->Sq + br - 1) / br, heads = p->B * p->Hq / nh, items = heads * nqb;
    int threads = p->threads;
    if (threads > items)
        threads = (int)items;
    const size_t per_thread = workspace_floats(br * nh, bc, p->D); /* 16k floats: 64 B rows */
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
        workspace w = workspace_at(ws + (size_t)tid * per_thread, br * nh, bc, p->D);
#pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < items; it++) {
            const int64_t qb = nqb - 1 - it / heads; /* heaviest (last) Q blocks first */
            const int64_t bh = it % heads;
            const int64_t i0 = qb * br;
            const int64_t rows = i0 + br < p->Sq ? br : p->Sq - i0;
            const int64_t hpb = p->Hq / nh; /* items per batch entry and Q block */
            pairs += fwd_block(p, kr, &w, bh / hpb, bh % hpb * nh, nh, i0, rows, bc);
        }
    }
    flashc__free(ws);

    stats->tile_pairs = pairs;
    stats->tile_pairs_total = p->B * p->Hq * nqb * ((p->Sk + bc - 1) / bc);
    stats->block_q = br_used;
    stats->block_k = bc_used;
    return FLASHC_OK;
}
