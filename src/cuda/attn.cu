/*
 * attn.cu — the CUDA backend's attention dispatch: "is this supported?", variant choice,
 * launch and error mapping. The kernels live one family per file (attn_fwd_sm80.cu, ...),
 * each exporting a table of variants; this file is the only one that knows all tables.
 */
#include "attn_cuda.cuh"

#include <math.h>
#include <stdio.h>

static const char FN[] = "flashc_attn_fwd";

/* Every variant table, lowest architecture first. A Hopper kernel adds its table here. */
static const struct {
    const attn_fwd_variant *v;
    const int *count;
} variant_tables[] = {
    {attn_fwd_sm80_variants, &attn_fwd_sm80_variant_count},
};

/*
 * CUDA errors. The runtime keeps one "last error" per thread that the application reads with
 * cudaGetLastError. The library never takes an error that is not its own: an error already
 * pending when a call starts (a failed call the application has not checked) makes the call
 * refuse at once with FLASHC_ERR_DEVICE, leaving that error in place, so a launch error is
 * never confused with it. An error of a runtime call the library made itself is reported as
 * FLASHC_ERR_DEVICE with CUDA's name and message, and cleared (it was the library's, and none
 * was pending), so the application's next check does not see a stale flashc failure. Errors a
 * kernel raises while running (asynchronous) surface at the application's next synchronisation,
 * as for any kernel.
 */
static flashc_status check_no_pending_error(void)
{
    const cudaError_t e = cudaPeekAtLastError(); /* peek: the error stays the application's */
    if (e != cudaSuccess)
        return flashc__fail(FLASHC_ERR_DEVICE,
                            "%s: a CUDA error is pending from before this call (%s: %s); it is "
                            "left for the application, and nothing was launched",
                            FN, cudaGetErrorName(e), cudaGetErrorString(e));
    return FLASHC_OK;
}

/* A runtime call of the library failed: FLASHC_ERR_DEVICE with CUDA's message, error cleared. */
static flashc_status device_error(const char *what, cudaError_t e)
{
    (void)cudaGetLastError();
    return flashc__fail(FLASHC_ERR_DEVICE, "%s: %s failed: %s (%s)", FN, what,
                        cudaGetErrorString(e), cudaGetErrorName(e));
}

/* The current device and its compute capability as 10 * major + minor, or -1 with a message. */
static int current_cc(flashc_status *st, int *device)
{
    int dev = 0, major = 0, minor = 0;
    cudaError_t err = cudaGetDevice(&dev);
    if (err == cudaSuccess)
        err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    if (err == cudaSuccess)
        err = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    if (err != cudaSuccess) {
        *st = device_error("querying the current CUDA device", err);
        return -1;
    }
    if (device)
        *device = dev;
    return 10 * major + minor;
}

/* Where ptr lives, as the kernel needs it: memory of the current device, or managed memory
 * (device-accessible; pages migrate on demand). Host memory, pinned or not, and memory of
 * another device are refused with FLASHC_ERR_INVALID_ARGUMENT saying which. */
static flashc_status check_memory(const char *name, const void *ptr, int dev)
{
    cudaPointerAttributes attr;
    const cudaError_t err = cudaPointerGetAttributes(&attr, ptr);
    if (err == cudaErrorInvalidValue) { /* (runtimes before 11: an unregistered host pointer) */
        (void)cudaGetLastError();
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                            "%s: %s is marked FLASHC_DEVICE_CUDA but is host memory", FN, name);
    }
    if (err != cudaSuccess)
        return device_error("cudaPointerGetAttributes", err);
    switch (attr.type) {
    case cudaMemoryTypeDevice:
        if (attr.device != dev)
            return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                                "%s: %s is memory of CUDA device %d but the current device is %d "
                                "(the kernel runs on the current device: cudaSetDevice(%d) first)",
                                FN, name, attr.device, dev, attr.device);
        return FLASHC_OK;
    case cudaMemoryTypeManaged:
        return FLASHC_OK;
    case cudaMemoryTypeHost:
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                            "%s: %s is marked FLASHC_DEVICE_CUDA but is pinned host memory "
                            "(cudaMallocHost / cudaHostRegister); pass device memory",
                            FN, name);
    default:
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                            "%s: %s is marked FLASHC_DEVICE_CUDA but is host memory", FN, name);
    }
}

/* The variant for p's dtype and head dim with the highest architecture the device reaches. */
static const attn_fwd_variant *pick_variant(const attn_problem *p, int cc)
{
    const attn_fwd_variant *best = NULL;
    for (size_t t = 0; t < sizeof variant_tables / sizeof variant_tables[0]; t++)
        for (int i = 0; i < *variant_tables[t].count; i++) {
            const attn_fwd_variant *v = &variant_tables[t].v[i];
            if (v->dtype == p->dtype && v->head_dim == p->D && v->min_cc <= cc &&
                (!best || v->min_cc > best->min_cc))
                best = v;
        }
    return best;
}

/* A 4-d (B, S, H, D) operand: device memory, unit feature stride, 16-byte rows. */
static flashc_status check_operand(const char *name, const void *ptr, const int64_t *st, int dev)
{
    if (st[3] != 1)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "%s: the CUDA backend needs %s.stride[3] == 1 (got %lld)", FN, name,
                            (long long)st[3]);
    if ((uintptr_t)ptr % 16 != 0 || st[0] % 8 != 0 || st[1] % 8 != 0 || st[2] % 8 != 0)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "%s: the CUDA backend loads 16-byte chunks: %s must be 16-byte aligned "
                            "with strides that are multiples of 8 elements (got %lld, %lld, %lld)",
                            FN, name, (long long)st[0], (long long)st[1], (long long)st[2]);
    return check_memory(name, ptr, dev);
}

extern "C" flashc_status cuda_attn_fwd_supports(const attn_problem *p)
{
    if (p->dtype != FLASHC_BF16 && p->dtype != FLASHC_F16)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED_DTYPE,
                            "%s: the CUDA backend supports bf16 and fp16 storage only "
                            "(%s given)",
                            FN, flashc__dtype_name(p->dtype));
    if (p->D != 64 && p->D != 96 && p->D != 128 && p->D != 256)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "%s: the CUDA backend supports head dims 64, 96, 128 and 256 (got %lld)",
                            FN, (long long)p->D);
    if (!(p->scale > 0.0f))
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "%s: the CUDA backend needs softmax_scale > 0 (got %g)", FN,
                            (double)p->scale);
    /* Row and block indices are 32-bit inside the kernel (offsets are 64-bit); one grid
     * dimension holds every (Q tile, batch, head) block. */
    if (p->Sq > (1 << 30) || p->Sk > (1 << 30) ||
        (p->Sq + 63) / 64 * p->B * p->Hq > 0x7fffffff)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "%s: the CUDA backend takes Sq, Sk <= 2^30 and at most 2^31 - 1 "
                            "thread blocks of 64 query rows (got B = %lld, Sq = %lld, Sk = %lld, "
                            "Hq = %lld)",
                            FN, (long long)p->B, (long long)p->Sq, (long long)p->Sk,
                            (long long)p->Hq);
    flashc_status st = check_no_pending_error();
    if (st != FLASHC_OK)
        return st;
    int dev = 0;
    const int cc = current_cc(&st, &dev);
    if (cc < 0)
        return st;
    const attn_fwd_variant *v = pick_variant(p, cc);
    if (!v)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "%s: no CUDA kernel for this device (compute capability %d.%d; "
                            "sm_80 or newer needed)",
                            FN, cc / 10, cc % 10);
    if ((p->br && p->br != v->block_q) || (p->bc && p->bc != v->block_k))
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "%s: the CUDA kernel for this problem uses tiles %d x %d; "
                            "pass block_q = block_k = 0 or those values (got %lld x %lld)",
                            FN, v->block_q, v->block_k, (long long)p->br, (long long)p->bc);
    if ((st = check_operand("q", p->q, p->sq, dev)) != FLASHC_OK ||
        (st = check_operand("k", p->k, p->sk, dev)) != FLASHC_OK ||
        (st = check_operand("v", p->v, p->sv, dev)) != FLASHC_OK ||
        (st = check_operand("o", p->o, p->so, dev)) != FLASHC_OK)
        return st;
    if (p->lse && (st = check_memory("lse", p->lse, dev)) != FLASHC_OK)
        return st;
    return FLASHC_OK;
}

extern "C" flashc_status cuda_attn_fwd(const attn_problem *p, flashc_attn_stats *stats)
{
    flashc_status st = check_no_pending_error(); /* (supports() checked; nothing ran since) */
    if (st != FLASHC_OK)
        return st;
    const int cc = current_cc(&st, NULL);
    if (cc < 0)
        return st;
    const attn_fwd_variant *v = pick_variant(p, cc); /* non-NULL: supports() ran first */

    attn_fwd_args a;
    a.q = p->q, a.k = p->k, a.v = p->v, a.o = p->o, a.lse = p->lse;
    for (int i = 0; i < 3; i++) {
        a.sq[i] = p->sq[i], a.sk[i] = p->sk[i], a.sv[i] = p->sv[i], a.so[i] = p->so[i];
        a.slse[i] = p->slse[i];
    }
    a.B = (int)p->B, a.Sq = (int)p->Sq, a.Sk = (int)p->Sk, a.Hq = (int)p->Hq;
    a.group = (int)(p->Hq / p->Hkv);
    a.scale = p->scale;
    a.scale_log2 = (float)((double)p->scale * 1.4426950408889634);
    a.causal = p->causal;
    /* Heads scheduled together: their K and V (read by every Q tile of the head) should fit
     * in about half of the L2 (60 MB on an H100/H200, 40 MB on an A100), so longest-first
     * ordering across heads does not turn K/V reuse into HBM traffic. */
    const int64_t kv_bytes = 2 * p->Sk * p->D * 2;
    const int64_t fit = (int64_t)(20 << 20) / (kv_bytes > 0 ? kv_bytes : 1);
    a.head_group = (int)(fit < 1 ? 1 : fit > p->B * p->Hq ? p->B * p->Hq : fit);

    /* No error was pending at entry, so what the launch reports (cudaFuncSetAttribute, the
     * launch configuration, a bad stream) is this launch's own. */
    const cudaError_t err = v->launch(&a, (cudaStream_t)p->stream);
    if (err != cudaSuccess) {
        char what[96];
        snprintf(what, sizeof what, "launching %s", v->name);
        return device_error(what, err);
    }

    const int64_t heads = p->B * p->Hq;
    const int64_t nqb = (p->Sq + v->block_q - 1) / v->block_q;
    stats->tile_pairs = heads * attn_tile_pairs_per_head(p, v->block_q, v->block_k);
    stats->tile_pairs_total = heads * nqb * ((p->Sk + v->block_k - 1) / v->block_k);
    stats->block_q = v->block_q;
    stats->block_k = v->block_k;
    return FLASHC_OK;
}

extern "C" int cuda_device_available(void)
{
    int n = 0;
    const cudaError_t pending = cudaPeekAtLastError();
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        if (pending == cudaSuccess) /* clear only an error of our own */
            (void)cudaGetLastError();
        return 0;
    }
    return n > 0;
}

extern "C" const char *cuda_build_info(void)
{
    static char info[96];
    snprintf(info, sizeof info, "sm_80 sm_90a, nvcc %d.%d", __CUDACC_VER_MAJOR__,
             __CUDACC_VER_MINOR__);
    return info;
}
