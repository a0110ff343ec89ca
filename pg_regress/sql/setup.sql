-- Installing the extension pulls in pgvector.
CREATE EXTENSION agent_memory CASCADE;
SELECT e.extname, n.nspname AS schema, e.extrelocatable
  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
 WHERE e.extname IN ('vector', 'agent_memory') ORDER BY 1;
-- The contract's columns of agent_memory.memories, with their types.
SELECT attname, format_type(atttypid, atttypmod) AS type, attnotnull
  FROM pg_attribute
 WHERE attrelid = 'agent_memory.memories'::regclass AND attnum > 0 AND NOT attisdropped
 ORDER BY attnum;
-- The functions, with their volatility.
SELECT p.proname, array_to_string((p.proargtypes::oid[]::regtype[])[0:5], ', ') AS first_arguments,
       p.pronargs AS arguments, p.provolatile, p.proparallel
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = 'agent_memory' ORDER BY 1, 2;
-- Every setting, with its default.
SELECT name, boot_val AS default, unit, context FROM pg_settings WHERE name LIKE 'agent_memory.%' ORDER BY 1;
