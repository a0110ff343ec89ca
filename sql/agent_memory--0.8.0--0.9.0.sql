-- agent_memory 0.8.0 -> 0.9.0: time in recall and context. memory_recall, memory_context and
-- memory_context_text take three more arguments, all NULL by default (so every call written for
-- 0.8.0 answers as before):
--   * since, until: only memories said (created) at or after since and before until;
--   * as_of: the facts that held at that moment: a version superseded or deleted later is
--     recalled as it was; one said later, or whose valid_until or expiry had passed, is not.
-- Run by ALTER EXTENSION agent_memory UPDATE; every memory is kept, and the roles that could call
-- the functions before can call them after. tests/upgrade.sh checks that a database updated from
-- 0.1.0 (through each version) has the same catalog as a fresh install.
\echo Use "ALTER EXTENSION agent_memory UPDATE" to load this file. \quit

-- The functions replaced, their grants (function name and role, as JSON) kept aside in a setting
-- of this transaction.
DO $do$
DECLARE
    f regprocedure;
BEGIN
    PERFORM pg_catalog.set_config('agent_memory_upgrade.grants', coalesce((
        SELECT pg_catalog.jsonb_agg(DISTINCT pg_catalog.jsonb_build_object('fn', p.proname, 'role', a.grantee::regrole::text))::text
        FROM pg_catalog.pg_proc p
        CROSS JOIN LATERAL pg_catalog.aclexplode(p.proacl) a
        WHERE p.pronamespace OPERATOR(pg_catalog.=) 'agent_memory'::regnamespace
          AND p.proname IN ('memory_recall', 'memory_context', 'memory_context_text')
          AND a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
          AND a.grantee OPERATOR(pg_catalog.<>) 0
          AND a.grantee OPERATOR(pg_catalog.<>) p.proowner), '[]'), true);
    FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
             WHERE p.pronamespace OPERATOR(pg_catalog.=) 'agent_memory'::regnamespace
               AND p.proname IN ('memory_recall', 'memory_context', 'memory_context_text')
    LOOP
        EXECUTE pg_catalog.format('DROP FUNCTION %s', f);
    END LOOP;
END
$do$;

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
	"touch" bool DEFAULT true, /* Option < bool > */
	"since" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"until" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"as_of" timestamp with time zone DEFAULT NULL /* Option < TimestampWithTimeZone > */
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
AS 'MODULE_PATHNAME', 'context_by_halfvec_wrapper';

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
	"touch" bool DEFAULT true, /* Option < bool > */
	"since" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"until" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"as_of" timestamp with time zone DEFAULT NULL /* Option < TimestampWithTimeZone > */
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
AS 'MODULE_PATHNAME', 'context_by_text_wrapper';

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
	"touch" bool DEFAULT true, /* Option < bool > */
	"since" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"until" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"as_of" timestamp with time zone DEFAULT NULL /* Option < TimestampWithTimeZone > */
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
AS 'MODULE_PATHNAME', 'context_by_vector_wrapper';

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
	"touch" bool DEFAULT true, /* Option < bool > */
	"since" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"until" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"as_of" timestamp with time zone DEFAULT NULL /* Option < TimestampWithTimeZone > */
) RETURNS TEXT /* String */
VOLATILE PARALLEL UNSAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'context_text_by_halfvec_wrapper';

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
	"touch" bool DEFAULT true, /* Option < bool > */
	"since" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"until" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"as_of" timestamp with time zone DEFAULT NULL /* Option < TimestampWithTimeZone > */
) RETURNS TEXT /* String */
VOLATILE PARALLEL UNSAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'context_text_by_text_wrapper';

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
	"touch" bool DEFAULT true, /* Option < bool > */
	"since" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"until" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"as_of" timestamp with time zone DEFAULT NULL /* Option < TimestampWithTimeZone > */
) RETURNS TEXT /* String */
VOLATILE PARALLEL UNSAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'context_text_by_vector_wrapper';

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
	"untasked" bool DEFAULT true, /* Option < bool > */
	"since" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"until" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"as_of" timestamp with time zone DEFAULT NULL /* Option < TimestampWithTimeZone > */
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
AS 'MODULE_PATHNAME', 'recall_by_halfvec_wrapper';

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
	"untasked" bool DEFAULT true, /* Option < bool > */
	"since" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"until" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"as_of" timestamp with time zone DEFAULT NULL /* Option < TimestampWithTimeZone > */
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
AS 'MODULE_PATHNAME', 'recall_by_text_wrapper';

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
	"untasked" bool DEFAULT true, /* Option < bool > */
	"since" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"until" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"as_of" timestamp with time zone DEFAULT NULL /* Option < TimestampWithTimeZone > */
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
AS 'MODULE_PATHNAME', 'recall_by_vector_wrapper';

-- Nothing to PUBLIC (sql/access.sql); each role granted a replaced function gets the new
-- overloads of that function, and of no other.
DO $do$
DECLARE
    f regprocedure;
    grantee text;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
             WHERE p.pronamespace OPERATOR(pg_catalog.=) 'agent_memory'::regnamespace
               AND p.proname IN ('memory_recall', 'memory_context', 'memory_context_text')
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
    END LOOP;
    FOR f, grantee IN
        SELECT p.oid::regprocedure, g.role
          FROM pg_catalog.jsonb_to_recordset(pg_catalog.current_setting('agent_memory_upgrade.grants', true)::jsonb) AS g(fn name, role text)
          JOIN pg_catalog.pg_proc p ON p.proname OPERATOR(pg_catalog.=) g.fn
         WHERE p.pronamespace OPERATOR(pg_catalog.=) 'agent_memory'::regnamespace
    LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s', f, grantee);
    END LOOP;
END
$do$;
