#!/usr/bin/env bash
# Installs everything (scripts/setup.sh), checks the example config with `agentify doctor`,
# then runs a real task on it through the gateway and prints the result.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export AGENTIFY_CONFIG="${AGENTIFY_CONFIG:-backends.example.json}"
.venv/bin/agentify doctor || true
echo
echo '$ agentify run "list the files in examples"'
.venv/bin/agentify run "list the files in examples" --cwd "$PWD"
