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
            crate::embedder::embed(client, &model, &present)
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
const PENDING: &str = "SELECT m.id, m.user_id, m.embedding_model, m.content FROM agent_memory.memories m \
      WHERE m.emb IS NULL AND m.id > $1 ORDER BY m.id LIMIT $2 FOR NO KEY UPDATE SKIP LOCKED";
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
        let mut table = client.update(t.sql(PENDING), None, &[after.into(), limit.into()]).map_err(spi("reading the memories to embed"))?;
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
        pgrx::check_for_interrupts!();
        let texts: Vec<&str> = rows.iter().map(|r| r.1.as_str()).collect();
        match crate::embedder::embed(client, &model, &texts) {
            Ok(vectors) => {
                let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
                let owners: Vec<String> = rows.iter().map(|r| r.2.clone()).collect();
                let stored = client
                    .update(t.sql(STORE), None, &[ids.into(), crate::vector::new_vector_array(&vectors)?, owners.into()])
                    .map_err(spi("storing the embeddings"))?;
                embedded += stored.len() as i64;
            }
            Err(e) => failed.push((model, e.message)),
        }
    }
    Ok(EmbedBatch { embedded, last_id, failed })
}
