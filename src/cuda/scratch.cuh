/*
 * scratch.cuh — the library's stream-ordered device scratch (scratch.cu), taken by every CUDA
 * entry point that allocates for itself: the backward's workspace and the split-KV partials when
 * the caller passes none, the sm90 forward's tile counter, the context-parallel ring buffers, the
 * RMSNorm backward's dw partials. Internal (cuda_*: local to libflashc.so by src/flashc.map).
 */
#ifndef FLASHC_CUDA_SCRATCH_CUH
#define FLASHC_CUDA_SCRATCH_CUH

#include <cuda_runtime.h>
#include <stddef.h>

/* *p = bytes of device memory of the current device (which must be the stream's), ordered on
 * stream s as cudaMallocAsync; from the library's retained pool of that device, else (no pool
 * could be made, or the pool failed: out of memory, say) from cudaMallocAsync's pool.
 * Capturable in a CUDA graph (an allocation node, owned by the graph). A failure is returned
 * with the runtime's last error cleared. */
cudaError_t cuda_scratch_alloc(void **p, size_t bytes, cudaStream_t s);
/* Returns p (from cuda_scratch_alloc) to its pool once s reaches this point: cudaFreeAsync. */
cudaError_t cuda_scratch_free(void *p, cudaStream_t s);

#endif
