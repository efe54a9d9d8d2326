#!/usr/bin/env bash
# Issue 18: is bench-serve's own process a part of the daemon's gap to the in-process engine at
# 64 streams? One daemon (Llama-3.2-1B shape, bf16 dummy, --max-num-seqs 256); each round runs
# one bench-serve with 64 streams (its CPU time read by bash's `time`) and then two bench-serve
# processes of 32 streams at once (their tokens over the slower one's wall time); then the
# in-process engine at 64 streams on the same machine. Results in $OUT.
#   OUT=... MLXCTL_HOME=.gpu-home ROUNDS=3 bash scripts/gpu_client.sh
set -uo pipefail
OUT=${OUT:-bench-results}; mkdir -p "$OUT"; OUT=$(realpath "$OUT")
PY=${PYTHON:-python3}
MODEL=${MODEL:-/tmp/llama1b}
[ -d "$MODEL" ] || $PY scripts/save_dummy.py --preset llama-3.2-1b --dtype bfloat16 --out "$MODEL" >/dev/null
$PY -m mlxctl serve -m "$MODEL" --dtype native --max-num-seqs 256 --port 8080 --served-model-name llama1b \
  2> "$OUT/serve.log" &
daemon=$!
for _ in $(seq 120); do curl -sf localhost:8080/health >/dev/null && break; sleep 1; done
bench() {  # bench-serve with C streams, C requests, one repetition, JSON to $1
  local out=$1 c=$2
  $PY -m mlxctl bench-serve --url http://127.0.0.1:8080 -m llama1b --prompt-tokens 512 --output-tokens 128 \
    -c "$c" -n "$c" --warmup 0 --json > "$out" 2> "${out%.json}.log"
}
bench "$OUT/warm.json" 64  # the daemon's first shapes
TIMEFORMAT='%U %S %R'
for r in $(seq "${ROUNDS:-3}"); do
  { time bench "$OUT/one_r$r.json" 64; } 2> "$OUT/one_r${r}_cpu.txt"
  # wait for the two clients by pid: a bare `wait` also waits for the daemon, for ever (it hung
  # the first run of this script on an H200, 2026-12-06)
  { time { bench "$OUT/two_a_r$r.json" 32 & a=$!; bench "$OUT/two_b_r$r.json" 32 & b=$!; wait $a $b; }; } \
    2> "$OUT/two_r${r}_cpu.txt"
done
kill $daemon; wait $daemon
timeout 200 $PY scripts/bench_engine.py --model "$MODEL" --dtype native --prompt-tokens 512 --max-tokens 128 \
  --concurrency 64 --reps 3 --json > "$OUT/engine.json" 2> "$OUT/engine.log"
ls -la "$OUT"
