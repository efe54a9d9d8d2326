#!/usr/bin/env bash
# Tensor parallel on one multi-GPU host (issue 10; run it on nvidia-h200-x2 or larger):
# a Llama-3.1-8B-shaped bf16 model with dummy weights, served on 1 GPU and split over 2 with
# `mlx.launch --backend nccl`, (1) the same greedy answers from both, (2) `mlxctl bench-serve`
# single stream and under load against both daemons, interleaved. Results land in $OUT.
set -uo pipefail
OUT=${OUT:-bench-results}; mkdir -p "$OUT"
MODEL=${MODEL:-/tmp/llama8b}
PRESET=${PRESET:-llama-3.1-8b}   # PRESET=llama-3.2-1b DTYPE=float32 GREEDY_ONLY=1: the exactness check alone
DTYPE=${DTYPE:-native}
PY=${PYTHON:-python3}
# mlx.launch as a module, so it works where the console script is not on PATH (pip --target)
launch() { $PY -c 'import sys; from mlx._distributed_utils.launch import main; sys.argv[0] = "mlx.launch"; sys.exit(main())' "$@"; }
$PY scripts/save_dummy.py --preset "$PRESET" --dtype bfloat16 --out "$MODEL" >/dev/null
CUDA_VISIBLE_DEVICES=0 $PY -m mlxctl serve -m "one=$MODEL" --dtype "$DTYPE" --max-num-seqs 128 --port 8080 \
  2> "$OUT/serve_1gpu.log" &
launch -n 2 --backend nccl -- $PY -m mlxctl serve --tensor-parallel 2 -m "two=$MODEL" --dtype "$DTYPE" \
  --max-num-seqs 128 --port 8081 2> "$OUT/serve_2gpu.log" &
for _ in $(seq 300); do
  curl -sf localhost:8080/health >/dev/null && curl -sf localhost:8081/health >/dev/null && break; sleep 1
done
for port_model in 8080:one 8081:two; do  # greedy answers to fixed prompts, compared below
  port=${port_model%%:*}; name=${port_model##*:}
  for p in "The capital of France is" "def fibonacci(n):" "Once upon a time"; do
    curl -s localhost:$port/v1/completions -H 'content-type: application/json' \
      -d "{\"model\": \"$name\", \"prompt\": \"$p\", \"max_tokens\": 64, \"temperature\": 0}" |
      $PY -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["text"].encode().hex())'
  done > "$OUT/greedy_$name.txt"
done
cmp "$OUT/greedy_one.txt" "$OUT/greedy_two.txt" && echo "same greedy output on 1 and 2 GPUs" | tee "$OUT/greedy.txt"
if [ -z "${GREEDY_ONLY:-}" ]; then
bench() { timeout 200 $PY -m mlxctl bench-serve --url http://127.0.0.1:8080 --url http://127.0.0.1:8081 \
  -m one -m two --prompt-tokens 512 --output-tokens 128 --json "$@"; }
bench -c 1 -n 6 > "$OUT/tp_c1.json"
bench -c 16 -n 48 > "$OUT/tp_c16.json"
bench -c 64 -n 128 > "$OUT/tp_c64.json"
fi
kill %1 %2 2>/dev/null; pkill -f "mlxctl serve" 2>/dev/null; wait  # the ranks outlive the launcher's shell
ls -la "$OUT"; tail -n 15 "$OUT"/serve_*.log
