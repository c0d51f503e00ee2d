#!/usr/bin/env bash
# Throw-away Redis servers for tests, on 127.0.0.1 only.
#
# Usage:
#   scripts/redis.sh ensure      install Debian's redis-server and redis-sentinel packages
#                                if redis-server or redis-sentinel is not on PATH (apt-get,
#                                non-interactive; needs root). The packaged services are
#                                neither started nor left enabled.
#   scripts/redis.sh start DIR   start redis-server on a free random 127.0.0.1 port
#                                (20000-40000), no persistence, daemonized, with
#                                DIR/redis.pid, DIR/redis.log, DIR/redis.port and
#                                DIR/redis.url; waits (max 10 s) for PING -> PONG and
#                                prints redis://127.0.0.1:PORT/0 on stdout. If DIR
#                                already holds a live server, prints its URL.
#   scripts/redis.sh stop DIR    stop the server whose pid is in DIR/redis.pid and
#                                wait for it to exit (SIGTERM, then SIGKILL after 10 s).
#                                No-op if it is not running.
# Messages go to stderr. Only the URL goes to stdout.
set -euo pipefail

PROG="redis.sh"
die() { echo "$PROG: $*" >&2; exit 1; }
usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

have() { command -v "$1" >/dev/null 2>&1; }

# ---------------------------------------------------------------- ensure
apt_lists_present() {
  compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null
}

cmd_ensure() {
  if have redis-server && have redis-cli && have redis-sentinel; then
    return 0
  fi
  [[ "$(id -u)" == 0 ]] || die "redis-server or redis-sentinel is not installed and installing them needs root (apt-get install redis-server redis-sentinel)"
  have apt-get || die "redis-server or redis-sentinel is not installed and apt-get is not available"
  local pkgs=(redis-server redis-sentinel)

  local log t0 created_policy=0
  log="$(mktemp "${TMPDIR:-/tmp}/redis-ensure.XXXXXX")"
  t0=$SECONDS
  export DEBIAN_FRONTEND=noninteractive
  local apt=(apt-get -q -y -o DPkg::Lock::Timeout=120)

  # Keep the package's maintainer scripts from starting the service
  # (invoke-rc.d honours /usr/sbin/policy-rc.d; exit 101 = action forbidden).
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    created_policy=1
  fi
  # shellcheck disable=SC2064
  trap "rm -f '$log'; [[ $created_policy == 1 ]] && rm -f /usr/sbin/policy-rc.d || true" EXIT

  if ! apt_lists_present || ! apt-cache show "${pkgs[@]}" >/dev/null 2>&1; then
    "${apt[@]}" update >>"$log" 2>&1 || { tail -n 30 "$log" >&2; die "apt-get update failed"; }
  fi
  if ! "${apt[@]}" install --no-install-recommends "${pkgs[@]}" >>"$log" 2>&1; then
    # Stale lists (a version that is no longer on the mirror): refresh once and retry.
    "${apt[@]}" update >>"$log" 2>&1 || true
    "${apt[@]}" install --no-install-recommends "${pkgs[@]}" >>"$log" 2>&1 \
      || { tail -n 30 "$log" >&2; die "apt-get install ${pkgs[*]} failed"; }
  fi

  # Do not leave the packaged services enabled (we start our own instances).
  local svc
  for svc in redis-server redis-sentinel; do
    if have deb-systemd-helper; then
      deb-systemd-helper disable "$svc.service" >/dev/null 2>&1 || true
    fi
    if have update-rc.d && [[ -e "/etc/init.d/$svc" ]]; then
      update-rc.d "$svc" disable >/dev/null 2>&1 || true
    fi
  done

  if ! { have redis-server && have redis-cli && have redis-sentinel; }; then
    die "redis-server/redis-cli/redis-sentinel still not on PATH after install"
  fi
  echo "$PROG: installed $(redis-server --version | awk '{print $3}' | sed "s/^v=//") in $((SECONDS - t0)) s" >&2
}

# ---------------------------------------------------------------- helpers
port_in_use() {
  local port=$1
  if have ss; then
    [[ -n "$(ss -Hltn "sport = :$port" 2>/dev/null)" ]] && return 0
  fi
  # Anything accepting connections on 127.0.0.1:port?
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
  return 1
}

# Running (a zombie that nobody has reaped yet counts as gone).
alive() {
  local pid=$1 state
  kill -0 "$pid" 2>/dev/null || return 1
  state="$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || true)"
  [[ "$state" != Z ]]
}

pid_is_redis() {
  local pid=$1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  alive "$pid" || return 1
  grep -q 'redis' "/proc/$pid/comm" 2>/dev/null || grep -qa 'redis-server' "/proc/$pid/cmdline" 2>/dev/null
}

read_pid() {
  if [[ -f "$1/redis.pid" ]]; then tr -dc '0-9' <"$1/redis.pid" || true; fi
}

abs_dir() {
  [[ -n "${1:-}" ]] || usage
  mkdir -p "$1"
  (cd "$1" && pwd)
}

# ---------------------------------------------------------------- start
cmd_start() {
  local dir pid port out
  dir="$(abs_dir "${1:-}")"
  if ! { have redis-server && have redis-cli; }; then
    die "redis-server not found: run '$0 ensure' first"
  fi

  pid="$(read_pid "$dir")"
  if [[ -n "$pid" ]] && pid_is_redis "$pid" && [[ -f "$dir/redis.port" ]]; then
    port="$(cat "$dir/redis.port")"
    if [[ "$(redis-cli -p "$port" ping 2>/dev/null)" == PONG ]]; then
      echo "redis://127.0.0.1:$port/0"
      return 0
    fi
  fi
  rm -f "$dir/redis.pid" "$dir/redis.port" "$dir/redis.url"

  for _ in 1 2 3 4 5; do
    port=$((20000 + RANDOM % 20001))
    port_in_use "$port" && continue

    : >"$dir/redis.log"
    rm -f "$dir/redis.pid"
    if ! out="$(redis-server \
      --bind 127.0.0.1 --port "$port" --protected-mode yes \
      --save '' --appendonly no \
      --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" \
      --dir "$dir" 2>&1)"; then
      printf '%s\n' "$out" >&2
      tail -n 20 "$dir/redis.log" >&2 || true
      die "redis-server failed to start (see $dir/redis.log)"
    fi

    # Wait (max 10 s) for PONG from *our* process (pid in the pidfile).
    local i ok=0 srv_pid
    for ((i = 0; i < 100; i++)); do
      pid="$(read_pid "$dir")"
      if [[ -n "$pid" ]] && [[ "$(redis-cli -p "$port" ping 2>/dev/null)" == PONG ]]; then
        srv_pid="$(redis-cli -p "$port" info server 2>/dev/null | tr -d '\r' | awk -F: '$1=="process_id"{print $2}')"
        if [[ "$srv_pid" == "$pid" ]]; then ok=1; break; fi
      fi
      # Port lost to someone else between the check and the bind: try another one.
      if grep -q 'Address already in use' "$dir/redis.log" 2>/dev/null; then break; fi
      sleep 0.1
    done

    if [[ $ok == 1 ]]; then
      echo "$port" >"$dir/redis.port"
      echo "redis://127.0.0.1:$port/0" | tee "$dir/redis.url"
      return 0
    fi
    if grep -q 'Address already in use' "$dir/redis.log" 2>/dev/null; then
      continue
    fi
    # Timed out for another reason: clean up what may be running and give up.
    pid="$(read_pid "$dir")"
    if [[ -n "$pid" ]] && pid_is_redis "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
    tail -n 20 "$dir/redis.log" >&2 || true
    die "redis-server on port $port did not answer PING within 10 s (see $dir/redis.log)"
  done
  die "no free port found in 20000-40000 after 5 attempts"
}

# ---------------------------------------------------------------- stop
cmd_stop() {
  local dir pid i
  [[ -n "${1:-}" ]] || usage
  [[ -d "$1" ]] || { echo "$PROG: $1 does not exist, nothing to stop" >&2; return 0; }
  dir="$(cd "$1" && pwd)"
  pid="$(read_pid "$dir")"
  if [[ -z "$pid" ]] || ! pid_is_redis "$pid"; then
    rm -f "$dir/redis.pid" "$dir/redis.port" "$dir/redis.url"
    echo "$PROG: no running redis-server for $dir" >&2
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    alive "$pid" || break
    sleep 0.1
  done
  if alive "$pid"; then
    echo "$PROG: redis-server $pid did not exit after SIGTERM within 10 s, sending SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
      alive "$pid" || break
      sleep 0.1
    done
    alive "$pid" && die "redis-server $pid is still running"
  fi
  rm -f "$dir/redis.pid" "$dir/redis.port" "$dir/redis.url"
}

case "${1:-}" in
  ensure) cmd_ensure ;;
  start)  cmd_start "${2:-}" ;;
  stop)   cmd_stop "${2:-}" ;;
  -h|--help|"") usage ;;
  *) echo "$PROG: unknown subcommand '$1'" >&2; usage ;;
esac
