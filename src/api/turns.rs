//! `memory_record_turn(user_id, session_id, role, content, ...)`: the raw conversation turns that
//! facts are drawn from, kept apart from the facts.

use pgrx::datum::{JsonB, TimestampWithTimeZone};
use pgrx::prelude::*;

use crate::error::{spi, MemoryError, OrRaise, Result};
use crate::recall::check_user;

/// The id is drawn from the table's own sequence by name (on a Citus node the statement writes
/// the user's shard, whose column has no default: the node's sequence numbers it in its range).
const INSERT: &str = "INSERT INTO agent_memory.turns (id, user_id, session_id, role, content, created_at, metadata, task_id) \
     VALUES (nextval(pg_get_serial_sequence('agent_memory.' || 'turns', 'id')), $1, $2, $3, $4, \
             coalesce($5::timestamptz, now()), coalesce($6, '{}'::jsonb), $7) RETURNING id";

const ROLES: [&str; 4] = ["system", "user", "assistant", "tool"];

fn record(
    user_id: Option<&str>,
    session_id: Option<&str>,
    role: Option<&str>,
    content: Option<&str>,
    created_at: Option<TimestampWithTimeZone>,
    metadata: Option<JsonB>,
    task_id: Option<&str>,
) -> Result<i64> {
    let user = check_user(user_id)?;
    let session = session_id
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| MemoryError::null_value("session_id must not be NULL or empty").hint("Pass the id of the conversation."))?;
    let role = role.ok_or_else(|| MemoryError::null_value("role must not be NULL").hint("Use one of: system, user, assistant, tool."))?;
    if !ROLES.contains(&role) {
        return Err(MemoryError::invalid_parameter(format!("unknown role \"{role}\"")).hint("Use one of: system, user, assistant, tool."));
    }
    let content = content.ok_or_else(|| MemoryError::null_value("content must not be NULL").hint("Pass the text of the turn."))?;
    if let Some(m) = metadata.as_ref().filter(|m| !m.0.is_object()) {
        return Err(MemoryError::metadata_not_object(&m.0));
    }
    crate::gucs::check_sizes(Some(content), metadata.as_ref().map(|m| m.0.to_string().len()))?;
    let args = [
        user.into(),
        session.into(),
        role.into(),
        content.into(),
        created_at.map(|t| t.to_string()).into(),
        metadata.into(),
        task_id.into(),
    ];
    Spi::connect_mut(|c| {
        crate::version::require_current_schema(c)?;
        // The user's lock, as reconcile and erasure take it: a turn never races an erasure.
        crate::locks::user(c, user)?;
        crate::plans::write(c, crate::placement::sql_for(user, INSERT)?, &args)
            .map_err(spi("recording the turn"))?
            .first()
            .get_one::<i64>()
            .map_err(spi("recording the turn"))?
            .ok_or_else(|| spi("recording the turn")(pgrx::spi::SpiError::InvalidPosition))
    })
}

/// Records one raw conversation turn and returns its id; pass it to `memory_reconcile` as
/// `source_turn_id` to link the facts drawn from it.
#[pg_extern(volatile, parallel_unsafe, name = "memory_record_turn")]
#[search_path(pg_catalog, pg_temp)]
fn record_turn(
    user_id: Option<&str>,
    session_id: Option<&str>,
    role: Option<&str>,
    content: Option<&str>,
    created_at: default!(Option<TimestampWithTimeZone>, "NULL"),
    metadata: default!(Option<JsonB>, "NULL"),
    task_id: default!(Option<&str>, "NULL"),
) -> i64 {
    record(user_id, session_id, role, content, created_at, metadata, task_id).or_raise()
}
