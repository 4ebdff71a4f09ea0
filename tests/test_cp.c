/*
 * test_cp.c — context parallelism (issue 17) on the simulated communicator: N ranks as threads
 * of this process, host tensors, the CPU kernels, and the same ring code the NCCL ranks run.
 *
 *   schedule   for every N, seqlen (odd ones included), shard and mask: each (query token, key
 *              token) pair the causal mask allows is computed by exactly one call of one ring
 *              step, no masked pair by any; calls never empty and inside the slices; zigzag and
 *              striped give every rank the same causal work (within a row per chunk), and every
 *              step is one call
 *   shards     flashc_cp_local_len / flashc_cp_global_index cover [0, S) exactly once
 *   ring       N = 1, 2, 3, 4, 8; causal and not; contiguous, zigzag and striped; GQA; D != Dv;
 *              seqlens that do not divide evenly: forward (O, LSE) and backward (dQ, dK, dV)
 *              gathered from the ranks, against single-call flashc_attn_fwd / _bwd over the
 *              whole sequence, ref64 the float64 references (naive paths) on the same rounded
 *              inputs. float32: max |cp - ref64| <= 2 max |single - ref64| + 4N ulps of
 *              max |ref64| (both errors a few ulps; the ring adds N partials). bfloat16 / float16: <= 2 x the error of the plain same-precision ring
 *              (tu_naive_ring in common.c: why a ring, not the single sequence, is the yardstick).
 *              Outputs are poisoned with NaN first.
 *   errors     a bad rank fails with a message and its peers return an error instead of waiting
 *              forever; bad params; ranks that disagree on the dtype; the NCCL entry points
 *              without NCCL
 */
#define _POSIX_C_SOURCE 200809L
#include "common.h"
#include <time.h>
#include "cp.h"
#include "internal.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const flashc_cp_shard shards[3] = {FLASHC_CP_SHARD_CONTIGUOUS, FLASHC_CP_SHARD_ZIGZAG,
                                          FLASHC_CP_SHARD_STRIPED};
static const char *const shard_names[3] = {"contiguous", "zigzag", "striped"};

/* ---- the schedule -------------------------------------------------------------------------- */

static int64_t gidx(const cp_layout *l, int rank, int64_t row)
{
    return flashc_cp_global_index(l->shard, l->seqlen, l->nranks, rank, row);
}

/* Returns the visible pairs each rank computes (work[rank]); asserts the invariants. */
static void check_schedule(const cp_layout *l, int causal, int64_t *work)
{
    const int64_t S = l->seqlen;
    const int N = l->nranks;
    unsigned char *seen = calloc((size_t)(S * S), 1);
    assert_non_null(seen);
    for (int r = 0; r < N; r++) {
        work[r] = 0;
        const int64_t Lr = cp_local_len(l, r);
        for (int t = 0; t < N; t++) {
            const int s = cp_source(l, r, t);
            const int64_t Ls = cp_local_len(l, s);
            cp_item it[CP_MAX_ITEMS];
            const int n = cp_schedule(l, causal, r, t, it);
            assert_true(n >= 0 && n <= CP_MAX_ITEMS);
            assert_true(n <= 1); /* one call per step (zigzag's chunk pairs coalesced) */
            for (int c = 0; c < n; c++) {
                assert_true(it[c].nq > 0 && it[c].nk > 0);
                assert_true(it[c].q0 >= 0 && it[c].q0 + it[c].nq <= Lr);
                assert_true(it[c].k0 >= 0 && it[c].k0 + it[c].nk <= Ls);
                for (int64_t i = 0; i < it[c].nq; i++)
                    for (int64_t j = 0; j < it[c].nk; j++) {
                        if (it[c].causal && j > i + it[c].nk - it[c].nq)
                            continue; /* flashc's bottom-right causal mask */
                        const int64_t gq = gidx(l, r, it[c].q0 + i), gk = gidx(l, s, it[c].k0 + j);
                        assert_true(gq >= 0 && gq < S && gk >= 0 && gk < S);
                        if (causal && gk > gq) {
                            print_error("masked pair (%lld, %lld) computed: rank %d step %d\n",
                                        (long long)gq, (long long)gk, r, t);
                            fail();
                        }
                        assert_true(seen[gq * S + gk] < 255);
                        seen[gq * S + gk]++;
                        work[r]++;
                    }
            }
        }
    }
    for (int64_t a = 0; a < S; a++)
        for (int64_t b = 0; b < S; b++) {
            const int want = causal ? b <= a : 1;
            if (seen[a * S + b] != want) {
                print_error("N=%d S=%lld %s causal=%d: pair (%lld, %lld) computed %d times\n", N,
                            (long long)S, shard_names[l->shard], causal, (long long)a,
                            (long long)b, seen[a * S + b]);
                fail();
            }
        }
    free(seen);
}

static void test_schedule_invariants(void **state)
{
    const int ns[] = {1, 2, 3, 4, 5, 8, 16};
    for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
        for (int sh = 0; sh < 3; sh++)
            for (int64_t S = ns[a] * (sh == 1 ? 2 : 1); S <= 4 * ns[a] + 37; S += 1 + S / 9)
                for (int causal = 0; causal < 2; causal++) {
                    const cp_layout l = {shards[sh], S, ns[a]};
                    int64_t work[16];
                    check_schedule(&l, causal, work);
                }
}

/* Zigzag and striped are the point of sharding: equal causal work per rank (contiguous gives the
 * last rank about 2N - 1 times the first's). With S = 2N m every zigzag rank computes exactly the
 * same number of pairs; striped within S pairs (rank r's rows see r more keys each), of
 * about S^2 / 2N. */
static void test_schedule_balance(void **state)
{
    const int ns[] = {2, 4, 8};
    for (size_t a = 0; a < 3; a++) {
        const int N = ns[a];
        const int64_t m = 7, S = 2 * N * m;
        int64_t w[3][16];
        for (int sh = 0; sh < 3; sh++) {
            const cp_layout l = {shards[sh], S, N};
            check_schedule(&l, 1, w[sh]);
        }
        for (int r = 1; r < N; r++) {
            assert_int_equal(w[1][r], w[1][0]);
            assert_true(llabs(w[2][r] - w[2][0]) <= S); /* r rows of the first's length */
        }
        assert_true(w[0][N - 1] > 2 * w[0][0]);
    }
}

static void test_shard_maps(void **state)
{
    for (int N = 1; N <= 9; N++)
        for (int sh = 0; sh < 3; sh++)
            for (int64_t S = N * (sh == 1 ? 2 : 1); S < 60; S += 1 + S / 7) {
                unsigned char *hit = calloc((size_t)S, 1);
                int64_t total = 0;
                for (int r = 0; r < N; r++) {
                    const int64_t L = flashc_cp_local_len(shards[sh], S, N, r);
                    assert_true(L >= 1);
                    total += L;
                    for (int64_t i = 0; i < L; i++) {
                        const int64_t g = flashc_cp_global_index(shards[sh], S, N, r, i);
                        assert_true(g >= 0 && g < S);
                        hit[g]++;
                    }
                    assert_int_equal(flashc_cp_global_index(shards[sh], S, N, r, L), -1);
                }
                assert_int_equal(total, S);
                for (int64_t g = 0; g < S; g++)
                    assert_int_equal(hit[g], 1);
                free(hit);
            }
    assert_int_equal(flashc_cp_local_len(FLASHC_CP_SHARD_COUNT, 10, 2, 0), -1);
    assert_int_equal(flashc_cp_local_len(FLASHC_CP_SHARD_ZIGZAG, 10, 2, 2), -1);
    /* zigzag: rank 0 of 2 holds chunks 0 and 3 of 4 */
    assert_int_equal(flashc_cp_global_index(FLASHC_CP_SHARD_ZIGZAG, 8, 2, 0, 2), 6);
    assert_int_equal(flashc_cp_global_index(FLASHC_CP_SHARD_STRIPED, 8, 2, 1, 2), 5);
}

/* ---- the simulated ring against single-call attention ------------------------------------------ */

typedef struct ring_case {
    int N;
    int64_t S;
    int shard, causal;
    int64_t B, Hq, Hkv, D, Dv;
    flashc_dtype dt;
    int threads;
} ring_case;

/* storage of n values rounded to dt (float32 copies of the rounded values in *rounded) */
static void *to_dtype(const float *x, int64_t n, flashc_dtype dt, float *rounded)
{
    const size_t es = flashc_dtype_size(dt);
    void *buf = malloc((size_t)n * es);
    assert_non_null(buf);
    for (int64_t i = 0; i < n; i++) {
        flashc__store(buf, dt, i, x[i]);
        rounded[i] = flashc__load(buf, dt, i);
    }
    return buf;
}

static float *to_f32(const void *buf, int64_t n, flashc_dtype dt)
{
    float *y = malloc((size_t)n * sizeof *y);
    assert_non_null(y);
    for (int64_t i = 0; i < n; i++)
        y[i] = flashc__load(buf, dt, i);
    return y;
}

/* rows of a global (B, S, H, W) buffer <-> a rank's (B, L, H, W) slice */
static void shard_rows(const ring_case *c, int rank, const void *global, void *local, int64_t HW,
                       size_t es, int gather)
{
    const int64_t L = flashc_cp_local_len(shards[c->shard], c->S, c->N, rank);
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t i = 0; i < L; i++) {
            const int64_t g = flashc_cp_global_index(shards[c->shard], c->S, c->N, rank, i);
            char *gp = (char *)global + (size_t)((b * c->S + g) * HW) * es;
            char *lp = (char *)local + (size_t)((b * L + i) * HW) * es;
            if (gather)
                memcpy(gp, lp, (size_t)HW * es);
            else
                memcpy(lp, gp, (size_t)HW * es);
        }
}

typedef struct rank_job {
    flashc_cp_params p;
    flashc_tensor q, k, v, o, lse, dout, dq, dk, dv;
    flashc_status st_fwd, st_bwd;
    char err[512];
    int do_bwd;
} rank_job;

static void *rank_main(void *arg)
{
    rank_job *j = arg;
    j->st_fwd = flashc_cp_attn_fwd(&j->p, &j->q, &j->k, &j->v, &j->o, &j->lse);
    j->st_bwd = FLASHC_OK;
    if (j->st_fwd != FLASHC_OK)
        snprintf(j->err, sizeof j->err, "%s", flashc_last_error());
    else if (j->do_bwd) {
        j->st_bwd = flashc_cp_attn_bwd(&j->p, &j->q, &j->k, &j->v, &j->o, &j->dout, &j->lse,
                                       &j->dq, &j->dk, &j->dv);
        if (j->st_bwd != FLASHC_OK)
            snprintf(j->err, sizeof j->err, "%s", flashc_last_error());
    }
    return NULL;
}

static void run_ranks(rank_job *jobs, int N)
{
    pthread_t th[16];
    for (int r = 0; r < N; r++)
        assert_int_equal(pthread_create(&th[r], NULL, rank_main, &jobs[r]), 0);
    for (int r = 0; r < N; r++)
        pthread_join(th[r], NULL);
}

static double max_err(const float *x, const float *ref, int64_t n)
{
    double e = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (isinf(ref[i]) && x[i] == ref[i])
            continue;
        const double d = fabs((double)x[i] - (double)ref[i]);
        if (!(d <= e)) /* NaN counts as infinitely wrong */
            e = isnan(d) ? INFINITY : d;
    }
    return e;
}

/* The 2x rule. Float32: against the single call, plus 4N ulps of the largest |ref| (the ring
 * adds up to N float32 partials; both errors are a few ulps).
 * bfloat16 / float16: against the plain same-precision ring (tu_naive_ring), plus one storage
 * ulp of the largest |ref|; the single call's error is printed beside it when the rule fails. */
static void check_rule(const char *what, const ring_case *c, const float *cp, const float *single,
                       const float *naive, const float *ref, int64_t n)
{
    const double e_cp = max_err(cp, ref, n), e_single = max_err(single, ref, n);
    const double e_naive = naive ? max_err(naive, ref, n) : e_single;
    double ref_max = 1.0;
    for (int64_t i = 0; i < n; i++)
        ref_max = isfinite(ref[i]) && fabs(ref[i]) > ref_max ? fabs(ref[i]) : ref_max;
    /* float32: each of up to N partials adds a few ulps in the float32 sums */
    const double ulps = 4.0 * c->N * 0x1p-23 * ref_max;
    /* 16-bit: plus one storage ulp of the largest |ref|, the outputs' own final rounding, which
     * two implementations may take on opposite sides for the worst element (at S ~ 34 the max
     * error is one element's: seed 1883396866203905 gave 0.0297 against 2 x 0.0143) */
    const double unit = c->dt == FLASHC_BF16 ? 0x1p-8 : 0x1p-11;
    const double bound = c->dt == FLASHC_F32 || !naive ? 2.0 * e_single + ulps
                                                       : 2.0 * e_naive + unit * ref_max;
    if (!(e_cp <= bound)) {
        print_error("%s: N=%d S=%lld %s causal=%d B=%lld H=%lld/%lld D=%lld/%lld %s: cp error %.3g "
                    "> bound %.3g (single call %.3g, naive same-precision ring %.3g)\n", what, c->N,
                    (long long)c->S, shard_names[c->shard], c->causal, (long long)c->B,
                    (long long)c->Hq, (long long)c->Hkv, (long long)c->D, (long long)c->Dv,
                    flashc__dtype_name(c->dt), e_cp, bound, e_single, e_naive);
        fail();
    }
}

static void run_case(const ring_case *c)
{
    const int N = c->N;
    const int64_t B = c->B, S = c->S, Hq = c->Hq, Hkv = c->Hkv, D = c->D, Dv = c->Dv;
    const flashc_dtype dt = c->dt;
    const size_t es = flashc_dtype_size(dt);
    const int64_t nq = B * S * Hq * D, nk = B * S * Hkv * D, nv_elems = B * S * Hkv * Dv,
                  no = B * S * Hq * Dv, nl = B * Hq * S;
    float *qf = tu_alloc_normal(nq, 1.0f), *kf = tu_alloc_normal(nk, 1.0f);
    float *vf = tu_alloc_normal(nv_elems, 1.0f), *dof = tu_alloc_normal(no, 1.0f);
    void *q = to_dtype(qf, nq, dt, qf), *k = to_dtype(kf, nk, dt, kf);
    void *v = to_dtype(vf, nv_elems, dt, vf), *dout = to_dtype(dof, no, dt, dof);

    /* single call over the whole sequence, in the storage dtype */
    flashc_attn_params ap = flashc_attn_params_default();
    ap.causal = c->causal;
    flashc_tensor tq = flashc_tensor_4d(q, dt, B, S, Hq, D), tk = flashc_tensor_4d(k, dt, B, S, Hkv, D);
    flashc_tensor tv = flashc_tensor_4d(v, dt, B, S, Hkv, Dv), tdo = flashc_tensor_4d(dout, dt, B, S, Hq, Dv);
    void *o1 = malloc((size_t)no * es), *dq1 = malloc((size_t)nq * es);
    void *dk1 = malloc((size_t)nk * es), *dv1 = malloc((size_t)nv_elems * es);
    float *lse1 = malloc((size_t)nl * sizeof(float));
    flashc_tensor to = flashc_tensor_4d(o1, dt, B, S, Hq, Dv), tl = flashc_tensor_3d(lse1, FLASHC_F32, B, Hq, S);
    flashc_tensor tdq = flashc_tensor_4d(dq1, dt, B, S, Hq, D), tdk = flashc_tensor_4d(dk1, dt, B, S, Hkv, D);
    flashc_tensor tdv = flashc_tensor_4d(dv1, dt, B, S, Hkv, Dv);
    TU_OK(flashc_attn_fwd(&ap, &tq, &tk, &tv, &to, &tl, NULL));
    TU_OK(flashc_attn_bwd(&ap, &tq, &tk, &tv, &to, &tdo, &tl, &tdq, &tdk, &tdv, NULL));

    /* float64 references on the rounded inputs (float32 tensors, naive paths accumulate in
     * float64); the backward's reference takes the single call's O rounded to float32 */
    float *o_ref = malloc((size_t)no * 4), *l_ref = malloc((size_t)nl * 4);
    float *dq_ref = malloc((size_t)nq * 4), *dk_ref = malloc((size_t)nk * 4), *dv_ref = malloc((size_t)nv_elems * 4);
    {
        flashc_tensor q32 = flashc_tensor_4d(qf, FLASHC_F32, B, S, Hq, D);
        flashc_tensor k32 = flashc_tensor_4d(kf, FLASHC_F32, B, S, Hkv, D);
        flashc_tensor v32 = flashc_tensor_4d(vf, FLASHC_F32, B, S, Hkv, Dv);
        flashc_tensor do32 = flashc_tensor_4d(dof, FLASHC_F32, B, S, Hq, Dv);
        flashc_tensor o32 = flashc_tensor_4d(o_ref, FLASHC_F32, B, S, Hq, Dv);
        flashc_tensor l32 = flashc_tensor_3d(l_ref, FLASHC_F32, B, Hq, S);
        flashc_tensor dq32 = flashc_tensor_4d(dq_ref, FLASHC_F32, B, S, Hq, D);
        flashc_tensor dk32 = flashc_tensor_4d(dk_ref, FLASHC_F32, B, S, Hkv, D);
        flashc_tensor dv32 = flashc_tensor_4d(dv_ref, FLASHC_F32, B, S, Hkv, Dv);
        TU_OK(flashc_attn_fwd_naive(&ap, &q32, &k32, &v32, &o32, &l32, NULL));
        TU_OK(flashc_attn_bwd_naive(&ap, &q32, &k32, &v32, &o32, &do32, &l32, &dq32, &dk32, &dv32, NULL));
    }

    /* the ranks */
    flashc_cp_comm *comm[16];
    TU_OK(flashc_cp_comm_sim_create(N, comm));
    rank_job *jobs = calloc((size_t)N, sizeof *jobs);
    void *bufs[16][9];
    for (int r = 0; r < N; r++) {
        assert_int_equal(flashc_cp_comm_rank(comm[r]), r);
        assert_int_equal(flashc_cp_comm_size(comm[r]), N);
        const int64_t L = flashc_cp_local_len(shards[c->shard], S, N, r);
        rank_job *j = &jobs[r];
        j->p = flashc_cp_params_default();
        j->p.comm = comm[r];
        j->p.seqlen = S;
        j->p.shard = shards[c->shard];
        j->p.causal = c->causal;
        j->p.num_threads = c->threads;
        j->do_bwd = 1;
        const int64_t hw[9] = {Hq * D, Hkv * D, Hkv * Dv, Hq * Dv, 0, Hq * Dv, Hq * D, Hkv * D, Hkv * Dv};
        for (int b = 0; b < 9; b++) {
            const size_t bytes = b == 4 ? (size_t)(B * Hq * L) * 4 : (size_t)(B * L * hw[b]) * es;
            bufs[r][b] = malloc(bytes);
            memset(bufs[r][b], 0xff, bytes); /* NaN in every dtype: untouched outputs stay so */
        }
        shard_rows(c, r, q, bufs[r][0], Hq * D, es, 0);
        shard_rows(c, r, k, bufs[r][1], Hkv * D, es, 0);
        shard_rows(c, r, v, bufs[r][2], Hkv * Dv, es, 0);
        shard_rows(c, r, dout, bufs[r][5], Hq * Dv, es, 0);
        j->q = flashc_tensor_4d(bufs[r][0], dt, B, L, Hq, D);
        j->k = flashc_tensor_4d(bufs[r][1], dt, B, L, Hkv, D);
        j->v = flashc_tensor_4d(bufs[r][2], dt, B, L, Hkv, Dv);
        j->o = flashc_tensor_4d(bufs[r][3], dt, B, L, Hq, Dv);
        j->lse = flashc_tensor_3d(bufs[r][4], FLASHC_F32, B, Hq, L);
        j->dout = flashc_tensor_4d(bufs[r][5], dt, B, L, Hq, Dv);
        j->dq = flashc_tensor_4d(bufs[r][6], dt, B, L, Hq, D);
        j->dk = flashc_tensor_4d(bufs[r][7], dt, B, L, Hkv, D);
        j->dv = flashc_tensor_4d(bufs[r][8], dt, B, L, Hkv, Dv);
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    run_ranks(jobs, N);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (getenv("CP_TIME")) fprintf(stderr, "ranks N=%d S=%lld: %.3f s\n", N, (long long)S, (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec));
    for (int r = 0; r < N; r++) {
        if (jobs[r].st_fwd != FLASHC_OK || jobs[r].st_bwd != FLASHC_OK)
            print_error("rank %d: %s\n", r, jobs[r].err);
        assert_int_equal(jobs[r].st_fwd, FLASHC_OK);
        assert_int_equal(jobs[r].st_bwd, FLASHC_OK);
    }

    /* gather into global order */
    void *o_cp = malloc((size_t)no * es), *dq_cp = malloc((size_t)nq * es);
    void *dk_cp = malloc((size_t)nk * es), *dv_cp = malloc((size_t)nv_elems * es);
    float *l_cp = malloc((size_t)nl * 4);
    for (int r = 0; r < N; r++) {
        const int64_t L = flashc_cp_local_len(shards[c->shard], S, N, r);
        shard_rows(c, r, o_cp, bufs[r][3], Hq * Dv, es, 1);
        shard_rows(c, r, dq_cp, bufs[r][6], Hq * D, es, 1);
        shard_rows(c, r, dk_cp, bufs[r][7], Hkv * D, es, 1);
        shard_rows(c, r, dv_cp, bufs[r][8], Hkv * Dv, es, 1);
        const float *ll = bufs[r][4];
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < Hq; h++)
                for (int64_t i = 0; i < L; i++)
                    l_cp[(b * Hq + h) * S + flashc_cp_global_index(shards[c->shard], S, N, r, i)] =
                        ll[(b * Hq + h) * L + i];
    }
    tu_ring_out nv = {NULL, NULL, NULL, NULL};
    if (dt != FLASHC_F32) {
        int *owner = malloc((size_t)S * sizeof *owner);
        for (int r = 0; r < N; r++)
            for (int64_t i = 0; i < flashc_cp_local_len(shards[c->shard], S, N, r); i++)
                owner[flashc_cp_global_index(shards[c->shard], S, N, r, i)] = r;
        const tu_ring_shape rs = {N, c->causal, dt, B, S, Hq, Hkv, D, Dv, 1.0f / sqrtf((float)D)};
        nv = tu_naive_ring(&rs, owner, qf, kf, vf, dof);
        free(owner);
    }
    float *f, *g;
    check_rule("o", c, f = to_f32(o_cp, no, dt), g = to_f32(o1, no, dt), nv.o, o_ref, no), free(f), free(g);
    check_rule("lse", c, l_cp, lse1, NULL, l_ref, nl);
    check_rule("dq", c, f = to_f32(dq_cp, nq, dt), g = to_f32(dq1, nq, dt), nv.dq, dq_ref, nq), free(f), free(g);
    check_rule("dk", c, f = to_f32(dk_cp, nk, dt), g = to_f32(dk1, nk, dt), nv.dk, dk_ref, nk), free(f), free(g);
    check_rule("dv", c, f = to_f32(dv_cp, nv_elems, dt), g = to_f32(dv1, nv_elems, dt), nv.dv, dv_ref, nv_elems), free(f), free(g);
    free(nv.o), free(nv.dq), free(nv.dk), free(nv.dv);

    for (int r = 0; r < N; r++) {
        for (int b = 0; b < 9; b++)
            free(bufs[r][b]);
        flashc_cp_comm_destroy(comm[r]);
    }
    free(jobs);
    free(o_cp), free(dq_cp), free(dk_cp), free(dv_cp), free(l_cp);
    free(o_ref), free(l_ref), free(dq_ref), free(dk_ref), free(dv_ref);
    free(o1), free(dq1), free(dk1), free(dv1), free(lse1);
    free(q), free(k), free(v), free(dout), free(qf), free(kf), free(vf), free(dof);
}

static void test_ring_f32(void **state)
{
    const int ns[] = {1, 2, 3, 4, 8};
    for (size_t a = 0; a < 5; a++)
        for (int sh = 0; sh < 3; sh++)
            for (int causal = 0; causal < 2; causal++) {
                const int N = ns[a];
                /* an uneven seqlen: 2N chunks (or N slices) of different lengths */
                const int64_t S = 2 * N * 3 + 1 + (int64_t)(sh + causal) % 3;
                const ring_case c = {N, S, sh, causal, 2, 4, 2, 16, 16, FLASHC_F32, 1};
                run_case(&c);
            }
}

/* GQA 3:1 (MQA), D != Dv, one sequence of the minimum length (one row per chunk), threads */
static void test_ring_shapes(void **state)
{
    for (int sh = 0; sh < 3; sh++)
        for (int causal = 0; causal < 2; causal++) {
            const ring_case a = {3, 31, sh, causal, 1, 3, 1, 12, 8, FLASHC_F32, 2};
            run_case(&a);
            const ring_case b = {4, sh == 1 ? 8 : 4, sh, causal, 2, 2, 2, 8, 8, FLASHC_F32, 1};
            run_case(&b);
            const ring_case d = {2, 64, sh, causal, 1, 8, 2, 64, 64, FLASHC_F32, 2};
            run_case(&d);
        }
}

static void test_ring_lowp(void **state)
{
    const int ns[] = {1, 2, 4, 8};
    const flashc_dtype dts[2] = {FLASHC_BF16, FLASHC_F16};
    for (int d = 0; d < 2; d++)
        for (size_t a = 0; a < 4; a++)
            for (int sh = 0; sh < 3; sh++)
                for (int causal = 0; causal < 2; causal++) {
                    const int N = ns[a];
                    const int64_t S = 2 * N * 4 + (int64_t)sh;
                    const ring_case c = {N, S, sh, causal, 1, 4, 2, 32, 32, dts[d], 1};
                    run_case(&c);
                }
}

/* ---- errors -------------------------------------------------------------------------------------- */

/* Rank 1 passes a q with one row too many: it is refused with a message, its peers return an
 * error (rather than waiting for it), and no rank wrote its outputs. */
static void test_bad_rank_fails_all(void **state)
{
    const int N = 3;
    const int64_t S = 12, H = 2, D = 8;
    flashc_cp_comm *comm[3];
    TU_OK(flashc_cp_comm_sim_create(N, comm));
    rank_job jobs[3];
    float *bufs[3][5];
    memset(jobs, 0, sizeof jobs);
    for (int r = 0; r < N; r++) {
        const int64_t L = 4 + (r == 1);
        for (int b = 0; b < 5; b++) {
            bufs[r][b] = tu_alloc_normal(L * H * D, 1.0f);
            if (b >= 3)
                for (int64_t i = 0; i < L * H * D; i++)
                    bufs[r][b][i] = NAN;
        }
        jobs[r].p = flashc_cp_params_default();
        jobs[r].p.comm = comm[r];
        jobs[r].p.seqlen = S;
        jobs[r].q = flashc_tensor_4d(bufs[r][0], FLASHC_F32, 1, L, H, D);
        jobs[r].k = flashc_tensor_4d(bufs[r][1], FLASHC_F32, 1, L, H, D);
        jobs[r].v = flashc_tensor_4d(bufs[r][2], FLASHC_F32, 1, L, H, D);
        jobs[r].o = flashc_tensor_4d(bufs[r][3], FLASHC_F32, 1, L, H, D);
        jobs[r].lse = flashc_tensor_3d(bufs[r][4], FLASHC_F32, 1, H, L);
    }
    run_ranks(jobs, N);
    assert_int_equal(jobs[1].st_fwd, FLASHC_ERR_INVALID_SHAPE);
    assert_non_null(strstr(jobs[1].err, "q.shape[1] = 5"));
    for (int r = 0; r < N; r++) {
        if (r != 1) {
            assert_int_not_equal(jobs[r].st_fwd, FLASHC_OK);
            assert_non_null(strstr(jobs[r].err, "peer rank"));
        }
        assert_true(tu_has_nan(bufs[r][3], 4 * H * D) && tu_has_nan(bufs[r][4], H * 4));
        for (int64_t i = 0; i < 4 * H * D; i++)
            assert_true(isnan(bufs[r][3][i]));
    }
    for (int r = 0; r < N; r++) {
        for (int b = 0; b < 5; b++)
            free(bufs[r][b]);
        flashc_cp_comm_destroy(comm[r]);
    }
}

/* Ranks that disagree on the dtype send slices of other sizes: the transport notices. */
static void test_ranks_disagree(void **state)
{
    const int N = 2;
    const int64_t S = 8, H = 1, D = 4, L = 4;
    flashc_cp_comm *comm[2];
    TU_OK(flashc_cp_comm_sim_create(N, comm));
    rank_job jobs[2];
    float *bufs[2][5];
    memset(jobs, 0, sizeof jobs);
    for (int r = 0; r < N; r++) {
        const flashc_dtype dt = r == 0 ? FLASHC_F32 : FLASHC_BF16;
        for (int b = 0; b < 5; b++)
            bufs[r][b] = tu_alloc_normal(L * H * D, 0.0f);
        jobs[r].p = flashc_cp_params_default();
        jobs[r].p.comm = comm[r];
        jobs[r].p.seqlen = S;
        jobs[r].q = flashc_tensor_4d(bufs[r][0], dt, 1, L, H, D);
        jobs[r].k = flashc_tensor_4d(bufs[r][1], dt, 1, L, H, D);
        jobs[r].v = flashc_tensor_4d(bufs[r][2], dt, 1, L, H, D);
        jobs[r].o = flashc_tensor_4d(bufs[r][3], dt, 1, L, H, D);
        jobs[r].lse = flashc_tensor_3d(bufs[r][4], FLASHC_F32, 1, H, L);
    }
    run_ranks(jobs, N);
    for (int r = 0; r < N; r++)
        assert_int_equal(jobs[r].st_fwd, FLASHC_ERR_INVALID_ARGUMENT);
    assert_true(strstr(jobs[0].err, "disagree") || strstr(jobs[1].err, "disagree"));
    for (int r = 0; r < N; r++) {
        for (int b = 0; b < 5; b++)
            free(bufs[r][b]);
        flashc_cp_comm_destroy(comm[r]);
    }
}

static void test_bad_params(void **state)
{
    flashc_cp_comm *comm[1];
    TU_OK(flashc_cp_comm_sim_create(1, comm));
    float buf[5][16];
    memset(buf, 0, sizeof buf);
    flashc_tensor q = flashc_tensor_4d(buf[0], FLASHC_F32, 1, 4, 1, 4);
    flashc_tensor k = flashc_tensor_4d(buf[1], FLASHC_F32, 1, 4, 1, 4);
    flashc_tensor v = flashc_tensor_4d(buf[2], FLASHC_F32, 1, 4, 1, 4);
    flashc_tensor o = flashc_tensor_4d(buf[3], FLASHC_F32, 1, 4, 1, 4);
    flashc_cp_params p = flashc_cp_params_default();
    assert_int_equal(flashc_cp_attn_fwd(NULL, &q, &k, &v, &o, NULL), FLASHC_ERR_NULL_POINTER);
    p.seqlen = 4;
    assert_int_equal(flashc_cp_attn_fwd(&p, &q, &k, &v, &o, NULL), FLASHC_ERR_NULL_POINTER);
    assert_non_null(strstr(flashc_last_error(), "comm"));
    /* each refusal poisons a simulated communicator: a fresh one per case */
    flashc_cp_comm_destroy(comm[0]);
    struct { int64_t seqlen; int shard; flashc_status st; const char *msg; } bad[] = {
        {0, 0, FLASHC_ERR_INVALID_ARGUMENT, "seqlen"},
        {5, 0, FLASHC_ERR_INVALID_SHAPE, "q.shape[1] = 4"},
        {4, 7, FLASHC_ERR_INVALID_ARGUMENT, "shard"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        TU_OK(flashc_cp_comm_sim_create(1, comm));
        p.comm = comm[0];
        p.seqlen = bad[i].seqlen;
        p.shard = (flashc_cp_shard)bad[i].shard;
        assert_int_equal(flashc_cp_attn_fwd(&p, &q, &k, &v, &o, NULL), bad[i].st);
        assert_non_null(strstr(flashc_last_error(), bad[i].msg));
        flashc_cp_comm_destroy(comm[0]);
    }
    TU_OK(flashc_cp_comm_sim_create(1, comm));
    p = flashc_cp_params_default();
    p.comm = comm[0];
    p.seqlen = 4;
    p.struct_size = 4;
    assert_int_equal(flashc_cp_attn_fwd(&p, &q, &k, &v, &o, NULL), FLASHC_ERR_INVALID_ARGUMENT);
    p.struct_size = offsetof(flashc_cp_params, cuda_stream) + 2; /* ends inside a pointer */
    assert_int_equal(flashc_cp_attn_fwd(&p, &q, &k, &v, &o, NULL), FLASHC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(flashc_last_error(), "inside the field cuda_stream"));
    flashc_cp_comm_destroy(comm[0]);
    TU_OK(flashc_cp_comm_sim_create(1, comm));
    p.struct_size = sizeof p;
    p.comm = comm[0];
    assert_int_equal(flashc_cp_attn_bwd(&p, &q, &k, &v, &o, &o, NULL, &q, &k, &v),
                     FLASHC_ERR_NULL_POINTER);
    flashc_cp_comm_destroy(comm[0]);
    /* an output overlapping an input */
    TU_OK(flashc_cp_comm_sim_create(1, comm));
    p.comm = comm[0];
    assert_int_equal(flashc_cp_attn_fwd(&p, &q, &k, &v, &q, NULL), FLASHC_ERR_OVERLAP);
    flashc_cp_comm_destroy(comm[0]);
    /* a working call on a fresh communicator, for contrast */
    TU_OK(flashc_cp_comm_sim_create(1, comm));
    p.comm = comm[0];
    TU_OK(flashc_cp_attn_fwd(&p, &q, &k, &v, &o, NULL));
    flashc_cp_comm_destroy(comm[0]);
    flashc_cp_comm_destroy(NULL);
    assert_int_equal(flashc_cp_comm_rank(NULL), -1);
    assert_int_equal(flashc_cp_comm_sim_create(0, comm), FLASHC_ERR_INVALID_ARGUMENT);
    assert_int_equal(flashc_cp_comm_sim_create(2, NULL), FLASHC_ERR_NULL_POINTER);
}

/* Without a GPU (CI) nothing here reaches NCCL's transfers: the id may still be made (a build
 * with NCCL on a host without a GPU), every other call is refused with a status. */
static void test_nccl_entry_points(void **state)
{
    unsigned char id[FLASHC_CP_NCCL_ID_BYTES];
    flashc_cp_comm *c = NULL;
    const flashc_status st = flashc_cp_nccl_unique_id(id, sizeof id);
    assert_true(st == FLASHC_OK || st == FLASHC_ERR_UNSUPPORTED || st == FLASHC_ERR_DEVICE);
    assert_int_not_equal(flashc_cp_nccl_unique_id(NULL, sizeof id), FLASHC_OK);
    assert_int_not_equal(flashc_cp_nccl_unique_id(id, 3), FLASHC_OK);
    assert_int_not_equal(flashc_cp_comm_nccl_wrap(NULL, &c), FLASHC_OK);
    assert_null(c);
    assert_int_not_equal(flashc_cp_comm_nccl_init(1, 5, id, sizeof id, &c), FLASHC_OK);
    assert_int_not_equal(flashc_cp_comm_nccl_init(1, 0, id, 7, &c), FLASHC_OK);
    assert_null(c);
    if (!flashc_cp_nccl_available())
        print_message("no NCCL transport here (%s)\n",
                      st == FLASHC_OK ? "NCCL loads, no CUDA device" : flashc_last_error());
}

int main(void)
{
    tu_seed_from_env();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schedule_invariants),
        cmocka_unit_test(test_schedule_balance),
        cmocka_unit_test(test_shard_maps),
        cmocka_unit_test(test_ring_f32),
        cmocka_unit_test(test_ring_shapes),
        cmocka_unit_test(test_ring_lowp),
        cmocka_unit_test(test_bad_rank_fails_all),
        cmocka_unit_test(test_ranks_disagree),
        cmocka_unit_test(test_bad_params),
        cmocka_unit_test(test_nccl_entry_points),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
