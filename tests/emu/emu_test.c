/* tests/emu/emu_test.c — runs the AMX and AVX512-BF16 bf16 products (src/cpu/kernels/amx.c,
 * avx512bf16.c, compiled against the intrinsic models of tests/emu/immintrin.h) on a CPU that
 * has neither: the packings bit for bit against the scalar model (kernels/scalar.c), the gemms
 * against it within float32 rounding, then the whole bf16 forward (tests/test_attn_lowp.c's
 * cases and the 2x rule) with each sub-table in an avx2 table (src/cpu/attn_fwd.c's mm_* path
 * for bf16 storage). Build and run: tests/emu/run.sh.
 * A development check for the code that only the device's Xeon can run natively. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#define main lowp_main
#include "../test_attn_lowp.c"
#include <float.h>
#undef main

extern const cpu_mm_bf16 emu_mm_amx, emu_mm_avx512;

static int64_t rup(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

static uint16_t rbf(void) { return flashc__f32_to_bf16(rng_normal()); }

static void check_mm(const cpu_mm_bf16 *mm, int64_t M, int64_t N, int64_t K, int scaled)
{
    const int64_t kp = rup(K, CPU_MM_KP), np = rup(N, 16), m16 = rup(M, 16);
    const int64_t ldb = N + 3, ldbt = K + 5, lda = kp + (M & 1 ? 32 : 0), ldbp = np + (K & 1) * 16;
    const int64_t ldc = N + 7;
    uint16_t *B = malloc((size_t)(K * ldb) * 2), *Bt = malloc((size_t)(N * ldbt) * 2);
    uint32_t *P0 = malloc((size_t)(kp / 2 * ldbp) * 4), *P1 = malloc((size_t)(kp / 2 * ldbp) * 4);
    for (int64_t k = 0; k < K; k++)
        for (int64_t n = 0; n < N; n++)
            B[k * ldb + n] = Bt[n * ldbt + k] = rbf();
    /* pack_b and pack_bt of the same matrix: the same words, equal to the model's */
    memset(P0, 0xee, (size_t)(kp / 2 * ldbp) * 4), memset(P1, 0xee, (size_t)(kp / 2 * ldbp) * 4);
    cpu_mm_bf16_ref.pack_b(B, ldb, K, N, P0, ldbp);
    mm->pack_b(B, ldb, K, N, P1, ldbp);
    for (int64_t kk = 0; kk < kp / 2; kk++)
        for (int64_t n = 0; n < np; n++)
            if (P0[kk * ldbp + n] != P1[kk * ldbp + n]) {
                print_error("%s pack_b K %lld N %lld: (%lld, %lld) %08x vs %08x\n", mm->unit,
                            (long long)K, (long long)N, (long long)kk, (long long)n,
                            P1[kk * ldbp + n], P0[kk * ldbp + n]);
                fail();
            }
    memset(P1, 0xee, (size_t)(kp / 2 * ldbp) * 4);
    mm->pack_bt(Bt, ldbt, N, K, P1, ldbp);
    for (int64_t kk = 0; kk < kp / 2; kk++)
        for (int64_t n = 0; n < np; n++)
            if (P0[kk * ldbp + n] != P1[kk * ldbp + n]) {
                print_error("%s pack_bt K %lld N %lld: (%lld, %lld) %08x vs %08x\n", mm->unit,
                            (long long)K, (long long)N, (long long)kk, (long long)n,
                            P1[kk * ldbp + n], P0[kk * ldbp + n]);
                fail();
            }
    /* gemm: A with exactly R16(M) rows (ASan checks the tile reads), zero columns K .. kp */
    uint16_t *A = malloc((size_t)(m16 * lda) * 2);
    for (int64_t m = 0; m < m16; m++)
        for (int64_t k = 0; k < lda; k++)
            A[m * lda + k] = k < K ? rbf() : 0;
    float *C0 = malloc((size_t)(M * ldc) * 4), *C1 = malloc((size_t)(M * ldc) * 4);
    float *rs = malloc((size_t)M * 4);
    for (int64_t m = 0; m < M; m++) {
        rs[m] = m % 3 == 0 ? 1.0f : rng_normal();
        for (int64_t n = 0; n < ldc; n++)
            C0[m * ldc + n] = C1[m * ldc + n] = n < N ? rng_normal() : 777.0f;
    }
    mm->begin();
    cpu_mm_bf16_ref.gemm(M, N, K, A, lda, P0, ldbp, scaled ? rs : NULL, C0, ldc);
    mm->gemm(M, N, K, A, lda, P0, ldbp, scaled ? rs : NULL, C1, ldc);
    mm->end();
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < ldc; n++) {
            const double x = C1[m * ldc + n], y = C0[m * ldc + n];
            if (!(fabs(x - y) <= 1e-5 * (double)(K + 1) * (1.0 + fabs(y)))) {
                print_error("%s gemm M %lld N %lld K %lld scaled %d: (%lld, %lld) %.9g vs %.9g\n",
                            mm->unit, (long long)M, (long long)N, (long long)K, scaled,
                            (long long)m, (long long)n, x, y);
                fail();
            }
        }
    free(B), free(Bt), free(P0), free(P1), free(A), free(C0), free(C1), free(rs);
}

static void test_mm_units(void **state)
{
    (void)state;
    static const int64_t sz[] = {1, 2, 7, 15, 16, 17, 31, 32, 33, 47, 64, 96, 100, 129};
    const int ns = (int)(sizeof sz / sizeof sz[0]);
    const cpu_mm_bf16 *mms[2] = {&emu_mm_amx, &emu_mm_avx512};
    for (int u = 0; u < 2; u++) {
        int n = 0;
        for (int a = 0; a < ns; a++)
            for (int b = 0; b < ns; b++) {
                check_mm(mms[u], sz[a], sz[b], sz[(a * 5 + b) % ns], (a + b) & 1);
                n++;
            }
        printf("  %s: %d pack/gemm shapes match the scalar model\n", mms[u]->unit, n);
    }
}

/* split and pack_at (the backward's operands) bit for bit against the scalar model, on odd
 * shapes with both outputs at once and each alone; X holds ordinary values plus a NaN, an inf,
 * FLT_MAX (hi rounds to inf: lo must be 0), a tie case and tiny values
 * (denormal inputs, a denormal lo: split_cvt hands them to split16). Every word of the
 * outputs' extents is compared (the padding is part of the contract). */
static void check_split(const cpu_mm_bf16 *mm, int64_t rows, int64_t n, int which, int cvt)
{
    const int64_t kr = rup(rows, 32), kn = rup(n, 32), r16 = rup(rows, 16), n16 = rup(n, 16);
    const int64_t ldx = n + 5, lda = 2 * kn + (rows & 1) * 32, ldbp = n16 + (n & 1) * 16;
    float *X = malloc((size_t)(rows * ldx) * 4);
    for (int64_t i = 0; i < rows * ldx; i++)
        X[i] = rng_normal() * (i % 7 == 3 ? 1e-3f : 1.0f);
    const float odd[] = {NAN, INFINITY, -FLT_MAX, 1.0f + 0x1p-8f + 0x1p-23f, 0x1p-140f,
                         0x1p-130f, -0x1.01p-120f};
    for (int i = 0; i < 7 && i < rows * n; i++)
        X[(i * 37) % rows * ldx + (i * 11) % n] = odd[i];
    uint16_t *a0 = malloc((size_t)(r16 * lda) * 2), *a1 = malloc((size_t)(r16 * lda) * 2);
    uint32_t *b0 = malloc((size_t)(kr * ldbp) * 4), *b1 = malloc((size_t)(kr * ldbp) * 4);
    memset(a0, 0xee, (size_t)(r16 * lda) * 2), memset(a1, 0xee, (size_t)(r16 * lda) * 2);
    memset(b0, 0xee, (size_t)(kr * ldbp) * 4), memset(b1, 0xee, (size_t)(kr * ldbp) * 4);
    cpu_mm_bf16_ref.split(X, ldx, rows, n, which & 1 ? a0 : NULL, lda, which & 2 ? b0 : NULL,
                          ldbp);
    (cvt ? mm->split_cvt : mm->split)(X, ldx, rows, n, which & 1 ? a1 : NULL, lda,
                                      which & 2 ? b1 : NULL, ldbp);
    for (int64_t r = 0; r < r16 && (which & 1); r++)
        for (int64_t c = 0; c < 2 * kn; c++)
            if (a0[r * lda + c] != a1[r * lda + c]) {
                print_error("%s split%s A rows %lld n %lld: (%lld, %lld) %04x vs %04x\n", mm->unit,
                            cvt ? "_cvt" : "", (long long)rows, (long long)n, (long long)r, (long long)c,
                            a1[r * lda + c], a0[r * lda + c]);
                fail();
            }
    for (int64_t kk = 0; kk < kr && (which & 2); kk++)
        for (int64_t c = 0; c < n16; c++)
            if (b0[kk * ldbp + c] != b1[kk * ldbp + c]) {
                print_error("%s split%s B rows %lld n %lld: (%lld, %lld) %08x vs %08x\n", mm->unit,
                            cvt ? "_cvt" : "", (long long)rows, (long long)n, (long long)kk, (long long)c,
                            b1[kk * ldbp + c], b0[kk * ldbp + c]);
                fail();
            }
    /* pack_at of bf16 rows */
    uint16_t *xb = malloc((size_t)(rows * ldx) * 2);
    for (int64_t i = 0; i < rows * ldx; i++)
        xb[i] = rbf();
    const int64_t ldt = 2 * kr + (n & 1) * 32;
    uint16_t *t0 = malloc((size_t)(n16 * ldt) * 2), *t1 = malloc((size_t)(n16 * ldt) * 2);
    memset(t0, 0xee, (size_t)(n16 * ldt) * 2), memset(t1, 0xee, (size_t)(n16 * ldt) * 2);
    cpu_mm_bf16_ref.pack_at(xb, ldx, rows, n, t0, ldt);
    mm->pack_at(xb, ldx, rows, n, t1, ldt);
    for (int64_t c = 0; c < n16; c++)
        for (int64_t r = 0; r < 2 * kr; r++)
            if (t0[c * ldt + r] != t1[c * ldt + r]) {
                print_error("%s pack_at rows %lld n %lld: (%lld, %lld) %04x vs %04x\n", mm->unit,
                            (long long)rows, (long long)n, (long long)c, (long long)r,
                            t1[c * ldt + r], t0[c * ldt + r]);
                fail();
            }
    /* transpose of float32 rows (X's bits: a copy), Y's padding columns untouched */
    const int64_t ldy = rows + (n & 1) * 16 + 3;
    float *y0 = malloc((size_t)(n * ldy) * 4), *y1 = malloc((size_t)(n * ldy) * 4);
    memset(y0, 0xee, (size_t)(n * ldy) * 4), memset(y1, 0xee, (size_t)(n * ldy) * 4);
    cpu_mm_bf16_ref.transpose(X, ldx, rows, n, y0, ldy);
    mm->transpose(X, ldx, rows, n, y1, ldy);
    if (memcmp(y0, y1, (size_t)(n * ldy) * 4) != 0) {
        print_error("%s transpose rows %lld n %lld differs from the model\n", mm->unit,
                    (long long)rows, (long long)n);
        fail();
    }
    free(X), free(a0), free(a1), free(b0), free(b1), free(xb), free(t0), free(t1), free(y0),
        free(y1);
}

static void test_mm_split(void **state)
{
    (void)state;
    static const int64_t sz[] = {1, 2, 7, 16, 17, 31, 32, 33, 64, 65, 100};
    const int ns = (int)(sizeof sz / sizeof sz[0]);
    const cpu_mm_bf16 *mms[2] = {&emu_mm_amx, &emu_mm_avx512};
    /* the model's own halves: hi + lo is the float32 value within 2^-16 relative */
    for (int i = 0; i < 1000; i++) {
        const float x = rng_normal();
        float X[1] = {x};
        uint16_t a[16 * 64]; /* R16(1) rows of 2 R32(1) */
        cpu_mm_bf16_ref.split(X, 1, 1, 1, a, 64, NULL, 0);
        const double s = (double)flashc__bf16_to_f32(a[0]) + (double)flashc__bf16_to_f32(a[32]);
        assert_true(fabs(s - (double)x) <= 0x1p-16 * fabs((double)x));
    }
    for (int u = 0; u < 2; u++) {
        int cnt = 0;
        for (int a = 0; a < ns; a++)
            for (int b = 0; b < ns; b++, cnt++)
                for (int cvt = 0; cvt < 2; cvt++)
                    check_split(mms[u], sz[a], sz[b], 1 + (a + b) % 3, cvt);
        printf("  %s: %d split, split_cvt / pack_at / transpose shapes match the scalar model\n",
               mms[u]->unit, cnt);
    }
}

/* p_ds_split (avx512bf16.c, both units' entry) bit for bit against the two steps it replaces:
 * p_ds's arithmetic with exp2p_avx512.h's 2^x (the emulated tables' own p_ds is the avx2
 * instance, another exponential, so the reference is written here, lane by lane), then the
 * unit's split of P as B, dS as B and as A by segments (attn_bwd.c mm_split_ds). Odd shapes,
 * rows whose ranges start, end or lie outside the tile, NaN / inf / huge scores, each output
 * alone and together, float32 dS kept or not. */
#include "exp2p_avx512.h"

static void ref_p_ds(float *S, float *D, int64_t lds, int64_t rows, int64_t n, float scale,
                     const float *L, const float *Di, const int64_t *lo, const int64_t *hi,
                     int64_t jlo)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < n; c++) {
            float *s = S + r * lds + c, *d = D + r * lds + c;
            if (c < lo[r] - jlo || c >= hi[r] - jlo) {
                *s = *d = 0.0f;
                continue;
            }
            const __m512 x = _mm512_mul_ps(
                _mm512_fmadd_ps(_mm512_set1_ps(*s), _mm512_set1_ps(scale), _mm512_set1_ps(-L[r])),
                _mm512_set1_ps(1.44269504088896341f));
            float p[16];
            _mm512_storeu_ps(p, exp2p_avx512(x));
            *s = p[0];
            *d = p[0] * (*d - Di[r]);
        }
}

static void check_p_ds_split(const cpu_mm_bf16 *mm, int64_t rows, int64_t n, int which,
                             int64_t seg0, int64_t seg, int keep)
{
    const int64_t kr = rup(rows, 32), kn = rup(n, 32), r16 = rup(rows, 16), n16 = rup(n, 16);
    const int64_t lds = n + 3, ldpb = n16 + (n & 1) * 16, ldds = 2 * kn + (rows & 1) * 32;
    const int64_t jlo = 20;
    float *S0 = malloc((size_t)(rows * lds) * 4), *D0 = malloc((size_t)(rows * lds) * 4);
    float *S1 = malloc((size_t)(rows * lds) * 4), *D1 = malloc((size_t)(rows * lds) * 4);
    float L[130], Di[130];
    int64_t lo[130], hi[130];
    const float odd[] = {NAN, INFINITY, -INFINITY, 1e30f, -1e30f, 0x1p-140f, 300.0f};
    for (int64_t i = 0; i < rows * lds; i++) {
        S0[i] = i % 17 == 3 ? odd[i % 7] : 3.0f * rng_normal();
        D0[i] = i % 19 == 4 ? odd[(i + 3) % 7] : rng_normal();
    }
    for (int64_t r = 0; r < rows; r++) {
        L[r] = rng_normal(), Di[r] = rng_normal();
        lo[r] = jlo + (r % 4 == 0 ? -5 : (r * 13) % (n + 3));
        hi[r] = r % 6 == 5 ? lo[r] : lo[r] + (r % 3 ? n + 9 : (r * 7) % (n + 1) + 1);
    }
    memcpy(S1, S0, (size_t)(rows * lds) * 4), memcpy(D1, D0, (size_t)(rows * lds) * 4);
    uint32_t *pb[2], *dsp[2];
    uint16_t *dsa[2];
    for (int v = 0; v < 2; v++) {
        pb[v] = malloc((size_t)(kr * ldpb) * 4), dsp[v] = malloc((size_t)(kr * ldpb) * 4);
        dsa[v] = malloc((size_t)(r16 * ldds) * 2);
        memset(pb[v], 0xee, (size_t)(kr * ldpb) * 4), memset(dsp[v], 0xee, (size_t)(kr * ldpb) * 4);
        memset(dsa[v], 0xee, (size_t)(r16 * ldds) * 2);
    }
    const float scale = 0.3f;
    ref_p_ds(S0, D0, lds, rows, n, scale, L, Di, lo, hi, jlo); /* S0, D0: P, dS */
    if (which & 1)
        mm->split(S0, lds, rows, n, NULL, 0, pb[0], ldpb);
    if (which & 4)
        mm->split(D0, lds, rows, n, NULL, 0, dsp[0], ldpb);
    for (int64_t o = 0, len; (which & 2) && o < n; o += len) {
        len = o == 0 ? (seg0 < n ? seg0 : n) : n - o < seg ? n - o : seg;
        mm->split(D0 + o, lds, rows, len, dsa[0] + 2 * o, ldds, NULL, 0);
    }
    float *D1in = malloc((size_t)(rows * lds) * 4), *S1in = malloc((size_t)(rows * lds) * 4);
    memcpy(D1in, D1, (size_t)(rows * lds) * 4), memcpy(S1in, S1, (size_t)(rows * lds) * 4);
    const cpu_mm_p_ds_split g = {
        .S = S1, .dP = D1, .lds = lds, .rows = rows, .n = n, .scale = scale, .L = L, .Di = Di,
        .lo = lo, .hi = hi, .jlo = jlo, .pb = which & 1 ? pb[1] : NULL,
        .dsp = which & 4 ? dsp[1] : NULL, .ldpb = ldpb, .dsa = which & 2 ? dsa[1] : NULL,
        .ldds = ldds, .seg0 = seg0, .seg = seg, .keep_ds = keep};
    mm->p_ds_split(&g);
    if (memcmp(pb[0], pb[1], (size_t)(kr * ldpb) * 4) ||
        memcmp(dsp[0], dsp[1], (size_t)(kr * ldpb) * 4) ||
        memcmp(dsa[0], dsa[1], (size_t)(r16 * ldds) * 2) ||
        memcmp(S1, S1in, (size_t)(rows * lds) * 4)) {
        print_error("%s p_ds_split rows %lld n %lld which %d seg0 %lld seg %lld differs from "
                    "p_ds + split\n", mm->unit, (long long)rows, (long long)n, which,
                    (long long)seg0, (long long)seg);
        fail();
    }
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < lds; c++) {
            const float want = keep && c < n ? D0[r * lds + c] : D1in[r * lds + c];
            if (memcmp(&want, &D1[r * lds + c], 4)) {
                print_error("%s p_ds_split keep %d: dP (%lld, %lld)\n", mm->unit, keep,
                            (long long)r, (long long)c);
                fail();
            }
        }
    free(S0), free(D0), free(S1), free(D1), free(D1in), free(S1in);
    for (int v = 0; v < 2; v++)
        free(pb[v]), free(dsp[v]), free(dsa[v]);
}

static void test_mm_p_ds_split(void **state)
{
    (void)state;
    static const int64_t rs[] = {1, 2, 7, 16, 17, 33, 64, 129};
    static const int64_t ns[] = {1, 7, 16, 31, 33, 64, 100, 129, 200};
    int cnt = 0;
    for (size_t a = 0; a < sizeof rs / sizeof rs[0]; a++)
        for (size_t b = 0; b < sizeof ns / sizeof ns[0]; b++, cnt++) {
            const int64_t seg0 = (a + b) % 3 == 0 ? ns[b] : 32 * (int64_t)(1 + (a + b) % 4);
            check_p_ds_split(&emu_mm_amx, rs[a], ns[b], 1 + (int)((a + 2 * b) % 7), seg0,
                             (a & 1) ? 32 : 128, (int)((a + b) & 1));
        }
    printf("  p_ds_split: %d shapes = p_ds + split\n", cnt);
}

static void test_mm_attention(void **state)
{
    (void)state;
    const cpu_mm_bf16 *mms[2] = {&emu_mm_amx, &emu_mm_avx512};
    for (int u = 0; u < 2; u++) {
        cpu_kernels t = cpu_kernels_avx2; /* avx2 entries + the emulated unit */
        t.bf16 = mms[u];
        t.name = mms[u]->unit;
        cpu_kernels_force(&t);
        run_all_on(&t);
        cpu_kernels_force(NULL);
    }
}

/* The fused tile (amx.c fwd_tile, FLASHC_CPU_AMX_FWD=1, =2 with the next S product between the
 * softmax rows, =3 with the previous P V there too) against the chunked gemm / softmax / gemm
 * it replaces: the same bits of O and LSE on bf16 inputs, for odd shapes (rows not a multiple
 * of 16, a short last key tile, D not a multiple of 32, Dv 16 / 48 / 128, GQA, causal and
 * windowed tiles that straddle (their chunks go fused too, with each row's key range as the
 * tile's mask; rows that see no key; masks on both sides of a narrow window), many chunks per
 * item), through a copy of the emulated table whose fwd_tile counts its calls (so the path is
 * known to run). */
static const cpu_mm_bf16 *fused_inner;
static long fused_calls;
static void counting_fwd_tile(const cpu_mm_fwd *f)
{
    __atomic_add_fetch(&fused_calls, 1, __ATOMIC_RELAXED);
    fused_inner->fwd_tile(f);
}

static void test_mm_fused(void **state)
{
    (void)state;
    static const struct {
        int64_t b, hq, hkv, sq, sk, d, dv, br, bc;
        int causal, wl, threads;
    } cs[] = {
        {1, 2, 1, 100, 75, 64, 64, 0, 0, 0, -1, 2},
        {1, 1, 1, 37, 300, 80, 48, 0, 0, 0, -1, 1},
        {2, 4, 2, 130, 200, 128, 128, 64, 96, 1, -1, 2},
        {1, 2, 2, 96, 96, 32, 16, 48, 32, 0, 40, 2},
        {1, 1, 1, 16, 17, 16, 16, 0, 0, 0, -1, 1},
        {1, 3, 1, 250, 260, 96, 128, 0, 64, 1, -1, 2},
        {1, 1, 1, 300, 64, 64, 32, 0, 0, 0, -1, 1},
        {1, 2, 1, 400, 400, 64, 64, 0, 64, 1, 100, 2},
        {1, 1, 1, 200, 130, 64, 64, 0, 64, 1, -1, 2},  /* causal, Sk < Sq: rows that see no key */
        {1, 2, 1, 333, 333, 128, 128, 96, 192, 1, 7, 1}, /* a narrow window: masks on both sides */
    };
    static cpu_mm_bf16 mmc;
    mmc = emu_mm_amx;
    fused_inner = &emu_mm_amx;
    mmc.fwd_tile = counting_fwd_tile;
    cpu_kernels t = cpu_kernels_avx2;
    t.bf16 = &mmc, t.name = "emu-amx-counted";
    cpu_kernels_force(&t);
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        const int64_t nq = cs[c].b * cs[c].sq * cs[c].hq * cs[c].d;
        const int64_t nk = cs[c].b * cs[c].sk * cs[c].hkv * cs[c].d;
        const int64_t nv = cs[c].b * cs[c].sk * cs[c].hkv * cs[c].dv;
        const int64_t no = cs[c].b * cs[c].sq * cs[c].hq * cs[c].dv;
        const int64_t nl = cs[c].b * cs[c].hq * cs[c].sq;
        uint16_t *q = malloc((size_t)nq * 2), *k = malloc((size_t)nk * 2);
        uint16_t *v = malloc((size_t)nv * 2);
        uint16_t *o[4];
        float *lse[4];
        for (int64_t i = 0; i < nq; i++)
            q[i] = rbf();
        for (int64_t i = 0; i < nk; i++)
            k[i] = rbf();
        for (int64_t i = 0; i < nv; i++)
            v[i] = rbf();
        flashc_attn_params pa = FLASHC_ATTN_PARAMS_INIT;
        pa.causal = cs[c].causal, pa.window_left = cs[c].wl;
        pa.block_q = cs[c].br, pa.block_k = cs[c].bc, pa.num_threads = cs[c].threads;
        flashc_tensor tq = flashc_tensor_4d(q, FLASHC_BF16, cs[c].b, cs[c].sq, cs[c].hq, cs[c].d);
        flashc_tensor tk = flashc_tensor_4d(k, FLASHC_BF16, cs[c].b, cs[c].sk, cs[c].hkv, cs[c].d);
        flashc_tensor tv = flashc_tensor_4d(v, FLASHC_BF16, cs[c].b, cs[c].sk, cs[c].hkv, cs[c].dv);
        for (int var = 0; var < 4; var++) {
            o[var] = malloc((size_t)no * 2), lse[var] = malloc((size_t)nl * 4);
            flashc_tensor to = flashc_tensor_4d(o[var], FLASHC_BF16, cs[c].b, cs[c].sq, cs[c].hq,
                                                cs[c].dv);
            flashc_tensor tl = flashc_tensor_3d(lse[var], FLASHC_F32, cs[c].b, cs[c].hq, cs[c].sq);
            const char val[2] = {(char)('0' + var), 0};
            setenv("FLASHC_CPU_AMX_FWD", val, 1);
            const long before = fused_calls;
            flashc_attn_stats st = FLASHC_ATTN_STATS_INIT;
            assert_int_equal(flashc_attn_fwd(&pa, &tq, &tk, &tv, &to, &tl, &st), FLASHC_OK);
            if (var == 0)
                assert_true(fused_calls == before);
            else
                assert_true(fused_calls > before);
        }
        for (int var = 1; var < 4; var++) {
            if (memcmp(o[0], o[var], (size_t)no * 2) ||
                memcmp(lse[0], lse[var], (size_t)nl * 4)) {
                print_error("fused tile %d differs from the chunked path on case %zu\n", var, c);
                fail();
            }
        }
        printf("  case %zu: fused tile (%ld calls so far) = chunked path, bit for bit\n", c,
               fused_calls);
        for (int var = 0; var < 4; var++)
            free(o[var]), free(lse[var]);
        free(q), free(k), free(v);
    }
    unsetenv("FLASHC_CPU_AMX_FWD");
    cpu_kernels_force(NULL);
}

int main(void)
{
    tu_seed_from_env(); /* FLASHC_TEST_SEED replays a failure (common.c prints the seed) */
    rng_state = tu_seed() * 2654435761u + 11;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mm_units),
        cmocka_unit_test(test_mm_split),
        cmocka_unit_test(test_mm_p_ds_split),
        cmocka_unit_test(test_mm_attention),
        cmocka_unit_test(test_mm_fused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
