/*
 * bwd_trace.cu — FLASHC_CUDA_BWD_TRACE's host side (bwd_trace.cuh).
 */
#include "bwd_trace.cuh"
#include "scratch.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *cuda_bwd_trace_path(void)
{
    const char *e = getenv("FLASHC_CUDA_BWD_TRACE");
    return e && *e ? e : NULL;
}

cudaError_t cuda_bwd_trace_begin(cuda_bwd_trace_head *hd, const attn_bwd_args *a, uint64_t **dbuf,
                                 cudaStream_t stream)
{
    memcpy(hd->magic, "FCBWDTR1", 8);
    hd->maxit = (int32_t)(a->group * ((a->Sq + hd->bm - 1) / hd->bm));
    hd->det = a->deterministic, hd->has_hi = a->wr >= 0;
    hd->sq = (int32_t)a->Sq, hd->sk = (int32_t)a->Sk, hd->group = (int32_t)a->group;
    hd->hkv = (int32_t)a->Hkv, hd->b = (int32_t)a->B;
    hd->words = (int64_t)hd->grid_x * hd->grid_y *
                (hd->hdr_words + (int64_t)hd->it_words * hd->maxit);
    *dbuf = NULL;
    cudaError_t err = cuda_scratch_alloc((void **)dbuf, (size_t)hd->words * 8, stream);
    if (err == cudaSuccess && (err = cudaMemsetAsync(*dbuf, 0, (size_t)hd->words * 8, stream)) !=
                                  cudaSuccess) {
        (void)cuda_scratch_free(*dbuf, stream);
        *dbuf = NULL;
    }
    return err;
}

cudaError_t cuda_bwd_trace_finish(cudaError_t err, const char *path, uint64_t *dbuf,
                                  const cuda_bwd_trace_head *hd, cudaStream_t stream)
{
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(stream);
    uint64_t *h = err == cudaSuccess ? (uint64_t *)malloc((size_t)hd->words * sizeof *h) : NULL;
    if (h) {
        err = cudaMemcpy(h, dbuf, (size_t)hd->words * sizeof *h, cudaMemcpyDeviceToHost);
        FILE *f = err == cudaSuccess ? fopen(path, "wb") : NULL;
        if (f) {
            const int ok = fwrite(hd, sizeof *hd, 1, f) == 1 &&
                           fwrite(h, sizeof *h, (size_t)hd->words, f) == (size_t)hd->words;
            if (fclose(f) != 0 || !ok)
                remove(path);
        }
        free(h);
    }
    const cudaError_t ferr = cuda_scratch_free(dbuf, stream);
    return err != cudaSuccess ? err : ferr;
}
