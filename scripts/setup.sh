#!/usr/bin/env bash
# Installs everything agentify and its tests need, idempotently: the Python venv with the
# package, the pinned Node backends, Debian's redis-server and haproxy (the shared store and the balancer the team
# tests start), and (with --browser) Debian's chromium and colour emoji font.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=".venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e ".[console,dev,docs]"
  rm -f .venv/.installed-* && touch "$stamp"
fi

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
  else
    echo "setup: Node.js 20+ and npm are needed for the backends; install them and run again" >&2
    exit 1
  fi
fi
lock_stamp="node_modules/.installed-$(cat package.json package-lock.json 2>/dev/null | sha256sum | cut -c1-16)"
if [ ! -f "$lock_stamp" ]; then
  if [ -f package-lock.json ]; then npm ci --no-audit --no-fund --loglevel=error; else npm install --no-audit --no-fund --loglevel=error; fi
  rm -f node_modules/.installed-* && touch "$lock_stamp"
fi

# Debian's redis-server and haproxy: the shared store and the balancer of the team tests (scripts/team.sh).
for program in redis-server haproxy; do
  if ! command -v "$program" >/dev/null 2>&1 && ! [ -x "/usr/sbin/$program" ]; then
    if command -v apt-get >/dev/null 2>&1; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$program" >/dev/null
    else
      echo "setup: the team tests need $program; install it and run again" >&2
      exit 1
    fi
  fi
done

# The console's browser tests: chromium, and a colour emoji font (backend output carries emoji).
if [ "${1:-}" = "--browser" ]; then
  missing=()
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  [ -f /usr/share/fonts/truetype/noto/NotoColorEmoji.ttf ] || missing+=(fonts-noto-color-emoji)
  if [ "${#missing[@]}" -gt 0 ]; then
    if command -v apt-get >/dev/null 2>&1; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
      echo "setup: the browser tests need ${missing[*]}; install them and run again" >&2
      exit 1
    fi
  fi
fi
