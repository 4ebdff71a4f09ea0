/* kernels/dispatch.c — picks the micro-kernel table from the CPU's features, once.
 *
 * FLASHC_ISA=scalar|avx2|avx512|avx512bf16|amx|neon|bf16ref forces a table; one the CPU cannot
 * run (or an unknown name) falls back to the automatic choice, so a stale setting never crashes
 * a program with an illegal instruction. flashc_build_info() reports the table in use, and why
 * AMX was refused on a CPU that has it (cpu_kernels_note). */
#define _GNU_SOURCE /* syscall() */
#include "kernels.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__x86_64__) && defined(__linux__)
#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Best last (the automatic choice skips bf16ref, and avx512bf16 on Intel: see auto_choice). */
const char *const cpu_isa_names[] = {
    "bf16ref", "scalar",
#if defined(__x86_64__)
    "avx2",    "avx512", "avx512bf16", "amx",
#endif
#if defined(__aarch64__)
    "neon",
#endif
    NULL,
};

#if defined(__x86_64__)
/* F16C from CPUID leaf 1 (ECX bit 29): not every compiler's __builtin_cpu_supports knows it. */
static int x86_has_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}
#endif

static char note[200]; /* why AMX is not usable on a CPU that has it; "" otherwise */

const char *cpu_kernels_note(void) { return note; }

#if defined(__x86_64__)
/* AMX-BF16 usable by this process: the CPU has the tiles (CPUID.(7,0):EDX bit 24 AMX-TILE,
 * bit 22 AMX-BF16), the OS saves their state (XCR0 bits 17 XTILECFG and 18 XTILEDATA; read with
 * xgetbv, allowed when CPUID.1:ECX bit 27 OSXSAVE is set), and Linux grants the tile data to the
 * process (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), since Linux 5.16: the 8 KiB of
 * tile state is opt-in per process). Evaluated once (pthread_once): the permission is
 * process-wide and the note is written once. */
static int amx_usable;
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

static void amx_probe(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 22)))
        return; /* no AMX-BF16 on this CPU: nothing refused */
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) {
        snprintf(note, sizeof note, "amx: the OS does not enable XSAVE (no OSXSAVE)");
        return;
    }
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) {
        snprintf(note, sizeof note,
                 "amx: the OS does not save the tile state (XCR0 = 0x%x, bits 17/18 clear)", lo);
        return;
    }
#if defined(__linux__)
    enum { ARCH_GET_XCOMP_PERM = 0x1022, ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0) {
        snprintf(note, sizeof note,
                 "amx: Linux refused the tile-data permission (arch_prctl: %s)",
                 strerror(errno));
        return;
    }
    unsigned long perm = 0;
    if (syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM, &perm) != 0 ||
        !(perm & (1ul << XFEATURE_XTILEDATA))) {
        snprintf(note, sizeof note, "amx: tile-data permission not granted (perm = 0x%lx)", perm);
        return;
    }
    amx_usable = 1;
#else
    snprintf(note, sizeof note, "amx: not enabled on this OS by flashc (Linux only)");
#endif
}
#endif

const cpu_kernels *cpu_kernels_by_name(const char *name)
{
    if (!name)
        return NULL;
    if (!strcmp(name, "scalar"))
        return &cpu_kernels_scalar;
    if (!strcmp(name, "bf16ref"))
        return &cpu_kernels_bf16ref;
#if defined(__x86_64__)
    /* __builtin_cpu_supports also checks that the OS saves the wider registers (XCR0). */
    __builtin_cpu_init();
    if (!strcmp(name, "avx2"))
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                       x86_has_f16c()
                   ? &cpu_kernels_avx2
                   : NULL;
    /* The avx512 table already needs AVX512-BF16 (vcvtneps2bf16), so avx512bf16 (vdpbf16ps)
     * runs wherever avx512 does; amx needs the tiles on top. */
    const int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                       __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                       __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("fma") &&
                       x86_has_f16c();
    if (!strcmp(name, "avx512"))
        return avx512 ? &cpu_kernels_avx512 : NULL;
    if (!strcmp(name, "avx512bf16"))
        return avx512 ? &cpu_kernels_avx512bf16 : NULL;
    if (!strcmp(name, "amx")) {
        pthread_once(&amx_once, amx_probe);
        return avx512 && amx_usable ? &cpu_kernels_amx : NULL;
    }
#endif
#if defined(__aarch64__)
    if (!strcmp(name, "neon")) /* NEON is part of the AArch64 baseline */
        return &cpu_kernels_neon;
#endif
    return NULL;
}

#if defined(__x86_64__)
/* "AuthenticAMD" in CPUID leaf 0 (EBX, EDX, ECX). */
static int x86_is_amd(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(0, &a, &b, &c, &d) && b == 0x68747541u && d == 0x69746e65u &&
           c == 0x444d4163u;
}
#endif

int cpu_dpbf16_full_rate(void)
{
#if defined(__x86_64__)
    /* Asked once: the backward's plan asks at every call, and CPUID traps to the hypervisor in a
     * VM. Racing threads compute the same answer; any store wins. */
    static atomic_int amd = -1;
    int v = atomic_load(&amd);
    if (v < 0) {
        v = x86_is_amd();
        atomic_store(&amd, v);
    }
    return v;
#else
    return 0;
#endif
}

/* Tables the automatic choice never takes: bf16ref (a model for the tests), and avx512bf16
 * except on AMD CPUs. vdpbf16ps issues at half the FMA's rate on Intel's cores (the Xeon with
 * AMX, 0.60 against 0.15 ns per instruction: a 64-flop vdpbf16ps at half a 32-flop FMA's
 * flops, and its bf16 forward at 0.6-0.8x the float32 path's: bench/RESULTS.md), so there bf16
 * storage keeps the float32 path (or AMX, chosen after it); on AMD every CPU with AVX512-BF16
 * (Zen 4 and later) runs it at the FMA's instruction rate, twice its flops, and the bf16 forward
 * on it is 1.8-2.1x the float32 one on a Zen 4, d 64 / 128, n 512-8192 (bench/RESULTS.md,
 * "avx512bf16 on Zen 4").
 * FLASHC_ISA=avx512 or =avx512bf16 forces either anywhere. */
static int auto_choice(const char *name)
{
    if (!strcmp(name, "bf16ref"))
        return 0;
    return strcmp(name, "avx512bf16") != 0 || cpu_dpbf16_full_rate();
}

static const cpu_kernels *choose(void)
{
    const cpu_kernels *t = cpu_kernels_by_name(getenv("FLASHC_ISA"));
    if (t)
        return t;
    for (int i = 0; cpu_isa_names[i]; i++) /* best last */
        if (auto_choice(cpu_isa_names[i]) && cpu_kernels_by_name(cpu_isa_names[i]))
            t = cpu_kernels_by_name(cpu_isa_names[i]);
    return t;
}

static _Atomic(const cpu_kernels *) chosen;
static _Atomic(const cpu_kernels *) forced;

const cpu_kernels *cpu_kernels_get(void)
{
    const cpu_kernels *t = atomic_load(&forced);
    if (t)
        return t;
    t = atomic_load(&chosen);
    if (!t) { /* racing threads compute the same answer; any store wins */
        t = choose();
        atomic_store(&chosen, t);
    }
    return t;
}

void cpu_kernels_force(const cpu_kernels *t) { atomic_store(&forced, t); }
