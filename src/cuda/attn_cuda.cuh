/*
 * attn_cuda.cuh — what the CUDA attention dispatcher (attn.cu) shares with the kernel files.
 *
 * A kernel file exports a table of variants; each variant serves one dtype and a range of head
 * dims (an instance of head dim D_i takes every D in (D_{i-1}, D_i], padding inside the kernel)
 * from a minimum compute capability up, and answers for the rest through supports(). The
 * dispatcher (attn.cu) takes, for the device at hand, the variant of the highest minimum
 * capability that supports the problem and is picked by default (or the forced family), so a
 * Hopper kernel that does not take a shape hands it to the sm_80 one.
 */
#ifndef FLASHC_CUDA_ATTN_CUDA_CUH
#define FLASHC_CUDA_ATTN_CUDA_CUH

#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "internal.h"
}

/* The CUDA error contract (cuda_errors.cu): FLASHC_ERR_DEVICE when the application left an
 * error pending (which stays pending); FLASHC_ERR_DEVICE with CUDA's message for a failed call
 * of the library's own (then cleared); where ptr lives: memory of the current device or
 * managed memory, else FLASHC_ERR_INVALID_ARGUMENT naming host, pinned host or another device. */
flashc_status cuda_check_no_pending_error(const char *fn);
flashc_status cuda_device_error(const char *fn, const char *what, cudaError_t e);
flashc_status cuda_check_memory(const char *fn, const char *name, const void *ptr);

/* The forward's arguments as a kernel receives them (by value). Layouts as in flashc.h with a
 * unit feature stride: element (b, s, h, d) of q is q[b * sq[0] + s * sq[1] + h * sq[2] + d].
 * When vec16 is set, strides of q, k, v, o are multiples of 8 elements and the pointers 16-byte
 * aligned, so every row starts on a 16-byte boundary (kernels then load 16-byte chunks, the
 * last one of a row predicated down to the D % 8 elements that exist); otherwise only element
 * alignment holds and a kernel must load and store element by element. */
typedef struct attn_fwd_args {
    const void *q, *k, *v; /* (B, Sq, Hq, D), (B, Sk, Hkv, D), (B, Sk, Hkv, Dv) */
    void *o;               /* (B, Sq, Hq, Dv)                                    */
    float *lse;            /* (B, Hq, Sq) or NULL                                */
    int64_t sq[3], sk[3], sv[3], so[3]; /* batch, seq, head strides              */
    int64_t slse[3];                    /* batch, head, seq strides              */
    int B, Sq, Sk, Hq, group;           /* group = Hq / Hkv                      */
    int D;                              /* head dim, <= the variant's head_dim   */
    int Dv;                             /* v/o head dim, <= the variant's head_dim;
                                           != D on the mods instance and the sm90
                                           TMA-store kernels only (attn.cu)      */
    int vec16;                          /* rows 16-byte aligned (see above)      */
    int head_group;                     /* (batch, head) pairs scheduled together */
    float scale;                        /* softmax scale, > 0                    */
    float scale_log2;                   /* scale * log2(e): exp(x s) = 2^(x s')  */
    int causal;                         /* bottom-right aligned                  */
    int cshift;                         /* causal: the sm90 kernels' Q tiles aligned
                                           to the sequence's end (attn.cu,
                                           FLASHC_CUDA_SM90_CSHIFT; others ignore it) */
    int q_shift;                        /* ... the rows they move up by, set by the
                                           sm90 launch from cshift (0: at row 0) */
    /* Masks and modifiers of the v2 contract, read only by the "mods" instances (the sm80
     * kernel's, attn_fwd_sm80.cu, and the sm90 kernel's dense ones, attn_fwd_sm90.cu; the
     * dispatcher sends them nothing else, the plain instances never see them set). Varlen (cu_q != NULL): sq[0] = sk[0] = sv[0] = so[0] = slse[0] = 0, sequence
     * b owns q/o rows [cu_q[b], cu_q[b+1]) and k/v rows [cu_k[b], cu_k[b+1]); Sq, Sk are the
     * maxima (the launch), each sequence's lengths are read on the device. */
    const int32_t *cu_q, *cu_k;         /* (B + 1) device int32, or NULL (dense) */
    int total_q, total_k;               /* varlen rows of q/o and of k/v         */
    int wl, wr;                         /* key range [a_i - wl, a_i + wr], -1 = unbounded;
                                           causal is folded into wr = 0          */
    float softcap;                      /* > 0: s = softcap tanh(s / softcap)    */
    const float *alibi;                 /* slope of (b, h): alibi[b salibi[0] + h salibi[1]] */
    int64_t salibi[2];
    int mods;                           /* 1: launch the mods instance (these fields) */
    /* Last, so that the kernels that do not read it keep their parameter offsets (and code). */
    int skip_dead;                      /* the sm90 kernels on v7's shape: a consumer
                                           with no row in [0, Sq) issues no product, nor
                                           one with no key in its first block (attn.cu,
                                           FLASHC_CUDA_SM90_SKIPDEAD; others ignore it) */
} attn_fwd_args;

/* The rows the sm90 kernels' Q tiles of BM rows move up by when they are aligned to the
 * sequence's end (attn_fwd_args.q_shift; attn.cu's FLASHC_CUDA_SM90_CSHIFT): the partial tile's
 * missing rows, rounded down to whole 64-row boxes (the TMA store of O takes no box partly below
 * row 0: attn_fwd_sm90.cu's launch). Shared by the launch and the tile count of attn.cu. */
static inline int64_t sm90_q_shift(int64_t Sq, int64_t BM)
{
    return Sq > 0 ? ((Sq + BM - 1) / BM * BM - Sq) / 64 * 64 : 0;
}

typedef cudaError_t (*attn_fwd_launch_fn)(const attn_fwd_args *args, cudaStream_t stream);

struct attn_fwd_variant;
/* Whether variant v serves problem p, beyond the dtype, head-dim range and minimum capability
 * the dispatcher checks itself (alignment a copy engine needs, an exact chip, say). Cheap, host
 * only, no launch: it runs for every flashc_attn_fwd_supported too. The problem's operands are
 * already known to be device memory with unit feature stride; cc is the device's compute
 * capability (10 major + minor); vec16 as in attn_fwd_args. */
typedef int (*attn_fwd_supports_fn)(const struct attn_fwd_variant *v, const attn_problem *p,
                                    int cc, int vec16);

typedef struct attn_fwd_variant {
    const char *name;   /* attn_fwd_<dtype>_<arch>_d<D>_<Br>x<Bc>                        */
    const char *family; /* "sm80", "sm90": what FLASHC_CUDA_KERNEL names                 */
    flashc_dtype dtype; /* FLASHC_BF16 or FLASHC_F16                                      */
    int head_dim_min;   /* serves head dims [head_dim_min, head_dim] (padded up to head_dim) */
    int head_dim;
    int min_cc;         /* minimum compute capability, 10 * major + minor                */
    int block_q, block_k;
    int by_default;     /* picked without FLASHC_CUDA_KERNEL (0: only when forced) ...    */
    int default_min_seq; /* ... and then only when Sq and Sk are at least this           */
    attn_fwd_supports_fn supports; /* NULL: no condition beyond the fields above        */
    attn_fwd_launch_fn launch;
} attn_fwd_variant;

/* attn_fwd_sm80.cu */
extern const attn_fwd_variant attn_fwd_sm80_variants[];
extern const int attn_fwd_sm80_variant_count;

/* SMs of the current device, cached per device ordinal; 0 when the query fails (attn.cu) */
int cuda_sm_count(void);

/* A forward operand: unit feature stride, element-aligned, device memory (attn.cu; the
 * prefill and the KV-cache entry points) */
flashc_status cuda_check_operand(const char *fn, const char *name, const void *ptr,
                                 const int64_t *st);

/* q, k, v and o all with 16-byte aligned rows (pointers 16-byte aligned, batch / row / head
 * strides multiples of 8 elements): attn_fwd_args.vec16 (attn.cu) */
int cuda_rows_vec16(const attn_problem *p);

/* A varlen launch's rows of no sequence (past cu_q[B]): zeros in o, -inf in lse
 * (attn_fwd_common.cuh, attn_clear_unowned), for the sm90 kernel's varlen launch too: the one
 * instance per dtype lives there. Nothing when total_q = 0. */
cudaError_t attn_fwd_clear_unowned(const attn_fwd_args *a, flashc_dtype dt, cudaStream_t stream);

/* attn_fwd_sm90.cu */
extern const attn_fwd_variant attn_fwd_sm90_variants[];
extern const int attn_fwd_sm90_variant_count;
/* the masks-and-modifiers instances (attn.cu, mods_route): dense (family "sm90mods" and its
 * alternatives, FLASHC_CUDA_SM90_MODS) and varlen ("sm90vl", FLASHC_CUDA_SM90_VARLEN) */
extern const attn_fwd_variant attn_fwd_sm90_mods_variants[];
extern const int attn_fwd_sm90_mods_variant_count;
/* the values FLASHC_SM90_ABLATE takes for FLASHC_CUDA_KERNEL=sm90abl ("a|b|..."), for messages */
const char *attn_fwd_sm90_ablate_names(void);

/* attn_decode.cu: the forward problems attn_is_plain() excludes (KV caches, varlen, windows,
 * softcap, ALiBi, split requests, D != Dv) that neither the sm80 kernel's mods instance nor an
 * sm90 kernel takes (attn.cu, mods_route, dkdv_route), on one kernel with GQA packing and
 * split-KV. */
flashc_status cuda_attn_decode_supports(const attn_problem *p);
size_t cuda_attn_decode_workspace(const attn_problem *p);
flashc_status cuda_attn_decode(const attn_problem *p, flashc_attn_stats *stats);

/* ---- backward --------------------------------------------------------------------------- */

/* The backward's arguments as its kernels receive them (by value). Layouts as for the forward
 * (unit feature stride, 16-byte rows): q, o, dout, dq (B, Sq, Hq, D); k, v, dk, dv
 * (B, Sk, Hkv, D); lse (B, Hq, Sq) with strides slse. The workspace (see attn_bwd_workspace)
 * holds, contiguous and float32: dq_acc (B, Hq, Sq, D), the dQ accumulator of the main kernel,
 * and dsum (B, Hq, Sq), D = rowsum(dout * o); and int32 sem (B, Hq, ceil(Sq / block_q), split),
 * the per-(batch, head, Q block, column slice) turn counters of deterministic mode (block_q:
 * the variant's sem_block_q where it has one). */
typedef struct attn_bwd_args {
    const void *q, *k, *v, *o, *dout;
    void *dq, *dk, *dv;
    const float *lse;
    int64_t sq[3], sk[3], sv[3], so[3], sdo[3], sdq[3], sdk[3], sdv[3]; /* batch, seq, head */
    int64_t slse[3];                                                   /* batch, head, seq */
    float *dq_acc; /* (B, Hq, Sq, head_dim) float32 */
    float *dsum;   /* (B, Hq, Sq) float32    */
    int *sem;      /* (B, Hq, n_qblocks, split) int32, deterministic mode only */
    int B, Sq, Sk, Hq, Hkv, group; /* group = Hq / Hkv */
    /* The problem's head dims: q, k, dq, dk have D columns, v, o, dout, dv Dv. The variant's
     * head_dim (the kernels' template D, dq_acc's row length) may be wider (sm80: padded, the
     * columns past D / Dv zero in shared memory and never stored; sm90v3u's padded entries:
     * D == Dv, a multiple of 8, zero-filled by the copy engine); the other sm_90a kernels:
     * D == Dv == it. */
    int D, Dv;
    float scale;                   /* softmax scale, > 0    */
    float scale_log2;              /* scale * log2(e)       */
    int causal;                    /* bottom-right aligned (folded into wr = 0) */
    /* Key range of row i (a_i = i + Sk - Sq): keys [a_i - wl, a_i + wr], -1 = that side
     * unbounded (attn_key_range). The host clamps a bound no row can reach to -1, so that
     * diag + wr and diag - wl stay within (-2^30, 2^30). */
    int wl, wr;
    float softcap;                 /* > 0: s = softcap tanh(s / softcap); 0 = off */
    const float *alibi;            /* slope of (b, h) at alibi[b salibi[0] + h salibi[1]]; NULL = none */
    int64_t salibi[2];
    int deterministic;             /* dQ summed in K-block order, no float atomics */
    /* Varlen (the variant's launch_varlen only; dense launches never read these): sequence b
     * has q-side rows [cu_q[b], cu_q[b + 1]) and k-side rows [cu_k[b], cu_k[b + 1]) of the
     * packed (total, H, D) tensors (strides [0] = 0), device int32 arrays the host cannot
     * check, so kernels clamp them into [0, total] and the lengths to Sq, Sk (the maxima).
     * lse (Hq, total_q) with slse = {0, head, row}; the workspace holds dq_acc
     * (Hq, total_q, D), dsum (Hq, total_q) and sem (B, Hq, ceil(Sq / block_q), split). */
    const int32_t *cu_q, *cu_k;
    int total_q, total_k;
    /* (Last, so that the kernels that never read them keep their parameter offsets.)
     * Deterministic mode's planes (a variant with det_planes only; 1 elsewhere and in fast
     * mode): the K blocks' turns on a Q block are dealt round robin over `planes` chains, turn
     * t into plane t % planes as its turn t / planes; plane p's adds go to dq_acc + p dq_plane
     * and its counters are sem + p sem_plane; the postprocess sums the planes in order 0, 1,
     * ... (a fixed order: the bits depend on planes, never on the run). */
    int planes;
    int64_t dq_plane, sem_plane; /* floats, ints */
    /* FLASHC_CUDA_BWD_DET_FREE=1 (a diagnostic, attn_bwd.cu; the sm90h families): deterministic
     * mode's instructions (the counter's acquire and release, the adds' completion before it)
     * with every turn counting as taken: what the mode costs without its waiting. The result is
     * correct but NOT deterministic. 0 otherwise. */
    int det_free;
    /* 1: a __threadfence (fence.sc.gpu) before each deterministic turn's red.release.gpu
     * (bwd_release_turn, attn_bwd_common.cuh; every family), as before 2026-12-06; 0 (the
     * default): the release alone, which already orders the turn's adds. attn_bwd.cu sets it
     * from FLASHC_CUDA_BWD_DET_FENCE=1 (read at every call; a measurement knob). */
    int det_fence;
    /* Fast mode under an upper key bound, dense launches (attn_bwd_common.cuh's bwd_block_of):
     * the last order_tail heads of the grid walked K block by K block; 0: every head head by
     * head. attn_bwd.cu sets it (order_tail, FLASHC_CUDA_BWD_ORDER). */
    int order_tail;
    /* FLASHC_CUDA_BWD_NO_DQ=1 (a diagnostic, attn_bwd.cu; read at every call): the sm90h
     * families' exact plain kernels (attn_bwd_sm90h.cu's H_NODQ) and sm90v3u / sm90v3d's
     * (attn_bwd_sm90v3.cu's V3_NODQ, d 64 / 128) run in fast mode without dQ:
     * dQ comes out ZERO. For timing the rest of the step only; 0 otherwise. (Last: it
     * takes the struct's tail padding, so no other field moves.) */
    int no_dq;
} attn_bwd_args;

/* dQ of a dense backward at head dim D = 64 / 128 / 192 / 256 in a kernel of its own (attn_bwd_dq_sm90.cu,
 * compute capability 9.0; the split family sm90hs): reads q, k, v, dout, lse and a->dsum,
 * writes a->dq alone. T: __nv_bfloat16 or __half. */
template <typename T, int D>
cudaError_t attn_bwd_dq_sm90_launch(const attn_bwd_args *a, cudaStream_t stream);
/* Whether that kernel's grid takes a's problem (batch x heads on x, the Q blocks of 128 rows on
 * y <= 65535): the split launchers ask before their dK / dV kernel runs and fall back if not. */
bool attn_bwd_dq_sm90_fits(const attn_bwd_args *a);

/* Launches the three kernels (preprocess, main, postprocess) of one variant on stream. */
typedef cudaError_t (*attn_bwd_launch_fn)(const attn_bwd_args *args, cudaStream_t stream);

typedef struct attn_bwd_variant {
    const char *name;   /* attn_bwd_<dtype>_<arch>_d<D>_<Br>x<Bc>[_s<split>]               */
    const char *family; /* "sm80", "sm90": what FLASHC_CUDA_BWD_KERNEL names                */
    flashc_dtype dtype; /* FLASHC_BF16 or FLASHC_F16                                        */
    int head_dim;
    int min_cc;         /* compute capabilities served, 10 * major + minor: min_cc ...      */
    int max_cc;         /* ... to max_cc (sm_90a code runs on 9.0 only); 0: no upper bound  */
    int block_q, block_k;
    int split;          /* thread blocks per K/V block, each owning head_dim / split columns */
    int smem_bytes;     /* dynamic shared memory of the main kernel                         */
    attn_bwd_launch_fn launch;
    attn_bwd_launch_fn launch_varlen; /* the same kernels over packed rows; NULL: dense only */
    int opt_in;         /* 1: only when FLASHC_CUDA_BWD_KERNEL names the family (a variant
                           not yet shown faster on a device run); 0 (tables that omit it): also
                           the dispatcher's choice */
    int head_dim_lo;    /* > 0: serves every max(D, Dv) in [head_dim_lo, head_dim], padded
                           (sm80, sm90v3u's padded entries); 0 (tables that omit it): D == Dv
                           == head_dim */
    int any_dims;       /* with head_dim_lo > 0: 1 every D, Dv (Dk != Dv too) (sm80); 0
                           (tables that omit it): D == Dv, a multiple of 8 (sm90v3u: one
                           tensor-map width, dK, dV stores cut at 8-column tiles) */
    int sem_block_q;    /* > 0: deterministic mode's turn counters are per this many query
                           rows (sm90h2: 64, one per consumer warpgroup's half of its 128-row
                           Q block, so that sm80's 64-row fallback fits the same workspace);
                           0 (tables that omit it): per block_q rows */
    int det_planes;     /* 1: the kernel takes attn_bwd_args.planes > 1 in deterministic mode
                           (FLASHC_CUDA_BWD_DET_PLANES, attn_bwd.cu); 0 (tables that omit it):
                           one plane */
    int late;           /* 1: deterministic mode only (sm90hl, sm90h2l: a Q block's dQ adds
                           completed once and its turn released a Q block late; fast mode is
                           served by the base family's entry, the same kernel): attn_bwd.cu's
                           pick skips it in fast mode and det_planes has its own default for
                           it; 0 (tables that omit it): both modes */
} attn_bwd_variant;

/* attn_bwd_sm80.cu */
extern const attn_bwd_variant attn_bwd_sm80_variants[];
extern const int attn_bwd_sm80_variant_count;

/* attn_bwd_sm90.cu */
extern const attn_bwd_variant attn_bwd_sm90_variants[];
extern const int attn_bwd_sm90_variant_count;

/* attn_bwd_sm90v2.cu */
extern const attn_bwd_variant attn_bwd_sm90v2_variants[];
extern const int attn_bwd_sm90v2_variant_count;

/* attn_bwd_sm90v3.cu */
extern const attn_bwd_variant attn_bwd_sm90v3_variants[];
extern const int attn_bwd_sm90v3_variant_count;

/* attn_bwd_sm90h.cu */
extern const attn_bwd_variant attn_bwd_sm90h_variants[];
extern const int attn_bwd_sm90h_variant_count;

#endif /* FLASHC_CUDA_ATTN_CUDA_CUH */
