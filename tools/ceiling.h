/*
 * ceiling.h — the machine's practical peaks for `flashc bench --ceiling`, measured in the same
 * run as the rows they are read against:
 *   sgemm (OpenBLAS, dlopen'ed at run time)  the compute ceiling of the attention rows (GFLOP/s)
 *   bf16 gemm (oneDNN, dlopen'ed)           the compute ceiling of the bf16 attention rows
 *                                           (bf16 x bf16 -> float32: AMX or AVX512-BF16 where
 *                                           the CPU has them)
 *   stream copy (memcpy in 1 MiB blocks)    the bandwidth ceiling of the row ops (GB/s)
 * OpenBLAS is a bench-only dependency: neither the library nor the CLI links it, and a missing
 * libopenblas.so.0 is a clear error on that row only.
 */
#ifndef FLASHC_TOOLS_CEILING_H
#define FLASHC_TOOLS_CEILING_H

#include <stdint.h>

typedef struct ceiling_result {
    int reps;          /* timed runs after one warm-up                              */
    double ms, ms_min; /* median and fastest, milliseconds                          */
    double gflops;     /* sgemm: 2 n^3 / median time; < 0 for copy                  */
    double gbps;       /* copy: bytes read + written / median time; < 0 for sgemm   */
    char detail[128];  /* what ran ("OpenBLAS 0.3.21 ... core Zen, 2 threads")      */
    char error[256];   /* non-empty: the row failed, and why                        */
} ceiling_result;

/* C = A B, n x n x n float32, row-major, inputs uniform in [0, 1). OPENBLAS_CORETYPE and
 * OPENBLAS_L2_SIZE are removed from this process's environment before OpenBLAS is loaded (the
 * values set on the development machines select a kernel half as fast), so call this in a child
 * process, before anything else loads OpenBLAS. The library is libopenblas.so.0, or the file
 * FLASHC_OPENBLAS names. Returns 0, or -1 with r->error set. */
int ceiling_sgemm(int threads, int64_t n, int reps, ceiling_result *r);

/* C = A B, n x n x n, A and B bf16 (uniform in [0, 1)), C float32, row-major, by oneDNN's
 * dnnl_gemm_bf16bf16f32 from libdnnl.so.3 or .so.2 (or the file FLASHC_ONEDNN names), on
 * `threads` OpenMP threads. Returns 0, or -1 with r->error set. */
int ceiling_gemm_bf16(int threads, int64_t n, int reps, ceiling_result *r);

/* dst = src over `bytes` bytes (far larger than the caches), split over threads in 1 MiB
 * memcpy blocks: regular stores like the row ops' (glibc switches to non-temporal stores only
 * for copies larger than a large fraction of the L3). Bandwidth counts 2 x bytes per copy.
 * Returns 0, or -1 with r->error set. */
int ceiling_copy(int threads, int64_t bytes, int reps, ceiling_result *r);

#endif /* FLASHC_TOOLS_CEILING_H */
