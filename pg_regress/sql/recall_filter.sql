-- (a) 50 users × 1,000 memories with an HNSW index present. A plain filtered
-- ORDER BY emb <=> q LIMIT 5 walks the index first and filters after, so it
-- returns fewer than 5 rows for most users; memory_recall filters first and
-- returns exactly 5 for every user, equal to a brute-force exact ranking.
SELECT setseed(0.42);
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, importance, last_hit_at)
SELECT 'user-' || lpad(u::text, 2, '0'),
       'memory ' || u || '-' || i,
       ARRAY(SELECT random() - 0.5 FROM generate_series(1, 32 + 0 * i))::vector,
       'm32',
       round(random()::numeric, 2),
       now() - make_interval(mins => (random() * 100000)::int)
  FROM generate_series(1, 50) u, generate_series(1, 1000) i;
-- pgvector needs a fixed dimension for an index: one expression index per model.
CREATE INDEX memories_m32_hnsw ON agent_memory.memories
 USING hnsw ((emb::vector(32)) vector_cosine_ops) WITH (m = 8, ef_construction = 32)
 WHERE embedding_model = 'm32';
ANALYZE agent_memory.memories;
CREATE TEMP TABLE queries AS
SELECT 'user-' || lpad(u::text, 2, '0') AS user_id,
       ARRAY(SELECT random() - 0.5 FROM generate_series(1, 32 + 0 * u))::vector(32) AS q
  FROM generate_series(1, 50) u;

-- The plain query uses the HNSW index ...
PREPARE plain(text, vector(32)) AS
SELECT id FROM agent_memory.memories
 WHERE user_id = $1 AND active AND embedding_model = 'm32'
 ORDER BY emb::vector(32) <=> $2 LIMIT 5;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE plain('user-01', NULL);
RESET plan_cache_mode;
-- ... and comes back short for most users (the index's 40 nearest hold about
-- 2% of any one user's rows).
CREATE TEMP TABLE plain_counts AS
SELECT q.user_id,
       (SELECT count(*) FROM (SELECT m.id FROM agent_memory.memories m
                               WHERE m.user_id = q.user_id AND m.active AND m.embedding_model = 'm32'
                               ORDER BY m.emb::vector(32) <=> q.q LIMIT 5) s) AS n
  FROM queries q;
SELECT count(*) AS users,
       count(*) FILTER (WHERE n < 5) > 25 AS most_users_get_fewer_than_5
  FROM plain_counts;

-- memory_recall: 5 rows for every user, exactly the brute-force top 5 by
-- similarity × 0.995^hours × (0.8 + 0.4 × importance) when every memory decays (the brief's
-- reference, decay_scope = 'all').
SET agent_memory.decay_scope = 'all';
CREATE TEMP TABLE compared AS
SELECT q.user_id,
       ARRAY(SELECT r.id FROM agent_memory.memory_recall(q.user_id, q.q, 5, model => 'm32', touch => false) r) AS got,
       ARRAY(SELECT m.id FROM agent_memory.memories m
              WHERE m.user_id = q.user_id AND m.active AND m.embedding_model = 'm32'
              ORDER BY (1 - (m.emb <=> q.q::vector))
                       * power(0.995::float8, extract(epoch FROM now() - m.last_hit_at)::float8 / 3600)
                       * (0.8 + 0.4 * m.importance) DESC, m.id DESC
              LIMIT 5) AS want
  FROM queries q;
SELECT count(*) AS users,
       count(*) FILTER (WHERE cardinality(got) = 5) AS users_with_5_rows,
       count(*) FILTER (WHERE got = want) AS users_equal_to_brute_force
  FROM compared;
RESET agent_memory.decay_scope;

-- The scores are real cosine similarities and come back best first.
SELECT bool_and(r.similarity BETWEEN -1 AND 1) AS similarity_in_range,
       bool_and(abs(r.similarity - (1 - (m.emb <=> q.q::vector))) < 1e-5) AS similarity_is_cosine
  FROM queries q
 CROSS JOIN LATERAL agent_memory.memory_recall(q.user_id, q.q, 5, model => 'm32', touch => false) r
  JOIN agent_memory.memories m ON m.id = r.id;
SELECT bool_and(sorted) AS best_first FROM (
  SELECT q.user_id,
         ARRAY(SELECT r.score FROM agent_memory.memory_recall(q.user_id, q.q, 10, model => 'm32', touch => false) r)
         = ARRAY(SELECT r.score FROM agent_memory.memory_recall(q.user_id, q.q, 10, model => 'm32', touch => false) r
                  ORDER BY r.score DESC) AS sorted
    FROM queries q) s;

-- A halfvec query ranks the same memories.
SELECT count(*) FILTER (WHERE
         ARRAY(SELECT id FROM agent_memory.memory_recall(q.user_id, q.q::halfvec, 5, model => 'm32', touch => false))
       = ARRAY(SELECT id FROM agent_memory.memory_recall(q.user_id, q.q::vector, 5, model => 'm32', touch => false)))
       AS users_same_with_halfvec
  FROM queries q;

-- k larger than the user's candidates returns every candidate, never fewer.
SELECT count(*) FROM agent_memory.memory_recall('user-07', (SELECT q FROM queries WHERE user_id = 'user-07'),
                                                1000, model => 'm32', touch => false);
-- min_similarity and kinds narrow the candidates.
SELECT count(*) > 0 AND bool_and(similarity >= 0.3) AS only_similar
  FROM agent_memory.memory_recall('user-07', (SELECT q FROM queries WHERE user_id = 'user-07'),
                                  1000, model => 'm32', min_similarity => 0.3, touch => false);
SELECT count(*) AS episodic_only
  FROM agent_memory.memory_recall('user-07', (SELECT q FROM queries WHERE user_id = 'user-07'),
                                  5, model => 'm32', kinds => ARRAY['episodic'], touch => false);
-- Another model's memories are never met.
SELECT count(*) AS other_model
  FROM agent_memory.memory_recall('user-07', (SELECT q FROM queries WHERE user_id = 'user-07'),
                                  5, model => 'another-model', touch => false);

-- Large users: above agent_memory.exact_limit candidates, recall ranks the candidates of the
-- model's HNSW index, made by memory_create_index, and says which path ran. Without an index,
-- or below the limit, recall is exact.
SELECT DISTINCT path FROM queries q,
       LATERAL agent_memory.memory_recall(q.user_id, q.q, 5, model => 'm32', touch => false);
SET agent_memory.exact_limit = 500;
SELECT DISTINCT path FROM queries q,
       LATERAL agent_memory.memory_recall(q.user_id, q.q, 5, model => 'm32', touch => false);
SELECT agent_memory.memory_create_index('m32', m => 8, ef_construction => 32) = 'memories_hnsw_' || left(md5('m32'), 16) AS index_named;
SELECT path, count(*) AS rows, count(DISTINCT q.user_id) AS users FROM queries q,
       LATERAL agent_memory.memory_recall(q.user_id, q.q, 5, model => 'm32', touch => false) r
 GROUP BY path;
RESET agent_memory.exact_limit;
SELECT DISTINCT path FROM queries q,
       LATERAL agent_memory.memory_recall(q.user_id, q.q, 5, model => 'm32', touch => false);
SELECT agent_memory.memory_create_index('no-such-model');
SELECT agent_memory.memory_create_index('m32', m => 1);

DEALLOCATE plain;
DROP INDEX agent_memory.memories_m32_hnsw;
DELETE FROM agent_memory.memories;
