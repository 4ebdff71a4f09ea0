/*
 * rows_rms.cuh — what the RMSNorm kernels of rows.cu and rows_v4.cu share: the rare branches
 * for rows at the ends of the float32 range (the forward's rescale by max |x|, the backward's
 * float64 redo) and the residual sum of a chunk pair.
 */
#ifndef FLASHC_CUDA_ROWS_RMS_CUH
#define FLASHC_CUDA_ROWS_RMS_CUH

#include "rows_common.cuh"

#include <math.h>

/* A row whose float32 sum of squares ss overflowed (|x| >~ 2e19) or underflowed (all |x| <~
 * 1e-19) takes the rescaled rstd of the CPU and the reference (cpu_rms_rstd_rescaled,
 * kernels.h): from the row's max |x| (amax) and s = sum (x / amax)^2, r and div such that
 * y = x / div * r * w, div = 1 unless the rstd is no normal float (a subnormal row; a row near
 * FLT_MAX). Zeros and rows holding an Inf keep the plain r. */
__device__ __forceinline__ bool rms_needs_rescale(float ss) { return isinf(ss) || ss < 0x1p-64f; }

__device__ __forceinline__ float2 rms_rescale_rd(float amax, float s, int64_t D, float eps, float plain)
{
    if (amax == 0.0f || !isfinite(amax))
        return make_float2(plain, 1.0f);
    const double a = amax, m = 1.0 / sqrt((double)s / (double)D + (double)eps / (a * a));
    const double rstd = m / a;
    if (rstd >= 0x1p-126 && rstd <= 0x1p+126)
        return make_float2((float)rstd, 1.0f);
    return make_float2((float)m, amax);
}

__device__ __forceinline__ void rms_rescale(float amax, float s, int64_t D, float eps, float *r, float *div)
{
    const float2 q = rms_rescale_rd(amax, s, D, eps, *r);
    *r = q.x, *div = q.y;
}

/* The rounded residual sum x + r of chunk pair (xu, ru): what the residual variant stores and
 * normalises; recomputed rather than kept, it is the same value each time. */
template <typename T> __device__ __forceinline__ uint4 res_sum(const uint4 &xu, const uint4 &ru)
{
    constexpr int V = chunk<T>::n;
    float xv[V], rv[V];
    unpack<T>(xu, xv), unpack<T>(ru, rv);
#pragma unroll
    for (int i = 0; i < V; i++)
        xv[i] += rv[i];
    return pack<T>(xv);
}

/* ---- backward at the ends of the float32 range ---------------------------------------------
 * The CPU backward's contract (src/cpu/rmsnorm.c): a row whose float32 sums leave the range
 * where the plain formula holds -- sum x^2 outside [2^-64, 2^100] (|x| beyond ~1e19 overflows
 * it, a row of tiny values makes rstd overflow) or sum dy w x not finite -- is redone in
 * float64, which holds both: rstd = 1 / sqrt(sum x^2 / D + eps), c = rstd^2 sum(dy w x) / D,
 * dx = (float)(rstd (dy w - x c)) (+ dres), dw += (float)(dy x rstd). The test is on the
 * block's reduced sums, so the branch is uniform. In the plain formula dw takes dy (x rstd):
 * |x rstd| <= sqrt(D), so dy x cannot overflow before rstd brings it back. */
__device__ __forceinline__ bool rms_bwd_plain(float ss, float dot)
{
    return ss >= 0x1p-64f && ss <= 0x1p+100f && isfinite(dot);
}

/* (a, b) summed over the block's threads (blockDim.x a multiple of 32, blockDim.y = 1): the
 * backward's two row sums (sum x^2, sum dy w x) in one reduction -- shuffles, then with more
 * than one warp through red (64 floats: a's warp sums in [0, 32), b's in [32, 64)) and one
 * barrier; every thread gets the same bits. The caller keeps red's reuse apart (alternating
 * buffers a row, or a barrier in between). */
__device__ __forceinline__ void block_sum2(float &a, float &b, float *red)
{
    a = warp_sum(a), b = warp_sum(b);
    const int nw = blockDim.x / 32;
    if (nw > 1) {
        if (threadIdx.x % 32 == 0)
            red[threadIdx.x / 32] = a, red[32 + threadIdx.x / 32] = b;
        __syncthreads();
        a = 0.0f, b = 0.0f;
        for (int i = 0; i < nw; i++)
            a += red[i], b += red[32 + i];
    }
}

/* The end of a persistent backward block: its thread's dw columns -- chunks c = threadIdx.x +
 * j blockDim.x (j < NVT, c < nc) of V floats -- into the block's row of the (G, D) float32
 * partials (part: that row), as float4 stores (V = 4 or 8; part 16-byte aligned). */
template <int V, int NVT>
__device__ __forceinline__ void rms_bwd_store_part(float *part, int64_t nc, const float (&dw)[NVT][V])
{
#pragma unroll
    for (int j = 0; j < NVT; j++) {
        const int64_t c = threadIdx.x + (int64_t)j * blockDim.x;
        if (c < nc)
#pragma unroll
            for (int q = 0; q < V / 4; q++)
                reinterpret_cast<float4 *>(part + c * V)[q] =
                    make_float4(dw[j][4 * q], dw[j][4 * q + 1], dw[j][4 * q + 2], dw[j][4 * q + 3]);
    }
}

/* (a, b) summed over the block's threads (blockDim.x a multiple of 32, blockDim.y = 1) in
 * float64; every thread gets the same bits. redd: 64 doubles of shared memory; one barrier
 * (callers run one more barrier a row before redd is written again). */
__device__ __forceinline__ void block_sum2_d(double &a, double &b, double *redd)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        a += __shfl_xor_sync(0xffffffffu, a, o);
        b += __shfl_xor_sync(0xffffffffu, b, o);
    }
    const int nw = blockDim.x / 32;
    if (nw > 1) {
        if (threadIdx.x % 32 == 0)
            redd[threadIdx.x / 32] = a, redd[32 + threadIdx.x / 32] = b;
        __syncthreads();
        a = 0.0, b = 0.0;
        for (int i = 0; i < nw; i++)
            a += redd[i], b += redd[32 + i];
    }
}

struct rms_bwd_d {
    double rstd, c;
};

__device__ __forceinline__ rms_bwd_d rms_bwd_coef_d(double ss, double dot, int64_t D, float eps)
{
    rms_bwd_d k;
    k.rstd = 1.0 / sqrt(ss / (double)D + (double)eps);
    k.c = k.rstd * k.rstd * dot / (double)D;
    return k;
}

/* One chunk of the float64 row: dx into o, dw accumulated (x, dy, w, dres as float32). */
template <int V>
__device__ __forceinline__ void rms_bwd_chunk_d(const rms_bwd_d &k, const float *xv, const float *dv,
                                                const float *wv, const float *rv, float *dw, float *o)
{
#pragma unroll
    for (int i = 0; i < V; i++) {
        const double x = xv[i], dy = dv[i];
        dw[i] += (float)(dy * x * k.rstd);
        o[i] = (float)(k.rstd * (dy * (double)wv[i] - x * k.c));
        if (rv)
            o[i] += rv[i];
    }
}

/* rows_v4.cu: the v4 / v5 RMSNorm kernels, chosen by FLASHC_CUDA_RMS_FWD / FLASHC_CUDA_RMS_BWD
 * (read at every call). true: the call was served (its status in *st); false: not asked for,
 * or the problem is not one they take (the caller goes on with its own kernels). Only for rows
 * that vec_ok accepts. */
extern "C" bool cuda_rms_fwd_v4(const rows_problem *p, flashc_status *st);
extern "C" bool cuda_rms_bwd_v4(const rows_bwd_problem *p, flashc_status *st);
/* rows.cu: dw = the column sums of the (G, D) float32 partials, into p->dw (rms_dw_sum); pdl:
 * launched as a programmatic dependent of the kernel that wrote part (sm_90). */
extern "C" flashc_status cuda_rms_dw_sum(const float *part, int64_t G, const rows_bwd_problem *p, bool pdl);

#endif /* FLASHC_CUDA_ROWS_RMS_CUH */
