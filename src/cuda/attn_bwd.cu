/*
 * attn_bwd.cu — the CUDA backend's backward dispatch: "is this supported?", the workspace size,
 * variant choice, workspace allocation and launch. The kernels live one family per file
 * (attn_bwd_sm80.cu, ...), each exporting a table of variants; this file knows all tables.
 *
 * Workspace (float32 dQ accumulator, D = rowsum(dO o), deterministic mode's turn counters): the
 * caller's params.workspace (any alignment: aligned here; the core checked its size against
 * cuda_attn_bwd_workspace()), otherwise the library's scratch pool (scratch.cu) on the call's
 * stream. Nothing here synchronises with the host,
 * so a call can be captured in a CUDA graph (with a given workspace, or with the graph's own
 * memory nodes for the async allocation).
 */
#include "attn_cuda.cuh"
#include "scratch.cuh"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char FN[] = "flashc_attn_bwd";

/* Every variant table, lowest architecture first. A Hopper kernel adds its table here. */
static const struct {
    const attn_bwd_variant *v;
    const int *count;
} bwd_tables[] = {
    {attn_bwd_sm80_variants, &attn_bwd_sm80_variant_count},
    {attn_bwd_sm90_variants, &attn_bwd_sm90_variant_count},
    {attn_bwd_sm90v2_variants, &attn_bwd_sm90v2_variant_count},
    {attn_bwd_sm90v3_variants, &attn_bwd_sm90v3_variant_count},
    {attn_bwd_sm90h_variants, &attn_bwd_sm90h_variant_count},
};

/* FLASHC_CUDA_BWD_KERNEL: "" or unset (the dispatcher's choice) or a family ("sm80", "sm90",
 * "sm90v2", "sm90v2e", "sm90v2s", "sm90v2sa", "sm90v2sd", "sm90v3", "sm90v3t", "sm90v3q",
 * "sm90v3w", "sm90v3wg" (sm90v3w with its deterministic mode in groups of heads, the same
 * bits), "sm90v3u" (the default at d 128, and at d 64 until sm90v3d, on compute capability
 * 9.0: sm90v3wg with an unmasked softmax loop for tiles without masked keys, the same bits;
 * its padded entries, the default too, take D == Dv, a multiple of 8, in 40-56 and 72-120),
 * "sm90v3e" (sm90v3u with dV issued before the consumers' meeting, the same bits; sm90v3e2,
 * sm90v3s and sm90v3es were measured on the H200 on 2026-12-04, 0.78-1.01x sm90v3u, and
 * removed), "sm90v3d" (d 64:
 * sm90v3u whose deterministic mode pipelines the writer warps' dQ adds, the same bits; the
 * default at d 64 since the device run of 2026-12-06, helper bwd21), "sm80p" (above d 128:
 * the mma.sync backward without sm80's recomputation over two column slices, the same bits;
 * any compute capability >= 8.0 whose shared memory holds it; the default there since the H200
 * run of 2026-12-04 evening, "sm80" forcing the split instances), "sm90h" (above d 128 on
 * compute capability 9.0: the wgmma backward of attn_bwd_sm90h.cu, d 192 and d 256 and
 * D == Dv, a multiple of 8, in 136..248 padded into them; its d 256 kernel the default at
 * d 256 since the H200 run of 2026-12-05, the rest opt-in), "sm90h2" (sm90h's d 192 kernel
 * in 128 x 64 steps, helper bwd22: d 192 and 136..184 padded; the d 192 default since the
 * device run of 2026-12-06, the padded entries opt-in), "sm90h2e" (sm90h2 with dV / dK issued
 * before dQ, opt-in), "sm90h2l" and "sm90hl" (sm90h2's d 192 and sm90h's d 256 kernels whose
 * deterministic mode completes a Q block's dQ adds once and releases its turn a Q block late,
 * the same bits, exact entries, deterministic mode only (the variant's late: fast mode takes
 * the base family's entry, the same kernel); the deterministic default at d 256 / 192 since
 * the H100 run of 2026-12-06, late morning, with their own plane counts, det_planes), "sm90hs"
 * (the split backward: the fused sm90h / sm90h2 kernels without their dQ path, then dQ by
 * attn_bwd_dq_sm90.cu's kernel of its own, deterministic by construction; the default at
 * d 256 and d 192 in both modes, and at the padded head dims 136..248 (multiples of 8, D == Dv),
 * since the H100 runs of 2026-12-07, late morning and midday; at d 128 / 64 opt-in); an
 * opt_in variant is
 * taken only this way) preferred where it serves the problem; a problem it does not serve gets
 * the dispatcher's choice, so one test run covers every head dim. Read at every call (not
 * cached, unlike the forward's FLASHC_CUDA_KERNEL, which refuses instead), so the bench can
 * time both families in one process. The caller must not change the environment while calls
 * are in flight. */
static const char *preferred_family(void)
{
    const char *e = getenv("FLASHC_CUDA_BWD_KERNEL");
    return e ? e : "";
}

/* Compute capability (10 * major + minor) and opt-in shared memory per block of the current
 * device, or -1 with a message. */
static int bwd_device(flashc_status *st, int *smem_optin)
{
    int dev = 0, major = 0, minor = 0;
    cudaError_t err = cudaGetDevice(&dev);
    if (err == cudaSuccess)
        err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    if (err == cudaSuccess)
        err = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    if (err == cudaSuccess)
        err = cudaDeviceGetAttribute(smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    if (err != cudaSuccess) {
        *st = cuda_device_error(FN, "querying the current CUDA device", err);
        return -1;
    }
    return 10 * major + minor;
}

/* Whether variant v serves p's head dims: a padded variant (head_dim_lo > 0) every
 * max(D, Dv) in [head_dim_lo, head_dim] (v->any_dims, sm80) or those with D == Dv, a
 * multiple of 8 (sm90v3u's), an exact one D == Dv == head_dim. */
static bool serves_dims(const attn_bwd_variant *v, const attn_problem *p)
{
    const int64_t w = p->D > p->Dv ? p->D : p->Dv;
    return v->head_dim_lo > 0 ? v->head_dim_lo <= w && w <= v->head_dim &&
                                    (v->any_dims || (p->D == p->Dv && p->D % 8 == 0))
                              : p->D == v->head_dim && p->Dv == v->head_dim;
}

/* The variant for p's dtype and head dims with the highest architecture the device reaches and
 * shared memory it has; among equals the first in its table (each table lists its default
 * tiles first). Varlen takes only variants with a launch_varlen (the sm80 family's default
 * tiles: the Hopper kernel is dense only, so varlen runs on mma.sync there too). params.block_q / block_k, when nonzero, select among the tiles a table has
 * (the ladder in bench/RESULTS.md compares them); FLASHC_CUDA_BWD_KERNEL prefers a family. */
static const attn_bwd_variant *pick_in(const attn_problem *p, int cc, int smem_optin,
                                       const char *family)
{
    const attn_bwd_variant *best = NULL;
    for (size_t t = 0; t < sizeof bwd_tables / sizeof bwd_tables[0]; t++)
        for (int i = 0; i < *bwd_tables[t].count; i++) {
            const attn_bwd_variant *v = &bwd_tables[t].v[i];
            if (v->dtype == p->dtype && serves_dims(v, p) && v->min_cc <= cc &&
                (p->deterministic || !v->late) &&
                (!v->max_cc || cc <= v->max_cc) && v->smem_bytes <= smem_optin &&
                (!family ? !v->opt_in : strcmp(v->family, family) == 0) &&
                (!p->br || p->br == v->block_q) && (!p->bc || p->bc == v->block_k) &&
                (p->layout != ATTN_VARLEN || v->launch_varlen) &&
                (!best || v->min_cc > best->min_cc))
                best = v;
        }
    return best;
}

static const attn_bwd_variant *pick(const attn_problem *p, int cc, int smem_optin)
{
    const char *f = preferred_family();
    const attn_bwd_variant *v = f[0] ? pick_in(p, cc, smem_optin, f) : NULL;
    return v ? v : pick_in(p, cc, smem_optin, NULL);
}

static flashc_status is_device_memory(const char *name, const void *ptr)
{
    return cuda_check_memory(FN, name, ptr);
}

/* A 4-d (B, S, H, D) operand: device memory, unit feature stride, 16-byte rows. */
static flashc_status check_operand(const char *name, const void *ptr, const int64_t *st)
{
    if (st[3] != 1)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "%s: the CUDA backend needs %s.stride[3] == 1 (got %lld)", FN, name,
                            (long long)st[3]);
    if ((uintptr_t)ptr % 16 != 0 || st[0] % 8 != 0 || st[1] % 8 != 0 || st[2] % 8 != 0)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "%s: the CUDA backend loads 16-byte chunks: %s must be 16-byte aligned "
                            "with strides that are multiples of 8 elements (got %lld, %lld, %lld)",
                            FN, name, (long long)st[0], (long long)st[1], (long long)st[2]);
    return is_device_memory(name, ptr);
}

static int64_t align256(int64_t x) { return (x + 255) / 256 * 256; }

/* Query rows of the float32 workspace: B Hq Sq, or Hq total_q over varlen's packed rows. */
static int64_t acc_rows(const attn_problem *p)
{
    return p->layout == ATTN_VARLEN ? p->Hq * p->total_q : p->B * p->Hq * p->Sq;
}

/* The right window bound the kernels get (attn_bwd_args.wr): -1 for a bound no row reaches (so
 * that diag + wr stays within 2^30), 0 under the causal mask; an upper key bound iff >= 0. */
static int kernel_wr(const attn_problem *p)
{
    if (p->causal)
        return 0;
    return p->wr >= 0 && p->wr < p->Sq ? (int)p->wr : -1;
}

/* Deterministic mode's planes (attn_bwd_args.planes) on a variant with det_planes (the sm90h
 * families, d 192 / 256; 1 elsewhere and in fast mode). Why: the turns make a Q block's dQ adds a
 * chain through every K block of its head, each waiting for the one before; without an upper key
 * bound every K block starts on the first Q block at once, so a block's first turn waits for
 * the whole chain before it (the trace of 2026-12-06, bench/RESULTS.md: 64 us median at d 192
 * 2k, where a block runs 16 steps of 9.4 us). With P planes a block waits only for the block P
 * turns before it: P chains of 1 / P the length, for P times the float32 accumulator and
 * counters and one more read of each in the postprocess. The bits depend on P (a different
 * order of float additions), never on the run.
 * The default (measured on an H100, 2026-12-06, bench/gpu/s21_planes.sh): 2 planes without an
 * upper key bound (not causal, no window's right side) when Sq, Sk <= 8192 (1.01-1.20x one
 * plane at 2k / 8k, d 192 and 256; level at 16k), else 1: under the causal mask, whose blocks
 * start on their diagonals and so have no such wait, planes cost 1-38% (the blocks of a wave sit
 * on far-apart Q blocks and each plane adds their rows into its own accumulator: P times the
 * lines in flight in L2); the late-release kernels (v->late; the deterministic default at d 192 /
 * 256 until sm90hs), have their own counts (below). FLASHC_CUDA_BWD_DET_PLANES=P (1..8; read at
 * every call, the workspace query included; other values: the default) overrides them. */
static int det_planes(const attn_problem *p, const attn_bwd_variant *v)
{
    if (!p->deterministic || !v->det_planes)
        return 1;
    const char *e = getenv("FLASHC_CUDA_BWD_DET_PLANES");
    const int n = e ? atoi(e) : 0;
    if (n >= 1 && n <= 8)
        return n;
    const bool upper = kernel_wr(p) >= 0;
    if (v->late) {
        /* the late-release kernels (sm90hl, sm90h2l; the deterministic default at d 256 / 192
         * from 2026-12-06 until sm90hs on 2026-12-07, measured on an H100 with bench/gpu/s23_lplanes.sh, bench/RESULTS.md
         * "Session of 2026-12-06, late morning"): their release a Q block late lengthens each
         * turn's lag by a step, which planes absorb where every block starts at once. Best
         * counts there, against the rule below on the base kernels: d 256 without an upper
         * bound 2 planes (0.98 / 1.09 / 1.11x at 2k / 8k / 16k), with one 1 (1.08 / 1.12 /
         * 1.19x); d 192 without 4 up to 2k (1.02x), 2 above (1.01 / 1.08x at 8k / 16k), with
         * one 2 (1.04 / 1.06 / 1.04x). One plane under the mask at d 192 lost 3-29%, 4 planes
         * under it at either dim 12-29%. */
        if (v->head_dim >= 256)
            return upper ? 1 : 2;
        return upper || p->Sq > 2048 || p->Sk > 2048 ? 2 : 4;
    }
    return !upper && p->Sq <= 8192 && p->Sk <= 8192 ? 2 : 1;
}

/* Fast mode's walk of the grid under an upper key bound (attn_bwd_args.order_tail; the
 * kernels' bwd_block_of, attn_bwd_common.cuh, says why): the last R heads K block by K block,
 * R = ceil(C SMs / N) for the grid's N K blocks (about C waves of these one-block-per-SM
 * kernels' work at the end), clamped to [0, B Hkv]. C = FLASHC_CUDA_BWD_ORDER (a number >= 0,
 * read at every call; 0: every head head by head, the order before 2026-12-06 evening), else
 * BWD_ORDER_SPREAD. A list-schedule simulation of the bench shapes (causal, B S = 16k, H 16 and
 * 32, 64 x 128 blocks, 132 SMs, a block's time its Q blocks + 2) put head by head at 0.93-0.97
 * of the average load at 1k-8k (1.0 at 16k) and C = 2 at 0.98-0.99. Varlen launches keep their
 * grid (blockIdx.y is the sequence there): 0. */
#ifndef BWD_ORDER_SPREAD
#define BWD_ORDER_SPREAD 2.0
#endif
static int order_tail(const attn_problem *p, const attn_bwd_variant *v)
{
    double c = BWD_ORDER_SPREAD;
    const char *e = getenv("FLASHC_CUDA_BWD_ORDER");
    if (e && *e) {
        char *end = NULL;
        const double x = strtod(e, &end);
        if (end != e && *end == '\0' && x >= 0.0 && x <= 1e6)
            c = x;
    }
    const int sms = cuda_sm_count();
    const int64_t n = (p->Sk + v->block_k - 1) / v->block_k, bh = p->B * p->Hkv;
    if (p->deterministic || p->layout == ATTN_VARLEN || c <= 0.0 || sms <= 0 || n <= 0)
        return 0;
    const double r = ceil(c * sms / (double)n);
    return r >= (double)bh ? (int)bh : (int)r;
}

/* The workspace of variant v for p, each part 256-byte aligned: [planes x dq_acc (rows of v's
 * head_dim)][dsum][planes x sem (turn counters per sem_block_q rows where v has it, else per
 * block_q)]; bytes, and the plane count it was sized for (the query and the call read
 * FLASHC_CUDA_BWD_DET_PLANES once each). */
typedef struct bwd_ws_layout {
    int planes;
    int64_t dq_plane, dsum, sem_plane, total;
} bwd_ws_layout;
static bwd_ws_layout ws_layout(const attn_problem *p, const attn_bwd_variant *v)
{
    const int64_t rows = acc_rows(p);
    const int sb = v->sem_block_q > 0 ? v->sem_block_q : v->block_q;
    const int64_t n_mb = (p->Sq + sb - 1) / sb;
    bwd_ws_layout l;
    l.planes = det_planes(p, v);
    l.dq_plane = align256(rows * v->head_dim * 4);
    l.dsum = align256(rows * 4);
    l.sem_plane = align256(p->B * p->Hq * n_mb * v->split * 4);
    l.total = l.planes * (l.dq_plane + l.sem_plane) + l.dsum;
    return l;
}

extern "C" flashc_status cuda_attn_bwd_supports(const attn_problem *p)
{
    /* windows, softcap, ALiBi, varlen and Dk != Dv are served; splits are not */
    const bool varlen = p->layout == ATTN_VARLEN;
    if ((p->layout != ATTN_DENSE && !varlen) || p->num_splits > 1)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "%s: the CUDA backward serves dense and varlen attention (no KV "
                            "caches or split requests)",
                            varlen ? "flashc_attn_varlen_bwd" : FN);
    /* FLASHC_CUDA_BWD_VARLEN=0: refuse varlen (a switch for the device run that first tests
     * it; the dense kernels are separate instances and never depend on it) */
    const char *vl_env = getenv("FLASHC_CUDA_BWD_VARLEN");
    if (varlen && vl_env && strcmp(vl_env, "0") == 0)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "flashc_attn_varlen_bwd: the CUDA varlen backward is switched off "
                            "(FLASHC_CUDA_BWD_VARLEN=0)");
    /* varlen: 32-bit packed row indices */
    if (varlen && (p->total_q > (1 << 30) || p->total_k > (1 << 30)))
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "flashc_attn_varlen_bwd: the CUDA backend takes total_q, total_k <= "
                            "2^30 (got %lld, %lld)",
                            (long long)p->total_q, (long long)p->total_k);
    if (p->dtype != FLASHC_BF16 && p->dtype != FLASHC_F16)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED_DTYPE,
                            "%s: the CUDA backend supports bf16 and fp16 storage only (%s given)",
                            FN, flashc__dtype_name(p->dtype));
    /* 32-bit row indices inside the kernels; K blocks on grid x, (batch, KV head) on grid y. */
    if (p->Sq > (1 << 30) || p->Sk > (1 << 30) || p->B * p->Hkv > 65535)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "%s: the CUDA backend takes Sq, Sk <= 2^30 and B * Hkv <= 65535 "
                            "(got B = %lld, Sq = %lld, Sk = %lld, Hkv = %lld)",
                            FN, (long long)p->B, (long long)p->Sq, (long long)p->Sk,
                            (long long)p->Hkv);
    /* before any runtime call of ours (the checks above only read the problem, so a bad
     * argument is named as such even on a host without a usable driver) */
    FLASHC_TRY(cuda_check_no_pending_error(FN));
    flashc_status st = FLASHC_OK;
    int smem_optin = 0;
    const int cc = bwd_device(&st, &smem_optin);
    if (cc < 0)
        return st;
    const attn_bwd_variant *v = pick(p, cc, smem_optin);
    if (!v) {
        bool any_dim = false;
        /* the tiles each family has for these dims, once each: " sm80 64x64, sm90h2 128x64" */
        char tiles[200] = "";
        for (size_t t = 0; t < sizeof bwd_tables / sizeof bwd_tables[0]; t++)
            for (int i = 0; i < *bwd_tables[t].count; i++) {
                const attn_bwd_variant *w = &bwd_tables[t].v[i];
                any_dim |= serves_dims(w, p);
                char one[48];
                snprintf(one, sizeof one, " %s %dx%d", w->family, w->block_q, w->block_k);
                if (serves_dims(w, p) && w->dtype == p->dtype && !strstr(tiles, one) &&
                    strlen(tiles) + strlen(one) + 2 < sizeof tiles)
                    snprintf(tiles + strlen(tiles), sizeof tiles - strlen(tiles), "%s%s",
                             tiles[0] ? "," : "", one);
            }
        const char *fam = preferred_family();
        if (!any_dim)
            return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                                "%s: the CUDA backend supports head dims 1 to 256 (got D = "
                                "%lld, Dv = %lld)",
                                FN, (long long)p->D, (long long)p->Dv);
        if (p->br || p->bc)
            return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                                "%s: no CUDA backward kernel with tiles block_q x block_k = "
                                "%lld x %lld for this problem%s%s%s; it has%s (0 = the default)",
                                FN, (long long)p->br, (long long)p->bc,
                                fam[0] ? " (FLASHC_CUDA_BWD_KERNEL=" : "", fam,
                                fam[0] ? ", else the defaults)" : "", tiles);
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "%s: no CUDA backward kernel for head dims %lld / %lld on this "
                            "device (compute capability %d.%d, %d bytes of shared memory per "
                            "block)",
                            FN, (long long)p->D, (long long)p->Dv, cc / 10, cc % 10, smem_optin);
    }
    if ((st = check_operand("q", p->q, p->sq)) != FLASHC_OK ||
        (st = check_operand("k", p->k, p->sk)) != FLASHC_OK ||
        (st = check_operand("v", p->v, p->sv)) != FLASHC_OK ||
        (st = check_operand("o", p->o, p->so)) != FLASHC_OK ||
        (st = check_operand("dout", p->dout, p->sdo)) != FLASHC_OK ||
        (st = check_operand("dq", p->dq, p->sdq)) != FLASHC_OK ||
        (st = check_operand("dk", p->dk, p->sdk)) != FLASHC_OK ||
        (st = check_operand("dv", p->dv, p->sdv)) != FLASHC_OK ||
        (st = is_device_memory("lse", p->lse)) != FLASHC_OK)
        return st;
    if (p->workspace && (st = is_device_memory("params.workspace", p->workspace)) != FLASHC_OK)
        return st;
    if (p->alibi && (st = is_device_memory("params.alibi_slopes", p->alibi)) != FLASHC_OK)
        return st;
    if (varlen && ((st = is_device_memory("cu_seqlens_q", p->cu_q)) != FLASHC_OK ||
                   (st = is_device_memory("cu_seqlens_k", p->cu_k)) != FLASHC_OK))
        return st;
    return FLASHC_OK;
}

/* Device bytes, with 256 of slack so that a caller's workspace of any alignment fits. */
extern "C" size_t cuda_attn_bwd_workspace(const attn_problem *p)
{
    flashc_status st = FLASHC_OK;
    int smem_optin = 0;
    const int cc = bwd_device(&st, &smem_optin);
    const attn_bwd_variant *v = cc < 0 ? NULL : pick(p, cc, smem_optin);
    return v ? (size_t)ws_layout(p, v).total + 256 : 0; /* v: supports() ran first */
}

extern "C" flashc_status cuda_attn_bwd(const attn_problem *p, flashc_attn_stats *stats)
{
    flashc_status st = cuda_check_no_pending_error(FN);
    if (st != FLASHC_OK)
        return st;
    int smem_optin = 0;
    const int cc = bwd_device(&st, &smem_optin);
    if (cc < 0)
        return st;
    const attn_bwd_variant *v = pick(p, cc, smem_optin);
    const cudaStream_t stream = (cudaStream_t)p->stream;

    const bwd_ws_layout lay = ws_layout(p, v);
    const int64_t need = lay.total;
    char *ws = p->workspace ? (char *)(((uintptr_t)p->workspace + 255) & ~(uintptr_t)255) : NULL;
    const bool own = !ws;
    if (own) {
        void *mem = NULL;
        /* (a varlen problem of no packed rows needs nothing; a pointer is asked anyway) */
        const cudaError_t err = cuda_scratch_alloc(&mem, (size_t)(need > 0 ? need : 256), stream);
        if (err != cudaSuccess) {
            (void)cudaGetLastError();
            return flashc__fail(FLASHC_ERR_OUT_OF_MEMORY,
                                "%s: cudaMallocAsync of the %lld-byte workspace failed: %s", FN,
                                (long long)need, cudaGetErrorString(err));
        }
        ws = (char *)mem;
    }

    attn_bwd_args a;
    a.q = p->q, a.k = p->k, a.v = p->v, a.o = p->o, a.dout = p->dout;
    a.dq = p->dq, a.dk = p->dk, a.dv = p->dv, a.lse = p->lse;
    for (int i = 0; i < 3; i++) {
        a.sq[i] = p->sq[i], a.sk[i] = p->sk[i], a.sv[i] = p->sv[i], a.so[i] = p->so[i];
        a.sdo[i] = p->sdo[i], a.sdq[i] = p->sdq[i], a.sdk[i] = p->sdk[i], a.sdv[i] = p->sdv[i];
        a.slse[i] = p->slse[i];
    }
    /* the workspace as ws_layout sized it */
    a.planes = lay.planes;
    a.dq_plane = lay.dq_plane / 4, a.sem_plane = lay.sem_plane / 4;
    a.dq_acc = (float *)ws;
    a.dsum = (float *)(ws + lay.planes * lay.dq_plane);
    a.sem = (int *)(ws + lay.planes * lay.dq_plane + lay.dsum);
    /* FLASHC_CUDA_BWD_DET_FREE=1: the diagnostic of attn_bwd_args.det_free (read at every call;
     * only the sm90h families read it) */
    const char *free_env = getenv("FLASHC_CUDA_BWD_DET_FREE");
    a.det_free = p->deterministic && free_env && strcmp(free_env, "1") == 0;
    /* FLASHC_CUDA_BWD_DET_FENCE=1 (read at every call): attn_bwd_args.det_fence, the
     * __threadfence before each turn's release as before 2026-12-06 (a measurement knob; the
     * default, without it, ran deterministic mode 1.04-1.24x faster on an H100 at d 64-256,
     * bench/gpu/s25_detfence.sh, bench/RESULTS.md "Session of 2026-12-06, midday") */
    const char *fence_env = getenv("FLASHC_CUDA_BWD_DET_FENCE");
    a.det_fence = fence_env && strcmp(fence_env, "1") == 0;
    /* FLASHC_CUDA_BWD_NO_DQ=1 (read at every call): attn_bwd_args.no_dq, a diagnostic that
     * leaves dQ zero (fast mode of the sm90h families and of sm90v3u / sm90v3d only) */
    const char *nodq_env = getenv("FLASHC_CUDA_BWD_NO_DQ");
    a.no_dq = nodq_env && strcmp(nodq_env, "1") == 0;
    a.order_tail = order_tail(p, v);
    a.B = (int)p->B, a.Sq = (int)p->Sq, a.Sk = (int)p->Sk, a.Hq = (int)p->Hq;
    a.D = (int)p->D, a.Dv = (int)p->Dv;
    a.Hkv = (int)p->Hkv, a.group = (int)(p->Hq / p->Hkv);
    a.scale = p->scale;
    a.scale_log2 = (float)((double)p->scale * 1.4426950408889634);
    a.causal = p->causal;
    /* a bound no row reaches is no bound (attn_bwd_args: keeps diag -/+ w within 2^30) */
    a.wl = p->wl >= 0 && p->wl < p->Sk ? (int)p->wl : -1;
    a.wr = kernel_wr(p);
    a.softcap = p->softcap;
    a.alibi = p->alibi;
    a.salibi[0] = p->salibi[0], a.salibi[1] = p->salibi[1];
    a.deterministic = p->deterministic;
    const bool varlen = p->layout == ATTN_VARLEN;
    a.cu_q = varlen ? p->cu_q : NULL, a.cu_k = varlen ? p->cu_k : NULL;
    a.total_q = varlen ? (int)p->total_q : 0, a.total_k = varlen ? (int)p->total_k : 0;

    cudaError_t err = varlen ? v->launch_varlen(&a, stream) : v->launch(&a, stream);
    if (own) {
        /* Stream-ordered: the memory returns to the pool once the kernels are done with it. */
        const cudaError_t ferr = cuda_scratch_free(ws, stream);
        if (err == cudaSuccess)
            err = ferr;
    }
    if (err != cudaSuccess) { /* ours: nothing was pending at entry */
        char what[96];
        snprintf(what, sizeof what, "launching %s", v->name);
        return cuda_device_error(FN, what, err);
    }

    if (varlen) { /* the lengths live on the device: the maxima's count, as the forward */
        stats->tile_pairs = p->B * p->Hq * ((p->Sq + v->block_q - 1) / v->block_q) *
                            ((p->Sk + v->block_k - 1) / v->block_k);
        stats->tile_pairs_total = stats->tile_pairs;
    } else {
        stats->tile_pairs = attn_tile_pairs(p, v->block_q, v->block_k, &stats->tile_pairs_total);
    }
    stats->block_q = v->block_q;
    stats->block_k = v->block_k;
    return FLASHC_OK;
}
