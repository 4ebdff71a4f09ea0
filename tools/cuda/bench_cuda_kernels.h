/*
 * bench_cuda_kernels.h — the device side of `flashc bench --device cuda` (tools/bench_cuda.c):
 * a counting device allocator, random fills, event timing, and the framework-style (unfused)
 * baselines: attention with S and P in device memory (S and P·V by cuBLAS, a softmax kernel in
 * between), RMSNorm and SwiGLU as separate kernels with their temporaries. Compiled only into
 * the CLI (the .cu files of tools/cuda, linked with cuBLAS); libflashc never sees cuBLAS.
 *
 * Every function returns 0 on success or -1 with bcu_error() saying why. dtype codes are
 * flashc_dtype values. Tensors are the library's layouts: q, k, v, o (B, S, H, D) contiguous.
 */
#ifndef FLASHC_TOOLS_BENCH_CUDA_KERNELS_H
#define FLASHC_TOOLS_BENCH_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

const char *bcu_error(void);
/* Device 0's name and memory; 0 when a device is usable. */
int bcu_init(char *name, size_t name_size, size_t *total_bytes);
size_t bcu_free_bytes(void);

/* Counting device allocator: every buffer of a case goes through it, so peak is measured. */
void *bcu_alloc(size_t bytes); /* NULL (and bcu_error) when cudaMalloc fails */
void bcu_free(void *p);
size_t bcu_current(void);
size_t bcu_peak(void);
void bcu_reset_peak(void);

/* n elements of dtype at p: N(0, 1) * scale from (seed, index), deterministic. */
int bcu_fill_normal(void *p, int dtype, size_t n, uint64_t seed, float scale);
int bcu_to_host(void *dst, const void *src, size_t bytes);
int bcu_sync(void);

/* Times fn(ctx) (which launches work on the default stream): warmup untimed calls, then reps
 * calls each between two events; median and fastest in ms. fn returns 0 or -1. */
int bcu_time(int (*fn)(void *ctx), void *ctx, int warmup, int reps, double *median_ms,
             double *min_ms);

/* Times one batch of `calls` back-to-back fn(ctx) calls between two events (after a device
 * synchronisation, so the queue starts empty): the batch's time over calls, ms. */
int bcu_time_batch(int (*fn)(void *ctx), void *ctx, int calls, double *ms_per_call);

/* RoPE tables (P, half) float32: angle p theta^(-2 j / (2 half)), computed in float64. */
int bcu_rope_tables(float *cos_t, float *sin_t, int64_t P, int64_t half, double theta);

/* Framework-style attention, bf16 / f16 (B, S, H, D), H == Hkv: per batch entry
 *   S = scale * q k^T   (H, Sq, Sk) in dtype, cuBLAS strided-batched GEMM (fp32 compute)
 *   P = softmax(S)      (H, Sq, Sk) in dtype, one kernel (causal mask applied there)
 *   o = P v             cuBLAS strided-batched GEMM
 * S and P are the caller's (H * Sq * Sk elements each), as a framework's allocator gives them. */
typedef struct bcu_attn {
    int dtype;
    int64_t B, Sq, Sk, H, D;
    float scale;
    int causal;
    const void *q, *k, *v;
    void *o, *S, *P;
} bcu_attn;
int bcu_attn_naive(const bcu_attn *a);

/* RMSNorm as three kernels: sq = x * x (T, D), ms = mean(sq) (T) float32, y = x rsqrt(ms+eps) w.
 * sq is (T, D) in dtype, ms (T) float32: the caller's. */
int bcu_rmsnorm_naive(int dtype, int64_t T, int64_t D, const void *x, const void *w, float eps,
                      void *sq, float *ms, void *y);
/* SwiGLU as three kernels: g, u = copies of the halves of gu (T, 2I); a = silu(g); out = a * u.
 * g, u, a (T, I) in dtype: the caller's. */
int bcu_swiglu_naive(int dtype, int64_t T, int64_t I, const void *gu, void *g, void *u, void *a,
                     void *out);
/* dst <- src, bytes (the bandwidth ceiling: cudaMemcpyAsync device to device). */
int bcu_copy(void *dst, const void *src, size_t bytes);
/* max |a - b| / (1 + |b|) over n elements of dtype (device buffers; computed on the device). */
int bcu_max_rel_err(const void *a, const void *b, int dtype, size_t n, double *err);

#ifdef __cplusplus
}
#endif

#endif /* FLASHC_TOOLS_BENCH_CUDA_KERNELS_H */
