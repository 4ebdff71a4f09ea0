/*
 * cp_nccl.cu — the NCCL transport of the context-parallel ring (cp_transport of cp.h).
 *
 * Built only when CMake found nccl.h (and CUDA); libnccl.so.2 itself is opened at run time
 * (dlopen, FLASHC_NCCL_LIBRARY to name another file), so libflashc loads and runs its CPU and
 * single-GPU paths on hosts without NCCL, and a process that already loaded NCCL (PyTorch)
 * shares that copy: its ncclComm_t handles are then valid here.
 *
 * Each exchange is one ncclGroupStart / ncclSend(to rank + 1) / ncclRecv(from rank - 1) /
 * ncclGroupEnd, on the handle's own stream: an event recorded on the caller's stream (the send
 * buffer written, the receive buffer's last reader done) is waited on by the comm stream
 * before the group, and an event after it is waited on by the caller's stream in wait(). So the
 * transfer of step t + 1's slice runs while step t's kernels do, and everything stays ordered
 * with the caller's stream; nothing synchronises with the host. params.serialize puts the
 * groups on the caller's stream itself instead (no overlap). The library never sets NCCL's
 * environment; the scripts run with NCCL_NVLS_ENABLE=0 (NVLink SHARP/multicast off) and nothing
 * here calls cuMulticastCreate.
 */
#include "../cuda/attn_cuda.cuh"

#include <dlfcn.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "cp.h"
/* (internal.h declares it only for the C objects, which see FLASHC_HAVE_CUDA) */
int cuda_device_available(void);
}

namespace {

struct nccl_api {
    decltype(&ncclGetUniqueId) get_unique_id;
    decltype(&ncclCommInitRank) comm_init_rank;
    decltype(&ncclCommDestroy) comm_destroy;
    decltype(&ncclCommCount) comm_count;
    decltype(&ncclCommUserRank) comm_user_rank;
    decltype(&ncclSend) send;
    decltype(&ncclRecv) recv;
    decltype(&ncclGroupStart) group_start;
    decltype(&ncclGroupEnd) group_end;
    decltype(&ncclGetErrorString) error_string;
    int loaded;
    char why[256];
};

nccl_api api;
pthread_once_t api_once = PTHREAD_ONCE_INIT;

void load_api()
{
    const char *env = getenv("FLASHC_NCCL_LIBRARY");
    const char *name = env && *env ? env : "libnccl.so.2";
    void *h = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        snprintf(api.why, sizeof api.why, "cannot load %s (%s)", name, dlerror());
        return;
    }
#define SYM(field, sym)                                                                            \
    if (!(api.field = (decltype(api.field))dlsym(h, #sym))) {                                      \
        snprintf(api.why, sizeof api.why, "%s has no %s", name, #sym);                             \
        return;                                                                                    \
    }
    SYM(get_unique_id, ncclGetUniqueId)
    SYM(comm_init_rank, ncclCommInitRank)
    SYM(comm_destroy, ncclCommDestroy)
    SYM(comm_count, ncclCommCount)
    SYM(comm_user_rank, ncclCommUserRank)
    SYM(send, ncclSend)
    SYM(recv, ncclRecv)
    SYM(group_start, ncclGroupStart)
    SYM(group_end, ncclGroupEnd)
    SYM(error_string, ncclGetErrorString)
#undef SYM
    api.loaded = 1;
}

flashc_status need_api(const char *fn)
{
    pthread_once(&api_once, load_api);
    if (!api.loaded)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED, "%s: NCCL is not available: %s", fn, api.why);
    return FLASHC_OK;
}

flashc_status nccl_fail(const char *fn, const char *what, ncclResult_t r)
{
    return flashc__fail(FLASHC_ERR_DEVICE, "%s: %s failed: %s (ncclResult_t %d)", fn, what,
                        api.error_string ? api.error_string(r) : "?", (int)r);
}

struct nccl_impl {
    ncclComm_t comm;
    int owned;
    cudaStream_t cs;          /* the transfers' stream                         */
    cudaEvent_t ready;        /* caller's stream -> comm stream                 */
    cudaEvent_t done[CP_CHANNELS]; /* comm stream -> caller's stream, per channel */
};

flashc_status np_post(cp_exec *x, int ch, const void *send, size_t send_bytes, void *recv,
                      size_t recv_bytes)
{
    nccl_impl *m = (nccl_impl *)x->comm->impl;
    const int N = x->comm->size, r = x->comm->rank;
    cudaStream_t caller = (cudaStream_t)x->stream, cs = x->serialize ? caller : m->cs;
    cudaError_t e;
    if (!x->serialize) {
        if ((e = cudaEventRecord(m->ready, caller)) != cudaSuccess ||
            (e = cudaStreamWaitEvent(cs, m->ready, 0)) != cudaSuccess)
            return cuda_device_error(x->fn, "ordering the NCCL stream after the compute stream", e);
    }
    ncclResult_t res = api.group_start();
    if (res == ncclSuccess && send_bytes)
        res = api.send(send, send_bytes, ncclUint8, (r + 1) % N, m->comm, cs);
    if (res == ncclSuccess && recv_bytes)
        res = api.recv(recv, recv_bytes, ncclUint8, (r + N - 1) % N, m->comm, cs);
    const ncclResult_t end = api.group_end();
    if (res != ncclSuccess)
        return nccl_fail(x->fn, "ncclSend/ncclRecv", res);
    if (end != ncclSuccess)
        return nccl_fail(x->fn, "ncclGroupEnd", end);
    if (!x->serialize && (e = cudaEventRecord(m->done[ch], cs)) != cudaSuccess)
        return cuda_device_error(x->fn, "cudaEventRecord", e);
    return FLASHC_OK;
}

flashc_status np_wait(cp_exec *x, int ch)
{
    nccl_impl *m = (nccl_impl *)x->comm->impl;
    if (x->serialize)
        return FLASHC_OK; /* the transfers are on the caller's stream already */
    const cudaError_t e = cudaStreamWaitEvent((cudaStream_t)x->stream, m->done[ch], 0);
    return e == cudaSuccess ? FLASHC_OK : cuda_device_error(x->fn, "cudaStreamWaitEvent", e);
}

/* NCCL has no way to release peers blocked in a transfer short of ncclCommAbort, which would
 * destroy the caller's communicator: a failing rank just returns (see flashc.h). */
void np_fail(cp_exec *x) {}

void np_destroy(flashc_cp_comm *c)
{
    nccl_impl *m = (nccl_impl *)c->impl;
    if (m->cs)
        (void)cudaStreamDestroy(m->cs);
    if (m->ready)
        (void)cudaEventDestroy(m->ready);
    for (int i = 0; i < CP_CHANNELS; i++)
        if (m->done[i])
            (void)cudaEventDestroy(m->done[i]);
    if (m->owned && m->comm)
        (void)api.comm_destroy(m->comm);
    flashc__free(m);
    flashc__free(c);
}

const cp_transport nccl_transport = {np_post, np_wait, np_fail, np_destroy};

} // namespace

extern "C" int cp_nccl_available(void)
{
    pthread_once(&api_once, load_api);
    return api.loaded && cuda_device_available();
}

extern "C" flashc_status cp_nccl_unique_id(void *id, size_t bytes)
{
    static const char fn[] = "flashc_cp_nccl_unique_id";
    FLASHC_TRY(need_api(fn));
    ncclUniqueId u;
    const ncclResult_t r = api.get_unique_id(&u);
    if (r != ncclSuccess)
        return nccl_fail(fn, "ncclGetUniqueId", r);
    static_assert(sizeof u == FLASHC_CP_NCCL_ID_BYTES, "ncclUniqueId is 128 bytes");
    memcpy(id, &u, sizeof u);
    return FLASHC_OK;
}

extern "C" flashc_status cp_nccl_comm_create(void *nccl_comm, int owned, int nranks, int rank,
                                             const void *id, flashc_cp_comm **out)
{
    const char *fn = nccl_comm ? "flashc_cp_comm_nccl_wrap" : "flashc_cp_comm_nccl_init";
    FLASHC_TRY(need_api(fn));
    FLASHC_TRY(cuda_check_no_pending_error(fn));
    nccl_impl *m = (nccl_impl *)flashc__calloc(1, sizeof *m);
    flashc_cp_comm *c = (flashc_cp_comm *)flashc__calloc(1, sizeof *c);
    if (!m || !c) {
        flashc__free(m), flashc__free(c);
        return flashc__fail(FLASHC_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    flashc_status st = FLASHC_OK;
    ncclResult_t r = ncclSuccess;
    if (nccl_comm) {
        m->comm = (ncclComm_t)nccl_comm;
    } else {
        ncclUniqueId u;
        memcpy(&u, id, sizeof u);
        r = api.comm_init_rank(&m->comm, nranks, u, rank);
        if (r != ncclSuccess)
            st = nccl_fail(fn, "ncclCommInitRank", r);
        m->owned = r == ncclSuccess;
    }
    int n = 0, me = 0;
    if (st == FLASHC_OK && (r = api.comm_count(m->comm, &n)) != ncclSuccess)
        st = nccl_fail(fn, "ncclCommCount", r);
    if (st == FLASHC_OK && (r = api.comm_user_rank(m->comm, &me)) != ncclSuccess)
        st = nccl_fail(fn, "ncclCommUserRank", r);
    cudaError_t e = cudaSuccess;
    if (st == FLASHC_OK) {
        if ((e = cudaStreamCreateWithFlags(&m->cs, cudaStreamNonBlocking)) != cudaSuccess ||
            (e = cudaEventCreateWithFlags(&m->ready, cudaEventDisableTiming)) != cudaSuccess)
            st = cuda_device_error(fn, "creating the NCCL stream", e);
        for (int i = 0; st == FLASHC_OK && i < CP_CHANNELS; i++)
            if ((e = cudaEventCreateWithFlags(&m->done[i], cudaEventDisableTiming)) != cudaSuccess)
                st = cuda_device_error(fn, "cudaEventCreateWithFlags", e);
    }
    *c = flashc_cp_comm{me, n, 1, &nccl_transport, m};
    if (st != FLASHC_OK) {
        np_destroy(c);
        return st;
    }
    *out = c;
    return FLASHC_OK;
}
