//! `agent_memory.memory_embed(text, model)` and its batch form over `text[]`: the server's
//! embedding of text, as the text forms of recall, context and reconcile compute it.

use pgrx::prelude::*;

use crate::error::{OrRaise, Result};
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
