-- Tenancy: the database keeps each user's memories apart. A role without maintenance rights
-- sees, changes and adds only the rows of the user its session names in agent_memory.user_id.
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE ROLE tenant_app;
CREATE ROLE tenant_admin;
SELECT agent_memory.grant_access('tenant_app', 'writer');
SELECT agent_memory.grant_access('tenant_admin', 'admin');
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model)
VALUES ('alice', 'Alice likes tea', '[1,0,0,0]', 't4'), ('bob', 'Bob likes coffee', '[1,0.1,0,0]', 't4');
SELECT agent_memory.memory_record_turn('bob', 's1', 'user', 'Bob says hi') IS NOT NULL AS turn;
SELECT id AS bob_id, version AS bob_version FROM agent_memory.memories WHERE user_id = 'bob' \gset
SET ROLE tenant_app;
-- Naming no user, the application sees nothing.
SELECT count(*) AS rows FROM agent_memory.memories;
SELECT count(*) AS recalled FROM agent_memory.memory_recall('alice', '[1,0,0,0]'::vector, 5, model => 't4', touch => false);
-- Working for alice: her rows only, whatever the query or the call asks for.
SET agent_memory.user_id = 'alice';
SELECT user_id, content FROM agent_memory.memories ORDER BY id;
SELECT content FROM agent_memory.memory_recall('alice', '[1,0,0,0]'::vector, 5, model => 't4', touch => false);
SELECT count(*) AS bob_recalled FROM agent_memory.memory_recall('bob', '[1,0,0,0]'::vector, 5, model => 't4', touch => false);
SELECT count(*) AS bob_context FROM agent_memory.memory_context('bob', 's1', '[1,0,0,0]'::vector, model => 't4', touch => false);
SELECT count(*) AS bob_turns FROM agent_memory.turns;
-- Another user's id behaves as a missing row.
\set VERBOSITY sqlstate
SELECT agent_memory.memory_update(:bob_id, :bob_version, content => 'Bob likes nothing');
\set VERBOSITY default
SELECT count(*) AS evidence FROM agent_memory.memory_evidence(:bob_id);
-- Writing another user's memories is refused; changing them changes nothing.
SELECT * FROM agent_memory.memory_reconcile('bob', NULL, NULL, NULL, 'Bob likes milk', '[0,1,0,0]', model => 't4');
\echo :LAST_ERROR_SQLSTATE
UPDATE agent_memory.memories SET content = 'changed' WHERE user_id = 'bob';
DELETE FROM agent_memory.memories WHERE user_id = 'bob';
SELECT action FROM agent_memory.memory_reconcile('alice', NULL, NULL, NULL, 'Alice likes milk', '[0,1,0,0]', model => 't4');
RESET agent_memory.user_id;
RESET ROLE;
SELECT user_id, content FROM agent_memory.memories WHERE user_id IN ('alice', 'bob') ORDER BY id;
-- An admin sees every user; so do the workers.
SET ROLE tenant_admin;
SELECT count(DISTINCT user_id) AS users FROM agent_memory.memories WHERE user_id IN ('alice', 'bob');
SELECT count(*) AS bob_recalled FROM agent_memory.memory_recall('bob', '[1,0,0,0]'::vector, 5, model => 't4', touch => false);
RESET ROLE;
SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity FROM pg_class c
 WHERE c.relnamespace = 'agent_memory'::regnamespace AND c.relkind = 'r' AND c.relrowsecurity ORDER BY 1;
SELECT agent_memory.revoke_access('tenant_app') IS NOT NULL AS revoked, agent_memory.revoke_access('tenant_admin') IS NOT NULL AS revoked_admin;
DROP ROLE tenant_app;
DROP ROLE tenant_admin;
-- References stay within a user: the keys hold user_id, so a memory can be superseded by, or
-- drawn from, rows of its own user only (23503), whoever writes.
\set VERBOSITY sqlstate
UPDATE agent_memory.memories SET superseded_by = (SELECT max(id) FROM agent_memory.memories WHERE user_id = 'bob')
 WHERE user_id = 'alice' AND content = 'Alice likes milk';
INSERT INTO agent_memory.turns (user_id, session_id, role, content) VALUES ('bob', 's9', 'user', 'a turn of bob''s');
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, source_turn_id)
VALUES ('alice', 'drawn from bob', '[1,1,0,0]', 't4', (SELECT max(id) FROM agent_memory.turns WHERE user_id = 'bob'));
\set VERBOSITY default
SELECT count(*) AS alice_rows_pointing_at_bob FROM agent_memory.memories m
 WHERE m.user_id = 'alice' AND (m.superseded_by IN (SELECT id FROM agent_memory.memories WHERE user_id = 'bob')
                                OR m.source_turn_id IN (SELECT id FROM agent_memory.turns WHERE user_id = 'bob'));
SELECT pg_get_constraintdef(oid) FROM pg_constraint
 WHERE conrelid IN ('agent_memory.memories'::regclass, 'agent_memory.turns'::regclass) AND contype IN ('p', 'f')
 ORDER BY conname;
