#!/usr/bin/env bash
# Installs everything the tests need (scripts/setup.sh --tests) and runs lint, type checks and the whole test suite.
# pytest's "no tests ran" (exit 5) is a failure here.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --tests
.venv/bin/ruff check agentify tests scripts
.venv/bin/ruff format --check agentify tests scripts
.venv/bin/mypy agentify
set +e
# Most tests wait on real processes; four workers keep both cores busy (AGENTIFY_TEST_WORKERS=0: serial).
.venv/bin/pytest -p no:cacheprovider -n "${AGENTIFY_TEST_WORKERS:-4}" "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "test: pytest collected no tests; that is a failure" >&2
  exit 1
fi
exit "$status"
