/*
 * rows_copy.cu — plain copies of a bf16 (T, D) tensor written the way the RMSNorm kernels of
 * src/cuda/rows_v4.cu access memory, so that a benchmark shows what each access pattern itself
 * reaches (bench/gpu/bench_rows4.py --copylib; the gap between a kernel and its own copy is the cost of
 * its arithmetic and its dependency on the row's sum, not of the pattern):
 *   kind 0  flat: a grid-stride loop over 16-byte chunks, 4 a thread (a torch-style copy);
 *           p0 = load mode, p1 = store mode (rows_v4.cu's hint modes)
 *   kind 1  rows in registers, rms_fwd_v4's pattern: p0 = P (0 grid over rows, 1 persistent
 *           with the next row prefetched), p1 = W warps a block, p2 = B blocks a SM, p3 = H
 *   kind 2  rows through shared memory by bulk copies, rms_fwd_tma's pattern: p0 = W,
 *           p1 = S slots a warp, p2 = B, p3 = H
 *   kind 3  rows on R warps (rms_fwd_v4 with the knob R): one row a block of 32 R threads,
 *           16 / R chunks a lane (rows of 512 chunks); p0 = R (2, 4, 8), p3 = H
 *   kind 0 also takes p2 = 1: launched as a programmatic dependent (rms_fwd_v4's knob L)
 *   rows_copy3(x, z, y, T, D, pdl): y = x ^ z bitwise, flat as kind 0 (ld.cs / st.cs): the
 *           backward's traffic (two reads, one write a byte written)
 *   rows_copy3r(x, z, y, T, D, G, flags): the same in rms_bwd_reg's pattern (copy_rows3)
 * Bench-only, not part of the library: the device script builds it with nvcc beside the tree
 * (-I src/cuda -I src/core -I include -I BUILD/include), sm_90a.
 *   extern "C" int rows_copy(int kind, const void *x, void *y, long long T, long long D,
 *                            int p0, int p1, int p2, int p3)   0 or the CUDA error
 */
#define FLASHC_ROWS_V4_KERNELS_ONLY
#include "rows_v4.cu"

typedef __nv_bfloat16 bf16;

__global__ void copy_flat(const uint4 *x, uint4 *y, int64_t n, int lm, int sm, int pdl)
{
    if (pdl) {
        ptx_griddep_launch_dependents();
        ptx_griddep_wait();
    }
    const uint64_t pol = l2_evict_first(), spol = l2_policy(sm ? sm : 1);
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += 4 * stride) {
        uint4 u[4];
#pragma unroll
        for (int j = 0; j < 4; j++)
            if (i + j * stride < n)
                u[j] = lm == 1 ? ld_na_pol(x + i + j * stride, pol) : lm == 2 ? ld_na_256(x + i + j * stride)
                     : lm == 3 ? ld_reuse(x + i + j * stride) : ld_stream(x + i + j * stride);
#pragma unroll
        for (int j = 0; j < 4; j++)
            if (i + j * stride < n) {
                if (sm)
                    st_pol(y + i + j * stride, u[j], spol);
                else
                    st_stream(y + i + j * stride, u[j]);
            }
    }
}

__global__ void copy_flat3(const uint4 *x, const uint4 *z, uint4 *y, int64_t n, int pdl)
{
    if (pdl) {
        ptx_griddep_launch_dependents();
        ptx_griddep_wait();
    }
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += 4 * stride) {
        uint4 u[4], v[4];
#pragma unroll
        for (int j = 0; j < 4; j++)
            if (i + j * stride < n)
                u[j] = ld_stream(x + i + j * stride), v[j] = ld_stream(z + i + j * stride);
#pragma unroll
        for (int j = 0; j < 4; j++)
            if (i + j * stride < n)
                st_stream(y + i + j * stride, make_uint4(u[j].x ^ v[j].x, u[j].y ^ v[j].y, u[j].z ^ v[j].z, u[j].w ^ v[j].w));
    }
}

/* The backward's traffic in rms_bwd_reg's pattern (src/cuda/rows.cu): a persistent grid of G
 * blocks of 128 threads, block b on rows b, b + G, ..., thread k on chunks k + 128 j (j < 4) of
 * a 512-chunk row, the next row's x and z loaded before the current row is stored; y = x ^ z.
 * PL: ld.global.nc / plain stores rather than ld.cs / st.cs; BAR: one block barrier a row
 * (where rms_bwd_reg has its row sums' barrier). */
template <bool PL, bool BAR> __global__ void __launch_bounds__(128) copy_rows3(const uint4 *x, const uint4 *z, uint4 *y, int64_t T)
{
    constexpr int NVT = 4;
    const int64_t nc = 512, G = gridDim.x;
    uint4 xr[NVT], zr[NVT];
    auto load = [&](int64_t r) {
#pragma unroll
        for (int j = 0; j < NVT; j++) {
            const int64_t c = r * nc + threadIdx.x + 128 * j;
            xr[j] = PL ? ld_reuse(x + c) : ld_stream(x + c);
            zr[j] = PL ? ld_reuse(z + c) : ld_stream(z + c);
        }
    };
    int64_t t = blockIdx.x;
    if (t < T)
        load(t);
    for (; t < T; t += G) {
        uint4 o[NVT];
#pragma unroll
        for (int j = 0; j < NVT; j++)
            o[j] = make_uint4(xr[j].x ^ zr[j].x, xr[j].y ^ zr[j].y, xr[j].z ^ zr[j].z, xr[j].w ^ zr[j].w);
        if (t + G < T)
            load(t + G);
        if (BAR)
            __syncthreads();
#pragma unroll
        for (int j = 0; j < NVT; j++) {
            uint4 *q = y + t * nc + threadIdx.x + 128 * j;
            if (PL)
                *q = o[j];
            else
                st_stream(q, o[j]);
        }
    }
}

template <int NVT, bool PF, int SM>
__global__ void __maxnreg__((fwd4_regs<NVT, false, PF>())) copy_rows(fwd4_args a, int wpr)
{
    const int tpr = 32 * wpr;
    const int lane = (int)(threadIdx.x % tpr);
    const int64_t gpb = blockDim.x / tpr, NG = (int64_t)gridDim.x * gpb;
    const int64_t nc = a.D / chunk<bf16>::n;
    const uint64_t pol = a.lm == 1 ? l2_evict_first() : 0, spol = SM ? l2_policy(a.sm) : 0;
    int64_t t = (int64_t)blockIdx.x * gpb + threadIdx.x / tpr;
    uint4 u[NVT], nu[NVT];
    if (PF && t < a.T)
        ldh_row<bf16, NVT>(nu, (const bf16 *)a.x + t * a.sx, lane, tpr, nc, a.lm, pol);
    for (; t < a.T; t += NG) {
        if (PF) {
#pragma unroll
            for (int j = 0; j < NVT; j++)
                u[j] = nu[j];
            if (t + NG < a.T)
                ldh_row<bf16, NVT>(nu, (const bf16 *)a.x + (t + NG) * a.sx, lane, tpr, nc, a.lm, pol);
        } else {
            ldh_row<bf16, NVT>(u, (const bf16 *)a.x + t * a.sx, lane, tpr, nc, a.lm, pol);
        }
        sth_row<bf16, NVT, SM>((bf16 *)a.y + t * a.sy, u, lane, tpr, nc, spol);
        if (!PF)
            break;
    }
}

template <int SM> __global__ void __launch_bounds__(256) copy_tma(fwd4_args a, int S)
{
#if FLASHC_PTX_SM90A
    constexpr int NVT = 16;
    extern __shared__ __align__(128) uint4 cring[];
    __shared__ __align__(8) uint64_t bar[8 * 8];
    const int lane = threadIdx.x % 32, wid = threadIdx.x / 32, W = blockDim.x / 32;
    const int64_t nc = a.D / chunk<bf16>::n, slot = nc;
    const uint32_t rowb = (uint32_t)(a.D * 2);
    uint4 *mine = cring + (int64_t)wid * S * slot;
    uint64_t *mb = bar + wid * 8;
    const int64_t NG = (int64_t)gridDim.x * W, t0 = (int64_t)blockIdx.x * W + wid;
    const uint64_t pol = l2_evict_first(), spol = SM ? l2_policy(a.sm) : 0;
    auto issue = [&](int64_t t, int s) {
        if (t < a.T) {
            const uint32_t b = ptx_smem_addr(&mb[s]);
            ptx_mbarrier_arrive_expect_tx(b, rowb);
            if (a.lm & 1)
                ptx_bulk_load_hint(ptx_smem_addr(mine + s * slot), (const bf16 *)a.x + t * a.sx, rowb, b, pol);
            else
                ptx_bulk_load(ptx_smem_addr(mine + s * slot), (const bf16 *)a.x + t * a.sx, rowb, b);
        }
    };
    if (lane == 0) {
        for (int s = 0; s < S; s++)
            ptx_mbarrier_init(ptx_smem_addr(&mb[s]), 1);
        ptx_fence_mbarrier_init();
        for (int s = 0; s < S; s++)
            issue(t0 + s * NG, s);
    }
    __syncwarp();
    int s = 0;
    uint32_t ph = 0;
    for (int64_t t = t0; t < a.T; t += NG) {
        ptx_mbarrier_wait(ptx_smem_addr(&mb[s]), ph);
        const uint4 *d = mine + s * slot;
        uint4 u[NVT];
        uint32_t dep = 0;
#pragma unroll
        for (int j = 0; j < NVT; j++)
            if (lane + (int64_t)j * 32 < nc)
                u[j] = d[lane + j * 32], dep ^= u[j].x;
        /* as rms_fwd_tma: every lane's reads done (a value depending on them all) before the
         * slot is refilled */
        dep = __reduce_xor_sync(0xffffffffu, dep);
        if (lane == 0) {
            asm volatile("" ::"r"(dep));
            ptx_fence_proxy_async_shared();
            issue(t + (int64_t)S * NG, s);
        }
        sth_row<bf16, NVT, SM>((bf16 *)a.y + t * a.sy, u, lane, 32, nc, spol);
        if (++s == S)
            s = 0, ph ^= 1;
    }
#else
    (void)a, (void)S;
#endif
}

static int dev_attr(cudaDeviceAttr a)
{
    int d = 0, v = 0;
    (void)cudaGetDevice(&d);
    (void)cudaDeviceGetAttribute(&v, a, d);
    return v;
}

extern "C" int rows_copy(int kind, const void *x, void *y, long long T, long long D, int p0, int p1,
                         int p2, int p3)
{
    const int sms = dev_attr(cudaDevAttrMultiProcessorCount);
    const int smem_sm = dev_attr(cudaDevAttrMaxSharedMemoryPerMultiprocessor);
    const int optin = dev_attr(cudaDevAttrMaxSharedMemoryPerBlockOptin);
    const int reserve = dev_attr(cudaDevAttrReservedSharedMemoryPerBlock);
    fwd4_args a;
    memset(&a, 0, sizeof a);
    a.x = x, a.y = y, a.sx = D, a.sy = D, a.T = T, a.D = D;
    const int64_t nc = D / 8;
    if (kind == 0) {
        const int64_t n = T * nc;
        int64_t grid = (n + 4 * 256 - 1) / (4 * 256);
        if (!p2) {
            copy_flat<<<(unsigned)grid, 256>>>((const uint4 *)x, (uint4 *)y, n, p0, p1, 0);
            return (int)cudaGetLastError();
        }
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3((unsigned)grid), cfg.blockDim = dim3(256), cfg.dynamicSmemBytes = 0, cfg.stream = 0;
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = at, cfg.numAttrs = 1;
        (void)cudaLaunchKernelEx(&cfg, copy_flat, (const uint4 *)x, (uint4 *)y, n, p0, p1, 1);
        return (int)cudaGetLastError();
    }
    if (kind == 3) {
        const int R = p0, H = p3;
        if (nc != 512 || (R != 2 && R != 4 && R != 8))
            return -1;
        a.lm = H % 4, a.sm = H / 4;
        const void *k = R == 2 ? (const void *)copy_rows<8, false, 0>
                      : R == 4 ? (const void *)copy_rows<4, false, 0> : (const void *)copy_rows<2, false, 0>;
        int wpr = R;
        void *args[] = {&a, &wpr};
        (void)cudaLaunchKernel(k, dim3((unsigned)T), dim3(32 * R), args, 0, 0);
        return (int)cudaGetLastError();
    }
    if (kind == 1) {
        const int P = p0, W = p1 > 0 ? p1 : 2, B = p2, H = p3;
        if (nc > 512 || nc < 32)
            return -1;
        a.lm = H % 4, a.sm = H / 4;
        const bool sm = a.sm != 0;
        const void *k = P ? (sm ? (const void *)copy_rows<16, true, 1> : (const void *)copy_rows<16, true, 0>)
                          : (sm ? (const void *)copy_rows<16, false, 1> : (const void *)copy_rows<16, false, 0>);
        cudaFuncAttributes fa;
        (void)cudaFuncGetAttributes(&fa, k);
        (void)cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, optin - (int)fa.sharedSizeBytes);
        size_t smem = 0;
        if (B > 0 && !P) {
            const long s = (long)smem_sm / B - reserve - (long)fa.sharedSizeBytes;
            if (s > 0)
                smem = (size_t)(s < optin - (long)fa.sharedSizeBytes ? s : optin - (long)fa.sharedSizeBytes) & ~(size_t)15;
        }
        int per_sm = 0;
        (void)cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, 32 * W, smem);
        int64_t grid = (T + W - 1) / W;
        if (P) {
            const int64_t g = (int64_t)sms * (B > 0 && B < per_sm ? B : per_sm);
            grid = grid < g ? grid : g;
        }
        int wpr = 1;
        void *args[] = {&a, &wpr};
        (void)cudaLaunchKernel(k, dim3((unsigned)grid), dim3(32 * W), args, smem, 0);
        return (int)cudaGetLastError();
    }
    if (kind == 2) {
        int W = p0 > 0 ? p0 : 4, S = p1 > 0 ? p1 : 3;
        const int B = p2, H = p3;
        if (nc > 512 || nc < 32 || S > 8 || W > 8)
            return -1;
        a.lm = H % 4, a.sm = H / 4;
        const void *k = a.sm ? (const void *)copy_tma<1> : (const void *)copy_tma<0>;
        cudaFuncAttributes fa;
        (void)cudaFuncGetAttributes(&fa, k);
        (void)cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, optin - (int)fa.sharedSizeBytes);
        const size_t slot = (size_t)nc * 16;
        while (W > 0 && (size_t)W * S * slot > (size_t)optin - fa.sharedSizeBytes)
            W--;
        if (W == 0)
            return -1;
        const size_t smem = (size_t)W * S * slot;
        int per_sm = 0;
        (void)cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, 32 * W, smem);
        if (per_sm <= 0)
            return -1;
        int64_t grid = (int64_t)sms * (B > 0 && B < per_sm ? B : per_sm);
        if (grid > (T + W - 1) / W)
            grid = (T + W - 1) / W;
        void *args[] = {&a, &S};
        (void)cudaLaunchKernel(k, dim3((unsigned)grid), dim3(32 * W), args, smem, 0);
        return (int)cudaGetLastError();
    }
    return -1;
}

extern "C" int rows_copy3(const void *x, const void *z, void *y, long long T, long long D, int pdl)
{
    const int64_t n = T * (D / 8);
    const int64_t grid = (n + 4 * 256 - 1) / (4 * 256);
    if (D % 8)
        return -1;
    if (!pdl) {
        copy_flat3<<<(unsigned)grid, 256>>>((const uint4 *)x, (const uint4 *)z, (uint4 *)y, n, 0);
        return (int)cudaGetLastError();
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)grid), cfg.blockDim = dim3(256), cfg.dynamicSmemBytes = 0, cfg.stream = 0;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at, cfg.numAttrs = 1;
    (void)cudaLaunchKernelEx(&cfg, copy_flat3, (const uint4 *)x, (const uint4 *)z, (uint4 *)y, n, 1);
    return (int)cudaGetLastError();
}

/* copy_rows3 (rows of 512 chunks only): G blocks (0: SMs x 3, rms_bwd_reg's occupancy at 164
 * registers), flags bit 0 PL, bit 1 BAR. */
extern "C" int rows_copy3r(const void *x, const void *z, void *y, long long T, long long D, int G, int flags)
{
    if (D / 8 != 512 || D % 8)
        return -1;
    if (G <= 0)
        G = 3 * dev_attr(cudaDevAttrMultiProcessorCount);
    const void *k = flags == 0 ? (const void *)copy_rows3<false, false> : flags == 1 ? (const void *)copy_rows3<true, false>
                  : flags == 2 ? (const void *)copy_rows3<false, true> : (const void *)copy_rows3<true, true>;
    int64_t t = T;
    void *args[] = {&x, &z, &y, &t};
    (void)cudaLaunchKernel(k, dim3((unsigned)G), dim3(128), args, 0, 0);
    return (int)cudaGetLastError();
}
