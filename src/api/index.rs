//! `memory_create_index(model, m, ef_construction)`: the HNSW index recall uses for large users.
//!
//! pgvector indexes need a fixed dimension, and one model has one dimension, so the index is an
//! expression index per model: `(emb::vector(D)) vector_cosine_ops WHERE embedding_model = model`.
//! Its name is derived from the model, so recall finds it without any bookkeeping.

use pgrx::prelude::*;
use pgrx::spi::{quote_identifier, quote_literal};
use pgrx::PgSqlErrorCode;

use crate::error::{first_value, spi, MemoryError, OrRaise, Result};

const INDEX_NAME: &str = "SELECT 'memories_hnsw_' || left(md5($1), 16)";
const INDEX_EXISTS: &str = "SELECT to_regclass(format('agent_memory.%I', $1)) IS NOT NULL";

/// The model's index name, its dimension and pgvector's schema, when the index exists.
pub fn model_index(client: &mut pgrx::spi::SpiClient<'_>, model: &str) -> Result<Option<(usize, String)>> {
    let name: String = first_value(crate::plans::read(client, INDEX_NAME, &[model.into()]).map_err(spi("naming the index"))?)
        .map_err(spi("naming the index"))?
        .unwrap_or_default();
    let exists: bool = first_value(crate::plans::read(client, INDEX_EXISTS, &[name.into()]).map_err(spi("finding the index"))?)
        .map_err(spi("finding the index"))?
        .unwrap_or(false);
    if !exists {
        return Ok(None);
    }
    let dims = crate::catalog::model_dims(client, model)?;
    let schema = crate::catalog::vector_schema(client)?;
    Ok(dims.zip(schema))
}

fn create(model: Option<&str>, m: i32, ef_construction: i32) -> Result<String> {
    let model = model
        .filter(|m| !m.trim().is_empty())
        .ok_or_else(|| MemoryError::null_value("model must not be NULL or empty").hint("Name the embedding model to index."))?;
    if !(2..=100).contains(&m) || !(4..=1000).contains(&ef_construction) || ef_construction < 2 * m {
        return Err(MemoryError::invalid_parameter(format!("m = {m} and ef_construction = {ef_construction} are out of range"))
            .hint("Use m between 2 and 100 and ef_construction between 4 and 1000, at least twice m (pgvector's limits)."));
    }
    Spi::connect_mut(|client| {
        crate::version::require_current_schema(client)?;
        let dims = crate::catalog::model_dims(client, model)?.ok_or_else(|| {
            MemoryError::new(PgSqlErrorCode::ERRCODE_NO_DATA_FOUND, format!("no memories of model \"{model}\" were written yet"))
                .hint("The index needs the model's dimension: write the model's first memories, then create the index.")
        })?;
        let name: String = first_value(crate::plans::read(client, INDEX_NAME, &[model.into()]).map_err(spi("naming the index"))?)
            .map_err(spi("naming the index"))?
            .unwrap_or_default();
        let schema = crate::catalog::vector_schema(client)?.ok_or_else(|| {
            MemoryError::new(PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT, "pgvector is not installed in this database")
                .hint("CREATE EXTENSION vector;")
        })?;
        let vs = quote_identifier(&schema);
        // DDL takes no parameters: the name and schema are quoted identifiers, the model a quoted
        // literal, and the numbers were range-checked above.
        let ddl = format!(
            "CREATE INDEX IF NOT EXISTS {} ON agent_memory.memories USING hnsw ((emb::{vs}.vector({dims})) {vs}.vector_cosine_ops) \
             WITH (m = {m}, ef_construction = {ef_construction}) WHERE embedding_model = {}",
            quote_identifier(&name),
            quote_literal(model)
        );
        client.update(ddl.as_str(), None, &[]).map_err(spi("creating the index"))?;
        Ok(name)
    })
}

/// Creates the HNSW index of one embedding model (if it does not exist) and returns its name.
/// Recall uses it for users with more than `agent_memory.exact_limit` memories of the model.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn memory_create_index(model: Option<&str>, m: default!(i32, 16), ef_construction: default!(i32, 64)) -> String {
    create(model, m, ef_construction).or_raise()
}
