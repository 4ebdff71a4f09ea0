/*
 * di_rows_time.c — the backward's D_i = dO_i . O_i (kernels.h di_rows: CPU_DI_ROWS rows a call,
 * each its own float64 sum in feature order) timed on every table this CPU runs, as
 * src/cpu/attn_bwd.c compute_di calls it: rows of unit feature stride, bf16 (or --dtype f32 /
 * f16), one thread.
 *
 *   flashc_di_rows_time [--rows 4096] [--d 64] [--reps 31] [--dtype bf16]
 *
 * Per table: one warm-up pass over the rows, then --reps passes, each timed by the calling
 * thread's CPU time; prints the median and the minimum in ns per row and the table's checksum
 * (the same bits on every table: the sums are exact products added in the same order).
 */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"
#include "kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_clock.h"

static double cpu_s(void) { return bench_seconds(CLOCK_THREAD_CPUTIME_ID); }

int main(int argc, char **argv)
{
    int64_t rows = 4096, d = 64;
    int reps = 31;
    flashc_dtype dt = FLASHC_BF16;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--rows"))
            rows = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--d"))
            d = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--dtype"))
            dt = !strcmp(argv[i + 1], "f32") ? FLASHC_F32 : !strcmp(argv[i + 1], "f16") ? FLASHC_F16 : FLASHC_BF16;
        else {
            fprintf(stderr, "usage: %s [--rows N] [--d D] [--reps R] [--dtype bf16|f16|f32]\n", argv[0]);
            return 2;
        }
    }
    if (rows < CPU_DI_ROWS || d < 1 || reps < 1 || reps > 1000) {
        fprintf(stderr, "di_rows_time: rows >= %d, d >= 1, 1 <= reps <= 1000\n", CPU_DI_ROWS);
        return 2;
    }
    rows -= rows % CPU_DI_ROWS;
    const size_t es = flashc_dtype_size(dt);
    void *o = malloc((size_t)(rows * d) * es), *dout = malloc((size_t)(rows * d) * es);
    float *out = malloc((size_t)rows * sizeof *out);
    double *t = malloc((size_t)reps * sizeof *t);
    if (!o || !dout || !out || !t)
        return 1;
    unsigned s = 12345u;
    for (int64_t e = 0; e < rows * d; e++) { /* values in [-2, 2) */
        s = s * 1664525u + 1013904223u;
        flashc__store(o, dt, e, (float)(s >> 8) * 0x1p-22f - 2.0f);
        s = s * 1664525u + 1013904223u;
        flashc__store(dout, dt, e, (float)(s >> 8) * 0x1p-22f - 2.0f);
    }
    printf("di_rows: %lld rows of %lld features, dtype %s, %d rows a call, %d reps (thread CPU time)\n",
           (long long)rows, (long long)d, flashc__dtype_name(dt), CPU_DI_ROWS, reps);
    for (int k = 0; cpu_isa_names[k]; k++) {
        const cpu_kernels *kr = cpu_kernels_by_name(cpu_isa_names[k]);
        if (!kr)
            continue;
        for (int rep = -1; rep < reps; rep++) {
            const double t0 = cpu_s();
            for (int64_t g = 0; g < rows; g += CPU_DI_ROWS) {
                int64_t ao[CPU_DI_ROWS];
                for (int r = 0; r < CPU_DI_ROWS; r++)
                    ao[r] = (g + r) * d;
                kr->di_rows(o, ao, 1, dout, ao, 1, d, dt, out + g);
            }
            if (rep >= 0)
                t[rep] = cpu_s() - t0;
        }
        double sum = 0;
        for (int64_t r = 0; r < rows; r++)
            sum += out[r];
        qsort(t, (size_t)reps, sizeof *t, bench_cmp_double);
        printf("  %-11s median %6.2f ns/row, min %6.2f, checksum %.9g\n", kr->name,
               1e9 * t[reps / 2] / (double)rows, 1e9 * t[0] / (double)rows, sum);
    }
    free(o), free(dout), free(out), free(t);
    return 0;
}
