#!/usr/bin/env bash
# Issue 20 on the lent GPU: decode with --kv-bits 8 and 4 against 16-bit KV, in process, on the
# Llama-3.1-8B shape (4-bit dummy weights, group 64): bench_engine.py's engine variant
# (kv_bits=N, one setting a process) beside the plain engine and mlx-lm, interleaved, at 1 (against generate_step),
# CONC streams; 512-token random prompts, 128 new tokens; then the KV bytes per token and the
# 4096-token sequences that fit 16 GiB at each setting. Results in $OUT.
#   MLXCTL_HOME=.gpu-home OUT=... bash scripts/gpu_kv_bits.sh
set -uo pipefail
OUT=${OUT:-bench-results}; mkdir -p "$OUT"
PRESET=${PRESET:-llama-3.1-8b-4bit}
MODEL=${MODEL:-/tmp/$PRESET}
PY=${PYTHON:-python3}
[ -d "$MODEL" ] || $PY scripts/save_dummy.py --preset "$PRESET" --dtype bfloat16 --out "$MODEL" >/dev/null
# one --kv-bits setting a process (all three engines and mlx-lm in one ran out of memory at 64
# streams on an H100); each level's result and MLX's peak memory reach the log as it finishes
for bits in ${BITS:-8 4}; do
  timeout "${LIMIT:-200}" $PY scripts/bench_engine.py --model "$MODEL" --dtype native --prompt-tokens 512 --max-tokens 128 \
    --concurrency "${CONC:-16,64}" --reps "${REPS:-1}" --variant "kv$bits:kv_bits=$bits" \
    --json > "$OUT/kv_bits${bits}_$PRESET.json" 2> "$OUT/kv_bits${bits}_$PRESET.log"
done
# bytes per token on the model's own cache, and how many 4096-token sequences fit 16 GiB of KV
$PY - "$MODEL" > "$OUT/kv_bits_fit_$PRESET.txt" <<'PY'
import sys
from mlxctl.engine.kv_config import KVQuant
from mlxctl.engine.memory import KVFootprint
from mlxctl.generation import model_loader
model = model_loader(sys.argv[1], "native", None)()
for bits in (0, 8, 4):
    fp = KVFootprint.of(model.model, KVQuant(bits, 64, dequantize_attention=True))  # the same storage
    print(f"kv_bits={bits or 16}: {fp.per_token} bytes a token; 4096-token sequences in 16 GiB: "
          f"{(16 << 30) // fp.bytes_for(4096)}")
PY
ls -la "$OUT"
