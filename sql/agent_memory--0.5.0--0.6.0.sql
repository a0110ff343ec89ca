-- agent_memory 0.5.0 -> 0.6.0: tenancy of the shared parts. Run by ALTER EXTENSION agent_memory
-- UPDATE; every memory is kept. tests/upgrade.sh checks that a database updated from 0.1.0 (through
-- each version) has the same catalog as a fresh install of 0.6.0.
--   * memory_stats reads memories with the caller's rights (security_invoker);
--   * writers add predicates but never change one, register models only by writing memories of
--     them, and read no secret: lock_salt is the owner's, and holds the erasure receipts' key too;
--   * who declared a predicate is recorded, and an erasure drops the predicates only its user
--     declared; erasure and pack rebuilds exclude each other;
--   * a user's task writes are serialised; metadata is a JSON object; bad times fail a batch;
--   * roles may be bound to the users they work for (agent_memory.role_users).
\echo Use "ALTER EXTENSION agent_memory UPDATE" to load this file. \quit

-- Turns whose metadata is not an object (0.5.0 stored any JSON) keep it under "value".
UPDATE agent_memory.turns SET metadata = pg_catalog.jsonb_build_object('value', metadata)
 WHERE pg_catalog.jsonb_typeof(metadata) <> 'object';
ALTER TABLE agent_memory.turns ADD CONSTRAINT turns_metadata_object CHECK (jsonb_typeof(metadata) = 'object');

-- A user's task writes run one at a time (the user's task lock, until the end of the
-- transaction), and each checks the parents as committed by the writes before it: two sessions
-- that make two tasks each other's parent at once cannot both commit. SECURITY DEFINER: the lock's
-- key is salted with a secret no application role can read (agent_memory.lock_salt).
CREATE OR REPLACE FUNCTION agent_memory.tasks_no_cycle() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
BEGIN
    IF NEW.parent_task_id IS NULL THEN
        RETURN NEW;
    END IF;
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended('agent_memory.tasks:' || NEW.user_id,
                                                                          (SELECT s.salt FROM agent_memory.lock_salt s)));
    -- Under REPEATABLE READ or SERIALIZABLE this transaction's snapshot may predate the write it
    -- waited for: locking the user's tasks then fails with 40001 when one changed since.
    IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM 1 FROM agent_memory.tasks t WHERE t.user_id = NEW.user_id FOR SHARE;
    END IF;
    IF EXISTS (
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
REVOKE ALL ON FUNCTION agent_memory.tasks_no_cycle() FROM PUBLIC;

-- (0.6.0) The one way a model is registered besides an admin's INSERT: the first write of a
-- memory of the model (the write trigger calls this). Application roles cannot INSERT into
-- embedding_models, so no writer can claim a model's name with another dimension by hand.
CREATE FUNCTION agent_memory.register_model(name text, dimensions integer) RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    registered integer;
BEGIN
    SELECT m.dimensions INTO registered FROM agent_memory.embedding_models m WHERE m.name = register_model.name;
    IF registered IS NULL THEN
        INSERT INTO agent_memory.embedding_models (name, dimensions) VALUES (register_model.name, register_model.dimensions)
        ON CONFLICT ON CONSTRAINT embedding_models_pkey DO NOTHING;
        SELECT m.dimensions INTO registered FROM agent_memory.embedding_models m WHERE m.name = register_model.name;
    END IF;
    RETURN registered;
END
$body$;
REVOKE ALL ON FUNCTION agent_memory.register_model(text, integer) FROM PUBLIC;
COMMENT ON FUNCTION agent_memory.register_model(text, integer) IS
    'The dimension registered for a model, registering it with this dimension when it is new (the first write of a memory of the model).';

-- The write trigger: models registered through register_model; metadata must be an object.
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
    -- sets emb to NULL) is embedded here, from its content: with its embedding_model when the
    -- server has that model's files, and with agent_memory.text_model when the row was left at
    -- the default model (agent_memory.default_model), whose vectors come from outside.
    IF NEW.emb IS NULL AND NEW.content IS NOT NULL THEN
        IF NEW.embedding_model IS NULL
           OR (NEW.embedding_model = coalesce(nullif(current_setting('agent_memory.default_model', true), ''), 'default')
               AND NOT EXISTS (SELECT 1 FROM agent_memory.embedding_models m
                                WHERE m.name = NEW.embedding_model AND m.folder IS NOT NULL)) THEN
            NEW.embedding_model := coalesce(nullif(current_setting('agent_memory.text_model', true), ''), 'all-MiniLM-L6-v2');
        END IF;
        NEW.emb := agent_memory.memory_embed(NEW.content, NEW.embedding_model);
    END IF;
    IF TG_OP = 'INSERT' OR NEW.emb OPERATOR(@vs@.<>) OLD.emb
       OR NEW.embedding_model IS DISTINCT FROM OLD.embedding_model THEN
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

-- (0.6.0) Who declared a predicate that was new: the user whose reconcile (cardinality => ...)
-- added it. Each role sees only the declarations of the user its session works for, as with
-- memories. The erasure of a user drops the predicates only that user declared and no remaining
-- memory uses, so a user's words do not outlive the user in the shared registry.
CREATE TABLE agent_memory.predicate_declarations (
    user_id     text        NOT NULL CHECK (user_id <> ''),
    predicate   text        NOT NULL REFERENCES agent_memory.predicates (predicate) ON UPDATE CASCADE ON DELETE CASCADE,
    declared_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT predicate_declarations_pkey PRIMARY KEY (user_id, predicate)
);
CREATE INDEX predicate_declarations_predicate ON agent_memory.predicate_declarations (predicate);
COMMENT ON TABLE agent_memory.predicate_declarations IS
    'The user whose reconcile added a predicate to agent_memory.predicates; the erasure of the user drops the predicates only it declared and no memory uses.';

SELECT pg_catalog.pg_extension_config_dump('agent_memory.predicate_declarations', '');

-- The position (from 1) of the first text that timestamptz does not read, NULL when it reads them
-- all: reconcile checks every fact's times before it decides (one subtransaction for a batch
-- whose times are all good).
CREATE FUNCTION agent_memory.first_bad_time(texts text[]) RETURNS integer
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    t timestamptz;
BEGIN
    BEGIN
        PERFORM texts::timestamptz[];
        RETURN NULL;
    EXCEPTION WHEN invalid_datetime_format OR datetime_field_overflow OR invalid_time_zone_displacement_value
                   OR invalid_parameter_value OR feature_not_supported THEN
        NULL;
    END;
    FOR i IN 1..coalesce(pg_catalog.array_length(texts, 1), 0) LOOP
        BEGIN
            t := texts[i]::timestamptz;
        EXCEPTION WHEN invalid_datetime_format OR datetime_field_overflow OR invalid_time_zone_displacement_value
                       OR invalid_parameter_value OR feature_not_supported THEN
            RETURN i;
        END;
    END LOOP;
    RETURN NULL;
END
$body$;
COMMENT ON FUNCTION agent_memory.first_bad_time(text[]) IS 'The position of the first text that is not a timestamptz (reconcile''s check of the facts'' times).';

-- When forgetting or consolidation last succeeded (memory_stats shows it to roles that cannot
-- read agent_memory.runs).
CREATE OR REPLACE FUNCTION agent_memory.last_success(job text) RETURNS timestamptz
LANGUAGE sql STABLE SECURITY DEFINER PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT max(r.finished_at) FROM agent_memory.runs r WHERE r.job = last_success.job AND r.status = 'succeeded'
$$;
REVOKE ALL ON FUNCTION agent_memory.last_success(text) FROM PUBLIC;
COMMENT ON FUNCTION agent_memory.last_success(text) IS 'When a job (forget, consolidate) last succeeded.';

-- Per-user counts: what is live, what is protected, archived, kept as evidence, and retired by reason.
-- (0.6.0) security_invoker: the rows of memories are read with the caller's rights, so a role
-- without maintenance rights sees only the user its session works for, as everywhere else.
CREATE OR REPLACE VIEW agent_memory.memory_stats WITH (security_invoker = true) AS
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
       agent_memory.last_success('forget')                               AS last_forget,
       agent_memory.last_success('consolidate')                          AS last_consolidate
  FROM agent_memory.memories m
 GROUP BY m.user_id;
COMMENT ON VIEW agent_memory.memory_stats IS 'Per user: active, protected, archived, evidence and retired memories, the retired ones by reason, and when forgetting and consolidation last succeeded (agent_memory.last_runs has the runs). Each role sees the users it may see.';

-- The secrets: the receipt key joins the lock salt, and no application role reads either.
ALTER TABLE agent_memory.lock_salt ADD COLUMN receipt_key bytea NOT NULL
    DEFAULT pg_catalog.decode(pg_catalog.md5(pg_catalog.gen_random_uuid()::text)
                              || pg_catalog.md5(pg_catalog.gen_random_uuid()::text), 'hex');

COMMENT ON TABLE agent_memory.lock_salt IS 'The extension''s secrets (one row): the seed of its advisory lock keys, and the key of the erasure receipts'' user hashes. Readable by the extension owner only.';
REVOKE ALL ON agent_memory.lock_salt FROM PUBLIC;

-- HMAC-SHA256 (RFC 2104) of a message under a key, hex-encoded.
CREATE FUNCTION agent_memory.hmac_sha256(key bytea, message bytea) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    k  bytea := key;
    ki bytea;
    ko bytea;
BEGIN
    IF pg_catalog.length(k) > 64 THEN
        k := pg_catalog.sha256(k);
    END IF;
    k := k || pg_catalog.decode(pg_catalog.repeat('00', 64 - pg_catalog.length(k)), 'hex');
    ki := k;
    ko := k;
    FOR i IN 0..63 LOOP
        ki := pg_catalog.set_byte(ki, i, pg_catalog.get_byte(k, i) # 54);   -- 0x36
        ko := pg_catalog.set_byte(ko, i, pg_catalog.get_byte(k, i) # 92);   -- 0x5c
    END LOOP;
    RETURN pg_catalog.encode(pg_catalog.sha256(ko || pg_catalog.sha256(ki || message)), 'hex');
END
$body$;
REVOKE ALL ON FUNCTION agent_memory.hmac_sha256(bytea, bytea) FROM PUBLIC;
COMMENT ON FUNCTION agent_memory.hmac_sha256(bytea, bytea) IS 'HMAC-SHA256 of a message under a key, hex-encoded.';

-- The user hash of an erasure receipt: a keyed hash (HMAC-SHA256 under the database's receipt
-- key) of the user id, so that a receipt cannot be matched to a guessed id without the key. An
-- admin checks whether a user was erased with
-- SELECT * FROM agent_memory.erasures WHERE user_hash = agent_memory.erasure_hash('user-07').
CREATE FUNCTION agent_memory.erasure_hash(user_id text) RETURNS text
LANGUAGE sql STABLE STRICT SECURITY DEFINER PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT agent_memory.hmac_sha256(s.receipt_key, pg_catalog.convert_to(erasure_hash.user_id, 'UTF8')) FROM agent_memory.lock_salt s
$$;
REVOKE ALL ON FUNCTION agent_memory.erasure_hash(text) FROM PUBLIC;
COMMENT ON FUNCTION agent_memory.erasure_hash(text) IS
    'The user hash an erasure receipt of this user carries (HMAC-SHA256 of the id under the database''s secret receipt key).';

-- The locks an erasure takes, until the end of its transaction: the user's (reconciliation and
-- recorded turns wait), the user's tasks', and the user's erasure lock, which every rebuild of the
-- user's derived data (packs) holds shared while it runs: an erasure waits for a rebuild in
-- flight and then deletes what it wrote, and a rebuild that starts later waits for the erasure
-- and then finds nothing to pack.
CREATE FUNCTION agent_memory.erasure_lock(user_id text) RETURNS void
LANGUAGE sql VOLATILE STRICT SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended(l.prefix || erasure_lock.user_id, s.salt))
      FROM agent_memory.lock_salt s,
           (VALUES (1, 'agent_memory.user:'), (2, 'agent_memory.tasks:'), (3, 'agent_memory.erase:')) AS l(n, prefix)
     ORDER BY l.n
$$;
REVOKE ALL ON FUNCTION agent_memory.erasure_lock(text) FROM PUBLIC;
COMMENT ON FUNCTION agent_memory.erasure_lock(text) IS 'Takes the locks an erasure of the user holds (memory_erase calls it).';

COMMENT ON TABLE agent_memory.erasures IS
    'One receipt per erasure (memory_erase): a keyed hash of the user id (agent_memory.erasure_hash; receipts before 0.6.0 hold its plain SHA-256), when, by whom, and how many rows were deleted per table. Never the content.';

-- The embedding cache (0.6.0): what the server embedded, by model and text, so the same text
-- under the same model is embedded once, across calls and users. It holds no text: a text is
-- keyed by SHA-256 of the database's secret receipt key followed by the text, so a guessed text
-- cannot be tested against it without the key. Bounded by agent_memory.embed_cache_size (the
-- worker's pack pass drops the oldest entries past it); no application role reads or writes it
-- (the library does, with the extension owner's rights). Not dumped: a restored database fills
-- it again.
CREATE TABLE agent_memory.embedding_cache (
    model      text        NOT NULL,
    text_hash  bytea       NOT NULL,
    emb        vector      NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT embedding_cache_pkey PRIMARY KEY (model, text_hash)
);
CREATE INDEX embedding_cache_created ON agent_memory.embedding_cache (created_at);
COMMENT ON TABLE agent_memory.embedding_cache IS
    'Embeddings the server computed, by model and a keyed hash of the text (no text); bounded by agent_memory.embed_cache_size. See memory_embed_stats().';
REVOKE ALL ON agent_memory.embedding_cache FROM PUBLIC;

-- An erasure's part of the cache: the entries of the user's memories' and turns' texts, under
-- every model, go (entries of the user's questions were never tied to the user: they hold neither
-- the text nor the user).
CREATE FUNCTION agent_memory.uncache_user(user_id text) RETURNS bigint
LANGUAGE sql VOLATILE STRICT SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    WITH k AS (SELECT s.receipt_key AS key FROM agent_memory.lock_salt s),
         texts AS (SELECT m.content AS t FROM agent_memory.memories m WHERE m.user_id = uncache_user.user_id
                   UNION
                   SELECT t.content FROM agent_memory.turns t WHERE t.user_id = uncache_user.user_id),
         d AS (DELETE FROM agent_memory.embedding_cache c USING texts, k
                WHERE c.text_hash = pg_catalog.sha256(k.key || pg_catalog.convert_to(texts.t, 'UTF8'))
               RETURNING 1)
    SELECT count(*) FROM d
$$;
REVOKE ALL ON FUNCTION agent_memory.uncache_user(text) FROM PUBLIC;
COMMENT ON FUNCTION agent_memory.uncache_user(text) IS 'Drops the embedding cache''s entries of a user''s memories and turns (memory_erase calls it).';

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
    -- remaining memory uses them and none is their alias.
    WITH d AS (DELETE FROM agent_memory.predicate_declarations x WHERE x.user_id = memory_erase.user_id RETURNING x.predicate)
    SELECT pg_catalog.array_agg(d.predicate) INTO declared FROM d;
    IF declared IS NOT NULL THEN
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
COMMENT ON FUNCTION agent_memory.memory_erase(text) IS
    'Deletes every memory, turn and task of a user, the user''s packs and the predicates only the user declared, in one transaction, and returns the receipt kept in agent_memory.erasures (a keyed hash of the id, no content). Dead rows stay on disk until VACUUM; WAL and backups keep them until they expire.';

-- The worker reads the secrets through the library, and registers models through the trigger.
REVOKE SELECT ON agent_memory.lock_salt FROM agent_memory_worker;
REVOKE INSERT ON agent_memory.embedding_models FROM agent_memory_worker;
GRANT EXECUTE ON FUNCTION agent_memory.register_model(text, integer) TO agent_memory_worker;
-- The pack pass trims the embedding cache.
GRANT SELECT, DELETE ON agent_memory.embedding_cache TO agent_memory_worker;

-- Roles bound to their users.
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
   the row-level policies let nothing through. */
CREATE FUNCTION agent_memory.session_user_id() RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    WITH mine AS (
        SELECT b.user_pattern FROM agent_memory.role_users b JOIN pg_catalog.pg_roles r ON r.rolname = b.role_name
         WHERE pg_catalog.pg_has_role(r.oid, 'MEMBER'))
    SELECT s.u FROM (SELECT NULLIF(pg_catalog.current_setting('agent_memory.user_id', true), '') AS u) s
     WHERE NOT EXISTS (SELECT 1 FROM mine) OR EXISTS (SELECT 1 FROM mine WHERE s.u LIKE mine.user_pattern)
$$;
GRANT EXECUTE ON FUNCTION agent_memory.session_user_id() TO PUBLIC;
-- The policies' condition reads the bindings as the role that queries, the workers included.
GRANT SELECT ON agent_memory.role_users TO agent_memory_worker;
COMMENT ON FUNCTION agent_memory.session_user_id() IS
    'The user the session works for (agent_memory.user_id) if the current role may name it (agent_memory.role_users), else NULL.';

-- The policies apply the bindings; predicate_declarations is a user's, as memories are.
DO $do$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['memories', 'turns', 'tasks'] LOOP
        EXECUTE format('ALTER POLICY tenant ON agent_memory.%I
                            USING (user_id OPERATOR(pg_catalog.=) (SELECT agent_memory.session_user_id()))
                            WITH CHECK (user_id OPERATOR(pg_catalog.=) (SELECT agent_memory.session_user_id()))', t);
    END LOOP;
    FOREACH t IN ARRAY ARRAY['predicate_declarations'] LOOP
        EXECUTE format('ALTER TABLE agent_memory.%I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE agent_memory.%I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY tenant ON agent_memory.%I
                            USING (user_id OPERATOR(pg_catalog.=) (SELECT agent_memory.session_user_id()))
                            WITH CHECK (user_id OPERATOR(pg_catalog.=) (SELECT agent_memory.session_user_id()))', t);
        EXECUTE format('CREATE POLICY maintenance ON agent_memory.%I TO agent_memory_admin, agent_memory_worker
                            USING (true) WITH CHECK (true)', t);
    END LOOP;
END
$do$;

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
    RETURN format('%s may now name only users like %L (and those of its other patterns)', role, user_pattern);
END
$body$;
COMMENT ON FUNCTION agent_memory.bind_role(regrole, text) IS
    'Binds a role to the users matching a LIKE pattern: it and its members may then name only users matching one of its patterns.';

CREATE FUNCTION agent_memory.unbind_role(role regrole, user_pattern text DEFAULT NULL) RETURNS bigint
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    WITH d AS (DELETE FROM agent_memory.role_users b
                WHERE b.role_name = (SELECT r.rolname FROM pg_catalog.pg_roles r WHERE r.oid = unbind_role.role)
                  AND (unbind_role.user_pattern IS NULL OR b.user_pattern = unbind_role.user_pattern)
               RETURNING 1)
    SELECT count(*) FROM d
$$;
COMMENT ON FUNCTION agent_memory.unbind_role(regrole, text) IS
    'Removes a role''s binding to a pattern (every binding of the role when no pattern is given); returns how many went. A role bound to nothing may name any user.';

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
                       'memory_embed', 'memory_embed_stats'];
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


-- The library's new functions: the embedding of text and the cache's figures.
CREATE FUNCTION "memory_embed"(
	"text" TEXT, /* Option < & str > */
	"model" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS vector /* Option < VectorResult > */
STABLE PARALLEL RESTRICTED 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'memory_embed_wrapper';
CREATE FUNCTION "memory_embed"(
	"texts" TEXT[], /* :: std :: option :: Option < Vec < Option < String > > > */
	"model" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS TABLE (
	"ordinal" INT,  /* i32 */
	"embedding" vector  /* Option < VectorResult > */
)
STABLE PARALLEL RESTRICTED 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'memory_embed_batch_wrapper';
CREATE FUNCTION "memory_embed_stats"() RETURNS TABLE (
	"entries" bigint,  /* i64 */
	"hits" bigint,  /* Option < i64 > */
	"misses" bigint  /* Option < i64 > */
)
STRICT VOLATILE PARALLEL SAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'memory_embed_stats_wrapper';
REVOKE ALL ON FUNCTION agent_memory.memory_embed(text, text), agent_memory.memory_embed(text[], text), agent_memory.memory_embed_stats() FROM PUBLIC;
-- memory_reconcile with a vector takes none (emb DEFAULT NULL): the server embeds the content.
CREATE OR REPLACE FUNCTION "memory_reconcile"(
	"user_id" TEXT, /* Option < & str > */
	"subject" TEXT, /* Option < String > */
	"predicate" TEXT, /* Option < String > */
	"object" TEXT, /* Option < String > */
	"content" TEXT, /* Option < String > */
	"emb" vector DEFAULT NULL, /* Option < Vector > */
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

-- The functions added here are no one's until granted (grant_access below, or the grants above).
REVOKE ALL ON FUNCTION agent_memory.register_model(text, integer), agent_memory.last_success(text),
    agent_memory.hmac_sha256(bytea, bytea), agent_memory.erasure_hash(text), agent_memory.erasure_lock(text),
    agent_memory.first_bad_time(text[]), agent_memory.bind_role(regrole, text), agent_memory.unbind_role(regrole, text),
    agent_memory.uncache_user(text)
    FROM PUBLIC;

-- The roles granted access in 0.5.0 lose what writers may no longer do (change predicates,
-- register models by hand, read the secrets) and get what their level now includes.
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
        EXECUTE pg_catalog.format('REVOKE ALL ON agent_memory.lock_salt FROM %s', r.role);
        IF r.level <> 'admin' THEN
            EXECUTE pg_catalog.format('REVOKE UPDATE ON agent_memory.predicates FROM %s', r.role);
            EXECUTE pg_catalog.format('REVOKE INSERT ON agent_memory.embedding_models FROM %s', r.role);
        END IF;
        PERFORM agent_memory.grant_access(r.role, r.level);
    END LOOP;
END
$do$;

-- Text in: the model the server embeds text with. A database that already wrote memories under
-- the name all-MiniLM-L6-v2 (vectors made outside with the same model) keeps them, and its row
-- gains the folder; one whose row says another dimension keeps its row as it was (text calls
-- then need model => another model with a folder).
ALTER TABLE agent_memory.embedding_models
    ADD COLUMN folder text CHECK (folder <> ''),
    ADD COLUMN pooling text NOT NULL DEFAULT 'mean' CHECK (pooling IN ('mean', 'cls')),
    ADD COLUMN max_tokens integer NOT NULL DEFAULT 256 CHECK (max_tokens BETWEEN 2 AND 8192),
    ADD COLUMN seeded boolean NOT NULL DEFAULT false;
COMMENT ON TABLE agent_memory.embedding_models IS 'Embedding models in use and their dimension; a write or query of another dimension is an error. A model with a folder is one the server embeds text with (memory_embed, the text forms of recall, context and reconcile).';
COMMENT ON COLUMN agent_memory.embedding_models.folder IS 'The folder of the model''s files (config.json, tokenizer.json, model.safetensors), relative to agent_memory.model_path unless absolute; NULL for a model whose vectors come from outside.';
COMMENT ON COLUMN agent_memory.embedding_models.pooling IS 'How token vectors become the text''s vector: mean (over the real tokens) or cls.';
COMMENT ON COLUMN agent_memory.embedding_models.max_tokens IS 'Word pieces the model reads per text ([CLS] and [SEP] included); a longer text is cut.';
INSERT INTO agent_memory.embedding_models (name, dimensions, folder, pooling, max_tokens, seeded)
VALUES ('all-MiniLM-L6-v2', 384, 'all-MiniLM-L6-v2', 'mean', 256, true)
ON CONFLICT (name) DO UPDATE SET folder = excluded.folder, seeded = true
 WHERE agent_memory.embedding_models.dimensions = 384 AND agent_memory.embedding_models.folder IS NULL;
SELECT pg_catalog.pg_extension_config_dump('agent_memory.embedding_models', 'WHERE NOT seeded');
