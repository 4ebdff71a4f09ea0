/* attn_bwd_ref.c — naive attention backward: not written yet (issue 4). */
#include "internal.h"

flashc_status ref_attn_bwd(const attn_problem *p, flashc_attn_stats *stats)
{
    (void)p, (void)stats;
    return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                        "flashc_attn_bwd_naive: the reference backward is not built yet");
}
