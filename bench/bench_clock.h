/* bench/bench_clock.h — the clock and the comparator of the C bench drivers (lib_ab.c,
 * di_rows_time.c, p_ds_split_ab.c, amx_phases.c), one definition for them all. Each driver
 * picks its clock for what it measures: CLOCK_MONOTONIC (wall, threads running in parallel),
 * CLOCK_PROCESS_CPUTIME_ID (one thread's work whoever else holds the core),
 * CLOCK_THREAD_CPUTIME_ID (the calling thread alone). The includer defines _POSIX_C_SOURCE
 * (or _GNU_SOURCE) before its first include. */
#ifndef FLASHC_BENCH_CLOCK_H
#define FLASHC_BENCH_CLOCK_H

#include <stdlib.h>
#include <time.h>

/* seconds on clock id */
static inline double bench_seconds(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* qsort's comparator of doubles, ascending */
static inline int bench_cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif
