#!/usr/bin/env bash
# Installs agentify (scripts/setup.sh: the venv and the Node backends, nothing else), checks the
# example config with `agentify doctor`, then runs real tasks on it through the gateway and prints
# the results. Needs Python and Node only, and no API key: without one, the offline planner plans
# (set OPENAI_API_KEY to use a model instead). Where chromium is not installed, the demo says so
# and runs no browser task.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export AGENTIFY_CONFIG="${AGENTIFY_CONFIG:-backends.example.json}"
chromium="${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}"
if [ -n "$chromium" ] && [ -x "$chromium" ]; then
  export CHROMIUM="$chromium"
else
  # Still configured (lazy: its server lists its tools without a browser), so the planner sees the same
  # tools as on a machine with chromium; no task of the demo uses it.
  echo "demo: chromium is not installed, so the demo skips the browser backend: it runs no browser task (a browser task would fail; scripts/setup.sh --browser installs chromium)"
fi
if ! command -v arbigent >/dev/null 2>&1 && ! command -v arbigent-cli >/dev/null 2>&1; then
  echo "demo: the arbigent CLI is not installed; the arbigent backend uses the repo's fake CLI (tests/fakes/arbigent)"
  export PATH="$PWD/tests/fakes:$PATH"
  export ARBIGENT_OPENAI_API_KEY="${ARBIGENT_OPENAI_API_KEY:-demo-key-for-the-fake-cli}"
fi
.venv/bin/agentify doctor || true
for task in "list the files in docs" "read notes.txt in examples" "run the login tests"; do
  echo
  echo "\$ agentify run \"$task\""
  .venv/bin/agentify run "$task" --cwd "$PWD" || true
done
