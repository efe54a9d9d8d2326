#!/usr/bin/env bash
# What the next GPU session measures, in as few calls as the device allows (each under 600 s;
# after the usual stash and install calls; MLXCTL_HOME=.gpu-home carried). Results in $OUT.
#   PART=19: issue 19: the verify-pass probe with MLX's fused attention and with mlxctl's
#            unfused short passes (models/short_attention.py), then speculation on and off at
#            1 and 4 streams on the Llama-3.2-1B shape (the engine installs the unfused path);
#            and (issue 18) what a new prefill shape costs on first use, fused and unfused.
#   PART=18: issue 18: both builds' daemons interleaved at 64 and 256 streams (gpu_ab.sh pair,
#            OLD=.old carried), then the in-process table at 64 and 256 on the same machine.
#   PART=18d: issue 18's HTTP gap taken apart in process: the engine at 64 streams with a thread
#            holding the GIL 25% and 40% of the time (the daemon's loop held it 21%), and with the
#            64 requests arriving over 250 ms (as they reached the daemon's engine), beside the plain run.
#   PART=18b: bucketed prefill attention (MLXCTL_ATTENTION_BUCKETS=1, 2026-12-06, unmeasured when
#            written): the first-use probe over lengths within one bucket, exact and bucketed; then
#            two daemons of this build, one with buckets, interleaved by bench-serve over a sweep of
#            prompt lengths (every length a new shape without buckets), and at 64 streams of
#            512-token prompts, each order once. PART=18e: the in-process engine at 64 streams.
#   PART=18t: engine step traces (MLXCTL_STEP_TRACE) behind the daemon and in process, 64 streams.
#   PART=18h: the prefix cache's part: daemons without and with it, traced, fresh prompts then repeated
#            ones (run on an H100 at 8ff4f58, 2026-12-06: benchmarks.md, fifteenth pass).
#   PART=18p: this build against .old in process with the cache, 64 streams, and py-spy profiles
#            (carry .old and .gpu-tools; MLXCTL_HOME=.gpu-home for the dummy model's tokenizer).
#            engine_rounds.py now reports MLX's pool and the engine's pool returns a round: the
#            suspect for the rounds that dipped (third measured round of every process, 2026-12-06).
#   PART=18q: the dips: this build's engine_rounds.py, 8 rounds, step-traced, as shipped and never
#            returning MLX's pool (--clear-every/--pool-cap-mib huge), alternating processes; then the
#            engine with the cache on (as shipped) and off against BatchGenerator at 8, 64 and 256 streams,
#            prompts opening with the same 27 tokens, in one process, interleaved.
#   PART=18c: the prefix cache's cost at 256 streams: engine_rounds.py as shipped, without the cache, with a
#            16 GiB budget (no evictions) and never returning MLX's pool, alternating processes, traced.
#   PART=18k: which part of the prefix cache costs (bench_prefix_parts.py) at 64 and 256 streams, shared 27 tokens.
#   PART=18m: groups of equal hits merged from the rows' stackings: probe_tails.py, then 64 and 256 streams
#            against .old (the build before) and no cache.
#   PART=18v: at 256 streams (CONC=...), alternating processes: as shipped, no cache, short hits let go, buckets.
#   PART=18r: after 915a0f1 (hits aligned within a prompt group): this build as shipped, with hits kept
#            whole (--align-tokens 0), with a pool cap of 40 GiB and with MLX bounding the pool itself
#            (mx.set_cache_limit 14 GiB, the engine never returning it), engine_rounds.py alternating
#            processes, step-traced; then bench_engine.py's cache on/off against BatchGenerator at 8, 64
#            and 256 streams with a shared 27-token opening (PART=18q's, where ragged groups made 0.54x).
#   PART=19p: the speculation policy of 2026-12-07 against the one before (.old, carried) and against checking
#            whenever a draft is likely, on the real SmolLM2 (carry .gpu-w2 after PART=1 of gpu_speculative.sh with
#            .gpu-w1); PART=19q: the 1B shape greedy and at temperature 1, the policy against checking whenever likely.
#   PART=18f: the wave-end KV copy made once (scripts/experiments/filter_once.diff in .alt) against twice, 256 streams.
#   PART=18l: a leave step taken apart (scripts/probe_leave.py), then MLX's pool returned or not at 256 streams.
#   PART=18w: the kept rows copied by runs (engine/kv/rows.py) against the gather before (.alt), 256 streams.
#   PART=18e8: 8 streams (the goal cell, 5 repetitions, against no cache, one 8k chunk, no pacing), step-traced.
#   PART=19b: where the edit-like reply's tokens come from on the GPU (scripts/spec_breakdown.py: off, as
#            shipped, and speculating whenever a draft is likely; carry .gpu-w2, /tmp/w1 as for PART=19s),
#            then chained checks against unchained ones (bench_speculative.py --chain-ab), edit-like
#            and the agent transcript. PART=19c: chained checks with no weights to carry (the 1B shape at
#            one stream; bench_chain.py's tiny llamas).
#            On the CPU the text allows 1.85x off at the H100's check cost; the H100 made 1.36x.
#   PART=20: issue 20: --kv-bits 8 and 4 against 16-bit KV at 16 and 64 streams (8B 4-bit), one
#            setting a process (all in one ran out of memory at 64 streams on an H100, 2026-12-06).
#   PART=19h: a hybrid model (Qwen3.5-35B-A3B shape, 4-bit) at 4 and 8 streams with batches
#            speculating, and with only a lone request speculating (max_rows=1), against off.
#   PART=19l: the same with a hybrid model whose recurrent layers run on CUDA at speed (LFM2-1.2B's
#            short convolutions; mlx-lm's gated-delta layers of Qwen3.5/Qwen3-Next loop per token
#            on CUDA, so PART=19h did not finish its single stream in 240 s on an H100), greedy
#            (random weights loop: drafts are taken whole) and at temperature 0.6 (rows keep
#            different counts, so rejected drafts are undone row by row).
#   PART=19t: the Llama-3.2-1B shape sampled at temperature 1 (replies are random text, so prompt
#            lookup rarely drafts: the cost of trying) at 1, 4, 16 and 64 streams, on and off.
#   PART=19s: the real SmolLM2 (carry .gpu-w2; /tmp/w1 from `PART=1 bash scripts/gpu_speculative.sh`
#            with .gpu-w1 carried): the edit-like prompt and the agent transcript, one request,
#            against the bare generate_step loop; fixed drafts of 8 and 16 and growing ones (--grow).
# 2026-12-06: an H100 ran PART=19 and 18 at 146f880, PART=20 at 0caf69b (issue 20 closed). Next:
# PART=19 (now with a hybrid model's batches speculating), on the H200 if one comes; for issue 18,
# scripts/gpu_profile_serve.sh and gpu_ab.sh pair BOTH_ORDERS=1 are the tools (benchmarks.md,
# eleventh pass).
# 2026-12-06 (evening): an H200 ran PART=18q at 1649608 (the dips are ragged prompt groups' first
# shapes; returning the pool cost 13%) and the scaling table (gpu_table.sh). Next: PART=18r.
# 2026-12-07 (later): two H100s ran PART=18g and 256 streams (benchmarks.md, seventeenth pass: the
# prefix cache costs a tenth at 64 streams and a fifth at 256); next: PART=18c (why, at 256), then
# PART=18r REPS=1, then PART=19b.
# 2026-12-07: no device for most of the session; an H100 ran bench_chain.py at f6ef383 (chained
# checks: 1.16x at 2 layers, 0.83x at 30: off by default). Next: PART=19c (why chains lose at
# depth: compare with PART=19b's real SmolLM2), then PART=18r REPS=1 and PART=18g.
# 2026-12-07 (third session): an H200 ran PART=18c and 18g at 4b9b8ab (benchmarks.md, eighteenth pass: the cache's
# cost is in the steps that prefill groups holding hits); then no device came. Next: PART=18m (merged hits,
# 5df979d, against .old = be904eb), then PART=18k, then PART=19b.
# 2026-12-07 (fourth session): an H100 ran PART=18m, 18k, 18g, 19b and 19c at f387313 (benchmarks.md, nineteenth
# pass and the speculative sections), then PART=19p at ee7e4d4/d6b1766 (the new policy; the edit-like prompt under
# d6b1766 not measured: its run was the first after the install and timed out). Next: PART=19p (with .old = be904eb),
# then PART=18v.
# 2026-12-07 (fifth session): no device could be started (every start failed over 100 minutes). Next, in this order:
# PART=19p BUILDS=new (the edit-like prompt under the policy, never measured on a GPU), PART=18e8 (8 streams),
# PART=19q, then PART=18v.
# 2026-12-07 (sixth session): an H100 ran PART=18e8, 19p (BUILDS=new), 19q and 18v at 11f41a4 (benchmarks.md,
# twentieth pass and "One H100, 2026-12-07 (sixth session)"): at 8 streams decode steps took 2.5 ms more with the
# prefix cache on; PART=18e9's question was then answered by hand on the same card (bench_prefix_parts.py at 8
# streams, four engine_rounds.py processes alternating): the card's decode steps switched between about 5.5 and
# 8-10 ms from round to round with or without the cache, so no cache cost at 8 streams. Next: PART=18g (the goal
# table) on an H200, then PART=18c (the answer copies at the end of a 256-stream wave, traced).
# 2026-12-07 (seventh session): an H100 ran PART=18a (answers gathered: level, not landed), 19s (growing drafts 2.67x the
# bare loop on the edit-like prompt) and 18g at bba61ae (benchmarks.md, twenty-first pass). Next: PART=19g (growing drafts
# with batches: the evidence a default needs), PART=18g on an H200, then PART=18e8.
# 2026-12-07 (eighth session): an H100 ran PART=18g, 18f, 18l and 19g at cc0d97f, then probe_leave.py at 2d39d4f
# (the kept rows copied by runs: 1.5 ms where the gather took 25; benchmarks.md, twenty-second pass). Next: PART=18w
# (whole 256-stream runs against the build before, and a 16 GiB pool cap), then PART=18g on an H200.
# 2026-12-08: an H100 ran PART=18w, 18g (mlx-lm ran out of memory at 256), 18x twice and 19g (B=8, then 4) at
# 1bc6957 (benchmarks.md, twenty-third pass and "drafts in batches of 4 and 8, traced"). Next: PART=18g REPS=1 on an
# H200; PART=19g B=8 R=5 (the traces now hold each step's width and kv: are the batches' slow steps new shapes?).
set -uo pipefail
OUT=${OUT:-bench-results}; mkdir -p "$OUT"
PY=${PYTHON:-python3}
M=/tmp/llama1b
[ -d "$M" ] || $PY scripts/save_dummy.py --preset llama-3.2-1b --dtype bfloat16 --out "$M" >/dev/null
alternate() {  # CONC ROUNDS TIMEOUT NAME:"ARGS"...: engine_rounds.py, one process a variant, REPS times, traced
  local conc=$1 rounds=$2 limit=$3; shift 3
  for i in $(seq "${REPS:-2}"); do
    for v in "$@"; do  # a variant named alt*: the build in .alt (carried) instead of this one
      pp=$PYTHONPATH; [[ $v == alt* ]] && pp=$PWD/.alt:$PYTHONPATH
      PYTHONPATH=$pp MLXCTL_STEP_TRACE=$OUT/trace_${v%%:*}$i.jsonl timeout "$limit" $PY scripts/engine_rounds.py --model "$M" \
        --dtype native --prompt-tokens 542 --shared-prefix 27 --max-tokens 128 --concurrency "$conc" \
        --rounds "$rounds" ${v#*:} >> "$OUT/rounds.jsonl" 2>> "$OUT/rounds.log"
    done
  done
  for f in "$OUT"/trace_*.jsonl; do $PY scripts/step_trace.py "$f" --gap 0.03 > "${f%.jsonl}.txt" 2>&1; done
  gzip "$OUT"/trace_*.jsonl
}
case ${PART:-19} in
19)
  timeout 60 $PY scripts/probe_verify.py --model "$M" --widths 1,2,9,17 > "$OUT/probe_fused.txt" 2>&1
  timeout 60 $PY scripts/probe_verify.py --model "$M" --widths 1,2,9,17 --unfused > "$OUT/probe_unfused.txt" 2>&1
  timeout 60 $PY scripts/probe_prefill.py --model "$M" > "$OUT/prefill_fused.txt" 2>&1
  timeout 60 $PY scripts/probe_prefill.py --model "$M" --unfused > "$OUT/prefill_unfused.txt" 2>&1
  timeout 200 $PY scripts/bench_engine.py --model "$M" --dtype native --prompt-tokens 512 --max-tokens 128 \
    --concurrency 4 --reps 2 --variant spec:speculative=ngram --json > "$OUT/spec_engine.json" 2> "$OUT/spec_engine.log" ;;
19h)  # batches of a hybrid model speculate since 2026-12-06 (df5eedc): does it pay on a GPU?
  H=/tmp/qwen35; [ -d "$H" ] || $PY scripts/save_dummy.py --preset qwen3.5-35b-a3b-4bit --dtype bfloat16 --out "$H" >/dev/null
  timeout 240 $PY scripts/bench_engine.py --model "$H" --dtype native --prompt-tokens 512 --max-tokens 128 \
    --concurrency 4,8 --reps 2 --variant spec:speculative=ngram --variant spec1:speculative=ngram,max_rows=1 \
    --json > "$OUT/spec_hybrid.json" 2> "$OUT/spec_hybrid.log" ;;
19l)
  for T in 0 0.6; do
    timeout 270 $PY scripts/bench_engine.py --model lfm2-1.2b --load-format dummy --dtype bfloat16 --prompt-tokens 512 \
      --max-tokens 128 --temperature $T --concurrency 4,8,16 --reps 2 --variant spec:speculative=ngram \
      --variant spec1:speculative=ngram,max_rows=1 --json > "$OUT/spec_lfm2_t$T.json" 2> "$OUT/spec_lfm2_t$T.log"
  done ;;
19t)
  timeout 300 $PY scripts/bench_engine.py --model "$M" --dtype native --prompt-tokens 512 --max-tokens 128 \
    --temperature 1 --concurrency 4,16,64 --reps 2 --variant spec:speculative=ngram --json \
    > "$OUT/spec_t1.json" 2> "$OUT/spec_t1.log" ;;
19p)  # the speculation policy of 2026-12-07 (a check's expected tokens against its measured cost, per request),
  # PART=19b's breakdown and transcript again, then the build before (.old carried) for the old policy; then the
  # 1B shape greedy (drafts taken whole) and at temperature 1 (no drafts), the policy against checking whenever likely
  S=/tmp/smollm2; mkdir -p "$S" && cp .gpu-home/models/smollm2-135m/* "$S"/ && cat /tmp/w1 .gpu-w2/part > "$S/model.safetensors"
  t=240  # the first run after installing MLX compiles every kernel (about 100 s on an H100, 2026-12-07)
  for p in edit transcript; do
    for b in ${BUILDS:-new old}; do  # BUILDS=new: this build alone (no .old to carry)
      pp=$PYTHONPATH; [ $b = old ] && pp=$PWD/.old:$PYTHONPATH
      PYTHONPATH=$pp timeout $t $PY scripts/spec_breakdown.py --model "$S" --prompt $p --reps 3 \
        > "$OUT/breakdown_${p}_$b.json" 2> "$OUT/breakdown_${p}_$b.log"
      t=100
    done
  done ;;
19q)  # PART=19p's second half, a call of its own (both halves outran a call's 600 s on 2026-12-07)
  timeout 150 $PY scripts/bench_engine.py --model "$M" --dtype native --prompt-tokens 512 --max-tokens 128 \
    --concurrency 1,4,16,64 --reps 2 --variant spec:speculative=ngram --variant always:speculative=ngram,measured=0 \
    --json > "$OUT/spec_greedy.json" 2> "$OUT/spec_greedy.log"
  timeout 100 $PY scripts/bench_engine.py --model "$M" --dtype native --prompt-tokens 512 --max-tokens 128 \
    --temperature 1 --concurrency 4,64 --reps 2 --variant spec:speculative=ngram --json \
    > "$OUT/spec_t1.json" 2> "$OUT/spec_t1.log" ;;
19b)
  S=/tmp/smollm2; mkdir -p "$S" && cp .gpu-home/models/smollm2-135m/* "$S"/ && cat /tmp/w1 .gpu-w2/part > "$S/model.safetensors"
  # checks chained (experimental, off by default since b40c3b8) against each read before the next is queued
  timeout 150 $PY scripts/bench_speculative.py --model "$S" --reps 3 --draft 8 --chain-ab --json \
    > "$OUT/chain_edit.json" 2> "$OUT/chain_edit.log"
  timeout 100 $PY scripts/bench_speculative.py --model "$S" --reps 3 --draft 8 --chain-ab \
    --transcript docs/workloads/agent_transcript.json --json > "$OUT/chain_transcript.json" 2> "$OUT/chain_transcript.log"
  timeout 170 $PY scripts/spec_breakdown.py --model "$S" --reps 2 > "$OUT/breakdown_edit.json" 2> "$OUT/breakdown_edit.log" ;;
19c)  # chained checks (2026-12-07) on the GPU with nothing to carry but the wheel: the 1B shape at one
  # stream (its random weights loop, so drafts are taken whole: chains) and tiny llamas (bench_chain.py:
  # 2 layers; 30 layers of width 576, SmolLM2's depth and width)
  timeout 200 $PY scripts/bench_engine.py --model "$M" --dtype native --prompt-tokens 512 --max-tokens 256 \
    --concurrency 1 --reps 3 --variant spec:speculative=ngram,chain=1 --variant unchained:speculative=ngram,chain=0 \
    --json > "$OUT/chain_1b.json" 2> "$OUT/chain_1b.log"
  timeout 90 $PY scripts/bench_chain.py --reps 5 > "$OUT/chain_tiny.txt" 2>&1
  timeout 120 $PY scripts/bench_chain.py --reps 5 --layers 30 --hidden 576 > "$OUT/chain_deep.txt" 2>&1 ;;
19s)
  S=/tmp/smollm2; mkdir -p "$S" && cp .gpu-home/models/smollm2-135m/* "$S"/ && cat /tmp/w1 .gpu-w2/part > "$S/model.safetensors"
  timeout 300 $PY scripts/bench_speculative.py --model "$S" --reps 3 --draft 8,16 --grow --json \
    > "$OUT/smol_edit.json" 2> "$OUT/smol_edit.log"
  timeout 150 $PY scripts/bench_speculative.py --model "$S" --reps 3 --draft 8 \
    --transcript docs/workloads/agent_transcript.json --json > "$OUT/smol_transcript.json" 2> "$OUT/smol_transcript.log" ;;
19g)  # growing drafts with batches (2026-12-07, seventh session: one request on an H100 made 2.67x the bare loop with
  # them against 1.78x with fixed drafts of 8): a batch's check is as wide as its longest draft, so does growth pay at
  # 4 and 8 requests? The real SmolLM2 (carry .gpu-w2; /tmp/w1 as for PART=19s), each request repeating other code
  S=/tmp/smollm2; mkdir -p "$S" && cp .gpu-home/models/smollm2-135m/* "$S"/ && cat /tmp/w1 .gpu-w2/part > "$S/model.safetensors"
  # B: batch sizes (2026-12-07: at 8 both kinds of draft lost, 0.71x and 0.82x; the batch of 4 outran 250 s on a
  # fresh machine); each engine step-traced (trace_bB.jsonl.<variant>)
  # and its policy's measured check costs in the JSON; R: rounds. Since 2026-12-08 each engine warms up on a whole
  # round of the batch (before, one request's reply: the first round at 8 built the batch's shapes, 10 s of it)
  for b in ${B:-8 4}; do
    MLXCTL_STEP_TRACE=$OUT/trace_b$b.jsonl timeout ${T:-250} $PY scripts/bench_speculative.py --model "$S" --reps ${R:-3} \
      --draft 8 --grow --batch $b --json > "$OUT/smol_grow_b$b.json" 2> "$OUT/smol_grow_b$b.log"
    for f in "$OUT"/trace_b$b.jsonl.*; do $PY scripts/step_trace.py "$f" > "$f.txt" 2>&1; gzip "$f"; done
  done ;;
18b)
  for mode in "" --buckets; do
    timeout 90 $PY scripts/probe_prefill.py --model "$M" --rows 1,3,5,7 --lengths 400,460,510,600 $mode \
      > "$OUT/probe_buckets${mode:+_on}.txt" 2>&1
  done
  $PY -m mlxctl serve -m "$M" --dtype native --max-num-seqs 256 --port 8080 --served-model-name l 2> "$OUT/serve_off.log" &
  off=$!
  MLXCTL_ATTENTION_BUCKETS=1 $PY -m mlxctl serve -m "$M" --dtype native --max-num-seqs 256 --port 8082 \
    --served-model-name l 2> "$OUT/serve_on.log" &
  on=$!
  for _ in $(seq 120); do curl -sf localhost:8080/health >/dev/null && curl -sf localhost:8082/health >/dev/null && break; sleep 1; done
  timeout 200 $PY -m mlxctl bench-serve --url http://127.0.0.1:8080 -m l --url http://127.0.0.1:8082 -m l \
    --prompt-tokens 180,300,420,540,660,780 --output-tokens 64 -c 16 -n 32 --warmup 0 --repeats 2 --json \
    > "$OUT/buckets_serve.json" 2> "$OUT/buckets_serve.log"
  # the gap: one prompt length at 64 and 256 streams (bench-serve's warm-up first), both orders
  for c in 64 256; do for urls in "8080 8082" "8082 8080"; do set -- $urls
    timeout 150 $PY -m mlxctl bench-serve --url http://127.0.0.1:$1 -m l --url http://127.0.0.1:$2 -m l \
      --prompt-tokens 512 --output-tokens 128 -c $c -n $c --repeats 2 --json \
      > "$OUT/buckets_${c}_$1.json" 2> "$OUT/buckets_${c}_$1.log"
  done; done
  kill $off $on; wait $off $on ;;
18e)  # the in-process engine on the same machine, for the daemon's ratio, buckets off and on
  for b in 0 1; do
    MLXCTL_ATTENTION_BUCKETS=$b timeout 200 $PY scripts/bench_engine.py --model "$M" --dtype native --prompt-tokens 512 \
      --max-tokens 128 --concurrency 64,256 --reps 2 --json > "$OUT/engine_b$b.json" 2> "$OUT/engine_b$b.log"
  done ;;
18t)  # step traces (MLXCTL_STEP_TRACE) of the daemon and of the in-process engine at 64 streams:
  # are the daemon's steps more, longer or further apart? No prefix cache, as in process.
  MLXCTL_STEP_TRACE=$OUT/trace_serve.jsonl $PY -m mlxctl serve -m "$M" --dtype native --max-num-seqs 256 \
    --port 8080 --served-model-name l --no-prefix-cache 2> "$OUT/serve_t.log" &
  d=$!
  for _ in $(seq 120); do curl -sf localhost:8080/health >/dev/null && break; sleep 1; done
  timeout 150 $PY -m mlxctl bench-serve --url http://127.0.0.1:8080 -m l --prompt-tokens 512 --output-tokens 128 \
    -c 64 -n 64 --repeats 3 --json > "$OUT/serve_t.json" 2> "$OUT/serve_t.err"
  kill $d; wait $d
  MLXCTL_STEP_TRACE=$OUT/trace_engine.jsonl timeout 250 $PY scripts/bench_engine.py --model "$M" --dtype native \
    --prompt-tokens 512 --max-tokens 128 --concurrency 64 --reps 3 --json > "$OUT/engine_t.json" 2> "$OUT/engine_t.log"
  for f in serve engine; do $PY scripts/step_trace.py "$OUT/trace_$f.jsonl" > "$OUT/steps_$f.txt" 2>&1; done ;;
18h)  # the prefix cache's part in the daemon's gap: A --no-prefix-cache (8080), B as by default (8082), step
  # traces of both; fresh prompts each invocation (a new --seed: B then hits only the chat template's first
  # tokens), then the same prompts again (B hits most of each prompt)
  MLXCTL_STEP_TRACE=$OUT/trace_nocache.jsonl $PY -m mlxctl serve -m "$M" --dtype native --max-num-seqs 256 \
    --port 8080 --served-model-name l --no-prefix-cache 2> "$OUT/serve_a.log" &
  a=$!
  MLXCTL_STEP_TRACE=$OUT/trace_cache.jsonl $PY -m mlxctl serve -m "$M" --dtype native \
    --max-num-seqs 256 --port 8082 --served-model-name l 2> "$OUT/serve_b.log" &
  b=$!
  for _ in $(seq 120); do curl -sf localhost:8080/health >/dev/null && curl -sf localhost:8082/health >/dev/null && break; sleep 1; done
  i=0; for seed in 1 2 3 3; do i=$((i + 1))  # the last run repeats the third's prompts
    timeout 100 $PY -m mlxctl bench-serve --url http://127.0.0.1:8080 -m l --url http://127.0.0.1:8082 -m l \
      --prompt-tokens 512 --output-tokens 128 -c 64 -n 64 --seed $seed --json > "$OUT/h$i.json" 2> "$OUT/h$i.err"
  done
  kill $a $b; wait $a $b
  for f in nocache cache; do $PY scripts/step_trace.py "$OUT/trace_$f.jsonl" --gap 0.03 > "$OUT/steps_$f.txt" 2>&1; done
  # in process: every prompt opens with the same 27 tokens (a chat template's opening), hits kept
  # (the default), short hits let go in groups, no prefix cache
  timeout 150 $PY scripts/bench_engine.py --model "$M" --dtype native --prompt-tokens 542 --shared-prefix 27 \
    --max-tokens 128 --concurrency 64 --reps 2 --variant letgo:min_reuse_tokens=128 --variant nocache:prefix_cache=0 \
    --json > "$OUT/shared27.json" 2> "$OUT/shared27.log" ;;
18r)  # ragged prompt groups aligned (915a0f1), and a larger pool cap, against the shipped build
  alternate 64 8 70 shipped:"" ragged:"--align-tokens 0" cap40:"--pool-cap-mib 40960" \
    limit14:"--clear-every 1000000 --pool-cap-mib 1000000 --cache-limit-mib 14336" ;;
18g)  # PART=18r's goal half (a call of its own: both halves together may outrun a call's 600 s)
  timeout 330 $PY scripts/bench_engine.py --model "$M" --dtype native --prompt-tokens 542 --shared-prefix 27 \
    --max-tokens 128 --concurrency 8,64,256 --reps ${REPS:-3} --variant nocache:prefix_cache=0 \
    --json > "$OUT/goal.json" 2> "$OUT/goal.log" ;;
18a)  # the answers of the requests that end in one step gathered together (one gather a layer and side for the
  # wave's rows, not a copy per row: scripts/experiments/answers_together.diff applied to a copy of mlxctl/ in .alt, carried) against this build,
  # at 256 streams, alternating processes, traced: the steps where a wave ends took 30-60 ms with the cache against
  # 12-26 without (H100, 2026-12-07, sixth session)
  REPS=${REPS:-2} alternate "${CONC:-256}" 3 100 shipped:"" alt:"" nocache:"--no-prefix-cache" ;;
18f)  # the wave-end copy (H100, 2026-12-07, seventh session: a decode step after which rows leave took 50 ms with no
  # cache against 25 for the others): _filter_kv gathers the kept rows, then slices off their common left padding,
  # and the next write copies that strided view again. scripts/experiments/filter_once.diff (applied in .alt,
  # carried) gathers once out of the sliced view. Both builds with and without the cache, 256 streams, traced
  REPS=${REPS:-1} alternate "${CONC:-256}" 3 100 shipped:"" alt:"" nocache:"--no-prefix-cache" altnocache:"--no-prefix-cache" ;;
18l)  # PART=18f's answer (H100, 2026-12-07, eighth session): gathering once saved ~5 ms of a leave step's ~25 extra,
  # so the copy is not most of it. Taken apart (scripts/probe_leave.py: each step evaluated on its own: the
  # filter, MLX's pool returned, the first decode step at a new row count and the next), then the engine at 256
  # streams without the cache, MLX's pool returned as shipped and never returned, alternating, traced
  timeout 150 $PY scripts/probe_leave.py --model "$M" --rows 256 --group 8 --leaves 16 --clear \
    > "$OUT/probe_leave.jsonl" 2> "$OUT/probe_leave.txt"
  REPS=${REPS:-1} alternate "${CONC:-256}" 3 100 nocache:"--no-prefix-cache" \
    nocachekeep:"--no-prefix-cache --clear-every 1000000 --pool-cap-mib 1000000" ;;
18w)  # PART=18l's answer (H100, 2026-12-07, eighth session): MLX's gather of the kept rows took 26 ms at 248 of 256
  # rows, as long as a decode step. Since then the kept rows are copied a run of consecutive rows at a time
  # (engine/kv/rows.py). This build against the one before (carry .alt = `git archive e437528 mlxctl`) and with
  # a pool cap of 16 GiB (returned less often), 256 streams, alternating, traced; probe_leave.py first (runs
  # against the gather, no pool returns)
  timeout 120 $PY scripts/probe_leave.py --model "$M" --rows 256 --group 8 --leaves 16 \
    > "$OUT/probe_leave.jsonl" 2> "$OUT/probe_leave.txt"
  # limit8: the engine never returns the pool; MLX bounds it at 8 GiB itself (mx.set_cache_limit: past it, the
  # least recently used buffers go at allocation, so the step's own sizes stay cached)
  REPS=${REPS:-1} alternate "${CONC:-256}" 3 100 shipped:"" alt:"" cap16:"--pool-cap-mib 16384" \
    limit8:"--clear-every 1000000 --pool-cap-mib 1000000 --cache-limit-mib 8192" ;;
18x)  # PART=18w's lead (H100, 2026-12-08): MLX bounding its own pool at 8 GiB (mx.set_cache_limit), the engine never
  # returning it, made 5526 tok/s against 5253 as shipped at 256 streams (one process each): again, alternating,
  # at 256 and at 64 streams
  REPS=${REPS:-2} alternate 256 3 100 shipped:"" limit8:"--clear-every 1000000 --pool-cap-mib 1000000 --cache-limit-mib 8192"
  mkdir -p "$OUT/c64"; OUT=$OUT/c64 REPS=${REPS:-2} alternate 64 6 60 shipped:"" \
    limit8:"--clear-every 1000000 --pool-cap-mib 1000000 --cache-limit-mib 8192" ;;
18e8)  # issue 18's 8 streams (0.97x BatchGenerator on an H100, 2026-12-07): the goal cell with more repetitions,
  # against no cache, one prefill chunk big enough for the whole wave (8 x 542 tokens), and no prefill pacing;
  # then step traces of this build's engine with and without the cache (where a round's time goes)
  # T: the first MLX run after installing compiles every kernel (about 100 s): T=330 in the install's call
  timeout ${T:-240} $PY scripts/bench_engine.py --model "$M" --dtype native --prompt-tokens 542 --shared-prefix 27 \
    --max-tokens 128 --concurrency 8 --reps 5 --variant nocache:prefix_cache=0 --variant chunk8k:prefill_chunk=8192 \
    --variant unpaced:prefill_step_ms=0 --json > "$OUT/goal8.json" 2> "$OUT/goal8.log"
  REPS=1 alternate 8 8 60 shipped:"" nocache:"--no-prefix-cache" ;;
18e9)  # PART=18e8's lead (H100, 2026-12-07, sixth session; it did not hold): at 8 streams every decode step took 7.2 ms
  # with the prefix cache on against 4.7 without (engine_rounds.py, one process each). Which part: the parts turned off one
  # at a time (bench_prefix_parts.py, one process, interleaved), then alternating processes as shipped, without the
  # cache and with the 27-token hits let go (fresh groups, blocks still remembered), traced
  timeout ${T:-240} $PY scripts/bench_prefix_parts.py --model "$M" --dtype native --prompt-tokens 542 --shared-prefix 27 \
    --max-tokens 128 --concurrency 8 --reps 5 > "$OUT/parts8.txt" 2>&1
  REPS=1 alternate 8 6 60 shipped:"" nocache:"--no-prefix-cache" short:"--min-reuse-tokens 128" ;;
18c)  # what the prefix cache costs at 256 streams (2026-12-07, H100: 0.94-0.99x BatchGenerator with it, 1.23x
  # without; a wave's KV, ~5.5 GB, outgrows its 4 GiB budget, so every request that ends evicts): alternating
  # processes, as shipped, no cache, a 16 GiB budget (no evictions), and MLX's pool never returned
  alternate 256 3 100 shipped:"" nocache:"--no-prefix-cache" budget16:"--prefix-max-mib 16384" \
    kept:"--clear-every 1000000 --pool-cap-mib 1000000" ;;
18v)  # PART=18c's answer (H200, 2026-12-07): the cost is in the steps that prefill (a group holding hits took 60-120
  # ms a step against 30-90 fresh), not in evictions or decode steps. Hits let go (--min-reuse-tokens 128: fresh
  # groups) and prefill shapes rounded up (--attention-buckets), against as shipped and no cache
  alternate "${CONC:-256}" 3 100 shipped:"" nocache:"--no-prefix-cache" short:"--min-reuse-tokens 128" \
    buckets:"--attention-buckets" ;;
18m)  # a group of equal hits merged from the rows' stackings (batch.merged_hits) against layer by layer: the
  # prefill itself (probe_tails.py), then engine_rounds.py at 64 and 256 streams against the build before it
  # (carry .old = `git archive be904eb mlxctl`) and without the cache, one process each, alternating
  timeout 60 $PY scripts/probe_tails.py --model "$M" --dtype native --reps 7 > "$OUT/tails.txt" 2>&1
  for c in 64 256; do
    for i in $(seq $((c == 64 ? 2 : 1))); do
      for v in before:"" after:"" nocache:"--no-prefix-cache"; do
        [ "$c" = 256 ] && [ "${v%%:*}" = nocache ] && continue
        pp=$PYTHONPATH; [ "${v%%:*}" = before ] && pp=$PWD/.old:$PYTHONPATH
        PYTHONPATH=$pp timeout 100 $PY scripts/engine_rounds.py --model "$M" --dtype native --prompt-tokens 542 \
          --shared-prefix 27 --max-tokens 128 --concurrency $c --rounds 3 ${v#*:} >> "$OUT/rounds.jsonl" 2>> "$OUT/rounds.log"
      done
    done
  done ;;
18k)  # which part of the prefix cache costs on the GPU (scripts/bench_prefix_parts.py, one process, interleaved)
  for c in 64 256; do
    timeout 260 $PY scripts/bench_prefix_parts.py --model "$M" --dtype native --prompt-tokens 542 --shared-prefix 27 \
      --max-tokens 128 --concurrency $c --reps $((c == 64 ? 3 : 2)) > "$OUT/parts$c.txt" 2>&1
  done ;;
18q)  # are the dips MLX's pool returned (Engine._housekeeping)? then the goal with the cache on
  R=(scripts/engine_rounds.py --model "$M" --dtype native --prompt-tokens 542 --shared-prefix 27 --max-tokens 128
     --concurrency 64 --rounds 8)
  for i in 1 2; do
    MLXCTL_STEP_TRACE=$OUT/trace_shipped$i.jsonl timeout 70 $PY "${R[@]}" >> "$OUT/rounds.jsonl" 2>> "$OUT/rounds.log"
    MLXCTL_STEP_TRACE=$OUT/trace_kept$i.jsonl timeout 70 $PY "${R[@]}" --clear-every 1000000 --pool-cap-mib 1000000 \
      >> "$OUT/rounds.jsonl" 2>> "$OUT/rounds.log"
  done
  for f in "$OUT"/trace_*.jsonl; do $PY scripts/step_trace.py "$f" --gap 0.03 > "${f%.jsonl}.txt" 2>&1; done
  timeout 260 $PY scripts/bench_engine.py --model "$M" --dtype native --prompt-tokens 542 --shared-prefix 27 \
    --max-tokens 128 --concurrency 8,64,256 --reps 3 --variant nocache:prefix_cache=0 --json \
    > "$OUT/goal.json" 2> "$OUT/goal.log"
  gzip "$OUT"/trace_*.jsonl ;;
18p)  # the prefix cache's cost on CUDA (PART=18h: 0.81-0.85x without it over HTTP, 0.81x in process, 2026-12-06):
  # this build (one evaluation a step for the blocks kept) against the build in .old (carry it: `git archive
  # REV mlxctl | tar -x -C .old`), alternating processes, 64 streams of prompts opening with the same 27
  # tokens; then py-spy (.gpu-tools carried) samples this build with and without the cache
  R=(scripts/engine_rounds.py --model "$M" --dtype native --prompt-tokens 542 --shared-prefix 27 --max-tokens 128
     --concurrency 64 --rounds 4)
  for i in 1 2 3; do
    PYTHONPATH=$PWD/.old:$PYTHONPATH timeout 60 $PY "${R[@]}" >> "$OUT/ab.jsonl" 2>> "$OUT/ab.log"
    timeout 60 $PY "${R[@]}" >> "$OUT/ab.jsonl" 2>> "$OUT/ab.log"
  done
  for v in --no-prefix-cache "--min-reuse-tokens 128"; do timeout 60 $PY "${R[@]}" $v >> "$OUT/ab.jsonl" 2>> "$OUT/ab.log"; done
  $PY -m pip install -q --no-deps --target /tmp/pyspy .gpu-tools/py_spy-*.whl >/dev/null 2>&1
  for v in --no-prefix-cache ""; do  # (2026-12-06: 370 s ran out during the second; now shorter, no cache first)
    timeout 70 /tmp/pyspy/bin/py-spy record --threads --idle -r 200 -f raw -o "$OUT/prof${v:+_nocache}.txt" -- \
      $PY "${R[@]}" --rounds 3 --warmup 1 $v >> "$OUT/ab.jsonl" 2>> "$OUT/spy.log"
  done ;;
18s)  # in process only: prompts opening with the same 27 tokens, hits kept, let go in groups, no cache
  timeout 200 $PY scripts/bench_engine.py --model "$M" --dtype native --prompt-tokens 542 --shared-prefix 27 \
    --max-tokens 128 --concurrency 64 --reps 3 --variant letgo:min_reuse_tokens=128 --variant nocache:prefix_cache=0 \
    --json > "$OUT/shared27.json" 2> "$OUT/shared27.log" ;;
18d)
  timeout 400 $PY scripts/bench_engine.py --model "$M" --dtype native --prompt-tokens 512 --max-tokens 128 \
    --concurrency 64 --reps 4 --variant gil25:gil_busy_pct=25 --variant gil40:gil_busy_pct=40 \
    --variant arrive250:arrival_ms=250 --json > "$OUT/gap.json" 2> "$OUT/gap.log" ;;
18)
  OUT=$OUT/ab HTTP_CONC=64,256 REPS=3 timeout 280 bash scripts/gpu_ab.sh pair > "$OUT/ab.log" 2>&1
  OUT=$OUT MODEL=$M CONC=64,256 REPS=2 timeout 250 bash scripts/gpu_table.sh engine > "$OUT/table.log" 2>&1 ;;
20)
  OUT=$OUT CONC=16,64 LIMIT=230 timeout 500 bash scripts/gpu_kv_bits.sh > "$OUT/kv.log" 2>&1 ;;
esac
ls -la "$OUT"
