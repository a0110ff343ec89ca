//! agent_memory: long-term memory for AI agents in plain SQL, inside PostgreSQL beside pgvector.
//!
//! * [`api`]: the SQL-visible functions, one module per concept;
//! * [`vector`]: pgvector's `vector` / `halfvec` datums;
//! * [`pg`]: safe wrappers over PostgreSQL's C API (transaction state, the worker's signals);
//!   with `vector`, `scan`, `json`, `share` and `version`, the only modules where `unsafe` is allowed;
//! * [`gucs`]: every `agent_memory.*` setting;
//! * [`error`]: every error, with its SQLSTATE and hint;
//! * [`plans`]: prepared statements kept for the life of the backend;
//! * [`recall`]: recall's pipeline (candidates → channels → fusion → decay → touch), and its
//!   packed path; `api::recall` and `api::context` are its SQL glue;
//! * [`scan`]: the direct index scan recall reads its candidates with;
//! * [`embedder`]: the models the server embeds text with (loading, the cache); the inference
//!   itself is the `agent_memory_embed` crate;
//! * [`locks`]: the advisory lock keys (per user, per job), salted with a secret;
//! * [`runs`]: how forgetting and consolidation run their batches, their lock and run rows;
//! * [`worker`]: the background workers that run them on a schedule, rebuild packs and embed
//!   the memories written without an embedding;
//! * [`share`]: what a worker's forgetting pass shares with its helper, in shared memory;
//! * [`placement`]: which relations hold a user's rows here (the extension's tables, or a Citus
//!   node's shards); [`delegation`]: the calls Citus delegates, guarded before Citus plans them;
//! * [`version`]: the installed schema's version against the library's (upgrades).
//!
//! The algorithms (decay, scoring, top-k, vector math) live in the `agent_memory_core` crate,
//! with no PostgreSQL dependency.

use pgrx::prelude::*;

pub mod api;
pub mod catalog;
pub mod delegation;
pub mod embedder;
pub mod error;
pub mod gucs;
pub mod json;
pub mod locks;
pub mod pg;
pub mod placement;
pub mod plans;
pub mod recall;
pub mod runs;
pub mod scan;
pub mod share;
pub mod vector;
pub mod version;
pub mod worker;

::pgrx::pg_module_magic!(name, version);

extension_sql_file!("../sql/schema.sql", name = "schema", bootstrap);
extension_sql_file!("../sql/distribute.sql", name = "distribute", requires = ["schema"]);
extension_sql_file!("../sql/access.sql", name = "access", finalize);

#[allow(non_snake_case)]
#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    // A client never sees a Rust backtrace: pgrx appends one to an error's DETAIL when backtraces
    // are enabled in the server's environment (RUST_BACKTRACE), and RUST_LIB_BACKTRACE=0 turns
    // off their capture whatever RUST_BACKTRACE says. Set while the process is single-threaded,
    // before any backtrace is captured (the setting is read once).
    std::env::set_var("RUST_LIB_BACKTRACE", "0");
    gucs::init();
    placement::init();
    delegation::init();
    worker::register();
}

/// `#[pg_test]` tests, created in a schema `tests` of the test database only.
#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    include!("tests.rs");
}

/// Required by `cargo pgrx test`.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    #[must_use]
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec!["shared_preload_libraries = 'agent_memory'"]
    }
}
