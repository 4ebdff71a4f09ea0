/*
 * ptx_sm90.cuh — inline PTX for the Hopper forward (attn_fwd_sm90.cu): wgmma, the tensor copy
 * engine (TMA), mbarriers, setmaxnreg, fences. One instruction per wrapper, as in ptx.cuh.
 *
 * Everything here needs sm_90a, so it is compiled only in that pass: FLASHC_PTX_SM90A is 1 in
 * the sm_90a device pass and 0 in the host pass and the sm_80 pass, which see no wrapper at
 * all (a kernel that uses them wraps its body in #if FLASHC_PTX_SM90A).
 *
 * wgmma.mma_async m64nNk16, fp32 accumulation, issued by one warpgroup (4 warps, 128 threads):
 *   D (64 x N) float, per thread d[N/8][4]: warp w of the group owns rows 16w..16w+15, and
 *     d[j][0..1] = D[16w + g][8j + 2t, +1], d[j][2..3] = D[16w + g + 8][8j + 2t, +1]
 *     (lane = 4g + t): per warp, the m16n8 C layout of mma.sync, once per 8 columns.
 *   A (64 x 16) from registers, a[4] of two 16-bit values each, the mma.sync A layout per warp:
 *     a[0] = A[g][2t, +1], a[1] = A[g+8][2t, +1], a[2] = A[g][2t+8, +1], a[3] = A[g+8][2t+8, +1]
 *     so the D fragment of S (two 8-column tiles) packs into the A fragment of P as it is.
 *   A or B from shared memory: a 64-bit matrix descriptor (ptx_wgmma_desc).
 * An operand is K-major when its reduction index is contiguous in memory (Q and K rows), MN-major
 * when its M or N index is (V, as B of P V: keys are K, features are N): the _tb wrappers read
 * B MN-major (imm-trans-b = 1; bf16/fp16 only).
 *
 * Shared tiles are 128-byte-swizzled panels: rows of 64 16-bit elements (128 bytes), 16-byte
 * chunk c of row r stored at chunk c ^ (r mod 8), 8 rows (1024 bytes) per swizzle atom, the
 * panel 1024-byte aligned. The copy engine writes that pattern (CU_TENSOR_MAP_SWIZZLE_128B) and
 * wgmma reads it (layout type 1); a head dim of 128 is two panels side by side.
 */
#ifndef FLASHC_CUDA_PTX_SM90_CUH
#define FLASHC_CUDA_PTX_SM90_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FLASHC_PTX_SM90A 1
#else
#define FLASHC_PTX_SM90A 0
#endif

#if FLASHC_PTX_SM90A

/* ---- wgmma matrix descriptors --------------------------------------------------------------
 * bits  0-13  start address >> 4 (shared window, 16-byte units)
 *      16-29  leading-dimension byte offset >> 4
 *      32-45  stride-dimension byte offset >> 4
 *      49-51  base offset (0: the swizzle atoms are 1024-byte aligned)
 *      62-63  layout: 1 = 128-byte swizzle
 * With the 128-byte swizzle (PTX ISA, "matrix descriptor" and "strides"):
 *   K-major:  SBO = offset between groups of 8 rows (1024 in a panel); LBO unused (1).
 *             A k-step of 16 elements inside the 64-wide panel moves the start by 32 bytes.
 *   MN-major: LBO = offset between groups of 64 M/N elements (one panel to the next);
 *             SBO = offset between groups of 8 K rows (1024 in a panel). */
static __device__ __forceinline__ uint64_t ptx_wgmma_desc(uint32_t smem_addr, uint32_t lbo,
                                                          uint32_t sbo)
{
    return (uint64_t)((smem_addr & 0x3ffff) >> 4) | ((uint64_t)((lbo >> 4) & 0x3fff) << 16) |
           ((uint64_t)((sbo >> 4) & 0x3fff) << 32) | (1ull << 62);
}

/* ---- wgmma ordering -------------------------------------------------------------------------- */

/* Before the first wgmma of a batch: orders this warpgroup's earlier register writes (the
 * accumulators, A fragments) before the asynchronous reads of the wgmma that follows. */
static __device__ __forceinline__ void ptx_wgmma_fence(void)
{
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

static __device__ __forceinline__ void ptx_wgmma_commit(void)
{
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

/* Waits until at most n committed wgmma groups of this warpgroup are pending. */
template <int n> static __device__ __forceinline__ void ptx_wgmma_wait(void)
{
    static_assert(n >= 0 && n < 8, "wgmma.wait_group takes a small immediate");
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(n) : "memory");
}

/* A register the compiler must treat as read and written here: placed after ptx_wgmma_wait on
 * every accumulator, it keeps reads of them from moving above the wait (the asm of the wgmma
 * itself tells the compiler they were written when it was issued, not when it completed). */
static __device__ __forceinline__ void ptx_fence_operand(float &x)
{
    asm volatile("" : "+f"(x)::"memory");
}

static __device__ __forceinline__ void ptx_fence_operand(uint32_t &x)
{
    asm volatile("" : "+r"(x)::"memory");
}

/* The same on every register of a fragment array (accumulators, A fragments): x[N][4]. */
template <typename R, int N> static __device__ __forceinline__ void ptx_fence_operands(R (&x)[N][4])
{
#pragma unroll
    for (int i = 0; i < N; i++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            ptx_fence_operand(x[i][e]);
}

/* ---- wgmma.mma_async, d = a b + (scale_d ? d : 0) --------------------------------------------
 * ss: A and B from shared memory, both K-major (S = Q K^T). rs_..._tb: A from registers,
 * B MN-major from shared memory (O += P V). The element type is picked by the tag argument.
 *
 * One wrapper per (shape, operand source) and element type, generated below: the asm text names
 * the N / 2 accumulator registers of an m64nN tile as %0 .. %(N / 2 - 1), in the order of the
 * fragments d[i][0..3], and the other operands after them. */

/* fragment i of the accumulators, and the first 8 / 10 / 16 / 22 of them, as asm operands */
#define PTX_WG_F(i) "+f"(d[i][0]), "+f"(d[i][1]), "+f"(d[i][2]), "+f"(d[i][3])
#define PTX_WG_D8                                                                                  \
    PTX_WG_F(0), PTX_WG_F(1), PTX_WG_F(2), PTX_WG_F(3), PTX_WG_F(4), PTX_WG_F(5), PTX_WG_F(6),   \
        PTX_WG_F(7)
#define PTX_WG_D10 PTX_WG_D8, PTX_WG_F(8), PTX_WG_F(9)
#define PTX_WG_D16                                                                                 \
    PTX_WG_D10, PTX_WG_F(10), PTX_WG_F(11), PTX_WG_F(12), PTX_WG_F(13), PTX_WG_F(14), PTX_WG_F(15)
#define PTX_WG_D22                                                                                 \
    PTX_WG_D16, PTX_WG_F(16), PTX_WG_F(17), PTX_WG_F(18), PTX_WG_F(19), PTX_WG_F(20), PTX_WG_F(21)
/* their register lists in the text: 32, 40, 64, 88 registers */
#define PTX_WG_R32                                                                                 \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, "             \
    "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define PTX_WG_R40                                                                                 \
    PTX_WG_R32                                                                                     \
    ", %32, %33, %34, %35, %36, %37, %38, %39"
#define PTX_WG_R64                                                                                 \
    PTX_WG_R40                                                                                     \
    ", %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "           \
    "%56, %57, %58, %59, %60, %61, %62, %63"
#define PTX_WG_R88                                                                                 \
    PTX_WG_R64                                                                                     \
    ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "           \
    "%80, %81, %82, %83, %84, %85, %86, %87"

/* ss: d (NF = N / 8 fragments) += A (desc_a) B (desc_b), both K-major; the operand indices after
 * the registers: IA desc_a, IB desc_b, IP scale_d */
#define PTX_WGMMA_SS(N, NF, REGS, IA, IB, IP, T, TS)                                               \
    static __device__ __forceinline__ void ptx_wgmma_ss_m64n##N##k16(                              \
        T, float(&d)[NF][4], uint64_t desc_a, uint64_t desc_b, int scale_d)                       \
    {                                                                                              \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #IP ", 0;\n"                            \
                     "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TS "." TS " {" REGS         \
                     "}, %" #IA ", %" #IB ", p, 1, 1, 0, 0;\n}\n"                                  \
                     : PTX_WG_D##NF                                                                \
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d));                                    \
    }
/* rs, B MN-major (tb): d += A (4 registers a thread, %IA0 .. %IA0 + 3) B (desc_b, %IB); IP
 * scale_d */
#define PTX_WGMMA_RS_TB(N, NF, REGS, IA0, IA1, IA2, IA3, IB, IP, T, TS)                            \
    static __device__ __forceinline__ void ptx_wgmma_rs_m64n##N##k16_tb(                           \
        T, float(&d)[NF][4], const uint32_t(&a)[4], uint64_t desc_b, int scale_d)                 \
    {                                                                                              \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #IP ", 0;\n"                            \
                     "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TS "." TS " {" REGS         \
                     "}, {%" #IA0 ", %" #IA1 ", %" #IA2 ", %" #IA3 "}, %" #IB ", p, 1, 1, 1;\n}\n" \
                     : PTX_WG_D##NF                                                                \
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));     \
    }
#define PTX_WGMMA_BOTH(GEN, ...)                                                                   \
    GEN(__VA_ARGS__, __nv_bfloat16, "bf16")                                                        \
    GEN(__VA_ARGS__, __half, "f16")

PTX_WGMMA_BOTH(PTX_WGMMA_SS, 128, 16, PTX_WG_R64, 64, 65, 66)
/* N = 176: the wider key block (BN = 176) of the sm90v4w instances. */
PTX_WGMMA_BOTH(PTX_WGMMA_SS, 176, 22, PTX_WG_R88, 88, 89, 90)
/* N = 80: the 80-key blocks of sm90v6hw (d 192 / 256, FlashAttention-3's d 256 block). */
PTX_WGMMA_BOTH(PTX_WGMMA_SS, 80, 10, PTX_WG_R40, 40, 41, 42)
PTX_WGMMA_BOTH(PTX_WGMMA_RS_TB, 64, 8, PTX_WG_R32, 32, 33, 34, 35, 36, 37)
PTX_WGMMA_BOTH(PTX_WGMMA_RS_TB, 128, 16, PTX_WG_R64, 64, 65, 66, 67, 68, 69)

/* rs, B MN-major, N picked by the accumulator's shape: m64n64 (8 fragments) or m64n128 (16),
 * d += a B (the backward's dV += P^T dO, dK += dS^T Q at d 64 / 128, and dQ += dS K) */
template <typename T>
static __device__ __forceinline__ void ptx_wgmma_rs_tb(float (&d)[8][4], const uint32_t (&a)[4],
                                                       uint64_t desc_b)
{
    ptx_wgmma_rs_m64n64k16_tb(T(), d, a, desc_b, 1);
}
template <typename T>
static __device__ __forceinline__ void ptx_wgmma_rs_tb(float (&d)[16][4], const uint32_t (&a)[4],
                                                       uint64_t desc_b)
{
    ptx_wgmma_rs_m64n128k16_tb(T(), d, a, desc_b, 1);
}

/* ss m64n64k16 (the backward): A K-major from shared memory; B K-major (TB = 0: S^T = K Q^T)
 * or MN-major (TB = 1: dQ = dS K, keys are K, features are N). */
#define PTX_WGMMA_SS64_TB(T, TS)                                                                   \
    template <int TB>                                                                              \
    static __device__ __forceinline__ void ptx_wgmma_ss_m64n64k16(                                 \
        T, float(&d)[8][4], uint64_t desc_a, uint64_t desc_b, int scale_d)                        \
    {                                                                                              \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                 \
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32." TS "." TS " {" PTX_WG_R32       \
                     "}, %32, %33, p, 1, 1, 0, %35;\n}\n"                                          \
                     : PTX_WG_D8                                                                   \
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TB));                           \
    }
PTX_WGMMA_SS64_TB(__nv_bfloat16, "bf16")
PTX_WGMMA_SS64_TB(__half, "f16")
#undef PTX_WGMMA_SS64_TB
#undef PTX_WGMMA_BOTH
#undef PTX_WGMMA_RS_TB
#undef PTX_WGMMA_SS
#undef PTX_WG_R88
#undef PTX_WG_R64
#undef PTX_WG_R40
#undef PTX_WG_R32
#undef PTX_WG_D22
#undef PTX_WG_D16
#undef PTX_WG_D10
#undef PTX_WG_D8
#undef PTX_WG_F

/* ---- shared-memory stores and proxy fences (the backward's dS tile) ------------------------ */

/* stmatrix .x4 .trans: the inverse of ldmatrix .x4 .trans (ptx.cuh). Lanes 8i..8i+7 give the
 * addresses of the 8 rows (16 bytes each) of stored matrix i; r[i] holds, per lane, the pair
 * (row g, columns 2t, 2t+1) of fragment i (the mma C / A layout), and row j of the stored matrix
 * is column j of the fragment. So an accumulator tile of X lands in shared memory as X^T. */
static __device__ __forceinline__ void ptx_stmatrix_x4_trans(uint32_t addr, const uint32_t (&r)[4])
{
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
                 "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
                 : "memory");
}

/* Makes this thread's generic-proxy writes to shared memory (st.shared, stmatrix, cp.async
 * once waited for) visible to the async proxy that wgmma reads operands through; a barrier
 * after it extends that to the other threads' wgmmas. */
static __device__ __forceinline__ void ptx_fence_proxy_async_shared(void)
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/* ---- mbarrier (shared-memory barriers with a phase bit and a transaction count) ----------- */

static __device__ __forceinline__ void ptx_mbarrier_init(uint32_t bar, uint32_t count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

/* Makes the initialisations visible to the copy engine (and other threads, after a barrier). */
static __device__ __forceinline__ void ptx_fence_mbarrier_init(void)
{
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

/* One arrival that also announces tx_bytes to come from the copy engine: the phase completes
 * when every arrival happened and all announced bytes landed. */
static __device__ __forceinline__ void ptx_mbarrier_arrive_expect_tx(uint32_t bar,
                                                                     uint32_t tx_bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar),
                 "r"(tx_bytes)
                 : "memory");
}

static __device__ __forceinline__ void ptx_mbarrier_arrive(uint32_t bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

/* Whether the phase of parity `parity` has completed (try_wait may suspend the thread for a
 * while before it answers no). A fresh barrier is in phase 0: waiting for parity 1 succeeds at
 * once (that phase counts as the one before), which is how a producer's first pass over empty
 * slots goes through. */
static __device__ __forceinline__ bool ptx_mbarrier_try_wait(uint32_t bar, uint32_t parity)
{
    uint32_t ok;
    asm volatile("{\n.reg .pred p;\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(ok)
                 : "r"(bar), "r"(parity)
                 : "memory");
    return ok != 0;
}

/* Whether the phase of parity `parity` has completed, answered at once (test_wait never
 * suspends the thread): a poll, for a thread that has other work to do before it blocks. */
static __device__ __forceinline__ bool ptx_mbarrier_test_wait(uint32_t bar, uint32_t parity)
{
    uint32_t ok;
    asm volatile("{\n.reg .pred p;\n"
                 "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(ok)
                 : "r"(bar), "r"(parity)
                 : "memory");
    return ok != 0;
}

static __device__ __forceinline__ void ptx_mbarrier_wait(uint32_t bar, uint32_t parity)
{
    while (!ptx_mbarrier_try_wait(bar, parity)) {
    }
}

/* ---- the tensor copy engine ------------------------------------------------------------------ */

/* Copies the box at coordinates (c0, c1, c2, c3) (elements; c0 innermost) of the 4-d tensor
 * that tmap describes into shared dst, completing tx bytes on mbarrier bar. Out-of-range
 * elements of the box are written as zeros (and counted). tmap: the address of a
 * __grid_constant__ kernel parameter. */
static __device__ __forceinline__ void ptx_tma_load_4d(uint32_t dst, const void *tmap,
                                                       uint32_t bar, int c0, int c1, int c2,
                                                       int c3)
{
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(dst),
                 "l"(tmap), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
                 : "memory");
}

/* The same for a 3-d tensor map (c0 innermost): the forward's varlen operands, packed (total,
 * H, D) rows (attn_fwd_sm90.cu, make_map with B = 0). */
static __device__ __forceinline__ void ptx_tma_load_3d(uint32_t dst, const void *tmap,
                                                       uint32_t bar, int c0, int c1, int c2)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(dst),
                 "l"(tmap), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
                 : "memory");
}

/* The same box, multicast: written into shared dst of every CTA of the cluster in ctamask (bit
 * r: cluster rank r), at the same offset in each, completing its tx bytes on the mbarrier at
 * bar's offset in each of them. */
static __device__ __forceinline__ void ptx_tma_load_4d_multicast(uint32_t dst, const void *tmap,
                                                                 uint32_t bar, int c0, int c1,
                                                                 int c2, int c3, uint16_t ctamask)
{
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 ".multicast::cluster [%0], [%1, {%3, %4, %5, %6}], [%2], %7;\n" ::"r"(dst),
                 "l"(tmap), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "h"(ctamask)
                 : "memory");
}

/* The other way (the forward's O, v6): the box at (c0, c1, c2, c3) from shared src, in the
 * tensor map's swizzle; elements outside the tensor are not written. Completes in the issuing
 * thread's bulk groups (ptx_bulk_commit_group, ptx_bulk_wait_group*). src: written by the
 * generic proxy, so a ptx_fence_proxy_async_shared by each writer and a barrier come first. */
static __device__ __forceinline__ void ptx_tma_store_4d(const void *tmap, uint32_t src, int c0,
                                                        int c1, int c2, int c3)
{
    asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group"
                 " [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(tmap),
                 "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
                 : "memory");
}

/* Asks for the box at (c0, c1, c2, c3) of the tensor map to be brought into L2 (no shared
 * memory written, nothing to wait for; a hint): the forward's next Q tile (sm90v9), ahead of its
 * ptx_tma_load_4d. */
static __device__ __forceinline__ void ptx_tma_prefetch_4d(const void *tmap, int c0, int c1,
                                                           int c2, int c3)
{
    asm volatile("cp.async.bulk.prefetch.tensor.4d.L2.global.tile [%0, {%1, %2, %3, %4}];\n" ::"l"(
                     tmap),
                 "r"(c0), "r"(c1), "r"(c2), "r"(c3)
                 : "memory");
}

/* The box at (c0, c1, c2, c3) of a float32 tensor map added element-wise into global memory
 * from shared src (the backward's dQ tile, sm90v3t): the reduce-add counterpart of
 * ptx_tma_store_4d, atomic per element at L2, elements outside the tensor skipped. Same bulk
 * groups and the same fence-and-barrier rule for src. */
static __device__ __forceinline__ void ptx_tma_reduce_add_4d(const void *tmap, uint32_t src,
                                                             int c0, int c1, int c2, int c3)
{
    asm volatile("cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.bulk_group"
                 " [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(tmap),
                 "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
                 : "memory");
}

static __device__ __forceinline__ void ptx_bulk_commit_group(void)
{
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}

/* Until at most n of this thread's bulk groups are still reading their shared source. */
template <int n> static __device__ __forceinline__ void ptx_bulk_wait_group_read(void)
{
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(n) : "memory");
}

/* Until at most n of this thread's bulk groups are incomplete (their writes done). */
template <int n> static __device__ __forceinline__ void ptx_bulk_wait_group(void)
{
    asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(n) : "memory");
}

static __device__ __forceinline__ void ptx_st_shared_b32(uint32_t addr, uint32_t v)
{
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}

/* 16 zero bytes at a 16-byte aligned shared address (a whole 16-byte chunk of a swizzled row:
 * clearing whole rows needs no swizzle arithmetic) */
static __device__ __forceinline__ void ptx_st_shared_zero16(uint32_t addr)
{
    asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};\n" ::"r"(addr), "r"(0u) : "memory");
}

/* Copies `bytes` (a multiple of 16) contiguous bytes from global src to shared dst (both 16-byte
 * aligned) on the copy engine, completing `bytes` tx on mbarrier bar: the non-tensor bulk copy,
 * which needs no tensor map, so one row of a paged or strided cache is one copy. */
static __device__ __forceinline__ void ptx_bulk_load(uint32_t dst, const void *src,
                                                     uint32_t bytes, uint32_t bar)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1], %2, [%3];\n" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}

/* An arrival on mbarrier bar once every cp.async this thread issued before it has landed
 * (.noinc: the barrier's expected count already includes this arrival). */
static __device__ __forceinline__ void ptx_cp_async_mbarrier_arrive_noinc(uint32_t bar)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

/* The same with an L2 cache policy (createpolicy): evict-first for data read once. */
static __device__ __forceinline__ void ptx_bulk_load_hint(uint32_t dst, const void *src,
                                                          uint32_t bytes, uint32_t bar,
                                                          uint64_t policy)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
                 " [%0], [%1], %2, [%3], %4;\n" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar), "l"(policy)
                 : "memory");
}

static __device__ __forceinline__ void ptx_prefetch_tensormap(const void *tmap)
{
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(tmap) : "memory");
}

/* ---- thread block clusters (the forward's sm90v8: K/V multicast to a pair) ----------------- */

/* This CTA's rank in its cluster. */
static __device__ __forceinline__ uint32_t ptx_cluster_ctarank(void)
{
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}

/* Every non-exited thread of the cluster arrives, then waits for the others (release /
 * acquire at cluster scope). Not .aligned: a warp may arrive diverged. */
static __device__ __forceinline__ void ptx_cluster_sync(void)
{
    asm volatile("barrier.cluster.arrive.release;\n"
                 "barrier.cluster.wait.acquire;\n" ::: "memory");
}

/* The shared::cluster address of shared::cta address addr in the CTA of cluster rank r. */
static __device__ __forceinline__ uint32_t ptx_mapa_shared(uint32_t addr, uint32_t r)
{
    uint32_t d;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(d) : "r"(addr), "r"(r));
    return d;
}

/* An arrival on the mbarrier at shared::cluster address bar, which may be another CTA's. The
 * default semantics (release at CTA scope), as CUTLASS's consumer release of a multicast ring:
 * it says that this thread's wgmma reads of a slot are done (waited for), which is all the peer's
 * copy engine needs before it rewrites the slot; .release.cluster would put a GPU-scope fence
 * (MEMBAR.ALL.GPU) before every arrival. */
static __device__ __forceinline__ void ptx_mbarrier_arrive_cluster(uint32_t bar)
{
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

/* ---- named barriers (ids 1..15; 0 is __syncthreads) --------------------------------------- */

/* Waits until n threads (a multiple of 32, this warp's included) reached barrier id, by
 * bar.sync or bar.arrive. */
static __device__ __forceinline__ void ptx_named_bar_sync(int id, int n)
{
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}

/* Counts this warp towards barrier id's n threads without waiting. */
static __device__ __forceinline__ void ptx_named_bar_arrive(int id, int n)
{
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}

/* ---- bulk asynchronous reductions (the backward's dQ; sm90v2) -------------------------------
 * The copy engine adds bytes float32 values at shared src into global dst (both 16-byte aligned,
 * bytes a multiple of 16), element by element, atomically per element at L2, so blocks that add
 * into the same rows need no other synchronisation. The thread that issues one owns it: its
 * commit_group closes a group, its wait_group waits for its own groups. The shared source must
 * not be rewritten (nor the block exit) before wait_group.read says it was read
 * (ptx_bulk_commit_group, ptx_bulk_wait_group_read, ptx_bulk_wait_group above). */
static __device__ __forceinline__ void ptx_bulk_reduce_add_f32(float *dst, uint32_t src,
                                                               uint32_t bytes)
{
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(dst),
                 "r"(src), "r"(bytes)
                 : "memory");
}

/* Orders this thread's generic-proxy accesses of global memory with its async-proxy ones (the
 * bulk reductions), both ways: deterministic mode's turn order hands dQ rows from one block's
 * bulk adds to the next block's through a generic release / acquire. */
static __device__ __forceinline__ void ptx_fence_proxy_async_global(void)
{
    asm volatile("fence.proxy.async.global;\n" ::: "memory");
}

/* st.shared.v2.f32 at a 32-bit shared address (8-byte aligned): no 64-bit generic pointer
 * held in registers for it. */
static __device__ __forceinline__ void ptx_st_shared_v2_f32(uint32_t addr, float x, float y)
{
    asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(addr), "f"(x), "f"(y) : "memory");
}

/* 4-byte cp.async (L1-allocating: .cg takes only 16); valid false: zeros, src not read. */
static __device__ __forceinline__ void ptx_cp_async_4(uint32_t dst, const void *src, bool valid)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src),
                 "r"(valid ? 4 : 0)
                 : "memory");
}

/* ---- register reallocation between warpgroups -------------------------------------------- */

/* Every warp of the warpgroup runs the same one; the kernel needs a register cap at entry
 * (__launch_bounds__(threads, 1)) for the compiler to honour it. */
template <int n> static __device__ __forceinline__ void ptx_setmaxnreg_dec(void)
{
    static_assert(n >= 24 && n <= 256 && n % 8 == 0, "setmaxnreg takes 24..256, step 8");
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(n));
}

template <int n> static __device__ __forceinline__ void ptx_setmaxnreg_inc(void)
{
    static_assert(n >= 24 && n <= 256 && n % 8 == 0, "setmaxnreg takes 24..256, step 8");
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(n));
}

#endif /* FLASHC_PTX_SM90A */

#endif /* FLASHC_CUDA_PTX_SM90_CUH */
