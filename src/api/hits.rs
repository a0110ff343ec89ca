//! Recall's hits without a write per recall: `memory_fold_hits()` and `memory_hit_stats()`.
//!
//! In a database whose background worker runs (the library preloaded, the database in
//! `agent_memory.worker_databases`), `memory_recall` and `memory_context` record the memories
//! they return in shared memory (`crate::share`) instead of updating their rows: a recall takes
//! no transaction id and writes no WAL, and concurrent recalls of one user take no row locks.
//! The worker folds the hits into `last_hit_at` (the latest recall's time) and `hit_count` every
//! `agent_memory.hit_fold_interval`, before each forgetting pass, and when it stops;
//! `memory_forget()` and `memory_fold_hits()` fold them at once. Elsewhere (no worker, a
//! standby, `agent_memory.hit_buffer = 0`) recall updates the rows itself as before, or on a
//! standby not at all.
//!
//! What a crash loses: the hits not folded yet (at most one interval's), never a memory. A fold
//! whose transaction rolls back puts its hits back.

use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::{register_xact_callback, PgXactCallbackEvent};

use agent_memory_core::hits::Hit;

use crate::error::{spi, OrRaise, Result};
use crate::placement::TableSet;

/// Hits folded per statement.
const FOLD_BATCH: usize = 1000;

/// Applies hits to their memories: the rows are locked in id order first (as recall's own touch
/// and reconcile lock them), `last_hit_at` becomes the latest recall's time unless it is later
/// already, and `hit_count` grows by the recalls; returns the ids updated. A memory that is gone
/// (erased, purged) is passed over, and so is one another transaction holds (a tenant's own
/// lock on its memory): the fold never waits on a tenant, whose hits wait for the next fold.
const FOLD: &str = "\
WITH h AS (SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS h(id, n, at)), \
     locked AS (SELECT m.id FROM agent_memory.memories m WHERE m.id = ANY ($1::bigint[]) ORDER BY m.id FOR NO KEY UPDATE SKIP LOCKED) \
UPDATE agent_memory.memories m \
   SET last_hit_at = GREATEST(m.last_hit_at, timestamptz '2000-01-01 00:00:00+00' + h.at * interval '1 microsecond'), \
       hit_count = LEAST(m.hit_count::bigint + h.n, 2147483647)::integer \
  FROM h JOIN locked ON locked.id = h.id WHERE m.id = h.id RETURNING m.id";

/// Of the memories a fold did not update, those that are still there (held by another
/// transaction): their hits go back for the next fold.
const STILL_THERE: &str = "SELECT m.id FROM agent_memory.memories m WHERE m.id = ANY ($1::bigint[])";

/// Folds `hits` in this transaction, each into the table of memories it names among `sets`
/// (the tables this server's passes run on); should it roll back, they are put back in shared
/// memory. Returns how many memories were updated.
fn apply(client: &mut SpiClient<'_>, sets: &[TableSet], hits: Vec<Hit>) -> Result<u64> {
    if hits.is_empty() {
        return Ok(0);
    }
    // Hits of a table of memories that was dropped (and perhaps created again) are passed over.
    let mut tables = Vec::with_capacity(sets.len());
    for set in sets {
        match set.memories_table() {
            Ok(oid) => tables.push((oid.to_u32(), set)),
            // The extension is gone from this database: so are the memories the hits were of.
            Err(_) => continue,
        }
    }
    let (hits, gone): (Vec<Hit>, Vec<Hit>) = hits.into_iter().partition(|h| tables.iter().any(|(oid, _)| *oid == h.relation));
    let passed_over: u64 = gone.iter().map(|h| h.count as u64).sum();
    // Registered first: an error below rolls the transaction back, and the hits go back.
    let kept = hits.clone();
    register_xact_callback(PgXactCallbackEvent::Abort, move || crate::share::put_back_hits(&kept));
    let mut updated = 0;
    let mut waiting: Vec<Hit> = Vec::new();
    for (oid, set) in tables {
        let mine: Vec<&Hit> = hits.iter().filter(|h| h.relation == oid).collect();
        for chunk in mine.chunks(FOLD_BATCH) {
            let ids: Vec<i64> = chunk.iter().map(|h| h.id).collect();
            let counts: Vec<i64> = chunk.iter().map(|h| h.count as i64).collect();
            let ats: Vec<i64> = chunk.iter().map(|h| h.at).collect();
            let mut done = std::collections::HashSet::new();
            let mut table = crate::plans::write(client, set.sql(FOLD), &[ids.into(), counts.into(), ats.into()])
                .map_err(spi("folding recall's hits"))?;
            while table.next().is_some() {
                done.insert(table.get::<i64>(1).map_err(spi("folding recall's hits"))?.unwrap_or_default());
            }
            updated += done.len() as u64;
            let skipped: Vec<i64> = chunk.iter().map(|h| h.id).filter(|id| !done.contains(id)).collect();
            if !skipped.is_empty() {
                let mut there =
                    crate::plans::read(client, set.sql(STILL_THERE), &[skipped.into()]).map_err(spi("folding recall's hits"))?;
                let mut held = std::collections::HashSet::new();
                while there.next().is_some() {
                    held.insert(there.get::<i64>(1).map_err(spi("folding recall's hits"))?.unwrap_or_default());
                }
                waiting.extend(chunk.iter().filter(|h| held.contains(&h.id)).map(|h| **h));
            }
        }
    }
    let total: u64 = hits.iter().map(|h| h.count as u64).sum::<u64>() - waiting.iter().map(|h| h.count as u64).sum::<u64>();
    register_xact_callback(PgXactCallbackEvent::Commit, move || {
        crate::share::count_folded(total, passed_over);
        crate::share::put_back_hits(&waiting);
    });
    Ok(updated)
}

/// Takes this database's waiting hits out of shared memory and folds them in this transaction;
/// returns how many memories were updated (0 without the preload or with no hits waiting).
pub fn fold(client: &mut SpiClient<'_>) -> Result<u64> {
    let sets = crate::placement::local_table_sets().unwrap_or_default();
    apply(client, &sets, crate::share::take_hits())
}

/// Folds this database's waiting recall hits into `last_hit_at` and `hit_count` now, instead of
/// at the background worker's next fold; returns how many memories were updated.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn memory_fold_hits() -> i64 {
    Spi::connect_mut(|client| {
        crate::version::require_current_schema(client)?;
        fold(client)
    })
    .or_raise() as i64
}

/// Recall's hits in shared memory: whether this database's recalls defer them (its worker folds
/// them), how many memories of this database have hits waiting, how many memories the buffer
/// holds, and the hits recorded, folded and dropped (the buffer full) since the server started,
/// over all databases. NULL counts without `shared_preload_libraries = 'agent_memory'`.
#[pg_extern(volatile, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
#[allow(clippy::type_complexity)] // the SQL row's columns, named
fn memory_hit_stats() -> TableIterator<
    'static,
    (
        name!(deferred, bool),
        name!(pending, Option<i64>),
        name!(capacity, Option<i64>),
        name!(recorded, Option<i64>),
        name!(folded, Option<i64>),
        name!(dropped, Option<i64>),
    ),
> {
    let c = crate::share::hit_counts();
    TableIterator::once((
        crate::share::hits_deferred(),
        c.as_ref().map(|c| c.pending),
        c.as_ref().map(|c| c.capacity),
        c.as_ref().map(|c| c.recorded),
        c.as_ref().map(|c| c.folded),
        c.as_ref().map(|c| c.dropped),
    ))
}
