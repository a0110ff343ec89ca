#!/usr/bin/env bash
# Sets up what is missing, builds and installs agent_memory, starts a local PostgreSQL server
# with the library preloaded (data in target/, a private port and socket folder), creates the
# extension, and runs a demo of an agent's memory at work.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
install_extension
PORT="${AGENT_MEMORY_PORT:-28835}"
DATA="$(server_dir demo)/data"
SOCK="$(server_dir demo-socket)"
say "Starting PostgreSQL $(pg_major) (port $PORT, socket $SOCK, data $DATA)"
start_server "$DATA" "$SOCK" "$PORT" "agent_memory.worker_databases = 'agent_memory_demo'"
PSQL=(env PGOPTIONS="-c client_min_messages=warning" psql -X -h "$SOCK" -p "$PORT" -U postgres)
"${PSQL[@]}" -q -d postgres -c "DROP DATABASE IF EXISTS agent_memory_demo WITH (FORCE)" -c "CREATE DATABASE agent_memory_demo"
"${PSQL[@]}" -q -d agent_memory_demo -c "CREATE EXTENSION agent_memory CASCADE"
say "Demo"
"${PSQL[@]}" -d agent_memory_demo -f "$ROOT/examples/demo.sql"

stop_cmd="pg_ctl -D $DATA stop"
[ "$(id -u)" -eq 0 ] && stop_cmd="runuser -u postgres -- $(pg_bindir)/pg_ctl -D $DATA stop"
cat <<MSG

$(say "The server is running")
    connect:  psql -h $SOCK -p $PORT -U postgres agent_memory_demo
    stop:     $stop_cmd
MSG
