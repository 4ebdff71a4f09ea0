/* tests/emu/emu_v2.c — tests/test_attn_v2.c (the whole v2 forward contract: key ranges, softcap,
 * ALiBi, Dk != Dv, GQA, varlen, paged KV caches, split-KV, poisoned keys, NaN propagation), or
 * with -DEMU_TEST='"../test_attn_bwd_v2.c"' the backward's, with the bf16 products on an
 * emulated unit (src/cpu/kernels/amx.c or avx512bf16.c compiled against tests/emu/immintrin.h)
 * in an avx2 table, so the mm paths of src/cpu/attn_fwd.c and attn_bwd.c run through the units'
 * own code on a CPU that has neither. Argument: amx (default) or avx512bf16.
 * Build and run: tests/emu/run.sh. */
#ifndef EMU_TEST /* the test file to run (run.sh builds this one for the backward too) */
#define EMU_TEST "../test_attn_v2.c"
#endif
#define main v2_main
#include EMU_TEST
#undef main

#include "kernels.h"

extern const cpu_mm_bf16 emu_mm_amx, emu_mm_avx512;

int main(int argc, char **argv)
{
    const int dp = argc > 1 && !strcmp(argv[1], "avx512bf16");
    if (!cpu_kernels_by_name("avx2")) {
        printf("SKIP: the emulated units run in an avx2 table; this CPU has no AVX2\n");
        return 77;
    }
    static cpu_kernels t;
    t = cpu_kernels_avx2; /* avx2 entries (and its mm softmax) + the emulated unit */
    t.name = dp ? "emu-avx512bf16" : "emu-amx";
    t.bf16 = dp ? &emu_mm_avx512 : &emu_mm_amx;
    cpu_kernels_force(&t);
    const char *fused = getenv("FLASHC_CPU_AMX_FWD");
    printf("# %s on %s%s%s\n", EMU_TEST, t.name, fused ? ", FLASHC_CPU_AMX_FWD=" : "",
           fused ? fused : "");
    return v2_main();
}
