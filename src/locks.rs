//! The extension's advisory locks: one per user (reconcile, recorded turns and erasure of a user
//! run one at a time), one per job (two passes of forgetting, or of consolidation, never
//! overlap), one per user's packs of a model (a rebuild and a delete never miss each other), and
//! one per user's erasure (a rebuild of the user's packs holds it shared, the erasure alone).
//!
//! A key is `hashtextextended(name, salt)` with a secret salt drawn when the extension is
//! created (`agent_memory.lock_salt`), which no application role may read: the statements that
//! take a lock run with the extension owner's rights ([`crate::pg::with_rights_of`]), and a
//! lock of a user is taken only for a user the role may name. A role therefore cannot compute a
//! key to hold it and stall forgetting or another tenant's writes.

use pgrx::pg_sys;
use pgrx::spi::{SpiClient, SpiTupleTable};

use crate::error::{first_value, spi, MemoryError, Result};

/// The key of a name, for SQL: `$1` is the name.
macro_rules! key {
    ($prefix:literal) => {
        concat!("pg_catalog.hashtextextended('", $prefix, "' || $1, (SELECT s.salt FROM agent_memory.lock_salt s))")
    };
}

/// The lock of a user's packs of one model (`$1` is `user/model`), until the end of the
/// transaction: a rebuild takes it, a delete that a pack may concern takes it shared (the
/// trigger in sql/schema.sql and forgetting's purge spell the same key in SQL).
const LOCK_PACK: &str = concat!("SELECT pg_catalog.pg_advisory_xact_lock(", key!("agent_memory.pack:"), ")");
/// The user's erasure lock, shared, until the end of the transaction: held by every rebuild of
/// the user's derived data; `agent_memory.erasure_lock` takes it alone.
const LOCK_ERASE_SHARED: &str = concat!("SELECT pg_catalog.pg_advisory_xact_lock_shared(", key!("agent_memory.erase:"), ")");
/// The user's erasure lock, shared, until the end of the transaction, or false when an erasure
/// holds it: the worker's embedding pass skips the user's rows then (the erasure drops them).
const TRY_LOCK_ERASE_SHARED: &str = concat!("SELECT pg_catalog.pg_try_advisory_xact_lock_shared(", key!("agent_memory.erase:"), ")");
/// Waits for the user's lock until the end of the transaction.
const LOCK_USER: &str = concat!("SELECT pg_catalog.pg_advisory_xact_lock(", key!("agent_memory.user:"), ")");
/// Takes the job's lock until the end of the transaction, or returns false.
pub const TRY_LOCK_JOB_XACT: &str = concat!("SELECT pg_catalog.pg_try_advisory_xact_lock(", key!("agent_memory.job:"), ")");
/// Takes the job's lock for the session, or returns false.
pub const TRY_LOCK_JOB_SESSION: &str = concat!("SELECT pg_catalog.pg_try_advisory_lock(", key!("agent_memory.job:"), ")");
/// Releases the job's session lock.
pub const UNLOCK_JOB_SESSION: &str = concat!("SELECT pg_catalog.pg_advisory_unlock(", key!("agent_memory.job:"), ")");

const OWNER: &str = "SELECT e.extowner FROM pg_catalog.pg_extension e WHERE e.extname = 'agent_memory'";

/// The role that owns the extension (whose rights `pg::with_rights_of` lends to reads of its
/// secrets and of Citus's shard metadata).
pub fn extension_owner(client: &mut SpiClient<'_>) -> Result<pg_sys::Oid> {
    let owner: Option<pg_sys::Oid> = first_value(crate::plans::read(client, OWNER, &[]).map_err(spi("finding the extension's owner"))?)
        .map_err(spi("finding the extension's owner"))?;
    owner.ok_or_else(|| {
        MemoryError::new(
            pgrx::PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            "the agent_memory extension is not installed in this database",
        )
        .hint("CREATE EXTENSION agent_memory CASCADE;")
    })
}

/// Runs a statement that reads the extension's secrets (a lock statement above, or one that
/// spells a key in SQL) with the rights of the extension's owner.
pub fn as_owner<'c>(client: &mut SpiClient<'c>, sql: &'static str, args: &[pgrx::datum::DatumWithOid<'_>]) -> Result<SpiTupleTable<'c>> {
    let owner = extension_owner(client)?;
    crate::pg::with_rights_of(owner, || crate::plans::read(client, sql, args)).map_err(spi("taking a lock"))
}

/// Waits for `user`'s lock until the end of the transaction, after checking that the current
/// role may name the user (42501 otherwise): a role holds only the locks of its own users.
///
/// The locks are this node's: on a Citus node that does not hold the user, it fails (0F000)
/// instead, so that every call that writes a user's rows runs where the user's rows and locks
/// are, and it holds the user's shards there for the transaction (`placement::hold_user`).
pub fn user(client: &mut SpiClient<'_>, user: &str) -> Result<()> {
    crate::placement::hold_user(client, user)?;
    if !crate::recall::sees_user(client, user)? {
        return Err(crate::recall::not_your_user(user));
    }
    as_owner(client, LOCK_USER, &[user.into()])?;
    Ok(())
}

/// Takes `user`'s erasure lock shared until the end of the transaction, unless an erasure of the
/// user holds or waits for it: then returns false at once.
pub fn try_erasure_shared(client: &mut SpiClient<'_>, user: &str) -> Result<bool> {
    let free: Option<bool> =
        first_value(as_owner(client, TRY_LOCK_ERASE_SHARED, &[user.into()])?).map_err(spi("taking an erasure lock"))?;
    Ok(free == Some(true))
}

/// Waits for the locks a rebuild of `user`'s packs of `model` holds until the end of the
/// transaction: the user's erasure lock (shared) and the packs' lock.
pub fn pack(client: &mut SpiClient<'_>, user: &str, model: &str) -> Result<()> {
    as_owner(client, LOCK_ERASE_SHARED, &[user.into()])?;
    as_owner(client, LOCK_PACK, &[format!("{user}/{model}").into()])?;
    Ok(())
}
