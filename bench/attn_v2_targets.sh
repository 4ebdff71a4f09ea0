#!/usr/bin/env bash
# bench/attn_v2_targets.sh [BUILD] — issue 9's CPU targets, each read against a row of the same
# run (2 threads; flash rows only, 3 timed runs after 1 warm-up):
#   window   causal n = 16384 with a window of 1024 keys vs full causal (time ratio <= 1/8)
#   decode   attn_kvcache 1 query, Hq 32 / Hkv 8, d 128, ctx 8192, B 1 and 8, f32/bf16/f16,
#            contiguous and paged (page 16), GB/s of K + V vs the stream copy (--ceiling)
#   varlen   8 sequences of mixed lengths, 16384 rows, causal, vs one dense causal sequence of
#            the same work (n = sqrt(sum len^2)): GFLOP/s within 10%
#   mods     softcap / ALiBi / window vs the plain kernel, GFLOP/s per visible key (<= 10% cost)
# Prints the md rows only; run it on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}/flashc
run() { "$B" bench --threads 2 --impl flash --warmup 1 --reps 3 "$@" 2>/dev/null |
            grep -E '^\| (attn|attn_varlen|attn_kvcache|copy) |^- of ceiling'; }
"$B" bench --op softmax --n 64 --reps 3 2>/dev/null | grep -E '^\|( op |---)' # the table header
# window vs full causal
run --op attn --n 16384 --heads 2 --d 64 --causal --window 1024
run --op attn --n 16384 --heads 2 --d 64 --causal
# decode
for b in 1 8; do
    for dt in f32 bf16 f16; do
        for pg in 0 16; do
            run --op attn_kvcache --batch "$b" --heads 32 --kv-heads 8 --d 128 --cache-len 8192 \
                --dtype "$dt" --page-size "$pg"
        done
    done
done
"$B" bench --op attn_kvcache --impl flash --threads 2 --heads 32 --kv-heads 8 --d 128 \
    --cache-len 8192 --reps 3 --ceiling --ceiling-n 256 2>/dev/null | grep -E '^\| copy '
# varlen vs dense of the same work: lengths 16384 * w / 29, w = 1 6 4 2 7 5 3 1
run --op attn_varlen --n 16384 --batch 8 --heads 2 --d 64 --causal
dense=$(python3 -c "w=[1,6,4,2,7,5,3,1];l=[16384*x//29 for x in w[:-1]];l.append(16384-sum(l));print(round(sum(x*x for x in l)**0.5))")
run --op attn --n "$dense" --heads 2 --d 64 --causal
# modifiers, per visible key
run --op attn --n 4096 --heads 2 --d 64
run --op attn --n 4096 --heads 2 --d 64 --softcap 30
run --op attn --n 4096 --heads 2 --d 64 --alibi
run --op attn --n 4096 --heads 2 --d 64 --window 2048
