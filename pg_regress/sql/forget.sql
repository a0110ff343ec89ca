-- Forgetting: expiry, capacity by retention score, the halving of hit counts, and the purge
-- after the regret window. Protected facts are never expired or evicted.
\set VERBOSITY default
\set SHOW_CONTEXT never
TRUNCATE agent_memory.memories, agent_memory.runs, agent_memory.maintenance_state;

-- User "kim": 3 hard facts (protected) and 9 ordinary memories; the capacity is 6.
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, importance, protected, created_at, last_hit_at, hit_count) VALUES
 ('kim', 'Name: Kim Park',             '[1,0,0]', 'f3', 1.0, true,  now() - interval '200 days', now() - interval '200 days', 0),
 ('kim', 'Time zone: Asia/Seoul',      '[1,0,0]', 'f3', 0.9, true,  now() - interval '200 days', now() - interval '200 days', 0),
 ('kim', 'Never suggest pork',         '[1,0,0]', 'f3', 0.9, true,  now() - interval '200 days', now() - interval '200 days', 0),
 ('kim', 'Asked about flights today',  '[0,1,0]', 'f3', 0.5, false, now() - interval '1 hour',   now() - interval '1 hour',   0),
 ('kim', 'Likes window seats',         '[0,1,0]', 'f3', 0.8, false, now() - interval '20 days',  now() - interval '1 day',    9),
 ('kim', 'Prefers morning meetings',   '[0,1,0]', 'f3', 0.8, false, now() - interval '30 days',  now() - interval '2 days',   4),
 ('kim', 'Mentioned a podcast once',   '[0,1,0]', 'f3', 0.3, false, now() - interval '60 days',  now() - interval '60 days',  0),
 ('kim', 'Had coffee at 10',           '[0,1,0]', 'f3', 0.2, false, now() - interval '50 days',  now() - interval '50 days',  0),
 ('kim', 'Looked at a blue jacket',    '[0,1,0]', 'f3', 0.3, false, now() - interval '40 days',  now() - interval '40 days',  1),
 ('kim', 'Was in Busan last week',     '[0,1,0]', 'f3', 0.6, false, now() - interval '8 days',   now() - interval '8 days',   2),
 ('kim', 'Reads sci-fi',               '[0,1,0]', 'f3', 0.7, false, now() - interval '90 days',  now() - interval '10 days',  3),
 ('kim', 'Order 5521 arrives Friday',  '[0,1,0]', 'f3', 0.5, false, now() - interval '3 days',   now() - interval '3 days',   0);
-- Expiry: one ordinary memory past its expires_at, one past valid_until; a hard fact whose
-- valid_until has passed is still kept (protected facts never expire).
UPDATE agent_memory.memories SET expires_at = now() - interval '1 hour' WHERE content = 'Order 5521 arrives Friday';
UPDATE agent_memory.memories SET valid_until = now() - interval '1 day' WHERE content = 'Was in Busan last week';
UPDATE agent_memory.memories SET valid_until = now() - interval '1 day' WHERE content = 'Time zone: Asia/Seoul';
-- User "lee": more hard facts than the capacity allows, and two ordinary memories.
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, importance, protected)
SELECT 'lee', 'Hard fact ' || i, '[0,0,1]', 'f3', 0.9, true FROM generate_series(1, 8) i;
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, importance)
VALUES ('lee', 'Ordinary 1', '[0,1,1]', 'f3', 1.0), ('lee', 'Ordinary 2', '[1,1,1]', 'f3', 1.0);

SET agent_memory.capacity = 6;

-- The retention score ranks what to keep: importance, recency of real recalls, aged hits.
SELECT content, round(agent_memory.memory_retention_score(importance, last_hit_at, hit_count)::numeric, 3) AS score
  FROM agent_memory.memories WHERE user_id = 'kim' AND NOT protected ORDER BY score DESC, content;

-- A dry run changes nothing.
SELECT md5(string_agg(m::text, '|' ORDER BY m.id)) AS before FROM agent_memory.memories m \gset
SELECT * FROM agent_memory.memory_forget(dry_run => true);
SELECT md5(string_agg(m::text, '|' ORDER BY m.id)) = :'before' AS unchanged FROM agent_memory.memories m;
SELECT count(*) AS state_rows, (SELECT count(*) FROM agent_memory.runs) AS runs FROM agent_memory.maintenance_state;

-- The pass, in batches of 2.
SET agent_memory.batch_size = 2;
SELECT * FROM agent_memory.memory_forget();
RESET agent_memory.batch_size;

-- kim keeps 6: the 3 hard facts and the 3 best scores; every hard fact survives.
SELECT user_id, content, protected, active, retired_reason FROM agent_memory.memories ORDER BY user_id, active DESC, protected DESC, content;
SELECT user_id, count(*) FILTER (WHERE active) AS active, count(*) FILTER (WHERE active AND protected) AS protected_active,
       count(*) FILTER (WHERE protected AND NOT active) AS protected_lost
  FROM agent_memory.memories GROUP BY user_id ORDER BY user_id;
-- Retired, not deleted: every retired row has its time.
SELECT count(*) AS rows, count(*) FILTER (WHERE NOT active AND retired_at IS NOT NULL) AS retired FROM agent_memory.memories;

-- A second pass has nothing to do.
SELECT * FROM agent_memory.memory_forget();

-- Bulk reads do not count as recalls: a recall with touch => false changes no hit count.
SELECT sum(hit_count) AS hits_before FROM agent_memory.memories WHERE user_id = 'kim' \gset
SELECT count(*) FROM agent_memory.memory_recall('kim', '[0,1,0]', 10, model => 'f3', touch => false);
SELECT sum(hit_count) = :hits_before AS unchanged FROM agent_memory.memories WHERE user_id = 'kim';

-- Hit counts halve once agent_memory.hit_halflife has passed since the last halving
-- (ceil(n / 2): 9 -> 5, 4 -> 2; a count of 1 would stay 1).
UPDATE agent_memory.maintenance_state SET done_at = now() - interval '8 days' WHERE name = 'hits_halved';
SELECT step, rows FROM agent_memory.memory_forget() WHERE step = 'age_hits';
SELECT content, hit_count FROM agent_memory.memories WHERE user_id = 'kim' AND active AND hit_count > 0 ORDER BY content;
SELECT step, rows FROM agent_memory.memory_forget() WHERE step = 'age_hits';

-- The purge deletes memories retired longer than the regret window, but keeps the evidence
-- of a summary as long as the summary.
INSERT INTO agent_memory.memories (user_id, kind, content, emb, embedding_model, active, retired_reason, retired_at, superseded_by)
SELECT 'kim', 'episodic', 'Evidence of a summary', '[0,1,0]', 'f3', false, 'summarized', now() - interval '100 days', id
  FROM agent_memory.memories WHERE content = 'Likes window seats';
UPDATE agent_memory.memories SET retired_at = now() - interval '31 days' WHERE NOT active AND retired_reason <> 'summarized';
SELECT step, rows FROM agent_memory.memory_forget() WHERE step = 'purge';
SELECT content, retired_reason FROM agent_memory.memories WHERE NOT active ORDER BY content;
SELECT job, status, steps FROM agent_memory.runs ORDER BY id;

-- With no capacity (0), nobody is evicted.
SET agent_memory.capacity = 0;
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model) SELECT 'max', 'Note ' || i, '[1,1,0]', 'f3' FROM generate_series(1, 10) i;
SELECT step, rows FROM agent_memory.memory_forget() WHERE step = 'evict';
RESET agent_memory.capacity;

-- Bad input.
SELECT * FROM agent_memory.memory_forget(dry_run => NULL);
SET agent_memory.batch_size = 0;
SET agent_memory.capacity = -1;
