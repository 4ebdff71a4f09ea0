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

static void amx_gemm(int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t lda,
                     const uint32_t *Bp, int64_t ldbp, const float *rowscale, float *C,
                     int64_t ldc)
{
    float scratch[4][256] __attribute__((aligned(64)));
    const int64_t sa = lda * 2, sb = ldbp * 4; /* tile strides in bytes */
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
                if (in && (rowscale || t[i].vr < 16 || t[i].vc < 16))
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
            const uint16_t *a = A + m0 * lda;
            for (int64_t k0 = 0; k0 < K; k0 += 32) {
                const uint32_t *b = Bp + (k0 / 2) * ldbp + n0;
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

const cpu_mm_bf16 cpu_mm_bf16_amx = {
    .unit = "amx",
    .begin = amx_begin,
    .end = amx_end,
    .pack_b = cpu_mm_avx512_pack_b,
    .pack_bt = cpu_mm_avx512_pack_bt,
    .gemm = amx_gemm,
    .softmax = cpu_kernels_avx512_mm_softmax,
};
#endif
