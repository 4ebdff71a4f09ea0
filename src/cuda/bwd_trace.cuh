/*
 * bwd_trace.cuh — the host side of FLASHC_CUDA_BWD_TRACE (bwd_trace.cu), the Hopper backward's
 * block-by-block record: the Hopper kernels (attn_bwd_sm90h.cu, attn_bwd_sm90v3.cu) have traced
 * twins that write %clock64 stamps of each block's steps into a device buffer; this reads the
 * variable, allocates and clears the buffer, and after the launch writes the file that
 * bench/gpu/bwd_trace.py reads. A diagnostic: the traced call synchronizes its stream. Internal
 * (cuda_*: local to libflashc.so by src/flashc.map).
 */
#ifndef FLASHC_CUDA_BWD_TRACE_CUH
#define FLASHC_CUDA_BWD_TRACE_CUH

#include "attn_cuda.cuh"

#include <cuda_runtime.h>
#include <stdint.h>

/* The file's header (little-endian, as the host's memory): magic "FCBWDTR1", 16 int32, the
 * record's size in words. version: the record's layout, 1 sm90h's (attn_bwd_sm90h.cu, H_TRACE),
 * 2 sm90v3's writer-warp kernels (attn_bwd_sm90v3.cu, V3_TRACE). Then hdr_words per block
 * followed by it_words per step, maxit steps a block, blocks y * grid_x + x in order. */
struct cuda_bwd_trace_head {
    char magic[8];
    int32_t version, grid_x, grid_y, maxit, bm, bn, d, det, has_hi, sq, sk, group, hkv, b,
        hdr_words, it_words;
    int64_t words;
};

/* FLASHC_CUDA_BWD_TRACE, read at every call: the path, or NULL (unset or empty). */
const char *cuda_bwd_trace_path(void);

/* hd with the kernel's fields set (version, grid_x, grid_y, bm, bn, d, hdr_words, it_words):
 * the problem's fields from a (maxit: a's Q blocks of bm rows over its query-head group), the
 * magic and the size filled in, and the record's device buffer, zeroed, on stream, from the
 * library's scratch pool. */
cudaError_t cuda_bwd_trace_begin(cuda_bwd_trace_head *hd, const attn_bwd_args *a, uint64_t **dbuf,
                                 cudaStream_t stream);

/* After the traced launch (err: its launch status): waits for the stream, writes the record to
 * path (replacing it; a path that cannot be written leaves no file and no error) and frees
 * dbuf. Returns err, else the first error of these steps. */
cudaError_t cuda_bwd_trace_finish(cudaError_t err, const char *path, uint64_t *dbuf,
                                  const cuda_bwd_trace_head *hd, cudaStream_t stream);

#endif
