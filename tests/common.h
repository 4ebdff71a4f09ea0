/*
 * common.h — shared test utilities: fresh random inputs, a float64 attention oracle,
 * error metrics, poisoned outputs. Every test binary prints its seed; set FLASHC_TEST_SEED
 * to replay a failure.
 */
#ifndef FLASHC_TEST_COMMON_H
#define FLASHC_TEST_COMMON_H

#include <setjmp.h> /* cmocka needs these before cmocka.h */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "flashc.h"

/* ---- which tests run -------------------------------------------------------------------- */
/* FLASHC_TEST_FILTER and FLASHC_TEST_SKIP as comma-separated glob lists (fnmatch; cmocka's own
 * filters take one pattern each; final_check.sh splits the CUDA backward suite into three jobs
 * with them): the tests of t[0 .. n) that match a FILTER pattern (all when it is unset or empty)
 * and no SKIP pattern, moved to the front in their order; returns how many. */
size_t tu_select_tests(struct CMUnitTest *t, size_t n);
/* cmocka_run_group_tests over the selected tests of the array `tests` (not const) */
#define tu_run_selected_tests(tests)                                                               \
    _cmocka_run_group_tests(#tests, tests, tu_select_tests(tests, sizeof tests / sizeof tests[0]), \
                            NULL, NULL)

/* ---- random numbers (splitmix64 seeding xoshiro-style state; seed printed once) ---------- */
void tu_seed_from_env(void);
uint64_t tu_seed(void);
double tu_uniform(void);         /* [0, 1)  */
double tu_normal(void);          /* N(0, 1) */
void tu_fill_normal(float *x, int64_t n, float scale);
float *tu_alloc_normal(int64_t n, float scale); /* malloc'ed, filled */

/* ---- buffers ----------------------------------------------------------------------------- */
float *tu_poisoned(int64_t n); /* malloc'ed, filled with a NaN pattern: untouched outputs
                                  keep it, written outputs lose it                         */
float *tu_copy(const float *x, int64_t n);
int tu_has_nan(const float *x, int64_t n);
double tu_max_abs_diff(const float *a, const float *b, int64_t n);
double tu_max_abs_diff64(const float *a, const double *b, int64_t n);
double tu_max_row_norm(const float *x, int64_t rows, int64_t D); /* max Euclidean row norm */
double tu_max_abs(const float *x, int64_t n);
/* The float32 slack of FlashAttention's 2x rule: in float32 the flash and the naive errors are
 * both mostly the logits' rounding, and one case's maximum of one can land 4x the other's. One
 * float32 rounding (2^-24, relative) of the largest logit a case can hold, |scale| max|q| max|k|
 * (Cauchy-Schwarz) plus the largest additive bias, carried to O by max|v|; never below 4 ulps
 * of 1 (2^-21). */
double tu_f32_logit_floor(double scale, double qnorm, double knorm, double bias, double vmax);

/* ---- float64 attention oracle on (B, S, H, D) contiguous buffers --------------------------
 * o64 (B, Sq, Hq, D), lse64 (B, Hq, Sq); causal bottom-right aligned; rows with no visible
 * key give o = 0, lse = -inf. Independent of the library (a second, simpler implementation). */
void tu_attn_ref64(const float *q, const float *k, const float *v, int64_t B, int64_t Sq,
                   int64_t Sk, int64_t Hq, int64_t Hkv, int64_t D, double scale, int causal,
                   double *o64, double *lse64);

/* ---- the plain same-precision ring attention (context parallelism's low-precision yardstick) --
 * Forward and backward of a ring over N ranks as a framework computes it in the storage dtype
 * dt, block by block (query rank x key rank): see common.c. owner[t] is the rank holding token
 * t; q, k, v, dout are contiguous (B, S, H, D) float copies of values already rounded to dt.
 * Returns malloc'ed (B, S, H, D) results (free each). */
typedef struct tu_ring_shape {
    int N, causal;
    flashc_dtype dt;
    int64_t B, S, Hq, Hkv, D, Dv;
    float scale;
} tu_ring_shape;
typedef struct tu_ring_out {
    float *o, *dq, *dk, *dv;
} tu_ring_out;
tu_ring_out tu_naive_ring(const tu_ring_shape *s, const int *owner, const float *q,
                          const float *k, const float *v, const float *dout);

/* Asserts a library call returned FLASHC_OK, printing the detail message otherwise. */
#define TU_OK(call)                                                                                \
    do {                                                                                           \
        flashc_status st_ = (call);                                                                \
        if (st_ != FLASHC_OK)                                                                      \
            print_error("%s -> %s: %s\n", #call, flashc_status_string(st_), flashc_last_error());  \
        assert_int_equal(st_, FLASHC_OK);                                                          \
    } while (0)

#endif /* FLASHC_TEST_COMMON_H */
