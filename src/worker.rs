//! The background workers: one per database of `agent_memory.worker_databases`, each running
//! forgetting every `agent_memory.forget_interval`, consolidation every
//! `agent_memory.consolidate_interval`, and the rebuild of out-of-date packs (recall's packed
//! embeddings) every `agent_memory.pack_interval`, and the embedding of memories written without
//! one (`agent_memory.embed_async`) every `agent_memory.embed_interval`.
//!
//! A launcher (connected to no database) starts them: each database's worker once the database
//! exists, so a database that is not created yet is waited for quietly (a worker started for a
//! missing database would fail to connect, with a FATAL in the log, every few seconds). The
//! launcher exits once every database has its worker; the postmaster restarts a worker that
//! stops, and a worker that finds another of its database running (a launcher that was
//! restarted) leaves.
//!
//! Like pg_cron's scheduler: registered in `_PG_init` only when the library is preloaded; a
//! latch loop that wakes on SIGHUP (settings are re-read) and exits promptly on SIGTERM (between
//! two batches); started only once recovery has finished, and idle while the server is a
//! standby. Every batch is a transaction of its own, run as `agent_memory.worker_role` (by
//! default the extension's owner). At start, a worker marks as failed the runs a crash left
//! 'running'.

use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use pgrx::bgworkers::{
    BackgroundWorker, BackgroundWorkerBuilder, BackgroundWorkerStatus, BgWorkerStartTime, DynamicBackgroundWorker, SignalWakeFlags,
};
use pgrx::pg_sys;
use pgrx::pg_sys::panic::CaughtError;
use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::PgSqlErrorCode;

use crate::error::{first_value, spi, MemoryError, Result};
use crate::gucs;
use crate::pg::{in_recovery, reload_config_if_asked, shutdown_requested};
use crate::placement::TableSet;
use crate::runs::{self, Attempt, Driver, Job};

/// The `backend_type` of the workers in `pg_stat_activity`.
pub const WORKER_TYPE: &str = "agent_memory worker";
/// The `backend_type` of a forgetting pass's helper.
pub const HELPER_TYPE: &str = "agent_memory helper";
/// The `backend_type` of the launcher.
pub const LAUNCHER_TYPE: &str = "agent_memory launcher";
/// How often the launcher looks for the databases that do not exist yet.
const LAUNCHER_POLL: Duration = Duration::from_secs(5);

/// How soon a worker that failed to start (for example, its database does not exist yet) is
/// started again.
const RESTART_AFTER: Duration = Duration::from_secs(10);

/// The role the passes run as unless `agent_memory.worker_role` names another: a NOLOGIN role the
/// extension creates, with only the rights the passes need (see `sql/schema.sql`).
pub const DEFAULT_ROLE: &str = "agent_memory_worker";

/// The longest a worker sleeps before it looks at the schedule again.
const MAX_SLEEP: Duration = Duration::from_secs(60);

/// Registers one worker per configured database. Called from `_PG_init`.
pub fn register() {
    if !crate::pg::preloading() {
        log!(
            "agent_memory: loaded without shared_preload_libraries, so no forgetting or consolidation workers run; \
             add agent_memory to shared_preload_libraries to start them (memory_forget and memory_consolidate work by hand either way)"
        );
        return;
    }
    // The list a forgetting pass shares with its helper.
    crate::share::init();
    let databases = gucs::worker_databases();
    if databases.is_empty() {
        log!("agent_memory: agent_memory.worker_databases is empty, so no forgetting or consolidation workers run");
        return;
    }
    BackgroundWorkerBuilder::new("agent_memory launcher")
        .set_type(LAUNCHER_TYPE)
        .set_library("agent_memory")
        .set_function("agent_memory_launcher_main")
        .set_argument(None)
        .enable_spi_access()
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(Some(RESTART_AFTER))
        .load();
}

/// A dynamic background worker of this library that connects to database `db` (its extra)
/// once recovery has finished: `kind` is its `backend_type`, `function` its entry point.
fn database_worker(kind: &str, function: &str, db: &str) -> BackgroundWorkerBuilder {
    BackgroundWorkerBuilder::new(&format!("{kind} for database {db}"))
        .set_type(kind)
        .set_library("agent_memory")
        .set_function(function)
        .set_extra(db)
        .enable_spi_access()
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
}

/// Starts the worker of one database (dynamically, from the launcher).
fn start_worker(db: &str) -> bool {
    database_worker(WORKER_TYPE, "agent_memory_worker_main", db)
        .set_argument(None)
        .set_restart_time(Some(RESTART_AFTER))
        .load_dynamic()
        .is_ok()
}

/// The launcher: starts each database's worker once the database exists, then exits.
#[pg_guard]
#[allow(unsafe_code)] // a C symbol, the launcher's entry point
#[no_mangle]
pub extern "C-unwind" fn agent_memory_launcher_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    // Connected to no database: only the shared catalogs (pg_database) are read.
    BackgroundWorker::connect_worker_to_spi(None, None);
    let mut waiting: Vec<String> = gucs::worker_databases();
    let mut said_missing = std::collections::HashSet::new();
    while !waiting.is_empty() {
        if shutdown_requested() {
            crate::pg::exit_process(1);
        }
        let mut still = Vec::new();
        for db in waiting {
            match in_transaction(|| Ok(crate::pg::database_exists(&db))) {
                Ok(true) => {
                    if start_worker(&db) {
                        debug1!("agent_memory: started the worker of database {db}");
                    } else {
                        warning!("agent_memory: could not start the worker of database {db} (max_worker_processes?); trying again");
                        still.push(db);
                    }
                }
                Ok(false) => {
                    if said_missing.insert(db.clone()) {
                        log!("agent_memory: database {db} does not exist yet; its worker starts once it is created");
                    }
                    still.push(db);
                }
                Err(e) => {
                    warning!("agent_memory: could not look for database {db}: {}", e.message);
                    still.push(db);
                }
            }
        }
        waiting = still;
        if !waiting.is_empty() && !BackgroundWorker::wait_latch(Some(LAUNCHER_POLL)) {
            crate::pg::exit_process(1);
        }
    }
    // Exit code 0: the postmaster forgets the launcher; the workers it started stay registered.
    crate::pg::exit_process(0);
}

/// Whether another worker of this database is running (one a restarted launcher started
/// before): the one with the lowest process id stays.
fn another_worker_runs() -> Result<bool> {
    in_transaction(|| {
        Spi::connect_mut(|client| {
            first_value::<bool>(
                client
                    .select(
                        "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity a \
                          WHERE a.backend_type = $1 AND a.datid = (SELECT d.oid FROM pg_catalog.pg_database d \
                                                                     WHERE d.datname = pg_catalog.current_database()) \
                            AND a.pid < pg_catalog.pg_backend_pid())",
                        None,
                        &[WORKER_TYPE.into()],
                    )
                    .map_err(spi("looking for another worker"))?,
            )
            .map(|b| b.unwrap_or(false))
            .map_err(spi("looking for another worker"))
        })
    })
}

fn caught_message(e: CaughtError) -> MemoryError {
    let (code, message) = match &e {
        CaughtError::PostgresError(r) | CaughtError::ErrorReport(r) => (r.sql_error_code(), r.message().to_string()),
        CaughtError::RustPanic { ereport, .. } => (ereport.sql_error_code(), ereport.message().to_string()),
    };
    MemoryError::new(code, message)
}

/// Runs `f` in a transaction of its own: committed when it returns `Ok`, rolled back when it
/// returns an error or PostgreSQL raises one (which is returned, not re-raised).
fn in_transaction<R>(f: impl FnOnce() -> Result<R>) -> Result<R> {
    // The worker is connected to its database and no transaction is open between units.
    crate::pg::start_transaction();
    let outcome = PgTryBuilder::new(AssertUnwindSafe(|| {
        let r = f()?;
        // An error at commit is caught below like any other.
        crate::pg::commit_transaction();
        Ok(r)
    }))
    .catch_others(|e| Err(caught_message(e)))
    .execute();
    if outcome.is_err() {
        // A transaction is open (it failed or f returned an error).
        crate::pg::abort_transaction();
    }
    // What the transaction changed is counted where autovacuum and pg_stat_* see it (at most
    // once a second: PostgreSQL defers a flush that comes sooner).
    crate::pg::report_stats(false);
    outcome
}

/// The search path of every statement a worker runs: nothing outside `pg_catalog` can stand in for
/// a function or operator the extension's SQL names without a schema.
const WORKER_SEARCH_PATH: &str = "pg_catalog, pg_temp";

/// The `agent_memory.*` settings that a database- or role-level setting (`ALTER DATABASE ... SET`,
/// `ALTER ROLE ... SET`) changed for this worker's session, with their server-wide values: the
/// last valid line in the server's configuration files (postgresql.conf, its includes, ALTER
/// SYSTEM), else the built-in default. Settings the worker already pinned count as well, so a
/// reload is followed.
const SERVER_WIDE_SETTINGS: &str = "\
SELECT s.name::text, coalesce(f.setting, s.boot_val)::text \
  FROM pg_catalog.pg_settings s \
  LEFT JOIN LATERAL (SELECT fs.setting FROM pg_catalog.pg_file_settings fs \
                      WHERE fs.name OPERATOR(pg_catalog.=) s.name AND fs.error IS NULL \
                      ORDER BY fs.seqno DESC LIMIT 1) f ON true \
 WHERE s.name OPERATOR(pg_catalog.~~) 'agent\\_memory.%' \
   AND s.source OPERATOR(pg_catalog.=) ANY (ARRAY['database', 'user', 'database user', 'session']) \
   AND s.context OPERATOR(pg_catalog.<>) 'postmaster'";

/// Makes the worker's session independent of what a database owner can set: the search path is
/// `pg_catalog, pg_temp`, transactions are READ COMMITTED, and every `agent_memory.*` setting
/// has its server-wide value. Called
/// after connecting and after every reload of the configuration.
fn pin_session() -> Result<()> {
    in_transaction(|| {
        Spi::connect_mut(|client| {
            client
                .select("SELECT pg_catalog.set_config('search_path', $1, false)", None, &[WORKER_SEARCH_PATH.into()])
                .map_err(spi("setting the worker's search path"))?;
            // Each statement of a unit sees what committed before it (the pack rebuild relies on
            // it), whatever default a database sets.
            client
                .select("SELECT pg_catalog.set_config('default_transaction_isolation', 'read committed', false)", None, &[])
                .map_err(spi("setting the worker's isolation level"))?;
            let mut pinned = Vec::new();
            for row in client.select(SERVER_WIDE_SETTINGS, None, &[]).map_err(spi("reading the server-wide settings"))? {
                let name: Option<String> = row.get(1).map_err(spi("reading the server-wide settings"))?;
                let value: Option<String> = row.get(2).map_err(spi("reading the server-wide settings"))?;
                if let (Some(n), Some(v)) = (name, value) {
                    pinned.push((n, v));
                }
            }
            for (name, value) in pinned {
                client
                    .select("SELECT pg_catalog.set_config($1, $2, false)", None, &[name.clone().into(), value.into()])
                    .map_err(spi("applying a server-wide setting"))?;
            }
            Ok(())
        })
    })
}

/// Runs `f` in a transaction of its own, as `role` (`SET LOCAL ROLE`).
fn in_transaction_as<R>(role: &str, f: impl FnOnce(&mut SpiClient<'_>) -> Result<R>) -> Result<R> {
    in_transaction(|| {
        Spi::connect_mut(|client| {
            client
                .select("SELECT pg_catalog.set_config('role', $1, true)", None, &[role.into()])
                .map_err(spi("switching to the worker's role"))?;
            f(client)
        })
    })
}

/// Runs one batch of maintenance like `in_transaction_as`; unless
/// `agent_memory.worker_synchronous_commit` is on, it commits without waiting for its WAL to be
/// flushed (`SET LOCAL synchronous_commit = off`). That is safe for what a batch does: it is
/// atomic all the same, and any later transaction that saw its changes and commits
/// synchronously flushes them too (its commit record comes after them in the WAL); a crash can
/// only undo the last batches, which the next pass does again.
fn batch_as<R>(role: &str, f: impl FnOnce(&mut SpiClient<'_>) -> Result<R>) -> Result<R> {
    in_transaction_as(role, |client| {
        if !gucs::worker_synchronous_commit() {
            client
                .select("SELECT pg_catalog.set_config('synchronous_commit', 'off', true)", None, &[])
                .map_err(spi("setting the batch's commit mode"))?;
        }
        f(client)
    })
}

/// Runs each unit of a pass in its own transaction, as the pass's role, after the configured
/// pause; stops between units when the server asks the worker to exit.
struct WorkerDriver {
    role: String,
    /// The tables the pass runs on now.
    tables: TableSet,
    first: bool,
    longest: Duration,
}

impl Driver for WorkerDriver {
    fn tables(&self) -> &TableSet {
        &self.tables
    }

    fn unit<R>(&mut self, f: impl FnOnce(&mut SpiClient<'_>) -> Result<R>) -> Result<R> {
        self.run(f, true)
    }

    fn read<R>(&mut self, f: impl FnOnce(&mut SpiClient<'_>) -> Result<R>) -> Result<R> {
        self.run(f, false)
    }

    fn bookkeeping<R>(&mut self, f: impl FnOnce(&mut SpiClient<'_>) -> Result<R>) -> Result<R> {
        in_transaction_as(&self.role, f)
    }

    fn longest_unit_ms(&self) -> Option<f64> {
        Some(self.longest.as_secs_f64() * 1000.0)
    }
}

impl WorkerDriver {
    fn run<R>(&mut self, f: impl FnOnce(&mut SpiClient<'_>) -> Result<R>, writes: bool) -> Result<R> {
        // The pause is between two batches: a read that plans the next one does not wait.
        if writes && !self.first {
            let pause = gucs::batch_pause();
            if !pause.is_zero() && !BackgroundWorker::wait_latch(Some(pause)) {
                // (wait_latch consumed the SIGTERM: the main loop must still see it.)
                crate::pg::remember_shutdown();
            }
        }
        if writes {
            self.first = false;
        }
        reload_config_if_asked();
        if shutdown_requested() {
            return Err(MemoryError::new(
                PgSqlErrorCode::ERRCODE_ADMIN_SHUTDOWN,
                "the worker was asked to stop (SIGTERM) before the pass finished",
            ));
        }
        let started = Instant::now();
        // On a Citus node: the set's shards are held here for the unit (placement::TableSet::hold).
        let tables = self.tables.clone();
        let f = move |client: &mut SpiClient<'_>| {
            tables.hold_or_moved(client)?;
            f(client)
        };
        let result = if writes { batch_as(&self.role, f) } else { in_transaction_as(&self.role, f) };
        if writes {
            self.longest = self.longest.max(started.elapsed());
        }
        result
    }
}

/// The role to run as, when the extension is installed in this database.
fn role_if_installed() -> Result<Option<String>> {
    in_transaction(|| {
        Spi::connect_mut(|client| {
            let owner: Option<String> = first_value(
                client
                    .select(
                        "SELECT r.rolname::text FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_roles r ON r.oid = e.extowner \
                          WHERE e.extname = 'agent_memory'",
                        None,
                        &[],
                    )
                    .map_err(spi("looking for the extension"))?,
            )
            .map_err(spi("looking for the extension"))?;
            if owner.is_none() {
                return Ok(None);
            }
            let configured = gucs::worker_role();
            Ok(Some(if configured.is_empty() { DEFAULT_ROLE.to_string() } else { configured }))
        })
    })
}

/// Seconds until `job` is due: its interval after the last run a worker started, or after
/// `since` when there is none.
fn seconds_until_due(job: Job, interval: Duration, since: Instant) -> Result<f64> {
    let last: Option<f64> = in_transaction(|| {
        Spi::connect_mut(|client| {
            first_value::<f64>(
                client
                    .select(
                        "SELECT extract(epoch FROM clock_timestamp() - max(r.started_at))::float8 FROM agent_memory.runs r \
                          WHERE r.job = $1 AND r.by_worker",
                        None,
                        &[job.name().into()],
                    )
                    .map_err(spi("reading the last run"))?,
            )
            .map_err(spi("reading the last run"))
        })
    })?;
    let elapsed = last.unwrap_or_else(|| since.elapsed().as_secs_f64());
    Ok(interval.as_secs_f64() - elapsed)
}

fn run_job(job: Job, role: &str) {
    crate::pg::report_activity(Some(match job {
        Job::Forget => "agent_memory: forgetting pass",
        Job::Consolidate => "agent_memory: consolidation pass",
    }));
    let Some(sets) = table_sets(role, &format!("{} pass could not run", job.name())) else { return };
    let mut d = WorkerDriver { role: role.to_string(), tables: TableSet::base(), first: true, longest: Duration::ZERO };
    // One run, over each set of tables of this server in turn.
    let pass = |d: &mut WorkerDriver, run_id: i64| -> crate::error::Result<runs::Steps> {
        let mut steps = runs::Steps::new();
        for set in &sets {
            d.tables = set.clone();
            let more = match job {
                // The helper process runs on the extension's tables (one server); a Citus node's
                // sets of shards are forgotten by the worker alone.
                Job::Forget if !set.is_base() => crate::api::forget::forget_pass(d, false),
                Job::Forget => {
                    let mut helper = PassHelper { role, run_id, running: None, shared: None, longest: Duration::ZERO };
                    let steps = crate::api::forget::forget_pass_helped(d, &mut helper);
                    d.longest = d.longest.max(helper.longest);
                    steps
                }
                Job::Consolidate => crate::api::consolidate::consolidate_pass(d, false),
            }?;
            runs::add_steps(&mut steps, more);
        }
        Ok(steps)
    };
    let started = Instant::now();
    match runs::by_worker(&mut d, job, pass) {
        Ok(Attempt::Ran(Ok(steps))) => {
            let summary: Vec<String> = steps.iter().map(|s| format!("{} {} ({:.0} ms)", s.name, s.rows, s.ms)).collect();
            if steps.iter().all(|s| s.rows == 0) {
                debug1!("agent_memory: {} pass found nothing to do", job.name());
                return;
            }
            log!("agent_memory: {} pass done in {:.1} s: {}", job.name(), started.elapsed().as_secs_f64(), summary.join(", "));
        }
        Ok(Attempt::Ran(Err(message))) => {
            warning!("agent_memory: {} pass failed: {message}", job.name());
        }
        Ok(Attempt::Busy) => {
            log!("agent_memory: {} pass skipped: another {} pass holds the lock", job.name(), job.name());
        }
        Err(e) => {
            warning!("agent_memory: {} pass could not run: {}", job.name(), e.message);
        }
    }
}

/// The helper of one forgetting pass: a dynamic worker of the same database that runs the
/// expire and purge steps (`forget::HELPER_STEPS`) while the pass evicts, then evicts the users
/// it takes from the end of the pass's list (`crate::share`), and writes what it did into the
/// pass's run row, where the pass reads it once the helper has exited.
struct PassHelper<'a> {
    role: &'a str,
    run_id: i64,
    running: Option<DynamicBackgroundWorker>,
    /// The pass's slot in shared memory, while the helper may take users from it.
    shared: Option<crate::share::Reserved>,
    longest: Duration,
}

/// What a helper leaves in its pass's run row: the rows and milliseconds of each step it
/// finished, its longest batch, and the error it stopped with.
const HELPER_REPORT: &str = "\
UPDATE agent_memory.runs SET steps = steps || $2::jsonb, step_ms = step_ms || $3::jsonb, \
       longest_batch_ms = greatest(longest_batch_ms, $4), error = coalesce($5, error) \
 WHERE id = $1 AND status = 'running'";
const HELPER_READ: &str = "SELECT steps::text, step_ms::text, longest_batch_ms, error FROM agent_memory.runs WHERE id = $1";

impl crate::api::forget::Helper for PassHelper<'_> {
    fn start(&mut self) -> bool {
        if !gucs::forget_helper() {
            return false;
        }
        // Before the helper starts: it waits for the list while the slot says it is coming.
        self.shared = crate::share::reserve(self.run_id);
        let started = database_worker(HELPER_TYPE, "agent_memory_helper_main", BackgroundWorker::get_extra())
            .set_argument(self.run_id.into_datum())
            .set_restart_time(None)
            .set_notify_pid(crate::pg::backend_pid())
            .load_dynamic();
        match started {
            Ok(h) => {
                self.running = Some(h);
                true
            }
            Err(_) => {
                self.shared = None;
                log!("agent_memory: the forgetting pass could not start its helper (max_worker_processes?); it runs every step itself");
                false
            }
        }
    }

    fn share(&mut self, users: &[crate::share::OverUser]) -> bool {
        match &self.shared {
            Some(s) => {
                s.share(users);
                true
            }
            None => false,
        }
    }

    fn take_front(&mut self) -> Option<usize> {
        self.shared.as_ref()?.take_front()
    }

    fn stop(&mut self) {
        if let Some(s) = &self.shared {
            s.close();
        }
        if let Some(h) = self.running.take() {
            let _ = h.terminate().wait_for_shutdown();
        }
    }

    fn join(&mut self) -> Result<crate::runs::Steps> {
        // The pass's part is done: the helper finishes the users it took, and takes no more (a
        // helper still waiting for the list stops waiting).
        if let Some(s) = &self.shared {
            s.close();
        }
        if let Some(h) = self.running.take() {
            // Until it has exited; a SIGTERM to this worker is passed on.
            while let Ok(_) | Err(BackgroundWorkerStatus::NotYetStarted) = h.pid() {
                if shutdown_requested() {
                    let _ = h.terminate().wait_for_shutdown();
                    break;
                }
                if !BackgroundWorker::wait_latch(Some(Duration::from_millis(100))) {
                    crate::pg::remember_shutdown();
                }
            }
        }
        let (steps, ms, longest, error) = in_transaction_as(self.role, |c| {
            let row = c.select(HELPER_READ, None, &[self.run_id.into()]).map_err(spi("reading the helper's report"))?;
            let row = row.first();
            let e = spi("reading the helper's report");
            Ok((
                row.get::<String>(1).map_err(&e)?,
                row.get::<String>(2).map_err(&e)?,
                row.get::<f64>(3).map_err(&e)?,
                row.get::<String>(4).map_err(&e)?,
            ))
        })?;
        // The helper has exited: the slot is free for another pass.
        self.shared = None;
        self.longest = Duration::from_secs_f64(longest.unwrap_or(0.0).max(0.0) / 1000.0);
        if let Some(message) = error {
            return Err(MemoryError::new(PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, message));
        }
        let parse = |t: Option<String>| serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(t.as_deref().unwrap_or("{}"));
        let (Ok(steps), Ok(ms)) = (parse(steps), parse(ms)) else { return Ok(Vec::new()) };
        Ok(crate::api::forget::HELPER_STEPS
            .iter()
            .filter_map(|&name| {
                Some(crate::runs::Step { name, rows: steps.get(name)?.as_i64()?, ms: ms.get(name).and_then(|v| v.as_f64()).unwrap_or(0.0) })
            })
            .collect())
    }
}

/// A forgetting pass's helper: connects to the pass's database like its worker, runs the
/// expire and purge steps as the worker's role, and reports each into the run row. Started by
/// the pass (`PassHelper`), never restarted: a step it did not report is run by the pass.
#[pg_guard]
#[allow(unsafe_code)] // a C symbol, the helper's entry point
#[no_mangle]
pub extern "C-unwind" fn agent_memory_helper_main(arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    let run_id = arg.value() as i64;
    let db = BackgroundWorker::get_extra().to_string();
    BackgroundWorker::connect_worker_to_spi(Some(&db), None);
    let role = match pin_session().and_then(|_| role_if_installed()) {
        Ok(Some(role)) => role,
        Ok(None) => crate::pg::exit_process(0),
        Err(e) => {
            warning!("agent_memory: the forgetting pass's helper could not start: {}", e.message);
            crate::pg::exit_process(0);
        }
    };
    crate::pg::report_activity(Some(&format!("agent_memory: helper of forgetting run {run_id}")));
    // The helper of a pass over the extension's tables (one server's only set).
    let mut d = WorkerDriver { role: role.clone(), tables: TableSet::base(), first: true, longest: Duration::ZERO };
    for name in crate::api::forget::HELPER_STEPS {
        let outcome = crate::runs::step(name, || match name {
            "evict" => helper_evict(&mut d, run_id),
            _ => crate::api::forget::helper_step(&mut d, name),
        });
        let (steps, ms, error) = match &outcome {
            Ok(s) => (serde_json::json!({ name: s.rows }), serde_json::json!({ name: (s.ms * 10.0).round() / 10.0 }), None),
            Err(e) => (serde_json::json!({}), serde_json::json!({}), Some(e.message.clone())),
        };
        let longest = d.longest.as_secs_f64() * 1000.0;
        let reported = in_transaction_as(&role, |c| {
            c.update(HELPER_REPORT, None, &[run_id.into(), steps.to_string().into(), ms.to_string().into(), longest.into(), error.into()])
                .map_err(spi("reporting to the pass"))?;
            Ok(())
        });
        if let Err(e) = reported {
            warning!("agent_memory: the forgetting pass's helper could not report: {}", e.message);
        }
        if outcome.is_err() {
            break;
        }
    }
    crate::pg::exit_process(0);
}

/// The helper's part of the evict step of run `run_id`: once the pass has shared its list of
/// users above the capacity, the users it takes from the list's end. Nothing when the pass
/// shares none (no slot was free), or closes the list before.
fn helper_evict(d: &mut WorkerDriver, run_id: i64) -> Result<i64> {
    use crate::share::Offer;
    loop {
        match crate::share::offer(run_id) {
            Offer::None => return Ok(0),
            Offer::Users(first, users) => {
                let (cap, batch) = (gucs::capacity().unwrap_or(i64::MAX), gucs::batch_size());
                return crate::api::forget::evict_users(d, &users, first, cap, batch, || crate::share::take_back(run_id));
            }
            Offer::NotYet => {
                // The pass is still counting its users.
                if !BackgroundWorker::wait_latch(Some(Duration::from_millis(20))) {
                    crate::pg::remember_shutdown();
                }
                if shutdown_requested() {
                    return Ok(0);
                }
            }
        }
    }
}

/// Marks as failed the runs a crash left 'running'.
fn mark_orphans() {
    match in_transaction(|| {
        Spi::connect_mut(|c| c.update(runs::FAIL_ORPHANS, None, &[]).map(|t| t.len()).map_err(spi("marking unfinished runs")))
    }) {
        Ok(n) if n > 0 => log!("agent_memory: marked {n} unfinished run(s) as failed"),
        Ok(_) => {}
        Err(e) => warning!("agent_memory: could not mark unfinished runs: {}", e.message),
    }
}

/// How many (user, model) pairs one pack pass rebuilds at most.
const PACKS_PER_PASS: i64 = 500;

/// Rebuilds the packs that are out of date (`api::pack::due`), each user and model in a
/// transaction of its own.
fn run_pack_pass(role: &str) {
    let started = Instant::now();
    let Some(sets) = table_sets(role, "pack pass could not run") else { return };
    for set in &sets {
        match in_transaction_as(role, |c| crate::api::pack::sweep(c, set)) {
            Ok(0) => {}
            Ok(n) => log!("agent_memory: pack pass dropped {n} packed row(s) of users that have none"),
            Err(e) => warning!("agent_memory: sweeping orphaned packs failed: {}", e.message),
        }
    }
    if let Err(e) = in_transaction_as(role, crate::embedder::trim) {
        warning!("agent_memory: trimming the embedding cache failed: {}", e.message);
    }
    let mut due = Vec::new();
    for set in &sets {
        match in_transaction_as(role, |c| crate::api::pack::due(c, set, PACKS_PER_PASS)) {
            Ok(d) => due.extend(d.into_iter().map(|(user, model)| (set, user, model))),
            Err(e) => {
                warning!("agent_memory: pack pass could not run: {}", e.message);
                return;
            }
        }
    }
    if !due.is_empty() {
        crate::pg::report_activity(Some("agent_memory: pack rebuild"));
    }
    let (mut built, mut memories) = (0, 0);
    for (set, user, model) in &due {
        reload_config_if_asked();
        if shutdown_requested() {
            break;
        }
        fold_hits_if_due(role);
        match batch_as(role, |c| crate::api::pack::build(c, set, user, model)) {
            Ok(n) => {
                built += 1;
                memories += n;
            }
            Err(e) => warning!("agent_memory: packing the memories of one user failed: {}", e.message),
        }
    }
    if built > 0 {
        log!("agent_memory: pack pass done in {:.1} s: {built} user(s) and model(s), {memories} memories", started.elapsed().as_secs_f64());
    }
}

/// The sets of tables this server's passes run on (`placement::local_table_sets`); `None`,
/// with a warning that starts with `failed`, when they cannot be read.
fn table_sets(role: &str, failed: &str) -> Option<Vec<TableSet>> {
    match in_transaction_as(role, |_| crate::placement::local_table_sets()) {
        Ok(sets) => Some(sets),
        Err(e) => {
            warning!("agent_memory: {failed}: {}", e.message);
            None
        }
    }
}

/// The longest one embedding pass runs before the other jobs get their turn.
const EMBED_PASS_LIMIT: Duration = Duration::from_secs(10);

/// Embeds the memories written without an embedding, a batch per transaction
/// (`api::embed::embed_pending`), until none is left, the pass has run `EMBED_PASS_LIMIT`, or
/// the worker is asked to stop. A model that cannot be loaded is reported once per pass and its
/// rows are passed over (they stay found by keyword recall) for a minute, then tried again; a
/// row the model fails on alone is set aside with a warning until the worker restarts.
fn run_embed_pass(role: &str) {
    let started = Instant::now();
    let Some(sets) = table_sets(role, "embedding memories failed") else { return };
    let mut total = 0i64;
    let mut said: Vec<String> = Vec::new();
    for set in &sets {
        total += embed_set(role, set, started, &mut said);
    }
    if total > 0 {
        log!("agent_memory: embedded {total} memories in {:.1} s", started.elapsed().as_secs_f64());
    }
}

/// The embedding pass over one set of tables; returns the memories it embedded.
fn embed_set(role: &str, set: &TableSet, started: Instant, said: &mut Vec<String>) -> i64 {
    let (mut after, mut total) = (i64::MIN, 0i64);
    loop {
        reload_config_if_asked();
        if shutdown_requested() || started.elapsed() > EMBED_PASS_LIMIT {
            break;
        }
        fold_hits_if_due(role);
        match batch_as(role, |c| crate::api::embed::embed_pending(c, set, after, gucs::embed_batch_size())) {
            Ok(b) => {
                if total == 0 && b.embedded > 0 {
                    crate::pg::report_activity(Some("agent_memory: embedding memories"));
                }
                total += b.embedded;
                for (model, why) in b.failed {
                    if !said.contains(&model) {
                        warning!("agent_memory: memories of model \"{model}\" wait for their embedding: {why}");
                        said.push(model);
                    }
                }
                match b.last_id {
                    Some(id) => after = id,
                    None => break,
                }
            }
            Err(e) => {
                warning!("agent_memory: embedding memories failed: {}", e.message);
                break;
            }
        }
    }
    total
}

/// Runs `pass` when `interval` has gone by since `last` (or it never ran); returns how long
/// until it is due again.
fn when_due(last: &mut Option<Instant>, interval: Duration, pass: impl FnOnce()) -> Duration {
    match last.map(|t| t.elapsed()) {
        Some(e) if e < interval => interval - e,
        _ => {
            pass();
            *last = Some(Instant::now());
            interval
        }
    }
}

thread_local! {
    /// When the worker last folded recall's hits.
    static LAST_FOLD: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
}

/// Folds recall's hits into the memories (`api::hits`) when `agent_memory.hit_fold_interval`
/// has gone by since the last fold; returns how long until the next. Called from the main loop
/// and between the batches of the pack and embedding passes.
fn fold_hits_if_due(role: &str) -> Duration {
    let interval = gucs::hit_fold_interval();
    if let Some(e) = LAST_FOLD.with(|l| l.get()).map(|t| t.elapsed()) {
        if e < interval {
            return interval - e;
        }
    }
    fold_hits(role);
    LAST_FOLD.with(|l| l.set(Some(Instant::now())));
    interval
}

fn fold_hits(role: &str) {
    if let Err(e) = batch_as(role, crate::api::hits::fold) {
        // The hits went back to shared memory with the rollback; the next fold tries again.
        warning!("agent_memory: folding recall's hits failed: {}", e.message);
    }
}

/// Runs the jobs that are due; returns how long to sleep until the next one.
fn run_due_jobs(role: &str, since: Instant, last_pack: &mut Option<Instant>, last_embed: &mut Option<Instant>) -> Duration {
    let mut sleep = MAX_SLEEP;
    sleep = sleep.min(fold_hits_if_due(role));
    sleep = sleep.min(when_due(last_embed, gucs::embed_interval(), || run_embed_pass(role)));
    sleep = sleep.min(when_due(last_pack, gucs::pack_interval(), || run_pack_pass(role)));
    for (job, interval) in [(Job::Forget, gucs::forget_interval()), (Job::Consolidate, gucs::consolidate_interval())] {
        if shutdown_requested() {
            break;
        }
        match seconds_until_due(job, interval, since) {
            Ok(s) if s <= 0.0 => {
                run_job(job, role);
                sleep = sleep.min(interval);
            }
            Ok(s) => sleep = sleep.min(Duration::from_secs_f64(s)),
            Err(e) => warning!("agent_memory: could not read the schedule: {}", e.message),
        }
    }
    sleep
}

/// Whether the database's schema is this library's version. When it is not, the worker idles
/// (saying why once) until `ALTER EXTENSION agent_memory UPDATE` has run there.
fn schema_current(db: &str, said: &mut bool) -> bool {
    match in_transaction(crate::version::check) {
        Ok(()) => {
            if *said {
                log!("agent_memory: the schema in database {db} is now version {}; the worker resumes", crate::version::LIBRARY);
            }
            *said = false;
            true
        }
        Err(e) => {
            if !*said {
                log!("agent_memory: the worker in database {db} is idle: {}. {}", e.message, e.hint.as_deref().unwrap_or(""));
                *said = true;
            }
            false
        }
    }
}

/// The worker's main loop.
#[pg_guard]
#[allow(unsafe_code)] // a C symbol, the worker's entry point
#[no_mangle]
pub extern "C-unwind" fn agent_memory_worker_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    crate::embedder::for_the_worker();
    let db = BackgroundWorker::get_extra().to_string();
    BackgroundWorker::connect_worker_to_spi(Some(&db), None);
    if matches!(another_worker_runs(), Ok(true)) {
        // Exit code 0: this registration is forgotten; the running worker goes on.
        log!("agent_memory: a worker of database {db} is already running; this one leaves");
        crate::pg::exit_process(0);
    }
    log!("agent_memory: worker started in database {db}");
    let since = Instant::now();
    let mut orphans_marked = false;
    let mut said_missing = false;
    let mut said_outdated = false;
    let mut last_pack = None;
    let mut last_embed = None;
    // The role the worker folds recall's hits as, while it does (api::hits).
    let mut folding_as: Option<String> = None;
    loop {
        reload_config_if_asked();
        if shutdown_requested() {
            break;
        }
        let mut sleep = MAX_SLEEP;
        let mut folds = None;
        if !in_recovery() {
            if let Err(e) = pin_session() {
                warning!("agent_memory: could not pin the worker's settings: {}", e.message);
                if !BackgroundWorker::wait_latch(Some(MAX_SLEEP)) {
                    break;
                }
                continue;
            }
            match role_if_installed() {
                Ok(None) => {
                    if !said_missing {
                        log!("agent_memory: the extension is not installed in database {db}; the worker checks again every minute");
                        said_missing = true;
                    }
                }
                Ok(Some(_)) if !schema_current(&db, &mut said_outdated) => {}
                Ok(Some(role)) => {
                    said_missing = false;
                    if !orphans_marked {
                        mark_orphans();
                        orphans_marked = true;
                    }
                    if gucs::workers_enabled() {
                        // From now on this database's recalls leave their hits to this worker.
                        crate::share::folding(true);
                        folds = Some(role.clone());
                        sleep = run_due_jobs(&role, since, &mut last_pack, &mut last_embed);
                    }
                }
                Err(e) => warning!("agent_memory: could not look for the extension: {}", e.message),
            }
        }
        if folds.is_none() {
            // Recalls touch their rows themselves again; what they left here is folded now.
            crate::share::folding(false);
            if let Some(role) = folding_as.take() {
                fold_hits(&role);
            }
        }
        if folds.is_some() {
            folding_as = folds;
        }
        // Before sleeping, whatever the last transactions changed is counted, and the worker
        // shows as idle.
        crate::pg::report_stats(true);
        crate::pg::report_activity(None);
        if shutdown_requested() || !BackgroundWorker::wait_latch(Some(sleep.max(Duration::from_millis(10)))) {
            break;
        }
    }
    // The hits recorded since the last fold are folded on the way out (a fast shutdown stops the
    // backends at the same time: a recall answered after this fold loses its hit).
    crate::share::folding(false);
    if let Some(role) = folding_as {
        fold_hits(&role);
    }
    // Exit code 1: the postmaster starts the worker again after RESTART_AFTER, unless the
    // server is shutting down (a terminated backend, or a dropped and recreated database, does
    // not leave the database without its worker).
    log!("agent_memory: worker in database {db} stopped");
    crate::pg::exit_process(1);
}
