#!/usr/bin/env bash
# A streaming standby of the test server, with psql as the client over a socket:
#   - on the standby, recall (with and without touch), the text form, the views and dry runs of
#     both passes work and return rows, and a write is PostgreSQL's read-only error;
#   - the standby's worker stays idle: a run the primary left 'running' stays so;
#   - after promotion the worker starts, marks that run failed and runs its passes.
# Usage: tests/standby.sh SOCKET_DIR PORT (the primary, as scripts/test.sh starts it).
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

PRIMARY_SOCK="$1"
PRIMARY_PORT="$2"
STANDBY_PORT=$((PRIMARY_PORT + 2))
DB=agent_memory_standby
BIN="$(pg_bindir)"
STANDBY_DATA="$(server_dir standby)/data"
STANDBY_SOCK="$(server_dir standby-socket)"

psql_p() { "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$PRIMARY_SOCK" -p "$PRIMARY_PORT" -U postgres -d "$DB" "$@"; }
psql_s() { "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$STANDBY_SOCK" -p "$STANDBY_PORT" -U postgres -d "$DB" -tA "$@"; }
cleanup() {
  stop_server "$STANDBY_DATA"
  as_root rm -rf "$STANDBY_DATA"
}
trap cleanup EXIT

say "Standby: data on the primary"
"$BIN/psql" -X -q -h "$PRIMARY_SOCK" -p "$PRIMARY_PORT" -U postgres -d postgres \
  -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
psql_p <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION agent_memory CASCADE;
INSERT INTO agent_memory.memories (user_id, kind, content, emb, embedding_model, created_at, last_hit_at)
SELECT 'standby-user', CASE WHEN i % 2 = 0 THEN 'episodic' ELSE 'semantic' END, 'memory ' || i,
       ARRAY[1, i, i % 7, 1]::real[]::vector, 'm4', now() - interval '40 days', now() - interval '40 days'
  FROM generate_series(1, 50) i;
SELECT agent_memory.memory_record_turn('standby-user', 's1', 'user', 'hello from the primary');
-- A pass that a crash left running, as a worker's run row.
INSERT INTO agent_memory.runs (job, by_worker) VALUES ('forget', true);
SQL

say "Standby: pg_basebackup of the primary"
stop_server "$STANDBY_DATA"
as_root rm -rf "$STANDBY_DATA"
as_server_user "$BIN/pg_basebackup" -h "$PRIMARY_SOCK" -p "$PRIMARY_PORT" -U postgres -D "$STANDBY_DATA" -R -X stream -c fast
# Settings the primary has from ALTER SYSTEM do not follow the standby: it has its own below.
as_server_user sed -i '/^agent_memory\./d' "$STANDBY_DATA/postgresql.auto.conf"
# The standby's own port, socket and worker database (agent_memory.conf came with the backup).
start_server "$STANDBY_DATA" "$STANDBY_SOCK" "$STANDBY_PORT" "log_min_messages = warning" \
  "agent_memory.worker_databases = '$DB'" "agent_memory.forget_interval = '1s'" "agent_memory.consolidate_interval = '1s'"
for _ in $(seq 1 100); do
  [ "$(psql_s -c "SELECT count(*) FROM agent_memory.runs" 2>/dev/null)" = "1" ] && break
  sleep 0.2
done

say "Standby: reads"
check "the server is a standby" "t" "$(psql_s -c "SELECT pg_is_in_recovery()")"
check "recall returns k rows" "5" \
  "$(psql_s -c "SELECT count(*) FROM agent_memory.memory_recall('standby-user', '[1,3,3,1]'::vector, 5, model => 'm4')")"
check "recall with touch => false returns k rows" "7" \
  "$(psql_s -c "SELECT count(*) FROM agent_memory.memory_recall('standby-user', '[1,3,3,1]'::vector, 7, model => 'm4', touch => false)")"
check "recall of the text form, ranked as on the primary" \
  "$(psql_p -tA -c "SELECT string_agg(id::text, ',' ORDER BY score DESC, id) FROM agent_memory.memory_recall('standby-user', '[1,9,2,1]', 5, model => 'm4', touch => false)")" \
  "$(psql_s -c "SELECT string_agg(id::text, ',' ORDER BY score DESC, id) FROM agent_memory.memory_recall('standby-user', '[1,9,2,1]', 5, model => 'm4')")"
check "recall did not touch on the standby" "0" \
  "$(psql_s -c "SELECT coalesce(sum(hit_count), 0) FROM agent_memory.memories")"
check "memory_stats" "50" "$(psql_s -c "SELECT active FROM agent_memory.memory_stats WHERE user_id = 'standby-user'")"
check "the turn is there" "1" "$(psql_s -c "SELECT count(*) FROM agent_memory.turns")"
check "a dry run of forgetting" "expire,age_hits,evict,purge" \
  "$(psql_s -c "SELECT string_agg(step, ',') FROM agent_memory.memory_forget(dry_run => true)")"
check "a dry run of consolidation finds old episodes to summarise" "t" \
  "$(psql_s -c "SELECT rows > 0 FROM agent_memory.memory_consolidate(dry_run => true) WHERE step = 'summarize'")"
check "a write is the read-only error" "25006" \
  "$(psql_s -v ON_ERROR_STOP=0 -c "SELECT * FROM agent_memory.memory_reconcile('standby-user', 'user', 'editor', 'vim', 'Uses vim', '[1,0,0,0]', model => 'm4')" -c '\echo :LAST_ERROR_SQLSTATE' 2>/dev/null | tail -1)"
sleep 3
check "no worker runs on the standby" "0" \
  "$(psql_s -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'agent_memory worker'")"
check "the left-over run is untouched on the standby" "running" \
  "$(psql_s -c "SELECT status FROM agent_memory.runs ORDER BY id LIMIT 1")"

say "Standby: promotion"
as_server_user "$BIN/pg_ctl" -D "$STANDBY_DATA" -w promote >/dev/null
status=""
for _ in $(seq 1 150); do
  status="$(psql_s -c "SELECT status FROM agent_memory.runs ORDER BY id LIMIT 1")"
  [ "$status" = "failed" ] && break
  sleep 0.2
done
check "after promotion the worker marks the left-over run failed" "failed" "$status"
done_runs=0
for _ in $(seq 1 150); do
  done_runs="$(psql_s -c "SELECT count(DISTINCT job) FROM agent_memory.runs WHERE by_worker AND status = 'succeeded'")"
  [ "$done_runs" = "2" ] && break
  sleep 0.2
done
check "after promotion the worker runs both passes" "2" "$done_runs"

echo "standby: $PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
