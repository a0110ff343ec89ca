-- What long memories' windows (agent_memory.embed_windows) cost vector recall: a user of 5,000
-- memories, 384 dimensions, packed; then 10% and 50% of them with two windows each (a memory with
-- windows is left out of the packs, and recall reads its row and each window). 20 questions a
-- round, five rounds. The windows here are synthetic vectors of the right shape, stored with the
-- write trigger disabled (no model needed): recall does the same work as for real ones. Run in an
-- empty database, as a superuser: psql -d <db> -f bench/windows.sql. Figures:
-- docs/quality-round4.md, step 5.
\set ON_ERROR_STOP on
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS agent_memory;
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, kind)
SELECT 'win', 'memory ' || g || ' about ' || (array['trips','coffee','meetings','gardens','music'])[1 + g % 5],
       (SELECT l2_normalize(array_agg(sin(g * 0.37 * j + j))::real[]::vector) FROM generate_series(1, 384) j),
       'm384', CASE WHEN g % 3 = 0 THEN 'episodic' ELSE 'semantic' END
  FROM generate_series(1, 5000) g;
CREATE TABLE qs AS SELECT i, (SELECT l2_normalize(array_agg(cos(i * 1.37 * j + j * 0.29))::real[]::vector) FROM generate_series(1, 384) j) AS q FROM generate_series(1, 20) i;
CREATE FUNCTION ms_per_call(text_too boolean) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; n int := 0; r record;
BEGIN
  t0 := clock_timestamp();
  FOR r IN SELECT q FROM qs LOOP
    PERFORM count(*) FROM agent_memory.memory_recall('win', r.q, 10, model => 'm384', touch => false,
                                                     query_text => CASE WHEN text_too THEN 'coffee with friends' END);
    n := n + 1;
  END LOOP;
  RETURN extract(epoch FROM clock_timestamp() - t0) * 1000 / n;
END $$;
-- Two windows for every memory whose id is a multiple of `every`, none for the others; repacked.
CREATE FUNCTION with_windows(every int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  ALTER TABLE agent_memory.memories DISABLE TRIGGER memories_before_update;
  UPDATE agent_memory.memories m
     SET emb_windows = CASE WHEN every > 0 AND m.id % every = 0 THEN
           ARRAY[(SELECT l2_normalize(array_agg(sin(m.id * 0.91 * j))::real[]::vector) FROM generate_series(1, 384) j),
                 (SELECT l2_normalize(array_agg(cos(m.id * 0.53 * j))::real[]::vector) FROM generate_series(1, 384) j)] END
   WHERE m.user_id = 'win';
  ALTER TABLE agent_memory.memories ENABLE TRIGGER memories_before_update;
  PERFORM agent_memory.memory_pack('win', 'm384');
END $$;
SELECT with_windows(0);
VACUUM ANALYZE agent_memory.memories;
SELECT ms_per_call(false) > 0 AND ms_per_call(true) > 0 AS warmed;
SELECT 'none' AS windows, round, round(ms_per_call(false)::numeric, 2) AS vector_ms, round(ms_per_call(true)::numeric, 2) AS hybrid_ms
  FROM generate_series(1, 5) round;
SELECT with_windows(10);
VACUUM ANALYZE agent_memory.memories;
SELECT count(emb_windows) AS memories_with_windows FROM agent_memory.memories WHERE user_id = 'win';
SELECT ms_per_call(false) > 0 AS warmed;
SELECT '10%' AS windows, round, round(ms_per_call(false)::numeric, 2) AS vector_ms, round(ms_per_call(true)::numeric, 2) AS hybrid_ms
  FROM generate_series(1, 5) round;
SELECT with_windows(2);
VACUUM ANALYZE agent_memory.memories;
SELECT count(emb_windows) AS memories_with_windows FROM agent_memory.memories WHERE user_id = 'win';
SELECT ms_per_call(false) > 0 AS warmed;
SELECT '50%' AS windows, round, round(ms_per_call(false)::numeric, 2) AS vector_ms, round(ms_per_call(true)::numeric, 2) AS hybrid_ms
  FROM generate_series(1, 5) round;
