-- Hybrid recall: the question's words (query_text) ranked by BM25 over the user's memories,
-- fused with the vector ranking by reciprocal rank fusion, 1 / (60 + rank), 20 per channel.
\set VERBOSITY default
\set SHOW_CONTEXT never
INSERT INTO agent_memory.memories (user_id, kind, content, emb, embedding_model, created_at, last_hit_at)
SELECT 'hy-user', 'episodic', content, emb::vector, 'h4', now() - age, now() - age
  FROM (VALUES
    -- Only the keyword channel finds this: the order number is rare, the vector points elsewhere.
    ('The refund for order A7731 was approved',      '[0, 0, 0, 1]',      interval '20 days'),
    -- Only the vector channel finds this paraphrase: no word in common with the question.
    ('Money back for the broken parcel went through', '[1, 0.05, 0, 0]', interval '15 days'),
    -- Both channels rank this one.
    ('Asked how long a refund takes',                 '[0.9, 0.3, 0, 0]', interval '10 days'),
    ('Likes hiking in the Alps',                      '[0, 1, 0, 0]',     interval '5 days'),
    ('Prefers tea in the morning',                    '[0, 0, 1, 0]',     interval '2 days'),
    ('用户住在上海',                                    '[0, 0.2, 0.9, 0]', interval '1 day')) v(content, emb, age);

-- Feedback (the default): hybrid recall ranks twice; the second time by the query moved towards
-- the first ranking's 3 best memories (q + the mean of their embeddings, normalised), with the
-- same words. The similarity shown stays the one to the caller's query.
SET agent_memory.hybrid_feedback = 0;
CREATE TEMP TABLE moved AS
SELECT l2_normalize('[1,0,0,0]'::vector + avg(m.emb)) AS q
  FROM agent_memory.memories m
 WHERE m.id IN (SELECT id FROM agent_memory.memory_recall('hy-user', '[1,0,0,0]'::vector, 3, model => 'h4', touch => false,
                                                          query_text => 'What happened to the refund of order A7731?'));
CREATE TEMP TABLE by_moved AS
SELECT r.id, r.ord FROM moved, agent_memory.memory_recall('hy-user', moved.q, 4, model => 'h4', touch => false,
                                                          query_text => 'What happened to the refund of order A7731?')
       WITH ORDINALITY AS r(id, content, score, similarity, kind, subject, predicate, object, importance, created_at, path, v, w, x, ord);
RESET agent_memory.hybrid_feedback;
SELECT (SELECT array_agg(id ORDER BY ord) FROM by_moved)
     = (SELECT array_agg(r.id ORDER BY r.ord)
          FROM agent_memory.memory_recall('hy-user', '[1,0,0,0]'::vector, 4, model => 'h4', touch => false,
                                          query_text => 'What happened to the refund of order A7731?')
               WITH ORDINALITY AS r(id, content, score, similarity, kind, subject, predicate, object, importance, created_at, path, v, w, x, ord))
       AS ranked_by_the_moved_query;
SELECT r.content, round(r.similarity::numeric, 3) AS similarity,
       round(r.similarity::numeric, 6) = round(v.similarity::numeric, 6) AS similarity_to_the_query, r.vector_rank, r.keyword_rank
  FROM agent_memory.memory_recall('hy-user', '[1,0,0,0]'::vector, 4, model => 'h4', touch => false,
                                  query_text => 'What happened to the refund of order A7731?') r
  LEFT JOIN agent_memory.memory_recall('hy-user', '[1,0,0,0]'::vector, 100, model => 'h4', touch => false) v USING (id)
 ORDER BY r.score DESC, r.id;
DROP TABLE moved, by_moved;
-- The cases below rank once, so that each channel's part in the fused scores can be checked.
SET agent_memory.hybrid_feedback = 0;

-- Vector only (no query_text): the paraphrase and the refund question lead; the order number
-- is nowhere near.
SELECT content, vector_rank, keyword_rank FROM agent_memory.memory_recall('hy-user', '[1,0,0,0]'::vector, 3, model => 'h4', touch => false);
-- Keyword only (query NULL, for when the embedding service is down): score is BM25, similarity NULL.
SELECT content, round(score::numeric, 4) AS bm25, similarity, keyword_rank
  FROM agent_memory.memory_recall('hy-user', NULL::vector, 3, model => 'h4', touch => false, query_text => 'What happened to the refund of order A7731?');
-- Hybrid: the memory both channels rank comes first; each row says its rank in each channel,
-- and the keyword-only match (the order number) is found although its vector is far away.
SELECT content, round(score::numeric, 5) AS fused, round(similarity::numeric, 3) AS similarity, vector_rank, keyword_rank
  FROM agent_memory.memory_recall('hy-user', '[1,0,0,0]'::vector, 4, model => 'h4', touch => false,
                                  query_text => 'What happened to the refund of order A7731?');
-- Convex fusion (the default): each channel's scores scaled to 0..1 over its list, half each;
-- here without neighbours (the memories are written days apart, and the share is off).
SET agent_memory.neighbour_share = 0;
WITH v AS (SELECT id, score FROM agent_memory.memory_recall('hy-user', '[1,0,0,0]'::vector, 50, model => 'h4', touch => false)),
     w AS (SELECT id, score FROM agent_memory.memory_recall('hy-user', NULL::vector, 50, model => 'h4', touch => false,
                                                            query_text => 'refund order A7731 tea')),
     vs AS (SELECT id, coalesce((score - min(score) OVER ()) / nullif(max(score) OVER () - min(score) OVER (), 0), 1) AS s FROM v),
     ws AS (SELECT id, coalesce((score - min(score) OVER ()) / nullif(max(score) OVER () - min(score) OVER (), 0), 1) AS s FROM w),
     fused AS (SELECT id, 0.5 * coalesce(vs.s, 0) + 0.5 * coalesce(ws.s, 0) AS s FROM vs FULL JOIN ws USING (id))
SELECT count(*) AS results, bool_and(abs(h.score - f.s) < 1e-9) AS convex_exact
  FROM agent_memory.memory_recall('hy-user', '[1,0,0,0]'::vector, 6, model => 'h4', touch => false, query_text => 'refund order A7731 tea') h
  JOIN fused f USING (id);
RESET agent_memory.neighbour_share;
-- The length prior (the default): a memory longer than length_prior_words (60) words
-- scores (60 / its length) ^ length_prior (0.5) of its fused score. A long memory that leads both
-- channels (240 words: half its score) falls below a short one that states the fact.
INSERT INTO agent_memory.memories (user_id, kind, content, emb, embedding_model, created_at, last_hit_at)
SELECT 'hy-long', 'semantic', content, emb::vector, 'h4', now() - age, now() - age
  FROM (VALUES
    -- 240 words: the question's three 20 times each, and 180 others.
    (repeat('Kayak trip plan. ', 20) || (SELECT string_agg('stage' || i, ' ') FROM generate_series(1, 180) i), '[1, 0, 0, 0]', interval '1 day'),
    ('The kayak trip starts in Bergen',                                                        '[0.8, 0.6, 0, 0]', interval '1 day'),
    ('Likes a plan for the weekend',                                                           '[0, 1, 0, 0]', interval '1 day'),
    ('Prefers tea in the morning',                                                             '[0, 0, 1, 0]', interval '1 day')) v(content, emb, age);
SET agent_memory.neighbour_share = 0;
SET agent_memory.length_prior = 0;
CREATE TEMP TABLE whole AS
SELECT id, score, left(content, 20) AS content FROM agent_memory.memory_recall('hy-long', '[1,0,0,0]'::vector, 3, model => 'h4', touch => false,
                                                                               query_text => 'kayak trip plan');
RESET agent_memory.length_prior;
SELECT content, round(score::numeric, 4) AS whole_fused FROM whole ORDER BY score DESC;
SELECT left(content, 20) AS content, round(score::numeric, 4) AS fused, vector_rank, keyword_rank
  FROM agent_memory.memory_recall('hy-long', '[1,0,0,0]'::vector, 3, model => 'h4', touch => false, query_text => 'kayak trip plan');
-- Exactly (60 / 240) ^ 0.5 of its score for the long one; the others whole.
SELECT w.content, round((r.score / w.score)::numeric, 9) AS prior
  FROM whole w JOIN agent_memory.memory_recall('hy-long', '[1,0,0,0]'::vector, 3, model => 'h4', touch => false,
                                               query_text => 'kayak trip plan') r USING (id)
 WHERE w.score > 0
 ORDER BY w.score DESC;
-- A longer threshold leaves it whole; a vector-only or keyword-only call never weighs by length.
SET agent_memory.length_prior_words = 240;
SELECT bool_and(abs(r.score - w.score) < 1e-12) AS whole_up_to_the_threshold
  FROM whole w JOIN agent_memory.memory_recall('hy-long', '[1,0,0,0]'::vector, 3, model => 'h4', touch => false,
                                               query_text => 'kayak trip plan') r USING (id);
RESET agent_memory.length_prior_words;
SELECT left(content, 20) AS content FROM agent_memory.memory_recall('hy-long', '[1,0,0,0]'::vector, 1, model => 'h4', touch => false);
SELECT left(content, 20) AS content FROM agent_memory.memory_recall('hy-long', NULL::vector, 1, model => 'h4', touch => false, query_text => 'kayak trip plan');
DROP TABLE whole;
DELETE FROM agent_memory.memories WHERE user_id = 'hy-long';
RESET agent_memory.neighbour_share;
-- Reciprocal rank fusion when asked for: the sum of 1 / (60 + rank) over the channels.
SET agent_memory.hybrid_fusion = 'rrf';
SELECT content, round(score::numeric, 5) AS rrf, vector_rank, keyword_rank
  FROM agent_memory.memory_recall('hy-user', '[1,0,0,0]'::vector, 4, model => 'h4', touch => false,
                                  query_text => 'What happened to the refund of order A7731?');
SELECT bool_and(abs(score - (coalesce(1.0 / (60 + vector_rank), 0) + coalesce(1.0 / (60 + keyword_rank), 0))) < 1e-12) AS rrf_exact
  FROM agent_memory.memory_recall('hy-user', '[1,0,0,0]'::vector, 6, model => 'h4', touch => false, query_text => 'refund order A7731 tea');
RESET agent_memory.hybrid_fusion;
-- Words are lower-cased and English endings folded: "hike" meets "hiking".
SELECT content FROM agent_memory.memory_recall('hy-user', NULL::vector, 1, model => 'h4', touch => false, query_text => 'Where does she HIKE?');
-- Chinese has no spaces: character bigrams find 上海 inside 用户住在上海.
SELECT content, keyword_rank FROM agent_memory.memory_recall('hy-user', NULL::vector, 2, model => 'h4', touch => false, query_text => '上海');
-- The settings: candidates per channel, the fusion constant, BM25's constants, an optional
-- recency channel.
SET agent_memory.recency_channel = on;
SELECT content, vector_rank, keyword_rank, recency_rank
  FROM agent_memory.memory_recall('hy-user', '[1,0,0,0]'::vector, 3, model => 'h4', touch => false, query_text => 'refund');
RESET agent_memory.recency_channel;
SET agent_memory.hybrid_candidates = 1;
SELECT content, vector_rank, keyword_rank
  FROM agent_memory.memory_recall('hy-user', '[1,0,0,0]'::vector, 3, model => 'h4', touch => false, query_text => 'tea');
RESET agent_memory.hybrid_candidates;
-- A question with no words (or only common ones) and no vector is an error; with a vector, the
-- keyword channel is just empty.
SELECT * FROM agent_memory.memory_recall('hy-user', NULL::vector, 3, model => 'h4', query_text => '  ?! ');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM agent_memory.memory_recall('hy-user', NULL::vector, 3, model => 'h4', query_text => 'the of and');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM agent_memory.memory_recall('hy-user', '[1,0,0,0]'::vector, 3, model => 'h4', touch => false, query_text => 'the of and');
-- A hybrid recall touches what it returns, like any recall.
SELECT content FROM agent_memory.memory_recall('hy-user', NULL::vector, 1, model => 'h4', query_text => 'tea');
SELECT content, hit_count FROM agent_memory.memories WHERE user_id = 'hy-user' AND hit_count > 0;

-- Maintenance keeps what questions need: episodes past their retention move to the archive,
-- and recall, by vector and by words, still finds them.
UPDATE agent_memory.memories SET expires_at = now() - interval '1 day' WHERE user_id = 'hy-user' AND kind = 'episodic';
SELECT step, rows FROM agent_memory.memory_forget() WHERE step = 'expire';
SELECT count(*) FILTER (WHERE active AND archived_at IS NOT NULL) AS archived, count(*) FILTER (WHERE NOT active) AS retired
  FROM agent_memory.memories WHERE user_id = 'hy-user';
SELECT content, vector_rank, keyword_rank
  FROM agent_memory.memory_recall('hy-user', '[1,0,0,0]'::vector, 2, model => 'h4', touch => false, query_text => 'order A7731');
-- A fact past its retention still retires: a stale fact is wrong, an old event is still true.
INSERT INTO agent_memory.memories (user_id, kind, content, emb, embedding_model, expires_at)
VALUES ('hy-user', 'semantic', 'Current password hint: blue', '[0,1,1,0]', 'h4', now() - interval '1 hour');
SELECT step, rows FROM agent_memory.memory_forget() WHERE step = 'expire';
SELECT content, active, retired_reason FROM agent_memory.memories WHERE content LIKE 'Current password%';
-- Over the capacity, episodes move to the archive too (the capacity counts live memories).
INSERT INTO agent_memory.memories (user_id, kind, content, emb, embedding_model)
SELECT 'cap-user', 'episodic', 'turn ' || i, ARRAY[1, i, 0, 0]::real[]::vector, 'h4' FROM generate_series(1, 6) i;
SET agent_memory.capacity = 4;
SELECT step FROM agent_memory.memory_forget() WHERE step = 'evict';
SELECT count(*) FILTER (WHERE active AND archived_at IS NULL) AS live, count(*) FILTER (WHERE active AND archived_at IS NOT NULL) AS archived,
       count(*) FILTER (WHERE NOT active) AS retired
  FROM agent_memory.memories WHERE user_id = 'cap-user';
-- The archive has its own bound: beyond it, the least recently recalled retire. Of the two
-- archived turns, the older one is recalled now: it is the one kept.
UPDATE agent_memory.memories SET last_hit_at = now() + interval '1 minute'
 WHERE id = (SELECT min(id) FROM agent_memory.memories WHERE user_id = 'cap-user' AND active AND archived_at IS NOT NULL);
SET agent_memory.archive_capacity = 1;
SELECT step FROM agent_memory.memory_forget() WHERE step = 'evict';
SELECT count(*) FILTER (WHERE active AND archived_at IS NOT NULL) AS archived, count(*) FILTER (WHERE NOT active) AS retired
  FROM agent_memory.memories WHERE user_id = 'cap-user';
SELECT last_hit_at > now() AS recalled_last_kept, retired_reason IS NULL AS still_archived
  FROM agent_memory.memories WHERE user_id = 'cap-user' AND active AND archived_at IS NOT NULL;
RESET agent_memory.capacity;
RESET agent_memory.archive_capacity;
