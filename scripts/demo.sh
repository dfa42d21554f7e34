#!/usr/bin/env bash
# Installs everything (scripts/setup.sh), checks the example config with `agentify doctor`, then
# runs real tasks on it through the gateway and prints the results. Needs no API key: without
# one, the offline planner plans (set OPENAI_API_KEY to use a model instead).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --browser
export AGENTIFY_CONFIG="${AGENTIFY_CONFIG:-backends.example.json}"
if ! command -v arbigent >/dev/null 2>&1 && ! command -v arbigent-cli >/dev/null 2>&1; then
  echo "demo: the arbigent CLI is not installed; the arbigent backend uses the repo's fake CLI (tests/fakes/arbigent)"
  export PATH="$PWD/tests/fakes:$PATH"
  export ARBIGENT_OPENAI_API_KEY="${ARBIGENT_OPENAI_API_KEY:-demo-key-for-the-fake-cli}"
fi
.venv/bin/agentify doctor || true
for task in "list the files in examples" "read notes.txt in examples" "run the login tests"; do
  echo
  echo "\$ agentify run \"$task\""
  .venv/bin/agentify run "$task" --cwd "$PWD" || true
done
