#!/usr/bin/env bash
# The Citus tier (scale-out step 2, first part): a real Citus 13.2.2 cluster on localhost, a
# coordinator and two workers, each a server of its own with shared_preload_libraries =
# 'citus,agent_memory', both extensions created on every node and the workers added; then the
# probes of what Citus does with the calls agent_memory will delegate (../shared/citus.md §4, §5,
# §11), on a scratch distributed table and functions of their own, with psql over TCP:
#   - a call whose user is a constant runs on the worker that holds the user, by position and
#     with named arguments and a default left out, and inside a transaction block;
#   - a force-delegated function's query names its user through a PL/pgSQL variable (an SPI
#     parameter): accepted; a query of another user's rows from it: refused;
#   - a NULL user, and a call whose user is not a constant (in a subquery): what each does.
# Then agent_memory on the cluster (tests/tests/citus.rs), the workers' own background passes,
# and ALTER EXTENSION agent_memory UPDATE on the coordinator of a cluster distributed at 0.11.0.
# Citus is built from ../shared/vendor once (scripts/citus.sh); without that tarball the tier
# says so in one line and is skipped.
#   bash tests/citus.sh          the tier: the cluster up, the probes, the cluster down
#   bash tests/citus.sh up       the cluster up, left running
#   bash tests/citus.sh down     the cluster stopped
#   bash tests/citus.sh restart N  worker N stopped at once (-m immediate) and started again
# The coordinator listens on AGENT_MEMORY_CITUS_PORT (28860), the workers on the next two ports.
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
NODES=(coordinator worker1 worker2)
BASE="${AGENT_MEMORY_CITUS_PORT:-28860}"
DB=agent_memory_citus
data_of() { echo "$(server_dir "citus-${NODES[$1]}")/data"; }
down() { for i in 0 1 2; do stop_server "$(data_of "$i")"; done; }

if [ "${1:-}" = down ]; then down; exit 0; fi
# `restart N`: worker N stopped at once (pg_ctl -m immediate, as a crash would) and started
# again (the tests' restart of a worker in the middle of a workload).
if [ "${1:-}" = restart ]; then
  data="$(data_of "$2")"
  as_server_user "$(pg_bindir)/pg_ctl" -D "$data" -w -m immediate stop >/dev/null
  as_server_user "$(pg_bindir)/pg_ctl" -D "$data" -w -t 60 -l "$data/server.log" start >/dev/null
  exit 0
fi

set +e
bash "$ROOT/scripts/citus.sh"
rc=$?
set -e
if [ "$rc" -eq 2 ]; then
  echo "skipped: no Citus source (../shared/vendor/citus-13.2.2.tar.gz) beside this checkout"
  exit 0
fi
[ "$rc" -eq 0 ] || die "Citus could not be built or installed"
# scripts/test.sh has installed the extension already.
[ -n "${AGENT_MEMORY_INSTALLED:-}" ] || install_extension

[ "${1:-}" = up ] || trap down EXIT

say "A Citus cluster: the coordinator on port $BASE, the workers on $((BASE + 1)) and $((BASE + 2))"
for i in 0 1 2; do
  dir="$(server_dir "citus-${NODES[$i]}")"
  # Citus's nodes reach each other over TCP on localhost (trust, as initdb -A trust sets it);
  # shard moves copy with logical replication.
  start_server "$dir/data" "$dir" "$((BASE + i))" \
    "listen_addresses = 'localhost'" \
    "shared_preload_libraries = 'citus,agent_memory'" \
    "wal_level = logical" \
    "max_connections = 200" \
    "citus.node_conninfo = 'sslmode=disable'" \
    "citus.propagate_set_commands = 'local'" \
    "track_functions = 'all'" \
    "log_min_messages = warning"
done
node_psql() {  # node_psql N ARGS...: psql to database $DB (or $ON_DB) of node N (0 = the coordinator)
  local n="$1"; shift
  timeout 120 "$(pg_bindir)/psql" -X -q -v ON_ERROR_STOP=1 -h localhost -p "$((BASE + n))" -U postgres -d "${ON_DB:-$DB}" "$@"
}
cluster_db() {  # cluster_db NAME [VERSION]: a database NAME on every node, both extensions in it, the workers added
  local i version="${2:+ VERSION '$2'}"
  for i in 0 1 2; do
    timeout 120 "$(pg_bindir)/psql" -X -q -v ON_ERROR_STOP=1 -h localhost -p "$((BASE + i))" -U postgres -d postgres \
      -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)" -c "CREATE DATABASE $1"
    ON_DB="$1" node_psql "$i" -c "SET client_min_messages = warning" -c "CREATE EXTENSION citus" -c "CREATE EXTENSION agent_memory$version CASCADE"
  done
  ON_DB="$1" node_psql 0 -tA \
    -c "SELECT citus_set_coordinator_host('localhost', $BASE)" \
    -c "SELECT citus_add_node('localhost', $((BASE + 1)))" \
    -c "SELECT citus_add_node('localhost', $((BASE + 2)))" >/dev/null
}
cluster_db "$DB"
check "two workers are active" "2" "$(node_psql 0 -tA -c "SELECT count(*) FROM citus_get_active_worker_nodes()")"
check "Citus 13.2 on every node" "13.2 13.2 13.2" \
  "$(for i in 0 1 2; do node_psql "$i" -tA -c "SELECT extversion FROM pg_extension WHERE extname = 'citus'"; done | cut -d- -f1 | xargs)"
# The version this checkout builds, and agent_memory's version on each node (of database $ON_DB or $DB).
THIS_VERSION="$(grep -oE '^version = "[^"]+"' "$ROOT/Cargo.toml" | cut -d'"' -f2)"
versions_on_nodes() {
  local i
  for i in 0 1 2; do node_psql "$i" -tA -c "SELECT extversion FROM pg_extension WHERE extname = 'agent_memory'"; done | xargs
}
check "agent_memory's version on every node" "$THIS_VERSION $THIS_VERSION $THIS_VERSION" "$(versions_on_nodes)"
if [ "${1:-}" = up ]; then
  note "database $DB on every node; the coordinator: psql -h localhost -p $BASE -U postgres -d $DB"
  exit 0
fi

say "Citus: probes of delegation, on a scratch table of 40 users and functions of its own"
node_psql 0 <<'SQL'
SET client_min_messages = warning;
CREATE TABLE probe_rows (user_id text NOT NULL, v integer);
SELECT create_distributed_table('probe_rows', 'user_id', shard_count => 8);
INSERT INTO probe_rows SELECT 'user-' || i, i FROM generate_series(1, 40) i;
-- Where a call ran (the port of the node whose backend ran it) and what it saw of its user.
CREATE FUNCTION probe_where(user_id text, k integer DEFAULT 1) RETURNS TABLE (port integer, n bigint)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY SELECT pg_catalog.inet_server_port(), count(*) FROM probe_rows r WHERE r.user_id = probe_where.user_id;
END
$$;
SELECT create_distributed_function('probe_where(text, integer)', 'user_id', colocate_with => 'probe_rows', force_delegation => true);
-- A force-delegated function that reads another user's rows than its argument's.
CREATE FUNCTION probe_other(user_id text) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    RETURN (SELECT count(*) FROM probe_rows r WHERE r.user_id = probe_other.user_id || '0');
END
$$;
SELECT create_distributed_function('probe_other(text)', 'user_id', colocate_with => 'probe_rows', force_delegation => true);
-- The same as probe_where, delegated without force (outside transaction blocks only).
CREATE FUNCTION probe_plain(user_id text) RETURNS TABLE (port integer, n bigint)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY SELECT pg_catalog.inet_server_port(), count(*) FROM probe_rows r WHERE r.user_id = probe_plain.user_id;
END
$$;
SELECT create_distributed_function('probe_plain(text)', 'user_id', colocate_with => 'probe_rows');
SQL
# The port of the worker that holds a user's shard.
holder() {
  node_psql 0 -tA -c "SELECT n.nodeport FROM pg_dist_placement p JOIN pg_dist_node n ON n.groupid = p.groupid
                       WHERE p.shardid = get_shard_id_for_distribution_column('probe_rows', '$1')"
}
h1="$(holder user-1)"
spread="$(node_psql 0 -tA -c "SELECT count(DISTINCT n.nodeport) FROM pg_dist_placement p JOIN pg_dist_node n ON n.groupid = p.groupid
                                JOIN pg_dist_shard s ON s.shardid = p.shardid WHERE s.logicalrelid = 'probe_rows'::regclass")"
check "the scratch table's shards are on both workers" "2" "$spread"
check "a call with a constant user runs on the worker that holds it" "$h1|1" "$(node_psql 0 -tA -c "SELECT * FROM probe_where('user-1')")"
check "... with named arguments and a default left out" "$h1|1" "$(node_psql 0 -tA -c "SELECT * FROM probe_where(user_id => 'user-1')")"
check "... with named arguments in another order" "$h1|1" "$(node_psql 0 -tA -c "SELECT * FROM probe_where(k => 2, user_id => 'user-1')")"
check "... inside a transaction block (force delegation)" "$h1|1" \
  "$(node_psql 0 -tA -c "BEGIN" -c "SELECT * FROM probe_where('user-1')" -c "COMMIT")"
check "... every user on its own worker" "40" \
  "$(for i in $(seq 1 40); do
       [ "$(node_psql 0 -tA -c "SELECT port FROM probe_where('user-$i')")" = "$(holder "user-$i")" ] && echo x
     done | wc -l)"
other="$(node_psql 0 -tA -c "SELECT probe_other('user-1')" 2>&1 || true)"
check "a delegated call that reads another user's rows is refused" "refused" \
  "$(grep -q 'distribution argument' <<<"$other" && echo refused || echo "$other")"
check "without force delegation, a constant user runs on its worker" "$h1|1" "$(node_psql 0 -tA -c "SELECT * FROM probe_plain('user-1')")"
check "... and as the first statement of a transaction block, delegated too" "$h1|1" \
  "$(node_psql 0 -tA -c "BEGIN" -c "SELECT * FROM probe_plain('user-1')" -c "COMMIT")"

# What Citus 13.2.2 does with a call whose user is not a constant: in a join (the user a column
# of another table) and a NULL user, force-delegated or not. Each crashed the coordinator's
# backend with SIGSEGV while Citus planned the delegation (the postmaster then restarts every
# session; the same without agent_memory preloaded). agent_memory's calls must never reach Citus
# so (docs/scale-out.md). Probed last, each followed by the coordinator's crash recovery.
log="$(data_of 0)/server.log"
crash_probe() {  # crash_probe SQL: "crashed", or the statement's answer
  local before answer
  before="$(stat -c %s "$log")"
  answer="$(node_psql 0 -tA -c "$1" 2>&1 || true)"
  for _ in $(seq 1 60); do
    node_psql 0 -tA -c "SELECT 1" >/dev/null 2>&1 && break
    sleep 1
  done
  if tail -c +"$((before + 1))" "$log" | grep -q 'terminated by signal 11'; then echo crashed; else echo "$answer"; fi
}
check "a call whose user is a column of a join crashes the coordinator's backend" "crashed" \
  "$(crash_probe "SELECT w.port FROM (VALUES ('user-1')) x(u), LATERAL probe_where(x.u) w")"
check "a NULL user of a force-delegated call crashes the coordinator's backend" "crashed" "$(crash_probe "SELECT * FROM probe_where(NULL)")"
check "a NULL user of a call delegated without force crashes it too" "crashed" "$(crash_probe "SELECT * FROM probe_plain(NULL)")"
check "the coordinator answers after its crash recovery" "$h1|1" "$(node_psql 0 -tA -c "SELECT * FROM probe_where('user-1')")"

# distribute() refuses, changing nothing, while the coordinator's own tables hold a user's rows
# (they would stay there, where no delegated call reads them), and on a worker.
sqlstate_of() {  # sqlstate_of N SQL: the SQLSTATE a statement fails with on node N (empty on success)
  node_psql "$1" -v ON_ERROR_STOP=0 -tA -c "$2" -c '\echo :LAST_ERROR_SQLSTATE' 2>/dev/null | tail -1 | sed 's/^00000$//'
}
node_psql 0 -tA -c "SELECT agent_memory.memory_record_turn('early-user', 's', 'user', 'written before distribute()')" >/dev/null
check "distribute() refuses while the coordinator's tables hold rows" "55000" "$(sqlstate_of 0 "SELECT * FROM agent_memory.distribute()")"
check "... and nothing was distributed" "0" "$(node_psql 0 -tA -c "SELECT count(*) FROM pg_dist_partition WHERE logicalrelid::regclass::text LIKE 'agent_memory.%'")"
node_psql 0 -tA -c "DELETE FROM agent_memory.turns" >/dev/null
check "distribute() refuses on a worker" "55000" "$(sqlstate_of 1 "SELECT * FROM agent_memory.distribute()")"
# A worker with another version of the extension, and one whose Citus metadata is not synced
# (each made so in the catalog for the check, then put back).
node_psql 1 -tA -c "UPDATE pg_extension SET extversion = '0.0.1' WHERE extname = 'agent_memory'" >/dev/null
check "distribute() refuses while a worker runs another version" "55000" "$(sqlstate_of 0 "SELECT * FROM agent_memory.distribute()")"
node_psql 1 -tA -c "UPDATE pg_extension SET extversion = (SELECT default_version FROM pg_available_extensions WHERE name = 'agent_memory') WHERE extname = 'agent_memory'" >/dev/null
node_psql 0 -tA -c "UPDATE pg_dist_node SET hasmetadata = false WHERE nodeport = $((BASE + 2))" >/dev/null
check "distribute() refuses while a worker lacks Citus's metadata" "55000" "$(sqlstate_of 0 "SELECT * FROM agent_memory.distribute()")"
node_psql 0 -tA -c "UPDATE pg_dist_node SET hasmetadata = true WHERE nodeport = $((BASE + 2))" >/dev/null
check "... and nothing was distributed by any refusal" "0" "$(node_psql 0 -tA -c "SELECT count(*) FROM pg_dist_partition WHERE logicalrelid::regclass::text LIKE 'agent_memory.%'")"

# agent_memory itself on the cluster: distribute(), then every per-user call through the
# coordinator against the same calls on one server (tests/tests/citus.rs; the one server is the
# test server when scripts/test.sh runs the tier, else a database of the coordinator's server
# without Citus).
say "agent_memory on the cluster: distribute() and the calls through the coordinator (tests/tests/citus.rs)"
if AGENT_MEMORY_CITUS_HOST=localhost AGENT_MEMORY_CITUS_PORT="$BASE" AGENT_MEMORY_CITUS_DB="$DB" \
   AGENT_MEMORY_CITUS_RESTART="bash $ROOT/tests/citus.sh restart" \
   AGENT_MEMORY_TEST_HOST="${AGENT_MEMORY_TEST_HOST:-localhost}" AGENT_MEMORY_TEST_PORT="${AGENT_MEMORY_TEST_PORT:-$BASE}" \
   timeout 1200 cargo test -p agent_memory_tests --test citus -- --ignored --test-threads=1; then
  PASSED=$((PASSED + 1))
else
  FAILED=$((FAILED + 1))
  note "FAILED: tests/tests/citus.rs (coordinator log: $(data_of 0)/server.log)"
fi

# The workers' own background passes over their shards: worker_databases set on both workers
# (a restart: the setting is read at start), a short forgetting interval, then 20 users written
# through the coordinator (one top-level call each: \gexec), one memory of each expired, a recall
# whose hit the worker folds, and a memory written with agent_memory.embed_async (SET LOCAL
# reaches the worker) that the worker embeds.
say "The workers' background passes over their own shards (agent_memory.worker_databases on the workers)"
for i in 1 2; do
  printf "agent_memory.worker_databases = '%s'\nagent_memory.forget_interval = 3\nagent_memory.hit_fold_interval = 300\n" "$DB" \
    | as_server_user tee -a "$(data_of "$i")/agent_memory.conf" >/dev/null
  as_server_user "$(pg_bindir)/pg_ctl" -D "$(data_of "$i")" -w -t 60 -m fast restart -l "$(data_of "$i")/server.log" >/dev/null
done
node_psql 0 -tA >/dev/null <<'SQL'
SELECT agent_memory.register_model('m4', 4);
SELECT pg_catalog.format('SELECT count(*) FROM agent_memory.memory_reconcile_batch(%L, %L::jsonb, %L)', 'bg-' || i,
       '[{"content": "bg note a", "emb": [1, 0, 0, 0]}, {"content": "bg note b", "emb": [0, 1, 0, 0]}]', 'm4')
  FROM generate_series(1, 20) i \gexec
UPDATE agent_memory.memories SET expires_at = now() - interval '1 minute' WHERE user_id LIKE 'bg-%' AND content = 'bg note a';
SELECT content FROM agent_memory.memory_recall('bg-1', '[0, 1, 0, 0]'::vector, 1, model => 'm4');
BEGIN;
SET LOCAL agent_memory.embed_async = on;
SELECT action FROM agent_memory.memory_reconcile('bg-2', NULL, NULL, NULL, 'bg note written without its embedding');
COMMIT;
SQL
wait_for() {  # wait_for SQL WANT: polls the coordinator (up to 60 s) until SQL answers WANT; prints the last answer
  local got=""
  for _ in $(seq 1 60); do
    got="$(node_psql 0 -tA -c "$1" 2>&1)"
    [ "$got" = "$2" ] && break
    sleep 1
  done
  echo "$got"
}
check "the workers' own passes retire each expired memory once" "20" \
  "$(wait_for "SELECT count(*) FROM agent_memory.memories WHERE user_id LIKE 'bg-%' AND retired_reason = 'expired'" 20)"
check "... both workers ran them (their runs, through cluster_runs)" "2" \
  "$(wait_for "SELECT count(DISTINCT node) FROM agent_memory.cluster_runs() WHERE by_worker AND job = 'forget' AND (steps->>'expire')::int > 0" 2)"
check "... and the holder's worker folded the recall's hit into its shard" "1" \
  "$(wait_for "SELECT hit_count FROM agent_memory.memories WHERE user_id = 'bg-1' AND content = 'bg note b'" 1)"
check "... the holder's worker embedded the memory written without its embedding" "1" \
  "$(wait_for "SELECT count(*) FROM agent_memory.memories WHERE user_id = 'bg-2' AND content LIKE '%without its embedding' AND emb IS NOT NULL" 1)"
check "... the other memories are kept" "20" \
  "$(node_psql 0 -tA -c "SELECT count(*) FROM agent_memory.memories WHERE user_id LIKE 'bg-%' AND content = 'bg note b' AND active")"

# ALTER EXTENSION agent_memory UPDATE after distribute(): a database of its own on the same nodes,
# made at 0.11.0 (the first version with distribute(), reached through the update scripts from
# 0.1.0's install script, which is copied in for this only), distributed and given rows, then
# updated on the coordinator, which Citus repeats on every worker. So each update script since
# runs on a distributed cluster: every node ends at this version, every shard and every worker's
# table has the new columns and triggers, no row is lost, and this version's calls answer
# through the coordinator.
UP_DB=agent_memory_citus_update
UP_FROM=0.11.0
say "ALTER EXTENSION agent_memory UPDATE after distribute(), from $UP_FROM"
ext_dir="$(pg_config --sharedir)/extension"
as_root cp "$ROOT/sql/agent_memory--0.1.0.sql" "$ext_dir/"
made=yes
cluster_db "$UP_DB" "$UP_FROM" || made=no
as_root rm -f "$ext_dir/agent_memory--0.1.0.sql"
check "a database of $UP_FROM on every node" "yes $UP_FROM $UP_FROM $UP_FROM" \
  "$made $(ON_DB="$UP_DB" versions_on_nodes)"
up_psql() { ON_DB="$UP_DB" node_psql "$@"; }
# The rows as that version stored them, for 12 users (with SQL: this library serves its own
# version's calls only, and says so until the update).
up_psql 0 -tA >/dev/null <<'SQL'
SET client_min_messages = warning;
SELECT count(*) FROM agent_memory.distribute();
INSERT INTO agent_memory.embedding_models (name, dimensions) VALUES ('u3', 3);
SELECT pg_catalog.format($f$INSERT INTO agent_memory.turns (user_id, session_id, role, content) VALUES (%L, 's1', 'user', %L)$f$,
                         'up-' || i, 'turn ' || j || ' of user ' || i)
  FROM generate_series(1, 12) i, generate_series(1, 2) j \gexec
SELECT pg_catalog.format($f$INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model) VALUES (%L, %L, %L, 'u3')$f$,
                         'up-' || i, 'note ' || j || ' of user ' || i, pg_catalog.format('[%s,%s,1]', j, i))
  FROM generate_series(1, 12) i, generate_series(1, 3) j \gexec
SQL
rows_per_user="SELECT string_agg(t || ':' || user_id || ':' || n || ':' || h, ',' ORDER BY t, user_id)
                 FROM (SELECT 'm' t, user_id, count(*) n, md5(string_agg(content || emb::text, '|' ORDER BY id)) h FROM agent_memory.memories GROUP BY user_id
                       UNION ALL SELECT 't', user_id, count(*), md5(string_agg(content, '|' ORDER BY id)) FROM agent_memory.turns GROUP BY user_id) x"
before="$(up_psql 0 -tA -c "$rows_per_user")"
check "... distributed, with the users' turns and memories" "24 36" \
  "$(up_psql 0 -tA -c "SELECT count(*) FROM agent_memory.turns") $(up_psql 0 -tA -c "SELECT count(*) FROM agent_memory.memories")"
check "ALTER EXTENSION agent_memory UPDATE on the coordinator succeeds" "ok" \
  "$(up_psql 0 -tA -c "ALTER EXTENSION agent_memory UPDATE" 2>&1 && echo ok)"
check "... every node has this version" "$THIS_VERSION $THIS_VERSION $THIS_VERSION" "$(ON_DB="$UP_DB" versions_on_nodes)"
# The coordinator's table as this version's fresh install makes it (its columns, and how many of
# its triggers read emb_windows, of all of them), and the same of every shard and every worker's table.
shape="SELECT (SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute WHERE attrelid = 'REL'::regclass AND attnum > 0 AND NOT attisdropped)
              || ' ' || (SELECT count(*) FILTER (WHERE strpos(pg_get_triggerdef(oid), 'emb_windows') > 0) || '/' || count(*)
                           FROM pg_trigger WHERE tgrelid = 'REL'::regclass AND NOT tgisinternal)"
shape_of_table="${shape//REL/agent_memory.memories}"
shape_of_shard="${shape//REL/%1\$s}"
fresh="$(node_psql 0 -tA -c "$shape_of_table")"
check "... every shard of the memories has this version's columns and triggers" "$fresh" \
  "$(up_psql 0 -tA -c "SELECT string_agg(DISTINCT CASE WHEN success THEN result ELSE 'failed: ' || result END, '; ')
                         FROM run_command_on_shards('agent_memory.memories', \$c\$$shape_of_shard\$c\$)")"
check "... and so have the coordinator's and the workers' own tables" "$fresh|$fresh|$fresh" \
  "$(up_psql 0 -tA -c "$shape_of_table")|$(up_psql 0 -tA -c "SELECT string_agg(result, '|' ORDER BY nodeport)
       FROM run_command_on_workers(\$c\$$shape_of_table\$c\$)")"
check "... no row lost or changed (per user, memories and turns)" "$before" "$(up_psql 0 -tA -c "$rows_per_user")"
# The per-user calls stay delegated by their user (an update that made one anew would drop it
# from Citus's catalog): the same calls as a fresh install's distribute() delegates.
delegated="SELECT string_agg(p.oid::regprocedure::text, ' ' ORDER BY p.oid::regprocedure::text)
             FROM pg_dist_object o JOIN pg_proc p ON p.oid = o.objid
            WHERE o.classid = 'pg_proc'::regclass AND p.pronamespace = 'agent_memory'::regnamespace
              AND o.distribution_argument_index = 0 AND o.force_delegation"
check "... and every per-user call is delegated as after a fresh install's distribute()" "$(node_psql 0 -tA -c "$delegated")" \
  "$(up_psql 0 -tA -c "$delegated")"
check "... a memory written before is recalled through the coordinator" "note 2 of user 7" \
  "$(up_psql 0 -tA -c "SELECT content FROM agent_memory.memory_recall('up-7', '[2,7,1]'::vector, 1, model => 'u3', touch => false)")"
up_psql 0 -tA >/dev/null <<'SQL'
BEGIN;
SET LOCAL agent_memory.embed_windows = 4;
SELECT action FROM agent_memory.memory_reconcile('up-5', NULL, NULL, NULL,
       repeat('The allotment by the river grows beans, leeks and three kinds of squash every summer. ', 14)
       || repeat('The old sailing dinghy was sold to a fisherman in Galway for two hundred euros. ', 6));
COMMIT;
SQL
check "... a long memory written after it gets its windows on its worker, and they find its end" "1|The allotment by the" \
  "$(up_psql 0 -tA -c "SELECT count(*) FILTER (WHERE cardinality(emb_windows) >= 1) FROM agent_memory.memories WHERE user_id = 'up-5'" \
     -c "BEGIN" -c "SET LOCAL agent_memory.length_prior = 0" \
     -c "SELECT content FROM agent_memory.memory_recall('up-5', 'who bought the sailing dinghy?', 1, touch => false)" -c "COMMIT" | cut -c1-20 | paste -sd'|')"

# TRUNCATE of the memories through the coordinator empties every shard, and the packs with them:
# the pack trigger empties them from the coordinator's table (on each shard it does nothing; it
# used to truncate the distributed pack tables from there, and the truncation deadlocked).
packed="$(up_psql 0 -tA -c "SELECT agent_memory.memory_pack('up-7', 'u3')" 2>&1)"
check "a user packed" "yes" "$([ "${packed:-0}" -gt 0 ] 2>/dev/null && echo yes || echo "$packed")"
check "TRUNCATE agent_memory.memories through the coordinator empties the memories and the packs" "0 0 0 0" \
  "$(up_psql 0 -tA -c "TRUNCATE agent_memory.memories" \
       -c "SELECT count(*) FROM agent_memory.memories" -c "SELECT count(*) FROM agent_memory.memory_packs" \
       -c "SELECT count(*) FROM agent_memory.memory_pack_users" -c "SELECT count(*) FROM agent_memory.memory_pack_stale" 2>&1 | xargs)"
check "... and the users' calls go on" "ADD|note|1" \
  "$(up_psql 0 -tA -c "SELECT action FROM agent_memory.memory_reconcile('up-7', NULL, NULL, NULL, 'note', '[1,1,1]'::vector, model => 'u3')" \
       -c "SELECT content FROM agent_memory.memory_recall('up-7', '[1,1,1]'::vector, 1, model => 'u3', touch => false)" \
       -c "SELECT count(*) FROM agent_memory.memories" | paste -sd'|')"

echo "citus: $PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
