/*
 * flashc.c — the `flashc` command: subcommands bench, check, info.
 */
#include "bench.h"
#include "check.h"
#include "flashc.h"

#include <stdio.h>
#include <string.h>

static int info_main(int argc, char **argv)
{
    if (argc > 1) {
        if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
            printf("usage: flashc info\n\nPrints what this binary was built with.\n");
            return 0;
        }
        fprintf(stderr, "flashc info: unexpected argument '%s'\n", argv[1]);
        return 2;
    }
    printf("flashc %s\n", flashc_build_info());
    printf("threads: %d\n", flashc_get_num_threads());
    printf("cuda device: %s\n", flashc_cuda_available() ? "available" : "none");
    return 0;
}

static const struct command {
    const char *name;
    int (*main)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"bench", bench_main, "naive vs flash / fused: time, measured memory, modeled traffic"},
    {"check", check_main, "every op against the float64 reference; exit 1 on any mismatch"},
    {"info", info_main, "build information"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: flashc <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'flashc <command> --help' lists a command's options.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].main(argc - 1, argv + 1);
    fprintf(stderr, "flashc: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
