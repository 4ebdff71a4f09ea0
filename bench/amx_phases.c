/*
 * amx_phases.c — where the time of the forward's bf16 matrix-unit path goes, phase by phase, on
 * one key tile against the rows of one item (issue 16): the micro-benchmark behind the choice
 * of FLASHC_CPU_AMX_FWD (src/cpu/attn_fwd.c mm_tile, kernels.h cpu_mm_bf16.fwd_tile).
 *
 *   flashc_amx_phases [--isa amx] [--d 128] [--rows 1152] [--cols 192] [--tiles 8] [--reps 7]
 *                     [--threads 1]
 *
 * Per pass: --tiles times the same packed K / V tile (cols keys) against --rows query rows, so
 * the state of the online softmax evolves as in an item (the first tile raises every max, the
 * later ones rarely). Rows (median ns per tile and GFLOP/s of that phase's own products, or of
 * 4 rows cols d for the whole update):
 *   pack     pack_bt of K and pack_b of V (once per tile and item in the loop nest)
 *   qk       S = Q K^T alone, in chunks of 32 rows (gemm)
 *   softmax  the mm softmax alone on those S
 *   pv       acc = alpha acc + P V alone (gemm with rowscale)
 *   chunked  qk, softmax, pv per chunk of 64 rows: the default path (mm_tile)
 *   fusedK   fwd_tile with overlap K = 0, 1, 2 (FLASHC_CPU_AMX_FWD = K + 1)
 * --threads N runs N copies at once (own buffers, OpenMP), to see the per-core rate under load.
 * The phases alone use the unit's own entries, so any table with a cpu_mm_bf16 runs (bf16ref:
 * a smoke test on any CPU; the fused rows need fwd_tile: amx only).
 */
#define _POSIX_C_SOURCE 200809L
#include "kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "bench_clock.h"

static double now_s(void) { return bench_seconds(CLOCK_MONOTONIC); }

static int64_t rup(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

static uint16_t bf16_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

typedef struct ws {
    int64_t d, rows, cols, dp, ldkp, ldvp, lds, ldp, lda;
    uint16_t *q, *k, *v, *pb;
    uint32_t *kp, *vp;
    float *s, *acc, *m, *l, *alpha;
} ws;

static void ws_init(ws *w, int64_t d, int64_t rows, int64_t cols, unsigned seed)
{
    w->d = d, w->rows = rows, w->cols = cols;
    w->dp = rup(d, CPU_MM_KP), w->ldkp = rup(cols, 16), w->ldvp = rup(d, 16);
    w->lds = (rup(cols, 16) / 16 | 1) * 16, w->ldp = rup(cols, CPU_MM_KP);
    w->lda = (rup(d, 16) / 16 | 1) * 16;
    w->q = calloc((size_t)(rup(rows, 16) * w->dp), 2);
    w->k = malloc((size_t)(cols * d) * 2), w->v = malloc((size_t)(cols * d) * 2);
    w->kp = calloc((size_t)(w->dp / 2 * w->ldkp), 4);
    w->vp = calloc((size_t)(w->ldp / 2 * w->ldvp), 4);
    w->s = calloc((size_t)(64 * w->lds), 4);
    w->pb = calloc((size_t)(80 * w->ldp), 2);
    w->acc = calloc((size_t)(rows * w->lda), 4);
    w->m = malloc((size_t)rows * 4), w->l = malloc((size_t)rows * 4);
    w->alpha = malloc((size_t)rows * 4);
    srand(seed);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < d; j++)
            w->q[i * w->dp + j] = bf16_of((float)rand() / RAND_MAX - 0.5f);
    for (int64_t i = 0; i < cols * d; i++) {
        w->k[i] = bf16_of((float)rand() / RAND_MAX - 0.5f);
        w->v[i] = bf16_of((float)rand() / RAND_MAX - 0.5f);
    }
}

static void ws_free(ws *w)
{
    free(w->q), free(w->k), free(w->v), free(w->kp), free(w->vp), free(w->s), free(w->pb);
    free(w->acc), free(w->m), free(w->l), free(w->alpha);
}

static void ws_reset(ws *w)
{
    for (int64_t r = 0; r < w->rows; r++)
        w->m[r] = -INFINITY, w->l[r] = 0.0f, w->alpha[r] = 1.0f;
    memset(w->acc, 0, (size_t)(w->rows * w->lda) * 4);
}

enum { PH_PACK, PH_QK, PH_SOFTMAX, PH_PV, PH_CHUNKED, PH_FUSED0, PH_FUSED1, PH_FUSED2, PH_N };
static const char *const ph_name[PH_N] = {"pack",    "qk",     "softmax", "pv",
                                          "chunked", "fused0", "fused1",  "fused2"};

/* One pass of phase ph over ntiles tiles; returns seconds. */
static double run_phase(const cpu_mm_bf16 *mm, ws *w, int ph, int ntiles, float scale)
{
    const int64_t rows = w->rows, cols = w->cols, d = w->d, kns = rup(cols, 16);
    ws_reset(w);
    mm->begin();
    const double t0 = now_s();
    for (int t = 0; t < ntiles; t++) {
        if (ph == PH_PACK) {
            mm->pack_bt(w->k, d, cols, d, w->kp, w->ldkp);
            mm->pack_b(w->v, d, cols, d, w->vp, w->ldvp);
            continue;
        }
        if (ph >= PH_FUSED0) {
            const cpu_mm_fwd f = {
                .q = w->q, .ldq = w->dp, .rows = rows / 16 * 16, .D = d, .Dv = d, .cols = cols,
                .kp = w->kp, .ldkp = w->ldkp, .vp = w->vp, .ldvp = w->ldvp, .scale = scale,
                .m = w->m, .l = w->l, .alpha = w->alpha, .acc = w->acc, .lda = w->lda,
                .s = w->s, .lds = w->lds, .p = w->pb, .ldp = w->ldp, .overlap = ph - PH_FUSED0,
            };
            mm->fwd_tile(&f);
            continue;
        }
        const int64_t step = ph == PH_CHUNKED ? 64 : 32;
        for (int64_t r0 = 0; r0 < rows; r0 += step) {
            const int64_t sr = rows - r0 < step ? rows - r0 : step;
            if (ph == PH_QK || ph == PH_CHUNKED)
                mm->gemm(sr, cols, d, w->q + r0 * w->dp, w->dp, w->kp, w->ldkp, NULL, w->s,
                         w->lds);
            if (ph == PH_SOFTMAX || ph == PH_CHUNKED)
                mm->softmax(w->s, w->lds, sr, kns, scale, w->m + r0, w->l + r0, w->alpha + r0,
                            w->pb, w->ldp);
            if (ph == PH_PV || ph == PH_CHUNKED)
                mm->gemm(sr, d, cols, w->pb, w->ldp, w->vp, w->ldvp, w->alpha + r0,
                         w->acc + r0 * w->lda, w->lda);
        }
    }
    const double dt = now_s() - t0;
    mm->end();
    return dt;
}

int main(int argc, char **argv)
{
    const char *isa = "amx";
    int64_t d = 128, rows = 1152, cols = 192;
    int ntiles = 8, reps = 7, threads = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--isa"))
            isa = argv[i + 1];
        else if (!strcmp(argv[i], "--d"))
            d = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--rows"))
            rows = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--cols"))
            cols = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--tiles"))
            ntiles = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads"))
            threads = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "amx_phases: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (d < 16 || d % 16 || rows < 16 || cols < 1 || ntiles < 1 || reps < 1 || threads < 1 ||
        reps > 99) {
        fprintf(stderr, "amx_phases: bad sizes (d a multiple of 16, rows >= 16)\n");
        return 2;
    }
    const cpu_kernels *kr = cpu_kernels_by_name(isa);
    if (!kr || !kr->bf16) {
        printf("SKIP: table %s has no bf16 unit here (%s)\n", isa, cpu_kernels_note());
        return 77;
    }
    const cpu_mm_bf16 *mm = kr->bf16;
    const float scale = 1.44269504f / sqrtf((float)d);
    printf("amx_phases: table %s (unit %s), d %lld, rows %lld, cols %lld, %d tiles a pass, "
           "median of %d passes, %d thread(s) at once\n",
           kr->name, mm->unit, (long long)d, (long long)rows, (long long)cols, ntiles, reps,
           threads);
    printf("| phase | ns per tile | GFLOP/s (per thread) |\n|---|--:|--:|\n");
    double med[PH_N][64];
    ws wsv[64];
    if (threads > 64)
        threads = 64;
#pragma omp parallel num_threads(threads)
    {
#ifdef _OPENMP
        const int tid = omp_get_thread_num();
#else
        const int tid = 0;
#endif
        ws *w = &wsv[tid];
        ws_init(w, d, rows, cols, 17u + (unsigned)tid);
        mm->begin();
        mm->pack_bt(w->k, d, cols, d, w->kp, w->ldkp);
        mm->pack_b(w->v, d, cols, d, w->vp, w->ldvp);
        mm->end();
        for (int ph = 0; ph < PH_N; ph++) {
            double t[100];
            if (ph >= PH_FUSED0 && !mm->fwd_tile) {
                med[ph][tid] = -1;
                continue;
            }
            run_phase(mm, w, ph, 1, scale); /* warm-up */
            for (int r = 0; r < reps; r++) {
#pragma omp barrier
                t[r] = run_phase(mm, w, ph, ntiles, scale);
            }
            qsort(t, (size_t)reps, sizeof t[0], bench_cmp_double);
            med[ph][tid] = t[reps / 2] / ntiles;
        }
        ws_free(w);
    }
    for (int ph = 0; ph < PH_N; ph++) {
        double s = 0;
        int n = 0;
        for (int t = 0; t < threads; t++)
            if (med[ph][t] >= 0)
                s += med[ph][t], n++;
        if (!n) {
            printf("| %s | (no fwd_tile) | |\n", ph_name[ph]);
            continue;
        }
        const double sec = s / n;
        const double fl = ph == PH_QK || ph == PH_PV ? 2.0 * rows * cols * d
                          : ph == PH_PACK || ph == PH_SOFTMAX ? 0.0
                                                               : 4.0 * rows * cols * d;
        if (fl > 0)
            printf("| %s | %.0f | %.0f |\n", ph_name[ph], sec * 1e9, fl / sec * 1e-9);
        else
            printf("| %s | %.0f | |\n", ph_name[ph], sec * 1e9);
    }
    return 0;
}
