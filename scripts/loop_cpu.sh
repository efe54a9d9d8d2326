#!/usr/bin/env bash
# The event loop's CPU time per streamed token of a running `mlxctl serve` (issue 18): the
# server's main thread (the aiohttp loop; the engine runs on its own thread) is read from
# /proc before and after one bench-serve run against it. Linux only.
#   bash scripts/loop_cpu.sh PORT [bench-serve args; default: 128-token prompts, 128 new tokens, 64 streams, 256 requests]
# Prints: tok/s, the loop thread's and the other threads' CPU ticks (1/100 s) over the run.
set -uo pipefail
port=$1; shift
pid=$(pgrep -f "mlxctl serve.*--port $port" | tail -1)
[ -n "$pid" ] || { echo "no mlxctl serve on port $port" >&2; exit 2; }
ticks() {  # "main other": utime + stime of the main thread and of all the others
  for t in /proc/"$pid"/task/*; do
    s=($(cut -d')' -f2 "$t/stat"))
    echo "$([ "${t##*/}" = "$pid" ] && echo main || echo other) $((s[11] + s[12]))"
  done | awk '{a[$1] += $2} END {printf "%d %d", a["main"], a["other"]}'
}
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--prompt-tokens 128 --output-tokens 128 -c 64 -n 256 --warmup 0)
before=($(ticks))
tps=$(python3 -m mlxctl bench-serve --url "http://127.0.0.1:$port" "${args[@]}" --json |
      python3 -c "import json,sys; print(round(json.load(sys.stdin)['runs'][0]['metrics']['output_throughput'], 1))")
after=($(ticks))
echo "port $port tok/s $tps loop_ticks $((after[0] - before[0])) other_ticks $((after[1] - before[1]))"
