-- (d) Every bad input is a clear error with a SQLSTATE and a hint.
\set VERBOSITY default
\set SHOW_CONTEXT never
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model)
VALUES ('err-user', 'Prefers tea', '[1,0,0,0]', 'demo4');

-- A query of another dimension than the model's memories.
SELECT * FROM agent_memory.memory_recall('err-user', '[1,0,0]'::vector, 5, model => 'demo4');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM agent_memory.memory_recall('err-user', '[1,0,0]'::halfvec, 5, model => 'demo4');
\echo :LAST_ERROR_SQLSTATE
-- An all-zero query has no direction.
SELECT * FROM agent_memory.memory_recall('err-user', '[0,0,0,0]'::vector, 5, model => 'demo4');
\echo :LAST_ERROR_SQLSTATE
-- NaN and empty vectors are refused by pgvector before they reach a function.
SELECT * FROM agent_memory.memory_recall('err-user', '[NaN,0,0,1]'::vector, 5, model => 'demo4');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM agent_memory.memory_recall('err-user', '[]'::vector, 5, model => 'demo4');
\echo :LAST_ERROR_SQLSTATE
-- A NULL query.
SELECT * FROM agent_memory.memory_recall('err-user', NULL::vector, 5, model => 'demo4');
\echo :LAST_ERROR_SQLSTATE
-- A NULL or empty user.
SELECT * FROM agent_memory.memory_recall(NULL, '[1,0,0,0]'::vector, 5, model => 'demo4');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM agent_memory.memory_recall('  ', '[1,0,0,0]'::vector, 5, model => 'demo4');
\echo :LAST_ERROR_SQLSTATE
-- k of 0, below 0, NULL, or above agent_memory.max_k.
SELECT * FROM agent_memory.memory_recall('err-user', '[1,0,0,0]'::vector, 0, model => 'demo4');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM agent_memory.memory_recall('err-user', '[1,0,0,0]'::vector, -3, model => 'demo4');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM agent_memory.memory_recall('err-user', '[1,0,0,0]'::vector, NULL, model => 'demo4');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM agent_memory.memory_recall('err-user', '[1,0,0,0]'::vector, 1001, model => 'demo4');
\echo :LAST_ERROR_SQLSTATE
SET agent_memory.max_k = 2000;
SELECT count(*) FROM agent_memory.memory_recall('err-user', '[1,0,0,0]'::vector, 1001, model => 'demo4');
RESET agent_memory.max_k;
-- An unknown decay mode, in recall and in memory_decay_score.
SELECT * FROM agent_memory.memory_recall('err-user', '[1,0,0,0]'::vector, 5, model => 'demo4', decay => 'sideways');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.memory_decay_score(0.9, interval '1 day', 0.5, 'sideways');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.memory_decay_score(0.9, interval '1 day', 0.5, 'exponential', 1.5);
\echo :LAST_ERROR_SQLSTATE
SET agent_memory.decay_mode = 'sideways';
\echo :LAST_ERROR_SQLSTATE
-- An empty model name; a NaN minimum similarity.
SELECT * FROM agent_memory.memory_recall('err-user', '[1,0,0,0]'::vector, 5, model => '');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM agent_memory.memory_recall('err-user', '[1,0,0,0]'::vector, 5, model => 'demo4', min_similarity => 'NaN');
\echo :LAST_ERROR_SQLSTATE
-- An unknown agent_memory.* setting: the prefix is reserved.
SET agent_memory.no_such_setting = 1;
\echo :LAST_ERROR_SQLSTATE
-- The schema refuses bad rows.
\set VERBOSITY terse
INSERT INTO agent_memory.memories (user_id, content, emb, importance) VALUES ('err-user', 'x', '[1,0,0,0]', 1.5);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO agent_memory.memories (user_id, kind, content, emb) VALUES ('err-user', 'reminder', 'x', '[1,0,0,0]');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO agent_memory.memories (user_id, content, emb) VALUES ('', 'x', '[1,0,0,0]');
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default
-- An untyped literal is read as text in pgvector's syntax; bad text gets pgvector's own error.
SELECT content FROM agent_memory.memory_recall('err-user', '[1,0,0,0]', 5, model => 'demo4', touch => false);
SELECT * FROM agent_memory.memory_recall('err-user', 'one, two', 5, model => 'demo4');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM agent_memory.memory_recall('err-user', NULL::text, 5, model => 'demo4');
\echo :LAST_ERROR_SQLSTATE
-- The good call still works after all of these.
SELECT content FROM agent_memory.memory_recall('err-user', '[1,0,0,0]'::vector, 5, model => 'demo4', touch => false);
