/*
 * tma_host.cuh — the host side of the Hopper kernels' TMA loads and stores (tma_host.cu): the
 * driver's tensor-map encoder, looked up through the runtime so that the library never links
 * libcuda, and the one map shape every sm90 kernel's bf16 / fp16 operands use. Shared by the
 * forward (attn_fwd_sm90.cu, which keeps a memo of its maps on top) and the backward
 * (attn_bwd_sm90v3.cu, attn_bwd_sm90h.cu), which had three copies of both until 2026-12-06.
 * Internal (cuda_*: local to libflashc.so by src/flashc.map).
 */
#ifndef FLASHC_CUDA_TMA_HOST_CUH
#define FLASHC_CUDA_TMA_HOST_CUH

#include "flashc.h"

#include <cuda.h> /* CUtensorMap and the driver's types only */
#include <stdint.h>

typedef CUresult (*cuda_tma_encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                       const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                       const cuuint32_t *, CUtensorMapInterleave,
                                       CUtensorMapSwizzle, CUtensorMapL2promotion,
                                       CUtensorMapFloatOOBfill);

/* cuTensorMapEncodeTiled through the runtime (the driver is loaded anyway), looked up once;
 * NULL if this driver has none. */
cuda_tma_encode_fn cuda_tma_encoder(void);

/* A (B, S, H, D) bf16 / fp16 operand as the 4-d tensor map (D, S, H, B) with boxes of 64
 * features x rows, 128-byte swizzled (the panels of ptx_sm90.cuh), L2 promotion 256 B. st:
 * batch, seq, head strides in elements. B = 0: a varlen operand, packed (S = total rows, H, D),
 * as a 3-d map (D, S, H) (st[0] unused: a 4-d map of one batch would still need a batch stride
 * the copy engine accepts). D may be below a kernel's instance (padded entries): a box's columns
 * past D arrive as zeros (OOB_FILL_NONE) and still count in a stage's transaction bytes, as rows
 * past S do. Returns 1, or 0 if it does not encode (no encoder, or a stride the copy engine does
 * not take: not a multiple of 16 bytes, >= 2^40, or 0, a broadcast). */
int cuda_tma_map_bshd(CUtensorMap *m, flashc_dtype dt, const void *ptr, int64_t B, int64_t S,
                      int64_t H, int64_t D, const int64_t *st, int rows);

#endif
