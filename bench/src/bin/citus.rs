//! Recall on a Citus cluster (a coordinator and two workers on this machine, started by
//! `tests/citus.sh up`) beside one server: the same users and memories (BENCH_USERS users ×
//! 2,000 memories of 384 dimensions, default 40, written through `memory_reconcile_batch` and
//! packed) on both.
//!
//! * Latency of one client: `memory_recall(user, q, 10)` (vector, then hybrid) called on the
//!   coordinator (delegated to the worker that holds the user), on that worker directly, and on
//!   the single server: p50 and p99 of 400 calls each.
//! * The cost of delegation per call: the coordinator's p50 less the worker's.
//! * Throughput of 8 clients for BENCH_SECONDS (default 8), hybrid recall of every user: through
//!   the coordinator with the users spread over both workers, then after `citus_drain_node`
//!   moved every shard to one worker (one worker serving), and on the single server.
//!
//! Conditions: every node is a PostgreSQL server on this machine, so they share its cores: the
//! throughput of two workers against one shows the delegation's overhead and how the work
//! spreads, not what two machines give. Run through `bench/run.sh citus`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_memory_bench::{centers, clustered, percentile_ms, table};
use agent_memory_tests::Rng;
use pgvector::Vector;
use postgres::{Client, NoTls};

const DIMS: usize = 384;
const PER_USER: usize = 2000;
const MODEL: &str = "m384";
const CLIENTS: usize = 8;

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set: run through bench/run.sh citus"))
}

fn users() -> usize {
    std::env::var("BENCH_USERS").ok().and_then(|v| v.parse().ok()).unwrap_or(40)
}

fn seconds() -> Duration {
    Duration::from_secs_f64(std::env::var("BENCH_SECONDS").ok().and_then(|v| v.parse().ok()).unwrap_or(8.0))
}

/// Connection strings: the single server, and the cluster's nodes (0 the coordinator).
fn single() -> String {
    format!("host={} port={} user=postgres dbname=am_bench_citus_single", env("AGENT_MEMORY_TEST_HOST"), env("AGENT_MEMORY_TEST_PORT"))
}

fn node(n: u16) -> String {
    let port: u16 = env("AGENT_MEMORY_CITUS_PORT").parse().unwrap();
    format!("host={} port={} user=postgres dbname={}", env("AGENT_MEMORY_CITUS_HOST"), port + n, env("AGENT_MEMORY_CITUS_DB"))
}

fn connect(dsn: &str) -> Client {
    Client::connect(dsn, NoTls).unwrap_or_else(|e| panic!("{dsn}: {e}"))
}

const WORDS: [&str; 24] = [
    "garden", "tomato", "invoice", "refund", "lisbon", "guitar", "marathon", "sister", "dentist", "python", "coffee", "winter", "flight",
    "budget", "printer", "puppy", "concert", "kitchen", "lawyer", "bicycle", "novel", "wedding", "museum", "recipe",
];

fn load(c: &mut Client, users: usize) {
    let mut rng = Rng(42);
    let cs = centers(&mut rng, 32, DIMS);
    for u in 0..users {
        let user = format!("bench-{u:03}");
        c.execute("SELECT count(*) FROM agent_memory.memory_erase($1)", &[&user]).unwrap();
        for chunk in 0..PER_USER / 500 {
            let facts: Vec<serde_json::Value> = (0..500)
                .map(|i| {
                    let w: Vec<&str> = (0..4).map(|_| WORDS[(rng.next_u64() % WORDS.len() as u64) as usize]).collect();
                    serde_json::json!({"content": format!("memory {} of {user}: {}", chunk * 500 + i, w.join(" ")), "emb": clustered(&mut rng, &cs, 0.6)})
                })
                .collect();
            c.query(
                "SELECT count(*) FROM agent_memory.memory_reconcile_batch($1, $2::text::jsonb, $3)",
                &[&user, &serde_json::Value::from(facts).to_string(), &MODEL],
            )
            .unwrap();
        }
        c.query("SELECT agent_memory.memory_pack($1, $2)", &[&user, &MODEL]).unwrap();
    }
}

const VECTOR: &str = "SELECT id FROM agent_memory.memory_recall($1, $2::vector, 10, model => 'm384', touch => false)";
const HYBRID: &str = "SELECT id FROM agent_memory.memory_recall($1, $2::vector, 10, model => 'm384', query_text => $3, touch => false)";

fn queries(n: usize, seed: u64) -> Vec<(Vector, String)> {
    let mut rng = Rng(seed);
    let cs = centers(&mut Rng(42), 32, DIMS);
    (0..n)
        .map(|_| {
            let w = format!("{} {}", WORDS[(rng.next_u64() % 24) as usize], WORDS[(rng.next_u64() % 24) as usize]);
            (Vector::from(clustered(&mut rng, &cs, 0.6)), w)
        })
        .collect()
}

/// p50 and p99 (ms) of `calls` calls of `sql` on `dsn`, over `users` in turn.
fn latency(dsn: &str, sql: &str, users: &[String], calls: usize) -> (f64, f64) {
    let mut c = connect(dsn);
    let qs = queries(calls, 9);
    let stmt = c.prepare(sql).unwrap();
    let hybrid = sql.contains("query_text");
    for (i, (q, _)) in qs.iter().take(20).enumerate() {
        c.query(&stmt, &[&users[i % users.len()], q]).ok();
    }
    let mut times = Vec::with_capacity(calls);
    for (i, (q, w)) in qs.iter().enumerate() {
        let user = &users[i % users.len()];
        let t = Instant::now();
        let rows = if hybrid { c.query(&stmt, &[user, q, w]) } else { c.query(&stmt, &[user, q]) }.unwrap();
        times.push(t.elapsed());
        assert_eq!(rows.len(), 10, "recall of {user} on {dsn}");
    }
    times.sort();
    (percentile_ms(&times, 0.5), percentile_ms(&times, 0.99))
}

/// Calls per second of `CLIENTS` connections to `dsn` recalling `users` (hybrid) for `secs`.
fn throughput(dsn: &str, users: &[String], secs: Duration) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..CLIENTS)
        .map(|t| {
            let (dsn, users, stop, done) = (dsn.to_string(), users.to_vec(), stop.clone(), done.clone());
            std::thread::spawn(move || {
                let mut c = connect(&dsn);
                let stmt = c.prepare(HYBRID).unwrap();
                let qs = queries(200, 100 + t as u64);
                let mut i = t;
                while !stop.load(Ordering::Relaxed) {
                    let (q, w) = &qs[i % qs.len()];
                    c.query(&stmt, &[&users[i % users.len()], q, w]).unwrap();
                    done.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(1));
    let start = (done.load(Ordering::Relaxed), Instant::now());
    std::thread::sleep(secs);
    let n = done.load(Ordering::Relaxed) - start.0;
    let rate = n as f64 / start.1.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    rate
}

fn main() {
    let n = users();
    let mut admin = connect(&single().replace("am_bench_citus_single", "postgres"));
    admin.batch_execute("DROP DATABASE IF EXISTS am_bench_citus_single WITH (FORCE)").unwrap();
    admin.batch_execute("CREATE DATABASE am_bench_citus_single").unwrap();
    let mut one = connect(&single());
    one.batch_execute(
        "SET client_min_messages = warning; CREATE EXTENSION agent_memory CASCADE; SELECT agent_memory.register_model('m384', 384)",
    )
    .unwrap();
    let mut coordinator = connect(&node(0));
    // The model is registered through the coordinator (a copy on every node) before the writes.
    coordinator
        .batch_execute("SET client_min_messages = warning; SELECT count(*) FROM agent_memory.distribute(); SELECT agent_memory.register_model('m384', 384)")
        .unwrap();
    let t = Instant::now();
    load(&mut coordinator, n);
    println!("loaded {n} users × {PER_USER} memories through the coordinator in {:.0} s", t.elapsed().as_secs_f64());
    load(&mut one, n);
    for c in [&mut one, &mut coordinator] {
        c.batch_execute("VACUUM ANALYZE agent_memory.memories").unwrap();
    }
    let names: Vec<String> = (0..n).map(|u| format!("bench-{u:03}")).collect();
    let port: i32 = env("AGENT_MEMORY_CITUS_PORT").parse().unwrap();
    let holder = |c: &mut Client, user: &str| -> u16 {
        let p: i32 = c
            .query_one(
                "SELECT n.nodeport FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)
                  WHERE p.shardid = get_shard_id_for_distribution_column('agent_memory.memories', $1::text)",
                &[&user],
            )
            .unwrap()
            .get(0);
        (p - port) as u16
    };
    let on: Vec<Vec<String>> = (1..=2).map(|w| names.iter().filter(|u| holder(&mut coordinator, u) == w).cloned().collect()).collect();
    println!("users on worker 1: {}, on worker 2: {}", on[0].len(), on[1].len());
    let busier = if on[0].len() >= on[1].len() { 1 } else { 2 };
    let local = &on[busier as usize - 1];

    let mut rows = Vec::new();
    let mut delegation = Vec::new();
    for (what, sql) in [("vector", VECTOR), ("hybrid", HYBRID)] {
        let (c50, c99) = latency(&node(0), sql, local, 400);
        let (w50, w99) = latency(&node(busier), sql, local, 400);
        let (s50, s99) = latency(&single(), sql, local, 400);
        delegation.push(format!("{what} {:.2} ms", c50 - w50));
        rows.push(vec![
            format!("`memory_recall(user, q, 10)` {what}"),
            format!("{c50:.2} / {c99:.2}"),
            format!("{w50:.2} / {w99:.2}"),
            format!("{s50:.2} / {s99:.2}"),
        ]);
    }
    let mut out = format!(
        "{n} users × {PER_USER} memories of {DIMS} dimensions, packed; users on worker 1: {}, on worker 2: {}\n\n",
        on[0].len(),
        on[1].len()
    );
    out += &format!("One client, recall latency p50 / p99 (ms), 400 calls over the users of worker {busier}:\n\n");
    out += &table(&["call", "through the coordinator (delegated)", "on the worker directly", "one server (baseline)"], &rows);
    out += &format!("\nThe cost of delegation per call (coordinator p50 less the worker's): {}\n", delegation.join(", "));

    let secs = seconds();
    let both = throughput(&node(0), &names, secs);
    let alone = throughput(&single(), &names, secs);
    // Every shard moved to one worker: the same calls, one worker serving.
    let other = 3 - busier;
    let t = Instant::now();
    coordinator.query("SELECT citus_drain_node('localhost', $1)", &[&(port + other as i32)]).unwrap();
    let drained = t.elapsed().as_secs_f64();
    let one_worker = throughput(&node(0), &names, secs);
    out += &format!("\n{CLIENTS} clients, hybrid recall of every user, calls per second ({} s each):\n\n", secs.as_secs_f64());
    out += &table(
        &["cluster", "calls/s"],
        &[
            vec!["two workers, through the coordinator".into(), format!("{both:.0}")],
            vec![format!("one worker (worker {other} drained in {drained:.0} s), through the coordinator"), format!("{one_worker:.0}")],
            vec!["one server (baseline)".into(), format!("{alone:.0}")],
        ],
    );
    println!("{out}");
    if let Ok(path) = std::env::var("BENCH_OUT") {
        std::fs::write(path, out).unwrap();
    }
}
