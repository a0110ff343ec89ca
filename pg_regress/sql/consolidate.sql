-- Consolidation: duplicates merged, old episodes summarised into a memory that keeps its
-- evidence, one-off items archived; nothing deleted, and recall's top 5 covers 5 facts.
\set VERBOSITY default
\set SHOW_CONTEXT never
TRUNCATE agent_memory.memories, agent_memory.runs, agent_memory.maintenance_state;

-- 14 rows about 5 facts. Editor, language and diet are exact duplicates by (predicate,
-- object) under different subjects; the time zone and the pet are paraphrases whose
-- embeddings are near-duplicates (cosine above agent_memory.merge_similarity, 0.92).
INSERT INTO agent_memory.memories (user_id, kind, subject, predicate, object, content, emb, embedding_model, importance, created_at) VALUES
 ('ada', 'semantic', 'user',     'editor',   'neovim',     'Prefers neovim as editor',        '[1,0.2,0.2,0.2,0.2,0.05,0,0,0,0,0]', 'c6', 0.5, now() - interval '44 days'),
 ('ada', 'semantic', 'ada',      'editor',   'Neovim',     'Ada edits in neovim',             '[1,0.2,0.2,0.2,0.2,0.06,0,0,0,0,0]', 'c6', 0.5, now() - interval '43 days'),
 ('ada', 'semantic', 'me',       'editor',   'neovim ',    'I use neovim',                    '[1,0.2,0.2,0.2,0.2,0.04,0,0,0,0,0]', 'c6', 0.5, now() - interval '42 days'),
 ('ada', 'semantic', NULL,       'editor',   'neovim',     'Editor: neovim',                  '[1,0.2,0.2,0.2,0.2,0.07,0,0,0,0,0]', 'c6', 0.5, now() - interval '41 days'),
 ('ada', 'semantic', 'user',     'language', 'English',    'Speaks English',                  '[0.1,1,0.1,0.1,0.1,0.05,0,0,0,0,0]', 'c6', 0.5, now() - interval '40 days'),
 ('ada', 'semantic', 'ada',      'language', 'english',    'Ada writes in English',           '[0.1,1,0.1,0.1,0.1,0.06,0,0,0,0,0]', 'c6', 0.5, now() - interval '39 days'),
 ('ada', 'semantic', NULL,       'language', 'English',    'Language: English',               '[0.1,1,0.1,0.1,0.1,0.04,0,0,0,0,0]', 'c6', 0.5, now() - interval '38 days'),
 ('ada', 'semantic', NULL,       NULL,       NULL,         'Lives in the Berlin time zone',   '[0,0,1,0,0,0.05,0,0,0,0,0]', 'c6', 0.5, now() - interval '37 days'),
 ('ada', 'semantic', NULL,       NULL,       NULL,         'Her time zone is Europe/Berlin',  '[0,0,1,0,0,0.09,0,0,0,0,0]', 'c6', 0.5, now() - interval '36 days'),
 ('ada', 'semantic', NULL,       NULL,       NULL,         'Uses CET (Berlin)',               '[0,0,1,0,0,0.12,0,0,0,0,0]', 'c6', 0.5, now() - interval '35 days'),
 ('ada', 'semantic', 'user',     'diet',     'vegetarian', 'Is vegetarian',                   '[0,0,0,1,0,0.05,0,0,0,0,0]', 'c6', 0.5, now() - interval '34 days'),
 ('ada', 'semantic', 'ada',      'diet',     'vegetarian', 'Ada eats no meat',                '[0,0,0,1,0,0.06,0,0,0,0,0]', 'c6', 0.5, now() - interval '33 days'),
 ('ada', 'semantic', NULL,       NULL,       NULL,         'Has a cat called Miso',           '[0,0,0,0,1,0.05,0,0,0,0,0]', 'c6', 0.5, now() - interval '32 days'),
 ('ada', 'semantic', NULL,       NULL,       NULL,         'Her cat is named Miso',           '[0,0,0,0,1,0.1,0,0,0,0,0]', 'c6', 0.5, now() - interval '31 days');

-- 8 episodic fragments of one trip, 31 to 45 days old.
INSERT INTO agent_memory.memories (user_id, kind, subject, content, emb, embedding_model, importance, created_at)
SELECT 'ada', 'episodic', 'lisbon trip', c, format('[0.1,0.1,0,0,0.1,%s,0,0,0,0,0]', 1 + i / 10.0)::vector, 'c6', 0.3,
       now() - make_interval(days => (30 + i)::int)
  FROM unnest(ARRAY[
        'Booked a flight to Lisbon for the conference.',
        'Asked for a hotel near the Lisbon venue.',
        'The Lisbon hotel was too loud.',
        'Moved to a quieter hotel in Lisbon.',
        'Gave a talk at the Lisbon conference.',
        'Ate pastel de nata.',
        'Missed the tram.',
        'Flew back from Lisbon on Sunday.']) WITH ORDINALITY AS t(c, i);

-- 5 one-off items: never recalled, never rewritten, 40 days old.
INSERT INTO agent_memory.memories (user_id, kind, content, emb, embedding_model, importance, created_at)
SELECT 'ada', 'semantic', c, v::vector, 'c6', 0.5, now() - interval '40 days'
  FROM (VALUES ('Parcel code 4471',          '[0.1,0.1,0.1,0.1,0.1,0,1,0,0,0,0]'),
               ('Wifi password was tulip22', '[0.1,0.1,0.1,0.1,0.1,0,0,1,0,0,0]'),
               ('Table booked for 8 pm',     '[0.1,0.1,0.1,0.1,0.1,0,0,0,1,0,0]'),
               ('Taxi number 0301',          '[0.1,0.1,0.1,0.1,0.1,0,0,0,0,1,0]'),
               ('Gate B12',                  '[0.1,0.1,0.1,0.1,0.1,0,0,0,0,0,1]')) AS t(c, v);

SELECT count(*) AS rows, count(*) FILTER (WHERE active) AS active FROM agent_memory.memories;

-- Before: recall's top 5 is crowded by duplicates: it covers 2 facts.
SELECT content FROM agent_memory.memory_recall('ada', '[1,1,1,1,1,0,0,0,0,0,0]', 5, model => 'c6', touch => false);

-- A dry run reports what would change and changes nothing.
SELECT md5(string_agg(m::text, '|' ORDER BY m.id)) AS before FROM agent_memory.memories m \gset
SELECT * FROM agent_memory.memory_consolidate(dry_run => true);
SELECT md5(string_agg(m::text, '|' ORDER BY m.id)) = :'before' AS unchanged FROM agent_memory.memories m;
SELECT count(*) AS runs_after_dry_run FROM agent_memory.runs;

-- The real pass, in batches of 2 rows.
SET agent_memory.batch_size = 2;
SELECT * FROM agent_memory.memory_consolidate();
RESET agent_memory.batch_size;

-- Nothing was deleted: 27 rows plus one summary; the episodes stay active, in the archive.
SELECT count(*) AS rows, count(*) FILTER (WHERE active) AS active FROM agent_memory.memories;
SELECT coalesce(retired_reason, 'active') AS state, kind, count(*) FROM agent_memory.memories GROUP BY 1, 2 ORDER BY 1, 2;

-- Each fact has one active row, the newest of its group, with its importance raised by 0.1
-- per row merged; the others point to it.
SELECT k.content, round(k.importance::numeric, 2) AS importance, k.version,
       (SELECT string_agg(r.content, '; ' ORDER BY r.created_at) FROM agent_memory.memories r WHERE r.superseded_by = k.id AND r.retired_reason = 'merged') AS merged
  FROM agent_memory.memories k
 WHERE k.active AND k.kind = 'semantic' AND k.source IS DISTINCT FROM 'consolidation' AND k.archived_at IS NULL
 ORDER BY k.content;

-- One summary (the built-in extractive summariser), with its embedding the normalised mean
-- of its sources', and its 8 episodes as evidence: archived, pointing to it.
SELECT s.kind, s.subject, s.content, s.source, s.metadata, length(s.content) AS chars,
       (SELECT sum(length(e.content)) FROM agent_memory.memory_evidence(s.id) e) AS evidence_chars,
       round((s.emb <=> (SELECT l2_normalize(avg(e.emb)) FROM agent_memory.memories e WHERE e.superseded_by = s.id))::numeric, 6) AS distance_to_mean
  FROM agent_memory.memories s WHERE s.source = 'consolidation';
SELECT e.kind, e.content FROM agent_memory.memories s, agent_memory.memory_evidence(s.id) e
 WHERE s.source = 'consolidation' ORDER BY e.created_at;

-- The one-off items are archived: importance 0.05, still there, out of the capacity.
SELECT content, importance, archived_at IS NOT NULL AS archived, active FROM agent_memory.memories
 WHERE archived_at IS NOT NULL ORDER BY content;

-- After: the top 5 covers the 5 facts.
SELECT content FROM agent_memory.memory_recall('ada', '[1,1,1,1,1,0,0,0,0,0,0]', 5, model => 'c6', touch => false);
-- Recall finds archived memories too (ranked by their low importance); archived => false
-- leaves them out.
SELECT count(*) AS with_archived FROM agent_memory.memory_recall('ada', '[1,1,1,1,1,0,0,0,0,0,0]', 30, model => 'c6', touch => false);
SELECT count(*) AS without_archived FROM agent_memory.memory_recall('ada', '[1,1,1,1,1,0,0,0,0,0,0]', 30, model => 'c6', touch => false, archived => false);
-- A recall of the trip finds the summary among its episodes; a question about one detail still
-- finds the detail, here by its words.
SELECT count(*) FILTER (WHERE kind = 'semantic') AS summaries, count(*) FILTER (WHERE kind = 'episodic') AS episodes
  FROM agent_memory.memory_recall('ada', '[0.1,0.1,0,0,0.1,1,0,0,0,0,0]', 9, model => 'c6', touch => false);
SELECT content, keyword_rank FROM agent_memory.memory_recall('ada', '[0.1,0.1,0,0,0.1,1,0,0,0,0,0]', 2, model => 'c6', touch => false,
                                                            query_text => 'Which tram did I miss?');

-- A rewrite of an archived item (here a new importance) brings it back.
SELECT agent_memory.memory_update(id, version, importance => 0.5) AS new_version FROM agent_memory.memories WHERE content = 'Gate B12';
SELECT content, archived_at IS NULL AS back FROM agent_memory.memories WHERE content = 'Gate B12' AND active;

-- A second pass finds nothing left to do.
SELECT * FROM agent_memory.memory_consolidate();
SELECT job, status, steps FROM agent_memory.runs ORDER BY id;

-- The per-user view.
SELECT user_id, active, protected, archived, evidence, retired, retired_by_reason FROM agent_memory.memory_stats;

-- A pluggable summariser: any SQL function (user_id text, contents text[]) returns text.
CREATE SCHEMA summarizers;
CREATE FUNCTION summarizers.short_summary(user_id text, contents text[]) RETURNS text
LANGUAGE sql AS $$ SELECT user_id || ' had ' || cardinality(contents) || ' episodes, first: ' || contents[1] $$;
INSERT INTO agent_memory.memories (user_id, kind, subject, content, emb, embedding_model, created_at)
-- (Episodes without a subject are summarised per day, as a session.)
SELECT 'bob', 'episodic', NULL, 'Episode ' || i, format('[1,%s,0,0,0,0,0,0,0,0,0]', i)::vector, 'c6', timestamptz '2026-01-10 12:00+00' + make_interval(mins => i)
  FROM generate_series(1, 3) i;
SET agent_memory.summarizer = 'summarizers.short_summary';
SELECT step, rows FROM agent_memory.memory_consolidate() WHERE step = 'summarize';
SELECT content FROM agent_memory.memories WHERE user_id = 'bob' AND active AND archived_at IS NULL;

-- A summariser that does not exist, or does not return text, is an error with a hint.
INSERT INTO agent_memory.memories (user_id, kind, content, emb, embedding_model, created_at)
SELECT 'cy', 'episodic', 'Event ' || i, format('[0,1,%s,0,0,0,0,0,0,0,0]', i)::vector, 'c6', now() - interval '50 days' FROM generate_series(1, 2) i;
SET agent_memory.summarizer = 'no_such_summariser';
SELECT * FROM agent_memory.memory_consolidate();
CREATE FUNCTION summarizers.not_text(user_id text, contents text[]) RETURNS integer LANGUAGE sql AS $$ SELECT 1 $$;
SET agent_memory.summarizer = 'summarizers.not_text';
SELECT * FROM agent_memory.memory_consolidate();
RESET agent_memory.summarizer;
DROP SCHEMA summarizers CASCADE;
SELECT * FROM agent_memory.memory_consolidate(dry_run => NULL);

-- Only a superuser chooses the summariser: the workers call it with their role.
CREATE ROLE regress_no_summarizer;
SET ROLE regress_no_summarizer;
SET agent_memory.summarizer = 'public.anything';
RESET ROLE;
DROP ROLE regress_no_summarizer;

-- (0.13.0) Near-duplicates merge only within one subject: the same predicate said of two
-- subjects is two facts (their object is NULL here, so the exact duplicate pass leaves them);
-- free text without a predicate still merges.
INSERT INTO agent_memory.memories (user_id, subject, predicate, content, emb, embedding_model)
VALUES ('dee', 'home', 'plant', 'The fern needs water on Mondays', '[0,0,0,1,0,0,0,0,0,0,0.01]', 'c6'),
       ('dee', 'office', 'plant', 'The fern needs water on Mondays.', '[0,0,0,1,0,0,0,0,0,0,0.02]', 'c6'),
       ('dee', NULL, NULL, 'Waters the fern on Mondays', '[0,0,0,0,1,0,0,0,0,0,0.01]', 'c6'),
       ('dee', NULL, NULL, 'Waters the fern on Mondays.', '[0,0,0,0,1,0,0,0,0,0,0.02]', 'c6');
SELECT step, rows FROM agent_memory.memory_consolidate() WHERE step = 'merge_similar';
SELECT subject, content, active, retired_reason FROM agent_memory.memories WHERE user_id = 'dee' ORDER BY id;
