/*
 * bench_cuda_kernels.cu — see bench_cuda_kernels.h. The baselines are written the way an
 * unfused framework runs them (PyTorch eager: each op a kernel, each intermediate a tensor in
 * device memory); they are reasonable kernels (16-byte accesses where the rows allow), so the
 * gap to the fused paths is the memory traffic, not a slow baseline.
 */
#include "bench_cuda_kernels.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DT_F32 = 0, DT_F16 = 1, DT_BF16 = 2 }; /* flashc_dtype */

static char g_err[512];
static size_t g_cur, g_peak;
static cublasHandle_t g_blas;

static int fail(const char *what, cudaError_t e)
{
    snprintf(g_err, sizeof g_err, "%s: %s", what, cudaGetErrorString(e));
    (void)cudaGetLastError();
    return -1;
}

static int check_launch(const char *what)
{
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : fail(what, e);
}

extern "C" const char *bcu_error(void) { return g_err; }

extern "C" int bcu_init(char *name, size_t name_size, size_t *total)
{
    cudaDeviceProp prop;
    cudaError_t e = cudaSetDevice(0);
    if (e == cudaSuccess)
        e = cudaGetDeviceProperties(&prop, 0);
    if (e != cudaSuccess)
        return fail("no usable CUDA device", e);
    snprintf(name, name_size, "%s (%d SMs, %.0f GiB)", prop.name, prop.multiProcessorCount,
             (double)prop.totalGlobalMem / (1 << 30));
    *total = prop.totalGlobalMem;
    if (!g_blas && cublasCreate(&g_blas) != CUBLAS_STATUS_SUCCESS) {
        snprintf(g_err, sizeof g_err, "cublasCreate failed");
        return -1;
    }
    return 0;
}

extern "C" size_t bcu_free_bytes(void)
{
    size_t f = 0, t = 0;
    cudaMemGetInfo(&f, &t);
    return f;
}

/* ---- counting allocator: live blocks in a small host table -------------------------------- */

enum { MAX_LIVE = 256 };
static struct { void *p; size_t bytes; } g_live[MAX_LIVE];

extern "C" void *bcu_alloc(size_t bytes)
{
    int slot = -1;
    for (int i = 0; i < MAX_LIVE && slot < 0; i++)
        if (!g_live[i].p)
            slot = i;
    if (slot < 0) {
        snprintf(g_err, sizeof g_err, "bcu_alloc: more than %d live buffers", MAX_LIVE);
        return NULL;
    }
    void *p = NULL;
    const cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        fail("cudaMalloc", e);
        return NULL;
    }
    g_live[slot].p = p, g_live[slot].bytes = bytes;
    g_cur += bytes;
    if (g_cur > g_peak)
        g_peak = g_cur;
    return p;
}

extern "C" void bcu_free(void *p)
{
    if (!p)
        return;
    for (int i = 0; i < MAX_LIVE; i++)
        if (g_live[i].p == p) {
            g_cur -= g_live[i].bytes;
            g_live[i].p = NULL;
            cudaFree(p);
            return;
        }
}

extern "C" size_t bcu_current(void) { return g_cur; }
extern "C" size_t bcu_peak(void) { return g_peak; }
extern "C" void bcu_reset_peak(void) { g_peak = g_cur; }

/* ---- typed access ------------------------------------------------------------------------ */

template <typename T> struct ty;
template <> struct ty<float> {
    static __device__ float ld(float x) { return x; }
    static __device__ float st(float x) { return x; }
};
template <> struct ty<__nv_bfloat16> {
    static __device__ float ld(__nv_bfloat16 x) { return __bfloat162float(x); }
    static __device__ __nv_bfloat16 st(float x) { return __float2bfloat16_rn(x); }
};
template <> struct ty<__half> {
    static __device__ float ld(__half x) { return __half2float(x); }
    static __device__ __half st(float x) { return __float2half_rn(x); }
};

#define DISPATCH(dtype, T, ...)                                                                    \
    do {                                                                                           \
        if ((dtype) == DT_BF16) {                                                                  \
            typedef __nv_bfloat16 T;                                                               \
            __VA_ARGS__;                                                                           \
        } else if ((dtype) == DT_F16) {                                                            \
            typedef __half T;                                                                      \
            __VA_ARGS__;                                                                           \
        } else {                                                                                   \
            typedef float T;                                                                       \
            __VA_ARGS__;                                                                           \
        }                                                                                          \
    } while (0)

static unsigned blocks(size_t n, int threads)
{
    size_t b = (n + threads - 1) / threads;
    return (unsigned)(b > 65535u * 32u ? 65535u * 32u : b);
}

/* ---- random fill ------------------------------------------------------------------------- */

__device__ __forceinline__ uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

template <typename T> __global__ void fill_normal_k(T *p, size_t n, uint64_t seed, float scale)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const uint64_t h = mix64(seed * 0x9e3779b97f4a7c15ull + i);
        const float u1 = ((float)(h >> 40) + 0.5f) * (1.0f / 16777216.0f);
        const float u2 = (float)((h >> 16) & 0xffffff) * (1.0f / 16777216.0f);
        p[i] = ty<T>::st(sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2) * scale);
    }
}

extern "C" int bcu_fill_normal(void *p, int dtype, size_t n, uint64_t seed, float scale)
{
    DISPATCH(dtype, T, fill_normal_k<T><<<blocks(n, 256), 256>>>((T *)p, n, seed, scale));
    return check_launch("fill_normal");
}

extern "C" int bcu_to_host(void *dst, const void *src, size_t bytes)
{
    const cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
    return e == cudaSuccess ? 0 : fail("cudaMemcpy", e);
}

extern "C" int bcu_sync(void)
{
    const cudaError_t e = cudaDeviceSynchronize();
    return e == cudaSuccess ? 0 : fail("cudaDeviceSynchronize", e);
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

extern "C" int bcu_time(int (*fn)(void *), void *ctx, int warmup, int reps, double *median,
                        double *mn)
{
    for (int i = 0; i < warmup; i++)
        if (fn(ctx) != 0)
            return -1;
    if (bcu_sync() != 0)
        return -1;
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0), cudaEventCreate(&e1);
    double *t = (double *)malloc(sizeof(double) * (size_t)reps);
    int rc = 0;
    for (int i = 0; i < reps && rc == 0; i++) {
        cudaEventRecord(e0);
        rc = fn(ctx);
        cudaEventRecord(e1);
        cudaError_t e = cudaEventSynchronize(e1);
        if (e != cudaSuccess) {
            rc = fail("timed run", e);
            break;
        }
        float ms = 0.0f;
        cudaEventElapsedTime(&ms, e0, e1);
        t[i] = ms;
    }
    if (rc == 0) {
        qsort(t, (size_t)reps, sizeof(double), cmp_double);
        *median = reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
        *mn = t[0];
    }
    free(t);
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    return rc;
}

extern "C" int bcu_time_batch(int (*fn)(void *), void *ctx, int calls, double *ms_per_call)
{
    if (bcu_sync() != 0)
        return -1;
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0), cudaEventCreate(&e1);
    int rc = 0;
    cudaEventRecord(e0);
    for (int i = 0; i < calls && rc == 0; i++)
        rc = fn(ctx);
    cudaEventRecord(e1);
    const cudaError_t e = cudaEventSynchronize(e1);
    if (rc == 0 && e != cudaSuccess)
        rc = fail("timed batch", e);
    if (rc == 0) {
        float ms = 0.0f;
        cudaEventElapsedTime(&ms, e0, e1);
        *ms_per_call = (double)ms / calls;
    }
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    return rc;
}

/* ---- RoPE tables ---------------------------------------------------------------------------- */

__global__ void rope_tables_k(float *c, float *s, int64_t P, int64_t half, double theta)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < P * half;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t p = i / half, j = i % half;
        double sn, cs;
        sincos((double)p * pow(theta, -2.0 * (double)j / (double)(2 * half)), &sn, &cs);
        c[i] = (float)cs, s[i] = (float)sn;
    }
}

extern "C" int bcu_rope_tables(float *cos_t, float *sin_t, int64_t P, int64_t half, double theta)
{
    rope_tables_k<<<blocks((size_t)(P * half), 256), 256>>>(cos_t, sin_t, P, half, theta);
    return check_launch("rope_tables");
}

/* ---- naive attention ---------------------------------------------------------------------- */

/* V elements of a row: one 16-byte access (V = 16 / sizeof(T)) or one element (V = 1). */
template <typename T, int V> union chunk_t {
    uint4 u;
    T e[V];
    __device__ void load(const T *p)
    {
        if constexpr (V == 1)
            e[0] = p[0];
        else
            u = *reinterpret_cast<const uint4 *>(p);
    }
    __device__ void store(T *p) const
    {
        if constexpr (V == 1)
            p[0] = e[0];
        else
            *reinterpret_cast<uint4 *>(p) = u;
    }
};

/* One block per row of S: pass 1 the row's max and sum (online, per thread, then combined),
 * pass 2 writes P = exp(s - m) / l. The causal mask (bottom-right) is applied here, as the
 * masked_fill before a framework's softmax. 16-byte chunks when Sk % (16 / size) == 0. */
template <typename T, int V>
__global__ void softmax_rows_k(const T *S, T *P, int64_t Sq, int64_t Sk, int causal)
{
    const int64_t row = blockIdx.x;
    const int64_t i = row % Sq;
    const int64_t kend = causal ? (i + 1 + Sk - Sq < Sk ? i + 1 + Sk - Sq : Sk) : Sk;
    const T *s = S + row * Sk;
    T *p = P + row * Sk;
    float m = -INFINITY, l = 0.0f;
    for (int64_t j0 = (int64_t)threadIdx.x * V; j0 < Sk; j0 += (int64_t)blockDim.x * V) {
        chunk_t<T, V> c;
        c.load(s + j0);
        const T *e = c.e;
#pragma unroll
        for (int v = 0; v < V; v++) {
            if (j0 + v >= kend)
                continue;
            const float x = ty<T>::ld(e[v]);
            if (x > m) {
                l = l * __expf(m - x) + 1.0f;
                m = x;
            } else {
                l += __expf(x - m);
            }
        }
    }
    __shared__ float sm[32], sl[32];
    for (int o = 16; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o), l2 = __shfl_xor_sync(0xffffffffu, l, o);
        const float mm = fmaxf(m, m2);
        l = (m == -INFINITY ? 0.0f : l * __expf(m - mm)) + (m2 == -INFINITY ? 0.0f : l2 * __expf(m2 - mm));
        m = mm;
    }
    if (threadIdx.x % 32 == 0)
        sm[threadIdx.x / 32] = m, sl[threadIdx.x / 32] = l;
    __syncthreads();
    float M = -INFINITY, L = 0.0f;
    for (int w = 0; w < (int)blockDim.x / 32; w++)
        M = fmaxf(M, sm[w]);
    for (int w = 0; w < (int)blockDim.x / 32; w++)
        L += sm[w] == -INFINITY ? 0.0f : sl[w] * __expf(sm[w] - M);
    const float inv = L > 0.0f ? 1.0f / L : 0.0f;
    for (int64_t j0 = (int64_t)threadIdx.x * V; j0 < Sk; j0 += (int64_t)blockDim.x * V) {
        chunk_t<T, V> c;
        c.load(s + j0);
#pragma unroll
        for (int v = 0; v < V; v++)
            c.e[v] = ty<T>::st(j0 + v < kend ? __expf(ty<T>::ld(c.e[v]) - M) * inv : 0.0f);
        c.store(p + j0);
    }
}

extern "C" int bcu_attn_naive(const bcu_attn *a)
{
    if (a->dtype != DT_BF16 && a->dtype != DT_F16) {
        snprintf(g_err, sizeof g_err, "naive attention: bf16 or f16 only");
        return -1;
    }
    const cudaDataType_t dt = a->dtype == DT_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    const int64_t ld = a->H * a->D, sS = a->Sq * a->Sk;
    const float one = 1.0f, zero = 0.0f;
    for (int64_t b = 0; b < a->B; b++) {
        const char *q = (const char *)a->q + b * a->Sq * ld * 2;
        const char *k = (const char *)a->k + b * a->Sk * ld * 2;
        const char *v = (const char *)a->v + b * a->Sk * ld * 2;
        char *o = (char *)a->o + b * a->Sq * ld * 2;
        /* column-major: S^T(j, i) = sum_d K(d, j) Q(d, i), i.e. row-major S = Q K^T */
        cublasStatus_t st = cublasGemmStridedBatchedEx(
            g_blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)a->Sk, (int)a->Sq, (int)a->D, &a->scale, k, dt,
            (int)ld, a->D, q, dt, (int)ld, a->D, &zero, a->S, dt, (int)a->Sk, sS, (int)a->H,
            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        if (st != CUBLAS_STATUS_SUCCESS) {
            snprintf(g_err, sizeof g_err, "cuBLAS S = q k^T failed (%d)", (int)st);
            return -1;
        }
        const unsigned rows = (unsigned)(a->H * a->Sq);
        DISPATCH(a->dtype, T,
                 if (a->Sk % 8 == 0) softmax_rows_k<T, 8><<<rows, 256>>>((const T *)a->S, (T *)a->P, a->Sq, a->Sk, a->causal);
                 else softmax_rows_k<T, 1><<<rows, 256>>>((const T *)a->S, (T *)a->P, a->Sq, a->Sk, a->causal));
        if (check_launch("softmax") != 0)
            return -1;
        /* column-major: O(d, i) = sum_j V(d, j) P^T(j, i) */
        st = cublasGemmStridedBatchedEx(g_blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)a->D, (int)a->Sq,
                                        (int)a->Sk, &one, v, dt, (int)ld, a->D, a->P, dt,
                                        (int)a->Sk, sS, &zero, o, dt, (int)ld, a->D, (int)a->H,
                                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        if (st != CUBLAS_STATUS_SUCCESS) {
            snprintf(g_err, sizeof g_err, "cuBLAS o = P v failed (%d)", (int)st);
            return -1;
        }
    }
    return 0;
}

/* ---- naive RMSNorm and SwiGLU ------------------------------------------------------------ */

template <typename T> __global__ void square_k(const T *x, T *sq, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float v = ty<T>::ld(x[i]);
        sq[i] = ty<T>::st(v * v);
    }
}

template <typename T> __global__ void row_mean_k(const T *sq, int64_t D, float *ms)
{
    const T *r = sq + (int64_t)blockIdx.x * D;
    float s = 0.0f;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x)
        s += ty<T>::ld(r[d]);
    __shared__ float red[32];
    for (int o = 16; o > 0; o >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    if (threadIdx.x % 32 == 0)
        red[threadIdx.x / 32] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.0f;
        for (int w = 0; w < (int)blockDim.x / 32; w++)
            t += red[w];
        ms[blockIdx.x] = t / (float)D;
    }
}

template <typename T>
__global__ void scale_k(const T *x, const float *ms, const T *w, int64_t D, size_t n, float eps, T *y)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const int64_t t = (int64_t)(i / (size_t)D), d = (int64_t)(i % (size_t)D);
        y[i] = ty<T>::st(ty<T>::ld(x[i]) * rsqrtf(ms[t] + eps) * ty<T>::ld(w[d]));
    }
}

extern "C" int bcu_rmsnorm_naive(int dtype, int64_t T_, int64_t D, const void *x, const void *w,
                                 float eps, void *sq, float *ms, void *y)
{
    const size_t n = (size_t)T_ * (size_t)D;
    DISPATCH(dtype, T,
             square_k<T><<<blocks(n, 256), 256>>>((const T *)x, (T *)sq, n);
             row_mean_k<T><<<(unsigned)T_, 256>>>((const T *)sq, D, ms);
             scale_k<T><<<blocks(n, 256), 256>>>((const T *)x, ms, (const T *)w, D, n, eps, (T *)y));
    return check_launch("rmsnorm (naive)");
}

template <typename T> __global__ void split_k(const T *gu, int64_t I, size_t n, T *g, T *u)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const int64_t t = (int64_t)(i / (size_t)I), c = (int64_t)(i % (size_t)I);
        g[i] = gu[t * 2 * I + c];
        u[i] = gu[t * 2 * I + I + c];
    }
}

template <typename T> __global__ void silu_k(const T *g, T *a, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float v = ty<T>::ld(g[i]);
        a[i] = ty<T>::st(v / (1.0f + __expf(-v)));
    }
}

template <typename T> __global__ void mul_k(const T *a, const T *u, T *o, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        o[i] = ty<T>::st(ty<T>::ld(a[i]) * ty<T>::ld(u[i]));
}

extern "C" int bcu_swiglu_naive(int dtype, int64_t T_, int64_t I, const void *gu, void *g,
                                void *u, void *a, void *out)
{
    const size_t n = (size_t)T_ * (size_t)I;
    DISPATCH(dtype, T,
             split_k<T><<<blocks(n, 256), 256>>>((const T *)gu, I, n, (T *)g, (T *)u);
             silu_k<T><<<blocks(n, 256), 256>>>((const T *)g, (T *)a, n);
             mul_k<T><<<blocks(n, 256), 256>>>((const T *)a, (const T *)u, (T *)out, n));
    return check_launch("swiglu (naive)");
}

extern "C" int bcu_copy(void *dst, const void *src, size_t bytes)
{
    const cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, 0);
    return e == cudaSuccess ? 0 : fail("cudaMemcpyAsync", e);
}

/* ---- error ------------------------------------------------------------------------------- */

__device__ __forceinline__ void atomic_max_pos(float *addr, float v)
{
    /* v >= 0 (or NaN mapped to +inf): the int order of non-negative floats is theirs */
    atomicMax(reinterpret_cast<int *>(addr), __float_as_int(v));
}

template <typename T> __global__ void max_rel_k(const T *a, const T *b, size_t n, float *out)
{
    float e = 0.0f;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float x = ty<T>::ld(a[i]), y = ty<T>::ld(b[i]);
        float d = fabsf(x - y) / (1.0f + fabsf(y));
        if (!(d <= 3.0e38f))
            d = INFINITY; /* NaN or inf: never passes */
        e = fmaxf(e, d);
    }
    atomic_max_pos(out, e);
}

extern "C" int bcu_max_rel_err(const void *a, const void *b, int dtype, size_t n, double *err)
{
    float *d = NULL, h = 0.0f;
    cudaError_t e = cudaMalloc((void **)&d, sizeof(float));
    if (e != cudaSuccess)
        return fail("cudaMalloc", e);
    cudaMemset(d, 0, sizeof(float));
    DISPATCH(dtype, T, max_rel_k<T><<<blocks(n, 256) < 4096 ? blocks(n, 256) : 4096, 256>>>((const T *)a, (const T *)b, n, d));
    e = cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost);
    cudaFree(d);
    if (e != cudaSuccess)
        return fail("max_rel_err", e);
    *err = h;
    return 0;
}
