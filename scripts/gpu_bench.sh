#!/usr/bin/env bash
# The GPU benchmark behind docs/benchmarks.md: a Llama-3.2-1B-shaped bf16 model with dummy
# weights, (1) the engine against mlx-lm in one process, (2) `mlxctl serve` against
# `mlx_lm.server` over HTTP with `mlxctl bench-serve`, interleaved, 512-token prompts,
# 128 new tokens, concurrency 1 to 256. Results land in $OUT (default bench-results/).
set -uo pipefail
OUT=${OUT:-bench-results}; mkdir -p "$OUT"
MODEL=${MODEL:-/tmp/llama1b}
PY=${PYTHON:-python3}
$PY scripts/save_dummy.py --preset llama-3.2-1b --dtype bfloat16 --out "$MODEL" >/dev/null
timeout 200 $PY scripts/bench_engine.py --model "$MODEL" --dtype native --prompt-tokens 512 --max-tokens 128 \
  --concurrency 8,64 --reps 2 --json > "$OUT/engine.json"
$PY -m mlxctl serve -m "$MODEL" --dtype native --max-num-seqs 256 --port 8080 --served-model-name llama1b \
  2> "$OUT/serve.log" &
$PY -m mlx_lm.server --model "$MODEL" --port 8081 --decode-concurrency 256 --prompt-concurrency 8 \
  2> "$OUT/mlx_lm_server.log" &
for _ in $(seq 120); do
  curl -sf localhost:8080/health >/dev/null && curl -sf localhost:8081/v1/models >/dev/null && break; sleep 1
done
bench() { timeout 150 $PY -m mlxctl bench-serve --url http://127.0.0.1:8080 --url http://127.0.0.1:8081 \
  -m llama1b -m "$MODEL" --prompt-tokens 512 --output-tokens 128 --json "$@"; }
bench -c 1 -n 6 > "$OUT/serve_c1.json"
bench -c 4,16 -n 48 > "$OUT/serve_c4_16.json"
bench -c 64 -n 128 > "$OUT/serve_c64.json"
bench -c 256 -n 256 > "$OUT/serve_c256.json"
kill %1 %2 2>/dev/null; wait
ls -la "$OUT"
