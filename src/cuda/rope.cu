/*
 * rope.cu — rotary position embedding on the GPU, in place on q and k (flashc.h's contract).
 *
 * Tables with 16-byte chunks (the common case) take rope_table_vec: a flat grid of work items
 * with no shared memory, reading the angles from the tables per item (L1 hits after a token's
 * first head). Computed angles, element-wise rows, and FLASHC_CUDA_ROWS=v1 take rope_kernel:
 * one block per token (b, s): its rd/2 angles are computed once into shared memory (from the
 * tables, or from pos and theta in float64 then rounded to float32, as the CPU does), then
 * the block's threads sweep every head of q and k. Vector path: each thread rotates one
 * 16-byte chunk of a head (GPT-J: a chunk holds V/2 neighbouring pairs) or, for NeoX, a chunk
 * of the first half and the matching chunk of the second half; the features past rd are never
 * touched. Rows that are not whole 16-byte chunks take the element-wise path (one pair per
 * thread). Reading a position outside the tables gives NaN angles: the kernel cannot report an
 * error, so it makes the bad rows visible instead (flashc.h).
 */
#include "rows_common.cuh"

#include <math.h>

struct rope_args {
    void *q, *k;
    int64_t sq[3], sk[3]; /* batch, seq, head strides (feature stride 1) */
    int Hq, Hk, S;
    int rd;               /* rotated features per head, even                 */
    int style;            /* FLASHC_ROPE_NEOX / FLASHC_ROPE_GPTJ             */
    float sign;           /* -1 for the backward                             */
    double log2_theta;    /* computed angles: a = pos * 2^(-2i/rd * log2 theta) */
    const float *cos, *sin;
    int64_t P, scos[2], ssin[2];
    const int32_t *pos;
    int64_t spos[2], pos_offset;
};

template <typename T, bool VEC> __global__ void rope_kernel(rope_args a)
{
    extern __shared__ float cs[]; /* cos[0..h), sin[h..2h) */
    const int h = a.rd / 2;
    const int64_t tok = blockIdx.x, b = tok / a.S, s = tok % a.S;
    const int64_t pos = a.pos ? (int64_t)a.pos[b * a.spos[0] + s * a.spos[1]] : s + a.pos_offset;
    for (int i = threadIdx.x; i < h; i += blockDim.x) {
        float c, sn;
        if (a.P > 0) {
            if (pos >= 0 && pos < a.P)
                c = a.cos[pos * a.scos[0] + i * a.scos[1]], sn = a.sin[pos * a.ssin[0] + i * a.ssin[1]];
            else
                c = sn = __int_as_float(0x7fc00000); /* NaN: see the file comment */
        } else {
            double sd, cd;
            sincos((double)pos * exp2(-2.0 * (double)i / (double)a.rd * a.log2_theta), &sd, &cd);
            c = (float)cd, sn = (float)sd;
        }
        cs[i] = c, cs[h + i] = a.sign * sn;
    }
    __syncthreads();
    constexpr int V = VEC ? chunk<T>::n : 1;
    /* work items per head: one pair (element-wise); one chunk (GPT-J); chunk i of the first half
     * with chunk i of the second (NeoX) */
    const int per_head = !VEC ? h : a.style == FLASHC_ROPE_GPTJ ? a.rd / V : h / V;
    const int items = (a.Hq + a.Hk) * per_head;
#pragma unroll 2 /* two items' loads in flight per thread */
    for (int it = threadIdx.x; it < items; it += blockDim.x) {
        const int head = it / per_head, c = it % per_head;
        T *row = head < a.Hq ? (T *)a.q + b * a.sq[0] + s * a.sq[1] + (int64_t)head * a.sq[2]
                             : (T *)a.k + b * a.sk[0] + s * a.sk[1] + (int64_t)(head - a.Hq) * a.sk[2];
        if (VEC) {
            if (a.style == FLASHC_ROPE_GPTJ) {
                float x[chunk<T>::n];
                load_chunk(row + c * V, x);
#pragma unroll
                for (int j = 0; j < V / 2; j++) {
                    const int i = c * (V / 2) + j;
                    const float x0 = x[2 * j], x1 = x[2 * j + 1], co = cs[i], si = cs[h + i];
                    x[2 * j] = x0 * co - x1 * si;
                    x[2 * j + 1] = x1 * co + x0 * si;
                }
                store_chunk(row + c * V, x);
            } else {
                float x0[chunk<T>::n], x1[chunk<T>::n];
                load_chunk(row + c * V, x0);
                load_chunk(row + h + c * V, x1);
#pragma unroll
                for (int j = 0; j < V; j++) {
                    const int i = c * V + j;
                    const float a0 = x0[j], a1 = x1[j], co = cs[i], si = cs[h + i];
                    x0[j] = a0 * co - a1 * si;
                    x1[j] = a1 * co + a0 * si;
                }
                store_chunk(row + c * V, x0);
                store_chunk(row + h + c * V, x1);
            }
        } else {
            const int i = c;
            const int i0 = a.style == FLASHC_ROPE_GPTJ ? 2 * i : i;
            const int i1 = a.style == FLASHC_ROPE_GPTJ ? 2 * i + 1 : i + h;
            const float a0 = elem<T>::load(row[i0]), a1 = elem<T>::load(row[i1]);
            const float co = cs[i], si = cs[h + i];
            row[i0] = elem<T>::store(a0 * co - a1 * si);
            row[i1] = elem<T>::store(a1 * co + a0 * si);
        }
    }
}

/* Tables, 16-byte chunks (v2): one thread per work item, the items of all tokens in one flat
 * grid (chunk fastest, then head, then token: neighbouring threads touch neighbouring 16-byte
 * pieces), no shared memory and no barrier. Each thread reads its item's NA angles' cos and
 * sin straight from the tables (float4 loads when the tables allow, else scalars): the heads
 * of a token share them, so after the first head they come from L1. */
template <typename T, bool GPTJ>
__global__ void __launch_bounds__(256) rope_table_vec(rope_args a, int64_t items, int tvec)
{
    constexpr int V = chunk<T>::n;
    constexpr int NA = GPTJ ? V / 2 : V; /* angles an item needs */
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= items)
        return;
    const int h = a.rd / 2;
    const int per_head = GPTJ ? a.rd / V : h / V;
    const int per_tok = (a.Hq + a.Hk) * per_head;
    const int64_t tok = idx / per_tok;
    const int rem = (int)(idx - tok * per_tok), head = rem / per_head, c = rem - head * per_head;
    const int64_t b = tok / a.S, s = tok - b * a.S;
    const int64_t pos = a.pos ? (int64_t)a.pos[b * a.spos[0] + s * a.spos[1]] : s + a.pos_offset;
    T *row = head < a.Hq ? (T *)a.q + b * a.sq[0] + s * a.sq[1] + (int64_t)head * a.sq[2]
                         : (T *)a.k + b * a.sk[0] + s * a.sk[1] + (int64_t)(head - a.Hq) * a.sk[2];
    /* the data first: its loads are the long ones */
    uint4 u0 = ld_stream(row + c * V), u1;
    if (!GPTJ)
        u1 = ld_stream(row + h + c * V);
    float co[NA], si[NA];
    const int i0 = c * NA;
    if (pos >= 0 && pos < a.P) {
        const float *cp = a.cos + pos * a.scos[0], *sp = a.sin + pos * a.ssin[0];
        if (tvec) {
#pragma unroll
            for (int j = 0; j < NA; j += (NA >= 4 ? 4 : 2)) {
                if (NA >= 4) {
                    const float4 cv = __ldg(reinterpret_cast<const float4 *>(cp + i0 + j));
                    const float4 sv = __ldg(reinterpret_cast<const float4 *>(sp + i0 + j));
                    co[j] = cv.x, co[j + 1] = cv.y, co[j + 2] = cv.z, co[j + 3] = cv.w;
                    si[j] = sv.x, si[j + 1] = sv.y, si[j + 2] = sv.z, si[j + 3] = sv.w;
                } else {
                    const float2 cv = __ldg(reinterpret_cast<const float2 *>(cp + i0 + j));
                    const float2 sv = __ldg(reinterpret_cast<const float2 *>(sp + i0 + j));
                    co[j] = cv.x, co[j + 1] = cv.y, si[j] = sv.x, si[j + 1] = sv.y;
                }
            }
        } else {
#pragma unroll
            for (int j = 0; j < NA; j++)
                co[j] = __ldg(cp + (i0 + j) * a.scos[1]), si[j] = __ldg(sp + (i0 + j) * a.ssin[1]);
        }
    } else {
#pragma unroll
        for (int j = 0; j < NA; j++)
            co[j] = si[j] = __int_as_float(0x7fc00000); /* NaN: see the file comment */
    }
    float x0[V], x1[V];
    unpack<T>(u0, x0);
    if (GPTJ) {
#pragma unroll
        for (int j = 0; j < V / 2; j++) {
            const float a0 = x0[2 * j], a1 = x0[2 * j + 1], sn = a.sign * si[j];
            x0[2 * j] = a0 * co[j] - a1 * sn;
            x0[2 * j + 1] = a1 * co[j] + a0 * sn;
        }
        st_stream(row + c * V, pack<T>(x0));
    } else {
        unpack<T>(u1, x1);
#pragma unroll
        for (int j = 0; j < V; j++) {
            const float a0 = x0[j], a1 = x1[j], sn = a.sign * si[j];
            x0[j] = a0 * co[j] - a1 * sn;
            x1[j] = a1 * co[j] + a0 * sn;
        }
        st_stream(row + c * V, pack<T>(x0));
        st_stream(row + h + c * V, pack<T>(x1));
    }
}

template <typename T> static flashc_status rope_t(const rope_problem *p)
{
    rope_args a;
    a.q = p->q, a.k = p->k;
    for (int i = 0; i < 3; i++)
        a.sq[i] = p->sq[i], a.sk[i] = p->k ? p->sk[i] : 0;
    a.Hq = (int)p->Hq, a.Hk = p->k ? (int)p->Hk : 0, a.S = (int)p->S;
    a.rd = (int)p->rd, a.style = p->style, a.sign = p->inverse ? -1.0f : 1.0f;
    a.log2_theta = log2(p->theta);
    a.cos = p->cos, a.sin = p->sin, a.P = p->P;
    a.scos[0] = p->scos[0], a.scos[1] = p->scos[1], a.ssin[0] = p->ssin[0], a.ssin[1] = p->ssin[1];
    a.pos = p->pos, a.spos[0] = p->spos[0], a.spos[1] = p->spos[1], a.pos_offset = p->pos_offset;
    const int64_t V = chunk<T>::n;
    /* the vector path: every head row starts on 16 bytes, and the rotated span (GPT-J) or each
     * half of it (NeoX) is a whole number of chunks */
    bool vec = (uintptr_t)p->q % 16 == 0 && p->sq[0] % V == 0 && p->sq[1] % V == 0 &&
               p->sq[2] % V == 0 && (p->style == FLASHC_ROPE_GPTJ ? p->rd % V == 0 : (p->rd / 2) % V == 0);
    if (p->k)
        vec = vec && (uintptr_t)p->k % 16 == 0 && p->sk[0] % V == 0 && p->sk[1] % V == 0 &&
              p->sk[2] % V == 0;
    const int64_t tokens = p->B * p->S;
    if (tokens > 2147483647LL || p->Hq + p->Hk > (1 << 20))
        return flashc__fail(FLASHC_ERR_UNSUPPORTED, "flashc_rope: %lld tokens exceed the CUDA grid",
                            (long long)tokens);
    const size_t smem = (size_t)p->rd * sizeof(float);
    cudaStream_t stream = (cudaStream_t)p->stream;
    const int per_head = (int)(p->style == FLASHC_ROPE_GPTJ ? p->rd / V : p->rd / 2 / V);
    const int64_t items = tokens * (p->Hq + (p->k ? p->Hk : 0)) * per_head;
    if (vec && p->P > 0 && !cuda_rows_v1() && (items + 255) / 256 <= 2147483647LL &&
        (p->Hq + (p->k ? p->Hk : 0)) * per_head <= 2147483647LL) {
        /* float4 (float2 for float32 GPT-J's two angles) table loads: rows of the tables on
         * 16 bytes, unit column stride */
        const int tvec = (uintptr_t)p->cos % 16 == 0 && (uintptr_t)p->sin % 16 == 0 &&
                         p->scos[1] == 1 && p->ssin[1] == 1 && p->scos[0] % 4 == 0 &&
                         p->ssin[0] % 4 == 0;
        const unsigned grid = (unsigned)((items + 255) / 256);
        if (p->style == FLASHC_ROPE_GPTJ)
            rope_table_vec<T, true><<<grid, 256, 0, stream>>>(a, items, tvec);
        else
            rope_table_vec<T, false><<<grid, 256, 0, stream>>>(a, items, tvec);
        return launch_status(p->inverse ? "flashc_rope_bwd" : "flashc_rope", "rope_table_vec");
    }
    if (vec)
        rope_kernel<T, true><<<(unsigned)tokens, 128, smem, stream>>>(a);
    else
        rope_kernel<T, false><<<(unsigned)tokens, 128, smem, stream>>>(a);
    return launch_status(p->inverse ? "flashc_rope_bwd" : "flashc_rope",
                         vec ? "rope_kernel (16-byte chunks)" : "rope_kernel (elements)");
}

extern "C" flashc_status cuda_rope(const rope_problem *p)
{
    if (p->rd > 12288)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "flashc_rope: rotary_dim = %lld needs more shared memory than a block "
                            "has by default",
                            (long long)p->rd);
    switch (p->dtype) {
    case FLASHC_BF16: return rope_t<__nv_bfloat16>(p);
    case FLASHC_F16: return rope_t<__half>(p);
    default: return rope_t<float>(p);
    }
}
