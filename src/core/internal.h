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

/* A validated attention problem. Strides are in elements, indexed like the public layouts:
 * [0] batch, [1] sequence, [2] head, [3] feature for 4-d tensors; lse: [0] batch, [1] head,
 * [2] sequence. Pointers of optional tensors are NULL when absent. */
typedef struct attn_problem {
    int64_t B, Sq, Sk, Hq, Hkv, D;
    flashc_dtype dtype;
    flashc_device device;
    float scale;
    int causal;
    int64_t br, bc; /* requested tiles; 0 = backend default */
    int threads;
    void *stream;

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

/* Last key index (exclusive) query row i may see: min(Sk, i + 1 + Sk - Sq) under the causal
 * mask (bottom-right aligned), Sk otherwise. May be <= 0: the row sees nothing. */
static inline int64_t attn_key_end(const attn_problem *p, int64_t i)
{
    if (!p->causal)
        return p->Sk;
    int64_t e = i + 1 + p->Sk - p->Sq;
    return e < p->Sk ? e : p->Sk;
}

/* Number of (Q-block, K-block) tile pairs a tiled pass over one (batch, head) computes with
 * tiles br x bc, skipping blocks entirely above the causal diagonal. */
int64_t attn_tile_pairs_per_head(const attn_problem *p, int64_t br, int64_t bc);

/* Backends. Each *_supports() returns FLASHC_OK or a status with flashc__fail's message. */
flashc_status ref_attn_fwd(const attn_problem *p, flashc_attn_stats *stats);
flashc_status ref_attn_bwd(const attn_problem *p, flashc_attn_stats *stats);

flashc_status cpu_attn_fwd_supports(const attn_problem *p);
flashc_status cpu_attn_fwd(const attn_problem *p, flashc_attn_stats *stats);
flashc_status cpu_attn_bwd_supports(const attn_problem *p);
flashc_status cpu_attn_bwd(const attn_problem *p, flashc_attn_stats *stats);

#ifdef FLASHC_HAVE_CUDA
flashc_status cuda_attn_fwd_supports(const attn_problem *p);
flashc_status cuda_attn_fwd(const attn_problem *p, flashc_attn_stats *stats);
int cuda_device_available(void);
const char *cuda_build_info(void);
#endif

/* ---- row-wise ops (RMSNorm, SwiGLU) ------------------------------------------------------- */

/* T rows; x/y/r/gu row strides in elements (element stride within a row is 1 or given). */
typedef struct rows_problem {
    int64_t T, D;       /* rows, width (D for RMSNorm; I for SwiGLU)         */
    flashc_dtype dtype;
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
