#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, -fsanitize=fuzzer,address,undefined; CUDA off) and runs
# each for a bounded time from its committed seed corpus. Fails on any finding: a sanitizer
# report, a violated oracle (fuzz_common.h), a timeout or running out of memory.
#
#   fuzz/run.sh                       every target, FLASHC_FUZZ_SECONDS (default 40) each
#   FLASHC_FUZZ_SECONDS=300 fuzz/run.sh attn_fwd merge     chosen targets, longer
#   FLASHC_FUZZ_BUILD=dir             build directory (default build-fuzz)
#
# New inputs go to a scratch corpus ($build/corpus/<target>), never into fuzz/corpus; a crash
# leaves its input as $build/crash-<target>-*. Prints one line per target: executions, coverage
# (libFuzzer's cov: edges and ft: features at the end) and findings, the figures recorded in
# docs/fuzzing.md.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
build="${FLASHC_FUZZ_BUILD:-build-fuzz}"
secs="${FLASHC_FUZZ_SECONDS:-40}"
jobs=$(nproc 2>/dev/null || echo 2)
all=(attn_fwd attn_bwd attn_varlen attn_kvcache merge softmax rmsnorm swiglu tensor)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")

# libFuzzer's instrumentation on the library (fuzzer-no-link), the runtime in the targets
san="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
CC=clang cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLASHC_CUDA=OFF \
    -DFLASHC_TESTS=OFF -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link $san" >/dev/null
cmake --build "$build" -j"$jobs" --target flashc_static >/dev/null
for t in "${targets[@]}"; do
    clang -std=c11 -O1 -g -fsanitize=fuzzer $san -fopenmp -I include -I "$build/include" -I src/core \
        "fuzz/fuzz_$t.c" "$build/libflashc.a" -lm -o "$build/fuzz_$t"
done

status=0
summary=()
for t in "${targets[@]}"; do
    work="$build/corpus/$t"
    mkdir -p "$work"
    log="$build/fuzz_$t.log"
    # -max_len: the decoders read at most a few KiB; -timeout: one execution is milliseconds
    set +e
    LSAN_OPTIONS=suppressions=$repo/fuzz/lsan.supp ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    OMP_NUM_THREADS=2 "$build/fuzz_$t" -max_total_time="$secs" -max_len=4096 -timeout=10 \
        -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$build/crash-$t-" \
        "$work" "fuzz/corpus/$t" >"$log" 2>&1
    rc=$?
    set -e
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || echo "?")
    last=$(grep -E '^#[0-9]+' "$log" | tail -1)
    cov=$(echo "$last" | grep -o 'cov: [0-9]*' | grep -o '[0-9]*' || echo "?")
    ft=$(echo "$last" | grep -o 'ft: [0-9]*' | grep -o '[0-9]*' || echo "?")
    if [ $rc -eq 0 ]; then
        finding="none"
    else
        finding="FOUND (rc $rc, see $log)"
        status=1
        grep -E "ERROR|oracle violated|SUMMARY|runtime error" "$log" | head -5 >&2 || true
    fi
    summary+=("$(printf '%-10s %6ss  execs %-9s cov %-6s ft %-6s findings: %s' "$t" "$secs" "$execs" "$cov" "$ft" "$finding")")
done
echo "== fuzz summary ($(date -u +%FT%TZ), $(clang --version | head -1))"
printf '%s\n' "${summary[@]}"
exit $status
