//! Prepared statements kept for the life of the backend.
//!
//! The extension's SQL is fixed text, so each statement is parsed and planned once per backend
//! (per argument types) and kept with `SPI_keepplan`; later calls only bind and execute. The
//! plans are PostgreSQL cached plans, so schema changes re-plan them as usual.

use std::cell::RefCell;
use std::collections::HashMap;

use pgrx::datum::DatumWithOid;
use pgrx::spi::{OwnedPreparedStatement, SpiClient, SpiResult, SpiTupleTable};
use pgrx::PgOid;

type Key = (usize, Vec<u32>);

thread_local! {
    static PLANS: RefCell<HashMap<Key, OwnedPreparedStatement>> = RefCell::new(HashMap::new());
}

/// Runs `sql` with `args` through a kept plan, preparing it on first use. `sql` must be a
/// `'static` string: its address is part of the cache key.
pub fn run<'c>(client: &mut SpiClient<'c>, sql: &'static str, args: &[DatumWithOid<'_>]) -> SpiResult<SpiTupleTable<'c>> {
    let key: Key = (sql.as_ptr() as usize, args.iter().map(|a| a.oid().to_u32()).collect());
    // Take the plan out while it runs, so a nested call (a trigger) cannot see it borrowed.
    let plan = PLANS.with(|p| p.borrow_mut().remove(&key));
    let plan = match plan {
        Some(p) => p,
        None => {
            let types: Vec<PgOid> = args.iter().map(|a| PgOid::from(a.oid())).collect();
            client.prepare_mut(sql, &types)?.keep()
        }
    };
    let result = client.update(&plan, None, args);
    PLANS.with(|p| p.borrow_mut().insert(key, plan));
    result
}
