/* kernels/dispatch.c — picks the micro-kernel table from the CPU's features, once.
 *
 * FLASHC_ISA=scalar|avx2|avx512|neon forces a table; one the CPU cannot run (or an unknown
 * name) falls back to the automatic choice, so a stale setting never crashes a program with an
 * illegal instruction. flashc_build_info() reports the table in use. */
#include "kernels.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

const char *const cpu_isa_names[] = {
    "scalar",
#if defined(__x86_64__)
    "avx2",   "avx512",
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

const cpu_kernels *cpu_kernels_by_name(const char *name)
{
    if (!name)
        return NULL;
    if (!strcmp(name, "scalar"))
        return &cpu_kernels_scalar;
#if defined(__x86_64__)
    /* __builtin_cpu_supports also checks that the OS saves the wider registers (XCR0). */
    __builtin_cpu_init();
    if (!strcmp(name, "avx2"))
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                       x86_has_f16c()
                   ? &cpu_kernels_avx2
                   : NULL;
    if (!strcmp(name, "avx512"))
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                       __builtin_cpu_supports("avx512vl") &&
                       __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("fma") &&
                       x86_has_f16c()
                   ? &cpu_kernels_avx512
                   : NULL;
#endif
#if defined(__aarch64__)
    if (!strcmp(name, "neon")) /* NEON is part of the AArch64 baseline */
        return &cpu_kernels_neon;
#endif
    return NULL;
}

static const cpu_kernels *choose(void)
{
    const cpu_kernels *t = cpu_kernels_by_name(getenv("FLASHC_ISA"));
    if (t)
        return t;
    for (int i = 0; cpu_isa_names[i]; i++) /* best last */
        if (cpu_kernels_by_name(cpu_isa_names[i]))
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
