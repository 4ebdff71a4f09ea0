/*
 * attn_cuda.cuh — what the CUDA attention dispatcher (attn.cu) shares with the kernel files.
 *
 * A kernel file exports a table of variants; each variant serves one (dtype, head dim) from a
 * minimum compute capability up. The dispatcher picks, for the device at hand, the variant with
 * the highest minimum capability that the device reaches, so an sm_90a kernel (wgmma + TMA) can
 * be added beside the sm_80 ones as a new file with its own table and no other change.
 */
#ifndef FLASHC_CUDA_ATTN_CUDA_CUH
#define FLASHC_CUDA_ATTN_CUDA_CUH

#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "internal.h"
}

/* The forward's arguments as a kernel receives them (by value). Layouts as in flashc.h with a
 * unit feature stride: element (b, s, h, d) of q is q[b * sq[0] + s * sq[1] + h * sq[2] + d].
 * Strides of q, k, v, o are multiples of 8 elements and the pointers 16-byte aligned, so each
 * row of D elements is a whole number of 16-byte chunks (checked by cuda_attn_fwd_supports). */
typedef struct attn_fwd_args {
    const void *q, *k, *v; /* (B, Sq, Hq, D), (B, Sk, Hkv, D), (B, Sk, Hkv, D) */
    void *o;               /* (B, Sq, Hq, D)                                     */
    float *lse;            /* (B, Hq, Sq) or NULL                                */
    int64_t sq[3], sk[3], sv[3], so[3]; /* batch, seq, head strides              */
    int64_t slse[3];                    /* batch, head, seq strides              */
    int B, Sq, Sk, Hq, group;           /* group = Hq / Hkv                      */
    int head_group;                     /* (batch, head) pairs scheduled together */
    float scale;                        /* softmax scale, > 0                    */
    float scale_log2;                   /* scale * log2(e): exp(x s) = 2^(x s')  */
    int causal;                         /* bottom-right aligned                  */
} attn_fwd_args;

typedef cudaError_t (*attn_fwd_launch_fn)(const attn_fwd_args *args, cudaStream_t stream);

typedef struct attn_fwd_variant {
    const char *name;   /* attn_fwd_<dtype>_<arch>_d<D>_<Br>x<Bc>      */
    flashc_dtype dtype; /* FLASHC_BF16 or FLASHC_F16                    */
    int head_dim;
    int min_cc;         /* minimum compute capability, 10 * major + minor */
    int block_q, block_k;
    attn_fwd_launch_fn launch;
} attn_fwd_variant;

/* attn_fwd_sm80.cu */
extern const attn_fwd_variant attn_fwd_sm80_variants[];
extern const int attn_fwd_sm80_variant_count;

/* ---- backward --------------------------------------------------------------------------- */

/* The backward's arguments as its kernels receive them (by value). Layouts as for the forward
 * (unit feature stride, 16-byte rows): q, o, dout, dq (B, Sq, Hq, D); k, v, dk, dv
 * (B, Sk, Hkv, D); lse (B, Hq, Sq) with strides slse. The workspace (see attn_bwd_workspace)
 * holds, contiguous and float32: dq_acc (B, Hq, Sq, D), the dQ accumulator of the main kernel,
 * and dsum (B, Hq, Sq), D = rowsum(dout * o); and int32 sem (B, Hq, ceil(Sq / block_q), split),
 * the per-(batch, head, Q block, column slice) turn counters of deterministic mode. */
typedef struct attn_bwd_args {
    const void *q, *k, *v, *o, *dout;
    void *dq, *dk, *dv;
    const float *lse;
    int64_t sq[3], sk[3], sv[3], so[3], sdo[3], sdq[3], sdk[3], sdv[3]; /* batch, seq, head */
    int64_t slse[3];                                                   /* batch, head, seq */
    float *dq_acc; /* (B, Hq, Sq, D) float32 */
    float *dsum;   /* (B, Hq, Sq) float32    */
    int *sem;      /* (B, Hq, n_qblocks, split) int32, deterministic mode only */
    int B, Sq, Sk, Hq, Hkv, group; /* group = Hq / Hkv */
    float scale;                   /* softmax scale, > 0    */
    float scale_log2;              /* scale * log2(e)       */
    int causal;                    /* bottom-right aligned  */
    int deterministic;             /* dQ summed in K-block order, no float atomics */
} attn_bwd_args;

/* Launches the three kernels (preprocess, main, postprocess) of one variant on stream. */
typedef cudaError_t (*attn_bwd_launch_fn)(const attn_bwd_args *args, cudaStream_t stream);

typedef struct attn_bwd_variant {
    const char *name;   /* attn_bwd_<dtype>_<arch>_d<D>_<Br>x<Bc>[_s<split>]               */
    flashc_dtype dtype; /* FLASHC_BF16 or FLASHC_F16                                        */
    int head_dim;
    int min_cc;         /* minimum compute capability, 10 * major + minor                   */
    int block_q, block_k;
    int split;          /* thread blocks per K/V block, each owning head_dim / split columns */
    int smem_bytes;     /* dynamic shared memory of the main kernel                         */
    attn_bwd_launch_fn launch;
} attn_bwd_variant;

/* attn_bwd_sm80.cu */
extern const attn_bwd_variant attn_bwd_sm80_variants[];
extern const int attn_bwd_sm80_variant_count;

#endif /* FLASHC_CUDA_ATTN_CUDA_CUH */
