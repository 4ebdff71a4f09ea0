/*
 * faults.c — allocation failures, swept over every allocation site of every entry point.
 * Built only with -DFLASHC_FAULT_INJECTION=ON (scripts/test.sh runs it in an ASan build, so
 * LeakSanitizer checks at exit that nothing was leaked on any failure path).
 *
 * For each entry point and a few problem shapes (several paths allocate differently: decode,
 * tiled, causal, 16-bit storage): one clean call counts the allocations n it makes; then for
 * k = 1..n the k-th allocation fails, and the call must return FLASHC_ERR_OUT_OF_MEMORY with a
 * message, leave every output (and the residual's in/out x) bit-identical, and give back every
 * byte it took from the counting allocator.
 */
#include "common.h"
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { MAXN = 2 * 70 * 4 * 24 };

typedef struct prob {
    int64_t B, Sq, Sk, Hq, Hkv, D;
    int causal;
    flashc_dtype dt;
} prob;

static float q[MAXN], k[MAXN], v[MAXN], o[MAXN], dout[MAXN], lse[MAXN];
static float dq[MAXN], dk[MAXN], dv[MAXN];
static float x[MAXN], r[MAXN], w[MAXN], y[MAXN];
static prob P;

/* The buffers a call may write, with their poisoned contents. */
static struct {
    float *buf;
    float snap[MAXN];
} outs[5];
static int nouts;

static void watch(float *buf)
{
    outs[nouts].buf = buf;
    for (int i = 0; i < MAXN; i++) /* a NaN pattern no computation produces */
        ((uint32_t *)buf)[i] = 0x7fc0dead;
    memcpy(outs[nouts].snap, buf, sizeof outs[nouts].snap);
    nouts++;
}

static flashc_tensor t4(float *d, int64_t a, int64_t b, int64_t c, int64_t e)
{
    return flashc_tensor_4d(d, P.dt, a, b, c, e);
}

static flashc_status c_fwd(void)
{
    flashc_attn_params p = flashc_attn_params_default();
    p.causal = P.causal;
    flashc_tensor tq = t4(q, P.B, P.Sq, P.Hq, P.D), tk = t4(k, P.B, P.Sk, P.Hkv, P.D);
    flashc_tensor tv = t4(v, P.B, P.Sk, P.Hkv, P.D), to = t4(o, P.B, P.Sq, P.Hq, P.D);
    flashc_tensor tl = flashc_tensor_3d(lse, FLASHC_F32, P.B, P.Hq, P.Sq);
    watch(o), watch(lse);
    return flashc_attn_fwd(&p, &tq, &tk, &tv, &to, &tl, NULL);
}

static flashc_status c_fwd_naive(void)
{
    flashc_attn_params p = flashc_attn_params_default();
    p.causal = P.causal;
    flashc_tensor tq = t4(q, P.B, P.Sq, P.Hq, P.D), tk = t4(k, P.B, P.Sk, P.Hkv, P.D);
    flashc_tensor tv = t4(v, P.B, P.Sk, P.Hkv, P.D), to = t4(o, P.B, P.Sq, P.Hq, P.D);
    flashc_tensor tl = flashc_tensor_3d(lse, FLASHC_F32, P.B, P.Hq, P.Sq);
    watch(o), watch(lse);
    return flashc_attn_fwd_naive(&p, &tq, &tk, &tv, &to, &tl, NULL);
}

static flashc_status bwd(int naive)
{
    flashc_attn_params p = flashc_attn_params_default();
    p.causal = P.causal;
    flashc_tensor tq = t4(q, P.B, P.Sq, P.Hq, P.D), tk = t4(k, P.B, P.Sk, P.Hkv, P.D);
    flashc_tensor tv = t4(v, P.B, P.Sk, P.Hkv, P.D), to = t4(o, P.B, P.Sq, P.Hq, P.D);
    flashc_tensor tdo = t4(dout, P.B, P.Sq, P.Hq, P.D);
    flashc_tensor tl = flashc_tensor_3d(lse, FLASHC_F32, P.B, P.Hq, P.Sq);
    flashc_tensor tdq = t4(dq, P.B, P.Sq, P.Hq, P.D), tdk = t4(dk, P.B, P.Sk, P.Hkv, P.D);
    flashc_tensor tdv = t4(dv, P.B, P.Sk, P.Hkv, P.D);
    watch(dq), watch(dk), watch(dv);
    return (naive ? flashc_attn_bwd_naive : flashc_attn_bwd)(&p, &tq, &tk, &tv, &to, &tdo, &tl,
                                                             &tdq, &tdk, &tdv, NULL);
}
/* the backward's consistent forward state (o, lse), computed with injection off */
static void prep_bwd(void)
{
    flashc_attn_params p = flashc_attn_params_default();
    p.causal = P.causal;
    flashc_tensor tq = t4(q, P.B, P.Sq, P.Hq, P.D), tk = t4(k, P.B, P.Sk, P.Hkv, P.D);
    flashc_tensor tv = t4(v, P.B, P.Sk, P.Hkv, P.D), to = t4(o, P.B, P.Sq, P.Hq, P.D);
    flashc_tensor tl = flashc_tensor_3d(lse, FLASHC_F32, P.B, P.Hq, P.Sq);
    if (flashc_attn_fwd_naive(&p, &tq, &tk, &tv, &to, &tl, NULL) != FLASHC_OK)
        fail_msg("the backward's forward failed: %s", flashc_last_error());
}
static flashc_status c_bwd(void) { return bwd(0); }
static flashc_status c_bwd_naive(void) { return bwd(1); }

static flashc_status rows(int op)
{
    const int64_t T = P.Sq, D = P.D;
    flashc_tensor tx = flashc_tensor_2d(x, P.dt, T, D), tr = flashc_tensor_2d(r, P.dt, T, D);
    flashc_tensor tw = flashc_tensor_1d(w, P.dt, D), ty = flashc_tensor_2d(y, P.dt, T, D);
    flashc_tensor tg = flashc_tensor_2d(x, P.dt, T, 2 * D);
    if (op == 2 || op == 3) { /* x is read and written: watched with real values */
        tu_fill_normal(x, MAXN, 1);
        outs[nouts].buf = x;
        memcpy(outs[nouts].snap, x, sizeof outs[nouts].snap);
        nouts++;
    }
    watch(y);
    switch (op) {
    case 0: return flashc_rmsnorm(&tx, &tw, 1e-6f, &ty);
    case 1: return flashc_rmsnorm_naive(&tx, &tw, 1e-6f, &ty);
    case 2: return flashc_rmsnorm_residual(&tx, &tr, &tw, 1e-6f, &ty);
    case 3: return flashc_rmsnorm_residual_naive(&tx, &tr, &tw, 1e-6f, &ty);
    case 4: return flashc_swiglu(&tg, &ty);
    default: return flashc_swiglu_naive(&tg, &ty);
    }
}
static flashc_status c_rms(void) { return rows(0); }
static flashc_status c_rms_naive(void) { return rows(1); }
static flashc_status c_rmsr(void) { return rows(2); }
static flashc_status c_rmsr_naive(void) { return rows(3); }
static flashc_status c_swiglu(void) { return rows(4); }
static flashc_status c_swiglu_naive(void) { return rows(5); }

static flashc_status c_merge(void)
{
    flashc_tensor t1 = t4(q, P.B, P.Sq, P.Hq, P.D), t2 = t4(k, P.B, P.Sq, P.Hq, P.D);
    flashc_tensor tl1 = flashc_tensor_3d(w, FLASHC_F32, P.B, P.Hq, P.Sq);
    flashc_tensor tl2 = flashc_tensor_3d(r, FLASHC_F32, P.B, P.Hq, P.Sq);
    flashc_tensor to = t4(o, P.B, P.Sq, P.Hq, P.D);
    flashc_tensor tl = flashc_tensor_3d(lse, FLASHC_F32, P.B, P.Hq, P.Sq);
    watch(o), watch(lse);
    return flashc_attn_merge(&t1, &tl1, &t2, &tl2, &to, &tl);
}

/* Context parallelism on one simulated rank (zigzag, so the step's calls are split): the
 * communicator's own allocations are injected too; L = Sq rows of q, k, v alike. */
static flashc_status cp(int backward)
{
    flashc_cp_comm *comm = NULL;
    flashc_status st = flashc_cp_comm_sim_create(1, &comm);
    if (st != FLASHC_OK)
        return st;
    flashc_cp_params p = flashc_cp_params_default();
    p.comm = comm;
    p.seqlen = P.Sq;
    p.shard = FLASHC_CP_SHARD_ZIGZAG;
    p.causal = P.causal;
    flashc_tensor tq = t4(q, P.B, P.Sq, P.Hq, P.D), tk = t4(k, P.B, P.Sq, P.Hkv, P.D);
    flashc_tensor tv = t4(v, P.B, P.Sq, P.Hkv, P.D), to = t4(o, P.B, P.Sq, P.Hq, P.D);
    flashc_tensor tdo = t4(dout, P.B, P.Sq, P.Hq, P.D);
    flashc_tensor tl = flashc_tensor_3d(lse, FLASHC_F32, P.B, P.Hq, P.Sq);
    flashc_tensor tdq = t4(dq, P.B, P.Sq, P.Hq, P.D), tdk = t4(dk, P.B, P.Sq, P.Hkv, P.D);
    flashc_tensor tdv = t4(dv, P.B, P.Sq, P.Hkv, P.D);
    if (backward) {
        watch(dq), watch(dk), watch(dv);
        st = flashc_cp_attn_bwd(&p, &tq, &tk, &tv, &to, &tdo, &tl, &tdq, &tdk, &tdv);
    } else {
        watch(o), watch(lse);
        st = flashc_cp_attn_fwd(&p, &tq, &tk, &tv, &to, &tl);
    }
    flashc_cp_comm_destroy(comm);
    return st;
}
static flashc_status c_cp_fwd(void) { return cp(0); }
static flashc_status c_cp_bwd(void) { return cp(1); }

static flashc_status c_softmax(void)
{
    flashc_softmax_state s = flashc_softmax_state_init();
    return flashc_online_softmax(&s, x, 100);
}

typedef struct entry {
    const char *name;
    flashc_status (*call)(void);
    int f32_only;
    void (*prepare)(void); /* run before each call, injection off (may be NULL) */
} entry;

static const entry ENTRIES[] = {
    {"flashc_attn_fwd", c_fwd, 0, NULL},
    {"flashc_attn_fwd_naive", c_fwd_naive, 0, NULL},
    {"flashc_attn_bwd", c_bwd, 1, prep_bwd},
    {"flashc_attn_bwd_naive", c_bwd_naive, 0, prep_bwd},
    {"flashc_rmsnorm", c_rms, 0, NULL},
    {"flashc_rmsnorm_naive", c_rms_naive, 0, NULL},
    {"flashc_rmsnorm_residual", c_rmsr, 0, NULL},
    {"flashc_rmsnorm_residual_naive", c_rmsr_naive, 0, NULL},
    {"flashc_swiglu", c_swiglu, 0, NULL},
    {"flashc_swiglu_naive", c_swiglu_naive, 0, NULL},
    {"flashc_attn_merge", c_merge, 1, NULL},
    {"flashc_online_softmax", c_softmax, 1, NULL},
    {"flashc_cp_attn_fwd", c_cp_fwd, 0, NULL},
    {"flashc_cp_attn_bwd", c_cp_bwd, 0, prep_bwd},
};

static const prob PROBS[] = {
    {2, 40, 50, 4, 2, 16, 1, FLASHC_F32}, /* tiled, causal, GQA */
    {2, 3, 70, 4, 1, 24, 0, FLASHC_F32},  /* decode (Sq < 8) */
    {1, 21, 9, 2, 2, 8, 1, FLASHC_BF16},  /* Sq > Sk: empty rows; 16-bit storage */
    {1, 17, 17, 2, 1, 5, 0, FLASHC_F16},
};

static void test_every_allocation_fails_cleanly(void **state)
{
    (void)state;
    int64_t sites = 0, calls = 0;
    for (size_t pi = 0; pi < sizeof PROBS / sizeof PROBS[0]; pi++) {
        P = PROBS[pi];
        for (size_t ei = 0; ei < sizeof ENTRIES / sizeof ENTRIES[0]; ei++) {
            const entry *e = &ENTRIES[ei];
            if (e->f32_only && P.dt != FLASHC_F32)
                continue;
            tu_fill_normal(q, MAXN, 1), tu_fill_normal(k, MAXN, 1), tu_fill_normal(v, MAXN, 1);
            tu_fill_normal(dout, MAXN, 1), tu_fill_normal(w, MAXN, 1), tu_fill_normal(r, MAXN, 1);
            tu_fill_normal(x, MAXN, 1);
            const int64_t base = flashc_mem_get().current_bytes;
            /* the clean run counts the entry point's allocations */
            nouts = 0;
            if (e->prepare)
                e->prepare();
            flashc__fault_arm(INT64_MAX);
            flashc_status st = e->call();
            const int64_t n = flashc__fault_seen();
            flashc__fault_arm(0);
            if (st != FLASHC_OK)
                fail_msg("%s (problem %zu) failed without injection: %s", e->name, pi,
                         flashc_last_error());
            for (int64_t kth = 1; kth <= n; kth++) {
                nouts = 0;
                if (e->prepare)
                    e->prepare();
                flashc__fault_arm(kth);
                st = e->call();
                flashc__fault_arm(0);
                calls++;
                if (st != FLASHC_ERR_OUT_OF_MEMORY)
                    fail_msg("%s (problem %zu), allocation %lld of %lld failed: got %s", e->name,
                             pi, (long long)kth, (long long)n, flashc_status_string(st));
                assert_true(strlen(flashc_last_error()) > 0);
                for (int i = 0; i < nouts; i++)
                    if (memcmp(outs[i].buf, outs[i].snap, sizeof outs[i].snap) != 0)
                        fail_msg("%s (problem %zu), allocation %lld failed: output %d written",
                                 e->name, pi, (long long)kth, i);
                if (flashc_mem_get().current_bytes != base)
                    fail_msg("%s: %lld bytes not given back after allocation %lld failed", e->name,
                             (long long)(flashc_mem_get().current_bytes - base), (long long)kth);
            }
            sites += n;
            print_message("  %-30s problem %zu: %lld allocation sites\n", e->name, pi, (long long)n);
        }
    }
    print_message("  %lld allocation failures injected, all clean\n", (long long)calls);
    assert_true(sites > 0);
}

int main(void)
{
    tu_seed_from_env();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_allocation_fails_cleanly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
