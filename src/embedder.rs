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
}

thread_local! {
    static MODELS: RefCell<HashMap<String, (Spec, Rc<Model>)>> = RefCell::new(HashMap::new());
}

const MODEL_ROW: &str = "SELECT dimensions, folder, pooling, max_tokens FROM agent_memory.embedding_models WHERE name = $1";

/// The model a text call uses: the one it names, else `agent_memory.text_model`.
pub fn text_model(named: Option<&str>) -> Result<String> {
    match named {
        Some(m) if m.trim().is_empty() => Err(MemoryError::invalid_parameter("model must not be empty")
            .hint("Name an embedding model with a folder in agent_memory.embedding_models, or pass NULL for agent_memory.text_model.")),
        Some(m) => Ok(m.to_string()),
        None => Ok(gucs::text_model()),
    }
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
    let path = PathBuf::from(&folder);
    let folder = if path.is_absolute() { path } else { models_folder().join(path) };
    Ok((Spec { name: name.to_string(), folder, pooling, max_tokens: max_tokens.max(2) as usize }, dims))
}

/// Whether the server can embed with `model` without loading it now: its row names a folder
/// that holds the model's files (an error for a model that has no row or no folder).
pub fn has_files(client: &mut SpiClient<'_>, name: &str) -> Result<bool> {
    let (spec, _) = spec(client, name)?;
    Ok(agent_memory_embed::has_files(&spec.folder))
}

/// Reads the model's row, and loads the model (once per process, again when its row changed).
fn model(client: &mut SpiClient<'_>, name: &str) -> Result<(Rc<Model>, usize)> {
    let (spec, dims) = spec(client, name)?;
    if let Some(m) = MODELS.with(|m| m.borrow().get(name).filter(|(s, _)| *s == spec).map(|(_, m)| m.clone())) {
        return Ok((m, dims as usize));
    }
    let pooling: Pooling =
        spec.pooling.parse().map_err(|e: String| MemoryError::invalid_parameter(format!("embedding model \"{name}\": {e}")))?;
    threads_once();
    let loaded = Model::load(&spec.folder, Options { pooling, max_tokens: spec.max_tokens }).map_err(|e| load_error(&spec, e))?;
    if loaded.dims() != dims as usize {
        return Err(MemoryError::data_exception(format!(
            "embedding model \"{name}\" is registered with {dims} dimensions, and its files make {}",
            loaded.dims()
        ))
        .hint("Correct the model's row in agent_memory.embedding_models, or its folder."));
    }
    let loaded = Rc::new(loaded);
    MODELS.with(|m| m.borrow_mut().insert(name.to_string(), (spec, loaded.clone())));
    Ok((loaded, dims as usize))
}

/// Sets the size of the thread pool the model runs on, before its first use in this process
/// (candle's pool reads it once).
fn threads_once() {
    static DONE: std::sync::Once = std::sync::Once::new();
    DONE.call_once(|| {
        if std::env::var_os("RAYON_NUM_THREADS").is_none() {
            std::env::set_var("RAYON_NUM_THREADS", gucs::embed_threads().to_string());
        }
    });
}

impl From<EmbedError> for MemoryError {
    fn from(e: EmbedError) -> Self {
        MemoryError::new(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("embedding: {e}"))
    }
}

/// Texts a process keeps the embeddings of, besides the shared cache (the most recent ones).
const LOCAL_ENTRIES: usize = 2048;

/// Embeddings by (model, text).
type Recent = HashMap<(String, String), Rc<Vec<f32>>>;

thread_local! {
    /// This process's recent embeddings by (model, text): a repeated question costs a hash.
    static LOCAL: RefCell<Recent> = RefCell::new(HashMap::new());
}

/// The shared cache's entries of `texts` (keyed by SHA-256 of the secret receipt key and the text).
const CACHED: &str = "SELECT t.i::integer, c.emb FROM unnest($2::text[]) WITH ORDINALITY AS t(x, i) \
       CROSS JOIN agent_memory.lock_salt s \
       JOIN agent_memory.embedding_cache c \
         ON c.model = $1 AND c.text_hash = pg_catalog.sha256(s.receipt_key || pg_catalog.convert_to(t.x, 'UTF8'))";
const CACHE: &str = "INSERT INTO agent_memory.embedding_cache (model, text_hash, emb) \
     SELECT $1, pg_catalog.sha256(s.receipt_key || pg_catalog.convert_to(u.x, 'UTF8')), u.e \
       FROM unnest($2::text[], $3) AS u(x, e) CROSS JOIN agent_memory.lock_salt s \
     ON CONFLICT ON CONSTRAINT embedding_cache_pkey DO NOTHING";

/// The unit-length embeddings of `texts` under `model`, in order: from this process's recent
/// ones, else the shared cache, else the model (whose results then join both; the shared cache
/// only in a transaction that may write). Checks for a cancel between chunks of texts.
pub fn embed(client: &mut SpiClient<'_>, model: &str, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
    for t in texts {
        gucs::check_sizes(Some(t), None)?;
    }
    let shared = gucs::embed_cache_size() > 0;
    let mut out: Vec<Option<Vec<f32>>> = LOCAL.with(|l| {
        let l = l.borrow();
        texts.iter().map(|t| l.get(&(model.to_string(), t.to_string())).map(|v| v.as_ref().clone())).collect()
    });
    let mut hits = out.iter().filter(|v| v.is_some()).count() as u64;
    let missing: Vec<usize> = (0..texts.len()).filter(|&i| out[i].is_none()).collect();
    if shared && !missing.is_empty() {
        let asked: Vec<Option<String>> = missing.iter().map(|&i| Some(texts[i].to_string())).collect();
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
        let (m, _) = self::model(client, model)?;
        let computed = m.embed::<MemoryError>(&todo.iter().map(|&i| texts[i]).collect::<Vec<_>>(), || {
            pgrx::check_for_interrupts!();
            Ok(())
        })?;
        if shared && !crate::pg::read_only() {
            let keys: Vec<Option<String>> = todo.iter().map(|&i| Some(texts[i].to_string())).collect();
            let vectors = crate::vector::new_vector_array(&computed)?;
            crate::locks::as_owner(client, CACHE, &[model.into(), keys.into(), vectors])?;
        }
        for (&i, v) in todo.iter().zip(computed) {
            out[i] = Some(v);
        }
    }
    crate::share::count_embeddings(hits, todo.len() as u64);
    LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        if l.len() + texts.len() > LOCAL_ENTRIES {
            l.clear();
        }
        for (t, v) in texts.iter().zip(&out).take(LOCAL_ENTRIES) {
            if let Some(v) = v {
                l.insert((model.to_string(), t.to_string()), Rc::new(v.clone()));
            }
        }
    });
    Ok(out.into_iter().map(Option::unwrap_or_default).collect())
}

/// Entries of the shared cache past `agent_memory.embed_cache_size`, oldest first, dropped by the
/// worker's pack pass.
const TRIM: &str = "DELETE FROM agent_memory.embedding_cache c WHERE c.ctid IN ( \
       SELECT x.ctid FROM agent_memory.embedding_cache x ORDER BY x.created_at, x.model, x.text_hash \
        LIMIT greatest((SELECT count(*) FROM agent_memory.embedding_cache) - $1, 0)) RETURNING 1";

/// Drops the oldest entries past the cache's size; returns how many went.
pub fn trim(client: &mut SpiClient<'_>) -> Result<u64> {
    let n = crate::plans::write(client, TRIM, &[gucs::embed_cache_size().into()]).map_err(spi("trimming the embedding cache"))?.len();
    Ok(n as u64)
}

const CACHE_ENTRIES: &str = "SELECT count(*) FROM agent_memory.embedding_cache";

/// The shared cache's entries, and its hits and misses since the server started.
pub fn stats(client: &mut SpiClient<'_>) -> Result<(i64, Option<(u64, u64)>)> {
    let n: Option<i64> =
        crate::error::first_value(crate::locks::as_owner(client, CACHE_ENTRIES, &[])?).map_err(spi("counting the cache"))?;
    Ok((n.unwrap_or(0), crate::share::embedding_counts()))
}

/// The embedding of one text.
pub fn embed_one(client: &mut SpiClient<'_>, model: &str, text: &str) -> Result<Vec<f32>> {
    Ok(embed(client, model, &[text])?.pop().unwrap_or_default())
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
    fn resolve(self, model: Option<&str>) -> Result<Query>;
}

impl QueryInput for crate::vector::Vector {
    fn resolve(self, _model: Option<&str>) -> Result<Query> {
        Ok(Query { vector: self.0, text: None, model: None })
    }
}

impl QueryInput for crate::vector::HalfVec {
    fn resolve(self, _model: Option<&str>) -> Result<Query> {
        Ok(Query { vector: self.0, text: None, model: None })
    }
}

impl QueryInput for &str {
    fn resolve(self, model: Option<&str>) -> Result<Query> {
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
            embed_one(client, &model, self)
        })?;
        Ok(Query { vector: crate::vector::vector_datum_of(&v)?, text: Some(self.to_string()), model: Some(model) })
    }
}
