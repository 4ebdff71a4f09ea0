/* kernels/amx.c — kernels.h cpu_mm_bf16 on AMX-BF16 tiles (tdpbf16ps). Flags: -mamx-tile
 * -mamx-bf16 plus the AVX-512 set (isa.cmake); dispatch.c offers it only where the CPU has the
 * tiles, XCR0 enables them and Linux granted the tile data to the process.
 *
 * One tile configuration for every product: palette 1, the 8 tiles at 16 rows x 64 bytes,
 * loaded by begin() on the calling thread (once per work item of the loop nest) and released by
 * end(). A C tile is 16 x 16 float32, an A tile 16 rows x 32 bf16 (K 32), a B tile 16 pair-rows x
 * 16 words of the VNNI layout (K 32 x N 16); tdpbf16ps adds A B to C, 16 x 16 x 32 multiply-adds.
 * The block is 2 x 2 C tiles (tmm0..3) with two A tiles (tmm4, 5) and two B tiles (tmm6, 7):
 * 4 loads per 4 products. Edge tiles (fewer than 16 valid rows or columns of C) go through a
 * 16 x 16 scratch, so only C's M x N elements are ever read or written; A and B tiles are read
 * whole (kernels.h: A has readable rows up to R16(M) and zero columns up to Kp, Bp is padded).
 * The packing and the softmax are the AVX-512 ones (avx512bf16.c, kernels_simd.h).
 *
 * GCC's tile-load intrinsic is an asm without a memory operand, so the compiler does not know
 * it reads memory: mm_barrier() before every load from memory this file just wrote (scratch,
 * rescaled C rows) keeps those stores in place and in order. */
#if defined(__x86_64__)
#include "kernels.h"

#include <immintrin.h>
#include <string.h>

void cpu_mm_avx512_pack_b(const uint16_t *B, int64_t ldb, int64_t K, int64_t N, uint32_t *Bp,
                          int64_t ldbp);
void cpu_mm_avx512_pack_bt(const uint16_t *Bt, int64_t ldbt, int64_t N, int64_t K, uint32_t *Bp,
                           int64_t ldbp);
void cpu_mm_avx512_split(const float *X, int64_t ldx, int64_t rows, int64_t n, uint16_t *a,
                         int64_t lda, uint32_t *bp, int64_t ldbp);
void cpu_mm_avx512_split_cvt(const float *X, int64_t ldx, int64_t rows, int64_t n, uint16_t *a,
                             int64_t lda, uint32_t *bp, int64_t ldbp);
void cpu_mm_avx512_pack_at(const uint16_t *X, int64_t ldx, int64_t rows, int64_t n, uint16_t *A,
                           int64_t lda);
void cpu_mm_avx512_transpose(const float *X, int64_t ldx, int64_t rows, int64_t n, float *Y,
                             int64_t ldy);
void cpu_mm_avx512_p_ds_split(const cpu_mm_p_ds_split *g);

#define mm_barrier() __asm__ volatile("" ::: "memory")

typedef struct tilecfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tilecfg;
_Static_assert(sizeof(tilecfg) == 64, "ldtilecfg reads 64 bytes");

static void amx_begin(void)
{
    tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++)
        cfg.colsb[t] = 64, cfg.rows[t] = 16;
    mm_barrier();
    _tile_loadconfig(&cfg);
}

static void amx_end(void) { _tile_release(); }

/* The state of one C tile of a block: where it lives while the products run. */
typedef struct ctile {
    float *c;         /* its first element in C                                   */
    int vr, vc;       /* valid rows and columns (1 .. 16); 0: not part of the block */
    float *tile;      /* c itself when vr = vc = 16, else the scratch             */
    int64_t stride;   /* bytes between the tile's rows                            */
} ctile;

/* Prepares tile t of a block: rescales the valid rows by rowscale (C = diag(rowscale) C + ..),
 * or copies them into the scratch (zero elsewhere) for an edge tile. */
static inline void ctile_prepare(ctile *t, const float *rowscale, int64_t ldc, float *scratch)
{
    if (t->vr == 16 && t->vc == 16) {
        t->tile = t->c, t->stride = ldc * 4;
        if (rowscale)
            for (int r = 0; r < 16; r++)
                if (rowscale[r] != 1.0f) {
                    float *row = t->c + r * ldc;
                    _mm512_storeu_ps(row, _mm512_mul_ps(_mm512_set1_ps(rowscale[r]),
                                                        _mm512_loadu_ps(row)));
                }
        return;
    }
    t->tile = scratch, t->stride = 64;
    const __mmask16 mk = (__mmask16)((1u << t->vc) - 1u);
    for (int r = 0; r < 16; r++) {
        __m512 x = _mm512_setzero_ps();
        if (rowscale && r < t->vr)
            x = _mm512_mul_ps(_mm512_set1_ps(rowscale[r]),
                              _mm512_maskz_loadu_ps(mk, t->c + r * ldc));
        _mm512_storeu_ps(scratch + r * 16, x);
    }
}

/* Copies an edge tile's valid part back from the scratch. */
static inline void ctile_finish(const ctile *t, int64_t ldc)
{
    if (t->tile == t->c)
        return;
    const __mmask16 mk = (__mmask16)((1u << t->vc) - 1u);
    for (int r = 0; r < t->vr; r++)
        _mm512_mask_storeu_ps(t->c + r * ldc, mk, _mm512_loadu_ps(t->tile + r * 16));
}

/* C = diag(rowscale) C + sum over the nseg segments of A[s] B_s (kernels.h gemm for nseg = 1,
 * K = kseg): segment s multiplies A[s] (M x kseg, lda) by the kseg / 2 pair-rows of Bp from
 * s kseg / 2 on, its k-steps after the previous segment's on the same C tiles, which stay in
 * the tile registers from the first segment to the last. tdpbf16ps adds into C in place, and a
 * C tile's trip through memory is exact, so nseg segments give the bits of nseg calls in a row
 * (rowscale all 1): gemm_acc_segs (kernels.h). */
static inline __attribute__((always_inline)) void
amx_gemm_core(int64_t M, int64_t N, int nseg, const uint16_t *const *A, int64_t lda, int64_t kseg,
              const uint32_t *Bp, int64_t ldbp, const float *rowscale, float *C, int64_t ldc)
{
    float scratch[4][256] __attribute__((aligned(64)));
    const int64_t sa = lda * 2, sb = ldbp * 4; /* tile strides in bytes */
    /* rowscale all 1 (the backward's accumulating products): C loaded as it is, whole tiles
     * straight from C, instead of a look at every row of every tile of every block */
    const float *scale = rowscale;
    int ones = rowscale != NULL;
    for (int64_t r = 0; r < M && ones; r++)
        ones = rowscale[r] == 1.0f;
    if (ones)
        scale = NULL;
    for (int64_t n0 = 0; n0 < N; n0 += 32)
        for (int64_t m0 = 0; m0 < M; m0 += 32) {
            const int two_m = M - m0 > 16, two_n = N - n0 > 16;
            ctile t[4]; /* (0,0), (0,1), (1,0), (1,1) */
            for (int i = 0; i < 4; i++) {
                const int64_t r0 = m0 + 16 * (i >> 1), c0 = n0 + 16 * (i & 1);
                const int in = r0 < M && c0 < N;
                t[i].c = C + r0 * ldc + c0;
                t[i].vr = in ? (M - r0 < 16 ? (int)(M - r0) : 16) : 0;
                t[i].vc = in ? (N - c0 < 16 ? (int)(N - c0) : 16) : 0;
                /* (edge tiles take rowscale itself: there NULL means "start from zero") */
                if (in && (scale || t[i].vr < 16 || t[i].vc < 16))
                    ctile_prepare(&t[i], rowscale ? rowscale + r0 : NULL, ldc, scratch[i]);
                else if (in)
                    t[i].tile = t[i].c, t[i].stride = ldc * 4;
            }
            mm_barrier();
            /* C tiles in: from C (or the scratch) when accumulating, else zero */
            if (rowscale) {
                _tile_loadd(0, t[0].tile, t[0].stride);
                if (two_n)
                    _tile_loadd(1, t[1].tile, t[1].stride);
                if (two_m)
                    _tile_loadd(2, t[2].tile, t[2].stride);
                if (two_m && two_n)
                    _tile_loadd(3, t[3].tile, t[3].stride);
            } else {
                _tile_zero(0);
                _tile_zero(1);
                _tile_zero(2);
                _tile_zero(3);
            }
            for (int sg = 0; sg < nseg; sg++) {
                const uint16_t *a = A[sg] + m0 * lda;
                const uint32_t *bs = Bp + sg * (kseg / 2) * ldbp + n0;
                for (int64_t k0 = 0; k0 < kseg; k0 += 32) {
                    const uint32_t *b = bs + (k0 / 2) * ldbp;
                    _tile_loadd(4, a + k0, sa);
                    _tile_loadd(6, b, sb);
                    if (two_n)
                        _tile_loadd(7, b + 16, sb);
                    _tile_dpbf16ps(0, 4, 6);
                    if (two_n)
                        _tile_dpbf16ps(1, 4, 7);
                    if (two_m) {
                        _tile_loadd(5, a + 16 * lda + k0, sa);
                        _tile_dpbf16ps(2, 5, 6);
                        if (two_n)
                            _tile_dpbf16ps(3, 5, 7);
                    }
                }
            }
            _tile_stored(0, t[0].tile, t[0].stride);
            if (two_n)
                _tile_stored(1, t[1].tile, t[1].stride);
            if (two_m)
                _tile_stored(2, t[2].tile, t[2].stride);
            if (two_m && two_n)
                _tile_stored(3, t[3].tile, t[3].stride);
            mm_barrier();
            for (int i = 0; i < 4; i++)
                if (t[i].vr)
                    ctile_finish(&t[i], ldc);
        }
}

static void amx_gemm(int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t lda,
                     const uint32_t *Bp, int64_t ldbp, const float *rowscale, float *C,
                     int64_t ldc)
{
    amx_gemm_core(M, N, 1, &A, lda, K, Bp, ldbp, rowscale, C, ldc);
}

static void amx_gemm_acc_segs(int64_t M, int64_t N, int nseg, const uint16_t *const *A,
                              int64_t lda, int64_t kseg, const uint32_t *Bp, int64_t ldbp,
                              const float *ones, float *C, int64_t ldc)
{
    amx_gemm_core(M, N, nseg, A, lda, kseg, Bp, ldbp, ones, C, ldc);
}

/* ---- the forward's fused tile (kernels.h fwd_tile) ----------------------------------------
 *
 * Chunks of 32 rows (two row tiles): S = Q K^T into a 32 x cols float32 buffer, the softmax row
 * by row into P (bf16), then acc = alpha acc + P V; the same instructions in the same order per
 * row as amx_gemm / softmax / amx_gemm, so the same bits. Two S buffers: with overlap, chunk
 * c + 1's S product is cut into steps (one k-step of one 2 x 2 block, or its store) issued
 * between the softmax rows of chunk c, so the tile unit runs while the vector units compute the
 * exponentials (tdpbf16ps is one instruction of 16 cycles on the tile unit; the out-of-order
 * core keeps issuing the softmax behind it). The S product and P V take turns on the 8 tiles:
 * the product of chunk c + 1 is finished before P V of chunk c starts. With klo / khi (a
 * causal or window edge) the scores a row does not see become -inf between the S product and
 * its softmax, as the chunked path masks them. */

/* S = Q K^T of one chunk (16 or 32 rows) in steps. */
typedef struct sjob {
    const uint16_t *a;   /* the chunk's Q rows */
    int64_t sa;          /* bytes */
    const uint32_t *b;   /* kp */
    int64_t ldb;         /* words */
    float *s;            /* out, row stride lds floats */
    int64_t lds, cols, ksteps;
    int two_m;
    int64_t n0, k;       /* next step: block of columns n0 .. n0 + 31, k-step k (ksteps: store) */
} sjob;

static void sjob_init(sjob *j, const cpu_mm_fwd *f, int64_t r0, float *s)
{
    j->a = f->q + r0 * f->ldq, j->sa = f->ldq * 2;
    j->b = f->kp, j->ldb = f->ldkp;
    j->s = s, j->lds = f->lds, j->cols = f->cols;
    j->ksteps = (f->D + 31) / 32;
    j->two_m = f->rows - r0 > 16;
    j->n0 = 0, j->k = 0;
}

/* One step; 0 when the product is complete. */
static inline int sjob_step(sjob *j)
{
    if (j->n0 >= j->cols)
        return 0;
    const int two_n = j->cols - j->n0 > 16;
    if (j->k < j->ksteps) {
        if (j->k == 0) {
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
        }
        const uint16_t *a = j->a + j->k * 32;
        const uint32_t *b = j->b + j->k * 16 * j->ldb + j->n0;
        const int64_t sb = j->ldb * 4;
        _tile_loadd(4, a, j->sa);
        _tile_loadd(6, b, sb);
        if (two_n)
            _tile_loadd(7, b + 16, sb);
        _tile_dpbf16ps(0, 4, 6);
        if (two_n)
            _tile_dpbf16ps(1, 4, 7);
        if (j->two_m) {
            _tile_loadd(5, (const char *)a + 16 * j->sa, j->sa);
            _tile_dpbf16ps(2, 5, 6);
            if (two_n)
                _tile_dpbf16ps(3, 5, 7);
        }
        j->k++;
        return 1;
    }
    float *c = j->s + j->n0;
    const int64_t ss = j->lds * 4;
    _tile_stored(0, c, ss);
    if (two_n)
        _tile_stored(1, c + 16, ss);
    if (j->two_m) {
        _tile_stored(2, c + 16 * j->lds, ss);
        if (two_n)
            _tile_stored(3, c + 16 * j->lds + 16, ss);
    }
    j->k = 0, j->n0 += 32;
    return j->n0 < j->cols;
}

/* acc (nr = 16 or 32 rows) = diag(alpha) acc + P V in steps, as amx_gemm with rowscale on whole
 * tiles: the rescale of the rows whose alpha is not 1, then per block of 32 columns of acc one
 * step per k-step (the first loads the C tiles) and one for the store. */
typedef struct pvjob {
    const uint16_t *p;   /* the chunk's P rows, ldp elements apart */
    int64_t ldp;
    const uint32_t *b;   /* vp */
    int64_t ldb;         /* words */
    float *acc;          /* the chunk's first row */
    int64_t lda;
    const float *alpha;  /* the chunk's */
    int64_t nr, Dv, cols;
    int started;         /* the rescale is done */
    int64_t d0, k;       /* next step: columns d0 .. d0 + 31 of acc, k-step k (kmax: store) */
} pvjob;

static void pvjob_init(pvjob *j, const cpu_mm_fwd *f, int64_t r0, const uint16_t *p)
{
    j->p = p, j->ldp = f->ldp, j->b = f->vp, j->ldb = f->ldvp;
    j->acc = f->acc + r0 * f->lda, j->lda = f->lda, j->alpha = f->alpha + r0;
    j->nr = f->rows - r0 < 32 ? f->rows - r0 : 32, j->Dv = f->Dv, j->cols = f->cols;
    j->started = 0, j->d0 = 0, j->k = 0;
}

static int64_t pvjob_steps(const pvjob *j)
{
    return 1 + (j->Dv + 31) / 32 * ((j->cols + 31) / 32 + 1);
}

/* One step; 0 when the product is complete. */
static inline int pvjob_step(pvjob *j)
{
    if (!j->started) {
        for (int64_t r = 0; r < j->nr; r++)
            if (j->alpha[r] != 1.0f) {
                float *row = j->acc + r * j->lda;
                const __m512 a = _mm512_set1_ps(j->alpha[r]);
                for (int64_t d = 0; d < j->Dv; d += 16)
                    _mm512_storeu_ps(row + d, _mm512_mul_ps(a, _mm512_loadu_ps(row + d)));
            }
        mm_barrier();
        j->started = 1;
        return 1;
    }
    if (j->d0 >= j->Dv)
        return 0;
    const int two_m = j->nr > 16, two_n = j->Dv - j->d0 > 16;
    const int64_t sc = j->lda * 4;
    float *c = j->acc + j->d0;
    const int64_t k0 = j->k * 32;
    if (k0 < j->cols) {
        if (j->k == 0) {
            _tile_loadd(0, c, sc);
            if (two_n)
                _tile_loadd(1, c + 16, sc);
            if (two_m) {
                _tile_loadd(2, c + 16 * j->lda, sc);
                if (two_n)
                    _tile_loadd(3, c + 16 * j->lda + 16, sc);
            }
        }
        const int64_t sa = j->ldp * 2, sb = j->ldb * 4;
        const uint32_t *b = j->b + (k0 / 2) * j->ldb + j->d0;
        _tile_loadd(4, j->p + k0, sa);
        _tile_loadd(6, b, sb);
        if (two_n)
            _tile_loadd(7, b + 16, sb);
        _tile_dpbf16ps(0, 4, 6);
        if (two_n)
            _tile_dpbf16ps(1, 4, 7);
        if (two_m) {
            _tile_loadd(5, j->p + 16 * j->ldp + k0, sa);
            _tile_dpbf16ps(2, 5, 6);
            if (two_n)
                _tile_dpbf16ps(3, 5, 7);
        }
        j->k++;
        return 1;
    }
    _tile_stored(0, c, sc);
    if (two_n)
        _tile_stored(1, c + 16, sc);
    if (two_m) {
        _tile_stored(2, c + 16 * j->lda, sc);
        if (two_n)
            _tile_stored(3, c + 16 * j->lda + 16, sc);
    }
    mm_barrier();
    j->k = 0, j->d0 += 32;
    return j->d0 < j->Dv;
}

/* overlap 0: each chunk's S, softmax, P V in turn; 1: chunk c + 1's S product in steps between
 * the softmax rows of chunk c; 2: also chunk c - 1's P V (P in two buffers), so that only the
 * first S product and the last P V run without the vector work beside them. */
static void amx_fwd_tile(const cpu_mm_fwd *f)
{
    const int64_t kns = (f->cols + 15) / 16 * 16, lds = f->lds;
    const int64_t ksteps = (f->D + 31) / 32, nblk = (f->cols + 31) / 32;
    const int mode = f->overlap;
    sjob sj;
    pvjob pj = {0};
    int pv_pending = 0; /* mode 2: pj holds the previous chunk's P V, not started */
    sjob_init(&sj, f, 0, f->s);
    while (sjob_step(&sj))
        ;
    for (int64_t r0 = 0; r0 < f->rows; r0 += 32) {
        const int64_t nr = f->rows - r0 < 32 ? f->rows - r0 : 32, c = r0 / 32;
        float *s = f->s + (c & 1) * 32 * lds;
        uint16_t *p = f->p + (mode == 2 ? (c & 1) * 32 * f->ldp : 0);
        const int next = r0 + 32 < f->rows;
        int s_on = next, pv_on = pv_pending;
        if (next)
            sjob_init(&sj, f, r0 + 32, f->s + ((c + 1) & 1) * 32 * lds);
        /* steps of the other products per softmax row, spread over the chunk */
        const int64_t steps = (s_on && mode ? nblk * (ksteps + 1) : 0) +
                              (pv_on ? pvjob_steps(&pj) : 0);
        const int64_t per = (steps + nr - 1) / nr;
        mm_barrier();
        for (int64_t r = 0; r < nr && (f->klo || f->cols < kns); r++) {
            float *row = s + r * lds;
            int64_t a = 0, e = f->cols;
            if (f->klo)
                a = f->klo[r0 + r], e = f->khi[r0 + r];
            for (int64_t q = 0; q < a; q++)
                row[q] = -__builtin_inff();
            for (int64_t q = e; q < kns; q++)
                row[q] = -__builtin_inff();
        }
        if (!per) /* nothing to interleave: the chunk's rows in one call */
            cpu_kernels_avx512_mm_softmax(s, lds, nr, kns, f->scale, f->m + r0, f->l + r0,
                                          f->alpha + r0, p, f->ldp);
        for (int64_t r = 0; r < nr && per; r++) {
            cpu_kernels_avx512_mm_softmax(s + r * lds, lds, 1, kns, f->scale, f->m + r0 + r,
                                          f->l + r0 + r, f->alpha + r0 + r, p + r * f->ldp,
                                          f->ldp);
            for (int64_t u = 0; u < per; u++) {
                if (s_on && mode)
                    s_on = sjob_step(&sj);
                else if (pv_on)
                    pv_on = pvjob_step(&pj);
            }
        }
        while (s_on)
            s_on = sjob_step(&sj);
        while (pv_on)
            pv_on = pvjob_step(&pj);
        mm_barrier();
        pvjob_init(&pj, f, r0, p);
        pv_pending = mode == 2;
        if (!pv_pending)
            while (pvjob_step(&pj))
                ;
    }
    if (pv_pending)
        while (pvjob_step(&pj))
            ;
}

const cpu_mm_bf16 cpu_mm_bf16_amx = {
    .unit = "amx",
    .begin = amx_begin,
    .end = amx_end,
    .pack_b = cpu_mm_avx512_pack_b,
    .pack_bt = cpu_mm_avx512_pack_bt,
    .gemm = amx_gemm,
    .gemm_acc_segs = amx_gemm_acc_segs,
    .softmax = cpu_kernels_avx512_mm_softmax,
    .fwd_tile = amx_fwd_tile,
    .split = cpu_mm_avx512_split,
    .split_cvt = cpu_mm_avx512_split_cvt,
    .pack_at = cpu_mm_avx512_pack_at,
    .transpose = cpu_mm_avx512_transpose,
    .p_ds = cpu_kernels_avx512_mm_p_ds,
    .p_ds_split = cpu_mm_avx512_p_ds_split,
};
#endif
