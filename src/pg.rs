//! Safe wrappers over the parts of PostgreSQL's C API the extension calls directly: transaction
//! state, the current role, and what a background worker needs (signals, transactions, exit).
//! With `src/vector.rs` (pgvector's datums), `src/scan.rs` (the direct index scan), `src/json.rs`,
//! `src/share.rs` (shared memory) and `src/version.rs` (symbols), this is where `unsafe` is
//! allowed (`unsafe_code` is denied everywhere else, in Cargo.toml's `[lints]`).
#![allow(unsafe_code)]

use pgrx::pg_sys;

/// The start time of the current transaction (what `now()` returns), in PostgreSQL's
/// microseconds since 2000-01-01.
pub fn transaction_start() -> i64 {
    // SAFETY: reads a timestamp PostgreSQL keeps for the current transaction.
    unsafe { pg_sys::GetCurrentTransactionStartTimestamp() }
}

/// This backend's process id.
pub fn backend_pid() -> i32 {
    // SAFETY: a process-global PostgreSQL sets at the process's start.
    unsafe { pg_sys::MyProcPid }
}

/// Whether the current role is a superuser (row-level security never applies to it).
pub fn is_superuser() -> bool {
    // SAFETY: reads the current role's attributes from the syscache.
    unsafe { pg_sys::superuser() }
}

/// Whether the server is a standby (or still recovering).
pub fn in_recovery() -> bool {
    // SAFETY: a plain read of shared state.
    unsafe { pg_sys::RecoveryInProgress() }
}

/// Whether this transaction cannot write (a standby, or `SET TRANSACTION READ ONLY`).
pub fn read_only() -> bool {
    // SAFETY: a plain read of backend-global state.
    let xact_read_only = unsafe { pg_sys::XactReadOnly };
    xact_read_only || in_recovery()
}

/// Whether the library is being loaded by `shared_preload_libraries` (the only time background
/// workers can be registered).
pub fn preloading() -> bool {
    // SAFETY: reads a backend-global flag that PostgreSQL sets while it loads preloaded libraries.
    unsafe { pg_sys::process_shared_preload_libraries_in_progress }
}

/// Marks a settings prefix as the extension's: an unknown setting under it is refused.
pub fn reserve_settings_prefix(prefix: &std::ffi::CStr) {
    // SAFETY: PostgreSQL copies the prefix; called from _PG_init.
    unsafe { pg_sys::MarkGUCPrefixReserved(prefix.as_ptr()) }
}

/// Whether SIGTERM asked this process to stop.
pub fn shutdown_requested() -> bool {
    // SAFETY: a flag set by the SIGTERM handler.
    unsafe { std::ptr::read_volatile(&raw const pg_sys::ShutdownRequestPending) != 0 }
}

/// Remembers a SIGTERM that a latch wait consumed, for the worker's main loop.
pub fn remember_shutdown() {
    // SAFETY: the same flag the SIGTERM handler sets.
    unsafe { std::ptr::write_volatile(&raw mut pg_sys::ShutdownRequestPending, 1) };
}

/// Re-reads the configuration files when SIGHUP asked for it.
pub fn reload_config_if_asked() {
    // SAFETY: ConfigReloadPending is set by the SIGHUP handler; ProcessConfigFile re-reads
    // postgresql.conf outside of any transaction, as every PostgreSQL process does.
    unsafe {
        if std::ptr::read_volatile(&raw const pg_sys::ConfigReloadPending) != 0 {
            std::ptr::write_volatile(&raw mut pg_sys::ConfigReloadPending, 0);
            pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP);
        }
    }
}

/// Starts a transaction with a snapshot, in a background worker between transactions.
pub fn start_transaction() {
    // SAFETY: PostgreSQL's own calls for a worker's transaction; errors are raised as ERRORs.
    unsafe {
        pg_sys::SetCurrentStatementStartTimestamp();
        pg_sys::StartTransactionCommand();
        pg_sys::PushActiveSnapshot(pg_sys::GetTransactionSnapshot());
    }
}

/// Commits the transaction [`start_transaction`] began.
pub fn commit_transaction() {
    // SAFETY: pops the snapshot pushed by start_transaction and commits; an error at commit is
    // raised as an ERROR.
    unsafe {
        pg_sys::PopActiveSnapshot();
        pg_sys::CommitTransactionCommand();
    }
}

/// Aborts the open transaction (after an error), releasing its snapshot, locks and memory.
pub fn abort_transaction() {
    // SAFETY: valid whenever a transaction is open or failed.
    unsafe { pg_sys::AbortCurrentTransaction() };
}

/// Publishes this process's pending cumulative statistics (rows inserted, updated, deleted and
/// dead per table, WAL written, ...) to shared memory, where `pg_stat_*` views and autovacuum read
/// them. A client backend does this when it goes idle; a background worker must do it itself, or
/// nothing it changed is counted until it exits: autovacuum would not see the dead rows its passes
/// leave. Unless `force`, PostgreSQL skips the flush if the last one was less than a second ago.
/// Called between transactions.
pub fn report_stats(force: bool) {
    // SAFETY: PostgreSQL's own call, outside of any transaction, as its backends make it.
    unsafe {
        pg_sys::pgstat_report_stat(force);
    }
}

/// What `pg_stat_activity` shows for this background process: `state` active with `what` as
/// its `query` (and `query_start` now), or idle when `what` is `None`.
pub fn report_activity(what: Option<&str>) {
    // A NUL would end the C string: it becomes a space (the worker's texts have none).
    let text = what.map(|w| std::ffi::CString::new(w.replace('\0', " ")).unwrap_or_default());
    let (state, ptr) = match &text {
        Some(t) => (pg_sys::BackendState::STATE_RUNNING, t.as_ptr()),
        None => (pg_sys::BackendState::STATE_IDLE, std::ptr::null()),
    };
    // SAFETY: PostgreSQL copies the text into the process's shared status entry before it returns.
    unsafe { pg_sys::pgstat_report_activity(state, ptr) }
}

/// Whether a database of that name exists (in a transaction). Works in a process connected to
/// no database, such as the workers' launcher: it reads pg_database, a shared catalog, with a
/// heap scan, as PostgreSQL's autovacuum launcher does (no index or other catalog is opened).
pub fn database_exists(name: &str) -> bool {
    let mut found = false;
    // SAFETY: pg_database is opened, scanned and closed with PostgreSQL's catalog scan calls;
    // each tuple is a pg_database row, read only while the scan holds it.
    unsafe {
        let lock = pg_sys::AccessShareLock as pg_sys::LOCKMODE;
        let rel = pg_sys::table_open(pg_sys::DatabaseRelationId, lock);
        let scan = pg_sys::table_beginscan_catalog(rel, 0, std::ptr::null_mut());
        loop {
            let tuple = pg_sys::heap_getnext(scan, pg_sys::ScanDirection::ForwardScanDirection);
            if tuple.is_null() {
                break;
            }
            let row = pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_database>(tuple);
            if std::ffi::CStr::from_ptr((*row).datname.data.as_ptr()).to_bytes() == name.as_bytes() {
                found = true;
                break;
            }
        }
        pg_sys::table_endscan(scan);
        pg_sys::table_close(rel, lock);
    }
    found
}

/// Ends the process the way PostgreSQL's own processes do.
pub fn exit_process(code: i32) -> ! {
    // SAFETY: proc_exit runs the exit callbacks and does not return.
    unsafe { pg_sys::proc_exit(code) }
}

/// Runs `f` with the rights of the role `owner` (the extension's owner), as a `SECURITY DEFINER`
/// function would: what `f` runs through SPI is checked against that role, and the caller's role
/// is back when `f` returns or unwinds (an error also restores it when its transaction or
/// subtransaction aborts, as for any `SECURITY DEFINER` function). Used only to read the
/// extension's secrets (`agent_memory.lock_salt`), which no application role may read.
pub fn with_rights_of<T>(owner: pg_sys::Oid, f: impl FnOnce() -> T) -> T {
    struct Restore(pg_sys::Oid, i32);
    impl Drop for Restore {
        fn drop(&mut self) {
            // SAFETY: puts back the user id and security context read below.
            unsafe { pg_sys::SetUserIdAndSecContext(self.0, self.1) }
        }
    }
    let (mut user, mut context) = (pg_sys::Oid::INVALID, 0i32);
    // SAFETY: reads the current user id and security context into the two out-parameters.
    unsafe { pg_sys::GetUserIdAndSecContext(&mut user, &mut context) };
    let _restore = Restore(user, context);
    // SAFETY: the same switch fmgr_security_definer makes for a SECURITY DEFINER function.
    unsafe { pg_sys::SetUserIdAndSecContext(owner, context | pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32) };
    f()
}

/// The server's share directory (`pg_config --sharedir`), as the running server computes it.
pub fn share_dir() -> std::path::PathBuf {
    let mut buf = [0 as std::ffi::c_char; pg_sys::MAXPGPATH as usize];
    // SAFETY: my_exec_path is the NUL-terminated path PostgreSQL set at start; get_share_path
    // writes at most MAXPGPATH bytes, NUL-terminated, into `buf`.
    let path = unsafe {
        pg_sys::get_share_path(std::ptr::addr_of!(pg_sys::my_exec_path).cast(), buf.as_mut_ptr());
        std::ffi::CStr::from_ptr(buf.as_ptr())
    };
    std::path::PathBuf::from(path.to_string_lossy().into_owned())
}

/// The role whose rights apply now (`current_user`: a SECURITY DEFINER function's owner inside it).
pub fn current_role() -> pg_sys::Oid {
    // SAFETY: reads a backend-global PostgreSQL keeps for the current role.
    unsafe { pg_sys::GetUserId() }
}

/// What tells the active snapshot from another: its horizon, its command, and how many
/// transactions had ended when it was taken. Two reads under snapshots with the same key see
/// the same rows. `None` when there is no active snapshot, or it does not count ended
/// transactions.
pub fn snapshot_key() -> Option<(u32, u32, u32, u64)> {
    // SAFETY: ActiveSnapshotSet and GetActiveSnapshot read the backend's snapshot stack; the
    // snapshot is only read, while it is active.
    unsafe {
        if !pg_sys::ActiveSnapshotSet() {
            return None;
        }
        let s = pg_sys::GetActiveSnapshot();
        if s.is_null() || (*s).snapXactCompletionCount == 0 {
            return None;
        }
        Some(((*s).xmin.into_inner(), (*s).xmax.into_inner(), (*s).curcid, (*s).snapXactCompletionCount))
    }
}
