/*
 * attn_mma_sm80.cuh — the mma.sync tile products shared by the sm_80 attention kernels
 * (attn_fwd_sm80.cu, the prefill; attn_decode.cu, the KV-cache / decode kernel): the swizzled
 * shared-memory layout of a K/V/Q tile, S = Q K^T and O += P V on m16n8k16 fragments.
 *
 * Shared tiles hold rows of DS elements (DS a multiple of 64: whole 128-byte groups of eight
 * 16-byte chunks); chunk c of row r sits at c ^ (r mod 8) within its group, so the 8 rows one
 * ldmatrix phase reads fall in 8 different bank groups.
 */
#ifndef FLASHC_CUDA_ATTN_MMA_SM80_CUH
#define FLASHC_CUDA_ATTN_MMA_SM80_CUH

#include "ptx.cuh"

#include <stdint.h>

/* Element offset of 16-byte chunk c of row r in a swizzled tile with rows of DS elements
 * (DS a multiple of 64, i.e. whole 128-byte groups of 8 chunks). */
template <int DS> static __device__ __forceinline__ int swz(int r, int c)
{
    return r * DS + ((c & ~7) | ((c ^ r) & 7)) * 8;
}

/* Shared byte address of even chunk c (compile-time) of the row a lane addresses, given that
 * lane's address of chunk 0 of the pair it reads (lane_base, with the swizzle already applied
 * to the lane's own row and half, and 128-byte aligned rows). Because c is even and the lane's
 * half is 0 or 1, chunk (c + half) ^ row = (c mod 8) ^ (half ^ row) + whole groups: one XOR
 * with a constant and an immediate offset, so no per-(c, row) address stays in registers. */
static __device__ __forceinline__ uint32_t swz_step(uint32_t lane_base, int c)
{
    return (lane_base ^ (uint32_t)((c & 7) * 16)) + (uint32_t)((c >> 3) * 128);
}

/* S = Q K^T for one K block: s (MI x NT tiles of 16 x 8, C layout) over D in steps of 16.
 * q_lane, k_lane: this lane's ldmatrix addresses of chunk 0 (see swz_step). */
template <typename T, int D, int MI, int NT, uint32_t ROWB>
static __device__ __forceinline__ void qk_block(float (&s)[MI][NT][4], uint32_t q_lane,
                                                uint32_t k_lane)
{
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                s[mi][nt][e] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < D / 16; ks++) {
        uint32_t qa[MI][4];
#pragma unroll
        for (int mi = 0; mi < MI; mi++)
            ptx_ldmatrix_x4(qa[mi], swz_step(q_lane, 2 * ks) + mi * 16 * ROWB);
#pragma unroll
        for (int np = 0; np < NT / 2; np++) {
            uint32_t kb[4]; /* B fragments of key tiles 2np (kb[0..1]) and 2np+1 (kb[2..3]) */
            ptx_ldmatrix_x4(kb, swz_step(k_lane, 2 * ks) + np * 16 * ROWB);
#pragma unroll
            for (int mi = 0; mi < MI; mi++) {
                ptx_mma_m16n8k16(T(), s[mi][2 * np], qa[mi], kb[0], kb[1]);
                ptx_mma_m16n8k16(T(), s[mi][2 * np + 1], qa[mi], kb[2], kb[3]);
            }
        }
    }
}

/* O += P V for one block, over its keys in steps of 16. P's accumulator layout for key tiles
 * 2kk and 2kk+1 is exactly the A fragment of keys [16 kk, 16 kk + 16): no shuffles. */
template <typename T, int D, int MI, int NT, int DT, uint32_t ROWB>
static __device__ __forceinline__ void pv_block(const float (&s)[MI][NT][4],
                                                float (&acc)[MI][DT][4], uint32_t v_lane)
{
#pragma unroll
    for (int kk = 0; kk < NT / 2; kk++) {
        uint32_t pa[MI][4];
#pragma unroll
        for (int mi = 0; mi < MI; mi++)
            ptx_pack_a<T>(pa[mi], s[mi][2 * kk], s[mi][2 * kk + 1]);
#pragma unroll
        for (int dp = 0; dp < D / 16; dp++) {
            uint32_t vb[4]; /* B fragments of feature tiles 2dp (vb[0..1]) and 2dp+1 */
            ptx_ldmatrix_x4_trans(vb, swz_step(v_lane, 2 * dp) + kk * 16 * ROWB);
#pragma unroll
            for (int mi = 0; mi < MI; mi++) {
                ptx_mma_m16n8k16(T(), acc[mi][2 * dp], pa[mi], vb[0], vb[1]);
                ptx_mma_m16n8k16(T(), acc[mi][2 * dp + 1], pa[mi], vb[2], vb[3]);
            }
        }
    }
}

#endif /* FLASHC_CUDA_ATTN_MMA_SM80_CUH */
