/*
 * table.c — the one case table: the problems `flashc check`, the ctest driver
 * tests/test_cases.c and `flashc bench --suite check` all run (cases.h). A new op, shape, mask
 * or property is one more row; every implementation of the row's op is checked against the
 * op's reference (impls[0]) by case_check().
 */
#include "cases.h"

#include <stdio.h>
#include <string.h>

static const case_spec table[] = {
    /* attention: the seeds' checklist, then the edges */
    {.op = "attn", .sq = 256, .d = 64, .br = 32, .bc = 32},
    {.op = "attn", .sq = 256, .d = 64, .br = 32, .bc = 32, .causal = 1},
    {.op = "attn", .sq = 256, .d = 64, .br = 7, .bc = 13},
    {.op = "attn", .sq = 256, .d = 64, .br = 7, .bc = 13, .causal = 1},
    {.op = "attn", .sq = 333, .d = 64},
    {.op = "attn", .sq = 333, .d = 64, .causal = 1},
    {.op = "attn", .sq = 1, .d = 64},
    {.op = "attn", .sq = 1, .d = 64, .causal = 1},
    {.op = "attn", .sq = 20, .d = 16, .br = 1, .bc = 1, .causal = 1},
    {.op = "attn", .sq = 50, .d = 32, .br = 128, .bc = 128, .causal = 1},    /* tiles > n */
    {.op = "attn", .sq = 100, .sk = 37, .d = 64, .causal = 1},              /* masked rows */
    {.op = "attn", .sq = 100, .sk = 37, .d = 64, .br = 16, .bc = 8, .causal = 1},
    {.op = "attn", .sq = 37, .sk = 100, .d = 64, .causal = 1},
    {.op = "attn", .sq = 1, .sk = 300, .d = 64, .causal = 1},              /* decode step */
    {.op = "attn", .sq = 77, .sk = 129, .d = 64, .br = 16, .bc = 32},
    {.op = "attn", .sq = 130, .d = 8, .causal = 1},
    {.op = "attn", .sq = 130, .d = 40, .causal = 1},
    {.op = "attn", .sq = 130, .d = 64, .causal = 1},
    {.op = "attn", .sq = 130, .d = 96},
    {.op = "attn", .sq = 130, .d = 128, .causal = 1},
    {.op = "attn", .sq = 130, .d = 256},
    {.op = "attn", .sq = 65, .d = 80, .br = 16, .bc = 16},                    /* odd head dim */
    {.op = "attn", .sq = 96, .heads = 8, .kv_heads = 2, .d = 64, .causal = 1}, /* GQA */
    {.op = "attn", .sq = 96, .heads = 4, .kv_heads = 1, .d = 64},             /* MQA */
    {.op = "attn", .batch = 2, .sq = 70, .sk = 90, .heads = 4, .kv_heads = 2, .d = 32,
     .causal = 1, .bhsd = 1},                                                /* (B, H, S, D) */
    {.op = "attn", .sq = 128, .d = 64, .q_scale = 100.0f},                   /* Q x 100 */
    {.op = "attn", .sq = 128, .d = 64, .q_scale = 100.0f, .causal = 1},
    /* from tests/test_attn_fwd.c's former list: Sq != Sk both ways, decode, n = 1, GQA/MQA,
     * head dims 3..256, tiles that do not divide or exceed n */
    {.op = "attn", .batch = 2, .sq = 113, .sk = 203, .heads = 2, .d = 64},
    {.op = "attn", .batch = 2, .sq = 113, .sk = 203, .heads = 2, .d = 64, .causal = 1,
     .br = 32, .bc = 48},
    {.op = "attn", .sq = 203, .sk = 113, .heads = 2, .kv_heads = 1, .d = 64, .causal = 1,
     .br = 16, .bc = 32},
    {.op = "attn", .batch = 3, .sq = 1, .sk = 147, .heads = 4, .kv_heads = 2, .d = 64,
     .causal = 1},
    {.op = "attn", .sq = 1, .sk = 1, .d = 64},
    {.op = "attn", .sq = 1, .sk = 1, .heads = 2, .kv_heads = 1, .d = 32, .causal = 1},
    {.op = "attn", .batch = 2, .sq = 97, .heads = 8, .kv_heads = 2, .d = 64},
    {.op = "attn", .batch = 2, .sq = 97, .sk = 131, .heads = 8, .kv_heads = 2, .d = 64,
     .causal = 1, .br = 16, .bc = 16},
    {.op = "attn", .sq = 150, .heads = 4, .kv_heads = 1, .d = 64, .causal = 1},
    {.op = "attn", .sq = 77, .sk = 91, .heads = 2, .d = 8},
    {.op = "attn", .sq = 77, .sk = 91, .heads = 2, .kv_heads = 1, .d = 40, .causal = 1},
    {.op = "attn", .sq = 130, .sk = 129, .heads = 2, .d = 128, .causal = 1},
    {.op = "attn", .sq = 70, .sk = 150, .d = 256},
    {.op = "attn", .sq = 150, .sk = 70, .heads = 2, .kv_heads = 1, .d = 256, .causal = 1},
    {.op = "attn", .batch = 2, .sq = 19, .sk = 23, .heads = 3, .kv_heads = 1, .d = 3,
     .causal = 1, .br = 1, .bc = 1},
    {.op = "attn", .sq = 20, .sk = 30, .d = 16, .causal = 1, .br = 512, .bc = 512},
    /* split-KV: two flash halves merged */
    {.op = "attn_merge", .sq = 200, .d = 64, .split = 77},
    {.op = "attn_merge", .sq = 1, .sk = 301, .heads = 8, .kv_heads = 2, .d = 128, .split = 150},
    {.op = "attn_merge", .batch = 2, .sq = 33, .sk = 64, .heads = 2, .d = 40, .split = 1,
     .bhsd = 1},
    /* attention backward (o and lse from the flash forward) and forward + backward */
    {.op = "attn_bwd", .sq = 130, .d = 64},
    {.op = "attn_bwd", .sq = 130, .d = 64, .causal = 1},
    {.op = "attn_bwd", .sq = 77, .sk = 129, .d = 40, .br = 16, .bc = 32, .causal = 1},
    {.op = "attn_bwd", .sq = 100, .sk = 37, .d = 64, .br = 16, .bc = 8, .causal = 1}, /* masked */
    {.op = "attn_bwd", .sq = 1, .sk = 300, .d = 64, .causal = 1},                  /* decode step */
    {.op = "attn_bwd", .sq = 1, .d = 16},                                           /* n = 1 */
    {.op = "attn_bwd", .sq = 96, .heads = 8, .kv_heads = 2, .d = 64, .causal = 1},  /* GQA */
    {.op = "attn_bwd", .sq = 96, .heads = 4, .kv_heads = 1, .d = 80},               /* MQA */
    {.op = "attn_bwd", .batch = 2, .sq = 70, .sk = 90, .heads = 4, .kv_heads = 2, .d = 32,
     .causal = 1, .bhsd = 1},                                                      /* BHSD */
    {.op = "attn_bwd", .sq = 130, .d = 128, .br = 7, .bc = 13, .causal = 1},
    {.op = "attn_fwdbwd", .sq = 200, .d = 64, .causal = 1},
    {.op = "attn_fwdbwd", .sq = 65, .sk = 90, .heads = 6, .kv_heads = 2, .d = 48},
    /* Attention v2: windows (left, right), softcap, ALiBi (Hq) and (B, Hq), Dk != Dv, split-KV,
     * with GQA, odd sizes and every storage dtype (the unfused baseline serves the plain dense
     * problem only: it may refuse these) */
    {.op = "attn", .may_refuse = "unfused", .sq = 150, .sk = 150, .d = 32, .window = 20, .causal = 1},
    {.op = "attn", .may_refuse = "unfused", .sq = 120, .sk = 150, .heads = 2, .kv_heads = 1, .d = 32, .dv = 24,
     .window = 20, .causal = 1},
    {.op = "attn", .may_refuse = "unfused", .batch = 2, .sq = 64, .heads = 2, .d = 16, .window = 5, .window_right = 9,
     .softcap = 4.0f, .alibi = 2},
    {.op = "attn", .may_refuse = "unfused", .sq = 97, .sk = 61, .heads = 4, .kv_heads = 2, .d = 40, .window_right = 3},
    {.op = "attn", .may_refuse = "unfused", .sq = 130, .d = 64, .softcap = 5.0f, .causal = 1},
    {.op = "attn", .may_refuse = "unfused", .sq = 130, .d = 64, .softcap = 2.0f, .q_scale = 10.0f},
    {.op = "attn", .may_refuse = "unfused", .sq = 90, .heads = 8, .kv_heads = 2, .d = 64, .alibi = 1, .causal = 1},
    {.op = "attn", .may_refuse = "unfused", .batch = 3, .sq = 33, .sk = 77, .heads = 4, .d = 48, .alibi = 2, .bhsd = 1},
    {.op = "attn", .may_refuse = "unfused", .sq = 100, .d = 192, .dv = 128, .causal = 1},                   /* MLA-like */
    {.op = "attn", .may_refuse = "unfused", .sq = 40, .sk = 25, .heads = 2, .kv_heads = 1, .d = 8, .causal = 1,
     .window = 3},                                                          /* empty rows */
    {.op = "attn", .may_refuse = "unfused", .batch = 2, .sq = 3, .sk = 200, .heads = 4, .kv_heads = 2, .d = 16,
     .window = 60, .alibi = 1, .causal = 1},                                /* decode, window */
    {.op = "attn", .may_refuse = "unfused", .sq = 1, .sk = 1000, .heads = 8, .kv_heads = 2, .d = 64, .num_splits = 4},
    {.op = "attn", .may_refuse = "unfused", .sq = 5, .sk = 513, .heads = 4, .kv_heads = 4, .d = 32, .num_splits = 3,
     .causal = 1, .softcap = 3.0f},
    {.op = "attn", .may_refuse = "unfused", .sq = 70, .sk = 90, .heads = 4, .kv_heads = 2, .d = 32, .dv = 16, .window = 7,
     .causal = 1, .dtype = FLASHC_BF16},
    {.op = "attn", .may_refuse = "unfused", .batch = 2, .sq = 48, .heads = 2, .d = 64, .softcap = 4.0f, .alibi = 2,
     .dtype = FLASHC_F16},
    /* varlen: packed ragged batches, zero-length sequences, Sq != Sk per sequence (causal
     * aligned bottom-right of each), every modifier */
    {.op = "attn_varlen", .batch = 5, .sq = 300, .heads = 4, .kv_heads = 2, .d = 32,
     .causal = 1},
    {.op = "attn_varlen", .batch = 6, .seqlens = (const int32_t[]){0, 17, 1, 0, 64, 5},
     .heads = 2, .d = 40, .causal = 1},
    {.op = "attn_varlen", .batch = 4, .seqlens = (const int32_t[]){3, 0, 40, 33},
     .seqlens_k = (const int32_t[]){50, 7, 40, 0}, .heads = 4, .kv_heads = 1, .d = 16,
     .dv = 24, .causal = 1, .window = 9, .softcap = 3.0f, .alibi = 2},
    {.op = "attn_varlen", .batch = 3, .seqlens = (const int32_t[]){70, 1, 129},
     .heads = 2, .d = 64, .window = 16, .window_right = 4},
    {.op = "attn_varlen", .batch = 1, .seqlens = (const int32_t[]){0}, .heads = 2, .d = 16},
    {.op = "attn_varlen", .batch = 4, .sq = 200, .heads = 2, .d = 64, .causal = 1,
     .dtype = FLASHC_BF16},
    /* paged varlen (block_table: K / V in shuffled pages, the rows between NaN) */
    {.op = "attn_varlen", .batch = 4, .seqlens = (const int32_t[]){3, 0, 40, 33},
     .seqlens_k = (const int32_t[]){50, 7, 40, 0}, .heads = 4, .kv_heads = 1, .d = 16,
     .dv = 24, .causal = 1, .window = 9, .softcap = 3.0f, .alibi = 2, .page_size = 16},
    {.op = "attn_varlen", .batch = 3, .seqlens = (const int32_t[]){70, 1, 129}, .heads = 2,
     .d = 64, .causal = 1, .page_size = 1, .dtype = FLASHC_BF16},
    {.op = "attn_varlen", .batch = 5, .sq = 300, .heads = 4, .kv_heads = 2, .d = 32,
     .page_size = 7, .dtype = FLASHC_F16},
    /* KV cache: contiguous and paged (shuffled pages, page sizes 1..64), per-sequence lengths,
     * appended k_new / v_new, GQA decode, chunked prefill, modifiers, split-KV */
    {.op = "attn_kvcache", .batch = 2, .sq = 1, .sk = 300, .heads = 8, .kv_heads = 2, .d = 64},
    {.op = "attn_kvcache", .batch = 2, .sq = 1, .sk = 300, .heads = 8, .kv_heads = 2, .d = 64,
     .page_size = 16},
    {.op = "attn_kvcache", .batch = 3, .sq = 4, .sk = 100, .heads = 4, .kv_heads = 1, .d = 32,
     .dv = 16, .page_size = 1, .causal = 1, .cache_lens = (const int32_t[]){0, 37, 100}},
    {.op = "attn_kvcache", .batch = 3, .sq = 2, .sk = 129, .heads = 4, .kv_heads = 2, .d = 40,
     .page_size = 7, .s_new = 2, .causal = 1, .cache_lens = (const int32_t[]){0, 50, 127}},
    {.op = "attn_kvcache", .batch = 2, .sq = 3, .sk = 96, .heads = 2, .d = 64, .s_new = 3,
     .causal = 1, .window = 20, .softcap = 5.0f, .alibi = 2},
    {.op = "attn_kvcache", .batch = 2, .sq = 33, .sk = 200, .heads = 4, .kv_heads = 2, .d = 32,
     .page_size = 64, .causal = 1, .cache_lens = (const int32_t[]){150, 33}},  /* prefill */
    {.op = "attn_kvcache", .batch = 1, .sq = 1, .sk = 2000, .heads = 8, .kv_heads = 1, .d = 128,
     .page_size = 16, .num_splits = 5},
    {.op = "attn_kvcache", .batch = 2, .sq = 1, .sk = 257, .heads = 8, .kv_heads = 2, .d = 64,
     .page_size = 16, .s_new = 1, .causal = 1, .dtype = FLASHC_F16},
    {.op = "attn_kvcache", .batch = 2, .sq = 1, .sk = 300, .heads = 4, .kv_heads = 4, .d = 96,
     .dtype = FLASHC_BF16},
    /* backward with the modifiers, Dk != Dv */
    {.op = "attn_bwd", .sq = 120, .sk = 150, .heads = 2, .kv_heads = 1, .d = 32, .window = 20,
     .causal = 1},
    {.op = "attn_bwd", .batch = 2, .sq = 64, .heads = 2, .d = 16, .window = 5, .window_right = 9,
     .softcap = 4.0f, .alibi = 2},
    {.op = "attn_bwd", .sq = 90, .heads = 4, .kv_heads = 2, .d = 64, .softcap = 3.0f,
     .alibi = 1, .causal = 1},
    {.op = "attn_bwd", .sq = 77, .sk = 100, .heads = 2, .d = 48, .dv = 32, .causal = 1},
    {.op = "attn_bwd", .sq = 40, .sk = 25, .heads = 2, .kv_heads = 1, .d = 8, .causal = 1,
     .window = 3},
    {.op = "attn_fwdbwd", .batch = 2, .sq = 50, .sk = 70, .heads = 4, .kv_heads = 2, .d = 32,
     .dv = 40, .window = 12, .softcap = 6.0f, .alibi = 2, .causal = 1},
    /* properties (case_prop): the default kernel against itself. K/V outside a row's key range
     * poisoned leave the row bit-identical; split-KV equals one pass within rounding; paged
     * equals contiguous and packed varlen equals each sequence alone, bit for bit */
    {.op = "attn", .sq = 120, .sk = 150, .heads = 2, .kv_heads = 1, .d = 32, .dv = 24,
     .window = 20, .causal = 1, .prop = CASE_PROP_POISON_BIG},
    {.op = "attn", .sq = 120, .sk = 150, .heads = 2, .kv_heads = 1, .d = 32, .dv = 24,
     .window = 20, .causal = 1, .prop = CASE_PROP_POISON_NAN},
    {.op = "attn", .batch = 2, .sq = 64, .heads = 2, .d = 16, .window = 5, .window_right = 9,
     .softcap = 4.0f, .alibi = 2, .prop = CASE_PROP_POISON_NAN},
    {.op = "attn", .sq = 40, .sk = 25, .heads = 2, .kv_heads = 1, .d = 8, .causal = 1,
     .prop = CASE_PROP_POISON_NAN},                                          /* empty rows */
    {.op = "attn", .batch = 2, .sq = 3, .sk = 200, .heads = 4, .kv_heads = 2, .d = 16,
     .window = 60, .alibi = 1, .causal = 1, .prop = CASE_PROP_POISON_BIG},
    {.op = "attn", .sq = 300, .d = 64, .causal = 1, .prop = CASE_PROP_POISON_NAN,
     .dtype = FLASHC_BF16},
    {.op = "attn", .sq = 70, .sk = 90, .heads = 2, .d = 32, .bhsd = 1, .window = 10,
     .window_right = 2, .prop = CASE_PROP_POISON_NAN, .dtype = FLASHC_F16},
    {.op = "attn", .sq = 1, .sk = 1000, .heads = 8, .kv_heads = 2, .d = 64, .num_splits = 4,
     .prop = CASE_PROP_SPLITS},
    {.op = "attn", .sq = 7, .sk = 777, .heads = 2, .d = 40, .num_splits = 5, .causal = 1,
     .softcap = 4.0f, .alibi = 1, .prop = CASE_PROP_SPLITS},
    {.op = "attn_kvcache", .batch = 3, .sq = 1, .sk = 900, .heads = 8, .kv_heads = 2, .d = 64,
     .page_size = 16, .num_splits = 6, .prop = CASE_PROP_SPLITS,
     .cache_lens = (const int32_t[]){900, 1, 333}},
    {.op = "attn_kvcache", .batch = 3, .sq = 2, .sk = 300, .heads = 8, .kv_heads = 2, .d = 64,
     .page_size = 16, .causal = 1, .prop = CASE_PROP_PAGED,
     .cache_lens = (const int32_t[]){300, 0, 123}},
    {.op = "attn_kvcache", .batch = 2, .sq = 1, .sk = 100, .heads = 4, .kv_heads = 1, .d = 32,
     .page_size = 1, .window = 30, .softcap = 3.0f, .alibi = 2, .prop = CASE_PROP_PAGED,
     .dtype = FLASHC_BF16},
    {.op = "attn_kvcache", .batch = 2, .sq = 5, .sk = 130, .heads = 2, .d = 48, .dv = 32,
     .page_size = 7, .causal = 1, .prop = CASE_PROP_PAGED, .dtype = FLASHC_F16},
    {.op = "attn_varlen", .batch = 6, .seqlens = (const int32_t[]){0, 17, 1, 0, 64, 5},
     .heads = 2, .d = 40, .causal = 1, .prop = CASE_PROP_ALONE},
    {.op = "attn_varlen", .batch = 4, .seqlens = (const int32_t[]){3, 0, 40, 33},
     .seqlens_k = (const int32_t[]){50, 7, 40, 0}, .heads = 4, .kv_heads = 1, .d = 16,
     .dv = 24, .causal = 1, .window = 9, .softcap = 3.0f, .alibi = 2, .prop = CASE_PROP_ALONE},
    {.op = "attn_varlen", .batch = 5, .sq = 400, .heads = 4, .kv_heads = 2, .d = 64,
     .causal = 1, .prop = CASE_PROP_ALONE, .dtype = FLASHC_BF16},
    /* online softmax: chunks + merge */
    {.op = "softmax", .rows = 64, .width = 1},
    {.op = "softmax", .rows = 64, .width = 3},
    {.op = "softmax", .rows = 64, .width = 1000},
    {.op = "softmax", .rows = 16, .width = 4099},
    /* RMSNorm */
    {.op = "rmsnorm", .rows = 4096, .width = 512},
    {.op = "rmsnorm", .rows = 7, .width = 1},
    {.op = "rmsnorm", .rows = 33, .width = 1031},
    {.op = "rmsnorm_res", .rows = 64, .width = 1024},
    {.op = "rmsnorm_res", .rows = 5, .width = 3},
    /* SwiGLU */
    {.op = "swiglu", .rows = 64, .width = 3072},
    {.op = "swiglu", .rows = 3, .width = 5},
    {.op = "swiglu", .rows = 1, .width = 1},
    /* bf16 / f16 storage (float32 accumulation) vs the reference in float32 on the same
     * rounded inputs: tolerance = the dtype's rounding (cases.c, case_default_tol) */
    {.op = "attn", .sq = 130, .d = 64, .causal = 1, .dtype = FLASHC_BF16},
    {.op = "attn", .sq = 77, .sk = 129, .d = 40, .br = 16, .bc = 32, .dtype = FLASHC_F16},
    {.op = "attn", .sq = 1, .sk = 300, .d = 64, .causal = 1, .dtype = FLASHC_F16},
    {.op = "attn", .batch = 2, .sq = 70, .sk = 90, .heads = 4, .kv_heads = 2, .d = 32,
     .causal = 1, .bhsd = 1, .dtype = FLASHC_BF16},
    {.op = "rmsnorm", .rows = 33, .width = 1031, .dtype = FLASHC_BF16},
    {.op = "rmsnorm", .rows = 7, .width = 1, .dtype = FLASHC_F16},
    {.op = "rmsnorm_res", .rows = 64, .width = 1024, .dtype = FLASHC_BF16},
    {.op = "rmsnorm_res", .rows = 5, .width = 3, .dtype = FLASHC_F16},
    {.op = "swiglu", .rows = 64, .width = 3072, .dtype = FLASHC_BF16},
    {.op = "swiglu", .rows = 3, .width = 5, .dtype = FLASHC_F16},
};

const case_spec *cases_table(int *count)
{
    *count = (int)(sizeof table / sizeof table[0]);
    return table;
}

int case_check(const case_spec *row, uint64_t seed, case_report_fn report, void *ctx)
{
    case_spec s = *row;
    case_spec_defaults(&s);
    const op_desc *op = cases_find_op(s.op);
    case_outcome r = {0};
    case_describe(&s, r.shape, sizeof r.shape);
    r.op = s.op;
    r.tol = s.tol > 0 ? s.tol : case_default_tol(&s);
    if (!op) {
        r.impl = "-";
        snprintf(r.why, sizeof r.why, "unknown op");
        report(ctx, &r);
        return 1;
    }
    char err[128];
    case_data *c = case_create(&s, seed, err, sizeof err);
    if (!c) {
        r.impl = "-";
        snprintf(r.why, sizeof r.why, "%s", err);
        report(ctx, &r);
        return 1;
    }
    const uint64_t hash0 = case_inputs_hash(c);
    char ref_fail[300] = "";
    const flashc_status st = case_run_reference(c);
    if (st != FLASHC_OK)
        snprintf(ref_fail, sizeof ref_fail, "reference failed: %s (%s)",
                 flashc_status_string(st), flashc_last_error());
    int failed = 0;
    /* property rows: the default kernel (the last impl) against itself */
    for (int k = s.prop ? op->n_impls - 1 : 1; k < op->n_impls; k++) {
        r.impl = op->impls[k];
        r.err = 0.0;
        snprintf(r.why, sizeof r.why, "%s", ref_fail);
        if (st == FLASHC_OK && !case_impl_available(c, k)) {
            r.skipped = 1;
            report(ctx, &r);
            r.skipped = 0;
            continue;
        }
        if (st == FLASHC_OK) {
            case_prepare(c, 1);
            const flashc_status sk = case_run(c, k, 1, NULL);
            if (sk == FLASHC_ERR_UNSUPPORTED && s.may_refuse && strcmp(s.may_refuse, r.impl) == 0) {
                snprintf(r.why, sizeof r.why, "%s", flashc_last_error());
                r.skipped = 1;
                report(ctx, &r);
                r.skipped = 0;
                continue;
            }
            if (sk != FLASHC_OK)
                snprintf(r.why, sizeof r.why, "%s (%s)", flashc_status_string(sk),
                         flashc_last_error());
            else if (case_inputs_hash(c) != hash0)
                snprintf(r.why, sizeof r.why, "modified an input");
            else if (!((r.err = case_max_err(c)) <= r.tol)) /* NaN fails too */
                snprintf(r.why, sizeof r.why, "error above tolerance");
        }
        failed += r.why[0] != 0;
        report(ctx, &r);
    }
    case_destroy(c);
    return failed;
}
