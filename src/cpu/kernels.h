/*
 * kernels.h — the CPU micro-kernel contract (BLIS-style).
 *
 * The tiled loop nests in attn_fwd.c (and attn_bwd.c) are portable; only the small products
 * on tiles held in per-thread float32 buffers change per instruction set. A table of function
 * pointers starts from the scalar reference kernels (kernels_scalar.c) and an ISA overrides the
 * entries it speeds up; cpu_kernels() picks the table once from the CPU's features.
 *
 * All tiles are row-major float32 with an explicit leading dimension (in floats).
 */
#ifndef FLASHC_CPU_KERNELS_H
#define FLASHC_CPU_KERNELS_H

#include <stdint.h>

typedef struct cpu_kernels {
    const char *name;

    /* S[i][j] = scale * sum_d Q[i][d] * K[j][d]     Q (br x D, ldq), K (bc x D, ldk),
     * S (br x bc, lds).                                                                       */
    void (*qk)(const float *Q, int64_t ldq, const float *K, int64_t ldk, int64_t br,
               int64_t bc, int64_t D, float scale, float *S, int64_t lds);

    /* Online-softmax update of br rows over one tile of scores, in place:
     *   S (br x bc, lds) scores, masked entries -inf  ->  P = exp(S - m_new)
     *   m, l (br): running max and sum; alpha (br) out: exp(m_old - m_new), the factor the
     *   caller applies to its accumulator row (1 when the max did not grow).                */
    void (*softmax)(float *S, int64_t lds, int64_t br, int64_t bc, float *m, float *l,
                    float *alpha);

    /* O[i][d] = alpha[i] * O[i][d] + sum_j P[i][j] * V[j][d]    P (br x bc, ldp),
     * V (bc x D, ldv), O (br x D, ldo).                                                       */
    void (*pv)(const float *P, int64_t ldp, const float *V, int64_t ldv, int64_t br,
               int64_t bc, int64_t D, const float *alpha, float *O, int64_t ldo);
} cpu_kernels;

extern const cpu_kernels cpu_kernels_scalar;

/* The table for this machine (chosen once, thread-safe). */
const cpu_kernels *cpu_kernels_get(void);

#endif /* FLASHC_CPU_KERNELS_H */
