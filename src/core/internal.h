/*
 * internal.h — what the core (validation, dispatch, allocator) shares with the backends.
 *
 * The public entry points in src/core validate every argument and reduce it to a plain
 * problem struct (attn_problem, rows_problem); backends (src/ref, src/cpu, src/cuda) receive
 * only validated problems and never re-check user input. A backend may still refuse a valid
 * problem it cannot serve (a head dim, a dtype) through its *_supports() function, which the
 * dispatcher calls first, so "is this supported?" has one answer.
 */
#ifndef FLASHC_INTERNAL_H
#define FLASHC_INTERNAL_H

#include "flashc.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>

/* ---- errors ---------------------------------------------------------------------------- */

/* Records "fmt" as the calling thread's last error detail and returns status. Nothing clears
 * it: a successful call leaves the previous failure's detail in place (flashc.h). */
flashc_status flashc__fail(flashc_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Returns the status of a validation step from the enclosing function unless it is OK. */
#define FLASHC_TRY(expr)                                                                           \
    do {                                                                                           \
        flashc_status st_ = (expr);                                                                \
        if (st_ != FLASHC_OK)                                                                      \
            return st_;                                                                            \
    } while (0)

/* ---- counting allocator ----------------------------------------------------------------- */

/* 64-byte aligned, counted in flashc_mem_stats. NULL on failure or on bytes == 0 overflow. */
void *flashc__malloc(size_t bytes);
void *flashc__calloc(size_t count, size_t size);
void flashc__free(void *ptr);
#ifdef FLASHC_FAULT_INJECTION
/* Fails the fail_at-th allocation (1 = the next) from now; 0 disarms. fault_seen: how many
 * allocations were attempted since the last arm. Built with -DFLASHC_FAULT_INJECTION=ON. */
void flashc__fault_arm(int64_t fail_at);
int64_t flashc__fault_seen(void);
#endif

/* "float32", "float16", "bfloat16", or "dtype(N)" for an invalid value (thread-local buffer). */
const char *flashc__dtype_name(flashc_dtype dtype);

/* ---- threads ----------------------------------------------------------------------------- */

/* The thread count for a call: requested if > 0, else the global setting. */
int flashc__threads(int requested);

/* ---- tensor validation -------------------------------------------------------------------- */

/* Checks that t is non-NULL with data, the given rank, positive sizes, legal strides, a known
 * dtype, and a byte extent that fits in 64 bits. name is used in messages ("q"). */
flashc_status flashc__check_tensor(const char *fn, const char *name, const flashc_tensor *t,
                                   int ndim);
/* For an output (after flashc__check_tensor): FLASHC_ERR_INVALID_STRIDE unless every index maps
 * to its own element, so that writes never race or overwrite each other. Exact when the strides
 * nest (sorted, each exceeds the reach of the smaller ones), for two dims of size > 1 (a gcd
 * rule) and for up to 4096 elements (offsets sorted); otherwise nesting is required. */
flashc_status flashc__check_output_layout(const char *fn, const char *name, const flashc_tensor *t);
/* The output checks of every entry point, in one place: each output's layout is injective,
 * no output overlaps an input, no two outputs overlap. NULL entries (optional tensors) are
 * skipped. A tensor both read and written (the residual x) is listed as an output. */
flashc_status flashc__check_outputs(const char *fn, int n_out, const flashc_tensor *const *outs,
                                    const char *const *out_names, int n_in,
                                    const flashc_tensor *const *ins, const char *const *in_names);
/* [lo, hi) byte range a valid tensor touches. */
void flashc__tensor_extent(const flashc_tensor *t, uintptr_t *lo, uintptr_t *hi);
/* FLASHC_ERR_OVERLAP if the byte ranges [first, last element] of a and b intersect (conservative:
 * interleaved views sharing no element are refused). */
flashc_status flashc__check_no_overlap(const char *fn, const char *na, const flashc_tensor *a,
                                       const char *nb, const flashc_tensor *b);

/* ---- attention problem -------------------------------------------------------------------- */

/* How the rows of a problem's sequences are laid out (the public contract's three layouts). */
typedef enum attn_layout {
    ATTN_DENSE = 0,   /* (B, S, H, D) tensors                                                  */
    ATTN_VARLEN = 1,  /* packed (total, H, D) rows; sequence b starts at row cu[b]             */
    ATTN_KVCACHE = 2, /* dense q/o; k/v in a contiguous (batch_idx) or paged cache             */
} attn_layout;

/* A validated attention problem. Backends receive only these and never re-check user input.
 *
 * The dense fields keep their v1 meaning, so a backend that serves only the plain dense
 * problem (attn_is_plain) reads B, Sq, Sk, D and the 4-d strides exactly as before. Strides are
 * in elements, indexed [0] batch, [1] sequence row, [2] head, [3] feature; lse: [0] batch,
 * [1] head, [2] row. The other layouts map onto the same arrays:
 *   varlen  q-side and k-side tensors have [0] = 0 and rows offset by cu_q[b] / cu_k[b]
 *           (attn_q_off / attn_kv_off add them); lse (Hq, total_q): slse = {0, head, row}.
 *   kvcache q, o, lse dense; k, v: contiguous [0] = batch stride (row kv_batch[b] or b), or
 *           paged [0] = page stride, [1] = row stride inside a page.
 * Sq, Sk are the maxima over sequences (dense: the sizes); attn_seqlens gives each one's.
 * Pointers of optional tensors are NULL when absent. */
typedef struct attn_problem {
    int64_t B, Sq, Sk, Hq, Hkv, D, Dv;
    flashc_dtype dtype;
    flashc_device device;
    attn_layout layout;
    float scale;        /* the softmax scale (any finite value)                                */
    int causal;         /* the caller's flag; already folded into wr (wr = 0)                   */
    int64_t wl, wr;     /* window: row i sees keys [a_i - wl, a_i + wr] (-1 = unbounded side)  */
    float softcap;      /* > 0: s = softcap * tanh(s / softcap); 0 = off                       */
    const float *alibi; /* slope of (b, h) at alibi[b * salibi[0] + h * salibi[1]]; NULL = none */
    int64_t salibi[2];
    int64_t br, bc;     /* requested tiles; 0 = backend default                                 */
    int threads;
    int num_splits;     /* 0 = backend chooses (from the shape only), else the split count      */
    int deterministic;
    void *stream;
    void *workspace;    /* the caller's scratch (NULL: backends allocate), workspace_bytes long */
    size_t workspace_bytes;

    /* varlen: sequence b has rows [cu_q[b], cu_q[b+1]) of q and [cu_k[b], cu_k[b+1]) of k, v;
     * total_q, total_k rows in all (rows past cu[B] belong to no sequence). Paged varlen
     * (pages set): k, v are a paged cache as below, sequence b's Sk_b keys in its block-table
     * row, cu_k giving only the lengths; total_k = 0. */
    const int32_t *cu_q, *cu_k;
    int64_t total_q, total_k;
    /* kvcache: Sk_b = seqlens_k[b] + s_new (seqlens_k NULL: Sk for all); kv_batch (contiguous)
     * or pages (paged, row b at pages + b * pages_stride, page_size rows per page; also set for
     * a paged varlen). */
    const int32_t *seqlens_k;
    int64_t s_new;
    const int32_t *kv_batch;
    /* kvcache, contiguous: sequence b's keys start at cache row kv_start[b] (flash-attn's
     * cache_leftpad; NULL = 0): its key j is cache row kv_start[b] + j, Sk_b = seqlens_k[b] +
     * s_new - kv_start[b], and k_new still lands at cache rows seqlens_k[b].. (attn_kv_start). */
    const int32_t *kv_start;
    const int32_t *pages;
    int64_t pages_stride, page_size, num_pages;
    /* kvcache: keys one sequence can hold (S_cache, or max_pages * page_size), and the rows of a
     * contiguous cache (k_cache.shape[0]): device backends read index tensors the host cannot
     * check, and bound them by these instead. */
    int64_t kv_capacity, kv_rows;
    /* kvcache append: k_new (B, s_new, Hkv, D), v_new (B, s_new, Hkv, Dv), 4-d strides; NULL
     * when nothing is appended. Host backends find them already in the cache (the core copies
     * them before run()); device backends append them themselves, on their stream. */
    const void *k_new, *v_new;
    int64_t sknew[4], svnew[4];

    const void *q, *k, *v;
    int64_t sq[4], sk[4], sv[4];
    void *o; /* forward output / backward input */
    int64_t so[4];
    float *lse; /* forward output (may be NULL) / backward input */
    int64_t slse[3];

    /* backward only */
    const void *dout;
    int64_t sdo[4];
    void *dq, *dk, *dv;
    int64_t sdq[4], sdk[4], sdv[4];
} attn_problem;

/* The v1 problem but for the head dims: dense, no window or modifier (causal allowed), no
 * split request; D and Dv any. */
static inline bool attn_is_plain_any_dv(const attn_problem *p)
{
    return p->layout == ATTN_DENSE && p->wl < 0 && (p->wr < 0 || p->causal) &&
           p->softcap == 0.0f && !p->alibi && p->num_splits <= 1;
}

/* True for the v1 problem: the above with D == Dv. Backends that serve only that refuse the rest
 * through their supports(). */
static inline bool attn_is_plain(const attn_problem *p)
{
    return attn_is_plain_any_dv(p) && p->D == p->Dv;
}

/* kvcache: the cache row of sequence b's first key (cache_leftpad; 0 without). */
static inline int64_t attn_kv_start(const attn_problem *p, int64_t b)
{
    return p->kv_start ? (int64_t)p->kv_start[b] : 0;
}

/* Sequence b's lengths (dense: Sq, Sk). */
static inline void attn_seqlens(const attn_problem *p, int64_t b, int64_t *sq, int64_t *sk)
{
    switch (p->layout) {
    case ATTN_VARLEN:
        *sq = (int64_t)p->cu_q[b + 1] - p->cu_q[b];
        *sk = (int64_t)p->cu_k[b + 1] - p->cu_k[b];
        return;
    case ATTN_KVCACHE:
        *sq = p->Sq;
        *sk = p->seqlens_k ? (int64_t)p->seqlens_k[b] + p->s_new - attn_kv_start(p, b) : p->Sk;
        return;
    default:
        *sq = p->Sq;
        *sk = p->Sk;
        return;
    }
}

/* Key range [*lo, *hi) of query row i of a sequence with lengths (sq, sk); empty when
 * *lo >= *hi (then *hi == *lo). The one mask primitive every backend uses. */
static inline void attn_key_range(const attn_problem *p, int64_t sq, int64_t sk, int64_t i,
                                  int64_t *lo, int64_t *hi)
{
    const int64_t a = i + sk - sq; /* the row's position among the keys (bottom-right) */
    int64_t l = 0, h = sk;
    if (p->wl >= 0 && a - p->wl > l)
        l = a - p->wl;
    if (p->wr >= 0 && a + p->wr + 1 < h)
        h = a + p->wr + 1;
    if (h < l)
        h = l;
    *lo = l;
    *hi = h;
}

/* Element offset of row i (head 0, feature 0) of sequence b in a q-side tensor (q, o, dout, dq)
 * with strides st. */
static inline int64_t attn_q_off(const attn_problem *p, const int64_t *st, int64_t b, int64_t i)
{
    if (p->layout == ATTN_VARLEN)
        return ((int64_t)p->cu_q[b] + i) * st[1];
    return b * st[0] + i * st[1];
}

/* Element offset of key row j (head 0, feature 0) of sequence b in a k-side tensor (k, v, dk,
 * dv) with strides st: the paged lookup lives here, so every tile loader gets it. */
static inline int64_t attn_kv_off(const attn_problem *p, const int64_t *st, int64_t b, int64_t j)
{
    if (p->pages) /* a paged cache: KV cache or paged varlen */
        return (int64_t)p->pages[b * p->pages_stride + j / p->page_size] * st[0] +
               (j % p->page_size) * st[1];
    switch (p->layout) {
    case ATTN_VARLEN:
        return ((int64_t)p->cu_k[b] + j) * st[1];
    case ATTN_KVCACHE:
        return (p->kv_batch ? (int64_t)p->kv_batch[b] : b) * st[0] +
               (attn_kv_start(p, b) + j) * st[1];
    default:
        return b * st[0] + j * st[1];
    }
}

/* Offset of lse(b, h, i) (dense (B, Hq, Sq); varlen (Hq, total_q)). */
static inline int64_t attn_lse_off(const attn_problem *p, int64_t b, int64_t h, int64_t i)
{
    if (p->layout == ATTN_VARLEN)
        return h * p->slse[1] + ((int64_t)p->cu_q[b] + i) * p->slse[2];
    return b * p->slse[0] + h * p->slse[1] + i * p->slse[2];
}

/* ALiBi slope of (b, h); 0 without ALiBi. */
static inline float attn_alibi_slope(const attn_problem *p, int64_t b, int64_t h)
{
    return p->alibi ? p->alibi[b * p->salibi[0] + h * p->salibi[1]] : 0.0f;
}

/* The score modifier after the scale: softcap, then the ALiBi bias of row position a, key j.
 * The references apply it in double through attn_score_mod64; the kernels vectorise it. */
static inline double attn_score_mod64(const attn_problem *p, double s, double slope, int64_t a,
                                      int64_t j)
{
    if (p->softcap > 0.0f)
        s = (double)p->softcap * tanh(s / (double)p->softcap);
    if (p->alibi) {
        const int64_t dist = a > j ? a - j : j - a;
        s -= slope * (double)dist;
    }
    return s;
}

/* Last key index (exclusive) query row i may see in the dense v1 problem (causal only); kept
 * for backends that serve attn_is_plain problems. May be <= 0: the row sees nothing. */
static inline int64_t attn_key_end(const attn_problem *p, int64_t i)
{
    if (!p->causal)
        return p->Sk;
    int64_t e = i + 1 + p->Sk - p->Sq;
    return e < p->Sk ? e : p->Sk;
}

/* Number of (Q-block, K-block) tile pairs a tiled pass over one (batch, head) of a plain dense
 * problem computes with tiles br x bc, skipping blocks entirely above the causal diagonal. */
int64_t attn_tile_pairs_per_head(const attn_problem *p, int64_t br, int64_t bc);

/* Tile pairs over every sequence and query head a tiled pass computes when it visits, for each
 * Q block of br rows, only the K blocks of bc keys that intersect the union of its rows' key
 * ranges; *total receives the dense count (every block pair of every sequence). */
int64_t attn_tile_pairs(const attn_problem *p, int64_t br, int64_t bc, int64_t *total);

/* Scratch for a backend call: the caller's workspace when the problem has one (carved in
 * 64-byte aligned pieces; the size was checked against the backend's workspace query by the
 * core), else the counting allocator. Release with attn_scratch_free in reverse order.
 * NULL on failure (allocation, or a caller's workspace too small: a bug in a size query). */
typedef struct attn_scratch {
    char *base;   /* the caller's workspace, 64-byte aligned, or NULL */
    size_t size, used;
} attn_scratch;
void attn_scratch_init(attn_scratch *s, const attn_problem *p);
void *attn_scratch_take(attn_scratch *s, size_t bytes);
void attn_scratch_free(attn_scratch *s, void *ptr);
/* The bytes a backend asks of the workspace for n pieces of the given sizes (64-byte rounding
 * plus alignment slack): the sum its workspace query must return. */
size_t attn_scratch_bytes(size_t n, const size_t *sizes);

/* ---- the attention dispatch table (dispatch.c) ------------------------------------------ */

typedef enum attn_op { ATTN_OP_FWD = 0, ATTN_OP_BWD = 1 } attn_op;

/* One row per (op, backend): the core asks supports() first (so "is this supported?" has one
 * answer: flashc_attn_fwd_supported), then workspace() for the scratch bytes run() will take
 * through attn_scratch (from the caller's params.workspace, or, for host backends
 * (host_scratch), one allocation the core makes before the call writes anything). A backend may
 * have variants of its own behind its row (the CUDA kernels), chosen inside its functions. */
typedef struct attn_impl {
    const char *name; /* "ref", "cpu", "cuda" */
    attn_op op;
    flashc_device device;
    int host_scratch; /* workspace() is host memory the core may allocate */
    flashc_status (*supports)(const attn_problem *p);
    size_t (*workspace)(const attn_problem *p); /* NULL: none */
    flashc_status (*run)(const attn_problem *p, flashc_attn_stats *stats);
} attn_impl;

/* The row for (op, device) named name, or the device's default backend when name is NULL.
 * NULL when this build has none. */
const attn_impl *attn_impl_find(attn_op op, flashc_device device, const char *name);

/* Tests and `flashc check`: make the public entry points of the calling thread use the backend
 * named name ("ref", "cpu") instead of the device's default; NULL restores it. */
void attn_force_backend(const char *name);
const char *attn_forced_backend(void);

/* The documented bound on one call (flashc.h, FLASHC_MAX_ATTN_WORK): refuses problems whose
 * score count or reference buffers overflow or exceed it, before any backend sizes a buffer. */
flashc_status attn_check_work(const char *fn, const attn_problem *p);

/* Backends. Each *_supports() returns FLASHC_OK or a status with flashc__fail's message. */
flashc_status ref_attn_fwd_supports(const attn_problem *p);
size_t ref_attn_fwd_workspace(const attn_problem *p);
flashc_status ref_attn_fwd(const attn_problem *p, flashc_attn_stats *stats);
flashc_status ref_attn_bwd_supports(const attn_problem *p);
size_t ref_attn_bwd_workspace(const attn_problem *p);
flashc_status ref_attn_bwd(const attn_problem *p, flashc_attn_stats *stats);

flashc_status cpu_attn_fwd_supports(const attn_problem *p);
size_t cpu_attn_fwd_workspace(const attn_problem *p);
flashc_status cpu_attn_fwd(const attn_problem *p, flashc_attn_stats *stats);
/* S and P materialised on the SIMD kernels (attn_unfused.c): the benchmark's honest baseline */
flashc_status cpu_attn_fwd_unfused_supports(const attn_problem *p);
size_t cpu_attn_fwd_unfused_workspace(const attn_problem *p);
flashc_status cpu_attn_fwd_unfused(const attn_problem *p, flashc_attn_stats *stats);
flashc_status cpu_attn_bwd_supports(const attn_problem *p);
size_t cpu_attn_bwd_workspace(const attn_problem *p);
flashc_status cpu_attn_bwd(const attn_problem *p, flashc_attn_stats *stats);

#ifdef FLASHC_HAVE_CUDA
/* bytes from device memory to host memory, on stream (a cudaStream_t; NULL = default), then
 * synchronised: params.validate_indices's copies of the index tensors (cuda_errors.cu). */
flashc_status cuda_copy_to_host(const char *fn, void *dst, const void *src, size_t bytes,
                                void *stream);
flashc_status cuda_attn_fwd_supports(const attn_problem *p);
size_t cuda_attn_fwd_workspace(const attn_problem *p); /* device bytes; after supports() */
flashc_status cuda_attn_fwd(const attn_problem *p, flashc_attn_stats *stats);
flashc_status cuda_attn_bwd_supports(const attn_problem *p);
size_t cuda_attn_bwd_workspace(const attn_problem *p); /* device bytes; after supports() */
flashc_status cuda_attn_bwd(const attn_problem *p, flashc_attn_stats *stats);
/* flashc_attn_merge on CUDA tensors (validated: shapes, dtypes, overlaps), default stream */
flashc_status cuda_attn_merge(const flashc_tensor *o1, const flashc_tensor *lse1,
                              const flashc_tensor *o2, const flashc_tensor *lse2, flashc_tensor *o,
                              flashc_tensor *lse);
int cuda_device_available(void);
const char *cuda_build_info(void);
#endif

/* ---- row-wise ops (RMSNorm, SwiGLU) ------------------------------------------------------- */

/* T rows; x/y/r/gu row strides in elements (element stride within a row is 1 or given). */
typedef struct rows_problem {
    int64_t T, D;       /* rows, width (D for RMSNorm; I for SwiGLU)         */
    flashc_dtype dtype;
    flashc_device device;
    int threads;
    float eps;
    const void *x;      /* RMSNorm input / SwiGLU gu                         */
    int64_t sx[2];
    void *xw;           /* RMSNorm residual: x written back (== x's memory)  */
    const void *r;      /* residual (may be NULL)                            */
    int64_t sr[2];
    const void *w;      /* RMSNorm weight (D)                                */
    int64_t sw;
    void *y;            /* output                                            */
    int64_t sy[2];
} rows_problem;

flashc_status ref_rmsnorm(const rows_problem *p);   /* naive, with (T, D) temporaries */
flashc_status cpu_rmsnorm(const rows_problem *p);   /* fused                          */
flashc_status ref_swiglu(const rows_problem *p);
flashc_status cpu_swiglu(const rows_problem *p);

/* ---- row-op backwards and RoPE (api_rows_bwd.c, api_rope.c) ------------------------------ */

/* RMSNorm backward (x, w, dy [, dres] -> dx, dw) and SwiGLU backward (gu, dout -> dgu), one
 * struct: strides in elements, [0] row, [1] element. */
typedef struct rows_bwd_problem {
    int64_t T, D;          /* rows, width (D for RMSNorm; I for SwiGLU)                 */
    flashc_dtype dtype;
    flashc_device device;
    int threads;
    float eps;
    const void *x;         /* RMSNorm x / SwiGLU gu (T, 2I)                              */
    int64_t sx[2];
    const void *w;         /* RMSNorm weight (D)                                         */
    int64_t sw;
    const void *dy;        /* RMSNorm dy / SwiGLU dout                                   */
    int64_t sdy[2];
    const void *dres;      /* RMSNorm: gradient at the residual stream, or NULL          */
    int64_t sdres[2];
    void *dx;              /* RMSNorm dx / SwiGLU dgu (T, 2I)                            */
    int64_t sdx[2];
    void *dw;              /* RMSNorm dw (D)                                             */
    int64_t sdw;
} rows_bwd_problem;

flashc_status ref_rmsnorm_bwd(const rows_bwd_problem *p);
flashc_status cpu_rmsnorm_bwd(const rows_bwd_problem *p);
flashc_status ref_swiglu_bwd(const rows_bwd_problem *p);
flashc_status cpu_swiglu_bwd(const rows_bwd_problem *p);

/* A validated RoPE call: q (B, S, Hq, D), k (B, S, Hk, D) or NULL, strides [0] batch, [1] seq,
 * [2] head, [3] feature. Angles: tables cos/sin (P rows, rd/2 columns) when P > 0, else
 * computed from theta. pos of token (b, s): pos[b * spos[0] + s * spos[1]] if pos, else
 * s + pos_offset. inverse: rotate by -a (the backward). */
typedef struct rope_problem {
    int64_t B, S, Hq, Hk, D, rd;
    flashc_dtype dtype;
    flashc_device device;
    int style;             /* flashc_rope_style */
    int inverse;
    int threads;
    void *stream;
    double theta;
    void *q, *k;
    int64_t sq[4], sk[4];
    const float *cos, *sin;
    int64_t P, scos[2], ssin[2];
    const int32_t *pos;
    int64_t spos[2], pos_offset;
} rope_problem;

flashc_status ref_rope(const rope_problem *p);
flashc_status cpu_rope(const rope_problem *p);

#ifdef FLASHC_HAVE_CUDA
/* src/cuda/rows.cu, src/cuda/rope.cu: every pointer is device memory, element stride 1. */
flashc_status cuda_rows_supports(const char *fn, flashc_dtype dt, const int64_t *elem_strides,
                                 int n);
flashc_status cuda_rmsnorm(const rows_problem *p);
flashc_status cuda_swiglu(const rows_problem *p);
flashc_status cuda_rmsnorm_bwd(const rows_bwd_problem *p);
flashc_status cuda_swiglu_bwd(const rows_bwd_problem *p);
flashc_status cuda_rope(const rope_problem *p);
#endif

/* ---- dtype conversion (scalar, exact round-to-nearest-even) ------------------------------- */

static inline float flashc__bf16_to_f32(uint16_t h)
{
    union { uint32_t u; float f; } c;
    c.u = (uint32_t)h << 16;
    return c.f;
}

static inline uint16_t flashc__f32_to_bf16(float f)
{
    union { uint32_t u; float f; } c;
    c.f = f;
    if ((c.u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it a (quiet) NaN */
        return (uint16_t)((c.u >> 16) | 0x40);
    c.u += 0x7fffu + ((c.u >> 16) & 1u);
    return (uint16_t)(c.u >> 16);
}

float flashc__f16_to_f32(uint16_t h);
uint16_t flashc__f32_to_f16(float f);

/* Loads element i of a typed buffer as float / stores a float, for the reference paths. */
static inline float flashc__load(const void *base, flashc_dtype dt, int64_t i)
{
    switch (dt) {
    case FLASHC_F32: return ((const float *)base)[i];
    case FLASHC_BF16: return flashc__bf16_to_f32(((const uint16_t *)base)[i]);
    case FLASHC_F16: return flashc__f16_to_f32(((const uint16_t *)base)[i]);
    default: return 0.0f;
    }
}

static inline void flashc__store(void *base, flashc_dtype dt, int64_t i, float v)
{
    switch (dt) {
    case FLASHC_F32: ((float *)base)[i] = v; break;
    case FLASHC_BF16: ((uint16_t *)base)[i] = flashc__f32_to_bf16(v); break;
    case FLASHC_F16: ((uint16_t *)base)[i] = flashc__f32_to_f16(v); break;
    default: break;
    }
}

#endif /* FLASHC_INTERNAL_H */
