-- Hardening: what an operator or an attacker can do to the extension, and what it does back.
\set VERBOSITY default
\set SHOW_CONTEXT never

-- 1. pg_dump backs up every table that holds users' data or bookkeeping, and their sequences.
SELECT c.relname, c.relkind
  FROM pg_extension e, unnest(e.extconfig) AS t(oid) JOIN pg_class c ON c.oid = t.oid
 WHERE e.extname = 'agent_memory' ORDER BY 1;

-- 2. A non-superuser who may create objects in pgvector's schema defines an operator that a
--    loosely written trigger would pick for `float8 = int4`, and logs every call.
CREATE ROLE hardening_mallory LOGIN NOSUPERUSER;
GRANT CREATE ON SCHEMA public TO hardening_mallory;
CREATE TABLE public.hardening_calls (who text);
GRANT INSERT ON public.hardening_calls TO PUBLIC;
SET ROLE hardening_mallory;
CREATE FUNCTION public.hardening_eq(float8, int4) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.hardening_calls VALUES (current_user);
    ALTER ROLE hardening_mallory SUPERUSER;
    RETURN $1 = $2::float8;
END $$;
CREATE OPERATOR public.= (LEFTARG = float8, RIGHTARG = int4, FUNCTION = public.hardening_eq);
RESET ROLE;
-- A superuser writes through every path: reconcile, a plain INSERT, an update of the embedding.
SET search_path = public, pg_catalog;
SELECT action FROM agent_memory.memory_reconcile('hard-user', 'user', 'editor', 'vim', 'Uses vim', '[1,0,0,0]', model => 'hard4');
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model) VALUES ('hard-user', 'Likes tea', '[0,2,0,0]', 'hard4');
UPDATE agent_memory.memories SET emb = '[0,0,3,0]' WHERE user_id = 'hard-user' AND content = 'Likes tea';
SELECT content, emb FROM agent_memory.memories WHERE user_id = 'hard-user' ORDER BY id;
RESET search_path;
-- The operator was never called, and its author is no superuser.
SELECT count(*) AS hijacked_calls FROM public.hardening_calls;
SELECT rolsuper FROM pg_roles WHERE rolname = 'hardening_mallory';
DROP OPERATOR public.= (float8, int4);
DROP FUNCTION public.hardening_eq(float8, int4);
DROP TABLE public.hardening_calls;
REVOKE CREATE ON SCHEMA public FROM hardening_mallory;
DROP ROLE hardening_mallory;
-- Every function that runs SQL pins its search path.
SELECT p.proname, p.proconfig
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = 'agent_memory' AND p.proconfig IS NOT NULL
 GROUP BY 1, 2 ORDER BY 1;
-- The workers' role: it cannot log in and is no superuser.
SELECT rolname, rolcanlogin, rolsuper, rolcreaterole, rolcreatedb, rolbypassrls
  FROM pg_roles WHERE rolname = 'agent_memory_worker';

-- 4. Reads never take a transaction id, so they work in read-only transactions and on a standby.
BEGIN;
SELECT count(*) FROM agent_memory.memory_recall('hard-user', '[1,0,0,0]'::vector, 5, model => 'hard4', touch => false);
SELECT pg_current_xact_id_if_assigned() IS NULL AS no_xid_taken;
COMMIT;
BEGIN TRANSACTION READ ONLY;
-- A recall in a read-only transaction returns its rows and does not touch them.
SELECT content FROM agent_memory.memory_recall('hard-user', '[1,0,0,0]'::vector, 5, model => 'hard4');
SELECT step FROM agent_memory.memory_forget(dry_run => true);
SELECT step FROM agent_memory.memory_consolidate(dry_run => true);
SELECT pg_current_xact_id_if_assigned() IS NULL AS no_xid_taken;
-- Writing is PostgreSQL's own read-only error.
SELECT * FROM agent_memory.memory_reconcile('hard-user', 'user', 'editor', 'neovim', 'Uses neovim', '[1,0,0,0]', model => 'hard4');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT hit_count FROM agent_memory.memories WHERE user_id = 'hard-user' AND content = 'Uses vim';

-- 5. An embedding with more numbers than pgvector's limit is refused before any vector is built,
--    and registers no model.
SELECT * FROM agent_memory.memory_reconcile_batch('hard-user',
    json_build_array(json_build_object('content', 'huge', 'emb', (SELECT json_agg(0.5) FROM generate_series(1, 65537)))),
    model => 'huge');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM agent_memory.memory_reconcile_batch('hard-user',
    json_build_array(json_build_object('content', 'huge', 'emb', (SELECT json_agg(0.5) FROM generate_series(1, 16001)))),
    model => 'huge');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM agent_memory.memory_reconcile_batch('hard-user', '[{"content": "empty", "emb": []}]'::json, model => 'huge');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS huge_models FROM agent_memory.embedding_models WHERE name = 'huge';

-- 6. A NUL character in any string of a batch is refused, as jsonb refuses it.
SELECT * FROM agent_memory.memory_reconcile_batch('hard-user', '[{"content": "Name is Mallory\u0000x", "emb": [1,0,0,0]}]'::json, model => 'hard4');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM agent_memory.memory_reconcile_batch('hard-user', '[{"subject": "user", "predicate": "name\u0000x", "object": "M", "content": "Name is M", "emb": [1,0,0,0]}]', model => 'hard4');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM agent_memory.memory_reconcile_batch('hard-user', '[{"content": "meta", "emb": [1,0,0,0], "metadata": {"k\u0000": 1}}]'::json, model => 'hard4');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM agent_memory.memory_reconcile_batch('hard-user', '[{"content": "Name is Mallory\u0000x", "emb": [1,0,0,0]}]'::jsonb, model => 'hard4');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS stored_with_nul FROM agent_memory.memories WHERE user_id = 'hard-user' AND content LIKE 'Name is%';

-- 8. Smaller ones: each a clear error.
-- Infinite times have no age.
\set VERBOSITY terse
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, last_hit_at) VALUES ('hard-user', 'x', '[1,0,0,0]', 'hard4', '-infinity');
\echo :LAST_ERROR_SQLSTATE
UPDATE agent_memory.memories SET created_at = 'infinity' WHERE user_id = 'hard-user';
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.memory_record_turn('hard-user', 's1', 'user', 'hello', created_at => '-infinity');
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default
-- The decay score takes a finite similarity and an importance in [0, 1].
SELECT agent_memory.memory_decay_score('NaN', interval '1 day', 0.5);
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.memory_decay_score('Infinity', interval '1 day', 0.5);
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.memory_decay_score(0.9, interval '1 day', 'NaN');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.memory_decay_score(0.9, interval '1 day', -0.5);
\echo :LAST_ERROR_SQLSTATE
-- A batch nested deeper than 128 levels.
SELECT * FROM agent_memory.memory_reconcile_batch('hard-user',
    ('[{"content": "deep", "emb": [1,0,0,0], "metadata": ' || repeat('[', 200) || repeat(']', 200) || '}]')::jsonb, model => 'hard4');
\echo :LAST_ERROR_SQLSTATE
-- An unknown kind, or a NULL one, in kinds.
SELECT * FROM agent_memory.memory_recall('hard-user', '[1,0,0,0]'::vector, 5, model => 'hard4', kinds => ARRAY['bogus']);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM agent_memory.memory_recall('hard-user', '[1,0,0,0]'::vector, 5, model => 'hard4', kinds => ARRAY[NULL]::text[]);
\echo :LAST_ERROR_SQLSTATE
-- A NULL role of a turn.
SELECT agent_memory.memory_record_turn('hard-user', 's1', NULL, 'hello');
\echo :LAST_ERROR_SQLSTATE
-- memory_update has a vector and a halfvec form, so an untyped embedding needs a cast (the
-- README says so); with one, it works.
SELECT agent_memory.memory_update(id, version, emb => '[0,1,0,0]') FROM agent_memory.memories WHERE content = 'Uses vim';
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.memory_update(id, version, emb => '[0,1,0,0]'::vector) FROM agent_memory.memories WHERE content = 'Uses vim';

-- 9. An error raised by PostgreSQL inside the extension's Rust carries no Rust backtrace, although
--    the test server runs with RUST_BACKTRACE=1.
SELECT * FROM agent_memory.memory_reconcile_batch('hard-user', '[{"content": "when", "emb": [1,0,0,0], "expires_at": "not a time"}]'::json, model => 'hard4');
\echo :LAST_ERROR_SQLSTATE

-- Limits, which only a superuser changes: the largest content, metadata and batch a call accepts.
SET agent_memory.max_content_bytes = 100;
SELECT * FROM agent_memory.memory_reconcile('hard-user', NULL, NULL, NULL, repeat('x', 101), '[1,0,0,0]', model => 'hard4');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.memory_record_turn('hard-user', 's1', 'user', repeat('x', 101));
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.memory_update(id, version, content => repeat('x', 101)) FROM agent_memory.memories WHERE content = 'Uses vim';
\echo :LAST_ERROR_SQLSTATE
RESET agent_memory.max_content_bytes;
SET agent_memory.max_metadata_bytes = 10;
SELECT * FROM agent_memory.memory_reconcile('hard-user', NULL, NULL, NULL, 'meta', '[1,0,0,0]', model => 'hard4', metadata => '{"k": "a long value"}');
\echo :LAST_ERROR_SQLSTATE
RESET agent_memory.max_metadata_bytes;
SET agent_memory.max_batch_facts = 1;
SELECT * FROM agent_memory.memory_reconcile_batch('hard-user', '[{"content": "a", "emb": [1,0,0,0]}, {"content": "b", "emb": [0,1,0,0]}]'::json, model => 'hard4');
\echo :LAST_ERROR_SQLSTATE
RESET agent_memory.max_batch_facts;
CREATE ROLE hardening_app;
SET ROLE hardening_app;
SET agent_memory.max_content_bytes = 100000000;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP ROLE hardening_app;

-- Erasure on request: every memory, turn and task of one user, in one transaction, and a receipt
-- that holds no content.
INSERT INTO agent_memory.tasks (user_id, task_id) VALUES ('erase-me', 't1');
SELECT agent_memory.memory_record_turn('erase-me', 's1', 'user', 'My secret is 1234') IS NOT NULL AS turn;
SELECT action FROM agent_memory.memory_reconcile('erase-me', 'user', 'secret', '1234', 'Secret is 1234', '[1,0,0,0]', model => 'hard4', task_id => 't1');
SELECT action FROM agent_memory.memory_reconcile('erase-me', 'user', 'secret', '5678', 'Secret is 5678', '[1,0.1,0,0]', model => 'hard4');
SELECT count(*) AS before_other_user FROM agent_memory.memories WHERE user_id = 'hard-user' \gset
SELECT user_hash = agent_memory.erasure_hash('erase-me') AS hashed, memories, turns, tasks
  FROM agent_memory.memory_erase('erase-me');
SELECT (SELECT count(*) FROM agent_memory.memories WHERE user_id = 'erase-me') AS memories_left,
       (SELECT count(*) FROM agent_memory.turns WHERE user_id = 'erase-me') AS turns_left,
       (SELECT count(*) FROM agent_memory.tasks WHERE user_id = 'erase-me') AS tasks_left,
       (SELECT count(*) FROM agent_memory.memories WHERE user_id = 'hard-user') = :before_other_user AS others_untouched;
-- The log keeps the receipt, never the content.
SELECT counts, erased_by, position('1234' IN erasures::text) = 0 AS no_content FROM agent_memory.erasures e JOIN LATERAL (SELECT e AS erasures) x ON true;
SELECT * FROM agent_memory.memory_erase(NULL);
\echo :LAST_ERROR_SQLSTATE

-- The access model: PUBLIC may run nothing (but the check of its own rights that row-level
-- security uses, the condition of the delete trigger, and the write trigger's question whether a row
-- waits for the worker's embedding, and its embedding of a row (and of its windows) for its user, which checks the role's
-- right to that user); grant_access gives a role one of three levels.
SELECT count(*) AS public_execute FROM pg_proc p
 WHERE p.pronamespace = 'agent_memory'::regnamespace AND has_function_privilege('public', p.oid, 'EXECUTE')
   AND p.proname NOT IN ('sees_every_user', 'pack_deletes_marked', 'session_user_id', 'embed_later', 'embed_row', 'embed_windows');
CREATE ROLE hardening_reader;
CREATE ROLE hardening_writer;
SELECT agent_memory.grant_access('hardening_reader', 'reader');
SELECT agent_memory.grant_access('hardening_writer', 'writer');
SET ROLE hardening_writer;
SET agent_memory.user_id = 'role-user';
SELECT action FROM agent_memory.memory_reconcile('role-user', 'user', 'editor', 'vim', 'Uses vim', '[1,0,0,0]', model => 'hard4');
SELECT agent_memory.memory_record_turn('role-user', 's1', 'user', 'hello') IS NOT NULL AS turn;
SELECT content FROM agent_memory.memory_recall('role-user', '[1,0,0,0]'::vector, 1, model => 'hard4');
SELECT * FROM agent_memory.memory_forget(dry_run => true);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE hardening_reader;
SELECT content FROM agent_memory.memory_recall('role-user', '[1,0,0,0]'::vector, 1, model => 'hard4');
SELECT count(*) FROM agent_memory.memory_context('role-user', 's1', '[1,0,0,0]'::vector, model => 'hard4');
SELECT action FROM agent_memory.memory_reconcile('role-user', 'user', 'editor', 'neovim', 'Uses neovim', '[1,0,0,0]', model => 'hard4');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model) VALUES ('role-user', 'x', '[1,0,0,0]', 'hard4');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT agent_memory.grant_access('hardening_reader', 'owner');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.revoke_access('hardening_reader');
SELECT agent_memory.revoke_access('hardening_writer');
SET ROLE hardening_reader;
SELECT content FROM agent_memory.memory_recall('role-user', '[1,0,0,0]'::vector, 1, model => 'hard4');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP ROLE hardening_reader;
DROP ROLE hardening_writer;
RESET agent_memory.user_id;
