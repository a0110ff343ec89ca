//! Catalog lookups shared by the SQL functions: an embedding model's dimension and the schema
//! pgvector is installed in.

use pgrx::spi::SpiClient;

use crate::error::{first_value, spi, MemoryError, Result};

const MODEL_DIMS: &str = "SELECT dimensions FROM agent_memory.embedding_models WHERE name = $1";
const VECTOR_SCHEMA: &str = "SELECT n.nspname::text FROM pg_catalog.pg_extension e \
     JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'";

/// The model name of memories stored only: no embedding, never recalled, embedded, packed or
/// merged (the write trigger refuses an embedding for it).
pub const UNRECALLED: &str = "none";

/// A call's model: the one it names, else the setting's; never empty, never `UNRECALLED`.
pub fn call_model(named: Option<&str>, setting: fn() -> String, setting_name: &str, empty_hint: &str) -> Result<String> {
    let model = match named {
        Some(m) if m.trim().is_empty() => return Err(MemoryError::invalid_parameter("model must not be empty").hint(empty_hint)),
        Some(m) => m.to_string(),
        None => setting(),
    };
    if model == UNRECALLED {
        let why = if named.is_some() {
            "no call reads or makes its memories' embeddings".to_string()
        } else {
            format!("{setting_name} names it")
        };
        return Err(MemoryError::invalid_parameter(format!("the embedding model \"{UNRECALLED}\" has no embeddings: {why}")).hint(
            "Name a model that embeds (agent_memory.embedding_models); \"none\" marks memories that are stored and never recalled.",
        ));
    }
    Ok(model)
}

/// The dimension registered for `model`, or `None` before its first memory is written.
pub fn model_dims(client: &mut SpiClient<'_>, model: &str) -> Result<Option<usize>> {
    let dims = first_value::<i32>(crate::plans::read(client, MODEL_DIMS, &[model.into()]).map_err(spi("reading the model's dimension"))?)
        .map_err(spi("reading the model's dimension"))?;
    Ok(dims.map(|d| d as usize))
}

/// The schema pgvector is installed in.
pub fn vector_schema(client: &mut SpiClient<'_>) -> Result<Option<String>> {
    first_value::<String>(crate::plans::read(client, VECTOR_SCHEMA, &[]).map_err(spi("finding pgvector"))?).map_err(spi("finding pgvector"))
}
