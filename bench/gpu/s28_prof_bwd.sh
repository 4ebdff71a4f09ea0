#!/usr/bin/env bash
# bench/gpu/s28_prof_bwd.sh BUILD_DIR — Nsight Compute over the backward at d 256 / 192 / 128
# (flashc's default against cuDNN, non-causal 4k, and d 256 causal; B x S = 16k): the L2's bytes
# and reduction bytes a kernel (prof_table.py's L2 columns) beside time and DRAM. s9_prof2.sh's
# method and table with these groups (~45 s; 2026-12-06: bench/RESULTS.md, "Session of
# 2026-12-06, late afternoon").
export PROF2_NAME=prof28 PROF2_GROUPS='bwd 75 bwd:S=4096,D=256 bwd:S=4096,D=192 bwd:S=4096,D=128
bwdc 30 bwd:S=4096,D=256,CAUSAL=1'
exec bash "$(dirname "$0")/s9_prof2.sh" "$@"
