/*
 * kernels.h — the CPU micro-kernel contract (BLIS-style).
 *
 * The tiled loop nests (attn_fwd.c, attn_bwd.c, rmsnorm.c, swiglu.c) are portable; only the
 * small products on tiles, the exponentials and the typed row conversions change per
 * instruction set. One table per ISA:
 *   cpu_kernels_scalar  kernels/scalar.c  plain C: the reference of every entry and the fallback
 *   cpu_kernels_avx2    kernels/avx2.c     AVX2 + FMA + F16C      (x86-64)
 *   cpu_kernels_avx512  kernels/avx512.c   AVX-512 F/BW/VL/BF16   (x86-64)
 *   cpu_kernels_neon    kernels/neon.c     NEON                   (AArch64)
 *   cpu_kernels_avx512bf16, cpu_kernels_amx   the avx512 table plus bf16 matrix products
 *                       (cpu_mm_bf16 below) on vdpbf16ps (kernels/avx512bf16.c) or AMX tiles
 *                       (kernels/amx.c)
 *   cpu_kernels_bf16ref the scalar table plus the portable C model of cpu_mm_bf16 (scalar.c):
 *                       the reference the bf16 units are tested against, and the way the loop
 *                       nests' bf16 path is tested on CPUs without a unit. Never chosen
 *                       automatically (only by FLASHC_ISA=bf16ref or by the tests).
 * The SIMD tables are one source (kernels_simd.h, written against simd.h) compiled per ISA.
 * cpu_kernels_get() picks the best table the CPU supports once; FLASHC_ISA=scalar|avx2|avx512|
 * avx512bf16|amx|neon|bf16ref in the environment forces one (a table the CPU cannot run falls
 * back to the best one it can; flashc_build_info() names the table in use and, when a bf16 unit
 * was refused, why).
 *
 * Tiles are row-major float32 with an explicit leading dimension (in floats) unless said
 * otherwise. Every kernel accepts any size >= 1 (tails are handled inside), any alignment, and
 * is reentrant (no state, no allocation), so it may be called from any OpenMP thread.
 */
#ifndef FLASHC_CPU_KERNELS_H
#define FLASHC_CPU_KERNELS_H

#include "flashc.h"

#include <stdint.h>

/* ---- bf16 matrix products (an optional sub-table) ---------------------------------------
 *
 * Products on bfloat16 operands with float32 accumulation, in the layout both x86 units want:
 * vdpbf16ps (AVX512-BF16) and tdpbf16ps (AMX-BF16) multiply pairs of bf16 along the reduction
 * dimension k, so the B operand is stored "VNNI-packed": as 32-bit words, word n of pair-row kk
 * holding B[2kk][n] in its low 16 bits and B[2kk+1][n] in its high 16 bits:
 *     Bp[kk * ldbp + n] = B[2kk][n] | B[2kk+1][n] << 16     (kk < Kp / 2, n < Np)
 * with Kp = round_up(K, CPU_MM_KP) and Np = round_up(N, 16); the padding (k >= K, n >= N) holds
 * zeros. An AMX B tile is 16 pair-rows x 16 words (K 32 x N 16), a C tile 16 x 16 float32.
 * The A operand is plain row-major bf16 (M x K, lda elements) whose columns K .. Kp - 1 are
 * zero (the caller pads its rows), and whose rows M .. round_up(M, 16) - 1 are readable memory
 * (their values only reach rows of C that are not written). bf16 has float32's range: no
 * operand is scaled, only rounded (once, where it is stored as bf16).
 *
 * Both units treat subnormal inputs as zero and flush subnormal results (bf16 products of
 * attention-sized values are far from 2^-126: the tests hold them to the 2x rule); NaN and inf
 * propagate as in float32.
 */
enum { CPU_MM_KP = 32 }; /* the reduction dimension is padded to a multiple of this */

#define CPU_MM_P_DS_ARGS                                                                       \
    float *S, float *dP, const float *G, int64_t lds, int64_t rows, int64_t n, float scale,    \
        const float *L, const float *Di, const int64_t *lo, const int64_t *hi, int64_t jlo

struct cpu_mm_fwd;
struct cpu_mm_p_ds_split;
typedef struct cpu_mm_bf16 {
    const char *unit; /* "amx", "avx512bf16", "scalar model" */

    /* Bracket a run of products on the calling thread (one work item of a loop nest): AMX
     * loads its tile configuration (ldtilecfg) in begin and releases the tiles (tilerelease)
     * in end, so code between items (or another library on this thread) never sees our tile
     * state. Must be paired on the same thread; no product runs outside a begin/end pair.   */
    void (*begin)(void);
    void (*end)(void);

    /* Bp (VNNI, see above) from B given by its rows, B (K x N, ldb elements), e.g. a V tile
     * (keys x D) for O += P V. ldbp >= round_up(N, 16) words; Kp / 2 pair-rows written.    */
    void (*pack_b)(const uint16_t *B, int64_t ldb, int64_t K, int64_t N, uint32_t *Bp,
                   int64_t ldbp);
    /* Bp from B transposed, Bt (N x K, ldbt elements): B[k][n] = Bt[n][k], e.g. a K tile
     * (keys x D) for S = Q K^T. Same output as pack_b of the transpose.                     */
    void (*pack_bt)(const uint16_t *Bt, int64_t ldbt, int64_t N, int64_t K, uint32_t *Bp,
                    int64_t ldbp);

    /* C = diag(rowscale) C + A B, or C = A B when rowscale is NULL:
     *   A (M x K bf16, lda >= Kp, padded as above), Bp packed from a K x N B (ldbp words),
     *   C (M x N float32, ldc), rowscale (M) or NULL. Only C's M x N elements are written.
     * Float32 accumulation; the order of the sums is the unit's (pairs first).              */
    void (*gemm)(int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t lda,
                 const uint32_t *Bp, int64_t ldbp, const float *rowscale, float *C, int64_t ldc);
    /* Optional (NULL: none; AMX only): C += A[0] B_0 + A[1] B_1 + ... + A[nseg-1] B_nseg-1,
     * bit for bit the nseg gemm calls C = diag(ones) C + A[s] B_s in a row, where A[s] is
     * M x kseg (lda) and B_s the kseg / 2 pair-rows of Bp from s kseg / 2 on; ones holds M 1s,
     * kseg is a multiple of CPU_MM_KP. Only a unit that adds into C in place (tdpbf16ps) gives
     * those bits with C kept in its registers across the segments; gemm above sums each call
     * from zero on the other units. The backward's dV^T, dK^T of consecutive Q blocks in one
     * pass over their C tiles (attn_bwd.c mm_flush). */
    void (*gemm_acc_segs)(int64_t M, int64_t N, int nseg, const uint16_t *const *A, int64_t lda,
                          int64_t kseg, const uint32_t *Bp, int64_t ldbp, const float *ones,
                          float *C, int64_t ldc);

    /* The forward's online-softmax update of br query rows, base 2, between the products:
     *   S (br x bc float32, lds) raw scores q . k (masked entries -inf), scale > 0 as in
     *   softmax_t (scores to base-2 units, applied by one FMA per score);
     *   P (br x round_up(bc, CPU_MM_KP) bf16, ldp) out: 2^(scale S - m_new) rounded to bf16,
     *   zero in columns bc .. round_up(bc, CPU_MM_KP) - 1 (the next product's A operand);
     *   m (scaled base-2 units), l (sums of the float32 P), alpha (br) as softmax_t.
     * A row that has seen only -inf keeps m = -inf, l = 0, P = 0, alpha = 1. The exponentials
     * may be as coarse as 2.7e-6 relative (AVX-512: simd.h v_exp2_p), far below P's bf16
     * rounding; values below FLT_MIN may become 0.                                          */
    void (*softmax)(const float *S, int64_t lds, int64_t br, int64_t bc, float scale,
                    float *m, float *l, float *alpha, uint16_t *P, int64_t ldp);

    /* The backward's operands (attn_bwd.c mm_*). P and dS are float32 tiles; rounded to bf16
     * once they would carry 8 bits into dV, dK, dQ, which the 2x rule against a naive bf16
     * backward does not allow everywhere (bench/RESULTS.md). So each is split, X = hi + lo with
     * hi = bf16(X), lo = bf16(X - hi) (lo = 0 where X - hi is not finite: X rounded to inf, or
     * NaN, which hi carries): the products of hi and lo with an exact bf16 operand sum to X's
     * within 2^-16 relative, at twice the product's cost.
     * split: X (rows x n float32, ldx), kr = R32(rows), kn = R32(n) ->
     *   a (NULL: not written): an A operand, R16(rows) x 2 kn bf16 (lda >= 2 kn): row r holds
     *     hi of X's row r in columns 0 .. n, zeros to kn, its lo in kn .. kn + n, zeros to 2 kn;
     *     rows rows .. R16(rows) zero. Multiplies a B that holds the same rows twice (pack_b
     *     of B's K rows at pair-row 0 and kn / 2).
     *   bp (NULL: not written): a B operand with K = 2 kr (pair-rows 0 .. kr / 2 from hi's
     *     rows, kr / 2 .. kr from lo's; X's rows rows .. kr zero) and N = n, VNNI-packed,
     *     ldbp >= R16(n) words, columns n .. R16(n) zero. Multiplies an A from pack_at.      */
    void (*split)(const float *X, int64_t ldx, int64_t rows, int64_t n, uint16_t *a,
                  int64_t lda, uint32_t *bp, int64_t ldbp);
    /* Optional (NULL: none): split, bit for bit, with vcvtne2ps2bf16 rounding 32 values at a
     * time where no lane is NaN, inf or denormal in x or x - hi (split's arithmetic elsewhere);
     * opt-in, FLASHC_CPU_BWD_SPLIT=1 (attn_bwd.c make_plan). */
    void (*split_cvt)(const float *X, int64_t ldx, int64_t rows, int64_t n, uint16_t *a,
                      int64_t lda, uint32_t *bp, int64_t ldbp);
    /* X (rows x n bf16, ldx) -> A (R16(n) x 2 kr bf16, lda >= 2 kr, kr = R32(rows)): the
     * transpose of X twice along k, A[c][r] = A[c][kr + r] = X[r][c], zero in columns
     * rows .. kr and kr + rows .. 2 kr and in rows n .. R16(n): the A operand of a split B. */
    void (*pack_at)(const uint16_t *X, int64_t ldx, int64_t rows, int64_t n, uint16_t *A,
                    int64_t lda);
    /* Y (n x rows float32, ldy) = X^T, X (rows x n float32, ldx): the backward's dK, dV rows
     * from its accumulators dK^T, dV^T (attn_bwd.c). A copy: the same bits on every unit.     */
    void (*transpose)(const float *X, int64_t ldx, int64_t rows, int64_t n, float *Y,
                      int64_t ldy);
    /* The backward's P and dS of a tile in float32, in place, before split (attn_bwd.c
     * tile_p_ds): row r sees columns [c0, c1) = [lo[r] - jlo, hi[r] - jlo) clipped to [0, n);
     * there, with x = scale S - L[r] (one FMA),
     *   S <- P = e^x        within 2.7e-6 relative (AVX-512: simd.h v_exp2_p), below the 2^-16
     *                       that split's hi + lo carry; values below FLT_MIN may become 0
     *   dP <- dS = P (dP - Di[r]) G     (G: softcap's 1 - tanh^2, or NULL for 1)
     * and S = dP = 0 outside (whatever they held: a masked score never reaches P or dS). The
     * caller passes scores it modified (softcap, ALiBi) already scaled, with scale 1.       */
    void (*p_ds)(CPU_MM_P_DS_ARGS);
    /* Optional (NULL: p_ds, then split): p_ds without G, and its P and dS straight into their
     * split operands, bit for bit the two steps (p_ds's P and dS, split's halves and padding),
     * without the float32 tiles' round trip through memory (attn_bwd.c mm_pair, the plain case:
     * no softcap, no ALiBi). See cpu_mm_p_ds_split.                                        */
    void (*p_ds_split)(const struct cpu_mm_p_ds_split *a);

    /* Optional (NULL: the loop nest runs gemm, softmax, gemm per chunk itself): the forward's
     * whole update of f->rows query rows against one key tile that every row sees in full (no
     * mask, no score modifier), in chunks of 32 rows, with the same arithmetic as that
     * sequence (bit for bit: S = Q K^T from zero, the softmax above, acc = alpha acc + P V).
     * Inside a begin/end pair. See cpu_mm_fwd.                                              */
    void (*fwd_tile)(const struct cpu_mm_fwd *f);
} cpu_mm_bf16;

/* The arguments of cpu_mm_bf16.fwd_tile. R16 / R32 = round up to 16 / 32. */
typedef struct cpu_mm_fwd {
    const uint16_t *q;  /* rows x R32(D) bf16 (ldq elements), zero columns D .. R32(D)      */
    int64_t ldq;
    int64_t rows;       /* a multiple of 16                                                  */
    int64_t D, Dv;      /* Dv a multiple of 16                                              */
    int64_t cols;       /* keys of the tile, >= 1                                           */
    const uint32_t *kp; /* K tile by pack_bt (N = cols, K = D), ldkp >= R16(cols) words     */
    int64_t ldkp;
    const uint32_t *vp; /* V tile by pack_b (K = cols, N = Dv), ldvp >= Dv words            */
    int64_t ldvp;
    float scale;        /* as softmax                                                        */
    float *m, *l, *alpha; /* rows each: the running softmax state (alpha out)               */
    float *acc;         /* rows x Dv float32 (lda floats), += as the gemm with rowscale     */
    int64_t lda;
    float *s;           /* scratch: 64 x lds float32, lds >= R16(cols)                      */
    int64_t lds;
    uint16_t *p;        /* scratch: 64 x ldp bf16, ldp >= R32(cols)                          */
    int64_t ldp;
    int overlap;        /* 0: chunk by chunk; 1: the next chunk's S = Q K^T is issued between
                         * the softmax rows of this one (the matrix unit and the vector units
                         * in parallel); 2: the previous chunk's P V too                     */
    const int32_t *klo, *khi; /* NULL: every row sees every key; else rows each: row r sees
                         * keys [klo[r], khi[r]) of the tile only (khi >= klo): the others'
                         * scores are -inf before its softmax (P = 0; a row that sees none
                         * keeps m, l and acc). V must then be finite (0 x inf = NaN).     */
} cpu_mm_fwd;
/* The arguments of cpu_mm_bf16.p_ds_split. R16 / R32 = round up to 16 / 32, kr = R32(rows),
 * kn = R32(n). P and dS are p_ds's (G = NULL) of S, dP; each output is split's (kernels.h
 * split) of that float32 tile, every word of its extent written, padding included. */
typedef struct cpu_mm_p_ds_split {
    float *S, *dP;      /* rows x n float32 (lds floats a row): scores, dO V^T             */
    int64_t lds, rows, n;
    float scale;        /* the rest as p_ds                                                */
    const float *L, *Di;
    const int64_t *lo, *hi;
    int64_t jlo;
    uint32_t *pb;       /* NULL, or P as split's bp (2 kr / 2 pair-rows, ldpb >= R16(n))    */
    uint32_t *dsp;      /* NULL, or dS as split's bp (ldpb)                                 */
    int64_t ldpb;
    uint16_t *dsa;      /* NULL, or dS as split's a in segments of columns [0, seg0), then
                         * [seg0, seg0 + seg), ...: the segment of columns [o, o + len) is
                         * split's a of X + o (len columns) at dsa + 2 o, ldds elements a row
                         * (its R32(len) hi columns, then as many lo ones); R16(rows) rows.
                         * seg0 and seg multiples of 32 (seg0 >= n: one segment)           */
    int64_t ldds, seg0, seg;
    int keep_ds;        /* 1: dP <- dS as p_ds leaves it (zeros outside the rows' ranges);
                         * 0: S and dP are only read                                        */
} cpu_mm_p_ds_split;

/* The score modifiers of the attention v2 contract, as the kernels apply them (see the
 * score_mod_t / score_mod_row entries). */
typedef struct cpu_score_mod {
    float scale;     /* applied first: s = scale * raw                                  */
    float softcap;   /* > 0: s = softcap * tanh(s / softcap); 0 = off                    */
    float slope;     /* ALiBi: s -= slope * |distance|; 0 = off                          */
    float out_scale; /* applied last (log2 e to hand softmax_t base-2 units; else 1)      */
} cpu_score_mod;

typedef struct cpu_kernels {
    const char *name;

    /* bf16 products on a matrix unit, or NULL (no unit: the loop nests use the float32
     * entries below for every dtype). For bfloat16 storage only (the forward's mm_* path in
     * attn_fwd.c, prefill shapes: Sq >= 8). float16 converted to bf16 loses 3 mantissa bits,
     * which breaks the 2x rule against a float16 naive attention (measured: bench/RESULTS.md,
     * "float16 storage through the bf16 units").                                          */
    const cpu_mm_bf16 *bf16;

    /* ---- tile products ---------------------------------------------------------------- */

    /* C = diag(rowscale) C + A B, or C = A B when rowscale is NULL.
     *   A (M x K): element (m, k) at A[m * as_m + k * as_k]  (any strides: P or P^T, K rows)
     *   B (K x N, ldb) row-major, C (M x N, ldc), rowscale (M) or NULL.
     * The forward's two products are both this shape: S^T = K (Q^T) and O = a O + (P^T)^T V. */
    void (*gemm)(int64_t M, int64_t N, int64_t K, const float *A, int64_t as_m, int64_t as_k,
                 const float *B, int64_t ldb, const float *rowscale, float *C, int64_t ldc);

    /* S[i][j] = scale * sum_d Q[i][d] * K[j][d]     Q (br x D, ldq), K (bc x D, ldk),
     * S (br x bc, lds). (Used by the backward; the forward uses gemm on a packed Q^T.)        */
    void (*qk)(const float *Q, int64_t ldq, const float *K, int64_t ldk, int64_t br,
               int64_t bc, int64_t D, float scale, float *S, int64_t lds);

    /* Online-softmax update of br rows over one tile of scores, in place, natural exp:
     *   S (br x bc, lds) scores, masked entries -inf  ->  P = exp(S - m_new)
     *   m, l (br): running max and sum; alpha (br) out: exp(m_old - m_new), the factor the
     *   caller applies to its accumulator row (1 when the max did not grow).                */
    void (*softmax)(float *S, int64_t lds, int64_t br, int64_t bc, float *m, float *l,
                    float *alpha);

    /* The same update on a transposed tile in base 2, scaling on the way: St (bc x n, ldst)
     * holds column i = the raw scores q_i . k_j of query row i (masked entries -inf); replaced
     * by P^T = 2^(scale * St - m_new). m (n) is kept in scaled units (scale > 0, so the max
     * commutes with it), l, alpha (n) as above with 2^ for exp. The forward passes
     * scale = softmax_scale * log2(e): one FMA per score applies it, more accurately than
     * pre-scaling Q. A column that has seen only -inf keeps m = -inf, l = 0, P = 0, alpha = 1.
     * Vectorised over the queries (columns): max and sum are vertical, no horizontal steps. */
    void (*softmax_t)(float *St, int64_t ldst, int64_t bc, int64_t n, float scale, float *m,
                      float *l, float *alpha);

    /* O[i][d] = alpha[i] * O[i][d] + sum_j P[i][j] * V[j][d]    P (br x bc, ldp),
     * V (bc x D, ldv), O (br x D, ldo).                                                       */
    void (*pv)(const float *P, int64_t ldp, const float *V, int64_t ldv, int64_t br,
               int64_t bc, int64_t D, const float *alpha, float *O, int64_t ldo);

    /* ---- element-wise --------------------------------------------------------------------- */

    /* y[i] = e^x[i] and y[i] = 2^x[i] (n values) with the vector kernels' accuracy: the
     * bounds are documented at v_exp / v_exp2_ftz in simd.h and tested against libm in double. */
    void (*exp)(const float *x, float *y, int64_t n);
    void (*exp2)(const float *x, float *y, int64_t n);

    /* dst[i] = (float) src[i], src of dtype dt, contiguous, n values. */
    void (*load_row)(const void *src, flashc_dtype dt, int64_t n, float *dst);
    /* dst[i] = (dt) (src[i] * scale), rounded to nearest even, n values. */
    void (*store_row)(const float *src, float scale, int64_t n, void *dst, flashc_dtype dt);

    /* One RMSNorm row of D elements of dtype dt, element strides sx, sr, sw, sy:
     *   r == NULL: y = x * rstd * w;  else x' = x + r is stored to xw (the residual stream,
     *   rounded to dt) and y = x' * rstd * w with rstd = 1 / sqrt(mean(x'^2) + eps), where
     *   x' is the stored (rounded) value. Sums in float32.                                    */
    void (*rmsnorm_row)(const void *x, int64_t sx, const void *r, int64_t sr, void *xw,
                        const void *w, int64_t sw, void *y, int64_t sy, int64_t D, float eps,
                        flashc_dtype dt);
    /* (Where the float32 sum of squares overflows or underflows, the row's rstd comes from
     *  cpu_rms_rstd_rescaled instead: |x| >~ 2e19 or all |x| <~ 1e-19.)                       */

    /* One SwiGLU row: y[i] = silu(g[i]) * u[i], g = gu[0..I), u = gu[I..2I) (element stride
     * sgu), y stride sy; silu(g) = g / (1 + e^-g).                                            */
    void (*swiglu_row)(const void *gu, int64_t sgu, void *y, int64_t sy, int64_t I,
                       flashc_dtype dt);

    /* The backward's D_i = dO_i . O_i (attn_bwd.c compute_di) of CPU_DI_ROWS rows at once:
     *   out[r] = (float) sum_d (double) a[ao[r] + d sa] * (double) b[bo[r] + d sb],
     * d = 0 .. n - 1, a and b of dtype dt (element offsets and strides), each row its own
     * float64 sum in feature order. The products of float32 values are exact in float64, so
     * every table gives the same bits (the scalar loop's).                                   */
    void (*di_rows)(const void *a, const int64_t *ao, int64_t sa, const void *b,
                    const int64_t *bo, int64_t sb, int64_t n, flashc_dtype dt, float *out);

    /* ---- attention v2 forward: score modifiers, masks (src/cpu/attn_fwd.c) -------------
     * Kept in one block so that other additions to this table merge cleanly. */

    /* Transposed score tile St (bc x n, ldst; column r = query row r, row c = key c):
     *   St[c][r] = out_scale * mod(scale * St[c][r])
     * mod = softcap (when mod->softcap > 0), then the ALiBi bias -slope * |d0 + r - c|
     * (d0 = the position a of query row 0 minus the key index of row 0; distances are exact
     * below 2^24). The vector tanh: max relative error 3e-7 (tests/test_cpu_kernels.c).       */
    void (*score_mod_t)(float *St, int64_t ldst, int64_t bc, int64_t n, const cpu_score_mod *mod,
                        int64_t d0);
    /* One row of n scores: s[c] = out_scale * mod(scale * s[c]) with distance |d0 - c|.      */
    void (*score_mod_row)(float *s, int64_t n, const cpu_score_mod *mod, int64_t d0);
    /* St (bc x n, ldst): St[c][r] = -inf unless lo[r] <= c < hi[r] (lo, hi (n): key indices
     * of the tile as floats; exact integers). The key-range mask of a straddling tile.       */
    void (*mask_t)(float *St, int64_t ldst, int64_t bc, int64_t n, const float *lo,
                   const float *hi);
    /* Nonzero when some x[r * ld + d] (r < rows, d < n) is NaN or +-inf: a straddling tile
     * whose V holds one takes the per-row product, so that a masked P entry (0) never
     * multiplies it (0 * inf = NaN would reach rows that cannot see that key).              */
    int (*nonfinite)(const float *x, int64_t ld, int64_t rows, int64_t n);
} cpu_kernels;

/* RMSNorm's 1 / sqrt(mean(x^2) + eps) for a row whose float32 sum of squares is ss, as a pair:
 * y = (x / *div) * returned * w. In the ordinary case (ss finite and >= 2^-64, or NaN) *div is
 * 1 and the return is the plain rstd. Otherwise the row's (x / max|x|)^2, which neither
 * overflows nor underflows, is summed and rescaled in float64; where that rstd is a normal
 * float, *div is 1 again, and where it is not (a row of subnormals, whose 1 / |x| overflows; a
 * row near FLT_MAX, whose rstd is subnormal) *div = max|x| and the return is rstd * max|x|.
 * x has D elements of dtype dt at element stride sx. */
float cpu_rms_rstd_rescaled(const void *x, int64_t sx, int64_t D, float eps, float ss,
                            flashc_dtype dt, float *div);

/* The rows of one di_rows call. */
enum { CPU_DI_ROWS = 8 };
/* di_rows in plain C (scalar.c): the scalar tables' entry and the SIMD tables' without one of
 * their own (kernels_simd.h SIMD_DI_ROWS). */
void cpu_di_rows_scalar(const void *a, const int64_t *ao, int64_t sa, const void *b,
                        const int64_t *bo, int64_t sb, int64_t n, flashc_dtype dt, float *out);

extern const cpu_kernels cpu_kernels_scalar;
extern const cpu_kernels cpu_kernels_bf16ref;
extern const cpu_mm_bf16 cpu_mm_bf16_ref;
#if defined(__x86_64__) || defined(_M_X64)
extern const cpu_kernels cpu_kernels_avx2;
extern const cpu_kernels cpu_kernels_avx512;
extern const cpu_kernels cpu_kernels_avx512bf16;
extern const cpu_kernels cpu_kernels_amx;        /* chosen automatically where AMX is usable  */
extern const cpu_mm_bf16 cpu_mm_bf16_avx512;      /* avx512bf16: chosen on AMD only (dispatch.c) */
extern const cpu_mm_bf16 cpu_mm_bf16_amx;
#endif

/* cpu_mm_bf16.softmax written once in the SIMD vocabulary (kernels_simd.h), one instance per
 * SIMD table: the avx512 one serves the bf16 sub-tables; the tests check every instance. */
#define CPU_MM_SOFTMAX_ARGS                                                                    \
    const float *S, int64_t lds, int64_t br, int64_t bc, float scale, float *m, float *l,      \
        float *alpha, uint16_t *P, int64_t ldp
#if defined(__x86_64__) || defined(_M_X64)
void cpu_kernels_avx2_mm_softmax(CPU_MM_SOFTMAX_ARGS);
void cpu_kernels_avx512_mm_softmax(CPU_MM_SOFTMAX_ARGS);
void cpu_kernels_avx2_mm_p_ds(CPU_MM_P_DS_ARGS);
void cpu_kernels_avx512_mm_p_ds(CPU_MM_P_DS_ARGS);
#endif
#if defined(__aarch64__)
void cpu_kernels_neon_mm_softmax(CPU_MM_SOFTMAX_ARGS);
void cpu_kernels_neon_mm_p_ds(CPU_MM_P_DS_ARGS);
#endif
#if defined(__aarch64__)
extern const cpu_kernels cpu_kernels_neon;
#endif

/* The table for this machine (chosen once, thread-safe): FLASHC_ISA if set and runnable,
 * else the best the CPU supports. */
const cpu_kernels *cpu_kernels_get(void);

/* 1 where vdpbf16ps issues at the FMA's instruction rate (twice its flops): AMD's cores with
 * AVX512-BF16 (Zen 4 and later); 0 on Intel's, where it runs at half that (dispatch.c). Decides
 * whether avx512bf16 is chosen automatically and whether the backward takes its unit. */
int cpu_dpbf16_full_rate(void);

/* The table named name ("scalar", "avx2", "avx512", "avx512bf16", "amx", "neon", "bf16ref") if
 * this build has it and this CPU can run it, else NULL. The tests iterate over these. For "amx"
 * this asks Linux for the tile-data permission (once per process, thread-safe); a refusal makes
 * it NULL, and cpu_kernels_note() says why. */
const cpu_kernels *cpu_kernels_by_name(const char *name);

/* Every ISA name this build knows, best last, NULL-terminated. */
extern const char *const cpu_isa_names[];

/* Why a bf16 unit this CPU has is not usable ("" when none was refused), e.g. "amx: the kernel
 * refused the tile-data permission (arch_prctl: Operation not permitted)". For
 * flashc_build_info(). */
const char *cpu_kernels_note(void);

/* Makes cpu_kernels_get() return t (NULL: back to the automatic choice). For tests, which
 * run every path in one process; not thread-safe against concurrent flashc calls. */
void cpu_kernels_force(const cpu_kernels *t);

#endif /* FLASHC_CPU_KERNELS_H */
