//! The SQL surface: one module per SQL-visible concept. Each `#[pg_extern]` here only checks
//! arguments, moves data in and out of PostgreSQL, and calls the algorithms in
//! `agent_memory_core`.

pub mod access;
pub mod consolidate;
pub mod context;
pub mod decay;
pub mod embed;
pub mod forget;
pub mod hits;
pub mod index;
pub mod pack;
pub mod policy;
pub mod recall;
pub mod reconcile;
pub mod turns;
pub mod update;
