//! Catalog lookups shared by the SQL functions: an embedding model's dimension and the schema
//! pgvector is installed in.

use pgrx::spi::SpiClient;

use crate::error::{first_value, spi, Result};

const MODEL_DIMS: &str = "SELECT dimensions FROM agent_memory.embedding_models WHERE name = $1";
const VECTOR_SCHEMA: &str = "SELECT n.nspname::text FROM pg_catalog.pg_extension e \
     JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'";

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
