/* ring.c — one rank's forward and backward ring (cp.h), written once against cp_dev_ops and
 * cp_transport, so the simulated ranks of the tests run the very loop the NCCL ranks run.
 *
 * Forward, rank r, step t = 0..N-1: it holds the K/V slice of rank s = r - t in buffer t % 2,
 * posts the exchange that sends that buffer to r + 1 and receives the next slice (rank
 * s - 1's) into the other buffer, computes the step's calls (cp_schedule) on the slice it holds
 * and merges each partial (O, LSE) into the float32 accumulator, then waits for the exchange.
 * The transfer therefore runs during the step's attention; the receive buffer is the one the
 * previous step finished reading.
 *
 * Backward: the same ring of K/V; at step t the rank adds its queries' dK/dV for slice s into a
 * float32 step buffer, then (once the accumulated dK/dV of slice s from the ranks before it has
 * arrived on channel 1) adds the step buffer into it and passes it on to r + 1. After N hops
 * the slice's dK/dV is back at its owner, having collected every rank's queries. dQ stays
 * local. Each call gets the global O and LSE rows, so its P = exp(S - LSE) is already the final
 * softmax and D = rowsum(dO * O) is the final one: the partial gradients simply add up. */
#include "cp.h"

#include <stdio.h>
#include <string.h>

/* ---- views ---------------------------------------------------------------------------------- */

static flashc_tensor rows4(const flashc_tensor *t, int64_t r0, int64_t n)
{
    flashc_tensor s = *t;
    s.data = (char *)t->data + (size_t)(r0 * t->stride[1]) * flashc_dtype_size(t->dtype);
    s.shape[1] = n;
    return s;
}

static flashc_tensor rows_lse(const flashc_tensor *t, int64_t r0, int64_t n)
{
    flashc_tensor s = *t;
    s.data = (float *)t->data + r0 * t->stride[2];
    s.shape[2] = n;
    return s;
}

/* rows [r0, r0 + n) of a contiguous (B, L, H, D) buffer */
static flashc_tensor contig4(void *data, flashc_dtype dt, flashc_device dev, int64_t B,
                             int64_t L, int64_t H, int64_t D, int64_t r0, int64_t n)
{
    flashc_tensor t = flashc_tensor_4d(data, dt, B, L, H, D);
    t.device = dev;
    return rows4(&t, r0, n);
}

/* rows [r0, r0 + n) of a contiguous (B, H, L) float32 buffer */
static flashc_tensor contig_lse(float *data, flashc_device dev, int64_t B, int64_t H, int64_t L,
                                int64_t r0, int64_t n)
{
    flashc_tensor t = flashc_tensor_3d(data, FLASHC_F32, B, H, L);
    t.device = dev;
    return rows_lse(&t, r0, n);
}

/* ---- scratch: one allocation, carved ----------------------------------------------------------- */

#define CP_ALIGN 256

typedef struct carve {
    size_t sizes[12];
    void **ptrs[12];
    int n;
    void *base;
} carve;

static void carve_add(carve *c, void **ptr, size_t bytes)
{
    c->ptrs[c->n] = ptr;
    c->sizes[c->n++] = (bytes + CP_ALIGN - 1) / CP_ALIGN * CP_ALIGN;
}

static flashc_status carve_alloc(cp_exec *x, carve *c)
{
    size_t total = 0;
    for (int i = 0; i < c->n; i++)
        total += c->sizes[i];
    c->base = x->dev->alloc(x, total);
    if (!c->base)
        return FLASHC_ERR_OUT_OF_MEMORY; /* alloc set the message */
    size_t off = 0;
    for (int i = 0; i < c->n; i++)
        *c->ptrs[i] = (char *)c->base + off, off += c->sizes[i];
    return FLASHC_OK;
}

/* ---- helpers --------------------------------------------------------------------------------- */

/* Re-labels a failure of an inner call with the ring step it happened in. */
static flashc_status step_fail(cp_exec *x, flashc_status st, int step, const char *what)
{
    char inner[512];
    snprintf(inner, sizeof inner, "%s", flashc_last_error());
    return flashc__fail(st, "%s: rank %d, ring step %d, %s: %s", x->fn, x->comm->rank, step, what,
                        inner);
}

static flashc_attn_params step_params(const cp_exec *x, const cp_problem *p, int causal)
{
    flashc_attn_params ap = flashc_attn_params_default();
    ap.causal = causal;
    ap.has_softmax_scale = 1;
    ap.softmax_scale = p->scale;
    ap.num_threads = x->threads;
    ap.deterministic = p->deterministic;
    ap.cuda_stream = x->stream;
    return ap;
}

#define CP_CHECK(x, expr)                                                                          \
    do {                                                                                           \
        st = (expr);                                                                               \
        if (st != FLASHC_OK)                                                                       \
            goto done;                                                                             \
    } while (0)

/* ---- forward ----------------------------------------------------------------------------------- */

flashc_status cp_ring_fwd(cp_exec *x, const cp_problem *p)
{
    const cp_layout *l = &p->layout;
    const int N = l->nranks, r = p->rank;
    const flashc_device dev = x->dev->device;
    const flashc_dtype dt = p->dtype;
    const size_t es = flashc_dtype_size(dt);
    const int64_t B = p->B, L = p->L, Hq = p->Hq, Hkv = p->Hkv, D = p->D, Dv = p->Dv;
    int64_t Lmax = 0;
    for (int i = 0; i < N; i++)
        Lmax = cp_local_len(l, i) > Lmax ? cp_local_len(l, i) : Lmax;
    const size_t kv_elems_row = (size_t)(B * Hkv * (D + Dv));

    void *kv[2], *o_part;
    float *lse_part, *o_acc, *lse_acc;
    carve c = {.n = 0};
    carve_add(&c, &kv[0], (size_t)Lmax * kv_elems_row * es);
    carve_add(&c, &kv[1], (size_t)Lmax * kv_elems_row * es);
    carve_add(&c, &o_part, (size_t)(B * L * Hq * Dv) * es);
    carve_add(&c, (void **)&lse_part, (size_t)(B * Hq * L) * sizeof(float));
    carve_add(&c, (void **)&o_acc, (size_t)(B * L * Hq * Dv) * sizeof(float));
    carve_add(&c, (void **)&lse_acc, (size_t)(B * Hq * L) * sizeof(float));
    flashc_status st = x->dev->begin(x);
    if (st == FLASHC_OK)
        st = carve_alloc(x, &c);
    if (st != FLASHC_OK)
        return x->comm->tr->fail(x), st;

    /* own K then V, contiguous (B, L, Hkv, D) and (B, L, Hkv, Dv) */
    CP_CHECK(x, x->dev->pack(x, p->k, kv[0]));
    CP_CHECK(x, x->dev->pack(x, p->v, (char *)kv[0] + (size_t)(B * L * Hkv * D) * es));
    CP_CHECK(x, x->dev->fill(x, o_acc, B * L * Hq * Dv, 0.0f));
    CP_CHECK(x, x->dev->fill(x, lse_acc, B * Hq * L, -INFINITY));

    for (int t = 0; t < N; t++) {
        const int s = cp_source(l, r, t);
        const int64_t Ls = cp_local_len(l, s);
        char *cur = kv[t & 1];
        if (t + 1 < N) {
            const int64_t Ln = cp_local_len(l, cp_source(l, r, t + 1));
            CP_CHECK(x, x->comm->tr->post(x, 0, cur, (size_t)Ls * kv_elems_row * es, kv[(t + 1) & 1],
                                          (size_t)Ln * kv_elems_row * es));
        }
        cp_item items[CP_MAX_ITEMS];
        const int n = cp_schedule(l, p->causal, r, t, items);
        if (n < 0) {
            st = flashc__fail(FLASHC_ERR_UNSUPPORTED, "%s: no mask for a chunk pair at step %d",
                              x->fn, t);
            goto done;
        }
        void *kbase = cur, *vbase = cur + (size_t)(B * Ls * Hkv * D) * es;
        for (int i = 0; i < n; i++) {
            const cp_item *it = &items[i];
            const flashc_attn_params ap = step_params(x, p, it->causal);
            const flashc_tensor q = rows4(p->q, it->q0, it->nq);
            const flashc_tensor k = contig4(kbase, dt, dev, B, Ls, Hkv, D, it->k0, it->nk);
            const flashc_tensor v = contig4(vbase, dt, dev, B, Ls, Hkv, Dv, it->k0, it->nk);
            flashc_tensor o = contig4(o_part, dt, dev, B, L, Hq, Dv, it->q0, it->nq);
            flashc_tensor lse = contig_lse(lse_part, dev, B, Hq, L, it->q0, it->nq);
            st = flashc_attn_fwd(&ap, &q, &k, &v, &o, &lse, NULL);
            if (st != FLASHC_OK) {
                st = step_fail(x, st, t, "attention forward");
                goto done;
            }
            CP_CHECK(x, x->dev->merge(x, B, L, Hq, Dv, it->q0, it->nq, o_acc, lse_acc, o_part, dt,
                                      lse_part));
        }
        if (t + 1 < N)
            CP_CHECK(x, x->comm->tr->wait(x, 0));
    }
    CP_CHECK(x, x->dev->store(x, o_acc, p->o_out));
    if (p->lse_out)
        CP_CHECK(x, x->dev->store_lse(x, lse_acc, p->lse_out));
done:
    if (st != FLASHC_OK)
        x->comm->tr->fail(x);
    x->dev->free(x, c.base);
    return st;
}

/* ---- backward ---------------------------------------------------------------------------------- */

flashc_status cp_ring_bwd(cp_exec *x, const cp_problem *p)
{
    const cp_layout *l = &p->layout;
    const int N = l->nranks, r = p->rank;
    const flashc_device dev = x->dev->device;
    const flashc_dtype dt = p->dtype;
    const size_t es = flashc_dtype_size(dt);
    const int64_t B = p->B, L = p->L, Hq = p->Hq, Hkv = p->Hkv, D = p->D, Dv = p->Dv;
    int64_t Lmax = 0;
    for (int i = 0; i < N; i++)
        Lmax = cp_local_len(l, i) > Lmax ? cp_local_len(l, i) : Lmax;
    const size_t kv_elems_row = (size_t)(B * Hkv * (D + Dv));

    void *kv[2], *dq_part, *dk_part, *dv_part;
    float *dkv[2], *dstep, *dq_acc;
    carve c = {.n = 0};
    carve_add(&c, &kv[0], (size_t)Lmax * kv_elems_row * es);
    carve_add(&c, &kv[1], (size_t)Lmax * kv_elems_row * es);
    carve_add(&c, (void **)&dkv[0], (size_t)Lmax * kv_elems_row * sizeof(float));
    carve_add(&c, (void **)&dkv[1], (size_t)Lmax * kv_elems_row * sizeof(float));
    carve_add(&c, (void **)&dstep, (size_t)Lmax * kv_elems_row * sizeof(float));
    carve_add(&c, (void **)&dq_acc, (size_t)(B * L * Hq * D) * sizeof(float));
    carve_add(&c, &dq_part, (size_t)(B * L * Hq * D) * es);
    carve_add(&c, &dk_part, (size_t)(B * Lmax * Hkv * D) * es);
    carve_add(&c, &dv_part, (size_t)(B * Lmax * Hkv * Dv) * es);
    flashc_status st = x->dev->begin(x);
    if (st == FLASHC_OK)
        st = carve_alloc(x, &c);
    if (st != FLASHC_OK)
        return x->comm->tr->fail(x), st;

    CP_CHECK(x, x->dev->pack(x, p->k, kv[0]));
    CP_CHECK(x, x->dev->pack(x, p->v, (char *)kv[0] + (size_t)(B * L * Hkv * D) * es));
    CP_CHECK(x, x->dev->fill(x, dq_acc, B * L * Hq * D, 0.0f));

    for (int t = 0; t < N; t++) {
        const int s = cp_source(l, r, t);
        const int64_t Ls = cp_local_len(l, s);
        const int64_t Ln = cp_local_len(l, cp_source(l, r, t + 1 < N ? t + 1 : 0));
        char *cur = kv[t & 1];
        if (t + 1 < N)
            CP_CHECK(x, x->comm->tr->post(x, 0, cur, (size_t)Ls * kv_elems_row * es, kv[(t + 1) & 1],
                                          (size_t)Ln * kv_elems_row * es));
        /* step 0 adds straight into the slice's travelling accumulator (nothing arrived yet) */
        float *target = t == 0 ? dkv[0] : dstep;
        CP_CHECK(x, x->dev->fill(x, target, Ls * (int64_t)kv_elems_row, 0.0f));
        float *tk = target, *tv = target + B * Ls * Hkv * D;

        cp_item items[CP_MAX_ITEMS];
        const int n = cp_schedule(l, p->causal, r, t, items);
        if (n < 0) {
            st = flashc__fail(FLASHC_ERR_UNSUPPORTED, "%s: no mask for a chunk pair at step %d",
                              x->fn, t);
            goto done;
        }
        void *kbase = cur, *vbase = cur + (size_t)(B * Ls * Hkv * D) * es;
        for (int i = 0; i < n; i++) {
            const cp_item *it = &items[i];
            const flashc_attn_params ap = step_params(x, p, it->causal);
            const flashc_tensor q = rows4(p->q, it->q0, it->nq);
            const flashc_tensor o = rows4(p->o, it->q0, it->nq);
            const flashc_tensor dout = rows4(p->dout, it->q0, it->nq);
            const flashc_tensor lse = rows_lse(p->lse, it->q0, it->nq);
            const flashc_tensor k = contig4(kbase, dt, dev, B, Ls, Hkv, D, it->k0, it->nk);
            const flashc_tensor v = contig4(vbase, dt, dev, B, Ls, Hkv, Dv, it->k0, it->nk);
            flashc_tensor dq = contig4(dq_part, dt, dev, B, L, Hq, D, it->q0, it->nq);
            flashc_tensor dk = contig4(dk_part, dt, dev, B, Ls, Hkv, D, it->k0, it->nk);
            flashc_tensor dv = contig4(dv_part, dt, dev, B, Ls, Hkv, Dv, it->k0, it->nk);
            st = flashc_attn_bwd(&ap, &q, &k, &v, &o, &dout, &lse, &dq, &dk, &dv, NULL);
            if (st != FLASHC_OK) {
                st = step_fail(x, st, t, "attention backward");
                goto done;
            }
            CP_CHECK(x, x->dev->add(x, B, L, Hq * D, it->q0, it->nq, dq_acc, dq_part, dt));
            CP_CHECK(x, x->dev->add(x, B, Ls, Hkv * D, it->k0, it->nk, tk, dk_part, dt));
            CP_CHECK(x, x->dev->add(x, B, Ls, Hkv * Dv, it->k0, it->nk, tv, dv_part, dt));
        }
        if (t > 0) {
            /* the slice's dK/dV from the ranks before this one, posted at the previous step */
            CP_CHECK(x, x->comm->tr->wait(x, 1));
            CP_CHECK(x, x->dev->add(x, 1, 1, Ls * (int64_t)kv_elems_row, 0, 1, dkv[t & 1], dstep,
                                    FLASHC_F32));
        }
        if (N > 1)
            CP_CHECK(x, x->comm->tr->post(x, 1, dkv[t & 1], (size_t)Ls * kv_elems_row * sizeof(float),
                                          dkv[(t + 1) & 1], (size_t)Ln * kv_elems_row * sizeof(float)));
        if (t + 1 < N)
            CP_CHECK(x, x->comm->tr->wait(x, 0));
    }
    if (N > 1)
        CP_CHECK(x, x->comm->tr->wait(x, 1));
    {
        /* after N hops the own slice's dK/dV arrived in buffer N % 2; with N = 1 it never left
         * buffer 0, where step 0 wrote it */
        float *own = N == 1 ? dkv[0] : dkv[N & 1];
        CP_CHECK(x, x->dev->store(x, dq_acc, p->dq));
        CP_CHECK(x, x->dev->store(x, own, p->dk));
        CP_CHECK(x, x->dev->store(x, own + B * L * Hkv * D, p->dv));
    }
done:
    if (st != FLASHC_OK)
        x->comm->tr->fail(x);
    x->dev->free(x, c.base);
    return st;
}
