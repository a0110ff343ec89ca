-- agent_memory: the access model. Nothing is granted to PUBLIC; roles get one of three levels
-- with agent_memory.grant_access(role, level):
--   reader  recall, memory_context, evidence and the scoring functions; reads the tables, and
--           refreshes last_hit_at and hit_count (a recall's touch);
--   writer  reader + reconcile, update, record turns, declare tasks and predicates;
--   admin   writer + forgetting, consolidation, erasure, indexes, and the bookkeeping tables.
-- Run last (after every function exists).

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA agent_memory FROM PUBLIC;

-- The write trigger asks whether a memory written without an embedding waits for the worker
-- (agent_memory.embed_async); every role that writes memories evaluates it.
GRANT EXECUTE ON FUNCTION agent_memory.embed_later(text) TO PUBLIC;
-- (0.12.0) ... and embeds it for its user, as a role that may write for that user only.
GRANT EXECUTE ON FUNCTION agent_memory.embed_row(text, text, text) TO PUBLIC;
-- (0.14.0) ... and its further windows (agent_memory.embed_windows), the same way.
GRANT EXECUTE ON FUNCTION agent_memory.embed_windows(text, text, text) TO PUBLIC;

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
-- forgetting's expiry and eviction mark their own batch in the same statement. (The embeddings
-- are compared with <>, whose schema the condition's text names, not IS DISTINCT FROM, whose
-- does not: Citus makes the trigger on each shard from that text, with no search path.)
CREATE TRIGGER memories_pack_stale_update AFTER UPDATE ON agent_memory.memories
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
    EXECUTE FUNCTION agent_memory.memories_mark_stale();

-- Isolation by the database: a role sees, changes and adds only the rows of the user its session
-- names in agent_memory.user_id (none when it names no user). Admins (members of
-- agent_memory_admin) and the workers see every user; superusers always do. The functions that
-- read rows directly (recall, memory_context) apply the same rule themselves.
--
-- (0.6.0) A role may also be bound to the users it works for (agent_memory.bind_role): a role that
-- is a member of a bound role may name only users that match one of the patterns bound to it, and
-- naming another sees and changes nothing. Roles bound to nothing keep the model above: they may
-- name any user.
DO $do$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) 'agent_memory_admin') THEN
        CREATE ROLE agent_memory_admin NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
    END IF;
END
$do$;

CREATE TABLE agent_memory.role_users (
    role_name    name        NOT NULL,
    user_pattern text        NOT NULL CHECK (user_pattern <> ''),
    created_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT role_users_pkey PRIMARY KEY (role_name, user_pattern)
);
COMMENT ON TABLE agent_memory.role_users IS
    'Roles bound to the users they work for: a member of a bound role may name (agent_memory.user_id) only users matching one of its patterns (LIKE). Roles bound to nothing may name any user. Each role sees its own bindings.';
ALTER TABLE agent_memory.role_users ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_bindings ON agent_memory.role_users
    USING (EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
                    WHERE r.rolname OPERATOR(pg_catalog.=) role_users.role_name
                      AND pg_catalog.pg_has_role(r.oid, 'MEMBER')));
CREATE POLICY maintenance ON agent_memory.role_users TO agent_memory_admin USING (true) WITH CHECK (true);
SELECT pg_catalog.pg_extension_config_dump('agent_memory.role_users', '');

/* The user the session works for (agent_memory.user_id), when the current role may name it: it is
   bound to no user, or the user matches a pattern of a role it is a member of. NULL otherwise, so
   the row-level policies let nothing through. In Rust (src/api/access.rs): the policies call it
   without a subquery, so it keeps its answer while the role, the setting and the snapshot stay
   the same, and a row costs a comparison. */
GRANT EXECUTE ON FUNCTION agent_memory.session_user_id() TO PUBLIC;
-- The policies' condition reads the bindings as the role that queries, the workers included.
GRANT SELECT ON agent_memory.role_users TO agent_memory_worker;
COMMENT ON FUNCTION agent_memory.session_user_id() IS
    'The user the session works for (agent_memory.user_id) if the current role may name it (agent_memory.role_users), else NULL.';

DO $do$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['memories', 'turns', 'tasks', 'predicate_declarations'] LOOP
        EXECUTE format('ALTER TABLE agent_memory.%I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE agent_memory.%I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY tenant ON agent_memory.%I
                            USING (user_id OPERATOR(pg_catalog.=) agent_memory.session_user_id())
                            WITH CHECK (user_id OPERATOR(pg_catalog.=) agent_memory.session_user_id())', t);
        EXECUTE format('CREATE POLICY maintenance ON agent_memory.%I TO agent_memory_admin, agent_memory_worker
                            USING (true) WITH CHECK (true)', t);
    END LOOP;
END
$do$;

/* On the coordinator of a Citus cluster (after agent_memory.distribute()), makes a call of the
   access model (grant_access, revoke_access, bind_role, unbind_role) on every worker too, where
   the role bindings, the bookkeeping tables and the functions the calls use inside are the
   node's own; elsewhere does nothing. Each worker makes it as this runs, not at the caller's
   commit, as the caller, and only there (Citus's propagation of DDL off: the coordinator's
   grants reach the distributed tables' shards by Citus). */
CREATE FUNCTION agent_memory.on_workers(call text) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    cluster boolean := false;
    r record;
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN;
    END IF;
    EXECUTE $q$SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition p
                               WHERE p.logicalrelid = 'agent_memory.memories'::pg_catalog.regclass)
                   AND (SELECT g.groupid FROM pg_catalog.pg_dist_local_group g) = 0$q$ INTO cluster;
    IF NOT cluster THEN
        RETURN;
    END IF;
    FOR r IN EXECUTE 'SELECT nodename, nodeport, success, result FROM pg_catalog.run_command_on_workers($1)'
        USING pg_catalog.format($c$DO $w$ BEGIN
                                     PERFORM pg_catalog.set_config('citus.enable_ddl_propagation', 'off', true);
                                     PERFORM pg_catalog.set_config('lock_timeout', '10s', true);
                                     PERFORM %s;
                                 END $w$$c$, call)
    LOOP
        IF NOT r.success THEN
            RAISE EXCEPTION 'making % on worker %:% failed: %', call, r.nodename, r.nodeport, r.result
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'A role created (or changed) in the same transaction is not on the workers until it commits: commit it first. Each of these calls may be made again.';
        END IF;
    END LOOP;
END
$body$;
REVOKE ALL ON FUNCTION agent_memory.on_workers(text) FROM PUBLIC;

/* Binds a role to the users matching a pattern (LIKE: 'acme:%' for every id that starts with
   acme:). Once bound, the role and its members may name only users matching one of its patterns. */
CREATE FUNCTION agent_memory.bind_role(role regrole, user_pattern text) RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $body$
BEGIN
    IF role IS NULL OR user_pattern IS NULL OR user_pattern = '' THEN
        RAISE EXCEPTION 'role and user_pattern must not be NULL or empty' USING ERRCODE = 'null_value_not_allowed',
            HINT = 'Pass a role and a LIKE pattern of the user ids it works for, such as ''acme:%''.';
    END IF;
    INSERT INTO agent_memory.role_users (role_name, user_pattern)
    VALUES ((SELECT r.rolname FROM pg_catalog.pg_roles r WHERE r.oid = role), user_pattern)
    ON CONFLICT ON CONSTRAINT role_users_pkey DO NOTHING;
    -- On the coordinator of a Citus cluster (agent_memory.distribute()), every worker keeps the
    -- same bindings: the policies of its shards read its own.
    PERFORM agent_memory.on_workers(pg_catalog.format('agent_memory.bind_role(%L, %L)', role, user_pattern));
    RETURN format('%s may now name only users like %L (and those of its other patterns)', role, user_pattern);
END
$body$;
COMMENT ON FUNCTION agent_memory.bind_role(regrole, text) IS
    'Binds a role to the users matching a LIKE pattern: it and its members may then name only users matching one of its patterns.';

CREATE FUNCTION agent_memory.unbind_role(role regrole, user_pattern text DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    n bigint;
BEGIN
    WITH d AS (DELETE FROM agent_memory.role_users b
                WHERE b.role_name = (SELECT r.rolname FROM pg_catalog.pg_roles r WHERE r.oid = unbind_role.role)
                  AND (unbind_role.user_pattern IS NULL OR b.user_pattern = unbind_role.user_pattern)
               RETURNING 1)
    SELECT count(*) INTO n FROM d;
    PERFORM agent_memory.on_workers(pg_catalog.format('agent_memory.unbind_role(%L, %L)', role, user_pattern));
    RETURN n;
END
$body$;
COMMENT ON FUNCTION agent_memory.unbind_role(regrole, text) IS
    'Removes a role''s binding to a pattern (every binding of the role when no pattern is given); returns how many went. A role bound to nothing may name any user.';

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

-- Admins spread the users over a Citus cluster (sql/distribute.sql), and their changes of the
-- role bindings and grants reach its workers (as the admin: on_workers runs with their rights).
GRANT EXECUTE ON FUNCTION agent_memory.distribute(), agent_memory.on_workers(text), agent_memory.cluster_runs() TO agent_memory_admin;

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
    PERFORM agent_memory.on_workers(pg_catalog.format('agent_memory.revoke_access(%L)', role));
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        PERFORM pg_catalog.set_config('citus.multi_shard_modify_mode', 'sequential', true);
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

REVOKE ALL ON FUNCTION agent_memory.grant_access(regrole, text), agent_memory.revoke_access(regrole),
    agent_memory.bind_role(regrole, text), agent_memory.unbind_role(regrole, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION agent_memory.session_user_id() TO PUBLIC;
