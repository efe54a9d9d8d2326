#!/usr/bin/env bash
# Issue 18 on the lent GPU: where the daemon's time goes over HTTP, and what the GIL switch
# interval does to it. Two daemons of this build at once: X with the interval the daemon ships
# with (server/gil.py) and Y with MLXCTL_SWITCH_INTERVAL_MS=${Y_MS:-5} (CPython's default), both
# `mlxctl serve -m /tmp/llama1b --dtype native --max-num-seqs 256` (Llama-3.2-1B shape, bf16
# dummy), interleaved by one bench-serve (512-token prompts, 128 new tokens): 64 streams with X
# first, 64 with Y first, then 256 (X first); then py-spy samples X's threads at 64 streams, once
# every thread (--idle) and once only the thread holding the GIL (--gil); then the in-process
# engine at 64 streams on the same machine, for the ratio. py-spy's wheel travels in .gpu-tools.
#   MLXCTL_HOME=.gpu-home OUT=... bash scripts/gpu_profile_serve.sh
set -uo pipefail
OUT=${OUT:-bench-results}; mkdir -p "$OUT"; OUT=$(realpath "$OUT")
MODEL=${MODEL:-/tmp/llama1b}
PY=${PYTHON:-python3}
REPS=${REPS:-3}
[ -d "$MODEL" ] || $PY scripts/save_dummy.py --preset llama-3.2-1b --dtype bfloat16 --out "$MODEL" >/dev/null
$PY -m pip install -q --no-deps --target /tmp/pyspy .gpu-tools/py_spy-*.whl >/dev/null 2>&1
SPY=/tmp/pyspy/bin/py-spy
ARGS=(serve -m "$MODEL" --dtype native --max-num-seqs 256 --served-model-name llama1b ${SERVE_EXTRA:-})
$PY -m mlxctl "${ARGS[@]}" --port 8080 2> "$OUT/serve_x.log" &
MLXCTL_SWITCH_INTERVAL_MS=${Y_MS:-5} $PY -m mlxctl "${ARGS[@]}" --port 8082 2> "$OUT/serve_y.log" &
for _ in $(seq 180); do
  curl -sf localhost:8080/health >/dev/null && curl -sf localhost:8082/health >/dev/null && break; sleep 1
done
X=http://127.0.0.1:8080; Y=http://127.0.0.1:8082
pid_of() { pgrep -f "port $1" | tail -1; }
pair() {  # first second streams reps name
  timeout 200 $PY -m mlxctl bench-serve --url "$1" -m llama1b --url "$2" -m llama1b --prompt-tokens 512 \
    --output-tokens 128 -c "$3" -n "$3" --repeats "$4" --json > "$OUT/$5.json" 2> "$OUT/$5.log"
}
pair $X $Y 64 "$REPS" c64_x_first
pair $Y $X 64 "$REPS" c64_y_first
pair $X $Y 256 2 c256_x_first
for mode in ${SPY_MODES:-idle gil}; do
  $SPY record -p "$(pid_of 8080)" --threads --$mode -r 250 -d 12 -f raw -o "$OUT/prof_$mode.txt" > "$OUT/spy_$mode.log" 2>&1 &
  spy=$!; sleep 1
  timeout 60 $PY -m mlxctl bench-serve --url $X -m llama1b --prompt-tokens 512 --output-tokens 128 \
    -c 64 -n 192 --repeats 1 --json > "$OUT/prof_$mode.json" 2>&1
  wait $spy
done
pkill -f "mlxctl serve" 2>/dev/null
while pgrep -f "mlxctl serve" >/dev/null; do sleep 1; done
[ -n "${SKIP_ENGINE:-}" ] || timeout 200 $PY scripts/bench_engine.py --model "$MODEL" --dtype native --prompt-tokens 512 \
  --max-tokens 128 --concurrency 64 --reps 2 --json > "$OUT/engine.json" 2> "$OUT/engine.log"
ls -la "$OUT"
