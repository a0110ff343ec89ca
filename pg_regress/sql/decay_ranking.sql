-- (b) Similarity alone picks stale memories. Six editor preferences of one user
-- over 200 days: the oldest (vim) is the most similar to the question, the
-- newest (neovim) the least.
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, importance, created_at, last_hit_at)
SELECT 'editor-user', content, emb::vector, 'demo4', 0.5, now() - age, now() - age
  FROM (VALUES ('Uses vim as editor',        '[1, 0.2, 0, 0]', interval '200 days'),
               ('Switched to emacs',         '[1, 0.3, 0, 0]', interval '160 days'),
               ('Trying VS Code',            '[1, 0.4, 0, 0]', interval '120 days'),
               ('Prefers Sublime Text',      '[1, 0.5, 0, 0]', interval '80 days'),
               ('Moved to Helix',            '[1, 0.6, 0, 0]', interval '40 days'),
               ('Prefers neovim as editor',  '[1, 0.7, 0, 0]', interval '2 days')) v(content, emb, age);

-- With the default exponential decay the current preference comes first ...
SELECT content, round(similarity::numeric, 3) AS similarity, round(score::numeric, 4) AS score
  FROM agent_memory.memory_recall('editor-user', '[1,0,0,0]'::vector, 6, model => 'demo4', touch => false);
-- ... with decay => 'none' the oldest, most similar one does.
SELECT content, round(similarity::numeric, 3) AS similarity, round(score::numeric, 4) AS score
  FROM agent_memory.memory_recall('editor-user', '[1,0,0,0]'::vector, 6, model => 'demo4', decay => 'none', touch => false);
-- Every decay curve puts the current preference first.
SELECT mode, (SELECT content FROM agent_memory.memory_recall('editor-user', '[1,0,0,0]'::vector, 1,
                                  model => 'demo4', decay => mode, touch => false)) AS first
  FROM unnest(ARRAY['none', 'linear', 'exponential', 'power']) mode;
-- The default curve is a setting.
SET agent_memory.decay_mode = 'none';
SELECT content FROM agent_memory.memory_recall('editor-user', '[1,0,0,0]'::vector, 1, model => 'demo4', touch => false);
RESET agent_memory.decay_mode;

-- Decay ranks what is current; it is not a filter on the past. Time decides only between
-- memories that compete (a cosine of at least agent_memory.compete_similarity, 0.9: versions of
-- one fact, an event told again): the older of them decays. An old episode that nothing newer
-- resembles keeps its whole score and answers a question about the past.
INSERT INTO agent_memory.memories (user_id, kind, content, emb, embedding_model, importance, created_at, last_hit_at)
SELECT 'episode-user', kind, content, emb::vector, 'demo4', 0.5, now() - age, now() - age
  FROM (VALUES ('episodic', 'Asked about a refund for order 1042', '[0.8, 0.6, 0, 0]', interval '120 days'),
               ('episodic', 'Asked for the opening hours',         '[0.2, 0, 1, 0]',   interval '3 days'),
               ('episodic', 'Reported a broken download link',     '[0.3, 0, 0, 1]',   interval '1 day'),
               ('episodic', 'Asked to change the delivery address','[0.25, 0, 1, 1]',  interval '5 hours'),
               ('semantic', 'Prefers short answers',               '[0.1, 0, 1, 0.5]', interval '10 days')) v(kind, content, emb, age);
SELECT content, kind, round(similarity::numeric, 3) AS similarity, round(score::numeric, 4) AS score
  FROM agent_memory.memory_recall('episode-user', '[1,0,0,0]'::vector, 3, model => 'demo4', touch => false);
-- When every memory decays by its age (decay_scope = 'all', the brief's reference score), the
-- episodic floor (agent_memory.decay_floor_episodic, 0.4) is what keeps the old episode first;
-- without it, it sinks below recent noise.
SET agent_memory.decay_scope = 'all';
SELECT content FROM agent_memory.memory_recall('episode-user', '[1,0,0,0]'::vector, 1, model => 'demo4', touch => false);
SET agent_memory.decay_floor_episodic = 0;
SELECT content FROM agent_memory.memory_recall('episode-user', '[1,0,0,0]'::vector, 1, model => 'demo4', touch => false);
RESET agent_memory.decay_floor_episodic;
RESET agent_memory.decay_scope;
-- The same event told again, yesterday: the two compete, so the old telling decays (down to
-- the episodic floor) and the new one comes first.
INSERT INTO agent_memory.memories (user_id, kind, content, emb, embedding_model, importance, created_at, last_hit_at)
VALUES ('episode-user', 'episodic', 'Asked again about the refund for order 1042', '[0.8, 0.55, 0.05, 0]', 'demo4', 0.5,
        now() - interval '1 day', now() - interval '1 day');
SELECT content, round(similarity::numeric, 3) AS similarity, round(score::numeric, 4) AS score
  FROM agent_memory.memory_recall('episode-user', '[1,0,0,0]'::vector, 2, model => 'demo4', touch => false);

-- memory_decay_score: the reference figures (3 days: ×0.697; 200 days: ×0).
SELECT age, round(agent_memory.memory_decay_score(1, age, 0.5)::numeric, 4) AS exponential,
       round(agent_memory.memory_decay_score(1, age, 0.5, 'linear')::numeric, 4) AS linear,
       round(agent_memory.memory_decay_score(1, age, 0.5, 'power')::numeric, 4) AS power,
       round(agent_memory.memory_decay_score(1, age, 0.5, 'none')::numeric, 4) AS "none",
       round(agent_memory.memory_decay_score(1, age, 0.5, 'exponential', 0.4)::numeric, 4) AS exp_floor_04
  FROM unnest(ARRAY[interval '0', '1 hour', '3 days', '15 days', '200 days']) age;
-- The importance factor runs from 0.8 to 1.2.
SELECT importance, round(agent_memory.memory_decay_score(1, interval '0', importance, 'none')::numeric, 6) AS factor
  FROM unnest(ARRAY[0, 0.5, 1]::real[]) importance;
-- The constants are settings.
SET agent_memory.decay_base = 0.5;
SELECT agent_memory.memory_decay_score(1, interval '2 hours', 0.5) AS two_half_lives;
RESET agent_memory.decay_base;
SET agent_memory.decay_linear_horizon = '10d';
SELECT agent_memory.memory_decay_score(1, interval '5 days', 0.5, 'linear') AS halfway;
RESET agent_memory.decay_linear_horizon;
SET agent_memory.importance_weight = 0;
SELECT agent_memory.memory_decay_score(0.5, interval '0', 1, 'none') AS no_importance;
RESET agent_memory.importance_weight;
-- Strict: NULL in, NULL out.
SELECT agent_memory.memory_decay_score(NULL, interval '1 day', 0.5) IS NULL AS null_in_null_out;
