-- Long memories (agent_memory.embed_windows): a memory whose content runs past the word pieces
-- its model reads gets the embeddings of its further windows, and vector recall scores it by its
-- best embedding, so what a long memory says late is found too.
\set VERBOSITY default
\set SHOW_CONTEXT never
-- A long content: 24 sentences about a garden (about 360 word pieces), then 6 about a piano.
-- all-MiniLM-L6-v2 reads the first 256 pieces, which hold only the garden.
\set long 'repeat(''The tomatoes in the garden need water every morning before the sun is high. '', 24) || repeat(''My grandmother''''s old piano was shipped to Oslo last winter, wrapped in blankets on a ship. '', 6)'

-- Off by default: no windows.
SHOW agent_memory.embed_windows;
INSERT INTO agent_memory.memories (user_id, content, embedding_model) VALUES ('win-plain', :long, 'all-MiniLM-L6-v2');
SELECT emb IS NOT NULL AS embedded, emb_windows IS NULL AS no_windows FROM agent_memory.memories WHERE user_id = 'win-plain';

-- On: up to 4 further windows of 256 pieces, each from 32 before the end of the last (two here).
SET agent_memory.embed_windows = 4;
INSERT INTO agent_memory.memories (user_id, content, embedding_model) VALUES
  ('win-user', :long, 'all-MiniLM-L6-v2'),
  ('win-user', 'Keeps the spare house key under the flower pot.', 'all-MiniLM-L6-v2'),
  ('win-user', 'Plays the violin in a quartet on Thursdays.', 'all-MiniLM-L6-v2');
SELECT left(content, 30) AS content, cardinality(emb_windows) AS windows,
       (SELECT bool_and(vector_dims(w) = 384 AND abs(vector_norm(w) - 1) < 1e-5) FROM unnest(emb_windows) w) AS unit_384
  FROM agent_memory.memories WHERE user_id = 'win-user' ORDER BY id;
-- The text's own embedding is unchanged: the same as without windows.
SELECT (SELECT emb FROM agent_memory.memories WHERE user_id = 'win-user' AND content = :long)
     = (SELECT emb FROM agent_memory.memories WHERE user_id = 'win-plain') AS same_emb;
-- The last window holds the piano: it is far nearer a question about it than the text's own
-- embedding (the garden's).
SELECT (emb_windows[cardinality(emb_windows)] <=> agent_memory.memory_embed('Where was the piano shipped?'))
     < (emb <=> agent_memory.memory_embed('Where was the piano shipped?')) - 0.2 AS last_window_holds_the_end
  FROM agent_memory.memories WHERE user_id = 'win-user' AND content = :long;

-- Vector recall: the memory scores by its best embedding, and the question about the piano
-- finds it first; without windows the same memory, read only to its 256th piece, is far from it.
-- (pgvector's cosine and recall's sum in another order: they agree to about 1e-8, not to the bit.)
CREATE TEMP TABLE q AS SELECT agent_memory.memory_embed('Where was the piano shipped?') AS q;
SELECT left(content, 30) AS content,
       abs(similarity - (SELECT greatest(1 - (m.emb <=> q.q), (SELECT max(1 - (w <=> q.q)) FROM unnest(m.emb_windows) w))
                           FROM agent_memory.memories m WHERE m.id = r.id)) < 1e-6 AS best_embedding
  FROM q, agent_memory.memory_recall('win-user', q.q, 3, model => 'all-MiniLM-L6-v2', touch => false) r;
SELECT (SELECT similarity FROM q, agent_memory.memory_recall('win-user', q.q, 1, model => 'all-MiniLM-L6-v2', touch => false))
     > (SELECT similarity FROM q, agent_memory.memory_recall('win-plain', q.q, 1, model => 'all-MiniLM-L6-v2', touch => false)) + 0.2 AS windows_find_the_end;
-- The text call (hybrid by default) shows the same similarity. It weighs the 433-word memory
-- down by its length (agent_memory.length_prior: (60 / 433) ^ 0.5), so it ranks first there
-- without the prior.
SET agent_memory.length_prior = 0;
SELECT left(content, 30) AS content FROM agent_memory.memory_recall('win-user', 'Where was the piano shipped?', 1, touch => false);
SELECT abs(r.similarity - v.similarity) < 1e-6 AS same_similarity
  FROM q, agent_memory.memory_recall('win-user', 'Where was the piano shipped?', 1, touch => false) r,
       agent_memory.memory_recall('win-user', q.q, 1, model => 'all-MiniLM-L6-v2', touch => false) v;

-- Past exact_limit, through the model's HNSW index: the index finds memories by their own
-- embedding, and the windows count in the score of those it finds.
SET agent_memory.exact_limit = 2;
SELECT agent_memory.memory_create_index('all-MiniLM-L6-v2', m => 8, ef_construction => 32) IS NOT NULL AS indexed;
SELECT path, left(content, 30) AS content, round(similarity::numeric, 3) AS similarity_approximate
  FROM q, agent_memory.memory_recall('win-user', q.q, 3, model => 'all-MiniLM-L6-v2', decay => 'none', touch => false);
RESET agent_memory.exact_limit;
SELECT format('DROP INDEX agent_memory.%I', 'memories_hnsw_' || left(md5('all-MiniLM-L6-v2'), 16)) \gexec

-- Packs leave a memory with windows out, and recall reads its row: the same results, packed.
SELECT agent_memory.memory_pack('win-user', 'all-MiniLM-L6-v2') >= 0 AS packed;
SELECT sum(memories) AS packed_memories FROM agent_memory.memory_packs WHERE user_id = 'win-user' AND part = 'embeddings';
SET client_min_messages = debug1;
SELECT left(content, 30) AS content, round(similarity::numeric, 3) AS similarity_packed
  FROM q, agent_memory.memory_recall('win-user', q.q, 3, model => 'all-MiniLM-L6-v2', decay => 'none', touch => false);
RESET client_min_messages;
SELECT left(content, 30) AS content FROM agent_memory.memory_recall('win-user', 'Where was the piano shipped?', 1, touch => false);
RESET agent_memory.length_prior;
-- The windows follow the content: a short content has none, a long one gets them again; the
-- pack's copy is marked stale each time. No write of the column sticks: it is made again from
-- the content (and a write of the windows alone is no new version).
UPDATE agent_memory.memories SET content = 'Grows tomatoes in the garden.' WHERE user_id = 'win-user' AND content = :long;
SELECT cardinality(emb_windows) AS windows, emb_windows IS NULL AS none FROM agent_memory.memories WHERE user_id = 'win-user' AND content LIKE 'Grows%';
UPDATE agent_memory.memories SET content = :long WHERE user_id = 'win-user' AND content LIKE 'Grows%';
SELECT cardinality(emb_windows) AS windows, version FROM agent_memory.memories WHERE user_id = 'win-user' AND content = :long;
UPDATE agent_memory.memories SET emb_windows = ARRAY['[1,2,3]'::vector] WHERE user_id = 'win-user' AND content = :long;
SELECT cardinality(emb_windows) AS windows, vector_dims(emb_windows[1]) AS dims, version FROM agent_memory.memories WHERE user_id = 'win-user' AND content = :long;
UPDATE agent_memory.memories SET emb_windows = ARRAY['[1,2,3]'::vector] WHERE user_id = 'win-user' AND content LIKE 'Keeps%';
SELECT emb_windows IS NULL AS short_has_none FROM agent_memory.memories WHERE user_id = 'win-user' AND content LIKE 'Keeps%';
SELECT count(*) > 0 AS marked_stale FROM agent_memory.memory_pack_stale WHERE user_id = 'win-user';
-- Fewer windows when the setting says so; with 0, a write of the column clears it.
SET agent_memory.embed_windows = 1;
UPDATE agent_memory.memories SET emb_windows = NULL WHERE user_id = 'win-user' AND content = :long;
SELECT cardinality(emb_windows) AS windows FROM agent_memory.memories WHERE user_id = 'win-user' AND content = :long;
SET agent_memory.embed_windows = 0;
UPDATE agent_memory.memories SET emb_windows = NULL WHERE user_id = 'win-user' AND content = :long;
SELECT emb_windows IS NULL AS cleared FROM agent_memory.memories WHERE user_id = 'win-user' AND content = :long;
-- ... and makes none for a write, nor for an update that leaves the content alone.
SET agent_memory.embed_windows = 4;
UPDATE agent_memory.memories SET importance = 0.9 WHERE user_id = 'win-user' AND content = :long;
SELECT emb_windows IS NULL AS untouched FROM agent_memory.memories WHERE user_id = 'win-user' AND content = :long;
-- The backfill of memories written before: rewrite the column.
UPDATE agent_memory.memories SET emb_windows = '{}' WHERE user_id = 'win-user';
SELECT count(emb_windows) AS with_windows FROM agent_memory.memories WHERE user_id = 'win-user';

-- A model whose vectors come from outside has no windows: the server does not embed with it.
INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model) VALUES ('win-user', :long, '[1,0,0]', 'win-outside');
SELECT emb_windows IS NULL AS none FROM agent_memory.memories WHERE user_id = 'win-user' AND embedding_model = 'win-outside';
-- The setting's bounds.
SET agent_memory.embed_windows = 65;
SET agent_memory.embed_windows = -1;
RESET agent_memory.embed_windows;

-- Erasure takes the windows with the rows.
SELECT memories FROM agent_memory.memory_erase('win-user');
SELECT count(*) AS left_over FROM agent_memory.memories WHERE user_id = 'win-user';
SELECT memories FROM agent_memory.memory_erase('win-plain');
