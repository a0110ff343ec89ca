//! Prepared statements kept for the life of the backend.
//!
//! The extension's SQL is fixed text, so each statement is parsed and planned once per backend
//! (per argument types) and kept with `SPI_keepplan`; later calls only bind and execute. The
//! plans are PostgreSQL cached plans, so schema changes re-plan them as usual.
//!
//! Statements come in two kinds, [`read`] and [`write`], and neither assigns a transaction id
//! up front (pgrx's `SpiClient::update` does): a recall or a dry run works on a hot standby and
//! in a read-only transaction, and a read-only call costs the server no xid; a write gets its xid
//! when it changes a row. Both execute with SPI's `read_only = false`, so every statement takes
//! a fresh snapshot: a read after the call has waited for a lock (reconcile waits for the user's)
//! sees what the sessions before it committed, and every read sees this transaction's writes.

use std::cell::RefCell;
use std::collections::HashMap;

use pgrx::datum::DatumWithOid;
use pgrx::spi::{OwnedPreparedStatement, SpiClient, SpiResult, SpiTupleTable};
use pgrx::PgOid;

/// A statement's text (its address), whether its plan takes a fresh snapshot, and its argument types.
type Key = (usize, bool, Vec<u32>);

thread_local! {
    static PLANS: RefCell<HashMap<Key, OwnedPreparedStatement>> = RefCell::new(HashMap::new());
}

fn execute<'c>(
    client: &mut SpiClient<'c>,
    sql: &'static str,
    args: &[DatumWithOid<'_>],
    fresh_snapshot: bool,
) -> SpiResult<SpiTupleTable<'c>> {
    let key: Key = (sql.as_ptr() as usize, fresh_snapshot, args.iter().map(|a| a.oid().to_u32()).collect());
    // Take the plan out while it runs, so a nested call (a trigger) cannot see it borrowed.
    let plan = PLANS.with(|p| p.borrow_mut().remove(&key));
    let plan = match plan {
        Some(p) => p,
        None => {
            let types: Vec<PgOid> = args.iter().map(|a| PgOid::from(a.oid())).collect();
            // Prepared "mutating", a plan executes with read_only = false (a fresh snapshot per
            // statement); a read-only one would reuse the calling statement's snapshot while the
            // transaction has no xid, and miss what was committed while the call waited.
            if fresh_snapshot {
                client.prepare_mut(sql, &types)?.keep()
            } else {
                client.prepare(sql, &types)?.keep()
            }
        }
    };
    // `select` executes the plan as it was prepared and, unlike `update`, does not assign a
    // transaction id up front: a write that changes nothing costs no xid either.
    let result = client.select(&plan, None, args);
    PLANS.with(|p| p.borrow_mut().insert(key, plan));
    result
}

/// Runs a statement that only reads (no row changes, no row locks, no `nextval`) through a kept
/// plan. `sql` must be a `'static` string: its address is part of the cache key.
pub fn read<'c>(client: &mut SpiClient<'c>, sql: &'static str, args: &[DatumWithOid<'_>]) -> SpiResult<SpiTupleTable<'c>> {
    execute(client, sql, args, true)
}

/// Runs a statement that only reads, through a kept plan, in the calling statement's snapshot
/// (a read-only plan: no new snapshot, no command counter increment), as a `STABLE` SQL
/// function's query would.
pub fn read_in_snapshot<'c>(client: &mut SpiClient<'c>, sql: &'static str, args: &[DatumWithOid<'_>]) -> SpiResult<SpiTupleTable<'c>> {
    execute(client, sql, args, false)
}

/// Runs a statement that changes rows or locks them through a kept plan.
pub fn write<'c>(client: &mut SpiClient<'c>, sql: &'static str, args: &[DatumWithOid<'_>]) -> SpiResult<SpiTupleTable<'c>> {
    execute(client, sql, args, true)
}
