/*
 * bench_cuda.h — `flashc bench --device cuda`: the seeds' exercise on the GPU. Naive attention
 * with S and P in device memory (S and P·V by cuBLAS, a softmax kernel) against the library's
 * flash forward; RMSNorm and SwiGLU as separate framework-style kernels against the fused
 * ones; the fused backwards, RoPE and a device-copy ceiling. Columns as on the CPU: median
 * time (CUDA events), rate, measured peak device memory (a counting device allocator in the
 * tool: every buffer of a case goes through it), modeled HBM traffic (traffic.h), error vs the
 * naive output. A case whose buffers do not fit prints "OOM: needs X GiB" as its row.
 * Perf mode (calls > 1): the row ops and copies are set up and run once each first, then timed
 * in interleaved rounds of `calls`-call batches beside a cudaMemcpy of each op's bytes (of_copy).
 *
 * Runs in-process (no fork: a CUDA context does not survive one). Built only with the CUDA
 * backend; otherwise bench_cuda_run explains and returns 2.
 */
#ifndef FLASHC_TOOLS_BENCH_CUDA_H
#define FLASHC_TOOLS_BENCH_CUDA_H

#include "cli.h"
#include "report.h"

#include "flashc.h"

typedef struct bench_cuda_opts {
    const char *ops;          /* comma-separated op names or "all"                         */
    const char *format;       /* md, csv, json                                             */
    cli_int_list n, d;        /* attention sequence lengths and head dims                   */
    int64_t heads, batch;     /* attention (H == Hkv)                                       */
    int64_t tokens, hidden, inter;
    int64_t reps, warmup;
    int64_t calls;            /* row ops and copies: calls a timed batch; > 1: perf mode      */
    int causal;
    flashc_dtype dt;          /* bf16 or f16 for attention; any for the row ops             */
    uint64_t seed;
} bench_cuda_opts;

/* Perf mode's most rounds (--reps). */
#define BENCH_CUDA_MAX_ROUNDS 101

/* The GPU bench's op names, for --help and option checks. */
extern const char bench_cuda_op_names[];

/* Runs the cases, prints the report (meta filled by the caller: command, date, seed).
 * Returns the exit status: 0, 1 when a case failed (OOM rows are not failures), 2 when this
 * build has no CUDA backend or no device is visible. */
int bench_cuda_run(const bench_cuda_opts *o, report_meta *meta);

#endif /* FLASHC_TOOLS_BENCH_CUDA_H */
