/*
 * check.c — `flashc check`: runs every implementation of every op on the table below against
 * the op's reference (the naive path, float64 accumulation) on fresh random inputs, prints one
 * line per (problem, implementation) with the error and the tolerance, and exits 1 on any
 * mismatch, NaN, error status or modified input.
 *
 * The table is plain data (case_spec rows), so `flashc bench --suite check` times the same
 * problems; a new op or shape is one more row.
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

static const case_spec table[] = {
    /* attention: the seeds' checklist, then the edges */
    {.op = "attn", .sq = 256, .d = 64, .br = 32, .bc = 32},
    {.op = "attn", .sq = 256, .d = 64, .br = 32, .bc = 32, .causal = 1},
    {.op = "attn", .sq = 256, .d = 64, .br = 7, .bc = 13},
    {.op = "attn", .sq = 256, .d = 64, .br = 7, .bc = 13, .causal = 1},
    {.op = "attn", .sq = 333, .d = 64},
    {.op = "attn", .sq = 333, .d = 64, .causal = 1},
    {.op = "attn", .sq = 1, .d = 64},
    {.op = "attn", .sq = 1, .d = 64, .causal = 1},
    {.op = "attn", .sq = 20, .d = 16, .br = 1, .bc = 1, .causal = 1},
    {.op = "attn", .sq = 50, .d = 32, .br = 128, .bc = 128, .causal = 1},    /* tiles > n */
    {.op = "attn", .sq = 100, .sk = 37, .d = 64, .causal = 1},              /* masked rows */
    {.op = "attn", .sq = 100, .sk = 37, .d = 64, .br = 16, .bc = 8, .causal = 1},
    {.op = "attn", .sq = 37, .sk = 100, .d = 64, .causal = 1},
    {.op = "attn", .sq = 1, .sk = 300, .d = 64, .causal = 1},              /* decode step */
    {.op = "attn", .sq = 77, .sk = 129, .d = 64, .br = 16, .bc = 32},
    {.op = "attn", .sq = 130, .d = 8, .causal = 1},
    {.op = "attn", .sq = 130, .d = 40, .causal = 1},
    {.op = "attn", .sq = 130, .d = 64, .causal = 1},
    {.op = "attn", .sq = 130, .d = 96},
    {.op = "attn", .sq = 130, .d = 128, .causal = 1},
    {.op = "attn", .sq = 130, .d = 256},
    {.op = "attn", .sq = 65, .d = 80, .br = 16, .bc = 16},                    /* odd head dim */
    {.op = "attn", .sq = 96, .heads = 8, .kv_heads = 2, .d = 64, .causal = 1}, /* GQA */
    {.op = "attn", .sq = 96, .heads = 4, .kv_heads = 1, .d = 64},             /* MQA */
    {.op = "attn", .batch = 2, .sq = 70, .sk = 90, .heads = 4, .kv_heads = 2, .d = 32,
     .causal = 1, .bhsd = 1},                                                /* (B, H, S, D) */
    {.op = "attn", .sq = 128, .d = 64, .q_scale = 100.0f},                   /* Q x 100 */
    {.op = "attn", .sq = 128, .d = 64, .q_scale = 100.0f, .causal = 1},
    /* split-KV: two flash halves merged */
    {.op = "attn_merge", .sq = 200, .d = 64, .split = 77},
    {.op = "attn_merge", .sq = 1, .sk = 301, .heads = 8, .kv_heads = 2, .d = 128, .split = 150},
    {.op = "attn_merge", .batch = 2, .sq = 33, .sk = 64, .heads = 2, .d = 40, .split = 1,
     .bhsd = 1},
    /* attention backward (o and lse from the flash forward) and forward + backward */
    {.op = "attn_bwd", .sq = 130, .d = 64},
    {.op = "attn_bwd", .sq = 130, .d = 64, .causal = 1},
    {.op = "attn_bwd", .sq = 77, .sk = 129, .d = 40, .br = 16, .bc = 32, .causal = 1},
    {.op = "attn_bwd", .sq = 100, .sk = 37, .d = 64, .br = 16, .bc = 8, .causal = 1}, /* masked */
    {.op = "attn_bwd", .sq = 1, .sk = 300, .d = 64, .causal = 1},                  /* decode step */
    {.op = "attn_bwd", .sq = 1, .d = 16},                                           /* n = 1 */
    {.op = "attn_bwd", .sq = 96, .heads = 8, .kv_heads = 2, .d = 64, .causal = 1},  /* GQA */
    {.op = "attn_bwd", .sq = 96, .heads = 4, .kv_heads = 1, .d = 80},               /* MQA */
    {.op = "attn_bwd", .batch = 2, .sq = 70, .sk = 90, .heads = 4, .kv_heads = 2, .d = 32,
     .causal = 1, .bhsd = 1},                                                      /* BHSD */
    {.op = "attn_bwd", .sq = 130, .d = 128, .br = 7, .bc = 13, .causal = 1},
    {.op = "attn_fwdbwd", .sq = 200, .d = 64, .causal = 1},
    {.op = "attn_fwdbwd", .sq = 65, .sk = 90, .heads = 6, .kv_heads = 2, .d = 48},
    /* online softmax: chunks + merge */
    {.op = "softmax", .rows = 64, .width = 1},
    {.op = "softmax", .rows = 64, .width = 3},
    {.op = "softmax", .rows = 64, .width = 1000},
    {.op = "softmax", .rows = 16, .width = 4099},
    /* RMSNorm */
    {.op = "rmsnorm", .rows = 4096, .width = 512},
    {.op = "rmsnorm", .rows = 7, .width = 1},
    {.op = "rmsnorm", .rows = 33, .width = 1031},
    {.op = "rmsnorm_res", .rows = 64, .width = 1024},
    {.op = "rmsnorm_res", .rows = 5, .width = 3},
    /* SwiGLU */
    {.op = "swiglu", .rows = 64, .width = 3072},
    {.op = "swiglu", .rows = 3, .width = 5},
    {.op = "swiglu", .rows = 1, .width = 1},
    /* bf16 / f16 storage (float32 accumulation) vs the reference in float32 on the same
     * rounded inputs: tolerance = the dtype's rounding (cases.c, case_default_tol) */
    {.op = "attn", .sq = 130, .d = 64, .causal = 1, .dtype = FLASHC_BF16},
    {.op = "attn", .sq = 77, .sk = 129, .d = 40, .br = 16, .bc = 32, .dtype = FLASHC_F16},
    {.op = "attn", .sq = 1, .sk = 300, .d = 64, .causal = 1, .dtype = FLASHC_F16},
    {.op = "attn", .batch = 2, .sq = 70, .sk = 90, .heads = 4, .kv_heads = 2, .d = 32,
     .causal = 1, .bhsd = 1, .dtype = FLASHC_BF16},
    {.op = "rmsnorm", .rows = 33, .width = 1031, .dtype = FLASHC_BF16},
    {.op = "rmsnorm", .rows = 7, .width = 1, .dtype = FLASHC_F16},
    {.op = "rmsnorm_res", .rows = 64, .width = 1024, .dtype = FLASHC_BF16},
    {.op = "rmsnorm_res", .rows = 5, .width = 3, .dtype = FLASHC_F16},
    {.op = "swiglu", .rows = 64, .width = 3072, .dtype = FLASHC_BF16},
    {.op = "swiglu", .rows = 3, .width = 5, .dtype = FLASHC_F16},
};

const case_spec *check_table(int *count)
{
    *count = (int)(sizeof table / sizeof table[0]);
    return table;
}

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

static const char check_intro[] =
    "Runs every op (attention forward naive vs flash, split-KV merge, attention backward and\n"
    "forward + backward, online softmax, RMSNorm plain and residual, SwiGLU) against its float64\n"
    "reference on fresh random inputs, over a table of shapes (causal and not, GQA/MQA, odd and\n"
    "unequal lengths, head dims 8..256, tiles, bf16 / f16 storage), and the traffic model against\n"
    "the seeds' numbers.\n"
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
    const case_spec *t = check_table(&n_table);
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
        case_spec s = t[i];
        case_spec_defaults(&s);
        const op_desc *op = cases_find_op(s.op);
        char shape[160], err[128];
        case_describe(&s, shape, sizeof shape);
        const double tol = s.tol > 0 ? s.tol : case_default_tol(&s);
        case_data *c = case_create(&s, (uint64_t)seed + (uint64_t)i, err, sizeof err);
        if (!c) {
            printf("FAIL  %-11s %-6s %-44s %s\n", s.op, "-", shape, err);
            failed++;
            continue;
        }
        const uint64_t hash0 = case_inputs_hash(c);
        char ref_fail[300] = "";
        const flashc_status st = case_run_reference(c);
        if (st != FLASHC_OK)
            snprintf(ref_fail, sizeof ref_fail, "reference failed: %s (%s)",
                     flashc_status_string(st), flashc_last_error());
        for (int k = 1; k < op->n_impls; k++) {
            char why[300];
            snprintf(why, sizeof why, "%s", ref_fail);
            double e = 0.0;
            if (st == FLASHC_OK) {
                case_prepare(c, 1);
                const flashc_status sk = case_run(c, k, 1, NULL);
                if (sk != FLASHC_OK)
                    snprintf(why, sizeof why, "%s (%s)", flashc_status_string(sk),
                             flashc_last_error());
                else if (case_inputs_hash(c) != hash0)
                    snprintf(why, sizeof why, "modified an input");
                else if (!((e = case_max_err(c)) <= tol)) /* NaN fails too */
                    snprintf(why, sizeof why, "error above tolerance");
            }
            if (why[0]) {
                failed++;
                printf("FAIL  %-11s %-6s %-44s err %.2e tol %.1e  %s\n", s.op, op->impls[k], shape,
                       e, tol, why);
            } else {
                passed++;
                if (!quiet)
                    printf("ok    %-11s %-6s %-44s err %.2e tol %.1e\n", s.op, op->impls[k], shape,
                           e, tol);
            }
        }
        case_destroy(c);
    }
    printf("flashc check: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : passed ? 0 : 1;
}
