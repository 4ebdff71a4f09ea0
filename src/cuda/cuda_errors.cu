/*
 * cuda_errors.cu — the CUDA error contract every CUDA entry point follows (attn.cu, attn_bwd.cu).
 *
 * The runtime keeps one "last error" per host thread, which the application reads with
 * cudaGetLastError. The library never takes an error that is not its own: an error already
 * pending when a call starts (a failed call the application has not checked yet) makes the call
 * refuse at once with FLASHC_ERR_DEVICE, leaving that error in place, so a launch error is never
 * confused with it. An error of a runtime call the library made itself is FLASHC_ERR_DEVICE with
 * CUDA's name and message, and is cleared (it was the library's, and none was pending), so the
 * application's next check does not see a stale flashc failure. Errors a kernel raises while it
 * runs (asynchronously) surface at the application's next synchronisation, as for any kernel.
 */
#include "attn_cuda.cuh"

flashc_status cuda_check_no_pending_error(const char *fn)
{
    const cudaError_t e = cudaPeekAtLastError(); /* peek: the error stays the application's */
    if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice ||
        e == cudaErrorInitializationError) /* no usable device: nobody's pending error */
        return flashc__fail(FLASHC_ERR_DEVICE, "%s: no usable CUDA device (%s: %s)", fn,
                            cudaGetErrorName(e), cudaGetErrorString(e));
    if (e != cudaSuccess)
        return flashc__fail(FLASHC_ERR_DEVICE,
                            "%s: a CUDA error is pending from before this call (%s: %s); it is "
                            "left for the application, and nothing was launched",
                            fn, cudaGetErrorName(e), cudaGetErrorString(e));
    return FLASHC_OK;
}

flashc_status cuda_device_error(const char *fn, const char *what, cudaError_t e)
{
    (void)cudaGetLastError();
    return flashc__fail(FLASHC_ERR_DEVICE, "%s: %s failed: %s (%s)", fn, what,
                        cudaGetErrorString(e), cudaGetErrorName(e));
}

flashc_status cuda_check_memory(const char *fn, const char *name, const void *ptr)
{
    int dev = 0;
    cudaError_t err = cudaGetDevice(&dev);
    if (err != cudaSuccess)
        return cuda_device_error(fn, "cudaGetDevice", err);
    cudaPointerAttributes attr;
    err = cudaPointerGetAttributes(&attr, ptr);
    if (err == cudaErrorInvalidValue) { /* (runtimes before 11: an unregistered host pointer) */
        (void)cudaGetLastError();
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                            "%s: %s is marked FLASHC_DEVICE_CUDA but is host memory", fn, name);
    }
    if (err != cudaSuccess)
        return cuda_device_error(fn, "cudaPointerGetAttributes", err);
    switch (attr.type) {
    case cudaMemoryTypeDevice:
        if (attr.device != dev)
            return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                                "%s: %s is memory of CUDA device %d but the current device is %d "
                                "(the kernels run on the current device: cudaSetDevice(%d) first)",
                                fn, name, attr.device, dev, attr.device);
        return FLASHC_OK;
    case cudaMemoryTypeManaged: /* device-accessible; pages migrate on demand */
        return FLASHC_OK;
    case cudaMemoryTypeHost:
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                            "%s: %s is marked FLASHC_DEVICE_CUDA but is pinned host memory "
                            "(cudaMallocHost / cudaHostRegister); pass device memory",
                            fn, name);
    default:
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                            "%s: %s is marked FLASHC_DEVICE_CUDA but is host memory", fn, name);
    }
}

extern "C" flashc_status cuda_copy_to_host(const char *fn, void *dst, const void *src, size_t bytes,
                                void *stream)
{
    cudaStream_t st = (cudaStream_t)stream;
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, st);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(st);
    return e == cudaSuccess ? FLASHC_OK
                            : cuda_device_error(fn, "copying the index tensors to the host "
                                                    "(params.validate_indices)", e);
}
