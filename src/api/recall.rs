//! `agent_memory.memory_recall(user_id, query, k, ...)`: the SQL forms of recall (a `vector`, a
//! `halfvec`, or a question as text), glue over [`crate::recall`], where the pipeline is.

use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;

use crate::error::OrRaise;
use crate::recall::{recall, window_of, RecallOptions};
use crate::vector::{HalfVec, Vector};

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
            archived: default!(Option<bool>, true),
            query_text: default!(Option<&str>, "NULL"),
            task_id: default!(Option<&str>, "NULL"),
            untasked: default!(Option<bool>, true),
            since: default!(Option<TimestampWithTimeZone>, "NULL"),
            until: default!(Option<TimestampWithTimeZone>, "NULL"),
            as_of: default!(Option<TimestampWithTimeZone>, "NULL"),
        ) -> TableIterator<
            'static,
            (
                name!(id, i64),
                name!(content, String),
                name!(score, f64),
                name!(similarity, Option<f64>),
                name!(kind, String),
                name!(subject, Option<String>),
                name!(predicate, Option<String>),
                name!(object, Option<String>),
                name!(importance, f32),
                name!(created_at, Option<TimestampWithTimeZone>),
                name!(path, String),
                name!(vector_rank, Option<i32>),
                name!(keyword_rank, Option<i32>),
                name!(recency_rank, Option<i32>),
            ),
        > {
            let query = query.map(|q| crate::embedder::QueryInput::resolve(q, model, user_id).or_raise());
            // A question given as text is embedded with the text model, and its words rank too.
            let model = query.as_ref().and_then(|q| q.model.as_deref()).or(model);
            let query_text = query_text.or(query.as_ref().and_then(|q| q.text.as_deref()));
            let window = window_of(since, until, as_of).or_raise();
            let opts = RecallOptions { k, model, kinds, min_similarity, decay, touch, archived, query_text, task_id, untasked, window };
            let rows = recall(user_id, query.as_ref().map(|q| &q.vector), opts).or_raise();
            TableIterator::new(rows.into_iter().map(|r| {
                let [v, w, t] = r.ranks;
                (r.id, r.content, r.score, r.similarity, r.kind, r.subject, r.predicate, r.object, r.importance, r.created_at, r.path.to_string(), v, w, t)
            }))
        }
    };
}

memory_recall_for!(
    /// The `k` best memories of `user_id` for `query`, best first: score = cosine similarity ×
    /// decay(time since last recalled) × importance factor. Exact: every active, unexpired memory
    /// of the user and the query's embedding model is scored. `touch => false` leaves `last_hit_at`
    /// and `hit_count` alone (for exports and scans); `decay => 'none'` ranks by similarity alone;
    /// `archived => true` includes memories consolidation archived. `since` and `until` keep the
    /// memories said in `[since, until)` (`created_at`); `as_of` ranks the facts that held at
    /// that moment, superseded versions included while they were current (and records no hits).
    recall_by_vector,
    Vector
);

memory_recall_for!(
    /// `memory_recall` for a `halfvec` query.
    recall_by_halfvec,
    HalfVec
);

memory_recall_for!(
    /// `memory_recall` for a question as text: the server embeds it (`model`, else
    /// `agent_memory.text_model`, all-MiniLM-L6-v2) and ranks its words too (hybrid recall), so
    /// `memory_recall('user-07', 'what editor do I use?', 3)` needs no vector. Text in pgvector's
    /// syntax (`'[0.1, 0.2, ...]'`) is a vector, as before. PostgreSQL resolves an untyped literal
    /// or parameter to this form.
    recall_by_text,
    &str
);
