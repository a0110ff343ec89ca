-- agent_memory 0.12.0 -> 0.13.0: memories stored only, with no embedding and never recalled.
-- What changes:
--   * the embedding model 'none' marks a memory that is stored and never embedded, recalled,
--     packed, merged by similarity or summarised (the LangGraph store's items put with
--     index=False); the write trigger refuses an embedding for it (22023), and the calls refuse it
--     as their model (memory_recall's model, memory_embed's, agent_memory.default_model and
--     text_model: 22023);
--   * the embedding worker's index of rows to embed (memories_unembedded) leaves them out;
--   * the deadline index (memories_deadline) holds protected memories with a valid_until too;
--   * consolidation merges near-duplicate facts of one subject only (the library's change).
-- Run by ALTER EXTENSION agent_memory UPDATE; every memory is kept. tests/upgrade.sh checks that a
-- database updated from 0.1.0 (through each version) has the same catalog as a fresh install.

-- A model registered as 'none' (vectors from outside under that name) would lose its memories to
-- the new meaning: the update stops and says so.
-- On a Citus worker after agent_memory.distribute(), the coordinator's run of this update has
-- checked and changed the cluster's rows (a worker may not query the distributed tables from
-- the update Citus sends it); the worker's own run changes its objects only.
DO $do$
DECLARE
    distributed_worker boolean := false;
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.pg_extension e WHERE e.extname = 'citus') THEN
        EXECUTE $q$SELECT (SELECT g.groupid FROM pg_catalog.pg_dist_local_group g) <> 0
                      AND EXISTS (SELECT FROM pg_catalog.pg_dist_partition p
                                   WHERE p.logicalrelid = 'agent_memory.memories'::pg_catalog.regclass)$q$
           INTO distributed_worker;
    END IF;
    IF distributed_worker THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM agent_memory.memories m WHERE m.embedding_model = 'none' AND m.emb IS NOT NULL)
       OR EXISTS (SELECT 1 FROM agent_memory.embedding_models e WHERE e.name = 'none' AND e.folder IS NOT NULL) THEN
        RAISE EXCEPTION 'an embedding model named "none" is in use, and 0.13.0 gives "none" a meaning of its own'
            USING ERRCODE = 'object_in_use',
                  HINT = 'Rename the model first (UPDATE agent_memory.memories SET embedding_model = ... WHERE embedding_model = ''none'', and its row in agent_memory.embedding_models), then update the extension.';
    END IF;
    DELETE FROM agent_memory.embedding_models WHERE name = 'none' AND folder IS NULL;
END
$do$;

-- The deadline index holds protected memories with a valid_until too: the LangGraph store's
-- items past their TTL (protected, their deadline in valid_until) are found by it when swept.
-- (Through EXECUTE, each statement its own text: on a Citus cluster, after
-- agent_memory.distribute(), Citus sends the text of a statement on a distributed table to its
-- shards, which inside an extension script would be the whole script.)
DO $ddl$
BEGIN
    EXECUTE 'DROP INDEX agent_memory.memories_deadline';
    EXECUTE $i$CREATE INDEX memories_deadline ON agent_memory.memories (least(expires_at, valid_until))
        WHERE active AND (expires_at IS NOT NULL OR valid_until IS NOT NULL)$i$;
    EXECUTE 'DROP INDEX agent_memory.memories_unembedded';
    -- (0.7.0) The memories the background worker has yet to embed (agent_memory.embed_async).
    EXECUTE $i$CREATE INDEX memories_unembedded ON agent_memory.memories (id) WHERE emb IS NULL AND embedding_model <> 'none'$i$;
    EXECUTE 'COMMENT ON COLUMN agent_memory.memories.embedding_model IS '
            || pg_catalog.quote_literal('Model that made emb; a query only meets memories of its own model. ''none'': a memory stored only, with no embedding, which recall never returns.');
END
$ddl$;

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
