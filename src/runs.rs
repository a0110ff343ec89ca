//! Runs of forgetting and consolidation: how a pass executes its batches, the lock that keeps
//! two passes of one job apart, and the row each run leaves in `agent_memory.runs`.
//!
//! A pass is a list of steps; each step is a loop of batches, and each batch changes at most
//! `agent_memory.batch_size` rows. Called from SQL (`memory_forget`, `memory_consolidate`), the
//! batches run in the caller's transaction. In a worker, every batch is a transaction of its
//! own, so a recall or a reconcile never waits behind more than one batch, and a crash undoes
//! whole batches only (the one in flight, and those whose WAL was not yet flushed: see
//! `agent_memory.worker_synchronous_commit`).

use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::PgSqlErrorCode;

use crate::error::{first_value, spi, MemoryError, Result};
use crate::placement::TableSet;

/// A maintenance job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Job {
    Forget,
    Consolidate,
}

impl Job {
    pub fn name(self) -> &'static str {
        match self {
            Job::Forget => "forget",
            Job::Consolidate => "consolidate",
        }
    }

    fn function(self) -> &'static str {
        match self {
            Job::Forget => "memory_forget",
            Job::Consolidate => "memory_consolidate",
        }
    }
}

/// One step of a pass: how many rows it changed (or would change) and how long it took.
#[derive(Clone, Debug)]
pub struct Step {
    pub name: &'static str,
    pub rows: i64,
    pub ms: f64,
}

/// The steps of a pass, in the order they ran.
pub type Steps = Vec<Step>;

/// Runs one step and times it.
pub fn step(name: &'static str, f: impl FnOnce() -> Result<i64>) -> Result<Step> {
    let started = std::time::Instant::now();
    let rows = f()?;
    Ok(Step { name, rows, ms: started.elapsed().as_secs_f64() * 1000.0 })
}

/// How a pass runs its units of work, and on which tables.
pub trait Driver {
    /// The tables the pass runs on: its statements name the extension's tables and run on
    /// these (`TableSet::sql`).
    fn tables(&self) -> &TableSet;

    /// Runs one unit (a batch, or the read that plans the batches): in the caller's
    /// transaction, or in a transaction of its own.
    fn unit<R>(&mut self, f: impl FnOnce(&mut SpiClient<'_>) -> Result<R>) -> Result<R>;

    /// A unit of bookkeeping (the run's row and lock): it runs even when the worker has been
    /// asked to stop, so a stopped pass is recorded as failed on the way out.
    fn bookkeeping<R>(&mut self, f: impl FnOnce(&mut SpiClient<'_>) -> Result<R>) -> Result<R> {
        self.unit(f)
    }

    /// A unit that only reads (it plans the batches): it takes no row locks.
    fn read<R>(&mut self, f: impl FnOnce(&mut SpiClient<'_>) -> Result<R>) -> Result<R> {
        self.unit(f)
    }

    /// The longest a writing unit of this pass held its transaction (and so its row locks) open,
    /// in milliseconds, when units are transactions of their own.
    fn longest_unit_ms(&self) -> Option<f64> {
        None
    }
}

/// A pass called from SQL: everything in the caller's transaction.
pub struct InCallerTransaction {
    tables: TableSet,
}

impl InCallerTransaction {
    /// A pass over `tables`.
    pub fn on(tables: TableSet) -> InCallerTransaction {
        InCallerTransaction { tables }
    }
}

impl Driver for InCallerTransaction {
    fn tables(&self) -> &TableSet {
        &self.tables
    }

    fn unit<R>(&mut self, f: impl FnOnce(&mut SpiClient<'_>) -> Result<R>) -> Result<R> {
        let tables = &self.tables;
        Spi::connect_mut(|client| {
            // On a Citus node: the set's shards are held here for the unit.
            tables.hold_or_moved(client)?;
            f(client)
        })
    }
}

/// Runs a step's batches until one changes fewer rows than a full batch; returns the total.
pub fn until_done<D: Driver>(d: &mut D, batch: i64, mut f: impl FnMut(&mut SpiClient<'_>) -> Result<i64>) -> Result<i64> {
    let mut total = 0;
    loop {
        let n = d.unit(&mut f)?;
        total += n;
        if n < batch {
            return Ok(total);
        }
    }
}

const START_RUN: &str = "INSERT INTO agent_memory.runs (job, by_worker) VALUES ($1, $2) RETURNING id";
const FINISH_RUN: &str = "\
UPDATE agent_memory.runs SET finished_at = clock_timestamp(), status = $2, steps = $3::jsonb, error = $4, longest_batch_ms = $5, \
       step_ms = $6::jsonb \
 WHERE id = $1";

/// Marks as failed the runs a crash or a kill left 'running'. A worker calls this when it
/// starts: no run of its database can be in progress then, because its passes hold the job's
/// lock and a pass by hand commits its row only when it is done.
pub const FAIL_ORPHANS: &str = "\
UPDATE agent_memory.runs SET status = 'failed', finished_at = clock_timestamp(), \
       error = 'the run stopped before it finished (server crash, or the worker was killed or restarted)' \
 WHERE status = 'running' AND by_worker";

fn steps_json(steps: &Steps) -> String {
    let map: serde_json::Map<String, serde_json::Value> = steps.iter().map(|s| (s.name.to_string(), s.rows.into())).collect();
    serde_json::Value::Object(map).to_string()
}

fn step_ms_json(steps: &Steps) -> String {
    let map: serde_json::Map<String, serde_json::Value> =
        steps.iter().map(|s| (s.name.to_string(), ((s.ms * 10.0).round() / 10.0).into())).collect();
    serde_json::Value::Object(map).to_string()
}

/// `dry_run` must be given: NULL is an error, not a silent no-op.
pub fn check_dry_run(dry_run: Option<bool>) -> Result<bool> {
    dry_run.ok_or_else(|| {
        MemoryError::null_value("dry_run must not be NULL")
            .hint("Pass dry_run => true to see what would change, or false (the default) to change it.")
    })
}

/// Takes the job's lock with `lock` (transaction- or session-level) and records a 'running'
/// run; `None` when another pass holds the lock.
fn start_run(client: &mut SpiClient<'_>, job: Job, lock: &'static str, by_worker: bool) -> Result<Option<i64>> {
    let got: Option<bool> =
        first_value(crate::locks::as_owner(client, lock, &[job.name().into()])?).map_err(spi("taking the pass's lock"))?;
    if got != Some(true) {
        return Ok(None);
    }
    first_value::<i64>(crate::plans::write(client, START_RUN, &[job.name().into(), by_worker.into()]).map_err(spi("recording the run"))?)
        .map_err(spi("recording the run"))
}

/// Records how a run ended: its steps when it succeeded, its error when it failed.
fn finish_run(client: &mut SpiClient<'_>, run_id: i64, outcome: std::result::Result<&Steps, &str>, longest_ms: Option<f64>) -> Result<()> {
    let (status, steps, step_ms, error) = match outcome {
        Ok(steps) => ("succeeded", steps_json(steps), step_ms_json(steps), None),
        Err(message) => ("failed", "{}".to_string(), "{}".to_string(), Some(message.to_string())),
    };
    crate::plans::write(client, FINISH_RUN, &[run_id.into(), status.into(), steps.into(), error.into(), longest_ms.into(), step_ms.into()])
        .map_err(spi("recording the run"))?;
    Ok(())
}

fn busy(job: Job) -> MemoryError {
    MemoryError::new(PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE, format!("a {} pass is already running", job.name()))
        .detail("A worker or another session holds the pass's lock; two passes of one job never overlap.")
        .hint(format!("Wait for it to finish (see agent_memory.last_runs), then call {} again.", job.function()))
}

/// A pass called from SQL. A real pass takes the job's lock (or fails at once when a worker or
/// another session holds it) and records its run; a dry run does neither and changes nothing.
/// The pass runs on each set of tables of this server in turn (`placement::local_table_sets`),
/// and its steps add up.
pub fn by_hand(job: Job, dry_run: bool, pass: impl Fn(&mut InCallerTransaction) -> Result<Steps>) -> Result<Steps> {
    crate::version::check()?;
    let sets = crate::placement::local_table_sets()?;
    let mut d = InCallerTransaction::on(TableSet::base());
    let run_id = if dry_run {
        None
    } else {
        Some(d.unit(|client| start_run(client, job, crate::locks::TRY_LOCK_JOB_XACT, false)?.ok_or_else(|| busy(job)))?)
    };
    let mut steps = Steps::new();
    for set in sets {
        d.tables = set;
        add_steps(&mut steps, pass(&mut d)?);
    }
    // On the coordinator of a Citus cluster (which holds no user), the same call on every worker,
    // each over the shards it holds; its steps add up here.
    let call = format!(
        "SELECT pg_catalog.json_agg(pg_catalog.json_build_array(s.step, s.rows)) FROM agent_memory.{}(dry_run => {dry_run}) s",
        job.function()
    );
    for answer in crate::placement::on_each_worker(&call)? {
        let theirs: Vec<(String, i64)> = serde_json::from_str(&answer).unwrap_or_default();
        let theirs = theirs.into_iter().map(|(name, rows)| Step { name: step_name(&steps, name), rows, ms: 0.0 }).collect();
        add_steps(&mut steps, theirs);
    }
    if let Some(run_id) = run_id {
        d.unit(|client| finish_run(client, run_id, Ok(&steps), None))?;
    }
    Ok(steps)
}

/// The name of a step a worker reported: the same `'static` name as a step of this pass, or the
/// name kept for the life of the backend (the names of steps are few).
fn step_name(steps: &Steps, name: String) -> &'static str {
    thread_local! {
        static NAMES: std::cell::RefCell<Vec<&'static str>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    if let Some(s) = steps.iter().find(|s| s.name == name) {
        return s.name;
    }
    NAMES.with_borrow_mut(|names| match names.iter().find(|n| **n == name) {
        Some(n) => *n,
        None => {
            let n: &'static str = Box::leak(name.into_boxed_str());
            names.push(n);
            n
        }
    })
}

/// Adds the steps of a pass over one set of tables to those of the sets before (by name, in
/// the order they first ran).
pub fn add_steps(total: &mut Steps, more: Steps) {
    for s in more {
        match total.iter_mut().find(|t| t.name == s.name) {
            Some(t) => {
                t.rows += s.rows;
                t.ms += s.ms;
            }
            None => total.push(s),
        }
    }
}

/// What a worker's attempt at a pass came to.
pub enum Attempt {
    /// The pass ran; its run row says how it ended.
    Ran(std::result::Result<Steps, String>),
    /// Another pass of the job held the lock.
    Busy,
}

/// A pass run by a worker: the lock is held for the session across the pass's transactions,
/// and the run row is committed first, so a crash leaves it 'running' for the next start to
/// mark failed.
/// `pass` is given the run's id.
pub fn by_worker<D: Driver>(d: &mut D, job: Job, pass: impl FnOnce(&mut D, i64) -> Result<Steps>) -> Result<Attempt> {
    let Some(run_id) = d.bookkeeping(|client| start_run(client, job, crate::locks::TRY_LOCK_JOB_SESSION, true))? else {
        return Ok(Attempt::Busy);
    };
    let outcome = pass(d, run_id).map_err(|e| e.message);
    let longest = d.longest_unit_ms();
    let finish = d.bookkeeping(|client| {
        finish_run(client, run_id, outcome.as_ref().map_err(String::as_str), longest)?;
        crate::locks::as_owner(client, crate::locks::UNLOCK_JOB_SESSION, &[job.name().into()])?;
        Ok(())
    });
    finish?;
    Ok(Attempt::Ran(outcome))
}
