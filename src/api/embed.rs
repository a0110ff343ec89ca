//! `agent_memory.memory_embed(text, model)` and its batch form over `text[]`: the server's
//! embedding of text, as the text forms of recall, context and reconcile compute it.

use std::collections::BTreeMap;

use pgrx::prelude::*;

use crate::error::{spi, OrRaise, Result};
use crate::vector::VectorResult;

fn embed_texts(texts: &[Option<String>], model: Option<&str>) -> Result<Vec<Option<Vec<f32>>>> {
    let model = crate::embedder::text_model(model)?;
    let present: Vec<&str> = texts.iter().flatten().map(String::as_str).collect();
    let mut vectors = if present.is_empty() {
        Vec::new()
    } else {
        Spi::connect_mut(|client| {
            crate::version::require_current_schema(client)?;
            crate::embedder::embed(client, &model, &present, crate::embedder::Scope::Caller)
        })?
    }
    .into_iter();
    Ok(texts.iter().map(|t| t.as_ref().and_then(|_| vectors.next())).collect())
}

/// The embedding of `text` under `model` (NULL: `agent_memory.text_model`, all-MiniLM-L6-v2 by
/// default), computed by the server from the model's files: unit length, as sentence-transformers
/// computes it. NULL for a NULL text.
#[pg_extern(stable, parallel_restricted, name = "memory_embed")]
#[search_path(pg_catalog, pg_temp)]
fn memory_embed(text: Option<&str>, model: default!(Option<&str>, "NULL")) -> Option<VectorResult> {
    let text = text?;
    embed_texts(&[Some(text.to_string())], model).or_raise().pop().flatten().map(VectorResult)
}

/// The embedding cache: its entries, and the hits and misses of every process since the server
/// started (NULL without `shared_preload_libraries = 'agent_memory'`, which holds the counters).
/// A hit is a text found in this process's recent embeddings or in the shared cache.
#[pg_extern(volatile, parallel_safe, name = "memory_embed_stats")]
#[search_path(pg_catalog, pg_temp)]
fn memory_embed_stats() -> TableIterator<'static, (name!(entries, i64), name!(hits, Option<i64>), name!(misses, Option<i64>))> {
    let (entries, counts) = Spi::connect_mut(|client| {
        crate::version::require_current_schema(client)?;
        crate::embedder::stats(client)
    })
    .or_raise();
    TableIterator::once((entries, counts.map(|c| c.0 as i64), counts.map(|c| c.1 as i64)))
}

/// The embeddings of `texts`, one row per input in order (`ordinal` from 1; NULL for a NULL
/// text), computed together: texts of similar length run through the model in batches.
#[pg_extern(stable, parallel_restricted, name = "memory_embed")]
#[search_path(pg_catalog, pg_temp)]
fn memory_embed_batch(
    texts: Option<Vec<Option<String>>>,
    model: default!(Option<&str>, "NULL"),
) -> TableIterator<'static, (name!(ordinal, i32), name!(embedding, Option<VectorResult>))> {
    let texts = texts.unwrap_or_default();
    let vectors = embed_texts(&texts, model).or_raise();
    TableIterator::new(vectors.into_iter().enumerate().map(|(i, v)| (i as i32 + 1, v.map(VectorResult))))
}

/// For an erasure (`uncache_user`): every process drops its recent embeddings, now and again
/// when the erasure commits (an embedding made for the user in between is dropped too).
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn embeddings_erased() {
    crate::share::count_erasure();
    pgrx::register_xact_callback(pgrx::PgXactCallbackEvent::Commit, crate::share::count_erasure);
}

/// For the write trigger: the embedding of a memory's `content` under `model`, for its user (its
/// cache entries are the user's, and go with the user's erasure). A role that may not write for
/// the user is refused here as the row's policies would refuse it (42501), before any text is
/// embedded in the user's name.
#[pg_extern(volatile, parallel_restricted)]
#[search_path(pg_catalog, pg_temp)]
fn embed_row(user_id: Option<&str>, content: Option<&str>, model: Option<&str>) -> Option<VectorResult> {
    let (Some(user), Some(content)) = (user_id, content) else {
        return None;
    };
    let model = crate::embedder::text_model(model).or_raise();
    Spi::connect_mut(|client| {
        crate::version::require_current_schema(client)?;
        if !crate::recall::sees_user(client, user)? {
            return Err(crate::recall::not_your_user(user));
        }
        // The check above is the scope's own (Scope::key would ask it again): the user's scope.
        let scope = crate::embedder::user_scope(user);
        Ok(crate::embedder::embed_scoped(client, &model, &[content], &[scope.as_str()])?.pop().unwrap_or_default())
    })
    .map(VectorResult)
    .or_raise()
    .into()
}

/// For the write trigger: the embeddings of the windows of a memory's `content` past the model's
/// own (`agent_memory.embed_windows` of them at most), for its user; NULL when the setting is 0,
/// the model is not one the server embeds with, or the model reads all of the content. Refuses a
/// role that may not write for the user (42501), as `embed_row` does.
#[pg_extern(volatile, parallel_restricted)]
#[search_path(pg_catalog, pg_temp)]
fn embed_windows(user_id: Option<&str>, content: Option<&str>, model: Option<&str>) -> Option<crate::vector::VectorArrayResult> {
    let (Some(user), Some(content), Some(model)) = (user_id, content, model) else {
        return None;
    };
    let max = crate::gucs::embed_windows();
    if max == 0 {
        return None;
    }
    let windows = Spi::connect_mut(|client| {
        crate::version::require_current_schema(client)?;
        if !crate::recall::sees_user(client, user)? {
            return Err(crate::recall::not_your_user(user));
        }
        // A model whose vectors come from outside (no folder) has no windows.
        if !crate::embedder::has_files(client, model).unwrap_or(false) {
            return Ok(Vec::new());
        }
        crate::embedder::embed_windows(client, model, content, max)
    })
    .or_raise();
    (!windows.is_empty()).then_some(crate::vector::VectorArrayResult(windows))
}

/// For the write trigger: whether a memory of `model` written without an embedding is left for
/// the background worker to embed (`agent_memory.embed_async` is on and the model's files are
/// there); false makes the trigger embed it at once (and report a model it cannot load).
#[pg_extern(stable, parallel_restricted)]
#[search_path(pg_catalog, pg_temp)]
fn embed_later(model: Option<&str>) -> bool {
    let Some(model) = model.filter(|_| crate::gucs::embed_async()) else {
        return false;
    };
    Spi::connect_mut(|client| crate::embedder::has_files(client, model)).unwrap_or(false)
}

/// The memories written without an embedding, oldest first, after `$1`: locked, skipping those
/// another transaction holds (an erasure, a write, another pass).
// (Only the start of a long content is read: the model reads no more, agent_memory_embed::readable_part.)
const PENDING: &str = "SELECT m.id, m.user_id, m.embedding_model, left(m.content, 65536) FROM agent_memory.memories m \
      WHERE m.emb IS NULL AND m.embedding_model <> 'none' AND m.id > $1 AND m.id <> ALL ($3::bigint[]) ORDER BY m.id LIMIT $2 FOR NO KEY UPDATE SKIP LOCKED";
const STORE: &str = "UPDATE agent_memory.memories m SET emb = x.emb \
      FROM unnest($1::bigint[], $2, $3::text[]) AS x(id, emb, user_id) \
     WHERE m.user_id = x.user_id AND m.id = x.id AND m.emb IS NULL RETURNING 1";

/// What one batch of the worker's embedding pass did.
pub struct EmbedBatch {
    /// Memories embedded and stored.
    pub embedded: i64,
    /// The last id the batch looked at (the next batch starts after it); `None` when none was left.
    pub last_id: Option<i64>,
    /// Models the batch could not embed with, and why.
    pub failed: Vec<(String, String)>,
}

/// How long the worker leaves a model that could not be loaded before it tries it again.
const MODEL_RETRY: std::time::Duration = std::time::Duration::from_secs(60);

thread_local! {
    /// Models this worker could not load, and when it last tried.
    static MODEL_BACKOFF: std::cell::RefCell<std::collections::HashMap<String, std::time::Instant>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
    /// Memories the model failed on alone, set aside by this worker for its life (each with a
    /// warning) instead of taken again by every batch; they stay found by keyword recall.
    static SET_ASIDE: std::cell::RefCell<std::collections::BTreeSet<i64>> = const { std::cell::RefCell::new(std::collections::BTreeSet::new()) };
}

/// The rows of one model in runs whose text the model reads stays under
/// `agent_memory.embed_max_bytes` (a row alone may be all of a run).
fn runs_under_bound(rows: &[(i64, String, String)]) -> Vec<&[(i64, String, String)]> {
    let bound = crate::gucs::embed_max_bytes();
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0usize, 0usize);
    for (i, r) in rows.iter().enumerate() {
        let n = r.1.len().min(agent_memory_embed::BYTES_PER_PIECE * 1024);
        if i > start && bytes + n > bound {
            out.push(&rows[start..i]);
            start = i;
            bytes = 0;
        }
        bytes += n;
    }
    if start < rows.len() {
        out.push(&rows[start..]);
    }
    out
}

/// One batch of the worker's embedding pass, in the caller's transaction: up to `limit` memories
/// written without an embedding (ids after `after`) are embedded, model by model, and stored.
/// The rows are locked until the transaction ends, so a crash stores nothing of the batch and
/// the next pass embeds it again, and no row is stored twice. A user being erased is skipped
/// (the erasure drops the rows), and the user's erasure lock is held shared while the embeddings
/// go into the cache, so an erasure that follows drops those entries too.
pub fn embed_pending(client: &mut pgrx::spi::SpiClient<'_>, t: &crate::placement::TableSet, after: i64, limit: i64) -> Result<EmbedBatch> {
    let mut by_model: BTreeMap<String, Vec<(i64, String, String)>> = BTreeMap::new();
    let mut users: BTreeMap<String, Vec<(String, i64, String)>> = BTreeMap::new();
    let mut last_id = None;
    {
        let aside: Vec<i64> = SET_ASIDE.with(|s| s.borrow().iter().copied().collect());
        // (Through a kept plan that takes no transaction id until a row is locked: an idle pass
        // writes nothing, not even a commit record.)
        let mut table = crate::plans::write(client, t.sql(PENDING), &[after.into(), limit.into(), aside.into()])
            .map_err(spi("reading the memories to embed"))?;
        while table.next().is_some() {
            let id: i64 = table.get(1).map_err(spi("reading id"))?.unwrap_or_default();
            let user: String = table.get(2).map_err(spi("reading user_id"))?.unwrap_or_default();
            let model: String = table.get(3).map_err(spi("reading embedding_model"))?.unwrap_or_default();
            let content: String = table.get(4).map_err(spi("reading content"))?.unwrap_or_default();
            last_id = Some(id);
            users.entry(user).or_default().push((model, id, content));
        }
    }
    for (user, rows) in users {
        if crate::locks::try_erasure_shared(client, &user)? {
            for (model, id, content) in rows {
                by_model.entry(model).or_default().push((id, content, user.clone()));
            }
        }
    }
    let mut embedded = 0;
    let mut failed = Vec::new();
    for (model, rows) in by_model {
        // A model that could not be loaded is tried again a while later, not by every batch (a
        // broken file may cost a model run each time).
        if MODEL_BACKOFF.with(|b| b.borrow().get(&model).is_some_and(|t| t.elapsed() < MODEL_RETRY)) {
            continue;
        }
        for run in runs_under_bound(&rows) {
            pgrx::check_for_interrupts!();
            match embed_run(client, t, &model, run) {
                Ok(n) => embedded += n,
                // The model ran and failed: each row alone, so one bad row holds up no other.
                Err(e) if of_rows(&e) && run.len() > 1 => {
                    for row in run {
                        match embed_run(client, t, &model, std::slice::from_ref(row)) {
                            Ok(n) => embedded += n,
                            Err(e) => set_aside(row, &model, &e.message),
                        }
                    }
                }
                Err(e) if of_rows(&e) => set_aside(&run[0], &model, &e.message),
                // The model cannot be loaded (its files): every row waits for it.
                Err(e) => {
                    MODEL_BACKOFF.with(|b| b.borrow_mut().insert(model.clone(), std::time::Instant::now()));
                    failed.push((model, e.message));
                    break;
                }
            }
        }
    }
    Ok(EmbedBatch { embedded, last_id, failed })
}

/// Whether an embedding error is the rows' (the model ran and failed on them, or they are past
/// `agent_memory.embed_max_bytes`), not the model's.
fn of_rows(e: &crate::error::MemoryError) -> bool {
    matches!(e.code, pgrx::PgSqlErrorCode::ERRCODE_INTERNAL_ERROR | pgrx::PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED)
}

/// Embeds and stores one run of rows of one model; returns how many were stored.
fn embed_run(
    client: &mut pgrx::spi::SpiClient<'_>,
    t: &crate::placement::TableSet,
    model: &str,
    run: &[(i64, String, String)],
) -> Result<i64> {
    let texts: Vec<&str> = run.iter().map(|r| r.1.as_str()).collect();
    let scopes: Vec<String> = run.iter().map(|r| crate::embedder::user_scope(&r.2)).collect();
    let scopes: Vec<&str> = scopes.iter().map(String::as_str).collect();
    let vectors = crate::embedder::embed_scoped(client, model, &texts, &scopes)?;
    let ids: Vec<i64> = run.iter().map(|r| r.0).collect();
    let owners: Vec<String> = run.iter().map(|r| r.2.clone()).collect();
    let stored = crate::plans::write(client, t.sql(STORE), &[ids.into(), crate::vector::new_vector_array(&vectors)?, owners.into()])
        .map_err(spi("storing the embeddings"))?;
    Ok(stored.len() as i64)
}

fn set_aside(row: &(i64, String, String), model: &str, why: &str) {
    SET_ASIDE.with(|s| s.borrow_mut().insert(row.0));
    pgrx::warning!("agent_memory: memory {} (model \"{model}\") is set aside unembedded until the worker restarts: {why}", row.0);
}
