#!/usr/bin/env bash
# The upgrade path, as an operator takes it, from the oldest shipped version (0.1.0):
#   1. a server runs 0.1.0's library (built from its commit) and 0.1.0's schema, and its API
#      writes data of every kind: facts and their chains, a deletion, a batch, turns, episodes,
#      touches, runs of both passes;
#   2. the server restarts on this library: before the update, every function refuses with
#      55000 and a hint, and the worker idles and says why;
#   3. ALTER EXTENSION agent_memory UPDATE: the catalog equals a fresh install's (tests/catalog.sql),
#      every row is kept, and recall, reconcile, both passes and the worker work.
# In a clone without 0.1.0's commit (a shallow clone), step 1 writes the same kinds of data into
# 0.1.0's tables with SQL under this library instead, and the rest is the same.
# Usage: tests/upgrade.sh (after scripts/test.sh has installed this library).
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

OLD_VERSION=0.1.0
OLD_COMMIT=0182cdf    # the commit 0.1.0 shipped from (tag v0.1.0)
# AGENT_MEMORY_UPGRADE_SQL_ONLY=1 takes the path of a clone without that commit (see below).
[ -n "${AGENT_MEMORY_UPGRADE_SQL_ONLY:-}" ] && OLD_COMMIT=0000000
NEW_VERSION="$(sed -nE 's/^version = "([^"]+)"/\1/p' "$ROOT/Cargo.toml" | head -1)"
PORT="${AGENT_MEMORY_UPGRADE_PORT:-28840}"
DB=agent_memory_upgrade
FRESH=agent_memory_fresh
BIN="$(pg_bindir)"
DATA="$(server_dir upgrade)/data"
SOCK="$(server_dir upgrade-socket)"
OLD_LIB="$(server_dir upgrade-lib)"
EXT_DIR="$(pg_config --sharedir)/extension"
WORK="$ROOT/target/agent_memory/upgrade"

psql_db() { "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$SOCK" -p "$PORT" -U postgres -d "$1" "${@:2}"; }
q() { psql_db "$DB" -tA -c "$1"; }
sqlstate() {  # the SQLSTATE a statement fails with (empty when it succeeds)
  psql_db "$DB" -v ON_ERROR_STOP=0 -tA -c "$1" -c '\echo :LAST_ERROR_SQLSTATE' 2>/dev/null | tail -1 | sed 's/^00000$//'
}
cleanup() {
  stop_server "$DATA"
  # 0.1.0's files are the test's only: an operator's server never offers that version.
  as_root rm -f "$EXT_DIR/agent_memory--$OLD_VERSION.sql" "$EXT_DIR/agent_memory--$OLD_VERSION.control"
}
trap cleanup EXIT

# With the repository's history, 0.1.0's own library writes the data through 0.1.0's API. In a
# clone without it (a shallow clone), the data goes into 0.1.0's tables with SQL instead, under
# this library, and the rest of the tier is the same.
mkdir -p "$WORK"
if git -C "$ROOT" cat-file -e "$OLD_COMMIT^{commit}" 2>/dev/null; then
  MODE=api
else
  MODE=sql
  printf '\033[33m    commit %s (%s) is not in this clone (shallow?): %s data is written with SQL, not by its own library (git fetch --unshallow for the full tier)\033[0m\n' \
    "$OLD_COMMIT" "$OLD_VERSION" "$OLD_VERSION"
fi
if [ "$MODE" = api ]; then
say "Upgrade: building $OLD_VERSION's library from commit $OLD_COMMIT"
rm -rf "$WORK/src" "$WORK/package" && mkdir -p "$WORK/src"
git -C "$ROOT" archive "$OLD_COMMIT" | tar -x -C "$WORK/src"
( cd "$WORK/src" && CARGO_TARGET_DIR="$WORK/target" cargo pgrx package --no-default-features --features "pg$(pg_major)" \
    --pg-config "$(command -v pg_config)" --out-dir "$WORK/package" ) >"$WORK/build.log" 2>&1 \
  || { tail -n 30 "$WORK/build.log" >&2; die "building $OLD_VERSION failed (log: $WORK/build.log)"; }
old_so="$(find "$WORK/package" -name agent_memory.so | head -1)"
old_sql="$(find "$WORK/package" -name "agent_memory--$OLD_VERSION.sql" | head -1)"
as_root cp "$old_so" "$OLD_LIB/agent_memory.so"
check "the frozen sql/agent_memory--$OLD_VERSION.sql is what $OLD_VERSION generates" "same" \
  "$(diff <(grep -v '^-- ' "$old_sql") <(grep -v '^-- ' "$ROOT/sql/agent_memory--$OLD_VERSION.sql") >/dev/null && echo same || echo different)"
# A control file of that version whose functions load the library by name, so the server finds
# 0.1.0's library first on its dynamic_library_path.
echo "module_pathname = 'agent_memory'" | as_root tee "$EXT_DIR/agent_memory--$OLD_VERSION.control" >/dev/null
OLD_SETTINGS=("dynamic_library_path = '$OLD_LIB:\$libdir'")
else
OLD_SETTINGS=()
fi
# 0.1.0's install script.
as_root cp "$ROOT/sql/agent_memory--$OLD_VERSION.sql" "$EXT_DIR/agent_memory--$OLD_VERSION.sql"

say "Upgrade: $OLD_VERSION's server, schema and data"
stop_server "$DATA"
as_root rm -rf "$DATA"
# (0.1.0's worker runs in the database too, on its default schedule: not during this test.)
start_server "$DATA" "$SOCK" "$PORT" "log_min_messages = warning" ${OLD_SETTINGS[@]+"${OLD_SETTINGS[@]}"} \
  "agent_memory.worker_databases = '$DB'"
psql_db postgres -c "CREATE DATABASE $DB" -c "CREATE DATABASE $FRESH"
psql_db "$DB" <<SQL
SET client_min_messages = warning;
CREATE EXTENSION vector;
CREATE EXTENSION agent_memory VERSION '$OLD_VERSION';
SQL
check "the installed version" "$OLD_VERSION" "$(q "SELECT extversion FROM pg_extension WHERE extname = 'agent_memory'")"
if [ "$MODE" = api ]; then
psql_db "$DB" >/dev/null <<'SQL'
SET client_min_messages = warning;
-- Facts with a chain: an editor changed twice; a deletion; a protected fact.
SELECT action FROM agent_memory.memory_reconcile('ann', 'ann', 'editor', 'vim', 'Ann uses vim', '[1,0,0,0]', model => 'm4');
SELECT action FROM agent_memory.memory_reconcile('ann', 'ann', 'editor', 'emacs', 'Ann uses emacs', '[0.9,0.1,0,0]', model => 'm4');
SELECT action FROM agent_memory.memory_reconcile('ann', 'ann', 'editor', 'neovim', 'Ann uses neovim', '[0.8,0.2,0,0]', model => 'm4');
SELECT action FROM agent_memory.memory_reconcile('ann', 'ann', 'lives_in', 'Oslo', 'Ann lives in Oslo', '[0,1,0,0]', model => 'm4');
SELECT action FROM agent_memory.memory_reconcile('ann', 'ann', 'lives_in', 'Oslo', 'Ann lives in Oslo', '[0,1,0,0]', model => 'm4', negate => true);
SELECT action FROM agent_memory.memory_reconcile('ann', 'ann', 'time_zone', 'CET', 'Ann is in CET', '[0,0,1,0]', model => 'm4', protected => true);
-- A fact under an alias, and one of a predicate 0.2.0 makes many-valued.
SELECT action FROM agent_memory.memory_reconcile('ann', 'ann', 'works_at', 'Acme', 'Ann works at Acme', '[0,0,0.5,0.5]', model => 'm4');
SELECT action FROM agent_memory.memory_reconcile('ann', 'ann', 'likes', 'Tea', 'Ann likes tea', '[0.3,0.3,0.3,0.1]', model => 'm4');
-- A batch for another user.
SELECT count(*) FROM agent_memory.memory_reconcile_batch('bob', '[
  {"subject": "bob", "predicate": "editor", "object": "helix", "content": "Bob uses helix", "emb": [1, 1, 0, 0]},
  {"content": "Bob went hiking on Sunday", "emb": [0, 1, 1, 0], "kind": "episodic"},
  {"content": "Bob prefers short answers", "emb": [0, 0, 1, 1]}]'::jsonb, model => 'm4');
-- Turns, one of them linked from a fact.
SELECT agent_memory.memory_record_turn('ann', 's1', 'user', 'I switched to neovim last week');
SELECT agent_memory.memory_record_turn('ann', 's1', 'assistant', 'Noted.');
SELECT action FROM agent_memory.memory_reconcile('ann', 'ann', 'os', 'linux', 'Ann runs linux', '[0,0,0,1]', model => 'm4',
                                                 source_turn_id => (SELECT max(id) FROM agent_memory.turns));
-- Old episodes, so consolidation summarises; then recall touches, and both passes run.
INSERT INTO agent_memory.memories (user_id, kind, content, emb, embedding_model, created_at, last_hit_at)
SELECT 'carol', 'episodic', 'Carol did thing ' || i, ARRAY[1, i, i % 5, 1]::real[]::vector, 'm4',
       now() - interval '60 days', now() - interval '60 days'
  FROM generate_series(1, 40) i;
SELECT count(*) FROM agent_memory.memory_recall('ann', '[1,0,0,0]', 3, model => 'm4');
SELECT count(*) FROM agent_memory.memory_forget();
SELECT count(*) FROM agent_memory.memory_consolidate();
SQL
else
psql_db "$DB" >/dev/null <<'SQL'
SET client_min_messages = warning;
-- The same kinds of data as 0.1.0's API writes, in 0.1.0's tables (its write trigger runs; with
-- importance given it needs nothing of the library but memory_retention, which is unchanged).
INSERT INTO agent_memory.turns (user_id, session_id, role, content)
VALUES ('ann', 's1', 'user', 'I switched to neovim last week'), ('ann', 's1', 'assistant', 'Noted.');
-- The chain: vim and emacs retired, each superseded by the next editor (set below); Oslo deleted.
INSERT INTO agent_memory.memories (user_id, kind, subject, predicate, object, content, emb, embedding_model, importance, active, retired_reason, retired_at)
VALUES ('ann', 'semantic', 'ann', 'editor', 'vim', 'Ann uses vim', '[1,0,0,0]', 'm4', 0.5, false, 'superseded', now()),
       ('ann', 'semantic', 'ann', 'editor', 'emacs', 'Ann uses emacs', '[0.9,0.1,0,0]', 'm4', 0.5, false, 'superseded', now());
INSERT INTO agent_memory.memories (user_id, kind, subject, predicate, object, content, emb, embedding_model, importance, protected, source_turn_id)
VALUES ('ann', 'semantic', 'ann', 'editor', 'neovim', 'Ann uses neovim', '[0.8,0.2,0,0]', 'm4', 0.5, false, NULL),
       ('ann', 'semantic', 'ann', 'lives_in', 'Oslo', 'Ann lives in Oslo', '[0,1,0,0]', 'm4', 0.5, false, NULL),
       ('ann', 'semantic', 'ann', 'time_zone', 'CET', 'Ann is in CET', '[0,0,1,0]', 'm4', 0.9, true, NULL),
       ('ann', 'semantic', 'ann', 'works_at', 'Acme', 'Ann works at Acme', '[0,0,0.5,0.5]', 'm4', 0.5, false, NULL),
       ('ann', 'semantic', 'ann', 'likes', 'Tea', 'Ann likes tea', '[0.3,0.3,0.3,0.1]', 'm4', 0.5, false, NULL),
       ('ann', 'semantic', 'ann', 'os', 'linux', 'Ann runs linux', '[0,0,0,1]', 'm4', 0.5, false,
        (SELECT max(id) FROM agent_memory.turns)),
       ('bob', 'semantic', 'bob', 'editor', 'helix', 'Bob uses helix', '[1,1,0,0]', 'm4', 0.5, false, NULL),
       ('bob', 'episodic', NULL, NULL, NULL, 'Bob went hiking on Sunday', '[0,1,1,0]', 'm4', 0.5, false, NULL),
       ('bob', 'semantic', NULL, NULL, NULL, 'Bob prefers short answers', '[0,0,1,1]', 'm4', 0.5, false, NULL);
UPDATE agent_memory.memories o
   SET superseded_by = (SELECT n.id FROM agent_memory.memories n WHERE n.subject = 'ann' AND n.predicate = 'editor' AND n.id > o.id ORDER BY n.id LIMIT 1)
 WHERE o.subject = 'ann' AND o.predicate = 'editor' AND o.object IN ('vim', 'emacs');
UPDATE agent_memory.memories SET active = false, retired_reason = 'deleted', retired_at = now() WHERE object = 'Oslo';
-- Old episodes and a summary of some of them, kept as its evidence.
INSERT INTO agent_memory.memories (user_id, kind, content, emb, embedding_model, importance, created_at, last_hit_at)
SELECT 'carol', 'episodic', 'Carol did thing ' || i, ARRAY[1, i, i % 5, 1]::real[]::vector, 'm4', 0.5,
       now() - interval '60 days', now() - interval '60 days'
  FROM generate_series(1, 40) i;
INSERT INTO agent_memory.memories (user_id, kind, content, emb, embedding_model, importance, source)
VALUES ('carol', 'semantic', 'Carol did things 1 to 5', '[1,3,3,1]', 'm4', 0.6, 'consolidation');
UPDATE agent_memory.memories e
   SET active = false, retired_reason = 'summarized', retired_at = now(),
       superseded_by = (SELECT max(id) FROM agent_memory.memories WHERE source = 'consolidation')
 WHERE e.content IN ('Carol did thing 1', 'Carol did thing 2', 'Carol did thing 3', 'Carol did thing 4', 'Carol did thing 5');
UPDATE agent_memory.memories SET hit_count = 2, last_hit_at = now() WHERE object = 'neovim';
INSERT INTO agent_memory.runs (job, status, finished_at, steps) VALUES ('forget', 'succeeded', now(), '{"expire": 0}'),
                                                                       ('consolidate', 'succeeded', now(), '{"summarize": 5}');
INSERT INTO agent_memory.maintenance_state (name, done_at) VALUES ('hit_halving', now());
SQL
fi
# What 0.1.0 stored, in 0.1.0's columns, to compare after the update.
ROWS_SQL="SELECT md5(string_agg(concat_ws('|', id, user_id, kind, subject, object, content, emb::text, embedding_model,
                 importance, protected, source, source_turn_id, active, retired_reason, retired_at, superseded_by,
                 version, valid_until, expires_at, created_at, hit_count, archived_at, metadata), ';' ORDER BY id))
            FROM agent_memory.memories"
TURNS_SQL="SELECT md5(string_agg(concat_ws('|', id, user_id, session_id, role, content, created_at, metadata), ';' ORDER BY id)) FROM agent_memory.turns"
RECALL_SQL="SELECT string_agg(id::text, ',' ORDER BY score DESC, id) FROM agent_memory.memory_recall('ann', '[1,0.1,0,0]', 5, model => 'm4', decay => 'none', touch => false)"
COUNTS_SQL="SELECT (SELECT count(*) FROM agent_memory.memories) || ' ' || (SELECT count(*) FROM agent_memory.turns) || ' ' ||
                   (SELECT count(*) FROM agent_memory.runs) || ' ' || (SELECT count(*) FROM agent_memory.embedding_models WHERE name <> 'all-MiniLM-L6-v2') || ' ' ||
                   (SELECT count(*) FROM agent_memory.maintenance_state)"
before_counts="$(q "$COUNTS_SQL")"
before_turns="$(q "$TURNS_SQL")"
before_recall=""
[ "$MODE" = api ] && before_recall="$(q "$RECALL_SQL")"
before_chain="$(q "SELECT string_agg(object || ':' || active || ':' || coalesce(retired_reason, '-'), ',' ORDER BY id) FROM agent_memory.memories WHERE subject = 'ann' AND predicate = 'editor'")"
check "0.1.0 wrote a chain of three editors" "vim:false:superseded,emacs:false:superseded,neovim:true:-" "$before_chain"
check "0.1.0's passes ran" "t" "$(q "SELECT count(DISTINCT job) = 2 AND bool_and(status <> 'failed') FROM agent_memory.runs")"
check "0.1.0's consolidation summarised" "t" "$(q "SELECT count(*) > 0 FROM agent_memory.memories WHERE retired_reason = 'summarized'")"

say "Upgrade: the server restarts on the $NEW_VERSION library"
stop_server "$DATA"
# The test's settings without 0.1.0's library path: the installed library from now on.
start_server "$DATA" "$SOCK" "$PORT" "log_min_messages = warning" \
  "agent_memory.worker_databases = '$DB'" "agent_memory.forget_interval = '1s'" "agent_memory.consolidate_interval = '1s'"
before_rows="$(q "$ROWS_SQL")"
check "recall before the update: 55000" "55000" \
  "$(sqlstate "SELECT * FROM agent_memory.memory_recall('ann', '[1,0,0,0]', 3, model => 'm4')")"
check "reconcile before the update: 55000" "55000" \
  "$(sqlstate "SELECT * FROM agent_memory.memory_reconcile('ann', 'ann', 'editor', 'ed', 'Ann uses ed', '[1,0,0,0]', model => 'm4')")"
check "a batch before the update: 55000" "55000" \
  "$(sqlstate "SELECT * FROM agent_memory.memory_reconcile_batch('ann', '[]'::jsonb)")"
check "forgetting before the update: 55000" "55000" "$(sqlstate "SELECT * FROM agent_memory.memory_forget()")"
check "the error's hint names the update" "1" \
  "$(psql_db "$DB" -v ON_ERROR_STOP=0 -c "SELECT * FROM agent_memory.memory_forget()" 2>&1 | grep -c 'HINT:  Run ALTER EXTENSION agent_memory UPDATE')"
for _ in $(seq 1 50); do grep -q "is idle: the agent_memory schema" "$DATA/server.log" && break; sleep 0.2; done
check "the worker idles and says why" "t" \
  "$([ "$(grep -c "worker in database $DB is idle: the agent_memory schema of this database is version $OLD_VERSION" "$DATA/server.log")" -ge 1 ] && echo t)"
runs_idle="$(q "SELECT count(*) FROM agent_memory.runs")"
sleep 2
check "the idle worker runs nothing" "$runs_idle" "$(q "SELECT count(*) FROM agent_memory.runs")"
check "nothing changed before the update" "$before_rows" "$(q "$ROWS_SQL")"
# The worker's passes wait until the data is compared.
psql_db "$DB" -c "ALTER SYSTEM SET agent_memory.workers_enabled = off" -c "SELECT pg_reload_conf()" >/dev/null

say "Upgrade: ALTER EXTENSION agent_memory UPDATE"
psql_db "$DB" -c "ALTER EXTENSION agent_memory UPDATE"
check "the installed version" "$NEW_VERSION" "$(q "SELECT extversion FROM pg_extension WHERE extname = 'agent_memory'")"
psql_db "$FRESH" -c "SET client_min_messages = warning" -c "CREATE EXTENSION agent_memory CASCADE"
psql_db "$DB" -f "$ROOT/tests/catalog.sql" >"$WORK/catalog-updated.txt"
psql_db "$FRESH" -f "$ROOT/tests/catalog.sql" >"$WORK/catalog-fresh.txt"
if diff -u "$WORK/catalog-fresh.txt" "$WORK/catalog-updated.txt" >"$WORK/catalog.diff"; then
  check "the catalog equals a fresh install's ($(wc -l <"$WORK/catalog-fresh.txt") facts)" same same
else
  head -n 80 "$WORK/catalog.diff"
  check "the catalog equals a fresh install's" same "different (diff above; $WORK/catalog.diff)"
fi

say "Upgrade: the data"
check "every row is kept (memories, turns, runs, models, maintenance)" "$before_counts" "$(q "$COUNTS_SQL")"
check "the text model is registered, with its folder" "384 all-MiniLM-L6-v2 true" \
  "$(q "SELECT dimensions || ' ' || folder || ' ' || seeded FROM agent_memory.embedding_models WHERE name = 'all-MiniLM-L6-v2'")"
check "every memory is as it was, in 0.1.0's columns" "$before_rows" "$(q "$ROWS_SQL")"
check "the turns are unchanged" "$before_turns" "$(q "$TURNS_SQL")"
check "the chain is unchanged" "$before_chain" \
  "$(q "SELECT string_agg(object || ':' || active || ':' || coalesce(retired_reason, '-'), ',' ORDER BY id) FROM agent_memory.memories WHERE subject = 'ann' AND predicate = 'editor'")"
check "the alias is written as its predicate" "employer" "$(q "SELECT predicate FROM agent_memory.memories WHERE object = 'Acme'")"
check "a many-valued fact has its key" "tea" "$(q "SELECT object_key FROM agent_memory.memories WHERE object = 'Tea'")"
if [ "$MODE" = api ]; then
  check "recall ranks as before" "$before_recall" "$(q "$RECALL_SQL")"
else
  check "recall returns k rows" "5" "$(q "$RECALL_SQL" | tr ',' '\n' | wc -l)"
fi
check "reconcile supersedes a 0.1.0 fact" "UPDATE" \
  "$(q "SELECT action FROM agent_memory.memory_reconcile('ann', 'ann', 'editor', 'helix', 'Ann uses helix', '[0.7,0.3,0,0]', model => 'm4')")"
check "a second value of a many-valued predicate is its own fact" "ADD" \
  "$(q "SELECT action FROM agent_memory.memory_reconcile('ann', 'ann', 'likes', 'coffee', 'Ann likes coffee', '[0.3,0.3,0.1,0.3]', model => 'm4')")"
check "restating a 0.1.0 value changes nothing" "NONE" \
  "$(q "SELECT action FROM agent_memory.memory_reconcile('ann', 'ann', 'likes', 'tea', 'Ann likes tea', '[0.3,0.3,0.3,0.1]', model => 'm4')")"
check "a 0.1.0 alias fact is found by its predicate" "UPDATE" \
  "$(q "SELECT action FROM agent_memory.memory_reconcile('ann', 'ann', 'employer', 'Initech', 'Ann works at Initech', '[0,0,0.6,0.4]', model => 'm4')")"
check "a new turn" "t" "$(q "SELECT agent_memory.memory_record_turn('ann', 's2', 'user', 'hello again', task_id => 't1') > 0")"
check "hybrid recall finds the new fact" "Ann uses helix" \
  "$(q "SELECT content FROM agent_memory.memory_recall('ann', '[0.7,0.3,0,0]', 1, model => 'm4', query_text => 'helix', touch => false)")"
check "forgetting runs" "expire,age_hits,evict,purge" "$(q "SELECT string_agg(step, ',') FROM agent_memory.memory_forget()")"
check "consolidation runs" "t" "$(q "SELECT count(*) > 0 FROM agent_memory.memory_consolidate()")"
psql_db "$DB" -c "ALTER SYSTEM RESET agent_memory.workers_enabled" -c "SELECT pg_reload_conf()" >/dev/null
for _ in $(seq 1 50); do grep -q "is now version $NEW_VERSION; the worker resumes" "$DATA/server.log" && break; sleep 0.2; done
check "the worker resumes" "1" "$(grep -c "schema in database $DB is now version $NEW_VERSION; the worker resumes" "$DATA/server.log")"
check "the worker's runs succeed" "t" \
  "$(for _ in $(seq 1 50); do r="$(q "SELECT count(*) > 0 FROM agent_memory.runs WHERE by_worker AND status = 'succeeded' AND id > $runs_idle")"; [ "$r" = t ] && break; sleep 0.2; done; echo "$r")"

say "Upgrade: grants of re-created functions"
# The previous version, a role granted recall directly, then the update: an update that re-creates
# recall and context keeps the grants (the last step; the chain from 0.1.0 is the test above).
PREV_VERSION="$(ls "$ROOT"/sql/agent_memory--*--"$NEW_VERSION".sql | sed -E 's/.*agent_memory--([^-]+)--.*/\1/')"
psql_db postgres -c "CREATE DATABASE ${DB}_grants" -c "CREATE ROLE upgrade_recaller NOLOGIN" \
  -c "CREATE ROLE \"upgrade, recall only\" NOLOGIN" >/dev/null
psql_db "${DB}_grants" >/dev/null <<SQL
SET client_min_messages = warning;
CREATE EXTENSION agent_memory VERSION '$PREV_VERSION' CASCADE;
DO \$\$ DECLARE f regprocedure; BEGIN
  FOR f IN SELECT oid::regprocedure FROM pg_proc WHERE proname IN ('memory_recall', 'memory_context')
                                                   AND pronamespace = 'agent_memory'::regnamespace
  LOOP EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO upgrade_recaller', f); END LOOP; END \$\$;
DO \$\$ DECLARE f regprocedure; BEGIN
  FOR f IN SELECT oid::regprocedure FROM pg_proc WHERE proname = 'memory_recall' AND pronamespace = 'agent_memory'::regnamespace
  LOOP EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO "upgrade, recall only"', f); END LOOP; END \$\$;
ALTER EXTENSION agent_memory UPDATE;
SQL
check "a role granted recall and context before the update ($PREV_VERSION) may call each after it, and PUBLIC none" "6 6 0" \
  "$(psql_db "${DB}_grants" -tA -c "SELECT count(*) FILTER (WHERE has_function_privilege('upgrade_recaller', oid, 'EXECUTE')) || ' ' || count(*) || ' '
       || count(*) FILTER (WHERE has_function_privilege('public', oid, 'EXECUTE'))
     FROM pg_proc WHERE proname IN ('memory_recall', 'memory_context') AND pronamespace = 'agent_memory'::regnamespace")"
check "a role granted recall alone (its name quoted) may call recall after the update, and not context" "3 0" \
  "$(psql_db "${DB}_grants" -tA -c "SELECT count(*) FILTER (WHERE proname = 'memory_recall' AND has_function_privilege('upgrade, recall only', oid, 'EXECUTE'))
       || ' ' || count(*) FILTER (WHERE proname = 'memory_context' AND has_function_privilege('upgrade, recall only', oid, 'EXECUTE'))
     FROM pg_proc WHERE proname IN ('memory_recall', 'memory_context') AND pronamespace = 'agent_memory'::regnamespace")"
psql_db postgres -c "DROP DATABASE ${DB}_grants" -c "DROP ROLE upgrade_recaller" -c "DROP ROLE \"upgrade, recall only\"" >/dev/null

echo "upgrade ($OLD_VERSION's data written by $([ "$MODE" = api ] && echo "its own library" || echo SQL)): $PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
