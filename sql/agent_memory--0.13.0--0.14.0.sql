-- agent_memory 0.13.0 -> 0.14.0: more than one embedding for a long memory.
-- What changes:
--   * memories.emb_windows (vector[]): with agent_memory.embed_windows set, a memory whose content
--     runs past what its model reads gets the embeddings of its further windows, made by the
--     write trigger (embed_windows, which refuses a role that may not write for the user, as
--     embed_row does); vector recall scores a memory by the best of its embeddings;
--   * the write trigger runs on every change of content, and makes the windows again whenever
--     the content, the embedding, the model or the windows change;
--   * a memory with windows is left out of the packs (recall reads its row), so the pack trigger
--     marks a memory whose windows come or go;
--   * on a Citus cluster (after agent_memory.distribute()): this update runs there, and so does
--     TRUNCATE of the memories (the pack trigger empties the packs from the coordinator only).
-- Run by ALTER EXTENSION agent_memory UPDATE; every memory is kept, with no windows until it is
-- written again (or UPDATE ... SET emb_windows = '{}' makes them, with the setting on).
-- tests/upgrade.sh checks that a database updated from 0.1.0 (through each version) has the same
-- catalog as a fresh install.
\echo Use "ALTER EXTENSION agent_memory UPDATE" to load this file. \quit

-- On a Citus cluster (after agent_memory.distribute()) the statements on the distributed table
-- run on the coordinator reach its shards: Citus sends each statement's text to the workers,
-- which inside an extension script would be the whole script, so they run through EXECUTE, each
-- its own text. The workers run this script on their own tables (IF NOT EXISTS: the column
-- reached them by the coordinator's ALTER TABLE already).
DO $ddl$
BEGIN
    EXECUTE 'ALTER TABLE agent_memory.memories ADD COLUMN IF NOT EXISTS emb_windows vector[]';
    EXECUTE 'COMMENT ON COLUMN agent_memory.memories.emb_windows IS ' || pg_catalog.quote_literal('Embeddings of the windows of a long content past what emb covers (the model''s first word pieces), with agent_memory.embed_windows set; vector recall scores the memory by the best of emb and these. Made by the write trigger from content and embedding_model whenever one of them, emb or this column changes; NULL when the model reads all of the content, or with embed_windows 0.');
END
$ddl$;

CREATE  FUNCTION agent_memory."embed_windows"(
	"user_id" TEXT, /* Option < & str > */
	"content" TEXT, /* Option < & str > */
	"model" TEXT /* Option < & str > */
) RETURNS vector[] /* Option < crate :: vector :: VectorArrayResult > */
VOLATILE PARALLEL RESTRICTED
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'embed_windows_wrapper';
REVOKE ALL ON FUNCTION agent_memory.embed_windows(text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION agent_memory.embed_windows(text, text, text) TO PUBLIC;

DO $do$
BEGIN
EXECUTE pg_catalog.replace($src$
CREATE OR REPLACE FUNCTION agent_memory.memories_before_write() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    dims        integer;
    registered  integer;
    canonical   text;
    limit_bytes bigint;
BEGIN
    -- A memory written without an embedding (INSERT or COPY of its content, or an UPDATE that
    -- sets emb to NULL) is embedded from its content: with its embedding_model when the server
    -- has that model's files, and with agent_memory.text_model when the row was left at the
    -- default model (agent_memory.default_model), whose vectors come from outside. It is
    -- embedded here, or (0.7.0) under agent_memory.embed_async by the background worker, in
    -- batches: until then emb stays NULL and only keyword recall finds the memory.
    -- (0.12.0) Every path that writes a memory (reconcile, update, INSERT, COPY, the LangGraph
    -- store) holds to the same bounds: content that is not empty and at most
    -- agent_memory.max_content_bytes, metadata of at most agent_memory.max_metadata_bytes (as
    -- text). The settings are read as text: without the library loaded they are not defined,
    -- and their defaults hold.
    IF TG_OP = 'INSERT' OR NEW.content IS DISTINCT FROM OLD.content THEN
        IF pg_catalog.btrim(NEW.content, E' \t\n\r') = '' THEN
            RAISE EXCEPTION 'content must not be empty'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Store the memory''s text: a fact, a preference or an event in words.';
        END IF;
        limit_bytes := coalesce(pg_catalog.pg_size_bytes(nullif(pg_catalog.current_setting('agent_memory.max_content_bytes', true), '')), 1048576);
        IF pg_catalog.octet_length(NEW.content) > limit_bytes THEN
            RAISE EXCEPTION 'content is % bytes, more than the limit of %', pg_catalog.octet_length(NEW.content), limit_bytes
                USING ERRCODE = 'program_limit_exceeded',
                      HINT = 'Store a shorter content, or ask an administrator to raise agent_memory.max_content_bytes.';
        END IF;
    END IF;
    IF TG_OP = 'INSERT' OR NEW.metadata IS DISTINCT FROM OLD.metadata THEN
        limit_bytes := coalesce(pg_catalog.pg_size_bytes(nullif(pg_catalog.current_setting('agent_memory.max_metadata_bytes', true), '')), 65536);
        IF pg_catalog.octet_length(NEW.metadata::text) > limit_bytes THEN
            RAISE EXCEPTION 'metadata is % bytes, more than the limit of %', pg_catalog.octet_length(NEW.metadata::text), limit_bytes
                USING ERRCODE = 'program_limit_exceeded',
                      HINT = 'Store less in metadata, or ask an administrator to raise agent_memory.max_metadata_bytes.';
        END IF;
    END IF;
    -- (0.13.0) A memory of the model 'none' is stored only: it has no embedding, and recall, the
    -- embedding worker, the packs and consolidation's merging and summaries pass it by (the
    -- LangGraph store's items put with index=False). It is found by its id, key or metadata.
    IF NEW.embedding_model = 'none' AND NEW.emb IS NOT NULL THEN
        RAISE EXCEPTION 'a memory of embedding model "none" has no embedding'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Leave emb NULL to store a memory that is not recalled, or set embedding_model to the model that made the embedding.';
    END IF;
    -- (0.12.0) New content with the old embedding, of a model the server embeds with (a plain
    -- UPDATE ... SET content): the embedding is made again from the new content, as
    -- memory_update does. A model whose vectors come from outside keeps the one it was given.
    IF TG_OP = 'UPDATE' AND NEW.content IS DISTINCT FROM OLD.content AND NEW.emb IS NOT NULL AND OLD.emb IS NOT NULL
       AND NOT (NEW.emb OPERATOR(@vs@.<>) OLD.emb) AND NEW.embedding_model IS NOT DISTINCT FROM OLD.embedding_model
       AND EXISTS (SELECT 1 FROM agent_memory.embedding_models m WHERE m.name = NEW.embedding_model AND m.folder IS NOT NULL) THEN
        NEW.emb := NULL;
    END IF;
    IF NEW.emb IS NULL AND NEW.content IS NOT NULL AND NEW.embedding_model IS DISTINCT FROM 'none' THEN
        IF NEW.embedding_model IS NULL
           OR (NEW.embedding_model = coalesce(nullif(current_setting('agent_memory.default_model', true), ''), 'default')
               AND NOT EXISTS (SELECT 1 FROM agent_memory.embedding_models m
                                WHERE m.name = NEW.embedding_model AND m.folder IS NOT NULL)) THEN
            NEW.embedding_model := coalesce(nullif(current_setting('agent_memory.text_model', true), ''), 'all-MiniLM-L6-v2');
        END IF;
        IF NOT agent_memory.embed_later(NEW.embedding_model) THEN
            -- (0.12.0) Embedded for the row's user: the cache's entries are the user's.
            NEW.emb := agent_memory.embed_row(NEW.user_id, NEW.content, NEW.embedding_model);
        END IF;
    END IF;
    IF NEW.emb IS NOT NULL AND (TG_OP = 'INSERT' OR NEW.emb OPERATOR(@vs@.<>) OLD.emb
       OR OLD.emb IS NULL OR NEW.embedding_model IS DISTINCT FROM OLD.embedding_model) THEN
        dims := @vs@.vector_dims(NEW.emb);
        SELECT m.dimensions INTO registered FROM agent_memory.embedding_models m WHERE m.name = NEW.embedding_model;
        IF registered IS NULL THEN
            registered := agent_memory.register_model(NEW.embedding_model, dims);
        END IF;
        IF registered <> dims THEN
            RAISE EXCEPTION 'embedding model "%" has % dimensions, but this embedding has %', NEW.embedding_model, registered, dims
                USING ERRCODE = 'data_exception',
                      HINT = 'Set embedding_model to the model that made this embedding; one model has one dimension.';
        END IF;
        IF @vs@.vector_norm(NEW.emb) OPERATOR(pg_catalog.=) 0::double precision THEN
            RAISE EXCEPTION 'the embedding is all zeros'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Store the embedding of the memory''s content: a non-zero vector.';
        END IF;
        NEW.emb := @vs@.l2_normalize(NEW.emb);
    END IF;
    -- (0.14.0) A long memory's further windows (agent_memory.embed_windows), made from its
    -- content and model whenever they, its embedding or the windows themselves are written: the
    -- column holds what the content gives, never a stale or a foreign value. (The setting is read
    -- as text: without the library loaded it is not defined, and makes none.)
    IF TG_OP = 'INSERT' OR NEW.content IS DISTINCT FROM OLD.content OR NEW.embedding_model IS DISTINCT FROM OLD.embedding_model
       OR (NEW.emb IS NULL) <> (OLD.emb IS NULL) OR NEW.emb OPERATOR(@vs@.<>) OLD.emb
       OR (NEW.emb_windows IS NULL) <> (OLD.emb_windows IS NULL) OR NEW.emb_windows OPERATOR(pg_catalog.<>) OLD.emb_windows THEN
        IF NEW.emb IS NOT NULL AND coalesce(nullif(pg_catalog.current_setting('agent_memory.embed_windows', true), ''), '0') <> '0' THEN
            NEW.emb_windows := agent_memory.embed_windows(NEW.user_id, NEW.content, NEW.embedding_model);
        ELSE
            NEW.emb_windows := NULL;
        END IF;
    END IF;

    IF (TG_OP = 'INSERT' OR NEW.metadata IS DISTINCT FROM OLD.metadata)
       AND pg_catalog.jsonb_typeof(NEW.metadata) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'metadata must be a JSON object, not %', coalesce(pg_catalog.jsonb_typeof(NEW.metadata), 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass an object such as ''{"topic": "travel"}'' (''{}'' for none); wrap a list or a value in an object.';
    END IF;

    -- A predicate under another name is written as its own name; a fact of a many-valued
    -- predicate is keyed by its value too.
    IF NEW.predicate IS NOT NULL AND (TG_OP = 'INSERT' OR NEW.predicate IS DISTINCT FROM OLD.predicate
                                      OR NEW.object IS DISTINCT FROM OLD.object) THEN
        canonical := NULL;
        SELECT p.alias_of INTO canonical FROM agent_memory.predicates p WHERE p.predicate = NEW.predicate;
        IF canonical IS NOT NULL THEN
            NEW.predicate := canonical;
        END IF;
        IF NEW.object IS NOT NULL AND EXISTS (SELECT 1 FROM agent_memory.predicates p
                                               WHERE p.predicate = NEW.predicate AND p.cardinality = 'many') THEN
            NEW.object_key := lower(btrim(NEW.object));
        ELSE
            NEW.object_key := NULL;
        END IF;
    END IF;

    IF TG_OP = 'INSERT' THEN
        IF NEW.importance IS NULL THEN
            NEW.importance := agent_memory.memory_importance(NEW.content, NEW.kind);
        END IF;
        IF NEW.protected OR NEW.kind = 'procedural' THEN
            NEW.expires_at := NULL;
        ELSIF NEW.expires_at IS NULL THEN
            -- Retention counts from the write, so imported old memories are not expired on arrival.
            NEW.expires_at := greatest(NEW.created_at, now())
                              + agent_memory.memory_retention(NEW.kind, NEW.importance, NEW.protected);
        END IF;
        NEW.version := coalesce(NEW.version, 1);
    ELSE
        IF NEW.protected THEN
            NEW.expires_at := NULL;
        END IF;
        IF NEW.emb OPERATOR(@vs@.<>) OLD.emb
           OR (NEW.user_id, NEW.kind, NEW.subject, NEW.predicate, NEW.object, NEW.content,
            NEW.embedding_model, NEW.importance, NEW.protected, NEW.source, NEW.source_turn_id, NEW.active,
            NEW.retired_reason, NEW.retired_at, NEW.superseded_by, NEW.valid_until, NEW.expires_at, NEW.metadata,
            NEW.archived_at)
           IS DISTINCT FROM
           (OLD.user_id, OLD.kind, OLD.subject, OLD.predicate, OLD.object, OLD.content,
            OLD.embedding_model, OLD.importance, OLD.protected, OLD.source, OLD.source_turn_id, OLD.active,
            OLD.retired_reason, OLD.retired_at, OLD.superseded_by, OLD.valid_until, OLD.expires_at, OLD.metadata,
            OLD.archived_at) THEN
            NEW.version := OLD.version + 1;
            -- A rewrite of an archived memory (a reconcile that restates it, an update) brings it
            -- back into recall; the archiving itself sets archived_at.
            IF OLD.archived_at IS NOT NULL AND NEW.archived_at IS NOT DISTINCT FROM OLD.archived_at AND NEW.active THEN
                NEW.archived_at := NULL;
            END IF;
        ELSE
            NEW.version := OLD.version;
        END IF;
    END IF;
    RETURN NEW;
END
$body$
$src$, '@vs@', pg_catalog.quote_ident((SELECT n.nspname FROM pg_catalog.pg_extension e
                                           JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
                                          WHERE e.extname = 'vector')));
END
$do$;

-- TRUNCATE of the memories on a Citus cluster: the trigger empties the packs from the
-- coordinator's table only (on each shard, where it fires too, it would truncate the
-- distributed pack tables from inside the coordinator's truncation, and deadlock).
CREATE OR REPLACE FUNCTION agent_memory.memories_mark_stale() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        -- (0.14.0) On a Citus cluster the trigger fires on the coordinator's table, whose
        -- truncation empties the packs of every node, and on each shard, where it does nothing.
        IF TG_RELID = 'agent_memory.memories'::pg_catalog.regclass THEN
            TRUNCATE agent_memory.memory_packs, agent_memory.memory_pack_users, agent_memory.memory_pack_stale;
        END IF;
        RETURN NULL;
    ELSIF TG_OP = 'DELETE' THEN
        -- Only a row a pack may hold: one of a packed user and model, at most the last id packed.
        IF NOT EXISTS (SELECT 1 FROM agent_memory.memory_pack_users p
                        WHERE p.user_id = OLD.user_id AND p.embedding_model = OLD.embedding_model AND p.last_id >= OLD.id) THEN
            -- A rebuild of the user's packs may be reading the row now: wait for it (it holds
            -- this lock) and look again; a later rebuild waits for this transaction instead.
            PERFORM pg_catalog.pg_advisory_xact_lock_shared(pg_catalog.hashtextextended(
                'agent_memory.pack:' || OLD.user_id || '/' || OLD.embedding_model, (SELECT s.salt FROM agent_memory.lock_salt s)));
            IF NOT EXISTS (SELECT 1 FROM agent_memory.memory_pack_users p
                            WHERE p.user_id = OLD.user_id AND p.embedding_model = OLD.embedding_model AND p.last_id >= OLD.id) THEN
                RETURN NULL;
            END IF;
        END IF;
        INSERT INTO agent_memory.memory_pack_stale (user_id, embedding_model, id) VALUES (OLD.user_id, OLD.embedding_model, OLD.id);
        RETURN NULL;
    END IF;
    INSERT INTO agent_memory.memory_pack_stale (user_id, embedding_model, id) VALUES (NEW.user_id, NEW.embedding_model, NEW.id);
    RETURN NULL;
END
$body$;

-- Both update triggers are made again. On a Citus cluster the coordinator's trigger statements
-- reach the shards, which Citus allows only with its unsafe triggers on (as distribute() has
-- them, for the same triggers; the setting lasts until the end of this script).
DO $ddl$
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.pg_extension e WHERE e.extname = 'citus') THEN
        PERFORM pg_catalog.set_config('citus.enable_unsafe_triggers', 'on', true);
    END IF;
    EXECUTE $t$DROP TRIGGER memories_before_update ON agent_memory.memories$t$;
    EXECUTE $t$CREATE TRIGGER memories_before_update BEFORE UPDATE ON agent_memory.memories
        FOR EACH ROW
        WHEN (NEW.emb <> OLD.emb OR (NEW.emb IS NULL) <> (OLD.emb IS NULL)
              OR NEW.embedding_model IS DISTINCT FROM OLD.embedding_model
              OR NEW.content IS DISTINCT FROM OLD.content
              OR NEW.emb_windows <> OLD.emb_windows OR (NEW.emb_windows IS NULL) <> (OLD.emb_windows IS NULL)
              OR (NEW.protected AND NEW.expires_at IS NOT NULL)
              OR (OLD.archived_at IS NOT NULL AND NEW.archived_at IS NOT DISTINCT FROM OLD.archived_at AND NEW.active)
              OR (NEW.version IS DISTINCT FROM OLD.version + 1
                  AND (NEW.user_id, NEW.kind, NEW.subject, NEW.predicate, NEW.object, NEW.content,
                       NEW.importance, NEW.protected, NEW.source, NEW.source_turn_id, NEW.active,
                       NEW.retired_reason, NEW.retired_at, NEW.superseded_by, NEW.valid_until, NEW.expires_at,
                       NEW.metadata, NEW.archived_at, NEW.version)
                      IS DISTINCT FROM
                      (OLD.user_id, OLD.kind, OLD.subject, OLD.predicate, OLD.object, OLD.content,
                       OLD.importance, OLD.protected, OLD.source, OLD.source_turn_id, OLD.active,
                       OLD.retired_reason, OLD.retired_at, OLD.superseded_by, OLD.valid_until, OLD.expires_at,
                       OLD.metadata, OLD.archived_at, OLD.version)))
        EXECUTE FUNCTION agent_memory.memories_before_write()$t$;
    EXECUTE $t$DROP TRIGGER memories_pack_stale_update ON agent_memory.memories$t$;
    EXECUTE $t$CREATE TRIGGER memories_pack_stale_update AFTER UPDATE ON agent_memory.memories
        FOR EACH ROW
        WHEN ((NEW.emb <> OLD.emb OR (NEW.emb IS NULL) <> (OLD.emb IS NULL)
               OR NEW.importance > OLD.importance
               OR NEW.embedding_model IS DISTINCT FROM OLD.embedding_model
               OR NEW.id IS DISTINCT FROM OLD.id
               OR NEW.user_id IS DISTINCT FROM OLD.user_id
               OR NEW.content IS DISTINCT FROM OLD.content
               OR NEW.kind IS DISTINCT FROM OLD.kind
               OR NEW.archived_at IS DISTINCT FROM OLD.archived_at
               OR NEW.expires_at IS DISTINCT FROM OLD.expires_at
               OR NEW.valid_until IS DISTINCT FROM OLD.valid_until
               OR (NEW.emb_windows IS NULL) <> (OLD.emb_windows IS NULL))
              AND NOT agent_memory.pack_deletes_marked())
        EXECUTE FUNCTION agent_memory.memories_mark_stale()$t$;
END
$ddl$;
