#!/usr/bin/env bash
# A server beside the tests: a PostgreSQL server with the library preloaded and its worker running,
# as scripts/try.sh leaves one, keeps serving while the rest of scripts/test.sh builds, installs
# and tests the extension in the same clone (the pg_test tier's install, the release install) and
# scripts/package.sh builds and installs the package.
#   tests/bystander.sh start   start the server and a client that calls it every half second
#   tests/bystander.sh check   run scripts/package.sh beside it, then check that the postmaster
#                              is the one started, that no server process crashed, that every
#                              call succeeded and the worker runs; then stop both
# Usage: from scripts/test.sh (start before the other tiers, check after them).
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

PORT="${AGENT_MEMORY_BYSTANDER_PORT:-28843}"
DB=agent_memory_bystander
DATA="$(server_dir bystander)/data"
SOCK="$(server_dir bystander-socket)"
STATE="$ROOT/target/agent_memory/bystander-state"
P=("$(pg_bindir)/psql" -X -q -v ON_ERROR_STOP=1 -h "$SOCK" -p "$PORT" -U postgres)

postmaster_pid() { head -1 "$DATA/postmaster.pid" 2>/dev/null || true; }

start() {
  rm -rf "$STATE"; mkdir -p "$STATE"
  say "Bystander: a server with the library preloaded (port $PORT), called while the tests run"
  start_server "$DATA" "$SOCK" "$PORT" "agent_memory.worker_databases = '$DB'" "agent_memory.pack_interval = 5" \
    "restart_after_crash = on"
  "${P[@]}" -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
  "${P[@]}" -d "$DB" <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION agent_memory CASCADE;
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model)
SELECT 'by-' || (i % 5), 'memory ' || i, ('[' || (i % 7) + 1 || ',' || (i % 3) || ',1,' || (i % 11) || ']')::vector, 'by4'
  FROM generate_series(1, 2000) i;
SQL
  postmaster_pid > "$STATE/postmaster.pid"
  # The client: a new connection (a new backend) per call, so every call starts a process of the
  # running server; bounded in time, and stopped by the check.
  (
    end=$((SECONDS + 5400)); n=0
    while [ ! -f "$STATE/stop" ] && [ $SECONDS -lt $end ]; do
      n=$((n + 1))
      if ! "${P[@]}" -d "$DB" -tA -c "SELECT count(*) FROM agent_memory.memory_recall('by-$((n % 5))', '[1,0,1,$((n % 11))]'::vector, 5, model => 'by4')" \
           -c "SELECT action FROM agent_memory.memory_reconcile('by-$((n % 5))', NULL, NULL, NULL, 'call $n', '[1,$((n % 3)),1,2]'::vector, model => 'by4')" \
           >/dev/null 2>>"$STATE/errors"; then
        echo "$n" >> "$STATE/failed"
      fi
      echo "$n" > "$STATE/calls"
      sleep 0.5
    done
  ) >/dev/null 2>&1 &
  echo $! > "$STATE/client.pid"
  note "postmaster $(cat "$STATE/postmaster.pid"), client $(cat "$STATE/client.pid")"
}

check_all() {
  say "Bystander: scripts/package.sh beside the running server"
  local pkg=ok
  AGENT_MEMORY_PACKAGE_PORT=28844 bash "$ROOT/scripts/package.sh" >"$STATE/package.log" 2>&1 || pkg=failed
  check "scripts/package.sh succeeded beside the server" ok "$pkg"
  sleep 2
  touch "$STATE/stop"
  local client; client="$(cat "$STATE/client.pid" 2>/dev/null || true)"
  [ -n "$client" ] && wait "$client" 2>/dev/null || true
  say "Bystander: the server kept serving"
  check "the postmaster is the one started before the tests" "$(cat "$STATE/postmaster.pid")" "$(postmaster_pid)"
  check "no server process crashed (server log)" 0 "$(grep -cE 'terminated by signal|was terminated by exception|reinitializing' "$DATA/server.log" || true)"
  local calls; calls="$(cat "$STATE/calls" 2>/dev/null || echo 0)"
  check "the client called the server all along (more than 20 calls)" yes "$([ "$calls" -gt 20 ] && echo yes || echo "no: $calls")"
  check "every call succeeded" 0 "$( [ -f "$STATE/failed" ] && wc -l < "$STATE/failed" || echo 0)"
  [ -s "$STATE/errors" ] && head -n 5 "$STATE/errors"
  check "its worker runs" 1 "$("${P[@]}" -d "$DB" -tA -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'agent_memory worker' AND datname = '$DB'" 2>/dev/null || echo none)"
  stop_server "$DATA"
  echo "bystander: $PASSED passed, $FAILED failed"
  [ "$FAILED" -eq 0 ]
}

case "${1:-}" in
  start) start ;;
  check) check_all ;;
  *) die "usage: tests/bystander.sh start|check" ;;
esac
