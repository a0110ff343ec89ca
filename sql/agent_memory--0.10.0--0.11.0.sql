-- agent_memory 0.10.0 -> 0.11.0: spreading the users over a Citus cluster (scale-out, step 2).
-- On one server every call answers as before; what changes:
--   * agent_memory.distribute(), for the coordinator of a Citus cluster (admins; sql/distribute.sql),
--     and agent_memory.cluster_runs(), every node's last runs;
--   * grant_access, revoke_access, bind_role and unbind_role are made on every worker too on such
--     a coordinator (on_workers; unbind_role is PL/pgSQL now);
--   * memory_erase keeps the predicates only the user declared when they are a table every node
--     has a copy of (a Citus cluster), where the node that holds the user may not write them;
--   * register_model says, on a Citus worker that cannot write the registry from inside a call,
--     to register the model through the coordinator (55000); memory_evidence is PL/pgSQL;
--   * uncache_user is PL/pgSQL, one table at a time (Citus plans a SQL function's queries without
--     its parameters, and no node's own table beside a distributed one);
--   * the triggers before an update and that mark packs stale compare embeddings with <> instead
--     of IS DISTINCT FROM (the same rows fire them; Citus can make them on each shard).
-- The library itself finds a user's shards on a Citus node and runs the user's statements on
-- them, refuses a call that runs on a node that does not hold its user (0F000), and refuses
-- before Citus plans it a delegated call with a NULL user or a user taken from a column
-- (docs/scale-out.md).
-- Run by ALTER EXTENSION agent_memory UPDATE; every row is kept. tests/upgrade.sh checks that a
-- database updated from 0.1.0 (through each version) has the same catalog as a fresh install.
\echo Use "ALTER EXTENSION agent_memory UPDATE" to load this file. \quit

CREATE FUNCTION agent_memory.distribute()
RETURNS TABLE (object text, placement text, done text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    r record;
    t text;
    f regprocedure;
    n bigint;
    b boolean;
    mine text;
    key_hex text;
    bindings text;
    copied text[] := '{}';
    hint_setup constant text := 'On every node: shared_preload_libraries = ''citus,agent_memory'', CREATE EXTENSION citus and CREATE EXTENSION agent_memory CASCADE; then, on the coordinator, citus_set_coordinator_host and citus_add_node for each worker, and run this there.';
    per_user constant text[] := ARRAY['turns', 'memories', 'tasks', 'predicate_declarations',
                                      'memory_packs', 'memory_pack_users', 'memory_pack_stale'];
    shared constant text[] := ARRAY['embedding_models', 'predicates'];
    own constant text[] := ARRAY['runs', 'maintenance_state', 'erasures', 'embedding_cache', 'lock_salt', 'role_users'];
    calls constant text[] := ARRAY['memory_recall', 'memory_context', 'memory_context_text', 'memory_reconcile',
                                   'memory_reconcile_batch', 'memory_record_turn', 'memory_pack', 'memory_erase'];
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension e WHERE e.extname = 'citus') THEN
        RAISE EXCEPTION 'agent_memory.distribute() needs Citus, which is not installed in this database'
            USING ERRCODE = 'feature_not_supported', HINT = hint_setup;
    END IF;
    -- Citus's catalogs are read with dynamic SQL: without Citus they do not exist.
    EXECUTE 'SELECT groupid FROM pg_catalog.pg_dist_local_group' INTO n;
    IF n IS DISTINCT FROM 0 THEN
        RAISE EXCEPTION 'agent_memory.distribute() runs on the coordinator of the Citus cluster, and this node is a worker (group %)', n
            USING ERRCODE = 'object_not_in_prerequisite_state', HINT = 'Connect to the coordinator and run it there.';
    END IF;
    EXECUTE $q$SELECT count(*) FROM pg_catalog.pg_dist_node d
                WHERE d.noderole = 'primary' AND d.isactive AND d.shouldhaveshards AND d.groupid <> 0$q$ INTO n;
    IF n = 0 THEN
        RAISE EXCEPTION 'the Citus cluster has no worker to hold the users'
            USING ERRCODE = 'object_not_in_prerequisite_state', HINT = hint_setup;
    END IF;
    FOR r IN EXECUTE $q$SELECT d.nodename, d.nodeport FROM pg_catalog.pg_dist_node d
                         WHERE d.noderole = 'primary' AND d.groupid <> 0 AND NOT (d.isactive AND d.hasmetadata AND d.metadatasynced)$q$
    LOOP
        RAISE EXCEPTION 'worker %:% has no Citus metadata (or is not active): the calls of a user could not be delegated to it', r.nodename, r.nodeport
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Activate the node and sync its metadata (SELECT citus_activate_node(''host'', port)), then run this again.';
    END LOOP;
    -- Every node runs the delegated calls with its own copy of the library and schema.
    SELECT e.extversion INTO mine FROM pg_catalog.pg_extension e WHERE e.extname = 'agent_memory';
    FOR r IN EXECUTE $q$SELECT nodename, nodeport, success, result FROM pg_catalog.run_command_on_workers(
                 $c$SELECT coalesce((SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'agent_memory'), 'none')$c$)$q$
    LOOP
        IF NOT r.success OR r.result IS DISTINCT FROM mine THEN
            RAISE EXCEPTION 'worker %:% has agent_memory %, the coordinator %', r.nodename, r.nodeport,
                    CASE WHEN r.success THEN r.result ELSE 'unknown (' || r.result || ')' END, mine
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'Install the same library on every node and CREATE EXTENSION agent_memory CASCADE (or ALTER EXTENSION agent_memory UPDATE) in this database on each worker, then run this again.';
        END IF;
    END LOOP;
    -- Rows written on the coordinator before would stay in its own tables, where no delegated
    -- call reads them.
    FOREACH t IN ARRAY per_user LOOP
        EXECUTE pg_catalog.format('SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = %L::regclass)',
                                  'agent_memory.' || t) INTO b;
        CONTINUE WHEN b;
        EXECUTE pg_catalog.format('SELECT count(*) FROM (SELECT FROM ONLY agent_memory.%I LIMIT 1) x', t) INTO n;
        IF n > 0 THEN
            RAISE EXCEPTION 'agent_memory.% already holds rows on the coordinator', t
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = 'distribute() spreads an empty database: a user''s rows written before would stay on the coordinator.',
                      HINT = 'Run it before the first write; to distribute a database that holds memories, dump the rows (pg_dump --data-only -n agent_memory), recreate the extension, distribute, and load them through the coordinator.';
        END IF;
    END LOOP;

    -- Each worker: its own range of ids (so ids stay unique across the cluster), the
    -- coordinator's receipt key (erasure receipts and the embedding cache hash with it: the same
    -- user and text hash alike on every node), and the role bindings. Idempotent: done again
    -- on a second call, and harmless should the rest fail.
    SELECT pg_catalog.encode(s.receipt_key, 'hex') INTO key_hex FROM agent_memory.lock_salt s;
    SELECT coalesce(pg_catalog.string_agg(pg_catalog.format('(%L, %L)', rb.role_name, rb.user_pattern), ', '), '')
      INTO bindings FROM agent_memory.role_users rb;
    FOR r IN EXECUTE $q$SELECT w.nodename, w.nodeport, w.success, w.result
                           FROM pg_catalog.unnest($1) WITH ORDINALITY c(command, i),
                                LATERAL pg_catalog.run_command_on_workers(c.command) w
                          ORDER BY c.i$q$
        USING ARRAY[$c$SELECT pg_catalog.worker_adjust_identity_column_seq_ranges('agent_memory.memories')$c$,
                    $c$SELECT pg_catalog.worker_adjust_identity_column_seq_ranges('agent_memory.turns')$c$,
                    pg_catalog.format($c$DO $w$ BEGIN
                                          DELETE FROM agent_memory.embedding_cache c
                                           WHERE (SELECT s.receipt_key FROM agent_memory.lock_salt s) <> pg_catalog.decode(%L, 'hex');
                                          UPDATE agent_memory.lock_salt SET receipt_key = pg_catalog.decode(%L, 'hex');
                                          DELETE FROM agent_memory.role_users;
                                          %s
                                          -- Citus makes the keys between the registries again on
                                          -- every node as it distributes them.
                                          IF NOT EXISTS (SELECT FROM pg_catalog.pg_dist_partition p
                                                          WHERE p.logicalrelid = 'agent_memory.predicates'::pg_catalog.regclass) THEN
                                              ALTER TABLE agent_memory.predicates DROP CONSTRAINT IF EXISTS predicates_alias_of_fkey;
                                              ALTER TABLE agent_memory.predicate_declarations
                                                  DROP CONSTRAINT IF EXISTS predicate_declarations_predicate_fkey;
                                          END IF;
                                      END $w$$c$,
                                      key_hex, key_hex,
                                      CASE WHEN bindings = '' THEN ''
                                           ELSE 'INSERT INTO agent_memory.role_users (role_name, user_pattern) VALUES ' || bindings || ';' END)]
    LOOP
        IF NOT r.success THEN
            RAISE EXCEPTION 'preparing worker %:% failed: %', r.nodename, r.nodeport, r.result
                USING ERRCODE = 'object_not_in_prerequisite_state', HINT = 'Fix the worker and run this again: nothing was distributed.';
        END IF;
    END LOOP;

    -- The write triggers stay on the shards (Citus recreates them there), and the statements
    -- that move the rows run one shard at a time.
    PERFORM pg_catalog.set_config('citus.enable_unsafe_triggers', 'on', true);
    PERFORM pg_catalog.set_config('citus.multi_shard_modify_mode', 'sequential', true);
    -- The key from the declarations to the predicates is made again once both are distributed
    -- (Citus would otherwise turn the declarations into a table of the coordinator's).
    EXECUTE $q$SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition p
                               WHERE p.logicalrelid = 'agent_memory.predicate_declarations'::regclass)$q$ INTO b;
    IF NOT b THEN
        ALTER TABLE agent_memory.predicate_declarations DROP CONSTRAINT IF EXISTS predicate_declarations_predicate_fkey;
    END IF;
    FOREACH t IN ARRAY shared LOOP
        object := 'agent_memory.' || t;
        placement := 'reference table: a copy on every node';
        EXECUTE pg_catalog.format('SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = %L::regclass)', object) INTO b;
        IF b THEN
            done := 'already';
        ELSE
            EXECUTE pg_catalog.format('SELECT pg_catalog.create_reference_table(%L)', object);
            copied := copied || t;
            done := 'now';
        END IF;
        RETURN NEXT;
    END LOOP;
    FOREACH t IN ARRAY per_user LOOP
        object := 'agent_memory.' || t;
        placement := 'distributed by user_id, colocated with agent_memory.turns';
        EXECUTE pg_catalog.format('SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = %L::regclass)', object) INTO b;
        IF b THEN
            done := 'already';
        ELSIF t = 'turns' THEN
            EXECUTE pg_catalog.format('SELECT pg_catalog.create_distributed_table(%L, %L)', object, 'user_id');
            done := 'now';
        ELSE
            EXECUTE pg_catalog.format('SELECT pg_catalog.create_distributed_table(%L, %L, colocate_with => %L)',
                                      object, 'user_id', 'agent_memory.turns');
            done := 'now';
        END IF;
        RETURN NEXT;
    END LOOP;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_constraint c WHERE c.conname = 'predicate_declarations_predicate_fkey'
                      AND c.conrelid = 'agent_memory.predicate_declarations'::regclass) THEN
        ALTER TABLE agent_memory.predicate_declarations ADD CONSTRAINT predicate_declarations_predicate_fkey
            FOREIGN KEY (predicate) REFERENCES agent_memory.predicates (predicate) ON UPDATE CASCADE ON DELETE CASCADE;
    END IF;
    -- The registries' rows are in their copies on every node now: the coordinator's own tables
    -- are emptied (Citus reads the copies), once, by the call that made the copies (with no
    -- trigger: the truncation cascades to the declarations' empty table on the coordinator).
    IF pg_catalog.cardinality(copied) > 0 THEN
        PERFORM pg_catalog.set_config('session_replication_role', 'replica', true);
        FOREACH t IN ARRAY copied LOOP
            EXECUTE pg_catalog.format('SELECT pg_catalog.truncate_local_data_after_distributing_table(%L)', 'agent_memory.' || t);
        END LOOP;
        PERFORM pg_catalog.set_config('session_replication_role', 'origin', true);
    END IF;
    -- Each call of one user runs on the node that holds the user, also inside a transaction
    -- block (force delegation): the user's locks are that node's.
    FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
              WHERE p.pronamespace = 'agent_memory'::regnamespace AND p.proname = ANY (calls)
                AND p.proargnames[1] = 'user_id'
              ORDER BY 1::text
    LOOP
        object := f::text;
        placement := 'delegated by user_id to the node that holds the user';
        EXECUTE pg_catalog.format($q$SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_object o
                                     WHERE o.classid = 'pg_catalog.pg_proc'::regclass AND o.objid = %s
                                       AND o.distribution_argument_index = 0 AND o.force_delegation)$q$, f::oid) INTO b;
        IF b THEN
            done := 'already';
        ELSE
            EXECUTE pg_catalog.format('SELECT pg_catalog.create_distributed_function(%L, %L, colocate_with => %L, force_delegation => true)',
                                      f, '$1', 'agent_memory.turns');
            done := 'now';
        END IF;
        RETURN NEXT;
    END LOOP;
    -- The roles given access before: the same access on every worker (a grant made later is
    -- made there by grant_access itself).
    FOR r IN SELECT DISTINCT a.rolname,
                    CASE WHEN pg_catalog.pg_has_role(a.oid, 'agent_memory_admin', 'MEMBER') THEN 'admin'
                         WHEN pg_catalog.has_table_privilege(a.oid, 'agent_memory.memories', 'INSERT') THEN 'writer'
                         ELSE 'reader' END AS level
               FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) x, pg_catalog.pg_roles a
              WHERE n.nspname = 'agent_memory' AND a.oid = x.grantee AND x.privilege_type = 'USAGE'
                AND a.oid <> n.nspowner AND a.rolname NOT IN ('agent_memory_admin', 'agent_memory_worker')
              ORDER BY 1
    LOOP
        PERFORM agent_memory.on_workers(pg_catalog.format('agent_memory.grant_access(%L, %L)', r.rolname, r.level));
    END LOOP;
    FOREACH t IN ARRAY own LOOP
        object := 'agent_memory.' || t;
        placement := 'each node''s own';
        done := 'kept';
        RETURN NEXT;
    END LOOP;
END
$body$;
REVOKE ALL ON FUNCTION agent_memory.distribute() FROM PUBLIC;
-- (access.sql grants it to agent_memory_admin.)
COMMENT ON FUNCTION agent_memory.distribute() IS
    'On the coordinator of a Citus cluster: distributes every per-user table by user_id (one colocation group), makes the shared registries reference tables, gives each worker its own id range, the receipt key and the role bindings, and delegates each per-user call to the node that holds its user. All or nothing; a second call changes nothing (done = already). Returns what went where.';

-- Every node's last runs of the maintenance passes (each node runs its own over the shards it
-- holds, and records them in its own agent_memory.runs): on the coordinator of a Citus cluster,
-- the last_runs of every node, read there as the calling role; on one server, its own.
CREATE FUNCTION agent_memory.cluster_runs()
RETURNS TABLE (node text, job text, id bigint, started_at timestamptz, finished_at timestamptz, status text,
               by_worker boolean, steps jsonb, error text)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    r record;
    runs constant text := $c$SELECT COALESCE(pg_catalog.json_agg(l), '[]')
                                FROM (SELECT l.job, l.id, l.started_at, l.finished_at, l.status, l.by_worker, l.steps, l.error
                                        FROM agent_memory.last_runs l) l$c$;
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_node') IS NULL THEN
        RETURN QUERY SELECT 'local'::text, l.job, l.id, l.started_at, l.finished_at, l.status, l.by_worker, l.steps, l.error
                       FROM agent_memory.last_runs l
                      ORDER BY l.job, l.started_at DESC, l.id DESC;
        RETURN;
    END IF;
    FOR r IN EXECUTE $q$SELECT n.nodename OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) n.nodeport AS node, a.success, a.result
                          FROM pg_catalog.run_command_on_all_nodes($1) a
                          JOIN pg_catalog.pg_dist_node n ON n.nodeid OPERATOR(pg_catalog.=) a.nodeid
                         ORDER BY n.groupid$q$ USING runs
    LOOP
        IF NOT r.success THEN
            RAISE EXCEPTION 'reading the runs of node % failed: %', r.node, r.result
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'Check that the node is up and that this role may connect to it and read agent_memory.last_runs there.';
        END IF;
        RETURN QUERY SELECT r.node::text, x.job, x.id, x.started_at, x.finished_at, x.status, x.by_worker, x.steps, x.error
                       FROM pg_catalog.json_to_recordset(r.result::json)
                            AS x(job text, id bigint, started_at timestamptz, finished_at timestamptz, status text,
                                 by_worker boolean, steps jsonb, error text)
                      ORDER BY x.job, x.started_at DESC, x.id DESC;
    END LOOP;
END
$body$;
REVOKE ALL ON FUNCTION agent_memory.cluster_runs() FROM PUBLIC;
COMMENT ON FUNCTION agent_memory.cluster_runs() IS
    'The last 10 runs of each maintenance job on every node of a Citus cluster (node = host:port), read on each node; on one server, its own (node = local). Admins.';

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

CREATE OR REPLACE FUNCTION agent_memory.bind_role(role regrole, user_pattern text) RETURNS text
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

CREATE OR REPLACE FUNCTION agent_memory.unbind_role(role regrole, user_pattern text DEFAULT NULL) RETURNS bigint
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
                       'memory_embed', 'memory_embed_stats', 'memory_hit_stats'];
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
                                        'memory_fold_hits',
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

CREATE OR REPLACE FUNCTION agent_memory.revoke_access(role regrole) RETURNS text
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

GRANT EXECUTE ON FUNCTION agent_memory.distribute(), agent_memory.on_workers(text), agent_memory.cluster_runs() TO agent_memory_admin;

CREATE OR REPLACE FUNCTION agent_memory.memory_erase(user_id text)
RETURNS TABLE (receipt_id bigint, user_hash text, erased_at timestamptz, memories bigint, turns bigint, tasks bigint)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    n_memories bigint;
    n_turns    bigint;
    n_tasks    bigint;
    declared   text[];
    shared     boolean := false;
BEGIN
    IF user_id IS NULL OR btrim(user_id) = '' THEN
        RAISE EXCEPTION 'user_id must not be NULL or empty'
            USING ERRCODE = 'null_value_not_allowed', HINT = 'Pass the id of the user whose memories to erase.';
    END IF;
    -- Writes of the user and rebuilds of the user's packs wait, and nothing of theirs is left
    -- behind by one that raced the erasure.
    PERFORM agent_memory.erasure_lock(memory_erase.user_id);
    PERFORM agent_memory.uncache_user(memory_erase.user_id);
    DELETE FROM agent_memory.memories m WHERE m.user_id = memory_erase.user_id;
    GET DIAGNOSTICS n_memories = ROW_COUNT;
    DELETE FROM agent_memory.turns t WHERE t.user_id = memory_erase.user_id;
    GET DIAGNOSTICS n_turns = ROW_COUNT;
    DELETE FROM agent_memory.tasks t WHERE t.user_id = memory_erase.user_id;
    GET DIAGNOSTICS n_tasks = ROW_COUNT;
    DELETE FROM agent_memory.memory_packs p WHERE p.user_id = memory_erase.user_id;
    DELETE FROM agent_memory.memory_pack_users p WHERE p.user_id = memory_erase.user_id;
    DELETE FROM agent_memory.memory_pack_stale s WHERE s.user_id = memory_erase.user_id;
    -- The predicates the user declared go with the user when no one else declared them, no
    -- remaining memory uses them and none is their alias. On a Citus cluster (distribute()) the
    -- predicates are a table every node has a copy of, which the node that holds the user may
    -- not write from inside the call: they stay there (names, never a memory's content).
    WITH d AS (DELETE FROM agent_memory.predicate_declarations x WHERE x.user_id = memory_erase.user_id RETURNING x.predicate)
    SELECT pg_catalog.array_agg(d.predicate) INTO declared FROM d;
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE $q$SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition p
                                   WHERE p.logicalrelid = 'agent_memory.predicates'::pg_catalog.regclass)$q$ INTO shared;
    END IF;
    IF declared IS NOT NULL AND NOT shared THEN
        DELETE FROM agent_memory.predicates p
         WHERE p.predicate = ANY (declared) AND NOT p.seeded
           AND NOT EXISTS (SELECT 1 FROM agent_memory.predicate_declarations x WHERE x.predicate = p.predicate)
           AND NOT EXISTS (SELECT 1 FROM agent_memory.predicates a WHERE a.alias_of = p.predicate)
           AND NOT EXISTS (SELECT 1 FROM agent_memory.memories m WHERE m.predicate = p.predicate);
    END IF;
    RETURN QUERY
    INSERT INTO agent_memory.erasures (user_hash, counts)
    VALUES (agent_memory.erasure_hash(memory_erase.user_id),
            pg_catalog.jsonb_build_object('memories', n_memories, 'turns', n_turns, 'tasks', n_tasks))
    RETURNING erasures.id, erasures.user_hash, erasures.erased_at, n_memories, n_turns, n_tasks;
END
$body$;

CREATE OR REPLACE FUNCTION agent_memory.register_model(name text, dimensions integer) RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    registered integer;
BEGIN
    SELECT m.dimensions INTO registered FROM agent_memory.embedding_models m WHERE m.name = register_model.name;
    IF registered IS NULL THEN
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

CREATE OR REPLACE FUNCTION agent_memory.memory_evidence(memory_id bigint)
RETURNS TABLE (id bigint, kind text, subject text, content text, created_at timestamptz, retired_at timestamptz)
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog
AS $body$
BEGIN
    -- (0.10.0) The summary's user is found by its id first; the evidence is then read by user.
    -- (0.11.0) PL/pgSQL: on a Citus cluster the query is planned with its parameter's value.
    RETURN QUERY
    SELECT m.id, m.kind, m.subject, m.content, m.created_at, m.retired_at
      FROM agent_memory.memories s
      JOIN agent_memory.memories m ON m.user_id = s.user_id AND m.superseded_by = s.id
     WHERE s.id = memory_evidence.memory_id AND (m.active OR m.retired_reason = 'summarized')
     ORDER BY m.created_at, m.id;
END
$body$;

CREATE OR REPLACE FUNCTION agent_memory.uncache_user(user_id text) RETURNS bigint
LANGUAGE plpgsql VOLATILE STRICT SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    key bytea;
    hashes bytea[];
    n bigint;
BEGIN
    -- (PL/pgSQL, one table at a time: on a Citus cluster the user's rows are read through Citus,
    -- which plans neither a SQL function's parameter nor a node's own table beside them.)
    SELECT s.receipt_key INTO key FROM agent_memory.lock_salt s;
    SELECT pg_catalog.array_agg(pg_catalog.sha256(key || pg_catalog.convert_to(texts.t, 'UTF8'))) INTO hashes
      FROM (SELECT m.content AS t FROM agent_memory.memories m WHERE m.user_id = uncache_user.user_id
            UNION
            SELECT t.content FROM agent_memory.turns t WHERE t.user_id = uncache_user.user_id) texts;
    DELETE FROM agent_memory.embedding_cache c WHERE c.text_hash = ANY (hashes);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$body$;

DROP TRIGGER memories_before_update ON agent_memory.memories;
CREATE TRIGGER memories_before_update BEFORE UPDATE ON agent_memory.memories
    FOR EACH ROW
    WHEN (NEW.emb <> OLD.emb OR (NEW.emb IS NULL) <> (OLD.emb IS NULL)
          OR NEW.embedding_model IS DISTINCT FROM OLD.embedding_model
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
    EXECUTE FUNCTION agent_memory.memories_before_write();

DROP TRIGGER memories_pack_stale_update ON agent_memory.memories;
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
           OR NEW.valid_until IS DISTINCT FROM OLD.valid_until)
          AND NOT agent_memory.pack_deletes_marked())
    EXECUTE FUNCTION agent_memory.memories_mark_stale();
