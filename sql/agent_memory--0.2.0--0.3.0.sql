-- agent_memory 0.2.0 -> 0.3.0: recall's packed embeddings. Run by ALTER EXTENSION agent_memory
-- UPDATE; every row is kept. tests/upgrade.sh checks that a database updated from 0.1.0 (through
-- 0.2.0) has the same catalog as a fresh install of 0.3.0, and that its data survives.
\echo Use "ALTER EXTENSION agent_memory UPDATE" to load this file. \quit

-- Recall reads the ids of a user's memories from this index: it gains the id column. (The
-- update rebuilds it, holding a lock that blocks writes to memories meanwhile: about a second
-- per million memories.)
DROP INDEX agent_memory.memories_user_model_active;
-- The recall path: one user's active memories of one model, user first, in id order (recall
-- reads the ids from the index to match them with the packed embeddings). last_hit_at and
-- hit_count are in no index, so recall's refresh of them is a HOT update.
CREATE INDEX memories_user_model_active ON agent_memory.memories (user_id, embedding_model, id) WHERE active;

-- Recall's packed embeddings: a user's embeddings of one model quantised to 8 bits, a page of
-- them per row (crates/core/src/pack.rs has the format and the bounds). A cache, rebuilt by the
-- background worker (and memory_pack): recall reads the exact embedding of every memory a pack
-- does not cover or cannot rule out, so results are the same with or without packs. Not dumped:
-- a restored database rebuilds them.
CREATE TABLE agent_memory.memory_packs (
    user_id         text        NOT NULL,
    embedding_model text        NOT NULL,
    pack_no         integer     NOT NULL CHECK (pack_no >= 0),
    memories        integer     NOT NULL CHECK (memories > 0),
    last_id         bigint      NOT NULL,
    built_at        timestamptz NOT NULL DEFAULT now(),
    payload         bytea       NOT NULL,
    CONSTRAINT memory_packs_pkey PRIMARY KEY (user_id, embedding_model, pack_no)
);
-- In the row, uncompressed: one page read per pack.
ALTER TABLE agent_memory.memory_packs ALTER COLUMN payload SET STORAGE PLAIN;
COMMENT ON TABLE agent_memory.memory_packs IS
    'Recall''s packed embeddings (8-bit, many memories per row), rebuilt by the background worker and memory_pack. A cache: recall stays exact without it.';

-- One row per packed user and model: how many memories its packs hold, up to which id, and
-- when they were built. The delete trigger, the purge and the worker read this, never the packs.
CREATE TABLE agent_memory.memory_pack_users (
    user_id         text        NOT NULL,
    embedding_model text        NOT NULL,
    memories        integer     NOT NULL CHECK (memories >= 0),
    last_id         bigint      NOT NULL,
    built_at        timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT memory_pack_users_pkey PRIMARY KEY (user_id, embedding_model)
);
COMMENT ON TABLE agent_memory.memory_pack_users IS
    'Each packed user and model: the memories its packs hold, the last id packed, and when the packs were built.';

-- Memories whose packed copy may no longer hold: a new embedding, model, id or user, a higher
-- importance, a deleted row (its id could come back with other content). Recall reads these
-- exactly; a rebuild of the pack clears them.
CREATE TABLE agent_memory.memory_pack_stale (
    user_id         text   NOT NULL,
    embedding_model text   NOT NULL,
    id              bigint NOT NULL
);
CREATE INDEX memory_pack_stale_user ON agent_memory.memory_pack_stale (user_id, embedding_model);
COMMENT ON TABLE agent_memory.memory_pack_stale IS
    'Memories whose packed embedding may be out of date; recall reads them exactly until the pack is rebuilt.';

-- Keeps the packs honest (see memory_pack_stale). SECURITY DEFINER: a writer needs no right on
-- the bookkeeping table, and can only add entries for the rows it changes.
CREATE FUNCTION agent_memory.memories_mark_stale() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        TRUNCATE agent_memory.memory_packs, agent_memory.memory_pack_users, agent_memory.memory_pack_stale;
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
REVOKE ALL ON FUNCTION agent_memory.memories_mark_stale() FROM PUBLIC;

CREATE TRIGGER memories_pack_stale_update AFTER UPDATE ON agent_memory.memories
    FOR EACH ROW
    WHEN (NEW.emb IS DISTINCT FROM OLD.emb
          OR NEW.importance > OLD.importance
          OR NEW.embedding_model IS DISTINCT FROM OLD.embedding_model
          OR NEW.id IS DISTINCT FROM OLD.id
          OR NEW.user_id IS DISTINCT FROM OLD.user_id)
    EXECUTE FUNCTION agent_memory.memories_mark_stale();
-- (The delete trigger is created with the access rules: its condition calls a function of the
-- library, pack_deletes_marked.)
CREATE TRIGGER memories_pack_stale_truncate AFTER TRUNCATE ON agent_memory.memories
    FOR EACH STATEMENT EXECUTE FUNCTION agent_memory.memories_mark_stale();

-- Erasure deletes the user's packs too.
CREATE OR REPLACE FUNCTION agent_memory.memory_erase(user_id text)
RETURNS TABLE (receipt_id bigint, user_hash text, erased_at timestamptz, memories bigint, turns bigint, tasks bigint)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    n_memories bigint;
    n_turns    bigint;
    n_tasks    bigint;
BEGIN
    IF user_id IS NULL OR btrim(user_id) = '' THEN
        RAISE EXCEPTION 'user_id must not be NULL or empty'
            USING ERRCODE = 'null_value_not_allowed', HINT = 'Pass the id of the user whose memories to erase.';
    END IF;
    -- The user's lock, the one reconciliation and recorded turns take: writes of the user wait,
    -- and nothing of theirs is left behind by a write that raced the erasure.
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended('agent_memory.user:' || memory_erase.user_id,
                                                                          (SELECT s.salt FROM agent_memory.lock_salt s)));
    DELETE FROM agent_memory.memories m WHERE m.user_id = memory_erase.user_id;
    GET DIAGNOSTICS n_memories = ROW_COUNT;
    DELETE FROM agent_memory.turns t WHERE t.user_id = memory_erase.user_id;
    GET DIAGNOSTICS n_turns = ROW_COUNT;
    DELETE FROM agent_memory.tasks t WHERE t.user_id = memory_erase.user_id;
    GET DIAGNOSTICS n_tasks = ROW_COUNT;
    DELETE FROM agent_memory.memory_packs p WHERE p.user_id = memory_erase.user_id;
    DELETE FROM agent_memory.memory_pack_users p WHERE p.user_id = memory_erase.user_id;
    DELETE FROM agent_memory.memory_pack_stale s WHERE s.user_id = memory_erase.user_id;
    RETURN QUERY
    INSERT INTO agent_memory.erasures (user_hash, counts)
    VALUES (pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(memory_erase.user_id, 'UTF8')), 'hex'),
            pg_catalog.jsonb_build_object('memories', n_memories, 'turns', n_turns, 'tasks', n_tasks))
    RETURNING erasures.id, erasures.user_hash, erasures.erased_at, n_memories, n_turns, n_tasks;
END
$body$;

GRANT SELECT, INSERT, DELETE ON agent_memory.memory_packs, agent_memory.memory_pack_users, agent_memory.memory_pack_stale
    TO agent_memory_worker;

-- The admin level gains memory_pack and the pack tables.
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
    SELECT pg_catalog.quote_ident(n.nspname) INTO vs FROM pg_catalog.pg_extension e
      JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector';
    EXECUTE format('GRANT USAGE ON SCHEMA agent_memory TO %s', role);
    -- pgvector's types and functions; most installations already let everyone use its schema.
    IF NOT pg_catalog.has_schema_privilege(role, vs, 'USAGE') THEN
        EXECUTE format('GRANT USAGE ON SCHEMA %s TO %s', vs, role);
    END IF;
    EXECUTE format('GRANT SELECT ON agent_memory.memories, agent_memory.turns, agent_memory.tasks, agent_memory.predicates,
                    agent_memory.embedding_models, agent_memory.memory_stats TO %s', role);
    EXECUTE format('GRANT UPDATE (last_hit_at, hit_count) ON agent_memory.memories TO %s', role);
    functions := ARRAY['memory_recall', 'memory_context', 'memory_context_text', 'memory_evidence', 'memory_decay_score',
                       'memory_retention_score', 'memory_importance', 'memory_retention'];
    IF level IN ('writer', 'admin') THEN
        EXECUTE format('GRANT INSERT, UPDATE ON agent_memory.memories, agent_memory.turns, agent_memory.tasks TO %s', role);
        EXECUTE format('GRANT INSERT, UPDATE ON agent_memory.predicates TO %s', role);
        EXECUTE format('GRANT INSERT ON agent_memory.embedding_models TO %s', role);
        EXECUTE format('GRANT SELECT ON agent_memory.lock_salt TO %s', role);
        EXECUTE format('GRANT USAGE ON SEQUENCE %s, %s TO %s',
                       pg_catalog.pg_get_serial_sequence('agent_memory.memories', 'id'),
                       pg_catalog.pg_get_serial_sequence('agent_memory.turns', 'id'), role);
        functions := functions || ARRAY['memory_reconcile', 'memory_reconcile_batch', 'memory_update', 'memory_record_turn'];
    END IF;
    IF level = 'admin' THEN
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON agent_memory.memories, agent_memory.turns, agent_memory.tasks,
                        agent_memory.predicates, agent_memory.runs, agent_memory.maintenance_state TO %s', role);
        EXECUTE format('GRANT SELECT ON agent_memory.erasures, agent_memory.last_runs TO %s', role);
        EXECUTE format('GRANT INSERT ON agent_memory.erasures TO %s', role);
        EXECUTE format('GRANT SELECT, INSERT, DELETE ON agent_memory.memory_packs, agent_memory.memory_pack_users,
                        agent_memory.memory_pack_stale TO %s', role);
        EXECUTE format('GRANT USAGE ON SEQUENCE %s, %s TO %s',
                       pg_catalog.pg_get_serial_sequence('agent_memory.runs', 'id'),
                       pg_catalog.pg_get_serial_sequence('agent_memory.erasures', 'id'), role);
        functions := functions || ARRAY['memory_forget', 'memory_consolidate', 'memory_erase', 'memory_create_index', 'memory_pack'];
        EXECUTE format('GRANT agent_memory_admin TO %s', role);
    END IF;
    FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
              WHERE p.pronamespace = 'agent_memory'::regnamespace AND p.proname = ANY (functions) LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', f, role);
    END LOOP;
    RETURN format('%s may now use agent_memory as %s', role, level);
END
$body$;
COMMENT ON FUNCTION agent_memory.grant_access(regrole, text) IS
    'Grants a role one of the access levels: reader (recall, context, evidence), writer (reader + reconcile, update, turns), admin (writer + forget, consolidate, erase, indexes, packs, bookkeeping).';

CREATE FUNCTION "memory_pack"(
	"user_id" TEXT, /* Option < & str > */
	"model" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS bigint /* i64 */
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'memory_pack_wrapper';
REVOKE ALL ON FUNCTION agent_memory.memory_pack(text, text) FROM PUBLIC;

CREATE FUNCTION "pack_deletes_marked"() RETURNS bool /* bool */
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'pack_deletes_marked_wrapper';
GRANT EXECUTE ON FUNCTION agent_memory.pack_deletes_marked() TO PUBLIC;
CREATE TRIGGER memories_pack_stale_delete AFTER DELETE ON agent_memory.memories
    FOR EACH ROW WHEN (NOT agent_memory.pack_deletes_marked())
    EXECUTE FUNCTION agent_memory.memories_mark_stale();

-- Roles that grant_access made admins under 0.2.0 get what the admin level now includes.
DO $do$
DECLARE
    r regrole;
BEGIN
    FOR r IN SELECT a.oid::regrole FROM pg_catalog.pg_roles a
              WHERE pg_catalog.has_function_privilege(a.oid, 'agent_memory.memory_erase(text)', 'EXECUTE')
                AND NOT a.rolsuper AND a.rolname OPERATOR(pg_catalog.<>) 'agent_memory_worker' LOOP
        EXECUTE pg_catalog.format('GRANT SELECT, INSERT, DELETE ON agent_memory.memory_packs, agent_memory.memory_pack_users,
                                   agent_memory.memory_pack_stale TO %s', r);
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION agent_memory.memory_pack(text, text) TO %s', r);
    END LOOP;
END
$do$;
