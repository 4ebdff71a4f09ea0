/*
 * scratch.cu — the library's own memory pool for its stream-ordered device scratch, one a
 * device, created at the first use (scratch.cuh).
 *
 * Why not cudaMallocAsync alone: it takes the device's current pool, by default the default
 * pool, whose release threshold is 0. At every stream / event / device synchronisation that pool
 * hands its free memory back to the OS, and the next cudaMallocAsync maps memory again, on the
 * host, before the call's first launch. A training step or a bench batch that synchronises once
 * pays it once a step: 6-7 us a call on the RMSNorm backward, bf16 16384 x 4096, in batches of
 * 20 calls (H200, 2026-12-03, bench/RESULTS.md "Shared CUDA scratch pool"). This pool keeps up
 * to KEEP bytes reserved across synchronisations.
 *
 * KEEP = 64 MiB. It holds in full every scratch that costs little device time next to its
 * mapping: the dw partials (G x D float32, at most ~34 MiB), the split-KV partials of serving
 * shapes (B Hq Sq splits Dv float32: 64 x 32 x 1 x 16 x 128 is 16 MiB), the 4-byte tile
 * counters, the backward's workspace up to B Hq Sq D ~ 16 M (4096 rows of 32 heads at d 128).
 * A larger workspace (the backward's float32 dQ accumulator can take hundreds of MiB) is
 * released at the synchronisation, as before, and mapped again by the next call; that call's
 * kernels then run for milliseconds (their time grows with Sq x Sk, the mapping with Sq), so
 * the mapping is a small share of it, and memory of that size is not held idle behind the
 * caller's back. A caller that wants nothing held passes a workspace where the API takes one.
 * The pool keeps at most its high-water mark down to KEEP; it is never destroyed (the process's
 * exit returns it).
 */
#include "scratch.cuh"

#include <mutex>
#include <stdint.h>
#include <string.h>

namespace {

constexpr uint64_t KEEP = (uint64_t)64 << 20;
constexpr int MAX_DEV = 64; /* devices beyond take cudaMallocAsync */

std::mutex pool_mu;
cudaMemPool_t pool_tab[MAX_DEV];
bool pool_bad[MAX_DEV]; /* creation failed once: not retried */

/* The first call may come while its stream is being captured into a CUDA graph, and a
 * capture in the default (global) mode forbids this thread, and every other one, "potentially
 * unsafe" calls, on pain of invalidating the capture. Making a pool (or trimming one) enqueues
 * nothing on any stream, so it is safe: the thread's mode is relaxed around it, as the CUDA
 * reference suggests (cudaThreadExchangeStreamCaptureMode, push-pop). */
struct relaxed_capture {
    cudaStreamCaptureMode old = cudaStreamCaptureModeRelaxed;
    bool swapped;
    relaxed_capture() { swapped = cudaThreadExchangeStreamCaptureMode(&old) == cudaSuccess; }
    ~relaxed_capture()
    {
        if (swapped)
            (void)cudaThreadExchangeStreamCaptureMode(&old);
    }
};

cudaMemPool_t pool_of(int dev)
{
    if (dev < 0 || dev >= MAX_DEV)
        return NULL;
    std::lock_guard<std::mutex> lock(pool_mu);
    if (!pool_tab[dev] && !pool_bad[dev]) {
        relaxed_capture rc;
        cudaMemPoolProps pp;
        memset(&pp, 0, sizeof pp);
        pp.allocType = cudaMemAllocationTypePinned;
        pp.handleTypes = cudaMemHandleTypeNone;
        pp.location.type = cudaMemLocationTypeDevice;
        pp.location.id = dev;
        cudaMemPool_t m = NULL;
        cudaError_t err = cudaMemPoolCreate(&m, &pp);
        if (err == cudaSuccess) {
            uint64_t keep = KEEP;
            err = cudaMemPoolSetAttribute(m, cudaMemPoolAttrReleaseThreshold, &keep);
            if (err != cudaSuccess)
                (void)cudaMemPoolDestroy(m);
        }
        if (err == cudaSuccess)
            pool_tab[dev] = m;
        else
            (void)cudaGetLastError(), pool_bad[dev] = true;
    }
    return pool_tab[dev];
}

} // namespace

cudaError_t cuda_scratch_alloc(void **p, size_t bytes, cudaStream_t s)
{
    int dev = 0;
    cudaMemPool_t m = NULL;
    if (cudaGetDevice(&dev) == cudaSuccess)
        m = pool_of(dev);
    else
        (void)cudaGetLastError();
    if (m) {
        const cudaError_t err = cudaMallocFromPoolAsync(p, bytes, m, s);
        if (err == cudaSuccess)
            return err;
        /* Whatever failed, the call goes on as it did before this pool, from the default pool
         * (which may hold free memory of its own; and a pool destroyed by cudaDeviceReset
         * leaves the call working), and reports that pool's error. Out of memory: first hand
         * back what this pool holds unused. */
        (void)cudaGetLastError();
        if (err == cudaErrorMemoryAllocation) {
            relaxed_capture rc;
            (void)cudaMemPoolTrimTo(m, 0);
            (void)cudaGetLastError();
        }
    }
    const cudaError_t err = cudaMallocAsync(p, bytes, s);
    if (err != cudaSuccess)
        (void)cudaGetLastError();
    return err;
}

cudaError_t cuda_scratch_free(void *p, cudaStream_t s) { return cudaFreeAsync(p, s); }
