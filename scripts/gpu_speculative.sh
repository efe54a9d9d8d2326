#!/usr/bin/env bash
# Issue 19 on the lent GPU: speculative decoding against plain decoding.
# 1. The real SmolLM2 (its weights travel in two halves: .gpu-w1/part in one call, copied to
#    /tmp/w1 by `PART=1`, then .gpu-w2/part with this script), the edit-like prompt, one stream:
#    bench_speculative.py, ngram at 4, 8 and 16 draft tokens.
# 2. The Llama-3.2-1B shape (bf16 dummy) at 1, 4, 16 and 64 streams with speculation on and off
#    (bench_engine.py --variant): random prompts, so drafts rarely match; what it shows is the
#    cost of trying and the policy's step back.
#   call 1: carry .gpu-w1: PART=1 bash scripts/gpu_speculative.sh
#   call 2: carry .gpu-w2 .gpu-home: MLXCTL_HOME=.gpu-home OUT=... bash scripts/gpu_speculative.sh
set -uo pipefail
if [ "${PART:-2}" = 1 ]; then cp .gpu-w1/part /tmp/w1 && ls -la /tmp/w1; exit; fi
OUT=${OUT:-bench-results}; mkdir -p "$OUT"
PY=${PYTHON:-python3}
SMOL=/tmp/smollm2
mkdir -p "$SMOL" && cp .gpu-home/models/smollm2-135m/* "$SMOL"/ && cat /tmp/w1 .gpu-w2/part > "$SMOL/model.safetensors"
timeout 240 $PY scripts/bench_speculative.py --model "$SMOL" --reps 3 --draft 4,8,16 --json \
  > "$OUT/speculative_smollm2.json" 2> "$OUT/speculative_smollm2.log"
MODEL=${MODEL:-/tmp/llama1b}
[ -d "$MODEL" ] || $PY scripts/save_dummy.py --preset llama-3.2-1b --dtype bfloat16 --out "$MODEL" >/dev/null
timeout 300 $PY scripts/bench_engine.py --model "$MODEL" --dtype native --prompt-tokens 512 --max-tokens 128 \
  --concurrency 4,16,64 --reps 2 --variant spec:speculative=ngram --json \
  > "$OUT/speculative_engine.json" 2> "$OUT/speculative_engine.log"
ls -la "$OUT"
