/* isa_run.c — runs a test binary with FLASHC_ISA forced to one kernel table:
 *   isa_run ISA TEST [ARGS...]
 * Exits 77 (ctest's SKIP_RETURN_CODE) when this CPU or build cannot run ISA, so a path that
 * did not run shows as skipped, never as passed. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: isa_run ISA TEST [ARGS...]\n");
        return 2;
    }
    const cpu_kernels *t = cpu_kernels_by_name(argv[1]);
    if (!t) {
        const char *why = cpu_kernels_note();
        printf("SKIP: kernel path %s is not runnable on this CPU/build%s%s\n", argv[1],
               why[0] ? ": " : "", why);
        return 77;
    }
    if (setenv("FLASHC_ISA", argv[1], 1) != 0) {
        perror("setenv");
        return 2;
    }
    printf("kernel path: %s\n", t->name);
    fflush(stdout);
    execv(argv[2], argv + 2);
    perror(argv[2]);
    return 2;
}
