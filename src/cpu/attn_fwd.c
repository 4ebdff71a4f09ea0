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
 * bf16 storage on a matrix unit (the table has kernels.h cpu_mm_bf16: AMX or AVX512-BF16;
 * prefill shapes, Sq >= FEW_ROWS): the same loop nest with S row-major and both products on
 * bf16 operands with float32 accumulation, Br x Bc = 1152 x 192 by default (mm_* below).
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
    int mm;                 /* bf16 storage on a matrix unit (kernels.h cpu_mm_bf16)          */
    int fused;              /* mm: full tiles through cpu_mm_bf16.fwd_tile (0 off, 1, 2 overlap) */
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

/* The bf16 matrix-unit path (mm_tile): Bc = MM_BC keys; Br from MM_BR down to 72 (halving)
 * while there are fewer than 2 items per thread. A tall item divides the K/V packing (and the
 * K/V streaming) per FLOP by Br; measured on the Xeon with AMX, 2 threads, d 128, n 4096,
 * bf16, GFLOP/s at Br x Bc (pre-v2 loop nest): 128 x 192: 562; 288 x 192: 608; 576 x 192: 694;
 * 1152 x 192: 797; 288 x 96: 546; 288 x 384: 525 (bench/RESULTS.md, "CPU bf16 on matrix
 * units"). The rows of an item go through the two products in chunks of MM_ROWS (MM_DIAG_ROWS
 * on a tile that straddles a range edge): a chunk's scores (MM_CHUNK x Bc float32) and
 * probabilities stay in L1 between the products. Multiples of 32: the AMX block is 2 x 2 tiles
 * of 16 rows. */
enum { MM_BR = 1152, MM_BC = 192, MM_ROWS = 64, MM_DIAG_ROWS = 32, MM_CHUNK = 64 };
_Static_assert((int)MM_ROWS <= (int)MM_CHUNK && (int)MM_DIAG_ROWS <= (int)MM_CHUNK &&
                   MM_CHUNK >= 64,
               "the chunk buffers hold a chunk (fwd_tile: two S and two P buffers of 32 rows)");

/* float16 storage keeps the float32 path: converted to bf16 it loses 3 mantissa bits, which
 * breaks the 2x rule (kernels.h); decode (Sq < FEW_ROWS) is memory-bound. */
static int use_mm(const attn_problem *p, const cpu_kernels *kr)
{
    return p->dtype == FLASHC_BF16 && kr->bf16 && p->Sq >= FEW_ROWS;
}

static int64_t rup(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* Where the unit has the fused tile (kernels.h fwd_tile): FLASHC_CPU_AMX_FWD=1 takes the rows
 * of the unit path through it (overlap 0; the straddling tiles' chunks too, with the causal /
 * window mask inside, since 2026-12-03: causal 1.03-1.06x, d 64 / 128, n 2048 / 4096, 2
 * threads), =2 with the next chunk's S product between the softmax rows (overlap 1), =3 with the previous chunk's P V there too
 * (overlap 2); =0: the chunked gemm / softmax / gemm of mm_tile. Unset: 1 where max(D, Dv) >=
 * 64, else 0 (d 64 since 2026-12-02: 1.25-1.43x torch's CPU SDPA against the chunked path's
 * 1.06-1.26x, n 2048 / 4096, same host; d < 64 unmeasured). Read at every call (one getenv beside a whole forward), so one process can time
 * each. The same bits either way. Measured on the Xeon's AMX (bench/amx_phases.c, bench/RESULTS.md
 * "The fused AMX tile"), one key tile of 192 against 1152 rows: d 128 chunked 599 us, fused
 * 548, overlap 1 / 2 656 / 655 (the interleaved tile steps slow the softmax more than they
 * hide); 2 threads at once 616 / 553 / 640 / 648; 384 keys 1134 / 1031; d 64 386 / 400. */
static int mm_fused_choice(const attn_problem *p)
{
    const char *e = getenv("FLASHC_CPU_AMX_FWD");
    if (e && e[0] >= '0' && e[0] <= '3' && !e[1])
        return e[0] - '0';
    return max64(p->D, p->Dv) >= 64;
}

/* Per-thread regions of the matrix-unit path, in floats (each a whole number of 64-byte lines):
 * acc, m/l/alpha/lo/hi, qb, kp, vp, s, pb, kv, vz (struct tiles). */
enum { MM_NREG = 9 };
static void mm_regions(const attn_problem *p, const fwd_plan *pl, int64_t sz[MM_NREG])
{
    const int64_t br = pl->br, bc = pl->bc, dp = rup(p->D, CPU_MM_KP);
    const int64_t ldp = rup(bc, CPU_MM_KP), wide = max64(p->D, p->Dv);
    const int64_t r[MM_NREG] = {
        br * pl->lda,                       /* acc                                    */
        5 * pl->brp,                        /* m, l, alpha, lo, hi                    */
        rup(br, 16) * dp / 2,               /* qb: bf16 Q rows                        */
        dp / 2 * rup(bc, 16),               /* kp: VNNI words                         */
        ldp / 2 * rup(p->Dv, 16),           /* vp: VNNI words                         */
        MM_CHUNK * tile_ld(bc),             /* s: float32 scores of a chunk           */
        (MM_CHUNK + 16) * ldp / 2,          /* pb: bf16 P (+16 rows: 1-row products)  */
        (bc * wide + 1) / 2,                /* kv: a gathered K or V tile, bf16       */
        (bc * p->Dv + 1) / 2,               /* vz: V with a row's hidden keys zeroed  */
    };
    for (int i = 0; i < MM_NREG; i++)
        sz[i] = rup(r[i], 16);
}

static void make_plan(const attn_problem *p, fwd_plan *pl)
{
    memset(pl, 0, sizeof *pl);
    int64_t br, bc;
    default_tiles(p, &br, &bc);
    pl->mm = use_mm(p, cpu_kernels_get());
    if (pl->mm) {
        br = MM_BR, bc = MM_BC;
        while (br >= 128 && p->B * p->Hq * cdiv(p->Sq, br) < 2 * (int64_t)p->threads)
            br /= 2; /* 1152 -> 576 -> 288 -> 144 -> 72 */
    }
    pl->fused = pl->mm && cpu_kernels_get()->bf16->fwd_tile ? mm_fused_choice(p) : 0;
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
    if (pl->mm) {
        int64_t sz[MM_NREG], n = 0;
        mm_regions(p, pl, sz);
        for (int i = 0; i < MM_NREG; i++)
            n += sz[i];
        pl->per_thread = (size_t)n;
    }
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
    /* The matrix-unit path (plan mm; then qt, k, v, st are NULL). dp = round_up(D, 32),
     * ldkp = R16(bc), ldvp = R16(Dv), lds = tile_ld(bc), ldp = round_up(bc, 32); R16 = round
     * up to 16. */
    int64_t dp, ldkp, ldvp, lds, ldp;
    uint16_t *qb;         /* R16(br) x dp  Q rows, bf16; zero columns >= D, rows >= br   */
    uint32_t *kp;         /* dp/2 x ldkp   K tile, VNNI (pack_bt)                            */
    uint32_t *vp;         /* ldp/2 x ldvp  V rows of a chunk, VNNI (pack_b)                   */
    float *s;             /* MM_CHUNK x lds  a chunk's scores                                */
    uint16_t *pb;         /* (MM_CHUNK + 16) x ldp  a chunk's probabilities, bf16            */
    uint16_t *kv;         /* bc x max(D, Dv)  a K or V tile gathered (pages, feature stride)  */
    uint16_t *vz;         /* bc x Dv  V with one row's hidden keys zeroed (non-finite V)     */
} tiles;

static tiles tiles_at(const fwd_plan *pl, const attn_problem *p, float *base)
{
    tiles w;
    memset(&w, 0, sizeof w);
    if (pl->mm) {
        int64_t sz[MM_NREG];
        mm_regions(p, pl, sz);
        float *r[MM_NREG];
        for (int i = 0; i < MM_NREG; i++)
            r[i] = base, base += sz[i];
        w.acc = r[0];
        w.m = r[1], w.l = w.m + pl->brp, w.alpha = w.l + pl->brp;
        w.lo = w.alpha + pl->brp, w.hi = w.lo + pl->brp;
        w.dp = rup(p->D, CPU_MM_KP), w.ldkp = rup(pl->bc, 16), w.ldvp = rup(p->Dv, 16);
        w.lds = tile_ld(pl->bc), w.ldp = rup(pl->bc, CPU_MM_KP);
        w.qb = (uint16_t *)r[2], w.kp = (uint32_t *)r[3], w.vp = (uint32_t *)r[4];
        w.s = r[5], w.pb = (uint16_t *)r[6], w.kv = (uint16_t *)r[7], w.vz = (uint16_t *)r[8];
        return w;
    }
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
    if (p->pages)
        return min64(n, p->page_size - j % p->page_size);
    return n;
}

static void prefetch_kv(const attn_problem *p, const void *base, const int64_t *st, int64_t b,
                        int64_t hk, int64_t j, int64_t next_rows, int64_t n);

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
    prefetch_kv(p, base, st, b, hk, j0 + rows, next_rows, n);
}

/* L2 prefetch of keys [j, j + rows) of KV head hk (n features): see load_kv_tile. */
static void prefetch_kv(const attn_problem *p, const void *base, const int64_t *st, int64_t b,
                        int64_t hk, int64_t j, int64_t next_rows, int64_t n)
{
    const int64_t row_bytes = n * st[3] * (int64_t)flashc_dtype_size(p->dtype);
    for (int64_t r = 0; r < next_rows;) {
        int64_t off;
        const int64_t run = kv_run(p, st, b, j + r, next_rows - r, &off);
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

/* ---- bf16 storage on a matrix unit (kernels.h cpu_mm_bf16) --------------------------------
 *
 * The two products run on bf16 operands with float32 accumulation, S row-major (the units want
 * the reduction dimension contiguous in A and VNNI pairs in B, kernels.h):
 *   Q rows bf16 (packed once per item)      A of  S = Q K^T      (chunk rows x keys, float32)
 *   K tile packed by pack_bt (a transpose)  B of  S = Q K^T
 *   [S = log2e mod(scale S)]                score_mod_row, when softcap / ALiBi / scale 0
 *   P = 2^(c S - m) rounded to bf16         A of  acc = alpha acc + P V   (mm->softmax)
 *   V rows packed by pack_b (row pairs)     B of  acc = alpha acc + P V
 * The softmax stays float32 (m, l in float32, l summed before P is rounded); the LSE, the
 * split partials and the final division are those of the float32 paths.
 *
 * Why every key offset is aligned to 32 from the tile start j0 (a multiple of Bc): the units
 * sum in pairs and 32-key steps, and the softmax sums in 16-lane vectors, so a key's place in
 * those sums must not depend on the block or the chunk that reads it. A chunk's first key is
 * rounded down to such a multiple and its key count up to 16 (the extra keys are masked: -inf
 * scores, P = 0, exact zero terms), so every row's arithmetic depends on its own key range
 * only: the results are the same bits for any Br, hence for any thread count (issue 10 F6).
 * Non-finite V: a masked P entry (0) must never multiply it (0 x inf = NaN); where the V rows
 * of a straddling chunk hold one, each row takes P V against a copy of V whose rows it cannot
 * see are zero (the same terms as on finite V: masked entries add exact zeros). */

/* The item's Q rows as bf16 into qb, columns D .. dp and rows rows .. R16(rows) zero. A
 * negative softmax_scale is carried by Q, as in pack_qt (flipping the sign bit is exact). */
static void mm_pack_q(const item_ctx *x)
{
    const attn_problem *p = x->p;
    tiles *w = x->w;
    const uint16_t *q = p->q, sign = p->scale < 0.0f ? 0x8000u : 0u;
    const int64_t off = attn_q_off(p, p->sq, x->b, x->i0) + x->h * p->sq[2];
    for (int64_t r = 0; r < rup(x->rows, 16); r++) {
        uint16_t *dst = w->qb + r * w->dp;
        int64_t d = 0;
        for (; r < x->rows && d < p->D; d++)
            dst[d] = q[off + r * p->sq[1] + d * p->sq[3]] ^ sign;
        for (; d < w->dp; d++)
            dst[d] = 0;
    }
}

/* Keys [j, j + rows) of KV head hk of sequence b (n features) as row-major bf16: in place when
 * they are one contiguous run with unit feature stride, else gathered into buf (ld n).
 * *ld = the row stride in elements. */
static const uint16_t *mm_kv_rows(const attn_problem *p, const void *base, const int64_t *st,
                                  int64_t b, int64_t hk, int64_t j, int64_t rows, int64_t n,
                                  uint16_t *buf, int64_t *ld)
{
    const uint16_t *x = base;
    int64_t off;
    if (kv_run(p, st, b, j, rows, &off) == rows && st[3] == 1) {
        *ld = st[1];
        return x + off + hk * st[2];
    }
    for (int64_t r = 0; r < rows;) {
        const int64_t run = kv_run(p, st, b, j + r, rows - r, &off);
        off += hk * st[2];
        for (int64_t t = 0; t < run; t++) {
            uint16_t *dst = buf + (r + t) * n;
            const uint16_t *src = x + off + t * st[1];
            if (st[3] == 1)
                memcpy(dst, src, (size_t)n * sizeof *dst);
            else
                for (int64_t d = 0; d < n; d++)
                    dst[d] = src[d * st[3]];
        }
        r += run;
    }
    *ld = n;
    return buf;
}

/* Nonzero when one of rows x n bf16 values (row stride ld) is inf or NaN (exponent all ones). */
static int bf16_nonfinite(const uint16_t *x, int64_t ld, int64_t rows, int64_t n)
{
    for (int64_t r = 0; r < rows; r++) {
        unsigned bad = 0;
        for (int64_t d = 0; d < n; d++)
            bad |= (x[r * ld + d] & 0x7f80u) == 0x7f80u;
        if (bad)
            return 1;
    }
    return 0;
}

/* A tile of keys [ks, ks + cols) (ks - j0 a multiple of 32; K already in kp, V rows at v, ldv)
 * against the item's rows, in chunks: scores, modifier, mask, softmax, P V. full: every row of
 * the block sees every key of the tile. On a straddling tile a chunk of MM_DIAG_ROWS rows
 * reads only keys [u0, u1) (u0 rounded down to 32) that its rows see; a chunk that sees no key
 * keeps its m, l and accumulator unchanged (alpha would be exactly 1). With FLASHC_CPU_AMX_FWD
 * (plan fused) and no modifier, the chunks go through the unit's fused tile instead, the same
 * bits per row: a full tile's rows (a multiple of 16 of them) in one call, a straddling tile's
 * chunks (a multiple of 16 rows each) one call each, with each row's key range as the fused
 * tile's mask (unless the mask would put a P of 0 against an inf/NaN of V: chunked then). */
static void mm_tile(const item_ctx *x, int64_t ks, int64_t cols, int full, const uint16_t *v,
                    int64_t ldv)
{
    const attn_problem *p = x->p;
    const cpu_mm_bf16 *mm = x->kr->bf16;
    tiles *w = x->w;
    const int64_t D = p->D, Dv = p->Dv, lda = x->pl->lda, lds = w->lds, ldp = w->ldp;
    const int64_t a0 = x->i0 + x->sk - x->sq; /* position of the block's first row */
    const int64_t step = full ? MM_ROWS : MM_DIAG_ROWS;
    const int fuse = !x->mod && x->pl->fused && Dv % 16 == 0;
    int64_t pk0 = -1, pk1 = -1; /* keys [pk0, pk1) of the tile are in vp */
    int vbad = -1;              /* V rows hold inf/NaN: asked once, when a mask is first needed */
    int64_t fr1 = 0;            /* a full tile's rows [0, fr1) go through the fused tile */
    cpu_mm_fwd f = {
        .ldq = w->dp, .D = D, .Dv = Dv, .kp = w->kp, .ldkp = w->ldkp, .vp = w->vp,
        .ldvp = w->ldvp, .scale = x->c, .lda = lda, .s = w->s, .lds = lds, .p = w->pb,
        .ldp = ldp, .overlap = x->pl->fused - 1,
    };
    if (fuse && full && x->rows >= 16) {
        mm->pack_b(v, ldv, cols, Dv, w->vp, w->ldvp);
        pk0 = 0, pk1 = cols, fr1 = x->rows / 16 * 16;
        f.q = w->qb, f.rows = fr1, f.cols = cols, f.m = w->m, f.l = w->l, f.alpha = w->alpha;
        f.acc = w->acc;
        mm->fwd_tile(&f);
    }
    for (int64_t s0 = fr1, next; s0 < x->rows; s0 = next) {
        int64_t sr = min64(step, x->rows - s0);
        if (fuse && !full && sr >= 16)
            sr = sr / 16 * 16;
        next = s0 + sr;
        int64_t u0 = 0, u1 = cols, fa = 0, fe = cols, la = 0, le = cols;
        if (!full) {
            row_cols(x, x->i0 + s0, ks, cols, &fa, &fe);
            row_cols(x, x->i0 + s0 + sr - 1, ks, cols, &la, &le);
            u0 = fa / 32 * 32, u1 = max64(fe, le);
            if (u1 <= fa)
                continue;
        }
        const int64_t kn = u1 - u0, kns = rup(kn, 16); /* kns <= R16(bc) <= lds */
        const int masked = !full && !(la <= u0 && fe >= u1);
        if (masked && vbad < 0)
            vbad = bf16_nonfinite(v, ldv, cols, Dv);
        if (fuse && !full && sr % 16 == 0 && (!masked || !vbad)) {
            int32_t lo[MM_DIAG_ROWS], hi[MM_DIAG_ROWS];
            for (int64_t r = 0; masked && r < sr; r++) {
                int64_t a, e;
                row_cols(x, x->i0 + s0 + r, ks + u0, kn, &a, &e);
                lo[r] = (int32_t)a, hi[r] = (int32_t)e;
            }
            if (pk0 != 0 || pk1 != cols) {
                mm->pack_b(v, ldv, cols, Dv, w->vp, w->ldvp);
                pk0 = 0, pk1 = cols;
            }
            f.q = w->qb + s0 * w->dp, f.rows = sr, f.cols = kn, f.kp = w->kp + u0;
            f.vp = w->vp + u0 / 2 * w->ldvp, f.m = w->m + s0, f.l = w->l + s0;
            f.alpha = w->alpha + s0, f.acc = w->acc + s0 * lda;
            f.klo = masked ? lo : NULL, f.khi = masked ? hi : NULL;
            mm->fwd_tile(&f);
            continue;
        }
        float *s = w->s;
        mm->gemm(sr, kn, D, w->qb + s0 * w->dp, w->dp, w->kp + u0, w->ldkp, NULL, s, lds);
        for (int64_t r = 0; x->mod && r < sr; r++)
            x->kr->score_mod_row(s + r * lds, kn, &x->sm, a0 + s0 + r - (ks + u0));
        for (int64_t r = 0; r < sr; r++) {
            float *row = s + r * lds;
            int64_t a = 0, e = kn;
            if (masked) {
                row_cols(x, x->i0 + s0 + r, ks + u0, kn, &a, &e);
                for (int64_t c = 0; c < a; c++)
                    row[c] = -INFINITY;
                w->lo[r] = (float)a, w->hi[r] = (float)e;
            }
            for (int64_t c = e; c < kns; c++)
                row[c] = -INFINITY;
        }
        mm->softmax(s, lds, sr, kns, x->c, w->m + s0, w->l + s0, w->alpha + s0, w->pb, ldp);
        if (!masked || !vbad) {
            if (u0 != pk0 || u1 != pk1) {
                mm->pack_b(v + u0 * ldv, ldv, kn, Dv, w->vp, w->ldvp);
                pk0 = u0, pk1 = u1;
            }
            mm->gemm(sr, Dv, kn, w->pb, ldp, w->vp, w->ldvp, w->alpha + s0, w->acc + s0 * lda,
                     lda);
            continue;
        }
        for (int64_t r = 0; r < sr; r++) { /* each row against V zeroed outside its keys */
            const int64_t a = (int64_t)w->lo[r], e = (int64_t)w->hi[r];
            for (int64_t c = 0; c < kn; c++) {
                uint16_t *dst = w->vz + c * Dv;
                if (c >= a && c < e)
                    memcpy(dst, v + (u0 + c) * ldv, (size_t)Dv * sizeof *dst);
                else
                    memset(dst, 0, (size_t)Dv * sizeof *dst);
            }
            mm->pack_b(w->vz, Dv, kn, Dv, w->vp, w->ldvp);
            mm->gemm(1, Dv, kn, w->pb + r * ldp, ldp, w->vp, w->ldvp, w->alpha + s0 + r,
                     w->acc + (s0 + r) * lda, lda);
        }
        pk0 = pk1 = -1;
    }
}

/* The key loop of an item on the matrix unit: tiles of Bc keys from j0 (a multiple of Bc) over
 * the block's union [klo, khi), each starting at j0 + a multiple of 32 (see above). */
static int64_t mm_keys(const item_ctx *x, int64_t klo, int64_t khi, int64_t lo1, int64_t hi0)
{
    const attn_problem *p = x->p;
    const cpu_mm_bf16 *mm = x->kr->bf16;
    tiles *w = x->w;
    const int64_t bc = x->pl->bc;
    int64_t pairs = 0;
    mm->begin();
    for (int64_t j0 = klo / bc * bc; j0 < khi; j0 += bc) {
        const int64_t ks = j0 + max64(klo - j0, 0) / 32 * 32, ke = min64(j0 + bc, khi);
        const int64_t cols = ke - ks;
        const int64_t next = max64(0, min64(j0 + 2 * bc, khi) - ke);
        int64_t ldk, ldv;
        const uint16_t *k = mm_kv_rows(p, p->k, p->sk, x->b, x->hk, ks, cols, p->D, w->kv, &ldk);
        mm->pack_bt(k, ldk, cols, p->D, w->kp, w->ldkp);
        const uint16_t *v = mm_kv_rows(p, p->v, p->sv, x->b, x->hk, ks, cols, p->Dv, w->kv, &ldv);
        prefetch_kv(p, p->k, p->sk, x->b, x->hk, ke, next, p->D);
        prefetch_kv(p, p->v, p->sv, x->b, x->hk, ke, next, p->Dv);
        mm_tile(x, ks, cols, lo1 <= ks && hi0 >= ke, v, ldv);
        pairs++;
    }
    mm->end();
    return pairs;
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
        else if (pl->mm)
            mm_pack_q(&x);
        else
            pack_qt(&x);
    }
    memset(w->acc, 0, (size_t)(x.total * lda) * sizeof(float));

    int64_t pairs = 0;
    if (pl->mm && khi > klo)
        pairs = mm_keys(&x, klo, khi, lo1, hi0);
    for (int64_t j0 = klo / bc * bc; !pl->mm && j0 < khi; j0 += bc) {
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
