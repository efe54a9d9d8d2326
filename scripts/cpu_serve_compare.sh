#!/usr/bin/env bash
# Issue 18 on the CPU: `mlxctl serve` against `mlx_lm.server` on the same float32 SmolLM2 folder,
# over HTTP, concurrency 1/4/8/16, interleaved by `mlxctl bench-serve` (mlx_lm.server first, so
# ratios are against it). Make the folder once:
#   python -m mlx_lm convert --hf-path <store>/smollm2-135m --mlx-path /tmp/smol-f32 -d --dtype float32
# Run with nothing else on the machine: bash scripts/cpu_serve_compare.sh [extra bench-serve args]
# FLAGS= adds flags to mlxctl serve; VARIANT="--prefill-step-ms 0" adds a third server (mlxctl
# serve with those flags) on :8182; OLD=DIR runs one more server (:8183) from another build (a
# directory holding its `mlxctl` package, e.g. `git worktree add DIR REV`), with FLAGS;
# CONC=8,16 picks the concurrency levels.
set -uo pipefail
MODEL=${MODEL:-/tmp/smol-f32}
OUT=${OUT:-bench-results}; mkdir -p "$OUT"; OUT=$(realpath "$OUT")
PY=${PYTHON:-python3}
for lib in /usr/lib/x86_64-linux-gnu/libopenblas.so.0 /usr/lib/aarch64-linux-gnu/libopenblas.so.0; do
  [ -e "$lib" ] && export LD_PRELOAD="$lib" && break
done
$PY -m mlx_lm.server --model "$MODEL" --port 8181 2> "$OUT/cpu_mlx_lm_server.log" &
# shellcheck disable=SC2086
$PY -m mlxctl serve -m "$MODEL" --port 8180 --served-model-name smol-f32 ${FLAGS:-} 2> "$OUT/cpu_serve.log" &
urls=(--url http://127.0.0.1:8181 -m "$MODEL" --url http://127.0.0.1:8180 -m smol-f32)
if [ -n "${VARIANT:-}" ]; then
  # shellcheck disable=SC2086
  $PY -m mlxctl serve -m "$MODEL" --port 8182 --served-model-name smol-f32 $VARIANT 2> "$OUT/cpu_serve_variant.log" &
  urls+=(--url http://127.0.0.1:8182 -m smol-f32)
fi
if [ -n "${OLD:-}" ]; then
  # shellcheck disable=SC2086
  OLD=$(realpath "$OLD")
  (cd "$OLD" && PYTHONPATH="$OLD" exec $PY -m mlxctl serve -m "$MODEL" --port 8183 \
    --served-model-name smol-f32 ${FLAGS:-} 2> "$OUT/cpu_serve_old.log") &
  urls+=(--url http://127.0.0.1:8183 -m smol-f32)
fi
for _ in $(seq 180); do
  curl -sf localhost:8180/health >/dev/null && curl -sf localhost:8181/v1/models >/dev/null &&
    { [ -z "${VARIANT:-}" ] || curl -sf localhost:8182/health >/dev/null; } &&
    { [ -z "${OLD:-}" ] || curl -sf localhost:8183/health >/dev/null; } && break; sleep 1
done
$PY -m mlxctl bench-serve "${urls[@]}" --prompt-tokens 128 --output-tokens 32 -c "${CONC:-1,4,8,16}" -n 16 --seed 7 "$@"
kill $(jobs -p) 2>/dev/null; wait
