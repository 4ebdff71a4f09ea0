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
 * bf16 storage on a matrix unit (the table has kernels.h cpu_mm_bf16: AMX or AVX512-BF16): the
 * two products run on bf16 operands with float32 accumulation, S row-major this time (the units
 * want the reduction dimension contiguous in A and VNNI pairs in B, kernels.h):
 *   Q rows bf16 (packed once per item)      A of  S = Q K^T     (Br x Bc float32)
 *   K tile packed by pack_bt (a transpose)  B of  S = Q K^T
 *   P = 2^(c S - m) rounded to bf16          A of  acc = alpha acc + P V   (mm->softmax, rows)
 *   V tile packed by pack_b (row pairs)     B of  acc = alpha acc + P V
 * The softmax between them stays float32 on AVX-512 (m, l in float32, l summed before P is
 * rounded); the causal sub-panels, the LSE and the final division are those of the f32 path.
 * float16 storage keeps the float32 path (bf16 would drop 3 of its mantissa bits; kernels.h).
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

/* The bf16 matrix-unit path (mm_tile): Bc = MM_BC keys; Br from MM_BR down to 72 (halving) while
 * there are fewer than 2 items per thread. A tall item divides the K/V packing (and the K/V
 * streaming) per FLOP by Br; measured on the Xeon with AMX, 2 threads, d 128, n 4096, bf16,
 * GFLOP/s at Br x Bc: 128 x 192: 562; 288 x 192: 608; 576 x 192: 694; 1152 x 192: 797;
 * 288 x 96: 546; 288 x 384: 525 (bench/RESULTS.md, "CPU bf16 on matrix units"). */
enum { MM_BR = 1152 };

static void mm_default_tiles(const attn_problem *p, int64_t *br)
{
    *br = MM_BR;
    while (*br >= 128 && p->B * p->Hq * ((p->Sq + *br - 1) / *br) < 2 * (int64_t)p->threads)
        *br /= 2; /* 1152 -> 576 -> 288 -> 144 -> 72 */
}

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
    /* The bf16 matrix-unit path (mm_*; then qt, k, v, st are NULL). R16 = round up to 16. */
    int64_t dp, ldkp, ldvp, lds, ldp; /* round_up(D, 32); R16(bc); R16(D); tile_ld(bc);
                                         round_up(bc, 32)                                   */
    uint16_t *qb;     /* R16(br) x dp  Q rows, bf16, zero columns D .. dp                   */
    uint32_t *kp;     /* dp/2 x ldkp   K tile, VNNI pairs (pack_bt)                          */
    uint32_t *vp;     /* ldp/2 x ldvp  V tile, VNNI pairs (pack_b)                           */
    float *s;         /* MM_CHUNK x lds  a chunk's scores (mm_tile)                          */
    uint16_t *pb;     /* MM_CHUNK x ldp  a chunk's probabilities, bf16                       */
    uint16_t *kv;     /* bc x D        a K or V tile gathered from a strided feature axis    */
} workspace;

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

enum { MM_CHUNK = 64 }; /* the most rows of a chunk of the bf16 path (MM_ROWS, MM_DIAG_ROWS) */

/* Sizes in floats of the workspace regions, each a whole number of 64-byte lines. */
enum { WS_NREG = 14 };
static void workspace_regions(int64_t br, int64_t bc, int64_t D, int mm, int64_t sz[WS_NREG])
{
    const int64_t brp = tile_ld(br), ld = tile_ld(D), dp = round_up(D, CPU_MM_KP);
    const int64_t br16 = round_up(br, 16), bcp = round_up(bc, CPU_MM_KP);
    const int64_t f32[WS_NREG] = {D * brp, bc * ld, bc * ld, bc * brp, br * ld, brp, brp, brp,
                                  0, 0, 0, 0, 0, 0};
    const int64_t bf[WS_NREG] = {0, 0, 0, 0, br * ld, brp, brp, brp,
                                 br16 * dp / 2, dp / 2 * round_up(bc, 16),
                                 bcp / 2 * round_up(D, 16), MM_CHUNK * tile_ld(bc),
                                 MM_CHUNK * bcp / 2, (bc * D + 1) / 2};
    for (int i = 0; i < WS_NREG; i++)
        sz[i] = round_up(mm ? bf[i] : f32[i], 16);
}

static size_t workspace_floats(int64_t br, int64_t bc, int64_t D, int mm)
{
    int64_t sz[WS_NREG], n = 0;
    workspace_regions(br, bc, D, mm, sz);
    for (int i = 0; i < WS_NREG; i++)
        n += sz[i];
    return (size_t)n;
}

static workspace workspace_at(float *base, int64_t br, int64_t bc, int64_t D, int mm)
{
    int64_t sz[WS_NREG];
    workspace_regions(br, bc, D, mm, sz);
    float *r[WS_NREG];
    for (int i = 0; i < WS_NREG; i++) {
        r[i] = sz[i] ? base : NULL;
        base += sz[i];
    }
    workspace w;
    w.brp = tile_ld(br);
    w.ld = tile_ld(D);
    w.qt = r[0], w.k = r[1], w.v = r[2], w.st = r[3], w.acc = r[4];
    w.m = r[5], w.l = r[6], w.alpha = r[7];
    w.dp = round_up(D, CPU_MM_KP), w.ldkp = round_up(bc, 16), w.ldvp = round_up(D, 16);
    w.lds = tile_ld(bc), w.ldp = round_up(bc, CPU_MM_KP);
    w.qb = (uint16_t *)r[8], w.kp = (uint32_t *)r[9], w.vp = (uint32_t *)r[10];
    w.s = r[11], w.pb = (uint16_t *)r[12], w.kv = (uint16_t *)r[13];
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

/* ---- bf16 storage on a matrix unit (kernels.h cpu_mm_bf16) ----------------------------- */

static int use_mm(const attn_problem *p, const cpu_kernels *kr)
{
    return p->dtype == FLASHC_BF16 && kr->bf16 && p->Sq >= FEW_ROWS;
}

/* The item's Q rows as bf16 into qb (the A operand of S = Q K^T), columns D .. dp and rows
 * rows .. R16(rows) zero. A negative softmax_scale is carried by Q, as in pack_qt (flipping
 * the sign bit is the exact negation). */
static void mm_pack_q(const attn_problem *p, workspace *w, int64_t qoff, int64_t rows)
{
    const uint16_t *q = p->q, sign = p->scale < 0.0f ? 0x8000u : 0u;
    for (int64_t r = 0; r < round_up(rows, 16); r++) {
        uint16_t *dst = w->qb + r * w->dp;
        int64_t d = 0;
        for (; r < rows && d < p->D; d++)
            dst[d] = q[qoff + r * p->sq[1] + d * p->sq[3]] ^ sign;
        for (; d < w->dp; d++)
            dst[d] = 0;
    }
}

/* Rows of a (B, S, H, D) bf16 tensor at off as a row-major pointer: in place when the
 * features are contiguous, else gathered into kv. *ld = its row stride in elements. */
static const uint16_t *mm_rows(const void *base, const int64_t *st, int64_t off, int64_t rows,
                               int64_t D, uint16_t *kv, int64_t *ld)
{
    const uint16_t *x = base;
    if (st[3] == 1) {
        *ld = st[1];
        return x + off;
    }
    for (int64_t r = 0; r < rows; r++)
        for (int64_t d = 0; d < D; d++)
            kv[r * D + d] = x[off + r * st[1] + d * st[3]];
    *ld = D;
    return kv;
}

/* L2 prefetch of the next tile's first rows (see load_tile). */
static void mm_prefetch(const void *base, const int64_t *st, int64_t off, int64_t rows,
                        int64_t D)
{
    const int64_t row_bytes = D * st[3] * 2;
    for (int64_t r = 0; r < rows; r++) {
        const char *nx = (const char *)base + (off + r * st[1]) * 2;
        for (int64_t b = 0; b < row_bytes; b += 64)
            __builtin_prefetch(nx + b, 0, 2);
    }
}

/* The bf16 path takes the item's rows in chunks (kernels.h gemm M), so that a chunk's scores
 * S (MM_ROWS x Bc float32) and probabilities P (bf16) stay in L1 between the two products and
 * the softmax of one chunk sits next to the tile products of the next in the instruction
 * stream. MM_ROWS and MM_DIAG_ROWS are multiples of 32: the AMX block is 2 x 2 tiles of 16
 * rows. On a tile that straddles the causal diagonal the chunks are MM_DIAG_ROWS rows, each
 * against only the keys its last row sees (as straddling_tile). MM_BC: the default keys per
 * tile (more k steps per load and store of the accumulator tiles). */
enum { MM_ROWS = 64, MM_DIAG_ROWS = 32, MM_BC = 192 };
_Static_assert((int)MM_ROWS <= (int)MM_CHUNK && (int)MM_DIAG_ROWS <= (int)MM_CHUNK,
               "the chunk buffers hold a chunk");

/* Product 1: S = Q K^T for the sr query rows from s0 against the first kn keys of the tile,
 * into the chunk's S (w->s), then the causal mask (masked: the tile straddles the diagonal). */
static void mm_scores(const attn_problem *p, const cpu_mm_bf16 *mm, workspace *w, int64_t i0,
                      int64_t s0, int64_t sr, int64_t j0, int64_t kn, int masked)
{
    mm->gemm(sr, kn, p->D, w->qb + s0 * w->dp, w->dp, w->kp, w->ldkp, NULL, w->s, w->lds);
    for (int64_t r = 0; masked && r < sr; r++) {
        const int64_t first = attn_key_end(p, i0 + s0 + r) - j0;
        for (int64_t c = first < 0 ? 0 : first; c < kn; c++)
            w->s[r * w->lds + c] = -INFINITY;
    }
}

/* Product 2: acc = diag(alpha) acc + P V for the sr rows from s0 over kn keys (the chunk's P
 * from mm->softmax, zero-padded to round_up(kn, 32) columns; vp holds exactly kn keys). */
static void mm_pv(const attn_problem *p, const cpu_mm_bf16 *mm, workspace *w, int64_t s0,
                  int64_t sr, int64_t kn)
{
    mm->gemm(sr, p->D, kn, w->pb, w->ldp, w->vp, w->ldvp, w->alpha + s0, w->acc + s0 * w->ld,
             w->ld);
}

/* One K/V tile (keys j0 .. j0 + cols) against the item's rows: pack K and V, then per chunk
 * scores, softmax, P V. V is packed with exactly the keys the chunk sees (kn grows from one
 * chunk to the next on a straddling tile): a key a row must not see then never meets its
 * P = 0 in the product, so a non-finite V there cannot make 0 x inf = NaN. */
static void mm_tile(const attn_problem *p, const cpu_kernels *kr, workspace *w, int64_t b,
                    int64_t hk, int64_t i0, int64_t rows, int64_t j0, int64_t cols, int64_t next)
{
    const cpu_mm_bf16 *mm = kr->bf16;
    const int64_t D = p->D;
    const int64_t koff = b * p->sk[0] + hk * p->sk[2] + j0 * p->sk[1];
    const int64_t voff = b * p->sv[0] + hk * p->sv[2] + j0 * p->sv[1];
    int64_t ldk, ldv;
    const uint16_t *k = mm_rows(p->k, p->sk, koff, cols, D, w->kv, &ldk);
    mm->pack_bt(k, ldk, cols, D, w->kp, w->ldkp);
    const uint16_t *v = mm_rows(p->v, p->sv, voff, cols, D, w->kv, &ldv);
    mm_prefetch(p->k, p->sk, koff + cols * p->sk[1], next, D);
    mm_prefetch(p->v, p->sv, voff + cols * p->sv[1], next, D);

    const float c = positive_scale(p);
    const int full = !p->causal || j0 + cols <= attn_key_end(p, i0);
    const int64_t step = full ? MM_ROWS : MM_DIAG_ROWS;
    int64_t packed = 0; /* keys of V in vp */
    for (int64_t s0 = 0; s0 < rows; s0 += step) {
        const int64_t sr = rows - s0 < step ? rows - s0 : step;
        int64_t kn = full ? cols : attn_key_end(p, i0 + s0 + sr - 1) - j0;
        kn = kn > cols ? cols : kn;
        if (kn <= 0)
            continue;
        mm_scores(p, mm, w, i0, s0, sr, j0, kn, !full);
        mm->softmax(w->s, w->lds, sr, kn, c, w->m + s0, w->l + s0, w->alpha + s0, w->pb, w->ldp);
        if (kn != packed) {
            mm->pack_b(v, ldv, kn, D, w->vp, w->ldvp);
            packed = kn;
        }
        mm_pv(p, mm, w, s0, sr, kn);
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
    const int few = p->Sq < FEW_ROWS, mm = use_mm(p, kr);
    for (int64_t r = 0; r < total; r++) {
        w->m[r] = -INFINITY;
        w->l[r] = 0.0f;
    }
    for (int64_t g = 0; g < nh && kend_max > 0; g++) {
        const int64_t qoff = b * p->sq[0] + (h + g) * p->sq[2] + i0 * p->sq[1];
        if (few)
            load_tile(kr, p->q, p->dtype, p->sq, qoff, rows, D, w->qt + g * rows * D, D, 0);
        else if (mm)
            mm_pack_q(p, w, qoff, rows);
        else
            pack_qt(p, kr, w, qoff, rows);
    }
    memset(w->acc, 0, (size_t)(total * w->ld) * sizeof(float));
    if (mm && kend_max > 0)
        kr->bf16->begin();

    for (int64_t j0 = 0; j0 < kend_max; j0 += bc) {
        /* keys past the block's last visible one are never loaded */
        const int64_t cols = j0 + bc < kend_max ? bc : kend_max - j0;
        const int64_t next = kend_max - (j0 + cols) < cols ? kend_max - (j0 + cols) : cols;
        if (mm) {
            mm_tile(p, kr, w, b, hk, i0, rows, j0, cols, next);
            pairs += nh;
            continue;
        }
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
    if (mm && kend_max > 0)
        kr->bf16->end();

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
    const int mm = use_mm(p, kr);
    if (mm) {
        mm_default_tiles(p, &br);
        bc = MM_BC;
    }
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
    const size_t per_thread = workspace_floats(br * nh, bc, p->D, mm); /* 64 B rows */
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
        workspace w = workspace_at(ws + (size_t)tid * per_thread, br * nh, bc, p->D, mm);
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
