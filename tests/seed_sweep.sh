#!/usr/bin/env bash
# Runs the randomized CPU tests over and over, each run on a fresh seed, to find the seeds where
# a tolerance is too tight or a rare input breaks a path: CI draws one seed per test per run, so
# a 1-in-50 failure is a red CI every few days. Prints one line per failing run with the seed to
# replay it (FLASHC_TEST_SEED=<seed> ./<build>/<test>, under the FLASHC_ISA of the ctest name).
#
#   tests/seed_sweep.sh BUILD [ROUNDS] [CTEST_REGEX]
#     BUILD        a configured and built tree (CPU tests; CUDA tests skip without a GPU)
#     ROUNDS       runs per test (default 20)
#     CTEST_REGEX  which tests (default: every CPU test binary and the bench checks, not the
#                  emulator, fault injection or the library-load tests)
#
# The bench checks (cli_bench_*) draw their inputs from the time too; their JSON carries the seed.
set -uo pipefail
build="${1:?usage: tests/seed_sweep.sh BUILD [ROUNDS] [CTEST_REGEX]}"
rounds="${2:-20}"
regex="${3:-^(test_|cli_bench_)}"
exclude='cuda|nccl|emu_|faults|libflashc_'
log=$(mktemp)
trap 'rm -f "$log"' EXIT
fails=0
for ((r = 1; r <= rounds; r++)); do
    if ! ctest --test-dir "$build" -R "$regex" -E "$exclude" -j"$(nproc)" --output-on-failure >"$log" 2>&1; then
        # each failed test's output follows its result line; its seed is the first seed line after
        awk -v round="$r" '
            /\*\*\*Failed|\*\*\*Exception|\*\*\*Timeout/ { name = $0; sub(/.*: /, "", name); sub(/ \.+.*/, "", name); want = 1; next }
            want && /FLASHC_TEST_SEED=|"seed"/ { print "round " round ": " name ": " $0; want = 0 }
        ' "$log"
        grep -E "tests failed out of" "$log" | sed "s/^/round $r: /"
        fails=$((fails + 1))
    fi
    echo "round $r of $rounds done ($(date -u +%H:%M:%S)), $fails with a failure so far"
done
echo "seed sweep: $rounds rounds, $fails with a failure"
[ "$fails" -eq 0 ]
