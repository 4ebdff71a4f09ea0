/*
 * cp.h — context parallelism (ring attention) inside the library: the schedule, the ring
 * driver and the two interfaces it runs on.
 *
 *   schedule.c   which K/V rows each rank attends to at each ring step, with which mask: a pure
 *                function of (shard, seqlen, N, rank, step, causal), tested on its own
 *   ring.c       the forward and backward rings of one rank, written once against
 *   cp_transport the ring's point-to-point exchange: simulated (sim.c, ranks as threads of one
 *                process) or NCCL (cp_nccl.cu)
 *   cp_dev_ops   the few tensor ops besides attention (pack, merge, add, store) on the data's
 *                device: host (host_ops.c) or CUDA (src/cuda/cp_ops.cu)
 *   api_cp.c     the public entry points: validation, then ring.c
 */
#ifndef FLASHC_CP_H
#define FLASHC_CP_H

#include "internal.h"

/* ---- the schedule (pure) --------------------------------------------------------------------- */

typedef struct cp_layout {
    flashc_cp_shard shard;
    int64_t seqlen; /* S, tokens over all ranks */
    int nranks;     /* N */
} cp_layout;

/* A run of a rank's local rows that holds consecutive global tokens (contiguous, zigzag), or,
 * for striped, all of its rows (global token = global0 + i * step). */
typedef struct cp_piece {
    int64_t local0, global0, len, step;
} cp_piece;

/* One attention call of a ring step: local q rows [q0, q0 + nq) of this rank against local
 * K/V rows [k0, k0 + nk) of the source rank, with flashc's causal mask (bottom-right: row i
 * sees key j iff j <= i + nk - nq) or none. Never empty. */
typedef struct cp_item {
    int64_t q0, nq, k0, nk;
    int causal;
} cp_item;

#define CP_MAX_ITEMS 4

int64_t cp_local_len(const cp_layout *l, int rank);
int cp_pieces(const cp_layout *l, int rank, cp_piece out[2]); /* count; empty pieces dropped */
/* The rank whose K/V slice `rank` holds at ring step `step` (0 <= step < N): rank - step mod N. */
int cp_source(const cp_layout *l, int rank, int step);
/* The calls of rank at step: count (0..CP_MAX_ITEMS) into items; -1 if the shard produced a
 * chunk pair the masks cannot express (cannot happen for the three shards; tests check). */
int cp_schedule(const cp_layout *l, int causal, int rank, int step, cp_item items[CP_MAX_ITEMS]);

/* ---- per-call execution context ------------------------------------------------------------ */

typedef struct cp_dev_ops cp_dev_ops;
typedef struct cp_transport cp_transport;

typedef struct cp_exec {
    const char *fn;          /* entry point name, for messages */
    const cp_dev_ops *dev;
    flashc_cp_comm *comm;
    void *stream;            /* the caller's cudaStream_t (CUDA) */
    int threads;
    int serialize;
} cp_exec;

/* Tensor ops on the data's device. Buffers named "contiguous (B, L, W)" are row-major with
 * W = heads * head dim; "rows [r0, r0 + n)" selects the same rows of every batch element. */
struct cp_dev_ops {
    flashc_device device;
    /* Before anything is launched: CUDA refuses a call while the application has an error
     * pending (the CUDA error contract, src/cuda/cuda_errors.cu), so that error stays its own. */
    flashc_status (*begin)(cp_exec *x);
    void *(*alloc)(cp_exec *x, size_t bytes); /* NULL on failure (message set) */
    void (*free)(cp_exec *x, void *ptr);
    /* dst (contiguous, src's shape) = src (a validated 4-d view, any strides) */
    flashc_status (*pack)(cp_exec *x, const flashc_tensor *src, void *dst);
    flashc_status (*fill)(cp_exec *x, float *dst, int64_t n, float value);
    /* Merge a partial state into the float32 accumulator, rows [r0, r0 + n):
     * o_acc (B, L, H*Dv) f32, lse_acc (B, H, L) f32, o_part (B, L, H*Dv) of dtype, lse_part
     * (B, H, L) f32. A part with lse = -inf adds nothing. */
    flashc_status (*merge)(cp_exec *x, int64_t B, int64_t L, int64_t H, int64_t Dv, int64_t r0,
                           int64_t n, float *o_acc, float *lse_acc, const void *o_part,
                           flashc_dtype dt, const float *lse_part);
    /* acc (B, L, W) f32 += part (B, L, W) of dtype, rows [r0, r0 + n) */
    flashc_status (*add)(cp_exec *x, int64_t B, int64_t L, int64_t W, int64_t r0, int64_t n,
                         float *acc, const void *part, flashc_dtype dt);
    /* out (a validated 4-d view (B, L, H, D) of its dtype) = acc contiguous (B, L, H*D) */
    flashc_status (*store)(cp_exec *x, const float *acc, flashc_tensor *out);
    /* out (a validated 3-d float32 view (B, H, L)) = acc contiguous (B, H, L) */
    flashc_status (*store_lse)(cp_exec *x, const float *acc, flashc_tensor *out);
    /* Everything enqueued so far by this rank has completed (the simulated transport's copies
     * then read finished data). */
    flashc_status (*sync)(cp_exec *x);
    /* Synchronous copy of bytes between two buffers of this device. */
    flashc_status (*copy)(cp_exec *x, void *dst, const void *src, size_t bytes);
};

extern const cp_dev_ops cp_host_ops;
#ifdef FLASHC_HAVE_CUDA
extern const cp_dev_ops cp_cuda_ops;
#endif

/* ---- transports ----------------------------------------------------------------------------- */

/* Two independent channels: 0 carries K/V, 1 the travelling dK/dV of the backward. */
#define CP_CHANNELS 2

struct cp_transport {
    /* Starts one exchange on channel ch: send_bytes of send to rank + 1 and recv_bytes from
     * rank - 1 into recv (both mod N). send must stay unchanged and recv unread until wait. */
    flashc_status (*post)(cp_exec *x, int ch, const void *send, size_t send_bytes, void *recv,
                          size_t recv_bytes);
    flashc_status (*wait)(cp_exec *x, int ch);
    /* This rank gives up the call (after an error): peers waiting on it return an error. */
    void (*fail)(cp_exec *x);
    void (*destroy)(flashc_cp_comm *c);
};

struct flashc_cp_comm {
    int rank, size;
    int is_nccl;
    const cp_transport *tr;
    void *impl;
};

extern const cp_transport cp_sim_transport;

#ifdef FLASHC_HAVE_NCCL
/* cp_nccl.cu */
int cp_nccl_available(void);
flashc_status cp_nccl_unique_id(void *id, size_t bytes);
flashc_status cp_nccl_comm_create(void *nccl_comm, int owned, int nranks, int rank,
                                  const void *id, flashc_cp_comm **out);
#endif

/* ---- the ring (ring.c) ------------------------------------------------------------------------- */

typedef struct cp_problem {
    cp_layout layout;
    int rank;
    int causal;
    int deterministic;
    float scale;
    flashc_dtype dtype;
    int64_t B, L, Hq, Hkv, D, Dv; /* L: this rank's rows */
    const flashc_tensor *q, *k, *v, *o, *dout, *lse;
    flashc_tensor *o_out, *lse_out, *dq, *dk, *dv;
} cp_problem;

flashc_status cp_ring_fwd(cp_exec *x, const cp_problem *p);
flashc_status cp_ring_bwd(cp_exec *x, const cp_problem *p);

#endif /* FLASHC_CP_H */
