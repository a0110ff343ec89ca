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
/// `agent_memory.max_content_bytes`: the largest `content` of a memory or a turn a call accepts (default 1 MB; superuser only).
static MAX_CONTENT_BYTES: GucSetting<i32> = GucSetting::<i32>::new(1024 * 1024);
/// `agent_memory.max_metadata_bytes`: the largest `metadata` (as JSON text) a call accepts (default 64 kB; superuser only).
static MAX_METADATA_BYTES: GucSetting<i32> = GucSetting::<i32>::new(64 * 1024);
/// `agent_memory.max_batch_facts`: the most facts one `memory_reconcile_batch` accepts (default 10,000; superuser only).
static MAX_BATCH_FACTS: GucSetting<i32> = GucSetting::<i32>::new(10_000);
/// `agent_memory.default_model`: the embedding model of rows and queries that name none.
static DEFAULT_MODEL: GucSetting<Option<std::ffi::CString>> = GucSetting::<Option<std::ffi::CString>>::new(Some(c"default"));
/// `agent_memory.text_model`: the embedding model of text calls that name none (default
/// all-MiniLM-L6-v2, computed by the server from its files).
static TEXT_MODEL: GucSetting<Option<std::ffi::CString>> = GucSetting::<Option<std::ffi::CString>>::new(Some(c"all-MiniLM-L6-v2"));
/// `agent_memory.model_path`: the folder of the models' folders (default empty: the server's
/// share directory's `agent_memory/models`; superuser only).
static MODEL_PATH: GucSetting<Option<std::ffi::CString>> = GucSetting::<Option<std::ffi::CString>>::new(None);
/// `agent_memory.model_folders_anywhere`: whether a model's folder may lie outside
/// `agent_memory.model_path` (default off; superuser only).
static MODEL_FOLDERS_ANYWHERE: GucSetting<bool> = GucSetting::<bool>::new(false);
/// `agent_memory.embed_max_bytes`: bytes of text one call may give the model (default 4 MB;
/// superuser only).
static EMBED_MAX_BYTES: GucSetting<i32> = GucSetting::<i32>::new(4 * 1024 * 1024);
/// `agent_memory.embed_threads`: threads a process's model runs on (default 1), read at the
/// process's first embedding.
static EMBED_THREADS: GucSetting<i32> = GucSetting::<i32>::new(1);
/// `agent_memory.embed_worker_threads`: threads the background worker's model runs on (0, the
/// default: one per core), read at its first embedding.
static EMBED_WORKER_THREADS: GucSetting<i32> = GucSetting::<i32>::new(0);
/// How the server's models compute (`agent_memory.embed_precision`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PostgresGucEnum)]
pub enum EmbedPrecisionSetting {
    /// f32 throughout: sentence-transformers' vectors (cosine 1.0000000 on the eval texts).
    #[name = c"exact"]
    Exact,
    /// The linear layers in 8 bits, in blocks of 16 (cosine ≥ 0.999 to the exact vectors), on
    /// a CPU with AVX2; elsewhere the same as exact.
    #[name = c"fast"]
    Fast,
}

/// `agent_memory.embed_precision`: `exact` (default) or `fast`.
static EMBED_PRECISION: GucSetting<EmbedPrecisionSetting> = GucSetting::<EmbedPrecisionSetting>::new(EmbedPrecisionSetting::Exact);
/// `agent_memory.embed_cache_size`: entries the embedding cache keeps (default 100,000; 0 turns it
/// off).
static EMBED_CACHE_SIZE: GucSetting<i32> = GucSetting::<i32>::new(100_000);
/// `agent_memory.embed_async`: whether a memory written without an embedding is embedded by the
/// background worker, in batches, instead of by its write (default off).
static EMBED_ASYNC: GucSetting<bool> = GucSetting::<bool>::new(false);
/// `agent_memory.embed_windows`: further embeddings a memory longer than the model's window gets,
/// one per window of its text past the first (default 0: none).
static EMBED_WINDOWS: GucSetting<i32> = GucSetting::<i32>::new(0);
/// `agent_memory.embed_interval`: how often the worker looks for memories to embed (ms; default 1 s).
static EMBED_INTERVAL: GucSetting<i32> = GucSetting::<i32>::new(1000);
/// `agent_memory.embed_batch_size`: memories the worker embeds per transaction (default 64).
static EMBED_BATCH_SIZE: GucSetting<i32> = GucSetting::<i32>::new(64);
/// `agent_memory.user_id`: the user the session works for; row-level security shows a role
/// without maintenance rights only that user's rows (default empty: none).
static SESSION_USER: GucSetting<Option<std::ffi::CString>> = GucSetting::<Option<std::ffi::CString>>::new(None);

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

/// Which memories recall's decay applies to (`agent_memory.decay_scope`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PostgresGucEnum)]
pub enum DecayScopeSetting {
    /// Only memories that have a newer, similar memory (versions of one fact).
    #[name = c"competing"]
    Competing,
    /// Every memory, by its age.
    #[name = c"all"]
    All,
}

/// `agent_memory.decay_scope`: `competing` (default) decays only memories with a newer memory at least `compete_similarity` alike; `all` decays every memory.
static DECAY_SCOPE: GucSetting<DecayScopeSetting> = GucSetting::<DecayScopeSetting>::new(DecayScopeSetting::Competing);
/// `agent_memory.compete_similarity`: cosine at which two memories compete, so the older one decays (default 0.9).
static COMPETE_SIMILARITY: GucSetting<f64> = GucSetting::<f64>::new(0.9);
/// How hybrid recall fuses its channels (`agent_memory.hybrid_fusion`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PostgresGucEnum)]
pub enum HybridFusionSetting {
    /// Each channel's scores scaled to 0..1 over its list, weighted by `hybrid_weight`.
    #[name = c"convex"]
    Convex,
    /// Reciprocal rank fusion, 1 / (rrf_k + rank) per channel.
    #[name = c"rrf"]
    Rrf,
}

/// `agent_memory.hybrid_fusion`: `convex` (default) or `rrf`.
static HYBRID_FUSION: GucSetting<HybridFusionSetting> = GucSetting::<HybridFusionSetting>::new(HybridFusionSetting::Convex);
/// `agent_memory.hybrid_weight`: the vector channel's weight in convex fusion; the keyword
/// channel has the rest (default 0.5).
static HYBRID_WEIGHT: GucSetting<f64> = GucSetting::<f64>::new(0.5);
/// `agent_memory.hybrid_feedback`: the first ranking's best hits a hybrid call moves its query towards (default 3; 0: one ranking).
static HYBRID_FEEDBACK: GucSetting<i32> = GucSetting::<i32>::new(3);
/// `agent_memory.neighbour_share`: the share of a strong hybrid hit's score given to the memories
/// said just before and after it (default 0.3; 0 turns it off).
static NEIGHBOUR_SHARE: GucSetting<f64> = GucSetting::<f64>::new(0.3);
/// `agent_memory.neighbour_window`: how close in time (seconds) a memory must be to a hit to be
/// its neighbour (default 600).
static NEIGHBOUR_WINDOW: GucSetting<i32> = GucSetting::<i32>::new(600);
/// `agent_memory.neighbour_reach`: how many memories on each side of a hit are its neighbours,
/// each step further getting half the share (default 2; 0 turns neighbours off).
static NEIGHBOUR_REACH: GucSetting<i32> = GucSetting::<i32>::new(2);
/// `agent_memory.neighbour_length`: the length (characters) up to which a neighbour takes its
/// whole share; a longer one takes it in proportion, `neighbour_length / its length` (default
/// 400; 0: every neighbour the whole share).
static NEIGHBOUR_LENGTH: GucSetting<i32> = GucSetting::<i32>::new(400);
/// `agent_memory.length_prior`: the exponent of the length prior on hybrid recall's fused scores:
/// a memory longer than `length_prior_words` words scores `(length_prior_words / its length) ^
/// length_prior` of its fused score (default 0.5; 0 turns it off).
static LENGTH_PRIOR: GucSetting<f64> = GucSetting::<f64>::new(0.5);
/// `agent_memory.length_prior_words`: the length in words (as the keyword channel counts them)
/// up to which a memory's fused score is left whole (default 60; 0 turns the prior off).
static LENGTH_PRIOR_WORDS: GucSetting<i32> = GucSetting::<i32>::new(60);
/// `agent_memory.hybrid_candidates`: candidates per channel fused by hybrid recall (default 50).
static HYBRID_CANDIDATES: GucSetting<i32> = GucSetting::<i32>::new(50);
/// `agent_memory.rrf_k`: the constant of reciprocal rank fusion, 1 / (rrf_k + rank) (default 60).
static RRF_K: GucSetting<f64> = GucSetting::<f64>::new(60.0);
/// `agent_memory.bm25_k1`: BM25's term-frequency saturation (default 1.2).
static BM25_K1: GucSetting<f64> = GucSetting::<f64>::new(1.2);
/// `agent_memory.bm25_b`: BM25's length normalisation (default 0.5: memories are short).
static BM25_B: GucSetting<f64> = GucSetting::<f64>::new(0.5);
/// `agent_memory.keyword_stop_words`: whether the keyword channel skips English stop words (default on).
static KEYWORD_STOP_WORDS: GucSetting<bool> = GucSetting::<bool>::new(true);
/// `agent_memory.keyword_stemming`: whether the keyword channel folds English endings (default on).
static KEYWORD_STEMMING: GucSetting<bool> = GucSetting::<bool>::new(true);
/// `agent_memory.recency_channel`: whether hybrid recall fuses a third, recency ranking (default off).
static RECENCY_CHANNEL: GucSetting<bool> = GucSetting::<bool>::new(false);

/// `agent_memory.exact_limit`: above this many candidates, recall uses the model's HNSW index (default 20,000).
static EXACT_LIMIT: GucSetting<i32> = GucSetting::<i32>::new(20_000);
/// `agent_memory.approximate_candidates`: candidates the approximate path fetches by similarity (default 2,000).
static APPROXIMATE_CANDIDATES: GucSetting<i32> = GucSetting::<i32>::new(2_000);
/// `agent_memory.packed_recall`: whether recall reads the packs (embeddings and keyword facts; default on).
static PACKED_RECALL: GucSetting<bool> = GucSetting::<bool>::new(true);
/// `agent_memory.pack_min_memories`: the worker packs a user's memories of a model from this many on (default 200).
static PACK_MIN_MEMORIES: GucSetting<i32> = GucSetting::<i32>::new(200);
/// `agent_memory.packed_limit`: recall reads packs for users with up to this many memories of a model (default 500,000).
static PACKED_LIMIT: GucSetting<i32> = GucSetting::<i32>::new(500_000);
/// `agent_memory.pack_interval`: time between the worker's pack passes (seconds; default 1 min).
static PACK_INTERVAL: GucSetting<i32> = GucSetting::<i32>::new(60);

// --- Forgetting and consolidation (the background workers and memory_forget / memory_consolidate).

/// `agent_memory.worker_databases`: databases the workers work in, comma-separated (server start only; default `postgres`).
static WORKER_DATABASES: GucSetting<Option<std::ffi::CString>> = GucSetting::<Option<std::ffi::CString>>::new(Some(c"postgres"));
/// `agent_memory.worker_role`: the role the workers' passes run as (default empty: `agent_memory_worker`, a NOLOGIN role with only the rights the passes need).
static WORKER_ROLE: GucSetting<Option<std::ffi::CString>> = GucSetting::<Option<std::ffi::CString>>::new(None);
/// `agent_memory.workers_enabled`: whether the workers run passes (default on).
static WORKERS_ENABLED: GucSetting<bool> = GucSetting::<bool>::new(true);
/// `agent_memory.forget_interval`: time between forgetting passes (seconds; default 10 min).
static FORGET_INTERVAL: GucSetting<i32> = GucSetting::<i32>::new(600);
/// `agent_memory.consolidate_interval`: time between consolidation passes (seconds; default 1 day).
static CONSOLIDATE_INTERVAL: GucSetting<i32> = GucSetting::<i32>::new(86_400);
/// `agent_memory.hit_buffer`: memories whose recall hits shared memory holds until the worker
/// folds them (server start only; default 65,536; 0: every recall updates its rows itself).
static HIT_BUFFER: GucSetting<i32> = GucSetting::<i32>::new(65_536);
/// `agent_memory.hit_fold_interval`: how often the worker folds recall's hits into the memories
/// (milliseconds; default 2 s).
static HIT_FOLD_INTERVAL: GucSetting<i32> = GucSetting::<i32>::new(2_000);
/// `agent_memory.worker_synchronous_commit`: whether a worker's batches wait for their WAL to reach
/// disk at commit (default off: they commit like `synchronous_commit = off`).
static WORKER_SYNCHRONOUS_COMMIT: GucSetting<bool> = GucSetting::<bool>::new(false);
/// `agent_memory.forget_helper`: whether a worker's forgetting pass starts a helper process for
/// its expire and purge steps, which then evicts part of the users above the capacity (default on).
static FORGET_HELPER: GucSetting<bool> = GucSetting::<bool>::new(true);
/// `agent_memory.batch_pause`: pause of a worker between two batches (milliseconds; default 0).
static BATCH_PAUSE: GucSetting<i32> = GucSetting::<i32>::new(0);
/// `agent_memory.capacity`: most active memories per user; forgetting evicts above it (default 400; 0 = no limit).
static CAPACITY: GucSetting<i32> = GucSetting::<i32>::new(400);
/// `agent_memory.regret_window`: how long retired memories stay before the purge deletes them (minutes; default 30 days).
static REGRET_WINDOW: GucSetting<i32> = GucSetting::<i32>::new(30 * 24 * 60);
/// `agent_memory.turn_retention`: conversation turns older than this leave working memory (minutes; default 30 days; -1 forever).
static TURN_RETENTION: GucSetting<i32> = GucSetting::<i32>::new(30 * 24 * 60);
/// The tokenizer memory_context counts with (`agent_memory.tokenizer`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PostgresGucEnum)]
pub enum TokenizerSetting {
    #[name = c"cl100k_base"]
    Cl100k,
    #[name = c"o200k_base"]
    O200k,
    #[name = c"approximate"]
    Approximate,
}
/// `agent_memory.tokenizer`: cl100k_base (default), o200k_base, or approximate.
static TOKENIZER: GucSetting<TokenizerSetting> = GucSetting::<TokenizerSetting>::new(TokenizerSetting::Cl100k);
/// `agent_memory.archive_capacity`: most archived memories per user; forgetting retires the least recently recalled above it (default 10,000; 0 = no limit).
static ARCHIVE_CAPACITY: GucSetting<i32> = GucSetting::<i32>::new(10_000);
/// `agent_memory.batch_size`: most rows one batch changes (default 5,000).
static BATCH_SIZE: GucSetting<i32> = GucSetting::<i32>::new(5_000);
/// `agent_memory.hit_halflife`: hit counts are halved this often (minutes; default 7 days).
static HIT_HALFLIFE: GucSetting<i32> = GucSetting::<i32>::new(7 * 24 * 60);
/// `agent_memory.recency_halflife`: the recency term of the retention score halves after this long without a hit (minutes; default 7 days).
static RECENCY_HALFLIFE: GucSetting<i32> = GucSetting::<i32>::new(7 * 24 * 60);
/// `agent_memory.summarize_after`: episodic memories older than this are summarised (minutes; default 30 days).
static SUMMARIZE_AFTER: GucSetting<i32> = GucSetting::<i32>::new(30 * 24 * 60);
/// `agent_memory.summarize_min_fragments`: fewest old episodes of one user and group worth a summary (default 2).
static SUMMARIZE_MIN_FRAGMENTS: GucSetting<i32> = GucSetting::<i32>::new(2);
/// `agent_memory.summarizer`: a SQL function `(user_id text, contents text[]) returns text` (default empty: the built-in extractive summariser).
/// Superuser-only (also through ALTER DATABASE/ROLE), because the workers call it with their role.
static SUMMARIZER: GucSetting<Option<std::ffi::CString>> = GucSetting::<Option<std::ffi::CString>>::new(None);
/// `agent_memory.archive_after`: one-off memories (never recalled, never rewritten) older than this are archived (minutes; default 30 days).
static ARCHIVE_AFTER: GucSetting<i32> = GucSetting::<i32>::new(30 * 24 * 60);
/// `agent_memory.archive_importance`: the importance an archived memory drops to (default 0.05).
static ARCHIVE_IMPORTANCE: GucSetting<f64> = GucSetting::<f64>::new(0.05);

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
        c"agent_memory.user_id",
        c"The user this session works for: a role without maintenance rights sees only that user's rows.",
        c"Set per transaction by a pooled service: SET LOCAL agent_memory.user_id = 'user-07'.",
        &SESSION_USER,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.max_content_bytes",
        c"The largest content of a memory or a conversation turn that a call accepts.",
        c"Only a superuser changes it, so an application cannot raise its own limit.",
        &MAX_CONTENT_BYTES,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_BYTE,
    );
    GucRegistry::define_int_guc(
        c"agent_memory.max_metadata_bytes",
        c"The largest metadata (as JSON text) of a memory or a conversation turn that a call accepts.",
        c"Only a superuser changes it, so an application cannot raise its own limit.",
        &MAX_METADATA_BYTES,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_BYTE,
    );
    GucRegistry::define_int_guc(
        c"agent_memory.max_batch_facts",
        c"The most facts one memory_reconcile_batch call accepts.",
        c"Only a superuser changes it, so an application cannot raise its own limit.",
        &MAX_BATCH_FACTS,
        1,
        i32::MAX,
        GucContext::Suset,
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
    GucRegistry::define_string_guc(
        c"agent_memory.text_model",
        c"Embedding model of text calls that name none (the server embeds the text with it).",
        c"A model with a folder in agent_memory.embedding_models; vector calls use agent_memory.default_model.",
        &TEXT_MODEL,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"agent_memory.model_path",
        c"Folder holding the embedding models' folders; empty for the server's share directory's agent_memory/models.",
        c"A model's folder in agent_memory.embedding_models is read relative to it, unless absolute. Nothing is ever downloaded.",
        &MODEL_PATH,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"agent_memory.model_folders_anywhere",
        c"Whether an embedding model's folder may lie outside agent_memory.model_path.",
        c"Off: a folder of agent_memory.embedding_models that resolves outside agent_memory.model_path (an absolute path elsewhere, .., a link that leads out) is refused, so an admin who writes the rows cannot make the server read other files.",
        &MODEL_FOLDERS_ANYWHERE,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.embed_max_bytes",
        c"Bytes of text one call may give the embedding model.",
        c"Summed over the call's texts, each counted up to the part the model reads (its first word pieces); past it the call fails with SQLSTATE 54000. The worker's embedding batches stay under it too.",
        &EMBED_MAX_BYTES,
        1024,
        i32::MAX,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.embed_threads",
        c"Threads a server process runs an embedding model on.",
        c"Read once per process, at its first embedding; the model's weights are mapped from its file and shared by every process.",
        &EMBED_THREADS,
        1,
        64,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.embed_worker_threads",
        c"Threads the background worker runs an embedding model on (0: one per core).",
        c"Read at the worker's first embedding; the memories written under embed_async are embedded in batches that fill these.",
        &EMBED_WORKER_THREADS,
        0,
        64,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_enum_guc(
        c"agent_memory.embed_precision",
        c"How the server's embedding models compute: exact (f32) or fast (8-bit linear layers, on a CPU with AVX2).",
        c"fast: a short text embeds in about 70% of the time, vectors within cosine 0.999 of the exact ones; a batch is faster exact. The cache keeps the two apart.",
        &EMBED_PRECISION,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.embed_cache_size",
        c"Embeddings the server keeps by model and text, so the same text is embedded once (0: no cache).",
        c"The cache holds a keyed hash of each text, never the text; the background worker drops the oldest entries past this many.",
        &EMBED_CACHE_SIZE,
        0,
        100_000_000,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"agent_memory.embed_async",
        c"Whether a memory written without an embedding is embedded later by the background worker, in batches.",
        c"Off: the write embeds it (INSERT, COPY, a text reconcile). On: the row is stored with emb NULL, found by keyword recall at once and by vector recall once the worker has embedded it.",
        &EMBED_ASYNC,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.embed_windows",
        c"Further embeddings a memory written with more text than its model reads gets, one per window of its text past the first.",
        c"Each window holds as many word pieces as the model reads (256 for all-MiniLM-L6-v2) and starts 32 before the end of the one before; vector recall scores such a memory by its best embedding. Made when a memory of a model the server embeds with is written or its content changes (by the write, or by the background worker under embed_async); 0 makes none. Set it where the writes run (and for the worker: in postgresql.conf).",
        &EMBED_WINDOWS,
        0,
        64,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.embed_interval",
        c"How often the background worker looks for memories written without an embedding.",
        c"",
        &EMBED_INTERVAL,
        10,
        3_600_000,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"agent_memory.embed_batch_size",
        c"Memories the background worker embeds in one transaction.",
        c"Texts of one batch are embedded together, sorted by length.",
        &EMBED_BATCH_SIZE,
        1,
        10_000,
        GucContext::Sighup,
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
        c"Only when the model has an index made by memory_create_index and the user's memories are not packed (up to packed_limit); without an index, recall is always exact.",
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
    GucRegistry::define_bool_guc(
        c"agent_memory.packed_recall",
        c"Whether recall reads the packs (8-bit embeddings and keyword facts) and then only the rows it needs.",
        c"Results are the same either way; off reads every candidate's row.",
        &PACKED_RECALL,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.packed_limit",
        c"Recall reads the packs of users with up to this many memories of a model; above, it reads rows (or the HNSW index).",
        c"Bounds the memory of a packed recall: 32 bytes per memory, and 16 more for each memory whose words a hybrid or keyword call counts from the packs (a backend keeps each of these arrays for its next call while it is under 3 MB).",
        &PACKED_LIMIT,
        1,
        i32::MAX,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.pack_min_memories",
        c"The background worker packs a user's embeddings of a model once there are this many active memories.",
        c"Smaller users are read row by row; memory_pack(user_id) packs any user.",
        &PACK_MIN_MEMORIES,
        1,
        i32::MAX,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.pack_interval",
        c"Time between the background worker's passes that rebuild out-of-date packs.",
        c"",
        &PACK_INTERVAL,
        1,
        i32::MAX,
        GucContext::Sighup,
        GucFlags::UNIT_S,
    );
    define_ranking_settings();
    define_worker_settings();
    reserve_prefix();
}

pub fn packed_recall() -> bool {
    PACKED_RECALL.get()
}

pub fn packed_limit() -> usize {
    PACKED_LIMIT.get().max(1) as usize
}

pub fn pack_min_memories() -> i64 {
    PACK_MIN_MEMORIES.get().max(1) as i64
}

pub fn pack_interval() -> std::time::Duration {
    std::time::Duration::from_secs(PACK_INTERVAL.get().max(1) as u64)
}

fn define_ranking_settings() {
    GucRegistry::define_enum_guc(
        c"agent_memory.decay_scope",
        c"Which memories recall's time decay applies to.",
        c"competing: only a memory that has a newer memory at least compete_similarity alike (versions of one fact); all: every memory, by its age.",
        &DECAY_SCOPE,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"agent_memory.compete_similarity",
        c"Cosine similarity at which two memories compete, so that the older one decays.",
        c"Recall looks for competitors among the 2 × k (at least 40) best candidates before decay.",
        &COMPETE_SIMILARITY,
        -1.0,
        1.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_enum_guc(
        c"agent_memory.hybrid_fusion",
        c"How hybrid recall fuses its vector and keyword channels.",
        c"convex: each channel's scores scaled to 0..1 over its candidates and weighted by hybrid_weight; rrf: reciprocal rank fusion, 1 / (rrf_k + rank).",
        &HYBRID_FUSION,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"agent_memory.hybrid_weight",
        c"The vector channel's weight in convex fusion; the keyword channel has 1 - hybrid_weight.",
        c"",
        &HYBRID_WEIGHT,
        0.0,
        1.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.hybrid_feedback",
        c"How many of a first hybrid ranking's best memories the query vector is moved towards before ranking again.",
        c"The query becomes q + the mean of their embeddings, normalised, with the same words; only for users with up to exact_limit memories of the model. 0: one ranking.",
        &HYBRID_FEEDBACK,
        0,
        100,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"agent_memory.neighbour_share",
        c"The share of a strong hybrid hit's score that the memories said just before and after it get.",
        c"The five best fused hits give it to the user's adjacent memories (by id, neighbour_reach on each side) said within neighbour_window of them; 0 turns it off.",
        &NEIGHBOUR_SHARE,
        0.0,
        1.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.neighbour_reach",
        c"How many memories on each side of a strong hybrid hit share its score.",
        c"The adjacent memory gets neighbour_share of the hit's score, the next one half of that, and so on; 0 turns it off.",
        &NEIGHBOUR_REACH,
        0,
        10,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.neighbour_length",
        c"The length in characters up to which a neighbour of a strong hybrid hit takes its whole share.",
        c"A longer neighbour takes neighbour_length / its length of the share: a short line of a dialogue lacks the context said around it, a long answer carries its own. 0: every neighbour takes the whole share.",
        &NEIGHBOUR_LENGTH,
        0,
        i32::MAX,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"agent_memory.length_prior",
        c"How much hybrid recall lowers a long memory's fused score: the exponent of length_prior_words / its length.",
        c"A memory longer than length_prior_words words scores (length_prior_words / its length) ^ length_prior of its fused score: a fact is said in a sentence or two, and a long answer or document is near many questions without being what one asks for. 0 turns it off.",
        &LENGTH_PRIOR,
        0.0,
        4.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.length_prior_words",
        c"The length in words up to which hybrid recall leaves a memory's fused score whole.",
        c"Words as the keyword channel counts them: with keyword_stop_words on, common English words are not counted; Chinese, Japanese and Korean text counts its pairs of characters. 0 turns the length prior off.",
        &LENGTH_PRIOR_WORDS,
        0,
        i32::MAX,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.neighbour_window",
        c"How close in time a memory must have been said to a hybrid hit to be its neighbour.",
        c"",
        &NEIGHBOUR_WINDOW,
        0,
        i32::MAX,
        GucContext::Userset,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"agent_memory.hybrid_candidates",
        c"How many candidates of each channel hybrid recall fuses.",
        c"",
        &HYBRID_CANDIDATES,
        1,
        10_000,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"agent_memory.rrf_k",
        c"The constant of reciprocal rank fusion: a result scores 1 / (rrf_k + rank) per channel.",
        c"",
        &RRF_K,
        0.0,
        10_000.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"agent_memory.bm25_k1",
        c"BM25 of the keyword channel: term-frequency saturation.",
        c"",
        &BM25_K1,
        0.0,
        100.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"agent_memory.bm25_b",
        c"BM25 of the keyword channel: length normalisation, from 0 (none) to 1 (full).",
        c"",
        &BM25_B,
        0.0,
        1.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"agent_memory.keyword_stop_words",
        c"Whether the keyword channel skips English stop words (the, a, is, ...).",
        c"",
        &KEYWORD_STOP_WORDS,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"agent_memory.keyword_stemming",
        c"Whether the keyword channel folds English endings (plays, played, playing: play).",
        c"",
        &KEYWORD_STEMMING,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"agent_memory.recency_channel",
        c"Whether hybrid recall fuses a third ranking, by the time of the last recall.",
        c"",
        &RECENCY_CHANNEL,
        GucContext::Userset,
        GucFlags::default(),
    );
}

/// Checks a content's and a metadata's size against `max_content_bytes` and `max_metadata_bytes`.
pub fn check_sizes(content: Option<&str>, metadata_bytes: Option<usize>) -> crate::error::Result<()> {
    let limit = |v: i32| v.max(1) as usize;
    if let Some(c) = content {
        if c.len() > limit(MAX_CONTENT_BYTES.get()) {
            return Err(too_big("content", c.len(), MAX_CONTENT_BYTES.get(), "agent_memory.max_content_bytes"));
        }
    }
    if let Some(m) = metadata_bytes {
        if m > limit(MAX_METADATA_BYTES.get()) {
            return Err(too_big("metadata", m, MAX_METADATA_BYTES.get(), "agent_memory.max_metadata_bytes"));
        }
    }
    Ok(())
}

/// The most facts one batch accepts.
pub fn max_batch_facts() -> usize {
    MAX_BATCH_FACTS.get().max(1) as usize
}

fn too_big(what: &str, got: usize, max: i32, setting: &str) -> crate::error::MemoryError {
    crate::error::MemoryError::new(
        pgrx::PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
        format!("{what} is {got} bytes, more than the limit of {max}"),
    )
    .hint(format!("Store a shorter {what}, or ask an administrator to raise {setting}."))
}

/// Whether decay applies only to memories that compete (the default) or to all.
pub fn decay_competing_only() -> bool {
    DECAY_SCOPE.get() == DecayScopeSetting::Competing
}

pub fn compete_similarity() -> f64 {
    COMPETE_SIMILARITY.get()
}

pub fn hybrid_candidates() -> usize {
    HYBRID_CANDIDATES.get().max(1) as usize
}

pub fn rrf_k() -> f64 {
    RRF_K.get()
}

pub fn hybrid_convex() -> bool {
    HYBRID_FUSION.get() == HybridFusionSetting::Convex
}

pub fn hybrid_weight() -> f64 {
    HYBRID_WEIGHT.get()
}

pub fn hybrid_feedback() -> usize {
    HYBRID_FEEDBACK.get().max(0) as usize
}

pub fn neighbour_share() -> f64 {
    NEIGHBOUR_SHARE.get()
}

pub fn neighbour_reach() -> usize {
    NEIGHBOUR_REACH.get().max(0) as usize
}

/// The neighbour length in characters (0: no scaling).
pub fn neighbour_length() -> usize {
    NEIGHBOUR_LENGTH.get().max(0) as usize
}

/// The length prior on hybrid recall's fused scores: `(words, exponent)`.
pub fn length_prior() -> (u32, f64) {
    (LENGTH_PRIOR_WORDS.get().max(0) as u32, LENGTH_PRIOR.get().max(0.0))
}

/// The neighbour window in seconds.
pub fn neighbour_window() -> i64 {
    NEIGHBOUR_WINDOW.get().max(0) as i64
}

pub fn bm25() -> agent_memory_core::keyword::Bm25Params {
    agent_memory_core::keyword::Bm25Params { k1: BM25_K1.get(), b: BM25_B.get() }
}

pub fn tokenizer() -> agent_memory_core::text::TokenizerOptions {
    agent_memory_core::text::TokenizerOptions { stop_words: KEYWORD_STOP_WORDS.get(), stem: KEYWORD_STEMMING.get() }
}

pub fn recency_channel() -> bool {
    RECENCY_CHANNEL.get()
}

/// Warns about (and from PostgreSQL 15 on, refuses) unknown `agent_memory.*` settings.
fn reserve_prefix() {
    crate::pg::reserve_settings_prefix(c"agent_memory");
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
    if episodic {
        DECAY_FLOOR_EPISODIC.get()
    } else {
        DECAY_FLOOR_SEMANTIC.get()
    }
}

pub fn importance_weights() -> ImportanceWeights {
    ImportanceWeights { base: IMPORTANCE_BASE.get(), weight: IMPORTANCE_WEIGHT.get() }
}

pub fn max_k() -> i32 {
    MAX_K.get()
}

/// The default embedding model (`default` when the setting is empty).
/// The user the session works for (`agent_memory.user_id`), when it names one.
pub fn session_user() -> Option<String> {
    SESSION_USER.get().as_deref().map(|s| s.to_string_lossy().into_owned()).filter(|s| !s.is_empty())
}

pub fn default_model() -> String {
    DEFAULT_MODEL
        .get()
        .as_deref()
        .map(CStr::to_string_lossy)
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "default".to_string())
}

/// The embedding model of text calls that name none.
pub fn text_model() -> String {
    TEXT_MODEL
        .get()
        .as_deref()
        .map(CStr::to_string_lossy)
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "all-MiniLM-L6-v2".to_string())
}

/// The models' folder as set (`None`: the default under the share directory).
pub fn model_path() -> Option<String> {
    MODEL_PATH.get().as_deref().map(CStr::to_string_lossy).map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

pub fn model_folders_anywhere() -> bool {
    MODEL_FOLDERS_ANYWHERE.get()
}

/// Bytes of text one call may give the embedding model.
pub fn embed_max_bytes() -> usize {
    EMBED_MAX_BYTES.get().max(1024) as usize
}

pub fn embed_cache_size() -> i64 {
    EMBED_CACHE_SIZE.get().max(0) as i64
}

/// Further windows a long memory is embedded by (0: none).
pub fn embed_windows() -> usize {
    EMBED_WINDOWS.get().clamp(0, 64) as usize
}

pub fn embed_async() -> bool {
    EMBED_ASYNC.get()
}

pub fn hit_buffer() -> usize {
    HIT_BUFFER.get().max(0) as usize
}

pub fn hit_fold_interval() -> std::time::Duration {
    std::time::Duration::from_millis(HIT_FOLD_INTERVAL.get().max(100) as u64)
}

pub fn embed_interval() -> std::time::Duration {
    std::time::Duration::from_millis(EMBED_INTERVAL.get().max(10) as u64)
}

pub fn embed_batch_size() -> i64 {
    EMBED_BATCH_SIZE.get().max(1) as i64
}

pub fn embed_precision() -> EmbedPrecisionSetting {
    EMBED_PRECISION.get()
}

pub fn embed_threads() -> usize {
    EMBED_THREADS.get().max(1) as usize
}

/// The worker's embedding threads: the setting, or one per core when it is 0.
pub fn embed_worker_threads() -> usize {
    match EMBED_WORKER_THREADS.get() {
        n if n > 0 => n as usize,
        _ => std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
    }
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

fn define_worker_settings() {
    GucRegistry::define_int_guc(
        c"agent_memory.hit_buffer",
        c"Memories whose recall hits are held in shared memory until the background worker folds them.",
        c"A recall in a database with a worker records its hits there and writes nothing; the worker folds them into last_hit_at and hit_count every agent_memory.hit_fold_interval. When the buffer is full, hits of further memories are dropped (memory_hit_stats counts them). 0: every recall updates the rows it returns itself.",
        &HIT_BUFFER,
        0,
        16_777_216,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.hit_fold_interval",
        c"How often the background worker folds recall's hits into last_hit_at and hit_count.",
        c"Ranking and forgetting see a hit at most this long (plus a pass the worker is running) after the recall; a crash loses at most this long of hits, never a memory.",
        &HIT_FOLD_INTERVAL,
        100,
        3_600_000,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_string_guc(
        c"agent_memory.worker_databases",
        c"Databases the forgetting and consolidation workers work in, comma-separated.",
        c"One worker per database, started with the server; a database without the extension is checked again at every interval.",
        &WORKER_DATABASES,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"agent_memory.worker_role",
        c"The role the workers' passes run as.",
        c"Empty: agent_memory_worker, the NOLOGIN role the extension creates, which may only read and change the extension's tables.",
        &WORKER_ROLE,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"agent_memory.workers_enabled",
        c"Whether the background workers run forgetting and consolidation passes.",
        c"",
        &WORKERS_ENABLED,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"agent_memory.worker_synchronous_commit",
        c"Whether the workers' batches wait at commit for their WAL to be written to disk (and to synchronous standbys).",
        c"Off: each batch commits as with synchronous_commit = off, so the worker goes on while the WAL writer flushes; a crash can undo \
          the last fraction of a second of maintenance (never a user's write), which the next pass does again. On: the server's synchronous_commit.",
        &WORKER_SYNCHRONOUS_COMMIT,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"agent_memory.forget_helper",
        c"Whether a worker's forgetting pass starts a helper process that expires and purges while the pass evicts, then evicts users from the other end of the pass's list.",
        c"The helper is a background worker (one more of max_worker_processes while a pass runs); when none is free, the pass runs every step itself.",
        &FORGET_HELPER,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.forget_interval",
        c"Time between two forgetting passes of a worker.",
        c"",
        &FORGET_INTERVAL,
        1,
        i32::MAX,
        GucContext::Sighup,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"agent_memory.consolidate_interval",
        c"Time between two consolidation passes of a worker.",
        c"",
        &CONSOLIDATE_INTERVAL,
        1,
        i32::MAX,
        GucContext::Sighup,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"agent_memory.batch_pause",
        c"Pause of a worker between two batches, to spread a pass's load.",
        c"",
        &BATCH_PAUSE,
        0,
        60_000,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"agent_memory.capacity",
        c"Most live (active, not archived) memories per user: forgetting evicts the lowest retention scores above it.",
        c"Evicted facts retire; evicted episodes move to the archive. Protected memories count but are never evicted. 0 means no limit.",
        &CAPACITY,
        0,
        i32::MAX,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.turn_retention",
        c"Conversation turns older than this leave working memory: forgetting deletes them.",
        c"Facts drawn from a deleted turn keep their content; their source_turn_id becomes NULL. -1 keeps turns forever.",
        &TURN_RETENTION,
        -1,
        i32::MAX,
        GucContext::Userset,
        GucFlags::UNIT_MIN,
    );
    GucRegistry::define_enum_guc(
        c"agent_memory.tokenizer",
        c"How memory_context counts tokens: cl100k_base, o200k_base (OpenAI's BPE tables) or approximate.",
        c"approximate counts a CJK character as a token and other text as a token per four characters, with no tables.",
        &TOKENIZER,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.archive_capacity",
        c"Most archived memories per user: forgetting retires the least recently recalled above it.",
        c"0 means no limit.",
        &ARCHIVE_CAPACITY,
        0,
        i32::MAX,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.regret_window",
        c"How long retired memories stay before forgetting deletes them for good.",
        c"Evidence of a summary stays as long as the summary. -1 keeps retired memories forever.",
        &REGRET_WINDOW,
        -1,
        i32::MAX,
        GucContext::Userset,
        GucFlags::UNIT_MIN,
    );
    GucRegistry::define_int_guc(
        c"agent_memory.batch_size",
        c"Most rows one batch of forgetting or consolidation changes.",
        c"A worker commits every batch, so a recall or reconcile waits at most for one batch.",
        &BATCH_SIZE,
        1,
        5_000,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.hit_halflife",
        c"Forgetting halves every hit count this often, so old popularity fades.",
        c"",
        &HIT_HALFLIFE,
        1,
        i32::MAX,
        GucContext::Userset,
        GucFlags::UNIT_MIN,
    );
    GucRegistry::define_int_guc(
        c"agent_memory.recency_halflife",
        c"The recency term of the retention score halves after this long without a recall.",
        c"",
        &RECENCY_HALFLIFE,
        1,
        i32::MAX,
        GucContext::Userset,
        GucFlags::UNIT_MIN,
    );
    GucRegistry::define_int_guc(
        c"agent_memory.summarize_after",
        c"Consolidation summarises episodic memories older than this.",
        c"",
        &SUMMARIZE_AFTER,
        0,
        i32::MAX,
        GucContext::Userset,
        GucFlags::UNIT_MIN,
    );
    GucRegistry::define_int_guc(
        c"agent_memory.summarize_min_fragments",
        c"Fewest old episodic memories of one user and subject that consolidation summarises.",
        c"",
        &SUMMARIZE_MIN_FRAGMENTS,
        1,
        10_000,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"agent_memory.summarizer",
        c"SQL function that summarises episodic memories: (user_id text, contents text[]) returns text.",
        c"Empty: the built-in extractive summariser. Superuser only: the workers call it with their role.",
        &SUMMARIZER,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.archive_after",
        c"Consolidation archives one-off memories (never recalled, never rewritten) older than this.",
        c"-1 never archives.",
        &ARCHIVE_AFTER,
        -1,
        i32::MAX,
        GucContext::Userset,
        GucFlags::UNIT_MIN,
    );
    GucRegistry::define_float_guc(
        c"agent_memory.archive_importance",
        c"The importance an archived memory drops to.",
        c"",
        &ARCHIVE_IMPORTANCE,
        0.0,
        1.0,
        GucContext::Userset,
        GucFlags::default(),
    );
}

fn text_setting(s: &GucSetting<Option<std::ffi::CString>>) -> String {
    s.get().as_deref().map(CStr::to_string_lossy).map(|v| v.trim().to_string()).unwrap_or_default()
}

/// The databases to run workers in: trimmed, without empties or repeats, in the order given.
pub fn worker_databases() -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for name in text_setting(&WORKER_DATABASES).split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if !out.iter().any(|n| n == name) {
            out.push(name.to_string());
        }
    }
    out
}

/// The role to run passes as; empty for the extension's owner.
pub fn worker_role() -> String {
    text_setting(&WORKER_ROLE)
}

pub fn workers_enabled() -> bool {
    WORKERS_ENABLED.get()
}

/// Whether a worker's forgetting pass starts a helper for its expire and purge steps (and part of
/// its evict step).
pub fn forget_helper() -> bool {
    FORGET_HELPER.get()
}

/// Whether a worker's batches commit synchronously (else as with `synchronous_commit = off`).
pub fn worker_synchronous_commit() -> bool {
    WORKER_SYNCHRONOUS_COMMIT.get()
}

pub fn forget_interval() -> std::time::Duration {
    std::time::Duration::from_secs(FORGET_INTERVAL.get().max(1) as u64)
}

pub fn consolidate_interval() -> std::time::Duration {
    std::time::Duration::from_secs(CONSOLIDATE_INTERVAL.get().max(1) as u64)
}

pub fn batch_pause() -> std::time::Duration {
    std::time::Duration::from_millis(BATCH_PAUSE.get().max(0) as u64)
}

/// The per-user capacity; `None` for no limit.
pub fn capacity() -> Option<i64> {
    match CAPACITY.get() {
        0 => None,
        c => Some(c as i64),
    }
}

/// How long turns stay in working memory, in minutes; `None` for forever.
pub fn turn_retention_minutes() -> Option<i64> {
    match TURN_RETENTION.get() {
        -1 => None,
        m => Some(m as i64),
    }
}

/// The tokenizer of memory_context.
pub fn tokenizer_kind() -> agent_memory_core::context::Tokenizer {
    match TOKENIZER.get() {
        TokenizerSetting::Cl100k => agent_memory_core::context::Tokenizer::Cl100k,
        TokenizerSetting::O200k => agent_memory_core::context::Tokenizer::O200k,
        TokenizerSetting::Approximate => agent_memory_core::context::Tokenizer::Approximate,
    }
}

/// The archive's bound per user; `None` for no limit.
pub fn archive_capacity() -> Option<i64> {
    match ARCHIVE_CAPACITY.get() {
        0 => None,
        c => Some(c as i64),
    }
}

/// The regret window in minutes; `None` keeps retired memories forever.
pub fn regret_window_minutes() -> Option<i64> {
    match REGRET_WINDOW.get() {
        m if m < 0 => None,
        m => Some(m as i64),
    }
}

pub fn batch_size() -> i64 {
    BATCH_SIZE.get().max(1) as i64
}

pub fn hit_halflife_minutes() -> i64 {
    HIT_HALFLIFE.get().max(1) as i64
}

/// The weights of the retention score, with the recency half-life of the setting.
pub fn retention_weights() -> agent_memory_core::forget::RetentionWeights {
    agent_memory_core::forget::RetentionWeights {
        recency_halflife_hours: RECENCY_HALFLIFE.get().max(1) as f64 / 60.0,
        ..Default::default()
    }
}

pub fn summarize_after_minutes() -> i64 {
    SUMMARIZE_AFTER.get().max(0) as i64
}

pub fn summarize_min_fragments() -> i64 {
    SUMMARIZE_MIN_FRAGMENTS.get().max(1) as i64
}

/// The summariser function's name; empty for the built-in one.
pub fn summarizer() -> String {
    text_setting(&SUMMARIZER)
}

/// Minutes after which one-off memories are archived; `None` never archives.
pub fn archive_after_minutes() -> Option<i64> {
    match ARCHIVE_AFTER.get() {
        m if m < 0 => None,
        m => Some(m as i64),
    }
}

pub fn archive_importance() -> f64 {
    ARCHIVE_IMPORTANCE.get()
}
