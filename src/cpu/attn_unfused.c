/*
 * attn_unfused.c — attention the way an unfused framework runs it, on the same SIMD
 * micro-kernels as the flash forward: the benchmark's honest baseline.
 *
 * For each (batch, query head), one head at a time, three separate passes over memory, each an
 * OpenMP loop over blocks of query rows (the way three framework ops would run one after the
 * other):
 *   1. S = scale q k^T          (Sq x Sk float32)  kr->qk, masked entries -inf
 *   2. P = softmax(S) by rows   (Sq x Sk float32)  a row of S is copied into P and the row's
 *                                                   max / exp / sum (kr->softmax) and the 1/sum
 *                                                   scaling (kr->store_row) run on it while it
 *                                                   is hot: one read of S, one write of P, as a
 *                                                   framework's softmax kernel does
 *   3. O = P v                  (Sq x D)           kr->gemm, float32 accumulation
 * S and P are scratch (attn_scratch: one block from the counting allocator, so peak memory
 * shows them); q, k, v are widened into float32 head buffers first (bf16 / f16 storage: the
 * same conversion as flash's tile loads).
 *
 * The only difference from the flash forward is therefore where S and P live: in a buffer of
 * Sq x Sk floats that fits the caches at small n and streams through DRAM at large n, against
 * flash's per-thread tiles. Under the causal mask the keys above the diagonal are not computed
 * (S holds -inf there and P zeros), so the FLOPs match flash's too.
 *
 * Contract: flashc_attn_fwd_naive's for the plain problem (attn_is_plain: dense, causal or not,
 * float32 / bf16 / f16 storage, GQA, any strides, LSE optional; a row that sees no key gives
 * O = 0 and LSE = -inf); windows, score modifiers and the other layouts are refused.
 */
#include "internal.h"
#include "kernels.h"

#include <math.h>
#include <string.h>

/* Query rows per work item: enough that qk's packed K chunks are reused across rows, few enough
 * that 2 threads share short sequences. */
enum { ROWS = 96 };

static const void *elem_ptr(const void *base, flashc_dtype dt, int64_t off)
{
    return (const char *)base + off * (int64_t)flashc_dtype_size(dt);
}

/* dst (rows x D, ld) = float32 copy of a (rows, D) slice of a strided tensor (st[1] rows,
 * st[3] features). */
static void widen(const cpu_kernels *kr, const void *base, flashc_dtype dt, const int64_t *st,
                  int64_t off, int64_t rows, int64_t D, float *dst, int64_t ld, int threads)
{
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t r = 0; r < rows; r++) {
        if (st[3] == 1)
            kr->load_row(elem_ptr(base, dt, off + r * st[1]), dt, D, dst + r * ld);
        else
            for (int64_t d = 0; d < D; d++)
                dst[r * ld + d] = flashc__load(base, dt, off + r * st[1] + d * st[3]);
    }
}

flashc_status cpu_attn_fwd_unfused_supports(const attn_problem *p)
{
    if (!attn_is_plain(p))
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "flashc_attn_fwd_unfused: serves the plain dense problem only (no "
                            "varlen, KV cache, window, softcap, ALiBi, Dk != Dv or split-KV)");
    if (p->dtype != FLASHC_F32 && p->dtype != FLASHC_BF16 && p->dtype != FLASHC_F16)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED_DTYPE,
                            "flashc_attn_fwd_unfused: float32, bfloat16 or float16 storage (%s "
                            "given)",
                            flashc__dtype_name(p->dtype));
    return FLASHC_OK;
}

/* S, P (Sq x Sk), Q then O (Sq x D), K, V (Sk x D): float32. */
static void sizes(const attn_problem *p, size_t *s)
{
    s[0] = s[1] = (size_t)p->Sq * (size_t)p->Sk * sizeof(float);
    s[2] = (size_t)p->Sq * (size_t)p->D * sizeof(float);
    s[3] = s[4] = (size_t)p->Sk * (size_t)p->D * sizeof(float);
}

size_t cpu_attn_fwd_unfused_workspace(const attn_problem *p)
{
    size_t s[5];
    sizes(p, s);
    return attn_scratch_bytes(5, s);
}

flashc_status cpu_attn_fwd_unfused(const attn_problem *p, flashc_attn_stats *stats)
{
    const cpu_kernels *kr = cpu_kernels_get();
    const int64_t Sq = p->Sq, Sk = p->Sk, D = p->D, group = p->Hq / p->Hkv;
    const int64_t ld = D; /* float32 head buffers, rows contiguous */
    size_t sz[5];
    sizes(p, sz);
    attn_scratch sc;
    attn_scratch_init(&sc, p);
    float *S = attn_scratch_take(&sc, sz[0]);
    float *P = attn_scratch_take(&sc, sz[1]);
    float *Q = attn_scratch_take(&sc, sz[2]); /* then O */
    float *K = attn_scratch_take(&sc, sz[3]);
    float *V = attn_scratch_take(&sc, sz[4]);
    if (!S || !P || !Q || !K || !V) {
        attn_scratch_free(&sc, V), attn_scratch_free(&sc, K), attn_scratch_free(&sc, Q);
        attn_scratch_free(&sc, P), attn_scratch_free(&sc, S);
        return flashc__fail(FLASHC_ERR_OUT_OF_MEMORY,
                            "flashc_attn_fwd_unfused: cannot allocate S and P "
                            "(2 x %lld x %lld floats)",
                            (long long)Sq, (long long)Sk);
    }
    const int64_t nblk = (Sq + ROWS - 1) / ROWS;
    const int threads = p->threads;
    for (int64_t b = 0; b < p->B; b++)
        for (int64_t hk = 0; hk < p->Hkv; hk++) {
            widen(kr, p->k, p->dtype, p->sk, b * p->sk[0] + hk * p->sk[2], Sk, D, K, ld, threads);
            widen(kr, p->v, p->dtype, p->sv, b * p->sv[0] + hk * p->sv[2], Sk, D, V, ld, threads);
            for (int64_t h = hk * group; h < (hk + 1) * group; h++) {
                widen(kr, p->q, p->dtype, p->sq, b * p->sq[0] + h * p->sq[2], Sq, D, Q, ld,
                      threads);
                /* pass 1: S = scale q k^T over the keys a block's last row sees, -inf after */
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
                for (int64_t blk = 0; blk < nblk; blk++) {
                    const int64_t i0 = blk * ROWS, rows = Sq - i0 < ROWS ? Sq - i0 : ROWS;
                    int64_t kend = attn_key_end(p, i0 + rows - 1);
                    kend = kend < 0 ? 0 : kend;
                    if (kend > 0)
                        kr->qk(Q + i0 * ld, ld, K, ld, rows, kend, D, p->scale, S + i0 * Sk, Sk);
                    for (int64_t r = 0; r < rows; r++) {
                        int64_t first = attn_key_end(p, i0 + r);
                        first = first < 0 ? 0 : first;
                        float *s = S + (i0 + r) * Sk;
                        for (int64_t j = first; j < Sk; j++)
                            s[j] = -INFINITY;
                    }
                }
                /* pass 2: P = softmax(S) row by row; LSE = max + log(sum) */
#pragma omp parallel for schedule(static) num_threads(threads)
                for (int64_t i = 0; i < Sq; i++) {
                    float *prow = P + (size_t)i * (size_t)Sk;
                    memcpy(prow, S + (size_t)i * (size_t)Sk, (size_t)Sk * sizeof(float));
                    float m = -INFINITY, l = 0.0f, alpha;
                    kr->softmax(prow, Sk, 1, Sk, &m, &l, &alpha);
                    kr->store_row(prow, l > 0.0f ? 1.0f / l : 0.0f, Sk, prow, FLASHC_F32);
                    if (p->lse)
                        p->lse[b * p->slse[0] + h * p->slse[1] + i * p->slse[2]] =
                            l == 0.0f ? -INFINITY : m + logf(l);
                }
                /* pass 3: O = P v (into Q's buffer, free now), then stored in the dtype */
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
                for (int64_t blk = 0; blk < nblk; blk++) {
                    const int64_t i0 = blk * ROWS, rows = Sq - i0 < ROWS ? Sq - i0 : ROWS;
                    int64_t kend = attn_key_end(p, i0 + rows - 1);
                    kend = kend < 0 ? 0 : kend;
                    float *o32 = Q + i0 * ld;
                    if (kend > 0)
                        kr->gemm(rows, D, kend, P + i0 * Sk, Sk, 1, V, ld, NULL, o32, ld);
                    else
                        memset(o32, 0, (size_t)(rows * ld) * sizeof(float));
                    for (int64_t r = 0; r < rows; r++) {
                        const int64_t orow = b * p->so[0] + h * p->so[2] + (i0 + r) * p->so[1];
                        if (p->so[3] == 1)
                            kr->store_row(o32 + r * ld, 1.0f, D,
                                          (void *)elem_ptr(p->o, p->dtype, orow), p->dtype);
                        else
                            for (int64_t d = 0; d < D; d++)
                                flashc__store(p->o, p->dtype, orow + d * p->so[3],
                                              o32[r * ld + d]);
                    }
                }
            }
        }
    attn_scratch_free(&sc, V), attn_scratch_free(&sc, K), attn_scratch_free(&sc, Q);
    attn_scratch_free(&sc, P), attn_scratch_free(&sc, S);
    stats->tile_pairs = 0;
    stats->tile_pairs_total = 0;
    stats->block_q = Sq;
    stats->block_k = Sk;
    return FLASHC_OK;
}
