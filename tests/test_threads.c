/*
 * test_threads.c — every entry point from 8 application threads at once. Each thread runs
 * every entry point several times on shared inputs into its own outputs and compares them
 * bit for bit with the results the main thread computed alone first; it also fails a call
 * with a message of its own and checks that the message survives other threads' failures and
 * its own successful calls (flashc_last_error is per thread), calls flashc_build_info (one
 * constant string) and changes the global thread setting while the others read it.
 *
 * Built in every configuration; the ThreadSanitizer build (scripts/test.sh, clang
 * -fsanitize=thread) runs it to prove the absence of data races. The library's own OpenMP
 * threads are held at 1 per call here (params.num_threads = 1, flashc_set_num_threads(1)):
 * libgomp is not TSan-instrumented and its barriers look like races to TSan, and clang's
 * libomp without the Archer tool has the same problem; what this test is about is the
 * library's state shared between application threads, which OpenMP's own threads do not add
 * to (each call's workspace is private to it). The OpenMP paths are covered by every other
 * test and by the ASan build.
 */
#define _POSIX_C_SOURCE 200809L /* pthread barriers under -std=c11 */
#include "common.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NTHREADS = 8, REPS = 3 };
enum { B = 2, SQ = 13, SK = 17, HQ = 4, HKV = 2, D = 16 };
enum { NQ = B * SQ * HQ * D, NK = B * SK * HKV * D, NL = B * HQ * SQ };
enum { T = 7, W = 40 };

static float q[NQ], k[NK], v[NK], dout[NQ], x[T * W], r[T * W], w[W], gu[T * 2 * W], xs[300];

/* every result of one thread (or of the main thread's reference run) */
typedef struct results {
    float o[NQ], lse[NL], on[NQ], lsen[NL];
    float dq[NQ], dk[NK], dv[NK], dqn[NQ], dkn[NK], dvn[NK];
    float mo[NQ], ml[NL];
    float y[T * W], yn[T * W], xr[T * W], yr[T * W], xrn[T * W], yrn[T * W];
    float sw[T * W], swn[T * W];
    flashc_softmax_state sm, smm;
    flashc_status sup;
} results;

static results ref;
static char build_info[256];

/* Not TU_OK: cmocka's asserts are not for other threads. Returns the number of failed calls. */
#define OKC(call) (fails += okc((call), #call))

static int okc(flashc_status st, const char *what)
{
    if (st != FLASHC_OK)
        fprintf(stderr, "%s -> %s: %s\n", what, flashc_status_string(st), flashc_last_error());
    return st != FLASHC_OK;
}

static int run_all(results *R)
{
    int fails = 0;
    flashc_attn_params p = flashc_attn_params_default();
    p.causal = 1, p.num_threads = 1;
    flashc_tensor tq = flashc_tensor_4d(q, FLASHC_F32, B, SQ, HQ, D);
    flashc_tensor tk = flashc_tensor_4d(k, FLASHC_F32, B, SK, HKV, D);
    flashc_tensor tv = flashc_tensor_4d(v, FLASHC_F32, B, SK, HKV, D);
    flashc_tensor tdo = flashc_tensor_4d(dout, FLASHC_F32, B, SQ, HQ, D);
    flashc_tensor to = flashc_tensor_4d(R->o, FLASHC_F32, B, SQ, HQ, D);
    flashc_tensor tl = flashc_tensor_3d(R->lse, FLASHC_F32, B, HQ, SQ);
    flashc_tensor ton = flashc_tensor_4d(R->on, FLASHC_F32, B, SQ, HQ, D);
    flashc_tensor tln = flashc_tensor_3d(R->lsen, FLASHC_F32, B, HQ, SQ);
    R->sup = flashc_attn_fwd_supported(&p, &tq, &tk, &tv, &to, &tl);
    OKC(flashc_attn_fwd(&p, &tq, &tk, &tv, &to, &tl, NULL));
    OKC(flashc_attn_fwd_naive(&p, &tq, &tk, &tv, &ton, &tln, NULL));
    flashc_tensor tdq = flashc_tensor_4d(R->dq, FLASHC_F32, B, SQ, HQ, D);
    flashc_tensor tdk = flashc_tensor_4d(R->dk, FLASHC_F32, B, SK, HKV, D);
    flashc_tensor tdv = flashc_tensor_4d(R->dv, FLASHC_F32, B, SK, HKV, D);
    OKC(flashc_attn_bwd(&p, &tq, &tk, &tv, &to, &tdo, &tl, &tdq, &tdk, &tdv, NULL));
    tdq.data = R->dqn, tdk.data = R->dkn, tdv.data = R->dvn;
    OKC(flashc_attn_bwd_naive(&p, &tq, &tk, &tv, &to, &tdo, &tl, &tdq, &tdk, &tdv, NULL));
    /* merge the flash and the naive states: the same keys twice */
    flashc_tensor tmo = flashc_tensor_4d(R->mo, FLASHC_F32, B, SQ, HQ, D);
    flashc_tensor tml = flashc_tensor_3d(R->ml, FLASHC_F32, B, HQ, SQ);
    OKC(flashc_attn_merge(&to, &tl, &ton, &tln, &tmo, &tml));
    /* online softmax and the state merge */
    R->sm = flashc_softmax_state_init();
    OKC(flashc_online_softmax(&R->sm, xs, 300));
    flashc_softmax_state a = flashc_softmax_state_init(), b = flashc_softmax_state_init();
    OKC(flashc_online_softmax(&a, xs, 120));
    OKC(flashc_online_softmax(&b, xs + 120, 180));
    R->smm = flashc_softmax_state_merge(a, b);
    /* row ops */
    flashc_tensor tx = flashc_tensor_2d(x, FLASHC_F32, T, W), tw = flashc_tensor_1d(w, FLASHC_F32, W);
    flashc_tensor tr = flashc_tensor_2d(r, FLASHC_F32, T, W);
    flashc_tensor ty = flashc_tensor_2d(R->y, FLASHC_F32, T, W);
    OKC(flashc_rmsnorm(&tx, &tw, 1e-6f, &ty));
    ty.data = R->yn;
    OKC(flashc_rmsnorm_naive(&tx, &tw, 1e-6f, &ty));
    memcpy(R->xr, x, sizeof x), memcpy(R->xrn, x, sizeof x);
    flashc_tensor txr = flashc_tensor_2d(R->xr, FLASHC_F32, T, W);
    ty.data = R->yr;
    OKC(flashc_rmsnorm_residual(&txr, &tr, &tw, 1e-6f, &ty));
    txr.data = R->xrn, ty.data = R->yrn;
    OKC(flashc_rmsnorm_residual_naive(&txr, &tr, &tw, 1e-6f, &ty));
    flashc_tensor tg = flashc_tensor_2d(gu, FLASHC_F32, T, 2 * W);
    flashc_tensor ts = flashc_tensor_2d(R->sw, FLASHC_F32, T, W);
    OKC(flashc_swiglu(&tg, &ts));
    ts.data = R->swn;
    OKC(flashc_swiglu_naive(&tg, &ts));
    return fails;
}

typedef struct job {
    int id;
    int errors;
    char detail[800];
} job;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            jb->errors++;                                                                          \
            snprintf(jb->detail, sizeof jb->detail, __VA_ARGS__);                                  \
        }                                                                                          \
    } while (0)

static pthread_barrier_t start;

static void *worker(void *arg)
{
    job *jb = arg;
    results *R = malloc(sizeof *R);
    pthread_barrier_wait(&start); /* all threads start together */
    /* a failure with a message of this thread's own */
    float y[T * W];
    flashc_tensor tx = flashc_tensor_2d(x, FLASHC_F32, T, W), tw = flashc_tensor_1d(w, FLASHC_F32, W);
    flashc_tensor ty = flashc_tensor_2d(y, FLASHC_F32, T, W);
    const float eps = -(float)(jb->id + 1);
    CHECK(flashc_rmsnorm(&tx, &tw, eps, &ty) == FLASHC_ERR_INVALID_ARGUMENT, "bad eps accepted");
    char mine[512];
    snprintf(mine, sizeof mine, "%s", flashc_last_error());
    char want[64];
    snprintf(want, sizeof want, "eps = %g ", (double)eps);
    CHECK(strstr(mine, want) != NULL, "thread %d: message '%s' lacks '%s'", jb->id, mine, want);
    for (int rep = 0; rep < REPS; rep++) {
        memset(R, 0, sizeof *R);
        CHECK(run_all(R) == 0, "thread %d: a call failed", jb->id);
        /* bitwise equal to the single-threaded run (padding-free struct of floats) */
        CHECK(memcmp(R, &ref, sizeof *R) == 0, "thread %d rep %d: results differ from the "
              "single-threaded run", jb->id, rep);
        CHECK(strcmp(flashc_last_error(), mine) == 0,
              "thread %d: its message changed to '%s'", jb->id, flashc_last_error());
        CHECK(strcmp(flashc_build_info(), build_info) == 0, "build info changed");
        if (jb->id == 0) /* the global setting changes under the other threads' reads */
            flashc_set_num_threads(1);
        CHECK(flashc_get_num_threads() == 1, "thread setting");
        const flashc_mem_stats m = flashc_mem_get();
        CHECK(m.current_bytes >= 0 && m.peak_bytes >= 0, "mem stats");
    }
    free(R);
    return NULL;
}

static void test_every_entry_point_from_8_threads(void **state)
{
    (void)state;
    flashc_set_num_threads(1);
    tu_fill_normal(q, NQ, 1), tu_fill_normal(k, NK, 1), tu_fill_normal(v, NK, 1);
    tu_fill_normal(dout, NQ, 1), tu_fill_normal(x, T * W, 1), tu_fill_normal(r, T * W, 1);
    tu_fill_normal(w, W, 1), tu_fill_normal(gu, T * 2 * W, 1), tu_fill_normal(xs, 300, 3);
    memset(&ref, 0, sizeof ref);
    assert_int_equal(run_all(&ref), 0);
    snprintf(build_info, sizeof build_info, "%s", flashc_build_info());
    pthread_t th[NTHREADS];
    job jobs[NTHREADS];
    pthread_barrier_init(&start, NULL, NTHREADS);
    for (int i = 0; i < NTHREADS; i++) {
        jobs[i].id = i, jobs[i].errors = 0, jobs[i].detail[0] = '\0';
        assert_int_equal(pthread_create(&th[i], NULL, worker, &jobs[i]), 0);
    }
    int errors = 0;
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(th[i], NULL);
        if (jobs[i].errors)
            print_error("thread %d: %d errors, last: %s\n", i, jobs[i].errors, jobs[i].detail);
        errors += jobs[i].errors;
    }
    pthread_barrier_destroy(&start);
    assert_int_equal(errors, 0);
    flashc_set_num_threads(0);
}

int main(void)
{
    tu_seed_from_env();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_entry_point_from_8_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
