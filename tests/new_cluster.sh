#!/usr/bin/env bash
# A new cluster whose agent_memory.worker_databases names a database that does not exist yet:
#   - the launcher says once that it waits for it, and nothing logs a FATAL;
#   - once the database is created, its worker starts there (and the launcher leaves);
#   - a terminated worker is started again by the postmaster, and only one runs per database,
#     also after the launcher itself was restarted.
# Usage: tests/new_cluster.sh (after scripts/test.sh has installed this library).
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

PORT="${AGENT_MEMORY_NEW_CLUSTER_PORT:-28841}"
BIN="$(pg_bindir)"
DATA="$(server_dir new-cluster)/data"
SOCK="$(server_dir new-cluster-socket)"
LATER=agent_memory_later

psql_db() { "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$SOCK" -p "$PORT" -U postgres -d "$1" -tA -c "$2"; }
workers() {  # the workers running in the database
  psql_db postgres "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'agent_memory worker' AND datname = '$1'"
}
wait_for() {  # wait_for EXPECTED COMMAND...: up to 30 s
  local _
  for _ in $(seq 1 150); do [ "$("${@:2}")" = "$1" ] && return 0; sleep 0.2; done
  return 0
}
cleanup() {
  stop_server "$DATA"
  as_root rm -rf "$DATA"
}
trap cleanup EXIT

say "New cluster: a worker database that does not exist yet"
stop_server "$DATA"
as_root rm -rf "$DATA"
start_server "$DATA" "$SOCK" "$PORT" "agent_memory.worker_databases = 'postgres, $LATER'"
wait_for 1 workers postgres
check "the worker of an existing database runs" "1" "$(workers postgres)"
wait_for 1 grep -c "database $LATER does not exist yet" "$DATA/server.log"
check "the launcher says once that it waits" "1" "$(grep -c "database $LATER does not exist yet; its worker starts once it is created" "$DATA/server.log")"
sleep 12   # longer than a failed worker's restart interval
check "no FATAL while waiting" "" "$(grep FATAL "$DATA/server.log")"
check "the launcher still waits" "1" \
  "$(psql_db postgres "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'agent_memory launcher'")"

# A launcher restarted while the workers run starts them again: the second of a database leaves.
launcher() { psql_db postgres "SELECT pid FROM pg_stat_activity WHERE backend_type = 'agent_memory launcher'"; }
first="$(launcher)"
psql_db postgres "SELECT pg_terminate_backend($first)" >/dev/null
wait_for 1 grep -c "a worker of database postgres is already running; this one leaves" "$DATA/server.log"
check "a restarted launcher's second worker leaves" "1" \
  "$(grep -c "a worker of database postgres is already running; this one leaves" "$DATA/server.log")"
check "the launcher was restarted" "t" "$(l="$(launcher)"; [ -n "$l" ] && [ "$l" != "$first" ] && echo t)"
check "one worker in the existing database" "1" "$(workers postgres)"

psql_db postgres "CREATE DATABASE $LATER" >/dev/null
wait_for 1 workers "$LATER"
check "the worker starts once the database exists" "1" "$(workers "$LATER")"
wait_for 0 psql_db postgres "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'agent_memory launcher'"
check "the launcher leaves once every database has its worker" "0" \
  "$(psql_db postgres "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'agent_memory launcher'")"

pid="$(psql_db postgres "SELECT pid FROM pg_stat_activity WHERE backend_type = 'agent_memory worker' AND datname = '$LATER'")"
psql_db postgres "SELECT pg_terminate_backend($pid)" >/dev/null
wait_for 1 psql_db postgres "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'agent_memory worker' AND datname = '$LATER' AND pid <> $pid"
check "a terminated worker is started again" "1" \
  "$(psql_db postgres "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'agent_memory worker' AND datname = '$LATER' AND pid <> $pid")"
check "one worker per database" "1 1" "$(workers postgres) $(workers "$LATER")"
check "no FATAL at all" "" "$(grep FATAL "$DATA/server.log")"

say "New cluster: the pgvector version is checked"
psql_db postgres "CREATE DATABASE agent_memory_old_vector" >/dev/null
psql_db agent_memory_old_vector "CREATE EXTENSION vector" >/dev/null
# A catalog that says 0.7.4 stands for an older pgvector (only in this throwaway database).
psql_db agent_memory_old_vector "UPDATE pg_extension SET extversion = '0.7.4' WHERE extname = 'vector'" >/dev/null
old_state="$("$BIN/psql" -X -q -h "$SOCK" -p "$PORT" -U postgres -d agent_memory_old_vector -tA -v ON_ERROR_STOP=0 \
  -c "CREATE EXTENSION agent_memory" -c '\echo :LAST_ERROR_SQLSTATE' 2>/dev/null | tail -1 || true)"
old_message="$("$BIN/psql" -X -q -h "$SOCK" -p "$PORT" -U postgres -d agent_memory_old_vector -tA -c "CREATE EXTENSION agent_memory" 2>&1 \
  | grep -c 'needs pgvector 0.8.0 or later, and this database has pgvector 0.7.4' || true)"
check "CREATE EXTENSION refuses pgvector 0.7 (0A000, with the version)" "0A000 1" "$old_state $old_message"
psql_db agent_memory_old_vector "UPDATE pg_extension SET extversion = '0.8.0' WHERE extname = 'vector'" >/dev/null
check "and accepts 0.8" "$(sed -nE 's/^version = "([^"]+)"/\1/p' "$ROOT/Cargo.toml" | head -1)" \
  "$(psql_db agent_memory_old_vector "CREATE EXTENSION agent_memory" >/dev/null; psql_db agent_memory_old_vector "SELECT extversion FROM pg_extension WHERE extname = 'agent_memory'")"

echo "new cluster: $PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
