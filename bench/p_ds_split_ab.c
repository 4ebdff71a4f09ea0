/*
 * p_ds_split_ab.c — the backward's element-wise pass of one tile pair on the bf16 unit's table,
 * the two steps (p_ds, then split_cvt of P as B and of dS as A and B: attn_bwd.c mm_pair before
 * issue 16's fusion) against kernels.h p_ds_split (the same bits: checked here too), rounds
 * interleaved in one process, process CPU time.
 *
 *   flashc_p_ds_split_ab [ROWS [N [CAUSAL [ROUNDS]]]]     (defaults 128 256 0 15)
 *
 * ROWS x N float32 S and dP tiles (scores in [-4, 1], dP in [-1, 1]); CAUSAL 1: row r sees keys
 * 0 .. r N / ROWS (a diagonal tile). Each round copies S and dP in first (as the AMX products
 * write them before the pass), 2000 times; the copy alone is timed too and subtracted. Prints
 * ns per element of each and their ratio (medians over rounds). FLASHC_ISA picks the table
 * (default: amx, else avx512bf16, else the scalar model bf16ref).
 */
#define _POSIX_C_SOURCE 200809L
#include "kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_clock.h"

static double now(void) { return bench_seconds(CLOCK_PROCESS_CPUTIME_ID); }

static int64_t rup(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

int main(int argc, char **argv)
{
    const int64_t rows = argc > 1 ? atoll(argv[1]) : 128, n = argc > 2 ? atoll(argv[2]) : 256;
    const int causal = argc > 3 ? atoi(argv[3]) : 0, rounds = argc > 4 ? atoi(argv[4]) : 15;
    const char *isa = getenv("FLASHC_ISA");
    const cpu_kernels *t = cpu_kernels_by_name(isa ? isa : "amx");
    if (!t || !t->bf16)
        t = cpu_kernels_by_name("avx512bf16");
    if (!t || !t->bf16)
        t = cpu_kernels_by_name("bf16ref");
    const cpu_mm_bf16 *mm = t->bf16;
    if (rows < 1 || rows > 1024 || n < 1 || rounds < 1 || !mm->p_ds_split) {
        fprintf(stderr, "usage: %s [ROWS (1..1024) [N [CAUSAL [ROUNDS]]]]\n", argv[0]);
        return 2;
    }
    const int64_t lds = (n + 15) / 16 * 16 | 16, kr = rup(rows, 32), kn = rup(n, 32);
    const int64_t ldpb = rup(n, 16), ldds = 2 * kn, tile = rows * lds;
    float *S0 = malloc((size_t)tile * 4), *D0 = malloc((size_t)tile * 4);
    float *S = malloc((size_t)tile * 4), *D = malloc((size_t)tile * 4);
    float L[1024], Di[1024];
    int64_t lo[1024], hi[1024];
    uint32_t *pb[2], *dsp[2];
    uint16_t *dsa[2];
    for (int v = 0; v < 2; v++) {
        pb[v] = calloc((size_t)(kr * ldpb), 4), dsp[v] = calloc((size_t)(kr * ldpb), 4);
        dsa[v] = calloc((size_t)(rup(rows, 16) * ldds), 2);
    }
    srand(1);
    for (int64_t i = 0; i < tile; i++) {
        S0[i] = -4.0f + 5.0f * (float)rand() / (float)RAND_MAX;
        D0[i] = -1.0f + 2.0f * (float)rand() / (float)RAND_MAX;
    }
    for (int64_t r = 0; r < rows; r++) {
        L[r] = 1.0f, Di[r] = 0.1f, lo[r] = 0;
        hi[r] = causal ? r * n / rows + 1 : n;
    }
    const float scale = 0.125f;
    const int reps = 2000;
    double *ms = malloc(3 * (size_t)rounds * sizeof *ms);
    for (int k = -1; k < rounds; k++) { /* round -1: warm-up */
        double t0 = now();
        for (int x = 0; x < reps; x++)
            memcpy(S, S0, (size_t)tile * 4), memcpy(D, D0, (size_t)tile * 4);
        const double tc = now() - t0;
        double t2[2];
        for (int o = 0; o < 2; o++) { /* the order flips every round */
            const int fused = (k + o) & 1;
            t0 = now();
            for (int x = 0; x < reps; x++) {
                memcpy(S, S0, (size_t)tile * 4), memcpy(D, D0, (size_t)tile * 4);
                if (fused) {
                    const cpu_mm_p_ds_split g = {
                        .S = S, .dP = D, .lds = lds, .rows = rows, .n = n, .scale = scale,
                        .L = L, .Di = Di, .lo = lo, .hi = hi, .jlo = 0, .pb = pb[1],
                        .dsp = dsp[1], .ldpb = ldpb, .dsa = dsa[1], .ldds = ldds, .seg0 = n,
                        .seg = 128, .keep_ds = 0};
                    mm->p_ds_split(&g);
                } else {
                    void (*split)(const float *, int64_t, int64_t, int64_t, uint16_t *, int64_t,
                                  uint32_t *, int64_t) = mm->split_cvt ? mm->split_cvt : mm->split;
                    mm->p_ds(S, D, NULL, lds, rows, n, scale, L, Di, lo, hi, 0);
                    split(S, lds, rows, n, NULL, 0, pb[0], ldpb);
                    split(D, lds, rows, n, dsa[0], ldds, dsp[0], ldpb);
                }
            }
            t2[fused] = now() - t0;
        }
        if (k >= 0)
            ms[k] = tc, ms[rounds + k] = t2[0] - tc, ms[2 * rounds + k] = t2[1] - tc;
    }
    const int same = !memcmp(pb[0], pb[1], (size_t)(kr * ldpb) * 4) &&
                     !memcmp(dsp[0], dsp[1], (size_t)(kr * ldpb) * 4) &&
                     !memcmp(dsa[0], dsa[1], (size_t)(rup(rows, 16) * ldds) * 2);
    for (int j = 0; j < 3; j++)
        qsort(ms + j * rounds, (size_t)rounds, sizeof *ms, bench_cmp_double);
    const double el = 1e9 / ((double)rows * (double)n * reps);
    const double cp = ms[rounds / 2] * el, two = ms[rounds + rounds / 2] * el;
    const double one = ms[2 * rounds + rounds / 2] * el;
    printf("%s rows %lld n %lld causal %d: copy %.3f ns/element; beyond it: two steps %.3f, "
           "p_ds_split %.3f (%.2fx); same bits: %s\n", t->name, (long long)rows, (long long)n,
           causal, cp, two, one, two / one, same ? "yes" : "NO");
    return same ? 0 : 1;
}
