//! Text in: the server embeds text with a local sentence model (`agent_memory_embed`), so a call
//! can pass words where it passed a vector.
//!
//! A model is a row of `agent_memory.embedding_models` with a `folder` (relative to
//! `agent_memory.model_path`, default `<sharedir>/agent_memory/models`), its dimension, pooling
//! and `max_tokens`. Each server process that embeds loads the model once, on first use, and keeps
//! it for its life (about 100 MB for all-MiniLM-L6-v2); a model whose row changes is loaded again.
//! The model's threads (`agent_memory.embed_threads`) only compute: they never call PostgreSQL,
//! and a long batch checks for a cancel (and so `statement_timeout`) between its chunks of texts.
//! Nothing is ever downloaded: a missing file is an error naming it and the setup step.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;

use agent_memory_embed::q8::Kernel;
use agent_memory_embed::{EmbedError, Model, Options, Pooling};
use pgrx::spi::SpiClient;
use pgrx::PgSqlErrorCode;

use crate::error::{spi, MemoryError, Result};
use crate::gucs;

/// A model's row, as loading needs it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Spec {
    name: String,
    folder: PathBuf,
    pooling: String,
    max_tokens: usize,
    dims: i32,
    /// The 8-bit kernel the linear layers run on (`agent_memory.embed_precision = fast` on a CPU
    /// that has one), or `None` for f32, exact.
    kernel: Option<Kernel>,
}

impl Spec {
    /// What the cache keys an embedding by besides its text: every field of the row that changes
    /// what the model computes, so that a model whose row changes never answers from an entry of
    /// before.
    fn fingerprint(&self) -> String {
        let exact = format!("{}|{}|{}|{}|{}", self.name, self.folder.display(), self.pooling, self.max_tokens, self.dims);
        match self.kernel {
            // The 8-bit path's vectors differ from the exact ones (cosine ≥ 0.999): entries of
            // one are never answers of the other. (The kernels of that path agree with each other.)
            Some(_) => exact + "|q8/16",
            None => exact,
        }
    }
}

thread_local! {
    static MODELS: RefCell<HashMap<String, (Spec, Rc<Model>)>> = RefCell::new(HashMap::new());
}

const MODEL_ROW: &str = "SELECT dimensions, folder, pooling, max_tokens FROM agent_memory.embedding_models WHERE name = $1";

/// The model a text call uses: the one it names, else `agent_memory.text_model`.
pub fn text_model(named: Option<&str>) -> Result<String> {
    crate::catalog::call_model(
        named,
        gucs::text_model,
        "agent_memory.text_model",
        "Name an embedding model with a folder in agent_memory.embedding_models, or pass NULL for agent_memory.text_model.",
    )
}

/// The folder of the models' folders.
pub fn models_folder() -> PathBuf {
    match gucs::model_path() {
        Some(p) => PathBuf::from(p),
        None => crate::pg::share_dir().join("agent_memory").join("models"),
    }
}

fn setup_hint(folder: &std::path::Path) -> String {
    format!(
        "Run ./scripts/setup.sh, which installs all-MiniLM-L6-v2 into {}, or put the model's config.json, tokenizer.json and model.safetensors in {} (agent_memory.model_path names the models' folder).",
        models_folder().join("all-MiniLM-L6-v2").display(),
        folder.display()
    )
}

fn load_error(spec: &Spec, e: EmbedError) -> MemoryError {
    match e {
        EmbedError::Missing(_) => {
            MemoryError::new(PgSqlErrorCode::ERRCODE_UNDEFINED_FILE, format!("embedding model \"{}\" is not installed: {e}", spec.name))
                .hint(setup_hint(&spec.folder))
        }
        EmbedError::Broken(..) => MemoryError::invalid_parameter(format!("embedding model \"{}\" cannot be loaded: {e}", spec.name))
            .hint(setup_hint(&spec.folder)),
        EmbedError::Failed(_) => {
            MemoryError::new(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("embedding model \"{}\": {e}", spec.name))
        }
    }
}

/// Reads the model's row: its spec and dimension (an error for a model the server cannot embed
/// with: not registered, or without a folder).
fn spec(client: &mut SpiClient<'_>, name: &str) -> Result<(Spec, i32)> {
    let e = spi("reading the embedding model");
    let table = crate::plans::read(client, MODEL_ROW, &[name.into()]).map_err(&e)?;
    if table.is_empty() {
        return Err(MemoryError::invalid_parameter(format!("embedding model \"{name}\" is not registered"))
            .hint("Name a model of agent_memory.embedding_models that has a folder (all-MiniLM-L6-v2 is installed with the extension), or have an admin register one: INSERT INTO agent_memory.embedding_models (name, dimensions, folder) VALUES (...)."));
    }
    let row = table.first();
    let dims: i32 = row.get(1).map_err(&e)?.unwrap_or(0);
    let folder: Option<String> = row.get(2).map_err(&e)?;
    let pooling: String = row.get(3).map_err(&e)?.unwrap_or_else(|| "mean".into());
    let max_tokens: i32 = row.get(4).map_err(&e)?.unwrap_or(256);
    let Some(folder) = folder else {
        return Err(MemoryError::invalid_parameter(format!(
            "embedding model \"{name}\" has no folder: the server cannot embed text with it"
        ))
        .detail("Its vectors come from outside the database.")
        .hint(
            "Pass the query or the memory as a vector made with that model, or name a model with a folder (model => 'all-MiniLM-L6-v2').",
        ));
    };
    let folder = confined(name, &folder)?;
    let kernel = match gucs::embed_precision() {
        gucs::EmbedPrecisionSetting::Fast => Kernel::fast(),
        gucs::EmbedPrecisionSetting::Exact => None,
    };
    Ok((Spec { name: name.to_string(), folder, pooling, max_tokens: max_tokens.max(2) as usize, dims, kernel }, dims))
}

/// A model's folder as its row names it, resolved under `agent_memory.model_path`: a folder
/// outside it (an absolute path elsewhere, `..`, a link that leads out) is refused unless a
/// superuser has turned on `agent_memory.model_folders_anywhere`. An admin writes the rows, but
/// only a superuser decides which files the server reads.
fn confined(name: &str, folder: &str) -> Result<PathBuf> {
    let root = models_folder();
    let path = PathBuf::from(folder);
    let full = if path.is_absolute() { path } else { root.join(path) };
    if gucs::model_folders_anywhere() {
        return Ok(full);
    }
    let lexical_escape = full.components().any(|c| matches!(c, std::path::Component::ParentDir)) || !full.starts_with(&root);
    let link_escape = match (full.canonicalize(), root.canonicalize()) {
        (Ok(f), Ok(r)) => !f.starts_with(&r),
        _ => false,
    };
    if lexical_escape || link_escape {
        return Err(MemoryError::new(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("embedding model \"{name}\" names a folder outside the models' folder"),
        )
        .detail(format!("Its folder resolves outside {}.", root.display()))
        .hint("Put the model's files in a folder under agent_memory.model_path and name it relative to it, or have a superuser set agent_memory.model_folders_anywhere = on."));
    }
    Ok(full)
}

/// Whether the server can embed with `model` without loading it now: its row names a folder
/// that holds the model's files (an error for a model that has no row or no folder).
pub fn has_files(client: &mut SpiClient<'_>, name: &str) -> Result<bool> {
    let (spec, _) = spec(client, name)?;
    Ok(agent_memory_embed::has_files(&spec.folder))
}

/// Loads the model of a row (once per process, again when its row changed).
fn model(spec: &Spec) -> Result<Rc<Model>> {
    let (name, dims) = (spec.name.as_str(), spec.dims);
    if let Some(m) = MODELS.with(|m| m.borrow().get(name).filter(|(s, _)| s == spec).map(|(_, m)| m.clone())) {
        return Ok(m);
    }
    let pooling: Pooling =
        spec.pooling.parse().map_err(|e: String| MemoryError::invalid_parameter(format!("embedding model \"{name}\": {e}")))?;
    let threads = threads_once();
    let loaded = Model::load(&spec.folder, Options { pooling, max_tokens: spec.max_tokens, threads, kernel: spec.kernel })
        .map_err(|e| load_error(spec, e))?;
    if loaded.dims() != dims as usize {
        return Err(MemoryError::data_exception(format!(
            "embedding model \"{name}\" is registered with {dims} dimensions, and its files make {}",
            loaded.dims()
        ))
        .hint("Correct the model's row in agent_memory.embedding_models, or its folder."));
    }
    let loaded = Rc::new(loaded);
    MODELS.with(|m| m.borrow_mut().insert(name.to_string(), (spec.clone(), loaded.clone())));
    Ok(loaded)
}

/// Whether this process is the background worker (`for_the_worker`): its model runs on
/// `agent_memory.embed_worker_threads`, a backend's on `agent_memory.embed_threads`.
static IN_THE_WORKER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Called by the background worker at its start.
pub fn for_the_worker() {
    IN_THE_WORKER.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// The threads this process's models run on, read once; sets the size of the thread pool the
/// f32 products run on before its first use (the pool reads it once).
fn threads_once() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| {
        let n = if IN_THE_WORKER.load(std::sync::atomic::Ordering::Relaxed) { gucs::embed_worker_threads() } else { gucs::embed_threads() };
        if std::env::var_os("RAYON_NUM_THREADS").is_none() {
            std::env::set_var("RAYON_NUM_THREADS", n.to_string());
        }
        n
    })
}

impl From<EmbedError> for MemoryError {
    /// An error of a running model: a file that proves broken (its weights make no number) is
    /// the model's, 22023 as at loading; a failure of the model on a text is XX000.
    fn from(e: EmbedError) -> Self {
        match e {
            EmbedError::Missing(_) => MemoryError::new(PgSqlErrorCode::ERRCODE_UNDEFINED_FILE, format!("embedding: {e}")),
            EmbedError::Broken(..) => MemoryError::invalid_parameter(format!("embedding: {e}"))
                .hint("Install the model's files again (./scripts/setup.sh for all-MiniLM-L6-v2), or correct its row in agent_memory.embedding_models."),
            EmbedError::Failed(_) => MemoryError::new(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("embedding: {e}")),
        }
    }
}

/// Texts a process keeps the embeddings of, besides the shared cache (the most recent ones).
const LOCAL_ENTRIES: usize = 2048;

/// Embeddings by (scope, model's fingerprint, text).
type Recent = HashMap<(String, String, String), Rc<Vec<f32>>>;

thread_local! {
    /// This process's recent embeddings: a repeated question of the same user costs a hash. Kept
    /// only while no erasure happened anywhere on the server since they were made (the count of
    /// erasures they were made under), only with the library preloaded, which holds the count,
    /// and never on a standby, which learns of no erasure.
    static LOCAL: RefCell<(u64, Recent)> = RefCell::new((0, HashMap::new()));
}

/// This process's recent embeddings, emptied if an erasure happened since; `None` when they
/// cannot be kept (the library was not preloaded).
fn with_local<R>(f: impl FnOnce(&mut Recent) -> R) -> Option<R> {
    // A standby learns of no erasure (the primary counts them): it keeps none.
    if crate::pg::in_recovery() {
        return None;
    }
    let now = crate::share::erasures()?;
    LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        if l.0 != now {
            l.1.clear();
            l.0 = now;
        }
        Some(f(&mut l.1))
    })
}

/// Entries a process adds to the shared cache between two of its trims.
const TRIM_EVERY: usize = 1000;

thread_local! {
    /// Entries this process added to the shared cache since its last trim.
    static ADDED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Whose words a text is, for the caches: a text embedded for one user is found again only for
/// that user, so no answer, and no time to answer, depends on another tenant's texts; and the
/// erasure of a user drops every entry of the user's scope (questions, replaced and merged
/// texts included).
pub enum Scope<'a> {
    /// The texts of a call for this user (memories, turns, questions).
    User(&'a str),
    /// A call without a user (`memory_embed`): the user the session works for
    /// (`agent_memory.user_id`, when the role may name it), else the role's own.
    Caller,
}

const CALLER: &str = "SELECT agent_memory.session_user_id(), current_user::text";

impl Scope<'_> {
    /// The scope's key: `user:<id>` or `role:<name>`. A user the current role may not see is
    /// not a scope it may use (its call fails or finds nothing after): the caller's instead.
    fn key(&self, client: &mut SpiClient<'_>) -> Result<String> {
        if let Scope::User(u) = self {
            if crate::recall::sees_user(client, u)? {
                return Ok(user_scope(u));
            }
        }
        let e = spi("reading the session's user");
        let table = crate::plans::read(client, CALLER, &[]).map_err(&e)?;
        let row = table.first();
        let user: Option<String> = row.get(1).map_err(&e)?;
        let role: Option<String> = row.get(2).map_err(&e)?;
        Ok(match user {
            Some(u) => user_scope(&u),
            None => format!("role:{}", role.unwrap_or_default()),
        })
    }
}

/// The shared cache's entries of `texts` (keyed by SHA-256 of the secret receipt key, the scope,
/// the model's fingerprint and the text).
const CACHED: &str = "SELECT t.i::integer, c.emb FROM unnest($2::text[]) WITH ORDINALITY AS t(x, i) \
       CROSS JOIN agent_memory.lock_salt s \
       JOIN agent_memory.embedding_cache c \
         ON c.model = $1 AND c.text_hash = pg_catalog.sha256(s.receipt_key || pg_catalog.convert_to(t.x, 'UTF8'))";
const CACHE: &str = "INSERT INTO agent_memory.embedding_cache (model, text_hash, emb, scope_hash) \
     SELECT $1, pg_catalog.sha256(s.receipt_key || pg_catalog.convert_to(u.x, 'UTF8')), u.e, \
            pg_catalog.sha256(s.receipt_key || pg_catalog.convert_to(u.scope, 'UTF8')) \
       FROM unnest($2::text[], $3, $4::text[]) AS u(x, e, scope) CROSS JOIN agent_memory.lock_salt s \
     ON CONFLICT ON CONSTRAINT embedding_cache_pkey DO NOTHING";

/// What the shared cache hashes for a text: its scope, the model's fingerprint and the text,
/// each but the last with its length first, so no two different triples read the same.
fn cache_key(scope: &str, fingerprint: &str, text: &str) -> String {
    format!("{}:{scope}{}:{fingerprint}{text}", scope.len(), fingerprint.len())
}

/// The unit-length embeddings of `texts` under `model`, in order, all of one scope.
pub fn embed(client: &mut SpiClient<'_>, model: &str, texts: &[&str], scope: Scope<'_>) -> Result<Vec<Vec<f32>>> {
    let key = scope.key(client)?;
    let scopes = vec![key.as_str(); texts.len()];
    embed_scoped(client, model, texts, &scopes)
}

/// The unit-length embeddings of `texts` under `model`, in order, each text of its scope (a key
/// of `Scope::key`): from this process's recent ones, else the shared cache, else the model
/// (whose results then join both; the shared cache only in a transaction that may write). Checks
/// for a cancel between chunks of texts.
pub fn embed_scoped(client: &mut SpiClient<'_>, model: &str, texts: &[&str], scopes: &[&str]) -> Result<Vec<Vec<f32>>> {
    for t in texts {
        gucs::check_sizes(Some(t), None)?;
    }
    let (spec, _) = spec(client, model)?;
    // Each text as far as the model reads it (its start: agent_memory_embed::readable_part), so
    // a long text costs no more than its first pieces, in the model, the caches and the hashes.
    let texts: Vec<&str> = texts.iter().map(|t| agent_memory_embed::readable_part(t, spec.max_tokens)).collect();
    let texts = &texts[..];
    let bytes: usize = texts.iter().map(|t| t.len()).sum();
    if bytes > gucs::embed_max_bytes() {
        return Err(MemoryError::new(
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!("this call gives the embedding model {bytes} bytes of text, more than the limit of {}", gucs::embed_max_bytes()),
        )
        .detail("Each text counts up to the part the model reads (its first word pieces).")
        .hint("Embed fewer texts per call, or ask a superuser to raise agent_memory.embed_max_bytes."));
    }
    let fingerprint = spec.fingerprint();
    let shared = gucs::embed_cache_size() > 0;
    let local_key = |i: usize| (scopes[i].to_string(), fingerprint.clone(), texts[i].to_string());
    let mut out: Vec<Option<Vec<f32>>> =
        with_local(|l| (0..texts.len()).map(|i| l.get(&local_key(i)).map(|v| v.as_ref().clone())).collect())
            .unwrap_or_else(|| vec![None; texts.len()]);
    let mut hits = out.iter().filter(|v| v.is_some()).count() as u64;
    let missing: Vec<usize> = (0..texts.len()).filter(|&i| out[i].is_none()).collect();
    let keys: Vec<String> = (0..texts.len()).map(|i| cache_key(scopes[i], &fingerprint, texts[i])).collect();
    if shared && !missing.is_empty() {
        let asked: Vec<Option<String>> = missing.iter().map(|&i| Some(keys[i].clone())).collect();
        let mut table = crate::locks::as_owner(client, CACHED, &[model.into(), asked.into()])?;
        while table.next().is_some() {
            let i: i32 = table.get(1).map_err(spi("reading the embedding cache"))?.unwrap_or(0);
            let e = crate::vector::vector_column(&table, 2)?;
            if let (Some(&slot), Some(v)) = (missing.get((i as usize).wrapping_sub(1)), e) {
                out[slot] = Some(v.to_f32_vec());
                hits += 1;
            }
        }
    }
    let todo: Vec<usize> = (0..texts.len()).filter(|&i| out[i].is_none()).collect();
    if !todo.is_empty() {
        let m = self::model(&spec)?;
        let computed = m.embed::<MemoryError>(&todo.iter().map(|&i| texts[i]).collect::<Vec<_>>(), || {
            pgrx::check_for_interrupts!();
            Ok(())
        })?;
        for (&i, v) in todo.iter().zip(computed) {
            out[i] = Some(v);
        }
    }
    // A user's texts are kept only where the user's rows are (on a Citus cluster, the node where
    // the erasure runs). The shared cache takes them only while no erasure of the user is under
    // way: the user's erasure lock is held shared until the end of the transaction, so an erasure
    // that follows waits, then drops these entries. (This process's recent embeddings need no
    // lock: an erasure's commit empties them, `with_local`.)
    let held = held_here(scopes);
    let writable = shared && !todo.is_empty() && !crate::pg::read_only();
    let new: Vec<usize> = if writable { unerased(client, scopes, &held, &todo)? } else { Vec::new() };
    if !new.is_empty() {
        let entries: Vec<Option<String>> = new.iter().map(|&i| Some(keys[i].clone())).collect();
        let owners: Vec<Option<String>> = new.iter().map(|&i| Some(scopes[i].to_string())).collect();
        let vectors: Vec<Vec<f32>> = new.iter().map(|&i| out[i].clone().unwrap_or_default()).collect();
        let vectors = crate::vector::new_vector_array(&vectors)?;
        crate::locks::as_owner(client, CACHE, &[model.into(), entries.into(), vectors, owners.into()])?;
        // The worker's pack pass keeps the cache to its size; without a worker, the processes
        // that add to it do, every TRIM_EVERY entries they add.
        let due = ADDED.with(|a| {
            a.set(a.get() + new.len());
            a.get() >= TRIM_EVERY
        });
        if due {
            ADDED.with(|a| a.set(0));
            crate::locks::as_owner(client, TRIM, &[gucs::embed_cache_size().into()])?;
        }
    }
    crate::share::count_embeddings(hits, todo.len() as u64);
    with_local(|l| {
        if l.len() + texts.len() > LOCAL_ENTRIES {
            l.clear();
        }
        for (i, v) in out.iter().enumerate().take(LOCAL_ENTRIES) {
            if let (Some(v), true) = (v, held[i]) {
                l.insert(local_key(i), Rc::new(v.clone()));
            }
        }
    });
    Ok(out.into_iter().map(Option::unwrap_or_default).collect())
}

/// The embeddings of `text`'s windows past the model's own (up to `max_windows`, see
/// `agent_memory_embed::Model::embed_windows`): none for a text the model reads whole, fewer
/// when the windows would hold more than `agent_memory.embed_max_bytes`. Made by the model each
/// time, never cached (a memory's windows are made once, when it is written).
pub fn embed_windows(client: &mut SpiClient<'_>, model: &str, text: &str, max_windows: usize) -> Result<Vec<Vec<f32>>> {
    gucs::check_sizes(Some(text), None)?;
    if max_windows == 0 {
        return Ok(Vec::new());
    }
    let (spec, _) = spec(client, model)?;
    let read = agent_memory_embed::readable_part(text, spec.max_tokens.saturating_mul(max_windows + 1));
    // No more than one call may give the model (agent_memory.embed_max_bytes): fewer windows.
    let mut end = read.len().min(gucs::embed_max_bytes());
    while !read.is_char_boundary(end) {
        end -= 1;
    }
    let read = &read[..end];
    let m = self::model(&spec)?;
    let mut out = m.embed_windows::<MemoryError>(&[read], max_windows, || {
        pgrx::check_for_interrupts!();
        Ok(())
    })?;
    Ok(out.pop().unwrap_or_default())
}

/// Which texts' embeddings this node may keep: those of a scope that is not a user's, or of a
/// user whose rows it holds (every user on one server; on a Citus cluster, the node where the
/// user's erasure runs, so no other node keeps a copy of the user's words).
fn held_here(scopes: &[&str]) -> Vec<bool> {
    let mut users: HashMap<&str, bool> = HashMap::new();
    scopes
        .iter()
        .map(|s| match s.strip_prefix("user:") {
            Some(u) => *users.entry(u).or_insert_with(|| crate::placement::tables_of_user(u).is_ok()),
            None => true,
        })
        .collect()
}

/// Of the texts `todo`, those the shared cache may take: held here, and of a scope that is not a
/// user's or of a user whose erasure lock this transaction holds shared (taken here, never waited
/// for).
fn unerased(client: &mut SpiClient<'_>, scopes: &[&str], held: &[bool], todo: &[usize]) -> Result<Vec<usize>> {
    let mut free: HashMap<&str, bool> = HashMap::new();
    let mut out = Vec::new();
    for &i in todo.iter().filter(|&&i| held[i]) {
        let ok = match scopes[i].strip_prefix("user:") {
            Some(u) => match free.get(u) {
                Some(f) => *f,
                None => {
                    let f = crate::locks::try_erasure_shared(client, u)?;
                    free.insert(u, f);
                    f
                }
            },
            None => true,
        };
        if ok {
            out.push(i);
        }
    }
    Ok(out)
}

/// The scope key of a user's texts (`uncache_user` computes the same in SQL).
pub fn user_scope(user: &str) -> String {
    format!("user:{user}")
}

/// Entries of the shared cache past `agent_memory.embed_cache_size`, oldest first, dropped by the
/// worker's pack pass, and by a process that added `TRIM_EVERY` entries since its last trim.
const TRIM: &str = "DELETE FROM agent_memory.embedding_cache c WHERE c.ctid IN ( \
       SELECT x.ctid FROM agent_memory.embedding_cache x ORDER BY x.created_at, x.model, x.text_hash \
        LIMIT greatest((SELECT count(*) FROM agent_memory.embedding_cache) - $1, 0)) RETURNING 1";

/// Drops the oldest entries past the cache's size; returns how many went.
pub fn trim(client: &mut SpiClient<'_>) -> Result<u64> {
    let n = crate::plans::write(client, TRIM, &[gucs::embed_cache_size().into()]).map_err(spi("trimming the embedding cache"))?.len();
    Ok(n as u64)
}

const CACHE_ENTRIES: &str = "SELECT count(*) FROM agent_memory.embedding_cache";

/// The shared cache's entries, and its hits and misses since the server started: an admin's
/// (they count every tenant's texts).
pub fn stats(client: &mut SpiClient<'_>) -> Result<(i64, Option<(u64, u64)>)> {
    if !crate::recall::sees_every_user(client)? {
        return Err(MemoryError::new(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            "only an admin may read the embedding cache's counters",
        )
        .detail("They count every tenant's texts.")
        .hint("Ask an agent_memory admin, or a superuser, to read memory_embed_stats()."));
    }
    let n: Option<i64> =
        crate::error::first_value(crate::locks::as_owner(client, CACHE_ENTRIES, &[])?).map_err(spi("counting the cache"))?;
    Ok((n.unwrap_or(0), crate::share::embedding_counts()))
}

/// The embedding of one text.
pub fn embed_one(client: &mut SpiClient<'_>, model: &str, text: &str, scope: Scope<'_>) -> Result<Vec<f32>> {
    Ok(embed(client, model, &[text], scope)?.pop().unwrap_or_default())
}

/// A query as a call received it: a vector, or text the server embeds.
pub struct Query {
    pub vector: crate::vector::VectorDatum,
    /// The question's words, for a query given as text (hybrid recall by default).
    pub text: Option<String>,
    /// The model the text was embedded with.
    pub model: Option<String>,
}

/// What a call accepts in a query position: `vector`, `halfvec`, or text. Text in pgvector's
/// syntax (starting with `[`) is a vector, as before text was accepted; any other text is
/// embedded by the server with the call's model (or `agent_memory.text_model`).
pub trait QueryInput {
    /// The query, embedded for `user` (the call's user) when it is text.
    fn resolve(self, model: Option<&str>, user: Option<&str>) -> Result<Query>;
}

impl QueryInput for crate::vector::Vector {
    fn resolve(self, _model: Option<&str>, _user: Option<&str>) -> Result<Query> {
        Ok(Query { vector: self.0, text: None, model: None })
    }
}

impl QueryInput for crate::vector::HalfVec {
    fn resolve(self, _model: Option<&str>, _user: Option<&str>) -> Result<Query> {
        Ok(Query { vector: self.0, text: None, model: None })
    }
}

impl QueryInput for &str {
    fn resolve(self, model: Option<&str>, user: Option<&str>) -> Result<Query> {
        if self.trim_start().starts_with('[') {
            return Ok(Query { vector: crate::vector::parse_vector_text(self)?, text: None, model: None });
        }
        if self.trim().is_empty() {
            return Err(MemoryError::invalid_parameter("the query text is empty")
                .hint("Pass the question as text, or a vector (pgvector's '[0.1, 0.2, ...]')."));
        }
        let model = text_model(model)?;
        let v = pgrx::spi::Spi::connect_mut(|client| {
            crate::version::require_current_schema(client)?;
            let scope = match user {
                Some(u) => Scope::User(u),
                None => Scope::Caller,
            };
            embed_one(client, &model, self, scope)
        })?;
        Ok(Query { vector: crate::vector::vector_datum_of(&v)?, text: Some(self.to_string()), model: Some(model) })
    }
}
