#!/usr/bin/env bash
# Install what the tests need, then run the whole suite: the default tests, then the slow ones.
# Works on a fresh Linux or macOS machine with Python 3.11+; on Debian/Ubuntu as root it also
# installs OpenBLAS (MLX's CPU backend runs float32 much faster with it preloaded) and espeak-ng
# (speech clips for the transcription tests).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  apt-get update -qq >/dev/null && apt-get install -y -qq libopenblas0-pthread espeak-ng >/dev/null
fi
# constraints.txt pins every package to the version the suite was run with, so a new machine
# installs what was tested (not whatever a range resolves to that day)
"$PY" -m pip install -q -c constraints.txt -e ".[test]"
for lib in /usr/lib/x86_64-linux-gnu/libopenblas.so.0 /usr/lib/aarch64-linux-gnu/libopenblas.so.0; do
  if [ "$(uname)" = Linux ] && [ -e "$lib" ]; then export LD_PRELOAD="$lib${LD_PRELOAD:+:$LD_PRELOAD}"; break; fi
done
status=0
# --durations: each step ends with its slowest tests, to see what belongs in the slow step
"$PY" -m pytest --durations=25 "$@" || status=$?
echo "== slow tests =="
"$PY" -m pytest -m slow --durations=25 "$@" || { s=$?; [ "$s" = 5 ] || status=$s; }
exit $status
