//! Recall benchmark: memory_recall (A) against the reference SQL (B), the plain filtered HNSW
//! query (C, iterative scan off and on) and an exact ranking computed in the client (D, the
//! ground truth), on the same generated data in the same run. Prints p50 / p95 latency, rows
//! returned and recall@k per method, and writes the table. Run through `bench/run.sh recall`.
//!
//! Sizes can be scaled down for a quick look with BENCH_SCALE (default 1.0).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use agent_memory_bench::{centers, clustered, percentile_ms, table};
use agent_memory_tests::{connect, fresh_db, Rng};
use pgvector::Vector;
use postgres::binary_copy::BinaryCopyInWriter;
use postgres::types::Type;
use postgres::Client;

const K: i64 = 10;

struct Set {
    db: &'static str,
    model: &'static str,
    dims: usize,
    /// (user prefix, users, memories per user)
    users: Vec<(String, usize, usize)>,
    hnsw: bool,
}

fn scaled(n: usize) -> usize {
    let s: f64 = std::env::var("BENCH_SCALE").ok().and_then(|v| v.parse().ok()).unwrap_or(1.0);
    ((n as f64 * s).round() as usize).max(1)
}

/// Words the generated memories are made of.
const WORDS: &[&str] = &[
    "asked",
    "about",
    "refund",
    "order",
    "parcel",
    "delivery",
    "address",
    "prefers",
    "tea",
    "coffee",
    "morning",
    "editor",
    "neovim",
    "meeting",
    "tuesday",
    "flight",
    "hotel",
    "conference",
    "talk",
    "daughter",
    "school",
    "painting",
    "sunset",
    "hiking",
    "weekend",
    "invoice",
    "payment",
    "password",
    "reset",
    "account",
    "language",
    "answers",
    "short",
    "music",
    "guitar",
    "lessons",
    "birthday",
    "party",
    "friends",
    "garden",
    "tomatoes",
    "recipe",
    "dinner",
    "train",
    "ticket",
];

/// A memory of about 120 characters (the length of a real one), so that the keyword channel
/// tokenises what it would in production.
fn sentence(rng: &mut Rng, i: usize) -> String {
    let mut out = format!("Memory {i}:");
    while out.len() < 120 {
        out.push(' ');
        out.push_str(WORDS[(rng.next_u64() % WORDS.len() as u64) as usize]);
    }
    out
}

/// The layout of the loaded rows (BENCH_LAYOUT): `interleaved` (default) or `by_user`.
fn layout() -> String {
    std::env::var("BENCH_LAYOUT").unwrap_or_else(|_| "interleaved".into())
}

/// Loads a data set by binary COPY; returns the load time.
fn load(c: &mut Client, set: &Set, seed: u64) -> Duration {
    let vtype: Type = c.prepare("SELECT $1::vector").unwrap().params()[0].clone();
    let mut rng = Rng(seed);
    let cs = centers(&mut rng, 200, set.dims);
    let t = Instant::now();
    let sink = c
        .copy_in("COPY agent_memory.memories (user_id, kind, content, emb, embedding_model, importance, last_hit_at) FROM STDIN BINARY")
        .unwrap();
    let types = [Type::TEXT, Type::TEXT, Type::TEXT, vtype, Type::TEXT, Type::FLOAT4, Type::TIMESTAMPTZ];
    let mut w = BinaryCopyInWriter::new(sink, &types);
    let now = std::time::SystemTime::now();
    // The order rows are written in: interleaved (the default), as concurrent traffic of many
    // users writes them, so that one user's rows are spread over the table; or user by user
    // (BENCH_LAYOUT=by_user), the best case, where a user's rows sit together.
    let by_user = layout() == "by_user";
    let mut order: Vec<(String, usize)> = Vec::new();
    let longest = set.users.iter().map(|u| u.2).max().unwrap_or(0);
    if by_user {
        for (prefix, users, per_user) in &set.users {
            for u in 0..*users {
                order.extend((0..*per_user).map(|i| (format!("{prefix}{u:04}"), i)));
            }
        }
    } else {
        for i in 0..longest {
            for (prefix, users, per_user) in &set.users {
                if i < *per_user {
                    order.extend((0..*users).map(|u| (format!("{prefix}{u:04}"), i)));
                }
            }
        }
    }
    for (user, i) in order {
        let emb = Vector::from(clustered(&mut rng, &cs, 0.8));
        let importance = (rng.next_u64() % 101) as f32 / 100.0;
        let age = Duration::from_secs(rng.next_u64() % (90 * 24 * 3600));
        let kind = if i % 3 == 0 { "episodic" } else { "semantic" };
        let content = sentence(&mut rng, i);
        w.write(&[&user, &kind, &content, &emb, &set.model, &importance, &(now - age)]).unwrap();
    }
    w.finish().unwrap();
    // As autovacuum leaves a table after a bulk load: statistics, and the visibility map set.
    c.batch_execute("VACUUM ANALYZE agent_memory.memories").unwrap();
    t.elapsed()
}

/// The exact top k by the reference score, computed here from the raw rows (the ground truth).
fn ground_truth(c: &mut Client, user: &str, model: &str, q: &[f32]) -> (Vec<i64>, usize) {
    let rows = c
        .query(
            "SELECT id, emb, importance, extract(epoch FROM now() - last_hit_at)::float8 / 3600, kind = 'episodic' \
               FROM agent_memory.memories WHERE user_id = $1 AND embedding_model = $2 AND active",
            &[&user, &model],
        )
        .unwrap();
    let qn: f64 = q.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    let mut scored: Vec<(f64, i64)> = rows
        .iter()
        .map(|r| {
            let emb: Vector = r.get(1);
            let e = emb.as_slice();
            let dot: f64 = e.iter().zip(q).map(|(a, b)| *a as f64 * *b as f64).sum();
            let en: f64 = e.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
            let sim = dot / (qn * en);
            let importance: f32 = r.get(2);
            let hours: f64 = r.get(3);
            let floor = if r.get::<_, bool>(4) { 0.4 } else { 0.0 };
            let decay = floor + (1.0 - floor) * 0.995f64.powf(hours.max(0.0));
            (sim * decay * (0.8 + 0.4 * importance as f64), r.get(0))
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
    (scored.iter().take(K as usize).map(|s| s.1).collect(), rows.len())
}

struct Measured {
    lat: Vec<Duration>,
    rows: Vec<usize>,
    recall: Vec<f64>,
}

fn measure(c: &mut Client, sql: &str, setup: &str, queries: &[(String, Vec<f32>, Vec<i64>)], reps: usize) -> Measured {
    c.batch_execute(setup).unwrap();
    let m = measure_alternated(c, &[sql], queries, reps).pop().unwrap();
    c.batch_execute("RESET ALL").unwrap();
    m
}

/// Measures statements over the same queries, taking them in turn for each query: a burst of
/// background work on the machine (a checkpoint, an autovacuum) falls on all of them alike, so
/// their ratio holds even when their absolute times move. Which statement goes first rotates
/// from one query to the next: the one that follows another on the same user finds that user's
/// pages in the processor's caches, and each statement gets that turn equally often.
fn measure_alternated(c: &mut Client, sqls: &[&str], queries: &[(String, Vec<f32>, Vec<i64>)], reps: usize) -> Vec<Measured> {
    let stmts: Vec<_> = sqls.iter().map(|sql| c.prepare(sql).unwrap()).collect();
    let mut ms: Vec<Measured> = sqls.iter().map(|_| Measured { lat: Vec::new(), rows: Vec::new(), recall: Vec::new() }).collect();
    // One warm-up pass, then `reps` timed passes over the queries.
    let n = stmts.len();
    for pass in 0..=reps {
        for (i, (user, q, truth)) in queries.iter().enumerate() {
            let v = Vector::from(q.clone());
            for j in 0..n {
                let which = (i + pass + j) % n;
                let (stmt, m) = (&stmts[which], &mut ms[which]);
                let t = Instant::now();
                let rows = c.query(stmt, &[user, &v]).unwrap();
                let e = t.elapsed();
                if pass > 0 {
                    m.lat.push(e);
                    let got: HashSet<i64> = rows.iter().map(|r| r.get(0)).collect();
                    m.rows.push(got.len());
                    let hit = truth.iter().filter(|id| got.contains(id)).count();
                    m.recall.push(if truth.is_empty() { 1.0 } else { hit as f64 / truth.len() as f64 });
                }
            }
        }
    }
    for m in &mut ms {
        m.lat.sort();
    }
    ms
}

/// What the autovacuum workers of the cluster are doing now (their database and query).
fn autovacuums(c: &mut Client) -> Vec<String> {
    c.query(
        "SELECT coalesce(datname, '') || ': ' || left(query, 80) FROM pg_stat_activity \
          WHERE backend_type = 'autovacuum worker' AND state <> 'idle'",
        &[],
    )
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

/// Queries per second with `clients` connections, each running every query `reps` times.
fn throughput(db: &str, sql: &str, queries: &[(String, Vec<f32>, Vec<i64>)], clients: usize, reps: usize) -> f64 {
    let t = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..clients {
            scope.spawn(|| {
                let mut c = connect(db);
                let stmt = c.prepare(sql).unwrap();
                for _ in 0..reps {
                    for (user, q, _) in queries {
                        c.query(&stmt, &[user, &Vector::from(q.clone())]).unwrap();
                    }
                }
            });
        }
    });
    (clients * reps * queries.len()) as f64 / t.elapsed().as_secs_f64()
}

fn row(scenario: &str, method: &str, m: &Measured) -> Vec<String> {
    let min_rows = m.rows.iter().min().copied().unwrap_or(0);
    let mean_rows = m.rows.iter().sum::<usize>() as f64 / m.rows.len().max(1) as f64;
    let recall = m.recall.iter().sum::<f64>() / m.recall.len().max(1) as f64;
    vec![
        scenario.into(),
        method.into(),
        format!("{:.3}", percentile_ms(&m.lat, 0.5)),
        format!("{:.3}", percentile_ms(&m.lat, 0.95)),
        format!("{mean_rows:.1} (min {min_rows})"),
        format!("{recall:.3}"),
    ]
}

fn main() {
    let sets = [
        Set { db: "am_bench_recall_50k", model: "m512", dims: 512, users: vec![("u".into(), scaled(50), 1000)], hnsw: true },
        Set { db: "am_bench_recall_400k", model: "m512", dims: 512, users: vec![("u".into(), scaled(400), 1000)], hnsw: false },
        Set { db: "am_bench_recall_1m", model: "m512", dims: 512, users: vec![("u".into(), scaled(1000), 1000)], hnsw: false },
        Set { db: "am_bench_recall_1m_384", model: "m384", dims: 384, users: vec![("v".into(), scaled(1000), 1000)], hnsw: false },
        Set {
            db: "am_bench_recall_large",
            model: "m512",
            dims: 512,
            users: vec![("big20k-".into(), 1, scaled(20_000)), ("big100k-".into(), 1, scaled(100_000))],
            hnsw: true,
        },
    ];
    let mut rows = Vec::new();
    let mut tput = Vec::new();
    let mut notes = Vec::new();
    // BENCH_SETS=large (a substring of the database names) runs a subset, for a quick look.
    let only = std::env::var("BENCH_SETS").unwrap_or_default();
    for (si, set) in sets.iter().enumerate() {
        if !set.db.contains(only.as_str()) {
            continue;
        }
        let mut c = fresh_db(set.db);
        let loaded = load(&mut c, set, 100 + si as u64);
        let total: usize = set.users.iter().map(|u| u.1 * u.2).sum();
        notes.push(format!(
            "- `{}`: {total} memories at {} dimensions loaded by COPY in {:.1} s, {} layout",
            set.db,
            set.dims,
            loaded.as_secs_f64(),
            layout()
        ));
        if set.hnsw {
            let t = Instant::now();
            c.batch_execute("SET maintenance_work_mem = '2GB'").unwrap();
            c.query_one("SELECT agent_memory.memory_create_index($1)", &[&set.model]).unwrap();
            notes.push(format!("  (HNSW index for the model built in {:.1} s)", t.elapsed().as_secs_f64()));
        }
        // The packs the background worker builds for users above pack_min_memories, built here at
        // once (recall is measured with them, and without them in the same run).
        let t = Instant::now();
        let packed: i64 = c
            .query_one(
                "SELECT coalesce(sum(agent_memory.memory_pack(u)), 0)::bigint FROM (SELECT DISTINCT user_id AS u FROM agent_memory.memories) s",
                &[],
            )
            .unwrap()
            .get(0);
        notes.push(format!(
            "  (packs for {packed} memories built in {:.1} s: {:.0} memories/s)",
            t.elapsed().as_secs_f64(),
            packed as f64 / t.elapsed().as_secs_f64()
        ));
        c.batch_execute("VACUUM ANALYZE agent_memory.memory_packs").unwrap();
        // Queries: for each scenario, users and query vectors near the data's clusters.
        let mut rng = Rng(900 + si as u64);
        let cs = centers(&mut Rng(100 + si as u64), 200, set.dims);
        let mut scenarios: Vec<(String, Vec<String>)> = Vec::new();
        for (prefix, users, per_user) in &set.users {
            let picked: Vec<String> = (0..(*users).min(20)).map(|i| format!("{prefix}{:04}", (i * 7919) % users)).collect();
            scenarios.push((format!("{} × {per_user} rows/user, {} dims ({}, {})", users, set.dims, set.db, layout()), picked));
        }
        for (name, users) in scenarios {
            let queries: Vec<(String, Vec<f32>, Vec<i64>)> = users
                .iter()
                .flat_map(|u| (0..5).map(move |_| u.clone()))
                .map(|u| {
                    let q = clustered(&mut rng, &cs, 0.8);
                    let (truth, _) = ground_truth(&mut c, &u, set.model, &q);
                    (u, q, truth)
                })
                .collect();
            let reps = if queries.len() >= 50 { 2 } else { 10 };
            let recall_sql =
                format!("SELECT id FROM agent_memory.memory_recall($1, $2::vector, {K}, model => '{}', touch => false)", set.model);
            // (A) ranks by the brief's reference score (every memory decays), as (B) and the
            // ground truth do; the default ranking and hybrid recall are measured beside it.
            let vacuums_before = autovacuums(&mut c);
            let a = measure(&mut c, &recall_sql, "SET agent_memory.decay_scope = 'all'", &queries, reps);
            // Background work on this 2-core machine moves the figures: say what ran beside (A).
            let vacuums = [vacuums_before, autovacuums(&mut c)].concat();
            if !vacuums.is_empty() {
                notes.push(format!("  autovacuum ran beside (A) ({name}): {}", vacuums.join("; ")));
            }
            let path: String = c
                .query_one(
                    &format!(
                        "SELECT min(path) FROM agent_memory.memory_recall($1, $2::vector, {K}, model => '{}', touch => false)",
                        set.model
                    ),
                    &[&queries[0].0, &Vector::from(queries[0].1.clone())],
                )
                .unwrap()
                .get(0);
            rows.push(row(&name, &format!("(A) memory_recall ({path} path), decay_scope = 'all'"), &a));
            let hybrid_sql = format!(
                "SELECT id FROM agent_memory.memory_recall($1, $2::vector, {K}, model => '{}', touch => false, \
                   query_text => 'When did I ask about the refund for the parcel order?')",
                set.model
            );
            // Vector-only and hybrid in turn, query by query: their ratio is a target.
            let mut paired = measure_alternated(&mut c, &[&recall_sql, &hybrid_sql], &queries, reps);
            let h = paired.pop().unwrap();
            let a_default = paired.pop().unwrap();
            rows.push(row(&name, "(A) memory_recall, default ranking (competing decay)", &a_default));
            let a_rows = measure(&mut c, &recall_sql, "SET agent_memory.packed_recall = off", &queries, reps);
            rows.push(row(&name, "(A) memory_recall, default ranking, packs off (every candidate's row)", &a_rows));
            let none_sql = format!(
                "SELECT id FROM agent_memory.memory_recall($1, $2::vector, {K}, model => '{}', touch => false, decay => 'none')",
                set.model
            );
            let a_none = measure(&mut c, &none_sql, "SELECT 1", &queries, reps);
            rows.push(row(&name, "(A) memory_recall, decay => 'none' (similarity × importance)", &a_none));
            rows.push(row(&name, "(H) memory_recall hybrid (query_text): vector + BM25 fused", &h));
            let h_rows = measure(&mut c, &hybrid_sql, "SET agent_memory.packed_recall = off", &queries, reps);
            rows.push(row(&name, "(H) memory_recall hybrid, packs off (every candidate's row)", &h_rows));
            // By words alone (the query vector is only a parameter the statement shares).
            let keyword_sql = format!(
                "SELECT id FROM agent_memory.memory_recall($1, NULL::vector, {K}, model => '{}', touch => false, \
                   query_text => 'When did I ask about the refund for the parcel order?') WHERE $2::vector IS NOT NULL",
                set.model
            );
            let kw = measure(&mut c, &keyword_sql, "SELECT 1", &queries, reps);
            rows.push(row(&name, "(K) memory_recall by words alone (query_text, NULL query)", &kw));
            notes.push(format!(
                "  hybrid / vector-only p50 ({name}): {:.2}× (packs off: {:.2}×)",
                percentile_ms(&h.lat, 0.5) / percentile_ms(&a_default.lat, 0.5),
                percentile_ms(&h_rows.lat, 0.5) / percentile_ms(&a_rows.lat, 0.5)
            ));
            if !set.db.contains("large") {
                // memory_context: a 50-turn session per measured user, a 1,000-token budget.
                let measured: Vec<String> = users.clone();
                c.execute(
                    "INSERT INTO agent_memory.turns (user_id, session_id, role, content) \
                     SELECT u, 'bench', CASE WHEN i % 2 = 0 THEN 'assistant' ELSE 'user' END, \
                            'Turn ' || i || ': about the refund for the parcel order and the delivery address' \
                       FROM unnest($1::text[]) u, generate_series(1, 50) i",
                    &[&measured],
                )
                .unwrap();
                let ctx_sql = format!(
                    "SELECT memory_id FROM agent_memory.memory_context($1, 'bench', $2::vector, \
                       'When did I ask about the refund for the parcel order?', 1000, model => '{}', touch => false) \
                      WHERE memory_id IS NOT NULL",
                    set.model
                );
                let x = measure(&mut c, &ctx_sql, "SELECT 1", &queries, reps);
                rows.push(row(&name, "(X) memory_context: 1,000 tokens, 50-turn session, hybrid long-term", &x));
            }
            let reference = format!(
                "WITH c AS MATERIALIZED (SELECT id, emb, importance, last_hit_at, kind FROM agent_memory.memories \
                   WHERE user_id = $1 AND active AND embedding_model = '{}') \
                 SELECT id FROM c ORDER BY (1 - (emb <=> $2::vector)) \
                   * (CASE WHEN kind = 'episodic' THEN 0.4 ELSE 0 END + (1 - CASE WHEN kind = 'episodic' THEN 0.4 ELSE 0 END) \
                      * power(0.995::float8, extract(epoch FROM now() - last_hit_at)::float8 / 3600)) \
                   * (0.8 + 0.4 * importance) DESC, id DESC LIMIT {K}",
                set.model
            );
            let b = measure(&mut c, &reference, "SELECT 1", &queries, reps);
            rows.push(row(&name, "(B) reference SQL (materialised CTE)", &b));
            // The same query on a plain pgvector table with the type's default storage, as an
            // application would keep memories without this extension (same rows, same order).
            let b0 = if set.db.contains("400k") {
                c.batch_execute(&format!(
                    "CREATE TABLE bench_plain (id bigint PRIMARY KEY, user_id text NOT NULL, emb vector({d}) NOT NULL,                        importance real NOT NULL, last_hit_at timestamptz NOT NULL, kind text NOT NULL);
                     INSERT INTO bench_plain SELECT id, user_id, emb, importance, last_hit_at, kind FROM agent_memory.memories ORDER BY id;
                     CREATE INDEX ON bench_plain (user_id);",
                    d = set.dims
                ))
                .unwrap();
                c.batch_execute("VACUUM ANALYZE bench_plain").unwrap();
                let plain_reference = reference
                    .replace("agent_memory.memories", "bench_plain")
                    .replace(&format!(" AND embedding_model = '{}'", set.model), "")
                    .replace("WHERE user_id = $1 AND active", "WHERE user_id = $1");
                let b0 = measure(&mut c, &plain_reference, "SELECT 1", &queries, reps);
                rows.push(row(&name, "(B0) reference SQL on a plain pgvector table (default storage)", &b0));
                Some(b0)
            } else {
                None
            };
            if set.db == "am_bench_recall_1m" {
                for clients in [1, 2] {
                    let qa = throughput(set.db, &recall_sql, &queries, clients, 3);
                    let qb = throughput(set.db, &reference, &queries, clients, 3);
                    tput.push(vec![name.clone(), clients.to_string(), format!("{qa:.0}"), format!("{qb:.0}")]);
                }
            }
            if set.hnsw {
                let plain = format!(
                    "SELECT id FROM agent_memory.memories WHERE user_id = $1 AND active AND embedding_model = '{}' \
                     ORDER BY emb::vector({}) <=> $2::vector({}) LIMIT {K}",
                    set.model, set.dims, set.dims
                );
                let off = measure(&mut c, &plain, "SET hnsw.iterative_scan = off", &queries, reps);
                rows.push(row(&name, "(C) plain HNSW, iterative scan off", &off));
                let on = measure(&mut c, &plain, "SET hnsw.iterative_scan = relaxed_order", &queries, reps);
                rows.push(row(&name, "(C) plain HNSW, iterative scan on", &on));
            }
            let d = measure(
                &mut c,
                &format!(
                    "SELECT id FROM agent_memory.memories WHERE user_id = $1 AND active AND embedding_model = '{}' \
                     ORDER BY emb <=> $2::vector LIMIT {K}",
                    set.model
                ),
                "SET enable_indexscan = on",
                &queries,
                reps,
            );
            rows.push(row(&name, "(D') exact by similarity only, SQL", &d));
            let plain_p50 = percentile_ms(&d.lat, 0.5);
            notes.push(format!(
                "  p50 against the plain ORDER BY (D') ({name}): default {:.2}×, packs off {:.2}×, decay 'none' {:.2}×, reference SQL (B) {:.2}×",
                percentile_ms(&a_default.lat, 0.5) / plain_p50,
                percentile_ms(&a_rows.lat, 0.5) / plain_p50,
                percentile_ms(&a_none.lat, 0.5) / plain_p50,
                percentile_ms(&b.lat, 0.5) / plain_p50
            ));
            if let Some(b0) = &b0 {
                notes.push(format!(
                    "  the reference SQL on a plain pgvector table (B0) against memory_recall ({name}): {:.1}× the default ranking's p50, {:.1}× decay_scope 'all' (the same score)",
                    percentile_ms(&b0.lat, 0.5) / percentile_ms(&a_default.lat, 0.5),
                    percentile_ms(&b0.lat, 0.5) / percentile_ms(&a.lat, 0.5)
                ));
            }
            // Traffic since the last vacuum and pack: each measured user writes a twentieth of its
            // memories again (new rows: in no pack, on pages not yet visible to all), below the
            // sixteenth at which the worker repacks. Recall reads those rows exactly.
            let fresh: i64 = c
                .query_one(
                    "WITH w AS (INSERT INTO agent_memory.memories (user_id, kind, content, emb, embedding_model, importance) \
                       SELECT m.user_id, m.kind, m.content || ' (again)', m.emb, m.embedding_model, m.importance \
                         FROM agent_memory.memories m \
                        WHERE m.user_id = ANY ($1) AND m.embedding_model = $2 AND m.active AND hashint8(m.id) % 20 = 0 RETURNING 1) \
                     SELECT count(*) FROM w",
                    &[&users, &set.model],
                )
                .unwrap()
                .get(0);
            c.batch_execute("ANALYZE agent_memory.memories").unwrap();
            let queries: Vec<(String, Vec<f32>, Vec<i64>)> = queries
                .into_iter()
                .map(|(u, q, _)| {
                    let (truth, _) = ground_truth(&mut c, &u, set.model, &q);
                    (u, q, truth)
                })
                .collect();
            let mut fresh_m = measure_alternated(&mut c, &[&recall_sql, &hybrid_sql], &queries, reps);
            let h_fresh = fresh_m.pop().unwrap();
            let a_fresh = fresh_m.pop().unwrap();
            rows.push(row(&name, "(A) default ranking, a twentieth written since the last vacuum and pack", &a_fresh));
            rows.push(row(&name, "(H) hybrid, a twentieth written since the last vacuum and pack", &h_fresh));
            notes.push(format!(
                "  with {fresh} memories written since the last vacuum and pack ({name}): hybrid / vector-only p50 {:.2}×",
                percentile_ms(&h_fresh.lat, 0.5) / percentile_ms(&a_fresh.lat, 0.5)
            ));
        }
        drop(c);
        // BENCH_KEEP=1 keeps the data set (to profile it afterwards).
        if std::env::var("BENCH_KEEP").is_err() {
            let mut admin = connect("postgres");
            admin.batch_execute(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", set.db)).unwrap();
        }
    }
    let mut out = String::from("## Recall\n\n");
    out += &notes.join("\n");
    out += &format!("\n\nk = {K}; recall@k against (D), the exact ranking by similarity × decay × importance computed in the client. One connection, prepared statements, latencies from the client; (A) default ranking and (H) hybrid are measured in turn, query by query, the first of the two alternating, so their ratio holds when the machine's background work moves both.\n\n");
    out += &table(&["data set", "method", "p50 (ms)", "p95 (ms)", "rows returned", "recall@k"], &rows);
    if !tput.is_empty() {
        out += "\nThroughput, each client on its own connection running every question 3 times:\n\n";
        out += &table(&["data set", "clients", "(A) memory_recall, queries/s", "(B) reference SQL, queries/s"], &tput);
    }
    let path = std::env::var("BENCH_OUT").unwrap_or_else(|_| "target/agent_memory/bench-recall.md".into());
    std::fs::write(&path, out).unwrap();
    println!("\nwritten to {path}");
}
