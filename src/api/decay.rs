//! `agent_memory.memory_decay_score(similarity, age, importance, mode, floor)`.

use agent_memory_core::decay::{interval_hours, DecayMode, Scorer};
use pgrx::prelude::*;

use crate::error::{MemoryError, OrRaise, Result};
use crate::gucs;

/// Parses a decay mode name, or explains which names exist.
pub fn parse_mode(name: &str) -> Result<DecayMode> {
    name.parse::<DecayMode>().map_err(|e| {
        let names: Vec<&str> = DecayMode::ALL.iter().map(|(n, _)| *n).collect();
        MemoryError::invalid_parameter(e.to_string()).hint(format!("Use one of: {}.", names.join(", ")))
    })
}

/// The scorer for a mode name, or for `agent_memory.decay_mode` when the name is NULL.
pub fn scorer(mode: Option<&str>) -> Result<Scorer> {
    let mode = match mode {
        Some(m) => parse_mode(m)?,
        None => gucs::decay_mode(),
    };
    Ok(Scorer { mode, params: gucs::decay_params(), importance: gucs::importance_weights() })
}

/// The score recall gives a memory: `similarity × decay(age) × (importance_base +
/// importance_weight × importance)`, where `decay` is the named curve (`none`, `linear`,
/// `exponential`, `power`) lifted by `floor`: `floor + (1 − floor) × curve(age)`.
/// The curves' constants are the `agent_memory.decay_*` settings.
#[pg_extern(stable, parallel_safe)]
fn memory_decay_score(
    similarity: f64,
    age: Interval,
    importance: f32,
    mode: default!(&str, "'exponential'"),
    floor: default!(f64, 0.0),
) -> f64 {
    if !(0.0..=1.0).contains(&floor) {
        MemoryError::invalid_parameter(format!("floor must be between 0 and 1, not {floor}"))
            .hint("0 is the plain decay curve; 1 switches decay off.")
            .raise();
    }
    if !similarity.is_finite() {
        MemoryError::invalid_parameter(format!("similarity must be a finite number, not {similarity}"))
            .hint("Pass a cosine similarity, between -1 and 1.")
            .raise();
    }
    if !(0.0..=1.0).contains(&importance) {
        MemoryError::invalid_parameter(format!("importance must be between 0 and 1, not {importance}"))
            .hint("Pass the memory's importance, between 0 and 1.")
            .raise();
    }
    let s = scorer(Some(mode)).or_raise();
    let hours = interval_hours(age.months(), age.days(), age.micros());
    s.score(similarity, hours, importance as f64, floor)
}
