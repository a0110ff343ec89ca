//! Packed embeddings: `memory_pack(user_id, model)` and the worker's pack pass, which build the
//! packs that recall's packed path reads (`crate::recall::packed`).
//!
//! A user's memories are spread over the table as concurrent traffic writes them, so reading
//! every candidate's row costs one heap page per memory. A pack holds a page's worth of the
//! user's embeddings quantised to 8 bits (about 14 of 512 dimensions), with the bounds of
//! `agent_memory_core::pack`, and beside it a words row with the same memories' keyword facts.
//! Packs only make recall faster; the worker rebuilds a pack when enough of the user's memories
//! are no longer covered by it. A memory not yet embedded is left out of the packs (recall reads
//! its row).

use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;
use pgrx::spi::SpiClient;

use agent_memory_core::pack::{self as core_pack, PackWriter};

use crate::error::{first_value, spi, MemoryError, OrRaise, Result};
use crate::gucs;
use crate::placement::TableSet;
use crate::recall::packed::kind_code;

/// A pack row must fit in one heap page (8,160 bytes of tuple), with its other columns.
const MAX_TUPLE: usize = 8160;
const ROW_OVERHEAD: usize = 112;

/// The pack payload budget for a user and model.
fn payload_budget(user: &str, model: &str) -> usize {
    MAX_TUPLE.saturating_sub(ROW_OVERHEAD + user.len() + model.len())
}

/// Whether this backend is running a statement that marks the packed memories it deletes or
/// changes by itself (forgetting's purge, expiry and eviction), so the row triggers need not.
static MARKING_OWN_WRITES: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Set while a statement that marks its own writes runs; cleared when dropped (an error unwinds
/// through the drop too).
pub struct MarkingOwnWrites(());

impl MarkingOwnWrites {
    pub fn start() -> Self {
        MARKING_OWN_WRITES.store(true, std::sync::atomic::Ordering::Relaxed);
        MarkingOwnWrites(())
    }
}

impl Drop for MarkingOwnWrites {
    fn drop(&mut self) {
        MARKING_OWN_WRITES.store(false, std::sync::atomic::Ordering::Relaxed);
    }
}

/// For the delete and update triggers of `memories`: true while the running statement marks the
/// packed memories it deletes or changes by itself (forgetting's purge, expiry and eviction, a
/// batch in one statement), so the row triggers skip them. Only the extension's own code sets it.
#[pg_extern(volatile, parallel_safe)]
fn pack_deletes_marked() -> bool {
    MARKING_OWN_WRITES.load(std::sync::atomic::Ordering::Relaxed)
}

const DROP_PACKS: &str = "\
WITH d AS (DELETE FROM agent_memory.memory_packs WHERE user_id = $1 AND embedding_model = $2) \
DELETE FROM agent_memory.memory_pack_users WHERE user_id = $1 AND embedding_model = $2";
const RECORD_PACKS: &str = "\
INSERT INTO agent_memory.memory_pack_users (user_id, embedding_model, memories, last_id) VALUES ($1, $2, $3, $4)";
/// The active memories and the stale marks, in one statement: one snapshot, so the marks the
/// new packs make unnecessary are exactly those read. A memory with windows (`emb_windows`,
/// `agent_memory.embed_windows`) is left out: recall reads its row, and scores its windows.
const READ_FOR_PACK: &str = "\
SELECT 0 AS part, m.id, m.importance, m.emb, NULL::tid AS mark, m.content, m.kind, m.archived_at IS NOT NULL, \
       LEAST(m.expires_at, m.valid_until) \
  FROM agent_memory.memories m \
 WHERE m.user_id = $1 AND m.embedding_model = $2 AND m.active AND m.emb_windows IS NULL \
UNION ALL \
SELECT 1, s.id, NULL, NULL, s.ctid, NULL, NULL, NULL, NULL \
  FROM agent_memory.memory_pack_stale s WHERE s.user_id = $1 AND s.embedding_model = $2 \
ORDER BY 1, 2";
/// The packs of embeddings, and the packs of words of the same memories (numbered on their own).
const INSERT_PACKS: &str = "\
INSERT INTO agent_memory.memory_packs (user_id, embedding_model, part, pack_no, memories, last_id, payload) \
SELECT $1, $2, 'embeddings', $6 + p.n - 1, p.memories, p.last_id, p.payload \
  FROM unnest($3::bytea[], $4::integer[], $5::bigint[]) WITH ORDINALITY AS p(payload, memories, last_id, n) \
UNION ALL \
SELECT $1, $2, 'words', $10 + p.n - 1, p.memories, p.last_id, p.payload \
  FROM unnest($7::bytea[], $8::integer[], $9::bigint[]) WITH ORDINALITY AS p(payload, memories, last_id, n)";
/// Packs written per statement while a rebuild reads on.
const FLUSH_PACKS: usize = 64;

/// Packs of one part made and not yet written, and how many were written before them.
#[derive(Default)]
struct PartRows {
    payloads: Vec<Vec<u8>>,
    counts: Vec<i32>,
    last_ids: Vec<i64>,
    written: i32,
}

impl PartRows {
    fn push(&mut self, memories: usize, payload: Vec<u8>, last_id: i64) {
        self.counts.push(memories as i32);
        self.last_ids.push(last_id);
        self.payloads.push(payload);
    }

    /// The arguments of [`INSERT_PACKS`] for this part; the packs count as written.
    fn take(&mut self) -> [pgrx::datum::DatumWithOid<'static>; 4] {
        let first = self.written;
        self.written += self.payloads.len() as i32;
        [
            std::mem::take(&mut self.payloads).into(),
            std::mem::take(&mut self.counts).into(),
            std::mem::take(&mut self.last_ids).into(),
            first.into(),
        ]
    }
}

/// The packs of both parts made and not yet written.
#[derive(Default)]
struct PackRows {
    embeddings: PartRows,
    words: PartRows,
}

impl PackRows {
    fn pending(&self) -> usize {
        self.embeddings.payloads.len() + self.words.payloads.len()
    }

    fn write(&mut self, client: &mut SpiClient<'_>, t: &TableSet, user: &str, model: &str) -> Result<()> {
        if self.pending() == 0 {
            return Ok(());
        }
        let [e_packs, e_counts, e_last, e_first] = self.embeddings.take();
        let [w_packs, w_counts, w_last, w_first] = self.words.take();
        let args = [user.into(), model.into(), e_packs, e_counts, e_last, e_first, w_packs, w_counts, w_last, w_first];
        client.update(t.sql(INSERT_PACKS), None, &args).map_err(spi("writing the packs"))?;
        Ok(())
    }
}
const CLEAR_MARKS: &str =
    "DELETE FROM agent_memory.memory_pack_stale WHERE user_id = $2 AND embedding_model = $3 AND ctid = ANY ($1::tid[])";
const CURSOR_BATCH: i64 = 1000;

/// Rebuilds the packs of (user, model); returns the memories packed (0 when the model's
/// embeddings are too large for a page, and then no pack is kept).
pub fn build(client: &mut SpiClient<'_>, t: &TableSet, user: &str, model: &str) -> Result<i64> {
    // The rows are read after the lock is held, by a statement with a snapshot of its own: a
    // delete that committed meanwhile is either seen or has marked its row (see the trigger).
    let isolation: Option<String> = first_value(
        client
            .select("SELECT pg_catalog.current_setting('transaction_isolation')", None, &[])
            .map_err(spi("reading the isolation level"))?,
    )
    .map_err(spi("reading the isolation level"))?;
    if isolation.as_deref() != Some("read committed") {
        return Err(MemoryError::new(
            PgSqlErrorCode::ERRCODE_INVALID_TRANSACTION_STATE,
            format!("packs are built in READ COMMITTED transactions, and this one is {}", isolation.unwrap_or_default().to_uppercase()),
        )
        .hint("Call memory_pack outside an explicit REPEATABLE READ or SERIALIZABLE transaction."));
    }
    // The user's erasure lock (shared) first: an erasure waits for this rebuild and then drops
    // what it wrote, and a rebuild that waited for an erasure finds nothing left to pack.
    crate::locks::pack(client, user, model)?;
    client.update(t.sql(DROP_PACKS), None, &[user.into(), model.into()]).map_err(spi("dropping the old packs"))?;
    let budget = payload_budget(user, model);
    let mut out = PackRows::default();
    let mut marks: Vec<pg_sys::ItemPointerData> = Vec::new();
    let mut writer: Option<PackWriter> = None;
    let tokenizer = gucs::tokenizer();
    let mut words = core_pack::WordsWriter::new(tokenizer, budget);
    // Memories per pack of embeddings: as many as fit a page (known from the first row: one
    // model, one dimension).
    let mut capacity = 0usize;
    let mut packed = 0i64;
    let mut too_wide = false;
    let mut scratch = Vec::new();
    let mut last_id = i64::MIN;
    {
        let mut cursor = client.open_cursor(t.sql(READ_FOR_PACK), &[user.into(), model.into()]);
        loop {
            let mut table = cursor.fetch(CURSOR_BATCH).map_err(spi("reading the memories to pack"))?;
            if table.is_empty() {
                break;
            }
            while table.next().is_some() {
                let part: i32 = table.get(1).map_err(spi("reading the rows to pack"))?.unwrap_or(0);
                if part == 1 {
                    if let Some(t) = table.get::<pg_sys::ItemPointerData>(5).map_err(spi("reading a stale mark"))? {
                        marks.push(t);
                    }
                    continue;
                }
                let id: i64 = table.get(2).map_err(spi("reading id"))?.ok_or_else(|| MemoryError::not_null_column("id"))?;
                let importance: f32 =
                    table.get(3).map_err(spi("reading importance"))?.ok_or_else(|| MemoryError::not_null_column("importance"))?;
                let Some(emb) = crate::vector::vector_column(&table, 4)? else {
                    continue;
                };
                if too_wide {
                    continue;
                }
                if capacity == 0 {
                    capacity = core_pack::capacity(emb.dims(), budget);
                    if capacity == 0 {
                        // Embeddings too wide for a page: no packs for this model (the stale
                        // marks are still read, and cleared).
                        too_wide = true;
                        continue;
                    }
                }
                let content: String = table.get(6).map_err(spi("reading content"))?.unwrap_or_default();
                let kind: String = table.get(7).map_err(spi("reading kind"))?.unwrap_or_default();
                let archived: bool = table.get(8).map_err(spi("reading archived_at"))?.unwrap_or(false);
                let ends_at: Option<TimestampWithTimeZone> = table.get(9).map_err(spi("reading expires_at"))?;
                let (len, terms) = agent_memory_core::keyword::doc_terms(&content, tokenizer);
                let facts = core_pack::KeywordFacts {
                    len,
                    terms: &terms,
                    kind: kind_code(&kind),
                    archived,
                    ends_at: ends_at.map_or(i64::MAX, |t| t.into_inner()),
                };
                let q = emb.with_f32(&mut scratch, core_pack::quantize);
                if writer.as_ref().is_some_and(|e| e.len() >= capacity) {
                    let e = writer.take().expect("a writer");
                    out.embeddings.push(e.len(), e.finish(), last_id);
                }
                writer.get_or_insert_with(|| PackWriter::new(q.codes.len(), capacity)).push(id, importance, &q);
                // A words pack is full when this memory's facts, or its terms, do not fit it (terms
                // that no words pack could hold are left out: the row is read when words are
                // counted).
                if !words.push(id, Some(&facts)) {
                    let full = std::mem::replace(&mut words, core_pack::WordsWriter::new(tokenizer, budget));
                    out.words.push(full.len(), full.finish(), last_id);
                    if !words.push(id, Some(&facts)) {
                        return Err(MemoryError::new(
                            PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
                            "a memory's facts do not fit an empty words pack",
                        ));
                    }
                }
                last_id = id;
                packed += 1;
            }
            // A large user's packs go out as they are made: the memory a rebuild takes stays small.
            if out.pending() >= FLUSH_PACKS {
                out.write(client, t, user, model)?;
            }
        }
    }
    if let Some(e) = writer.take().filter(|e| !e.is_empty()) {
        out.embeddings.push(e.len(), e.finish(), last_id);
    }
    if !words.is_empty() {
        out.words.push(words.len(), words.finish(), last_id);
    }
    out.write(client, t, user, model)?;
    if packed > 0 {
        client
            .update(t.sql(RECORD_PACKS), None, &[user.into(), model.into(), (packed as i32).into(), last_id.into()])
            .map_err(spi("recording the packs"))?;
    }
    if !marks.is_empty() {
        client.update(t.sql(CLEAR_MARKS), None, &[marks.into(), user.into(), model.into()]).map_err(spi("clearing the stale marks"))?;
    }
    Ok(packed)
}

const USER_MODELS: &str = "\
SELECT DISTINCT m.embedding_model FROM agent_memory.memories m \
 WHERE m.user_id = $1 AND m.active AND m.embedding_model <> 'none' AND ($2::text IS NULL OR m.embedding_model = $2) ORDER BY 1";

/// The (user, model) pairs whose packs are missing or out of date: at least `$1` active
/// memories, and no pack, or at least a sixteenth (and 32) of them not covered by the packs
/// (newer than the last packed id, marked stale, or packed but no longer active). Packs of a
/// user and model with no active memory left are listed too (they are dropped). Memories with
/// windows (`emb_windows`) are never packed, and not counted.
const DUE: &str = "\
WITH p AS (SELECT user_id, embedding_model, memories AS packed, last_id AS last FROM agent_memory.memory_pack_users), \
     s AS (SELECT user_id, embedding_model, count(*) AS stale FROM agent_memory.memory_pack_stale GROUP BY 1, 2), \
     a AS (SELECT m.user_id, m.embedding_model, count(*) AS n, count(*) FILTER (WHERE m.id > p.last) AS newer, \
                  max(p.packed) AS packed \
             FROM agent_memory.memories m LEFT JOIN p ON p.user_id = m.user_id AND p.embedding_model = m.embedding_model \
            WHERE m.active AND m.embedding_model <> 'none' AND m.emb_windows IS NULL GROUP BY 1, 2) \
SELECT a.user_id, a.embedding_model FROM a LEFT JOIN s ON s.user_id = a.user_id AND s.embedding_model = a.embedding_model \
 WHERE (a.packed IS NULL AND a.n >= $1) \
    OR (a.packed IS NOT NULL AND a.newer + coalesce(s.stale, 0) + greatest(a.packed - (a.n - a.newer), 0) \
                                 >= greatest(32, a.packed / 16)) \
UNION \
SELECT p.user_id, p.embedding_model FROM p \
 WHERE NOT EXISTS (SELECT 1 FROM agent_memory.memories m \
                    WHERE m.user_id = p.user_id AND m.embedding_model = p.embedding_model AND m.active AND m.emb_windows IS NULL) \
ORDER BY 1, 2 LIMIT $2";

/// Derived rows that no user has any more: packs with no `memory_pack_users` row (a rebuild
/// writes both in one transaction, so a pack without one belongs to nobody), and stale marks of a
/// user with no memory left.
const SWEEP: &str = "\
WITH p AS (DELETE FROM agent_memory.memory_packs p \
            WHERE NOT EXISTS (SELECT 1 FROM agent_memory.memory_pack_users u \
                               WHERE u.user_id = p.user_id AND u.embedding_model = p.embedding_model) RETURNING 1), \
     s AS (DELETE FROM agent_memory.memory_pack_stale s \
            WHERE NOT EXISTS (SELECT 1 FROM agent_memory.memories m WHERE m.user_id = s.user_id) RETURNING 1) \
SELECT (SELECT count(*) FROM p) + (SELECT count(*) FROM s)";

/// Drops the derived rows whose user has none (the worker's pack pass runs this first); returns
/// how many went.
pub fn sweep(client: &mut SpiClient<'_>, t: &TableSet) -> Result<i64> {
    let n: Option<i64> = crate::error::first_value(crate::plans::write(client, t.sql(SWEEP), &[]).map_err(spi("sweeping orphaned packs"))?)
        .map_err(spi("sweeping orphaned packs"))?;
    Ok(n.unwrap_or(0))
}

/// The (user, model) pairs the worker should pack now, at most `limit`.
pub fn due(client: &mut SpiClient<'_>, t: &TableSet, limit: i64) -> Result<Vec<(String, String)>> {
    let table =
        client.select(t.sql(DUE), None, &[gucs::pack_min_memories().into(), limit.into()]).map_err(spi("finding packs to build"))?;
    let mut out = Vec::new();
    for row in table {
        let user: Option<String> = row.get(1).map_err(spi("reading user_id"))?;
        let model: Option<String> = row.get(2).map_err(spi("reading embedding_model"))?;
        if let (Some(u), Some(m)) = (user, model) {
            out.push((u, m));
        }
    }
    Ok(out)
}

fn pack_user(user_id: Option<&str>, model: Option<&str>) -> Result<i64> {
    let user = user_id.map(str::trim).filter(|u| !u.is_empty()).ok_or_else(|| {
        MemoryError::null_value("user_id must not be NULL or empty").hint("Pass the id of the user whose memories to pack.")
    })?;
    let model = model.map(str::trim).filter(|m| !m.is_empty());
    Spi::connect_mut(|client| {
        crate::version::require_current_schema(client)?;
        if !crate::recall::sees_user(client, user)? {
            return Err(MemoryError::new(
                PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                format!("packing the memories of user \"{user}\" needs maintenance rights"),
            )
            .hint("Run it as an agent_memory admin (agent_memory.grant_access(role, 'admin')); the background worker packs every user by itself."));
        }
        let tables = crate::placement::tables_of_user(user)?;
        crate::placement::hold_user(client, user)?;
        let models: Vec<String> = {
            let table =
                client.select(tables.sql(USER_MODELS), None, &[user.into(), model.into()]).map_err(spi("reading the user's models"))?;
            let mut v = Vec::new();
            for row in table {
                if let Some(m) = row.get::<String>(1).map_err(spi("reading embedding_model"))? {
                    v.push(m);
                }
            }
            v
        };
        let mut total = 0;
        for m in models {
            // A call for one user: the tables that hold its rows (on a Citus node, its shards).
            total += build(client, &tables, user, &m)?;
        }
        if let Some(m) = model {
            // A model with no active memory left: its packs go.
            if total == 0 {
                client.update(tables.sql(DROP_PACKS), None, &[user.into(), m.into()]).map_err(spi("dropping the old packs"))?;
            }
        }
        Ok(total)
    })
}

/// Rebuilds the packed embeddings of `user_id` (of every model, or of `model`) now, and returns
/// how many memories were packed. The background worker does this by itself for users with at
/// least `agent_memory.pack_min_memories` memories; recall is exact with or without packs.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn memory_pack(user_id: Option<&str>, model: default!(Option<&str>, "NULL")) -> i64 {
    pack_user(user_id, model).or_raise()
}
