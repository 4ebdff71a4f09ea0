/* api_cp.c — the public context-parallel entry points (flashc.h, "Context parallelism"):
 * params, communicator handles, validation, then the ring (ring.c). */
#include "cp.h"
#include "sized_struct.h"

#include <stddef.h>
#include <string.h>

/* ---- params ---------------------------------------------------------------------------------- */

flashc_cp_params flashc_cp_params_default(void)
{
    flashc_cp_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.shard = FLASHC_CP_SHARD_CONTIGUOUS;
    return p;
}

static flashc_status read_params(const char *fn, const flashc_cp_params *in, flashc_cp_params *out)
{
    *out = flashc_cp_params_default();
    if (!in)
        return flashc__fail(FLASHC_ERR_NULL_POINTER,
                            "%s: params is NULL (it carries the communicator and seqlen)", fn);
    const size_t size = in->struct_size;
    if (size < offsetof(flashc_cp_params, shard))
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                            "%s: params.struct_size = %zu; set it to sizeof(flashc_cp_params) "
                            "(start from flashc_cp_params_default())", fn, size);
#define F(f) FLASHC__FIELD(flashc_cp_params, f)
    static const flashc__field fields[] = {
        F(struct_size), F(comm),          F(seqlen),        F(shard),
        F(causal),      F(has_softmax_scale), F(softmax_scale), F(num_threads),
        F(deterministic), F(serialize),   F(cuda_stream)};
#undef F
    FLASHC_TRY(flashc__read_sized(fn, "params", in, size, out, sizeof *out, fields,
                                  (int)(sizeof fields / sizeof fields[0])));
    out->struct_size = sizeof *out;
    if (!out->comm)
        return flashc__fail(FLASHC_ERR_NULL_POINTER, "%s: params.comm is NULL", fn);
    if ((unsigned)out->shard >= FLASHC_CP_SHARD_COUNT)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT, "%s: params.shard = %d is not a "
                            "flashc_cp_shard", fn, (int)out->shard);
    const int64_t N = out->comm->size, per = out->shard == FLASHC_CP_SHARD_ZIGZAG ? 2 : 1;
    if (out->seqlen < per * N || out->seqlen > FLASHC_MAX_ELEMENTS)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                            "%s: params.seqlen = %lld; it must be in %lld..%lld (%s over %lld "
                            "ranks: every rank holds at least one row)", fn,
                            (long long)out->seqlen, (long long)(per * N),
                            (long long)FLASHC_MAX_ELEMENTS,
                            per == 2 ? "2N chunks" : "N slices", (long long)N);
    if (out->has_softmax_scale && !isfinite(out->softmax_scale))
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT, "%s: softmax_scale = %g is not finite",
                            fn, (double)out->softmax_scale);
    if (out->num_threads < 0 || out->num_threads > FLASHC_MAX_THREADS)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT, "%s: num_threads = %d; 0..%d", fn,
                            out->num_threads, FLASHC_MAX_THREADS);
    return FLASHC_OK;
}

/* ---- communicators ----------------------------------------------------------------------------- */

void flashc_cp_comm_destroy(flashc_cp_comm *comm)
{
    if (comm)
        comm->tr->destroy(comm);
}

int flashc_cp_comm_rank(const flashc_cp_comm *comm) { return comm ? comm->rank : -1; }
int flashc_cp_comm_size(const flashc_cp_comm *comm) { return comm ? comm->size : -1; }

#ifdef FLASHC_HAVE_NCCL
int flashc_cp_nccl_available(void) { return cp_nccl_available(); }

flashc_status flashc_cp_nccl_unique_id(void *id, size_t bytes)
{
    if (!id)
        return flashc__fail(FLASHC_ERR_NULL_POINTER, "flashc_cp_nccl_unique_id: id is NULL");
    if (bytes < FLASHC_CP_NCCL_ID_BYTES)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                            "flashc_cp_nccl_unique_id: bytes = %zu < FLASHC_CP_NCCL_ID_BYTES (%d)",
                            bytes, FLASHC_CP_NCCL_ID_BYTES);
    return cp_nccl_unique_id(id, bytes);
}

flashc_status flashc_cp_comm_nccl_init(int nranks, int rank, const void *id, size_t bytes,
                                       flashc_cp_comm **comm)
{
    static const char fn[] = "flashc_cp_comm_nccl_init";
    if (!id || !comm)
        return flashc__fail(FLASHC_ERR_NULL_POINTER, "%s: %s is NULL", fn, id ? "comm" : "id");
    if (bytes != FLASHC_CP_NCCL_ID_BYTES)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT, "%s: bytes = %zu, expected %d", fn,
                            bytes, FLASHC_CP_NCCL_ID_BYTES);
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT, "%s: rank %d of %d", fn, rank, nranks);
    return cp_nccl_comm_create(NULL, 1, nranks, rank, id, comm);
}

flashc_status flashc_cp_comm_nccl_wrap(void *nccl_comm, flashc_cp_comm **comm)
{
    if (!nccl_comm || !comm)
        return flashc__fail(FLASHC_ERR_NULL_POINTER, "flashc_cp_comm_nccl_wrap: %s is NULL",
                            nccl_comm ? "comm" : "nccl_comm");
    return cp_nccl_comm_create(nccl_comm, 0, 0, 0, NULL, comm);
}
#else
static flashc_status no_nccl(const char *fn)
{
    return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                        "%s: this libflashc was built without NCCL (it needs CUDA and nccl.h at "
                        "build time: the CUDA toolkit's or Debian's libnccl-dev)", fn);
}
int flashc_cp_nccl_available(void) { return 0; }
flashc_status flashc_cp_nccl_unique_id(void *id, size_t bytes)
{
    return no_nccl("flashc_cp_nccl_unique_id");
}
flashc_status flashc_cp_comm_nccl_init(int nranks, int rank, const void *id, size_t bytes,
                                       flashc_cp_comm **comm)
{
    return no_nccl("flashc_cp_comm_nccl_init");
}
flashc_status flashc_cp_comm_nccl_wrap(void *nccl_comm, flashc_cp_comm **comm)
{
    return no_nccl("flashc_cp_comm_nccl_wrap");
}
#endif

/* ---- shards ------------------------------------------------------------------------------------ */

static int layout_ok(flashc_cp_shard shard, int64_t seqlen, int nranks, int rank)
{
    return (unsigned)shard < FLASHC_CP_SHARD_COUNT && seqlen >= 1 &&
           seqlen <= FLASHC_MAX_ELEMENTS && nranks >= 1 && nranks <= FLASHC_MAX_THREADS &&
           rank >= 0 && rank < nranks;
}

int64_t flashc_cp_local_len(flashc_cp_shard shard, int64_t seqlen, int nranks, int rank)
{
    if (!layout_ok(shard, seqlen, nranks, rank))
        return -1;
    const cp_layout l = {shard, seqlen, nranks};
    return cp_local_len(&l, rank);
}

int64_t flashc_cp_global_index(flashc_cp_shard shard, int64_t seqlen, int nranks, int rank,
                               int64_t local_row)
{
    if (!layout_ok(shard, seqlen, nranks, rank))
        return -1;
    const cp_layout l = {shard, seqlen, nranks};
    cp_piece pc[2];
    const int n = cp_pieces(&l, rank, pc);
    for (int i = 0; i < n; i++)
        if (local_row >= pc[i].local0 && local_row < pc[i].local0 + pc[i].len)
            return pc[i].global0 + (local_row - pc[i].local0) * pc[i].step;
    return -1;
}

/* ---- validation --------------------------------------------------------------------------------- */

static flashc_status check_dims(const char *fn, const char *name, const flashc_tensor *t,
                                const int64_t want[4])
{
    static const char *const dims[4] = {"batch", "local rows", "heads", "head dim"};
    for (int i = 0; i < 4; i++)
        if (t->shape[i] != want[i])
            return flashc__fail(FLASHC_ERR_INVALID_SHAPE, "%s: %s.shape[%d] (%s) = %lld, expected "
                                "%lld", fn, name, i, dims[i], (long long)t->shape[i],
                                (long long)want[i]);
    return FLASHC_OK;
}

static flashc_status check_lse(const char *fn, const char *name, const flashc_tensor *t,
                               const cp_problem *p, flashc_device dev)
{
    FLASHC_TRY(flashc__check_tensor(fn, name, t, 3));
    if (t->dtype != FLASHC_F32)
        return flashc__fail(FLASHC_ERR_DTYPE_MISMATCH, "%s: %s is %s; it must be float32", fn,
                            name, flashc__dtype_name(t->dtype));
    if (t->device != dev)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT, "%s: %s is on another device than q",
                            fn, name);
    if (t->shape[0] != p->B || t->shape[1] != p->Hq || t->shape[2] != p->L)
        return flashc__fail(FLASHC_ERR_INVALID_SHAPE, "%s: %s is (%lld, %lld, %lld), expected "
                            "(B, Hq, L) = (%lld, %lld, %lld)", fn, name, (long long)t->shape[0],
                            (long long)t->shape[1], (long long)t->shape[2], (long long)p->B,
                            (long long)p->Hq, (long long)p->L);
    return FLASHC_OK;
}

/* Everything but the outputs' overlap checks; fills p and the execution context. tensors[0..n)
 * are q-shaped (Hq, D), kv-shaped (Hkv, D) ... as named by kinds. */
static flashc_status validate(const char *fn, const flashc_cp_params *pp, int n,
                              const flashc_tensor *const *ts, const char *const *names,
                              const char *kinds, cp_problem *p, cp_exec *x)
{
    for (int i = 0; i < n; i++)
        FLASHC_TRY(flashc__check_tensor(fn, names[i], ts[i], 4));
    const flashc_tensor *q = ts[0];
    const flashc_cp_comm *c = pp->comm;
    memset(p, 0, sizeof *p);
    p->layout = (cp_layout){pp->shard, pp->seqlen, c->size};
    p->rank = c->rank;
    p->causal = pp->causal != 0;
    p->deterministic = pp->deterministic;
    p->dtype = q->dtype;
    p->B = q->shape[0];
    p->L = cp_local_len(&p->layout, c->rank);
    p->Hq = q->shape[2];
    p->D = q->shape[3];
    p->Hkv = ts[1]->shape[2];
    p->Dv = ts[2]->shape[3];
    if (q->shape[1] != p->L)
        return flashc__fail(FLASHC_ERR_INVALID_SHAPE,
                            "%s: q.shape[1] = %lld but rank %d of %d holds %lld rows of a %lld-token "
                            "sequence (%s shard; flashc_cp_local_len)", fn, (long long)q->shape[1],
                            c->rank, c->size, (long long)p->L, (long long)pp->seqlen,
                            pp->shard == FLASHC_CP_SHARD_ZIGZAG   ? "zigzag"
                            : pp->shard == FLASHC_CP_SHARD_STRIPED ? "striped"
                                                                   : "contiguous");
    if (p->Hq % p->Hkv != 0)
        return flashc__fail(FLASHC_ERR_HEAD_MISMATCH, "%s: Hq = %lld is not a multiple of Hkv = "
                            "%lld", fn, (long long)p->Hq, (long long)p->Hkv);
    for (int i = 0; i < n; i++) {
        const int64_t heads = kinds[i] == 'q' || kinds[i] == 'o' ? p->Hq : p->Hkv;
        const int64_t dim = kinds[i] == 'q' || kinds[i] == 'k' ? p->D : p->Dv;
        const int64_t want[4] = {p->B, p->L, heads, dim};
        FLASHC_TRY(check_dims(fn, names[i], ts[i], want));
        if (ts[i]->dtype != p->dtype)
            return flashc__fail(FLASHC_ERR_DTYPE_MISMATCH, "%s: %s is %s but q is %s", fn,
                                names[i], flashc__dtype_name(ts[i]->dtype),
                                flashc__dtype_name(p->dtype));
        if (ts[i]->device != q->device)
            return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT, "%s: %s is on another device than q",
                                fn, names[i]);
    }
    if (p->dtype != FLASHC_F32 && p->dtype != FLASHC_BF16 && p->dtype != FLASHC_F16)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED_DTYPE, "%s: %s storage is not supported "
                            "(float32, bfloat16, float16)", fn, flashc__dtype_name(p->dtype));
    p->scale = pp->has_softmax_scale ? pp->softmax_scale : 1.0f / sqrtf((float)p->D);

    memset(x, 0, sizeof *x);
    x->fn = fn;
    x->comm = pp->comm;
    x->stream = pp->cuda_stream;
    x->threads = flashc__threads(pp->num_threads);
    x->serialize = pp->serialize;
    if (q->device == FLASHC_DEVICE_CPU) {
        if (c->is_nccl)
            return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT, "%s: an NCCL communicator needs "
                                "CUDA tensors (host tensors run on a simulated communicator)", fn);
        x->dev = &cp_host_ops;
    } else {
#ifdef FLASHC_HAVE_CUDA
        x->dev = &cp_cuda_ops;
#else
        return flashc__fail(FLASHC_ERR_UNSUPPORTED, "%s: CUDA tensors, but this libflashc was "
                            "built without CUDA", fn);
#endif
    }
    return FLASHC_OK;
}

/* A refused call on a simulated communicator tells the peers, which would otherwise wait for
 * this rank forever (an NCCL peer blocks, as in any collective with a missing rank). */
static flashc_status refuse(const flashc_cp_params *pp, const char *fn, flashc_status st)
{
    if (pp->comm && !pp->comm->is_nccl) {
        cp_exec x = {.fn = fn, .comm = pp->comm, .dev = &cp_host_ops};
        pp->comm->tr->fail(&x);
    }
    return st;
}

flashc_status flashc_cp_attn_fwd(const flashc_cp_params *params, const flashc_tensor *q,
                                 const flashc_tensor *k, const flashc_tensor *v, flashc_tensor *o,
                                 flashc_tensor *lse)
{
    static const char fn[] = "flashc_cp_attn_fwd";
    flashc_cp_params pp;
    flashc_status st = read_params(fn, params, &pp);
    if (st != FLASHC_OK)
        return refuse(&pp, fn, st);
    const flashc_tensor *ts[4] = {q, k, v, o};
    static const char *const names[4] = {"q", "k", "v", "o"};
    cp_problem p;
    cp_exec x;
    st = validate(fn, &pp, 4, ts, names, "qkvo", &p, &x);
    if (st == FLASHC_OK && lse)
        st = check_lse(fn, "lse", lse, &p, q->device);
    if (st == FLASHC_OK) {
        const flashc_tensor *outs[2] = {o, lse};
        static const char *const onames[2] = {"o", "lse"};
        st = flashc__check_outputs(fn, 2, outs, onames, 3, ts, names);
    }
    if (st != FLASHC_OK)
        return refuse(&pp, fn, st);
    p.q = q, p.k = k, p.v = v, p.o_out = o, p.lse_out = lse;
    return cp_ring_fwd(&x, &p);
}

flashc_status flashc_cp_attn_bwd(const flashc_cp_params *params, const flashc_tensor *q,
                                 const flashc_tensor *k, const flashc_tensor *v,
                                 const flashc_tensor *o, const flashc_tensor *dout,
                                 const flashc_tensor *lse, flashc_tensor *dq, flashc_tensor *dk,
                                 flashc_tensor *dv)
{
    static const char fn[] = "flashc_cp_attn_bwd";
    flashc_cp_params pp;
    flashc_status st = read_params(fn, params, &pp);
    if (st != FLASHC_OK)
        return refuse(&pp, fn, st);
    const flashc_tensor *ts[8] = {q, k, v, o, dout, dq, dk, dv};
    static const char *const names[8] = {"q", "k", "v", "o", "dout", "dq", "dk", "dv"};
    cp_problem p;
    cp_exec x;
    st = validate(fn, &pp, 8, ts, names, "qkvoo" "qkv", &p, &x);
    if (st == FLASHC_OK)
        st = lse ? check_lse(fn, "lse", lse, &p, q->device)
                 : flashc__fail(FLASHC_ERR_NULL_POINTER, "%s: lse is NULL (the forward's)", fn);
    if (st == FLASHC_OK) {
        const flashc_tensor *ins[6] = {q, k, v, o, dout, lse};
        static const char *const inames[6] = {"q", "k", "v", "o", "dout", "lse"};
        st = flashc__check_outputs(fn, 3, ts + 5, names + 5, 6, ins, inames);
    }
    if (st != FLASHC_OK)
        return refuse(&pp, fn, st);
    p.q = q, p.k = k, p.v = v, p.o = o, p.dout = dout, p.lse = lse;
    p.dq = dq, p.dk = dk, p.dv = dv;
    return cp_ring_bwd(&x, &p);
}
