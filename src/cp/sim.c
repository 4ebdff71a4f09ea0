/* sim.c — the simulated transport: N ranks of one process, each a thread calling the
 * flashc_cp_* entry points with its own handle. An exchange is a rendezvous: post publishes
 * the send buffer in the next rank's inbox; wait copies the previous rank's published buffer
 * into the receive buffer, marks it taken and then waits until the next rank has taken ours
 * (so the caller may overwrite its send buffer afterwards). Copies use the data's device
 * (memcpy, or a device-to-device copy after a stream synchronisation for CUDA tensors). A rank
 * that fails sets a flag that every waiting rank sees, so a test with one bad rank ends with
 * errors instead of a hang. */
#include "cp.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct sim_slot {
    const void *data; /* published by the previous rank; NULL = empty */
    size_t bytes;
    int full;
} sim_slot;

typedef struct sim_rank {
    sim_slot inbox[CP_CHANNELS];
    void *recv[CP_CHANNELS]; /* this rank's posted receive */
    size_t recv_bytes[CP_CHANNELS];
    int posted[CP_CHANNELS];
} sim_rank;

typedef struct sim_world {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int nranks, alive, failed;
    sim_rank *ranks;
} sim_world;

static flashc_status peer_failed(cp_exec *x)
{
    return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                        "%s: rank %d: a peer rank of the simulated communicator failed (see its "
                        "error); the communicator cannot be used again", x->fn, x->comm->rank);
}

static flashc_status sim_post(cp_exec *x, int ch, const void *send, size_t send_bytes, void *recv,
                              size_t recv_bytes)
{
    sim_world *w = x->comm->impl;
    const int r = x->comm->rank, next = (r + 1) % w->nranks;
    FLASHC_TRY(x->dev->sync(x)); /* the sent data is complete before a peer copies it */
    pthread_mutex_lock(&w->mu);
    while (!w->failed && w->ranks[next].inbox[ch].full)
        pthread_cond_wait(&w->cv, &w->mu);
    if (w->failed) {
        pthread_mutex_unlock(&w->mu);
        return peer_failed(x);
    }
    w->ranks[next].inbox[ch] = (sim_slot){send, send_bytes, 1};
    w->ranks[r].recv[ch] = recv;
    w->ranks[r].recv_bytes[ch] = recv_bytes;
    w->ranks[r].posted[ch] = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return FLASHC_OK;
}

static flashc_status sim_wait(cp_exec *x, int ch)
{
    sim_world *w = x->comm->impl;
    const int r = x->comm->rank, next = (r + 1) % w->nranks;
    sim_rank *me = &w->ranks[r];
    /* the receive buffer may still be read by this rank's queued work (CUDA) */
    FLASHC_TRY(x->dev->sync(x));
    pthread_mutex_lock(&w->mu);
    while (!w->failed && !me->inbox[ch].full)
        pthread_cond_wait(&w->cv, &w->mu);
    if (w->failed) {
        pthread_mutex_unlock(&w->mu);
        return peer_failed(x);
    }
    const sim_slot in = me->inbox[ch];
    pthread_mutex_unlock(&w->mu);
    if (!me->posted[ch] || in.bytes != me->recv_bytes[ch]) {
        flashc_status st = flashc__fail(
            FLASHC_ERR_INVALID_ARGUMENT,
            "%s: rank %d expected %zu bytes from rank %d and got %zu: the ranks disagree on the "
            "problem (shapes, seqlen, shard or dtype)", x->fn, r, me->recv_bytes[ch],
            (r + w->nranks - 1) % w->nranks, in.bytes);
        x->comm->tr->fail(x);
        return st;
    }
    flashc_status st = x->dev->copy(x, me->recv[ch], in.data, in.bytes);
    pthread_mutex_lock(&w->mu);
    me->inbox[ch].full = 0;
    me->posted[ch] = 0;
    pthread_cond_broadcast(&w->cv);
    /* ours is taken before the caller may reuse its send buffer */
    while (!w->failed && w->ranks[next].inbox[ch].full)
        pthread_cond_wait(&w->cv, &w->mu);
    const int failed = w->failed;
    pthread_mutex_unlock(&w->mu);
    if (st != FLASHC_OK) {
        x->comm->tr->fail(x);
        return st;
    }
    return failed ? peer_failed(x) : FLASHC_OK;
}

static void sim_fail(cp_exec *x)
{
    sim_world *w = x->comm->impl;
    pthread_mutex_lock(&w->mu);
    w->failed = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void sim_destroy(flashc_cp_comm *c)
{
    sim_world *w = c->impl;
    pthread_mutex_lock(&w->mu);
    const int last = --w->alive == 0;
    pthread_mutex_unlock(&w->mu);
    if (last) {
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv);
        flashc__free(w->ranks);
        flashc__free(w);
    }
    flashc__free(c);
}

const cp_transport cp_sim_transport = {
    .post = sim_post, .wait = sim_wait, .fail = sim_fail, .destroy = sim_destroy};

flashc_status flashc_cp_comm_sim_create(int nranks, flashc_cp_comm **ranks)
{
    static const char fn[] = "flashc_cp_comm_sim_create";
    if (!ranks)
        return flashc__fail(FLASHC_ERR_NULL_POINTER, "%s: ranks is NULL", fn);
    if (nranks < 1 || nranks > FLASHC_MAX_THREADS)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT, "%s: nranks = %d; it must be in 1..%d",
                            fn, nranks, FLASHC_MAX_THREADS);
    sim_world *w = flashc__calloc(1, sizeof *w);
    sim_rank *rk = flashc__calloc((size_t)nranks, sizeof *rk);
    flashc_cp_comm **tmp = flashc__calloc((size_t)nranks, sizeof *tmp);
    int ok = w && rk && tmp;
    for (int i = 0; ok && i < nranks; i++)
        ok = (tmp[i] = flashc__calloc(1, sizeof **tmp)) != NULL;
    if (ok && pthread_mutex_init(&w->mu, NULL) != 0)
        ok = 0;
    else if (ok && pthread_cond_init(&w->cv, NULL) != 0) {
        pthread_mutex_destroy(&w->mu);
        ok = 0;
    }
    if (!ok) {
        for (int i = 0; tmp && i < nranks; i++)
            flashc__free(tmp[i]);
        flashc__free(tmp);
        flashc__free(rk);
        flashc__free(w);
        return flashc__fail(FLASHC_ERR_OUT_OF_MEMORY, "%s: cannot allocate %d ranks", fn, nranks);
    }
    w->nranks = w->alive = nranks;
    w->ranks = rk;
    for (int i = 0; i < nranks; i++) {
        *tmp[i] = (flashc_cp_comm){.rank = i, .size = nranks, .is_nccl = 0,
                                   .tr = &cp_sim_transport, .impl = w};
        ranks[i] = tmp[i];
    }
    flashc__free(tmp);
    return FLASHC_OK;
}
