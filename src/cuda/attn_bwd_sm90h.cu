/*
 * attn_bwd_sm90h.cu — the Hopper backward for the wide head dims (issue 12, helper bwd20,
 * 2026-12-05): family sm90h (FLASHC_CUDA_BWD_KERNEL=sm90h; its d 256 kernel the default at
 * d 256 on compute capability 9.0, the table at the end), two kernels, d 256 and
 * d 192, that serve D == Dv == 256 / 192 exactly and every D == Dv in (128, 256), a multiple
 * of 8, padded into the next one (136..184 on d 192, 200..248 on d 256) by the copy engine as
 * sm90v3u's padded entries are (tensor maps a.D wide, columns a.D..D - 1 of Q, K, V, dO
 * arriving as zeros; dK, dV stores cut at a.D, the postprocess cuts dQ). Every forced suite
 * and sanitizer passed on the H200 (2026-12-05, bench/gpu/s16_bwd20.sh).
 *
 * Why: sm90v3 keeps dK, dV of its warpgroup's 64 keys x D in registers (m64nD each): 2 x 64
 * floats a thread at d 128, 2 x 128 at d 256, which with S^T and dP^T does not fit in 240
 * registers. Above d 128 the H200 ran sm80p (mma.sync) at 0.39-0.83x SDPA-FA2.
 *
 * Shape (after FlashAttention-3's d 256 backward: 64 queries x 64 keys a step, dK / dV split
 * over the consumer warpgroups, P and dS through shared memory; our own layout and wrappers):
 *
 *  - a producer warpgroup (setmaxnreg 24; one lane works) loads K and V of the block's 64 keys
 *    once (TMA, 128-byte swizzle, D / 64 panels of 64 features) and Q, dO of each Q block (64
 *    rows) into a ring of stages (d 256: ONE stage, 32 + 32 KB, a second does not fit beside the
 *    rest; d 192: two), plus LSE and D by plain loads; full / empty mbarriers as sm90v3's,
 *    empty[s] completing once every consumer thread's wgmmas on Q, dO completed;
 *  - two consumer warpgroups (setmaxnreg 240). Warpgroup w:
 *      S^T = K Q^T and dP^T = V dO^T over the block's 64 keys (M) x its 32 queries [32 w, +32)
 *      (m64n32, k over the head dim), the softmax and dS in registers (16 + 16 floats), then P
 *      and dS stored transposed ([query][key], stmatrix .trans, sm90v3's dS store) into
 *      per-Q-block double buffers, one 256-thread named barrier (both warpgroups' halves);
 *      then, with A = P or dS read from shared memory M-major (imm-trans-a) and B = dO or Q
 *      MN-major, over the whole Q block (4 k-steps):
 *      d 256: dV[:, 128 w, +128) += P^T dO and dK[:, 128 w, +128) += dS^T Q (m64n128 each:
 *        64 + 64 floats a thread), dQ[:, 64 p, +64) = dS K for its panels p = 2 w, 2 w + 1
 *        over all 64 keys (bwd_dq_mma);
 *      d 192: warpgroup 0 dV += P^T dO, warpgroup 1 dK += dS^T Q, each m64n192 (96 floats a
 *        thread; the same instructions, the operands picked by w), and dQ[:, 64 p, +64) for
 *        each of the 3 panels over its keys [32 w, +32) (both warpgroups add into the same
 *        dQ rows);
 *      each dQ panel (m64n64, 32 floats) staged in shared memory per warp (16 rows x 64 floats,
 *      sm90v3's staging rows) and added by 16 lanes' bulk reduce-adds of 256 bytes into the
 *      fp32 accumulator; deterministic mode: each consumer warp waits for its turn (8 counts a
 *      K block) before its first add of the Q block and releases one count after its last, as
 *      sm90v3's base family (d 192: warpgroup 1's warps wait for 4 counts more, warpgroup 0's
 *      of the same block, whose rows they add into); the warps of a warpgroup add disjoint
 *      rows.
 *    Order per Q block: dQ's first panel issued, then dV, dK; its epilogue runs while dV, dK are
 *    on the tensor cores; the second panel issued; dV, dK waited and the stage handed back (the
 *    producer's next Q, dO load then runs under the remaining panels and their epilogues).
 *    P, dS double-buffered by Q block: a warpgroup writing buffer (it & 1) has passed the
 *    meeting of Q block it - 1, so the other warpgroup finished Q block it - 2 (its wgmmas
 *    waited) before: no second barrier.
 *
 * Shared memory (bwd90h_smem): d 256: K, V 32 KB each, Q, dO 32 KB each (one stage), P, dS
 * 2 x 8 KB each, dQ staging 2 x 17 KB (64 rows of 272 bytes per warpgroup), LSE, D, info,
 * barriers: 195.5 KB with the alignment slack; d 192: K, V 24 KB each, Q, dO 2 x 24 KB each,
 * the rest as d 256: 212.1 KB. One block per SM. The H_NODQ twins (sm90hs's dK / dV) have no
 * dQ staging and at d 256 two Q / dO stages: 225.1 KB (2026-12-07 afternoon, an H100: the split
 * backward 1.10-1.21x faster than with one stage; bench/RESULTS.md); at d 192 with 128-row steps
 * (sm90h2's twin) a ring of three 64-row Q / dO half stages (RING, below): 225.6 KB (2026-12-07
 * evening: 1.00-1.15x the one 128-row stage).
 *
 * sm90h2 (helper bwd22, 2026-12-05; FLASHC_CUDA_BWD_KERNEL=sm90h2, opt-in): the d 192 kernel
 * with 128 queries x 64 keys a step (BM = 128, a template parameter of the same kernel). Why:
 * the d 192 x 64 kernel ran level with sm80p on the H200 (0.97-1.00x). Two things bind it:
 *  - S^T, dP^T as m64n32 read 2 KB of A (K, V) + 1 KB of B per 64 x 32 x 16 step: ~22 flops
 *    a shared-memory byte against ~32 that the tensor cores need at 128 B / clock / SM; S^T
 *    and dP^T are 2 of the kernel's 5 products;
 *  - dQ: both warpgroups add partial dQ (over their 32 keys) into the same 64 rows x 192
 *    features: 96 KB of fp32 reduce-adds per 64 x 64 step (12 KB a MFLOP), twice d 256's
 *    rate (64 KB per 64 x 64 step of 10.5 MFLOP).
 * With 128 queries each warpgroup owns 64 of them: S^T, dP^T are m64n64 (32 flops / B), dV
 * (wg 0) and dK (wg 1) stay m64n192 over 8 query steps, and dQ of its own 64 rows x 3 panels
 * (m64n64 over all 64 keys, bwd_dq_mma) goes to disjoint rows: 96 KB of adds per 128 x 64
 * step, d 256's rate. Other shapes weighed: 96-key blocks (FA3's d 192 tiles) need dK, dV
 * swapped (m64n48, 28 flops / B) since 96 keys do not split into m64 tiles over two
 * warpgroups; three MMA warpgroups hold no more accumulators (the register file bounds 64 K
 * floats either way: dK, dV of 96 keys x 192 features are 36 K).
 * Registers (consumer thread, setmaxnreg 240): dV or dK m64n192 96 floats, S^T + dP^T 32 + 32
 * (dead before dQ: P, dS go through shared memory), dQ panel 32: peak ~96 + 64 + addressing.
 * ptxas (nvcc 13.0, sm_90a, -v -warn-spills): 168 at launch (384 x 168), 0 spill bytes, as
 * the 64-row kernels.
 * Shared memory (bytes): K, V 2 x 24,576; Q, dO ONE stage 2 x 49,152 (a second, 96 KB, does not
 * fit); P, dS one buffer each 2 x 16,384 (a second pair, 32 KB, does not fit: 15 KB spare);
 * dQ staging 2 x 64 x 272 = 34,816; LSE, D 2 x 512; info, barriers 40: 216,104 + 1,024
 * alignment slack = 217,128 (212.0 KB of 227). With one stage the next Q, dO load is issued
 * once both warpgroups' dV, dK waited (as at d 256), under dQ's second and third panels; the
 * single P / dS buffer is safe by the same ordering (the comment at sP). Deterministic mode:
 * turn counters per 64 rows (the table's sem_block_q), one per warpgroup (its 4 warps release
 * it), so the warpgroups never wait on each other and sm80's 64-row fallback fits the same
 * workspace.
 *
 * Deterministic mode's dQ path, two opt-in bits on the d 192 (sm90h2) and d 256 kernels:
 *  - H_DQP: each panel's adds issued as in fast mode (the staging rows reused once read) and
 *    completed once, after the last panel, before the release; the turn counter's first poll
 *    issued right after S^T, dP^T, its round trip under them;
 *  - H_REL (with H_DQP): that completion and the release deferred further, to the next Q
 *    block's first dQ panel, before its turn's wait (so no warp waits holding a count), the
 *    round trip under the next Q block's products.
 * The turns and counters are untouched: each dQ element still gets its adds in K block order,
 * one a Q block per block, so the bits are sm90h2's / sm90h's (test_late_release_d192_d256).
 * sm90h2l / sm90hl (H_DQP | H_REL; fast mode the base kernel): over one plane, on an H100
 * (2026-12-06, bench/gpu/s19_bwdl.sh) 0.90-1.19x the default's deterministic mode at d 256 (the
 * gain growing with the length: 1.10 / 1.19 at 16k) and 0.72-0.98x at d 192. The late release
 * takes the completion round trip off a block's own period but lengthens the lag between K
 * block n - 1 and n on a Q block by one Q block, which costs once per wave of blocks that
 * start together; deterministic planes (attn_bwd.cu's det_planes) run P such chains side by
 * side, and with their own plane counts the two are the deterministic default at d 256 / 192
 * since the next run (s23_lplanes.sh, the same H100 day: 0.98-1.19x / 1.02-1.08x the base
 * kernels' deterministic default; with every turn free, FLASHC_CUDA_BWD_DET_FREE, they reach
 * 0.70-0.81x fast mode: what the mode's completion and fences cost, the bound of this
 * design). Measured the same day and removed (helper bwd23; bench/RESULTS.md): the
 * blocks in groups of heads (sm90h2g / sm90hg, and sm90h2r / sm90hr with the late release),
 * 0.56-1.11x, worst under the causal mask, and H_DQP alone (sm90h2q / sm90hq), 0.99-1.03x.
 *
 * Served as sm90v3: dense only (varlen stays on sm80), causal (bottom-right), windows,
 * softcap, ALiBi (bwd_mod_elem), GQA (the block walks the group's heads, dK, dV summed in
 * registers), Sq != Sk, deterministic mode. Tensor maps that fail to encode: sm80's default
 * instance for the dims (bwd90h_fallback).
 */
#include "attn_bwd_common.cuh"
#include "attn_cuda.cuh"
#include "bwd_trace.cuh"
#include "ptx.cuh"
#include "ptx_sm90.cuh"
#include "tma_host.cuh"

#include <cuda.h> /* CUtensorMap and the driver's types only: the library never links libcuda */
#include <math.h>
#include <string.h>
#include <type_traits>

namespace {

/* H_BM: the Q block of the 64 x 64 kernels, and the rows of one deterministic turn counter in
 * every kernel of the file (sm90h2's 128-row Q block uses one counter per warpgroup half) */
constexpr int H_BM = 64, H_BN = 64, H_THREADS = 384;
constexpr int H_DQ_ROW = 272; /* dQ staging rows: 64 floats + 16 bytes (sm90v3's V3_DQ_ROW) */
constexpr int H_PRODUCER_REGS = 24, H_CONSUMER_REGS = 240;
static_assert((168 - H_PRODUCER_REGS) * 128 == (H_CONSUMER_REGS - 168) * 256,
              "setmaxnreg: the registers given cover the registers taken");
/* The kernel's bits: H_DET deterministic dQ, H_MODS softcap or ALiBi (per call), H_PAD the
 * padded entries (a.D == a.Dv <= D, a multiple of 8), H_EARLY (sm90h2e, BM 128 only) dV / dK
 * issued before dQ and two dQ accumulators, so that the stage goes back before any dQ panel;
 * H_DQP and H_REL (sm90h2l, sm90hl: deterministic mode only, the launch drops them in fast
 * mode) the dQ adds of a Q block completed once, before the release, rather than after each
 * panel, and that completion and the release a Q block later (the file's comment). Bit 4 was
 * H_GRP (the grouped order, removed); the others keep their values. */
enum : unsigned {
    H_DET = 1u << 0,
    H_MODS = 1u << 1,
    H_PAD = 1u << 2,
    H_EARLY = 1u << 3,
    H_DQP = 1u << 5,
    H_REL = 1u << 6,
    H_TRACE = 1u << 7, /* FLASHC_CUDA_BWD_TRACE: the consumers' timestamps (below) */
    /* FLASHC_CUDA_BWD_NO_DQ=1 (a diagnostic, not a kernel: attn_bwd_args.no_dq): the exact
     * plain fast-mode kernels without dQ's products, staging and adds (dQ comes out zero):
     * what the rest of the step costs, i.e. the dK / dV half of a backward that computed dQ in
     * a kernel of its own (issue 12's leave-one-out, bench/gpu/bench_bwd4.py's flashc_nodq).
     * These twins have their own shared-memory layout (bwd90h_smem's NODQ: no dQ staging rows,
     * and at d 256 a second Q / dO stage in their place), so since 2026-12-07 afternoon the
     * diagnostic at d 256 times sm90hs's dK / dV kernel, no longer the fused one less dQ */
    H_NODQ = 1u << 8,
    /* sm90hs, the split family: dK / dV by the H_NODQ twin (fast or with softcap / ALiBi, in
     * both modes), dQ by attn_bwd_dq_sm90.cu's kernel of its own; deterministic by construction
     * (no fp32 adds: each dQ element is one thread's sum in a fixed order) */
    H_SPLIT = 1u << 9,
};

/* H_TRACE's record (bwd90h_trace_buf, written by the host as FLASHC_CUDA_BWD_TRACE's file, and
 * read by bench/gpu/bwd_trace.py): per thread block (linear index y * gridDim.x + x) a header of
 * H_TR_HDR words, then H_TR_IT words for each Q-block step it (up to bwd90h_trace_maxit):
 *  header: 0 %globaltimer and 1 %clock64 as the consumers start, 2 and 3 as they end (after dK,
 *          dV are stored), 4 %smid, 5 the K block, 6 batch x KV head, 7 the steps it runs;
 *  step:   warpgroup w's %clock64 at 4 w + 0 its Q block's data arrived (the full barrier), + 1
 *          its first dQ panel's epilogue began, + 2 the turn was acquired (deterministic mode;
 *          0 if the warpgroup takes none), + 3 its last panel's adds issued (and, in
 *          deterministic mode without H_REL, released); 8 the Q block's first row | head << 32.
 * Lane 0 of each warpgroup's first warp writes its warpgroup's words. The twins have the
 * untraced kernels' 168 registers and no spill (ptxas, since the plane's counter offset is
 * folded into one int, 2026-12-06; sm90h2l's deterministic twin spilled 4 bytes before), and the
 * untraced kernels' code is unchanged by the twins (text-identical cubins). */
constexpr int H_TR_HDR = 8, H_TR_IT = 10;

/* Q / dO stages: one at d 256 and in sm90h2 (a second does not fit), two at d 192 x 64. The
 * H_NODQ kernels (sm90hs's dK / dV) have no dQ staging rows (34 KB), which at d 256 makes room
 * for a second stage (225.1 KB of 227): with one, the next Q block's Q, dO (64 KB) could only be
 * asked for once both warpgroups' dV, dK wgmmas had completed, and with no dQ panels after them
 * to hide it the whole load stood between two steps. sm90h2's second stage (96 KB) still does
 * not fit. */
template <int D, int BM, bool NODQ> constexpr int bwd90h_stages()
{
    return D == 192 && BM == 64 ? 2 : D == 256 && NODQ ? 2 : 1;
}
/* P / dS buffers: two (by Q block) in the 64-row kernels; one in sm90h2, where the single Q / dO
 * stage orders their reuse (the kernel's comment at sP). */
template <int BM> constexpr int bwd90h_pbufs() { return BM == 64 ? 2 : 1; }

/* Byte offsets from a 1024-byte aligned base; a tile of R rows x D columns is D / 64 panels of
 * R rows x 128 bytes (ptx_sm90.cuh's swizzle, which TMA writes). */
template <int D, int BM, bool NODQ = false> struct bwd90h_smem {
    /* RING: sm90h2's NODQ twin, whose Q / dO go through a ring of three 64-row half stages (the
     * kernel's comment at RING): NS counts the halves, SR is a stage's rows */
    static constexpr bool RING = NODQ && BM == 128;
    static constexpr int NS = RING ? 3 : bwd90h_stages<D, BM, NODQ>();
    static constexpr int SR = RING ? 64 : BM;
    static constexpr int NPB = bwd90h_pbufs<BM>();
    static constexpr int KV_BYTES = H_BN * D * 2;
    static constexpr int QBUF = SR * D * 2;    /* one stage of Q (or dO) */
    static constexpr int PBUF = BM * H_BN * 2; /* P or dS of a Q block: [BM q][128 B] */
    static constexpr int K = 0;
    static constexpr int V = K + KV_BYTES;
    static constexpr int Q = V + KV_BYTES;     /* [NS][D / 64][BM][128 B] */
    static constexpr int DO = Q + NS * QBUF;
    static constexpr int P = DO + NS * QBUF;   /* [NPB][PBUF] */
    static constexpr int DS = P + NPB * PBUF;  /* [NPB][PBUF] */
    static constexpr int DQ = DS + NPB * PBUF; /* float [2 wg][64 rows][272 B] */
    static constexpr int LSE = DQ + (NODQ ? 0 : 2 * 64 * H_DQ_ROW); /* float [NS][SR] */
    static constexpr int DSUM = LSE + NS * SR * 4;       /* float [NS][SR] */
    static constexpr int INFO = DSUM + NS * SR * 4;      /* int [NS][4] */
    static constexpr int BARS = INFO + NS * 16;          /* kv_full, full[NS], empty[NS] */
    static constexpr int TOTAL = BARS + (1 + 2 * NS) * 8;
    static constexpr int LAUNCH = TOTAL + 1024;
    static_assert(LAUNCH <= 227 * 1024, "one block per SM fits");
    static_assert(QBUF % 1024 == 0 && P % 1024 == 0 && DS % 1024 == 0 && DQ % 16 == 0 &&
                      BARS % 8 == 0,
                  "swizzle atoms 1024-byte aligned; bulk sources 16; mbarriers 8");
};

} // namespace

/* H_TRACE's buffer and its steps per block (the host sets both before a traced launch) */
static __device__ uint64_t *bwd90h_trace_buf;
static __device__ int bwd90h_trace_maxit;

#if FLASHC_PTX_SM90A
/* wgmma m64nNk16 with A and B from shared memory, each K-major (0) or MN-major (1): TA, TB
 * (imm-trans-a / -b; bf16 / fp16 only). N = 32: S^T, dP^T (TA = TB = 0); N = 128 (d 256) and
 * 192 (d 192): dV, dK (TA = TB = 1: A = P or dS stored [query][key], B = dO or Q [query][feature]). */
#define H_F(i) "+f"(d[i][0]), "+f"(d[i][1]), "+f"(d[i][2]), "+f"(d[i][3])
#define H_D4 H_F(0), H_F(1), H_F(2), H_F(3)
#define H_D16                                                                                      \
    H_D4, H_F(4), H_F(5), H_F(6), H_F(7), H_F(8), H_F(9), H_F(10), H_F(11), H_F(12), H_F(13),     \
        H_F(14), H_F(15)
#define H_D24                                                                                      \
    H_D16, H_F(16), H_F(17), H_F(18), H_F(19), H_F(20), H_F(21), H_F(22), H_F(23)
#define H_R16 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define H_R64                                                                                      \
    H_R16 ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "    \
          "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "       \
          "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define H_R96                                                                                      \
    H_R64 ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "    \
          "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define H_SS(N, NF, DL, REGS, IA, IB, IP, ITA, ITB, T, TS)                                        \
    template <int TA, int TB>                                                                      \
    static __device__ __forceinline__ void bwd90h_ss_m64n##N(T, float(&d)[NF][4], uint64_t desc_a, \
                                                             uint64_t desc_b, int scale_d)         \
    {                                                                                              \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #IP ", 0;\n"                            \
                     "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TS "." TS " {" REGS         \
                     "}, %" #IA ", %" #IB ", p, 1, 1, %" #ITA ", %" #ITB ";\n}\n"                  \
                     : DL                                                                          \
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TA), "n"(TB));                  \
    }
H_SS(32, 4, H_D4, H_R16, 16, 17, 18, 19, 20, __nv_bfloat16, "bf16")
H_SS(32, 4, H_D4, H_R16, 16, 17, 18, 19, 20, __half, "f16")
H_SS(128, 16, H_D16, H_R64, 64, 65, 66, 67, 68, __nv_bfloat16, "bf16")
H_SS(128, 16, H_D16, H_R64, 64, 65, 66, 67, 68, __half, "f16")
H_SS(192, 24, H_D24, H_R96, 96, 97, 98, 99, 100, __nv_bfloat16, "bf16")
H_SS(192, 24, H_D24, H_R96, 96, 97, 98, 99, 100, __half, "f16")
#undef H_SS
#undef H_R96
#undef H_D24
#undef H_R64
#undef H_R16
#undef H_D16
#undef H_D4
#undef H_F

/* dV += P^T dO or dK += dS^T Q over the Q block's BM queries (BM / 16 steps of 16): A (P or dS
 * at a_s, [query][key]) read M-major, B (dO or Q panels from b_s, [panel][query][128 B])
 * MN-major, the panels LBO = BM rows x 128 B apart; N = 128 (two panels) or 192 (three). */
template <typename T, int BM, int NF>
static __device__ __forceinline__ void bwd90h_kv_mma(float (&acc)[NF][4], uint32_t a_s,
                                                     uint32_t b_s)
{
#pragma unroll
    for (int kk = 0; kk < BM / 16; kk++) {
        const uint64_t da = ptx_wgmma_desc(a_s + kk * 16 * 128, BM * 128, 1024);
        const uint64_t db = ptx_wgmma_desc(b_s + kk * 16 * 128, BM * 128, 1024);
        if constexpr (NF == 16)
            bwd90h_ss_m64n128<1, 1>(T(), acc, da, db, 1);
        else
            bwd90h_ss_m64n192<1, 1>(T(), acc, da, db, 1);
    }
}

/* The deterministic turn counter of the 64-row block m of head h, batch b (a.sem's index;
 * counters per H_BM = 64 rows, split 1: the preprocess zeroes them; sm90h2's Q block m is the
 * 64-row blocks 2 m, 2 m + 1) */
static __device__ __forceinline__ int bwd90h_turn_counter(const attn_bwd_args &a, int b, int h,
                                                           int m)
{
    return (int)(((int64_t)b * a.Hq + h) * ((a.Sq + H_BM - 1) / H_BM) + m);
}
#endif

/* T: __nv_bfloat16 or __half; D: 256 or 192; BM: 64, or 128 at d 192 (sm90h2); F: H_* bits.
 * Tensor maps (D, S, H, B) of q, dout (boxes 64 x BM) and k, v (64 x BN), a.D wide (H_PAD:
 * the copy engine pads to D). Grid: (K/V blocks of BN keys, B Hkv); under DET with an upper key
 * bound the K blocks run in reverse (bwd_turn).
 * What a consumer warpgroup w owns after the meeting, by head dim:
 *  - d 256: dV and dK of the 64 keys x features [128 w, +128) (two m64n128 accumulators), and dQ
 *    of the 64 queries x panels 2 w, 2 w + 1 over all 64 keys;
 *  - d 192: warpgroup 0 dV, warpgroup 1 dK, each of the 64 keys x all 192 features (one m64n192
 *    accumulator: the same instructions, the operands chosen by w), and dQ of the 64 queries x
 *    each of the 3 panels over its keys [32 w, +32): both warpgroups add into the same dQ rows
 *    (deterministic mode: warpgroup 1's warps after warpgroup 0's, 4 counts later);
 *  - d 192, BM 128 (sm90h2): dV (w 0) or dK (w 1) as d 192's, over 128 queries, and dQ of its
 *    queries [64 w, +64) x each of the 3 panels over all 64 keys (deterministic mode: its own
 *    64-row turn counter). */
template <typename T, int D, int BM, unsigned F>
__global__ void __launch_bounds__(H_THREADS, 1)
    attn_bwd_sm90h_kernel(const __grid_constant__ CUtensorMap tm_q,
                          const __grid_constant__ CUtensorMap tm_do,
                          const __grid_constant__ CUtensorMap tm_k,
                          const __grid_constant__ CUtensorMap tm_v, const attn_bwd_args a)
{
#if FLASHC_PTX_SM90A
    constexpr bool DET = F & H_DET, MODS = F & H_MODS, PAD = F & H_PAD;
    using L = bwd90h_smem<D, BM, (F & H_NODQ) != 0>;
    constexpr int BN = H_BN, NS = L::NS;
    constexpr bool D192 = D == 192;
    /* WIDE: sm90h2, 128 queries a step; each consumer warpgroup owns the rows [64 wg, +64) for
     * S^T, dP^T and dQ, and (as d 192's 64-row kernel) dV (wg 0) or dK (wg 1) of all features */
    constexpr bool WIDE = BM == 128;
    constexpr bool EARLY = F & H_EARLY;
    constexpr bool DQP = F & H_DQP, REL = F & H_REL, TRACE = F & H_TRACE, NODQ = F & H_NODQ;
    /* RING (sm90h2's NODQ twin, sm90hs's d 192 dK / dV): Q, dO through a ring of three 64-row
     * half stages instead of one 128-row stage (its second does not fit; without the dQ staging
     * a third half does). Q block it takes halves 2 it (rows [0, 64): warpgroup 0's S^T, dP^T)
     * and 2 it + 1 (warpgroup 1's); both warpgroups' dV / dK read both, their k-steps over each
     * half a committed group of its own, so that a half goes back once its group completed.
     * So Q block it + 1's first half loads under all of Q block it, its second under the second
     * half of it's dV / dK. The single P / dS buffer is then no longer ordered by the stage (a
     * warpgroup's full barrier can complete while the other one's dV / dK of the previous Q block
     * still read its rows): each warpgroup, its dV / dK waited, arrives on named barrier 2 + wg,
     * and the other syncs on it before storing its next P, dS. */
    constexpr bool RING = L::RING;
    static_assert(!RING || (NODQ && WIDE && L::NS == 3), "RING: sm90h2's NODQ twin");
    static_assert(!NODQ || (!DET && !EARLY && !TRACE && !DQP),
                  "H_NODQ: the fast-mode kernels (the diagnostic, and sm90hs's dK / dV)");
    static_assert(!DQP || (DET && !EARLY), "sm90h2l / sm90hl: deterministic mode only");
    static_assert(!TRACE || (!PAD && !EARLY && !MODS), "H_TRACE: the exact plain instances");
    static_assert(!REL || DQP, "H_REL: H_DQP's single completion, a Q block late");
    static_assert((D == 256 && BM == 64) || (D == 192 && (BM == 64 || BM == 128)),
                  "the three instances");
    static_assert(L::NPB == 2 || NS == 1 || RING,
                  "one P / dS buffer: its reuse ordered by the stage (RING: by named barriers)");
    constexpr int NP = D / 64;            /* feature panels                                  */
    constexpr int QW = BM / 2;            /* queries of S^T, dP^T per consumer warpgroup     */
    constexpr int NT = QW / 8;            /* their 8-query column tiles                      */
    constexpr int QROWS = WIDE ? 64 : 0;  /* a warpgroup's first dQ row: 64 wg (WIDE) or 0   */
    constexpr int KVF = D192 ? D : D / 2; /* features of a dK / dV accumulator               */
    constexpr int KVT = KVF / 8;          /* its 8-feature column tiles                      */
    constexpr int NQP = D192 ? NP : NP / 2; /* dQ panels per consumer warpgroup              */
    static_assert(NQP >= 2, "the stage is handed back after the second dQ panel's issue");
    static_assert(!EARLY || (WIDE && NQP == 3), "H_EARLY: sm90h2's three dQ panels");

    extern __shared__ uint8_t smem_raw[];
    const uint32_t raw = ptx_smem_addr(smem_raw);
    const uint32_t base = (raw + 1023u) & ~1023u;
    uint8_t *sbase = smem_raw + (base - raw);
    const uint32_t sK = base + L::K, sV = base + L::V;
    const uint32_t kv_full = base + L::BARS;
    auto full = [&](int s) { return base + L::BARS + 8u * (1 + s); };
    auto empty = [&](int s) { return base + L::BARS + 8u * (1 + NS + s); };

    const int tid = (int)threadIdx.x, warp = tid / 32, lane = tid % 32;
    const bwd_range rg = bwd_range_of(a);
    int n_block, bh;
    bwd_block_of(a, rg, DET, &n_block, &bh);
    const int b = bh / a.Hkv, hk = bh % a.Hkv;
    const int n0 = n_block * BN;
    int m_begin, m_end;
    bwd_q_blocks(a, rg, n0, BN, BM, &m_begin, &m_end);
    const int per_head = max(0, m_end - m_begin);
    const int total = a.group * per_head;

    if (tid == 0) {
        ptx_mbarrier_init(kv_full, 1);
        for (int s = 0; s < NS; s++) {
            ptx_mbarrier_init(full(s), 1 + 32); /* the expect_tx arrival + every producer lane's */
            ptx_mbarrier_init(empty(s), 256);   /* every consumer thread */
        }
        ptx_fence_mbarrier_init();
    }
    __syncthreads(); /* the only block-wide barrier: the roles part here */

    if (warp < 4) {
        /* ---- producer ---- */
        ptx_setmaxnreg_dec<H_PRODUCER_REGS>();
        if (warp != 0 || total == 0)
            return;
        if (lane == 0) {
            ptx_prefetch_tensormap(&tm_q);
            ptx_prefetch_tensormap(&tm_do);
            ptx_mbarrier_arrive_expect_tx(kv_full, 2 * L::KV_BYTES);
            for (int p = 0; p < NP; p++) {
                ptx_tma_load_4d(sK + p * BN * 128, &tm_k, kv_full, 64 * p, n0, hk, b);
                ptx_tma_load_4d(sV + p * BN * 128, &tm_v, kv_full, 64 * p, n0, hk, b);
            }
        }
        int h = hk * a.group, m = m_begin;
        /* RING: each Q block in two stages, its rows [0, 64) then [64, 128) (tensor maps of
         * 64-row boxes); otherwise one stage of BM rows. it: the stage's index in the ring. */
        constexpr int SR = L::SR, UPS = RING ? 2 : 1;
        for (int it = 0; it < total * UPS; it++) {
            const int s = it % NS;
            const int m0 = m * BM, r0 = m0 + (RING ? 64 * (it & 1) : 0);
            /* the stage's previous Q block is done (a fresh barrier passes parity 1 at once) */
            ptx_mbarrier_wait(empty(s), (((uint32_t)(it / NS)) & 1u) ^ 1u);
            if (lane == 0) {
                int *info = (int *)(sbase + L::INFO) + 4 * s;
                info[0] = m0, info[1] = h;
                info[2] = bwd90h_turn_counter(a, b, h, WIDE ? 2 * m : m);
                info[3] = DET ? bwd_turn(rg, n_block, (int)gridDim.x, m, BM, BN) : 0;
                ptx_mbarrier_arrive_expect_tx(full(s), 2 * L::QBUF);
                const uint32_t sQ = base + L::Q + s * L::QBUF, sdO = base + L::DO + s * L::QBUF;
                for (int p = 0; p < NP; p++) {
                    ptx_tma_load_4d(sQ + p * SR * 128, &tm_q, full(s), 64 * p, r0, h, b);
                    ptx_tma_load_4d(sdO + p * SR * 128, &tm_do, full(s), 64 * p, r0, h, b);
                }
            }
            /* LSE and D rows (rows past Sq: zeros; with Q, dO zero there they add nothing to
             * dK, dV, and their dQ rows are never added), stored by this lane, whose arrival
             * (release) then publishes them, as sm90v3's */
            float lse_r[SR / 32], d_r[SR / 32];
#pragma unroll
            for (int i = 0; i < SR / 32; i++) {
                const int64_t row = r0 + lane + 32 * i;
                const bool valid = row < a.Sq;
                lse_r[i] = valid ? a.lse[b * a.slse[0] + h * a.slse[1] + row * a.slse[2]] : 0.0f;
                d_r[i] = valid ? a.dsum[((int64_t)b * a.Hq + h) * a.Sq + row] : 0.0f;
            }
            float *sl = (float *)(sbase + L::LSE) + s * SR;
            float *sd = (float *)(sbase + L::DSUM) + s * SR;
#pragma unroll
            for (int i = 0; i < SR / 32; i++)
                sl[lane + 32 * i] = lse_r[i], sd[lane + 32 * i] = d_r[i];
            ptx_mbarrier_arrive(full(s));
            if ((!RING || (it & 1)) && ++m == m_end)
                h++, m = m_begin;
        }
        return;
    }

    /* ---- consumers ---- */
    ptx_setmaxnreg_inc<H_CONSUMER_REGS>();
    const int cw = warp - 4, wg = cw / 4, wq = cw % 4;
    const int g = lane / 4, t = lane % 4;
    const uint32_t stage_s = base + L::DQ + wg * 64 * H_DQ_ROW; /* the warpgroup's 64 rows */
    /* H_TRACE: this block's record, its header written here and at the end */
    auto trow = [&]() {
        return bwd_trace_row<H_TR_HDR, H_TR_IT>(bwd90h_trace_buf, bwd90h_trace_maxit);
    };
    (void)trow;
    if constexpr (TRACE) {
        if (cw == 0 && lane == 0)
            bwd_trace_head_start(trow(), n_block, bh, total);
    }
    auto trace = [&](int it, int ev) {
        if constexpr (TRACE) {
            if (wq == 0 && lane == 0)
                bwd_trace_put<H_TR_HDR, H_TR_IT>(bwd90h_trace_buf, bwd90h_trace_maxit, it,
                                                 4 * wg + ev, ptx_clock64());
        }
    };

    /* d 256: kv0 = dV, kv1 = dK (features [128 wg, +128)); d 192: kv0 = dV (wg 0) or dK
     * (wg 1), all features; kv1 unused */
    float kv0[KVT][4], kv1[D192 ? 1 : KVT][4];
#pragma unroll
    for (int dt = 0; dt < KVT; dt++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            kv0[dt][e] = 0.0f;
    if constexpr (!D192) {
#pragma unroll
        for (int dt = 0; dt < KVT; dt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                kv1[dt][e] = 0.0f;
    }

    /* REL: the turn counter this warp still owes its count of the previous Q block (its adds
     * issued, their completion not yet waited for), or null */
    int *held = nullptr;
    (void)held;
    if (total > 0)
        ptx_mbarrier_wait(kv_full, 0);
    for (int it = 0; it < total; it++) {
        /* the stage of this warpgroup's S^T, dP^T (RING: its own half, 2 it + wg) */
        const int uo = RING ? 2 * it + wg : it, st = uo % NS;
        ptx_mbarrier_wait(full(st), ((uint32_t)(uo / NS)) & 1u);
        trace(it, 0);
        const int *info = (const int *)(sbase + L::INFO) + 4 * st;
        const int m0 = info[0], h = info[1];
        if constexpr (TRACE) {
            if (cw == 0 && lane == 0)
                bwd_trace_put<H_TR_HDR, H_TR_IT>(bwd90h_trace_buf, bwd90h_trace_maxit, it, 8,
                                                 (uint32_t)m0 | (uint64_t)h << 32);
        }
        /* deterministic mode: this K block's turn on the Q block dealt to plane turn % planes
         * as its turn there (attn_bwd_args.planes; one plane unless FLASHC_CUDA_BWD_DET_PLANES),
         * the plane's counter of this warpgroup's rows (sm90h2: its own 64; else the block's) */
        const int turn = DET ? info[3] / a.planes : 0;
        /* (an int: planes x counters <= the rows / 8, far below 2^31 for any workspace that
         * can be allocated; the plane recomputed from info[3] where dQ's rows are addressed,
         * rather than kept, so that no register more lives across the products) */
        const int cnt = DET ? (int)(info[3] % a.planes * a.sem_plane) + info[2] + (WIDE ? wg : 0)
                            : 0;
        const uint32_t sQ = base + L::Q + st * L::QBUF, sdO = base + L::DO + st * L::QBUF;
        const float *lrow = (const float *)(sbase + L::LSE) + st * L::SR;
        const float *drow = (const float *)(sbase + L::DSUM) + st * L::SR;
        /* lrow, drow index: query qi of the block at qi - q_at (RING: a half's own 64 rows) */
        const int q_at = RING ? QW * wg : 0;
        /* P, dS of this Q block. Two buffers (64-row kernels): see the header. One (sm90h2,
         * NS == 1): the full barrier passed above completed after the producer's wait on the
         * stage's empty barrier, which every consumer thread arrived on only after its dV / dK
         * wgmmas of the previous Q block (the only readers of the other warpgroup's half)
         * completed; dQ reads only this warpgroup's own rows. */
        const uint32_t sP = base + L::P + (L::NPB == 2 ? (it & 1) : 0) * L::PBUF;
        const uint32_t sdS = base + L::DS + (L::NPB == 2 ? (it & 1) : 0) * L::PBUF;

        /* S^T = K Q^T, then dP^T = V dO^T: the block's 64 keys x this warpgroup's queries
         * [QW wg, +QW), k over the head dim (m64n32 in the 64-row kernels, m64n64 in sm90h2);
         * two committed groups, S^T first */
        float s[NT][4], dp[NT][4];
        auto st_mma = [&](float(&acc)[NT][4], uint32_t sa, uint32_t sb) {
#pragma unroll
            for (int ks = 0; ks < D / 16; ks++) {
                const uint64_t da =
                    ptx_wgmma_desc(sa + (ks / 4) * BN * 128 + (ks % 4) * 32, 16, 1024);
                const uint64_t db = ptx_wgmma_desc(
                    sb + (ks / 4) * L::SR * 128 + (RING ? 0 : wg * QW * 128) + (ks % 4) * 32,
                    16, 1024);
                if constexpr (NT == 4)
                    bwd90h_ss_m64n32<0, 0>(T(), acc, da, db, ks > 0);
                else
                    ptx_wgmma_ss_m64n64k16<0>(T(), acc, da, db, ks > 0);
            }
            ptx_wgmma_commit();
        };
        ptx_wgmma_fence();
        st_mma(s, sK, sQ);
        st_mma(dp, sV, sdO);
        /* DQP: lane 0's first look at this Q block's turn counter, issued here so that its
         * round trip to L2 runs under S^T, dP^T, the softmax and dQ's first panel (a warpgroup
         * with no row below Sq takes no turn: dq_out's turns) */
        int seen = 0;
        (void)seen;
        if constexpr (DQP) {
            if (lane == 0 && (!WIDE || m0 + 64 * wg < a.Sq))
                seen = ptx_ld_acquire_gpu(a.sem + cnt);
        }

        /* s[nt][e]: key key0 (+8 for e >= 2), query qi = QW wg + 8 nt + 2t + (e & 1) */
        const int key0 = n0 + wq * 16 + g;
        const bool need_mask = bwd_tile_needs_mask(a, rg, m0, BM, n0, BN);
        if constexpr (!MODS) {
            /* P^T = 2^(S^T s' - L') while dP^T is still on the tensor cores */
            ptx_wgmma_wait<1>();
            ptx_fence_operands(s);
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int qi = QW * wg + nt * 8 + 2 * t + (e & 1);
                    const int key = key0 + (e >= 2 ? 8 : 0);
                    float p =
                        ptx_exp2(fmaf(s[nt][e], a.scale_log2, -bwd_lse_log2(lrow[qi - q_at])));
                    if (need_mask && (key >= a.Sk || bwd_outside(rg, key - (m0 + qi))))
                        p = 0.0f;
                    s[nt][e] = p;
                }
            ptx_wgmma_wait<0>();
            ptx_fence_operands(dp);
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    dp[nt][e] = s[nt][e] *
                                (dp[nt][e] - drow[QW * wg - q_at + nt * 8 + 2 * t + (e & 1)]);
        } else {
            /* softcap's derivative needs the raw score beside dP: both first */
            ptx_wgmma_wait<0>();
            ptx_fence_operands(s);
            ptx_fence_operands(dp);
            const float slope = bwd_slope(a, b, h);
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int qi = QW * wg + nt * 8 + 2 * t + (e & 1);
                    const int key = key0 + (e >= 2 ? 8 : 0);
                    float p, ds;
                    bwd_mod_elem(a, slope, s[nt][e], dp[nt][e], bwd_lse_log2(lrow[qi - q_at]),
                                 drow[qi - q_at], key - (m0 + qi) - rg.diag, &p, &ds);
                    if (need_mask && (key >= a.Sk || bwd_outside(rg, key - (m0 + qi))))
                        p = ds = 0.0f;
                    s[nt][e] = p;
                    dp[nt][e] = ds;
                }
        }

        /* P and dS stored transposed, [query][key] (one 128-byte swizzled panel each), as
         * sm90v3 stores dS: fragment i of the A-layout pack of tiles 2 kk, 2 kk + 1 is keys
         * 16 wq + 8 (i & 1) + g, queries 8 (2 kk + (i >> 1)) + 2t; stored row j of matrix i is
         * query QW wg + 8 (2 kk + (i >> 1)) + j, key chunk 2 wq + (i & 1) */
        if constexpr (RING) {
            /* the other warpgroup's dV / dK of Q block it - 1 have read these rows (RING) */
            if (it > 0) { /* barrier 2 + (1 - wg), its id a constant in each branch */
                if (wg)
                    ptx_named_bar_sync(2, 256);
                else
                    ptx_named_bar_sync(3, 256);
            }
        }
        {
            const int i = lane / 8, j = lane % 8;
            const int c = 2 * wq + (i & 1);
#pragma unroll
            for (int kk = 0; kk < NT / 2; kk++) {
                uint32_t pa[4], da[4];
                pa[0] = ptx_pack2(T(), s[2 * kk][0], s[2 * kk][1]);
                pa[1] = ptx_pack2(T(), s[2 * kk][2], s[2 * kk][3]);
                pa[2] = ptx_pack2(T(), s[2 * kk + 1][0], s[2 * kk + 1][1]);
                pa[3] = ptx_pack2(T(), s[2 * kk + 1][2], s[2 * kk + 1][3]);
                da[0] = ptx_pack2(T(), dp[2 * kk][0], dp[2 * kk][1]);
                da[1] = ptx_pack2(T(), dp[2 * kk][2], dp[2 * kk][3]);
                da[2] = ptx_pack2(T(), dp[2 * kk + 1][0], dp[2 * kk + 1][1]);
                da[3] = ptx_pack2(T(), dp[2 * kk + 1][2], dp[2 * kk + 1][3]);
                const int q = QW * wg + (2 * kk + (i >> 1)) * 8 + j;
                const uint32_t off = (uint32_t)(q * 128 + ((c ^ (q & 7)) * 16));
                ptx_stmatrix_x4_trans(sP + off, pa);
                ptx_stmatrix_x4_trans(sdS + off, da);
            }
        }
        ptx_fence_proxy_async_shared(); /* P, dS, for the wgmmas after the meeting */
        /* the consumers' one meeting per Q block: both warpgroups' query halves of P, dS */
        ptx_named_bar_sync(1, 256);
        if constexpr (RING) {
            /* the other warpgroup's half of Q, dO, for dV / dK (its data in this thread's view;
             * waited before the wgmma fence, so that no wait loop sits between it and them) */
            const int uh = 2 * it + 1 - wg;
            ptx_mbarrier_wait(full(uh % NS), ((uint32_t)(uh / NS)) & 1u);
        }

        /* dQ panel pi of this warpgroup (one committed group): d 256 panel 2 wg + pi over the
         * 64 keys (bwd_dq_mma); sm90h2 panel pi of its rows [64 wg, +64) over the 64 keys; d 192
         * x 64 panel pi over keys [32 wg, +32) (2 steps) */
        float dq0[8][4], dq1[EARLY ? 8 : 1][4]; /* dQ panels (dq1: H_EARLY's second) */
        auto dq_mma = [&](float(&acc)[8][4], int pi) {
            if constexpr (!D192) {
                bwd_dq_mma<T, 64, BN, false>(acc, sdS, sK, NQP * wg + pi);
            } else if constexpr (WIDE) {
                bwd_dq_mma<T, 64, BN, false>(acc, sdS + wg * 64 * 128, sK, pi);
            } else {
                ptx_wgmma_fence();
#pragma unroll
                for (int ks = 0; ks < 2; ks++) {
                    const uint32_t dsa = sdS + (2 * wg + ks) * 32;
                    const uint32_t kb = sK + pi * BN * 128 + (32 * wg + 16 * ks) * 128;
                    ptx_wgmma_ss_m64n64k16<1>(T(), acc, ptx_wgmma_desc(dsa, 16, 1024),
                                              ptx_wgmma_desc(kb, BN * 128, 1024), ks > 0);
                }
                ptx_wgmma_commit();
            }
        };
        /* dQ's first panel (one group), then dV, dK (one group); H_EARLY: below */
        if constexpr (NODQ)
            ptx_wgmma_fence(); /* no dQ (bwd_dq_mma's fence): dV, dK alone */
        else if constexpr (!EARLY)
            dq_mma(dq0, 0);
        else
            ptx_wgmma_fence(); /* dV / dK first: no dQ issue (bwd_dq_mma's fence) before them */
        ptx_fence_operands(kv0);
        if constexpr (RING) {
            /* dV (wg 0) or dK (wg 1) over the block's 128 queries: the k-steps of each 64-row
             * half (stage 2 it + h) a group of their own, each stage handed back once its group
             * completed (the other warpgroup's half waited for at the meeting) */
            const uint32_t a_s = wg ? sdS : sP, b_t = base + (wg ? L::Q : L::DO);
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                const uint32_t b_s = b_t + ((2 * it + hh) % NS) * L::QBUF;
#pragma unroll
                for (int kk = 0; kk < 4; kk++) {
                    const uint64_t da =
                        ptx_wgmma_desc(a_s + (64 * hh + 16 * kk) * 128, BM * 128, 1024);
                    const uint64_t db = ptx_wgmma_desc(b_s + kk * 16 * 128, 64 * 128, 1024);
                    bwd90h_ss_m64n192<1, 1>(T(), kv0, da, db, 1);
                }
                ptx_wgmma_commit();
            }
            ptx_wgmma_wait<1>();
            ptx_mbarrier_arrive(empty((2 * it) % NS));
            ptx_wgmma_wait<0>();
            ptx_fence_operands(kv0);
            ptx_mbarrier_arrive(empty((2 * it + 1) % NS));
            /* P, dS free for the other warpgroup's next store (its sync above) */
            if (it + 1 < total) { /* barrier 2 + wg */
                if (wg)
                    ptx_named_bar_arrive(3, 256);
                else
                    ptx_named_bar_arrive(2, 256);
            }
            continue;
        }
        if constexpr (!D192) {
            ptx_fence_operands(kv1);
            bwd90h_kv_mma<T, BM>(kv0, sP, sdO + NQP * wg * BM * 128);
            bwd90h_kv_mma<T, BM>(kv1, sdS, sQ + NQP * wg * BM * 128);
        } else {
            bwd90h_kv_mma<T, BM>(kv0, wg ? sdS : sP, wg ? sQ : sdO);
        }
        ptx_wgmma_commit();
        if constexpr (NODQ) {
            /* dV, dK waited, the stage handed back: the step ends without dQ */
            ptx_wgmma_wait<0>();
            ptx_fence_operands(kv0);
            if constexpr (!D192)
                ptx_fence_operands(kv1);
            ptx_mbarrier_arrive(empty(st));
            continue;
        }

        /* dQ's panels: this warp's 16 rows (acc[j]: rows 16 wq + g (+8), columns 8 j + 2t, +1)
         * into its staging rows, then lane r < 16 adds row 16 wq + r (sm90v3's staging) of the
         * warpgroup's rows (QROWS wg + ...) */
        const int row = wq * 16 + lane;
        const int qrow = m0 + QROWS * wg + row;
        const bool adds = lane < 16 && qrow < a.Sq;
        const int plane = DET ? info[3] % a.planes : 0;
        float *dqa = a.dq_acc + plane * a.dq_plane + (((int64_t)b * a.Hq + h) * a.Sq + qrow) * D;
        /* deterministic mode: sm90h2's warpgroup with no row below Sq adds nothing and takes
         * no turn (its counter, of the 64-row block past Sq, does not exist) */
        const bool turns = !WIDE || m0 + 64 * wg < a.Sq;
        auto dq_out = [&](float(&acc)[8][4], int pi) {
            if (pi == 0)
                trace(it, 1);
            if ((!DET || DQP) && lane < 16) /* this warp's previous adds read the staging rows */
                ptx_bulk_wait_group_read<0>();
            __syncwarp();
            const uint32_t st0 = stage_s + (uint32_t)((wq * 16 + g) * H_DQ_ROW + 8 * t);
#pragma unroll
            for (int j = 0; j < 8; j++) {
                ptx_st_shared_v2_f32(st0 + 32 * j, acc[j][0], acc[j][1]);
                ptx_st_shared_v2_f32(st0 + 8 * H_DQ_ROW + 32 * j, acc[j][2], acc[j][3]);
            }
            ptx_fence_proxy_async_shared(); /* the stores, for the copy engine's reads */
            __syncwarp();
            const int p = D192 ? pi : NQP * wg + pi;
            if constexpr (!DET) {
                (void)turns;
                if (adds)
                    ptx_bulk_reduce_add_f32(dqa + 64 * p, stage_s + (uint32_t)row * H_DQ_ROW, 256);
                if (lane < 16)
                    ptx_bulk_commit_group();
                if (pi == NQP - 1)
                    trace(it, 3);
            } else {
                /* deterministic mode: every consumer warp (8 per block) releases one count per
                 * Q block, after its last panel; d 192 x 64: warpgroup 1's warps add into
                 * warpgroup 0's rows, after all four of its warps; sm90h2: each warpgroup's 4
                 * warps on the counter of its own 64 rows (cnt includes wg).
                 * DQP (sm90h2l / sm90hl): the same turns and counts, but the panels' adds are
                 * only issued, each after the previous one has read the staging rows (the wait
                 * at the top, as in fast mode), and completed all at once before the release
                 * after the last panel: one completion round trip a Q block instead of one a
                 * panel, the same adds in the same order per dQ element (each element gets one
                 * add a Q block from this warp); the turn's first poll was issued earlier
                 * (seen). REL (with DQP): that completion and the release a Q block late, here
                 * at the next Q block's first panel (their round trip ran under this one's
                 * products) and before any wait on a turn: a warp never waits holding a count,
                 * so the waits stay on lower K blocks (or the same block's other warpgroup at
                 * the meeting, whose waits do), as without REL. */
                if constexpr (REL) {
                    if (pi == 0 && held) {
                        if (lane < 16) {
                            ptx_bulk_wait_group<0>();
                            ptx_fence_proxy_async_global();
                        }
                        __syncwarp();
                        if (lane == 0) {
                            bwd_release_turn(a, held);
                        }
                        held = nullptr;
                    }
                }
                if (!turns)
                    return;
                if (pi == 0) {
                    if (lane == 0) {
                        const int *sem = a.sem + cnt;
                        /* det_free (FLASHC_CUDA_BWD_DET_FREE, a diagnostic): every turn
                         * counts as taken, the rest of the mode's instructions kept */
                        const int need = a.det_free ? 0
                                         : WIDE    ? 4 * turn
                                                   : 8 * turn + (D192 ? 4 * wg : 0);
                        if constexpr (DQP) {
                            while (seen < need)
                                seen = ptx_ld_acquire_gpu(sem);
                        } else {
                            while (ptx_ld_acquire_gpu(sem) < need) {
                            }
                        }
                    }
                    __syncwarp();
                    trace(it, 2);
                }
                if (lane < 16) {
                    ptx_fence_proxy_async_global(); /* the acquire before our bulk adds */
                    if (adds)
                        ptx_bulk_reduce_add_f32(dqa + 64 * p, stage_s + (uint32_t)row * H_DQ_ROW,
                                                256);
                    ptx_bulk_commit_group();
                    if (!DQP || (!REL && pi == NQP - 1)) {
                        ptx_bulk_wait_group<0>();       /* the adds performed (and read) ... */
                        ptx_fence_proxy_async_global(); /* ... and ordered before the release */
                    }
                }
                __syncwarp();
                if (pi == NQP - 1) {
                    if constexpr (REL) {
                        held = a.sem + cnt;
                    } else if (lane == 0) {
                        bwd_release_turn(a, a.sem + cnt);
                    }
                    trace(it, 3);
                }
            }
        };

        if constexpr (EARLY) {
            /* dV / dK (committed above), then dQ's panels 0 and 1 into two accumulators; the
             * stage goes back once dV / dK are done, so the next Q, dO load runs under all three
             * panels and their epilogues (the 64-row order below hides it under two) */
            dq_mma(dq0, 0);
            dq_mma(dq1, 1);
            ptx_wgmma_wait<2>(); /* dV, dK: Q, dO, LSE, D, info of the stage are read */
            ptx_fence_operands(kv0);
            ptx_mbarrier_arrive(empty(st));
            ptx_wgmma_wait<1>();
            ptx_fence_operands(dq0);
            dq_out(dq0, 0);
            dq_mma(dq0, 2);
            ptx_wgmma_wait<1>();
            ptx_fence_operands(dq1);
            dq_out(dq1, 1);
            ptx_wgmma_wait<0>();
            ptx_fence_operands(dq0);
            dq_out(dq0, 2);
        } else {
            ptx_wgmma_wait<1>(); /* dQ of the first panel */
            ptx_fence_operands(dq0);
            dq_out(dq0, 0);
#pragma unroll
            for (int pi = 1; pi < NQP; pi++) {
                dq_mma(dq0, pi);
                if (pi == 1) {
                    ptx_wgmma_wait<1>(); /* dV, dK: Q, dO, LSE, D, info of the stage are read */
                    ptx_fence_operands(kv0);
                    if constexpr (!D192)
                        ptx_fence_operands(kv1);
                    ptx_mbarrier_arrive(empty(st));
                }
                ptx_wgmma_wait<0>();
                ptx_fence_operands(dq0);
                dq_out(dq0, pi);
            }
        }
    }
    /* the block's shared memory outlives the copy engine's last reads */
    if (lane < 16)
        ptx_bulk_wait_group<0>();
    if constexpr (REL) {
        /* the last Q block's count (its adds completed just above) */
        if (held) {
            if (lane < 16)
                ptx_fence_proxy_async_global();
            __syncwarp();
            if (lane == 0) {
                bwd_release_turn(a, held);
            }
        }
    }

    /* dK = scale dS^T Q and dV: rows (keys) 16 wq + g (+8); columns (d 256) 128 wg + 8 dt + 2t,
     * (d 192) 8 dt + 2t; rows past Sk not stored; all zero if no query sees the keys; PAD: the
     * (zero) columns past a.D not stored */
    const int c0 = D192 ? 0 : KVF * wg;
    auto store = [&](float(&x)[KVT][4], T *out, const int64_t *str, float scale) {
        T *base_g = out + b * str[0] + hk * str[2] + (int64_t)n0 * str[1] + c0 + 2 * t;
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            const int r = wq * 16 + g + 8 * hr;
            if (n0 + r < a.Sk) {
                T *grow = base_g + (int64_t)r * str[1];
#pragma unroll
                for (int dt = 0; dt < KVT; dt++) {
                    if (PAD && c0 + dt * 8 >= a.D) /* a.D == a.Dv, a multiple of 8 */
                        break;
                    *(uint32_t *)(grow + dt * 8) =
                        ptx_pack2(T(), x[dt][2 * hr] * scale, x[dt][2 * hr + 1] * scale);
                }
            }
        }
    };
    if constexpr (!D192) {
        store(kv0, (T *)a.dv, a.sdv, 1.0f);
        store(kv1, (T *)a.dk, a.sdk, a.scale);
    } else {
        if (wg == 0)
            store(kv0, (T *)a.dv, a.sdv, 1.0f);
        else
            store(kv0, (T *)a.dk, a.sdk, a.scale);
    }
    if constexpr (TRACE) {
        if (cw == 0 && lane == 0) {
            bwd_trace_head_end(trow());
        }
    }
#endif
}

/* ---- host side: the tensor maps are tma_host.cuh's cuda_tma_map_bshd (as attn_bwd_sm90v3.cu's) */

/* When the tensor maps do not encode (a stride the copy engine does not take, or no encoder):
 * sm80's default entry for a's dims (block_q 64, split 1, head_dim <= D: its workspace fits
 * in the one this family sized, whose turn counters are per 64 rows in sm90h2 too). */
template <typename T, int D>
static cudaError_t bwd90h_fallback(const attn_bwd_args *a, cudaStream_t stream)
{
    const flashc_dtype dt = std::is_same<T, __nv_bfloat16>::value ? FLASHC_BF16 : FLASHC_F16;
    for (int i = 0; i < attn_bwd_sm80_variant_count; i++) {
        const attn_bwd_variant *v = &attn_bwd_sm80_variants[i];
        if (v->dtype == dt && !v->opt_in && v->head_dim_lo > 0 && v->head_dim_lo <= a->D &&
            a->D <= v->head_dim && v->head_dim <= D && v->block_q == H_BM && v->split == 1) {
            attn_bwd_args one = *a; /* sm80 adds into one plane: the first of the workspace */
            one.planes = 1;
            return v->launch(&one, stream);
        }
    }
    return cudaErrorInvalidValue;
}

/* FLASHC_CUDA_BWD_TRACE=PATH, read at every call (a diagnostic, not for production): the exact
 * entries' main kernel (not the padded ones, not sm90h2e, not with softcap / ALiBi) runs as its
 * H_TRACE twin, which records when each consumer warpgroup's Q-block steps reach their data, their
 * dQ epilogue, their deterministic turn and their last dQ issue (the record above), and the call
 * writes PATH (replacing it): bwd_trace.cuh's header, then the record's words. The call
 * synchronizes its stream for that (so it is not graph-capturable while the variable is set)
 * and takes the record's device memory from the scratch pool; the gradients are bit for bit
 * those of the untraced kernel (test_bwd_trace). A PATH that cannot be written leaves no file, the call's result
 * unchanged. The record's address lives in two __device__ globals: one traced call at a time in
 * a process (concurrent ones on other streams would share them). bench/gpu/bwd_trace.py runs
 * and reads it. The host side: bwd_trace.cu (shared with attn_bwd_sm90v3.cu). */
template <typename T, int D, int BM, unsigned F>
static cudaError_t attn_bwd_sm90h_launch(const attn_bwd_args *a, cudaStream_t stream)
{
    static_assert((F & (H_DET | H_MODS)) == 0, "DET, MODS: chosen per call");
    /* fast mode: the family's kernel without the deterministic-only bits (sm90hl, sm90h2l are
     * never picked in fast mode, the variant's late; the mask keeps their instantiation of the
     * fast branch, that of sm90h / sm90h2, valid) */
    constexpr unsigned FF = F & ~(H_DQP | H_REL | H_SPLIT);
    constexpr bool PAD = F & H_PAD, SPLIT = F & H_SPLIT;
    const flashc_dtype dt = std::is_same<T, __nv_bfloat16>::value ? FLASHC_BF16 : FLASHC_F16;
    if (a->D != a->Dv || a->D > D || a->D % 8 != 0 || (!PAD && a->D != D))
        return cudaErrorInvalidValue; /* not dispatched so (serves_dims) */
    const bool mods = a->softcap > 0.0f || a->alibi;
    /* the H_NODQ twin runs (sm90hs, or the FLASHC_CUDA_BWD_NO_DQ diagnostic below), with its own
     * layout (no dQ staging; a second stage at d 256); at BM 128 its Q, dO come in 64-row
     * halves (the kernel's RING), so their maps have 64-row boxes */
    bool nodq = SPLIT;
    if constexpr (!PAD && !(F & (H_EARLY | H_DQP)) && !SPLIT)
        nodq = a->no_dq && !mods && !a->deterministic;
    const int qbox = nodq && bwd90h_smem<D, BM, true>::RING ? 64 : BM;
    CUtensorMap mq, mdo, mk, mv;
    if (!cuda_tma_map_bshd(&mq, dt, a->q, a->B, a->Sq, a->Hq, a->D, a->sq, qbox) ||
        !cuda_tma_map_bshd(&mdo, dt, a->dout, a->B, a->Sq, a->Hq, a->Dv, a->sdo, qbox) ||
        !cuda_tma_map_bshd(&mk, dt, a->k, a->B, a->Sk, a->Hkv, a->D, a->sk, H_BN) ||
        !cuda_tma_map_bshd(&mv, dt, a->v, a->B, a->Sk, a->Hkv, a->Dv, a->sv, H_BN))
        return bwd90h_fallback<T, D>(a, stream);

    /* turn counters per 64 rows in every kernel here (the table's sem_block_q); sm90hs needs
     * D = rowsum(dO O) alone (no accumulator to zero, no counters: planes 0) */
    attn_bwd_args pre = *a;
    if constexpr (SPLIT) {
        pre.planes = 0;
        if (!attn_bwd_dq_sm90_fits(a))
            return bwd90h_fallback<T, D>(a, stream);
    }
    cudaError_t err = attn_bwd_pre_launch<T, D, H_BM, 1>(&pre, stream);
    if (err != cudaSuccess)
        return err;
    const int smem = nodq ? bwd90h_smem<D, BM, true>::LAUNCH : bwd90h_smem<D, BM>::LAUNCH;
    void (*kernel)(const CUtensorMap, const CUtensorMap, const CUtensorMap, const CUtensorMap,
                   const attn_bwd_args);
    if constexpr (SPLIT) {
        /* sm90hs: the H_NODQ twin in both modes (dK, dV need no order), then dQ's own kernel */
        kernel = mods ? attn_bwd_sm90h_kernel<T, D, BM, FF | H_NODQ | H_MODS>
                      : attn_bwd_sm90h_kernel<T, D, BM, FF | H_NODQ>;
    } else {
        kernel = mods ? (a->deterministic ? attn_bwd_sm90h_kernel<T, D, BM, F | H_DET | H_MODS>
                                          : attn_bwd_sm90h_kernel<T, D, BM, FF | H_MODS>)
                      : (a->deterministic ? attn_bwd_sm90h_kernel<T, D, BM, F | H_DET>
                                          : attn_bwd_sm90h_kernel<T, D, BM, FF>);
        if constexpr (!PAD && !(F & (H_EARLY | H_DQP)))
            if (nodq)
                kernel = attn_bwd_sm90h_kernel<T, D, BM, FF | H_NODQ>;
    }
    const dim3 grid((unsigned)((a->Sk + H_BN - 1) / H_BN), (unsigned)(a->B * a->Hkv), 1);
    /* FLASHC_CUDA_BWD_TRACE: the H_TRACE twin and its record (the comment above) */
    const char *tpath = NULL;
    uint64_t *tbuf = NULL;
    cuda_bwd_trace_head hd;
    memset(&hd, 0, sizeof hd);
    if constexpr (!PAD && !(F & (H_EARLY | H_SPLIT))) {
        /* not under FLASHC_CUDA_BWD_NO_DQ: its kernel has its own shared-memory layout (and
         * the trace is of the kernels with dQ) */
        tpath = mods || nodq ? NULL : cuda_bwd_trace_path();
        if (tpath) {
            kernel = a->deterministic ? attn_bwd_sm90h_kernel<T, D, BM, F | H_DET | H_TRACE>
                                      : attn_bwd_sm90h_kernel<T, D, BM, FF | H_TRACE>;
            hd.version = 1, hd.grid_x = (int32_t)grid.x, hd.grid_y = (int32_t)grid.y;
            hd.bm = BM, hd.bn = H_BN, hd.d = D, hd.hdr_words = H_TR_HDR, hd.it_words = H_TR_IT;
            if ((err = cuda_bwd_trace_begin(&hd, a, &tbuf, stream)) != cudaSuccess)
                return err;
            if ((err = cudaMemcpyToSymbolAsync(bwd90h_trace_buf, &tbuf, sizeof tbuf, 0,
                                               cudaMemcpyHostToDevice, stream)) != cudaSuccess ||
                (err = cudaMemcpyToSymbolAsync(bwd90h_trace_maxit, &hd.maxit, sizeof hd.maxit, 0,
                                               cudaMemcpyHostToDevice, stream)) != cudaSuccess)
                return cuda_bwd_trace_finish(err, tpath, tbuf, &hd, stream);
        }
    }
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (err == cudaSuccess) {
        kernel<<<grid, H_THREADS, smem, stream>>>(mq, mdo, mk, mv, *a);
        err = cudaGetLastError();
    }
    if (tpath)
        err = cuda_bwd_trace_finish(err, tpath, tbuf, &hd, stream);
    if (err != cudaSuccess)
        return err;
    if constexpr (SPLIT)
        return attn_bwd_dq_sm90_launch<T, D>(a, stream); /* dQ itself: no postprocess */
    return attn_bwd_post_bh_launch<T, D, PAD>(a, stream);
}

/* The table. The exact entries first; the padded ones (suffix "p", H_PAD) serve D == Dv, a
 * multiple of 8, in 136..184 on the d 192 kernel and 200..248 on the d 256 one. Since
 * 2026-12-07 sm90hs (first below) is the default at d 192 / 256 and those padded dims; the
 * fused families are opt-in. The d 256 kernel was the default at d 256 on compute capability 9.0
 * from 2026-12-05 (opt_in 0: above sm80p, the default before;
 * the H200 run of 2026-12-05, bench/gpu/s16_bwd20.sh: 1.46-1.53x sm80p fast, 1.55-1.87x in
 * deterministic mode, 1.12-1.24x SDPA-FA2, every forced suite and sanitizer clean;
 * bench/RESULTS.md). The 64-row d 192 kernel was level with sm80p there (0.97-1.00x; sm90h2
 * below replaced it as the d 192 default) and its padded entries were not timed: opt-in
 * (FLASHC_CUDA_BWD_KERNEL=sm90h). */
#define H_ENTRY(TN, T, DT, FAM, D, BM, SUF, F, OPT, LO)                                            \
    {"attn_bwd_" #TN "_" FAM "_d" #D SUF "_" #BM "x64", FAM, DT, D, 90, 90, BM, H_BN, 1,           \
     ((F) & H_SPLIT) ? 227 * 1024 /* the dQ kernel's bound */ : bwd90h_smem<D, BM>::LAUNCH,       \
     attn_bwd_sm90h_launch<T, D, BM, F>, NULL, OPT, LO, 0, H_BM,                                   \
     ((F) & H_SPLIT) ? 0 : 1, ((F) & H_REL) ? 1 : 0}
#define H_PAIR(FAM, D, BM, SUF, F, OPT, LO)                                                        \
    H_ENTRY(bf16, __nv_bfloat16, FLASHC_BF16, FAM, D, BM, SUF, F, OPT, LO),                       \
        H_ENTRY(f16, __half, FLASHC_F16, FAM, D, BM, SUF, F, OPT, LO)
const attn_bwd_variant attn_bwd_sm90h_variants[] = {
    /* sm90hs, the split backward (H_SPLIT; dK / dV by the fused kernels' H_NODQ twins, dQ by
     * attn_bwd_dq_sm90.cu's kernel of its own, deterministic by construction), first: the
     * default at d 256 and d 192 in both modes. d 256, and d 192 in deterministic mode, since
     * the H100 run of 2026-12-07 late morning (bench/gpu/s33_nodq.sh: deterministic 1.15-1.55x
     * the late-release kernels); d 192 fast mode since the H100 run of 2026-12-07 midday, with
     * the dQ kernel that ptxas no longer serialises (two runs in one session: 1.04-1.18x the
     * fused kernels' fast mode at d 192 and d 256 in every cell, where the serialised revision
     * read 0.98-1.09x; bench/RESULTS.md); test_sm90hs_d192_d256, the default d 192 / 256 suites
     * and memcheck / racecheck / synccheck clean on those H100s */
    H_PAIR("sm90hs", 256, 64, "", H_SPLIT, 0, 0),
    H_PAIR("sm90hs", 192, 128, "", H_SPLIT, 0, 0),
    /* and its padded entries (D == Dv, multiples of 8: 200..248 on the d 256 kernels, 136..184
     * on the d 192 ones), the default there since the H100 run of 2026-12-07 midday (call 9,
     * s33_nodq.sh at D 136 / 160 / 200 / 224: 1.38-1.78x sm80p, the default before,
     * deterministic 1.90-3.20x; 1.13-1.42x SDPA-FA2, where sm80p ran at 0.75-0.94x) */
    H_PAIR("sm90hs", 256, 64, "p", H_PAD | H_SPLIT, 0, 193),
    H_PAIR("sm90hs", 192, 128, "p", H_PAD | H_SPLIT, 0, 129),
    /* sm90hs at d 192 with the 64-row dK / dV kernel (params.block_q = 64 with the family
     * forced): two Q / dO stages where sm90h2's NODQ twin has one (its second does not fit), but
     * S^T, dP^T as m64n32; opt-in until a run shows which is faster */
    H_PAIR("sm90hs", 192, 64, "", H_SPLIT, 1, 0),
    H_PAIR("sm90hs", 192, 64, "p", H_PAD | H_SPLIT, 1, 129),
    /* sm90hl and sm90h2l: the dQ adds of a Q block completed once and released a Q block late
     * (H_DQP | H_REL), deterministic mode only (late: fast mode takes the base family's entry,
     * the same kernel), the same bits as sm90h / sm90h2 over the same planes
     * (test_late_release_d192_d256). Listed first: the deterministic default at d 256 / d 192
     * since the H100 runs of 2026-12-06, late morning (bench/gpu/s23_lplanes.sh and
     * s24_ldefault.sh: with their own plane counts, attn_bwd.cu's det_planes, 0.96-1.16x the base
     * kernels' deterministic default; bench/RESULTS.md) */
    H_PAIR("sm90hl", 256, 64, "", H_DQP | H_REL, 0, 0),
    H_PAIR("sm90h2l", 192, 128, "", H_DQP | H_REL, 0, 0),
    H_PAIR("sm90h", 256, 64, "", 0u, 0, 0),
    H_PAIR("sm90h", 192, 64, "", 0u, 1, 0),
    H_PAIR("sm90h", 192, 64, "p", H_PAD, 1, 129),
    H_PAIR("sm90h", 256, 64, "p", H_PAD, 1, 193),
    /* sm90h2 (helper bwd22): d 192 in 128 x 64 steps, exact and padded (136..184); the same
     * order of products per Q block as the 64-row kernels. The exact entry is the default at
     * d 192 on compute capability 9.0 since the device run of 2026-12-06 (s17_bwd22.sh on an
     * H100: 1.47-1.65x sm80p fast, 1.61-1.96x deterministic, 1.12-1.23x SDPA-FA2, every forced
     * suite and sanitizer clean; bench/RESULTS.md); the padded entries were not timed and stay
     * opt-in (FLASHC_CUDA_BWD_KERNEL=sm90h2). */
    H_PAIR("sm90h2", 192, 128, "", 0u, 0, 0),
    H_PAIR("sm90h2", 192, 128, "p", H_PAD, 1, 129),
    /* sm90h2e: sm90h2 with dV / dK issued before dQ and two dQ accumulators (H_EARLY), opt-in */
    H_PAIR("sm90h2e", 192, 128, "", H_EARLY, 1, 0),
    H_PAIR("sm90h2e", 192, 128, "p", H_PAD | H_EARLY, 1, 129),
};
#undef H_PAIR
#undef H_ENTRY
const int attn_bwd_sm90h_variant_count =
    (int)(sizeof attn_bwd_sm90h_variants / sizeof attn_bwd_sm90h_variants[0]);
