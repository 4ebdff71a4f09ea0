/*
 * test_cases.c — the one case table (tests/cases/table.c) under ctest: every row, every
 * implementation of its op against the op's reference, one cmocka test per op. ctest runs it
 * once per CPU kernel table (test_cases.<isa> through isa_run), so each SIMD path meets every
 * case; `flashc check` prints the same rows and `flashc bench --suite check` times them.
 * The seed is FLASHC_TEST_SEED's (printed): a failure replays with
 * `FLASHC_TEST_SEED=N test_cases` or `flashc check --seed N`, row i drawing from seed + i.
 */
#include "cases.h"
#include "common.h"

#include <stdio.h>
#include <string.h>

typedef struct run_ctx {
    int passed, failed, skipped;
} run_ctx;

static void report(void *ctx, const case_outcome *r)
{
    run_ctx *x = ctx;
    if (r->skipped) {
        x->skipped++;
        if (r->why[0])
            printf("skip %s %s %s: %s\n", r->op, r->impl, r->shape, r->why);
    } else if (r->why[0]) {
        x->failed++;
        print_error("FAIL %s %s %s: err %.3e tol %.1e: %s\n", r->op, r->impl, r->shape, r->err,
                    r->tol, r->why);
    } else {
        x->passed++;
    }
}

static void test_op(void **state)
{
    const char *op = *state;
    int n;
    const case_spec *t = cases_table(&n);
    run_ctx ctx = {0};
    for (int i = 0; i < n; i++)
        if (strcmp(t[i].op, op) == 0)
            case_check(&t[i], tu_seed() + (uint64_t)i, report, &ctx);
    printf("%-13s %d passed, %d failed, %d skipped (not available here, or refused)\n", op, ctx.passed,
           ctx.failed, ctx.skipped);
    assert_int_equal(ctx.failed, 0);
    assert_true(ctx.passed > 0); /* a row that runs nothing checks nothing */
}

int main(void)
{
    tu_seed_from_env();
    int n;
    const case_spec *t = cases_table(&n);
    /* one test per op that has rows, in table order */
    static struct CMUnitTest tests[64];
    static const char *names[64];
    int nt = 0;
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int j = 0; j < nt; j++)
            seen |= strcmp(names[j], t[i].op) == 0;
        if (seen || nt == 64)
            continue;
        names[nt] = t[i].op;
        tests[nt] = (struct CMUnitTest){t[i].op, test_op, NULL, NULL, (void *)names[nt]};
        nt++;
    }
    return _cmocka_run_group_tests("cases", tests, (size_t)nt, NULL, NULL);
}
