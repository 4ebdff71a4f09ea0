/*
 * rows.cu — the CUDA row ops: RMSNorm (plain and residual), its backward, SwiGLU and its
 * backward, in float32 / bfloat16 / float16 storage with float32 arithmetic.
 *
 * All of them move each byte once, so they are bandwidth kernels; what matters is bytes in
 * flight per SM and 16-byte accesses:
 *   rms_fwd_reg   (v2, plain RMSNorm on rows of < 512 chunks, and on any row under
 *                 FLASHC_CUDA_RMS_FWD=v2; wider rows and the residual variant take rows_v4.cu's
 *                 rms_fwd_v4 by default, the residual v1's rms_fwd_vec under v2) a lane group per row
 *                 (1..32 threads; a warp holds a 4096-wide bf16 row,
 *                 16 chunks a lane, packed in registers), reduced by shuffles with no block
 *                 barrier; rows wider than 512 chunks a block of up to 512 threads. x (and r)
 *                 read once, streaming stores of y (and the new residual).
 *   rms_bwd_reg   (v2) a persistent grid, a block of 32..1024 threads per row, each thread
 *                 owning up to 4 chunks of columns: w and its dw columns stay in registers
 *                 across the block's rows, the next row is loaded before the current row's
 *                 single barrier; the G x D float32 dw partials are summed by rms_dw_sum
 *                 (32 x 32 threads per 32 columns, a fixed order: deterministic, no atomics).
 *   rms_fwd_ring, rms_bwd_ring   (v3, opt-in: FLASHC_CUDA_RMS_FWD / FLASHC_CUDA_RMS_BWD, see
 *                 ring_env) the same work with the bytes in flight in shared memory: persistent
 *                 warps (forward) or blocks (backward) keep the next S - 1 rows in a ring of
 *                 cp.async slots while they work on the current one. Not yet the default: no
 *                 device has run them (written 2026-12-01 without device time).
 *   v6 (the backward's default since 2026-12-03; FLASHC_CUDA_RMS_BWD=v6[:B,P,L,S,H], see
 *                 bwd6_env; "v2" names the plain launch) rms_bwd_reg with a balanced grid,
 *                 PDL, rms_dw_sum4 (rms_dw_sum's sums with 16-deep float4 loads) and plain row
 *                 accesses; its knob P = 0 takes the partials from cudaMallocAsync's default
 *                 pool rather than the scratch pool (scratch.cu) every path takes.
 *   v4 / v5 (rows_v4.cu, opt-in by the same two variables: register rows with a persistent
 *                 prefetch and cache hints; bulk-copy mbarrier rings), reached through
 *                 cuda_rms_fwd_v4 / cuda_rms_bwd_v4 before the choices below.
 *   rms_fwd_vec, rms_bwd_vec + rms_dw_reduce   (v1) the first kernels, taken only with
 *                 FLASHC_CUDA_ROWS=v1 (to compare on one machine): one row per 128+ threads
 *                 with a block barrier and w re-read; dw summed by one thread per column over
 *                 the G partials (latency-bound).
 *   swiglu_*_vec  one thread per (row, chunk): gate and up chunks read in place from the
 *                 gate|up row.
 * Rows whose start or length is not a whole number of chunks take the element-wise kernels
 * (*_any), which accept any row stride (element stride 1).
 * Rows whose float32 sums leave the plain formula's range (|x| >~ 1e19, rows of tiny values,
 * sum dy w x overflowing) take a rare uniform branch in every kernel of v2 and v3: the forward
 * rescales by max |x| (rms_rescale), the backward redoes the row in float64 (rms_bwd_plain), as
 * the CPU does. v1's rms_fwd_vec rescales; v1's rms_bwd_vec does not: it stays as it was measured,
 * a comparison path only (the branch there cost it 64 bytes of spills).
 */
#include "rows_common.cuh"

#include "ptx.cuh"
#include "rows_rms.cuh"
#include "scratch.cuh"

#include <math.h>
#include <mutex>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NV = 4, MAX_TPR = 1024 };

/* ---- block reductions over the TPR threads of one row ------------------------------------ */

/* Sum of x over the threads with the same threadIdx.y (one row); blockDim.x = TPR >= 32.
 * red holds one slot per warp of the block; the trailing barrier lets red be reused. */
__device__ __forceinline__ float row_sum(float x, float *red)
{
    x = warp_sum(x);
    const int wpr = blockDim.x / 32, lane = threadIdx.x % 32, w = threadIdx.x / 32;
    if (lane == 0)
        red[threadIdx.y * wpr + w] = x;
    __syncthreads();
    float s = 0.0f;
    for (int i = 0; i < wpr; i++)
        s += red[threadIdx.y * wpr + i];
    __syncthreads();
    return s;
}

/* Max of x over the same threads as row_sum. */
__device__ __forceinline__ float row_max(float x, float *red)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    const int wpr = blockDim.x / 32, lane = threadIdx.x % 32, w = threadIdx.x / 32;
    if (lane == 0)
        red[threadIdx.y * wpr + w] = x;
    __syncthreads();
    float m = 0.0f;
    for (int i = 0; i < wpr; i++)
        m = fmaxf(m, red[threadIdx.y * wpr + i]);
    __syncthreads();
    return m;
}

/* Kernel choice, read from the environment at every call (a getenv costs nothing next to a
 * launch), so that one process -- a test, a bench -- can go through the variants:
 *   FLASHC_CUDA_ROWS=v1              the first RMSNorm / RoPE kernels (rms_fwd_vec, rms_bwd_vec)
 *   FLASHC_CUDA_RMS_FWD=v3[:W,S[,G]] the forward (plain and residual) on rms_fwd_ring: W warps a
 *                                    block, S shared-memory stages a warp, at most G blocks
 *   FLASHC_CUDA_RMS_BWD=v3[:N,S[,G]] the backward on rms_bwd_ring: N chunks a thread (1, 2, 4),
 *                                    S stages, at most G blocks
 * Anything else, or unset: the v2 kernels (the residual forward: v1's rms_fwd_vec, measured
 * faster than v2's there). G (0: SMs x occupancy) exists for the tests, to make each warp or
 * block go round its ring many times. */
static bool rows_v1(void)
{
    const char *e = getenv("FLASHC_CUDA_ROWS");
    return e && strcmp(e, "v1") == 0;
}

extern "C" bool cuda_rows_v1(void) { return rows_v1(); }

struct ring_cfg {
    bool on;
    int a, s, g; /* forward: warps a block; backward: chunks a thread; stages; grid cap */
};

/* What an unset variable means: "v2" (the kernels measured on the H200), or a v3 string to
 * make a ring the default once a device run has shown it faster; for the backward also a v6
 * string (bwd6_env). */
static const char rms_fwd_default[] = "v2";
/* The backward: v6 with every knob on (B, P, L, S and H): on the H200 on 2026-12-03 (tree
 * 1bd652c, bench/gpu/s6_rows5.sh) 114.8 us = 3.51 TB/s at bf16 16384 x 4096 against v2's 128.0
 * (1.11x) and v6 without H 118.8; 60.1 against 71.4 us at 4096 x 8192. */
static const char rms_bwd_default[] = "v6";

static ring_cfg ring_env(const char *name, int a0, int s0)
{
    ring_cfg c = {false, a0, s0, 0};
    const char *e = getenv(name);
    if (!e)
        e = strcmp(name, "FLASHC_CUDA_RMS_FWD") == 0 ? rms_fwd_default : rms_bwd_default;
    if (rows_v1() || !e || strncmp(e, "v3", 2) != 0 || (e[2] != '\0' && e[2] != ':'))
        return c;
    c.on = true;
    int a = a0, s = s0, g = 0;
    if (e[2] == ':' && sscanf(e + 3, "%d,%d,%d", &a, &s, &g) >= 1) {
        if (a >= 1 && a <= 32)
            c.a = a;
        if (s >= 2 && s <= 8)
            c.s = s;
        if (g > 0)
            c.g = g;
    }
    return c;
}

/* ---- RMSNorm forward ---------------------------------------------------------------------- */

struct rms_args {
    const void *x, *r, *w;
    void *xw, *y;
    int64_t sx, sr, sy; /* row strides, elements */
    int64_t T, D;
    float eps;
};

template <typename T>
__global__ void __launch_bounds__(MAX_TPR) rms_fwd_vec(rms_args a)
{
    constexpr int V = chunk<T>::n;
    __shared__ float red[32];
    const int64_t t = (int64_t)blockIdx.x * blockDim.y + threadIdx.y;
    const bool live = t < a.T;
    const int64_t nc = a.D / V;
    const T *x = (const T *)a.x + t * a.sx;
    const T *r = (const T *)a.r + t * a.sr;
    T *xw = (T *)a.xw + t * a.sx;
    float v[NV][V];
    float ss = 0.0f;
#pragma unroll
    for (int j = 0; j < NV; j++) {
        const int64_t c = threadIdx.x + (int64_t)j * blockDim.x;
        if (live && c < nc) {
            load_chunk_stream(x + c * V, v[j]);
            if (a.r) {
                float rv[V];
                load_chunk_stream(r + c * V, rv);
#pragma unroll
                for (int i = 0; i < V; i++)
                    v[j][i] = round_to<T>(v[j][i] + rv[i]); /* normalise what is stored */
                store_chunk(xw + c * V, v[j]);
            }
#pragma unroll
            for (int i = 0; i < V; i++)
                ss += v[j][i] * v[j][i];
        }
    }
    ss = row_sum(ss, red);
    float rstd = 1.0f / sqrtf(ss / (float)a.D + a.eps), div = 1.0f;
    const bool need = live && rms_needs_rescale(ss);
    if (__syncthreads_or(need)) { /* rare: see rms_rescale */
        float m = 0.0f, s2 = 0.0f;
#pragma unroll
        for (int j = 0; j < NV; j++)
            if (live && threadIdx.x + (int64_t)j * blockDim.x < nc)
#pragma unroll
                for (int i = 0; i < V; i++)
                    m = fmaxf(m, fabsf(v[j][i]));
        m = row_max(m, red);
#pragma unroll
        for (int j = 0; j < NV; j++)
            if (live && threadIdx.x + (int64_t)j * blockDim.x < nc)
#pragma unroll
                for (int i = 0; i < V; i++)
                    s2 += (v[j][i] / m) * (v[j][i] / m);
        s2 = row_sum(s2, red);
        if (need)
            rms_rescale(m, s2, a.D, a.eps, &rstd, &div);
    }
    T *y = (T *)a.y + t * a.sy;
    const T *w = (const T *)a.w;
#pragma unroll
    for (int j = 0; j < NV; j++) {
        const int64_t c = threadIdx.x + (int64_t)j * blockDim.x;
        if (live && c < nc) {
            float wv[V];
            load_chunk(w + c * V, wv);
            if (div != 1.0f)
#pragma unroll
                for (int i = 0; i < V; i++)
                    v[j][i] /= div;
#pragma unroll
            for (int i = 0; i < V; i++)
                v[j][i] = v[j][i] * rstd * wv[i];
            store_chunk(y + c * V, v[j]);
        }
    }
}

/* Any row stride: one block per row, two passes (the second re-reads the row from L2). */
template <typename T> __global__ void rms_fwd_any(rms_args a)
{
    __shared__ float red[32];
    const int64_t t = blockIdx.x;
    const T *x = (const T *)a.x + t * a.sx;
    const T *r = (const T *)a.r + t * a.sr;
    T *xw = (T *)a.xw + t * a.sx;
    float ss = 0.0f;
    for (int64_t d = threadIdx.x; d < a.D; d += blockDim.x) {
        float v = elem<T>::load(x[d]);
        if (a.r) {
            const T s = elem<T>::store(v + elem<T>::load(r[d]));
            xw[d] = s;
            v = elem<T>::load(s);
        }
        ss += v * v;
    }
    ss = row_sum(ss, red);
    float rstd = 1.0f / sqrtf(ss / (float)a.D + a.eps), div = 1.0f;
    const T *xs = a.r ? xw : x; /* each thread re-reads only what it wrote itself */
    if (rms_needs_rescale(ss)) { /* rare (rms_rescale); the same for the whole block */
        float m = 0.0f, s2 = 0.0f;
        for (int64_t d = threadIdx.x; d < a.D; d += blockDim.x)
            m = fmaxf(m, fabsf(elem<T>::load(xs[d])));
        m = row_max(m, red);
        for (int64_t d = threadIdx.x; d < a.D; d += blockDim.x) {
            const float u = elem<T>::load(xs[d]) / m;
            s2 += u * u;
        }
        s2 = row_sum(s2, red);
        rms_rescale(m, s2, a.D, a.eps, &rstd, &div);
    }
    T *y = (T *)a.y + t * a.sy;
    const T *w = (const T *)a.w;
    for (int64_t d = threadIdx.x; d < a.D; d += blockDim.x) {
        float v = elem<T>::load(xs[d]);
        if (div != 1.0f)
            v /= div;
        y[d] = elem<T>::store(v * rstd * elem<T>::load(w[d]));
    }
}

/* The register-resident forward (v2). TPR threads per row (a power of two, 1..512), each
 * holding NVT chunks of its row packed in registers; rows of TPR <= 32 threads are reduced by
 * shuffles inside their lane group, with no block barrier, so every warp streams its own row
 * and an SM keeps ~20 rows (160 KB at D = 4096 bf16) of loads in flight. Wider rows (TPR > 32)
 * take a whole block and one barrier. x and r are read once (streaming), w through L1, y and
 * the new residual are written with streaming stores. */
template <typename T, int NVT, bool RES>
__global__ void __launch_bounds__(NVT >= 16 ? 64 : 512, NVT < 16 ? 1 : !RES ? 10 : sizeof(T) == 4 ? 1 : 8) rms_fwd_reg(rms_args a, int tpr)
{
    constexpr int V = chunk<T>::n;
    __shared__ float red[16];
    const int lane = threadIdx.x & (tpr - 1);
    const int64_t t = (int64_t)blockIdx.x * (blockDim.x / tpr) + threadIdx.x / tpr;
    const bool live = t < a.T;
    const int64_t nc = a.D / V;
    const T *x = (const T *)a.x + t * a.sx;
    uint4 u[NVT];
#pragma unroll
    for (int j = 0; j < NVT; j++) {
        const int64_t c = lane + (int64_t)j * tpr;
        if (live && c < nc)
            u[j] = ld_stream(x + c * V);
    }
    if (RES) {
        const T *r = (const T *)a.r + t * a.sr;
        T *xw = (T *)a.xw + t * a.sx;
#pragma unroll
        for (int j = 0; j < NVT; j++) {
            const int64_t c = lane + (int64_t)j * tpr;
            if (live && c < nc) {
                float xv[V], rv[V];
                unpack<T>(u[j], xv);
                unpack<T>(ld_stream(r + c * V), rv);
#pragma unroll
                for (int i = 0; i < V; i++)
                    xv[i] += rv[i];
                u[j] = pack<T>(xv); /* normalise what is stored: the rounded sum */
                st_stream(xw + c * V, u[j]);
            }
        }
    }
    float ss = 0.0f;
#pragma unroll
    for (int j = 0; j < NVT; j++) {
        const int64_t c = lane + (int64_t)j * tpr;
        if (live && c < nc) {
            float v[V];
            unpack<T>(u[j], v);
#pragma unroll
            for (int i = 0; i < V; i++)
                ss += v[i] * v[i];
        }
    }
    if (tpr <= 32) {
        for (int o = tpr / 2; o > 0; o >>= 1) /* xor < tpr stays inside the row's lane group */
            ss += __shfl_xor_sync(0xffffffffu, ss, o);
    } else {
        ss = warp_sum(ss);
        if (threadIdx.x % 32 == 0)
            red[threadIdx.x / 32] = ss;
        __syncthreads();
        ss = 0.0f;
        const int w0 = (threadIdx.x / tpr) * (tpr / 32); /* the row's first warp */
        for (int i = 0; i < tpr / 32; i++)
            ss += red[w0 + i];
    }
    float rstd = 1.0f / sqrtf(ss / (float)a.D + a.eps), div = 1.0f;
    const bool need = live && rms_needs_rescale(ss);
    if (tpr <= 32 ? __any_sync(0xffffffffu, need) : __syncthreads_or(need)) {
        /* rare: see rms_rescale; the same reductions for max |x| and sum (x / max)^2 */
        __shared__ float red2[16];
        float m = 0.0f, s2 = 0.0f;
#pragma unroll
        for (int j = 0; j < NVT; j++)
            if (live && lane + (int64_t)j * tpr < nc) {
                float v[V];
                unpack<T>(u[j], v);
#pragma unroll
                for (int i = 0; i < V; i++)
                    m = fmaxf(m, fabsf(v[i]));
            }
        if (tpr <= 32) {
            for (int o = tpr / 2; o > 0; o >>= 1)
                m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        } else { /* one row a block */
#pragma unroll
            for (int o = 16; o > 0; o >>= 1)
                m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
            if (threadIdx.x % 32 == 0)
                red2[threadIdx.x / 32] = m;
            __syncthreads();
            m = 0.0f;
            for (int i = 0; i < tpr / 32; i++)
                m = fmaxf(m, red2[i]);
        }
#pragma unroll
        for (int j = 0; j < NVT; j++)
            if (live && lane + (int64_t)j * tpr < nc) {
                float v[V];
                unpack<T>(u[j], v);
#pragma unroll
                for (int i = 0; i < V; i++)
                    s2 += (v[i] / m) * (v[i] / m);
            }
        if (tpr <= 32) {
            for (int o = tpr / 2; o > 0; o >>= 1)
                s2 += __shfl_xor_sync(0xffffffffu, s2, o);
        } else {
            s2 = warp_sum(s2);
            __syncthreads(); /* every thread has read red2's maxima */
            if (threadIdx.x % 32 == 0)
                red2[threadIdx.x / 32] = s2;
            __syncthreads();
            s2 = 0.0f;
            for (int i = 0; i < tpr / 32; i++)
                s2 += red2[i];
        }
        if (need)
            rms_rescale(m, s2, a.D, a.eps, &rstd, &div);
    }
    T *y = (T *)a.y + t * a.sy;
    const T *w = (const T *)a.w;
#pragma unroll
    for (int j = 0; j < NVT; j++) {
        const int64_t c = lane + (int64_t)j * tpr;
        if (live && c < nc) {
            float v[V], wv[V];
            launder(u[j]); /* widen again rather than hold the widened row */
            unpack<T>(u[j], v);
            unpack<T>(ld_reuse(w + c * V), wv);
            if (div != 1.0f)
#pragma unroll
                for (int i = 0; i < V; i++)
                    v[i] /= div;
#pragma unroll
            for (int i = 0; i < V; i++)
                v[i] = v[i] * rstd * wv[i];
            st_stream(y + c * V, pack<T>(v));
        }
    }
}

/* ---- the ring kernels (v3): rows staged in shared memory by cp.async ----------------------
 * v2 holds the bytes in flight in registers, and those bound them: a forward warp loads its
 * row, reduces, stores and exits, so the SM's loads come in bursts as blocks turn over; a
 * backward block holds its prefetched row beside w and its dw columns (158 registers, 3 rows
 * in flight a SM). Here persistent warps (forward) or blocks (backward) keep the next S - 1
 * rows in flight in a ring of S shared-memory slots while they work on the current one, so the
 * bytes in flight cost shared memory, not registers, and never stop. Each thread copies, and
 * later reads, only its own chunks of a slot, so the data needs no barrier: the thread's
 * cp.async.wait_group makes its own copies visible to it. A slot is overwritten (the copy of
 * row + S - 1) only after the thread has consumed what it read from it for the row before. */

/* Waits until at most n (0..7, at run time) of this thread's cp.async groups are pending. */
__device__ __forceinline__ void cp_async_wait_n(int n)
{
    switch (n) {
    case 0: ptx_cp_async_wait<0>(); break;
    case 1: ptx_cp_async_wait<1>(); break;
    case 2: ptx_cp_async_wait<2>(); break;
    case 3: ptx_cp_async_wait<3>(); break;
    case 4: ptx_cp_async_wait<4>(); break;
    case 5: ptx_cp_async_wait<5>(); break;
    case 6: ptx_cp_async_wait<6>(); break;
    default: ptx_cp_async_wait<7>(); break;
    }
}

/* Forward ring: blocks of W warps (blockDim.x = 32 W), warp g of the grid taking rows g, g +
 * Wg, g + 2 Wg, ... (Wg warps in all). Slot layout: nc chunks of x, then (RES) nc chunks of r;
 * lane l owns chunks l, l + 32, ... Shared memory: W * S * slot chunks (dynamic). */
template <typename T, bool RES>
__global__ void __launch_bounds__(1024) rms_fwd_ring(rms_args a, int S)
{
    constexpr int V = chunk<T>::n;
    extern __shared__ uint4 ring[];
    const int lane = threadIdx.x % 32, wid = threadIdx.x / 32;
    const int64_t nc = a.D / V, slot = RES ? 2 * nc : nc;
    uint4 *mine = ring + (int64_t)wid * S * slot;
    const int64_t Wg = (int64_t)gridDim.x * (blockDim.x / 32);
    const int64_t t0 = (int64_t)blockIdx.x * (blockDim.x / 32) + wid;
    auto issue = [&](int64_t t, int s) {
        if (t < a.T) {
            const T *x = (const T *)a.x + t * a.sx, *r = (const T *)a.r + t * a.sr;
            uint4 *d = mine + s * slot;
            for (int64_t c = lane; c < nc; c += 32) {
                ptx_cp_async_16(ptx_smem_addr(d + c), x + c * V, true);
                if (RES)
                    ptx_cp_async_16(ptx_smem_addr(d + nc + c), r + c * V, true);
            }
        }
        ptx_cp_async_commit(); /* empty groups too: the count stays one a row */
    };
    for (int s = 0; s < S - 1; s++)
        issue(t0 + s * Wg, s);
    int s = 0;
    for (int64_t t = t0; t < a.T; t += Wg) {
        issue(t + (S - 1) * Wg, s == 0 ? S - 1 : s - 1);
        cp_async_wait_n(S - 1); /* row t's group has landed */
        const uint4 *d = mine + s * slot;
        T *xw = (T *)a.xw + t * a.sx;
        float ss = 0.0f;
#pragma unroll 4
        for (int64_t c = lane; c < nc; c += 32) {
            uint4 u = d[c];
            if (RES) {
                u = res_sum<T>(u, d[nc + c]);
                st_stream(xw + c * V, u);
            }
            float v[V];
            unpack<T>(u, v);
#pragma unroll
            for (int i = 0; i < V; i++)
                ss += v[i] * v[i];
        }
        ss = warp_sum(ss); /* the butterfly leaves every lane the same bits: uniform below */
        float rstd = 1.0f / sqrtf(ss / (float)a.D + a.eps), div = 1.0f;
        if (rms_needs_rescale(ss)) { /* rare: see rms_rescale; the row again from the slot */
            float m = 0.0f, s2 = 0.0f;
            for (int64_t c = lane; c < nc; c += 32) {
                float v[V];
                unpack<T>(RES ? res_sum<T>(d[c], d[nc + c]) : d[c], v);
#pragma unroll
                for (int i = 0; i < V; i++)
                    m = fmaxf(m, fabsf(v[i]));
            }
#pragma unroll
            for (int o = 16; o > 0; o >>= 1)
                m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
            for (int64_t c = lane; c < nc; c += 32) {
                float v[V];
                unpack<T>(RES ? res_sum<T>(d[c], d[nc + c]) : d[c], v);
#pragma unroll
                for (int i = 0; i < V; i++)
                    s2 += (v[i] / m) * (v[i] / m);
            }
            s2 = warp_sum(s2);
            rms_rescale(m, s2, a.D, a.eps, &rstd, &div);
        }
        T *y = (T *)a.y + t * a.sy;
        const T *w = (const T *)a.w;
#pragma unroll 4
        for (int64_t c = lane; c < nc; c += 32) {
            float v[V], wv[V];
            unpack<T>(RES ? res_sum<T>(d[c], d[nc + c]) : d[c], v);
            unpack<T>(ld_reuse(w + c * V), wv);
            if (div != 1.0f)
#pragma unroll
                for (int i = 0; i < V; i++)
                    v[i] /= div;
#pragma unroll
            for (int i = 0; i < V; i++)
                v[i] = v[i] * rstd * wv[i];
            st_stream(y + c * V, pack<T>(v));
        }
        s = s + 1 == S ? 0 : s + 1;
    }
    ptx_cp_async_wait<0>(); /* no copy outlives the block (only empty groups can be left) */
}

/* ---- launch set-up of the ring kernels ----------------------------------------------------
 * Cached per (kernel, device[, threads, shared memory]): the occupancy query and the function
 * attribute calls cost host time on every call otherwise. A mutex, as calls may come from
 * several host threads; the table is small (a handful of shapes per process is the norm) and
 * a full table only means the queries are made again. */
struct occ_entry {
    const void *k;
    int dev, threads;
    size_t smem;
    int v;
};
static std::mutex occ_mu;
static occ_entry occ_tab[64];
static int occ_n;

static bool occ_find(const void *k, int dev, int threads, size_t smem, int *v)
{
    for (int i = 0; i < occ_n; i++)
        if (occ_tab[i].k == k && occ_tab[i].dev == dev && occ_tab[i].threads == threads &&
            occ_tab[i].smem == smem) {
            *v = occ_tab[i].v;
            return true;
        }
    return false;
}

static void occ_put(const void *k, int dev, int threads, size_t smem, int v)
{
    if (occ_n < 64)
        occ_tab[occ_n++] = occ_entry{k, dev, threads, smem, v};
}

/* The most dynamic shared memory kernel k can take on device dev (the opt-in limit less its
 * static shared memory); the kernel's limit is raised to it, so any launch up to it works. */
static cudaError_t ring_max_smem(const void *k, int dev, size_t *out)
{
    std::lock_guard<std::mutex> lock(occ_mu);
    int v = 0;
    if (occ_find(k, dev, -1, 0, &v)) {
        *out = (size_t)v;
        return cudaSuccess;
    }
    int optin = 0;
    cudaFuncAttributes fa;
    cudaError_t err = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    if (err == cudaSuccess)
        err = cudaFuncGetAttributes(&fa, k);
    if (err == cudaSuccess) {
        v = optin - (int)fa.sharedSizeBytes;
        err = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, v);
    }
    if (err == cudaSuccess) {
        occ_put(k, dev, -1, 0, v);
        *out = (size_t)v;
    }
    return err;
}

/* Blocks of kernel k per SM at (threads, smem); call ring_max_smem first. */
static cudaError_t ring_per_sm(const void *k, int dev, int threads, size_t smem, int *out)
{
    std::lock_guard<std::mutex> lock(occ_mu);
    if (occ_find(k, dev, threads, smem, out))
        return cudaSuccess;
    const cudaError_t err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(out, k, threads, smem);
    if (err == cudaSuccess)
        occ_put(k, dev, threads, smem, *out);
    return err;
}

static cudaError_t dev_sms(int *dev, int *sms)
{
    cudaError_t err = cudaGetDevice(dev);
    if (err == cudaSuccess)
        err = cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, *dev);
    return err;
}

static flashc_status query_failed(const char *fn, cudaError_t err)
{
    (void)cudaGetLastError();
    return flashc__fail(FLASHC_ERR_DEVICE, "%s: device query failed: %s", fn, cudaGetErrorString(err));
}

/* The forward ring (rms_fwd_ring) for rows of nc >= 32 chunks: c.a warps a block (fewer when
 * their slots do not fit the shared memory), c.s stages. false: it does not fit (the caller
 * takes v2); otherwise *st is the launch's status. */
template <typename T> static bool launch_fwd_ring(const rms_args &a, int64_t nc, const ring_cfg &c, flashc_status *st)
{
    static const char fn[] = "flashc_rmsnorm";
    const bool res = a.r != NULL;
    const void *k = res ? (const void *)rms_fwd_ring<T, true> : (const void *)rms_fwd_ring<T, false>;
    const size_t slot = (size_t)(res ? 2 : 1) * (size_t)nc * 16;
    int dev = 0, sms = 0, per_sm = 0;
    size_t maxs = 0;
    cudaError_t err = dev_sms(&dev, &sms);
    if (err == cudaSuccess)
        err = ring_max_smem(k, dev, &maxs);
    if (err != cudaSuccess) {
        *st = query_failed(fn, err);
        return true;
    }
    int W = c.a;
    while (W > 0 && (size_t)W * (size_t)c.s * slot > maxs)
        W--;
    if (W == 0)
        return false;
    const size_t smem = (size_t)W * (size_t)c.s * slot;
    err = ring_per_sm(k, dev, 32 * W, smem, &per_sm);
    if (err != cudaSuccess) {
        *st = query_failed(fn, err);
        return true;
    }
    if (per_sm <= 0)
        return false;
    int64_t grid = (int64_t)sms * per_sm;
    if (c.g > 0 && grid > c.g)
        grid = c.g;
    if (grid > (a.T + W - 1) / W)
        grid = (a.T + W - 1) / W;
    int S = c.s;
    void *args[] = {(void *)&a, &S};
    (void)cudaLaunchKernel(k, dim3((unsigned)grid), dim3(32 * W), args, smem, 0); /* launch_status */
    *st = launch_status(fn, "rms_fwd_ring");
    return true;
}

/* Threads per row and chunks per thread of rms_fwd_reg for nc chunks (tpr = 0: no fit):
 * narrow rows get a lane group of their size, rows up to 512 chunks one warp with up to 16
 * chunks a lane, wider ones up to 512 threads of 8 chunks. */
static void pick_fwd(int64_t nc, int *tpr, int *nv)
{
    int t = 1, n = 1;
    if (nc <= 32) {
        while (t < nc)
            t *= 2;
    } else if (nc <= 512) {
        t = 32;
        while ((int64_t)32 * n < nc)
            n *= 2;
    } else {
        n = 8;
        while (t < 512 && (int64_t)t * 8 < nc)
            t *= 2;
        if ((int64_t)t * 8 < nc)
            t = 0;
    }
    *tpr = t, *nv = n;
}

/* v1 threads per row for nc chunks: the smallest power of two >= 32 with nc <= NV * TPR. */
static int pick_tpr(int64_t nc)
{
    int tpr = 32;
    while (tpr < MAX_TPR && (int64_t)tpr * NV < nc)
        tpr *= 2;
    return (int64_t)tpr * NV >= nc ? tpr : 0;
}

/* Blocks of 64 threads for rows of <= 32 (two warps, each on its own rows): the SM's register
 * file then holds the most warps (at 112 registers, 18 rather than 16 with 128 threads). */
template <typename T, int NVT> static void launch_fwd_reg(const rms_args &a, int tpr)
{
    const int block = tpr > 64 ? tpr : 64;
    const int rows = block / tpr;
    const int64_t grid = (a.T + rows - 1) / rows;
    if (a.r)
        rms_fwd_reg<T, NVT, true><<<(unsigned)grid, block>>>(a, tpr);
    else
        rms_fwd_reg<T, NVT, false><<<(unsigned)grid, block>>>(a, tpr);
}

template <typename T> static flashc_status rms_fwd_t(const rows_problem *p)
{
    rms_args a;
    a.x = p->x, a.r = p->r, a.w = p->w, a.xw = p->xw, a.y = p->y;
    a.sx = p->sx[0], a.sr = p->r ? p->sr[0] : 0, a.sy = p->sy[0];
    a.T = p->T, a.D = p->D, a.eps = p->eps;
    const size_t es = sizeof(T);
    const int64_t nc = p->D / chunk<T>::n;
    const bool aligned = vec_ok(p->x, a.sx, p->D, es) && vec_ok(p->w, 0, p->D, es) &&
                         vec_ok(p->y, a.sy, p->D, es) && (!p->r || vec_ok(p->r, a.sr, p->D, es));
    /* The residual variant: by default rows_v4.cu's rms_fwd_v4 (taken in cuda_rms_fwd_v4 above:
     * 138-139 us on the H200 at bf16 16384 x 4096); with FLASHC_CUDA_RMS_FWD=v2, v1's rms_fwd_vec
     * below (161-163 us; rms_fwd_reg<..., true> took 172 us, "GPU row ops v2"). The plain
     * forward: rms_fwd_v4 by default on rows of >= 512 chunks (70-71 us against rms_fwd_reg's
     * 77; rows_v4.cu fwd_t), rms_fwd_reg below and under v2. */
    flashc_status st4;
    if (aligned && !rows_v1() && cuda_rms_fwd_v4(p, &st4)) /* the defaults above; v4 / v5 / v6 */
        return st4;
    const ring_cfg rc = ring_env("FLASHC_CUDA_RMS_FWD", 4, 3);
    if (aligned && rc.on && nc >= 32) {
        flashc_status st;
        if (launch_fwd_ring<T>(a, nc, rc, &st))
            return st;
    }
    if (aligned && !rows_v1() && !p->r) {
        int tpr, nv;
        pick_fwd(nc, &tpr, &nv);
        if (tpr > 0) {
            switch (nv) {
            case 1: launch_fwd_reg<T, 1>(a, tpr); break;
            case 2: launch_fwd_reg<T, 2>(a, tpr); break;
            case 4: launch_fwd_reg<T, 4>(a, tpr); break;
            case 8: launch_fwd_reg<T, 8>(a, tpr); break;
            default: launch_fwd_reg<T, 16>(a, tpr); break;
            }
            return launch_status("flashc_rmsnorm", "rms_fwd_reg");
        }
    }
    const int tpr = pick_tpr(nc);
    if (aligned && tpr > 0) {
        const int rows = tpr >= 256 ? 1 : 256 / tpr; /* >= 256 threads per block */
        const dim3 block(tpr, rows);
        const int64_t grid = (p->T + rows - 1) / rows;
        rms_fwd_vec<T><<<(unsigned)grid, block>>>(a);
        return launch_status("flashc_rmsnorm", "rms_fwd_vec");
    }
    rms_fwd_any<T><<<(unsigned)p->T, 256>>>(a);
    return launch_status("flashc_rmsnorm", "rms_fwd_any");
}

/* ---- RMSNorm backward --------------------------------------------------------------------- */

struct rms_bwd_args {
    const void *x, *w, *dy, *dres;
    void *dx;
    float *part; /* (G, D) float32 dw partials */
    int64_t sx, sdy, sdres, sdx;
    int64_t T, D;
    float eps;
    int pdl; /* rms_bwd_reg: launched as a programmatic dependent (v6's knob L, or v2:1) */
};

/* At most BWD_TPR threads: dw, x and g = dy w of NV chunks stay in registers; w and, for dw,
 * dy are re-read from L1, and the launch bound caps the registers at 128 (a first version kept
 * w in registers too: 165 registers, 3 blocks of 128 threads per SM, fewer bytes in flight
 * between the row's two barriers; not measured on the device, a prediction). */
enum { BWD_TPR = 256 };

template <typename T>
__global__ void __launch_bounds__(BWD_TPR, 2) rms_bwd_vec(rms_bwd_args a)
{
    constexpr int V = chunk<T>::n;
    __shared__ float red[64];
    const int64_t nc = a.D / V;
    const T *w = (const T *)a.w;
    float dw[NV][V];
#pragma unroll
    for (int j = 0; j < NV; j++)
#pragma unroll
        for (int i = 0; i < V; i++)
            dw[j][i] = 0.0f;
    for (int64_t t = blockIdx.x; t < a.T; t += gridDim.x) {
        const T *x = (const T *)a.x + t * a.sx, *dy = (const T *)a.dy + t * a.sdy;
        float xv[NV][V], gv[NV][V];
        float ss = 0.0f, dot = 0.0f;
#pragma unroll
        for (int j = 0; j < NV; j++) {
            const int64_t c = threadIdx.x + (int64_t)j * blockDim.x;
            if (c < nc) {
                load_chunk_stream(x + c * V, xv[j]);
                load_chunk_stream(dy + c * V, gv[j]);
                float wv[V];
                load_chunk(w + c * V, wv); /* L1-resident: re-read each row, not held */
#pragma unroll
                for (int i = 0; i < V; i++) {
                    ss += xv[j][i] * xv[j][i];
                    gv[j][i] *= wv[i]; /* g = dy w from here on; dy * x for dw below */
                    dot += gv[j][i] * xv[j][i];
                }
            }
        }
        block_sum2(ss, dot, red); /* the two sums in one reduction */
        __syncthreads();
        const float rstd = 1.0f / sqrtf(ss / (float)a.D + a.eps);
        const float cc = rstd * rstd * dot / (float)a.D;
        T *dx = (T *)a.dx + t * a.sdx;
#pragma unroll
        for (int j = 0; j < NV; j++) {
            const int64_t c = threadIdx.x + (int64_t)j * blockDim.x;
            if (c < nc) {
                float o[V], dr[V], dyv[V];
                if (a.dres)
                    load_chunk_stream((const T *)a.dres + t * a.sdres + c * V, dr);
                /* dy again for dw (L1/L2: just read), rather than a third register array */
                load_chunk((const T *)a.dy + t * a.sdy + c * V, dyv);
#pragma unroll
                for (int i = 0; i < V; i++) {
                    dw[j][i] += dyv[i] * xv[j][i] * rstd;
                    o[i] = rstd * (gv[j][i] - xv[j][i] * cc) + (a.dres ? dr[i] : 0.0f);
                }
                store_chunk(dx + c * V, o);
            }
        }
    }
    rms_bwd_store_part<V, NV>(a.part + (int64_t)blockIdx.x * a.D, nc, dw);
}

/* Any row stride: the same persistent grid, element by element, the dw partial accumulated in
 * the block's own row of part (each thread owns its columns: no races). */
template <typename T> __global__ void rms_bwd_any(rms_bwd_args a)
{
    __shared__ float red[64];
    float *part = a.part + (int64_t)blockIdx.x * a.D;
    for (int64_t d = threadIdx.x; d < a.D; d += blockDim.x)
        part[d] = 0.0f;
    const T *w = (const T *)a.w;
    for (int64_t t = blockIdx.x; t < a.T; t += gridDim.x) {
        const T *x = (const T *)a.x + t * a.sx, *dy = (const T *)a.dy + t * a.sdy;
        float ss = 0.0f, dot = 0.0f;
        for (int64_t d = threadIdx.x; d < a.D; d += blockDim.x) {
            const float xv = elem<T>::load(x[d]);
            ss += xv * xv;
            dot += elem<T>::load(dy[d]) * elem<T>::load(w[d]) * xv;
        }
        block_sum2(ss, dot, red);
        __syncthreads();
        T *dx = (T *)a.dx + t * a.sdx;
        if (rms_bwd_plain(ss, dot)) {
            const float rstd = 1.0f / sqrtf(ss / (float)a.D + a.eps);
            const float cc = rstd * rstd * dot / (float)a.D;
            for (int64_t d = threadIdx.x; d < a.D; d += blockDim.x) {
                const float xv = elem<T>::load(x[d]), g = elem<T>::load(dy[d]);
                float o = rstd * (g * elem<T>::load(w[d]) - xv * cc);
                if (a.dres)
                    o += elem<T>::load(((const T *)a.dres)[t * a.sdres + d]);
                dx[d] = elem<T>::store(o);
                part[d] += g * (xv * rstd);
            }
        } else { /* rare: the row in float64 (rms_bwd_plain) */
            __shared__ double redd[64];
            double ssd = 0.0, dotd = 0.0;
            for (int64_t d = threadIdx.x; d < a.D; d += blockDim.x) {
                const double xv = elem<T>::load(x[d]);
                ssd += xv * xv;
                dotd += (double)elem<T>::load(dy[d]) * elem<T>::load(w[d]) * xv;
            }
            block_sum2_d(ssd, dotd, redd);
            const rms_bwd_d q = rms_bwd_coef_d(ssd, dotd, a.D, a.eps);
            for (int64_t d = threadIdx.x; d < a.D; d += blockDim.x) {
                const float xv = elem<T>::load(x[d]), g = elem<T>::load(dy[d]), wv = elem<T>::load(w[d]);
                float rv = a.dres ? elem<T>::load(((const T *)a.dres)[t * a.sdres + d]) : 0.0f, o;
                rms_bwd_chunk_d<1>(q, &xv, &g, &wv, a.dres ? &rv : NULL, &part[d], &o);
                dx[d] = elem<T>::store(o);
            }
            __syncthreads(); /* redd is written again only after every thread has read it */
        }
    }
}

/* dw[d] = sum over g < G of part[g][d], g in order (v1: one thread per column, G dependent
 * steps; latency-bound, measured at most of the v1 backward's time). */
template <typename T>
__global__ void rms_dw_reduce(const float *part, int64_t G, int64_t D, T *dw, int64_t sdw)
{
    const int64_t d = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (d >= D)
        return;
    float s = 0.0f;
    for (int64_t g = 0; g < G; g++)
        s += part[g * D + d];
    dw[d * sdw] = elem<T>::store(s);
}

/* ---- what rms_bwd_reg (v2) and rms_bwd_ring (v3) share: thread k owns chunks
 * c = k + j blockDim.x (j < NVT, c < nc) of every row, w and its dw columns in registers; the
 * row sums (block_sum2) and the partial store (rms_bwd_store_part) are rows_rms.cuh's, shared
 * with v1 and rows_v4.cu (the same order of additions, so the same bits as before). ---- */

/* One chunk of V columns in float32 (the row is plain, rms_bwd_plain): dw += dy x rstd and
 * o = dx = rstd (dy w - x cc) (+ dres: rv, read only when RES). */
template <int V, bool RES>
static __device__ __forceinline__ void rms_bwd_chunk(float rstd, float cc, const float (&xv)[V],
                                                     const float (&dv)[V], const float (&wv)[V],
                                                     const float (&rv)[V], float (&dw)[V],
                                                     float (&o)[V])
{
#pragma unroll
    for (int i = 0; i < V; i++) {
        dw[i] += dv[i] * (xv[i] * rstd);
        o[i] = rstd * (dv[i] * wv[i] - xv[i] * cc) + (RES ? rv[i] : 0.0f);
    }
}

/* The register-resident backward (v2): a persistent grid of G blocks of TPR threads, one row at
 * a time per block, each thread owning NVT chunks of columns. w stays in registers for the
 * whole kernel, the thread's dw columns accumulate in registers across the block's rows, and
 * the next row's x and dy (and dres) are loaded before the current row's reduction, so loads
 * stay in flight across its barrier. One barrier a row: the two sums go to alternating halves
 * of red (a thread can only reach row k + 2, and overwrite red[k & 1], after every thread has
 * passed row k + 1's barrier, i.e. finished reading row k's sums). dx: one pass from the
 * registers; dw: one G x D float32 partial write, summed by rms_dw_sum. */
template <typename T, int NVT, bool RES, bool PL = false>
__global__ void __launch_bounds__(NVT >= 4 ? 256 : NVT == 2 ? 512 : 1024) rms_bwd_reg(rms_bwd_args a)
{
    /* PL (v6's knob H = 1): x, dy, dres by ld.global.nc and dx by plain stores rather than the
     * evict-first ld.global.cs / st.global.cs (torch.add, 4.19 TB/s on these bytes, uses plain
     * accesses; our flat .cs copy of them 3.90) */
    auto ld_x = [](const void *q) { return PL ? ld_reuse(q) : ld_stream(q); };
    auto st_x = [](void *q, const uint4 &u) {
        if (PL)
            st_plain(q, u);
        else
            st_stream(q, u);
    };
    constexpr int V = chunk<T>::n;
    __shared__ float red[2][64];
    const int64_t nc = a.D / V;
    const T *w = (const T *)a.w;
    uint4 wr[NVT], xr[NVT], dr[NVT], gr[NVT];
    float dw[NVT][V];
    if (a.pdl)
        ptx_griddep_wait(); /* the stream's previous kernel has ended (rows_v4.cu, fwd4_args) */
#pragma unroll
    for (int j = 0; j < NVT; j++) {
        const int64_t c = threadIdx.x + (int64_t)j * blockDim.x;
        if (c < nc)
            wr[j] = ld_reuse(w + c * V);
#pragma unroll
        for (int i = 0; i < V; i++)
            dw[j][i] = 0.0f;
    }
    int64_t t = blockIdx.x;
    auto load_row = [&](int64_t r) {
#pragma unroll
        for (int j = 0; j < NVT; j++) {
            const int64_t c = threadIdx.x + (int64_t)j * blockDim.x;
            if (c < nc) {
                xr[j] = ld_x((const T *)a.x + r * a.sx + c * V);
                dr[j] = ld_x((const T *)a.dy + r * a.sdy + c * V);
                if (RES)
                    gr[j] = ld_x((const T *)a.dres + r * a.sdres + c * V);
            }
        }
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
                unpack<T>(xc[j], xv), unpack<T>(dc[j], dv), unpack<T>(wr[j], wv);
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
                    launder(xc[j]), launder(dc[j]), launder(wr[j]); /* as in rms_fwd_reg */
                    unpack<T>(xc[j], xv), unpack<T>(dc[j], dv), unpack<T>(wr[j], wv);
                    if (RES)
                        unpack<T>(rc[j], rv);
                    rms_bwd_chunk<V, RES>(rstd, cc, xv, dv, wv, rv, dw[j], o);
                    st_x(dx + c * V, pack<T>(o));
                }
            }
        } else { /* rare: the row in float64 (rms_bwd_plain), read again from global memory
                  * (L2) rather than from xc / dc: holding those through this branch cost
                  * registers (float32 rows: 127 -> 148, half the blocks a SM) */
            __shared__ double redd[64];
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
#pragma unroll
            for (int j = 0; j < NVT; j++) {
                const int64_t c = threadIdx.x + (int64_t)j * blockDim.x;
                if (c < nc) {
                    float xv[V], dv[V], wv[V], o[V], rv[V];
                    unpack<T>(ld_reuse(x + c * V), xv), unpack<T>(ld_reuse(dy + c * V), dv);
                    unpack<T>(ld_reuse((const T *)a.w + c * V), wv);
                    if (RES)
                        unpack<T>(ld_reuse((const T *)a.dres + t * a.sdres + c * V), rv);
                    rms_bwd_chunk_d<V>(q, xv, dv, wv, RES ? rv : NULL, dw[j], o);
                    st_x(dx + c * V, pack<T>(o));
                }
            }
        }
    }
    if (a.pdl) /* rms_dw_sum may launch: it waits for this grid's end before reading part */
        ptx_griddep_launch_dependents();
    rms_bwd_store_part<chunk<T>::n, NVT>(a.part + (int64_t)blockIdx.x * a.D, nc, dw);
}

/* Backward ring (v3): a persistent grid of G blocks, block b taking rows b, b + G, ...; thread
 * k owns chunks k + j blockDim.x (j < NVT) of every row, as in rms_bwd_reg, with w and its dw
 * columns in registers. Slot layout: nc chunks of x, nc of dy, (RES) nc of dres; S slots
 * (dynamic shared memory). One barrier a row (the two sums, alternating halves of red as in
 * rms_bwd_reg); x and dy are read from the slot twice (the sums, then dx and dw) rather than
 * held. dw: one G x D float32 partial row a block, summed by rms_dw_sum. */
template <typename T, int NVT, bool RES>
__global__ void __launch_bounds__(NVT >= 4 ? 256 : NVT == 2 ? 512 : 1024) rms_bwd_ring(rms_bwd_args a, int S)
{
    constexpr int V = chunk<T>::n;
    extern __shared__ uint4 ring[];
    __shared__ float red[2][64];
    __shared__ double redd[64];
    const int64_t nc = a.D / V, slot = (RES ? 3 : 2) * nc, G = gridDim.x;
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
    auto issue = [&](int64_t t, int s) {
        if (t < a.T) {
            uint4 *d = ring + s * slot;
#pragma unroll
            for (int j = 0; j < NVT; j++) {
                const int64_t c = threadIdx.x + (int64_t)j * blockDim.x;
                if (c < nc) {
                    ptx_cp_async_16(ptx_smem_addr(d + c), (const T *)a.x + t * a.sx + c * V, true);
                    ptx_cp_async_16(ptx_smem_addr(d + nc + c), (const T *)a.dy + t * a.sdy + c * V, true);
                    if (RES)
                        ptx_cp_async_16(ptx_smem_addr(d + 2 * nc + c),
                                        (const T *)a.dres + t * a.sdres + c * V, true);
                }
            }
        }
        ptx_cp_async_commit(); /* empty groups too: one group a row */
    };
    for (int s = 0; s < S - 1; s++)
        issue((int64_t)blockIdx.x + s * G, s);
    int s = 0, k = 0;
    for (int64_t t = blockIdx.x; t < a.T; t += G, k ^= 1) {
        issue(t + (S - 1) * G, s == 0 ? S - 1 : s - 1);
        cp_async_wait_n(S - 1); /* row t's group has landed (this thread's chunks) */
        const uint4 *d = ring + s * slot;
        float ss = 0.0f, dot = 0.0f;
#pragma unroll
        for (int j = 0; j < NVT; j++) {
            const int64_t c = threadIdx.x + (int64_t)j * blockDim.x;
            if (c < nc) {
                float xv[V], dv[V], wv[V];
                unpack<T>(d[c], xv), unpack<T>(d[nc + c], dv), unpack<T>(wr[j], wv);
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
                    unpack<T>(d[c], xv), unpack<T>(d[nc + c], dv), unpack<T>(wr[j], wv);
                    if (RES)
                        unpack<T>(d[2 * nc + c], rv);
                    rms_bwd_chunk<V, RES>(rstd, cc, xv, dv, wv, rv, dw[j], o);
                    st_stream(dx + c * V, pack<T>(o));
                }
            }
        } else { /* rare: the row in float64 (rms_bwd_plain), again from the slot */
            double ssd = 0.0, dotd = 0.0;
#pragma unroll
            for (int j = 0; j < NVT; j++)
                if (threadIdx.x + (int64_t)j * blockDim.x < nc) {
                    const int64_t c = threadIdx.x + (int64_t)j * blockDim.x;
                    float xv[V], dv[V], wv[V];
                    unpack<T>(d[c], xv), unpack<T>(d[nc + c], dv), unpack<T>(wr[j], wv);
#pragma unroll
                    for (int i = 0; i < V; i++)
                        ssd += (double)xv[i] * xv[i], dotd += (double)dv[i] * wv[i] * xv[i];
                }
            block_sum2_d(ssd, dotd, redd);
            const rms_bwd_d q = rms_bwd_coef_d(ssd, dotd, a.D, a.eps);
#pragma unroll
            for (int j = 0; j < NVT; j++) {
                const int64_t c = threadIdx.x + (int64_t)j * blockDim.x;
                if (c < nc) {
                    float xv[V], dv[V], wv[V], o[V], rv[V];
                    unpack<T>(d[c], xv), unpack<T>(d[nc + c], dv), unpack<T>(wr[j], wv);
                    if (RES)
                        unpack<T>(d[2 * nc + c], rv);
                    rms_bwd_chunk_d<V>(q, xv, dv, wv, RES ? rv : NULL, dw[j], o);
                    st_stream(dx + c * V, pack<T>(o));
                }
            }
        }
        s = s + 1 == S ? 0 : s + 1;
    }
    ptx_cp_async_wait<0>();
    rms_bwd_store_part<chunk<T>::n, NVT>(a.part + (int64_t)blockIdx.x * a.D, nc, dw);
}

/* dw[d] = sum over g < G of part[g][d]: 32 columns a block, thread row y summing the partials
 * g = y, y + 32, ... in order, then the 32 sums in order: a fixed order (bit-for-bit repeatable
 * for a given G) with 32x the parallelism of rms_dw_reduce. Block (32, 32). */
template <typename T>
__global__ void __launch_bounds__(1024) rms_dw_sum(const float *part, int64_t G, int64_t D, T *dw, int64_t sdw)
{
    __shared__ float s[32][33];
    const int64_t d = (int64_t)blockIdx.x * 32 + threadIdx.x;
    float acc = 0.0f;
    ptx_griddep_wait(); /* a programmatic launch (cuda_rms_dw_sum): part is complete; else a no-op */
    if (d < D) {
#pragma unroll 4
        for (int64_t g = threadIdx.y; g < G; g += 32)
            acc += part[g * D + d];
    }
    s[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && d < D) {
        float tot = 0.0f;
        for (int i = 0; i < 32; i++)
            tot += s[i][threadIdx.x];
        dw[d * sdw] = elem<T>::store(tot);
    }
}

template <typename T> static void dw_sum_launch(const float *part, int64_t G, const rows_bwd_problem *p, bool pdl)
{
    int64_t D = p->D, sdw = p->sdw;
    T *dw = (T *)p->dw;
    void *args[] = {(void *)&part, &G, &D, &dw, &sdw};
    (void)launch_maybe_pdl((const void *)rms_dw_sum<T>, dim3((unsigned)((D + 31) / 32)), dim3(32, 32), args, 0, 0, pdl);
}

/* rms_dw_sum's sums in rms_dw_sum's order (thread row y adds g = y, y + 32, ... in order from
 * 0, then the 32 sums in order from 0: the same bits for the same partials), four columns a
 * thread: block (8, 32) takes 32 columns, one partial row's 128 bytes by eight threads, and a
 * thread issues the loads of up to 16 partial rows before it adds them, so that a block keeps
 * up to 64 KiB in flight where rms_dw_sum (4 bytes a load, 4 loads deep) keeps 16 KiB: that
 * pass is latency-bound (6.5 MB of partials in 2.7 us at bf16 16384 x 4096, 2.4 TB/s). Needs
 * D % 4 == 0 and part 16-byte aligned (the vector paths: whole chunks of 4 or 8 elements). */
template <typename T>
__global__ void __launch_bounds__(256) rms_dw_sum4(const float *part, int64_t G, int64_t D, T *dw, int64_t sdw)
{
    constexpr int K = 16;
    __shared__ float4 s[32][8];
    const int64_t nq = D / 4, q = (int64_t)blockIdx.x * 8 + threadIdx.x;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    ptx_griddep_wait(); /* a programmatic launch: part is complete; else a no-op */
    if (q < nq) {
        const float4 *pq = reinterpret_cast<const float4 *>(part) + q;
        for (int64_t g0 = threadIdx.y; g0 < G; g0 += 32 * K) {
            float4 v[K];
#pragma unroll
            for (int u = 0; u < K; u++)
                if (g0 + 32 * u < G)
                    v[u] = __ldcg(pq + (g0 + 32 * u) * nq);
#pragma unroll
            for (int u = 0; u < K; u++)
                if (g0 + 32 * u < G)
                    acc.x += v[u].x, acc.y += v[u].y, acc.z += v[u].z, acc.w += v[u].w;
        }
    }
    s[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && q < nq) {
        float4 t = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        for (int i = 0; i < 32; i++)
            t.x += s[i][threadIdx.x].x, t.y += s[i][threadIdx.x].y, t.z += s[i][threadIdx.x].z,
                t.w += s[i][threadIdx.x].w;
        T *o = dw + q * 4 * sdw;
        o[0] = elem<T>::store(t.x), o[sdw] = elem<T>::store(t.y);
        o[2 * sdw] = elem<T>::store(t.z), o[3 * sdw] = elem<T>::store(t.w);
    }
}

template <typename T> static void dw_sum4_launch(const float *part, int64_t G, const rows_bwd_problem *p, bool pdl)
{
    int64_t D = p->D, sdw = p->sdw;
    T *dw = (T *)p->dw;
    void *args[] = {(void *)&part, &G, &D, &dw, &sdw};
    (void)launch_maybe_pdl((const void *)rms_dw_sum4<T>, dim3((unsigned)((D / 4 + 7) / 8)), dim3(8, 32), args, 0, 0, pdl);
}

extern "C" flashc_status cuda_rms_dw_sum(const float *part, int64_t G, const rows_bwd_problem *p, bool pdl)
{
    switch (p->dtype) {
    case FLASHC_BF16: dw_sum_launch<__nv_bfloat16>(part, G, p, pdl); break;
    case FLASHC_F16: dw_sum_launch<__half>(part, G, p, pdl); break;
    default: dw_sum_launch<float>(part, G, p, pdl); break;
    }
    return launch_status("flashc_rmsnorm_bwd", "rms_dw_sum");
}

/* rms_bwd_reg's (and rms_bwd_ring's) threads per block and chunks per thread for nc chunks
 * (tpr = 0: no fit): the most chunks a thread (4, 2, 1; at most nmax) whose block of >= 32 threads covers the row within the
 * launch bound (256, 512, 1024). */
static void pick_bwd(int64_t nc, int nmax, int *tpr, int *nv)
{
    for (int n = nmax >= 4 ? 4 : nmax >= 2 ? 2 : 1; n >= 1; n /= 2) {
        int t = 32;
        while ((int64_t)t * n < nc)
            t *= 2;
        if (t <= 1024 / n) {
            *tpr = t, *nv = n;
            return;
        }
    }
    *tpr = 0, *nv = 0;
}

/* Blocks per SM of kernel k at `threads` threads, cached per device and block size (the query
 * costs host time on every call otherwise); 0 with the error left to the caller. */
static cudaError_t blocks_per_sm(const void *k, int threads, int dev, int *out, int (*cache)[11])
{
    int l = 0;
    while ((1 << l) < threads)
        l++;
    if (dev >= 0 && dev < 16 && l < 11 && cache[dev][l] > 0) {
        *out = cache[dev][l];
        return cudaSuccess;
    }
    const cudaError_t err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(out, k, threads, 0);
    if (err == cudaSuccess && dev >= 0 && dev < 16 && l < 11)
        cache[dev][l] = *out; /* racing first calls store the same value */
    return err;
}

template <typename T, bool PL> static const void *bwd_kernel_h(int nv, bool res)
{
    switch (nv) {
    case 1: return res ? (const void *)rms_bwd_reg<T, 1, true, PL> : (const void *)rms_bwd_reg<T, 1, false, PL>;
    case 2: return res ? (const void *)rms_bwd_reg<T, 2, true, PL> : (const void *)rms_bwd_reg<T, 2, false, PL>;
    default: return res ? (const void *)rms_bwd_reg<T, 4, true, PL> : (const void *)rms_bwd_reg<T, 4, false, PL>;
    }
}

template <typename T> static const void *bwd_kernel(int nv, bool res, bool pl)
{
    return pl ? bwd_kernel_h<T, true>(nv, res) : bwd_kernel_h<T, false>(nv, res);
}

/* FLASHC_CUDA_RMS_BWD=v6[:B,P,L,S,H] (the default): rms_bwd_reg (v2's kernel) with what its call
 * around it cost at bf16 16384 x 4096 (kernel alone 112.9 us, a call 124.7), each a knob (1
 * on, 0 off; B, P, L, S default on, H off):
 *   B  a balanced grid: G = ceil(T / n) blocks for n = ceil(T / (SMs x occupancy)) rows a block,
 *      so that the last round of rows is not left to a few blocks (16384 rows on 396 blocks:
 *      148 blocks take a 42nd row while 248 idle; on 391, 353 do; the rounds are as many, so
 *      the gain is only the last round's lower bandwidth, < 1 us predicted); only at >= 2
 *      blocks a SM, when no SM keeps fewer than occupancy - 1 (at 1 block a SM it would idle
 *      whole SMs: 4096 rows on 132 SMs -> 128 blocks);
 *   P  the partials from the library's scratch pool (cuda_scratch_alloc, scratch.cu), which
 *      keeps its memory across synchronisations (as every other path's partials now do); 0
 *      takes cudaMallocAsync's default pool, which hands it back at each one, so that the next
 *      call maps it again on the host before its first launch (what P saves, measured);
 *   L  PDL for the kernel and the dw pass (sm_90); "v2:1" (rows4's name) = v6:0,0,1,0,0;
 *   S  rms_dw_sum4 (the same sums, loads 16 deep) rather than rms_dw_sum;
 *   H  plain loads and stores of the rows rather than evict-first ones (rms_bwd_reg's PL);
 *      on by default since 2026-12-03 (3.4% faster at 16384 x 4096 in round 1).
 * The results are v2's bits for the same G (B changes G, so dw's order of additions: still the
 * same bits at every run). */
struct bwd6_cfg {
    bool on;
    int bal, pool, pdl, sum, plain;
};

static bwd6_cfg bwd6_env(void)
{
    bwd6_cfg c = {false, 1, 1, 1, 1, 1};
    const char *e = getenv("FLASHC_CUDA_RMS_BWD");
    if (!e)
        e = rms_bwd_default; /* "v6": the default; "v2" names the old path */
    if (strcmp(e, "v2:1") == 0) { /* rows4's v2 + PDL, kept by name: v6:0,0,1,0,0 */
        c.on = true, c.bal = 0, c.pool = 0, c.sum = 0;
        return c;
    }
    if (strncmp(e, "v6", 2) != 0 || (e[2] != '\0' && e[2] != ':'))
        return c;
    c.on = true;
    int k[5] = {-1, -1, -1, -1, -1};
    if (e[2] == ':')
        (void)sscanf(e + 3, "%d,%d,%d,%d,%d", &k[0], &k[1], &k[2], &k[3], &k[4]);
    int *f[5] = {&c.bal, &c.pool, &c.pdl, &c.sum, &c.plain};
    for (int i = 0; i < 5; i++)
        if (k[i] == 0 || k[i] == 1)
            *f[i] = k[i];
    return c;
}

template <typename T> static const void *bwd_ring_kernel(int nv, bool res)
{
    switch (nv) {
    case 1: return res ? (const void *)rms_bwd_ring<T, 1, true> : (const void *)rms_bwd_ring<T, 1, false>;
    case 2: return res ? (const void *)rms_bwd_ring<T, 2, true> : (const void *)rms_bwd_ring<T, 2, false>;
    default: return res ? (const void *)rms_bwd_ring<T, 4, true> : (const void *)rms_bwd_ring<T, 4, false>;
    }
}

template <typename T> static flashc_status rms_bwd_t(const rows_bwd_problem *p)
{
    static const char fn[] = "flashc_rmsnorm_bwd";
    static int occ_cache[14][16][11]; /* v2 by (nv, dres), v1 vec, v1 any, v6 H = 1 by (nv, dres) */
    rms_bwd_args a;
    a.x = p->x, a.w = p->w, a.dy = p->dy, a.dres = p->dres, a.dx = p->dx;
    a.sx = p->sx[0], a.sdy = p->sdy[0], a.sdres = p->dres ? p->sdres[0] : 0, a.sdx = p->sdx[0];
    a.T = p->T, a.D = p->D, a.eps = p->eps, a.pdl = 0;
    const size_t es = sizeof(T);
    const int64_t nc = p->D / chunk<T>::n;
    const bool aligned = vec_ok(p->x, a.sx, p->D, es) && vec_ok(p->w, 0, p->D, es) &&
                         vec_ok(p->dy, a.sdy, p->D, es) && vec_ok(p->dx, a.sdx, p->D, es) &&
                         (!p->dres || vec_ok(p->dres, a.sdres, p->D, es));
    flashc_status st4;
    if (aligned && !rows_v1() && cuda_rms_bwd_v4(p, &st4)) /* v5, when asked for */
        return st4;
    int dev = 0, sms = 0, per_sm = 0;
    cudaError_t err = dev_sms(&dev, &sms);
    if (err != cudaSuccess)
        return query_failed(fn, err);
    /* v3: the ring, when asked for and its slots fit (fewer stages first, down to 2) */
    const ring_cfg rc = ring_env("FLASHC_CUDA_RMS_BWD", 4, 3);
    int tpr3 = 0, nv3 = 0, S = rc.s;
    size_t smem = 0;
    const void *kern = NULL;
    if (aligned && rc.on)
        pick_bwd(nc, rc.a, &tpr3, &nv3);
    if (tpr3 > 0) {
        const void *k = bwd_ring_kernel<T>(nv3, p->dres != NULL);
        const size_t slot = (size_t)(p->dres ? 3 : 2) * (size_t)nc * 16;
        size_t maxs = 0;
        err = ring_max_smem(k, dev, &maxs);
        while (err == cudaSuccess && S > 2 && (size_t)S * slot > maxs)
            S--;
        if (err == cudaSuccess && (size_t)S * slot <= maxs) {
            smem = (size_t)S * slot;
            err = ring_per_sm(k, dev, tpr3, smem, &per_sm);
            if (err == cudaSuccess && per_sm > 0)
                kern = k;
        }
        if (err != cudaSuccess)
            return query_failed(fn, err);
    }
    const bool ring = kern != NULL;
    int tpr2 = 0, nv2 = 0;
    if (!ring && aligned && !rows_v1())
        pick_bwd(nc, 4, &tpr2, &nv2);
    const bool v2 = !ring && tpr2 > 0;
    const bwd6_cfg v6 = v2 ? bwd6_env() : bwd6_cfg{false, 0, 0, 0, 0, 0};
    const int tpr = pick_tpr(nc);
    const bool vec = !ring && !v2 && aligned && tpr > 0 && tpr <= BWD_TPR;
    const int threads = ring ? tpr3 : v2 ? tpr2 : vec ? (tpr < 128 ? 128 : tpr) : 256;
    if (!ring) {
        kern = v2 ? bwd_kernel<T>(nv2, p->dres != NULL, v6.on && v6.plain)
                  : vec ? (const void *)rms_bwd_vec<T> : (const void *)rms_bwd_any<T>;
        const int oc = v2 ? (nv2 == 4 ? 0 : nv2 == 2 ? 1 : 2) + (p->dres ? 3 : 0) + (v6.on && v6.plain ? 8 : 0) : vec ? 6 : 7;
        err = blocks_per_sm(kern, threads, dev, &per_sm, occ_cache[oc]);
        if (err != cudaSuccess)
            return query_failed(fn, err);
    }
    int64_t G = (int64_t)sms * (per_sm > 0 ? per_sm : 1);
    if (ring && rc.g > 0 && G > rc.g)
        G = rc.g;
    if (G > p->T)
        G = p->T;
    if (v6.on && v6.bal && G > 0 && per_sm >= 2) { /* the fewest blocks for the same rows a block */
        const int64_t n = (p->T + G - 1) / G, Gb = (p->T + n - 1) / n;
        if (Gb >= (int64_t)sms * (per_sm - 1)) /* no SM left with fewer than per_sm - 1 blocks */
            G = Gb;
    }
    float *part = NULL;
    const size_t pbytes = (size_t)G * (size_t)p->D * sizeof(float);
    if (v6.on && !v6.pool) /* v6's P = 0: the default pool, to measure what the pool saves */
        err = cudaMallocAsync((void **)&part, pbytes, 0);
    else
        err = cuda_scratch_alloc((void **)&part, pbytes, 0);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        return flashc__fail(FLASHC_ERR_OUT_OF_MEMORY,
                            "%s: cannot allocate the %lld x %lld float32 dw partials: %s", fn,
                            (long long)G, (long long)p->D, cudaGetErrorString(err));
    }
    a.part = part;
    flashc_status st;
    if (ring || v2) {
        /* PDL (v6's knob L; sm_90): the kernel and its dw pass as programmatic dependents */
        int major = 0;
        if (v2 && v6.on && v6.pdl &&
            cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major >= 9)
            a.pdl = 1;
        void *args[] = {&a, &S};
        err = launch_maybe_pdl(kern, dim3((unsigned)G), dim3((unsigned)threads), args, ring ? smem : 0, 0, a.pdl != 0);
        (void)err; /* reported by launch_status */
        st = launch_status(fn, ring ? "rms_bwd_ring" : "rms_bwd_reg");
        if (st == FLASHC_OK) {
            if (v6.on && v6.sum)
                dw_sum4_launch<T>(part, G, p, a.pdl != 0);
            else
                dw_sum_launch<T>(part, G, p, a.pdl != 0);
            st = launch_status(fn, v6.on && v6.sum ? "rms_dw_sum4" : "rms_dw_sum");
        }
    } else {
        if (vec)
            rms_bwd_vec<T><<<(unsigned)G, threads>>>(a);
        else
            rms_bwd_any<T><<<(unsigned)G, threads>>>(a);
        st = launch_status(fn, vec ? "rms_bwd_vec" : "rms_bwd_any");
        if (st == FLASHC_OK) {
            if (rows_v1())
                rms_dw_reduce<T><<<(unsigned)((p->D + 255) / 256), 256>>>(part, G, p->D, (T *)p->dw, p->sdw);
            else
                rms_dw_sum<T><<<(unsigned)((p->D + 31) / 32), dim3(32, 32)>>>(part, G, p->D, (T *)p->dw, p->sdw);
            st = launch_status(fn, rows_v1() ? "rms_dw_reduce" : "rms_dw_sum");
        }
    }
    cuda_scratch_free(part, 0); /* cudaFreeAsync: either pool */
    return st;
}

/* ---- SwiGLU ------------------------------------------------------------------------------- */

struct swiglu_args {
    const void *gu, *dout;
    void *out; /* forward: (T, I); backward: dgu (T, 2I) */
    int64_t sgu, sdout, sout;
    int64_t T, I;
};

__device__ __forceinline__ float sigmoid_f(float g) { return 1.0f / (1.0f + expf(-g)); }

template <typename T> __global__ void swiglu_fwd_vec(swiglu_args a)
{
    constexpr int V = chunk<T>::n;
    const int64_t nc = a.I / V, idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= a.T * nc)
        return;
    const int64_t t = idx / nc, c = idx % nc;
    const T *gu = (const T *)a.gu + t * a.sgu + c * V;
    float g[V], u[V];
    load_chunk_stream(gu, g);
    load_chunk_stream(gu + a.I, u);
#pragma unroll
    for (int i = 0; i < V; i++)
        g[i] = g[i] * sigmoid_f(g[i]) * u[i];
    store_chunk((T *)a.out + t * a.sout + c * V, g);
}

template <typename T> __global__ void swiglu_fwd_any(swiglu_args a)
{
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= a.T * a.I)
        return;
    const int64_t t = idx / a.I, i = idx % a.I;
    const T *gu = (const T *)a.gu + t * a.sgu;
    const float g = elem<T>::load(gu[i]), u = elem<T>::load(gu[a.I + i]);
    ((T *)a.out)[t * a.sout + i] = elem<T>::store(g * sigmoid_f(g) * u);
}

template <typename T> __global__ void swiglu_bwd_vec(swiglu_args a)
{
    constexpr int V = chunk<T>::n;
    const int64_t nc = a.I / V, idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= a.T * nc)
        return;
    const int64_t t = idx / nc, c = idx % nc;
    const T *gu = (const T *)a.gu + t * a.sgu + c * V;
    float g[V], u[V], o[V];
    load_chunk_stream(gu, g);
    load_chunk_stream(gu + a.I, u);
    load_chunk_stream((const T *)a.dout + t * a.sdout + c * V, o);
#pragma unroll
    for (int i = 0; i < V; i++) {
        const float s = sigmoid_f(g[i]);
        const float dg = o[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
        u[i] = o[i] * g[i] * s;
        g[i] = dg;
    }
    T *dgu = (T *)a.out + t * a.sout + c * V;
    store_chunk(dgu, g);
    store_chunk(dgu + a.I, u);
}

template <typename T> __global__ void swiglu_bwd_any(swiglu_args a)
{
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= a.T * a.I)
        return;
    const int64_t t = idx / a.I, i = idx % a.I;
    const T *gu = (const T *)a.gu + t * a.sgu;
    const float g = elem<T>::load(gu[i]), u = elem<T>::load(gu[a.I + i]);
    const float o = elem<T>::load(((const T *)a.dout)[t * a.sdout + i]);
    const float s = sigmoid_f(g);
    T *dgu = (T *)a.out + t * a.sout;
    dgu[i] = elem<T>::store(o * u * s * (1.0f + g * (1.0f - s)));
    dgu[a.I + i] = elem<T>::store(o * g * s);
}

template <typename T> static flashc_status swiglu_t(const swiglu_args &a, bool bwd)
{
    const size_t es = sizeof(T);
    bool vec = vec_ok(a.gu, a.sgu, a.I, es) && vec_ok(a.out, a.sout, a.I, es);
    if (bwd)
        vec = vec && vec_ok(a.dout, a.sdout, a.I, es);
    const int64_t work = vec ? a.T * (a.I / chunk<T>::n) : a.T * a.I;
    const unsigned grid = (unsigned)((work + 255) / 256);
    if (bwd) {
        if (vec)
            swiglu_bwd_vec<T><<<grid, 256>>>(a);
        else
            swiglu_bwd_any<T><<<grid, 256>>>(a);
        return launch_status("flashc_swiglu_bwd", vec ? "swiglu_bwd_vec" : "swiglu_bwd_any");
    }
    if (vec)
        swiglu_fwd_vec<T><<<grid, 256>>>(a);
    else
        swiglu_fwd_any<T><<<grid, 256>>>(a);
    return launch_status("flashc_swiglu", vec ? "swiglu_fwd_vec" : "swiglu_fwd_any");
}

/* ---- dispatch ----------------------------------------------------------------------------- */

extern "C" flashc_status cuda_rows_supports(const char *fn, flashc_dtype dt,
                                            const int64_t *elem_strides, int n)
{
    if (dt != FLASHC_F32 && dt != FLASHC_BF16 && dt != FLASHC_F16)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED_DTYPE, "%s: CUDA takes float32, bfloat16 or "
                            "float16 (%s given)", fn, flashc__dtype_name(dt));
    for (int i = 0; i < n; i++)
        if (elem_strides[i] != 1)
            return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                                "%s: the CUDA kernels need element stride 1 within rows (tensor "
                                "%d has %lld); any row stride works",
                                fn, i, (long long)elem_strides[i]);
    return FLASHC_OK;
}

/* Grids of more than 2^31 - 1 blocks do not launch: refuse such a T up front. */
static flashc_status check_grid(const char *fn, int64_t blocks)
{
    if (blocks > 2147483647LL)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED, "%s: %lld blocks exceed the CUDA grid limit",
                            fn, (long long)blocks);
    return FLASHC_OK;
}

extern "C" flashc_status cuda_rmsnorm(const rows_problem *p)
{
    FLASHC_TRY(check_grid("flashc_rmsnorm", p->T));
    switch (p->dtype) {
    case FLASHC_BF16: return rms_fwd_t<__nv_bfloat16>(p);
    case FLASHC_F16: return rms_fwd_t<__half>(p);
    default: return rms_fwd_t<float>(p);
    }
}

extern "C" flashc_status cuda_rmsnorm_bwd(const rows_bwd_problem *p)
{
    switch (p->dtype) {
    case FLASHC_BF16: return rms_bwd_t<__nv_bfloat16>(p);
    case FLASHC_F16: return rms_bwd_t<__half>(p);
    default: return rms_bwd_t<float>(p);
    }
}

static flashc_status swiglu_dispatch(const swiglu_args &a, flashc_dtype dt, bool bwd)
{
    FLASHC_TRY(check_grid(bwd ? "flashc_swiglu_bwd" : "flashc_swiglu", (a.T * a.I + 255) / 256));
    switch (dt) {
    case FLASHC_BF16: return swiglu_t<__nv_bfloat16>(a, bwd);
    case FLASHC_F16: return swiglu_t<__half>(a, bwd);
    default: return swiglu_t<float>(a, bwd);
    }
}

extern "C" flashc_status cuda_swiglu(const rows_problem *p)
{
    swiglu_args a;
    a.gu = p->x, a.dout = NULL, a.out = p->y;
    a.sgu = p->sx[0], a.sdout = 0, a.sout = p->sy[0];
    a.T = p->T, a.I = p->D;
    return swiglu_dispatch(a, p->dtype, false);
}

extern "C" flashc_status cuda_swiglu_bwd(const rows_bwd_problem *p)
{
    swiglu_args a;
    a.gu = p->x, a.dout = p->dy, a.out = p->dx;
    a.sgu = p->sx[0], a.sdout = p->sdy[0], a.sout = p->sdx[0];
    a.T = p->T, a.I = p->D;
    return swiglu_dispatch(a, p->dtype, true);
}
