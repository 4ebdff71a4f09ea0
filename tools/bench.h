/*
 * bench.h — `flashc bench`: every (problem, implementation) pair runs in its own child process,
 * so the child's peak RSS is that case's own; the child sends one bench_result back over a pipe.
 */
#ifndef FLASHC_TOOLS_BENCH_H
#define FLASHC_TOOLS_BENCH_H

#include "cases.h"

#include <stdint.h>

/* One row of the report. Plain data only: it crosses a pipe from the child as raw bytes. */
typedef struct bench_result {
    char op[24];
    char impl[16];
    char shape[160];        /* case_describe()                                              */
    char dtype[8];          /* storage dtype of the row's tensors: "f32", "bf16", "f16"      */
    int impl_index;         /* 0 = the reference (naive)                                    */
    int64_t n, d;           /* attention: Sq and D; row ops: T and the row width            */
    int64_t block_q, block_k; /* tiles used (attention flash), 0 otherwise                  */
    int64_t tile_pairs;     /* tile pairs computed by one call (attention flash)            */
    int reps, warmup;       /* timed runs (median of these) and untimed warm-up calls       */
    double ms, ms_min;      /* median and fastest of the timed runs, milliseconds           */
    double gflops;          /* useful FLOPs / median time (attention), < 0 when not used    */
    double gbps;            /* minimal bytes / median time (row ops), < 0 when not used      */
    double peak_mib;        /* library allocations during one call (counting allocator)     */
    double rss_mib;         /* the child's peak resident set size                           */
    double traffic_mib;     /* modeled bytes moved (traffic.h)                              */
    double max_err;         /* vs the reference output, in the op's metric                  */
    double tol;             /* the op's tolerance for max_err                               */
    int inputs_changed;     /* 1 if a run modified an input                                 */
    int failed;             /* nonzero: error holds why (the row has no figures)            */
    char error[256];
    /* filled by the parent from the naive row of the same problem (0 when absent) */
    double speedup;         /* naive ms / this ms                                           */
    double mem_ratio;       /* naive peak_mib / this peak_mib                               */
    double rss_ratio;       /* naive rss_mib / this rss_mib                                 */
    double of_copy;         /* GPU perf mode: GB/s over the same run's copy of the same bytes (0: none) */
} bench_result;

/* `flashc bench [options]`: argv[0] is "bench". Returns the process exit status. */
int bench_main(int argc, char **argv);

#endif /* FLASHC_TOOLS_BENCH_H */
