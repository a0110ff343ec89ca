-- Packed embeddings (memory_pack, memory_packs, memory_pack_stale): recall reads a user's
-- embeddings quantised to 8 bits, then the rows only of the memories that can make the result.
-- Results must be the same as without packs, whatever has been written since the pack was made.
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, importance, kind)
SELECT 'pack-user', 'packed memory ' || g,
       (SELECT array_agg(sin(g * 0.731 * j + j * j * 0.113))::real[]::vector FROM generate_series(1, 32) j),
       'p32', (g % 11) / 10.0, CASE WHEN g % 5 = 0 THEN 'episodic' ELSE 'semantic' END
  FROM generate_series(1, 600) g;
CREATE TABLE pack_q AS
SELECT i, (SELECT array_agg(cos(i * 1.37 * j + j * 0.29))::real[]::vector FROM generate_series(1, 32) j) AS q
  FROM generate_series(1, 25) i;

-- The ranking with or without packs, as text: ids and scores.
CREATE FUNCTION pg_temp.ranking(packed boolean, q vector, k int, d text, kinds text[], arch boolean, ms float8)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
    PERFORM set_config('agent_memory.packed_recall', packed::text, true);
    SELECT string_agg(t.id || ':' || round(t.score::numeric, 9), ',' ORDER BY t.ord) INTO r
      FROM agent_memory.memory_recall('pack-user', q, k => k, model => 'p32', decay => d, touch => false,
                                      kinds => kinds, archived => arch, min_similarity => ms)
           WITH ORDINALITY AS t(id, content, score, similarity, kind, subject, predicate, object, importance,
                                created_at, path, v, w, x, ord);
    PERFORM set_config('agent_memory.packed_recall', 'on', true);
    RETURN r;
END $$;
-- How many rankings differ between the two paths, over the queries and a spread of options.
CREATE FUNCTION pg_temp.differences() RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FILTER (WHERE pg_temp.ranking(true, q, k, d, kinds, arch, ms) IS DISTINCT FROM
                                  pg_temp.ranking(false, q, k, d, kinds, arch, ms))
      FROM pack_q,
           (VALUES (1, NULL, NULL::text[], true, NULL::float8), (5, NULL, NULL, true, NULL), (20, NULL, NULL, true, NULL),
                   (5, 'none', NULL, true, NULL), (5, 'exponential', NULL, true, NULL), (5, NULL, ARRAY['episodic'], true, NULL),
                   (5, NULL, NULL, false, NULL), (5, 'none', NULL, true, 0.3)) AS o(k, d, kinds, arch, ms)
$$;

-- Before any pack, both paths scan.
SELECT pg_temp.differences();
SELECT agent_memory.memory_pack('pack-user') AS packed;
SELECT part, count(*) AS packs, sum(memories) AS memories, min(pack_no) AS first, max(pack_no) AS last,
       max(length(payload)) < 8100 AS fit_a_page
  FROM agent_memory.memory_packs WHERE user_id = 'pack-user' GROUP BY part ORDER BY part;
SELECT pg_temp.differences();
-- Every setting of decay_scope too.
SET agent_memory.decay_scope = 'all';
SELECT pg_temp.differences();
RESET agent_memory.decay_scope;

-- The packs rule out most memories: a top-5 without decay reads a handful of rows.
SET client_min_messages = debug1;
SELECT count(*) FROM agent_memory.memory_recall('pack-user', (SELECT q FROM pack_q WHERE i = 1), 5, model => 'p32',
                                                decay => 'none', touch => false);
RESET client_min_messages;
-- Above packed_limit memories the packed path steps aside (its memory grows with the user): the
-- rows are read as without packs, and nothing is said.
SET agent_memory.packed_limit = 100;
SET client_min_messages = debug1;
SELECT count(*) FROM agent_memory.memory_recall('pack-user', (SELECT q FROM pack_q WHERE i = 1), 5, model => 'p32',
                                                decay => 'none', touch => false);
RESET client_min_messages;
RESET agent_memory.packed_limit;

-- A packed memory gets a new embedding: recall finds it by the new one.
UPDATE agent_memory.memories SET emb = (SELECT q FROM pack_q WHERE i = 2)
 WHERE id = (SELECT id FROM agent_memory.memories WHERE user_id = 'pack-user' AND content = 'packed memory 300');
SELECT content FROM agent_memory.memory_recall('pack-user', (SELECT q FROM pack_q WHERE i = 2), 1, model => 'p32', touch => false);
SELECT count(*) AS stale FROM agent_memory.memory_pack_stale WHERE user_id = 'pack-user';
SELECT pg_temp.differences();

-- Importance raised above the packed value (reconcile reinforces, consolidation merges).
UPDATE agent_memory.memories SET importance = 1
 WHERE user_id = 'pack-user' AND content IN ('packed memory 11', 'packed memory 22', 'packed memory 33', 'packed memory 44');
-- A touch (last_hit_at, hit_count) or a lower importance marks nothing.
UPDATE agent_memory.memories SET hit_count = hit_count + 1, importance = importance / 2
 WHERE user_id = 'pack-user' AND content = 'packed memory 7';
SELECT count(*) AS stale FROM agent_memory.memory_pack_stale WHERE user_id = 'pack-user';
SELECT pg_temp.differences();

-- New memories, in no pack.
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, importance)
SELECT 'pack-user', 'new memory ' || i, q, 'p32', 0.5 FROM pack_q WHERE i IN (3, 4);
SELECT content FROM agent_memory.memory_recall('pack-user', (SELECT q FROM pack_q WHERE i = 3), 1, model => 'p32', touch => false);
SELECT pg_temp.differences();

-- Retired, archived and expired memories stay packed until the next rebuild; recall skips them.
UPDATE agent_memory.memories SET active = false, retired_at = now(), retired_reason = 'deleted'
 WHERE user_id = 'pack-user' AND content = 'new memory 3';
UPDATE agent_memory.memories SET archived_at = now()
 WHERE user_id = 'pack-user' AND content IN ('packed memory 100', 'packed memory 200');
UPDATE agent_memory.memories SET expires_at = now() - interval '1 day'
 WHERE user_id = 'pack-user' AND content IN ('packed memory 101', 'packed memory 201');
SELECT content FROM agent_memory.memory_recall('pack-user', (SELECT q FROM pack_q WHERE i = 3), 1, model => 'p32', touch => false);
SELECT pg_temp.differences();

-- A memory deleted and written again under its id, with another embedding.
CREATE TABLE pack_moved AS
SELECT id FROM agent_memory.memories WHERE user_id = 'pack-user' AND content = 'packed memory 400';
DELETE FROM agent_memory.memories WHERE id = (SELECT id FROM pack_moved);
INSERT INTO agent_memory.memories (id, user_id, content, emb, embedding_model, importance)
SELECT (SELECT id FROM pack_moved), 'pack-user', 'written again', q, 'p32', 0.5 FROM pack_q WHERE i = 5;
SELECT content FROM agent_memory.memory_recall('pack-user', (SELECT q FROM pack_q WHERE i = 5), 1, model => 'p32', touch => false);
SELECT pg_temp.differences();

-- A rebuild covers all of it and clears the marks.
SELECT agent_memory.memory_pack('pack-user', 'p32') AS packed;
SELECT count(*) AS stale FROM agent_memory.memory_pack_stale WHERE user_id = 'pack-user';
SELECT pg_temp.differences();

-- Wide embeddings (2,000 dimensions): three to a pack, so a rebuild writes its packs in
-- several statements as it reads; and embeddings too wide for a page get no pack.
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model)
SELECT 'wide-user', 'wide memory ' || g,
       (SELECT array_agg(sin(g * 0.37 * j + j * 0.011))::real[]::vector FROM generate_series(1, 2000) j), 'p2000'
  FROM generate_series(1, 200) g;
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model)
SELECT 'wide-user', 'too wide ' || g,
       (SELECT array_agg(cos(g * 0.37 * j))::real[]::vector FROM generate_series(1, 8100) j), 'p8100'
  FROM generate_series(1, 3) g;
SELECT agent_memory.memory_pack('wide-user') AS packed;
SELECT embedding_model, count(*) AS packs, min(pack_no), max(pack_no), sum(memories) AS memories
  FROM agent_memory.memory_packs WHERE user_id = 'wide-user' AND part = 'embeddings' GROUP BY 1;
CREATE FUNCTION pg_temp.wide_ranking(packed boolean, q vector) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
    PERFORM set_config('agent_memory.packed_recall', packed::text, true);
    SELECT string_agg(t.id || ':' || round(t.score::numeric, 9), ',' ORDER BY t.ord) INTO r
      FROM agent_memory.memory_recall('wide-user', q, 5, model => 'p2000', touch => false)
           WITH ORDINALITY AS t(id, content, score, similarity, kind, subject, predicate, object, importance,
                                created_at, path, v, w, x, ord);
    PERFORM set_config('agent_memory.packed_recall', 'on', true);
    RETURN r;
END $$;
SELECT count(*) FILTER (WHERE pg_temp.wide_ranking(true, q) IS DISTINCT FROM pg_temp.wide_ranking(false, q)) AS differences
  FROM (SELECT (SELECT array_agg(cos(i * 0.5 * j))::real[]::vector FROM generate_series(1, 2000) j) AS q
          FROM generate_series(1, 5) i) x;
SELECT content FROM agent_memory.memory_recall('wide-user',
    (SELECT array_agg(cos(2 * 0.37 * j))::real[]::vector FROM generate_series(1, 8100) j), 1, model => 'p8100', touch => false);

-- In a transaction: its own writes, and a rollback.
BEGIN;
UPDATE agent_memory.memories SET emb = (SELECT q FROM pack_q WHERE i = 6)
 WHERE user_id = 'pack-user' AND content = 'packed memory 500';
SELECT content FROM agent_memory.memory_recall('pack-user', (SELECT q FROM pack_q WHERE i = 6), 1, model => 'p32', touch => false);
SELECT pg_temp.differences();
ROLLBACK;
SELECT pg_temp.differences();

-- A role that works for the user (row-level security), reading through the packs.
CREATE ROLE pack_reader;
SELECT agent_memory.grant_access('pack_reader', 'reader');
SET ROLE pack_reader;
SET agent_memory.user_id = 'pack-user';
SELECT content FROM agent_memory.memory_recall('pack-user', (SELECT '[' || array_to_string(q::real[], ',') || ']' FROM (VALUES (
    (SELECT array_agg(cos(2 * 1.37 * j + j * 0.29))::real[]::text FROM generate_series(1, 32) j))) v(q))::text, 1, model => 'p32', touch => false);
-- It cannot pack, nor read the packs.
SELECT agent_memory.memory_pack('pack-user');
SELECT count(*) FROM agent_memory.memory_packs;
RESET agent_memory.user_id;
RESET ROLE;

-- Bad input.
SELECT agent_memory.memory_pack(NULL);
SELECT agent_memory.memory_pack('  ');
SELECT agent_memory.memory_pack('nobody-here') AS packed;
SELECT count(*) FROM agent_memory.memory_recall('pack-user', '[1,2,3]'::vector, 1, model => 'p32', touch => false);
-- A rebuild reads the rows after taking the user's pack lock, so it needs READ COMMITTED.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT agent_memory.memory_pack('pack-user');
ROLLBACK;

-- Forgetting's purge deletes retired memories past the regret window and marks those a pack
-- holds in the same statement (the row trigger stands aside).
CREATE TABLE pack_purged AS
SELECT id FROM agent_memory.memories WHERE user_id = 'pack-user' AND content IN ('packed memory 150', 'packed memory 151');
UPDATE agent_memory.memories SET active = false, retired_at = now() - interval '400 days', retired_reason = 'deleted'
 WHERE id IN (SELECT id FROM pack_purged);
SELECT count(*) AS marked_before FROM agent_memory.memory_pack_stale WHERE id IN (SELECT id FROM pack_purged);
SELECT rows > 0 AS purged FROM agent_memory.memory_forget() WHERE step = 'purge';
SELECT (SELECT count(*) FROM agent_memory.memories WHERE id IN (SELECT id FROM pack_purged)) AS left_over,
       (SELECT count(*) FROM agent_memory.memory_pack_stale WHERE id IN (SELECT id FROM pack_purged)) AS marked;
SELECT agent_memory.pack_deletes_marked() AS still_set;
SELECT pg_temp.differences();
-- A delete by hand is marked by the row trigger.
CREATE TABLE pack_deleted AS SELECT id FROM agent_memory.memories WHERE user_id = 'pack-user' AND content = 'packed memory 152';
DELETE FROM agent_memory.memories WHERE id IN (SELECT id FROM pack_deleted);
SELECT count(*) AS marked FROM agent_memory.memory_pack_stale WHERE id IN (SELECT id FROM pack_deleted);

-- Erasure deletes the user's packs and marks with the rest, here by an admin that is no
-- superuser: its deletes run the row trigger (its condition, and the marks it writes), and it
-- rebuilds a user's packs first.
UPDATE agent_memory.memories SET importance = 1 WHERE user_id = 'pack-user' AND content = 'packed memory 1';
CREATE ROLE pack_admin;
SELECT agent_memory.grant_access('pack_admin', 'admin');
SET ROLE pack_admin;
SELECT agent_memory.memory_pack('pack-user') AS packed;
DELETE FROM agent_memory.memories WHERE user_id = 'pack-user' AND content = 'packed memory 153';
SELECT count(*) AS marked FROM agent_memory.memory_pack_stale WHERE user_id = 'pack-user';
SELECT memories FROM agent_memory.memory_erase('pack-user');
RESET ROLE;
SELECT (SELECT count(*) FROM agent_memory.memory_packs WHERE user_id = 'pack-user') AS packs,
       (SELECT count(*) FROM agent_memory.memory_pack_stale WHERE user_id = 'pack-user') AS stale;

-- Hybrid and keyword recall through the packs. A packed memory's words are counted from its
-- pack when nothing about it can differ from its row: not marked stale, one index entry, and a
-- heap page the visibility map calls visible to all (after a vacuum); otherwise from its row.
-- Rankings, scores, similarities and channel ranks must be those of reading every row, after
-- each kind of write, with and without a vacuum since.
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, importance, kind)
SELECT 'kw-user',
       'Note ' || g || ': ' || array_to_string(ARRAY(
           SELECT (ARRAY['refund', 'parcel', 'ordered', 'hiking', 'trips', 'coffee', 'tea', 'meeting', 'project',
                         'deadline', 'birthday', 'gift', 'doctor', 'appointment', 'flight', 'hotel', 'books', 'movie',
                         'guitar', 'lessons'])[1 + ((g * 7 + j * 13 + g * j * 3) % 20)]
             FROM generate_series(1, 2 + g % 9) j), ' '),
       (SELECT array_agg(sin(g * 0.517 * j + j * 0.07))::real[]::vector FROM generate_series(1, 32) j),
       'p32', (g % 7) / 6.0, CASE WHEN g % 4 = 0 THEN 'episodic' ELSE 'semantic' END
  FROM generate_series(1, 400) g;
-- (Scores to 6 decimals: convex fusion scales similarities by their range in the list, and a
-- similarity read from a row and one counted for a pack agree to float rounding.)
-- The length prior from 5 words (the notes have 3 to 11): a memory's length in words, counted
-- from its pack or from its row, weighs its fused score the same.
CREATE FUNCTION pg_temp.hybrid(packed boolean, q vector, txt text, k int, kinds text[], arch boolean, ms float8)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
    PERFORM set_config('agent_memory.packed_recall', packed::text, true);
    PERFORM set_config('agent_memory.length_prior_words', '5', true);
    SELECT string_agg(concat_ws(':', t.id, round(t.score::numeric, 6), round(t.similarity::numeric, 6), t.v, t.w),
                      ',' ORDER BY t.ord) INTO r
      FROM agent_memory.memory_recall('kw-user', q, k => k, model => 'p32', touch => false, query_text => txt,
                                      kinds => kinds, archived => arch, min_similarity => ms)
           WITH ORDINALITY AS t(id, content, score, similarity, kind, subject, predicate, object, importance,
                                created_at, path, v, w, x, ord);
    PERFORM set_config('agent_memory.packed_recall', 'on', true);
    RETURN r;
END $$;
-- Fifteen questions (every fifth by its words alone) and five option sets.
CREATE FUNCTION pg_temp.hybrid_differences() RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FILTER (WHERE pg_temp.hybrid(true, qv, txt, k, kinds, arch, ms) IS DISTINCT FROM
                                  pg_temp.hybrid(false, qv, txt, k, kinds, arch, ms))
      FROM (SELECT CASE WHEN i % 5 = 0 THEN NULL ELSE q END AS qv,
                   (ARRAY['the refund for the parcel I ordered', 'hiking trip', 'coffee or tea?', 'doctor appointment deadline',
                          'birthday gift books', 'flight and hotel', 'guitar lessons movie', 'projects meetings'])[1 + i % 8] AS txt
              FROM pack_q WHERE i <= 15) x,
           (VALUES (5, NULL::text[], true, NULL::float8), (20, NULL, true, NULL), (5, ARRAY['episodic'], true, NULL),
                   (5, NULL, false, NULL), (5, NULL, true, 0.2)) AS o(k, kinds, arch, ms)
$$;
SELECT agent_memory.memory_pack('kw-user') AS packed;
SELECT pg_temp.hybrid_differences();
VACUUM agent_memory.memories;
SELECT pg_temp.hybrid_differences();
-- A long question (every word of the notes, and 300 that are in none) and one whose words are in
-- no note: the packs' dictionaries give the same counts as the rows.
SELECT t.n, count(*) AS questions,
       count(*) FILTER (WHERE pg_temp.hybrid(true, q, txt, 10, NULL, true, NULL) IS NOT DISTINCT FROM pg_temp.hybrid(false, q, txt, 10, NULL, true, NULL)
                          AND pg_temp.hybrid(true, NULL, txt, 10, NULL, true, NULL) IS NOT DISTINCT FROM pg_temp.hybrid(false, NULL, txt, 10, NULL, true, NULL)) AS same,
       count(*) FILTER (WHERE pg_temp.hybrid(true, NULL, txt, 10, NULL, true, NULL) IS NOT NULL) AS keyword_results
  FROM pack_q,
       (VALUES (1, 'refund parcel ordered hiking trips coffee tea meeting project deadline birthday gift doctor appointment '
                   'flight hotel books movie guitar lessons ' || (SELECT string_agg('zz' || j, ' ') FROM generate_series(1, 300) j)),
               (2, 'kayaks xylophones')) AS t(n, txt)
 WHERE i <= 3 GROUP BY t.n ORDER BY t.n;
-- After the vacuum, a hybrid top-5 reads the rows of the vector ranking's pool only (in each of
-- its two rankings: the second with the query moved towards the first one's best hits).
SET client_min_messages = debug1;
SELECT count(*) FROM agent_memory.memory_recall('kw-user', (SELECT q FROM pack_q WHERE i = 1), 5, model => 'p32',
                                                query_text => 'hiking trip', touch => false);
SELECT count(*) FROM agent_memory.memory_recall('kw-user', NULL::vector, 5, model => 'p32',
                                                query_text => 'hiking trip', touch => false);
RESET client_min_messages;

-- Each kind of write a packed memory's words or filters can see; then a vacuum, which makes the
-- pages visible to all again while the packs still hold the old values (the marks decide).
UPDATE agent_memory.memories SET content = 'Note: guitar guitar lessons refund'
 WHERE user_id = 'kw-user' AND content LIKE 'Note 10:%';
UPDATE agent_memory.memories SET kind = 'episodic' WHERE user_id = 'kw-user' AND content LIKE 'Note 11:%';
UPDATE agent_memory.memories SET archived_at = now() WHERE user_id = 'kw-user' AND content LIKE 'Note 12:%';
UPDATE agent_memory.memories SET expires_at = now() - interval '1 hour' WHERE user_id = 'kw-user' AND content LIKE 'Note 13:%';
UPDATE agent_memory.memories SET valid_until = now() - interval '1 hour' WHERE user_id = 'kw-user' AND content LIKE 'Note 14:%';
UPDATE agent_memory.memories SET active = false, retired_at = now(), retired_reason = 'deleted'
 WHERE user_id = 'kw-user' AND content LIKE 'Note 15:%';
UPDATE agent_memory.memories SET last_hit_at = now(), hit_count = hit_count + 1 WHERE user_id = 'kw-user' AND content LIKE 'Note 16:%';
CREATE TABLE kw_moved AS SELECT id FROM agent_memory.memories WHERE user_id = 'kw-user' AND content LIKE 'Note 17:%';
DELETE FROM agent_memory.memories WHERE id = (SELECT id FROM kw_moved);
INSERT INTO agent_memory.memories (id, user_id, content, emb, embedding_model, importance)
SELECT (SELECT id FROM kw_moved), 'kw-user', 'Written again: hiking hiking trips', q, 'p32', 0.5 FROM pack_q WHERE i = 7;
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, importance)
SELECT 'kw-user', 'New: coffee coffee tea refund', q, 'p32', 0.5 FROM pack_q WHERE i IN (8, 9);
SELECT count(*) AS stale FROM agent_memory.memory_pack_stale WHERE user_id = 'kw-user';
SELECT pg_temp.hybrid_differences();
-- What a result shows (text, kind, subject, predicate, object, importance, created_at) is its row
-- as the statement sees it, also when recall read it through the packs and found the row again
-- where the index points (a new version since, a lower importance, a fact's parts set).
UPDATE agent_memory.memories SET subject = 'user', predicate = 'plays', object = 'guitar',
       content = 'Note: the user plays guitar, lessons on Tuesdays'
 WHERE user_id = 'kw-user' AND content LIKE 'Note 18:%';
UPDATE agent_memory.memories SET importance = importance / 2 WHERE user_id = 'kw-user' AND content LIKE 'Note 2_:%';
CREATE FUNCTION pg_temp.details_differences() RETURNS TABLE (results bigint, differing bigint) LANGUAGE sql AS $$
    SELECT count(*), count(*) FILTER (WHERE
               (r.content, r.kind, r.subject, r.predicate, r.object, r.importance, r.created_at) IS DISTINCT FROM
               (m.content, m.kind, m.subject, m.predicate, m.object, m.importance, m.created_at))
      FROM pack_q,
           LATERAL (VALUES (q, NULL::text), (q, 'guitar lessons hiking trip'), (NULL::vector, 'guitar lessons refund')) AS c(qv, txt),
           LATERAL agent_memory.memory_recall('kw-user', c.qv, 20, model => 'p32', touch => false, query_text => c.txt) r
           LEFT JOIN agent_memory.memories m ON m.id = r.id
     WHERE pack_q.i <= 10
$$;
SELECT * FROM pg_temp.details_differences();
SELECT count(*) AS with_the_fact FROM pack_q, agent_memory.memory_recall('kw-user', q, 20, model => 'p32', touch => false,
                                                                          query_text => 'guitar lessons') r
 WHERE r.subject = 'user' AND r.object = 'guitar';
VACUUM agent_memory.memories;
SELECT pg_temp.hybrid_differences();
SELECT * FROM pg_temp.details_differences();
-- Other tokenizer settings than the packs were made with: the words are counted from the rows.
SET agent_memory.keyword_stemming = off;
SELECT pg_temp.hybrid_differences();
RESET agent_memory.keyword_stemming;
-- A transaction's own writes, then a rollback.
BEGIN;
UPDATE agent_memory.memories SET content = 'Note: doctor doctor appointment' WHERE user_id = 'kw-user' AND content LIKE 'Note 20:%';
SELECT pg_temp.hybrid_differences();
ROLLBACK;
-- Forgetting's eviction archives the episodes above capacity (and retires the rest), marking
-- what it archives in the same statement (the row trigger stands aside).
CREATE TABLE kw_archived AS SELECT id FROM agent_memory.memories WHERE user_id = 'kw-user' AND archived_at IS NOT NULL;
SET agent_memory.capacity = 350;
SELECT rows > 0 AS evicted FROM agent_memory.memory_forget() WHERE step = 'evict';
RESET agent_memory.capacity;
SELECT count(*) > 0 AS archived, count(*) FILTER (WHERE NOT EXISTS (
           SELECT 1 FROM agent_memory.memory_pack_stale s WHERE s.id = m.id)) AS not_marked
  FROM agent_memory.memories m
 WHERE m.user_id = 'kw-user' AND m.active AND m.archived_at IS NOT NULL AND m.id NOT IN (SELECT id FROM kw_archived);
SELECT agent_memory.pack_deletes_marked() AS still_set;
VACUUM agent_memory.memories;
SELECT pg_temp.hybrid_differences();
-- A role that works for the user (row-level security) counts words from the packs too.
SET ROLE pack_reader;
SET agent_memory.user_id = 'kw-user';
SELECT pg_temp.hybrid(true, v, t, 5, NULL, true, NULL) = pg_temp.hybrid(false, v, t, 5, NULL, true, NULL) AS same_hybrid,
       pg_temp.hybrid(true, NULL, t, 5, NULL, true, NULL) = pg_temp.hybrid(false, NULL, t, 5, NULL, true, NULL) AS same_keyword
  FROM (SELECT (SELECT array_agg(cos(3 * 1.37 * j + j * 0.29))::real[]::vector FROM generate_series(1, 32) j) AS v,
               'hiking trip' AS t) x;
RESET agent_memory.user_id;
RESET ROLE;
-- A rebuild covers it all again.
SELECT agent_memory.memory_pack('kw-user') AS packed;
VACUUM agent_memory.memories;
SELECT count(*) AS stale FROM agent_memory.memory_pack_stale WHERE user_id = 'kw-user';
SELECT pg_temp.hybrid_differences();
-- A memory whose text is too long for a pack is packed without its words, and read.
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model)
SELECT 'kw-user', (SELECT string_agg('word' || j, ' ') FROM generate_series(1, 2000) j) || ' hiking',
       q, 'p32' FROM pack_q WHERE i = 10;
SELECT agent_memory.memory_pack('kw-user') AS packed;
VACUUM agent_memory.memories;
SELECT pg_temp.hybrid_differences();
SELECT content LIKE 'word1 %' AS long_text_found
  FROM agent_memory.memory_recall('kw-user', NULL::vector, 1, model => 'p32', query_text => 'word1999', touch => false);
-- The visibility map alone keeps a changed row from being counted from its pack: with the
-- triggers off there is no stale mark, and one memory is deleted on every other heap page of
-- the user. Those pages are no longer visible to all, so their memories are read from the rows
-- (a deleted one is no candidate); the pages between them are still counted from the packs.
-- The packed rankings are taken first: reading every row through the index marks the deleted
-- rows' entries dead, and later calls would not meet them.
CREATE TABLE kw_hidden AS
SELECT DISTINCT ON ((ctid::text::point)[0]) id FROM agent_memory.memories
 WHERE user_id = 'kw-user' AND active AND (ctid::text::point)[0]::int % 2 = 1
   AND content ~ '(hiking|refund|coffee|guitar|doctor|birthday|flight|project)'
 ORDER BY (ctid::text::point)[0], id;
SELECT count(*) >= 3 AS pages FROM kw_hidden;
SET session_replication_role = replica;
DELETE FROM agent_memory.memories WHERE id IN (SELECT id FROM kw_hidden);
RESET session_replication_role;
SELECT count(*) AS stale FROM agent_memory.memory_pack_stale WHERE user_id = 'kw-user';
CREATE TABLE kw_hidden_packed AS
SELECT i, qv, txt, pg_temp.hybrid(true, qv, txt, 5, NULL, true, NULL) AS ranking
  FROM (SELECT i, CASE WHEN i % 2 = 0 THEN NULL ELSE q END AS qv,
               (ARRAY['the refund for the parcel I ordered', 'hiking trip', 'coffee or tea?', 'doctor appointment deadline',
                      'birthday gift books', 'flight and hotel', 'guitar lessons movie', 'projects meetings'])[1 + i % 8] AS txt
          FROM pack_q WHERE i <= 8) x;
SELECT count(*) AS questions, count(*) FILTER (WHERE ranking IS DISTINCT FROM pg_temp.hybrid(false, qv, txt, 5, NULL, true, NULL)) AS differences
  FROM kw_hidden_packed;
DROP TABLE kw_moved, kw_archived, kw_hidden, kw_hidden_packed;

SELECT agent_memory.revoke_access('pack_reader');
SELECT agent_memory.revoke_access('pack_admin');
DROP ROLE pack_reader, pack_admin;
DROP TABLE pack_q, pack_moved, pack_purged, pack_deleted;
