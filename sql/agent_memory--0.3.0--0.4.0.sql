-- agent_memory 0.3.0 -> 0.4.0: hybrid and keyword recall through the packs. Run by ALTER
-- EXTENSION agent_memory UPDATE; every memory is kept. tests/upgrade.sh checks that a database
-- updated from 0.1.0 (through each version) has the same catalog as a fresh install of 0.4.0.
\echo Use "ALTER EXTENSION agent_memory UPDATE" to load this file. \quit

-- Packs gain a second part, the keyword facts of their memories: the packs of 0.3.0 go (recall
-- is exact without them), and the background worker builds the new ones on its next pack pass
-- (agent_memory.pack_interval), or memory_pack(user_id) does it now.
TRUNCATE agent_memory.memory_packs, agent_memory.memory_pack_users, agent_memory.memory_pack_stale;

-- Recall's packed embeddings: a user's embeddings of one model quantised to 8 bits, a page of
-- them per row (part 'embeddings'), and beside each such row the keyword facts of the same
-- memories (part 'words': length, terms, kind, archiving, end of validity), read only when recall
-- counts words; crates/core/src/pack.rs has the formats and the bounds. A cache, rebuilt by the
-- background worker (and memory_pack): recall reads the exact row of every memory a pack does
-- not cover or cannot rule out, so results are the same with or without packs. Not dumped: a
-- restored database rebuilds them.
ALTER TABLE agent_memory.memory_packs
    ADD COLUMN part text NOT NULL CHECK (part IN ('embeddings', 'words')),
    DROP CONSTRAINT memory_packs_pkey,
    ADD CONSTRAINT memory_packs_pkey PRIMARY KEY (user_id, embedding_model, part, pack_no);
COMMENT ON TABLE agent_memory.memory_packs IS
    'Recall''s packed embeddings (8-bit, many memories per row) and, beside each row, the same memories'' keyword facts; rebuilt by the background worker and memory_pack. A cache: recall stays exact without it.';
COMMENT ON TABLE agent_memory.memory_pack_stale IS
    'Memories whose packed copy may be out of date; recall reads them exactly until the pack is rebuilt.';

-- A packed copy no longer holds when the embedding, model, id or user changes, or the importance
-- rises (the similarity bound assumes at most the packed importance); nor, for the keyword facts
-- packed beside it, when the text, kind, archiving or end of validity changes. Skipped while
-- forgetting's expiry and eviction mark their own batch in the same statement.
DROP TRIGGER memories_pack_stale_update ON agent_memory.memories;
CREATE TRIGGER memories_pack_stale_update AFTER UPDATE ON agent_memory.memories
    FOR EACH ROW
    WHEN ((NEW.emb IS DISTINCT FROM OLD.emb
           OR NEW.importance > OLD.importance
           OR NEW.embedding_model IS DISTINCT FROM OLD.embedding_model
           OR NEW.id IS DISTINCT FROM OLD.id
           OR NEW.user_id IS DISTINCT FROM OLD.user_id
           OR NEW.content IS DISTINCT FROM OLD.content
           OR NEW.kind IS DISTINCT FROM OLD.kind
           OR NEW.archived_at IS DISTINCT FROM OLD.archived_at
           OR NEW.expires_at IS DISTINCT FROM OLD.expires_at
           OR NEW.valid_until IS DISTINCT FROM OLD.valid_until)
          AND NOT agent_memory.pack_deletes_marked())
    EXECUTE FUNCTION agent_memory.memories_mark_stale();
