//! `memory_context(user_id, session_id, query, query_text, token_budget, system_tokens, ...)`: the
//! prompt's memory in one call, and `memory_context_text(...)`, the same as one text block.
//!
//! Channels, in prompt order: standing instructions (`procedural` memories), the working memory
//! (the session's last turns, oldest first) and the long-term memories (recall's ranking, best
//! first, without what the working memory already holds). The system prompt's share is reserved
//! first; the rest is packed by `agent_memory_core::context::pack`: nothing is cut mid-sentence,
//! and the sum of the rows' tokens never exceeds `token_budget - system_tokens`.

use std::cell::RefCell;
use std::collections::HashMap;

use agent_memory_core::context::{pack, Item, Tokenizer};
use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;

use crate::error::{spi, MemoryError, OrRaise, Result};
use crate::gucs;
use crate::recall::{check_user, in_lineage, lineage, recall, window_of, RecallOptions};
use crate::vector::{HalfVec, Vector, VectorDatum};
use agent_memory_core::window::Window;

const PROCEDURAL: &str = "\
SELECT m.id, m.content, m.created_at, m.task_id FROM agent_memory.memories m \
 WHERE m.user_id = $1 AND m.active AND m.kind = 'procedural' \
   AND (m.valid_until IS NULL OR m.valid_until > now()) \
 ORDER BY m.importance DESC, m.created_at, m.id LIMIT 1000";

const WORKING: &str = "\
SELECT t.id, t.role, t.content, t.created_at FROM agent_memory.turns t \
 WHERE t.user_id = $1 AND t.session_id = $2 \
   AND ($4::text[] IS NULL OR t.task_id = ANY ($4::text[]) OR ($5 AND t.task_id IS NULL)) \
 ORDER BY t.created_at DESC, t.id DESC LIMIT $3";

const SOURCES: &str = "SELECT m.id, m.source_turn_id FROM agent_memory.memories m WHERE m.user_id = $2 AND m.id = ANY ($1)";

const TOUCH: &str = "\
WITH locked AS (SELECT id FROM agent_memory.memories WHERE user_id = $2 AND id = ANY ($1) ORDER BY id FOR NO KEY UPDATE) \
UPDATE agent_memory.memories m SET last_hit_at = now(), hit_count = m.hit_count + 1 FROM locked WHERE m.user_id = $2 AND m.id = locked.id";

/// Token counts of texts already seen by this backend, per tokenizer: counted once, not per call.
const CACHE_LIMIT: usize = 100_000;
thread_local! {
    static COUNTS: RefCell<HashMap<(u8, u64), u32>> = RefCell::new(HashMap::new());
}

/// Tokens of `text`, or a number above `cap` once counting passed it (a text longer than the
/// whole budget is left out, so it is never counted to its end).
fn tokens(tokenizer: Tokenizer, text: &str, cap: usize) -> usize {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    let key = (tokenizer as u8, h.finish());
    if let Some(n) = COUNTS.with(|c| c.borrow().get(&key).copied()) {
        return n as usize;
    }
    let (n, exact) = tokenizer.count_up_to(text, cap);
    if !exact {
        return n;
    }
    COUNTS.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= CACHE_LIMIT {
            c.clear();
        }
        c.insert(key, n.min(u32::MAX as usize) as u32);
    });
    n
}

/// One row of the context.
pub struct ContextRow {
    pub channel: &'static str,
    pub memory_id: Option<i64>,
    pub turn_id: Option<i64>,
    pub role: Option<String>,
    pub content: String,
    pub tokens: i32,
    pub score: Option<f64>,
    pub created_at: Option<TimestampWithTimeZone>,
}

/// What a call asks for.
pub struct ContextArgs<'a> {
    pub query_text: Option<&'a str>,
    pub token_budget: Option<i32>,
    pub system_tokens: Option<i32>,
    pub turns: Option<i32>,
    pub k: Option<i32>,
    pub model: Option<&'a str>,
    pub task_id: Option<&'a str>,
    pub untasked: Option<bool>,
    pub touch: Option<bool>,
    /// Bounds in time on the long-term memories (`since`, `until`, `as_of`).
    pub window: Window,
}

/// Assembles the context; returns its rows in prompt order and how many items were left out.
pub fn context(
    user_id: Option<&str>,
    session_id: Option<&str>,
    query: Option<&VectorDatum>,
    a: ContextArgs<'_>,
) -> Result<(Vec<ContextRow>, usize)> {
    let user = check_user(user_id)?;
    let session = session_id
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| MemoryError::null_value("session_id must not be NULL or empty").hint("Pass the id of the conversation."))?;
    let budget =
        a.token_budget.ok_or_else(|| MemoryError::null_value("token_budget must not be NULL").hint("Pass the prompt's token budget."))?;
    let system = a.system_tokens.unwrap_or(0);
    if budget < 1 || system < 0 {
        return Err(MemoryError::invalid_parameter(format!(
            "token_budget must be at least 1 and system_tokens at least 0, not {budget} and {system}"
        ))
        .hint("Pass the prompt's whole budget and the share the system prompt takes."));
    }
    if system > budget {
        return Err(MemoryError::invalid_parameter(format!(
            "the system prompt's reservation ({system} tokens) does not fit in the budget ({budget} tokens)"
        ))
        .detail("The reservation is taken before anything else, and is never squeezed.")
        .hint("Raise token_budget or lower system_tokens."));
    }
    let turns = a.turns.unwrap_or(8);
    if !(0..=1000).contains(&turns) {
        return Err(MemoryError::invalid_parameter(format!("turns must be between 0 and 1000, not {turns}"))
            .hint("Pass how many recent turns to include."));
    }
    let k = a.k.unwrap_or(10);
    if !(0..=gucs::max_k()).contains(&k) {
        return Err(MemoryError::invalid_parameter(format!("k must be between 0 and {}, not {k}", gucs::max_k()))
            .hint("Pass how many long-term memories to consider."));
    }
    let untasked = a.untasked.unwrap_or(true);
    // Hits are recorded for the worker to fold when it runs in this database (api::hits),
    // otherwise the rows are touched here.
    // A look back at an earlier moment (as_of) records no hits, as in recall.
    let touch_asked = a.touch.unwrap_or(true) && a.window.as_of.is_none();
    let deferred = touch_asked && crate::share::hits_deferred();
    let touch = touch_asked && !deferred && !crate::pg::read_only();
    let tokenizer = gucs::tokenizer_kind();
    let text = a.query_text.map(str::trim).filter(|t| !t.is_empty());

    let (procedural, working) = Spi::connect_mut(|client| -> Result<_> {
        crate::version::require_current_schema(client)?;
        let lineage_set = match a.task_id {
            Some(t) => Some(lineage(client, user, t)?),
            None => None,
        };
        let mut procedural = Vec::new();
        for r in crate::plans::read(client, crate::placement::sql_for(user, PROCEDURAL)?, &[user.into()])
            .map_err(spi("reading standing instructions"))?
        {
            let e = spi("reading a standing instruction");
            let task: Option<String> = r.get(4).map_err(&e)?;
            if !in_lineage(&lineage_set, untasked, task.as_deref()) {
                continue;
            }
            procedural.push(ContextRow {
                channel: "procedural",
                memory_id: r.get(1).map_err(&e)?,
                turn_id: None,
                role: None,
                content: r.get::<String>(2).map_err(&e)?.unwrap_or_default(),
                tokens: 0,
                score: None,
                created_at: r.get(3).map_err(&e)?,
            });
        }
        let lineage_arg: Option<Vec<Option<String>>> = lineage_set.as_ref().map(|s| s.iter().cloned().map(Some).collect());
        let mut working = Vec::new();
        if turns > 0 {
            let table = crate::plans::read(
                client,
                crate::placement::sql_for(user, WORKING)?,
                &[user.into(), session.into(), (turns as i64).into(), lineage_arg.into(), untasked.into()],
            )
            .map_err(spi("reading the session's turns"))?;
            for r in table {
                let e = spi("reading a turn");
                working.push(ContextRow {
                    channel: "working",
                    memory_id: None,
                    turn_id: r.get(1).map_err(&e)?,
                    role: r.get(2).map_err(&e)?,
                    content: r.get::<String>(3).map_err(&e)?.unwrap_or_default(),
                    tokens: 0,
                    score: None,
                    created_at: r.get(4).map_err(&e)?,
                });
            }
            working.reverse(); // oldest first
        }
        Ok((procedural, working))
    })?;

    // Long-term: recall's ranking (hybrid with query_text), standing instructions excluded (they
    // are in already), and nothing the working memory holds.
    let mut long_term = Vec::new();
    if k > 0 && (query.is_some() || text.is_some()) {
        // Over-fetch by the turns in the working memory, so that skipping repeats still leaves k.
        let fetch = (k as usize + working.len()).min(gucs::max_k() as usize) as i32;
        let opts = RecallOptions {
            k: Some(fetch),
            model: a.model,
            kinds: Some(vec![Some("semantic".into()), Some("episodic".into())]),
            min_similarity: None,
            decay: None,
            touch: Some(false),
            archived: Some(true),
            query_text: text,
            task_id: a.task_id,
            untasked: Some(untasked),
            window: a.window,
        };
        let recalled = recall(Some(user), query, opts)?;
        let ids: Vec<i64> = recalled.iter().map(|r| r.id).collect();
        let sources: HashMap<i64, Option<i64>> = Spi::connect_mut(|client| -> Result<_> {
            let mut m = HashMap::new();
            for r in crate::plans::read(client, crate::placement::sql_for(user, SOURCES)?, &[ids.into(), user.into()])
                .map_err(spi("reading the memories' sources"))?
            {
                let id: Option<i64> = r.get(1).map_err(spi("reading id"))?;
                if let Some(id) = id {
                    m.insert(id, r.get(2).map_err(spi("reading source_turn_id"))?);
                }
            }
            Ok(m)
        })?;
        let in_working: std::collections::HashSet<i64> = working.iter().filter_map(|w| w.turn_id).collect();
        let texts: std::collections::HashSet<&str> = working.iter().map(|w| w.content.trim()).collect();
        for r in recalled {
            let from_working = sources.get(&r.id).copied().flatten().is_some_and(|t| in_working.contains(&t));
            if from_working || texts.contains(r.content.trim()) {
                continue;
            }
            if long_term.len() == k as usize {
                break;
            }
            long_term.push(ContextRow {
                channel: "long_term",
                memory_id: Some(r.id),
                turn_id: None,
                role: None,
                content: r.content,
                tokens: 0,
                score: Some(r.score),
                created_at: r.created_at,
            });
        }
    }

    let count = |rows: &mut Vec<ContextRow>| -> Vec<Item> {
        rows.iter_mut()
            .map(|r| {
                let n = tokens(tokenizer, &r.content, (budget - system) as usize);
                r.tokens = n.min(i32::MAX as usize) as i32;
                Item { tokens: n }
            })
            .collect()
    };
    let mut procedural = procedural;
    let mut working = working;
    let (pi, wi, li) = (count(&mut procedural), count(&mut working), count(&mut long_term));
    let packed = pack((budget - system) as usize, &pi, &wi, &li);
    let take = |rows: Vec<ContextRow>, keep: &[usize]| -> Vec<ContextRow> {
        let keep: std::collections::HashSet<usize> = keep.iter().copied().collect();
        rows.into_iter().enumerate().filter(|(i, _)| keep.contains(i)).map(|(_, r)| r).collect()
    };
    let mut out = take(procedural, &packed.procedural);
    out.extend(take(working, &packed.working));
    let long_term = take(long_term, &packed.long_term);
    if deferred {
        let ids: Vec<i64> = out.iter().chain(long_term.iter()).filter_map(|r| r.memory_id).collect();
        crate::share::record_hits(crate::scan::memories_oid(user)?, &ids, crate::pg::transaction_start(), user);
    } else if touch {
        let ids: Vec<i64> = out.iter().chain(long_term.iter()).filter_map(|r| r.memory_id).collect();
        if !ids.is_empty() {
            Spi::connect_mut(|client| {
                crate::placement::hold_user(client, user)?;
                crate::plans::write(client, crate::placement::sql_for(user, TOUCH)?, &[ids.into(), user.into()])
                    .map(|_| ())
                    .map_err(spi("refreshing the memories"))
            })?;
        }
    }
    out.extend(long_term);
    Ok((out, packed.left_out))
}

fn notice_left_out(n: usize) {
    if n > 0 {
        notice!("memory_context left out {n} memories or turns that did not fit in the token budget");
    }
}

/// The context as one text block: standing instructions, what is known about the user, and the
/// recent conversation, each line with its date.
pub fn render(rows: &[ContextRow]) -> String {
    let date =
        |t: &Option<TimestampWithTimeZone>| -> String { t.map(|t| t.to_iso_string().chars().take(10).collect()).unwrap_or_default() };
    let mut out = String::new();
    for (title, channel) in
        [("Standing instructions", "procedural"), ("What is known about the user", "long_term"), ("Recent conversation", "working")]
    {
        let lines: Vec<String> = rows
            .iter()
            .filter(|r| r.channel == channel)
            .map(|r| match &r.role {
                Some(role) => format!("- [{}] {role}: {}", date(&r.created_at), r.content),
                None => format!("- [{}] {}", date(&r.created_at), r.content),
            })
            .collect();
        if lines.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!("## {title}\n{}\n", lines.join("\n")));
    }
    out
}

/// A row as SQL sees it: position, channel, memory_id, turn_id, role, content, tokens, score,
/// created_at.
type Row = (i32, String, Option<i64>, Option<i64>, Option<String>, String, i32, Option<f64>, Option<TimestampWithTimeZone>);

fn rows_of(rows: Vec<ContextRow>) -> Vec<Row> {
    rows.into_iter()
        .enumerate()
        .map(|(i, r)| (i as i32 + 1, r.channel.to_string(), r.memory_id, r.turn_id, r.role, r.content, r.tokens, r.score, r.created_at))
        .collect()
}

/// Defines the overloads of `memory_context` and `memory_context_text` for a query type.
macro_rules! memory_context_for {
    ($(#[$doc:meta])* $rows:ident, $text:ident, $query:ty) => {
        $(#[$doc])*
        #[allow(clippy::too_many_arguments)]
        #[pg_extern(volatile, parallel_unsafe, name = "memory_context")]
        #[search_path(pg_catalog, pg_temp)]
        fn $rows(
            user_id: Option<&str>,
            session_id: Option<&str>,
            query: Option<$query>,
            query_text: default!(Option<&str>, "NULL"),
            token_budget: default!(Option<i32>, 2000),
            system_tokens: default!(Option<i32>, 0),
            turns: default!(Option<i32>, 8),
            k: default!(Option<i32>, 10),
            model: default!(Option<&str>, "NULL"),
            task_id: default!(Option<&str>, "NULL"),
            untasked: default!(Option<bool>, true),
            touch: default!(Option<bool>, true),
            since: default!(Option<TimestampWithTimeZone>, "NULL"),
            until: default!(Option<TimestampWithTimeZone>, "NULL"),
            as_of: default!(Option<TimestampWithTimeZone>, "NULL"),
        ) -> TableIterator<
            'static,
            (
                name!(position, i32),
                name!(channel, String),
                name!(memory_id, Option<i64>),
                name!(turn_id, Option<i64>),
                name!(role, Option<String>),
                name!(content, String),
                name!(tokens, i32),
                name!(score, Option<f64>),
                name!(created_at, Option<TimestampWithTimeZone>),
            ),
        > {
            let query = query.map(|q| crate::embedder::QueryInput::resolve(q, model, user_id).or_raise());
            let model = query.as_ref().and_then(|q| q.model.as_deref()).or(model);
            let query_text = query_text.or(query.as_ref().and_then(|q| q.text.as_deref()));
            let window = window_of(since, until, as_of).or_raise();
            let args = ContextArgs { query_text, token_budget, system_tokens, turns, k, model, task_id, untasked, touch, window };
            let (rows, left_out) = context(user_id, session_id, query.as_ref().map(|q| &q.vector), args).or_raise();
            notice_left_out(left_out);
            TableIterator::new(rows_of(rows))
        }

        /// `memory_context` as one text block: a section of standing instructions, one of what is
        /// known about the user and one of the recent conversation, each line with its date.
        #[allow(clippy::too_many_arguments)]
        #[pg_extern(volatile, parallel_unsafe, name = "memory_context_text")]
        #[search_path(pg_catalog, pg_temp)]
        fn $text(
            user_id: Option<&str>,
            session_id: Option<&str>,
            query: Option<$query>,
            query_text: default!(Option<&str>, "NULL"),
            token_budget: default!(Option<i32>, 2000),
            system_tokens: default!(Option<i32>, 0),
            turns: default!(Option<i32>, 8),
            k: default!(Option<i32>, 10),
            model: default!(Option<&str>, "NULL"),
            task_id: default!(Option<&str>, "NULL"),
            untasked: default!(Option<bool>, true),
            touch: default!(Option<bool>, true),
            since: default!(Option<TimestampWithTimeZone>, "NULL"),
            until: default!(Option<TimestampWithTimeZone>, "NULL"),
            as_of: default!(Option<TimestampWithTimeZone>, "NULL"),
        ) -> String {
            let query = query.map(|q| crate::embedder::QueryInput::resolve(q, model, user_id).or_raise());
            let model = query.as_ref().and_then(|q| q.model.as_deref()).or(model);
            let query_text = query_text.or(query.as_ref().and_then(|q| q.text.as_deref()));
            let window = window_of(since, until, as_of).or_raise();
            let args = ContextArgs { query_text, token_budget, system_tokens, turns, k, model, task_id, untasked, touch, window };
            let (rows, left_out) = context(user_id, session_id, query.as_ref().map(|q| &q.vector), args).or_raise();
            notice_left_out(left_out);
            render(&rows)
        }
    };
}

memory_context_for!(
    /// The prompt's memory of `user_id` in session `session_id`, in prompt order: standing
    /// instructions (procedural memories), the session's last `turns` turns (oldest first), and
    /// the `k` best long-term memories for the question (hybrid with `query_text`), without what
    /// the turns already hold. The rows' tokens (`agent_memory.tokenizer`) never add up to more
    /// than `token_budget - system_tokens`; an item that does not fit is left out whole (a notice
    /// says how many), and smaller ones after it may still fit.
    context_by_vector,
    context_text_by_vector,
    Vector
);

memory_context_for!(
    /// `memory_context` for a `halfvec` query.
    context_by_halfvec,
    context_text_by_halfvec,
    HalfVec
);

memory_context_for!(
    /// `memory_context` for a question as text, embedded by the server (as `memory_recall`'s
    /// text form), or a query in pgvector's text syntax (`'[0.1, 0.2, ...]'`).
    context_by_text,
    context_text_by_text,
    &str
);
