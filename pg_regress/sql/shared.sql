-- The shared parts: what one tenant's role can see or change of what every tenant shares (the
-- statistics view, the predicate registry, the model registry, the secrets), what a user's
-- erasure takes with it, and roles bound to their users. Two application roles, each granted
-- writer and working for its own users, and an admin.
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE ROLE shared_app_a LOGIN;
CREATE ROLE shared_app_b LOGIN;
CREATE ROLE shared_admin LOGIN;
SELECT agent_memory.grant_access('shared_app_a', 'writer') IS NOT NULL AS a,
       agent_memory.grant_access('shared_app_b', 'writer') IS NOT NULL AS b,
       agent_memory.grant_access('shared_admin', 'admin') IS NOT NULL AS admin;
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model)
VALUES ('sh-alice', 'Alice likes tea', '[1,0,0,0]', 'sh4'), ('sh-bob', 'Bob likes coffee', '[1,0.1,0,0]', 'sh4');

-- 1. memory_stats shows a writer only the user its session works for; an admin every user.
SET ROLE shared_app_a;
SET agent_memory.user_id = 'sh-alice';
SELECT user_id, active FROM agent_memory.memory_stats WHERE user_id LIKE 'sh-%' ORDER BY 1;
RESET agent_memory.user_id;
SELECT count(*) AS naming_nobody FROM agent_memory.memory_stats;
SET ROLE shared_admin;
SELECT user_id, active FROM agent_memory.memory_stats WHERE user_id LIKE 'sh-%' ORDER BY 1;
RESET ROLE;
SELECT c.relname, c.reloptions FROM pg_class c WHERE c.relnamespace = 'agent_memory'::regnamespace AND c.relkind = 'v' ORDER BY 1;

-- 2. The predicate registry: a writer adds predicates, never changes one.
SET ROLE shared_app_a;
SET agent_memory.user_id = 'sh-alice';
\set VERBOSITY sqlstate
UPDATE agent_memory.predicates SET cardinality = 'many' WHERE predicate = 'editor';
DELETE FROM agent_memory.predicates WHERE predicate = 'editor';
SELECT action FROM agent_memory.memory_reconcile('sh-alice', 'sh-alice', 'editor', 'vim', 'Uses vim', '[0,1,0,0]', model => 'sh4', cardinality => 'many');
\set VERBOSITY default
SELECT * FROM agent_memory.memory_reconcile('sh-alice', 'sh-alice', 'editor', 'vim', 'Uses vim', '[0,1,0,0]', model => 'sh4', cardinality => 'many');
SELECT action FROM agent_memory.memory_reconcile('sh-alice', 'sh-alice', 'hobby_xyzmarker', 'chess', 'Plays chess', '[0,0,1,0]', model => 'sh4', cardinality => 'many');
SELECT action FROM agent_memory.memory_reconcile('sh-alice', 'sh-alice', 'hobby_xyzmarker', 'go', 'Plays go', '[0,0,1,0.2]', model => 'sh4', cardinality => 'many');
SELECT predicate, cardinality, seeded FROM agent_memory.predicates WHERE predicate IN ('editor', 'hobby_xyzmarker') ORDER BY 1;
SELECT user_id, predicate FROM agent_memory.predicate_declarations ORDER BY 1, 2;
RESET ROLE;
-- An admin may change a cardinality; a single-valued key then keeps one active value: the
-- next reconcile of the key retires every active value written while it was many-valued.
INSERT INTO agent_memory.predicates (predicate, cardinality) VALUES ('sh_tool', 'many');
SET ROLE shared_app_b;
SET agent_memory.user_id = 'sh-bob';
SELECT action FROM agent_memory.memory_reconcile('sh-bob', 'sh-bob', 'sh_tool', 'hammer', 'Has a hammer', '[0,0,0,1]', model => 'sh4');
SELECT action FROM agent_memory.memory_reconcile('sh-bob', 'sh-bob', 'sh_tool', 'saw', 'Has a saw', '[0,0,1,1]', model => 'sh4');
SET ROLE shared_admin;
SELECT action FROM agent_memory.memory_reconcile('sh-bob', 'sh-bob', 'sh_tool', 'saw', 'Has a saw', '[0,0,1,1]', model => 'sh4', cardinality => 'one');
SET ROLE shared_app_b;
SELECT object, active FROM agent_memory.memories WHERE predicate = 'sh_tool' ORDER BY id;
SELECT action FROM agent_memory.memory_reconcile('sh-bob', 'sh-bob', 'sh_tool', 'drill', 'Has a drill', '[0,1,1,1]', model => 'sh4');
SELECT object, active, retired_reason, superseded_by IS NOT NULL AS superseded FROM agent_memory.memories WHERE predicate = 'sh_tool' ORDER BY id;
RESET ROLE;

-- 3. The model registry: registered by the first write of a model, never by a writer's INSERT.
SET ROLE shared_app_a;
SET agent_memory.user_id = 'sh-alice';
\set VERBOSITY sqlstate
INSERT INTO agent_memory.embedding_models VALUES ('text-embedding-3-small', 3);
DELETE FROM agent_memory.embedding_models;
\set VERBOSITY default
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model) VALUES ('sh-alice', 'A note', '[1,2,3]', 'sh3');
SELECT name, dimensions FROM agent_memory.embedding_models WHERE name LIKE 'sh%' ORDER BY 1;
RESET ROLE;

-- 4. The secrets: no application role reads them, so none can compute a lock key.
SET ROLE shared_app_a;
\set VERBOSITY sqlstate
SELECT salt FROM agent_memory.lock_salt;
SELECT pg_advisory_lock(hashtextextended('agent_memory.user:sh-bob', (SELECT salt FROM agent_memory.lock_salt)));
SELECT agent_memory.erasure_lock('sh-bob');
SELECT agent_memory.erasure_hash('sh-bob');
RESET ROLE;
SET ROLE shared_admin;
SELECT salt FROM agent_memory.lock_salt;
\set VERBOSITY default
RESET ROLE;
SELECT r.rolname, has_table_privilege(r.rolname, 'agent_memory.lock_salt', 'SELECT') AS reads_secrets
  FROM pg_roles r WHERE r.rolname IN ('shared_app_a', 'shared_admin', 'agent_memory_worker', 'agent_memory_admin') ORDER BY 1;

-- 5. Erasure: the predicates only the user declared go with the user (and nothing a seeded
--    predicate, or one another user's memory uses); the receipt's hash is keyed.
SELECT agent_memory.hmac_sha256('Jefe', 'what do ya want for nothing?') AS rfc4231_case_2;
SET ROLE shared_admin;
SELECT memories, turns, tasks, user_hash = agent_memory.erasure_hash('sh-alice') AS keyed,
       user_hash <> encode(sha256(convert_to('sh-alice', 'UTF8')), 'hex') AS not_plain_sha256
  FROM agent_memory.memory_erase('sh-alice');
RESET ROLE;
SELECT predicate FROM agent_memory.predicates WHERE predicate IN ('editor', 'hobby_xyzmarker', 'sh_tool') ORDER BY 1;
SELECT count(*) AS declarations_left FROM agent_memory.predicate_declarations WHERE user_id = 'sh-alice';
SELECT count(*) AS receipts_matching FROM agent_memory.erasures WHERE user_hash = agent_memory.erasure_hash('sh-alice');

-- 6. Metadata is a JSON object on every path; a batch checks every fact's times first, a
--    restatement's too.
\set VERBOSITY sqlstate
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, metadata) VALUES ('sh-carol', 'x', '[1,0,0,0]', 'sh4', '[1,2]');
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, metadata) VALUES ('sh-carol', 'x', '[1,0,0,0]', 'sh4', '"s"');
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, metadata) VALUES ('sh-carol', 'x', '[1,0,0,0]', 'sh4', 'null');
SELECT agent_memory.memory_record_turn('sh-carol', 's1', 'user', 'hi', metadata => '[1]');
SELECT action FROM agent_memory.memory_reconcile('sh-carol', NULL, NULL, NULL, 'A fact', '[1,0,0,0]', model => 'sh4', metadata => '"s"');
INSERT INTO agent_memory.turns (user_id, session_id, role, content, metadata) VALUES ('sh-carol', 's1', 'user', 'hi', '3');
\set VERBOSITY default
SELECT action FROM agent_memory.memory_reconcile('sh-carol', NULL, NULL, NULL, 'A fact', '[1,0,0,0]', model => 'sh4', metadata => '{"k": 1}');
SELECT * FROM agent_memory.memory_reconcile_batch('sh-carol', '[{"content": "A fact", "emb": [1,0,0,0], "expires_at": "not a time"}]', model => 'sh4');
SELECT * FROM agent_memory.memory_reconcile_batch('sh-carol', '[{"content": "A new fact", "emb": [0,1,0,0]}, {"content": "A new fact", "emb": [0,1,0,0], "valid_until": "soon-ish"}]', model => 'sh4');
SELECT action FROM agent_memory.memory_reconcile_batch('sh-carol', '[{"content": "A fact", "emb": [1,0,0,0], "expires_at": "2099-01-01 00:00+00"}]', model => 'sh4');
SELECT content, metadata FROM agent_memory.memories WHERE user_id = 'sh-carol' ORDER BY id;

-- 7. A role bound to its users names no other: its session may say it works for another user,
--    and then sees, recalls and writes nothing of that user's.
SELECT agent_memory.bind_role('shared_app_b', 'sh-b%');
SET ROLE shared_app_b;
SELECT role_name, user_pattern FROM agent_memory.role_users ORDER BY 1, 2;
SET agent_memory.user_id = 'sh-carol';
SELECT agent_memory.session_user_id() AS may_name;
SELECT count(*) AS carol_rows FROM agent_memory.memories;
SELECT count(*) AS carol_recalled FROM agent_memory.memory_recall('sh-carol', '[1,0,0,0]'::vector, 5, model => 'sh4', touch => false);
SELECT count(*) AS carol_stats FROM agent_memory.memory_stats;
\set VERBOSITY sqlstate
SELECT action FROM agent_memory.memory_reconcile('sh-carol', NULL, NULL, NULL, 'Carol is mine now', '[0,0,1,0]', model => 'sh4');
SELECT agent_memory.memory_record_turn('sh-carol', 's1', 'user', 'hello');
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model) VALUES ('sh-carol', 'x', '[1,0,0,0]', 'sh4');
\set VERBOSITY default
UPDATE agent_memory.memories SET content = 'changed' WHERE user_id = 'sh-carol';
SET agent_memory.user_id = 'sh-bob';
SELECT agent_memory.session_user_id() AS may_name;
SELECT count(*) AS bob_recalled FROM agent_memory.memory_recall('sh-bob', '[0,0,0,1]'::vector, 5, model => 'sh4', touch => false);
SELECT action FROM agent_memory.memory_reconcile('sh-bob', NULL, NULL, NULL, 'Bob likes milk', '[0,1,0,1]', model => 'sh4');
RESET agent_memory.user_id;
RESET ROLE;
-- An unbound role keeps the default model: it may name any user.
SET ROLE shared_app_a;
SET agent_memory.user_id = 'sh-carol';
SELECT count(*) AS carol_rows_for_unbound FROM agent_memory.memories;
RESET agent_memory.user_id;
RESET ROLE;
SELECT agent_memory.unbind_role('shared_app_b') AS unbound;

-- 8. Text in, as a tenant's role: a writer's text writes (reconcile, a plain INSERT) and text
--    questions are embedded by the server; the embedding cache they fill is no role's to read,
--    and another tenant's text question finds nothing of them.
SET ROLE shared_app_b;
SET agent_memory.user_id = 'sh-bob';
SELECT action FROM agent_memory.memory_reconcile('sh-bob', NULL, NULL, NULL, 'Bob keeps a parrot named Kiwi');
INSERT INTO agent_memory.memories (user_id, content) VALUES ('sh-bob', 'Bob repairs old bicycles');
SELECT content FROM agent_memory.memory_recall('sh-bob', 'what kind of bird does he have?', 1, touch => false);
SELECT content FROM agent_memory.memory_recall('sh-bob', 'fixing bikes', 1, touch => false);
-- Under agent_memory.embed_async the writer's rows wait for the worker, found by their words.
SET agent_memory.embed_async = on;
INSERT INTO agent_memory.memories (user_id, content) VALUES ('sh-bob', 'Bob sings in a barbershop quartet');
SELECT action FROM agent_memory.memory_reconcile('sh-bob', NULL, NULL, NULL, 'Bob brews ginger beer');
SELECT content, emb IS NULL AS waiting FROM agent_memory.memories WHERE user_id = 'sh-bob' AND emb IS NULL ORDER BY id;
SELECT content FROM agent_memory.memory_recall('sh-bob', NULL, 1, query_text => 'barbershop quartet', touch => false);
RESET agent_memory.embed_async;
-- The cache's counters count every tenant's texts: an admin's, not a writer's (0.12.0).
\set VERBOSITY sqlstate
SELECT entries > 0 AS cache_used FROM agent_memory.memory_embed_stats();
\set VERBOSITY default
\set VERBOSITY sqlstate
SELECT count(*) FROM agent_memory.embedding_cache;
\set VERBOSITY default
SET ROLE shared_app_a;
SET agent_memory.user_id = 'sh-dave';
SELECT count(*) AS bob_rows_seen_by_another_tenant FROM agent_memory.memory_recall('sh-bob', 'what kind of bird does he have?', 5, touch => false);
SELECT count(*) AS bob_waiting_rows_seen_by_another_tenant FROM agent_memory.memory_recall('sh-bob', NULL, 5, query_text => 'barbershop quartet', touch => false);
SELECT count(*) AS bob_rows_read_by_another_tenant FROM agent_memory.memories WHERE user_id = 'sh-bob';
RESET agent_memory.user_id;
RESET ROLE;

SELECT agent_memory.revoke_access('shared_app_a') IS NOT NULL, agent_memory.revoke_access('shared_app_b') IS NOT NULL,
       agent_memory.revoke_access('shared_admin') IS NOT NULL;
DROP ROLE shared_app_a;
DROP ROLE shared_app_b;
DROP ROLE shared_admin;
