//! Tenancy: `agent_memory.session_user_id()`, the user the session works for, which every
//! tenant policy compares each row's `user_id` with (sql/access.sql).
//!
//! The policies call it directly (`user_id = agent_memory.session_user_id()`): a policy with a
//! subquery cannot be distributed (Citus refuses it), and without one PostgreSQL may evaluate
//! the function once per row. So its answer is kept for as long as it cannot change: the same
//! role, the same `agent_memory.user_id` and the same snapshot (nothing committed since, no
//! command of this transaction since) give the same bindings and the same answer. A row then
//! costs a comparison, and each statement reads the bindings once, as the subquery did.

use std::cell::RefCell;

use pgrx::prelude::*;

use crate::error::{first_value, spi};

/// The session's user, when the current role may name it: it is bound to no pattern, or the
/// user matches one of the patterns bound to a role it is a member of (`agent_memory.role_users`,
/// as the role sees that table). Every operator and function is qualified: the caller's
/// search_path chooses none.
const MAY_NAME: &str = "\
WITH mine AS (SELECT b.user_pattern FROM agent_memory.role_users b \
                JOIN pg_catalog.pg_roles r ON r.rolname OPERATOR(pg_catalog.=) b.role_name \
               WHERE pg_catalog.pg_has_role(r.oid, 'MEMBER')) \
SELECT NOT EXISTS (SELECT 1 FROM mine) \
    OR EXISTS (SELECT 1 FROM mine WHERE $1::pg_catalog.text OPERATOR(pg_catalog.~~) mine.user_pattern)";

/// What an answer depends on: the role, the setting, the snapshot.
type Key = (pg_sys::Oid, String, (u32, u32, u32, u64));

thread_local! {
    /// The last answer and what it was given for.
    static LAST: RefCell<Option<(Key, bool)>> = const { RefCell::new(None) };
}

/// The user this session works for (`agent_memory.user_id`) if the current role may name it,
/// else NULL: the row-level policies then let no row through.
#[pg_extern(stable, parallel_safe)]
fn session_user_id() -> Option<String> {
    let user = crate::gucs::session_user()?;
    let key = crate::pg::snapshot_key().map(|s| (crate::pg::current_role(), user.clone(), s));
    if let Some(key) = &key {
        if let Some(may) = LAST.with_borrow(|l| l.as_ref().filter(|(k, _)| k == key).map(|(_, m)| *m)) {
            return may.then_some(user);
        }
    }
    let may = Spi::connect_mut(|client| first_value::<bool>(crate::plans::read_in_snapshot(client, MAY_NAME, &[user.as_str().into()])?))
        .map_err(spi("reading the role's bindings (agent_memory.role_users)"))
        .unwrap_or_else(|e| e.raise())
        .unwrap_or(false);
    if let Some(key) = key {
        LAST.with_borrow_mut(|l| *l = Some((key, may)));
    }
    may.then_some(user)
}
