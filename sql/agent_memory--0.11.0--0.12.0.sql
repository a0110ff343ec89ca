-- agent_memory 0.11.0 -> 0.12.0: text paths that no tenant can use to read, stall or crash
-- another's (hardening round 3). What changes:
--   * the embedding cache is per user: an entry is found again only for the user whose text made
--     it (a call without a user: the session's user, else the role), and keyed by every field of
--     the model's row that changes what it computes; the cache is emptied once here (its entries
--     had no user), and fills again;
--   * an erasure drops every cache entry of the user (uncache_user, by the entries' scope), and
--     every process's recent embeddings;
--   * the write trigger refuses empty content (22023), and content and metadata past
--     agent_memory.max_content_bytes and max_metadata_bytes (54000) on every path (INSERT, COPY,
--     the LangGraph store), as the functions did;
--   * the write trigger embeds a memory for its user (embed_row, which refuses a role that may not
--     write for that user: 42501), and embeds again the new content of a plain UPDATE of content
--     that keeps the old embedding, for a model the server embeds with;
--   * a role bound to users registers no new model by writing with it (register_model: 42501);
--   * memory_embed_stats() is an admin's (grant_access gives it to admins only; the function
--     refuses other roles: 42501).
-- Run by ALTER EXTENSION agent_memory UPDATE; every memory is kept. tests/upgrade.sh checks that a
-- database updated from 0.1.0 (through each version) has the same catalog as a fresh install.
\echo Use "ALTER EXTENSION agent_memory UPDATE" to load this file. \quit

CREATE  FUNCTION agent_memory."embed_row"(
	"user_id" TEXT, /* core::option::Option<&str> */
	"content" TEXT, /* core::option::Option<&str> */
	"model" TEXT /* core::option::Option<&str> */
) RETURNS vector /* core::option::Option<agent_memory::vector::VectorResult> */
VOLATILE PARALLEL RESTRICTED
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'embed_row_wrapper';
REVOKE ALL ON FUNCTION agent_memory.embed_row(text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION agent_memory.embed_row(text, text, text) TO PUBLIC;

CREATE  FUNCTION agent_memory."embeddings_erased"() RETURNS void
STRICT VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'embeddings_erased_wrapper';
REVOKE ALL ON FUNCTION agent_memory.embeddings_erased() FROM PUBLIC;

TRUNCATE agent_memory.embedding_cache;
ALTER TABLE agent_memory.embedding_cache ADD COLUMN scope_hash bytea NOT NULL;
CREATE INDEX embedding_cache_scope ON agent_memory.embedding_cache (scope_hash);
COMMENT ON TABLE agent_memory.embedding_cache IS
    'Embeddings the server computed, per user (scope_hash), by model and a keyed hash of the scope, the model''s row and the text (no text); bounded by agent_memory.embed_cache_size. See memory_embed_stats().';

-- An erasure's part of the caches (0.12.0): every entry of the user's scope goes, under every
-- model (the texts of the user's memories and turns, the user's questions, texts replaced or
-- merged before), and every process drops its recent embeddings (now and at the erasure's
-- commit). The scope's key is the library's (src/embedder.rs, user_scope).
CREATE OR REPLACE FUNCTION agent_memory.uncache_user(user_id text) RETURNS bigint
LANGUAGE plpgsql VOLATILE STRICT SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    n bigint;
BEGIN
    DELETE FROM agent_memory.embedding_cache c
     USING agent_memory.lock_salt s
     WHERE c.scope_hash = pg_catalog.sha256(s.receipt_key || pg_catalog.convert_to('user:' || uncache_user.user_id, 'UTF8'));
    GET DIAGNOSTICS n = ROW_COUNT;
    PERFORM agent_memory.embeddings_erased();
    RETURN n;
END
$body$;
REVOKE ALL ON FUNCTION agent_memory.uncache_user(text) FROM PUBLIC;
COMMENT ON FUNCTION agent_memory.uncache_user(text) IS 'Drops the embedding caches'' entries of a user''s texts (memory_erase calls it).';

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
    -- (0.12.0) New content with the old embedding, of a model the server embeds with (a plain
    -- UPDATE ... SET content): the embedding is made again from the new content, as
    -- memory_update does. A model whose vectors come from outside keeps the one it was given.
    IF TG_OP = 'UPDATE' AND NEW.content IS DISTINCT FROM OLD.content AND NEW.emb IS NOT NULL AND OLD.emb IS NOT NULL
       AND NOT (NEW.emb OPERATOR(@vs@.<>) OLD.emb) AND NEW.embedding_model IS NOT DISTINCT FROM OLD.embedding_model
       AND EXISTS (SELECT 1 FROM agent_memory.embedding_models m WHERE m.name = NEW.embedding_model AND m.folder IS NOT NULL) THEN
        NEW.emb := NULL;
    END IF;
    IF NEW.emb IS NULL AND NEW.content IS NOT NULL THEN
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

-- memory_embed_stats() is an admin's: grant_access gives it to admins only, and the roles that
-- had it as readers or writers lose it.
CREATE OR REPLACE FUNCTION agent_memory.grant_access(role regrole, level text) RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    f regprocedure;
    functions text[];
    vs text;
BEGIN
    IF role IS NULL OR level IS NULL THEN
        RAISE EXCEPTION 'role and level must not be NULL' USING ERRCODE = 'null_value_not_allowed',
            HINT = 'Pass a role and one of reader, writer, admin.';
    END IF;
    IF level NOT IN ('reader', 'writer', 'admin') THEN
        RAISE EXCEPTION 'unknown access level "%"', level USING ERRCODE = 'invalid_parameter_value',
            HINT = 'Use one of reader, writer, admin.';
    END IF;
    -- On a Citus cluster, on every worker first (each commits there as it runs), then here: the
    -- grants made here reach the workers' copies of the distributed tables and functions through
    -- Citus, in this transaction, and would hold what the workers' own call needs.
    PERFORM agent_memory.on_workers(pg_catalog.format('agent_memory.grant_access(%L, %L)', role, level));
    SELECT pg_catalog.quote_ident(n.nspname) INTO vs FROM pg_catalog.pg_extension e
      JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector';
    -- On a Citus cluster, the grants on the distributed tables and the copies of the registries
    -- go over one connection per node (Citus refuses them in parallel beside the registries).
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        PERFORM pg_catalog.set_config('citus.multi_shard_modify_mode', 'sequential', true);
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA agent_memory TO %s', role);
    -- pgvector's types and functions; most installations already let everyone use its schema.
    IF NOT pg_catalog.has_schema_privilege(role, vs, 'USAGE') THEN
        EXECUTE format('GRANT USAGE ON SCHEMA %s TO %s', vs, role);
    END IF;
    EXECUTE format('GRANT SELECT ON agent_memory.memories, agent_memory.turns, agent_memory.tasks, agent_memory.predicates,
                    agent_memory.embedding_models, agent_memory.memory_stats, agent_memory.predicate_declarations,
                    agent_memory.role_users TO %s', role);
    EXECUTE format('GRANT UPDATE (last_hit_at, hit_count) ON agent_memory.memories TO %s', role);
    functions := ARRAY['memory_recall', 'memory_context', 'memory_context_text', 'memory_evidence', 'memory_decay_score',
                       'memory_retention_score', 'memory_importance', 'memory_retention', 'last_success',
                       'memory_embed', 'memory_hit_stats'];
    IF level IN ('writer', 'admin') THEN
        EXECUTE format('GRANT INSERT, UPDATE ON agent_memory.memories, agent_memory.turns, agent_memory.tasks TO %s', role);
        -- Writers add predicates (never change one: that is the admins'), and register a model
        -- only by writing a memory of it (register_model); the lock keys' secret is no one's.
        EXECUTE format('GRANT INSERT ON agent_memory.predicates, agent_memory.predicate_declarations TO %s', role);
        EXECUTE format('GRANT USAGE ON SEQUENCE %s, %s TO %s',
                       pg_catalog.pg_get_serial_sequence('agent_memory.memories', 'id'),
                       pg_catalog.pg_get_serial_sequence('agent_memory.turns', 'id'), role);
        functions := functions || ARRAY['memory_reconcile', 'memory_reconcile_batch', 'memory_update', 'memory_record_turn',
                                        'register_model', 'first_bad_time'];
    END IF;
    IF level = 'admin' THEN
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON agent_memory.memories, agent_memory.turns, agent_memory.tasks,
                        agent_memory.predicates, agent_memory.runs, agent_memory.maintenance_state,
                        agent_memory.predicate_declarations, agent_memory.role_users TO %s', role);
        EXECUTE format('GRANT INSERT, UPDATE, DELETE ON agent_memory.embedding_models TO %s', role);
        EXECUTE format('GRANT SELECT ON agent_memory.erasures, agent_memory.last_runs TO %s', role);
        EXECUTE format('GRANT INSERT ON agent_memory.erasures TO %s', role);
        EXECUTE format('GRANT SELECT, INSERT, DELETE ON agent_memory.memory_packs, agent_memory.memory_pack_users,
                        agent_memory.memory_pack_stale TO %s', role);
        EXECUTE format('GRANT USAGE ON SEQUENCE %s, %s TO %s',
                       pg_catalog.pg_get_serial_sequence('agent_memory.runs', 'id'),
                       pg_catalog.pg_get_serial_sequence('agent_memory.erasures', 'id'), role);
        functions := functions || ARRAY['memory_forget', 'memory_consolidate', 'memory_erase', 'memory_create_index', 'memory_pack',
                                        'memory_fold_hits', 'memory_embed_stats',
                                        'erasure_lock', 'erasure_hash', 'hmac_sha256', 'bind_role', 'unbind_role', 'uncache_user'];
        EXECUTE format('GRANT agent_memory_admin TO %s', role);
    END IF;
    FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
              WHERE p.pronamespace = 'agent_memory'::regnamespace AND p.proname = ANY (functions) LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', f, role);
    END LOOP;
    RETURN format('%s may now use agent_memory as %s', role, level);
END
$body$;

DO $do$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT DISTINCT a.grantee::regrole AS role
               FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
              WHERE p.oid = 'agent_memory.memory_embed_stats()'::pg_catalog.regprocedure
                AND a.grantee <> 0 AND a.grantee <> p.proowner
                AND NOT pg_catalog.pg_has_role(a.grantee, 'agent_memory_admin', 'MEMBER') LOOP
        EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION agent_memory.memory_embed_stats() FROM %s', r.role);
    END LOOP;
END
$do$;

COMMENT ON COLUMN agent_memory.embedding_models.folder IS 'The folder of the model''s files (config.json, tokenizer.json, model.safetensors), relative to agent_memory.model_path (a folder outside it is refused unless a superuser sets agent_memory.model_folders_anywhere); NULL for a model whose vectors come from outside.';

-- (0.6.0) The one way a model is registered besides an admin's INSERT: the first write of a
-- memory of the model (the write trigger calls this). Application roles cannot INSERT into
-- embedding_models, so no writer can claim a model's name with another dimension by hand.
-- (0.12.0) Nor by a write: a role bound to users (agent_memory.role_users), which works for some
-- tenants only, registers no model for all of them (42501); admins, workers, superusers and
-- roles bound to no user (which act for every user) still do. The caller is the role the session
-- runs as (SET ROLE's, else the session's), which this function, running as its owner, reads
-- from the settings.
CREATE OR REPLACE FUNCTION agent_memory.register_model(name text, dimensions integer) RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    registered integer;
    caller     name;
BEGIN
    SELECT m.dimensions INTO registered FROM agent_memory.embedding_models m WHERE m.name = register_model.name;
    IF registered IS NULL THEN
        caller := CASE WHEN pg_catalog.current_setting('role') = 'none' THEN session_user
                       ELSE pg_catalog.current_setting('role')::name END;
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = caller AND (r.rolsuper OR r.rolbypassrls))
           AND NOT pg_catalog.pg_has_role(caller, 'agent_memory_admin', 'MEMBER')
           AND NOT pg_catalog.pg_has_role(caller, 'agent_memory_worker', 'MEMBER')
           AND EXISTS (SELECT 1 FROM agent_memory.role_users b JOIN pg_catalog.pg_roles r ON r.rolname = b.role_name
                        WHERE pg_catalog.pg_has_role(caller, r.oid, 'MEMBER')) THEN
            RAISE EXCEPTION 'embedding model "%" is not registered, and a role bound to users may not register one', register_model.name
                USING ERRCODE = 'insufficient_privilege',
                      DETAIL = 'A model''s name and dimension hold for every tenant of the database.',
                      HINT = pg_catalog.format('Write with a registered model, or have an admin register it: SELECT agent_memory.register_model(%L, %s);',
                                               register_model.name, register_model.dimensions);
        END IF;
        BEGIN
            INSERT INTO agent_memory.embedding_models (name, dimensions) VALUES (register_model.name, register_model.dimensions)
            ON CONFLICT ON CONSTRAINT embedding_models_pkey DO NOTHING;
        EXCEPTION WHEN internal_error THEN
            -- On a Citus worker, a write inside a transaction block cannot reach the registry's
            -- copies on the other nodes (Citus refuses it without a SQLSTATE of its own).
            IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
                RAISE;
            END IF;
            RAISE EXCEPTION 'embedding model "%" is not registered, and this node of the Citus cluster cannot register it from inside this call', register_model.name
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = pg_catalog.format('Register it through the coordinator first: SELECT agent_memory.register_model(%L, %s);',
                                               register_model.name, register_model.dimensions);
        END;
        SELECT m.dimensions INTO registered FROM agent_memory.embedding_models m WHERE m.name = register_model.name;
    END IF;
    RETURN registered;
END
$body$;
REVOKE ALL ON FUNCTION agent_memory.register_model(text, integer) FROM PUBLIC;
COMMENT ON FUNCTION agent_memory.register_model(text, integer) IS
    'The dimension registered for a model, registering it with this dimension when it is new (the first write of a memory of the model).';
