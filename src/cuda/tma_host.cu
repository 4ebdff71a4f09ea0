/*
 * tma_host.cu — the driver's tensor-map encoder and the sm90 kernels' operand maps (tma_host.cuh).
 */
#include "tma_host.cuh"

#include <cuda_runtime.h>

cuda_tma_encode_fn cuda_tma_encoder(void)
{
    static cuda_tma_encode_fn fn = NULL;
    static int looked = 0;
    if (!looked) {
        void *p = NULL;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
                                             cudaEnableDefault, &q) != cudaSuccess ||
            q != cudaDriverEntryPointSuccess)
            p = NULL;
        (void)cudaGetLastError();
        fn = (cuda_tma_encode_fn)p;
        looked = 1; /* racing first calls store the same pointer */
    }
    return fn;
}

int cuda_tma_map_bshd(CUtensorMap *m, flashc_dtype dt, const void *ptr, int64_t B, int64_t S,
                      int64_t H, int64_t D, const int64_t *st, int rows)
{
    cuda_tma_encode_fn enc = cuda_tma_encoder();
    if (!enc)
        return 0;
    const cuuint64_t dims[4] = {(cuuint64_t)D, (cuuint64_t)S, (cuuint64_t)H, (cuuint64_t)B};
    const cuuint64_t strides[3] = {(cuuint64_t)st[1] * 2, (cuuint64_t)st[2] * 2,
                                   (cuuint64_t)st[0] * 2};
    const cuuint32_t box[4] = {64, (cuuint32_t)rows, 1, 1};
    const cuuint32_t estr[4] = {1, 1, 1, 1};
    const int rank = B > 0 ? 4 : 3;
    for (int i = 0; i < rank - 1; i++) /* the copy engine's limits on strides */
        if (strides[i] % 16 != 0 || strides[i] >= (1ull << 40) || strides[i] == 0)
            return 0;
    return enc(m, dt == FLASHC_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                    : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
               (cuuint32_t)rank, (void *)ptr, dims, strides, box, estr,
               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
               CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}
