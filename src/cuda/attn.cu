/*
 * attn.cu — the CUDA backend's attention dispatch: "is this supported?", variant choice,
 * launch and error mapping. The kernels live one family per file (attn_fwd_sm80.cu, ...),
 * each exporting a table of variants; this file is the only one that knows all tables.
 */
#include "attn_cuda.cuh"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char FN[] = "flashc_attn_fwd";

/* Every variant table, lowest architecture first. */
static const struct {
    const attn_fwd_variant *v;
    const int *count;
} variant_tables[] = {
    {attn_fwd_sm80_variants, &attn_fwd_sm80_variant_count},
    {attn_fwd_sm90_variants, &attn_fwd_sm90_variant_count},
};

/* FLASHC_CUDA_KERNEL, read once: "" (the dispatcher's choice), or a family every call must use.
 * A value that names no family is kept as given so that each call can say what is wrong. */
static const char *forced_family(void)
{
    static int read = 0;
    static char value[16];
    if (!read) {
        const char *e = getenv("FLASHC_CUDA_KERNEL");
        snprintf(value, sizeof value, "%s", e ? e : "");
        read = 1; /* racing first calls store the same bytes */
    }
    return value;
}

static int family_known(const char *f)
{
    for (size_t t = 0; t < sizeof variant_tables / sizeof variant_tables[0]; t++)
        for (int i = 0; i < *variant_tables[t].count; i++)
            if (strcmp(variant_tables[t].v[i].family, f) == 0)
                return 1;
    return 0;
}

/* Compute capability of the current device as 10 * major + minor, or -1 with a message. */
static int current_cc(flashc_status *st)
{
    int dev = 0, major = 0, minor = 0;
    cudaError_t err = cudaGetDevice(&dev);
    if (err == cudaSuccess)
        err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    if (err == cudaSuccess)
        err = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    if (err != cudaSuccess) {
        *st = cuda_device_error(FN, "querying the current CUDA device", err);
        return -1;
    }
    return 10 * major + minor;
}

/* Rows of every operand start on 16-byte boundaries: pointers 16-byte aligned, strides
 * multiples of 8 elements (the kernels' 16-byte loads and the copy engine need this; the
 * KV-cache kernel picks its element-wise instances without it, attn_decode.cu). */
int cuda_rows_vec16(const attn_problem *p)
{
    const void *ptr[4] = {p->q, p->k, p->v, p->o};
    const int64_t *st[4] = {p->sq, p->sk, p->sv, p->so};
    for (int i = 0; i < 4; i++)
        if ((uintptr_t)ptr[i] % 16 != 0 || st[i][0] % 8 != 0 || st[i][1] % 8 != 0 ||
            st[i][2] % 8 != 0)
            return 0;
    return 1;
}

/* The variant for p with the highest architecture the device reaches, among those picked by
 * default or, when forced is not empty, among that family's: the instance whose head-dim range
 * holds max(D, Dv) (D != Dv: dkdv_route). The one answer to "which kernel runs":
 * cuda_attn_fwd_supports and cuda_attn_fwd both ask it. */
static const attn_fwd_variant *pick_variant(const attn_problem *p, int cc, const char *forced)
{
    const int vec16 = cuda_rows_vec16(p);
    const int64_t d = p->D > p->Dv ? p->D : p->Dv;
    const attn_fwd_variant *best = NULL;
    for (size_t t = 0; t < sizeof variant_tables / sizeof variant_tables[0]; t++)
        for (int i = 0; i < *variant_tables[t].count; i++) {
            const attn_fwd_variant *v = &variant_tables[t].v[i];
            if (forced[0] ? strcmp(v->family, forced) != 0
                          : !v->by_default || p->Sq < v->default_min_seq ||
                                p->Sk < v->default_min_seq)
                continue;
            if (v->dtype != p->dtype || d < v->head_dim_min || d > v->head_dim ||
                v->min_cc > cc || (best && v->min_cc <= best->min_cc))
                continue;
            if (v->supports && !v->supports(v, p, cc, vec16))
                continue;
            best = v;
        }
    return best;
}

/* ---- masks and modifiers on the prefill kernel ------------------------------------------
 * Problems attn_is_plain excludes (varlen, windows, softcap, ALiBi) used to go to the KV-cache
 * kernel (attn_decode.cu) whatever their length. That kernel packs the query heads of a KV
 * group into 16-row tiles and splits the keys over thread blocks: right for a few query rows
 * against many keys, but a long prefill then reads every K/V block once per 16 packed rows on
 * m16 tiles of one warp. The sm80 prefill kernel's mods instance (attn_fwd_sm80.cu) takes
 * such problems when they are prefill-like, D != Dv included (the instance of max(D, Dv),
 * the shorter side zero-padded in shared memory); the KV-cache kernel keeps the rest: KV
 * caches and paged varlen (its loaders look up pages), split requests (num_splits > 1), short
 * queries and one-wave grids over many keys (below). Rows that are not 16-byte aligned (D or
 * Dv % 8 != 0, odd strides, offset pointers) follow the same rules: both kernels serve them,
 * the prefill kernel through its unvectorised mods instance and the KV-cache kernel through
 * its element-wise instances (DEC_VAR_ELEM, attn_decode.cu); only the sm90 mods / varlen
 * instances (TMA: 16-byte rows) are not considered for them, so a long one runs on sm80. */

/* Query rows (max_seqlen_q for varlen) from which a non-plain problem goes to the prefill
 * kernel. Its tiles hold 128 rows of one head: at 64 rows half of each tile is live and a K/V
 * block read from L2 serves 64 rows (the KV-cache kernel: 16 packed rows), but below that the
 * tile is mostly padding, and with only B * Hq thread blocks and no split-KV a short query
 * against long keys leaves most SMs idle, which the KV-cache kernel's split-KV fills. A
 * judgement from the two kernels' shapes, not from a measured crossover (bench/gpu/
 * s3_prefill.sh times both routes at prefill lengths only). */
#define PREFILL_MODS_MIN_SQ 64

/* ... unless its grid is less than one wave of the device and the keys are many: the prefill
 * kernel does not split the keys, so a few thread blocks would each walk all of them while the
 * KV-cache kernel's split-KV spreads them over the SMs (a chunk of queries against a long
 * context, say). Keys per row up to this count are walked by one block fast enough either way
 * (a judgement, not measured). */
#define PREFILL_MODS_FEW_KEYS 2048

/* SMs of the current device, cached per device ordinal; 0 when the query fails (then the
 * one-wave rule above is not applied; attn_cuda.cuh). A host attribute query, no
 * synchronisation. */
int cuda_sm_count(void)
{
    static int cached[64];
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0)
        return 0;
    if (dev < 64 && cached[dev] > 0)
        return cached[dev];
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n < 0)
        return 0;
    if (dev < 64)
        cached[dev] = n; /* racing first calls store the same value */
    return n;
}

/* FLASHC_CUDA_PREFILL_MODS=0 restores the old routing (every non-plain problem on the KV-cache
 * kernel). Read on every call (one getenv beside a launch), so that a test or a benchmark can
 * run both routes in one process; supports() and the run of one call read the same value
 * unless the environment changes between them. */
static int prefill_mods_enabled(void)
{
    const char *e = getenv("FLASHC_CUDA_PREFILL_MODS");
    return !(e && strcmp(e, "0") == 0);
}

/* The sm80 variant that would serve p (dtype, the larger of the two head dims), whatever the
 * device; the mods path uses that family (or, opted in, sm90_mods_variant's;
 * FLASHC_CUDA_KERNEL, which never applied to non-plain problems, does not apply here either). */
static const attn_fwd_variant *mods_variant(const attn_problem *p)
{
    const int64_t d = p->D > p->Dv ? p->D : p->Dv;
    for (int i = 0; i < attn_fwd_sm80_variant_count; i++) {
        const attn_fwd_variant *v = &attn_fwd_sm80_variants[i];
        if (v->dtype == p->dtype && d >= v->head_dim_min && d <= v->head_dim)
            return v;
    }
    return NULL;
}

/* FLASHC_CUDA_SM90_MODS, read on every call (so that a test or a benchmark runs both routes in
 * one process): "1" sends the dense problems the mods route takes to the sm90 kernel's mods
 * instances (attn_fwd_sm90.cu: windows, softcap, ALiBi on v6's kernel, without ping-pong at
 * bf16 d 65-128 since the H200 run of 2026-12-04 evening, family "sm90mods") on
 * compute capability 9.0 where one serves them, the rest to the sm80 kernel's mods instance;
 * "force" the same, but a dense problem of the mods route that no sm90 mods instance serves is
 * refused (mods_forced: so that a test or a benchmark knows the sm90 kernel ran where its tiles
 * are the sm80 ones); "v6", "v9", "v9np" as "force" on the alternative of that name (family
 * "sm90mods-NAME": bf16, head dims 65-128 only; v6: with ping-pong), for a device run to choose
 * from; "0": the sm80 kernel's mods instance; unset or anything else: SM90_MODS_DEFAULT, "1"
 * for max(D, Dv) <= SM90_MODS_DEFAULT_MAX_D (the H200 run of 2026-12-04 afternoon,
 * bench/RESULTS.md "Issue 11: masks and modifiers on sm90": 1.46-1.79x the sm80 route at d 128,
 * 1.11-1.35x at d 64; d 192 and 256 since the run of that evening, bench/gpu/s14_modsw.sh:
 * 1.61-2.20x). Returns the family to take (NULL: off), whether it is forced, and whether it is
 * the default's (*dflt). */
enum { SM90_MODS_DEFAULT = 1, SM90_MODS_DEFAULT_MAX_D = 256 };
static const char *sm90_mods_family(int *forced, int *dflt)
{
    static const char *const alt[][2] = {
        {"v6", "sm90mods-v6"}, {"v9", "sm90mods-v9"}, {"v9np", "sm90mods-v9np"}};
    const char *e = getenv("FLASHC_CUDA_SM90_MODS");
    *forced = e && strcmp(e, "force") == 0;
    *dflt = 0;
    if (e && (strcmp(e, "1") == 0 || *forced))
        return "sm90mods";
    for (size_t i = 0; e && i < sizeof alt / sizeof alt[0]; i++)
        if (strcmp(e, alt[i][0]) == 0) {
            *forced = 1;
            return alt[i][1];
        }
    if ((e && strcmp(e, "0") == 0) || !SM90_MODS_DEFAULT)
        return NULL;
    *dflt = 1;
    return "sm90mods";
}

/* FLASHC_CUDA_SM90_VARLEN, likewise for varlen problems (attn_fwd_sm90.cu, the kernel's VL: v6d's
 * kernel with MODS over the packed rows, family "sm90vl"): "1" on where an sm90vl instance serves
 * the problem, "force" the same but refused where none does, "0" off; unset or anything else:
 * SM90_VARLEN_DEFAULT, on at max(D, Dv) <= SM90_VARLEN_DEFAULT_MAX_D and D == Dv (the H200 run
 * of 2026-12-04 evening, bench/gpu/s13_fwd23.sh: every test and sanitizer job passed with the
 * sequences' neighbours poisoned, and 1.23-1.67x the sm80 route's time over 16 ragged sequences;
 * bench/RESULTS.md; d 192 / 256 not timed, "1" takes them). */
enum { SM90_VARLEN_DEFAULT = 1, SM90_VARLEN_DEFAULT_MAX_D = 128 };
static const char *sm90_varlen_family(int *forced, int *dflt)
{
    const char *e = getenv("FLASHC_CUDA_SM90_VARLEN");
    *forced = e && strcmp(e, "force") == 0;
    *dflt = 0;
    if (e && (strcmp(e, "1") == 0 || *forced))
        return "sm90vl";
    if ((e && strcmp(e, "0") == 0) || !SM90_VARLEN_DEFAULT)
        return NULL;
    *dflt = 1;
    return "sm90vl";
}

/* The variable that governs p's sm90 mods route (*env: its name) and its family, as above */
static const char *sm90_route_family(const attn_problem *p, const char **env, int *forced,
                                     int *dflt)
{
    *env = p->layout == ATTN_VARLEN ? "FLASHC_CUDA_SM90_VARLEN" : "FLASHC_CUDA_SM90_MODS";
    return p->layout == ATTN_VARLEN ? sm90_varlen_family(forced, dflt)
                                    : sm90_mods_family(forced, dflt);
}

/* The sm90 mods instance for p (dense or varlen, the instance of max(D, Dv)) in the family
 * FLASHC_CUDA_SM90_MODS (dense) or FLASHC_CUDA_SM90_VARLEN (varlen) names, or NULL: off, not
 * compute capability 9.0, or its supports() says no. Asks quietly, as dkdv_route does: a failed
 * query means "not here", and the sm80 route asks again and reports it. */
static const attn_fwd_variant *sm90_mods_variant(const attn_problem *p)
{
    int forced, dflt;
    const char *env;
    const char *fam = sm90_route_family(p, &env, &forced, &dflt);
    const int64_t d = p->D > p->Dv ? p->D : p->Dv;
    /* varlen: the VL kernels store O directly (v6d's stores, D columns), so D == Dv only (the
     * H200 run of 2026-12-04 afternoon, call 4: a varlen 192 / 128 case reached the launch's
     * refusal) */
    const int64_t dflt_max = p->layout == ATTN_VARLEN ? (int64_t)SM90_VARLEN_DEFAULT_MAX_D
                                                      : (int64_t)SM90_MODS_DEFAULT_MAX_D;
    if (!fam || (p->layout != ATTN_DENSE && p->layout != ATTN_VARLEN) ||
        (p->layout == ATTN_VARLEN && p->D != p->Dv) || (dflt && d > dflt_max) ||
        cudaPeekAtLastError() != cudaSuccess)
        return NULL;
    flashc_status ignored;
    const int cc = current_cc(&ignored);
    for (int i = 0; cc == 90 && i < attn_fwd_sm90_mods_variant_count; i++) {
        const attn_fwd_variant *v = &attn_fwd_sm90_mods_variants[i];
        if (strcmp(v->family, fam) == 0 && v->dtype == p->dtype && d >= v->head_dim_min &&
            d <= v->head_dim && v->supports(v, p, cc, 1))
            return v;
    }
    return NULL;
}

/* FLASHC_CUDA_SM90_MODS=force (or an alternative's name) for a dense problem,
 * FLASHC_CUDA_SM90_VARLEN=force for a varlen one: the mods route's problem p, given to variant
 * v, runs on an sm90 mods instance or is refused. */
static flashc_status mods_forced(const attn_problem *p, const attn_fwd_variant *v)
{
    int forced, dflt;
    const char *env;
    const char *fam = sm90_route_family(p, &env, &forced, &dflt);
    if (forced && (p->layout == ATTN_DENSE || p->layout == ATTN_VARLEN) && v->min_cc < 90)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "%s: %s=%s: no sm90 mods instance (%s) serves "
                            "this problem (compute capability 9.0, bf16 / fp16, D and Dv "
                            "multiples of 8 or its head dim, D != Dv only dense and with "
                            "FLASHC_CUDA_SM90_DKDV on, tiles 128 x block_k or unset)",
                            p->layout == ATTN_VARLEN ? "flashc_attn_varlen_fwd" : FN, env,
                            getenv(env), fam);
    return FLASHC_OK;
}

/* Whether non-plain problem p goes to the prefill kernel (host checks only; the device's own
 * checks follow in mods_supports). Anything refused here keeps the KV-cache kernel, with its
 * answers and messages. */
static const attn_fwd_variant *mods_route(const attn_problem *p)
{
    /* rows not 16-byte aligned take the same rules as aligned ones (both kernels serve them);
     * only the sm90 instances need 16-byte rows (below) */
    const int vec = cuda_rows_vec16(p);
    if (!prefill_mods_enabled() || (p->layout != ATTN_DENSE && p->layout != ATTN_VARLEN) ||
        p->pages /* paged varlen: the KV-cache kernel's paged loaders */ ||
        p->num_splits > 1 || p->Sq < PREFILL_MODS_MIN_SQ ||
        (p->dtype != FLASHC_BF16 && p->dtype != FLASHC_F16) || p->D < 1 || p->D > 256 ||
        p->Dv < 1 || p->Dv > 256)
        return NULL;
    for (int i = 0; i < 4; i++)
        if ((i == 0 ? p->sq : i == 1 ? p->sk : i == 2 ? p->sv : p->so)[3] != 1)
            return NULL;
    /* 32-bit rows and block indices in the kernel, one grid dimension for every (Q tile,
     * sequence, head) block and one for the unowned-row clear */
    const int64_t lim = (int64_t)1 << 30;
    if (p->Sq > lim || p->Sk > lim || p->total_q > lim || p->total_k > lim ||
        (p->Sq + 127) / 128 * p->B * p->Hq > 0x7fffffff ||
        (p->total_q * p->Hq + 3) / 4 > 0x7fffffff)
        return NULL;
    const attn_fwd_variant *v = vec ? sm90_mods_variant(p) : NULL; /* TMA: 16-byte rows */
    if (v && ((p->br && p->br != v->block_q) || (p->bc && p->bc != v->block_k)))
        v = NULL; /* tiles asked for that only the sm80 instance has */
    if (!v)
        v = mods_variant(p);
    if (!v || (p->br && p->br != v->block_q) || (p->bc && p->bc != v->block_k))
        return NULL;
    /* the keys one row may see at most: Sk, or the window's width */
    int64_t keys = p->Sk;
    if (p->wl >= 0 && (p->causal || p->wr >= 0)) { /* each side cut to Sk: no overflow */
        const int64_t wl = p->wl < p->Sk ? p->wl : p->Sk, wr = p->wr < p->Sk ? p->wr : p->Sk;
        const int64_t width = wl + (p->causal ? 0 : wr) + 1;
        keys = width < keys ? width : keys;
    }
    const int64_t blocks = (p->Sq + v->block_q - 1) / v->block_q * p->B * p->Hq;
    if (keys > PREFILL_MODS_FEW_KEYS && blocks < cuda_sm_count())
        return NULL;
    return v;
}

static flashc_status mods_supports(const attn_problem *p)
{
    const char *fn = p->layout == ATTN_VARLEN ? "flashc_attn_varlen_fwd" : FN;
    FLASHC_TRY(cuda_check_no_pending_error(fn));
    const void *ptr[4] = {p->q, p->k, p->v, p->o};
    const char *names[4] = {"q", "k", "v", "o"};
    flashc_status st;
    for (int i = 0; i < 4; i++)
        if ((st = cuda_check_memory(fn, names[i], ptr[i])) != FLASHC_OK)
            return st;
    const void *idx[4] = {p->lse, p->alibi, p->cu_q, p->cu_k};
    const char *idx_names[4] = {"lse", "alibi_slopes", "cu_seqlens_q", "cu_seqlens_k"};
    for (int i = 0; i < 4; i++)
        if (idx[i] && (st = cuda_check_memory(fn, idx_names[i], idx[i])) != FLASHC_OK)
            return st;
    const int cc = current_cc(&st);
    if (cc < 0)
        return st;
    if (cc < 80)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "%s: no CUDA kernel for this device (compute capability %d.%d; "
                            "sm_80 or newer needed)",
                            fn, cc / 10, cc % 10);
    return FLASHC_OK;
}

/* ---- Dk != Dv on the sm90 kernels ---------------------------------------------------------
 * A dense problem that is plain but for D != Dv (MLA's 192 / 128 prefill, say) goes to an sm90
 * kernel when the dispatcher's choice for it (pick_variant: by default or in the forced family,
 * the instance of max(D, Dv)) is one: its supports() takes D != Dv only where it stores O by TMA
 * and FLASHC_CUDA_SM90_DKDV allows it (attn_fwd_sm90.cu, sm90_supports_rows: the tensor maps of
 * Q, K keep D and those of V, O keep Dv, so the copy engine zero-fills the narrower side and the
 * TMA store drops O's columns >= Dv). Anything else, FLASHC_CUDA_KERNEL=sm80 included, keeps the
 * route of non-plain problems (the mods instance, or the KV-cache kernel), with its answers and
 * messages; so this asks quietly, and a failed query means "not here".
 * FLASHC_CUDA_PREFILL_MODS=0 (the old routing: every non-plain problem on the KV-cache kernel)
 * turns this route off too. */
static const attn_fwd_variant *dkdv_route(const attn_problem *p)
{
    if (!attn_is_plain_any_dv(p) || p->D == p->Dv || !prefill_mods_enabled() ||
        (p->dtype != FLASHC_BF16 && p->dtype != FLASHC_F16) || p->D < 1 || p->D > 256 ||
        p->Dv < 1 || p->Dv > 256 || !(p->scale > 0.0f) || p->Sq > (1 << 30) ||
        p->Sk > (1 << 30) || (p->Sq + 63) / 64 * p->B * p->Hq > 0x7fffffff)
        return NULL;
    const void *ptr[4] = {p->q, p->k, p->v, p->o};
    const int64_t *st[4] = {p->sq, p->sk, p->sv, p->so};
    for (int i = 0; i < 4; i++)
        if (st[i][3] != 1 || (uintptr_t)ptr[i] % 2 != 0)
            return NULL;
    if (cudaPeekAtLastError() != cudaSuccess) /* the application's: the usual route reports it */
        return NULL;
    flashc_status ignored; /* a failed query: the usual route asks again and reports it */
    const int cc = current_cc(&ignored);
    const attn_fwd_variant *v = cc < 90 ? NULL : pick_variant(p, cc, forced_family());
    if (!v || v->min_cc < 90 || (p->br && p->br != v->block_q) || (p->bc && p->bc != v->block_k))
        return NULL;
    return v;
}

/* FLASHC_CUDA_SM90_CSHIFT, read on every call (so that a test or a benchmark runs both in one
 * process): "1" aligns the Q tiles of the sm90 kernels to the sequence's end under the plain
 * causal mask (attn_fwd_sm90.cu, q_shift: the partial tile of Sq % BM rows becomes the first,
 * which sees the fewest keys, instead of the last, which sees them all; bench/RESULTS.md, "Issue
 * 11: causal Q tiles aligned to the sequence's end"), "0" keeps them at row 0; unset or anything
 * else: SM90_CSHIFT_DEFAULT, on since the H200 run of 2026-12-05 (bench/gpu/s16_fwd24.sh: d 64
 * causal 2k / 4k 1.05x, the tile pairs 5% fewer; elsewhere the same tiles). The sm80
 * kernel, the mods and varlen instances and v8's pairs ignore it. */
enum { SM90_CSHIFT_DEFAULT = 1 };
static int sm90_cshift_enabled(void)
{
    const char *e = getenv("FLASHC_CUDA_SM90_CSHIFT");
    return e && strcmp(e, "1") == 0 ? 1 : e && strcmp(e, "0") == 0 ? 0 : SM90_CSHIFT_DEFAULT;
}

/* FLASHC_CUDA_SM90_HGEVEN, read on every call (a test or a benchmark runs both in one process):
 * "1" sizes the head groups of the sm90 kernels' causal tile order (block_coords: groups of
 * head_group (batch, head) pairs whose K/V fit in ~20 MB of L2, the longest Q tiles of a group
 * first) so that the last group is not a small remainder: the largest divisor of B Hq in
 * [head_group / 2, head_group], else the largest size there whose remainder is at least half a
 * group, else head_group (sm90_even_head_group). Why: the dynamic scheduler ends well only if
 * the last tiles it hands out are short; a remainder group of a few heads starts its
 * full-length tiles when every multiprocessor is near the end of the previous group, and those
 * few then run alone (d 128 causal 2k: 128 pairs in groups of 20, the last of 8 heads, whose 16-
 * block tiles start with ~9 blocks of work per multiprocessor left). A list-scheduling count
 * ((blocks + 1) per tile, 132 multiprocessors, tiles in the kernel's order) puts the finish
 * 4.5-5.5 % after the mean at d 128 causal 2k-8k and 1.7-2.7 % at d 64 causal 2k-16k, 0-1.7 %
 * with these groups (bench/RESULTS.md, "Issue 11: the last head group and dead consumers").
 * Smaller groups only (less K/V in L2 at once); the kernels are unchanged (the order is
 * block_coords'). "0" keeps head_group; unset or anything else: SM90_HGEVEN_DEFAULT, on since the
 * device run of 2026-12-06 (bench/gpu/s17_fwd25.sh on an H100: 1.04-1.06x at d 128 causal 2k-8k,
 * 1.01-1.02x at d 64 causal, 1.00 elsewhere; bench/RESULTS.md). Plain causal problems on sm90
 * kernels only: the sm80 kernel, the mods / varlen instances and the non-causal orders (head by
 * head) keep theirs. */
enum { SM90_HGEVEN_DEFAULT = 1 };
static int sm90_hgeven_enabled(void)
{
    const char *e = getenv("FLASHC_CUDA_SM90_HGEVEN");
    return e && strcmp(e, "1") == 0 ? 1 : e && strcmp(e, "0") == 0 ? 0 : SM90_HGEVEN_DEFAULT;
}
/* The group size above for pairs = B Hq (>= 1) and head_group hg in [1, pairs]. */
static int sm90_even_head_group(int64_t pairs, int64_t hg)
{
    for (int64_t g = hg; 2 * g >= hg; g--)
        if (pairs % g == 0)
            return (int)g;
    for (int64_t g = hg; 2 * g >= hg; g--)
        if (2 * (pairs % g) >= g)
            return (int)g;
    return (int)hg;
}

/* FLASHC_CUDA_SM90_SKIPDEAD, read on every call: "1" lets a consumer warpgroup of the sm90
 * kernels on v7's shape (d 64, 3 consumers, BM 192: sm90v7, sm90np's d 64 entries) whose 64 rows
 * are all past Sq (or all < 0 under the end-aligned causal tiles) skip its products and softmax
 * (attn_fwd_args.skip_dead; attn_fwd_sm90.cu, the consumers' dead branch): at d 64 2k / 4k the
 * last Q tile of every head has 128 / 64 live rows of 192, 3% of the tiles' rows. "0" computes
 * them as before; unset or anything else: SM90_SKIPDEAD_DEFAULT, on since the device run of
 * 2026-12-06 (bench/gpu/s17_fwd25.sh on an H100: 1.014-1.015x at d 64 non-causal 2k / 4k,
 * 1.00-1.04x causal; bench/RESULTS.md). Every other kernel ignores it. */
enum { SM90_SKIPDEAD_DEFAULT = 1 };
static int sm90_skipdead_enabled(void)
{
    const char *e = getenv("FLASHC_CUDA_SM90_SKIPDEAD");
    return e && strcmp(e, "1") == 0 ? 1 : e && strcmp(e, "0") == 0 ? 0 : SM90_SKIPDEAD_DEFAULT;
}

/* (Q tile, K/V block) pairs of one head with the Q tiles moved up by sm90_q_shift rows (the
 * sm90 kernels under FLASHC_CUDA_SM90_CSHIFT): tiles [k br - shift, (k + 1) br - shift), cut
 * at row 0 and at Sq; the plain causal problem's count, as attn_tile_pairs_per_head's. */
static int64_t tile_pairs_end_aligned(const attn_problem *p, int64_t br, int64_t bc)
{
    const int64_t shift = sm90_q_shift(p->Sq, br);
    int64_t pairs = 0;
    for (int64_t i0 = -shift; i0 < p->Sq; i0 += br) {
        const int64_t last = i0 + br < p->Sq ? i0 + br - 1 : p->Sq - 1;
        const int64_t kend = attn_key_end(p, last); /* the last row of the block sees most */
        if (kend > 0)
            pairs += (kend + bc - 1) / bc;
    }
    return pairs;
}

/* What every forward launch takes from p alike (operands, strides, shape, scale, head groups);
 * every other field 0. The caller sets vec16, causal and, for the mods instance, the rest. */
static void fwd_args_common(const attn_problem *p, attn_fwd_args *a)
{
    memset(a, 0, sizeof *a);
    a->q = p->q, a->k = p->k, a->v = p->v, a->o = p->o, a->lse = p->lse;
    for (int i = 0; i < 3; i++) {
        a->sq[i] = p->sq[i], a->sk[i] = p->sk[i], a->sv[i] = p->sv[i], a->so[i] = p->so[i];
        a->slse[i] = p->slse[i];
    }
    a->B = (int)p->B, a->Sq = (int)p->Sq, a->Sk = (int)p->Sk, a->Hq = (int)p->Hq;
    a->group = (int)(p->Hq / p->Hkv);
    a->D = (int)p->D, a->Dv = (int)p->Dv;
    a->scale = p->scale;
    a->scale_log2 = (float)((double)p->scale * 1.4426950408889634);
    /* Heads scheduled together: their K and V (read by every Q tile of the head) should fit
     * in about half of the L2 (60 MB on an H100/H200, 40 MB on an A100), so longest-first
     * ordering across heads does not turn K/V reuse into HBM traffic. */
    const int64_t kv_bytes = p->Sk * (p->D + p->Dv) * 2;
    const int64_t fit = (int64_t)(20 << 20) / (kv_bytes > 0 ? kv_bytes : 1);
    a->head_group = (int)(fit < 1 ? 1 : fit > p->B * p->Hq ? p->B * p->Hq : fit);
}

/* Launches the mods instance of v for p. The launch shape depends on the maxima only (varlen:
 * max_seqlen_q, max_seqlen_k); the lengths are read on the device, nothing waits for the host. */
static flashc_status mods_run(const attn_problem *p, const attn_fwd_variant *v,
                              flashc_attn_stats *stats)
{
    const char *fn = p->layout == ATTN_VARLEN ? "flashc_attn_varlen_fwd" : FN;
    FLASHC_TRY(cuda_check_no_pending_error(fn));
    attn_fwd_args a;
    fwd_args_common(p, &a);
    a.vec16 = cuda_rows_vec16(p); /* 0: the unvectorised instance (mods_route) */
    a.causal = 0; /* folded into wr */
    if (p->layout == ATTN_VARLEN) {
        a.cu_q = p->cu_q, a.cu_k = p->cu_k;
        a.total_q = (int)p->total_q, a.total_k = (int)p->total_k;
    }
    /* A bound no row can reach becomes -1 (unbounded), so that the kernel's i + diag +- w stay
     * far from overflow: lo_i = 0 for every row when wl >= Sk, hi_i = Sk_b when wr >= Sq. */
    const int64_t wr = p->causal ? 0 : p->wr;
    a.wl = p->wl >= 0 && p->wl < p->Sk ? (int)p->wl : -1;
    a.wr = wr >= 0 && wr < p->Sq ? (int)wr : -1;
    a.softcap = p->softcap;
    a.alibi = p->alibi;
    a.salibi[0] = p->salibi[0], a.salibi[1] = p->salibi[1];
    a.mods = 1;

    const cudaError_t err = v->launch(&a, (cudaStream_t)p->stream);
    if (err != cudaSuccess) {
        char what[112];
        snprintf(what, sizeof what, "launching %s (masks and modifiers)", v->name);
        return cuda_device_error(fn, what, err);
    }
    const int64_t heads = p->B * p->Hq;
    const int64_t dense = heads * ((p->Sq + v->block_q - 1) / v->block_q) *
                          ((p->Sk + v->block_k - 1) / v->block_k);
    if (p->layout == ATTN_DENSE) {
        stats->tile_pairs = attn_tile_pairs(p, v->block_q, v->block_k, &stats->tile_pairs_total);
    } else { /* the lengths live on the device: the maxima's count */
        stats->tile_pairs = dense;
        stats->tile_pairs_total = dense;
    }
    stats->block_q = v->block_q;
    stats->block_k = v->block_k;
    stats->num_splits = 1;
    stats->workspace_bytes = 0;
    return FLASHC_OK;
}

/* A forward operand (q, k, v, o, k_new, v_new): unit feature stride, element-aligned, device
 * memory. Rows need not be 16-byte aligned: both forward routes serve such rows (the prefill
 * kernels' unvectorised instances, the KV-cache kernel's element-wise ones), and
 * cuda_rows_vec16 picks the loads. */
flashc_status cuda_check_operand(const char *fn, const char *name, const void *ptr,
                                 const int64_t *st)
{
    if (st[3] != 1)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "%s: the CUDA backend needs %s.stride[3] == 1 (got %lld)", fn, name,
                            (long long)st[3]);
    if ((uintptr_t)ptr % 2 != 0)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                            "%s: %s is not aligned to its 2-byte elements", fn, name);
    return cuda_check_memory(fn, name, ptr);
}

extern "C" flashc_status cuda_attn_fwd_supports(const attn_problem *p)
{
    /* varlen, masks and modifiers, D != Dv: prefill-like ones on the sm80 kernel (dense
     * D != Dv without the rest on an sm90 one where dkdv_route says; dense masks and modifiers
     * on one with FLASHC_CUDA_SM90_MODS, varlen with FLASHC_CUDA_SM90_VARLEN), the rest and KV
     * caches on attn_decode.cu */
    const attn_fwd_variant *dkdv = attn_is_plain(p) ? NULL : dkdv_route(p);
    if (!attn_is_plain(p) && !dkdv) {
        const attn_fwd_variant *mv = mods_route(p);
        if (!mv)
            return cuda_attn_decode_supports(p);
        FLASHC_TRY(mods_supports(p));
        return mods_forced(p, mv);
    }
    if (p->dtype != FLASHC_BF16 && p->dtype != FLASHC_F16)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED_DTYPE,
                            "%s: the CUDA backend supports bf16 and fp16 storage only "
                            "(%s given)",
                            FN, flashc__dtype_name(p->dtype));
    if (p->D < 1 || p->D > 256)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "%s: the CUDA backend supports head dims 1 to 256 (got %lld)", FN,
                            (long long)p->D);
    const char *forced = forced_family();
    if (forced[0] && !family_known(forced))
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "%s: FLASHC_CUDA_KERNEL=%s names no CUDA kernel family "
                            "(sm80, sm90, sm90v3, sm90v4, sm90v4w, sm90v5, sm90v6, sm90v6d, "
                            "sm90v6w, sm90v6s, sm90v6n, sm90v7, sm90v8, sm90v8t, sm90v9, "
                            "sm90abl, sm90np, sm90v6h, sm90v6hnp, sm90v6hw, "
                            "or unset for the dispatcher's choice)",
                            FN, forced);
    if (!(p->scale > 0.0f))
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "%s: the CUDA backend needs softmax_scale > 0 (got %g)", FN,
                            (double)p->scale);
    /* Row and block indices are 32-bit inside the kernel (offsets are 64-bit); one grid
     * dimension holds every (Q tile, batch, head) block. */
    if (p->Sq > (1 << 30) || p->Sk > (1 << 30) ||
        (p->Sq + 63) / 64 * p->B * p->Hq > 0x7fffffff)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "%s: the CUDA backend takes Sq, Sk <= 2^30 and at most 2^31 - 1 "
                            "thread blocks of 64 query rows (got B = %lld, Sq = %lld, Sk = %lld, "
                            "Hq = %lld)",
                            FN, (long long)p->B, (long long)p->Sq, (long long)p->Sk,
                            (long long)p->Hq);
    /* before any runtime call of ours (the checks above only read the problem, so a bad
     * argument is named as such even on a host without a usable driver) */
    FLASHC_TRY(cuda_check_no_pending_error(FN));
    flashc_status st = FLASHC_OK;
    if ((st = cuda_check_operand(FN, "q", p->q, p->sq)) != FLASHC_OK ||
        (st = cuda_check_operand(FN, "k", p->k, p->sk)) != FLASHC_OK ||
        (st = cuda_check_operand(FN, "v", p->v, p->sv)) != FLASHC_OK ||
        (st = cuda_check_operand(FN, "o", p->o, p->so)) != FLASHC_OK)
        return st;
    const int cc = current_cc(&st);
    if (cc < 0)
        return st;
    const attn_fwd_variant *v = dkdv ? dkdv : pick_variant(p, cc, forced);
    if (!v && forced[0])
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "%s: FLASHC_CUDA_KERNEL=%s forces a kernel that does not serve this "
                            "problem (dtype %d, head dim %lld, compute capability %d.%d%s)%s%s%s",
                            FN, forced, (int)p->dtype, (long long)p->D, cc / 10, cc % 10,
                            cuda_rows_vec16(p) ? "" : ", rows not 16-byte aligned",
                            /* the ablation family's own terms */
                            strcmp(forced, "sm90abl") == 0
                                ? "; sm90abl serves bf16 at head dim 128 on sm_90 only, "
                                  "FLASHC_SM90_ABLATE="
                                : "",
                            strcmp(forced, "sm90abl") == 0 ? attn_fwd_sm90_ablate_names() : "",
                            strcmp(forced, "sm90abl") == 0 ? " (unset: none)" : "");
    if (!v)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "%s: no CUDA kernel for this device (compute capability %d.%d; "
                            "sm_80 or newer needed)",
                            FN, cc / 10, cc % 10);
    if ((p->br && p->br != v->block_q) || (p->bc && p->bc != v->block_k))
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "%s: the CUDA kernel for this problem (%s) uses tiles %d x %d; "
                            "pass block_q = block_k = 0 or those values (got %lld x %lld)",
                            FN, v->name, v->block_q, v->block_k, (long long)p->br,
                            (long long)p->bc);
    if (p->lse && (st = cuda_check_memory(FN, "lse", p->lse)) != FLASHC_OK)
        return st;
    return FLASHC_OK;
}

extern "C" size_t cuda_attn_fwd_workspace(const attn_problem *p)
{
    return attn_is_plain(p) || mods_route(p) || dkdv_route(p) ? 0
                                                               : cuda_attn_decode_workspace(p);
}

extern "C" flashc_status cuda_attn_fwd(const attn_problem *p, flashc_attn_stats *stats)
{
    const attn_fwd_variant *dkdv = attn_is_plain(p) ? NULL : dkdv_route(p);
    if (!attn_is_plain(p) && !dkdv) {
        const attn_fwd_variant *mv = mods_route(p);
        if (!mv)
            return cuda_attn_decode(p, stats);
        FLASHC_TRY(mods_forced(p, mv));
        return mods_run(p, mv, stats);
    }
    flashc_status st = cuda_check_no_pending_error(FN);
    if (st != FLASHC_OK)
        return st;
    const int cc = current_cc(&st);
    if (cc < 0)
        return st;
    /* non-NULL: cuda_attn_fwd_supports ran first and asked the same question */
    const attn_fwd_variant *v = dkdv ? dkdv : pick_variant(p, cc, forced_family());

    attn_fwd_args a;
    fwd_args_common(p, &a); /* the mods fields stay off */
    a.vec16 = cuda_rows_vec16(p);
    a.causal = p->causal;
    /* the sm90 kernels' only (v->min_cc, so that the stats below count what ran) */
    a.cshift = p->causal && v->min_cc >= 90 && sm90_cshift_enabled();
    if (p->causal && v->min_cc >= 90 && a.head_group > 0 && sm90_hgeven_enabled())
        a.head_group = sm90_even_head_group(p->B * p->Hq, a.head_group);
    a.skip_dead = v->min_cc >= 90 && sm90_skipdead_enabled();

    /* No error was pending at entry, so what the launch reports (cudaFuncSetAttribute, the
     * launch configuration, a bad stream) is this launch's own. */
    const cudaError_t err = v->launch(&a, (cudaStream_t)p->stream);
    if (err != cudaSuccess) {
        char what[96];
        snprintf(what, sizeof what, "launching %s", v->name);
        return cuda_device_error(FN, what, err);
    }

    const int64_t heads = p->B * p->Hq;
    const int64_t nqb = (p->Sq + v->block_q - 1) / v->block_q;
    stats->tile_pairs = heads * (a.cshift ? tile_pairs_end_aligned(p, v->block_q, v->block_k)
                                          : attn_tile_pairs_per_head(p, v->block_q, v->block_k));
    stats->tile_pairs_total = heads * nqb * ((p->Sk + v->block_k - 1) / v->block_k);
    stats->block_q = v->block_q;
    stats->block_k = v->block_k;
    return FLASHC_OK;
}

extern "C" int cuda_device_available(void)
{
    int n = 0;
    const cudaError_t pending = cudaPeekAtLastError();
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        if (pending == cudaSuccess) /* clear only an error of our own */
            (void)cudaGetLastError();
        return 0;
    }
    return n > 0;
}

extern "C" const char *cuda_build_info(void)
{
#ifndef FLASHC_CUDA_SM_STRING /* cuda.cmake defines it from FLASHC_CUDA_ARCHS */
#define FLASHC_CUDA_SM_STRING "sm_80 sm_90a"
#endif
    static char info[96];
    snprintf(info, sizeof info, "%s, nvcc %d.%d", FLASHC_CUDA_SM_STRING, __CUDACC_VER_MAJOR__,
             __CUDACC_VER_MINOR__);
    return info;
}
