#!/usr/bin/env bash
# Issue 18 on the lent GPU: where a batch's time goes, the engine against BatchGenerator phase
# by phase (scripts/probe_batch.py), then the same run under py-spy (active samples, and
# with --idle) so the engine thread can be read against mlx-lm's loop on the main thread.
# Llama-3.2-1B shape, bf16 dummy weights. Results land in $OUT (default bench-results/).
#   C=64 bash scripts/gpu_probe_batch.sh
set -uo pipefail
OUT=${OUT:-bench-results}; mkdir -p "$OUT"
MODEL=${MODEL:-/tmp/llama1b}
PY=${PYTHON:-python3}
SPY=${SPY:-py-spy}
C=${C:-64}
REPS=${REPS:-3}
[ -d "$MODEL" ] || $PY scripts/save_dummy.py --preset llama-3.2-1b --dtype bfloat16 --out "$MODEL" >/dev/null
timeout 240 $PY scripts/probe_batch.py --model "$MODEL" --dtype native --concurrency "$C" --reps "$REPS" \
  > "$OUT/probe_c$C.jsonl" 2> "$OUT/probe_c$C.log"
timeout 150 $SPY record --threads -r 250 -f raw -o "$OUT/spy_c$C.txt" -- \
  $PY scripts/probe_batch.py --model "$MODEL" --dtype native --concurrency "$C" --reps 2 > "$OUT/spy_c$C.jsonl" 2>&1
timeout 150 $SPY record --threads --idle -r 250 -f raw -o "$OUT/spy_idle_c$C.txt" -- \
  $PY scripts/probe_batch.py --model "$MODEL" --dtype native --concurrency "$C" --reps 2 > "$OUT/spy_idle_c$C.jsonl" 2>&1
ls -la "$OUT"
