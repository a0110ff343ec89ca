-- agent_memory 0.9.0 -> 0.10.0: a schema that can be sharded by user (scale-out, step 1). On one
-- server every call answers as before; what changes:
--   * the tenant policies call agent_memory.session_user_id() without a subquery (now a function
--     of the library that keeps its answer while the role, the setting and the snapshot stay the
--     same, so a row costs a comparison);
--   * the three keys that set a reference to NULL on delete take no action: forgetting's purges
--     set the references to the memories and turns they delete to NULL themselves, and a
--     deleted task's children lose their parent by a trigger (tasks_orphan_children);
--   * memory_pack_stale, which has no key, is identified by its whole rows (REPLICA IDENTITY FULL);
--   * memory_evidence finds the summary's user first, then reads that user's rows.
-- Run by ALTER EXTENSION agent_memory UPDATE; every row is kept. tests/upgrade.sh checks that a
-- database updated from 0.1.0 (through each version) has the same catalog as a fresh install.
\echo Use "ALTER EXTENSION agent_memory UPDATE" to load this file. \quit

-- The same name, arguments and grants: the policies and every caller keep calling it.
CREATE OR REPLACE FUNCTION agent_memory.session_user_id() RETURNS text
STABLE PARALLEL SAFE STRICT
LANGUAGE c
AS 'MODULE_PATHNAME', 'session_user_id_wrapper';

DO $do$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['memories', 'turns', 'tasks', 'predicate_declarations'] LOOP
        EXECUTE pg_catalog.format('ALTER POLICY tenant ON agent_memory.%I
                            USING (user_id OPERATOR(pg_catalog.=) agent_memory.session_user_id())
                            WITH CHECK (user_id OPERATOR(pg_catalog.=) agent_memory.session_user_id())', t);
    END LOOP;
END
$do$;

ALTER TABLE agent_memory.memories
    DROP CONSTRAINT memories_superseded_by_fkey,
    DROP CONSTRAINT memories_source_turn_id_fkey,
    ADD CONSTRAINT memories_superseded_by_fkey FOREIGN KEY (user_id, superseded_by)
        REFERENCES agent_memory.memories (user_id, id) DEFERRABLE INITIALLY DEFERRED,
    ADD CONSTRAINT memories_source_turn_id_fkey FOREIGN KEY (user_id, source_turn_id)
        REFERENCES agent_memory.turns (user_id, id);

ALTER TABLE agent_memory.tasks
    DROP CONSTRAINT tasks_user_id_parent_task_id_fkey,
    ADD CONSTRAINT tasks_user_id_parent_task_id_fkey FOREIGN KEY (user_id, parent_task_id)
        REFERENCES agent_memory.tasks (user_id, task_id) DEFERRABLE INITIALLY DEFERRED;

CREATE FUNCTION agent_memory.tasks_orphan_children() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
BEGIN
    UPDATE agent_memory.tasks t SET parent_task_id = NULL
     WHERE t.user_id = OLD.user_id AND t.parent_task_id = OLD.task_id;
    RETURN NULL;
END
$body$;
REVOKE ALL ON FUNCTION agent_memory.tasks_orphan_children() FROM PUBLIC;
CREATE TRIGGER tasks_orphan_children AFTER DELETE ON agent_memory.tasks
    FOR EACH ROW EXECUTE FUNCTION agent_memory.tasks_orphan_children();

ALTER TABLE agent_memory.memory_pack_stale REPLICA IDENTITY FULL;

CREATE OR REPLACE FUNCTION agent_memory.memory_evidence(memory_id bigint)
RETURNS TABLE (id bigint, kind text, subject text, content text, created_at timestamptz, retired_at timestamptz)
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog
AS $$
    -- (0.10.0) The summary's user is found by its id first; the evidence is then read by user.
    SELECT m.id, m.kind, m.subject, m.content, m.created_at, m.retired_at
      FROM agent_memory.memories s
      JOIN agent_memory.memories m ON m.user_id = s.user_id AND m.superseded_by = s.id
     WHERE s.id = memory_id AND (m.active OR m.retired_reason = 'summarized')
     ORDER BY m.created_at, m.id
$$;
