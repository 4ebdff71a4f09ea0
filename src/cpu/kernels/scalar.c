/* kernels/scalar.c — the portable reference micro-kernels: the contract of kernels.h in plain
 * C. The oracle of tests/test_cpu_kernels.c and the fallback on CPUs without a SIMD table. */
#include "internal.h"
#include "kernels.h"

#include <math.h>

static void gemm_scalar(int64_t M, int64_t N, int64_t K, const float *A, int64_t as_m,
                        int64_t as_k, const float *B, int64_t ldb, const float *rowscale,
                        float *C, int64_t ldc)
{
    for (int64_t m = 0; m < M; m++) {
        float *c = C + m * ldc;
        for (int64_t n = 0; n < N; n++)
            c[n] = rowscale ? c[n] * rowscale[m] : 0.0f;
        for (int64_t k = 0; k < K; k++) {
            const float a = A[m * as_m + k * as_k];
            const float *b = B + k * ldb;
            for (int64_t n = 0; n < N; n++)
                c[n] += a * b[n];
        }
    }
}

static void qk_scalar(const float *Q, int64_t ldq, const float *K, int64_t ldk, int64_t br,
                      int64_t bc, int64_t D, float scale, float *S, int64_t lds)
{
    for (int64_t i = 0; i < br; i++)
        for (int64_t j = 0; j < bc; j++) {
            float acc = 0.0f;
            for (int64_t d = 0; d < D; d++)
                acc += Q[i * ldq + d] * K[j * ldk + d];
            S[i * lds + j] = acc * scale;
        }
}

static void softmax_scalar(float *S, int64_t lds, int64_t br, int64_t bc, float *m, float *l,
                           float *alpha)
{
    for (int64_t i = 0; i < br; i++) {
        float *s = S + i * lds;
        float mx = m[i];
        for (int64_t j = 0; j < bc; j++) /* a NaN score sticks, so it reaches O */
            mx = s[j] > mx || isnan(s[j]) ? s[j] : mx;
        if (mx == -INFINITY) { /* nothing visible yet: keep the empty state, P = 0 */
            for (int64_t j = 0; j < bc; j++)
                s[j] = 0.0f;
            alpha[i] = 1.0f;
            continue;
        }
        /* Rescale only when the max grew; exp(-inf - mx) = 0 on the first visible tile. */
        const float a = mx > m[i] ? expf(m[i] - mx) : 1.0f;
        float sum = 0.0f;
        for (int64_t j = 0; j < bc; j++) {
            const float e = expf(s[j] - mx);
            s[j] = e;
            sum += e;
        }
        l[i] = l[i] * a + sum;
        m[i] = mx;
        alpha[i] = a;
    }
}

static void softmax_t_scalar(float *St, int64_t ldst, int64_t bc, int64_t n, float scale,
                             float *m, float *l, float *alpha)
{
    for (int64_t i = 0; i < n; i++) {
        float mx = -INFINITY; /* max of the raw scores; a NaN score sticks */
        for (int64_t j = 0; j < bc; j++) {
            const float x = St[j * ldst + i];
            mx = x > mx || isnan(x) ? x : mx;
        }
        mx = mx * scale > m[i] || isnan(mx) ? mx * scale : m[i];
        if (mx == -INFINITY) {
            for (int64_t j = 0; j < bc; j++)
                St[j * ldst + i] = 0.0f;
            alpha[i] = 1.0f;
            continue;
        }
        const float a = exp2f(m[i] - mx);
        /* past |m| ~ 2^28 the FMA's exact residual of the max is no longer ~0 (simd: F5) */
        const int big = fabsf(mx) > 0x1p28f;
        float sum = 0.0f;
        for (int64_t j = 0; j < bc; j++) {
            const float x = St[j * ldst + i];
            const float e = exp2f(big ? x * scale - mx : fmaf(x, scale, -mx));
            St[j * ldst + i] = e;
            sum += e;
        }
        l[i] = l[i] * a + sum;
        m[i] = mx;
        alpha[i] = a;
    }
}

static void pv_scalar(const float *P, int64_t ldp, const float *V, int64_t ldv, int64_t br,
                      int64_t bc, int64_t D, const float *alpha, float *O, int64_t ldo)
{
    for (int64_t i = 0; i < br; i++) {
        float *o = O + i * ldo;
        if (alpha[i] != 1.0f)
            for (int64_t d = 0; d < D; d++)
                o[d] *= alpha[i];
        for (int64_t j = 0; j < bc; j++) {
            const float pij = P[i * ldp + j];
            const float *vr = V + j * ldv;
            for (int64_t d = 0; d < D; d++)
                o[d] += pij * vr[d];
        }
    }
}

static void exp_scalar(const float *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = expf(x[i]);
}

static void exp2_scalar(const float *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = exp2f(x[i]);
}

static void load_row_scalar(const void *src, flashc_dtype dt, int64_t n, float *dst)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = flashc__load(src, dt, i);
}

static void store_row_scalar(const float *src, float scale, int64_t n, void *dst,
                             flashc_dtype dt)
{
    for (int64_t i = 0; i < n; i++)
        flashc__store(dst, dt, i, src[i] * scale);
}

float cpu_rms_rstd_rescaled(const void *x, int64_t sx, int64_t D, float eps, float ss,
                            flashc_dtype dt, float *div)
{
    *div = 1.0f;
    const float plain = 1.0f / sqrtf(ss / (float)D + eps);
    if (!(isinf(ss) || ss < 0x1p-64f)) /* the ordinary case, and NaN */
        return plain;
    float amax = 0.0f;
    for (int64_t d = 0; d < D; d++) {
        const float a = fabsf(flashc__load(x, dt, d * sx));
        amax = a > amax ? a : amax;
    }
    if (amax == 0.0f || !isfinite(amax)) /* zeros; Inf in the row: x / Inf is no help */
        return plain;
    float s = 0.0f; /* terms <= 1: the sum is at most D */
    for (int64_t d = 0; d < D; d++) {
        const float u = flashc__load(x, dt, d * sx) / amax;
        s += u * u;
    }
    /* float64 holds a^2 and eps / a^2 for every float a */
    const double a = amax, m = 1.0 / sqrt((double)s / (double)D + (double)eps / (a * a));
    const double rstd = m / a;
    if (rstd >= 0x1p-126 && rstd <= 0x1p+126) /* a normal float: one multiply per element */
        return (float)rstd;
    /* rstd itself is no float (a subnormal x: 1 / |x| overflows; or |x| near FLT_MAX: 1 / |x|
     * is subnormal and loses bits): y = (x / a) * m * w, with m <= sqrt(D) */
    *div = amax;
    return (float)m;
}

static void rmsnorm_row_scalar(const void *x, int64_t sx, const void *r, int64_t sr, void *xw,
                               const void *w, int64_t sw, void *y, int64_t sy, int64_t D,
                               float eps, flashc_dtype dt)
{
    float ss = 0.0f; /* all terms >= 0: no cancellation; float32 holds x = 1e3 squared */
    for (int64_t d = 0; d < D; d++) {
        float v = flashc__load(x, dt, d * sx);
        if (r) {
            /* square what is stored, so y normalises exactly the new residual stream */
            flashc__store(xw, dt, d * sx, v + flashc__load(r, dt, d * sr));
            v = flashc__load(xw, dt, d * sx);
        }
        ss += v * v;
    }
    const void *xs = r ? xw : x;
    float div;
    const float rstd = cpu_rms_rstd_rescaled(xs, sx, D, eps, ss, dt, &div);
    for (int64_t d = 0; d < D; d++)
        flashc__store(y, dt, d * sy,
                      flashc__load(xs, dt, d * sx) / div * rstd * flashc__load(w, dt, d * sw));
}

static void swiglu_row_scalar(const void *gu, int64_t sgu, void *y, int64_t sy, int64_t I,
                              flashc_dtype dt)
{
    for (int64_t i = 0; i < I; i++) {
        const float g = flashc__load(gu, dt, i * sgu);
        const float u = flashc__load(gu, dt, (I + i) * sgu);
        flashc__store(y, dt, i * sy, g / (1.0f + expf(-g)) * u);
    }
}

/* ---- attention v2 forward: score modifiers, masks ------------------------------------- */

static float score_mod1(float s, const cpu_score_mod *m, int64_t dist)
{
    s *= m->scale;
    if (m->softcap > 0.0f)
        s = m->softcap * tanhf(s / m->softcap);
    if (m->slope != 0.0f)
        s -= m->slope * (float)(dist < 0 ? -dist : dist);
    return s * m->out_scale;
}

static void score_mod_t_scalar(float *St, int64_t ldst, int64_t bc, int64_t n,
                               const cpu_score_mod *m, int64_t d0)
{
    for (int64_t c = 0; c < bc; c++)
        for (int64_t r = 0; r < n; r++)
            St[c * ldst + r] = score_mod1(St[c * ldst + r], m, d0 + r - c);
}

static void score_mod_row_scalar(float *s, int64_t n, const cpu_score_mod *m, int64_t d0)
{
    for (int64_t c = 0; c < n; c++)
        s[c] = score_mod1(s[c], m, d0 - c);
}

static void mask_t_scalar(float *St, int64_t ldst, int64_t bc, int64_t n, const float *lo,
                          const float *hi)
{
    for (int64_t c = 0; c < bc; c++)
        for (int64_t r = 0; r < n; r++)
            if (!((float)c >= lo[r] && (float)c < hi[r]))
                St[c * ldst + r] = -INFINITY;
}

static int nonfinite_scalar(const float *x, int64_t ld, int64_t rows, int64_t n)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t d = 0; d < n; d++)
            if (!isfinite(x[r * ld + d]))
                return 1;
    return 0;
}

/* ---- the bf16 matrix products (kernels.h cpu_mm_bf16), modelled in plain C ---------------
 * The same layouts and roundings as the units (VNNI pairs, P rounded to bf16 once, float32
 * sums taken pair by pair); only the order of the float32 sums differs from a unit's. */

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

static void mm_nop(void) {}

static void mm_pack_b_ref(const uint16_t *B, int64_t ldb, int64_t K, int64_t N, uint32_t *Bp,
                          int64_t ldbp)
{
    const int64_t kp = round_up(K, CPU_MM_KP), np = round_up(N, 16);
    for (int64_t kk = 0; kk < kp / 2; kk++)
        for (int64_t n = 0; n < np; n++) {
            const uint32_t lo = 2 * kk < K && n < N ? B[2 * kk * ldb + n] : 0;
            const uint32_t hi = 2 * kk + 1 < K && n < N ? B[(2 * kk + 1) * ldb + n] : 0;
            Bp[kk * ldbp + n] = lo | hi << 16;
        }
}

static void mm_pack_bt_ref(const uint16_t *Bt, int64_t ldbt, int64_t N, int64_t K, uint32_t *Bp,
                           int64_t ldbp)
{
    const int64_t kp = round_up(K, CPU_MM_KP), np = round_up(N, 16);
    for (int64_t kk = 0; kk < kp / 2; kk++)
        for (int64_t n = 0; n < np; n++) {
            const uint32_t lo = 2 * kk < K && n < N ? Bt[n * ldbt + 2 * kk] : 0;
            const uint32_t hi = 2 * kk + 1 < K && n < N ? Bt[n * ldbt + 2 * kk + 1] : 0;
            Bp[kk * ldbp + n] = lo | hi << 16;
        }
}

static void mm_gemm_ref(int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t lda,
                        const uint32_t *Bp, int64_t ldbp, const float *rowscale, float *C,
                        int64_t ldc)
{
    const int64_t kh = (K + 1) / 2; /* pair-rows holding data; the padding is zero */
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            float acc = 0.0f;
            for (int64_t kk = 0; kk < kh; kk++) {
                const uint32_t b = Bp[kk * ldbp + n];
                acc += flashc__bf16_to_f32(A[m * lda + 2 * kk]) *
                           flashc__bf16_to_f32((uint16_t)(b & 0xffffu)) +
                       flashc__bf16_to_f32(A[m * lda + 2 * kk + 1]) *
                           flashc__bf16_to_f32((uint16_t)(b >> 16));
            }
            float *c = C + m * ldc + n;
            *c = rowscale ? rowscale[m] * *c + acc : acc;
        }
}

static void mm_softmax_ref(const float *S, int64_t lds, int64_t br, int64_t bc, float scale,
                           float *m, float *l, float *alpha, uint16_t *P, int64_t ldp)
{
    const int64_t bcp = round_up(bc, CPU_MM_KP);
    for (int64_t i = 0; i < br; i++) {
        const float *s = S + i * lds;
        uint16_t *p = P + i * ldp;
        float mx = -INFINITY; /* max of the raw scores; a NaN score sticks */
        for (int64_t j = 0; j < bc; j++)
            mx = s[j] > mx || isnan(s[j]) ? s[j] : mx;
        mx = mx * scale > m[i] || isnan(mx) ? mx * scale : m[i];
        for (int64_t j = bc; j < bcp; j++)
            p[j] = 0;
        if (mx == -INFINITY) {
            for (int64_t j = 0; j < bc; j++)
                p[j] = 0;
            alpha[i] = 1.0f;
            continue;
        }
        const float a = exp2f(m[i] - mx);
        float sum = 0.0f;
        for (int64_t j = 0; j < bc; j++) {
            const float e = exp2f(fmaf(s[j], scale, -mx));
            p[j] = flashc__f32_to_bf16(e);
            sum += e;
        }
        l[i] = l[i] * a + sum;
        m[i] = mx;
        alpha[i] = a;
    }
}

/* x = hi + lo (kernels.h split): the two bf16 halves of one float32. */
static void mm_split1(float x, uint16_t *hi, uint16_t *lo)
{
    *hi = flashc__f32_to_bf16(x);
    const float r = x - flashc__bf16_to_f32(*hi);
    *lo = r - r == 0.0f ? flashc__f32_to_bf16(r) : 0;
}

static void mm_split_ref(const float *X, int64_t ldx, int64_t rows, int64_t n, uint16_t *a,
                         int64_t lda, uint32_t *bp, int64_t ldbp)
{
    const int64_t kr = round_up(rows, CPU_MM_KP), kn = round_up(n, CPU_MM_KP);
    if (a)
        for (int64_t r = 0; r < round_up(rows, 16); r++)
            for (int64_t c = 0; c < kn; c++) {
                uint16_t hi = 0, lo = 0;
                if (r < rows && c < n)
                    mm_split1(X[r * ldx + c], &hi, &lo);
                a[r * lda + c] = hi;
                a[r * lda + kn + c] = lo;
            }
    if (bp)
        for (int64_t kk = 0; kk < kr / 2; kk++)
            for (int64_t c = 0; c < round_up(n, 16); c++) {
                uint16_t h0 = 0, l0 = 0, h1 = 0, l1 = 0;
                if (2 * kk < rows && c < n)
                    mm_split1(X[2 * kk * ldx + c], &h0, &l0);
                if (2 * kk + 1 < rows && c < n)
                    mm_split1(X[(2 * kk + 1) * ldx + c], &h1, &l1);
                bp[kk * ldbp + c] = h0 | (uint32_t)h1 << 16;
                bp[(kr / 2 + kk) * ldbp + c] = l0 | (uint32_t)l1 << 16;
            }
}

static void mm_pack_at_ref(const uint16_t *X, int64_t ldx, int64_t rows, int64_t n, uint16_t *A,
                           int64_t lda)
{
    const int64_t kr = round_up(rows, CPU_MM_KP);
    for (int64_t c = 0; c < round_up(n, 16); c++)
        for (int64_t r = 0; r < kr; r++)
            A[c * lda + r] = A[c * lda + kr + r] = r < rows && c < n ? X[r * ldx + c] : 0;
}

static void mm_transpose_ref(const float *X, int64_t ldx, int64_t rows, int64_t n, float *Y,
                             int64_t ldy)
{
    for (int64_t c = 0; c < n; c++)
        for (int64_t r = 0; r < rows; r++)
            Y[c * ldy + r] = X[r * ldx + c];
}

/* P and dS of one visible score s (dP value dp, softcap factor g; 1 without): the one place
 * of the model's arithmetic, for p_ds and p_ds_split alike. */
static void mm_pds1(float s, float dp, float scale, float L, float Di, float g, float *p,
                    float *ds)
{
    *p = expf(fmaf(s, scale, -L));
    *ds = *p * (dp - Di) * g;
}

static void mm_p_ds_ref(CPU_MM_P_DS_ARGS)
{
    for (int64_t r = 0; r < rows; r++) {
        int64_t c0 = lo[r] - jlo, c1 = hi[r] - jlo;
        c0 = c0 < 0 ? 0 : c0 > n ? n : c0;
        c1 = c1 < c0 ? c0 : c1 > n ? n : c1;
        for (int64_t j = 0; j < n; j++) {
            float *s = S + r * lds + j, *dp = dP + r * lds + j;
            if (j < c0 || j >= c1) {
                *s = *dp = 0.0f;
                continue;
            }
            mm_pds1(*s, *dp, scale, L[r], Di[r], G ? G[r * lds + j] : 1.0f, s, dp);
        }
    }
}

/* P and dS of element (r, c) as mm_p_ds_ref computes them (G = NULL); 0 outside row r's
 * range and past the tile (r >= rows or c >= n: split's zero padding). */
static void mm_pds_at(const cpu_mm_p_ds_split *g, int64_t r, int64_t c, float *p, float *ds)
{
    *p = *ds = 0.0f;
    if (r >= g->rows || c >= g->n || c < g->lo[r] - g->jlo || c >= g->hi[r] - g->jlo)
        return;
    mm_pds1(g->S[r * g->lds + c], g->dP[r * g->lds + c], g->scale, g->L[r], g->Di[r], 1.0f, p,
            ds);
}

/* p_ds_split, element by element: the two steps' arithmetic (mm_p_ds_ref, mm_split1) and
 * mm_split_ref's layouts; dP is overwritten (keep_ds) only after every output is written. */
static void mm_p_ds_split_ref(const cpu_mm_p_ds_split *g)
{
    const int64_t kr = round_up(g->rows, CPU_MM_KP), n16 = round_up(g->n, 16);
    float p0, d0, p1, d1;
    uint16_t ph0, pl0, ph1, pl1, dh0, dl0, dh1, dl1;
    for (int64_t kk = 0; kk < kr / 2 && (g->pb || g->dsp); kk++)
        for (int64_t c = 0; c < n16; c++) {
            mm_pds_at(g, 2 * kk, c, &p0, &d0);
            mm_pds_at(g, 2 * kk + 1, c, &p1, &d1);
            mm_split1(p0, &ph0, &pl0), mm_split1(p1, &ph1, &pl1);
            mm_split1(d0, &dh0, &dl0), mm_split1(d1, &dh1, &dl1);
            if (g->pb) {
                g->pb[kk * g->ldpb + c] = ph0 | (uint32_t)ph1 << 16;
                g->pb[(kr / 2 + kk) * g->ldpb + c] = pl0 | (uint32_t)pl1 << 16;
            }
            if (g->dsp) {
                g->dsp[kk * g->ldpb + c] = dh0 | (uint32_t)dh1 << 16;
                g->dsp[(kr / 2 + kk) * g->ldpb + c] = dl0 | (uint32_t)dl1 << 16;
            }
        }
    for (int64_t o = 0, len; g->dsa && o < g->n; o += len) {
        len = o == 0 ? (g->seg0 < g->n ? g->seg0 : g->n) : g->n - o < g->seg ? g->n - o : g->seg;
        const int64_t kl = round_up(len, CPU_MM_KP);
        for (int64_t r = 0; r < round_up(g->rows, 16); r++)
            for (int64_t c = 0; c < kl; c++) {
                mm_pds_at(g, r, c < len ? o + c : g->n, &p0, &d0);
                mm_split1(d0, &dh0, &dl0);
                g->dsa[r * g->ldds + 2 * o + c] = dh0;
                g->dsa[r * g->ldds + 2 * o + kl + c] = dl0;
            }
    }
    for (int64_t r = 0; r < g->rows && g->keep_ds; r++)
        for (int64_t c = 0; c < g->n; c++) {
            mm_pds_at(g, r, c, &p0, &d0);
            g->dP[r * g->lds + c] = d0;
        }
}

/* DI_ROWS independent float64 add chains (one a row was latency-bound: bench/RESULTS.md,
 * helper amx13); dt a constant where inlined */
static inline void di_rows_dt(const void *a, const int64_t *ao, int64_t sa, const void *b,
                              const int64_t *bo, int64_t sb, int64_t n, flashc_dtype dt,
                              float *out)
{
    double acc[CPU_DI_ROWS] = {0};
    for (int64_t d = 0; d < n; d++)
        for (int r = 0; r < CPU_DI_ROWS; r++)
            acc[r] += (double)flashc__load(a, dt, ao[r] + d * sa) *
                      (double)flashc__load(b, dt, bo[r] + d * sb);
    for (int r = 0; r < CPU_DI_ROWS; r++)
        out[r] = (float)acc[r];
}

void cpu_di_rows_scalar(const void *a, const int64_t *ao, int64_t sa, const void *b,
                        const int64_t *bo, int64_t sb, int64_t n, flashc_dtype dt, float *out)
{
    switch (dt) {
    case FLASHC_BF16: di_rows_dt(a, ao, sa, b, bo, sb, n, FLASHC_BF16, out); break;
    case FLASHC_F16: di_rows_dt(a, ao, sa, b, bo, sb, n, FLASHC_F16, out); break;
    default: di_rows_dt(a, ao, sa, b, bo, sb, n, FLASHC_F32, out); break;
    }
}

const cpu_mm_bf16 cpu_mm_bf16_ref = {
    .unit = "scalar model",
    .begin = mm_nop,
    .end = mm_nop,
    .pack_b = mm_pack_b_ref,
    .pack_bt = mm_pack_bt_ref,
    .gemm = mm_gemm_ref,
    .softmax = mm_softmax_ref,
    .split = mm_split_ref,
    .pack_at = mm_pack_at_ref,
    .transpose = mm_transpose_ref,
    .p_ds = mm_p_ds_ref,
    .p_ds_split = mm_p_ds_split_ref,
};

#define SCALAR_ENTRIES                                                                         \
    .gemm = gemm_scalar, .qk = qk_scalar, .softmax = softmax_scalar,                           \
    .softmax_t = softmax_t_scalar, .pv = pv_scalar, .exp = exp_scalar, .exp2 = exp2_scalar,    \
    .load_row = load_row_scalar, .store_row = store_row_scalar,                                \
    .rmsnorm_row = rmsnorm_row_scalar, .swiglu_row = swiglu_row_scalar,                        \
    .score_mod_t = score_mod_t_scalar, .score_mod_row = score_mod_row_scalar,                  \
    .mask_t = mask_t_scalar, .nonfinite = nonfinite_scalar, .di_rows = cpu_di_rows_scalar

const cpu_kernels cpu_kernels_bf16ref = {
    .name = "bf16ref",
    .bf16 = &cpu_mm_bf16_ref,
    SCALAR_ENTRIES,
};

const cpu_kernels cpu_kernels_scalar = {
    .name = "scalar",
    .gemm = gemm_scalar,
    .qk = qk_scalar,
    .softmax = softmax_scalar,
    .softmax_t = softmax_t_scalar,
    .pv = pv_scalar,
    .exp = exp_scalar,
    .exp2 = exp2_scalar,
    .load_row = load_row_scalar,
    .store_row = store_row_scalar,
    .rmsnorm_row = rmsnorm_row_scalar,
    .swiglu_row = swiglu_row_scalar,
    .score_mod_t = score_mod_t_scalar,
    .score_mod_row = score_mod_row_scalar,
    .mask_t = mask_t_scalar,
    .nonfinite = nonfinite_scalar,
    .di_rows = cpu_di_rows_scalar,
};
