/*
 * check.c — `flashc check`: runs every implementation of every op on the table below against
 * the op's reference (the naive path, float64 accumulation) on fresh random inputs, prints one
 * line per (problem, implementation) with the error and the tolerance, and exits 1 on any
 * mismatch, NaN, error status or modified input.
 *
 * The table is tests/cases/table.c (plain case_spec rows), the one that ctest's test_cases
 * runs on every kernel path and `flashc bench --suite check` times.
 */
#define _POSIX_C_SOURCE 200809L /* fork, pipe, getrusage, strtok_r, gmtime_r, strsignal */
#include "check.h"

#include "cli.h"
#include "traffic.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The traffic model (traffic.h) against the seeds' worked numbers, at bf16 (2 bytes). */
static void check_traffic(int quiet, int *passed, int *failed)
{
    const traffic_attn head = {1, 4096, 4096, 1, 1, 128, 0, 2.0}; /* one head, n 4096, d 128 */
    const double qkvo = 2.0 * (4.0 * 4096.0 * 128.0);              /* Q, K, V read, O written */
    const double lse = 4.0 * 4096.0;
    const struct {
        const char *what;
        double got, want;
    } rows[] = {
        {"rmsnorm naive bytes/row, d 1024 (10 d)", traffic_rmsnorm(1, 1024, 2.0, 0, 0), 10240.0},
        {"rmsnorm fused bytes/row, d 1024 (4 d)", traffic_rmsnorm(1, 1024, 2.0, 1, 0), 4096.0},
        {"swiglu naive bytes/token, I 3072 (30 KiB)", traffic_swiglu(1, 3072, 2.0, 0), 30720.0},
        {"swiglu fused bytes/token, I 3072 (18 KiB)", traffic_swiglu(1, 3072, 2.0, 1), 18432.0},
        {"attn naive S/P bytes/head, n 4096 (5 x 33.5 MB)", traffic_attn_naive(&head) - qkvo - lse,
         5.0 * 2.0 * 4096.0 * 4096.0},
        {"attn flash bytes/head, n 4096, 128x128 (Q, O + 32 K/V passes)",
         traffic_attn_flash(&head, 128, 128),
         2.0 * 4096.0 * 128.0 * 2.0 + 32.0 * 2.0 * 2.0 * 4096.0 * 128.0 + lse},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const int ok = rows[i].got == rows[i].want; /* small integers in doubles: exact */
        *passed += ok;
        *failed += !ok;
        if (!ok || !quiet)
            printf("%s  traffic     model  %-56s %.0f (want %.0f)\n", ok ? "ok  " : "FAIL",
                   rows[i].what, rows[i].got, rows[i].want);
    }
}

typedef struct check_ctx {
    int quiet, *passed, *failed;
} check_ctx;

static void check_report(void *ctx, const case_outcome *r)
{
    check_ctx *x = ctx;
    if (r->skipped) {
        if (!x->quiet)
            printf("skip  %-11s %-6s %-44s %s\n", r->op, r->impl, r->shape,
                   r->why[0] ? r->why : "not available here");
    } else if (r->why[0]) {
        ++*x->failed;
        printf("FAIL  %-11s %-6s %-44s err %.2e tol %.1e  %s\n", r->op, r->impl, r->shape,
               r->err, r->tol, r->why);
    } else {
        ++*x->passed;
        if (!x->quiet)
            printf("ok    %-11s %-6s %-44s err %.2e tol %.1e\n", r->op, r->impl, r->shape, r->err,
                   r->tol);
    }
}

static const char check_intro[] =
    "Runs every op (attention forward naive vs flash, varlen, KV cache, split-KV merge, attention\n"
    "backward and forward + backward, online softmax, RMSNorm plain and residual, SwiGLU) against\n"
    "its float64 reference on fresh random inputs, over the case table (tests/cases/table.c:\n"
    "causal and not, windows, softcap, ALiBi, Dk != Dv, GQA/MQA, odd and unequal lengths,\n"
    "zero-length sequences, paged caches, head dims 3..256, tiles, bf16 / f16 storage), the\n"
    "property rows (poisoned keys, split-KV, paged vs contiguous, varlen vs alone), and the\n"
    "traffic model against the seeds' numbers.\n"
    "One line per case; exit status 1 on any mismatch, NaN, error or modified input, 2 on a\n"
    "bad option.";

int check_main(int argc, char **argv)
{
    const char *ops = NULL;
    int64_t seed = 0, threads = 0;
    int quiet = 0;
    cli_option opts[] = {
        {"op", CLI_STRING, &ops, 0, 0, NULL, "LIST", "only these ops (listed below)", 0},
        {"seed", CLI_INT, &seed, 0, 9e15, NULL, "N", "seed of the inputs (default: time)", 0},
        {"threads", CLI_INT, &threads, 1, 1024, NULL, "N", "CPU threads (library default)", 0},
        {"quiet", CLI_FLAG, &quiet, 0, 0, NULL, NULL, "print failures and the summary only", 0},
    };
    const int n_opts = (int)(sizeof opts / sizeof opts[0]);
    const int pr = cli_parse("check", opts, n_opts, argc, argv);
    if (pr == CLI_HELP) {
        cli_usage(stdout, "check", check_intro, opts, n_opts);
        printf("\nops:\n");
        for (int i = 0; i < cases_n_ops; i++)
            printf("  %-12s %s\n", cases_ops[i]->name, cases_ops[i]->summary);
        return 0;
    }
    if (pr != CLI_OK)
        return 2;
    if (ops) { /* every name must be an op */
        char buf[256];
        snprintf(buf, sizeof buf, "%s", ops);
        for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
            if (!cases_find_op(t)) {
                fprintf(stderr, "flashc check: --op: unknown op '%s'\n", t);
                return 2;
            }
    }
    if (!opts[1].seen)
        seed = (int64_t)(((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16)) & 0xffffffffffffull);
    if (threads)
        flashc_set_num_threads((int)threads);
    printf("flashc check: %s; seed %lld; %d threads\n", flashc_build_info(), (long long)seed,
           flashc_get_num_threads());

    int n_table, passed = 0, failed = 0;
    if (!ops)
        check_traffic(quiet, &passed, &failed);
    const case_spec *t = cases_table(&n_table);
    for (int i = 0; i < n_table; i++) {
        if (ops) {
            char buf[256];
            int want = 0;
            snprintf(buf, sizeof buf, "%s", ops);
            for (char *save = NULL, *x = strtok_r(buf, ",", &save); x; x = strtok_r(NULL, ",", &save))
                want |= strcmp(x, t[i].op) == 0;
            if (!want)
                continue;
        }
        check_ctx ctx = {quiet, &passed, &failed};
        case_check(&t[i], (uint64_t)seed + (uint64_t)i, check_report, &ctx);
    }
    printf("flashc check: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : passed ? 0 : 1;
}
