-- Time in recall: since and until bound when a memory was said (since <= created_at < until);
-- as_of sees the facts that held at a moment. The memories are said one a day in March 2026.
SET TIME ZONE 'UTC';
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, created_at, last_hit_at)
SELECT 'time-user', 'day ' || i || ': ' || (ARRAY['ran by the lake', 'read a novel', 'cooked pasta'])[1 + i % 3],
       ARRAY[1, i, 0]::real[]::vector, 'demo3',
       timestamptz '2026-03-01 09:00+00' + (i - 1) * interval '1 day', timestamptz '2026-03-01 09:00+00'
  FROM generate_series(1, 21) i;

-- "What did I do last week?", asked on Wednesday 18 March: an agent turns it into the week
-- before this one (Monday to Monday, half-open).
SELECT date_trunc('week', timestamptz '2026-03-18 12:00+00') - interval '1 week' AS since,
       date_trunc('week', timestamptz '2026-03-18 12:00+00') AS until;
SELECT content, created_at FROM agent_memory.memory_recall('time-user', '[1,0,0]'::vector, 10, model => 'demo3', touch => false,
       since => date_trunc('week', timestamptz '2026-03-18 12:00+00') - interval '1 week',
       until => date_trunc('week', timestamptz '2026-03-18 12:00+00'))
 ORDER BY created_at;
-- One side only: "since the 19th", with words (hybrid), and with words alone.
SELECT content FROM agent_memory.memory_recall('time-user', '[1,0,0]'::vector, 10, model => 'demo3', touch => false,
       query_text => 'novel', since => '2026-03-19') ORDER BY content;
SELECT content FROM agent_memory.memory_recall('time-user', NULL::vector, 10, model => 'demo3', touch => false,
       query_text => 'lake', until => '2026-03-07') ORDER BY content;

-- as_of: a fact changed on the 10th; its earlier version holds before that moment.
SELECT action FROM agent_memory.memory_reconcile('time-user', 'time-user', 'city', 'Lyon', 'Lives in Lyon', '[0,0,1]', model => 'demo3');
UPDATE agent_memory.memories SET created_at = '2026-03-02 10:00+00' WHERE user_id = 'time-user' AND object = 'Lyon';
SELECT action FROM agent_memory.memory_reconcile('time-user', 'time-user', 'city', 'Porto', 'Lives in Porto', '[0,0.1,1]', model => 'demo3');
UPDATE agent_memory.memories SET created_at = '2026-03-10 10:00+00' WHERE user_id = 'time-user' AND object = 'Porto';
UPDATE agent_memory.memories SET retired_at = '2026-03-10 10:00+00' WHERE user_id = 'time-user' AND object = 'Lyon';
SELECT object, active, retired_reason FROM agent_memory.memories WHERE user_id = 'time-user' AND object IN ('Lyon', 'Porto') ORDER BY id;
SELECT content FROM agent_memory.memory_recall('time-user', '[0,0,1]'::vector, 1, model => 'demo3', kinds => ARRAY['semantic'],
       as_of => '2026-03-05');
SELECT content FROM agent_memory.memory_recall('time-user', '[0,0,1]'::vector, 1, model => 'demo3', kinds => ARRAY['semantic'],
       as_of => '2026-03-10 10:00+00');
-- A look back records no hits; a recall of today does.
SELECT sum(hit_count) AS hits FROM agent_memory.memories WHERE user_id = 'time-user';
SELECT content FROM agent_memory.memory_recall('time-user', '[0,0,1]'::vector, 1, model => 'demo3', kinds => ARRAY['semantic']);
SELECT sum(hit_count) AS hits FROM agent_memory.memories WHERE user_id = 'time-user';
-- memory_context's long-term memories follow the same bounds (the turns and standing instructions
-- of the session do not: they are the conversation now).
SELECT channel, content FROM agent_memory.memory_context('time-user', 's1', '[0,0,1]'::vector, k => 2, model => 'demo3',
       as_of => '2026-03-05', until => '2026-03-04') ORDER BY position;

-- Windows no memory can be in.
SELECT * FROM agent_memory.memory_recall('time-user', '[1,0,0]'::vector, 5, model => 'demo3',
       since => '2026-03-10', until => '2026-03-10');
SELECT * FROM agent_memory.memory_recall('time-user', '[1,0,0]'::vector, 5, model => 'demo3',
       since => '2026-03-10', as_of => '2026-03-01');
RESET TIME ZONE;
