-- memory_context: the prompt's memory in one call. Working memory (the session's last turns),
-- standing instructions, long-term memory, task lineage, and a hard token budget.
\set VERBOSITY default
\set SHOW_CONTEXT never
-- A session of 10 turns, and long-term memories.
SELECT count(agent_memory.memory_record_turn('ctx-user', 's1', CASE WHEN i % 2 = 1 THEN 'user' ELSE 'assistant' END,
                                             'Turn ' || i || ' of the conversation about the refund.',
                                             created_at => timestamptz '2026-11-01 10:00+00' + make_interval(mins => i)))
  FROM generate_series(1, 10) i;
INSERT INTO agent_memory.memories (user_id, kind, content, emb, embedding_model, created_at)
VALUES ('ctx-user', 'semantic',   'Prefers answers with the conclusion first',        '[1,0,0,0]',   'c4', '2026-10-01 00:00+00'),
       ('ctx-user', 'episodic',   'Asked about the refund for order 1042 last month', '[0.9,0.3,0,0]', 'c4', '2026-10-02 00:00+00'),
       ('ctx-user', 'semantic',   'Lives in Lisbon',                                  '[0,1,0,0]',   'c4', '2026-10-03 00:00+00'),
       ('ctx-user', 'procedural', 'Answer this user in English, never in French',     '[0,0,1,0]',   'c4', '2026-10-04 00:00+00');
-- The brief's two channels: the last 8 turns (oldest first), then the best long-term memories;
-- standing instructions come first. Every row says its tokens (cl100k_base).
SELECT position, channel, role, content, tokens, score IS NOT NULL AS scored
  FROM agent_memory.memory_context('ctx-user', 's1', '[1,0.1,0,0]'::vector, query_text => 'refund', k => 3, touch => false, model => 'c4');
-- The sum of the tokens never exceeds the budget minus the system prompt's reservation; what does
-- not fit whole is left out (a notice says how many), and smaller items after it may still fit.
SELECT sum(tokens) AS used, count(*) AS rows, string_agg(DISTINCT channel, ',' ORDER BY channel) AS channels
  FROM agent_memory.memory_context('ctx-user', 's1', '[1,0.1,0,0]'::vector, token_budget => 120, system_tokens => 40, k => 3, touch => false, model => 'c4');
SELECT position, channel, content FROM agent_memory.memory_context('ctx-user', 's1', '[1,0.1,0,0]'::vector, token_budget => 60, system_tokens => 20, k => 3, touch => false, model => 'c4');
-- A reservation larger than the budget is an error.
SELECT * FROM agent_memory.memory_context('ctx-user', 's1', '[1,0,0,0]'::vector, token_budget => 100, system_tokens => 101, model => 'c4');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM agent_memory.memory_context('ctx-user', NULL, '[1,0,0,0]'::vector, model => 'c4');
\echo :LAST_ERROR_SQLSTATE

-- Deduplication: a memory drawn from a turn in the working memory, or with a turn's very text,
-- is not repeated in the long-term channel.
INSERT INTO agent_memory.memories (user_id, kind, content, emb, embedding_model, source_turn_id)
SELECT 'ctx-user', 'episodic', 'The refund question, as a memory of turn 9', '[1,0.05,0,0]', 'c4', t.id
  FROM agent_memory.turns t WHERE t.user_id = 'ctx-user' AND t.content LIKE 'Turn 9 %';
INSERT INTO agent_memory.memories (user_id, kind, content, emb, embedding_model)
VALUES ('ctx-user', 'episodic', 'Turn 10 of the conversation about the refund.', '[1,0.02,0,0]', 'c4');
SELECT count(*) FILTER (WHERE channel = 'long_term' AND (content LIKE '%turn 9%' OR content LIKE 'Turn 10%')) AS repeated
  FROM agent_memory.memory_context('ctx-user', 's1', '[1,0,0,0]'::vector, k => 10, touch => false, model => 'c4');
-- ... unless the turn is outside the working memory.
SELECT count(*) FILTER (WHERE channel = 'long_term' AND content LIKE '%turn 9%') AS found_in_long_term
  FROM agent_memory.memory_context('ctx-user', 's1', '[1,0,0,0]'::vector, turns => 1, k => 10, touch => false, model => 'c4');

-- Chinese text is counted by the tokenizer; the cheap estimate is a setting.
SELECT agent_memory.memory_record_turn('zh-user', 'z1', 'user', '以后都用中文回答我，记住这一点') IS NOT NULL AS recorded;
SELECT tokens FROM agent_memory.memory_context('zh-user', 'z1', NULL::vector);
SET agent_memory.tokenizer = 'approximate';
SELECT tokens FROM agent_memory.memory_context('zh-user', 'z1', NULL::vector);
SET agent_memory.tokenizer = 'o200k_base';
SELECT tokens FROM agent_memory.memory_context('zh-user', 'z1', NULL::vector);
RESET agent_memory.tokenizer;

-- One text block, for clients that want a string.
SELECT agent_memory.memory_context_text('ctx-user', 's1', '[1,0.1,0,0]'::vector, turns => 2, k => 2, touch => false, model => 'c4');

-- Task lineage: a task sees its own memories and its ancestors', and those with no task; never a
-- sibling's.
INSERT INTO agent_memory.tasks (user_id, task_id, parent_task_id) VALUES
    ('task-user', 'research', NULL), ('task-user', 'research/sources', 'research'), ('task-user', 'research/draft', 'research');
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, task_id) VALUES
    ('task-user', 'The report is due Friday',           '[1,0,0,0]',   'c4', 'research'),
    ('task-user', 'Source: the 2024 census tables',      '[1,0.1,0,0]', 'c4', 'research/sources'),
    ('task-user', 'Draft: the intro needs a hook',       '[1,0.2,0,0]', 'c4', 'research/draft'),
    ('task-user', 'Prefers metric units',                '[1,0.3,0,0]', 'c4', NULL);
SELECT content FROM agent_memory.memory_recall('task-user', '[1,0,0,0]'::vector, 10, model => 'c4', touch => false, task_id => 'research/sources') ORDER BY content;
SELECT content FROM agent_memory.memory_recall('task-user', '[1,0,0,0]'::vector, 10, model => 'c4', touch => false, task_id => 'research/sources', untasked => false) ORDER BY content;
SELECT content FROM agent_memory.memory_context('task-user', 'none', '[1,0,0,0]'::vector, task_id => 'research/draft', touch => false, model => 'c4') ORDER BY content;
-- Tasks are written by memory_reconcile and memory_record_turn too.
SELECT action FROM agent_memory.memory_reconcile('task-user', NULL, NULL, NULL, 'Use the 2020 figures', '[0,1,0,0]', model => 'c4', task_id => 'research/sources');
SELECT task_id FROM agent_memory.memories WHERE content = 'Use the 2020 figures';
-- A cycle in the parents is an error when it is written, not a hang when it is read.
UPDATE agent_memory.tasks SET parent_task_id = 'research/sources' WHERE user_id = 'task-user' AND task_id = 'research';
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
INSERT INTO agent_memory.tasks (user_id, task_id, parent_task_id) VALUES ('task-user', 'loop', 'loop');
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default

-- Standing instructions (kind 'procedural') never decay, expire or get evicted, and come first.
SELECT expires_at IS NULL AS never_expires FROM agent_memory.memories WHERE kind = 'procedural' AND user_id = 'ctx-user';
SELECT agent_memory.memory_retention('procedural', 0.5) IS NULL AS no_retention;
-- (The session's turns are kept through this pass, whatever the date the test runs on.)
SET agent_memory.turn_retention = '36500d';
SET agent_memory.capacity = 1;
SELECT step FROM agent_memory.memory_forget() WHERE step = 'evict';
SELECT content, active FROM agent_memory.memories WHERE user_id = 'ctx-user' AND kind = 'procedural';
RESET agent_memory.capacity;

-- Turns leave working memory after agent_memory.turn_retention (30 days): forgetting deletes them.
SET agent_memory.turn_retention = '7d';
SELECT rows > 0 AS old_turns_deleted FROM agent_memory.memory_forget() WHERE step = 'purge';
SELECT count(*) AS ctx_turns_left FROM agent_memory.turns WHERE user_id = 'ctx-user';
RESET agent_memory.turn_retention;
