-- Storage of 512-dimension embeddings, measured: pgvector's default (EXTERNAL: a 2,056-byte
-- vector is moved out of line, since it is over the 2,032-byte TOAST threshold), the table
-- kept in line (toast_tuple_target = 8160, what agent_memory uses), PLAIN storage, and halfvec.
-- The same 50 users × 1,000 rows in each; each variant ranks one user's rows exactly by cosine
-- distance, 200 times. Run by `bench/run.sh storage`.
\set QUIET on
\pset footer off
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS vector;
DROP TABLE IF EXISTS s_source, s_external, s_inline, s_plain, s_halfvec;
SELECT setseed(0.5);
CREATE TABLE s_source AS
SELECT (i % 50) AS user_id, ARRAY(SELECT random()::real - 0.5 FROM generate_series(1, 512 + 0 * i)) AS v
  FROM generate_series(1, 50000) i;
CREATE TABLE s_external (user_id int, emb vector(512));
CREATE TABLE s_inline (user_id int, emb vector(512)) WITH (toast_tuple_target = 8160);
CREATE TABLE s_plain (user_id int, emb vector(512));
ALTER TABLE s_plain ALTER COLUMN emb SET STORAGE PLAIN;
CREATE TABLE s_halfvec (user_id int, emb halfvec(512));
INSERT INTO s_external SELECT user_id, v::vector FROM s_source;
INSERT INTO s_inline SELECT user_id, v::vector FROM s_source;
INSERT INTO s_plain SELECT user_id, v::vector FROM s_source;
INSERT INTO s_halfvec SELECT user_id, v::vector::halfvec FROM s_source;
CREATE INDEX ON s_external (user_id);
CREATE INDEX ON s_inline (user_id);
CREATE INDEX ON s_plain (user_id);
CREATE INDEX ON s_halfvec (user_id);
VACUUM ANALYZE s_external, s_inline, s_plain, s_halfvec;

CREATE TEMP TABLE results (storage text, ms_per_ranking numeric, table_mb numeric, toast_mb numeric);
DO $$
DECLARE
  t text;
  q vector := (SELECT v::vector FROM s_source LIMIT 1);
  started timestamptz;
  n int;
BEGIN
  FOREACH t IN ARRAY ARRAY['s_external', 's_inline', 's_plain', 's_halfvec'] LOOP
    -- warm up, then time 200 rankings of user 7's 1,000 rows
    FOR i IN 1..20 LOOP
      EXECUTE format('SELECT count(*) FROM (SELECT 1 FROM %I WHERE user_id = 7 ORDER BY emb <=> $1%s LIMIT 10) s',
                     t, CASE WHEN t = 's_halfvec' THEN '::halfvec' ELSE '' END) INTO n USING q;
    END LOOP;
    started := clock_timestamp();
    FOR i IN 1..200 LOOP
      EXECUTE format('SELECT count(*) FROM (SELECT 1 FROM %I WHERE user_id = 7 ORDER BY emb <=> $1%s LIMIT 10) s',
                     t, CASE WHEN t = 's_halfvec' THEN '::halfvec' ELSE '' END) INTO n USING q;
    END LOOP;
    INSERT INTO results VALUES (
      t,
      round(extract(epoch FROM clock_timestamp() - started)::numeric * 1000 / 200, 3),
      round(pg_relation_size(t::regclass) / 1048576.0, 1),
      round(coalesce(pg_relation_size((SELECT reltoastrelid FROM pg_class WHERE oid = t::regclass)), 0) / 1048576.0, 1));
  END LOOP;
END $$;
\echo
\echo '| storage | ms per exact ranking of 1,000 rows | heap MB | TOAST MB |'
\echo '|---|---|---|---|'
SELECT format('| %s | %s | %s | %s |', storage, ms_per_ranking, table_mb, toast_mb) FROM results \g (format=unaligned tuples_only)
DROP TABLE s_source, s_external, s_inline, s_plain, s_halfvec;
