/* attn_bwd.c — FlashAttention backward on the CPU: not written yet (issue 4). */
#include "internal.h"

flashc_status cpu_attn_bwd_supports(const attn_problem *p)
{
    (void)p;
    return flashc__fail(FLASHC_ERR_UNSUPPORTED, "flashc_attn_bwd: the CPU backward is not built yet");
}

flashc_status cpu_attn_bwd(const attn_problem *p, flashc_attn_stats *stats)
{
    (void)stats;
    return cpu_attn_bwd_supports(p);
}
