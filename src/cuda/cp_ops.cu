/*
 * cp_ops.cu — the context-parallel ring's tensor ops on CUDA memory (cp_dev_ops of src/cp/cp.h):
 * pack a strided K/V view into the ring buffer, merge a partial (O, LSE) into the float32
 * accumulator, add partial gradients, store the accumulators into the caller's views. All on
 * the call's stream, asynchronous; scratch from the library's pool (scratch.cu) on that stream. Each kernel
 * touches every element once; they run beside attention kernels that read each K/V row D times,
 * so they are plain one-thread-per-element (or per-row) loops.
 */
#include "attn_cuda.cuh"
#include "scratch.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

extern "C" {
#include "cp.h"
}

namespace {

__device__ __forceinline__ float ld(const void *p, int dt, int64_t i)
{
    switch (dt) {
    case FLASHC_BF16: return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    case FLASHC_F16: return __half2float(((const __half *)p)[i]);
    default: return ((const float *)p)[i];
    }
}

__device__ __forceinline__ void st(void *p, int dt, int64_t i, float v)
{
    switch (dt) {
    case FLASHC_BF16: ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v); break;
    case FLASHC_F16: ((__half *)p)[i] = __float2half_rn(v); break;
    default: ((float *)p)[i] = v;
    }
}

struct view4 {
    int64_t n[4], s[4];
};

static view4 view_of(const flashc_tensor *t)
{
    view4 v;
    for (int i = 0; i < 4; i++)
        v.n[i] = t->ndim > i ? t->shape[i] : 1, v.s[i] = t->ndim > i ? t->stride[i] : 0;
    return v;
}

__device__ __forceinline__ int64_t strided_off(const view4 &v, int64_t e)
{
    int64_t off = 0;
    for (int d = 3; d >= 0; d--) {
        off += (e % v.n[d]) * v.s[d];
        e /= v.n[d];
    }
    return off;
}

/* 2- or 4-byte elements moved as their bits */
template <typename T>
__global__ void pack_kernel(const T *__restrict__ src, view4 v, T *__restrict__ dst, int64_t n)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x)
        dst[e] = src[strided_off(v, e)];
}

__global__ void fill_kernel(float *dst, int64_t n, float value)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x)
        dst[e] = value;
}

/* one block per (b, row, head); threads over the Dv features */
__global__ void merge_kernel(int64_t L, int64_t H, int64_t Dv, int64_t r0, int64_t n, float *o_acc,
                             float *lse_acc, const void *o_part, int dt, const float *lse_part)
{
    const int64_t row = blockIdx.x; /* over B * n * H */
    const int64_t h = row % H, i = r0 + (row / H) % n, b = row / (H * n);
    const int64_t li = (b * H + h) * L + i, oi = ((b * L + i) * H + h) * Dv;
    const float l2 = lse_part[li], l1 = lse_acc[li];
    if (l2 == -INFINITY)
        return;
    float a1 = 0.0f, a2 = 1.0f, lnew = l2;
    if (l1 != -INFINITY) {
        const float m = fmaxf(l1, l2), w1 = expf(l1 - m), w2 = expf(l2 - m), s = w1 + w2;
        a1 = w1 / s, a2 = w2 / s, lnew = m + logf(s);
    }
    for (int64_t d = threadIdx.x; d < Dv; d += blockDim.x) {
        const float prev = l1 == -INFINITY ? 0.0f : o_acc[oi + d];
        o_acc[oi + d] = a1 * prev + a2 * ld(o_part, dt, oi + d);
    }
    /* every thread has read l1 (other warps may still be about to) before it is replaced; the
     * return above is taken by the whole block or by none */
    __syncthreads();
    if (threadIdx.x == 0)
        lse_acc[li] = lnew;
}

__global__ void add_kernel(int64_t L, int64_t W, int64_t r0, int64_t n, float *acc,
                           const void *part, int dt, int64_t total)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t w = e % W, i = r0 + (e / W) % n, b = e / (W * n);
        const int64_t o = (b * L + i) * W + w;
        acc[o] += ld(part, dt, o);
    }
}

__global__ void store_kernel(const float *acc, void *out, int dt, view4 v, int64_t n)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x)
        st(out, dt, strided_off(v, e), acc[e]);
}

int grid_for(int64_t n)
{
    const int64_t g = (n + 255) / 256;
    return (int)(g < 65535 ? (g > 0 ? g : 1) : 65535);
}

cudaStream_t stream_of(cp_exec *x) { return (cudaStream_t)x->stream; }

flashc_status launched(cp_exec *x, const char *what)
{
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? FLASHC_OK : cuda_device_error(x->fn, what, e);
}

flashc_status dev_begin(cp_exec *x) { return cuda_check_no_pending_error(x->fn); }

void *dev_alloc(cp_exec *x, size_t bytes)
{
    void *p = NULL;
    const cudaError_t e = cuda_scratch_alloc(&p, bytes ? bytes : 1, stream_of(x));
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        flashc__fail(FLASHC_ERR_OUT_OF_MEMORY, "%s: cudaMallocAsync of %zu bytes of ring buffers "
                     "failed: %s", x->fn, bytes, cudaGetErrorString(e));
        return NULL;
    }
    return p;
}

void dev_free(cp_exec *x, void *p)
{
    if (p)
        (void)cuda_scratch_free(p, stream_of(x));
}

flashc_status dev_pack(cp_exec *x, const flashc_tensor *src, void *dst)
{
    const view4 v = view_of(src);
    const int64_t n = v.n[0] * v.n[1] * v.n[2] * v.n[3];
    if (flashc_dtype_size(src->dtype) == 2)
        pack_kernel<uint16_t><<<grid_for(n), 256, 0, stream_of(x)>>>(
            (const uint16_t *)src->data, v, (uint16_t *)dst, n);
    else
        pack_kernel<uint32_t><<<grid_for(n), 256, 0, stream_of(x)>>>(
            (const uint32_t *)src->data, v, (uint32_t *)dst, n);
    return launched(x, "the K/V pack kernel");
}

flashc_status dev_fill(cp_exec *x, float *dst, int64_t n, float value)
{
    if (n <= 0)
        return FLASHC_OK;
    fill_kernel<<<grid_for(n), 256, 0, stream_of(x)>>>(dst, n, value);
    return launched(x, "the fill kernel");
}

flashc_status dev_merge(cp_exec *x, int64_t B, int64_t L, int64_t H, int64_t Dv, int64_t r0,
                        int64_t n, float *o_acc, float *lse_acc, const void *o_part,
                        flashc_dtype dt, const float *lse_part)
{
    const int64_t rows = B * n * H;
    if (rows <= 0)
        return FLASHC_OK;
    if (rows > INT32_MAX)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED, "%s: %lld rows in one merge", x->fn,
                            (long long)rows);
    merge_kernel<<<(unsigned)rows, Dv < 128 ? 64 : 128, 0, stream_of(x)>>>(
        L, H, Dv, r0, n, o_acc, lse_acc, o_part, (int)dt, lse_part);
    return launched(x, "the (O, LSE) merge kernel");
}

flashc_status dev_add(cp_exec *x, int64_t B, int64_t L, int64_t W, int64_t r0, int64_t n,
                      float *acc, const void *part, flashc_dtype dt)
{
    const int64_t total = B * n * W;
    if (total <= 0)
        return FLASHC_OK;
    add_kernel<<<grid_for(total), 256, 0, stream_of(x)>>>(L, W, r0, n, acc, part, (int)dt, total);
    return launched(x, "the gradient add kernel");
}

flashc_status dev_store(cp_exec *x, const float *acc, flashc_tensor *out)
{
    const view4 v = view_of(out);
    const int64_t n = v.n[0] * v.n[1] * v.n[2] * v.n[3];
    store_kernel<<<grid_for(n), 256, 0, stream_of(x)>>>(acc, out->data, (int)out->dtype, v, n);
    return launched(x, "the store kernel");
}

flashc_status dev_store_lse(cp_exec *x, const float *acc, flashc_tensor *out)
{
    view4 v = view_of(out); /* 3-d: the 4th dim is 1 */
    const int64_t n = v.n[0] * v.n[1] * v.n[2];
    store_kernel<<<grid_for(n), 256, 0, stream_of(x)>>>(acc, out->data, FLASHC_F32, v, n);
    return launched(x, "the LSE store kernel");
}

flashc_status dev_sync(cp_exec *x)
{
    const cudaError_t e = cudaStreamSynchronize(stream_of(x));
    return e == cudaSuccess ? FLASHC_OK : cuda_device_error(x->fn, "cudaStreamSynchronize", e);
}

flashc_status dev_copy(cp_exec *x, void *dst, const void *src, size_t bytes)
{
    if (!bytes)
        return FLASHC_OK;
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_of(x));
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(stream_of(x));
    return e == cudaSuccess ? FLASHC_OK : cuda_device_error(x->fn, "cudaMemcpyAsync", e);
}

} // namespace

/* positional: C++17 has no designated initialisers (the order of cp_dev_ops in cp.h) */
extern "C" const cp_dev_ops cp_cuda_ops = {
    FLASHC_DEVICE_CUDA, dev_begin, dev_alloc,     dev_free, dev_pack, dev_fill,
    dev_merge,          dev_add,   dev_store,     dev_store_lse, dev_sync, dev_copy,
};
