/* alloc.c — the counting allocator: every host buffer the library allocates for itself goes
 * through here, so peak memory is measured, not modelled. */
#include "internal.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ALIGN 64 /* a cache line and a full AVX-512 vector */

static _Atomic int64_t mem_current;
static _Atomic int64_t mem_peak;
static _Atomic int64_t mem_allocs;

#ifdef FLASHC_FAULT_INJECTION
/* Fault injection (-DFLASHC_FAULT_INJECTION=ON, tests only): the fail_at-th allocation after
 * flashc__fault_arm(fail_at) returns NULL, as a real allocation failure would. */
static _Atomic int64_t fault_at, fault_seen;

void flashc__fault_arm(int64_t fail_at)
{
    atomic_store(&fault_seen, 0);
    atomic_store(&fault_at, fail_at);
}

int64_t flashc__fault_seen(void) { return atomic_load(&fault_seen); }
#endif

void *flashc__malloc(size_t bytes)
{
#ifdef FLASHC_FAULT_INJECTION
    const int64_t nth = atomic_fetch_add(&fault_seen, 1) + 1;
    if (nth == atomic_load(&fault_at))
        return NULL;
#endif
    if (bytes == 0 || bytes > (size_t)INT64_MAX - 2 * ALIGN)
        return NULL;
    /* The header line before the aligned block keeps the size and malloc's pointer. malloc, then
     * aligned by hand: glibc (2.36) serves a large aligned_alloc from a fresh mmap on each of a
     * process's first calls (16 of them in a loop of allocate, touch, free on the Zen 4 VM), so
     * every forward's scratch faulted in anew: 1.3 MiB (the bf16 forward's at n 1024) is 318
     * page faults, 0.6 ms a call there, against 1.6 ms for the bf16 forward at n 512. malloc's
     * chunks of that size are reused from the heap from the third call on. */
    size_t total = (bytes + ALIGN - 1) / ALIGN * ALIGN + ALIGN;
    unsigned char *block = malloc(total + ALIGN);
    if (!block)
        return NULL;
    unsigned char *raw = block + (ALIGN - (uintptr_t)block % ALIGN) % ALIGN;
    memcpy(raw, &total, sizeof total);
    memcpy(raw + sizeof total, &block, sizeof block);
    int64_t now = atomic_fetch_add(&mem_current, (int64_t)total) + (int64_t)total;
    int64_t peak = atomic_load(&mem_peak);
    while (now > peak && !atomic_compare_exchange_weak(&mem_peak, &peak, now)) {
    }
    atomic_fetch_add(&mem_allocs, 1);
    return raw + ALIGN;
}

void *flashc__calloc(size_t count, size_t size)
{
    if (size != 0 && count > SIZE_MAX / size)
        return NULL;
    void *p = flashc__malloc(count * size);
    if (p)
        memset(p, 0, count * size);
    return p;
}

void flashc__free(void *ptr)
{
    if (!ptr)
        return;
    unsigned char *raw = (unsigned char *)ptr - ALIGN;
    size_t total;
    void *block;
    memcpy(&total, raw, sizeof total);
    memcpy(&block, raw + sizeof total, sizeof block);
    atomic_fetch_sub(&mem_current, (int64_t)total);
    free(block);
}

flashc_mem_stats flashc_mem_get(void)
{
    flashc_mem_stats s;
    s.current_bytes = atomic_load(&mem_current);
    s.peak_bytes = atomic_load(&mem_peak);
    s.alloc_count = atomic_load(&mem_allocs);
    return s;
}

void flashc_mem_reset_peak(void)
{
    atomic_store(&mem_peak, atomic_load(&mem_current));
    atomic_store(&mem_allocs, 0);
}
