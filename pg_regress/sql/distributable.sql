-- The schema can be sharded by user (docs/scale-out.md), and what deletes rows leaves no
-- reference to them behind.
--
-- The tables that hold one user's rows: every table of the schema with a user_id column.
CREATE TEMP VIEW per_user AS
SELECT c.oid AS rel, c.relname
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'agent_memory' AND c.relkind = 'r'
   AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'user_id' AND NOT a.attisdropped);
SELECT relname FROM per_user ORDER BY 1;
-- No row-level policy of theirs holds a subquery (a sharded table cannot have one).
SELECT u.relname, p.polname, pg_get_expr(p.polqual, p.polrelid) AS using_expr
  FROM pg_policy p JOIN per_user u ON u.rel = p.polrelid
 WHERE p.polqual::text LIKE '%{SUBLINK%' OR p.polwithcheck::text LIKE '%{SUBLINK%';
-- Every tenant policy compares user_id with the session's user.
SELECT u.relname, pg_get_expr(p.polqual, p.polrelid) AS using_expr, pg_get_expr(p.polwithcheck, p.polrelid) AS check_expr
  FROM pg_policy p JOIN per_user u ON u.rel = p.polrelid WHERE p.polname = 'tenant' ORDER BY 1;
-- No foreign key over user_id sets it (or the rest of the key) to NULL or a default, or cascades
-- an update into it.
SELECT u.relname, c.conname, pg_get_constraintdef(c.oid)
  FROM pg_constraint c JOIN per_user u ON u.rel = c.conrelid
 WHERE c.contype = 'f'
   AND (SELECT a.attnum FROM pg_attribute a WHERE a.attrelid = c.conrelid AND a.attname = 'user_id') = ANY (c.conkey)
   AND (c.confdeltype IN ('n', 'd') OR c.confupdtype IN ('n', 'd', 'c'));
-- Every one has a primary key or a replica identity (a logical copy, a shard move, needs one).
SELECT u.relname, c.relreplident
  FROM per_user u JOIN pg_class c ON c.oid = u.rel
 WHERE c.relreplident = 'n'
    OR (c.relreplident = 'd' AND NOT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = u.rel AND i.indisprimary));
SELECT u.relname, c.relreplident FROM per_user u JOIN pg_class c ON c.oid = u.rel WHERE c.relreplident <> 'd' ORDER BY 1;
-- Every key and unique index holds user_id, and so does every foreign key between them (a key
-- into a shared table, such as the predicates, excepted).
SELECT u.relname, ic.relname AS index
  FROM pg_index i JOIN per_user u ON u.rel = i.indrelid JOIN pg_class ic ON ic.oid = i.indexrelid
 WHERE i.indisunique
   AND NOT (SELECT a.attnum FROM pg_attribute a WHERE a.attrelid = i.indrelid AND a.attname = 'user_id') = ANY (i.indkey::int2[]);
SELECT u.relname, c.conname
  FROM pg_constraint c JOIN per_user u ON u.rel = c.conrelid
 WHERE c.contype = 'f' AND c.confrelid IN (SELECT rel FROM per_user)
   AND NOT ((SELECT a.attnum FROM pg_attribute a WHERE a.attrelid = c.conrelid AND a.attname = 'user_id') = ANY (c.conkey)
            AND (SELECT a.attnum FROM pg_attribute a WHERE a.attrelid = c.confrelid AND a.attname = 'user_id') = ANY (c.confkey));

-- The keys between a user's rows take no action on delete; each path that deletes rows sets
-- the references to them to NULL itself.
--
-- 1. Forgetting's purge of old turns: a memory drawn from a purged turn keeps its content and
-- points to no turn; a memory drawn from a recent turn keeps it.
SELECT agent_memory.memory_record_turn('dora', 's1', 'user', 'I moved to Lisbon', created_at => now() - interval '40 days') AS old_turn \gset
SELECT agent_memory.memory_record_turn('dora', 's1', 'user', 'I ride a bike', created_at => now() - interval '1 day') AS new_turn \gset
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, source_turn_id)
VALUES ('dora', 'Lives in Lisbon', '[1,0,0]', 'f3', :old_turn), ('dora', 'Rides a bike', '[0,1,0]', 'f3', :new_turn);
SELECT step, rows >= 1 AS some FROM agent_memory.memory_forget() WHERE step = 'purge';
SELECT m.content, m.source_turn_id IS NULL AS no_turn, t.content AS turn
  FROM agent_memory.memories m LEFT JOIN agent_memory.turns t ON t.user_id = m.user_id AND t.id = m.source_turn_id
 WHERE m.user_id = 'dora' ORDER BY 1;
SELECT count(*) AS dora_turns FROM agent_memory.turns WHERE user_id = 'dora';

-- 2. The purge of memories retired past the regret window: the memories a purged one
-- superseded (retired lately, still in the window) point to nothing; the evidence of a
-- purged summary too, and it is purged in a later pass.
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, active, retired_reason, retired_at)
VALUES ('dora', 'Drinks tea', '[0,0,1]', 'f3', false, 'superseded', now() - interval '40 days'),
       ('dora', 'Summary of May', '[0,0,1]', 'f3', false, 'superseded', now() - interval '40 days');
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, active, retired_reason, retired_at, superseded_by)
SELECT 'dora', 'Drank coffee', '[0,0,1]', 'f3', false, 'superseded', now() - interval '1 day', id
  FROM agent_memory.memories WHERE user_id = 'dora' AND content = 'Drinks tea';
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, active, retired_reason, retired_at, superseded_by)
SELECT 'dora', 'Drank milk', '[0,0,1]', 'f3', false, 'superseded', now() - interval '2 days', id
  FROM agent_memory.memories WHERE user_id = 'dora' AND content = 'Drank coffee';
INSERT INTO agent_memory.memories (user_id, kind, content, emb, embedding_model, active, retired_reason, retired_at, superseded_by)
SELECT 'dora', 'episodic', 'Went to the beach in May', '[0,0,1]', 'f3', false, 'summarized', now() - interval '40 days', id
  FROM agent_memory.memories WHERE user_id = 'dora' AND content = 'Summary of May';
SELECT step, rows >= 1 AS some FROM agent_memory.memory_forget() WHERE step = 'purge';
SELECT m.content, m.active, m.retired_reason, s.content AS superseded_by
  FROM agent_memory.memories m LEFT JOIN agent_memory.memories s ON s.user_id = m.user_id AND s.id = m.superseded_by
 WHERE m.user_id = 'dora' ORDER BY 1;
SELECT step, rows >= 1 AS some FROM agent_memory.memory_forget() WHERE step = 'purge';
SELECT content FROM agent_memory.memories WHERE user_id = 'dora' ORDER BY 1;

-- 3. Deleting a task: its children lose their parent and stay; its grandchildren keep theirs.
-- Deleting a parent and its child in one statement deletes both.
INSERT INTO agent_memory.tasks (user_id, task_id, parent_task_id) VALUES ('dora', 'trip', NULL);
INSERT INTO agent_memory.tasks (user_id, task_id, parent_task_id)
VALUES ('dora', 'flights', 'trip'), ('dora', 'hotel', 'trip'), ('eli', 'trip', NULL), ('eli', 'flights', 'trip');
INSERT INTO agent_memory.tasks (user_id, task_id, parent_task_id) VALUES ('dora', 'seat', 'flights');
DELETE FROM agent_memory.tasks WHERE user_id = 'dora' AND task_id = 'trip';
SELECT user_id, task_id, parent_task_id FROM agent_memory.tasks WHERE user_id IN ('dora', 'eli') ORDER BY 1, 2;
DELETE FROM agent_memory.tasks WHERE user_id = 'eli';
SELECT count(*) AS eli_tasks FROM agent_memory.tasks WHERE user_id = 'eli';
-- A task whose parent does not exist is refused when the transaction commits.
INSERT INTO agent_memory.tasks (user_id, task_id, parent_task_id) VALUES ('dora', 'visa', 'no such task');

-- 4. Erasure: every row of the user goes, references and all, and no other user's.
SELECT agent_memory.memory_record_turn('eli', 's1', 'user', 'I sail') AS eli_turn \gset
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, source_turn_id) VALUES ('eli', 'Sails', '[1,0,0]', 'f3', :eli_turn);
SELECT memories, turns, tasks FROM agent_memory.memory_erase('dora');
SELECT (SELECT count(*) FROM agent_memory.memories WHERE user_id = 'dora') AS memories,
       (SELECT count(*) FROM agent_memory.turns WHERE user_id = 'dora') AS turns,
       (SELECT count(*) FROM agent_memory.tasks WHERE user_id = 'dora') AS tasks;
SELECT m.content, t.content AS turn FROM agent_memory.memories m JOIN agent_memory.turns t ON t.user_id = m.user_id AND t.id = m.source_turn_id
 WHERE m.user_id = 'eli';

-- No memory anywhere points to a memory or a turn that is gone.
SELECT count(*) AS dangling FROM agent_memory.memories m
 WHERE (m.superseded_by IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM agent_memory.memories s WHERE s.user_id = m.user_id AND s.id = m.superseded_by))
    OR (m.source_turn_id IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM agent_memory.turns t WHERE t.user_id = m.user_id AND t.id = m.source_turn_id));

-- The policies call agent_memory.session_user_id() on each row; it keeps its answer only while
-- the role, agent_memory.user_id and the snapshot stay the same. Within one transaction, a new
-- setting, a new role and a new binding are each seen by the next statement.
CREATE ROLE dist_app;
CREATE ROLE dist_other;
SELECT agent_memory.grant_access('dist_app', 'writer');
SELECT agent_memory.grant_access('dist_other', 'writer');
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model)
VALUES ('acme:ann', 'Ann likes jazz', '[1,0,0]', 'f3'), ('acme:bob', 'Bob likes rock', '[0,1,0]', 'f3'),
       ('beta:cy', 'Cy likes folk', '[0,0,1]', 'f3');
BEGIN;
SET LOCAL ROLE dist_app;
SET LOCAL agent_memory.user_id = 'acme:ann';
SELECT agent_memory.session_user_id(), array_agg(content) FROM agent_memory.memories;
SET LOCAL agent_memory.user_id = 'acme:bob';
SELECT agent_memory.session_user_id(), array_agg(content) FROM agent_memory.memories;
RESET ROLE;
SELECT agent_memory.bind_role('dist_app', 'beta:%');
SET LOCAL ROLE dist_app;
-- Bound to beta:%, the role may no longer name acme:bob.
SELECT agent_memory.session_user_id(), array_agg(content) FROM agent_memory.memories;
SET LOCAL agent_memory.user_id = 'beta:cy';
SELECT agent_memory.session_user_id(), array_agg(content) FROM agent_memory.memories;
-- Another role, unbound, with the same setting.
SET LOCAL ROLE dist_other;
SELECT agent_memory.session_user_id(), array_agg(content) FROM agent_memory.memories;
-- A write checks the same rule: the bound role cannot add a row of a user it may not name.
SET LOCAL ROLE dist_app;
SET LOCAL agent_memory.user_id = 'acme:ann';
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model) VALUES ('acme:ann', 'Ann likes blues', '[1,0,0]', 'f3');
ROLLBACK;
-- A binding rolled back to a savepoint is gone for the next statement.
BEGIN;
SET LOCAL agent_memory.user_id = 'acme:ann';
SAVEPOINT before_binding;
SELECT agent_memory.bind_role('dist_app', 'beta:%') IS NOT NULL AS bound;
SET LOCAL ROLE dist_app;
SELECT agent_memory.session_user_id(), array_agg(content) FROM agent_memory.memories;
ROLLBACK TO before_binding;
SET LOCAL ROLE dist_app;
SELECT agent_memory.session_user_id(), array_agg(content) FROM agent_memory.memories;
ROLLBACK;
-- An unbinding committed by another transaction is seen by the next statement.
SELECT agent_memory.bind_role('dist_app', 'beta:%');
SET ROLE dist_app;
SET agent_memory.user_id = 'acme:ann';
SELECT array_agg(content) FROM agent_memory.memories;
RESET ROLE;
SELECT agent_memory.unbind_role('dist_app');
SET ROLE dist_app;
SELECT array_agg(content) FROM agent_memory.memories;
RESET ROLE;
RESET agent_memory.user_id;
DELETE FROM agent_memory.memories WHERE user_id IN ('acme:ann', 'acme:bob', 'beta:cy');
SELECT agent_memory.revoke_access('dist_app'), agent_memory.revoke_access('dist_other');
DROP ROLE dist_app;
DROP ROLE dist_other;

-- agent_memory.distribute() spreads the users over a Citus cluster: on a server without Citus it
-- refuses (0A000) with what to set up, and changes nothing.
SELECT * FROM agent_memory.distribute();
\echo :LAST_ERROR_SQLSTATE
-- A writer may not call it.
CREATE ROLE dist_writer;
SELECT agent_memory.grant_access('dist_writer', 'writer');
SET ROLE dist_writer;
SELECT * FROM agent_memory.distribute();
\echo :LAST_ERROR_SQLSTATE
-- nor read every node's runs, nor make calls on the workers.
SELECT count(*) FROM agent_memory.cluster_runs();
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.on_workers('pg_catalog.now()');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT agent_memory.revoke_access('dist_writer');
DROP ROLE dist_writer;

-- cluster_runs() on one server: its own last runs (the passes of the tests before), as node local.
SELECT (SELECT count(*) FROM agent_memory.cluster_runs()) = (SELECT count(*) FROM agent_memory.last_runs) AS same_runs,
       (SELECT count(*) FROM agent_memory.cluster_runs()) > 0 AS some_runs,
       (SELECT bool_and(node = 'local') FROM agent_memory.cluster_runs()) AS all_local;

-- TRUNCATE of the memories empties the packs with them (on a Citus cluster, from the
-- coordinator's table: the same trigger on each shard does nothing).
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model)
SELECT 'trunc-user', 'Note ' || i, pg_catalog.format('[%s,1,0]', i)::vector, 'f3' FROM generate_series(1, 3) i;
SELECT agent_memory.memory_pack('trunc-user', 'f3') > 0 AS packed;
SELECT (SELECT count(*) FROM agent_memory.memory_packs) > 0 AS packs, (SELECT count(*) FROM agent_memory.memory_pack_users) > 0 AS pack_users;
TRUNCATE agent_memory.memories;
SELECT (SELECT count(*) FROM agent_memory.memories) AS memories, (SELECT count(*) FROM agent_memory.memory_packs) AS packs,
       (SELECT count(*) FROM agent_memory.memory_pack_users) AS pack_users, (SELECT count(*) FROM agent_memory.memory_pack_stale) AS stale;
