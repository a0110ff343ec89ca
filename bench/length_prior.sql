-- What the length prior costs hybrid recall: a user of 100,000 memories and one of 5,000 (with
-- the feedback: two rankings), 5 to 124 words each, 384 dimensions, packed and vacuumed; 20
-- questions a round, the prior off and on in turn, five rounds. Run in an empty database with
-- vector and agent_memory installable: psql -d <db> -f bench/length_prior.sql (about a minute to
-- load). Figures: docs/quality-round4.md, step 4.
\set ON_ERROR_STOP on
CREATE EXTENSION vector;
CREATE EXTENSION agent_memory;
CREATE TEMP TABLE vocab AS SELECT array['refund','parcel','ordered','hiking','trips','coffee','tea','meeting','project','deadline','birthday','gift','doctor','appointment','flight','hotel','books','movie','guitar','lessons','garden','kitchen','paint','river','mountain','train','ticket','office','school','music'] AS w;
-- 100,000 memories for 'big' and 5,000 for 'mid', 5 to 124 words each, 384 dimensions.
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, kind)
SELECT u, (SELECT string_agg(w[1 + ((g * 31 + j * 17 + g * j) % 30)], ' ') FROM vocab, generate_series(1, 5 + g % 120) j),
       (SELECT l2_normalize(array_agg(sin(g * 0.37 * j + j))::real[]::vector) FROM generate_series(1, 384) j),
       'm384', CASE WHEN g % 3 = 0 THEN 'episodic' ELSE 'semantic' END
  FROM (SELECT 'big' AS u, g FROM generate_series(1, 100000) g UNION ALL SELECT 'mid', g FROM generate_series(1, 5000) g) x;
SELECT agent_memory.memory_pack('big'), agent_memory.memory_pack('mid');
VACUUM ANALYZE agent_memory.memories;
CREATE TABLE qs AS SELECT i, (SELECT l2_normalize(array_agg(cos(i * 1.37 * j + j * 0.29))::real[]::vector) FROM generate_series(1, 384) j) AS q FROM generate_series(1, 20) i;
CREATE FUNCTION ms_per_call(u text, prior text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; n int := 0; r record;
BEGIN
  PERFORM set_config('agent_memory.length_prior', prior, true);
  t0 := clock_timestamp();
  FOR r IN SELECT q FROM qs LOOP
    PERFORM count(*) FROM agent_memory.memory_recall(u, r.q, 10, model => 'm384', touch => false, query_text => 'refund for the parcel I ordered');
    n := n + 1;
  END LOOP;
  RETURN extract(epoch FROM clock_timestamp() - t0) * 1000 / n;
END $$;
SELECT ms_per_call('big', '0.5') > 0 AND ms_per_call('mid', '0.5') > 0 AS warmed;
SELECT round, u, round(ms_per_call(u, '0')::numeric, 2) AS off_ms, round(ms_per_call(u, '0.5')::numeric, 2) AS on_ms
  FROM generate_series(1, 5) round, (VALUES ('mid'), ('big')) v(u);
