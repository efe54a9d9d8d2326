#!/usr/bin/env bash
# Issue 18 on the lent GPU: two builds of mlxctl side by side, interleaved A B A B. OLD is a
# directory holding another build's `mlxctl` package (e.g. `git archive REV mlxctl | tar -x -C
# .old`); the scripts are this tree's. `engine`: bench_engine.py (each run against mlx-lm's
# BatchGenerator in the same process); `serve`: the daemon over HTTP at 64 and 256 streams.
# Llama-3.2-1B shape, bf16 dummy weights, 512-token prompts, 128 new tokens. Results in $OUT.
#   OLD=.old ROUNDS=1 MLXCTL_HOME=.gpu-home bash scripts/gpu_ab.sh engine|serve|pair
# `pair`: both daemons at once, interleaved by one bench-serve per level of HTTP_CONC (64,256).
# ORDER="new old" runs this tree's build first in each round (default: old first).
# .gpu-home: a store holding the default model's small files (models/smollm2-135m without its
# weights), whose tokenizer save_dummy.py copies; carry it with .old. The daemon needs pydantic's
# wheels staged too: ../shared/gpu/stage.sh pydantic==2.14.4 pydantic-core==2.50.5
# typing-inspection==0.4.5 annotated-types==0.8.0
set -uo pipefail
OUT=${OUT:-bench-results}; mkdir -p "$OUT"; OUT=$(realpath "$OUT")
MODEL=${MODEL:-/tmp/llama1b}
PY=${PYTHON:-python3}
OLD=${OLD:-.old}
ROUNDS=${ROUNDS:-1}
REPS=${REPS:-2}
BASE=${PYTHONPATH:-}
MODEL=$(realpath -m "$MODEL")
[ -z "${MLXCTL_HOME:-}" ] || export MLXCTL_HOME=$(realpath "$MLXCTL_HOME")
[ -d "$MODEL" ] || $PY scripts/save_dummy.py --preset llama-3.2-1b --dtype bfloat16 --out "$MODEL" >/dev/null
build() { if [ "$1" = old ]; then echo "$(realpath "$OLD"):$BASE"; else echo "$PWD:$BASE"; fi; }
# `python -m mlxctl` puts the working directory ahead of PYTHONPATH: a daemon of the old build
# must start in its directory, or it imports this checkout's package (before 2026-12-05 the
# `serve` mode ran both daemons from here: both were this build)
daemon() { local b=$1; shift; (cd "$([ "$b" = old ] && realpath "$OLD" || echo "$PWD")" &&
  PYTHONPATH=$(build "$b") exec $PY -m mlxctl serve "$@"); }
# the daemons run under nested subshells: killing the job leaves python behind (before
# 2026-12-06 the pair's daemons outlived it and held the GPU's memory for later runs)
stop_daemons() { pkill -f "mlxctl serve" 2>/dev/null; while pgrep -f "mlxctl serve" >/dev/null; do sleep 1; done; }
engine() {
  PYTHONPATH=$(build "$1") timeout 280 $PY scripts/bench_engine.py --model "$MODEL" --dtype native \
    --prompt-tokens 512 --max-tokens 128 --concurrency "${CONC:-8,64,256}" --reps "$REPS" --json \
    > "$OUT/engine_$1_$2.json" 2> "$OUT/engine_$1_$2.log"
}
serve() {
  daemon "$1" -m "$MODEL" --dtype native --max-num-seqs 256 --port 8080 \
    --served-model-name llama1b 2> "$OUT/serve_$1_$2.log" &
  local pid=$!
  for _ in $(seq 120); do curl -sf localhost:8080/health >/dev/null && break; sleep 1; done
  for c in 64 256; do
    timeout 200 $PY -m mlxctl bench-serve --url http://127.0.0.1:8080 -m llama1b --prompt-tokens 512 \
      --output-tokens 128 -c $c -n $c --repeats "$REPS" --json > "$OUT/serve_$1_$2_c$c.json"
  done
  stop_daemons
}
# both builds' daemons up at once (ports 8080 old, 8082 new), interleaved per repetition by one
# bench-serve, with each daemon's event-loop thread CPU time over the whole pair of runs
pair() {
  daemon old -m "$MODEL" --dtype native --max-num-seqs 256 --port 8080 --served-model-name llama1b \
    2> "$OUT/serve_old.log" &
  daemon new -m "$MODEL" --dtype native --max-num-seqs 256 --port 8082 --served-model-name llama1b \
    2> "$OUT/serve_new.log" &
  for _ in $(seq 180); do
    curl -sf localhost:8080/health >/dev/null && curl -sf localhost:8082/health >/dev/null && break; sleep 1
  done
  loop_ticks() { for p in 8080 8082; do pid=$(pgrep -f "port $p" | tail -1); echo "$p $(cut -d')' -f2 /proc/$pid/task/$pid/stat | awk '{print $12+$13}')"; done; }
  local levels=${HTTP_CONC:-64,256}
  for c in ${levels//,/ }; do
    loop_ticks > "$OUT/loop_ticks_c${c}_before.txt"
    timeout 280 $PY -m mlxctl bench-serve --url http://127.0.0.1:8080 -m llama1b --url http://127.0.0.1:8082 -m llama1b \
      --prompt-tokens 512 --output-tokens 128 -c "$c" -n "$c" --repeats "$REPS" --json > "$OUT/pair_c$c.json"
    # BOTH_ORDERS=1: the same level again with the new build first (the first of a pair may pay
    # for what the second then finds done, such as CUDA's on-disk kernel cache)
    [ -z "${BOTH_ORDERS:-}" ] || timeout 280 $PY -m mlxctl bench-serve --url http://127.0.0.1:8082 -m llama1b \
      --url http://127.0.0.1:8080 -m llama1b --prompt-tokens 512 --output-tokens 128 -c "$c" -n "$c" \
      --repeats "$REPS" --json > "$OUT/pair_c${c}_new_first.json"
    loop_ticks > "$OUT/loop_ticks_c${c}_after.txt"
  done
  stop_daemons; wait
}
[ "${1:-}" = pair ] && { pair; ls -la "$OUT"; exit; }
for r in $(seq "$ROUNDS"); do
  for b in ${ORDER:-old new}; do "${1:-engine}" $b $r; done
done
ls -la "$OUT"
