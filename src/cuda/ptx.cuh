/*
 * ptx.cuh — the only place with inline PTX: small wrappers for sm_80+ instructions that CUDA C
 * has no intrinsic for. Each wrapper is one instruction; its operand layout is documented here
 * so kernels can reason about fragments without reading PTX.
 *
 * Fragment layouts of mma.sync m16n8k16 (lane = 4 * g + t, g = lane / 4, t = lane % 4):
 *   A (16 x 16, row-major), 4 x b32 each holding two 16-bit values (low half = lower column):
 *     a[0] = A[g][2t, 2t+1]   a[1] = A[g+8][2t, 2t+1]   a[2] = A[g][2t+8, 2t+9]   a[3] = A[g+8][2t+8, 2t+9]
 *   B (16 x 8, "col": element (k, n) with k the reduction index), 2 x b32:
 *     b[0] = B[2t, 2t+1][g]   b[1] = B[2t+8, 2t+9][g]
 *   C/D (16 x 8) float: c[0], c[1] = C[g][2t, 2t+1]   c[2], c[3] = C[g+8][2t, 2t+1]
 *
 * ldmatrix .x4: lanes 8i..8i+7 give the row addresses (16 bytes each) of 8x8 matrix i; each lane
 * receives in r[i] the pair (row g, columns 2t, 2t+1) of matrix i, or with .trans the pair
 * (rows 2t, 2t+1, column g). So a row-major [row][k] tile read plainly is an A operand or, for
 * B = X^T, a B operand; a [k][n] tile read with .trans is a B operand.
 */
#ifndef FLASHC_CUDA_PTX_CUH
#define FLASHC_CUDA_PTX_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "flashc's CUDA kernels need sm_80 or newer (cp.async, ldmatrix, bf16 mma.sync)"
#endif

/* Shared-memory byte address as the 32-bit value PTX's .shared state space takes. */
static __device__ __forceinline__ uint32_t ptx_smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* blockIdx.x, read with a volatile instruction so that each use is a fresh read: a kernel
 * that needs indices derived from it only before and after its main loop then recomputes
 * them instead of holding them (and the compiler spilling them) through the loop. */
static __device__ __forceinline__ int ptx_block_index(void)
{
    unsigned x;
    asm volatile("mov.u32 %0, %%ctaid.x;\n" : "=r"(x));
    return (int)x;
}

/* %nsmid: the number of SM ids, >= the SM count (ids need not be contiguous), so only a
 * heuristic's input (bwd_grouped_order sizes its head groups with it). Not volatile: the
 * value is fixed for the launch. */
static __device__ __forceinline__ unsigned ptx_nsmid(void)
{
    unsigned n;
    asm("mov.u32 %0, %%nsmid;" : "=r"(n));
    return n;
}

/* The timers and the SM id, for tracing (attn_bwd_sm90h.cu's FLASHC_CUDA_BWD_TRACE): %clock64,
 * this SM's cycle counter (fine, but each SM's own), %globaltimer, nanoseconds on a clock every
 * SM shares (for placing blocks against each other; its resolution is the driver's), %smid.
 * volatile: each read is a fresh one, in program order with the others. */
static __device__ __forceinline__ uint64_t ptx_clock64(void)
{
    uint64_t x;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(x));
    return x;
}
static __device__ __forceinline__ uint64_t ptx_globaltimer(void)
{
    uint64_t x;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(x));
    return x;
}
static __device__ __forceinline__ unsigned ptx_smid(void)
{
    unsigned x;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(x));
    return x;
}

/* threadIdx.x, read the same way (see ptx_block_index): for values derived from it that are
 * cheaper to recompute at each use than to hold through a loop. */
static __device__ __forceinline__ int ptx_thread_index(void)
{
    unsigned x;
    asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(x));
    return (int)x;
}

/* ---- cp.async (global -> shared, bypassing registers) ------------------------------------- */

/* Copies 16 bytes from global src to shared dst when valid, otherwise writes 16 zero bytes
 * (src-size 0: nothing is read, so src only has to be some mapped address). .cg: the line
 * goes to L2 only, as tiles are reused from shared memory, not L1. */
static __device__ __forceinline__ void ptx_cp_async_16(uint32_t dst, const void *src, bool valid)
{
    const int src_bytes = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(src_bytes)
                 : "memory");
}

/* Copies the first src_bytes (0..16) of the 16 bytes at global src to shared dst and writes
 * zeros to the rest; src_bytes 0 reads nothing (src only has to be some mapped address). */
static __device__ __forceinline__ void ptx_cp_async_16_n(uint32_t dst, const void *src,
                                                         int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(src_bytes)
                 : "memory");
}

/* Closes the group of cp.async issued by this thread since the last commit. */
static __device__ __forceinline__ void ptx_cp_async_commit(void)
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* Waits until at most n of this thread's committed groups are still in flight. Other threads'
 * copies become visible only after a barrier that follows the wait. */
template <int n> static __device__ __forceinline__ void ptx_cp_async_wait(void)
{
    static_assert(n >= 0 && n < 8, "cp.async.wait_group takes a small immediate");
    asm volatile("cp.async.wait_group %0;\n" ::"n"(n) : "memory");
}

/* ---- ldmatrix ------------------------------------------------------------------------------ */

static __device__ __forceinline__ void ptx_ldmatrix_x4(uint32_t r[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

static __device__ __forceinline__ void ptx_ldmatrix_x4_trans(uint32_t r[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* ---- mma.sync m16n8k16, fp32 accumulation: d = a b + d ------------------------------------- */

static __device__ __forceinline__ void ptx_mma_m16n8k16(__nv_bfloat16, float d[4],
                                                        const uint32_t a[4], uint32_t b0,
                                                        uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

static __device__ __forceinline__ void ptx_mma_m16n8k16(__half, float d[4], const uint32_t a[4],
                                                        uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* ---- conversions and fast math ------------------------------------------------------------ */

/* Two floats -> one b32 of two 16-bit values (lo in the low half), round to nearest even:
 * one cvt.rn.{bf16x2,f16x2}.f32 instruction. The element type is picked by the tag argument. */
static __device__ __forceinline__ uint32_t ptx_pack2(__nv_bfloat16, float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *(uint32_t *)&v;
}

static __device__ __forceinline__ uint32_t ptx_pack2(__half, float lo, float hi)
{
    __half2 v = __floats2half2_rn(lo, hi);
    return *(uint32_t *)&v;
}

/* Two m16n8 float accumulator tiles side by side (lo: columns 0-7, hi: 8-15; each thread's
 * c0..c3 = rows g, g + 8 at columns 2t, 2t + 1) as the 16 x 16 A fragment of an mma.sync
 * m16n8k16 or a register-A wgmma k-step (a0..a3: rows g, g + 8 of k 0-7, then of k 8-15), in
 * T (the tag): how P and dS go from one product's accumulators to the next product's A.
 * (attn_bwd_sm90v3.cu keeps its copies written out: through this helper ptxas scheduled 64 of
 * the ~4,100 instructions of its deterministic kernels with modifiers differently; everywhere
 * else the machine code is byte for byte the same as the written-out copies it replaced.) */
template <typename T>
static __device__ __forceinline__ void ptx_pack_a(uint32_t (&a)[4], const float (&lo)[4],
                                                  const float (&hi)[4])
{
    a[0] = ptx_pack2(T(), lo[0], lo[1]);
    a[1] = ptx_pack2(T(), lo[2], lo[3]);
    a[2] = ptx_pack2(T(), hi[0], hi[1]);
    a[3] = ptx_pack2(T(), hi[2], hi[3]);
}

/* 2^x with ex2.approx.ftz (one MUFU op; relative error ~2^-22, ex2(-inf) = +0). */
static __device__ __forceinline__ float ptx_exp2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/* ---- inter-block flags (the deterministic backward's turn counters) ----------------------- */

/* A load with acquire semantics at GPU scope: reads after it (and, past a barrier, the block's
 * other threads' reads) see every write the releasing block made before its release. */
static __device__ __forceinline__ int ptx_ld_acquire_gpu(const int *p)
{
    int v;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/* *p += v with release semantics at GPU scope: the block's writes ordered before it (by a
 * barrier, then this thread) are visible to whoever acquires the new value. */
static __device__ __forceinline__ void ptx_red_release_gpu_add(int *p, int v)
{
    asm volatile("red.release.gpu.global.add.s32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

/* Two 16-bit values of one b32 (lo = lower address) -> two floats. */
static __device__ __forceinline__ float2 ptx_unpack2(__nv_bfloat16, uint32_t x)
{
    return __bfloat1622float2(*(const __nv_bfloat162 *)&x);
}

static __device__ __forceinline__ float2 ptx_unpack2(__half, uint32_t x)
{
    return __half22float2(*(const __half2 *)&x);
}

/* ---- programmatic dependent launch (sm_90; nothing on sm_80) ------------------------------ */

/* griddepcontrol.wait: until the grids this one depends on programmatically have completed and
 * their memory is visible; returns at once in a grid launched without the attribute. */
static __device__ __forceinline__ void ptx_griddep_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

/* griddepcontrol.launch_dependents: this block no longer holds back the launch of a dependent
 * grid (which starts once every block has said so or exited). */
static __device__ __forceinline__ void ptx_griddep_launch_dependents(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

#endif /* FLASHC_CUDA_PTX_CUH */
