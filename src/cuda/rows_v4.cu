/*
 * rows_v4.cu — RMSNorm kernels that try to stream like a copy (issue 14: bf16 16384 x 4096
 * forward >= 3.9 TB/s, ~96% of the measured copy; backward >= 3.4 TB/s). Opt-in, chosen at
 * every call by the environment, so that one process can compare them with v2 (rows.cu):
 *
 *   FLASHC_CUDA_RMS_FWD=v4:P,W,B,H[,G,R,L]   rms_fwd_v4, registers: a warp a row (rows wider than
 *       512 chunks: a block of 2..16 warps a row), the row packed in registers as in v2.
 *       P = 0: a grid over the rows (one row a warp, as v2); P = 1: a persistent grid whose
 *       warps load their next row before reducing the current one (a register double buffer);
 *       P = 2: the same with rows on twice the threads (8 chunks a lane, a block barrier).
 *       W warps a block (rows of one warp), B blocks a SM at most (P = 0: a cap by padding the
 *       block's shared memory, 0 = none; P = 1: the grid is SMs x B, 0 = the occupancy),
 *       H the cache hints (load mode H % 4, store mode H / 4 = 0..4, see ldh / sth); a sixth knob
 *       R (1..16, plain forward) puts a row on R times the threads (16 / R chunks a lane at
 *       4096 bf16; with P down to 2 chunks); L = 1 launches the grid as a programmatic
 *       dependent of the stream's previous kernel (PDL, sm_90: rms_fwd_v4's comment); knobs
 *       C (a lower register cap) and X (rows from X regions at once) were measured slower in
 *       rows4's round 1 and removed (their places are ignored). The residual forward's
 *       default is v4 with P = 0, H = 0, L = 1; the plain forward's v4 with R = 4, H = 19,
 *       L = 1 for rows of >= 512 chunks (see fwd_t).
 *   FLASHC_CUDA_RMS_FWD=v5:W,S,B,H[,G]   rms_fwd_tma (sm_90 only; else v2): persistent warps,
 *       each with S shared-memory row slots filled by one bulk copy a row (cp.async.bulk on an
 *       mbarrier, issued by lane 0), so S - 1 rows a warp are in flight without registers;
 *       the row then goes to registers once. Rows of at most 512 chunks (8 KiB in 16-bit).
 *       W warps a block, B blocks a SM (0: as many as fit), H: bit 0 = the bulk copies
 *       evict-first in L2, H / 4 the store mode.
 *   FLASHC_CUDA_RMS_BWD=v5:N,S,B,H[,G]   rms_bwd_tma (sm_90 only; else v2): rms_bwd_reg's
 *       persistent block a row (N <= 4 chunks a thread, w and the thread's dw columns in
 *       registers, one barrier a row), x, dy (and dres) landing in S slots by bulk copies that
 *       one thread issues: bytes in flight cost shared memory, not registers (v2 holds one
 *       prefetched row a block: 3 blocks, 48 KB a SM). B, H as for v5 forward.
 *   FLASHC_CUDA_RMS_BWD=v4:N,B,H[,G,L]   rms_bwd_v4: rms_bwd_reg with w read from L1 and the
 *       dw columns in shared memory (fewer registers: 4 blocks a SM, 4 prefetched rows), H as
 *       for the v4 forward (load modes, store path); L = 1: the kernel and rms_dw_sum are
 *       launched as programmatic dependents (PDL, sm_90): rms_dw_sum's blocks wait on the SMs
 *       that the kernel's blocks leave, the next call's kernel behind rms_dw_sum. (A sixth
 *       knob F, the column sums in the kernel after a grid barrier, measured 10% slower on the
 *       H200 and was removed: bench/RESULTS.md, "rows4".)
 *   FLASHC_CUDA_RMS_FWD=v6:W,H[,R]       rms_fwd_x2 (plain forward): two adjacent rows a group
 *       of warps, all loads of both issued before the first sum (the residual v4 kernel's shape).
 * G (optional) caps the grid: the tests use it to make warps and blocks go round many rows.
 * Both keep v2's contract at the ends of the float32 range (rows_rms.cuh): the forward
 * rescales by max |x|, the backward redoes such a row in float64 (from global memory).
 */
#include "rows_rms.cuh"
#include "scratch.cuh"

#include "ptx.cuh"
#include "ptx_sm90.cuh"

#include <mutex>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- cache hints ---------------------------------------------------------------------------
 * Load modes: 0 ld.global.cs (v2: evict-first in L1 and L2); 1 ld.global.nc.L1::no_allocate
 * with an L2 evict-first policy (createpolicy); 2 ld.global.nc.L1::no_allocate.L2::256B (the
 * L2 fetches 256-byte blocks); 3 ld.global.nc (the read-only path, default priorities).
 * Store modes: 0 st.global.cs (v2); 1, 2, 3 st.global with an L2 policy: evict-first,
 * evict-normal, evict-last (l2_policy); 4 a plain st.global (no hint: torch's copies, and the
 * backward's 3.4% in rows5's round, bench/RESULTS.md). The store path is a template parameter
 * (SM: 0 for mode 0, 1 for modes 1-3, 2 for mode 4): a branch a chunk between store forms
 * costs ~30 registers in the forward. */
/* An L2 policy for the whole access: 1 evict-first, 2 evict-normal, 3 evict-last. */
__device__ __forceinline__ uint64_t l2_policy(int m)
{
    uint64_t p;
    if (m == 2)
        asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;\n" : "=l"(p));
    else if (m == 3)
        asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(p));
    else
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(p));
    return p;
}

__device__ __forceinline__ uint64_t l2_evict_first(void) { return l2_policy(1); }

__device__ __forceinline__ uint4 ld_na_pol(const void *p, uint64_t pol)
{
    uint4 u;
    asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;\n"
        : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w)
        : "l"(p), "l"(pol));
    return u;
}

__device__ __forceinline__ uint4 ld_na_256(const void *p)
{
    uint4 u;
    asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];\n"
        : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w)
        : "l"(p));
    return u;
}

__device__ __forceinline__ void st_pol(void *p, const uint4 &u, uint64_t pol)
{
    asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1, %2, %3, %4}, %5;\n" ::"l"(p),
                 "r"(u.x), "r"(u.y), "r"(u.z), "r"(u.w), "l"(pol)
                 : "memory");
}

/* One chunk's store on path SM (above): 0 st.global.cs, 1 with L2 policy pol, 2 plain. */
template <int SM> __device__ __forceinline__ void st_mode(void *p, const uint4 &u, uint64_t pol)
{
    if (SM == 2)
        st_plain(p, u);
    else if (SM == 1)
        st_pol(p, u, pol);
    else
        st_stream(p, u);
}

/* Chunks lane + j tpr (j < NVT, < nc) of a row: one switch outside the unrolled loop, so that
 * the NVT loads of a mode issue back to back. */
template <typename T, int NVT>
__device__ __forceinline__ void ldh_row(uint4 (&u)[NVT], const T *row, int lane, int tpr, int64_t nc,
                                        int lm, uint64_t pol)
{
    constexpr int V = chunk<T>::n;
    switch (lm) {
    case 1:
#pragma unroll
        for (int j = 0; j < NVT; j++)
            if (lane + (int64_t)j * tpr < nc)
                u[j] = ld_na_pol(row + (lane + (int64_t)j * tpr) * V, pol);
        break;
    case 2:
#pragma unroll
        for (int j = 0; j < NVT; j++)
            if (lane + (int64_t)j * tpr < nc)
                u[j] = ld_na_256(row + (lane + (int64_t)j * tpr) * V);
        break;
    case 3:
#pragma unroll
        for (int j = 0; j < NVT; j++)
            if (lane + (int64_t)j * tpr < nc)
                u[j] = ld_reuse(row + (lane + (int64_t)j * tpr) * V);
        break;
    default:
#pragma unroll
        for (int j = 0; j < NVT; j++)
            if (lane + (int64_t)j * tpr < nc)
                u[j] = ld_stream(row + (lane + (int64_t)j * tpr) * V);
        break;
    }
}

template <typename T, int NVT, int SM>
__device__ __forceinline__ void sth_row(T *row, const uint4 (&u)[NVT], int lane, int tpr, int64_t nc,
                                        uint64_t pol)
{
    constexpr int V = chunk<T>::n;
#pragma unroll
    for (int j = 0; j < NVT; j++)
        if (lane + (int64_t)j * tpr < nc) {
            T *p = row + (lane + (int64_t)j * tpr) * V;
            st_mode<SM>(p, u[j], pol);
        }
}

/* ---- forward ---------------------------------------------------------------------------- */

struct fwd4_args {
    const void *x, *r, *w;
    void *xw, *y;
    int64_t sx, sr, sy; /* row strides, elements */
    int64_t T, D;
    float eps;
    int lm, sm; /* load and store modes (above) */
    int pdl;    /* launched as a programmatic dependent (rms_fwd_v4 only; see fwd_v4_t) */
};

/* Sum (OP = 0) or max (OP = 1) of v over a row's tpr = 32 wpr threads: shuffles for one warp;
 * for a block of wpr warps (one row a block) through buf (>= wpr floats) and one barrier. The
 * caller keeps buf's reuse apart (alternating buffers, or a barrier in between). */
template <int OP> __device__ __forceinline__ float row_reduce(float v, int wpr, float *buf)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = OP ? fmaxf(v, u) : v + u;
    }
    if (wpr > 1) {
        if (threadIdx.x % 32 == 0)
            buf[threadIdx.x / 32] = v;
        __syncthreads();
        v = buf[0];
        for (int i = 1; i < wpr; i++)
            v = OP ? fmaxf(v, buf[i]) : v + buf[i];
    }
    return v;
}

/* rstd (and div, rms_rescale) of a row held packed in u: the rare branch for rows whose float32
 * sum of squares ss left its range; uniform over the row's threads. */
template <typename T, int NVT>
__device__ __forceinline__ void fwd_rescale(const uint4 (&u)[NVT], int lane, int tpr, int64_t nc,
                                            int wpr, const fwd4_args &a, float ss, float *rstd,
                                            float *div, float *buf)
{
    constexpr int V = chunk<T>::n;
    if (!rms_needs_rescale(ss))
        return;
    float m = 0.0f, s2 = 0.0f;
#pragma unroll
    for (int j = 0; j < NVT; j++)
        if (lane + (int64_t)j * tpr < nc) {
            float v[V];
            unpack<T>(u[j], v);
#pragma unroll
            for (int i = 0; i < V; i++)
                m = fmaxf(m, fabsf(v[i]));
        }
    m = row_reduce<1>(m, wpr, buf);
#pragma unroll
    for (int j = 0; j < NVT; j++)
        if (lane + (int64_t)j * tpr < nc) {
            float v[V];
            unpack<T>(u[j], v);
#pragma unroll
            for (int i = 0; i < V; i++)
                s2 += (v[i] / m) * (v[i] / m);
        }
    if (wpr > 1)
        __syncthreads(); /* every thread has read buf's maxima */
    s2 = row_reduce<0>(s2, wpr, buf);
    rms_rescale(m, s2, a.D, a.eps, rstd, div);
}

/* y = x rstd w of a packed row, each chunk stored (store path SM, sth_row) as soon as it is
 * computed: holding the outputs costs registers. */
template <typename T, int NVT, int SM>
__device__ __forceinline__ void fwd_out(uint4 (&u)[NVT], int lane, int tpr, int64_t nc, const T *w,
                                        float rstd, float div, T *y, uint64_t pol)
{
    constexpr int V = chunk<T>::n;
#pragma unroll
    for (int j = 0; j < NVT; j++) {
        const int64_t c = lane + (int64_t)j * tpr;
        if (c < nc) {
            float v[V], wv[V];
            launder(u[j]); /* widen again rather than hold the widened row (rms_fwd_reg) */
            unpack<T>(u[j], v);
            unpack<T>(ld_reuse(w + c * V), wv);
            if (div != 1.0f)
#pragma unroll
                for (int i = 0; i < V; i++)
                    v[i] /= div;
#pragma unroll
            for (int i = 0; i < V; i++)
                v[i] = v[i] * rstd * wv[i];
            st_mode<SM>(y + c * V, pack<T>(v), pol);
        }
    }
}

template <typename T, int NVT>
__device__ __forceinline__ float sum_sq(const uint4 (&u)[NVT], int lane, int tpr, int64_t nc)
{
    constexpr int V = chunk<T>::n;
    float ss = 0.0f;
#pragma unroll
    for (int j = 0; j < NVT; j++)
        if (lane + (int64_t)j * tpr < nc) {
            float v[V];
            unpack<T>(u[j], v);
#pragma unroll
            for (int i = 0; i < V; i++)
                ss += v[i] * v[i];
        }
    return ss;
}

/* The register forward. Row groups of tpr = 32 wpr threads (wpr = 1: blockDim.x / 32 rows a
 * block, no barrier; wpr > 1: one row a block, one barrier a row, the sums in alternating
 * halves of red as in rms_bwd_reg); group g of the grid takes rows g, g + NG, ... (NG groups;
 * without PF the grid covers all rows, one row a group). PF: the next row's loads are issued
 * before the current row's reduction (two rows in registers: a lower register cap). */
/* Register caps (__maxnreg__ rather than launch bounds: the block size is a knob): v2's 96 for
 * a warp's 16-chunk row (20 warps a SM), about 160 for two of them (12 warps a SM). */
__host__ __device__ constexpr int fwd4_regs(int nvt, bool res, bool pf)
{
    return pf ? (nvt >= 16 ? 200 : res ? 168 : nvt >= 8 ? 128 : nvt >= 4 ? 80 : 64)
              : (nvt >= 16 || res ? 96 : nvt >= 8 ? 72 : nvt >= 4 ? 56 : nvt >= 2 ? 40 : 32);
}

template <int NVT, bool RES, bool PF> constexpr int fwd4_regs() { return fwd4_regs(NVT, RES, PF); }

/* PDL (a.pdl): the grid is a programmatic dependent of the stream's previous kernel -- every
 * block waits for that one's completion (griddepcontrol.wait) before its first global read,
 * and lets the next grid launch at once (griddepcontrol.launch_dependents): that grid's blocks
 * take the SMs that this one's last wave leaves and wait there, so the launch latency between
 * the two is hidden (not the first bytes' latency: nothing is read before the wait). */
template <typename T, int NVT, bool RES, bool PF, int SM>
__global__ void __maxnreg__((fwd4_regs<NVT, RES, PF>())) rms_fwd_v4(fwd4_args a, int wpr)
{
    __shared__ float red[2][16], red2[16];
    const int tpr = 32 * wpr;
    const int lane = (int)(threadIdx.x % tpr);
    const int64_t gpb = blockDim.x / tpr, NG = (int64_t)gridDim.x * gpb;
    const int64_t nc = a.D / chunk<T>::n;
    const uint64_t pol = a.lm == 1 ? l2_evict_first() : 0, spol = SM == 1 ? l2_policy(a.sm) : 0;
    int64_t t = (int64_t)blockIdx.x * gpb + threadIdx.x / tpr;
    uint4 u[NVT], ur[NVT], nu[NVT], nr[NVT];
    if (a.pdl) {
        ptx_griddep_launch_dependents();
        ptx_griddep_wait();
    }
    if (PF && t < a.T) {
        ldh_row<T, NVT>(nu, (const T *)a.x + t * a.sx, lane, tpr, nc, a.lm, pol);
        if (RES)
            ldh_row<T, NVT>(nr, (const T *)a.r + t * a.sr, lane, tpr, nc, a.lm, pol);
    }
    for (int k = 0; t < a.T; t += NG, k ^= 1) {
        if (PF) {
#pragma unroll
            for (int j = 0; j < NVT; j++)
                u[j] = nu[j], ur[j] = nr[j];
            if (t + NG < a.T) {
                ldh_row<T, NVT>(nu, (const T *)a.x + (t + NG) * a.sx, lane, tpr, nc, a.lm, pol);
                if (RES)
                    ldh_row<T, NVT>(nr, (const T *)a.r + (t + NG) * a.sr, lane, tpr, nc, a.lm, pol);
            }
        } else {
            ldh_row<T, NVT>(u, (const T *)a.x + t * a.sx, lane, tpr, nc, a.lm, pol);
            if (RES)
                ldh_row<T, NVT>(ur, (const T *)a.r + t * a.sr, lane, tpr, nc, a.lm, pol);
        }
        if (RES) {
#pragma unroll
            for (int j = 0; j < NVT; j++)
                if (lane + (int64_t)j * tpr < nc)
                    u[j] = res_sum<T>(u[j], ur[j]); /* normalise what is stored */
            sth_row<T, NVT, SM>((T *)a.xw + t * a.sx, u, lane, tpr, nc, spol);
        }
        const float ss = row_reduce<0>(sum_sq<T, NVT>(u, lane, tpr, nc), wpr, red[k]);
#pragma unroll
        for (int j = 0; j < NVT; j++)
            launder(u[j]); /* the widened row is not kept past the sum (rms_fwd_reg) */
        float rstd = 1.0f / sqrtf(ss / (float)a.D + a.eps), div = 1.0f;
        fwd_rescale<T, NVT>(u, lane, tpr, nc, wpr, a, ss, &rstd, &div, red2);
        fwd_out<T, NVT, SM>(u, lane, tpr, nc, (const T *)a.w, rstd, div, (T *)a.y + t * a.sy, spol);
        if (!PF)
            break; /* one row a group: the grid covers the rows (a loop costs registers) */
    }
}

/* Two rows a group (v6, plain forward): the residual v4 kernel's load shape -- every lane
 * issues the loads of two rows (NVT chunks each) before the first sum -- for the plain forward:
 * group g (tpr = 32 wpr threads) takes rows 2g and 2g + 1, adjacent (16 KB contiguous at 4096
 * bf16), so a row's fixed costs (the reduction's latency, the ramp of its loads) are paid once
 * per two rows. wpr > 1: one group a block, one barrier for both sums. Both rows stay in
 * registers through the first one's output: 128 registers at 8 chunks (96 spilled 268 bytes). */
template <typename T, int NVT, int SM>
__global__ void __maxnreg__((NVT >= 8 ? 128 : 80)) rms_fwd_x2(fwd4_args a, int wpr)
{
    __shared__ float red[2][16], red2[16];
    const int tpr = 32 * wpr;
    const int lane = (int)(threadIdx.x % tpr);
    const int64_t gpb = blockDim.x / tpr;
    const int64_t nc = a.D / chunk<T>::n;
    const uint64_t pol = a.lm == 1 ? l2_evict_first() : 0, spol = SM == 1 ? l2_policy(a.sm) : 0;
    const int64_t t = 2 * ((int64_t)blockIdx.x * gpb + threadIdx.x / tpr);
    if (t >= a.T)
        return; /* uniform over a group; wpr > 1: the whole block */
    const bool two = t + 1 < a.T;
    uint4 u0[NVT], u1[NVT];
    ldh_row<T, NVT>(u0, (const T *)a.x + t * a.sx, lane, tpr, nc, a.lm, pol);
    if (two)
        ldh_row<T, NVT>(u1, (const T *)a.x + (t + 1) * a.sx, lane, tpr, nc, a.lm, pol);
    float s0 = sum_sq<T, NVT>(u0, lane, tpr, nc), s1 = two ? sum_sq<T, NVT>(u1, lane, tpr, nc) : 0.0f;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        s0 += __shfl_xor_sync(0xffffffffu, s0, o);
        s1 += __shfl_xor_sync(0xffffffffu, s1, o);
    }
    if (wpr > 1) {
        if (threadIdx.x % 32 == 0)
            red[0][threadIdx.x / 32] = s0, red[1][threadIdx.x / 32] = s1;
        __syncthreads();
        s0 = red[0][0], s1 = red[1][0];
        for (int i = 1; i < wpr; i++)
            s0 += red[0][i], s1 += red[1][i];
    }
#pragma unroll
    for (int j = 0; j < NVT; j++)
        launder(u0[j]), launder(u1[j]); /* as in rms_fwd_v4 */
    float r0 = 1.0f / sqrtf(s0 / (float)a.D + a.eps), d0 = 1.0f;
    float r1 = 1.0f / sqrtf(s1 / (float)a.D + a.eps), d1 = 1.0f;
    fwd_rescale<T, NVT>(u0, lane, tpr, nc, wpr, a, s0, &r0, &d0, red2);
    if (wpr > 1)
        __syncthreads(); /* red2's second use */
    if (two)
        fwd_rescale<T, NVT>(u1, lane, tpr, nc, wpr, a, s1, &r1, &d1, red2);
    fwd_out<T, NVT, SM>(u0, lane, tpr, nc, (const T *)a.w, r0, d0, (T *)a.y + t * a.sy, spol);
    if (two)
        fwd_out<T, NVT, SM>(u1, lane, tpr, nc, (const T *)a.w, r1, d1, (T *)a.y + (t + 1) * a.sy, spol);
}

/* The bulk-copy forward (sm_90): persistent warps, W = blockDim.x / 32 a block; warp g of the
 * grid takes rows g, g + NG, ...; its S slots (dynamic shared memory: W S slots of nc chunks,
 * RES: 2 nc, x then r) each have an mbarrier. Lane 0 starts the copy of row k + S into slot
 * k % S once every lane has consumed row k from it: their sum of squares (which all lanes
 * reach through the shuffles) depends on every value they read, so the reads are done. */
template <typename T, bool RES, int SM>
__global__ void __launch_bounds__(256) rms_fwd_tma(fwd4_args a, int S)
{
#if FLASHC_PTX_SM90A
    constexpr int NVT = 16;
    extern __shared__ __align__(128) uint4 fring[];
    __shared__ __align__(8) uint64_t bar[8 * 8];
    const int lane = threadIdx.x % 32, wid = threadIdx.x / 32, W = blockDim.x / 32;
    const int64_t nc = a.D / chunk<T>::n, slot = RES ? 2 * nc : nc;
    const uint32_t rowb = (uint32_t)(a.D * (int64_t)sizeof(T));
    uint4 *mine = fring + (int64_t)wid * S * slot;
    uint64_t *mb = bar + wid * 8;
    const int64_t NG = (int64_t)gridDim.x * W;
    const int64_t t0 = (int64_t)blockIdx.x * W + wid;
    const uint64_t pol = l2_evict_first(), spol = SM == 1 ? l2_policy(a.sm) : 0;
    auto issue = [&](int64_t t, int s) { /* lane 0 */
        if (t < a.T) {
            const uint32_t b = ptx_smem_addr(&mb[s]);
            ptx_mbarrier_arrive_expect_tx(b, RES ? 2 * rowb : rowb);
            const T *x = (const T *)a.x + t * a.sx, *r = (const T *)a.r + t * a.sr;
            uint4 *d = mine + s * slot;
            if (a.lm & 1) {
                ptx_bulk_load_hint(ptx_smem_addr(d), x, rowb, b, pol);
                if (RES)
                    ptx_bulk_load_hint(ptx_smem_addr(d + nc), r, rowb, b, pol);
            } else {
                ptx_bulk_load(ptx_smem_addr(d), x, rowb, b);
                if (RES)
                    ptx_bulk_load(ptx_smem_addr(d + nc), r, rowb, b);
            }
        }
    };
    if (lane == 0) {
        for (int s = 0; s < S; s++)
            ptx_mbarrier_init(ptx_smem_addr(&mb[s]), 1);
        ptx_fence_mbarrier_init();
        for (int s = 0; s < S; s++)
            issue(t0 + s * NG, s);
    }
    __syncwarp();
    int s = 0;
    uint32_t ph = 0;
    for (int64_t t = t0; t < a.T; t += NG) {
        ptx_mbarrier_wait(ptx_smem_addr(&mb[s]), ph);
        const uint4 *d = mine + s * slot;
        uint4 u[NVT];
#pragma unroll
        for (int j = 0; j < NVT; j++)
            if (lane + (int64_t)j * 32 < nc) {
                u[j] = d[lane + j * 32];
                if (RES)
                    u[j] = res_sum<T>(u[j], d[nc + lane + j * 32]);
            }
        const float ss = row_reduce<0>(sum_sq<T, NVT>(u, lane, 32, nc), 1, NULL);
        __syncwarp();
        if (lane == 0) {
            ptx_fence_proxy_async_shared(); /* the lanes' reads of the slot before the copy's writes */
            issue(t + (int64_t)S * NG, s);
        }
        if (RES)
            sth_row<T, NVT, SM>((T *)a.xw + t * a.sx, u, lane, 32, nc, spol);
        float rstd = 1.0f / sqrtf(ss / (float)a.D + a.eps), div = 1.0f;
        fwd_rescale<T, NVT>(u, lane, 32, nc, 1, a, ss, &rstd, &div, NULL);
        fwd_out<T, NVT, SM>(u, lane, 32, nc, (const T *)a.w, rstd, div, (T *)a.y + t * a.sy, spol);
        if (++s == S)
            s = 0, ph ^= 1;
    }
#else
    (void)a, (void)S;
#endif
}

/* ---- backward --------------------------------------------------------------------------- */

struct bwd4_args {
    const void *x, *w, *dy, *dres;
    void *dx;
    float *part; /* (G, D) float32 dw partials */
    int64_t sx, sdy, sdres, sdx;
    int64_t T, D;
    float eps;
    int lm, sm; /* lm bit 0: evict-first bulk copies; sm: the store mode of dx */
    int pdl;    /* rms_bwd_v4: launched as a programmatic dependent (fwd4_args) */
};

/* The bulk-copy backward (sm_90): rms_bwd_reg's persistent block a row (thread k owns chunks
 * k + j blockDim.x, j < NVT; w and its dw columns in registers; the two sums by one barrier a
 * row into alternating halves of red), with x, dy (RES: dres) of row b + k G landing in slot
 * k % S by bulk copies that thread 0 starts once every thread has read row k - S out of that
 * slot (after row k - S's barrier). Dynamic shared memory: S slots of (RES ? 3 : 2) nc chunks. */
template <typename T, int NVT, bool RES, int SM>
__global__ void __launch_bounds__(NVT >= 4 ? 256 : NVT == 2 ? 512 : 1024) rms_bwd_tma(bwd4_args a, int S)
{
#if FLASHC_PTX_SM90A
    constexpr int V = chunk<T>::n;
    extern __shared__ __align__(128) uint4 bring[];
    __shared__ __align__(8) uint64_t bar[8];
    __shared__ float red[2][64];
    __shared__ double redd[64];
    const int64_t nc = a.D / V, slot = (RES ? 3 : 2) * nc, G = gridDim.x;
    const uint32_t rowb = (uint32_t)(a.D * (int64_t)sizeof(T));
    const int nw = blockDim.x / 32;
    const uint64_t pol = l2_evict_first(), spol = SM == 1 ? l2_policy(a.sm) : 0;
    auto issue = [&](int64_t t, int s) { /* thread 0 */
        if (t < a.T) {
            const uint32_t b = ptx_smem_addr(&bar[s]);
            ptx_mbarrier_arrive_expect_tx(b, (RES ? 3 : 2) * rowb);
            uint4 *d = bring + s * slot;
            const T *x = (const T *)a.x + t * a.sx, *dy = (const T *)a.dy + t * a.sdy;
            const T *dr = (const T *)a.dres + t * a.sdres;
            if (a.lm & 1) {
                ptx_bulk_load_hint(ptx_smem_addr(d), x, rowb, b, pol);
                ptx_bulk_load_hint(ptx_smem_addr(d + nc), dy, rowb, b, pol);
                if (RES)
                    ptx_bulk_load_hint(ptx_smem_addr(d + 2 * nc), dr, rowb, b, pol);
            } else {
                ptx_bulk_load(ptx_smem_addr(d), x, rowb, b);
                ptx_bulk_load(ptx_smem_addr(d + nc), dy, rowb, b);
                if (RES)
                    ptx_bulk_load(ptx_smem_addr(d + 2 * nc), dr, rowb, b);
            }
        }
    };
    if (threadIdx.x == 0) {
        for (int s = 0; s < S; s++)
            ptx_mbarrier_init(ptx_smem_addr(&bar[s]), 1);
        ptx_fence_mbarrier_init();
        for (int s = 0; s < S; s++)
            issue((int64_t)blockIdx.x + s * G, s);
    }
    uint4 wr[NVT];
    float dw[NVT][V];
#pragma unroll
    for (int j = 0; j < NVT; j++) {
        const int64_t c = threadIdx.x + (int64_t)j * blockDim.x;
        if (c < nc)
            wr[j] = ld_reuse((const T *)a.w + c * V);
#pragma unroll
        for (int i = 0; i < V; i++)
            dw[j][i] = 0.0f;
    }
    __syncthreads(); /* the barriers' initialisation */
    int s = 0, k = 0;
    uint32_t ph = 0;
    for (int64_t t = blockIdx.x; t < a.T; t += G, k ^= 1) {
        ptx_mbarrier_wait(ptx_smem_addr(&bar[s]), ph);
        const uint4 *d = bring + s * slot;
        uint4 xc[NVT], dc[NVT], rc[NVT];
        float ss = 0.0f, dot = 0.0f;
#pragma unroll
        for (int j = 0; j < NVT; j++) {
            const int64_t c = threadIdx.x + (int64_t)j * blockDim.x;
            if (c < nc) {
                xc[j] = d[c], dc[j] = d[nc + c];
                if (RES)
                    rc[j] = d[2 * nc + c];
                float xv[V], dv[V], wv[V];
                unpack<T>(xc[j], xv), unpack<T>(dc[j], dv), unpack<T>(wr[j], wv);
#pragma unroll
                for (int i = 0; i < V; i++) {
                    ss += xv[i] * xv[i];
                    dot += dv[i] * wv[i] * xv[i];
                }
            }
        }
        ss = warp_sum(ss), dot = warp_sum(dot);
        if (threadIdx.x % 32 == 0)
            red[k][threadIdx.x / 32] = ss, red[k][32 + threadIdx.x / 32] = dot;
        __syncthreads(); /* also: every thread has read the slot */
        if (threadIdx.x == 0) {
            ptx_fence_proxy_async_shared();
            issue(t + (int64_t)S * G, s);
        }
        ss = 0.0f, dot = 0.0f;
        for (int i = 0; i < nw; i++)
            ss += red[k][i], dot += red[k][32 + i];
        T *dx = (T *)a.dx + t * a.sdx;
        if (rms_bwd_plain(ss, dot)) {
            const float rstd = 1.0f / sqrtf(ss / (float)a.D + a.eps);
            const float cc = rstd * rstd * dot / (float)a.D;
#pragma unroll
            for (int j = 0; j < NVT; j++) {
                const int64_t c = threadIdx.x + (int64_t)j * blockDim.x;
                if (c < nc) {
                    float xv[V], dv[V], wv[V], o[V], rv[V];
                    unpack<T>(xc[j], xv), unpack<T>(dc[j], dv), unpack<T>(wr[j], wv);
                    if (RES)
                        unpack<T>(rc[j], rv);
#pragma unroll
                    for (int i = 0; i < V; i++) {
                        dw[j][i] += dv[i] * (xv[i] * rstd);
                        o[i] = rstd * (dv[i] * wv[i] - xv[i] * cc) + (RES ? rv[i] : 0.0f);
                    }
                    xc[j] = pack<T>(o);
                }
            }
            sth_row<T, NVT, SM>(dx, xc, threadIdx.x, blockDim.x, nc, spol);
        } else { /* rare: the row in float64 (rms_bwd_plain), read again from global memory */
            const T *x = (const T *)a.x + t * a.sx, *dy = (const T *)a.dy + t * a.sdy;
            double ssd = 0.0, dotd = 0.0;
#pragma unroll 1
            for (int j = 0; j < NVT; j++) {
                const int64_t c = threadIdx.x + (int64_t)j * blockDim.x;
                if (c < nc) {
                    float xv[V], dv[V], wv[V];
                    unpack<T>(ld_reuse(x + c * V), xv), unpack<T>(ld_reuse(dy + c * V), dv);
                    unpack<T>(ld_reuse((const T *)a.w + c * V), wv);
#pragma unroll
                    for (int i = 0; i < V; i++)
                        ssd += (double)xv[i] * xv[i], dotd += (double)dv[i] * wv[i] * xv[i];
                }
            }
            block_sum2_d(ssd, dotd, redd);
            const rms_bwd_d q = rms_bwd_coef_d(ssd, dotd, a.D, a.eps);
#pragma unroll 1
            for (int j = 0; j < NVT; j++) {
                const int64_t c = threadIdx.x + (int64_t)j * blockDim.x;
                if (c < nc) {
                    float xv[V], dv[V], wv[V], o[V], rv[V];
                    unpack<T>(ld_reuse(x + c * V), xv), unpack<T>(ld_reuse(dy + c * V), dv);
                    unpack<T>(ld_reuse((const T *)a.w + c * V), wv);
                    if (RES)
                        unpack<T>(ld_reuse((const T *)a.dres + t * a.sdres + c * V), rv);
                    rms_bwd_chunk_d<V>(q, xv, dv, wv, RES ? rv : NULL, dw[j], o);
                    st_stream(dx + c * V, pack<T>(o));
                }
            }
            __syncthreads(); /* redd is written again only after every thread has read it */
        }
        if (++s == S)
            s = 0, ph ^= 1;
    }
    rms_bwd_store_part<V, NVT>(a.part + (int64_t)blockIdx.x * a.D, nc, dw);
#else
    (void)a, (void)S;
#endif
}

/* The register backward with dw in shared memory (v4): rms_bwd_reg's persistent block a row
 * and its next-row prefetch, without w and the dw columns in registers (164 -> ~110 registers
 * a thread at 4 chunks: 4 blocks a SM rather than 3, so 4 prefetched rows a SM). w is read
 * from L1 each row; thread k's dw columns live in dynamic shared memory as float4 quads at
 * ((j * (V / 4) + q) * blockDim.x + k), its own, so no barrier and no bank conflict. */
template <typename T, int NVT, bool RES, int SM>
__global__ void __launch_bounds__(NVT >= 4 ? 256 : NVT == 2 ? 512 : 1024) rms_bwd_v4(bwd4_args a)
{
    constexpr int V = chunk<T>::n, Q = V / 4;
    extern __shared__ __align__(16) float4 dws[];
    __shared__ float red[2][64];
    __shared__ double redd[64];
    const int64_t nc = a.D / V;
    const uint64_t pol = a.lm == 1 ? l2_evict_first() : 0, spol = SM == 1 ? l2_policy(a.sm) : 0;
    const T *w = (const T *)a.w;
#pragma unroll
    for (int j = 0; j < NVT; j++)
#pragma unroll
        for (int q = 0; q < Q; q++)
            dws[(j * Q + q) * blockDim.x + threadIdx.x] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    uint4 xr[NVT], dr[NVT], gr[NVT];
    int64_t t = blockIdx.x;
    if (a.pdl)
        ptx_griddep_wait(); /* the stream's previous kernel (fwd4_args) */
    auto load_row = [&](int64_t r) {
        ldh_row<T, NVT>(xr, (const T *)a.x + r * a.sx, threadIdx.x, blockDim.x, nc, a.lm, pol);
        ldh_row<T, NVT>(dr, (const T *)a.dy + r * a.sdy, threadIdx.x, blockDim.x, nc, a.lm, pol);
        if (RES)
            ldh_row<T, NVT>(gr, (const T *)a.dres + r * a.sdres, threadIdx.x, blockDim.x, nc, a.lm, pol);
    };
    if (t < a.T)
        load_row(t);
    for (int k = 0; t < a.T; t += gridDim.x, k ^= 1) {
        uint4 xc[NVT], dc[NVT], rc[NVT];
#pragma unroll
        for (int j = 0; j < NVT; j++)
            xc[j] = xr[j], dc[j] = dr[j], rc[j] = RES ? gr[j] : make_uint4(0, 0, 0, 0);
        if (t + gridDim.x < a.T)
            load_row(t + gridDim.x);
        float ss = 0.0f, dot = 0.0f;
#pragma unroll
        for (int j = 0; j < NVT; j++) {
            const int64_t c = threadIdx.x + (int64_t)j * blockDim.x;
            if (c < nc) {
                float xv[V], dv[V], wv[V];
                unpack<T>(xc[j], xv), unpack<T>(dc[j], dv), unpack<T>(ld_reuse(w + c * V), wv);
#pragma unroll
                for (int i = 0; i < V; i++) {
                    ss += xv[i] * xv[i];
                    dot += dv[i] * wv[i] * xv[i];
                }
            }
        }
        block_sum2(ss, dot, red[k]);
        T *dx = (T *)a.dx + t * a.sdx;
        if (rms_bwd_plain(ss, dot)) {
            const float rstd = 1.0f / sqrtf(ss / (float)a.D + a.eps);
            const float cc = rstd * rstd * dot / (float)a.D;
#pragma unroll
            for (int j = 0; j < NVT; j++) {
                const int64_t c = threadIdx.x + (int64_t)j * blockDim.x;
                if (c < nc) {
                    float xv[V], dv[V], wv[V], o[V], rv[V];
                    launder(xc[j]), launder(dc[j]); /* as in rms_fwd_reg */
                    unpack<T>(xc[j], xv), unpack<T>(dc[j], dv), unpack<T>(ld_reuse(w + c * V), wv);
                    if (RES)
                        unpack<T>(rc[j], rv);
#pragma unroll
                    for (int q = 0; q < Q; q++) {
                        float4 &m = dws[(j * Q + q) * blockDim.x + threadIdx.x];
                        float4 d = m;
                        d.x += dv[4 * q] * (xv[4 * q] * rstd), d.y += dv[4 * q + 1] * (xv[4 * q + 1] * rstd);
                        d.z += dv[4 * q + 2] * (xv[4 * q + 2] * rstd), d.w += dv[4 * q + 3] * (xv[4 * q + 3] * rstd);
                        m = d;
                    }
#pragma unroll
                    for (int i = 0; i < V; i++)
                        o[i] = rstd * (dv[i] * wv[i] - xv[i] * cc) + (RES ? rv[i] : 0.0f);
                    const uint4 ou = pack<T>(o);
                    if (SM)
                        st_pol(dx + c * V, ou, spol);
                    else
                        st_stream(dx + c * V, ou);
                }
            }
        } else { /* rare: the row in float64 (rms_bwd_plain), read again from global memory */
            const T *x = (const T *)a.x + t * a.sx, *dy = (const T *)a.dy + t * a.sdy;
            double ssd = 0.0, dotd = 0.0;
#pragma unroll 1
            for (int j = 0; j < NVT; j++) {
                const int64_t c = threadIdx.x + (int64_t)j * blockDim.x;
                if (c < nc) {
                    float xv[V], dv[V], wv[V];
                    unpack<T>(ld_reuse(x + c * V), xv), unpack<T>(ld_reuse(dy + c * V), dv);
                    unpack<T>(ld_reuse(w + c * V), wv);
#pragma unroll
                    for (int i = 0; i < V; i++)
                        ssd += (double)xv[i] * xv[i], dotd += (double)dv[i] * wv[i] * xv[i];
                }
            }
            block_sum2_d(ssd, dotd, redd);
            const rms_bwd_d q = rms_bwd_coef_d(ssd, dotd, a.D, a.eps);
#pragma unroll 1
            for (int j = 0; j < NVT; j++) {
                const int64_t c = threadIdx.x + (int64_t)j * blockDim.x;
                if (c < nc) {
                    float xv[V], dv[V], wv[V], o[V], rv[V], dwv[V];
                    unpack<T>(ld_reuse(x + c * V), xv), unpack<T>(ld_reuse(dy + c * V), dv);
                    unpack<T>(ld_reuse(w + c * V), wv);
                    if (RES)
                        unpack<T>(ld_reuse((const T *)a.dres + t * a.sdres + c * V), rv);
                    for (int qq = 0; qq < Q; qq++) {
                        const float4 m = dws[(j * Q + qq) * blockDim.x + threadIdx.x];
                        dwv[4 * qq] = m.x, dwv[4 * qq + 1] = m.y, dwv[4 * qq + 2] = m.z, dwv[4 * qq + 3] = m.w;
                    }
                    rms_bwd_chunk_d<V>(q, xv, dv, wv, RES ? rv : NULL, dwv, o);
                    for (int qq = 0; qq < Q; qq++)
                        dws[(j * Q + qq) * blockDim.x + threadIdx.x] =
                            make_float4(dwv[4 * qq], dwv[4 * qq + 1], dwv[4 * qq + 2], dwv[4 * qq + 3]);
                    st_stream(dx + c * V, pack<T>(o));
                }
            }
            __syncthreads(); /* redd is written again only after every thread has read it */
        }
    }
    if (a.pdl) /* rms_dw_sum may launch (it waits for this grid's end before reading part) */
        ptx_griddep_launch_dependents();
    float *part = a.part + (int64_t)blockIdx.x * a.D;
#pragma unroll
    for (int j = 0; j < NVT; j++) {
        const int64_t c = threadIdx.x + (int64_t)j * blockDim.x;
        if (c < nc)
#pragma unroll
            for (int q = 0; q < Q; q++)
                reinterpret_cast<float4 *>(part + c * V)[q] = dws[(j * Q + q) * blockDim.x + threadIdx.x];
    }
}

/* ---- host side ---------------------------------------------------------------------------- */
#ifndef FLASHC_ROWS_V4_KERNELS_ONLY /* (set by a scratch build that reads the kernels' ptxas -v) */

struct v4_cfg {
    int kind; /* 0: not asked for; 4: rms_fwd_v4; 5: the bulk-copy kernels */
    int k[9]; /* the knobs in order (see the header); -1 = not given */
};

static v4_cfg v4_env(const char *name)
{
    v4_cfg c = {0, {-1, -1, -1, -1, -1, -1, -1, -1, -1}};
    const char *e = getenv(name);
    if (!e || e[0] != 'v' || e[1] < '4' || e[1] > '6' || (e[2] != '\0' && e[2] != ':'))
        return c;
    c.kind = e[1] - '0';
    if (e[2] == ':')
        (void)sscanf(e + 3, "%d,%d,%d,%d,%d,%d,%d,%d,%d", &c.k[0], &c.k[1], &c.k[2], &c.k[3], &c.k[4],
                     &c.k[5], &c.k[6], &c.k[7], &c.k[8]);
    return c;
}

static int knob(const v4_cfg &c, int i, int dflt, int lo, int hi)
{
    const int v = c.k[i];
    return v >= lo && v <= hi ? v : dflt;
}

/* Per device: SMs, shared memory a SM, the opt-in maximum a block, the reserve a block, the
 * compute capability's major; cached (16 devices), the queries cost host time at every call. */
struct dev_info {
    int sms, smem_sm, optin, reserve, major;
};

static std::mutex v4_mu;
static dev_info v4_dev[16];
static bool v4_dev_ok[16];

static cudaError_t get_dev(int *dev, dev_info *out)
{
    cudaError_t err = cudaGetDevice(dev);
    if (err != cudaSuccess)
        return err;
    std::lock_guard<std::mutex> lock(v4_mu);
    if (*dev >= 0 && *dev < 16 && v4_dev_ok[*dev]) {
        *out = v4_dev[*dev];
        return cudaSuccess;
    }
    dev_info d;
    err = cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, *dev);
    if (err == cudaSuccess)
        err = cudaDeviceGetAttribute(&d.smem_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, *dev);
    if (err == cudaSuccess)
        err = cudaDeviceGetAttribute(&d.optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, *dev);
    if (err == cudaSuccess)
        err = cudaDeviceGetAttribute(&d.reserve, cudaDevAttrReservedSharedMemoryPerBlock, *dev);
    if (err == cudaSuccess)
        err = cudaDeviceGetAttribute(&d.major, cudaDevAttrComputeCapabilityMajor, *dev);
    if (err != cudaSuccess)
        return err;
    if (*dev >= 0 && *dev < 16)
        v4_dev[*dev] = d, v4_dev_ok[*dev] = true;
    *out = d;
    return cudaSuccess;
}

/* Kernel k's static shared memory, its dynamic limit raised to the most the device allows
 * (once per kernel and device), and its blocks a SM at (threads, smem). */
struct kern_entry {
    const void *k;
    int dev, threads;
    size_t smem;
    int v;
};
static kern_entry v4_tab[128];
static int v4_n;

static cudaError_t kern_static_smem(const void *k, int dev, const dev_info &d, size_t *out)
{
    std::lock_guard<std::mutex> lock(v4_mu);
    for (int i = 0; i < v4_n; i++)
        if (v4_tab[i].k == k && v4_tab[i].dev == dev && v4_tab[i].threads == -1) {
            *out = (size_t)v4_tab[i].v;
            return cudaSuccess;
        }
    cudaFuncAttributes fa;
    cudaError_t err = cudaFuncGetAttributes(&fa, k);
    if (err == cudaSuccess)
        err = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   d.optin - (int)fa.sharedSizeBytes);
    if (err != cudaSuccess)
        return err;
    if (v4_n < 128)
        v4_tab[v4_n++] = kern_entry{k, dev, -1, 0, (int)fa.sharedSizeBytes};
    *out = fa.sharedSizeBytes;
    return cudaSuccess;
}

static cudaError_t kern_per_sm(const void *k, int dev, int threads, size_t smem, int *out)
{
    std::lock_guard<std::mutex> lock(v4_mu);
    for (int i = 0; i < v4_n; i++)
        if (v4_tab[i].k == k && v4_tab[i].dev == dev && v4_tab[i].threads == threads &&
            v4_tab[i].smem == smem) {
            *out = v4_tab[i].v;
            return cudaSuccess;
        }
    const cudaError_t err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(out, k, threads, smem);
    if (err == cudaSuccess && v4_n < 128)
        v4_tab[v4_n++] = kern_entry{k, dev, threads, smem, *out};
    return err;
}

static flashc_status v4_query_failed(const char *fn, cudaError_t err)
{
    (void)cudaGetLastError();
    return flashc__fail(FLASHC_ERR_DEVICE, "%s: device query failed: %s", fn, cudaGetErrorString(err));
}

/* The hinted store path (SM = 1) is built for bfloat16 only (the benchmarked type: compile
 * time); the other types take st.global.cs whatever H says. Chunks a lane: 16, 8, 4, 2, 1
 * without PF (R = 1..16 at 4096 bf16), 16, 8, 4, 2 with it; the residual forward 8. */
template <typename T, int NVT, bool RES, bool PF> static const void *fwd4_kernel(int sm)
{
    (void)sm;
    return (const void *)rms_fwd_v4<T, NVT, RES, PF, 0>;
}

template <int NVT, bool RES, bool PF> static const void *fwd4_bf16(int sm)
{
    return sm == 2 ? (const void *)rms_fwd_v4<__nv_bfloat16, NVT, RES, PF, 2>
           : sm    ? (const void *)rms_fwd_v4<__nv_bfloat16, NVT, RES, PF, 1>
                   : (const void *)rms_fwd_v4<__nv_bfloat16, NVT, RES, PF, 0>;
}

template <> const void *fwd4_kernel<__nv_bfloat16, 4, false, false>(int sm) { return fwd4_bf16<4, false, false>(sm); }
template <> const void *fwd4_kernel<__nv_bfloat16, 2, false, false>(int sm) { return fwd4_bf16<2, false, false>(sm); }
template <> const void *fwd4_kernel<__nv_bfloat16, 16, false, false>(int sm) { return fwd4_bf16<16, false, false>(sm); }
template <> const void *fwd4_kernel<__nv_bfloat16, 16, false, true>(int sm) { return fwd4_bf16<16, false, true>(sm); }
template <> const void *fwd4_kernel<__nv_bfloat16, 8, false, true>(int sm) { return fwd4_bf16<8, false, true>(sm); }
template <> const void *fwd4_kernel<__nv_bfloat16, 8, true, false>(int sm) { return fwd4_bf16<8, true, false>(sm); }

template <typename T, bool RES, bool PF> static const void *fwd4_pick(int nvt, int sm)
{
    if (RES)
        return fwd4_kernel<T, 8, RES, PF>(sm);
    switch (nvt) {
    case 16: return fwd4_kernel<T, 16, false, PF>(sm);
    case 8: return fwd4_kernel<T, 8, false, PF>(sm);
    case 4: return fwd4_kernel<T, 4, false, PF>(sm);
    case 2: return fwd4_kernel<T, 2, false, PF>(sm);
    default: return PF ? NULL : fwd4_kernel<T, 1, false, false>(sm);
    }
}

template <typename T> static bool fwd_v4_t(const rows_problem *p, const v4_cfg &c, flashc_status *st)
{
    static const char fn[] = "flashc_rmsnorm";
    const int64_t nc = p->D / chunk<T>::n;
    const bool res = p->r != NULL;
    const int P = knob(c, 0, 0, 0, 2), Wk = knob(c, 1, 2, 1, 16), B = knob(c, 2, 0, 0, 64);
    const int H = knob(c, 3, 0, 0, 19), Gc = knob(c, 4, 0, 1, 1 << 30), R = knob(c, 5, 1, 1, 16);
    const int L = knob(c, 6, 0, 0, 1); /* the 8th and 9th places (C, X): removed, ignored */
    if (nc < 32)
        return false;
    int wpr = 1;
    while (wpr <= 16 && (int64_t)32 * 16 * wpr < nc)
        wpr *= 2;
    int nvt = nc <= (int64_t)8 * 32 * wpr ? 8 : 16;
    if ((res || P == 2) && nvt == 16) /* x and r of 16 chunks a lane: too many registers;
                                         P = 2: two 8-chunk rows a lane rather than 16 */
        wpr *= 2, nvt = 8;
    for (int r = R; r > 1 && !res && nvt > (P ? 2 : 1); r /= 2) /* R: rows on R times the warps */
        wpr *= 2, nvt /= 2;
    if (wpr > 16)
        return false;
    const int threads = wpr == 1 ? 32 * Wk : 32 * wpr;
    if (threads * fwd4_regs(nvt, res, P != 0) > 65536)
        return false;
    const int sm = H / 4 == 4 ? 2 : H / 4 != 0; /* the store path (SM, above) */
    const void *k = res ? (P ? fwd4_pick<T, true, true>(nvt, sm) : fwd4_pick<T, true, false>(nvt, sm))
                        : (P ? fwd4_pick<T, false, true>(nvt, sm) : fwd4_pick<T, false, false>(nvt, sm));
    if (!k)
        return false;
    int dev = 0, per_sm = 0;
    dev_info d;
    size_t stat = 0, smem = 0;
    cudaError_t err = get_dev(&dev, &d);
    if (err == cudaSuccess)
        err = kern_static_smem(k, dev, d, &stat);
    if (err != cudaSuccess) {
        *st = v4_query_failed(fn, err);
        return true;
    }
    if (B > 0 && !P) { /* at most B blocks a SM: pad each block's shared memory */
        const int64_t s = (int64_t)d.smem_sm / B - d.reserve - (int64_t)stat;
        if (s > 0)
            smem = (size_t)(s < d.optin - (int64_t)stat ? s : d.optin - (int64_t)stat) & ~(size_t)15;
    }
    err = kern_per_sm(k, dev, threads, smem, &per_sm);
    if (err != cudaSuccess) {
        *st = v4_query_failed(fn, err);
        return true;
    }
    if (per_sm <= 0)
        return false;
    const int64_t rows = threads / (32 * wpr);
    int64_t grid = (p->T + rows - 1) / rows;
    if (P) {
        const int64_t g = (int64_t)d.sms * (B > 0 && B < per_sm ? B : per_sm);
        grid = grid < g ? grid : g;
    }
    if (P && Gc > 0 && grid > Gc)
        grid = Gc;
    if (grid > 2147483647LL)
        return false;
    fwd4_args a;
    a.x = p->x, a.r = p->r, a.w = p->w, a.xw = p->xw, a.y = p->y;
    a.sx = p->sx[0], a.sr = res ? p->sr[0] : 0, a.sy = p->sy[0];
    a.T = p->T, a.D = p->D, a.eps = p->eps, a.lm = H % 4, a.sm = H / 4, a.pdl = L;
    void *args[] = {&a, &wpr};
    (void)launch_maybe_pdl(k, dim3((unsigned)grid), dim3((unsigned)threads), args, smem, 0, L != 0 && d.major >= 9);
    *st = launch_status(fn, "rms_fwd_v4");
    return true;
}

/* The hinted store path of rms_fwd_tma: bfloat16 only (fwd4_kernel). */
template <typename T> static const void *tma_hinted(bool res, const void *plain)
{
    (void)res;
    return plain;
}

template <> const void *tma_hinted<__nv_bfloat16>(bool res, const void *plain)
{
    (void)plain;
    return res ? (const void *)rms_fwd_tma<__nv_bfloat16, true, 1> : (const void *)rms_fwd_tma<__nv_bfloat16, false, 1>;
}

template <typename T> static bool fwd_v5_t(const rows_problem *p, const v4_cfg &c, flashc_status *st)
{
    static const char fn[] = "flashc_rmsnorm";
    const int64_t nc = p->D / chunk<T>::n;
    const bool res = p->r != NULL;
    int W = knob(c, 0, 4, 1, 8);
    const int S = knob(c, 1, 3, 1, 8), B = knob(c, 2, 0, 0, 64), H = knob(c, 3, 1, 0, 15);
    const int Gc = knob(c, 4, 0, 1, 1 << 30);
    if (nc < 32 || nc > 512)
        return false;
    const bool sm = H / 4 != 0;
    const void *k = res ? (const void *)rms_fwd_tma<T, true, 0> : (const void *)rms_fwd_tma<T, false, 0>;
    if (sm)
        k = tma_hinted<T>(res, k);
    int dev = 0, per_sm = 0;
    dev_info d;
    size_t stat = 0;
    cudaError_t err = get_dev(&dev, &d);
    if (err == cudaSuccess && d.major != 9)
        return false; /* the bulk copies: sm_90a code only */
    if (err == cudaSuccess)
        err = kern_static_smem(k, dev, d, &stat);
    if (err != cudaSuccess) {
        *st = v4_query_failed(fn, err);
        return true;
    }
    const size_t slot = (size_t)(res ? 2 : 1) * (size_t)nc * 16;
    while (W > 0 && (size_t)W * S * slot > (size_t)d.optin - stat)
        W--;
    if (W == 0)
        return false;
    const size_t smem = (size_t)W * S * slot;
    err = kern_per_sm(k, dev, 32 * W, smem, &per_sm);
    if (err != cudaSuccess) {
        *st = v4_query_failed(fn, err);
        return true;
    }
    if (per_sm <= 0)
        return false;
    int64_t grid = (int64_t)d.sms * (B > 0 && B < per_sm ? B : per_sm);
    if (grid > (p->T + W - 1) / W)
        grid = (p->T + W - 1) / W;
    if (Gc > 0 && grid > Gc)
        grid = Gc;
    fwd4_args a;
    a.x = p->x, a.r = p->r, a.w = p->w, a.xw = p->xw, a.y = p->y;
    a.sx = p->sx[0], a.sr = res ? p->sr[0] : 0, a.sy = p->sy[0];
    a.T = p->T, a.D = p->D, a.eps = p->eps, a.lm = H % 4, a.sm = H / 4, a.pdl = 0;
    int Sv = S;
    void *args[] = {&a, &Sv};
    (void)cudaLaunchKernel(k, dim3((unsigned)grid), dim3((unsigned)(32 * W)), args, smem, 0);
    *st = launch_status(fn, "rms_fwd_tma");
    return true;
}

/* rms_fwd_x2: FLASHC_CUDA_RMS_FWD=v6:W,H[,R] (plain forward): two adjacent rows a group of
 * 32 wpr threads, 8 chunks a lane (R = 2: 4 chunks on twice the threads); W warps a block
 * when a row fits one warp. */
template <typename T> static const void *x2_kernel(int nvt, bool sm)
{
    (void)sm; /* the hinted store path: bfloat16 only (fwd4_kernel) */
    return nvt == 4 ? (const void *)rms_fwd_x2<T, 4, 0> : (const void *)rms_fwd_x2<T, 8, 0>;
}

template <> const void *x2_kernel<__nv_bfloat16>(int nvt, bool sm)
{
    if (nvt == 4)
        return sm ? (const void *)rms_fwd_x2<__nv_bfloat16, 4, 1> : (const void *)rms_fwd_x2<__nv_bfloat16, 4, 0>;
    return sm ? (const void *)rms_fwd_x2<__nv_bfloat16, 8, 1> : (const void *)rms_fwd_x2<__nv_bfloat16, 8, 0>;
}

template <typename T> static bool fwd_x2_t(const rows_problem *p, const v4_cfg &c, flashc_status *st)
{
    static const char fn[] = "flashc_rmsnorm";
    const int64_t nc = p->D / chunk<T>::n;
    const int Wk = knob(c, 0, 2, 1, 16), H = knob(c, 1, 0, 0, 15), R = knob(c, 2, 1, 1, 2);
    if (p->r || nc < 32)
        return false;
    int wpr = 1, nvt = 8;
    while (wpr <= 16 && (int64_t)32 * 8 * wpr < nc)
        wpr *= 2;
    if (R == 2)
        wpr *= 2, nvt = 4;
    if (wpr > 16)
        return false;
    const int threads = wpr == 1 ? 32 * Wk : 32 * wpr;
    if (threads * (nvt >= 8 ? 128 : 80) > 65536)
        return false;
    const void *k = x2_kernel<T>(nvt, H / 4 != 0);
    const int64_t pairs = (p->T + 1) / 2, groups = threads / (32 * wpr);
    const int64_t grid = (pairs + groups - 1) / groups;
    if (grid > 2147483647LL)
        return false;
    fwd4_args a;
    a.x = p->x, a.r = NULL, a.w = p->w, a.xw = NULL, a.y = p->y;
    a.sx = p->sx[0], a.sr = 0, a.sy = p->sy[0];
    a.T = p->T, a.D = p->D, a.eps = p->eps, a.lm = H % 4, a.sm = H / 4, a.pdl = 0;
    void *args[] = {&a, &wpr};
    (void)cudaLaunchKernel(k, dim3((unsigned)grid), dim3((unsigned)threads), args, 0, 0);
    *st = launch_status(fn, "rms_fwd_x2");
    return true;
}

template <typename T> static bool fwd_t(const rows_problem *p, flashc_status *st)
{
    /* The defaults (FLASHC_CUDA_RMS_FWD unset), both launched as programmatic dependents (L = 1,
     * rows4's round 1; bench/RESULTS.md, "RMSNorm: more threads a row, PDL"): the residual
     * forward v4 with P = 0, H = 0 (rows of two warps at 4096 bf16; 3.86 TB/s against 3.33 for
     * v1's rms_fwd_vec, "RMSNorm v4 / v5"); the plain forward v4 on four warps a row (R = 4)
     * for rows of >= 512 chunks (8 KiB: 4096 / 8192 bf16 measured at 1.09x / 1.02x v2's
     * rms_fwd_reg), v2 below that (not measured there; R would leave lanes idle). "v2" by
     * name keeps the old kernels for comparisons. */
    if (!getenv("FLASHC_CUDA_RMS_FWD")) {
        if (p->r) {
            const v4_cfg d = {4, {0, 2, 0, 0, -1, -1, 1, -1, -1}};
            return fwd_v4_t<T>(p, d, st);
        }
        if (p->D / chunk<T>::n < 512)
            return false;
        /* H = 19 (ld.global.nc loads, plain 16-byte stores; helper rows6): on the H200 on
         * 2026-12-03 (bench/gpu/s7_rows6.sh, tree main 41d580c) 68.3 us = 3.93 TB/s at bf16
         * 16384 x 4096, 1.24x F.rms_norm, against 71.1 us with H = 0 (.cs); 37.0 against 36.6 us
         * at 4096 x 8192 (within that run's spread). */
        const v4_cfg d = {4, {0, 2, 0, 19, -1, 4, 1, -1, -1}};
        return fwd_v4_t<T>(p, d, st);
    }
    const v4_cfg c = v4_env("FLASHC_CUDA_RMS_FWD");
    if (c.kind == 4)
        return fwd_v4_t<T>(p, c, st);
    if (c.kind == 5)
        return fwd_v5_t<T>(p, c, st);
    if (c.kind == 6)
        return fwd_x2_t<T>(p, c, st);
    return false;
}

extern "C" bool cuda_rms_fwd_v4(const rows_problem *p, flashc_status *st)
{
    switch (p->dtype) {
    case FLASHC_BF16: return fwd_t<__nv_bfloat16>(p, st);
    case FLASHC_F16: return fwd_t<__half>(p, st);
    default: return fwd_t<float>(p, st);
    }
}

template <typename T, int SM> static const void *bwd5_kernel_m(int nv, bool res)
{
    switch (nv) {
    case 1: return res ? (const void *)rms_bwd_tma<T, 1, true, SM> : (const void *)rms_bwd_tma<T, 1, false, SM>;
    case 2: return res ? (const void *)rms_bwd_tma<T, 2, true, SM> : (const void *)rms_bwd_tma<T, 2, false, SM>;
    default: return res ? (const void *)rms_bwd_tma<T, 4, true, SM> : (const void *)rms_bwd_tma<T, 4, false, SM>;
    }
}

template <typename T> static const void *bwd5_kernel(int nv, bool res, bool sm)
{
    (void)sm; /* the hinted store path: bfloat16 only (fwd4_kernel) */
    return bwd5_kernel_m<T, 0>(nv, res);
}

template <> const void *bwd5_kernel<__nv_bfloat16>(int nv, bool res, bool sm)
{
    if (sm && nv == 4)
        return res ? (const void *)rms_bwd_tma<__nv_bfloat16, 4, true, 1> : (const void *)rms_bwd_tma<__nv_bfloat16, 4, false, 1>;
    return bwd5_kernel_m<__nv_bfloat16, 0>(nv, res);
}

template <typename T, int SM> static const void *bwd4_kernel_m(int nv, bool res)
{
    switch (nv) {
    case 1: return res ? (const void *)rms_bwd_v4<T, 1, true, SM> : (const void *)rms_bwd_v4<T, 1, false, SM>;
    case 2: return res ? (const void *)rms_bwd_v4<T, 2, true, SM> : (const void *)rms_bwd_v4<T, 2, false, SM>;
    default: return res ? (const void *)rms_bwd_v4<T, 4, true, SM> : (const void *)rms_bwd_v4<T, 4, false, SM>;
    }
}

template <typename T> static const void *bwd4_kernel(int nv, bool res, bool sm)
{
    (void)sm; /* the hinted store path: bfloat16, 4 chunks a thread only (fwd4_kernel) */
    return bwd4_kernel_m<T, 0>(nv, res);
}

template <> const void *bwd4_kernel<__nv_bfloat16>(int nv, bool res, bool sm)
{
    if (sm && nv == 4)
        return res ? (const void *)rms_bwd_v4<__nv_bfloat16, 4, true, 1> : (const void *)rms_bwd_v4<__nv_bfloat16, 4, false, 1>;
    return bwd4_kernel_m<__nv_bfloat16, 0>(nv, res);
}

template <typename T> static bool bwd_t(const rows_bwd_problem *p, flashc_status *st)
{
    static const char fn[] = "flashc_rmsnorm_bwd";
    const v4_cfg c = v4_env("FLASHC_CUDA_RMS_BWD");
    if (c.kind != 5 && c.kind != 4)
        return false;
    const bool v4 = c.kind == 4; /* v4:N,B,H[,G] (no S); v5:N,S,B,H[,G] */
    const v4_cfg c5 = v4 ? v4_cfg{4, {c.k[0], 1, c.k[1], c.k[2], c.k[3], c.k[4], -1, -1, -1}} : c;
    const int L = v4 ? knob(c5, 5, 0, 0, 1) : 0; /* v4: PDL for the kernel and rms_dw_sum */
    const int N = knob(c5, 0, 4, 1, 4), B = knob(c5, 2, 0, 0, 64), H = knob(c5, 3, v4 ? 0 : 1, 0, 15);
    const int Gc = knob(c5, 4, 0, 1, 1 << 30);
    int S = knob(c5, 1, 3, 1, 8);
    const int64_t nc = p->D / chunk<T>::n;
    const bool res = p->dres != NULL;
    /* threads and chunks a thread: as pick_bwd (rows.cu), the most chunks (<= N) whose block
     * of >= 32 threads covers the row within the launch bound */
    int tpr = 0, nv = 0;
    for (int n = N >= 4 ? 4 : N >= 2 ? 2 : 1; n >= 1 && tpr == 0; n /= 2) {
        int t = 32;
        while ((int64_t)t * n < nc)
            t *= 2;
        if (t <= 1024 / n)
            tpr = t, nv = n;
    }
    if (tpr == 0)
        return false;
    const void *k = v4 ? bwd4_kernel<T>(nv, res, H / 4 != 0) : bwd5_kernel<T>(nv, res, H / 4 != 0);
    int dev = 0, per_sm = 0;
    dev_info d;
    size_t stat = 0;
    cudaError_t err = get_dev(&dev, &d);
    if (err == cudaSuccess && !v4 && d.major != 9)
        return false;
    if (err == cudaSuccess)
        err = kern_static_smem(k, dev, d, &stat);
    if (err != cudaSuccess) {
        *st = v4_query_failed(fn, err);
        return true;
    }
    /* v5: the slots; v4: the dw columns, tpr x nv chunks of float32 */
    const size_t slot = v4 ? (size_t)tpr * nv * chunk<T>::n * 4 : (size_t)(res ? 3 : 2) * (size_t)nc * 16;
    while (!v4 && S > 1 && (size_t)S * slot > (size_t)d.optin - stat)
        S--;
    if ((v4 ? 1 : (size_t)S) * slot > (size_t)d.optin - stat)
        return false;
    const size_t smem = (v4 ? 1 : (size_t)S) * slot;
    err = kern_per_sm(k, dev, tpr, smem, &per_sm);
    if (err != cudaSuccess) {
        *st = v4_query_failed(fn, err);
        return true;
    }
    if (per_sm <= 0)
        return false;
    int64_t G = (int64_t)d.sms * (B > 0 && B < per_sm ? B : per_sm);
    if (Gc > 0 && G > Gc)
        G = Gc;
    if (G > p->T)
        G = p->T;
    float *part = NULL;
    err = cuda_scratch_alloc((void **)&part, (size_t)G * (size_t)p->D * sizeof(float), 0);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        *st = flashc__fail(FLASHC_ERR_OUT_OF_MEMORY,
                           "%s: cannot allocate the %lld x %lld float32 dw partials: %s", fn,
                           (long long)G, (long long)p->D, cudaGetErrorString(err));
        return true;
    }
    bwd4_args a;
    a.x = p->x, a.w = p->w, a.dy = p->dy, a.dres = p->dres, a.dx = p->dx, a.part = part;
    a.sx = p->sx[0], a.sdy = p->sdy[0], a.sdres = res ? p->sdres[0] : 0, a.sdx = p->sdx[0];
    a.T = p->T, a.D = p->D, a.eps = p->eps, a.lm = H % 4, a.sm = H / 4;
    const bool pdl = L != 0 && d.major >= 9;
    a.pdl = pdl;
    void *args[] = {&a, &S};
    (void)launch_maybe_pdl(k, dim3((unsigned)G), dim3((unsigned)tpr), args, smem, 0, pdl);
    *st = launch_status(fn, v4 ? "rms_bwd_v4" : "rms_bwd_tma");
    if (*st == FLASHC_OK)
        *st = cuda_rms_dw_sum(part, G, p, pdl);
    cuda_scratch_free(part, 0);
    return true;
}

extern "C" bool cuda_rms_bwd_v4(const rows_bwd_problem *p, flashc_status *st)
{
    switch (p->dtype) {
    case FLASHC_BF16: return bwd_t<__nv_bfloat16>(p, st);
    case FLASHC_F16: return bwd_t<__half>(p, st);
    default: return bwd_t<float>(p, st);
    }
}
#endif /* FLASHC_ROWS_V4_KERNELS_ONLY */
