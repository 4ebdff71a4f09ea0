/*
 * rows_common.cuh — typed 16-byte chunk access and block reductions shared by the row-op
 * kernels (rows.cu, rope.cu).
 *
 * A chunk is 16 bytes: 4 float32 or 8 bfloat16 / float16 elements, loaded as one uint4 and
 * widened to float32 (stored back rounded to nearest even). The vector kernels need every row
 * to start on a 16-byte boundary and a row length that is a whole number of chunks; the
 * dispatchers check that (vec_ok) and otherwise take the element-wise kernels.
 */
#ifndef FLASHC_CUDA_ROWS_COMMON_CUH
#define FLASHC_CUDA_ROWS_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "internal.h"
}

template <typename T> struct elem;
template <> struct elem<float> {
    static __device__ __forceinline__ float load(float x) { return x; }
    static __device__ __forceinline__ float store(float x) { return x; }
};
template <> struct elem<__nv_bfloat16> {
    static __device__ __forceinline__ float load(__nv_bfloat16 x) { return __bfloat162float(x); }
    static __device__ __forceinline__ __nv_bfloat16 store(float x) { return __float2bfloat16_rn(x); }
};
template <> struct elem<__half> {
    static __device__ __forceinline__ float load(__half x) { return __half2float(x); }
    static __device__ __forceinline__ __half store(float x) { return __float2half_rn(x); }
};

/* Elements per 16-byte chunk. */
template <typename T> struct chunk {
    static constexpr int n = 16 / (int)sizeof(T);
};

template <typename T>
__device__ __forceinline__ void load_chunk(const T *p, float (&v)[chunk<T>::n])
{
    const uint4 u = *reinterpret_cast<const uint4 *>(p);
    const T *e = reinterpret_cast<const T *>(&u);
#pragma unroll
    for (int i = 0; i < chunk<T>::n; i++)
        v[i] = elem<T>::load(e[i]);
}

/* Streaming load (evict-first): data read exactly once should not push reused lines out. */
template <typename T>
__device__ __forceinline__ void load_chunk_stream(const T *p, float (&v)[chunk<T>::n])
{
    const uint4 u = __ldcs(reinterpret_cast<const uint4 *>(p));
    const T *e = reinterpret_cast<const T *>(&u);
#pragma unroll
    for (int i = 0; i < chunk<T>::n; i++)
        v[i] = elem<T>::load(e[i]);
}

/* Raw 16-byte chunks: the register-resident kernels keep rows packed (4 registers a chunk,
 * half of what float32 would take for 16-bit types) and widen on use. */
template <typename T> __device__ __forceinline__ void unpack(const uint4 &u, float (&v)[chunk<T>::n])
{
    const T *e = reinterpret_cast<const T *>(&u);
#pragma unroll
    for (int i = 0; i < chunk<T>::n; i++)
        v[i] = elem<T>::load(e[i]);
}

template <typename T> __device__ __forceinline__ uint4 pack(const float (&v)[chunk<T>::n])
{
    uint4 u;
    T *e = reinterpret_cast<T *>(&u);
#pragma unroll
    for (int i = 0; i < chunk<T>::n; i++)
        e[i] = elem<T>::store(v[i]);
    return u;
}

/* Streaming (evict-first) load and store of data touched once; read-only-path load of data
 * every row reuses (the RMSNorm weight: L1-resident). */
__device__ __forceinline__ uint4 ld_stream(const void *p) { return __ldcs(reinterpret_cast<const uint4 *>(p)); }
__device__ __forceinline__ uint4 ld_reuse(const void *p) { return __ldg(reinterpret_cast<const uint4 *>(p)); }
__device__ __forceinline__ void st_stream(void *p, const uint4 &u) { __stcs(reinterpret_cast<uint4 *>(p), u); }
/* A plain 16-byte store (no cache hint), in asm: a C++ store of a uint4 packed from bf16 pairs
 * was split by the compiler into 4-byte st.global.v2.u16 (rms_bwd_reg's dx, rms_fwd_v4's y,
 * store_chunk's callers). */
__device__ __forceinline__ void st_plain(void *p, const uint4 &u)
{
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "r"(u.x), "r"(u.y), "r"(u.z), "r"(u.w)
                 : "memory");
}
/* A plain 16-byte load (ld.global, no hint, not the read-only path): for data the kernel
 * writes back in place (RoPE), where ld.global.nc's contract (read-only for the kernel's
 * lifetime) does not hold to the letter. */
__device__ __forceinline__ uint4 ld_plain(const void *p)
{
    uint4 u;
    asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w)
                 : "l"(p));
    return u;
}

/* A chunk rounded to T and stored as one 16-byte st.global (st_plain). */
template <typename T>
__device__ __forceinline__ void store_chunk(T *p, const float (&v)[chunk<T>::n])
{
    st_plain(p, pack<T>(v));
}

/* A launch on stream s, as a programmatic dependent of the stream's previous kernel when pdl
 * (sm_90; k must wait in griddepcontrol.wait before its first read of what that kernel wrote). */
static inline cudaError_t launch_maybe_pdl(const void *k, dim3 grid, dim3 block, void **args, size_t smem,
                                           cudaStream_t s, bool pdl)
{
    if (!pdl)
        return cudaLaunchKernel(k, grid, block, args, smem, s);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = s;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at, cfg.numAttrs = 1;
    return cudaLaunchKernelExC(&cfg, k, args);
}

/* Makes u opaque to the compiler, so that what was widened from it before cannot be reused
 * after: without it, ptxas keeps a whole row widened to float32 across a reduction (189
 * registers rather than ~70 for a warp's bf16 row of 4096) and occupancy halves. */
__device__ __forceinline__ void launder(uint4 &u)
{
    asm volatile("" : "+r"(u.x), "+r"(u.y), "+r"(u.z), "+r"(u.w));
}

/* Value of element i of a chunk after a store and a load: the rounding into T. */
template <typename T> __device__ __forceinline__ float round_to(float x)
{
    return elem<T>::load(elem<T>::store(x));
}

__device__ __forceinline__ float warp_sum(float x)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

/* Host side: can rows of n elements of size es at ptr + r * stride (elements) all be read as
 * 16-byte chunks? */
static inline bool vec_ok(const void *ptr, int64_t row_stride, int64_t n, size_t es)
{
    const int64_t per = 16 / (int64_t)es;
    return (uintptr_t)ptr % 16 == 0 && row_stride % per == 0 && n % per == 0;
}

/* FLASHC_CUDA_ROWS=v1: the first RMSNorm / RoPE kernels, for comparisons (rows.cu). */
extern "C" bool cuda_rows_v1(void);

/* A launch's error as a status (the error is cleared so it cannot poison the next call). */
static inline flashc_status launch_status(const char *fn, const char *what)
{
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess)
        return flashc__fail(FLASHC_ERR_DEVICE, "%s: launching %s failed: %s", fn, what,
                            cudaGetErrorString(err));
    return FLASHC_OK;
}

#endif /* FLASHC_CUDA_ROWS_COMMON_CUH */
