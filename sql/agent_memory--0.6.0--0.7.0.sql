-- agent_memory 0.6.0 -> 0.7.0: memories written without an embedding are embedded by the
-- background worker, in batches, under agent_memory.embed_async. Run by ALTER EXTENSION
-- agent_memory UPDATE; every memory is kept. tests/upgrade.sh checks that a database updated from
-- 0.1.0 (through each version) has the same catalog as a fresh install of 0.7.0.
--   * memories.emb may be NULL while the worker has yet to embed the row (keyword recall finds it);
--   * the write trigger leaves such a row to the worker when agent_memory.embed_async is on.
\echo Use "ALTER EXTENSION agent_memory UPDATE" to load this file. \quit

ALTER TABLE agent_memory.memories ALTER COLUMN emb DROP NOT NULL;
COMMENT ON COLUMN agent_memory.memories.emb IS 'Embedding of content (pgvector); its dimension is that of embedding_model. NULL while the background worker has yet to embed it (agent_memory.embed_async): keyword recall finds it meanwhile.';
CREATE INDEX memories_unembedded ON agent_memory.memories (id) WHERE emb IS NULL;

-- Whether a row written without an embedding waits for the worker.
CREATE FUNCTION "embed_later"(
	"model" TEXT /* Option < & str > */
) RETURNS bool /* bool */
STABLE PARALLEL RESTRICTED 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'embed_later_wrapper';
GRANT EXECUTE ON FUNCTION agent_memory.embed_later(text) TO PUBLIC;

-- The write trigger: a row without an embedding is embedded by the write, or left to the worker.
DO $do$
BEGIN
EXECUTE pg_catalog.replace($src$
CREATE OR REPLACE FUNCTION agent_memory.memories_before_write() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    dims       integer;
    registered integer;
    canonical  text;
BEGIN
    -- A memory written without an embedding (INSERT or COPY of its content, or an UPDATE that
    -- sets emb to NULL) is embedded from its content: with its embedding_model when the server
    -- has that model's files, and with agent_memory.text_model when the row was left at the
    -- default model (agent_memory.default_model), whose vectors come from outside. It is
    -- embedded here, or (0.7.0) under agent_memory.embed_async by the background worker, in
    -- batches: until then emb stays NULL and only keyword recall finds the memory.
    IF NEW.emb IS NULL AND NEW.content IS NOT NULL THEN
        IF NEW.embedding_model IS NULL
           OR (NEW.embedding_model = coalesce(nullif(current_setting('agent_memory.default_model', true), ''), 'default')
               AND NOT EXISTS (SELECT 1 FROM agent_memory.embedding_models m
                                WHERE m.name = NEW.embedding_model AND m.folder IS NOT NULL)) THEN
            NEW.embedding_model := coalesce(nullif(current_setting('agent_memory.text_model', true), ''), 'all-MiniLM-L6-v2');
        END IF;
        IF NOT agent_memory.embed_later(NEW.embedding_model) THEN
            NEW.emb := agent_memory.memory_embed(NEW.content, NEW.embedding_model);
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
