/*
 * attn_bwd_cputime.c — flashc_attn_bwd timed by the CPU time of the calling thread, for
 * before/after comparisons of the CPU backward on a shared, oversubscribed machine.
 *
 *   flashc_attn_bwd_cputime [n] [d] [heads] [reps] [causal] [softcap] [alibi] [dtype] [pass]
 *                     (defaults 2048 64 4 7 0 0 0 f32 bwd; alibi 1 = slopes (heads); dtype f32 or
 *                      bf16: the tensors in that storage, the inputs rounded to nearest even once;
 *                      pass bwd or fwd: time flashc_attn_fwd instead, FLOPs 4 H n^2 D)
 *
 * One thread (params.num_threads = 1: OpenMP runs the work on the calling thread), so
 * CLOCK_THREAD_CPUTIME_ID counts the kernel's own work and not the time other processes hold
 * the core; wall-clock medians on a loaded 2-core machine vary by 3x from run to run, thread CPU
 * time by a few percent (cache pollution by the other processes remains: take the minimum).
 * Prints one line: n d heads causal, min and median CPU ms over reps after one warm-up, and
 * GFLOP/s of the minimum (FLOPs = 2.5 x the forward's 4 H n^2 d, halved when causal).
 * FLASHC_ISA picks the CPU table as everywhere (e.g. avx512bf16 against avx512 for bf16 storage).
 */
#define _POSIX_C_SOURCE 200809L
#include "flashc.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int cmp(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static float *filled(size_t n, unsigned *seed)
{
    float *x = malloc(n * sizeof *x);
    if (!x)
        exit(1);
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        x[i] = (float)((*seed >> 8) * (1.0 / 16777216.0) * 2.0 - 1.0);
    }
    return x;
}

/* x rounded to bf16 (nearest even), in place as the upper halves: a uint16_t array of n */
static void *to_bf16(float *x, size_t n)
{
    uint16_t *y = (uint16_t *)x; /* shrinks in place: element i is read before i / 2 is written */
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        u += 0x7fffu + ((u >> 16) & 1u);
        y[i] = (uint16_t)(u >> 16);
    }
    return y;
}

int main(int argc, char **argv)
{
    const int64_t n = argc > 1 ? atoll(argv[1]) : 2048, d = argc > 2 ? atoll(argv[2]) : 64;
    const int64_t h = argc > 3 ? atoll(argv[3]) : 4;
    const int reps = argc > 4 ? atoi(argv[4]) : 7, causal = argc > 5 ? atoi(argv[5]) : 0;
    const float softcap = argc > 6 ? (float)atof(argv[6]) : 0.0f;
    const int alibi = argc > 7 ? atoi(argv[7]) : 0;
    const int bf16 = argc > 8 && !strcmp(argv[8], "bf16");
    const int fwd = argc > 9 && !strcmp(argv[9], "fwd");
    const flashc_dtype dt = bf16 ? FLASHC_BF16 : FLASHC_F32;
    const size_t e = (size_t)(n * h * d);
    unsigned seed = 12345u;
    float *q = filled(e, &seed), *k = filled(e, &seed), *v = filled(e, &seed);
    float *dout = filled(e, &seed), *o = filled(e, &seed), *lse = filled((size_t)(h * n), &seed);
    float *dq = filled(e, &seed), *dk = filled(e, &seed), *dv = filled(e, &seed);
    void *qs = q, *ks = k, *vs = v, *dos = dout;
    if (bf16)
        qs = to_bf16(q, e), ks = to_bf16(k, e), vs = to_bf16(v, e), dos = to_bf16(dout, e);
    flashc_tensor tq = flashc_tensor_4d(qs, dt, 1, n, h, d);
    flashc_tensor tk = flashc_tensor_4d(ks, dt, 1, n, h, d);
    flashc_tensor tv = flashc_tensor_4d(vs, dt, 1, n, h, d);
    flashc_tensor to = flashc_tensor_4d(o, dt, 1, n, h, d);
    flashc_tensor tdo = flashc_tensor_4d(dos, dt, 1, n, h, d);
    flashc_tensor tl = flashc_tensor_3d(lse, FLASHC_F32, 1, h, n);
    flashc_tensor tdq = flashc_tensor_4d(dq, dt, 1, n, h, d);
    flashc_tensor tdk = flashc_tensor_4d(dk, dt, 1, n, h, d);
    flashc_tensor tdv = flashc_tensor_4d(dv, dt, 1, n, h, d);
    flashc_attn_params p = flashc_attn_params_default();
    p.causal = causal;
    p.num_threads = 1;
    p.softcap = softcap;
    float *slopes = filled((size_t)h, &seed);
    flashc_tensor ts = flashc_tensor_1d(slopes, FLASHC_F32, h);
    if (alibi)
        p.alibi_slopes = &ts;
    /* o, lse: the CPU forward, or the reference where the forward does not serve the modifier */
    if (flashc_attn_fwd(&p, &tq, &tk, &tv, &to, &tl, NULL) != FLASHC_OK &&
        flashc_attn_fwd_naive(&p, &tq, &tk, &tv, &to, &tl, NULL) != FLASHC_OK) {
        fprintf(stderr, "forward: %s\n", flashc_last_error());
        return 1;
    }
    double *t = malloc((size_t)reps * sizeof *t);
    for (int r = -1; r < reps; r++) {
        const double t0 = cpu_ms();
        if ((fwd ? flashc_attn_fwd(&p, &tq, &tk, &tv, &to, &tl, NULL)
                 : flashc_attn_bwd(&p, &tq, &tk, &tv, &to, &tdo, &tl, &tdq, &tdk, &tdv, NULL)) !=
            FLASHC_OK) {
            fprintf(stderr, "backward: %s\n", flashc_last_error());
            return 1;
        }
        if (r >= 0)
            t[r] = cpu_ms() - t0;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp);
    const double flops = (fwd ? 1.0 : 2.5) * 4.0 * (double)h * (double)n * (double)n * (double)d *
                         (causal ? 0.5 : 1.0);
    printf("%s %s n %lld d %lld heads %lld causal %d softcap %g alibi %d: min %.1f ms, median %.1f ms (thread CPU), "
           "%.2f GFLOP/s at the min\n",
           fwd ? "fwd" : "bwd", bf16 ? "bf16" : "f32", (long long)n, (long long)d, (long long)h,
           causal, (double)softcap, alibi, t[0],
           t[reps / 2],
           flops / (t[0] * 1e6));
    free(slopes), free(t), free(q), free(k), free(v), free(dout), free(o), free(lse), free(dq), free(dk),
        free(dv);
    return 0;
}
