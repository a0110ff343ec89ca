-- (c) A recall refreshes last_hit_at and hit_count of what it returned, and
-- nothing else; touch => false (exports, scans) changes nothing.
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, last_hit_at)
SELECT 'touch-user', 'memory ' || i, ARRAY[1, i, 0]::real[]::vector, 'demo3', timestamptz '2026-01-01 00:00+00'
  FROM generate_series(1, 6) i;

SELECT count(*) FROM agent_memory.memory_recall('touch-user', '[1,0,0]'::vector, 2, model => 'demo3', touch => false);
SELECT content, hit_count, last_hit_at = '2026-01-01 00:00+00' AS untouched
  FROM agent_memory.memories WHERE user_id = 'touch-user' ORDER BY id;

SELECT content FROM agent_memory.memory_recall('touch-user', '[1,0,0]'::vector, 2, model => 'demo3');
SELECT content, hit_count, last_hit_at = '2026-01-01 00:00+00' AS untouched
  FROM agent_memory.memories WHERE user_id = 'touch-user' ORDER BY id;
-- Touching does not change the version: it is bookkeeping, not a write to the memory.
SELECT DISTINCT version FROM agent_memory.memories WHERE user_id = 'touch-user';

-- A read-only transaction (or a standby) recalls without touching.
BEGIN TRANSACTION READ ONLY;
SELECT content FROM agent_memory.memory_recall('touch-user', '[1,0,0]'::vector, 2, model => 'demo3');
COMMIT;
SELECT sum(hit_count) AS total_hits FROM agent_memory.memories WHERE user_id = 'touch-user';
