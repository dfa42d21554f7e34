#!/usr/bin/env bash
# scripts/team.sh [--replicas N] [--port P] [--config F] [--logs DIR]   (--port 0: a free port)
#
# A team gateway on this machine (DESIGN.md, "Team gateway"): Debian's redis-server, N replicas of
# `agentify serve --transport http`, and HAProxy with the shipped deploy/haproxy.cfg, all on
# 127.0.0.1. Prints "team gateway ready at http://127.0.0.1:P/mcp" on stdout once every replica
# passes /readyz (progress and each replica's address, pid and log go to stderr). The environment
# (tokens, OPENAI_API_KEY, AGENTIFY_STATE_KEYS) is passed to every replica; without
# AGENTIFY_STATE_KEYS one key is made for this run. A replica that stops is not replaced: HAProxy
# serves with the others. SIGHUP restarts the replicas one after another (a rolling restart). SIGTERM
# or SIGINT: every replica drains (calls in flight finish), then HAProxy and Redis stop; nothing is
# left running.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
REPLICAS=3
PORT=8765
CONFIG=""
LOGS=""
READY_SECONDS="${AGENTIFY_TEAM_READY_SECONDS:-120}"
STOP_SECONDS=40 # a replica's drain (server.drainSeconds, 30 s at most by default) and its close

usage() {
  echo "usage: scripts/team.sh [--replicas N] [--port P] [--config F] [--logs DIR]" >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case "$1" in
    --replicas) REPLICAS="${2:-}"; shift 2 || usage ;;
    --port) PORT="${2:-}"; shift 2 || usage ;;
    --config) CONFIG="${2:-}"; shift 2 || usage ;;
    --logs) LOGS="${2:-}"; shift 2 || usage ;;
    -h|--help) usage ;;
    *) echo "team: unknown argument $1" >&2; usage ;;
  esac
done
[[ "$REPLICAS" =~ ^[1-9][0-9]?$ ]] || { echo "team: --replicas takes a number from 1 to 99" >&2; exit 2; }
[[ "$PORT" =~ ^[0-9]+$ ]] && [ "$PORT" -le 65535 ] || { echo "team: --port takes a port number" >&2; exit 2; }

AGENTIFY="${AGENTIFY_BIN:-$ROOT/.venv/bin/agentify}"
[ -x "$AGENTIFY" ] || AGENTIFY="$(command -v agentify || true)"
[ -n "$AGENTIFY" ] || { echo "team: agentify is not installed: run scripts/setup.sh" >&2; exit 1; }
program() { command -v "$1" 2>/dev/null || { [ -x "/usr/sbin/$1" ] && echo "/usr/sbin/$1"; } || true; }
REDIS_SERVER="$(program redis-server)"
HAPROXY="$(program haproxy)"
for found in "redis-server:$REDIS_SERVER" "haproxy:$HAPROXY"; do
  [ -n "${found#*:}" ] || { echo "team: ${found%%:*} is missing: run scripts/setup.sh --tests" >&2; exit 1; }
done
PYTHON="$ROOT/.venv/bin/python"
[ -x "$PYTHON" ] || PYTHON=python3

WORK="$(mktemp -d "${TMPDIR:-/tmp}/agentify-team.XXXXXX")"
LOGS="${LOGS:-$WORK}"
mkdir -p "$LOGS"
PIDS=()        # replicas
OTHERS=()      # HAProxy, then Redis: stopped after the replicas

# A port free now, outside the range the kernel takes the source ports of outgoing connections from: a process
# binds it seconds later (a replica once Python has started), and a connection made meanwhile (a health check,
# a client, Redis) could otherwise take it, and the process exit with "Address already in use".
free_port() {
  "$PYTHON" -c 'import random, socket
low, high = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
ports = [p for p in range(10000, 65536) if not low <= p <= high]
for port in random.sample(ports, min(len(ports), 500)) + [0]:  # 0: the kernel chooses
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        print(s.getsockname()[1])
        break'
}

[ "$PORT" = 0 ] && PORT="$(free_port)" # --port 0: a free one (the ready line names it)

# Waits (bounded) for the processes in "$@" to exit; what is left gets SIGKILL.
stop_pids() {
  local seconds="$1" signal="$2"; shift 2
  local pid
  for pid in "$@"; do kill "-$signal" "$pid" 2>/dev/null || true; done
  for ((tick = 0; tick < seconds * 10; tick++)); do
    local alive=0
    for pid in "$@"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && return 0
    sleep 0.1
  done
  for pid in "$@"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "$@"; do wait "$pid" 2>/dev/null || true; done
}

STOPPING=0
stop_all() {
  [ "$STOPPING" = 1 ] && return
  STOPPING=1
  trap '' TERM INT
  echo "team: stopping: the replicas drain, then HAProxy and Redis stop" >&2
  if [ ${#PIDS[@]} -gt 0 ]; then stop_pids "$STOP_SECONDS" TERM "${PIDS[@]}"; fi
  if [ ${#OTHERS[@]} -gt 0 ]; then stop_pids 10 TERM "${OTHERS[@]}"; fi
  for pid in "${PIDS[@]}" "${OTHERS[@]}"; do wait "$pid" 2>/dev/null || true; done
  [ "$LOGS" = "$WORK" ] || rm -rf "$WORK"
  echo "team: stopped" >&2
}
trap 'stop_all; exit 0' TERM INT
trap 'stop_all' EXIT

# Redis: the rate-limit counts and the used answers every replica shares.
# Its password is made for this run and reaches Redis in a config file only this user reads (not on
# its command line, which every local user sees) and the replicas in AGENTIFY_REDIS_URL; it is never printed.
REDIS_PORT="$(free_port)"
REDIS_PASSWORD="$("$PYTHON" -c 'import secrets; print(secrets.token_hex(24))')"
(umask 077 && printf 'requirepass %s\n' "$REDIS_PASSWORD" >"$WORK/redis.conf")
"$REDIS_SERVER" "$WORK/redis.conf" --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$WORK" \
  </dev/null >"$LOGS/redis.log" 2>&1 &
OTHERS+=($!)
export AGENTIFY_REDIS_URL="redis://:$REDIS_PASSWORD@127.0.0.1:$REDIS_PORT/0"
unset REDIS_PASSWORD
echo "team: redis at redis://127.0.0.1:$REDIS_PORT/0 pid $! log $LOGS/redis.log (its password: in AGENTIFY_REDIS_URL of the replicas)" >&2
if [ -z "${AGENTIFY_STATE_KEYS:-}" ]; then
  AGENTIFY_STATE_KEYS="$("$PYTHON" -c 'import secrets; print(secrets.token_hex(32))')"
  export AGENTIFY_STATE_KEYS
fi

# HAProxy reaches the replicas from an address of its own, the only one whose X-Forwarded-For they believe
# (server.trustedProxies): the back-off counts each client behind HAProxy, and a local process talking to a
# replica directly (from 127.0.0.1) is counted as itself, whatever X-Forwarded-For it sends.
PROXY_SOURCE="127.0.0.254"
export AGENTIFY_TRUSTED_PROXIES="$PROXY_SOURCE"

CONFIG_ARGS=()
[ -n "$CONFIG" ] && CONFIG_ARGS=(--config "$CONFIG")
cp "$ROOT/deploy/haproxy.cfg" "$WORK/haproxy.cfg"
REPLICA_PORTS=()
# Replica $1 (from 1) on port $2; its pid goes in PIDS. AGENTIFY_REPLICA_ID names it in the audit (and in a
# server.audit.file with {replica}, so that each replica writes its own file).
start_replica() {
  AGENTIFY_REPLICA_ID="$1" "$AGENTIFY" serve --transport http --host 127.0.0.1 --port "$2" "${CONFIG_ARGS[@]}" \
    </dev/null >/dev/null 2>>"$LOGS/replica-$1.log" &
  PIDS[$1 - 1]=$!
  echo "team: replica $1 at http://127.0.0.1:$2/mcp pid $! log $LOGS/replica-$1.log" >&2
}
for ((n = 1; n <= REPLICAS; n++)); do
  REPLICA_PORTS+=("$(free_port)")
  start_replica "$n" "${REPLICA_PORTS[n - 1]}"
  echo "    server replica$n 127.0.0.1:${REPLICA_PORTS[n - 1]} source $PROXY_SOURCE" >>"$WORK/haproxy.cfg"
done

# Whether HAProxy itself counts every replica up (its checks, not ours): what "ready" waits for.
LB_READY_PORT="$(free_port)"
cat >>"$WORK/haproxy.cfg" <<EOF

global
    stats socket $WORK/haproxy.sock mode 600 level admin

frontend team-ready
    bind 127.0.0.1:$LB_READY_PORT
    http-request return status 200 if { nbsrv(agentify) ge $REPLICAS }
    http-request return status 503
EOF
AGENTIFY_LB_BIND="127.0.0.1:$PORT" "$HAPROXY" -db -f "$WORK/haproxy.cfg" </dev/null >>"$LOGS/haproxy.log" 2>&1 &
HAPROXY_PID=$!
echo "team: haproxy at http://127.0.0.1:$PORT/mcp pid $HAPROXY_PID log $LOGS/haproxy.log" >&2
OTHERS=("$HAPROXY_PID" "${OTHERS[@]}")

ready() { curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:$1/readyz" 2>/dev/null; }
lb_ready() { curl -fs -o /dev/null --max-time 2 "http://127.0.0.1:$LB_READY_PORT/"; }
# A command to HAProxy's runtime API, e.g. "set server agentify/replica1 state drain".
lb_command() {
  "$PYTHON" -c 'import socket, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(sys.argv[1]); s.sendall(sys.argv[2].encode() + b"\n")
s.recv(4096)' "$WORK/haproxy.sock" "$1" 2>/dev/null || true
}

# SIGHUP: a rolling restart. Each replica in turn drains and stops (HAProxy sends its new requests to
# the others), starts again on its port, and is ready before the next one goes.
rolling_restart() {
  local n pid tick
  echo "team: rolling restart" >&2
  for ((n = 1; n <= REPLICAS; n++)); do
    pid="${PIDS[n - 1]}"
    # HAProxy sends it nothing new from now on (no request can meet its closing connections), then it drains.
    lb_command "set server agentify/replica$n state drain"
    stop_pids "$STOP_SECONDS" TERM "$pid"
    wait "$pid" 2>/dev/null || true
    start_replica "$n" "${REPLICA_PORTS[n - 1]}"
    lb_command "set server agentify/replica$n state ready"
    # Ready when HAProxy counts it up again (its next check, within a second); until then the others serve.
    for ((tick = 0; tick < READY_SECONDS * 10; tick++)); do
      ready "${REPLICA_PORTS[n - 1]}" && lb_ready && break
      kill -0 "${PIDS[n - 1]}" 2>/dev/null || break
      sleep 0.1
    done
  done
  echo "team: rolling restart done" >&2
}
# Says which process exited, with the end of its log, and stops the team (the logs stay in $LOGS).
exited_while_starting() {
  echo "team: $1 exited while starting; the end of its log $2 (every log is in $LOGS):" >&2
  tail -n 5 "$2" 2>/dev/null | sed 's/^/team:     /' >&2
  exit 1
}
for ((tick = 0; tick < READY_SECONDS * 10; tick++)); do
  waiting=0
  for port in "${REPLICA_PORTS[@]}"; do ready "$port" || waiting=1; done
  lb_ready || waiting=1
  for ((n = 1; n <= REPLICAS; n++)); do
    kill -0 "${PIDS[n - 1]}" 2>/dev/null || exited_while_starting "replica $n (pid ${PIDS[n - 1]})" "$LOGS/replica-$n.log"
  done
  kill -0 "$HAPROXY_PID" 2>/dev/null || exited_while_starting "haproxy (pid $HAPROXY_PID)" "$LOGS/haproxy.log"
  [ "$waiting" = 0 ] && break
  sleep 0.1
done
if [ "$waiting" = 1 ]; then
  echo "team: not every replica passed /readyz within $READY_SECONDS s: see $LOGS" >&2
  exit 1
fi
echo "team gateway ready at http://127.0.0.1:$PORT/mcp"

# Serves until a signal (the trap) or until HAProxy stops; replicas that stop leave the others serving.
ROLL=0
trap 'ROLL=1' HUP
while kill -0 "$HAPROXY_PID" 2>/dev/null; do
  wait "$HAPROXY_PID" 2>/dev/null || true
  if [ "$ROLL" = 1 ]; then
    ROLL=0
    rolling_restart
  fi
done
echo "team: HAProxy stopped: see $LOGS/haproxy.log" >&2
exit 1
