/*
 * rope.cu — rotary position embedding on the GPU, in place on q and k (flashc.h's contract).
 *
 * Tables with 16-byte chunks (the common case) take rope_table_vec: a flat grid of threads
 * with no shared memory, each on U heads of one chunk column of a token, reading that column's
 * angles from the tables once (L1 hits after the token's first thread); FLASHC_CUDA_ROPE picks
 * U, the cache hints and PDL (rope_env). FLASHC_CUDA_ROPE=v3 (opt-in) takes rope_v3 for tables
 * and computed angles: a block on a few tokens, M head rows a thread with all their loads
 * issued first, the block's angles in shared memory, no division per row. Computed angles
 * (without v3), element-wise rows, and
 * FLASHC_CUDA_ROWS=v1 take rope_kernel:
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

#include "ptx.cuh"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* cos and sin of feature pair i at position pos: from the tables (TAB; NaN for a position outside
 * them, see the file comment) or computed in double from theta */
template <bool TAB>
__device__ __forceinline__ void rope_angle(const rope_args &a, int64_t pos, int i, float &co, float &sn)
{
    if (TAB) {
        if (pos >= 0 && pos < a.P)
            co = a.cos[pos * a.scos[0] + i * a.scos[1]], sn = a.sin[pos * a.ssin[0] + i * a.ssin[1]];
        else
            co = sn = __int_as_float(0x7fc00000);
    } else {
        double sd, cd;
        sincos((double)pos * exp2(-2.0 * (double)i / (double)a.rd * a.log2_theta), &sd, &cd);
        co = (float)cd, sn = (float)sd;
    }
}

template <typename T, bool VEC> __global__ void rope_kernel(rope_args a)
{
    extern __shared__ float cs[]; /* cos[0..h), sin[h..2h) */
    const int h = a.rd / 2;
    const int64_t tok = blockIdx.x, b = tok / a.S, s = tok % a.S;
    const int64_t pos = a.pos ? (int64_t)a.pos[b * a.spos[0] + s * a.spos[1]] : s + a.pos_offset;
    for (int i = threadIdx.x; i < h; i += blockDim.x) {
        float c, sn;
        if (a.P > 0)
            rope_angle<true>(a, pos, i, c, sn);
        else
            rope_angle<false>(a, pos, i, c, sn);
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

/* Tables, 16-byte chunks (v2): a flat grid of threads, no shared memory and no barrier. The
 * items of a token (chunk c of head hd: c fastest, then the head; q's heads, then k's) are
 * dealt to TPT = hs * PH threads (PH items a head, hs = ceil(NH / U) head slots): thread t
 * takes chunk column c = t % PH of heads t / PH + j hs (j < U), so that neighbouring threads
 * touch neighbouring 16-byte pieces at every load. A thread issues its U items' loads first
 * (2U chunks for NeoX), then reads its NA angles' cos and sin once for its U heads (float4
 * loads when the tables allow, else scalars; the other threads of the token read the same
 * ones from L1), then rotates and stores. U = 1 is the kernel as first measured (one item a
 * thread). Knobs (rope_cfg, FLASHC_CUDA_ROPE): U; lm / sm the access hints (lm 0 ld.global.cs,
 * 1 a plain ld.global, 2 ld.global.nc: every element is read once, before the same thread
 * writes it; sm 0 st.global.cs, 1 a plain st.global); pdl: a programmatic dependent launch. */
struct rope_vec_cfg {
    int hs;     /* head slots: threads of a token = hs * PH */
    int tvec;   /* vector table loads */
    int lm, sm; /* load and store hints */
    int pdl;
};

template <int NC> __device__ __forceinline__ void rope_ld(uint4 (&u)[NC], const void *p0, const void *p1, int lm)
{
    const void *ps[2] = {p0, p1};
#pragma unroll
    for (int i = 0; i < NC; i++)
        u[i] = lm == 2 ? ld_reuse(ps[i]) : lm == 1 ? ld_plain(ps[i]) : ld_stream(ps[i]);
}

/* One item's rotation (rope_table_vec, rope_v3): GPT-J turns the pairs inside one 16-byte
 * chunk (u0, into x0), NeoX the first half's chunk (u0, into x0) against the second half's (u1,
 * into x1); co, si: the item's angles, si already signed (inverse rotation: sign -1). */
template <typename T, bool GPTJ, int NA>
__device__ __forceinline__ void rope_rotate(const uint4 &u0, const uint4 &u1, const float (&co)[NA],
                                            const float (&si)[NA], float (&x0)[chunk<T>::n],
                                            float (&x1)[chunk<T>::n])
{
    constexpr int V = chunk<T>::n;
    unpack<T>(u0, x0);
    if (GPTJ) {
#pragma unroll
        for (int e = 0; e < V / 2; e++) {
            const float a0 = x0[2 * e], a1 = x0[2 * e + 1];
            x0[2 * e] = a0 * co[e] - a1 * si[e];
            x0[2 * e + 1] = a1 * co[e] + a0 * si[e];
        }
    } else {
        unpack<T>(u1, x1);
#pragma unroll
        for (int e = 0; e < V; e++) {
            const float a0 = x0[e], a1 = x1[e];
            x0[e] = a0 * co[e] - a1 * si[e];
            x1[e] = a1 * co[e] + a0 * si[e];
        }
    }
}

template <typename T, bool GPTJ, int U>
__global__ void __launch_bounds__(256) rope_table_vec(rope_args a, int64_t threads, rope_vec_cfg k)
{
    constexpr int V = chunk<T>::n;
    constexpr int NA = GPTJ ? V / 2 : V; /* angles an item needs */
    constexpr int NC = GPTJ ? 1 : 2;     /* chunks an item */
    if (k.pdl) {
        ptx_griddep_launch_dependents();
        ptx_griddep_wait();
    }
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= threads)
        return;
    const int h = a.rd / 2, NH = a.Hq + a.Hk;
    const int PH = GPTJ ? a.rd / V : h / V;
    const int tpt = k.hs * PH;
    const int64_t tok = idx / tpt;
    const int t = (int)(idx - tok * tpt), c = t % PH, h0 = t / PH;
    const int64_t b = tok / a.S, s = tok - b * a.S;
    const int64_t pos = a.pos ? (int64_t)a.pos[b * a.spos[0] + s * a.spos[1]] : s + a.pos_offset;
    T *qrow = (T *)a.q + b * a.sq[0] + s * a.sq[1], *krow = (T *)a.k + b * a.sk[0] + s * a.sk[1];
    /* the data first: its loads are the long ones */
    T *row[U];
    uint4 u[U][NC];
#pragma unroll
    for (int j = 0; j < U; j++) {
        const int hd = h0 + j * k.hs;
        row[j] = hd < a.Hq ? qrow + (int64_t)hd * a.sq[2] : krow + (int64_t)(hd - a.Hq) * a.sk[2];
        if (hd < NH)
            rope_ld<NC>(u[j], row[j] + c * V, row[j] + h + c * V, k.lm);
    }
    float co[NA], si[NA];
    const int i0 = c * NA;
    if (pos >= 0 && pos < a.P) {
        const float *cp = a.cos + pos * a.scos[0], *sp = a.sin + pos * a.ssin[0];
        if (k.tvec) {
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
#pragma unroll
    for (int j = 0; j < NA; j++)
        si[j] *= a.sign;
#pragma unroll
    for (int j = 0; j < U; j++) {
        if (h0 + j * k.hs >= NH)
            break;
        float x0[V], x1[V];
        rope_rotate<T, GPTJ>(u[j][0], u[j][NC - 1], co, si, x0, x1);
        T *p0 = row[j] + c * V, *p1 = row[j] + h + c * V;
        if (k.sm) {
            st_plain(p0, pack<T>(x0));
            if (!GPTJ)
                st_plain(p1, pack<T>(x1));
        } else {
            st_stream(p0, pack<T>(x0));
            if (!GPTJ)
                st_stream(p1, pack<T>(x1));
        }
    }
}

/* v3 (FLASHC_CUDA_ROPE=v3[:M,H,L], 16-byte chunks, tables or computed angles): a block of
 * PH x HB threads (PH chunk columns of a head: threadIdx.x; HB = 256 / PH row slots) on TB
 * consecutive tokens, whose TB x NH head rows (token-major, q's heads then k's) are dealt to
 * the row slots: slot y takes rows y, y + HB, ... So a thread keeps one chunk column, and
 * TB = M x HB / NH makes that M rows a thread. The thread issues all M rows' 16-byte loads
 * (2M for NeoX) first; then the block puts the TB tokens' rd/2 angles (cos, and sin times
 * the sign) in shared memory, from the tables with any strides or computed as rope_kernel
 * does, one entry a thread; a barrier; then each thread reads its chunk's angles as float4
 * (float2) from shared memory, rotates and stores 16 bytes (one st.global). No division
 * per row: the (token, head) of the next row steps by (HB / NH, HB % NH). H as v2's: 0
 * ld.global.cs / st.global.cs, 1 plain ld / st, 2 ld.global.nc / plain st (every element is
 * read once, before its own thread writes it). L = 1: a programmatic dependent launch. */
struct rope_v3_cfg {
    int tb;       /* tokens a block */
    int dt, dh;   /* HB / NH, HB % NH: the (token, head) step of a row slot */
    int hm, pdl;
};

template <int NA> __device__ __forceinline__ void ld_angles(const float *p, float (&v)[NA])
{
#pragma unroll
    for (int j = 0; j < NA; j += (NA >= 4 ? 4 : 2)) {
        if (NA >= 4) {
            const float4 f = *reinterpret_cast<const float4 *>(p + j);
            v[j] = f.x, v[j + 1] = f.y, v[j + 2] = f.z, v[j + 3] = f.w;
        } else {
            const float2 f = *reinterpret_cast<const float2 *>(p + j);
            v[j] = f.x, v[j + 1] = f.y;
        }
    }
}

/* The first chunk column c of head row hd of token tok0 + t (token b0 * S + s0 = tok0). */
template <typename T>
__device__ __forceinline__ T *rope_v3_row(const rope_args &a, int b0, int s0, int t, int hd, int c)
{
    int s = s0 + t, b = b0;
    while (s >= a.S)
        s -= a.S, b++;
    return (hd < a.Hq ? (T *)a.q + b * a.sq[0] + s * a.sq[1] + (int64_t)hd * a.sq[2]
                      : (T *)a.k + b * a.sk[0] + s * a.sk[1] + (int64_t)(hd - a.Hq) * a.sk[2]) +
           c * chunk<T>::n;
}

template <typename T, bool GPTJ, int M, bool TAB>
__global__ void __launch_bounds__(256, M <= 5 ? 3 : 1) rope_v3(rope_args a, int tokens, rope_v3_cfg k)
{
    extern __shared__ float4 cs4[]; /* token t: cos at t rd + i, sign * sin at t rd + h + i */
    float *cs = reinterpret_cast<float *>(cs4);
    constexpr int V = chunk<T>::n;
    constexpr int NA = GPTJ ? V / 2 : V; /* angles a chunk needs */
    constexpr int NC = GPTJ ? 1 : 2;     /* 16-byte chunks a row item */
    if (k.pdl) {
        ptx_griddep_launch_dependents();
        ptx_griddep_wait();
    }
    const int h = a.rd / 2, NH = a.Hq + a.Hk, HB = blockDim.y, c = threadIdx.x;
    const int tok0 = blockIdx.x * k.tb, ntok = min(k.tb, tokens - tok0), rows = ntok * NH;
    const int b0 = tok0 / a.S, s0 = tok0 - b0 * a.S;
    /* row slot y's first row: token y / NH, head y % NH */
    int t = threadIdx.y / NH, hd = threadIdx.y - t * NH;
    /* the rows' addresses are computed again after the barrier, not kept live across it */
    uint4 u[M][NC];
#pragma unroll
    for (int j = 0; j < M; j++) {
        if (threadIdx.y + j * HB < rows) {
            const T *p = rope_v3_row<T>(a, b0, s0, t, hd, c);
#pragma unroll
            for (int i = 0; i < NC; i++) {
                const T *q = p + i * h;
                u[j][i] = k.hm == 0 ? ld_stream(q) : k.hm == 1 ? ld_plain(q) : ld_reuse(q);
            }
        }
        /* the next row of this slot */
        t += k.dt, hd += k.dh;
        if (hd >= NH)
            hd -= NH, t++;
    }
    /* the block's angles, one entry a thread */
    for (int e = threadIdx.y * blockDim.x + threadIdx.x; e < ntok * h; e += blockDim.x * HB) {
        const int tt = e / h, i = e - tt * h;
        int s = s0 + tt, b = b0;
        while (s >= a.S)
            s -= a.S, b++;
        const int64_t pos = a.pos ? (int64_t)a.pos[b * a.spos[0] + s * a.spos[1]] : s + a.pos_offset;
        float co, sn;
        rope_angle<TAB>(a, pos, i, co, sn);
        cs[tt * a.rd + i] = co, cs[tt * a.rd + h + i] = a.sign * sn;
    }
    __syncthreads();
    t = threadIdx.y / NH, hd = threadIdx.y - t * NH;
#pragma unroll
    for (int j = 0; j < M; j++) {
        if (threadIdx.y + j * HB >= rows)
            break;
        T *p = rope_v3_row<T>(a, b0, s0, t, hd, c);
        float co[NA], si[NA];
        ld_angles<NA>(cs + t * a.rd + c * NA, co);
        ld_angles<NA>(cs + t * a.rd + h + c * NA, si);
        float x0[V], x1[V];
        /* opaque until here: else ptxas splits the 16-bit pairs at the load (sm_90a bf16 NeoX,
         * M = 5, without the launch bound's 3 blocks: 124 registers rather than 94) */
#pragma unroll
        for (int i = 0; i < NC; i++)
            launder(u[j][i]);
        rope_rotate<T, GPTJ>(u[j][0], u[j][NC - 1], co, si, x0, x1);
        if (k.hm == 0) {
            st_stream(p, pack<T>(x0));
            if (!GPTJ)
                st_stream(p + h, pack<T>(x1));
        } else {
            st_plain(p, pack<T>(x0));
            if (!GPTJ)
                st_plain(p + h, pack<T>(x1));
        }
        t += k.dt, hd += k.dh;
        if (hd >= NH)
            hd -= NH, t++;
    }
}

/* The knobs, read from the environment at every call (as rows.cu's):
 *   FLASHC_CUDA_ROPE=v2[:U,H,L]   rope_table_vec: U heads a thread (1, 2, 4); H the hints: 0
 *                                 ld.cs / st.cs, 1 plain ld / plain st, 2 ld.nc / plain st;
 *                                 L = 1 PDL (sm_90)
 *   FLASHC_CUDA_ROPE=v3[:M,H,L]   rope_v3: M rows a thread (2, 4, 5, 8; default 5); H as v2's
 *                                 (default 0: .cs, v2's best in rows7's round C); L = 1 PDL
 *                                 (sm_90; default 0). Also for computed angles.
 * Unset or anything else: rope_default, v3 with M = 5, H = 0, L = 1 since 2026-12-03 (round D:
 * 94.3% / 98.1% of the same bytes' copy, NeoX / GPT-J, against v2 U = 1's 86.7% / 79.2%, the
 * kernel as first measured; bench/RESULTS.md, rows8). */
struct rope_cfg {
    int v, u, h, l;
};
static const rope_cfg rope_v2_base = {2, 1, 0, 0}, rope_v3_base = {3, 5, 0, 0};
static const rope_cfg rope_default = {3, 5, 0, 1};

static rope_cfg rope_env(void)
{
    rope_cfg c = rope_default;
    const char *e = getenv("FLASHC_CUDA_ROPE");
    if (e && strncmp(e, "v2", 2) == 0 && (e[2] == 0 || e[2] == ':')) {
        c = rope_v2_base;
        int u = c.u, hm = c.h, l = c.l;
        if (e[2] == ':' && sscanf(e + 3, "%d,%d,%d", &u, &hm, &l) >= 1) {
            if (u == 1 || u == 2 || u == 4)
                c.u = u;
            if (hm >= 0 && hm <= 2)
                c.h = hm;
            c.l = l == 1;
        }
    } else if (e && strncmp(e, "v3", 2) == 0 && (e[2] == 0 || e[2] == ':')) {
        c = rope_v3_base;
        int m = c.u, hm = c.h, l = c.l;
        if (e[2] == ':' && sscanf(e + 3, "%d,%d,%d", &m, &hm, &l) >= 1) {
            if (m == 2 || m == 4 || m == 5 || m == 8)
                c.u = m;
            if (hm >= 0 && hm <= 2)
                c.h = hm;
            c.l = l == 1;
        }
    }
    return c;
}

static int rope_pdl_ok(void)
{
    int major = 0, dev = 0;
    return cudaGetDevice(&dev) == cudaSuccess &&
           cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major >= 9;
}

/* rope_v3's launch; cudaErrorNotSupported when the shape does not fit it (a chunk column
 * wider than a block, more heads than M x HB rows, angles over 24 KiB a block): the caller
 * then takes v2's path. */
static const size_t rope_v3_smem_max = 24 * 1024;

template <typename T, bool GPTJ, bool TAB> static const void *rope_v3_kernel(int m)
{
    return m == 8   ? (const void *)rope_v3<T, GPTJ, 8, TAB>
           : m == 5 ? (const void *)rope_v3<T, GPTJ, 5, TAB>
           : m == 4 ? (const void *)rope_v3<T, GPTJ, 4, TAB>
                    : (const void *)rope_v3<T, GPTJ, 2, TAB>;
}

template <typename T, bool GPTJ>
static cudaError_t rope_v3_launch(const rope_args &a, const rope_cfg &c, int64_t tokens, cudaStream_t st)
{
    const int V = chunk<T>::n, NH = a.Hq + a.Hk;
    const int PH = GPTJ ? a.rd / V : a.rd / 2 / V;
    if (PH > 256 || PH < 1 || NH < 1 || tokens < 1) /* the last three: as v2 */
        return cudaErrorNotSupported;
    const int HB = 256 / PH;
    int tb = (int)((int64_t)c.u * HB / NH);
    if (tb < 1)
        return cudaErrorNotSupported;
    const size_t per_tok = (size_t)a.rd * sizeof(float);
    if ((size_t)tb * per_tok > rope_v3_smem_max)
        tb = (int)(rope_v3_smem_max / per_tok);
    if (tb < 1)
        return cudaErrorNotSupported;
    if (tb > tokens)
        tb = (int)tokens;
    rope_v3_cfg k;
    k.tb = tb, k.dt = HB / NH, k.dh = HB % NH, k.hm = c.h;
    k.pdl = c.l && rope_pdl_ok();
    int tok = (int)tokens;
    rope_args aa = a;
    void *args[] = {&aa, &tok, &k};
    /* a kernel each for tables and computed angles: float64 sincos needs registers */
    const void *kern = a.P > 0 ? rope_v3_kernel<T, GPTJ, true>(c.u) : rope_v3_kernel<T, GPTJ, false>(c.u);
    return launch_maybe_pdl(kern, dim3((unsigned)((tokens + tb - 1) / tb)), dim3(PH, HB), args,
                            (size_t)tb * per_tok, st, k.pdl != 0);
}

template <typename T, bool GPTJ>
static cudaError_t rope_vec_launch(const rope_args &a, const rope_cfg &c, int64_t tokens, int tvec, cudaStream_t st)
{
    const int64_t V = chunk<T>::n, NH = a.Hq + a.Hk;
    const int64_t PH = GPTJ ? a.rd / V : a.rd / 2 / V;
    rope_vec_cfg k;
    k.hs = (int)((NH + c.u - 1) / c.u);
    k.tvec = tvec;
    k.lm = c.h == 0 ? 0 : c.h == 1 ? 1 : 2, k.sm = c.h != 0;
    k.pdl = c.l && rope_pdl_ok();
    int64_t threads = tokens * k.hs * PH;
    rope_args aa = a;
    void *args[] = {&aa, &threads, &k};
    const void *kern = c.u == 4   ? (const void *)rope_table_vec<T, GPTJ, 4>
                       : c.u == 2 ? (const void *)rope_table_vec<T, GPTJ, 2>
                                  : (const void *)rope_table_vec<T, GPTJ, 1>;
    return launch_maybe_pdl(kern, dim3((unsigned)((threads + 255) / 256)), dim3(256), args, 0, st, k.pdl != 0);
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
    rope_cfg c = rope_env();
    if (vec && c.v == 3 && !cuda_rows_v1()) {
        const cudaError_t err = p->style == FLASHC_ROPE_GPTJ ? rope_v3_launch<T, true>(a, c, tokens, stream)
                                                             : rope_v3_launch<T, false>(a, c, tokens, stream);
        if (err != cudaErrorNotSupported) /* else v2's path or rope_kernel, below */
            return launch_status(p->inverse ? "flashc_rope_bwd" : "flashc_rope", "rope_v3");
        c = rope_v2_base;
    }
    if (vec && p->P > 0 && !cuda_rows_v1() && (items + 255) / 256 <= 2147483647LL &&
        (p->Hq + (p->k ? p->Hk : 0)) * per_head <= 2147483647LL) {
        /* float4 (float2 for float32 GPT-J's two angles) table loads: rows of the tables on
         * 16 bytes, unit column stride */
        const int tvec = (uintptr_t)p->cos % 16 == 0 && (uintptr_t)p->sin % 16 == 0 &&
                         p->scos[1] == 1 && p->ssin[1] == 1 && p->scos[0] % 4 == 0 &&
                         p->ssin[0] % 4 == 0;
        const cudaError_t err = p->style == FLASHC_ROPE_GPTJ ? rope_vec_launch<T, true>(a, c, tokens, tvec, stream)
                                                             : rope_vec_launch<T, false>(a, c, tokens, tvec, stream);
        (void)err; /* launch_status reads it (cudaGetLastError) */
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
