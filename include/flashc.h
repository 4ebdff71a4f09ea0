/*
 * flashc.h — the public interface of flashc: IO-aware attention and fused LLM operators.
 *
 * One header, C11. Every entry point:
 *   - takes tensors as flashc_tensor views (pointer + dtype + shape + strides, all 64-bit),
 *   - validates everything before touching any output: on a non-OK status no output is written,
 *   - returns a flashc_status; flashc_last_error() then says which argument was wrong and why
 *     (the message is per thread and stays until the next failing call on that thread),
 *   - never modifies its inputs, never calls exit(), never prints.
 *
 * Layouts (the flash-attn convention; the attention section below has the whole contract:
 * key ranges, windows, softcap, ALiBi, varlen and KV caches):
 *   q    (B, Sq, Hq,  D)      queries
 *   k, v (B, Sk, Hkv, D/Dv)   keys and values; Hq % Hkv == 0 (GQA; Hkv == 1 is MQA)
 *   o    (B, Sq, Hq,  Dv)     output
 *   lse  (B, Hq, Sq)          float32 log-sum-exp per query row, natural log: L = m + log(l)
 * Strides are in elements and non-negative. Inputs accept any such strides, zero included (a
 * broadcast view, e.g. one KV head expanded across query heads); outputs must not alias
 * themselves (no two indices may share an element). So a (B, H, S, D) buffer is passed
 * as the view shape (B, S, H, D) with strides (H*S*D, D, S*D, 1).
 *
 * Causal masking is aligned bottom-right (as flash-attn >= 2.1): query row i sees key j iff
 * j <= i + Sk - Sq. A row that sees no key (possible when Sq > Sk, or under a window) outputs
 * zeros and LSE = -inf.
 *
 * Memory: host buffers the library allocates for itself go through a counting allocator
 * (flashc_mem_stats); device memory is never allocated by the attention forward.
 */
#ifndef FLASHC_H
#define FLASHC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FLASHC_VERSION_MAJOR 0
#define FLASHC_VERSION_MINOR 1
#define FLASHC_VERSION_PATCH 0

/* ------------------------------------------------------------------------------------------ */
/* Status                                                                                      */
/* ------------------------------------------------------------------------------------------ */

typedef enum flashc_status {
    FLASHC_OK = 0,
    FLASHC_ERR_NULL_POINTER,       /* a required pointer (tensor, data, params) is NULL          */
    FLASHC_ERR_INVALID_SHAPE,      /* a size is zero/negative, wrong rank, or sizes disagree     */
    FLASHC_ERR_INVALID_STRIDE,     /* a stride is negative, or an output's strides make two of
                                      its elements share memory (e.g. zero on a dim of size > 1) */
    FLASHC_ERR_HEAD_MISMATCH,      /* Hq % Hkv != 0, or k and v disagree on heads                */
    FLASHC_ERR_DIM_MISMATCH,       /* head dims of q, k, v, o (or norm widths) disagree          */
    FLASHC_ERR_DTYPE_MISMATCH,     /* tensors that must share a dtype do not                     */
    FLASHC_ERR_UNSUPPORTED_DTYPE,  /* the dtype is not supported by this op on this backend      */
    FLASHC_ERR_OVERLAP,            /* an output overlaps an input or another output              */
    FLASHC_ERR_OVERFLOW,           /* a byte count or offset does not fit in 64 bits             */
    FLASHC_ERR_INVALID_ARGUMENT,   /* a scalar parameter is out of range (scale, eps, tiles...) */
    FLASHC_ERR_OUT_OF_MEMORY,      /* a workspace allocation failed                              */
    FLASHC_ERR_UNSUPPORTED,        /* a valid request this build/backend cannot serve (head dim,
                                      device, missing CUDA support...)                           */
    FLASHC_ERR_DEVICE,             /* the device runtime reported an error (CUDA launch, ...)    */
    FLASHC_STATUS_COUNT
} flashc_status;

/* A constant, human-readable name of the status ("invalid shape"). Never NULL. */
const char *flashc_status_string(flashc_status status);

/* Details of the last failure on the calling thread, e.g.
 * "flashc_attn_fwd: q.shape[3] (head dim) = 64 but k.shape[3] = 80". Empty string if none. */
const char *flashc_last_error(void);

/* ------------------------------------------------------------------------------------------ */
/* Tensors                                                                                     */
/* ------------------------------------------------------------------------------------------ */

typedef enum flashc_dtype {
    FLASHC_F32 = 0,  /* IEEE binary32                                                      */
    FLASHC_F16 = 1,  /* IEEE binary16 storage, fp32 accumulation                           */
    FLASHC_BF16 = 2, /* bfloat16 storage, fp32 accumulation                                */
    FLASHC_I32 = 3,  /* int32: index tensors only (cu_seqlens, cache_seqlens, block_table) */
    FLASHC_DTYPE_COUNT
} flashc_dtype;

/* Where the data pointer lives. */
typedef enum flashc_device {
    FLASHC_DEVICE_CPU = 0,  /* host memory                                  */
    FLASHC_DEVICE_CUDA = 1, /* CUDA device memory of the current device     */
} flashc_device;

#define FLASHC_MAX_DIMS 4

/* A strided view. shape[i] and stride[i] (in elements, not bytes) are valid for i < ndim;
 * element (i0, i1, ...) is at data + sum(i_k * stride[k]) elements. */
typedef struct flashc_tensor {
    void *data;
    flashc_dtype dtype;
    flashc_device device;
    int32_t ndim;
    int64_t shape[FLASHC_MAX_DIMS];
    int64_t stride[FLASHC_MAX_DIMS];
} flashc_tensor;

/* Size in bytes of one element of dtype (0 for an invalid dtype). */
size_t flashc_dtype_size(flashc_dtype dtype);

/* Contiguous (row-major) host views. */
flashc_tensor flashc_tensor_1d(void *data, flashc_dtype dtype, int64_t n0);
flashc_tensor flashc_tensor_2d(void *data, flashc_dtype dtype, int64_t n0, int64_t n1);
flashc_tensor flashc_tensor_3d(void *data, flashc_dtype dtype, int64_t n0, int64_t n1, int64_t n2);
flashc_tensor flashc_tensor_4d(void *data, flashc_dtype dtype, int64_t n0, int64_t n1, int64_t n2,
                               int64_t n3);

/* ------------------------------------------------------------------------------------------ */
/* Runtime settings and memory accounting                                                      */
/* ------------------------------------------------------------------------------------------ */

/* Threads used by CPU kernels when a call does not say (params.num_threads == 0).
 * n <= 0 restores the default (OpenMP's, i.e. OMP_NUM_THREADS or the core count). */
void flashc_set_num_threads(int n);
int flashc_get_num_threads(void);

/* Host memory the library allocated for its own buffers (workspaces, the naive paths' S and P),
 * counted by its allocator. peak_bytes is the high-water mark since the last reset. */
typedef struct flashc_mem_stats {
    int64_t current_bytes;
    int64_t peak_bytes;
    int64_t alloc_count; /* allocations since the last reset */
} flashc_mem_stats;

flashc_mem_stats flashc_mem_get(void);
/* Sets peak_bytes to current_bytes and alloc_count to 0. */
void flashc_mem_reset_peak(void);

/* ------------------------------------------------------------------------------------------ */
/* Attention                                                                                   */
/* ------------------------------------------------------------------------------------------ */

/*
 * The attention contract (v2). Every attention entry point computes, for each query row i of
 * each sequence, over the keys j that row may see (its key range [lo_i, hi_i)):
 *
 *   s_ij = scale * q_i . k_j                    raw score; scale defaults to 1/sqrt(D)
 *   s_ij = softcap * tanh(s_ij / softcap)       when softcap > 0 (Gemma 2 / Grok)
 *   s_ij = s_ij - slope_h * |a_i - j|           when ALiBi slopes are given (flash-attn's bias)
 *   o_i  = sum_j softmax_j(s_ij) v_j,   lse_i = log sum_j exp(s_ij)   (natural log)
 *
 * a_i = i + Sk - Sq is row i's position among the keys of its sequence (Sq, Sk that sequence's
 * lengths): causal masks and windows are aligned bottom-right, as in flash-attn >= 2.1.
 *
 * Key range of row i (flash-attn's window_size semantics):
 *   lo_i = max(0,  a_i - window_left)        window_left  < 0: no lower bound (lo_i = 0)
 *   hi_i = min(Sk, a_i + window_right + 1)   window_right < 0: no upper bound (hi_i = Sk)
 *   causal sets window_right = 0 (a window_right > 0 with causal is reduced to 0).
 * A row whose range is empty (lo_i >= hi_i) outputs o = 0 and lse = -inf (FlashAttention-3's
 * convention; flash-attn 2 stores +inf there). Keys outside a row's range are never read into
 * its result: their values (even NaN or Inf) cannot reach it.
 *
 * Head dims: q and k have D, v and o have Dv (Dk != Dv, e.g. 192/128 for MLA-style models).
 * GQA/MQA: Hq % Hkv == 0; query head h reads KV head h / (Hq / Hkv).
 *
 * Three layouts of the same problem:
 *   dense    flashc_attn_fwd / _bwd          q (B, Sq, Hq, D), k (B, Sk, Hkv, D), v (B, Sk, Hkv, Dv)
 *   varlen   flashc_attn_varlen_fwd / _bwd   packed rows of B ragged sequences (flashc_varlen)
 *   kvcache  flashc_attn_kvcache_fwd         q against a contiguous or paged cache (flashc_kv_cache)
 *
 * Bounds on one call (refused with FLASHC_ERR_INVALID_ARGUMENT before any work): every sequence
 * length, head count and head dim is at most FLASHC_MAX_ATTN_EXTENT (the int32 range that
 * flash-attn's indices have), and the score count B * Hq * Sq * Sk (maxima for varlen and KV
 * caches) at most FLASHC_MAX_ATTN_SCORES, so no size product inside the library can overflow.
 * The naive references further need their Sq x Sk buffers to be allocatable.
 */
#define FLASHC_MAX_ATTN_EXTENT 2147483647LL
#define FLASHC_MAX_ATTN_SCORES (1LL << 56)

/* Parameters shared by the attention entry points. Start from flashc_attn_params_default()
 * (or FLASHC_ATTN_PARAMS_INIT in C) and set what you need; params == NULL means the defaults.
 * ABI: struct_size is sizeof(flashc_attn_params) as the caller was compiled; the library reads
 * only the fields inside struct_size and gives the others their defaults, so a binary built
 * against an older header keeps working. A struct_size larger than this library knows is
 * accepted when the bytes it does not know are all zero (fields added later default to zero),
 * and refused with FLASHC_ERR_UNSUPPORTED otherwise. struct_size 0 is refused. */
typedef struct flashc_attn_params {
    size_t struct_size;
    int has_softmax_scale; /* 0: scale = 1/sqrt(D); nonzero: softmax_scale as given        */
    float softmax_scale;   /* finite (0 and negative values allowed) when has_softmax_scale  */
    int causal;            /* nonzero: bottom-right aligned causal mask (window_right = 0)   */
    int64_t window_left;   /* sliding window, see above; -1 = unbounded (the default)        */
    int64_t window_right;  /* -1 = unbounded (the default)                                    */
    float softcap;         /* > 0: soft-capping of the scores; 0 = off. Finite, >= 0.        */
    const flashc_tensor *alibi_slopes; /* NULL, or float32 (Hq) or (B, Hq), on q's device:   */
                           /* the score of row i, key j gets -slope * |a_i - j| (see above)  */
    int64_t block_q;       /* Br: query rows per tile; 0 = library default                   */
    int64_t block_k;       /* Bc: key rows per tile;   0 = library default                   */
    int num_threads;       /* CPU threads for this call; 0 = flashc_get_num_threads()        */
    int num_splits;        /* split-KV: the keys of each row are cut into this many chunks,  */
                           /* computed independently and merged by their (O, LSE); 1 = one   */
                           /* pass; 0 = the library chooses from the shape alone (never from */
                           /* the thread count, so results do not depend on it). >= 0.       */
    int deterministic;     /* CUDA backward: nonzero = bit-identical gradients run to run.   */
                           /* The CPU paths are always deterministic.                        */
    void *workspace;       /* scratch memory from the caller, or NULL: then the library      */
    size_t workspace_bytes;/* allocates (and frees) its own. When given, it must hold at     */
                           /* least what the entry point's *_workspace_size() query returns   */
                           /* for the same arguments, on the tensors' device; the call then  */
                           /* allocates nothing. Any alignment (the library aligns inside).  */
    void *cuda_stream;     /* cudaStream_t for CUDA tensors; NULL = the default stream       */
} flashc_attn_params;

/* The defaults: struct_size set, default scale, no mask, window (-1, -1), no softcap, no ALiBi,
 * library tiles, threads and split count, no workspace. */
flashc_attn_params flashc_attn_params_default(void);
#ifndef __cplusplus
#define FLASHC_ATTN_PARAMS_INIT                                                                    \
    ((flashc_attn_params){.struct_size = sizeof(flashc_attn_params), .window_left = -1,           \
                          .window_right = -1})
#endif

/* What a call did, for tests and the traffic model. Set struct_size = sizeof(flashc_attn_stats)
 * before the call (FLASHC_ATTN_STATS_INIT); the library writes only the fields inside it. */
typedef struct flashc_attn_stats {
    size_t struct_size;
    int64_t tile_pairs;       /* (Q-block, K-block) tile pairs computed, summed over sequences  */
                              /* and query heads (a decode item of several heads counts each)  */
    int64_t tile_pairs_total; /* pairs a dense pass (no mask, no window) would compute; the    */
                              /* difference is what masks, windows and empty rows skipped      */
    int64_t block_q;          /* the Br and Bc actually used                                   */
    int64_t block_k;
    int64_t num_splits;       /* key chunks per row actually used (1 = no split)               */
    int64_t workspace_bytes;  /* scratch the call used (its own or the caller's)               */
} flashc_attn_stats;
#define FLASHC_ATTN_STATS_INIT {sizeof(flashc_attn_stats), 0, 0, 0, 0, 0, 0}

/* ---- dense ------------------------------------------------------------------------------ */

/* FlashAttention forward: o = softmax(scores) v (the contract above), tile by tile with an
 * online softmax; S and P are never materialised. Tiles entirely outside every row's key range
 * are skipped (stats count them).
 *   params  may be NULL (defaults)
 *   q (B, Sq, Hq, D), k (B, Sk, Hkv, D), v (B, Sk, Hkv, Dv), o (B, Sq, Hq, Dv): same dtype
 *   lse     may be NULL; else (B, Hq, Sq) float32 on the same device
 *   stats   may be NULL
 * CPU: float32, bfloat16 or float16 storage, float32 accumulation (tiles are converted on load,
 * O is rounded once); every mask and modifier. Scratch: per-thread tiles (and split partials).
 * CUDA (all tensors FLASHC_DEVICE_CUDA, launched on params.cuda_stream, asynchronous like any
 * kernel launch): bfloat16 or float16 storage, unit feature stride and 16-byte aligned rows;
 * the head dims, masks and modifiers the build's kernels serve (flashc_attn_fwd_supported says;
 * anything else is refused with FLASHC_ERR_UNSUPPORTED and a message, never ignored). */
flashc_status flashc_attn_fwd(const flashc_attn_params *params, const flashc_tensor *q,
                              const flashc_tensor *k, const flashc_tensor *v, flashc_tensor *o,
                              flashc_tensor *lse, flashc_attn_stats *stats);

/* Bytes of scratch flashc_attn_fwd needs for these arguments (params.workspace). Validates
 * like the call itself (same status and message on bad input); o and lse are not written. */
flashc_status flashc_attn_fwd_workspace_size(const flashc_attn_params *params,
                                             const flashc_tensor *q, const flashc_tensor *k,
                                             const flashc_tensor *v, const flashc_tensor *o,
                                             const flashc_tensor *lse, size_t *bytes);

/* The naive reference with the same contract: materialises the scores S (Sq x Sk per head, one
 * head at a time) and P = softmax(S) through the counting allocator, then O = P v. Accumulates
 * in float64; NaN in a visible score or value propagates to that row. The oracle of the tests
 * and the baseline of the benchmark. Host only; ignores params.workspace and num_splits. */
flashc_status flashc_attn_fwd_naive(const flashc_attn_params *params, const flashc_tensor *q,
                                    const flashc_tensor *k, const flashc_tensor *v,
                                    flashc_tensor *o, flashc_tensor *lse,
                                    flashc_attn_stats *stats);

/* Answers "would flashc_attn_fwd accept this?" without computing: the same validation and
 * backend capability checks, the same status and flashc_last_error() message. Writes nothing. */
flashc_status flashc_attn_fwd_supported(const flashc_attn_params *params, const flashc_tensor *q,
                                        const flashc_tensor *k, const flashc_tensor *v,
                                        const flashc_tensor *o, const flashc_tensor *lse);

/* Attention backward by recomputation from the log-sum-exp (FlashAttention-2, Algorithm 2),
 * with every mask and modifier of the forward (the softcap gradient goes through the tanh;
 * ALiBi slopes are constants, not differentiated).
 *   q, k, v, o, lse as produced by the forward with the same params; dout (B, Sq, Hq, Dv)
 *   dq (B, Sq, Hq, D), dk (B, Sk, Hkv, D), dv (B, Sk, Hkv, Dv): written (not accumulated);
 *   for GQA, dk/dv of a KV head sum the contributions of every query head of its group.
 *   rows with an empty key range (lse = -inf) get zero dq and add nothing to dk, dv.
 * CPU: float32, bfloat16 and float16 storage (float32 accumulation; the gradients are rounded
 * once). Deterministic: bit-identical for any thread count (no atomics; fixed-order sums).
 * Scratch: D = rowsum(dout * o), B*Hq*Sq floats, plus per-thread tiles; nothing Sq x Sk. */
flashc_status flashc_attn_bwd(const flashc_attn_params *params, const flashc_tensor *q,
                              const flashc_tensor *k, const flashc_tensor *v,
                              const flashc_tensor *o, const flashc_tensor *dout,
                              const flashc_tensor *lse, flashc_tensor *dq, flashc_tensor *dk,
                              flashc_tensor *dv, flashc_attn_stats *stats);

/* Bytes of scratch flashc_attn_bwd needs for these arguments (params.workspace). */
flashc_status flashc_attn_bwd_workspace_size(const flashc_attn_params *params,
                                             const flashc_tensor *q, const flashc_tensor *k,
                                             const flashc_tensor *v, const flashc_tensor *o,
                                             const flashc_tensor *dout, const flashc_tensor *lse,
                                             const flashc_tensor *dq, const flashc_tensor *dk,
                                             const flashc_tensor *dv, size_t *bytes);

/* The naive reference backward: materialises P (Sq x Sk per head) and dP, float64 accumulation.
 * dV = P^T dO, dP = dO V^T, dS = P * (dP - D) (times the softcap derivative), dQ = scale dS K,
 * dK = scale dS^T Q. Host only. lse may be NULL and is not read: P is recomputed by a full
 * softmax. Any storage dtype. */
flashc_status flashc_attn_bwd_naive(const flashc_attn_params *params, const flashc_tensor *q,
                                    const flashc_tensor *k, const flashc_tensor *v,
                                    const flashc_tensor *o, const flashc_tensor *dout,
                                    const flashc_tensor *lse, flashc_tensor *dq, flashc_tensor *dk,
                                    flashc_tensor *dv, flashc_attn_stats *stats);

/* ---- varlen: ragged batches --------------------------------------------------------------- */

/* B sequences of different lengths packed along one row dimension (flash-attn's varlen API).
 * Sequence b owns query rows cu_seqlens_q[b] .. cu_seqlens_q[b+1] - 1 of q, o (and dout, dq),
 * and key rows cu_seqlens_k[b] .. cu_seqlens_k[b+1] - 1 of k, v (and dk, dv). Its own lengths
 * Sq_b, Sk_b align its causal mask and window (bottom-right, per sequence). */
typedef struct flashc_varlen {
    size_t struct_size;                /* sizeof(flashc_varlen)                                */
    const flashc_tensor *cu_seqlens_q; /* int32 (B + 1), host memory for CPU calls: 0 first,  */
    const flashc_tensor *cu_seqlens_k; /* non-decreasing, last <= total rows (checked)         */
    int64_t max_seqlen_q;              /* >= every Sq_b (checked on the CPU); sizes the launch */
    int64_t max_seqlen_k;              /* >= every Sk_b                                        */
} flashc_varlen;

/* Varlen forward.
 *   q (total_q, Hq, D), k (total_k, Hkv, D), v (total_k, Hkv, Dv), o (total_q, Hq, Dv)
 *   lse  NULL or float32 (Hq, total_q) (flash-attn's varlen layout)
 * Zero-length sequences are allowed and produce nothing. Rows of o past cu_seqlens_q[B] belong
 * to no sequence and are written as zeros (their lse as -inf). CPU: as flashc_attn_fwd. */
flashc_status flashc_attn_varlen_fwd(const flashc_attn_params *params, const flashc_varlen *varlen,
                                     const flashc_tensor *q, const flashc_tensor *k,
                                     const flashc_tensor *v, flashc_tensor *o, flashc_tensor *lse,
                                     flashc_attn_stats *stats);
flashc_status flashc_attn_varlen_fwd_workspace_size(const flashc_attn_params *params,
                                                    const flashc_varlen *varlen,
                                                    const flashc_tensor *q, const flashc_tensor *k,
                                                    const flashc_tensor *v, const flashc_tensor *o,
                                                    const flashc_tensor *lse, size_t *bytes);

/* Varlen backward: tensors packed as in the forward; dq (total_q, Hq, D), dk (total_k, Hkv, D),
 * dv (total_k, Hkv, Dv). Rows that belong to no sequence get zero gradients. */
flashc_status flashc_attn_varlen_bwd(const flashc_attn_params *params, const flashc_varlen *varlen,
                                     const flashc_tensor *q, const flashc_tensor *k,
                                     const flashc_tensor *v, const flashc_tensor *o,
                                     const flashc_tensor *dout, const flashc_tensor *lse,
                                     flashc_tensor *dq, flashc_tensor *dk, flashc_tensor *dv,
                                     flashc_attn_stats *stats);
flashc_status flashc_attn_varlen_bwd_workspace_size(
    const flashc_attn_params *params, const flashc_varlen *varlen, const flashc_tensor *q,
    const flashc_tensor *k, const flashc_tensor *v, const flashc_tensor *o,
    const flashc_tensor *dout, const flashc_tensor *lse, const flashc_tensor *dq,
    const flashc_tensor *dk, const flashc_tensor *dv, size_t *bytes);

/* ---- KV cache: decode and chunked prefill ------------------------------------------------ */

/* A KV cache, contiguous or paged (vLLM's block tables), and the keys to append to it.
 *   contiguous (block_table == NULL): k_cache (B_cache, S_cache, Hkv, D), v_cache (.., Dv);
 *       sequence b reads cache row cache_batch_idx[b] (or b when cache_batch_idx is NULL).
 *   paged: k_cache (num_pages, page_size, Hkv, D), v_cache (num_pages, page_size, Hkv, Dv);
 *       block_table int32 (B, max_pages): key j of sequence b is row j % page_size of page
 *       block_table[b][j / page_size]. Any page_size >= 1. Only the entries a sequence uses
 *       (ceil(length / page_size)) are read and checked (0 <= entry < num_pages).
 *   cache_seqlens int32 (B): keys already in the cache; NULL = every sequence holds S_cache
 *       (contiguous caches without k_new only).
 *   k_new (B, S_new, Hkv, D), v_new (B, S_new, Hkv, Dv), both or neither: written into the cache
 *       at positions cache_seqlens[b] .. cache_seqlens[b] + S_new - 1 before attending (as
 *       flash_attn_with_kvcache does), so sequence b then has Sk_b = cache_seqlens[b] + S_new
 *       keys; cache_seqlens itself is not updated. cache_seqlens[b] + S_new must fit the
 *       capacity (S_cache, or max_pages * page_size), checked.
 * Index tensors live in host memory for CPU calls. The cache is the same dtype as q. */
typedef struct flashc_kv_cache {
    size_t struct_size;                   /* sizeof(flashc_kv_cache)                           */
    flashc_tensor *k_cache, *v_cache;     /* read, and written when k_new/v_new are given       */
    const flashc_tensor *cache_seqlens;   /* int32 (B) or NULL                                  */
    const flashc_tensor *block_table;     /* int32 (B, max_pages) or NULL (contiguous)          */
    const flashc_tensor *cache_batch_idx; /* int32 (B) or NULL; contiguous caches only          */
    const flashc_tensor *k_new, *v_new;   /* (B, S_new, Hkv, D / Dv) or NULL                   */
} flashc_kv_cache;

/* Attention of q (B, Sq, Hq, D) against a KV cache: decode (Sq = 1..16) and chunked prefill
 * (Sq up to thousands) in one entry point. o (B, Sq, Hq, Dv); lse NULL or float32 (B, Hq, Sq).
 * Every mask and modifier applies, aligned bottom-right to each sequence's Sk_b. Split-KV
 * (params.num_splits) cuts long caches into chunks merged by (O, LSE). On a non-OK status
 * neither the outputs nor the cache were written. Forward only. */
flashc_status flashc_attn_kvcache_fwd(const flashc_attn_params *params,
                                      const flashc_kv_cache *cache, const flashc_tensor *q,
                                      flashc_tensor *o, flashc_tensor *lse,
                                      flashc_attn_stats *stats);
flashc_status flashc_attn_kvcache_fwd_workspace_size(const flashc_attn_params *params,
                                                     const flashc_kv_cache *cache,
                                                     const flashc_tensor *q, const flashc_tensor *o,
                                                     const flashc_tensor *lse, size_t *bytes);

/* ---- merging partial states (split-KV) ---------------------------------------------------- */

/* Merge two partial attention states over disjoint key sets into one:
 *   o1, o2, o (B, S, H, D) float32, bfloat16 or float16 (each may differ); lse1, lse2 (B, H, S)
 *   float32, lse (B, H, S) float32 or NULL.
 *   o = exp(lse1 - L) o1 + exp(lse2 - L) o2, L = log(exp(lse1) + exp(lse2)), float32 math.
 * A state with lse = -inf contributes nothing (its o is not read, so NaN there cannot leak);
 * both -inf gives o = 0, L = -inf. Host only. */
flashc_status flashc_attn_merge(const flashc_tensor *o1, const flashc_tensor *lse1,
                                const flashc_tensor *o2, const flashc_tensor *lse2,
                                flashc_tensor *o, flashc_tensor *lse);

/* ------------------------------------------------------------------------------------------ */
/* Online softmax: the primitive inside FlashAttention                                         */
/* ------------------------------------------------------------------------------------------ */

/* Running state of a softmax over a stream: m = max seen, l = sum exp(x - m).
 * The empty state is m = -inf, l = 0; softmax(x)_i = exp(x_i - m) / l; logsumexp = m + log l. */
typedef struct flashc_softmax_state {
    float m;
    float l;
} flashc_softmax_state;

flashc_softmax_state flashc_softmax_state_init(void);

/* Consumes x[0..n) (n >= 0; -inf entries are masked and contribute nothing) in one pass:
 * when the max grows, l is rescaled by exp(m_old - m_new) once. Host only. */
flashc_status flashc_online_softmax(flashc_softmax_state *state, const float *x, int64_t n);

/* Combines two states over disjoint streams (order does not matter). */
flashc_softmax_state flashc_softmax_state_merge(flashc_softmax_state a, flashc_softmax_state b);

/* ------------------------------------------------------------------------------------------ */
/* Fused elementwise ops                                                                       */
/* ------------------------------------------------------------------------------------------ */

/* RMSNorm over rows: y[t, :] = x[t, :] / sqrt(mean_d(x[t, d]^2) + eps) * w.
 *   x, y (T, D), w (D); same dtype; eps >= 0 and finite; rows may be strided (stride[1] == 1
 *   is not required). One pass to sum squares, one to write y; no (T, D) temporary. */
flashc_status flashc_rmsnorm(const flashc_tensor *x, const flashc_tensor *w, float eps,
                             flashc_tensor *y);
/* The naive version: materialises x^2, the per-row mean and the normalised x as (T, D)
 * temporaries (through the counting allocator), as a framework's unfused ops would. */
flashc_status flashc_rmsnorm_naive(const flashc_tensor *x, const flashc_tensor *w, float eps,
                                   flashc_tensor *y);

/* Residual add then RMSNorm: x <- x + r (written back: the new residual stream), then
 * y = rmsnorm(x) * w.   x (T, D) in/out, r (T, D), w (D), y (T, D); x must not overlap r or y. */
flashc_status flashc_rmsnorm_residual(flashc_tensor *x, const flashc_tensor *r,
                                      const flashc_tensor *w, float eps, flashc_tensor *y);
flashc_status flashc_rmsnorm_residual_naive(flashc_tensor *x, const flashc_tensor *r,
                                            const flashc_tensor *w, float eps, flashc_tensor *y);

/* SwiGLU on the fused gate|up projection: out[t, i] = silu(gu[t, i]) * gu[t, I + i],
 * silu(g) = g / (1 + exp(-g)).   gu (T, 2I), out (T, I). Reads the halves in place. */
flashc_status flashc_swiglu(const flashc_tensor *gu, flashc_tensor *out);
/* The naive version: copies g and u out, materialises silu(g), then multiplies. */
flashc_status flashc_swiglu_naive(const flashc_tensor *gu, flashc_tensor *out);

/* ------------------------------------------------------------------------------------------ */
/* Unfused attention, RoPE and the row ops' backwards (issue 14)                               */
/* ------------------------------------------------------------------------------------------ */

/* Attention as an unfused framework runs it, on the library's SIMD kernels (the same gemm, qk,
 * softmax and row conversions as flashc_attn_fwd): per (batch, head) S = scale * q k^T and
 * P = softmax(S) are materialised in full (Sq x Sk float32 each, counting allocator), then
 * O = P v, each a separate pass over memory. Same contract as flashc_attn_fwd_naive (float32,
 * bfloat16, float16 storage; causal; GQA; lse may be NULL), float32 accumulation. Host only.
 * The benchmark's baseline: it differs from flash only in where S and P live. */
flashc_status flashc_attn_fwd_unfused(const flashc_attn_params *params, const flashc_tensor *q,
                                      const flashc_tensor *k, const flashc_tensor *v,
                                      flashc_tensor *o, flashc_tensor *lse,
                                      flashc_attn_stats *stats);

/* Rotary position embedding (RoPE), applied in place to q and k.
 *   q (B, S, H, D) and k (B, S, Hkv, D) (k may be NULL): same dtype (float32, bfloat16,
 *   float16) and device, same B, S, D; any strides; k must not overlap q.
 * The first rotary_dim features of every head are rotated in pairs by the angle
 * a(pos, i) = pos * theta^(-2i / rotary_dim), i < rotary_dim / 2; features from rotary_dim on
 * are left as they are. The pairs (as flash-attn's apply_rotary_emb):
 *   FLASHC_ROPE_NEOX  (GPT-NeoX, half-split; flash-attn interleaved=False): (x[i], x[i + r/2])
 *   FLASHC_ROPE_GPTJ  (GPT-J, interleaved;   flash-attn interleaved=True):  (x[2i], x[2i + 1])
 *   (x0, x1) -> (x0 cos a - x1 sin a, x1 cos a + x0 sin a), float32 arithmetic, rounded once.
 * Angles come from tables or are computed:
 *   cos, sin (P, rotary_dim / 2) float32, both given or both NULL: row pos holds cos / sin of
 *     a(pos, .) for pos < P (any strides; flash-attn's cos/sin of shape (seqlen_ro, rotary_dim/2));
 *   both NULL: computed from pos and params->theta (float64 angle, reduced, then float32).
 * pos is the token's position: params->positions[b * pos_stride[0] + s * pos_stride[1]] (int32
 * on q's device) when given, else s + params->pos_offset. With tables, every position must lie
 * in [0, P): on the host a position outside is refused (FLASHC_ERR_INVALID_ARGUMENT, nothing
 * written); CUDA kernels cannot report it, so there such a token's rotated features become NaN.
 * CUDA tensors (tables and positions on the device too): launched on params->cuda_stream. */
typedef enum flashc_rope_style {
    FLASHC_ROPE_NEOX = 0, /* half-split pairs (x[i], x[i + rotary_dim / 2])  */
    FLASHC_ROPE_GPTJ = 1, /* interleaved pairs (x[2i], x[2i + 1])             */
} flashc_rope_style;

typedef struct flashc_rope_params {
    size_t struct_size;        /* sizeof(flashc_rope_params): the version of this struct (later
                                  versions grow at the end and keep accepting this size)      */
    flashc_rope_style style;
    int64_t rotary_dim;        /* features rotated per head; even, <= D; 0 means D            */
    float theta;               /* base of the computed angles; 0 means 10000                  */
    const int32_t *positions;  /* (B, S) token positions, or NULL: position = s + pos_offset  */
    int64_t pos_stride[2];     /* element strides of positions; {0, 0} means (S, 1)           */
    int64_t pos_offset;        /* added to s when positions is NULL (a KV-cache offset)       */
    int num_threads;           /* CPU threads; 0 = flashc_get_num_threads()                   */
    void *cuda_stream;         /* cudaStream_t for CUDA tensors; NULL = the default stream    */
} flashc_rope_params;

/* params must be given (struct_size set). cos and sin: see above (may be NULL). */
flashc_status flashc_rope(const flashc_rope_params *params, flashc_tensor *q, flashc_tensor *k,
                          const flashc_tensor *cos, const flashc_tensor *sin);
/* The backward: rotation by -a (the transpose of the rotation), in place on dq and dk. */
flashc_status flashc_rope_bwd(const flashc_rope_params *params, flashc_tensor *dq,
                              flashc_tensor *dk, const flashc_tensor *cos,
                              const flashc_tensor *sin);
/* The float64 reference of both (inverse != 0: the backward). Host only. */
flashc_status flashc_rope_naive(const flashc_rope_params *params, flashc_tensor *q,
                                flashc_tensor *k, const flashc_tensor *cos,
                                const flashc_tensor *sin, int inverse);

/* RMSNorm backward. With y = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps), g = dy * w:
 *   dx = rstd * (g - x * rstd^2 * mean(g * x)) [+ dres]     dw = sum over rows of dy * x * rstd
 *   x, dy, dx (T, D), w, dw (D): same dtype and device; dres (T, D) or NULL.
 * For the residual variant pass x = the new residual stream (what flashc_rmsnorm_residual wrote
 * into x) and dres = the gradient arriving at that stream: dx is then the gradient of both the
 * old x and r. float32 accumulation; dw is summed in a fixed order (deterministic).
 * CPU: no temporaries beyond per-thread float32 rows and dw partials. CUDA: a float32 workspace
 * of (blocks x D) partial sums from cudaMallocAsync on the default stream (stream-ordered). */
flashc_status flashc_rmsnorm_bwd(const flashc_tensor *x, const flashc_tensor *w,
                                 const flashc_tensor *dy, const flashc_tensor *dres, float eps,
                                 flashc_tensor *dx, flashc_tensor *dw);
/* The float64 reference. Host only. */
flashc_status flashc_rmsnorm_bwd_naive(const flashc_tensor *x, const flashc_tensor *w,
                                       const flashc_tensor *dy, const flashc_tensor *dres,
                                       float eps, flashc_tensor *dx, flashc_tensor *dw);

/* SwiGLU backward: with g = gu[:, :I], u = gu[:, I:], s = sigmoid(g),
 *   dgu[:, :I] = dout * u * s * (1 + g (1 - s)),   dgu[:, I:] = dout * g * s.
 *   gu, dgu (T, 2I), dout (T, I): same dtype and device. */
flashc_status flashc_swiglu_bwd(const flashc_tensor *gu, const flashc_tensor *dout,
                                flashc_tensor *dgu);
/* The float64 reference. Host only. */
flashc_status flashc_swiglu_bwd_naive(const flashc_tensor *gu, const flashc_tensor *dout,
                                      flashc_tensor *dgu);

/* CUDA row ops: flashc_rmsnorm, flashc_rmsnorm_residual, flashc_swiglu and the backwards above
 * run on the GPU when every tensor is FLASHC_DEVICE_CUDA (float32, bfloat16, float16; any row
 * stride; element stride 1 required), asynchronously on the default stream. The *_naive
 * functions are host only. */

/* ------------------------------------------------------------------------------------------ */
/* Build information                                                                           */
/* ------------------------------------------------------------------------------------------ */

/* "0.1.0 (cpu: avx2 fma; cuda: sm_80 sm_90a)" — what this binary was built with and, for the
 * CPU, which kernels it selected on this machine. The CPU kernels are chosen at run time from
 * the CPU's features (avx512 > avx2 > scalar on x86-64, neon on AArch64); the environment
 * variable FLASHC_ISA=scalar|avx2|avx512|neon, read once, forces one the CPU can run. */
const char *flashc_build_info(void);

/* Nonzero when this build has the CUDA backend and a CUDA device is visible. */
int flashc_cuda_available(void);

#ifdef __cplusplus
}
#endif

#endif /* FLASHC_H */
