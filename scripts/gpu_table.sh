#!/usr/bin/env bash
# Issue 18's scaling table on the lent GPU: one model, 1 to 256 streams, in process and over HTTP.
#   engine: bench_engine.py, the engine against mlx-lm's bare `generate_step` loop (one stream) and
#           its `BatchGenerator` (CONC streams) in one process, interleaved, REPS repetitions.
#   serve:  `mlxctl serve` against `mlx_lm.server` on the same saved weights, interleaved by
#           bench-serve at each of HTTP_CONC (N requests a level: the streams, at least 8).
#   spec:   issue 19's check on random text: the engine with --speculative ngram against off.
# PRESET picks the shape: llama-3.2-1b (bf16, the default) or llama-3.1-8b-4bit. Results in $OUT.
#   MLXCTL_HOME=.gpu-home PRESET=llama-3.2-1b bash scripts/gpu_table.sh [engine|serve|spec]...
set -uo pipefail
OUT=${OUT:-bench-results}; mkdir -p "$OUT"
PRESET=${PRESET:-llama-3.2-1b}
MODEL=${MODEL:-/tmp/$PRESET}
PY=${PYTHON:-python3}
REPS=${REPS:-2}
CONC=${CONC:-4,8,16,64,256}
HTTP_CONC=${HTTP_CONC:-1,4,16,64,256}
TAG=${TAG:-$PRESET}
[ -d "$MODEL" ] || $PY scripts/save_dummy.py --preset "$PRESET" --dtype bfloat16 --out "$MODEL" >/dev/null
for part in ${*:-engine serve}; do
  case $part in
  engine)
    timeout 560 $PY scripts/bench_engine.py --model "$MODEL" --dtype native --prompt-tokens 512 --max-tokens 128 \
      --concurrency "$CONC" --reps "$REPS" --json > "$OUT/engine_$TAG.json" 2> "$OUT/engine_$TAG.log" ;;
  spec)
    timeout 300 $PY scripts/bench_engine.py --model "$MODEL" --dtype native --prompt-tokens 512 --max-tokens 128 \
      --concurrency "${SPEC_CONC:-4}" --reps "$REPS" --variant spec:speculative=ngram \
      --json > "$OUT/spec_$TAG.json" 2> "$OUT/spec_$TAG.log" ;;
  serve)
    $PY -m mlxctl serve -m "$MODEL" --dtype native --max-num-seqs 256 --port 8080 --served-model-name ours \
      2> "$OUT/serve_$TAG.log" &
    $PY -m mlx_lm.server --model "$MODEL" --port 8081 --decode-concurrency 256 --prompt-concurrency 8 \
      2> "$OUT/mlx_lm_server_$TAG.log" &
    for _ in $(seq 180); do
      curl -sf localhost:8080/health >/dev/null && curl -sf localhost:8081/v1/models >/dev/null && break; sleep 1
    done
    for c in ${HTTP_CONC//,/ }; do
      n=$(( c < 8 ? 8 : c ))
      timeout 240 $PY -m mlxctl bench-serve --url http://127.0.0.1:8080 -m ours --url http://127.0.0.1:8081 -m "$MODEL" \
        --prompt-tokens 512 --output-tokens 128 -c "$c" -n "$n" --repeats "$REPS" --json \
        > "$OUT/serve_${TAG}_c$c.json" 2>> "$OUT/bench_serve_$TAG.log"
    done
    kill $(jobs -p) 2>/dev/null; wait ;;
  esac
done
ls -la "$OUT"
