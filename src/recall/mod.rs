//! Recall's pipeline, in one place: candidates → channels (vector, keyword, packed) → fusion →
//! decay → touch. `api::recall` and `api::context` are its SQL glue; the ranking itself (top-k,
//! the competing pool, fusion, decay, BM25, the packs' bounds) is in the pgrx-free core
//! (`agent_memory_core`), and this module plans and feeds it.
//!
//! The candidates are the user's active, unexpired memories of the query's embedding model (read
//! through the `(user_id, embedding_model) WHERE active` index, never through a vector index, so
//! a per-user filter can never empty the result), or of every model for a keyword-only call. Each
//! candidate is scored in Rust — `cosine × decay × importance factor` — and a bounded heap keeps
//! the best `k`. The call returns `min(k, candidates)` rows, best first. A user with packs is
//! ranked through them ([`packed`]); a large user with an HNSW index of the model may be ranked
//! approximately (`agent_memory.exact_limit`). A memory not yet embedded
//! (`agent_memory.embed_async`) is a candidate of the keyword channel only.
//!
//! A call bounded in time (`since`, `until`, `as_of`: [`agent_memory_core::window`]) reads the
//! user's rows, not the packs, and leaves out every memory outside its bounds before it is scored;
//! with `as_of`, the rows are the versions that held at that moment (superseded ones included),
//! chosen by [`versions_held`].

pub mod packed;

use agent_memory_core::topk::{Ranked, TopK};
use agent_memory_core::vecmath;
use std::collections::HashMap;

use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;

use crate::api::decay::scorer;
use crate::error::{spi, MemoryError, Result};
use crate::gucs;
use crate::vector::VectorDatum;
use agent_memory_core::window::{Window, WindowError};

/// What a call asks for besides the user and the query.
#[derive(Clone)]
pub struct RecallOptions<'a> {
    pub k: Option<i32>,
    pub model: Option<&'a str>,
    pub kinds: Option<Vec<Option<String>>>,
    pub min_similarity: Option<f64>,
    pub decay: Option<&'a str>,
    pub touch: Option<bool>,
    pub archived: Option<bool>,
    /// The question's words: with `query`, hybrid recall; without, keyword recall.
    pub query_text: Option<&'a str>,
    /// Only memories of this task and its ancestors (and, with `untasked`, of no task).
    pub task_id: Option<&'a str>,
    pub untasked: Option<bool>,
    /// Bounds on when the memories were said, and the moment whose facts to see.
    pub window: Window,
}

/// The time bounds of a call from its SQL arguments (`since`, `until`, `as_of`), checked.
pub fn window_of(
    since: Option<TimestampWithTimeZone>,
    until: Option<TimestampWithTimeZone>,
    as_of: Option<TimestampWithTimeZone>,
) -> Result<Window> {
    let t = |x: Option<TimestampWithTimeZone>| x.map(|t| t.into_inner());
    Window::new(t(since), t(until), t(as_of)).map_err(|e| match e {
        WindowError::Empty { .. } => MemoryError::invalid_parameter(format!(
            "since ({}) must be before until ({})",
            since.map(|t| t.to_string()).unwrap_or_default(),
            until.map(|t| t.to_string()).unwrap_or_default()
        ))
        .detail("The window is since <= created_at < until: with since at or after until, no memory is in it.")
        .hint("Swap them, or pass NULL for an unbounded side."),
        WindowError::AsOfBeforeSince { .. } => MemoryError::invalid_parameter(format!(
            "as_of ({}) is before since ({})",
            as_of.map(|t| t.to_string()).unwrap_or_default(),
            since.map(|t| t.to_string()).unwrap_or_default()
        ))
        .detail("as_of sees the memories said by that moment, and none said since then existed yet.")
        .hint("Pass an as_of at or after since, or leave one of them NULL."),
    })
}

/// The rows of `user` and `model` that held at `window.as_of`, where they are (in id order):
/// active ones, and versions retired after that moment by a change of the facts
/// ([`Window::held`]), inside the window's other bounds, not past their retention (`expires_at`
/// after `now`).
const VERSIONS: &str = "\
SELECT m.ctid, m.created_at, m.valid_until, m.expires_at, m.retired_reason, m.retired_at, m.active \
  FROM agent_memory.memories m \
 WHERE m.user_id = $1 AND m.embedding_model = $2 AND m.created_at <= $3 AND (m.active OR m.retired_at > $3) \
 ORDER BY m.id";

fn versions_held(
    client: &mut pgrx::spi::SpiClient<'_>,
    user: &str,
    model: &str,
    window: &Window,
    as_of: TimestampWithTimeZone,
    now: i64,
) -> Result<Vec<pgrx::pg_sys::ItemPointerData>> {
    let table = crate::plans::read(client, crate::placement::sql_for(user, VERSIONS)?, &[user.into(), model.into(), as_of.into()])
        .map_err(spi("reading the versions held"))?;
    let mut out = Vec::new();
    for row in table {
        let e = spi("reading a version");
        let ts = |i: usize| -> Result<Option<i64>> { Ok(row.get::<TimestampWithTimeZone>(i).map_err(&e)?.map(|t| t.into_inner())) };
        let created = ts(2)?.ok_or_else(|| MemoryError::not_null_column("created_at"))?;
        let (valid_until, expires_at, retired_at) = (ts(3)?, ts(4)?, ts(6)?);
        let reason: Option<String> = row.get(5).map_err(&e)?;
        let active: bool = row.get(7).map_err(&e)?.unwrap_or(false);
        let retired = if active { None } else { Some((reason.as_deref().unwrap_or(""), retired_at.unwrap_or(i64::MIN))) };
        if window.said_within(created) && window.held(created, valid_until, retired) && expires_at.is_none_or(|x| x > now) {
            if let Some(tid) = row.get::<pgrx::pg_sys::ItemPointerData>(1).map_err(&e)? {
                out.push(tid);
            }
        }
    }
    Ok(out)
}

/// How many of the best fused hits give their neighbours a share (`agent_memory.neighbour_share`).
const NEIGHBOUR_SOURCES: usize = 5;

/// How many index entries a packed call looks at on each side of a hit for its neighbours (the
/// memories in between that are not candidates of the call are skipped).
const NEIGHBOUR_LOOK: usize = 8;

/// The call's candidates in id order, where the neighbours of its hits are found: the rows it
/// read (id and `created_at`) and, through packs, the user's index entries.
struct Timeline<'a> {
    /// (id, created_at, length in characters) of the candidates read.
    read: Vec<(i64, i64, usize)>,
    entries: Option<&'a [(i64, pgrx::pg_sys::ItemPointerData)]>,
}

/// The `(hit, neighbour, distance, length)` of the best fused `hits`: the candidates of the call
/// said just before and after each (up to `agent_memory.neighbour_reach` on each side, distance 1
/// adjacent, in the order they were written), within `agent_memory.neighbour_window` of it, with
/// the neighbour's length in characters.
fn neighbours(
    user: &str,
    timeline: &Timeline<'_>,
    hits: &[i64],
    is_candidate: &dyn Fn(&crate::scan::Candidate) -> bool,
    now: i64,
    kinds: Option<&[String]>,
) -> Result<Vec<agent_memory_core::fusion::Neighbour>> {
    let reach = gucs::neighbour_reach();
    let window = gucs::neighbour_window().saturating_mul(1_000_000);
    let mut out = Vec::new();
    match timeline.entries {
        None => {
            let read = &timeline.read;
            for &hit in hits {
                let Ok(at) = read.binary_search_by_key(&hit, |r| r.0) else { continue };
                let created = read[at].1;
                let close = |r: &(i64, i64, usize)| (r.1 - created).abs() <= window;
                for (d, r) in read[..at].iter().rev().take(reach).enumerate().take_while(|(_, r)| close(r)) {
                    out.push((hit, r.0, d as u32 + 1, r.2));
                }
                for (d, r) in read[at + 1..].iter().take(reach).enumerate().take_while(|(_, r)| close(r)) {
                    out.push((hit, r.0, d as u32 + 1, r.2));
                }
            }
        }
        Some(entries) => {
            let mut fetcher = crate::scan::Fetcher::new(user)?;
            // The created_at and length of the candidate at an entry, or None when it is no
            // candidate.
            let mut created_at = |i: usize| -> Result<Option<(i64, usize)>> {
                let (id, tid) = entries[i];
                Ok(fetcher
                    .fetch(tid, kinds, now, |c| Ok((c.id == id && is_candidate(c)).then(|| (c.created, c.content().chars().count()))))?
                    .flatten())
            };
            for &hit in hits {
                let start = entries.partition_point(|e| e.0 < hit);
                let end = start + entries[start..].iter().take_while(|e| e.0 == hit).count();
                if start == end {
                    continue;
                }
                let mut created = None;
                for i in start..end {
                    if let Some((c, _)) = created_at(i)? {
                        created = Some(c);
                        break;
                    }
                }
                let Some(created) = created else { continue };
                for side in [-1i64, 1] {
                    let (mut i, mut found, mut looked, mut last) =
                        (if side < 0 { start as i64 - 1 } else { end as i64 }, 0u32, 0usize, None);
                    while i >= 0 && (i as usize) < entries.len() && (found as usize) < reach && looked < NEIGHBOUR_LOOK {
                        let at = i as usize;
                        let e = entries[at];
                        i += side;
                        if last == Some(e.0) {
                            continue;
                        }
                        looked += 1;
                        if let Some((c, length)) = created_at(at)? {
                            last = Some(e.0);
                            if (c - created).abs() > window {
                                break;
                            }
                            found += 1;
                            out.push((hit, e.0, found, length));
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

const LINEAGE: &str = "\
WITH RECURSIVE up (task_id, depth) AS ( \
    SELECT $2::text, 0 \
    UNION ALL \
    SELECT t.parent_task_id, up.depth + 1 FROM agent_memory.tasks t JOIN up ON t.task_id = up.task_id \
     WHERE t.user_id = $1 AND t.parent_task_id IS NOT NULL AND up.depth < 10000) \
SELECT array_agg(DISTINCT up.task_id) FROM up";

/// The tasks a call with `task_id` sees: the task and its ancestors (`agent_memory.tasks`).
pub fn lineage(client: &mut pgrx::spi::SpiClient<'_>, user: &str, task: &str) -> Result<std::collections::HashSet<String>> {
    if task.trim().is_empty() {
        return Err(MemoryError::invalid_parameter("task_id must not be empty").hint("Pass the task's id, or NULL for every task."));
    }
    let tasks: Option<Vec<Option<String>>> = crate::error::first_value(
        crate::plans::read(client, crate::placement::sql_for(user, LINEAGE)?, &[user.into(), task.into()])
            .map_err(spi("reading the task's ancestors"))?,
    )
    .map_err(spi("reading the task's ancestors"))?;
    Ok(tasks.unwrap_or_default().into_iter().flatten().collect())
}

/// The rule of the row-level policies (sql/access.sql): the session works for the user and the
/// role may name it (`agent_memory.session_user_id()`, which applies the role's bindings), or the
/// role sees every user.
const SEES_USER: &str =
    "SELECT coalesce(agent_memory.session_user_id() OPERATOR(pg_catalog.=) $1, false) OR agent_memory.sees_every_user()";

/// Whether the current role may see `user`'s memories: the session works for that user
/// (`agent_memory.user_id`) and the role may name it (`agent_memory.role_users`), or the role
/// sees every user (a superuser, an admin, a worker).
pub fn sees_user(client: &mut pgrx::spi::SpiClient<'_>, user: &str) -> Result<bool> {
    // A superuser always sees every row, so its calls need no query here.
    if crate::pg::is_superuser() {
        return Ok(true);
    }
    let sees: Option<bool> =
        crate::error::first_value(crate::plans::read(client, SEES_USER, &[user.into()]).map_err(spi("checking the role's rights"))?)
            .map_err(spi("checking the role's rights"))?;
    Ok(sees == Some(true))
}

const SEES_EVERY_USER: &str = "SELECT agent_memory.sees_every_user()";

/// The embedding models of a user's active memories (the call's own first), read through the
/// recall index; not "none" (memories stored only, never recalled: catalog::UNRECALLED).
// One probe of the index on (user_id, embedding_model) per model, not a read of every entry.
const USER_MODELS: &str = "WITH RECURSIVE m(model) AS ( \
         (SELECT embedding_model FROM agent_memory.memories WHERE user_id = $1 AND active ORDER BY embedding_model LIMIT 1) \
         UNION ALL \
         SELECT (SELECT n.embedding_model FROM agent_memory.memories n \
                  WHERE n.user_id = $1 AND n.active AND n.embedding_model > m.model ORDER BY n.embedding_model LIMIT 1) \
           FROM m WHERE m.model IS NOT NULL) \
     SELECT array_agg(model ORDER BY model <> $2, model) FROM m WHERE model IS NOT NULL AND model <> 'none'";

/// The models the user has active memories of, `model` first when it is one of them.
pub fn user_models(client: &mut pgrx::spi::SpiClient<'_>, user: &str, model: &str) -> Result<Vec<String>> {
    let models: Option<Vec<Option<String>>> = crate::error::first_value(
        crate::plans::read(client, crate::placement::sql_for(user, USER_MODELS)?, &[user.into(), model.into()])
            .map_err(spi("reading the user's models"))?,
    )
    .map_err(spi("reading the user's models"))?;
    Ok(models.unwrap_or_default().into_iter().flatten().collect())
}

/// Whether the current role sees every user (a superuser, an admin, a worker).
pub fn sees_every_user(client: &mut pgrx::spi::SpiClient<'_>) -> Result<bool> {
    if crate::pg::is_superuser() {
        return Ok(true);
    }
    let every: Option<bool> =
        crate::error::first_value(crate::plans::read(client, SEES_EVERY_USER, &[]).map_err(spi("checking the role's rights"))?)
            .map_err(spi("checking the role's rights"))?;
    Ok(every == Some(true))
}

/// The error of a write for a user the role may not name.
pub fn not_your_user(user: &str) -> MemoryError {
    MemoryError::new(
        PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
        format!("this session may not write the memories of user \"{user}\""),
    )
    .detail("A role without maintenance rights writes only for the user its session names in agent_memory.user_id, and a role bound to users (agent_memory.role_users) only for those.")
    .hint("SET agent_memory.user_id to the user (SET LOCAL per transaction in a pool), or use a role bound to that user.")
}

/// Whether a memory (or turn) of `task` is visible to a call limited to `lineage`.
pub fn in_lineage(lineage: &Option<std::collections::HashSet<String>>, untasked: bool, task: Option<&str>) -> bool {
    match (lineage, task) {
        (None, _) => true,
        (Some(_), None) => untasked,
        (Some(set), Some(t)) => set.contains(t),
    }
}

/// One returned memory.
pub struct Recalled {
    pub id: i64,
    pub content: String,
    pub score: f64,
    /// Cosine similarity to the query vector; NULL for keyword-only recall.
    pub similarity: Option<f64>,
    pub kind: String,
    pub subject: Option<String>,
    pub predicate: Option<String>,
    pub object: Option<String>,
    pub importance: f32,
    pub created_at: Option<TimestampWithTimeZone>,
    /// How the candidates were found: `exact` (every memory scored) or `approximate` (the model's
    /// HNSW index, for users above `agent_memory.exact_limit`).
    pub path: &'static str,
    /// Rank (from 1) in the vector, keyword and recency channels; NULL when not ranked there.
    pub ranks: [Option<i32>; 3],
}

const DETAILS: &str = "\
SELECT m.id, m.content, m.kind, m.subject, m.predicate, m.object, m.importance, m.created_at \
  FROM agent_memory.memories m WHERE m.user_id = $2 AND m.id = ANY ($1)";

/// What a result shows besides its scores (the columns of DETAILS).
struct Details {
    content: String,
    kind: String,
    subject: Option<String>,
    predicate: Option<String>,
    object: Option<String>,
    importance: f32,
    created_at: Option<TimestampWithTimeZone>,
}

/// The details of the memories `ids`, read from their rows at `entries` (id and place, in id
/// order, as [`packed::rank_packed`] found them): the version this statement sees,
/// without a query. An id with no visible row there is left out.
fn details_at(user: &str, entries: &[(i64, pgrx::pg_sys::ItemPointerData)], ids: &[i64], out: &mut HashMap<i64, Details>) -> Result<()> {
    let mut fetcher = crate::scan::Fetcher::new(user)?;
    for &id in ids {
        let start = entries.partition_point(|e| e.0 < id);
        for (_, tid) in entries[start..].iter().take_while(|e| e.0 == id) {
            let found = fetcher.fetch(*tid, None, i64::MIN, |c| {
                if c.id != id {
                    return Ok(None);
                }
                Ok(Some(Details {
                    content: c.content_string(),
                    kind: c.kind_string(),
                    subject: c.subject_string(),
                    predicate: c.predicate_string(),
                    object: c.object_string(),
                    importance: c.importance,
                    created_at: TimestampWithTimeZone::try_from(c.created).ok(),
                }))
            })?;
            if let Some(d) = found.flatten() {
                out.insert(id, d);
                break;
            }
        }
    }
    Ok(())
}

/// After this many candidates, recall checks whether the user is large enough for the
/// approximate path; smaller users never pay for the check.
const CHECK_SIZE_AT: usize = 1000;

/// The touch, returning the same columns as DETAILS: one statement instead of two. The rows are
/// locked in id order first, so concurrent recalls with overlapping results cannot deadlock.
const TOUCH_RETURNING: &str = "\
WITH locked AS (SELECT id FROM agent_memory.memories WHERE user_id = $2 AND id = ANY ($1) ORDER BY id FOR NO KEY UPDATE) \
UPDATE agent_memory.memories m SET last_hit_at = now(), hit_count = m.hit_count + 1 \
  FROM locked WHERE m.user_id = $2 AND m.id = locked.id \
RETURNING m.id, m.content, m.kind, m.subject, m.predicate, m.object, m.importance, m.created_at";

pub(crate) fn dimension_mismatch(query: usize, model: &str, stored: usize) -> MemoryError {
    MemoryError::data_exception(format!("the query has {query} dimensions but the memories of model \"{model}\" have {stored}"))
        .detail("A query only meets memories of its own embedding model, and one model has one dimension.")
        .hint("Pass model => the name of the model that made the query vector.")
}

/// Calls `f` with a candidate's cosine similarity to the unit query `q` and its embedding as
/// f32 (`None` for a memory not yet embedded); an embedding of another dimension than the
/// query's is an error.
pub(crate) fn with_similarity<R>(
    c: &crate::scan::Candidate,
    q: &[f32],
    model: &str,
    scratch: &mut Vec<f32>,
    f: impl FnOnce(f64, &[f32]) -> R,
) -> Result<Option<R>> {
    let Some(emb) = c.emb()? else {
        return Ok(None);
    };
    if emb.dims() != q.len() {
        return Err(dimension_mismatch(q.len(), model, emb.dims()));
    }
    // A long memory's further windows (agent_memory.embed_windows): its best embedding counts.
    let windows = c.best_window(q, scratch, |d| dimension_mismatch(q.len(), model, d))?;
    Ok(Some(emb.with_f32(scratch, |x| {
        let own = vecmath::cosine_with_unit(q, x);
        f(windows.map_or(own, |w| w.max(own)), x)
    })))
}

/// Checks the user id.
pub fn check_user(user_id: Option<&str>) -> Result<&str> {
    match user_id {
        None => Err(MemoryError::null_value("user_id must not be NULL")
            .hint("Every memory belongs to one user; pass the id of the user whose memories to use.")),
        Some(u) if u.trim().is_empty() => {
            Err(MemoryError::invalid_parameter("user_id must not be empty").hint("Pass the id of the user whose memories to use."))
        }
        Some(u) => Ok(u),
    }
}

/// Checks a query vector and returns it scaled to unit length.
pub fn unit_query(query: Option<&VectorDatum>) -> Result<Vec<f32>> {
    let q = query.ok_or_else(|| {
        MemoryError::null_value("query must not be NULL")
            .hint("Pass the embedding of the question as a vector, a halfvec, or text like '[0.1, 0.2]'.")
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
    crate::catalog::call_model(
        model,
        gucs::default_model,
        "agent_memory.default_model",
        "Name the embedding model that made the query vector, or pass NULL for agent_memory.default_model.",
    )
}

/// Which channels a call ranks with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Channels {
    /// `query` only: the vector ranking.
    Vector,
    /// `query` and `query_text`: vector and keyword rankings fused (and recency, when enabled).
    Hybrid,
    /// `query_text` only (`query` NULL): the keyword ranking.
    Keyword,
}

/// The vector ranking of one call: either every candidate scored with decay by age (scope
/// `all`, or no decay), or a pool in which decay applies only to memories that compete
/// (`agent_memory_core::rank`).
pub(crate) struct VectorRanker {
    scorer: agent_memory_core::decay::Scorer,
    floors: (f64, f64),
    competing: Option<(agent_memory_core::rank::Pool, f64)>,
    top: TopK,
}

impl VectorRanker {
    fn new(scorer: agent_memory_core::decay::Scorer, wanted: usize) -> Self {
        let competing = (gucs::decay_competing_only() && scorer.mode != agent_memory_core::decay::DecayMode::None)
            .then(|| (agent_memory_core::rank::Pool::new(agent_memory_core::rank::pool_size(wanted)), gucs::compete_similarity()));
        VectorRanker { scorer, floors: (gucs::decay_floor(false), gucs::decay_floor(true)), competing, top: TopK::new(wanted) }
    }

    #[allow(clippy::too_many_arguments)]
    fn offer(&mut self, id: i64, similarity: f64, age_hours: f64, importance: f64, episodic: bool, created: i64, unit: &[f32]) {
        let floor = if episodic { self.floors.1 } else { self.floors.0 };
        match &mut self.competing {
            None => {
                self.top.push(Ranked { id, score: self.scorer.score(similarity, age_hours, importance, floor), similarity });
            }
            Some((pool, _)) => {
                let base = similarity * self.scorer.importance.factor(importance);
                if pool.admits(id, base, similarity) {
                    pool.push(agent_memory_core::rank::PoolEntry {
                        id,
                        similarity,
                        base,
                        created,
                        age_hours,
                        episodic,
                        unit: unit.to_vec(),
                    });
                }
            }
        }
    }

    /// Scores a candidate read from its row (offered to the ranking unless it is below
    /// `min_similarity`) and returns its similarity (`None` for a memory not yet embedded,
    /// which the vector ranking does not see). The callers leave out archived memories when
    /// asked.
    pub(crate) fn offer_candidate(
        &mut self,
        c: &crate::scan::Candidate,
        q: &[f32],
        model: &str,
        min_similarity: f64,
        now: i64,
        scratch: &mut Vec<f32>,
    ) -> Result<Option<f64>> {
        // A standing instruction never decays.
        let age_hours = if c.procedural { 0.0 } else { agent_memory_core::decay::age_hours(now, c.last_hit) };
        with_similarity(c, q, model, scratch, |similarity, x| {
            if similarity >= min_similarity {
                self.offer(c.id, similarity, age_hours, c.importance as f64, c.episodic, c.created, x);
            }
            similarity
        })
    }

    /// The score a new candidate must beat, once as many are kept as the ranking needs: the pool's
    /// score before decay, or the top's score.
    pub(crate) fn threshold(&self) -> Option<f64> {
        match &self.competing {
            None => self.top.threshold().map(|r| r.score),
            Some((pool, _)) => pool.threshold(),
        }
    }

    /// The range of the factor that multiplies a memory's similarity into the score the ranking
    /// keeps by, for a memory whose importance is at most `importance`: the importance factor
    /// (importance anywhere in 0..=importance), times the decay (0..=1) when every memory decays.
    pub(crate) fn factor_range(&self, importance: f64) -> (f64, f64) {
        let w = self.scorer.importance;
        let (a, b) = (w.factor(0.0), w.factor(importance));
        let (f_lo, f_hi) = (a.min(b), a.max(b));
        if self.competing.is_some() || self.scorer.mode == agent_memory_core::decay::DecayMode::None {
            (f_lo, f_hi)
        } else {
            (f_lo.min(0.0), f_hi.max(0.0))
        }
    }

    /// The ranking, best first, at most `wanted` long.
    fn finish(self, wanted: usize) -> Vec<Ranked> {
        match self.competing {
            None => self.top.into_sorted(),
            Some((pool, compete)) => {
                let entries = pool.into_entries();
                let (scorer, floors) = (self.scorer, self.floors);
                let mut ranked = agent_memory_core::rank::rank_pool(&entries, compete, |age, episodic| {
                    scorer.params.multiplier(scorer.mode, age, if episodic { floors.1 } else { floors.0 })
                });
                ranked.truncate(wanted);
                ranked
            }
        }
    }
}

/// A ranked result on its way out: its score and similarity, and its rank in each channel.
struct Scored {
    id: i64,
    score: f64,
    similarity: Option<f64>,
    ranks: [Option<i32>; 3],
}

const FEEDBACK_EMBEDDINGS: &str =
    "SELECT id, emb FROM agent_memory.memories WHERE user_id = $3 AND id = ANY ($1) AND embedding_model = $2 AND emb IS NOT NULL";

/// Recalls the `k` best memories of a user: by the query vector, by the query's words, or both
/// fused (see the module's documentation).
///
/// A hybrid call of a user with up to `agent_memory.exact_limit` memories of the model ranks
/// twice: the first ranking's `agent_memory.hybrid_feedback` best memories move the query vector
/// towards them (`q + mean of their embeddings`, normalised: pseudo-relevance feedback), and the
/// memories are ranked again by that vector and the same words. Only the second ranking records
/// hits, and its `similarity` column is still the similarity to the caller's query.
pub fn recall(user_id: Option<&str>, query: Option<&VectorDatum>, opts: RecallOptions<'_>) -> Result<Vec<Recalled>> {
    let hits = gucs::hybrid_feedback();
    let hybrid = query.is_some() && opts.query_text.is_some_and(|t| !t.trim().is_empty());
    if !hybrid || hits == 0 {
        return recall_pass(user_id, query, None, opts, &mut None);
    }
    let user = check_user(user_id)?;
    // The call's own k is checked here: the first ranking asks for at least `hits`.
    check_k(opts.k)?;
    let model = resolve_model(opts.model)?;
    let limit = gucs::exact_limit();
    if crate::scan::count_entries(user, &model, limit + 1)? > limit {
        return recall_pass(user_id, query, None, opts, &mut None);
    }
    let q = unit_query(query)?;
    let touch = opts.touch.unwrap_or(true) && opts.window.as_of.is_none();
    // The keyword ranking is the same both times (the same words, candidates and snapshot): the
    // second ranking takes the first one's.
    let mut words = None;
    // At least `hits` long, so that a call's results do not depend on its k beyond their count.
    let first_k = opts.k.map(|k| k.max(hits as i32));
    let first = recall_pass(user_id, query, None, RecallOptions { touch: Some(false), k: first_k, ..opts.clone() }, &mut words)?;
    if first.is_empty() {
        return Ok(first);
    }
    let top: Vec<i64> = first.iter().take(hits).map(|r| r.id).collect();
    let embeddings = embeddings_of(user, &top, &model)?;
    if embeddings.is_empty() {
        // Nothing to move towards: the first ranking is the answer (ranked again only to record
        // its hits).
        return if touch || first_k != opts.k { recall_pass(user_id, query, None, opts, &mut words) } else { Ok(first) };
    }
    let moved = agent_memory_core::vecmath::moved_towards(&q, embeddings.iter().map(|(_, e)| e.as_slice()));
    let mut second = recall_pass(user_id, query, Some(moved), opts, &mut words)?;
    // The similarity shown is to the caller's query.
    let shown: Vec<i64> = second.iter().filter(|r| r.similarity.is_some()).map(|r| r.id).collect();
    let exact = similarities_to(user, &shown, &model, &q)?;
    for r in second.iter_mut() {
        if r.similarity.is_some() {
            r.similarity = exact.get(&r.id).copied();
        }
    }
    Ok(second)
}

/// The embeddings (as stored, of `model`) of the memories `ids`, read through SQL.
fn embeddings_of(user: &str, ids: &[i64], model: &str) -> Result<Vec<(i64, Vec<f32>)>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    Spi::connect_mut(|client| {
        let mut table = crate::plans::read(
            client,
            crate::placement::sql_for(user, FEEDBACK_EMBEDDINGS)?,
            &[ids.to_vec().into(), model.into(), user.into()],
        )
        .map_err(spi("reading the embeddings of the first ranking"))?;
        let mut out = Vec::with_capacity(ids.len());
        while table.next().is_some() {
            let id: i64 = table.get(1).map_err(spi("reading id"))?.unwrap_or_default();
            if let Some(v) = crate::vector::vector_column(&table, 2)? {
                out.push((id, v.to_f32_vec()));
            }
        }
        Ok(out)
    })
}

const SHOWN_SIMILARITIES: &str = "SELECT id, emb, emb_windows FROM agent_memory.memories \
      WHERE user_id = $3 AND id = ANY ($1) AND embedding_model = $2 AND emb IS NOT NULL";

/// The similarity of the memories `ids` to the unit query `q`, as the vector channel scores it
/// (the best of a memory's embeddings, its windows included), read through SQL.
fn similarities_to(user: &str, ids: &[i64], model: &str, q: &[f32]) -> Result<HashMap<i64, f64>> {
    let mut out = HashMap::with_capacity(ids.len());
    if ids.is_empty() {
        return Ok(out);
    }
    Spi::connect_mut(|client| {
        let mut table = crate::plans::read(
            client,
            crate::placement::sql_for(user, SHOWN_SIMILARITIES)?,
            &[ids.to_vec().into(), model.into(), user.into()],
        )
        .map_err(spi("reading the embeddings of the results"))?;
        let mut scratch = Vec::new();
        while table.next().is_some() {
            let id: i64 = table.get(1).map_err(spi("reading id"))?.unwrap_or_default();
            let windows = crate::vector::best_in_array_column(&table, 3, q, &mut scratch, |d| dimension_mismatch(q.len(), model, d))?;
            if let Some(v) = crate::vector::vector_column(&table, 2)? {
                let own = v.with_f32(&mut scratch, |x| agent_memory_core::vecmath::cosine_with_unit(q, x));
                out.insert(id, windows.map_or(own, |w| w.max(own)));
            }
        }
        Ok(out)
    })
}

/// What a hybrid ranking counted of the question's words, for a second ranking of the same call:
/// the keyword ranking, and every candidate's length in words (sorted by id).
struct Counted {
    ranking: Vec<(i64, f64)>,
    lengths: Option<agent_memory_core::scratch::Kept<(i64, u32)>>,
}

/// One ranking of [`recall`]: `moved` replaces the unit query when it is given. A hybrid ranking
/// leaves its keyword ranking in `words`, and takes it from there instead of counting the words
/// when it is already there.
fn recall_pass(
    user_id: Option<&str>,
    query: Option<&VectorDatum>,
    moved: Option<Vec<f32>>,
    opts: RecallOptions<'_>,
    words: &mut Option<Counted>,
) -> Result<Vec<Recalled>> {
    let user = check_user(user_id)?;
    let text = opts.query_text.map(str::trim).filter(|t| !t.is_empty());
    let channels = match (query.is_some(), text.is_some()) {
        (true, false) => Channels::Vector,
        (true, true) => Channels::Hybrid,
        (false, true) => Channels::Keyword,
        (false, false) => {
            if opts.query_text.is_some() {
                return Err(MemoryError::invalid_parameter("query_text has no words and query is NULL")
                    .hint("Pass the question's embedding as query, or its words as query_text."));
            }
            return Err(MemoryError::null_value("query must not be NULL")
                .hint("Pass the embedding of the question as a vector, a halfvec, or text like '[0.1, 0.2]'; or pass query_text => the question to rank by words alone."));
        }
    };
    let q = match (query, moved) {
        (_, Some(m)) => m,
        (Some(_), None) => unit_query(query)?,
        (None, None) => Vec::new(),
    };
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
                    MemoryError::null_value("kinds must not contain NULL")
                        .hint("List kinds of memory: 'semantic', 'episodic'; or pass kinds => NULL for all.")
                })?;
                crate::api::policy::check_kind(&k)?;
                out.push(k);
            }
            Some(out)
        }
    };
    let window = opts.window;
    // A look back at an earlier moment is not a use of today's memories: it records no hits.
    let touch = opts.touch.unwrap_or(true) && window.as_of.is_none();
    let include_archived = opts.archived.unwrap_or(true);
    let untasked = opts.untasked.unwrap_or(true);
    let task = opts.task_id;
    // How many results each channel ranks: k alone, or the fused channels' candidates.
    let per_channel = if channels == Channels::Hybrid { gucs::hybrid_candidates().max(k) } else { k };

    let counted = if channels == Channels::Hybrid { words.take() } else { None };
    let mut keyword =
        if counted.is_some() { None } else { text.map(|t| agent_memory_core::keyword::KeywordScan::new(t, gucs::tokenizer())) };
    // Hybrid recall weighs its fused scores by the candidates' lengths, when the prior is on.
    let (prior_words, prior) = gucs::length_prior();
    if let Some(kw) = keyword.as_mut().filter(|_| channels == Channels::Hybrid && prior_words > 0 && prior > 0.0) {
        kw.keep_lengths();
    }
    if channels == Channels::Keyword && !keyword.as_ref().is_some_and(|k| k.has_terms()) {
        return Err(MemoryError::invalid_parameter("query_text has no words to search for")
            .detail("Words are letters and digits; common English words (the, of, and, ...) are skipped.")
            .hint("Pass the question's words as query_text, or its embedding as query."));
    }
    Spi::connect_mut(|client| {
        crate::version::require_current_schema(client)?;
        // The candidates are read directly, not through SQL: the row-level security rule is
        // applied here. A role without maintenance rights sees only the session's user.
        if !sees_user(client, user)? {
            return Ok(Vec::new());
        }
        let lineage = match task {
            Some(t) => Some(lineage(client, user, t)?),
            None => None,
        };
        let mut vector = VectorRanker::new(scorer, per_channel);
        let mut keyword = keyword;
        let mut recency = (channels == Channels::Hybrid && gucs::recency_channel()).then(|| TopK::new(per_channel));
        // Hybrid results need the similarity of memories that only the keyword channel ranks.
        let mut similarities: Vec<(i64, f32)> = Vec::new();
        // Hybrid recall's neighbours are found among the candidates, in id order (not as of a past
        // moment: the versions then are other rows).
        let with_neighbours =
            channels == Channels::Hybrid && gucs::neighbour_share() > 0.0 && gucs::neighbour_reach() > 0 && window.as_of.is_none();
        let mut read_timeline: Vec<(i64, i64, usize)> = Vec::new();
        let mut seen = 0usize;
        // Only a vector-only call of a large user may take the approximate path; the keyword
        // channel scores every candidate.
        let exact_limit =
            if channels == Channels::Vector && lineage.is_none() && !window.is_bounded() { gucs::exact_limit() } else { usize::MAX };
        let mut index = None;
        let mut scratch = Vec::new();
        let now = crate::pg::transaction_start();
        // A call reads the user's packs when there are some, and the exact rows only of the
        // memories that can make the vector ranking, and of those whose words the packs cannot
        // count (see api/pack.rs). Task lineage and the recency channel need every row.
        // Words do not depend on an embedding model: a keyword-only call searches the user's
        // memories of every model.
        let models = if channels == Channels::Keyword { user_models(client, user, &model)? } else { vec![model.clone()] };
        let packed = if lineage.is_none()
            && recency.is_none()
            && !window.is_bounded()
            && gucs::packed_recall()
            && models.len() == 1
            && models[0] == model
        {
            let mut side = keyword
                .as_mut()
                .map(|scan| packed::KeywordSide { scan, similarities: (channels == Channels::Hybrid).then_some(&mut similarities) });
            packed::rank_packed(user, &model, kinds.as_deref(), include_archived, &q, min_similarity, now, &mut vector, side.as_mut())?
        } else {
            None
        };
        if let Some(p) = &packed {
            seen = p.read;
        }
        // As of a moment: the versions that held then, per model, chosen before any is read.
        let versions = match window.as_of {
            Some(at) => {
                let at = TimestampWithTimeZone::try_from(at).map_err(|_| MemoryError::invalid_parameter("as_of is out of range"))?;
                Some(models.iter().map(|m| versions_held(client, user, m, &window, at, now)).collect::<Result<Vec<_>>>()?)
            }
            None => None,
        };
        // Whether a live memory of the call's kinds is a candidate: the archive, the time window
        // and the task lineage (its task read only when there is one).
        let admits = |c: &crate::scan::Candidate| {
            (include_archived || !c.archived)
                && window.said_within(c.created)
                && (lineage.is_none() || in_lineage(&lineage, untasked, c.task_id().as_deref()))
        };
        let mut visit = |c: &crate::scan::Candidate| {
            if !admits(c) {
                return Ok(true);
            }
            seen += 1;
            // The text is read once (a long one is detoasted) for the neighbours' lengths and the
            // words.
            let content = (with_neighbours || keyword.is_some()).then(|| c.content());
            if with_neighbours {
                read_timeline.push((c.id, c.created, content.as_deref().map_or(0, |t| t.chars().count())));
            }
            if exact_limit != usize::MAX && seen == CHECK_SIZE_AT.min(exact_limit) + 1 {
                index = crate::api::index::model_index(client, &model)?;
                if index.is_some() {
                    if crate::scan::count_entries(user, &model, exact_limit + 1)? > exact_limit {
                        return Ok(false);
                    }
                    index = None;
                }
            }
            if channels != Channels::Keyword {
                let similarity = vector.offer_candidate(c, &q, &model, min_similarity, now, &mut scratch)?;
                if let Some(s) = similarity.filter(|_| channels == Channels::Hybrid) {
                    similarities.push((c.id, s as f32));
                }
            }
            if let Some(kw) = keyword.as_mut() {
                kw.add(c.id, content.as_deref().unwrap_or_default());
            }
            if let Some(r) = recency.as_mut() {
                r.push(Ranked { id: c.id, score: c.last_hit as f64, similarity: 0.0 });
            }
            Ok(true)
        };
        let mut complete = packed.is_some();
        if !complete {
            complete = true;
            if let Some(versions) = &versions {
                let mut fetcher = crate::scan::Fetcher::new(user)?;
                for tid in versions.iter().flatten() {
                    fetcher.fetch_version(*tid, kinds.as_deref(), now, &mut visit)?;
                }
            } else {
                for m in &models {
                    if !crate::scan::for_each_candidate(user, m, kinds.as_deref(), now, &mut visit)? {
                        complete = false;
                        break;
                    }
                }
            }
        }
        let mut path = "exact";
        let mut vector_ranked = Vec::new();
        if channels != Channels::Keyword {
            if !complete {
                if let Some((dims, schema)) = &index {
                    vector = VectorRanker::new(scorer, per_channel);
                    approximate(client, user, &model, &kinds, include_archived, &q, *dims, schema, &mut vector, min_similarity, now)?;
                    path = "approximate";
                }
            }
            if seen == 0 {
                if let Some(d) = crate::catalog::model_dims(client, &model)? {
                    if d != q.len() {
                        return Err(dimension_mismatch(q.len(), &model, d));
                    }
                }
                // No silent empty answer: the user's memories may be of other models.
                let others: Vec<String> = user_models(client, user, &model)?.into_iter().filter(|m| *m != model).collect();
                if !others.is_empty() {
                    pgrx::notice!(
                        "user \"{user}\" has no memories of embedding model \"{model}\", and has memories of {}; name one with model => ..., or recall by words alone (query_text => ..., with a NULL query), which searches every model",
                        others.iter().map(|m| format!("\"{m}\"")).collect::<Vec<_>>().join(", ")
                    );
                }
            }
            vector_ranked = vector.finish(per_channel);
        }
        let counted = match counted {
            Some(c) => c,
            None => {
                let ranking = keyword.as_ref().map(|kw| kw.top(per_channel, gucs::bm25())).unwrap_or_default();
                let lengths = keyword.as_mut().filter(|_| channels == Channels::Hybrid).map(|kw| kw.take_lengths());
                Counted { ranking, lengths }
            }
        };
        let keyword_ranked = counted.ranking.clone();
        if channels == Channels::Hybrid {
            *words = Some(counted);
        }
        let lengths: &[(i64, u32)] = words.as_ref().and_then(|c| c.lengths.as_deref()).map_or(&[], |l| &l[..]);
        let scored: Vec<Scored> = match channels {
            Channels::Vector => vector_ranked
                .iter()
                .take(k)
                .enumerate()
                .map(|(i, r)| Scored { id: r.id, score: r.score, similarity: Some(r.similarity), ranks: [Some(i as i32 + 1), None, None] })
                .collect(),
            Channels::Keyword => keyword_ranked
                .iter()
                .take(k)
                .enumerate()
                .map(|(i, (id, s))| Scored { id: *id, score: *s, similarity: None, ranks: [None, Some(i as i32 + 1), None] })
                .collect(),
            Channels::Hybrid => {
                let v: Vec<i64> = vector_ranked.iter().map(|r| r.id).collect();
                let w: Vec<i64> = keyword_ranked.iter().map(|r| r.0).collect();
                let t: Vec<i64> = recency.map(|r| r.into_sorted().iter().map(|r| r.id).collect()).unwrap_or_default();
                let mut fused = if t.is_empty() && gucs::hybrid_convex() {
                    let scored: Vec<(i64, f64)> = vector_ranked.iter().map(|r| (r.id, r.score)).collect();
                    let weight = gucs::hybrid_weight();
                    agent_memory_core::fusion::convex(&[&scored, &keyword_ranked], &[weight, 1.0 - weight])
                } else {
                    let lists: Vec<&[i64]> = if t.is_empty() { vec![&v, &w] } else { vec![&v, &w, &t] };
                    agent_memory_core::keyword::rrf(&lists, gucs::rrf_k())
                };
                agent_memory_core::fusion::weigh_by_length(&mut fused, lengths, prior_words, prior);
                // The memories said beside the best hits share their score.
                if with_neighbours && !fused.is_empty() {
                    let hits: Vec<i64> = fused.iter().take(NEIGHBOUR_SOURCES).map(|f| f.id).collect();
                    read_timeline.sort_unstable_by_key(|r| r.0);
                    read_timeline.dedup_by_key(|r| r.0);
                    let timeline = Timeline { read: std::mem::take(&mut read_timeline), entries: packed.as_ref().map(|p| &p.entries[..]) };
                    let pairs = neighbours(user, &timeline, &hits, &admits, now, kinds.as_deref())?;
                    agent_memory_core::fusion::share_with_neighbours(
                        &mut fused,
                        &pairs,
                        gucs::neighbour_share(),
                        NEIGHBOUR_SOURCES,
                        gucs::neighbour_length(),
                    );
                }
                fused.truncate(k);
                similarities.sort_unstable_by_key(|p| p.0);
                // The similarity of a result counted from its pack, and not read: its row is
                // where its (one) index entry points.
                if let Some(p) = &packed {
                    let missing: Vec<_> = fused
                        .iter()
                        .filter(|f| similarities.binary_search_by_key(&f.id, |p| p.0).is_err())
                        // Every index entry of the memory: only one points to the version this
                        // statement sees (the others, to versions not yet vacuumed away).
                        .flat_map(|f| {
                            let start = p.entries.partition_point(|e| e.0 < f.id);
                            p.entries[start..].iter().take_while(move |e| e.0 == f.id).copied()
                        })
                        .collect();
                    similarities.extend(packed::similarities_of(user, &missing, &q, &model)?);
                    similarities.sort_unstable_by_key(|p| p.0);
                }
                let sim_of = |id: i64| similarities.binary_search_by_key(&id, |p| p.0).ok().map(|i| similarities[i].1 as f64);
                fused
                    .into_iter()
                    .map(|f| Scored {
                        id: f.id,
                        score: f.score,
                        similarity: sim_of(f.id),
                        ranks: [
                            f.ranks.first().copied().flatten().map(|r| r as i32),
                            f.ranks.get(1).copied().flatten().map(|r| r as i32),
                            f.ranks.get(2).copied().flatten().map(|r| r as i32),
                        ],
                    })
                    .collect()
            }
        };
        if scored.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<i64> = scored.iter().map(|r| r.id).collect();
        let mut details: HashMap<i64, Details> = HashMap::with_capacity(ids.len());
        // With a worker folding this database's hits, they are recorded in shared memory and the
        // rows are only read (api::hits); otherwise recall touches them itself.
        let deferred = touch && crate::share::hits_deferred();
        let touching = touch && !deferred && !crate::pg::read_only();
        // Without a touch, the results' rows are read again where the packed ranking found them
        // (the versions this statement sees); any other call, and any id not found there, asks SQL.
        if !touching {
            if let Some(p) = &packed {
                details_at(user, &p.entries, &ids, &mut details)?;
            }
        }
        let asked: Vec<i64> = ids.iter().copied().filter(|id| !details.contains_key(id)).collect();
        if !asked.is_empty() {
            let table = if touching {
                crate::placement::hold_user(client, user)?;
                crate::plans::write(client, crate::placement::sql_for(user, TOUCH_RETURNING)?, &[asked.into(), user.into()])
            } else {
                crate::plans::read(client, crate::placement::sql_for(user, DETAILS)?, &[asked.into(), user.into()])
            };
            let table = table.map_err(spi("reading the recalled memories"))?;
            for row in table {
                let id: i64 = row.get(1).map_err(spi("reading id"))?.unwrap_or_default();
                details.insert(
                    id,
                    Details {
                        content: row.get::<String>(2).map_err(spi("reading content"))?.unwrap_or_default(),
                        kind: row.get::<String>(3).map_err(spi("reading kind"))?.unwrap_or_default(),
                        subject: row.get::<String>(4).map_err(spi("reading subject"))?,
                        predicate: row.get::<String>(5).map_err(spi("reading predicate"))?,
                        object: row.get::<String>(6).map_err(spi("reading object"))?,
                        importance: row.get::<f32>(7).map_err(spi("reading importance"))?.unwrap_or(0.0),
                        created_at: row.get::<TimestampWithTimeZone>(8).map_err(spi("reading created_at"))?,
                    },
                );
            }
        }
        if deferred {
            let returned: Vec<i64> = ids.iter().copied().filter(|id| details.contains_key(id)).collect();
            crate::share::record_hits(crate::scan::memories_oid(user)?, &returned, crate::pg::transaction_start(), user);
        }
        Ok(scored
            .into_iter()
            .filter_map(|r| {
                let Details { content, kind, subject, predicate, object, importance, created_at } = details.remove(&r.id)?;
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
                    ranks: r.ranks,
                })
            })
            .collect())
    })
}

/// The approximate path of a large user: the model's HNSW index gives the
/// `agent_memory.approximate_candidates` most similar memories (iterative scan, so the user
/// filter is applied while the index is walked), which are then ranked like the exact path's.
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
    ranker: &mut VectorRanker,
    min_similarity: f64,
    now: i64,
) -> Result<()> {
    let n = gucs::approximate_candidates();
    let vs = pgrx::spi::quote_identifier(vector_schema);
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
    client.select(set, None, &["relaxed_order".into(), n.clamp(40, 1000).to_string().into()]).map_err(spi("setting pgvector's search"))?;
    let sql = format!(
        "SELECT m.id, m.importance, CASE WHEN m.kind = 'procedural' THEN now() ELSE m.last_hit_at END, m.kind = 'episodic', m.emb, m.created_at, m.emb_windows \
           FROM agent_memory.memories m \
          WHERE m.user_id = $1 AND m.embedding_model = $2 AND m.active \
            AND (m.expires_at IS NULL OR m.expires_at > now()) AND (m.valid_until IS NULL OR m.valid_until > now()) \
            AND ($3::text[] IS NULL OR m.kind = ANY ($3::text[])) AND ($6 OR m.archived_at IS NULL) \
          ORDER BY m.emb::{vs}.vector({dims}) OPERATOR({vs}.<=>) $4::{vs}.vector({dims}) LIMIT $5"
    );
    let sql = crate::placement::tables_of_user(user)?.sql_owned(&sql);
    let qd = crate::vector::vector_param(q)?;
    let mut scratch = Vec::new();
    {
        let mut table = client
            .select(sql.as_str(), None, &[user.into(), model.into(), kinds.clone().into(), qd, n.into(), include_archived.into()])
            .map_err(spi("reading the index's candidates"))?;
        while table.next().is_some() {
            let id: i64 = table.get(1).map_err(spi("reading id"))?.ok_or_else(|| MemoryError::not_null_column("id"))?;
            let importance: f32 =
                table.get(2).map_err(spi("reading importance"))?.ok_or_else(|| MemoryError::not_null_column("importance"))?;
            let last_hit: TimestampWithTimeZone =
                table.get(3).map_err(spi("reading last_hit_at"))?.ok_or_else(|| MemoryError::not_null_column("last_hit_at"))?;
            let episodic: bool = table.get(4).map_err(spi("reading kind"))?.ok_or_else(|| MemoryError::not_null_column("kind"))?;
            let created: TimestampWithTimeZone =
                table.get(6).map_err(spi("reading created_at"))?.ok_or_else(|| MemoryError::not_null_column("created_at"))?;
            // A memory not yet embedded is no candidate of the vector channel.
            let Some(emb) = crate::vector::vector_column(&table, 5)? else {
                continue;
            };
            // The index finds a memory by its own embedding; its windows count in its score.
            let windows = crate::vector::best_in_array_column(&table, 7, q, &mut scratch, |d| dimension_mismatch(q.len(), model, d))?;
            emb.with_f32(&mut scratch, |x| {
                let own = vecmath::cosine_with_unit(q, x);
                let similarity = windows.map_or(own, |w| w.max(own));
                if similarity >= min_similarity {
                    let age = agent_memory_core::decay::age_hours(now, last_hit.into_inner());
                    ranker.offer(id, similarity, age, importance as f64, episodic, created.into_inner(), x);
                }
            });
        }
    }
    let (it, ef) = saved;
    client
        .select(set, None, &[it.unwrap_or_else(|| "off".into()).into(), ef.unwrap_or_else(|| "40".into()).into()])
        .map_err(spi("restoring pgvector's settings"))?;
    Ok(())
}
