#!/usr/bin/env bash
# bench/cpu_bf16_units.sh [BUILD] [ROUNDS] — issue 16's "bf16 forward >= 1.6x flashc f32" on a CPU
# without AMX: the avx512bf16 table (vdpbf16ps products) on bf16 inputs against the avx512 table on
# float32 inputs, and the avx512 table's float32 path on the same bf16 inputs (what bf16 storage
# ran on before the table was chosen automatically), same shapes, same run.
#
# FLASHC_ISA is read once per process, so every (table, dtype) is its own `flashc bench` process;
# the three run back to back per shape, in a rotated order each round, and the table gives the
# median of each over ROUNDS rounds (each round itself a median of --reps 3 after a warm-up).
# Shapes: d 64 / 128, n 512 ... 8192, causal and not, batch 1, 8 heads, 2 threads.
#   FLASHC_BF16_UNITS_N="2048 4096" FLASHC_BF16_UNITS_D=128 bench/cpu_bf16_units.sh build 3
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}/flashc
R=${2:-3}
NS=${FLASHC_BF16_UNITS_N:-512 1024 2048 4096 8192}
DS=${FLASHC_BF16_UNITS_D:-64 128}
cfgs=("avx512bf16 bf16" "avx512 f32" "avx512 bf16")

one() { # isa dtype d n causal -> ms (median of the process's timed runs)
    local c=()
    [ "$5" = 1 ] && c=(--causal)
    FLASHC_ISA=$1 "$B" bench --op attn --impl flash --dtype "$2" --d "$3" --n "$4" --heads 8 \
        --threads 2 --reps 3 --format csv "${c[@]}" 2>/dev/null |
        awk -F, '$1 == "attn" && $2 == "flash" { print $12 }'
}
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

"$B" info | head -1
lscpu | awk -F: '/Model name/ { gsub(/^ +/, "", $2); print "# cpu: " $2 }'
echo "# $(date -u +%FT%TZ), $R rounds, 2 threads, batch 1, 8 heads; GFLOP/s = 4 d x visible pairs x heads / median time"
echo
echo "| d | n | causal | avx512bf16 bf16 | avx512 f32 | avx512 bf16 (f32 path) | bf16 units / f32 | bf16 units / f32 path |"
echo "|--:|--:|---|--:|--:|--:|--:|--:|"
for d in $DS; do
    for n in $NS; do
        for causal in 0 1; do
            tmp=$(mktemp -d)
            for ((r = 0; r < R; r++)); do
                for ((k = 0; k < 3; k++)); do
                    i=$(((k + r) % 3))
                    read -r isa dt <<<"${cfgs[$i]}"
                    one "$isa" "$dt" "$d" "$n" "$causal" >>"$tmp/$i"
                done
            done
            m0=$(median <"$tmp/0") m1=$(median <"$tmp/1") m2=$(median <"$tmp/2")
            rm -rf "$tmp"
            awk -v d="$d" -v n="$n" -v c="$causal" -v a="$m0" -v b="$m1" -v e="$m2" 'BEGIN {
                pairs = c ? n * (n + 1) / 2 : n * n
                f = 4 * d * pairs * 8 / 1e6 # MFLOP -> GFLOP/s with ms
                printf "| %d | %d | %s | %.0f | %.0f | %.0f | %.2f | %.2f |\n", d, n, c ? "yes" : "no",
                       f / a, f / b, f / e, b / a, e / a }'
        done
    done
done
