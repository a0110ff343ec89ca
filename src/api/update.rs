//! `memory_update(id, expected_version, ...)`: a conditional update that never overwrites
//! silently.
//!
//! The update applies only when the memory is still active at `expected_version`. Two writers
//! that read the same version race for the row lock: the first updates and moves the version on,
//! and the second re-checks the condition against the committed row (PostgreSQL's READ
//! COMMITTED re-check), matches nothing, and gets NULL.

use pgrx::datum::{JsonB, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

use crate::error::{first_value, spi, MemoryError, OrRaise, Result};
use crate::vector::{vector_type_oid, HalfVec, IntoVectorDatum, Vector, VectorDatum};

/// New content without a new embedding, of a model the server embeds with: emb goes NULL, and
/// the write trigger embeds the new content (or the worker does, under agent_memory.embed_async).
const UPDATE: &str = "UPDATE agent_memory.memories SET \
        object = coalesce($3, object), content = coalesce($4, content), \
        emb = CASE WHEN $5 IS NOT NULL THEN $5 \
                   WHEN $4 IS DISTINCT FROM content AND $4 IS NOT NULL AND EXISTS \
                        (SELECT 1 FROM agent_memory.embedding_models e WHERE e.name = embedding_model AND e.folder IS NOT NULL) \
                   THEN NULL ELSE emb END, \
        importance = coalesce($6, importance), metadata = coalesce($7, metadata), \
        expires_at = coalesce($8::timestamptz, expires_at), valid_until = coalesce($9::timestamptz, valid_until), \
        protected = coalesce($10, protected) \
      WHERE user_id = $11 AND id = $1 AND version = $2 AND active RETURNING version";
/// The memory's user, found once by its id (the one statement of an update that cannot name
/// it); every other statement then does.
const OWNER: &str = "SELECT m.user_id FROM agent_memory.memories m WHERE m.id = $1 LIMIT 1";
const STATE: &str = "SELECT version, active FROM agent_memory.memories WHERE user_id = $2 AND id = $1";

/// What may change; NULL leaves a column as it is.
pub struct Changes {
    pub object: Option<String>,
    pub content: Option<String>,
    pub emb: Option<VectorDatum>,
    pub importance: Option<f32>,
    pub metadata: Option<JsonB>,
    pub expires_at: Option<TimestampWithTimeZone>,
    pub valid_until: Option<TimestampWithTimeZone>,
    pub protected: Option<bool>,
}

pub fn update(id: Option<i64>, expected_version: Option<i32>, c: Changes) -> Result<Option<i32>> {
    let id = id.ok_or_else(|| MemoryError::null_value("id must not be NULL").hint("Pass the id of the memory to update."))?;
    let expected = expected_version.ok_or_else(|| {
        MemoryError::null_value("expected_version must not be NULL")
            .hint("Pass the version you read; the update applies only if nobody changed the memory since.")
    })?;
    if let Some(m) = c.metadata.as_ref().filter(|m| !m.0.is_object()) {
        return Err(MemoryError::metadata_not_object(&m.0));
    }
    crate::gucs::check_sizes(c.content.as_deref(), c.metadata.as_ref().map(|m| m.0.to_string().len()))?;
    if let Some(i) = c.importance {
        if !(0.0..=1.0).contains(&i) {
            return Err(MemoryError::invalid_parameter(format!("importance must be between 0 and 1, not {i}"))
                .hint("Pass an importance between 0 and 1, or NULL to keep it."));
        }
    }
    let emb = match &c.emb {
        Some(v) => {
            let values = v.to_f32_vec();
            agent_memory_core::vecmath::validate(&values).map_err(|p| {
                MemoryError::invalid_parameter(format!("emb: {p}")).hint("Pass the embedding of the new content: a non-zero vector.")
            })?;
            crate::vector::vector_param(&values)?
        }
        None => pgrx::datum::DatumWithOid::null_oid(vector_type_oid()?),
    };
    Spi::connect_mut(|client| {
        crate::version::require_current_schema(client)?;
        let owner = first_value::<String>(crate::plans::read(client, OWNER, &[id.into()]).map_err(spi("finding the memory"))?)
            .map_err(spi("finding the memory"))?;
        let Some(user) = owner else {
            return Err(MemoryError::new(PgSqlErrorCode::ERRCODE_NO_DATA_FOUND, format!("memory {id} does not exist"))
                .hint("Pass the id of an existing memory."));
        };
        let args = [
            id.into(),
            expected.into(),
            c.object.into(),
            c.content.into(),
            emb,
            c.importance.into(),
            c.metadata.into(),
            c.expires_at.map(|t| t.to_string()).into(),
            c.valid_until.map(|t| t.to_string()).into(),
            c.protected.into(),
            user.as_str().into(),
        ];
        let updated = first_value::<i32>(crate::plans::write(client, UPDATE, &args).map_err(spi("updating the memory"))?)
            .map_err(spi("updating the memory"))?;
        if updated.is_some() {
            return Ok(updated);
        }
        // Nothing matched: a stale version (NULL), a retired memory or no memory (errors).
        let state = crate::plans::read(client, STATE, &[id.into(), user.as_str().into()]).map_err(spi("reading the memory"))?;
        let state = if state.is_empty() { None } else { state.first().get_two::<i32, bool>().ok() };
        let (version, active) = match state {
            Some((Some(v), Some(a))) => (v, a),
            _ => {
                return Err(MemoryError::new(PgSqlErrorCode::ERRCODE_NO_DATA_FOUND, format!("memory {id} does not exist"))
                    .hint("Pass the id of an existing memory."))
            }
        };
        if !active && version == expected {
            return Err(MemoryError::new(PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, format!("memory {id} is retired"))
                .hint("A retired memory does not change; reconcile a new fact instead."));
        }
        Ok(None)
    })
}

/// Changes a memory only if it is still active at `expected_version`; returns the new version,
/// or NULL when the version is stale (somebody changed it first). NULL arguments leave their
/// column as it is. Every write increments the version.
#[allow(clippy::too_many_arguments)]
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn memory_update(
    id: Option<i64>,
    expected_version: Option<i32>,
    object: default!(Option<String>, "NULL"),
    content: default!(Option<String>, "NULL"),
    emb: default!(Option<Vector>, "NULL"),
    importance: default!(Option<f32>, "NULL"),
    metadata: default!(Option<JsonB>, "NULL"),
    expires_at: default!(Option<TimestampWithTimeZone>, "NULL"),
    valid_until: default!(Option<TimestampWithTimeZone>, "NULL"),
    protected: default!(Option<bool>, "NULL"),
) -> Option<i32> {
    let emb = emb.map(|e| e.into_vector_datum().or_raise());
    let changes = Changes { object, content, emb, importance, metadata, expires_at, valid_until, protected };
    update(id, expected_version, changes).or_raise()
}

/// `memory_update` with a `halfvec` embedding. The embedding comes third and has no default here,
/// so a call without an embedding resolves to the `vector` form unambiguously.
#[allow(clippy::too_many_arguments)]
#[pg_extern(volatile, parallel_unsafe, name = "memory_update")]
#[search_path(pg_catalog, pg_temp)]
fn memory_update_halfvec(
    id: Option<i64>,
    expected_version: Option<i32>,
    emb: Option<HalfVec>,
    object: default!(Option<String>, "NULL"),
    content: default!(Option<String>, "NULL"),
    importance: default!(Option<f32>, "NULL"),
    metadata: default!(Option<JsonB>, "NULL"),
    expires_at: default!(Option<TimestampWithTimeZone>, "NULL"),
    valid_until: default!(Option<TimestampWithTimeZone>, "NULL"),
    protected: default!(Option<bool>, "NULL"),
) -> Option<i32> {
    let emb = emb.map(|e| e.into_vector_datum().or_raise());
    let changes = Changes { object, content, emb, importance, metadata, expires_at, valid_until, protected };
    update(id, expected_version, changes).or_raise()
}
