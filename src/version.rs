//! The installed schema's version against the library's.
//!
//! The library is replaced (a package upgrade, `cargo pgrx install`) before an operator runs
//! `ALTER EXTENSION agent_memory UPDATE` in each database, so for a while a database's functions
//! are those of an older version, served by this library. Two rules keep that window safe:
//!
//! * A function whose SQL signature changed between versions gets a new C symbol (its Rust name
//!   changes), and its old symbol stays here as a stub that refuses with a clear error. An older
//!   script's function never reaches code that would read arguments it was not given.
//! * A function that kept its signature but reads or writes the extension's tables first calls
//!   [`require_current_schema`], and the background workers idle (with a log line) until the
//!   database is updated.
//!
//! Versions: `sql/agent_memory--0.1.0.sql` is the frozen script of 0.1.0; each later version is
//! reached by `sql/agent_memory--<from>--<to>.sql` (tests/upgrade.sh checks the path).

#![allow(unsafe_code)] // the stubs are C symbols

use pgrx::prelude::*;
use pgrx::spi::SpiClient;

use crate::error::{first_value, spi, MemoryError, Result};

/// The version of this library, and of the schema it serves.
pub const LIBRARY: &str = env!("CARGO_PKG_VERSION");

const INSTALLED: &str = "SELECT extversion::text FROM pg_catalog.pg_extension WHERE extname = 'agent_memory'";

/// The version of the extension installed in this database, if it is.
pub fn installed(client: &mut SpiClient<'_>) -> Result<Option<String>> {
    first_value::<String>(crate::plans::read(client, INSTALLED, &[]).map_err(spi("reading the extension's version"))?)
        .map_err(spi("reading the extension's version"))
}

/// A version's numbers, for ordering ("0.10.0" after "0.9.1").
fn numbers(v: &str) -> Vec<u64> {
    v.split('.').map(|p| p.parse().unwrap_or(0)).collect()
}

/// The error of a call into a schema of another version than the library's.
pub fn outdated(installed: &str) -> MemoryError {
    let e = MemoryError::new(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!("the agent_memory schema of this database is version {installed}, and the library is version {LIBRARY}"),
    );
    if numbers(installed) > numbers(LIBRARY) {
        e.detail("This session loaded the library before a newer one was installed and the database updated.")
            .hint("Reconnect (a server restart for the background workers) to load the installed library.")
    } else {
        e.detail("The library was upgraded; the extension's SQL objects in this database were not.")
            .hint("Run ALTER EXTENSION agent_memory UPDATE in this database (the update keeps every row).")
    }
}

/// Ok when the installed schema is this library's version.
pub fn require_current_schema(client: &mut SpiClient<'_>) -> Result<()> {
    match installed(client)? {
        Some(v) if v != LIBRARY => Err(outdated(&v)),
        _ => Ok(()),
    }
}

/// Stubs for the C symbols of older versions' functions whose SQL signature has since changed:
/// each refuses with [`outdated`].
macro_rules! retired_symbols {
    ($($symbol:ident, $finfo:ident;)*) => {$(
        #[unsafe(no_mangle)]
        #[doc(hidden)]
        pub extern "C" fn $finfo() -> &'static pg_sys::Pg_finfo_record {
            const V1_API: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
            &V1_API
        }

        #[unsafe(no_mangle)]
        #[doc(hidden)]
        #[pg_guard]
        pub extern "C-unwind" fn $symbol(_fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
            refuse_retired()
        }
    )*};
}

fn refuse_retired() -> ! {
    let v = Spi::connect_mut(installed).unwrap_or(None);
    outdated(v.as_deref().unwrap_or("unknown")).raise()
}

// 0.1.0: memory_recall, memory_reconcile (each for vector, halfvec and text), memory_record_turn
// and memory_importance took fewer arguments (and memory_recall returned fewer columns).
retired_symbols! {
    memory_recall_wrapper, pg_finfo_memory_recall_wrapper;
    memory_recall_halfvec_wrapper, pg_finfo_memory_recall_halfvec_wrapper;
    memory_recall_text_wrapper, pg_finfo_memory_recall_text_wrapper;
    memory_reconcile_wrapper, pg_finfo_memory_reconcile_wrapper;
    memory_reconcile_halfvec_wrapper, pg_finfo_memory_reconcile_halfvec_wrapper;
    memory_reconcile_text_wrapper, pg_finfo_memory_reconcile_text_wrapper;
    memory_record_turn_wrapper, pg_finfo_memory_record_turn_wrapper;
    memory_importance_wrapper, pg_finfo_memory_importance_wrapper;
}

// 0.2.0 to 0.8.0: memory_recall, memory_context and memory_context_text (for vector, halfvec and
// text) took no time bounds (since, until, as_of).
retired_symbols! {
    recall_vector_wrapper, pg_finfo_recall_vector_wrapper;
    recall_halfvec_wrapper, pg_finfo_recall_halfvec_wrapper;
    recall_text_wrapper, pg_finfo_recall_text_wrapper;
    memory_context_wrapper, pg_finfo_memory_context_wrapper;
    memory_context_text_wrapper, pg_finfo_memory_context_text_wrapper;
    memory_context_halfvec_wrapper, pg_finfo_memory_context_halfvec_wrapper;
    memory_context_text_halfvec_wrapper, pg_finfo_memory_context_text_halfvec_wrapper;
    memory_context_text_query_wrapper, pg_finfo_memory_context_text_query_wrapper;
    memory_context_text_text_query_wrapper, pg_finfo_memory_context_text_text_query_wrapper;
}

/// [`require_current_schema`] in a connection of its own, for a caller that has none open (the
/// passes). The SQL functions call `require_current_schema` first thing in their own connection.
pub fn check() -> Result<()> {
    Spi::connect_mut(require_current_schema)
}
