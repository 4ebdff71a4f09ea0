/*
 * lib_ab.c — two builds of libflashc.so against each other in ONE process, for a change of a
 * few per cent on a machine whose neighbours move every reading by more than that (the 2-core
 * dev Xeon: 3x between processes). Both libraries are dlopen()ed RTLD_LOCAL; every round runs
 * the bf16 forward once on each (the order flipped every round) on the same inputs.
 *
 *   flashc_lib_ab OLD.so NEW.so D N CAUSAL ROUNDS [HEADS=8]
 *     FLASHC_AB_THREADS (2)  num_threads of both
 *     FLASHC_AB_CPU=1        process CPU time instead of wall time (one thread: the time the
 *                            process ran, whoever else held the core)
 *     FLASHC_AB_BQ / _BK     block_q / block_k of NEW only (OLD = NEW: a tile A/B)
 *     FLASHC_AB_ENV_OLD / _NEW  NAME=VALUE: setenv before each call of that side (a knob the
 *                            library reads at every call, e.g. FLASHC_CPU_BWD_BATCH=1: a variant
 *                            A/B with OLD.so = NEW.so)
 *     FLASHC_AB_BWD=1        the bf16 backward instead (dO random, O and LSE from OLD's forward
 *                            once), GFLOP/s counted as 2.5 x the forward's
 *
 * Prints the medians, NEW's speed over OLD's from them, the median of the per-round ratios with
 * its quartiles, and whether O (dQ, dK, dV) has the same bits on both (B 1, N rows, HEADS heads
 * of D).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_clock.h"
#include "flashc.h"

typedef flashc_status (*fwd_fn)(const flashc_attn_params *, const flashc_tensor *,
                                const flashc_tensor *, const flashc_tensor *, flashc_tensor *,
                                flashc_tensor *, flashc_attn_stats *);
typedef flashc_status (*bwd_fn)(const flashc_attn_params *, const flashc_tensor *,
                                const flashc_tensor *, const flashc_tensor *, const flashc_tensor *,
                                const flashc_tensor *, const flashc_tensor *, flashc_tensor *,
                                flashc_tensor *, flashc_tensor *, flashc_attn_stats *);
typedef flashc_tensor (*t4_fn)(void *, flashc_dtype, int64_t, int64_t, int64_t, int64_t);

static int env_int(const char *name, int dflt)
{
    const char *e = getenv(name);
    return e && *e ? atoi(e) : dflt;
}

static double now(int cpu)
{
    return bench_seconds(cpu ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC);
}

int main(int argc, char **argv)
{
    if (argc < 7) {
        fprintf(stderr, "usage: %s OLD.so NEW.so D N CAUSAL ROUNDS [HEADS]\n", argv[0]);
        return 2;
    }
    flashc_tensor (*t3)(void *, flashc_dtype, int64_t, int64_t, int64_t) = NULL;
    fwd_fn fwd[2];
    bwd_fn bwd[2];
    t4_fn t4[2];
    for (int i = 0; i < 2; i++) {
        void *h = dlopen(argv[1 + i], RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            fprintf(stderr, "%s\n", dlerror());
            return 1;
        }
        *(void **)&fwd[i] = dlsym(h, "flashc_attn_fwd");
        *(void **)&t4[i] = dlsym(h, "flashc_tensor_4d");
        *(void **)&bwd[i] = dlsym(h, "flashc_attn_bwd");
        if (i == 0)
            *(void **)&t3 = dlsym(h, "flashc_tensor_3d");
        if (!fwd[i] || !t4[i] || !bwd[i] || !t3) {
            fprintf(stderr, "%s: missing flashc_attn_fwd / _bwd / flashc_tensor_3d / _4d\n", argv[1 + i]);
            return 1;
        }
    }
    const int64_t d = atoi(argv[3]), n = atoi(argv[4]), hq = argc > 7 ? atoi(argv[7]) : 8;
    const int causal = atoi(argv[5]), rounds = atoi(argv[6]);
    const int cpu = env_int("FLASHC_AB_CPU", 0), back = env_int("FLASHC_AB_BWD", 0);
    if (d < 1 || n < 1 || hq < 1 || rounds < 1) {
        fprintf(stderr, "D, N, ROUNDS, HEADS must be >= 1\n");
        return 2;
    }
    const size_t ne = (size_t)(n * hq * d);
    /* q, k, v, dO, then per library o (forward) or dq, dk, dv (backward) */
    const size_t nx = back ? 12 : 6;
    uint16_t *x = malloc(nx * ne * sizeof *x);
    float *lse = malloc((size_t)(hq * n) * sizeof *lse);
    double *ms = malloc(3 * (size_t)rounds * sizeof *ms);
    if (!x || !lse || !ms)
        return 1;
    uint16_t *q = x, *k = x + ne, *v = x + 2 * ne, *dout = x + 3 * ne;
    uint16_t *o[2] = {x + 4 * ne, x + 5 * ne}, *g[2] = {x + 6 * ne, x + 9 * ne};
    uint32_t s = 1;
    for (size_t i = 0; i < 4 * ne; i++) { /* bf16 of uniform [-1, 1): the top half of a float */
        s = s * 1664525u + 1013904223u;
        const float f = (float)(s >> 8) / (float)(1u << 23) - 1.0f;
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        x[i] = (uint16_t)(u >> 16);
    }
    flashc_attn_params pa = FLASHC_ATTN_PARAMS_INIT;
    pa.causal = causal, pa.num_threads = env_int("FLASHC_AB_THREADS", 2);
    double *t[2] = {ms, ms + rounds}, *ratio = ms + 2 * rounds;
    flashc_tensor tl = {0};
    if (back) { /* O and LSE by OLD's forward */
        flashc_tensor tq = t4[0](q, FLASHC_BF16, 1, n, hq, d);
        flashc_tensor tk = t4[0](k, FLASHC_BF16, 1, n, hq, d);
        flashc_tensor tv = t4[0](v, FLASHC_BF16, 1, n, hq, d);
        flashc_tensor to = t4[0](o[0], FLASHC_BF16, 1, n, hq, d);
        tl = t3(lse, FLASHC_F32, 1, hq, n);
        pa.causal = causal, pa.num_threads = env_int("FLASHC_AB_THREADS", 2);
        if (fwd[0](&pa, &tq, &tk, &tv, &to, &tl, NULL) != FLASHC_OK) {
            fprintf(stderr, "%s: flashc_attn_fwd failed\n", argv[1]);
            return 1;
        }
    }
    /* FLASHC_AB_ENV_OLD / _NEW: NAME=VALUE of each side; the other side runs with NAME as the
     * process had it (saved here), so a knob set for one side only never leaks into the other */
    char name[2][128] = {{0}, {0}}, value[2][128] = {{0}, {0}}, keep[2][128] = {{0}, {0}};
    int had[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        const char *e = getenv(i ? "FLASHC_AB_ENV_NEW" : "FLASHC_AB_ENV_OLD");
        if (!e || !*e)
            continue;
        const char *eq = strchr(e, '=');
        if (!eq || eq == e || (size_t)(eq - e) >= sizeof name[i] ||
            strlen(eq + 1) >= sizeof value[i]) {
            fprintf(stderr, "FLASHC_AB_ENV_%s: NAME=VALUE (each under 128 bytes)\n",
                    i ? "NEW" : "OLD");
            return 2;
        }
        memcpy(name[i], e, (size_t)(eq - e));
        strcpy(value[i], eq + 1);
        const char *was = getenv(name[i]);
        if (was && strlen(was) >= sizeof keep[i]) {
            fprintf(stderr, "%s: its value in the environment is too long to restore\n", name[i]);
            return 2;
        }
        if (was)
            had[i] = 1, strcpy(keep[i], was);
    }
    for (int r = -1; r < rounds; r++) /* round -1: warm-up */
        for (int j = 0; j < 2; j++) {
            const int i = (r & 1) ? 1 - j : j;
            for (int k = 0; k < 2; k++) /* the other side's name as it was, then this side's */
                if (name[k][0] && k != i) {
                    if (had[k])
                        setenv(name[k], keep[k], 1);
                    else
                        unsetenv(name[k]);
                }
            if (name[i][0])
                setenv(name[i], value[i], 1);
            pa.block_q = i ? env_int("FLASHC_AB_BQ", 0) : 0;
            pa.block_k = i ? env_int("FLASHC_AB_BK", 0) : 0;
            flashc_tensor tq = t4[i](q, FLASHC_BF16, 1, n, hq, d);
            flashc_tensor tk = t4[i](k, FLASHC_BF16, 1, n, hq, d);
            flashc_tensor tv = t4[i](v, FLASHC_BF16, 1, n, hq, d);
            flashc_tensor to = t4[i](o[i], FLASHC_BF16, 1, n, hq, d);
            const double t0 = now(cpu);
            if (back) {
                flashc_tensor t_o = t4[i](o[0], FLASHC_BF16, 1, n, hq, d);
                flashc_tensor tdo = t4[i](dout, FLASHC_BF16, 1, n, hq, d);
                flashc_tensor tdq = t4[i](g[i], FLASHC_BF16, 1, n, hq, d);
                flashc_tensor tdk = t4[i](g[i] + ne, FLASHC_BF16, 1, n, hq, d);
                flashc_tensor tdv = t4[i](g[i] + 2 * ne, FLASHC_BF16, 1, n, hq, d);
                if (bwd[i](&pa, &tq, &tk, &tv, &t_o, &tdo, &tl, &tdq, &tdk, &tdv, NULL) !=
                    FLASHC_OK) {
                    fprintf(stderr, "%s: flashc_attn_bwd failed\n", argv[1 + i]);
                    return 1;
                }
            } else if (fwd[i](&pa, &tq, &tk, &tv, &to, NULL, NULL) != FLASHC_OK) {
                fprintf(stderr, "%s: flashc_attn_fwd failed\n", argv[1 + i]);
                return 1;
            }
            if (r >= 0)
                t[i][r] = (now(cpu) - t0) * 1e3;
        }
    for (int r = 0; r < rounds; r++)
        ratio[r] = t[0][r] / t[1][r];
    qsort(t[0], (size_t)rounds, sizeof *ms, bench_cmp_double);
    qsort(t[1], (size_t)rounds, sizeof *ms, bench_cmp_double);
    qsort(ratio, (size_t)rounds, sizeof *ms, bench_cmp_double);
    const double m0 = t[0][rounds / 2], m1 = t[1][rounds / 2];
    const double flop = (back ? 2.5 : 1.0) * 4.0 * (double)n * (double)n * (double)d *
                        (double)hq * (causal ? 0.5 : 1.0);
    const int same = back ? !memcmp(g[0], g[1], 3 * ne * sizeof *x)
                          : !memcmp(o[0], o[1], ne * sizeof *x);
    printf("%s d %lld n %lld causal %d threads %d (%s): old %.2f ms (%.0f GFLOP/s)  new %.2f ms "
           "(%.0f GFLOP/s)  new/old speed %.3f  paired median %.3f [q1 %.3f q3 %.3f]  %s same "
           "bits: %s\n",
           back ? "bwd" : "fwd", (long long)d, (long long)n, causal, pa.num_threads, cpu ? "cpu time" : "wall", m0,
           flop / m0 / 1e6, m1, flop / m1 / 1e6, m0 / m1, ratio[rounds / 2], ratio[rounds / 4],
           ratio[3 * rounds / 4], back ? "dQ dK dV" : "O", same ? "yes" : "NO");
    free(x), free(lse), free(ms);
    return 0;
}
