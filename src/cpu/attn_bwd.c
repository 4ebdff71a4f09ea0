/*
 * attn_bwd.c — FlashAttention-2 backward on the CPU (Algorithm 2 of the FA-2 paper): dQ, dK, dV
 * by recomputing each tile of P = exp(S - L) from the forward's log-sum-exp L. P, dP and dS
 * never exist beyond one Br x Bc tile per thread. Serves the whole v2 contract but the KV cache
 * (forward only): dense and varlen layouts, key ranges [lo, hi) (causal, sliding windows),
 * softcap, ALiBi, Dk != Dv, GQA, float32 / bfloat16 / float16 storage.
 *
 * For each visible (Q block i, K block j) pair of a (sequence, query head), over the keys of
 * the K block inside the union of the Q block's key ranges (attn_key_range; the ranges move
 * monotonically with the row, so the union is one interval):
 *   U  = scale Q_i K_j^T                        qk micro-kernel (kernels.h)
 *   S  = cap tanh(U / cap) - slope |a_r - j|    softcap and ALiBi, when set: the table's
 *                                               score_mod_row (vector tanh), 1 - tanh^2
 *                                               kept for dS
 *   dP = dO_i V_j^T                             qk micro-kernel with scale 1
 *   P  = exp(S - L_i), 0 outside a row's range or where the row saw no key (L = -inf)
 *   dS = P * (dP - D_i) * (1 - tanh^2(U / cap)) D_i = rowsum(dO_i * O_i), computed up front;
 *                                               the last factor only under softcap (ALiBi's
 *                                               bias is a constant: no gradient)
 *   dV_j += P^T dO_i,   dK_j += dS^T Q_i,   dQ_i += dS K_j     (scale applied once, at the end)
 * K blocks outside the union of a Q block's key ranges are never visited, nor Q blocks that
 * see no key of a K block; keys outside the union are never read. Inside it, a NaN or Inf key
 * switches dQ += dS K to row-by-row products over each row's own keys (acc_dq), so no row's
 * gradient sees a key outside its range.
 *
 * Tiles: every Q, dO, K and V tile is copied into a per-thread buffer whose leading dimension
 * is an odd number of 64-byte lines (tile_ld), converting bf16/f16 to float32 on the way
 * (kernels.h load_row). Read in place, the rows of a tile sit H x D elements apart, usually a
 * power of two, and fall into a few L1 sets: 16-33% of the time at H x D = 1024 (bench/RESULTS.md
 * "CPU backward v2: tile copies with odd-line leading dimensions"). Sums are float32; dK, dV (and dQ in the split schedule) accumulate in
 * float32 tiles and are rounded to the storage type once.
 *
 * Determinism without float atomics: every output element is one sum in a fixed order that does
 * not depend on the schedule — dK_j and dV_j over (query head of the group, Q block) ascending,
 * dQ_i over K blocks ascending. Two schedules produce exactly these sums:
 *   fused — one work item per (batch, KV head) owns dK, dV and the dQ of its whole query-head
 *           group, so dQ_i accumulates in place in the float32 output as the K blocks advance:
 *           five tile products per pair, but only B * Hkv parallel items. Dense float32 with
 *           unit feature stride in dq only (an output to accumulate into).
 *   split — pass 1 over (sequence, K block, KV head) for dK, dV; pass 2 over (sequence,
 *           Q block, query head) recomputes S, P, dP, dS and accumulates dQ: seven tile
 *           products per pair, parallel over blocks.
 * Both run the same per-element operations in the same order, so the choice (made from the item
 * count and the thread count) changes the speed but not a single bit of the result.
 *
 * bf16 storage on a matrix unit (the table has kernels.h cpu_mm_bf16: AMX; AVX512-BF16 only by
 * FLASHC_CPU_BWD_MM=1, see make_plan): the five products on bf16 operands with float32
 * accumulation, P and dS split into two bf16 halves for theirs, in fused and split schedules
 * of their own (mm_* below).
 *
 * Scratch (attn_scratch, sized by cpu_attn_bwd_workspace: the caller's workspace or the core's
 * one allocation): D (Hq floats per query row), the varlen block offsets (2 (B + 1) int64), and
 * per-thread tiles O(threads * ((Br + Bc) (D + Dv) + Br * Bc)); nothing of size Sq x Sk.
 */
#include "internal.h"
#include "kernels.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
static inline int thread_id(void) { return omp_get_thread_num(); }
#else
static inline int thread_id(void) { return 0; }
#endif

enum { DEFAULT_BR = 64, DEFAULT_BC = 64 };

flashc_status cpu_attn_bwd_supports(const attn_problem *p)
{
    if (p->layout == ATTN_KVCACHE)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "flashc_attn_bwd: the KV-cache layout is forward only");
    if (p->dtype != FLASHC_F32 && p->dtype != FLASHC_BF16 && p->dtype != FLASHC_F16)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED_DTYPE,
                            "flashc_attn_bwd: the CPU backend supports float32, bfloat16 and "
                            "float16 storage (%s given)",
                            flashc__dtype_name(p->dtype));
    return FLASHC_OK;
}

/* Leading dimension of the per-thread tiles: whole 64-byte lines, an odd number of them, so the
 * rows of a tile spread over every L1 set (the forward's rule, attn_fwd.c). */
static int64_t tile_ld(int64_t n) { return ((n + 15) / 16 | 1) * 16; }

static const void *elem_ptr(const void *base, flashc_dtype dt, int64_t off)
{
    return (const char *)base + off * (int64_t)flashc_dtype_size(dt);
}

/* Copies rows x n elements of a tensor (row r at off + r * st[1], feature stride st[3]) into buf
 * (leading dimension ld) as float32. off is the element offset of row 0. */
static void load_tile(const cpu_kernels *kr, const void *base, flashc_dtype dt, const int64_t *st,
                      int64_t off, int64_t rows, int64_t n, float *buf, int64_t ld)
{
    for (int64_t r = 0; r < rows; r++) {
        if (st[3] == 1)
            kr->load_row(elem_ptr(base, dt, off + r * st[1]), dt, n, buf + r * ld);
        else
            for (int64_t d = 0; d < n; d++)
                buf[r * ld + d] = flashc__load(base, dt, off + r * st[1] + d * st[3]);
    }
}

/* Stores n float32 values times scale at element offset off (feature stride s), rounded once. */
static void store_vec(const cpu_kernels *kr, const float *src, float scale, int64_t n, void *base,
                      flashc_dtype dt, int64_t off, int64_t s)
{
    if (s == 1)
        kr->store_row(src, scale, n, (void *)elem_ptr(base, dt, off), dt);
    else
        for (int64_t d = 0; d < n; d++)
            flashc__store(base, dt, off + d * s, src[d] * scale);
}

/* ---- the plan: tiles, schedule, scratch --------------------------------------------------- */

typedef struct bwd_plan {
    int64_t br, bc;           /* tiles used (clamped to the longest sequence)                  */
    int64_t br_req, bc_req;   /* as requested or defaulted, for the stats                      */
    int fused;
    int64_t nkb, nqb;         /* K and Q blocks summed over the sequences                      */
    int64_t items1, items2;   /* pass 1 and pass 2 work items                                  */
    int slots;                /* per-thread tile sets                                          */
    int64_t ldd, lddv, lds;   /* leading dims: D-wide, Dv-wide and Bc-wide tiles               */
    size_t per_thread;        /* floats per tile set (whole cache lines)                       */
    int mm;                   /* bf16 storage on a matrix unit (kernels.h cpu_mm_bf16)          */
    int64_t mm_sq;            /* mm fused: the longest sequence's query rows (dQ accumulators)  */
    int mm_single;            /* mm bits: 1 P, 2 dS rounded once, not split (measurements:
                               * FLASHC_CPU_BWD_MM=2 sets both, =3 the dS bit)                 */
    void (*split)(const float *, int64_t, int64_t, int64_t, uint16_t *, int64_t, uint32_t *,
                  int64_t);       /* mm: the unit's split, or its split_cvt (same bits)            */
    int fuse;                 /* mm: P, dS and their split halves in one pass where the unit
                               * has it (kernels.h p_ds_split; mm_pair)                         */
    int batch;                /* mm fused: up to this many consecutive tile pairs' dV^T, dK^T
                               * products in one pass over their C tiles (mm_flush); 1: none    */
    size_t di_floats;         /* D_i entries                                                   */
    size_t sizes[3];          /* scratch pieces: D, block offsets, tile sets                   */
    const attn_problem *p;
} bwd_plan;

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static size_t lines(size_t floats) { return (floats + 15) / 16 * 16; }

static size_t tile_floats(int64_t br, int64_t bc, int64_t ldd, int64_t lddv, int64_t lds)
{
    return lines((size_t)(br * ldd)) + lines((size_t)(br * lddv)) /* q, dout  */
           + lines((size_t)(bc * ldd)) + lines((size_t)(bc * lddv)) /* k, v    */
           + 3 * lines((size_t)(br * lds))                          /* s, dp, g */
           + lines((size_t)(bc * ldd)) + lines((size_t)(bc * lddv)) /* dk, dv  */
           + lines((size_t)(br * ldd))                              /* dq      */
           + 2 * lines((size_t)br)                                  /* lse, di */
           + 2 * lines((size_t)(2 * br))                            /* lo, hi (int64) */
           + lines((size_t)(br > bc ? br : bc));                    /* ones    */
}

static int64_t rup(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* The bf16 operands of one Q block (qb, dob, qt, dot; layouts in bwd_ws), in floats. */
static int64_t mm_qblock_floats(const attn_problem *p, int64_t br)
{
    const int64_t br16 = rup(br, 16), br32 = rup(br, CPU_MM_KP);
    return (int64_t)(lines((size_t)(br16 * rup(p->D, CPU_MM_KP) / 2)) +
                     lines((size_t)(br16 * rup(p->Dv, CPU_MM_KP) / 2)) +
                     lines((size_t)(rup(p->D, 16) * br32)) + lines((size_t)(rup(p->Dv, 16) * br32)));
}

/* The fused item's cache of every Q block's operands (qc in bwd_ws): packed once per item
 * instead of once per tile pair, where it takes at most this many bytes a thread; else none. */
enum { MM_QCACHE_MAX = 64 << 20 };
/* mm fused: at most MM_BATCH_MAX pairs' dV^T, dK^T products a pass (plan batch); by default
 * MM_BATCH, fewer where the pairs' split P (and as much dS) would take more than
 * MM_BATCH_BYTES. */
enum { MM_BATCH = 4, MM_BATCH_MAX = 8, MM_BATCH_BYTES = 256 << 10 };
static int64_t mm_qcache_floats(const attn_problem *p, int64_t br, int64_t sq)
{
    const int64_t f = p->Hq / p->Hkv * cdiv(sq, br) * mm_qblock_floats(p, br);
    return f * 4 <= MM_QCACHE_MAX ? f : 0;
}

/* The matrix-unit regions of a tile set, in floats (bwd_ws, the mm part; layouts there). */
enum { MM_NREG = 18 };
static void mm_regions(const attn_problem *p, int64_t br, int64_t bc, int64_t sq, int batch,
                       int64_t sz[MM_NREG])
{
    const int64_t dp = rup(p->D, CPU_MM_KP), dvp = rup(p->Dv, CPU_MM_KP);
    const int64_t br16 = rup(br, 16), br32 = rup(br, CPU_MM_KP), bc16 = rup(bc, 16);
    const int64_t bc32 = rup(bc, CPU_MM_KP), d16 = rup(p->D, 16), dv16 = rup(p->Dv, 16);
    const int64_t wide = rup(p->D > p->Dv ? p->D : p->Dv, CPU_MM_KP);
    const int64_t most = br > bc ? br : bc, most2 = p->D > p->Dv ? p->D : p->Dv;
    const int64_t r[MM_NREG] = {
        br16 * dp / 2, br16 * dvp / 2,          /* qb, dob                                  */
        d16 * br32, dv16 * br32,                /* qt, dot: 2 R32(br) bf16 a row            */
        dp / 2 * (bc16 + 16), dvp / 2 * (bc16 + 16), /* kp, vp                              */
        bc32 * d16,                             /* kb: 2 R32(bc) / 2 pair-rows              */
        batch * br32 * bc16, batch * br32 * bc16, /* pb, dsp: 2 R32(br) / 2 pair-rows a pair */
        br16 * bc32,                            /* dsa: 2 R32(bc) bf16 a row                */
        bc * wide / 2, bc * wide / 2,           /* kh, vh                                   */
        p->D * tile_ld(bc), p->Dv * tile_ld(bc), /* dkt, dvt                                */
        rup(most > most2 ? most : most2, 16),   /* mones                                    */
        bc,                                     /* kbad (int32)                             */
        p->Hq / p->Hkv * sq * tile_ld(p->D),    /* dqa                                      */
        mm_qcache_floats(p, br, sq),            /* qc                                       */
    };
    for (int i = 0; i < MM_NREG; i++)
        sz[i] = (int64_t)lines((size_t)r[i]);
}

static void make_plan(const attn_problem *p, bwd_plan *pl)
{
    memset(pl, 0, sizeof *pl);
    pl->p = p;
    /* The matrix-unit backward (mm_*) for bf16 storage where the table has a unit.
     * FLASHC_CPU_BWD_MM (read at every call): 0 off; 1 wherever the table has a unit; 2 as 1
     * with P and dS rounded to bf16 once instead of split, 3 with dS alone rounded once (5 or 6
     * products instead of 8: faster, but 2 fails the 2x rule in some small cases, e.g. seeds 7
     * and 20 of test_attn_bwd_v2 on bf16ref: measurements, never a default); ":BRxBC" after the
     * digit sets its tiles where the call gives none (a tuning knob for the bench). Unset: on
     * for every shape (the choice never depends on the thread count, so neither do the bits)
     * on AMX and the scalar model, and on vdpbf16ps only where it runs at the FMA's instruction
     * rate (cpu_dpbf16_full_rate: AMD). The H200 host's Xeon, 2026-12-02, d 128 / 64, n 1024 /
     * 2048: AMX 1.5-1.9x the float32 backward and 2.0-2.6x the float32 path on bf16 storage,
     * vdpbf16ps 0.56x the float32 backward; a Zen 4, 2026-12-05, the same shapes causal and
     * not, one thread's CPU time: vdpbf16ps 1.28-1.44x the float32 backward, 1.9-2.1x the
     * float32 path (bench/RESULTS.md, "avx512bf16 on Zen 4"). */
    const char *opt = getenv("FLASHC_CPU_BWD_MM");
    const cpu_mm_bf16 *unit = p->dtype == FLASHC_BF16 ? cpu_kernels_get()->bf16 : NULL;
    if (opt && opt[0] >= '0' && opt[0] <= '3')
        pl->mm = unit && opt[0] != '0';
    else
        pl->mm = unit && (strcmp(unit->unit, "avx512bf16") != 0 || cpu_dpbf16_full_rate());
    pl->mm_single = !pl->mm || !opt ? 0 : opt[0] == '2' ? 3 : opt[0] == '3' ? 2 : 0;
    /* P and dS into their bf16 hi + lo operands: the unit's split_cvt (vcvtne2ps2bf16) where it
     * has one, the same bits as split (kernels.h; test_cpu_kernels' test_mm_split); the default
     * since 2026-12-04 (bench/RESULTS.md, helper amx9: 1.01-1.12x on the dev Xeon, geometric mean
     * 1.03-1.06x on the H200 host's). FLASHC_CPU_BWD_SPLIT=0 (read at every call) takes split. */
    if (pl->mm) {
        const char *sp = getenv("FLASHC_CPU_BWD_SPLIT");
        pl->split = (sp && sp[0] == '0') || !unit->split_cvt ? unit->split : unit->split_cvt;
        /* FLASHC_CPU_BWD_FUSE=0 (read at every call): p_ds, then split, as before p_ds_split
         * (the same bits; for measurements) */
        const char *fu = getenv("FLASHC_CPU_BWD_FUSE");
        pl->fuse = unit->p_ds_split && !(fu && fu[0] == '0');
    }
    /* The unit's tiles: 128 keys, 128 query rows where max(D, Dv) >= 128, else 64: the per-pair
     * Q-side work (pack_at of Q and dO, dQ's C round trip) spreads over twice the keys of the
     * float32 path's 64 x 64 (bench/RESULTS.md, issue 16: d 128 n 2048, 64 x 64 1.71x the
     * float32 backward, 128 x 128 2.46x; d 64: 64 x 128 1.82x against 1.59x). 256 keys
     * (FLASHC_CPU_BWD_MM=1:128x256, 1:64x256) give these tiles' bits (mm_seg_len). On the H200
     * host's Xeon (2026-12-04, bench/gpu/s10_amx12.sh, two passes, 2 threads, n 1k-4k, causal
     * and not; bench/RESULTS.md, amx12): at d 64, 128 x 256 tiles 1.01-1.52x the 64 x 128 ones
     * (geometric mean 1.145x; 64 x 256, same bits as 64 x 128, 1.086x, min 0.95): the default
     * below d 128 (other bits, the same hi + lo split, within the 2x rule); at d 128, 128 x 256
     * 0.96-1.16x (mean 1.057x, min 0.957): 128 x 128 stays. */
    /* Up to 1024 query rows (the longest sequence), 64 x 128: at n 512 / 1024 the causal
     * diagonal's half-empty tiles and the per-block work of too few blocks outweigh the wider
     * tiles' fewer passes over Q (the dev Xeon, 2026-12-04, 1 thread, paired medians against the
     * tiles above: d 64 causal 1.15 / 1.06 at n 512 / 1024, d 128 causal 1.10 / 1.05,
     * non-causal 1.01-1.04; at n 2048 d 64 non-causal 0.90: bench/RESULTS.md, "64-row tiles"). */
    const int wide = (p->D > p->Dv ? p->D : p->Dv) >= 128, small = p->Sq <= 1024;
    const long long mbr = small ? 64 : 128, mbc = wide || small ? 128 : 256;
    long long tbr = mbr, tbc = mbc;
    if (pl->mm && opt && opt[0] && opt[1] == ':' &&
        (sscanf(opt + 2, "%lldx%lld", &tbr, &tbc) != 2 || tbr < 1 || tbc < 1 || tbr > 1024 ||
         tbc > 1024))
        tbr = mbr, tbc = mbc;
    int64_t br = p->br ? p->br : (pl->mm ? tbr : DEFAULT_BR);
    int64_t bc = p->bc ? p->bc : (pl->mm ? tbc : DEFAULT_BC);
    pl->br_req = br, pl->bc_req = bc;
    if (br > p->Sq) /* a tile never needs to be larger than the longest sequence */
        br = p->Sq;
    if (bc > p->Sk)
        bc = p->Sk;
    pl->br = br = br < 1 ? 1 : br;
    pl->bc = bc = bc < 1 ? 1 : bc;
    for (int64_t b = 0; b < p->B; b++) {
        int64_t sq, sk;
        attn_seqlens(p, b, &sq, &sk);
        pl->nqb += cdiv(sq, br);
        pl->nkb += cdiv(sk, bc);
    }
    const int64_t kv_heads = p->B * p->Hkv;
    const int threads = p->threads < 1 ? 1 : p->threads;
    /* Fused when the (batch, KV head) items alone balance the threads and dq rows are float32
     * rows to accumulate into; otherwise split, parallel over blocks. */
    pl->fused = p->layout == ATTN_DENSE && p->dtype == FLASHC_F32 && p->sdq[3] == 1 &&
                (kv_heads % threads == 0 || kv_heads >= 4 * threads);
    /* mm: its fused schedule (mm_kv_head, dQ accumulated in the workspace) on the same rule,
     * else its split one (mm_dkdv_block, mm_dq_block): the same sums, the same bits */
    if (pl->mm)
        pl->fused = kv_heads % threads == 0 || kv_heads >= 4 * threads;
    if (pl->mm && pl->fused) {
        for (int64_t b = 0; b < p->B; b++) {
            int64_t sq, sk;
            attn_seqlens(p, b, &sq, &sk);
            pl->mm_sq = sq > pl->mm_sq ? sq : pl->mm_sq;
        }
    }
    /* mm fused, where the unit adds into C in place (kernels.h gemm_acc_segs: AMX): the dV^T,
     * dK^T products of up to MM_BATCH consecutive pairs with the same keys in one pass over
     * their C tiles, the bits of one gemm a pair (so the split schedule's stay the same): a
     * C tile's load, drain and store are paid once a batch, not once a pair. Measured on an
     * AMX Xeon (bench/RESULTS.md, "Session of 2026-12-07, night", 1 thread, same bits): 4
     * pairs 1.04-1.06x at 64 x 128 and 128 x 128 tiles, but 0.96x at 128 x 256 (d 64 n 2048,
     * where 4 pairs' P take 512 KiB; 8 pairs at 128 x 128, the same bytes, 0.985x) and 2 pairs
     * there 1.00x: so at most MM_BATCH_BYTES of split P a batch. FLASHC_CPU_BWD_BATCH=N (read
     * at every call, 1 .. MM_BATCH_MAX, no byte cap; 1 = none) for measurements. Only with
     * the Q cache (mm_qcache_floats): a batch keeps its pairs' A operands in their slots, so
     * without it the larger pb, dsp would never be used. */
    pl->batch = 1;
    if (pl->mm && pl->fused && !pl->mm_single && unit->gemm_acc_segs &&
        mm_qcache_floats(p, br, pl->mm_sq)) {
        const char *bt = getenv("FLASHC_CPU_BWD_BATCH");
        const int64_t pair = rup(br, CPU_MM_KP) * rup(bc, 16) * 4; /* bytes of one pair's P */
        const int64_t fit = MM_BATCH_BYTES / pair;
        const int64_t v = bt && bt[0] ? atoi(bt) : fit < MM_BATCH ? fit : MM_BATCH;
        pl->batch = v < 1 ? 1 : v > MM_BATCH_MAX ? MM_BATCH_MAX : (int)v;
    }
    pl->items1 = pl->fused ? kv_heads : pl->nkb * p->Hkv;
    pl->items2 = pl->fused ? 0 : pl->nqb * p->Hq;
    const int64_t most = pl->items1 > pl->items2 ? pl->items1 : pl->items2;
    pl->slots = most < threads ? (int)(most < 1 ? 1 : most) : threads;
    pl->ldd = tile_ld(p->D), pl->lddv = tile_ld(p->Dv), pl->lds = tile_ld(bc);
    pl->per_thread = tile_floats(br, bc, pl->ldd, pl->lddv, pl->lds);
    if (pl->mm) {
        int64_t sz[MM_NREG];
        mm_regions(p, br, bc, pl->mm_sq, pl->batch, sz);
        for (int i = 0; i < MM_NREG; i++)
            pl->per_thread += (size_t)sz[i];
    }
    pl->di_floats = (size_t)p->Hq * (size_t)(p->layout == ATTN_VARLEN ? p->total_q
                                                                        : p->B * p->Sq);
    pl->sizes[0] = pl->di_floats * sizeof(float);
    pl->sizes[1] = p->layout == ATTN_VARLEN ? 2 * (size_t)(p->B + 1) * sizeof(int64_t) : 0;
    pl->sizes[2] = (size_t)pl->slots * pl->per_thread * sizeof(float);
}

size_t cpu_attn_bwd_workspace(const attn_problem *p)
{
    bwd_plan pl;
    make_plan(p, &pl);
    return attn_scratch_bytes(3, pl.sizes);
}

/* ---- per-thread tiles --------------------------------------------------------------------- */

typedef struct bwd_ws {
    float *q, *dout;        /* br x ldd, br x lddv: the Q block's Q and dO as float32          */
    float *k, *v;           /* bc x ldd, bc x lddv: the K block's K and V                      */
    float *s, *dp, *g;      /* br x lds: U then S then P; dP then dS; softcap's 1 - tanh^2     */
    float *dk, *dv;         /* bc x ldd, bc x lddv: accumulators of the current K block       */
    float *dq;              /* br x ldd: accumulator of the current Q block (split pass 2)     */
    float *lse, *di;        /* br: L and D of the Q block's rows                               */
    int64_t *lo, *hi;       /* br: each row's key range                                        */
    float *ones;            /* max(br, bc) 1s: the row scale of an accumulating gemm / pv      */
    /* The matrix-unit path (plan mm): bf16 operands, VNNI-packed B operands, split P and dS
     * (kernels.h); leading dimensions in elements / words. R16 / R32: rounded up to 16 / 32. */
    int64_t ldqb, dvp, ldt2, ldkp, ldkb, ldpb, ldds, ldh, ldt;
    uint16_t *qb, *dob;     /* R16(br) x ldqb, x dvp: Q, dO rows (A of S, dP); zero padding     */
    uint16_t *qt, *dot;     /* R16(D), R16(Dv) x ldt2: [Q^T | Q^T], [dO^T | dO^T] (pack_at: the
                             * A of dK^T, dV^T)                                                */
    uint32_t *kp, *vp;      /* K^T, V^T of the K block (pack_bt: B of S = Q K^T, dP = dO V^T)  */
    uint32_t *kb;           /* [K; K] of the pair's keys (pack_b twice: B of dQ += dS K)       */
    uint32_t *pb, *dsp;     /* P, dS split as B (of dV^T += dO^T P, dK^T += Q^T dS)            */
    uint16_t *dsa;          /* dS split as A (of dQ)                                           */
    uint16_t *kh, *vh;      /* bc x ldh: the K block's K and V rows as bf16                    */
    float *dkt, *dvt;       /* D x ldt, Dv x ldt: dK^T, dV^T of the K block (float32)           */
    float *mones;           /* 1s for every row count of the mm products                       */
    int32_t *kbad;          /* bc: 1 where the block's key row holds a NaN or Inf             */
    float *dqa;             /* group x mm_sq rows x ldd: the item's dQ accumulators            */
    float *qc;              /* NULL, or (fused) the operands of the item's Q blocks, one slot of
                             * qblk floats per (head of the group, Q block): qb, dob, qt, dot   */
    int64_t qblk, qnb;      /* floats a slot, Q blocks a head                                  */
    int64_t qoff[3];        /* dob, qt, dot in a slot (floats; qb at 0: mm_qblock_floats)      */
    uint16_t *qb0, *dob0, *qt0, *dot0; /* the tile set's own qb, dob, qt, dot                 */
    int64_t kb_kc, kb_n;    /* the keys kb holds (first, count); kb_n 0: none                  */
    int nb;                 /* pairs waiting for their dV^T, dK^T products (mm_flush): their P,
                             * dS split at pb, dsp + s R32(br) ldpb, their A operands bqt[s],
                             * bdot[s] (cache slots), keys [b_kc, b_kc + b_n) of the K block  */
    int64_t b_kc, b_n;
    const uint16_t *bqt[MM_BATCH_MAX], *bdot[MM_BATCH_MAX];
} bwd_ws;

/* The next piece of n floats of a tile set (whole cache lines, so pieces never share one). */
static float *take(float **x, int64_t n)
{
    float *piece = *x;
    *x += lines((size_t)n);
    return piece;
}

static bwd_ws ws_at(float *base, const bwd_plan *pl)
{
    const int64_t br = pl->br, bc = pl->bc;
    bwd_ws w;
    float *x = base;
    w.q = take(&x, br * pl->ldd);
    w.dout = take(&x, br * pl->lddv);
    w.k = take(&x, bc * pl->ldd);
    w.v = take(&x, bc * pl->lddv);
    w.s = take(&x, br * pl->lds);
    w.dp = take(&x, br * pl->lds);
    w.g = take(&x, br * pl->lds);
    w.dk = take(&x, bc * pl->ldd);
    w.dv = take(&x, bc * pl->lddv);
    w.dq = take(&x, br * pl->ldd);
    w.lse = take(&x, br);
    w.di = take(&x, br);
    w.lo = (int64_t *)(void *)take(&x, 2 * br);
    w.hi = (int64_t *)(void *)take(&x, 2 * br);
    w.ones = take(&x, br > bc ? br : bc);
    for (int64_t r = 0; r < (br > bc ? br : bc); r++)
        w.ones[r] = 1.0f;
    if (pl->mm) {
        int64_t sz[MM_NREG];
        mm_regions(pl->p, br, bc, pl->mm_sq, pl->batch, sz);
        void *r[MM_NREG];
        for (int i = 0; i < MM_NREG; i++)
            r[i] = take(&x, sz[i]);
        const attn_problem *p = pl->p;
        const int64_t wide = p->D > p->Dv ? p->D : p->Dv;
        w.ldqb = rup(p->D, CPU_MM_KP), w.dvp = rup(p->Dv, CPU_MM_KP);
        w.ldt2 = 2 * rup(br, CPU_MM_KP), w.ldkp = rup(bc, 16) + 16, w.ldkb = rup(p->D, 16);
        w.ldpb = rup(bc, 16), w.ldds = 2 * rup(bc, CPU_MM_KP), w.ldh = rup(wide, CPU_MM_KP);
        w.ldt = tile_ld(bc);
        w.qb = r[0], w.dob = r[1], w.qt = r[2], w.dot = r[3], w.kp = r[4], w.vp = r[5];
        w.kb = r[6], w.pb = r[7], w.dsp = r[8], w.dsa = r[9], w.kh = r[10], w.vh = r[11];
        w.dkt = r[12], w.dvt = r[13], w.mones = r[14], w.kbad = r[15], w.dqa = r[16];
        w.qc = sz[17] ? r[17] : NULL;
        w.qblk = mm_qblock_floats(p, br), w.qnb = pl->mm_sq ? cdiv(pl->mm_sq, br) : 0;
        w.qoff[0] = (int64_t)lines((size_t)(rup(br, 16) * w.ldqb / 2));
        w.qoff[1] = w.qoff[0] + (int64_t)lines((size_t)(rup(br, 16) * w.dvp / 2));
        w.qoff[2] = w.qoff[1] + (int64_t)lines((size_t)(rup(p->D, 16) * w.ldt2 / 2));
        w.qb0 = w.qb, w.dob0 = w.dob, w.qt0 = w.qt, w.dot0 = w.dot;
        for (int64_t i = 0; i < sz[14]; i++)
            w.mones[i] = 1.0f;
        w.kb_kc = w.kb_n = 0;
        w.nb = 0;
    }
    return w;
}

/* ---- sequences and blocks ----------------------------------------------------------------- */

/* The call's shared read-only state. */
typedef struct bwd_ctx {
    const attn_problem *p;
    const cpu_kernels *kr;
    const bwd_plan *pl;
    const float *di;          /* D_i, at di_off                                               */
    const int64_t *kstart;    /* varlen: first global K block of sequence b (B + 1 entries)   */
    const int64_t *qstart;    /* ... and Q block                                              */
} bwd_ctx;

/* Index of D_i of (sequence b, head h, row i): dense [b][h][i], varlen [h][packed row]. */
static int64_t di_off(const attn_problem *p, int64_t b, int64_t h, int64_t i)
{
    if (p->layout == ATTN_VARLEN)
        return h * p->total_q + (int64_t)p->cu_q[b] + i;
    return (b * p->Hq + h) * p->Sq + i;
}

/* The union [*lo, *hi) of the key ranges of rows [i0, i0 + rows) of a sequence (sq, sk): the
 * ranges move monotonically with the row, so the first and last rows bound it (the rule of
 * attn_tile_pairs, whose count the stats match). Empty when *lo >= *hi. */
static void block_union(const attn_problem *p, int64_t sq, int64_t sk, int64_t i0, int64_t rows,
                        int64_t *lo, int64_t *hi)
{
    int64_t lo0, hi0, lo1, hi1;
    attn_key_range(p, sq, sk, i0, &lo0, &hi0);
    attn_key_range(p, sq, sk, i0 + rows - 1, &lo1, &hi1);
    *lo = lo0 < lo1 ? lo0 : lo1;
    *hi = hi0 > hi1 ? hi0 : hi1;
}

/* What a tile pair needs of a Q block: rows [i0, i0 + rows) of query head h in sequence b
 * (lengths sq, sk); its tiles and per-row data live in the thread's bwd_ws. */
typedef struct qblock {
    int64_t b, h, i0, rows, sq, sk;
    int64_t ulo, uhi; /* union of the rows' key ranges */
} qblock;

static qblock qblock_at(const attn_problem *p, int64_t b, int64_t h, int64_t i0, int64_t rows,
                        int64_t sq, int64_t sk)
{
    qblock qb = {.b = b, .h = h, .i0 = i0, .rows = rows, .sq = sq, .sk = sk};
    block_union(p, sq, sk, i0, rows, &qb.ulo, &qb.uhi);
    return qb;
}

/* The keys [*jlo, *jhi) of K block [j0, j0 + cols) that the Q block may see; 0 when none. */
static int pair_keys(const qblock *qb, int64_t j0, int64_t cols, int64_t *jlo, int64_t *jhi)
{
    *jlo = qb->ulo > j0 ? qb->ulo : j0;
    *jhi = qb->uhi < j0 + cols ? qb->uhi : j0 + cols;
    return *jhi > *jlo;
}

static void load_qblock(const bwd_ctx *c, bwd_ws *w, const qblock *qb)
{
    const attn_problem *p = c->p;
    const int64_t rows = qb->rows;
    load_tile(c->kr, p->q, p->dtype, p->sq,
              attn_q_off(p, p->sq, qb->b, qb->i0) + qb->h * p->sq[2], rows, p->D, w->q,
              c->pl->ldd);
    load_tile(c->kr, p->dout, p->dtype, p->sdo,
              attn_q_off(p, p->sdo, qb->b, qb->i0) + qb->h * p->sdo[2], rows, p->Dv, w->dout,
              c->pl->lddv);
    for (int64_t r = 0; r < rows; r++) {
        const int64_t i = qb->i0 + r;
        w->lse[r] = p->lse[attn_lse_off(p, qb->b, qb->h, i)];
        w->di[r] = c->di[di_off(p, qb->b, qb->h, i)];
        attn_key_range(p, qb->sq, qb->sk, i, &w->lo[r], &w->hi[r]);
        if (w->lse[r] == -INFINITY) /* a row that saw no key: zero gradients */
            w->hi[r] = w->lo[r];
    }
}

/* K and V rows [j0, j0 + cols) of KV head hk in sequence b into w->k, w->v. */
static void load_kblock(const bwd_ctx *c, bwd_ws *w, int64_t b, int64_t hk, int64_t j0,
                        int64_t cols)
{
    const attn_problem *p = c->p;
    load_tile(c->kr, p->k, p->dtype, p->sk, attn_kv_off(p, p->sk, b, j0) + hk * p->sk[2], cols,
              p->D, w->k, c->pl->ldd);
    load_tile(c->kr, p->v, p->dtype, p->sv, attn_kv_off(p, p->sv, b, j0) + hk * p->sv[2], cols,
              p->Dv, w->v, c->pl->lddv);
}

/* ---- one tile pair ------------------------------------------------------------------------ */

/* Softcap on n raw scores u in place through the table's vector tanh (score_mod_row):
 * s = cap tanh(u / cap), and g = 1 - tanh^2 = 1 - (s / cap)^2, the derivative dS needs. */
static void softcap_row(const cpu_kernels *kr, float *s, float *g, int64_t n, float cap)
{
    const cpu_score_mod mod = {.scale = 1.0f, .softcap = cap, .slope = 0.0f, .out_scale = 1.0f};
    kr->score_mod_row(s, n, &mod, 0);
    const float inv = 1.0f / cap;
    for (int64_t c = 0; c < n; c++) {
        const float t = s[c] * inv;
        g[c] = 1.0f - t * t;
    }
}

/* P into w->s and dS into w->dp (rows x n, leading dim lds) for the Q block against keys
 * [jlo, jlo + n) of the loaded K block (which starts at key j0). mm with fz (its pointers
 * filled in by the caller) and no score modifier: P and dS straight into fz's split operands
 * instead (kernels.h p_ds_split), w->s and w->dp only read (but dS with fz->keep_ds); returns 1
 * then, else 0. */
static int tile_p_ds(const bwd_ctx *c, bwd_ws *w, const qblock *qb, int64_t j0, int64_t jlo,
                     int64_t n, const cpu_mm_p_ds_split *fz)
{
    const attn_problem *p = c->p;
    const cpu_kernels *kr = c->kr;
    const int64_t rows = qb->rows, lds = c->pl->lds, kc = jlo - j0;
    const float cap = p->softcap;
    const float slope = attn_alibi_slope(p, qb->b, qb->h);
    if (c->pl->mm) { /* kp, vp: columns kc .. kc + R16(n) stay inside ldkp = R16(bc) + 16 */
        kr->bf16->gemm(rows, n, p->D, w->qb, w->ldqb, w->kp + kc, w->ldkp, NULL, w->s, lds);
        kr->bf16->gemm(rows, n, p->Dv, w->dob, w->dvp, w->vp + kc, w->ldkp, NULL, w->dp, lds);
        if (cap <= 0.0f && !p->alibi) { /* the scale, P and dS in one pass */
            if (fz) { /* and their split halves */
                kr->bf16->p_ds_split(fz);
                return 1;
            }
            kr->bf16->p_ds(w->s, w->dp, NULL, lds, rows, n, p->scale, w->lse, w->di, w->lo,
                           w->hi, jlo);
            return 0;
        }
        for (int64_t r = 0; r < rows; r++)
            for (int64_t x = 0; x < n; x++)
                w->s[r * lds + x] *= p->scale;
    } else {
        kr->qk(w->q, c->pl->ldd, w->k + kc * c->pl->ldd, c->pl->ldd, rows, n, p->D, p->scale,
               w->s, lds);
        kr->qk(w->dout, c->pl->lddv, w->v + kc * c->pl->lddv, c->pl->lddv, rows, n, p->Dv,
               1.0f, w->dp, lds);
    }
    for (int64_t r = 0; r < rows; r++) {
        float *s = w->s + r * lds, *dp = w->dp + r * lds, *g = w->g + r * lds;
        int64_t c0 = w->lo[r] - jlo, c1 = w->hi[r] - jlo;
        c0 = c0 < 0 ? 0 : c0 > n ? n : c0;
        c1 = c1 < c0 ? c0 : c1 > n ? n : c1;
        const int64_t m = c1 - c0;
        float *sv = s + c0, *dpv = dp + c0, *gv = g + c0;
        if (m > 0) {
            const float L = w->lse[r], Di = w->di[r];
            if (cap > 0.0f)
                softcap_row(kr, sv, gv, m, cap);
            if (p->alibi) { /* s -= slope |a - j|: the table's score_mod_row, distance d0 - x */
                const cpu_score_mod mod = {
                    .scale = 1.0f, .softcap = 0.0f, .slope = slope, .out_scale = 1.0f};
                kr->score_mod_row(sv, m, &mod, qb->i0 + r + qb->sk - qb->sq - (jlo + c0));
            }
            if (c->pl->mm) /* P, dS below, on the modified scores (scale applied) */
                continue;
            for (int64_t x = 0; x < m; x++)
                sv[x] -= L;
            kr->exp(sv, sv, m);
            if (cap > 0.0f)
                for (int64_t x = 0; x < m; x++)
                    dpv[x] = sv[x] * (dpv[x] - Di) * gv[x];
            else
                for (int64_t x = 0; x < m; x++)
                    dpv[x] = sv[x] * (dpv[x] - Di);
        }
        for (int64_t x = 0; x < c0; x++)
            s[x] = dp[x] = 0.0f;
        for (int64_t x = c1; x < n; x++)
            s[x] = dp[x] = 0.0f;
    }
    if (c->pl->mm)
        kr->bf16->p_ds(w->s, w->dp, cap > 0.0f ? w->g : NULL, lds, rows, n, 1.0f, w->lse, w->di,
                       w->lo, w->hi, jlo);
    return 0;
}

/* dQ rows (ldo apart, dq) += dS K over keys [jlo, jlo + n) of the loaded K block: one pv over
 * the block, unless a key there is NaN or Inf. Then each row takes only the keys of its own
 * range: a row's masked dS entries are exact zeros, and 0 * NaN would carry a key that only its
 * neighbours see into its dQ (the contract: keys outside a row's range never reach it). The
 * choice depends only on the tile's values, the same in both schedules. */
static void acc_dq(const bwd_ctx *c, bwd_ws *w, const qblock *qb, int64_t j0, int64_t jlo,
                   int64_t n, float *dq, int64_t ldo)
{
    const bwd_plan *pl = c->pl;
    const int64_t D = c->p->D, kc = jlo - j0;
    const float *K = w->k + kc * pl->ldd;
    if (!c->kr->nonfinite(K, pl->ldd, n, D)) {
        c->kr->pv(w->dp, pl->lds, K, pl->ldd, qb->rows, n, D, w->ones, dq, ldo);
        return;
    }
    for (int64_t r = 0; r < qb->rows; r++) {
        int64_t c0 = w->lo[r] - jlo, c1 = w->hi[r] - jlo;
        c0 = c0 < 0 ? 0 : c0 > n ? n : c0;
        c1 = c1 < c0 ? c0 : c1 > n ? n : c1;
        if (c1 > c0)
            c->kr->pv(w->dp + r * pl->lds + c0, pl->lds, K + c0 * pl->ldd, pl->ldd, 1, c1 - c0, D,
                      w->ones, dq + r * ldo, ldo);
    }
}

/* ---- the two kinds of items --------------------------------------------------------------- */

/* dK, dV of K block [j0, j0 + cols) of KV head hk in sequence b (lengths sq, sk), summed over
 * the group's query heads and the visible Q blocks in ascending order. With dq_inplace the item
 * also adds dS K_j into the dQ rows of the float32 output (fused schedule). Returns the tile
 * pairs computed. */
static int64_t dkdv_block(const bwd_ctx *c, bwd_ws *w, int64_t b, int64_t hk, int64_t j0,
                          int64_t cols, int64_t sq, int64_t sk, int dq_inplace)
{
    const attn_problem *p = c->p;
    const cpu_kernels *kr = c->kr;
    const bwd_plan *pl = c->pl;
    const int64_t D = p->D, Dv = p->Dv, group = p->Hq / p->Hkv, br = pl->br;
    load_kblock(c, w, b, hk, j0, cols);
    memset(w->dk, 0, (size_t)(cols * pl->ldd) * sizeof(float));
    memset(w->dv, 0, (size_t)(cols * pl->lddv) * sizeof(float));
    int64_t pairs = 0;
    for (int64_t h = hk * group; h < (hk + 1) * group; h++) {
        for (int64_t i0 = 0; i0 < sq; i0 += br) {
            const qblock qb = qblock_at(p, b, h, i0, i0 + br < sq ? br : sq - i0, sq, sk);
            int64_t jlo, jhi;
            if (!pair_keys(&qb, j0, cols, &jlo, &jhi))
                continue;
            const int64_t n = jhi - jlo, kc = jlo - j0;
            load_qblock(c, w, &qb);
            tile_p_ds(c, w, &qb, j0, jlo, n, NULL);
            kr->gemm(n, Dv, qb.rows, w->s, 1, pl->lds, w->dout, pl->lddv, w->ones,
                     w->dv + kc * pl->lddv, pl->lddv);
            kr->gemm(n, D, qb.rows, w->dp, 1, pl->lds, w->q, pl->ldd, w->ones,
                     w->dk + kc * pl->ldd, pl->ldd);
            if (dq_inplace)
                acc_dq(c, w, &qb, j0, jlo, n,
                       (float *)p->dq + attn_q_off(p, p->sdq, b, i0) + h * p->sdq[2], p->sdq[1]);
            pairs++;
        }
    }
    for (int64_t x = 0; x < cols; x++) {
        store_vec(kr, w->dk + x * pl->ldd, p->scale, D, p->dk, p->dtype,
                  attn_kv_off(p, p->sdk, b, j0 + x) + hk * p->sdk[2], p->sdk[3]);
        store_vec(kr, w->dv + x * pl->lddv, 1.0f, Dv, p->dv, p->dtype,
                  attn_kv_off(p, p->sdv, b, j0 + x) + hk * p->sdv[2], p->sdv[3]);
    }
    return pairs;
}

/* dQ of Q block [i0, i0 + rows) of head h in sequence b (split schedule, pass 2): the same tiles
 * as pass 1, K blocks ascending. A block that sees no key gets zeros. */
static void dq_block(const bwd_ctx *c, bwd_ws *w, int64_t b, int64_t h, int64_t i0, int64_t rows,
                     int64_t sq, int64_t sk)
{
    const attn_problem *p = c->p;
    const cpu_kernels *kr = c->kr;
    const bwd_plan *pl = c->pl;
    const int64_t D = p->D, hk = h / (p->Hq / p->Hkv), bc = pl->bc;
    const qblock qb = qblock_at(p, b, h, i0, rows, sq, sk);
    memset(w->dq, 0, (size_t)(rows * pl->ldd) * sizeof(float));
    if (qb.uhi > qb.ulo) {
        load_qblock(c, w, &qb);
        for (int64_t j0 = qb.ulo / bc * bc; j0 < qb.uhi; j0 += bc) {
            const int64_t cols = j0 + bc < sk ? bc : sk - j0;
            int64_t jlo, jhi;
            if (!pair_keys(&qb, j0, cols, &jlo, &jhi))
                continue;
            load_kblock(c, w, b, hk, j0, cols);
            tile_p_ds(c, w, &qb, j0, jlo, jhi - jlo, NULL);
            acc_dq(c, w, &qb, j0, jlo, jhi - jlo, w->dq, pl->ldd);
        }
    }
    for (int64_t r = 0; r < rows; r++)
        store_vec(kr, w->dq + r * pl->ldd, p->scale, D, p->dq, p->dtype,
                  attn_q_off(p, p->sdq, b, i0 + r) + h * p->sdq[2], p->sdq[3]);
}

/* Fused schedule, one item: dK, dV of every K block of KV head hk and, in place, the dQ of its
 * query-head group, whose rows receive their terms K block by K block in ascending order. */
static int64_t fused_kv_head(const bwd_ctx *c, bwd_ws *w, int64_t b, int64_t hk)
{
    const attn_problem *p = c->p;
    const int64_t group = p->Hq / p->Hkv, bc = c->pl->bc;
    for (int64_t h = hk * group; h < (hk + 1) * group; h++)
        for (int64_t i = 0; i < p->Sq; i++)
            memset((float *)p->dq + attn_q_off(p, p->sdq, b, i) + h * p->sdq[2], 0,
                   (size_t)p->D * sizeof(float));
    int64_t pairs = 0;
    for (int64_t j0 = 0; j0 < p->Sk; j0 += bc)
        pairs += dkdv_block(c, w, b, hk, j0, j0 + bc < p->Sk ? bc : p->Sk - j0, p->Sq, p->Sk, 1);
    for (int64_t h = hk * group; h < (hk + 1) * group; h++)
        for (int64_t i = 0; i < p->Sq; i++) {
            float *row = (float *)p->dq + attn_q_off(p, p->sdq, b, i) + h * p->sdq[2];
            for (int64_t d = 0; d < p->D; d++)
                row[d] *= p->scale;
        }
    return pairs;
}

/* ---- bf16 storage on a matrix unit (kernels.h cpu_mm_bf16) --------------------------------
 *
 * The two schedules of the float32 path with the same sums, so the same bits: fused, one item
 * per (sequence, KV head) (mm_kv_head; any layout, dQ accumulated in the workspace), or split
 * (mm_dkdv_block per K block, mm_dq_block per Q block: S and dP computed twice), chosen on the
 * same rule. For each K block, over the group's query heads and the Q blocks in ascending order,
 *   S = Q K^T, dP = dO V^T          A: the bf16 rows of Q, dO; B: K^T, V^T packed once a block
 *   P, dS                           float32 (tile_p_ds): the scale, e^(S - L) and dS in
 *                                   one pass (kernels.h p_ds, after softcap / ALiBi if set);
 *                                   without those, straight into their split operands below
 *                                   (p_ds_split, mm_pair: the same bits, no float32 tiles)
 *   dV^T += dO^T P, dK^T += Q^T dS  A: [dO^T | dO^T], [Q^T | Q^T] (pack_at); B: P, dS split
 *   dQ += dS K                      A: dS split; B: [K; K] (pack_b twice)
 * with float32 accumulators: dK^T, dV^T of the block (transposed back once, when it is done),
 * dQ of every row of the group in the item's workspace (stored at the end). The fused item
 * packs the operands of each of its Q blocks once, into a cache in its workspace (where that
 * takes at most MM_QCACHE_MAX bytes), instead of once per tile pair. The inputs are
 * exact bf16 operands; P and dS enter as hi + lo (kernels.h split): the products carry 16 of
 * their bits, so the gradients are those of float32 P (within p_ds's 2.7e-6) and dS rounded
 * once at the store, as in the float32 path. Rounding them to 8 bits comes within the 2x rule
 * only by chance: P and dS once reached 0.999 of the bound, dS alone 0.84, the split 0.50
 * (bench/RESULTS.md, helper amx7). The sums
 * have one fixed order (dK, dV over (head, Q block) ascending, dQ over K blocks ascending),
 * whatever the thread count. A K block whose keys hold a NaN or Inf takes dQ += dS K row by
 * row over each row's own keys in float32 (acc_dq's rule). */

/* rows x n elements of a bf16 tensor (row r at element off + r * st[1], feature stride st[3])
 * into dst (ld elements a row), zero in columns n .. ld and in rows rows .. rows_pad. */
static void load_bf16(const void *base, const int64_t *st, int64_t off, int64_t rows, int64_t n,
                      uint16_t *dst, int64_t ld, int64_t rows_pad)
{
    const uint16_t *src = base;
    for (int64_t r = 0; r < rows_pad; r++) {
        uint16_t *d = dst + r * ld;
        int64_t done = 0;
        if (r < rows) {
            const uint16_t *row = src + off + r * st[1];
            if (st[3] == 1)
                memcpy(d, row, (size_t)n * sizeof *d);
            else
                for (int64_t x = 0; x < n; x++)
                    d[x] = row[x * st[3]];
            done = n;
        }
        memset(d + done, 0, (size_t)(ld - done) * sizeof *d);
    }
}

/* Points qb, dob, qt, dot at the tile set's own buffers (slot < 0) or at a slot of the cache. */
static void mm_qslot(bwd_ws *w, int64_t slot)
{
    if (slot < 0) {
        w->qb = w->qb0, w->dob = w->dob0, w->qt = w->qt0, w->dot = w->dot0;
        return;
    }
    float *x = w->qc + slot * w->qblk;
    w->qb = (uint16_t *)(void *)x;
    w->dob = (uint16_t *)(void *)(x + w->qoff[0]);
    w->qt = (uint16_t *)(void *)(x + w->qoff[1]);
    w->dot = (uint16_t *)(void *)(x + w->qoff[2]);
}

/* The Q block's bf16 operands into qb, dob, qt, dot (wherever they point). */
static void mm_pack_qblock(const bwd_ctx *c, bwd_ws *w, const qblock *qb)
{
    const attn_problem *p = c->p;
    const cpu_mm_bf16 *mm = c->kr->bf16;
    const int64_t rows = qb->rows, r16 = rup(rows, 16);
    load_bf16(p->q, p->sq, attn_q_off(p, p->sq, qb->b, qb->i0) + qb->h * p->sq[2], rows, p->D,
              w->qb, w->ldqb, r16);
    load_bf16(p->dout, p->sdo, attn_q_off(p, p->sdo, qb->b, qb->i0) + qb->h * p->sdo[2], rows,
              p->Dv, w->dob, w->dvp, r16);
    mm->pack_at(w->qb, w->ldqb, rows, p->D, w->qt, w->ldt2);
    mm->pack_at(w->dob, w->dvp, rows, p->Dv, w->dot, w->ldt2);
}

/* The Q block's per-row data (lse, D, key ranges: load_qblock's) and its bf16 operands: from
 * the cache (slot >= 0, filled by mm_kv_head) or packed here. */
static void mm_load_qblock(const bwd_ctx *c, bwd_ws *w, const qblock *qb, int64_t slot)
{
    const attn_problem *p = c->p;
    const int64_t rows = qb->rows;
    for (int64_t r = 0; r < rows; r++) {
        const int64_t i = qb->i0 + r;
        w->lse[r] = p->lse[attn_lse_off(p, qb->b, qb->h, i)];
        w->di[r] = c->di[di_off(p, qb->b, qb->h, i)];
        attn_key_range(p, qb->sq, qb->sk, i, &w->lo[r], &w->hi[r]);
        if (w->lse[r] == -INFINITY)
            w->hi[r] = w->lo[r];
    }
    mm_qslot(w, slot);
    if (slot < 0)
        mm_pack_qblock(c, w, qb);
}

/* K, V rows [j0, j0 + cols) of KV head hk: bf16 rows, K^T and V^T packed, the keys that hold a
 * NaN or Inf (and then the float32 K tile, for acc_dq's row-by-row products). */
static void mm_load_kblock(const bwd_ctx *c, bwd_ws *w, int64_t b, int64_t hk, int64_t j0,
                           int64_t cols)
{
    const attn_problem *p = c->p;
    const cpu_mm_bf16 *mm = c->kr->bf16;
    load_bf16(p->k, p->sk, attn_kv_off(p, p->sk, b, j0) + hk * p->sk[2], cols, p->D, w->kh,
              w->ldh, cols);
    load_bf16(p->v, p->sv, attn_kv_off(p, p->sv, b, j0) + hk * p->sv[2], cols, p->Dv, w->vh,
              w->ldh, cols);
    mm->pack_bt(w->kh, w->ldh, cols, p->D, w->kp, w->ldkp);
    mm->pack_bt(w->vh, w->ldh, cols, p->Dv, w->vp, w->ldkp);
    int any = 0;
    for (int64_t x = 0; x < cols; x++) {
        int bad = 0;
        for (int64_t d = 0; d < p->D; d++)
            bad |= (w->kh[x * w->ldh + d] & 0x7f80) == 0x7f80;
        w->kbad[x] = bad;
        any |= bad;
    }
    if (any)
        load_tile(c->kr, p->k, p->dtype, p->sk, attn_kv_off(p, p->sk, b, j0) + hk * p->sk[2],
                  cols, p->D, w->k, c->pl->ldd);
    w->kb_n = 0;
}

/* dQ += dS K runs over the pair's keys [kc, kc + n) (offsets in the K block) in segments: the
 * parts between multiples of MM_SEG, each its own [hi | lo] stretch of the product's K (dsa: hi in
 * R32(len) columns, then lo; kb: [K; K] of its keys). So a K block of 256 keys sums dQ as two
 * blocks of 128 in a row do, bit for bit (blocks start at multiples of their width): the wider
 * key tile (fewer dQ C round trips) changes no bits. One segment under mm_single. */
enum { MM_SEG = 128 };
static int64_t mm_seg_len(const bwd_plan *pl, int64_t kc, int64_t n, int64_t o)
{
    const int64_t end = pl->mm_single ? n : (kc + o) / MM_SEG * MM_SEG + MM_SEG - kc;
    return (end < n ? end : n) - o;
}

/* dS (w->dp) split: as the A of dQ (a: into w->dsa, by segments) and / or the B of dK^T (bp:
 * at bp, NULL: none), in one pass where the segments allow (every one but the last a multiple
 * of 16 keys, so that their B columns do not overlap). */
static void mm_split_ds(const bwd_plan *pl, bwd_ws *w, int64_t rows, int64_t kc, int64_t n,
                        int a, uint32_t *bp)
{
    const int64_t first = mm_seg_len(pl, kc, n, 0);
    if (!a || first == n) {
        pl->split(w->dp, pl->lds, rows, n, a ? w->dsa : NULL, w->ldds, bp, w->ldpb);
        return;
    }
    if (bp && first % 16) {
        pl->split(w->dp, pl->lds, rows, n, NULL, 0, bp, w->ldpb);
        bp = NULL;
    }
    int64_t ka = 0;
    for (int64_t o = 0, len; o < n; o += len) {
        len = mm_seg_len(pl, kc, n, o);
        pl->split(w->dp + o, pl->lds, rows, len, w->dsa + ka, w->ldds, bp ? bp + o : NULL,
                  w->ldpb);
        ka += 2 * rup(len, CPU_MM_KP);
    }
}

/* dQ rows (dq, ldd apart) += dS K over keys [kc, kc + n) of the loaded block (dS split in
 * w->dsa by segments, float32 in w->dp); bad: a key there holds a NaN or Inf (mm_pair). */
static void mm_acc_dq(const bwd_ctx *c, bwd_ws *w, const qblock *qb, int64_t j0, int64_t kc,
                      int64_t n, int bad, float *dq)
{
    const bwd_plan *pl = c->pl;
    const cpu_mm_bf16 *mm = c->kr->bf16;
    const int64_t D = c->p->D, kn = rup(n, CPU_MM_KP);
    if (bad) {
        for (int64_t r = 0; r < qb->rows; r++) {
            int64_t c0 = w->lo[r] - j0 - kc, c1 = w->hi[r] - j0 - kc;
            c0 = c0 < 0 ? 0 : c0 > n ? n : c0;
            c1 = c1 < c0 ? c0 : c1 > n ? n : c1;
            if (c1 > c0)
                c->kr->pv(w->dp + r * pl->lds + c0, pl->lds, w->k + (kc + c0) * pl->ldd, pl->ldd,
                          1, c1 - c0, D, w->ones, dq + r * pl->ldd, pl->ldd);
        }
        return;
    }
    /* [K; K] of each segment's keys (usually of the whole block), packed once per key range;
     * ka: the product's K */
    const int pack = w->kb_n != n || w->kb_kc != kc;
    int64_t ka = 0;
    for (int64_t o = 0, len; o < n; o += len) {
        len = mm_seg_len(pl, kc, n, o);
        const int64_t kl = rup(len, CPU_MM_KP);
        if (pack) {
            const uint16_t *keys = w->kh + (kc + o) * w->ldh;
            mm->pack_b(keys, w->ldh, len, D, w->kb + ka / 2 * w->ldkb, w->ldkb);
            mm->pack_b(keys, w->ldh, len, D, w->kb + (ka + kl) / 2 * w->ldkb, w->ldkb);
        }
        ka += 2 * kl;
    }
    w->kb_kc = kc, w->kb_n = n;
    /* (mm_single & 2: the hi halves alone, K = kn) */
    mm->gemm(qb->rows, D, pl->mm_single & 2 ? kn : ka, w->dsa, w->ldds, w->kb, w->ldkb,
             w->mones, dq, pl->ldd);
}

/* dV^T, dK^T += the products of the w->nb waiting pairs (mm_pair), in their order, in one pass
 * over the C tiles each (kernels.h gemm_acc_segs: the bits of one gemm per pair, as mm_pair's
 * unbatched path and the split schedule give them). */
static void mm_flush(const bwd_ctx *c, bwd_ws *w)
{
    if (!w->nb)
        return;
    const attn_problem *p = c->p;
    const cpu_mm_bf16 *mm = c->kr->bf16;
    const int64_t k2 = 2 * rup(c->pl->br, CPU_MM_KP);
    mm->gemm_acc_segs(p->Dv, w->b_n, w->nb, w->bdot, w->ldt2, k2, w->pb, w->ldpb, w->mones,
                      w->dvt + w->b_kc, w->ldt);
    mm->gemm_acc_segs(p->D, w->b_n, w->nb, w->bqt, w->ldt2, k2, w->dsp, w->ldpb, w->mones,
                      w->dkt + w->b_kc, w->ldt);
    w->nb = 0;
}

/* One tile pair: P, dS of the Q block against keys [jlo, jlo + n) of the loaded K block
 * (which starts at key j0); dkdv: dV^T, dK^T += their products; dq (rows ldd apart, or NULL):
 * += dS K. P and dS reach their split operands in one pass (p_ds_split: the float32 tiles are
 * not stored and read again) where the unit has it, the scores have no modifier and dQ's A
 * segments start at multiples of 32 keys (always but in some windowed tiles); float32 dS is
 * then kept only for a key range with a NaN or Inf key (mm_acc_dq's rows read it). The same
 * bits either way. */
static void mm_pair(const bwd_ctx *c, bwd_ws *w, const qblock *qb, int64_t j0, int64_t jlo,
                    int64_t n, int dkdv, float *dq)
{
    const attn_problem *p = c->p;
    const cpu_mm_bf16 *mm = c->kr->bf16;
    const bwd_plan *pl = c->pl;
    const int64_t kc = jlo - j0, lds = pl->lds;
    const int64_t kr = rup(qb->rows, CPU_MM_KP);
    const int64_t seg0 = mm_seg_len(pl, kc, n, 0);
    /* dV^T, dK^T of this pair with the waiting ones' (mm_flush) where the plan batches, the Q
     * block's A operands stay put (a cache slot) and it has R32(br) rows: the P, dS split go
     * to the next free place of pb, dsp; a pair with other keys sends the waiting ones first */
    const int bat = dkdv && pl->batch > 1 && w->qt != w->qt0 && kr == rup(pl->br, CPU_MM_KP);
    if (w->nb && (!bat || kc != w->b_kc || n != w->b_n))
        mm_flush(c, w);
    uint32_t *pb = w->pb + (bat ? w->nb * kr * w->ldpb : 0);
    uint32_t *dsp = w->dsp + (bat ? w->nb * kr * w->ldpb : 0);
    /* a NaN or Inf key in the pair's range (mm_load_kblock's kbad): dQ += dS K then goes row by
     * row over each row's own keys, from float32 dS (mm_acc_dq) */
    int bad = 0, fused = 0;
    for (int64_t x = kc; dq && x < kc + n; x++)
        bad |= w->kbad[x];
    if (pl->fuse && (seg0 >= n || seg0 % CPU_MM_KP == 0)) {
        const cpu_mm_p_ds_split fz = {
            .S = w->s, .dP = w->dp, .lds = lds, .rows = qb->rows, .n = n, .scale = p->scale,
            .L = w->lse, .Di = w->di, .lo = w->lo, .hi = w->hi, .jlo = jlo,
            .pb = dkdv ? pb : NULL, .dsp = dkdv ? dsp : NULL, .ldpb = w->ldpb,
            .dsa = dq ? w->dsa : NULL, .ldds = w->ldds, .seg0 = seg0, .seg = MM_SEG,
            .keep_ds = bad};
        fused = tile_p_ds(c, w, qb, j0, jlo, n, &fz);
    } else {
        tile_p_ds(c, w, qb, j0, jlo, n, NULL);
    }
    if (dkdv) { /* (mm_single: the hi halves alone, K = R32(rows)) */
        const int64_t kp = pl->mm_single & 1 ? kr : 2 * kr, ks = pl->mm_single & 2 ? kr : 2 * kr;
        if (!fused) {
            pl->split(w->s, lds, qb->rows, n, NULL, 0, pb, w->ldpb);
            mm_split_ds(pl, w, qb->rows, kc, n, dq != NULL, dsp);
        }
        if (bat) {
            w->bqt[w->nb] = w->qt, w->bdot[w->nb] = w->dot, w->b_kc = kc, w->b_n = n;
            if (++w->nb == pl->batch)
                mm_flush(c, w);
        } else {
            mm->gemm(p->Dv, n, kp, w->dot, w->ldt2, pb, w->ldpb, w->mones, w->dvt + kc, w->ldt);
            mm->gemm(p->D, n, ks, w->qt, w->ldt2, dsp, w->ldpb, w->mones, w->dkt + kc, w->ldt);
        }
    } else if (!fused) {
        mm_split_ds(pl, w, qb->rows, kc, n, 1, NULL);
    }
    if (dq)
        mm_acc_dq(c, w, qb, j0, kc, n, bad, dq);
}

/* dK, dV of K block [j0, j0 + cols) of KV head hk in sequence b (lengths sq, sk) over the
 * group's query heads and the visible Q blocks in ascending order, inside a begin / end pair;
 * with dqa (the fused schedule) also the group's dQ rows there (group x sq rows, ldd apart).
 * Returns the tile pairs computed. */
static int64_t mm_dkdv_block(const bwd_ctx *c, bwd_ws *w, int64_t b, int64_t hk, int64_t j0,
                             int64_t cols, int64_t sq, int64_t sk, float *dqa)
{
    const attn_problem *p = c->p;
    const cpu_kernels *kr = c->kr;
    const bwd_plan *pl = c->pl;
    const int64_t D = p->D, Dv = p->Dv, group = p->Hq / p->Hkv, br = pl->br, ldd = pl->ldd;
    int64_t pairs = 0;
    mm_load_kblock(c, w, b, hk, j0, cols);
    memset(w->dkt, 0, (size_t)(D * w->ldt) * sizeof(float));
    memset(w->dvt, 0, (size_t)(Dv * w->ldt) * sizeof(float));
    for (int64_t h = hk * group; h < (hk + 1) * group; h++)
        for (int64_t i0 = 0; i0 < sq; i0 += br) {
            const qblock qb = qblock_at(p, b, h, i0, i0 + br < sq ? br : sq - i0, sq, sk);
            int64_t jlo, jhi;
            if (!pair_keys(&qb, j0, cols, &jlo, &jhi))
                continue;
            mm_load_qblock(c, w, &qb,
                           dqa && w->qc ? (h - hk * group) * w->qnb + i0 / br : -1);
            mm_pair(c, w, &qb, j0, jlo, jhi - jlo, 1,
                    dqa ? dqa + ((h - hk * group) * sq + i0) * ldd : NULL);
            pairs++;
        }
    mm_flush(c, w);
    /* dK, dV rows of the block from their transposes, 16 keys at a time into the first rows of
     * w->dk, w->dv (row-major, so they stay in L1 between the transpose and the store). The
     * unit's transpose: the scalar loop's strided reads were 8-11% of the bf16 backward at d 128
     * n 1024, causal and not (bench/RESULTS.md, helper amx15). */
    for (int64_t x0 = 0; x0 < cols; x0 += 16) {
        const int64_t nx = cols - x0 < 16 ? cols - x0 : 16;
        kr->bf16->transpose(w->dkt + x0, w->ldt, D, nx, w->dk, ldd);
        kr->bf16->transpose(w->dvt + x0, w->ldt, Dv, nx, w->dv, pl->lddv);
        for (int64_t x = 0; x < nx; x++) {
            store_vec(kr, w->dk + x * ldd, p->scale, D, p->dk, p->dtype,
                      attn_kv_off(p, p->sdk, b, j0 + x0 + x) + hk * p->sdk[2], p->sdk[3]);
            store_vec(kr, w->dv + x * pl->lddv, 1.0f, Dv, p->dv, p->dtype,
                      attn_kv_off(p, p->sdv, b, j0 + x0 + x) + hk * p->sdv[2], p->sdv[3]);
        }
    }
    return pairs;
}

/* Fused schedule, one item: dK, dV of every K block of KV head hk in sequence b and the dQ of
 * its query-head group (accumulated in w->dqa, K blocks ascending). */
static int64_t mm_kv_head(const bwd_ctx *c, bwd_ws *w, int64_t b, int64_t hk)
{
    const attn_problem *p = c->p;
    const int64_t group = p->Hq / p->Hkv, bc = c->pl->bc, ldd = c->pl->ldd;
    int64_t sq, sk;
    attn_seqlens(p, b, &sq, &sk);
    memset(w->dqa, 0, (size_t)(group * sq * ldd) * sizeof(float));
    int64_t pairs = 0;
    if (w->qc) /* every Q block's operands once (mm_dkdv_block takes them from the cache) */
        for (int64_t h = hk * group; h < (hk + 1) * group; h++)
            for (int64_t i0 = 0; i0 < sq; i0 += c->pl->br) {
                const int64_t rows = i0 + c->pl->br < sq ? c->pl->br : sq - i0;
                const qblock qb = {.b = b, .h = h, .i0 = i0, .rows = rows, .sq = sq, .sk = sk};
                mm_qslot(w, (h - hk * group) * w->qnb + i0 / c->pl->br);
                mm_pack_qblock(c, w, &qb);
            }
    c->kr->bf16->begin();
    for (int64_t j0 = 0; j0 < sk; j0 += bc)
        pairs += mm_dkdv_block(c, w, b, hk, j0, j0 + bc < sk ? bc : sk - j0, sq, sk, w->dqa);
    c->kr->bf16->end();
    for (int64_t h = hk * group; h < (hk + 1) * group; h++)
        for (int64_t i = 0; i < sq; i++)
            store_vec(c->kr, w->dqa + ((h - hk * group) * sq + i) * ldd, p->scale, p->D, p->dq,
                      p->dtype, attn_q_off(p, p->sdq, b, i) + h * p->sdq[2], p->sdq[3]);
    return pairs;
}

/* Split schedule, pass 2: dQ of Q block [i0, i0 + rows) of head h in sequence b, K blocks
 * ascending: the same products, in the same order, as the fused item's dQ rows. */
static void mm_dq_block(const bwd_ctx *c, bwd_ws *w, int64_t b, int64_t h, int64_t i0,
                        int64_t rows, int64_t sq, int64_t sk)
{
    const attn_problem *p = c->p;
    const bwd_plan *pl = c->pl;
    const int64_t hk = h / (p->Hq / p->Hkv), bc = pl->bc;
    const qblock qb = qblock_at(p, b, h, i0, rows, sq, sk);
    memset(w->dq, 0, (size_t)(rows * pl->ldd) * sizeof(float));
    if (qb.uhi > qb.ulo) {
        c->kr->bf16->begin();
        mm_load_qblock(c, w, &qb, -1);
        for (int64_t j0 = qb.ulo / bc * bc; j0 < qb.uhi; j0 += bc) {
            const int64_t cols = j0 + bc < sk ? bc : sk - j0;
            int64_t jlo, jhi;
            if (!pair_keys(&qb, j0, cols, &jlo, &jhi))
                continue;
            mm_load_kblock(c, w, b, hk, j0, cols);
            mm_pair(c, w, &qb, j0, jlo, jhi - jlo, 0, w->dq);
        }
        c->kr->bf16->end();
    }
    for (int64_t r = 0; r < rows; r++)
        store_vec(c->kr, w->dq + r * pl->ldd, p->scale, p->D, p->dq, p->dtype,
                  attn_q_off(p, p->sdq, b, i0 + r) + h * p->sdq[2], p->sdq[3]);
}

/* ---- the schedules ------------------------------------------------------------------------ */

/* D_i = dO_i . O_i (Dv features) for every (sequence, head, row), at di_off; float64 sum
 * (O(Sq Dv) per head), rounded once. Varlen rows past cu_q[B] get 0, unread. CPU_DI_ROWS rows
 * at a time through the table's di_rows, each its own sum in feature order (the same bits as one
 * row at a time): one float64 add chain a row was latency-bound, 8% of the bf16 backward on AMX
 * at d 128 n 1024 causal (bench/RESULTS.md, helper amx13); the AVX-512 entry takes the rows as
 * the lanes of one vector (helper amx15). */
static void compute_di(const attn_problem *p, const cpu_kernels *kr, float *dbuf, size_t n)
{
    const int64_t rows_per_head = p->layout == ATTN_VARLEN ? p->total_q : p->B * p->Sq;
    const int64_t owned = p->layout == ATTN_VARLEN ? p->cu_q[p->B] : rows_per_head;
    const int64_t groups = cdiv((int64_t)n, CPU_DI_ROWS);
#pragma omp parallel for schedule(static) num_threads(p->threads)
    for (int64_t g = 0; g < groups; g++) {
        int64_t oo[CPU_DI_ROWS], od[CPU_DI_ROWS], at[CPU_DI_ROWS];
        float out[CPU_DI_ROWS];
        int nr = 0;
        for (int64_t t = g * CPU_DI_ROWS; t < (int64_t)n && t < (g + 1) * CPU_DI_ROWS; t++) {
            const int64_t h = p->layout == ATTN_VARLEN ? t / rows_per_head : (t / p->Sq) % p->Hq;
            if (p->layout == ATTN_VARLEN) {
                const int64_t r = t % rows_per_head;
                if (r >= owned) {
                    dbuf[t] = 0.0f;
                    continue;
                }
                oo[nr] = r * p->so[1] + h * p->so[2];
                od[nr] = r * p->sdo[1] + h * p->sdo[2];
            } else {
                const int64_t i = t % p->Sq, b = t / (p->Sq * p->Hq);
                oo[nr] = b * p->so[0] + h * p->so[2] + i * p->so[1];
                od[nr] = b * p->sdo[0] + h * p->sdo[2] + i * p->sdo[1];
            }
            at[nr++] = t;
        }
        if (!nr)
            continue;
        for (int r = nr; r < CPU_DI_ROWS; r++) /* a short group: row 0 again, not stored */
            oo[r] = oo[0], od[r] = od[0];
        kr->di_rows(p->o, oo, p->so[3], p->dout, od, p->sdo[3], p->Dv, p->dtype, out);
        for (int r = 0; r < nr; r++)
            dbuf[at[r]] = out[r];
    }
}

/* Global block g of a prefix table start (B + 1 entries; dense: nb blocks per sequence) ->
 * (sequence, block index inside it). */
static void block_of(const attn_problem *p, const int64_t *start, int64_t nb, int64_t g,
                     int64_t *b, int64_t *blk)
{
    if (!start) {
        *b = g / nb, *blk = g % nb;
        return;
    }
    int64_t lo = 0, hi = p->B; /* start[lo] <= g < start[hi]: ends on the sequence that owns g
                                  (a zero-length one has start[b] == start[b + 1]) */
    while (hi - lo > 1) {
        const int64_t mid = (lo + hi) / 2;
        if (start[mid] <= g)
            lo = mid;
        else
            hi = mid;
    }
    *b = lo, *blk = g - start[lo];
}

static int min_threads(int threads, int64_t items)
{
    return items < threads ? (int)(items < 1 ? 1 : items) : threads;
}

flashc_status cpu_attn_bwd(const attn_problem *p, flashc_attn_stats *stats)
{
    bwd_plan pl;
    make_plan(p, &pl);
    attn_scratch sc;
    attn_scratch_init(&sc, p);
    float *dbuf = attn_scratch_take(&sc, pl.sizes[0]);
    int64_t *starts = pl.sizes[1] ? attn_scratch_take(&sc, pl.sizes[1]) : NULL;
    float *tiles = attn_scratch_take(&sc, pl.sizes[2]);
    if (!dbuf || (pl.sizes[1] && !starts) || !tiles) {
        attn_scratch_free(&sc, tiles);
        attn_scratch_free(&sc, starts);
        attn_scratch_free(&sc, dbuf);
        return flashc__fail(FLASHC_ERR_OUT_OF_MEMORY,
                            "flashc_attn_bwd: cannot allocate D (%zu floats) and %d thread "
                            "workspaces of %zu floats",
                            pl.di_floats, pl.slots, pl.per_thread);
    }
    bwd_ctx c = {.p = p, .kr = cpu_kernels_get(), .pl = &pl, .di = dbuf};
    const int64_t br = pl.br, bc = pl.bc;
    const int64_t nqb_dense = cdiv(p->Sq, br), nkb_dense = cdiv(p->Sk, bc);
    if (starts) {
        int64_t *ks = starts, *qs = starts + p->B + 1;
        ks[0] = qs[0] = 0;
        for (int64_t b = 0; b < p->B; b++) {
            int64_t sq, sk;
            attn_seqlens(p, b, &sq, &sk);
            ks[b + 1] = ks[b] + cdiv(sk, bc);
            qs[b + 1] = qs[b] + cdiv(sq, br);
        }
        c.kstart = ks, c.qstart = qs;
    }
    compute_di(p, c.kr, dbuf, pl.di_floats);

    const int nt1 = min_threads(p->threads, pl.items1), nt2 = min_threads(p->threads, pl.items2);
    /* Pass 1: fused items, or dK, dV per (sequence, K block, KV head): under the causal mask
     * the first K blocks of a sequence are seen by the most query rows and go out first. */
    int64_t pairs = 0;
#pragma omp parallel num_threads(nt1) reduction(+ : pairs)
    {
        bwd_ws w = ws_at(tiles + (size_t)thread_id() * pl.per_thread, &pl);
#pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < pl.items1; it++) {
            if (pl.fused && pl.mm) {
                pairs += mm_kv_head(&c, &w, it / p->Hkv, it % p->Hkv);
            } else if (pl.fused) {
                pairs += fused_kv_head(&c, &w, it / p->Hkv, it % p->Hkv);
            } else {
                int64_t b, blk, sq, sk;
                block_of(p, c.kstart, nkb_dense, it / p->Hkv, &b, &blk);
                attn_seqlens(p, b, &sq, &sk);
                const int64_t j0 = blk * bc, cols = j0 + bc < sk ? bc : sk - j0;
                if (pl.mm) {
                    c.kr->bf16->begin();
                    pairs += mm_dkdv_block(&c, &w, b, it % p->Hkv, j0, cols, sq, sk, NULL);
                    c.kr->bf16->end();
                } else {
                    pairs += dkdv_block(&c, &w, b, it % p->Hkv, j0, cols, sq, sk, 0);
                }
            }
        }
    }
    /* Pass 2 (split only): dQ per (sequence, Q block, query head), the last (heaviest under
     * the causal mask) Q blocks of a sequence first. */
    if (pl.items2 > 0) {
#pragma omp parallel num_threads(nt2)
        {
            bwd_ws w = ws_at(tiles + (size_t)thread_id() * pl.per_thread, &pl);
#pragma omp for schedule(dynamic, 1)
            for (int64_t it = 0; it < pl.items2; it++) {
                int64_t b, blk, sq, sk;
                block_of(p, c.qstart, nqb_dense, it / p->Hq, &b, &blk);
                attn_seqlens(p, b, &sq, &sk);
                const int64_t i0 = (cdiv(sq, br) - 1 - blk) * br;
                if (pl.mm)
                    mm_dq_block(&c, &w, b, it % p->Hq, i0, i0 + br < sq ? br : sq - i0, sq, sk);
                else
                    dq_block(&c, &w, b, it % p->Hq, i0, i0 + br < sq ? br : sq - i0, sq, sk);
            }
        }
    }
    attn_scratch_free(&sc, tiles);
    attn_scratch_free(&sc, starts);
    attn_scratch_free(&sc, dbuf);

    int64_t total;
    attn_tile_pairs(p, br, bc, &total);
    stats->tile_pairs = pairs;
    stats->tile_pairs_total = total;
    stats->block_q = pl.br_req;
    stats->block_k = pl.bc_req;
    return FLASHC_OK;
}
