#!/bin/sh
# A ctest of the CLI: every bad invocation must exit with status 2 and say why on stderr.
flashc="$1"
fail=0
expect_usage_error() {
    err=$("$flashc" "$@" 2>&1 >/dev/null)
    rc=$?
    if [ "$rc" -ne 2 ] || [ -z "$err" ]; then
        echo "FAIL: flashc $* -> exit $rc, stderr '$err' (want exit 2 and a message)"
        fail=1
    else
        echo "ok: flashc $* -> $err"
    fi
}
expect_usage_error
expect_usage_error nosuchcommand
expect_usage_error bench --bogus
expect_usage_error bench --n 0
expect_usage_error bench --n 64,,128
expect_usage_error bench --n abc
expect_usage_error bench --d -1
expect_usage_error bench --reps
expect_usage_error bench --op nosuchop
expect_usage_error bench --impl nosuchimpl
expect_usage_error bench --format xml
expect_usage_error bench --dtype f64
expect_usage_error bench --dtype bf16 --op attn_bwd
expect_usage_error bench --dtype f16 --suite check
expect_usage_error bench --heads 6 --kv-heads 4
expect_usage_error bench --causal=1
expect_usage_error bench --op attn_kvcache --page-size -1
expect_usage_error bench --op attn_kvcache --cache-len 0
expect_usage_error bench --softcap -2
expect_usage_error bench stray
expect_usage_error bench --device tpu
expect_usage_error bench --device cuda --op nosuchop
expect_usage_error bench --calls 4
expect_usage_error bench --device cuda --op rope --calls 2 --reps 500
expect_usage_error check --op nosuchop
expect_usage_error check --seed x
expect_usage_error info extra
"$flashc" bench --help >/dev/null || { echo "FAIL: bench --help"; fail=1; }
"$flashc" check --help >/dev/null || { echo "FAIL: check --help"; fail=1; }
exit $fail
