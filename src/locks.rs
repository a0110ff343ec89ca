//! The extension's advisory locks: one per user (reconcile, recorded turns and erasure of a user
//! run one at a time), one per job (two passes of forgetting, or of consolidation, never
//! overlap), and one per user's packs of a model (a rebuild and a delete never miss each other).
//!
//! A key is `hashtextextended(name, salt)` with a secret salt drawn when the extension is
//! created (`agent_memory.lock_salt`), which only the roles that use the extension may read: a
//! role with only CONNECT cannot compute a key, so it cannot hold one to stall forgetting or a
//! user's writes.

/// The key of a name, for SQL: `$1` is the name.
macro_rules! key {
    ($prefix:literal) => {
        concat!("pg_catalog.hashtextextended('", $prefix, "' || $1, (SELECT s.salt FROM agent_memory.lock_salt s))")
    };
}

/// The lock of a user's packs of one model (`$1` is `user/model`), until the end of the
/// transaction: a rebuild takes it, a delete that a pack may concern takes it shared (the
/// trigger in sql/schema.sql and forgetting's purge spell the same key in SQL).
pub const LOCK_PACK: &str = concat!("SELECT pg_catalog.pg_advisory_xact_lock(", key!("agent_memory.pack:"), ")");
/// Waits for the user's lock until the end of the transaction.
pub const LOCK_USER: &str = concat!("SELECT pg_catalog.pg_advisory_xact_lock(", key!("agent_memory.user:"), ")");
/// Takes the job's lock until the end of the transaction, or returns false.
pub const TRY_LOCK_JOB_XACT: &str = concat!("SELECT pg_catalog.pg_try_advisory_xact_lock(", key!("agent_memory.job:"), ")");
/// Takes the job's lock for the session, or returns false.
pub const TRY_LOCK_JOB_SESSION: &str = concat!("SELECT pg_catalog.pg_try_advisory_lock(", key!("agent_memory.job:"), ")");
/// Releases the job's session lock.
pub const UNLOCK_JOB_SESSION: &str = concat!("SELECT pg_catalog.pg_advisory_unlock(", key!("agent_memory.job:"), ")");
