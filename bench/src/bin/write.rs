//! Write-path benchmark: on 50,000 existing memories at 384 dimensions, single-fact reconcile
//! latency, batch reconcile throughput, and COPY against row-by-row INSERT, in one run.
//! Run through `bench/run.sh write`, which starts the server.

use std::time::{Duration, Instant};

use agent_memory_bench::{centers, clustered, percentile_ms, table};
use agent_memory_tests::{fresh_db, Rng};
use pgvector::Vector;
use postgres::binary_copy::BinaryCopyInWriter;
use postgres::types::Type;

const DIMS: usize = 384;
const USERS: usize = 50;
const PER_USER: usize = 1000;
const FACTS_PER_USER: usize = 200;

struct Row {
    user: String,
    subject: Option<String>,
    predicate: Option<String>,
    object: Option<String>,
    content: String,
    emb: Vec<f32>,
}

fn rows(seed: u64, prefix: &str) -> Vec<Row> {
    let mut rng = Rng(seed);
    let cs = centers(&mut rng, 40, DIMS);
    let mut out = Vec::with_capacity(USERS * PER_USER);
    for u in 0..USERS {
        for i in 0..PER_USER {
            let structured = i < FACTS_PER_USER;
            out.push(Row {
                user: format!("{prefix}{u:03}"),
                subject: structured.then(|| "user".to_string()),
                predicate: structured.then(|| format!("p{i}")),
                object: structured.then(|| format!("value {}", rng.next_u64() % 5)),
                content: format!("memory {i} of user {u}: {}", rng.next_u64()),
                emb: clustered(&mut rng, &cs, 0.6),
            });
        }
    }
    out
}

fn main() {
    let data = rows(1, "user-");
    let mut out = String::from("## Write path\n\n");

    // COPY against row-by-row INSERT, each into a fresh database.
    let mut c = fresh_db("am_bench_write");
    let vtype: Type = c.prepare("SELECT $1::vector").unwrap().params()[0].clone();
    let t = Instant::now();
    {
        let sink = c
            .copy_in("COPY agent_memory.memories (user_id, subject, predicate, object, content, emb, embedding_model) FROM STDIN BINARY")
            .unwrap();
        let types = [Type::TEXT, Type::TEXT, Type::TEXT, Type::TEXT, Type::TEXT, vtype.clone(), Type::TEXT];
        let mut w = BinaryCopyInWriter::new(sink, &types);
        for r in &data {
            w.write(&[&r.user, &r.subject, &r.predicate, &r.object, &r.content, &Vector::from(r.emb.clone()), &"bench-384"]).unwrap();
        }
        w.finish().unwrap();
    }
    let copy = t.elapsed();
    c.batch_execute("ANALYZE agent_memory.memories").unwrap();

    let mut ins = fresh_db("am_bench_insert");
    let stmt = ins
        .prepare(
            "INSERT INTO agent_memory.memories (user_id, subject, predicate, object, content, emb, embedding_model) \
             VALUES ($1, $2, $3, $4, $5, $6::vector, 'bench-384')",
        )
        .unwrap();
    let t = Instant::now();
    for r in &data {
        ins.execute(&stmt, &[&r.user, &r.subject, &r.predicate, &r.object, &r.content, &Vector::from(r.emb.clone())]).unwrap();
    }
    let insert = t.elapsed();
    let n = data.len() as f64;
    out += &format!("Loading {} memories of {DIMS} dimensions (normalisation and defaults applied by the write trigger):\n\n", data.len());
    out += &table(
        &["path", "time (s)", "rows/s"],
        &[
            vec!["COPY ... FROM STDIN BINARY".into(), format!("{:.2}", copy.as_secs_f64()), format!("{:.0}", n / copy.as_secs_f64())],
            vec![
                "row-by-row INSERT (prepared, autocommit)".into(),
                format!("{:.2}", insert.as_secs_f64()),
                format!("{:.0}", n / insert.as_secs_f64()),
            ],
        ],
    );
    out += &format!("\nCOPY is {:.1}× faster.\n\n", insert.as_secs_f64() / copy.as_secs_f64());
    drop(ins);

    // Single-fact reconcile: a mix of repeated facts (NONE), changed objects (UPDATE) and new
    // keys (ADD, which also scans the user's memories for a paraphrase).
    let mut rng = Rng(7);
    let cs = centers(&mut Rng(1), 40, DIMS);
    let stmt =
        c.prepare("SELECT action FROM agent_memory.memory_reconcile($1, 'user', $2, $3, $4, $5::vector, model => 'bench-384')").unwrap();
    let calls = 2000;
    let mut lat: Vec<Duration> = Vec::with_capacity(calls);
    let mut actions = std::collections::BTreeMap::<String, usize>::new();
    for i in 0..calls {
        let user = format!("user-{:03}", rng.next_u64() % USERS as u64);
        let p = rng.next_u64() % (FACTS_PER_USER as u64 * 3 / 2);
        let object = format!("value {}", rng.next_u64() % 5);
        let emb = Vector::from(clustered(&mut rng, &cs, 0.6));
        let t = Instant::now();
        let a: String =
            c.query_one(&stmt, &[&user, &format!("p{p}"), &object, &format!("fact {i}: p{p} is {object}"), &emb]).unwrap().get(0);
        lat.push(t.elapsed());
        *actions.entry(a).or_default() += 1;
    }
    lat.sort();
    out += &format!("Single-fact `memory_reconcile`, {calls} calls, one connection, each its own transaction:\n\n");
    out += &table(
        &["p50 (ms)", "p95 (ms)", "p99 (ms)", "actions"],
        &[vec![
            format!("{:.2}", percentile_ms(&lat, 0.50)),
            format!("{:.2}", percentile_ms(&lat, 0.95)),
            format!("{:.2}", percentile_ms(&lat, 0.99)),
            actions.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", "),
        ]],
    );

    // Batch reconcile: 20 batches of 500 facts, one user each, on one connection.
    let batches = 20;
    let per_batch = 500;
    let mut total = Duration::ZERO;
    let mut facts_done = 0;
    for b in 0..batches {
        let user = format!("user-{:03}", b % USERS);
        let facts: Vec<serde_json::Value> = (0..per_batch)
            .map(|i| {
                let p = rng.next_u64() % (FACTS_PER_USER as u64 * 3 / 2);
                let object = format!("value {}", rng.next_u64() % 5);
                serde_json::json!({
                    "subject": "user",
                    "predicate": format!("p{p}"),
                    "object": object,
                    "content": format!("batch {b} fact {i}: p{p} is {object}"),
                    "emb": clustered(&mut rng, &cs, 0.6),
                })
            })
            .collect();
        let json = serde_json::Value::Array(facts).to_string();
        let t = Instant::now();
        let rows = c
            .query("SELECT count(*) FROM agent_memory.memory_reconcile_batch($1, $2::text, model => 'bench-384')", &[&user, &json])
            .unwrap();
        total += t.elapsed();
        let n: i64 = rows[0].get(0);
        facts_done += n as usize;
    }
    out += &format!("\nBatch `memory_reconcile_batch`, {batches} batches of {per_batch} facts (JSON text with {DIMS}-dimension embeddings), one connection:\n\n");
    out += &table(
        &["facts", "time (s)", "facts/s", "target"],
        &[vec![
            facts_done.to_string(),
            format!("{:.2}", total.as_secs_f64()),
            format!("{:.0}", facts_done as f64 / total.as_secs_f64()),
            "≥ 5,000".into(),
        ]],
    );
    let path = std::env::var("BENCH_OUT").unwrap_or_else(|_| "target/agent_memory/bench-write.md".into());
    std::fs::write(&path, out).unwrap();
    println!("\nwritten to {path}");
}
