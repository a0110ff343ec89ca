-- agent_memory 0.1.0 -> 0.2.0. Run by ALTER EXTENSION agent_memory UPDATE; every row is kept.
-- tests/upgrade.sh checks that a database updated from 0.1.0 has the same catalog as a fresh
-- install of 0.2.0, and that its data survives.
\echo Use "ALTER EXTENSION agent_memory UPDATE" to load this file. \quit

-- pgvector 0.8 or later: the approximate path of large users needs its iterative index scan
-- (hnsw.iterative_scan).
DO $do$
DECLARE
    v text := (SELECT e.extversion FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'vector');
BEGIN
    IF (pg_catalog.regexp_match(v, '^(\d+)\.(\d+)'))::int[] OPERATOR(pg_catalog.<) ARRAY[0, 8] THEN
        RAISE EXCEPTION 'agent_memory needs pgvector 0.8.0 or later, and this database has pgvector %', v
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Install pgvector 0.8 or later, then ALTER EXTENSION vector UPDATE in this database.';
    END IF;
END
$do$;

-- Times must be finite from now on (ages are counted from them). 0.1.0 let infinite ones in:
-- the update stops, before changing anything, if it finds one, and says which rows to fix.
DO $do$
DECLARE
    n_turns    bigint;
    n_memories bigint;
    n_crossing bigint;
BEGIN
    SELECT count(*) INTO n_turns FROM agent_memory.turns t WHERE NOT pg_catalog.isfinite(t.created_at);
    SELECT count(*) INTO n_memories FROM agent_memory.memories m
     WHERE NOT (pg_catalog.isfinite(m.created_at) AND pg_catalog.isfinite(m.last_hit_at));
    IF n_turns > 0 OR n_memories > 0 THEN
        RAISE EXCEPTION 'agent_memory 0.2.0 needs finite times: % turn(s) and % memory(ies) have an infinite created_at or last_hit_at', n_turns, n_memories
            USING ERRCODE = 'check_violation',
                  HINT = 'Set those times to finite values (for example UPDATE agent_memory.memories SET last_hit_at = created_at WHERE NOT isfinite(last_hit_at)), then run the update again.';
    END IF;
    -- References now stay within a user (they are part of the keys): none may cross users.
    SELECT count(*) INTO n_crossing FROM agent_memory.memories m
     WHERE EXISTS (SELECT 1 FROM agent_memory.memories s WHERE s.id = m.superseded_by AND s.user_id <> m.user_id)
        OR EXISTS (SELECT 1 FROM agent_memory.turns t WHERE t.id = m.source_turn_id AND t.user_id <> m.user_id);
    IF n_crossing > 0 THEN
        RAISE EXCEPTION 'agent_memory 0.2.0 keeps references within a user: % memory(ies) point to another user''s memory or turn', n_crossing
            USING ERRCODE = 'foreign_key_violation',
                  HINT = 'Find them with SELECT m.id FROM agent_memory.memories m JOIN agent_memory.memories s ON s.id = m.superseded_by WHERE s.user_id <> m.user_id (and the same with turns for source_turn_id), set those columns to NULL, then run the update again.';
    END IF;
END
$do$;

-- Keys that lead with user_id, so the tables can be distributed by user (docs/scale-out.md) and
-- no reference crosses users. (The primary keys are rebuilt and an index on id is added: this
-- takes a lock on both tables for as long as building three indexes does.)
ALTER TABLE agent_memory.memories DROP CONSTRAINT memories_superseded_by_fkey;
ALTER TABLE agent_memory.memories DROP CONSTRAINT memories_source_turn_id_fkey;
ALTER TABLE agent_memory.memories DROP CONSTRAINT memories_pkey;
ALTER TABLE agent_memory.memories ADD CONSTRAINT memories_pkey PRIMARY KEY (user_id, id);
CREATE INDEX memories_id ON agent_memory.memories (id);
ALTER TABLE agent_memory.turns DROP CONSTRAINT turns_pkey;
ALTER TABLE agent_memory.turns ADD CONSTRAINT turns_pkey PRIMARY KEY (user_id, id);
ALTER TABLE agent_memory.memories ADD CONSTRAINT memories_superseded_by_fkey FOREIGN KEY (user_id, superseded_by)
    REFERENCES agent_memory.memories (user_id, id) ON DELETE SET NULL (superseded_by) DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE agent_memory.memories ADD CONSTRAINT memories_source_turn_id_fkey FOREIGN KEY (user_id, source_turn_id)
    REFERENCES agent_memory.turns (user_id, id) ON DELETE SET NULL (source_turn_id);
COMMENT ON COLUMN agent_memory.memories.id IS 'Unique id, from the identity (the primary key is (user_id, id)); also the tie-breaker of recall (newer first).';

-- Turns: finite times, and the task a turn belongs to.
ALTER TABLE agent_memory.turns ADD CONSTRAINT turns_created_at_finite CHECK (isfinite(created_at));
ALTER TABLE agent_memory.turns ADD COLUMN task_id text;

-- Memories: the procedural kind, finite times, the key of many-valued facts, tasks.
ALTER TABLE agent_memory.memories DROP CONSTRAINT memories_kind_check;
ALTER TABLE agent_memory.memories ADD CONSTRAINT memories_kind_check CHECK (kind IN ('semantic', 'episodic', 'procedural'));
ALTER TABLE agent_memory.memories DROP CONSTRAINT memories_importance_check;
ALTER TABLE agent_memory.memories ADD CONSTRAINT memories_importance_check CHECK (importance >= 0::real AND importance <= 1::real);
ALTER TABLE agent_memory.memories ADD COLUMN object_key text;
ALTER TABLE agent_memory.memories ADD COLUMN task_id text;
ALTER TABLE agent_memory.memories ADD CONSTRAINT memories_times_finite CHECK (isfinite(created_at) AND isfinite(last_hit_at));
COMMENT ON COLUMN agent_memory.memories.kind IS '''semantic'' (a fact or preference), ''episodic'' (an event) or ''procedural'' (a standing instruction: never decayed, expired or evicted; first in memory_context).';
COMMENT ON COLUMN agent_memory.memories.task_id IS 'The task the memory belongs to (agent_memory.tasks); NULL for none. Recall and memory_context with task_id see a task and its ancestors.';
COMMENT ON COLUMN agent_memory.memories.importance IS 'Importance in [0, 1]; recall multiplies the score by 0.8 + 0.4 × importance. Left NULL on insert: the importance rule (memory_importance).';
COMMENT ON COLUMN agent_memory.memories.archived_at IS 'When the memory moved to the archive: an episode at the end of its retention, over the capacity, or summarised; a one-off fact (never recalled, never rewritten). Archived memories are out of the capacity and still recalled (unless archived => false). A rewrite brings a memory back.';
COMMENT ON COLUMN agent_memory.memories.object_key IS 'For a fact of a many-valued predicate (agent_memory.predicates): its object without case or surrounding blanks, so that each value is a fact of its own; NULL otherwise. Set by the write trigger.';

-- Tasks of long-running agents, one parent each: recall and memory_context with task_id see the
-- memories of the task and of its ancestors (and those with no task). A cycle is refused when it
-- is written.
CREATE TABLE agent_memory.tasks (
    user_id        text        NOT NULL CHECK (user_id <> ''),
    task_id        text        NOT NULL CHECK (task_id <> ''),
    parent_task_id text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, task_id),
    FOREIGN KEY (user_id, parent_task_id) REFERENCES agent_memory.tasks (user_id, task_id) ON DELETE SET NULL (parent_task_id),
    CHECK (parent_task_id IS DISTINCT FROM task_id)
);
COMMENT ON TABLE agent_memory.tasks IS 'Tasks of a user and their parents (task lineage): recall and memory_context with task_id see a task and its ancestors.';

CREATE FUNCTION agent_memory.tasks_no_cycle() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $body$
BEGIN
    IF NEW.parent_task_id IS NOT NULL AND EXISTS (
        WITH RECURSIVE up (task_id, depth) AS (
            SELECT t.parent_task_id, 1 FROM agent_memory.tasks t
             WHERE t.user_id = NEW.user_id AND t.task_id = NEW.parent_task_id
            UNION ALL
            SELECT t.parent_task_id, up.depth + 1 FROM agent_memory.tasks t JOIN up ON t.task_id = up.task_id
             WHERE t.user_id = NEW.user_id AND up.depth < 10000)
        SELECT 1 FROM up WHERE up.task_id = NEW.task_id) THEN
        RAISE EXCEPTION 'task "%" would be its own ancestor', NEW.task_id
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('Its parent "%s" descends from it.', NEW.parent_task_id),
                  HINT = 'A task has one parent, and the parents form a tree: choose a parent that is not one of its descendants.';
    END IF;
    RETURN NEW;
END
$body$;
CREATE TRIGGER tasks_no_cycle BEFORE INSERT OR UPDATE OF parent_task_id ON agent_memory.tasks
    FOR EACH ROW EXECUTE FUNCTION agent_memory.tasks_no_cycle();

-- The predicates of facts: single-valued ('one': a new object supersedes the old, such as an
-- editor, a city, an employer) or many-valued ('many': each object is a fact of its own, such as
-- likes, children, languages spoken), and aliases (another name of a predicate, written as it).
-- A predicate nobody declared is single-valued. Operators add rows; reconcile records a
-- caller's cardinality => 'one' | 'many'.
CREATE TABLE agent_memory.predicates (
    predicate   text        PRIMARY KEY CHECK (predicate <> ''),
    cardinality text        NOT NULL DEFAULT 'one' CHECK (cardinality IN ('one', 'many')),
    alias_of    text        REFERENCES agent_memory.predicates (predicate) ON UPDATE CASCADE,
    seeded      boolean     NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CHECK (alias_of IS DISTINCT FROM predicate)
);
COMMENT ON TABLE agent_memory.predicates IS
    'Predicates of facts: cardinality one (a new object supersedes the old) or many (each object is a fact of its own), and aliases (alias_of: written as that predicate). Undeclared predicates are single-valued.';
INSERT INTO agent_memory.predicates (predicate, cardinality, seeded) SELECT p, c, true FROM (VALUES
    -- single-valued
    ('name', 'one'), ('editor', 'one'), ('os', 'one'), ('theme', 'one'), ('lives_in', 'one'), ('employer', 'one'),
    ('job_title', 'one'), ('time_zone', 'one'), ('language', 'one'), ('nationality', 'one'), ('birthday', 'one'),
    ('email', 'one'), ('phone', 'one'), ('diet', 'one'),
    ('名字', 'one'), ('住在', 'one'), ('公司', 'one'), ('职位', 'one'), ('时区', 'one'), ('编辑器', 'one'),
    -- many-valued
    ('likes', 'many'), ('dislikes', 'many'), ('has_child', 'many'), ('speaks', 'many'), ('has_pet', 'many'),
    ('allergy', 'many'), ('hobby', 'many'), ('interest', 'many'), ('skill', 'many'), ('owns', 'many'),
    ('visited', 'many'), ('friend', 'many'), ('sibling', 'many'), ('goal', 'many'),
    ('喜欢', 'many'), ('不喜欢', 'many'), ('孩子', 'many'), ('会说', 'many'), ('宠物', 'many'), ('过敏', 'many'),
    ('爱好', 'many'), ('朋友', 'many')) v(p, c);
INSERT INTO agent_memory.predicates (predicate, cardinality, alias_of, seeded) SELECT p, c, a, true FROM (VALUES
    ('works_at', 'one', 'employer'), ('company', 'one', 'employer'), ('city', 'one', 'lives_in'),
    ('home', 'one', 'lives_in'), ('timezone', 'one', 'time_zone'), ('allergic_to', 'many', 'allergy'),
    ('child', 'many', 'has_child'), ('pet', 'many', 'has_pet'), ('languages', 'many', 'speaks'),
    ('like', 'many', 'likes'), ('hobbies', 'many', 'hobby')) v(p, c, a);

-- Facts written by 0.1.0 under a predicate 0.2.0 seeds: an alias is written as its predicate
-- (where that leaves one active fact per key; otherwise the fact keeps its name), and a fact of
-- a many-valued predicate gets its value as key. Direct updates: no version is incremented.
ALTER TABLE agent_memory.memories DISABLE TRIGGER memories_before_update;
UPDATE agent_memory.memories m
   SET predicate = p.alias_of
  FROM agent_memory.predicates p
 WHERE p.predicate = m.predicate AND p.alias_of IS NOT NULL
   AND NOT (m.active AND m.subject IS NOT NULL AND EXISTS (
        -- an active fact of the same key already under the predicate, or under a newer alias
        SELECT 1 FROM agent_memory.memories o JOIN agent_memory.predicates q ON q.predicate = o.predicate
         WHERE o.active AND o.user_id = m.user_id AND o.subject = m.subject AND o.id <> m.id
           AND coalesce(q.alias_of, q.predicate) = p.alias_of AND (q.alias_of IS NULL OR o.id > m.id)));
UPDATE agent_memory.memories m
   SET object_key = lower(btrim(m.object))
  FROM agent_memory.predicates p
 WHERE p.predicate = m.predicate AND p.cardinality = 'many' AND m.object IS NOT NULL;
ALTER TABLE agent_memory.memories ENABLE TRIGGER memories_before_update;

-- One active fact per key, the value being part of the key for a many-valued predicate.
DROP INDEX agent_memory.memories_one_active_fact;
CREATE UNIQUE INDEX memories_one_active_fact ON agent_memory.memories (user_id, subject, predicate, (coalesce(object_key, '')))
    WHERE active AND subject IS NOT NULL AND predicate IS NOT NULL;

-- The write-time policies, for every path that writes memories (reconcile, update, COPY, INSERT):
-- embeddings are L2-normalised and checked against their model's dimension; a missing importance
-- comes from the importance rule and a missing expires_at from the retention settings; protected
-- facts never expire; and every write to a memory increments its version, except a recall's
-- refresh of last_hit_at and hit_count.
-- The function runs with search_path = pg_catalog, pg_temp, and names pgvector's functions and
-- operators through pgvector's schema (written in when the extension is created): no object of
-- another schema can stand in for them, whoever writes (including the workers).
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
    IF TG_OP = 'INSERT' OR NEW.emb OPERATOR(@vs@.<>) OLD.emb
       OR NEW.embedding_model IS DISTINCT FROM OLD.embedding_model THEN
        dims := @vs@.vector_dims(NEW.emb);
        SELECT m.dimensions INTO registered FROM agent_memory.embedding_models m WHERE m.name = NEW.embedding_model;
        IF registered IS NULL THEN
            INSERT INTO agent_memory.embedding_models (name, dimensions) VALUES (NEW.embedding_model, dims)
            ON CONFLICT (name) DO NOTHING;
            SELECT m.dimensions INTO registered FROM agent_memory.embedding_models m WHERE m.name = NEW.embedding_model;
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

-- Per-user counts: what is live, what is protected, archived, kept as evidence, and retired by reason.
CREATE OR REPLACE VIEW agent_memory.memory_stats AS
SELECT m.user_id,
       count(*) FILTER (WHERE m.active)                                  AS active,
       count(*) FILTER (WHERE m.active AND m.protected)                  AS protected,
       count(*) FILTER (WHERE m.active AND m.archived_at IS NOT NULL)    AS archived,
       count(*) FILTER (WHERE m.superseded_by IS NOT NULL AND (m.active OR m.retired_reason = 'summarized')) AS evidence,
       count(*) FILTER (WHERE NOT m.active)                              AS retired,
       coalesce((SELECT jsonb_object_agg(r.reason, r.n ORDER BY r.reason)
                   FROM (SELECT coalesce(x.retired_reason, 'unknown') AS reason, count(*) AS n
                           FROM agent_memory.memories x
                          WHERE x.user_id = m.user_id AND NOT x.active
                          GROUP BY 1) r), '{}'::jsonb)                  AS retired_by_reason,
       (SELECT max(r.finished_at) FROM agent_memory.runs r
         WHERE r.job = 'forget' AND r.status = 'succeeded')              AS last_forget,
       (SELECT max(r.finished_at) FROM agent_memory.runs r
         WHERE r.job = 'consolidate' AND r.status = 'succeeded')         AS last_consolidate
  FROM agent_memory.memories m
 GROUP BY m.user_id;
COMMENT ON VIEW agent_memory.memory_stats IS 'Per user: active, protected, archived, evidence and retired memories, the retired ones by reason, and when forgetting and consolidation last succeeded (agent_memory.last_runs has the runs).';

-- The evidence of a summary: the episodic memories consolidation summarised into it. Recall
-- skips them; they stay as long as the summary does.
CREATE OR REPLACE FUNCTION agent_memory.memory_evidence(memory_id bigint)
RETURNS TABLE (id bigint, kind text, subject text, content text, created_at timestamptz, retired_at timestamptz)
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog
AS $$
    SELECT m.id, m.kind, m.subject, m.content, m.created_at, m.retired_at
      FROM agent_memory.memories m
     WHERE m.superseded_by = memory_id AND (m.active OR m.retired_reason = 'summarized')
     ORDER BY m.created_at, m.id
$$;
COMMENT ON FUNCTION agent_memory.memory_evidence(bigint) IS
    'The memories a summary was made from (evidence), oldest first; recall skips them.';

-- The seed of the extension's advisory lock keys (src/locks.rs): drawn when the extension is
-- created, and readable only by the roles that use the extension, so a role with only CONNECT
-- cannot compute a key and hold it to stall forgetting or a user's writes. Not dumped: a
-- restored database draws its own.
CREATE TABLE agent_memory.lock_salt (salt bigint NOT NULL);
CREATE UNIQUE INDEX lock_salt_one_row ON agent_memory.lock_salt ((true));
INSERT INTO agent_memory.lock_salt (salt)
SELECT ('x' || pg_catalog.substr(pg_catalog.md5(pg_catalog.gen_random_uuid()::text), 1, 16))::bit(64)::bigint;
COMMENT ON TABLE agent_memory.lock_salt IS 'The secret seed of the extension''s advisory lock keys (one row).';

-- Erasure on request (the right to be forgotten): every memory, turn and task of a user is
-- deleted in one transaction, and a receipt is kept that never holds the content: a hash of the
-- user id, the time, and the rows deleted per table.
CREATE TABLE agent_memory.erasures (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_hash  text        NOT NULL,
    erased_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    erased_by  text        NOT NULL DEFAULT current_user,
    counts     jsonb       NOT NULL
);
COMMENT ON TABLE agent_memory.erasures IS
    'One receipt per erasure (memory_erase): the SHA-256 of the user id, when, by whom, and how many rows were deleted per table. Never the content.';

CREATE FUNCTION agent_memory.memory_erase(user_id text)
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
    RETURN QUERY
    INSERT INTO agent_memory.erasures (user_hash, counts)
    VALUES (pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(memory_erase.user_id, 'UTF8')), 'hex'),
            pg_catalog.jsonb_build_object('memories', n_memories, 'turns', n_turns, 'tasks', n_tasks))
    RETURNING erasures.id, erasures.user_hash, erasures.erased_at, n_memories, n_turns, n_tasks;
END
$body$;
COMMENT ON FUNCTION agent_memory.memory_erase(text) IS
    'Deletes every memory, turn and task of a user in one transaction and returns the receipt kept in agent_memory.erasures (no content). Dead rows stay on disk until VACUUM; WAL and backups keep them until they expire.';

-- pg_dump backs up the rows of every table that holds users' data or bookkeeping (the tables
-- belong to the extension, so without this a dump would hold none of them), and the sequences
-- that number them, so a restored database goes on numbering after its last id.
SELECT pg_catalog.pg_extension_config_dump('agent_memory.memories', '');
SELECT pg_catalog.pg_extension_config_dump('agent_memory.turns', '');
SELECT pg_catalog.pg_extension_config_dump('agent_memory.embedding_models', '');
SELECT pg_catalog.pg_extension_config_dump('agent_memory.runs', '');
SELECT pg_catalog.pg_extension_config_dump('agent_memory.maintenance_state', '');
SELECT pg_catalog.pg_extension_config_dump('agent_memory.tasks', '');
SELECT pg_catalog.pg_extension_config_dump('agent_memory.erasures', '');
-- The seeded predicates come with CREATE EXTENSION; only those added later are dumped.
SELECT pg_catalog.pg_extension_config_dump('agent_memory.predicates', 'WHERE NOT seeded');
SELECT pg_catalog.pg_extension_config_dump(pg_catalog.pg_get_serial_sequence('agent_memory.memories', 'id'), '');
SELECT pg_catalog.pg_extension_config_dump(pg_catalog.pg_get_serial_sequence('agent_memory.turns', 'id'), '');
SELECT pg_catalog.pg_extension_config_dump(pg_catalog.pg_get_serial_sequence('agent_memory.runs', 'id'), '');
SELECT pg_catalog.pg_extension_config_dump(pg_catalog.pg_get_serial_sequence('agent_memory.erasures', 'id'), '');

-- The role the background workers' passes run as (unless agent_memory.worker_role names another):
-- it cannot log in, and it may read and change the extension's tables, nothing else. Roles
-- belong to the whole server, so a second database with the extension shares it.
DO $do$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) 'agent_memory_worker') THEN
        CREATE ROLE agent_memory_worker NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOBYPASSRLS;
    END IF;
    -- pgvector's functions are called by the write trigger under the worker's role.
    IF NOT pg_catalog.has_schema_privilege('agent_memory_worker',
            (SELECT e.extnamespace FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'vector'), 'USAGE') THEN
        EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA %I TO agent_memory_worker',
            (SELECT n.nspname FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
              WHERE e.extname OPERATOR(pg_catalog.=) 'vector'));
    END IF;
END
$do$;
GRANT USAGE ON SCHEMA agent_memory TO agent_memory_worker;
GRANT SELECT, INSERT, UPDATE, DELETE ON agent_memory.memories, agent_memory.runs, agent_memory.maintenance_state
    TO agent_memory_worker;
GRANT SELECT, INSERT ON agent_memory.embedding_models TO agent_memory_worker;
GRANT SELECT ON agent_memory.predicates, agent_memory.lock_salt TO agent_memory_worker;
-- (FOR UPDATE SKIP LOCKED, used to delete old turns in batches, needs UPDATE.)
GRANT SELECT, UPDATE, DELETE ON agent_memory.turns TO agent_memory_worker;

DO $do$
BEGIN
    EXECUTE pg_catalog.format('GRANT USAGE, SELECT, UPDATE ON SEQUENCE %s, %s, %s TO agent_memory_worker',
        pg_catalog.pg_get_serial_sequence('agent_memory.memories', 'id'),
        pg_catalog.pg_get_serial_sequence('agent_memory.turns', 'id'),
        pg_catalog.pg_get_serial_sequence('agent_memory.runs', 'id'));
END
$do$;


-- The functions of the library. Those whose arguments or results changed are made anew (their
-- 0.1.0 C symbols are stubs that ask for this update); the others are replaced in place.
DROP FUNCTION agent_memory.memory_recall(text, vector, integer, text, text[], double precision, text, boolean, boolean);
DROP FUNCTION agent_memory.memory_recall(text, halfvec, integer, text, text[], double precision, text, boolean, boolean);
DROP FUNCTION agent_memory.memory_recall(text, text, integer, text, text[], double precision, text, boolean, boolean);
DROP FUNCTION agent_memory.memory_reconcile(text, text, text, text, text, vector, text, text, real, boolean, boolean, text, bigint, timestamptz, timestamptz, jsonb, text, bigint, integer);
DROP FUNCTION agent_memory.memory_reconcile(text, text, text, text, text, halfvec, text, text, real, boolean, boolean, text, bigint, timestamptz, timestamptz, jsonb, text, bigint, integer);
DROP FUNCTION agent_memory.memory_reconcile(text, text, text, text, text, text, text, text, real, boolean, boolean, text, bigint, timestamptz, timestamptz, jsonb, text, bigint, integer);
DROP FUNCTION agent_memory.memory_record_turn(text, text, text, text, timestamptz, jsonb);
DROP FUNCTION agent_memory.memory_importance(text);

-- agent_memory::api::consolidate::memory_consolidate
CREATE OR REPLACE FUNCTION "memory_consolidate"(
	"dry_run" bool DEFAULT false /* Option < bool > */
) RETURNS TABLE (
	"step" TEXT,  /* String */
	"rows" bigint  /* i64 */
)
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'memory_consolidate_wrapper';

-- agent_memory::api::context::memory_context
CREATE FUNCTION "memory_context"(
	"user_id" TEXT, /* Option < & str > */
	"session_id" TEXT, /* Option < & str > */
	"query" vector, /* Option < Vector > */
	"query_text" TEXT DEFAULT NULL, /* Option < & str > */
	"token_budget" INT DEFAULT 2000, /* Option < i32 > */
	"system_tokens" INT DEFAULT 0, /* Option < i32 > */
	"turns" INT DEFAULT 8, /* Option < i32 > */
	"k" INT DEFAULT 10, /* Option < i32 > */
	"model" TEXT DEFAULT NULL, /* Option < & str > */
	"task_id" TEXT DEFAULT NULL, /* Option < & str > */
	"untasked" bool DEFAULT true, /* Option < bool > */
	"touch" bool DEFAULT true /* Option < bool > */
) RETURNS TABLE (
	"position" INT,  /* i32 */
	"channel" TEXT,  /* String */
	"memory_id" bigint,  /* Option < i64 > */
	"turn_id" bigint,  /* Option < i64 > */
	"role" TEXT,  /* Option < String > */
	"content" TEXT,  /* String */
	"tokens" INT,  /* i32 */
	"score" double precision,  /* Option < f64 > */
	"created_at" timestamp with time zone  /* Option < TimestampWithTimeZone > */
)
VOLATILE PARALLEL UNSAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'memory_context_wrapper';

-- agent_memory::api::context::memory_context
CREATE FUNCTION "memory_context"(
	"user_id" TEXT, /* Option < & str > */
	"session_id" TEXT, /* Option < & str > */
	"query" halfvec, /* Option < HalfVec > */
	"query_text" TEXT DEFAULT NULL, /* Option < & str > */
	"token_budget" INT DEFAULT 2000, /* Option < i32 > */
	"system_tokens" INT DEFAULT 0, /* Option < i32 > */
	"turns" INT DEFAULT 8, /* Option < i32 > */
	"k" INT DEFAULT 10, /* Option < i32 > */
	"model" TEXT DEFAULT NULL, /* Option < & str > */
	"task_id" TEXT DEFAULT NULL, /* Option < & str > */
	"untasked" bool DEFAULT true, /* Option < bool > */
	"touch" bool DEFAULT true /* Option < bool > */
) RETURNS TABLE (
	"position" INT,  /* i32 */
	"channel" TEXT,  /* String */
	"memory_id" bigint,  /* Option < i64 > */
	"turn_id" bigint,  /* Option < i64 > */
	"role" TEXT,  /* Option < String > */
	"content" TEXT,  /* String */
	"tokens" INT,  /* i32 */
	"score" double precision,  /* Option < f64 > */
	"created_at" timestamp with time zone  /* Option < TimestampWithTimeZone > */
)
VOLATILE PARALLEL UNSAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'memory_context_halfvec_wrapper';

-- agent_memory::api::context::memory_context
CREATE FUNCTION "memory_context"(
	"user_id" TEXT, /* Option < & str > */
	"session_id" TEXT, /* Option < & str > */
	"query" TEXT, /* Option < & str > */
	"query_text" TEXT DEFAULT NULL, /* Option < & str > */
	"token_budget" INT DEFAULT 2000, /* Option < i32 > */
	"system_tokens" INT DEFAULT 0, /* Option < i32 > */
	"turns" INT DEFAULT 8, /* Option < i32 > */
	"k" INT DEFAULT 10, /* Option < i32 > */
	"model" TEXT DEFAULT NULL, /* Option < & str > */
	"task_id" TEXT DEFAULT NULL, /* Option < & str > */
	"untasked" bool DEFAULT true, /* Option < bool > */
	"touch" bool DEFAULT true /* Option < bool > */
) RETURNS TABLE (
	"position" INT,  /* i32 */
	"channel" TEXT,  /* String */
	"memory_id" bigint,  /* Option < i64 > */
	"turn_id" bigint,  /* Option < i64 > */
	"role" TEXT,  /* Option < String > */
	"content" TEXT,  /* String */
	"tokens" INT,  /* i32 */
	"score" double precision,  /* Option < f64 > */
	"created_at" timestamp with time zone  /* Option < TimestampWithTimeZone > */
)
VOLATILE PARALLEL UNSAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'memory_context_text_query_wrapper';

-- agent_memory::api::context::memory_context_text
CREATE FUNCTION "memory_context_text"(
	"user_id" TEXT, /* Option < & str > */
	"session_id" TEXT, /* Option < & str > */
	"query" vector, /* Option < Vector > */
	"query_text" TEXT DEFAULT NULL, /* Option < & str > */
	"token_budget" INT DEFAULT 2000, /* Option < i32 > */
	"system_tokens" INT DEFAULT 0, /* Option < i32 > */
	"turns" INT DEFAULT 8, /* Option < i32 > */
	"k" INT DEFAULT 10, /* Option < i32 > */
	"model" TEXT DEFAULT NULL, /* Option < & str > */
	"task_id" TEXT DEFAULT NULL, /* Option < & str > */
	"untasked" bool DEFAULT true, /* Option < bool > */
	"touch" bool DEFAULT true /* Option < bool > */
) RETURNS TEXT /* String */
VOLATILE PARALLEL UNSAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'memory_context_text_wrapper';

-- agent_memory::api::context::memory_context_text
CREATE FUNCTION "memory_context_text"(
	"user_id" TEXT, /* Option < & str > */
	"session_id" TEXT, /* Option < & str > */
	"query" halfvec, /* Option < HalfVec > */
	"query_text" TEXT DEFAULT NULL, /* Option < & str > */
	"token_budget" INT DEFAULT 2000, /* Option < i32 > */
	"system_tokens" INT DEFAULT 0, /* Option < i32 > */
	"turns" INT DEFAULT 8, /* Option < i32 > */
	"k" INT DEFAULT 10, /* Option < i32 > */
	"model" TEXT DEFAULT NULL, /* Option < & str > */
	"task_id" TEXT DEFAULT NULL, /* Option < & str > */
	"untasked" bool DEFAULT true, /* Option < bool > */
	"touch" bool DEFAULT true /* Option < bool > */
) RETURNS TEXT /* String */
VOLATILE PARALLEL UNSAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'memory_context_text_halfvec_wrapper';

-- agent_memory::api::context::memory_context_text
CREATE FUNCTION "memory_context_text"(
	"user_id" TEXT, /* Option < & str > */
	"session_id" TEXT, /* Option < & str > */
	"query" TEXT, /* Option < & str > */
	"query_text" TEXT DEFAULT NULL, /* Option < & str > */
	"token_budget" INT DEFAULT 2000, /* Option < i32 > */
	"system_tokens" INT DEFAULT 0, /* Option < i32 > */
	"turns" INT DEFAULT 8, /* Option < i32 > */
	"k" INT DEFAULT 10, /* Option < i32 > */
	"model" TEXT DEFAULT NULL, /* Option < & str > */
	"task_id" TEXT DEFAULT NULL, /* Option < & str > */
	"untasked" bool DEFAULT true, /* Option < bool > */
	"touch" bool DEFAULT true /* Option < bool > */
) RETURNS TEXT /* String */
VOLATILE PARALLEL UNSAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'memory_context_text_text_query_wrapper';

-- agent_memory::api::index::memory_create_index
CREATE OR REPLACE FUNCTION "memory_create_index"(
	"model" TEXT, /* Option < & str > */
	"m" INT DEFAULT 16, /* i32 */
	"ef_construction" INT DEFAULT 64 /* i32 */
) RETURNS TEXT /* String */
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'memory_create_index_wrapper';

-- agent_memory::api::decay::memory_decay_score
CREATE OR REPLACE FUNCTION "memory_decay_score"(
	"similarity" double precision, /* f64 */
	"age" interval, /* Interval */
	"importance" real, /* f32 */
	"mode" TEXT DEFAULT 'exponential', /* & str */
	"floor" double precision DEFAULT 0.0 /* f64 */
) RETURNS double precision /* f64 */
STRICT STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'memory_decay_score_wrapper';

-- agent_memory::api::forget::memory_forget
CREATE OR REPLACE FUNCTION "memory_forget"(
	"dry_run" bool DEFAULT false /* Option < bool > */
) RETURNS TABLE (
	"step" TEXT,  /* String */
	"rows" bigint  /* i64 */
)
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'memory_forget_wrapper';

-- agent_memory::api::policy::memory_importance
CREATE FUNCTION "memory_importance"(
	"content" TEXT, /* & str */
	"kind" TEXT DEFAULT 'semantic' /* & str */
) RETURNS real /* f32 */
STRICT STABLE PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'importance_wrapper';

-- agent_memory::api::recall::memory_recall
CREATE FUNCTION "memory_recall"(
	"user_id" TEXT, /* Option < & str > */
	"query" halfvec, /* Option < HalfVec > */
	"k" INT DEFAULT 5, /* Option < i32 > */
	"model" TEXT DEFAULT NULL, /* Option < & str > */
	"kinds" TEXT[] DEFAULT NULL, /* :: std :: option :: Option < Vec < Option < String > > > */
	"min_similarity" double precision DEFAULT NULL, /* Option < f64 > */
	"decay" TEXT DEFAULT NULL, /* Option < & str > */
	"touch" bool DEFAULT true, /* Option < bool > */
	"archived" bool DEFAULT true, /* Option < bool > */
	"query_text" TEXT DEFAULT NULL, /* Option < & str > */
	"task_id" TEXT DEFAULT NULL, /* Option < & str > */
	"untasked" bool DEFAULT true /* Option < bool > */
) RETURNS TABLE (
	"id" bigint,  /* i64 */
	"content" TEXT,  /* String */
	"score" double precision,  /* f64 */
	"similarity" double precision,  /* Option < f64 > */
	"kind" TEXT,  /* String */
	"subject" TEXT,  /* Option < String > */
	"predicate" TEXT,  /* Option < String > */
	"object" TEXT,  /* Option < String > */
	"importance" real,  /* f32 */
	"created_at" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"path" TEXT,  /* String */
	"vector_rank" INT,  /* Option < i32 > */
	"keyword_rank" INT,  /* Option < i32 > */
	"recency_rank" INT  /* Option < i32 > */
)
VOLATILE PARALLEL UNSAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'recall_halfvec_wrapper';

-- agent_memory::api::recall::memory_recall
CREATE FUNCTION "memory_recall"(
	"user_id" TEXT, /* Option < & str > */
	"query" TEXT, /* Option < & str > */
	"k" INT DEFAULT 5, /* Option < i32 > */
	"model" TEXT DEFAULT NULL, /* Option < & str > */
	"kinds" TEXT[] DEFAULT NULL, /* :: std :: option :: Option < Vec < Option < String > > > */
	"min_similarity" double precision DEFAULT NULL, /* Option < f64 > */
	"decay" TEXT DEFAULT NULL, /* Option < & str > */
	"touch" bool DEFAULT true, /* Option < bool > */
	"archived" bool DEFAULT true, /* Option < bool > */
	"query_text" TEXT DEFAULT NULL, /* Option < & str > */
	"task_id" TEXT DEFAULT NULL, /* Option < & str > */
	"untasked" bool DEFAULT true /* Option < bool > */
) RETURNS TABLE (
	"id" bigint,  /* i64 */
	"content" TEXT,  /* String */
	"score" double precision,  /* f64 */
	"similarity" double precision,  /* Option < f64 > */
	"kind" TEXT,  /* String */
	"subject" TEXT,  /* Option < String > */
	"predicate" TEXT,  /* Option < String > */
	"object" TEXT,  /* Option < String > */
	"importance" real,  /* f32 */
	"created_at" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"path" TEXT,  /* String */
	"vector_rank" INT,  /* Option < i32 > */
	"keyword_rank" INT,  /* Option < i32 > */
	"recency_rank" INT  /* Option < i32 > */
)
VOLATILE PARALLEL UNSAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'recall_text_wrapper';

-- agent_memory::api::recall::memory_recall
CREATE FUNCTION "memory_recall"(
	"user_id" TEXT, /* Option < & str > */
	"query" vector, /* Option < Vector > */
	"k" INT DEFAULT 5, /* Option < i32 > */
	"model" TEXT DEFAULT NULL, /* Option < & str > */
	"kinds" TEXT[] DEFAULT NULL, /* :: std :: option :: Option < Vec < Option < String > > > */
	"min_similarity" double precision DEFAULT NULL, /* Option < f64 > */
	"decay" TEXT DEFAULT NULL, /* Option < & str > */
	"touch" bool DEFAULT true, /* Option < bool > */
	"archived" bool DEFAULT true, /* Option < bool > */
	"query_text" TEXT DEFAULT NULL, /* Option < & str > */
	"task_id" TEXT DEFAULT NULL, /* Option < & str > */
	"untasked" bool DEFAULT true /* Option < bool > */
) RETURNS TABLE (
	"id" bigint,  /* i64 */
	"content" TEXT,  /* String */
	"score" double precision,  /* f64 */
	"similarity" double precision,  /* Option < f64 > */
	"kind" TEXT,  /* String */
	"subject" TEXT,  /* Option < String > */
	"predicate" TEXT,  /* Option < String > */
	"object" TEXT,  /* Option < String > */
	"importance" real,  /* f32 */
	"created_at" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"path" TEXT,  /* String */
	"vector_rank" INT,  /* Option < i32 > */
	"keyword_rank" INT,  /* Option < i32 > */
	"recency_rank" INT  /* Option < i32 > */
)
VOLATILE PARALLEL UNSAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'recall_vector_wrapper';

-- agent_memory::api::reconcile::memory_reconcile
CREATE FUNCTION "memory_reconcile"(
	"user_id" TEXT, /* Option < & str > */
	"subject" TEXT, /* Option < String > */
	"predicate" TEXT, /* Option < String > */
	"object" TEXT, /* Option < String > */
	"content" TEXT, /* Option < String > */
	"emb" halfvec, /* Option < HalfVec > */
	"kind" TEXT DEFAULT 'semantic', /* Option < String > */
	"model" TEXT DEFAULT NULL, /* Option < & str > */
	"importance" real DEFAULT NULL, /* Option < f32 > */
	"protected" bool DEFAULT false, /* Option < bool > */
	"negate" bool DEFAULT false, /* Option < bool > */
	"source" TEXT DEFAULT NULL, /* Option < String > */
	"source_turn_id" bigint DEFAULT NULL, /* Option < i64 > */
	"expires_at" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"valid_until" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"metadata" jsonb DEFAULT NULL, /* Option < JsonB > */
	"action" TEXT DEFAULT NULL, /* Option < String > */
	"target_id" bigint DEFAULT NULL, /* Option < i64 > */
	"expected_version" INT DEFAULT NULL, /* Option < i32 > */
	"cardinality" TEXT DEFAULT NULL, /* Option < String > */
	"task_id" TEXT DEFAULT NULL /* Option < String > */
) RETURNS TABLE (
	"action" TEXT,  /* String */
	"memory_id" bigint,  /* Option < i64 > */
	"previous_id" bigint,  /* Option < i64 > */
	"version" INT  /* Option < i32 > */
)
VOLATILE PARALLEL UNSAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'reconcile_halfvec_wrapper';

-- agent_memory::api::reconcile::memory_reconcile
CREATE FUNCTION "memory_reconcile"(
	"user_id" TEXT, /* Option < & str > */
	"subject" TEXT, /* Option < String > */
	"predicate" TEXT, /* Option < String > */
	"object" TEXT, /* Option < String > */
	"content" TEXT, /* Option < String > */
	"emb" TEXT, /* Option < & str > */
	"kind" TEXT DEFAULT 'semantic', /* Option < String > */
	"model" TEXT DEFAULT NULL, /* Option < & str > */
	"importance" real DEFAULT NULL, /* Option < f32 > */
	"protected" bool DEFAULT false, /* Option < bool > */
	"negate" bool DEFAULT false, /* Option < bool > */
	"source" TEXT DEFAULT NULL, /* Option < String > */
	"source_turn_id" bigint DEFAULT NULL, /* Option < i64 > */
	"expires_at" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"valid_until" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"metadata" jsonb DEFAULT NULL, /* Option < JsonB > */
	"action" TEXT DEFAULT NULL, /* Option < String > */
	"target_id" bigint DEFAULT NULL, /* Option < i64 > */
	"expected_version" INT DEFAULT NULL, /* Option < i32 > */
	"cardinality" TEXT DEFAULT NULL, /* Option < String > */
	"task_id" TEXT DEFAULT NULL /* Option < String > */
) RETURNS TABLE (
	"action" TEXT,  /* String */
	"memory_id" bigint,  /* Option < i64 > */
	"previous_id" bigint,  /* Option < i64 > */
	"version" INT  /* Option < i32 > */
)
VOLATILE PARALLEL UNSAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'reconcile_text_wrapper';

-- agent_memory::api::reconcile::memory_reconcile
CREATE FUNCTION "memory_reconcile"(
	"user_id" TEXT, /* Option < & str > */
	"subject" TEXT, /* Option < String > */
	"predicate" TEXT, /* Option < String > */
	"object" TEXT, /* Option < String > */
	"content" TEXT, /* Option < String > */
	"emb" vector, /* Option < Vector > */
	"kind" TEXT DEFAULT 'semantic', /* Option < String > */
	"model" TEXT DEFAULT NULL, /* Option < & str > */
	"importance" real DEFAULT NULL, /* Option < f32 > */
	"protected" bool DEFAULT false, /* Option < bool > */
	"negate" bool DEFAULT false, /* Option < bool > */
	"source" TEXT DEFAULT NULL, /* Option < String > */
	"source_turn_id" bigint DEFAULT NULL, /* Option < i64 > */
	"expires_at" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"valid_until" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"metadata" jsonb DEFAULT NULL, /* Option < JsonB > */
	"action" TEXT DEFAULT NULL, /* Option < String > */
	"target_id" bigint DEFAULT NULL, /* Option < i64 > */
	"expected_version" INT DEFAULT NULL, /* Option < i32 > */
	"cardinality" TEXT DEFAULT NULL, /* Option < String > */
	"task_id" TEXT DEFAULT NULL /* Option < String > */
) RETURNS TABLE (
	"action" TEXT,  /* String */
	"memory_id" bigint,  /* Option < i64 > */
	"previous_id" bigint,  /* Option < i64 > */
	"version" INT  /* Option < i32 > */
)
VOLATILE PARALLEL UNSAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'reconcile_vector_wrapper';

-- agent_memory::api::reconcile::memory_reconcile_batch
CREATE OR REPLACE FUNCTION "memory_reconcile_batch"(
	"user_id" TEXT, /* Option < & str > */
	"facts" jsonb, /* Option < crate :: json :: JsonbText > */
	"model" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS TABLE (
	"ordinal" INT,  /* i32 */
	"action" TEXT,  /* String */
	"memory_id" bigint,  /* Option < i64 > */
	"previous_id" bigint,  /* Option < i64 > */
	"version" INT  /* Option < i32 > */
)
VOLATILE PARALLEL UNSAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'memory_reconcile_batch_wrapper';

-- agent_memory::api::reconcile::memory_reconcile_batch
CREATE OR REPLACE FUNCTION "memory_reconcile_batch"(
	"user_id" TEXT, /* Option < & str > */
	"facts" json, /* Option < crate :: json :: JsonText > */
	"model" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS TABLE (
	"ordinal" INT,  /* i32 */
	"action" TEXT,  /* String */
	"memory_id" bigint,  /* Option < i64 > */
	"previous_id" bigint,  /* Option < i64 > */
	"version" INT  /* Option < i32 > */
)
VOLATILE PARALLEL UNSAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'memory_reconcile_batch_json_wrapper';

-- agent_memory::api::reconcile::memory_reconcile_batch
CREATE OR REPLACE FUNCTION "memory_reconcile_batch"(
	"user_id" TEXT, /* Option < & str > */
	"facts" TEXT, /* Option < & str > */
	"model" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS TABLE (
	"ordinal" INT,  /* i32 */
	"action" TEXT,  /* String */
	"memory_id" bigint,  /* Option < i64 > */
	"previous_id" bigint,  /* Option < i64 > */
	"version" INT  /* Option < i32 > */
)
VOLATILE PARALLEL UNSAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'memory_reconcile_batch_text_wrapper';

-- agent_memory::api::turns::memory_record_turn
CREATE FUNCTION "memory_record_turn"(
	"user_id" TEXT, /* Option < & str > */
	"session_id" TEXT, /* Option < & str > */
	"role" TEXT, /* Option < & str > */
	"content" TEXT, /* Option < & str > */
	"created_at" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"metadata" jsonb DEFAULT NULL, /* Option < JsonB > */
	"task_id" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS bigint /* i64 */
VOLATILE PARALLEL UNSAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'record_turn_wrapper';

-- agent_memory::api::policy::memory_retention
CREATE OR REPLACE FUNCTION "memory_retention"(
	"kind" TEXT, /* Option < & str > */
	"importance" real, /* Option < f32 > */
	"protected" bool DEFAULT false /* Option < bool > */
) RETURNS interval /* Option < Interval > */
STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'memory_retention_wrapper';

-- agent_memory::api::forget::memory_retention_score
CREATE OR REPLACE FUNCTION "memory_retention_score"(
	"importance" real, /* Option < f32 > */
	"last_hit_at" timestamp with time zone, /* Option < TimestampWithTimeZone > */
	"hit_count" INT /* Option < i32 > */
) RETURNS double precision /* f64 */
STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'memory_retention_score_wrapper';

-- agent_memory::api::update::memory_update
CREATE OR REPLACE FUNCTION "memory_update"(
	"id" bigint, /* Option < i64 > */
	"expected_version" INT, /* Option < i32 > */
	"object" TEXT DEFAULT NULL, /* Option < String > */
	"content" TEXT DEFAULT NULL, /* Option < String > */
	"emb" vector DEFAULT NULL, /* Option < Vector > */
	"importance" real DEFAULT NULL, /* Option < f32 > */
	"metadata" jsonb DEFAULT NULL, /* Option < JsonB > */
	"expires_at" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"valid_until" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"protected" bool DEFAULT NULL /* Option < bool > */
) RETURNS INT /* Option < i32 > */
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'memory_update_wrapper';

-- agent_memory::api::update::memory_update
CREATE OR REPLACE FUNCTION "memory_update"(
	"id" bigint, /* Option < i64 > */
	"expected_version" INT, /* Option < i32 > */
	"emb" halfvec, /* Option < HalfVec > */
	"object" TEXT DEFAULT NULL, /* Option < String > */
	"content" TEXT DEFAULT NULL, /* Option < String > */
	"importance" real DEFAULT NULL, /* Option < f32 > */
	"metadata" jsonb DEFAULT NULL, /* Option < JsonB > */
	"expires_at" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"valid_until" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"protected" bool DEFAULT NULL /* Option < bool > */
) RETURNS INT /* Option < i32 > */
VOLATILE PARALLEL UNSAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'memory_update_halfvec_wrapper';


-- The access model (new in 0.2.0): nothing for PUBLIC; agent_memory.grant_access gives a role
-- reader, writer or admin rights. Roles that used 0.1.0's functions through PUBLIC need a grant.
-- agent_memory: the access model. Nothing is granted to PUBLIC; roles get one of three levels
-- with agent_memory.grant_access(role, level):
--   reader  recall, memory_context, evidence and the scoring functions; reads the tables, and
--           refreshes last_hit_at and hit_count (a recall's touch);
--   writer  reader + reconcile, update, record turns, declare tasks and predicates;
--   admin   writer + forgetting, consolidation, erasure, indexes, and the bookkeeping tables.
-- Run last (after every function exists).

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA agent_memory FROM PUBLIC;

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
        EXECUTE format('GRANT USAGE ON SEQUENCE %s, %s TO %s',
                       pg_catalog.pg_get_serial_sequence('agent_memory.runs', 'id'),
                       pg_catalog.pg_get_serial_sequence('agent_memory.erasures', 'id'), role);
        functions := functions || ARRAY['memory_forget', 'memory_consolidate', 'memory_erase', 'memory_create_index'];
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
    'Grants a role one of the access levels: reader (recall, context, evidence), writer (reader + reconcile, update, turns), admin (writer + forget, consolidate, erase, indexes, bookkeeping).';

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
