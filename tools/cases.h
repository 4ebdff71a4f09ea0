/*
 * cases.h — the CLI's one table of ops: how to build random inputs for a problem, run each
 * implementation of it, compare against the reference, and count its FLOPs and bytes.
 *
 * `flashc check` and `flashc bench` both drive ops through this table (the ggml
 * test-backend-ops habit: one case list, correctness and performance are modes of it). Adding an
 * op (attention backward, a GEMM ceiling) is adding one op_entry and its functions in cases.c,
 * plus one bench_ops row in bench.c that builds its problems from the bench options.
 *
 * Every op has implementations impls[0..n_impls); impls[0] is the reference (the naive path,
 * float64 accumulation) that the others are compared against. A case owns two output slots:
 * slot 0 holds the reference output, slot 1 the output of the implementation under test.
 */
#ifndef FLASHC_TOOLS_CASES_H
#define FLASHC_TOOLS_CASES_H

#include "flashc.h"

#include <stddef.h>
#include <stdint.h>

/* One problem. Attention ops read the attention fields, row ops (RMSNorm, SwiGLU, softmax)
 * the row fields. Zero-initialise and set what matters; case_spec_defaults() fills the rest. */
typedef struct case_spec {
    const char *op;          /* an op_desc name: "attn", "rmsnorm", ...                      */
    /* attention: q (batch, sq, heads, d), k and v (batch, sk, kv_heads, d) */
    int64_t batch, sq, sk, heads, kv_heads, d;
    int causal;
    int64_t br, bc;          /* tiles; 0 = library default                                   */
    float q_scale;           /* q is N(0,1) * q_scale (the seeds' "Q x 100" case); 0 means 1  */
    int64_t split;           /* attn_merge: keys [0, split) and [split, sk); 0 = sk / 2       */
    int64_t ref_rows;        /* attention: the reference computes (and max_err compares) only
                                the last ref_rows query rows; 0 = all                        */
    int bhsd;                /* q, k, v, o stored (B, H, S, D) and passed as strided views    */
    /* row ops: rows (T, width); width is D for RMSNorm, I for SwiGLU, the stream length for
     * softmax */
    int64_t rows, width;
    int threads;             /* 0 = library default                                          */
    flashc_dtype dtype;      /* storage of the op's tensors (not of attention's LSE, always
                                float32); FLASHC_F32 (0) by default. bf16 / f16 only for ops
                                with any_dtype: the inputs are rounded into it once, impls run
                                on that storage, and the reference runs in float32 on the same
                                (widened, exact) values                                       */
    double tol;              /* check: the largest error accepted; 0 = the op's default      */
    /* attention v2 (attn, attn_varlen, attn_kvcache) */
    int64_t window;          /* > 0: sliding window of `window` keys to the left (window_left;
                                window_right 0 with causal, else unbounded); 0 = none        */
    float softcap;           /* > 0: softcap                                                 */
    int alibi;               /* nonzero: ALiBi with the standard slopes 2^(-8 (h + 1) / H)  */
    int64_t page_size;       /* attn_kvcache: 0 = contiguous cache, else paged (shuffled)   */
} case_spec;

/* What one call reported, for the traffic model. */
typedef struct case_stats {
    int64_t block_q, block_k; /* tiles actually used (attention), 0 otherwise */
    int64_t tile_pairs;       /* (Q block, K block) pairs computed (flash), 0 otherwise */
} case_stats;

typedef struct op_desc op_desc;

/* An op's inputs and its two output slots; opaque outside cases.c. */
typedef struct case_data case_data;

struct op_desc {
    const char *name;          /* "attn"                                              */
    const char *summary;       /* one line for --help                                 */
    const char *impls[3];      /* impls[0] is the reference                           */
    int n_impls;
    int any_dtype;             /* 1: runs in f32, bf16 or f16 storage; 0: float32 only */
};

/* The op table. */
extern const op_desc *const cases_ops[];
extern const int cases_n_ops;

/* The op called name, or NULL. */
const op_desc *cases_find_op(const char *name);
/* The index of impl name in op->impls, or -1. */
int cases_find_impl(const op_desc *op, const char *name);

/* Fills the unset fields of s (sk = sq, kv_heads = heads, q_scale = 1, ...). */
void case_spec_defaults(case_spec *s);

/* A short human-readable shape ("B1 H1/1 S512x512 D64 causal 64x64"), into buf; the dtype
 * is appended when it is not float32 (" bf16"). */
void case_describe(const case_spec *s, char *buf, size_t size);

/* Allocates the inputs (filled with N(0,1) data from seed, rounded into s->dtype) and both
 * output slots. NULL with a message in err when the memory is not there, or when the op does
 * not take s->dtype. */
case_data *case_create(const case_spec *s, uint64_t seed, char *err, size_t err_size);
void case_destroy(case_data *c);

/* Runs implementation impl (index into impls) writing output slot `slot` (0 or 1). An op that
 * writes an input in place (the residual RMSNorm writes x) works on a per-slot copy:
 * case_prepare() restores it and is not part of the call, so time case_run() alone. */
void case_prepare(case_data *c, int slot);
flashc_status case_run(case_data *c, int impl, int slot, case_stats *stats);

/* The reference (impls[0]) into slot 0, prepare included; honours ref_rows. Always float32
 * storage: with a bf16 / f16 spec it reads the rounded inputs widened to float32 (exact). */
flashc_status case_run_reference(case_data *c);

/* Largest error of slot 1 (converted to float32 first when it is bf16 / f16) against slot 0
 * (over what the reference computed), in the op's metric (see cases.c); +inf when slot 1 holds
 * a NaN or an infinity where the reference is finite. */
double case_max_err(case_data *c);
/* A hash of every input buffer the impls read (in s->dtype): equal before and after a run
 * when the run left its inputs alone (the library's promise). */
uint64_t case_inputs_hash(const case_data *c);
/* The op's default tolerance for s (used when s->tol == 0), s->dtype's rounding included. */
double case_default_tol(const case_spec *s);

/* Useful floating-point operations of one call (attention: 4 * B * Hq * D * visible (q, k)
 * pairs), 0 for ops whose rate is reported in GB/s. */
double case_flops(const case_spec *s);
/* Minimal bytes one call must move: every input read once, every output written once, at
 * s->dtype's element size (LSE: 4 bytes). */
double case_min_bytes(const case_spec *s);
/* Modeled bytes moved by implementation impl (the seeds' traffic model, traffic.h). */
double case_traffic(const case_spec *s, int impl, const case_stats *st);

#endif /* FLASHC_TOOLS_CASES_H */
