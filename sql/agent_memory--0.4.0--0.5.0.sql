-- agent_memory 0.4.0 -> 0.5.0: the packs' keyword facts become an inverted index of each pack's
-- words. Run by ALTER EXTENSION agent_memory UPDATE; every memory is kept. tests/upgrade.sh checks
-- that a database updated from 0.1.0 (through each version) has the same catalog as a fresh
-- install of 0.5.0.
\echo Use "ALTER EXTENSION agent_memory UPDATE" to load this file. \quit

-- The words packs of 0.4.0 are of the older format (this library reads their memories' rows
-- instead): the packs go (recall is exact without them), and the background worker builds the
-- new ones on its next pack pass (agent_memory.pack_interval), or memory_pack(user_id) does it now.
TRUNCATE agent_memory.memory_packs, agent_memory.memory_pack_users, agent_memory.memory_pack_stale;

COMMENT ON TABLE agent_memory.memory_packs IS
    'Recall''s packed embeddings (8-bit, many memories per row) and the same memories'' keyword facts (an inverted index of their words per row); rebuilt by the background worker and memory_pack. A cache: recall stays exact without it.';
