//! `agent_memory.memory_forget(dry_run)`: what the forgetting worker runs.
//!
//! Steps (reported in this order; hit counts are halved first):
//! 1. `expire`: retire facts past `expires_at` or `valid_until`, and episodes past `valid_until`
//!    (reason `expired`); move episodes past `expires_at` (their retention) to the archive, where
//!    recall still finds them;
//! 2. `age_hits`: once every `agent_memory.hit_halflife`, halve every hit count, so a shifted hot
//!    spot is not outvoted by old counts;
//! 3. `evict`: keep at most `agent_memory.capacity` live (active, not archived) memories per user:
//!    the lowest retention scores go, facts retired (reason `evicted`), episodes to the archive.
//!    The scores are computed in Rust over the user's memories read in place (the per-user index
//!    scan recall uses), with `agent_memory_core::forget`; `memory_retention_score` gives the
//!    same score in SQL. Then each user's archive is kept within `agent_memory.archive_capacity`:
//!    its least recently recalled memories retire;
//! 4. `purge`: delete memories retired longer than `agent_memory.regret_window` (evidence of a
//!    summary stays as long as its summary), and conversation turns older than
//!    `agent_memory.turn_retention` (they leave working memory).
//!
//! Protected memories are never expired or evicted. Retirements increment the version
//! themselves (so the write trigger has nothing to do); halving hit counts is a touch and keeps
//! it. Each step runs in batches of at most
//! `agent_memory.batch_size` rows; rows locked by a concurrent write are skipped, not waited for.
//! A batch finds its rows, locks them and changes them in one statement, addressing them by
//! their physical position (`ctid`) once found, so no row is looked up twice. Eviction and the
//! archive's bound choose their rows by a ranking first, in a read of its own (no row locks);
//! the batch then retires the chosen rows that are still as they were read, so a batch holds
//! its locks only while its rows change.
//!
//! In a worker, a helper process (`agent_memory.forget_helper`, a dynamic background worker)
//! expires and purges while the worker evicts: the steps change different rows, and most of a
//! retirement's cost is writing its new row version and WAL, which two processes share. Then the
//! helper evicts as well: the worker shares its list of users above the capacity
//! (`crate::share`), takes users from its front, and the helper from its back, so that both end
//! together and no user is ranked by both. The archive's bound runs after both, since expiry and
//! eviction both archive. By hand (`memory_forget`), the caller's transaction runs every step
//! itself.

use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;

use crate::error::{first_value, spi, OrRaise, Result};
use crate::gucs;
use crate::placement::TableSet;
use crate::runs::{self, step, until_done, Driver, Job, Steps};
pub use crate::share::OverUser;

/// A fact past its retention or its `valid_until`, and an episode past its `valid_until`, retire
/// (reason `expired`); an episode past its retention moves to the archive (it stays, and recall
/// still finds it: the record of what happened does not stop being true).
const EXPIRE_BATCH: &str = "\
WITH c AS (SELECT m.ctid AS t FROM agent_memory.memories m \
            WHERE m.active AND NOT m.protected AND (m.expires_at IS NOT NULL OR m.valid_until IS NOT NULL) \
              AND least(m.expires_at, m.valid_until) <= now() AND m.kind <> 'procedural' \
            ORDER BY least(m.expires_at, m.valid_until) LIMIT $1 FOR UPDATE SKIP LOCKED), \
     x AS (SELECT m.ctid AS t, m.kind = 'episodic' AND coalesce(m.valid_until > now(), true) AS to_archive \
             FROM agent_memory.memories m JOIN c ON m.ctid = c.t), \
     u AS (UPDATE agent_memory.memories m \
              SET active = x.to_archive, \
                  retired_reason = CASE WHEN x.to_archive THEN NULL ELSE 'expired' END, \
                  retired_at = CASE WHEN x.to_archive THEN NULL ELSE now() END, \
                  archived_at = CASE WHEN x.to_archive THEN coalesce(m.archived_at, now()) ELSE m.archived_at END, \
                  expires_at = CASE WHEN x.to_archive THEN NULL ELSE m.expires_at END, \
                  version = m.version + 1 \
             FROM x WHERE m.ctid = x.t RETURNING m.user_id, m.embedding_model, m.id, x.to_archive AS changed), \
     s AS (INSERT INTO agent_memory.memory_pack_stale (user_id, embedding_model, id) \
           SELECT u.user_id, u.embedding_model, u.id FROM u WHERE u.changed) \
SELECT count(*) FROM u";

const EXPIRE_COUNT: &str = "\
SELECT count(*) FROM agent_memory.memories m \
 WHERE m.active AND NOT m.protected AND (m.expires_at IS NOT NULL OR m.valid_until IS NOT NULL) \
   AND least(m.expires_at, m.valid_until) <= now() AND m.kind <> 'procedural'";

/// Conversation turns older than `agent_memory.turn_retention` leave working memory: deleted, a
/// batch at a time. Facts drawn from them keep their content; their `source_turn_id` is set to
/// NULL here, in the same statement (the key to the turn takes no action: a key that sets part
/// of the user's key cannot be sharded by user). The turns are locked first, so a memory written
/// meanwhile cannot point to one of them unseen.
const PURGE_TURNS_BATCH: &str = "\
WITH c AS (SELECT t.ctid AS t, t.user_id, t.id FROM agent_memory.turns t WHERE t.created_at < now() - make_interval(mins => $2) \
            ORDER BY t.created_at LIMIT $1 FOR UPDATE SKIP LOCKED), \
     n AS (UPDATE agent_memory.memories m SET source_turn_id = NULL FROM c \
            WHERE m.user_id = c.user_id AND m.source_turn_id = c.id), \
     d AS (DELETE FROM agent_memory.turns t USING c WHERE t.ctid = c.t RETURNING 1) \
SELECT count(*) FROM d";
const PURGE_TURNS_COUNT: &str = "SELECT count(*) FROM agent_memory.turns t WHERE t.created_at < now() - make_interval(mins => $1)";

/// When the set's hit counts were last halved (`hits_halved` for the extension's tables; each
/// set of shards of a Citus node keeps its own clock: `TableSet::own_name`).
const HALVED_AT: &str = "\
SELECT now() - s.done_at >= make_interval(mins => $1) FROM agent_memory.maintenance_state s WHERE s.name = $2";
const MARK_HALVED: &str = "\
INSERT INTO agent_memory.maintenance_state (name, done_at) VALUES ($1, now()) \
ON CONFLICT (name) DO UPDATE SET done_at = excluded.done_at";
/// `(hit_count + 1) / 2` is `agent_memory_core::forget::halve_hits`: a memory recalled once
/// stays recalled. Rows are taken in id order from `$2` on, so every row is halved once.
const HALVE_BATCH: &str = "\
WITH c AS (SELECT m.id FROM agent_memory.memories m WHERE m.active AND m.hit_count > 1 AND m.id > $2 \
            ORDER BY m.id LIMIT $1 FOR UPDATE SKIP LOCKED), \
     u AS (UPDATE agent_memory.memories m SET hit_count = (m.hit_count + 1) / 2 FROM c WHERE m.id = c.id RETURNING m.id) \
SELECT count(*), coalesce(max(u.id), $2) FROM u";
const HALVE_COUNT: &str = "SELECT count(*) FROM agent_memory.memories m WHERE m.active AND m.hit_count > 1";

/// Users above the capacity, with how many memories each can lose (protected ones cannot).
/// Memories that have expired do not count: the expire step retires them first.
const OVER_CAPACITY: &str = "\
SELECT m.user_id, least(count(*) - $1, count(*) FILTER (WHERE NOT m.protected AND m.kind <> 'procedural')) AS excess \
  FROM agent_memory.memories m \
 WHERE m.active AND m.archived_at IS NULL AND (m.protected OR coalesce(least(m.expires_at, m.valid_until) > now(), true)) \
 GROUP BY m.user_id HAVING count(*) > $1 \
 ORDER BY m.user_id";

/// Users above the capacity by their count of active memories (the expire step has just
/// retired the expired ones), with their embedding models; counted per user and model first
/// (one hash aggregate over the table, no sort of its rows), then per user. Also the users whose
/// active memories that are not protected number more than the archive's capacity (`$2`): only
/// these can end the pass with an archive beyond it (a pass archives live memories, never adds
/// any), so when there is none the archive's bound has nothing to do.
const OVER_CAPACITY_MODELS: &str = "\
SELECT g.user_id, sum(g.live)::bigint - $1 AS excess, array_agg(g.embedding_model) FILTER (WHERE g.live > 0), \
       sum(g.unprotected)::bigint > $2 AS archive_may_exceed \
  FROM (SELECT m.user_id, m.embedding_model, count(*) FILTER (WHERE m.archived_at IS NULL) AS live, \
               count(*) FILTER (WHERE NOT m.protected) AS unprotected \
          FROM agent_memory.memories m WHERE m.active GROUP BY m.user_id, m.embedding_model) g \
 GROUP BY g.user_id HAVING sum(g.live) > $1 OR sum(g.unprotected) > $2 \
 ORDER BY g.user_id";

/// Retires the rows at the ctids `$2` chosen by the ranking whose ids are among `$1` (a row
/// that moved since is passed over; one that took a chosen place was chosen too), skipping rows
/// a concurrent write holds. Found by their ctids alone (a TID scan, or a hashed filter): never
/// a join the planner might make a nested loop of on stale statistics.
const EVICT_ROWS: &str = "\
WITH locked AS (SELECT m.ctid AS t FROM agent_memory.memories m \
                 WHERE m.ctid = ANY ($2::tid[]) AND m.id = ANY ($1::bigint[]) \
                   AND m.active AND NOT m.protected AND m.kind <> 'procedural' FOR UPDATE OF m SKIP LOCKED), \
     u AS (UPDATE agent_memory.memories m \
              SET active = (m.kind = 'episodic'), \
                  retired_reason = CASE WHEN m.kind = 'episodic' THEN NULL ELSE 'evicted' END, \
                  retired_at = CASE WHEN m.kind = 'episodic' THEN NULL ELSE now() END, \
                  archived_at = CASE WHEN m.kind = 'episodic' THEN now() ELSE m.archived_at END, \
                  expires_at = CASE WHEN m.kind = 'episodic' THEN NULL ELSE m.expires_at END, \
                  version = m.version + 1 \
             FROM locked l WHERE m.ctid = l.t RETURNING m.user_id, m.embedding_model, m.id, m.kind = 'episodic' AS changed), \
     s AS (INSERT INTO agent_memory.memory_pack_stale (user_id, embedding_model, id) \
           SELECT u.user_id, u.embedding_model, u.id FROM u WHERE u.changed) \
SELECT count(*) FROM u";

/// The archive of each user beyond `agent_memory.archive_capacity`: its least recently recalled
/// memories, at most `$1` of them, as (ids, positions). Only reads: the rows retire in a batch
/// of their own (ARCHIVE_RETIRE_ROWS).
const ARCHIVE_OVER_FIND: &str = "\
WITH r AS (SELECT m.ctid AS t, m.id, row_number() OVER (PARTITION BY m.user_id ORDER BY m.last_hit_at DESC, m.id DESC) AS n \
             FROM agent_memory.memories m WHERE m.active AND m.archived_at IS NOT NULL AND NOT m.protected), \
     o AS (SELECT r.t, r.id FROM r WHERE r.n > $2 LIMIT $1) \
SELECT coalesce(array_agg(o.id), '{}'), coalesce(array_agg(o.t), '{}') FROM o";
/// Retires (reason `evicted`) the archived rows at the ctids `$2` that ARCHIVE_OVER_FIND chose,
/// whose ids are among `$1`, skipping rows a concurrent write holds. By ctids alone, as
/// EVICT_ROWS: while `archived_at` was NULL in every row at the last ANALYZE, a join of the
/// chosen rows ran as a nested loop over the whole table for each of them.
const ARCHIVE_RETIRE_ROWS: &str = "\
WITH locked AS (SELECT m.ctid AS t FROM agent_memory.memories m \
                 WHERE m.ctid = ANY ($2::tid[]) AND m.id = ANY ($1::bigint[]) \
                   AND m.active AND m.archived_at IS NOT NULL AND NOT m.protected FOR UPDATE OF m SKIP LOCKED), \
     u AS (UPDATE agent_memory.memories m \
              SET active = false, retired_reason = 'evicted', retired_at = now(), version = m.version + 1 \
             FROM locked l WHERE m.ctid = l.t RETURNING 1) \
SELECT count(*) FROM u";
const ARCHIVE_OVER_COUNT: &str = "\
SELECT coalesce(sum(x.n - $1), 0)::bigint FROM (SELECT count(*) AS n FROM agent_memory.memories m \
  WHERE m.active AND m.archived_at IS NOT NULL AND NOT m.protected GROUP BY m.user_id HAVING count(*) > $1) x";

/// The users and models of the next purge batch, each with its pack lock taken (shared): a
/// rebuild of their packs waits for the batch, and the batch's marks (below) see every pack
/// committed before.
const PURGE_LOCK_USERS: &str = "SELECT array_agg(x.user_id), array_agg(x.embedding_model) FROM ( \
       SELECT DISTINCT y.user_id, y.embedding_model FROM ( \
         SELECT m.user_id, m.embedding_model FROM agent_memory.memories m \
          WHERE NOT m.active AND m.retired_at < now() - make_interval(mins => $2) \
            AND NOT (m.retired_reason = 'summarized' AND m.superseded_by IS NOT NULL) \
          ORDER BY m.retired_at LIMIT $1) y) x, \
     LATERAL (SELECT pg_catalog.pg_advisory_xact_lock_shared(pg_catalog.hashtextextended( \
                'agent_memory.pack:' || x.user_id || '/' || x.embedding_model, (SELECT s.salt FROM agent_memory.lock_salt s)))) l";
/// Retired memories past the regret window, oldest retirement first, of the users and models
/// locked by PURGE_LOCK_USERS. Evidence of a summary (`summarized`, still pointing to its
/// summary) stays. A deleted memory that a pack may hold is marked stale here, for the whole
/// batch at once (the row trigger is told to skip these: `pack_deletes_marked`). The user's
/// memories that a deleted one superseded point to nothing after, as the key's `ON DELETE SET
/// NULL` did before 0.10.0: set here, in the same statement.
const PURGE_BATCH: &str = "\
WITH c AS (SELECT m.ctid AS t FROM agent_memory.memories m \
            WHERE NOT m.active AND m.retired_at < now() - make_interval(mins => $2) \
              AND NOT (m.retired_reason = 'summarized' AND m.superseded_by IS NOT NULL) \
              AND (m.user_id, m.embedding_model) IN (SELECT u, e FROM unnest($3::text[], $4::text[]) AS l(u, e)) \
            ORDER BY m.retired_at LIMIT $1 FOR UPDATE SKIP LOCKED), \
     d AS (DELETE FROM agent_memory.memories m USING c WHERE m.ctid = c.t RETURNING m.user_id, m.embedding_model, m.id), \
     n AS (UPDATE agent_memory.memories m SET superseded_by = NULL FROM d \
            WHERE m.user_id = d.user_id AND m.superseded_by = d.id), \
     s AS (INSERT INTO agent_memory.memory_pack_stale (user_id, embedding_model, id) \
           SELECT d.user_id, d.embedding_model, d.id FROM d \
            WHERE EXISTS (SELECT 1 FROM agent_memory.memory_pack_users p \
                           WHERE p.user_id = d.user_id AND p.embedding_model = d.embedding_model AND p.last_id >= d.id)) \
SELECT count(*) FROM d";
const PURGE_COUNT: &str = "\
SELECT count(*) FROM agent_memory.memories m \
 WHERE NOT m.active AND m.retired_at < now() - make_interval(mins => $1) \
   AND NOT (m.retired_reason = 'summarized' AND m.superseded_by IS NOT NULL)";

/// Runs a batch that changes rows and returns how many it changed.
fn count(
    client: &mut pgrx::spi::SpiClient<'_>,
    sql: &'static str,
    args: &[pgrx::datum::DatumWithOid<'_>],
    what: &'static str,
) -> Result<i64> {
    Ok(first_value::<i64>(crate::plans::write(client, sql, args).map_err(spi(what))?).map_err(spi(what))?.unwrap_or(0))
}

/// Runs a count that only reads (what a dry run reports).
fn tally(
    client: &mut pgrx::spi::SpiClient<'_>,
    sql: &'static str,
    args: &[pgrx::datum::DatumWithOid<'_>],
    what: &'static str,
) -> Result<i64> {
    Ok(first_value::<i64>(crate::plans::read(client, sql, args).map_err(spi(what))?).map_err(spi(what))?.unwrap_or(0))
}

/// A second process that runs the expire and purge steps of a worker's pass while the pass
/// evicts (hit counts are halved before it starts): the steps change different rows (expired,
/// over capacity, and retired long ago), and a retirement's cost is mostly writing, which two
/// processes share.
pub trait Helper {
    /// Starts the helper; false when it cannot (the pass then runs every step itself).
    fn start(&mut self) -> bool;
    /// Offers the helper the pass's users above the capacity, in the order the pass evicts them;
    /// false when it cannot take any (the pass then evicts every user itself).
    fn share(&mut self, users: &[OverUser]) -> bool;
    /// The pass's next user of the shared list (its index); `None` once the helper has the rest.
    fn take_front(&mut self) -> Option<usize>;
    /// Asks the helper to stop between two batches (the pass failed).
    fn stop(&mut self);
    /// Waits for the helper to exit; returns the steps it finished, or the error it stopped
    /// with. A step it did not report is run by the pass.
    fn join(&mut self) -> Result<Steps>;
}

/// The steps a helper runs, in its order: its `evict` is the part of the pass's list it took.
pub const HELPER_STEPS: [&str; 3] = ["expire", "purge", "evict"];

/// The whole forgetting pass, in this process. With `dry_run`, every step counts what it would
/// change instead.
pub fn forget_pass<D: Driver>(d: &mut D, dry_run: bool) -> Result<Steps> {
    pass(d, dry_run, None)
}

/// The forgetting pass of a worker, with `helper` running the expire and purge steps beside
/// it when it can start. The archive's bound comes last: expiry and eviction both archive.
pub fn forget_pass_helped<D: Driver>(d: &mut D, helper: &mut dyn Helper) -> Result<Steps> {
    pass(d, false, Some(helper))
}

/// Runs one of the `HELPER_STEPS` (in a helper); returns the rows it changed.
pub fn helper_step<D: Driver>(d: &mut D, name: &str) -> Result<i64> {
    let batch = gucs::batch_size();
    match name {
        "expire" => expire(d, false, batch),
        "purge" => purge(d, false, batch),
        _ => Ok(0),
    }
}

fn pass<D: Driver>(d: &mut D, dry_run: bool, helper: Option<&mut dyn Helper>) -> Result<Steps> {
    let t = d.tables().clone();
    let batch = gucs::batch_size();
    // Recall's hits waiting in shared memory count first (api::hits).
    if !dry_run {
        d.unit(crate::api::hits::fold)?;
    }
    // Hit counts are halved first, alone: a row locked by another step would be skipped.
    let age = step("age_hits", || age_hits(d, dry_run, batch))?;
    // The helper, when it started, expires and purges while this process evicts.
    let helper = match helper {
        Some(h) if !dry_run => h.start().then_some(h),
        _ => None,
    };
    let mut expired = None;
    if helper.is_none() {
        expired = Some(step("expire", || expire(d, dry_run, batch))?);
    }
    // Whether some user's archive may end the pass beyond its capacity (told by the evict step).
    let mut archive_may_exceed = true;
    let mut helper = helper;
    let here = step("evict", || {
        let (n, may_exceed) = evict(d, dry_run, batch, helper.as_deref_mut())?;
        archive_may_exceed = may_exceed;
        Ok(n)
    });
    let mut reported = Vec::new();
    let mut evicted = match helper {
        Some(h) => {
            if here.is_err() {
                h.stop();
            }
            // The helper has exited before the pass goes on, or fails.
            let joined = h.join();
            let mine = here?;
            reported = joined?;
            mine
        }
        None => here?,
    };
    let mut take = |name: &str| reported.iter().position(|s| s.name == name).map(|i| reported.remove(i));
    // What the helper did not report (it could not connect, say), the pass does itself.
    let expired = match expired.or_else(|| take("expire")) {
        Some(s) => s,
        None => step("expire", || expire(d, dry_run, batch))?,
    };
    let purged = take("purge");
    // The users the helper took from the end of the evict step's list: counted in the step, and
    // shown on their own.
    let by_helper = take("evict").map(|s| {
        evicted.rows += s.rows;
        runs::Step { name: "evict_by_helper", ..s }
    });

    // The archive's own bound, counted in the evict step; skipped when no user has enough
    // memories to exceed it.
    if let Some(cap) = gucs::archive_capacity().filter(|_| dry_run || archive_may_exceed) {
        let started = std::time::Instant::now();
        let cap = cap.min(i32::MAX as i64);
        evicted.rows += if dry_run {
            d.read(|c| tally(c, t.sql(ARCHIVE_OVER_COUNT), &[cap.into()], "counting archived memories"))?
        } else {
            archive_over(d, batch, cap)?
        };
        evicted.ms += started.elapsed().as_secs_f64() * 1000.0;
    }

    let purged = match purged {
        Some(s) => s,
        None => step("purge", || purge(d, dry_run, batch))?,
    };
    let mut steps = vec![expired, age, evicted, purged];
    steps.extend(by_helper);
    Ok(steps)
}

/// 1. Expire.
fn expire<D: Driver>(d: &mut D, dry_run: bool, batch: i64) -> Result<i64> {
    let t = d.tables().clone();
    if dry_run {
        d.read(|c| tally(c, t.sql(EXPIRE_COUNT), &[], "counting expired memories"))
    } else {
        until_done(d, batch, |c| {
            let _marked = crate::api::pack::MarkingOwnWrites::start();
            count(c, t.sql(EXPIRE_BATCH), &[batch.into()], "expiring memories")
        })
    }
}

/// 2. Age hit counts, when due.
fn age_hits<D: Driver>(d: &mut D, dry_run: bool, batch: i64) -> Result<i64> {
    let t = d.tables().clone();
    let halflife = gucs::hit_halflife_minutes().min(i32::MAX as i64) as i32;
    let clock = t.own_name("hits_halved");
    let due: Option<bool> = d.read(|c| {
        first_value::<bool>(
            crate::plans::read(c, HALVED_AT, &[halflife.into(), clock.as_str().into()]).map_err(spi("reading when hits were halved"))?,
        )
        .map_err(spi("reading when hits were halved"))
    })?;
    if dry_run {
        return if due == Some(true) { d.read(|c| tally(c, t.sql(HALVE_COUNT), &[], "counting hit counts")) } else { Ok(0) };
    }
    if due == Some(false) {
        return Ok(0);
    }
    // Due, or the first pass, which only starts the clock. The clock is set before the
    // halving, so a pass stopped half-way halves no row twice.
    d.unit(|c| {
        crate::plans::write(c, MARK_HALVED, &[clock.as_str().into()]).map_err(spi("recording the halving"))?;
        Ok(())
    })?;
    if due.is_none() {
        return Ok(0);
    }
    let mut after = 0i64;
    let mut total = 0i64;
    loop {
        let (n, last) = d.unit(|c| {
            let table = crate::plans::write(c, t.sql(HALVE_BATCH), &[batch.into(), after.into()]).map_err(spi("halving hit counts"))?;
            table.first().get_two::<i64, i64>().map_err(spi("halving hit counts"))
        })?;
        let n = n.unwrap_or(0);
        total += n;
        after = last.unwrap_or(after);
        if n < batch {
            return Ok(total);
        }
    }
}

/// 3. Evict above the capacity (the archive's bound is applied by the pass after expiry).
///
/// Returns the rows evicted, and whether some user's archive may end the pass beyond
/// `agent_memory.archive_capacity` (true when that was not counted).
///
/// With a `helper`, the list of users is shared with it: the pass takes users from the front
/// until the helper, taking them from the back, has the rest.
fn evict<'h, D: Driver>(d: &mut D, dry_run: bool, batch: i64, helper: Option<&mut (dyn Helper + 'h)>) -> Result<(i64, bool)> {
    let t = d.tables().clone();
    let Some(cap) = gucs::capacity() else { return Ok((0, true)) };
    if dry_run {
        return d.read(|c| {
            let table = crate::plans::read(c, t.sql(OVER_CAPACITY), &[cap.into()]).map_err(spi("finding users above the capacity"))?;
            let mut n = 0i64;
            for row in table {
                n += row.get::<i64>(2).map_err(spi("reading a user"))?.unwrap_or(0).max(0);
            }
            Ok((n, true))
        });
    }
    let archive_cap = gucs::archive_capacity().unwrap_or(i64::MAX);
    let (over, archive_may_exceed) = d.read(|c| {
        let table = crate::plans::read(c, t.sql(OVER_CAPACITY_MODELS), &[cap.into(), archive_cap.into()])
            .map_err(spi("finding users above the capacity"))?;
        let mut out: Vec<OverUser> = Vec::new();
        let mut archive_may_exceed = false;
        for row in table {
            let e = spi("reading a user");
            archive_may_exceed |= row.get::<bool>(4).map_err(&e)?.unwrap_or(true);
            let (Some(user), Some(excess)) = (row.get::<String>(1).map_err(&e)?, row.get::<i64>(2).map_err(&e)?) else {
                continue;
            };
            if excess <= 0 {
                continue;
            }
            let models: Vec<String> = row.get::<Vec<Option<String>>>(3).map_err(&e)?.unwrap_or_default().into_iter().flatten().collect();
            out.push((user, excess, models));
        }
        Ok((out, archive_may_exceed))
    })?;
    let mut shared = match helper {
        Some(h) => h.share(&over).then_some(h),
        None => None,
    };
    let mut sequential = 0..over.len();
    let total = evict_users(d, &over, 0, cap, batch, || match shared.as_deref_mut() {
        Some(h) => h.take_front(),
        None => sequential.next(),
    })?;
    Ok((total, archive_may_exceed))
}

/// Evicts above the capacity the users `take` gives, one index at a time into `users`, whose
/// first entry has index `first` (a helper holds only the tail of the pass's list); stops when
/// `take` has no more. Users whose excess adds up to about a batch are ranked together, one
/// user at least, and a user with more than a batch to lose is ranked again.
pub fn evict_users<D: Driver>(
    d: &mut D,
    users: &[OverUser],
    first: usize,
    cap: i64,
    batch: i64,
    mut take: impl FnMut() -> Option<usize>,
) -> Result<i64> {
    let t = d.tables().clone();
    let weights = gucs::retention_weights();
    let mut total = 0;
    // A user taken that did not fit in the last group.
    let mut pending: Option<&OverUser> = None;
    loop {
        let mut group: Vec<OverUser> = Vec::new();
        let mut n = 0;
        while let Some(user) = pending.take().or_else(|| take().and_then(|i| users.get(i.checked_sub(first)?))) {
            if !group.is_empty() && n + user.1 > batch {
                pending = Some(user);
                break;
            }
            n += user.1;
            group.push(user.clone());
        }
        if group.is_empty() {
            return Ok(total);
        }
        loop {
            // The ranking only reads; the batch that retires what it chose is a unit of its
            // own, so the rows are locked only while they change.
            let (ids, tids) = d.read(|_| rank_users(&group, cap, batch, &weights))?;
            let evicted = if ids.is_empty() { 0 } else { d.unit(|c| retire_rows(c, &t, ids, tids))? };
            total += evicted;
            if !(group.len() == 1 && evicted >= batch) {
                break;
            }
        }
    }
}

/// 4. Purge after the regret window; delete turns past their retention.
fn purge<D: Driver>(d: &mut D, dry_run: bool, batch: i64) -> Result<i64> {
    let t = d.tables().clone();
    let memories =
        older_than(d, dry_run, batch, gucs::regret_window_minutes(), t.sql(PURGE_COUNT), "purging retired memories", |c, b, m| {
            purge_batch(c, &t, b, m)
        })?;
    let turns =
        older_than(d, dry_run, batch, gucs::turn_retention_minutes(), t.sql(PURGE_TURNS_COUNT), "deleting old turns", |c, b, m| {
            count(c, t.sql(PURGE_TURNS_BATCH), &[b.into(), m.into()], "deleting old turns")
        })?;
    Ok(memories + turns)
}

/// One batch of the purge of retired memories: the users' pack locks first, then the deletes,
/// which mark what a pack may hold.
fn purge_batch(c: &mut pgrx::spi::SpiClient<'_>, t: &TableSet, batch: i64, minutes: i32) -> Result<i64> {
    let (users, models): (Option<Vec<String>>, Option<Vec<String>>) =
        crate::locks::as_owner(c, t.sql(PURGE_LOCK_USERS), &[batch.into(), minutes.into()])?
            .first()
            .get_two()
            .map_err(spi("locking the packs of the purged users"))?;
    let (Some(users), Some(models)) = (users, models) else { return Ok(0) };
    let _marked = crate::api::pack::MarkingOwnWrites::start();
    count(c, t.sql(PURGE_BATCH), &[batch.into(), minutes.into(), users.into(), models.into()], "purging retired memories")
}

/// Deletes in batches what is older than `minutes` (`delete_batch`, given the batch size and the
/// minutes, returns the rows it deleted), or with `dry_run` counts it (`count_sql`, taking the
/// minutes); nothing when `minutes` is `None` (kept forever).
fn older_than<D: Driver>(
    d: &mut D,
    dry_run: bool,
    batch: i64,
    minutes: Option<i64>,
    count_sql: &'static str,
    what: &'static str,
    mut delete_batch: impl FnMut(&mut pgrx::spi::SpiClient<'_>, i64, i32) -> Result<i64>,
) -> Result<i64> {
    let Some(minutes) = minutes else { return Ok(0) };
    let minutes = minutes.min(i32::MAX as i64) as i32;
    if dry_run {
        d.read(|c| tally(c, count_sql, &[minutes.into()], what))
    } else {
        until_done(d, batch, |c| delete_batch(c, batch, minutes))
    }
}

/// The archives beyond `agent_memory.archive_capacity`, a batch at a time: each batch is found by
/// a read, then retired by a unit of its own (skipping rows a concurrent write holds).
fn archive_over<D: Driver>(d: &mut D, batch: i64, cap: i64) -> Result<i64> {
    let t = d.tables().clone();
    let mut total = 0;
    loop {
        let (ids, tids): (Option<Vec<i64>>, Option<Vec<pg_sys::ItemPointerData>>) = d.read(|c| {
            let e = spi("finding archived memories beyond the archive's capacity");
            crate::plans::read(c, t.sql(ARCHIVE_OVER_FIND), &[batch.into(), cap.into()]).map_err(&e)?.first().get_two().map_err(&e)
        })?;
        let (ids, tids) = (ids.unwrap_or_default(), tids.unwrap_or_default());
        if ids.is_empty() {
            return Ok(total);
        }
        let n = d.unit(|c| count(c, t.sql(ARCHIVE_RETIRE_ROWS), &[ids.into(), tids.into()], "evicting archived memories"))?;
        total += n;
        if n < batch {
            return Ok(total);
        }
    }
}

/// Ranks the memories of `users` (with their models) by retention score, reading them in place
/// with the per-user index scan, and returns those ranked below the capacity, at most `batch`,
/// as (ids, positions).
pub(crate) fn rank_users(
    users: &[OverUser],
    cap: i64,
    batch: i64,
    weights: &agent_memory_core::forget::RetentionWeights,
) -> Result<(Vec<i64>, Vec<pg_sys::ItemPointerData>)> {
    use agent_memory_core::forget::{select_evictions, Keepable};
    let now = crate::pg::transaction_start();
    let mut ids: Vec<i64> = Vec::new();
    let mut tids: Vec<pg_sys::ItemPointerData> = Vec::new();
    crate::scan::with_fresh_snapshot(|| -> Result<()> {
        for (user, _, models) in users {
            pgrx::check_for_interrupts!();
            let mut rows: Vec<Keepable> = Vec::new();
            let mut where_is = std::collections::HashMap::new();
            for model in models {
                crate::scan::for_each_active(user, model, now, |c| {
                    // An expired memory is the expire step's; a protected one never expires and
                    // counts towards the capacity; an archived one is out of it.
                    if (c.expired && !c.protected) || c.archived {
                        return Ok(true);
                    }
                    let hours = agent_memory_core::decay::age_hours(now, c.last_hit);
                    // A standing instruction is kept like a hard fact.
                    rows.push(Keepable {
                        id: c.id,
                        protected: c.protected || c.procedural,
                        score: weights.score(c.importance as f64, hours, c.hit_count as f64),
                    });
                    where_is.insert(c.id, c.tid);
                    Ok(true)
                })?;
            }
            for id in select_evictions(&rows, cap.max(0) as usize) {
                if ids.len() as i64 >= batch {
                    return Ok(());
                }
                if let Some(t) = where_is.get(&id) {
                    ids.push(id);
                    tids.push(*t);
                }
            }
        }
        Ok(())
    })?;
    Ok((ids, tids))
}

/// Retires the rows the ranking chose (facts retire, episodes move to the archive), skipping
/// those a concurrent write holds or has changed since (their position is no longer theirs).
pub(crate) fn retire_rows(
    client: &mut pgrx::spi::SpiClient<'_>,
    t: &TableSet,
    ids: Vec<i64>,
    tids: Vec<pg_sys::ItemPointerData>,
) -> Result<i64> {
    let _marked = crate::api::pack::MarkingOwnWrites::start();
    count(client, t.sql(EVICT_ROWS), &[ids.into(), tids.into()], "evicting memories")
}

/// Runs forgetting now: expires, ages hit counts when due, evicts above the capacity and purges
/// after the regret window; returns the rows of each step. `dry_run => true` changes nothing
/// and returns what would change. Fails at once (55P03) while another forgetting pass runs.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn memory_forget(dry_run: default!(Option<bool>, false)) -> TableIterator<'static, (name!(step, String), name!(rows, i64))> {
    let dry_run = runs::check_dry_run(dry_run).or_raise();
    let steps = runs::by_hand(Job::Forget, dry_run, |d| forget_pass(d, dry_run)).or_raise();
    TableIterator::new(steps.into_iter().map(|s| (s.name.to_string(), s.rows)))
}

/// The retention score forgetting ranks a user's memories by (higher is kept):
/// importance, recency of the last real recall (half-life `agent_memory.recency_halflife`) and
/// the aged hit count. Bulk reads (`touch => false`) change none of them.
#[pg_extern(stable, parallel_safe)]
fn memory_retention_score(importance: Option<f32>, last_hit_at: Option<TimestampWithTimeZone>, hit_count: Option<i32>) -> f64 {
    let now = crate::pg::transaction_start();
    // The same ages as the pass: NULL and -infinity are infinitely old, infinity is now.
    let hours = last_hit_at.map_or(f64::INFINITY, |t| agent_memory_core::decay::age_hours(now, t.into_inner()));
    gucs::retention_weights().score(importance.unwrap_or(0.0) as f64, hours, hit_count.unwrap_or(0) as f64)
}
