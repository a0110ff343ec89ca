-- agent_memory 0.7.0 -> 0.8.0: recall writes nothing. In a database whose background worker runs,
-- memory_recall and memory_context record the memories they return in the server's shared memory
-- and the worker folds them into last_hit_at and hit_count (agent_memory.hit_fold_interval).
-- Run by ALTER EXTENSION agent_memory UPDATE; every memory is kept. tests/upgrade.sh checks that a
-- database updated from 0.1.0 (through each version) has the same catalog as a fresh install.
--   * memory_fold_hits() folds this database's waiting hits now (admins);
--   * memory_hit_stats() shows the buffer: deferred, pending, capacity, recorded, folded, dropped;
--   * grant_access gives them with the reader and admin levels.
\echo Use "ALTER EXTENSION agent_memory UPDATE" to load this file. \quit

CREATE FUNCTION "memory_fold_hits"() RETURNS bigint /* i64 */
STRICT VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'memory_fold_hits_wrapper';
CREATE FUNCTION "memory_hit_stats"() RETURNS TABLE (
	"deferred" bool,  /* bool */
	"pending" bigint,  /* Option < i64 > */
	"capacity" bigint,  /* Option < i64 > */
	"recorded" bigint,  /* Option < i64 > */
	"folded" bigint,  /* Option < i64 > */
	"dropped" bigint  /* Option < i64 > */
)
STRICT VOLATILE PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'memory_hit_stats_wrapper';
REVOKE ALL ON FUNCTION agent_memory.memory_fold_hits(), agent_memory.memory_hit_stats() FROM PUBLIC;

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
COMMENT ON FUNCTION agent_memory.grant_access(regrole, text) IS
    'Grants a role one of the access levels: reader (recall, context, evidence), writer (reader + reconcile, update, turns), admin (writer + forget, consolidate, erase, indexes, packs, bookkeeping).';

-- The roles granted access before get the new functions of their level.
DO $do$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT DISTINCT a.grantee::regrole AS role,
               CASE WHEN pg_catalog.pg_has_role(a.grantee, 'agent_memory_admin', 'MEMBER') THEN 'admin'
                    WHEN pg_catalog.has_table_privilege(a.grantee, 'agent_memory.memories', 'INSERT') THEN 'writer'
                    ELSE 'reader' END AS level
          FROM pg_catalog.pg_class c, LATERAL pg_catalog.aclexplode(c.relacl) a
         WHERE c.oid = 'agent_memory.memories'::regclass AND a.privilege_type = 'SELECT'
           AND a.grantee <> 0 AND a.grantee <> c.relowner
           AND a.grantee NOT IN (SELECT o.oid FROM pg_catalog.pg_roles o WHERE o.rolname IN ('agent_memory_worker', 'agent_memory_admin'))
    LOOP
        PERFORM agent_memory.grant_access(r.role, r.level);
    END LOOP;
END
$do$;
