//! `agent_memory.memory_recall(user_id, query, k, ...)`: exact filter-then-rank recall.
//!
//! The candidates are the user's active, unexpired memories of the query's embedding model (read
//! through the `(user_id, embedding_model) WHERE active` index, never through a vector index, so
//! a per-user filter can never empty the result). Each candidate is scored in Rust —
//! `cosine × decay × importance factor` — and a bounded heap keeps the best `k`. The call returns
//! `min(k, candidates)` rows, best first.

use agent_memory_core::topk::{Ranked, TopK};
use agent_memory_core::vecmath;
use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;

use crate::api::decay::scorer;
use crate::error::{spi, MemoryError, OrRaise, Result};
use crate::gucs;
use crate::vector::{Element, HalfVec, IntoVectorDatum, Vector, VectorDatum};

/// What a call asks for besides the user and the query.
pub struct RecallOptions<'a> {
    pub k: Option<i32>,
    pub model: Option<&'a str>,
    pub kinds: Option<Vec<Option<String>>>,
    pub min_similarity: Option<f64>,
    pub decay: Option<&'a str>,
    pub touch: Option<bool>,
    pub archived: Option<bool>,
}

/// One returned memory.
pub struct Recalled {
    pub id: i64,
    pub content: String,
    pub score: f64,
    pub similarity: f64,
    pub kind: String,
    pub subject: Option<String>,
    pub predicate: Option<String>,
    pub object: Option<String>,
    pub importance: f32,
    pub created_at: Option<TimestampWithTimeZone>,
    /// How the candidates were found: `exact` (every memory scored) or `approximate` (the model's
    /// HNSW index, for users above `agent_memory.exact_limit`).
    pub path: &'static str,
}

const DETAILS: &str = "\
SELECT m.id, m.content, m.kind, m.subject, m.predicate, m.object, m.importance, m.created_at \
  FROM agent_memory.memories m WHERE m.id = ANY ($1)";

/// After this many candidates, recall checks whether the user is large enough for the
/// approximate path; smaller users never pay for the check.
const CHECK_SIZE_AT: usize = 1000;

/// The touch, returning the same columns as DETAILS: one statement instead of two. The rows are
/// locked in id order first, so concurrent recalls with overlapping results cannot deadlock.
const TOUCH_RETURNING: &str = "\
WITH locked AS (SELECT id FROM agent_memory.memories WHERE id = ANY ($1) ORDER BY id FOR NO KEY UPDATE) \
UPDATE agent_memory.memories m SET last_hit_at = now(), hit_count = m.hit_count + 1 \
  FROM locked WHERE m.id = locked.id \
RETURNING m.id, m.content, m.kind, m.subject, m.predicate, m.object, m.importance, m.created_at";

fn dimension_mismatch(query: usize, model: &str, stored: usize) -> MemoryError {
    MemoryError::data_exception(format!("the query has {query} dimensions but the memories of model \"{model}\" have {stored}"))
        .detail("A query only meets memories of its own embedding model, and one model has one dimension.")
        .hint("Pass model => the name of the model that made the query vector.")
}

/// Checks the user id.
pub fn check_user(user_id: Option<&str>) -> Result<&str> {
    match user_id {
        None => Err(MemoryError::null_value("user_id must not be NULL")
            .hint("Every memory belongs to one user; pass the id of the user whose memories to use.")),
        Some(u) if u.trim().is_empty() => Err(MemoryError::invalid_parameter("user_id must not be empty")
            .hint("Pass the id of the user whose memories to use.")),
        Some(u) => Ok(u),
    }
}

/// Checks a query vector and returns it scaled to unit length.
pub fn unit_query(query: Option<&VectorDatum>) -> Result<Vec<f32>> {
    let q = query.ok_or_else(|| {
        MemoryError::null_value("query must not be NULL").hint("Pass the embedding of the question as a vector, a halfvec, or text like '[0.1, 0.2]'.")
    })?;
    let v = q.to_f32_vec();
    vecmath::validate(&v).map_err(|p| {
        MemoryError::invalid_parameter(format!("the query {}: {p}", q.element().type_name()))
            .hint("Pass the embedding of the question: a non-zero vector of finite numbers.")
    })?;
    Ok(vecmath::normalized(&v))
}

/// Checks `k` against `agent_memory.max_k`.
pub fn check_k(k: Option<i32>) -> Result<usize> {
    let max = gucs::max_k();
    match k {
        None => Err(MemoryError::null_value("k must not be NULL").hint("Pass how many memories to return, or leave k out for 5.")),
        Some(k) if k <= 0 || k > max => Err(MemoryError::invalid_parameter(format!("k must be between 1 and {max}, not {k}"))
            .hint("Raise agent_memory.max_k to return more memories in one call.")),
        Some(k) => Ok(k as usize),
    }
}

/// The embedding model of a call: the one named, else `agent_memory.default_model`.
pub fn resolve_model(model: Option<&str>) -> Result<String> {
    match model {
        Some(m) if m.trim().is_empty() => Err(MemoryError::invalid_parameter("model must not be empty")
            .hint("Name the embedding model that made the query vector, or pass NULL for agent_memory.default_model.")),
        Some(m) => Ok(m.to_string()),
        None => Ok(gucs::default_model()),
    }
}

/// The whole recall: candidates, scores, top k, details, and the touch.
pub fn recall(user_id: Option<&str>, query: Option<&VectorDatum>, opts: RecallOptions<'_>) -> Result<Vec<Recalled>> {
    let user = check_user(user_id)?;
    let q = unit_query(query)?;
    let k = check_k(opts.k)?;
    let model = resolve_model(opts.model)?;
    let scorer = scorer(opts.decay)?;
    let min_similarity = opts.min_similarity.unwrap_or(f64::NEG_INFINITY);
    if min_similarity.is_nan() {
        return Err(MemoryError::invalid_parameter("min_similarity must be a number").hint("Use a value between -1 and 1, or NULL."));
    }
    let kinds: Option<Vec<String>> = match opts.kinds {
        None => None,
        Some(ks) => {
            let mut out = Vec::with_capacity(ks.len());
            for k in ks {
                let k = k.ok_or_else(|| {
                    MemoryError::null_value("kinds must not contain NULL").hint("List kinds of memory: 'semantic', 'episodic'; or pass kinds => NULL for all.")
                })?;
                crate::api::policy::check_kind(&k)?;
                out.push(k);
            }
            Some(out)
        }
    };
    let touch = opts.touch.unwrap_or(true);
    let include_archived = opts.archived.unwrap_or(false);
    let (floor_semantic, floor_episodic) = (gucs::decay_floor(false), gucs::decay_floor(true));

    Spi::connect_mut(|client| {
        let mut top = TopK::new(k);
        let mut seen = 0usize;
        let exact_limit = gucs::exact_limit();
        let mut index = None;
        let mut scratch = Vec::new();
        // SAFETY: reads the start time of the transaction, which is what now() returns.
        let now = unsafe { pgrx::pg_sys::GetCurrentTransactionStartTimestamp() };
        let complete = crate::scan::for_each_candidate(user, &model, kinds.as_deref(), now, |c| {
            if c.archived && !include_archived {
                return Ok(true);
            }
            seen += 1;
            if seen == CHECK_SIZE_AT.min(exact_limit) + 1 {
                // Possibly a large user: if the model has an HNSW index and the user has more
                // than agent_memory.exact_limit candidates, rank the index's candidates instead.
                index = crate::api::index::model_index(client, &model)?;
                if index.is_some() {
                    if crate::scan::count_entries(user, &model, exact_limit + 1)? > exact_limit {
                        return Ok(false);
                    }
                    index = None;
                }
            }
            // SAFETY: the datum is `memories.emb`, of type `vector`, valid during the callback.
            let emb = unsafe { VectorDatum::from_datum(c.emb, Element::F32) }?;
            if emb.dims() != q.len() {
                return Err(dimension_mismatch(q.len(), &model, emb.dims()));
            }
            let similarity = emb.with_f32(&mut scratch, |x| vecmath::cosine_with_unit(&q, x));
            if similarity >= min_similarity {
                let age_hours = agent_memory_core::decay::age_hours(now, c.last_hit);
                let floor = if c.episodic { floor_episodic } else { floor_semantic };
                let score = scorer.score(similarity, age_hours, c.importance as f64, floor);
                top.push(Ranked { id: c.id, score, similarity });
            }
            Ok(true)
        })?;
        let mut path = "exact";
        if !complete {
            if let Some((dims, schema)) = &index {
                top = approximate(client, user, &model, &kinds, include_archived, &q, *dims, schema, k, |similarity, age_hours, importance, episodic| {
                    let floor = if episodic { floor_episodic } else { floor_semantic };
                    scorer.score(similarity, age_hours, importance, floor)
                }, min_similarity, now)?;
                path = "approximate";
            }
        }
        if seen == 0 {
            // No candidate checked the query's dimension: the model's registered one does.
            if let Some(d) = crate::catalog::model_dims(client, &model)? {
                if d != q.len() {
                    return Err(dimension_mismatch(q.len(), &model, d));
                }
            }
        }
        let ranked = top.into_sorted();
        if ranked.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<i64> = ranked.iter().map(|r| r.id).collect();
        let mut details = std::collections::HashMap::with_capacity(ids.len());
        {
            let sql = if touch && !read_only() { TOUCH_RETURNING } else { DETAILS };
            let table = if sql == TOUCH_RETURNING { crate::plans::write(client, sql, &[ids.clone().into()]) } else { crate::plans::read(client, sql, &[ids.clone().into()]) };
            let table = table.map_err(spi("reading the recalled memories"))?;
            for row in table {
                let id: i64 = row.get(1).map_err(spi("reading id"))?.unwrap_or_default();
                details.insert(
                    id,
                    (
                        row.get::<String>(2).map_err(spi("reading content"))?.unwrap_or_default(),
                        row.get::<String>(3).map_err(spi("reading kind"))?.unwrap_or_default(),
                        row.get::<String>(4).map_err(spi("reading subject"))?,
                        row.get::<String>(5).map_err(spi("reading predicate"))?,
                        row.get::<String>(6).map_err(spi("reading object"))?,
                        row.get::<f32>(7).map_err(spi("reading importance"))?.unwrap_or(0.0),
                        row.get::<TimestampWithTimeZone>(8).map_err(spi("reading created_at"))?,
                    ),
                );
            }
        }
        Ok(ranked
            .into_iter()
            .filter_map(|r| {
                let (content, kind, subject, predicate, object, importance, created_at) = details.remove(&r.id)?;
                Some(Recalled {
                    id: r.id,
                    content,
                    score: r.score,
                    similarity: r.similarity,
                    kind,
                    subject,
                    predicate,
                    object,
                    importance,
                    created_at,
                    path,
                })
            })
            .collect())
    })
}

/// The approximate path for a large user: the `agent_memory.approximate_candidates` most similar
/// memories by the model's HNSW index (pgvector's iterative scan keeps the user filter from
/// emptying the result), each ranked exactly with decay and importance.
#[allow(clippy::too_many_arguments)]
fn approximate(
    client: &mut pgrx::spi::SpiClient<'_>,
    user: &str,
    model: &str,
    kinds: &Option<Vec<String>>,
    include_archived: bool,
    q: &[f32],
    dims: usize,
    vector_schema: &str,
    k: usize,
    score: impl Fn(f64, f64, f64, bool) -> f64,
    min_similarity: f64,
    now: i64,
) -> Result<TopK> {
    let n = gucs::approximate_candidates();
    let vs = pgrx::spi::quote_identifier(vector_schema);
    // pgvector's search settings for this statement only; the previous values come back after.
    let saved = client
        .select(
            "SELECT pg_catalog.current_setting('hnsw.iterative_scan', true), pg_catalog.current_setting('hnsw.ef_search', true)",
            None,
            &[],
        )
        .map_err(spi("reading pgvector's settings"))?
        .first()
        .get_two::<String, String>()
        .map_err(spi("reading pgvector's settings"))?;
    let set = "SELECT pg_catalog.set_config('hnsw.iterative_scan', $1, true), pg_catalog.set_config('hnsw.ef_search', $2, true)";
    client
        .select(set, None, &["relaxed_order".into(), n.clamp(40, 1000).to_string().into()])
        .map_err(spi("setting pgvector's search"))?;
    // The dimension and schema come from the catalog and are quoted; the values are parameters.
    let sql = format!(
        "SELECT m.id, m.importance, m.last_hit_at, m.kind = 'episodic', m.emb FROM agent_memory.memories m \
          WHERE m.user_id = $1 AND m.embedding_model = $2 AND m.active \
            AND (m.expires_at IS NULL OR m.expires_at > now()) AND (m.valid_until IS NULL OR m.valid_until > now()) \
            AND ($3::text[] IS NULL OR m.kind = ANY ($3::text[])) AND ($6 OR m.archived_at IS NULL) \
          ORDER BY m.emb::{vs}.vector({dims}) OPERATOR({vs}.<=>) $4::{vs}.vector({dims}) LIMIT $5"
    );
    let oid = crate::vector::vector_type_oid()?;
    // SAFETY: a fresh `vector` datum, passed with pgvector's type OID.
    let qd = unsafe { pgrx::datum::DatumWithOid::new(crate::vector::new_vector_datum(q)?, oid) };
    let mut top = TopK::new(k);
    let mut scratch = Vec::new();
    {
        let mut table = client
            .select(sql.as_str(), None, &[user.into(), model.into(), kinds.clone().into(), qd, n.into(), include_archived.into()])
            .map_err(spi("reading the index's candidates"))?;
        while table.next().is_some() {
            let raw = |i: usize| table.get_datum_by_ordinal(i).map_err(spi("reading a candidate"));
            let (Some(id), Some(importance), Some(last_hit), Some(episodic), Some(emb)) = (raw(1)?, raw(2)?, raw(3)?, raw(4)?, raw(5)?) else {
                continue;
            };
            // SAFETY: the columns are bigint, real, timestamptz, boolean and vector, in that order.
            let (id, importance, last_hit, episodic, emb) = unsafe {
                (
                    <i64 as pgrx::FromDatum>::from_datum(id, false).unwrap_or_default(),
                    <f32 as pgrx::FromDatum>::from_datum(importance, false).unwrap_or_default(),
                    <i64 as pgrx::FromDatum>::from_datum(last_hit, false).unwrap_or(now),
                    <bool as pgrx::FromDatum>::from_datum(episodic, false).unwrap_or(false),
                    VectorDatum::from_datum(emb, Element::F32)?,
                )
            };
            let similarity = emb.with_f32(&mut scratch, |x| vecmath::cosine_with_unit(q, x));
            if similarity >= min_similarity {
                let s = score(similarity, agent_memory_core::decay::age_hours(now, last_hit), importance as f64, episodic);
                top.push(Ranked { id, score: s, similarity });
            }
        }
    }
    let (it, ef) = saved;
    client
        .select(set, None, &[it.unwrap_or_else(|| "off".into()).into(), ef.unwrap_or_else(|| "40".into()).into()])
        .map_err(spi("restoring pgvector's settings"))?;
    Ok(top)
}

/// Whether this transaction cannot write (a standby, or `SET TRANSACTION READ ONLY`): recall
/// then returns its rows without refreshing `last_hit_at`.
fn read_only() -> bool {
    // SAFETY: plain reads of backend-global state.
    unsafe { pgrx::pg_sys::XactReadOnly || pgrx::pg_sys::RecoveryInProgress() }
}

/// Defines one SQL overload of `memory_recall` for a query type (`vector`, `halfvec`).
macro_rules! memory_recall_for {
    ($(#[$doc:meta])* $rust_name:ident, $query:ty) => {
        $(#[$doc])*
        #[allow(clippy::too_many_arguments)]
        #[pg_extern(volatile, parallel_unsafe, name = "memory_recall")]
        #[search_path(pg_catalog, pg_temp)]
        fn $rust_name(
            user_id: Option<&str>,
            query: Option<$query>,
            k: default!(Option<i32>, 5),
            model: default!(Option<&str>, "NULL"),
            kinds: default!(Option<Vec<Option<String>>>, "NULL"),
            min_similarity: default!(Option<f64>, "NULL"),
            decay: default!(Option<&str>, "NULL"),
            touch: default!(Option<bool>, true),
            archived: default!(Option<bool>, false),
        ) -> TableIterator<
            'static,
            (
                name!(id, i64),
                name!(content, String),
                name!(score, f64),
                name!(similarity, f64),
                name!(kind, String),
                name!(subject, Option<String>),
                name!(predicate, Option<String>),
                name!(object, Option<String>),
                name!(importance, f32),
                name!(created_at, Option<TimestampWithTimeZone>),
                name!(path, String),
            ),
        > {
            let opts = RecallOptions { k, model, kinds, min_similarity, decay, touch, archived };
            let query = query.map(|q| q.into_vector_datum().or_raise());
            let rows = recall(user_id, query.as_ref(), opts).or_raise();
            TableIterator::new(rows.into_iter().map(|r| {
                (r.id, r.content, r.score, r.similarity, r.kind, r.subject, r.predicate, r.object, r.importance, r.created_at, r.path.to_string())
            }))
        }
    };
}

memory_recall_for!(
    /// The `k` best memories of `user_id` for `query`, best first: score = cosine similarity ×
    /// decay(time since last recalled) × importance factor. Exact: every active, unexpired memory
    /// of the user and the query's embedding model is scored. `touch => false` leaves `last_hit_at`
    /// and `hit_count` alone (for exports and scans); `decay => 'none'` ranks by similarity alone;
    /// `archived => true` includes memories consolidation archived.
    memory_recall,
    Vector
);

memory_recall_for!(
    /// `memory_recall` for a `halfvec` query.
    memory_recall_halfvec,
    HalfVec
);

memory_recall_for!(
    /// `memory_recall` for a query in pgvector's text syntax (`'[0.1, 0.2, ...]'`). PostgreSQL
    /// resolves an untyped literal or parameter to this form.
    memory_recall_text,
    &str
);
