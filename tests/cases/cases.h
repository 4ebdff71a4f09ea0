/*
 * cases.h — the one table of ops and cases: how to build random inputs for a problem, run each
 * implementation of it, compare against the reference, and count its FLOPs and bytes.
 *
 * A static library (flashc_cases) linked by the CLI and by the tests: the ctest driver
 * tests/test_cases.c, `flashc check` and `flashc bench` (its --suite check times the same rows)
 * all drive ops through this table (the ggml test-backend-ops habit: one case list, correctness
 * and performance are modes of it). Adding an op is adding one op_entry and its functions in
 * cases.c (plus one bench_ops row in tools/bench.c that builds its problems from the bench
 * options); adding a case is one row in table.c.
 *
 * Every op has implementations impls[0..n_impls); impls[0] is the reference (the naive path,
 * float64 accumulation) that the others are compared against. A case owns two output slots:
 * slot 0 holds the reference output, slot 1 the output of the implementation under test.
 */
#ifndef FLASHC_CASES_H
#define FLASHC_CASES_H

#include "flashc.h"

#include <stddef.h>
#include <stdint.h>

/* Property rows (case_spec.prop): instead of the impls against the reference, two runs of
 * the last impl (the default kernel) against each other: slot 0 the baseline, slot 1 the
 * variant. Bit-identical outputs are required, except for CASE_PROP_SPLITS (within the op's
 * tolerance: the merge reorders the sums). */
typedef enum case_prop {
    CASE_PROP_NONE = 0,
    CASE_PROP_POISON_BIG, /* attn: K and V of the keys outside one query row's key range set
                             to 1e4 (that row, every batch and head, compared)             */
    CASE_PROP_POISON_NAN, /* attn: the same with NaN                                        */
    CASE_PROP_SPLITS,     /* attn, attn_kvcache: num_splits = 1 vs num_splits               */
    CASE_PROP_PAGED,      /* attn_kvcache (s_new = 0): the same keys contiguous vs paged     */
    CASE_PROP_ALONE,      /* attn_varlen: each sequence alone (dense, batch 1) vs packed     */
} case_prop;

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
    int prop;                /* a case_prop: a property row (above); 0 = against the reference */
    const char *may_refuse;  /* check: this impl ("unfused", "cuda") answering
                                FLASHC_ERR_UNSUPPORTED is reported as skipped (with its
                                message), not failed: a feature it does not serve. Every other
                                impl, and the reference, must still run.                      */
    /* attention v2 (every attention op: attn, attn_varlen, attn_kvcache, attn_bwd, ...) */
    int64_t dv;              /* head dim of v and o (Dk != Dv); 0 = d                         */
    int64_t window;          /* > 0: sliding window, window_left = window; 0 = none            */
    int64_t window_right;    /* > 0: window_right (not with causal); 0 = 0 with causal, else
                                unbounded                                                    */
    float softcap;           /* > 0: softcap                                                 */
    int alibi;               /* 1: ALiBi slopes (Hq), the standard 2^(-8 (h + 1) / H);
                                2: (B, Hq), sequence b's scaled by 1 + b / 4                 */
    int num_splits;          /* params.num_splits (split-KV); 0 = the library chooses        */
    /* attn_varlen: batch sequences; NULL = mixed lengths summing to sq (cases.c) */
    const int32_t *seqlens;   /* (batch) query lengths, zeros allowed; sq = their sum        */
    const int32_t *seqlens_k; /* (batch) key lengths; NULL = seqlens; sk = their sum         */
    /* attn_kvcache: sk is every sequence's capacity */
    int64_t page_size;       /* 0 = contiguous cache, else paged (pages shuffled)            */
    const int32_t *cache_lens; /* (batch) rows already cached; NULL = sk - s_new each        */
    int64_t s_new;           /* > 0: k_new / v_new (batch, s_new, ...) appended first        */
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

/* Whether implementation impl can run here (a "cuda" impl needs a CUDA build and a visible
 * device); case_check reports the others as skipped, never as passed. */
int case_impl_available(const case_data *c, int impl);

/* ---- the table and its check (table.c) ------------------------------------------------------ */

/* The rows every checker runs (`flashc check`, tests/test_cases.c, `flashc bench --suite
 * check`); *count gets their number. */
const case_spec *cases_table(int *count);

/* One (row, implementation) result of case_check. */
typedef struct case_outcome {
    const char *op, *impl;
    char shape[200];  /* case_describe of the row                                      */
    double err, tol;  /* the op's metric, the tolerance it was held to                */
    int skipped;      /* the impl cannot run here (case_impl_available), or refused a
                         may_refuse row (why holds its message)                          */
    char why[320];    /* "" = passed, else why it failed (status, modified input, error) */
} case_outcome;

typedef void (*case_report_fn)(void *ctx, const case_outcome *r);

/* Runs the reference of row, then every other impl of its op on the same inputs (drawn from
 * seed), checks status, untouched inputs and error <= tolerance, and reports each impl once.
 * Returns the number of failures. */
int case_check(const case_spec *row, uint64_t seed, case_report_fn report, void *ctx);

#endif /* FLASHC_CASES_H */
