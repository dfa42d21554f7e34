#!/usr/bin/env bash
# Installs what agentify needs, idempotently: the Python venv with the package and the pinned Node
# backends. With --tests it also installs what only the test suite uses: Debian's redis-server and
# haproxy (the shared store and the balancer the team tests start) and chromium with a colour emoji
# font (the browser tests and the example's browser backend). --browser installs those two alone.
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

# Installs Debian's package $1 unless the program (or file) $2 is found; $3 says who needs it.
debian() {
  if command -v "$2" >/dev/null 2>&1 || [ -x "/usr/sbin/$2" ] || [ -f "$2" ]; then
    return
  fi
  if command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" >/dev/null
  else
    echo "setup: $3 need $2; install it and run again" >&2
    exit 1
  fi
}

case "${1:-}" in
  --tests)
    debian redis-server redis-server "the team tests"
    debian haproxy haproxy "the team tests"
    debian chromium chromium "the browser tests"
    debian fonts-noto-color-emoji /usr/share/fonts/truetype/noto/NotoColorEmoji.ttf "the console's emoji in the browser tests"
    ;;
  --browser)
    debian chromium chromium "the browser tests"
    debian fonts-noto-color-emoji /usr/share/fonts/truetype/noto/NotoColorEmoji.ttf "the console's emoji in the browser tests"
    ;;
  "") ;;
  *)
    echo "setup: unknown option $1 (use --tests, --browser or nothing)" >&2
    exit 2
    ;;
esac
