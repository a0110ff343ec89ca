-- Writing memories: memory_reconcile turns each candidate fact into ADD, UPDATE,
-- DELETE or NONE, server-side, with version history.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET agent_memory.default_model = 'demo4';

-- The brief's eight rounds on one user.
CREATE TEMP TABLE rounds (round int, subject text, predicate text, object text, content text, emb text, negate boolean);
INSERT INTO rounds VALUES
 (1, 'user', 'editor',       'vim',              'Uses vim as editor',                    '[1,0,0,0]', false),
 (2, 'user', 'answer_style', 'conclusion first', 'Wants the conclusion first in answers', '[0,1,0,0]', false),
 (3, 'user', 'editor',       'vim',              'Uses vim as editor',                    '[1,0,0,0]', false),
 (4, 'user', 'editor',       'neovim',           'Prefers neovim as editor',              '[0.9,0.1,0,0]', false),
 (5, 'user', 'theme',        'dark',             'Uses a dark theme',                     '[0,0,1,0]', false),
 (6, 'user', 'theme',        NULL,               'No longer uses a dark theme',           '[0,0,1,0]', true),
 (7, 'user', 'os',           'Ubuntu',           'Runs Ubuntu',                           '[0,0,0,1]', false),
 (8, 'user', 'editor',       'neovim',           'Prefers neovim as editor',              '[0.9,0.1,0,0]', false);
CREATE TEMP TABLE results (round int, action text, memory_id bigint, previous_id bigint, version int);
DO $$
DECLARE r record;
BEGIN
  FOR r IN SELECT * FROM rounds ORDER BY round LOOP
    INSERT INTO results
    SELECT r.round, x.* FROM agent_memory.memory_reconcile('rounds-user', r.subject, r.predicate, r.object, r.content,
                                                            r.emb::vector, negate => r.negate) x;
  END LOOP;
END $$;
-- Ids shown relative to the first row, so the spec does not depend on the sequence.
SELECT round, action,
       memory_id - (SELECT min(memory_id) FROM results) + 1 AS memory,
       previous_id - (SELECT min(memory_id) FROM results) + 1 AS previous, version
  FROM results ORDER BY round;
SELECT count(*) AS rows, count(*) FILTER (WHERE active) AS active
  FROM agent_memory.memories WHERE user_id = 'rounds-user';
SELECT predicate, object, active, retired_reason, version, importance,
       superseded_by = (SELECT id FROM agent_memory.memories
                         WHERE user_id = 'rounds-user' AND object = 'neovim') AS superseded_by_neovim
  FROM agent_memory.memories WHERE user_id = 'rounds-user' ORDER BY id;
-- A halfvec or a text embedding is reconciled the same way.
SELECT action FROM agent_memory.memory_reconcile('half-user', 'user', 'drink', 'tea', 'Drinks tea', '[0,3,4,0]'::halfvec);
SELECT action FROM agent_memory.memory_reconcile('half-user', 'user', 'drink', 'tea', 'Drinks tea', '[0,3,4,0]');
SELECT emb, version FROM agent_memory.memories WHERE user_id = 'half-user';
-- Embeddings are stored at unit length.
SELECT bool_and(abs(vector_norm(emb) - 1) < 1e-6) AS unit_length FROM agent_memory.memories WHERE user_id = 'rounds-user';

-- Different explicit predicates are different facts, however similar their texts: no
-- similarity fallback between them.
SELECT action, previous_id IS NOT NULL AS supersedes, version
  FROM agent_memory.memory_reconcile('para-user', 'user', 'editor', 'vim', 'Uses vim as editor', '[1,0,0,0]'::vector);
SELECT action, previous_id IS NOT NULL AS supersedes, version
  FROM agent_memory.memory_reconcile('para-user', 'user', 'text_editor', 'neovim', 'Has switched to neovim', '[0.98,0.05,0,0]'::vector);
-- The same predicate under another name is declared as an alias, and then it is the same fact.
INSERT INTO agent_memory.predicates (predicate, alias_of) VALUES ('code_editor', 'editor');
SELECT action, previous_id = (SELECT id FROM agent_memory.memories WHERE user_id = 'para-user' AND object = 'vim') AS supersedes_vim, version
  FROM agent_memory.memory_reconcile('para-user', 'user', 'code_editor', 'helix', 'Tries helix', '[0.9,0.3,0,0]'::vector);
-- "The same fact" by similarity (cosine >= 0.9, agent_memory.reconcile_similarity) between a
-- fact and a free-text memory of the same user and kind.
SELECT action FROM agent_memory.memory_reconcile('para-user', NULL, NULL, NULL, 'Has a cat', '[0,0,1,0]'::vector);
SELECT action, previous_id IS NOT NULL AS supersedes FROM agent_memory.memory_reconcile('para-user', 'user', 'pet', 'cat', 'Has a cat called Miso', '[0,0.05,1,0]'::vector);
-- Dissimilar facts stay apart.
SELECT action FROM agent_memory.memory_reconcile('para-user', 'user', 'os', 'Debian', 'Runs Debian', '[0,0,0,1]'::vector);
SELECT predicate, object, active FROM agent_memory.memories WHERE user_id = 'para-user' ORDER BY id;

-- Free text: identical content is an idempotent NONE (nothing changes); similar
-- content (cosine >= 0.92, agent_memory.merge_similarity) reinforces instead of adding.
SELECT action, version FROM agent_memory.memory_reconcile('text-user', NULL, NULL, NULL, 'Likes green tea', '[0,1,0,0]'::vector);
SELECT action, version FROM agent_memory.memory_reconcile('text-user', NULL, NULL, NULL, 'Likes green tea', '[0,1,0,0]'::vector);
SELECT action, version FROM agent_memory.memory_reconcile('text-user', NULL, NULL, NULL, 'Enjoys green tea', '[0.05,1,0,0]'::vector);
SELECT action, version FROM agent_memory.memory_reconcile('text-user', NULL, NULL, NULL, 'Owns a bicycle', '[0,0,0,1]'::vector);
SELECT content, importance, hit_count, version FROM agent_memory.memories WHERE user_id = 'text-user' ORDER BY id;
-- A negated free-text memory is retired, not deleted.
SELECT action, version FROM agent_memory.memory_reconcile('text-user', NULL, NULL, NULL, 'Owns a bicycle', '[0,0,0,1]'::vector, negate => true);
SELECT content, active, retired_reason FROM agent_memory.memories WHERE user_id = 'text-user' ORDER BY id;

-- A caller that already decided (a language model choosing the action) passes it with the
-- target and the version it read: a conditional update. A stale version changes nothing.
SELECT id AS neovim_id, version AS neovim_version FROM agent_memory.memories
 WHERE user_id = 'rounds-user' AND object = 'neovim' \gset
SELECT action, memory_id = :neovim_id AS same_row, version
  FROM agent_memory.memory_reconcile('rounds-user', 'user', 'editor', 'zed', 'Moved to zed', '[0.8,0.2,0,0]'::vector,
                                     action => 'UPDATE', target_id => :neovim_id, expected_version => :neovim_version - 1);
SELECT action, previous_id = :neovim_id AS supersedes_neovim, version = :neovim_version + 1 AS version_continues
  FROM agent_memory.memory_reconcile('rounds-user', 'user', 'editor', 'zed', 'Moved to zed', '[0.8,0.2,0,0]'::vector,
                                     action => 'UPDATE', target_id => :neovim_id, expected_version => :neovim_version);
SELECT action, version IS NULL AS stale
  FROM agent_memory.memory_reconcile('rounds-user', 'user', 'editor', NULL, NULL, NULL::vector,
                                     action => 'DELETE', target_id => :neovim_id, expected_version => :neovim_version);

-- Batch: many facts in one call, one row per fact, in input order.
SELECT ordinal, action, version FROM agent_memory.memory_reconcile_batch('batch-user', '[
  {"subject": "user", "predicate": "language", "object": "English", "content": "Speaks English", "emb": [1,0,0,0]},
  {"subject": "user", "predicate": "timezone", "object": "CET", "content": "Lives in CET", "emb": [0,1,0,0], "protected": true},
  {"subject": "user", "predicate": "language", "object": "German", "content": "Now speaks German", "emb": [1,0,0,0]},
  {"content": "Asked about invoices", "emb": [0,0,1,0], "kind": "episodic"},
  {"content": "Asked about invoices", "emb": [0,0,1,0], "kind": "episodic"},
  {"subject": "user", "predicate": "timezone", "negate": true}
]'::jsonb);
SELECT predicate, object, kind, active, protected, retired_reason FROM agent_memory.memories WHERE user_id = 'batch-user' ORDER BY id;
-- The same call takes json, or text (an untyped literal): parsed once, the fastest forms.
SELECT ordinal, action FROM agent_memory.memory_reconcile_batch('batch-json-user',
  '[{"content": "Prefers tea", "emb": [0,1,0,0]}, {"content": "Prefers tea", "emb": [0,1,0,0]}]'::json);
SELECT ordinal, action FROM agent_memory.memory_reconcile_batch('batch-json-user',
  '[{"content": "Prefers tea", "emb": [0,1,0,0]}, {"content": "Prefers coffee", "emb": [0,0,1,0]}]');

-- Write-time policies. Importance, when none is given: for a fact or preference (semantic)
-- 0.5, +0.3 for preference words, +0.2 for 20 to 200 characters; for an episode 0.5 (its words
-- say nothing of how much it matters). Retention: 7 days, 30 above importance 0.7, 90 for
-- semantic memories, never for protected facts.
CREATE TEMP TABLE policy_ids AS
SELECT r.memory_id FROM
       (VALUES ('ok', '[1,0,0,0]', 'episodic', false),
               ('The parcel arrived on Tuesday', '[0,1,0,0]', 'episodic', false),
               ('From now on, always answer in English', '[0,0,1,0]', 'semantic', false),
               ('我喜欢喝茶，记住', '[0,0,0,1]', 'semantic', false),
               ('ok, noted', '[1,0,0,1]', 'semantic', false),
               ('Allergic to peanuts', '[1,1,0,0]', 'semantic', true),
               ('Prefers short answers', '[1,0,1,0]', 'semantic', false)) c(content, emb, kind, protected),
       LATERAL agent_memory.memory_reconcile('policy-user', NULL, NULL, NULL, c.content, c.emb::vector,
                                             kind => c.kind, protected => c.protected) r;
SELECT content, kind, protected, importance,
       round(extract(epoch FROM expires_at - created_at) / 86400) AS kept_days
  FROM agent_memory.memories WHERE id IN (SELECT memory_id FROM policy_ids) ORDER BY id;
-- A model-provided importance always wins; expires_at given by the caller is kept.
SELECT memory_id AS anniversary_id FROM agent_memory.memory_reconcile('policy-user', NULL, NULL, NULL,
       'Always remember the anniversary on 12 May', '[0,1,1,0]'::vector,
       importance => 0.2, expires_at => '2030-01-01 00:00+00') \gset
SELECT importance, expires_at = '2030-01-01 00:00+00' AS caller_expiry FROM agent_memory.memories WHERE id = :anniversary_id;
SELECT agent_memory.memory_importance('Never call me before 9') AS importance,
       agent_memory.memory_importance('Never call me before 9', 'episodic') AS as_an_episode,
       agent_memory.memory_retention('episodic', 0.9) AS important_episode,
       agent_memory.memory_retention('semantic', 0.1, protected => true) AS protected_fact;
SET agent_memory.retention_default = '1d';
SELECT agent_memory.memory_retention('episodic', 0.1) AS shortened;
SET agent_memory.retention_default = -1;
SELECT agent_memory.memory_retention('episodic', 0.1) IS NULL AS forever;
RESET agent_memory.retention_default;

-- Raw conversation turns are kept apart; a fact points to the turn it came from.
SELECT agent_memory.memory_record_turn('turn-user', 'session-1', 'user', 'I moved to Lisbon last week.') AS turn_id \gset
SELECT action FROM agent_memory.memory_reconcile('turn-user', 'user', 'city', 'Lisbon', 'Lives in Lisbon',
                                                 '[0,0,1,1]'::vector, source_turn_id => :turn_id, source => 'conversation');
SELECT m.content, t.role, t.content AS said FROM agent_memory.memories m
  JOIN agent_memory.turns t ON t.id = m.source_turn_id WHERE m.user_id = 'turn-user';

-- memory_update: a conditional update that returns the new version, or NULL when stale.
SELECT id AS os_id, version AS os_version FROM agent_memory.memories
 WHERE user_id = 'rounds-user' AND predicate = 'os' \gset
SELECT agent_memory.memory_update(:os_id, :os_version, object => 'Debian', content => 'Runs Debian') = :os_version + 1 AS updated;
SELECT agent_memory.memory_update(:os_id, :os_version, object => 'Fedora') AS stale;
SELECT object, content, version = :os_version + 1 AS one_write FROM agent_memory.memories WHERE id = :os_id;
-- An embedding given to an update is normalised too; halfvec works as well.
SELECT agent_memory.memory_update(:os_id, :os_version + 1, emb => '[0,0,3,4]'::vector) = :os_version + 2 AS updated;
SELECT emb FROM agent_memory.memories WHERE id = :os_id;
SELECT agent_memory.memory_update(:os_id, :os_version + 2, '[0,2,0,0]'::halfvec) = :os_version + 3 AS updated_halfvec;
SELECT emb FROM agent_memory.memories WHERE id = :os_id;
-- A write that changes nothing (the same direction, normalised) is no new version.
SELECT agent_memory.memory_update(:os_id, :os_version + 3, emb => '[0,5,0,0]'::vector) = :os_version + 3 AS unchanged;
-- Every write increments the version, also plain SQL; a recall's touch does not.
UPDATE agent_memory.memories SET importance = 0.9 WHERE id = :os_id;
UPDATE agent_memory.memories SET hit_count = hit_count + 1, last_hit_at = now() WHERE id = :os_id;
SELECT version - :os_version AS writes FROM agent_memory.memories WHERE id = :os_id;

-- Bulk loading through COPY gets the same normalisation and defaults.
COPY agent_memory.memories (user_id, kind, content, emb, embedding_model) FROM STDIN;
copy-user	episodic	Bought a plant	[3,4,0,0]	demo4
copy-user	semantic	Prefers window seats on long flights	[0,0,6,8]	demo4
\.
SELECT content, emb, importance, round(extract(epoch FROM expires_at - created_at) / 86400) AS kept_days, version
  FROM agent_memory.memories WHERE user_id = 'copy-user' ORDER BY id;

-- Bad input: a clear error with a SQLSTATE and a hint.
SELECT * FROM agent_memory.memory_reconcile('err-user', 'user', 'editor', 'vim', 'Uses vim', '[1,0,0]'::vector);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM agent_memory.memory_reconcile('err-user', 'user', NULL, 'vim', 'Uses vim', '[1,0,0,0]'::vector);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM agent_memory.memory_reconcile('err-user', NULL, 'editor', 'vim', 'Uses vim', '[1,0,0,0]'::vector);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM agent_memory.memory_reconcile('err-user', 'user', 'editor', NULL, 'Uses vim', '[1,0,0,0]'::vector);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM agent_memory.memory_reconcile(NULL, 'user', 'editor', 'vim', 'Uses vim', '[1,0,0,0]'::vector);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM agent_memory.memory_reconcile('err-user', 'user', 'editor', 'vim', NULL, '[1,0,0,0]'::vector);
\echo :LAST_ERROR_SQLSTATE
-- Without an embedding the server embeds the content, with a model it has files for: not demo4.
SELECT * FROM agent_memory.memory_reconcile('err-user', 'user', 'editor', 'vim', 'Uses vim', NULL::vector, model => 'demo4');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM agent_memory.memory_reconcile('err-user', 'user', 'editor', 'vim', 'Uses vim', '[0,0,0,0]'::vector);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM agent_memory.memory_reconcile('err-user', 'user', 'editor', 'vim', 'Uses vim', '[1,0,0,0]'::vector, action => 'MERGE');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM agent_memory.memory_reconcile('err-user', 'user', 'editor', 'vim', 'Uses vim', '[1,0,0,0]'::vector, action => 'UPDATE');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM agent_memory.memory_reconcile('err-user', 'user', 'editor', 'vim', 'Uses vim', '[1,0,0,0]'::vector, target_id => 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM agent_memory.memory_reconcile('err-user', 'user', 'editor', 'vim', 'Uses vim', '[1,0,0,0]'::vector, importance => 1.5);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM agent_memory.memory_reconcile('err-user', 'user', 'editor', 'vim', 'Uses vim', '[1,0,0,0]'::vector, kind => 'reminder');
\echo :LAST_ERROR_SQLSTATE
SELECT action, version FROM agent_memory.memory_reconcile('err-user', 'user', 'editor', 'vim', 'Uses vim', '[1,0,0,0]'::vector,
                                                          action => 'ADD');
-- (error messages that name a memory id are shown by SQLSTATE alone)
\set VERBOSITY sqlstate
SELECT * FROM agent_memory.memory_reconcile('err-user', 'user', 'editor', 'vim', 'Uses vim', '[1,0,0,0]'::vector,
                                            action => 'ADD');
\set VERBOSITY default
SELECT * FROM agent_memory.memory_reconcile_batch('err-user', '[{"subject": "user", "predicat": "x"}]'::jsonb);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM agent_memory.memory_reconcile_batch('err-user', '{"not": "an array"}'::jsonb);
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.memory_update(NULL, 1, content => 'x');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.memory_update(-1, 1, content => 'x');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.memory_update(:os_id, NULL, content => 'x');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.memory_update(:os_id, 1, importance => -0.1);
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY sqlstate
SELECT agent_memory.memory_update(:neovim_id, :neovim_version + 1, content => 'x');
\set VERBOSITY default
SELECT agent_memory.memory_update(:os_id, (SELECT version FROM agent_memory.memories WHERE id = :os_id), emb => '[1,0,0]'::vector);
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.memory_record_turn('err-user', 's', 'narrator', 'x');
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model) VALUES ('err-user', 'x', '[1,2]', 'demo4');
\echo :LAST_ERROR_SQLSTATE
-- Two active rows for one (user, subject, predicate) cannot exist, even written by hand.
INSERT INTO agent_memory.memories (user_id, subject, predicate, object, content, emb, embedding_model)
SELECT user_id, subject, predicate, 'nano', 'Uses nano', emb, embedding_model FROM agent_memory.memories
 WHERE user_id = 'rounds-user' AND active AND predicate = 'editor';
\echo :LAST_ERROR_SQLSTATE
RESET agent_memory.default_model;
