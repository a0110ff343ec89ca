-- Text in: the server embeds text with all-MiniLM-L6-v2 (installed by scripts/setup.sh), so
-- every call takes words where it took a vector.
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT name, dimensions, folder, pooling, max_tokens, seeded FROM agent_memory.embedding_models WHERE folder IS NOT NULL;

-- memory_embed: 384 numbers at unit length; a paraphrase is near, another topic far.
SELECT vector_dims(agent_memory.memory_embed('I moved to Lisbon')) AS dims,
       round(vector_norm(agent_memory.memory_embed('I moved to Lisbon'))::numeric, 4) AS norm;
SELECT round((1 - (agent_memory.memory_embed('I moved to Lisbon') <=> agent_memory.memory_embed('I relocated to Lisbon')))::numeric, 1) > 0.8 AS paraphrase_near,
       round((1 - (agent_memory.memory_embed('I moved to Lisbon') <=> agent_memory.memory_embed('My cat likes tuna')))::numeric, 1) < 0.3 AS other_far;
-- The batch form: one row per input, in order, NULL for NULL; each as the one-text form.
SELECT ordinal, embedding IS NULL AS is_null,
       round((1 - (embedding <=> agent_memory.memory_embed(t)))::numeric, 4) AS same_as_one
  FROM agent_memory.memory_embed(ARRAY['Prefers neovim as editor', NULL, 'a much longer text about the user and the places they have lived in over the years']) e
  LEFT JOIN LATERAL (SELECT (ARRAY['Prefers neovim as editor', NULL, 'a much longer text about the user and the places they have lived in over the years'])[e.ordinal] AS t) x ON true
 ORDER BY ordinal;
SELECT agent_memory.memory_embed(NULL) IS NULL AS null_in_null_out;

-- The brief's eight rounds of one user, as text only.
SELECT action FROM agent_memory.memory_reconcile('text-user', 'user', 'editor', 'vim', 'Uses vim as editor');
SELECT action FROM agent_memory.memory_reconcile('text-user', NULL, NULL, NULL, 'Answers should lead with the conclusion');
SELECT action FROM agent_memory.memory_reconcile('text-user', 'user', 'editor', 'vim', 'Uses vim as editor');
SELECT action FROM agent_memory.memory_reconcile('text-user', 'user', 'editor', 'neovim', 'Prefers neovim as editor');
SELECT action FROM agent_memory.memory_reconcile('text-user', 'user', 'theme', 'dark', 'Likes a dark theme');
SELECT action FROM agent_memory.memory_reconcile('text-user', 'user', 'theme', NULL, 'No longer likes a dark theme', negate => true);
SELECT action FROM agent_memory.memory_reconcile('text-user', 'user', 'os', 'Ubuntu', 'Runs Ubuntu');
SELECT action FROM agent_memory.memory_reconcile('text-user', 'user', 'editor', 'neovim', 'Prefers neovim as editor');
SELECT count(*) AS rows, count(*) FILTER (WHERE active) AS active,
       bool_and(embedding_model = 'all-MiniLM-L6-v2') AS all_text_model,
       bool_and(abs(vector_norm(emb) - 1) < 1e-5) AS unit_length
  FROM agent_memory.memories WHERE user_id = 'text-user';
-- A batch of facts without "emb"; the free text stated again is the same memory.
SELECT ordinal, action FROM agent_memory.memory_reconcile_batch('text-user',
  '[{"content": "Is allergic to peanuts"}, {"content": "Has a dog named Rex", "kind": "episodic"}, {"content": "Is allergic to peanuts"}]');

-- Recall with a question as text: embedded by the server, and its words rank too (hybrid).
SELECT content, keyword_rank IS NOT NULL AS words_matched
  FROM agent_memory.memory_recall('text-user', 'which editor do I use?', 1, touch => false);
SELECT content FROM agent_memory.memory_recall('text-user', 'what am I allergic to?', 1, touch => false);
SELECT content FROM agent_memory.memory_recall('text-user', 'tell me about my pet', 1, touch => false);
-- The same as passing the server's embedding and the words by hand.
SELECT (SELECT array_agg(id) FROM agent_memory.memory_recall('text-user', 'which operating system?', 3, touch => false))
     = (SELECT array_agg(id) FROM agent_memory.memory_recall('text-user', agent_memory.memory_embed('which operating system?'), 3,
                                                             model => 'all-MiniLM-L6-v2', query_text => 'which operating system?', touch => false))
       AS same_as_by_hand;
-- Text in pgvector's syntax is still a vector.
SELECT count(*) AS vector_literal_rows
  FROM agent_memory.memory_recall('text-user', (agent_memory.memory_embed('editor')::text), 2, model => 'all-MiniLM-L6-v2', touch => false);
-- memory_context with a question as text.
SELECT agent_memory.memory_record_turn('text-user', 's1', 'user', 'I am planning a trip') IS NOT NULL AS turn;
SELECT position, channel, content FROM agent_memory.memory_context('text-user', 's1', 'what should I pack for my dog?', k => 2, touch => false);

-- No silent empty answers: a user whose memories were written with vectors of another model.
-- Words do not depend on a model: keyword recall searches every model of the user's; a text
-- question (of the text model) finds none of theirs and says which models they have.
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model)
VALUES ('vector-user', 'Prefers neovim as editor', '[1,0.7,0,0]', 'demo-4d'), ('vector-user', 'Lives in Porto', '[0,1,0,0]', 'demo-4d');
SELECT content FROM agent_memory.memory_recall('vector-user', NULL, 3, query_text => 'which editor?', touch => false);
SELECT count(*) AS text_question_rows FROM agent_memory.memory_recall('vector-user', 'which editor do I use?', 3, touch => false);
SELECT content FROM agent_memory.memory_recall('vector-user', '[1,0.6,0,0]', 1, model => 'demo-4d', touch => false);

-- Rows written without an embedding: INSERT, COPY and an UPDATE that clears emb embed the
-- content in the write trigger (the text model for a row left at the default model).
INSERT INTO agent_memory.memories (user_id, content) VALUES ('insert-user', 'Keeps bees on the roof');
COPY agent_memory.memories (user_id, kind, content) FROM STDIN;
insert-user	episodic	Went sailing off Cascais last weekend
\.
SELECT content, embedding_model, vector_dims(emb) AS dims,
       round((emb <=> agent_memory.memory_embed(content))::numeric, 6) AS distance_to_its_text
  FROM agent_memory.memories WHERE user_id = 'insert-user' ORDER BY id;
SELECT content FROM agent_memory.memory_recall('insert-user', 'honey and hives', 1, touch => false);
UPDATE agent_memory.memories SET content = 'Keeps bees and hens on the roof', emb = NULL
 WHERE user_id = 'insert-user' AND content = 'Keeps bees on the roof';
SELECT round((emb <=> agent_memory.memory_embed(content))::numeric, 6) AS distance_after_update
  FROM agent_memory.memories WHERE user_id = 'insert-user' AND content LIKE 'Keeps bees and hens%';
-- A model whose vectors come from outside cannot embed a row: the row is refused, with a hint.
INSERT INTO agent_memory.memories (user_id, content, embedding_model) VALUES ('insert-user', 'no vector', 'outside-only');
\echo :LAST_ERROR_SQLSTATE

-- Errors: a model the server cannot embed with, a model not installed, an empty question.
\set VERBOSITY default
SELECT agent_memory.memory_embed('x', model => 'no-such-model');
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model) VALUES ('text-user', 'an outside vector', '[1,0,0,0]', 'outside-4d');
SELECT agent_memory.memory_embed('x', model => 'outside-4d');
INSERT INTO agent_memory.embedding_models (name, dimensions, folder) VALUES ('not-installed', 384, 'not-installed');
\set VERBOSITY sqlstate
SELECT agent_memory.memory_embed('x', model => 'not-installed');
SELECT * FROM agent_memory.memory_recall('text-user', '   ', 3);
SELECT * FROM agent_memory.memory_reconcile('text-user', NULL, NULL, NULL, 'needs a vector of outside-4d', model => 'outside-4d');
\set VERBOSITY default
DELETE FROM agent_memory.embedding_models WHERE name = 'not-installed';

-- The embedding cache: the same text under the same model is embedded once, across calls and
-- users; it holds a keyed hash of each text, never the text.
SELECT entries > 0 AS has_entries, hits IS NOT NULL AS counted FROM agent_memory.memory_embed_stats();
SELECT hits AS hits_before FROM agent_memory.memory_embed_stats() \gset
SELECT vector_dims(agent_memory.memory_embed('Prefers neovim as editor')) AS dims;
SELECT hits > :hits_before AS a_hit FROM agent_memory.memory_embed_stats();
SELECT count(*) AS columns_of_text FROM pg_attribute
 WHERE attrelid = 'agent_memory.embedding_cache'::regclass AND attnum > 0 AND atttypid = 'text'::regtype AND attname <> 'model';

-- Erasure: the user's words are nowhere afterwards, in any table, the cache included.
CREATE FUNCTION pg_temp.tables_holding(word text) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    t regclass;
    n bigint;
    holding text[] := '{}';
BEGIN
    FOR t IN SELECT c.oid::regclass FROM pg_class c WHERE c.relnamespace = 'agent_memory'::regnamespace AND c.relkind = 'r' ORDER BY 1 LOOP
        EXECUTE format('SELECT count(*) FROM %s r WHERE r::text LIKE %L', t, '%' || word || '%') INTO n;
        IF n > 0 THEN
            holding := holding || t::text;
        END IF;
    END LOOP;
    RETURN holding;
END
$$;
SELECT action FROM agent_memory.memory_reconcile('text-user', NULL, NULL, NULL, 'Keeps a zebrafinch called Pip');
SELECT count(*) AS cached_before FROM agent_memory.embedding_cache c, agent_memory.lock_salt s
 WHERE c.scope_hash = sha256(s.receipt_key || convert_to('user:text-user', 'UTF8'));
SELECT pg_temp.tables_holding('zebrafinch') AS before_the_erasure;
SELECT memories > 0 AS erased FROM agent_memory.memory_erase('text-user');
SELECT count(*) AS cached_after FROM agent_memory.embedding_cache c, agent_memory.lock_salt s
 WHERE c.scope_hash = sha256(s.receipt_key || convert_to('user:text-user', 'UTF8'));
SELECT pg_temp.tables_holding('zebrafinch') AS after_the_erasure;

-- Asynchronous embedding (agent_memory.embed_async): a memory written without an embedding is
-- stored at once with emb NULL, for the background worker (none runs in this database). Keyword
-- recall finds it meanwhile; vector recall does not; packs, consolidation and forgetting pass it
-- over; a model without files is still refused at the write.
SET agent_memory.embed_async = on;
INSERT INTO agent_memory.memories (user_id, content) VALUES ('async-user', 'Plays the theremin on Sundays');
SELECT action FROM agent_memory.memory_reconcile('async-user', NULL, NULL, NULL, 'Grows chillies on the balcony');
SELECT action FROM agent_memory.memory_reconcile('async-user', 'user', 'city', 'Porto', 'Lives in Porto');
SELECT ordinal, action, version FROM agent_memory.memory_reconcile_batch('async-user', '[{"content": "Reads Portuguese poetry"}]');
SELECT content, emb IS NULL AS waiting, embedding_model, version FROM agent_memory.memories
 WHERE user_id = 'async-user' ORDER BY id;
-- The same text again is the same memory (exact content), and a fact's key still decides.
SELECT action FROM agent_memory.memory_reconcile('async-user', NULL, NULL, NULL, 'Grows chillies on the balcony');
SELECT action FROM agent_memory.memory_reconcile('async-user', 'user', 'city', 'Braga', 'Lives in Braga');
SELECT content, predicate, active, emb IS NULL AS waiting FROM agent_memory.memories WHERE user_id = 'async-user' AND subject IS NOT NULL ORDER BY id;
-- Words find them at once; a vector finds none yet.
SELECT content FROM agent_memory.memory_recall('async-user', NULL, 3, query_text => 'theremin');
SELECT content FROM agent_memory.memory_recall('async-user', 'who plays the theremin?', 2);
SELECT count(*) AS by_vector FROM agent_memory.memory_recall('async-user',
       agent_memory.memory_embed('who plays the theremin?'), 5, model => 'all-MiniLM-L6-v2');
SELECT count(*) > 0 AS has_context FROM agent_memory.memory_context('async-user', 's1', 'chillies on the balcony');
SELECT agent_memory.memory_pack('async-user', 'all-MiniLM-L6-v2') >= 0 AS packed;
SELECT content FROM agent_memory.memory_recall('async-user', NULL, 1, query_text => 'chillies balcony');
SELECT count(*) >= 0 AS consolidated FROM agent_memory.memory_consolidate(dry_run => true);
SELECT count(*) >= 0 AS forgotten FROM agent_memory.memory_forget(dry_run => true);
\set VERBOSITY sqlstate
INSERT INTO agent_memory.memories (user_id, content, embedding_model) VALUES ('async-user', 'no files for this model', 'outside-4d');
\set VERBOSITY default
-- A vector written with the row is kept, async or not.
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model)
VALUES ('async-user', 'Owns a red kayak', agent_memory.memory_embed('Owns a red kayak'), 'all-MiniLM-L6-v2');
SELECT content FROM agent_memory.memory_recall('async-user',
       agent_memory.memory_embed('a red kayak'), 1, model => 'all-MiniLM-L6-v2');
RESET agent_memory.embed_async;
-- Once embedded (here by an UPDATE the worker would make), vector recall finds it.
UPDATE agent_memory.memories SET emb = agent_memory.memory_embed(content)
 WHERE user_id = 'async-user' AND content LIKE 'Plays the theremin%';
SELECT m.content, m.version FROM agent_memory.memory_recall('async-user',
       agent_memory.memory_embed('who plays the theremin?'), 1, model => 'all-MiniLM-L6-v2') r
  JOIN agent_memory.memories m ON m.id = r.id;
-- An erasure takes the waiting rows too.
SELECT memories AS erased FROM agent_memory.memory_erase('async-user');

-- New content without a new embedding is embedded anew (a model the server embeds with).
SELECT memory_id AS kid, version AS kv FROM agent_memory.memory_reconcile('update-user', NULL, NULL, NULL, 'Drives a blue van') \gset
SELECT agent_memory.memory_update(:kid, :kv, content => 'Rides a green bicycle') AS new_version;
SELECT round((1 - (emb <=> agent_memory.memory_embed('Rides a green bicycle')))::numeric, 4) AS cosine_to_new_content
  FROM agent_memory.memories WHERE id = :kid;
SELECT memories AS erased FROM agent_memory.memory_erase('update-user');

-- (0.13.0) A memory of the model 'none' is stored only: no embedding, and no recall returns it
-- (neither the vector channel nor the keyword channel, which reads every other model).
INSERT INTO agent_memory.memories (user_id, content, embedding_model) VALUES ('stored-user', 'The violet kite is in the attic', 'none');
INSERT INTO agent_memory.memories (user_id, content) VALUES ('stored-user', 'The violet kite has a torn tail');
SELECT content, emb IS NULL AS no_embedding, embedding_model FROM agent_memory.memories WHERE user_id = 'stored-user' ORDER BY id;
SELECT content FROM agent_memory.memory_recall('stored-user', 'violet kite attic', 5);
SELECT content FROM agent_memory.memory_recall('stored-user', NULL, 5, query_text => 'violet kite attic');
\set VERBOSITY sqlstate
UPDATE agent_memory.memories SET emb = agent_memory.memory_embed(content) WHERE user_id = 'stored-user' AND embedding_model = 'none';
SELECT * FROM agent_memory.memory_recall('stored-user', 'violet kite', 5, model => 'none');
SELECT agent_memory.memory_embed('violet kite', model => 'none');
\set VERBOSITY default
-- Embedded once it names a model that embeds.
UPDATE agent_memory.memories SET embedding_model = 'all-MiniLM-L6-v2' WHERE user_id = 'stored-user' AND embedding_model = 'none';
SELECT content FROM agent_memory.memory_recall('stored-user', 'violet kite attic', 1);
SELECT memories AS erased FROM agent_memory.memory_erase('stored-user');
