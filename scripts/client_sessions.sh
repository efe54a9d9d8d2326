#!/usr/bin/env bash
# One non-interactive session of each agent client against `mlxctl serve` (docs/serve.md, "Agent
# clients"): Claude Code (`claude -p`), Codex (`codex exec`, as installed and with its hosted
# tools off), aider and opencode, each asked "say hi" in a temp folder with a temp HOME, pointed
# only at the local server. The model is a dummy-weights llama (hidden size 128, 2 layers, a
# 131072-token context): every client's prompt fits (Claude Code's is ~20k tokens) and prefills
# in seconds; its answers are nonsense, the exchange is what is tested. dummy_eos_scale makes
# them end after a few tokens, as a real model's do (clients take a cut-off answer as an error). Each client goes through
# scripts/record_proxy.py, which keeps the body of every request answered 4xx (of every POST with
# RECORD_ALL=1) in $WORK/requests.
#
#   scripts/client_sessions.sh        # AGENTS=/tmp/agents (npm prefix) AIDER=/tmp/aider-venv/bin/aider
#
# Prints one line per client (name, version, pass/fail with the exit status and the client's last
# error line); the server log, each client's output and the refused requests stay in $WORK.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
PORT=${PORT:-18080}
AGENTS=${AGENTS:-/tmp/agents}
AIDER=${AIDER:-/tmp/aider-venv/bin/aider}
CLIENT_TIMEOUT=${CLIENT_TIMEOUT:-600}
WORK=${WORK:-$(mktemp -d /tmp/client-sessions.XXXXXX)}
BIN=$AGENTS/node_modules/.bin
MODEL=tiny
PIDS=()
CLIENT=
FAILED=0
trap 'kill $CLIENT "${PIDS[@]}" 2>/dev/null' EXIT
trap 'exit 143' INT TERM

mkdir -p "$WORK/tiny-long" "$WORK/requests"
cat > "$WORK/tiny-long/config.json" <<'EOF'
{"model_type": "llama", "hidden_size": 128, "num_hidden_layers": 2, "intermediate_size": 256,
 "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "rms_norm_eps": 1e-5,
 "vocab_size": 49152, "rope_theta": 1000000.0, "tie_word_embeddings": true,
 "max_position_embeddings": 131072, "dummy_eos_scale": 10}
EOF

# Bounds in case an answer does not end: --default-max-tokens for Codex and aider, which send no
# output limit, CLAUDE_CODE_MAX_OUTPUT_TOKENS for Claude Code (32000 by default), opencode's limit.output.
$PY -m mlxctl serve --load-format dummy -m "$MODEL=$WORK/tiny-long" -p "$PORT" --default-max-tokens 256 \
  > "$WORK/server.log" 2>&1 &
PIDS+=($!)
curl -sf --retry 120 --retry-all-errors --retry-delay 1 -o /dev/null "http://127.0.0.1:$PORT/health" \
  || { echo "server did not start: $WORK/server.log" >&2; exit 1; }

NEXT_PORT=$((PORT + 1))
proxy() {  # proxy NAME: a recording proxy for client NAME in front of the server, at $PROXY
  PROXY=$NEXT_PORT
  NEXT_PORT=$((NEXT_PORT + 1))
  $PY scripts/record_proxy.py --upstream "http://127.0.0.1:$PORT" --port "$PROXY" --out "$WORK/requests" \
    --tag "$1" ${RECORD_ALL:+--all} > "$WORK/proxy-$1.log" 2>&1 &
  PIDS+=($!)
  curl -sf --retry 30 --retry-all-errors --retry-delay 1 -o /dev/null "http://127.0.0.1:$PROXY/health"
}

session() {  # session NAME VERSION COMMAND...: run COMMAND in NAME's folder with NAME's HOME
  local name=$1 version=$2 rc
  shift 2
  mkdir -p "$WORK/$name/home" "$WORK/$name/work"
  (cd "$WORK/$name/work" && HOME="$WORK/$name/home" exec timeout "$CLIENT_TIMEOUT" "$@" < /dev/null \
    > "$WORK/$name.out" 2>&1) &
  CLIENT=$!  # timeout runs the client in a process group of its own: the traps end it by this id
  wait "$CLIENT"
  rc=$?
  if [ "$rc" = 0 ]; then
    printf '%-16s %-20s pass\n' "$name" "$version"
  else
    FAILED=$((FAILED + 1))
    printf '%-16s %-20s FAIL (exit %s): %s\n' "$name" "$version" "$rc" \
      "$(grep -iE 'error' "$WORK/$name.out" | tail -1 | cut -c1-200)"
  fi
}

claude_session() {
  proxy claude
  session claude "$("$BIN/claude" --version | cut -d' ' -f1)" env ANTHROPIC_BASE_URL="http://127.0.0.1:$PROXY" \
    ANTHROPIC_AUTH_TOKEN=local ANTHROPIC_MODEL=$MODEL ANTHROPIC_DEFAULT_HAIKU_MODEL=$MODEL \
    ANTHROPIC_SMALL_FAST_MODEL=$MODEL CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 \
    CLAUDE_CODE_MAX_OUTPUT_TOKENS=256 \
    "$BIN/claude" -p "say hi"
}

codex_session() {  # codex_session NAME EXTRA_TOP_LEVEL_TOML
  local name=$1
  proxy "$name"
  mkdir -p "$WORK/$name/home"
  cat > "$WORK/$name/home/config.toml" <<EOF
model = "$MODEL"
model_provider = "mlxctl"
$2

[model_providers.mlxctl]
name = "mlxctl"
base_url = "http://127.0.0.1:$PROXY/v1"
wire_api = "responses"
EOF
  session "$name" "$("$BIN/codex" --version | cut -d' ' -f2)" env CODEX_HOME="$WORK/$name/home" \
    "$BIN/codex" exec --skip-git-repo-check "say hi"
}

aider_session() {
  proxy aider
  session aider "$("$AIDER" --version | cut -d' ' -f2)" env LITELLM_LOCAL_MODEL_COST_MAP=True \
    "$AIDER" --model "openai/$MODEL" --openai-api-base "http://127.0.0.1:$PROXY/v1" --openai-api-key local \
    --message "say hi" --yes --no-git --no-check-update --no-show-model-warnings --analytics-disable --no-pretty
}

opencode_session() {
  proxy opencode
  mkdir -p "$WORK/opencode/work"
  cat > "$WORK/opencode/work/opencode.json" <<EOF
{"\$schema": "https://opencode.ai/config.json", "model": "mlxctl/$MODEL", "small_model": "mlxctl/$MODEL",
 "autoupdate": false, "share": "disabled",
 "provider": {"mlxctl": {"npm": "@ai-sdk/openai-compatible", "name": "mlxctl",
   "options": {"baseURL": "http://127.0.0.1:$PROXY/v1", "apiKey": "local"},
   "models": {"$MODEL": {"name": "$MODEL", "limit": {"context": 131072, "output": 256}}}}}}
EOF
  session opencode "$("$BIN/opencode" --version)" env XDG_CONFIG_HOME="$WORK/opencode/home/.config" \
    XDG_DATA_HOME="$WORK/opencode/home/.local/share" XDG_CACHE_HOME="$WORK/opencode/home/.cache" \
    OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_MODELS_FETCH=1 "$BIN/opencode" run "say hi"
}

claude_session
codex_session codex ""
codex_session codex-no-hosted $'web_search = "disabled"\n\n[agents]\nenabled = false'
aider_session
opencode_session

echo "server log: $WORK/server.log"
grep -E ' [45][0-9][0-9]( |$)' "$WORK/server.log" | grep -v 'GET /health' || true
ls "$WORK"/requests/*-4[0-9][0-9].json 2>/dev/null | sed 's/^/refused request: /'
exit "$((FAILED > 0))"  # non-zero when a client failed
