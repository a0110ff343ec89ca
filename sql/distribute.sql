-- Scale-out on Citus (0.11.0): agent_memory.distribute(), run once on the coordinator of a
-- Citus cluster, spreads the users over the workers (docs/scale-out.md). Written out again in
-- agent_memory--0.10.0--0.11.0.sql (the upgrade tier checks that both give the same catalog).
--
-- What goes where:
--   * every per-user table is distributed by user_id, in one colocation group (a user's
--     memories, turns, tasks, declarations and packs are on one node);
--   * the registries every user shares (embedding_models, predicates) become reference tables:
--     a copy on every node, read there, written through the coordinator;
--   * the bookkeeping stays each node's own (runs, maintenance_state, erasures, embedding_cache,
--     lock_salt, role_users): each node runs its own passes, caches the texts it embedded, and
--     reads the role bindings inside the policies of its shards, where a query of a Citus table
--     is not allowed. The role bindings, the roles' access and the receipt key are copied to
--     every worker;
--   * every per-user function (recall, context, reconcile, batches, turns, packs, erasure) is
--     delegated by its user to the node that holds the user, also inside a transaction block.
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
