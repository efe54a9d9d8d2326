#!/usr/bin/env bash
# Issue 18 on the lent GPU: where the daemon's time goes over HTTP, and whether a shorter GIL
# switch interval helps the engine thread. Two daemons of this build, A as shipped and B with
# sys.setswitchinterval(${SI:-0.0005}) (CPython's default is 0.005 s), both `mlxctl serve -m
# /tmp/llama1b --dtype native --max-num-seqs 256`, interleaved by one bench-serve (512-token
# prompts, 128 new tokens): 64 streams A first, 64 streams B first, 256 streams A first; then py-spy samples A's threads at 64 streams, once
# every thread (--idle) and once only the thread holding the GIL (--gil); then the in-process
# engine at 64 streams for the ratio. py-spy's wheel travels in .gpu-tools (carry it).
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
$PY -m mlxctl "${ARGS[@]}" --port 8080 2> "$OUT/serve_a.log" &
$PY -c "import sys; sys.setswitchinterval(float(sys.argv.pop(1))); from mlxctl.cli.app import main; sys.argv[0] = 'mlxctl'; main()" \
  "${SI:-0.0005}" "${ARGS[@]}" --port 8082 2> "$OUT/serve_b.log" &
for _ in $(seq 180); do
  curl -sf localhost:8080/health >/dev/null && curl -sf localhost:8082/health >/dev/null && break; sleep 1
done
pid_of() { pgrep -f "port $1" | tail -1; }
loop_ticks() { for p in 8080 8082; do pid=$(pid_of $p); echo "$p $(cut -d')' -f2 /proc/$pid/task/$pid/stat | awk '{print $12+$13}')"; done; }
X=http://127.0.0.1:8080; Y=http://127.0.0.1:8082
pair() {  # first second streams reps name
  loop_ticks > "$OUT/loop_ticks_$5_before.txt"
  timeout 200 $PY -m mlxctl bench-serve --url "$1" -m llama1b --url "$2" -m llama1b --prompt-tokens 512 \
    --output-tokens 128 -c "$3" -n "$3" --repeats "$4" --json > "$OUT/$5.json" 2> "$OUT/$5.log"
  loop_ticks > "$OUT/loop_ticks_$5_after.txt"
}
pair $X $Y 64 "$REPS" c64_a_first   # A (8080): as shipped; B (8082): the shorter interval
pair $Y $X 64 "$REPS" c64_b_first
pair $X $Y 256 2 c256_a_first
for mode in idle gil; do
  $SPY record -p "$(pid_of 8080)" --threads --$mode -r 250 -d 12 -f raw -o "$OUT/prof_$mode.txt" > "$OUT/spy_$mode.log" 2>&1 &
  spy=$!; sleep 1
  timeout 60 $PY -m mlxctl bench-serve --url http://127.0.0.1:8080 -m llama1b --prompt-tokens 512 --output-tokens 128 \
    -c 64 -n 192 --repeats 1 --json > "$OUT/prof_$mode.json" 2>&1
  wait $spy
done
pkill -f "mlxctl serve|cli.app import main" 2>/dev/null
while pgrep -f "mlxctl serve|cli.app import main" >/dev/null; do sleep 1; done
[ -n "${SKIP_ENGINE:-}" ] || timeout 200 $PY scripts/bench_engine.py --model "$MODEL" --dtype native --prompt-tokens 512 --max-tokens 128 \
  --concurrency 64 --reps 2 --json > "$OUT/engine.json" 2> "$OUT/engine.log"
ls -la "$OUT"
