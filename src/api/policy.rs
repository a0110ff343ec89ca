//! The write-time policies as SQL functions: `memory_importance` and `memory_retention`. The
//! write trigger calls them for rows written without an importance or an `expires_at`.

use pgrx::datum::Interval;
use pgrx::prelude::*;

use crate::error::{MemoryError, OrRaise, Result};
use crate::gucs;

/// Checks a kind of memory: `semantic` or `episodic`.
pub fn check_kind(kind: &str) -> Result<bool> {
    match kind {
        "semantic" | "procedural" => Ok(false),
        "episodic" => Ok(true),
        other => Err(MemoryError::invalid_parameter(format!("unknown kind of memory \"{other}\""))
            .hint("Use 'semantic' for facts and preferences, 'episodic' for events, 'procedural' for standing instructions.")),
    }
}

/// The importance of a memory written without one. A semantic memory (a fact, a preference):
/// `agent_memory.importance_default`, +0.3 for a preference word (prefer, remember, never,
/// always, from now on, and Chinese equivalents), +0.2 for 20 to 200 characters, capped at 1.
/// An episodic memory: `agent_memory.importance_default`.
#[pg_extern(stable, strict, parallel_safe, name = "memory_importance")]
fn importance(content: &str, kind: default!(&str, "'semantic'")) -> f32 {
    let episodic = check_kind(kind).or_raise();
    gucs::importance_rule().importance_of(episodic, content) as f32
}

/// How long a memory is kept when written without `expires_at`: NULL for never (protected facts,
/// or a retention setting of -1); else the longest of the retention settings that apply
/// (`retention_default`, `retention_important` above `retention_important_above`,
/// `retention_semantic` for semantic memories).
#[pg_extern(stable, parallel_safe)]
fn memory_retention(kind: Option<&str>, importance: Option<f32>, protected: default!(Option<bool>, false)) -> Option<Interval> {
    let kind = kind.unwrap_or("semantic");
    let episodic = check_kind(kind).or_raise();
    if kind == "procedural" {
        return None; // a standing instruction is kept until it is changed
    }
    let minutes = gucs::retention().minutes(!episodic, importance.unwrap_or(0.0) as f64, protected.unwrap_or(false))?;
    let micros = minutes.saturating_mul(60_000_000);
    Some(Interval::new(0, 0, micros).unwrap_or_else(|e| MemoryError::invalid_parameter(format!("retention: {e}")).raise()))
}
