#!/usr/bin/env bash
# The GPU benchmark of sliding-window and hybrid models behind docs/benchmarks.md ("Prefix cache:
# sliding-window and hybrid models"). For each preset named: dummy weights saved once
# (scripts/save_dummy.py, bf16, quantised where the preset says), `mlxctl serve` and (COMPARE=1)
# `mlx_lm.server` on those same weights, then (1) scripts/ttft_prefix.py: a PREFIX_TOKENS-token
# system prompt cold and cached, REPS repetitions, servers interleaved; (2) `mlxctl bench-serve`
# at 1 and 16 streams, 512-token prompts, 128 new tokens, interleaved. Results land in $OUT.
#   bash scripts/gpu_hybrid.sh gpt-oss-20b gemma3-12b qwen3-next-80b-a3b qwen3.5-35b-a3b-4bit
set -uo pipefail
OUT=${OUT:-bench-results}; mkdir -p "$OUT"
PY=${PYTHON:-python3}; COMPARE=${COMPARE:-1}; PREFIX=${PREFIX_TOKENS:-16000}; REPS=${REPS:-3}
up() { for _ in $(seq 600); do curl -sf "$1" >/dev/null && return 0; sleep 0.5; done; return 1; }
for preset in "$@"; do
  dir=/tmp/dummy-$preset; t0=$(date +%s)
  if ! $PY scripts/save_dummy.py --preset "$preset" --dtype bfloat16 --out "$dir" > "$OUT/$preset-save.log" 2>&1; then
    echo "$preset: save failed"; tail -3 "$OUT/$preset-save.log"; continue
  fi
  echo "$preset: saved in $(( $(date +%s) - t0 )) s ($(du -sh "$dir" | cut -f1))"
  $PY -m mlxctl serve -m "$dir" --dtype native --max-num-seqs 32 --port 8080 --served-model-name "$preset" \
    2> "$OUT/$preset-serve.log" & pids=($!)
  urls=(--url http://127.0.0.1:8080); models=(-m "$preset")
  if [ "$COMPARE" = 1 ]; then
    $PY -m mlx_lm.server --model "$dir" --port 8081 --decode-concurrency 32 --prompt-concurrency 8 \
      2> "$OUT/$preset-mlx_lm.log" & pids+=($!)
    urls+=(--url http://127.0.0.1:8081); models+=(-m "$dir")
  fi
  up localhost:8080/health && { [ "$COMPARE" != 1 ] || up localhost:8081/v1/models; } \
    || { echo "$preset: a server did not come up"; tail -3 "$OUT/$preset-serve.log"; }
  echo "$preset: servers up after $(( $(date +%s) - t0 )) s"
  timeout 300 $PY scripts/ttft_prefix.py "${urls[@]}" "${models[@]}" --prefix-tokens "$PREFIX" --reps "$REPS" \
    --json > "$OUT/$preset-ttft.json" 2> "$OUT/$preset-ttft.err" || echo "$preset: ttft failed"
  $PY -c "import json,sys; [print('  ', s['url'], 'cold', round(s['cold_ttft_s']*1000), 'ms cached', round(s['cached_ttft_s']*1000), 'ms ratio', round(s['cached_over_cold'],3), 'cached_tokens', s['cached_tokens'], 'of', s['prompt_tokens'], 'ranges', s['cold_range_s'], s['cached_range_s']) for s in json.load(open(sys.argv[1]))['summary']]" "$OUT/$preset-ttft.json"
  curl -s localhost:8080/v1/cache/stats > "$OUT/$preset-cache.json"
  for c in 1 16; do
    timeout 240 $PY -m mlxctl bench-serve "${urls[@]}" "${models[@]}" --prompt-tokens 512 --output-tokens 128 \
      -c $c -n $(( c * 2 > 4 ? c * 2 : 4 )) --json > "$OUT/$preset-c$c.json" 2> "$OUT/$preset-c$c.err" || echo "$preset: bench c$c failed"
    $PY -c "import json,sys; d=json.load(open(sys.argv[1])); [print('   c'+sys.argv[2], r['url'], 'out tok/s', r['metrics'].get('output_throughput'), 'vs first', (r.get('vs_first') or {}).get('output_throughput')) for r in d.get('runs',[])]" "$OUT/$preset-c$c.json" $c 2>/dev/null
  done
  kill "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null; rm -rf "$dir"
  echo "$preset: done in $(( $(date +%s) - t0 )) s"
done
