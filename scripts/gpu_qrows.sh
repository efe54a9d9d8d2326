#!/usr/bin/env bash
# Issue 18 on the lent GPU: why 4-bit weights stop scaling with the batch, and the fix
# (models/quantized_rows.py). 1. probe_qmm.py: a quantized matmul with the rows as one matrix
# (M, K) against the rows as a decode step gives them (M, 1, K). 2. The engine in process on the
# Llama-3.1-8B shape, 4-bit, this tree against OLD (a build without the fix), each against
# BatchGenerator on the model that build loaded. 3. Over HTTP: `mlxctl serve` against
# `mlx_lm.server` on the same saved 4-bit weights, interleaved by bench-serve.
#   OLD=.old MLXCTL_HOME=.gpu-home OUT=... bash scripts/gpu_qrows.sh [probe|engine|serve]...
set -uo pipefail
OUT=${OUT:-bench-results}; mkdir -p "$OUT"
MODEL=${MODEL:-/tmp/llama8b4}
PY=${PYTHON:-python3}
CONC=${CONC:-16,64}
[ -d "$MODEL" ] || $PY scripts/save_dummy.py --preset llama-3.1-8b-4bit --dtype bfloat16 --out "$MODEL" >/dev/null
for part in ${*:-probe engine serve}; do
  case $part in
  probe) $PY scripts/probe_qmm.py --rows 1,4,8,16,64,256 > "$OUT/probe_qmm.jsonl" ;;
  engine) MODEL=$MODEL CONC=$CONC ORDER=${ORDER:-new old} OUT=$OUT bash scripts/gpu_ab.sh engine ;;
  serve)
    $PY -m mlxctl serve -m "$MODEL" --dtype native --max-num-seqs 256 --port 8080 --served-model-name q8b \
      2> "$OUT/serve_q8b.log" &
    $PY -m mlx_lm.server --model "$MODEL" --port 8081 --decode-concurrency 256 --prompt-concurrency 8 \
      2> "$OUT/mlx_lm_server_q8b.log" &
    for _ in $(seq 180); do
      curl -sf localhost:8080/health >/dev/null && curl -sf localhost:8081/v1/models >/dev/null && break; sleep 1
    done
    for c in ${CONC//,/ }; do
      timeout 240 $PY -m mlxctl bench-serve --url http://127.0.0.1:8080 -m q8b --url http://127.0.0.1:8081 -m "$MODEL" \
        --prompt-tokens 512 --output-tokens 128 -c "$c" -n "$c" --repeats "${REPS:-1}" --json > "$OUT/serve_q8b_c$c.json"
    done
    kill $(jobs -p) 2>/dev/null; wait ;;
  esac
done
ls -la "$OUT"
