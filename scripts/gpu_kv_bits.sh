#!/usr/bin/env bash
# Issue 20 on the lent GPU: decode with --kv-bits 8 and 4 against 16-bit KV, in process, on the
# Llama-3.1-8B shape (4-bit dummy weights, group 64): bench_engine.py's engine variants
# (kv_bits=N) beside the plain engine and mlx-lm, interleaved, at 1 (against generate_step),
# CONC streams; 512-token random prompts, 128 new tokens. Results in $OUT.
#   MLXCTL_HOME=.gpu-home OUT=... bash scripts/gpu_kv_bits.sh
set -uo pipefail
OUT=${OUT:-bench-results}; mkdir -p "$OUT"
PRESET=${PRESET:-llama-3.1-8b-4bit}
MODEL=${MODEL:-/tmp/$PRESET}
PY=${PYTHON:-python3}
[ -d "$MODEL" ] || $PY scripts/save_dummy.py --preset "$PRESET" --dtype bfloat16 --out "$MODEL" >/dev/null
timeout "${LIMIT:-400}" $PY scripts/bench_engine.py --model "$MODEL" --dtype native --prompt-tokens 512 --max-tokens 128 \
  --concurrency "${CONC:-16,64}" --reps "${REPS:-1}" --variant kv8:kv_bits=8 --variant kv4:kv_bits=4 \
  --json > "$OUT/kv_bits_$PRESET.json" 2> "$OUT/kv_bits_$PRESET.log"
ls -la "$OUT"
