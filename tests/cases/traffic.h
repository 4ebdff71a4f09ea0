/*
 * traffic.h — the seeds' memory-traffic model: bytes each implementation moves between the
 * large memory (DRAM / HBM) and the chip, if every materialised tensor round-trips through it
 * and nothing else does. A model, not a measurement; docs/traffic.md states it in prose.
 *
 * e is the element size in bytes of the tensors (4 for float32, 2 for bf16/fp16); LSE is
 * always float32 (4 bytes).
 */
#ifndef FLASHC_TOOLS_TRAFFIC_H
#define FLASHC_TOOLS_TRAFFIC_H

#include <stdint.h>

/* An attention problem as the model sees it: q (B, Sq, Hq, D), k, v (B, Sk, Hkv, D). */
typedef struct traffic_attn {
    int64_t B, Sq, Sk, Hq, Hkv, D;
    int causal;
    double e; /* bytes per element */
} traffic_attn;

/* Keys query row i sees: min(Sk, i + 1 + Sk - Sq) under the bottom-right causal mask, clamped
 * at 0; Sk without the mask. */
int64_t traffic_key_end(const traffic_attn *a, int64_t i);

/* Sum over query rows of the keys each sees (one head): Sq * Sk, or ~half of it causal. */
double traffic_visible_pairs(const traffic_attn *a);

/* Naive attention, per (batch, query head):
 *   read Q, K, V once and write O:          e * (2 Sq D + 2 Sk D)
 *   write S, read S for the row max,
 *   read S + write exp(S - max), read P for P V:   5 e Sq Sk
 *   write LSE:                              4 Sq                                           */
double traffic_attn_naive(const traffic_attn *a);

/* Flash attention (FA-2 order) with tiles br x bc, per (batch, query head):
 *   read Q once per row block (= once):     e Sq D
 *   read K and V once per tile pass: each row block streams the K/V tiles it visits,
 *     sum over row blocks of 2 e D * min(Sk, ceil(kend / bc) * bc), kend = the keys its last
 *     row sees (0 when it sees none)
 *   write O and LSE:                        e Sq D + 4 Sq                                  */
double traffic_attn_flash(const traffic_attn *a, int64_t br, int64_t bc);

/* Naive backward, per (batch, query head): the seeds' formulas on whole matrices, with P kept
 * from the forward (what a framework stores for the backward):
 *   read Q, K, V, O, dO once, write dQ, dK, dV:   e * (4 Sq D + 4 Sk D)
 *   read P for dV = P^T dO, write dP = dO V^T,
 *   read P and dP + write dS, read dS for dQ and for dK:   7 e Sq Sk                        */
double traffic_attn_bwd_naive(const traffic_attn *a);

/* Flash backward (FA-2 Algorithm 2: outer loop over K/V blocks, inner over the Q blocks that
 * see them), tiles br x bc, per (batch, query head):
 *   read O and dO for D = rowsum(dO * O), write D:        2 e Sq D + 4 Sq
 *   read K, V once, write dK, dV once:                    4 e Sk D
 *   per visited (Q block, K block) pair of r query rows: read Q, dO, L, D and read + write
 *   dQ:                                                   r * (4 e D + 8)                  */
double traffic_attn_bwd_flash(const traffic_attn *a, int64_t br, int64_t bc);

/* RMSNorm of T rows of width D (the seeds' 10 d vs 4 d bytes per row at bf16):
 *   naive: read x, write x^2, read x^2, read x, write y   = 5 e T D
 *   fused: read x, write y                                 = 2 e T D
 * residual variant (x <- x + r first):
 *   naive: + read x, read r, write x (a separate add op)   = 8 e T D
 *   fused: read x, read r, write x, write y                = 4 e T D
 * The weight vector (D elements) is not counted, as in the seeds. */
double traffic_rmsnorm(int64_t T, int64_t D, double e, int fused, int residual);

/* SwiGLU of T tokens with intermediate size I (the seeds' 30 KiB vs 18 KiB per token at
 * I = 3072, bf16):
 *   naive: write g, write u, read g, read u, write silu(g) * u   = 5 e T I
 *   fused: read the g|u view, write silu(g) * u                 = 3 e T I              */
double traffic_swiglu(int64_t T, int64_t I, double e, int fused);

#endif /* FLASHC_TOOLS_TRAFFIC_H */
