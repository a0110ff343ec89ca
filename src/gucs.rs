//! Every setting of the extension, under the reserved prefix `agent_memory.`.
//!
//! Settings are registered once in `_PG_init` by [`init`] and read through the typed getters
//! below; nothing else in the crate touches a `GucSetting`. The README's "Settings" table lists
//! the same settings with their defaults.

use std::ffi::CStr;

use agent_memory_core::decay::{DecayMode, DecayParams, ImportanceWeights};
use agent_memory_core::policy::{ImportanceRule, Retention};
use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting, PostgresGucEnum};

/// The decay curve recall uses when the call names none (`agent_memory.decay_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PostgresGucEnum)]
pub enum DecayModeSetting {
    #[name = c"none"]
    None,
    #[name = c"linear"]
    Linear,
    #[name = c"exponential"]
    Exponential,
    #[name = c"power"]
    Power,
}

impl From<DecayModeSetting> for DecayMode {
    fn from(m: DecayModeSetting) -> Self {
        match m {
            DecayModeSetting::None => DecayMode::None,
            DecayModeSetting::Linear => DecayMode::Linear,
            DecayModeSetting::Exponential => DecayMode::Exponential,
            DecayModeSetting::Power => DecayMode::Power,
        }
    }
}

/// `agent_memory.decay_mode`: default decay curve of `memory_recall` (default `exponential`).
static DECAY_MODE: GucSetting<DecayModeSetting> = GucSetting::<DecayModeSetting>::new(DecayModeSetting::Exponential);
/// `agent_memory.decay_base`: exponential decay, multiplier per hour since the last hit (default 0.995).
static DECAY_BASE: GucSetting<f64> = GucSetting::<f64>::new(0.995);
/// `agent_memory.decay_linear_horizon`: linear decay reaches 0 at this age (minutes; default 30 days).
static DECAY_LINEAR_HORIZON: GucSetting<i32> = GucSetting::<i32>::new(30 * 24 * 60);
/// `agent_memory.decay_power_scale`: power-law decay, the age scale (minutes; default 1 day).
static DECAY_POWER_SCALE: GucSetting<i32> = GucSetting::<i32>::new(24 * 60);
/// `agent_memory.decay_power_exponent`: power-law decay, the exponent (default 0.3).
static DECAY_POWER_EXPONENT: GucSetting<f64> = GucSetting::<f64>::new(0.3);
/// `agent_memory.decay_floor_semantic`: lowest decay multiplier of semantic memories (default 0).
static DECAY_FLOOR_SEMANTIC: GucSetting<f64> = GucSetting::<f64>::new(0.0);
/// `agent_memory.decay_floor_episodic`: lowest decay multiplier of episodic memories (default 0.4).
static DECAY_FLOOR_EPISODIC: GucSetting<f64> = GucSetting::<f64>::new(0.4);
/// `agent_memory.importance_base`: importance factor at importance 0 (default 0.8).
static IMPORTANCE_BASE: GucSetting<f64> = GucSetting::<f64>::new(0.8);
/// `agent_memory.importance_weight`: importance factor added per unit of importance (default 0.4).
static IMPORTANCE_WEIGHT: GucSetting<f64> = GucSetting::<f64>::new(0.4);
/// `agent_memory.max_k`: the largest `k` recall accepts (default 1000).
static MAX_K: GucSetting<i32> = GucSetting::<i32>::new(1000);
/// `agent_memory.default_model`: the embedding model of rows and queries that name none.
static DEFAULT_MODEL: GucSetting<Option<std::ffi::CString>> = GucSetting::<Option<std::ffi::CString>>::new(Some(c"default"));

/// `agent_memory.reconcile_similarity`: cosine at which an unkeyed match is "the same fact" (default 0.9).
static RECONCILE_SIMILARITY: GucSetting<f64> = GucSetting::<f64>::new(0.9);
/// `agent_memory.merge_similarity`: cosine at which free text reinforces a memory instead of adding (default 0.92).
static MERGE_SIMILARITY: GucSetting<f64> = GucSetting::<f64>::new(0.92);
/// `agent_memory.importance_default`: importance before the rule's bonuses (default 0.5).
static IMPORTANCE_DEFAULT: GucSetting<f64> = GucSetting::<f64>::new(0.5);
/// `agent_memory.retention_default`: retention of ordinary memories (minutes; default 7 days; -1 forever).
static RETENTION_DEFAULT: GucSetting<i32> = GucSetting::<i32>::new(7 * 24 * 60);
/// `agent_memory.retention_important`: retention above `retention_important_above` (default 30 days).
static RETENTION_IMPORTANT: GucSetting<i32> = GucSetting::<i32>::new(30 * 24 * 60);
/// `agent_memory.retention_semantic`: retention of semantic memories (default 90 days).
static RETENTION_SEMANTIC: GucSetting<i32> = GucSetting::<i32>::new(90 * 24 * 60);
/// `agent_memory.retention_important_above`: importance above which a memory counts as important (default 0.7).
static RETENTION_IMPORTANT_ABOVE: GucSetting<f64> = GucSetting::<f64>::new(0.7);

/// `agent_memory.exact_limit`: above this many candidates, recall uses the model's HNSW index (default 20,000).
static EXACT_LIMIT: GucSetting<i32> = GucSetting::<i32>::new(20_000);
/// `agent_memory.approximate_candidates`: candidates the approximate path fetches by similarity (default 2,000).
static APPROXIMATE_CANDIDATES: GucSetting<i32> = GucSetting::<i32>::new(2_000);

/// Registers every setting. Called once from `_PG_init`.
pub fn init() {
    GucRegistry::define_enum_guc(
        c"agent_memory.decay_mode",
        c"Decay curve memory_recall uses when the call names none.",
        c"One of none, linear, exponential, power.",
        &DECAY_MODE,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"agent_memory.decay_base",
        c"Exponential decay: multiplier per hour since a memory was last recalled.",
        c"0.995 multiplies a score by 0.697 after 3 days and by about 0 after 200 days.",
        &DECAY_BASE,
        1e-6,
        1.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.decay_linear_horizon",
        c"Linear decay: the age at which the multiplier reaches zero.",
        c"",
        &DECAY_LINEAR_HORIZON,
        1,
        i32::MAX,
        GucContext::Userset,
        GucFlags::UNIT_MIN,
    );
    GucRegistry::define_int_guc(
        c"agent_memory.decay_power_scale",
        c"Power-law decay: the age scale s in (1 + age/s)^-exponent.",
        c"",
        &DECAY_POWER_SCALE,
        1,
        i32::MAX,
        GucContext::Userset,
        GucFlags::UNIT_MIN,
    );
    GucRegistry::define_float_guc(
        c"agent_memory.decay_power_exponent",
        c"Power-law decay: the exponent in (1 + age/s)^-exponent.",
        c"",
        &DECAY_POWER_EXPONENT,
        0.0,
        10.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"agent_memory.decay_floor_semantic",
        c"Lowest decay multiplier of semantic memories (facts, preferences).",
        c"0 lets a stale preference sink below its newer version; the multiplier is floor + (1 - floor) * decay.",
        &DECAY_FLOOR_SEMANTIC,
        0.0,
        1.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"agent_memory.decay_floor_episodic",
        c"Lowest decay multiplier of episodic memories (events).",
        c"Above 0 an old event is still found when nothing newer answers the question.",
        &DECAY_FLOOR_EPISODIC,
        0.0,
        1.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"agent_memory.importance_base",
        c"Importance factor of a memory of importance 0.",
        c"The factor is importance_base + importance_weight * importance.",
        &IMPORTANCE_BASE,
        0.0,
        100.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"agent_memory.importance_weight",
        c"Importance factor added per unit of importance.",
        c"The factor is importance_base + importance_weight * importance.",
        &IMPORTANCE_WEIGHT,
        0.0,
        100.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.max_k",
        c"The largest number of memories one recall may return.",
        c"",
        &MAX_K,
        1,
        1_000_000,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"agent_memory.default_model",
        c"Embedding model of memories and queries that name none.",
        c"A query only meets memories of its own embedding model.",
        &DEFAULT_MODEL,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"agent_memory.reconcile_similarity",
        c"Cosine similarity at which reconcile takes a memory without the same key for the same fact.",
        c"Used when no active memory of the user has the fact's (subject, predicate).",
        &RECONCILE_SIMILARITY,
        -1.0,
        1.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"agent_memory.merge_similarity",
        c"Cosine similarity at which a free-text memory reinforces an existing one instead of adding.",
        c"",
        &MERGE_SIMILARITY,
        -1.0,
        1.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"agent_memory.importance_default",
        c"Importance of a memory written without one, before the rule's bonuses.",
        c"+0.3 for preference words (prefer, remember, never, always, from now on, and Chinese equivalents), +0.2 for 20 to 200 characters, capped at 1.",
        &IMPORTANCE_DEFAULT,
        0.0,
        1.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.retention_default",
        c"How long an ordinary memory is kept when written without expires_at (-1: forever).",
        c"",
        &RETENTION_DEFAULT,
        -1,
        i32::MAX,
        GucContext::Userset,
        GucFlags::UNIT_MIN,
    );
    GucRegistry::define_int_guc(
        c"agent_memory.retention_important",
        c"How long an important memory (importance above retention_important_above) is kept (-1: forever).",
        c"",
        &RETENTION_IMPORTANT,
        -1,
        i32::MAX,
        GucContext::Userset,
        GucFlags::UNIT_MIN,
    );
    GucRegistry::define_int_guc(
        c"agent_memory.retention_semantic",
        c"How long a semantic memory (a fact or preference) is kept (-1: forever).",
        c"",
        &RETENTION_SEMANTIC,
        -1,
        i32::MAX,
        GucContext::Userset,
        GucFlags::UNIT_MIN,
    );
    GucRegistry::define_float_guc(
        c"agent_memory.retention_important_above",
        c"Importance above which a memory gets the longer retention_important.",
        c"",
        &RETENTION_IMPORTANT_ABOVE,
        0.0,
        1.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.exact_limit",
        c"Above this many candidates, recall ranks the model's HNSW index candidates instead of every memory.",
        c"Only when the model has an index made by memory_create_index; without one, recall is always exact.",
        &EXACT_LIMIT,
        1,
        i32::MAX,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.approximate_candidates",
        c"How many of a large user's memories the approximate path fetches by similarity before ranking them exactly.",
        c"",
        &APPROXIMATE_CANDIDATES,
        10,
        1_000_000,
        GucContext::Userset,
        GucFlags::default(),
    );
    reserve_prefix();
}

/// Warns about (and from PostgreSQL 15 on, refuses) unknown `agent_memory.*` settings.
fn reserve_prefix() {
    #[cfg(any(feature = "pg15", feature = "pg16", feature = "pg17"))]
    unsafe {
        pgrx::pg_sys::MarkGUCPrefixReserved(c"agent_memory".as_ptr());
    }
}

/// The default decay curve.
pub fn decay_mode() -> DecayMode {
    DECAY_MODE.get().into()
}

/// The constants of every decay curve.
pub fn decay_params() -> DecayParams {
    DecayParams {
        exp_base: DECAY_BASE.get(),
        linear_horizon_hours: DECAY_LINEAR_HORIZON.get() as f64 / 60.0,
        power_scale_hours: DECAY_POWER_SCALE.get() as f64 / 60.0,
        power_exponent: DECAY_POWER_EXPONENT.get(),
    }
}

/// The decay floor of a kind of memory.
pub fn decay_floor(episodic: bool) -> f64 {
    if episodic { DECAY_FLOOR_EPISODIC.get() } else { DECAY_FLOOR_SEMANTIC.get() }
}

pub fn importance_weights() -> ImportanceWeights {
    ImportanceWeights { base: IMPORTANCE_BASE.get(), weight: IMPORTANCE_WEIGHT.get() }
}

pub fn max_k() -> i32 {
    MAX_K.get()
}

/// The default embedding model (`default` when the setting is empty).
pub fn default_model() -> String {
    DEFAULT_MODEL
        .get()
        .as_deref()
        .map(CStr::to_string_lossy)
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "default".to_string())
}

pub fn reconcile_similarity() -> f64 {
    RECONCILE_SIMILARITY.get()
}

pub fn merge_similarity() -> f64 {
    MERGE_SIMILARITY.get()
}

pub fn importance_rule() -> ImportanceRule {
    ImportanceRule { base: IMPORTANCE_DEFAULT.get(), ..ImportanceRule::default() }
}

pub fn retention() -> Retention {
    let minutes = |m: i32| if m < 0 { None } else { Some(m as i64) };
    Retention {
        default_minutes: minutes(RETENTION_DEFAULT.get()),
        important_minutes: minutes(RETENTION_IMPORTANT.get()),
        semantic_minutes: minutes(RETENTION_SEMANTIC.get()),
        important_above: RETENTION_IMPORTANT_ABOVE.get(),
    }
}

pub fn exact_limit() -> usize {
    EXACT_LIMIT.get().max(1) as usize
}

pub fn approximate_candidates() -> i64 {
    APPROXIMATE_CANDIDATES.get() as i64
}
