-- agent_memory demo: an agent's memory at work. Run by scripts/try.sh with psql.
\set QUIET on
\pset footer off
\set ON_ERROR_STOP on
SELECT setseed(0.7) \g /dev/null

\echo
\echo '=== 0. Text in, memory out: an agent remembers and recalls with words alone ==='
\echo 'The server embeds every text itself (all-MiniLM-L6-v2, in Rust, from local files: no network,'
\echo 'no Python, no vector from the caller). Three sessions of one user, ada:'
\echo
\echo 'Session 1: ada says she uses vim, likes a dark theme, and wants answers short.'
SELECT 'ada: "I use vim"' AS said, action FROM agent_memory.memory_reconcile('ada', 'ada', 'editor', 'vim', 'Uses vim as editor')
UNION ALL
SELECT 'ada: "I like a dark theme"', action FROM agent_memory.memory_reconcile('ada', 'ada', 'theme', 'dark', 'Likes a dark theme')
UNION ALL
SELECT 'ada: "keep answers short"', action FROM agent_memory.memory_reconcile('ada', NULL, NULL, NULL, 'Wants short answers, conclusion first')
UNION ALL
SELECT 'ada: "I moved to Lisbon in May"', action
  FROM agent_memory.memory_reconcile('ada', NULL, NULL, NULL, 'Moved to Lisbon in May', kind => 'episodic');
\echo 'Session 2: she switched to neovim (the vim fact is superseded), and no longer likes the dark theme.'
SELECT 'ada: "I switched to neovim"' AS said, action FROM agent_memory.memory_reconcile('ada', 'ada', 'editor', 'neovim', 'Prefers neovim as editor')
UNION ALL
SELECT 'ada: "not dark anymore"', action
  FROM agent_memory.memory_reconcile('ada', 'ada', 'theme', NULL, 'No longer likes a dark theme', negate => true);
\echo 'A plain INSERT of the words is a complete write too: the write trigger embeds the content.'
INSERT INTO agent_memory.memories (user_id, content) VALUES ('ada', 'Has a cat called Miso');
\echo 'Session 3: questions in plain words; the server embeds each and ranks its words too:'
SELECT q.question, r.content AS "memory_recall(ada, question, 1)"
  FROM (VALUES (1, 'which editor do I use?'), (2, 'where do I live now?'), (3, 'how should you answer me?'),
               (4, 'do I have any pets?')) q(n, question),
       LATERAL agent_memory.memory_recall('ada', q.question, 1) r
 ORDER BY q.n;
\echo 'What the model''s prompt gets for "help me set up my editor" (memory_context, 200 tokens):'
SELECT agent_memory.memory_record_turn('ada', 'session-3', 'user', 'help me set up my editor') IS NOT NULL AS turn_recorded \g /dev/null
SELECT position, channel, content FROM agent_memory.memory_context('ada', 'session-3', 'help me set up my editor', token_budget => 200);
\echo 'ada''s memories: the vim and dark-theme facts retired (kept, not deleted), four active.'
SELECT content, active, retired_reason FROM agent_memory.memories WHERE user_id = 'ada' ORDER BY id;

\echo
\echo '=== 1. Fifty users, a thousand memories each, on the same twenty topics ==='
\echo 'Every user talks about the same things, so their memories share one embedding space.'
CREATE TEMP TABLE topics AS
SELECT t, ARRAY(SELECT random()::real - 0.5 FROM generate_series(1, 64 + 0 * t)) AS center
  FROM generate_series(1, 20) t;
INSERT INTO agent_memory.memories (user_id, kind, content, emb, embedding_model, importance, last_hit_at)
SELECT 'user-' || lpad(u::text, 2, '0'),
       CASE WHEN i % 3 = 0 THEN 'episodic' ELSE 'semantic' END,
       format('user %s, memory %s about topic %s', u, i, t.t),
       ARRAY(SELECT t.center[d] + 0.35 * (random()::real - 0.5) FROM generate_series(1, 64) d)::vector,
       'demo-64d',
       round(random()::numeric, 2),
       now() - make_interval(mins => (random() * 60 * 24 * 90)::int)
  FROM generate_series(1, 50) u CROSS JOIN generate_series(1, 1000) i
  JOIN topics t ON t.t = 1 + (i * 7 + u) % 20;
\echo 'An HNSW index for the model, as pgvector recommends (an expression index: one per model and dimension):'
CREATE INDEX demo_64d_hnsw ON agent_memory.memories
 USING hnsw ((emb::vector(64)) vector_cosine_ops) WITH (m = 8, ef_construction = 32)
 WHERE embedding_model = 'demo-64d';
ANALYZE agent_memory.memories;
SELECT count(*) AS memories, count(DISTINCT user_id) AS users FROM agent_memory.memories;

\echo
\echo '=== 2. "What do I know about this user?" — plain pgvector vs memory_recall ==='
\echo 'The plain query: WHERE user_id = $1 AND active ORDER BY emb <=> $2 LIMIT 5 over the HNSW index.'
\echo 'HNSW takes its 40 nearest neighbours first and filters after: about 2% of them are this user''s.'
CREATE TEMP TABLE questions AS
SELECT 'user-' || lpad(u::text, 2, '0') AS user_id,
       ARRAY(SELECT t.center[d] + 0.2 * (random()::real - 0.5) FROM generate_series(1, 64) d)::vector(64) AS q
  FROM generate_series(1, 10) u JOIN topics t ON t.t = 1 + (u * 3) % 20;
SELECT q.user_id,
       (SELECT count(*) FROM (SELECT 1 FROM agent_memory.memories m
                               WHERE m.user_id = q.user_id AND m.active AND m.embedding_model = 'demo-64d'
                               ORDER BY m.emb::vector(64) <=> q.q LIMIT 5) s) AS "plain HNSW: rows",
       (SELECT count(*) FROM agent_memory.memory_recall(q.user_id, q.q, 5, model => 'demo-64d', touch => false))
         AS "memory_recall: rows"
  FROM questions q ORDER BY 1;
\echo 'The background worker packs each user''s embeddings (8 bits each, a page of them per row;'
\echo 'memory_pack does it at once). Recall then bounds every memory''s score from the pack and reads'
\echo 'only the rows that can still make the top 5: the same results, from a few dozen rows:'
SELECT agent_memory.memory_pack('user-01') AS packed;
SET client_min_messages = debug1;
SELECT count(*) AS "memory_recall: rows"
  FROM agent_memory.memory_recall('user-01', (SELECT q FROM questions WHERE user_id = 'user-01'), 5,
                                  model => 'demo-64d', touch => false);
RESET client_min_messages;
\echo 'Each pack also holds its memories'' words, so hybrid recall (query_text) counts BM25 from the'
\echo 'packs too, for every memory on a page that (auto)vacuum has marked visible to all:'
VACUUM agent_memory.memories;
SET client_min_messages = debug1;
SELECT count(*) AS "hybrid memory_recall: rows"
  FROM agent_memory.memory_recall('user-01', (SELECT q FROM questions WHERE user_id = 'user-01'), 5,
                                  model => 'demo-64d', touch => false, query_text => 'which editor do I use?');
RESET client_min_messages;

\echo
\echo '=== 3. Similarity alone picks stale memories ==='
\echo 'user-07 changed editors six times in 200 days. The question "which editor do I use?" is most'
\echo 'similar to the oldest preference (vim); the newest (neovim) is the least similar.'
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, importance, created_at, last_hit_at)
SELECT 'user-07', content, emb::vector, 'demo-4d', 0.5, now() - age, now() - age
  FROM (VALUES ('Uses vim as editor',       '[1, 0.2, 0, 0]', interval '200 days'),
               ('Switched to emacs',        '[1, 0.3, 0, 0]', interval '160 days'),
               ('Trying VS Code',           '[1, 0.4, 0, 0]', interval '120 days'),
               ('Prefers Sublime Text',     '[1, 0.5, 0, 0]', interval '80 days'),
               ('Moved to Helix',           '[1, 0.6, 0, 0]', interval '40 days'),
               ('Prefers neovim as editor', '[1, 0.7, 0, 0]', interval '2 days')) v(content, emb, age);
\echo
\echo 'Ranked by similarity alone (decay => ''none''):'
SELECT row_number() OVER () AS rank, content, round(similarity::numeric, 3) AS similarity
  FROM agent_memory.memory_recall('user-07', '[1,0,0,0]'::vector, 6, model => 'demo-4d', decay => 'none', touch => false);
\echo 'Ranked by memory_recall''s default: similarity × (0.8 + 0.4 × importance), and a memory that has a'
\echo 'newer, similar one (cosine >= 0.9: another version of the same preference) × 0.995^(hours since last hit):'
SELECT row_number() OVER () AS rank, content, round(similarity::numeric, 3) AS similarity, round(score::numeric, 4) AS score
  FROM agent_memory.memory_recall('user-07', '[1,0,0,0]'::vector, 6, model => 'demo-4d', touch => false);

\echo
\echo '=== 4. Decay ranks what is current; it does not bury the past ==='
\echo 'user-08 asked about a refund 120 days ago. "When did I first ask about the refund?" still finds it,'
\echo 'at its whole score: nothing newer resembles it, so time does not count against it.'
INSERT INTO agent_memory.memories (user_id, kind, content, emb, embedding_model, importance, created_at, last_hit_at)
SELECT 'user-08', 'episodic', content, emb::vector, 'demo-4d', 0.5, now() - age, now() - age
  FROM (VALUES ('Asked about a refund for order 1042',  '[0.8, 0.6, 0, 0]', interval '120 days'),
               ('Asked for the opening hours',          '[0.2, 0, 1, 0]',   interval '3 days'),
               ('Reported a broken download link',      '[0.3, 0, 0, 1]',   interval '1 day'),
               ('Asked to change the delivery address', '[0.25, 0, 1, 1]',  interval '5 hours')) v(content, emb, age);
SELECT content, round(similarity::numeric, 3) AS similarity, round(score::numeric, 4) AS score
  FROM agent_memory.memory_recall('user-08', '[1,0,0,0]'::vector, 3, model => 'demo-4d', touch => false);

\echo
\echo '=== 5. A recall refreshes what it returned; an export does not ==='
SELECT content, hit_count FROM agent_memory.memories WHERE user_id = 'user-07' AND embedding_model = 'demo-4d' ORDER BY id;
\echo 'SELECT * FROM agent_memory.memory_recall(''user-07'', $q, 2, model => ''demo-4d'');  -- touch (the default)'
SELECT content FROM agent_memory.memory_recall('user-07', '[1,0,0,0]'::vector, 2, model => 'demo-4d');
\echo 'SELECT * FROM agent_memory.memory_recall(''user-07'', $q, 6, model => ''demo-4d'', touch => false);  -- an export'
SELECT count(*) AS exported FROM agent_memory.memory_recall('user-07', '[1,0,0,0]'::vector, 6, model => 'demo-4d', touch => false);
SELECT content, hit_count FROM agent_memory.memories WHERE user_id = 'user-07' AND embedding_model = 'demo-4d' ORDER BY id;

\echo
\echo '=== 6. Writing: reconciliation turns each candidate fact into ADD, UPDATE, DELETE or NONE ==='
\echo 'Eight facts extracted from ada''s conversations, in order:'
CREATE TEMP TABLE rounds (round int, subject text, predicate text, object text, content text, emb text, negate boolean);
INSERT INTO rounds VALUES
 (1, 'user', 'editor',       'vim',              'Uses vim as editor',                    '[1,0,0,0]',     false),
 (2, 'user', 'answer_style', 'conclusion first', 'Wants the conclusion first in answers', '[0,1,0,0]',     false),
 (3, 'user', 'editor',       'vim',              'Uses vim as editor',                    '[1,0,0,0]',     false),
 (4, 'user', 'editor',       'neovim',           'Prefers neovim as editor',              '[0.9,0.1,0,0]', false),
 (5, 'user', 'theme',        'dark',             'Uses a dark theme',                     '[0,0,1,0]',     false),
 (6, 'user', 'theme',        NULL,               'No longer uses a dark theme',           '[0,0,1,0]',     true),
 (7, 'user', 'os',           'Ubuntu',           'Runs Ubuntu',                           '[0,0,0,1]',     false),
 (8, 'user', 'editor',       'neovim',           'Prefers neovim as editor',              '[0.9,0.1,0,0]', false);
SELECT r.round, r.predicate, coalesce(r.object, '(no longer)') AS object, x.action, x.memory_id, x.previous_id, x.version
  FROM rounds r,
       LATERAL agent_memory.memory_reconcile('ada', r.subject, r.predicate, r.object, r.content, r.emb::vector,
                                             model => 'demo-4d', negate => r.negate) x
 ORDER BY r.round;
\echo 'Afterwards: 5 rows, 3 active; retired rows stay, with the reason and what replaced them.'
SELECT id, predicate, object, active, retired_reason, superseded_by, version, importance
  FROM agent_memory.memories WHERE user_id = 'ada' ORDER BY id;

\echo
\echo '=== 7. Two writers, one version: nothing is overwritten silently ==='
SELECT id AS os_id, version AS os_version FROM agent_memory.memories
 WHERE user_id = 'ada' AND predicate = 'os' \gset
\echo 'Both read version' :os_version '; the first write wins, the second learns of the conflict (NULL):'
SELECT agent_memory.memory_update(:os_id, :os_version, object => 'Debian', content => 'Runs Debian') AS first_writer,
       agent_memory.memory_update(:os_id, :os_version, object => 'Fedora', content => 'Runs Fedora') AS second_writer;
SELECT object, content, version FROM agent_memory.memories WHERE id = :os_id;

\echo
\echo '=== 8. Consolidation: duplicates merged, old episodes summarised, one-off items archived ==='
\echo 'ben said the same things several ways, had a trip 40 days ago, and left one-off details:'
INSERT INTO agent_memory.memories (user_id, kind, subject, predicate, object, content, emb, embedding_model, created_at) VALUES
 ('ben', 'semantic', 'user', 'language', 'Python',   'Codes in Python',              '[1,0.2,0,0]',     'demo-4d', now() - interval '9 days'),
 ('ben', 'semantic', 'ben',  'language', 'python',   'Ben writes Python',            '[1,0.21,0,0]',    'demo-4d', now() - interval '8 days'),
 ('ben', 'semantic', NULL,   'language', 'Python',   'Language: Python',             '[1,0.19,0,0]',    'demo-4d', now() - interval '7 days'),
 ('ben', 'semantic', NULL,   NULL,       NULL,       'Lives in Lisbon',              '[0.2,1,0,0]',     'demo-4d', now() - interval '6 days'),
 ('ben', 'semantic', NULL,   NULL,       NULL,       'Ben''s home is Lisbon',        '[0.21,1,0.01,0]', 'demo-4d', now() - interval '5 days'),
 ('ben', 'episodic', 'trip', NULL,       NULL,       'Flew to Berlin for a workshop.',         '[0,0.2,1,0.1]',  'demo-4d', now() - interval '45 days'),
 ('ben', 'episodic', 'trip', NULL,       NULL,       'The Berlin workshop was on databases.',  '[0,0.2,1,0.2]',  'demo-4d', now() - interval '44 days'),
 ('ben', 'episodic', 'trip', NULL,       NULL,       'Lost an umbrella.',                      '[0,0.2,1,0.3]',  'demo-4d', now() - interval '43 days'),
 ('ben', 'episodic', 'trip', NULL,       NULL,       'Flew back from the Berlin workshop.',    '[0,0.2,1,0.15]', 'demo-4d', now() - interval '42 days'),
 ('ben', 'semantic', NULL,   NULL,       NULL,       'Parcel code 4471',             '[0.5,0.5,0.5,0.5]', 'demo-4d', now() - interval '40 days'),
 ('ben', 'semantic', NULL,   NULL,       NULL,       'Table booked for 8 pm',        '[0.5,-0.5,0.5,0.5]','demo-4d', now() - interval '40 days');
\echo 'A dry run says what the pass would change. The 50 demo users talk about 20 shared topics, so'
\echo 'many of their memories are near-duplicates too (cosine >= agent_memory.merge_similarity, 0.92):'
SELECT * FROM agent_memory.memory_consolidate(dry_run => true);
\echo 'It changed nothing; the pass:'
SELECT * FROM agent_memory.memory_consolidate();
SELECT content, kind, active, coalesce(retired_reason, CASE WHEN archived_at IS NOT NULL THEN 'archived' END) AS state,
       round(importance::numeric, 2) AS importance
  FROM agent_memory.memories WHERE user_id = 'ben' ORDER BY active DESC, kind DESC, content;
\echo 'The summary keeps its evidence (memory_evidence): the episodes moved to the archive, out of'
\echo 'the capacity, and recall still finds a detail when the question asks for it:'
SELECT e.content FROM agent_memory.memories s, agent_memory.memory_evidence(s.id) e
 WHERE s.user_id = 'ben' AND s.source = 'consolidation' ORDER BY e.created_at;
SELECT content, kind, keyword_rank FROM agent_memory.memory_recall('ben', '[0,0.2,1,0.2]', 2, model => 'demo-4d',
       touch => false, query_text => 'Where did I lose my umbrella?');

\echo
\echo '=== 9. Forgetting: at most agent_memory.capacity (400) live memories per user ==='
\echo 'Each demo user still has far more than 400 live memories. Three of user-07''s become hard'
\echo 'facts (protected): they are never evicted. Evicted facts retire; evicted episodes move to the'
\echo 'archive, where recall still finds them (the record of what happened stays true).'
UPDATE agent_memory.memories SET protected = true
 WHERE id IN (SELECT id FROM agent_memory.memories WHERE user_id = 'user-07' AND active ORDER BY id LIMIT 3);
SELECT * FROM agent_memory.memory_forget(dry_run => true);
SELECT * FROM agent_memory.memory_forget();
SELECT user_id, active - archived AS live, archived, protected, retired, retired_by_reason
  FROM agent_memory.memory_stats WHERE user_id IN ('user-07', 'user-08', 'ben') ORDER BY user_id;
\echo 'Every pass leaves a run row; the background worker of this database runs both on a schedule:'
SELECT job, status, steps FROM agent_memory.last_runs ORDER BY job, started_at;
