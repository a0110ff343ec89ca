-- agent_memory: the access model. Nothing is granted to PUBLIC; roles get one of three levels
-- with agent_memory.grant_access(role, level):
--   reader  recall, memory_context, evidence and the scoring functions; reads the tables, and
--           refreshes last_hit_at and hit_count (a recall's touch);
--   writer  reader + reconcile, update, record turns, declare tasks and predicates;
--   admin   writer + forgetting, consolidation, erasure, indexes, and the bookkeeping tables.
-- Run last (after every function exists).

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA agent_memory FROM PUBLIC;

-- The delete and update triggers that keep packs honest (see memories_mark_stale in
-- schema.sql), skipped while forgetting's purge, expiry and eviction mark their own writes in
-- one statement. Every role that deletes or updates evaluates the condition.
GRANT EXECUTE ON FUNCTION agent_memory.pack_deletes_marked() TO PUBLIC;
CREATE TRIGGER memories_pack_stale_delete AFTER DELETE ON agent_memory.memories
    FOR EACH ROW WHEN (NOT agent_memory.pack_deletes_marked())
    EXECUTE FUNCTION agent_memory.memories_mark_stale();
-- A packed copy no longer holds when the embedding, model, id or user changes, or the importance
-- rises (the similarity bound assumes at most the packed importance); nor, for the keyword facts
-- packed beside it, when the text, kind, archiving or end of validity changes. Skipped while
-- forgetting's expiry and eviction mark their own batch in the same statement.
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

-- Isolation by the database: a role sees, changes and adds only the rows of the user its session
-- names in agent_memory.user_id (none when it names no user). Admins (members of
-- agent_memory_admin) and the workers see every user; superusers always do. The functions that
-- read rows directly (recall, memory_context) apply the same rule themselves.
DO $do$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) 'agent_memory_admin') THEN
        CREATE ROLE agent_memory_admin NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
    END IF;
END
$do$;
DO $do$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['memories', 'turns', 'tasks'] LOOP
        EXECUTE format('ALTER TABLE agent_memory.%I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE agent_memory.%I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY tenant ON agent_memory.%I
                            USING (user_id OPERATOR(pg_catalog.=) pg_catalog.current_setting(''agent_memory.user_id'', true))
                            WITH CHECK (user_id OPERATOR(pg_catalog.=) pg_catalog.current_setting(''agent_memory.user_id'', true))', t);
        EXECUTE format('CREATE POLICY maintenance ON agent_memory.%I TO agent_memory_admin, agent_memory_worker
                            USING (true) WITH CHECK (true)', t);
    END LOOP;
END
$do$;

/* Whether the current role sees every user's rows (a superuser, a role that bypasses row-level
   security, an admin or a worker), else only the session's user. */
CREATE FUNCTION agent_memory.sees_every_user() RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT NOT pg_catalog.row_security_active('agent_memory.memories'::pg_catalog.regclass)
        OR pg_catalog.pg_has_role('agent_memory_admin', 'MEMBER')
        OR pg_catalog.pg_has_role('agent_memory_worker', 'MEMBER')
$$;
GRANT EXECUTE ON FUNCTION agent_memory.sees_every_user() TO PUBLIC;

-- The workers' passes: the functions the write trigger calls.
GRANT EXECUTE ON FUNCTION agent_memory.memory_importance(text, text), agent_memory.memory_retention(text, real, boolean)
    TO agent_memory_worker;

CREATE FUNCTION agent_memory.grant_access(role regrole, level text) RETURNS text
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

CREATE FUNCTION agent_memory.revoke_access(role regrole) RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    f regprocedure;
BEGIN
    IF role IS NULL THEN
        RAISE EXCEPTION 'role must not be NULL' USING ERRCODE = 'null_value_not_allowed', HINT = 'Pass the role to revoke.';
    END IF;
    EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA agent_memory FROM %s', role);
    EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA agent_memory FROM %s', role);
    FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p WHERE p.pronamespace = 'agent_memory'::regnamespace LOOP
        EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM %s', f, role);
    END LOOP;
    EXECUTE format('REVOKE USAGE ON SCHEMA agent_memory FROM %s', role);
    IF pg_catalog.pg_has_role(role, 'agent_memory_admin', 'MEMBER') AND role::oid <> 'agent_memory_admin'::regrole::oid THEN
        EXECUTE format('REVOKE agent_memory_admin FROM %s', role);
    END IF;
    RETURN format('%s may no longer use agent_memory', role);
END
$body$;
COMMENT ON FUNCTION agent_memory.revoke_access(regrole) IS 'Takes back every privilege grant_access gave a role.';

REVOKE ALL ON FUNCTION agent_memory.grant_access(regrole, text), agent_memory.revoke_access(regrole) FROM PUBLIC;
