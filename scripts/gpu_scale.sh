#!/usr/bin/env bash
# Issue 18 on the lent GPU: the engine against mlx-lm in one process with engine settings side
# by side (bench_engine.py --variant; VARIANTS overrides them), then over HTTP `mlxctl serve`
# against `mlx_lm.server` on the same weights, interleaved by bench-serve, at 64 and 256
# streams (PEER=0: ours alone, with a py-spy profile of the daemon at 64 streams).
# Llama-3.2-1B shape, bf16 dummy weights, 512-token prompts, 128 new tokens. Results land in
# $OUT (default bench-results/).
#   MLXCTL_HOME=.gpu-home bash scripts/gpu_scale.sh [engine|serve]   (both when not given)
set -uo pipefail
OUT=${OUT:-bench-results}; mkdir -p "$OUT"
MODEL=${MODEL:-/tmp/llama1b}
PY=${PYTHON:-python3}
SPY=${SPY:-py-spy}
REPS=${REPS:-3}
VARIANTS=${VARIANTS:---variant nopace:prefill_step_ms=0}
PEER=${PEER:-1}
[ -d "$MODEL" ] || $PY scripts/save_dummy.py --preset llama-3.2-1b --dtype bfloat16 --out "$MODEL" >/dev/null
PART=${1:-all}
if [ "$PART" != serve ]; then
timeout 480 $PY scripts/bench_engine.py --model "$MODEL" --dtype native --prompt-tokens 512 --max-tokens 128 \
  --concurrency 8,64,256 --reps "$REPS" $VARIANTS \
  --json > "$OUT/engine_variants.json" 2> "$OUT/engine_variants.log"
fi
[ "$PART" = engine ] && { ls -la "$OUT"; exit 0; }
$PY -m mlxctl serve -m "$MODEL" --dtype native --max-num-seqs 256 --port 8080 --served-model-name llama1b \
  2> "$OUT/serve.log" &
SERVE=$!
urls=(--url http://127.0.0.1:8080 -m llama1b)
if [ "$PEER" = 1 ]; then
  $PY -m mlx_lm.server --model "$MODEL" --port 8081 --decode-concurrency 256 --prompt-concurrency 8 \
    2> "$OUT/mlx_lm_server.log" &
  urls+=(--url http://127.0.0.1:8081 -m "$MODEL")
fi
for _ in $(seq 120); do
  curl -sf localhost:8080/health >/dev/null && { [ "$PEER" = 0 ] || curl -sf localhost:8081/v1/models >/dev/null; } &&
    break; sleep 1
done
bench() { timeout 200 $PY -m mlxctl bench-serve "${urls[@]}" --prompt-tokens 512 --output-tokens 128 --json "$@"; }
bench -c 64 -n 64 --repeats 2 > "$OUT/serve_c64.json"
bench -c 256 -n 256 --repeats 2 > "$OUT/serve_c256.json"
[ "$PEER" = 1 ] && { kill $(jobs -p) 2>/dev/null; wait; ls -la "$OUT"; exit 0; }
$SPY record -p "$SERVE" --threads --nonblocking -r 200 -d 25 -f raw -o "$OUT/serve64.txt" >/dev/null 2>&1 &
bench -c 64 -n 192 > "$OUT/serve_c64_profiled.json"
wait %2 2>/dev/null
kill $SERVE 2>/dev/null; wait
ls -la "$OUT"
